/* ConvInteger and QLinearConv (NCHW, 1 to 3 spatial axes, groups, strides, dilations,
 * pads / auto_pad), as int8 products on the driver (qmm.c): per image and group, the
 * output pixels are the rows of A — built per task by an im2col that reads the padding
 * as x_zero_point, so padded taps contribute (x_zp − x_zp)·w = 0 — and the group's
 * weights, packed once at session creation when constant, are B (one column per output
 * channel). The driver's finish writes each (pixel, channel) straight into NCHW.
 *   ConvInteger  int32 Σ(x − x_zero_point)(w − w_zero_point); w_zero_point per tensor or
 *                per output channel
 *   QLinearConv  saturate(round((acc + B)·x_scale·w_scale/y_scale) + y_zero_point), B the
 *                int32 bias; w_scale and w_zero_point per tensor or per output channel;
 *                com.accelkit's form (the optimizer's QDQ fusion) also takes relu = 1:
 *                results raised to y_zero_point, which is QuantizeLinear(Relu(v)) exactly */
#include <stdlib.h>
#include <string.h>

#include "infer/ops/nn/common.h"
#include "infer/ops/quant/quant.h"

#define MAX_SP 3

enum { OP_CONVI, OP_QLCONV };
static const uint32_t in_x[] = {0, 0}, in_w[] = {1, 3}, in_xzp[] = {2, 2}, in_wzp[] = {3, 5};

typedef struct qconv_plan {
    uint64_t N, C, M, group, Cg, Mg, K, P;
    int nsp;
    ak__nn_geom g; /* padded to 3 axes: the leading ones of size 1 */
    int64_t out[2 + MAX_SP];
} qconv_plan;

typedef struct qconv_args {
    qconv_plan pl;
    const ak__tensor *X, *W;
    ak__qzp zx, zw, zy;
    const float *x_scale, *w_scale, *y_scale;
    size_t nw_scale;
    const int32_t *bias;
} qconv_args;

/* The geometry from X, W and the attributes, padded to three spatial axes. */
static ak_status plan_make(ak__op_ctx *ctx, const ak__tensor *X, const ak__tensor *W,
                           qconv_plan *pl) {
    memset(pl, 0, sizeof *pl);
    if (X->rank < 3 || X->rank != W->rank)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                          "X (rank %d) and W (rank %d) must have one rank of at least 3",
                          X->rank, W->rank);
    int nsp = X->rank - 2;
    if (nsp > MAX_SP)
        return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED,
                          "%d spatial axes (1 to %d are implemented)", nsp, MAX_SP);
    pl->nsp = nsp;
    pl->N = (uint64_t)X->dims[0], pl->C = (uint64_t)X->dims[1], pl->M = (uint64_t)W->dims[0];
    int64_t group = ak__attr_int(ctx->node, "group", 1);
    if (group < 1 || pl->C % (uint64_t)group || pl->M % (uint64_t)group ||
        (uint64_t)W->dims[1] * (uint64_t)group != pl->C)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                          "group %lld does not divide C = %llu and M = %llu with W's %lld "
                          "input channels", (long long)group, (unsigned long long)pl->C,
                          (unsigned long long)pl->M, (long long)W->dims[1]);
    pl->group = (uint64_t)group, pl->Cg = pl->C / pl->group, pl->Mg = pl->M / pl->group;
    const int64_t *ks;
    size_t nks = ak__attr_ints(ctx->node, "kernel_shape", &ks);
    if (nks && nks != (size_t)nsp)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "kernel_shape has %zu values for %d "
                          "spatial axes", nks, nsp);
    for (int i = 0; i < (int)nks; i++)
        if (ks[i] != W->dims[2 + i])
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                              "kernel_shape differs from W's spatial dims");
    ak__nn_geom g;
    AK_CHECK(ak__nn_geom_init(ctx, nsp, X->dims + 2, W->dims + 2, 0, &g));
    /* three axes, the missing leading ones of size 1 */
    int lead = MAX_SP - nsp;
    pl->g.nsp = MAX_SP;
    for (int i = 0; i < MAX_SP; i++) {
        int j = i - lead;
        pl->g.in[i] = j >= 0 ? g.in[j] : 1, pl->g.out[i] = j >= 0 ? g.out[j] : 1;
        pl->g.k[i] = j >= 0 ? g.k[j] : 1, pl->g.s[i] = j >= 0 ? g.s[j] : 1;
        pl->g.d[i] = j >= 0 ? g.d[j] : 1, pl->g.pb[i] = j >= 0 ? g.pb[j] : 0;
    }
    pl->K = pl->Cg * ak__nn_prod(pl->g.k, MAX_SP);
    pl->P = ak__nn_prod(pl->g.out, MAX_SP);
    pl->out[0] = (int64_t)pl->N, pl->out[1] = (int64_t)pl->M;
    for (int i = 0; i < nsp; i++) pl->out[2 + i] = g.out[i];
    return AK_OK;
}

