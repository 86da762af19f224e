/* Portable SGEMM microkernel (4×8, plain C), its blocked-driver configuration and the
 * generic SGEMM entry.
 *
 * Written as fixed-size loops over a small accumulator array so that gcc -O3 unrolls them
 * and keeps the 4×8 tile in 8 SSE2 registers (plus 2 for B and 4 broadcasts of A):
 * the baseline x86-64 ISA has 16 xmm registers, and gcc spilled a 6×8 tile to the stack. */
#include "kernels/dispatch.h"
#include "kernels/gemm.h"

#define MR 4
#define NR 8

void ak_f32_gemm_ukernel_4x8__generic(size_t k, float alpha, const float *Ap, const float *Bp,
                                      float beta, float *C, size_t ldc, size_t m, size_t n) {
    float acc[MR][NR] = {{0.0f}};
    for (size_t p = 0; p < k; p++, Ap += MR, Bp += NR)
        for (int r = 0; r < MR; r++)
            for (int c = 0; c < NR; c++) acc[r][c] += Ap[r] * Bp[c];
    ak__sgemm_store_edge(&acc[0][0], NR, alpha, beta, C, ldc, m, n);
}

const ak__gemm_config ak_f32_gemm_config__generic = {
    .ukernel = ak_f32_gemm_ukernel_4x8__generic,
    .mr = MR, .nr = NR,
    .kc = 256, .mc = 128, .nc = 2048, /* B sliver 8 KB (L1), A block 128 KB (L2) */
};

void ak_f32_gemm__generic(int trans_a, int trans_b, size_t M, size_t N, size_t K, float alpha,
    const float *A, size_t lda, const float *B, size_t ldb, float beta, float *C, size_t ldc,
    ak_threadpool *pool) {
    ak__sgemm_blocked(&ak_f32_gemm_config__generic, trans_a, trans_b, M, N, K, alpha, A, lda, B,
                      ldb, beta, C, ldc, pool);
}

