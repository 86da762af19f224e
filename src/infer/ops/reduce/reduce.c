/* Reductions: ReduceSum/Mean/Max/Min/Prod/L1/L2/LogSum/LogSumExp/SumSquare, ArgMax,
 * ArgMin, and the helpers reduce/reduce.h shares with math/softmax.c and
 * norm/layer_norm.c.
 *
 * Every reduction splits the input into kept and reduced axes (ak__math_split). float32
 * in the common [outer][reduced][inner] layout takes the row kernel (kernels/kf_infer.h)
 * or column chunks; int64/uint64 are
 * reduced exactly in 64-bit integers; everything else goes through double. Axes come from
 * the attribute before opset 18 (ReduceSum: 13) and from the optional second input after;
 * an empty axes list reduces everything, or nothing with noop_with_empty_axes (then each
 * element is "reduced" alone: ReduceSumSquare squares it, ReduceL1 takes |x|, ...). */
#include <float.h>
#include <math.h>
#include <string.h>

#include "infer/ops/reduce/reduce.h"
#include "kernels/dispatch.h"

/* ---- shared helpers ---------------------------------------------------------------- */

void ak__math_split_init(ak__math_split *s, int rank, const int64_t *dims,
                         const uint8_t *reduced) {
    memset(s, 0, sizeof *s);
    s->nout = 1;
    s->nred = 1;
    for (int d = 0; d < rank; d++) {
        if (reduced[d]) s->nred *= (uint64_t)dims[d];
        else s->nout *= (uint64_t)dims[d];
    }
    if (s->nout == 0 || s->nred == 0) return; /* callers stop at an empty side */
    s->nout = s->nred = 1;
    int64_t stride = 1;
    int64_t gdim[AK_IR_MAX_RANK], gstr[AK_IR_MAX_RANK];
    uint8_t gred[AK_IR_MAX_RANK];
    int ng = 0;
    for (int d = rank - 1; d >= 0; d--) { /* innermost first, size-1 axes dropped */
        int64_t n = dims[d];
        if (n == 1) continue;
        uint8_t red = reduced[d] != 0;
        if (ng > 0 && gred[ng - 1] == red) {
            gdim[ng - 1] *= n; /* adjacent axes of one kind are contiguous: merge */
        } else {
            gdim[ng] = n;
            gstr[ng] = stride;
            gred[ng] = red;
            ng++;
        }
        stride *= n;
    }
    /* groups were collected innermost first: store outermost first */
    for (int g = ng - 1; g >= 0; g--) {
        if (gred[g]) {
            s->rdim[s->nr] = gdim[g];
            s->rstr[s->nr++] = gstr[g];
            s->nred *= (uint64_t)gdim[g];
        } else {
            s->kdim[s->nk] = gdim[g];
            s->kstr[s->nk++] = gstr[g];
            s->nout *= (uint64_t)gdim[g];
        }
    }
    /* [outer][reduced][inner]: at most one reduced group, at most one kept group on
     * each side of it */
    s->outer = 1;
    s->inner = 1;
    if (s->nr == 0) {
        s->simple = s->nk <= 1;
        s->inner = s->nout;
    } else if (s->nr == 1 && s->nk <= 2) {
        s->simple = 1;
        for (int k = 0; k < s->nk; k++) {
            if (s->kstr[k] > s->rstr[0]) s->outer = (uint64_t)s->kdim[k];
            else s->inner = (uint64_t)s->kdim[k];
        }
        /* both kept groups on one side cannot happen (they would have merged) */
        if (s->outer * s->inner != s->nout) s->simple = 0;
    }
}

ak_status ak__math_axes_mask(const ak__op_ctx *ctx, const int64_t *axes, size_t n, int rank,
                             uint8_t *mask) {
    memset(mask, 0, (size_t)(rank > 0 ? rank : 1));
    for (size_t i = 0; i < n; i++) {
        int a;
        AK_CHECK(ak__op_axis(ctx, axes[i], rank, 0, &a));
        if (mask[a])
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "axis %lld is listed twice",
                              (long long)axes[i]);
        mask[a] = 1;
    }
    return AK_OK;
}

