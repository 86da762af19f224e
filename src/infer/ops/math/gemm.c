/* Gemm (transA/transB, alpha, beta, C broadcast to (M,N)), MatMul (numpy semantics:
 * batch dims broadcast, 1-D operands promoted and their unit dim dropped). MatMulInteger
 * and the other INT8 products are in ops/quant.
 *
 * float32 goes to ak_sgemm on ctx->pool. A batched MatMul whose B is shared by every
 * batch folds the batch into M (one GEMM: the transformer case); many small batched
 * products run one serial GEMM per task across the pool instead. Other types take a
 * reference loop: double for floats, exact int64 for integers. */
#include <string.h>

#include "accelkit/kernels.h"
#include "infer/ops/math/math.h"
#include "infer/ops/math/matmul_plan.h"

/* Below this many multiply-adds per product, batches are spread over threads. */
#define SMALL_PRODUCT_MACS ((uint64_t)64 * 64 * 64)

static int is_int_type(ak_elem_type t) { return ak__elem_is_integer(t); }

/* Exact integer read (64-bit types typed; smaller ones fit a double exactly). */
static int64_t get_i64(const void *d, ak_elem_type t, uint64_t i) {
    switch (t) {
    case AK_ELEM_I64: return ((const int64_t *)d)[i];
    case AK_ELEM_U64: return (int64_t)((const uint64_t *)d)[i];
    case AK_ELEM_I32: return ((const int32_t *)d)[i];
    case AK_ELEM_U32: return ((const uint32_t *)d)[i];
    default: return (int64_t)ak__elem_get(d, t, i);
    }
}

static void set_i64(void *d, ak_elem_type t, uint64_t i, int64_t v) {
    switch (t) {
    case AK_ELEM_I64: ((int64_t *)d)[i] = v; break;
    case AK_ELEM_U64: ((uint64_t *)d)[i] = (uint64_t)v; break;
    case AK_ELEM_I32: ((int32_t *)d)[i] = (int32_t)(uint32_t)(uint64_t)v; break;
    case AK_ELEM_U32: ((uint32_t *)d)[i] = (uint32_t)(uint64_t)v; break;
    default: ak__elem_set(d, t, i, (double)v); break;
    }
}

static ak_status numeric_type(ak__op_ctx *ctx, uint32_t i, const ak__tensor *t) {
    if (ak__elem_is_float(t->type) || is_int_type(t->type)) return AK_OK;
    return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED, "input %u has type %s", i,
                      ak_elem_type_name(t->type));
}

/* ---- Gemm ----------------------------------------------------------------------------- */

typedef struct gemm_plan {
    uint64_t M, N, K;
    int ta, tb;
    uint64_t c_rows, c_cols; /* C's broadcast shape (1 or M, 1 or N); 0 rows = no C */
    float alpha, beta;
} gemm_plan;

static ak_status gemm_plan_make(ak__op_ctx *ctx, gemm_plan *pl) {
    const ak__tensor *A, *B, *C = ak__op_in(ctx, 2);
    AK_CHECK(ak__op_require(ctx, 0, &A));
    AK_CHECK(ak__op_require(ctx, 1, &B));
    AK_CHECK(numeric_type(ctx, 0, A));
    AK_CHECK(ak__op_check_type(ctx, 1, B, A->type));
    if (C) AK_CHECK(ak__op_check_type(ctx, 2, C, A->type));
    if (A->rank != 2 || B->rank != 2)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "A and B must be 2-D (ranks %d, %d)",
                          A->rank, B->rank);
    pl->ta = ak__attr_int(ctx->node, "transA", 0) != 0;
    pl->tb = ak__attr_int(ctx->node, "transB", 0) != 0;
    pl->alpha = ak__attr_float(ctx->node, "alpha", 1.0f);
    pl->beta = ak__attr_float(ctx->node, "beta", 1.0f);
    pl->M = (uint64_t)A->dims[pl->ta ? 1 : 0];
    pl->K = (uint64_t)A->dims[pl->ta ? 0 : 1];
    uint64_t kb = (uint64_t)B->dims[pl->tb ? 1 : 0];
    pl->N = (uint64_t)B->dims[pl->tb ? 0 : 1];
    if (kb != pl->K)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                          "inner dimensions differ: op(A) is (%llu, %llu), op(B) (%llu, %llu)",
                          (unsigned long long)pl->M, (unsigned long long)pl->K,
                          (unsigned long long)kb, (unsigned long long)pl->N);
    pl->c_rows = pl->c_cols = 0;
    if (C) {
        if (C->rank > 2)
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "C has rank %d (at most 2)",
                              C->rank);
        pl->c_rows = C->rank == 2 ? (uint64_t)C->dims[0] : 1;
        pl->c_cols = C->rank >= 1 ? (uint64_t)C->dims[C->rank - 1] : 1;
        if ((pl->c_rows != 1 && pl->c_rows != pl->M) || (pl->c_cols != 1 && pl->c_cols != pl->N))
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                              "C does not broadcast to (%llu, %llu)",
                              (unsigned long long)pl->M, (unsigned long long)pl->N);
    }
    return AK_OK;
}

