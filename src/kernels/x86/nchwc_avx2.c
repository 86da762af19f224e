/* AVX2 + FMA kernels of the NCHWc layout (kf_infer.h): the conv row in tiles of up to 6
 * outputs × 16 channels, the depthwise rows and the max-pool row. The 8 channels of a
 * blocked position are one vector: a tile broadcasts each input value against one or
 * two vectors of packed weights; a depthwise output is one FMA per tap against the tap's
 * 8 weights; a max-pool output one max per tap. */
#include <float.h>
#include <immintrin.h>

#include "kernels/dispatch.h"
#include "kernels/nchwc_geom.h"
#include "kernels/x86/nn_avx2.h"

#define BLK AK_KF_NCHWC_BLOCK
#define TILE_ROWS 6

/* ---- conv tiles ------------------------------------------------------------------------ */

/* Output r of the tile against the weight vectors w0 (and w1), into c<r>0 (c<r>1). */
#define TILE_FMA(r)                                                                         \
    if (N > r) {                                                                            \
        __m256 a_ = _mm256_broadcast_ss(p + r * sx);                                        \
        c##r##0 = _mm256_fmadd_ps(a_, w0, c##r##0);                                         \
        if (NB == 2) c##r##1 = _mm256_fmadd_ps(a_, w1, c##r##1);                            \
    }
