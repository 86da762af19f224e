/* TopK: the k largest (or smallest) elements along an axis and their indices.
 *
 * k is an attribute before opset 10 and a one-element input from 10; `largest` and
 * `sorted` come in 11. Results are always sorted (allowed when sorted = 0), equal values
 * in ascending index order, NaN ranking above every number. Each slice along the axis is
 * copied as (key, index) pairs into the workspace, heapified, and k pairs are popped:
 * O(n + k log n). Values are copied from the input bytes, so every type is exact. */
#include <math.h>
#include <string.h>

#include "infer/ops/math/math.h"

typedef struct {
    union {
        double f;
        int64_t i;
    } key;
    int64_t idx;
} topk_pair;

typedef struct {
    int axis;
    int64_t k;
    uint64_t outer, n, inner;
} topk_layout;

static int key_is_int(ak_elem_type t) { return t == AK_ELEM_I64 || t == AK_ELEM_U64; }

static ak_status topk_layout_of(const ak__op_ctx *ctx, const ak__tensor *x, topk_layout *l) {
    if (x->rank == 0) return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "X is a scalar");
    AK_CHECK(ak__op_axis(ctx, ak__attr_int(ctx->node, "axis", -1), x->rank, 0, &l->axis));
    if (ctx->node->opset < 10) {
        l->k = ak__attr_int(ctx->node, "k", -1);
    } else {
        const ak__tensor *kt;
        int64_t kv[1];
        size_t nk;
        AK_CHECK(ak__op_require(ctx, 1, &kt));
        AK_CHECK(ak__op_read_ints(ctx, kt, "K", kv, 1, &nk));
        if (nk != 1)
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "K has no element");
        l->k = kv[0];
    }
    l->outer = l->inner = 1;
    l->n = (uint64_t)x->dims[l->axis];
    for (int d = 0; d < x->rank; d++) {
        if (d < l->axis) l->outer *= (uint64_t)x->dims[d];
        if (d > l->axis) l->inner *= (uint64_t)x->dims[d];
    }
    if (l->k < 0 || (uint64_t)l->k > l->n)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_ARG,
                          "k = %lld is outside [0, %llu] (the size of axis %d)",
                          (long long)l->k, (unsigned long long)l->n, l->axis);
    return AK_OK;
}

static ak_status topk_reshape(ak__op_ctx *ctx) {
    const ak__tensor *x;
    AK_CHECK(ak__op_require(ctx, 0, &x));
    if (!ak__elem_is_float(x->type) && !ak__elem_is_integer(x->type))
        return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED, "input type %s is not supported",
                          ak_elem_type_name(x->type));
    topk_layout l;
    AK_CHECK(topk_layout_of(ctx, x, &l));
    int64_t dims[AK_IR_MAX_RANK];
    memcpy(dims, x->dims, (size_t)x->rank * sizeof *dims);
    dims[l.axis] = l.k;
    AK_CHECK(ak__op_set_output(ctx, 0, x->type, x->rank, dims));
    AK_CHECK(ak__op_set_output(ctx, 1, AK_ELEM_I64, x->rank, dims));
    ctx->workspace_bytes = (size_t)l.n * sizeof(topk_pair);
    return AK_OK;
}

/* Does a rank before b? */
static int before(const topk_pair *a, const topk_pair *b, int is_int, int largest) {
    int gt, eq;
    if (is_int) {
        gt = a->key.i > b->key.i;
        eq = a->key.i == b->key.i;
    } else {
        int na = isnan(a->key.f), nb = isnan(b->key.f);
        gt = (na && !nb) || a->key.f > b->key.f;
        eq = a->key.f == b->key.f || (na && nb);
    }
    if (eq) return a->idx < b->idx;
    return largest ? gt : !gt;
}

static void sift_down(topk_pair *h, size_t n, size_t i, int is_int, int largest) {
    for (;;) {
        size_t best = i, l = 2 * i + 1, r = l + 1;
        if (l < n && before(&h[l], &h[best], is_int, largest)) best = l;
        if (r < n && before(&h[r], &h[best], is_int, largest)) best = r;
        if (best == i) return;
        topk_pair t = h[i];
        h[i] = h[best];
        h[best] = t;
        i = best;
    }
}

static ak_status topk_run(ak__op_ctx *ctx) {
    const ak__tensor *x = ak__op_in(ctx, 0);
    ak__tensor *vals = ak__op_out(ctx, 0), *idxs = ak__op_out(ctx, 1);
    topk_layout l;
    AK_CHECK(topk_layout_of(ctx, x, &l));
    if (l.k == 0 || l.outer * l.inner == 0) return AK_OK;
    int largest = ctx->node->opset < 11 || ak__attr_int(ctx->node, "largest", 1) != 0;
    int is_int = key_is_int(x->type);
    size_t es = ak_elem_type_size(x->type);
    topk_pair *h = ctx->workspace;
    for (uint64_t o = 0; o < l.outer; o++) {
        for (uint64_t i = 0; i < l.inner; i++) {
            uint64_t base = o * l.n * l.inner + i;
            for (uint64_t e = 0; e < l.n; e++) {
                uint64_t at = base + e * l.inner;
                if (x->type == AK_ELEM_I64) h[e].key.i = ((const int64_t *)x->data)[at];
                else if (x->type == AK_ELEM_U64) /* order-preserving map into int64 */
                    h[e].key.i = (int64_t)(((const uint64_t *)x->data)[at] ^ (UINT64_C(1) << 63));
                else h[e].key.f = ak__elem_get(x->data, x->type, at);
                h[e].idx = (int64_t)e;
            }
            for (size_t s = (size_t)l.n / 2; s-- > 0;)
                sift_down(h, (size_t)l.n, s, is_int, largest);
            size_t live = (size_t)l.n;
            uint64_t obase = o * (uint64_t)l.k * l.inner + i;
            for (int64_t r = 0; r < l.k; r++) {
                uint64_t out = obase + (uint64_t)r * l.inner;
                uint64_t src = base + (uint64_t)h[0].idx * l.inner;
                if (vals)
                    memcpy((char *)vals->data + out * es, (const char *)x->data + src * es, es);
                if (idxs) ((int64_t *)idxs->data)[out] = h[0].idx;
                h[0] = h[--live];
                sift_down(h, live, 0, is_int, largest);
            }
        }
    }
    return AK_OK;
}

const ak__op_def ak__op_topk = {"", "TopK", 1, 0, NULL, NULL, topk_reshape, topk_run};
