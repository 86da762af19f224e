/* The float32 row loops of the ONNX engine's Reduce* and LayerNormalization kernels
 * (kf_infer.h), written once as always-inline bodies over GCC vector extensions and
 * instantiated by kernels/ref/rows_ref.c (baseline ISA: the reference) and
 * kernels/x86/rows_avx2.c (AVX2): both run the same 8-lane arithmetic without
 * contraction, so their results are bit-identical. Vector values never cross a call,
 * so no vector ABI is involved. */
#ifndef AK_KERNELS_REF_ROWS_BODY_H
#define AK_KERNELS_REF_ROWS_BODY_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/dispatch.h"

#define AK_ROWS_INLINE static inline __attribute__((always_inline))

/* 8 lanes (AVX2 instantiations) and 4 lanes (baseline instantiations: GCC splits wider
 * vectors badly on SSE, comparisons lane by lane). The AK_V* macros take any width. */
typedef float ak__v8f __attribute__((vector_size(32)));
typedef int32_t ak__v8i __attribute__((vector_size(32)));
typedef float ak__v4f __attribute__((vector_size(16)));
typedef int32_t ak__v4i __attribute__((vector_size(16)));

#define AK_VLOAD(v, p) __builtin_memcpy(&(v), (p), sizeof(v))
#define AK_VSTORE(p, v) __builtin_memcpy((p), &(v), sizeof(v))
#define AK_VSPLAT(VF, s) ((VF){0} + (float)(s))
/* lane-wise select: m ? a : b, m from a comparison (all ones or zero) */
#define AK_VSELECT(VI, m, a, b) ((__typeof__(a))(((VI)(a) & (m)) | ((VI)(b) & ~(m))))

/* v = exp(v) for v <= 0 (softmax after subtracting the row maximum): Cody-Waite range
 * reduction to r in [-ln2/2, ln2/2], the degree-7 Taylor polynomial (error below 1e-8)
 * evaluated by Estrin's scheme (short dependency chains: the loop is latency-bound), and
 * 2^n built in the exponent bits. Below -87.33 (where exp is subnormal) gives 0; NaN
 * stays NaN. Within 2 ulp of expf. */
#define AK_VEXP_NONPOS(VF, VI, v)                                                       \
    do {                                                                                \
        VI ak_under_ = (v) < AK_VSPLAT(VF, -87.33654f);                                 \
        VF ak_x_ = AK_VSELECT(VI, ak_under_, AK_VSPLAT(VF, -87.33654f), (v));           \
        VF ak_t_ = ak_x_ * 1.44269504f + 12582912.0f;                                   \
        VF ak_n_ = ak_t_ - 12582912.0f;                                                 \
        VF ak_r_ = ak_x_ - ak_n_ * 0.693359375f;                                        \
        ak_r_ = ak_r_ + ak_n_ * 2.12194440e-4f;                                         \
        VF ak_r2_ = ak_r_ * ak_r_;                                                      \
        VF ak_r4_ = ak_r2_ * ak_r2_;                                                    \
        VF ak_p01_ = ak_r_ + 1.0f;                                                      \
        VF ak_p23_ = ak_r_ * (1.0f / 6.0f) + 0.5f;                                      \
        VF ak_p45_ = ak_r_ * (1.0f / 120.0f) + (1.0f / 24.0f);                          \
        VF ak_p67_ = ak_r_ * (1.0f / 5040.0f) + (1.0f / 720.0f);                        \
        VF ak_p_ = (ak_p01_ + ak_r2_ * ak_p23_) + ak_r4_ * (ak_p45_ + ak_r2_ * ak_p67_); \
        VI ak_e_ = ((VI)ak_t_ - (0x4B400000 - 127)) << 23;                              \
        VF ak_y_ = ak_p_ * (VF)ak_e_;                                                   \
        (v) = (VF)((VI)ak_y_ & ~ak_under_);                                             \
    } while (0)

/* The 8-lane spellings the kernels written for one width use. */
#define AK_V8_LOAD(v, p) AK_VLOAD(v, p)
#define AK_V8_STORE(p, v) AK_VSTORE(p, v)
#define AK_V8_SPLAT(s) AK_VSPLAT(ak__v8f, s)
#define AK_V8_SELECT(m, a, b) AK_VSELECT(ak__v8i, m, a, b)
#define AK_V8_EXP_NONPOS(v) AK_VEXP_NONPOS(ak__v8f, ak__v8i, v)
#define AK_V8_HSUM(v) \
    ((((v)[0] + (v)[4]) + ((v)[1] + (v)[5])) + (((v)[2] + (v)[6]) + ((v)[3] + (v)[7])))


/* ---- Reduce* over contiguous rows --------------------------------------------------- */

