/* The elementwise operator family: the table registry.c searches. The operators live in
 * elementwise/binary.c (broadcasting binary, variadic, Where), elementwise/unary.c (math
 * and activations) and elementwise/cast.c, over the loop drivers of elementwise/broadcast.c
 * and the float32 vector kernels of elementwise/kernels_f32.c. */
#include "infer/ops/elementwise/elementwise.h"

#define EW_ENTRY(name) &ew_op_##name,

const ak__op_def *const ak__ops_elementwise[] = {
    EW_BINARY_DEFS(EW_ENTRY) EW_UNARY_DEFS(EW_ENTRY) EW_CAST_DEFS(EW_ENTRY) NULL,
};
