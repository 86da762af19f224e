/* Resize (opsets 10, 11, 13, 18) and Upsample (7, 9): nearest, n-linear and cubic
 * interpolation over any subset of axes.
 *
 * Every axis gets a table of taps (source index, weight) per output position, computed
 * from the coordinate transformation in double precision. Nearest gathers elements of any
 * type directly through those tables; linear and cubic are separable, so they run as one
 * 1-D pass per resized axis over float buffers (the input converted first when it is not
 * float32), which costs O(size x taps) per axis instead of taps^rank per element. */
#include <math.h>
#include <string.h>

#include "infer/ops/tensor/tensor_ops.h"
#include "infer/runtime/op.h"

#define RS_MAX_TAPS 4

enum { RS_NEAREST, RS_LINEAR, RS_CUBIC };
enum {
    CT_HALF_PIXEL,
    CT_HALF_PIXEL_SYMMETRIC,
    CT_PYTORCH_HALF_PIXEL,
    CT_ALIGN_CORNERS,
    CT_ASYMMETRIC,
    CT_TF_HALF_PIXEL_FOR_NN,
    CT_TF_CROP_AND_RESIZE,
};
/* NM_SIMPLE: Resize-10 and Upsample, which predate nearest_mode (truncate when
 * upsampling, ceil when downsampling, as the runtimes of that time did) */
enum { NM_ROUND_PREFER_FLOOR, NM_ROUND_PREFER_CEIL, NM_FLOOR, NM_CEIL, NM_SIMPLE };
enum { KAR_STRETCH, KAR_NOT_LARGER, KAR_NOT_SMALLER };

typedef struct rs_state {
    int upsample; /* Upsample rather than Resize */
    int mode, coord, nearest, exclude_outside, keep_aspect, antialias;
    float cubic_a, extrapolation;
    size_t num_axes; /* opset 18 `axes`; 0 = all */
    int64_t axes[AK_IR_MAX_RANK];
    size_t num_attr_scales; /* Upsample-7 `scales` attribute */
    float attr_scales[AK_IR_MAX_RANK];
} rs_state;

/* What reshape and run both derive from the inputs: output dims, the scale each axis
 * uses in its coordinate transformation, and the tf_crop_and_resize region. */
typedef struct rs_plan {
    int rank;
    int64_t in[AK_IR_MAX_RANK], out[AK_IR_MAX_RANK];
    double scale[AK_IR_MAX_RANK];
    /* output length the coordinate transformation sees: in * scale with scales (not
     * rounded, as the ONNX reference computes align_corners), the size with sizes */
    double len_out[AK_IR_MAX_RANK];
    double roi_start[AK_IR_MAX_RANK], roi_end[AK_IR_MAX_RANK];
} rs_plan;

/* ---- attributes ---------------------------------------------------------------------- */

static int parse_enum(const char *s, const char *const *names, int n) {
    for (int i = 0; i < n; i++)
        if (strcmp(s, names[i]) == 0) return i;
    return -1;
}

static ak_status rs_parse_modes(const ak__ir_node *node, rs_state *st) {
    static const char *const modes[] = {"nearest", "linear", "cubic", "bilinear", "trilinear"};
    const char *mode = ak__attr_string(node, "mode", "nearest");
    int m = parse_enum(mode, modes, 5);
    if (m < 0 || (st->upsample && m == RS_CUBIC))
        return AK_OP_FAIL(node, AK_ERR_INVALID_MODEL, "unknown mode '%s'", mode);
    st->mode = m >= 3 ? RS_LINEAR : m;
    if (st->upsample || node->opset < 11) { /* fixed semantics before Resize-11 */
        st->coord = CT_ASYMMETRIC;
        st->nearest = NM_SIMPLE;
        return AK_OK;
    }
    static const char *const coords[] = {"half_pixel",   "half_pixel_symmetric",
                                         "pytorch_half_pixel", "align_corners",
                                         "asymmetric",   "tf_half_pixel_for_nn",
                                         "tf_crop_and_resize"};
    const char *coord = ak__attr_string(node, "coordinate_transformation_mode", "half_pixel");
    st->coord = parse_enum(coord, coords, 7);
    if (st->coord < 0)
        return AK_OP_FAIL(node, AK_ERR_INVALID_MODEL,
                          "unknown coordinate_transformation_mode '%s'", coord);
    static const char *const nearests[] = {"round_prefer_floor", "round_prefer_ceil", "floor",
                                           "ceil"};
    const char *nm = ak__attr_string(node, "nearest_mode", "round_prefer_floor");
    st->nearest = parse_enum(nm, nearests, 4);
    if (st->nearest < 0)
        return AK_OP_FAIL(node, AK_ERR_INVALID_MODEL, "unknown nearest_mode '%s'", nm);
    return AK_OK;
}

