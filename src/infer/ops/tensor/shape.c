/* Tensor family, shape-only operators and constant producers: Reshape, Flatten, Squeeze,
 * Unsqueeze, Identity, Dropout (inference), Shape, Size, Constant, ConstantOfShape, Range,
 * EyeLike.
 *
 * Reshape, Flatten, Squeeze, Unsqueeze and Identity only compute a shape: their output
 * aliases the input's bytes (AK_OP_ALIAS_INPUT0), so they have no run step. */
#include <math.h>
#include <string.h>

#include "infer/ops/tensor/tensor_ops.h"

/* Axes from the `axes` attribute (opset < from_opset) or from input `input` (later
 * opsets, optional there). *present says whether any were given. */
static ak_status read_axes(const ak__op_ctx *ctx, int64_t from_opset, uint32_t input,
                           int64_t *axes, size_t *n, int *present) {
    *n = 0;
    *present = 0;
    if (ctx->node->opset < from_opset) {
        const int64_t *a;
        size_t k = ak__attr_ints(ctx->node, "axes", &a);
        if (k > AK_TOPS_MAX_RANK)
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "%zu axes, at most %d", k,
                              AK_TOPS_MAX_RANK);
        if (k) memcpy(axes, a, k * sizeof *a);
        *n = k;
        *present = ak__attr_has(ctx->node, "axes");
        return AK_OK;
    }
    const ak__tensor *t = ak__op_in(ctx, input);
    if (!t) return AK_OK;
    *present = 1;
    return ak__op_read_ints(ctx, t, "axes", axes, AK_TOPS_MAX_RANK, n);
}

/* ---- Reshape ------------------------------------------------------------------------ */

/* Resolves 0 (copy the input dim unless allowzero) and one -1 (inferred) in shape. */
static ak_status resolve_shape(const ak__op_ctx *ctx, const ak__tensor *x, int64_t *shape,
                               size_t n, int allowzero) {
    int infer = -1;
    uint64_t known = 1;
    for (size_t i = 0; i < n; i++) {
        if (shape[i] == 0 && !allowzero) {
            if ((int)i >= x->rank)
                return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                                  "shape entry %zu is 0 (copy) but the input has rank %d", i,
                                  x->rank);
            shape[i] = x->dims[i];
        }
        if (shape[i] == -1) {
            if (infer >= 0)
                return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "shape has more than one -1");
            infer = (int)i;
            continue;
        }
        if (shape[i] < 0)
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "shape entry %zu is %lld", i,
                              (long long)shape[i]);
        if (shape[i] && known > ((uint64_t)1 << 48) / (uint64_t)shape[i])
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "shape is too large");
        known *= (uint64_t)shape[i];
    }
    if (infer >= 0) {
        if (known == 0 || x->count % known != 0)
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                              "cannot infer the -1 entry: %llu elements, %llu in the other dims",
                              (unsigned long long)x->count, (unsigned long long)known);
        shape[infer] = (int64_t)(x->count / known);
    } else if (known != x->count) {
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                          "cannot reshape %llu elements into %llu",
                          (unsigned long long)x->count, (unsigned long long)known);
    }
    return AK_OK;
}

static ak_status reshape_reshape(ak__op_ctx *ctx) {
    const ak__tensor *x;
    AK_CHECK(ak__op_require(ctx, 0, &x));
    int64_t shape[AK_TOPS_MAX_RANK];
    size_t n;
    if (ctx->node->opset < 5) { /* Reshape-1: shape attribute */
        const int64_t *a;
        n = ak__attr_ints(ctx->node, "shape", &a);
        if (n > AK_TOPS_MAX_RANK)
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "shape of rank %zu", n);
        if (n) memcpy(shape, a, n * sizeof *a);
    } else {
        const ak__tensor *s;
        AK_CHECK(ak__op_require(ctx, 1, &s));
        AK_CHECK(ak__op_read_ints(ctx, s, "shape", shape, AK_TOPS_MAX_RANK, &n));
    }
    int allowzero = ctx->node->opset >= 14 && ak__attr_int(ctx->node, "allowzero", 0) != 0;
    AK_CHECK(resolve_shape(ctx, x, shape, n, allowzero));
    return ak__op_set_output(ctx, 0, x->type, (int)n, shape);
}

const ak__op_def ak__op_reshape = {"", "Reshape", 1, AK_OP_ALIAS_INPUT0, NULL, NULL,
                                   reshape_reshape, NULL};

/* ---- Flatten ------------------------------------------------------------------------ */

