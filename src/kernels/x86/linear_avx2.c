/* AVX2+FMA+F16C linear-layer kernels (ak_linear): the tile
 * bodies of kernels/linear_x86.h sized for 16 ymm registers (4 rows × 2 tokens), Q8_0
 * and Q4_0 dot products with maddubs. */
#include "kernels/dispatch.h"

#define LX_FLOAT_C 2
#define LX_QUANT_C 2
#define LX_ISA avx2
#define LX_VNNI 0
#include "kernels/linear_x86.h"