static ak_status rs_parse_v18(const ak__ir_node *node, rs_state *st) {
    static const char *const policies[] = {"stretch", "not_larger", "not_smaller"};
    const char *kar = ak__attr_string(node, "keep_aspect_ratio_policy", "stretch");
    st->keep_aspect = parse_enum(kar, policies, 3);
    if (st->keep_aspect < 0)
        return AK_OP_FAIL(node, AK_ERR_INVALID_MODEL, "unknown keep_aspect_ratio_policy '%s'",
                          kar);
    st->antialias = ak__attr_int(node, "antialias", 0) != 0;
    if (st->antialias && st->mode != RS_NEAREST)
        return AK_OP_FAIL(node, AK_ERR_UNSUPPORTED, "antialias is not supported");
    const int64_t *axes;
    st->num_axes = ak__attr_ints(node, "axes", &axes);
    if (st->num_axes > AK_IR_MAX_RANK)
        return AK_OP_FAIL(node, AK_ERR_INVALID_MODEL, "too many axes (%zu)", st->num_axes);
    if (st->num_axes) memcpy(st->axes, axes, st->num_axes * sizeof *axes); /* axes is NULL without it */
    return AK_OK;
}

static ak_status rs_create_common(const ak__ir_node *node, int upsample, void **state) {
    rs_state *st;
    AK_CHECK(ak_alloc(sizeof *st, (void **)&st));
    memset(st, 0, sizeof *st);
    st->upsample = upsample;
    st->cubic_a = ak__attr_float(node, "cubic_coeff_a", -0.75f);
    st->exclude_outside = ak__attr_int(node, "exclude_outside", 0) != 0;
    st->extrapolation = ak__attr_float(node, "extrapolation_value", 0.0f);
    ak_status s = rs_parse_modes(node, st);
    if (s == AK_OK && !upsample && node->opset >= 18) s = rs_parse_v18(node, st);
    if (s == AK_OK && upsample && node->opset < 9) {
        const float *sc;
        st->num_attr_scales = ak__attr_floats(node, "scales", &sc);
        if (st->num_attr_scales == 0 || st->num_attr_scales > AK_IR_MAX_RANK)
            s = AK_OP_FAIL(node, AK_ERR_INVALID_MODEL, "attribute scales is required");
        else
            memcpy(st->attr_scales, sc, st->num_attr_scales * sizeof *sc);
    }
    if (s != AK_OK) {
        ak_free(st);
        return s;
    }
    *state = st;
    return AK_OK;
}

static ak_status rs_create(const ak__ir_node *node, const ak__tensor *const *consts,
                           void **state) {
    return rs_create_common(node, 0, state);
}

static ak_status up_create(const ak__ir_node *node, const ak__tensor *const *consts,
                           void **state) {
    return rs_create_common(node, 1, state);
}

static void rs_destroy(void *state) { ak_free(state); }

/* ---- output shape -------------------------------------------------------------------- */

