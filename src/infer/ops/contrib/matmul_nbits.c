/* com.microsoft MatMulNBits: Y = A @ dequant(B)ᵀ (+ bias), B an (N, K) weight quantized
 * blockwise along K (Olive's and onnxruntime's 4-bit LLM export).
 *
 *   A            float32, float16 or bfloat16 (..., K) (T1; Y, scales, float zero
 *                points and bias have the same type; float16/bfloat16 are widened to
 *                float32, computed in float32 and rounded once at the end)
 *   B            uint8 (N, k_blocks, blob_bytes): block b of row n holds values
 *                k = b·block_size + j, packed `bits` to a byte-run, low bits first
 *   scales       T1 (N, k_blocks) (or flattened)
 *   zero_points  optional: uint8 packed like B, (N, ceil(k_blocks·bits/8)); or T1
 *                (N, k_blocks); absent: 2^(bits-1)
 *   bias         optional T1 (N)
 *   dequant(B)[n][k] = (q - zero_point) · scale
 *
 * A constant weight of at most PREDEQUANT_MAX_BYTES as float32 is dequantized once at
 * session creation and runs the kit's float32 kernels directly. A larger one (an LLM's
 * layers), or one fed at run time, stays packed (its memory is B's) and each run
 * dequantizes tiles of TILE_BYTES of rows into the workspace, on the pool, each tile
 * then multiplied while it is in cache. The products are ak_linear (up to
 * LINEAR_MAX_ROWS rows of A: one pass over the weight rows) or ak_sgemm.
 *
 * accuracy_level is ignored: the spec defines it as the *minimum* accuracy allowed for A
 * (a permission to quantize A to int8 or downcast it internally), and float32 throughout
 * meets every level. Refused by name: bits other than 2, 4, 8; weight_prepacked; the
 * deprecated g_idx input; A of another type (float64 is not in the spec). */
#include <stdlib.h>
#include <string.h>

#include "accelkit/kernels.h"
#include "infer/ops/contrib/contrib.h"
#include "infer/ops/elementwise/elementwise.h"

enum { IN_A, IN_B, IN_SCALES, IN_ZP, IN_GIDX, IN_BIAS };

/* Up to this many rows of A, the product runs as ak_linear instead of ak_sgemm. */
#define LINEAR_MAX_ROWS 4
/* A constant weight up to this size as float32 is dequantized at creation (BERT-sized
 * layers); above, it stays packed and is dequantized tile by tile on each run. */
#define PREDEQUANT_MAX_BYTES ((size_t)16 << 20)
/* Largest K, N and block_size accepted. */
#define DIM_MAX ((int64_t)1 << 30)
/* float32 bytes of one dequantized tile of weight rows (about an L2's worth). */
#define TILE_BYTES ((size_t)512 << 10)

typedef struct nbits_state {
    ak__nbits_layout l;
    float *W; /* (N, K) dequantized weight, or NULL when B is not constant */
} nbits_state;

/* ---- the dequantization (scalar reference; it runs once per constant weight) ------ */

/* Value idx of a run of `bits`-wide values packed low bits first (bits 2, 4 or 8 never
 * straddle a byte). */
static unsigned packed_value(const uint8_t *run, int64_t idx, int64_t bits) {
    uint64_t bit = (uint64_t)idx * (uint64_t)bits;
    return (unsigned)(run[bit / 8] >> (bit % 8)) & ((1u << bits) - 1u);
}

void ak__nbits_dequantize(const ak__nbits_layout *l, const uint8_t *B, const float *scales,
                          const uint8_t *zp_packed, const float *zp_float, int64_t n0,
                          int64_t n1, float *W) {
    float zp_default = (float)(1 << (l->bits - 1));
    for (int64_t n = n0; n < n1; n++)
        for (int64_t b = 0; b < l->k_blocks; b++) {
            int64_t blk = n * l->k_blocks + b;
            const uint8_t *blob = B + blk * l->blob_bytes;
            float scale = scales[blk];
            float zp = zp_packed  ? (float)packed_value(zp_packed + n * l->zp_row_bytes, b, l->bits)
                       : zp_float ? zp_float[blk]
                                  : zp_default;
            int64_t k0 = b * l->block_size;
            int64_t len = l->K - k0 < l->block_size ? l->K - k0 : l->block_size;
            float *w = W + (n - n0) * l->K + k0;
            for (int64_t j = 0; j < len; j++)
                w[j] = ((float)packed_value(blob, j, l->bits) - zp) * scale;
        }
}

