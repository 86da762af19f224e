/* Tensor family, data-dependent indexing: Gather, GatherElements, GatherND, ScatterND,
 * ScatterElements, Scatter, OneHot, Compress, NonZero, Trilu, CumSum.
 *
 * Every index read from a tensor is wrapped (negative counts from the end) and checked
 * against its axis before any byte moves: an out-of-range index fails the run with
 * AK_ERR_INVALID_ARG instead of reading or writing out of bounds. */
#include <string.h>

#include "infer/ops/tensor/tensor_ops.h"

/* ---- Gather ------------------------------------------------------------------------- */

static ak_status gather_axis(const ak__op_ctx *ctx, const ak__tensor *x, int *axis) {
    if (x->rank < 1) return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "data is a scalar");
    return ak__op_axis(ctx, ak__attr_int(ctx->node, "axis", 0), x->rank, 0, axis);
}

static ak_status reshape_gather(ak__op_ctx *ctx) {
    const ak__tensor *x, *ind;
    AK_CHECK(ak__op_require(ctx, 0, &x));
    AK_CHECK(ak__op_require(ctx, 1, &ind));
    AK_CHECK(ak__tops_check_index(ctx, ind, "indices"));
    int axis;
    AK_CHECK(gather_axis(ctx, x, &axis));
    int rank = x->rank - 1 + ind->rank;
    if (rank > AK_TOPS_MAX_RANK)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "output rank %d exceeds %d", rank,
                          AK_TOPS_MAX_RANK);
    int64_t dims[AK_TOPS_MAX_RANK];
    memcpy(dims, x->dims, (size_t)axis * sizeof *dims);
    memcpy(dims + axis, ind->dims, (size_t)ind->rank * sizeof *dims);
    memcpy(dims + axis + ind->rank, x->dims + axis + 1,
           (size_t)(x->rank - axis - 1) * sizeof *dims);
    return ak__op_set_output(ctx, 0, x->type, rank, dims);
}

typedef struct gather_job {
    char *dst;
    const char *src;
    const ak__tensor *ind;
    uint64_t m;       /* indices */
    int64_t n;        /* size of the gathered axis */
    size_t block;     /* bytes per gathered slice */
} gather_job;

/* Items are (outer, index) pairs; indices were checked before. */
static void gather_items(void *p, size_t begin, size_t end, int thread_index) {
    (void)thread_index;
    const gather_job *g = p;
    for (size_t w = begin; w < end; w++) {
        uint64_t o = w / g->m, k = w % g->m;
        int64_t i = ak__tops_index_at(g->ind, k);
        if (i < 0) i += g->n;
        memcpy(g->dst + w * g->block, g->src + ((size_t)o * (size_t)g->n + (size_t)i) * g->block,
               g->block);
    }
}

static ak_status run_gather(ak__op_ctx *ctx) {
    const ak__tensor *x = ak__op_in(ctx, 0), *ind = ak__op_in(ctx, 1);
    ak__tensor *y = ak__op_out(ctx, 0);
    int axis;
    AK_CHECK(gather_axis(ctx, x, &axis));
    int64_t n = x->dims[axis];
    for (uint64_t k = 0; k < ind->count; k++) {
        int64_t i = ak__tops_index_at(ind, k);
        AK_CHECK(ak__tops_wrap_index(ctx, &i, n, axis, "index"));
    }
    if (!y->count) return AK_OK;
    gather_job g = {y->data, x->data, ind, ind->count, n,
                    (size_t)ak__tops_prod(x->dims, axis + 1, x->rank) *
                        ak_elem_type_size(x->type)};
    size_t items = (size_t)(ak__tops_prod(x->dims, 0, axis) * (int64_t)ind->count);
    if (y->count * ak_elem_type_size(y->type) >= (1u << 16))
        (void)ak_threadpool_parallel_for(ctx->pool, items, g.block >= 65536 ? 1 : 65536 / g.block,
                                         gather_items, &g); /* chunks of >= 64 KiB */
    else
        gather_items(&g, 0, items, 0);
    return AK_OK;
}

const ak__op_def ak__op_gather = {"", "Gather", 1, 0, NULL, NULL, reshape_gather, run_gather};

/* ---- element-wise index walks (GatherElements, ScatterElements) --------------------- */

/* Checks indices (same rank as data, no dim larger than data's except on axis when
 * `any_axis`) and returns the axis. */