/* Input i when present and non-empty (opset 11 passes empty tensors for unused inputs). */
static const ak__tensor *rs_input(const ak__op_ctx *ctx, uint32_t i) {
    const ak__tensor *t = ak__op_in(ctx, i);
    return t && t->count > 0 ? t : NULL;
}

/* The axes scales/sizes/roi refer to, into axes[] (rank entries when not given). */
static ak_status rs_axes(const ak__op_ctx *ctx, const rs_state *st, int rank, int *axes,
                         int *n) {
    if (st->num_axes == 0) {
        for (int d = 0; d < rank; d++) axes[d] = d;
        *n = rank;
        return AK_OK;
    }
    int seen[AK_IR_MAX_RANK] = {0};
    for (size_t k = 0; k < st->num_axes; k++) {
        AK_CHECK(ak__op_axis(ctx, st->axes[k], rank, 0, &axes[k]));
        if (seen[axes[k]]++)
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "axis %d repeats", axes[k]);
    }
    *n = (int)st->num_axes;
    return AK_OK;
}

static ak_status rs_check_scale(const ak__op_ctx *ctx, double s, int axis) {
    if (!(s > 0.0) || !isfinite(s))
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "scale %g of axis %d is not positive",
                          s, axis);
    return AK_OK;
}

static ak_status rs_from_scales(const ak__op_ctx *ctx, const ak__tensor *scales,
                                const float *attr, size_t nattr, const int *axes, int n,
                                rs_plan *p) {
    size_t count = scales ? (size_t)scales->count : nattr;
    if (count != (size_t)n)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                          "scales has %zu entries, expected %d", count, n);
    if (scales && !ak__elem_is_float(scales->type))
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "scales has type %s, expected float",
                          ak_elem_type_name(scales->type));
    for (int k = 0; k < n; k++) {
        double s = scales ? (double)(float)ak__elem_get(scales->data, scales->type, (uint64_t)k)
                          : (double)attr[k];
        AK_CHECK(rs_check_scale(ctx, s, axes[k]));
        double o = floor((double)p->in[axes[k]] * s);
        if (o > 4.0e18)
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "scale %g is too large", s);
        p->scale[axes[k]] = s;
        p->out[axes[k]] = (int64_t)o;
        p->len_out[axes[k]] = (double)p->in[axes[k]] * s;
    }
    return AK_OK;
}

static ak_status rs_from_sizes(const ak__op_ctx *ctx, const rs_state *st,
                               const ak__tensor *sizes, const int *axes, int n, rs_plan *p) {
    int64_t sz[AK_IR_MAX_RANK];
    size_t count;
    AK_CHECK(ak__op_read_ints(ctx, sizes, "sizes", sz, AK_IR_MAX_RANK, &count));
    if (count != (size_t)n)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "sizes has %zu entries, expected %d",
                          count, n);
    for (int k = 0; k < n; k++) {
        if (sz[k] < 0)
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "sizes[%d] is negative", k);
        if (p->in[axes[k]] == 0 && sz[k] > 0)
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "cannot resize an empty axis %d",
                              axes[k]);
    }
    if (st->keep_aspect != KAR_STRETCH) { /* one scale for all the axes listed */
        double s = st->keep_aspect == KAR_NOT_LARGER ? INFINITY : 0.0;
        for (int k = 0; k < n; k++) {
            double r = (double)sz[k] / (double)p->in[axes[k]];
            s = st->keep_aspect == KAR_NOT_LARGER ? fmin(s, r) : fmax(s, r);
        }
        for (int k = 0; k < n; k++) {
            AK_CHECK(rs_check_scale(ctx, s, axes[k]));
            p->scale[axes[k]] = s;
            p->out[axes[k]] = (int64_t)floor(s * (double)p->in[axes[k]] + 0.5);
            p->len_out[axes[k]] = (double)p->out[axes[k]];
        }
        return AK_OK;
    }
    for (int k = 0; k < n; k++) {
        int64_t in = p->in[axes[k]];
        p->out[axes[k]] = sz[k];
        p->len_out[axes[k]] = (double)sz[k];
        p->scale[axes[k]] = in > 0 ? (double)sz[k] / (double)in : 1.0;
    }
    return AK_OK;
}