/* ---- attributes and input shapes ---------------------------------------------------- */

/* Whether the node names input i. A node without value indices (the operator tests
 * build such nodes) names none for sure: run checks the inputs it gets. */
static int input_present(const ak__ir_node *n, uint32_t i) {
    return i < n->num_inputs && n->inputs && n->inputs[i] != AK_IR_NONE;
}

static ak_status layout_make(const ak__ir_node *n, ak__nbits_layout *l) {
    if (!ak__attr_has(n, "K") || !ak__attr_has(n, "N") || !ak__attr_has(n, "block_size"))
        return AK_OP_FAIL(n, AK_ERR_INVALID_MODEL, "attributes K, N and block_size are required");
    l->K = ak__attr_int(n, "K", 0);
    l->N = ak__attr_int(n, "N", 0);
    l->bits = ak__attr_int(n, "bits", 4);
    l->block_size = ak__attr_int(n, "block_size", 0);
    if (l->bits != 2 && l->bits != 4 && l->bits != 8)
        return AK_OP_FAIL(n, AK_ERR_UNSUPPORTED, "bits=%lld is not implemented (2, 4 or 8)",
                          (long long)l->bits);
    if (l->block_size < 16 || (l->block_size & (l->block_size - 1)))
        return AK_OP_FAIL(n, AK_ERR_INVALID_MODEL,
                          "block_size=%lld (a power of 2, at least 16, expected)",
                          (long long)l->block_size);
    /* bounds that keep every size product below 2^63 (N·K·4 < 2^62 + ...) */
    if (l->K <= 0 || l->N <= 0 || l->K > DIM_MAX || l->N > DIM_MAX || l->block_size > DIM_MAX)
        return AK_OP_FAIL(n, AK_ERR_INVALID_MODEL,
                          "K=%lld, N=%lld and block_size=%lld must be positive and at most 2^30",
                          (long long)l->K, (long long)l->N, (long long)l->block_size);
    if (ak__attr_int(n, "weight_prepacked", 0) != 0)
        return AK_OP_FAIL(n, AK_ERR_UNSUPPORTED,
                          "weight_prepacked=%lld (an execution provider's layout) is not implemented",
                          (long long)ak__attr_int(n, "weight_prepacked", 0));
    if (input_present(n, IN_GIDX))
        return AK_OP_FAIL(n, AK_ERR_UNSUPPORTED,
                          "input 4 (g_idx, deprecated by the spec) is not implemented");
    l->k_blocks = (l->K + l->block_size - 1) / l->block_size;
    l->blob_bytes = l->block_size * l->bits / 8;
    l->zp_row_bytes = (l->k_blocks * l->bits + 7) / 8;
    return AK_OK;
}

static int float_type(ak_elem_type t) {
    return t == AK_ELEM_F32 || t == AK_ELEM_F16 || t == AK_ELEM_BF16;
}

/* Checks B, scales, zero points and bias against the layout; t: A's type (T1), which
 * the scales, float zero points and bias share. */