static ak_status elements_check(const ak__op_ctx *ctx, const ak__tensor *x,
                                const ak__tensor *ind, int *axis) {
    AK_CHECK(ak__tops_check_index(ctx, ind, "indices"));
    AK_CHECK(gather_axis(ctx, x, axis));
    if (ind->rank != x->rank)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "indices have rank %d, data %d",
                          ind->rank, x->rank);
    for (int d = 0; d < x->rank; d++)
        if (d != *axis && ind->dims[d] > x->dims[d])
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                              "indices have size %lld on axis %d, data %lld",
                              (long long)ind->dims[d], d, (long long)x->dims[d]);
    return AK_OK;
}

/* For every element k of ind (row-major), the element offset in data (shape x) of the
 * position with the axis coordinate replaced by the wrapped index; calls fn(k, offset). */
typedef void (*elem_visit)(void *arg, uint64_t k, int64_t offset);

static ak_status elements_walk(const ak__op_ctx *ctx, const ak__tensor *x,
                               const ak__tensor *ind, int axis, elem_visit fn, void *arg) {
    int64_t strides[AK_TOPS_MAX_RANK], idx[AK_TOPS_MAX_RANK] = {0}, base = 0;
    ak__tops_strides(x->rank, x->dims, strides);
    for (uint64_t k = 0; k < ind->count; k++) {
        int64_t i = ak__tops_index_at(ind, k);
        AK_CHECK(ak__tops_wrap_index(ctx, &i, x->dims[axis], axis, "index"));
        fn(arg, k, base + i * strides[axis]);
        for (int d = ind->rank - 1; d >= 0; d--) { /* odometer over ind's shape */
            if (d != axis) base += strides[d];
            if (++idx[d] < ind->dims[d]) break;
            if (d != axis) base -= strides[d] * ind->dims[d];
            idx[d] = 0;
        }
    }
    return AK_OK;
}

typedef struct copy_arg {
    char *dst;
    const char *src;
    size_t elem;
    int gather; /* 1: dst[k] = src[offset]; 0: dst[offset] = src[k] */
    ak_elem_type type;
    int reduction;
} copy_arg;

static ak_status reshape_gather_elements(ak__op_ctx *ctx) {
    const ak__tensor *x, *ind;
    AK_CHECK(ak__op_require(ctx, 0, &x));
    AK_CHECK(ak__op_require(ctx, 1, &ind));
    int axis;
    AK_CHECK(elements_check(ctx, x, ind, &axis));
    return ak__op_set_output(ctx, 0, x->type, ind->rank, ind->dims);
}

static void gather_elem(void *p, uint64_t k, int64_t offset) {
    const copy_arg *a = p;
    memcpy(a->dst + k * a->elem, a->src + (size_t)offset * a->elem, a->elem);
}

static ak_status run_gather_elements(ak__op_ctx *ctx) {
    const ak__tensor *x = ak__op_in(ctx, 0), *ind = ak__op_in(ctx, 1);
    ak__tensor *y = ak__op_out(ctx, 0);
    int axis;
    AK_CHECK(elements_check(ctx, x, ind, &axis));
    copy_arg a = {y->data, x->data, ak_elem_type_size(x->type), 1, x->type, 0};
    return elements_walk(ctx, x, ind, axis, gather_elem, &a);
}

const ak__op_def ak__op_gather_elements = {"", "GatherElements", 1, 0, NULL, NULL,
                                           reshape_gather_elements, run_gather_elements};

/* ---- reductions of the scatter operators -------------------------------------------- */

enum { RED_NONE, RED_ADD, RED_MUL, RED_MAX, RED_MIN };

static ak_status scatter_reduction(const ak__op_ctx *ctx, ak_elem_type type, int *red) {
    const char *r = ak__attr_string(ctx->node, "reduction", "none");
    if (!strcmp(r, "none")) *red = RED_NONE;
    else if (!strcmp(r, "add")) *red = RED_ADD;
    else if (!strcmp(r, "mul")) *red = RED_MUL;
    else if (!strcmp(r, "max")) *red = RED_MAX;
    else if (!strcmp(r, "min")) *red = RED_MIN;
    else return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "reduction \"%s\"", r);
    if (*red != RED_NONE && !ak__elem_is_float(type) && !ak__elem_is_integer(type))
        return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED, "reduction \"%s\" on type %s", r,
                          ak_elem_type_name(type));
    return AK_OK;
}

