/* Scalar helpers of the collective reductions shared outside the dispatch table. */
#ifndef AK_KERNELS_REF_REDUCE_REF_H
#define AK_KERNELS_REF_REDUCE_REF_H

#include <stddef.h>

#include "accelkit/kernels.h"

/* buf[i] /= divisor (see ak_reduce_avg_finish); arguments already validated. */
void ak__reduce_avg_finish_ref(ak_dtype dtype, void *buf, size_t n, int divisor);

#endif /* AK_KERNELS_REF_REDUCE_REF_H */
