/* The forward pass of a Llama-family decoder over a ragged batch (model.h): embedding,
 * per layer RMSNorm → QKV (+bias) → per-head q/k RMSNorm (Qwen3, Gemma 3) → RoPE → K/V
 * into the paged cache → attention (optionally windowed and soft-capped) → output
 * projection (Gemma: normed again) added to the residual (Granite: scaled) → RMSNorm →
 * gated FFN (SwiGLU, or GeGLU for Gemma) added the same way, then the final norm and the
 * output projection for the requested rows only (Granite: scaled, Gemma 2: soft-capped).
 * Every buffer comes from the workspace, so a step allocates nothing. The elementwise
 * loops (RMSNorm, RoPE, SwiGLU, GeGLU, soft-capping) are table kernels
 * (kernels/kernels.def), called on whole rows. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "kernels/dispatch.h"
#include "llm/model/attention.h"
#include "llm/model/model.h"

struct ak__forward_ws {
    int32_t max_tokens, max_out, max_context, n_threads;
    float *x, *xb, *q, *k, *v, *att, *gate, *up, *xo, *cos_sin;
    float *cos_sin_local; /* the sliding layers' own RoPE tables (Gemma 3), or NULL */
    /* mixture of experts: router probabilities [T][n_experts], each token's chosen
     * experts and weights [T][n_used], one expert's tokens (indices, gathered rows, its
     * output) and the layer's summed output */
    float *probs, *sel_w, *xe, *ye, *moe_out;
    int32_t *sel, *rows_of;
    float *attn_scratch;
    size_t attn_per_thread;
    int32_t *tile_starts;
};

static float *ws_array(size_t n, int *failed) {
    float *p = malloc((n ? n : 1) * sizeof *p);
    if (!p) *failed = 1;
    return p;
}

ak_status ak__forward_ws_create(const ak_llm_model *m, int32_t max_tokens, int32_t max_out,
                                int32_t max_context, int n_threads, ak__forward_ws **out) {
    const ak__llm_hparams *hp = &m->hp;
    AK_ARG_CHECK(max_tokens >= 1 && max_out >= 1 && max_out <= max_tokens && max_context >= 1,
                 "forward: bad workspace sizes");
    ak__forward_ws *ws = calloc(1, sizeof *ws);
    if (!ws) return AK_FAIL(AK_ERR_NO_MEMORY, "forward: out of memory");
    size_t T = (size_t)max_tokens, qd = (size_t)hp->n_heads * (size_t)hp->head_dim,
           kvd = (size_t)hp->n_kv_heads * (size_t)hp->head_dim;
    int failed = 0;
    ws->max_tokens = max_tokens;
    ws->max_out = max_out;
    ws->max_context = max_context;
    ws->n_threads = n_threads < 1 ? 1 : n_threads;
    ws->x = ws_array(T * (size_t)hp->dim, &failed);
    ws->xb = ws_array(T * (size_t)hp->dim, &failed);
    ws->q = ws_array(T * qd, &failed);
    ws->k = ws_array(T * kvd, &failed);
    ws->v = ws_array(T * kvd, &failed);
    ws->att = ws_array(T * qd, &failed);
    size_t ffn = (size_t)hp->ffn_dim;
    if ((size_t)hp->expert_ffn_dim > ffn) ffn = (size_t)hp->expert_ffn_dim;
    if ((size_t)hp->shared_ffn_dim > ffn) ffn = (size_t)hp->shared_ffn_dim;
    ws->gate = ws_array(T * ffn, &failed);
    ws->up = ws_array(T * ffn, &failed);
    if (hp->n_experts > 0) {
        size_t E = (size_t)hp->n_experts, K = (size_t)hp->n_experts_used, D = (size_t)hp->dim;
        ws->probs = ws_array(T * E, &failed);
        ws->sel_w = ws_array(T * K, &failed);
        ws->xe = ws_array(T * D, &failed);
        ws->ye = ws_array(T * D, &failed);
        ws->moe_out = ws_array(T * D, &failed);
        ws->sel = malloc(T * K * sizeof *ws->sel);
        ws->rows_of = malloc(T * sizeof *ws->rows_of);
        failed |= !ws->sel || !ws->rows_of;
    }
    ws->xo = ws_array((size_t)max_out * (size_t)hp->dim, &failed);
    ws->cos_sin = ws_array(T * (size_t)hp->head_dim, &failed);
    if (m->inv_freq_local) ws->cos_sin_local = ws_array(T * (size_t)hp->head_dim, &failed);
    /* block size is bounded by 1024 tokens; scratch covers the largest */
    ws->attn_per_thread = ak__attention_scratch_floats(hp->n_heads, hp->n_kv_heads,
                                                       hp->head_dim, 1024, max_context);
    ws->attn_scratch = ws_array(ws->attn_per_thread * (size_t)ws->n_threads, &failed);
    ws->tile_starts = malloc(((size_t)max_tokens + 1) * sizeof *ws->tile_starts);
    if (failed || !ws->tile_starts) {
        ak__forward_ws_free(ws);
        return AK_FAIL(AK_ERR_NO_MEMORY, "forward: out of memory for a %d-token workspace",
                       max_tokens);
    }
    *out = ws;
    return AK_OK;
}

