/* The attention computation both operators share: for each batch b and head h,
 *   out[b,h] = softmax(scale·Q[b,h]·K[b,h]ᵀ + bias[b,h] + masked·mask_filter)·V[b,h]
 * with Q, K, V and out strided views (attention.h).
 *
 * where a key the key mask hides gets mask_filter added to its score and a key in the
 * future of a causal query gets the lowest float as its score (ONNX Runtime's rules).
 * The fast path splits the work into tasks of (batch, head, block of ATTN_ROWS query
 * rows) across the thread pool; each task computes its block of scores with one SGEMM
 * into the thread's scratch rows (started from the bias plus the key mask's mask_filter
 * terms), sets the causal future to the lowest float, normalizes the rows with
 * the Softmax operator's row kernel and multiplies by V with a second SGEMM straight
 * into the output. The SGEMMs run serially inside a task (the pool is busy with the
 * tasks). The reference does the same in plain loops, accumulating in double. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "accelkit/kernels.h"
#include "infer/ops/attention/attention.h"
#include "kernels/dispatch.h"

#define ATTN_ROWS 64 /* query rows per task: bounds the scratch at ATTN_ROWS·T per thread */

/* Whether causality hides key j from query row i: its score becomes the lowest float,
 * as ONNX Runtime does (so a key mask on top adds nothing). */
static int future(const ak__attn_problem *p, size_t i, size_t j) {
    return p->causal && j + p->S > i + p->T;
}

/* Whether the key mask hides key j from query row i of batch b, head h: mask_filter is
 * added to its score. */
static int masked(const ak__attn_problem *p, size_t b, size_t h, size_t i, size_t j) {
    const int32_t *m = p->mask;
    switch (p->mask_kind) {
    case AK_ATTN_MASK_NONE: return 0;
    case AK_ATTN_MASK_END: return (int64_t)j >= m[b];
    case AK_ATTN_MASK_END_START: return (int64_t)j >= m[b] || (int64_t)j < m[p->B + b];
    case AK_ATTN_MASK_KEYS: return m[b * p->T + j] == 0;
    case AK_ATTN_MASK_ROWS: return m[(b * p->S + i) * p->T + j] == 0;
    case AK_ATTN_MASK_SQUARE:
        return m[(b * p->mask_max + (p->T - p->S) + i) * p->mask_max + j] == 0;
    case AK_ATTN_MASK_BOOL: {
        const size_t *st = p->bool_stride;
        return (p->bool_mask[b * st[0] + h * st[1] + i * st[2] + j * st[3]] != 0) != p->bool_keep;
    }
    }
    return 0;
}

static const float *bias_row(const ak__attn_problem *p, size_t b, size_t h, size_t i) {
    return p->bias + b * p->bias_batch + h * p->bias_head + i * p->bias_row;
}

size_t ak__attn_workspace_bytes(const ak__attn_problem *p, int threads) {
    size_t rows = p->S < ATTN_ROWS ? p->S : ATTN_ROWS;
    return (size_t)(threads > 0 ? threads : 1) * rows * (p->T ? p->T : 1) * sizeof(float);
}

typedef struct attn_job {
    const ak__attn_problem *p;
    float *scratch;
    size_t blocks; /* row blocks per head */
    const ak__kernels *kern;
    ak_threadpool *pool; /* the pool running the tasks: an SGEMM on it inside a task is serial */
} attn_job;

