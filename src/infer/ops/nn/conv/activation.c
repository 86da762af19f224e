/* The convolutions' activations and tile epilogue: FusedConv's activation (com.microsoft
 * names) parsed from the node, applied in place over rows, or handed to the SGEMM
 * microkernel as its finish; and bias + Z + activation over a GEMM tile (the kernel
 * ak_f32_tile_finish for ReLU, Clip or none). Compiled at -O3 (see cmake/infer.cmake). */
#include <math.h>
#include <string.h>

#include "infer/ops/nn/conv/activation.h"

ak_status ak__nn_parse_activation(const ak__op_ctx *ctx, ak__nn_act *act) {
    const char *name = ak__attr_string(ctx->node, "activation", "");
    const float *p;
    size_t n = ak__attr_floats(ctx->node, "activation_params", &p);
    static const struct { const char *name; int act; size_t nparams; float a, b; } acts[] = {
        {"Relu", AK_NN_ACT_RELU, 0, 0, 0},         {"Clip", AK_NN_ACT_CLIP, 2, -3.4e38f, 3.4e38f},
        {"LeakyRelu", AK_NN_ACT_LEAKY, 1, 0.01f, 0}, {"Sigmoid", AK_NN_ACT_SIGMOID, 0, 0, 0},
        {"Tanh", AK_NN_ACT_TANH, 0, 0, 0},         {"HardSigmoid", AK_NN_ACT_HARDSIGMOID, 2, 0.2f, 0.5f},
    };
    act->kind = AK_NN_ACT_NONE;
    if (!name[0]) return AK_OK;
    for (size_t i = 0; i < sizeof acts / sizeof *acts; i++) {
        if (strcmp(name, acts[i].name) != 0) continue;
        act->kind = acts[i].act;
        act->a = n > 0 ? p[0] : acts[i].a;
        act->b = n > 1 ? p[1] : acts[i].b;
        if (n != 0 && n != acts[i].nparams)
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                              "activation %s takes %zu activation_params, not %zu", name,
                              acts[i].nparams, n);
        return AK_OK;
    }
    return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED, "activation \"%s\"", name);
}

double ak__nn_act_apply(const ak__nn_act *act, double v) {
    double a = act->a, b = act->b;
    switch (act->kind) {
    case AK_NN_ACT_RELU: return v > 0 ? v : 0;
    case AK_NN_ACT_CLIP: return v < a ? a : v > b ? b : v;
    case AK_NN_ACT_LEAKY: return v >= 0 ? v : a * v;
    case AK_NN_ACT_SIGMOID: return 1.0 / (1.0 + exp(-v));
    case AK_NN_ACT_TANH: return tanh(v);
    case AK_NN_ACT_HARDSIGMOID: {
        double h = a * v + b;
        return h < 0 ? 0 : h > 1 ? 1 : h;
    }
    default: return v;
    }
}

/* The activation over rows (rows, cols) of stride ld; Relu and Clip vectorize. */
void ak__nn_act_rows(const ak__nn_act *act, float *y, uint64_t rows, uint64_t cols,
                     uint64_t ld) {
    int kind = act->kind;
    float a = act->a, b = act->b;
    if (kind == AK_NN_ACT_NONE) return;
    for (uint64_t m = 0; m < rows; m++) {
        float *row = y + m * ld;
        if (kind == AK_NN_ACT_RELU)
            for (uint64_t j = 0; j < cols; j++) row[j] = row[j] > 0.0f ? row[j] : 0.0f;
        else if (kind == AK_NN_ACT_CLIP)
            for (uint64_t j = 0; j < cols; j++) {
                float v = row[j] < a ? a : row[j];
                row[j] = v > b ? b : v;
            }
        else
            for (uint64_t j = 0; j < cols; j++) row[j] = (float)ak__nn_act_apply(act, row[j]);
    }
}

int ak__nn_act_fusable(const ak__nn_act *act, const float *bias, const float *z,
                       ak__sgemm_tile_epi *out) {
    static const int kinds[] = {[AK_NN_ACT_NONE] = AK_SGEMM_ACT_NONE,
                                [AK_NN_ACT_RELU] = AK_SGEMM_ACT_MAX,
                                [AK_NN_ACT_CLIP] = AK_SGEMM_ACT_CLAMP};
    if (act->kind != AK_NN_ACT_NONE && act->kind != AK_NN_ACT_RELU && act->kind != AK_NN_ACT_CLIP)
        return 0;
    *out = (ak__sgemm_tile_epi){bias, z, kinds[act->kind],
                                act->kind == AK_NN_ACT_CLIP ? act->a : 0.0f, act->b, NULL};
    return 1;
}

void ak__nn_tile_epilogue(float *y, const float *z, const float *bias, uint64_t ld, size_t m,
                          size_t n, const ak__nn_act *act) {
    ak__sgemm_tile_epi fin;
    if (ak__nn_act_fusable(act, bias, z, &fin)) {
        ak__kernels_active()->f32_tile_finish(y, ld, m, n, &fin);
        return;
    }
    if (bias || z)
        for (size_t r = 0; r < m; r++) {
            float bv = bias ? bias[r] : 0.0f, *yr = y + r * ld;
            if (z) {
                const float *zr = z + r * ld;
                for (size_t j = 0; j < n; j++) yr[j] += bv + zr[j];
            } else {
                for (size_t j = 0; j < n; j++) yr[j] += bv;
            }
        }
    ak__nn_act_rows(act, y, m, n, ld);
}
