/* AVX2 + FMA + F16C elementwise kernels: add, scale, axpy, sum over f32, f16 and bf16.
 *
 * Every kernel is one generic loop (ak__map / ak__sum) specialised by a constant element
 * type and operation; always_inline makes the compiler fold the switches away, so the
 * f16 and bf16 versions differ from f32 only in how 16 values are loaded and stored.
 * Values are computed in f32 exactly as the scalar reference does (one FMA for axpy,
 * one rounding to the 16-bit format), so results are bit-identical to kernels/ref.
 * Loads and stores are unaligned; dst may equal an input (each block is read before it
 * is written). Tails go through a small zero-padded stack buffer so they reuse the
 * vector code and never touch memory past n.
 *
 * Large out-of-place results are written with non-temporal stores (ak__kernels_stream_min_bytes):
 * on a Zen 4 with 32 MiB L3, f32 a+b->c over 16 MiB operands went from about 29 to 37
 * GB/s, because no destination line is read for ownership first. In-place calls keep
 * normal stores: their lines are already cached, and streaming them measured no faster
 * (slower when the data fits in the cache). */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "kernels/dispatch.h"
#include "kernels/x86/avx2_common.h"

typedef enum { AK_E_F32, AK_E_F16, AK_E_BF16 } ak__elem;
typedef enum { AK_OP_ADD, AK_OP_SCALE, AK_OP_AXPY } ak__op;

/* 16 values widened to f32. Which element sits in which lane depends on the type (bf16
 * puts the even elements in lo and the odd ones in hi); only the matching store has to
 * undo it, and an elementwise operation does not care. */
typedef struct {
    __m256 lo, hi;
} ak__v16;

AK_ALWAYS_INLINE size_t ak__elem_size(ak__elem e) { return e == AK_E_F32 ? 4 : 2; }


AK_ALWAYS_INLINE ak__v16 ak__load16(ak__elem e, const void *p) {
    ak__v16 v;
    if (e == AK_E_F32) {
        v.lo = _mm256_loadu_ps((const float *)p);
        v.hi = _mm256_loadu_ps((const float *)p + 8);
    } else if (e == AK_E_F16) {
        v.lo = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
        v.hi = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p + 1));
    } else { /* bf16 is the top half of an f32: shift the even elements up, mask the odd */
        __m256i raw = _mm256_loadu_si256((const __m256i *)p);
        v.lo = _mm256_castsi256_ps(_mm256_slli_epi32(raw, 16));
        v.hi = _mm256_castsi256_ps(_mm256_and_si256(raw, _mm256_set1_epi32((int)0xffff0000u)));
    }
    return v;
}

/* stream: non-temporal stores; p must then be 32-byte aligned. */
AK_ALWAYS_INLINE void ak__store16(ak__elem e, void *p, ak__v16 v, int stream) {
    if (e == AK_E_F32) {
        if (stream) {
            _mm256_stream_ps((float *)p, v.lo);
            _mm256_stream_ps((float *)p + 8, v.hi);
        } else {
            _mm256_storeu_ps((float *)p, v.lo);
            _mm256_storeu_ps((float *)p + 8, v.hi);
        }
    } else if (e == AK_E_F16) {
        __m128i lo = _mm256_cvtps_ph(v.lo, _MM_FROUND_TO_NEAREST_INT);
        __m128i hi = _mm256_cvtps_ph(v.hi, _MM_FROUND_TO_NEAREST_INT);
        if (stream) {
            _mm_stream_si128((__m128i *)p, lo);
            _mm_stream_si128((__m128i *)p + 1, hi);
        } else {
            _mm_storeu_si128((__m128i *)p, lo);
            _mm_storeu_si128((__m128i *)p + 1, hi);
        }
    } else { /* even elements back to the low halves, odd ones stay in the high halves */
        __m256i lo = _mm256_srli_epi32(ak__bf16_round_hi(v.lo), 16);
        __m256i packed = _mm256_blend_epi16(lo, ak__bf16_round_hi(v.hi), 0xaa);
        if (stream)
            _mm256_stream_si256((__m256i *)p, packed);
        else
            _mm256_storeu_si256((__m256i *)p, packed);
    }
}

