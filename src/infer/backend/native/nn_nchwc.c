/* NCHWc ("blocked") float32 convolutions: com.accelkit NchwcConv, what the graph
 * optimizer's layout pass (runtime/optimize.c) makes of 1×1 and depthwise Conv/FusedConv
 * nodes that follow each other (MobileNet's inverted residuals).
 *
 * Layout: a tensor (N, C, H, W) with C a multiple of 8 is stored as (N, C/8, H, W, 8):
 * element (n, c, p) at ((n·C/8 + c/8)·H·W + p)·8 + c%8. The 8 channels of a position are
 * one AVX2 vector, so
 *   pointwise  (1×1, stride 1, no pads, one group): a tile of 6 positions × 16 output
 *              channels broadcasts each input value of its 6 positions (one 192-byte run
 *              per block of 8 input channels, read in place: no column packing) against
 *              two vectors of weights packed at create, [pair of blocks][C][16];
 *   depthwise  (group == C == M, any window, strides, pads, dilations): an output
 *              position is a sum over its window, one vector load and one FMA per tap
 *              against the tap's 8 weights (no transposes, no padded copy);
 * and bias, Z and a ReLU/Clip finish in registers before the store (other activations in
 * a pass over the tile just written).
 * Attributes: Conv's (and FusedConv's activation), plus x_blocked, y_blocked and z_blocked
 * (0|1): whether X, Y and Z are stored blocked. An unblocked side is reordered through the
 * workspace, so a layer between a plain and a blocked part of the graph pays the reorder.
 * Values keep their logical NCHW shapes; the layout pass makes sure that only NchwcConv
 * nodes read the blocked ones. Without AVX2 the same loops run in scalar C (the reference
 * the tests hold the vector kernels to). */
#include <stdlib.h>
#include <string.h>

#include "core/init.h"
#include "infer/backend/native/nn_internal.h"
#include "infer/backend/native/tensor_common.h"
#if defined(__x86_64__) || defined(__i386__)
#include "infer/backend/native/nn_avx2.h"
#define NCHWC_X86 1
#endif

#define BLK AK_NN_NCHWC_BLOCK
#define PW_ROWS 6 /* positions per pointwise tile */
#define PW_CHUNK 96 /* positions per pointwise task (16 tiles) */

enum { NCHWC_POINTWISE, NCHWC_DEPTHWISE, NCHWC_DIRECT };

/* For tests: 1 runs the scalar loops even where AVX2 is active. */
int ak__nchwc_force_scalar = 0;

typedef struct nchwc_state {
    int kind;
    int64_t M, C, taps; /* output and input channels, window taps */
    int64_t K;          /* pointwise and direct: depth of a weight panel (C·taps) */
    float *w;           /* packed weights */
} nchwc_state;

/* ---- weights ------------------------------------------------------------------------ */

/* Pointwise: W (M, C) into panels of two output blocks, [M/16][C][16], then one of a
 * single block, [C][8], when M/8 is odd. */
static void pack_pointwise(const float *w, int64_t M, int64_t C, float *out) {
    int64_t pairs = M / 16;
    for (int64_t j = 0; j < pairs; j++)
        for (int64_t k = 0; k < C; k++)
            for (int l = 0; l < 16; l++) out[(j * C + k) * 16 + l] = w[(j * 16 + l) * C + k];
    if (M % 16)
        for (int64_t k = 0; k < C; k++)
            for (int l = 0; l < BLK; l++)
                out[pairs * C * 16 + k * BLK + l] = w[(pairs * 16 + l) * C + k];
}

/* Depthwise: W (M, 1, taps) into [M/8][taps][8]. */
static void pack_depthwise(const float *w, int64_t M, int64_t taps, float *out) {
    for (int64_t c = 0; c < M; c++)
        for (int64_t t = 0; t < taps; t++) out[((c / BLK) * taps + t) * BLK + c % BLK] = w[c * taps + t];
}

/* ---- reorders ------------------------------------------------------------------------ */

/* Image n's blocks [cb0, cb1) between (C, P) and (C/8, P, 8). */
static void reorder_blocks(const float *src, float *dst, int64_t C, uint64_t P, int64_t n,
                           size_t cb0, size_t cb1, int to_blocked) {
    for (size_t cb = cb0; cb < cb1; cb++) {
        uint64_t off = ((uint64_t)n * (uint64_t)C + cb * BLK) * P;
        if (to_blocked)
            ak__tops_transpose_f32(dst + off, BLK, src + off, (int64_t)P, BLK, (int64_t)P);
        else
            ak__tops_transpose_f32(dst + off, (int64_t)P, src + off, BLK, (int64_t)P, BLK);
    }
}

typedef struct reorder_job {
    const float *src;
    float *dst;
    int64_t C;
    uint64_t P;
    int to_blocked;
} reorder_job;

static void reorder_task(void *vj, size_t begin, size_t end, int tid) {
    (void)tid;
    const reorder_job *j = vj;
    size_t blocks = (size_t)j->C / BLK;
    for (size_t i = begin; i < end; i++)
        reorder_blocks(j->src, j->dst, j->C, j->P, (int64_t)(i / blocks), i % blocks, i % blocks + 1,
                       j->to_blocked);
}

static void reorder(ak_threadpool *pool, const float *src, float *dst, int64_t N, int64_t C,
                    uint64_t P, int to_blocked) {
    reorder_job j = {src, dst, C, P, to_blocked};
    ak__nn_parallel(pool, (size_t)(N * (C / BLK)), 1, reorder_task, &j);
}

/* ---- the finish ------------------------------------------------------------------------ */

/* What every kernel applies to its sums: bias, then Z, then a ReLU or Clip (the other
 * activations run in a pass over what the task wrote). */
typedef struct finish {
    const float *bias; /* M floats or NULL */
    const float *z;    /* blocked like y, or NULL */
    int act;           /* AK_NN_ACT_NONE, _RELU or _CLIP */
    float lo, hi;
} finish;

