/* float32 elementwise calls of the operators: the kernel table's ak_f32_ew_binary and
 * ak_f32_ew_unary (kernels/kf_infer.h; the active variant, AK_ISA / AK_KERNELS), and the
 * 16-bit float conversions through the public converters. */
#include <stdint.h>
#include <string.h>

#include "accelkit/kernels.h"
#include "core/half.h"
#include "infer/ops/elementwise/elementwise.h"
#include "kernels/dispatch.h"

void ew_f32_binary(ak__ew_f32_bin op, float *dst, const float *a, const float *b, size_t n,
                   int sa, int sb) {
    ak__kernels_active()->f32_ew_binary(op, dst, a, b, n, sa, sb);
}

void ew_f32_unary(ak__ew_f32_un op, float *dst, const float *src, size_t n, float a, float b) {
    ak__kernels_active()->f32_ew_unary(op, dst, src, n, a, b);
}

/* The kernels only fail on bad arguments (overlap, NULL); the scalar loops stand in. */
void ew_half_to_f32(float *dst, const uint16_t *src, size_t n, ak_elem_type t) {
    ak_status st = t == AK_ELEM_F16 ? ak_f16_to_f32(dst, src, n) : ak_bf16_to_f32(dst, src, n);
    if (st == AK_OK) return;
    for (size_t i = 0; i < n; i++)
        dst[i] = t == AK_ELEM_F16 ? ak__f16_to_f32_ref(src[i]) : ak__bf16_to_f32_ref(src[i]);
}

void ew_f32_to_half(uint16_t *dst, const float *src, size_t n, ak_elem_type t) {
    ak_status st = t == AK_ELEM_F16 ? ak_f32_to_f16(dst, src, n) : ak_f32_to_bf16(dst, src, n);
    if (st == AK_OK) return;
    for (size_t i = 0; i < n; i++)
        dst[i] = t == AK_ELEM_F16 ? ak__f32_to_f16_ref(src[i]) : ak__f32_to_bf16_ref(src[i]);
}