static void attn_task(const attn_job *j, size_t task, int thread) {
    const ak__attn_problem *p = j->p;
    size_t bh = task / j->blocks, i0 = (task % j->blocks) * ATTN_ROWS;
    size_t b = bh / p->N, h = bh % p->N, T = p->T;
    size_t rows = p->S - i0 < ATTN_ROWS ? p->S - i0 : ATTN_ROWS;
    size_t per_thread = (p->S < ATTN_ROWS ? p->S : ATTN_ROWS) * T;
    float *sc = j->scratch + (size_t)thread * per_thread;
    const float *q = p->q.data + b * p->q.batch + h * p->q.head + i0 * p->q.row;
    const float *k = p->k.data + b * p->k.batch + h * p->k.head;
    const float *v = p->v.data + b * p->v.batch + h * p->v.head;
    float *out = p->out + b * p->out_batch + h * p->out_head + i0 * p->out_row;
    /* the scores start as bias + mask_filter where the key mask hides a key, and the
     * SGEMM adds scale·Q·Kᵀ to them (beta = 1) */
    float beta = 0.0f;
    if (p->bias) {
        for (size_t r = 0; r < rows; r++)
            memcpy(sc + r * T, bias_row(p, b, h, i0 + r), T * sizeof *sc);
        beta = 1.0f;
    }
    if (p->mask_kind != AK_ATTN_MASK_NONE) {
        for (size_t r = 0; r < rows; r++)
            for (size_t c = 0; c < T; c++) {
                float m = masked(p, b, h, i0 + r, c) ? p->mask_filter : 0.0f;
                sc[r * T + c] = beta != 0.0f ? sc[r * T + c] + m : m;
            }
        beta = 1.0f;
    }
    (void)ak_sgemm(AK_NO_TRANS, AK_TRANS, rows, T, p->D, p->scale, q, p->q.row, k, p->k.row,
                   beta, sc, T, j->pool);
    if (p->causal)
        for (size_t r = 0; r < rows; r++)
            for (size_t c = 0; c < T; c++)
                if (future(p, i0 + r, c)) sc[r * T + c] = -FLT_MAX;
    j->kern->f32_softmax_rows(sc, sc, rows, T, AK_KF_SOFTMAX);
    (void)ak_sgemm(AK_NO_TRANS, AK_NO_TRANS, rows, p->Dv, T, 1.0f, sc, T, v, p->v.row, 0.0f, out,
                   p->out_row, j->pool);
}

static void attn_chunk(void *arg, size_t begin, size_t end, int thread) {
    for (size_t t = begin; t < end; t++) attn_task(arg, t, thread);
}

/* Rows with no keys (T = 0) attend to nothing: their output is zero. */
static void zero_output(const ak__attn_problem *p) {
    for (size_t b = 0; b < p->B; b++)
        for (size_t h = 0; h < p->N; h++)
            for (size_t i = 0; i < p->S; i++)
                memset(p->out + b * p->out_batch + h * p->out_head + i * p->out_row, 0,
                       p->Dv * sizeof(float));
}

ak_status ak__attn_run(const ak__attn_problem *p, void *workspace, ak_threadpool *pool) {
    if (!p->B || !p->N || !p->S || !p->Dv) return AK_OK;
    if (!p->T) return zero_output(p), AK_OK;
    size_t blocks = (p->S + ATTN_ROWS - 1) / ATTN_ROWS;
    attn_job j = {p, workspace, blocks, ak__kernels_active(), pool};
    return ak_threadpool_parallel_for(pool, p->B * p->N * blocks, 1, attn_chunk, &j);
}

/* ---- the scalar reference -------------------------------------------------------------- */

ak_status ak__attn_reference(const ak__attn_problem *p) {
    if (!p->T) return zero_output(p), AK_OK;
    double *w = malloc(p->T * sizeof *w);
    if (!w) return AK_FAIL(AK_ERR_NO_MEMORY, "attention reference: out of memory");
    for (size_t b = 0; b < p->B; b++)
        for (size_t h = 0; h < p->N; h++)
            for (size_t i = 0; i < p->S; i++) {
                const float *q = p->q.data + b * p->q.batch + h * p->q.head + i * p->q.row;
                double mx = -INFINITY, sum = 0.0;
                for (size_t j = 0; j < p->T; j++) {
                    const float *k = p->k.data + b * p->k.batch + h * p->k.head + j * p->k.row;
                    double dot = 0.0;
                    for (size_t d = 0; d < p->D; d++) dot += (double)q[d] * k[d];
                    w[j] = dot * p->scale;
                    if (p->bias) w[j] += bias_row(p, b, h, i)[j];
                    if (masked(p, b, h, i, j)) w[j] += p->mask_filter;
                    if (future(p, i, j)) w[j] = -FLT_MAX;
                    if (w[j] > mx) mx = w[j];
                }
                for (size_t j = 0; j < p->T; j++) sum += w[j] = exp(w[j] - mx);
                float *o = p->out + b * p->out_batch + h * p->out_head + i * p->out_row;
                for (size_t d = 0; d < p->Dv; d++) {
                    double acc = 0.0;
                    for (size_t j = 0; j < p->T; j++)
                        acc += w[j] / sum *
                               p->v.data[b * p->v.batch + h * p->v.head + j * p->v.row + d];
                    o[d] = (float)acc;
                }
            }
    free(w);
    return AK_OK;
}

/* ---- inputs both operators read -------------------------------------------------------- */

