/* Conv and FusedConv (NCHW, 1 to 8 spatial axes, groups, strides, dilations, pads,
 * auto_pad).
 *
 * float32 takes one of five paths:
 *   winograd   constant 3x3 W, stride 1, dilation 1, one group: F(4x4,3x3) over weights
 *              transformed at create (nn/conv/winograd.c); taken from 16 output tiles on.
 *   implicit   constant 1-D/2-D W packed at create for the SGEMM microkernel, columns
 *              gathered per sliver, bias/Z/activation per tile (nn/conv/igemm.c); taken
 *              where conv_igemm_pays says it measured faster.
 *   pointwise  1x1 kernel, stride 1, no pads: Y_g (Mg,P) = W_g (Mg,Cg) · X_g (Cg,P), one
 *              ak_sgemm per image and group straight on the tensors.
 *   depthwise  2-D with one input and one output channel per group (MobileNet): a direct
 *              vectorized loop per plane (nn/conv/depthwise.c).
 *   general    im2col + ak_sgemm: Y_g (Mg,P) = W_g (Mg,Kg) · col (Kg,P), Kg = Cg·kh·kw.
 *              When there are enough column tiles, each thread im2cols a tile of columns
 *              small enough to stay in its L2 into its own scratch and multiplies it with
 *              a serial GEMM (no barrier between the im2col and the GEMM, and the columns
 *              are read back from cache). Otherwise (few output positions: late ResNet
 *              layers) the columns of a chunk are built in parallel and one GEMM over the
 *              pool splits along M.
 * Bias is written into Y first and the GEMM accumulates onto it (beta = 1).
 * Other float types (float16, bfloat16, float64) use a direct reference loop
 * accumulating in double. ConvInteger and QLinearConv live in ops/quant.
 * FusedConv (com.microsoft) adds an optional Z input and an activation: Z goes into the
 * GEMM's initial C with the bias, the activation runs on each tile while it is in cache
 * (or in one pass after the pool-wide GEMMs). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/init.h"
#include "core/params.h"
#include "infer/ops/nn/common.h"
#include "infer/ops/nn/conv/activation.h"
#include "infer/ops/nn/conv/conv.h"
#include "infer/ops/nn/conv/depthwise.h"
#include "infer/ops/nn/conv/igemm.h"
#include "infer/ops/nn/conv/winograd.h"
#include "kernels/dispatch.h"
#include "kernels/gemm.h"

/* Bytes of one thread's column tile: with the packed weight block of the GEMM it stays
 * in a 1 MB L2. */
#define TILE_BYTES (512u * 1024u)
#define TILE_MIN_COLS 192u
/* Whole mode builds at most this many floats of columns at once (16 MB). */
#define WHOLE_MAX_FLOATS ((size_t)4 << 20)

enum { CONV_GENERAL, CONV_POINTWISE, CONV_DEPTHWISE, CONV_REFERENCE, CONV_IGEMM, CONV_WINOGRAD };
/* Which operator a call serves. */
enum { OP_CONV, OP_FUSED_CONV };

/* For benchmarks: 1 forces the tiled general path, 2 the whole one, 0 chooses. */
int ak__nn_conv_force_mode = 0;

typedef struct conv_plan {
    ak__nn_geom g;
    int64_t N, C, M, group, Cg, Mg;
    uint64_t P, Pin, kprod, Kg;
    int kind;
    ak__nn_act act;     /* FusedConv's activation; AK_NN_ACT_NONE for Conv */
    int tiled;          /* general: thread-private tiles */
    uint64_t cols;      /* general: columns per tile or per chunk */
    size_t slot_floats; /* scratch floats per thread slot */
    size_t slots;
} conv_plan;

/* ---- planning ---------------------------------------------------------------------- */

static ak_status conv_check_types(ak__op_ctx *ctx, const ak__tensor *X, const ak__tensor *W) {
    if (!ak__elem_is_float(X->type))
        return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED, "input X has type %s",
                          ak_elem_type_name(X->type));
    AK_CHECK(ak__op_check_type(ctx, 1, W, X->type));
    const ak__tensor *B = ak__op_in(ctx, 2);
    if (B) AK_CHECK(ak__op_check_type(ctx, 2, B, X->type));
    return AK_OK;
}

