/* Scalar reference of ggml's super-block weight types (kernels/kquant.h): the storage
 * conversions (ggml's reference quantizers and to_float, bit for bit, so files written by
 * llama.cpp and by accelkit hold the same bytes), the Q8_K activation quantizer, and the
 * ak_linear kernels one block dot product at a time: integer sums per group of 16 or 32
 * weights, scaled once per super-block, as llama.cpp's vec_dot_*_q8_K. The test oracle,
 * and what AK_KERNELS=ref runs.
 *
 * The quantizers follow ggml's search semantics exactly (its rounding helper, the order
 * of every float operation, the candidate scales it tries), because bit-identical bytes
 * are what makes a file quantized here and one quantized by llama.cpp interchangeable in
 * tests. This file must be compiled without FP contraction (the project's C11 mode). */
#include <math.h>
#include <string.h>

#include "core/half.h"
#include "kernels/dispatch.h"
#include "kernels/kquant.h"
#include "kernels/linear.h"

#define GROUP_EPS 1e-15f /* a group whose largest |x| is below this is all zeros */

const int8_t ak__iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                     1,    13,   25,  38,  53,  69,  89,  113};

int ak__kquant_block(ak_wtype wtype, size_t *elems, size_t *bytes) {
    size_t e = AK__QK_K, b;
    switch (wtype) {
    case AK_WTYPE_Q2_K: b = sizeof(ak__block_q2_k); break;
    case AK_WTYPE_Q3_K: b = sizeof(ak__block_q3_k); break;
    case AK_WTYPE_Q4_K: b = sizeof(ak__block_q4_k); break;
    case AK_WTYPE_Q5_K: b = sizeof(ak__block_q5_k); break;
    case AK_WTYPE_Q6_K: b = sizeof(ak__block_q6_k); break;
    case AK_WTYPE_Q8_K: b = sizeof(ak__block_q8_k); break;
    case AK_WTYPE_IQ4_XS: b = sizeof(ak__block_iq4_xs); break;
    case AK_WTYPE_IQ4_NL: e = 32, b = sizeof(ak__block_iq4_nl); break;
    default: return 0;
    }
    *elems = e;
    *bytes = b;
    return 1;
}

int ak__kquant_uses_q8_k(ak_wtype wtype) {
    size_t e, b;
    return ak__kquant_block(wtype, &e, &b) && wtype != AK_WTYPE_IQ4_NL;
}

/* ---- helpers of the quantizers ------------------------------------------------------ */

static float h2f(uint16_t h) { return ak__f16_to_f32_ref(h); }
static uint16_t f2h(float f) { return ak__f32_to_f16_ref(f); }
static int imin(int a, int b) { return a < b ? a : b; }
static int imax(int a, int b) { return a > b ? a : b; }

/* ggml's nearest_int: adding 1.5·2²³ leaves round-to-nearest-even(f) in the low mantissa
 * bits (valid for |f| < 2²²; other inputs give a garbage value the callers clamp). */
static int nearest_int(float f) {
    float v = f + 12582912.0f;
    int32_t i;
    memcpy(&i, &v, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

/* Asymmetric quantization of n values to 0..nmax with a min (ggml's make_qkx2_quants):
 * the plain max−min grid first, then nstep+1 stretched grids, each refit by weighted
 * least squares; the one of least weighted error (squared or absolute) wins. Returns the
 * scale, stores −min in *neg_min and the levels in L. */
static float fit_scale_min(int n, int nmax, const float *x, const float *w, uint8_t *L,
                           float *neg_min, uint8_t *Laux, float rmin, float rdelta, int nstep,
                           int use_mad) {
    float min = x[0], max = x[0], sum_w = w[0], sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        memset(L, 0, (size_t)n);
        *neg_min = -min;
        return 0.0f;
    }
    float iscale = nmax / (max - min), scale = 1 / iscale, best_error = 0;
    for (int i = 0; i < n; i++) {
        L[i] = (uint8_t)imax(0, imin(nmax, nearest_int(iscale * (x[i] - min))));
        float diff = scale * L[i] + min - x[i];
        diff = use_mad ? fabsf(diff) : diff * diff;
        best_error += w[i] * diff;
    }
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * is + nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            int l = imax(0, imin(nmax, nearest_int(iscale * (x[i] - min))));
            Laux[i] = (uint8_t)l;
            sum_l += w[i] * l;
            sum_l2 += w[i] * l * l;
            sum_xl += w[i] * l * x[i];
        }
        float D = sum_w * sum_l2 - sum_l * sum_l;
        if (!(D > 0)) continue;
        float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
        float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
        if (this_min > 0) {
            this_min = 0;
            this_scale = sum_xl / sum_l2;
        }
        float err = 0;
        for (int i = 0; i < n; i++) {
            float diff = this_scale * Laux[i] + this_min - x[i];
            diff = use_mad ? fabsf(diff) : diff * diff;
            err += w[i] * diff;
        }
        if (err < best_error) {
            memcpy(L, Laux, (size_t)n);
            best_error = err;
            scale = this_scale;
            min = this_min;
        }
    }
    *neg_min = -min;
    return scale;
}