ak_status ak__math_parallel(const ak__op_ctx *ctx, size_t n, size_t item_cost,
                            ak_parallel_fn fn, void *arg) {
    if (n == 0) return AK_OK;
    if (item_cost == 0) item_cost = 1;
    if (n == 1 || !ctx->pool || n * item_cost < ((size_t)1 << 15)) {
        fn(arg, 0, n, 0);
        return AK_OK;
    }
    size_t grain = ((size_t)1 << 13) / item_cost;
    return ak_threadpool_parallel_for(ctx->pool, n, grain ? grain : 1, fn, arg);
}


/* ---- the reductions ---------------------------------------------------------------- */

typedef enum {
    RK_SUM, RK_MEAN, RK_MAX, RK_MIN, RK_PROD, RK_L1, RK_L2, RK_LOGSUM, RK_LOGSUMEXP,
    RK_SUMSQ
} rkind;

typedef struct {
    rkind kind;
    int axes_input_from; /* opset from which axes is an input instead of an attribute */
} reduce_info;

/* The input's axes as a mask over its dims. */
static ak_status reduce_mask(const ak__op_ctx *ctx, const ak__tensor *x, uint8_t *mask) {
    const reduce_info *ri = ctx->state;
    int64_t axes[AK_IR_MAX_RANK];
    size_t n = 0;
    if (ctx->node->opset >= ri->axes_input_from) {
        const ak__tensor *a = ak__op_in(ctx, 1);
        if (a) AK_CHECK(ak__op_read_ints(ctx, a, "axes", axes, AK_IR_MAX_RANK, &n));
    } else {
        const int64_t *attr;
        n = ak__attr_ints(ctx->node, "axes", &attr);
        if (n > AK_IR_MAX_RANK)
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "%zu axes for rank %d", n,
                              x->rank);
        if (n) memcpy(axes, attr, n * sizeof *axes);
    }
    if (n == 0) {
        int noop = ctx->node->opset >= ri->axes_input_from &&
                   ak__attr_int(ctx->node, "noop_with_empty_axes", 0) != 0;
        memset(mask, noop ? 0 : 1, (size_t)(x->rank > 0 ? x->rank : 1));
        return AK_OK;
    }
    return ak__math_axes_mask(ctx, axes, n, x->rank, mask);
}

static int reduce_type_ok(ak_elem_type t, rkind k) {
    if (ak__elem_is_float(t) || ak__elem_is_integer(t)) return 1;
    return t == AK_ELEM_BOOL && (k == RK_MAX || k == RK_MIN);
}

static ak_status reduce_reshape(ak__op_ctx *ctx) {
    const reduce_info *ri = ctx->state;
    const ak__tensor *x;
    AK_CHECK(ak__op_require(ctx, 0, &x));
    if (!reduce_type_ok(x->type, ri->kind))
        return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED, "input type %s is not supported",
                          ak_elem_type_name(x->type));
    uint8_t mask[AK_IR_MAX_RANK];
    AK_CHECK(reduce_mask(ctx, x, mask));
    int keep = ak__attr_int(ctx->node, "keepdims", 1) != 0;
    int64_t dims[AK_IR_MAX_RANK];
    int rank = 0;
    for (int d = 0; d < x->rank; d++) {
        if (!mask[d]) dims[rank++] = x->dims[d];
        else if (keep) dims[rank++] = 1;
    }
    return ak__op_set_output(ctx, 0, x->type, rank, dims);
}

/* Lowest / highest value of a type, as double (the empty Max / Min). */
static double type_lowest(ak_elem_type t) {
    switch (t) {
    case AK_ELEM_I8: return INT8_MIN;
    case AK_ELEM_I16: return INT16_MIN;
    case AK_ELEM_I32: return INT32_MIN;
    case AK_ELEM_I64: return (double)INT64_MIN;
    case AK_ELEM_U8: case AK_ELEM_U16: case AK_ELEM_U32: case AK_ELEM_U64:
    case AK_ELEM_BOOL: return 0;
    default: return -INFINITY;
    }
}
static double type_highest(ak_elem_type t) {
    switch (t) {
    case AK_ELEM_I8: return INT8_MAX;
    case AK_ELEM_I16: return INT16_MAX;
    case AK_ELEM_I32: return INT32_MAX;
    case AK_ELEM_U8: return UINT8_MAX;
    case AK_ELEM_U16: return UINT16_MAX;
    case AK_ELEM_U32: return UINT32_MAX;
    case AK_ELEM_BOOL: return 1;
    default: return INFINITY;
    }
}

