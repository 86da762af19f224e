/* What the fused operators (fused.c) offer the inference backends (infer/backends). */
#ifndef AK_INFER_OPS_FUSED_FUSED_H
#define AK_INFER_OPS_FUSED_FUSED_H

#include "infer/runtime/op.h"

/* The activation of a MatMulBias node over its output, in place: what a backend that
 * computed the product with the bias (infer/backends/blas.c) leaves to do. */
ak_status ak__matmul_bias_epilogue(const ak__op_ctx *ctx);

#endif /* AK_INFER_OPS_FUSED_FUSED_H */