static ak_status args_make(ak__op_ctx *ctx, int op, qconv_args *a) {
    memset(a, 0, sizeof *a);
    AK_CHECK(ak__op_require(ctx, in_x[op], &a->X));
    AK_CHECK(ak__op_require(ctx, in_w[op], &a->W));
    AK_CHECK(ak__q_check_8bit(ctx, in_x[op], a->X, "x"));
    AK_CHECK(ak__q_check_8bit(ctx, in_w[op], a->W, "w"));
    AK_CHECK(plan_make(ctx, a->X, a->W, &a->pl));
    size_t M = (size_t)a->pl.M, n;
    /* optional in ConvInteger, and in the fused form (a DequantizeLinear without one) */
    int zp_optional = op == OP_CONVI || strcmp(ctx->node->domain, "com.accelkit") == 0;
    AK_CHECK(ak__q_zero_point(ctx, in_xzp[op], "x_zero_point", 0, a->X->type, zp_optional,
                              &a->zx));
    AK_CHECK(ak__q_zero_point(ctx, in_wzp[op], "w_zero_point", M, a->W->type, zp_optional,
                              &a->zw));
    if (op == OP_QLCONV) {
        AK_CHECK(ak__q_scale(ctx, 1, "x_scale", 0, &a->x_scale, &n));
        AK_CHECK(ak__q_scale(ctx, 4, "w_scale", M, &a->w_scale, &a->nw_scale));
        AK_CHECK(ak__q_scale(ctx, 6, "y_scale", 0, &a->y_scale, &n));
        AK_CHECK(ak__q_zero_point(ctx, 7, "y_zero_point", 0, AK_ELEM_UNDEFINED, 0, &a->zy));
        const ak__tensor *B = ak__op_in(ctx, 8);
        if (B) {
            AK_CHECK(ak__op_check_type(ctx, 8, B, AK_ELEM_I32));
            if (B->rank != 1 || (size_t)B->count != M)
                return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                                  "B must be 1-D with %zu values (one per output channel)", M);
            a->bias = B->data;
        }
    }
    return AK_OK;
}

/* ---- im2col ------------------------------------------------------------------------------ */

typedef struct rows_ctx {
    const qconv_plan *pl;
    const uint8_t *x; /* this image and group: Cg planes */
    uint8_t flip, pad; /* 0x80 for int8 x; the padding byte (x_zero_point, flipped alike) */
} rows_ctx;

/* One kernel row of taps (kw of them, dilation dw) starting at input column iw0 of row xr
 * (NULL: the row is outside the input) into d: in-bounds spans copied (flipped for int8),
 * the rest the padding byte. */
static inline uint8_t *tap_row(uint8_t *d, const uint8_t *xr, int64_t iw0, int64_t kw,
                               int64_t dw, int64_t W, uint8_t flip, uint8_t pad) {
    if (!xr) {
        memset(d, pad, (size_t)kw);
        return d + kw;
    }
    if (dw == 1 && iw0 >= 0 && iw0 + kw <= W) { /* the interior: one contiguous span */
        if (flip)
            for (int64_t j = 0; j < kw; j++) d[j] = xr[iw0 + j] ^ flip;
        else
            memcpy(d, xr + iw0, (size_t)kw);
        return d + kw;
    }
    for (int64_t j = 0; j < kw; j++) {
        int64_t iw = iw0 + j * dw;
        d[j] = iw >= 0 && iw < W ? (uint8_t)(xr[iw] ^ flip) : pad;
    }
    return d + kw;
}

/* Rows [m0, m0 + mr) (output pixels) of A: for each, the K taps in W's order (channel,
 * kd, kh, kw). */
