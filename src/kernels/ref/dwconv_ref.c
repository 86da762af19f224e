/* Scalar references of the depthwise kernels over plain planes (kf_infer.h): the rows of
 * one phase-split plane, the strided row copy that builds it, and the channel-interleaved
 * eight planes. Sums run bias first, then the taps in order, multiply and add rounded
 * apart (the AVX2 variants fuse them). */
#include <string.h>

#include "kernels/dispatch.h"

static float finish_one(const ak__sgemm_tile_epi *f, float v) {
    if (f->act == AK_SGEMM_ACT_MAX) v = v > f->lo ? v : f->lo;
    else if (f->act == AK_SGEMM_ACT_CLAMP) v = v < f->lo ? f->lo : v > f->hi ? f->hi : v;
    return v;
}

void ak_f32_dw_rows__ref(const ak__kf_dw_plane *p, const ak__sgemm_tile_epi *fin) {
    for (size_t oy = 0; oy < p->OH; oy++) {
        const float *base = p->sc + oy * p->row_step;
        float *o = p->y + oy * p->OW;
        for (size_t ox = 0; ox < p->OW; ox++) o[ox] = p->bias;
        for (size_t t = 0; t < p->taps; t++) {
            const float *src = base + p->off[t];
            float wt = p->w[t];
            for (size_t ox = 0; ox < p->OW; ox++) o[ox] += wt * src[ox];
        }
        const float *z = p->z ? p->z + oy * p->OW : NULL;
        for (size_t ox = 0; ox < p->OW; ox++) o[ox] = finish_one(fin, z ? o[ox] + z[ox] : o[ox]);
    }
}

void ak_f32_strided_copy__ref(float *dst, const float *src, int64_t n, int64_t stride) {
    for (int64_t j = 0; j < n; j++) dst[j] = src[j * stride];
}

void ak_f32_dw8_planes__ref(const ak__kf_dw8 *a, const ak__sgemm_tile_epi *fin) {
    /* the interiors, interleaved */
    int64_t rows = a->H < (int64_t)a->rows - a->pt ? a->H : (int64_t)a->rows - a->pt;
    int64_t cols = a->W < (int64_t)a->cols - a->pl ? a->W : (int64_t)a->cols - a->pl;
    for (int64_t iy = 0; iy < rows; iy++)
        for (int64_t ix = 0; ix < cols; ix++)
            for (int j = 0; j < 8; j++)
                a->sc8[(((size_t)(iy + a->pt)) * a->cols + (size_t)(ix + a->pl)) * 8 + (size_t)j] =
                    a->x[(uint64_t)j * a->Pin + (uint64_t)(iy * a->W + ix)];
    /* every position, lane by lane */
    size_t row_step = (size_t)a->s0 * a->cols * 8, col_step = (size_t)a->s1 * 8;
    for (uint64_t p = 0; p < a->P; p++) {
        const float *b = a->sc8 + (p / a->OW) * row_step + (p % a->OW) * col_step;
        for (int j = 0; j < 8; j++) {
            float acc = a->bias8[j];
            for (size_t t = 0; t < a->taps; t++) acc += a->wt[8 * t + (size_t)j] * b[a->off[t] + (size_t)j];
            a->out8[p * 8 + (uint64_t)j] = acc;
        }
    }
    /* back into the planes, finished */
    for (int j = 0; j < 8; j++)
        for (uint64_t p = 0; p < a->P; p++) {
            float v = a->out8[p * 8 + (uint64_t)j];
            if (a->z) v += a->z[(uint64_t)j * a->P + p];
            a->y[(uint64_t)j * a->P + p] = finish_one(fin, v);
        }
}
