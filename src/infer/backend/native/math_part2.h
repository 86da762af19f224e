/* Defs of the math family's second part, listed in math_ops.c through AK_MATH_PART2_DEFS:
 * Resize and Upsample (math_resize.c), Einsum (math_einsum.c), RNN, GRU and LSTM
 * (math_rnn.c), GridSample, RoiAlign, MaxUnpool and Det (math_misc.c). */
#ifndef AK_INFER_NATIVE_MATH_PART2_H
#define AK_INFER_NATIVE_MATH_PART2_H
#include "infer/runtime/op.h"

extern const ak__op_def ak__op_resize;
extern const ak__op_def ak__op_upsample;
extern const ak__op_def ak__op_einsum;
extern const ak__op_def ak__op_rnn;
extern const ak__op_def ak__op_gru;
extern const ak__op_def ak__op_lstm;
extern const ak__op_def ak__op_gridsample;
extern const ak__op_def ak__op_roialign;
extern const ak__op_def ak__op_maxunpool;
extern const ak__op_def ak__op_det;

#define AK_MATH_PART2_DEFS &ak__op_resize, &ak__op_upsample, &ak__op_einsum, \
    &ak__op_rnn, &ak__op_gru, &ak__op_lstm, \
    &ak__op_gridsample, &ak__op_roialign, &ak__op_maxunpool, &ak__op_det,
#endif
