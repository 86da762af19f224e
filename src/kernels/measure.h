/* Internal probes behind ak_measure_fma_peak / ak_measure_memcpy. */
#ifndef AK_KERNELS_MEASURE_H
#define AK_KERNELS_MEASURE_H

#include <stdint.h>

/* Each runs `iters` iterations of independent FMA chains; returns the flops done. */
double ak__fma_loop__generic(uint64_t iters);
double ak__fma_loop__avx2(uint64_t iters);
double ak__fma_loop__avx512(uint64_t iters);

#endif /* AK_KERNELS_MEASURE_H */
