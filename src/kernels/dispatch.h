/* The kernel dispatch table: one function pointer per kernel of kernels/kernels.def,
 * filled per variant (ref, generic, avx2, avx512) from that list and selected by the
 * kernels layer itself on first use, from the active ISA (AK_ISA) or the scalar
 * references (AK_KERNELS=ref).
 *
 * Adding a kernel: one line in kernels/kernels.def, a reference in kernels/ref/, ISA
 * variants in kernels/x86/. Naming: ak_<dtype>_<what>[_<tile>]__<isa>. */
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
 * AK_SGEMM_ACT_CLAMP min(hi, max(lo, ·)) (Clip, NaN kept). MatMulBias's bias is one per
 * column instead: col_bias[j] on column j (NULL: none; only the GEMM microkernels read it,
 * the convolution kernels that share this finish leave it NULL). */
enum { AK_SGEMM_ACT_NONE, AK_SGEMM_ACT_MAX, AK_SGEMM_ACT_CLAMP };
typedef struct ak__sgemm_tile_epi {
    const float *bias, *z;
    int act;
    float lo, hi;
    const float *col_bias;
} ak__sgemm_tile_epi;
/* The microkernel with alpha = 1 on a full tile, finished by epi: C = epi(Σ_k Ap[k]·Bp[k]
 * + beta·C). */
typedef void (*ak__sgemm_ukernel_epi_fn)(size_t k, const float *Ap, const float *Bp, float beta,
                                         float *C, size_t ldc, const ak__sgemm_tile_epi *epi);

/* Linear-layer kernels (kernels/linear.h): one per weight slot (f32, f16, bf16, q8_0,
 * q4_0, then the super-block types of kernels/kquant.h), each computing the columns [n0, n1) of Y for every token of the job. */
struct ak__linear_job;
#define AK__LINEAR_SLOTS 13
typedef void (*ak__linear_fn)(const struct ak__linear_job *job, size_t n0, size_t n1);

/* ---- kernel function types (the `type` column of kernels.def) ----------------------
 * Function types, not pointer types, so that kernels.def can declare every symbol it
 * names with its type and the compiler checks each definition against the list. */
typedef void ak__kf_f32_binary(float *dst, const float *a, const float *b, size_t n);
typedef void ak__kf_f32_scale(float *dst, const float *x, float alpha, size_t n);
typedef void ak__kf_f32_axpy(float *y, float alpha, const float *x, size_t n);
typedef double ak__kf_f32_sum(const float *x, size_t n);
typedef void ak__kf_h16_binary(uint16_t *dst, const uint16_t *a, const uint16_t *b, size_t n);
typedef void ak__kf_h16_scale(uint16_t *dst, const uint16_t *x, float alpha, size_t n);
typedef void ak__kf_h16_axpy(uint16_t *y, float alpha, const uint16_t *x, size_t n);
typedef double ak__kf_h16_sum(const uint16_t *x, size_t n);
typedef void ak__kf_reduce(void *dst, const void *a, const void *b, size_t n);
typedef void ak__kf_narrow16(uint16_t *dst, const float *src, size_t n);
typedef void ak__kf_widen16(float *dst, const uint16_t *src, size_t n);
typedef void ak__kf_sgemm(int trans_a, int trans_b, size_t M, size_t N, size_t K, float alpha,
                          const float *A, size_t lda, const float *B, size_t ldb, float beta,
                          float *C, size_t ldc, ak_threadpool *pool);
typedef void ak__kf_linear(const struct ak__linear_job *job, size_t n0, size_t n1);
typedef void ak__kf_quantize_x(const float *x, size_t K, float *d, int32_t *s, int8_t *q);
typedef void ak__kf_quantize_xk(const float *x, size_t K, float *d, int16_t *bsums, int8_t *q);
typedef void ak__kf_dot_rows(float *out, const float *q, const uint16_t *rows, size_t n,
                             size_t dim, float scale);
typedef void ak__kf_madd_rows(float *o, const float *p, const uint16_t *rows, size_t n,
                              size_t dim);
/* q8_0 rows (ggml blocks: f16 scale + 32 int8), kernels/ref/attn_q8_ref.c */
typedef void ak__kf_q8_dot_rows(float *out, const float *q, const void *rows, size_t n,
                                size_t dim, float scale);
typedef void ak__kf_q8_dot_rows_q8(float *out, const float *qd, const int8_t *qq,
                                   const void *rows, size_t n, size_t dim, float scale);
typedef void ak__kf_q8_madd_rows(float *o, const float *p, const void *rows, size_t n,
                                 size_t dim);
typedef uint64_t ak__kf_u64_read_sum(const uint64_t *p, size_t n);
typedef void ak__kf_f32_dot_rows(float *out, const float *q, const float *rows, size_t n,
                                 size_t dim, float scale);
typedef void ak__kf_f32_madd_rows(float *o, const float *p, const float *rows, size_t n,
                                  size_t dim);
typedef void ak__kf_f32_softmax(float *s, size_t n);
typedef void ak__kf_f32_gated(float *x, const float *up, size_t n);
typedef void ak__kf_f32_softcap(float *x, size_t n, float cap);
typedef void ak__kf_f32_gelu(float *x, size_t n);
typedef void ak__kf_moe_route(float *p, size_t n_experts, size_t k, int norm, int32_t *sel,
                              float *w);
typedef void ak__kf_layernorm(float *out, const float *x, const float *w, const float *b,
                              size_t n, float eps);
typedef void ak__kf_rmsnorm(float *out, const float *x, const float *w, size_t n, float eps);
typedef void ak__kf_rope(float *x, size_t T, size_t n_heads, size_t hd, int neox,
                         const float *cs);