static ak_status reshape_flatten(ak__op_ctx *ctx) {
    const ak__tensor *x;
    AK_CHECK(ak__op_require(ctx, 0, &x));
    /* axis in [-rank, rank]: a negative one counts from rank (not rank + 1) */
    int64_t a = ak__attr_int(ctx->node, "axis", 1);
    if (a < -x->rank || a > x->rank)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "axis %lld is out of range for rank %d",
                          (long long)a, x->rank);
    int axis = (int)(a < 0 ? a + x->rank : a);
    int64_t dims[2] = {ak__tops_prod(x->dims, 0, axis), ak__tops_prod(x->dims, axis, x->rank)};
    return ak__op_set_output(ctx, 0, x->type, 2, dims);
}

const ak__op_def ak__op_flatten = {"", "Flatten", 1, AK_OP_ALIAS_INPUT0, NULL, NULL,
                                   reshape_flatten, NULL};

/* ---- Squeeze / Unsqueeze ------------------------------------------------------------ */

static ak_status reshape_squeeze(ak__op_ctx *ctx) {
    const ak__tensor *x;
    AK_CHECK(ak__op_require(ctx, 0, &x));
    int64_t axes[AK_TOPS_MAX_RANK];
    size_t n;
    int present;
    AK_CHECK(read_axes(ctx, 13, 1, axes, &n, &present));
    unsigned char drop[AK_TOPS_MAX_RANK] = {0};
    for (size_t i = 0; i < n; i++) {
        int a;
        AK_CHECK(ak__op_axis(ctx, axes[i], x->rank, 0, &a));
        if (x->dims[a] != 1)
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                              "cannot squeeze axis %d of size %lld", a, (long long)x->dims[a]);
        drop[a] = 1;
    }
    int64_t dims[AK_TOPS_MAX_RANK];
    int r = 0;
    for (int d = 0; d < x->rank; d++) {
        int squeeze = n ? drop[d] : x->dims[d] == 1;
        if (!squeeze) dims[r++] = x->dims[d];
    }
    return ak__op_set_output(ctx, 0, x->type, r, dims);
}

const ak__op_def ak__op_squeeze = {"", "Squeeze", 1, AK_OP_ALIAS_INPUT0, NULL, NULL,
                                   reshape_squeeze, NULL};

static ak_status reshape_unsqueeze(ak__op_ctx *ctx) {
    const ak__tensor *x;
    AK_CHECK(ak__op_require(ctx, 0, &x));
    int64_t axes[AK_TOPS_MAX_RANK];
    size_t n;
    int present;
    AK_CHECK(read_axes(ctx, 13, 1, axes, &n, &present));
    if (!present)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "axes are required");
    if (x->rank + (int)n > AK_TOPS_MAX_RANK)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "output rank %d exceeds %d",
                          x->rank + (int)n, AK_TOPS_MAX_RANK);
    int rank = x->rank + (int)n;
    unsigned char ins[AK_TOPS_MAX_RANK] = {0};
    for (size_t i = 0; i < n; i++) {
        int a;
        AK_CHECK(ak__op_axis(ctx, axes[i], rank, 0, &a));
        if (ins[a])
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "axis %d is repeated", a);
        ins[a] = 1;
    }
    int64_t dims[AK_TOPS_MAX_RANK];
    for (int d = 0, k = 0; d < rank; d++) dims[d] = ins[d] ? 1 : x->dims[k++];
    return ak__op_set_output(ctx, 0, x->type, rank, dims);
}

const ak__op_def ak__op_unsqueeze = {"", "Unsqueeze", 1, AK_OP_ALIAS_INPUT0, NULL, NULL,
                                     reshape_unsqueeze, NULL};

/* ---- Identity / Dropout ------------------------------------------------------------- */

static ak_status reshape_identity(ak__op_ctx *ctx) {
    const ak__tensor *x;
    AK_CHECK(ak__op_require(ctx, 0, &x));
    return ak__op_set_output_like(ctx, 0, x);
}

const ak__op_def ak__op_identity = {"", "Identity", 1, AK_OP_ALIAS_INPUT0, NULL, NULL,
                                    reshape_identity, NULL};

/* Inference only: the output is the input and the mask all true. Training mode with a
 * non-zero ratio draws random numbers, which this engine does not do. */
