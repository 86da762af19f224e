/* Scalar reference bulk conversions f32 <-> f16 / bf16: loops over core/half.h, the
 * oracle for the vector variants (and what AK_KERNELS=ref runs). */
#include "core/half.h"
#include "kernels/dispatch.h"

void ak_f32_to_f16__ref(uint16_t *dst, const float *src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = ak__f32_to_f16_ref(src[i]);
}

void ak_f16_to_f32__ref(float *dst, const uint16_t *src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = ak__f16_to_f32_ref(src[i]);
}

void ak_f32_to_bf16__ref(uint16_t *dst, const float *src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = ak__f32_to_bf16_ref(src[i]);
}

void ak_bf16_to_f32__ref(float *dst, const uint16_t *src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = ak__bf16_to_f32_ref(src[i]);
}