void ak__forward_ws_free(ak__forward_ws *ws) {
    if (!ws) return;
    float *arrays[] = {ws->x, ws->xb, ws->q, ws->k, ws->v, ws->att, ws->gate, ws->up,
                       ws->xo, ws->cos_sin, ws->attn_scratch, ws->cos_sin_local,
                       ws->probs, ws->sel_w, ws->xe, ws->ye, ws->moe_out};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; ++i) free(arrays[i]);
    free(ws->tile_starts);
    free(ws->sel);
    free(ws->rows_of);
    free(ws);
}

const float *ak__forward_ws_hidden(const ak__forward_ws *ws) { return ws->xo; }

/* ---- pieces ---------------------------------------------------------------------------- */

typedef struct rows_ctx {
    float *out, *x;
    const float *w, *up;
    int32_t n;
    float eps;
} rows_ctx;

static void rmsnorm_range(void *ctx, size_t begin, size_t end, int thread_index) {
    (void)thread_index;
    const rows_ctx *c = ctx;
    ak__kf_rmsnorm *rmsnorm = ak__kernels_active()->f32_rmsnorm;
    for (size_t r = begin; r < end; ++r)
        rmsnorm(c->out + r * (size_t)c->n, c->x + r * (size_t)c->n, c->w, (size_t)c->n, c->eps);
}

/* LayerNorm with bias of each row (StarCoder2): not where the time goes, one thread. */
static void layernorm_rows(float *out, const float *x, const float *w, const float *b,
                           int32_t rows, int32_t n, float eps) {
    ak__kf_layernorm *ln = ak__kernels_active()->f32_layernorm;
    for (size_t r = 0; r < (size_t)rows; ++r)
        ln(out + r * (size_t)n, x + r * (size_t)n, w, b, (size_t)n, eps);
}

/* Rows are independent; a prefill has hundreds, so they are spread over the pool. */
static void rmsnorm_rows(float *out, const float *x, const float *w, int32_t rows, int32_t n,
                         float eps, ak_threadpool *pool) {
    rows_ctx c = {out, (float *)x, w, NULL, n, eps};
    if (rows < 8) rmsnorm_range(&c, 0, (size_t)rows, 0);
    else ak_threadpool_parallel_for(pool, (size_t)rows, 4, rmsnorm_range, &c);
}

static ak_status linear(const ak__matrix *w, const float *x, int32_t T, float *y, int acc,
                        ak_threadpool *pool) {
    return ak_linear(w->type, w->data, (size_t)w->rows, (size_t)w->cols, x, (size_t)w->cols,
                     (size_t)T, y, (size_t)w->rows, acc, pool);
}

/* Several projections of one input (Q, K, V; gate, up) in one call when their weights
 * share a storage type, so the pool wakes once and quantized activations are made once. */
static ak_status linear_group(const ak__matrix *const *w, float *const *y, int n,
                              const float *x, int32_t T, ak_threadpool *pool) {
    ak_linear_out outs[3];
    int same = 1;
    for (int i = 0; i < n; ++i) {
        outs[i] = (ak_linear_out){w[i]->data, (size_t)w[i]->rows, y[i], (size_t)w[i]->rows};
        same &= w[i]->type == w[0]->type && w[i]->cols == w[0]->cols;
    }
    if (same)
        return ak_linear_multi(w[0]->type, (size_t)w[0]->cols, x, (size_t)w[0]->cols, (size_t)T,
                               outs, (size_t)n, 0, pool);
    for (int i = 0; i < n; ++i) AK_CHECK(linear(w[i], x, T, y[i], 0, pool));
    return AK_OK;
}

