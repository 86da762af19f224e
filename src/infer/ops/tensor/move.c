/* Tensor family, data-movement operators: Transpose, Expand, Concat, Split, Slice, Tile,
 * Pad, DepthToSpace, SpaceToDepth, ReverseSequence.
 *
 * Each copies elements by size (one path for every type). The ones that are a pure
 * re-indexing (Transpose, Expand, Slice, DepthToSpace, SpaceToDepth) describe the source
 * as a strided view and hand it to ak__tops_strided_copy. */
#include <string.h>

#include "infer/ops/tensor/tensor_ops.h"

/* ---- Transpose ---------------------------------------------------------------------- */

/* The permutation: the attribute (checked to be one) or reversed dims by default. */
static ak_status transpose_perm(const ak__op_ctx *ctx, const ak__tensor *x, int *perm) {
    const int64_t *p;
    size_t n = ak__attr_ints(ctx->node, "perm", &p);
    if (!ak__attr_has(ctx->node, "perm")) {
        for (int d = 0; d < x->rank; d++) perm[d] = x->rank - 1 - d;
        return AK_OK;
    }
    if ((int)n != x->rank)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "perm has %zu entries for rank %d", n,
                          x->rank);
    unsigned char seen[AK_TOPS_MAX_RANK] = {0};
    for (int d = 0; d < x->rank; d++) {
        int a;
        AK_CHECK(ak__op_axis(ctx, p[d], x->rank, 0, &a));
        if (seen[a])
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "perm repeats axis %d", a);
        seen[a] = 1;
        perm[d] = a;
    }
    return AK_OK;
}

static ak_status reshape_transpose(ak__op_ctx *ctx) {
    const ak__tensor *x;
    AK_CHECK(ak__op_require(ctx, 0, &x));
    int perm[AK_TOPS_MAX_RANK];
    AK_CHECK(transpose_perm(ctx, x, perm));
    int64_t dims[AK_TOPS_MAX_RANK];
    for (int d = 0; d < x->rank; d++) dims[d] = x->dims[perm[d]];
    return ak__op_set_output(ctx, 0, x->type, x->rank, dims);
}

static ak_status run_transpose(ak__op_ctx *ctx) {
    const ak__tensor *x = ak__op_in(ctx, 0);
    ak__tensor *y = ak__op_out(ctx, 0);
    int perm[AK_TOPS_MAX_RANK];
    AK_CHECK(transpose_perm(ctx, x, perm));
    int64_t in_strides[AK_TOPS_MAX_RANK], strides[AK_TOPS_MAX_RANK];
    ak__tops_strides(x->rank, x->dims, in_strides);
    for (int d = 0; d < x->rank; d++) strides[d] = in_strides[perm[d]];
    ak__tops_strided_copy(ctx, y->data, x->data, ak_elem_type_size(x->type), y->rank, y->dims,
                          strides);
    return AK_OK;
}

const ak__op_def ak__op_transpose = {"", "Transpose", 1, 0, NULL, NULL, reshape_transpose,
                                     run_transpose};

/* ---- Expand ------------------------------------------------------------------------- */

static ak_status reshape_expand(ak__op_ctx *ctx) {
    const ak__tensor *x, *s;
    AK_CHECK(ak__op_require(ctx, 0, &x));
    AK_CHECK(ak__op_require(ctx, 1, &s));
    int64_t shape[AK_TOPS_MAX_RANK], dims[AK_TOPS_MAX_RANK];
    size_t n;
    AK_CHECK(ak__op_read_ints(ctx, s, "shape", shape, AK_TOPS_MAX_RANK, &n));
    int rank = (int)n > x->rank ? (int)n : x->rank;
    for (int d = 0; d < rank; d++) { /* bidirectional broadcast, aligned at the right */
        int dx = d - (rank - x->rank), ds = d - (rank - (int)n);
        int64_t a = dx >= 0 ? x->dims[dx] : 1, b = ds >= 0 ? shape[ds] : 1;
        if (b < 0)
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "shape entry %d is %lld", ds,
                              (long long)b);
        if (a != b && a != 1 && b != 1)
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                              "cannot expand dimension %d of size %lld to %lld", d,
                              (long long)a, (long long)b);
        dims[d] = a == 1 ? b : a;
    }
    return ak__op_set_output(ctx, 0, x->type, rank, dims);
}

