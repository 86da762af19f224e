/* AVX2 + FMA Winograd F(4×4, 3×3) transforms (kf_infer.h), 8 tiles a vector (lanes =
 * tiles): Bᵀ d B of a group's patches, whose stride-4 columns are deinterleaved in
 * registers from 32 contiguous floats (or from each tile's 4 where the 8 span tile rows),
 * stored with whole vectors straight into the microkernel's packed B layout (groups start
 * on multiples of 8 tiles; masked stores cost ~7× more on Zen); Aᵀ m A interleaved back
 * into rows of 4 floats per tile; and the blocked sides' 8×8 transposes. */
#include <immintrin.h>
#include <string.h>

#include "kernels/dispatch.h"
#include "kernels/x86/nn_avx2.h"

#define LANES 8 /* tiles per group */

static inline size_t min_sz(size_t a, size_t b) { return a < b ? a : b; }

/* 4×4 transposes within each 128-bit half: r[i][j] → r[j][i]. */
static inline void transpose4_halves(__m256 r[4]) {
    __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    r[0] = _mm256_shuffle_ps(t0, t2, 0x44);
    r[1] = _mm256_shuffle_ps(t0, t2, 0xEE);
    r[2] = _mm256_shuffle_ps(t1, t3, 0x44);
    r[3] = _mm256_shuffle_ps(t1, t3, 0xEE);
}

/* 32 floats holding 8 runs of 4 (tile l's at 4l..4l+3) → c[j] lane l = src[4l + j]. */
static inline void deinterleave4(const float *src, __m256 c[4]) {
    __m256 a0 = _mm256_loadu_ps(src), a1 = _mm256_loadu_ps(src + 8);
    __m256 a2 = _mm256_loadu_ps(src + 16), a3 = _mm256_loadu_ps(src + 24);
    c[0] = _mm256_permute2f128_ps(a0, a2, 0x20);
    c[1] = _mm256_permute2f128_ps(a0, a2, 0x31);
    c[2] = _mm256_permute2f128_ps(a1, a3, 0x20);
    c[3] = _mm256_permute2f128_ps(a1, a3, 0x31);
    transpose4_halves(c);
}

/* The inverse: c[j] lane l → dst[4l + j]. */
static inline void interleave4(__m256 c[4], __m256 out[4]) {
    transpose4_halves(c);
    out[0] = _mm256_permute2f128_ps(c[0], c[1], 0x20);
    out[1] = _mm256_permute2f128_ps(c[2], c[3], 0x20);
    out[2] = _mm256_permute2f128_ps(c[0], c[1], 0x31);
    out[3] = _mm256_permute2f128_ps(c[2], c[3], 0x31);
}

/* Bᵀ d along one axis: d[0..6) (s apart) → v[0..6) (vs apart). */
static inline void input_1d(const __m256 *d, size_t s, __m256 *v, size_t vs) {
    const __m256 two = _mm256_set1_ps(2), four = _mm256_set1_ps(4), five = _mm256_set1_ps(5);
    __m256 d0 = d[0], d1 = d[s], d2 = d[2 * s], d3 = d[3 * s], d4 = d[4 * s], d5 = d[5 * s];
    __m256 t = _mm256_sub_ps(d4, d2), u = _mm256_sub_ps(d3, d1);
    v[0] = _mm256_fmadd_ps(four, d0, _mm256_fnmadd_ps(five, d2, d4));
    v[vs] = _mm256_fnmadd_ps(four, _mm256_add_ps(d1, d2), _mm256_add_ps(d3, d4));
    v[2 * vs] = _mm256_fmadd_ps(four, _mm256_sub_ps(d1, d2), _mm256_sub_ps(d4, d3));
    v[3 * vs] = _mm256_fmadd_ps(two, u, t);
    v[4 * vs] = _mm256_fnmadd_ps(two, u, t);
    v[5 * vs] = _mm256_fmadd_ps(four, d1, _mm256_fnmadd_ps(five, d3, d5));
}

