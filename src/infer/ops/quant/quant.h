/* The quantized operator family (ONNX QuantizeLinear, DequantizeLinear,
 * DynamicQuantizeLinear, MatMulInteger, QLinearMatMul, ConvInteger, QLinearConv; Microsoft's
 * MatMulIntegerToFloat): shared parameter reading and the int8 product driver they all
 * run on (qmm.c), over the u8·s8 GEMM kernel of kernels/kf_int8.h.
 *
 * Rounding everywhere is the spec's round-half-to-even (rintf in the default rounding
 * mode) and saturation to the target type's range; requantization computes
 * float(acc)·multiplier in float32 with the multiplier a_scale·b_scale/y_scale, as ONNX
 * Runtime does, so results match it exactly except where float32 and the spec's
 * real-number arithmetic differ at a tie (then by one quantization step). */
#ifndef AK_INFER_OPS_QUANT_QUANT_H
#define AK_INFER_OPS_QUANT_QUANT_H

#include <stddef.h>
#include <stdint.h>

#include "infer/ops/nn/common.h"
#include "infer/runtime/op.h"
#include "kernels/dispatch.h"

/* ---- quantization parameters ---------------------------------------------------------- */

/* An 8-bit zero point (or none): its value at index i (count 1: every index). */
typedef struct ak__qzp {
    const void *data; /* NULL: zero */
    ak_elem_type type; /* AK_ELEM_U8 or AK_ELEM_I8 */
    size_t count;
} ak__qzp;

static inline int32_t ak__qzp_at(const ak__qzp *z, size_t i) {
    if (!z->data) return 0;
    size_t at = z->count == 1 ? 0 : i;
    return z->type == AK_ELEM_U8 ? ((const uint8_t *)z->data)[at]
                                 : ((const int8_t *)z->data)[at];
}

/* The count argument of the two below that checks no count (QuantizeLinear and
 * DequantizeLinear compare shapes themselves). */
#define AK_Q_ANY_COUNT ((size_t)-1)

/* Checks that input i (optional when `optional`) is uint8 or int8 with 1 or `n` values
 * (n 0: only 1), of type `want` unless that is AK_ELEM_UNDEFINED, and fills z. */
ak_status ak__q_zero_point(ak__op_ctx *ctx, uint32_t i, const char *what, size_t n,
                           ak_elem_type want, int optional, ak__qzp *z);
/* Checks that input i is a float32 scale with 1 or n values (n 0: only 1); *s points at
 * them, *count says how many. */
ak_status ak__q_scale(ak__op_ctx *ctx, uint32_t i, const char *what, size_t n,
                      const float **s, size_t *count);
/* Fails unless input i is uint8 or int8 ("input 0 (x) has type float32, expected uint8 or
 * int8"). */
ak_status ak__q_check_8bit(ak__op_ctx *ctx, uint32_t i, const ak__tensor *t, const char *what);

/* saturate(round_half_even(v) + zp) to uint8 (is_signed 0) or int8; NaN gives the lowest
 * value (as ONNX Runtime's vector path does). */
static inline int32_t ak__q_round_sat(float v, int32_t zp, int is_signed) {
    float lo = is_signed ? -128.0f : 0.0f, hi = is_signed ? 127.0f : 255.0f;
    float r = __builtin_rintf(v) + (float)zp; /* exact: |rint(v)| < 2^24 or saturated */
    r = r >= lo ? r : lo; /* NaN fails the comparison: lo */
    r = r <= hi ? r : hi;
    return (int32_t)r;
}

/* ak__q_round_sat for loops that must vectorize (qadd.c, qmm.c): v is clamped to a range
 * that saturates alike, one step past each end (NaN to the low end, as ak__q_round_sat
 * sends it), then rounded half to even by adding and subtracting 1.5·2^23 (exact for
 * magnitudes below 2^22), shifted by the zero point and clamped to [lo, hi] — lo raised to
 * the zero point when a Relu was folded in. */
typedef struct ak__q_rounding {
    float below, above, zp, lo, hi;
} ak__q_rounding;

static inline ak__q_rounding ak__q_rounding_for(int32_t zp, int is_signed, int relu) {
    float lo = is_signed ? -128.0f : 0.0f, hi = is_signed ? 127.0f : 255.0f, z = (float)zp;
    ak__q_rounding r = {lo - 1.0f - z, hi + 1.0f - z, z, relu && z > lo ? z : lo, hi};
    return r;
}

static inline __attribute__((always_inline)) float ak__q_round_clamp(float v,
                                                                    const ak__q_rounding *r) {
    v = v >= r->below ? v : r->below;
    v = v <= r->above ? v : r->above;
    float q = (v + 12582912.0f) - 12582912.0f + r->zp;
    q = q >= r->lo ? q : r->lo;
    return q <= r->hi ? q : r->hi;
}

/* ---- the int8 product driver (qmm.c) ---------------------------------------------------
 * Y[m][n] = finish(Σ_k (A[m][k] − za[m])·(B[k][n] − zb[n])), computed exactly in int32
 * (modulo 2^32) from the u8·s8 kernel: int8 A is read with its top bit flipped
 * (a + 128, za + 128), uint8 B is packed flipped (b − 128, zb − 128), and the zero points
 * enter through row sums of A and column sums of B. */

/* B prepared for the kernel: packed panels and column sums of the flipped values. */
typedef struct ak__qmm_b {
    int8_t *packed;
    int32_t *colsum;
    size_t K, N;
    int flipped; /* B was uint8 */
} ak__qmm_b;

