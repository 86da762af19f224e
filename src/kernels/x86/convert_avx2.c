/* AVX2 + F16C bulk conversions f32 <-> f16 / bf16, bit-exact with core/half.h (NaN
 * payloads, Inf, signed zero, subnormals, overflow to Inf).
 *
 * f16 uses F16C (vcvtph2ps / vcvtps2ph with round to nearest even), which matches the
 * reference on every input. bf16 is integer arithmetic on the f32 bits: AVX512_BF16's
 * vcvtneps2bf16 would flush subnormals, and the reference keeps them. Main loops do 32
 * elements per iteration to keep enough loads in flight; a head (up to the output's
 * 32-byte alignment) and a tail of < 16 elements go through the scalar reference, which
 * is the definition of the result anyway.
 *
 * Large conversions write their output with non-temporal stores: it saves the read for
 * ownership of every destination line (f16 -> f32 over 16 MiB of input went from about
 * 9.5 to 11.7 GB/s of input on a Zen 4 with 32 MiB L3). */
#include <immintrin.h>
#include <stdint.h>

#include "core/half.h"
#include "kernels/dispatch.h"
#include "kernels/x86/avx2_common.h"


typedef enum { AK_C_TO_F16, AK_C_FROM_F16, AK_C_TO_BF16, AK_C_FROM_BF16 } ak__conv;

/* A 32-byte store, streaming (32-byte aligned p) or not. */
AK_ALWAYS_INLINE void ak__store32(void *p, __m256i v, int stream) {
    if (stream)
        _mm256_stream_si256((__m256i *)p, v);
    else
        _mm256_storeu_si256((__m256i *)p, v);
}

AK_ALWAYS_INLINE __m128i ak__load128(const uint16_t *p) {
    return _mm_loadu_si128((const __m128i *)p);
}

/* bf16 -> f32 is a 16-bit shift: the bf16 bits become the top half of the f32. */
AK_ALWAYS_INLINE __m256i ak__widen_bf16(__m128i h) {
    return _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16);
}

/* Converts the 16 elements at index i. */
AK_ALWAYS_INLINE void ak__conv16(ak__conv c, void *dst, const void *src, size_t i,
                                 int stream) {
    const float *fs = (const float *)src + i;
    const uint16_t *hs = (const uint16_t *)src + i;
    float *fd = (float *)dst + i;
    uint16_t *hd = (uint16_t *)dst + i;
    switch (c) {
    case AK_C_TO_F16: {
        __m128i lo = _mm256_cvtps_ph(_mm256_loadu_ps(fs), _MM_FROUND_TO_NEAREST_INT);
        __m128i hi = _mm256_cvtps_ph(_mm256_loadu_ps(fs + 8), _MM_FROUND_TO_NEAREST_INT);
        ak__store32(hd, _mm256_set_m128i(hi, lo), stream);
        break;
    }
    case AK_C_FROM_F16:
        ak__store32(fd, _mm256_castps_si256(_mm256_cvtph_ps(ak__load128(hs))), stream);
        ak__store32(fd + 8, _mm256_castps_si256(_mm256_cvtph_ps(ak__load128(hs + 8))), stream);
        break;
    case AK_C_TO_BF16: { /* packus interleaves 128-bit lanes; the permute restores order */
        __m256i lo = _mm256_srli_epi32(ak__bf16_round_hi(_mm256_loadu_ps(fs)), 16);
        __m256i hi = _mm256_srli_epi32(ak__bf16_round_hi(_mm256_loadu_ps(fs + 8)), 16);
        __m256i packed = _mm256_packus_epi32(lo, hi); /* < 2^16: nothing saturates */
        ak__store32(hd, _mm256_permute4x64_epi64(packed, 0xd8), stream);
        break;
    }
    case AK_C_FROM_BF16:
        ak__store32(fd, ak__widen_bf16(ak__load128(hs)), stream);
        ak__store32(fd + 8, ak__widen_bf16(ak__load128(hs + 8)), stream);
        break;
    }
}

/* Elements [begin, end) through the scalar reference. */
AK_ALWAYS_INLINE void ak__conv_scalar(ak__conv c, void *dst, const void *src, size_t begin,
                                      size_t end) {
    const float *fs = (const float *)src;
    const uint16_t *hs = (const uint16_t *)src;
    float *fd = (float *)dst;
    uint16_t *hd = (uint16_t *)dst;
    for (size_t i = begin; i < end; i++) {
        switch (c) {
        case AK_C_TO_F16: hd[i] = ak__f32_to_f16_ref(fs[i]); break;
        case AK_C_FROM_F16: fd[i] = ak__f16_to_f32_ref(hs[i]); break;
        case AK_C_TO_BF16: hd[i] = ak__f32_to_bf16_ref(fs[i]); break;
        case AK_C_FROM_BF16: fd[i] = ak__bf16_to_f32_ref(hs[i]); break;
        }
    }
}

AK_ALWAYS_INLINE void ak__convert(ak__conv c, void *dst, const void *src, size_t n) {
    const size_t dst_es = c == AK_C_TO_F16 || c == AK_C_TO_BF16 ? 2 : 4;
    /* 4 + 2 bytes of traffic per element */
    int stream = (uintptr_t)dst % dst_es == 0 && n >= ak__kernels_stream_min_bytes() / 6;
    size_t i = 0;
    if (stream) { /* a scalar head brings dst to the alignment streaming stores need */
        i = ((32 - (uintptr_t)dst % 32) % 32) / dst_es;
        if (i > n) i = n;
        ak__conv_scalar(c, dst, src, 0, i);
    }
    for (; i + 32 <= n; i += 32) {
        ak__conv16(c, dst, src, i, stream);
        ak__conv16(c, dst, src, i + 16, stream);
    }
    if (i + 16 <= n) {
        ak__conv16(c, dst, src, i, stream);
        i += 16;
    }
    ak__conv_scalar(c, dst, src, i, n);
    if (stream) _mm_sfence(); /* order the streamed lines before later stores */
}

void ak_f32_to_f16__avx2(uint16_t *dst, const float *src, size_t n) {
    ak__convert(AK_C_TO_F16, dst, src, n);
}

void ak_f16_to_f32__avx2(float *dst, const uint16_t *src, size_t n) {
    ak__convert(AK_C_FROM_F16, dst, src, n);
}

void ak_f32_to_bf16__avx2(uint16_t *dst, const float *src, size_t n) {
    ak__convert(AK_C_TO_BF16, dst, src, n);
}

void ak_bf16_to_f32__avx2(float *dst, const uint16_t *src, size_t n) {
    ak__convert(AK_C_FROM_BF16, dst, src, n);
}

