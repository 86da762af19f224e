/* The signal operator family: the table registry.c searches. Helpers the files share
 * (scalar inputs, the output type attribute) live here too. */
#include "infer/ops/signal/signal.h"

const ak__op_def *const ak__ops_signal[] = {
    &ak__op_hann_window, &ak__op_hamming_window, &ak__op_blackman_window,
    &ak__op_mel_weight_matrix,
    &ak__op_dft_17, &ak__op_dft_20, &ak__op_stft,
    NULL,
};

ak_status ak__signal_output_type(const ak__op_ctx *ctx, ak_elem_type *out) {
    int64_t t = ak__attr_int(ctx->node, "output_datatype", AK_ELEM_F32);
    if (t <= 0 || t >= AK_ELEM_COUNT_ ||
        (!ak__elem_is_float((ak_elem_type)t) && !ak__elem_is_integer((ak_elem_type)t)))
        return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED,
                          "output_datatype %lld is not a float or integer type",
                          (long long)t);
    *out = (ak_elem_type)t;
    return AK_OK;
}

static ak_status scalar_input(const ak__op_ctx *ctx, uint32_t i, const char *what,
                              const ak__tensor **t) {
    AK_CHECK(ak__op_require(ctx, i, t));
    if ((*t)->count != 1)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                          "input %u (%s) has %llu elements, expected one", i, what,
                          (unsigned long long)(*t)->count);
    return AK_OK;
}

ak_status ak__signal_scalar_int(const ak__op_ctx *ctx, uint32_t i, const char *what,
                                int64_t *out) {
    const ak__tensor *t;
    AK_CHECK(scalar_input(ctx, i, what, &t));
    if (t->type != AK_ELEM_I32 && t->type != AK_ELEM_I64)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                          "input %u (%s) has type %s, expected int32 or int64", i, what,
                          ak_elem_type_name(t->type));
    *out = ak__elem_get_int(t->data, t->type, 0);
    return AK_OK;
}

ak_status ak__signal_scalar_double(const ak__op_ctx *ctx, uint32_t i, const char *what,
                                   double *out) {
    const ak__tensor *t;
    AK_CHECK(scalar_input(ctx, i, what, &t));
    if (!ak__elem_is_float(t->type) && !ak__elem_is_integer(t->type))
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "input %u (%s) has type %s", i,
                          what, ak_elem_type_name(t->type));
    *out = ak__elem_get(t->data, t->type, 0);
    return AK_OK;
}
