/* accelkit compute kernels: the public entry points over the dispatch table.
 *
 * Each call validates its arguments (NULL, sizes, leading dimensions) and then runs the
 * variant chosen once at start-up for this CPU (AK_ISA overrides). The portable scalar
 * references behind them are the test oracle. f16 and bf16 are stored as uint16_t bit
 * patterns; arithmetic on them accumulates in f32 and rounds to nearest even once. */
#ifndef ACCELKIT_KERNELS_H
#define ACCELKIT_KERNELS_H

#include "ak.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ak_dtype {
    AK_DTYPE_F32 = 0,
    AK_DTYPE_F16 = 1,
    AK_DTYPE_BF16 = 2,
    AK_DTYPE_F64 = 3,
    AK_DTYPE_I8 = 4,
    AK_DTYPE_U8 = 5,
    AK_DTYPE_I32 = 6,
    AK_DTYPE_I64 = 7,
    AK_DTYPE_COUNT_
} ak_dtype;

/* Reduction operators of the collectives. AVG is SUM followed by ak_reduce_avg_finish. */
typedef enum ak_reduce_op {
    AK_REDUCE_SUM = 0,
    AK_REDUCE_PROD = 1,
    AK_REDUCE_MIN = 2,
    AK_REDUCE_MAX = 3,
    AK_REDUCE_AVG = 4,
    AK_REDUCE_COUNT_
} ak_reduce_op;

AK_API const char *ak_dtype_name(ak_dtype dtype);
AK_API ak_status ak_dtype_size(ak_dtype dtype, size_t *out);

/* ---- elementwise ------------------------------------------------------------------
 * dtype applies to every buffer; pointers must be aligned to the element size. dst may
 * be exactly the same buffer as any input (in place); any other overlap is rejected.
 * add/scale/axpy are bit-identical on every CPU and ISA: f16/bf16 are widened to f32,
 * computed and rounded once; axpy rounds once (fused multiply-add). Large out-of-place
 * calls may write with non-temporal stores. sum depends on the ISA's summation order. */

/* dst[i] = a[i] + b[i] */
AK_API ak_status ak_vec_add(ak_dtype dtype, void *dst, const void *a, const void *b, size_t n);
/* dst[i] = alpha * x[i] */
AK_API ak_status ak_vec_scale(ak_dtype dtype, void *dst, const void *x, float alpha, size_t n);
/* y[i] += alpha * x[i] */
AK_API ak_status ak_vec_axpy(ak_dtype dtype, void *y, float alpha, const void *x, size_t n);
/* *out = sum of x[i], accumulated in f32 lanes (f64 for the final combine) */
AK_API ak_status ak_vec_sum(ak_dtype dtype, const void *x, size_t n, double *out);

/* ---- reductions for collectives -----------------------------------------------------
 * Every dtype (f16/bf16 computed in f32 and rounded once; integers wrap like C unsigned
 * arithmetic; min/max of a NaN give NaN). dst may equal a or b exactly. */

/* dst[i] = a[i] op b[i]; op AVG behaves as SUM. */
AK_API ak_status ak_reduce(ak_reduce_op op, ak_dtype dtype, void *dst, const void *a,
                           const void *b, size_t n);
/* buf[i] /= divisor: floats multiply by 1/divisor (f16/bf16 via f32), integers divide
 * truncating toward zero. divisor ≥ 1. */
AK_API ak_status ak_reduce_avg_finish(ak_dtype dtype, void *buf, size_t n, int divisor);
AK_API const char *ak_reduce_op_name(ak_reduce_op op);

/* ---- conversions (round to nearest even; NaN stays NaN, quieted; src and dst must not
 * overlap) -------------------------------------------------------------------------- */

AK_API ak_status ak_f32_to_f16(uint16_t *dst, const float *src, size_t n);
AK_API ak_status ak_f16_to_f32(float *dst, const uint16_t *src, size_t n);
AK_API ak_status ak_f32_to_bf16(uint16_t *dst, const float *src, size_t n);
AK_API ak_status ak_bf16_to_f32(float *dst, const uint16_t *src, size_t n);

/* ---- SGEMM ----------------------------------------------------------------------- */

typedef enum ak_trans { AK_NO_TRANS = 0, AK_TRANS = 1 } ak_trans;

/* Row-major C(M,N) = alpha * op(A)(M,K) · op(B)(K,N) + beta * C.
 * op(A) is A (lda ≥ K) or Aᵀ with A stored (K,M) (lda ≥ M); likewise B (ldb ≥ N or ≥ K).
 * ldc ≥ N. beta = 0 ignores the previous content of C (NaN in C does not propagate).
 * pool NULL = the global pool (AK_NUM_THREADS). M, N or K may be 0. */
AK_API ak_status ak_sgemm(ak_trans trans_a, ak_trans trans_b, size_t M, size_t N, size_t K,
                          float alpha, const float *A, size_t lda, const float *B, size_t ldb,
                          float beta, float *C, size_t ldc, ak_threadpool *pool);