/* Reduces each of `rows` contiguous rows of n floats to one value. */
AK_ROWS_INLINE void ak__rows_reduce_body(const float *x, float *y, size_t rows, size_t n,
                                  int kind) {
    for (size_t row = 0; row < rows; row++, x += n) {
        float acc;
        size_t i = 0;
        if (kind == AK_KF_ROWS_MAX || kind == AK_KF_ROWS_MIN) {
            ak__v8f m = AK_V8_SPLAT(kind == AK_KF_ROWS_MAX ? -INFINITY : INFINITY);
            for (; i + 8 <= n; i += 8) {
                ak__v8f v;
                AK_V8_LOAD(v, x + i);
                ak__v8i take = kind == AK_KF_ROWS_MAX ? (v > m) : (v < m);
                take |= v != v; /* NaN wins, as numpy's max does */
                m = AK_V8_SELECT(take, v, m);
            }
            acc = m[0];
            for (int l = 1; l < 8; l++)
                if ((kind == AK_KF_ROWS_MAX ? m[l] > acc : m[l] < acc) || isnan(m[l])) acc = m[l];
            for (; i < n; i++)
                if ((kind == AK_KF_ROWS_MAX ? x[i] > acc : x[i] < acc) || isnan(x[i])) acc = x[i];
        } else if (kind == AK_KF_ROWS_PROD) {
            acc = 1.0f;
            for (; i < n; i++) acc *= x[i];
        } else {
            ak__v8f s0 = AK_V8_SPLAT(0.0f), s1 = s0;
            const ak__v8i absmask = {INT32_MAX, INT32_MAX, INT32_MAX, INT32_MAX,
                                     INT32_MAX, INT32_MAX, INT32_MAX, INT32_MAX};
            for (; i + 16 <= n; i += 16) {
                ak__v8f a, b;
                AK_V8_LOAD(a, x + i);
                AK_V8_LOAD(b, x + i + 8);
                if (kind == AK_KF_ROWS_ABS) {
                    a = (ak__v8f)((ak__v8i)a & absmask);
                    b = (ak__v8f)((ak__v8i)b & absmask);
                } else if (kind == AK_KF_ROWS_SQUARES) {
                    a = a * a;
                    b = b * b;
                }
                s0 += a;
                s1 += b;
            }
            s0 += s1;
            acc = AK_V8_HSUM(s0);
            for (; i < n; i++) {
                float v = x[i];
                acc += kind == AK_KF_ROWS_ABS ? fabsf(v) : kind == AK_KF_ROWS_SQUARES ? v * v : v;
            }
        }
        y[row] = acc;
    }
}

/* ---- LayerNormalization over contiguous rows ------------------------------------- */

AK_ROWS_INLINE void ak__rows_layer_norm_body(const float *x, float *y, size_t rows, size_t n,
                                 const float *g, const float *b, float eps, float *mean_out,
                                 float *inv_out) {
    for (size_t row = 0; row < rows; row++, x += n, y += n) {
        size_t i = 0;
        ak__v8f s0 = AK_V8_SPLAT(0.0f), s1 = s0;
        for (; i + 16 <= n; i += 16) {
            ak__v8f a, c;
            AK_V8_LOAD(a, x + i);
            AK_V8_LOAD(c, x + i + 8);
            s0 += a;
            s1 += c;
        }
        s0 += s1;
        float sum = AK_V8_HSUM(s0);
        for (; i < n; i++) sum += x[i];
        float mean = sum / (float)n;

        /* the variance from deviations (two passes: no cancellation) */
        ak__v8f mv = AK_V8_SPLAT(mean);
        s0 = s1 = AK_V8_SPLAT(0.0f);
        for (i = 0; i + 16 <= n; i += 16) {
            ak__v8f a, c;
            AK_V8_LOAD(a, x + i);
            AK_V8_LOAD(c, x + i + 8);
            a -= mv;
            c -= mv;
            s0 += a * a;
            s1 += c * c;
        }
        s0 += s1;
        float ss = AK_V8_HSUM(s0);
        for (; i < n; i++) ss += (x[i] - mean) * (x[i] - mean);
        float inv = 1.0f / sqrtf(ss / (float)n + eps);

        ak__v8f iv = AK_V8_SPLAT(inv);
        for (i = 0; i + 8 <= n; i += 8) {
            ak__v8f a, gv, bv = AK_V8_SPLAT(0.0f);
            AK_V8_LOAD(a, x + i);
            AK_V8_LOAD(gv, g + i);
            if (b) AK_V8_LOAD(bv, b + i);
            a = (a - mv) * iv * gv + bv;
            AK_V8_STORE(y + i, a);
        }
        for (; i < n; i++) y[i] = (x[i] - mean) * inv * g[i] + (b ? b[i] : 0.0f);
        if (mean_out) mean_out[row] = mean;
        if (inv_out) inv_out[row] = inv;
    }
}

#endif /* AK_KERNELS_REF_ROWS_BODY_H */
