/* Shared parts of the nn operator family (nn/ and its conv/ and pool/ folders): the
 * spatial geometry of convolutions and pools (kernel, strides, dilations, pads, auto_pad,
 * ceil_mode), the NCHWc layout NchwcConv and NchwcMaxPool share, small helpers for
 * planes, K slices and workspace slots per thread, and sampling.c's op definitions. */
#ifndef AK_INFER_OPS_NN_COMMON_H
#define AK_INFER_OPS_NN_COMMON_H

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

/* Channels per block of the NCHWc layout (NchwcConv, NchwcMaxPool): one AVX2 vector. */
#define AK_NN_NCHWC_BLOCK AK_KF_NCHWC_BLOCK

/* A 2-D geometry as the window kernels take it (kernels/kf_infer.h). */
static inline ak__kf_win2d ak__nn_win2d(const ak__nn_geom *g) {
    ak__kf_win2d w;
    for (int a = 0; a < 2; a++) {
        w.in[a] = g->in[a], w.out[a] = g->out[a], w.k[a] = g->k[a];
        w.s[a] = g->s[a], w.d[a] = g->d[a], w.pb[a] = g->pb[a];
    }
    return w;
}
/* For tests (nn/conv/nchwc.c): the largest gathered copy of an image a blocked layer makes. */
extern uint64_t ak__nchwc_gather_max_bytes;

/* GridSample and RoiAlign (sampling.c). */
extern const ak__op_def ak__op_gridsample, ak__op_roialign;

#endif /* AK_INFER_OPS_NN_COMMON_H */