static ak_status run_expand(ak__op_ctx *ctx) {
    const ak__tensor *x = ak__op_in(ctx, 0);
    ak__tensor *y = ak__op_out(ctx, 0);
    int64_t in_strides[AK_TOPS_MAX_RANK], strides[AK_TOPS_MAX_RANK];
    ak__tops_strides(x->rank, x->dims, in_strides);
    for (int d = 0; d < y->rank; d++) {
        int dx = d - (y->rank - x->rank);
        strides[d] = dx >= 0 && x->dims[dx] != 1 ? in_strides[dx] : 0;
    }
    ak__tops_strided_copy(ctx, y->data, x->data, ak_elem_type_size(x->type), y->rank, y->dims,
                          strides);
    return AK_OK;
}

const ak__op_def ak__op_expand = {"", "Expand", 1, 0, NULL, NULL, reshape_expand, run_expand};

/* ---- Concat ------------------------------------------------------------------------- */

static ak_status reshape_concat(ak__op_ctx *ctx) {
    const ak__tensor *first = NULL;
    for (uint32_t i = 0; i < ctx->num_inputs && !first; i++) first = ak__op_in(ctx, i);
    if (!first) return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "no inputs");
    int axis;
    AK_CHECK(ak__op_axis(ctx, ak__attr_int(ctx->node, "axis", 1), first->rank, 0, &axis));
    int64_t dims[AK_TOPS_MAX_RANK];
    memcpy(dims, first->dims, (size_t)first->rank * sizeof *dims);
    dims[axis] = 0;
    for (uint32_t i = 0; i < ctx->num_inputs; i++) {
        const ak__tensor *t = ak__op_in(ctx, i);
        if (!t) continue;
        if (t->type != first->type || t->rank != first->rank)
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                              "input %u is %s of rank %d, input 0 %s of rank %d", i,
                              ak_elem_type_name(t->type), t->rank,
                              ak_elem_type_name(first->type), first->rank);
        for (int d = 0; d < t->rank; d++)
            if (d != axis && t->dims[d] != first->dims[d])
                return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                                  "input %u has size %lld on axis %d, expected %lld", i,
                                  (long long)t->dims[d], d, (long long)first->dims[d]);
        dims[axis] += t->dims[axis];
    }
    return ak__op_set_output(ctx, 0, first->type, first->rank, dims);
}

static ak_status run_concat(ak__op_ctx *ctx) {
    ak__tensor *y = ak__op_out(ctx, 0);
    size_t elem = ak_elem_type_size(y->type);
    int axis;
    AK_CHECK(ak__op_axis(ctx, ak__attr_int(ctx->node, "axis", 1), y->rank, 0, &axis));
    int64_t outer = ak__tops_prod(y->dims, 0, axis);
    size_t out_block = (size_t)ak__tops_prod(y->dims, axis, y->rank) * elem, offset = 0;
    for (uint32_t i = 0; i < ctx->num_inputs; i++) {
        const ak__tensor *t = ak__op_in(ctx, i);
        if (!t || !t->count) continue;
        size_t block = (size_t)ak__tops_prod(t->dims, axis, t->rank) * elem;
        for (int64_t o = 0; o < outer; o++)
            memcpy((char *)y->data + (size_t)o * out_block + offset,
                   (const char *)t->data + (size_t)o * block, block);
        offset += block;
    }
    return AK_OK;
}

const ak__op_def ak__op_concat = {"", "Concat", 1, 0, NULL, NULL, reshape_concat, run_concat};

/* ---- Split -------------------------------------------------------------------------- */

/* Sizes of the ctx->num_outputs parts along axis: from the split attribute (opset < 13)
 * or input (13+), else equal parts (the last one smaller from opset 18). */
static ak_status split_sizes(const ak__op_ctx *ctx, const ak__tensor *x, int axis,
                             int64_t *sizes) {
    uint32_t n = ctx->num_outputs;
    int64_t dim = x->dims[axis], total = 0;
    size_t k = 0;
    const ak__tensor *st = ctx->node->opset >= 13 ? ak__op_in(ctx, 1) : NULL;
    const int64_t *attr = NULL;
    if (ctx->node->opset < 13) k = ak__attr_ints(ctx->node, "split", &attr);
    if (st) {
        if (st->count != n)
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                              "split has %llu entries for %u outputs",
                              (unsigned long long)st->count, n);
        AK_CHECK(ak__op_read_ints(ctx, st, "split", sizes, n, &k));
    } else if (attr) {
        if (k != n)
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                              "split has %zu entries for %u outputs", k, n);
        memcpy(sizes, attr, k * sizeof *attr);
    } else {
        int64_t chunk = (dim + n - 1) / n;
        if (ctx->node->opset < 18 && dim % n != 0)
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                              "axis of size %lld does not split into %u equal parts",
                              (long long)dim, n);
        for (uint32_t i = 0; i < n; i++) {
            int64_t left = dim - (int64_t)i * chunk;
            sizes[i] = left < 0 ? 0 : left < chunk ? left : chunk;
        }
    }
    for (uint32_t i = 0; i < n; i++) {
        if (sizes[i] < 0 || sizes[i] > dim)
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "split entry %u is %lld", i,
                              (long long)sizes[i]);
        total += sizes[i];
    }
    if (total != dim)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                          "split sizes add up to %lld, the axis has %lld", (long long)total,
                          (long long)dim);
    return AK_OK;
}