#define TILE_STORE(r)                                                                       \
    if (N > r) {                                                                            \
        ak__nn_store_finished8(y, z, (size_t)(r) * BLK, act, lo, hi, c##r##0);             \
        if (NB == 2)                                                                        \
            ak__nn_store_finished8(y, z, plane + (size_t)(r) * BLK, act, lo, hi, c##r##1);  \
    }

/* The tile with N, NB and LANES constant where it is inlined (tile_fns below): the
 * accumulators are named variables, not an array (an array stays on the stack, a store
 * per FMA), and the unused ones fold away. */
__attribute__((always_inline)) static inline void
tile_avx2(const ak__kf_nchwc_tile *t, const ak__sgemm_tile_epi *f, const int N, const int NB,
          const int LANES) {
    __m256 b0 = t->bias ? _mm256_loadu_ps(t->bias) : _mm256_setzero_ps();
    __m256 b1 = NB == 2 && t->bias ? _mm256_loadu_ps(t->bias + BLK) : _mm256_setzero_ps();
    __m256 c00 = b0, c01 = b1, c10 = b0, c11 = b1, c20 = b0, c21 = b1;
    __m256 c30 = b0, c31 = b1, c40 = b0, c41 = b1, c50 = b0, c51 = b1;
    const float *w = t->w;
    const int64_t sx = t->sx, ws = t->w_stride;
    for (int64_t cb = 0; cb < t->blocks; cb++)
        for (int64_t ky = 0; ky < t->kh; ky++) {
            const float *row = t->x + cb * t->cb_stride + ky * t->ky_stride;
            for (int64_t kx = 0; kx < t->kw; kx++, row += t->dx)
#pragma GCC unroll 8
                for (int c = 0; c < LANES; c++, w += ws) {
                    const float *p = row + c;
                    __m256 w0 = _mm256_loadu_ps(w), w1 = NB == 2 ? _mm256_loadu_ps(w + BLK) : w0;
                    TILE_FMA(0)
                    TILE_FMA(1)
                    TILE_FMA(2)
                    TILE_FMA(3)
                    TILE_FMA(4)
                    TILE_FMA(5)
                }
        }
    /* the finish read once: stores through y could alias it */
    float *y = t->y;
    const float *z = t->z;
    const size_t plane = t->plane;
    const int act = f->act;
    __m256 lo, hi;
    ak__nn_finish_bounds(f, &lo, &hi);
    TILE_STORE(0)
    TILE_STORE(1)
    TILE_STORE(2)
    TILE_STORE(3)
    TILE_STORE(4)
    TILE_STORE(5)
}
#undef TILE_FMA
#undef TILE_STORE

typedef ak__nchwc_tile_fn *tile_fn;
#define TILE_FN(n, nb, l)                                                                   \
    static void tile_##n##_##nb##_##l(const ak__kf_nchwc_tile *t, const ak__sgemm_tile_epi *f) { \
        tile_avx2(t, f, n, nb, l);                                                          \
    }
#define TILE_FNS(nb, l)                                                                     \
    TILE_FN(1, nb, l) TILE_FN(2, nb, l) TILE_FN(3, nb, l) TILE_FN(4, nb, l) TILE_FN(5, nb, l) \
    TILE_FN(6, nb, l)
TILE_FNS(1, 1)
TILE_FNS(2, 1)
TILE_FNS(1, 8)
TILE_FNS(2, 8)
#define TILE_ROW(nb, l)                                                                     \
    {tile_1_##nb##_##l, tile_2_##nb##_##l, tile_3_##nb##_##l, tile_4_##nb##_##l,            \
     tile_5_##nb##_##l, tile_6_##nb##_##l}
/* [blocked X][nb − 1][n − 1] */
static const tile_fn tile_fns[2][2][TILE_ROWS] = {{TILE_ROW(1, 1), TILE_ROW(2, 1)},
                                                  {TILE_ROW(1, 8), TILE_ROW(2, 8)}};
#undef TILE_FN
#undef TILE_FNS
#undef TILE_ROW

/* Outputs [0, n) in tiles of at most 6 with sizes evened out (7 = 3 + 4: a lone
 * 1-output tile would run its FMA chains at a fraction of the rate, waiting on their
 * latency). */
void ak__nchwc_conv_part__avx2(const ak__kf_nchwc_tile *t, int nb, int64_t n,
                               const ak__sgemm_tile_epi *fin) {
    ak__nchwc_run_tiles(t, n, TILE_ROWS, tile_fns[t->lanes == BLK][nb - 1], fin);
}

/* Panels of 3 or 4 blocks run as parts of 2 (and 1). */
void ak_f32_nchwc_conv_row__avx2(const ak__kf_nchwc_tile *t, int nb, int64_t n,
                                 const ak__sgemm_tile_epi *fin) {
    ak__nchwc_conv_panel(t, nb, 2, n, fin, ak__nchwc_conv_part__avx2);
}

/* ---- depthwise -------------------------------------------------------------------------- */

/* Output columns whose whole window lies inside the row: [*lo, *hi). */
static void inner_cols(const ak__kf_win2d *g, int64_t *lo, int64_t *hi) {
    int64_t s = g->s[1], reach = (g->k[1] - 1) * g->d[1];
    *lo = (g->pb[1] + s - 1) / s;
    int64_t last = g->in[1] - 1 - reach + g->pb[1]; /* ox*s <= last */
    *hi = last < 0 ? 0 : last / s + 1;
    if (*hi > g->out[1]) *hi = g->out[1];
    if (*lo > *hi) *lo = *hi;
}

/* One border output with its window clipped to the plane, as a vector of 8 channels; the
 * row's taps [ky0, ky1) are the caller's (on 7×7 planes two of seven columns come here). */
static __m256 dw_output(const ak__kf_win2d *g, const ak__kf_nchwc_dw *d, int64_t oy, int64_t ox,
                        int64_t ky0, int64_t ky1, __m256 acc) {
    int64_t kx0, kx1, x0 = ox * g->s[1] - g->pb[1];
    ak__win2d_axis_taps(g, 1, ox, &kx0, &kx1);
    for (int64_t ky = ky0; ky < ky1; ky++) {
        int64_t iy = oy * g->s[0] - g->pb[0] + ky * g->d[0];
        const float *wr = d->w + ky * g->k[1] * BLK;
        for (int64_t kx = kx0; kx < kx1; kx++) /* index first: x0 may be negative */
            acc = _mm256_fmadd_ps(_mm256_loadu_ps(d->x + (iy * g->in[1] + x0 + kx * g->d[1]) * BLK),
                                  _mm256_loadu_ps(wr + kx * BLK), acc);
    }
    return acc;
}

/* n outputs (8, 4 or 1: a constant once inlined) of row oy from column ox, whose windows
 * lie inside the row: n independent FMA chains without bounds; 8 hide the FMA latency,
 * 4 only half of it. The row's taps are [ky0, ky1). */
static inline __attribute__((always_inline)) void dw_cols(const ak__kf_win2d *g,
                                                          const ak__kf_nchwc_dw *d, int64_t oy,
                                                          int64_t ox, int64_t ky0, int64_t ky1,
                                                          __m256 bias, int n, __m256 *a) {
    int64_t sx = g->s[1] * BLK, dx = g->d[1] * BLK, kw = g->k[1];
    for (int v = 0; v < n; v++) a[v] = bias;
    for (int64_t ky = ky0; ky < ky1; ky++) {
        int64_t iy = oy * g->s[0] - g->pb[0] + ky * g->d[0];
        const float *xr = d->x + (iy * g->in[1] + ox * g->s[1] - g->pb[1]) * BLK;
        const float *wr = d->w + ky * kw * BLK;
        for (int64_t kx = 0; kx < kw; kx++, xr += dx) {
            __m256 wv = _mm256_loadu_ps(wr + kx * BLK);
#pragma GCC unroll 8
            for (int v = 0; v < n; v++) a[v] = _mm256_fmadd_ps(_mm256_loadu_ps(xr + v * sx), wv, a[v]);
        }
    }
}

/* Output row oy: columns [in_lo, in_hi) 8, then 4, then 1 at a time; the border columns,
 * whose windows the plane clips, one at a time. */
static void dw_row(const ak__kf_win2d *g, const ak__kf_nchwc_dw *d, int64_t oy,
                   const ak__sgemm_tile_epi *f, int64_t in_lo, int64_t in_hi) {
    int64_t ky0, ky1;
    ak__win2d_axis_taps(g, 0, oy, &ky0, &ky1);
    __m256 lo, hi, a[8];
    ak__nn_finish_bounds(f, &lo, &hi);
    __m256 bias = d->bias ? _mm256_loadu_ps(d->bias) : _mm256_setzero_ps();
    __m256i all = ak__nn_first_lanes(BLK);
    float *yrow = d->y + oy * g->out[1] * BLK;
    const float *zrow = d->z ? d->z + oy * g->out[1] * BLK : NULL;
#define DW_STORE(ox, v)                                                                       \
    _mm256_storeu_ps(yrow + (ox) * BLK,                                                       \
                     ak__nn_finish8(v, zrow ? zrow + (ox) * BLK : NULL, all, 1, f->act, lo, hi))
    for (int64_t ox = 0; ox < in_lo; ox++) DW_STORE(ox, dw_output(g, d, oy, ox, ky0, ky1, bias));
    int64_t ox = in_lo;
    for (; ox + 8 <= in_hi; ox += 8) {
        dw_cols(g, d, oy, ox, ky0, ky1, bias, 8, a);
#pragma GCC unroll 8
        for (int v = 0; v < 8; v++) DW_STORE(ox + v, a[v]);
    }
    for (; ox + 4 <= in_hi; ox += 4) {
        dw_cols(g, d, oy, ox, ky0, ky1, bias, 4, a);
#pragma GCC unroll 4
        for (int v = 0; v < 4; v++) DW_STORE(ox + v, a[v]);
    }
    for (; ox < in_hi; ox++) {
        dw_cols(g, d, oy, ox, ky0, ky1, bias, 1, a);
        DW_STORE(ox, a[0]);
    }
    for (; ox < g->out[1]; ox++) DW_STORE(ox, dw_output(g, d, oy, ox, ky0, ky1, bias));
#undef DW_STORE
}

void ak_f32_nchwc_dw_rows__avx2(const ak__kf_win2d *g, const ak__kf_nchwc_dw *d, int64_t oy0,
                                int64_t oy1, const ak__sgemm_tile_epi *fin) {
    int64_t in_lo, in_hi;
    inner_cols(g, &in_lo, &in_hi);
    for (int64_t oy = oy0; oy < oy1; oy++) dw_row(g, d, oy, fin, in_lo, in_hi);
}

/* ---- max pool ---------------------------------------------------------------------------- */

/* Output row oy of one block with the 8 lanes in one vector, transposed into the 8 planes
 * of y (plane stride P) 8 outputs at a time. */
void ak_f32_nchwc_maxpool_row__avx2(const ak__kf_win2d *g, const float *xb, int64_t oy, float *y,
                                    uint64_t P, int y_blocked) {
    int64_t H = g->in[0], W = g->in[1], n = g->out[1], y0 = oy * g->s[0] - g->pb[0];
    int64_t reach_y = (g->k[0] - 1) * g->d[0], reach_x = (g->k[1] - 1) * g->d[1];
    int rows_inside = y0 >= 0 && y0 + reach_y < H;
    __m256 row[8];
    for (int64_t ox = 0; ox < n; ox += 8) {
        int m = n - ox < 8 ? (int)(n - ox) : 8;
        for (int j = 0; j < m; j++) {
            int64_t x0 = (ox + j) * g->s[1] - g->pb[1];
            __m256 acc = _mm256_set1_ps(-FLT_MAX);
            if (rows_inside && x0 >= 0 && x0 + reach_x < W) { /* the window inside: no tests */
                for (int64_t ky = 0; ky < g->k[0]; ky++) {
                    const float *p = xb + ((y0 + ky * g->d[0]) * W + x0) * BLK;
                    for (int64_t kx = 0; kx < g->k[1]; kx++)
                        acc = _mm256_max_ps(_mm256_loadu_ps(p + kx * g->d[1] * BLK), acc);
                }
                row[j] = acc;
                continue;
            }
            for (int64_t ky = 0; ky < g->k[0]; ky++) {
                int64_t iy = y0 + ky * g->d[0];
                if (iy < 0 || iy >= H) continue;
                for (int64_t kx = 0; kx < g->k[1]; kx++) {
                    int64_t ix = x0 + kx * g->d[1];
                    if (ix >= 0 && ix < W)
                        acc = _mm256_max_ps(_mm256_loadu_ps(xb + (iy * W + ix) * BLK), acc);
                }
            }
            row[j] = acc;
        }
        if (y_blocked) {
            for (int j = 0; j < m; j++) _mm256_storeu_ps(y + (ox + j) * BLK, row[j]);
        } else if (m == 8) {
            ak__nn_transpose8x8(row);
            for (int l = 0; l < BLK; l++) _mm256_storeu_ps(y + (uint64_t)l * P + (uint64_t)ox, row[l]);
        } else {
            float t[8][BLK];
            for (int j = 0; j < m; j++) _mm256_storeu_ps(t[j], row[j]);
            for (int l = 0; l < BLK; l++)
                for (int j = 0; j < m; j++) y[(uint64_t)l * P + (uint64_t)(ox + j)] = t[j][l];
        }
    }
}

/* ---- the GEMM convolutions' tile finish -------------------------------------------------- */

/* With a ReLU, a Clip or no activation in registers: on a 6×16 tile of a 1×1 convolution
 * with 16 input channels it costs as much as the tile's FMAs otherwise. Adds
 * (y + bias) + z (the reference: y + (bias + z)). */
void ak_f32_tile_finish__avx2(float *y, uint64_t ld, size_t m, size_t n,
                              const ak__sgemm_tile_epi *fin) {
    int kind = fin->act;
    __m256 lo, hi;
    ak__nn_finish_bounds(fin, &lo, &hi);
    __m256i all = ak__nn_first_lanes(8);
    for (size_t r = 0; r < m; r++) {
        float *yr = y + r * ld;
        const float *zr = fin->z ? fin->z + r * ld : NULL;
        float bs = fin->bias ? fin->bias[r] : 0.0f;
        __m256 bv = _mm256_set1_ps(bs);
        size_t j = 0;
        for (; j + 8 <= n; j += 8) {
            __m256 v = _mm256_add_ps(_mm256_loadu_ps(yr + j), bv);
            _mm256_storeu_ps(yr + j, ak__nn_finish8(v, zr ? zr + j : NULL, all, 1, kind, lo, hi));
        }
        for (; j < n; j++) {
            float v = yr[j] + bs + (zr ? zr[j] : 0.0f);
            if (kind == AK_SGEMM_ACT_MAX) v = v > fin->lo ? v : fin->lo;
            else if (kind == AK_SGEMM_ACT_CLAMP) v = v < fin->lo ? fin->lo : v > fin->hi ? fin->hi : v;
            yr[j] = v;
        }
    }
}
