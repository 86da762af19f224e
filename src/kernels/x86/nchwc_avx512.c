/* AVX-512 NCHWc conv row (kf_infer.h): a zmm holds both output blocks of a two-block
 * panel ([w0 | w1] as packed), so tiles grow to 12 outputs, one weight load and one FMA
 * per output and input value. Zen 4 and Intel cores run a zmm FMA at the FLOP rate of
 * two ymm ones, so what this saves is the loads (13 per 12 zmm FMAs, 8 per 12 ymm FMAs
 * with AVX2) and instructions. One-block panels run the AVX2 tiles. */
#include <immintrin.h>

#include "kernels/dispatch.h"
#include "kernels/nchwc_geom.h"
#include "kernels/x86/nn_avx2.h"

#define BLK AK_KF_NCHWC_BLOCK
#define TILE_ROWS 12

static inline __m256 upper_half(__m512 v) {
    return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
}

#define TILE512_FMA(r)                                                                      \
    if (N > r) c##r = _mm512_fmadd_ps(_mm512_set1_ps(p[r * sx]), wv, c##r);
#define TILE512_STORE(r)                                                                    \
    if (N > r) {                                                                            \
        ak__nn_store_finished8(y, z, (size_t)(r) * BLK, act, lo, hi,                       \
                               _mm512_castps512_ps256(c##r));                               \
        ak__nn_store_finished8(y, z, plane + (size_t)(r) * BLK, act, lo, hi, upper_half(c##r)); \
    }

__attribute__((always_inline)) static inline void
tile_avx512(const ak__kf_nchwc_tile *t, const ak__sgemm_tile_epi *f, const int N, const int LANES) {
    __m512 b = t->bias ? _mm512_loadu_ps(t->bias) : _mm512_setzero_ps();
    __m512 c0 = b, c1 = b, c2 = b, c3 = b, c4 = b, c5 = b, c6 = b, c7 = b, c8 = b, c9 = b,
           c10 = b, c11 = b;
    const float *w = t->w;
    const int64_t sx = t->sx, ws = t->w_stride;
    for (int64_t cb = 0; cb < t->blocks; cb++)
        for (int64_t ky = 0; ky < t->kh; ky++) {
            const float *row = t->x + cb * t->cb_stride + ky * t->ky_stride;
            for (int64_t kx = 0; kx < t->kw; kx++, row += t->dx)
#pragma GCC unroll 8
                for (int c = 0; c < LANES; c++, w += ws) {
                    const float *p = row + c;
                    __m512 wv = _mm512_loadu_ps(w);
                    TILE512_FMA(0) TILE512_FMA(1) TILE512_FMA(2) TILE512_FMA(3)
                    TILE512_FMA(4) TILE512_FMA(5) TILE512_FMA(6) TILE512_FMA(7)
                    TILE512_FMA(8) TILE512_FMA(9) TILE512_FMA(10) TILE512_FMA(11)
                }
        }
    /* the finish read once: stores through y could alias it */
    float *y = t->y;
    const float *z = t->z;
    const size_t plane = t->plane;
    const int act = f->act;
    __m256 lo, hi;
    ak__nn_finish_bounds(f, &lo, &hi);
    TILE512_STORE(0) TILE512_STORE(1) TILE512_STORE(2) TILE512_STORE(3)
    TILE512_STORE(4) TILE512_STORE(5) TILE512_STORE(6) TILE512_STORE(7)
    TILE512_STORE(8) TILE512_STORE(9) TILE512_STORE(10) TILE512_STORE(11)
}
#undef TILE512_FMA
#undef TILE512_STORE

typedef ak__nchwc_tile_fn *tile_fn;
#define TILE512_FN(n, l)                                                                    \
    static void tile512_##n##_##l(const ak__kf_nchwc_tile *t, const ak__sgemm_tile_epi *f) { \
        tile_avx512(t, f, n, l);                                                            \
    }
#define TILE512_FNS(l)                                                                      \
    TILE512_FN(1, l) TILE512_FN(2, l) TILE512_FN(3, l) TILE512_FN(4, l) TILE512_FN(5, l)      \
    TILE512_FN(6, l) TILE512_FN(7, l) TILE512_FN(8, l) TILE512_FN(9, l) TILE512_FN(10, l)     \
    TILE512_FN(11, l) TILE512_FN(12, l)
TILE512_FNS(1)
TILE512_FNS(8)
#define TILE512_ROW(l)                                                                      \
    {tile512_1_##l, tile512_2_##l, tile512_3_##l, tile512_4_##l,  tile512_5_##l,             \
     tile512_6_##l, tile512_7_##l, tile512_8_##l, tile512_9_##l, tile512_10_##l,             \
     tile512_11_##l, tile512_12_##l}
/* [blocked X][n − 1] */
static const tile_fn tile512_fns[2][TILE_ROWS] = {TILE512_ROW(1), TILE512_ROW(8)};
#undef TILE512_FN
#undef TILE512_FNS
#undef TILE512_ROW

/* Outputs [0, n) in tiles of at most 12, sizes evened out. */
void ak__nchwc_conv_part__avx512(const ak__kf_nchwc_tile *t, int nb, int64_t n,
                                 const ak__sgemm_tile_epi *fin) {
    if (nb != 2) {
        ak__nchwc_conv_part__avx2(t, nb, n, fin);
        return;
    }
    ak__nchwc_run_tiles(t, n, TILE_ROWS, tile512_fns[t->lanes == BLK], fin);
}

/* Panels of 3 or 4 blocks run as parts of 2 (and 1). */
void ak_f32_nchwc_conv_row__avx512(const ak__kf_nchwc_tile *t, int nb, int64_t n,
                                   const ak__sgemm_tile_epi *fin) {
    ak__nchwc_conv_panel(t, nb, 2, n, fin, ak__nchwc_conv_part__avx512);
}
