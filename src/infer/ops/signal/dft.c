/* DFT (opsets 17 and 20) and STFT (opset 17): discrete Fourier transforms of real or
 * complex signals. A complex tensor is a float tensor whose last dimension is 2 (real,
 * imaginary); a real one has last dimension 1. Outputs are always complex.
 *
 *   DFT-17  axis is an attribute (default 1); input 1 (dft_length) optionally zero-pads
 *           or truncates the signal along the axis.
 *   DFT-20  the same, with the axis as input 2 (default -2).
 *   Both    onesided = 1 keeps the first n/2 + 1 bins; inverse = 1 computes
 *           (1/n) sum x[j] e^{+2 pi i jk/n}. A onesided inverse (complex-to-real) is
 *           refused.
 *   STFT    signal [batch, length, 1|2]; frames of frame_length samples every frame_step
 *           samples, each multiplied by the window (input 2) when given, transformed;
 *           output [batch, frames, bins, 2] with bins = frame_length/2 + 1 when onesided
 *           (the default), else frame_length.
 *
 * Each transform is the direct sum over a cosine/sine table of the transform length,
 * accumulated in double precision: O(n^2) per line, exact to double rounding, which is
 * what matters for the frame sizes these operators see (tens to a few thousand). */
#include <math.h>
#include <string.h>

#include "infer/ops/signal/signal.h"

#define DFT_MAX_LENGTH (INT64_C(1) << 24)

/* cos and sin of 2 pi m / n for m < n, into tab[0..n) and tab[n..2n). */
static void twiddles(double *tab, int64_t n) {
    const double two_pi = 6.283185307179586476925286766559;
    for (int64_t m = 0; m < n; m++) {
        double a = two_pi * (double)m / (double)n;
        tab[m] = cos(a);
        tab[n + m] = sin(a);
    }
}

/* One line of signal: re[j], im[j] for j < n_in (zero beyond), transformed at length n
 * with the twiddle table of n. */
typedef struct dft_line {
    const double *re, *im, *tab;
    int64_t n_in, n;
    int inverse;
} dft_line;

static void dft_bin(const dft_line *l, int64_t k, double *out_re, double *out_im) {
    double sr = 0, si = 0;
    double sign = l->inverse ? 1.0 : -1.0;
    int64_t m = 0, n_used = l->n_in < l->n ? l->n_in : l->n;
    for (int64_t j = 0; j < n_used; j++) {
        double c = l->tab[m], s = sign * l->tab[l->n + m];
        sr += l->re[j] * c - l->im[j] * s;
        si += l->re[j] * s + l->im[j] * c;
        m += k;
        if (m >= l->n) m -= l->n;
    }
    if (l->inverse) {
        sr /= (double)l->n;
        si /= (double)l->n;
    }
    *out_re = sr;
    *out_im = si;
}

static int64_t prod_dims(const int64_t *dims, int begin, int end) {
    int64_t p = 1;
    for (int d = begin; d < end; d++) p *= dims[d];
    return p;
}

static ak_status check_signal(const ak__op_ctx *ctx, const ak__tensor *x, int min_rank) {
    if (!ak__elem_is_float(x->type))
        return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED,
                          "input type %s is not supported (float types only)",
                          ak_elem_type_name(x->type));
    if (x->rank < min_rank)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "input has rank %d, expected >= %d",
                          x->rank, min_rank);
    int64_t c = x->dims[x->rank - 1];
    if (c != 1 && c != 2)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                          "the last dimension is %lld, expected 1 (real) or 2 (complex)",
                          (long long)c);
    return AK_OK;
}

/* ---- DFT ------------------------------------------------------------------------------ */

typedef struct dft_plan {
    int axis;
    int64_t n, n_out;
    uint64_t outer, len, inner, comp;
    int inverse;
} dft_plan;

