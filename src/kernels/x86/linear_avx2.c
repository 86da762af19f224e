/* AVX2+FMA+F16C linear-layer kernels (ak_linear) and the avx2 dispatch entry. */
#include <immintrin.h>

#include "kernels/dispatch.h"
#include "kernels/linear.h"

void ak__fill_linear_avx2(ak__kernels *k) {
    (void)k; /* the references until the vector kernels land */
}
