/* `ak convert SRC DST [--type f32|f16|bf16|q8_0|q4_0|q4_k_m|...]`: a Hugging Face folder becomes a
 * GGUF file, a GGUF file becomes a Hugging Face folder (docs/convert.md). */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "accelkit/llm.h"
#include "cli/cli.h"
#include "cli/cli_opts.h"
#include "cli/cli_progress.h"

static const char *const type_names[] = {"auto",   "f32",    "f16",    "bf16",   "q8_0",
                                         "q4_0",   "q2_k",   "q3_k_s", "q3_k_m", "q3_k_l",
                                         "q4_k_s", "q4_k_m", "q5_k_s", "q5_k_m", "q6_k",
                                         "iq4_nl", "iq4_xs"};

int ak_cli_convert(int argc, char **argv) {
    int type = 0, first;
    const ak_opt opts[] = {
        {"type|outtype", 0, AK_OPT_ENUM, &type, .choices = "auto|f32|f16|bf16|q8_0|q4_0|q2_k|q3_k_s|q3_k_m|"
                                                          "q3_k_l|q4_k_s|q4_k_m|q5_k_s|q5_k_m|q6_k|iq4_nl|iq4_xs",
         .def = "auto", .help = "storage type of the matrices (auto: keep the source's; the quantized "
                                "types only for GGUF output, q2_k ... iq4_xs with llama.cpp's per-tensor "
                                "mix; quantized GGUF weights become f32 in a folder)"},
        AK_OPT_END};
    const ak_cli_cmd cmd = {
        .name = "convert", .opts = opts,
        .notes = "SRC a Hugging Face folder (config.json, *.safetensors, tokenizer.json) -> DST.gguf\n"
                 "SRC a GGUF file -> DST folder (config.json, model.safetensors, tokenizer.json)"};
    int rc = ak_cli_parse(&cmd, argc, argv, &first);
    if (rc != AK_CLI_CONTINUE) return rc;
    if (argc - first != 2)
        return ak_cli_usage_error(&cmd, argc - first < 2 ? "SRC and DST are required" : "too many arguments");
    const char *src = argv[first], *dst = argv[first + 1], *type_name = type > 0 ? type_names[type] : NULL;
    ak_cli_busy busy;
    ak_cli_busy_begin(&busy, type_name && type_name[0] == 'q' ? "ak convert: quantizing" : "ak convert: converting");
    ak_status st = ak_llm_convert(src, dst, type_name);
    ak_cli_busy_end(&busy);
    if (st != AK_OK) return ak_cli_report(src, st);
    struct stat sb;
    int to_folder = stat(dst, &sb) == 0 && S_ISDIR(sb.st_mode);
    printf("converted %s -> %s (%s, %s)\n", src, dst, to_folder ? "Hugging Face folder" : "GGUF",
           type_name ? type_name : "types kept");
    return AK_EXIT_OK;
}
