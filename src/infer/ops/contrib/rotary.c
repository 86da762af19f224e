/* com.microsoft RotaryEmbedding (RoPE): rotates the first rotary_embedding_dim values of
 * every head of query or key by the angle of its position, the rest pass unchanged.
 *
 *   input      (batch, seq, num_heads·head_size) or (batch, num_heads, seq, head_size)
 *   position_ids  int64 (batch, seq) positions, or (1): an offset, position = offset + s
 *   cos_cache, sin_cache  (max_seq, rotary_embedding_dim / 2)
 *
 * With half = rotary_embedding_dim / 2, c = cos_cache[pos][i], s = sin_cache[pos][i]:
 *   interleaved = 0 (halves):  x[i], x[i+half]  ->  x[i]·c - x[i+half]·s, x[i+half]·c + x[i]·s
 *   interleaved = 1 (pairs):   x[2i], x[2i+1]   ->  x[2i]·c - x[2i+1]·s,  x[2i+1]·c + x[2i]·s
 * For a 3-D input, num_heads = 0 takes head_size = rotary_embedding_dim = 2·cache width;
 * a rotary_embedding_dim below head_size needs num_heads (the spec's rule). scale other than
 * 1 and is_packed_batching are refused by name. float32 computes in float, float16 and
 * bfloat16 through double per value. */
#include <math.h>
#include <string.h>

#include "infer/ops/contrib/contrib.h"

typedef struct rope_plan {
    int64_t batch, seq, num_heads, head_size, rot_dim, max_seq;
    int bnsh;        /* input laid out (batch, num_heads, seq, head_size) */
    int interleaved;
    int offset_form; /* position_ids is (1): an offset */
} rope_plan;

static ak_status rope_create(const ak__ir_node *node, const ak__tensor *const *consts,
                             void **state) {
    (void)consts;
    *state = NULL;
    if (ak__attr_int(node, "is_packed_batching", 0) != 0)
        return AK_OP_FAIL(node, AK_ERR_UNSUPPORTED, "is_packed_batching=%lld is not implemented",
                          (long long)ak__attr_int(node, "is_packed_batching", 0));
    float scale = ak__attr_float(node, "scale", 1.0f);
    if (scale != 1.0f)
        return AK_OP_FAIL(node, AK_ERR_UNSUPPORTED, "scale=%g is not implemented (only 1)",
                          (double)scale);
    int64_t interleaved = ak__attr_int(node, "interleaved", 0);
    if (interleaved != 0 && interleaved != 1)
        return AK_OP_FAIL(node, AK_ERR_INVALID_MODEL, "interleaved=%lld (0 or 1 expected)",
                          (long long)interleaved);
    if (ak__attr_int(node, "num_heads", 0) < 0 || ak__attr_int(node, "rotary_embedding_dim", 0) < 0)
        return AK_OP_FAIL(node, AK_ERR_INVALID_MODEL,
                          "num_heads and rotary_embedding_dim must not be negative");
    return AK_OK;
}

