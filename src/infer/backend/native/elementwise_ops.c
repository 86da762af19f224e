/* The elementwise operator family: the table registry.c searches. */
#include "infer/runtime/op.h"

const ak__op_def *const ak__ops_elementwise[] = {
    NULL,
};
