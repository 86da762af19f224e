/* Causal attention of a ragged batch over the paged KV cache: every query token attends
 * to positions 0..pos of its own sequence, reading K/V block by block through the
 * sequence's block table (prefill, chunked prefill, decode and speculative verification
 * are all this one case), optionally within a sliding window of the last positions and
 * with soft-capped scores. Grouped-query attention: the heads of a group share one KV head
 * and are processed together so each K/V block is read once per group. */
#ifndef AK_LLM_MODEL_ATTENTION_H
#define AK_LLM_MODEL_ATTENTION_H

#include "llm/base/kv_cache.h"
#include "llm/model/model.h"

typedef struct ak__attention_args {
    const ak__kv_cache *kv;
    int32_t layer, n_heads;
    const ak__batch *batch;
    const float *q;   /* [n_tokens][n_heads·head_dim], RoPE applied */
    float *out;       /* [n_tokens][n_heads·head_dim] */
    float scale;      /* 1/sqrt(head_dim) */
    float *scratch;   /* per thread: ak__attention_scratch_floats() floats */
    size_t scratch_per_thread;
    int32_t *tile_starts; /* n_tokens + 1 ints of workspace */
    int32_t window;   /* > 0: a query at p sees positions p − window + 1 .. p only */
    float softcap;    /* > 0: scores ← softcap·tanh(scores/softcap) before the softmax */
} ak__attention_args;

size_t ak__attention_scratch_floats(int32_t n_heads, int32_t n_kv_heads, int32_t head_dim,
                                    int32_t block_size, int32_t max_context);
void ak__attention(const ak__attention_args *a, ak_threadpool *pool);

/* Writes the K/V rows of every batch token into its sequence's slot of layer `layer`. */
void ak__kv_store(ak__kv_cache *kv, int32_t layer, const ak__batch *b, const float *k,
                  const float *v);

#endif /* AK_LLM_MODEL_ATTENTION_H */
