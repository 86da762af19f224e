/* com.microsoft MultiHeadAttention: attention over already projected queries, keys and
 * values, in the forms the operator's schema allows:
 *   query [B,S,N·D], key [B,L,N·D], value [B,L,N·Dv]   (separate; `bias` [3 parts] added)
 *   query [B,S,N,3,D], no key or value                 (packed QKV)
 *   query [B,S,N·D], key [B,L,N,2,D], no value         (packed KV)
 *   query [B,S,N·D], key [B,N,L,D], value [B,N,L,Dv]   (keys and values per head)
 * key_padding_mask (int32 [B] lengths, [B,T] 0/1, [B,S,T]), attention_bias [B|1,N|1,S,T],
 * past_key / past_value [B,N,P,D] (prepended; T = P + L) with present_key / present_value
 * [B,N,T,D], num_heads, scale (default 1/sqrt(D)), unidirectional (causal) and
 * mask_filter_value. Refused by name: float16, the [3B+2] mask, past_sequence_length
 * (buffer sharing), cache_indirection (beam search), the qk output, and bias or past with
 * the packed or per-head forms. The graph optimizer's com.accelkit variant also takes
 * split_shapes (see its definition at the end). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "infer/ops/attention/attention.h"

enum { IN_Q, IN_K, IN_V, IN_BIAS, IN_MASK, IN_ATTN_BIAS, IN_PAST_K, IN_PAST_V, IN_PAST_LEN,
       IN_CACHE_INDIRECTION };
enum { OUT_Y, OUT_PRESENT_K, OUT_PRESENT_V, OUT_QK };

static int fused_node(const ak__ir_node *n);

typedef enum { FORM_SEPARATE, FORM_PACKED_QKV, FORM_PACKED_KV, FORM_PER_HEAD } mha_form;

/* The node's shapes and where each operand lives in the workspace (float offsets). */
typedef struct mha_plan {
    mha_form form;
    size_t B, S, L, P, N, D, Dv;
    int biased, has_past, concat_k, concat_v; /* concat_*: K/V rebuilt in the workspace */
    size_t ws_q, ws_k, ws_v, ws_ck, ws_cv, ws_attn, ws_total;
} mha_plan;

static ak_status fail(const ak__op_ctx *ctx, const char *what) {
    return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED, "%s is not implemented", what);
}

/* The [b, s, N·D] a Reshape of t to `shape` (4 entries; 0 copies t's dim, -1 is
 * inferred) splits into heads: how the fused node reads its inputs. */
static ak_status split_dims(const ak__op_ctx *ctx, const ak__tensor *t, const int64_t *shape,
                            ak__tensor *out) {
    int64_t d[4], known = 1;
    int infer = -1;
    for (int i = 0; i < 4; i++) {
        d[i] = shape[i] == 0 && i < t->rank ? t->dims[i] : shape[i];
        if (d[i] == -1 && infer < 0) infer = i;
        else if (d[i] < 0 || (shape[i] == 0 && i >= t->rank) ||
                 __builtin_mul_overflow(known, d[i], &known))
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "split_shapes do not fit the input's shape");
    }
    if (infer >= 0) d[infer] = known ? (int64_t)t->count / known : 0;
    int64_t total = 1;
    for (int i = 0; i < 4; i++)
        if (__builtin_mul_overflow(total, d[i], &total)) total = -1;
    if (total != (int64_t)t->count)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                          "an input of %llu elements cannot be split as the head split's Reshape says",
                          (unsigned long long)t->count);
    *out = *t;
    int64_t dims[3] = {d[0], d[1], d[2] * d[3]};
    return ak__tensor_set_shape(out, t->type, 3, dims, "split input");
}

