/* AVX-512 SGEMM for cores that run zmm FMAs at full width (table avx512w: Zen 5, Intel):
 * the microkernel of kernels/x86/gemm_avx512.h with 16 rows. Two FMAs per cycle of 4
 * cycles' latency need 8 independent accumulators in flight: the 8×16 tile has exactly
 * 8, so any late load stalls it (71 % of the FMA peak at 1024³ on a Zen 5); 16 rows
 * leave slack. */
#define MR 16
#define GA_UKERNEL ak_f32_gemm_ukernel_16x16__avx512w
#define GA_UKERNEL_EPI ak_f32_gemm_ukernel_16x16_epi__avx512w
#include "kernels/x86/gemm_avx512.h"

/* As avx512's configuration, with MC a multiple of 16. */
const ak__gemm_config ak_f32_gemm_config__avx512w = {
    .ukernel = GA_UKERNEL,
    .ukernel_epi = GA_UKERNEL_EPI,
    .mr = MR, .nr = NR,
    .kc = 256, .mc = 128, .nc = 4096,
};

void ak_f32_gemm__avx512w(int trans_a, int trans_b, size_t M, size_t N, size_t K, float alpha,
    const float *A, size_t lda, const float *B, size_t ldb, float beta, float *C, size_t ldc,
    ak_threadpool *pool) {
    ak__sgemm_blocked(&ak_f32_gemm_config__avx512w, trans_a, trans_b, M, N, K, alpha, A, lda, B,
                      ldb, beta, C, ldc, pool);
}
