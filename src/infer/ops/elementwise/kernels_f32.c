/* float32 elementwise kernels: elementwise/kernels_f32_impl.h compiled for the SSE2 baseline and,
 * on x86-64, for AVX2; the AVX2 copy runs when the active ISA allows it (AK_ISA). */
#include <stdint.h>
#include <string.h>

#include "accelkit/kernels.h"
#include "core/half.h"
#include "core/init.h"
#include "infer/ops/elementwise/elementwise.h"

/* helpers must inline into each loop so the op switch folds away */
#define EW_INLINE static inline __attribute__((always_inline))

#define EW_SFX(name) name##_base
#define EW_VBYTES 16
#include "infer/ops/elementwise/kernels_f32_impl.h"
#undef EW_SFX
#undef EW_VBYTES

#if defined(__x86_64__) && defined(__GNUC__)
#define EW_HAVE_AVX2 1
#pragma GCC push_options
#pragma GCC target("avx2")
#define EW_SFX(name) name##_avx2
#define EW_VBYTES 32
#include "infer/ops/elementwise/kernels_f32_impl.h"
#undef EW_SFX
#undef EW_VBYTES
#pragma GCC pop_options
#endif

/* 1 when the AVX2 copy may run; decided once (the active ISA is set at ak_init). */
static int use_avx2(void) {
#ifdef EW_HAVE_AVX2
    return ak__cpu_active_avx2();
#else
    return 0;
#endif
}

void ew_f32_binary(ew_f32_bin op, float *dst, const float *a, const float *b, size_t n,
                   int sa, int sb) {
#ifdef EW_HAVE_AVX2
    if (use_avx2()) {
        ew_f32_binary_avx2(op, dst, a, b, n, sa, sb);
        return;
    }
#endif
    ew_f32_binary_base(op, dst, a, b, n, sa, sb);
}

void ew_f32_unary(ew_f32_un op, float *dst, const float *src, size_t n, float a, float b) {
#ifdef EW_HAVE_AVX2
    if (use_avx2()) {
        ew_f32_unary_avx2(op, dst, src, n, a, b);
        return;
    }
#endif
    ew_f32_unary_base(op, dst, src, n, a, b);
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
