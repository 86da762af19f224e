/* Depthwise 2-D convolution of one plane (Conv with group == C == M), the MobileNet case.
 *
 * The input plane is first copied into scratch with its padding made explicit and its
 * columns split by phase modulo the horizontal stride: padded column c lands in phase
 * c % sw at index c / sw. Output column ox then reads tap kx at index ox + (kx*dw)/sw of
 * phase (kx*dw) % sw, so every tap is a contiguous, bounds-free run for any stride and
 * dilation, and 8 outputs are one vector load + FMA per tap. Phase rows are padded to a
 * multiple of 8 (plus slack) so full-vector loads never leave the scratch.
 *
 * A call handles a run of planes with one scratch: the padding zeros are the same for
 * every plane of a layer, so they are written once per call and each plane copies only
 * its interior. Bias, Z and a ReLU/Clip activation are applied in registers before the
 * store. On MobileNetV2's 7x7 and 14x14 planes these per-plane costs (memsets, calls,
 * a second pass for Z and the activation) had outweighed the 9 FMAs per output. */
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

/* dst[j] = src[j*sw] for j in [0, n). */
static void strided_copy(float *dst, const float *src, int64_t n, int64_t sw) {
    for (int64_t j = 0; j < n; j++) dst[j] = src[j * sw];
}

#ifdef NN_DW_X86
/* n contiguous floats: MobileNetV2's rows of 7 and 14 are too short for a memcpy call. */
__attribute__((target("avx2,fma"))) static void copy_avx2(float *dst, const float *src,
                                                           int64_t n) {
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) _mm256_storeu_ps(dst + j, _mm256_loadu_ps(src + j));
    if (j < n) {
        __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(n - j)),
                                       _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        _mm256_maskstore_ps(dst + j, m, _mm256_maskload_ps(src + j, m));
    }
}

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

/* Copies the interior of `in` (H, W) into the phase-split padded layout; the padding
 * positions are left as they are (zeroed once per call). */
