/* The math family's Softmax, LogSoftmax and Hardmax (math_softmax.c). */
#ifndef AK_INFER_NATIVE_MATH_SOFTMAX_H
#define AK_INFER_NATIVE_MATH_SOFTMAX_H

#include "infer/runtime/op.h"

extern const ak__op_def ak__op_softmax, ak__op_log_softmax, ak__op_hardmax;

#endif /* AK_INFER_NATIVE_MATH_SOFTMAX_H */
