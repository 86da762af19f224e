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

#include "infer/ops/nn/common.h"
#include "infer/ops/nn/conv/activation.h"
#include "infer/ops/nn/conv/depthwise.h"

#if defined(__x86_64__) || defined(__i386__)
#include "infer/ops/nn/avx2.h"
#define NN_DW_X86 1
#endif

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

/* The channel-interleaved layout (8 planes at once): the padded input rows × columns
 * and the output positions (room for a multiple of 8 of them), 8 floats each. */
typedef struct dw8_layout {
    size_t rows, cols, out;
} dw8_layout;

static dw8_layout dw8_layout_of(const ak__nn_geom *g) {
    dw8_layout l;
    l.rows = (size_t)((g->out[0] - 1) * g->s[0] + (g->k[0] - 1) * g->d[0] + 1);
    l.cols = (size_t)((g->out[1] - 1) * g->s[1] + (g->k[1] - 1) * g->d[1] + 1);
    l.out = (size_t)(g->out[0] * g->out[1]);
    return l;
}

static size_t dw_phase_floats(const dw_layout *l) { return l->rows * l->phases * l->width; }

size_t ak__nn_dw_scratch_floats(const ak__nn_geom *g) {
    dw_layout l = dw_layout_of(g);
    dw8_layout l8 = dw8_layout_of(g);
    /* the phase-split plane, then (8-float aligned) the interleaved input and output */
    return round8(dw_phase_floats(&l)) + 8 * (l8.rows * l8.cols + round8(l8.out));
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
        __m256i m = ak__nn_first_lanes(n - j);
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
    __m256i tail = ak__nn_first_lanes((int64_t)(OW % 8));
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

/* ---- 8 planes at once, channel-interleaved ----------------------------------------- */

/* The interiors of 8 input planes (x, x + Pin, ...) into the interleaved padded layout:
 * position (row, col) holds the 8 channels' values. Padding is left as it is. */
__attribute__((target("avx2,fma"))) static void dw8_fill(const ak__nn_geom *g,
                                                         const dw8_layout *l, const float *x,
                                                         uint64_t Pin, float *sc) {
    int64_t H = g->in[0], W = g->in[1], pt = g->pb[0], pl = g->pb[1];
    int64_t rows = H < (int64_t)l->rows - pt ? H : (int64_t)l->rows - pt;
    int64_t cols = W < (int64_t)l->cols - pl ? W : (int64_t)l->cols - pl;
    for (int64_t iy = 0; iy < rows; iy++) {
        float *dst = sc + ((size_t)(iy + pt) * l->cols + (size_t)pl) * 8;
        for (int64_t ix = 0; ix < cols; ix += 8) {
            int64_t n = cols - ix < 8 ? cols - ix : 8;
            __m256i m = ak__nn_first_lanes(n);
            __m256 r[8];
#pragma GCC unroll 8
            for (int j = 0; j < 8; j++) r[j] = _mm256_maskload_ps(x + j * Pin + iy * W + ix, m);
            ak__nn_transpose8x8(r);
            float *d = dst + ix * 8;
#pragma GCC unroll 8
            for (int p = 0; p < 8; p++)
                if (p < n) _mm256_store_ps(d + p * 8, r[p]);
        }
    }
}

/* All output positions of 8 interleaved planes: bias + taps, 8 positions per step (8
 * independent FMA chains) running across output rows. The last step repeats the last
 * position for its missing lanes, writing past P into out's padding. */
__attribute__((target("avx2,fma"))) static void dw8_compute(const ak__nn_geom *g,
                                                            const dw8_layout *l, const float *sc,
                                                            const float *wt, const size_t *off,
                                                            size_t taps, __m256 bv, float *out) {
    size_t OW = (size_t)g->out[1], P = l->out;
    size_t row_step = (size_t)g->s[0] * l->cols * 8, col_step = (size_t)g->s[1] * 8;
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
        float *o = out + p * 8;
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

/* The interleaved output back into 8 planes (y, y + P, ...), + Z and a ReLU/Clip. The
 * positions of a plane are contiguous in both layouts, so blocks of 8 run across output
 * rows, and only the plane's last block is partial: written lane by lane, as masked
 * stores are slow on AMD cores. */
__attribute__((target("avx2,fma"))) static void dw8_store(const float *out, uint64_t P,
                                                          const float *z, float *y,
                                                          const ak__nn_act *act) {
    int k = act->kind;
    __m256 lo = _mm256_set1_ps(k == AK_NN_ACT_CLIP ? act->a : 0.0f), hi = _mm256_set1_ps(act->b);
    for (uint64_t at = 0; at < P; at += 8) {
        uint64_t n = P - at < 8 ? P - at : 8;
        __m256i m = ak__nn_first_lanes((int64_t)n);
        __m256 r[8];
#pragma GCC unroll 8
        for (uint64_t p = 0; p < 8; p++)
            r[p] = p < n ? _mm256_load_ps(out + (at + p) * 8) : _mm256_setzero_ps();
        ak__nn_transpose8x8(r);
#pragma GCC unroll 8
        for (uint64_t j = 0; j < 8; j++) {
            __m256 v = ak__nn_finish8(r[j], z ? z + j * P + at : NULL, m, n == 8, k, lo, hi);
            float *dst = y + j * P + at;
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

/* Planes i .. i+7 (channels c .. c+7 of one image). sc8: the interleaved input with its
 * padding zeroed, out8 the interleaved output, off: the taps' offsets in sc8 (floats). */
__attribute__((target("avx2,fma"))) static void dw8_planes(const ak__nn_dw_args *a,
                                                           const dw8_layout *l, size_t i,
                                                           float *sc8, float *out8,
                                                           const size_t *off, size_t taps,
                                                           const ak__nn_act *act) {
    const ak__nn_geom *g = a->g;
    uint64_t c = i % a->C;
    float wt[AK_NN_DW_MAX_TAPS * 8] __attribute__((aligned(32))), bias[8] __attribute__((aligned(32)));
    for (size_t t = 0; t < taps; t++)
        for (int j = 0; j < 8; j++) wt[8 * t + (size_t)j] = a->w[(c + (uint64_t)j) * taps + t];
    for (int j = 0; j < 8; j++) bias[j] = a->b ? a->b[c + (uint64_t)j] : 0.0f;
    dw8_fill(g, l, a->x + i * a->Pin, a->Pin, sc8);
    __m256 bv = _mm256_load_ps(bias);
    dw8_compute(g, l, sc8, wt, off, taps, bv, out8);
    dw8_store(out8, a->P, a->z ? a->z + i * a->P : NULL, a->y + i * a->P, act);
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
    int phase_zeroed = 0, use8 = ak__nn_dw_interleaves(a);
#ifndef NN_DW_X86
    (void)in_rows;
#else
    dw8_layout l8 = dw8_layout_of(g);
    float *sc8 = scratch + round8(dw_phase_floats(&l)), *out8 = sc8 + 8 * l8.rows * l8.cols;
    if (use8) memset(sc8, 0, 8 * l8.rows * l8.cols * sizeof *sc8);
    /* the taps' offsets in the interleaved rows: the phase layout's with one phase, × 8 */
    size_t off8[AK_NN_DW_MAX_TAPS];
    dw_taps(g, &(dw_layout){l8.rows, 1, l8.cols}, off8);
    for (size_t t = 0; t < taps; t++) off8[t] *= 8;
#endif
    for (size_t i = begin; i < end;) {
        uint64_t c = i % a->C;
        size_t planes = use8 && c % 8 == 0 && c + 8 <= a->C && i + 8 <= end ? 8 : 1;
#ifdef NN_DW_X86
        if (planes == 8) dw8_planes(a, &l8, i, sc8, out8, off8, taps, &in_rows);
        else
#endif
        {
            if (!phase_zeroed) memset(scratch, 0, dw_phase_floats(&l) * sizeof *scratch);
            phase_zeroed = 1;
            dw_plane pp = {a->w + c * taps, a->b ? a->b[c] : 0.0f, a->z ? a->z + i * a->P : NULL,
                           a->y + i * a->P};
            dw_fill(g, &l, a->x + i * a->Pin, scratch, a->avx2);
#ifdef NN_DW_X86
            if (a->avx2) dw_rows_avx2(g, &l, scratch, &pp, off, taps, &in_rows);
            else
#endif
                dw_rows_scalar(g, &l, scratch, &pp, off, taps);
        }
        if (!inline_act) ak__nn_act_rows(&a->act, a->y + i * a->P, planes, a->P, a->P);
        i += planes;
    }
}

/* Whether runs of 8 channels take the interleaved path: with AVX2, on planes whose rows
 * are too short for the row vectors (7×7 to 28×28 in MobileNetV2), where one 8-channel
 * vector per output position wastes no lanes, and on strided ones, whose phase split it
 * does not need (measured per MobileNetV2 layer; at 56 and 112 wide with stride 1 the
 * row vectors are as fast or faster). */
int ak__nn_dw_interleaves(const ak__nn_dw_args *a) {
    return a->avx2 && a->C >= 8 && (a->g->out[1] <= AK_NN_DW8_MAX_WIDTH || a->g->s[1] > 1);
}
