/* ak_llm_model_logits: one prefill of a whole prompt with every row's logits, outside the
 * engine — what the precision tools compare against a reference implementation. And
 * ak__model_logits_stepwise: the same logits decoded one token at a time over a KV cache
 * of a chosen storage type (the q8_0 cache's accuracy against f32). */
#include <stdlib.h>

#include "core/check.h"
#include "llm/base/kv_cache.h"
#include "llm/model/model.h"

typedef struct logits_run {
    ak__kv_cache *kv;
    ak__forward_ws *ws;
    ak_threadpool *pool;
    int32_t *table, *pos, *seq, *rows;
} logits_run;

static void run_free(logits_run *r) {
    ak__kv_free(r->kv);
    ak__forward_ws_free(r->ws);
    if (r->pool) ak_threadpool_free(r->pool);
    free(r->table);
    free(r->pos);
    free(r->seq);
    free(r->rows);
}

static ak_status run_prepare(ak_llm_model *m, int32_t n, int32_t n_threads, ak__kv_type type,
                             int32_t batch, logits_run *r) {
    const int32_t bs = 16, n_blocks = (n + bs - 1) / bs;
    AK_CHECK(ak__kv_create(m->hp.n_layers, m->hp.n_kv_heads, m->hp.head_dim, bs, n_blocks,
                           type, &r->kv));
    AK_CHECK(ak_threadpool_create(n_threads, &r->pool));
    int threads;
    AK_CHECK(ak_threadpool_size(r->pool, &threads));
    AK_CHECK(ak__forward_ws_create(m, batch, batch, n, threads, &r->ws));
    r->table = malloc((size_t)n_blocks * sizeof *r->table);
    r->pos = malloc((size_t)n * sizeof *r->pos);
    r->seq = calloc((size_t)n, sizeof *r->seq);
    r->rows = malloc((size_t)n * sizeof *r->rows);
    if (!r->table || !r->pos || !r->seq || !r->rows)
        return AK_FAIL(AK_ERR_NO_MEMORY, "logits: out of memory");
    for (int32_t i = 0; i < n_blocks; ++i) r->table[i] = ak__kv_alloc(r->kv);
    for (int32_t i = 0; i < n; ++i) r->pos[i] = r->rows[i] = i;
    return AK_OK;
}

ak_status ak_llm_model_logits(ak_llm_model *m, const int32_t *ids, size_t n_ids, float *logits,
                              int32_t n_threads) {
    AK_ARG_CHECK(m != NULL && ids != NULL && logits != NULL, "model, ids or logits is NULL");
    if (m->enc) return AK_FAIL(AK_ERR_UNSUPPORTED, "logits: '%s' is an embedding-only encoder",
                               m->hp.arch);
    AK_ARG_CHECK(n_ids >= 1 && n_ids <= (size_t)m->hp.max_context,
                 "logits: %zu ids (1..%d, the model's context)", n_ids, m->hp.max_context);
    int32_t n = (int32_t)n_ids;
    logits_run r = {0};
    ak_status st = run_prepare(m, n, n_threads, AK__KV_F32, n, &r);
    if (st == AK_OK) {
        const int32_t *tables[1] = {r.table};
        ak__batch b = {n, ids, r.pos, r.seq, 1, tables, &n, n, r.rows};
        st = ak__forward(m, r.ws, r.kv, &b, logits, r.pool);
    }
    run_free(&r);
    return st;
}

ak_status ak__model_logits_stepwise(ak_llm_model *m, const int32_t *ids, size_t n_ids,
                                    float *logits, int32_t n_threads, int type) {
    AK_ARG_CHECK(m != NULL && ids != NULL && logits != NULL, "model, ids or logits is NULL");
    AK_ARG_CHECK(n_ids >= 1 && n_ids <= (size_t)m->hp.max_context,
                 "logits: %zu ids (1..%d, the model's context)", n_ids, m->hp.max_context);
    int32_t n = (int32_t)n_ids;
    logits_run r = {0};
    ak_status st = run_prepare(m, n, n_threads, (ak__kv_type)type, 1, &r);
    const int32_t *tables[1] = {r.table};
    int32_t zero = 0;
    for (int32_t i = 0; i < n && st == AK_OK; ++i) {
        int32_t len = i + 1;
        ak__batch b = {1, ids + i, r.pos + i, r.seq, 1, tables, &len, 1, &zero};
        st = ak__forward(m, r.ws, r.kv, &b, logits + (size_t)i * (size_t)m->hp.n_vocab, r.pool);
    }
    run_free(&r);
    return st;
}