/* Shapes, group split and geometry; no path choice yet. */
static ak_status conv_plan_shapes(ak__op_ctx *ctx, conv_plan *pl) {
    const ak__tensor *X, *W;
    AK_CHECK(ak__op_require(ctx, 0, &X));
    AK_CHECK(ak__op_require(ctx, 1, &W));
    memset(pl, 0, sizeof *pl);
    if (X->rank < 3 || W->rank != X->rank)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                          "X has rank %d and W rank %d (equal, at least 3 expected)", X->rank,
                          W->rank);
    AK_CHECK(conv_check_types(ctx, X, W));
    int nsp = X->rank - 2;
    pl->N = X->dims[0];
    pl->C = X->dims[1];
    pl->M = W->dims[0];
    pl->group = ak__attr_int(ctx->node, "group", 1);
    if (pl->group < 1 || pl->C % pl->group != 0 || pl->M % pl->group != 0 ||
        W->dims[1] * pl->group != pl->C)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                          "group %lld does not split X channels %lld / W (%lld, %lld, ...)",
                          (long long)pl->group, (long long)pl->C, (long long)pl->M,
                          (long long)W->dims[1]);
    pl->Cg = pl->C / pl->group;
    pl->Mg = pl->M / pl->group;
    const int64_t *k = W->dims + 2;
    if (ak__attr_has(ctx->node, "kernel_shape")) {
        int64_t ka[AK_NN_MAX_SP];
        if (nsp > AK_NN_MAX_SP)
            return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED, "%d spatial dimensions", nsp);
        AK_CHECK(ak__nn_kernel_attr(ctx, nsp, ka));
        if (memcmp(ka, k, (size_t)nsp * sizeof *k) != 0)
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                              "kernel_shape does not match W's spatial dims");
    }
    AK_CHECK(ak__nn_geom_init(ctx, nsp, X->dims + 2, k, 0, &pl->g));
    const ak__tensor *B = ak__op_in(ctx, 2);
    if (B && (B->rank != 1 || B->dims[0] != pl->M))
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "B must have shape (%lld)",
                          (long long)pl->M);
    pl->P = ak__nn_prod(pl->g.out, nsp);
    pl->Pin = ak__nn_prod(pl->g.in, nsp);
    pl->kprod = ak__nn_prod(pl->g.k, nsp);
    pl->Kg = (uint64_t)pl->Cg * pl->kprod;
    return AK_OK;
}

static int conv_is_pointwise(const ak__nn_geom *g) {
    for (int i = 0; i < g->nsp; i++)
        if (g->k[i] != 1 || g->s[i] != 1 || g->pb[i] != 0 || g->pe[i] != 0) return 0;
    return 1;
}

/* Where the implicit GEMM beats im2col + ak_sgemm (per-layer medians over ResNet-50 and
 * MobileNetV2 on 2 threads): many output channels, whose weights ak_sgemm would repack on
 * every run (up to 25 % faster at 512-2048 channels), or small planes (14×14, 7×7), whose
 * columns it packs once for all channel chunks (10-25 %). With fewer channels over a
 * large plane, packing a column sliver per 16 positions costs more than im2col's row
 * copies (10-25 % slower at 64-256 channels on 28×28 and 56×56), except for a shallow
 * window (stems: 3 input channels, K = 27 or 147), whose columns im2col would write and
 * ak_sgemm pack again: 8-14 % faster on MobileNetV2's and ResNet-50's stems (best of 7). */
#define IGEMM_MIN_CHANNELS 384
#define IGEMM_MAX_PLANE 196
static int conv_igemm_pays(const conv_plan *pl) {
    return pl->Mg >= IGEMM_MIN_CHANNELS || pl->P <= IGEMM_MAX_PLANE ||
           (pl->Kg <= AK_NN_MAX_KC && !conv_is_pointwise(&pl->g));
}

/* What create packed from constant weights (either may be NULL). */
typedef struct conv_state {
    ak__conv_igemm *ig;
    ak__conv_wino *wino;
} conv_state;

/* Picks the path and sizes its scratch for `threads` workers. st: the weights packed at
 * creation, or NULL. */
