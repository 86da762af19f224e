/* The math operator family: the table registry.c searches. Part 1 (reductions, softmax,
 * normalization, losses, TopK) lists its defs first; part 2's come from math_part2.h. */
#include "infer/backend/native/math_part2.h"
#include "infer/backend/native/math_loss.h"
#include "infer/backend/native/math_norm.h"
#include "infer/backend/native/math_reduce.h"
#include "infer/backend/native/math_softmax.h"
#include "infer/backend/native/math_topk.h"
#include "infer/runtime/op.h"

const ak__op_def *const ak__ops_math[] = {
    &ak__op_reduce_sum, &ak__op_reduce_mean, &ak__op_reduce_max, &ak__op_reduce_min,
    &ak__op_reduce_prod, &ak__op_reduce_l1, &ak__op_reduce_l2, &ak__op_reduce_log_sum,
    &ak__op_reduce_log_sum_exp, &ak__op_reduce_sum_square, &ak__op_argmax, &ak__op_argmin,
    &ak__op_softmax, &ak__op_log_softmax, &ak__op_hardmax,
    &ak__op_layer_norm, &ak__op_mvn, &ak__op_topk,
    &ak__op_sce_loss, &ak__op_nll_loss,
    AK_MATH_PART2_DEFS NULL,
};