static float finish_scalar(const finish *f, float v, const float *z) {
    if (z) v += *z;
    if (f->act == AK_NN_ACT_RELU) v = v > 0.0f ? v : 0.0f;
    else if (f->act == AK_NN_ACT_CLIP) v = v < f->lo ? f->lo : v > f->hi ? f->hi : v;
    return v;
}

/* ---- pointwise ------------------------------------------------------------------------- */

typedef struct pw_tile {
    const float *x; /* input at the tile's first position, block 0 */
    const float *w; /* the panel: [C][8·nb] */
    const float *bias; /* the panel's 8·nb biases, or NULL */
    const float *z; /* Z like y, or NULL */
    float *y;       /* output at the tile's first position, the panel's first block */
    uint64_t plane; /* floats between blocks: P·8 */
    size_t kb;      /* input blocks */
} pw_tile;

static void pw_tile_scalar(const pw_tile *t, int nb, int rows, const finish *f) {
    float acc[PW_ROWS][16];
    int width = nb * BLK;
    for (int r = 0; r < rows; r++)
        for (int l = 0; l < width; l++) acc[r][l] = t->bias ? t->bias[l] : 0.0f;
    for (size_t cb = 0; cb < t->kb; cb++)
        for (int c = 0; c < BLK; c++) {
            const float *wk = t->w + (cb * BLK + (size_t)c) * (size_t)width;
            for (int r = 0; r < rows; r++) {
                float a = t->x[cb * t->plane + (size_t)r * BLK + (size_t)c];
                for (int l = 0; l < width; l++) acc[r][l] += a * wk[l];
            }
        }
    for (int r = 0; r < rows; r++)
        for (int l = 0; l < width; l++) {
            size_t at = (size_t)(l / BLK) * t->plane + (size_t)r * BLK + (size_t)(l % BLK);
            t->y[at] = finish_scalar(f, acc[r][l], t->z ? t->z + at : NULL);
        }
}

#ifdef NCHWC_X86
/* y[at..at+8) = the finish of v (with z[at..] when z is there). */
__attribute__((target("avx2,fma"))) static inline void store_finished(float *y, const float *z,
                                                                      size_t at, const finish *f,
                                                                      __m256 v) {
    __m256 lo = _mm256_set1_ps(f->act == AK_NN_ACT_CLIP ? f->lo : 0.0f), hi = _mm256_set1_ps(f->hi);
    _mm256_storeu_ps(y + at, ak__nn_finish8(v, z ? z + at : NULL, ak__nn_first_lanes(BLK), 1,
                                            f->act, lo, hi));
}

/* The first n rows of the finished 6 × 16 tile out (rows = positions from pos, two blocks
 * plane apart). */
__attribute__((target("avx2,fma"))) static void store_tile_6x16(float *y, const float *z,
                                                               uint64_t plane, size_t pos,
                                                               const finish *f,
                                                               __m256 out[PW_ROWS][2], int n) {
    for (int r = 0; r < n; r++) {
        store_finished(y, z, pos + (size_t)r * BLK, f, out[r][0]);
        store_finished(y, z, plane + pos + (size_t)r * BLK, f, out[r][1]);
    }
}

/* The finished vector of block b, row r of the tile, stored. */
__attribute__((target("avx2,fma"))) static inline void pw_store(const pw_tile *t, const finish *f,
                                                                int b, int r, __m256 v) {
    store_finished(t->y, t->z, (size_t)b * t->plane + (size_t)r * BLK, f, v);
}

__attribute__((target("avx2,fma"))) static inline __m256 pw_bias(const pw_tile *t, int b) {
    return t->bias ? _mm256_loadu_ps(t->bias + b * BLK) : _mm256_setzero_ps();
}

/* One row of a two-block tile: input value c of position r against both weight vectors.
 * Named accumulators (no arrays) keep all twelve in registers. */
/* One step of a 6 × 16 tile: the input values xp[0], xp[step], …, xp[5·step] (one per
 * position) against the weight vectors w0 and w1, into the accumulators c00 … c51. */
#define TILE_ROW2(x_, r, acc0, acc1)                             \
    do {                                                         \
        __m256 a_ = _mm256_broadcast_ss(x_ + (r) * step_);       \
        acc0 = _mm256_fmadd_ps(a_, w0, acc0);                    \
        acc1 = _mm256_fmadd_ps(a_, w1, acc1);                    \
    } while (0)
#define TILE_6X16_FMA(xp, step)                                  \
    do {                                                         \
        const float *x6_ = (xp);                                 \
        int64_t step_ = (step);                                  \
        TILE_ROW2(x6_, 0, c00, c01);                             \
        TILE_ROW2(x6_, 1, c10, c11);                             \
        TILE_ROW2(x6_, 2, c20, c21);                             \
        TILE_ROW2(x6_, 3, c30, c31);                             \
        TILE_ROW2(x6_, 4, c40, c41);                             \
        TILE_ROW2(x6_, 5, c50, c51);                             \
    } while (0)