ak_status ak__attn_set_bias(const ak__op_ctx *ctx, const ak__tensor *t, ak__attn_problem *p) {
    if (t->type != AK_ELEM_F32)
        return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED, "attention_bias of type %s is not supported (float32 is)",
                          ak_elem_type_name(t->type));
    /* [B|1, N|1, S|1, T]; a lower rank broadcasts from the right, as the Add it stands for */
    int64_t d[4] = {1, 1, 1, 1};
    if (t->rank > 4 || t->rank < 1)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "attention_bias must have rank 1 to 4");
    memcpy(d + 4 - t->rank, t->dims, (size_t)t->rank * sizeof *d);
    if ((d[0] != 1 && d[0] != (int64_t)p->B) || (d[1] != 1 && d[1] != (int64_t)p->N) ||
        (d[2] != 1 && d[2] != (int64_t)p->S) || d[3] != (int64_t)p->T)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                          "attention_bias must be [B or 1, N or 1, S or 1, T] = [%zu, %zu, %zu, %zu]",
                          p->B, p->N, p->S, p->T);
    p->bias = t->data;
    p->bias_row = d[2] == 1 ? 0 : p->T;
    p->bias_head = d[1] == 1 ? 0 : (size_t)d[2] * p->T;
    p->bias_batch = d[0] == 1 ? 0 : (size_t)(d[1] * d[2]) * p->T;
    return AK_OK;
}

ak_status ak__attn_set_mask(const ak__op_ctx *ctx, const ak__tensor *m, int square_ok,
                            ak__attn_problem *p) {
    if (m->type != AK_ELEM_I32)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "the mask has type %s, expected int32",
                          ak_elem_type_name(m->type));
    const int64_t *d = m->dims;
    int64_t B = (int64_t)p->B, S = (int64_t)p->S, T = (int64_t)p->T;
    p->mask = m->data;
    if (m->rank == 1 && d[0] == B) p->mask_kind = AK_ATTN_MASK_END;
    else if (m->rank == 1 && d[0] == 2 * B) p->mask_kind = AK_ATTN_MASK_END_START;
    else if (m->rank == 1 && d[0] == 3 * B + 2)
        return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED,
                          "the mask of shape [3*batch+2] (cumulated sequence lengths) is not implemented");
    else if (m->rank == 2 && d[0] == B && d[1] == T) p->mask_kind = AK_ATTN_MASK_KEYS;
    else if (m->rank == 3 && d[0] == B && d[1] == S && d[2] == T) p->mask_kind = AK_ATTN_MASK_ROWS;
    else if (square_ok && m->rank == 4 && d[0] == B && d[1] == 1 && d[2] == d[3] && d[2] >= T) {
        p->mask_kind = AK_ATTN_MASK_SQUARE;
        p->mask_max = (size_t)d[2];
    } else
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                          "the mask's shape does not fit batch %zu, sequence %zu, total sequence %zu "
                          "([B], [2B], [B,T], [B,S,T]%s)",
                          p->B, p->S, p->T, square_ok ? " or [B,1,M,M] with M >= T" : "");
    return AK_OK;
}

ak_status ak__attn_set_bool_mask(const ak__op_ctx *ctx, const ak__tensor *m, int keep,
                                 ak__attn_problem *p) {
    int64_t d[4] = {1, 1, 1, 1};
    const size_t want[4] = {p->B, p->N, p->S, p->T};
    if (m->type != AK_ELEM_BOOL || m->rank < 1 || m->rank > 4)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "the boolean mask must be bool of rank 1 to 4");
    memcpy(d + 4 - m->rank, m->dims, (size_t)m->rank * sizeof *d);
    size_t stride = 1;
    for (int i = 3; i >= 0; i--) {
        if (d[i] != 1 && d[i] != (int64_t)want[i])
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                              "the boolean mask does not broadcast to [%zu, %zu, %zu, %zu]", p->B,
                              p->N, p->S, p->T);
        p->bool_stride[i] = d[i] == 1 ? 0 : stride;
        stride *= (size_t)d[i];
    }
    p->mask_kind = AK_ATTN_MASK_BOOL;
    p->bool_mask = m->data;
    p->bool_keep = keep != 0;
    return AK_OK;
}

void ak__attn_concat(float *present, const float *past, size_t P, ak__attn_view fresh, size_t L,
                     size_t B, size_t N, size_t D) {
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < N; h++) {
            float *dst = present + (b * N + h) * (P + L) * D;
            if (P) memcpy(dst, past + (b * N + h) * P * D, P * D * sizeof *dst);
            for (size_t r = 0; r < L; r++)
                memcpy(dst + (P + r) * D,
                       fresh.data + b * fresh.batch + h * fresh.head + r * fresh.row,
                       D * sizeof *dst);
        }
}
