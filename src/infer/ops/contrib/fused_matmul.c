/* com.microsoft FusedMatMul: Y = alpha · op(A) @ op(B) with numpy batch broadcasting,
 * what onnxruntime's optimizer makes of MatMul + Transpose + Mul/Div by a constant.
 *   transA/transB           transpose the last two dims of A / B
 *   transBatchA/transBatchB take dim 0 of A / B as the matrix rows and dims 1..r-2 as the
 *                           batch (A viewed as permuted [1, ..., r-2, 0, r-1]), before transA/B;
 *                           A and B must then have one rank >= 3 (as onnxruntime requires)
 * Every form is a strided view of the operand as stored: a batch of matrices of R rows
 * `ld` apart, columns contiguous, read transposed or not. So no operand is copied:
 * float32 runs ak_sgemm on each batch (one GEMM over batch·M rows when B is shared and A
 * is a plain stack of matrices); float16 and bfloat16 are widened into the workspace
 * (same layout, same views), multiplied so and rounded once; float64 takes a reference
 * loop in double. 1-D operands are promoted as MatMul does (A to a row, B to a column,
 * the unit dim dropped from Y); a transpose asked of a 1-D operand is refused by name. */
#include <string.h>

#include "accelkit/kernels.h"
#include "infer/ops/contrib/contrib.h"
#include "infer/ops/elementwise/elementwise.h"

/* Below this many multiply-adds per product, batches are spread over threads. */
#define SMALL_PRODUCT_MACS ((uint64_t)64 * 64 * 64)

/* One operand as a batch of stored matrices. */
typedef struct mm_view {
    int nb;                        /* batch rank */
    int64_t bd[AK_IR_MAX_RANK];    /* batch dims */
    uint64_t bs[AK_IR_MAX_RANK];   /* their strides in elements */
    uint64_t R, C, ld;             /* stored matrix: R rows ld apart, C contiguous columns */
    int trans;                     /* op() reads it transposed */
} mm_view;

typedef struct fmm_plan {
    uint64_t M, N, K, batch;
    int nb;
    int64_t bd[AK_IR_MAX_RANK];                       /* broadcast batch dims */
    uint64_t sa[AK_IR_MAX_RANK], sb[AK_IR_MAX_RANK];  /* element strides, 0: broadcast */
    mm_view a, b;
    float alpha;
    int rank;
    int64_t out[AK_IR_MAX_RANK];
    int fold; /* one GEMM over batch·M rows of A */
} fmm_plan;

/* The view of operand t (which = "A" or "B"). A 1-D A is a row, a 1-D B a column. */
static ak_status view_make(const ak__op_ctx *ctx, const ak__tensor *t, int is_b, int trans,
                           int trans_batch, mm_view *v) {
    memset(v, 0, sizeof *v);
    const char *name = is_b ? "B" : "A";
    int r = t->rank;
    if (r < 1)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "%s must have rank >= 1", name);
    if (r == 1) {
        if (trans || trans_batch)
            return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED,
                              "trans%s%s on a 1-D %s is not implemented",
                              trans_batch ? "Batch" : "", name, name);
        uint64_t k = (uint64_t)t->dims[0];
        v->R = is_b ? k : 1;
        v->C = is_b ? 1 : k;
        v->ld = v->C;
        return AK_OK;
    }
    uint64_t stride[AK_IR_MAX_RANK], s = 1;
    for (int i = r - 1; i >= 0; i--) {
        stride[i] = s;
        s *= (uint64_t)t->dims[i];
    }
    v->trans = trans;
    v->C = (uint64_t)t->dims[r - 1];
    if (trans_batch && r > 2) { /* rows: dim 0; batch: dims 1 .. r-2 */
        v->R = (uint64_t)t->dims[0];
        v->ld = stride[0];
        for (int i = 1; i <= r - 2; i++) {
            v->bd[v->nb] = t->dims[i];
            v->bs[v->nb++] = stride[i];
        }
    } else {
        v->R = (uint64_t)t->dims[r - 2];
        v->ld = v->C;
        for (int i = 0; i < r - 2; i++) {
            v->bd[v->nb] = t->dims[i];
            v->bs[v->nb++] = stride[i];
        }
    }
    return AK_OK;
}

/* Strides of view v against the broadcast batch dims (0 where v broadcasts). */
static void batch_strides(const fmm_plan *pl, const mm_view *v, uint64_t *st) {
    for (int i = 0; i < pl->nb; i++) {
        int vi = i - (pl->nb - v->nb);
        st[i] = vi < 0 || v->bd[vi] == 1 ? 0 : v->bs[vi];
    }
}

