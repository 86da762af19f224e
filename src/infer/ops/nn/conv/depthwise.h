/* The depthwise 2-D convolution loops (depthwise.c), which conv.c calls. */
#ifndef AK_INFER_OPS_NN_CONV_DEPTHWISE_H
#define AK_INFER_OPS_NN_CONV_DEPTHWISE_H

#include <stddef.h>
#include <stdint.h>

#include "infer/ops/nn/common.h"
#include "infer/ops/nn/conv/activation.h"

/* Depthwise 2-D convolution (nn/conv/depthwise.c): planes (H, W) -> (OH, OW), plane i = n*C + c
 * with filter c ((KH, KW), at most AK_NN_DW_MAX_TAPS taps), bias b[c] (b may be NULL),
 * + Z (same layout as y, or NULL), then the activation. scratch holds
 * ak__nn_dw_scratch_floats(g) floats (64-byte aligned). */
#define AK_NN_DW_MAX_TAPS AK_KF_DW_MAX_TAPS
typedef struct ak__nn_dw_args {
    const ak__nn_geom *g;
    const float *x, *w, *b, *z;
    float *y;
    uint64_t C, Pin, P; /* channels, input and output plane sizes */
    ak__nn_act act;
} ak__nn_dw_args;
size_t ak__nn_dw_scratch_floats(const ak__nn_geom *g);
void ak__nn_dw_planes(const ak__nn_dw_args *a, size_t begin, size_t end, float *scratch);
/* 1 when runs of 8 aligned channels are computed 8 planes at once (channel-interleaved):
 * a task's range should then start and end on multiples of 8 planes. */
#define AK_NN_DW8_MAX_WIDTH 28
int ak__nn_dw_interleaves(const ak__nn_dw_args *a);

#endif /* AK_INFER_OPS_NN_CONV_DEPTHWISE_H */