static ak_status dft_plan_of(const ak__op_ctx *ctx, const ak__tensor *x, dft_plan *p) {
    AK_CHECK(check_signal(ctx, x, 2));
    int r = x->rank;
    int64_t axis;
    if (ctx->node->opset >= 20 && ak__op_in(ctx, 2))
        AK_CHECK(ak__signal_scalar_int(ctx, 2, "axis", &axis));
    else
        axis = ctx->node->opset >= 20 ? -2 : ak__attr_int(ctx->node, "axis", 1);
    if (axis < -r || axis > r - 2 || (axis < 0 && axis > -2))
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                          "axis %lld is outside [-%d, -2] and [0, %d]", (long long)axis, r,
                          r - 2);
    p->axis = (int)(axis < 0 ? axis + r : axis);
    p->len = (uint64_t)x->dims[p->axis];
    p->n = (int64_t)p->len;
    if (ak__op_in(ctx, 1)) {
        AK_CHECK(ak__signal_scalar_int(ctx, 1, "dft_length", &p->n));
        if (p->n <= 0)
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_ARG, "dft_length %lld is not positive",
                              (long long)p->n);
    }
    if (p->n == 0)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_ARG, "the signal along axis %d is empty",
                          p->axis);
    if (p->n > DFT_MAX_LENGTH) /* the twiddle table alone would take 256 MiB */
        return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED,
                          "a transform of length %lld (above 2^24) is not implemented",
                          (long long)p->n);
    p->inverse = ak__attr_int(ctx->node, "inverse", 0) != 0;
    int onesided = ak__attr_int(ctx->node, "onesided", 0) != 0;
    if (onesided && p->inverse)
        return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED,
                          "onesided = 1 with inverse = 1 (a complex-to-real inverse) is not "
                          "implemented");
    p->n_out = onesided ? p->n / 2 + 1 : p->n;
    p->outer = (uint64_t)prod_dims(x->dims, 0, p->axis);
    p->inner = (uint64_t)prod_dims(x->dims, p->axis + 1, r - 1);
    p->comp = (uint64_t)x->dims[r - 1];
    return AK_OK;
}

static ak_status dft_reshape(ak__op_ctx *ctx) {
    const ak__tensor *x;
    AK_CHECK(ak__op_require(ctx, 0, &x));
    dft_plan p;
    AK_CHECK(dft_plan_of(ctx, x, &p));
    int64_t dims[AK_IR_MAX_RANK];
    memcpy(dims, x->dims, (size_t)x->rank * sizeof *dims);
    dims[p.axis] = p.n_out;
    dims[x->rank - 1] = 2;
    /* twiddle table (2n) and one line of the signal (re and im, each max(len, n)) */
    uint64_t line = p.len > (uint64_t)p.n ? p.len : (uint64_t)p.n;
    ctx->workspace_bytes = (size_t)(2 * (uint64_t)p.n + 2 * line) * sizeof(double);
    return ak__op_set_output(ctx, 0, x->type, x->rank, dims);
}

static ak_status dft_run(ak__op_ctx *ctx) {
    const ak__tensor *x = ak__op_in(ctx, 0);
    ak__tensor *y = ak__op_out(ctx, 0);
    if (!y || y->count == 0) return AK_OK;
    dft_plan p;
    AK_CHECK(dft_plan_of(ctx, x, &p));
    uint64_t line = p.len > (uint64_t)p.n ? p.len : (uint64_t)p.n;
    double *tab = ctx->workspace, *re = tab + 2 * p.n, *im = re + line;
    twiddles(tab, p.n);
    dft_line l = {re, im, tab, (int64_t)p.len, p.n, p.inverse};
    for (uint64_t o = 0; o < p.outer; o++)
        for (uint64_t i = 0; i < p.inner; i++) {
            for (uint64_t j = 0; j < p.len; j++) {
                uint64_t at = ((o * p.len + j) * p.inner + i) * p.comp;
                re[j] = ak__elem_get(x->data, x->type, at);
                im[j] = p.comp == 2 ? ak__elem_get(x->data, x->type, at + 1) : 0.0;
            }
            for (int64_t k = 0; k < p.n_out; k++) {
                double vr, vi;
                dft_bin(&l, k, &vr, &vi);
                uint64_t at = ((o * (uint64_t)p.n_out + (uint64_t)k) * p.inner + i) * 2;
                ak__elem_set(y->data, y->type, at, vr);
                ak__elem_set(y->data, y->type, at + 1, vi);
            }
        }
    return AK_OK;
}

const ak__op_def ak__op_dft_17 = {"", "DFT", 17, 0, NULL, NULL, dft_reshape, dft_run};
const ak__op_def ak__op_dft_20 = {"", "DFT", 20, 0, NULL, NULL, dft_reshape, dft_run};

