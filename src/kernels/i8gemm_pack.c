/* Packing of the int8 GEMM's B operand into the panel layout of kernels/kf_int8.h, shared
 * by every ISA variant of ak__kf_u8s8_gemm (one packed weight serves whichever runs). */
#include <string.h>

#include "kernels/kf_int8.h"

void ak__i8_pack_b(const void *B, int flip_u8, size_t K, size_t N, size_t rs, size_t cs,
                   int8_t *Bp, int32_t *colsum) {
    size_t k4 = (K + AK_KF_I8_KG - 1) / AK_KF_I8_KG;
    memset(Bp, 0, ak__i8_packed_bytes(K, N));
    const uint8_t *src = B;
    for (size_t n = 0; n < N; n++) {
        size_t p = n / AK_KF_I8_NR, j = n % AK_KF_I8_NR;
        int32_t sum = 0;
        for (size_t k = 0; k < K; k++) {
            uint8_t raw = src[k * rs + n * cs];
            /* u8 − 128 is the top bit flipped, read as int8 */
            int8_t v = (int8_t)(flip_u8 ? (uint8_t)(raw ^ 0x80u) : raw);
            size_t g = k / AK_KF_I8_KG;
            Bp[((p * k4 + g) * AK_KF_I8_NR + j) * AK_KF_I8_KG + k % AK_KF_I8_KG] = v;
            sum += v;
        }
        if (colsum) colsum[n] = sum;
    }
}