static ak_status weights_check(const ak__ir_node *n, const ak__nbits_layout *l, ak_elem_type t,
                               const ak__tensor *B, const ak__tensor *scales,
                               const ak__tensor *zp, const ak__tensor *bias) {
    const char *tn = ak_elem_type_name(t);
    if (B->type != AK_ELEM_U8 || B->count != (uint64_t)(l->N * l->k_blocks * l->blob_bytes))
        return AK_OP_FAIL(n, AK_ERR_INVALID_MODEL,
                          "input 1 (B) must be uint8 (N %lld, k_blocks %lld, blob %lld), it is "
                          "%s with %llu values",
                          (long long)l->N, (long long)l->k_blocks, (long long)l->blob_bytes,
                          ak_elem_type_name(B->type), (unsigned long long)B->count);
    if (scales->type != t || scales->count != (uint64_t)(l->N * l->k_blocks))
        return AK_OP_FAIL(n, AK_ERR_INVALID_MODEL,
                          "input 2 (scales) must be %s (N %lld, k_blocks %lld)", tn,
                          (long long)l->N, (long long)l->k_blocks);
    if (zp && zp->type == AK_ELEM_U8) {
        if (zp->count != (uint64_t)(l->N * l->zp_row_bytes))
            return AK_OP_FAIL(n, AK_ERR_INVALID_MODEL,
                              "input 3 (packed zero_points) must have N %lld x %lld bytes",
                              (long long)l->N, (long long)l->zp_row_bytes);
    } else if (zp && zp->type == t) {
        if (zp->count != (uint64_t)(l->N * l->k_blocks))
            return AK_OP_FAIL(n, AK_ERR_INVALID_MODEL,
                              "input 3 (zero_points) must be (N %lld, k_blocks %lld)",
                              (long long)l->N, (long long)l->k_blocks);
    } else if (zp) {
        return AK_OP_FAIL(n, AK_ERR_UNSUPPORTED,
                          "input 3 (zero_points) of type %s is not implemented (uint8 or %s)",
                          ak_elem_type_name(zp->type), tn);
    }
    if (bias && (bias->type != t || bias->count != (uint64_t)l->N))
        return AK_OP_FAIL(n, AK_ERR_INVALID_MODEL, "input 5 (bias) must be %s (N %lld)", tn,
                          (long long)l->N);
    return AK_OK;
}

/* The float inputs as float32: the tensor's own values, or `dst` filled from a float16
 * or bfloat16 tensor. */
static const float *as_f32(const ak__tensor *t, float *dst) {
    if (t->type == AK_ELEM_F32) return t->data;
    ew_half_to_f32(dst, t->data, (size_t)t->count, t->type);
    return dst;
}

/* Rows [n0, n0 + rows) of the weight, dequantized on the pool into W (rows, K). */
typedef struct deq_job {
    const ak__nbits_layout *l;
    const uint8_t *B, *zp_packed;
    const float *scales, *zp_float; /* float32 (N, k_blocks) */
    int64_t n0;
    float *W;
} deq_job;

static void deq_task(void *vj, size_t begin, size_t end, int tid) {
    (void)tid;
    const deq_job *j = vj;
    ak__nbits_dequantize(j->l, j->B, j->scales, j->zp_packed, j->zp_float,
                         j->n0 + (int64_t)begin, j->n0 + (int64_t)end,
                         j->W + (int64_t)begin * j->l->K);
}

static ak_status dequantize_rows(const deq_job *proto, int64_t n0, int64_t rows, float *W,
                                 ak_threadpool *pool) {
    deq_job j = *proto;
    j.n0 = n0;
    j.W = W;
    if (!pool) {
        deq_task(&j, 0, (size_t)rows, 0);
        return AK_OK;
    }
    return ak_threadpool_parallel_for(pool, (size_t)rows, 4, deq_task, &j);
}

/* Weight rows per dequantized tile. */
static int64_t tile_rows(const ak__nbits_layout *l) {
    int64_t rows = (int64_t)(TILE_BYTES / ((size_t)l->K * sizeof(float)));
    rows = rows < 16 ? 16 : rows / 16 * 16;
    return rows < l->N ? rows : l->N;
}

/* ---- operator steps ----------------------------------------------------------------- */

static void nbits_destroy(void *state) {
    nbits_state *s = state;
    if (s) free(s->W);
    free(s);
}

