/* The subcommands of products left out of this build (AK_WITH_ONNX, AK_WITH_LLM,
 * AK_WITH_SERVER = OFF): each stays in `ak --help` and answers with the option that would
 * bring it back, instead of "unknown command". CMakeLists.txt leaves the real files of a
 * left-out product out of `ak`; these stand in for them. */
#include <stdio.h>

#include "cli/cli.h"

#if !AK_WITH_ONNX || !AK_WITH_LLM || !AK_WITH_SERVER
#include "cli/bench_llm_server.h"

/* "ak serve: this build has no LLM server (AK_WITH_SERVER=OFF)"; exit code 2. */
static int missing(const char *command, const char *product, const char *option) {
    fprintf(stderr, "ak %s: this build has no %s (%s=OFF); rebuild with -D%s=ON\n", command,
            product, option, option);
    return AK_EXIT_ERROR;
}

/* Defines int FN(int argc, char **argv) that reports the missing product. */
#define AK_MISSING(fn, command, product, option) \
    int fn(int argc, char **argv) {              \
        (void)argc, (void)argv;                  \
        return missing(command, product, option); \
    }
#endif

#if !AK_WITH_ONNX
AK_MISSING(ak_cli_info, "info", "ONNX engine", "AK_WITH_ONNX")
AK_MISSING(ak_cli_run, "run", "ONNX engine", "AK_WITH_ONNX")
AK_MISSING(ak_cli_compare, "compare", "ONNX engine", "AK_WITH_ONNX")
AK_MISSING(ak_cli_optimize, "optimize", "ONNX engine", "AK_WITH_ONNX")
AK_MISSING(ak_cli_quantize, "quantize", "ONNX engine", "AK_WITH_ONNX")
AK_MISSING(ak_bench_model, "bench MODEL.onnx", "ONNX engine", "AK_WITH_ONNX")
#endif

#if !AK_WITH_LLM
AK_MISSING(ak_cli_generate, "generate", "LLM engine", "AK_WITH_LLM")
AK_MISSING(ak_cli_tokenize, "tokenize", "LLM engine", "AK_WITH_LLM")
AK_MISSING(ak_cli_logits, "logits", "LLM engine", "AK_WITH_LLM")
AK_MISSING(ak_cli_convert, "convert", "LLM engine", "AK_WITH_LLM")
AK_MISSING(ak_bench_llm, "bench llm", "LLM engine", "AK_WITH_LLM")
#endif

#if !AK_WITH_SERVER
AK_MISSING(ak_cli_serve, "serve", "LLM server", "AK_WITH_SERVER")
#if AK_WITH_LLM
AK_MISSING(ak_bench_llm_server, "bench llm --url", "LLM server client", "AK_WITH_SERVER")
#endif
#endif

/* ISO C forbids an empty translation unit (a build with every product) */
typedef int ak_cli_missing_unused;
