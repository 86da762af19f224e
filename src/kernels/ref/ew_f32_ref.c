/* The reference float32 elementwise kernels of the ONNX engine (kf_infer.h): the
 * vector-extension bodies of kernels/ref/ew_f32_body.h at the baseline ISA's 16 bytes. */
#include <stdint.h>
#include <string.h>

#include "kernels/dispatch.h"

/* helpers must inline into each loop so the op switch folds away */
#define EW_INLINE static inline __attribute__((always_inline))
#define EW_SFX(name) name##_base
#define EW_VBYTES 16
#include "kernels/ref/ew_f32_body.h"

void ak_f32_ew_unary__ref(ak__ew_f32_un op, float *dst, const float *src, size_t n, float a,
                          float b) {
    ew_f32_unary_base(op, dst, src, n, a, b);
}

void ak_f32_ew_binary__ref(ak__ew_f32_bin op, float *dst, const float *a, const float *b,
                           size_t n, int sa, int sb) {
    ew_f32_binary_base(op, dst, a, b, n, sa, sb);
}