static void add_bias(float *y, const float *bias, int32_t T, int32_t n) {
    if (!bias) return;
    for (int32_t t = 0; t < T; ++t)
        for (int32_t i = 0; i < n; ++i) y[(size_t)t * (size_t)n + i] += bias[i];
}

/* cos/sin of every (token, frequency) pair: [t][i] = cos, [t][half + i] = sin */
static void rope_tables(const ak_llm_model *m, const float *inv_freq, const ak__batch *b,
                        float *cs) {
    int32_t half = m->hp.head_dim / 2;
    double af = m->hp.rope_attn_factor > 0 ? m->hp.rope_attn_factor : 1.0; /* longrope, yarn */
    for (int32_t t = 0; t < b->n_tokens; ++t) {
        float *row = cs + (size_t)t * (size_t)m->hp.head_dim;
        for (int32_t i = 0; i < half; ++i) {
            double angle = (double)b->pos[t] * inv_freq[i];
            row[i] = (float)(cos(angle) * af);
            row[half + i] = (float)(sin(angle) * af);
        }
    }
}

/* Rotates each head's pairs by the token's angles: (v[i], v[i + half]) in the rotate-half
 * layout (neox: HF checkpoints, qwen2), (v[2i], v[2i + 1]) in GGUF llama's. */
static void rope_rows(const ak_llm_model *m, float *x, int32_t T, int32_t n_heads,
                      const float *cs) {
    ak__kernels_active()->f32_rope(x, (size_t)T, (size_t)n_heads, (size_t)m->hp.head_dim,
                                   m->hp.rope_neox, cs);
}

/* x ← silu(x)·up = x / (1 + e^-x) · up over rows [begin, end) */
static void swiglu_range(void *ctx, size_t begin, size_t end, int thread_index) {
    (void)thread_index;
    const rows_ctx *c = ctx;
    size_t i = begin * (size_t)c->n, i1 = end * (size_t)c->n;
    ak__kernels_active()->f32_swiglu(c->x + i, c->up + i, i1 - i);
}

static void swiglu(float *gate, const float *up, int32_t rows, int32_t n, ak_threadpool *pool) {
    rows_ctx c = {NULL, gate, NULL, up, n, 0};
    if (rows < 8) swiglu_range(&c, 0, (size_t)rows, 0);
    else ak_threadpool_parallel_for(pool, (size_t)rows, 4, swiglu_range, &c);
}

/* x ← gelu_tanh(x)·up (Gemma's GeGLU) over rows [begin, end) */
static void geglu_range(void *ctx, size_t begin, size_t end, int thread_index) {
    (void)thread_index;
    const rows_ctx *c = ctx;
    size_t i = begin * (size_t)c->n, i1 = end * (size_t)c->n;
    ak__kernels_active()->f32_geglu(c->x + i, c->up + i, i1 - i);
}

static void gated_act(const ak__llm_hparams *hp, float *gate, const float *up, int32_t rows,
                      ak_threadpool *pool) {
    if (!hp->ffn_gelu) {
        swiglu(gate, up, rows, hp->ffn_dim, pool);
        return;
    }
    rows_ctx c = {NULL, gate, NULL, up, hp->ffn_dim, 0};
    if (rows < 8) geglu_range(&c, 0, (size_t)rows, 0);
    else ak_threadpool_parallel_for(pool, (size_t)rows, 4, geglu_range, &c);
}

/* RMSNorm of every head of T rows of n_heads × head_dim values, in place (q/k norm);
 * OLMo-2 (qk_norm 2) normalizes each row's whole projection instead. */
static void head_norm(const ak__llm_hparams *hp, float *x, const float *w, int32_t T,
                      int32_t n_heads) {
    if (!w) return;
    ak__kf_rmsnorm *rmsnorm = ak__kernels_active()->f32_rmsnorm;
    size_t hd = (size_t)hp->head_dim, groups = (size_t)n_heads;
    if (hp->qk_norm == 2) {
        hd *= groups;
        groups = 1;
    }
    for (size_t r = 0; r < (size_t)T * groups; ++r)
        rmsnorm(x + r * hd, x + r * hd, w, hd, hp->norm_eps);
}

/* x += residual_scale · norm(y) (the norm only where the block has a post-norm): the
 * end of a block whose output could not be accumulated straight into x. */
static void residual_add(const ak__llm_hparams *hp, float *x, float *y, const float *post_norm,
                         int32_t T, ak_threadpool *pool) {
    size_t n = (size_t)T * (size_t)hp->dim;
    if (post_norm) rmsnorm_rows(y, y, post_norm, T, hp->dim, hp->norm_eps, pool);
    ak__kernels_active()->f32_axpy(x, hp->residual_scale, y, n);
}

