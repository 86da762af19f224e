/* MatMul's numpy shapes, shared by MatMul (math/gemm.c) and the quantized matrix
 * products (quant/qmatmul.c): batch dims broadcast, a 1-D A or B promoted to a matrix and
 * its unit dim dropped from the output. */
#ifndef AK_INFER_OPS_MATH_MATMUL_PLAN_H
#define AK_INFER_OPS_MATH_MATMUL_PLAN_H

#include "infer/runtime/op.h"

typedef struct ak__mm_plan {
    uint64_t M, N, K, batch;
    int nb; /* broadcast batch rank */
    int64_t bd[AK_IR_MAX_RANK];
    uint64_t sa[AK_IR_MAX_RANK], sb[AK_IR_MAX_RANK]; /* batch strides in matrices (0: broadcast) */
    int rank;
    int64_t out[AK_IR_MAX_RANK]; /* the output's dims */
    int b_shared; /* every batch uses the one B */
    int fold;     /* B shared and A not broadcast: one GEMM over batch*M rows */
} ak__mm_plan;

/* The plan for A @ B, or a failure naming the node when the shapes do not fit. */
ak_status ak__mm_plan_make(ak__op_ctx *ctx, const ak__tensor *A, const ak__tensor *B,
                           ak__mm_plan *pl);

/* Offsets (in matrices) of A and B for batch t. */
void ak__mm_offsets(const ak__mm_plan *pl, uint64_t t, uint64_t *ao, uint64_t *bo);

#endif /* AK_INFER_OPS_MATH_MATMUL_PLAN_H */
