/* Adasum allreduce (Maleki et al. 2020, "Scaling Distributed Training with Adaptive
 * Summation"): an algorithm of its own rather than an ak_reduce_op, because its pairwise
 * combination needs dot products over whole tensors, not element-wise reduction.
 * docs/training.md ("Adasum") gives the steps, the bytes and the tree order. */
#ifndef AK_COMM_ALGO_ADASUM_H
#define AK_COMM_ALGO_ADASUM_H

#include "comm/algo/algo.h"

/* Adasum of every rank's buf (count elements of f32 or f64), in place, the same bits on
 * every rank. segs[0..nsegs) are the tensors' element counts (they sum to count); dot
 * products and norms are per tensor. nsegs == 0 (segs may be NULL): one tensor. */
ak_status ak__allreduce_adasum(const ak__algo_ctx *c, const ak__group *g, void *buf, size_t count,
                               ak_dtype dt, const size_t *segs, size_t nsegs, uint64_t tag);

#endif /* AK_COMM_ALGO_ADASUM_H */
