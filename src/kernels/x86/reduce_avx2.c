/* AVX2 + F16C reductions for the collectives: dst[i] = a[i] op b[i], op in SUM, PROD,
 * MIN, MAX, for every ak_dtype (f32, f16, bf16, f64, i8, u8, i32, i64).
 *
 * One generic loop (ak__reduce) walks the buffers in 32-byte blocks whatever the dtype;
 * always_inline specialises it by a constant (dtype, op) so each of the 32 kernels is a
 * straight loop around a few instructions. Results are bit-identical to kernels/ref
 * (reduce_ref.c states the semantics):
 * - f16/bf16 are widened to f32, computed and rounded once (F16C for f16; for bf16 the
 *   exact integer round-to-nearest-even of avx2_common.h, as vec_avx2.c does);
 * - MIN/MAX: vminps/vmaxps alone are not IEEE minimum/maximum (they return the second
 *   operand when either is NaN, and for +0 vs -0), so two blends fix them up: equal
 *   inputs give a|b (min) or a&b (max), which orders -0 below +0, and unordered inputs
 *   give a + b, a NaN;
 * - integers wrap: add/mullo are modular; i8/u8 multiply as 16-bit lanes (the low byte
 *   of a 16-bit product depends only on the low bytes), i64 multiplies from 32-bit halves.
 * The work is memory bound (2 loads and 1 store per block): four blocks per iteration
 * keep enough loads in flight. dst may equal a or b (each block is read before it is
 * written); tails use a zero-padded stack block so nothing past n is touched. Large
 * out-of-place results use non-temporal stores, with the same threshold and reason as
 * vec_avx2.c (no read for ownership of destination lines). */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "kernels/dispatch.h"
#include "kernels/x86/avx2_common.h"

/* ---- floating point: ps and pd share one body ----------------------------------------- */

#define AK_FLOAT_APPLY(sfx, V)                                                          \
    AK_ALWAYS_INLINE V ak__##sfx##_pick(V a, V b, int max) {                            \
        V r = max ? _mm256_max_##sfx(a, b) : _mm256_min_##sfx(a, b);                    \
        V zeros = max ? _mm256_and_##sfx(a, b) : _mm256_or_##sfx(a, b);                 \
        r = _mm256_blendv_##sfx(r, zeros, _mm256_cmp_##sfx(a, b, _CMP_EQ_OQ));          \
        return _mm256_blendv_##sfx(r, _mm256_add_##sfx(a, b),                           \
                                   _mm256_cmp_##sfx(a, b, _CMP_UNORD_Q));               \
    }                                                                                   \
    AK_ALWAYS_INLINE V ak__##sfx##_apply(ak_reduce_op op, V a, V b) {                   \
        switch (op) {                                                                   \
        case AK_REDUCE_SUM: return _mm256_add_##sfx(a, b);                              \
        case AK_REDUCE_PROD: return _mm256_mul_##sfx(a, b);                             \
        case AK_REDUCE_MIN: return ak__##sfx##_pick(a, b, 0);                           \
        default: return ak__##sfx##_pick(a, b, 1);                                      \
        }                                                                               \
    }

AK_FLOAT_APPLY(ps, __m256)
AK_FLOAT_APPLY(pd, __m256d)

/* f16 works on 8-value halves straight from memory: F16C converts 8 values per
 * instruction from and to memory, so no lane shuffles are needed (extracting and inserting
 * the halves of one 256-bit load ran at 48 instead of 79 GB/s in L2). */
AK_ALWAYS_INLINE __m256 ak__f16_load8(const unsigned char *p) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
}
AK_ALWAYS_INLINE void ak__f16_store8(unsigned char *p, __m256 v, int stream) {
    __m128i h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT);
    if (stream)
        _mm_stream_si128((__m128i *)p, h);
    else
        _mm_storeu_si128((__m128i *)p, h);
}

/* 16 bf16 values: a bf16 is the top half of an f32, so the even elements are shifted up
 * and the odd ones masked in place; the results go back the same way. */
AK_ALWAYS_INLINE __m256 ak__bf16_even(__m256i v) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}
AK_ALWAYS_INLINE __m256 ak__bf16_odd(__m256i v) {
    return _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32((int)0xffff0000u)));
}
AK_ALWAYS_INLINE __m256i ak__bf16_apply(ak_reduce_op op, __m256i a, __m256i b) {
    __m256 even = ak__ps_apply(op, ak__bf16_even(a), ak__bf16_even(b));
    __m256 odd = ak__ps_apply(op, ak__bf16_odd(a), ak__bf16_odd(b));
    __m256i lo = _mm256_srli_epi32(ak__bf16_round_hi(even), 16);
    return _mm256_blend_epi16(lo, ak__bf16_round_hi(odd), 0xaa);
}

