/* Calibration for static quantization: the float model runs over every sample with the
 * activations to be quantized made extra graph outputs (so the memory plan keeps them to
 * the end of the run), and each one's range is recorded: MinMax over all samples, or, for
 * the percentile method, a second pass bins the values into a histogram over that range
 * and the range is narrowed to the (100-p)th .. pth percentile, which drops rare outliers
 * that would otherwise widen the quantization step of every other value. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "infer/onnx/onnx_write.h"
#include "infer/quantize/quantize.h"

#define HIST_BINS 4096

typedef struct calib {
    size_t n;
    const char *const *names;
    float *lo, *hi;
    uint64_t *hist; /* n * HIST_BINS, percentile pass */
} calib;

/* The model written and read back with the values named also graph outputs. */
static ak_status calibration_model(const ak_model *model, const char *const *names, size_t n,
                                   ak_model **out) {
    uint8_t *bytes;
    size_t size;
    AK_CHECK(ak__onnx_write_model(model, NULL, &bytes, &size));
    ak_status st = ak_onnx_load_bytes(bytes, size, NULL, out);
    free(bytes);
    AK_CHECK(st);
    ak__ir_graph *g = (*out)->graph;
    int32_t *outs = realloc(g->outputs, (g->num_outputs + n + 1) * sizeof *outs);
    if (!outs) return AK_FAIL(AK_ERR_NO_MEMORY, "quantize: out of memory");
    g->outputs = outs; /* the graph frees it */
    size_t m = g->num_outputs;
    for (size_t i = 0; i < n; i++) {
        int32_t v = ak__ir_value_find(g, names[i]);
        if (v == AK_IR_NONE)
            return AK_FAIL(AK_ERR_INTERNAL, "quantize: value '%.80s' lost in calibration", names[i]);
        if (ak__qz_is_graph_output(g, v) || (g->values[v].flags & AK_IR_VALUE_INPUT)) continue;
        g->values[v].flags |= AK_IR_VALUE_OUTPUT;
        outs[m++] = v;
    }
    g->outputs = outs;
    g->num_outputs = m;
    return AK_OK;
}

static ak_status check_float(const char *name, const ak_tensor *t) {
    if (t->type != AK_ELEM_F32)
        return AK_FAIL(AK_ERR_UNSUPPORTED, "quantize: activation '%.80s' is %s, only float32 "
                       "activations are quantized", name, ak_elem_type_name(t->type));
    return AK_OK;
}

static size_t numel(const ak_tensor *t) {
    size_t count = 1;
    for (int i = 0; i < t->rank; i++) count *= (size_t)t->dims[i];
    return count;
}

static void record_range(calib *c, size_t i, const ak_tensor *t) {
    const float *x = t->data;
    for (size_t j = 0, count = numel(t); j < count; j++) {
        if (x[j] < c->lo[i]) c->lo[i] = x[j];
        if (x[j] > c->hi[i]) c->hi[i] = x[j];
    }
}

static void record_histogram(calib *c, size_t i, const ak_tensor *t) {
    const float *x = t->data;
    uint64_t *h = c->hist + i * HIST_BINS;
    double lo = c->lo[i], width = ((double)c->hi[i] - lo) / HIST_BINS;
    if (!(width > 0)) return;
    for (size_t j = 0, count = numel(t); j < count; j++) {
        long b = (long)(((double)x[j] - lo) / width);
        h[b < 0 ? 0 : b >= HIST_BINS ? HIST_BINS - 1 : b]++;
    }
}

/* Narrows [lo, hi] of value i to the bins holding the central p% of its values. */
static void apply_percentile(calib *c, size_t i, double p) {
    const uint64_t *h = c->hist + i * HIST_BINS;
    uint64_t total = 0;
    for (int b = 0; b < HIST_BINS; b++) total += h[b];
    if (!total) return;
    double width = ((double)c->hi[i] - c->lo[i]) / HIST_BINS, tail = (1.0 - p / 100.0) * total;
    uint64_t seen = 0;
    int first = 0, last = HIST_BINS - 1;
    while (first < HIST_BINS - 1 && (double)(seen + h[first]) <= tail) seen += h[first++];
    seen = 0;
    while (last > first && (double)(seen + h[last]) <= tail) seen += h[last--];
    float lo = c->lo[i];
    c->lo[i] = (float)(lo + first * width);
    c->hi[i] = (float)(lo + (last + 1) * width);
}

/* One pass over the samples; histogram 0: ranges, 1: histograms. */
static ak_status run_pass(ak_session *s, const ak_quantize_options *o, calib *c, int histogram,
                          ak_tensor *outs) {
    for (size_t k = 0; k < o->num_samples; k++) {
        AK_CHECK(ak_session_run(s, o->input_names, o->inputs + k * o->num_inputs, o->num_inputs,
                                c->names, outs, c->n));
        for (size_t i = 0; i < c->n; i++) {
            AK_CHECK(check_float(c->names[i], &outs[i]));
            if (histogram)
                record_histogram(c, i, &outs[i]);
            else
                record_range(c, i, &outs[i]);
        }
    }
    return AK_OK;
}

static ak_status calibrate_session(ak_session *s, const ak_quantize_options *o, calib *c) {
    ak_tensor *outs = calloc(c->n ? c->n : 1, sizeof *outs);
    if (!outs) return AK_FAIL(AK_ERR_NO_MEMORY, "quantize: out of memory");
    for (size_t i = 0; i < c->n; i++) c->lo[i] = INFINITY, c->hi[i] = -INFINITY;
    ak_status st = run_pass(s, o, c, 0, outs);
    if (st == AK_OK && o->method == AK_CALIBRATE_PERCENTILE) {
        c->hist = calloc(c->n * HIST_BINS, sizeof *c->hist);
        st = c->hist ? run_pass(s, o, c, 1, outs)
                     : AK_FAIL(AK_ERR_NO_MEMORY, "quantize: out of memory for the histograms");
        for (size_t i = 0; st == AK_OK && i < c->n; i++) apply_percentile(c, i, o->percentile);
        free(c->hist);
    }
    free(outs);
    return st;
}

ak_status ak__qz_calibrate(const ak_model *model, const char *const *names, size_t n,
                           const ak_quantize_options *opts, float *lo, float *hi) {
    ak_model *m;
    ak_status st = calibration_model(model, names, n, &m);
    if (st != AK_OK) {
        ak_model_free(m);
        return st;
    }
    ak_session_options so;
    ak_session_options_init(&so);
    so.optimize = AK_OPTIMIZE_NONE; /* the float values exactly as the model computes them */
    so.threads = opts->threads;
    ak_session *s;
    st = ak_session_create(m, &so, &s);
    if (st == AK_OK) {
        calib c = {n, names, lo, hi, NULL};
        st = calibrate_session(s, opts, &c);
        ak_session_free(s);
    }
    ak_model_free(m);
    return st;
}