static void im2col_rows(const ak__qmm *q, size_t m0, size_t mr, uint8_t *dst) {
    const rows_ctx *rc = q->rows_ctx;
    const ak__nn_geom *g = &rc->pl->g;
    uint64_t plane = ak__nn_prod(g->in, MAX_SP), Wo = (uint64_t)g->out[2];
    uint64_t HWo = Wo * (uint64_t)g->out[1];
    int64_t ow = (int64_t)(m0 % Wo), oh = (int64_t)(m0 % HWo / Wo), od = (int64_t)(m0 / HWo);
    for (size_t r = 0; r < mr; r++) {
        uint8_t *d = dst + r * q->K;
        int64_t iw0 = ow * g->s[2] - g->pb[2];
        for (uint64_t c = 0; c < rc->pl->Cg; c++) {
            const uint8_t *xc = rc->x + c * plane;
            for (int64_t kd = 0; kd < g->k[0]; kd++) {
                int64_t id = od * g->s[0] - g->pb[0] + kd * g->d[0];
                for (int64_t kh = 0; kh < g->k[1]; kh++) {
                    int64_t ih = oh * g->s[1] - g->pb[1] + kh * g->d[1];
                    int inside = id >= 0 && id < g->in[0] && ih >= 0 && ih < g->in[1];
                    const uint8_t *xr =
                        inside ? xc + ((uint64_t)id * (uint64_t)g->in[1] + (uint64_t)ih) *
                                          (uint64_t)g->in[2]
                               : NULL;
                    d = tap_row(d, xr, iw0, g->k[2], g->d[2], g->in[2], rc->flip, rc->pad);
                }
            }
        }
        /* the next pixel */
        if (++ow == (int64_t)Wo) {
            ow = 0;
            if (++oh == g->out[1]) oh = 0, od++;
        }
    }
}

/* ---- state: the packed weights of every group ------------------------------------------- */

/* One of the two: the channel-major path's rows (direct.rows set), or the driver's packed
 * panels per group. */
typedef struct qconv_state {
    ak__qconv_w direct;
    ak__qmm_b *groups;
    void *mem;
} qconv_state;

static size_t group_bytes(uint64_t K, uint64_t Mg) {
    return (ak__qmm_b_bytes((size_t)K, (size_t)Mg) + 63) / 64 * 64;
}

/* Packs group gi of W (M × K rows) as B (K × Mg, column j = row gi·Mg + j). */
static void pack_group(ak__qmm_b *qb, void *mem, const ak__tensor *W, uint64_t K, uint64_t Mg,
                       uint64_t gi) {
    ak__qmm_b_pack(qb, mem, (const uint8_t *)W->data + gi * Mg * K, W->type, (size_t)K,
                   (size_t)Mg, 1, (size_t)K);
}

static ak_status qconv_create(const ak__ir_node *node, const ak__tensor *const *consts, int op,
                              void **state) {
    *state = NULL;
    const ak__tensor *W = consts && in_w[op] < node->num_inputs ? consts[in_w[op]] : NULL;
    if (!W || W->rank < 3 || (W->type != AK_ELEM_U8 && W->type != AK_ELEM_I8)) return AK_OK;
    int64_t group = ak__attr_int(node, "group", 1);
    if (group < 1 || W->dims[0] % group) return AK_OK; /* reshape reports it */
    if (W->count == 0) return AK_OK; /* nothing to pack */
    uint64_t Mg = (uint64_t)W->dims[0] / (uint64_t)group;
    uint64_t K = W->count / (uint64_t)W->dims[0];
    qconv_state *s = calloc(1, sizeof *s);
    if (!s) return AK_ERR_NO_MEMORY;
    if (ak__qconv_direct_usable()) {
        ak_status st = ak__qconv_w_pack(&s->direct, W->data, W->type, (size_t)W->dims[0],
                                         (size_t)W->dims[1], (size_t)(K / (uint64_t)W->dims[1]));
        if (st != AK_OK) free(s);
        else *state = s;
        return st;
    }
    s->groups = calloc((size_t)group, sizeof *s->groups);
    s->mem = aligned_alloc(64, group_bytes(K, Mg) * (size_t)group);
    if (!s->groups || !s->mem) {
        free(s->groups), free(s->mem), free(s);
        return AK_ERR_NO_MEMORY;
    }
    for (uint64_t gi = 0; gi < (uint64_t)group; gi++)
        pack_group(&s->groups[gi], (char *)s->mem + gi * group_bytes(K, Mg), W, K, Mg, gi);
    *state = s;
    return AK_OK;
}

static void qconv_destroy(void *state) {
    qconv_state *s = state;
    if (s) ak__qconv_w_free(&s->direct), free(s->groups), free(s->mem);
    free(s);
}

