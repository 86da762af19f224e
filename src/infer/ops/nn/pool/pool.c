/* Pooling: MaxPool (with optional Indices), AveragePool, LpPool and their Global forms,
 * NCHW with 1 to 8 spatial axes, strides, dilations, pads, auto_pad and ceil_mode.
 *
 * Planes (one image, one channel) are independent and spread over the pool. float32 2-D
 * windows go through a direct loop; everything else (other ranks, types, Indices, Lp)
 * through a generic window walk that reads elements as double, which is exact for every
 * type a pool accepts (max of int8/uint8 included). */
#include <float.h>
#include <math.h>
#include <string.h>

#include "infer/ops/nn/common.h"
#include "infer/ops/nn/pool/pool.h"
#include "kernels/dispatch.h"

enum { POOL_MAX, POOL_AVG, POOL_LP };

typedef struct pool_plan {
    ak__nn_geom g;
    int kind;
    int count_include_pad, col_major;
    double p; /* Lp */
    uint64_t planes, P, Pin;
} pool_plan;

typedef struct pool_job {
    const pool_plan *pl;
    const ak__tensor *X;
    ak__tensor *Y, *I;
    int y_blocked; /* NchwcMaxPool: Y stored blocked like X */
} pool_job;

static ak_status pool_check_type(ak__op_ctx *ctx, const ak__tensor *X, int kind) {
    int ok = ak__elem_is_float(X->type) ||
             (kind == POOL_MAX && (X->type == AK_ELEM_I8 || X->type == AK_ELEM_U8));
    if (!ok)
        return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED, "input X has type %s",
                          ak_elem_type_name(X->type));
    return AK_OK;
}

static ak_status lp_order(ak__op_ctx *ctx, double *p) {
    const ak__ir_attr *a = ak__ir_node_attr(ctx->node, "p");
    *p = 2.0;
    if (a && a->type == AK_ATTR_INT) *p = (double)a->u.i;
    if (a && a->type == AK_ATTR_FLOAT) *p = a->u.f;
    if (!(*p > 0.0) || *p > 1e6)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "p = %g is out of range", *p);
    return AK_OK;
}

/* Plan for windowed pools (global: the window is the whole plane). */
static ak_status pool_plan_make(ak__op_ctx *ctx, int kind, int global, pool_plan *pl) {
    const ak__tensor *X;
    AK_CHECK(ak__op_require(ctx, 0, &X));
    memset(pl, 0, sizeof *pl);
    pl->kind = kind;
    if (X->rank < 3)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "X has rank %d (at least 3)",
                          X->rank);
    AK_CHECK(pool_check_type(ctx, X, kind));
    int nsp = X->rank - 2;
    if (nsp > AK_NN_MAX_SP)
        return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED, "%d spatial dimensions", nsp);
    if (global) {
        ak__nn_geom *g = &pl->g;
        g->nsp = nsp;
        for (int i = 0; i < nsp; i++) {
            g->in[i] = g->k[i] = X->dims[2 + i];
            g->out[i] = g->s[i] = g->d[i] = 1;
        }
    } else {
        int64_t k[AK_NN_MAX_SP];
        AK_CHECK(ak__nn_kernel_attr(ctx, nsp, k));
        AK_CHECK(ak__nn_geom_init(ctx, nsp, X->dims + 2, k, 1, &pl->g));
    }
    pl->count_include_pad = (int)ak__attr_int(ctx->node, "count_include_pad", 0) != 0;
    pl->col_major = (int)ak__attr_int(ctx->node, "storage_order", 0) != 0;
    if (kind == POOL_LP) AK_CHECK(lp_order(ctx, &pl->p));
    pl->planes = (uint64_t)X->dims[0] * (uint64_t)X->dims[1];
    pl->P = ak__nn_prod(pl->g.out, nsp);
    pl->Pin = ak__nn_prod(pl->g.in, nsp);
    return AK_OK;
}

/* ---- float32 2-D fast path --------------------------------------------------------- */

/* Widest row MaxPool takes through its row-max buffer (on the stack). */
#define POOL_ROW_MAX 2048

/* MaxPool of one plane in two steps per output row: the element-wise max of the window's
 * input rows (contiguous, vectorized), then each output's max along that one row. Per
 * output a 3×3 window costs 3 scalar maxes instead of 9 plus their index arithmetic
 * (ResNet-50's stem pool: 4× faster). */
