/* expf for loops the compiler vectorizes: Cody–Waite range reduction x = n·ln2 + r,
 * a degree-6 polynomial for e^r on |r| ≤ ln2/2 and 2^n built in the exponent bits.
 * Relative error below 3e-7 over [-87, 88] (measured against double exp on a fine grid);
 * inputs below -87 give e^-87, above 88 saturate, NaN gives NaN. The LLM kernels' softmax and SwiGLU
 * (kernels/ref/llm_ref.c, and lane for lane kernels/x86/llm_avx2.c) use it. */
#ifndef AK_KERNELS_EXP_APPROX_H
#define AK_KERNELS_EXP_APPROX_H

#include <stdint.h>
#include <string.h>


static inline float ak__exp_approx(float x) {
    x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
    /* round to nearest by the 1.5·2^23 trick: plain adds, so every SIMD level vectorizes it */
    float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = x - n * 0.693359375f + n * 2.12194440e-4f;
    float p = 1.0f / 720;
    p = p * r + 1.0f / 120;
    p = p * r + 1.0f / 24;
    p = p * r + 1.0f / 6;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    /* a NaN x leaves n NaN, whose conversion to int is undefined: convert 0 instead (p is
     * NaN already, so the result stays NaN); a select, so the loop still vectorizes */
    int32_t bits = ((int32_t)(n == n ? n : 0.0f) + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

#endif /* AK_KERNELS_EXP_APPROX_H */
