/* Shared parts of the nn operator family (nn_*.c): the op definitions the family table
 * lists, the spatial geometry of convolutions and pools (kernel, strides, dilations,
 * pads, auto_pad, ceil_mode), and small helpers for workspace slots per thread. */
#ifndef AK_INFER_BACKEND_NATIVE_NN_INTERNAL_H
#define AK_INFER_BACKEND_NATIVE_NN_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "accelkit/kernels.h"
#include "infer/runtime/op.h"
#include "kernels/dispatch.h"

/* Spatial ranks beyond this (5-D and deeper convolutions) are refused as unsupported. */
#define AK_NN_MAX_SP 8

/* Where a sliding window sits along each spatial axis. Output o covers input positions
 * o*s - pb + j*d for j in [0, k). */
typedef struct ak__nn_geom {
    int nsp; /* number of spatial axes */
    int64_t in[AK_NN_MAX_SP], out[AK_NN_MAX_SP], k[AK_NN_MAX_SP];
    int64_t s[AK_NN_MAX_SP], d[AK_NN_MAX_SP], pb[AK_NN_MAX_SP], pe[AK_NN_MAX_SP];
} ak__nn_geom;

/* Fills g from the node's strides/dilations/pads/auto_pad (and ceil_mode when
 * `ceil_allowed`) for input spatial dims in[0..nsp) and kernel k[0..nsp). Fails with
 * AK_ERR_INVALID_MODEL on bad attributes or an empty/negative output. */
ak_status ak__nn_geom_init(const ak__op_ctx *ctx, int nsp, const int64_t *in, const int64_t *k,
                           int ceil_allowed, ak__nn_geom *g);

/* Product of n dims (callers have bounded them already). */
static inline uint64_t ak__nn_prod(const int64_t *d, int n) {
    uint64_t p = 1;
    for (int i = 0; i < n; i++) p *= (uint64_t)d[i];
    return p;
}

/* Threads of the pool run will use (reshape may see no pool: the global one then). */
int ak__nn_pool_threads(const ak__op_ctx *ctx);

/* Reads the kernel_shape attribute into k[0..nsp) (required for pools). */
ak_status ak__nn_kernel_attr(const ak__op_ctx *ctx, int nsp, int64_t *k);

/* For benchmarks and tests (nn_conv.c): 1 forces Conv's tiled im2col path, 2 the whole
 * one, 3 the implicit GEMM (when create packed W), 4 Winograd (where it applies), 0 lets
 * it choose. Not thread-safe; never set in production. */
extern int ak__nn_conv_force_mode;
/* For tests and benchmarks: the implicit GEMM's orientation, 0 chosen by the plane,
 * 1 the usual one, 2 transposed (positions as microkernel rows) where it fits. */
extern int ak__conv_igemm_orientation;

/* FusedConv's activation (com.microsoft names) with its parameters: Clip's min/max,
 * LeakyRelu's alpha, HardSigmoid's alpha/beta. */
enum {
    AK_NN_ACT_NONE, AK_NN_ACT_RELU, AK_NN_ACT_CLIP, AK_NN_ACT_LEAKY, AK_NN_ACT_SIGMOID,
    AK_NN_ACT_TANH, AK_NN_ACT_HARDSIGMOID
};
typedef struct ak__nn_act {
    int kind; /* AK_NN_ACT_* */
    float a, b;
} ak__nn_act;
/* FusedConv's activation and activation_params (com.microsoft semantics) from ctx->node;
 * none when the node has no activation attribute. */
ak_status ak__nn_parse_activation(const ak__op_ctx *ctx, ak__nn_act *act);
/* The activation in place over rows (rows, cols) of stride ld (nn_conv.c). */
void ak__nn_act_rows(const ak__nn_act *act, float *y, uint64_t rows, uint64_t cols,
                     uint64_t ld);

/* 1 when act is one a microkernel can apply in registers (none, ReLU, Clip), with *out
 * set to that finish over bias and z. */
int ak__nn_act_fusable(const ak__nn_act *act, const float *bias, const float *z,
                       ak__sgemm_tile_epi *out);
