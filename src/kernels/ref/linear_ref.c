/* Scalar reference of the linear layers: weight storage conversions (ggml's Q8_0/Q4_0
 * rules, so files written by llama.cpp and by us hold the same bytes), Q8_0 activation
 * quantization, and the ak_linear kernels one dot product at a time. The test oracle,
 * and what AK_KERNELS=ref runs. */
#include <math.h>
#include <string.h>

#include "core/half.h"
#include "kernels/dispatch.h"
#include "kernels/linear.h"

float ak__block_scale(const void *block) {
    uint16_t h;
    memcpy(&h, block, sizeof h);
    return ak__f16_to_f32_ref(h);
}

static void store_scale(void *block, float d) {
    uint16_t h = ak__f32_to_f16_ref(d);
    memcpy(block, &h, sizeof h);
}

/* ggml's quantize_row_q8_0 for one block: d = max|x|/127, q = roundf(x·(1/d)). The
 * multiply by the reciprocal (not a division) is ggml's and changes some roundings.
 * Where ggml's conversions are undefined we choose:
 * - a block holding a NaN or ±Inf gets d = NaN and q = 0: its dot products are NaN, as
 *   the float path's are (an Inf gives NaN there too, not ±Inf), and every q and block
 *   sum stays in range;
 * - a block so small that 1/d overflows (max|x| < 2^-121) gets q = 0, what ggml's
 *   conversion of ±Inf to int8 gives on x86; its d is below f16's range and stored as 0
 *   anyway. */
static void quantize_block_q8_0(const float *x, float *d_out, int8_t *q) {
    float amax = 0.0f;
    for (int j = 0; j < AK__QK; j++) {
        if (!isfinite(x[j])) {
            memset(q, 0, AK__QK);
            *d_out = NAN;
            return;
        }
        amax = fmaxf(amax, fabsf(x[j]));
    }
    float d = amax / 127.0f;
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    if (isinf(id)) id = 0.0f;
    for (int j = 0; j < AK__QK; j++) q[j] = (int8_t)roundf(x[j] * id); /* |x·id| ≤ 127 */
    *d_out = d;
}

/* min(15, (int)v) for v = x·(1/d) + 8.5 ∈ [0.5, 16.5] when x is finite; NaN gives 0
 * instead of an undefined conversion. */
static int nibble(float v) {
    return v >= 15.0f ? 15 : v > 0.0f ? (int)v : 0;
}

/* ggml's quantize_row_q4_0 for one block: d = m/−8 where m is the first element of the
 * largest magnitude (sign kept), value = min(15, (int)(x·(1/d) + 8.5)). */
static void quantize_block_q4_0(const float *x, ak__block_q4_0 *b) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < AK__QK; j++)
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    float d = max / -8.0f;
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    store_scale(&b->d, d);
    for (int j = 0; j < AK__QK / 2; j++)
        b->qs[j] = (uint8_t)(nibble(x[j] * id + 8.5f) | nibble(x[j + AK__QK / 2] * id + 8.5f) << 4);
}

void ak__quantize_row_ref(ak_wtype wtype, const float *src, void *dst, size_t K) {
    uint16_t *h = dst;
    switch (wtype) {
    case AK_WTYPE_F32:
        memcpy(dst, src, K * sizeof(float));
        break;
    case AK_WTYPE_F16:
        for (size_t k = 0; k < K; k++) h[k] = ak__f32_to_f16_ref(src[k]);
        break;
    case AK_WTYPE_BF16:
        for (size_t k = 0; k < K; k++) h[k] = ak__f32_to_bf16_ref(src[k]);
        break;
    case AK_WTYPE_Q8_0: {
        ak__block_q8_0 *b = dst;
        for (size_t i = 0; i < K / AK__QK; i++) {
            float d;
            quantize_block_q8_0(src + i * AK__QK, &d, b[i].qs);
            store_scale(&b[i].d, d);
        }
        break;
    }
    case AK_WTYPE_Q4_0:
        for (size_t i = 0; i < K / AK__QK; i++)
            quantize_block_q4_0(src + i * AK__QK, (ak__block_q4_0 *)dst + i);
        break;
    default: break; /* the super-block types: kernels/ref/kquant_ref.c */
    }
}

void ak__dequantize_row_ref(ak_wtype wtype, const void *src, float *dst, size_t K) {
    const uint16_t *h = src;
    switch (wtype) {
    case AK_WTYPE_F32:
        memcpy(dst, src, K * sizeof(float));
        break;
    case AK_WTYPE_F16:
        for (size_t k = 0; k < K; k++) dst[k] = ak__f16_to_f32_ref(h[k]);
        break;
    case AK_WTYPE_BF16:
        for (size_t k = 0; k < K; k++) dst[k] = ak__bf16_to_f32_ref(h[k]);
        break;
    case AK_WTYPE_Q8_0:
        for (size_t i = 0; i < K / AK__QK; i++) {
            const ak__block_q8_0 *b = (const ak__block_q8_0 *)src + i;
            float d = ak__block_scale(b);
            for (int j = 0; j < AK__QK; j++) dst[i * AK__QK + j] = d * (float)b->qs[j];
        }
        break;
    case AK_WTYPE_Q4_0:
        for (size_t i = 0; i < K / AK__QK; i++) {
            const ak__block_q4_0 *b = (const ak__block_q4_0 *)src + i;
            float d = ak__block_scale(b);
            for (int j = 0; j < AK__QK / 2; j++) {
                dst[i * AK__QK + j] = d * (float)((b->qs[j] & 15) - 8);
                dst[i * AK__QK + j + AK__QK / 2] = d * (float)((b->qs[j] >> 4) - 8);
            }
        }
        break;
    default: break; /* the super-block types: kernels/ref/kquant_ref.c */
    }
}

