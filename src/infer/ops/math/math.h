/* The math family's operator definitions, listed by math/table.c: Softmax, LogSoftmax
 * and Hardmax (softmax.c), TopK (topk.c), the losses (loss.c), Einsum (einsum.c), Gemm,
 * MatMul (gemm.c) and Det (det.c). */
#ifndef AK_INFER_OPS_MATH_MATH_H
#define AK_INFER_OPS_MATH_MATH_H

#include "infer/runtime/op.h"

extern const ak__op_def ak__op_softmax, ak__op_log_softmax, ak__op_hardmax;
extern const ak__op_def ak__op_topk;
extern const ak__op_def ak__op_sce_loss, ak__op_nll_loss;
extern const ak__op_def ak__op_einsum;
extern const ak__op_def ak__nn_gemm, ak__nn_matmul;
extern const ak__op_def ak__op_det;

#endif /* AK_INFER_OPS_MATH_MATH_H */