static ak_status reshape_split(ak__op_ctx *ctx) {
    const ak__tensor *x;
    AK_CHECK(ak__op_require(ctx, 0, &x));
    if (ctx->num_outputs == 0 || ctx->num_outputs > 4096)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "%u outputs", ctx->num_outputs);
    if (ctx->node->opset >= 18 && ak__attr_has(ctx->node, "num_outputs") &&
        ak__attr_int(ctx->node, "num_outputs", 0) != (int64_t)ctx->num_outputs)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "num_outputs is %lld, the node has %u",
                          (long long)ak__attr_int(ctx->node, "num_outputs", 0), ctx->num_outputs);
    int axis;
    AK_CHECK(ak__op_axis(ctx, ak__attr_int(ctx->node, "axis", 0), x->rank, 0, &axis));
    int64_t sizes[4096], dims[AK_TOPS_MAX_RANK];
    AK_CHECK(split_sizes(ctx, x, axis, sizes));
    memcpy(dims, x->dims, (size_t)x->rank * sizeof *dims);
    for (uint32_t i = 0; i < ctx->num_outputs; i++) {
        dims[axis] = sizes[i];
        AK_CHECK(ak__op_set_output(ctx, i, x->type, x->rank, dims));
    }
    return AK_OK;
}

static ak_status run_split(ak__op_ctx *ctx) {
    const ak__tensor *x = ak__op_in(ctx, 0);
    size_t elem = ak_elem_type_size(x->type);
    int axis;
    AK_CHECK(ak__op_axis(ctx, ak__attr_int(ctx->node, "axis", 0), x->rank, 0, &axis));
    int64_t sizes[4096]; /* omitted outputs still advance the offset */
    AK_CHECK(split_sizes(ctx, x, axis, sizes));
    int64_t outer = ak__tops_prod(x->dims, 0, axis);
    size_t in_block = (size_t)ak__tops_prod(x->dims, axis, x->rank) * elem;
    size_t inner = (size_t)ak__tops_prod(x->dims, axis + 1, x->rank) * elem, offset = 0;
    for (uint32_t i = 0; i < ctx->num_outputs; i++) {
        ak__tensor *y = ak__op_out(ctx, i);
        size_t block = (size_t)sizes[i] * inner;
        if (y && y->count)
            for (int64_t o = 0; o < outer; o++)
                memcpy((char *)y->data + (size_t)o * block,
                       (const char *)x->data + (size_t)o * in_block + offset, block);
        offset += block;
    }
    return AK_OK;
}

const ak__op_def ak__op_split = {"", "Split", 1, 0, NULL, NULL, reshape_split, run_split};

/* ---- Slice -------------------------------------------------------------------------- */

/* Per input dim: first index, step and count selected. */
typedef struct slice_plan {
    int64_t start[AK_TOPS_MAX_RANK], step[AK_TOPS_MAX_RANK], count[AK_TOPS_MAX_RANK];
} slice_plan;

/* Reads starts/ends/axes/steps: attributes before opset 10, inputs from 10. */
static ak_status slice_params(const ak__op_ctx *ctx, int64_t *starts, int64_t *ends,
                              int64_t *axes, int64_t *steps, size_t *n, int *has_axes) {
    size_t ne, na = 0, ns = 0;
    if (ctx->node->opset < 10) {
        const int64_t *s, *e, *a;
        *n = ak__attr_ints(ctx->node, "starts", &s);
        ne = ak__attr_ints(ctx->node, "ends", &e);
        na = ak__attr_ints(ctx->node, "axes", &a);
        *has_axes = ak__attr_has(ctx->node, "axes");
        if (*n > AK_TOPS_MAX_RANK || ne > AK_TOPS_MAX_RANK || na > AK_TOPS_MAX_RANK)
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "more than %d starts, ends or axes",
                              AK_TOPS_MAX_RANK);
        if (*n) memcpy(starts, s, *n * sizeof *s);
        if (ne) memcpy(ends, e, ne * sizeof *e);
        if (na) memcpy(axes, a, na * sizeof *a);
    } else {
        const ak__tensor *s, *e, *a = ak__op_in(ctx, 3), *st = ak__op_in(ctx, 4);
        AK_CHECK(ak__op_require(ctx, 1, &s));
        AK_CHECK(ak__op_require(ctx, 2, &e));
        AK_CHECK(ak__op_read_ints(ctx, s, "starts", starts, AK_TOPS_MAX_RANK, n));
        AK_CHECK(ak__op_read_ints(ctx, e, "ends", ends, AK_TOPS_MAX_RANK, &ne));
        *has_axes = a != NULL;
        if (a) AK_CHECK(ak__op_read_ints(ctx, a, "axes", axes, AK_TOPS_MAX_RANK, &na));
        if (st) AK_CHECK(ak__op_read_ints(ctx, st, "steps", steps, AK_TOPS_MAX_RANK, &ns));
        if (st && ns != *n)
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "%zu steps for %zu starts", ns, *n);
    }
    if (ne != *n || (*has_axes && na != *n))
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "%zu starts, %zu ends and %zu axes",
                          *n, ne, na);
    if (!ns)
        for (size_t i = 0; i < *n; i++) steps[i] = 1;
    return AK_OK;
}

