/* The elementwise operator family: the table registry.c searches. The operators live in
 * elementwise_binary.c (broadcasting binary, variadic, Where), elementwise_unary.c (math
 * and activations) and elementwise_cast.c, over the loop drivers of elementwise_bcast.c
 * and the float32 vector kernels of elementwise_f32.c. */
#include "infer/backend/native/elementwise_internal.h"

#define EW_ENTRY(name) &ew_op_##name,

const ak__op_def *const ak__ops_elementwise[] = {
    EW_BINARY_DEFS(EW_ENTRY) EW_UNARY_DEFS(EW_ENTRY) EW_CAST_DEFS(EW_ENTRY) NULL,
};