static void maxpool2d_f32_plane(const pool_plan *pl, const float *x, float *y) {
    const ak__nn_geom *g = &pl->g;
    int64_t H = g->in[0], W = g->in[1];
    float vm[POOL_ROW_MAX];
    for (int64_t oy = 0; oy < g->out[0]; oy++, y += g->out[1]) {
        int64_t y0 = oy * g->s[0] - g->pb[0];
        int64_t ylo = y0 >= 0 ? 0 : (-y0 + g->d[0] - 1) / g->d[0];
        int64_t yhi = H - 1 - y0 < 0 ? 0 : (H - 1 - y0) / g->d[0] + 1;
        if (yhi > g->k[0]) yhi = g->k[0];
        for (int64_t i = 0; i < W; i++) vm[i] = -FLT_MAX;
        for (int64_t j = ylo; j < yhi; j++) {
            const float *row = x + (y0 + j * g->d[0]) * W;
            for (int64_t i = 0; i < W; i++) vm[i] = row[i] > vm[i] ? row[i] : vm[i];
        }
        for (int64_t ox = 0; ox < g->out[1]; ox++) {
            int64_t x0 = ox * g->s[1] - g->pb[1];
            int64_t xlo = x0 >= 0 ? 0 : (-x0 + g->d[1] - 1) / g->d[1];
            int64_t xhi = W - 1 - x0 < 0 ? 0 : (W - 1 - x0) / g->d[1] + 1;
            if (xhi > g->k[1]) xhi = g->k[1];
            float acc = -FLT_MAX;
            for (int64_t i = xlo; i < xhi; i++) {
                float v = vm[x0 + i * g->d[1]];
                acc = v > acc ? v : acc;
            }
            y[ox] = acc;
        }
    }
}

static void pool2d_f32_plane(const pool_plan *pl, const float *x, float *y) {
    const ak__nn_geom *g = &pl->g;
    int64_t H = g->in[0], W = g->in[1];
    if (pl->kind == POOL_MAX && W <= POOL_ROW_MAX) {
        maxpool2d_f32_plane(pl, x, y);
        return;
    }
    for (int64_t oy = 0; oy < g->out[0]; oy++) {
        int64_t y0 = oy * g->s[0] - g->pb[0];
        int64_t ylo = y0 >= 0 ? 0 : (-y0 + g->d[0] - 1) / g->d[0];
        int64_t yhi = H - 1 - y0 < 0 ? 0 : (H - 1 - y0) / g->d[0] + 1;
        if (yhi > g->k[0]) yhi = g->k[0];
        int64_t ypad = (H + g->pe[0] - 1 - y0) / g->d[0] + 1; /* rows inside the pads */
        if (ypad > g->k[0]) ypad = g->k[0];
        for (int64_t ox = 0; ox < g->out[1]; ox++) {
            int64_t x0 = ox * g->s[1] - g->pb[1];
            int64_t xlo = x0 >= 0 ? 0 : (-x0 + g->d[1] - 1) / g->d[1];
            int64_t xhi = W - 1 - x0 < 0 ? 0 : (W - 1 - x0) / g->d[1] + 1;
            if (xhi > g->k[1]) xhi = g->k[1];
            float acc = pl->kind == POOL_MAX ? -FLT_MAX : 0.0f;
            if (pl->kind == POOL_MAX) {
                for (int64_t j = ylo; j < yhi; j++) {
                    const float *row = x + (y0 + j * g->d[0]) * W + x0;
                    for (int64_t i = xlo; i < xhi; i++) {
                        float v = row[i * g->d[1]];
                        acc = v > acc ? v : acc;
                    }
                }
            } else {
                for (int64_t j = ylo; j < yhi; j++) {
                    const float *row = x + (y0 + j * g->d[0]) * W + x0;
                    for (int64_t i = xlo; i < xhi; i++) acc += row[i * g->d[1]];
                }
                int64_t cnt;
                if (pl->count_include_pad) {
                    int64_t xpad = (W + g->pe[1] - 1 - x0) / g->d[1] + 1;
                    if (xpad > g->k[1]) xpad = g->k[1];
                    cnt = ypad * xpad;
                } else {
                    cnt = (yhi > ylo ? yhi - ylo : 0) * (xhi > xlo ? xhi - xlo : 0);
                }
                acc = cnt > 0 ? acc / (float)cnt : 0.0f;
            }
            y[oy * g->out[1] + ox] = acc;
        }
    }
}