#define COMBINE(T, a, b, red)                                                      \
    ((red) == RED_ADD ? (T)((a) + (b))                                             \
     : (red) == RED_MUL ? (T)((a) * (b))                                           \
     : (red) == RED_MAX ? ((a) > (b) ? (a) : (b))                                  \
                        : ((a) < (b) ? (a) : (b)))

/* dst[i] = dst[i] (red) src[i] for n elements; exact for 32/64-bit integers. */
static void reduce_into(void *dst, const void *src, ak_elem_type type, int red, uint64_t n) {
    if (red == RED_NONE) {
        memcpy(dst, src, (size_t)n * ak_elem_type_size(type));
        return;
    }
#define REDUCE_T(T)                                                                \
    do {                                                                           \
        T *d = dst;                                                                \
        const T *s = src;                                                          \
        for (uint64_t i = 0; i < n; i++) d[i] = COMBINE(T, d[i], s[i], red);       \
    } while (0)
    switch (type) {
    case AK_ELEM_F32: REDUCE_T(float); break;
    case AK_ELEM_F64: REDUCE_T(double); break;
    case AK_ELEM_I32: REDUCE_T(int32_t); break;
    case AK_ELEM_I64: REDUCE_T(int64_t); break;
    case AK_ELEM_U64: REDUCE_T(uint64_t); break;
    default:
        for (uint64_t i = 0; i < n; i++) {
            double a = ak__elem_get(dst, type, i), b = ak__elem_get(src, type, i);
            ak__elem_set(dst, type, i, COMBINE(double, a, b, red));
        }
    }
#undef REDUCE_T
}

/* ---- ScatterElements / Scatter ------------------------------------------------------ */

static ak_status reshape_scatter_elements(ak__op_ctx *ctx) {
    const ak__tensor *x, *ind, *upd;
    AK_CHECK(ak__op_require(ctx, 0, &x));
    AK_CHECK(ak__op_require(ctx, 1, &ind));
    AK_CHECK(ak__op_require(ctx, 2, &upd));
    int axis, red;
    AK_CHECK(elements_check(ctx, x, ind, &axis));
    AK_CHECK(scatter_reduction(ctx, x->type, &red));
    if (upd->type != x->type || upd->rank != ind->rank ||
        memcmp(upd->dims, ind->dims, (size_t)ind->rank * sizeof *ind->dims) != 0)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                          "updates must have the data's type and the indices' shape");
    return ak__op_set_output_like(ctx, 0, x);
}

static void scatter_elem(void *p, uint64_t k, int64_t offset) {
    const copy_arg *a = p;
    reduce_into(a->dst + (size_t)offset * a->elem, a->src + k * a->elem, a->type, a->reduction,
                1);
}

static ak_status run_scatter_elements(ak__op_ctx *ctx) {
    const ak__tensor *x = ak__op_in(ctx, 0), *ind = ak__op_in(ctx, 1), *upd = ak__op_in(ctx, 2);
    ak__tensor *y = ak__op_out(ctx, 0);
    int axis, red;
    AK_CHECK(elements_check(ctx, x, ind, &axis));
    AK_CHECK(scatter_reduction(ctx, x->type, &red));
    ak__tops_copy_bytes(y->data, x->data, ak__tensor_nbytes(x));
    copy_arg a = {y->data, upd->data, ak_elem_type_size(x->type), 0, x->type, red};
    return elements_walk(ctx, x, ind, axis, scatter_elem, &a);
}

const ak__op_def ak__op_scatter_elements = {"", "ScatterElements", 1, 0, NULL, NULL,
                                            reshape_scatter_elements, run_scatter_elements};
/* Scatter (opsets 9-10) is ScatterElements without reduction. */
const ak__op_def ak__op_scatter = {"", "Scatter", 1, 0, NULL, NULL, reshape_scatter_elements,
                                   run_scatter_elements};

/* ---- GatherND / ScatterND ----------------------------------------------------------- */

/* The layout of an ND index walk: B batches of N index tuples of `last` coordinates,
 * each selecting a slice of S elements of data. */
typedef struct nd_plan {
    int b, last;
    int64_t batches, tuples, slice;
    int64_t strides[AK_TOPS_MAX_RANK]; /* data element strides of the indexed dims */
} nd_plan;

