/* The math operator family: the table registry.c searches. Part 1 (reductions, softmax,
 * normalization, losses, TopK) lists its defs first; part 2's come from math_part2.h. */
#include "infer/backend/native/math_part2.h"
#include "infer/runtime/op.h"

const ak__op_def *const ak__ops_math[] = {
    AK_MATH_PART2_DEFS NULL,
};
