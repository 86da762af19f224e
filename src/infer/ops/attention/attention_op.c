/* com.microsoft Attention: the Q, K and V projections of one input with merged weights,
 * then multi-head attention.
 *   input [B,S,in], weights [in, Hq+Hk+Hv], bias [Hq+Hk+Hv] (optional)
 *   mask_index int32: [B] end positions (right padding), [2B] ends then starts (left
 *   padding), [B,T] 0/1, [B,S,T] 0/1, [B,1,M,M] 0/1 (row past+i of the square)
 *   past [2,B,N,P,D] and present [2,B,N,P+S,D]; attention_bias [B|1,N|1,S,T]
 * Attributes: num_heads, qkv_hidden_sizes (Hq = Hk; default three equal thirds), scale
 * (default 1/sqrt(D)), unidirectional, mask_filter_value (default -10000). Refused by
 * name: do_rotary, past_present_share_buffer, past_sequence_length, the [3B+2] mask,
 * float16. The projection is one SGEMM into the workspace ([B·S, Hq+Hk+Hv], started from
 * the bias rows); the attention reads Q, K and V from there in place. */
#include <math.h>
#include <string.h>

#include "accelkit/kernels.h"
#include "infer/ops/attention/attention.h"

enum { IN_X, IN_W, IN_BIAS, IN_MASK, IN_PAST, IN_ATTN_BIAS, IN_PAST_LEN };
enum { OUT_Y, OUT_PRESENT };

typedef struct att_plan {
    size_t B, S, in, N, hq, hk, hv, P; /* widths of the three projections */
    int has_past;
    size_t ws_k, ws_v, ws_attn; /* float offsets: the projections first, [B·S, hq+hk+hv] */
} att_plan;

static ak_status refuse(const ak__op_ctx *ctx, const char *what) {
    return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED, "%s is not implemented", what);
}

static ak_status widths(ak__op_ctx *ctx, att_plan *pl, int64_t total) {
    const int64_t *sizes;
    size_t n = ak__attr_ints(ctx->node, "qkv_hidden_sizes", &sizes);
    if (n == 0) {
        if (total % 3) return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "weights' width is not 3·hidden");
        pl->hq = pl->hk = pl->hv = (size_t)(total / 3);
    } else if (n != 3 || sizes[0] <= 0 || sizes[1] != sizes[0] || sizes[2] <= 0 ||
               sizes[0] + sizes[1] + sizes[2] != total) {
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                          "qkv_hidden_sizes must be three positive sizes (Q and K equal) summing to the weights' width");
    } else {
        pl->hq = (size_t)sizes[0], pl->hk = (size_t)sizes[1], pl->hv = (size_t)sizes[2];
    }
    if (pl->hq % pl->N || pl->hv % pl->N)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "hidden sizes must be multiples of num_heads");
    return AK_OK;
}

static ak_status plan(ak__op_ctx *ctx, att_plan *pl) {
    memset(pl, 0, sizeof *pl);
    const ak__ir_node *n = ctx->node;
    if (ak__attr_int(n, "do_rotary", 0)) return refuse(ctx, "do_rotary (rotary embedding)");
    if (ak__attr_int(n, "past_present_share_buffer", 0))
        return refuse(ctx, "past_present_share_buffer");
    if (ak__op_in(ctx, IN_PAST_LEN)) return refuse(ctx, "past_sequence_length");
    int64_t heads = ak__attr_int(n, "num_heads", 0);
    if (heads <= 0) return AK_OP_FAIL(n, AK_ERR_INVALID_MODEL, "num_heads must be positive");
    pl->N = (size_t)heads;
    const ak__tensor *x, *w, *bias = ak__op_in(ctx, IN_BIAS), *past = ak__op_in(ctx, IN_PAST);
    AK_CHECK(ak__op_require(ctx, IN_X, &x));
    AK_CHECK(ak__op_require(ctx, IN_W, &w));
    if (x->type != AK_ELEM_F32 || w->type != AK_ELEM_F32 || (bias && bias->type != AK_ELEM_F32))
        return AK_OP_FAIL(n, AK_ERR_UNSUPPORTED, "input, weights and bias of type %s are not supported (float32 is)",
                          ak_elem_type_name(x->type != AK_ELEM_F32 ? x->type : w->type));
    if (x->rank != 3 || w->rank != 2 || w->dims[0] != x->dims[2])
        return AK_OP_FAIL(n, AK_ERR_INVALID_MODEL, "input must be [B,S,in] and weights [in, Hq+Hk+Hv]");
    pl->B = (size_t)x->dims[0], pl->S = (size_t)x->dims[1], pl->in = (size_t)x->dims[2];
    AK_CHECK(widths(ctx, pl, w->dims[1]));
    if (bias && (bias->rank != 1 || bias->dims[0] != w->dims[1]))
        return AK_OP_FAIL(n, AK_ERR_INVALID_MODEL, "bias must be [Hq+Hk+Hv]");
    size_t D = pl->hq / pl->N;
    if ((past || ak__op_out(ctx, OUT_PRESENT)) && pl->hv != pl->hq)
        return AK_OP_FAIL(n, AK_ERR_INVALID_MODEL, "past and present need equal Q, K and V hidden sizes");
    if (past) {
        const int64_t *d = past->dims;
        if (past->type != AK_ELEM_F32 || past->rank != 5 || d[0] != 2 || d[1] != (int64_t)pl->B ||
            d[2] != (int64_t)pl->N || d[4] != (int64_t)D)
            return AK_OP_FAIL(n, AK_ERR_INVALID_MODEL, "past must be float32 [2,B,num_heads,P,head_size]");
        pl->has_past = 1, pl->P = (size_t)d[3];
    }
    size_t T = pl->P + pl->S, off = pl->B * pl->S * (pl->hq + pl->hk + pl->hv);
    if (pl->has_past && !ak__op_out(ctx, OUT_PRESENT)) /* keys and values with the past */
        pl->ws_k = off, off += pl->B * pl->N * T * D, pl->ws_v = off, off += pl->B * pl->N * T * D;
    pl->ws_attn = off;
    return AK_OK;
}

