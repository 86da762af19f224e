/* The references of the ONNX engine's float32 row kernels (kf_infer.h): Reduce* rows,
 * LayerNormalization rows (kernels/ref/rows_body.h) and Softmax / LogSoftmax rows and
 * columns (kernels/ref/softmax_body.h, 4 lanes), built for the baseline ISA. */
#include <math.h>
#include <stddef.h>

#include "kernels/dispatch.h"
#include "kernels/ref/rows_body.h"

void ak_f32_reduce_rows__ref(const float *x, float *y, size_t rows, size_t n, int kind) {
    ak__rows_reduce_body(x, y, rows, n, kind);
}

void ak_f32_layer_norm_rows__ref(const float *x, float *y, size_t rows, size_t n, const float *g,
                                 const float *b, float eps, float *mean_out, float *inv_out) {
    ak__rows_layer_norm_body(x, y, rows, n, g, b, eps, mean_out, inv_out);
}

#define VF ak__v4f
#define VI ak__v4i
#define VW 4
#define KATTR
#define KNAME(x) softmax_##x
#include "kernels/ref/softmax_body.h"

void ak_f32_softmax_rows__ref(const float *x, float *y, size_t rows, size_t n, int mode) {
    softmax_rows(x, y, rows, n, mode);
}

void ak_f32_softmax_cols__ref(const float *x, float *y, size_t n, size_t inner, size_t w,
                              int mode) {
    softmax_cols(x, y, n, inner, w, mode);
}
