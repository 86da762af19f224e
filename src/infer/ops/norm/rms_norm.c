/* The onnxruntime contrib normalizations the graph optimizer fuses into (and exporters
 * emit), float32 over the last axis:
 *
 *   SimplifiedLayerNormalization(X, scale)       RMSNorm: Y = X / sqrt(mean(X²) + eps) * scale
 *     (com.microsoft and the default domain, where onnxruntime registers it); axis,
 *     epsilon; optional output 1: inv_std_var, shape dims[:axis] + [1]*(rank-axis).
 *   SkipLayerNormalization(X, skip, gamma, [beta], [bias])           com.microsoft
 *     s = X + skip [+ bias]; Y = LayerNorm(s) * gamma [+ beta] over the last axis;
 *     optional outputs 1 mean, 2 inv_std_var (dims[:-1] + [1]), 3 the sum s.
 *   SkipSimplifiedLayerNormalization(X, skip, gamma, [bias])          com.microsoft
 *     the same with RMSNorm; output 1 (a mean RMSNorm never computes) is refused.
 *
 * input and skip broadcast together (numpy rules; onnxruntime wants skip of the input's
 * shape or its trailing dims, the optimizer fuses any residual Add); scale/gamma/beta/bias
 * have the normalized row's n elements (or 1 for scale/gamma: the optimizer's stand-in for
 * an absent one).
 *
 * Each RMS row has a scalar reference (ak__rms_row_ref: double sums, the kernel set "ref"
 * runs it, AK_KERNELS=ref) and a vectorized path (ak__rms_row_fast: eight float partial sums
 * the compiler keeps in one SIMD register, then a scaled product loop); the LayerNorm
 * rows run the kernel table's f32_layer_norm_rows. tests/infer/test_norm_kernels.c checks
 * the fast rows against the reference. */
#include <math.h>
#include <string.h>

#include "infer/ops/norm/norm.h"
#include "infer/ops/reduce/reduce.h"
#include "kernels/dispatch.h"

/* ---- rows ------------------------------------------------------------------------------ */

/* y = x / sqrt(mean(x²) + eps) * g (g[0] for all when g_all); returns 1/sqrt(...). */
float ak__rms_row_ref(const float *x, float *y, size_t n, const float *g, int g_all, float eps) {
    double ss = 0.0;
    for (size_t i = 0; i < n; i++) ss += (double)x[i] * x[i];
    double inv = 1.0 / sqrt(ss / (double)n + (double)eps);
    for (size_t i = 0; i < n; i++) y[i] = (float)(x[i] * inv * g[g_all ? 0 : i]);
    return (float)inv;
}

float ak__rms_row_fast(const float *x, float *y, size_t n, const float *g, int g_all,
                       float eps) {
    float acc[8] = {0};
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++) acc[l] += x[i + l] * x[i + l];
    float ss = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for (; i < n; i++) ss += x[i] * x[i];
    float inv = 1.0f / sqrtf(ss / (float)n + eps);
    if (g_all) {
        float s = inv * g[0];
        for (i = 0; i < n; i++) y[i] = x[i] * s;
    } else {
        for (i = 0; i < n; i++) y[i] = x[i] * inv * g[i];
    }
    return inv;
}

static int reference_kernels(void) {
    return strcmp(ak__kernels_active()->name, "ref") == 0;
}

/* ---- layout ------------------------------------------------------------------------------ */

typedef struct {
    const ak__tensor *x, *skip, *gamma, *beta, *bias;
    uint64_t rows, n;
    int axis, simplified, has_skip;
    int rank; /* with a skip: the broadcast shape of input and skip, the rows' shape */
    int64_t dims[AK_IR_MAX_RANK];
} norm_layout;

/* A per-row vector (gamma, beta, bias): n float32 elements, or 1 when `one_ok`. */
static ak_status check_row_vector(const ak__op_ctx *ctx, const ak__tensor *t, const char *what,
                                  uint64_t n, int one_ok) {
    if (!t) return AK_OK;
    AK_CHECK(ak__op_check_type(ctx, 0, t, AK_ELEM_F32));
    if (t->count != n && !(one_ok && t->count == 1))
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                          "%s has %llu elements, the normalized rows %llu", what,
                          (unsigned long long)t->count, (unsigned long long)n);
    return AK_OK;
}

