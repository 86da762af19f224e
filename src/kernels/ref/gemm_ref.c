/* Scalar reference SGEMM: the test oracle and the AK_KERNELS=ref implementation.
 * Plain loops with double accumulation, so its own rounding error is negligible next to
 * the optimized variants it checks. */
#include "kernels/dispatch.h"
#include "kernels/gemm.h"

/* op(A)[i][p]: A is (M,K) row-major, or (K,M) when transposed. */
static float a_at(int trans, const float *A, size_t lda, size_t i, size_t p) {
    return trans ? A[p * lda + i] : A[i * lda + p];
}

/* op(B)[p][j]: B is (K,N) row-major, or (N,K) when transposed. */
static float b_at(int trans, const float *B, size_t ldb, size_t p, size_t j) {
    return trans ? B[j * ldb + p] : B[p * ldb + j];
}

void ak_f32_gemm__ref(int trans_a, int trans_b, size_t M, size_t N, size_t K, float alpha,
                   const float *A, size_t lda, const float *B, size_t ldb, float beta,
                   float *C, size_t ldc, ak_threadpool *pool) {
    (void)pool; /* the oracle stays single-threaded and simple */
    for (size_t i = 0; i < M; i++) {
        for (size_t j = 0; j < N; j++) {
            double acc = 0.0;
            for (size_t p = 0; p < K; p++)
                acc += (double)a_at(trans_a, A, lda, i, p) * (double)b_at(trans_b, B, ldb, p, j);
            double out = (double)alpha * acc;
            /* beta == 0 must not read C: NaN or garbage there must not propagate */
            if (beta != 0.0f) out += (double)beta * (double)C[i * ldc + j];
            C[i * ldc + j] = (float)out;
        }
    }
}

