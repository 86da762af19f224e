/* LayerNormalization and MeanVarianceNormalization.
 *
 * LayerNormalization (opset 17) normalizes X over dims [axis, rank): each of the
 * prod(dims[:axis]) rows of n = prod(dims[axis:]) elements gets its mean and
 * 1/sqrt(variance + epsilon), then Y = (X - mean) * invstd * Scale + B, Scale and B
 * broadcast to dims[axis:]. float32 runs the row kernel (ak_f32_layer_norm_rows), rows
 * split over the thread pool
 * (the transformer hot path); a Scale or B that only broadcasts is first expanded into
 * the workspace. Other float types go through double. The optional Mean and InvStdDev
 * outputs have shape dims[:axis] + [1] * (rank - axis) and the type stash_type names.
 *
 * MeanVarianceNormalization: Y = (X - mean) / (sqrt(variance) + 1e-9) over `axes`
 * (default [0, 2, 3]), in double. */
#include <math.h>
#include <string.h>

#include "infer/ops/norm/norm.h"
#include "infer/ops/reduce/reduce.h"
#include "kernels/dispatch.h"

/* ---- LayerNormalization: shapes ---------------------------------------------------- */

typedef struct {
    int axis;
    uint64_t rows, n;
    const ak__tensor *x, *scale, *bias;
    int scale_exact, bias_exact; /* count == n: index them directly */
} ln_layout;

/* Checks that t broadcasts (unidirectionally) to x's dims [axis, rank). */
static ak_status ln_check_bcast(const ak__op_ctx *ctx, const ak__tensor *t, const char *what,
                                const ln_layout *l, int *exact) {
    int ntail = l->x->rank - l->axis;
    for (int j = 0; j < t->rank; j++) {
        int64_t td = t->dims[t->rank - 1 - j];
        int64_t xd = j < ntail ? l->x->dims[l->x->rank - 1 - j] : 1;
        if (td != xd && td != 1)
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                              "%s does not broadcast to the normalized dims (dim %d is %lld, "
                              "expected %lld or 1)",
                              what, t->rank - 1 - j, (long long)td, (long long)xd);
    }
    if (t->type != l->x->type)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "%s has type %s, X has %s", what,
                          ak_elem_type_name(t->type), ak_elem_type_name(l->x->type));
    *exact = t->count == l->n;
    return AK_OK;
}

static ak_status ln_layout_of(const ak__op_ctx *ctx, ln_layout *l) {
    memset(l, 0, sizeof *l);
    AK_CHECK(ak__op_require(ctx, 0, &l->x));
    AK_CHECK(ak__op_require(ctx, 1, &l->scale));
    l->bias = ak__op_in(ctx, 2);
    if (!ak__elem_is_float(l->x->type))
        return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED, "input type %s is not supported",
                          ak_elem_type_name(l->x->type));
    if (l->x->rank == 0)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "X is a scalar");
    AK_CHECK(ak__op_axis(ctx, ak__attr_int(ctx->node, "axis", -1), l->x->rank, 0, &l->axis));
    l->rows = l->n = 1;
    for (int d = 0; d < l->x->rank; d++) {
        if (d < l->axis) l->rows *= (uint64_t)l->x->dims[d];
        else l->n *= (uint64_t)l->x->dims[d];
    }
    AK_CHECK(ln_check_bcast(ctx, l->scale, "Scale", l, &l->scale_exact));
    l->bias_exact = 1;
    if (l->bias) AK_CHECK(ln_check_bcast(ctx, l->bias, "B", l, &l->bias_exact));
    return AK_OK;
}

static ak_status ln_reshape(ak__op_ctx *ctx) {
    ln_layout l;
    AK_CHECK(ln_layout_of(ctx, &l));
    int64_t stash = ak__attr_int(ctx->node, "stash_type", 1);
    if (stash != AK_ELEM_F32 && stash != AK_ELEM_F64 && stash != AK_ELEM_F16 &&
        stash != AK_ELEM_BF16)
        return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED, "stash_type %lld is not supported",
                          (long long)stash);
    AK_CHECK(ak__op_set_output_like(ctx, 0, l.x));
    int64_t dims[AK_IR_MAX_RANK];
    for (int d = 0; d < l.x->rank; d++) dims[d] = d < l.axis ? l.x->dims[d] : 1;
    AK_CHECK(ak__op_set_output(ctx, 1, (ak_elem_type)stash, l.x->rank, dims));
    AK_CHECK(ak__op_set_output(ctx, 2, (ak_elem_type)stash, l.x->rank, dims));
    /* f32 with a Scale or B that only broadcasts: both expanded to n floats */
    if (l.x->type == AK_ELEM_F32 && (!l.scale_exact || !l.bias_exact))
        ctx->workspace_bytes = 2 * (size_t)l.n * sizeof(float);
    return AK_OK;
}