/* Clamps one axis's start/end the ONNX way and counts the selected indices. */
static void slice_axis(int64_t dim, int64_t start, int64_t end, int64_t step, int64_t *first,
                       int64_t *count) {
    if (start < 0) start += dim;
    if (end < 0) end += dim;
    if (step > 0) {
        start = start < 0 ? 0 : start > dim ? dim : start;
        end = end < 0 ? 0 : end > dim ? dim : end;
        *count = end > start ? (end - start + step - 1) / step : 0;
    } else {
        start = start < 0 ? -1 : start > dim - 1 ? dim - 1 : start;
        end = end < -1 ? -1 : end > dim - 1 ? dim - 1 : end;
        *count = start > end ? (start - end + (-step) - 1) / (-step) : 0;
    }
    *first = *count ? start : 0;
}

static ak_status slice_plan_make(const ak__op_ctx *ctx, const ak__tensor *x, slice_plan *p) {
    int64_t starts[AK_TOPS_MAX_RANK], ends[AK_TOPS_MAX_RANK], axes[AK_TOPS_MAX_RANK],
        steps[AK_TOPS_MAX_RANK];
    size_t n;
    int has_axes;
    AK_CHECK(slice_params(ctx, starts, ends, axes, steps, &n, &has_axes));
    unsigned char seen[AK_TOPS_MAX_RANK] = {0};
    for (int d = 0; d < x->rank; d++) {
        p->start[d] = 0;
        p->step[d] = 1;
        p->count[d] = x->dims[d];
    }
    for (size_t i = 0; i < n; i++) {
        int a = (int)i;
        if (has_axes) AK_CHECK(ak__op_axis(ctx, axes[i], x->rank, 0, &a));
        else if (a >= x->rank)
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "%zu starts for rank %d", n,
                              x->rank);
        if (seen[a]) return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "axis %d is repeated", a);
        seen[a] = 1;
        /* |step| <= 2^62 keeps the arithmetic below from overflowing */
        if (steps[i] == 0 || steps[i] > ((int64_t)1 << 62) || steps[i] < -((int64_t)1 << 62))
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "step %lld on axis %d",
                              (long long)steps[i], a);
        p->step[a] = steps[i];
        slice_axis(x->dims[a], starts[i], ends[i], steps[i], &p->start[a], &p->count[a]);
    }
    return AK_OK;
}

static ak_status reshape_slice(ak__op_ctx *ctx) {
    const ak__tensor *x;
    AK_CHECK(ak__op_require(ctx, 0, &x));
    slice_plan p;
    AK_CHECK(slice_plan_make(ctx, x, &p));
    return ak__op_set_output(ctx, 0, x->type, x->rank, p.count);
}

static ak_status run_slice(ak__op_ctx *ctx) {
    const ak__tensor *x = ak__op_in(ctx, 0);
    ak__tensor *y = ak__op_out(ctx, 0);
    slice_plan p;
    AK_CHECK(slice_plan_make(ctx, x, &p));
    if (!y->count) return AK_OK;
    size_t elem = ak_elem_type_size(x->type);
    int64_t in_strides[AK_TOPS_MAX_RANK], strides[AK_TOPS_MAX_RANK], offset = 0;
    ak__tops_strides(x->rank, x->dims, in_strides);
    for (int d = 0; d < x->rank; d++) {
        offset += p.start[d] * in_strides[d];
        strides[d] = p.step[d] * in_strides[d];
    }
    ak__tops_strided_copy(ctx, y->data, (const char *)x->data + offset * (int64_t)elem, elem,
                          y->rank, y->dims, strides);
    return AK_OK;
}

