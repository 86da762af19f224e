/* Normalizations over NCHW tensors: BatchNormalization (inference form, and the training
 * form that normalizes with batch statistics and updates the running ones),
 * InstanceNormalization and LRN.
 *
 * float32 runs on direct loops over planes (one image, one channel) in parallel; other
 * float types read and write through double. Statistics accumulate in double. */
#include <math.h>
#include <string.h>

#include "infer/ops/nn/common.h"
#include "infer/ops/norm/norm.h"

typedef struct norm_shape {
    uint64_t N, C, S; /* batch, channels, spatial size (product of dims 2..) */
} norm_shape;

static ak_status norm_input(ak__op_ctx *ctx, const ak__tensor **X, norm_shape *sh) {
    AK_CHECK(ak__op_require(ctx, 0, X));
    if ((*X)->rank < 2)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "X has rank %d (at least 2)",
                          (*X)->rank);
    if (!ak__elem_is_float((*X)->type))
        return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED, "input X has type %s",
                          ak_elem_type_name((*X)->type));
    sh->N = (uint64_t)(*X)->dims[0];
    sh->C = (uint64_t)(*X)->dims[1];
    sh->S = ak__nn_prod((*X)->dims + 2, (*X)->rank - 2);
    return AK_OK;
}

/* Input i must be a float vector of C values. */
static ak_status channel_vector(ak__op_ctx *ctx, uint32_t i, uint64_t C,
                                const ak__tensor **out) {
    AK_CHECK(ak__op_require(ctx, i, out));
    if ((*out)->count != C || (*out)->rank > 1 || !ak__elem_is_float((*out)->type))
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                          "input %u must be a float vector of %llu values", i,
                          (unsigned long long)C);
    return AK_OK;
}

static double vec_get(const ak__tensor *t, uint64_t i) {
    return t->type == AK_ELEM_F32 ? ((const float *)t->data)[i]
                                  : ak__elem_get(t->data, t->type, i);
}

/* y = x*a[c] + b[c] over planes i = n*C + c. */
typedef struct affine_job {
    const ak__tensor *X;
    ak__tensor *Y;
    const float *a, *b;
    norm_shape sh;
} affine_job;

static void affine_task(void *vj, size_t begin, size_t end, int tid) {
    (void)tid;
    const affine_job *j = vj;
    for (size_t i = begin; i < end; i++) {
        uint64_t c = i % j->sh.C, base = i * j->sh.S;
        float a = j->a[c], b = j->b[c];
        if (j->X->type == AK_ELEM_F32) {
            const float *x = (const float *)j->X->data + base;
            float *y = (float *)j->Y->data + base;
            for (uint64_t s = 0; s < j->sh.S; s++) y[s] = x[s] * a + b;
        } else {
            for (uint64_t s = 0; s < j->sh.S; s++)
                ak__elem_set(j->Y->data, j->Y->type, base + s,
                             ak__elem_get(j->X->data, j->X->type, base + s) * a + b);
        }
    }
}

/* ---- BatchNormalization ------------------------------------------------------------- */

/* Training form: batch statistics (opset 14+: training_mode = 1; before: when the extra
 * outputs are requested). */
static int bn_training(const ak__op_ctx *ctx) {
    if (ctx->node->opset >= 14) return ak__attr_int(ctx->node, "training_mode", 0) != 0;
    for (uint32_t i = 1; i < ctx->num_outputs; i++)
        if (ctx->outputs[i]) return 1;
    return 0;
}

static ak_status bn_reshape(ak__op_ctx *ctx) {
    const ak__tensor *X, *v;
    norm_shape sh;
    AK_CHECK(norm_input(ctx, &X, &sh));
    if (ak__attr_int(ctx->node, "spatial", 1) == 0)
        return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED, "spatial = 0 is not supported");
    for (uint32_t i = 1; i < 5; i++) AK_CHECK(channel_vector(ctx, i, sh.C, &v));
    AK_CHECK(ak__op_set_output_like(ctx, 0, X));
    for (uint32_t i = 1; i < 5 && i < ctx->num_outputs; i++)
        AK_CHECK(ak__op_set_output(ctx, i, ctx->inputs[3]->type, 1, X->dims + 1));
    ctx->workspace_bytes = 2 * sh.C * sizeof(float) + 2 * sh.C * sizeof(double);
    return AK_OK;
}