static ak_status nd_plan_make(const ak__op_ctx *ctx, const ak__tensor *x, const ak__tensor *ind,
                              int b, nd_plan *p) {
    AK_CHECK(ak__tops_check_index(ctx, ind, "indices"));
    if (ind->rank < 1 || x->rank < 1)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "data and indices need rank >= 1");
    if (b < 0 || b >= ind->rank || b >= x->rank)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "batch_dims %d for ranks %d and %d",
                          b, x->rank, ind->rank);
    int64_t last = ind->dims[ind->rank - 1];
    if (last < 1 || last > x->rank - b)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                          "index tuples have %lld entries, data has %d dims past batch_dims",
                          (long long)last, x->rank - b);
    for (int d = 0; d < b; d++)
        if (x->dims[d] != ind->dims[d])
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "batch dim %d differs: %lld vs %lld",
                              d, (long long)x->dims[d], (long long)ind->dims[d]);
    p->b = b;
    p->last = (int)last;
    p->batches = ak__tops_prod(x->dims, 0, b);
    p->tuples = ak__tops_prod(ind->dims, b, ind->rank - 1);
    p->slice = ak__tops_prod(x->dims, b + p->last, x->rank);
    int64_t s = p->slice;
    for (int j = p->last - 1; j >= 0; j--) {
        p->strides[j] = s;
        s *= x->dims[b + j];
    }
    return AK_OK;
}

/* Element offset (within one batch) of tuple t of batch bi, checking each coordinate. */
static ak_status nd_offset(const ak__op_ctx *ctx, const ak__tensor *x, const ak__tensor *ind,
                           const nd_plan *p, int64_t bi, int64_t t, int64_t *off) {
    uint64_t base = (uint64_t)((bi * p->tuples + t) * p->last);
    *off = 0;
    for (int j = 0; j < p->last; j++) {
        int64_t i = ak__tops_index_at(ind, base + (uint64_t)j);
        AK_CHECK(ak__tops_wrap_index(ctx, &i, x->dims[p->b + j], p->b + j, "index"));
        *off += i * p->strides[j];
    }
    return AK_OK;
}

static ak_status reshape_gather_nd(ak__op_ctx *ctx) {
    const ak__tensor *x, *ind;
    AK_CHECK(ak__op_require(ctx, 0, &x));
    AK_CHECK(ak__op_require(ctx, 1, &ind));
    nd_plan p;
    int b = ctx->node->opset >= 12 ? (int)ak__attr_int(ctx->node, "batch_dims", 0) : 0;
    AK_CHECK(nd_plan_make(ctx, x, ind, b, &p));
    int64_t dims[2 * AK_TOPS_MAX_RANK];
    int rank = ind->rank - 1;
    memcpy(dims, ind->dims, (size_t)rank * sizeof *dims);
    for (int d = b + p.last; d < x->rank; d++) dims[rank++] = x->dims[d];
    if (rank > AK_TOPS_MAX_RANK)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "output rank %d exceeds %d", rank,
                          AK_TOPS_MAX_RANK);
    return ak__op_set_output(ctx, 0, x->type, rank, dims);
}

static ak_status run_gather_nd(ak__op_ctx *ctx) {
    const ak__tensor *x = ak__op_in(ctx, 0), *ind = ak__op_in(ctx, 1);
    ak__tensor *y = ak__op_out(ctx, 0);
    nd_plan p;
    int b = ctx->node->opset >= 12 ? (int)ak__attr_int(ctx->node, "batch_dims", 0) : 0;
    AK_CHECK(nd_plan_make(ctx, x, ind, b, &p));
    size_t elem = ak_elem_type_size(x->type), slice = (size_t)p.slice * elem;
    int64_t batch = ak__tops_prod(x->dims, b, x->rank);
    char *d = y->data;
    for (int64_t bi = 0; bi < p.batches; bi++)
        for (int64_t t = 0; t < p.tuples; t++, d += slice) {
            int64_t off;
            AK_CHECK(nd_offset(ctx, x, ind, &p, bi, t, &off));
            ak__tops_copy_bytes(d, (const char *)x->data + (size_t)(bi * batch + off) * elem,
                                slice);
        }
    return AK_OK;
}

const ak__op_def ak__op_gather_nd = {"", "GatherND", 1, 0, NULL, NULL, reshape_gather_nd,
                                     run_gather_nd};