static void conv_plan_path(conv_plan *pl, int threads, const conv_state *st) {
    pl->slots = (size_t)threads;
    if (pl->g.nsp == 2 && pl->Cg == 1 && pl->Mg == 1 && pl->kprod <= AK_NN_DW_MAX_TAPS) {
        pl->kind = CONV_DEPTHWISE;
        pl->slot_floats = ak__nn_dw_scratch_floats(&pl->g);
        return;
    }
    int force = ak__nn_conv_force_mode;
    const ak__conv_igemm *ig = st ? st->ig : NULL;
    const ak__conv_wino *wino = st ? st->wino : NULL;
    if (ak__conv_wino_usable(wino, &pl->g, pl->M, pl->C, pl->group) &&
        (force == 4 ||
         (force == 0 && ak__param_int(AK_PARAM_CONV_WINOGRAD) && ak__conv_wino_pays(&pl->g)))) {
        pl->kind = CONV_WINOGRAD;
        pl->slot_floats = ak__conv_wino_workspace_floats(wino, &pl->g, 0, threads);
        pl->slots = 1;
        return;
    }
    if (pl->g.nsp <= 2 && ak__conv_igemm_usable(ig, pl->M, pl->group, pl->Kg) &&
        (force == 3 || (force == 0 && ak__param_int(AK_PARAM_CONV_IGEMM) && conv_igemm_pays(pl)))) {
        pl->kind = CONV_IGEMM;
        pl->slot_floats = ak__conv_igemm_workspace_floats(ig, &pl->g, threads);
        pl->slots = 1;
        return;
    }
    if (conv_is_pointwise(&pl->g)) {
        pl->kind = CONV_POINTWISE;
        return;
    }
    pl->kind = CONV_GENERAL;
    /* Tile columns: what fits TILE_BYTES, but not so few that the GEMM runs short; in
     * 2-D, whole output rows, and a multiple of the thread count when there are enough
     * rows, so every thread gets as many tiles. */
    uint64_t cols = (TILE_BYTES / sizeof(float)) / (pl->Kg ? pl->Kg : 1);
    if (cols < TILE_MIN_COLS) cols = TILE_MIN_COLS;
    uint64_t ntiles;
    if (pl->g.nsp == 2) {
        uint64_t OH = (uint64_t)pl->g.out[0], OW = (uint64_t)pl->g.out[1];
        uint64_t rows = (cols + OW - 1) / OW;
        if (rows > OH) rows = OH;
        ntiles = (OH + rows - 1) / rows;
        uint64_t T = (uint64_t)threads;
        if (ntiles > 1 && ntiles % T != 0 && (ntiles + T - 1) / T * T <= OH) {
            ntiles = (ntiles + T - 1) / T * T;
            rows = (OH + ntiles - 1) / ntiles;
            ntiles = (OH + rows - 1) / rows;
        }
        cols = rows * OW;
    } else {
        cols = cols / 16 * 16;
        ntiles = (pl->P + cols - 1) / cols;
    }
    if (cols > pl->P) cols = pl->P;
    uint64_t tasks = ntiles * (uint64_t)pl->N * (uint64_t)pl->group;
    int tiled = threads == 1 || tasks >= (uint64_t)threads;
    if (ak__nn_conv_force_mode) tiled = ak__nn_conv_force_mode == 1;
    if (tiled) {
        pl->tiled = 1;
        pl->cols = cols;
        pl->slot_floats = (size_t)(pl->Kg * cols);
        return;
    }
    pl->tiled = 0;
    cols = WHOLE_MAX_FLOATS / (pl->Kg ? pl->Kg : 1);
    if (cols < 16) cols = 16;
    pl->cols = cols < pl->P ? cols : pl->P;
    pl->slot_floats = (size_t)(pl->Kg * pl->cols);
    pl->slots = 1;
}

/* ---- im2col ------------------------------------------------------------------------ */

/* Rows [r0, r1) of the column matrix for output positions [p0, p1): row r = (c, kernel
 * offset), col[r*ld + (p-p0)] = x[c][position] or 0 in the padding. x is (Cg, in...). */
static void im2col(const conv_plan *pl, const float *x, uint64_t r0, uint64_t r1, uint64_t p0,
                   uint64_t p1, float *col, size_t ld) {
    const ak__nn_geom *g = &pl->g;
    int last = g->nsp - 1;
    int64_t kidx[AK_NN_MAX_SP], o[AK_NN_MAX_SP];
    for (uint64_t r = r0; r < r1; r++) {
        uint64_t c = r / pl->kprod, kk = r % pl->kprod;
        for (int i = last; i >= 0; i--) {
            kidx[i] = (int64_t)(kk % (uint64_t)g->k[i]);
            kk /= (uint64_t)g->k[i];
        }
        const float *xc = x + c * pl->Pin;
        float *dst = col + (r - r0) * ld;
        uint64_t p = p0, q = p0;
        for (int i = last; i >= 0; i--) {
            o[i] = (int64_t)(q % (uint64_t)g->out[i]);
            q /= (uint64_t)g->out[i];
        }
        int64_t W = g->in[last], s = g->s[last];
        int64_t base = kidx[last] * g->d[last] - g->pb[last];
        /* valid outputs along the last axis: 0 <= ox*s + base < W */
        int64_t vlo = base >= 0 ? 0 : (-base + s - 1) / s;
        int64_t vhi = W - 1 - base < 0 ? 0 : (W - 1 - base) / s + 1;
        while (p < p1) {
            int64_t run = g->out[last] - o[last];
            if ((uint64_t)run > p1 - p) run = (int64_t)(p1 - p);
            int valid = 1;
            int64_t off = 0;
            for (int i = 0; i < last; i++) {
                int64_t ii = o[i] * g->s[i] - g->pb[i] + kidx[i] * g->d[i];
                if (ii < 0 || ii >= g->in[i]) valid = 0;
                off = off * g->in[i] + ii;
            }
            float *d = dst + (p - p0);
            int64_t a = o[last], e = o[last] + run;
            if (!valid) {
                memset(d, 0, (size_t)run * sizeof *d);
            } else {
                const float *src = xc + off * W;
                int64_t lo = vlo > a ? vlo : a, hi = vhi < e ? vhi : e;
                if (hi < lo) hi = lo;
                if (lo > a) memset(d, 0, (size_t)(lo - a) * sizeof *d);
                if (s == 1) {
                    if (hi > lo) memcpy(d + (lo - a), src + lo + base, (size_t)(hi - lo) * sizeof *d);
                } else {
                    for (int64_t ox = lo; ox < hi; ox++) d[ox - a] = src[ox * s + base];
                }
                if (e > hi) memset(d + (hi - a), 0, (size_t)(e - hi) * sizeof *d);
            }
            p += (uint64_t)run;
            o[last] = 0;
            for (int i = last - 1; i >= 0; i--) { /* carry into the outer axes */
                if (++o[i] < g->out[i]) break;
                o[i] = 0;
            }
        }
    }
}

