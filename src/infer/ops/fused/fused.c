/* An operator the graph optimizer (runtime/optimize.c) creates, in the com.accelkit domain
 * (its convolutions use com.microsoft FusedConv, in nn/conv/conv.c):
 *   MatMulBias(A, B, bias)      A[..., M, K] x B[K, N] + bias[N] as one SGEMM (C starts as
 *                               the bias rows, beta = 1), then an activation
 * Attributes: activation = "" | Relu | Gelu (others as in FusedConv: Clip, LeakyRelu,
 * Sigmoid, Tanh) and activation_params (Clip: min, max; LeakyRelu: alpha). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "accelkit/kernels.h"
#include "infer/runtime/op.h"

typedef enum act_kind { ACT_NONE, ACT_RELU, ACT_CLIP, ACT_LEAKY, ACT_SIGMOID, ACT_TANH, ACT_GELU } act_kind;

typedef struct activation {
    act_kind kind;
    float alpha, beta;
} activation;

static ak_status parse_activation(const ak__ir_node *n, activation *a) {
    static const char *const names[] = {"", "Relu", "Clip", "LeakyRelu", "Sigmoid", "Tanh", "Gelu"};
    const char *s = ak__attr_string(n, "activation", "");
    const float *p;
    size_t np = ak__attr_floats(n, "activation_params", &p);
    a->alpha = np > 0 ? p[0] : 0.01f;
    a->beta = np > 1 ? p[1] : 0.0f;
    for (int k = 0; k < (int)(sizeof names / sizeof *names); k++)
        if (strcmp(s, names[k]) == 0) {
            a->kind = (act_kind)k;
            return AK_OK;
        }
    return AK_OP_FAIL(n, AK_ERR_INVALID_MODEL, "unknown fused activation '%s'", s);
}

/* y = act(y) over [begin, end); one loop per activation so each vectorizes. */
static void epilogue(const activation *a, float *y, size_t begin, size_t end) {
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
} epilogue_job;

static void epilogue_chunk(void *p, size_t begin, size_t end, int thread) {
    (void)thread;
    const epilogue_job *j = p;
    epilogue(j->act, j->y, begin, end);
}

static ak_status run_epilogue(const ak__op_ctx *ctx, const activation *a, ak__tensor *y) {
    if (a->kind == ACT_NONE) return AK_OK;
    epilogue_job j = {a, y->data};
    return ak_threadpool_parallel_for(ctx->pool, (size_t)y->count, 16384, epilogue_chunk, &j);
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
    return run_epilogue(ctx, ctx->state, y);
}

static const ak__op_def matmul_bias_def = {"com.accelkit", "MatMulBias", 1, 0, mmb_create, free,
                                           mmb_reshape, mmb_run};

const ak__op_def *const ak__ops_fused[] = {&matmul_bias_def, NULL};