/* Batch mean and (biased) variance of channel c. */
static void bn_batch_stats(const ak__tensor *X, const norm_shape *sh, uint64_t c, double *mean,
                           double *var) {
    double sum = 0.0, sq = 0.0, cnt = (double)(sh->N * sh->S);
    for (uint64_t n = 0; n < sh->N; n++)
        for (uint64_t s = 0; s < sh->S; s++)
            sum += ak__elem_get(X->data, X->type, (n * sh->C + c) * sh->S + s);
    *mean = cnt > 0 ? sum / cnt : 0.0;
    for (uint64_t n = 0; n < sh->N; n++)
        for (uint64_t s = 0; s < sh->S; s++) {
            double d = ak__elem_get(X->data, X->type, (n * sh->C + c) * sh->S + s) - *mean;
            sq += d * d;
        }
    *var = cnt > 0 ? sq / cnt : 0.0;
}

static ak_status bn_run(ak__op_ctx *ctx) {
    const ak__tensor *X = ctx->inputs[0];
    norm_shape sh;
    AK_CHECK(norm_input(ctx, &X, &sh));
    const ak__tensor *scale = ctx->inputs[1], *bias = ctx->inputs[2];
    const ak__tensor *mean = ctx->inputs[3], *var = ctx->inputs[4];
    double eps = ak__attr_float(ctx->node, "epsilon", 1e-5f);
    double momentum = ak__attr_float(ctx->node, "momentum", 0.9f);
    int training = bn_training(ctx);
    double *bm = ctx->workspace, *bv = bm + sh.C;
    float *a = (float *)(void *)(bv + sh.C), *b = a + sh.C;
    for (uint64_t c = 0; c < sh.C; c++) {
        double m = vec_get(mean, c), v = vec_get(var, c);
        if (training) bn_batch_stats(X, &sh, c, &bm[c], &bv[c]);
        double mu = training ? bm[c] : m, s2 = training ? bv[c] : v;
        double k = vec_get(scale, c) / sqrt(s2 + eps);
        a[c] = (float)k;
        b[c] = (float)(vec_get(bias, c) - mu * k);
    }
    if (training) { /* outputs 1, 2: running mean and variance (then saved ones) */
        for (uint32_t i = 1; i < 5 && i < ctx->num_outputs; i++) {
            ak__tensor *o = ctx->outputs[i];
            if (!o) continue;
            for (uint64_t c = 0; c < sh.C; c++) {
                double val = i == 1   ? vec_get(mean, c) * momentum + bm[c] * (1 - momentum)
                             : i == 2 ? vec_get(var, c) * momentum + bv[c] * (1 - momentum)
                             : i == 3 ? bm[c]
                                      : bv[c];
                ak__elem_set(o->data, o->type, c, val);
            }
        }
    }
    affine_job job = {X, ctx->outputs[0], a, b, sh};
    if (!job.Y) return AK_OK;
    return ak_threadpool_parallel_for(ctx->pool, (size_t)(sh.N * sh.C), 1, affine_task, &job);
}

/* ---- InstanceNormalization ---------------------------------------------------------- */

typedef struct inorm_job {
    const ak__tensor *X, *scale, *bias;
    ak__tensor *Y;
    norm_shape sh;
    double eps;
} inorm_job;

static void inorm_task(void *vj, size_t begin, size_t end, int tid) {
    (void)tid;
    const inorm_job *j = vj;
    for (size_t i = begin; i < end; i++) {
        uint64_t c = i % j->sh.C, base = i * j->sh.S;
        double sum = 0.0, sq = 0.0;
        for (uint64_t s = 0; s < j->sh.S; s++) sum += vec_get(j->X, base + s);
        double mean = j->sh.S ? sum / (double)j->sh.S : 0.0;
        for (uint64_t s = 0; s < j->sh.S; s++) {
            double d = vec_get(j->X, base + s) - mean;
            sq += d * d;
        }
        double var = j->sh.S ? sq / (double)j->sh.S : 0.0;
        double k = vec_get(j->scale, c) / sqrt(var + j->eps);
        float a = (float)k, b = (float)(vec_get(j->bias, c) - mean * k);
        if (j->X->type == AK_ELEM_F32) {
            const float *x = (const float *)j->X->data + base;
            float *y = (float *)j->Y->data + base;
            for (uint64_t s = 0; s < j->sh.S; s++) y[s] = x[s] * a + b;
        } else {
            for (uint64_t s = 0; s < j->sh.S; s++)
                ak__elem_set(j->Y->data, j->Y->type, base + s,
                             vec_get(j->X, base + s) * a + b);
        }
    }
}

