/* Operators the graph optimizer (runtime/optimize.c) creates, in the com.accelkit domain:
 *   FusedConv(X, W, [B], [Z])   Conv, then + Z (a residual, broadcast to Y's shape), then
 *                               an activation, applied while the output is still in cache
 *   MatMulBias(A, B, bias)      A[..., M, K] x B[K, N] + bias[N] as one SGEMM (C starts as
 *                               the bias rows, beta = 1), then an activation
 * Activation attributes: activation = "" | Relu | Clip | LeakyRelu | Sigmoid | Tanh | Gelu,
 * with activation_alpha / activation_beta (Clip: min, max; LeakyRelu: alpha). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "infer/backend/native/nn_internal.h"

typedef enum act_kind { ACT_NONE, ACT_RELU, ACT_CLIP, ACT_LEAKY, ACT_SIGMOID, ACT_TANH, ACT_GELU } act_kind;

typedef struct activation {
    act_kind kind;
    float alpha, beta;
} activation;

static ak_status parse_activation(const ak__ir_node *n, activation *a) {
    static const char *const names[] = {"", "Relu", "Clip", "LeakyRelu", "Sigmoid", "Tanh", "Gelu"};
    const char *s = ak__attr_string(n, "activation", "");
    a->alpha = ak__attr_float(n, "activation_alpha", 0.0f);
    a->beta = ak__attr_float(n, "activation_beta", 0.0f);
    for (int k = 0; k < (int)(sizeof names / sizeof *names); k++)
        if (strcmp(s, names[k]) == 0) {
            a->kind = (act_kind)k;
            return AK_OK;
        }
    return AK_OP_FAIL(n, AK_ERR_INVALID_MODEL, "unknown fused activation '%s'", s);
}

/* y = act(y + z[broadcast]) over [begin, end) of y; z_count divides y_count (z repeats).
 * One loop per activation so each vectorizes. */
static void epilogue(const activation *a, float *y, const float *z, uint64_t z_count,
                     size_t begin, size_t end) {
    if (z && z_count == 1)
        for (size_t i = begin; i < end; i++) y[i] += z[0];
    else if (z && z_count >= end) /* same shape as y: the residual case */
        for (size_t i = begin; i < end; i++) y[i] += z[i];
    else if (z)
        for (size_t i = begin; i < end; i++) y[i] += z[i % z_count];
    float lo = a->alpha, hi = a->beta;
    switch (a->kind) {
    case ACT_NONE: break;
    case ACT_RELU:
        for (size_t i = begin; i < end; i++) y[i] = y[i] > 0 ? y[i] : 0;
        break;
    case ACT_CLIP:
        for (size_t i = begin; i < end; i++) y[i] = y[i] < lo ? lo : y[i] > hi ? hi : y[i];
        break;
    case ACT_LEAKY:
        for (size_t i = begin; i < end; i++) y[i] = y[i] >= 0 ? y[i] : lo * y[i];
        break;
    case ACT_SIGMOID:
        for (size_t i = begin; i < end; i++) y[i] = 1.0f / (1.0f + expf(-y[i]));
        break;
    case ACT_TANH:
        for (size_t i = begin; i < end; i++) y[i] = tanhf(y[i]);
        break;
    case ACT_GELU:
        for (size_t i = begin; i < end; i++)
            y[i] = 0.5f * y[i] * (1.0f + erff(y[i] * 0.70710678118654752f));
        break;
    }
}

typedef struct epilogue_job {
    const activation *act;
    float *y;
    const float *z;
    uint64_t z_count;
} epilogue_job;

static void epilogue_chunk(void *p, size_t begin, size_t end, int thread) {
    (void)thread;
    const epilogue_job *j = p;
    epilogue(j->act, j->y, j->z, j->z_count, begin, end);
}

static ak_status run_epilogue(const ak__op_ctx *ctx, const activation *a, ak__tensor *y,
                              const ak__tensor *z) {
    if (a->kind == ACT_NONE && !z) return AK_OK;
    epilogue_job j = {a, y->data, z ? z->data : NULL, z ? z->count : 0};
    return ak_threadpool_parallel_for(ctx->pool, (size_t)y->count, 16384, epilogue_chunk, &j);
}

/* z broadcasts to y when it is y's trailing shape (or a scalar): what residual adds and
 * biases look like; anything else was not fused. */
static ak_status check_trailing(const ak__op_ctx *ctx, const ak__tensor *z, const ak__tensor *y) {
    int ok = z->type == AK_ELEM_F32 && z->rank <= y->rank;
    for (int i = 0; ok && i < z->rank; i++)
        ok = z->dims[z->rank - 1 - i] == y->dims[y->rank - 1 - i];
    if (!ok) return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "fused addend does not match the output shape");
    return AK_OK;
}