/* ---- linear layers over stored weights (LLM matmul/GEMV) ------------------------------ */

/* Storage types of weight matrices. The numbers are ggml's, so a GGUF tensor's type maps
 * directly. Q8_0: blocks of 32 = {f16 scale d; int8 q[32]}, x = d·q (34 bytes). Q4_0:
 * blocks of 32 = {f16 d; uint8 qs[16]}, element j < 16 = d·((qs[j] & 15) − 8), element
 * j + 16 = d·((qs[j] >> 4) − 8) (18 bytes). The k-quants Q2_K…Q6_K and Q8_K and IQ4_XS
 * are super-blocks of 256 with sub-block scales, IQ4_NL blocks of 32 on 16 non-linear
 * levels, all in ggml's layouts (docs/llm-models.md has the table). */
typedef enum ak_wtype {
    AK_WTYPE_F32 = 0,
    AK_WTYPE_F16 = 1,
    AK_WTYPE_Q4_0 = 2,
    AK_WTYPE_Q8_0 = 8,
    AK_WTYPE_Q2_K = 10,
    AK_WTYPE_Q3_K = 11,
    AK_WTYPE_Q4_K = 12,
    AK_WTYPE_Q5_K = 13,
    AK_WTYPE_Q6_K = 14,
    AK_WTYPE_Q8_K = 15,
    AK_WTYPE_IQ4_NL = 20,
    AK_WTYPE_IQ4_XS = 23,
    AK_WTYPE_BF16 = 30
} ak_wtype;

AK_API const char *ak_wtype_name(ak_wtype wtype);
/* Bytes of one row of K elements; AK_ERR_INVALID_ARG if K is not a multiple of the block. */
AK_API ak_status ak_wtype_row_bytes(ak_wtype wtype, size_t K, size_t *bytes);
/* f32 → storage (round to nearest; quantized types choose d = max|x|/127 or /−8 as ggml;
 * the super-block types run ggml's reference quantizers, bit for bit). */
AK_API ak_status ak_quantize_row(ak_wtype wtype, const float *src, void *dst, size_t K);
AK_API ak_status ak_dequantize_row(ak_wtype wtype, const void *src, float *dst, size_t K);

/* A linear layer: Y[t][n] (=, or += when `accumulate`) Σ_k X[t][k]·W[n][k] for t < T,
 * n < N. W holds N rows of K elements in `wtype` storage, row n at n·row_bytes. X rows
 * have stride ldx ≥ K, Y rows ldy ≥ N. For Q8_0/Q4_0/IQ4_NL the activations are quantized
 * to Q8_0 per block of 32 first, for the other super-block types to Q8_K per block of 256
 * (the int8 dot products of llama.cpp). T = 1 is a
 * bandwidth-bound GEMV; larger T reuses every weight row across tokens. pool NULL =
 * the global pool. Steady-state calls allocate nothing. */
AK_API ak_status ak_linear(ak_wtype wtype, const void *W, size_t N, size_t K, const float *X,
                           size_t ldx, size_t T, float *Y, size_t ldy, int accumulate,
                           ak_threadpool *pool);

/* One weight matrix of ak_linear_multi and where its outputs go. */
typedef struct ak_linear_out {
    const void *W; /* N rows of K elements */
    size_t N;
    float *Y;      /* (T, N), row stride ldy ≥ N */
    size_t ldy;
} ak_linear_out;

/* Several linear layers of one input, e.g. a transformer's Q, K and V projections: as
 * ak_linear for each of outs[0..n_outs), all in `wtype` storage, but with the
 * activations quantized once and the rows of all matrices split over the pool in one
 * parallel region (one wake-up of the workers instead of one per matrix). */
AK_API ak_status ak_linear_multi(ak_wtype wtype, size_t K, const float *X, size_t ldx, size_t T,
                                 const ak_linear_out *outs, size_t n_outs, int accumulate,
                                 ak_threadpool *pool);

/* ---- machine limits (for benchmarks and ak sysinfo) ---------------------------------- */

/* FP32 FMA peak of one core in GFLOP/s, measured with independent FMA chains for about
 * `millis` ms using the active ISA. */
AK_API ak_status ak_measure_fma_peak(int millis, double *gflops);
/* Single-thread memcpy bandwidth in GB/s of traffic (bytes read + bytes written) over
 * buffers of `bytes` each; median of repeated copies. */
AK_API ak_status ak_measure_memcpy(size_t bytes, double *gbytes_per_s);
/* Streaming read bandwidth in GB/s of all threads of `pool` (NULL = the global pool)
 * reading disjoint slices of a `bytes` buffer; median of repeated passes. */
AK_API ak_status ak_measure_read_bandwidth(size_t bytes, ak_threadpool *pool,
                                           double *gbytes_per_s);

#ifdef __cplusplus
}
#endif
#endif /* ACCELKIT_KERNELS_H */