/* Aᵀ m along one axis: m[0..6) (s apart) → o[0..4) (os apart). */
static inline void output_1d(const __m256 *m, size_t s, __m256 *o, size_t os) {
    __m256 s12 = _mm256_add_ps(m[s], m[2 * s]), d12 = _mm256_sub_ps(m[s], m[2 * s]);
    __m256 s34 = _mm256_add_ps(m[3 * s], m[4 * s]), d34 = _mm256_sub_ps(m[3 * s], m[4 * s]);
    o[0] = _mm256_add_ps(_mm256_add_ps(m[0], s12), s34);
    o[os] = _mm256_fmadd_ps(_mm256_set1_ps(2), d34, d12);
    o[2 * os] = _mm256_fmadd_ps(_mm256_set1_ps(4), s34, s12);
    o[3 * os] = _mm256_add_ps(_mm256_fmadd_ps(_mm256_set1_ps(8), d34, d12), m[5 * s]);
}

/* Where the 8 tiles of the group from t0 start in a plane of `ld` floats a row: tile t's
 * top-left at (4·ty, 4·tx). Lanes past the last tile repeat it (their results are never
 * read). Returns 1 when all 8 lie in one tile row, left to right (4 floats apart). */
static int group_offsets(const ak__kf_wino *w, size_t t0, size_t ld, size_t off[LANES]) {
    for (size_t l = 0; l < LANES; l++) {
        size_t t = min_sz(t0 + l, w->T - 1);
        off[l] = 4 * (t / w->TW) * ld + 4 * (t % w->TW);
    }
    return t0 % w->TW + LANES <= w->TW;
}

/* Columns [k0, k0+4) of one patch row of the 8 tiles at src + off[l]: c[j] lane l =
 * src[off[l] + k0 + j]. */
static inline void patch_columns(const float *src, const size_t *off, int row, size_t k0,
                                 __m256 c[4]) {
    if (row) {
        deinterleave4(src + off[0] + k0, c);
        return;
    }
    for (int j = 0; j < 4; j++)
        c[j] = _mm256_loadu2_m128(src + off[j + 4] + k0, src + off[j] + k0);
    transpose4_halves(c);
}

void ak_f32_wino_input__avx2(const ak__kf_wino *w, const float *pad, size_t c, float *V) {
    size_t nr = w->nr, C = w->C, xi_stride = w->S * C * nr;
    for (size_t t0 = 0; t0 < w->T; t0 += LANES) {
        size_t off[LANES];
        int row = group_offsets(w, t0, w->Wp, off);
        const float *src = pad;
        __m256 d[8], wx[6][6], out[6];
        for (int r = 0; r < 6; r++, src += w->Wp) { /* along x, patch row r */
            patch_columns(src, off, row, 0, d);
            patch_columns(src, off, row, 4, d + 4);
            input_1d(d, 1, wx[r], 1);
        }
        float *dst = V + (t0 / nr * C + c) * nr + t0 % nr;
        for (int k = 0; k < 6; k++) { /* along y */
            input_1d(&wx[0][k], 6, out, 1);
            for (int r = 0; r < 6; r++) _mm256_storeu_ps(dst + (size_t)(r * 6 + k) * xi_stride, out[r]);
        }
    }
}

/* Output rows i of the 8 tiles from t0 on (out[i][q]: tiles 2q and 2q+1, 4 floats each)
 * into plane y: whole vectors when the group lies in one tile row away from the plane's
 * edges, else each tile's part inside the plane. */
static void store_group(const ak__kf_wino *w, float *y, size_t t0, __m256 out[4][4]) {
    size_t off[LANES], OW = w->OW;
    int row = group_offsets(w, t0, OW, off);
    size_t ty = t0 / w->TW, tx0 = t0 % w->TW;
    if (row && 4 * (tx0 + LANES) <= OW && 4 * ty + 4 <= w->OH) {
        for (size_t i = 0; i < 4; i++)
            for (int q = 0; q < 4; q++) _mm256_storeu_ps(y + off[0] + i * OW + 8 * (size_t)q, out[i][q]);
        return;
    }
    float tmp[4][4 * LANES];
    for (size_t i = 0; i < 4; i++)
        for (int q = 0; q < 4; q++) _mm256_storeu_ps(tmp[i] + 8 * q, out[i][q]);
    for (size_t l = 0; l < LANES && t0 + l < w->T; l++) {
        size_t t = t0 + l, rows = min_sz(4, w->OH - 4 * (t / w->TW));
        size_t cols = min_sz(4, OW - 4 * (t % w->TW));
        for (size_t i = 0; i < rows; i++) memcpy(y + off[l] + i * OW, tmp[i] + 4 * l, cols * sizeof *y);
    }
}