/* ---- FusedConv ------------------------------------------------------------------------ */

typedef struct fused_conv {
    activation act;
    void *conv_state;
} fused_conv;

static ak_status fconv_create(const ak__ir_node *n, const ak__tensor *const *consts, void **state) {
    fused_conv *f = calloc(1, sizeof *f);
    if (!f) return AK_FAIL(AK_ERR_NO_MEMORY, "FusedConv: out of memory");
    *state = f;
    AK_CHECK(parse_activation(n, &f->act));
    return ak__nn_conv.create ? ak__nn_conv.create(n, consts, &f->conv_state) : AK_OK;
}

static void fconv_destroy(void *state) {
    fused_conv *f = state;
    if (!f) return;
    if (ak__nn_conv.destroy && f->conv_state) ak__nn_conv.destroy(f->conv_state);
    free(f);
}

/* The Conv part sees only X, W and B. */
static ak__op_ctx conv_part(const ak__op_ctx *ctx) {
    ak__op_ctx c = *ctx;
    c.state = ((fused_conv *)ctx->state)->conv_state;
    if (c.num_inputs > 3) c.num_inputs = 3;
    return c;
}

static ak_status fconv_reshape(ak__op_ctx *ctx) {
    ak__op_ctx c = conv_part(ctx);
    AK_CHECK(ak__nn_conv.reshape(&c));
    ctx->workspace_bytes = c.workspace_bytes;
    const ak__tensor *z = ak__op_in(ctx, 3);
    return z ? check_trailing(ctx, z, ctx->outputs[0]) : AK_OK;
}

static ak_status fconv_run(ak__op_ctx *ctx) {
    ak__op_ctx c = conv_part(ctx);
    AK_CHECK(ak__nn_conv.run(&c));
    return run_epilogue(ctx, &((fused_conv *)ctx->state)->act, ctx->outputs[0], ak__op_in(ctx, 3));
}

/* ---- MatMulBias ----------------------------------------------------------------------- */

static ak_status mmb_create(const ak__ir_node *n, const ak__tensor *const *consts, void **state) {
    (void)consts;
    activation *a = calloc(1, sizeof *a);
    if (!a) return AK_FAIL(AK_ERR_NO_MEMORY, "MatMulBias: out of memory");
    *state = a;
    return parse_activation(n, a);
}

static ak_status mmb_reshape(ak__op_ctx *ctx) {
    const ak__tensor *a, *b, *bias;
    AK_CHECK(ak__op_require(ctx, 0, &a));
    AK_CHECK(ak__op_require(ctx, 1, &b));
    AK_CHECK(ak__op_require(ctx, 2, &bias));
    if (a->type != AK_ELEM_F32 || b->type != AK_ELEM_F32 || bias->type != AK_ELEM_F32 ||
        a->rank < 2 || b->rank != 2 || bias->rank != 1 || a->dims[a->rank - 1] != b->dims[0] ||
        bias->dims[0] != b->dims[1])
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "operand shapes do not fit A[..,M,K] B[K,N] bias[N]");
    int64_t dims[AK_IR_MAX_RANK];
    memcpy(dims, a->dims, (size_t)a->rank * sizeof *dims);
    dims[a->rank - 1] = b->dims[1];
    return ak__op_set_output(ctx, 0, AK_ELEM_F32, a->rank, dims);
}

static ak_status mmb_run(ak__op_ctx *ctx) {
    const ak__tensor *a = ctx->inputs[0], *b = ctx->inputs[1], *bias = ctx->inputs[2];
    ak__tensor *y = ctx->outputs[0];
    size_t k = (size_t)b->dims[0], n = (size_t)b->dims[1], m = n ? (size_t)(y->count / n) : 0;
    float *c = y->data;
    for (size_t i = 0; i < m; i++) memcpy(c + i * n, bias->data, n * sizeof *c);
    AK_CHECK(ak_sgemm(AK_NO_TRANS, AK_NO_TRANS, m, n, k, 1.0f, a->data, k, b->data, n, 1.0f, c,
                      n, ctx->pool));
    return run_epilogue(ctx, ctx->state, y, NULL);
}

static const ak__op_def fused_conv_def = {"com.accelkit", "FusedConv", 1, 0, fconv_create,
                                          fconv_destroy, fconv_reshape, fconv_run};
static const ak__op_def matmul_bias_def = {"com.accelkit", "MatMulBias", 1, 0, mmb_create, free,
                                           mmb_reshape, mmb_run};

const ak__op_def *const ak__ops_fused[] = {&fused_conv_def, &matmul_bias_def, NULL};