/* 6 positions × 16 output channels. */
__attribute__((target("avx2,fma"))) static void pw_tile_6x16_avx2(const pw_tile *t, const finish *f) {
    __m256 b0 = pw_bias(t, 0), b1 = pw_bias(t, 1);
    __m256 c00 = b0, c01 = b1, c10 = b0, c11 = b1, c20 = b0, c21 = b1;
    __m256 c30 = b0, c31 = b1, c40 = b0, c41 = b1, c50 = b0, c51 = b1;
    const float *x = t->x, *w = t->w;
    for (size_t cb = 0; cb < t->kb; cb++, x += t->plane)
        for (int c = 0; c < BLK; c++, w += 2 * BLK) {
            __m256 w0 = _mm256_loadu_ps(w), w1 = _mm256_loadu_ps(w + BLK);
            TILE_6X16_FMA(x + c, BLK);
        }
    __m256 out[PW_ROWS][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
    store_tile_6x16(t->y, t->z, t->plane, 0, f, out, PW_ROWS);
}

#define PW_ROW1(r, acc) acc = _mm256_fmadd_ps(_mm256_broadcast_ss(x + (r) * BLK + c), w0, acc)

/* 6 positions × 8 output channels (the last block of an odd count). */
__attribute__((target("avx2,fma"))) static void pw_tile_6x8_avx2(const pw_tile *t, const finish *f) {
    __m256 b0 = pw_bias(t, 0);
    __m256 c0 = b0, c1 = b0, c2 = b0, c3 = b0, c4 = b0, c5 = b0;
    const float *x = t->x, *w = t->w;
    for (size_t cb = 0; cb < t->kb; cb++, x += t->plane)
        for (int c = 0; c < BLK; c++, w += BLK) {
            __m256 w0 = _mm256_loadu_ps(w);
            PW_ROW1(0, c0);
            PW_ROW1(1, c1);
            PW_ROW1(2, c2);
            PW_ROW1(3, c3);
            PW_ROW1(4, c4);
            PW_ROW1(5, c5);
        }
    __m256 out[PW_ROWS] = {c0, c1, c2, c3, c4, c5};
    for (int r = 0; r < PW_ROWS; r++) pw_store(t, f, 0, r, out[r]);
}

/* One position × nb (1 or 2) blocks: the tiles' tail. */
__attribute__((target("avx2,fma"))) static void pw_tile_1_avx2(const pw_tile *t, int nb,
                                                              const finish *f) {
    __m256 c0 = pw_bias(t, 0), c1 = nb == 2 ? pw_bias(t, 1) : c0;
    const float *x = t->x, *w = t->w;
    size_t width = (size_t)nb * BLK;
    for (size_t cb = 0; cb < t->kb; cb++, x += t->plane)
        for (int c = 0; c < BLK; c++, w += width) {
            __m256 a = _mm256_broadcast_ss(x + c);
            c0 = _mm256_fmadd_ps(a, _mm256_loadu_ps(w), c0);
            if (nb == 2) c1 = _mm256_fmadd_ps(a, _mm256_loadu_ps(w + BLK), c1);
        }
    pw_store(t, f, 0, 0, c0);
    if (nb == 2) pw_store(t, f, 1, 0, c1);
}

__attribute__((target("avx2,fma"))) static void pw_tiles_avx2(pw_tile t, int nb, size_t n,
                                                              const finish *f) {
    size_t p = 0;
    for (; p + PW_ROWS <= n; p += PW_ROWS) {
        if (nb == 2) pw_tile_6x16_avx2(&t, f);
        else pw_tile_6x8_avx2(&t, f);
        t.x += PW_ROWS * BLK, t.y += PW_ROWS * BLK;
        if (t.z) t.z += PW_ROWS * BLK;
    }
    for (; p < n; p++) {
        pw_tile_1_avx2(&t, nb, f);
        t.x += BLK, t.y += BLK;
        if (t.z) t.z += BLK;
    }
}
#endif

/* n positions from the tile's start, in tiles of PW_ROWS. */
static void pw_tiles(pw_tile t, int nb, size_t n, const finish *f, int avx2) {
#ifdef NCHWC_X86
    if (avx2) {
        pw_tiles_avx2(t, nb, n, f);
        return;
    }
#endif
    (void)avx2;
    for (size_t p = 0; p < n; p += PW_ROWS) {
        int rows = n - p < PW_ROWS ? (int)(n - p) : PW_ROWS;
        pw_tile_scalar(&t, nb, rows, f);
        t.x += PW_ROWS * BLK, t.y += PW_ROWS * BLK;
        if (t.z) t.z += PW_ROWS * BLK;
    }
}

/* ---- depthwise ------------------------------------------------------------------------- */

typedef struct dw_plane {
    const float *x; /* the input block: (H, W, 8) */
    const float *w; /* its packed window: (taps, 8) */
    const float *bias;
    const float *z; /* Z's block, or NULL */
    float *y;       /* the output block: (OH, OW, 8) */
} dw_plane;

/* The taps of the window along one axis that land inside [0, in) for output o. */
static void dw_axis_range(const ak__nn_geom *g, int axis, int64_t o, int64_t *k0, int64_t *k1) {
    int64_t first = o * g->s[axis] - g->pb[axis], d = g->d[axis];
    int64_t lo = first >= 0 ? 0 : (-first + d - 1) / d;
    int64_t hi = (g->in[axis] - first + d - 1) / d;
    *k0 = lo;
    *k1 = hi < g->k[axis] ? hi : g->k[axis];
    if (*k1 < *k0) *k1 = *k0;
}

/* Output columns whose whole window lies inside the row: [*lo, *hi). */
static void dw_inner_cols(const ak__nn_geom *g, int64_t *lo, int64_t *hi) {
    int64_t s = g->s[1], reach = (g->k[1] - 1) * g->d[1];
    *lo = (g->pb[1] + s - 1) / s;
    int64_t last = g->in[1] - 1 - reach + g->pb[1]; /* ox*s <= last */
    *hi = last < 0 ? 0 : last / s + 1;
    if (*hi > g->out[1]) *hi = g->out[1];
    if (*lo > *hi) *lo = *hi;
}

static void dw_output_scalar(const ak__nn_geom *g, const dw_plane *d, int64_t oy, int64_t ox,
                             const finish *f) {
    int64_t ky0, ky1, kx0, kx1;
    dw_axis_range(g, 0, oy, &ky0, &ky1);
    dw_axis_range(g, 1, ox, &kx0, &kx1);
    float acc[BLK];
    for (int l = 0; l < BLK; l++) acc[l] = d->bias ? d->bias[l] : 0.0f;
    for (int64_t ky = ky0; ky < ky1; ky++) {
        int64_t iy = oy * g->s[0] - g->pb[0] + ky * g->d[0];
        for (int64_t kx = kx0; kx < kx1; kx++) {
            int64_t ix = ox * g->s[1] - g->pb[1] + kx * g->d[1];
            const float *xv = d->x + (iy * g->in[1] + ix) * BLK, *wv = d->w + (ky * g->k[1] + kx) * BLK;
            for (int l = 0; l < BLK; l++) acc[l] += xv[l] * wv[l];
        }
    }
    size_t at = (size_t)(oy * g->out[1] + ox) * BLK;
    for (int l = 0; l < BLK; l++)
        d->y[at + (size_t)l] = finish_scalar(f, acc[l], d->z ? d->z + at + l : NULL);
}

#ifdef NCHWC_X86
/* One output with its window clipped to the plane, as a vector of 8 channels. */
__attribute__((target("avx2,fma"))) static __m256 dw_output_avx2(const ak__nn_geom *g,
                                                                 const dw_plane *d, int64_t oy,
                                                                 int64_t ox, __m256 acc) {
    int64_t ky0, ky1, kx0, kx1;
    dw_axis_range(g, 0, oy, &ky0, &ky1);
    dw_axis_range(g, 1, ox, &kx0, &kx1);
    for (int64_t ky = ky0; ky < ky1; ky++) {
        int64_t iy = oy * g->s[0] - g->pb[0] + ky * g->d[0];
        for (int64_t kx = kx0; kx < kx1; kx++) {
            int64_t ix = ox * g->s[1] - g->pb[1] + kx * g->d[1];
            acc = _mm256_fmadd_ps(_mm256_loadu_ps(d->x + (iy * g->in[1] + ix) * BLK),
                                  _mm256_loadu_ps(d->w + (ky * g->k[1] + kx) * BLK), acc);
        }
    }
    return acc;
}

/* Output row oy: columns [in_lo, in_hi), whose windows lie inside the row, 4 at a time
 * (4 independent FMA chains) without bounds; the border columns one at a time. */
__attribute__((target("avx2,fma"))) static void dw_row_avx2(const ak__nn_geom *g,
                                                            const dw_plane *d, int64_t oy,
                                                            const finish *f, int64_t in_lo,
                                                            int64_t in_hi) {
    int64_t ky0, ky1;
    dw_axis_range(g, 0, oy, &ky0, &ky1);
    int64_t sx = g->s[1] * BLK, dx = g->d[1] * BLK, kw = g->k[1];
    __m256 lo = _mm256_set1_ps(f->act == AK_NN_ACT_CLIP ? f->lo : 0.0f), hi = _mm256_set1_ps(f->hi);
    __m256 bias = d->bias ? _mm256_loadu_ps(d->bias) : _mm256_setzero_ps();
    __m256i all = ak__nn_first_lanes(BLK);
    float *yrow = d->y + oy * g->out[1] * BLK;
    const float *zrow = d->z ? d->z + oy * g->out[1] * BLK : NULL;
#define DW_STORE(ox, v)                                                                       \
    _mm256_storeu_ps(yrow + (ox) * BLK,                                                       \
                     ak__nn_finish8(v, zrow ? zrow + (ox) * BLK : NULL, all, 1, f->act, lo, hi))
    for (int64_t ox = 0; ox < in_lo; ox++) DW_STORE(ox, dw_output_avx2(g, d, oy, ox, bias));
    int64_t ox = in_lo;
    for (; ox + 4 <= in_hi; ox += 4) {
        __m256 a0 = bias, a1 = bias, a2 = bias, a3 = bias;
        for (int64_t ky = ky0; ky < ky1; ky++) {
            int64_t iy = oy * g->s[0] - g->pb[0] + ky * g->d[0];
            const float *xr = d->x + (iy * g->in[1] + ox * g->s[1] - g->pb[1]) * BLK;
            const float *wr = d->w + ky * kw * BLK;
            for (int64_t kx = 0; kx < kw; kx++, xr += dx) {
                __m256 wv = _mm256_loadu_ps(wr + kx * BLK);
                a0 = _mm256_fmadd_ps(_mm256_loadu_ps(xr), wv, a0);
                a1 = _mm256_fmadd_ps(_mm256_loadu_ps(xr + sx), wv, a1);
                a2 = _mm256_fmadd_ps(_mm256_loadu_ps(xr + 2 * sx), wv, a2);
                a3 = _mm256_fmadd_ps(_mm256_loadu_ps(xr + 3 * sx), wv, a3);
            }
        }
        DW_STORE(ox, a0);
        DW_STORE(ox + 1, a1);
        DW_STORE(ox + 2, a2);
        DW_STORE(ox + 3, a3);
    }
    for (; ox < g->out[1]; ox++) DW_STORE(ox, dw_output_avx2(g, d, oy, ox, bias));
#undef DW_STORE
}
#endif

/* Output rows [oy0, oy1) of one block: the columns whose window crosses the border with
 * bounds, the others without (AVX2: 4 at a time). */
static void dw_rows(const ak__nn_geom *g, const dw_plane *d, int64_t oy0, int64_t oy1,
                    const finish *f, int avx2) {
    int64_t in_lo, in_hi;
    dw_inner_cols(g, &in_lo, &in_hi);
    for (int64_t oy = oy0; oy < oy1; oy++) {
#ifdef NCHWC_X86
        if (avx2) {
            dw_row_avx2(g, d, oy, f, in_lo, in_hi);
            continue;
        }
#endif
        (void)avx2;
        for (int64_t ox = 0; ox < g->out[1]; ox++) dw_output_scalar(g, d, oy, ox, f);
    }
}

/* ---- direct (stems) --------------------------------------------------------------------- */

/* Few input channels (a plain X, C < 8) and any window in one group, a stem: output
 * (oy, ox) of a panel (nb blocks) sums every tap (c, ky, kx) of the image against the
 * panel's 8·nb weights of that tap, packed like pointwise panels of depth C·kh·kw. */
typedef struct direct_args {
    const ak__nn_geom *g;
    const float *x; /* the image, plain (C, H, W) */
    int64_t C;
    const float *w; /* the panel: [C·kh·kw][8·nb] */
    int nb;
    const float *bias, *z; /* the panel's (z blocked, at its first block), or NULL */
    float *y;              /* blocked, at the panel's first block */
    uint64_t plane;        /* floats between blocks: P·8 */
    float *rowbuf;         /* this thread's padded rows: C·kh rows of rowbuf_width */
    int64_t rowbuf_width;
} direct_args;

static void direct_output_scalar(const direct_args *a, int64_t oy, int64_t ox, const finish *f) {
    const ak__nn_geom *g = a->g;
    int64_t ky0, ky1, kx0, kx1;
    dw_axis_range(g, 0, oy, &ky0, &ky1);
    dw_axis_range(g, 1, ox, &kx0, &kx1);
    int width = a->nb * BLK;
    float acc[16];
    for (int l = 0; l < width; l++) acc[l] = a->bias ? a->bias[l] : 0.0f;
    for (int64_t c = 0; c < a->C; c++)
        for (int64_t ky = ky0; ky < ky1; ky++) {
            int64_t iy = oy * g->s[0] - g->pb[0] + ky * g->d[0];
            for (int64_t kx = kx0; kx < kx1; kx++) {
                int64_t ix = ox * g->s[1] - g->pb[1] + kx * g->d[1];
                float v = a->x[(c * g->in[0] + iy) * g->in[1] + ix];
                const float *wk = a->w + ((c * g->k[0] + ky) * g->k[1] + kx) * width;
                for (int l = 0; l < width; l++) acc[l] += v * wk[l];
            }
        }
    size_t pos = (size_t)(oy * g->out[1] + ox) * BLK;
    for (int l = 0; l < width; l++) {
        size_t at = (size_t)(l / BLK) * a->plane + pos + (size_t)(l % BLK);
        a->y[at] = finish_scalar(f, acc[l], a->z ? a->z + at : NULL);
    }
}

#ifdef NCHWC_X86
/* One output, its window clipped to the image. */
__attribute__((target("avx2,fma"))) static void direct_output_avx2(const direct_args *a, int64_t oy,
                                                                   int64_t ox, const finish *f) {
    const ak__nn_geom *g = a->g;
    int64_t ky0, ky1, kx0, kx1;
    dw_axis_range(g, 0, oy, &ky0, &ky1);
    dw_axis_range(g, 1, ox, &kx0, &kx1);
    size_t width = (size_t)a->nb * BLK;
    __m256 c0 = a->bias ? _mm256_loadu_ps(a->bias) : _mm256_setzero_ps();
    __m256 c1 = a->bias && a->nb == 2 ? _mm256_loadu_ps(a->bias + BLK) : _mm256_setzero_ps();
    for (int64_t c = 0; c < a->C; c++)
        for (int64_t ky = ky0; ky < ky1; ky++) {
            int64_t iy = oy * g->s[0] - g->pb[0] + ky * g->d[0];
            for (int64_t kx = kx0; kx < kx1; kx++) {
                int64_t ix = ox * g->s[1] - g->pb[1] + kx * g->d[1];
                __m256 v = _mm256_broadcast_ss(a->x + (c * g->in[0] + iy) * g->in[1] + ix);
                const float *wk = a->w + (size_t)((c * g->k[0] + ky) * g->k[1] + kx) * width;
                c0 = _mm256_fmadd_ps(v, _mm256_loadu_ps(wk), c0);
                if (a->nb == 2) c1 = _mm256_fmadd_ps(v, _mm256_loadu_ps(wk + BLK), c1);
            }
        }
    size_t pos = (size_t)(oy * g->out[1] + ox) * BLK;
    store_finished(a->y, a->z, pos, f, c0);
    if (a->nb == 2) store_finished(a->y, a->z, a->plane + pos, f, c1);
}

/* Outputs ox0..ox0+5 of a two-block panel from the padded rows of rowbuf (see
 * direct_fill_rows); the first n of them are stored. */
__attribute__((target("avx2,fma"))) static void direct_tile_6x16_avx2(const direct_args *a, int64_t oy,
                                                                      int64_t ox0, int n,
                                                                      const finish *f) {
    const ak__nn_geom *g = a->g;
    int64_t sx = g->s[1], dx = g->d[1], kw = g->k[1], rows = a->C * g->k[0];
    __m256 b0 = a->bias ? _mm256_loadu_ps(a->bias) : _mm256_setzero_ps();
    __m256 b1 = a->bias ? _mm256_loadu_ps(a->bias + BLK) : _mm256_setzero_ps();
    __m256 c00 = b0, c01 = b1, c10 = b0, c11 = b1, c20 = b0, c21 = b1;
    __m256 c30 = b0, c31 = b1, c40 = b0, c41 = b1, c50 = b0, c51 = b1;
    const float *wk = a->w;
    for (int64_t k = 0; k < rows; k++) { /* (c, ky) */
        const float *row = a->rowbuf + k * a->rowbuf_width + ox0 * sx;
        for (int64_t kx = 0; kx < kw; kx++, wk += 2 * BLK) {
            __m256 w0 = _mm256_loadu_ps(wk), w1 = _mm256_loadu_ps(wk + BLK);
            TILE_6X16_FMA(row + kx * dx, sx);
        }
    }
    __m256 out[PW_ROWS][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
    store_tile_6x16(a->y, a->z, a->plane, (size_t)(oy * g->out[1] + ox0) * BLK, f, out, n);
}
#endif

/* Floats per (c, ky) row of a direct layer's padded row buffer: every column that whole
 * 6-output tiles over an output row read. */
static int64_t direct_rowbuf_width(const ak__nn_geom *g) {
    int64_t tiles = (g->out[1] + PW_ROWS - 1) / PW_ROWS;
    return (tiles * PW_ROWS - 1) * g->s[1] + (g->k[1] - 1) * g->d[1] + 1;
}

/* rowbuf = the input rows (c, ky) under output row oy, column j holding x[.., j − pad],
 * zeros outside the image: every tile then reads whole windows, with no bounds tests and
 * no one-output-at-a-time border columns (a fifth of a stem's time). */
static void direct_fill_rows(const direct_args *a, int64_t oy) {
    const ak__nn_geom *g = a->g;
    int64_t H = g->in[0], W = g->in[1], bw = a->rowbuf_width, pad = g->pb[1];
    int64_t lead = pad < bw ? pad : bw, copy = W < bw - lead ? W : bw - lead;
    float *d = a->rowbuf;
    for (int64_t c = 0; c < a->C; c++)
        for (int64_t ky = 0; ky < g->k[0]; ky++, d += bw) {
            int64_t iy = oy * g->s[0] - g->pb[0] + ky * g->d[0];
            if (iy < 0 || iy >= H) {
                memset(d, 0, (size_t)bw * sizeof *d);
                continue;
            }
            memset(d, 0, (size_t)lead * sizeof *d);
            memcpy(d + lead, a->x + (c * H + iy) * W, (size_t)copy * sizeof *d);
            memset(d + lead + copy, 0, (size_t)(bw - lead - copy) * sizeof *d);
        }
}

/* Output rows [oy0, oy1): AVX2 runs two-block panels 6 outputs at a time over padded rows,
 * a single block one output at a time with its window clipped; the scalar loops too. */
static void direct_rows(const direct_args *a, int64_t oy0, int64_t oy1, const finish *f, int avx2) {
    int64_t OW = a->g->out[1];
    for (int64_t oy = oy0; oy < oy1; oy++) {
#ifdef NCHWC_X86
        if (avx2 && a->nb == 2) {
            direct_fill_rows(a, oy);
            for (int64_t ox = 0; ox < OW; ox += PW_ROWS)
                direct_tile_6x16_avx2(a, oy, ox, OW - ox < PW_ROWS ? (int)(OW - ox) : PW_ROWS, f);
            continue;
        }
        if (avx2) {
            for (int64_t ox = 0; ox < OW; ox++) direct_output_avx2(a, oy, ox, f);
            continue;
        }
#endif
        (void)avx2;
        for (int64_t ox = 0; ox < OW; ox++) direct_output_scalar(a, oy, ox, f);
    }
}

/* ---- the operator ------------------------------------------------------------------------ */

typedef struct nchwc_run {
    const nchwc_state *st;
    ak__nn_geom g;
    int64_t N;
    uint64_t P, Pin;
    const float *x, *bias, *z; /* blocked (x, z: from the workspace when reordered) */
    float *y;                  /* blocked */
    finish fin;
    ak__nn_act act; /* applied after the kernel when the finish cannot (Sigmoid...) */
    int avx2;
    size_t chunks, panels; /* pointwise: position chunks; weight panels per image */
    int64_t rows_per_task; /* depthwise and direct: output rows per task */
    int reorder_x, reorder_z, reorder_y; /* plain sides that go through the workspace */
    size_t row_tasks;
    float *rowbufs;       /* direct: one padded row buffer per thread, from the workspace */
    size_t rowbuf_floats; /* direct: floats of one */
} nchwc_run;

/* A pass of an activation the finish cannot apply, over n floats at y. */
static void late_activation(const nchwc_run *r, float *y, size_t n) {
    if (r->act.kind != r->fin.act) ak__nn_act_rows(&r->act, y, 1, n, n);
}

/* Task i = (image, chunk of positions, panel): consecutive tasks share an input chunk. */
static void pw_task(void *vr, size_t begin, size_t end, int tid) {
    (void)tid;
    const nchwc_run *r = vr;
    const nchwc_state *st = r->st;
    size_t kb = (size_t)st->C / BLK, mb = (size_t)st->M / BLK;
    for (size_t i = begin; i < end; i++) {
        size_t j = i % r->panels, c = i / r->panels % r->chunks, n = i / r->panels / r->chunks;
        size_t p0 = c * PW_CHUNK, np = r->P - p0 < PW_CHUNK ? r->P - p0 : PW_CHUNK;
        int nb = 2 * j + 2 <= mb ? 2 : 1;
        uint64_t ybase = (n * mb + 2 * j) * r->P * BLK + p0 * BLK;
        pw_tile t = {r->x + n * kb * r->Pin * BLK + p0 * BLK, st->w + j * (size_t)st->K * 16,
                     r->bias ? r->bias + 2 * j * BLK : NULL, r->z ? r->z + ybase : NULL,
                     r->y + ybase, r->P * BLK, kb};
        pw_tiles(t, nb, np, &r->fin, r->avx2);
        for (int b = 0; b < nb; b++) late_activation(r, r->y + ybase + b * r->P * BLK, np * BLK);
    }
}

/* Task i = (image and block, band of rows_per_task output rows). */
static void dw_task(void *vr, size_t begin, size_t end, int tid) {
    (void)tid;
    const nchwc_run *r = vr;
    const nchwc_state *st = r->st;
    size_t mb = (size_t)st->M / BLK;
    for (size_t i = begin; i < end; i++) {
        size_t plane = i / r->row_tasks, band = i % r->row_tasks, cb = plane % mb;
        int64_t oy0 = (int64_t)band * r->rows_per_task, oy1 = oy0 + r->rows_per_task;
        if (oy1 > r->g.out[0]) oy1 = r->g.out[0];
        uint64_t yoff = plane * r->P * BLK;
        dw_plane d = {r->x + plane * r->Pin * BLK, st->w + cb * (size_t)st->taps * BLK,
                      r->bias ? r->bias + cb * BLK : NULL, r->z ? r->z + yoff : NULL, r->y + yoff};
        dw_rows(&r->g, &d, oy0, oy1, &r->fin, r->avx2);
        late_activation(r, d.y + oy0 * r->g.out[1] * BLK, (size_t)((oy1 - oy0) * r->g.out[1]) * BLK);
    }
}

/* Task i = (image, panel, band of rows_per_task output rows). */
static void direct_task(void *vr, size_t begin, size_t end, int tid) {
    const nchwc_run *r = vr;
    const nchwc_state *st = r->st;
    size_t mb = (size_t)st->M / BLK;
    for (size_t i = begin; i < end; i++) {
        size_t band = i % r->row_tasks, j = i / r->row_tasks % r->panels;
        size_t n = i / r->row_tasks / r->panels;
        int64_t oy0 = (int64_t)band * r->rows_per_task, oy1 = oy0 + r->rows_per_task;
        if (oy1 > r->g.out[0]) oy1 = r->g.out[0];
        int nb = 2 * j + 2 <= mb ? 2 : 1;
        uint64_t ybase = (n * mb + 2 * j) * r->P * BLK, plane = r->P * BLK;
        direct_args a = {&r->g, r->x + n * (size_t)st->C * r->Pin, st->C, st->w + j * (size_t)st->K * 16,
                         nb, r->bias ? r->bias + 2 * j * BLK : NULL, r->z ? r->z + ybase : NULL,
                         r->y + ybase, plane, r->rowbufs + (size_t)tid * r->rowbuf_floats,
                         direct_rowbuf_width(&r->g)};
        direct_rows(&a, oy0, oy1, &r->fin, r->avx2);
        size_t first = (size_t)(oy0 * r->g.out[1]) * BLK, n_out = (size_t)((oy1 - oy0) * r->g.out[1]) * BLK;
        for (int b = 0; b < nb; b++) late_activation(r, r->y + ybase + b * plane + first, n_out);
    }
}

static void nchwc_destroy(void *state) {
    nchwc_state *st = state;
    if (st) free(st->w);
    free(st);
}

/* Packs the constant W of a pointwise, depthwise or direct (stem) layer; anything else is
 * refused (the layout pass only makes NchwcConv nodes out of those). */
static ak_status nchwc_create(const ak__ir_node *node, const ak__tensor *const *consts,
                              void **state) {
    const ak__tensor *W = node->num_inputs >= 2 ? consts[1] : NULL;
    if (!W || W->type != AK_ELEM_F32 || W->rank != 4)
        return AK_OP_FAIL(node, AK_ERR_UNSUPPORTED, "W must be a constant float32 (M, C, kh, kw)");
    int64_t M = W->dims[0], group = ak__attr_int(node, "group", 1);
    int64_t taps = W->dims[2] * W->dims[3];
    int kind;
    if (group == 1 && taps == 1 && W->dims[1] % BLK == 0) kind = NCHWC_POINTWISE;
    else if (group == M && W->dims[1] == 1) kind = NCHWC_DEPTHWISE;
    else if (group == 1 && W->dims[1] < BLK) kind = NCHWC_DIRECT;
    else return AK_OP_FAIL(node, AK_ERR_UNSUPPORTED, "only 1×1, depthwise and stem layers are blocked");
    int64_t C = kind == NCHWC_DEPTHWISE ? M : W->dims[1];
    if (M <= 0 || M % BLK || (kind != NCHWC_DIRECT && C % BLK) || taps <= 0)
        return AK_OP_FAIL(node, AK_ERR_UNSUPPORTED, "channels %lld -> %lld are not multiples of 8",
                          (long long)C, (long long)M);
    if (kind == NCHWC_DIRECT && ak__attr_int(node, "x_blocked", 0))
        return AK_OP_FAIL(node, AK_ERR_UNSUPPORTED, "a stem reads a plain X");
    nchwc_state *st = calloc(1, sizeof *st);
    float *w = aligned_alloc(64, ((size_t)W->count * sizeof(float) + 63) / 64 * 64);
    if (!st || !w) {
        free(st);
        free(w);
        return AK_FAIL(AK_ERR_NO_MEMORY, "NchwcConv: out of memory");
    }
    *st = (nchwc_state){kind, M, C, taps, C * taps, w};
    if (kind == NCHWC_DEPTHWISE) pack_depthwise(W->data, M, taps, st->w);
    else pack_pointwise(W->data, M, st->K, st->w); /* W as (M, C·taps) */
    *state = st;
    return AK_OK;
}

static int blocked(const ak__op_ctx *ctx, const char *side) {
    return ak__attr_int(ctx->node, side, 0) != 0;
}

/* Geometry and checks shared by reshape and run; *ws_floats: the reorder scratch and the
 * direct kind's row buffers. */
static ak_status nchwc_plan(ak__op_ctx *ctx, nchwc_run *r, size_t *ws_floats) {
    const nchwc_state *st = ctx->state;
    const ak__tensor *X, *W, *B = ak__op_in(ctx, 2);
    AK_CHECK(ak__op_require(ctx, 0, &X));
    AK_CHECK(ak__op_require(ctx, 1, &W));
    AK_CHECK(ak__op_check_type(ctx, 0, X, AK_ELEM_F32));
    if (X->rank != 4 || X->dims[1] != st->C)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "X must be (N, %lld, H, W)",
                          (long long)st->C);
    if (B && (B->type != AK_ELEM_F32 || B->rank != 1 || B->dims[0] != st->M))
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "B must be float32 (%lld)",
                          (long long)st->M);
    memset(r, 0, sizeof *r);
    r->st = st;
    AK_CHECK(ak__nn_geom_init(ctx, 2, X->dims + 2, W->dims + 2, 0, &r->g));
    if (st->kind == NCHWC_POINTWISE &&
        (r->g.s[0] != 1 || r->g.s[1] != 1 || r->g.pb[0] || r->g.pb[1] || r->g.pe[0] || r->g.pe[1]))
        return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED, "a blocked 1×1 layer has stride 1, no pads");
    AK_CHECK(ak__nn_parse_activation(ctx, &r->act));
    r->N = X->dims[0];
    r->P = (uint64_t)(r->g.out[0] * r->g.out[1]);
    r->Pin = (uint64_t)(r->g.in[0] * r->g.in[1]);
    uint64_t xf = (uint64_t)r->N * (uint64_t)st->C * r->Pin, yf = (uint64_t)r->N * (uint64_t)st->M * r->P;
    r->reorder_x = st->kind != NCHWC_DIRECT && !blocked(ctx, "x_blocked"); /* stems read it plain */
    r->reorder_z = ak__op_in(ctx, 3) && !blocked(ctx, "z_blocked");
    r->reorder_y = !blocked(ctx, "y_blocked");
    if (st->kind == NCHWC_DIRECT)
        r->rowbuf_floats = (size_t)(st->C * r->g.k[0] * direct_rowbuf_width(&r->g));
    *ws_floats = (r->reorder_x ? xf : 0) + (r->reorder_z ? yf : 0) + (r->reorder_y ? yf : 0) +
                 r->rowbuf_floats * (size_t)ak__nn_pool_threads(ctx);
    return AK_OK;
}

