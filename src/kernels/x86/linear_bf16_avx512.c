/* bf16 linear layer with AVX512-BF16 (ak_bf16_linear__avx512bf16): for T >= 2 (prefill,
 * batched decode) the activations arrive rounded to bf16 (ak__linear_job.xb, rounded
 * by the driver as llama.cpp does) and vdpbf16ps takes two bf16 products per f32 lane
 * and instruction, twice the work of widening the weights to f32 and using FMAs, which
 * is what bounds these compute-bound calls. The products of two bf16 are exact in f32;
 * sums are f32 as in the widening kernels. T = 1 (one token's decode) keeps the exact
 * f32 activations and the widening row kernel: it is bound by the weights' bandwidth, so
 * halving the arithmetic would gain nothing there.
 *
 * The tile orders, prefetching and token/row blocking are kernels/linear_x86.h's; only
 * the tile body is this file's. 256-bit vectors, as the other AVX-512 kernels (Zen 4
 * splits 512-bit operations in two). */
#pragma GCC target("avx512bf16")
#include "core/half.h"
#include "kernels/dispatch.h"

#define LX_FLOAT_C 6
#define LX_QUANT_C 3
#define LX_ISA avx512bf16
#define LX_VNNI 0
#define LX_TILES_ONLY
#include "kernels/linear_x86.h"

/* Rows [n, n+R) × tokens [t, t+C) from bf16 weights and bf16 activations, 16 elements
 * per step; the K % 16 rest in scalar f32 (exact products, f32 sums). */
LX_AI void lx_bf16dot_tile(int slot, int R, int C, const ak__linear_job *j, size_t n,
                           size_t t, pf_walk *pf, size_t npf) {
    const uint8_t *w = j->W + n * j->row_bytes;
    const uint16_t *x = j->xb + t * j->ldxb;
    size_t K = j->K, rb = j->row_bytes, ldx = j->ldxb, k = 0;
    __m256 acc[LX_R][LX_FLOAT_C];
    float tail[LX_R][LX_FLOAT_C];
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) {
            acc[r][c] = _mm256_setzero_ps();
            tail[r][c] = 0.0f;
        }
    pf_walk p = *pf;
    for (; k + 16 <= K; k += 16) {
        __m256bh xv[LX_FLOAT_C];
        if (npf) {
            pf_walk_one(&p);
            npf--;
        }
        for (int c = 0; c < C; c++)
            xv[c] = (__m256bh)_mm256_loadu_si256((const __m256i *)(const void *)(x + (size_t)c * ldx + k));
        for (int r = 0; r < R; r++) {
            __m256bh wv = (__m256bh)_mm256_loadu_si256(
                (const __m256i *)(const void *)(w + (size_t)r * rb + k * sizeof(uint16_t)));
            for (int c = 0; c < C; c++) acc[r][c] = _mm256_dpbf16_ps(acc[r][c], wv, xv[c]);
        }
    }
    for (; k < K; k++)
        for (int r = 0; r < R; r++) {
            float wk = lx_load1(slot, w + (size_t)r * rb, k);
            for (int c = 0; c < C; c++)
                tail[r][c] += wk * ak__bf16_to_f32_ref(x[(size_t)c * ldx + k]);
        }
    for (; npf; npf--) pf_walk_one(&p);
    *pf = p;
    LX_STORE_TILE(R, C, acc, tail, j->Y + t * j->ldy + n, j->ldy, j->accumulate);
}

static LX_DEFINE_LINEAR(bf16dot_linear, lx_bf16dot_tile, LX_FLOAT_ROW, LX_FLOAT_C,
                        AK__LIN_BF16, LX_BLOCKED_FLOAT)

void ak_bf16_linear__avx512bf16(const ak__linear_job *j, size_t n0, size_t n1) {
    if (!j->xb) { /* f32 activations (T = 1): the exact widening kernel */
        ak_bf16_linear__avx512(j, n0, n1);
        return;
    }
    bf16dot_linear(j, n0, n1);
}
