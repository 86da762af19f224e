/* The quantized matrix products, with MatMul's numpy semantics (batch dims broadcast,
 * 1-D operands promoted and their unit dim dropped), all on the int8 driver (qmm.c):
 *   MatMulInteger         int32 Σ(a − a_zero_point)(b − b_zero_point); a_zero_point per
 *                         tensor or per row of A, b_zero_point per tensor or per column of B
 *   QLinearMatMul         saturate(round(acc·a_scale·b_scale/y_scale) + y_zero_point);
 *                         b's scale and zero point per tensor or per column; a's and y's
 *                         per tensor (a per-row a or y scale is refused)
 *   MatMulIntegerToFloat  (com.microsoft) acc·a_scale·b_scale (+ bias), b_scale per
 *                         tensor or per column
 * A constant 2-D B is packed once at session creation; any other B is packed per product
 * into the workspace. */
#include <stdlib.h>
#include <string.h>

#include "infer/ops/nn/common.h"
#include "infer/ops/math/matmul_plan.h"
#include "infer/ops/quant/quant.h"

/* ---- shapes ----------------------------------------------------------------------------- */

/* ---- the three operators' inputs ---------------------------------------------------------- */

enum { OP_MMI, OP_QLMM, OP_MMITF };

/* Where each operator keeps A, B and their zero points. */
static const uint32_t in_a[] = {0, 0, 0}, in_b[] = {1, 3, 1};
static const uint32_t in_azp[] = {2, 2, 4}, in_bzp[] = {3, 5, 5};

typedef struct qmm_state {
    ak__qmm_b b; /* packed at creation when B is a constant 2-D tensor */
    void *mem;
} qmm_state;

typedef struct qmm_args {
    ak__mm_plan pl;
    const ak__tensor *A, *B;
    ak__qzp za, zb;
    const float *a_scale, *b_scale, *y_scale;
    size_t nb_scale;
    ak__qzp zy;
    const float *bias;
} qmm_args;

static ak_status args_make(ak__op_ctx *ctx, int op, qmm_args *g) {
    memset(g, 0, sizeof *g);
    AK_CHECK(ak__op_require(ctx, in_a[op], &g->A));
    AK_CHECK(ak__op_require(ctx, in_b[op], &g->B));
    AK_CHECK(ak__q_check_8bit(ctx, in_a[op], g->A, "A"));
    AK_CHECK(ak__q_check_8bit(ctx, in_b[op], g->B, "B"));
    AK_CHECK(ak__mm_plan_make(ctx, g->A, g->B, &g->pl));
    size_t M = (size_t)g->pl.M, N = (size_t)g->pl.N, n;
    /* required by QLinearMatMul, but not in its fused form (a DequantizeLinear without one) */
    int zp_optional = op != OP_QLMM || strcmp(ctx->node->domain, "com.accelkit") == 0;
    AK_CHECK(ak__q_zero_point(ctx, in_azp[op], "a_zero_point", op == OP_MMITF ? 0 : M,
                              g->A->type, zp_optional, &g->za));
    AK_CHECK(ak__q_zero_point(ctx, in_bzp[op], "b_zero_point", N, g->B->type, zp_optional,
                              &g->zb));
    if (op == OP_QLMM) {
        size_t na, ny;
        AK_CHECK(ak__q_scale(ctx, 1, "a_scale", M, &g->a_scale, &na));
        AK_CHECK(ak__q_scale(ctx, 4, "b_scale", N, &g->b_scale, &g->nb_scale));
        AK_CHECK(ak__q_scale(ctx, 6, "y_scale", M, &g->y_scale, &ny));
        AK_CHECK(ak__q_zero_point(ctx, 7, "y_zero_point", M, AK_ELEM_UNDEFINED, 0, &g->zy));
        /* the spec allows rows of their own; ONNX Runtime does not, nor do we yet */
        if (na > 1 || ny > 1 || g->za.count > 1 || g->zy.count > 1)
            return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED,
                              "per-row a or y quantization (a per-tensor a_scale, "
                              "a_zero_point, y_scale and y_zero_point are implemented)");
    } else if (op == OP_MMITF) {
        AK_CHECK(ak__q_scale(ctx, 2, "a_scale", 0, &g->a_scale, &n));
        AK_CHECK(ak__q_scale(ctx, 3, "b_scale", N, &g->b_scale, &g->nb_scale));
        const ak__tensor *bias = ak__op_in(ctx, 6);
        if (bias) {
            AK_CHECK(ak__op_check_type(ctx, 6, bias, AK_ELEM_F32));
            if (bias->rank != 1 || (size_t)bias->count != N)
                return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                                  "bias must be 1-D with %zu values (B's columns)", N);
            g->bias = bias->data;
        }
    }
    return AK_OK;
}