/* A block's output goes straight into the residual unless it is scaled or normed first. */
static int direct_residual(const ak__llm_hparams *hp) {
    return hp->residual_scale == 1.0f && !hp->post_norms;
}

static ak_status embed(const ak_llm_model *m, const ak__batch *b, float *x) {
    const ak__matrix *e = &m->tok_embd;
    for (int32_t t = 0; t < b->n_tokens; ++t) {
        int32_t id = b->tokens[t];
        if (id < 0 || id >= m->hp.n_vocab)
            return AK_FAIL(AK_ERR_INVALID_ARG, "forward: token id %d outside the vocabulary "
                           "[0, %d)", id, m->hp.n_vocab);
        float *row = x + (size_t)t * (size_t)m->hp.dim;
        AK_CHECK(ak_dequantize_row(e->type, (const char *)e->data + (size_t)id * e->row_bytes,
                                   row, (size_t)m->hp.dim));
        if (m->hp.embed_scale != 1.0f)
            for (int32_t i = 0; i < m->hp.dim; ++i) row[i] *= m->hp.embed_scale;
    }
    return AK_OK;
}

static ak_status attention_block(const ak_llm_model *m, ak__forward_ws *ws,
                                 ak__kv_cache *kv, const ak__batch *b, int32_t li,
                                 ak_threadpool *pool) {
    const ak__llm_hparams *hp = &m->hp;
    const ak__layer *l = &m->layers[li];
    int32_t T = b->n_tokens;
    const float *in = ws->x; /* OLMo-2 reads the residual itself */
    if (l->attn_norm_b) {
        layernorm_rows(ws->xb, ws->x, l->attn_norm, l->attn_norm_b, T, hp->dim, hp->norm_eps);
        in = ws->xb;
    } else if (l->attn_norm) {
        rmsnorm_rows(ws->xb, ws->x, l->attn_norm, T, hp->dim, hp->norm_eps, pool);
        in = ws->xb;
    }
    const ak__matrix *qkv[] = {&l->wq, &l->wk, &l->wv};
    float *qkv_out[] = {ws->q, ws->k, ws->v};
    AK_CHECK(linear_group(qkv, qkv_out, 3, in, T, pool));
    add_bias(ws->q, l->bq, T, (int32_t)l->wq.rows);
    add_bias(ws->k, l->bk, T, (int32_t)l->wk.rows);
    add_bias(ws->v, l->bv, T, (int32_t)l->wv.rows);
    head_norm(hp, ws->q, l->q_norm, T, hp->n_heads);
    head_norm(hp, ws->k, l->k_norm, T, hp->n_kv_heads);
    int slides = ak__hp_layer_slides(hp, li);
    const float *cs = slides && ws->cos_sin_local ? ws->cos_sin_local : ws->cos_sin;
    rope_rows(m, ws->q, T, hp->n_heads, cs);
    rope_rows(m, ws->k, T, hp->n_kv_heads, cs);
    ak__kv_store(kv, li, b, ws->k, ws->v);
    float scale = hp->attn_scale > 0 ? hp->attn_scale : 1.0f / sqrtf((float)hp->head_dim);
    ak__attention_args a = {kv, li, hp->n_heads, b, ws->q, ws->att, scale, ws->attn_scratch,
                            ws->attn_per_thread, ws->tile_starts,
                            slides ? hp->sliding_window : 0, hp->attn_softcap};
    ak__attention(&a, pool);
    if (direct_residual(hp)) {
        AK_CHECK(linear(&l->wo, ws->att, T, ws->x, 1, pool));
        add_bias(ws->x, l->bo, T, hp->dim); /* x + (W·a + b) */
        return AK_OK;
    }
    AK_CHECK(linear(&l->wo, ws->att, T, ws->xb, 0, pool));
    add_bias(ws->xb, l->bo, T, hp->dim);
    residual_add(hp, ws->x, ws->xb, l->attn_post_norm, T, pool);
    return AK_OK;
}

/* ---- mixture of experts ---------------------------------------------------------------- */

/* Each token's n_used best experts (first index on ties) and their weights: the softmax
 * probabilities of the router's logits, renormalized to sum 1 when hp.norm_topk. */