/* a op b; for axpy a is y and b is x: y + alpha*x with one rounding. */
AK_ALWAYS_INLINE ak__v16 ak__apply(ak__op op, ak__v16 a, ak__v16 b, __m256 alpha) {
    ak__v16 r;
    if (op == AK_OP_ADD) {
        r.lo = _mm256_add_ps(a.lo, b.lo);
        r.hi = _mm256_add_ps(a.hi, b.hi);
    } else if (op == AK_OP_SCALE) {
        r.lo = _mm256_mul_ps(alpha, a.lo);
        r.hi = _mm256_mul_ps(alpha, a.hi);
    } else {
        r.lo = _mm256_fmadd_ps(alpha, b.lo, a.lo);
        r.hi = _mm256_fmadd_ps(alpha, b.hi, a.hi);
    }
    return r;
}

/* One block of 16 at byte offset off; b is not read for scale. */
AK_ALWAYS_INLINE void ak__map16(ak__elem e, ak__op op, int stream, unsigned char *dst,
                                const unsigned char *a, const unsigned char *b, __m256 alpha,
                                size_t off) {
    ak__v16 va = ak__load16(e, a + off);
    ak__v16 vb = op == AK_OP_SCALE ? va : ak__load16(e, b + off);
    ak__store16(e, dst + off, ak__apply(op, va, vb, alpha), stream);
}

/* Fewer than 16 elements, padded with zeros in a stack buffer. */
AK_ALWAYS_INLINE void ak__map_short(ak__elem e, ak__op op, unsigned char *dst,
                                    const unsigned char *a, const unsigned char *b,
                                    __m256 alpha, size_t n) {
    unsigned char ta[64] = {0}, tb[64] = {0}, td[64];
    size_t bytes = n * ak__elem_size(e);
    memcpy(ta, a, bytes);
    if (op != AK_OP_SCALE) memcpy(tb, b, bytes);
    ak__map16(e, op, 0, td, ta, tb, alpha, 0);
    memcpy(dst, td, bytes);
}

/* Two blocks per iteration keep enough loads in flight to run at memory bandwidth. */
AK_ALWAYS_INLINE void ak__map_body(ak__elem e, ak__op op, int stream, unsigned char *dst,
                                   const unsigned char *a, const unsigned char *b,
                                   __m256 alpha, size_t n) {
    const size_t es = ak__elem_size(e);
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        ak__map16(e, op, stream, dst, a, b, alpha, i * es);
        ak__map16(e, op, stream, dst, a, b, alpha, (i + 16) * es);
    }
    if (i + 16 <= n) {
        ak__map16(e, op, stream, dst, a, b, alpha, i * es);
        i += 16;
    }
    if (i < n) ak__map_short(e, op, dst + i * es, a + i * es, b + i * es, alpha, n - i);
}

/* dst = a op b over n elements, streaming large out-of-place results. */
AK_ALWAYS_INLINE void ak__map(ak__elem e, ak__op op, void *dst_, const void *a_,
                              const void *b_, float alpha_s, size_t n) {
    unsigned char *dst = (unsigned char *)dst_;
    const unsigned char *a = (const unsigned char *)a_, *b = (const unsigned char *)b_;
    const size_t es = ak__elem_size(e);
    const __m256 alpha = _mm256_set1_ps(alpha_s);
    size_t buffers = op == AK_OP_SCALE ? 2 : 3; /* inputs + output */
    int aliased = dst == a || (op != AK_OP_SCALE && dst == b);
    if (aliased || (uintptr_t)dst % es || n * es < ak__kernels_stream_min_bytes() / buffers) {
        ak__map_body(e, op, 0, dst, a, b, alpha, n);
        return;
    }
    /* a short head brings dst to the 32-byte alignment streaming stores need */
    size_t head = ((32 - (uintptr_t)dst % 32) % 32) / es;
    if (head > n) head = n;
    ak__map_short(e, op, dst, a, b, alpha, head);
    size_t off = head * es;
    ak__map_body(e, op, 1, dst + off, a + off, b + off, alpha, n - head);
    _mm_sfence(); /* order the streamed lines before anything this thread publishes */
}

