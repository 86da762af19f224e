/* Sampling operators over NCHW images: GridSample (2-D) and RoiAlign.
 *
 * GridSample and RoiAlign follow the PyTorch / Caffe2 semantics the ONNX test data were
 * made with (GridSample's reflection and border padding move an out-of-range sample
 * point back inside before interpolating; RoiAlign samples a regular grid per bin with
 * bilinear weights). */
#include <math.h>
#include <string.h>

#include "infer/ops/nn/common.h"
#include "infer/runtime/op.h"

static ak_status check_float(const ak__op_ctx *ctx, uint32_t i, const ak__tensor *t) {
    if (ak__elem_is_float(t->type)) return AK_OK;
    return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED, "input %u has type %s (floats only)", i,
                      ak_elem_type_name(t->type));
}

/* ---- GridSample ---------------------------------------------------------------------- */

enum { GS_BILINEAR, GS_NEAREST, GS_BICUBIC };
enum { GS_ZEROS, GS_BORDER, GS_REFLECTION };

typedef struct gs_params {
    int mode, padding, align;
    int64_t H, W;
    double xmin, xmax, ymin, ymax; /* the borders reflection mirrors at */
} gs_params;

static ak_status gs_parse(const ak__op_ctx *ctx, gs_params *g) {
    const char *mode = ak__attr_string(ctx->node, "mode", "bilinear");
    const char *pad = ak__attr_string(ctx->node, "padding_mode", "zeros");
    if (!strcmp(mode, "bilinear") || !strcmp(mode, "linear")) g->mode = GS_BILINEAR;
    else if (!strcmp(mode, "nearest")) g->mode = GS_NEAREST;
    else if (!strcmp(mode, "bicubic") || !strcmp(mode, "cubic")) g->mode = GS_BICUBIC;
    else return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "unknown mode '%s'", mode);
    if (!strcmp(pad, "zeros")) g->padding = GS_ZEROS;
    else if (!strcmp(pad, "border")) g->padding = GS_BORDER;
    else if (!strcmp(pad, "reflection")) g->padding = GS_REFLECTION;
    else return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "unknown padding_mode '%s'", pad);
    g->align = ak__attr_int(ctx->node, "align_corners", 0) != 0;
    return AK_OK;
}

static ak_status gs_reshape(ak__op_ctx *ctx) {
    const ak__tensor *x, *grid;
    AK_CHECK(ak__op_require(ctx, 0, &x));
    AK_CHECK(ak__op_require(ctx, 1, &grid));
    AK_CHECK(check_float(ctx, 0, x));
    AK_CHECK(check_float(ctx, 1, grid));
    gs_params g;
    AK_CHECK(gs_parse(ctx, &g));
    if (x->rank != 4 || grid->rank != 4 || grid->dims[0] != x->dims[0] || grid->dims[3] != 2)
        return AK_OP_FAIL(ctx->node, x->rank != 4 ? AK_ERR_UNSUPPORTED : AK_ERR_INVALID_MODEL,
                          "expected X [N,C,H,W] and grid [N,Ho,Wo,2]");
    int64_t dims[4] = {x->dims[0], x->dims[1], grid->dims[1], grid->dims[2]};
    return ak__op_set_output(ctx, 0, x->type, 4, dims);
}

static double gs_reflect(double v, double lo, double hi) {
    double range = hi - lo;
    if (range <= 0.0) return lo;
    if (v < lo) {
        double d = lo - v, n = floor(d / range), r = d - n * range;
        return fmod(n, 2.0) == 0.0 ? lo + r : hi - r;
    }
    if (v > hi) {
        double d = v - hi, n = floor(d / range), r = d - n * range;
        return fmod(n, 2.0) == 0.0 ? hi - r : lo + r;
    }
    return v;
}

