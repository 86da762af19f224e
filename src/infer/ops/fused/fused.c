/* An operator the graph optimizer (runtime/optimize.c) creates, in the com.accelkit domain
 * (its convolutions use com.microsoft FusedConv, in nn/conv/conv.c):
 *   MatMulBias(A, B, bias)      A[..., M, K] x B[K, N] + bias[N], then an activation
 * Attributes: activation = "" | Relu | Gelu (others as in FusedConv: Clip, LeakyRelu,
 * Sigmoid, Tanh) and activation_params (Clip: min, max; LeakyRelu: alpha).
 *
 * The product runs on the blocked SGEMM driver with the bias added to each finished tile
 * in the microkernel's registers (the bias is not first copied into every row of C, and
 * C is not read back for it); the activation is then one parallel pass of the same
 * vector kernel the standalone operators (Relu, Gelu ...) use, so the fused node gives
 * what the chain it replaces gives. */
#include <stdlib.h>
#include <string.h>

#include "accelkit/kernels.h"
#include "infer/ops/fused/fused.h"
#include "infer/runtime/op.h"
#include "kernels/dispatch.h"
#include "kernels/gemm.h"

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

/* The elementwise kernel's operation for an activation (ACT_NONE: none). */
static ak__ew_f32_un ew_op_of(act_kind k) {
    static const ak__ew_f32_un ops[] = {
        [ACT_RELU] = AK_EW_F32_RELU,       [ACT_CLIP] = AK_EW_F32_CLIP,
        [ACT_LEAKY] = AK_EW_F32_LEAKY,     [ACT_SIGMOID] = AK_EW_F32_SIGMOID,
        [ACT_TANH] = AK_EW_F32_TANH,       [ACT_GELU] = AK_EW_F32_GELU_ERF};
    return ops[k];
}

typedef struct epilogue_job {
    const activation *act;
    float *y;
} epilogue_job;

/* y = act(y) over [begin, end), in place (the kernel allows dst == src). */
static void epilogue_chunk(void *p, size_t begin, size_t end, int thread) {
    (void)thread;
    const epilogue_job *j = p;
    ak__kernels_active()->f32_ew_unary(ew_op_of(j->act->kind), j->y + begin, j->y + begin,
                                       end - begin, j->act->alpha, j->act->beta);
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

/* The driver's finish of the tiles the microkernel does not finish itself (ragged edges,
 * the small-product and out-of-memory paths): + bias[col + j] on column j. */
static void add_col_bias(void *bias, float *c, size_t ldc, size_t row, size_t col, size_t m,
                         size_t n) {
    (void)row;
    const float *b = (const float *)bias + col;
    for (size_t r = 0; r < m; r++)
        for (size_t j = 0; j < n; j++) c[r * ldc + j] += b[j];
}

static ak_status mmb_run(ak__op_ctx *ctx) {
    const ak__tensor *a = ctx->inputs[0], *b = ctx->inputs[1], *bias = ctx->inputs[2];
    ak__tensor *y = ctx->outputs[0];
    size_t k = (size_t)b->dims[0], n = (size_t)b->dims[1], m = n ? (size_t)(y->count / n) : 0;
    float *c = y->data;
    const ak__gemm_config *cfg = ak__kernels_active()->sgemm_config;
    if (cfg && k > 0) {
        ak__sgemm_tile_epi in_regs = {NULL, NULL, AK_SGEMM_ACT_NONE, 0.0f, 0.0f, bias->data};
        ak__gemm_epilogue epi = {add_col_bias, (void *)bias->data, &in_regs};
        ak__sgemm_blocked_epi(cfg, 0, 0, m, n, k, 1.0f, a->data, k, b->data, n, 0.0f, c, n,
                              ctx->pool, &epi);
    } else { /* no blocked driver (AK_KERNELS=ref) or K = 0: C starts as the bias rows */
        for (size_t i = 0; i < m; i++) memcpy(c + i * n, bias->data, n * sizeof *c);
        AK_CHECK(ak_sgemm(AK_NO_TRANS, AK_NO_TRANS, m, n, k, 1.0f, a->data, k, b->data, n, 1.0f,
                          c, n, ctx->pool));
    }
    return run_epilogue(ctx, ctx->state, y);
}

ak_status ak__matmul_bias_epilogue(const ak__op_ctx *ctx) {
    return run_epilogue(ctx, ctx->state, ctx->outputs[0]);
}

static const ak__op_def matmul_bias_def = {"com.accelkit", "MatMulBias", 1, 0, mmb_create, free,
                                           mmb_reshape, mmb_run};

const ak__op_def *const ak__ops_fused[] = {&matmul_bias_def, NULL};
