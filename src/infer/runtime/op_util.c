/* Helpers shared by operators: errors naming the node, attribute access, broadcasting,
 * axes, reading shape-like inputs and generic element access. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/half.h"
#include "infer/runtime/op.h"

ak_status ak__op_fail(ak_status status, const ak__ir_node *node, const char *file, int line,
                      const char *fmt, ...) {
    char msg[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return ak__fail(status, file, line, "%s (node %s): %s", node->op_type,
                    node->name[0] ? node->name : "<unnamed>", msg);
}

/* ---- attributes -------------------------------------------------------------------- */

static const ak__ir_attr *attr_of(const ak__ir_node *n, const char *name,
                                  ak__ir_attr_type type) {
    const ak__ir_attr *a = ak__ir_node_attr(n, name);
    return a && a->type == type ? a : NULL;
}

int ak__attr_has(const ak__ir_node *n, const char *name) {
    return ak__ir_node_attr(n, name) != NULL;
}

int64_t ak__attr_int(const ak__ir_node *n, const char *name, int64_t dflt) {
    const ak__ir_attr *a = attr_of(n, name, AK_ATTR_INT);
    return a ? a->u.i : dflt;
}

float ak__attr_float(const ak__ir_node *n, const char *name, float dflt) {
    const ak__ir_attr *a = attr_of(n, name, AK_ATTR_FLOAT);
    return a ? a->u.f : dflt;
}

const char *ak__attr_string(const ak__ir_node *n, const char *name, const char *dflt) {
    const ak__ir_attr *a = attr_of(n, name, AK_ATTR_STRING);
    return a ? a->u.s.data : dflt; /* the loader NUL-terminates copied bytes */
}

size_t ak__attr_ints(const ak__ir_node *n, const char *name, const int64_t **out) {
    const ak__ir_attr *a = attr_of(n, name, AK_ATTR_INTS);
    *out = a ? a->u.ints : NULL;
    return a ? a->count : 0;
}

size_t ak__attr_floats(const ak__ir_node *n, const char *name, const float **out) {
    const ak__ir_attr *a = attr_of(n, name, AK_ATTR_FLOATS);
    *out = a ? a->u.floats : NULL;
    return a ? a->count : 0;
}

const ak__ir_tensor *ak__attr_tensor(const ak__ir_node *n, const char *name) {
    const ak__ir_attr *a = attr_of(n, name, AK_ATTR_TENSOR);
    return a ? a->u.t : NULL;
}

/* ---- inputs and outputs ------------------------------------------------------------ */

ak_status ak__op_require(const ak__op_ctx *ctx, uint32_t i, const ak__tensor **out) {
    *out = ak__op_in(ctx, i);
    if (!*out) return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "input %u is required", i);
    return AK_OK;
}

ak_status ak__op_set_output(ak__op_ctx *ctx, uint32_t i, ak_elem_type type, int rank,
                            const int64_t *dims) {
    ak__tensor *t = ak__op_out(ctx, i);
    if (!t) return AK_OK;
    char what[96];
    snprintf(what, sizeof what, "%s (node %s) output %u", ctx->node->op_type, ctx->node->name,
             i);
    return ak__tensor_set_shape(t, type, rank, dims, what);
}

ak_status ak__op_set_output_like(ak__op_ctx *ctx, uint32_t i, const ak__tensor *like) {
    return ak__op_set_output(ctx, i, like->type, like->rank, like->dims);
}

ak_status ak__op_check_type(const ak__op_ctx *ctx, uint32_t i, const ak__tensor *t,
                            ak_elem_type type) {
    if (t->type == type) return AK_OK;
    return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "input %u has type %s, expected %s", i,
                      ak_elem_type_name(t->type), ak_elem_type_name(type));
}

ak_status ak__op_broadcast(const ak__op_ctx *ctx, const ak__tensor *const *ts, size_t n,
                           int *out_rank, int64_t *out_dims) {
    int rank = 0;
    for (size_t k = 0; k < n; k++)
        if (ts[k] && ts[k]->rank > rank) rank = ts[k]->rank;
    for (int d = 0; d < rank; d++) out_dims[d] = 1;
    for (size_t k = 0; k < n; k++) {
        if (!ts[k]) continue;
        int off = rank - ts[k]->rank;
        for (int d = 0; d < ts[k]->rank; d++) {
            int64_t have = out_dims[off + d], dim = ts[k]->dims[d];
            if (dim == have || dim == 1) continue;
            if (have != 1)
                return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                                  "inputs cannot be broadcast: dimension %d is %lld and %lld",
                                  off + d, (long long)have, (long long)dim);
            out_dims[off + d] = dim;
        }
    }
    *out_rank = rank;
    return AK_OK;
}

ak_status ak__op_axis(const ak__op_ctx *ctx, int64_t axis, int rank, int allow_end, int *out) {
    int64_t hi = rank + (allow_end ? 1 : 0);
    if (axis < -hi || axis >= hi)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "axis %lld is out of range for rank %d",
                          (long long)axis, rank);
    *out = (int)(axis < 0 ? axis + hi : axis);
    return AK_OK;
}

ak_status ak__op_read_ints(const ak__op_ctx *ctx, const ak__tensor *t, const char *what,
                           int64_t *out, size_t max, size_t *n) {
    if (t->type != AK_ELEM_I64 && t->type != AK_ELEM_I32)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "%s has type %s, expected int64", what,
                          ak_elem_type_name(t->type));
    if (t->count > max)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "%s has %llu entries, at most %zu",
                          what, (unsigned long long)t->count, max);
    for (uint64_t i = 0; i < t->count; i++)
        out[i] = t->type == AK_ELEM_I64 ? ((const int64_t *)t->data)[i]
                                        : ((const int32_t *)t->data)[i];
    *n = (size_t)t->count;
    return AK_OK;
}