static ak_status nbits_create(const ak__ir_node *node, const ak__tensor *const *consts,
                              void **state) {
    *state = NULL;
    ak__nbits_layout l;
    AK_CHECK(layout_make(node, &l));
    if (node->num_inputs <= IN_SCALES)
        return AK_OP_FAIL(node, AK_ERR_INVALID_MODEL, "inputs 1 (B) and 2 (scales) are required");
    const ak__tensor *B = consts[IN_B], *scales = consts[IN_SCALES];
    const ak__tensor *zp = node->num_inputs > IN_ZP ? consts[IN_ZP] : NULL;
    int constant = B && scales && (zp || !input_present(node, IN_ZP));
    if (constant) {
        if (!float_type(scales->type))
            return AK_OP_FAIL(node, AK_ERR_UNSUPPORTED,
                              "input 2 (scales) of type %s is not implemented",
                              ak_elem_type_name(scales->type));
        AK_CHECK(weights_check(node, &l, scales->type, B, scales, zp, NULL));
    }
    if ((uint64_t)l.N * (uint64_t)l.K > PREDEQUANT_MAX_BYTES / sizeof(float)) constant = 0;
    nbits_state *s = calloc(1, sizeof *s);
    if (!s) return AK_ERR_NO_MEMORY;
    s->l = l;
    if (!constant) { /* dequantized tile by tile on each run */
        *state = s;
        return AK_OK;
    }
    /* dequantized once here, from float32 scales and zero points */
    size_t bytes = ((size_t)l.N * (size_t)l.K * sizeof(float) + 63) / 64 * 64;
    size_t nkb = (size_t)(l.N * l.k_blocks);
    int zp_float = zp && zp->type != AK_ELEM_U8;
    float *tmp = scales->type == AK_ELEM_F32 ? NULL : malloc(nkb * 2 * sizeof(float));
    if (!(s->W = aligned_alloc(64, bytes)) || (scales->type != AK_ELEM_F32 && !tmp)) {
        free(tmp);
        nbits_destroy(s);
        return AK_ERR_NO_MEMORY;
    }
    deq_job j = {&l, B->data, zp && !zp_float ? zp->data : NULL, as_f32(scales, tmp),
                 zp_float ? as_f32(zp, tmp + nkb) : NULL, 0, NULL};
    (void)dequantize_rows(&j, 0, l.N, s->W, NULL); /* serial: cannot fail */
    free(tmp);
    *state = s;
    return AK_OK;
}

/* A, and the weights checked; *rows = A's rows of K. */
static ak_status inputs_check(const ak__op_ctx *ctx, uint64_t *rows) {
    const nbits_state *s = ctx->state;
    const ak__tensor *A, *B, *scales;
    AK_CHECK(ak__op_require(ctx, IN_A, &A));
    AK_CHECK(ak__op_require(ctx, IN_B, &B));
    AK_CHECK(ak__op_require(ctx, IN_SCALES, &scales));
    if (ak__op_in(ctx, IN_GIDX)) /* create refuses it too, where the node names it */
        return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED,
                          "input 4 (g_idx, deprecated by the spec) is not implemented");
    if (!float_type(A->type))
        return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED,
                          "input 0 (A) of type %s is not implemented "
                          "(float32, float16 or bfloat16)",
                          ak_elem_type_name(A->type));
    if (A->rank < 1 || A->dims[A->rank - 1] != s->l.K)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                          "input 0 (A) must end in K = %lld", (long long)s->l.K);
    AK_CHECK(weights_check(ctx->node, &s->l, A->type, B, scales, ak__op_in(ctx, IN_ZP),
                           ak__op_in(ctx, IN_BIAS)));
    *rows = A->count / (uint64_t)s->l.K;
    return AK_OK;
}

/* Workspace of a run (byte offsets, each 64-aligned): a dequantized tile unless the
 * weight was dequantized at creation; for float16/bfloat16, float32 copies of the scales
 * and float zero points (tiles only), of A, Y and the bias. */
typedef struct ws_plan {
    size_t tile, scales, zp, a, y, bias, total;
} ws_plan;

static size_t ws_take(ws_plan *w, size_t floats) {
    size_t at = w->total;
    w->total += (floats * sizeof(float) + 63) / 64 * 64;
    return at;
}

static ws_plan ws_make(const ak__op_ctx *ctx, uint64_t T) {
    const nbits_state *s = ctx->state;
    const ak__tensor *zp = ak__op_in(ctx, IN_ZP), *bias = ak__op_in(ctx, IN_BIAS);
    int half = ctx->inputs[IN_A]->type != AK_ELEM_F32;
    size_t nkb = (size_t)(s->l.N * s->l.k_blocks);
    ws_plan w = {0};
    if (!s->W) {
        w.tile = ws_take(&w, (size_t)tile_rows(&s->l) * (size_t)s->l.K);
        if (half) w.scales = ws_take(&w, nkb);
        if (half && zp && zp->type != AK_ELEM_U8) w.zp = ws_take(&w, nkb);
    }
    if (half) {
        w.a = ws_take(&w, (size_t)(T * (uint64_t)s->l.K));
        w.y = ws_take(&w, (size_t)(T * (uint64_t)s->l.N));
        if (bias) w.bias = ws_take(&w, (size_t)s->l.N);
    }
    return w;
}