static ak_status rs_read_roi(const ak__op_ctx *ctx, const ak__tensor *roi, const int *axes,
                             int n, rs_plan *p) {
    if (!roi)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                          "tf_crop_and_resize needs the roi input");
    if (roi->count != 2 * (uint64_t)n || !ak__elem_is_float(roi->type))
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                          "roi must hold %d floats (starts then ends)", 2 * n);
    for (int k = 0; k < n; k++) {
        p->roi_start[axes[k]] = ak__elem_get(roi->data, roi->type, (uint64_t)k);
        p->roi_end[axes[k]] = ak__elem_get(roi->data, roi->type, (uint64_t)(k + n));
    }
    return AK_OK;
}

static ak_status rs_make_plan(const ak__op_ctx *ctx, const rs_state *st, rs_plan *p) {
    const ak__tensor *x;
    AK_CHECK(ak__op_require(ctx, 0, &x));
    p->rank = x->rank;
    for (int d = 0; d < x->rank; d++) {
        p->in[d] = p->out[d] = x->dims[d];
        p->scale[d] = 1.0;
        p->len_out[d] = (double)x->dims[d];
        p->roi_start[d] = 0.0;
        p->roi_end[d] = 1.0;
    }
    int axes[AK_IR_MAX_RANK], n = 0;
    AK_CHECK(rs_axes(ctx, st, x->rank, axes, &n));
    if (st->upsample || ctx->node->opset < 11) { /* X, scales (or the attribute) */
        const ak__tensor *scales = st->num_attr_scales ? NULL : ak__op_in(ctx, 1);
        if (!scales && !st->num_attr_scales)
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "input 1 (scales) is required");
        return rs_from_scales(ctx, scales, st->attr_scales, st->num_attr_scales, axes, n, p);
    }
    const ak__tensor *scales = rs_input(ctx, 2), *sizes = rs_input(ctx, 3);
    if (!!scales == !!sizes)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                          "exactly one of scales and sizes must be given");
    if (scales)
        AK_CHECK(rs_from_scales(ctx, scales, NULL, 0, axes, n, p));
    else
        AK_CHECK(rs_from_sizes(ctx, st, sizes, axes, n, p));
    if (st->coord == CT_TF_CROP_AND_RESIZE)
        AK_CHECK(rs_read_roi(ctx, rs_input(ctx, 1), axes, n, p));
    return AK_OK;
}

/* ---- taps ---------------------------------------------------------------------------- */

/* Per axis: for each output position up to RS_MAX_TAPS (index, weight) pairs; count 0
 * marks a position outside the tf_crop_and_resize region (extrapolation_value). */
typedef struct rs_taps {
    int64_t *idx;
    float *w;
    int32_t *n;
    int identity; /* every position reads its own index with weight 1 */
} rs_taps;

static double rs_coord(const rs_state *st, const rs_plan *p, int d, int64_t o) {
    double s = p->scale[d], x = (double)o;
    double len_in = (double)p->in[d], len_out = p->len_out[d];
    switch (st->coord) {
    case CT_HALF_PIXEL: return (x + 0.5) / s - 0.5;
    case CT_HALF_PIXEL_SYMMETRIC: {
        double adj = (double)p->out[d] / (s * len_in), center = len_in / 2.0;
        return center * (1.0 - adj) + (x + 0.5) / s - 0.5;
    }
    case CT_PYTORCH_HALF_PIXEL: return len_out > 1.0 ? (x + 0.5) / s - 0.5 : 0.0;
    case CT_ALIGN_CORNERS: return len_out > 1.0 ? x * (len_in - 1.0) / (len_out - 1.0) : 0.0;
    case CT_TF_HALF_PIXEL_FOR_NN: return (x + 0.5) / s;
    case CT_TF_CROP_AND_RESIZE: {
        double a = p->roi_start[d], b = p->roi_end[d];
        if (len_out > 1.0)
            return a * (len_in - 1.0) + x * (b - a) * (len_in - 1.0) / (len_out - 1.0);
        return 0.5 * (a + b) * (len_in - 1.0);
    }
    default: return x / s; /* asymmetric */
    }
}

