/* ConvTranspose (NCHW, 1 to 8 spatial axes, groups, strides, dilations, pads, auto_pad,
 * output_padding, output_shape).
 *
 * Per image and group: col (Mg·kprod, Pin) = W_gᵀ · X_g with one ak_sgemm (W is stored
 * (C, Mg, k...), so W_g is a (Cg, Mg·kprod) matrix read transposed), then col2im adds
 * each column entry into the output position it maps to. Input positions are processed
 * in chunks so the column buffer stays bounded; col2im runs in parallel over output
 * channels (disjoint planes). Other float types go through a reference loop in double. */
#include <math.h>
#include <string.h>

#include "infer/ops/nn/common.h"
#include "infer/ops/nn/conv/conv.h"

#define CHUNK_MAX_FLOATS ((uint64_t)4 << 20) /* 16 MB of columns */
#define GEOM_LIMIT ((int64_t)1 << 31)

typedef struct convt_plan {
    ak__nn_geom g; /* in: X spatial, out: Y spatial */
    int64_t N, C, M, group, Cg, Mg;
    uint64_t P, Pin, kprod, R; /* R = Mg*kprod rows of col */
    uint64_t cols;             /* input positions per chunk */
} convt_plan;

/* An optional per-axis list attribute of exactly n values (or absent: dflt each). */
static ak_status axis_attr(const ak__op_ctx *ctx, const char *name, int n, int64_t dflt,
                           int64_t lo, int64_t *out) {
    const int64_t *v;
    size_t cnt = ak__attr_ints(ctx->node, name, &v);
    for (int i = 0; i < n; i++) out[i] = dflt;
    if (cnt == 0) return AK_OK;
    if (cnt != (size_t)n)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "attribute %s has %zu values, expected %d",
                          name, cnt, n);
    for (int i = 0; i < n; i++) {
        if (v[i] < lo || v[i] >= GEOM_LIMIT)
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "attribute %s[%d] = %lld is out of range",
                              name, i, (long long)v[i]);
        out[i] = v[i];
    }
    return AK_OK;
}

static int64_t floor_half(int64_t v) { return v >= 0 ? v / 2 : -((-v + 1) / 2); }

static ak_status convt_geometry(ak__op_ctx *ctx, int nsp, const int64_t *in, const int64_t *k,
                                ak__nn_geom *g) {
    memset(g, 0, sizeof *g);
    g->nsp = nsp;
    for (int i = 0; i < nsp; i++) {
        if (k[i] < 1 || k[i] >= GEOM_LIMIT || in[i] < 0 || in[i] >= GEOM_LIMIT)
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "kernel or input size out of range");
        g->in[i] = in[i];
        g->k[i] = k[i];
    }
    int64_t op[AK_NN_MAX_SP], pads[2 * AK_NN_MAX_SP], oshape[AK_NN_MAX_SP + 2];
    AK_CHECK(axis_attr(ctx, "strides", nsp, 1, 1, g->s));
    AK_CHECK(axis_attr(ctx, "dilations", nsp, 1, 1, g->d));
    AK_CHECK(axis_attr(ctx, "output_padding", nsp, 0, 0, op));
    const char *auto_pad = ak__attr_string(ctx->node, "auto_pad", "NOTSET");
    int notset = strcmp(auto_pad, "NOTSET") == 0, valid = strcmp(auto_pad, "VALID") == 0;
    int upper = strcmp(auto_pad, "SAME_UPPER") == 0, lower = strcmp(auto_pad, "SAME_LOWER") == 0;
    if (!notset && !valid && !upper && !lower)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "unknown auto_pad \"%s\"", auto_pad);
    AK_CHECK(axis_attr(ctx, "pads", 2 * nsp, 0, 0, pads));
    if (!notset) memset(pads, 0, sizeof pads);
    const int64_t *os;
    size_t nos = ak__attr_ints(ctx->node, "output_shape", &os);
    if (nos != 0 && nos != (size_t)nsp && nos != (size_t)nsp + 2)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "output_shape has %zu values", nos);
    for (size_t i = 0; i < nos && nos; i++) oshape[i] = os[i];
    for (int i = 0; i < nsp; i++) {
        int64_t dk = (g->k[i] - 1) * g->d[i] + 1;
        int64_t natural = g->s[i] * (g->in[i] - 1) + op[i] + dk; /* before pads */
        int64_t out = -1;
        if (nos) out = oshape[nos - (size_t)nsp + (size_t)i];
        else if (upper || lower) out = g->in[i] * g->s[i];
        if (out >= 0) {
            if (out >= GEOM_LIMIT)
                return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "output_shape out of range");
            int64_t total = natural - out, half = floor_half(total);
            g->pb[i] = upper ? half : total - half;
            g->pe[i] = total - g->pb[i];
            g->out[i] = out;
        } else {
            g->pb[i] = pads[i];
            g->pe[i] = pads[nsp + i];
            g->out[i] = natural - g->pb[i] - g->pe[i];
            if (g->out[i] < 0)
                return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                                  "pads leave a negative output size on spatial axis %d", i);
        }
    }
    return AK_OK;
}