static ak_status nchwc_reshape(ak__op_ctx *ctx) {
    nchwc_run r;
    size_t ws;
    AK_CHECK(nchwc_plan(ctx, &r, &ws));
    int64_t dims[4] = {r.N, r.st->M, r.g.out[0], r.g.out[1]};
    AK_CHECK(ak__op_set_output(ctx, 0, AK_ELEM_F32, 4, dims));
    const ak__tensor *Z = ak__op_in(ctx, 3);
    if (Z && (Z->type != AK_ELEM_F32 || Z->rank != 4 || memcmp(Z->dims, dims, sizeof dims) != 0))
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "Z must be float32 shaped like Y");
    ctx->workspace_bytes = ws * sizeof(float);
    return AK_OK;
}

static ak_status nchwc_run_op(ak__op_ctx *ctx) {
    nchwc_run r;
    size_t ws;
    AK_CHECK(nchwc_plan(ctx, &r, &ws));
    ak__tensor *Y = ak__op_out(ctx, 0);
    if (!Y || Y->count == 0) return AK_OK;
    if (ws * sizeof(float) > ctx->workspace_bytes)
        return AK_OP_FAIL(ctx->node, AK_ERR_INTERNAL, "workspace of %zu bytes, %zu needed",
                          ctx->workspace_bytes, ws * sizeof(float));
    const nchwc_state *st = r.st;
    const ak__tensor *B = ak__op_in(ctx, 2), *Z = ak__op_in(ctx, 3);
    float *scratch = ctx->workspace;
    r.x = ctx->inputs[0]->data;
    if (r.reorder_x) {
        reorder(ctx->pool, r.x, scratch, r.N, st->C, r.Pin, 1);
        r.x = scratch;
        scratch += (uint64_t)r.N * (uint64_t)st->C * r.Pin;
    }
    r.z = Z ? Z->data : NULL;
    if (r.reorder_z) {
        reorder(ctx->pool, Z->data, scratch, r.N, st->M, r.P, 1);
        r.z = scratch;
        scratch += Y->count;
    }
    r.y = r.reorder_y ? scratch : Y->data;
    if (r.reorder_y) scratch += Y->count;
    r.rowbufs = scratch;
    r.bias = B ? B->data : NULL;
    int fusable = r.act.kind == AK_NN_ACT_NONE || r.act.kind == AK_NN_ACT_RELU ||
                  r.act.kind == AK_NN_ACT_CLIP;
    r.fin = (finish){r.bias, r.z, fusable ? r.act.kind : AK_NN_ACT_NONE, r.act.a, r.act.b};
    r.avx2 = ak__cpu_active_avx2() && !ak__nchwc_force_scalar;
    int threads = ak__nn_pool_threads(ctx);
    r.panels = (size_t)(st->M / 16 + st->M % 16 / BLK);
    if (st->kind == NCHWC_POINTWISE) {
        r.chunks = (r.P + PW_CHUNK - 1) / PW_CHUNK;
        ak__nn_parallel(ctx->pool, (size_t)r.N * r.chunks * r.panels, 1, pw_task, &r);
    } else {
        /* bands of rows: at least 4 tasks per thread over all blocks (depthwise) or panels */
        int direct = st->kind == NCHWC_DIRECT;
        size_t planes = (size_t)r.N * (direct ? r.panels : (size_t)(st->M / BLK));
        size_t want = 4 * (size_t)threads;
        size_t bands = planes >= want ? 1 : (want + planes - 1) / planes;
        if (bands > (size_t)r.g.out[0]) bands = (size_t)r.g.out[0];
        r.rows_per_task = (r.g.out[0] + (int64_t)bands - 1) / (int64_t)bands;
        r.row_tasks = (size_t)((r.g.out[0] + r.rows_per_task - 1) / r.rows_per_task);
        ak__nn_parallel(ctx->pool, planes * r.row_tasks, 1, direct ? direct_task : dw_task, &r);
    }
    if (r.reorder_y) reorder(ctx->pool, r.y, Y->data, r.N, st->M, r.P, 0);
    return AK_OK;
}

/* com.accelkit NchwcConv: Conv/FusedConv on blocked tensors (see the top of this file). */
const ak__op_def ak__nn_nchwc_conv = {"com.accelkit", "NchwcConv", 1, 0, nchwc_create,
                                      nchwc_destroy, nchwc_reshape, nchwc_run_op};
