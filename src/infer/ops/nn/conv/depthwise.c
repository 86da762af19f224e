/* Depthwise 2-D convolution of one plane (Conv with group == C == M), the MobileNet case.
 *
 * The input plane is first copied into scratch with its padding made explicit and its
 * columns split by phase modulo the horizontal stride: padded column c lands in phase
 * c % sw at index c / sw. Output column ox then reads tap kx at index ox + (kx*dw)/sw of
 * phase (kx*dw) % sw, so every tap is a contiguous, bounds-free run for any stride and
 * dilation, and 8 outputs are one vector load + FMA per tap. Phase rows are padded to a
 * multiple of 8 (plus slack) so full-vector loads never leave the scratch.
 *
 * A call handles a run of planes with one scratch: the padding zeros are the same for
 * every plane of a layer, so they are written once per call and each plane copies only
 * its interior. Bias, Z and a ReLU/Clip activation are applied in registers before the
 * store. On MobileNetV2's 7x7 and 14x14 planes these per-plane costs (memsets, calls,
 * a second pass for Z and the activation) had outweighed the 9 FMAs per output.
 *
 * The loops are kernels (kernels/kf_infer.h): ak_f32_dw_rows over a phase-split plane,
 * ak_f32_strided_copy for its rows, ak_f32_dw8_planes for eight interleaved planes. */
#include <string.h>

#include "infer/ops/nn/common.h"
#include "infer/ops/nn/conv/activation.h"
#include "infer/ops/nn/conv/depthwise.h"
#include "kernels/dispatch.h"

static size_t round8(size_t v) { return (v + 7) & ~(size_t)7; }

/* Layout of the phase-split padded plane. */
typedef struct dw_layout {
    size_t rows, phases, width; /* width: floats per phase row */
} dw_layout;

static dw_layout dw_layout_of(const ak__nn_geom *g) {
    dw_layout l;
    l.rows = (size_t)((g->out[0] - 1) * g->s[0] + (g->k[0] - 1) * g->d[0] + 1);
    l.phases = (size_t)g->s[1];
    l.width = round8(round8((size_t)g->out[1]) + (size_t)((g->k[1] - 1) * g->d[1] / g->s[1]));
    return l;
}

/* The channel-interleaved layout (8 planes at once): the padded input rows × columns
 * and the output positions (room for a multiple of 8 of them), 8 floats each. */
typedef struct dw8_layout {
    size_t rows, cols, out;
} dw8_layout;

static dw8_layout dw8_layout_of(const ak__nn_geom *g) {
    dw8_layout l;
    l.rows = (size_t)((g->out[0] - 1) * g->s[0] + (g->k[0] - 1) * g->d[0] + 1);
    l.cols = (size_t)((g->out[1] - 1) * g->s[1] + (g->k[1] - 1) * g->d[1] + 1);
    l.out = (size_t)(g->out[0] * g->out[1]);
    return l;
}

static size_t dw_phase_floats(const dw_layout *l) { return l->rows * l->phases * l->width; }

size_t ak__nn_dw_scratch_floats(const ak__nn_geom *g) {
    dw_layout l = dw_layout_of(g);
    dw8_layout l8 = dw8_layout_of(g);
    /* the phase-split plane, then (8-float aligned) the interleaved input and output */
    return round8(dw_phase_floats(&l)) + 8 * (l8.rows * l8.cols + round8(l8.out));
}

/* Copies the interior of `in` (H, W) into the phase-split padded layout; the padding
 * positions are left as they are (zeroed once per call). */
static void dw_fill(const ak__nn_geom *g, const dw_layout *l, const float *in, float *sc,
                    ak__kf_strided_copy *copy) {
    int64_t H = g->in[0], W = g->in[1], pt = g->pb[0], pl = g->pb[1], sw = g->s[1];
    int64_t w = (int64_t)l->width;
    for (size_t r = 0; r < l->rows; r++) {
        int64_t iy = (int64_t)r - pt;
        if (iy < 0 || iy >= H) continue;
        const float *src = in + iy * W;
        float *row = sc + r * l->phases * l->width;
        for (size_t q = 0; q < l->phases; q++) { /* valid j: 0 <= j*sw + q - pl < W */
            int64_t off = (int64_t)q - pl;
            int64_t lo = off >= 0 ? 0 : (-off + sw - 1) / sw;
            int64_t hi = W - 1 - off < 0 ? 0 : (W - 1 - off) / sw + 1;
            if (hi > w) hi = w;
            if (hi <= lo) continue;
            const float *s = src + off + lo * sw;
            float *dst = row + q * l->width + lo;
            copy(dst, s, hi - lo, sw);
        }
    }
}

/* Offsets of each tap relative to the first padded row of an output row. */
static size_t dw_taps(const ak__nn_geom *g, const dw_layout *l, size_t *off) {
    size_t t = 0;
    for (int64_t ky = 0; ky < g->k[0]; ky++)
        for (int64_t kx = 0; kx < g->k[1]; kx++) {
            size_t c = (size_t)(kx * g->d[1]);
            off[t++] = (size_t)(ky * g->d[0]) * l->phases * l->width +
                       (c % l->phases) * l->width + c / l->phases;
        }
    return t;
}