static void route(const ak__llm_hparams *hp, ak__forward_ws *ws, int32_t T) {
    size_t E = (size_t)hp->n_experts, K = (size_t)hp->n_experts_used;
    ak__kf_moe_route *route_token = ak__kernels_active()->f32_moe_route;
    for (size_t t = 0; t < (size_t)T; ++t)
        route_token(ws->probs + t * E, E, K, hp->norm_topk, ws->sel + t * K, ws->sel_w + t * K);
}

/* A SwiGLU FFN of rows × dim inputs into out (rows × dim). */
static ak_status swiglu_ffn(const ak__llm_hparams *hp, ak__forward_ws *ws, const ak__matrix *g,
                            const ak__matrix *u, const ak__matrix *d, const float *x,
                            int32_t rows, float *out, ak_threadpool *pool) {
    (void)hp;
    const ak__matrix *gate_up[] = {g, u};
    float *gate_up_out[] = {ws->gate, ws->up};
    AK_CHECK(linear_group(gate_up, gate_up_out, 2, x, rows, pool));
    swiglu(ws->gate, ws->up, rows, (int32_t)g->rows, pool);
    return linear(d, ws->gate, rows, out, 0, pool);
}

/* The layer's FFN output for the T normed rows in ws->xb, into ws->moe_out: per expert,
 * the tokens that chose it are gathered, run through it once (ak_linear on its
 * matrices), and their rows added back with the token's weight for it. Experts no token
 * chose cost nothing. */
static ak_status moe_block(const ak__llm_hparams *hp, const ak__layer *l, ak__forward_ws *ws,
                           int32_t T, ak_threadpool *pool) {
    size_t D = (size_t)hp->dim;
    int32_t K = hp->n_experts_used;
    AK_CHECK(linear(&l->router, ws->xb, T, ws->probs, 0, pool));
    route(hp, ws, T);
    memset(ws->moe_out, 0, (size_t)T * D * sizeof(float));
    for (int32_t e = 0; e < hp->n_experts; ++e) {
        int32_t n = 0;
        for (int32_t t = 0; t < T; ++t)
            for (int32_t k = 0; k < K; ++k)
                if (ws->sel[(size_t)t * (size_t)K + (size_t)k] == e) {
                    ws->rows_of[n] = t * K + k; /* token and slot */
                    memcpy(ws->xe + (size_t)n++ * D, ws->xb + (size_t)t * D, D * sizeof(float));
                }
        if (n == 0) continue;
        AK_CHECK(swiglu_ffn(hp, ws, &l->exp_gate[e], &l->exp_up[e], &l->exp_down[e], ws->xe, n,
                            ws->ye, pool));
        for (int32_t r = 0; r < n; ++r) {
            int32_t t = ws->rows_of[r] / K;
            ak__kernels_active()->f32_axpy(ws->moe_out + (size_t)t * D, ws->sel_w[ws->rows_of[r]],
                                           ws->ye + (size_t)r * D, D);
        }
    }
    if (!l->sh_gate_inp) return AK_OK;
    /* Qwen2-MoE's shared expert, for every token, weighted by sigmoid(x·w) */
    AK_CHECK(swiglu_ffn(hp, ws, &l->sh_gate, &l->sh_up, &l->sh_down, ws->xb, T, ws->ye, pool));
    for (int32_t t = 0; t < T; ++t) {
        const float *x = ws->xb + (size_t)t * D;
        double s = 0;
        for (size_t i = 0; i < D; ++i) s += (double)x[i] * l->sh_gate_inp[i];
        float g = (float)(1.0 / (1.0 + exp(-s)));
        ak__kernels_active()->f32_axpy(ws->moe_out + (size_t)t * D, g, ws->ye + (size_t)t * D, D);
    }
    return AK_OK;
}