static ak_status nbits_reshape(ak__op_ctx *ctx) {
    const nbits_state *s = ctx->state;
    uint64_t rows;
    AK_CHECK(inputs_check(ctx, &rows));
    const ak__tensor *A = ctx->inputs[IN_A];
    int64_t dims[AK_IR_MAX_RANK];
    memcpy(dims, A->dims, sizeof(int64_t) * (size_t)A->rank);
    dims[A->rank - 1] = s->l.N; /* Y (..., N) */
    ctx->workspace_bytes = ws_make(ctx, rows).total;
    return ak__op_set_output(ctx, 0, A->type, A->rank, dims);
}

/* y (T, ldy) [columns of rows n0..n0+tn) = A (T, K) @ W (tn, K)ᵀ */
static ak_status product(const float *A, size_t T, size_t K, const float *W, size_t tn,
                         float *y, size_t ldy, ak_threadpool *pool) {
    if (T <= LINEAR_MAX_ROWS)
        return ak_linear(AK_WTYPE_F32, W, tn, K, A, K, T, y, ldy, 0, pool);
    return ak_sgemm(AK_NO_TRANS, AK_TRANS, T, tn, K, 1.0f, A, K, W, K, 0.0f, y, ldy, pool);
}

static ak_status nbits_run(ak__op_ctx *ctx) {
    const nbits_state *s = ctx->state;
    uint64_t rows;
    AK_CHECK(inputs_check(ctx, &rows));
    ak__tensor *Y = ak__op_out(ctx, 0);
    if (!Y || Y->count == 0) return AK_OK;
    ws_plan w = ws_make(ctx, rows);
    char *ws = ctx->workspace;
    int half = Y->type != AK_ELEM_F32;
    size_t N = (size_t)s->l.N, K = (size_t)s->l.K, T = (size_t)rows;
    const float *A = as_f32(ctx->inputs[IN_A], (float *)(ws + w.a)); /* A (T, K) */
    float *y = half ? (float *)(ws + w.y) : Y->data;                  /* Y (T, N) */
    if (s->W) {
        AK_CHECK(product(A, T, K, s->W, N, y, N, ctx->pool));
    } else { /* tiles of weight rows, each dequantized then multiplied */
        const ak__tensor *zp = ak__op_in(ctx, IN_ZP);
        int zp_float = zp && zp->type != AK_ELEM_U8;
        deq_job proto = {&s->l, ctx->inputs[IN_B]->data, zp && !zp_float ? zp->data : NULL,
                         as_f32(ctx->inputs[IN_SCALES], (float *)(ws + w.scales)),
                         zp_float ? as_f32(zp, (float *)(ws + w.zp)) : NULL, 0, NULL};
        float *tile = (float *)(ws + w.tile);
        int64_t rows_per_tile = tile_rows(&s->l);
        for (int64_t n0 = 0; n0 < s->l.N; n0 += rows_per_tile) {
            int64_t tn = s->l.N - n0 < rows_per_tile ? s->l.N - n0 : rows_per_tile;
            AK_CHECK(dequantize_rows(&proto, n0, tn, tile, ctx->pool));
            AK_CHECK(product(A, T, K, tile, (size_t)tn, y + n0, N, ctx->pool));
        }
    }
    const ak__tensor *bias = ak__op_in(ctx, IN_BIAS);
    if (bias) {
        const float *b = as_f32(bias, (float *)(ws + w.bias));
        for (size_t t = 0; t < T; t++)
            ew_f32_binary(AK_EW_F32_ADD, y + t * N, y + t * N, b, N, 1, 1);
    }
    if (half) ew_f32_to_half(Y->data, y, T * N, Y->type);
    return AK_OK;
}

const ak__op_def ak__contrib_matmul_nbits = {"com.microsoft", "MatMulNBits", 1, 0, nbits_create,
                                             nbits_destroy, nbits_reshape, nbits_run};
