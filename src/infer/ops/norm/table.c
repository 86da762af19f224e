/* The norm operator family: the table registry.c searches. */
#include "infer/ops/norm/norm.h"

const ak__op_def *const ak__ops_norm[] = {
    &ak__op_layer_norm, &ak__op_mvn, &ak__nn_batchnorm, &ak__nn_instancenorm, &ak__nn_lrn,
    &ak__norm_rms_contrib, &ak__norm_rms_onnx_domain, &ak__norm_skip_ln_contrib,
    &ak__norm_skip_rms_contrib,
    NULL,
};
