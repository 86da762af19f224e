/* Fuzz: a Hugging Face model folder's config.json (and tokenizer_config.json, for the
 * chat template), read as the model loader does: ak__hf_open then the hyper-parameters
 * (or the encoder check for BERT-style configs). The input is config.json, optionally
 * followed by a NUL and tokenizer_config.json; the folder's weights are a fixed small
 * model.safetensors. Any input is accepted or refused with a message naming the key,
 * never a crash; accepted hyper-parameters are inside the ranges the model builder
 * relies on (positive shapes, heads dividing the width). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_file.h"
#include "llm/hf/hf.h"
#include "llm/model/encoder.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* {"model.embed_tokens.weight": F32 [4, 2]} and 32 bytes of data */
static void write_weights(void) {
    static const char header[] =
        "{\"model.embed_tokens.weight\":{\"dtype\":\"F32\",\"shape\":[4,2],\"data_offsets\":[0,32]}}";
    uint8_t file[8 + sizeof header - 1 + 32] = {0};
    uint64_t n = sizeof header - 1;
    for (int i = 0; i < 8; i++) file[i] = (uint8_t)(n >> (8 * i));
    memcpy(file + 8, header, n);
    fuzz_write_file("model.safetensors", file, sizeof file);
}

static void check_hparams(const ak__llm_hparams *hp) {
    if (hp->dim <= 0 || hp->n_layers <= 0 || hp->n_heads <= 0 || hp->n_kv_heads <= 0 ||
        hp->head_dim <= 0 || hp->n_heads % hp->n_kv_heads || hp->n_vocab <= 0 ||
        !memchr(hp->arch, '\0', sizeof hp->arch))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int weights_written;
    if (!weights_written) write_weights(), weights_written = 1;
    const uint8_t *nul = memchr(data, '\0', size);
    size_t config_len = nul ? (size_t)(nul - data) : size;
    fuzz_write_file("config.json", data, config_len);
    if (nul) fuzz_write_file("tokenizer_config.json", nul + 1, size - config_len - 1);
    else fuzz_remove_file("tokenizer_config.json");
    ak__hf *h;
    if (ak__hf_open(fuzz_dir(), &h) != AK_OK) {
        fuzz_refused("folder");
        return 0;
    }
    if (!ak__encoder_hf_arch(h)) {
        ak__llm_hparams hp;
        ak__hp_init(&hp);
        if (ak__hf_hparams(h, &hp) == AK_OK) check_hparams(&hp), fuzz_accepted("hparams");
        else fuzz_refused("hparams");
    }
    const char *tmpl;
    if (ak__hf_chat_template(h, &tmpl) != AK_OK) abort();
    ak__hf_close(h);
    return 0;
}
