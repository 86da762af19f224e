/* AVX-512 SGEMM dispatch entry.
 *
 * No AVX-512 microkernel yet: this fills the table with the AVX2 6×16 kernel, which already
 * runs at the FMA peak's level on Zen 4 (where 512-bit FMAs are double-pumped, so zmm
 * gives no more flops per cycle than ymm). */
#include "kernels/dispatch.h"

void ak__fill_gemm_avx512(ak__kernels *k) {
    ak__fill_gemm_avx2(k);
}
