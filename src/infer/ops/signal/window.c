/* HannWindow, HammingWindow and BlackmanWindow (opset 17): a 1-D window of `size`
 * (input 0, an int32/int64 scalar) as a sum of cosines,
 *   w[n] = a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N),
 * with N = size when `periodic` (the default: the window of a DFT frame) and size - 1
 * when symmetric (a one-element symmetric window is [1], as numpy's). */
#include <math.h>

#include "infer/ops/signal/signal.h"

typedef struct cosine_window {
    double a0, a1, a2;
} cosine_window;

static const cosine_window hann = {0.5, 0.5, 0.0};
static const cosine_window hamming = {25.0 / 46.0, 21.0 / 46.0, 0.0}; /* ONNX's coefficients */
static const cosine_window blackman = {0.42, 0.5, 0.08};

static ak_status window_size(const ak__op_ctx *ctx, int64_t *size) {
    AK_CHECK(ak__signal_scalar_int(ctx, 0, "size", size));
    if (*size < 0)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_ARG, "size %lld is negative",
                          (long long)*size);
    return AK_OK;
}

static ak_status window_reshape(ak__op_ctx *ctx) {
    int64_t size;
    ak_elem_type type;
    AK_CHECK(window_size(ctx, &size));
    AK_CHECK(ak__signal_output_type(ctx, &type));
    return ak__op_set_output(ctx, 0, type, 1, &size);
}

static ak_status window_run_with(ak__op_ctx *ctx, const cosine_window *w) {
    ak__tensor *y = ak__op_out(ctx, 0);
    if (!y || y->count == 0) return AK_OK;
    int64_t size = y->dims[0];
    int periodic = ak__attr_int(ctx->node, "periodic", 1) != 0;
    double n_den = (double)(periodic ? size : size - 1);
    const double two_pi = 6.283185307179586476925286766559;
    for (int64_t n = 0; n < size; n++) {
        double v = 1.0;
        if (n_den > 0) {
            double x = two_pi * (double)n / n_den;
            v = w->a0 - w->a1 * cos(x) + w->a2 * cos(2.0 * x);
        }
        ak__elem_set(y->data, y->type, (uint64_t)n, v);
    }
    return AK_OK;
}

static ak_status hann_run(ak__op_ctx *ctx) { return window_run_with(ctx, &hann); }
static ak_status hamming_run(ak__op_ctx *ctx) { return window_run_with(ctx, &hamming); }
static ak_status blackman_run(ak__op_ctx *ctx) { return window_run_with(ctx, &blackman); }

const ak__op_def ak__op_hann_window = {"", "HannWindow", 17, 0, NULL, NULL, window_reshape,
                                       hann_run};
const ak__op_def ak__op_hamming_window = {"", "HammingWindow", 17, 0, NULL, NULL,
                                          window_reshape, hamming_run};
const ak__op_def ak__op_blackman_window = {"", "BlackmanWindow", 17, 0, NULL, NULL,
                                           window_reshape, blackman_run};
