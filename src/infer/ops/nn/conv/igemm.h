/* The implicit-GEMM float32 convolution (igemm.c), which conv.c and nchwc.c call. */
#ifndef AK_INFER_OPS_NN_CONV_IGEMM_H
#define AK_INFER_OPS_NN_CONV_IGEMM_H

#include <stddef.h>
#include <stdint.h>

#include "accelkit/kernels.h"
#include "infer/ops/nn/common.h"
#include "infer/ops/nn/conv/activation.h"

/* For tests and benchmarks: the implicit GEMM's orientation, 0 chosen by the plane,
 * 1 the usual one, 2 transposed (positions as microkernel rows) where it fits. */
extern int ak__conv_igemm_orientation;

/* Implicit-GEMM float32 Conv, 1-D and 2-D (nn/conv/igemm.c): weights packed once for
 * the SGEMM microkernel, columns gathered from the image per sliver, bias/Z/activation
 * applied per tile. */
typedef struct ak__conv_igemm ak__conv_igemm;
/* Packs W (M, Kg) with Kg = Cg·kernel taps for `group` groups. *out stays NULL (AK_OK)
 * when the active ISA has no microkernel; fails only when out of memory. */
ak_status ak__conv_igemm_pack(const float *w, int64_t M, int64_t group, uint64_t Kg,
                              ak__conv_igemm **out);
void ak__conv_igemm_free(ak__conv_igemm *p);
/* 1 when p packed these weights for the microkernel that is active now. */
int ak__conv_igemm_usable(const ak__conv_igemm *p, int64_t M, int64_t group, uint64_t Kg);
/* Packs the weights (W's data w) in the orientation a run over geometry g takes, and
 * frees the other one; reshape calls it. */
ak_status ak__conv_igemm_prepare(ak__conv_igemm *p, const ak__nn_geom *g, const float *w);
/* Scratch floats a run on `threads` threads needs. */
size_t ak__conv_igemm_workspace_floats(const ak__conv_igemm *p, const ak__nn_geom *g,
                                       int threads);
typedef struct ak__conv_igemm_args {
    const ak__nn_geom *geom; /* 1 or 2 spatial axes */
    int64_t N, C;            /* images, input channels */
    const float *x, *bias, *z; /* bias (M) and Z (shaped like y) may be NULL */
    float *y;
    ak__nn_act act;
    ak_threadpool *pool;
    void *workspace;
    size_t workspace_bytes;
    int x_blocked, y_blocked; /* Winograd: X, and Y and Z, stored NCHW8c (C, M multiples of 8) */
} ak__conv_igemm_args;
ak_status ak__conv_igemm_run(const ak__conv_igemm *p, const ak__conv_igemm_args *args);

#endif /* AK_INFER_OPS_NN_CONV_IGEMM_H */