/* 2-D im2col of whole output rows [oy0, oy1): row r = (c, ky, kx) of the column matrix
 * gets those rows' OW outputs each, zeros in the padding. The copy along a row is a
 * memcpy for stride 1. */
static void im2col_2d(const conv_plan *pl, const float *x, int64_t oy0, int64_t oy1, float *col,
                      size_t ld) {
    const ak__nn_geom *g = &pl->g;
    int64_t H = g->in[0], W = g->in[1], OW = g->out[1], sh = g->s[0], sw = g->s[1];
    float *dst = col;
    for (int64_t c = 0; c < pl->Cg; c++) {
        const float *xc = x + c * H * W;
        for (int64_t ky = 0; ky < g->k[0]; ky++)
            for (int64_t kx = 0; kx < g->k[1]; kx++, dst += ld) {
                int64_t base = kx * g->d[1] - g->pb[1];
                int64_t lo = base >= 0 ? 0 : (-base + sw - 1) / sw;
                int64_t hi = W - 1 - base < 0 ? 0 : (W - 1 - base) / sw + 1;
                if (lo > OW) lo = OW;
                if (hi > OW) hi = OW;
                if (hi < lo) hi = lo;
                float *d = dst;
                for (int64_t oy = oy0; oy < oy1; oy++, d += OW) {
                    int64_t iy = oy * sh - g->pb[0] + ky * g->d[0];
                    if (iy < 0 || iy >= H) {
                        memset(d, 0, (size_t)OW * sizeof *d);
                        continue;
                    }
                    const float *src = xc + iy * W + base;
                    for (int64_t ox = 0; ox < lo; ox++) d[ox] = 0.0f;
                    if (sw == 1)
                        memcpy(d + lo, src + lo, (size_t)(hi - lo) * sizeof *d);
                    else
                        for (int64_t ox = lo; ox < hi; ox++) d[ox] = src[ox * sw];
                    for (int64_t ox = hi; ox < OW; ox++) d[ox] = 0.0f;
                }
            }
    }
}

/* ---- float32 run ------------------------------------------------------------------- */

typedef struct conv_run {
    const conv_plan *pl;
    const float *x, *w, *b;
    const float *z; /* FusedConv's Z (added before the activation), shaped like y */
    float *y, *ws;
    ak_threadpool *pool;
    /* whole mode: the current image/group and chunk */
    const float *xg;
    float *yg;
    uint64_t p0, pw;
    int64_t m0;
} conv_run;

/* y rows (rows, cols) with stride ld = bias (+ z, laid out like y); returns the GEMM's
 * beta: 1 when y was initialized, else 0. */
static float fill_init(const float *b, const float *z, float *y, uint64_t rows, uint64_t cols,
                       uint64_t ld) {
    if (!b && !z) return 0.0f;
    for (uint64_t m = 0; m < rows; m++) {
        float v = b ? b[m] : 0.0f, *row = y + m * ld;
        if (z)
            for (uint64_t j = 0; j < cols; j++) row[j] = v + z[m * ld + j];
        else
            for (uint64_t j = 0; j < cols; j++) row[j] = v;
    }
    return 1.0f;
}

/* z at the same offset as y within the output, or NULL. */
static const float *z_at(const conv_run *r, const float *y) {
    return r->z ? r->z + (y - r->y) : NULL;
}

/* The GEMM convolutions' epilogue: C is Y (or a block of its columns) of one image and
 * group. */
typedef struct gemm_epi {
    const float *bias, *z; /* the group's bias, Z of the image (or NULL) */
    const float *y;
    const ak__nn_act *act;
} gemm_epi;

static void gemm_epi_tile(void *ctx, float *c, size_t ldc, size_t row, size_t col, size_t m,
                           size_t n) {
    (void)col;
    const gemm_epi *e = ctx;
    ak__nn_tile_epilogue(c, e->z ? e->z + (c - e->y) : NULL, e->bias ? e->bias + row : NULL,
                         ldc, m, n, e->act);
}

