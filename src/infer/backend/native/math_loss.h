/* The math family's SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss (math_loss.c). */
#ifndef AK_INFER_NATIVE_MATH_LOSS_H
#define AK_INFER_NATIVE_MATH_LOSS_H

#include "infer/runtime/op.h"

extern const ak__op_def ak__op_sce_loss, ak__op_nll_loss;

#endif /* AK_INFER_NATIVE_MATH_LOSS_H */