/* The GEMM convolutions' epilogue on an m×n tile of Y (rows ld apart): + bias[r] per
 * row (bias may be NULL), + Z (laid out like Y, or NULL), then the activation. */
void ak__nn_tile_epilogue(float *y, const float *z, const float *bias, uint64_t ld, size_t m,
                          size_t n, const ak__nn_act *act);

/* Implicit-GEMM float32 Conv, 1-D and 2-D (nn_conv_igemm.c): weights packed once for
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

/* Winograd F(4×4, 3×3) float32 Conv (nn_conv_winograd.c): 2-D, 3×3, stride 1, dilation 1,
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

/* One H×W plane into an Hp×Wp one with `ph` zero rows above and `pw` zero columns to its
 * left, zeros everywhere else (ph + H <= Hp, pw + W <= Wp). */
void ak__nn_pad_plane(const float *src, int64_t H, int64_t W, int64_t ph, int64_t pw, float *dst,
                      int64_t Hp, int64_t Wp);

/* The depth of the GEMM convolutions' K slices: at most AK_NN_MAX_KC (an MR×KC A sliver,
 * 6 KB, and a KC×NR B sliver, 16 KB, share L1), evened out over the slices K needs
 * (576 → 3×192, not 256+256+64). */
#define AK_NN_MAX_KC 256u
size_t ak__nn_slice_depth(uint64_t K);

/* fn over [0, n) on the pool in claims of `grain`, or on the caller's thread when the pool
 * cannot take it (or n <= 1). */
void ak__nn_parallel(ak_threadpool *pool, size_t n, size_t grain, ak_parallel_fn fn, void *ctx);

/* Op definitions (one file each group). */
extern const ak__op_def ak__nn_conv, ak__nn_conv_transpose, ak__nn_conv_integer,
    ak__nn_fused_conv, ak__nn_nchwc_conv;
/* Channels per block of the NCHWc layout (NchwcConv, NchwcMaxPool): one AVX2 vector. */
#define AK_NN_NCHWC_BLOCK 8
/* For tests (nn_nchwc.c): 1 runs NchwcConv's scalar loops even where AVX2 is active, 2
 * its AVX2 tiles where AVX-512 is. */
extern int ak__nchwc_force_scalar;
/* For tests (nn_nchwc.c): the largest gathered copy of an image a blocked layer makes. */
extern uint64_t ak__nchwc_gather_max_bytes;
extern const ak__op_def ak__nn_maxpool, ak__nn_averagepool, ak__nn_lppool, ak__nn_nchwc_maxpool;
extern const ak__op_def ak__nn_global_averagepool, ak__nn_global_maxpool,
    ak__nn_global_lppool;
extern const ak__op_def ak__nn_batchnorm, ak__nn_instancenorm, ak__nn_lrn;
extern const ak__op_def ak__nn_gemm, ak__nn_matmul, ak__nn_matmul_integer;

/* Depthwise 2-D convolution (nn_dw.c): planes (H, W) -> (OH, OW), plane i = n*C + c
 * with filter c ((KH, KW), at most AK_NN_DW_MAX_TAPS taps), bias b[c] (b may be NULL),
 * + Z (same layout as y, or NULL), then the activation. scratch holds
 * ak__nn_dw_scratch_floats(g) floats (64-byte aligned). */
#define AK_NN_DW_MAX_TAPS 64
typedef struct ak__nn_dw_args {
    const ak__nn_geom *g;
    const float *x, *w, *b, *z;
    float *y;
    uint64_t C, Pin, P; /* channels, input and output plane sizes */
    ak__nn_act act;
    int avx2; /* ak__cpu_active_avx2() */
} ak__nn_dw_args;
size_t ak__nn_dw_scratch_floats(const ak__nn_geom *g);
void ak__nn_dw_planes(const ak__nn_dw_args *a, size_t begin, size_t end, float *scratch);
/* 1 when runs of 8 aligned channels are computed 8 planes at once (channel-interleaved):
 * a task's range should then start and end on multiples of 8 planes. */
#define AK_NN_DW8_MAX_WIDTH 28
int ak__nn_dw_interleaves(const ak__nn_dw_args *a);

#endif /* AK_INFER_BACKEND_NATIVE_NN_INTERNAL_H */
