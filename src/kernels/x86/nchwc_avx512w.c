/* AVX-512 NCHWc conv row for cores that run zmm FMAs at full width (table avx512w: Zen 5,
 * Intel): panels of 4 output blocks, two zmm of weights ([w0 | w1], [w2 | w3]) per input
 * value, so each broadcast input value feeds two FMAs. nchwc_avx512.c's 2-block tiles
 * pay one broadcast (a load) per FMA, which on these cores holds two FMAs per cycle
 * back; here tiles of up to 12 outputs hold 24 accumulators. A last panel of 3 blocks (24
 * channels, MobileNet's) uses the same tiles with the fourth block masked off (on these
 * cores a zmm FMA costs what a ymm one does); 1 or 2 take the avx512 tiles. */
#include <immintrin.h>

#include "kernels/dispatch.h"
#include "kernels/nchwc_geom.h"
#include "kernels/x86/nn_avx2.h"

#define BLK AK_KF_NCHWC_BLOCK
#define TILE_ROWS 12

static inline __m256 upper_half(__m512 v) {
    return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
}

#define TILE4_FMA(r)                                                                        \
    if (N > r) {                                                                            \
        __m512 a_ = _mm512_set1_ps(p[r * sx]);                                              \
        c##r##a = _mm512_fmadd_ps(a_, w01, c##r##a);                                        \
        c##r##b = _mm512_fmadd_ps(a_, w23, c##r##b);                                        \
    }
