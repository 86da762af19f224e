/* The com.microsoft contrib operators that model exporters emit (onnxruntime's transformer
 * optimizer, the PyTorch exporters, Olive), listed by contrib/table.c:
 *   activation.c     Gelu, FastGelu, BiasGelu, QuickGelu
 *   fused_matmul.c   FusedMatMul (alpha, transA/B, transBatchA/B)
 *   rotary.c         RotaryEmbedding
 *   matmul_nbits.c   MatMulNBits (blockwise 2/4/8-bit weights)
 * SkipLayerNormalization and the other norms live in ops/norm, Attention and
 * MultiHeadAttention in ops/attention, FusedConv in ops/nn/conv, MatMulIntegerToFloat in
 * ops/quant. Semantics follow onnxruntime's ContribOperators specification. */
#ifndef AK_INFER_OPS_CONTRIB_CONTRIB_H
#define AK_INFER_OPS_CONTRIB_CONTRIB_H

#include "infer/runtime/op.h"

extern const ak__op_def ak__contrib_gelu, ak__contrib_fast_gelu, ak__contrib_bias_gelu,
    ak__contrib_quick_gelu;
extern const ak__op_def ak__contrib_fused_matmul;
extern const ak__op_def ak__contrib_rotary_embedding;
extern const ak__op_def ak__contrib_matmul_nbits;

/* ---- MatMulNBits' dequantization (matmul_nbits.c) ---------------------------------- */

/* The blockwise-quantized weight of MatMulNBits: N rows of K values, each row cut into
 * k_blocks blocks of block_size values packed `bits` to a byte-run (low bits first). */
typedef struct ak__nbits_layout {
    int64_t N, K, block_size, bits;
    int64_t k_blocks;   /* ceil(K / block_size) */
    int64_t blob_bytes; /* block_size * bits / 8: bytes of one block of B */
    int64_t zp_row_bytes; /* ceil(k_blocks * bits / 8): bytes of one row of packed zero points */
} ak__nbits_layout;

/* W[n - n0][k] (float32 rows of K) = (q - zero point) * scale for rows n0 <= n < n1 of
 * B. scales: N x k_blocks float32. zp_packed (N x zp_row_bytes, packed like B) or
 * zp_float (N x k_blocks float32) or neither (the default zero point 2^(bits-1)). */
void ak__nbits_dequantize(const ak__nbits_layout *l, const uint8_t *B, const float *scales,
                          const uint8_t *zp_packed, const float *zp_float, int64_t n0,
                          int64_t n1, float *W);

#endif /* AK_INFER_OPS_CONTRIB_CONTRIB_H */