/* One reduction job, shared by the worker functions. */
typedef struct {
    rkind kind;
    const ak__math_split *s;
    const ak__tensor *x;
    ak__tensor *y;
    const ak__kernels *k; /* the kernel table of this run */
} rjob;

/* -- generic: double accumulation through ak__elem_get, one output element at a time -- */

static double reduce_one_f64(const rjob *j, int64_t base) {
    const ak__math_split *s = j->s;
    const void *xd = j->x->data;
    ak_elem_type t = j->x->type;
    ak__math_odo odo;
    double acc, m = -INFINITY;
    if (j->kind == RK_LOGSUMEXP) { /* the maximum first, so the exps cannot overflow */
        ak__math_odo_start(&odo, s->nr, s->rdim, s->rstr);
        for (uint64_t r = 0; r < s->nred; r++, ak__math_odo_next(&odo)) {
            double v = ak__elem_get(xd, t, (uint64_t)(base + odo.off));
            if (v > m || isnan(v)) m = v;
        }
        if (isinf(m) || isnan(m)) return m; /* -inf: empty or all -inf; +inf, NaN: result */
    }
    switch (j->kind) {
    case RK_MAX: acc = type_lowest(t); break;
    case RK_MIN: acc = type_highest(t); break;
    case RK_PROD: acc = 1; break;
    default: acc = 0; break;
    }
    ak__math_odo_start(&odo, s->nr, s->rdim, s->rstr);
    for (uint64_t r = 0; r < s->nred; r++, ak__math_odo_next(&odo)) {
        double v = ak__elem_get(xd, t, (uint64_t)(base + odo.off));
        switch (j->kind) {
        case RK_MAX: if (v > acc || isnan(v)) acc = v; break;
        case RK_MIN: if (v < acc || isnan(v)) acc = v; break;
        case RK_PROD: acc *= v; break;
        case RK_L1: acc += fabs(v); break;
        case RK_L2: case RK_SUMSQ: acc += v * v; break;
        case RK_LOGSUMEXP: acc += exp(v - m); break;
        default: acc += v; break;
        }
    }
    switch (j->kind) {
    case RK_MEAN: return acc / (double)s->nred;
    case RK_L2: return sqrt(acc);
    case RK_LOGSUM: return log(acc);
    case RK_LOGSUMEXP: return m + log(acc);
    default: return acc;
    }
}

/* -- exact 64-bit integers (wrapping like the fixed-width types do) -- */

static uint64_t reduce_one_i64(const rjob *j, int64_t base) {
    const ak__math_split *s = j->s;
    int sig = j->x->type == AK_ELEM_I64;
    const uint64_t *xd = j->x->data;
    uint64_t acc;
    switch (j->kind) {
    case RK_MAX: acc = sig ? (uint64_t)INT64_MIN : 0; break;
    case RK_MIN: acc = sig ? (uint64_t)INT64_MAX : UINT64_MAX; break;
    case RK_PROD: acc = 1; break;
    default: acc = 0; break;
    }
    ak__math_odo odo;
    ak__math_odo_start(&odo, s->nr, s->rdim, s->rstr);
    for (uint64_t r = 0; r < s->nred; r++, ak__math_odo_next(&odo)) {
        uint64_t v = xd[base + odo.off];
        int gt = sig ? (int64_t)v > (int64_t)acc : v > acc;
        int lt = sig ? (int64_t)v < (int64_t)acc : v < acc;
        switch (j->kind) {
        case RK_MAX: if (gt) acc = v; break;
        case RK_MIN: if (lt) acc = v; break;
        case RK_PROD: acc *= v; break;
        case RK_L1: acc += sig && (int64_t)v < 0 ? 0 - v : v; break;
        case RK_SUMSQ: acc += v * v; break;
        default: acc += v; break; /* SUM, MEAN */
        }
    }
    if (j->kind == RK_MEAN && s->nred)
        acc = sig ? (uint64_t)((int64_t)acc / (int64_t)s->nred) : acc / s->nred;
    return acc;
}

static int exact_int_kind(rkind k) {
    return k == RK_SUM || k == RK_MEAN || k == RK_MAX || k == RK_MIN || k == RK_PROD ||
           k == RK_L1 || k == RK_SUMSQ;
}