/* Y_g tile (Mg, pw) with row stride P = W_g · col (Kg, pw), then bias, Z and the
 * activation: per finished GEMM tile with the blocked driver (Y written once, while each
 * tile is in L1), else in passes around ak_sgemm. */
static void conv_gemm_tile(const conv_run *r, uint64_t g, const float *w, const float *col,
                           uint64_t pw, float *y) {
    const conv_plan *pl = r->pl;
    const ak__gemm_config *cfg = ak__kernels_active()->sgemm_config;
    const float *bias = r->b ? r->b + g * (uint64_t)pl->Mg : NULL;
    if (cfg) {
        gemm_epi e = {bias, z_at(r, y), y, &pl->act};
        ak__sgemm_tile_epi fused;
        int has_fused = ak__nn_act_fusable(&pl->act, bias, e.z, &fused);
        ak__gemm_epilogue epi = {gemm_epi_tile, &e, has_fused ? &fused : NULL};
        ak__sgemm_blocked_epi(cfg, 0, 0, (size_t)pl->Mg, (size_t)pw, (size_t)pl->Kg, 1.0f, w,
                              (size_t)pl->Kg, col, (size_t)pw, 0.0f, y, (size_t)pl->P, r->pool,
                              &epi);
        return;
    }
    float beta = fill_init(bias, z_at(r, y), y, (uint64_t)pl->Mg, pw, pl->P);
    (void)ak_sgemm(AK_NO_TRANS, AK_NO_TRANS, (size_t)pl->Mg, (size_t)pw, (size_t)pl->Kg, 1.0f, w,
                   (size_t)pl->Kg, col, (size_t)pw, beta, y, (size_t)pl->P, r->pool);
    ak__nn_act_rows(&pl->act, y, (uint64_t)pl->Mg, pw, pl->P);
}

static void conv_tile_task(void *vr, size_t begin, size_t end, int tid) {
    const conv_run *r = vr;
    const conv_plan *pl = r->pl;
    uint64_t ntiles = (pl->P + pl->cols - 1) / pl->cols;
    /* no workspace (NULL) when the slots are empty: offsetting NULL is undefined */
    float *col = r->ws ? r->ws + (size_t)tid * pl->slot_floats : NULL;
    for (size_t t = begin; t < end; t++) {
        uint64_t tile = t % ntiles, ng = t / ntiles;
        uint64_t n = ng / (uint64_t)pl->group, g = ng % (uint64_t)pl->group;
        uint64_t p0 = tile * pl->cols, pw = pl->P - p0 < pl->cols ? pl->P - p0 : pl->cols;
        const float *x = r->x + (n * (uint64_t)pl->C + g * (uint64_t)pl->Cg) * pl->Pin;
        const float *w = r->w + g * (uint64_t)pl->Mg * pl->Kg;
        float *y = r->y + (n * (uint64_t)pl->M + g * (uint64_t)pl->Mg) * pl->P + p0;
        if (pl->g.nsp == 2) /* tiles are whole output rows */
            im2col_2d(pl, x, (int64_t)(p0 / (uint64_t)pl->g.out[1]),
                      (int64_t)((p0 + pw) / (uint64_t)pl->g.out[1]), col, (size_t)pw);
        else
            im2col(pl, x, 0, pl->Kg, p0, p0 + pw, col, (size_t)pw);
        /* inside a task of the pool this GEMM runs on the calling thread */
        conv_gemm_tile(r, g, w, col, pw, y);
    }
}

/* Whole mode: rows [begin, end) of [im2col rows | bias rows] for the current chunk. */
static void conv_whole_task(void *vr, size_t begin, size_t end, int tid) {
    (void)tid;
    const conv_run *r = vr;
    const conv_plan *pl = r->pl;
    for (size_t i = begin; i < end; i++) {
        if (i < pl->Kg) {
            im2col(pl, r->xg, i, i + 1, r->p0, r->p0 + r->pw, r->ws + i * r->pw, (size_t)r->pw);
        } else {
            uint64_t m = i - pl->Kg;
            float *y = r->yg + m * pl->P + r->p0;
            fill_init(r->b ? r->b + r->m0 + m : NULL, z_at(r, y), y, 1, r->pw, pl->P);
        }
    }
}

static void conv_act_task(void *vr, size_t begin, size_t end, int tid) {
    (void)tid;
    const conv_run *r = vr;
    const conv_plan *pl = r->pl;
    ak__nn_act_rows(&pl->act, r->y + begin * pl->P, end - begin, pl->P, pl->P);
}

/* FusedConv's activation over all of Y (paths whose GEMM spans the pool). */
static ak_status conv_act_all(ak__op_ctx *ctx, const conv_plan *pl, conv_run *r) {
    if (pl->act.kind == AK_NN_ACT_NONE) return AK_OK;
    return ak_threadpool_parallel_for(ctx->pool, (size_t)(pl->N * pl->M), 4, conv_act_task, r);
}

