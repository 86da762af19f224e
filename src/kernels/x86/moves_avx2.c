/* AVX2 data-movement kernels of the ONNX engine (kf_infer.h): a band of a 32-bit
 * transpose in cache-sized tiles of 8×8 register blocks, and the stride-2 gather of 16
 * floats from 4 vectors. */
#include <immintrin.h>

#include "kernels/dispatch.h"

enum { TILE = 32 }; /* rows of dim a per pass: the tile of both sides stays in L1 */

/* d[j * ds + i] = s[i * ss + j] for an 8x8 block of 32-bit elements, in registers
 * (written out: loops over arrays of vectors may spill). */
static inline void tr8x8_32(const float *s, int64_t ss, float *d, int64_t ds) {
    __m256 r0 = _mm256_loadu_ps(s), r1 = _mm256_loadu_ps(s + ss);
    __m256 r2 = _mm256_loadu_ps(s + 2 * ss), r3 = _mm256_loadu_ps(s + 3 * ss);
    __m256 r4 = _mm256_loadu_ps(s + 4 * ss), r5 = _mm256_loadu_ps(s + 5 * ss);
    __m256 r6 = _mm256_loadu_ps(s + 6 * ss), r7 = _mm256_loadu_ps(s + 7 * ss);
    __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
    __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
    __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
    __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    _mm256_storeu_ps(d, _mm256_permute2f128_ps(u0, u4, 0x20));
    _mm256_storeu_ps(d + ds, _mm256_permute2f128_ps(u1, u5, 0x20));
    _mm256_storeu_ps(d + 2 * ds, _mm256_permute2f128_ps(u2, u6, 0x20));
    _mm256_storeu_ps(d + 3 * ds, _mm256_permute2f128_ps(u3, u7, 0x20));
    _mm256_storeu_ps(d + 4 * ds, _mm256_permute2f128_ps(u0, u4, 0x31));
    _mm256_storeu_ps(d + 5 * ds, _mm256_permute2f128_ps(u1, u5, 0x31));
    _mm256_storeu_ps(d + 6 * ds, _mm256_permute2f128_ps(u2, u6, 0x31));
    _mm256_storeu_ps(d + 7 * ds, _mm256_permute2f128_ps(u3, u7, 0x31));
}

void ak_f32_transpose32_band__avx2(uint32_t *dst, const uint32_t *src, int64_t na, int64_t ib0,
                                   int64_t ib1, int64_t sa, int64_t dsb) {
    float *d = (float *)(void *)dst;
    const float *s = (const float *)(const void *)src;
    for (int64_t ia0 = 0; ia0 < na; ia0 += TILE) {
        int64_t ia1 = ia0 + TILE < na ? ia0 + TILE : na;
        int64_t ia8 = ia0 + (ia1 - ia0) / 8 * 8, ib8 = ib0 + (ib1 - ib0) / 8 * 8;
        for (int64_t ib = ib0; ib < ib8; ib += 8)
            for (int64_t ia = ia0; ia < ia8; ia += 8)
                tr8x8_32(s + ia * sa + ib, sa, d + ib * dsb + ia, dsb);
        for (int64_t ib = ib0; ib < ib1; ib++) /* edges: columns past ia8, rows past ib8 */
            for (int64_t ia = ib < ib8 ? ia8 : ia0; ia < ia1; ia++)
                dst[ib * dsb + ia] = src[ib + ia * sa];
    }
}

/* The even lanes of 4 vectors. */
void ak_f32_gather_even16__avx2(const float *src, float *dst) {
    for (int h = 0; h < 2; h++, src += 16, dst += 8) {
        __m256 lo = _mm256_loadu_ps(src), hi = _mm256_loadu_ps(src + 8);
        __m256 ev = _mm256_shuffle_ps(lo, hi, 0x88); /* lo0 lo2 hi0 hi2 | lo4 lo6 hi4 hi6 */
        _mm256_storeu_ps(dst, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(ev), 0xD8)));
    }
}