/* Pixel (r, c) of one plane after padding. */
static double gs_pixel(const gs_params *g, const double *plane, int64_t r, int64_t c) {
    if (g->padding == GS_ZEROS) {
        if (r < 0 || r >= g->H || c < 0 || c >= g->W) return 0.0;
    } else if (g->padding == GS_BORDER) {
        r = r < 0 ? 0 : r >= g->H ? g->H - 1 : r;
        c = c < 0 ? 0 : c >= g->W ? g->W - 1 : c;
    } else {
        r = (int64_t)gs_reflect((double)r, g->ymin, g->ymax);
        c = (int64_t)gs_reflect((double)c, g->xmin, g->xmax);
        r = r < 0 ? 0 : r >= g->H ? g->H - 1 : r; /* guards rounding at the edges */
        c = c < 0 ? 0 : c >= g->W ? g->W - 1 : c;
    }
    return plane[r * g->W + c];
}

static void gs_cubic(double t, double *w) {
    const double a = -0.75;
    double d[4] = {t + 1.0, t, 1.0 - t, 2.0 - t};
    for (int k = 0; k < 4; k++) {
        double z = d[k];
        w[k] = z <= 1.0 ? ((a + 2.0) * z - (a + 3.0)) * z * z + 1.0
                        : ((a * z - 5.0 * a) * z + 8.0 * a) * z - 4.0 * a;
    }
}

static double gs_sample(const gs_params *g, const double *plane, double x, double y) {
    if (g->mode == GS_NEAREST) {
        x = nearbyint(x);
        y = nearbyint(y);
    }
    if (x < g->xmin || x > g->xmax || y < g->ymin || y > g->ymax) {
        if (g->padding == GS_BORDER) {
            x = fmin(fmax(x, 0.0), (double)(g->W - 1));
            y = fmin(fmax(y, 0.0), (double)(g->H - 1));
        } else if (g->padding == GS_REFLECTION) {
            x = gs_reflect(x, g->xmin, g->xmax);
            y = gs_reflect(y, g->ymin, g->ymax);
        }
    }
    if (!isfinite(x) || !isfinite(y) || fabs(x) > 1e15 || fabs(y) > 1e15) return 0.0;
    if (g->mode == GS_NEAREST) return gs_pixel(g, plane, (int64_t)y, (int64_t)x);
    double fx = floor(x), fy = floor(y);
    int64_t x0 = (int64_t)fx, y0 = (int64_t)fy;
    if (g->mode == GS_BILINEAR) {
        double dx = x - fx, dy = y - fy;
        return (1 - dy) * ((1 - dx) * gs_pixel(g, plane, y0, x0) +
                           dx * gs_pixel(g, plane, y0, x0 + 1)) +
               dy * ((1 - dx) * gs_pixel(g, plane, y0 + 1, x0) +
                     dx * gs_pixel(g, plane, y0 + 1, x0 + 1));
    }
    double wx[4], wy[4], sum = 0.0;
    gs_cubic(x - fx, wx);
    gs_cubic(y - fy, wy);
    for (int i = 0; i < 4; i++) {
        double row = 0.0;
        for (int j = 0; j < 4; j++) row += wx[j] * gs_pixel(g, plane, y0 - 1 + i, x0 - 1 + j);
        sum += wy[i] * row;
    }
    return sum;
}

static double gs_denorm(double v, int64_t len, int align) {
    return align ? (v + 1.0) / 2.0 * (double)(len - 1) : ((v + 1.0) * (double)len - 1.0) / 2.0;
}

static ak_status gs_run(ak__op_ctx *ctx) {
    const ak__tensor *x = ctx->inputs[0], *grid = ctx->inputs[1];
    ak__tensor *y = ctx->outputs[0];
    gs_params g;
    AK_CHECK(gs_parse(ctx, &g));
    int64_t N = x->dims[0], C = x->dims[1], Ho = grid->dims[1], Wo = grid->dims[2];
    g.H = x->dims[2], g.W = x->dims[3];
    g.xmin = g.align ? 0.0 : -0.5, g.ymin = g.xmin;
    g.xmax = g.align ? (double)(g.W - 1) : (double)g.W - 0.5;
    g.ymax = g.align ? (double)(g.H - 1) : (double)g.H - 0.5;
    size_t plane_n = (size_t)(g.H * g.W);
    double *plane = ctx->workspace; /* one input plane in double */
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++) {
            uint64_t base = (uint64_t)(n * C + c) * plane_n;
            for (size_t i = 0; i < plane_n; i++)
                plane[i] = ak__elem_get(x->data, x->type, base + i);
            for (int64_t i = 0; i < Ho * Wo; i++) {
                uint64_t gi = (uint64_t)((n * Ho * Wo + i) * 2);
                double gx = ak__elem_get(grid->data, grid->type, gi);
                double gy = ak__elem_get(grid->data, grid->type, gi + 1);
                double v = plane_n ? gs_sample(&g, plane, gs_denorm(gx, g.W, g.align),
                                               gs_denorm(gy, g.H, g.align))
                                   : 0.0;
                ak__elem_set(y->data, y->type, (uint64_t)((n * C + c) * Ho * Wo + i), v);
            }
        }
    return AK_OK;
}

