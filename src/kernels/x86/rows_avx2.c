/* AVX2 instantiations of the ONNX engine's float32 row kernels (kf_infer.h): the bodies
 * of kernels/ref/rows_body.h (bit-identical to the references) and softmax_body.h with 8
 * lanes and FMA contraction (ISO C mode turns it off; it halves the latency of the exp
 * polynomial). */
#include <math.h>
#include <stddef.h>

#include "kernels/dispatch.h"
#include "kernels/ref/rows_body.h"

void ak_f32_reduce_rows__avx2(const float *x, float *y, size_t rows, size_t n, int kind) {
    ak__rows_reduce_body(x, y, rows, n, kind);
}

void ak_f32_layer_norm_rows__avx2(const float *x, float *y, size_t rows, size_t n,
                                  const float *g, const float *b, float eps, float *mean_out,
                                  float *inv_out) {
    ak__rows_layer_norm_body(x, y, rows, n, g, b, eps, mean_out, inv_out);
}

#pragma GCC push_options
#pragma GCC optimize("fp-contract=fast")
#define VF ak__v8f
#define VI ak__v8i
#define VW 8
#define KATTR
#define KNAME(x) softmax_##x
#include "kernels/ref/softmax_body.h"

void ak_f32_softmax_rows__avx2(const float *x, float *y, size_t rows, size_t n, int mode) {
    softmax_rows(x, y, rows, n, mode);
}

void ak_f32_softmax_cols__avx2(const float *x, float *y, size_t n, size_t inner, size_t w,
                               int mode) {
    softmax_cols(x, y, n, inner, w, mode);
}
#pragma GCC pop_options
