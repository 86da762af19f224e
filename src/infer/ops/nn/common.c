/* nn family helpers: sliding-window geometry shared by Conv, ConvTranspose and the pools,
 * and the thread count workspace slots are sized for. */
#include <string.h>

#include "infer/ops/nn/common.h"

/* Attribute values beyond this are refused: they only serve to overflow arithmetic. */
#define GEOM_LIMIT ((int64_t)1 << 31)

/* Reads an optional per-axis int list attribute of `want` entries into out (default
 * `dflt` each), checking lo <= v < GEOM_LIMIT. */
static ak_status read_axis_list(const ak__op_ctx *ctx, const char *name, int want, int64_t dflt,
                                int64_t lo, int64_t *out) {
    const int64_t *v;
    size_t n = ak__attr_ints(ctx->node, name, &v);
    if (n == 0) {
        for (int i = 0; i < want; i++) out[i] = dflt;
        return AK_OK;
    }
    if (n != (size_t)want)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                          "attribute %s has %zu values, expected %d", name, n, want);
    for (int i = 0; i < want; i++) {
        if (v[i] < lo || v[i] >= GEOM_LIMIT)
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                              "attribute %s[%d] = %lld is out of range", name, i,
                              (long long)v[i]);
        out[i] = v[i];
    }
    return AK_OK;
}

ak_status ak__nn_kernel_attr(const ak__op_ctx *ctx, int nsp, int64_t *k) {
    if (!ak__attr_has(ctx->node, "kernel_shape"))
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "attribute kernel_shape is required");
    return read_axis_list(ctx, "kernel_shape", nsp, 1, 1, k);
}

/* Output size along one axis for explicit pads (NOTSET). */
static ak_status axis_out_explicit(const ak__op_ctx *ctx, int ax, int ceil_mode,
                                   ak__nn_geom *g) {
    int64_t dk = (g->k[ax] - 1) * g->d[ax] + 1;
    int64_t span = g->in[ax] + g->pb[ax] + g->pe[ax] - dk;
    if (span < 0)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                          "window %lld is larger than padded input %lld on spatial axis %d",
                          (long long)dk, (long long)(g->in[ax] + g->pb[ax] + g->pe[ax]), ax);
    int64_t out = span / g->s[ax] + 1;
    if (ceil_mode && span % g->s[ax] != 0) {
        out++;
        /* the last window must start inside the input or its leading pad */
        if ((out - 1) * g->s[ax] >= g->in[ax] + g->pb[ax]) out--;
    }
    g->out[ax] = out;
    return AK_OK;
}

ak_status ak__nn_geom_init(const ak__op_ctx *ctx, int nsp, const int64_t *in, const int64_t *k,
                           int ceil_allowed, ak__nn_geom *g) {
    if (nsp < 1 || nsp > AK_NN_MAX_SP)
        return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED,
                          "%d spatial dimensions (1 to %d supported)", nsp, AK_NN_MAX_SP);
    memset(g, 0, sizeof *g);
    g->nsp = nsp;
    for (int i = 0; i < nsp; i++) {
        if (k[i] < 1 || k[i] >= GEOM_LIMIT || in[i] < 0 || in[i] >= ((int64_t)1 << 40))
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                              "kernel %lld over input %lld on spatial axis %d is out of range",
                              (long long)k[i], (long long)in[i], i);
        g->in[i] = in[i];
        g->k[i] = k[i];
    }
    AK_CHECK(read_axis_list(ctx, "strides", nsp, 1, 1, g->s));
    AK_CHECK(read_axis_list(ctx, "dilations", nsp, 1, 1, g->d));
    int64_t ceil_mode = ceil_allowed ? ak__attr_int(ctx->node, "ceil_mode", 0) : 0;
    const char *auto_pad = ak__attr_string(ctx->node, "auto_pad", "NOTSET");
    if (strcmp(auto_pad, "NOTSET") == 0) {
        int64_t pads[2 * AK_NN_MAX_SP];
        AK_CHECK(read_axis_list(ctx, "pads", 2 * nsp, 0, 0, pads));
        for (int i = 0; i < nsp; i++) {
            g->pb[i] = pads[i];
            g->pe[i] = pads[nsp + i];
            AK_CHECK(axis_out_explicit(ctx, i, ceil_mode != 0, g));
        }
        return AK_OK;
    }
    int valid = strcmp(auto_pad, "VALID") == 0;
    int upper = strcmp(auto_pad, "SAME_UPPER") == 0;
    if (!valid && !upper && strcmp(auto_pad, "SAME_LOWER") != 0)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "unknown auto_pad \"%s\"", auto_pad);
    for (int i = 0; i < nsp; i++) {
        int64_t dk = (g->k[i] - 1) * g->d[i] + 1;
        if (valid) {
            AK_CHECK(axis_out_explicit(ctx, i, 0, g));
            continue;
        }
        int64_t out = (g->in[i] + g->s[i] - 1) / g->s[i];
        int64_t total = (out - 1) * g->s[i] + dk - g->in[i];
        if (total < 0) total = 0;
        g->pb[i] = upper ? total / 2 : total - total / 2;
        g->pe[i] = total - g->pb[i];
        g->out[i] = out;
    }
    return AK_OK;
}

int ak__nn_pool_threads(const ak__op_ctx *ctx) {
    ak_threadpool *pool = ctx->pool;
    if (!pool && ak_threadpool_global(&pool) != AK_OK) return 1;
    int n = 1;
    if (ak_threadpool_size(pool, &n) != AK_OK || n < 1) n = 1;
    return n;
}

void ak__nn_parallel(ak_threadpool *pool, size_t n, size_t grain, ak_parallel_fn fn, void *ctx) {
    if (n <= 1 || ak_threadpool_parallel_for(pool, n, grain, fn, ctx) != AK_OK) fn(ctx, 0, n, 0);
}

void ak__nn_pad_plane(const float *src, int64_t H, int64_t W, int64_t ph, int64_t pw, float *dst,
                      int64_t Hp, int64_t Wp) {
    for (int64_t r = 0; r < Hp; r++, dst += Wp) {
        int64_t iy = r - ph;
        if (iy < 0 || iy >= H) {
            memset(dst, 0, (size_t)Wp * sizeof *dst);
            continue;
        }
        memset(dst, 0, (size_t)pw * sizeof *dst);
        memcpy(dst + pw, src + iy * W, (size_t)W * sizeof *dst);
        memset(dst + pw + W, 0, (size_t)(Wp - pw - W) * sizeof *dst);
    }
}

size_t ak__nn_slice_depth(uint64_t K) {
    size_t n = ((size_t)K + AK_NN_MAX_KC - 1) / AK_NN_MAX_KC;
    return n ? ((size_t)K + n - 1) / n : 1;
}