static ak_status layout_of(const ak__op_ctx *ctx, int has_skip, int simplified, norm_layout *l) {
    memset(l, 0, sizeof *l);
    l->simplified = simplified, l->has_skip = has_skip;
    AK_CHECK(ak__op_require(ctx, 0, &l->x));
    if (l->x->type != AK_ELEM_F32)
        return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED, "input type %s is not supported "
                          "(float32 only)", ak_elem_type_name(l->x->type));
    if (l->x->rank == 0) return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "X is a scalar");
    uint32_t g = has_skip ? 2 : 1;
    if (has_skip) AK_CHECK(ak__op_require(ctx, 1, &l->skip));
    AK_CHECK(ak__op_require(ctx, g, &l->gamma));
    if (has_skip) {
        l->beta = simplified ? NULL : ak__op_in(ctx, 3);
        l->bias = ak__op_in(ctx, simplified ? 3 : 4);
    }
    int64_t axis = has_skip ? -1 : ak__attr_int(ctx->node, "axis", -1);
    AK_CHECK(ak__op_axis(ctx, axis, l->x->rank, 0, &l->axis));
    l->rows = l->n = 1;
    for (int d = 0; d < l->x->rank; d++)
        *(d < l->axis ? &l->rows : &l->n) *= (uint64_t)l->x->dims[d];
    AK_CHECK(check_row_vector(ctx, l->gamma, "gamma (scale)", l->n, 1));
    AK_CHECK(check_row_vector(ctx, l->beta, "beta", l->n, 0));
    AK_CHECK(check_row_vector(ctx, l->bias, "bias", l->n, 0));
    if (l->skip) { /* input and skip broadcast together (numpy rules) to the rows' shape */
        AK_CHECK(ak__op_check_type(ctx, 1, l->skip, AK_ELEM_F32));
        int rank = l->x->rank > l->skip->rank ? l->x->rank : l->skip->rank;
        l->rank = rank;
        for (int j = 0; j < rank; j++) {
            int64_t a = j < l->x->rank ? l->x->dims[l->x->rank - 1 - j] : 1;
            int64_t b = j < l->skip->rank ? l->skip->dims[l->skip->rank - 1 - j] : 1;
            if (a != b && a != 1 && b != 1)
                return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                                  "input and skip do not broadcast (dim -%d: %lld vs %lld)", j + 1,
                                  (long long)a, (long long)b);
            l->dims[rank - 1 - j] = a == 1 ? b : a;
        }
        l->rows = 1, l->n = (uint64_t)l->dims[rank - 1];
        for (int d = 0; d < rank - 1; d++) l->rows *= (uint64_t)l->dims[d];
        AK_CHECK(check_row_vector(ctx, l->gamma, "gamma", l->n, 1));
        AK_CHECK(check_row_vector(ctx, l->beta, "beta", l->n, 0));
        AK_CHECK(check_row_vector(ctx, l->bias, "bias", l->n, 0));
    }
    return AK_OK;
}

static ak_status norm_reshape(ak__op_ctx *ctx, int has_skip, int simplified) {
    norm_layout l;
    AK_CHECK(layout_of(ctx, has_skip, simplified, &l));
    if (has_skip && simplified && ak__op_out(ctx, 1))
        return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED,
                          "output 1 (mean) is not computed by the simplified (RMS) form");
    int64_t dims[AK_IR_MAX_RANK];
    if (has_skip) {
        memcpy(dims, l.dims, (size_t)l.rank * sizeof *dims);
        AK_CHECK(ak__op_set_output(ctx, 0, AK_ELEM_F32, l.rank, dims));
        AK_CHECK(ak__op_set_output(ctx, 3, AK_ELEM_F32, l.rank, dims));
        dims[l.rank - 1] = 1;
        AK_CHECK(ak__op_set_output(ctx, 1, AK_ELEM_F32, l.rank, dims));
        AK_CHECK(ak__op_set_output(ctx, 2, AK_ELEM_F32, l.rank, dims));
        /* the sum goes to output 3 when asked for, else to the workspace; gamma of 1 */
        ctx->workspace_bytes = (l.rows * l.n + l.n) * sizeof(float);
    } else {
        AK_CHECK(ak__op_set_output_like(ctx, 0, l.x));
        for (int d = 0; d < l.x->rank; d++) dims[d] = d < l.axis ? l.x->dims[d] : 1;
        AK_CHECK(ak__op_set_output(ctx, 1, AK_ELEM_F32, l.x->rank, dims));
    }
    return AK_OK;
}