static ak_status reshape_dropout(ak__op_ctx *ctx) {
    const ak__tensor *x;
    AK_CHECK(ak__op_require(ctx, 0, &x));
    if (ctx->node->opset >= 12) {
        const ak__tensor *r = ak__op_in(ctx, 1), *t = ak__op_in(ctx, 2);
        double ratio = 0.5;
        int64_t training = 0;
        if (r) AK_CHECK(ak__tops_scalar_double(ctx, r, "ratio", &ratio));
        if (t) AK_CHECK(ak__tops_scalar_int(ctx, t, "training_mode", &training));
        if (training && ratio != 0.0)
            return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED,
                              "training mode with ratio %g (random dropout) is not supported",
                              ratio);
    }
    AK_CHECK(ak__op_set_output_like(ctx, 0, x));
    /* the mask is bool from opset 10, the input's type before */
    ak_elem_type mask = ctx->node->opset >= 10 ? AK_ELEM_BOOL : x->type;
    return ak__op_set_output(ctx, 1, mask, x->rank, x->dims);
}

static ak_status run_dropout(ak__op_ctx *ctx) {
    const ak__tensor *x = ak__op_in(ctx, 0);
    ak__tensor *y = ak__op_out(ctx, 0), *mask = ak__op_out(ctx, 1);
    if (y) ak__tops_copy_bytes(y->data, x->data, ak__tensor_nbytes(x));
    if (mask && mask->count) {
        if (mask->type == AK_ELEM_BOOL) {
            memset(mask->data, 1, (size_t)mask->count);
        } else {
            ak__elem_set(mask->data, mask->type, 0, 1.0);
            ak__tops_fill(mask->data, mask->data, ak_elem_type_size(mask->type), mask->count);
        }
    }
    return AK_OK;
}

/* output 0 always equals input 0 (training with a ratio fails above): it aliases, and run
 * only writes the mask */
const ak__op_def ak__op_dropout = {"", "Dropout", 1, AK_OP_ALIAS_INPUT0, NULL, NULL,
                                   reshape_dropout, run_dropout};

/* ---- Shape / Size ------------------------------------------------------------------- */

static int64_t clamp_dim_index(int64_t v, int rank) {
    if (v < 0) v += rank;
    return v < 0 ? 0 : v > rank ? rank : v;
}

static void shape_range(const ak__op_ctx *ctx, const ak__tensor *x, int64_t *b, int64_t *e) {
    *b = 0;
    *e = x->rank;
    if (ctx->node->opset >= 15) { /* start / end slice the shape, clamped */
        *b = clamp_dim_index(ak__attr_int(ctx->node, "start", 0), x->rank);
        if (ak__attr_has(ctx->node, "end"))
            *e = clamp_dim_index(ak__attr_int(ctx->node, "end", x->rank), x->rank);
    }
    if (*e < *b) *e = *b;
}

static ak_status reshape_shape(ak__op_ctx *ctx) {
    const ak__tensor *x;
    AK_CHECK(ak__op_require(ctx, 0, &x));
    int64_t b, e;
    shape_range(ctx, x, &b, &e);
    int64_t n = e - b;
    return ak__op_set_output(ctx, 0, AK_ELEM_I64, 1, &n);
}

static ak_status run_shape(ak__op_ctx *ctx) {
    const ak__tensor *x = ak__op_in(ctx, 0);
    ak__tensor *y = ak__op_out(ctx, 0);
    int64_t b, e;
    shape_range(ctx, x, &b, &e);
    ak__tops_copy_bytes(y->data, x->dims + b, (size_t)(e - b) * sizeof(int64_t));
    return AK_OK;
}

const ak__op_def ak__op_shape = {"", "Shape", 1, 0, NULL, NULL, reshape_shape, run_shape};

static ak_status reshape_size(ak__op_ctx *ctx) {
    const ak__tensor *x;
    AK_CHECK(ak__op_require(ctx, 0, &x));
    return ak__op_set_output(ctx, 0, AK_ELEM_I64, 0, NULL);
}

static ak_status run_size(ak__op_ctx *ctx) {
    *(int64_t *)ak__op_out(ctx, 0)->data = (int64_t)ak__op_in(ctx, 0)->count;
    return AK_OK;
}

const ak__op_def ak__op_size = {"", "Size", 1, 0, NULL, NULL, reshape_size, run_size};

/* ---- Constant ----------------------------------------------------------------------- */

/* The value of a Constant node: its type, shape and bytes. */
typedef struct const_value {
    ak_elem_type type;
    int rank;
    int64_t dims[1];
    const int64_t *shape; /* dims or the tensor attribute's dims */
    const void *data;
    int64_t scalar_i;
    float scalar_f;
} const_value;