static ak_status out_type(int op, const qmm_args *g, ak_elem_type *t) {
    *t = op == OP_MMI ? AK_ELEM_I32 : op == OP_MMITF ? AK_ELEM_F32 : g->zy.type;
    return AK_OK;
}

static ak_status qmm_create(const ak__ir_node *node, const ak__tensor *const *consts, int op,
                            void **state) {
    *state = NULL;
    const ak__tensor *B = consts && in_b[op] < node->num_inputs ? consts[in_b[op]] : NULL;
    if (!B || B->rank != 2 || (B->type != AK_ELEM_U8 && B->type != AK_ELEM_I8)) return AK_OK;
    qmm_state *s = calloc(1, sizeof *s);
    size_t K = (size_t)B->dims[0], N = (size_t)B->dims[1];
    if (!s || !(s->mem = aligned_alloc(64, (ak__qmm_b_bytes(K, N) + 63) / 64 * 64 + 64))) {
        free(s);
        return AK_ERR_NO_MEMORY;
    }
    ak__qmm_b_pack(&s->b, s->mem, B->data, B->type, K, N, N, 1);
    *state = s;
    return AK_OK;
}

static void qmm_destroy(void *state) {
    qmm_state *s = state;
    if (s) free(s->mem);
    free(s);
}

/* Workspace: the driver's slots, then N multipliers, then one packed B if not packed. */
static size_t ws_driver(const ak__op_ctx *ctx, const ak__mm_plan *pl) {
    return (ak__qmm_workspace((size_t)pl->K, ak__nn_pool_threads(ctx)) + 63) / 64 * 64;
}

static ak_status qmm_reshape_op(ak__op_ctx *ctx, int op) {
    qmm_args g;
    AK_CHECK(args_make(ctx, op, &g));
    ak_elem_type t;
    AK_CHECK(out_type(op, &g, &t));
    size_t N = (size_t)g.pl.N;
    ctx->workspace_bytes = ws_driver(ctx, &g.pl) + (N * sizeof(float) + 63) / 64 * 64 +
                           (ctx->state ? 0 : ak__qmm_b_bytes((size_t)g.pl.K, N) + 64);
    return ak__op_set_output(ctx, 0, t, g.pl.rank, g.pl.out);
}

