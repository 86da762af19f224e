/* The forward pass of a BERT-family encoder over one sequence, every token attending to
 * every other (no mask, no KV cache): embeddings (token + token type 0 + learned position
 * for bert) → LayerNorm, then per layer, post-norm as in BERT:
 *   x ← LN(x + Wo·attn(Wq·x, Wk·x, Wv·x))      (nomic-bert: q/k rotated, NEOX halves)
 *   x ← LN(x + down(act(up·x)))               (bert: GELU with biases; nomic: SwiGLU)
 * The matrices go through ak_linear, norms and activations through the table kernels;
 * the attention is a plain two-pass softmax per (head, query), spread over the pool by
 * head. Scratch is allocated per call: an embedding request is one forward. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "kernels/dispatch.h"
#include "llm/model/encoder.h"

typedef struct enc_ws {
    float *x, *xb, *q, *k, *v, *att, *up, *gate, *qkv, *cos_sin, *scores;
} enc_ws;

static void ws_free(enc_ws *w) {
    float *a[] = {w->x, w->xb, w->q, w->k, w->v, w->att, w->up, w->gate, w->qkv, w->cos_sin,
                  w->scores};
    for (size_t i = 0; i < sizeof a / sizeof a[0]; ++i) free(a[i]);
}

static ak_status ws_alloc(const ak_llm_model *m, int32_t T, int threads, enc_ws *w) {
    size_t t = (size_t)T, D = (size_t)m->hp.dim, F = (size_t)m->hp.ffn_dim;
    w->x = malloc(t * D * sizeof(float));
    w->xb = malloc(t * D * sizeof(float));
    w->q = malloc(t * D * sizeof(float));
    w->k = malloc(t * D * sizeof(float));
    w->v = malloc(t * D * sizeof(float));
    w->att = malloc(t * D * sizeof(float));
    w->up = malloc(t * F * sizeof(float));
    w->gate = malloc(t * F * sizeof(float));
    w->qkv = malloc(t * 3 * D * sizeof(float));
    w->cos_sin = malloc(t * (size_t)m->hp.head_dim * sizeof(float));
    w->scores = malloc(t * (size_t)threads * sizeof(float));
    if (!w->x || !w->xb || !w->q || !w->k || !w->v || !w->att || !w->up || !w->gate ||
        !w->qkv || !w->cos_sin || !w->scores)
        return AK_FAIL(AK_ERR_NO_MEMORY, "encoder: out of memory for %d tokens", T);
    return AK_OK;
}

static ak_status linear(const ak__matrix *w, const float *x, int32_t T, float *y,
                        ak_threadpool *pool) {
    return ak_linear(w->type, w->data, (size_t)w->rows, (size_t)w->cols, x, (size_t)w->cols,
                     (size_t)T, y, (size_t)w->rows, 0, pool);
}

static void add_bias(float *y, const float *b, int32_t T, int64_t n) {
    if (!b) return;
    for (int32_t t = 0; t < T; ++t)
        for (int64_t i = 0; i < n; ++i) y[(size_t)t * (size_t)n + (size_t)i] += b[i];
}

/* x ← LN(x + y) row by row */
static void add_norm(float *x, const float *y, const float *w, const float *b, int32_t T,
                     int32_t D, float eps) {
    ak__kf_layernorm *ln = ak__kernels_active()->f32_layernorm;
    for (size_t r = 0; r < (size_t)T; ++r) {
        float *row = x + r * (size_t)D;
        for (int32_t i = 0; i < D; ++i) row[i] += y[r * (size_t)D + (size_t)i];
        ln(row, row, w, b, (size_t)D, eps);
    }
}

