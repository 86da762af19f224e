/* `ak convert SRC DST [--type f32|f16|bf16|q8_0|q4_0]`: a Hugging Face folder becomes a
 * GGUF file, a GGUF file becomes a Hugging Face folder (docs/convert.md). */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "accelkit/llm.h"
#include "cli/cli.h"

static const char k_usage[] =
    "usage: ak convert SRC DST [--type f32|f16|bf16|q8_0|q4_0]\n"
    "  SRC a Hugging Face folder (config.json, *.safetensors, tokenizer.json) -> DST.gguf\n"
    "  SRC a GGUF file -> DST folder (config.json, model.safetensors, tokenizer.json)\n"
    "  --type  storage type of the matrices (default: keep the source's; q8_0/q4_0 only\n"
    "          for GGUF output; quantized GGUF weights become f32 in a folder)\n";

static int usage_error(const char *what) {
    fprintf(stderr, "ak convert: %s\n%s", what, k_usage);
    return AK_EXIT_ERROR;
}

int ak_cli_convert(int argc, char **argv) {
    const char *pos[2] = {NULL, NULL}, *type = NULL;
    int n_pos = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(k_usage, stdout);
            return AK_EXIT_OK;
        }
        if (strcmp(argv[i], "--type") == 0 || strcmp(argv[i], "--outtype") == 0) {
            if (++i >= argc) return usage_error("--type needs a value");
            type = argv[i];
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "ak convert: unknown option '%s'\n", argv[i]);
            return AK_EXIT_ERROR;
        } else if (n_pos < 2) {
            pos[n_pos++] = argv[i];
        } else {
            return usage_error("too many arguments");
        }
    }
    if (n_pos != 2) return usage_error("SRC and DST are required");
    ak_status st = ak_llm_convert(pos[0], pos[1], type);
    if (st != AK_OK) return ak_cli_report("convert", st);
    struct stat sb;
    int to_folder = stat(pos[1], &sb) == 0 && S_ISDIR(sb.st_mode);
    printf("converted %s -> %s (%s, %s)\n", pos[0], pos[1],
           to_folder ? "Hugging Face folder" : "GGUF", type ? type : "types kept");
    return AK_EXIT_OK;
}
