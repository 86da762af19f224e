/* AVX-512 linear-layer kernels (ak_linear) and the avx512 dispatch entry. */
#include <immintrin.h>

#include "kernels/dispatch.h"
#include "kernels/linear.h"

void ak__fill_linear_avx512(ak__kernels *k) {
    ak__fill_linear_avx2(k);
}