static ak_status conv_run_general(ak__op_ctx *ctx, const conv_plan *pl, conv_run *r,
                                  int serial) {
    if (pl->tiled) {
        uint64_t ntiles = (pl->P + pl->cols - 1) / pl->cols;
        size_t tasks = (size_t)(ntiles * (uint64_t)pl->N * (uint64_t)pl->group);
        if (serial) { /* each GEMM then uses the pool */
            conv_tile_task(r, 0, tasks, 0);
            return AK_OK;
        }
        return ak_threadpool_parallel_for(ctx->pool, tasks, 1, conv_tile_task, r);
    }
    for (int64_t n = 0; n < pl->N; n++)
        for (int64_t g = 0; g < pl->group; g++) {
            r->xg = r->x + ((uint64_t)n * (uint64_t)pl->C + (uint64_t)(g * pl->Cg)) * pl->Pin;
            r->yg = r->y + ((uint64_t)n * (uint64_t)pl->M + (uint64_t)(g * pl->Mg)) * pl->P;
            r->m0 = g * pl->Mg;
            const float *w = r->w + (uint64_t)(g * pl->Mg) * pl->Kg;
            for (uint64_t p0 = 0; p0 < pl->P; p0 += pl->cols) {
                r->p0 = p0;
                r->pw = pl->P - p0 < pl->cols ? pl->P - p0 : pl->cols;
                int init = r->b || r->z;
                size_t rows = (size_t)pl->Kg + (init ? (size_t)pl->Mg : 0);
                AK_CHECK(ak_threadpool_parallel_for(ctx->pool, rows, 8, conv_whole_task, r));
                AK_CHECK(ak_sgemm(AK_NO_TRANS, AK_NO_TRANS, (size_t)pl->Mg, (size_t)r->pw,
                                  (size_t)pl->Kg, 1.0f, w, (size_t)pl->Kg, r->ws, (size_t)r->pw,
                                  init ? 1.0f : 0.0f, r->yg + p0, (size_t)pl->P, ctx->pool));
            }
        }
    return conv_act_all(ctx, pl, r);
}

/* 1×1: Y_g = W_g · X_g per image and group, X_g read in place as the column matrix. */
static void conv_run_pointwise(const conv_plan *pl, const conv_run *r) {
    for (int64_t n = 0; n < pl->N; n++)
        for (int64_t g = 0; g < pl->group; g++) {
            const float *x =
                r->x + ((uint64_t)n * (uint64_t)pl->C + (uint64_t)(g * pl->Cg)) * pl->Pin;
            float *y = r->y + ((uint64_t)n * (uint64_t)pl->M + (uint64_t)(g * pl->Mg)) * pl->P;
            conv_gemm_tile(r, (uint64_t)g, r->w + (uint64_t)(g * pl->Mg) * pl->Kg, x, pl->P, y);
        }
}

static ak__nn_dw_args conv_dw_args(const conv_run *r) {
    const conv_plan *pl = r->pl;
    return (ak__nn_dw_args){&pl->g, r->x,    r->w,  r->b,   r->z,
                            r->y,   pl->C,   pl->Pin, pl->P, pl->act};
}

static void conv_dw_task(void *vr, size_t begin, size_t end, int tid) {
    const conv_run *r = vr;
    ak__nn_dw_args a = conv_dw_args(r);
    ak__nn_dw_planes(&a, begin, end, r->ws + (size_t)tid * r->pl->slot_floats);
}

/* Planes per task: each task zeroes its scratch's padding once, so runs of planes pay;
 * 4 tasks per thread keep the threads balanced; whole runs of 8 channels where those are
 * computed together. */
static size_t conv_dw_grain(const conv_run *r, const ak__op_ctx *ctx) {
    const conv_plan *pl = r->pl;
    size_t planes = (size_t)(pl->N * pl->C);
    size_t grain = planes / (4 * (size_t)ak__nn_pool_threads(ctx));
    ak__nn_dw_args a = conv_dw_args(r);
    if (ak__nn_dw_interleaves(&a)) grain = (grain + 7) / 8 * 8;
    return grain ? grain : 1;
}

/* ---- reference loop (other float types) --------------------------------------------- */