static void reduce_generic_worker(void *arg, size_t begin, size_t end, int thread) {
    (void)thread;
    const rjob *j = arg;
    const ak__math_split *s = j->s;
    int exact = (j->x->type == AK_ELEM_I64 || j->x->type == AK_ELEM_U64) &&
                exact_int_kind(j->kind);
    ak__math_odo kodo;
    ak__math_odo_start(&kodo, s->nk, s->kdim, s->kstr);
    ak__math_odo_seek(&kodo, begin);
    for (size_t o = begin; o < end; o++, ak__math_odo_next(&kodo)) {
        if (exact) ((uint64_t *)j->y->data)[o] = reduce_one_i64(j, kodo.off);
        else ak__elem_set(j->y->data, j->y->type, o, reduce_one_f64(j, kodo.off));
    }
}

/* -- float32, [outer][reduced][inner] layout -- */

/* The row kernel's kind for a sum-like or extreme reduction (kernels/kf_infer.h). */
static int rows_kind(rkind kind) {
    switch (kind) {
    case RK_MAX: return AK_KF_ROWS_MAX;
    case RK_MIN: return AK_KF_ROWS_MIN;
    case RK_PROD: return AK_KF_ROWS_PROD;
    case RK_L1: return AK_KF_ROWS_ABS;
    case RK_L2:
    case RK_SUMSQ: return AK_KF_ROWS_SQUARES;
    default: return AK_KF_ROWS_SUM;
    }
}

/* The last step of a sum-like reduction of n values, in place. */
static void finish_f32(float *y, size_t count, rkind kind, uint64_t n) {
    float inv = 1.0f / (float)n;
    for (size_t i = 0; i < count; i++) {
        switch (kind) {
        case RK_MEAN: y[i] = n ? y[i] * inv : NAN; break;
        case RK_L2: y[i] = sqrtf(y[i]); break;
        case RK_LOGSUM: y[i] = logf(y[i]); break;
        default: break;
        }
    }
}

static void rows_f32_worker(void *arg, size_t begin, size_t end, int thread) {
    (void)thread;
    const rjob *j = arg;
    size_t n = (size_t)j->s->nred;
    const float *x = (const float *)j->x->data + begin * n;
    float *y = (float *)j->y->data + begin;
    j->k->f32_reduce_rows(x, y, end - begin, n, rows_kind(j->kind));
    finish_f32(y, end - begin, j->kind, j->s->nred);
}

/* The inner-kept layout: y[o][i] = reduce over r of x[o][r][i], in column chunks. */
#define COL_CHUNK 512

static void cols_f32_worker(void *arg, size_t begin, size_t end, int thread) {
    (void)thread;
    const rjob *j = arg;
    size_t inner = (size_t)j->s->inner, R = (size_t)j->s->nred;
    size_t chunks = (inner + COL_CHUNK - 1) / COL_CHUNK;
    for (size_t item = begin; item < end; item++) {
        size_t o = item / chunks, c0 = (item % chunks) * COL_CHUNK;
        size_t w = inner - c0 < COL_CHUNK ? inner - c0 : COL_CHUNK;
        const float *x = (const float *)j->x->data + o * R * inner + c0;
        float *y = (float *)j->y->data + o * inner + c0;
        int sq = j->kind == RK_L2 || j->kind == RK_SUMSQ;
        for (size_t i = 0; i < w; i++) {
            float v = x[i];
            y[i] = j->kind == RK_L1 ? fabsf(v) : sq ? v * v : v;
        }
        for (size_t r = 1; r < R; r++) {
            const float *xr = x + r * inner;
            switch (j->kind) {
            case RK_MAX:
                for (size_t i = 0; i < w; i++) y[i] = xr[i] > y[i] || isnan(xr[i]) ? xr[i] : y[i];
                break;
            case RK_MIN:
                for (size_t i = 0; i < w; i++) y[i] = xr[i] < y[i] || isnan(xr[i]) ? xr[i] : y[i];
                break;
            case RK_PROD: for (size_t i = 0; i < w; i++) y[i] *= xr[i]; break;
            case RK_L1: for (size_t i = 0; i < w; i++) y[i] += fabsf(xr[i]); break;
            case RK_L2: case RK_SUMSQ:
                for (size_t i = 0; i < w; i++) y[i] += xr[i] * xr[i];
                break;
            default: for (size_t i = 0; i < w; i++) y[i] += xr[i]; break;
            }
        }
        finish_f32(y, w, j->kind, R);
    }
}

