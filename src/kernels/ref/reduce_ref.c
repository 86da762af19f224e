/* Scalar reference reductions for the collectives: dst[i] = a[i] op b[i] for op in SUM,
 * PROD, MIN, MAX over every ak_dtype, and the AVG finish (buf[i] /= world size).
 *
 * This file is the definition of the results every ISA variant must reproduce bit for bit:
 * - f16/bf16 are widened to f32, computed in f32 and rounded once to nearest even;
 * - integers wrap around (two's complement): SUM and PROD are computed in the unsigned
 *   type of the same width, where overflow is defined, and converted back (GCC defines
 *   the unsigned -> signed conversion as modulo 2^N);
 * - MIN/MAX follow IEEE 754-2019 minimum/maximum: if either input is NaN the result is
 *   NaN, and -0 counts as smaller than +0. The NaN returned is a + b (a quiet NaN with
 *   the payload x86 arithmetic picks), so the vector code can produce the same bits.
 * dst may be exactly a or b: each element is read before it is written. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "core/half.h"
#include "kernels/dispatch.h"
#include "kernels/ref/reduce_ref.h"

/* ---- element operations ------------------------------------------------------------ */

/* Integers: wrap-around SUM/PROD in the unsigned type U; MIN/MAX compare in T. */
#define AK_INT_OPS(ty, T, U)                                                            \
    static inline T ty##_sum(T a, T b) { return (T)(U)((U)a + (U)b); }                  \
    static inline T ty##_prod(T a, T b) { return (T)(U)((U)a * (U)b); }                 \
    static inline T ty##_min(T a, T b) { return a < b ? a : b; }                        \
    static inline T ty##_max(T a, T b) { return a > b ? a : b; }

/* U is unsigned int for the byte types: uint8_t operands would promote to int, and int
 * cannot overflow on 255 * 255, but the intent (modular arithmetic) reads better. */
AK_INT_OPS(i8, int8_t, unsigned)
AK_INT_OPS(u8, uint8_t, unsigned)
AK_INT_OPS(i32, int32_t, uint32_t)
AK_INT_OPS(i64, int64_t, uint64_t)

/* Binary floats. pick(a, b, max): NaN in -> NaN out (as a + b); equal values may be +0
 * and -0, where OR of the bits gives -0 for min and AND gives +0 for max. */
#define AK_FLOAT_OPS(ty, T, Bits)                                                       \
    static inline T ty##_pick(T a, T b, int max) {                                      \
        if (isnan(a) || isnan(b)) return a + b;                                         \
        if (a == b) {                                                                   \
            Bits ua, ub;                                                                \
            memcpy(&ua, &a, sizeof ua);                                                 \
            memcpy(&ub, &b, sizeof ub);                                                 \
            ua = max ? ua & ub : ua | ub;                                               \
            memcpy(&a, &ua, sizeof a);                                                  \
            return a;                                                                   \
        }                                                                               \
        return (max ? a > b : a < b) ? a : b;                                           \
    }                                                                                   \
    static inline T ty##_sum(T a, T b) { return a + b; }                                \
    static inline T ty##_prod(T a, T b) { return a * b; }                               \
    static inline T ty##_min(T a, T b) { return ty##_pick(a, b, 0); }                   \
    static inline T ty##_max(T a, T b) { return ty##_pick(a, b, 1); }

AK_FLOAT_OPS(f32, float, uint32_t)
AK_FLOAT_OPS(f64, double, uint64_t)

/* 16-bit floats: the f32 operation between a widening and one rounding. */
#define AK_HALF_OP(ty, op, to_f32, from_f32)                                            \
    static inline uint16_t ty##_##op(uint16_t a, uint16_t b) {                          \
        return from_f32(f32_##op(to_f32(a), to_f32(b)));                                \
    }
#define AK_HALF_OPS(ty, to_f32, from_f32)                                               \
    AK_HALF_OP(ty, sum, to_f32, from_f32)                                               \
    AK_HALF_OP(ty, prod, to_f32, from_f32)                                              \
    AK_HALF_OP(ty, min, to_f32, from_f32)                                               \
    AK_HALF_OP(ty, max, to_f32, from_f32)