static int64_t rs_nearest(const rs_state *st, double x, double scale) {
    double f = floor(x), r = x - f;
    if (r == 0.0) return (int64_t)f;
    switch (st->nearest) {
    case NM_ROUND_PREFER_FLOOR: return (int64_t)(r <= 0.5 ? f : f + 1.0);
    case NM_ROUND_PREFER_CEIL: return (int64_t)(r < 0.5 ? f : f + 1.0);
    case NM_FLOOR: return (int64_t)f;
    case NM_CEIL: return (int64_t)f + 1;
    default: return scale < 1.0 ? (int64_t)ceil(x) : (int64_t)trunc(x);
    }
}

static int64_t clamp_idx(double v, int64_t len) {
    if (v < 0.0) return 0;
    if (v > (double)(len - 1)) return len - 1;
    return (int64_t)v;
}

static void rs_cubic_weights(double t, double a, double *w) {
    double d[4] = {t + 1.0, t, 1.0 - t, 2.0 - t};
    for (int k = 0; k < 4; k++) {
        double z = d[k];
        w[k] = z <= 1.0 ? ((a + 2.0) * z - (a + 3.0)) * z * z + 1.0
                        : ((a * z - 5.0 * a) * z + 8.0 * a) * z - 4.0 * a;
    }
}

/* Fills taps for output position o of axis d; returns the tap count. */
static int rs_taps_at(const rs_state *st, const rs_plan *p, int d, int64_t o, int64_t *idx,
                      float *w) {
    int64_t len = p->in[d];
    double x = rs_coord(st, p, d, o);
    if (st->coord == CT_TF_CROP_AND_RESIZE && (x < 0.0 || x > (double)(len - 1))) return 0;
    if (st->mode == RS_NEAREST) {
        int64_t i = rs_nearest(st, x, p->scale[d]);
        idx[0] = i < 0 ? 0 : i >= len ? len - 1 : i;
        w[0] = 1.0f;
        return 1;
    }
    double f = floor(x), t = x - f, cw[4];
    int n = 0, ntaps;
    double base;
    if (st->mode == RS_LINEAR) {
        cw[0] = 1.0 - t;
        cw[1] = t;
        ntaps = 2;
        base = f;
    } else {
        rs_cubic_weights(t, st->cubic_a, cw);
        ntaps = 4;
        base = f - 1.0;
    }
    double sum = 0.0;
    for (int k = 0; k < ntaps; k++) {
        double pos = base + k;
        if (st->exclude_outside && (pos < 0.0 || pos > (double)(len - 1))) cw[k] = 0.0;
        sum += cw[k];
    }
    double norm = st->exclude_outside && sum != 0.0 ? 1.0 / sum : 1.0;
    for (int k = 0; k < ntaps; k++) {
        if (cw[k] == 0.0) continue; /* zero taps cost time and change nothing */
        idx[n] = clamp_idx(base + k, len);
        w[n++] = (float)(cw[k] * norm);
    }
    if (n == 0) { /* all weights cancelled: read the nearest element with weight 0 */
        idx[0] = clamp_idx(f, len);
        w[0] = 0.0f;
        n = 1;
    }
    return n;
}

static void rs_fill_taps(const rs_state *st, const rs_plan *p, int d, rs_taps *t) {
    int identity = p->in[d] == p->out[d];
    for (int64_t o = 0; o < p->out[d]; o++) {
        int64_t *idx = t->idx + o * RS_MAX_TAPS;
        float *w = t->w + o * RS_MAX_TAPS;
        t->n[o] = rs_taps_at(st, p, d, o, idx, w);
        if (t->n[o] != 1 || idx[0] != o || w[0] != 1.0f) identity = 0;
    }
    t->identity = identity;
}

