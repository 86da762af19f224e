/* AVX2+FMA+F16C linear-layer kernels (ak_linear) and the avx2 dispatch entry: the tile
 * bodies of kernels/linear_x86.h sized for 16 ymm registers (4 rows × 2 tokens), Q8_0
 * and Q4_0 dot products with maddubs. */
#include "kernels/dispatch.h"

#define LX_FLOAT_C 2
#define LX_QUANT_C 2
#define LX_VNNI 0
#include "kernels/linear_x86.h"

void ak__fill_linear_avx2(ak__kernels *k) {
    k->linear[AK__LIN_F32] = lx_linear_f32;
    k->linear[AK__LIN_F16] = lx_linear_f16;
    k->linear[AK__LIN_BF16] = lx_linear_bf16;
    k->linear[AK__LIN_Q8_0] = lx_linear_q8_0;
    k->linear[AK__LIN_Q4_0] = lx_linear_q4_0;
    k->linear_quantize_x = lx_quantize_x;
}