static ak_status ffn_block(const ak_llm_model *m, ak__forward_ws *ws, int32_t T, int32_t li,
                           ak_threadpool *pool) {
    const ak__llm_hparams *hp = &m->hp;
    const ak__layer *l = &m->layers[li];
    if (l->ffn_norm_b) layernorm_rows(ws->xb, ws->x, l->ffn_norm, l->ffn_norm_b, T, hp->dim, hp->norm_eps);
    else if (l->ffn_norm) rmsnorm_rows(ws->xb, ws->x, l->ffn_norm, T, hp->dim, hp->norm_eps, pool);
    else memcpy(ws->xb, ws->x, (size_t)T * (size_t)hp->dim * sizeof(float)); /* OLMo-2 */
    if (hp->plain_mlp) { /* StarCoder2: x + (down·gelu(up·h + b_up) + b_down) */
        AK_CHECK(linear(&l->w_up, ws->xb, T, ws->gate, 0, pool));
        add_bias(ws->gate, l->b_up, T, hp->ffn_dim);
        ak__kernels_active()->f32_gelu(ws->gate, (size_t)T * (size_t)hp->ffn_dim);
        AK_CHECK(linear(&l->w_down, ws->gate, T, ws->xb, 0, pool));
        add_bias(ws->xb, l->b_down, T, hp->dim);
        residual_add(hp, ws->x, ws->xb, l->ffn_post_norm, T, pool);
        return AK_OK;
    }
    if (hp->n_experts > 0) {
        AK_CHECK(moe_block(hp, l, ws, T, pool));
        residual_add(hp, ws->x, ws->moe_out, l->ffn_post_norm, T, pool);
        return AK_OK;
    }
    const ak__matrix *gate_up[] = {&l->w_gate, &l->w_up};
    float *gate_up_out[] = {ws->gate, ws->up};
    AK_CHECK(linear_group(gate_up, gate_up_out, 2, ws->xb, T, pool));
    gated_act(hp, ws->gate, ws->up, T, pool);
    if (direct_residual(hp)) return linear(&l->w_down, ws->gate, T, ws->x, 1, pool);
    AK_CHECK(linear(&l->w_down, ws->gate, T, ws->xb, 0, pool));
    residual_add(hp, ws->x, ws->xb, l->ffn_post_norm, T, pool);
    return AK_OK;
}

static ak_status check_batch(const ak_llm_model *m, const ak__forward_ws *ws,
                             const ak__kv_cache *kv, const ak__batch *b) {
    AK_ARG_CHECK(b->n_tokens >= 1 && b->n_tokens <= ws->max_tokens,
                 "forward: %d tokens (workspace holds %d)", b->n_tokens, ws->max_tokens);
    AK_ARG_CHECK(b->n_out >= 0 && b->n_out <= ws->max_out, "forward: %d output rows (max %d)",
                 b->n_out, ws->max_out);
    AK_ARG_CHECK(kv->n_layers == m->hp.n_layers && kv->n_kv_heads == m->hp.n_kv_heads &&
                 kv->head_dim == m->hp.head_dim, "forward: the KV cache has another shape");
    for (int32_t t = 0; t < b->n_tokens; ++t)
        AK_ARG_CHECK(b->pos[t] >= 0 && b->pos[t] < ws->max_context && b->seq[t] >= 0 &&
                     b->seq[t] < b->n_seqs && b->pos[t] < b->seq_len[b->seq[t]],
                     "forward: token %d has position %d of sequence %d out of range", t,
                     b->pos[t], b->seq[t]);
    return AK_OK;
}

ak_status ak__forward(const ak_llm_model *m, ak__forward_ws *ws, ak__kv_cache *kv,
                      const ak__batch *b, float *logits, ak_threadpool *pool) {
    AK_CHECK(check_batch(m, ws, kv, b));
    const ak__llm_hparams *hp = &m->hp;
    AK_CHECK(embed(m, b, ws->x));
    rope_tables(m, m->inv_freq, b, ws->cos_sin);
    if (ws->cos_sin_local) rope_tables(m, m->inv_freq_local, b, ws->cos_sin_local);
    for (int32_t li = 0; li < hp->n_layers; ++li) {
        AK_CHECK(attention_block(m, ws, kv, b, li, pool));
        AK_CHECK(ffn_block(m, ws, b->n_tokens, li, pool));
    }
    if (b->n_out == 0) return AK_OK;
    for (int32_t r = 0; r < b->n_out; ++r) {
        float *out = ws->xo + (size_t)r * (size_t)hp->dim;
        const float *x = ws->x + (size_t)b->out_rows[r] * (size_t)hp->dim;
        if (m->output_norm_b)
            ak__kernels_active()->f32_layernorm(out, x, m->output_norm, m->output_norm_b,
                                                (size_t)hp->dim, hp->norm_eps);
        else
            ak__kernels_active()->f32_rmsnorm(out, x, m->output_norm, (size_t)hp->dim,
                                              hp->norm_eps);
    }
    AK_CHECK(linear(&m->output, ws->xo, b->n_out, logits, 0, pool));
    size_t n = (size_t)b->n_out * (size_t)hp->n_vocab;
    if (hp->logit_scale != 1.0f)
        ak__kernels_active()->f32_scale(logits, logits, hp->logit_scale, n);
    if (hp->final_softcap > 0) ak__kernels_active()->f32_softcap(logits, n, hp->final_softcap);
    return AK_OK;
}
