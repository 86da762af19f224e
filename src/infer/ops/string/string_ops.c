/* String operators: the family table, which operators STRING tensors may reach,
 * StringConcat and StringSplit (opset 20). StringNormalizer and RegexFullMatch are in
 * normalizer.c and regex.c, the casts in cast_string.c. */
#include <string.h>

#include "infer/ops/string/string_ops.h"

ak_status ak__strings_pool(const ak__op_ctx *ctx, ak__string_pool **out) {
    if (!ctx->strings)
        return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED,
                          "computing strings inside an If/Loop/Scan body is not supported");
    *out = ctx->strings;
    return AK_OK;
}

/* Operators that move ak_string elements as opaque 16-byte values (so every string
 * keeps pointing at bytes that outlive it) or compute strings themselves. */
static const char *const string_capable[] = {
    "Identity", "Reshape",  "Flatten",  "Squeeze",       "Unsqueeze",     "Concat",
    "Gather",   "Slice",    "Transpose", "Expand",       "Shape",         "Size",
    "Cast",     "CastLike", "Equal",     "Where",        "StringNormalizer", "RegexFullMatch",
    "StringSplit", "StringConcat",
};

static int has_string(const ak__tensor *const *ts, uint32_t n) {
    for (uint32_t i = 0; i < n; i++)
        if (ts[i] && ts[i]->type == AK_ELEM_STRING) return 1;
    return 0;
}

ak_status ak__op_strings_check(const ak__op_ctx *ctx) {
    if (!has_string(ctx->inputs, ctx->num_inputs) &&
        !has_string((const ak__tensor *const *)ctx->outputs, ctx->num_outputs))
        return AK_OK;
    if (!ctx->node->domain[0])
        for (size_t i = 0; i < sizeof string_capable / sizeof *string_capable; i++)
            if (!strcmp(ctx->node->op_type, string_capable[i])) return AK_OK;
    return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED,
                      "string tensors are not supported by this operator (only by Identity, "
                      "Reshape, Flatten, Squeeze, Unsqueeze, Concat, Gather, Slice, Transpose, "
                      "Expand, Cast, CastLike, Equal, Where and the string operators)");
}

static ak_status require_strings(const ak__op_ctx *ctx, uint32_t i, const ak__tensor **t) {
    AK_CHECK(ak__op_require(ctx, i, t));
    return ak__op_check_type(ctx, i, *t, AK_ELEM_STRING);
}

/* ---- StringConcat: Z = X + Y elementwise, numpy broadcasting ------------------------ */

static ak_status concat_reshape(ak__op_ctx *ctx) {
    const ak__tensor *t[2];
    AK_CHECK(require_strings(ctx, 0, &t[0]));
    AK_CHECK(require_strings(ctx, 1, &t[1]));
    int rank;
    int64_t dims[AK_IR_MAX_RANK];
    AK_CHECK(ak__op_broadcast(ctx, t, 2, &rank, dims));
    return ak__op_set_output(ctx, 0, AK_ELEM_STRING, rank, dims);
}

/* Offset in t of output element i (t broadcast to out's shape). */
static uint64_t broadcast_index(const ak__tensor *t, const ak__tensor *out, uint64_t i) {
    uint64_t off = 0, stride = 1;
    for (int d = out->rank - 1, k = t->rank - 1; d >= 0; d--, k--) {
        uint64_t c = i % (uint64_t)out->dims[d];
        i /= (uint64_t)out->dims[d];
        if (k < 0) continue;
        if (t->dims[k] != 1) off += c * stride;
        stride *= (uint64_t)t->dims[k];
    }
    return off;
}

static ak_status concat_run(ak__op_ctx *ctx) {
    const ak__tensor *x = ak__op_in(ctx, 0), *y = ak__op_in(ctx, 1);
    ak__tensor *z = ak__op_out(ctx, 0);
    ak__string_pool *pool = NULL;
    AK_CHECK(ak__strings_pool(ctx, &pool));
    const ak_string *xs = x->data, *ys = y->data;
    ak_string *zs = z->data;
    for (uint64_t i = 0; i < z->count; i++) {
        const ak_string *a = &xs[broadcast_index(x, z, i)], *b = &ys[broadcast_index(y, z, i)];
        char *p;
        AK_CHECK(ak__string_pool_alloc(pool, a->len + b->len, &p));
        if (a->len) memcpy(p, a->data, a->len);
        if (b->len) memcpy(p + a->len, b->data, b->len);
        zs[i] = (ak_string){p, a->len + b->len};
    }
    return AK_OK;
}

static const ak__op_def op_string_concat = {"", "StringConcat", 20, 0, NULL, NULL,
                                            concat_reshape, concat_run};

/* ---- StringSplit: Python's str.split(delimiter, maxsplit), padded with "" -----------
 * as onnxruntime does it: an empty string has no pieces (Python: [""]), and without a
 * delimiter only spaces separate (see is_space) and the rest left by maxsplit loses its
 * trailing spaces. */