/* ---- workspace layout ---------------------------------------------------------------- */

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

static size_t rs_taps_bytes(int64_t out) {
    size_t o = (size_t)out;
    return align64(o * RS_MAX_TAPS * sizeof(int64_t)) + align64(o * RS_MAX_TAPS * sizeof(float)) +
           align64(o * sizeof(int32_t));
}

/* Largest float buffer a separable pass reads or writes (every axis assumed resized);
 * UINT64_MAX when it would not fit in memory anyway. */
static uint64_t rs_max_buffer(const rs_plan *p) {
    double cur = 1.0, best;
    for (int d = 0; d < p->rank; d++) cur *= (double)p->in[d];
    best = cur;
    for (int d = 0; d < p->rank && cur > 0.0; d++) {
        cur = cur / (double)p->in[d] * (double)p->out[d];
        if (cur > best) best = cur;
    }
    return best > 1e18 ? UINT64_MAX : (uint64_t)best;
}

/* Carves the taps tables out of the workspace; returns the bytes used. */
static size_t rs_layout_taps(const rs_plan *p, char *ws, rs_taps *taps) {
    size_t off = 0;
    for (int d = 0; d < p->rank; d++) {
        size_t o = (size_t)p->out[d];
        if (ws) {
            taps[d].idx = (int64_t *)(ws + off);
            taps[d].w = (float *)(ws + off + align64(o * RS_MAX_TAPS * sizeof(int64_t)));
            taps[d].n = (int32_t *)(ws + off + align64(o * RS_MAX_TAPS * sizeof(int64_t)) +
                                    align64(o * RS_MAX_TAPS * sizeof(float)));
        }
        off += rs_taps_bytes(p->out[d]);
    }
    return off;
}

static ak_status rs_reshape(ak__op_ctx *ctx) {
    const rs_state *st = ctx->state;
    rs_plan p;
    AK_CHECK(rs_make_plan(ctx, st, &p));
    const ak__tensor *x = ctx->inputs[0];
    if (x->type == AK_ELEM_STRING || ak_elem_type_size(x->type) == 0)
        return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED, "type %s is not supported",
                          ak_elem_type_name(x->type));
    if (st->mode != RS_NEAREST && !ak__elem_is_float(x->type) && !ak__elem_is_integer(x->type))
        return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED, "%s interpolation of type %s",
                          st->mode == RS_LINEAR ? "linear" : "cubic", ak_elem_type_name(x->type));
    for (int d = 0; d < p.rank; d++)
        if (p.out[d] > ((int64_t)1 << 40))
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "output axis %d is too large", d);
    AK_CHECK(ak__op_set_output(ctx, 0, x->type, p.rank, p.out));
    size_t bytes = rs_layout_taps(&p, NULL, NULL);
    if (st->mode != RS_NEAREST) {
        uint64_t buf = rs_max_buffer(&p);
        if (buf > (uint64_t)SIZE_MAX / 8)
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "resize buffers are too large");
        bytes += 2 * align64((size_t)buf * sizeof(float));
    }
    ctx->workspace_bytes = bytes;
    return AK_OK;
}

/* ---- nearest: a direct gather of any element type ------------------------------------- */

typedef struct rs_gather {
    const rs_plan *p;
    const rs_taps *taps;
    const char *src;
    char *dst;
    size_t esize;
    int64_t in_strides[AK_IR_MAX_RANK];
    uint64_t rows; /* product of the output dims but the last */
    unsigned char extrap[16]; /* extrapolation_value in the element type */
} rs_gather;

static void rs_copy_elem(char *dst, const char *src, size_t esize) {
    switch (esize) {
    case 1: *dst = *src; break;
    case 2: memcpy(dst, src, 2); break;
    case 4: memcpy(dst, src, 4); break;
    case 8: memcpy(dst, src, 8); break;
    default: memcpy(dst, src, esize); break;
    }
}

