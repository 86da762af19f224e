/* The reduce family (Reduce*, ArgMax, ArgMin; reduce.c) and the helpers the softmaxes
 * (math/softmax.c) and the layer norms (norm/layer_norm.c) share with it: the split of a
 * shape into kept and reduced axes, a row splitter over the thread pool. Their float32 row loops are kernels (kernels/kf_infer.h:
 * ak_f32_reduce_rows, ak_f32_softmax_rows/_cols, ak_f32_layer_norm_rows). */
#ifndef AK_INFER_OPS_REDUCE_REDUCE_H
#define AK_INFER_OPS_REDUCE_REDUCE_H

#include <stddef.h>
#include <stdint.h>

#include "infer/runtime/op.h"

extern const ak__op_def ak__op_reduce_sum, ak__op_reduce_mean,
    ak__op_reduce_max, ak__op_reduce_min, ak__op_reduce_prod, ak__op_reduce_l1,
    ak__op_reduce_l2, ak__op_reduce_log_sum, ak__op_reduce_log_sum_exp,
    ak__op_reduce_sum_square, ak__op_argmax, ak__op_argmin;

/* ---- kept and reduced axes --------------------------------------------------------- */

/* A shape split into kept and reduced axes, adjacent axes of one kind merged (size-1
 * axes dropped). Output element o (row-major over the kept axes, the order the output
 * has with or without keepdims) reduces the input elements at base(o) + roff(j) for j
 * over the reduced set. */
typedef struct ak__math_split {
    int nk, nr;                                  /* kept / reduced groups */
    int64_t kdim[AK_IR_MAX_RANK], kstr[AK_IR_MAX_RANK];
    int64_t rdim[AK_IR_MAX_RANK], rstr[AK_IR_MAX_RANK];
    uint64_t nout, nred;                         /* kept count, reduced count */
    /* the common layouts: [outer kept][reduced][inner kept] with one reduced group, */
    int simple;                                  /* 1 when it is that layout */
    uint64_t outer, inner;                       /* then nred is the middle size */
} ak__math_split;

void ak__math_split_init(ak__math_split *s, int rank, const int64_t *dims,
                         const uint8_t *reduced);

/* Walks a set of (dim, stride) pairs row-major, giving the offset of each step. */
typedef struct ak__math_odo {
    int n;
    const int64_t *dim, *str;
    int64_t idx[AK_IR_MAX_RANK];
    int64_t off;
} ak__math_odo;

static inline void ak__math_odo_start(ak__math_odo *o, int n, const int64_t *dim,
                                      const int64_t *str) {
    o->n = n;
    o->dim = dim;
    o->str = str;
    for (int i = 0; i < n; i++) o->idx[i] = 0;
    o->off = 0;
}
/* Advances to the next position (wrapping to 0 after the last). */
static inline void ak__math_odo_next(ak__math_odo *o) {
    for (int i = o->n - 1; i >= 0; i--) {
        o->off += o->str[i];
        if (++o->idx[i] < o->dim[i]) return;
        o->off -= o->str[i] * o->dim[i];
        o->idx[i] = 0;
    }
}
/* Positions the walk at flat index k of its row-major order. */
static inline void ak__math_odo_seek(ak__math_odo *o, uint64_t k) {
    o->off = 0;
    for (int i = o->n - 1; i >= 0; i--) {
        o->idx[i] = (int64_t)(k % (uint64_t)o->dim[i]);
        k /= (uint64_t)o->dim[i];
        o->off += o->idx[i] * o->str[i];
    }
}

/* Reads a set of axes from an ints list into a per-axis mask; fails on an out-of-range or
 * repeated axis. */
ak_status ak__math_axes_mask(const ak__op_ctx *ctx, const int64_t *axes, size_t n, int rank,
                             uint8_t *mask);

/* ---- threads ----------------------------------------------------------------------- */

/* Runs fn over [0, n) items of about `item_cost` elementary operations each: inline when
 * the whole job is small, else over ctx->pool. */
ak_status ak__math_parallel(const ak__op_ctx *ctx, size_t n, size_t item_cost,
                            ak_parallel_fn fn, void *arg);

#endif /* AK_INFER_OPS_REDUCE_REDUCE_H */
