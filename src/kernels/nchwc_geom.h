/* NCHWc row geometry shared by the reference kernels (kernels/ref/nchwc_ref.c) and their
 * x86 variants: how a conv row is cut into tiles and which taps of a window land inside
 * the input. Pure index arithmetic, inlined into each variant. */
#ifndef AK_KERNELS_NCHWC_GEOM_H
#define AK_KERNELS_NCHWC_GEOM_H

#include <stdint.h>

#include "kernels/kf_infer.h"

/* A row of n outputs in tiles of at most max_rows, their sizes evened out (they differ by
 * at most one, so no tile is a lone output whose FMA chains would wait on latency). */
static inline int64_t ak__nchwc_tile_count(int64_t n, int max_rows) {
    return (n + max_rows - 1) / max_rows;
}
/* The size of tile i of `tiles` when `done` outputs are already covered. */
static inline int ak__nchwc_tile_rows(int64_t n, int64_t tiles, int64_t i, int64_t done) {
    return (int)((n - done) / (tiles - i));
}
/* Moves t past a tile of `rows` outputs. */
static inline void ak__nchwc_tile_skip(ak__kf_nchwc_tile *t, int rows) {
    t->x += rows * t->sx;
    t->y += rows * AK_KF_NCHWC_BLOCK;
    if (t->z) t->z += rows * AK_KF_NCHWC_BLOCK;
}

/* A tile kernel of a variant: the tile's outputs (a constant per instance) of t. */
typedef void ak__nchwc_tile_fn(const ak__kf_nchwc_tile *t, const struct ak__sgemm_tile_epi *fin);

/* Outputs [0, n) of t in tiles of at most max_rows, sizes evened out: fns[size − 1] runs
 * a tile of `size` outputs. */
static inline void ak__nchwc_run_tiles(const ak__kf_nchwc_tile *t, int64_t n, int max_rows,
                                       ak__nchwc_tile_fn *const *fns,
                                       const struct ak__sgemm_tile_epi *fin) {
    ak__kf_nchwc_tile u = *t;
    int64_t tiles = ak__nchwc_tile_count(n, max_rows);
    for (int64_t i = 0, done = 0; i < tiles; i++) {
        int size = ak__nchwc_tile_rows(n, tiles, i, done);
        fns[size - 1](&u, fin);
        ak__nchwc_tile_skip(&u, size);
        done += size;
    }
}

/* A variant's runner of a part of a panel: nb (≤ its widest tile) blocks from t->w, whose
 * rows are t->w_stride floats apart. */
typedef void ak__nchwc_part_fn(const ak__kf_nchwc_tile *t, int nb, int64_t n,
                               const struct ak__sgemm_tile_epi *fin);

/* nb blocks of t (rows t->w_stride apart) as parts of at most `most` blocks (the last
 * part what is left), each with its weights, bias, y and z offset. */
static inline void ak__nchwc_conv_parts(const ak__kf_nchwc_tile *t, int nb, int most, int64_t n,
                                        const struct ak__sgemm_tile_epi *fin,
                                        ak__nchwc_part_fn *part) {
    ak__kf_nchwc_tile u = *t;
    for (int b = 0; b < nb; b += most) {
        size_t lane = (size_t)b * AK_KF_NCHWC_BLOCK, at = (size_t)b * t->plane;
        u.w = t->w + lane;
        u.bias = t->bias ? t->bias + lane : NULL;
        u.y = t->y + at;
        u.z = t->z ? t->z + at : NULL;
        part(&u, nb - b < most ? nb - b : most, n, fin);
    }
}

/* A variant's conv row entry: the whole panel of nb blocks ([K][8·nb]) as parts. */
static inline void ak__nchwc_conv_panel(const ak__kf_nchwc_tile *t, int nb, int most, int64_t n,
                                        const struct ak__sgemm_tile_epi *fin,
                                        ak__nchwc_part_fn *part) {
    ak__kf_nchwc_tile u = *t;
    u.w_stride = (int64_t)nb * AK_KF_NCHWC_BLOCK;
    ak__nchwc_conv_parts(&u, nb, most, n, fin, part);
}

/* The taps [*k0, *k1) of the window along one axis that land inside [0, in) for output o. */
static inline void ak__win2d_axis_taps(const ak__kf_win2d *g, int axis, int64_t o, int64_t *k0,
                                       int64_t *k1) {
    int64_t first = o * g->s[axis] - g->pb[axis], d = g->d[axis];
    /* dilation 1, the usual case, needs no division (border outputs of small planes ask
     * for every output) */
    int64_t lo = first >= 0 ? 0 : d == 1 ? -first : (-first + d - 1) / d;
    int64_t hi = d == 1 ? g->in[axis] - first : (g->in[axis] - first + d - 1) / d;
    *k0 = lo;
    *k1 = hi < g->k[axis] ? hi : g->k[axis];
    if (*k1 < *k0) *k1 = *k0;
}

#endif /* AK_KERNELS_NCHWC_GEOM_H */