static ak_status gemm_reshape(ak__op_ctx *ctx) {
    gemm_plan pl;
    AK_CHECK(gemm_plan_make(ctx, &pl));
    int64_t dims[2] = {(int64_t)pl.M, (int64_t)pl.N};
    return ak__op_set_output(ctx, 0, ctx->inputs[0]->type, 2, dims);
}

/* Reference Gemm for every type but float32. */
static void gemm_reference(const gemm_plan *pl, const ak__tensor *A, const ak__tensor *B,
                           const ak__tensor *C, ak__tensor *Y) {
    int integer = is_int_type(A->type);
    for (uint64_t i = 0; i < pl->M; i++)
        for (uint64_t j = 0; j < pl->N; j++) {
            uint64_t ci = (pl->c_rows == 1 ? 0 : i) * pl->c_cols + (pl->c_cols == 1 ? 0 : j);
            if (integer) {
                int64_t acc = 0;
                for (uint64_t k = 0; k < pl->K; k++)
                    acc += get_i64(A->data, A->type, pl->ta ? k * pl->M + i : i * pl->K + k) *
                           get_i64(B->data, B->type, pl->tb ? j * pl->K + k : k * pl->N + j);
                acc = (int64_t)(pl->alpha * (double)acc);
                if (C && pl->c_rows) acc += (int64_t)(pl->beta * (double)get_i64(C->data, C->type, ci));
                set_i64(Y->data, Y->type, i * pl->N + j, acc);
            } else {
                double acc = 0.0;
                for (uint64_t k = 0; k < pl->K; k++)
                    acc += ak__elem_get(A->data, A->type, pl->ta ? k * pl->M + i : i * pl->K + k) *
                           ak__elem_get(B->data, B->type, pl->tb ? j * pl->K + k : k * pl->N + j);
                acc *= pl->alpha;
                if (C && pl->c_rows) acc += pl->beta * ak__elem_get(C->data, C->type, ci);
                ak__elem_set(Y->data, Y->type, i * pl->N + j, acc);
            }
        }
}

/* Up to this many rows of A, Gemm with a transposed B runs as ak_linear (a GEMV-like
 * pass over B) instead of ak_sgemm. */
#define GEMM_LINEAR_MAX_ROWS 4

static ak_status gemm_run(ak__op_ctx *ctx) {
    gemm_plan pl;
    AK_CHECK(gemm_plan_make(ctx, &pl));
    const ak__tensor *A = ctx->inputs[0], *B = ctx->inputs[1], *C = ak__op_in(ctx, 2);
    ak__tensor *Y = ak__op_out(ctx, 0);
    if (!Y || Y->count == 0) return AK_OK;
    if (A->type != AK_ELEM_F32) {
        gemm_reference(&pl, A, B, C, Y);
        return AK_OK;
    }
    float *y = Y->data, beta = 0.0f;
    if (C && pl.beta != 0.0f) { /* Y = beta*C broadcast, then accumulate */
        const float *c = C->data;
        for (uint64_t i = 0; i < pl.M; i++) {
            const float *crow = c + (pl.c_rows == 1 ? 0 : i) * pl.c_cols;
            float *yrow = y + i * pl.N;
            if (pl.c_cols == 1)
                for (uint64_t j = 0; j < pl.N; j++) yrow[j] = pl.beta * crow[0];
            else
                for (uint64_t j = 0; j < pl.N; j++) yrow[j] = pl.beta * crow[j];
        }
        beta = 1.0f;
    }
    if (!pl.ta && pl.tb && pl.alpha == 1.0f && pl.M <= GEMM_LINEAR_MAX_ROWS)
        /* a classifier at batch 1: B's rows are the weight rows of a linear layer, read
         * once at memory speed, where ak_sgemm would pack all of B first */
        return ak_linear(AK_WTYPE_F32, B->data, (size_t)pl.N, (size_t)pl.K, A->data,
                         (size_t)pl.K, (size_t)pl.M, y, (size_t)pl.N, beta != 0.0f, ctx->pool);
    return ak_sgemm(pl.ta ? AK_TRANS : AK_NO_TRANS, pl.tb ? AK_TRANS : AK_NO_TRANS,
                    (size_t)pl.M, (size_t)pl.N, (size_t)pl.K, pl.alpha, A->data,
                    (size_t)(pl.ta ? pl.M : pl.K), B->data, (size_t)(pl.tb ? pl.K : pl.N), beta,
                    y, (size_t)pl.N, ctx->pool);
}