struct ak__optim_coef; /* kernels/optim.h */
typedef void ak__kf_optim_sgd(const struct ak__optim_coef *c, float *p, const float *g,
                              float *buf, size_t n);
typedef void ak__kf_optim_adam(const struct ak__optim_coef *c, float *p, const float *g,
                               float *m, float *v, size_t n);
typedef void ak__kf_optim_lamb_moments(const struct ak__optim_coef *c, const float *p,
                                       const float *g, float *m, float *v, size_t n,
                                       double *p_sq, double *u_sq);
typedef void ak__kf_optim_lamb_apply(const struct ak__optim_coef *c, float *p, const float *m,
                                     const float *v, size_t n, float neg_lr_ratio);
#include "kernels/kf_infer.h"
#include "kernels/kf_int8.h" /* the quantized operators' int8 GEMM */

/* Every symbol kernels.def names, declared with its kernel's type. */
#define AK_KERNEL(name, type, elem, ref, check) type ref;
#define AK_KERNEL_AT(name, slot, type, elem, ref, check) type ref;
#include "kernels/kernels.def"
#define AK_KERNEL(name, type, elem, ref, check) typedef type ak__kt_##name;
#define AK_KERNEL_AT(name, slot, type, elem, ref, check) typedef type ak__kt_##name;
#include "kernels/kernels.def"
#define AK_IMPL(name, variant, symbol) ak__kt_##name symbol;
#define AK_IMPL_IF(name, variant, symbol, feature) ak__kt_##name symbol;
#include "kernels/kernels.def"
struct ak__gemm_config;
#define AK_GEMM_CONFIG(variant, config) extern const struct ak__gemm_config config;
#include "kernels/kernels.def"

/* Index of each kernel in the list: AK__KERNEL_<name>. */
enum {
#define AK_KERNEL(name, type, elem, ref, check) AK__KERNEL_##name,
#define AK_KERNEL_AT(name, slot, type, elem, ref, check) AK__KERNEL_##name,
#include "kernels/kernels.def"
    AK__KERNEL_COUNT_
};

typedef struct ak__kernels {
    const char *name; /* "ref", "generic", "avx2", "avx512", "avx512w" */

    /* one member per AK_KERNEL line of kernels.def */
#define AK_KERNEL(name, type, elem, ref, check) type *name;
#include "kernels/kernels.def"

    /* Arrays whose elements are AK_KERNEL_AT lines of kernels.def (declared here because
     * their callers index them): collective reductions [op][dtype] for op in SUM..MAX
     * (see ak_reduce; dst may equal a or b), and the linear-layer kernel per weight slot
     * (kernels/linear.h). */
    ak__kf_reduce *reduce[AK_REDUCE_AVG][AK_DTYPE_COUNT_];
    ak__kf_linear *linear[AK__LINEAR_SLOTS];

    /* Not kernels: the blocked SGEMM driver's configuration of this variant, fed from
     * its AK_GEMM_CONFIG line (NULL / 0 for ref, which has no microkernel): the
     * microkernel and its tile, the same with the tile finish fused in (NULL: none;
     * callers then finish tiles themselves), and the whole configuration for
     * ak__sgemm_blocked_epi. */
    ak__sgemm_ukernel_fn sgemm_ukernel;
    ak__sgemm_ukernel_epi_fn sgemm_ukernel_epi;
    int sgemm_mr, sgemm_nr;
    const struct ak__gemm_config *sgemm_config;

    /* the symbol each kernel of this table runs (its own or inherited), by AK__KERNEL_* */
    const char *impl[AK__KERNEL_COUNT_];
} ak__kernels;

/* The list itself, for the test sweep and `ak bench kernels`: each kernel's name, its
 * function type and element type (as written in kernels.def), the checker that tests
 * it, its reference symbol, and where its pointer sits in ak__kernels. */
typedef struct ak__kernel_info {
    const char *name, *type, *elem, *check, *ref;
    size_t offset;
} ak__kernel_info;
extern const ak__kernel_info ak__kernel_list[AK__KERNEL_COUNT_];
/* Any kernel pointer, to be cast back to its ak__kf_* type (named by the info's type). */
typedef void (*ak__any_kernel)(void);
ak__any_kernel ak__kernel_get(const ak__kernels *k, size_t index);
/* The variants, bottom first: each inherits what it does not implement from the one
 * before it. */
#define AK__KERNEL_VARIANTS 5
extern const char *const ak__kernel_variants[AK__KERNEL_VARIANTS];

/* Bytes a call must move before large-output kernels switch to non-temporal stores:
 * half the last-level cache (the result would be evicted before anyone reads it), or
 * 16 MiB when the cache size is unknown. */
size_t ak__kernels_stream_min_bytes(void);

/* The active table: chosen by the kernels layer on first use (and again after ak_init
 * re-ran with another environment) from core's validated AK_ISA and AK_KERNELS; never
 * NULL. */
const ak__kernels *ak__kernels_active(void);
/* Tables per variant, for tests that compare variants directly. Returns NULL if the
 * variant is not compiled in or the CPU cannot run it. */
const ak__kernels *ak__kernels_for(const char *variant /* "ref"|...|"avx512"|"avx512w" */);
/* Whether a table runs AVX-512 code (avx512, avx512w): callers with AVX-512 loops of
 * their own take them then. */
int ak__kernels_avx512(const ak__kernels *k);
/* Output blocks per NCHWc weight panel the table's conv row runs fastest (kf_infer.h): 4
 * where it has 4-block tiles (avx512w), else 2. Every table runs any of 1..4. */
int ak__kernels_nchwc_panel_blocks(const ak__kernels *k);

#endif /* AK_KERNELS_DISPATCH_H */