/* Shapes of the four inputs against each other (the spec's rules). */
static ak_status plan_make(const ak__op_ctx *ctx, rope_plan *pl) {
    const ak__ir_node *n = ctx->node;
    const ak__tensor *x, *pos, *cosc, *sinc;
    AK_CHECK(ak__op_require(ctx, 0, &x));
    AK_CHECK(ak__op_require(ctx, 1, &pos));
    AK_CHECK(ak__op_require(ctx, 2, &cosc));
    AK_CHECK(ak__op_require(ctx, 3, &sinc));
    if (x->type != AK_ELEM_F32 && x->type != AK_ELEM_F16 && x->type != AK_ELEM_BF16)
        return AK_OP_FAIL(n, AK_ERR_UNSUPPORTED,
                          "input 0 has type %s (float32, float16 or bfloat16 expected)",
                          ak_elem_type_name(x->type));
    AK_CHECK(ak__op_check_type(ctx, 1, pos, AK_ELEM_I64));
    AK_CHECK(ak__op_check_type(ctx, 2, cosc, x->type));
    AK_CHECK(ak__op_check_type(ctx, 3, sinc, x->type));
    if (cosc->rank != 2 || sinc->rank != 2 || cosc->dims[0] != sinc->dims[0] ||
        cosc->dims[1] != sinc->dims[1])
        return AK_OP_FAIL(n, AK_ERR_INVALID_MODEL,
                          "cos_cache and sin_cache must both be (max_sequence_length, dim / 2)");
    int64_t attr_heads = ak__attr_int(n, "num_heads", 0);
    int64_t attr_rot = ak__attr_int(n, "rotary_embedding_dim", 0);
    pl->interleaved = ak__attr_int(n, "interleaved", 0) != 0;
    pl->max_seq = cosc->dims[0];
    pl->batch = x->rank >= 1 ? x->dims[0] : 0;
    if (x->rank == 4) {
        pl->bnsh = 1;
        pl->num_heads = x->dims[1];
        pl->seq = x->dims[2];
        pl->head_size = x->dims[3];
        if (attr_heads && attr_heads != pl->num_heads)
            return AK_OP_FAIL(n, AK_ERR_INVALID_MODEL, "num_heads=%lld but the input has %lld heads",
                              (long long)attr_heads, (long long)pl->num_heads);
    } else if (x->rank == 3) {
        pl->bnsh = 0;
        pl->seq = x->dims[1];
        int64_t hidden = x->dims[2];
        if (attr_rot > 0 && attr_heads == 0)
            return AK_OP_FAIL(n, AK_ERR_INVALID_MODEL,
                              "rotary_embedding_dim needs num_heads for a 3-D input");
        if (attr_heads && hidden % attr_heads != 0)
            return AK_OP_FAIL(n, AK_ERR_INVALID_MODEL,
                              "hidden size %lld is not a multiple of num_heads=%lld",
                              (long long)hidden, (long long)attr_heads);
        pl->head_size = attr_heads ? hidden / attr_heads : cosc->dims[1] * 2;
        if (pl->head_size <= 0 || hidden % pl->head_size != 0)
            return AK_OP_FAIL(n, AK_ERR_INVALID_MODEL,
                              "hidden size %lld is not a whole number of heads of %lld",
                              (long long)hidden, (long long)pl->head_size);
        pl->num_heads = hidden / pl->head_size;
    } else {
        return AK_OP_FAIL(n, AK_ERR_INVALID_MODEL, "input has rank %d (3 or 4 expected)", x->rank);
    }
    pl->rot_dim = attr_rot > 0 ? attr_rot : pl->head_size;
    if (pl->rot_dim > pl->head_size || pl->rot_dim % 2 != 0 || cosc->dims[1] * 2 != pl->rot_dim)
        return AK_OP_FAIL(n, AK_ERR_INVALID_MODEL,
                          "rotary dim %lld does not fit head size %lld and cache width %lld",
                          (long long)pl->rot_dim, (long long)pl->head_size,
                          (long long)cosc->dims[1]);
    if (pos->count == 1 && pos->rank <= 1) {
        pl->offset_form = 1;
    } else if (pos->rank == 2 && pos->dims[0] == pl->batch && pos->dims[1] == pl->seq) {
        pl->offset_form = 0;
    } else {
        return AK_OP_FAIL(n, AK_ERR_INVALID_MODEL,
                          "position_ids must be (1) or (batch %lld, sequence %lld)",
                          (long long)pl->batch, (long long)pl->seq);
    }
    return AK_OK;
}

static int64_t position_of(const rope_plan *pl, const int64_t *pos, int64_t b, int64_t s) {
    return pl->offset_form ? pos[0] + s : pos[b * pl->seq + s];
}

typedef struct rope_job {
    const rope_plan *pl;
    ak_elem_type type;
    const void *x, *cosc, *sinc;
    const int64_t *pos;
    void *y;
} rope_job;

/* Offset in values of head h of token (b, s). */
static uint64_t head_offset(const rope_plan *pl, int64_t b, int64_t s, int64_t h) {
    int64_t row = pl->bnsh ? (b * pl->num_heads + h) * pl->seq + s
                           : (b * pl->seq + s) * pl->num_heads + h;
    return (uint64_t)row * (uint64_t)pl->head_size;
}

/* Indices of the i-th rotated pair within a head. */
static void pair_of(const rope_plan *pl, int64_t i, int64_t *i0, int64_t *i1) {
    int64_t half = pl->rot_dim / 2;
    *i0 = pl->interleaved ? 2 * i : i;
    *i1 = pl->interleaved ? 2 * i + 1 : i + half;
}

