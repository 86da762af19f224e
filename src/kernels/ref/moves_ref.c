/* Scalar references of the ONNX engine's data-movement kernels (kf_infer.h): a band of
 * a 32-bit transpose and the stride-2 gather of implicit GEMM's packing. Bits move
 * unchanged (integer copies). */
#include "kernels/dispatch.h"

void ak_f32_transpose32_band__ref(uint32_t *dst, const uint32_t *src, int64_t na, int64_t ib0,
                                  int64_t ib1, int64_t sa, int64_t dsb) {
    for (int64_t ib = ib0; ib < ib1; ib++)
        for (int64_t ia = 0; ia < na; ia++) dst[ib * dsb + ia] = src[ib + ia * sa];
}

void ak_f32_gather_even16__ref(const float *src, float *dst) {
    for (int j = 0; j < 16; j++) dst[j] = src[2 * j];
}
