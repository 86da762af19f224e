/* Loading a Hugging Face folder (config.json + safetensors shards + tokenizer.json) into
 * the model: the reader is llm/hf/; this file maps HF tensor names onto the model's
 * roles. HF checkpoints keep q/k rows in rotate-half order, so they run with NeoX RoPE
 * (hp.rope_neox = 1) and no permutation is needed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "llm/base/tensor_names.h"
#include "llm/hf/hf.h"
#include "llm/model/encoder.h"
#include "llm/model/model.h"

ak_status ak__model_load_hf(ak_llm_model *m, const char *dir);
void ak__model_close_hf(ak_llm_model *m);

static ak_status hf_lookup(void *ctx, const char *name, ak__tensor_view *out) {
    return ak__hf_tensor(ctx, name, out);
}

ak_status ak__model_load_hf(ak_llm_model *m, const char *dir) {
    ak__hf *h;
    AK_CHECK(ak__hf_open(dir, &h));
    m->hf = h;
    int encoder = ak__encoder_hf_arch(h); /* embeddings: BertModel (encoder_load.c) */
    if (encoder) AK_CHECK(ak__encoder_load_hf(m));
    else AK_CHECK(ak__hf_hparams(h, &m->hp));
    AK_CHECK(ak__hf_tokenizer(h, &m->tokenizer));
    ak_tokenizer_info ti;
    AK_CHECK(ak_tokenizer_get_info(m->tokenizer, &ti));
    if (ti.n_vocab > m->hp.n_vocab)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "model: tokenizer.json has %d tokens but the model "
                       "only %d", ti.n_vocab, m->hp.n_vocab);
    const char *tmpl = NULL;
    if (ak__hf_chat_template(h, &tmpl) == AK_OK && tmpl) {
        m->chat_template = strdup(tmpl);
        if (!m->chat_template) return AK_FAIL(AK_ERR_NO_MEMORY, "model: out of memory");
    }
    if (encoder) return AK_OK;
    /* Gemma names its norms differently (tensor_names.h) */
    int mixtral = strcmp(m->hp.arch, "mixtral") == 0;
    ak__tensor_source src = {h, hf_lookup,
                             m->hp.post_norms  ? ak__tensor_name_hf_gemma
                             : mixtral         ? ak__tensor_name_hf_mixtral_layer
                             : m->hp.plain_mlp ? ak__tensor_name_hf_starcoder2
                                               : ak__tensor_name_hf,
                             mixtral ? ak__tensor_name_hf_mixtral : ak__tensor_name_hf_qwen_moe};
    return ak__model_bind(m, &src);
}

void ak__model_close_hf(ak_llm_model *m) {
    if (m->hf) ak__hf_close(m->hf);
    m->hf = NULL;
}