/* ---- integers: wrap-around arithmetic, signed or unsigned compares ------------------- */

/* Low byte of each product: even bytes from 16-bit products of the whole lanes, odd bytes
 * from the lanes shifted down (AVX2 has no 8-bit multiply). */
AK_ALWAYS_INLINE __m256i ak__mul_epi8(__m256i a, __m256i b) {
    __m256i even = _mm256_mullo_epi16(a, b);
    __m256i odd = _mm256_mullo_epi16(_mm256_srli_epi16(a, 8), _mm256_srli_epi16(b, 8));
    return _mm256_or_si256(_mm256_and_si256(even, _mm256_set1_epi16(0x00ff)),
                           _mm256_slli_epi16(odd, 8));
}

/* Low 64 bits of each product: lo·lo + ((hi·lo + lo·hi) << 32) (AVX2 has no vpmullq). */
AK_ALWAYS_INLINE __m256i ak__mul_epi64(__m256i a, __m256i b) {
    __m256i cross = _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(a, 32), b),
                                     _mm256_mul_epu32(a, _mm256_srli_epi64(b, 32)));
    return _mm256_add_epi64(_mm256_mul_epu32(a, b), _mm256_slli_epi64(cross, 32));
}

/* AVX2 has a 64-bit signed compare but no 64-bit min/max. */
AK_ALWAYS_INLINE __m256i ak__min_epi64(__m256i a, __m256i b) {
    return _mm256_blendv_epi8(a, b, _mm256_cmpgt_epi64(a, b));
}
AK_ALWAYS_INLINE __m256i ak__max_epi64(__m256i a, __m256i b) {
    return _mm256_blendv_epi8(b, a, _mm256_cmpgt_epi64(a, b));
}

#define AK_INT_APPLY(ty, add, mul, min, max)                                            \
    AK_ALWAYS_INLINE __m256i ak__##ty##_apply(ak_reduce_op op, __m256i a, __m256i b) {  \
        switch (op) {                                                                   \
        case AK_REDUCE_SUM: return add(a, b);                                           \
        case AK_REDUCE_PROD: return mul(a, b);                                          \
        case AK_REDUCE_MIN: return min(a, b);                                           \
        default: return max(a, b);                                                      \
        }                                                                               \
    }

AK_INT_APPLY(i8, _mm256_add_epi8, ak__mul_epi8, _mm256_min_epi8, _mm256_max_epi8)
AK_INT_APPLY(u8, _mm256_add_epi8, ak__mul_epi8, _mm256_min_epu8, _mm256_max_epu8)
AK_INT_APPLY(i32, _mm256_add_epi32, _mm256_mullo_epi32, _mm256_min_epi32, _mm256_max_epi32)
AK_INT_APPLY(i64, _mm256_add_epi64, ak__mul_epi64, ak__min_epi64, ak__max_epi64)

/* ---- one 32-byte block of any dtype --------------------------------------------------- */

AK_ALWAYS_INLINE __m256i ak__reduce32(ak_dtype dt, ak_reduce_op op, __m256i a, __m256i b) {
    switch (dt) {
    case AK_DTYPE_F32:
        return _mm256_castps_si256(
            ak__ps_apply(op, _mm256_castsi256_ps(a), _mm256_castsi256_ps(b)));
    case AK_DTYPE_F64:
        return _mm256_castpd_si256(
            ak__pd_apply(op, _mm256_castsi256_pd(a), _mm256_castsi256_pd(b)));
    case AK_DTYPE_BF16: return ak__bf16_apply(op, a, b);
    case AK_DTYPE_I8: return ak__i8_apply(op, a, b);
    case AK_DTYPE_U8: return ak__u8_apply(op, a, b);
    case AK_DTYPE_I32: return ak__i32_apply(op, a, b);
    case AK_DTYPE_I64: return ak__i64_apply(op, a, b);
    default: return a; /* f16 never comes here: ak__block computes it from memory */
    }
}

AK_ALWAYS_INLINE size_t ak__dtype_bytes(ak_dtype dt) {
    switch (dt) {
    case AK_DTYPE_I8:
    case AK_DTYPE_U8: return 1;
    case AK_DTYPE_F16:
    case AK_DTYPE_BF16: return 2;
    case AK_DTYPE_F32:
    case AK_DTYPE_I32: return 4;
    default: return 8;
    }
}

/* ---- the loop ------------------------------------------------------------------------- */