const ak__op_def ak__op_slice = {"", "Slice", 1, 0, NULL, NULL, reshape_slice, run_slice};

/* ---- Tile --------------------------------------------------------------------------- */

static ak_status reshape_tile(ak__op_ctx *ctx) {
    const ak__tensor *x, *r;
    AK_CHECK(ak__op_require(ctx, 0, &x));
    AK_CHECK(ak__op_require(ctx, 1, &r));
    int64_t reps[AK_TOPS_MAX_RANK], dims[AK_TOPS_MAX_RANK];
    size_t n;
    AK_CHECK(ak__op_read_ints(ctx, r, "repeats", reps, AK_TOPS_MAX_RANK, &n));
    if ((int)n != x->rank)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "%zu repeats for rank %d", n, x->rank);
    for (int d = 0; d < x->rank; d++) {
        if (reps[d] < 0 || (x->dims[d] && reps[d] > ((int64_t)1 << 48) / x->dims[d]))
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "repeat %lld on axis %d",
                              (long long)reps[d], d);
        dims[d] = x->dims[d] * reps[d];
    }
    return ak__op_set_output(ctx, 0, x->type, x->rank, dims);
}

/* Each output row (all dims but the last) repeats the input row its index maps to. */
static ak_status run_tile(ak__op_ctx *ctx) {
    const ak__tensor *x = ak__op_in(ctx, 0);
    ak__tensor *y = ak__op_out(ctx, 0);
    size_t elem = ak_elem_type_size(x->type);
    if (!y->count) return AK_OK;
    if (y->rank == 0) {
        memcpy(y->data, x->data, elem);
        return AK_OK;
    }
    int k = y->rank - 1;
    int64_t in_strides[AK_TOPS_MAX_RANK], idx[AK_TOPS_MAX_RANK] = {0};
    ak__tops_strides(x->rank, x->dims, in_strides);
    size_t in_row = (size_t)x->dims[k] * elem, out_row = (size_t)y->dims[k] * elem;
    uint64_t rows = y->count / (uint64_t)y->dims[k];
    char *d = y->data;
    for (uint64_t r = 0; r < rows; r++, d += out_row) {
        int64_t off = 0;
        for (int j = 0; j < k; j++) off += (idx[j] % x->dims[j]) * in_strides[j];
        const char *s = (const char *)x->data + (size_t)off * elem;
        for (size_t o = 0; o < out_row; o += in_row) memcpy(d + o, s, in_row);
        for (int j = k - 1; j >= 0 && ++idx[j] == y->dims[j]; j--) idx[j] = 0;
    }
    return AK_OK;
}

const ak__op_def ak__op_tile = {"", "Tile", 1, 0, NULL, NULL, reshape_tile, run_tile};

/* ---- Pad ---------------------------------------------------------------------------- */

enum { PAD_CONSTANT, PAD_REFLECT, PAD_EDGE, PAD_WRAP };

typedef struct pad_plan {
    int mode;
    int64_t begin[AK_TOPS_MAX_RANK], end[AK_TOPS_MAX_RANK];
    unsigned char value[16]; /* the constant, one element */
} pad_plan;

static ak_status pad_mode(const ak__op_ctx *ctx, int *mode) {
    const char *m = ak__attr_string(ctx->node, "mode", "constant");
    if (!strcmp(m, "constant")) *mode = PAD_CONSTANT;
    else if (!strcmp(m, "reflect")) *mode = PAD_REFLECT;
    else if (!strcmp(m, "edge")) *mode = PAD_EDGE;
    else if (!strcmp(m, "wrap")) *mode = PAD_WRAP;
    else return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED, "mode \"%s\" is not supported", m);
    return AK_OK;
}

/* Pads per dim: the pads / paddings attribute before opset 11, inputs from 11 (with the
 * axes input from 18). */
