/* Scalar references of the ONNX engine's convolution and pooling kernels (kf_infer.h):
 * the NCHWc conv row, depthwise rows and max-pool row, and the GEMM convolutions' tile
 * finish. Plain loops in the order the vector variants sum (bias first, then the K rows
 * in order), without FMA contraction; the variants differ from them by the roundings an
 * FMA saves. */
#include <float.h>
#include <string.h>

#include "kernels/dispatch.h"
#include "kernels/nchwc_geom.h"

#define BLK AK_KF_NCHWC_BLOCK
#define TILE_ROWS 6 /* the reference's tile: the AVX2 one, for the same row splits */

/* v (+ *z) through the finish's activation. */
static float finish_one(const ak__sgemm_tile_epi *f, float v, const float *z) {
    if (z) v += *z;
    if (f->act == AK_SGEMM_ACT_MAX) v = v > f->lo ? v : f->lo;
    else if (f->act == AK_SGEMM_ACT_CLAMP) v = v < f->lo ? f->lo : v > f->hi ? f->hi : v;
    return v;
}

/* n (≤ TILE_ROWS) outputs of a row × 8·nb channels. */
static void conv_tile(const ak__kf_nchwc_tile *t, int n, int nb, const ak__sgemm_tile_epi *f) {
    float acc[TILE_ROWS][4 * BLK];
    int width = nb * BLK;
    for (int r = 0; r < n; r++)
        for (int l = 0; l < width; l++) acc[r][l] = t->bias ? t->bias[l] : 0.0f;
    const float *w = t->w;
    for (int64_t cb = 0; cb < t->blocks; cb++)
        for (int64_t ky = 0; ky < t->kh; ky++)
            for (int64_t kx = 0; kx < t->kw; kx++)
                for (int c = 0; c < t->lanes; c++, w += width) {
                    const float *p = t->x + cb * t->cb_stride + ky * t->ky_stride + kx * t->dx + c;
                    for (int r = 0; r < n; r++)
                        for (int l = 0; l < width; l++) acc[r][l] += p[r * t->sx] * w[l];
                }
    for (int r = 0; r < n; r++)
        for (int l = 0; l < width; l++) {
            size_t at = (size_t)(l / BLK) * t->plane + (size_t)r * BLK + (size_t)(l % BLK);
            t->y[at] = finish_one(f, acc[r][l], t->z ? t->z + at : NULL);
        }
}

void ak_f32_nchwc_conv_row__ref(const ak__kf_nchwc_tile *t, int nb, int64_t n,
                                const ak__sgemm_tile_epi *fin) {
    ak__kf_nchwc_tile u = *t;
    int64_t tiles = ak__nchwc_tile_count(n, TILE_ROWS);
    for (int64_t i = 0, done = 0; i < tiles; i++) {
        int size = ak__nchwc_tile_rows(n, tiles, i, done);
        conv_tile(&u, size, nb, fin);
        ak__nchwc_tile_skip(&u, size);
        done += size;
    }
}

void ak_f32_nchwc_dw_rows__ref(const ak__kf_win2d *g, const ak__kf_nchwc_dw *d, int64_t oy0,
                               int64_t oy1, const ak__sgemm_tile_epi *fin) {
    for (int64_t oy = oy0; oy < oy1; oy++)
        for (int64_t ox = 0; ox < g->out[1]; ox++) {
            int64_t ky0, ky1, kx0, kx1;
            ak__win2d_axis_taps(g, 0, oy, &ky0, &ky1);
            ak__win2d_axis_taps(g, 1, ox, &kx0, &kx1);
            float acc[BLK];
            for (int l = 0; l < BLK; l++) acc[l] = d->bias ? d->bias[l] : 0.0f;
            for (int64_t ky = ky0; ky < ky1; ky++) {
                int64_t iy = oy * g->s[0] - g->pb[0] + ky * g->d[0];
                for (int64_t kx = kx0; kx < kx1; kx++) {
                    int64_t ix = ox * g->s[1] - g->pb[1] + kx * g->d[1];
                    const float *xv = d->x + (iy * g->in[1] + ix) * BLK;
                    const float *wv = d->w + (ky * g->k[1] + kx) * BLK;
                    for (int l = 0; l < BLK; l++) acc[l] += xv[l] * wv[l];
                }
            }
            size_t at = (size_t)(oy * g->out[1] + ox) * BLK;
            for (int l = 0; l < BLK; l++)
                d->y[at + (size_t)l] = finish_one(fin, acc[l], d->z ? d->z + at + l : NULL);
        }
}

/* yb[0..n) = outputs (oy, ox0..ox0+n) of one block, 8 channels each. */
static void maxpool_outputs(const ak__kf_win2d *g, const float *xb, int64_t oy, int64_t ox0,
                            int64_t n, float *yb) {
    int64_t H = g->in[0], W = g->in[1], y0 = oy * g->s[0] - g->pb[0];
    for (int64_t ox = 0; ox < n; ox++) {
        int64_t x0 = (ox0 + ox) * g->s[1] - g->pb[1];
        float acc[BLK];
        for (int l = 0; l < BLK; l++) acc[l] = -FLT_MAX;
        for (int64_t ky = 0; ky < g->k[0]; ky++) {
            int64_t iy = y0 + ky * g->d[0];
            if (iy < 0 || iy >= H) continue;
            for (int64_t kx = 0; kx < g->k[1]; kx++) {
                int64_t ix = x0 + kx * g->d[1];
                if (ix < 0 || ix >= W) continue;
                const float *v = xb + (iy * W + ix) * BLK;
                for (int l = 0; l < BLK; l++) acc[l] = v[l] > acc[l] ? v[l] : acc[l];
            }
        }
        for (int l = 0; l < BLK; l++) yb[ox * BLK + l] = acc[l];
    }
}

void ak_f32_nchwc_maxpool_row__ref(const ak__kf_win2d *g, const float *xb, int64_t oy, float *y,
                                   uint64_t P, int y_blocked) {
    int64_t OW = g->out[1];
    if (y_blocked) {
        maxpool_outputs(g, xb, oy, 0, OW, y);
        return;
    }
    float row[64 * BLK];
    for (int64_t ox0 = 0; ox0 < OW; ox0 += 64) { /* the row in pieces of 64 outputs */
        int64_t n = OW - ox0 < 64 ? OW - ox0 : 64;
        maxpool_outputs(g, xb, oy, ox0, n, row);
        for (int l = 0; l < BLK; l++)
            for (int64_t ox = 0; ox < n; ox++) y[(uint64_t)l * P + (uint64_t)(ox0 + ox)] = row[ox * BLK + l];
    }
}

/* y + (bias + z), then the activation: the order the operators' scalar loops used. */
void ak_f32_tile_finish__ref(float *y, uint64_t ld, size_t m, size_t n,
                             const ak__sgemm_tile_epi *fin) {
    for (size_t r = 0; r < m; r++) {
        float bv = fin->bias ? fin->bias[r] : 0.0f, *yr = y + r * ld;
        const float *zr = fin->z ? fin->z + r * ld : NULL;
        for (size_t j = 0; j < n; j++) {
            float v = zr ? yr[j] + (bv + zr[j]) : fin->bias ? yr[j] + bv : yr[j];
            yr[j] = finish_one(fin, v, NULL);
        }
    }
}
