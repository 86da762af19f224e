/* ak_llm_model_embed: the embedding of one token sequence. Encoders (bert, nomic-bert)
 * run their own forward pass (encoder.c); decoders run one prefill outside the engine and
 * take the hidden states after the final norm (llama.cpp's result_norm). The rows are
 * pooled as the model says (GGUF {arch}.pooling_type: none, mean, cls = first token,
 * last; decoders without the key: last) and L2-normalized, as llama-server's
 * /v1/embeddings returns them. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "llm/base/kv_cache.h"
#include "llm/model/encoder.h"

static void l2_normalize(float *v, int32_t n) {
    double s = 0;
    for (int32_t i = 0; i < n; ++i) s += (double)v[i] * v[i];
    float inv = s > 0 ? (float)(1.0 / sqrt(s)) : 0.0f;
    for (int32_t i = 0; i < n; ++i) v[i] *= inv;
}

void ak__embed_pool(int pooling, const float *rows, int32_t n, int32_t dim, float *out) {
    size_t D = (size_t)dim;
    if (pooling == AK__POOL_NONE) { /* one normalized vector per token */
        memcpy(out, rows, (size_t)n * D * sizeof *out);
        for (int32_t t = 0; t < n; ++t) l2_normalize(out + (size_t)t * D, dim);
        return;
    }
    if (pooling == AK__POOL_MEAN) {
        for (size_t i = 0; i < D; ++i) {
            double s = 0;
            for (int32_t t = 0; t < n; ++t) s += rows[(size_t)t * D + i];
            out[i] = (float)(s / n);
        }
    } else {
        size_t r = pooling == AK__POOL_CLS ? 0 : (size_t)(n - 1);
        memcpy(out, rows + r * D, D * sizeof *out);
    }
    l2_normalize(out, dim);
}

/* ---- decoders --------------------------------------------------------------------- */

/* The final-norm hidden states of rows `rows` (n_rows of them) of one prefill. */
static ak_status decoder_hidden(ak_llm_model *m, const int32_t *ids, int32_t n,
                                const int32_t *rows, int32_t n_rows, float *hidden,
                                ak_threadpool *pool) {
    const int32_t bs = 16, n_blocks = (n + bs - 1) / bs;
    int threads;
    AK_CHECK(ak_threadpool_size(pool, &threads));
    ak__kv_cache *kv = NULL;
    ak__forward_ws *ws = NULL;
    int32_t *table = malloc((size_t)n_blocks * sizeof *table);
    int32_t *pos = malloc((size_t)n * sizeof *pos), *seq = calloc((size_t)n, sizeof *seq);
    float *logits = malloc((size_t)n_rows * (size_t)m->hp.n_vocab * sizeof *logits);
    ak_status st = table && pos && seq && logits
                       ? AK_OK : AK_FAIL(AK_ERR_NO_MEMORY, "embed: out of memory");
    if (st == AK_OK) st = ak__kv_create(m->hp.n_layers, m->hp.n_kv_heads, m->hp.head_dim, bs,
                                        n_blocks, AK__KV_F32, &kv);
    if (st == AK_OK) st = ak__forward_ws_create(m, n, n_rows, n, threads, &ws);
    if (st == AK_OK) {
        for (int32_t i = 0; i < n_blocks; ++i) table[i] = ak__kv_alloc(kv);
        for (int32_t i = 0; i < n; ++i) pos[i] = i;
        const int32_t *tables[1] = {table};
        ak__batch b = {n, ids, pos, seq, 1, tables, &n, n_rows, rows};
        st = ak__forward(m, ws, kv, &b, logits, pool);
    }
    if (st == AK_OK)
        memcpy(hidden, ak__forward_ws_hidden(ws),
               (size_t)n_rows * (size_t)m->hp.dim * sizeof *hidden);
    ak__kv_free(kv);
    ak__forward_ws_free(ws);
    free(table);
    free(pos);
    free(seq);
    free(logits);
    return st;
}

