/* Shared pieces of the tensor (shape and data-movement) operator family: the operator
 * definitions each file of tensor/ exports to the family table in tensor/table.c, and the
 * helpers they share (index inputs, scalar inputs, a strided copy engine).
 *
 * These operators move bytes, not numbers: data is copied by element size so one code
 * path serves every element type. */
#ifndef AK_INFER_OPS_TENSOR_TENSOR_OPS_H
#define AK_INFER_OPS_TENSOR_TENSOR_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "infer/runtime/op.h"

#define AK_TOPS_MAX_RANK AK_IR_MAX_RANK

/* ---- operator definitions (one per opset form where semantics changed) -------------- */

/* tensor/shape.c: shape-only operators and constant producers */
extern const ak__op_def ak__op_reshape, ak__op_flatten, ak__op_squeeze, ak__op_unsqueeze,
    ak__op_identity, ak__op_dropout, ak__op_shape, ak__op_size, ak__op_constant,
    ak__op_constant_of_shape, ak__op_range, ak__op_eye_like;
/* tensor/move.c: layout changes done by strided copies */
extern const ak__op_def ak__op_transpose, ak__op_expand, ak__op_concat, ak__op_split,
    ak__op_slice, ak__op_tile, ak__op_pad, ak__op_depth_to_space, ak__op_space_to_depth,
    ak__op_reverse_sequence;
/* tensor/index.c: data-dependent indexing */
extern const ak__op_def ak__op_gather, ak__op_gather_elements, ak__op_gather_nd,
    ak__op_scatter_nd, ak__op_scatter_elements, ak__op_scatter, ak__op_one_hot,
    ak__op_compress, ak__op_nonzero, ak__op_trilu, ak__op_cumsum;

/* tensor/resize.c: interpolation */
extern const ak__op_def ak__op_resize, ak__op_upsample;

/* ---- helpers ------------------------------------------------------------------------ */

/* Element i of an int32 or int64 tensor (checked by ak__tops_check_index). */
static inline int64_t ak__tops_index_at(const ak__tensor *t, uint64_t i) {
    return t->type == AK_ELEM_I64 ? ((const int64_t *)t->data)[i]
                                  : (int64_t)((const int32_t *)t->data)[i];
}

/* Fails unless input i (named `what`) holds int32 or int64 indices. */
ak_status ak__tops_check_index(const ak__op_ctx *ctx, const ak__tensor *t, const char *what);

/* Wraps a negative index by dim and checks it lies in [0, dim); fails with a message
 * naming `what` and the axis otherwise. */
ak_status ak__tops_wrap_index(const ak__op_ctx *ctx, int64_t *v, int64_t dim, int axis,
                              const char *what);

/* A one-element numeric tensor (a scalar or shape [1]) as int64 / double. Fails naming
 * `what` unless t holds exactly one element of a numeric type. */
ak_status ak__tops_scalar_int(const ak__op_ctx *ctx, const ak__tensor *t, const char *what,
                              int64_t *out);
ak_status ak__tops_scalar_double(const ak__op_ctx *ctx, const ak__tensor *t, const char *what,
                                 double *out);

/* Row-major element strides of a shape. */
void ak__tops_strides(int rank, const int64_t *dims, int64_t *strides);

/* Product of dims[begin..end). */
int64_t ak__tops_prod(const int64_t *dims, int begin, int end);

/* Copies count = prod(dims) elements of `elem` bytes into dst in row-major order of dims,
 * reading element (i0..ik) at src + sum(i_d * src_strides[d]) * elem. Strides may be 0
 * (broadcast) or negative (reversed). Large copies run on ctx->pool. */
void ak__tops_strided_copy(const ak__op_ctx *ctx, void *dst, const void *src, size_t elem,
                           int rank, const int64_t *dims, const int64_t *src_strides);

/* dst[j·ld_dst + i] = src[i·ld_src + j] for i < rows, j < cols: a float32 matrix
 * transposed (8×8 register blocks with AVX2). */
void ak__tops_transpose_f32(float *dst, int64_t ld_dst, const float *src, int64_t ld_src,
                            int64_t rows, int64_t cols);

/* Copies n bytes unless n is 0 (pointers of empty tensors may be NULL). */
void ak__tops_copy_bytes(void *dst, const void *src, size_t n);

/* Fills n elements of `elem` bytes at dst with the element at value. */
void ak__tops_fill(void *dst, const void *value, size_t elem, uint64_t n);

#endif /* AK_INFER_OPS_TENSOR_TENSOR_OPS_H */
