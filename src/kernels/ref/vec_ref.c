/* Scalar reference elementwise kernels: add, scale, axpy, sum over f32, f16 and bf16.
 * See vec_ref.h for the numerical contract every variant must reproduce. */
#include "kernels/ref/vec_ref.h"

#include <math.h>

#include "core/half.h"
#include "kernels/dispatch.h"

/* ---- f32 ------------------------------------------------------------------------- */

void ak_f32_add__ref(float *dst, const float *a, const float *b, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = a[i] + b[i];
}

void ak_f32_scale__ref(float *dst, const float *x, float alpha, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = alpha * x[i];
}

/* fmaf rounds alpha*x + y once, as a vfmadd does; glibc picks a hardware fma when the
 * CPU has one, so this stays usable as the AK_KERNELS=ref path. */
void ak_f32_axpy__ref(float *y, float alpha, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] = fmaf(alpha, x[i], y[i]);
}

double ak_f32_sum__ref(const float *x, size_t n) {
    double acc = 0.0;
    for (size_t i = 0; i < n; i++) acc += x[i];
    return acc;
}

/* ---- f16 / bf16: the same four bodies over a (to_f32, from_f32) pair ---------------- */

#define AK_DEFINE_HALF_REF(ty, to_f32, from_f32)                                         \
    void ak_##ty##_add__ref(uint16_t *dst, const uint16_t *a, const uint16_t *b,         \
                            size_t n) {                                                  \
        for (size_t i = 0; i < n; i++) dst[i] = from_f32(to_f32(a[i]) + to_f32(b[i]));   \
    }                                                                                    \
    void ak_##ty##_scale__ref(uint16_t *dst, const uint16_t *x, float alpha, size_t n) { \
        for (size_t i = 0; i < n; i++) dst[i] = from_f32(alpha * to_f32(x[i]));          \
    }                                                                                    \
    void ak_##ty##_axpy__ref(uint16_t *y, float alpha, const uint16_t *x, size_t n) {    \
        for (size_t i = 0; i < n; i++)                                                   \
            y[i] = from_f32(fmaf(alpha, to_f32(x[i]), to_f32(y[i])));                    \
    }                                                                                    \
    double ak_##ty##_sum__ref(const uint16_t *x, size_t n) {                             \
        double acc = 0.0;                                                                \
        for (size_t i = 0; i < n; i++) acc += to_f32(x[i]);                              \
        return acc;                                                                      \
    }

AK_DEFINE_HALF_REF(f16, ak__f16_to_f32_ref, ak__f32_to_f16_ref)
AK_DEFINE_HALF_REF(bf16, ak__bf16_to_f32_ref, ak__f32_to_bf16_ref)