void ak_f32_wino_output__avx2(const ak__kf_wino *w, const float *Mo, size_t m, float *y) {
    for (size_t t0 = 0; t0 < w->T; t0 += LANES) {
        const float *src = Mo + m * w->Tp + t0;
        __m256 mv[36], s[6][4], o[4][4], out[4][4];
        for (int xi = 0; xi < 36; xi++) mv[xi] = _mm256_loadu_ps(src + (size_t)xi * w->Mp * w->Tp);
        for (int r = 0; r < 6; r++) output_1d(mv + 6 * r, 1, s[r], 1); /* along x */
        for (int j = 0; j < 4; j++) output_1d(&s[0][j], 4, &o[0][j], 4);  /* along y */
        for (int i = 0; i < 4; i++) interleave4(o[i], out[i]);
        store_group(w, y, t0, out);
    }
}

/* 8 positions of a row at a time through an 8×8 transpose; only the border of a plane
 * is zeroed. */
void ak_f32_wino_pad_blocked__avx2(const ak__kf_wino *w, const float *src, float *dst) {
    size_t H = w->H, W = w->W, ph = w->ph, pw = w->pw, Wp = w->Wp;
    size_t plane = w->Hp * Wp, right = Wp - pw - W;
    for (size_t l = 0; l < LANES; l++) {
        float *d = dst + l * plane;
        memset(d, 0, (ph * Wp + pw) * sizeof *d);
        for (size_t y = 0; y + 1 < H; y++) memset(d + (ph + y) * Wp + pw + W, 0, (right + pw) * sizeof *d);
        size_t tail = (ph + H - 1) * Wp + pw + W; /* past the last row: to the end */
        memset(d + tail, 0, (plane - tail) * sizeof *d);
    }
    for (size_t y = 0; y < H; y++) {
        const float *row = src + y * W * LANES;
        float *d = dst + (ph + y) * Wp + pw;
        size_t x = 0;
        for (; x + LANES <= W; x += LANES) {
            __m256 r[8];
            for (int j = 0; j < 8; j++) r[j] = _mm256_loadu_ps(row + (x + (size_t)j) * LANES);
            ak__nn_transpose8x8(r);
            for (size_t l = 0; l < LANES; l++) _mm256_storeu_ps(d + l * plane + x, r[l]);
        }
        for (; x < W; x++)
            for (size_t l = 0; l < LANES; l++) d[l * plane + x] = row[x * LANES + l];
    }
}

void ak_f32_wino_finish_block__avx2(const float *planes, size_t P, const float *bias8,
                                    const float *z, float *y, const ak__sgemm_tile_epi *fin) {
    __m256 lo, hi;
    ak__nn_finish_bounds(fin, &lo, &hi);
    __m256 bias = bias8 ? _mm256_loadu_ps(bias8) : _mm256_setzero_ps();
    __m256i all = ak__nn_first_lanes(LANES);
    __m256 r[8];
    for (size_t p = 0; p < P; p += LANES) {
        size_t n = min_sz(LANES, P - p);
        if (n == LANES) {
            for (int l = 0; l < 8; l++) r[l] = _mm256_loadu_ps(planes + (size_t)l * P + p);
            ak__nn_transpose8x8(r);
        } else {
            float t[LANES][LANES];
            for (size_t j = 0; j < n; j++)
                for (size_t l = 0; l < LANES; l++) t[j][l] = planes[l * P + p + j];
            for (size_t j = 0; j < n; j++) r[j] = _mm256_loadu_ps(t[j]);
        }
        for (size_t j = 0; j < n; j++)
            _mm256_storeu_ps(y + (p + j) * LANES,
                             ak__nn_finish8(_mm256_add_ps(r[j], bias), z ? z + (p + j) * LANES : NULL,
                                            all, 1, fin->act, lo, hi));
    }
}
