/* Inline helpers shared by the AVX2 kernel files (include only from *_avx2.c, which are
 * compiled with -mavx2 -mfma -mf16c). */
#ifndef AK_KERNELS_X86_AVX2_COMMON_H
#define AK_KERNELS_X86_AVX2_COMMON_H

#include <immintrin.h>

#define AK_ALWAYS_INLINE static inline __attribute__((always_inline))

/* f32 -> bf16 rounded to nearest even, left in the high 16 bits of each 32-bit lane (the
 * low bits are garbage). u + 0x7fff + lsb is computed as u + 0x8000 - (lsb == 0) with a
 * compare instead of a shift: shifts and shuffles share two ports and were the limit.
 * NaN keeps its sign and top payload bits with the quiet bit set (as core/half.h does). */
AK_ALWAYS_INLINE __m256i ak__bf16_round_hi(__m256 f) {
    __m256i u = _mm256_castps_si256(f);
    __m256i lsb = _mm256_and_si256(u, _mm256_set1_epi32(0x10000));
    __m256i even = _mm256_cmpeq_epi32(lsb, _mm256_setzero_si256()); /* -1 when lsb is 0 */
    __m256i rounded = _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x8000)), even);
    __m256i quiet = _mm256_or_si256(u, _mm256_set1_epi32(0x00400000));
    __m256i is_nan = _mm256_castps_si256(_mm256_cmp_ps(f, f, _CMP_UNORD_Q));
    return _mm256_blendv_epi8(rounded, quiet, is_nan);
}

#endif /* AK_KERNELS_X86_AVX2_COMMON_H */
