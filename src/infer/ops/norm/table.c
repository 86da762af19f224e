/* The norm operator family: the table registry.c searches. */
#include "infer/ops/norm/norm.h"

const ak__op_def *const ak__ops_norm[] = {
    &ak__op_layer_norm, &ak__op_mvn, &ak__nn_batchnorm, &ak__nn_instancenorm, &ak__nn_lrn,
    &ak__op_simplified_ln, &ak__op_simplified_ln_onnx, &ak__op_skip_ln, &ak__op_skip_simplified_ln,
    NULL,
};