static ak_status conv_run_reference(ak__op_ctx *ctx, const conv_plan *pl) {
    const ak__tensor *X = ctx->inputs[0], *W = ctx->inputs[1];
    const ak__tensor *B = ak__op_in(ctx, 2);
    const ak__tensor *Z = ak__op_in(ctx, 3); /* FusedConv */
    ak__tensor *Y = ctx->outputs[0];
    const ak__nn_geom *g = &pl->g;
    int nsp = g->nsp;
    for (uint64_t nm = 0; nm < (uint64_t)(pl->N * pl->M); nm++) {
        uint64_t n = nm / (uint64_t)pl->M, m = nm % (uint64_t)pl->M;
        uint64_t grp = m / (uint64_t)pl->Mg;
        for (uint64_t p = 0; p < pl->P; p++) {
            int64_t o[AK_NN_MAX_SP];
            uint64_t q = p;
            for (int i = nsp - 1; i >= 0; i--) {
                o[i] = (int64_t)(q % (uint64_t)g->out[i]);
                q /= (uint64_t)g->out[i];
            }
            double acc = B ? ak__elem_get(B->data, B->type, m) : 0.0;
            for (uint64_t r = 0; r < pl->Kg; r++) {
                uint64_t c = r / pl->kprod, kk = r % pl->kprod;
                int64_t ks[AK_NN_MAX_SP], off = 0;
                int valid = 1;
                for (int i = nsp - 1; i >= 0; i--) {
                    ks[i] = (int64_t)(kk % (uint64_t)g->k[i]);
                    kk /= (uint64_t)g->k[i];
                }
                for (int i = 0; i < nsp; i++) {
                    int64_t ii = o[i] * g->s[i] - g->pb[i] + ks[i] * g->d[i];
                    if (ii < 0 || ii >= g->in[i]) valid = 0;
                    off = off * g->in[i] + ii;
                }
                if (!valid) continue;
                uint64_t xi = (n * (uint64_t)pl->C + grp * (uint64_t)pl->Cg + c) * pl->Pin +
                              (uint64_t)off;
                uint64_t wi = m * pl->Kg + r;
                acc += ak__elem_get(X->data, X->type, xi) * ak__elem_get(W->data, W->type, wi);
            }
            if (Z) acc += ak__elem_get(Z->data, Z->type, nm * pl->P + p);
            acc = ak__nn_act_apply(&pl->act, acc);
            ak__elem_set(Y->data, Y->type, nm * pl->P + p, acc);
        }
    }
    return AK_OK;
}

/* ---- the operators ----------------------------------------------------------------- */

static ak_status conv_plan_full(ak__op_ctx *ctx, conv_plan *pl, int op) {
    AK_CHECK(conv_plan_shapes(ctx, pl));
    if (op == OP_FUSED_CONV) AK_CHECK(ak__nn_parse_activation(ctx, &pl->act));
    if (ctx->inputs[0]->type != AK_ELEM_F32) {
        pl->kind = CONV_REFERENCE;
        return AK_OK;
    }
    conv_plan_path(pl, ak__nn_pool_threads(ctx), ctx->state);
    return AK_OK;
}

static ak_status conv_reshape_common(ak__op_ctx *ctx, int op) {
    conv_plan pl;
    AK_CHECK(conv_plan_full(ctx, &pl, op));
    conv_state *st = ctx->state; /* weights packed on first use for the path taken */
    if (pl.kind == CONV_IGEMM) AK_CHECK(ak__conv_igemm_prepare(st->ig, &pl.g, ctx->inputs[1]->data));
    if (pl.kind == CONV_WINOGRAD) AK_CHECK(ak__conv_wino_prepare(st->wino, ctx->inputs[1]->data));
    int64_t dims[2 + AK_NN_MAX_SP];
    dims[0] = pl.N;
    dims[1] = pl.M;
    memcpy(dims + 2, pl.g.out, (size_t)pl.g.nsp * sizeof *dims);
    AK_CHECK(ak__op_set_output(ctx, 0, ctx->inputs[0]->type, pl.g.nsp + 2, dims));
    const ak__tensor *Z = op == OP_FUSED_CONV ? ak__op_in(ctx, 3) : NULL;
    if (Z) {
        AK_CHECK(ak__op_check_type(ctx, 3, Z, ctx->inputs[0]->type));
        if (Z->rank != pl.g.nsp + 2 || memcmp(Z->dims, dims, (size_t)Z->rank * sizeof *dims) != 0)
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "Z must have Y's shape");
    }
    ctx->workspace_bytes = pl.slot_floats * pl.slots * sizeof(float);
    return AK_OK;
}

static ak_status conv_reshape(ak__op_ctx *ctx) { return conv_reshape_common(ctx, OP_CONV); }
static ak_status fused_conv_reshape(ak__op_ctx *ctx) {
    return conv_reshape_common(ctx, OP_FUSED_CONV);
}

