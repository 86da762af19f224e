/* Optional, OptionalHasElement and OptionalGetElement. An optional that holds a value is
 * that value (a tensor, or a packed sequence); an empty optional is the NONE marker of
 * packed.h, a small uint8 tensor. So these operators copy or test, and an optional can
 * cross If/Loop boundaries and graph inputs/outputs like any tensor. */
#include <string.h>

#include "infer/ops/sequence/packed.h"
#include "infer/runtime/op.h"

static ak_status copy_input_run(ak__op_ctx *ctx) {
    const ak__tensor *in = ctx->inputs[0];
    if (ak__tensor_nbytes(in)) memcpy(ctx->outputs[0]->data, in->data, ak__tensor_nbytes(in));
    return AK_OK;
}

/* Optional(x) holds x; Optional() with a `type` attribute is empty. */
static ak_status optional_reshape(ak__op_ctx *ctx) {
    const ak__tensor *in = ak__op_in(ctx, 0);
    if (in) return ak__op_set_output_like(ctx, 0, in);
    if (!ak__attr_has(ctx->node, "type"))
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                          "an Optional without an input needs the 'type' attribute");
    int64_t bytes = (int64_t)sizeof(ak__seq_header);
    return ak__op_set_output(ctx, 0, AK_ELEM_U8, 1, &bytes);
}

static ak_status optional_run(ak__op_ctx *ctx) {
    if (ak__op_in(ctx, 0)) return copy_input_run(ctx);
    ak__none_write(ctx->outputs[0]->data);
    return AK_OK;
}

/* True when the (optional, since opset 18) input is present and not the empty optional. */
static int has_element(const ak__op_ctx *ctx) {
    const ak__tensor *in = ak__op_in(ctx, 0);
    return in && !ak__is_none(in);
}

static ak_status has_reshape(ak__op_ctx *ctx) {
    return ak__op_set_output(ctx, 0, AK_ELEM_BOOL, 0, NULL);
}

static ak_status has_run(ak__op_ctx *ctx) {
    *(uint8_t *)ctx->outputs[0]->data = (uint8_t)has_element(ctx);
    return AK_OK;
}

static ak_status get_reshape(ak__op_ctx *ctx) {
    const ak__tensor *in;
    AK_CHECK(ak__op_require(ctx, 0, &in));
    if (ak__is_none(in))
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_ARG, "the optional input is empty");
    return ak__op_set_output_like(ctx, 0, in);
}

const ak__op_def ak__op_optional = {"", "Optional", 15, 0, NULL, NULL, optional_reshape,
                                    optional_run};
const ak__op_def ak__op_optional_has_element = {"", "OptionalHasElement", 15, 0, NULL, NULL,
                                                has_reshape, has_run};
const ak__op_def ak__op_optional_get_element = {"", "OptionalGetElement", 15, 0, NULL, NULL,
                                                get_reshape, copy_input_run};