/* ---- generic window walk ----------------------------------------------------------- */

/* Flat index of input position pos[] within the plane, row- or column-major. */
static int64_t plane_index(const ak__nn_geom *g, const int64_t *pos, int col_major) {
    int64_t idx = 0;
    if (col_major)
        for (int i = g->nsp - 1; i >= 0; i--) idx = idx * g->in[i] + pos[i];
    else
        for (int i = 0; i < g->nsp; i++) idx = idx * g->in[i] + pos[i];
    return idx;
}

static void pool_generic_plane(const pool_job *job, uint64_t plane) {
    const pool_plan *pl = job->pl;
    const ak__nn_geom *g = &pl->g;
    int nsp = g->nsp;
    ak_elem_type type = job->X->type;
    const void *xd = job->X->data;
    uint64_t xbase = plane * pl->Pin;
    for (uint64_t p = 0; p < pl->P; p++) {
        int64_t o[AK_NN_MAX_SP], start[AK_NN_MAX_SP], lo[AK_NN_MAX_SP], hi[AK_NN_MAX_SP];
        int64_t j[AK_NN_MAX_SP], pos[AK_NN_MAX_SP];
        uint64_t q = p, padcount = 1, count = 1;
        for (int i = nsp - 1; i >= 0; i--) {
            o[i] = (int64_t)(q % (uint64_t)g->out[i]);
            q /= (uint64_t)g->out[i];
        }
        for (int i = 0; i < nsp; i++) {
            start[i] = o[i] * g->s[i] - g->pb[i];
            lo[i] = start[i] >= 0 ? 0 : (-start[i] + g->d[i] - 1) / g->d[i];
            hi[i] = g->in[i] - 1 - start[i] < 0 ? 0 : (g->in[i] - 1 - start[i]) / g->d[i] + 1;
            if (hi[i] > g->k[i]) hi[i] = g->k[i];
            if (hi[i] < lo[i]) hi[i] = lo[i];
            int64_t padhi = (g->in[i] + g->pe[i] - 1 - start[i]) / g->d[i] + 1;
            if (padhi > g->k[i]) padhi = g->k[i];
            count *= (uint64_t)(hi[i] - lo[i]);
            padcount *= (uint64_t)(padhi > 0 ? padhi : 0);
        }
        double acc = pl->kind == POOL_MAX ? -INFINITY : 0.0;
        int64_t arg = -1;
        if (count > 0) {
            for (int i = 0; i < nsp; i++) j[i] = lo[i];
            for (;;) {
                for (int i = 0; i < nsp; i++) pos[i] = start[i] + j[i] * g->d[i];
                int64_t rm = plane_index(g, pos, 0);
                double v = ak__elem_get(xd, type, xbase + (uint64_t)rm);
                if (pl->kind == POOL_MAX) {
                    if (v > acc || arg < 0) {
                        acc = v;
                        arg = pl->col_major ? plane_index(g, pos, 1) : rm;
                    }
                } else if (pl->kind == POOL_AVG) {
                    acc += v;
                } else {
                    acc += pow(fabs(v), pl->p);
                }
                int i = nsp - 1;
                for (; i >= 0; i--) {
                    if (++j[i] < hi[i]) break;
                    j[i] = lo[i];
                }
                if (i < 0) break;
            }
        }
        if (pl->kind == POOL_AVG) {
            uint64_t div = pl->count_include_pad ? padcount : count;
            acc = div ? acc / (double)div : 0.0;
        } else if (pl->kind == POOL_LP) {
            acc = pow(acc, 1.0 / pl->p);
        }
        uint64_t yi = plane * pl->P + p;
        ak__elem_set(job->Y->data, job->Y->type, yi, acc);
        if (job->I) ((int64_t *)job->I->data)[yi] = (int64_t)(plane * pl->Pin) + (arg < 0 ? 0 : arg);
    }
}

static void pool_task(void *vj, size_t begin, size_t end, int tid) {
    (void)tid;
    const pool_job *job = vj;
    const pool_plan *pl = job->pl;
    int fast = job->X->type == AK_ELEM_F32 && pl->g.nsp == 2 && !job->I &&
               pl->kind != POOL_LP;
    for (size_t plane = begin; plane < end; plane++) {
        if (fast)
            pool2d_f32_plane(pl, (const float *)job->X->data + plane * pl->Pin,
                             (float *)job->Y->data + plane * pl->P);
        else
            pool_generic_plane(job, plane);
    }
}