/* A decoder's pooling: its GGUF's {arch}.pooling_type, else last token. */
static ak_status decoder_pooling(const ak_llm_model *m, int32_t *pooling) {
    *pooling = AK__POOL_LAST;
    if (!m->gguf) return AK_OK;
    char key[96];
    snprintf(key, sizeof key, "%s.pooling_type", m->hp.arch);
    ak_gguf_type t;
    AK_CHECK(ak_gguf_key_type(m->gguf, key, &t));
    if (t == AK_GGUF_NONE) return AK_OK;
    int64_t v;
    if (ak_gguf_get_int(m->gguf, key, &v) != AK_OK || v < 0 || v > AK__POOL_LAST)
        return AK_FAIL(AK_ERR_UNSUPPORTED, "GGUF %s is not one of 0 none, 1 mean, 2 cls, "
                       "3 last", key);
    *pooling = (int32_t)v;
    return AK_OK;
}

static ak_status decoder_embed(ak_llm_model *m, int pooling, const int32_t *ids, int32_t n,
                               float *rows_out, ak_threadpool *pool) {
    int all = pooling == AK__POOL_NONE || pooling == AK__POOL_MEAN;
    int32_t n_rows = all ? n : 1;
    int32_t *rows = malloc((size_t)n_rows * sizeof *rows);
    if (!rows) return AK_FAIL(AK_ERR_NO_MEMORY, "embed: out of memory");
    for (int32_t i = 0; i < n_rows; ++i) rows[i] = all ? i : pooling == AK__POOL_CLS ? 0 : n - 1;
    ak_status st = decoder_hidden(m, ids, n, rows, n_rows, rows_out, pool);
    free(rows);
    return st;
}

/* ---- the public call --------------------------------------------------------------- */

ak_status ak_llm_model_embed_pooling(const ak_llm_model *m, int32_t *pooling) {
    AK_ARG_CHECK(m != NULL && pooling != NULL, "model or pooling is NULL");
    if (m->enc) {
        *pooling = m->embed_pooling;
        return AK_OK;
    }
    return decoder_pooling(m, pooling);
}

ak_status ak_llm_model_embed(ak_llm_model *m, const int32_t *ids, size_t n_ids, float *out,
                             size_t cap) {
    AK_ARG_CHECK(m != NULL && ids != NULL && out != NULL, "model, ids or out is NULL");
    AK_ARG_CHECK(n_ids >= 1 && n_ids <= (size_t)m->hp.max_context,
                 "embed: %zu ids (1..%d, the model's context)", n_ids, m->hp.max_context);
    int32_t pooling, n = (int32_t)n_ids, D = m->hp.dim;
    AK_CHECK(ak_llm_model_embed_pooling(m, &pooling));
    size_t need = (size_t)D * (pooling == AK__POOL_NONE ? n_ids : 1);
    AK_ARG_CHECK(cap >= need, "embed: out holds %zu floats, the embedding needs %zu", cap, need);
    int rows_all = m->enc || pooling == AK__POOL_NONE || pooling == AK__POOL_MEAN;
    float *rows = malloc((size_t)(rows_all ? n : 1) * (size_t)D * sizeof *rows);
    if (!rows) return AK_FAIL(AK_ERR_NO_MEMORY, "embed: out of memory");
    ak_threadpool *pool = NULL;
    ak_status st = ak_threadpool_create(0, &pool);
    if (st == AK_OK)
        st = m->enc ? ak__encoder_forward(m, ids, n, rows, pool)
                    : decoder_embed(m, pooling, ids, n, rows, pool);
    if (st == AK_OK) {
        if (m->enc) ak__embed_pool(pooling, rows, n, D, out);
        else if (pooling == AK__POOL_NONE || pooling == AK__POOL_MEAN)
            ak__embed_pool(pooling, rows, n, D, out);
        else ak__embed_pool(AK__POOL_CLS, rows, 1, D, out); /* the one row computed */
    }
    if (pool) ak_threadpool_free(pool);
    free(rows);
    return st;
}