static size_t ws_driver(const ak__op_ctx *ctx, const qconv_plan *pl) {
    size_t threads = (size_t)ak__nn_pool_threads(ctx);
    size_t a = ak__qmm_workspace((size_t)pl->K, (int)threads);
    size_t b = ak__qconv_direct_workspace(&pl->g, (size_t)pl->N, (size_t)pl->group,
                                          (size_t)pl->Cg, (size_t)pl->P, (int)threads) +
               3 * ((pl->M * 4 + 63) / 64 * 64); /* the direct path's per-channel finish */
    return ((a > b ? a : b) + 63) / 64 * 64;
}

static int is_direct(const ak__op_ctx *ctx) {
    const qconv_state *st = ctx->state;
    return st && st->direct.rows;
}

/* The channel-major path (qconv_direct.c): the zero points folded into a bias per
 * channel, Σ(x' − zx')(w' − zw') = Σx'w' − zw'·Σx' − zx'·Σw' + K·zx'·zw' over the flipped
 * operands (x' uint8, w' int8), in wrapping uint32 arithmetic. */
static void run_direct(ak__op_ctx *ctx, int op, const qconv_args *a, const float *mult,
                       ak__tensor *Y) {
    const qconv_plan *pl = &a->pl;
    const qconv_state *st = ctx->state;
    int threads = ak__nn_pool_threads(ctx);
    size_t M = (size_t)pl->M, K = (size_t)pl->K;
    char *ws = ctx->workspace;
    size_t row_bytes = (M * 4 + 63) / 64 * 64;
    int32_t *row_bias = (int32_t *)ws, *row_zp = (int32_t *)(ws + row_bytes);
    float *mults = (float *)(ws + 2 * row_bytes);
    void *work = ws + 3 * row_bytes;
    int x_signed = a->X->type == AK_ELEM_I8;
    uint32_t zx = (uint32_t)(ak__qzp_at(&a->zx, 0) + (x_signed ? 128 : 0));
    int any_zw = 0;
    for (size_t m = 0; m < M; m++) {
        uint32_t zw = (uint32_t)(ak__qzp_at(&a->zw, m) - (st->direct.flipped ? 128 : 0));
        uint32_t b = a->bias ? (uint32_t)a->bias[m] : 0;
        row_bias[m] = (int32_t)(b - zx * (uint32_t)st->direct.wsum[m] + (uint32_t)K * zx * zw);
        row_zp[m] = (int32_t)zw;
        any_zw |= zw != 0;
        mults[m] = op == OP_QLCONV ? mult[a->nw_scale > 1 ? m : 0] : 1.0f;
    }
    ak__qconv_direct c = {&pl->g,
                          (size_t)pl->N, (size_t)pl->C, M, (size_t)pl->group, (size_t)pl->Cg,
                          (size_t)pl->Mg, K, (size_t)pl->P, a->X->data, x_signed,
                          (uint8_t)ak__qzp_at(&a->zx, 0), &st->direct, AK_I8_OUT_I32, row_bias,
                          any_zw ? row_zp : NULL, mults, ak__qzp_at(&a->zy, 0), 0, Y->data};
    if (op == OP_QLCONV) {
        c.kind = a->zy.type == AK_ELEM_I8 ? AK_I8_OUT_S8 : AK_I8_OUT_U8;
        c.relu = strcmp(ctx->node->domain, "com.accelkit") == 0 &&
                 ak__attr_int(ctx->node, "relu", 0);
    }
    ak__qconv_direct_run(&c, ctx->pool, threads, work);
}

static ak_status qconv_reshape_op(ak__op_ctx *ctx, int op) {
    qconv_args a;
    AK_CHECK(args_make(ctx, op, &a));
    const qconv_plan *pl = &a.pl;
    ctx->workspace_bytes = ws_driver(ctx, pl) + (pl->M * sizeof(float) + 63) / 64 * 64 +
                           (ctx->state ? 0 : group_bytes(pl->K, pl->Mg));
    ak_elem_type t = op == OP_CONVI ? AK_ELEM_I32 : a.zy.type;
    return ak__op_set_output(ctx, 0, t, pl->nsp + 2, pl->out);
}

/* z restricted to the columns of group gi (per-channel zero points move with it) */
static ak__qzp zp_of_group(ak__qzp z, uint64_t gi, uint64_t Mg) {
    if (z.data && z.count > 1) {
        z.data = (const char *)z.data + gi * Mg, z.count = (size_t)Mg;
    }
    return z;
}

