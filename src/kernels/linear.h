/* Linear layers over stored weights (ak_linear): the job every ISA kernel receives, the
 * weight-type slots of the dispatch table, the Q8_0/Q4_0 block layouts and the scalar
 * references shared by the public entry points and the tests.
 *
 * A kernel computes the output columns [n0, n1) of Y for every token t < T; the driver
 * (linear.c) validates, quantizes the activations when the weights are Q8_0/Q4_0, and
 * splits N over the thread pool. */
#ifndef AK_KERNELS_LINEAR_H
#define AK_KERNELS_LINEAR_H

#include <stddef.h>
#include <stdint.h>

#include "accelkit/kernels.h"
#include "kernels/dispatch.h"

#define AK__QK 32 /* elements per Q8_0 / Q4_0 block */

/* ggml's block layouts (packed, 2-byte aligned at most: a row of blocks is not 4-byte
 * aligned, so kernels load the f16 scale with memcpy or 16-bit loads). */
typedef struct ak__block_q8_0 {
    uint16_t d; /* f16 scale */
    int8_t qs[AK__QK];
} ak__block_q8_0;

typedef struct ak__block_q4_0 {
    uint16_t d;              /* f16 scale */
    uint8_t qs[AK__QK / 2]; /* element j in the low nibble of qs[j], j + 16 in the high */
} ak__block_q4_0;

/* Dispatch slots, one kernel per weight storage type. */
enum { AK__LIN_F32, AK__LIN_F16, AK__LIN_BF16, AK__LIN_Q8_0, AK__LIN_Q4_0,
       /* the super-block types (kernels/kquant.h) */
       AK__LIN_Q2_K, AK__LIN_Q3_K, AK__LIN_Q4_K, AK__LIN_Q5_K, AK__LIN_Q6_K, AK__LIN_Q8_K,
       AK__LIN_IQ4_NL, AK__LIN_IQ4_XS };

/* One ak_linear call as the kernels see it (already validated). */
typedef struct ak__linear_job {
    const uint8_t *W;  /* (N, K) weights, row n at W + n·row_bytes */
    size_t row_bytes, K, T;
    size_t N;          /* rows of W (the driver's; kernels get their range [n0, n1)) */
    const float *X;    /* (T, K) f32 activations, row stride ldx (f32/f16/bf16 weights) */
    size_t ldx;
    /* bf16 weights with T >= 2: the activations rounded to bf16 (round to nearest even, as
     * ggml's f32 -> bf16) at xb + t·ldxb, and X holds exactly their widened values, so a
     * kernel may read either (AVX512-BF16 dot products read xb). NULL otherwise: T = 1
     * keeps f32 activations (decode is bound by the weights' bandwidth, the rounding would
     * buy nothing there). */
    const uint16_t *xb;
    size_t ldxb;
    /* quantized activations (Q8_0/Q4_0 weights), token t's K/32 blocks: the scales (f16
     * widened) at xd + t·ldq/32, the K values at xq + t·ldq, and at xo + t·ldq/32 each
     * block's offset term for dot products with unsigned weight bytes, −8·Σq for Q4_0
     * (nibbles n = w + 8) and −128·Σq for Q8_0 (w ^ 0x80 = w + 128): see
     * ak__linear_offsets. ldq ≥ K is a multiple of 32 (K, or K + 64 where K bytes
     * would put every row in the same L1 set). */
    const float *xd;
    const int32_t *xo;
    const int8_t *xq;
    size_t ldq;
    /* Q8_K activations (super-block weights but IQ4_NL): token t's K/256 scales at
     * kd + t·K/256 and its K/16 sums of 16 values at kbs + t·K/16; values in xq as above. */
    const float *kd;
    const int16_t *kbs;
    float *Y;          /* (T, N) output, row stride ldy */
    size_t ldy;
    int accumulate;    /* 1: Y +=, 0: Y = */
} ak__linear_job;

/* The dispatch slot of a weight type; -1 when it is not one of ak_wtype's values. */
int ak__linear_slot(ak_wtype wtype);

/* Scalar references (kernels/ref/linear_ref.c): the storage conversions behind
 * ak_quantize_row / ak_dequantize_row, and one row of activations to Q8_0 values
 * (d[K/32] widened scales, s[K/32] block sums, q[K] values), bit-identical to
 * ak_quantize_row's Q8_0. */
void ak__quantize_row_ref(ak_wtype wtype, const float *src, void *dst, size_t K);
void ak__dequantize_row_ref(ak_wtype wtype, const void *src, float *dst, size_t K);
void ak_f32_quantize_q8_0__ref(const float *x, size_t K, float *d, int32_t *s, int8_t *q);

/* Turns block sums (from linear_quantize_x) into the offset terms of ak__linear_job.xo
 * for weights of `wtype`, in place. */
void ak__linear_offsets(ak_wtype wtype, int32_t *sums, size_t count);

/* The f32 value of a Q8_0/Q4_0 block's f16 scale (stored unaligned). */
float ak__block_scale(const void *block);

#endif /* AK_KERNELS_LINEAR_H */