void ak_f32_quantize_q8_0__ref(const float *x, size_t K, float *d, int32_t *s, int8_t *q) {
    for (size_t i = 0; i < K / AK__QK; i++) {
        float di;
        int8_t *qi = q + i * AK__QK;
        quantize_block_q8_0(x + i * AK__QK, &di, qi);
        d[i] = ak__f16_to_f32_ref(ak__f32_to_f16_ref(di)); /* the scale as stored */
        s[i] = 0;
        for (int j = 0; j < AK__QK; j++) s[i] += qi[j];
    }
}

void ak__linear_offsets(ak_wtype wtype, int32_t *sums, size_t count) {
    int32_t m = wtype == AK_WTYPE_Q4_0 ? -8 : -128;
    for (size_t i = 0; i < count; i++) sums[i] *= m;
}

/* ---- kernels: one dot product per (token, column), accumulated in double ---------- */

static void store_y(const ak__linear_job *j, size_t t, size_t n, double dot) {
    float *y = j->Y + t * j->ldy + n;
    *y = j->accumulate ? (float)((double)*y + dot) : (float)dot;
}

/* Weights widened element by element: f32, f16, bf16. For bf16 weights with T >= 2 the
 * driver has rounded the activations to bf16 and X holds their widened values
 * (ak__linear_job.xb), so this is exactly the arithmetic of the AVX512-BF16 kernel's
 * products (bf16 × bf16, exact), summed in double instead of f32. */
static float weight_at(int slot, const uint8_t *row, size_t k) {
    if (slot == AK__LIN_F32) {
        float w;
        memcpy(&w, row + k * sizeof w, sizeof w);
        return w;
    }
    uint16_t h;
    memcpy(&h, row + k * sizeof h, sizeof h);
    return slot == AK__LIN_F16 ? ak__f16_to_f32_ref(h) : ak__bf16_to_f32_ref(h);
}

static void linear_float_ref(int slot, const ak__linear_job *j, size_t n0, size_t n1) {
    for (size_t n = n0; n < n1; n++) {
        const uint8_t *row = j->W + n * j->row_bytes;
        for (size_t t = 0; t < j->T; t++) {
            const float *x = j->X + t * j->ldx;
            double dot = 0.0;
            for (size_t k = 0; k < j->K; k++) dot += (double)weight_at(slot, row, k) * x[k];
            store_y(j, t, n, dot);
        }
    }
}

void ak_f32_linear__ref(const ak__linear_job *j, size_t n0, size_t n1) {
    linear_float_ref(AK__LIN_F32, j, n0, n1);
}
void ak_f16_linear__ref(const ak__linear_job *j, size_t n0, size_t n1) {
    linear_float_ref(AK__LIN_F16, j, n0, n1);
}
void ak_bf16_linear__ref(const ak__linear_job *j, size_t n0, size_t n1) {
    linear_float_ref(AK__LIN_BF16, j, n0, n1);
}

/* Value j of a quantized weight block, as an integer (Q4_0 offset by −8). */
static int wq_at(int slot, const uint8_t *block, int e) {
    if (slot == AK__LIN_Q8_0) return ((const ak__block_q8_0 *)(const void *)block)->qs[e];
    const ak__block_q4_0 *b = (const void *)block;
    int nib = e < AK__QK / 2 ? b->qs[e] & 15 : b->qs[e - AK__QK / 2] >> 4;
    return nib - 8;
}

/* Per block: the exact integer dot product, scaled by d_w·d_x (as ggml). */
static void linear_quant_ref(int slot, const ak__linear_job *j, size_t n0, size_t n1) {
    size_t nb = j->K / AK__QK;
    size_t bsz = slot == AK__LIN_Q8_0 ? sizeof(ak__block_q8_0) : sizeof(ak__block_q4_0);
    for (size_t n = n0; n < n1; n++) {
        const uint8_t *row = j->W + n * j->row_bytes;
        for (size_t t = 0; t < j->T; t++) {
            const float *xd = j->xd + t * (j->ldq / AK__QK);
            const int8_t *xq = j->xq + t * j->ldq;
            double dot = 0.0;
            for (size_t i = 0; i < nb; i++) {
                const uint8_t *blk = row + i * bsz;
                int32_t sumi = 0;
                for (int e = 0; e < AK__QK; e++) sumi += wq_at(slot, blk, e) * xq[i * AK__QK + e];
                dot += (double)((float)sumi * (ak__block_scale(blk) * xd[i]));
            }
            store_y(j, t, n, dot);
        }
    }
}

void ak_q8_0_linear__ref(const ak__linear_job *j, size_t n0, size_t n1) {
    linear_quant_ref(AK__LIN_Q8_0, j, n0, n1);
}
void ak_q4_0_linear__ref(const ak__linear_job *j, size_t n0, size_t n1) {
    linear_quant_ref(AK__LIN_Q4_0, j, n0, n1);
}