static ak_status problem(ak__op_ctx *ctx, const att_plan *pl, ak__attn_problem *p) {
    memset(p, 0, sizeof *p);
    p->B = pl->B, p->N = pl->N, p->S = pl->S, p->T = pl->P + pl->S;
    p->D = pl->hq / pl->N, p->Dv = pl->hv / pl->N;
    float scale = ak__attr_float(ctx->node, "scale", 0.0f);
    p->scale = scale != 0.0f ? scale : (float)(1.0 / sqrt((double)p->D));
    p->causal = ak__attr_int(ctx->node, "unidirectional", 0) != 0;
    p->mask_filter = ak__attr_float(ctx->node, "mask_filter_value", -10000.0f);
    const ak__tensor *mask = ak__op_in(ctx, IN_MASK), *ab = ak__op_in(ctx, IN_ATTN_BIAS);
    if (mask) AK_CHECK(ak__attn_set_mask(ctx, mask, 1, p));
    if (ab) AK_CHECK(ak__attn_set_bias(ctx, ab, p));
    return AK_OK;
}

static ak_status att_reshape(ak__op_ctx *ctx) {
    att_plan pl;
    ak__attn_problem p;
    AK_CHECK(plan(ctx, &pl));
    AK_CHECK(problem(ctx, &pl, &p));
    int threads = 1;
    if (ak_threadpool_size(ctx->pool, &threads) != AK_OK || threads < 1) threads = 1;
    ctx->workspace_bytes = pl.ws_attn * sizeof(float) + ak__attn_workspace_bytes(&p, threads);
    int64_t y[3] = {(int64_t)pl.B, (int64_t)pl.S, (int64_t)pl.hv};
    int64_t present[5] = {2, (int64_t)pl.B, (int64_t)pl.N, (int64_t)p.T, (int64_t)p.D};
    AK_CHECK(ak__op_set_output(ctx, OUT_Y, AK_ELEM_F32, 3, y));
    return ak__op_set_output(ctx, OUT_PRESENT, AK_ELEM_F32, 5, present);
}

static ak_status att_run(ak__op_ctx *ctx) {
    att_plan pl;
    ak__attn_problem p;
    AK_CHECK(plan(ctx, &pl));
    AK_CHECK(problem(ctx, &pl, &p));
    const ak__tensor *x = ak__op_in(ctx, IN_X), *w = ak__op_in(ctx, IN_W),
                     *bias = ak__op_in(ctx, IN_BIAS), *past = ak__op_in(ctx, IN_PAST);
    float *qkv = ctx->workspace;
    size_t rows = pl.B * pl.S, width = pl.hq + pl.hk + pl.hv;
    if (bias)
        for (size_t r = 0; r < rows; r++) memcpy(qkv + r * width, bias->data, width * sizeof *qkv);
    AK_CHECK(ak_sgemm(AK_NO_TRANS, AK_NO_TRANS, rows, width, pl.in, 1.0f, x->data, pl.in, w->data,
                      width, bias ? 1.0f : 0.0f, qkv, width, ctx->pool));
    size_t S = pl.S, N = pl.N, D = p.D, Dv = p.Dv, T = p.T;
    p.q = (ak__attn_view){qkv, S * width, D, width};
    p.k = (ak__attn_view){qkv + pl.hq, S * width, D, width};
    p.v = (ak__attn_view){qkv + pl.hq + pl.hk, S * width, Dv, width};
    ak__tensor *present = ak__op_out(ctx, OUT_PRESENT);
    if (present || pl.has_past) { /* keys and values by head, the past first */
        float *ck = present ? present->data : qkv + pl.ws_k;
        float *cv = present ? (float *)present->data + pl.B * N * T * D : qkv + pl.ws_v;
        const float *pk = pl.has_past ? past->data : NULL;
        const float *pv = pl.has_past ? (const float *)past->data + pl.B * N * pl.P * D : NULL;
        ak__attn_concat(ck, pk, pl.P, p.k, S, pl.B, N, D);
        ak__attn_concat(cv, pv, pl.P, p.v, S, pl.B, N, Dv);
        p.k = (ak__attn_view){ck, N * T * D, T * D, D};
        p.v = (ak__attn_view){cv, N * T * Dv, T * Dv, Dv};
    }
    ak__tensor *y = ak__op_out(ctx, OUT_Y);
    if (!y) return AK_OK; /* only the present outputs asked for */
    p.out = y->data;
    p.out_batch = S * pl.hv, p.out_head = Dv, p.out_row = pl.hv;
    return ak__attn_run(&p, qkv + pl.ws_attn, ctx->pool);
}

const ak__op_def ak__op_attention = {"com.microsoft", "Attention", 1, 0, NULL, NULL, att_reshape,
                                     att_run};