/* Index into t (broadcast to x's dims [axis, rank)) of element e of a normalized row. */
static uint64_t ln_bidx(const ln_layout *l, const ak__tensor *t, uint64_t e) {
    uint64_t idx = 0, stride = 1;
    int ntail = l->x->rank - l->axis; /* t's dims beyond these are 1 (checked) */
    for (int j = 0; j < t->rank && j < ntail; j++) {
        int64_t xd = l->x->dims[l->x->rank - 1 - j];
        int64_t td = t->dims[t->rank - 1 - j];
        uint64_t coord = e % (uint64_t)xd;
        e /= (uint64_t)xd;
        if (td != 1) idx += coord * stride;
        stride *= (uint64_t)td;
    }
    return idx;
}

/* ---- LayerNormalization: float32 --------------------------------------------------- */

typedef struct {
    const ln_layout *l;
    const float *g, *b;
    float eps;
    ak__tensor *y, *mean, *inv;
    const ak__kernels *k; /* the kernel table of this run */
} ln_job;

static void ln_f32_worker(void *arg, size_t begin, size_t end, int thread) {
    (void)thread;
    const ln_job *j = arg;
    size_t n = (size_t)j->l->n;
    const float *x = (const float *)j->l->x->data + begin * n;
    float *y = (float *)j->y->data + begin * n;
    /* Mean / InvStdDev in float32 directly; other stash types are converted after */
    float *mo = j->mean && j->mean->type == AK_ELEM_F32 ? (float *)j->mean->data + begin : NULL;
    float *io = j->inv && j->inv->type == AK_ELEM_F32 ? (float *)j->inv->data + begin : NULL;
    j->k->f32_layer_norm_rows(x, y, end - begin, n, j->g, j->b, j->eps, mo, io);
}

/* ---- LayerNormalization: any float type, in double --------------------------------- */

static void ln_generic_worker(void *arg, size_t begin, size_t end, int thread) {
    (void)thread;
    const ln_job *j = arg;
    const ln_layout *l = j->l;
    ak_elem_type t = l->x->type;
    uint64_t n = l->n;
    for (size_t row = begin; row < end; row++) {
        uint64_t base = row * n;
        double sum = 0.0, ss = 0.0;
        for (uint64_t e = 0; e < n; e++) sum += ak__elem_get(l->x->data, t, base + e);
        double mean = sum / (double)n;
        for (uint64_t e = 0; e < n; e++) {
            double d = ak__elem_get(l->x->data, t, base + e) - mean;
            ss += d * d;
        }
        double inv = 1.0 / sqrt(ss / (double)n + (double)j->eps);
        for (uint64_t e = 0; e < n; e++) {
            double v = (ak__elem_get(l->x->data, t, base + e) - mean) * inv *
                       ak__elem_get(l->scale->data, t, ln_bidx(l, l->scale, e));
            if (l->bias) v += ak__elem_get(l->bias->data, t, ln_bidx(l, l->bias, e));
            ak__elem_set(j->y->data, t, base + e, v);
        }
        if (j->mean) ak__elem_set(j->mean->data, j->mean->type, row, mean);
        if (j->inv) ak__elem_set(j->inv->data, j->inv->type, row, inv);
    }
}

static ak_status ln_run(ak__op_ctx *ctx) {
    ln_layout l;
    AK_CHECK(ln_layout_of(ctx, &l));
    ln_job j = {&l, NULL, NULL, ak__attr_float(ctx->node, "epsilon", 1e-5f), ak__op_out(ctx, 0),
                ak__op_out(ctx, 1), ak__op_out(ctx, 2), 0};
    if (!j.y || l.rows == 0) return AK_OK;
    if (l.n == 0) { /* empty rows: the mean is 0/0 */
        for (uint64_t r = 0; r < l.rows; r++) {
            if (j.mean) ak__elem_set(j.mean->data, j.mean->type, r, NAN);
            if (j.inv) ak__elem_set(j.inv->data, j.inv->type, r, 1.0 / sqrt((double)j.eps));
        }
        return AK_OK;
    }
    if (l.x->type != AK_ELEM_F32)
        return ak__math_parallel(ctx, (size_t)l.rows, (size_t)l.n * 24, ln_generic_worker, &j);

    j.g = l.scale->data;
    j.b = l.bias ? l.bias->data : NULL;
    if (!l.scale_exact || !l.bias_exact) { /* expand the broadcast ones */
        float *g = ctx->workspace, *b = g + l.n;
        for (uint64_t e = 0; e < l.n; e++) {
            g[e] = ((const float *)l.scale->data)[ln_bidx(&l, l.scale, e)];
            if (l.bias) b[e] = ((const float *)l.bias->data)[ln_bidx(&l, l.bias, e)];
        }
        j.g = g;
        j.b = l.bias ? b : NULL;
    }
    j.k = ak__kernels_active();
    AK_CHECK(ak__math_parallel(ctx, (size_t)l.rows, (size_t)l.n * 4, ln_f32_worker, &j));
    /* a stash type other than float32: recompute the statistics in double */
    if ((j.mean && j.mean->type != AK_ELEM_F32) || (j.inv && j.inv->type != AK_ELEM_F32)) {
        for (uint64_t r = 0; r < l.rows; r++) {
            const float *x = (const float *)l.x->data + r * l.n;
            double sum = 0.0, ss = 0.0;
            for (uint64_t e = 0; e < l.n; e++) sum += x[e];
            double mean = sum / (double)l.n;
            for (uint64_t e = 0; e < l.n; e++) ss += (x[e] - mean) * (x[e] - mean);
            if (j.mean) ak__elem_set(j.mean->data, j.mean->type, r, mean);
            if (j.inv)
                ak__elem_set(j.inv->data, j.inv->type, r,
                             1.0 / sqrt(ss / (double)l.n + (double)j.eps));
        }
    }
    return AK_OK;
}