static ak_status plan_make(const ak__op_ctx *ctx, fmm_plan *pl) {
    memset(pl, 0, sizeof *pl);
    const ak__tensor *A, *B;
    AK_CHECK(ak__op_require(ctx, 0, &A));
    AK_CHECK(ak__op_require(ctx, 1, &B));
    if (A->type != AK_ELEM_F32 && A->type != AK_ELEM_F16 && A->type != AK_ELEM_BF16 &&
        A->type != AK_ELEM_F64)
        return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED,
                          "input 0 has type %s (float32, float16, bfloat16 or float64 expected)",
                          ak_elem_type_name(A->type));
    AK_CHECK(ak__op_check_type(ctx, 1, B, A->type));
    const ak__ir_node *n = ctx->node;
    int tba = ak__attr_int(n, "transBatchA", 0) != 0, tbb = ak__attr_int(n, "transBatchB", 0) != 0;
    if ((tba || tbb) && (A->rank != B->rank || A->rank < 3)) /* onnxruntime's rule too */
        return AK_OP_FAIL(n, AK_ERR_INVALID_MODEL,
                          "transBatchA/transBatchB need A and B of one rank >= 3 (ranks %d, %d)",
                          A->rank, B->rank);
    AK_CHECK(view_make(ctx, A, 0, ak__attr_int(n, "transA", 0) != 0, tba, &pl->a));
    AK_CHECK(view_make(ctx, B, 1, ak__attr_int(n, "transB", 0) != 0, tbb, &pl->b));
    pl->alpha = ak__attr_float(n, "alpha", 1.0f);
    pl->M = pl->a.trans ? pl->a.C : pl->a.R;
    pl->K = pl->a.trans ? pl->a.R : pl->a.C;
    uint64_t kb = pl->b.trans ? pl->b.C : pl->b.R;
    pl->N = pl->b.trans ? pl->b.R : pl->b.C;
    if (kb != pl->K)
        return AK_OP_FAIL(n, AK_ERR_INVALID_MODEL,
                          "inner dimensions differ: op(A) has %llu columns, op(B) %llu rows",
                          (unsigned long long)pl->K, (unsigned long long)kb);
    pl->nb = pl->a.nb > pl->b.nb ? pl->a.nb : pl->b.nb;
    pl->batch = 1;
    for (int i = 0; i < pl->nb; i++) {
        int ia = i - (pl->nb - pl->a.nb), ib = i - (pl->nb - pl->b.nb);
        int64_t da = ia >= 0 ? pl->a.bd[ia] : 1, db = ib >= 0 ? pl->b.bd[ib] : 1;
        if (da != db && da != 1 && db != 1)
            return AK_OP_FAIL(n, AK_ERR_INVALID_MODEL, "batch dims %lld and %lld do not broadcast",
                              (long long)da, (long long)db);
        pl->bd[i] = da == 1 ? db : da;
        pl->batch *= (uint64_t)pl->bd[i];
    }
    batch_strides(pl, &pl->a, pl->sa);
    batch_strides(pl, &pl->b, pl->sb);
    for (int i = 0; i < pl->nb; i++) pl->out[pl->rank++] = pl->bd[i];
    if (A->rank >= 2) pl->out[pl->rank++] = (int64_t)pl->M;
    if (B->rank >= 2) pl->out[pl->rank++] = (int64_t)pl->N;
    /* A a contiguous stack of untransposed (M, K) matrices covering every batch, B shared */
    int b_shared = 1, a_full = !pl->a.trans && pl->a.ld == pl->K;
    for (int i = 0; i < pl->nb; i++) {
        if (pl->sb[i]) b_shared = 0;
        if (!pl->sa[i]) a_full = 0;
    }
    uint64_t expect = pl->M * pl->K; /* A's batch strides must be those of a dense stack */
    for (int i = pl->nb - 1; i >= 0 && a_full; i--) {
        if (pl->sa[i] != expect) a_full = 0;
        expect *= (uint64_t)pl->bd[i];
    }
    pl->fold = b_shared && a_full;
    return AK_OK;
}

static void batch_offsets(const fmm_plan *pl, uint64_t t, uint64_t *ao, uint64_t *bo) {
    *ao = *bo = 0;
    for (int i = pl->nb - 1; i >= 0; i--) {
        uint64_t idx = t % (uint64_t)pl->bd[i];
        t /= (uint64_t)pl->bd[i];
        *ao += idx * pl->sa[i];
        *bo += idx * pl->sb[i];
    }
}

typedef struct fmm_job {
    const fmm_plan *pl;
    const void *A, *B;
    void *Y;
    ak_elem_type type;
    ak_threadpool *pool;
} fmm_job;

/* op(v)[i][j] read from the stored matrix at `base` (in elements). */
static uint64_t view_index(const mm_view *v, uint64_t base, uint64_t i, uint64_t j) {
    return base + (v->trans ? j * v->ld + i : i * v->ld + j);
}

/* Reference product of one batch in double (every type). */
static void fmm_reference_batch(const fmm_job *j, uint64_t t) {
    const fmm_plan *pl = j->pl;
    uint64_t ao, bo;
    batch_offsets(pl, t, &ao, &bo);
    for (uint64_t m = 0; m < pl->M; m++)
        for (uint64_t n = 0; n < pl->N; n++) {
            double acc = 0.0;
            for (uint64_t k = 0; k < pl->K; k++)
                acc += ak__elem_get(j->A, j->type, view_index(&pl->a, ao, m, k)) *
                       ak__elem_get(j->B, j->type, view_index(&pl->b, bo, k, n));
            ak__elem_set(j->Y, j->type, (t * pl->M + m) * pl->N + n, (double)pl->alpha * acc);
        }
}