static ak_status constant_value(const ak__op_ctx *ctx, const_value *v) {
    const ak__ir_node *n = ctx->node;
    const ak__ir_tensor *t = ak__attr_tensor(n, "value");
    const ak__ir_attr *a;
    memset(v, 0, sizeof *v);
    v->shape = v->dims;
    if (t) {
        v->type = t->type;
        v->rank = t->rank;
        v->shape = t->dims;
        v->data = t->data;
    } else if ((a = ak__ir_node_attr(n, "value_float")) && a->type == AK_ATTR_FLOAT) {
        v->type = AK_ELEM_F32;
        v->scalar_f = a->u.f;
        v->data = &v->scalar_f;
    } else if ((a = ak__ir_node_attr(n, "value_int")) && a->type == AK_ATTR_INT) {
        v->type = AK_ELEM_I64;
        v->scalar_i = a->u.i;
        v->data = &v->scalar_i;
    } else if ((a = ak__ir_node_attr(n, "value_floats")) && a->type == AK_ATTR_FLOATS) {
        v->type = AK_ELEM_F32;
        v->rank = 1;
        v->dims[0] = (int64_t)a->count;
        v->data = a->u.floats;
    } else if ((a = ak__ir_node_attr(n, "value_ints")) && a->type == AK_ATTR_INTS) {
        v->type = AK_ELEM_I64;
        v->rank = 1;
        v->dims[0] = (int64_t)a->count;
        v->data = a->u.ints;
    } else if (ak__attr_has(n, "sparse_value") || ak__attr_has(n, "value_string") ||
               ak__attr_has(n, "value_strings")) {
        return AK_OP_FAIL(n, AK_ERR_UNSUPPORTED, "sparse and string constants are not supported");
    } else {
        return AK_OP_FAIL(n, AK_ERR_INVALID_MODEL, "no value attribute");
    }
    return AK_OK;
}

static ak_status reshape_constant(ak__op_ctx *ctx) {
    const_value v;
    AK_CHECK(constant_value(ctx, &v));
    return ak__op_set_output(ctx, 0, v.type, v.rank, v.shape);
}

static ak_status run_constant(ak__op_ctx *ctx) {
    const_value v;
    AK_CHECK(constant_value(ctx, &v));
    ak__tensor *y = ak__op_out(ctx, 0);
    ak__tops_copy_bytes(y->data, v.data, ak__tensor_nbytes(y));
    return AK_OK;
}

const ak__op_def ak__op_constant = {"", "Constant", 1, 0, NULL, NULL, reshape_constant,
                                    run_constant};

/* ---- ConstantOfShape ---------------------------------------------------------------- */

static ak_status reshape_constant_of_shape(ak__op_ctx *ctx) {
    const ak__tensor *s;
    AK_CHECK(ak__op_require(ctx, 0, &s));
    int64_t dims[AK_TOPS_MAX_RANK];
    size_t n;
    AK_CHECK(ak__op_read_ints(ctx, s, "shape", dims, AK_TOPS_MAX_RANK, &n));
    const ak__ir_tensor *v = ak__attr_tensor(ctx->node, "value");
    if (v && v->count != 1)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "value has %llu elements, expected 1",
                          (unsigned long long)v->count);
    return ak__op_set_output(ctx, 0, v ? v->type : AK_ELEM_F32, (int)n, dims);
}

static ak_status run_constant_of_shape(ak__op_ctx *ctx) {
    ak__tensor *y = ak__op_out(ctx, 0);
    const ak__ir_tensor *v = ak__attr_tensor(ctx->node, "value");
    if (!v) {
        memset(y->data, 0, ak__tensor_nbytes(y));
        return AK_OK;
    }
    ak__tops_fill(y->data, v->data, ak_elem_type_size(y->type), y->count);
    return AK_OK;
}

const ak__op_def ak__op_constant_of_shape = {"", "ConstantOfShape", 1, 0, NULL, NULL,
                                             reshape_constant_of_shape, run_constant_of_shape};

/* ---- Range -------------------------------------------------------------------------- */

/* Number of elements of Range(start, limit, delta): max(ceil((limit - start) / delta), 0),
 * exactly for integers. */