static ak_status convt_plan_make(ak__op_ctx *ctx, convt_plan *pl) {
    const ak__tensor *X, *W, *B = ak__op_in(ctx, 2);
    AK_CHECK(ak__op_require(ctx, 0, &X));
    AK_CHECK(ak__op_require(ctx, 1, &W));
    memset(pl, 0, sizeof *pl);
    if (!ak__elem_is_float(X->type))
        return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED, "input X has type %s",
                          ak_elem_type_name(X->type));
    AK_CHECK(ak__op_check_type(ctx, 1, W, X->type));
    if (B) AK_CHECK(ak__op_check_type(ctx, 2, B, X->type));
    if (X->rank < 3 || W->rank != X->rank)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "X has rank %d and W rank %d",
                          X->rank, W->rank);
    int nsp = X->rank - 2;
    if (nsp > AK_NN_MAX_SP)
        return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED, "%d spatial dimensions", nsp);
    pl->N = X->dims[0];
    pl->C = X->dims[1];
    pl->group = ak__attr_int(ctx->node, "group", 1);
    if (pl->group < 1 || pl->C % pl->group != 0 || W->dims[0] != pl->C)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                          "group %lld does not split X channels %lld / W dim 0 %lld",
                          (long long)pl->group, (long long)pl->C, (long long)W->dims[0]);
    pl->Cg = pl->C / pl->group;
    pl->Mg = W->dims[1];
    pl->M = pl->Mg * pl->group;
    if (ak__attr_has(ctx->node, "kernel_shape")) {
        int64_t ka[AK_NN_MAX_SP];
        AK_CHECK(ak__nn_kernel_attr(ctx, nsp, ka));
        if (memcmp(ka, W->dims + 2, (size_t)nsp * sizeof *ka) != 0)
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                              "kernel_shape does not match W's spatial dims");
    }
    AK_CHECK(convt_geometry(ctx, nsp, X->dims + 2, W->dims + 2, &pl->g));
    if (B && (B->rank != 1 || B->dims[0] != pl->M))
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "B must have shape (%lld)",
                          (long long)pl->M);
    pl->P = ak__nn_prod(pl->g.out, nsp);
    pl->Pin = ak__nn_prod(pl->g.in, nsp);
    pl->kprod = ak__nn_prod(pl->g.k, nsp);
    pl->R = (uint64_t)pl->Mg * pl->kprod;
    uint64_t cols = CHUNK_MAX_FLOATS / (pl->R ? pl->R : 1);
    if (cols < 16) cols = 16;
    pl->cols = cols < pl->Pin ? cols : pl->Pin;
    return AK_OK;
}

static ak_status convt_reshape(ak__op_ctx *ctx) {
    convt_plan pl;
    AK_CHECK(convt_plan_make(ctx, &pl));
    int64_t dims[2 + AK_NN_MAX_SP];
    dims[0] = pl.N;
    dims[1] = pl.M;
    memcpy(dims + 2, pl.g.out, (size_t)pl.g.nsp * sizeof *dims);
    AK_CHECK(ak__op_set_output(ctx, 0, ctx->inputs[0]->type, pl.g.nsp + 2, dims));
    if (ctx->inputs[0]->type == AK_ELEM_F32)
        ctx->workspace_bytes = (size_t)(pl.R * pl.cols) * sizeof(float);
    return AK_OK;
}

/* Output flat index of input position i with kernel offset kk, or -1 outside. */
static int64_t convt_target(const ak__nn_geom *g, uint64_t i, uint64_t kk) {
    int64_t idx = 0, pos[AK_NN_MAX_SP], kx[AK_NN_MAX_SP];
    for (int a = g->nsp - 1; a >= 0; a--) {
        pos[a] = (int64_t)(i % (uint64_t)g->in[a]);
        i /= (uint64_t)g->in[a];
        kx[a] = (int64_t)(kk % (uint64_t)g->k[a]);
        kk /= (uint64_t)g->k[a];
    }
    for (int a = 0; a < g->nsp; a++) {
        int64_t o = pos[a] * g->s[a] - g->pb[a] + kx[a] * g->d[a];
        if (o < 0 || o >= g->out[a]) return -1;
        idx = idx * g->out[a] + o;
    }
    return idx;
}

typedef struct convt_job {
    const convt_plan *pl;
    const float *col, *b;
    float *yg; /* this image/group's Mg output planes */
    uint64_t i0, iw;
    int64_t m0;
} convt_job;

static void col2im_task(void *vj, size_t begin, size_t end, int tid) {
    (void)tid;
    const convt_job *j = vj;
    const convt_plan *pl = j->pl;
    for (size_t m = begin; m < end; m++) {
        float *y = j->yg + m * pl->P;
        for (uint64_t kk = 0; kk < pl->kprod; kk++) {
            const float *c = j->col + (m * pl->kprod + kk) * j->iw;
            for (uint64_t i = 0; i < j->iw; i++) {
                int64_t o = convt_target(&pl->g, j->i0 + i, kk);
                if (o >= 0) y[o] += c[i];
            }
        }
    }
}