/* tmp and pos: scratch rows of dim values */
static ak_status embed_tokens(const ak_llm_model *m, const int32_t *ids, int32_t T, float *x,
                              float *tmp, float *p) {
    const struct ak__encoder *e = m->enc;
    size_t D = (size_t)m->hp.dim;
    AK_CHECK(ak_dequantize_row(e->type_embd.type, e->type_embd.data, tmp, D)); /* type 0 */
    for (int32_t t = 0; t < T; ++t) {
        if (ids[t] < 0 || ids[t] >= m->hp.n_vocab)
            return AK_FAIL(AK_ERR_INVALID_ARG, "encoder: token id %d outside the vocabulary "
                           "[0, %d)", ids[t], m->hp.n_vocab);
        float *row = x + (size_t)t * D;
        AK_CHECK(ak_dequantize_row(e->tok_embd.type, (const char *)e->tok_embd.data +
                                   (size_t)ids[t] * e->tok_embd.row_bytes, row, D));
        for (size_t i = 0; i < D; ++i) row[i] += tmp[i];
        if (!e->nomic) {
            AK_CHECK(ak_dequantize_row(e->pos_embd.type, (const char *)e->pos_embd.data +
                                       (size_t)t * e->pos_embd.row_bytes, p, D));
            for (size_t i = 0; i < D; ++i) row[i] += p[i];
        }
        ak__kernels_active()->f32_layernorm(row, row, e->embd_norm, e->embd_norm_b, D,
                                            m->hp.norm_eps);
    }
    return AK_OK;
}

/* transformers' "gelu": x·Φ(x) = ½x(1 + erf(x/√2)), exactly (not the tanh form) */
static void gelu_erf(float *x, size_t n) {
    for (size_t i = 0; i < n; ++i) x[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678118654752f));
}

/* ---- attention --------------------------------------------------------------------- */

typedef struct attn_ctx {
    const float *q, *k, *v;
    float *out, *scores;
    int32_t T, n_heads, head_dim;
    float scale;
} attn_ctx;

/* heads [begin, end): out = softmax(q·kᵀ·scale)·v over all T keys, for every query */
static void attn_heads(void *ctx, size_t begin, size_t end, int thread_index) {
    const attn_ctx *c = ctx;
    size_t D = (size_t)c->n_heads * (size_t)c->head_dim, hd = (size_t)c->head_dim;
    float *s = c->scores + (size_t)thread_index * (size_t)c->T;
    for (size_t h = begin; h < end; ++h)
        for (int32_t i = 0; i < c->T; ++i) {
            const float *qi = c->q + (size_t)i * D + h * hd;
            float mx = -INFINITY;
            for (int32_t j = 0; j < c->T; ++j) {
                const float *kj = c->k + (size_t)j * D + h * hd;
                float dot = 0;
                for (size_t d = 0; d < hd; ++d) dot += qi[d] * kj[d];
                s[j] = dot * c->scale;
                if (s[j] > mx) mx = s[j];
            }
            double sum = 0;
            for (int32_t j = 0; j < c->T; ++j) sum += s[j] = expf(s[j] - mx);
            float *o = c->out + (size_t)i * D + h * hd;
            memset(o, 0, hd * sizeof *o);
            for (int32_t j = 0; j < c->T; ++j) {
                float p = (float)(s[j] / sum);
                const float *vj = c->v + (size_t)j * D + h * hd;
                for (size_t d = 0; d < hd; ++d) o[d] += p * vj[d];
            }
        }
}

static void rope_table(const ak_llm_model *m, int32_t T, float *cs) {
    int32_t half = m->hp.head_dim / 2;
    for (int32_t t = 0; t < T; ++t)
        for (int32_t i = 0; i < half; ++i) {
            double a = (double)t * m->inv_freq[i];
            cs[(size_t)t * (size_t)m->hp.head_dim + (size_t)i] = (float)cos(a);
            cs[(size_t)t * (size_t)m->hp.head_dim + (size_t)(half + i)] = (float)sin(a);
        }
}