static ak_status reshape_scatter_nd(ak__op_ctx *ctx) {
    const ak__tensor *x, *ind, *upd;
    AK_CHECK(ak__op_require(ctx, 0, &x));
    AK_CHECK(ak__op_require(ctx, 1, &ind));
    AK_CHECK(ak__op_require(ctx, 2, &upd));
    nd_plan p;
    int red;
    AK_CHECK(nd_plan_make(ctx, x, ind, 0, &p));
    AK_CHECK(scatter_reduction(ctx, x->type, &red));
    /* updates: indices.shape[:-1] + data.shape[last:] */
    int rank = ind->rank - 1 + x->rank - p.last, ok = upd->type == x->type && upd->rank == rank;
    for (int d = 0; ok && d < ind->rank - 1; d++) ok = upd->dims[d] == ind->dims[d];
    for (int d = p.last; ok && d < x->rank; d++) ok = upd->dims[ind->rank - 1 + d - p.last] == x->dims[d];
    if (!ok)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                          "updates must have the data's type and shape indices[:-1] + "
                          "data[%d:]", p.last);
    return ak__op_set_output_like(ctx, 0, x);
}

static ak_status run_scatter_nd(ak__op_ctx *ctx) {
    const ak__tensor *x = ak__op_in(ctx, 0), *ind = ak__op_in(ctx, 1), *upd = ak__op_in(ctx, 2);
    ak__tensor *y = ak__op_out(ctx, 0);
    nd_plan p;
    int red;
    AK_CHECK(nd_plan_make(ctx, x, ind, 0, &p));
    AK_CHECK(scatter_reduction(ctx, x->type, &red));
    size_t elem = ak_elem_type_size(x->type);
    ak__tops_copy_bytes(y->data, x->data, ak__tensor_nbytes(x));
    for (int64_t t = 0; t < p.tuples; t++) {
        int64_t off;
        AK_CHECK(nd_offset(ctx, x, ind, &p, 0, t, &off));
        if (p.slice)
            reduce_into((char *)y->data + (size_t)off * elem,
                        (const char *)upd->data + (size_t)(t * p.slice) * elem, x->type, red,
                        (uint64_t)p.slice);
    }
    return AK_OK;
}

const ak__op_def ak__op_scatter_nd = {"", "ScatterND", 1, 0, NULL, NULL, reshape_scatter_nd,
                                      run_scatter_nd};

/* ---- OneHot ------------------------------------------------------------------------- */

static ak_status one_hot_depth(const ak__op_ctx *ctx, int64_t *depth) {
    const ak__tensor *t;
    AK_CHECK(ak__op_require(ctx, 1, &t));
    double v;
    AK_CHECK(ak__tops_scalar_double(ctx, t, "depth", &v));
    if (!(v >= 1 && v <= (double)((int64_t)1 << 40)))
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "depth %g", v);
    *depth = (int64_t)v;
    return AK_OK;
}

static ak_status reshape_one_hot(ak__op_ctx *ctx) {
    const ak__tensor *ind, *vals;
    AK_CHECK(ak__op_require(ctx, 0, &ind));
    AK_CHECK(ak__op_require(ctx, 2, &vals));
    int64_t depth;
    AK_CHECK(one_hot_depth(ctx, &depth));
    if (vals->count != 2)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "values must hold [off, on]");
    if (!ak__elem_is_float(ind->type) && !ak__elem_is_integer(ind->type))
        return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED, "indices of type %s",
                          ak_elem_type_name(ind->type));
    if (ind->rank + 1 > AK_TOPS_MAX_RANK)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "indices of rank %d", ind->rank);
    int axis;
    AK_CHECK(ak__op_axis(ctx, ak__attr_int(ctx->node, "axis", -1), ind->rank + 1, 0, &axis));
    int64_t dims[AK_TOPS_MAX_RANK];
    for (int d = 0, k = 0; d <= ind->rank; d++) dims[d] = d == axis ? depth : ind->dims[k++];
    return ak__op_set_output(ctx, 0, vals->type, ind->rank + 1, dims);
}

static ak_status run_one_hot(ak__op_ctx *ctx) {
    const ak__tensor *ind = ak__op_in(ctx, 0), *vals = ak__op_in(ctx, 2);
    ak__tensor *y = ak__op_out(ctx, 0);
    int64_t depth;
    AK_CHECK(one_hot_depth(ctx, &depth));
    int axis;
    AK_CHECK(ak__op_axis(ctx, ak__attr_int(ctx->node, "axis", -1), ind->rank + 1, 0, &axis));
    size_t elem = ak_elem_type_size(y->type);
    const char *on = (const char *)vals->data + elem;
    ak__tops_fill(y->data, vals->data, elem, y->count);
    uint64_t inner = (uint64_t)ak__tops_prod(ind->dims, axis, ind->rank);
    for (uint64_t k = 0; k < ind->count; k++) {
        int64_t i;
        if (ind->type == AK_ELEM_I64 || ind->type == AK_ELEM_I32) {
            i = ak__tops_index_at(ind, k);
        } else { /* range-check before converting: NaN or huge floats are off */
            double v = ak__elem_get(ind->data, ind->type, k);
            if (!(v > -(double)depth - 1 && v < (double)depth)) continue;
            i = (int64_t)v;
        }
        if (i < 0) i += depth;
        if (i < 0 || i >= depth) continue; /* out of range: all off, as the spec says */
        uint64_t o = k / inner, r = k % inner;
        memcpy((char *)y->data + ((o * (uint64_t)depth + (uint64_t)i) * inner + r) * elem, on,
               elem);
    }
    return AK_OK;
}