static ak_status pad_amounts(const ak__op_ctx *ctx, const ak__tensor *x, pad_plan *p) {
    int64_t pads[2 * AK_TOPS_MAX_RANK], axes[AK_TOPS_MAX_RANK];
    size_t n, na = (size_t)x->rank;
    if (ctx->node->opset < 11) {
        const int64_t *a;
        n = ak__attr_ints(ctx->node, ctx->node->opset < 2 ? "paddings" : "pads", &a);
        if (n > 2 * AK_TOPS_MAX_RANK)
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "%zu pads", n);
        if (n) memcpy(pads, a, n * sizeof *a);
    } else {
        const ak__tensor *t, *at = ctx->node->opset >= 18 ? ak__op_in(ctx, 3) : NULL;
        AK_CHECK(ak__op_require(ctx, 1, &t));
        AK_CHECK(ak__op_read_ints(ctx, t, "pads", pads, 2 * AK_TOPS_MAX_RANK, &n));
        if (at) AK_CHECK(ak__op_read_ints(ctx, at, "axes", axes, AK_TOPS_MAX_RANK, &na));
    }
    if (ctx->node->opset < 18 || !ak__op_in(ctx, 3))
        for (size_t i = 0; i < na; i++) axes[i] = (int64_t)i;
    if (n != 2 * na)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "%zu pads for %zu axes", n, na);
    for (int d = 0; d < x->rank; d++) p->begin[d] = p->end[d] = 0;
    for (size_t i = 0; i < na; i++) {
        int a;
        AK_CHECK(ak__op_axis(ctx, axes[i], x->rank, 0, &a));
        p->begin[a] = pads[i];
        p->end[a] = pads[i + na];
    }
    return AK_OK;
}

static ak_status pad_value(const ak__op_ctx *ctx, const ak__tensor *x, pad_plan *p) {
    size_t elem = ak_elem_type_size(x->type);
    memset(p->value, 0, sizeof p->value);
    if (elem > sizeof p->value)
        return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED, "type %s is not supported",
                          ak_elem_type_name(x->type));
    const ak__tensor *v = ctx->node->opset >= 11 ? ak__op_in(ctx, 2) : NULL;
    if (v && v->count) {
        if (v->type != x->type || v->count != 1)
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                              "constant_value must be one %s element", ak_elem_type_name(x->type));
        memcpy(p->value, v->data, elem);
    } else if (ctx->node->opset < 11) {
        ak__elem_set(p->value, x->type, 0, ak__attr_float(ctx->node, "value", 0.f));
    }
    return AK_OK;
}

static ak_status pad_plan_make(const ak__op_ctx *ctx, const ak__tensor *x, pad_plan *p,
                               int64_t *dims) {
    AK_CHECK(pad_mode(ctx, &p->mode));
    AK_CHECK(pad_amounts(ctx, x, p));
    AK_CHECK(pad_value(ctx, x, p));
    for (int d = 0; d < x->rank; d++) {
        int64_t lim = (int64_t)1 << 48;
        if (p->begin[d] < -lim || p->begin[d] > lim || p->end[d] < -lim || p->end[d] > lim)
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "pads on axis %d are too large", d);
        dims[d] = x->dims[d] + p->begin[d] + p->end[d];
        if (dims[d] < 0)
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                              "pads remove more than the %lld elements of axis %d",
                              (long long)x->dims[d], d);
        if (p->mode != PAD_CONSTANT && x->dims[d] == 0 && dims[d] > 0)
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                              "cannot pad empty axis %d in this mode", d);
    }
    return AK_OK;
}

static ak_status reshape_pad(ak__op_ctx *ctx) {
    const ak__tensor *x;
    AK_CHECK(ak__op_require(ctx, 0, &x));
    pad_plan p;
    int64_t dims[AK_TOPS_MAX_RANK];
    AK_CHECK(pad_plan_make(ctx, x, &p, dims));
    return ak__op_set_output(ctx, 0, x->type, x->rank, dims);
}

/* Source index of padded position i on an axis of n elements, or -1 for the constant. */
static int64_t pad_map(int64_t i, int64_t n, int mode) {
    if (i >= 0 && i < n) return i;
    switch (mode) {
    case PAD_EDGE: return i < 0 ? 0 : n - 1;
    case PAD_WRAP: return ((i % n) + n) % n;
    case PAD_REFLECT: {
        if (n == 1) return 0;
        int64_t period = 2 * (n - 1), m = ((i % period) + period) % period;
        return m < n ? m : period - m;
    }
    default: return -1;
    }
}

static void pad_row(const pad_plan *p, char *d, const char *s, int64_t n_in, int64_t n_out,
                    int64_t begin, size_t elem) {
    /* the part that maps straight into the input row, then the borders */
    int64_t lo = begin < 0 ? 0 : begin, hi = begin + n_in < n_out ? begin + n_in : n_out;
    if (hi > lo) memcpy(d + (size_t)lo * elem, s + (size_t)(lo - begin) * elem,
                        (size_t)(hi - lo) * elem);
    for (int64_t j = 0; j < n_out; j++) {
        if (j == lo && hi > lo) j = hi;
        if (j >= n_out) break;
        int64_t i = pad_map(j - begin, n_in, p->mode);
        memcpy(d + (size_t)j * elem, i < 0 ? (const char *)p->value : s + (size_t)i * elem, elem);
    }
}

