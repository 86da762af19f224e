/* The math operator family: the table registry.c searches. */
#include "infer/ops/math/math.h"

const ak__op_def *const ak__ops_math[] = {
    &ak__op_softmax, &ak__op_log_softmax, &ak__op_hardmax,
    &ak__op_topk,
    &ak__op_sce_loss, &ak__op_nll_loss,
    &ak__op_einsum,
    &ak__nn_gemm, &ak__nn_matmul, /* MatMulInteger: ops/quant */
    &ak__op_det,
    NULL,
};