static ak_status shapes(ak__op_ctx *ctx, mha_plan *pl) {
    const ak__tensor *q = ak__op_in(ctx, IN_Q), *k = ak__op_in(ctx, IN_K),
                     *v = ak__op_in(ctx, IN_V);
    /* the graph optimizer's node (com.accelkit) reads q, k and v as its head splits did */
    ak__tensor split[3];
    const int64_t *sh;
    if (fused_node(ctx->node) && ak__attr_ints(ctx->node, "split_shapes", &sh) == 12 && q && k && v) {
        AK_CHECK(split_dims(ctx, q, sh, &split[0]));
        AK_CHECK(split_dims(ctx, k, sh + 4, &split[1]));
        AK_CHECK(split_dims(ctx, v, sh + 8, &split[2]));
        q = &split[0], k = &split[1], v = &split[2];
    }
    int64_t n = ak__attr_int(ctx->node, "num_heads", 0);
    if (n <= 0) return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "num_heads must be positive");
    pl->N = (size_t)n;
    if (!q) return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "input 0 (query) is required");
    for (uint32_t i = IN_Q; i <= IN_V; i++) {
        const ak__tensor *t = ak__op_in(ctx, i);
        if (t && t->type != AK_ELEM_F32)
            return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED,
                              "input %u of type %s is not supported (float32 is)", i,
                              ak_elem_type_name(t->type));
    }
    const int64_t *qd = q->dims;
    if (q->rank == 5) {
        if (k || v) return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "packed QKV query with key or value");
        if (qd[2] != n || qd[3] != 3)
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "packed QKV must be [B,S,num_heads,3,D]");
        pl->form = FORM_PACKED_QKV;
        pl->B = (size_t)qd[0], pl->S = pl->L = (size_t)qd[1], pl->D = pl->Dv = (size_t)qd[4];
        return AK_OK;
    }
    if (q->rank != 3 || qd[2] % n)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                          "query must be [B,S,hidden] with hidden a multiple of num_heads, or [B,S,N,3,D]");
    pl->B = (size_t)qd[0], pl->S = (size_t)qd[1], pl->D = (size_t)(qd[2] / n);
    if (!k) return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "input 1 (key) is required with a 3-D query");
    const int64_t *kd = k->dims;
    if (k->rank == 5) {
        if (v) return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "packed KV key with a value");
        if (kd[0] != qd[0] || kd[2] != n || kd[3] != 2 || kd[4] != (int64_t)pl->D)
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "packed KV must be [B,L,num_heads,2,D]");
        pl->form = FORM_PACKED_KV;
        pl->L = (size_t)kd[1], pl->Dv = pl->D;
        return AK_OK;
    }
    if (!v) return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "input 2 (value) is required with a 3-D or 4-D key");
    const int64_t *vd = v->dims;
    if (k->rank == 4) {
        if (v->rank != 4 || kd[0] != qd[0] || kd[1] != n || kd[3] != (int64_t)pl->D ||
            vd[0] != qd[0] || vd[1] != n || vd[2] != kd[2])
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                              "per-head key and value must be [B,num_heads,L,D] and [B,num_heads,L,Dv]");
        pl->form = FORM_PER_HEAD;
        pl->L = (size_t)kd[2], pl->Dv = (size_t)vd[3];
        return AK_OK;
    }
    if (k->rank != 3 || v->rank != 3 || kd[0] != qd[0] || kd[2] != qd[2] || vd[0] != qd[0] ||
        vd[1] != kd[1] || vd[2] % n)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                          "key and value must be [B,L,hidden] and [B,L,v_hidden] (v_hidden a multiple of num_heads)");
    pl->form = FORM_SEPARATE;
    pl->L = (size_t)kd[1], pl->Dv = (size_t)(vd[2] / n);
    return AK_OK;
}

/* Checks the optional inputs and outputs and lays out the workspace. */
static ak_status plan(ak__op_ctx *ctx, mha_plan *pl) {
    memset(pl, 0, sizeof *pl);
    AK_CHECK(shapes(ctx, pl));
    if (ak__op_in(ctx, IN_PAST_LEN)) return fail(ctx, "past_sequence_length (past/present buffer sharing)");
    if (ak__op_in(ctx, IN_CACHE_INDIRECTION)) return fail(ctx, "cache_indirection (beam search)");
    if (ak__op_out(ctx, OUT_QK)) return fail(ctx, "the qk output");
    const ak__tensor *bias = ak__op_in(ctx, IN_BIAS), *pk = ak__op_in(ctx, IN_PAST_K),
                     *pv = ak__op_in(ctx, IN_PAST_V);
    size_t B = pl->B, N = pl->N, D = pl->D, Dv = pl->Dv;
    if (bias) {
        if (pl->form != FORM_SEPARATE) return fail(ctx, "bias with packed or per-head key/value");
        if (bias->type != AK_ELEM_F32 || bias->rank != 1 ||
            bias->dims[0] != (int64_t)(N * (2 * D + Dv)))
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "bias must be float32 [2*hidden + v_hidden]");
        pl->biased = 1;
    }
    if (!pk != !pv) return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "past_key and past_value go together");
    if (pk) {
        if (pl->form == FORM_PER_HEAD) return fail(ctx, "past_key/past_value with per-head key and value");
        if (pk->type != AK_ELEM_F32 || pv->type != AK_ELEM_F32 || pk->rank != 4 || pv->rank != 4 ||
            pk->dims[0] != (int64_t)B || pk->dims[1] != (int64_t)N || pk->dims[3] != (int64_t)D ||
            pv->dims[0] != (int64_t)B || pv->dims[1] != (int64_t)N || pv->dims[2] != pk->dims[2] ||
            pv->dims[3] != (int64_t)Dv)
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                              "past_key and past_value must be float32 [B,num_heads,P,D] and [B,num_heads,P,Dv]");
        pl->has_past = 1, pl->P = (size_t)pk->dims[2];
    }
    size_t T = pl->P + pl->L, off = 0;
    if (pl->biased) {
        pl->ws_q = off, off += B * pl->S * N * D;
        pl->ws_k = off, off += B * pl->L * N * D;
        pl->ws_v = off, off += B * pl->L * N * Dv;
    }
    /* with past, keys and values are read from the concatenation: present when asked for */
    pl->concat_k = pl->has_past && !ak__op_out(ctx, OUT_PRESENT_K);
    pl->concat_v = pl->has_past && !ak__op_out(ctx, OUT_PRESENT_V);
    if (pl->concat_k) pl->ws_ck = off, off += B * N * T * D;
    if (pl->concat_v) pl->ws_cv = off, off += B * N * T * Dv;
    pl->ws_attn = off;
    return AK_OK;
}

