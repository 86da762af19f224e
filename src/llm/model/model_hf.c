/* Loading a Hugging Face folder (config.json + safetensors shards + tokenizer.json) into
 * the model: HF tensor names; the reader lives in llm/hf/. */
#include "core/check.h"
#include "llm/model/model.h"

ak_status ak__model_load_hf(ak_llm_model *m, const char *dir);
void ak__model_close_hf(ak_llm_model *m);

ak_status ak__model_load_hf(ak_llm_model *m, const char *dir) {
    (void)m;
    return AK_FAIL(AK_ERR_UNSUPPORTED, "model: '%s' is a folder; Hugging Face folders are not "
                   "readable yet", dir);
}

void ak__model_close_hf(ak_llm_model *m) { (void)m; }
