/* Reading the quantization parameters of the quantized operators (quant.h): scales,
 * zero points and their types and counts, with errors that name the input. */
#include "infer/ops/quant/quant.h"

ak_status ak__q_check_8bit(ak__op_ctx *ctx, uint32_t i, const ak__tensor *t, const char *what) {
    if (t->type == AK_ELEM_U8 || t->type == AK_ELEM_I8) return AK_OK;
    return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED,
                      "input %u (%s) has type %s; uint8 and int8 are implemented", i, what,
                      ak_elem_type_name(t->type));
}

static ak_status check_count(ak__op_ctx *ctx, uint32_t i, const char *what,
                             const ak__tensor *t, size_t n) {
    if (n == AK_Q_ANY_COUNT || (t->count == 1 && t->rank <= 1)) return AK_OK;
    if (n && t->rank == 1 && t->count == n) return AK_OK;
    if (n)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                          "input %u (%s) has %llu values in rank %d; a scalar or a 1-D tensor "
                          "of %zu values is expected", i, what, (unsigned long long)t->count,
                          t->rank, n);
    return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                      "input %u (%s) has %llu values in rank %d; a scalar is expected", i, what,
                      (unsigned long long)t->count, t->rank);
}

ak_status ak__q_zero_point(ak__op_ctx *ctx, uint32_t i, const char *what, size_t n,
                           ak_elem_type want, int optional, ak__qzp *z) {
    const ak__tensor *t = ak__op_in(ctx, i);
    z->data = NULL, z->type = want == AK_ELEM_UNDEFINED ? AK_ELEM_U8 : want, z->count = 1;
    if (!t) {
        if (optional) return AK_OK;
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "input %u (%s) is required", i, what);
    }
    AK_CHECK(ak__q_check_8bit(ctx, i, t, what));
    if (want != AK_ELEM_UNDEFINED && t->type != want)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                          "input %u (%s) has type %s, expected %s (its data's type)", i, what,
                          ak_elem_type_name(t->type), ak_elem_type_name(want));
    AK_CHECK(check_count(ctx, i, what, t, n));
    z->data = t->data, z->type = t->type, z->count = (size_t)t->count;
    return AK_OK;
}

ak_status ak__q_scale(ak__op_ctx *ctx, uint32_t i, const char *what, size_t n,
                      const float **s, size_t *count) {
    const ak__tensor *t;
    AK_CHECK(ak__op_require(ctx, i, &t));
    if (t->type != AK_ELEM_F32)
        return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED,
                          "input %u (%s) has type %s; float32 scales are implemented", i, what,
                          ak_elem_type_name(t->type));
    AK_CHECK(check_count(ctx, i, what, t, n));
    *s = t->data;
    *count = (size_t)t->count;
    return AK_OK;
}