/* ---- STFT ----------------------------------------------------------------------------- */

typedef struct stft_plan {
    int64_t batch, length, comp, step, frame, frames, bins;
} stft_plan;

static ak_status stft_plan_of(const ak__op_ctx *ctx, const ak__tensor *x, stft_plan *p) {
    AK_CHECK(check_signal(ctx, x, 3));
    if (x->rank != 3)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                          "signal has rank %d, expected 3 ([batch, length, 1 or 2])", x->rank);
    p->batch = x->dims[0];
    p->length = x->dims[1];
    p->comp = x->dims[2];
    AK_CHECK(ak__signal_scalar_int(ctx, 1, "frame_step", &p->step));
    const ak__tensor *w = ak__op_in(ctx, 2);
    if (w && (w->rank != 1 || !ak__elem_is_float(w->type)))
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                          "window must be a 1-D float tensor (has rank %d, type %s)", w->rank,
                          ak_elem_type_name(w->type));
    p->frame = w ? w->dims[0] : -1;
    if (ak__op_in(ctx, 3)) {
        int64_t fl;
        AK_CHECK(ak__signal_scalar_int(ctx, 3, "frame_length", &fl));
        if (w && fl != p->frame)
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_ARG,
                              "frame_length %lld differs from the window's length %lld",
                              (long long)fl, (long long)p->frame);
        p->frame = fl;
    }
    if (p->frame < 0)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                          "neither a window nor frame_length is given");
    if (p->frame > DFT_MAX_LENGTH)
        return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED,
                          "a frame of length %lld (above 2^24) is not implemented",
                          (long long)p->frame);
    if (p->step <= 0 || p->frame == 0 || p->frame > p->length)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_ARG,
                          "frame_step %lld must be > 0 and frame_length %lld in [1, %lld]",
                          (long long)p->step, (long long)p->frame, (long long)p->length);
    p->frames = 1 + (p->length - p->frame) / p->step;
    p->bins = ak__attr_int(ctx->node, "onesided", 1) ? p->frame / 2 + 1 : p->frame;
    return AK_OK;
}

static ak_status stft_reshape(ak__op_ctx *ctx) {
    const ak__tensor *x;
    AK_CHECK(ak__op_require(ctx, 0, &x));
    stft_plan p;
    AK_CHECK(stft_plan_of(ctx, x, &p));
    int64_t dims[4] = {p.batch, p.frames, p.bins, 2};
    ctx->workspace_bytes = (size_t)(4 * p.frame) * sizeof(double);
    return ak__op_set_output(ctx, 0, x->type, 4, dims);
}

static ak_status stft_run(ak__op_ctx *ctx) {
    const ak__tensor *x = ak__op_in(ctx, 0), *w = ak__op_in(ctx, 2);
    ak__tensor *y = ak__op_out(ctx, 0);
    if (!y || y->count == 0) return AK_OK;
    stft_plan p;
    AK_CHECK(stft_plan_of(ctx, x, &p));
    double *tab = ctx->workspace, *re = tab + 2 * p.frame, *im = re + p.frame;
    twiddles(tab, p.frame);
    dft_line l = {re, im, tab, p.frame, p.frame, 0};
    for (int64_t b = 0; b < p.batch; b++)
        for (int64_t f = 0; f < p.frames; f++) {
            for (int64_t j = 0; j < p.frame; j++) {
                uint64_t at = (uint64_t)((b * p.length + f * p.step + j) * p.comp);
                double g = w ? ak__elem_get(w->data, w->type, (uint64_t)j) : 1.0;
                re[j] = g * ak__elem_get(x->data, x->type, at);
                im[j] = p.comp == 2 ? g * ak__elem_get(x->data, x->type, at + 1) : 0.0;
            }
            for (int64_t k = 0; k < p.bins; k++) {
                double vr, vi;
                dft_bin(&l, k, &vr, &vi);
                uint64_t at = (uint64_t)(((b * p.frames + f) * p.bins + k) * 2);
                ak__elem_set(y->data, y->type, at, vr);
                ak__elem_set(y->data, y->type, at + 1, vi);
            }
        }
    return AK_OK;
}

const ak__op_def ak__op_stft = {"", "STFT", 17, 0, NULL, NULL, stft_reshape, stft_run};