static void rs_gather_rows(void *arg, size_t begin, size_t end, int thread) {
    const rs_gather *g = arg;
    const rs_plan *p = g->p;
    int last = p->rank - 1;
    int64_t olast = p->out[last];
    for (size_t r = begin; r < end; r++) {
        /* source offset of this output row, or outside the crop region */
        uint64_t rem = r;
        int64_t off = 0;
        int outside = 0;
        for (int d = last - 1; d >= 0; d--) {
            int64_t o = (int64_t)(rem % (uint64_t)p->out[d]);
            rem /= (uint64_t)p->out[d];
            if (g->taps[d].n[o] == 0) outside = 1;
            off += g->taps[d].idx[o * RS_MAX_TAPS] * g->in_strides[d];
        }
        char *dst = g->dst + (size_t)r * (size_t)olast * g->esize;
        const char *src = g->src + (size_t)off * g->esize;
        const rs_taps *t = &g->taps[last];
        for (int64_t o = 0; o < olast; o++) {
            char *out = dst + (size_t)o * g->esize;
            if (outside || t->n[o] == 0)
                rs_copy_elem(out, (const char *)g->extrap, g->esize);
            else
                rs_copy_elem(out, src + (size_t)t->idx[o * RS_MAX_TAPS] * g->esize, g->esize);
        }
    }
}

static ak_status rs_run_nearest(ak__op_ctx *ctx, const rs_plan *p, const rs_taps *taps) {
    const ak__tensor *x = ctx->inputs[0];
    ak__tensor *y = ctx->outputs[0];
    rs_gather g = {.p = p, .taps = taps, .src = x->data, .dst = y->data,
                   .esize = ak_elem_type_size(x->type)};
    if (g.esize > sizeof g.extrap)
        return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED, "type %s", ak_elem_type_name(x->type));
    memset(g.extrap, 0, sizeof g.extrap);
    if (x->type != AK_ELEM_C64 && x->type != AK_ELEM_C128)
        ak__elem_set(g.extrap, x->type, 0, ((const rs_state *)ctx->state)->extrapolation);
    int64_t stride = 1;
    for (int d = p->rank - 1; d >= 0; d--) {
        g.in_strides[d] = stride;
        stride *= p->in[d];
    }
    g.rows = y->count / (uint64_t)p->out[p->rank - 1];
    size_t grain = (size_t)(4096 / (p->out[p->rank - 1] + 1)) + 1;
    return ak_threadpool_parallel_for(ctx->pool, (size_t)g.rows, grain, rs_gather_rows, &g);
}

/* ---- linear and cubic: separable passes over float buffers ---------------------------- */

typedef struct rs_pass {
    const float *src;
    float *dst;
    const rs_taps *t;
    int64_t len_in, len_out;
    size_t inner;
    float extrap;
} rs_pass;

/* Units are (outer, output position) pairs, each writing `inner` contiguous floats. */
static void rs_pass_rows(void *arg, size_t begin, size_t end, int thread) {
    const rs_pass *ps = arg;
    size_t inner = ps->inner;
    for (size_t u = begin; u < end; u++) {
        size_t outer = u / (size_t)ps->len_out, o = u % (size_t)ps->len_out;
        float *dst = ps->dst + u * inner;
        const float *src = ps->src + outer * (size_t)ps->len_in * inner;
        int n = ps->t->n[o];
        const int64_t *idx = ps->t->idx + o * RS_MAX_TAPS;
        const float *w = ps->t->w + o * RS_MAX_TAPS;
        if (n == 0) {
            for (size_t i = 0; i < inner; i++) dst[i] = ps->extrap;
            continue;
        }
        const float *s0 = src + (size_t)idx[0] * inner;
        float w0 = w[0];
        for (size_t i = 0; i < inner; i++) dst[i] = w0 * s0[i];
        for (int k = 1; k < n; k++) {
            const float *sk = src + (size_t)idx[k] * inner;
            float wk = w[k];
            for (size_t i = 0; i < inner; i++) dst[i] += wk * sk[i];
        }
    }
}

