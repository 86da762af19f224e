/* BERT-family encoders (llama.cpp's `bert` and `nomic-bert`) and the embeddings API: the
 * encoder's weights (bound by encoder_load.c), its non-causal forward pass over one
 * sequence (encoder.c) and the pooling shared with decoder embeddings (embed.c). */
#ifndef AK_LLM_MODEL_ENCODER_H
#define AK_LLM_MODEL_ENCODER_H

#include "llm/model/model.h"

/* llama.cpp's pooling enum (LLAMA_POOLING_TYPE_*); rank (4) is refused at load. */
enum { AK__POOL_NONE = 0, AK__POOL_MEAN = 1, AK__POOL_CLS = 2, AK__POOL_LAST = 3 };

typedef struct ak__enc_layer {
    ak__matrix wq, wk, wv, wqkv, wo;  /* bert: q/k/v; nomic-bert: wqkv (q rows first) */
    ak__matrix w_up, w_gate, w_down;  /* w_gate only in nomic-bert (SwiGLU) */
    const float *bq, *bk, *bv, *bo, *b_up, *b_down; /* bert's biases; NULL in nomic-bert */
    const float *attn_norm, *attn_norm_b; /* LayerNorm after the attention's residual add */
    const float *out_norm, *out_norm_b;   /* LayerNorm after the FFN's residual add */
} ak__enc_layer;

struct ak__encoder {
    int nomic;                  /* 1: nomic-bert (rotary, SwiGLU, fused QKV, no biases) */
    int gelu_erf;               /* HF hidden_act "gelu": exact erf GELU (GGUF: tanh form) */
    ak__matrix tok_embd, type_embd, pos_embd; /* pos_embd: bert only */
    const float *embd_norm, *embd_norm_b;
    ak__enc_layer *layers;
};

/* Binds a GGUF `bert` / `nomic-bert` file into m (hp, m->enc, m->embed_pooling). */
ak_status ak__encoder_load_gguf(ak_llm_model *m);
struct ak__hf;
/* Binds a Hugging Face BertModel folder (m->hf open) into m. */
ak_status ak__encoder_load_hf(ak_llm_model *m);
/* 1 when the folder's config.json is a BertModel's. */
int ak__encoder_hf_arch(const struct ak__hf *h);
/* 1 when the GGUF's general.architecture is an encoder this engine runs. */
int ak__encoder_arch(const char *arch);
/* The last hidden states of one sequence (n rows × dim) into out. */
ak_status ak__encoder_forward(const ak_llm_model *m, const int32_t *ids, int32_t n, float *out,
                              ak_threadpool *pool);
/* Pools n rows of dim values into one vector (mean, first, last) and L2-normalizes it. */
void ak__embed_pool(int pooling, const float *rows, int32_t n, int32_t dim, float *out);

#endif /* AK_LLM_MODEL_ENCODER_H */
