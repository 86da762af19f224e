/* Fuzz: a GGUF model file bound as the engine binds it. The input is the whole file
 * (seeds: tiny llama/qwen2 models from scripts/llm-make-model, so mutations hit the
 * metadata, tensor infos and weights of a file that otherwise loads); ak_llm_model_load
 * reads the hyper-parameters, builds the tokenizer and binds every tensor to its role.
 * It must load or refuse with a message, never crash or read past the file; a model that
 * loads must report sane facts and, when small, compute logits for a short prompt. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "accelkit/llm.h"
#include "fuzz_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* One forward pass over two tokens (bounded: small models only, so an iteration stays
 * fast whatever shape the fuzzer writes into the metadata). */
static void run_logits(ak_llm_model *m, const ak_llm_model_info *info) {
    if (info->embedding_only || info->n_params > 100000 || info->n_vocab > 4096 ||
        info->dim > 256 || info->n_layers > 4)
        return;
    int32_t ids[2] = {0, info->n_vocab - 1};
    float *logits = malloc(2 * (size_t)info->n_vocab * sizeof *logits);
    if (!logits) return;
    if (ak_llm_model_logits(m, ids, 2, logits, 1) != AK_OK) fuzz_refused("logits");
    else fuzz_accepted("logits");
    free(logits);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_write_file("model.gguf", data, size);
    ak_llm_load_options o;
    ak_llm_load_options_default(&o);
    o.mmap = 1; /* no huge-page copy per iteration */
    ak_llm_model *m = NULL;
    if (ak_llm_model_load_with(path, &o, &m) != AK_OK) {
        if (m) abort();
        fuzz_refused("model");
        return 0;
    }
    fuzz_accepted("model");
    ak_llm_model_info info;
    const ak_tokenizer *tok;
    if (ak_llm_model_get_info(m, &info) != AK_OK || ak_llm_model_tokenizer(m, &tok) != AK_OK ||
        info.n_vocab <= 0 || info.dim <= 0 || info.n_layers <= 0)
        abort();
    run_logits(m, &info);
    ak_llm_model_free(m);
    return 0;
}