static ak_status range_count(const ak__op_ctx *ctx, int64_t *count) {
    const ak__tensor *t[3];
    for (uint32_t i = 0; i < 3; i++) AK_CHECK(ak__op_require(ctx, i, &t[i]));
    ak_elem_type type = t[0]->type;
    if (t[1]->type != type || t[2]->type != type)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "start, limit and delta differ in type");
    static const char *names[3] = {"start", "limit", "delta"};
    double n;
    if (ak__elem_is_integer(type) && type != AK_ELEM_U64) {
        int64_t v[3];
        for (int i = 0; i < 3; i++) AK_CHECK(ak__tops_scalar_int(ctx, t[i], names[i], &v[i]));
        if (v[2] == 0) return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "delta is 0");
        /* unsigned arithmetic: limit - start may not fit in int64 */
        int up = v[2] > 0;
        if (up ? v[1] <= v[0] : v[1] >= v[0]) {
            *count = 0;
            return AK_OK;
        }
        uint64_t span = up ? (uint64_t)v[1] - (uint64_t)v[0] : (uint64_t)v[0] - (uint64_t)v[1];
        uint64_t step = up ? (uint64_t)v[2] : 0 - (uint64_t)v[2];
        n = (double)(span / step + (span % step != 0));
    } else if (ak__elem_is_float(type)) {
        double v[3];
        for (int i = 0; i < 3; i++) AK_CHECK(ak__tops_scalar_double(ctx, t[i], names[i], &v[i]));
        if (v[2] == 0 || !isfinite(v[0]) || !isfinite(v[1]) || !isfinite(v[2]))
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                              "start, limit and delta must be finite and delta non-zero");
        n = ceil((v[1] - v[0]) / v[2]);
    } else {
        return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED, "type %s is not supported",
                          ak_elem_type_name(type));
    }
    if (!(n <= (double)((int64_t)1 << 48)))
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "range of %g elements is too large", n);
    *count = n > 0 ? (int64_t)n : 0;
    return AK_OK;
}

static ak_status reshape_range(ak__op_ctx *ctx) {
    int64_t n;
    AK_CHECK(range_count(ctx, &n));
    return ak__op_set_output(ctx, 0, ak__op_in(ctx, 0)->type, 1, &n);
}

static ak_status run_range(ak__op_ctx *ctx) {
    ak__tensor *y = ak__op_out(ctx, 0);
    const ak__tensor *s = ak__op_in(ctx, 0), *d = ak__op_in(ctx, 2);
    if (y->type == AK_ELEM_I64) { /* exact: unsigned steps, every value stays in range */
        uint64_t v = (uint64_t)*(const int64_t *)s->data, step = (uint64_t)*(const int64_t *)d->data;
        int64_t *o = y->data;
        for (uint64_t i = 0; i < y->count; i++) o[i] = (int64_t)(v + i * step);
        return AK_OK;
    }
    double v = ak__elem_get(s->data, s->type, 0), step = ak__elem_get(d->data, d->type, 0);
    if (y->type == AK_ELEM_F32) {
        float *o = y->data;
        for (uint64_t i = 0; i < y->count; i++) o[i] = (float)(v + (double)i * step);
        return AK_OK;
    }
    for (uint64_t i = 0; i < y->count; i++) ak__elem_set(y->data, y->type, i, v + (double)i * step);
    return AK_OK;
}

const ak__op_def ak__op_range = {"", "Range", 1, 0, NULL, NULL, reshape_range, run_range};

/* ---- EyeLike ------------------------------------------------------------------------ */

static ak_status reshape_eye_like(ak__op_ctx *ctx) {
    const ak__tensor *x;
    AK_CHECK(ak__op_require(ctx, 0, &x));
    if (x->rank != 2)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "input has rank %d, expected 2",
                          x->rank);
    ak_elem_type type = (ak_elem_type)ak__attr_int(ctx->node, "dtype", x->type);
    if (!ak__elem_is_float(type) && !ak__elem_is_integer(type) && type != AK_ELEM_BOOL)
        return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED, "dtype %s is not supported",
                          ak_elem_type_name(type));
    return ak__op_set_output(ctx, 0, type, 2, x->dims);
}

static ak_status run_eye_like(ak__op_ctx *ctx) {
    ak__tensor *y = ak__op_out(ctx, 0);
    int64_t k = ak__attr_int(ctx->node, "k", 0), rows = y->dims[0], cols = y->dims[1];
    memset(y->data, 0, ak__tensor_nbytes(y)); /* all-zero bits are 0 in every type */
    /* ones where col - row == k: rows max(0, -k) .. min(rows, cols - k) */
    if (k >= cols || -k >= rows) return AK_OK;
    int64_t r0 = k < 0 ? -k : 0, r1 = cols - k < rows ? cols - k : rows;
    for (int64_t r = r0; r < r1; r++) ak__elem_set(y->data, y->type, (uint64_t)(r * cols + r + k), 1.0);
    return AK_OK;
}

const ak__op_def ak__op_eye_like = {"", "EyeLike", 1, 0, NULL, NULL, reshape_eye_like,
                                    run_eye_like};