/* stream: non-temporal store; dst + off must then be 32-byte aligned. */
AK_ALWAYS_INLINE void ak__block(ak_dtype dt, ak_reduce_op op, int stream, unsigned char *dst,
                                const unsigned char *a, const unsigned char *b, size_t off) {
    if (dt == AK_DTYPE_F16) { /* each half is read before it is written: in place is safe */
        for (size_t h = off; h < off + 32; h += 16)
            ak__f16_store8(dst + h, ak__ps_apply(op, ak__f16_load8(a + h), ak__f16_load8(b + h)),
                           stream);
        return;
    }
    __m256i va = _mm256_loadu_si256((const __m256i *)(a + off));
    __m256i vb = _mm256_loadu_si256((const __m256i *)(b + off));
    __m256i r = ak__reduce32(dt, op, va, vb);
    if (stream)
        _mm256_stream_si256((__m256i *)(dst + off), r);
    else
        _mm256_storeu_si256((__m256i *)(dst + off), r);
}

/* Fewer than 32 bytes (whole elements), through zero-padded stack blocks. */
AK_ALWAYS_INLINE void ak__short(ak_dtype dt, ak_reduce_op op, unsigned char *dst,
                                const unsigned char *a, const unsigned char *b, size_t bytes) {
    unsigned char ta[32] = {0}, tb[32] = {0}, td[32];
    memcpy(ta, a, bytes);
    memcpy(tb, b, bytes);
    ak__block(dt, op, 0, td, ta, tb, 0);
    memcpy(dst, td, bytes);
}

AK_ALWAYS_INLINE void ak__body(ak_dtype dt, ak_reduce_op op, int stream, unsigned char *dst,
                               const unsigned char *a, const unsigned char *b, size_t bytes) {
    size_t off = 0;
    for (; off + 128 <= bytes; off += 128) {
        ak__block(dt, op, stream, dst, a, b, off);
        ak__block(dt, op, stream, dst, a, b, off + 32);
        ak__block(dt, op, stream, dst, a, b, off + 64);
        ak__block(dt, op, stream, dst, a, b, off + 96);
    }
    for (; off + 32 <= bytes; off += 32) ak__block(dt, op, stream, dst, a, b, off);
    if (off < bytes) ak__short(dt, op, dst + off, a + off, b + off, bytes - off);
}

AK_ALWAYS_INLINE void ak__reduce(ak_dtype dt, ak_reduce_op op, void *dst_, const void *a_,
                                 const void *b_, size_t n) {
    unsigned char *dst = (unsigned char *)dst_;
    const unsigned char *a = (const unsigned char *)a_, *b = (const unsigned char *)b_;
    const size_t es = ak__dtype_bytes(dt), bytes = n * es;
    int aliased = dst == a || dst == b; /* in place: lines are cached, streaming no gain */
    if (aliased || (uintptr_t)dst % es || bytes < ak__kernels_stream_min_bytes() / 3) {
        ak__body(dt, op, 0, dst, a, b, bytes);
        return;
    }
    /* a short head (whole elements, as dst is element-aligned) aligns dst to 32 bytes */
    size_t head = (32 - (uintptr_t)dst % 32) % 32;
    if (head > bytes) head = bytes;
    if (head) ak__short(dt, op, dst, a, b, head);
    ak__body(dt, op, 1, dst + head, a + head, b + head, bytes - head);
    _mm_sfence(); /* order the streamed lines before anything this thread publishes */
}

/* ---- the kernels (kernels/kernels.def lists them) ------------------------------------- */

#define AK_REDUCE_AVX2(ty, DT, op, OP)                                                  \
    void ak_##ty##_reduce_##op##__avx2(void *dst, const void *a, const void *b,         \
                                              size_t n) {                               \
        ak__reduce(DT, OP, dst, a, b, n);                                               \
    }
#define AK_REDUCE_AVX2_ALL(ty, DT)                                                      \
    AK_REDUCE_AVX2(ty, DT, sum, AK_REDUCE_SUM)                                          \
    AK_REDUCE_AVX2(ty, DT, prod, AK_REDUCE_PROD)                                        \
    AK_REDUCE_AVX2(ty, DT, min, AK_REDUCE_MIN)                                          \
    AK_REDUCE_AVX2(ty, DT, max, AK_REDUCE_MAX)

AK_REDUCE_AVX2_ALL(f32, AK_DTYPE_F32)
AK_REDUCE_AVX2_ALL(f16, AK_DTYPE_F16)
AK_REDUCE_AVX2_ALL(bf16, AK_DTYPE_BF16)
AK_REDUCE_AVX2_ALL(f64, AK_DTYPE_F64)
AK_REDUCE_AVX2_ALL(i8, AK_DTYPE_I8)
AK_REDUCE_AVX2_ALL(u8, AK_DTYPE_U8)
AK_REDUCE_AVX2_ALL(i32, AK_DTYPE_I32)
AK_REDUCE_AVX2_ALL(i64, AK_DTYPE_I64)


