/* The math family's LayerNormalization and MeanVarianceNormalization (math_norm.c). */
#ifndef AK_INFER_NATIVE_MATH_NORM_H
#define AK_INFER_NATIVE_MATH_NORM_H

#include "infer/runtime/op.h"

extern const ak__op_def ak__op_layer_norm, ak__op_mvn;

#endif /* AK_INFER_NATIVE_MATH_NORM_H */