#define TILE4_STORE(r)                                                                      \
    if (N > r) {                                                                            \
        size_t o_ = (size_t)(r) * BLK;                                                      \
        ak__nn_store_finished8(y, z, o_, act, lo, hi, _mm512_castps512_ps256(c##r##a));    \
        ak__nn_store_finished8(y, z, plane + o_, act, lo, hi, upper_half(c##r##a));        \
        ak__nn_store_finished8(y, z, 2 * plane + o_, act, lo, hi,                          \
                               _mm512_castps512_ps256(c##r##b));                           \
        if (NB == 4)                                                                        \
            ak__nn_store_finished8(y, z, 3 * plane + o_, act, lo, hi, upper_half(c##r##b)); \
    }

/* Masks of the second zmm of weights: 4 blocks fill it, 3 only its lower half (a masked
 * load reads nothing past the third block, the upper lanes stay 0). */
#define W23_MASK(NB) ((__mmask16)((NB) == 4 ? 0xffff : 0x00ff))

/* N outputs × NB (3 or 4) blocks, N, LANES and NB constant where inlined (named
 * accumulators, as the other tiles: an array would stay on the stack). */
__attribute__((always_inline)) static inline void
tile4(const ak__kf_nchwc_tile *t, const ak__sgemm_tile_epi *f, const int N, const int LANES,
      const int NB) {
    __m512 ba = t->bias ? _mm512_loadu_ps(t->bias) : _mm512_setzero_ps();
    __m512 bb = t->bias ? _mm512_maskz_loadu_ps(W23_MASK(NB), t->bias + 2 * BLK) : _mm512_setzero_ps();
    __m512 c0a = ba, c1a = ba, c2a = ba, c3a = ba, c4a = ba, c5a = ba, c6a = ba, c7a = ba,
           c8a = ba, c9a = ba, c10a = ba, c11a = ba;
    __m512 c0b = bb, c1b = bb, c2b = bb, c3b = bb, c4b = bb, c5b = bb, c6b = bb, c7b = bb,
           c8b = bb, c9b = bb, c10b = bb, c11b = bb;
    const float *w = t->w;
    const int64_t sx = t->sx, ws = t->w_stride;
    for (int64_t cb = 0; cb < t->blocks; cb++)
        for (int64_t ky = 0; ky < t->kh; ky++) {
            const float *row = t->x + cb * t->cb_stride + ky * t->ky_stride;
            for (int64_t kx = 0; kx < t->kw; kx++, row += t->dx)
#pragma GCC unroll 8
                for (int c = 0; c < LANES; c++, w += ws) {
                    const float *p = row + c;
                    __m512 w01 = _mm512_loadu_ps(w);
                    __m512 w23 = _mm512_maskz_loadu_ps(W23_MASK(NB), w + 2 * BLK);
                    TILE4_FMA(0) TILE4_FMA(1) TILE4_FMA(2) TILE4_FMA(3)
                    TILE4_FMA(4) TILE4_FMA(5) TILE4_FMA(6) TILE4_FMA(7)
                    TILE4_FMA(8) TILE4_FMA(9) TILE4_FMA(10) TILE4_FMA(11)
                }
        }
    /* the finish read once: stores through y could alias it */
    float *y = t->y;
    const float *z = t->z;
    const size_t plane = t->plane;
    const int act = f->act;
    __m256 lo, hi;
    ak__nn_finish_bounds(f, &lo, &hi);
    TILE4_STORE(0) TILE4_STORE(1) TILE4_STORE(2) TILE4_STORE(3)
    TILE4_STORE(4) TILE4_STORE(5) TILE4_STORE(6) TILE4_STORE(7)
    TILE4_STORE(8) TILE4_STORE(9) TILE4_STORE(10) TILE4_STORE(11)
}
#undef TILE4_FMA
#undef TILE4_STORE
#undef W23_MASK

typedef ak__nchwc_tile_fn *tile_fn;
#define TILE4_FN(n, l, nb)                                                                  \
    static void tile##nb##_##n##_##l(const ak__kf_nchwc_tile *t, const ak__sgemm_tile_epi *f) { \
        tile4(t, f, n, l, nb);                                                              \
    }
#define TILE4_FNS(l, nb)                                                                    \
    TILE4_FN(1, l, nb) TILE4_FN(2, l, nb) TILE4_FN(3, l, nb) TILE4_FN(4, l, nb)             \
    TILE4_FN(5, l, nb) TILE4_FN(6, l, nb) TILE4_FN(7, l, nb) TILE4_FN(8, l, nb)             \
    TILE4_FN(9, l, nb) TILE4_FN(10, l, nb) TILE4_FN(11, l, nb) TILE4_FN(12, l, nb)
TILE4_FNS(1, 3)
TILE4_FNS(8, 3)
TILE4_FNS(1, 4)
TILE4_FNS(8, 4)
#define TILE4_ROW(l, nb)                                                                    \
    {tile##nb##_1_##l, tile##nb##_2_##l,  tile##nb##_3_##l,  tile##nb##_4_##l,               \
     tile##nb##_5_##l, tile##nb##_6_##l,  tile##nb##_7_##l,  tile##nb##_8_##l,               \
     tile##nb##_9_##l, tile##nb##_10_##l, tile##nb##_11_##l, tile##nb##_12_##l}
/* [nb − 3][blocked X][n − 1] */
static const tile_fn tile4_fns[2][2][TILE_ROWS] = {{TILE4_ROW(1, 3), TILE4_ROW(8, 3)},
                                                   {TILE4_ROW(1, 4), TILE4_ROW(8, 4)}};
#undef TILE4_FN
#undef TILE4_FNS
#undef TILE4_ROW

/* Outputs [0, n) of 3 or 4 blocks in tiles of at most 12, sizes evened out; 1 or 2 (the
 * last panel of a layer) through the avx512 tiles. */
static void conv_part(const ak__kf_nchwc_tile *t, int nb, int64_t n, const ak__sgemm_tile_epi *fin) {
    if (nb < 3) {
        ak__nchwc_conv_part__avx512(t, nb, n, fin);
        return;
    }
    ak__nchwc_run_tiles(t, n, TILE_ROWS, tile4_fns[nb - 3][t->lanes == BLK], fin);
}

void ak_f32_nchwc_conv_row__avx512w(const ak__kf_nchwc_tile *t, int nb, int64_t n,
                                    const ak__sgemm_tile_epi *fin) {
    ak__nchwc_conv_panel(t, nb, 4, n, fin, conv_part);
}