/* Fills y with the value of a reduction over no elements. */
static void reduce_empty(const rjob *j) {
    double v;
    switch (j->kind) {
    case RK_MAX: v = type_lowest(j->y->type); break;
    case RK_MIN: v = type_highest(j->y->type); break;
    case RK_PROD: v = 1; break;
    case RK_MEAN: v = NAN; break;
    case RK_LOGSUM: case RK_LOGSUMEXP: v = -INFINITY; break;
    default: v = 0; break;
    }
    /* the 64-bit extremes are not doubles: stored as integers */
    ak_elem_type t = j->y->type;
    int64_t *i64 = j->y->data;
    uint64_t *u64 = j->y->data;
    for (uint64_t i = 0; i < j->y->count; i++) {
        if (t == AK_ELEM_I64 && j->kind == RK_MAX) i64[i] = INT64_MIN;
        else if (t == AK_ELEM_I64 && j->kind == RK_MIN) i64[i] = INT64_MAX;
        else if (t == AK_ELEM_U64 && j->kind == RK_MIN) u64[i] = UINT64_MAX;
        else ak__elem_set(j->y->data, t, i, v);
    }
}

static ak_status reduce_run(ak__op_ctx *ctx) {
    const reduce_info *ri = ctx->state;
    const ak__tensor *x = ak__op_in(ctx, 0);
    ak__tensor *y = ak__op_out(ctx, 0);
    if (!y || y->count == 0) return AK_OK;
    uint8_t mask[AK_IR_MAX_RANK];
    AK_CHECK(reduce_mask(ctx, x, mask));
    ak__math_split s;
    ak__math_split_init(&s, x->rank, x->dims, mask);
    rjob j = {ri->kind, &s, x, y, ak__kernels_active()};
    if (s.nred == 0) {
        reduce_empty(&j);
        return AK_OK;
    }
    if (x->type == AK_ELEM_F32 && s.simple && ri->kind != RK_LOGSUMEXP) {
        if (s.inner == 1)
            return ak__math_parallel(ctx, (size_t)s.outer, (size_t)s.nred, rows_f32_worker, &j);
        size_t chunks = ((size_t)s.inner + COL_CHUNK - 1) / COL_CHUNK;
        return ak__math_parallel(ctx, (size_t)s.outer * chunks,
                                 (size_t)s.nred * COL_CHUNK, cols_f32_worker, &j);
    }
    return ak__math_parallel(ctx, (size_t)s.nout, (size_t)s.nred * 4, reduce_generic_worker,
                             &j);
}

/* ---- the defs ---------------------------------------------------------------------- */

#define REDUCE_DEF(ident, name, k, from)                                                \
    static const reduce_info ident##_info = {k, from};                                  \
    static ak_status ident##_create(const ak__ir_node *node, const ak__tensor *const *c, \
                                    void **state) {                                     \
        (void)node;                                                                     \
        (void)c;                                                                        \
        *state = (void *)&ident##_info;                                                 \
        return AK_OK;                                                                   \
    }                                                                                   \
    const ak__op_def ak__op_##ident = {"", name, 1, 0, ident##_create, NULL,            \
                                       reduce_reshape, reduce_run}

REDUCE_DEF(reduce_sum, "ReduceSum", RK_SUM, 13);
REDUCE_DEF(reduce_mean, "ReduceMean", RK_MEAN, 18);
REDUCE_DEF(reduce_max, "ReduceMax", RK_MAX, 18);
REDUCE_DEF(reduce_min, "ReduceMin", RK_MIN, 18);
REDUCE_DEF(reduce_prod, "ReduceProd", RK_PROD, 18);
REDUCE_DEF(reduce_l1, "ReduceL1", RK_L1, 18);
REDUCE_DEF(reduce_l2, "ReduceL2", RK_L2, 18);
REDUCE_DEF(reduce_log_sum, "ReduceLogSum", RK_LOGSUM, 18);
REDUCE_DEF(reduce_log_sum_exp, "ReduceLogSumExp", RK_LOGSUMEXP, 18);
REDUCE_DEF(reduce_sum_square, "ReduceSumSquare", RK_SUMSQ, 18);

/* ---- ArgMax, ArgMin ---------------------------------------------------------------- */

typedef struct {
    int axis, keep;
    uint64_t outer, n, inner;
} arg_layout;