/* Symmetric quantization of n values to −nmax..nmax−1 weighted by x² (ggml's
 * make_qx_quants with rmse_type 1): the grid through the largest magnitude, then 18
 * neighbouring grids, keeping the best least-squares fit. L gets level + nmax. */
static float fit_scale_sym(int n, int nmax, const float *x, int8_t *L) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; i++)
        if (fabsf(x[i]) > amax) amax = fabsf(x[i]), max = x[i];
    if (amax < GROUP_EPS) {
        memset(L, 0, (size_t)n);
        return 0.0f;
    }
    float iscale = -nmax / max, sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = imax(-nmax, imin(nmax - 1, nearest_int(iscale * x[i])));
        L[i] = (int8_t)(l + nmax);
        float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    float scale = suml2 ? sumlx / suml2 : 0.0f, best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0) continue;
        iscale = -(nmax + 0.1f * is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; i++) {
            int l = imax(-nmax, imin(nmax - 1, nearest_int(iscale * x[i])));
            float w = x[i] * x[i];
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++)
                L[i] = (int8_t)(nmax + imax(-nmax, imin(nmax - 1, nearest_int(iscale * x[i]))));
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* Q3_K's symmetric fit (ggml's make_q3_quants with do_rmse): the max grid, then up to 5
 * passes moving single levels while the x²-weighted fit improves. L gets level + nmax. */