static ak_status qmm_run_op(ak__op_ctx *ctx, int op) {
    qmm_args g;
    AK_CHECK(args_make(ctx, op, &g));
    ak__tensor *Y = ak__op_out(ctx, 0);
    if (!Y || Y->count == 0) return AK_OK;
    const ak__mm_plan *pl = &g.pl;
    size_t M = (size_t)pl->M, N = (size_t)pl->N, K = (size_t)pl->K;
    int threads = ak__nn_pool_threads(ctx);
    char *ws = ctx->workspace;
    float *mult = (float *)(ws + ws_driver(ctx, pl));
    void *bmem = (char *)mult + (N * sizeof(float) + 63) / 64 * 64;
    ak__qmm q = {0};
    q.M = M, q.N = N, q.K = K, q.lda = K, q.a_type = g.A->type, q.za = g.za, q.zb = g.zb;
    q.out_rs = N, q.out_cs = 1;
    if (op == OP_MMI) {
        q.out_kind = AK_QMM_OUT_I32;
    } else {
        /* the multiplier in float32, as ONNX Runtime forms it */
        for (size_t n = 0; n < g.nb_scale; n++)
            mult[n] = op == OP_QLMM ? g.a_scale[0] * g.b_scale[n] / g.y_scale[0]
                                    : g.a_scale[0] * g.b_scale[n];
        q.mult = mult, q.mult_n = g.nb_scale;
        q.out_kind = op == OP_QLMM ? AK_QMM_OUT_Q8 : AK_QMM_OUT_F32;
        q.out_signed = g.zy.type == AK_ELEM_I8;
        q.out_zp = ak__qzp_at(&g.zy, 0);
        q.fbias = g.bias;
    }
    const qmm_state *st = ctx->state;
    ak__qmm_b packed;
    size_t esz_y = ak_elem_type_size(Y->type);
    /* one product over batch·M rows when B is shared and A is not broadcast over batches */
    uint64_t acount = 1;
    for (int i = 0; i < pl->nb; i++)
        if (pl->sa[i]) acount *= (uint64_t)pl->bd[i];
    int fold = pl->b_shared && acount == pl->batch && g.za.count <= 1;
    uint64_t products = fold ? 1 : pl->batch;
    for (uint64_t t = 0; t < products; t++) {
        uint64_t ao, bo;
        ak__mm_offsets(pl, t, &ao, &bo);
        if (st) {
            q.b = &st->b;
        } else if (t == 0 || !pl->b_shared) {
            ak__qmm_b_pack(&packed, bmem, (const uint8_t *)g.B->data + bo * K * N, g.B->type, K,
                           N, N, 1);
            q.b = &packed;
        }
        q.M = fold ? (size_t)pl->batch * M : M;
        q.a = (const uint8_t *)g.A->data + ao * M * K;
        q.out = (char *)Y->data + t * M * N * esz_y;
        ak__qmm_run(&q, ctx->pool, threads, ctx->workspace);
    }
    return AK_OK;
}

static ak_status mmi_create(const ak__ir_node *n, const ak__tensor *const *c, void **s) {
    return qmm_create(n, c, OP_MMI, s);
}
static ak_status qlmm_create(const ak__ir_node *n, const ak__tensor *const *c, void **s) {
    return qmm_create(n, c, OP_QLMM, s);
}
static ak_status mmitf_create(const ak__ir_node *n, const ak__tensor *const *c, void **s) {
    return qmm_create(n, c, OP_MMITF, s);
}
static ak_status mmi_reshape(ak__op_ctx *ctx) { return qmm_reshape_op(ctx, OP_MMI); }
static ak_status qlmm_reshape(ak__op_ctx *ctx) { return qmm_reshape_op(ctx, OP_QLMM); }
static ak_status mmitf_reshape(ak__op_ctx *ctx) { return qmm_reshape_op(ctx, OP_MMITF); }
static ak_status mmi_run(ak__op_ctx *ctx) { return qmm_run_op(ctx, OP_MMI); }
static ak_status qlmm_run(ak__op_ctx *ctx) { return qmm_run_op(ctx, OP_QLMM); }
static ak_status mmitf_run(ak__op_ctx *ctx) { return qmm_run_op(ctx, OP_MMITF); }

const ak__op_def ak__q_matmul_integer = {"", "MatMulInteger", 10, 0, mmi_create, qmm_destroy,
                                         mmi_reshape, mmi_run};
const ak__op_def ak__q_qlinear_matmul = {"", "QLinearMatMul", 10, 0, qlmm_create, qmm_destroy,
                                         qlmm_reshape, qlmm_run};
/* What the optimizer makes of DequantizeLinear -> MatMul(·, DequantizeLinear(const)) ->
 * QuantizeLinear (runtime/optimize.c). */
const ak__op_def ak__q_qlinear_matmul_fused = {"com.accelkit", "QLinearMatMul", 1, 0, qlmm_create,
                                               qmm_destroy, qlmm_reshape, qlmm_run};
const ak__op_def ak__q_matmul_integer_to_float = {"com.microsoft", "MatMulIntegerToFloat", 1, 0,
                                                  mmitf_create, qmm_destroy, mmitf_reshape,
                                                  mmitf_run};