AK_HALF_OPS(f16, ak__f16_to_f32_ref, ak__f32_to_f16_ref)
AK_HALF_OPS(bf16, ak__bf16_to_f32_ref, ak__f32_to_bf16_ref)

/* ---- the kernels: one elementwise loop per (dtype, op) ------------------------------- */

#define AK_REDUCE_REF(ty, T, op)                                                        \
    void ak_##ty##_reduce_##op##__ref(void *dst, const void *a, const void *b,          \
                                             size_t n) {                                \
        T *d = (T *)dst;                                                                \
        const T *x = (const T *)a, *y = (const T *)b;                                   \
        for (size_t i = 0; i < n; i++) d[i] = ty##_##op(x[i], y[i]);                    \
    }
#define AK_REDUCE_REF_ALL(ty, T)                                                        \
    AK_REDUCE_REF(ty, T, sum)                                                           \
    AK_REDUCE_REF(ty, T, prod)                                                          \
    AK_REDUCE_REF(ty, T, min)                                                           \
    AK_REDUCE_REF(ty, T, max)

AK_REDUCE_REF_ALL(f32, float)
AK_REDUCE_REF_ALL(f64, double)
AK_REDUCE_REF_ALL(f16, uint16_t)
AK_REDUCE_REF_ALL(bf16, uint16_t)
AK_REDUCE_REF_ALL(i8, int8_t)
AK_REDUCE_REF_ALL(u8, uint8_t)
AK_REDUCE_REF_ALL(i32, int32_t)
AK_REDUCE_REF_ALL(i64, int64_t)



/* ---- AVG finish ---------------------------------------------------------------------- */

/* Floats multiply by the rounded reciprocal (the documented contract: one multiply per
 * element, which vectorizes; a division would differ in the last bit for some values). */
#define AK_SCALE_LOOP(T, p, n, inv, load, store)                                        \
    do {                                                                                \
        T *q_ = (T *)(p);                                                               \
        for (size_t i_ = 0; i_ < (n); i_++) q_[i_] = store(load(q_[i_]) * (inv));       \
    } while (0)
#define AK_ID(x) (x)

/* Integers divide truncating toward zero (C division) in int or wider: the divisor may
 * not fit in T (i8 / 300 is 0), and divisor ≥ 1 cannot overflow. */
#define AK_DIV_LOOP(T, p, n, d)                                                         \
    do {                                                                                \
        T *q_ = (T *)(p);                                                               \
        for (size_t i_ = 0; i_ < (n); i_++) q_[i_] = (T)(q_[i_] / (d));                 \
    } while (0)

/* buf[i] /= divisor for every dtype; the caller validated dtype and divisor ≥ 1. */
void ak__reduce_avg_finish_ref(ak_dtype dtype, void *buf, size_t n, int divisor) {
    const float inv = 1.0f / (float)divisor;
    switch (dtype) {
    case AK_DTYPE_F32: AK_SCALE_LOOP(float, buf, n, inv, AK_ID, AK_ID); break;
    case AK_DTYPE_F64: AK_SCALE_LOOP(double, buf, n, 1.0 / divisor, AK_ID, AK_ID); break;
    case AK_DTYPE_F16:
        AK_SCALE_LOOP(uint16_t, buf, n, inv, ak__f16_to_f32_ref, ak__f32_to_f16_ref);
        break;
    case AK_DTYPE_BF16:
        AK_SCALE_LOOP(uint16_t, buf, n, inv, ak__bf16_to_f32_ref, ak__f32_to_bf16_ref);
        break;
    case AK_DTYPE_I8: AK_DIV_LOOP(int8_t, buf, n, divisor); break;
    case AK_DTYPE_U8: AK_DIV_LOOP(uint8_t, buf, n, divisor); break;
    case AK_DTYPE_I32: AK_DIV_LOOP(int32_t, buf, n, divisor); break;
    case AK_DTYPE_I64: AK_DIV_LOOP(int64_t, buf, n, divisor); break;
    default: break;
    }
}
