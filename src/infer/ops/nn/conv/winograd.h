/* The Winograd float32 convolution (winograd.c), which conv.c and nchwc.c call; it takes
 * the implicit GEMM's run arguments. */
#ifndef AK_INFER_OPS_NN_CONV_WINOGRAD_H
#define AK_INFER_OPS_NN_CONV_WINOGRAD_H

#include <stddef.h>
#include <stdint.h>

#include "infer/ops/nn/common.h"
#include "infer/ops/nn/conv/igemm.h"

/* Winograd F(4×4, 3×3) float32 Conv (nn/conv/winograd.c): 2-D, 3×3, stride 1, dilation 1,
 * one group; transformed weights packed once, 36 microkernel GEMMs per image. */
typedef struct ak__conv_wino ak__conv_wino;
/* The path for W (M, C, 3, 3), its weights not yet transformed. *out stays NULL (AK_OK)
 * without AVX2 and the microkernel, or when the transformed weights would be too large to
 * pay; fails only when out of memory. */
ak_status ak__conv_wino_create(int64_t M, int64_t C, ak__conv_wino **out);
/* Transforms and packs W's data w, once (reshape calls it when a plane takes Winograd:
 * layers whose planes are too small never hold the 4× larger transformed weights). */
ak_status ak__conv_wino_prepare(ak__conv_wino *p, const float *w);
void ak__conv_wino_free(ak__conv_wino *p);
/* 1 when p packed these weights and g is a geometry it computes. */
int ak__conv_wino_usable(const ak__conv_wino *p, const ak__nn_geom *g, int64_t M, int64_t C,
                         int64_t group);
/* Winograd takes a plane from this many 4×4 output tiles on (ResNet-50's 3×3 layers on
 * 14×14 planes and larger): below, the implicit GEMM or the direct blocked kernel win. */
int ak__conv_wino_pays(const ak__nn_geom *g);
/* Scratch floats of a run; a blocked Y needs a plain block of 8 planes per thread. */
size_t ak__conv_wino_workspace_floats(const ak__conv_wino *p, const ak__nn_geom *g, int y_blocked,
                                      int threads);
ak_status ak__conv_wino_run(const ak__conv_wino *p, const ak__conv_igemm_args *args);

#endif /* AK_INFER_OPS_NN_CONV_WINOGRAD_H */
