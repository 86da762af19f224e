/* Scalar references of the attention kernels over q8_0 rows (an LLM's q8_0 KV cache:
 * each row of `dim` values is dim/32 of ggml's blocks, an f16 scale d and 32 int8
 * values, value = d·q): the oracle of the ISA variants and what AK_KERNELS=ref runs.
 * Two ways to score a query against q8_0 keys:
 *   q8_0_dot_rows     the f32 query against keys widened on the fly (d·q exactly in f32);
 *   q8_0_dot_rows_q8  the query itself quantized to q8_0 (linear_quantize_x: widened
 *                     scales qd, values qq), an exact integer dot product per block,
 *                     scaled by qd·d — llama.cpp's way.
 * Sums run in block / row order; variants sum in other orders, so tests compare within
 * a rounding bound (the integer part of q8_0_dot_rows_q8 is exact everywhere). */
#include <string.h>

#include "kernels/dispatch.h"
#include "kernels/linear.h"

static const ak__block_q8_0 *row_blocks(const void *rows, size_t j, size_t dim) {
    return (const ak__block_q8_0 *)rows + j * (dim / AK__QK);
}

void ak_q8_0_dot_rows__ref(float *out, const float *q, const void *rows, size_t n, size_t dim,
                           float scale) {
    for (size_t j = 0; j < n; j++) {
        const ak__block_q8_0 *r = row_blocks(rows, j, dim);
        float s = 0.0f;
        for (size_t b = 0; b < dim / AK__QK; b++) {
            float d = ak__block_scale(&r[b]), bs = 0.0f;
            for (size_t i = 0; i < AK__QK; i++) bs += q[b * AK__QK + i] * (float)r[b].qs[i];
            s += d * bs;
        }
        out[j] = s * scale;
    }
}

void ak_q8_0_dot_rows_q8__ref(float *out, const float *qd, const int8_t *qq, const void *rows,
                              size_t n, size_t dim, float scale) {
    for (size_t j = 0; j < n; j++) {
        const ak__block_q8_0 *r = row_blocks(rows, j, dim);
        float s = 0.0f;
        for (size_t b = 0; b < dim / AK__QK; b++) {
            int32_t dot = 0;
            for (size_t i = 0; i < AK__QK; i++) dot += (int32_t)qq[b * AK__QK + i] * r[b].qs[i];
            s += qd[b] * ak__block_scale(&r[b]) * (float)dot;
        }
        out[j] = s * scale;
    }
}

void ak_q8_0_madd_rows__ref(float *o, const float *p, const void *rows, size_t n, size_t dim) {
    for (size_t j = 0; j < n; j++) {
        const ak__block_q8_0 *r = row_blocks(rows, j, dim);
        for (size_t b = 0; b < dim / AK__QK; b++) {
            float w = p[j] * ak__block_scale(&r[b]);
            for (size_t i = 0; i < AK__QK; i++) o[b * AK__QK + i] += w * (float)r[b].qs[i];
        }
    }
}