/* ---- run ----------------------------------------------------------------------------------- */

typedef struct {
    const norm_layout *l;
    const float *x, *g, *b; /* x: the rows normalized (X, or the skip sum) */
    int g_all, ref;
    float eps;
    float *y, *mean, *inv;
    const ak__kernels *k;
    float *row_sums; /* X and skip of one shape: each task sums its rows here first */
} norm_job;

/* sum rows [begin, end) = X + skip [+ bias], X and skip of the rows' shape: by the vector
 * add kernel, in the task that normalizes them (so on every thread, and each sum row is
 * still in L1 when its statistics read it). */
static void skip_sum_rows(const norm_job *j, size_t begin, size_t end) {
    const norm_layout *l = j->l;
    size_t n = (size_t)l->n;
    const float *x = (const float *)l->x->data + begin * n, *sk = (const float *)l->skip->data + begin * n;
    float *o = j->row_sums + begin * n;
    j->k->f32_ew_binary(AK_EW_F32_ADD, o, x, sk, (end - begin) * n, 1, 1);
    if (l->bias)
        for (size_t r = begin; r < end; r++, o += n)
            j->k->f32_ew_binary(AK_EW_F32_ADD, o, o, l->bias->data, n, 1, 1);
}

static void norm_worker(void *arg, size_t begin, size_t end, int thread) {
    (void)thread;
    const norm_job *j = arg;
    size_t n = (size_t)j->l->n;
    if (j->row_sums) skip_sum_rows(j, begin, end);
    if (!j->l->simplified) {
        j->k->f32_layer_norm_rows(j->x + begin * n, j->y + begin * n, end - begin, n, j->g, j->b,
                                  j->eps, j->mean ? j->mean + begin : NULL,
                                  j->inv ? j->inv + begin : NULL);
        return;
    }
    for (size_t r = begin; r < end; r++) {
        const float *x = j->x + r * n;
        float *y = j->y + r * n;
        float inv = j->ref ? ak__rms_row_ref(x, y, n, j->g, j->g_all, j->eps)
                           : ak__rms_row_fast(x, y, n, j->g, j->g_all, j->eps);
        if (j->inv) j->inv[r] = inv;
    }
}

/* Offset into t (broadcast to the rows' shape) of the element at flat index i. */
static uint64_t bcast_offset(const norm_layout *l, const ak__tensor *t, uint64_t i) {
    uint64_t off = 0, stride = 1;
    for (int j = 0; j < l->rank; j++) {
        uint64_t d = (uint64_t)l->dims[l->rank - 1 - j], c = i % d;
        i /= d;
        if (j < t->rank) {
            uint64_t td = (uint64_t)t->dims[t->rank - 1 - j];
            if (td != 1) off += c * stride;
            stride *= td;
        }
    }
    return off;
}

/* 1 when X and skip both have the rows' shape (the transformer's residual): the tasks
 * sum their own rows (skip_sum_rows). */
static int skip_same_shape(const norm_layout *l) {
    uint64_t total = l->rows * l->n;
    return l->x->count == total && l->skip->count == total;
}

/* s = x + skip [+ bias] into sum, for skips that broadcast: trailing-dims skips directly,
 * any other through bcast_offset. */