/* ---- global float32 ---------------------------------------------------------------- */

static void global_f32_task(void *vj, size_t begin, size_t end, int tid) {
    (void)tid;
    const pool_job *job = vj;
    const pool_plan *pl = job->pl;
    for (size_t plane = begin; plane < end; plane++) {
        const float *x = (const float *)job->X->data + plane * pl->Pin;
        float acc;
        if (pl->kind == POOL_MAX) {
            acc = -FLT_MAX;
            for (uint64_t i = 0; i < pl->Pin; i++) acc = x[i] > acc ? x[i] : acc;
        } else { /* 8 partial sums vectorize and stay accurate */
            float part[8] = {0};
            uint64_t i = 0;
            for (; i + 8 <= pl->Pin; i += 8)
                for (int l = 0; l < 8; l++) part[l] += x[i + l];
            acc = 0.0f;
            for (; i < pl->Pin; i++) acc += x[i];
            for (int l = 0; l < 8; l++) acc += part[l];
            acc = pl->Pin ? acc / (float)pl->Pin : 0.0f;
        }
        ((float *)job->Y->data)[plane] = acc;
    }
}

/* ---- blocked input (com.accelkit NchwcMaxPool) -------------------------------------- */

/* MaxPool over a blocked X (N, C/8, H, W, 8), what the layout pass makes of a MaxPool that
 * reads a blocked stem (ResNet's): the 8 channels of a position are maxed together, one
 * output row of a block at a time (the kernel ak_f32_nchwc_maxpool_row), written blocked
 * (attribute y_blocked = 1) or plain, so no reorder of the (4× larger) input is needed. */
#define NCHWC_BLK AK_NN_NCHWC_BLOCK

/* Task i = (image and block of 8 channels, output row). */
static void nchwc_maxpool_task(void *vj, size_t begin, size_t end, int tid) {
    (void)tid;
    const pool_job *job = vj;
    const pool_plan *pl = job->pl;
    uint64_t OH = (uint64_t)pl->g.out[0], OW = (uint64_t)pl->g.out[1];
    const ak__kernels *k = ak__kernels_active();
    ak__kf_win2d win = ak__nn_win2d(&pl->g);
    for (size_t i = begin; i < end; i++) {
        uint64_t block = i / OH, oy = i % OH;
        const float *xb = (const float *)job->X->data + block * pl->Pin * NCHWC_BLK;
        uint64_t at = oy * OW * (job->y_blocked ? NCHWC_BLK : 1); /* blocked: 8 floats an output */
        float *y = (float *)job->Y->data + block * NCHWC_BLK * pl->P + at;
        k->f32_nchwc_maxpool_row(&win, xb, (int64_t)oy, y, pl->P, job->y_blocked);
    }
}

static ak_status nchwc_maxpool_plan(ak__op_ctx *ctx, pool_plan *pl) {
    AK_CHECK(pool_plan_make(ctx, POOL_MAX, 0, pl));
    const ak__tensor *X = ctx->inputs[0];
    if (X->type != AK_ELEM_F32 || X->rank != 4 || X->dims[1] % NCHWC_BLK)
        return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED,
                          "a blocked X is float32 (N, C, H, W) with C a multiple of 8");
    return AK_OK;
}

static ak_status nchwc_maxpool_reshape(ak__op_ctx *ctx) {
    pool_plan pl;
    AK_CHECK(nchwc_maxpool_plan(ctx, &pl));
    int64_t dims[4] = {ctx->inputs[0]->dims[0], ctx->inputs[0]->dims[1], pl.g.out[0], pl.g.out[1]};
    return ak__op_set_output(ctx, 0, AK_ELEM_F32, 4, dims);
}

static ak_status nchwc_maxpool_run(ak__op_ctx *ctx) {
    pool_plan pl;
    AK_CHECK(nchwc_maxpool_plan(ctx, &pl));
    pool_job job = {&pl, ctx->inputs[0], ak__op_out(ctx, 0), NULL,
                    ak__attr_int(ctx->node, "y_blocked", 0) != 0};
    if (!job.Y || job.Y->count == 0) return AK_OK;
    size_t tasks = (size_t)(pl.planes / NCHWC_BLK * (uint64_t)pl.g.out[0]);
    return ak_threadpool_parallel_for(ctx->pool, tasks, 1, nchwc_maxpool_task, &job);
}

