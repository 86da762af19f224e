/* AVX-512 SGEMM microkernel (8×16, kernels/x86/gemm_avx512.h), its configuration and the
 * avx512 SGEMM entry. Zen 4 splits a zmm FMA over its two 256-bit pipes, so the FLOP peak
 * is that of the AVX2 6×16 kernel; what it saves is load and instruction slots: MR + 1
 * loads per MR zmm FMAs against 8 per 6 zmm-equivalents there, which measured 8–15 %
 * more GFLOP/s on the inference shapes. */
#define MR 8
#define GA_UKERNEL ak_f32_gemm_ukernel_8x16__avx512
#define GA_UKERNEL_EPI ak_f32_gemm_ukernel_8x16_epi__avx512
#include "kernels/x86/gemm_avx512.h"

/* As the AVX2 configuration (its comment has the cache reasoning), with MC a multiple
 * of 8. */
const ak__gemm_config ak_f32_gemm_config__avx512 = {
    .ukernel = GA_UKERNEL,
    .ukernel_epi = GA_UKERNEL_EPI,
    .mr = MR, .nr = NR,
    .kc = 256, .mc = 128, .nc = 4096,
};

void ak_f32_gemm__avx512(int trans_a, int trans_b, size_t M, size_t N, size_t K, float alpha,
    const float *A, size_t lda, const float *B, size_t ldb, float beta, float *C, size_t ldc,
    ak_threadpool *pool) {
    ak__sgemm_blocked(&ak_f32_gemm_config__avx512, trans_a, trans_b, M, N, K, alpha, A, lda, B,
                      ldb, beta, C, ldc, pool);
}