static void skip_sum(const norm_layout *l, float *sum) {
    const float *x = l->x->data, *sk = l->skip->data, *bias = l->bias ? l->bias->data : NULL;
    uint64_t total = l->rows * l->n, period = l->skip->count;
    int direct = l->x->count == total;
    for (int j = 0; direct && j < l->skip->rank; j++)
        direct = l->skip->dims[l->skip->rank - 1 - j] == l->dims[l->rank - 1 - j];
    for (uint64_t i = 0; i < total; i++) {
        float a = direct ? x[i] : x[bcast_offset(l, l->x, i)];
        float b = direct ? sk[i % period] : sk[bcast_offset(l, l->skip, i)];
        sum[i] = a + b + (bias ? bias[i % l->n] : 0.0f);
    }
}

static ak_status norm_run(ak__op_ctx *ctx, int has_skip, int simplified) {
    norm_layout l;
    AK_CHECK(layout_of(ctx, has_skip, simplified, &l));
    norm_job j = {&l, l.x->data, l.gamma->data, l.beta ? l.beta->data : NULL,
                  l.gamma->count == 1 && l.n != 1, reference_kernels(),
                  ak__attr_float(ctx->node, "epsilon", 1e-5f), NULL, NULL, NULL,
                  ak__kernels_active(), NULL};
    ak__tensor *y = ak__op_out(ctx, 0);
    if (!y || l.rows == 0 || l.n == 0) return AK_OK;
    j.y = y->data;
    ak__tensor *mean = has_skip ? ak__op_out(ctx, 1) : NULL;
    ak__tensor *inv = ak__op_out(ctx, has_skip ? 2 : 1);
    j.mean = mean ? mean->data : NULL;
    j.inv = inv ? inv->data : NULL;
    if (has_skip) {
        ak__tensor *s = ak__op_out(ctx, 3);
        float *sum = s ? (float *)s->data : (float *)ctx->workspace;
        if (skip_same_shape(&l))
            j.row_sums = sum;
        else
            skip_sum(&l, sum);
        j.x = sum;
        if (j.g_all && !simplified) { /* the row kernel reads n gammas */
            float *g = (float *)ctx->workspace + l.rows * l.n;
            for (uint64_t e = 0; e < l.n; e++) g[e] = j.g[0];
            j.g = g, j.g_all = 0;
        }
    } else if (j.g_all && !simplified) {
        return AK_OP_FAIL(ctx->node, AK_ERR_INTERNAL, "a one-element scale");
    }
    return ak__math_parallel(ctx, (size_t)l.rows, (size_t)l.n * 4, norm_worker, &j);
}

static ak_status rms_reshape(ak__op_ctx *ctx) { return norm_reshape(ctx, 0, 1); }
static ak_status rms_run(ak__op_ctx *ctx) { return norm_run(ctx, 0, 1); }
static ak_status skip_ln_reshape(ak__op_ctx *ctx) { return norm_reshape(ctx, 1, 0); }
static ak_status skip_ln_run(ak__op_ctx *ctx) { return norm_run(ctx, 1, 0); }
static ak_status skip_rms_reshape(ak__op_ctx *ctx) { return norm_reshape(ctx, 1, 1); }
static ak_status skip_rms_run(ak__op_ctx *ctx) { return norm_run(ctx, 1, 1); }

const ak__op_def ak__norm_rms_contrib = {"com.microsoft", "SimplifiedLayerNormalization", 1, 0,
                                         NULL, NULL, rms_reshape, rms_run};
const ak__op_def ak__norm_rms_onnx_domain = {"", "SimplifiedLayerNormalization", 1, 0, NULL, NULL,
                                             rms_reshape, rms_run};
const ak__op_def ak__norm_skip_ln_contrib = {"com.microsoft", "SkipLayerNormalization", 1, 0,
                                             NULL, NULL, skip_ln_reshape, skip_ln_run};
const ak__op_def ak__norm_skip_rms_contrib = {"com.microsoft", "SkipSimplifiedLayerNormalization",
                                              1, 0, NULL, NULL, skip_rms_reshape, skip_rms_run};