/* ---- generic element access -------------------------------------------------------- */

double ak__elem_get(const void *data, ak_elem_type type, uint64_t i) {
    switch (type) {
    case AK_ELEM_F32: return ((const float *)data)[i];
    case AK_ELEM_F64: return ((const double *)data)[i];
    case AK_ELEM_F16: return ak__f16_to_f32_ref(((const uint16_t *)data)[i]);
    case AK_ELEM_BF16: return ak__f32_from_bits((uint32_t)((const uint16_t *)data)[i] << 16);
    case AK_ELEM_I8: return ((const int8_t *)data)[i];
    case AK_ELEM_U8: return ((const uint8_t *)data)[i];
    case AK_ELEM_I16: return ((const int16_t *)data)[i];
    case AK_ELEM_U16: return ((const uint16_t *)data)[i];
    case AK_ELEM_I32: return ((const int32_t *)data)[i];
    case AK_ELEM_U32: return ((const uint32_t *)data)[i];
    case AK_ELEM_I64: return (double)((const int64_t *)data)[i];
    case AK_ELEM_U64: return (double)((const uint64_t *)data)[i];
    case AK_ELEM_BOOL: return ((const uint8_t *)data)[i] != 0;
    default: return 0.0;
    }
}

/* Float to integer as a C cast would, but defined for NaN and out-of-range values
 * (saturating), which ONNX leaves unspecified. */
static int64_t to_i64(double v) {
    if (isnan(v)) return 0;
    if (v >= 9.2233720368547758e18) return INT64_MAX;
    if (v <= -9.2233720368547758e18) return INT64_MIN;
    return (int64_t)v;
}

void ak__elem_set(void *data, ak_elem_type type, uint64_t i, double v) {
    switch (type) {
    case AK_ELEM_F32: ((float *)data)[i] = (float)v; break;
    case AK_ELEM_F64: ((double *)data)[i] = v; break;
    case AK_ELEM_F16: ((uint16_t *)data)[i] = ak__f32_to_f16_ref((float)v); break;
    case AK_ELEM_BF16: ((uint16_t *)data)[i] = ak__f32_to_bf16_ref((float)v); break;
    case AK_ELEM_I8: ((int8_t *)data)[i] = (int8_t)to_i64(v); break;
    case AK_ELEM_U8: ((uint8_t *)data)[i] = (uint8_t)to_i64(v); break;
    case AK_ELEM_I16: ((int16_t *)data)[i] = (int16_t)to_i64(v); break;
    case AK_ELEM_U16: ((uint16_t *)data)[i] = (uint16_t)to_i64(v); break;
    case AK_ELEM_I32: ((int32_t *)data)[i] = (int32_t)to_i64(v); break;
    case AK_ELEM_U32: ((uint32_t *)data)[i] = (uint32_t)to_i64(v); break;
    case AK_ELEM_I64: ((int64_t *)data)[i] = to_i64(v); break;
    case AK_ELEM_U64: ((uint64_t *)data)[i] = v <= 0 || isnan(v) ? 0 : (uint64_t)v; break;
    case AK_ELEM_BOOL: ((uint8_t *)data)[i] = v != 0.0; break;
    default: break;
    }
}

int64_t ak__elem_get_int(const void *p, ak_elem_type t, uint64_t i) {
    switch (t) {
    case AK_ELEM_I8: return ((const int8_t *)p)[i];
    case AK_ELEM_U8: return ((const uint8_t *)p)[i];
    case AK_ELEM_BOOL: return ((const uint8_t *)p)[i] != 0;
    case AK_ELEM_I16: return ((const int16_t *)p)[i];
    case AK_ELEM_U16: return ((const uint16_t *)p)[i];
    case AK_ELEM_I32: return ((const int32_t *)p)[i];
    case AK_ELEM_U32: return ((const uint32_t *)p)[i];
    case AK_ELEM_I64: return ((const int64_t *)p)[i];
    case AK_ELEM_U64: return (int64_t)((const uint64_t *)p)[i];
    default: return 0;
    }
}

void ak__elem_set_int(void *p, ak_elem_type t, uint64_t i, uint64_t v) {
    switch (t) {
    case AK_ELEM_I8: case AK_ELEM_U8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    case AK_ELEM_I16: case AK_ELEM_U16: ((uint16_t *)p)[i] = (uint16_t)v; break;
    case AK_ELEM_I32: case AK_ELEM_U32: ((uint32_t *)p)[i] = (uint32_t)v; break;
    case AK_ELEM_I64: case AK_ELEM_U64: ((uint64_t *)p)[i] = v; break;
    default: break;
    }
}

int ak__elem_is_float(ak_elem_type type) {
    return type == AK_ELEM_F32 || type == AK_ELEM_F64 || type == AK_ELEM_F16 ||
           type == AK_ELEM_BF16;
}

int ak__elem_is_integer(ak_elem_type type) {
    switch (type) {
    case AK_ELEM_I8: case AK_ELEM_U8: case AK_ELEM_I16: case AK_ELEM_U16: case AK_ELEM_I32:
    case AK_ELEM_U32: case AK_ELEM_I64: case AK_ELEM_U64: return 1;
    default: return 0;
    }
}
