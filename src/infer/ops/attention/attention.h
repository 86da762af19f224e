/* The attention operator family (ops/attention): com.microsoft MultiHeadAttention (mha.c)
 * and Attention (attention_op.c), which describe their inputs to one shared computation
 * (core.c): per batch and head, softmax(scale·Q·Kᵀ + bias + mask)·V.
 *
 * Every operand is a strided view, so the layouts the operators accept (Q/K/V as
 * [B,S,N·D], packed QKV [B,S,N,3,D], packed KV [B,L,N,2,D], K/V per head [B,N,L,D], the
 * projections of Attention in one [B,S,3·hidden] buffer) are read in place. */
#ifndef AK_INFER_OPS_ATTENTION_ATTENTION_H
#define AK_INFER_OPS_ATTENTION_ATTENTION_H

#include <stddef.h>
#include <stdint.h>

#include "infer/runtime/op.h"

extern const ak__op_def ak__op_multi_head_attention, ak__op_attention;
/* com.accelkit MultiHeadAttention: what runtime/optimize_attention.c emits (mha.c) */
extern const ak__op_def ak__op_fused_multi_head_attention;

/* Element (b, h, row, d) of a view is data[b·batch + h·head + row·row + d]. */
typedef struct ak__attn_view {
    const float *data;
    size_t batch, head, row;
} ak__attn_view;

/* How the key mask (int32) says which keys a query row may not see. */
typedef enum ak__attn_mask_kind {
    AK_ATTN_MASK_NONE,
    AK_ATTN_MASK_END,       /* [B]: keys j >= end[b] are padding */
    AK_ATTN_MASK_END_START, /* [2B]: keys j >= end[b] or j < start[b] = mask[B + b] */
    AK_ATTN_MASK_KEYS,      /* [B, T]: 0 = padding */
    AK_ATTN_MASK_ROWS,      /* [B, S, T]: 0 = masked, per query row */
    AK_ATTN_MASK_SQUARE,    /* [B, 1, M, M]: row past + i of each batch's square, 0 = masked */
    AK_ATTN_MASK_BOOL,      /* bool broadcast to [B, N, S, T] (the fusion's Where): a key is
                               masked where the value differs from bool_keep */
} ak__attn_mask_kind;

typedef struct ak__attn_problem {
    size_t B, N, S, T, D, Dv; /* T: keys per query (past + new) */
    ak__attn_view q, k, v;    /* q over S rows of D, k over T rows of D, v over T rows of Dv */
    float *out;               /* (b, h, i, d) at out[b·out_batch + h·out_head + i·out_row + d] */
    size_t out_batch, out_head, out_row;
    float scale;
    float mask_filter; /* added to the score of a key the key mask hides */
    int causal;        /* query i sees keys j <= i + T - S (the others score -FLT_MAX) */
    ak__attn_mask_kind mask_kind;
    const int32_t *mask;
    size_t mask_max;       /* SQUARE: M */
    const uint8_t *bool_mask; /* BOOL: its strides per (b, h, i, j), 0 where broadcast */
    size_t bool_stride[4];
    int bool_keep;
    const float *bias;     /* additive [.., .., S or 1, T] scores, or NULL */
    size_t bias_batch, bias_head, bias_row; /* its strides (0 where broadcast) */
} ak__attn_problem;

/* Scratch bytes ak__attn_run needs with `threads` threads. */
size_t ak__attn_workspace_bytes(const ak__attn_problem *p, int threads);
/* The fast path: SGEMMs per (batch, head, block of query rows) spread over the pool, the
 * vectorized softmax rows in between. */
ak_status ak__attn_run(const ak__attn_problem *p, void *workspace, ak_threadpool *pool);
/* The scalar reference (double accumulation), for tests. */
ak_status ak__attn_reference(const ak__attn_problem *p);

/* Reads the additive attention_bias input t ([B or 1, N or 1, S or 1, T]) into p. */
ak_status ak__attn_set_bias(const ak__op_ctx *ctx, const ak__tensor *t, ak__attn_problem *p);
/* Reads an int32 key mask of one of the shapes ak__attn_mask_kind lists into p
 * (`square_ok`: the [B,1,M,M] form, Attention's only). */
ak_status ak__attn_set_mask(const ak__op_ctx *ctx, const ak__tensor *m, int square_ok,
                            ak__attn_problem *p);
/* Reads a bool mask broadcastable to [B,N,S,T] (the fusion's Where(cond, scores, fill):
 * keep = 1; Where(cond, fill, scores): keep = 0) into p. */
ak_status ak__attn_set_bool_mask(const ak__op_ctx *ctx, const ak__tensor *m, int keep,
                                 ak__attn_problem *p);
/* Copies past [B,N,P,D] rows and the new keys (a view over L rows) into present
 * [B,N,P+L,D]. */
void ak__attn_concat(float *present, const float *past, size_t P, ak__attn_view fresh, size_t L,
                     size_t B, size_t N, size_t D);

#endif /* AK_INFER_OPS_ATTENTION_ATTENTION_H */
