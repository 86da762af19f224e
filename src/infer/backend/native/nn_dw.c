/* Depthwise 2-D convolution of one plane (Conv with group == C == M), the MobileNet case.
 *
 * The input plane is first copied into scratch with its padding made explicit and its
 * columns split by phase modulo the horizontal stride: padded column c lands in phase
 * c % sw at index c / sw. Output column ox then reads tap kx at index ox + (kx*dw)/sw of
 * phase (kx*dw) % sw, so every tap is a contiguous, bounds-free run for any stride and
 * dilation, and 8 outputs are one vector load + FMA per tap. Phase rows are padded to a
 * multiple of 8 (plus slack) so full-vector loads never leave the scratch. */
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define NN_DW_X86 1
#endif

#include "infer/backend/native/nn_internal.h"

static size_t round8(size_t v) { return (v + 7) & ~(size_t)7; }

/* Layout of the phase-split padded plane. */
typedef struct dw_layout {
    size_t rows, phases, width; /* width: floats per phase row */
} dw_layout;

static dw_layout dw_layout_of(const ak__nn_geom *g) {
    dw_layout l;
    l.rows = (size_t)((g->out[0] - 1) * g->s[0] + (g->k[0] - 1) * g->d[0] + 1);
    l.phases = (size_t)g->s[1];
    l.width = round8(round8((size_t)g->out[1]) + (size_t)((g->k[1] - 1) * g->d[1] / g->s[1]));
    return l;
}

size_t ak__nn_dw_scratch_floats(const ak__nn_geom *g) {
    dw_layout l = dw_layout_of(g);
    return l.rows * l.phases * l.width;
}

int ak__nn_have_avx2(void) {
    ak_cpu_info info;
    if (ak_cpu_get_info(&info) != AK_OK) return 0;
    return info.active_isa >= AK_ISA_AVX2;
}

/* dst[j] = src[j*sw] for j in [0, n). */
static void strided_copy(float *dst, const float *src, int64_t n, int64_t sw) {
    for (int64_t j = 0; j < n; j++) dst[j] = src[j * sw];
}

#ifdef NN_DW_X86
/* Stride 2: two loads and a shuffle give 8 even elements. Reads stay below src[2n-1]. */
__attribute__((target("avx2,fma"))) static void strided_copy2_avx2(float *dst, const float *src,
                                                                    int64_t n) {
    int64_t j = 0;
    for (; j + 9 <= n; j += 8) {
        __m256 a = _mm256_loadu_ps(src + 2 * j), b = _mm256_loadu_ps(src + 2 * j + 8);
        __m256 t = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0));
        t = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(t), _MM_SHUFFLE(3, 1, 2, 0)));
        _mm256_storeu_ps(dst + j, t);
    }
    for (; j < n; j++) dst[j] = src[2 * j];
}
#endif

/* Fills the phase-split padded copy of `in` (H, W). */
static void dw_fill(const ak__nn_geom *g, const dw_layout *l, const float *in, float *sc,
                    int avx2) {
    int64_t H = g->in[0], W = g->in[1], pt = g->pb[0], pl = g->pb[1], sw = g->s[1];
    for (size_t r = 0; r < l->rows; r++) {
        int64_t iy = (int64_t)r - pt;
        float *row = sc + r * l->phases * l->width;
        if (iy < 0 || iy >= H) {
            memset(row, 0, l->phases * l->width * sizeof *row);
            continue;
        }
        const float *src = in + iy * W;
        if (sw == 1) { /* one phase: zeros, a copy, zeros */
            int64_t lo = pl < (int64_t)l->width ? pl : (int64_t)l->width;
            int64_t hi = pl + W < (int64_t)l->width ? pl + W : (int64_t)l->width;
            memset(row, 0, (size_t)lo * sizeof *row);
            if (hi > lo) memcpy(row + lo, src, (size_t)(hi - lo) * sizeof *row);
            if (hi < lo) hi = lo;
            memset(row + hi, 0, (l->width - (size_t)hi) * sizeof *row);
            continue;
        }
        for (size_t q = 0; q < l->phases; q++) { /* valid j: 0 <= j*sw + q - pl < W */
            float *dst = row + q * l->width;
            int64_t off = (int64_t)q - pl, w = (int64_t)l->width;
            int64_t lo = off >= 0 ? 0 : (-off + sw - 1) / sw;
            int64_t hi = W - 1 - off < 0 ? 0 : (W - 1 - off) / sw + 1;
            if (lo > w) lo = w;
            if (hi > w) hi = w;
            if (hi < lo) hi = lo;
            for (int64_t j = 0; j < lo; j++) dst[j] = 0.0f;
            const float *s = src + off + lo * sw;
#ifdef NN_DW_X86
            if (avx2 && sw == 2)
                strided_copy2_avx2(dst + lo, s, hi - lo);
            else
#endif
                strided_copy(dst + lo, s, hi - lo, sw);
            for (int64_t j = hi; j < w; j++) dst[j] = 0.0f;
        }
    }
}

