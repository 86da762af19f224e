/* The com.microsoft GELU family:
 *   Gelu       Y = 0.5·X·(1 + erf(X/√2))
 *   BiasGelu   Y = Gelu(A + B), B a vector along A's last axis (required)
 *   FastGelu   Y = 0.5·Z·(1 + tanh(√(2/π)·(Z + 0.044715·Z³))), Z = X + bias (bias optional)
 *   QuickGelu  Y = X·sigmoid(alpha·X), alpha 1.702 by default
 *
 * float32 runs the elementwise family's vector kernels (bias add, erf/tanh GELU, scale,
 * sigmoid, multiply: each one checked against its scalar reference by the kernel tests);
 * float16 and bfloat16 are widened to float32 in short stack chunks, as the standard
 * unary operators do; float64 runs the same formulas in double. */
#include <math.h>
#include <string.h>

#include "infer/ops/contrib/contrib.h"
#include "infer/ops/elementwise/elementwise.h"

typedef enum act_kind { ACT_GELU, ACT_BIAS_GELU, ACT_FAST_GELU, ACT_QUICK_GELU } act_kind;

/* Elements per stack chunk (and per task of the pool, in chunks). */
#define ACT_CHUNK 256

typedef struct act_job {
    act_kind kind;
    float alpha;             /* QuickGelu */
    ak_elem_type type;
    const void *x;           /* count values */
    void *y;                 /* count values */
    const float *bias_f32;   /* [H] widened bias (float16/bfloat16/float32), or NULL */
    const double *bias_f64;  /* [H] float64 bias, or NULL */
    uint64_t count, H;       /* H: the bias length (X's last dim); count when no bias */
} act_job;

/* ---- float32 chunk: buf (m values starting at flat index i0, within one bias row) --- */

static void act_f32_chunk(const act_job *j, float *buf, size_t m, uint64_t i0) {
    if (j->bias_f32) ew_f32_binary(AK_EW_F32_ADD, buf, buf, j->bias_f32 + i0 % j->H, m, 1, 1);
    switch (j->kind) {
    case ACT_GELU: case ACT_BIAS_GELU:
        ew_f32_unary(AK_EW_F32_GELU_ERF, buf, buf, m, 0.0f, 0.0f);
        return;
    case ACT_FAST_GELU:
        ew_f32_unary(AK_EW_F32_GELU_TANH, buf, buf, m, 0.0f, 0.0f);
        return;
    case ACT_QUICK_GELU: {
        float s[ACT_CHUNK];
        ew_f32_unary(AK_EW_F32_SCALE, s, buf, m, j->alpha, 0.0f);
        ew_f32_unary(AK_EW_F32_SIGMOID, s, s, m, 0.0f, 0.0f);
        ew_f32_binary(AK_EW_F32_MUL, buf, buf, s, m, 1, 1);
        return;
    }
    }
}

/* ---- float64: the formulas in double --------------------------------------------- */

static double act_f64_value(const act_job *j, double x) {
    switch (j->kind) {
    case ACT_GELU: case ACT_BIAS_GELU: return 0.5 * x * (1.0 + erf(x * 0.7071067811865476));
    case ACT_FAST_GELU:
        return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
    case ACT_QUICK_GELU: return x / (1.0 + exp(-(double)j->alpha * x));
    }
    return x;
}

/* ---- driver ------------------------------------------------------------------------ */

/* The m (<= ACT_CHUNK) values from flat index i0, all within one bias row. */
static void act_range(const act_job *j, uint64_t i0, size_t m) {
    size_t es = ak_elem_type_size(j->type);
    if (j->type == AK_ELEM_F64) {
        const double *x = (const double *)j->x + i0;
        double *y = (double *)j->y + i0;
        for (size_t i = 0; i < m; i++) {
            double v = x[i] + (j->bias_f64 ? j->bias_f64[(i0 + i) % j->H] : 0.0);
            y[i] = act_f64_value(j, v);
        }
        return;
    }
    float buf[ACT_CHUNK];
    const char *x = (const char *)j->x + i0 * es;
    char *y = (char *)j->y + i0 * es;
    if (j->type == AK_ELEM_F32)
        memcpy(buf, x, m * sizeof(float));
    else
        ew_half_to_f32(buf, (const uint16_t *)x, m, j->type);
    act_f32_chunk(j, buf, m, i0);
    if (j->type == AK_ELEM_F32)
        memcpy(y, buf, m * sizeof(float));
    else
        ew_f32_to_half((uint16_t *)y, buf, m, j->type);
}

static uint64_t chunks_per_row(const act_job *j) { return (j->H + ACT_CHUNK - 1) / ACT_CHUNK; }

/* Chunks [begin, end) of up to ACT_CHUNK values; chunks are counted per bias row
 * (chunks_per_row of them), so none crosses a row. */