/* Planes [begin, end) of a depthwise convolution: plane i = n*C + c reads x plane i and
 * filter c. */
/* Planes i .. i+7 (channels c .. c+7 of one image) through the interleaved kernel: the
 * 8 filters interleaved tap by tap, then fill, compute and store in the kernel. */
static void dw8_planes(const ak__nn_dw_args *a, const dw8_layout *l, size_t i, float *sc8,
                       float *out8, const size_t *off, size_t taps, const ak__sgemm_tile_epi *fin,
                       ak__kf_dw8_planes *kernel) {
    const ak__nn_geom *g = a->g;
    uint64_t c = i % a->C;
    float wt[AK_NN_DW_MAX_TAPS * 8] __attribute__((aligned(32))), bias[8];
    for (size_t t = 0; t < taps; t++)
        for (int j = 0; j < 8; j++) wt[8 * t + (size_t)j] = a->w[(c + (uint64_t)j) * taps + t];
    for (int j = 0; j < 8; j++) bias[j] = a->b ? a->b[c + (uint64_t)j] : 0.0f;
    ak__kf_dw8 k = {.x = a->x + i * a->Pin, .Pin = a->Pin, .P = a->P, .H = g->in[0],
                    .W = g->in[1], .pt = g->pb[0], .pl = g->pb[1], .s0 = g->s[0], .s1 = g->s[1],
                    .rows = l->rows, .cols = l->cols, .OW = (size_t)g->out[1], .wt = wt,
                    .bias8 = bias, .off = off, .taps = taps, .sc8 = sc8, .out8 = out8,
                    .z = a->z ? a->z + i * a->P : NULL, .y = a->y + i * a->P};
    kernel(&k, fin);
}

/* Planes [begin, end) of a depthwise convolution: plane i = n*C + c reads x plane i and
 * filter c. */
void ak__nn_dw_planes(const ak__nn_dw_args *a, size_t begin, size_t end, float *scratch) {
    const ak__nn_geom *g = a->g;
    const ak__kernels *k = ak__kernels_active();
    dw_layout l = dw_layout_of(g);
    size_t off[AK_NN_DW_MAX_TAPS];
    size_t taps = dw_taps(g, &l, off);
    /* the kernels apply ReLU and Clip themselves; anything else runs afterwards */
    ak__sgemm_tile_epi fin;
    int inline_act = ak__nn_act_fusable(&a->act, NULL, NULL, &fin);
    if (!inline_act) fin = (ak__sgemm_tile_epi){NULL, NULL, AK_SGEMM_ACT_NONE, 0.0f, 0.0f, NULL};
    int phase_zeroed = 0, use8 = ak__nn_dw_interleaves(a);
    dw8_layout l8 = dw8_layout_of(g);
    float *sc8 = scratch + round8(dw_phase_floats(&l)), *out8 = sc8 + 8 * l8.rows * l8.cols;
    if (use8) memset(sc8, 0, 8 * l8.rows * l8.cols * sizeof *sc8);
    /* the taps' offsets in the interleaved rows: the phase layout's with one phase, × 8 */
    size_t off8[AK_NN_DW_MAX_TAPS];
    dw_taps(g, &(dw_layout){l8.rows, 1, l8.cols}, off8);
    for (size_t t = 0; t < taps; t++) off8[t] *= 8;
    size_t row_step = (size_t)g->s[0] * l.phases * l.width;
    for (size_t i = begin; i < end;) {
        uint64_t c = i % a->C;
        size_t planes = use8 && c % 8 == 0 && c + 8 <= a->C && i + 8 <= end ? 8 : 1;
        if (planes == 8) {
            dw8_planes(a, &l8, i, sc8, out8, off8, taps, &fin, k->f32_dw8_planes);
        } else {
            if (!phase_zeroed) memset(scratch, 0, dw_phase_floats(&l) * sizeof *scratch);
            phase_zeroed = 1;
            dw_fill(g, &l, a->x + i * a->Pin, scratch, k->f32_strided_copy);
            ak__kf_dw_plane pp = {scratch, off, a->w + c * taps, taps, (size_t)g->out[0],
                                  (size_t)g->out[1], row_step, a->b ? a->b[c] : 0.0f,
                                  a->z ? a->z + i * a->P : NULL, a->y + i * a->P};
            k->f32_dw_rows(&pp, &fin);
        }
        if (!inline_act) ak__nn_act_rows(&a->act, a->y + i * a->P, planes, a->P, a->P);
        i += planes;
    }
}

/* Whether runs of 8 channels take the interleaved path: on planes whose rows are too
 * short for the row vectors (7×7 to 28×28 in MobileNetV2), where one 8-channel vector
 * per output position wastes no lanes, and on strided ones, whose phase split it does
 * not need (measured per MobileNetV2 layer with AVX2; at 56 and 112 wide with stride 1
 * the row vectors are as fast or faster). */
int ak__nn_dw_interleaves(const ak__nn_dw_args *a) {
    return a->C >= 8 && (a->g->out[1] <= AK_NN_DW8_MAX_WIDTH || a->g->s[1] > 1);
}
