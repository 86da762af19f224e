/* Unique (opset 11): the distinct elements of X (no axis: X flattened) or the distinct
 * slices of X along `axis`, with
 *   Y                unique values/slices: ascending when sorted = 1 (the default;
 *                    slices compare lexicographically in row-major order), else in
 *                    order of first occurrence,
 *   indices          where each first occurs in X,
 *   inverse_indices  for every element/slice of X, its position in Y,
 *   counts           how often each occurs.
 * Items are sorted by a stable merge sort of their positions (value, then position), so
 * each run of equal items starts with its first occurrence. Floats compare as numbers,
 * with -0 equal to 0 and every NaN equal to NaN and above all numbers. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "infer/ops/select/select.h"

typedef struct unique_state {
    /* 6 arrays of n int64: sorted positions, merge scratch, the group of each item, and
     * per group its first position, count and output rank */
    ak__select_buf scratch;
    int64_t n, groups;
} unique_state;

typedef struct unique_layout {
    int axis; /* -1: flattened */
    int64_t n, outer, inner;
} unique_layout;

static ak_status unique_create(const ak__ir_node *node, const ak__tensor *const *consts,
                               void **state) {
    (void)node;
    (void)consts;
    unique_state *st = calloc(1, sizeof *st);
    if (!st) return AK_FAIL(AK_ERR_NO_MEMORY, "Unique: out of memory");
    *state = st;
    return AK_OK;
}

static void unique_destroy(void *state) {
    unique_state *st = state;
    if (!st) return;
    ak__select_release(&st->scratch);
    free(st);
}

static ak_status layout_of(const ak__op_ctx *ctx, const ak__tensor *x, unique_layout *l) {
    if (!ak__elem_is_float(x->type) && !ak__elem_is_integer(x->type) &&
        x->type != AK_ELEM_BOOL)
        return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED, "input type %s is not supported",
                          ak_elem_type_name(x->type));
    l->axis = -1;
    l->n = (int64_t)x->count;
    l->outer = l->inner = 1;
    if (!ak__attr_has(ctx->node, "axis")) return AK_OK;
    AK_CHECK(ak__op_axis(ctx, ak__attr_int(ctx->node, "axis", 0), x->rank, 0, &l->axis));
    l->n = x->dims[l->axis];
    for (int d = 0; d < x->rank; d++) {
        if (d < l->axis) l->outer *= x->dims[d];
        if (d > l->axis) l->inner *= x->dims[d];
    }
    return AK_OK;
}

/* Orders two elements of type t: -1, 0 or 1. */
static int compare_elems(const void *data, ak_elem_type t, uint64_t a, uint64_t b) {
    if (ak__elem_is_float(t)) {
        double x = ak__elem_get(data, t, a), y = ak__elem_get(data, t, b);
        int nx = isnan(x), ny = isnan(y);
        if (nx || ny) return nx - ny;
        return (x > y) - (x < y);
    }
    if (t == AK_ELEM_U64) {
        uint64_t x = ((const uint64_t *)data)[a], y = ((const uint64_t *)data)[b];
        return (x > y) - (x < y);
    }
    int64_t x = ak__elem_get_int(data, t, a), y = ak__elem_get_int(data, t, b);
    return (x > y) - (x < y);
}

typedef struct item_order {
    const ak__tensor *x;
    const unique_layout *l;
} item_order;

/* Compares items (elements or slices) at positions a and b. */
static int compare_items(const item_order *o, int64_t a, int64_t b) {
    const unique_layout *l = o->l;
    for (int64_t out = 0; out < l->outer; out++)
        for (int64_t in = 0; in < l->inner; in++) {
            uint64_t base = (uint64_t)(out * l->n * l->inner + in);
            int c = compare_elems(o->x->data, o->x->type, base + (uint64_t)(a * l->inner),
                                  base + (uint64_t)(b * l->inner));
            if (c) return c;
        }
    return 0;
}

