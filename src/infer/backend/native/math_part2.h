/* Defs of the math family's second part (Resize, Upsample, Einsum, RNNs), listed in math_ops.c. */
#ifndef AK_INFER_NATIVE_MATH_PART2_H
#define AK_INFER_NATIVE_MATH_PART2_H
#include "infer/runtime/op.h"
#define AK_MATH_PART2_DEFS /* part 2 lists its defs here: &ak__op_resize, ... */
#endif