static ak_status qconv_run_op(ak__op_ctx *ctx, int op) {
    qconv_args a;
    AK_CHECK(args_make(ctx, op, &a));
    ak__tensor *Y = ak__op_out(ctx, 0);
    if (!Y || Y->count == 0) return AK_OK;
    const qconv_plan *pl = &a.pl;
    int threads = ak__nn_pool_threads(ctx);
    char *ws = ctx->workspace;
    float *mult = (float *)(ws + ws_driver(ctx, pl));
    void *wmem = (char *)mult + (pl->M * sizeof(float) + 63) / 64 * 64;
    if (op == OP_QLCONV)
        for (size_t m = 0; m < a.nw_scale; m++)
            mult[m] = a.x_scale[0] * a.w_scale[m] / a.y_scale[0]; /* as ONNX Runtime forms it */
    if (is_direct(ctx)) {
        run_direct(ctx, op, &a, mult, Y);
        return AK_OK;
    }
    const qconv_state *st = ctx->state;
    size_t esz_y = ak_elem_type_size(Y->type);
    uint64_t plane_x = ak__nn_prod(pl->g.in, MAX_SP);
    rows_ctx rc = {pl, NULL, a.X->type == AK_ELEM_I8 ? 0x80 : 0,
                   (uint8_t)((uint8_t)ak__qzp_at(&a.zx, 0) ^ (a.X->type == AK_ELEM_I8 ? 0x80 : 0))};
    ak__qmm q = {0};
    q.M = (size_t)pl->P, q.N = (size_t)pl->Mg, q.K = (size_t)pl->K;
    q.a_type = a.X->type, q.rows = im2col_rows, q.rows_ctx = &rc, q.za = a.zx;
    q.out_rs = 1, q.out_cs = (size_t)pl->P;
    q.out_kind = op == OP_CONVI ? AK_QMM_OUT_I32 : AK_QMM_OUT_Q8;
    q.out_signed = a.zy.type == AK_ELEM_I8;
    q.out_zp = ak__qzp_at(&a.zy, 0);
    q.relu = strcmp(ctx->node->domain, "com.accelkit") == 0 && ak__attr_int(ctx->node, "relu", 0);
    ak__qmm_b packed;
    for (uint64_t gi = 0; gi < pl->group; gi++) {
        if (st) {
            q.b = &st->groups[gi];
        } else {
            pack_group(&packed, wmem, a.W, pl->K, pl->Mg, gi);
            q.b = &packed;
        }
        q.zb = zp_of_group(a.zw, gi, pl->Mg);
        q.mult = a.nw_scale > 1 ? mult + gi * pl->Mg : mult, q.mult_n = a.nw_scale > 1 ? q.N : 1;
        q.bias = a.bias ? a.bias + gi * pl->Mg : NULL;
        for (uint64_t n = 0; n < pl->N; n++) {
            rc.x = (const uint8_t *)a.X->data + (n * pl->C + gi * pl->Cg) * plane_x;
            q.out = (char *)Y->data + (n * pl->M + gi * pl->Mg) * pl->P * esz_y;
            ak__qmm_run(&q, ctx->pool, threads, ctx->workspace);
        }
    }
    return AK_OK;
}

static ak_status convi_create(const ak__ir_node *n, const ak__tensor *const *c, void **s) {
    return qconv_create(n, c, OP_CONVI, s);
}
static ak_status qlconv_create(const ak__ir_node *n, const ak__tensor *const *c, void **s) {
    return qconv_create(n, c, OP_QLCONV, s);
}
static ak_status convi_reshape(ak__op_ctx *ctx) { return qconv_reshape_op(ctx, OP_CONVI); }
static ak_status qlconv_reshape(ak__op_ctx *ctx) { return qconv_reshape_op(ctx, OP_QLCONV); }
static ak_status convi_run(ak__op_ctx *ctx) { return qconv_run_op(ctx, OP_CONVI); }
static ak_status qlconv_run(ak__op_ctx *ctx) { return qconv_run_op(ctx, OP_QLCONV); }

const ak__op_def ak__q_conv_integer = {"", "ConvInteger", 10, 0, convi_create, qconv_destroy,
                                       convi_reshape, convi_run};
const ak__op_def ak__q_qlinear_conv = {"", "QLinearConv", 10, 0, qlconv_create, qconv_destroy,
                                       qlconv_reshape, qlconv_run};
/* What the optimizer makes of DequantizeLinear -> Conv [-> Relu] -> QuantizeLinear
 * (runtime/optimize.c): QLinearConv with the attribute relu = 1 when a Relu was folded. */
const ak__op_def ak__q_qlinear_conv_fused = {"com.accelkit", "QLinearConv", 1, 0, qlconv_create,
                                             qconv_destroy, qlconv_reshape, qlconv_run};
