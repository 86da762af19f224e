/* Scalar references of the Winograd F(4×4, 3×3) transforms (kf_infer.h), one tile at a
 * time: Bᵀ d B of a 6×6 input patch, Aᵀ m A of a 6×6 product, and the blocked sides'
 * copies. The 1-D transforms spell out the AVX2 variant's operations, multiply and add
 * rounded apart where it fuses them. */
#include <string.h>

#include "kernels/dispatch.h"

/* Bᵀ d along one axis: d[0..6) (s apart) → v[0..6) (vs apart). */
static void input_1d(const float *d, size_t s, float *v, size_t vs) {
    float d0 = d[0], d1 = d[s], d2 = d[2 * s], d3 = d[3 * s], d4 = d[4 * s], d5 = d[5 * s];
    float t = d4 - d2, u = d3 - d1;
    v[0] = 4 * d0 + (d4 - 5 * d2);
    v[vs] = (d3 + d4) - 4 * (d1 + d2);
    v[2 * vs] = 4 * (d1 - d2) + (d4 - d3);
    v[3 * vs] = 2 * u + t;
    v[4 * vs] = t - 2 * u;
    v[5 * vs] = 4 * d1 + (d5 - 5 * d3);
}

/* Aᵀ m along one axis: m[0..6) (s apart) → o[0..4) (os apart). */
static void output_1d(const float *m, size_t s, float *o, size_t os) {
    float s12 = m[s] + m[2 * s], d12 = m[s] - m[2 * s];
    float s34 = m[3 * s] + m[4 * s], d34 = m[3 * s] - m[4 * s];
    o[0] = (m[0] + s12) + s34;
    o[os] = 2 * d34 + d12;
    o[2 * os] = 4 * s34 + s12;
    o[3 * os] = (8 * d34 + d12) + m[5 * s];
}

void ak_f32_wino_input__ref(const ak__kf_wino *w, const float *pad, size_t c, float *V) {
    size_t nr = w->nr, xi_stride = w->S * w->C * nr;
    for (size_t t = 0; t < w->T; t++) {
        const float *p = pad + 4 * (t / w->TW) * w->Wp + 4 * (t % w->TW);
        float wx[6][6], out[6];
        for (size_t r = 0; r < 6; r++) input_1d(p + r * w->Wp, 1, wx[r], 1); /* along x */
        float *dst = V + (t / nr * w->C + c) * nr + t % nr;
        for (size_t k = 0; k < 6; k++) { /* along y */
            input_1d(&wx[0][k], 6, out, 1);
            for (size_t r = 0; r < 6; r++) dst[(r * 6 + k) * xi_stride] = out[r];
        }
    }
}

void ak_f32_wino_output__ref(const ak__kf_wino *w, const float *Mo, size_t m, float *y) {
    for (size_t t = 0; t < w->T; t++) {
        float mv[36], s[6][4], o[4][4];
        for (size_t xi = 0; xi < 36; xi++) mv[xi] = Mo[xi * w->Mp * w->Tp + m * w->Tp + t];
        for (size_t r = 0; r < 6; r++) output_1d(mv + 6 * r, 1, s[r], 1); /* along x */
        for (size_t j = 0; j < 4; j++) output_1d(&s[0][j], 4, &o[0][j], 4); /* along y */
        size_t ty = 4 * (t / w->TW), tx = 4 * (t % w->TW);
        for (size_t i = 0; i < 4 && ty + i < w->OH; i++)
            for (size_t j = 0; j < 4 && tx + j < w->OW; j++) y[(ty + i) * w->OW + tx + j] = o[i][j];
    }
}

void ak_f32_wino_pad_blocked__ref(const ak__kf_wino *w, const float *src, float *dst) {
    size_t plane = w->Hp * w->Wp;
    memset(dst, 0, 8 * plane * sizeof *dst);
    for (size_t y = 0; y < w->H; y++)
        for (size_t x = 0; x < w->W; x++)
            for (size_t l = 0; l < 8; l++)
                dst[l * plane + (w->ph + y) * w->Wp + w->pw + x] = src[(y * w->W + x) * 8 + l];
}

void ak_f32_wino_finish_block__ref(const float *planes, size_t P, const float *bias8,
                                   const float *z, float *y, const ak__sgemm_tile_epi *fin) {
    for (size_t p = 0; p < P; p++)
        for (size_t l = 0; l < 8; l++) {
            float v = planes[l * P + p] + (bias8 ? bias8[l] : 0.0f);
            if (z) v += z[p * 8 + l];
            if (fin->act == AK_SGEMM_ACT_MAX) v = v > fin->lo ? v : fin->lo;
            else if (fin->act == AK_SGEMM_ACT_CLAMP) v = v < fin->lo ? fin->lo : v > fin->hi ? fin->hi : v;
            y[p * 8 + l] = v;
        }
}
