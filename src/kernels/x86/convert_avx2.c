/* AVX2 + F16C bulk conversions f32 <-> f16 / bf16, bit-exact with core/half.h (NaN
 * payloads, Inf, signed zero, subnormals, overflow to Inf).
 *
 * f16 uses F16C (vcvtph2ps / vcvtps2ph with round to nearest even), which matches the
 * reference on every input. bf16 is integer arithmetic on the f32 bits: AVX512_BF16's
 * vcvtneps2bf16 would flush subnormals, and the reference keeps them. Main loops do 32
 * elements per iteration to keep enough loads in flight; the last < 8 (or < 16) elements
 * go through the scalar reference, which is the definition of the result anyway. */
#include <immintrin.h>

#include "core/half.h"
#include "kernels/dispatch.h"

#define AK_ALWAYS_INLINE static inline __attribute__((always_inline))

/* f32 -> bf16 bits in the low half of each 32-bit lane, round to nearest even; NaN
 * keeps its sign and top payload bits with the quiet bit set. (Same helper as in
 * vec_avx2.c: each ISA file is compiled on its own.) */
AK_ALWAYS_INLINE __m256i ak__bf16_round(__m256 f) {
    __m256i u = _mm256_castps_si256(f);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i rounded = _mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff)));
    __m256i quiet = _mm256_or_si256(u, _mm256_set1_epi32(0x00400000));
    __m256i is_nan = _mm256_castps_si256(_mm256_cmp_ps(f, f, _CMP_UNORD_Q));
    return _mm256_srli_epi32(_mm256_blendv_epi8(rounded, quiet, is_nan), 16);
}

/* 16 floats -> 16 bf16 in order: packus interleaves the 128-bit lanes of its two
 * inputs, the 64-bit permute puts them back. Values are < 2^16, so nothing saturates. */
AK_ALWAYS_INLINE void ak__store_bf16x16(uint16_t *dst, __m256 a, __m256 b) {
    __m256i packed = _mm256_packus_epi32(ak__bf16_round(a), ak__bf16_round(b));
    _mm256_storeu_si256((__m256i *)dst, _mm256_permute4x64_epi64(packed, 0xd8));
}

AK_ALWAYS_INLINE __m256 ak__load_bf16x8(const uint16_t *src) {
    __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)src));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
}

AK_ALWAYS_INLINE void ak__store_f16x8(uint16_t *dst, __m256 v) {
    _mm_storeu_si128((__m128i *)dst, _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}

AK_ALWAYS_INLINE __m256 ak__load_f16x8(const uint16_t *src) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)src));
}

static void ak_f32_to_f16__avx2(uint16_t *dst, const float *src, size_t n) {
    size_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (size_t j = 0; j < 32; j += 8) ak__store_f16x8(dst + i + j, _mm256_loadu_ps(src + i + j));
    for (; i + 8 <= n; i += 8) ak__store_f16x8(dst + i, _mm256_loadu_ps(src + i));
    for (; i < n; i++) dst[i] = ak__f32_to_f16_ref(src[i]);
}

static void ak_f16_to_f32__avx2(float *dst, const uint16_t *src, size_t n) {
    size_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (size_t j = 0; j < 32; j += 8) _mm256_storeu_ps(dst + i + j, ak__load_f16x8(src + i + j));
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, ak__load_f16x8(src + i));
    for (; i < n; i++) dst[i] = ak__f16_to_f32_ref(src[i]);
}

static void ak_f32_to_bf16__avx2(uint16_t *dst, const float *src, size_t n) {
    size_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (size_t j = 0; j < 32; j += 16)
            ak__store_bf16x16(dst + i + j, _mm256_loadu_ps(src + i + j),
                              _mm256_loadu_ps(src + i + j + 8));
    for (; i + 16 <= n; i += 16)
        ak__store_bf16x16(dst + i, _mm256_loadu_ps(src + i), _mm256_loadu_ps(src + i + 8));
    for (; i < n; i++) dst[i] = ak__f32_to_bf16_ref(src[i]);
}

static void ak_bf16_to_f32__avx2(float *dst, const uint16_t *src, size_t n) {
    size_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (size_t j = 0; j < 32; j += 8) _mm256_storeu_ps(dst + i + j, ak__load_bf16x8(src + i + j));
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, ak__load_bf16x8(src + i));
    for (; i < n; i++) dst[i] = ak__bf16_to_f32_ref(src[i]);
}

void ak__fill_convert_avx2(ak__kernels *k) {
    k->f32_to_f16 = ak_f32_to_f16__avx2;
    k->f16_to_f32 = ak_f16_to_f32__avx2;
    k->f32_to_bf16 = ak_f32_to_bf16__avx2;
    k->bf16_to_f32 = ak_bf16_to_f32__avx2;
}