static void problem_shape(const ak__op_ctx *ctx, const mha_plan *pl, ak__attn_problem *p) {
    memset(p, 0, sizeof *p);
    p->B = pl->B, p->N = pl->N, p->S = pl->S, p->T = pl->P + pl->L, p->D = pl->D, p->Dv = pl->Dv;
    float scale = ak__attr_float(ctx->node, "scale", 0.0f);
    p->scale = scale != 0.0f ? scale : (float)(1.0 / sqrt((double)(pl->D ? pl->D : 1)));
    p->causal = ak__attr_int(ctx->node, "unidirectional", 0) != 0;
    p->mask_filter = ak__attr_float(ctx->node, "mask_filter_value", -10000.0f);
}

static int fused_node(const ak__ir_node *n) {
    return n->domain[0] && strcmp(n->domain, "com.accelkit") == 0;
}

/* The masks: key_padding_mask (int32; in the fusion's node also a bool Where condition,
 * bool_mask_keeps saying whether true keeps the score) and attention_bias. */
static ak_status read_masks(const ak__op_ctx *ctx, ak__attn_problem *p) {
    const ak__tensor *mask = ak__op_in(ctx, IN_MASK), *ab = ak__op_in(ctx, IN_ATTN_BIAS);
    if (mask && mask->type == AK_ELEM_BOOL && fused_node(ctx->node))
        AK_CHECK(ak__attn_set_bool_mask(ctx, mask, (int)ak__attr_int(ctx->node, "bool_mask_keeps", 1), p));
    else if (mask)
        AK_CHECK(ak__attn_set_mask(ctx, mask, 0, p));
    if (ab) AK_CHECK(ak__attn_set_bias(ctx, ab, p));
    return AK_OK;
}

static ak_status mha_reshape(ak__op_ctx *ctx) {
    mha_plan pl;
    AK_CHECK(plan(ctx, &pl));
    ak__attn_problem p;
    problem_shape(ctx, &pl, &p);
    AK_CHECK(read_masks(ctx, &p));
    int threads = 1;
    if (ak_threadpool_size(ctx->pool, &threads) != AK_OK || threads < 1) threads = 1;
    ctx->workspace_bytes = pl.ws_attn * sizeof(float) + ak__attn_workspace_bytes(&p, threads);
    int64_t y[3] = {(int64_t)pl.B, (int64_t)pl.S, (int64_t)(pl.N * pl.Dv)};
    int64_t pk[4] = {(int64_t)pl.B, (int64_t)pl.N, (int64_t)p.T, (int64_t)pl.D};
    int64_t pv[4] = {(int64_t)pl.B, (int64_t)pl.N, (int64_t)p.T, (int64_t)pl.Dv};
    AK_CHECK(ak__op_set_output(ctx, OUT_Y, AK_ELEM_F32, 3, y));
    AK_CHECK(ak__op_set_output(ctx, OUT_PRESENT_K, AK_ELEM_F32, 4, pk));
    return ak__op_set_output(ctx, OUT_PRESENT_V, AK_ELEM_F32, 4, pv);
}

/* x [B,R,N·D] plus bias[0..N·D) into dst. */
static void add_bias(float *dst, const float *x, const float *bias, size_t rows, size_t width) {
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < width; c++) dst[r * width + c] = x[r * width + c] + bias[c];
}

