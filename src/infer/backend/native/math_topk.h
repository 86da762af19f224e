/* The math family's TopK (math_topk.c). */
#ifndef AK_INFER_NATIVE_MATH_TOPK_H
#define AK_INFER_NATIVE_MATH_TOPK_H

#include "infer/runtime/op.h"

extern const ak__op_def ak__op_topk;

#endif /* AK_INFER_NATIVE_MATH_TOPK_H */