static ak_status inorm_reshape(ak__op_ctx *ctx) {
    const ak__tensor *X, *v;
    norm_shape sh;
    AK_CHECK(norm_input(ctx, &X, &sh));
    AK_CHECK(channel_vector(ctx, 1, sh.C, &v));
    AK_CHECK(channel_vector(ctx, 2, sh.C, &v));
    return ak__op_set_output_like(ctx, 0, X);
}

static ak_status inorm_run(ak__op_ctx *ctx) {
    inorm_job j;
    AK_CHECK(norm_input(ctx, &j.X, &j.sh));
    j.scale = ctx->inputs[1];
    j.bias = ctx->inputs[2];
    j.Y = ctx->outputs[0];
    j.eps = ak__attr_float(ctx->node, "epsilon", 1e-5f);
    if (!j.Y) return AK_OK;
    return ak_threadpool_parallel_for(ctx->pool, (size_t)(j.sh.N * j.sh.C), 1, inorm_task, &j);
}

/* ---- LRN ----------------------------------------------------------------------------- */

typedef struct lrn_job {
    const ak__tensor *X;
    ak__tensor *Y;
    norm_shape sh;
    int64_t before, after; /* channels summed below and above c */
    double alpha_n, beta, bias;
} lrn_job;

static void lrn_task(void *vj, size_t begin, size_t end, int tid) {
    (void)tid;
    const lrn_job *j = vj;
    for (size_t i = begin; i < end; i++) { /* plane i = n*C + c */
        int64_t c = (int64_t)(i % j->sh.C), C = (int64_t)j->sh.C;
        uint64_t n = i / j->sh.C;
        int64_t c0 = c - j->before < 0 ? 0 : c - j->before;
        int64_t c1 = c + j->after >= C ? C - 1 : c + j->after;
        for (uint64_t s = 0; s < j->sh.S; s++) {
            double sq = 0.0;
            for (int64_t cc = c0; cc <= c1; cc++) {
                double v = vec_get(j->X, (n * j->sh.C + (uint64_t)cc) * j->sh.S + s);
                sq += v * v;
            }
            uint64_t at = i * j->sh.S + s;
            double y = vec_get(j->X, at) / pow(j->bias + j->alpha_n * sq, j->beta);
            if (j->Y->type == AK_ELEM_F32)
                ((float *)j->Y->data)[at] = (float)y;
            else
                ak__elem_set(j->Y->data, j->Y->type, at, y);
        }
    }
}

static ak_status lrn_reshape(ak__op_ctx *ctx) {
    const ak__tensor *X;
    norm_shape sh;
    AK_CHECK(norm_input(ctx, &X, &sh));
    int64_t size = ak__attr_int(ctx->node, "size", 0);
    if (size < 1 || size > ((int64_t)1 << 31))
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "size = %lld (positive required)",
                          (long long)size);
    return ak__op_set_output_like(ctx, 0, X);
}

static ak_status lrn_run(ak__op_ctx *ctx) {
    lrn_job j;
    AK_CHECK(norm_input(ctx, &j.X, &j.sh));
    int64_t size = ak__attr_int(ctx->node, "size", 1);
    j.before = (size - 1) / 2;
    j.after = size - 1 - j.before;
    j.alpha_n = ak__attr_float(ctx->node, "alpha", 1e-4f) / (double)size;
    j.beta = ak__attr_float(ctx->node, "beta", 0.75f);
    j.bias = ak__attr_float(ctx->node, "bias", 1.0f);
    j.Y = ctx->outputs[0];
    if (!j.Y) return AK_OK;
    return ak_threadpool_parallel_for(ctx->pool, (size_t)(j.sh.N * j.sh.C), 1, lrn_task, &j);
}

const ak__op_def ak__nn_batchnorm = {"", "BatchNormalization", 1, 0, NULL, NULL, bn_reshape,
                                     bn_run};
const ak__op_def ak__nn_instancenorm = {"", "InstanceNormalization", 1, 0, NULL, NULL,
                                        inorm_reshape, inorm_run};
const ak__op_def ak__nn_lrn = {"", "LRN", 1, 0, NULL, NULL, lrn_reshape, lrn_run};