typedef struct split_attrs {
    const char *delim; /* NULL: runs of whitespace */
    size_t delim_len;
    int64_t maxsplit;  /* < 0: no limit */
} split_attrs;

static void split_attrs_read(const ak__ir_node *n, split_attrs *a) {
    const ak__ir_attr *d = ak__ir_node_attr(n, "delimiter");
    a->delim = d && d->type == AK_ATTR_STRING && d->u.s.len ? d->u.s.data : NULL;
    a->delim_len = a->delim ? d->u.s.len : 0;
    a->maxsplit = ak__attr_int(n, "maxsplit", -1);
}

/* Without a delimiter, pieces are separated by runs of spaces (' ' only: onnxruntime
 * keeps tabs and newlines inside pieces, where Python's split() would cut). */
static int is_space(unsigned char c) { return c == ' '; }

/* Splits s into parts[0..cap) (pointing into s); returns the number of pieces. */
static uint64_t split_one(const split_attrs *a, ak_string s, ak_string *parts, uint64_t cap) {
    uint64_t n = 0;
    if (!s.len) return 0; /* "" has no pieces with any delimiter (onnxruntime; Python: [""]) */
    const char *p = s.data, *end = s.data + s.len;
    if (!a->delim) { /* whitespace: no empty pieces, leading/trailing runs dropped */
        while (p < end) {
            while (p < end && is_space((unsigned char)*p)) p++;
            if (p == end) break;
            const char *q = p;
            if (a->maxsplit >= 0 && (int64_t)n == a->maxsplit) {
                /* the rest, less its trailing spaces (onnxruntime; Python keeps them) */
                q = end;
                while (q > p && is_space((unsigned char)q[-1])) q--;
                if (n < cap) parts[n] = (ak_string){p, (size_t)(q - p)};
                return n + 1;
            } else {
                while (q < end && !is_space((unsigned char)*q)) q++;
            }
            if (n < cap) parts[n] = (ak_string){p, (size_t)(q - p)};
            n++;
            p = q;
        }
        return n;
    }
    for (;;) {
        const char *q = NULL;
        if (a->maxsplit < 0 || (int64_t)n < a->maxsplit)
            for (const char *c = p; c + a->delim_len <= end; c++)
                if (!memcmp(c, a->delim, a->delim_len)) { q = c; break; }
        if (!q) {
            if (n < cap) parts[n] = (ak_string){p, (size_t)(end - p)};
            return n + 1;
        }
        if (n < cap) parts[n] = (ak_string){p, (size_t)(q - p)};
        n++;
        p = q + a->delim_len;
    }
}

static ak_status split_reshape(ak__op_ctx *ctx) {
    const ak__tensor *x;
    AK_CHECK(require_strings(ctx, 0, &x));
    if (x->rank >= AK_IR_MAX_RANK)
        return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED, "input of rank %d is too deep", x->rank);
    split_attrs a;
    split_attrs_read(ctx->node, &a);
    uint64_t most = 0;
    for (uint64_t i = 0; i < x->count; i++) {
        uint64_t n = split_one(&a, ((const ak_string *)x->data)[i], NULL, 0);
        if (n > most) most = n;
    }
    int64_t dims[AK_IR_MAX_RANK];
    memcpy(dims, x->dims, (size_t)x->rank * sizeof *dims);
    dims[x->rank] = (int64_t)most;
    AK_CHECK(ak__op_set_output(ctx, 0, AK_ELEM_STRING, x->rank + 1, dims));
    return ak__op_set_output(ctx, 1, AK_ELEM_I64, x->rank, x->dims);
}

/* The pieces point into the input's bytes, which live at least as long as the output. */
static ak_status split_run(ak__op_ctx *ctx) {
    const ak__tensor *x = ak__op_in(ctx, 0);
    ak__tensor *y = ak__op_out(ctx, 0), *z = ak__op_out(ctx, 1);
    split_attrs a;
    split_attrs_read(ctx->node, &a);
    uint64_t width = y ? (uint64_t)y->dims[y->rank - 1] : 0;
    for (uint64_t i = 0; i < x->count; i++) {
        ak_string s = ((const ak_string *)x->data)[i];
        ak_string *row = y ? (ak_string *)y->data + i * width : NULL;
        uint64_t n = split_one(&a, s, row, row ? width : 0);
        for (uint64_t k = n; row && k < width; k++) row[k] = (ak_string){NULL, 0};
        if (z) ((int64_t *)z->data)[i] = (int64_t)n;
    }
    return AK_OK;
}

static const ak__op_def op_string_split = {"", "StringSplit", 20, 0, NULL, NULL, split_reshape,
                                           split_run};

const ak__op_def *const ak__ops_string[] = {
    &op_string_concat, &op_string_split, &ak__op_string_normalizer, &ak__op_regex_full_match,
    NULL,
};
