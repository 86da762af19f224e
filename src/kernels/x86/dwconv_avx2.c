/* AVX2 + FMA depthwise kernels over plain planes (kf_infer.h): a phase-split plane's
 * rows 8 outputs a vector (up to 4 vectors in flight), its row copies, and eight
 * channel-interleaved planes, one vector per output position (8 positions in flight).
 * Bias, Z and a ReLU/Clip are applied in registers before the store: on MobileNetV2's
 * 7×7 and 14×14 planes a second pass had outweighed the 9 FMAs per output. */
#include <immintrin.h>

#include "kernels/dispatch.h"
#include "kernels/x86/nn_avx2.h"

void ak_f32_dw_rows__avx2(const ak__kf_dw_plane *pp, const ak__sgemm_tile_epi *fin) {
    size_t OH = pp->OH, OW = pp->OW, taps = pp->taps, row_step = pp->row_step;
    const size_t *off = pp->off;
    __m256 wv[AK_KF_DW_MAX_TAPS];
    for (size_t t = 0; t < taps; t++) wv[t] = _mm256_set1_ps(pp->w[t]);
    __m256 bv = _mm256_set1_ps(pp->bias);
    int k = fin->act;
    __m256 lo, hi;
    ak__nn_finish_bounds(fin, &lo, &hi);
    /* lanes below OW % 8 of the last, partial vector */
    __m256i tail = ak__nn_first_lanes((int64_t)(OW % 8));
    for (size_t oy = 0; oy < OH; oy++) {
        const float *base = pp->sc + oy * row_step;
        float *o = pp->y + oy * OW;
        const float *z = pp->z ? pp->z + oy * OW : NULL;
        size_t ox = 0;
        for (; ox + 32 <= OW; ox += 32) {
            __m256 a0 = bv, a1 = bv, a2 = bv, a3 = bv;
            for (size_t t = 0; t < taps; t++) {
                const float *s = base + off[t] + ox;
                a0 = _mm256_fmadd_ps(wv[t], _mm256_loadu_ps(s), a0);
                a1 = _mm256_fmadd_ps(wv[t], _mm256_loadu_ps(s + 8), a1);
                a2 = _mm256_fmadd_ps(wv[t], _mm256_loadu_ps(s + 16), a2);
                a3 = _mm256_fmadd_ps(wv[t], _mm256_loadu_ps(s + 24), a3);
            }
            __m256 acc[4] = {a0, a1, a2, a3};
            for (int v = 0; v < 4; v++)
                _mm256_storeu_ps(o + ox + 8 * v,
                                 ak__nn_finish8(acc[v], z ? z + ox + 8 * v : NULL, tail, 1, k, lo, hi));
        }
        for (; ox + 16 <= OW; ox += 16) {
            __m256 a0 = bv, a1 = bv;
            for (size_t t = 0; t < taps; t++) {
                const float *s = base + off[t] + ox;
                a0 = _mm256_fmadd_ps(wv[t], _mm256_loadu_ps(s), a0);
                a1 = _mm256_fmadd_ps(wv[t], _mm256_loadu_ps(s + 8), a1);
            }
            _mm256_storeu_ps(o + ox, ak__nn_finish8(a0, z ? z + ox : NULL, tail, 1, k, lo, hi));
            _mm256_storeu_ps(o + ox + 8, ak__nn_finish8(a1, z ? z + ox + 8 : NULL, tail, 1, k, lo, hi));
        }
        for (; ox < OW; ox += 8) { /* the layout's slack makes the last load safe */
            __m256 a0 = bv;
            for (size_t t = 0; t < taps; t++)
                a0 = _mm256_fmadd_ps(wv[t], _mm256_loadu_ps(base + off[t] + ox), a0);
            int full = ox + 8 <= OW;
            a0 = ak__nn_finish8(a0, z ? z + ox : NULL, tail, full, k, lo, hi);
            if (full) _mm256_storeu_ps(o + ox, a0);
            else _mm256_maskstore_ps(o + ox, tail, a0);
        }
    }
}

/* Stride 1: MobileNetV2's rows of 7 and 14 are too short for a memcpy call. Stride 2:
 * two loads and a shuffle give 8 even elements, reads staying below src[2n−1]. */
void ak_f32_strided_copy__avx2(float *dst, const float *src, int64_t n, int64_t stride) {
    int64_t j = 0;
    if (stride == 1) {
        for (; j + 8 <= n; j += 8) _mm256_storeu_ps(dst + j, _mm256_loadu_ps(src + j));
        if (j < n) {
            __m256i m = ak__nn_first_lanes(n - j);
            _mm256_maskstore_ps(dst + j, m, _mm256_maskload_ps(src + j, m));
        }
        return;
    }
    if (stride == 2)
        for (; j + 9 <= n; j += 8) {
            __m256 a = _mm256_loadu_ps(src + 2 * j), b = _mm256_loadu_ps(src + 2 * j + 8);
            __m256 t = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0));
            t = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(t), _MM_SHUFFLE(3, 1, 2, 0)));
            _mm256_storeu_ps(dst + j, t);
        }
    for (; j < n; j++) dst[j] = src[j * stride];
}

/* ---- 8 planes at once, channel-interleaved ----------------------------------------- */