/* ---- operators --------------------------------------------------------------------- */

static ak_status pool_reshape_common(ak__op_ctx *ctx, int kind, int global) {
    pool_plan pl;
    AK_CHECK(pool_plan_make(ctx, kind, global, &pl));
    const ak__tensor *X = ctx->inputs[0];
    int64_t dims[2 + AK_NN_MAX_SP];
    dims[0] = X->dims[0];
    dims[1] = X->dims[1];
    memcpy(dims + 2, pl.g.out, (size_t)pl.g.nsp * sizeof *dims);
    AK_CHECK(ak__op_set_output(ctx, 0, X->type, X->rank, dims));
    if (kind == POOL_MAX && !global) AK_CHECK(ak__op_set_output(ctx, 1, AK_ELEM_I64, X->rank, dims));
    return AK_OK;
}

/* Planes per task: at least ~4096 input floats, so that claiming chunks (an atomic shared
 * by the threads) does not cost more than the work, as it did with one 7×7 plane per
 * task (MobileNetV2's GlobalAveragePool: 10 µs on one thread, 49 µs on two). */
static size_t pool_grain(const pool_plan *pl) {
    uint64_t g = 4096 / (pl->Pin ? pl->Pin : 1);
    return g ? (size_t)g : 1;
}

static ak_status pool_run_common(ak__op_ctx *ctx, int kind, int global) {
    pool_plan pl;
    AK_CHECK(pool_plan_make(ctx, kind, global, &pl));
    pool_job job = {&pl, ctx->inputs[0], ak__op_out(ctx, 0),
                    kind == POOL_MAX && !global ? ak__op_out(ctx, 1) : NULL, 0};
    if (!job.Y) return AK_OK;
    if (global && job.X->type == AK_ELEM_F32 && kind != POOL_LP)
        return ak_threadpool_parallel_for(ctx->pool, (size_t)pl.planes, pool_grain(&pl),
                                          global_f32_task, &job);
    return ak_threadpool_parallel_for(ctx->pool, (size_t)pl.planes, pool_grain(&pl), pool_task,
                                      &job);
}

#define POOL_OP(fn, kind, global)                                                         \
    static ak_status fn##_reshape(ak__op_ctx *ctx) {                                     \
        return pool_reshape_common(ctx, kind, global);                                   \
    }                                                                                     \
    static ak_status fn##_run(ak__op_ctx *ctx) { return pool_run_common(ctx, kind, global); }

POOL_OP(maxpool, POOL_MAX, 0)
POOL_OP(avgpool, POOL_AVG, 0)
POOL_OP(lppool, POOL_LP, 0)
POOL_OP(gmaxpool, POOL_MAX, 1)
POOL_OP(gavgpool, POOL_AVG, 1)
POOL_OP(glppool, POOL_LP, 1)

const ak__op_def ak__nn_maxpool = {"", "MaxPool", 1, 0, NULL, NULL, maxpool_reshape,
                                   maxpool_run};
const ak__op_def ak__nn_averagepool = {"", "AveragePool", 1, 0, NULL, NULL, avgpool_reshape,
                                       avgpool_run};
const ak__op_def ak__nn_lppool = {"", "LpPool", 1, 0, NULL, NULL, lppool_reshape, lppool_run};
const ak__op_def ak__nn_global_maxpool = {"", "GlobalMaxPool", 1, 0, NULL, NULL,
                                          gmaxpool_reshape, gmaxpool_run};
const ak__op_def ak__nn_global_averagepool = {"", "GlobalAveragePool", 1, 0, NULL, NULL,
                                              gavgpool_reshape, gavgpool_run};
/* com.accelkit NchwcMaxPool: MaxPool's attributes, X blocked (see above), Y plain. */
const ak__op_def ak__nn_nchwc_maxpool = {"com.accelkit", "NchwcMaxPool", 1, 0, NULL, NULL,
                                         nchwc_maxpool_reshape, nchwc_maxpool_run};
const ak__op_def ak__nn_global_lppool = {"", "GlobalLpPool", 1, 0, NULL, NULL,
                                         glppool_reshape, glppool_run};