static void dw_fill(const ak__nn_geom *g, const dw_layout *l, const float *in, float *sc,
                    int avx2) {
    int64_t H = g->in[0], W = g->in[1], pt = g->pb[0], pl = g->pb[1], sw = g->s[1];
    int64_t w = (int64_t)l->width;
    for (size_t r = 0; r < l->rows; r++) {
        int64_t iy = (int64_t)r - pt;
        if (iy < 0 || iy >= H) continue;
        const float *src = in + iy * W;
        float *row = sc + r * l->phases * l->width;
        for (size_t q = 0; q < l->phases; q++) { /* valid j: 0 <= j*sw + q - pl < W */
            int64_t off = (int64_t)q - pl;
            int64_t lo = off >= 0 ? 0 : (-off + sw - 1) / sw;
            int64_t hi = W - 1 - off < 0 ? 0 : (W - 1 - off) / sw + 1;
            if (hi > w) hi = w;
            if (hi <= lo) continue;
            const float *s = src + off + lo * sw;
            float *dst = row + q * l->width + lo;
#ifdef NN_DW_X86
            if (avx2 && sw == 1)
                copy_avx2(dst, s, hi - lo);
            else if (avx2 && sw == 2)
                strided_copy2_avx2(dst, s, hi - lo);
#endif
            else
                strided_copy(dst, s, hi - lo, sw);
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

/* One plane's filter taps and epilogue. */
typedef struct dw_plane {
    const float *w; /* taps */
    float b;
    const float *z; /* Z plane (OH, OW) or NULL */
    float *out;
} dw_plane;

static void dw_rows_scalar(const ak__nn_geom *g, const dw_layout *l, const float *sc,
                           const dw_plane *pp, const size_t *off, size_t taps) {
    size_t OH = (size_t)g->out[0], OW = (size_t)g->out[1];
    size_t row_step = (size_t)g->s[0] * l->phases * l->width;
    for (size_t oy = 0; oy < OH; oy++) {
        const float *base = sc + oy * row_step;
        float *o = pp->out + oy * OW;
        for (size_t ox = 0; ox < OW; ox++) o[ox] = pp->b;
        for (size_t t = 0; t < taps; t++) {
            const float *src = base + off[t];
            float wt = pp->w[t];
            for (size_t ox = 0; ox < OW; ox++) o[ox] += wt * src[ox];
        }
        if (pp->z)
            for (size_t ox = 0; ox < OW; ox++) o[ox] += pp->z[oy * OW + ox];
    }
}

#ifdef NN_DW_X86
/* + Z, then a ReLU or Clip activation in registers, as ak__nn_act_rows computes them
 * (ReLU sends NaN to 0, Clip keeps it); lo, hi: 0 for ReLU, the bounds for Clip. */
__attribute__((target("avx2,fma"))) static inline __m256
dw_finish(__m256 a, const float *z, __m256i mask, int full, int act, __m256 lo, __m256 hi) {
    if (z) a = _mm256_add_ps(a, full ? _mm256_loadu_ps(z) : _mm256_maskload_ps(z, mask));
    if (act == AK_NN_ACT_RELU) a = _mm256_max_ps(a, lo);
    else if (act == AK_NN_ACT_CLIP) a = _mm256_min_ps(hi, _mm256_max_ps(lo, a));
    return a;
}

__attribute__((target("avx2,fma"))) static void
dw_rows_avx2(const ak__nn_geom *g, const dw_layout *l, const float *sc, const dw_plane *pp,
             const size_t *off, size_t taps, const ak__nn_act *act) {
    size_t OH = (size_t)g->out[0], OW = (size_t)g->out[1];
    size_t row_step = (size_t)g->s[0] * l->phases * l->width;
    __m256 wv[AK_NN_DW_MAX_TAPS];
    for (size_t t = 0; t < taps; t++) wv[t] = _mm256_set1_ps(pp->w[t]);
    __m256 bv = _mm256_set1_ps(pp->b);
    int k = act->kind;
    __m256 lo = _mm256_set1_ps(k == AK_NN_ACT_CLIP ? act->a : 0.0f), hi = _mm256_set1_ps(act->b);
    /* lanes below OW % 8 of the last, partial vector */
    __m256i tail = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(OW % 8)),
                                      _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    for (size_t oy = 0; oy < OH; oy++) {
        const float *base = sc + oy * row_step;
        float *o = pp->out + oy * OW;
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
                                 dw_finish(acc[v], z ? z + ox + 8 * v : NULL, tail, 1, k, lo, hi));
        }
        for (; ox + 16 <= OW; ox += 16) {
            __m256 a0 = bv, a1 = bv;
            for (size_t t = 0; t < taps; t++) {
                const float *s = base + off[t] + ox;
                a0 = _mm256_fmadd_ps(wv[t], _mm256_loadu_ps(s), a0);
                a1 = _mm256_fmadd_ps(wv[t], _mm256_loadu_ps(s + 8), a1);
            }
            _mm256_storeu_ps(o + ox, dw_finish(a0, z ? z + ox : NULL, tail, 1, k, lo, hi));
            _mm256_storeu_ps(o + ox + 8, dw_finish(a1, z ? z + ox + 8 : NULL, tail, 1, k, lo, hi));
        }
        for (; ox < OW; ox += 8) { /* the layout's slack makes the last load safe */
            __m256 a0 = bv;
            for (size_t t = 0; t < taps; t++)
                a0 = _mm256_fmadd_ps(wv[t], _mm256_loadu_ps(base + off[t] + ox), a0);
            int full = ox + 8 <= OW;
            a0 = dw_finish(a0, z ? z + ox : NULL, tail, full, k, lo, hi);
            if (full) _mm256_storeu_ps(o + ox, a0);
            else _mm256_maskstore_ps(o + ox, tail, a0);
        }
    }
}
#endif

/* Planes [begin, end) of a depthwise convolution: plane i = n*C + c reads x plane i and
 * filter c. */
void ak__nn_dw_planes(const ak__nn_dw_args *a, size_t begin, size_t end, float *scratch) {
    const ak__nn_geom *g = a->g;
    dw_layout l = dw_layout_of(g);
    size_t off[AK_NN_DW_MAX_TAPS];
    size_t taps = dw_taps(g, &l, off);
    /* the AVX2 rows apply ReLU and Clip themselves; anything else runs afterwards */
    int inline_act = a->avx2 && (a->act.kind == AK_NN_ACT_NONE || a->act.kind == AK_NN_ACT_RELU ||
                                 a->act.kind == AK_NN_ACT_CLIP);
    ak__nn_act in_rows = {inline_act ? a->act.kind : AK_NN_ACT_NONE, a->act.a, a->act.b};
    memset(scratch, 0, l.rows * l.phases * l.width * sizeof *scratch);
    for (size_t i = begin; i < end; i++) {
        uint64_t c = i % a->C;
        dw_plane pp = {a->w + c * taps, a->b ? a->b[c] : 0.0f, a->z ? a->z + i * a->P : NULL,
                       a->y + i * a->P};
        dw_fill(g, &l, a->x + i * a->Pin, scratch, a->avx2);
#ifdef NN_DW_X86
        if (a->avx2) dw_rows_avx2(g, &l, scratch, &pp, off, taps, &in_rows);
        else
#else
        (void)in_rows;
#endif
            dw_rows_scalar(g, &l, scratch, &pp, off, taps);
        if (!inline_act) ak__nn_act_rows(&a->act, pp.out, 1, a->P, a->P);
    }
}