static ak_status qkv(const ak_llm_model *m, const ak__enc_layer *l, enc_ws *w, int32_t T,
                     ak_threadpool *pool) {
    size_t D = (size_t)m->hp.dim;
    if (!m->enc->nomic) {
        AK_CHECK(linear(&l->wq, w->x, T, w->q, pool));
        AK_CHECK(linear(&l->wk, w->x, T, w->k, pool));
        AK_CHECK(linear(&l->wv, w->x, T, w->v, pool));
        add_bias(w->q, l->bq, T, (int64_t)D);
        add_bias(w->k, l->bk, T, (int64_t)D);
        add_bias(w->v, l->bv, T, (int64_t)D);
        return AK_OK;
    }
    AK_CHECK(linear(&l->wqkv, w->x, T, w->qkv, pool));
    for (size_t t = 0; t < (size_t)T; ++t) {
        const float *r = w->qkv + t * 3 * D;
        memcpy(w->q + t * D, r, D * sizeof(float));
        memcpy(w->k + t * D, r + D, D * sizeof(float));
        memcpy(w->v + t * D, r + 2 * D, D * sizeof(float));
    }
    ak__kf_rope *rope = ak__kernels_active()->f32_rope;
    rope(w->q, (size_t)T, (size_t)m->hp.n_heads, (size_t)m->hp.head_dim, 1, w->cos_sin);
    rope(w->k, (size_t)T, (size_t)m->hp.n_heads, (size_t)m->hp.head_dim, 1, w->cos_sin);
    return AK_OK;
}

static ak_status layer(const ak_llm_model *m, const ak__enc_layer *l, enc_ws *w, int32_t T,
                       ak_threadpool *pool) {
    const ak__llm_hparams *hp = &m->hp;
    AK_CHECK(qkv(m, l, w, T, pool));
    attn_ctx c = {w->q, w->k, w->v, w->att, w->scores, T, hp->n_heads, hp->head_dim,
                  1.0f / sqrtf((float)hp->head_dim)};
    ak_threadpool_parallel_for(pool, (size_t)hp->n_heads, 1, attn_heads, &c);
    AK_CHECK(linear(&l->wo, w->att, T, w->xb, pool));
    add_bias(w->xb, l->bo, T, hp->dim);
    add_norm(w->x, w->xb, l->attn_norm, l->attn_norm_b, T, hp->dim, hp->norm_eps);
    AK_CHECK(linear(&l->w_up, w->x, T, w->up, pool));
    size_t n = (size_t)T * (size_t)hp->ffn_dim;
    if (m->enc->nomic) {
        AK_CHECK(linear(&l->w_gate, w->x, T, w->gate, pool));
        ak__kernels_active()->f32_swiglu(w->gate, w->up, n); /* silu(gate)·up */
        AK_CHECK(linear(&l->w_down, w->gate, T, w->xb, pool));
    } else {
        add_bias(w->up, l->b_up, T, hp->ffn_dim);
        if (m->enc->gelu_erf) gelu_erf(w->up, n);
        else ak__kernels_active()->f32_gelu(w->up, n);
        AK_CHECK(linear(&l->w_down, w->up, T, w->xb, pool));
        add_bias(w->xb, l->b_down, T, hp->dim);
    }
    add_norm(w->x, w->xb, l->out_norm, l->out_norm_b, T, hp->dim, hp->norm_eps);
    return AK_OK;
}

ak_status ak__encoder_forward(const ak_llm_model *m, const int32_t *ids, int32_t T, float *out,
                              ak_threadpool *pool) {
    AK_ARG_CHECK(T >= 1 && T <= m->hp.max_context, "encoder: %d tokens (1..%d, the model's "
                 "context)", T, m->hp.max_context);
    int threads = 1;
    if (pool) AK_CHECK(ak_threadpool_size(pool, &threads));
    enc_ws w = {0};
    ak_status st = ws_alloc(m, T, threads, &w);
    if (st == AK_OK) st = embed_tokens(m, ids, T, w.x, w.xb, w.q);
    if (st == AK_OK && m->enc->nomic) rope_table(m, T, w.cos_sin);
    for (int32_t li = 0; st == AK_OK && li < m->hp.n_layers; ++li)
        st = layer(m, &m->enc->layers[li], &w, T, pool);
    if (st == AK_OK) memcpy(out, w.x, (size_t)T * (size_t)m->hp.dim * sizeof(float));
    ws_free(&w);
    return st;
}