/* The interiors of the 8 input planes into the interleaved padded layout. */
static void dw8_fill(const ak__kf_dw8 *a) {
    int64_t H = a->H, W = a->W, pt = a->pt, pl = a->pl;
    int64_t rows = H < (int64_t)a->rows - pt ? H : (int64_t)a->rows - pt;
    int64_t cols = W < (int64_t)a->cols - pl ? W : (int64_t)a->cols - pl;
    for (int64_t iy = 0; iy < rows; iy++) {
        float *dst = a->sc8 + ((size_t)(iy + pt) * a->cols + (size_t)pl) * 8;
        for (int64_t ix = 0; ix < cols; ix += 8) {
            int64_t n = cols - ix < 8 ? cols - ix : 8;
            __m256i m = ak__nn_first_lanes(n);
            __m256 r[8];
#pragma GCC unroll 8
            for (int j = 0; j < 8; j++) r[j] = _mm256_maskload_ps(a->x + j * a->Pin + iy * W + ix, m);
            ak__nn_transpose8x8(r);
            float *d = dst + ix * 8;
#pragma GCC unroll 8
            for (int p = 0; p < 8; p++)
                if (p < n) _mm256_store_ps(d + p * 8, r[p]);
        }
    }
}

/* All output positions: bias + taps, 8 positions per step (8 independent FMA chains)
 * running across output rows. The last step repeats the last position for its missing
 * lanes, writing past P into out8's padding. */
static void dw8_compute(const ak__kf_dw8 *a) {
    size_t OW = a->OW, P = a->P, taps = a->taps;
    size_t row_step = (size_t)a->s0 * a->cols * 8, col_step = (size_t)a->s1 * 8;
    const size_t *off = a->off;
    const float *sc = a->sc8, *wt = a->wt;
    __m256 bv = _mm256_loadu_ps(a->bias8);
    size_t oy = 0, ox = 0;
    for (size_t p = 0; p < P; p += 8) {
        const float *b[8];
#pragma GCC unroll 8
        for (size_t q = 0; q < 8; q++) {
            b[q] = sc + oy * row_step + ox * col_step;
            if (p + q + 1 < P && ++ox == OW) ox = 0, oy++;
        }
        __m256 a0 = bv, a1 = bv, a2 = bv, a3 = bv, a4 = bv, a5 = bv, a6 = bv, a7 = bv;
        for (size_t t = 0; t < taps; t++) {
            __m256 w = _mm256_load_ps(wt + 8 * t);
            size_t o = off[t];
            a0 = _mm256_fmadd_ps(w, _mm256_load_ps(b[0] + o), a0);
            a1 = _mm256_fmadd_ps(w, _mm256_load_ps(b[1] + o), a1);
            a2 = _mm256_fmadd_ps(w, _mm256_load_ps(b[2] + o), a2);
            a3 = _mm256_fmadd_ps(w, _mm256_load_ps(b[3] + o), a3);
            a4 = _mm256_fmadd_ps(w, _mm256_load_ps(b[4] + o), a4);
            a5 = _mm256_fmadd_ps(w, _mm256_load_ps(b[5] + o), a5);
            a6 = _mm256_fmadd_ps(w, _mm256_load_ps(b[6] + o), a6);
            a7 = _mm256_fmadd_ps(w, _mm256_load_ps(b[7] + o), a7);
        }
        float *o = a->out8 + p * 8;
        _mm256_store_ps(o, a0);
        _mm256_store_ps(o + 8, a1);
        _mm256_store_ps(o + 16, a2);
        _mm256_store_ps(o + 24, a3);
        _mm256_store_ps(o + 32, a4);
        _mm256_store_ps(o + 40, a5);
        _mm256_store_ps(o + 48, a6);
        _mm256_store_ps(o + 56, a7);
    }
}

/* The interleaved output back into 8 planes, + Z and a ReLU/Clip. The positions of a
 * plane are contiguous in both layouts, so blocks of 8 run across output rows, and only
 * the plane's last block is partial: written lane by lane, as masked stores are slow on
 * AMD cores. */
static void dw8_store(const ak__kf_dw8 *a, const ak__sgemm_tile_epi *fin) {
    uint64_t P = a->P;
    int k = fin->act;
    __m256 lo, hi;
    ak__nn_finish_bounds(fin, &lo, &hi);
    for (uint64_t at = 0; at < P; at += 8) {
        uint64_t n = P - at < 8 ? P - at : 8;
        __m256i m = ak__nn_first_lanes((int64_t)n);
        __m256 r[8];
#pragma GCC unroll 8
        for (uint64_t p = 0; p < 8; p++)
            r[p] = p < n ? _mm256_load_ps(a->out8 + (at + p) * 8) : _mm256_setzero_ps();
        ak__nn_transpose8x8(r);
#pragma GCC unroll 8
        for (uint64_t j = 0; j < 8; j++) {
            __m256 v = ak__nn_finish8(r[j], a->z ? a->z + j * P + at : NULL, m, n == 8, k, lo, hi);
            float *dst = a->y + j * P + at;
            if (n == 8) {
                _mm256_storeu_ps(dst, v);
                continue;
            }
            float lane[8];
            _mm256_storeu_ps(lane, v);
            for (uint64_t p = 0; p < n; p++) dst[p] = lane[p];
        }
    }
}

void ak_f32_dw8_planes__avx2(const ak__kf_dw8 *a, const ak__sgemm_tile_epi *fin) {
    dw8_fill(a);
    dw8_compute(a);
    dw8_store(a, fin);
}
