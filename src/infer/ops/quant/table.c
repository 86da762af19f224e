/* The quantized operator family: the table runtime/registry.c searches. */
#include "infer/ops/quant/quant.h"

const ak__op_def *const ak__ops_quant[] = {
    &ak__q_quantize_linear, &ak__q_dequantize_linear, &ak__q_dynamic_quantize_linear,
    &ak__q_matmul_integer,  &ak__q_qlinear_matmul,    &ak__q_matmul_integer_to_float,
    &ak__q_conv_integer,    &ak__q_qlinear_conv,      &ak__q_qlinear_conv_fused,
    &ak__q_qlinear_matmul_fused, &ak__q_qlinear_add_fused,
    NULL,
};
