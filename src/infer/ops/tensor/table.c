/* The tensor operator family (shape and data movement): the table registry.c searches.
 * The operators live in tensor/shape.c (shape-only and constant producers),
 * tensor/move.c (layout changes) and tensor/index.c (data-dependent indexing). */
#include "infer/ops/tensor/tensor_ops.h"

const ak__op_def *const ak__ops_tensor[] = {
    /* tensor/shape.c */
    &ak__op_reshape, &ak__op_flatten, &ak__op_squeeze, &ak__op_unsqueeze, &ak__op_identity,
    &ak__op_dropout, &ak__op_shape, &ak__op_size, &ak__op_constant, &ak__op_constant_of_shape,
    &ak__op_range, &ak__op_eye_like,
    /* tensor/move.c */
    &ak__op_transpose, &ak__op_expand, &ak__op_concat, &ak__op_split, &ak__op_slice,
    &ak__op_tile, &ak__op_pad, &ak__op_depth_to_space, &ak__op_space_to_depth,
    &ak__op_reverse_sequence,
    /* tensor/index.c */
    &ak__op_gather, &ak__op_gather_elements, &ak__op_gather_nd, &ak__op_scatter_nd,
    &ak__op_scatter_elements, &ak__op_scatter, &ak__op_one_hot, &ak__op_compress,
    &ak__op_nonzero, &ak__op_trilu, &ak__op_cumsum,
    /* tensor/resize.c */
    &ak__op_resize, &ak__op_upsample,
    NULL,
};
