/* AVX2 pieces shared by the ONNX engine's convolution and pooling kernels (nchwc_avx2.c,
 * nchwc_avx512.c, dwconv_avx2.c): lane masks, the Z + ReLU/Clip finish of a vector of
 * outputs and an 8×8 transpose. Include only from files compiled with -mavx2 -mfma. */
#ifndef AK_KERNELS_X86_NN_AVX2_H
#define AK_KERNELS_X86_NN_AVX2_H

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/dispatch.h"

/* The conv row over a part of a panel (kernels/nchwc_geom.h: ak__nchwc_part_fn): nb ≤ 2
 * blocks (AVX2: nchwc_avx2.c; AVX-512: nchwc_avx512.c), rows t->w_stride apart. */
void ak__nchwc_conv_part__avx2(const ak__kf_nchwc_tile *t, int nb, int64_t n,
                               const ak__sgemm_tile_epi *fin);
void ak__nchwc_conv_part__avx512(const ak__kf_nchwc_tile *t, int nb, int64_t n,
                                 const ak__sgemm_tile_epi *fin);

/* The first n (0..8) lanes set. */
static inline __m256i ak__nn_first_lanes(int64_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* + Z (z NULL: none; full 0: only the lanes of mask), then the finish's activation in
 * registers (AK_SGEMM_ACT_MAX: max(·, lo), NaN → lo; _CLAMP: min(hi, max(lo, ·)), NaN
 * kept), as the scalar references compute them. */
static inline __m256 ak__nn_finish8(__m256 a, const float *z, __m256i mask, int full, int act,
                                    __m256 lo, __m256 hi) {
    if (z) a = _mm256_add_ps(a, full ? _mm256_loadu_ps(z) : _mm256_maskload_ps(z, mask));
    if (act == AK_SGEMM_ACT_MAX) a = _mm256_max_ps(a, lo);
    else if (act == AK_SGEMM_ACT_CLAMP) a = _mm256_min_ps(hi, _mm256_max_ps(lo, a));
    return a;
}

/* y[at..at+8) = v finished (z[at..at+8) added when z is there, then the activation): one
 * whole block of 8 channels. */
static inline void ak__nn_store_finished8(float *y, const float *z, size_t at, int act,
                                          __m256 lo, __m256 hi, __m256 v) {
    _mm256_storeu_ps(y + at, ak__nn_finish8(v, z ? z + at : NULL, _mm256_setzero_si256(), 1,
                                            act, lo, hi));
}

/* r[i][j] -> r[j][i] for an 8×8 block of floats. Its loops (and those around a
 * call) are unrolled by pragma: left as loops they would run over arrays on the stack. */
static inline void ak__nn_transpose8x8(__m256 r[8]) {
    __m256 t[8], u[8];
#pragma GCC unroll 4
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
#pragma GCC unroll 2
    for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
        u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
        u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
        u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) {
        r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
        r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
    }
}

/* The finish's bounds as vectors: lo (0 for ReLU, Clip's min) and hi. */
static inline void ak__nn_finish_bounds(const ak__sgemm_tile_epi *f, __m256 *lo, __m256 *hi) {
    *lo = _mm256_set1_ps(f->lo);
    *hi = _mm256_set1_ps(f->hi);
}

#endif /* AK_KERNELS_X86_NN_AVX2_H */