const ak__op_def ak__op_one_hot = {"", "OneHot", 1, 0, NULL, NULL, reshape_one_hot,
                                   run_one_hot};

/* ---- Compress ----------------------------------------------------------------------- */

/* Selected count along the axis (or the flattened input): condition entries past the
 * axis must be false. */
static ak_status compress_count(const ak__op_ctx *ctx, const ak__tensor *x,
                                const ak__tensor *cond, int64_t n, int64_t *count) {
    if (cond->type != AK_ELEM_BOOL || cond->rank != 1)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "condition must be a 1-D bool tensor");
    const uint8_t *c = cond->data;
    *count = 0;
    for (uint64_t j = 0; j < cond->count; j++) {
        if (!c[j]) continue;
        if ((int64_t)j >= n)
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_ARG,
                              "condition selects index %llu of an axis of %lld",
                              (unsigned long long)j, (long long)n);
        (*count)++;
    }
    (void)x;
    return AK_OK;
}

static ak_status compress_layout(const ak__op_ctx *ctx, const ak__tensor *x, int *axis,
                                 int64_t *outer, int64_t *n, int64_t *inner) {
    *axis = -1;
    if (!ak__attr_has(ctx->node, "axis")) {
        *outer = *inner = 1;
        *n = (int64_t)x->count;
        return AK_OK;
    }
    AK_CHECK(gather_axis(ctx, x, axis));
    *outer = ak__tops_prod(x->dims, 0, *axis);
    *n = x->dims[*axis];
    *inner = ak__tops_prod(x->dims, *axis + 1, x->rank);
    return AK_OK;
}

static ak_status reshape_compress(ak__op_ctx *ctx) {
    const ak__tensor *x, *cond;
    AK_CHECK(ak__op_require(ctx, 0, &x));
    AK_CHECK(ak__op_require(ctx, 1, &cond));
    int axis;
    int64_t outer, n, inner, count;
    AK_CHECK(compress_layout(ctx, x, &axis, &outer, &n, &inner));
    AK_CHECK(compress_count(ctx, x, cond, n, &count));
    if (axis < 0) return ak__op_set_output(ctx, 0, x->type, 1, &count);
    int64_t dims[AK_TOPS_MAX_RANK];
    memcpy(dims, x->dims, (size_t)x->rank * sizeof *dims);
    dims[axis] = count;
    return ak__op_set_output(ctx, 0, x->type, x->rank, dims);
}

static ak_status run_compress(ak__op_ctx *ctx) {
    const ak__tensor *x = ak__op_in(ctx, 0), *cond = ak__op_in(ctx, 1);
    ak__tensor *y = ak__op_out(ctx, 0);
    int axis;
    int64_t outer, n, inner, count;
    AK_CHECK(compress_layout(ctx, x, &axis, &outer, &n, &inner));
    AK_CHECK(compress_count(ctx, x, cond, n, &count));
    size_t block = (size_t)inner * ak_elem_type_size(x->type);
    int64_t m = (int64_t)cond->count < n ? (int64_t)cond->count : n;
    const uint8_t *c = cond->data;
    char *d = y->data;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < m; j++)
            if (c[j]) {
                memcpy(d, (const char *)x->data + (size_t)(o * n + j) * block, block);
                d += block;
            }
    return AK_OK;
}

const ak__op_def ak__op_compress = {"", "Compress", 1, 0, NULL, NULL, reshape_compress,
                                    run_compress};

/* ---- NonZero ------------------------------------------------------------------------ */

