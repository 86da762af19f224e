/* AVX-512 linear-layer kernels (ak_linear) and the avx512 dispatch entry: the tile
 * bodies of kernels/linear_x86.h with the 32 ymm registers of AVX-512VL (float tiles of
 * 4 rows × 6 tokens) and, where the CPU has AVX512-VNNI, Q8_0/Q4_0 dot products with
 * vpdpbusd. 256-bit vectors throughout: Zen 4 splits 512-bit operations in two, so they
 * would bring no more work per cycle, only fewer registers' worth of tiles. */
#pragma GCC target("avx512vnni")
#include "kernels/dispatch.h"

#define LX_FLOAT_C 6
#define LX_QUANT_C 3
#define LX_VNNI 1
#include "kernels/linear_x86.h"

void ak__fill_linear_avx512(ak__kernels *k) {
    ak__fill_linear_avx2(k);
    k->linear[AK__LIN_F32] = lx_linear_f32;
    k->linear[AK__LIN_F16] = lx_linear_f16;
    k->linear[AK__LIN_BF16] = lx_linear_bf16;
    k->linear_quantize_x = lx_quantize_x;
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512vnni")) {
        k->linear[AK__LIN_Q8_0] = lx_linear_q8_0;
        k->linear[AK__LIN_Q4_0] = lx_linear_q4_0;
    }
}