/* Stable bottom-up merge sort of pos[0..n) by item value; tmp holds n entries. */
static void sort_items(const item_order *o, int64_t *pos, int64_t *tmp, int64_t n) {
    for (int64_t width = 1; width < n; width *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * width) {
            int64_t mid = lo + width < n ? lo + width : n;
            int64_t hi = lo + 2 * width < n ? lo + 2 * width : n;
            int64_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi)
                tmp[k++] = compare_items(o, pos[j], pos[i]) < 0 ? pos[j++] : pos[i++];
            while (i < mid) tmp[k++] = pos[i++];
            while (j < hi) tmp[k++] = pos[j++];
        }
        memcpy(pos, tmp, (size_t)n * sizeof *pos);
    }
}

static ak_status unique_reshape(ak__op_ctx *ctx) {
    unique_state *st = ctx->state;
    const ak__tensor *x;
    AK_CHECK(ak__op_require(ctx, 0, &x));
    unique_layout l;
    AK_CHECK(layout_of(ctx, x, &l));
    int64_t n = l.n;
    AK_CHECK(ak__select_reserve(&st->scratch, (size_t)(6 * (n ? n : 1)) * sizeof(int64_t)));
    int64_t *pos = st->scratch.data, *tmp = pos + n, *group = tmp + n, *first = group + n,
            *count = first + n, *rank = count + n;
    for (int64_t i = 0; i < n; i++) pos[i] = i;
    item_order o = {x, &l};
    if (l.outer * l.inner > 0) sort_items(&o, pos, tmp, n);
    int64_t g = -1;
    for (int64_t k = 0; k < n; k++) {
        if (k == 0 || compare_items(&o, pos[k - 1], pos[k]) != 0) {
            first[++g] = pos[k];
            count[g] = 0;
        }
        group[pos[k]] = g;
        count[g]++;
    }
    st->n = n;
    st->groups = g + 1;
    /* output rank of each group: its sorted position, or its order of first occurrence */
    int sorted = ak__attr_int(ctx->node, "sorted", 1) != 0;
    for (int64_t k = 0; k < st->groups; k++) rank[k] = sorted ? k : -1;
    for (int64_t i = 0, next = 0; !sorted && i < n; i++)
        if (rank[group[i]] < 0) rank[group[i]] = next++;
    int64_t dims[AK_IR_MAX_RANK], u = st->groups;
    if (l.axis < 0) {
        AK_CHECK(ak__op_set_output(ctx, 0, x->type, 1, &u));
    } else {
        memcpy(dims, x->dims, (size_t)x->rank * sizeof *dims);
        dims[l.axis] = u;
        AK_CHECK(ak__op_set_output(ctx, 0, x->type, x->rank, dims));
    }
    AK_CHECK(ak__op_set_output(ctx, 1, AK_ELEM_I64, 1, &u));
    AK_CHECK(ak__op_set_output(ctx, 2, AK_ELEM_I64, 1, &n));
    return ak__op_set_output(ctx, 3, AK_ELEM_I64, 1, &u);
}

static ak_status unique_run(ak__op_ctx *ctx) {
    unique_state *st = ctx->state;
    const ak__tensor *x = ak__op_in(ctx, 0);
    unique_layout l;
    AK_CHECK(layout_of(ctx, x, &l));
    int64_t n = st->n, u = st->groups;
    const int64_t *group = (const int64_t *)st->scratch.data + 2 * n, *first = group + n,
                  *count = first + n, *rank = count + n;
    ak__tensor *y = ak__op_out(ctx, 0), *idx = ak__op_out(ctx, 1), *inv = ak__op_out(ctx, 2),
               *cnt = ak__op_out(ctx, 3);
    size_t es = ak_elem_type_size(x->type);
    for (int64_t g = 0; g < u; g++) {
        int64_t r = rank[g];
        if (idx) ((int64_t *)idx->data)[r] = first[g];
        if (cnt) ((int64_t *)cnt->data)[r] = count[g];
        if (!y) continue;
        for (int64_t out = 0; out < l.outer; out++) /* slice first[g] -> slice r of Y */
            memcpy((char *)y->data + (size_t)((out * u + r) * l.inner) * es,
                   (const char *)x->data + (size_t)((out * n + first[g]) * l.inner) * es,
                   (size_t)l.inner * es);
    }
    if (inv)
        for (int64_t i = 0; i < n; i++) ((int64_t *)inv->data)[i] = rank[group[i]];
    return AK_OK;
}

const ak__op_def ak__op_unique = {"", "Unique", 11, 0, unique_create, unique_destroy,
                                  unique_reshape, unique_run};