/* f32 lane sums are flushed into f64 every AK_SUM_BLOCK elements, so each f32 lane adds
 * at most 64 values: long vectors keep the accuracy of a double sum at f32 speed. */
#define AK_SUM_BLOCK 2048

AK_ALWAYS_INLINE __m256d ak__widen_add(__m256d acc, __m256 v) {
    acc = _mm256_add_pd(acc, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
    return _mm256_add_pd(acc, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
}

AK_ALWAYS_INLINE double ak__sum(ak__elem e, const void *x_, size_t n) {
    const unsigned char *x = (const unsigned char *)x_;
    const size_t es = ak__elem_size(e);
    __m256d total = _mm256_setzero_pd();
    size_t i = 0;
    while (i + 32 <= n) {
        /* four independent accumulators hide the add latency */
        __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
        size_t end = n - i > AK_SUM_BLOCK ? i + AK_SUM_BLOCK : n;
        for (; i + 32 <= end; i += 32) {
            ak__v16 v0 = ak__load16(e, x + i * es), v1 = ak__load16(e, x + (i + 16) * es);
            s0 = _mm256_add_ps(s0, v0.lo);
            s1 = _mm256_add_ps(s1, v0.hi);
            s2 = _mm256_add_ps(s2, v1.lo);
            s3 = _mm256_add_ps(s3, v1.hi);
        }
        total = ak__widen_add(ak__widen_add(total, s0), s1);
        total = ak__widen_add(ak__widen_add(total, s2), s3);
    }
    for (; i < n; i += 16) {
        ak__v16 v;
        if (i + 16 <= n) {
            v = ak__load16(e, x + i * es);
        } else {
            unsigned char t[64] = {0};
            memcpy(t, x + i * es, (n - i) * es);
            v = ak__load16(e, t);
        }
        total = ak__widen_add(ak__widen_add(total, v.lo), v.hi);
    }
    __m128d pair = _mm_add_pd(_mm256_castpd256_pd128(total), _mm256_extractf128_pd(total, 1));
    return _mm_cvtsd_f64(_mm_add_sd(pair, _mm_unpackhi_pd(pair, pair)));
}

/* ---- the kernels ------------------------------------------------------------------ */

#define AK_DEFINE_VEC_AVX2(ty, T, E)                                                     \
    void ak_##ty##_add__avx2(T *dst, const T *a, const T *b, size_t n) {          \
        ak__map(E, AK_OP_ADD, dst, a, b, 0.0f, n);                                       \
    }                                                                                    \
    void ak_##ty##_scale__avx2(T *dst, const T *x, float alpha, size_t n) {       \
        ak__map(E, AK_OP_SCALE, dst, x, NULL, alpha, n);                                 \
    }                                                                                    \
    void ak_##ty##_axpy__avx2(T *y, float alpha, const T *x, size_t n) {          \
        ak__map(E, AK_OP_AXPY, y, y, x, alpha, n);                                       \
    }                                                                                    \
    double ak_##ty##_sum__avx2(const T *x, size_t n) { return ak__sum(E, x, n); }

AK_DEFINE_VEC_AVX2(f32, float, AK_E_F32)
AK_DEFINE_VEC_AVX2(f16, uint16_t, AK_E_F16)
AK_DEFINE_VEC_AVX2(bf16, uint16_t, AK_E_BF16)