static ak_status gs_reshape_ws(ak__op_ctx *ctx) {
    AK_CHECK(gs_reshape(ctx));
    const ak__tensor *x = ctx->inputs[0];
    ctx->workspace_bytes = (size_t)(x->dims[2] * x->dims[3]) * sizeof(double);
    return AK_OK;
}

/* ---- RoiAlign ------------------------------------------------------------------------ */

typedef struct ra_params {
    int max_mode, half_pixel;
    int64_t oh, ow, sampling;
    double scale;
} ra_params;

static ak_status ra_parse(const ak__op_ctx *ctx, ra_params *p) {
    const char *mode = ak__attr_string(ctx->node, "mode", "avg");
    if (strcmp(mode, "avg") && strcmp(mode, "max"))
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "unknown mode '%s'", mode);
    p->max_mode = !strcmp(mode, "max");
    const char *ct = ak__attr_string(ctx->node, "coordinate_transformation_mode",
                                     ctx->node->opset >= 16 ? "half_pixel" : "output_half_pixel");
    if (strcmp(ct, "half_pixel") && strcmp(ct, "output_half_pixel"))
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                          "unknown coordinate_transformation_mode '%s'", ct);
    p->half_pixel = !strcmp(ct, "half_pixel");
    p->oh = ak__attr_int(ctx->node, "output_height", 1);
    p->ow = ak__attr_int(ctx->node, "output_width", 1);
    p->sampling = ak__attr_int(ctx->node, "sampling_ratio", 0);
    p->scale = ak__attr_float(ctx->node, "spatial_scale", 1.0f);
    if (p->oh <= 0 || p->ow <= 0 || p->sampling < 0 || p->oh > (1 << 20) || p->ow > (1 << 20))
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "bad output size or sampling_ratio");
    return AK_OK;
}

static ak_status ra_reshape(ak__op_ctx *ctx) {
    const ak__tensor *x, *rois, *idx;
    AK_CHECK(ak__op_require(ctx, 0, &x));
    AK_CHECK(ak__op_require(ctx, 1, &rois));
    AK_CHECK(ak__op_require(ctx, 2, &idx));
    AK_CHECK(check_float(ctx, 0, x));
    AK_CHECK(check_float(ctx, 1, rois));
    ra_params p;
    AK_CHECK(ra_parse(ctx, &p));
    if (x->rank != 4 || rois->rank != 2 || rois->dims[1] != 4 || idx->rank != 1 ||
        idx->dims[0] != rois->dims[0] || (idx->type != AK_ELEM_I64 && idx->type != AK_ELEM_I32))
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                          "expected X [N,C,H,W], rois [R,4], batch_indices int64 [R]");
    int64_t dims[4] = {rois->dims[0], x->dims[1], p.oh, p.ow};
    return ak__op_set_output(ctx, 0, x->type, 4, dims);
}

/* One bilinear sample of plane (H x W) at (y, x), Caffe2's RoIAlign rules; returns the
 * four weighted corner values through v (all zero outside). */
