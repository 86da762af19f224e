/* ak_llm_convert: a Hugging Face folder becomes a GGUF file (to_gguf.c), a GGUF file
 * becomes a Hugging Face folder (to_hf.c); the source decides the direction. */
#include <string.h>
#include <sys/stat.h>

#include "core/check.h"
#include "llm/convert/convert.h"

ak_status ak_llm_convert(const char *src, const char *dst, const char *out_type) {
    AK_ENSURE_INIT();
    AK_ARG_CHECK(src != NULL && dst != NULL && src[0] && dst[0], "src or dst is NULL or empty");
    int has_type;
    ak_wtype type = AK_WTYPE_F32;
    ak__cv_preset preset;
    AK_CHECK(ak__cv_parse_type(out_type, &has_type, &type, &preset));
    struct stat sb;
    if (stat(src, &sb) != 0) return AK_FAIL(AK_ERR_IO, "convert: cannot read '%s'", src);
    if (strcmp(src, dst) == 0) return AK_FAIL(AK_ERR_INVALID_ARG, "convert: source and destination are both '%s'", src);
    if (S_ISDIR(sb.st_mode)) return ak__convert_hf_to_gguf(src, dst, has_type, type, preset);
    if (preset != AK_CV_PLAIN)
        return AK_FAIL(AK_ERR_INVALID_ARG, "convert: '%s' is a GGUF preset; a Hugging Face "
                       "folder stores f32, f16 or bf16", out_type);
    return ak__convert_gguf_to_hf(src, dst, has_type, type);
}
