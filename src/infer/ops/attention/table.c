/* The attention operator family: the table registry.c searches. */
#include "infer/ops/attention/attention.h"

const ak__op_def *const ak__ops_attention[] = {&ak__op_multi_head_attention, &ak__op_attention,
                                                 &ak__op_fused_multi_head_attention, NULL};
