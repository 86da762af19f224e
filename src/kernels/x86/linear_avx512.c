/* AVX-512 linear-layer kernels (ak_linear): the tile
 * bodies of kernels/linear_x86.h with the 32 ymm registers of AVX-512VL (float tiles of
 * 4 rows × 6 tokens) and, where the CPU has AVX512-VNNI, Q8_0/Q4_0 dot products with
 * vpdpbusd. 256-bit vectors throughout: Zen 4 splits 512-bit operations in two, so they
 * would bring no more work per cycle, only fewer registers' worth of tiles. */
#pragma GCC target("avx512vnni")
#include "kernels/dispatch.h"

#define LX_FLOAT_C 6
#define LX_QUANT_C 3
#define LX_ISA avx512
#define LX_VNNI 1
#include "kernels/linear_x86.h"

