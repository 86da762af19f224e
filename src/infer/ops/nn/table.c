/* The nn operator family: the table registry.c searches. The operators live in conv/
 * (convolutions), pool/ (pools, MaxUnpool) and sampling.c (GridSample, RoiAlign). */
#include "infer/ops/nn/common.h"
#include "infer/ops/nn/conv/conv.h"
#include "infer/ops/nn/pool/pool.h"
#include "infer/runtime/op.h"

const ak__op_def *const ak__ops_nn[] = {
    &ak__nn_conv,           &ak__nn_conv_transpose, /* ConvInteger: ops/quant */
    &ak__nn_fused_conv,     &ak__nn_nchwc_conv,
    &ak__nn_maxpool,        &ak__nn_averagepool,        &ak__nn_lppool,
    &ak__nn_global_maxpool, &ak__nn_global_averagepool, &ak__nn_global_lppool,
    &ak__nn_nchwc_maxpool,  &ak__op_maxunpool,
    &ak__op_gridsample,     &ak__op_roialign,
    NULL,
};
