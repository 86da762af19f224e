/* The convolutions' activations and tile epilogue (activation.c): FusedConv's
 * activation parsed from the node, applied over rows, or fused into a microkernel's
 * finish; bias + Z + activation on a GEMM tile. Shared by conv.c, igemm.c, winograd.c,
 * depthwise.c and nchwc.c. */
#ifndef AK_INFER_OPS_NN_CONV_ACTIVATION_H
#define AK_INFER_OPS_NN_CONV_ACTIVATION_H

#include <stddef.h>
#include <stdint.h>

#include "infer/runtime/op.h"
#include "kernels/dispatch.h"

/* FusedConv's activation (com.microsoft names) with its parameters: Clip's min/max,
 * LeakyRelu's alpha, HardSigmoid's alpha/beta. */
enum {
    AK_NN_ACT_NONE, AK_NN_ACT_RELU, AK_NN_ACT_CLIP, AK_NN_ACT_LEAKY, AK_NN_ACT_SIGMOID,
    AK_NN_ACT_TANH, AK_NN_ACT_HARDSIGMOID
};
typedef struct ak__nn_act {
    int kind; /* AK_NN_ACT_* */
    float a, b;
} ak__nn_act;
/* FusedConv's activation and activation_params (com.microsoft semantics) from ctx->node;
 * none when the node has no activation attribute. */
ak_status ak__nn_parse_activation(const ak__op_ctx *ctx, ak__nn_act *act);
/* The activation of one value (any kind), in double. */
double ak__nn_act_apply(const ak__nn_act *act, double v);
/* The activation in place over rows (rows, cols) of stride ld (nn/conv/conv.c). */
void ak__nn_act_rows(const ak__nn_act *act, float *y, uint64_t rows, uint64_t cols,
                     uint64_t ld);

/* 1 when act is one a microkernel can apply in registers (none, ReLU, Clip), with *out
 * set to that finish over bias and z. */
int ak__nn_act_fusable(const ak__nn_act *act, const float *bias, const float *z,
                       ak__sgemm_tile_epi *out);
/* The GEMM convolutions' epilogue on an m×n tile of Y (rows ld apart): + bias[r] per
 * row (bias may be NULL), + Z (laid out like Y, or NULL), then the activation. */
void ak__nn_tile_epilogue(float *y, const float *z, const float *bias, uint64_t ld, size_t m,
                          size_t n, const ak__nn_act *act);

#endif /* AK_INFER_OPS_NN_CONV_ACTIVATION_H */