static ak_status arg_layout_of(const ak__op_ctx *ctx, const ak__tensor *x, arg_layout *l) {
    int r = x->rank > 0 ? x->rank : 1; /* a scalar behaves as [1] */
    AK_CHECK(ak__op_axis(ctx, ak__attr_int(ctx->node, "axis", 0), r, 0, &l->axis));
    l->keep = ak__attr_int(ctx->node, "keepdims", 1) != 0;
    l->outer = l->inner = 1;
    l->n = x->rank > 0 ? (uint64_t)x->dims[l->axis] : 1;
    for (int d = 0; d < x->rank; d++) {
        if (d < l->axis) l->outer *= (uint64_t)x->dims[d];
        if (d > l->axis) l->inner *= (uint64_t)x->dims[d];
    }
    return AK_OK;
}

static ak_status arg_reshape(ak__op_ctx *ctx) {
    const ak__tensor *x;
    AK_CHECK(ak__op_require(ctx, 0, &x));
    if (!ak__elem_is_float(x->type) && !ak__elem_is_integer(x->type) && x->type != AK_ELEM_BOOL)
        return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED, "input type %s is not supported",
                          ak_elem_type_name(x->type));
    arg_layout l;
    AK_CHECK(arg_layout_of(ctx, x, &l));
    if (l.n == 0 && l.outer * l.inner > 0)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_ARG, "axis %d has no elements", l.axis);
    int64_t dims[AK_IR_MAX_RANK];
    int rank = 0;
    for (int d = 0; d < x->rank; d++) {
        if (d != l.axis) dims[rank++] = x->dims[d];
        else if (l.keep) dims[rank++] = 1;
    }
    return ak__op_set_output(ctx, 0, AK_ELEM_I64, rank, dims);
}

/* better(v, best): does v replace the best so far? For the maximum with the first index
 * kept, v > best; with the last index, v >= best. NaN counts as the extreme (numpy). */
static ak_status arg_run(ak__op_ctx *ctx, int want_max) {
    const ak__tensor *x = ak__op_in(ctx, 0);
    ak__tensor *y = ak__op_out(ctx, 0);
    if (!y || y->count == 0) return AK_OK;
    arg_layout l;
    AK_CHECK(arg_layout_of(ctx, x, &l));
    int last = ak__attr_int(ctx->node, "select_last_index", 0) != 0;
    int64_t *out = y->data;
    for (uint64_t o = 0; o < l.outer; o++) {
        for (uint64_t i = 0; i < l.inner; i++) {
            uint64_t base = o * l.n * l.inner + i, bi = 0;
            if (x->type == AK_ELEM_I64) {
                const int64_t *xd = (const int64_t *)x->data + base;
                int64_t best = xd[0];
                for (uint64_t k = 1; k < l.n; k++) {
                    int64_t v = xd[k * l.inner];
                    int better = want_max ? (last ? v >= best : v > best)
                                          : (last ? v <= best : v < best);
                    if (better) best = v, bi = k;
                }
            } else {
                double best = ak__elem_get(x->data, x->type, base);
                for (uint64_t k = 1; k < l.n && !isnan(best); k++) {
                    double v = ak__elem_get(x->data, x->type, base + k * l.inner);
                    int better = isnan(v) || (want_max ? (last ? v >= best : v > best)
                                                       : (last ? v <= best : v < best));
                    if (better) best = v, bi = k;
                }
            }
            out[o * l.inner + i] = (int64_t)bi;
        }
    }
    return AK_OK;
}

static ak_status argmax_run(ak__op_ctx *ctx) { return arg_run(ctx, 1); }
static ak_status argmin_run(ak__op_ctx *ctx) { return arg_run(ctx, 0); }

const ak__op_def ak__op_argmax = {"", "ArgMax", 1, 0, NULL, NULL, arg_reshape, argmax_run};
const ak__op_def ak__op_argmin = {"", "ArgMin", 1, 0, NULL, NULL, arg_reshape, argmin_run};

/* The reduce operator family: the table registry.c searches. */
const ak__op_def *const ak__ops_reduce[] = {
    &ak__op_reduce_sum, &ak__op_reduce_mean, &ak__op_reduce_max, &ak__op_reduce_min,
    &ak__op_reduce_prod, &ak__op_reduce_l1, &ak__op_reduce_l2, &ak__op_reduce_log_sum,
    &ak__op_reduce_log_sum_exp, &ak__op_reduce_sum_square, &ak__op_argmax, &ak__op_argmin,
    NULL,
};
