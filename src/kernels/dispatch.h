/* The kernel dispatch table: one function pointer per kernel, filled once by ak_init for
 * the active ISA (AK_ISA) or with the scalar references (AK_KERNELS=ref).
 *
 * Adding a kernel: a reference in kernels/ref/, ISA variants in kernels/x86/, a member
 * here, and a line in each fill function. Naming: ak_<dtype>_<what>[_<tile>]__<isa>. */
#ifndef AK_KERNELS_DISPATCH_H
#define AK_KERNELS_DISPATCH_H

#include <stddef.h>
#include <stdint.h>

#include "accelkit/ak.h"
#include "accelkit/kernels.h"

/* SGEMM microkernel: C(mr,nr) (row stride ldc) = alpha·Σ_k Ap[k]·Bp[k] + beta·C over the
 * full tile, where Ap is a packed MR-row panel (k-major, MR floats per k) and Bp a
 * packed NR-column panel (NR floats per k). beta == 0 must not read C. m ≤ MR and n ≤ NR
 * give the valid part of the tile (edges). */
typedef void (*ak__sgemm_ukernel_fn)(size_t k, float alpha, const float *Ap, const float *Bp,
                                     float beta, float *C, size_t ldc, size_t m, size_t n);

/* A convolution's finish of a full MR×NR tile, applied in registers before the tile is
 * stored: + bias[r] on row r (bias NULL: none), + z (laid out like C with the same ldc;
 * NULL: none), then the activation: AK_SGEMM_ACT_MAX max(·, lo) (ReLU, NaN → lo), or
 * AK_SGEMM_ACT_CLAMP min(hi, max(lo, ·)) (Clip, NaN kept). */
enum { AK_SGEMM_ACT_NONE, AK_SGEMM_ACT_MAX, AK_SGEMM_ACT_CLAMP };
typedef struct ak__sgemm_tile_epi {
    const float *bias, *z;
    int act;
    float lo, hi;
} ak__sgemm_tile_epi;
/* The microkernel with alpha = 1 on a full tile, finished by epi: C = epi(Σ_k Ap[k]·Bp[k]
 * + beta·C). */
typedef void (*ak__sgemm_ukernel_epi_fn)(size_t k, const float *Ap, const float *Bp, float beta,
                                         float *C, size_t ldc, const ak__sgemm_tile_epi *epi);

/* Linear-layer kernels (kernels/linear.h): one per weight slot (f32, f16, bf16, q8_0,
 * q4_0), each computing the columns [n0, n1) of Y for every token of the job. */
struct ak__linear_job;
#define AK__LINEAR_SLOTS 5
typedef void (*ak__linear_fn)(const struct ak__linear_job *job, size_t n0, size_t n1);