static void rs_to_float(const ak__tensor *x, float *dst) {
    for (uint64_t i = 0; i < x->count; i++) dst[i] = (float)ak__elem_get(x->data, x->type, i);
}

static void rs_from_float(const float *src, ak__tensor *y) {
    for (uint64_t i = 0; i < y->count; i++) {
        double v = src[i];
        if (ak__elem_is_integer(y->type)) v = nearbyint(v); /* round, then saturate */
        ak__elem_set(y->data, y->type, i, v);
    }
}

static ak_status rs_run_separable(ak__op_ctx *ctx, const rs_plan *p, const rs_taps *taps,
                                  char *bufs) {
    const ak__tensor *x = ctx->inputs[0];
    ak__tensor *y = ctx->outputs[0];
    const rs_state *st = ctx->state;
    int is_f32 = x->type == AK_ELEM_F32;
    size_t bufsize = align64((size_t)rs_max_buffer(p) * sizeof(float));
    float *ping = (float *)bufs, *pong = (float *)(bufs + bufsize);
    const float *cur = x->data;
    if (!is_f32) {
        rs_to_float(x, ping);
        cur = ping;
    }
    int last = -1;
    for (int d = 0; d < p->rank; d++)
        if (!taps[d].identity) last = d;
    int64_t dims[AK_IR_MAX_RANK];
    memcpy(dims, p->in, sizeof(int64_t) * (size_t)p->rank);
    for (int d = 0; d <= last; d++) {
        if (taps[d].identity) continue;
        rs_pass ps = {.src = cur, .t = &taps[d], .len_in = p->in[d], .len_out = p->out[d],
                      .inner = 1, .extrap = st->extrapolation};
        size_t outer = 1;
        for (int k = 0; k < d; k++) outer *= (size_t)dims[k];
        for (int k = d + 1; k < p->rank; k++) ps.inner *= (size_t)dims[k];
        ps.dst = (d == last && is_f32) ? y->data : (cur == ping ? pong : ping);
        size_t units = outer * (size_t)ps.len_out;
        AK_CHECK(ak_threadpool_parallel_for(ctx->pool, units, 8192 / (ps.inner + 1) + 1,
                                            rs_pass_rows, &ps));
        dims[d] = p->out[d];
        cur = ps.dst;
    }
    if (is_f32 && last < 0) memcpy(y->data, x->data, ak__tensor_nbytes(x));
    if (!is_f32) rs_from_float(cur, y);
    return AK_OK;
}

static ak_status rs_run(ak__op_ctx *ctx) {
    const rs_state *st = ctx->state;
    rs_plan p;
    AK_CHECK(rs_make_plan(ctx, st, &p));
    ak__tensor *y = ctx->outputs[0];
    if (!y || y->count == 0) return AK_OK;
    if (p.rank == 0) {
        memcpy(y->data, ctx->inputs[0]->data, ak__tensor_nbytes(y));
        return AK_OK;
    }
    rs_taps taps[AK_IR_MAX_RANK];
    char *ws = ctx->workspace;
    size_t used = rs_layout_taps(&p, ws, taps);
    for (int d = 0; d < p.rank; d++) rs_fill_taps(st, &p, d, &taps[d]);
    if (st->mode == RS_NEAREST) return rs_run_nearest(ctx, &p, taps);
    return rs_run_separable(ctx, &p, taps, ws + used);
}

const ak__op_def ak__op_resize = {"", "Resize", 10, 0, rs_create, rs_destroy, rs_reshape,
                                  rs_run};
const ak__op_def ak__op_upsample = {"", "Upsample", 7, 0, up_create, rs_destroy, rs_reshape,
                                    rs_run};