static ak_status run_pad(ak__op_ctx *ctx) {
    const ak__tensor *x = ak__op_in(ctx, 0);
    ak__tensor *y = ak__op_out(ctx, 0);
    pad_plan p;
    int64_t dims[AK_TOPS_MAX_RANK];
    AK_CHECK(pad_plan_make(ctx, x, &p, dims));
    size_t elem = ak_elem_type_size(x->type);
    if (!y->count) return AK_OK;
    if (y->rank == 0) {
        memcpy(y->data, x->data, elem);
        return AK_OK;
    }
    int k = y->rank - 1;
    int64_t in_strides[AK_TOPS_MAX_RANK], idx[AK_TOPS_MAX_RANK] = {0};
    ak__tops_strides(x->rank, x->dims, in_strides);
    size_t out_row = (size_t)y->dims[k] * elem;
    uint64_t rows = y->count / (uint64_t)y->dims[k];
    char *d = y->data;
    for (uint64_t r = 0; r < rows; r++, d += out_row) {
        int64_t off = 0;
        for (int j = 0; j < k && off >= 0; j++) {
            int64_t i = pad_map(idx[j] - p.begin[j], x->dims[j], p.mode);
            off = i < 0 ? -1 : off + i * in_strides[j];
        }
        if (off < 0)
            ak__tops_fill(d, p.value, elem, (uint64_t)y->dims[k]);
        else
            pad_row(&p, d, (const char *)x->data + (size_t)off * elem, x->dims[k], y->dims[k],
                    p.begin[k], elem);
        for (int j = k - 1; j >= 0 && ++idx[j] == y->dims[j]; j--) idx[j] = 0;
    }
    return AK_OK;
}

const ak__op_def ak__op_pad = {"", "Pad", 1, 0, NULL, NULL, reshape_pad, run_pad};

/* ---- DepthToSpace / SpaceToDepth ---------------------------------------------------- */

static ak_status block_size(const ak__op_ctx *ctx, const ak__tensor *x, int64_t *bs) {
    *bs = ak__attr_int(ctx->node, "blocksize", 0);
    if (x->rank != 4)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "input has rank %d, expected 4",
                          x->rank);
    if (*bs <= 0 || *bs > 4096)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "blocksize %lld", (long long)*bs);
    return AK_OK;
}

static ak_status reshape_depth_to_space(ak__op_ctx *ctx) {
    const ak__tensor *x;
    AK_CHECK(ak__op_require(ctx, 0, &x));
    int64_t bs;
    AK_CHECK(block_size(ctx, x, &bs));
    const char *mode = ak__attr_string(ctx->node, "mode", "DCR");
    if (strcmp(mode, "DCR") != 0 && strcmp(mode, "CRD") != 0)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "mode \"%s\"", mode);
    if (x->dims[1] % (bs * bs) != 0)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                          "%lld channels do not divide by blocksize^2 = %lld",
                          (long long)x->dims[1], (long long)(bs * bs));
    int64_t dims[4] = {x->dims[0], x->dims[1] / (bs * bs), x->dims[2] * bs, x->dims[3] * bs};
    return ak__op_set_output(ctx, 0, x->type, 4, dims);
}

/* Output viewed as [N, C', H, b1, W, b2]; DCR reads channel (b1 * bs + b2) * C' + c,
 * CRD reads c * bs * bs + b1 * bs + b2. */
static ak_status run_depth_to_space(ak__op_ctx *ctx) {
    const ak__tensor *x = ak__op_in(ctx, 0);
    ak__tensor *y = ak__op_out(ctx, 0);
    int64_t bs = ak__attr_int(ctx->node, "blocksize", 1);
    int64_t n = x->dims[0], c = y->dims[1], h = x->dims[2], w = x->dims[3], hw = h * w;
    int dcr = strcmp(ak__attr_string(ctx->node, "mode", "DCR"), "DCR") == 0;
    int64_t dims[6] = {n, c, h, bs, w, bs};
    int64_t strides[6] = {x->dims[1] * hw, dcr ? hw : bs * bs * hw, w,
                          dcr ? bs * c * hw : bs * hw, 1, dcr ? c * hw : hw};
    ak__tops_strided_copy(ctx, y->data, x->data, ak_elem_type_size(x->type), 6, dims, strides);
    return AK_OK;
}

const ak__op_def ak__op_depth_to_space = {"", "DepthToSpace", 1, 0, NULL, NULL,
                                          reshape_depth_to_space, run_depth_to_space};