typedef struct ak__kernels {
    const char *name; /* "ref", "generic", "avx2" */

    /* elementwise f32 / f16 / bf16 (f32 accumulation); dst may equal a / x */
    void (*f32_add)(float *dst, const float *a, const float *b, size_t n);
    void (*f32_scale)(float *dst, const float *x, float alpha, size_t n);
    void (*f32_axpy)(float *y, float alpha, const float *x, size_t n);
    double (*f32_sum)(const float *x, size_t n);
    void (*f16_add)(uint16_t *dst, const uint16_t *a, const uint16_t *b, size_t n);
    void (*f16_scale)(uint16_t *dst, const uint16_t *x, float alpha, size_t n);
    void (*f16_axpy)(uint16_t *y, float alpha, const uint16_t *x, size_t n);
    double (*f16_sum)(const uint16_t *x, size_t n);
    void (*bf16_add)(uint16_t *dst, const uint16_t *a, const uint16_t *b, size_t n);
    void (*bf16_scale)(uint16_t *dst, const uint16_t *x, float alpha, size_t n);
    void (*bf16_axpy)(uint16_t *y, float alpha, const uint16_t *x, size_t n);
    double (*bf16_sum)(const uint16_t *x, size_t n);

    /* collective reductions, [op][dtype] for op in SUM..MAX (see ak_reduce); dst may
     * equal a or b */
    void (*reduce[AK_REDUCE_AVG][AK_DTYPE_COUNT_])(void *dst, const void *a, const void *b,
                                                   size_t n);

    /* conversions */
    void (*f32_to_f16)(uint16_t *dst, const float *src, size_t n);
    void (*f16_to_f32)(float *dst, const uint16_t *src, size_t n);
    void (*f32_to_bf16)(uint16_t *dst, const float *src, size_t n);
    void (*bf16_to_f32)(float *dst, const uint16_t *src, size_t n);

    /* SGEMM: the whole operation (already validated), see ak_sgemm in kernels.h */
    void (*sgemm)(int trans_a, int trans_b, size_t M, size_t N, size_t K, float alpha,
                  const float *A, size_t lda, const float *B, size_t ldb, float beta, float *C,
                  size_t ldc, ak_threadpool *pool);
    /* the microkernel the blocked driver uses, with its tile (NULL for ref) */
    ak__sgemm_ukernel_fn sgemm_ukernel;
    /* the same with the tile finish fused in (NULL: none; callers then finish tiles
     * themselves) */
    ak__sgemm_ukernel_epi_fn sgemm_ukernel_epi;
    int sgemm_mr, sgemm_nr;
    /* the blocked driver's configuration for ak__sgemm_blocked_epi (NULL for ref) */
    const struct ak__gemm_config *sgemm_config;

    /* linear layers: the kernel per weight slot, and one f32 row of K activations to
     * Q8_0 (widened scales d[K/32], block sums s[K/32], values q[K]) bit-identical to
     * the reference */
    ak__linear_fn linear[AK__LINEAR_SLOTS];
    void (*linear_quantize_x)(const float *x, size_t K, float *d, int32_t *s, int8_t *q);

    /* attention over f16 rows of `dim` values (an LLM's f16 KV cache), f32 arithmetic:
     * out[j] = scale·Σ_d q[d]·rows[j][d] for j < n, and o[d] += Σ_j p[j]·rows[j][d] */
    void (*f16_dot_rows)(float *out, const float *q, const uint16_t *rows, size_t n, size_t dim,
                         float scale);
    void (*f16_madd_rows)(float *o, const float *p, const uint16_t *rows, size_t n, size_t dim);
} ak__kernels;

/* Bytes a call must move before large-output kernels switch to non-temporal stores:
 * half the last-level cache (the result would be evicted before anyone reads it), or
 * 16 MiB when the cache size is unknown. */
size_t ak__kernels_stream_min_bytes(void);

/* The active table; valid after ak_init() succeeded. */
const ak__kernels *ak__kernels_active(void);
/* Tables per variant, for tests that compare variants directly. Returns NULL if the
 * variant is not compiled in or the CPU cannot run it. */
const ak__kernels *ak__kernels_for(const char *variant /* "ref"|"generic"|"avx2"|"avx512" */);
/* Called by ak_init: fills the active table. */
ak_status ak__kernels_select(ak_isa isa, int force_ref);

/* Fill functions, one per (part, variant); each sets only its own members. */
void ak__fill_vec_ref(ak__kernels *k);
void ak__fill_vec_avx2(ak__kernels *k);
void ak__fill_reduce_ref(ak__kernels *k);
void ak__fill_reduce_avx2(ak__kernels *k);
void ak__fill_convert_ref(ak__kernels *k);
void ak__fill_convert_avx2(ak__kernels *k);
void ak__fill_gemm_ref(ak__kernels *k);
void ak__fill_gemm_generic(ak__kernels *k);
void ak__fill_gemm_avx2(ak__kernels *k);
void ak__fill_gemm_avx512(ak__kernels *k);
void ak__fill_linear_ref(ak__kernels *k);
void ak__fill_linear_avx2(ak__kernels *k);
void ak__fill_linear_avx512(ak__kernels *k);
void ak__fill_attn_ref(ak__kernels *k);
void ak__fill_attn_avx2(ak__kernels *k);

#endif /* AK_KERNELS_DISPATCH_H */
