/* The nn operator family: the table registry.c searches. The operators live in nn_*.c
 * (convolutions, pools, normalizations, Gemm/MatMul); nn_internal.h declares them. */
#include "infer/backend/native/nn_internal.h"
#include "infer/runtime/op.h"

const ak__op_def *const ak__ops_nn[] = {
    &ak__nn_conv,          &ak__nn_conv_transpose,     &ak__nn_conv_integer,
    &ak__nn_maxpool,       &ak__nn_averagepool,        &ak__nn_lppool,
    &ak__nn_global_maxpool, &ak__nn_global_averagepool, &ak__nn_global_lppool,
    &ak__nn_batchnorm,     &ak__nn_instancenorm,       &ak__nn_lrn,
    &ak__nn_gemm,          &ak__nn_matmul,             &ak__nn_matmul_integer,
    &ak__nn_fused_conv,    &ak__nn_nchwc_conv, &ak__nn_nchwc_maxpool,
    NULL,
};