static ak_status reshape_space_to_depth(ak__op_ctx *ctx) {
    const ak__tensor *x;
    AK_CHECK(ak__op_require(ctx, 0, &x));
    int64_t bs;
    AK_CHECK(block_size(ctx, x, &bs));
    if (x->dims[2] % bs || x->dims[3] % bs)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                          "spatial dims %lldx%lld do not divide by blocksize %lld",
                          (long long)x->dims[2], (long long)x->dims[3], (long long)bs);
    if (x->dims[1] > ((int64_t)1 << 48) / (bs * bs))
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "too many output channels");
    int64_t dims[4] = {x->dims[0], x->dims[1] * bs * bs, x->dims[2] / bs, x->dims[3] / bs};
    return ak__op_set_output(ctx, 0, x->type, 4, dims);
}

/* Output viewed as [N, b1, b2, C, H', W'] reading x[n, c, h' * bs + b1, w' * bs + b2]. */
static ak_status run_space_to_depth(ak__op_ctx *ctx) {
    const ak__tensor *x = ak__op_in(ctx, 0);
    ak__tensor *y = ak__op_out(ctx, 0);
    int64_t bs = ak__attr_int(ctx->node, "blocksize", 1);
    int64_t c = x->dims[1], w = x->dims[3], hw = x->dims[2] * w;
    int64_t dims[6] = {x->dims[0], bs, bs, c, y->dims[2], y->dims[3]};
    int64_t strides[6] = {c * hw, w, 1, hw, bs * w, bs};
    ak__tops_strided_copy(ctx, y->data, x->data, ak_elem_type_size(x->type), 6, dims, strides);
    return AK_OK;
}

const ak__op_def ak__op_space_to_depth = {"", "SpaceToDepth", 1, 0, NULL, NULL,
                                          reshape_space_to_depth, run_space_to_depth};

/* ---- ReverseSequence ---------------------------------------------------------------- */

static ak_status reverse_axes(const ak__op_ctx *ctx, const ak__tensor *x, int *batch,
                              int *time) {
    int64_t b = ak__attr_int(ctx->node, "batch_axis", 1), t = ak__attr_int(ctx->node, "time_axis", 0);
    if (x->rank < 2 || !((b == 0 && t == 1) || (b == 1 && t == 0)))
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                          "batch_axis %lld and time_axis %lld must be 0 and 1 (input rank %d)",
                          (long long)b, (long long)t, x->rank);
    *batch = (int)b;
    *time = (int)t;
    return AK_OK;
}

static ak_status reshape_reverse_sequence(ak__op_ctx *ctx) {
    const ak__tensor *x, *lens;
    AK_CHECK(ak__op_require(ctx, 0, &x));
    AK_CHECK(ak__op_require(ctx, 1, &lens));
    int b, t;
    AK_CHECK(reverse_axes(ctx, x, &b, &t));
    AK_CHECK(ak__tops_check_index(ctx, lens, "sequence_lens"));
    if (lens->rank != 1 || lens->dims[0] != x->dims[b])
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                          "sequence_lens must have one entry per batch item (%lld)",
                          (long long)x->dims[b]);
    return ak__op_set_output_like(ctx, 0, x);
}

static ak_status run_reverse_sequence(ak__op_ctx *ctx) {
    const ak__tensor *x = ak__op_in(ctx, 0), *lens = ak__op_in(ctx, 1);
    ak__tensor *y = ak__op_out(ctx, 0);
    int b, t;
    AK_CHECK(reverse_axes(ctx, x, &b, &t));
    int64_t nb = x->dims[b], nt = x->dims[t];
    size_t block = (size_t)ak__tops_prod(x->dims, 2, x->rank) * ak_elem_type_size(x->type);
    /* block position of (batch i, time j) */
    int64_t sb = b == 0 ? nt : 1, st = t == 0 ? nb : 1;
    for (int64_t i = 0; i < nb; i++) {
        int64_t len = ak__tops_index_at(lens, (uint64_t)i);
        if (len < 0 || len > nt)
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_ARG,
                              "sequence length %lld of batch item %lld is outside [0, %lld]",
                              (long long)len, (long long)i, (long long)nt);
        for (int64_t j = 0; j < nt; j++) {
            int64_t src = j < len ? len - 1 - j : j;
            ak__tops_copy_bytes((char *)y->data + (size_t)(i * sb + j * st) * block,
                                (const char *)x->data + (size_t)(i * sb + src * st) * block,
                                block);
        }
    }
    return AK_OK;
}

const ak__op_def ak__op_reverse_sequence = {"", "ReverseSequence", 1, 0, NULL, NULL,
                                            reshape_reverse_sequence, run_reverse_sequence};
