/* The com.microsoft contrib operator family: the table runtime/registry.c searches. */
#include "infer/ops/contrib/contrib.h"

const ak__op_def *const ak__ops_contrib[] = {
    &ak__contrib_gelu, &ak__contrib_fast_gelu, &ak__contrib_bias_gelu, &ak__contrib_quick_gelu,
    &ak__contrib_fused_matmul,
    &ak__contrib_rotary_embedding,
    &ak__contrib_matmul_nbits,
    NULL,
};