/* Non-zero test by type: -0.0 is zero, NaN is not; other types compare bytes. */
static int nonzero_at(const ak__tensor *x, uint64_t i, size_t elem) {
    switch (x->type) {
    case AK_ELEM_F32: return ((const float *)x->data)[i] != 0.0f;
    case AK_ELEM_F64: return ((const double *)x->data)[i] != 0.0;
    case AK_ELEM_F16:
    case AK_ELEM_BF16: return (((const uint16_t *)x->data)[i] & 0x7fff) != 0;
    default: {
        const unsigned char *p = (const unsigned char *)x->data + i * elem;
        for (size_t b = 0; b < elem; b++)
            if (p[b]) return 1;
        return 0;
    }
    }
}

static ak_status reshape_nonzero(ak__op_ctx *ctx) {
    const ak__tensor *x;
    AK_CHECK(ak__op_require(ctx, 0, &x));
    if (!ak__elem_is_float(x->type) && !ak__elem_is_integer(x->type) && x->type != AK_ELEM_BOOL)
        return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED, "type %s is not supported",
                          ak_elem_type_name(x->type));
    size_t elem = ak_elem_type_size(x->type);
    int64_t dims[2] = {x->rank ? x->rank : 1, 0}; /* a scalar counts as 1-D, like numpy */
    for (uint64_t i = 0; i < x->count; i++) dims[1] += nonzero_at(x, i, elem);
    return ak__op_set_output(ctx, 0, AK_ELEM_I64, 2, dims);
}

static ak_status run_nonzero(ak__op_ctx *ctx) {
    const ak__tensor *x = ak__op_in(ctx, 0);
    ak__tensor *y = ak__op_out(ctx, 0);
    size_t elem = ak_elem_type_size(x->type);
    int64_t *o = y->data, nnz = y->dims[1], idx[AK_TOPS_MAX_RANK] = {0}, k = 0;
    int rank = x->rank;
    for (uint64_t i = 0; i < x->count; i++) {
        if (nonzero_at(x, i, elem) && k < nnz) {
            if (rank == 0) o[k] = 0;
            for (int d = 0; d < rank; d++) o[d * nnz + k] = idx[d];
            k++;
        }
        for (int d = rank - 1; d >= 0 && ++idx[d] == x->dims[d]; d--) idx[d] = 0;
    }
    return AK_OK;
}

const ak__op_def ak__op_nonzero = {"", "NonZero", 1, 0, NULL, NULL, reshape_nonzero,
                                   run_nonzero};

/* ---- Trilu -------------------------------------------------------------------------- */

static ak_status trilu_k(const ak__op_ctx *ctx, int64_t *k) {
    const ak__tensor *t = ak__op_in(ctx, 1);
    *k = 0;
    if (!t) return AK_OK;
    AK_CHECK(ak__tops_check_index(ctx, t, "k"));
    AK_CHECK(ak__tops_scalar_int(ctx, t, "k", k));
    return AK_OK;
}

static ak_status reshape_trilu(ak__op_ctx *ctx) {
    const ak__tensor *x;
    AK_CHECK(ak__op_require(ctx, 0, &x));
    if (x->rank < 2)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "input has rank %d, expected >= 2",
                          x->rank);
    int64_t k;
    AK_CHECK(trilu_k(ctx, &k));
    return ak__op_set_output_like(ctx, 0, x);
}

/* Keeps j - i >= k (upper) or j - i <= k (lower) of each matrix; zeroes the rest. */
static ak_status run_trilu(ak__op_ctx *ctx) {
    const ak__tensor *x = ak__op_in(ctx, 0);
    ak__tensor *y = ak__op_out(ctx, 0);
    int64_t k;
    AK_CHECK(trilu_k(ctx, &k));
    int upper = ak__attr_int(ctx->node, "upper", 1) != 0;
    size_t elem = ak_elem_type_size(x->type);
    int64_t rows = x->dims[x->rank - 2], cols = x->dims[x->rank - 1];
    ak__tops_copy_bytes(y->data, x->data, ak__tensor_nbytes(x));
    if (!y->count) return AK_OK;
    /* clamp k so i + k cannot overflow */
    int64_t lim = rows + cols + 1;
    k = k < -lim ? -lim : k > lim ? lim : k;
    uint64_t mats = y->count / (uint64_t)(rows * cols);
    for (uint64_t m = 0; m < mats; m++)
        for (int64_t i = 0; i < rows; i++) {
            char *row = (char *)y->data + ((int64_t)m * rows + i) * cols * (int64_t)elem;
            int64_t lo = upper ? 0 : i + k + 1, hi = upper ? i + k : cols;
            lo = lo < 0 ? 0 : lo > cols ? cols : lo;
            hi = hi < 0 ? 0 : hi > cols ? cols : hi;
            if (hi > lo) memset(row + lo * (int64_t)elem, 0, (size_t)(hi - lo) * elem);
        }
    return AK_OK;
}