static ak_status conv_run_common(ak__op_ctx *ctx, int op) {
    conv_plan pl;
    AK_CHECK(conv_plan_full(ctx, &pl, op));
    ak__tensor *Y = ak__op_out(ctx, 0);
    if (!Y || Y->count == 0) return AK_OK;
    if (pl.kind == CONV_REFERENCE) return conv_run_reference(ctx, &pl);
    /* run's pool may have more threads than reshape planned for: then one slot, serially */
    int serial = 0;
    if (pl.slot_floats * pl.slots * sizeof(float) > ctx->workspace_bytes) {
        if (pl.slot_floats * sizeof(float) > ctx->workspace_bytes)
            return AK_OP_FAIL(ctx->node, AK_ERR_INTERNAL,
                              "workspace of %zu bytes is smaller than the %zu needed",
                              ctx->workspace_bytes, pl.slot_floats * sizeof(float));
        serial = 1;
    }
    const ak__tensor *B = ak__op_in(ctx, 2);
    conv_run r;
    memset(&r, 0, sizeof r);
    r.pl = &pl;
    r.x = ctx->inputs[0]->data;
    r.w = ctx->inputs[1]->data;
    r.b = B ? B->data : NULL;
    const ak__tensor *Z = op == OP_FUSED_CONV ? ak__op_in(ctx, 3) : NULL;
    r.z = Z ? Z->data : NULL;
    r.y = Y->data;
    r.ws = ctx->workspace;
    r.pool = ctx->pool;
    const conv_state *st = ctx->state;
    ak__conv_igemm_args a = {&pl.g, pl.N, pl.C, r.x, r.b, r.z, r.y, pl.act, ctx->pool,
                             ctx->workspace, ctx->workspace_bytes, 0, 0};
    switch (pl.kind) {
    case CONV_WINOGRAD:
        return ak__conv_wino_run(st->wino, &a);
    case CONV_IGEMM:
        return ak__conv_igemm_run(st->ig, &a);
    case CONV_POINTWISE:
        conv_run_pointwise(&pl, &r);
        return AK_OK;
    case CONV_DEPTHWISE:
        if (serial) {
            conv_dw_task(&r, 0, (size_t)(pl.N * pl.C), 0);
            return AK_OK;
        }
        return ak_threadpool_parallel_for(ctx->pool, (size_t)(pl.N * pl.C),
                                          conv_dw_grain(&r, ctx), conv_dw_task, &r);
    default:
        return conv_run_general(ctx, &pl, &r, serial);
    }
}

static ak_status conv_run_op(ak__op_ctx *ctx) { return conv_run_common(ctx, OP_CONV); }
static ak_status fused_conv_run(ak__op_ctx *ctx) { return conv_run_common(ctx, OP_FUSED_CONV); }

/* 1 when the node's strides and dilations are all 1 (absent ones are). */
static int conv_attr_unit(const ak__ir_node *node, const char *name) {
    const int64_t *v;
    size_t n = ak__attr_ints(node, name, &v);
    for (size_t i = 0; i < n; i++)
        if (v[i] != 1) return 0;
    return 1;
}

static void conv_destroy(void *state) {
    conv_state *st = state;
    if (!st) return;
    ak__conv_igemm_free(st->ig);
    ak__conv_wino_free(st->wino);
    free(st);
}

/* Packs a constant float32 W (1-D or 2-D kernel) for the implicit-GEMM path, and sets up
 * Winograd for a 3×3 one of stride and dilation 1 in one group (its weights are
 * transformed at the first reshape that takes it); anything else leaves no state and
 * reshape reports what is wrong with it. */
static ak_status conv_create(const ak__ir_node *node, const ak__tensor *const *consts,
                             void **state) {
    *state = NULL;
    const ak__tensor *W = node->num_inputs >= 2 ? consts[1] : NULL;
    if (!W || W->type != AK_ELEM_F32 || W->rank < 3 || W->rank > 4 || W->dims[0] <= 0 ||
        W->count == 0)
        return AK_OK;
    conv_state *st = calloc(1, sizeof *st);
    if (!st) return AK_FAIL(AK_ERR_NO_MEMORY, "Conv: out of memory");
    int64_t group = ak__attr_int(node, "group", 1);
    ak_status s = ak__conv_igemm_pack(W->data, W->dims[0], group, W->count / (uint64_t)W->dims[0],
                                      &st->ig);
    if (s == AK_OK && W->rank == 4 && W->dims[2] == 3 && W->dims[3] == 3 && group == 1 &&
        conv_attr_unit(node, "strides") && conv_attr_unit(node, "dilations"))
        s = ak__conv_wino_create(W->dims[0], W->dims[1], &st->wino);
    if (s != AK_OK) {
        conv_destroy(st);
        return s;
    }
    *state = st;
    return AK_OK;
}

const ak__op_def ak__nn_conv = {"", "Conv", 1, 0, conv_create, conv_destroy, conv_reshape,
                                conv_run_op};
/* com.microsoft FusedConv: Y = activation(Conv(X, W, B) + Z), what graph fusion of
 * Conv [+ Add] + Relu/Clip/... produces (ONNX Runtime writes the same). */
const ak__op_def ak__nn_fused_conv = {"com.microsoft", "FusedConv", 1, 0, conv_create,
                                     conv_destroy, fused_conv_reshape, fused_conv_run};
