/* MelWeightMatrix (opset 17): the [dft_length/2 + 1, num_mel_bins] matrix that maps the
 * bins of a onesided DFT onto triangular filters evenly spaced on the mel scale
 * (mel = 2595 log10(1 + hz/700)) between lower_edge_hertz and upper_edge_hertz.
 *
 * The filter edges follow ONNX's reference computation exactly, including its choices:
 * num_mel_bins + 2 edge points a mel step of (high - low) / (num_mel_bins + 2) apart,
 * each edge taken to bin floor((dft_length + 1) * hz / sample_rate); a filter whose left
 * edge equals its centre is a single 1 at the centre. */
#include <math.h>

#include "infer/ops/signal/signal.h"

typedef struct mel_params {
    int64_t num_mel_bins, dft_length, sample_rate;
    double lower_hz, upper_hz;
} mel_params;

static ak_status mel_params_of(const ak__op_ctx *ctx, mel_params *p) {
    AK_CHECK(ak__signal_scalar_int(ctx, 0, "num_mel_bins", &p->num_mel_bins));
    AK_CHECK(ak__signal_scalar_int(ctx, 1, "dft_length", &p->dft_length));
    AK_CHECK(ak__signal_scalar_int(ctx, 2, "sample_rate", &p->sample_rate));
    AK_CHECK(ak__signal_scalar_double(ctx, 3, "lower_edge_hertz", &p->lower_hz));
    AK_CHECK(ak__signal_scalar_double(ctx, 4, "upper_edge_hertz", &p->upper_hz));
    if (p->num_mel_bins < 0 || p->dft_length <= 0 || p->sample_rate <= 0)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_ARG,
                          "num_mel_bins (%lld) must be >= 0, dft_length (%lld) and sample_rate "
                          "(%lld) > 0",
                          (long long)p->num_mel_bins, (long long)p->dft_length,
                          (long long)p->sample_rate);
    if (!(p->lower_hz >= 0) || !(p->upper_hz >= p->lower_hz))
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_ARG,
                          "edges %g..%g Hz must satisfy 0 <= lower <= upper", p->lower_hz,
                          p->upper_hz);
    return AK_OK;
}

static ak_status mel_reshape(ak__op_ctx *ctx) {
    mel_params p;
    ak_elem_type type;
    AK_CHECK(mel_params_of(ctx, &p));
    AK_CHECK(ak__signal_output_type(ctx, &type));
    int64_t dims[2] = {p.dft_length / 2 + 1, p.num_mel_bins};
    ctx->workspace_bytes = (size_t)(p.num_mel_bins + 2) * sizeof(int64_t);
    return ak__op_set_output(ctx, 0, type, 2, dims);
}

static double hz_to_mel(double hz) { return 2595.0 * log10(1.0 + hz / 700.0); }
static double mel_to_hz(double mel) { return 700.0 * (pow(10.0, mel / 2595.0) - 1.0); }

static ak_status mel_run(ak__op_ctx *ctx) {
    ak__tensor *y = ak__op_out(ctx, 0);
    if (!y) return AK_OK;
    mel_params p;
    AK_CHECK(mel_params_of(ctx, &p));
    int64_t bins = p.dft_length / 2 + 1, nm = p.num_mel_bins;
    for (uint64_t i = 0; i < y->count; i++) ak__elem_set(y->data, y->type, i, 0.0);
    int64_t *edge = ctx->workspace;
    double low = hz_to_mel(p.lower_hz), high = hz_to_mel(p.upper_hz);
    double step = (high - low) / (double)(nm + 2);
    for (int64_t i = 0; i < nm + 2; i++) {
        double hz = mel_to_hz((double)i * step + low);
        edge[i] = (int64_t)floor((double)(p.dft_length + 1) * hz / (double)p.sample_rate);
        if (edge[i] >= bins) /* only when upper_edge_hertz is beyond the Nyquist frequency */
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_ARG,
                              "upper_edge_hertz %g lies beyond the last DFT bin (sample_rate "
                              "%lld / 2)",
                              p.upper_hz, (long long)p.sample_rate);
    }
    for (int64_t m = 0; m < nm; m++) {
        int64_t left = edge[m], centre = edge[m + 1], right = edge[m + 2];
        if (centre == left) {
            ak__elem_set(y->data, y->type, (uint64_t)(centre * nm + m), 1.0);
        } else {
            for (int64_t j = left; j <= centre; j++)
                ak__elem_set(y->data, y->type, (uint64_t)(j * nm + m),
                             (double)(j - left) / (double)(centre - left));
        }
        for (int64_t j = centre; j < right; j++)
            ak__elem_set(y->data, y->type, (uint64_t)(j * nm + m),
                         (double)(right - j) / (double)(right - centre));
    }
    return AK_OK;
}

const ak__op_def ak__op_mel_weight_matrix = {"", "MelWeightMatrix", 17, 0, NULL, NULL,
                                             mel_reshape, mel_run};