/* ---- MatMul ---------------------------------------------------------------------------- */

/* Batch strides of operand t (rank r >= 2) against the broadcast batch dims. */
static void mm_strides(const ak__mm_plan *pl, const ak__tensor *t, uint64_t *st) {
    int tb = t->rank >= 2 ? t->rank - 2 : 0;
    uint64_t stride = 1;
    for (int i = pl->nb - 1; i >= 0; i--) {
        int ti = i - (pl->nb - tb);
        if (ti < 0 || t->dims[ti] == 1) {
            st[i] = 0;
            continue;
        }
        st[i] = stride;
        stride *= (uint64_t)t->dims[ti];
    }
}

ak_status ak__mm_plan_make(ak__op_ctx *ctx, const ak__tensor *A, const ak__tensor *B,
                           ak__mm_plan *pl) {
    memset(pl, 0, sizeof *pl);
    if (A->rank < 1 || B->rank < 1)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "operands must have rank >= 1");
    pl->M = A->rank >= 2 ? (uint64_t)A->dims[A->rank - 2] : 1;
    pl->K = (uint64_t)A->dims[A->rank - 1];
    uint64_t kb = (uint64_t)B->dims[B->rank >= 2 ? B->rank - 2 : 0];
    pl->N = B->rank >= 2 ? (uint64_t)B->dims[B->rank - 1] : 1;
    if (kb != pl->K)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                          "inner dimensions differ (%llu and %llu)", (unsigned long long)pl->K,
                          (unsigned long long)kb);
    int ba = A->rank > 2 ? A->rank - 2 : 0, bb = B->rank > 2 ? B->rank - 2 : 0;
    pl->nb = ba > bb ? ba : bb;
    pl->batch = 1;
    for (int i = 0; i < pl->nb; i++) {
        int ia = i - (pl->nb - ba), ib = i - (pl->nb - bb);
        int64_t da = ia >= 0 ? A->dims[ia] : 1, db = ib >= 0 ? B->dims[ib] : 1;
        if (da != db && da != 1 && db != 1)
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                              "batch dims %lld and %lld do not broadcast", (long long)da,
                              (long long)db);
        pl->bd[i] = da == 1 ? db : da;
        pl->batch *= (uint64_t)pl->bd[i];
    }
    mm_strides(pl, A, pl->sa);
    mm_strides(pl, B, pl->sb);
    pl->rank = 0;
    for (int i = 0; i < pl->nb; i++) pl->out[pl->rank++] = pl->bd[i];
    if (A->rank >= 2) pl->out[pl->rank++] = (int64_t)pl->M;
    if (B->rank >= 2) pl->out[pl->rank++] = (int64_t)pl->N;
    uint64_t acount = 1;
    pl->b_shared = 1;
    for (int i = 0; i < pl->nb; i++) {
        if (pl->sb[i]) pl->b_shared = 0;
        if (pl->sa[i]) acount *= (uint64_t)pl->bd[i];
    }
    pl->fold = pl->b_shared && acount == pl->batch;
    return AK_OK;
}

void ak__mm_offsets(const ak__mm_plan *pl, uint64_t t, uint64_t *ao, uint64_t *bo) {
    *ao = *bo = 0;
    for (int i = pl->nb - 1; i >= 0; i--) {
        uint64_t idx = t % (uint64_t)pl->bd[i];
        t /= (uint64_t)pl->bd[i];
        *ao += idx * pl->sa[i];
        *bo += idx * pl->sb[i];
    }
}

static ak_status matmul_reshape(ak__op_ctx *ctx) {
    const ak__tensor *A, *B;
    AK_CHECK(ak__op_require(ctx, 0, &A));
    AK_CHECK(ak__op_require(ctx, 1, &B));
    AK_CHECK(numeric_type(ctx, 0, A));
    AK_CHECK(ak__op_check_type(ctx, 1, B, A->type));
    ak__mm_plan pl;
    AK_CHECK(ak__mm_plan_make(ctx, A, B, &pl));
    return ak__op_set_output(ctx, 0, A->type, pl.rank, pl.out);
}

