/* Scalar reference of the int8 GEMM (kernels/kf_int8.h): C = A(uint8)·B(int8, packed) in
 * int32. It defines the result every variant must reproduce bit for bit: the exact sum
 * of the products, wrapping modulo 2^32 as the vector instructions do when K is beyond
 * the range where int32 cannot overflow. */
#include "kernels/dispatch.h"

void ak_u8s8_gemm__ref(size_t M, size_t N, size_t K, const uint8_t *A, size_t lda,
                       const int8_t *Bp, int32_t *C, size_t ldc) {
    size_t k4 = (K + AK_KF_I8_KG - 1) / AK_KF_I8_KG;
    for (size_t m = 0; m < M; m++)
        for (size_t n = 0; n < N; n++) {
            const int8_t *panel = Bp + (n / AK_KF_I8_NR) * k4 * AK_KF_I8_NR * AK_KF_I8_KG;
            size_t j = n % AK_KF_I8_NR;
            uint32_t acc = 0; /* unsigned: wraps where the hardware's int32 lanes wrap */
            for (size_t k = 0; k < K; k++) {
                int32_t b = panel[((k / AK_KF_I8_KG) * AK_KF_I8_NR + j) * AK_KF_I8_KG +
                                  k % AK_KF_I8_KG];
                acc += (uint32_t)((int32_t)A[m * lda + k] * b);
            }
            C[m * ldc + n] = (int32_t)acc;
        }
}