static float fit_scale_q3(int n, int nmax, const float *x, int8_t *L) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; i++)
        if (fabsf(x[i]) > amax) amax = fabsf(x[i]), max = x[i];
    if (amax < GROUP_EPS) {
        memset(L, 0, (size_t)n);
        return 0.0f;
    }
    float iscale = -nmax / max, sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = imax(-nmax, imin(nmax - 1, nearest_int(iscale * x[i])));
        L[i] = (int8_t)l;
        float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    for (int itry = 0; itry < 5; itry++) {
        int changed = 0;
        for (int i = 0; i < n; i++) {
            float w = x[i] * x[i], slx = sumlx - w * x[i] * L[i];
            if (!(slx > 0)) continue;
            float sl2 = suml2 - w * L[i] * L[i];
            int nl = imax(-nmax, imin(nmax - 1, nearest_int(x[i] * sl2 / slx)));
            if (nl == L[i]) continue;
            slx += w * x[i] * nl;
            sl2 += w * nl * nl;
            if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                L[i] = (int8_t)nl, sumlx = slx, suml2 = sl2;
                changed++;
            }
        }
        if (!changed) break;
    }
    for (int i = 0; i < n; i++) L[i] = (int8_t)(L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* ---- 6-bit scale packing of Q4_K / Q5_K ------------------------------------------- */

void ak__kquant_scales_k4(const uint8_t s[12], uint8_t sc[8], uint8_t m[8]) {
    for (int j = 0; j < 4; j++) {
        sc[j] = s[j] & 63;
        m[j] = s[j + 4] & 63;
        sc[j + 4] = (uint8_t)((s[j + 8] & 0xF) | ((s[j] >> 6) << 4));
        m[j + 4] = (uint8_t)((s[j + 8] >> 4) | ((s[j + 4] >> 6) << 4));
    }
}

static void pack_scales_k4(uint8_t s[12], int j, uint8_t ls, uint8_t lm) {
    if (j < 4) {
        s[j] = ls;
        s[j + 4] = lm;
    } else {
        s[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
        s[j - 4] |= (uint8_t)((ls >> 4) << 6);
        s[j] |= (uint8_t)((lm >> 4) << 6);
    }
}

void ak__kquant_scales_q3(const uint8_t s[12], int8_t sc[16]) {
    for (int j = 0; j < 16; j++) {
        int lo = j < 8 ? s[j] & 0xF : s[j - 8] >> 4;
        int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
        sc[j] = (int8_t)((lo | hi << 4) - 32);
    }
}

/* ---- quantizers, one super-block each ----------------------------------------------- */

/* Q4_K / Q5_K (bits 4 or 5): per group of 32 an asymmetric fit weighted by rms + |x|,
 * the 8 scales and mins quantized to 6 bits, then every value requantized against the
 * stored scales. */
static void quantize_k4_levels(const float *x, int bits, uint8_t scales[12], uint16_t *d_out,
                               uint16_t *dmin_out, uint8_t L[AK__QK_K]) {
    int nmax = (1 << bits) - 1;
    float rmin = bits == 4 ? -1.0f : -0.5f;
    int nstep = bits == 4 ? 20 : 15;
    uint8_t Laux[32];
    float w[32], mins[8], sc[8], max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; j++) {
        const float *xg = x + 32 * j;
        float sum_x2 = 0;
        for (int l = 0; l < 32; l++) sum_x2 += xg[l] * xg[l];
        float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++) w[l] = av_x + fabsf(xg[l]);
        sc[j] = fit_scale_min(32, nmax, xg, w, L + 32 * j, &mins[j], Laux, rmin, 0.1f, nstep, 0);
        if (sc[j] > max_scale) max_scale = sc[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    memset(scales, 0, 12);
    for (int j = 0; j < 8; j++) {
        uint8_t ls = (uint8_t)nearest_int(inv_scale * sc[j]), lm = (uint8_t)nearest_int(inv_min * mins[j]);
        pack_scales_k4(scales, j, ls < 63 ? ls : 63, lm < 63 ? lm : 63);
    }
    *d_out = f2h(max_scale / 63.f);
    *dmin_out = f2h(max_min / 63.f);
    uint8_t s6[8], m6[8];
    ak__kquant_scales_k4(scales, s6, m6);
    for (int j = 0; j < 8; j++) {
        float d = h2f(*d_out) * s6[j];
        if (!d) continue;
        float dm = h2f(*dmin_out) * m6[j];
        for (int i = 0; i < 32; i++)
            L[32 * j + i] = (uint8_t)imax(0, imin(nmax, nearest_int((x[32 * j + i] + dm) / d)));
    }
}

static void quantize_q4_k(const float *x, ak__block_q4_k *y) {
    uint8_t L[AK__QK_K];
    quantize_k4_levels(x, 4, y->scales, &y->d, &y->dmin, L);
    for (int j = 0; j < 4; j++)
        for (int l = 0; l < 32; l++)
            y->qs[32 * j + l] = (uint8_t)(L[64 * j + l] | L[64 * j + l + 32] << 4);
}

static void quantize_q5_k(const float *x, ak__block_q5_k *y) {
    uint8_t L[AK__QK_K];
    quantize_k4_levels(x, 5, y->scales, &y->d, &y->dmin, L);
    memset(y->qh, 0, sizeof y->qh);
    for (int j = 0; j < 4; j++)
        for (int l = 0; l < 32; l++) {
            int l1 = L[64 * j + l], l2 = L[64 * j + l + 32];
            if (l1 > 15) l1 -= 16, y->qh[l] |= (uint8_t)(1u << (2 * j));
            if (l2 > 15) l2 -= 16, y->qh[l] |= (uint8_t)(2u << (2 * j));
            y->qs[32 * j + l] = (uint8_t)(l1 | l2 << 4);
        }
}

/* Packs 256 2-bit levels: qs[32·h + l] holds L[128h + l + 32s] at bits 2s. */
static void pack_2bit(const uint8_t *L, uint8_t qs[64]) {
    for (int h = 0; h < 2; h++)
        for (int l = 0; l < 32; l++) {
            const uint8_t *b = L + 128 * h + l;
            qs[32 * h + l] = (uint8_t)(b[0] | b[32] << 2 | b[64] << 4 | b[96] << 6);
        }
}

static void quantize_q2_k(const float *x, ak__block_q2_k *y) {
    uint8_t L[AK__QK_K], Laux[16];
    float w[16], mins[16], sc[16], max_scale = 0, max_min = 0;
    for (int j = 0; j < 16; j++) {
        for (int l = 0; l < 16; l++) w[l] = fabsf(x[16 * j + l]);
        sc[j] = fit_scale_min(16, 3, x + 16 * j, w, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15, 1);
        if (sc[j] > max_scale) max_scale = sc[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    memset(y->scales, 0, sizeof y->scales);
    y->d = y->dmin = 0;
    if (max_scale > 0) {
        float iscale = 15.f / max_scale;
        for (int j = 0; j < 16; j++) y->scales[j] = (uint8_t)nearest_int(iscale * sc[j]);
        y->d = f2h(max_scale / 15.f);
    }
    if (max_min > 0) {
        float iscale = 15.f / max_min;
        for (int j = 0; j < 16; j++) y->scales[j] |= (uint8_t)(nearest_int(iscale * mins[j]) << 4);
        y->dmin = f2h(max_min / 15.f);
    }
    for (int j = 0; j < 16; j++) {
        float d = h2f(y->d) * (y->scales[j] & 0xF);
        if (!d) continue;
        float dm = h2f(y->dmin) * (y->scales[j] >> 4);
        for (int i = 0; i < 16; i++)
            L[16 * j + i] = (uint8_t)imax(0, imin(3, nearest_int((x[16 * j + i] + dm) / d)));
    }
    pack_2bit(L, y->qs);
}

static void quantize_q3_k(const float *x, ak__block_q3_k *y) {
    int8_t L[AK__QK_K];
    float sc[16], max_scale = 0, amax = 0;
    for (int j = 0; j < 16; j++) {
        sc[j] = fit_scale_q3(16, 4, x + 16 * j, L + 16 * j);
        if (fabsf(sc[j]) > amax) amax = fabsf(sc[j]), max_scale = sc[j];
    }
    memset(y->scales, 0, sizeof y->scales);
    y->d = 0;
    if (max_scale != 0) {
        float iscale = -32.f / max_scale;
        for (int j = 0; j < 16; j++) {
            int8_t l8 = (int8_t)nearest_int(iscale * sc[j]); /* ggml keeps it in an int8 */
            int l = imax(-32, imin(31, l8)) + 32;
            if (j < 8) y->scales[j] = (uint8_t)(l & 0xF);
            else y->scales[j - 8] |= (uint8_t)((l & 0xF) << 4);
            y->scales[j % 4 + 8] |= (uint8_t)((l >> 4) << (2 * (j / 4)));
        }
        y->d = f2h(1 / iscale);
    }
    int8_t s6[16];
    ak__kquant_scales_q3(y->scales, s6);
    for (int j = 0; j < 16; j++) {
        float d = h2f(y->d) * s6[j];
        if (!d) continue;
        for (int i = 0; i < 16; i++)
            L[16 * j + i] = (int8_t)(imax(-4, imin(3, nearest_int(x[16 * j + i] / d))) + 4);
    }
    /* the high bit of value j goes to hmask[j % 32], bit j / 32 */
    uint8_t low[AK__QK_K];
    memset(y->hmask, 0, sizeof y->hmask);
    for (int j = 0; j < AK__QK_K; j++) {
        int l = L[j];
        if (l > 3) y->hmask[j % 32] |= (uint8_t)(1u << (j / 32)), l -= 4;
        low[j] = (uint8_t)l;
    }
    pack_2bit(low, y->qs);
}

static void quantize_q6_k(const float *x, ak__block_q6_k *y) {
    int8_t L[AK__QK_K];
    float sc[16], max_scale = 0, amax = 0;
    for (int j = 0; j < 16; j++) {
        sc[j] = fit_scale_sym(16, 32, x + 16 * j, L + 16 * j);
        if (fabsf(sc[j]) > amax) amax = fabsf(sc[j]), max_scale = sc[j];
    }
    if (amax < GROUP_EPS) {
        memset(y, 0, sizeof *y);
        return;
    }
    float iscale = -128.f / max_scale;
    y->d = f2h(1 / iscale);
    for (int j = 0; j < 16; j++) y->scales[j] = (int8_t)imin(127, nearest_int(iscale * sc[j]));
    for (int j = 0; j < 16; j++) {
        float d = h2f(y->d) * y->scales[j];
        if (!d) continue;
        for (int i = 0; i < 16; i++)
            L[16 * j + i] = (int8_t)(imax(-32, imin(31, nearest_int(x[16 * j + i] / d))) + 32);
    }
    for (int h = 0; h < 2; h++)
        for (int l = 0; l < 32; l++) {
            const int8_t *b = L + 128 * h + l;
            y->ql[64 * h + l] = (uint8_t)((b[0] & 0xF) | (b[64] & 0xF) << 4);
            y->ql[64 * h + l + 32] = (uint8_t)((b[32] & 0xF) | (b[96] & 0xF) << 4);
            y->qh[32 * h + l] =
                (uint8_t)((b[0] >> 4) | (b[32] >> 4) << 2 | (b[64] >> 4) << 4 | (b[96] >> 4) << 6);
        }
}

static void quantize_q8_k(const float *x, ak__block_q8_k *y) {
    float max = 0, amax = 0;
    for (int j = 0; j < AK__QK_K; j++)
        if (fabsf(x[j]) > amax) amax = fabsf(x[j]), max = x[j];
    memset(y, 0, sizeof *y);
    if (!amax) return;
    float iscale = -127.f / max;
    for (int j = 0; j < AK__QK_K; j++) y->qs[j] = (int8_t)imin(127, nearest_int(iscale * x[j]));
    for (int g = 0; g < 16; g++) {
        int s = 0;
        for (int i = 0; i < 16; i++) s += y->qs[16 * g + i];
        y->bsums[g] = (int16_t)s;
    }
    y->d = 1 / iscale;
}

/* Index of the IQ4 level nearest to v (ties to the lower level, as ggml). */
static int iq4_index(float v) {
    const int8_t *t = ak__iq4nl_values;
    if (v <= t[0]) return 0;
    if (v >= t[15]) return 15;
    int lo = 0, hi = 15;
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (v < t[mid]) hi = mid;
        else lo = mid;
    }
    return v - t[hi - 1] < t[hi] - v ? hi - 1 : hi;
}

/* One group of 32 on the IQ4 levels (ggml's quantize_row_iq4_nl_impl without an
 * importance matrix, ntry = 7, as ggml_quantize_chunk and llama.cpp's quantizer run it;
 * ggml's from_float_ref of IQ4_NL alone takes the cheaper ntry = −1 path): the scale through the largest magnitude refit by
 * x²-weighted least squares, then 15 neighbouring grids. Returns the scale; L the
 * indices for that scale's first grid. */
static float iq4_fit_group(const float *x, uint8_t *L) {
    const int8_t *t = ak__iq4nl_values;
    float amax = 0, max = 0;
    for (int j = 0; j < 32; j++)
        if (fabsf(x[j]) > amax) amax = fabsf(x[j]), max = x[j];
    if (amax < GROUP_EPS) return 0.0f;
    float d = -max / t[0], id = 1 / d, sumqx = 0, sumq2 = 0;
    for (int j = 0; j < 32; j++) {
        int l = iq4_index(id * x[j]);
        L[j] = (uint8_t)l;
        float q = t[l], w = x[j] * x[j];
        sumqx += w * q * x[j];
        sumq2 += w * q * q;
    }
    d = sumqx / sumq2;
    float best = d * sumqx;
    for (int itry = -7; itry <= 7; itry++) {
        id = (itry + t[0]) / max;
        sumqx = sumq2 = 0;
        for (int j = 0; j < 32; j++) {
            float q = t[iq4_index(id * x[j])], w = x[j] * x[j];
            sumqx += w * q * x[j];
            sumq2 += w * q * q;
        }
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    return d;
}

static void pack_nibbles32(const uint8_t *L, uint8_t *qs) {
    for (int j = 0; j < 16; j++) qs[j] = (uint8_t)(L[j] | L[j + 16] << 4);
}

static void quantize_iq4_nl(const float *x, ak__block_iq4_nl *y) {
    uint8_t L[32] = {0};
    float d = iq4_fit_group(x, L);
    y->d = f2h(d);
    float id = d != 0 ? 1 / d : 0.0f; /* an all-zero block stores the level nearest 0 */
    for (int j = 0; j < 32; j++) L[j] = (uint8_t)iq4_index(id * x[j]);
    pack_nibbles32(L, y->qs);
}

static void quantize_iq4_xs(const float *x, ak__block_iq4_xs *y) {
    uint8_t L[AK__QK_K] = {0};
    float sc[8], max_scale = 0, amax_scale = 0;
    for (int g = 0; g < 8; g++) {
        sc[g] = iq4_fit_group(x + 32 * g, L + 32 * g);
        if (fabsf(sc[g]) > amax_scale) amax_scale = fabsf(sc[g]), max_scale = sc[g];
    }
    float d = -max_scale / 32;
    y->d = f2h(d);
    y->scales_h = 0;
    memset(y->scales_l, 0, sizeof y->scales_l);
    float id = d ? 1 / d : 0.f;
    for (int g = 0; g < 8; g++) {
        int l = imax(-32, imin(31, nearest_int(id * sc[g])));
        float dl = d * l, idl = dl ? 1 / dl : 0.f;
        for (int j = 0; j < 32; j++) L[32 * g + j] = (uint8_t)iq4_index(idl * x[32 * g + j]);
        l += 32;
        y->scales_l[g / 2] |= (uint8_t)((l & 0xF) << (4 * (g % 2)));
        y->scales_h |= (uint16_t)((l >> 4) << (2 * g));
    }
    for (int g = 0; g < 8; g++) pack_nibbles32(L + 32 * g, y->qs + 16 * g);
}

void ak__kquant_quantize_ref(ak_wtype wtype, const float *src, void *dst, size_t K) {
    size_t e = 0, b = 0;
    if (!ak__kquant_block(wtype, &e, &b)) return;
    for (size_t i = 0; i < K / e; i++) {
        const float *x = src + i * e;
        void *y = (uint8_t *)dst + i * b;
        switch (wtype) {
        case AK_WTYPE_Q2_K: quantize_q2_k(x, y); break;
        case AK_WTYPE_Q3_K: quantize_q3_k(x, y); break;
        case AK_WTYPE_Q4_K: quantize_q4_k(x, y); break;
        case AK_WTYPE_Q5_K: quantize_q5_k(x, y); break;
        case AK_WTYPE_Q6_K: quantize_q6_k(x, y); break;
        case AK_WTYPE_Q8_K: quantize_q8_k(x, y); break;
        case AK_WTYPE_IQ4_NL: quantize_iq4_nl(x, y); break;
        case AK_WTYPE_IQ4_XS: quantize_iq4_xs(x, y); break;
        default: break;
        }
    }
}

/* ---- dequantization (ggml's to_float: the same float operations in the same order) --- */

/* The unsigned level of value e (0..255) of a super-block, before scaling. */
static int q2_level(const ak__block_q2_k *b, int e) {
    return (b->qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
}
static int q3_level(const ak__block_q3_k *b, int e) { /* −4..3 */
    int low = (b->qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
    return low - ((b->hmask[e % 32] >> (e / 32)) & 1 ? 0 : 4);
}
static int q4_level(const uint8_t *qs, int e) {
    return (qs[32 * (e / 64) + e % 32] >> (4 * ((e % 64) / 32))) & 15;
}
static int q5_level(const ak__block_q5_k *b, int e) {
    return q4_level(b->qs, e) | ((b->qh[e % 32] >> (e / 32)) & 1) << 4;
}
static int q6_level(const ak__block_q6_k *b, int e) { /* −32..31 */
    int h = e / 128, r = e % 128, quarter = r / 32, l = r % 32;
    int low = (b->ql[64 * h + l + 32 * (quarter & 1)] >> (4 * (quarter >> 1))) & 15;
    int high = (b->qh[32 * h + l] >> (2 * quarter)) & 3;
    return (low | high << 4) - 32;
}
static int iq4_level(const uint8_t *qs16, int e) { /* e < 32 */
    return ak__iq4nl_values[(qs16[e % 16] >> (4 * (e / 16))) & 15];
}

static void dequantize_block(ak_wtype wtype, const void *blk, float *y) {
    switch (wtype) {
    case AK_WTYPE_Q2_K: {
        const ak__block_q2_k *b = blk;
        float d = h2f(b->d), mn = h2f(b->dmin);
        for (int e = 0; e < AK__QK_K; e++) {
            uint8_t sc = b->scales[(e / 128) * 8 + ((e % 128) / 32) * 2 + (e % 32) / 16];
            float dl = d * (sc & 0xF), ml = mn * (sc >> 4);
            y[e] = dl * q2_level(b, e) - ml;
        }
        break;
    }
    case AK_WTYPE_Q3_K: {
        const ak__block_q3_k *b = blk;
        int8_t sc[16];
        ak__kquant_scales_q3(b->scales, sc);
        float d = h2f(b->d);
        for (int e = 0; e < AK__QK_K; e++) {
            int g = (e / 128) * 8 + ((e % 128) / 32) * 2 + (e % 32) / 16;
            float dl = d * sc[g];
            y[e] = dl * q3_level(b, e);
        }
        break;
    }
    case AK_WTYPE_Q4_K:
    case AK_WTYPE_Q5_K: {
        const ak__block_q4_k *b4 = blk;
        const ak__block_q5_k *b5 = blk;
        uint8_t sc[8], m[8];
        ak__kquant_scales_k4(b4->scales, sc, m); /* d, dmin, scales: same place in both */
        float d = h2f(b4->d), mn = h2f(b4->dmin);
        for (int e = 0; e < AK__QK_K; e++) {
            float dl = d * sc[e / 32], ml = mn * m[e / 32];
            int q = wtype == AK_WTYPE_Q4_K ? q4_level(b4->qs, e) : q5_level(b5, e);
            y[e] = dl * q - ml;
        }
        break;
    }
    case AK_WTYPE_Q6_K: {
        const ak__block_q6_k *b = blk;
        float d = h2f(b->d);
        for (int e = 0; e < AK__QK_K; e++) {
            int g = (e / 128) * 8 + ((e % 128) / 32) * 2 + (e % 32) / 16;
            y[e] = d * b->scales[g] * q6_level(b, e);
        }
        break;
    }
    case AK_WTYPE_Q8_K: {
        const ak__block_q8_k *b = blk;
        for (int e = 0; e < AK__QK_K; e++) y[e] = b->d * b->qs[e];
        break;
    }
    case AK_WTYPE_IQ4_NL: {
        const ak__block_iq4_nl *b = blk;
        float d = h2f(b->d);
        for (int e = 0; e < 32; e++) y[e] = d * iq4_level(b->qs, e);
        break;
    }
    case AK_WTYPE_IQ4_XS: {
        const ak__block_iq4_xs *b = blk;
        float d = h2f(b->d);
        for (int g = 0; g < 8; g++) {
            int ls = ((b->scales_l[g / 2] >> (4 * (g % 2))) & 0xF) | ((b->scales_h >> (2 * g)) & 3) << 4;
            float dl = d * (ls - 32);
            for (int e = 0; e < 32; e++) y[32 * g + e] = dl * iq4_level(b->qs + 16 * g, e);
        }
        break;
    }
    default: break;
    }
}

void ak__kquant_dequantize_ref(ak_wtype wtype, const void *src, float *dst, size_t K) {
    size_t e = 0, b = 0;
    if (!ak__kquant_block(wtype, &e, &b)) return;
    for (size_t i = 0; i < K / e; i++)
        dequantize_block(wtype, (const uint8_t *)src + i * b, dst + i * e);
}

void ak_f32_quantize_q8_k__ref(const float *x, size_t K, float *d, int16_t *bsums, int8_t *q) {
    for (size_t i = 0; i < K / AK__QK_K; i++) {
        ak__block_q8_k b;
        quantize_q8_k(x + i * AK__QK_K, &b);
        d[i] = b.d;
        memcpy(q + i * AK__QK_K, b.qs, AK__QK_K);
        memcpy(bsums + i * 16, b.bsums, sizeof b.bsums);
    }
}

/* ---- the linear kernels: per super-block, exact integer sums scaled once ----------- */

/* One weight super-block · one Q8_K activation block (scale dx, values xq, sums of 16
 * xs): d·dx·Σ_g sc_g·Σ q·x  −  dmin·dx·Σ_g m_g·Σ x, the integer sums exact. */
static float block_dot_k(ak_wtype wtype, const void *blk, float dx, const int8_t *xq,
                         const int16_t *xs) {
    int32_t sumi = 0, summ = 0;
    float d = 0, dmin = 0;
    switch (wtype) {
    case AK_WTYPE_Q2_K: {
        const ak__block_q2_k *b = blk;
        for (int e = 0; e < AK__QK_K; e++) {
            int g = (e / 128) * 8 + ((e % 128) / 32) * 2 + (e % 32) / 16;
            sumi += (b->scales[g] & 0xF) * q2_level(b, e) * xq[e];
        }
        for (int g = 0; g < 16; g++) {
            int gg = (g / 8) * 128 + ((g % 8) / 2) * 32 + (g % 2) * 16; /* first value */
            summ += (b->scales[g] >> 4) * xs[gg / 16];
        }
        d = h2f(b->d), dmin = h2f(b->dmin);
        break;
    }
    case AK_WTYPE_Q3_K: {
        const ak__block_q3_k *b = blk;
        int8_t sc[16];
        ak__kquant_scales_q3(b->scales, sc);
        for (int e = 0; e < AK__QK_K; e++) {
            int g = (e / 128) * 8 + ((e % 128) / 32) * 2 + (e % 32) / 16;
            sumi += sc[g] * q3_level(b, e) * xq[e];
        }
        d = h2f(b->d);
        break;
    }
    case AK_WTYPE_Q4_K:
    case AK_WTYPE_Q5_K: {
        const ak__block_q4_k *b4 = blk;
        uint8_t sc[8], m[8];
        ak__kquant_scales_k4(b4->scales, sc, m);
        for (int e = 0; e < AK__QK_K; e++) {
            int q = wtype == AK_WTYPE_Q4_K ? q4_level(b4->qs, e) : q5_level(blk, e);
            sumi += sc[e / 32] * q * xq[e];
        }
        for (int g = 0; g < 8; g++) summ += m[g] * (xs[2 * g] + xs[2 * g + 1]);
        d = h2f(b4->d), dmin = h2f(b4->dmin);
        break;
    }
    case AK_WTYPE_Q6_K: {
        const ak__block_q6_k *b = blk;
        for (int e = 0; e < AK__QK_K; e++) {
            int g = (e / 128) * 8 + ((e % 128) / 32) * 2 + (e % 32) / 16;
            sumi += b->scales[g] * q6_level(b, e) * xq[e];
        }
        d = h2f(b->d);
        break;
    }
    case AK_WTYPE_Q8_K: {
        const ak__block_q8_k *b = blk;
        for (int e = 0; e < AK__QK_K; e++) sumi += b->qs[e] * xq[e];
        d = b->d;
        break;
    }
    case AK_WTYPE_IQ4_XS: {
        const ak__block_iq4_xs *b = blk;
        for (int g = 0; g < 8; g++) {
            int ls = ((b->scales_l[g / 2] >> (4 * (g % 2))) & 0xF) | ((b->scales_h >> (2 * g)) & 3) << 4;
            int32_t s = 0;
            for (int e = 0; e < 32; e++) s += iq4_level(b->qs + 16 * g, e) * xq[32 * g + e];
            sumi += (ls - 32) * s;
        }
        d = h2f(b->d);
        break;
    }
    default: break;
    }
    return (float)sumi * (d * dx) - (float)summ * (dmin * dx);
}

static void store_y(const ak__linear_job *j, size_t t, size_t n, double dot) {
    float *y = j->Y + t * j->ldy + n;
    *y = j->accumulate ? (float)((double)*y + dot) : (float)dot;
}

static void linear_k_ref(ak_wtype wtype, const ak__linear_job *j, size_t n0, size_t n1) {
    size_t e = 0, bsz = 0, nb = j->K / AK__QK_K;
    ak__kquant_block(wtype, &e, &bsz);
    for (size_t n = n0; n < n1; n++) {
        const uint8_t *row = j->W + n * j->row_bytes;
        for (size_t t = 0; t < j->T; t++) {
            double dot = 0.0;
            for (size_t i = 0; i < nb; i++)
                dot += block_dot_k(wtype, row + i * bsz, j->kd[t * nb + i],
                                   j->xq + t * j->ldq + i * AK__QK_K, j->kbs + (t * nb + i) * 16);
            store_y(j, t, n, dot);
        }
    }
}

void ak_q2_k_linear__ref(const ak__linear_job *j, size_t n0, size_t n1) {
    linear_k_ref(AK_WTYPE_Q2_K, j, n0, n1);
}
void ak_q3_k_linear__ref(const ak__linear_job *j, size_t n0, size_t n1) {
    linear_k_ref(AK_WTYPE_Q3_K, j, n0, n1);
}
void ak_q4_k_linear__ref(const ak__linear_job *j, size_t n0, size_t n1) {
    linear_k_ref(AK_WTYPE_Q4_K, j, n0, n1);
}
void ak_q5_k_linear__ref(const ak__linear_job *j, size_t n0, size_t n1) {
    linear_k_ref(AK_WTYPE_Q5_K, j, n0, n1);
}
void ak_q6_k_linear__ref(const ak__linear_job *j, size_t n0, size_t n1) {
    linear_k_ref(AK_WTYPE_Q6_K, j, n0, n1);
}
void ak_q8_k_linear__ref(const ak__linear_job *j, size_t n0, size_t n1) {
    linear_k_ref(AK_WTYPE_Q8_K, j, n0, n1);
}
void ak_iq4_xs_linear__ref(const ak__linear_job *j, size_t n0, size_t n1) {
    linear_k_ref(AK_WTYPE_IQ4_XS, j, n0, n1);
}

/* IQ4_NL: blocks of 32 against Q8_0 activations (as llama.cpp), d·dx·Σ level·x. */
void ak_iq4_nl_linear__ref(const ak__linear_job *j, size_t n0, size_t n1) {
    size_t nb = j->K / 32;
    for (size_t n = n0; n < n1; n++) {
        const ak__block_iq4_nl *row = (const void *)(j->W + n * j->row_bytes);
        for (size_t t = 0; t < j->T; t++) {
            const float *xd = j->xd + t * (j->ldq / 32);
            const int8_t *xq = j->xq + t * j->ldq;
            double dot = 0.0;
            for (size_t i = 0; i < nb; i++) {
                int32_t s = 0;
                for (int e = 0; e < 32; e++) s += iq4_level(row[i].qs, e) * xq[32 * i + e];
                dot += (double)((float)s * (h2f(row[i].d) * xd[i]));
            }
            store_y(j, t, n, dot);
        }
    }
}
