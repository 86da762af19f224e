/* MaxUnpool: scatters the values of a MaxPool's output back to the positions its
 * Indices name, zeros elsewhere, in an output shaped by kernel_shape, strides and pads
 * (or the output_shape input). */
#include <string.h>

#include "infer/ops/nn/pool/pool.h"
#include "infer/runtime/op.h"

/* The output shape implied by kernel_shape, strides and pads. */
static ak_status mu_default_dims(const ak__op_ctx *ctx, const ak__tensor *x, int64_t *dims) {
    const int64_t *kernel, *strides, *pads;
    int sp = x->rank - 2;
    size_t nk = ak__attr_ints(ctx->node, "kernel_shape", &kernel);
    size_t ns = ak__attr_ints(ctx->node, "strides", &strides);
    size_t np = ak__attr_ints(ctx->node, "pads", &pads);
    if (nk != (size_t)sp || (ns && ns != (size_t)sp) || (np && np != 2 * (size_t)sp))
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                          "kernel_shape, strides and pads must match the %d spatial axes", sp);
    dims[0] = x->dims[0], dims[1] = x->dims[1];
    for (int d = 0; d < sp; d++) {
        int64_t s = ns ? strides[d] : 1, pb = np ? pads[d] : 0, pe = np ? pads[d + sp] : 0;
        if (s <= 0 || kernel[d] <= 0 || pb < 0 || pe < 0 || s > (1 << 20) || kernel[d] > (1 << 20))
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "bad kernel, stride or pad");
        dims[d + 2] = (x->dims[d + 2] - 1) * s - pb - pe + kernel[d];
        if (dims[d + 2] < 0)
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "negative output size");
    }
    return AK_OK;
}

/* Default dims into def, the output's into out (output_shape when given: indices keep
 * their place in the default shape, the extra room is zeros). */
static ak_status mu_dims(const ak__op_ctx *ctx, int64_t *def, int64_t *out) {
    const ak__tensor *x, *ind;
    AK_CHECK(ak__op_require(ctx, 0, &x));
    AK_CHECK(ak__op_require(ctx, 1, &ind));
    if (ind->type != AK_ELEM_I64 || ind->rank != x->rank)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "I must be int64 shaped like X");
    for (int d = 0; d < x->rank; d++)
        if (ind->dims[d] != x->dims[d])
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "I must be shaped like X");
    if (x->rank < 3)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "X must have rank 3 or more");
    AK_CHECK(mu_default_dims(ctx, x, def));
    memcpy(out, def, sizeof(int64_t) * (size_t)x->rank);
    const ak__tensor *shape = ak__op_in(ctx, 2);
    if (!shape) return AK_OK;
    size_t n;
    AK_CHECK(ak__op_read_ints(ctx, shape, "output_shape", out, AK_IR_MAX_RANK, &n));
    if (n != (size_t)x->rank)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "output_shape must have %d entries",
                          x->rank);
    for (int d = 0; d < x->rank; d++)
        if (out[d] < def[d] || (d < 2 && out[d] != def[d]))
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                              "output_shape is smaller than the unpooled shape at axis %d", d);
    return AK_OK;
}

static ak_status mu_reshape(ak__op_ctx *ctx) {
    int64_t def[AK_IR_MAX_RANK], out[AK_IR_MAX_RANK];
    AK_CHECK(mu_dims(ctx, def, out));
    const ak__tensor *x = ctx->inputs[0];
    return ak__op_set_output(ctx, 0, x->type, x->rank, out);
}

static ak_status mu_run(ak__op_ctx *ctx) {
    const ak__tensor *x = ctx->inputs[0], *ind = ctx->inputs[1];
    ak__tensor *y = ctx->outputs[0];
    int64_t def[AK_IR_MAX_RANK], out[AK_IR_MAX_RANK];
    AK_CHECK(mu_dims(ctx, def, out));
    uint64_t def_count = 1;
    int same = 1;
    for (int d = 0; d < x->rank; d++) def_count *= (uint64_t)def[d], same &= def[d] == out[d];
    size_t es = ak_elem_type_size(x->type);
    memset(y->data, 0, ak__tensor_nbytes(y));
    const int64_t *I = ind->data;
    for (uint64_t i = 0; i < x->count; i++) {
        if (I[i] < 0 || (uint64_t)I[i] >= def_count)
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_ARG, "index %lld is outside the output",
                              (long long)I[i]);
        uint64_t at = (uint64_t)I[i];
        if (!same) { /* same multi-index in the larger output */
            uint64_t rem = at, stride = 1;
            at = 0;
            for (int d = x->rank - 1; d >= 0; d--) {
                at += rem % (uint64_t)def[d] * stride;
                rem /= (uint64_t)def[d];
                stride *= (uint64_t)out[d];
            }
        }
        memcpy((char *)y->data + (size_t)at * es, (const char *)x->data + i * es, es);
    }
    return AK_OK;
}

const ak__op_def ak__op_maxunpool = {"", "MaxUnpool", 9, 0, NULL, NULL, mu_reshape, mu_run};
