/* The blocked SGEMM driver shared by every ISA variant (Goto/BLIS loop nest).
 *
 * A variant describes its microkernel and tuned block sizes in an ak__gemm_config and
 * passes it to ak__sgemm_blocked from a thin wrapper that matches the dispatch table's
 * sgemm signature. The driver packs op(B) into NR-wide and op(A) into MR-tall zero-padded
 * slivers (transposes are absorbed there), so the microkernel only ever sees packed,
 * k-major panels. */
#ifndef AK_KERNELS_GEMM_H
#define AK_KERNELS_GEMM_H

#include <stddef.h>

#include "kernels/dispatch.h"

typedef struct ak__gemm_config {
    ak__sgemm_ukernel_fn ukernel;
    ak__sgemm_ukernel_epi_fn ukernel_epi; /* or NULL */
    int mr, nr;     /* microkernel tile; nr a multiple of 8 keeps packed B rows aligned */
    int kc, mc, nc; /* tuned defaults, overridden by AK_GEMM_KC/MC/NC when those are set */
} ak__gemm_config;

/* C(M,N) = alpha·op(A)·op(B) + beta·C with arguments already validated (see ak_sgemm).
 * pool NULL = the global pool. Packing buffers are cached per thread and reused. */
void ak__sgemm_blocked(const ak__gemm_config *cfg, int trans_a, int trans_b, size_t M,
                       size_t N, size_t K, float alpha, const float *A, size_t lda,
                       const float *B, size_t ldb, float beta, float *C, size_t ldc,
                       ak_threadpool *pool);

/* Called on each finished tile of C (rows [row, row+m) × columns [col, col+n) of the
 * whole C, at c with stride ldc) right after its last depth slice, while the tile is
 * still in L1: a caller's bias, residual and activation without another pass over C. */
typedef struct ak__gemm_epilogue {
    void (*fn)(void *ctx, float *c, size_t ldc, size_t row, size_t col, size_t m, size_t n);
    void *ctx;
    /* When not NULL, the same finish in a form the microkernel applies in registers to
     * full tiles (fn then only sees edge tiles): bias indexed by C's row, col_bias by C's
     * column, z laid out like C (same origin and ldc). Only with alpha = 1. */
    const ak__sgemm_tile_epi *fused;
} ak__gemm_epilogue;
/* ak__sgemm_blocked with an epilogue (epi may be NULL). */
void ak__sgemm_blocked_epi(const ak__gemm_config *cfg, int trans_a, int trans_b, size_t M,
                           size_t N, size_t K, float alpha, const float *A, size_t lda,
                           const float *B, size_t ldb, float beta, float *C, size_t ldc,
                           ak_threadpool *pool, const ak__gemm_epilogue *epi);
/* Writes the valid m×n part of an accumulated tile (row stride ld_tile) to C as
 * alpha·tile + beta·C; beta == 0 does not read C. Microkernels use it on edge tiles. */
void ak__sgemm_store_edge(const float *tile, size_t ld_tile, float alpha, float beta,
                          float *C, size_t ldc, size_t m, size_t n);

/* Microkernels (see ak__sgemm_ukernel_fn in dispatch.h). */
void ak_f32_gemm_ukernel_4x8__generic(size_t k, float alpha, const float *Ap, const float *Bp,
                                      float beta, float *C, size_t ldc, size_t m, size_t n);
void ak_f32_gemm_ukernel_6x16__avx2(size_t k, float alpha, const float *Ap, const float *Bp,
                                    float beta, float *C, size_t ldc, size_t m, size_t n);
void ak_f32_gemm_ukernel_6x16_epi__avx2(size_t k, const float *Ap, const float *Bp, float beta,
                                        float *C, size_t ldc, const ak__sgemm_tile_epi *epi);
void ak_f32_gemm_ukernel_8x16__avx512(size_t k, float alpha, const float *Ap, const float *Bp,
                                      float beta, float *C, size_t ldc, size_t m, size_t n);
void ak_f32_gemm_ukernel_8x16_epi__avx512(size_t k, const float *Ap, const float *Bp, float beta,
                                          float *C, size_t ldc, const ak__sgemm_tile_epi *epi);
void ak_f32_gemm_ukernel_16x16__avx512w(size_t k, float alpha, const float *Ap, const float *Bp,
                                        float beta, float *C, size_t ldc, size_t m, size_t n);
void ak_f32_gemm_ukernel_16x16_epi__avx512w(size_t k, const float *Ap, const float *Bp,
                                            float beta, float *C, size_t ldc,
                                            const ak__sgemm_tile_epi *epi);

/* The scalar reference (kernels/ref/gemm_ref.c), also used by tests as the oracle. */
void ak_f32_gemm__ref(int trans_a, int trans_b, size_t M, size_t N, size_t K, float alpha,
                   const float *A, size_t lda, const float *B, size_t ldb, float beta,
                   float *C, size_t ldc, ak_threadpool *pool);

#endif /* AK_KERNELS_GEMM_H */
