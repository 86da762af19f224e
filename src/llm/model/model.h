/* Internal layout of a loaded Llama-family model: matrices left in their file's storage
 * (mmap), small vectors as owned f32, RoPE frequencies precomputed. The forward pass
 * (model/forward.c) runs over a ragged batch described by ak__batch. */
#ifndef AK_LLM_MODEL_MODEL_H
#define AK_LLM_MODEL_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "accelkit/llm.h"
#include "llm/base/hparams.h"
#include "llm/base/tensor_names.h"

/* A weight matrix of `rows` outputs × `cols` inputs, each row in `type` storage. */
typedef struct ak__matrix {
    ak_wtype type;
    const void *data;
    int64_t rows, cols;
    size_t row_bytes;
} ak__matrix;

typedef struct ak__layer {
    ak__matrix wq, wk, wv, wo, w_gate, w_up, w_down;
    const float *attn_norm, *ffn_norm;
    const float *bq, *bk, *bv; /* NULL without QKV bias */
    const float *attn_post_norm, *ffn_post_norm; /* NULL without hp.post_norms */
    const float *q_norm, *k_norm;                /* [head_dim]; NULL without hp.qk_norm */
    /* mixture of experts (hp.n_experts > 0; w_gate/w_up/w_down unused): the router
     * [n_experts × dim], each expert's matrices (slices of GGUF's 3-D tensors or HF's own
     * matrices), the shared expert and its gate row (NULL without) */
    ak__matrix router, *exp_gate, *exp_up, *exp_down;
    ak__matrix sh_gate, sh_up, sh_down;
    const float *sh_gate_inp; /* [dim] */
    /* StarCoder2: LayerNorm biases, the attention output's and the MLP's biases */
    const float *attn_norm_b, *ffn_norm_b, *bo, *b_up, *b_down;
} ak__layer;

struct ak__hf;

struct ak_llm_model {
    ak__llm_hparams hp;
    ak_gguf *gguf;          /* the mapped file (GGUF models) */
    struct ak__hf *hf;      /* the mapped shards (Hugging Face models) */
    ak_tokenizer *tokenizer;
    const char *chat_template; /* NUL-terminated, owned, or NULL */
    ak__matrix tok_embd, output;
    const float *output_norm, *output_norm_b; /* the bias: LayerNorm models only */
    ak__layer *layers;
    float *inv_freq;        /* head_dim/2 rotary frequencies, scaling applied */
    float *inv_freq_local;  /* those of the sliding layers (hp.rope_theta_local), or NULL */
    float **owned;          /* f32 copies of vectors, freed with the model */
    size_t n_owned;
    uint64_t n_params, weight_bytes;
    /* embeddings: the BERT-family encoder (encoder.h; NULL for decoders, whose layers
     * are unused then) and its GGUF pooling_type */
    struct ak__encoder *enc;
    int32_t embed_pooling;
};

/* Where a tensor comes from while binding: GGUF or HF names. */
typedef ak_status (*ak__tensor_lookup_fn)(void *src, const char *name, ak__tensor_view *out);

/* Binds every tensor of the model (names produced by `name_of`), validating shapes and
 * types; fills m->layers, embeddings, norms, frequencies. */
typedef struct ak__tensor_source {
    void *ctx;
    ak__tensor_lookup_fn lookup;
    /* writes the file's name of (role, layer) into buf */
    void (*name_of)(ak__tensor_role role, int layer, char *buf, size_t cap);
    /* HF experts, one matrix each: the name of (role, layer, expert); NULL for GGUF,
     * whose experts are one 3-D tensor per role */
    void (*expert_name_of)(ak__tensor_role role, int layer, int expert, char *buf, size_t cap);
} ak__tensor_source;

ak_status ak__model_bind(ak_llm_model *m, const ak__tensor_source *src);
/* Computes m->inv_freq from hp (theta, linear/llama3 scaling) and optional per-frequency
 * divisors (GGUF rope_freqs). */
ak_status ak__model_rope_init(ak_llm_model *m, const float *freq_factors);
/* Keeps `p` until the model is freed. */
ak_status ak__model_own(ak_llm_model *m, float *p);

/* ---- the forward pass -------------------------------------------------------------- */

struct ak__kv_cache;

/* A ragged batch: the new tokens of every scheduled sequence back to back. */
typedef struct ak__batch {
    int32_t n_tokens;
    const int32_t *tokens;  /* [n_tokens] */
    const int32_t *pos;     /* [n_tokens] position of each token in its sequence */
    const int32_t *seq;     /* [n_tokens] index into seq_blocks / seq_len */
    int32_t n_seqs;
    const int32_t *const *seq_blocks; /* block table of each sequence */
    const int32_t *seq_len; /* tokens in the cache after this batch, per sequence */
    int32_t n_out;
    const int32_t *out_rows; /* tokens whose logits are wanted, ascending */
} ak__batch;

/* Scratch of one forward pass, sized for max_tokens at once (allocated once). */
typedef struct ak__forward_ws ak__forward_ws;

ak_status ak__forward_ws_create(const ak_llm_model *m, int32_t max_tokens, int32_t max_out,
                                int32_t max_context, int n_threads, ak__forward_ws **out);
void ak__forward_ws_free(ak__forward_ws *ws);
/* embeddings: after ak__forward, the final-norm hidden states of the n_out rows */
const float *ak__forward_ws_hidden(const ak__forward_ws *ws);
/* Runs the batch through the model, writing K/V into `kv` and n_out × n_vocab logits. */
ak_status ak__forward(const ak_llm_model *m, ak__forward_ws *ws, struct ak__kv_cache *kv,
                      const ak__batch *b, float *logits, ak_threadpool *pool);
/* Every position's logits of ids decoded one token at a time (as the engine decodes) over a
 * KV cache of `type` (an ak__kv_type of llm/base/kv_cache.h): q8_0 and f16 caches against
 * f32 in tests and tools. */
ak_status ak__model_logits_stepwise(ak_llm_model *m, const int32_t *ids, size_t n_ids,
                                    float *logits, int32_t n_threads, int type);

#endif /* AK_LLM_MODEL_MODEL_H */
