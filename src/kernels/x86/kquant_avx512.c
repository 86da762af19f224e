/* AVX512-VNNI kernels of the super-block weight types (kernels/x86/kquant_x86.h on
 * 256-bit vectors, as the other AVX-512 linear kernels: Zen 4 splits 512-bit operations):
 * vpdpwssd accumulates the scaled group sums, vpdpbusd IQ4_NL's byte products. */
#pragma GCC target("avx512vnni")
#define KQ_VNNI 1
#define KQ_ISA avx512
#include "kernels/x86/kquant_x86.h"