static void act_task(void *vj, size_t begin, size_t end, int tid) {
    (void)tid;
    const act_job *j = vj;
    uint64_t cpr = chunks_per_row(j);
    for (size_t c = begin; c < end; c++) {
        uint64_t row = c / cpr, off = (c % cpr) * ACT_CHUNK;
        uint64_t m = j->H - off < ACT_CHUNK ? j->H - off : ACT_CHUNK;
        act_range(j, row * j->H + off, (size_t)m);
    }
}

/* ---- operator steps ----------------------------------------------------------------- */

static int float_type(ak_elem_type t) {
    return t == AK_ELEM_F32 || t == AK_ELEM_F16 || t == AK_ELEM_BF16 || t == AK_ELEM_F64;
}

/* Checks X and the bias; *bias is NULL when absent. */
static ak_status act_inputs(const ak__op_ctx *ctx, act_kind k, const ak__tensor **x,
                            const ak__tensor **bias) {
    AK_CHECK(ak__op_require(ctx, 0, x));
    if (!float_type((*x)->type))
        return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED,
                          "input 0 has type %s (float32, float16, bfloat16 or float64 expected)",
                          ak_elem_type_name((*x)->type));
    *bias = NULL;
    if (k == ACT_BIAS_GELU) AK_CHECK(ak__op_require(ctx, 1, bias));
    else if (k == ACT_FAST_GELU) *bias = ak__op_in(ctx, 1);
    if (!*bias) return AK_OK;
    AK_CHECK(ak__op_check_type(ctx, 1, *bias, (*x)->type));
    int64_t H = (*x)->rank ? (*x)->dims[(*x)->rank - 1] : 1;
    if ((*bias)->rank != 1 || (*bias)->dims[0] != H)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                          "input 1 (bias) must be a vector of X's last dimension (%lld), "
                          "it has rank %d and %lld values",
                          (long long)H, (*bias)->rank, (long long)(*bias)->count);
    return AK_OK;
}

static ak_status act_reshape(ak__op_ctx *ctx, act_kind k) {
    const ak__tensor *x, *bias;
    AK_CHECK(act_inputs(ctx, k, &x, &bias));
    /* the bias widened to float32 for float16/bfloat16 */
    if (bias && (bias->type == AK_ELEM_F16 || bias->type == AK_ELEM_BF16))
        ctx->workspace_bytes = (size_t)bias->count * sizeof(float);
    return ak__op_set_output_like(ctx, 0, x);
}

static ak_status act_run(ak__op_ctx *ctx, act_kind k) {
    const ak__tensor *x, *bias;
    AK_CHECK(act_inputs(ctx, k, &x, &bias));
    ak__tensor *Y = ak__op_out(ctx, 0);
    if (!Y || Y->count == 0) return AK_OK;
    act_job j = {k, ak__attr_float(ctx->node, "alpha", 1.702f), x->type, x->data, Y->data,
                 NULL, NULL, x->count, x->count};
    if (bias) {
        j.H = bias->count;
        if (bias->type == AK_ELEM_F64) j.bias_f64 = bias->data;
        else if (bias->type == AK_ELEM_F32) j.bias_f32 = bias->data;
        else {
            ew_half_to_f32(ctx->workspace, bias->data, (size_t)bias->count, bias->type);
            j.bias_f32 = ctx->workspace;
        }
    }
    if (j.H == 0) return AK_OK;
    uint64_t chunks = (x->count / j.H) * chunks_per_row(&j);
    /* one pool wake-up for big tensors; a few chunks run on the calling thread */
    size_t grain = (size_t)(EW_PAR_COSTLY / ACT_CHUNK);
    if (x->count < EW_PAR_COSTLY) {
        act_task(&j, 0, (size_t)chunks, 0);
        return AK_OK;
    }
    return ak_threadpool_parallel_for(ctx->pool, (size_t)chunks, grain, act_task, &j);
}

/* Refuses an attribute the operator does not have a meaning for in this family. */
static ak_status act_create(const ak__ir_node *node, const ak__tensor *const *consts,
                            void **state) {
    (void)consts;
    *state = NULL;
    if (strcmp(node->op_type, "QuickGelu") != 0 && ak__attr_has(node, "alpha"))
        return AK_OP_FAIL(node, AK_ERR_UNSUPPORTED, "attribute alpha is not part of %s",
                          node->op_type);
    return AK_OK;
}

#define ACT_OP(name, ONNX, KIND)                                                          \
    static ak_status reshape_##name(ak__op_ctx *ctx) { return act_reshape(ctx, KIND); }    \
    static ak_status run_##name(ak__op_ctx *ctx) { return act_run(ctx, KIND); }            \
    const ak__op_def ak__contrib_##name = {"com.microsoft", ONNX, 1, 0, act_create, NULL,   \
                                           reshape_##name, run_##name};

ACT_OP(gelu, "Gelu", ACT_GELU)
ACT_OP(bias_gelu, "BiasGelu", ACT_BIAS_GELU)
ACT_OP(fast_gelu, "FastGelu", ACT_FAST_GELU)
ACT_OP(quick_gelu, "QuickGelu", ACT_QUICK_GELU)