static void rope_head_f32(const rope_job *j, uint64_t off, int64_t p) {
    const rope_plan *pl = j->pl;
    int64_t half = pl->rot_dim / 2;
    const float *x = (const float *)j->x + off;
    float *y = (float *)j->y + off;
    const float *c = (const float *)j->cosc + p * half, *s = (const float *)j->sinc + p * half;
    for (int64_t i = 0; i < half; i++) {
        int64_t a, b;
        pair_of(pl, i, &a, &b);
        float xa = x[a], xb = x[b];
        y[a] = xa * c[i] - xb * s[i];
        y[b] = xb * c[i] + xa * s[i];
    }
    for (int64_t i = pl->rot_dim; i < pl->head_size; i++) y[i] = x[i];
}

static void rope_head_generic(const rope_job *j, uint64_t off, int64_t p) {
    const rope_plan *pl = j->pl;
    int64_t half = pl->rot_dim / 2;
    for (int64_t i = 0; i < half; i++) {
        int64_t a, b;
        pair_of(pl, i, &a, &b);
        double xa = ak__elem_get(j->x, j->type, off + (uint64_t)a);
        double xb = ak__elem_get(j->x, j->type, off + (uint64_t)b);
        double c = ak__elem_get(j->cosc, j->type, (uint64_t)(p * half + i));
        double s = ak__elem_get(j->sinc, j->type, (uint64_t)(p * half + i));
        ak__elem_set(j->y, j->type, off + (uint64_t)a, xa * c - xb * s);
        ak__elem_set(j->y, j->type, off + (uint64_t)b, xb * c + xa * s);
    }
    size_t es = ak_elem_type_size(j->type);
    memcpy((char *)j->y + (off + (uint64_t)pl->rot_dim) * es,
           (const char *)j->x + (off + (uint64_t)pl->rot_dim) * es,
           (size_t)(pl->head_size - pl->rot_dim) * es);
}

/* Rows are (b, s, h) triples in that order. */
static void rope_task(void *vj, size_t begin, size_t end, int tid) {
    (void)tid;
    const rope_job *j = vj;
    const rope_plan *pl = j->pl;
    for (size_t r = begin; r < end; r++) {
        int64_t h = (int64_t)r % pl->num_heads, t = (int64_t)r / pl->num_heads;
        int64_t s = t % pl->seq, b = t / pl->seq;
        int64_t p = position_of(pl, j->pos, b, s);
        uint64_t off = head_offset(pl, b, s, h);
        if (j->type == AK_ELEM_F32) rope_head_f32(j, off, p);
        else rope_head_generic(j, off, p);
    }
}

static ak_status rope_reshape(ak__op_ctx *ctx) {
    rope_plan pl;
    AK_CHECK(plan_make(ctx, &pl));
    return ak__op_set_output_like(ctx, 0, ctx->inputs[0]);
}

static ak_status rope_run(ak__op_ctx *ctx) {
    rope_plan pl;
    AK_CHECK(plan_make(ctx, &pl));
    ak__tensor *Y = ak__op_out(ctx, 0);
    if (!Y || Y->count == 0) return AK_OK;
    const int64_t *pos = ctx->inputs[1]->data;
    for (int64_t b = 0; b < pl.batch; b++) /* every position inside the caches */
        for (int64_t s = 0; s < pl.seq; s++) {
            int64_t p = position_of(&pl, pos, b, s);
            if (p < 0 || p >= pl.max_seq)
                return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_ARG,
                                  "position_ids gives position %lld for batch %lld, token %lld: "
                                  "outside the caches' %lld rows",
                                  (long long)p, (long long)b, (long long)s, (long long)pl.max_seq);
            if (pl.offset_form && b > 0) break;
        }
    rope_job j = {&pl, Y->type, ctx->inputs[0]->data, ctx->inputs[2]->data,
                  ctx->inputs[3]->data, pos, Y->data};
    size_t rows = (size_t)(pl.batch * pl.seq * pl.num_heads);
    size_t grain = (size_t)(4096 / (pl.head_size ? pl.head_size : 1)) + 1;
    return ak_threadpool_parallel_for(ctx->pool, rows, grain, rope_task, &j);
}

const ak__op_def ak__contrib_rotary_embedding = {"com.microsoft", "RotaryEmbedding", 1, 0,
                                                 rope_create, NULL, rope_reshape, rope_run};