/* bytes of the packed panels and the column sums together */
size_t ak__qmm_b_bytes(size_t K, size_t N);
/* Packs B (uint8 or int8) with element (k, n) at b[k·rs + n·cs] into mem
 * (ak__qmm_b_bytes). */
void ak__qmm_b_pack(ak__qmm_b *qb, void *mem, const void *b, ak_elem_type type, size_t K,
                    size_t N, size_t rs, size_t cs);

enum { AK_QMM_OUT_I32, AK_QMM_OUT_Q8, AK_QMM_OUT_F32 };

typedef struct ak__qmm ak__qmm;
/* Writes rows [m0, m0 + mr) of A as uint8 (int8 already flipped) into dst (row stride K). */
typedef void (*ak__qmm_rows_fn)(const ak__qmm *q, size_t m0, size_t mr, uint8_t *dst);

struct ak__qmm {
    size_t M, N, K;
    /* A: a plain matrix (a, lda, a_type), or rows() producing it (im2col) */
    const void *a;
    size_t lda;
    ak_elem_type a_type;
    ak__qmm_rows_fn rows;
    const void *rows_ctx;
    ak__qzp za; /* per tensor or per row (count M) */
    ak__qzp zb; /* per tensor or per column (count N) */
    const ak__qmm_b *b;
    /* the finish, element (m, n) going to out + (m·out_rs + n·out_cs) elements:
     * I32: acc (+ bias[n]); Q8 (uint8 out_signed 0 / int8 1): saturate(round((acc +
     * bias[n])·mult[n]) + out_zp); F32: acc·mult[n] + fbias[n]. mult has 1 or N values. */
    int out_kind, out_signed;
    void *out;
    size_t out_rs, out_cs;
    const float *mult;
    size_t mult_n;
    const int32_t *bias;
    const float *fbias;
    int32_t out_zp;
    int relu; /* Q8: results below out_zp raised to it (a Relu folded in: Q(max(v, 0))) */
};

/* Workspace bytes ak__qmm_run needs for `threads` threads. */
size_t ak__qmm_workspace(size_t K, int threads);
/* Runs q over the pool (threads as given to ak__qmm_workspace). */
void ak__qmm_run(const ak__qmm *q, ak_threadpool *pool, int threads, void *workspace);


/* ---- the channel-major convolution path (qconv_direct.c) ------------------------------
 * Convolutions on the fused kernel of kernels/kf_int8.h (ak__kf_u8s8_conv): weights
 * prepacked once at session creation as padded int8 rows with their sums, K ordered by
 * quads of four input channels at each tap; per run the input rewritten once into padded
 * quads (four channels' bytes side by side), from which each task copies its chunk of
 * pixels as whole words; the zero points folded into a per-channel bias and, only when
 * the weights' zero point is not 0, a per-pixel term. */

/* W (M × K, K = Cg·taps, uint8 flipped to int8) as the kernel's rows of Kp bytes (Cg
 * rounded up to a multiple of 4, the extra channels' weights 0), K in the order (quad of
 * channels, tap, channel in quad), and each row's sum. */
typedef struct ak__qconv_w {
    int8_t *rows;
    int32_t *wsum;
    size_t M, K, Kp;
    int flipped; /* W was uint8 */
} ak__qconv_w;

ak_status ak__qconv_w_pack(ak__qconv_w *w, const void *data, ak_elem_type type, size_t M,
                           size_t Cg, size_t taps);
void ak__qconv_w_free(ak__qconv_w *w);
/* Whether the fast path runs here: the CPU has a kernel of its own (AVX-512 VNNI), or the
 * references were asked for (AK_KERNELS=ref), so they are what runs everywhere. */
int ak__qconv_direct_usable(void);

typedef struct ak__qconv_direct {
    const ak__nn_geom *g; /* three spatial axes (leading ones 1) */
    size_t N, C, M, group, Cg, Mg, K, P;
    const uint8_t *x;
    int x_signed;
    uint8_t x_pad; /* x_zero_point's byte, as x stores it */
    const ak__qconv_w *w;
    /* the finish: M values each (row_zp NULL when every weight zero point is 0) */
    int kind; /* AK_I8_OUT_* */
    const int32_t *row_bias, *row_zp;
    const float *mult;
    int32_t out_zp;
    int relu;
    void *y;
} ak__qconv_direct;

/* Workspace bytes for geometry g (three axes) with `threads` threads: the padded quads
 * of the whole input and each thread's packed chunk. */
size_t ak__qconv_direct_workspace(const ak__nn_geom *g, size_t N, size_t group, size_t Cg,
                                  size_t P, int threads);
void ak__qconv_direct_run(const ak__qconv_direct *c, ak_threadpool *pool, int threads,
                          void *workspace);

/* ---- operator definitions ------------------------------------------------------------ */
extern const ak__op_def ak__q_quantize_linear, ak__q_dequantize_linear,
    ak__q_dynamic_quantize_linear, ak__q_matmul_integer, ak__q_qlinear_matmul,
    ak__q_matmul_integer_to_float, ak__q_conv_integer, ak__q_qlinear_conv,
    ak__q_qlinear_conv_fused, ak__q_qlinear_matmul_fused, ak__q_qlinear_add_fused;

#endif /* AK_INFER_OPS_QUANT_QUANT_H */
