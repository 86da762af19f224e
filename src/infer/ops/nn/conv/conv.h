/* The convolution operators' definitions (conv.c, conv_transpose.c, nchwc.c), listed
 * by nn/table.c, and conv.c's path switch for tests and benchmarks. */
#ifndef AK_INFER_OPS_NN_CONV_CONV_H
#define AK_INFER_OPS_NN_CONV_CONV_H

#include "infer/runtime/op.h"

/* For benchmarks and tests (nn/conv/conv.c): 1 forces Conv's tiled im2col path, 2 the whole
 * one, 3 the implicit GEMM (when create packed W), 4 Winograd (where it applies), 0 lets
 * it choose. Not thread-safe; never set in production. */
extern int ak__nn_conv_force_mode;

extern const ak__op_def ak__nn_conv, ak__nn_conv_transpose, ak__nn_fused_conv,
    ak__nn_nchwc_conv;

#endif /* AK_INFER_OPS_NN_CONV_CONV_H */
