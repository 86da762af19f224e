/* AVX512-VNNI kernels of Q4_K and Q6_K for cores that run 512-bit operations at full width
 * (table avx512w: Zen 5, Intel): kernels/x86/kquant_x86.h with 8 tokens per zmm at T >= 8
 * (kq_linear_wide); the other types and token counts as kquant_avx512.c. */
#pragma GCC target("avx512vnni")
#define KQ_VNNI 1
#define KQ_WIDE 1
#define KQ_ISA avx512w
#include "kernels/x86/kquant_x86.h"