/* Offsets of each tap relative to the first padded row of an output row. */
static size_t dw_taps(const ak__nn_geom *g, const dw_layout *l, size_t *off) {
    size_t t = 0;
    for (int64_t ky = 0; ky < g->k[0]; ky++)
        for (int64_t kx = 0; kx < g->k[1]; kx++) {
            size_t c = (size_t)(kx * g->d[1]);
            off[t++] = (size_t)(ky * g->d[0]) * l->phases * l->width +
                       (c % l->phases) * l->width + c / l->phases;
        }
    return t;
}

static void dw_rows_scalar(const ak__nn_geom *g, const dw_layout *l, const float *sc,
                           const float *w, float b, float *out, const size_t *off,
                           size_t taps) {
    size_t OH = (size_t)g->out[0], OW = (size_t)g->out[1];
    size_t row_step = (size_t)g->s[0] * l->phases * l->width;
    for (size_t oy = 0; oy < OH; oy++) {
        const float *base = sc + oy * row_step;
        float *o = out + oy * OW;
        for (size_t ox = 0; ox < OW; ox++) o[ox] = b;
        for (size_t t = 0; t < taps; t++) {
            const float *src = base + off[t];
            float wt = w[t];
            for (size_t ox = 0; ox < OW; ox++) o[ox] += wt * src[ox];
        }
    }
}

#ifdef NN_DW_X86
__attribute__((target("avx2,fma"))) static void
dw_rows_avx2(const ak__nn_geom *g, const dw_layout *l, const float *sc, const float *w,
             float b, float *out, const size_t *off, size_t taps) {
    size_t OH = (size_t)g->out[0], OW = (size_t)g->out[1];
    size_t row_step = (size_t)g->s[0] * l->phases * l->width;
    __m256 wv[AK_NN_DW_MAX_TAPS];
    for (size_t t = 0; t < taps; t++) wv[t] = _mm256_set1_ps(w[t]);
    __m256 bv = _mm256_set1_ps(b);
    /* lanes below OW % 8 of the last, partial vector */
    __m256i tail = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(OW % 8)),
                                      _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    for (size_t oy = 0; oy < OH; oy++) {
        const float *base = sc + oy * row_step;
        float *o = out + oy * OW;
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
            _mm256_storeu_ps(o + ox, a0);
            _mm256_storeu_ps(o + ox + 8, a1);
            _mm256_storeu_ps(o + ox + 16, a2);
            _mm256_storeu_ps(o + ox + 24, a3);
        }
        for (; ox + 16 <= OW; ox += 16) {
            __m256 a0 = bv, a1 = bv;
            for (size_t t = 0; t < taps; t++) {
                const float *s = base + off[t] + ox;
                a0 = _mm256_fmadd_ps(wv[t], _mm256_loadu_ps(s), a0);
                a1 = _mm256_fmadd_ps(wv[t], _mm256_loadu_ps(s + 8), a1);
            }
            _mm256_storeu_ps(o + ox, a0);
            _mm256_storeu_ps(o + ox + 8, a1);
        }
        for (; ox < OW; ox += 8) { /* the layout's slack makes the last load safe */
            __m256 a0 = bv;
            for (size_t t = 0; t < taps; t++)
                a0 = _mm256_fmadd_ps(wv[t], _mm256_loadu_ps(base + off[t] + ox), a0);
            if (ox + 8 <= OW)
                _mm256_storeu_ps(o + ox, a0);
            else
                _mm256_maskstore_ps(o + ox, tail, a0);
        }
    }
}
#endif

void ak__nn_dw_plane(const ak__nn_geom *g, const float *in, const float *w, float b,
                     float *out, float *scratch, int avx2) {
    dw_layout l = dw_layout_of(g);
    size_t off[AK_NN_DW_MAX_TAPS];
    size_t taps = dw_taps(g, &l, off);
    dw_fill(g, &l, in, scratch, avx2);
#ifdef NN_DW_X86
    if (avx2) {
        dw_rows_avx2(g, &l, scratch, w, b, out, off, taps);
        return;
    }
#endif
    (void)avx2;
    dw_rows_scalar(g, &l, scratch, w, b, out, off, taps);
}