static void bias_task(void *vj, size_t begin, size_t end, int tid) {
    (void)tid;
    const convt_job *j = vj;
    const convt_plan *pl = j->pl;
    for (size_t i = begin; i < end; i++) { /* plane i = n*M + m */
        float v = j->b ? j->b[i % (uint64_t)pl->M] : 0.0f, *y = j->yg + i * pl->P;
        for (uint64_t p = 0; p < pl->P; p++) y[p] = v;
    }
}

static ak_status convt_run_f32(ak__op_ctx *ctx, const convt_plan *pl) {
    const ak__tensor *B = ak__op_in(ctx, 2);
    const float *x = ctx->inputs[0]->data, *w = ctx->inputs[1]->data;
    float *y = ctx->outputs[0]->data;
    convt_job j = {pl, ctx->workspace, B ? B->data : NULL, y, 0, 0, 0};
    AK_CHECK(ak_threadpool_parallel_for(ctx->pool, (size_t)(pl->N * pl->M), 1, bias_task, &j));
    for (int64_t n = 0; n < pl->N; n++)
        for (int64_t g = 0; g < pl->group; g++) {
            const float *xg = x + ((uint64_t)n * (uint64_t)pl->C + (uint64_t)(g * pl->Cg)) * pl->Pin;
            const float *wg = w + (uint64_t)(g * pl->Cg) * pl->R;
            j.yg = y + ((uint64_t)n * (uint64_t)pl->M + (uint64_t)(g * pl->Mg)) * pl->P;
            for (uint64_t i0 = 0; i0 < pl->Pin; i0 += pl->cols) {
                j.i0 = i0;
                j.iw = pl->Pin - i0 < pl->cols ? pl->Pin - i0 : pl->cols;
                AK_CHECK(ak_sgemm(AK_TRANS, AK_NO_TRANS, (size_t)pl->R, (size_t)j.iw,
                                  (size_t)pl->Cg, 1.0f, wg, (size_t)pl->R, xg + i0,
                                  (size_t)pl->Pin, 0.0f, ctx->workspace, (size_t)j.iw,
                                  ctx->pool));
                AK_CHECK(ak_threadpool_parallel_for(ctx->pool, (size_t)pl->Mg, 1, col2im_task, &j));
            }
        }
    return AK_OK;
}

/* Reference scatter for float16/bfloat16/float64: accumulates through the output. */
static void convt_run_reference(ak__op_ctx *ctx, const convt_plan *pl) {
    const ak__tensor *X = ctx->inputs[0], *W = ctx->inputs[1], *B = ak__op_in(ctx, 2);
    ak__tensor *Y = ctx->outputs[0];
    for (uint64_t i = 0; i < Y->count; i++) {
        uint64_t m = (i / pl->P) % (uint64_t)pl->M;
        ak__elem_set(Y->data, Y->type, i, B ? ak__elem_get(B->data, B->type, m) : 0.0);
    }
    for (uint64_t n = 0; n < (uint64_t)pl->N; n++)
        for (uint64_t c = 0; c < (uint64_t)pl->C; c++) {
            uint64_t g = c / (uint64_t)pl->Cg;
            for (uint64_t r = 0; r < pl->R; r++) {
                uint64_t m = g * (uint64_t)pl->Mg + r / pl->kprod, kk = r % pl->kprod;
                double wv = ak__elem_get(W->data, W->type, c * pl->R + r);
                for (uint64_t i = 0; i < pl->Pin; i++) {
                    int64_t o = convt_target(&pl->g, i, kk);
                    if (o < 0) continue;
                    uint64_t yi = (n * (uint64_t)pl->M + m) * pl->P + (uint64_t)o;
                    double xv = ak__elem_get(X->data, X->type, (n * (uint64_t)pl->C + c) * pl->Pin + i);
                    ak__elem_set(Y->data, Y->type, yi, ak__elem_get(Y->data, Y->type, yi) + wv * xv);
                }
            }
        }
}

static ak_status convt_run(ak__op_ctx *ctx) {
    convt_plan pl;
    AK_CHECK(convt_plan_make(ctx, &pl));
    ak__tensor *Y = ak__op_out(ctx, 0);
    if (!Y || Y->count == 0) return AK_OK;
    if (ctx->inputs[0]->type != AK_ELEM_F32) {
        convt_run_reference(ctx, &pl);
        return AK_OK;
    }
    if ((size_t)(pl.R * pl.cols) * sizeof(float) > ctx->workspace_bytes)
        return AK_OP_FAIL(ctx->node, AK_ERR_INTERNAL, "workspace smaller than planned");
    return convt_run_f32(ctx, &pl);
}

const ak__op_def ak__nn_conv_transpose = {"", "ConvTranspose", 1, 0, NULL, NULL, convt_reshape,
                                          convt_run};
