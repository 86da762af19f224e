/* AVX2 float32 elementwise kernels of the ONNX engine (kf_infer.h): the bodies of
 * kernels/ref/ew_f32_body.h at 32 bytes, bit-identical to the references. */
#include <stdint.h>
#include <string.h>

#include "kernels/dispatch.h"

#define EW_INLINE static inline __attribute__((always_inline))
#define EW_SFX(name) name##_avx2
#define EW_VBYTES 32
#include "kernels/ref/ew_f32_body.h"

void ak_f32_ew_unary__avx2(ak__ew_f32_un op, float *dst, const float *src, size_t n, float a,
                           float b) {
    ew_f32_unary_avx2(op, dst, src, n, a, b);
}

void ak_f32_ew_binary__avx2(ak__ew_f32_bin op, float *dst, const float *a, const float *b,
                            size_t n, int sa, int sb) {
    ew_f32_binary_avx2(op, dst, a, b, n, sa, sb);
}