static void ra_corners(const ak__tensor *x, uint64_t base, int64_t H, int64_t W, double y,
                       double xx, double *v) {
    v[0] = v[1] = v[2] = v[3] = 0.0;
    if (y < -1.0 || y > (double)H || xx < -1.0 || xx > (double)W) return;
    y = fmax(y, 0.0);
    xx = fmax(xx, 0.0);
    int64_t y0 = (int64_t)y, x0 = (int64_t)xx, y1, x1;
    if (y0 >= H - 1) y0 = y1 = H - 1, y = (double)y0;
    else y1 = y0 + 1;
    if (x0 >= W - 1) x0 = x1 = W - 1, xx = (double)x0;
    else x1 = x0 + 1;
    double ly = y - (double)y0, lx = xx - (double)x0, hy = 1.0 - ly, hx = 1.0 - lx;
    v[0] = hy * hx * ak__elem_get(x->data, x->type, base + (uint64_t)(y0 * W + x0));
    v[1] = hy * lx * ak__elem_get(x->data, x->type, base + (uint64_t)(y0 * W + x1));
    v[2] = ly * hx * ak__elem_get(x->data, x->type, base + (uint64_t)(y1 * W + x0));
    v[3] = ly * lx * ak__elem_get(x->data, x->type, base + (uint64_t)(y1 * W + x1));
}

static ak_status ra_run(ak__op_ctx *ctx) {
    const ak__tensor *x = ctx->inputs[0], *rois = ctx->inputs[1], *idx = ctx->inputs[2];
    ak__tensor *y = ctx->outputs[0];
    ra_params p;
    AK_CHECK(ra_parse(ctx, &p));
    int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3];
    double off = p.half_pixel ? 0.5 : 0.0;
    for (int64_t r = 0; r < rois->dims[0]; r++) {
        int64_t b = idx->type == AK_ELEM_I64 ? ((const int64_t *)idx->data)[r]
                                             : ((const int32_t *)idx->data)[r];
        if (b < 0 || b >= N)
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_ARG,
                              "batch index %lld is outside [0, %lld)",
                              (long long)b, (long long)N);
        double box[4];
        for (int k = 0; k < 4; k++)
            box[k] = ak__elem_get(rois->data, rois->type, (uint64_t)(r * 4 + k)) * p.scale - off;
        double rw = box[2] - box[0], rh = box[3] - box[1];
        if (!p.half_pixel) rw = fmax(rw, 1.0), rh = fmax(rh, 1.0);
        double bh = rh / (double)p.oh, bw = rw / (double)p.ow;
        /* samples per bin; a negative extent (half_pixel allows it) samples nothing */
        double dgh = p.sampling ? (double)p.sampling : ceil(rh / (double)p.oh);
        double dgw = p.sampling ? (double)p.sampling : ceil(rw / (double)p.ow);
        if (!(dgh <= 4096.0 && dgw <= 4096.0 && dgh > -1e18 && dgw > -1e18))
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_ARG,
                              "region %lld is too large or not finite", (long long)r);
        int64_t gh = dgh > 0.0 ? (int64_t)dgh : 0, gw = dgw > 0.0 ? (int64_t)dgw : 0;
        double count = (double)(gh * gw > 1 ? gh * gw : 1);
        for (int64_t c = 0; c < C; c++) {
            uint64_t base = (uint64_t)((b * C + c) * H * W);
            for (int64_t ph = 0; ph < p.oh; ph++)
                for (int64_t pw = 0; pw < p.ow; pw++) {
                    double acc = 0.0, best = -INFINITY;
                    for (int64_t iy = 0; iy < gh; iy++) {
                        double sy = box[1] + (double)ph * bh + ((double)iy + 0.5) * bh / (double)gh;
                        for (int64_t ix = 0; ix < gw; ix++) {
                            double sx = box[0] + (double)pw * bw +
                                        ((double)ix + 0.5) * bw / (double)gw, v[4];
                            ra_corners(x, base, H, W, sy, sx, v);
                            /* max mode: the largest weighted corner, as onnxruntime does */
                            acc += v[0] + v[1] + v[2] + v[3];
                            best = fmax(best, fmax(fmax(v[0], v[1]), fmax(v[2], v[3])));
                        }
                    }
                    double out = p.max_mode ? (gh > 0 && gw > 0 ? best : 0.0) : acc / count;
                    uint64_t at = (uint64_t)(((r * C + c) * p.oh + ph) * p.ow + pw);
                    ak__elem_set(y->data, y->type, at, out);
                }
        }
    }
    return AK_OK;
}

const ak__op_def ak__op_gridsample = {"", "GridSample", 16, 0, NULL, NULL, gs_reshape_ws,
                                      gs_run};
const ak__op_def ak__op_roialign = {"", "RoiAlign", 10, 0, NULL, NULL, ra_reshape, ra_run};