static void fmm_reference_task(void *vj, size_t begin, size_t end, int tid) {
    (void)tid;
    for (size_t t = begin; t < end; t++) fmm_reference_batch(vj, t);
}

static void fmm_f32_task(void *vj, size_t begin, size_t end, int tid) {
    (void)tid;
    const fmm_job *j = vj;
    const fmm_plan *pl = j->pl;
    for (size_t t = begin; t < end; t++) {
        uint64_t ao, bo;
        batch_offsets(pl, t, &ao, &bo);
        (void)ak_sgemm(pl->a.trans ? AK_TRANS : AK_NO_TRANS, pl->b.trans ? AK_TRANS : AK_NO_TRANS,
                       (size_t)pl->M, (size_t)pl->N, (size_t)pl->K, pl->alpha,
                       (const float *)j->A + ao, (size_t)pl->a.ld, (const float *)j->B + bo,
                       (size_t)pl->b.ld, 0.0f, (float *)j->Y + t * pl->M * pl->N, (size_t)pl->N,
                       j->pool);
    }
}

static int is_half(ak_elem_type t) { return t == AK_ELEM_F16 || t == AK_ELEM_BF16; }

/* 64-byte rounded float32 bytes of n values. */
static size_t f32_bytes(uint64_t n) { return ((size_t)n * sizeof(float) + 63) / 64 * 64; }

static ak_status fmm_reshape(ak__op_ctx *ctx) {
    fmm_plan pl;
    AK_CHECK(plan_make(ctx, &pl));
    const ak__tensor *A = ctx->inputs[0], *B = ctx->inputs[1];
    if (is_half(A->type)) /* float32 copies of A, B and Y */
        ctx->workspace_bytes = f32_bytes(A->count) + f32_bytes(B->count) +
                               f32_bytes(pl.batch * pl.M * pl.N);
    return ak__op_set_output(ctx, 0, A->type, pl.rank, pl.out);
}

/* Y (batch, M, N) of float32 operands laid out as the plan's views say. */
static ak_status fmm_f32(ak__op_ctx *ctx, const fmm_plan *pl, const float *A, const float *B,
                         float *Y) {
    fmm_job j = {pl, A, B, Y, AK_ELEM_F32, ctx->pool};
    if (pl->fold && pl->batch > 1) /* (batch·M, K) @ op(B): one GEMM */
        return ak_sgemm(AK_NO_TRANS, pl->b.trans ? AK_TRANS : AK_NO_TRANS,
                        (size_t)(pl->batch * pl->M), (size_t)pl->N, (size_t)pl->K, pl->alpha,
                        A, (size_t)pl->K, B, (size_t)pl->b.ld, 0.0f, Y, (size_t)pl->N,
                        ctx->pool);
    if (pl->batch > 1 && pl->M * pl->N * pl->K < SMALL_PRODUCT_MACS)
        /* serial GEMMs, batches across threads */
        return ak_threadpool_parallel_for(ctx->pool, (size_t)pl->batch, 1, fmm_f32_task, &j);
    fmm_f32_task(&j, 0, (size_t)pl->batch, 0); /* each GEMM uses the pool */
    return AK_OK;
}

static ak_status fmm_run(ak__op_ctx *ctx) {
    fmm_plan pl;
    AK_CHECK(plan_make(ctx, &pl));
    ak__tensor *Y = ak__op_out(ctx, 0);
    if (!Y || Y->count == 0) return AK_OK;
    if (pl.K == 0) {
        memset(Y->data, 0, ak__tensor_nbytes(Y));
        return AK_OK;
    }
    const ak__tensor *A = ctx->inputs[0], *B = ctx->inputs[1];
    if (Y->type == AK_ELEM_F32) return fmm_f32(ctx, &pl, A->data, B->data, Y->data);
    if (Y->type == AK_ELEM_F64) { /* double stays double: the reference loop */
        fmm_job j = {&pl, A->data, B->data, Y->data, Y->type, ctx->pool};
        return ak_threadpool_parallel_for(ctx->pool, (size_t)pl.batch, 1, fmm_reference_task, &j);
    }
    /* float16 / bfloat16: widened (same layout, so the same views), float32 GEMMs, Y
     * rounded once */
    char *ws = ctx->workspace;
    float *a = (float *)ws, *b = (float *)(ws + f32_bytes(A->count));
    float *y = (float *)(ws + f32_bytes(A->count) + f32_bytes(B->count));
    ew_half_to_f32(a, A->data, (size_t)A->count, A->type);
    ew_half_to_f32(b, B->data, (size_t)B->count, B->type);
    AK_CHECK(fmm_f32(ctx, &pl, a, b, y));
    ew_f32_to_half(Y->data, y, (size_t)Y->count, Y->type);
    return AK_OK;
}

const ak__op_def ak__contrib_fused_matmul = {"com.microsoft", "FusedMatMul", 1, 0, NULL, NULL,
                                             fmm_reshape, fmm_run};
