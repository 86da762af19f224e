/* Scalar reference elementwise kernels (f32 / f16 / bf16): the oracle the ISA variants
 * are tested against, and what AK_KERNELS=ref runs. f16 and bf16 are converted to f32
 * with core/half.h, computed in f32 and rounded to the 16-bit format once. axpy uses
 * fmaf (one rounding), exactly what the FMA variants compute, so every variant matches
 * the reference bit for bit; sum accumulates in double. dst may equal a / x. */
#ifndef AK_KERNELS_REF_VEC_REF_H
#define AK_KERNELS_REF_VEC_REF_H

#include <stddef.h>
#include <stdint.h>

void ak_f32_add__ref(float *dst, const float *a, const float *b, size_t n);
void ak_f32_scale__ref(float *dst, const float *x, float alpha, size_t n);
void ak_f32_axpy__ref(float *y, float alpha, const float *x, size_t n);
double ak_f32_sum__ref(const float *x, size_t n);

void ak_f16_add__ref(uint16_t *dst, const uint16_t *a, const uint16_t *b, size_t n);
void ak_f16_scale__ref(uint16_t *dst, const uint16_t *x, float alpha, size_t n);
void ak_f16_axpy__ref(uint16_t *y, float alpha, const uint16_t *x, size_t n);
double ak_f16_sum__ref(const uint16_t *x, size_t n);

void ak_bf16_add__ref(uint16_t *dst, const uint16_t *a, const uint16_t *b, size_t n);
void ak_bf16_scale__ref(uint16_t *dst, const uint16_t *x, float alpha, size_t n);
void ak_bf16_axpy__ref(uint16_t *y, float alpha, const uint16_t *x, size_t n);
double ak_bf16_sum__ref(const uint16_t *x, size_t n);

#endif /* AK_KERNELS_REF_VEC_REF_H */
