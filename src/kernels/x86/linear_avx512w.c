/* AVX-512 linear-layer kernels for cores that run 512-bit operations at full width (Zen 5,
 * Intel; table "avx512w", chosen by the CPU family, AK_CPU_FAMILY): linear_avx512.c's
 * Q8_0/Q4_0 kernels, except that 16 tokens or more take the 512-bit lane tiles of
 * kernels/linear_x86.h (lx_quant_lanes_wide). Everything else is avx512's. */
#pragma GCC target("avx512vnni")
#include "kernels/dispatch.h"

#define LX_FLOAT_C 6
#define LX_QUANT_C 3
#define LX_ISA avx512w
#define LX_VNNI 1
#define LX_WIDE 1
#include "kernels/linear_x86.h"