const ak__op_def ak__op_layer_norm = {"", "LayerNormalization", 1, 0, NULL, NULL, ln_reshape,
                                      ln_run};

/* ---- MeanVarianceNormalization ----------------------------------------------------- */

static ak_status mvn_mask(const ak__op_ctx *ctx, const ak__tensor *x, uint8_t *mask) {
    static const int64_t dflt[3] = {0, 2, 3};
    const int64_t *axes;
    size_t n = ak__attr_ints(ctx->node, "axes", &axes);
    if (!ak__attr_has(ctx->node, "axes")) axes = dflt, n = 3;
    if (n > AK_IR_MAX_RANK)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "%zu axes for rank %d", n, x->rank);
    return ak__math_axes_mask(ctx, axes, n, x->rank, mask);
}

static ak_status mvn_reshape(ak__op_ctx *ctx) {
    const ak__tensor *x;
    AK_CHECK(ak__op_require(ctx, 0, &x));
    if (!ak__elem_is_float(x->type))
        return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED, "input type %s is not supported",
                          ak_elem_type_name(x->type));
    uint8_t mask[AK_IR_MAX_RANK];
    AK_CHECK(mvn_mask(ctx, x, mask));
    return ak__op_set_output_like(ctx, 0, x);
}

typedef struct {
    const ak__math_split *s;
    const ak__tensor *x;
    ak__tensor *y;
} mvn_job;

static void mvn_worker(void *arg, size_t begin, size_t end, int thread) {
    (void)thread;
    const mvn_job *j = arg;
    const ak__math_split *s = j->s;
    ak_elem_type t = j->x->type;
    ak__math_odo ko, ro;
    ak__math_odo_start(&ko, s->nk, s->kdim, s->kstr);
    ak__math_odo_seek(&ko, begin);
    for (size_t o = begin; o < end; o++, ak__math_odo_next(&ko)) {
        double sum = 0.0, ss = 0.0;
        ak__math_odo_start(&ro, s->nr, s->rdim, s->rstr);
        for (uint64_t r = 0; r < s->nred; r++, ak__math_odo_next(&ro))
            sum += ak__elem_get(j->x->data, t, (uint64_t)(ko.off + ro.off));
        double mean = sum / (double)s->nred;
        for (uint64_t r = 0; r < s->nred; r++, ak__math_odo_next(&ro)) {
            double d = ak__elem_get(j->x->data, t, (uint64_t)(ko.off + ro.off)) - mean;
            ss += d * d;
        }
        double den = sqrt(ss / (double)s->nred) + 1e-9;
        for (uint64_t r = 0; r < s->nred; r++, ak__math_odo_next(&ro)) {
            uint64_t at = (uint64_t)(ko.off + ro.off);
            ak__elem_set(j->y->data, t, at, (ak__elem_get(j->x->data, t, at) - mean) / den);
        }
    }
}

static ak_status mvn_run(ak__op_ctx *ctx) {
    const ak__tensor *x = ak__op_in(ctx, 0);
    ak__tensor *y = ak__op_out(ctx, 0);
    if (!y || y->count == 0) return AK_OK;
    uint8_t mask[AK_IR_MAX_RANK];
    AK_CHECK(mvn_mask(ctx, x, mask));
    ak__math_split s;
    ak__math_split_init(&s, x->rank, x->dims, mask);
    mvn_job j = {&s, x, y};
    return ak__math_parallel(ctx, (size_t)s.nout, (size_t)s.nred * 30, mvn_worker, &j);
}

const ak__op_def ak__op_mvn = {"", "MeanVarianceNormalization", 1, 0, NULL, NULL, mvn_reshape,
                               mvn_run};