const ak__op_def ak__op_trilu = {"", "Trilu", 1, 0, NULL, NULL, reshape_trilu, run_trilu};

/* ---- CumSum ------------------------------------------------------------------------- */

static ak_status cumsum_axis(const ak__op_ctx *ctx, const ak__tensor *x, int *axis) {
    const ak__tensor *t;
    AK_CHECK(ak__op_require(ctx, 1, &t));
    AK_CHECK(ak__tops_check_index(ctx, t, "axis"));
    int64_t a;
    AK_CHECK(ak__tops_scalar_int(ctx, t, "axis", &a));
    if (x->rank < 1) return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "input is a scalar");
    return ak__op_axis(ctx, a, x->rank, 0, axis);
}

static ak_status reshape_cumsum(ak__op_ctx *ctx) {
    const ak__tensor *x;
    AK_CHECK(ak__op_require(ctx, 0, &x));
    if (!ak__elem_is_float(x->type) && !ak__elem_is_integer(x->type))
        return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED, "type %s is not supported",
                          ak_elem_type_name(x->type));
    int axis;
    AK_CHECK(cumsum_axis(ctx, x, &axis));
    return ak__op_set_output_like(ctx, 0, x);
}

/* Along the axis, in order (or reversed): y[j] = y[prev] + x[j] (inclusive) or
 * y[prev] + x[prev] (exclusive), a whole inner row at a time. */
#define CUMSUM_T(T)                                                                       \
    do {                                                                                  \
        const T *xs = x->data;                                                            \
        T *ys = y->data;                                                                  \
        for (int64_t o = 0; o < outer; o++)                                               \
            for (int64_t s = 0; s < n; s++) {                                             \
                int64_t j = rev ? n - 1 - s : s;                                          \
                T *yr = ys + (o * n + j) * inner;                                         \
                if (s == 0) {                                                             \
                    const T *xr = xs + (o * n + j) * inner;                               \
                    for (int64_t i = 0; i < inner; i++) yr[i] = excl ? (T)0 : xr[i];      \
                    continue;                                                             \
                }                                                                         \
                int64_t p = rev ? j + 1 : j - 1;                                          \
                const T *xr = xs + (o * n + (excl ? p : j)) * inner;                      \
                const T *yp = ys + (o * n + p) * inner;                                   \
                for (int64_t i = 0; i < inner; i++) yr[i] = (T)(yp[i] + xr[i]);           \
            }                                                                             \
    } while (0)

static ak_status run_cumsum(ak__op_ctx *ctx) {
    const ak__tensor *x = ak__op_in(ctx, 0);
    ak__tensor *y = ak__op_out(ctx, 0);
    int axis;
    AK_CHECK(cumsum_axis(ctx, x, &axis));
    int excl = ak__attr_int(ctx->node, "exclusive", 0) != 0;
    int rev = ak__attr_int(ctx->node, "reverse", 0) != 0;
    int64_t outer = ak__tops_prod(x->dims, 0, axis), n = x->dims[axis];
    int64_t inner = ak__tops_prod(x->dims, axis + 1, x->rank);
    switch (x->type) {
    case AK_ELEM_F32: CUMSUM_T(float); break;
    case AK_ELEM_F64: CUMSUM_T(double); break;
    case AK_ELEM_I32: CUMSUM_T(int32_t); break;
    case AK_ELEM_I64: CUMSUM_T(int64_t); break;
    case AK_ELEM_U32: CUMSUM_T(uint32_t); break;
    case AK_ELEM_U64: CUMSUM_T(uint64_t); break;
    default: /* f16, bf16, small ints: accumulate through double */
        for (int64_t o = 0; o < outer; o++)
            for (int64_t i = 0; i < inner; i++) {
                double acc = 0;
                for (int64_t s = 0; s < n; s++) {
                    int64_t j = rev ? n - 1 - s : s;
                    uint64_t at = (uint64_t)((o * n + j) * inner + i);
                    double v = ak__elem_get(x->data, x->type, at);
                    if (!excl) acc += v;
                    ak__elem_set(y->data, y->type, at, acc);
                    if (excl) acc += v;
                }
            }
    }
    return AK_OK;
}
#undef CUMSUM_T

const ak__op_def ak__op_cumsum = {"", "CumSum", 1, 0, NULL, NULL, reshape_cumsum, run_cumsum};