typedef struct mm_job {
    const ak__mm_plan *pl;
    const ak__tensor *A, *B;
    ak__tensor *Y;
    ak_threadpool *pool;
} mm_job;

static void mm_f32_task(void *vj, size_t begin, size_t end, int tid) {
    (void)tid;
    const mm_job *j = vj;
    const ak__mm_plan *pl = j->pl;
    for (size_t t = begin; t < end; t++) {
        uint64_t ao, bo;
        ak__mm_offsets(pl, t, &ao, &bo);
        (void)ak_sgemm(AK_NO_TRANS, AK_NO_TRANS, (size_t)pl->M, (size_t)pl->N, (size_t)pl->K,
                       1.0f, (const float *)j->A->data + ao * pl->M * pl->K, (size_t)pl->K,
                       (const float *)j->B->data + bo * pl->K * pl->N, (size_t)pl->N, 0.0f,
                       (float *)j->Y->data + t * pl->M * pl->N, (size_t)pl->N, j->pool);
    }
}

/* Reference product of one batch for non-float32 types. */
static void mm_reference_batch(const mm_job *j, uint64_t t) {
    const ak__mm_plan *pl = j->pl;
    const ak__tensor *A = j->A, *B = j->B;
    uint64_t ao, bo;
    ak__mm_offsets(pl, t, &ao, &bo);
    ao *= pl->M * pl->K;
    bo *= pl->K * pl->N;
    int integer = is_int_type(A->type);
    for (uint64_t i = 0; i < pl->M; i++) {
        for (uint64_t n = 0; n < pl->N; n++) {
            uint64_t yi = t * pl->M * pl->N + i * pl->N + n;
            if (integer) {
                int64_t acc = 0;
                for (uint64_t k = 0; k < pl->K; k++)
                    acc += get_i64(A->data, A->type, ao + i * pl->K + k) *
                           get_i64(B->data, B->type, bo + k * pl->N + n);
                set_i64(j->Y->data, j->Y->type, yi, acc);
            } else {
                double acc = 0.0;
                for (uint64_t k = 0; k < pl->K; k++)
                    acc += ak__elem_get(A->data, A->type, ao + i * pl->K + k) *
                           ak__elem_get(B->data, B->type, bo + k * pl->N + n);
                ak__elem_set(j->Y->data, j->Y->type, yi, acc);
            }
        }
    }
}

static void mm_reference_task(void *vj, size_t begin, size_t end, int tid) {
    (void)tid;
    for (size_t t = begin; t < end; t++) mm_reference_batch(vj, t);
}

static ak_status matmul_run(ak__op_ctx *ctx) {
    const ak__tensor *A = ctx->inputs[0], *B = ctx->inputs[1];
    ak__mm_plan pl;
    AK_CHECK(ak__mm_plan_make(ctx, A, B, &pl));
    mm_job j = {&pl, A, B, ak__op_out(ctx, 0), ctx->pool};
    if (!j.Y || j.Y->count == 0) return AK_OK;
    if (pl.K == 0) {
        memset(j.Y->data, 0, ak__tensor_nbytes(j.Y));
        return AK_OK;
    }
    if (A->type != AK_ELEM_F32)
        return ak_threadpool_parallel_for(ctx->pool, (size_t)pl.batch, 1, mm_reference_task, &j);
    if (pl.fold || pl.batch == 1)
        return ak_sgemm(AK_NO_TRANS, AK_NO_TRANS, (size_t)(pl.batch * pl.M), (size_t)pl.N,
                        (size_t)pl.K, 1.0f, A->data, (size_t)pl.K, B->data, (size_t)pl.N, 0.0f,
                        j.Y->data, (size_t)pl.N, ctx->pool);
    if (pl.M * pl.N * pl.K < SMALL_PRODUCT_MACS) /* serial GEMMs, batches across threads */
        return ak_threadpool_parallel_for(ctx->pool, (size_t)pl.batch, 1, mm_f32_task, &j);
    mm_f32_task(&j, 0, (size_t)pl.batch, 0); /* each GEMM uses the pool */
    return AK_OK;
}

const ak__op_def ak__nn_gemm = {"", "Gemm", 1, 0, NULL, NULL, gemm_reshape, gemm_run};
const ak__op_def ak__nn_matmul = {"", "MatMul", 1, 0, NULL, NULL, matmul_reshape, matmul_run};