/* View of a [B,R,N·D] tensor by head. */
static ak__attn_view by_token(const float *data, size_t R, size_t N, size_t D) {
    return (ak__attn_view){data, R * N * D, D, N * D};
}

/* View of a [B,N,R,D] tensor. */
static ak__attn_view by_head(const float *data, size_t R, size_t N, size_t D) {
    return (ak__attn_view){data, N * R * D, R * D, D};
}

static ak_status mha_run(ak__op_ctx *ctx) {
    mha_plan pl;
    AK_CHECK(plan(ctx, &pl));
    ak__attn_problem p;
    problem_shape(ctx, &pl, &p);
    AK_CHECK(read_masks(ctx, &p));
    float *ws = ctx->workspace;
    size_t B = pl.B, S = pl.S, L = pl.L, N = pl.N, D = pl.D, Dv = pl.Dv;
    const float *q = ak__op_in(ctx, IN_Q)->data;
    const ak__tensor *kt = ak__op_in(ctx, IN_K), *vt = ak__op_in(ctx, IN_V);
    ak__attn_view k = {0}, v = {0};
    switch (pl.form) {
    case FORM_PACKED_QKV: /* [B,S,N,3,D] */
        p.q = (ak__attn_view){q, S * N * 3 * D, 3 * D, N * 3 * D};
        k = p.q, k.data += D;
        v = p.q, v.data += 2 * D;
        break;
    case FORM_PACKED_KV: /* [B,L,N,2,D] */
        p.q = by_token(q, S, N, D);
        k = (ak__attn_view){kt->data, L * N * 2 * D, 2 * D, N * 2 * D};
        v = k, v.data += D;
        break;
    case FORM_PER_HEAD:
        p.q = by_token(q, S, N, D);
        k = by_head(kt->data, L, N, D);
        v = by_head(vt->data, L, N, Dv);
        break;
    case FORM_SEPARATE:
        if (pl.biased) {
            const float *bias = ak__op_in(ctx, IN_BIAS)->data;
            add_bias(ws + pl.ws_q, q, bias, B * S, N * D);
            add_bias(ws + pl.ws_k, kt->data, bias + N * D, B * L, N * D);
            add_bias(ws + pl.ws_v, vt->data, bias + 2 * N * D, B * L, N * Dv);
            q = ws + pl.ws_q;
        }
        p.q = by_token(q, S, N, D);
        k = by_token(pl.biased ? ws + pl.ws_k : kt->data, L, N, D);
        v = by_token(pl.biased ? ws + pl.ws_v : vt->data, L, N, Dv);
        break;
    }
    /* keys and values with the past in front (or just the new ones in present's layout) */
    ak__tensor *prk = ak__op_out(ctx, OUT_PRESENT_K), *prv = ak__op_out(ctx, OUT_PRESENT_V);
    const float *past_k = pl.has_past ? ak__op_in(ctx, IN_PAST_K)->data : NULL;
    const float *past_v = pl.has_past ? ak__op_in(ctx, IN_PAST_V)->data : NULL;
    float *ck = pl.concat_k ? ws + pl.ws_ck : prk ? (float *)prk->data : NULL;
    float *cv = pl.concat_v ? ws + pl.ws_cv : prv ? (float *)prv->data : NULL;
    if (ck) ak__attn_concat(ck, past_k, pl.P, k, L, B, N, D);
    if (cv) ak__attn_concat(cv, past_v, pl.P, v, L, B, N, Dv);
    if (pl.has_past) p.k = by_head(ck, p.T, N, D), p.v = by_head(cv, p.T, N, Dv);
    else p.k = k, p.v = v;
    ak__tensor *y = ak__op_out(ctx, OUT_Y);
    if (!y) return AK_OK; /* only the present outputs asked for */
    p.out = y->data;
    p.out_batch = S * N * Dv, p.out_head = Dv, p.out_row = N * Dv;
    return ak__attn_run(&p, ws + pl.ws_attn, ctx->pool);
}

const ak__op_def ak__op_multi_head_attention = {"com.microsoft", "MultiHeadAttention", 1, 0, NULL,
                                                NULL, mha_reshape, mha_run};
/* What the graph optimizer's attention fusion emits: the same operator, whose q, k and v
 * are the inputs of the head splits it replaced, read as those Reshapes would
 * (split_shapes: their three 4-entry shapes), so the fusion is exact whatever shapes
 * the inputs have at run time. */
const ak__op_def ak__op_fused_multi_head_attention = {"com.accelkit", "MultiHeadAttention", 1, 0,
                                                      NULL, NULL, mha_reshape, mha_run};
