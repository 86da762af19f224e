/* x86 linear-layer kernel bodies, included by kernels/x86/linear_avx2.c and
 * linear_avx512.c, which compile them with their own instruction sets and tile sizes.
 *
 * T > 1: tiles of R = 4 weight rows × C tokens held in 256-bit registers (R·C
 * accumulators, each a partial dot product over K): one weight vector, widened to f32
 * (F16C for f16, a shift for bf16) or unpacked to bytes (Q8_0/Q4_0), is loaded once per
 * k step and used for all C tokens. At the end of a tile, four rows' accumulators are
 * reduced together (hadd tree) into 4 outputs. The drivers order the tiles for the
 * caches (rows outer for few tokens, blocks of rows outer for many) and prefetch the
 * weights of rows to come.
 * T = 1: the bandwidth-bound GEMV, one row at a time on two sequential streams (with
 * VNNI, Q8_0/Q4_0 take a row of each stream together).
 * VNNI and T >= 4, Q8_0/Q4_0: 4 tokens in the lanes of each vpdpbusd instead
 * (lx_quant_interleaved, below), which pays the float side once per 4 tokens.
 *
 * Quantized weights meet Q8_0 activations block by block: the int8 dot product of a
 * 32-block is exact in int32 lanes, converted and scaled by d_w·d_x into float lanes.
 * Products of a signed by an unsigned byte (maddubs, vpdpbusd) need one unsigned side:
 *   Q4_0: the nibbles 0..15 are unsigned; Σ(n−8)·x = Σ n·x − 8·Σx, the second term
 *         (job->xo, computed once per call) put into lane 0 of the int32 accumulator
 *         (the GEMV adds it per 8 blocks in float instead).
 *   Q8_0: AVX2 uses |x| and w with x's sign (maddubs pairs stay below 2^15); VNNI
 *         offsets w by 128 (w ^ 0x80) and subtracts 128·Σx the same way.
 *
 * The including file defines, before including:
 *   LX_FLOAT_C   tokens per float tile (registers: 4·C accumulators + C + 1)
 *   LX_QUANT_C   tokens per quantized tile
 *   LX_VNNI      1 to use vpdpbusd (AVX512-VNNI + VL), 0 for maddubs
 *   LX_ISA       its variant's name (avx2, avx512)
 * and gets the kernels ak_<type>_linear__<isa>(job, n0, n1) and
 * ak_f32_quantize_q8_0__<isa> that kernels/kernels.def lists. */
#ifndef AK_KERNELS_LINEAR_X86_H
#define AK_KERNELS_LINEAR_X86_H

#include <immintrin.h>
#include <string.h>

#include "kernels/linear.h"
#include "kernels/x86/pf_walk.h"

#define LX_AI static inline __attribute__((always_inline))
#ifndef LX_WIDE
#define LX_WIDE 0 /* 1: the 512-bit lane tiles for T >= 16 (needs LX_VNNI) */
#endif
#if LX_WIDE
#define LX_LANES_WIDE(slot, j, n0, n1) lx_quant_lanes_wide(slot, j, n0, n1)
#else
#define LX_LANES_WIDE(slot, j, n0, n1) ((void)0)
#endif
#define LX_R 4 /* weight rows per full tile */

/* ---- weights to f32 ---------------------------------------------------------------------- */

/* 8 weights of row `row` from element k, as f32. */
LX_AI __m256 lx_load8(int slot, const uint8_t *row, size_t k) {
    if (slot == AK__LIN_F32) return _mm256_loadu_ps((const float *)(const void *)row + k);
    __m128i h = _mm_loadu_si128((const __m128i *)(const void *)(row + 2 * k));
    if (slot == AK__LIN_F16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)); /* bf16 */
}

/* One weight, for the K % 8 tail. */
LX_AI float lx_load1(int slot, const uint8_t *row, size_t k) {
    if (slot == AK__LIN_F32) {
        float w;
        memcpy(&w, row + 4 * k, sizeof w);
        return w;
    }
    uint16_t h;
    memcpy(&h, row + 2 * k, sizeof h);
    if (slot == AK__LIN_F16) return _cvtsh_ss(h);
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* ---- reductions and stores --------------------------------------------------------------- */

/* {Σa, Σb, Σc, Σd} */
LX_AI __m128 lx_hsum4(__m256 a, __m256 b, __m256 c, __m256 d) {
    __m256 ab = _mm256_hadd_ps(a, b), cd = _mm256_hadd_ps(c, d);
    __m256 s = _mm256_hadd_ps(ab, cd);
    return _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
}

LX_AI float lx_hsum1(__m256 a) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Writes the R (4 or 1) sums of token column c: y[0..R) (+)= acc[r][c] + tail[r]. */
#define LX_STORE_TILE(R, C, acc, tail, Y, ldy, accumulate)                                   \
    do {                                                                                      \
        for (int c_ = 0; c_ < (C); c_++) {                                                    \
            float *y_ = (Y) + (size_t)c_ * (ldy);                                             \
            if ((R) == LX_R) {                                                                \
                __m128 s_ = lx_hsum4(acc[0][c_], acc[1][c_], acc[2][c_], acc[3][c_]);         \
                s_ = _mm_add_ps(s_, _mm_setr_ps(tail[0][c_], tail[1][c_], tail[2][c_],        \
                                                tail[3][c_]));                                \
                if (accumulate) s_ = _mm_add_ps(s_, _mm_loadu_ps(y_));                        \
                _mm_storeu_ps(y_, s_);                                                        \
            } else {                                                                          \
                float s1_ = lx_hsum1(acc[0][c_]) + tail[0][c_];                               \
                y_[0] = (accumulate) ? y_[0] + s1_ : s1_;                                     \
            }                                                                                 \
        }                                                                                     \
    } while (0)

/* ---- prefetching the weights of rows to come --------------------------------------------- */

/* Bytes of the K weights of a row. */
LX_AI size_t lx_used_bytes(int slot, const ak__linear_job *j) {
    switch (slot) {
    case AK__LIN_F32: return j->K * 4;
    case AK__LIN_Q8_0: return j->K / AK__QK * sizeof(ak__block_q8_0);
    case AK__LIN_Q4_0: return j->K / AK__QK * sizeof(ak__block_q4_0);
    default: return j->K * 2;
    }
}

/* Rows [n, n + rows) of the job's weights, as a prefetch walk (kernels/x86/pf_walk.h):
 * with T > 1 a tile reads its 4 rows as 4 short interleaved streams, which the hardware
 * prefetcher does not follow, so rows coming from DRAM would stall the FMAs. */
LX_AI pf_walk lx_pf_rows(int slot, const ak__linear_job *j, size_t n, size_t rows, int near) {
    pf_walk p = {j->W + n * j->row_bytes, 0, lx_used_bytes(slot, j), j->row_bytes, rows, near};
    return p;
}

LX_AI size_t lx_pf_lines(const pf_walk *p) { return p->rows * ((p->bytes + 63) / 64); }

/* ---- float weights (f32, f16, bf16) ------------------------------------------------------ */

/* Rows [n, n+R) × tokens [t, t+C), prefetching `npf` lines of *pf on the way (one per k
 * step, any rest at the end). */
LX_AI void lx_float_tile(int slot, int R, int C, const ak__linear_job *j, size_t n, size_t t,
                         pf_walk *pf, size_t npf) {
    const uint8_t *w = j->W + n * j->row_bytes;
    const float *x = j->X + t * j->ldx;
    size_t K = j->K, rb = j->row_bytes, ldx = j->ldx, k = 0;
    __m256 acc[LX_R][LX_FLOAT_C];
    float tail[LX_R][LX_FLOAT_C];
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) {
            acc[r][c] = _mm256_setzero_ps();
            tail[r][c] = 0.0f;
        }
    pf_walk p = *pf; /* a local copy stays in registers */
    for (; k + 8 <= K; k += 8) {
        __m256 xv[LX_FLOAT_C];
        if (npf) {
            pf_walk_one(&p);
            npf--;
        }
        for (int c = 0; c < C; c++) xv[c] = _mm256_loadu_ps(x + (size_t)c * ldx + k);
        for (int r = 0; r < R; r++) {
            __m256 wv = lx_load8(slot, w + (size_t)r * rb, k);
            for (int c = 0; c < C; c++) acc[r][c] = _mm256_fmadd_ps(wv, xv[c], acc[r][c]);
        }
    }
    for (; k < K; k++)
        for (int r = 0; r < R; r++) {
            float wk = lx_load1(slot, w + (size_t)r * rb, k);
            for (int c = 0; c < C; c++) tail[r][c] += wk * x[(size_t)c * ldx + k];
        }
    for (; npf; npf--) pf_walk_one(&p);
    *pf = p;
    LX_STORE_TILE(R, C, acc, tail, j->Y + t * j->ldy + n, j->ldy, j->accumulate);
}

/* ---- quantized weights (Q8_0, Q4_0) × Q8_0 activations ----------------------------------- */

/* The 32 weights of block b of a row as bytes: Q8_0 signed (offset by 128 with VNNI),
 * Q4_0 the unsigned nibbles in element order (low nibbles, then high). */
LX_AI __m256i lx_wbytes(int slot, const uint8_t *blk) {
    if (slot == AK__LIN_Q8_0) {
        __m256i q = _mm256_loadu_si256((const __m256i *)(const void *)(blk + 2));
        return LX_VNNI ? _mm256_xor_si256(q, _mm256_set1_epi8((char)0x80)) : q;
    }
    /* both halves hold the 16 bytes; the high half shifted right by 4 */
    __m128i q16 = _mm_loadu_si128((const __m128i *)(const void *)(blk + 2));
    __m256i q = _mm256_broadcastsi128_si256(q16);
    q = _mm256_srlv_epi64(q, _mm256_setr_epi64x(0, 0, 4, 4));
    return _mm256_and_si256(q, _mm256_set1_epi8(15));
}

LX_AI float lx_scale(const uint8_t *blk) {
    uint16_t h;
    memcpy(&h, blk, sizeof h);
    return _cvtsh_ss(h);
}

/* The block's scale in all 8 lanes. */
LX_AI __m256 lx_scale8(const uint8_t *blk) {
    uint16_t h;
    memcpy(&h, blk, sizeof h);
    return _mm256_cvtph_ps(_mm_set1_epi16((short)h));
}

/* Exact int32 lanes summing to Σ w·x over one block; xo is the activation's offset
 * correction (−8·Σx or −128·Σx in lane 0, see the top of this file). */
LX_AI __m256i lx_dot32(int slot, __m256i wb, __m256i xv, __m256i xo) {
#if LX_VNNI
    (void)slot;
    return _mm256_dpbusd_epi32(xo, wb, xv);
#else
    const __m256i ones = _mm256_set1_epi16(1);
    if (slot == AK__LIN_Q8_0) { /* xo holds |x| here */
        __m256i p = _mm256_maddubs_epi16(xo, _mm256_sign_epi8(wb, xv));
        return _mm256_madd_epi16(p, ones);
    }
    __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(wb, xv), ones);
    return p; /* the −8·Σx offset is added per token by the caller */
#endif
}

/* Per-token block operand next to xv: the offset term in lane 0, or |x| (AVX2 Q8_0). */
LX_AI __m256i lx_xaux(int slot, __m256i xv, int32_t offset) {
#if LX_VNNI
    (void)slot;
    (void)xv;
    return _mm256_setr_epi32(offset, 0, 0, 0, 0, 0, 0, 0);
#else
    if (slot == AK__LIN_Q8_0) return _mm256_sign_epi8(xv, xv);
    return _mm256_setr_epi32(offset, 0, 0, 0, 0, 0, 0, 0);
#endif
}

/* Rows [n, n+R) × tokens [t, t+C); pf as for lx_float_tile (one line per block). */
LX_AI void lx_quant_tile(int slot, int R, int C, const ak__linear_job *j, size_t n, size_t t,
                         pf_walk *pf, size_t npf) {
    size_t nb = j->K / AK__QK, ldq = j->ldq, ldb = ldq / AK__QK, rb = j->row_bytes;
    size_t bsz = slot == AK__LIN_Q8_0 ? sizeof(ak__block_q8_0) : sizeof(ak__block_q4_0);
    const uint8_t *w = j->W + n * rb;
    const int8_t *xq = j->xq + t * ldq;
    const float *xd = j->xd + t * ldb;
    const int32_t *xo = j->xo + t * ldb;
    pf_walk p = *pf;
    __m256 acc[LX_R][LX_QUANT_C];
    float tail[LX_R][LX_QUANT_C];
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) {
            acc[r][c] = _mm256_setzero_ps();
            tail[r][c] = 0.0f;
        }
    for (size_t b = 0; b < nb; b++) {
        __m256i xv[LX_QUANT_C], xa[LX_QUANT_C];
        __m256 dx[LX_QUANT_C];
        if (npf) {
            pf_walk_one(&p);
            npf--;
        }
        for (int c = 0; c < C; c++) {
            const int8_t *xb = xq + (size_t)c * ldq + b * AK__QK;
            xv[c] = _mm256_loadu_si256((const __m256i *)(const void *)xb);
            xa[c] = lx_xaux(slot, xv[c], xo[(size_t)c * ldb + b]);
            dx[c] = _mm256_set1_ps(xd[(size_t)c * ldb + b]);
        }
        for (int r = 0; r < R; r++) {
            const uint8_t *blk = w + (size_t)r * rb + b * bsz;
            __m256i wb = lx_wbytes(slot, blk);
            __m256 dw = _mm256_set1_ps(lx_scale(blk));
            for (int c = 0; c < C; c++) {
                __m256i d = lx_dot32(slot, wb, xv[c], xa[c]);
#if !LX_VNNI
                if (slot == AK__LIN_Q4_0) d = _mm256_add_epi32(d, xa[c]);
#endif
                acc[r][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d), _mm256_mul_ps(dw, dx[c]),
                                            acc[r][c]);
            }
        }
    }
    for (; npf; npf--) pf_walk_one(&p);
    *pf = p;
    LX_STORE_TILE(R, C, acc, tail, j->Y + t * j->ldy + n, j->ldy, j->accumulate);
}

/* ---- VNNI, T >= 4: 4 tokens in the lanes of one vector ---------------------------------- */

#if LX_VNNI
/* The tiles above spend four vector operations per (row, token, block) — vpdpbusd, then
 * convert, scale product and FMA — for 32 multiply-adds: the float side, not the integer
 * dot product, bounds them. Here the 8 int32 lanes of one vpdpbusd belong to 4 tokens
 * instead: lane i (< 4) sums token i's elements 4j..4j+3 of a block, lane 4+i its
 * elements 16+4j..16+4j+3, against the weights' dword j of each 128-bit half broadcast
 * by one vpshufd. Four vpdpbusd cover a block for 4 tokens, and the convert, scale and
 * FMA are paid once per 4 tokens: 7 operations per 128 multiply-adds instead of 16.
 * Lanes i and 4+i are added when a tile is stored.
 *
 * The weights need no repacking: a Q8_0 block loaded as 32 bytes and a Q4_0 block's
 * nibbles unpacked by lx_wbytes both hold elements 0..15 in the low half and 16..31 in
 * the high half. The activations of 4 tokens are interleaved to match (a 4×4 dword
 * transpose per half) per group of 4 tokens and chunk of K, into a buffer on the stack
 * that stays in L1 while the rows of a block of weights pass under it. */

#define LX_IG 4        /* groups of 4 tokens per tile (16 tokens) */
#define LX_IR 2        /* weight rows per tile (see lx_itile) */
#define LX_IKB 32      /* blocks per K chunk: 16 tokens × 1024 bytes + their scales in L1 */

LX_AI size_t lx_div_up(size_t a, size_t b) { return (a + b - 1) / b; }

/* One group of 4 tokens, one chunk of blocks, interleaved: per block, 4 vectors of 32
 * bytes (dword j of every half of each token, j = 0..3), then the 4 activation scales
 * (f32) and the 4 offset terms (int32), 16 bytes each. Tokens past T are zeros. */
typedef struct lx_igroup {
    _Alignas(32) int8_t q[LX_IKB][4][32];
    _Alignas(16) float d[LX_IKB][4];
    _Alignas(16) int32_t o[LX_IKB][4];
} lx_igroup;

/* Interleaves tokens [t, t + 4) ∩ [0, T), blocks [kb, kb + nb) of the job's Q8_0
 * activations into g. */
LX_AI void lx_interleave(const ak__linear_job *j, size_t t, size_t kb, size_t nb, lx_igroup *g) {
    size_t ldb = j->ldq / AK__QK, live = j->T - t < 4 ? j->T - t : 4;
    for (size_t b = 0; b < nb; b++) {
        __m256i v[4];
        for (size_t i = 0; i < 4; i++) {
            size_t tok = t + i;
            if (i < live) {
                const int8_t *xb = j->xq + tok * j->ldq + (kb + b) * AK__QK;
                v[i] = _mm256_loadu_si256((const __m256i *)(const void *)xb);
                g->d[b][i] = j->xd[tok * ldb + kb + b];
                g->o[b][i] = j->xo[tok * ldb + kb + b];
            } else {
                v[i] = _mm256_setzero_si256();
                g->d[b][i] = 0.0f;
                g->o[b][i] = 0;
            }
        }
        /* per 128-bit half: rows = tokens, columns = dwords; transposed */
        __m256i a0 = _mm256_unpacklo_epi32(v[0], v[1]), a1 = _mm256_unpackhi_epi32(v[0], v[1]);
        __m256i a2 = _mm256_unpacklo_epi32(v[2], v[3]), a3 = _mm256_unpackhi_epi32(v[2], v[3]);
        _mm256_store_si256((__m256i *)(void *)g->q[b][0], _mm256_unpacklo_epi64(a0, a2));
        _mm256_store_si256((__m256i *)(void *)g->q[b][1], _mm256_unpackhi_epi64(a0, a2));
        _mm256_store_si256((__m256i *)(void *)g->q[b][2], _mm256_unpacklo_epi64(a1, a3));
        _mm256_store_si256((__m256i *)(void *)g->q[b][3], _mm256_unpackhi_epi64(a1, a3));
    }
}

/* Writes group g's 4 token sums of R rows: acc[r] lanes i and 4+i are token t + i. */
LX_AI void lx_istore(int R, const __m256 *acc, const ak__linear_job *j, size_t n, size_t t,
                     int accumulate) {
    size_t live = j->T - t < 4 ? j->T - t : 4;
    for (int r = 0; r < R; r++) {
        _Alignas(16) float v[4];
        _mm_store_ps(v, _mm_add_ps(_mm256_castps256_ps128(acc[r]), _mm256_extractf128_ps(acc[r], 1)));
        float *y = j->Y + t * j->ldy + n + (size_t)r;
        for (size_t i = 0; i < live; i++, y += j->ldy) *y = accumulate ? *y + v[i] : v[i];
    }
}

/* Rows [n, n+R) × the G interleaved groups of gs over blocks [kb, kb + nb). Per block the
 * R rows' weights are unpacked and broadcast once into registers (4 dword vectors and a
 * scale each) and used by all G groups, whose activations are read from L1 once per
 * block for all R rows: with R = 2 and G = 4 (16 tokens) that is 8 accumulators, 10
 * weight registers and 6 activation ones, so nothing spills, and the unpacking is paid
 * once per 16 tokens (it was once per 8 with 4 rows × 2 groups: 26 vector operations per
 * 256 multiply-adds there, 42 per 512 here). */
LX_AI void lx_itile(int slot, int R, int G, const ak__linear_job *j, size_t n, size_t kb,
                    size_t nb, const lx_igroup *gs, size_t t, int accumulate, pf_walk *pf,
                    size_t npf) {
    size_t rb = j->row_bytes;
    size_t bsz = slot == AK__LIN_Q8_0 ? sizeof(ak__block_q8_0) : sizeof(ak__block_q4_0);
    const uint8_t *w = j->W + n * rb + kb * bsz;
    __m256 acc[LX_IG][LX_IR];
    for (int g = 0; g < G; g++)
        for (int r = 0; r < R; r++) acc[g][r] = _mm256_setzero_ps();
    pf_walk p = *pf;
    for (size_t b = 0; b < nb; b++) {
        __m256i wq[LX_IR][4];
        __m256 dw[LX_IR];
        if (npf) {
            pf_walk_one(&p);
            npf--;
        }
        for (int r = 0; r < R; r++) {
            const uint8_t *blk = w + (size_t)r * rb + b * bsz;
            __m256i wb = lx_wbytes(slot, blk);
            dw[r] = _mm256_set1_ps(lx_scale(blk));
            wq[r][0] = _mm256_shuffle_epi32(wb, 0x00), wq[r][1] = _mm256_shuffle_epi32(wb, 0x55);
            wq[r][2] = _mm256_shuffle_epi32(wb, 0xaa), wq[r][3] = _mm256_shuffle_epi32(wb, 0xff);
        }
        for (int g = 0; g < G; g++) {
            const __m256i *xv = (const __m256i *)(const void *)gs[g].q[b];
            __m256i x0 = _mm256_load_si256(xv), x1 = _mm256_load_si256(xv + 1);
            __m256i x2 = _mm256_load_si256(xv + 2), x3 = _mm256_load_si256(xv + 3);
            __m256 dx = _mm256_broadcast_ps((const __m128 *)(const void *)gs[g].d[b]);
            /* the offset terms in lanes 0..3 only: lanes 4..7 are the same tokens */
            __m256i xo = _mm256_zextsi128_si256(_mm_load_si128((const __m128i *)(const void *)gs[g].o[b]));
            for (int r = 0; r < R; r++) {
                __m256i d = _mm256_dpbusd_epi32(xo, wq[r][0], x0);
                d = _mm256_dpbusd_epi32(d, wq[r][1], x1);
                d = _mm256_dpbusd_epi32(d, wq[r][2], x2);
                d = _mm256_dpbusd_epi32(d, wq[r][3], x3);
                acc[g][r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d), _mm256_mul_ps(dw[r], dx),
                                            acc[g][r]);
            }
        }
    }
    for (; npf; npf--) pf_walk_one(&p);
    *pf = p;
    for (int g = 0; g < G; g++) lx_istore(R, acc[g], j, n, t + 4 * (size_t)g, accumulate);
}

/* Rows [b0, b1) of one K chunk for the tokens of gs (G groups from token t). */
LX_AI void lx_irows(int slot, int G, const ak__linear_job *j, size_t b0, size_t b1, size_t kb,
                    size_t nb, const lx_igroup *gs, size_t t, int accumulate, pf_walk *pf,
                    size_t per) {
    size_t n = b0;
    for (; n + LX_IR <= b1; n += LX_IR)
        lx_itile(slot, LX_IR, G, j, n, kb, nb, gs, t, accumulate, pf, per);
    for (; n < b1; n++) lx_itile(slot, 1, G, j, n, kb, nb, gs, t, accumulate, pf, 0);
}

/* Blocks of rows (≤ 128 KiB of weights, kept in L2) outer, then K chunks, then tiles of
 * 16 tokens, whose interleaved activations the block's rows pass under; the tiles of a
 * block prefetch the next block. A chunk after the first adds to Y. */
LX_AI void lx_quant_interleaved(int slot, const ak__linear_job *j, size_t n0, size_t n1) {
    lx_igroup gs[LX_IG];
    size_t sb = lx_used_bytes(slot, j), nbk = ((size_t)128 << 10) / (sb ? sb : 1) / LX_IR * LX_IR;
    size_t nball = j->K / AK__QK, tiles_t = lx_div_up(j->T, 4 * (size_t)LX_IG);
    nbk = nbk < LX_IR ? LX_IR : nbk;
    for (size_t b0 = n0; b0 < n1; b0 += nbk) {
        size_t b1 = b0 + nbk < n1 ? b0 + nbk : n1, nx = b1 + nbk < n1 ? b1 + nbk : n1;
        size_t chunks = lx_div_up(nball, (size_t)LX_IKB);
        size_t tiles = lx_div_up(b1 - b0, (size_t)LX_IR) * tiles_t * chunks;
        pf_walk next = lx_pf_rows(slot, j, b1, nx - b1, 0);
        size_t per = lx_div_up(lx_pf_lines(&next), tiles);
        for (size_t kb = 0; kb < nball; kb += LX_IKB) {
            size_t nb = nball - kb < LX_IKB ? nball - kb : LX_IKB;
            int accumulate = kb ? 1 : j->accumulate;
            for (size_t t = 0; t < j->T; t += 4 * LX_IG) {
                size_t groups = lx_div_up(j->T - t, 4);
                int G = groups < LX_IG ? (int)groups : LX_IG;
                for (int g = 0; g < G; g++) lx_interleave(j, t + 4 * (size_t)g, kb, nb, &gs[g]);
                /* G a constant in each call: unrolled */
                if (G == 4) lx_irows(slot, 4, j, b0, b1, kb, nb, gs, t, accumulate, &next, per);
                else if (G == 3) lx_irows(slot, 3, j, b0, b1, kb, nb, gs, t, accumulate, &next, per);
                else if (G == 2) lx_irows(slot, 2, j, b0, b1, kb, nb, gs, t, accumulate, &next, per);
                else lx_irows(slot, 1, j, b0, b1, kb, nb, gs, t, accumulate, &next, per);
            }
        }
    }
}

/* ---- VNNI, T >= 8: one token per lane ------------------------------------------------------
 * The tiles above still pay the float side (convert, scale product, FMA) once per 4 tokens
 * and 4 vpdpbusd, and 4 vpshufd per row and block to broadcast the weights' dwords: on
 * Zen 4 those share the vector pipes with vpdpbusd. Here each of the 8 int32 lanes is one
 * token: lane i of the c-th vpdpbusd sums token i's elements 4c..4c+3 of a block against
 * the weights' dword c broadcast from memory (a load, no shuffle), so 8 vpdpbusd cover a
 * block for 8 tokens and the float side is paid once per 8 tokens and 8 vpdpbusd. The
 * accumulator starts at the 8 tokens' offset terms (−8·Σx or −128·Σx), so the unsigned
 * weight bytes need nothing else. A tile's weights (4 rows × one K chunk) are unpacked
 * once into bytes in element order on the stack, where the broadcasts read them, and
 * the activations of 8 tokens are transposed (8×8 dwords per block) per K chunk, as the
 * 4-token groups are. */

#define LX_OG 2 /* groups of 8 tokens per tile (16 tokens) */

/* One group of 8 tokens, one chunk of blocks: per block, 8 vectors (dword c of each
 * token in lane i), the 8 activation scales and the 8 offset terms. Tokens past T are
 * zeros. */
typedef struct lx_ogroup {
    _Alignas(32) int8_t q[LX_IKB][8][32];
    _Alignas(32) float d[LX_IKB][8];
    _Alignas(32) int32_t o[LX_IKB][8];
} lx_ogroup;

/* Block `blk` of tokens [t, t + 8) ∩ [0, T): out[c] holds dword c of token i in lane i,
 * d[i] and o[i] the tokens' scales and offset terms. Tokens past T are zeros. */
LX_AI void lx_tokens8(const ak__linear_job *j, size_t t, size_t blk, __m256i out[8], float *d,
                      int32_t *o) {
    size_t ldb = j->ldq / AK__QK, live = t < j->T ? (j->T - t < 8 ? j->T - t : 8) : 0;
    __m256i v[8];
    for (size_t i = 0; i < 8; i++) {
        if (i < live) {
            const int8_t *xb = j->xq + (t + i) * j->ldq + blk * AK__QK;
            v[i] = _mm256_loadu_si256((const __m256i *)(const void *)xb);
            d[i] = j->xd[(t + i) * ldb + blk];
            o[i] = j->xo[(t + i) * ldb + blk];
        } else {
            v[i] = _mm256_setzero_si256();
            d[i] = 0.0f;
            o[i] = 0;
        }
    }
    /* 8×8 dword transpose: rows = tokens, columns = dwords */
    __m256i a[8], c[8];
    for (int i = 0; i < 8; i += 2) {
        a[i] = _mm256_unpacklo_epi32(v[i], v[i + 1]);
        a[i + 1] = _mm256_unpackhi_epi32(v[i], v[i + 1]);
    }
    for (int i = 0; i < 8; i += 4)
        for (int h = 0; h < 2; h++) {
            c[i + 2 * h] = _mm256_unpacklo_epi64(a[i + h], a[i + 2 + h]);
            c[i + 2 * h + 1] = _mm256_unpackhi_epi64(a[i + h], a[i + 2 + h]);
        }
    /* c[0..3]: tokens 0-3, dwords {0,4}, {1,5}, {2,6}, {3,7} per half; c[4..7]: tokens 4-7 */
    for (int k = 0; k < 4; k++) {
        out[k] = _mm256_permute2x128_si256(c[k], c[4 + k], 0x20);
        out[4 + k] = _mm256_permute2x128_si256(c[k], c[4 + k], 0x31);
    }
}

/* Tokens [t, t + 8) ∩ [0, T), blocks [kb, kb + nb) into g. */
LX_AI void lx_ointerleave(const ak__linear_job *j, size_t t, size_t kb, size_t nb, lx_ogroup *g) {
    for (size_t b = 0; b < nb; b++) {
        __m256i out[8];
        lx_tokens8(j, t, kb + b, out, g->d[b], g->o[b]);
        for (int c = 0; c < 8; c++) _mm256_store_si256((__m256i *)(void *)g->q[b][c], out[c]);
    }
}

/* Y[tg + i][n + r] (+)= acc[r][g] lane i for the live tokens of group g. With 4 rows the
 * 4×8 sums are transposed in registers (per 128-bit lane, as _MM_TRANSPOSE4_PS) so that
 * each token's 4 outputs go out as one 16-byte store: scalar stores of each lane were a
 * fifth of the 512-bit tiles' time (lx_wstore), and a part of these. */
LX_AI void lx_ostore(int R, __m256 acc[LX_R][LX_OG], int g, const ak__linear_job *j, size_t n,
                     size_t tg, int accumulate) {
    size_t live = j->T - tg < 8 ? j->T - tg : 8;
    float *y = j->Y + tg * j->ldy + n;
    if (R == LX_R) {
        __m256 t0 = _mm256_unpacklo_ps(acc[0][g], acc[1][g]), t1 = _mm256_unpackhi_ps(acc[0][g], acc[1][g]);
        __m256 t2 = _mm256_unpacklo_ps(acc[2][g], acc[3][g]), t3 = _mm256_unpackhi_ps(acc[2][g], acc[3][g]);
        /* u[k], 128-bit lane l: the 4 rows of token 4l + k */
        __m256 u[4] = {_mm256_shuffle_ps(t0, t2, 0x44), _mm256_shuffle_ps(t0, t2, 0xee),
                       _mm256_shuffle_ps(t1, t3, 0x44), _mm256_shuffle_ps(t1, t3, 0xee)};
        _Alignas(32) float v[4][8];
        for (int k = 0; k < 4; k++) _mm256_store_ps(v[k], u[k]);
        for (size_t i = 0; i < live; i++, y += j->ldy) {
            __m128 o = _mm_load_ps(&v[i & 3][4 * (i >> 2)]);
            _mm_storeu_ps(y, accumulate ? _mm_add_ps(o, _mm_loadu_ps(y)) : o);
        }
        return;
    }
    _Alignas(32) float v[8];
    _mm256_store_ps(v, acc[0][g]);
    for (size_t i = 0; i < live; i++, y += j->ldy) *y = accumulate ? *y + v[i] : v[i];
}

/* Rows [n, n+R) × the G groups of gs (from token t) over blocks [kb, kb + nb). */
LX_AI void lx_otile(int slot, int R, int G, const ak__linear_job *j, size_t n, size_t kb,
                    size_t nb, const lx_ogroup *gs, size_t t, int accumulate, pf_walk *pf,
                    size_t npf) {
    size_t rb = j->row_bytes;
    size_t bsz = slot == AK__LIN_Q8_0 ? sizeof(ak__block_q8_0) : sizeof(ak__block_q4_0);
    const uint8_t *w = j->W + n * rb + kb * bsz;
    _Alignas(32) uint8_t wq[LX_IKB][LX_R][32];
    float wd[LX_IKB][LX_R];
    for (size_t b = 0; b < nb; b++)
        for (int r = 0; r < R; r++) {
            const uint8_t *blk = w + (size_t)r * rb + b * bsz;
            _mm256_store_si256((__m256i *)(void *)wq[b][r], lx_wbytes(slot, blk));
            wd[b][r] = lx_scale(blk);
        }
    __m256 acc[LX_R][LX_OG];
    for (int r = 0; r < R; r++)
        for (int g = 0; g < G; g++) acc[r][g] = _mm256_setzero_ps();
    pf_walk p = *pf;
    for (size_t b = 0; b < nb; b++) {
        if (npf) {
            pf_walk_one(&p);
            npf--;
        }
        /* two chains per (row, group), even and odd dwords: one chain of 8 dependent
         * vpdpbusd per block kept the scheduler full of waiting operations */
        __m256i s[2][LX_R][LX_OG];
        for (int r = 0; r < R; r++)
            for (int g = 0; g < G; g++) {
                s[0][r][g] = _mm256_load_si256((const __m256i *)(const void *)gs[g].o[b]);
                s[1][r][g] = _mm256_setzero_si256();
            }
        for (int c = 0; c < 8; c++) {
            __m256i x[LX_OG];
            for (int g = 0; g < G; g++)
                x[g] = _mm256_load_si256((const __m256i *)(const void *)gs[g].q[b][c]);
            for (int r = 0; r < R; r++) {
                int32_t wd4;
                memcpy(&wd4, wq[b][r] + 4 * c, sizeof wd4);
                __m256i wv = _mm256_set1_epi32(wd4);
                for (int g = 0; g < G; g++)
                    s[c & 1][r][g] = _mm256_dpbusd_epi32(s[c & 1][r][g], wv, x[g]);
            }
        }
        for (int r = 0; r < R; r++) {
            __m256 dw = _mm256_set1_ps(wd[b][r]);
            for (int g = 0; g < G; g++) {
                __m256 dx = _mm256_load_ps(gs[g].d[b]);
                __m256i si = _mm256_add_epi32(s[0][r][g], s[1][r][g]);
                acc[r][g] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(si), _mm256_mul_ps(dw, dx), acc[r][g]);
            }
        }
    }
    for (; npf; npf--) pf_walk_one(&p);
    *pf = p;
    for (int g = 0; g < G; g++) lx_ostore(R, acc, g, j, n, t + 8 * (size_t)g, accumulate);
}

/* Rows [b0, b1) of one K chunk for the tokens of gs (G groups from token t). */
LX_AI void lx_orows(int slot, int G, const ak__linear_job *j, size_t b0, size_t b1, size_t kb,
                    size_t nb, const lx_ogroup *gs, size_t t, int accumulate, pf_walk *pf,
                    size_t per) {
    size_t n = b0;
    for (; n + LX_R <= b1; n += LX_R)
        lx_otile(slot, LX_R, G, j, n, kb, nb, gs, t, accumulate, pf, per);
    for (; n < b1; n++) lx_otile(slot, 1, G, j, n, kb, nb, gs, t, accumulate, pf, 0);
}

/* Blocks of rows (≤ 128 KiB of weights, kept in L2) outer, then K chunks, then tiles of
 * 16 tokens, as lx_quant_interleaved. */
LX_AI void lx_quant_lanes(int slot, const ak__linear_job *j, size_t n0, size_t n1) {
    lx_ogroup gs[LX_OG];
    size_t sb = lx_used_bytes(slot, j), nbk = ((size_t)128 << 10) / (sb ? sb : 1) / LX_R * LX_R;
    size_t nball = j->K / AK__QK, tiles_t = lx_div_up(j->T, 8 * (size_t)LX_OG);
    nbk = nbk < LX_R ? LX_R : nbk;
    for (size_t b0 = n0; b0 < n1; b0 += nbk) {
        size_t b1 = b0 + nbk < n1 ? b0 + nbk : n1, nx = b1 + nbk < n1 ? b1 + nbk : n1;
        size_t chunks = lx_div_up(nball, (size_t)LX_IKB);
        size_t tiles = lx_div_up(b1 - b0, (size_t)LX_R) * tiles_t * chunks;
        pf_walk next = lx_pf_rows(slot, j, b1, nx - b1, 0);
        size_t per = lx_div_up(lx_pf_lines(&next), tiles);
        for (size_t kb = 0; kb < nball; kb += LX_IKB) {
            size_t nb = nball - kb < LX_IKB ? nball - kb : LX_IKB;
            int accumulate = kb ? 1 : j->accumulate;
            for (size_t t = 0; t < j->T; t += 8 * LX_OG) {
                size_t groups = lx_div_up(j->T - t, 8);
                int G = groups < LX_OG ? (int)groups : LX_OG;
                for (int g = 0; g < G; g++) lx_ointerleave(j, t + 8 * (size_t)g, kb, nb, &gs[g]);
                if (G == 2) lx_orows(slot, 2, j, b0, b1, kb, nb, gs, t, accumulate, &next, per);
                else lx_orows(slot, 1, j, b0, b1, kb, nb, gs, t, accumulate, &next, per);
            }
        }
    }
}

#if LX_WIDE
/* ---- VNNI at full 512-bit width, T >= 16: 16 tokens per lane set ---------------------------
 * Where 512-bit operations run at full width (Zen 5, Intel's AVX-512 cores; the "avx512w"
 * table), a zmm vpdpbusd does twice the multiply-adds of a ymm one at about the same
 * rate, and the tiles above are bound by vpdpbusd. These are the tiles of
 * lx_quant_lanes with 16 tokens in the lanes of each vector: lanes 0-7 the first 8
 * tokens' transpose (lx_tokens8), lanes 8-15 the next 8's. A tile covers 4 rows × up to
 * 2 such groups (32 tokens), so a block's unpacked weights serve 32 tokens; the K chunk is
 * half lx_quant_lanes' so that two groups' activations (2 × 10 KiB) stay in L1. On Zen 4,
 * which splits a zmm operation in two, they would bring nothing over the ymm tiles. */

#define LX_WG 2   /* groups of 16 tokens per tile (32 tokens) */
#define LX_WKB 16 /* blocks per K chunk */

typedef struct lx_wgroup {
    _Alignas(64) int8_t q[LX_WKB][8][64];
    _Alignas(64) float d[LX_WKB][16];
    _Alignas(64) int32_t o[LX_WKB][16];
} lx_wgroup;

/* Tokens [t, t + 16) ∩ [0, T), blocks [kb, kb + nb) into g. */
LX_AI void lx_winterleave(const ak__linear_job *j, size_t t, size_t kb, size_t nb, lx_wgroup *g) {
    for (size_t b = 0; b < nb; b++) {
        __m256i lo[8], hi[8];
        lx_tokens8(j, t, kb + b, lo, g->d[b], g->o[b]);
        lx_tokens8(j, t + 8, kb + b, hi, g->d[b] + 8, g->o[b] + 8);
        for (int c = 0; c < 8; c++)
            _mm512_store_si512((void *)g->q[b][c],
                               _mm512_inserti64x4(_mm512_castsi256_si512(lo[c]), hi[c], 1));
    }
}

/* lx_ostore for 16 tokens. */
LX_AI void lx_wstore(int R, __m512 acc[LX_R][LX_WG], int g, const ak__linear_job *j, size_t n,
                     size_t tg, int accumulate) {
    size_t live = j->T - tg < 16 ? j->T - tg : 16;
    float *y = j->Y + tg * j->ldy + n;
    if (R == LX_R) {
        __m512 t0 = _mm512_unpacklo_ps(acc[0][g], acc[1][g]), t1 = _mm512_unpackhi_ps(acc[0][g], acc[1][g]);
        __m512 t2 = _mm512_unpacklo_ps(acc[2][g], acc[3][g]), t3 = _mm512_unpackhi_ps(acc[2][g], acc[3][g]);
        /* u[k], 128-bit lane l: the 4 rows of token 4l + k */
        __m512 u[4] = {_mm512_shuffle_ps(t0, t2, 0x44), _mm512_shuffle_ps(t0, t2, 0xee),
                       _mm512_shuffle_ps(t1, t3, 0x44), _mm512_shuffle_ps(t1, t3, 0xee)};
        _Alignas(64) float v[4][16];
        for (int k = 0; k < 4; k++) _mm512_store_ps(v[k], u[k]);
        for (size_t i = 0; i < live; i++, y += j->ldy) {
            __m128 o = _mm_load_ps(&v[i & 3][4 * (i >> 2)]);
            _mm_storeu_ps(y, accumulate ? _mm_add_ps(o, _mm_loadu_ps(y)) : o);
        }
        return;
    }
    _Alignas(64) float v[16];
    _mm512_store_ps(v, acc[0][g]);
    for (size_t i = 0; i < live; i++, y += j->ldy) *y = accumulate ? *y + v[i] : v[i];
}

/* Rows [n, n+R) × the G groups of gs (from token t) over blocks [kb, kb + nb). */
LX_AI void lx_wtile(int slot, int R, int G, const ak__linear_job *j, size_t n, size_t kb,
                    size_t nb, const lx_wgroup *gs, size_t t, int accumulate, pf_walk *pf,
                    size_t npf) {
    size_t rb = j->row_bytes;
    size_t bsz = slot == AK__LIN_Q8_0 ? sizeof(ak__block_q8_0) : sizeof(ak__block_q4_0);
    const uint8_t *w = j->W + n * rb + kb * bsz;
    _Alignas(32) uint8_t wq[LX_WKB][LX_R][32];
    float wd[LX_WKB][LX_R];
    for (size_t b = 0; b < nb; b++)
        for (int r = 0; r < R; r++) {
            const uint8_t *blk = w + (size_t)r * rb + b * bsz;
            _mm256_store_si256((__m256i *)(void *)wq[b][r], lx_wbytes(slot, blk));
            wd[b][r] = lx_scale(blk);
        }
    __m512 acc[LX_R][LX_WG];
    for (int r = 0; r < R; r++)
        for (int g = 0; g < G; g++) acc[r][g] = _mm512_setzero_ps();
    pf_walk p = *pf;
    for (size_t b = 0; b < nb; b++) {
        if (npf) {
            pf_walk_one(&p);
            npf--;
        }
        /* two chains per (row, group), even and odd dwords, as lx_otile */
        __m512i s[2][LX_R][LX_WG];
        for (int r = 0; r < R; r++)
            for (int g = 0; g < G; g++) {
                s[0][r][g] = _mm512_load_si512((const void *)gs[g].o[b]);
                s[1][r][g] = _mm512_setzero_si512();
            }
        for (int c = 0; c < 8; c++) {
            __m512i x[LX_WG];
            for (int g = 0; g < G; g++) x[g] = _mm512_load_si512((const void *)gs[g].q[b][c]);
            for (int r = 0; r < R; r++) {
                int32_t wd4;
                memcpy(&wd4, wq[b][r] + 4 * c, sizeof wd4);
                __m512i wv = _mm512_set1_epi32(wd4);
                for (int g = 0; g < G; g++)
                    s[c & 1][r][g] = _mm512_dpbusd_epi32(s[c & 1][r][g], wv, x[g]);
            }
        }
        for (int r = 0; r < R; r++) {
            __m512 dw = _mm512_set1_ps(wd[b][r]);
            for (int g = 0; g < G; g++) {
                __m512 dx = _mm512_load_ps(gs[g].d[b]);
                __m512i si = _mm512_add_epi32(s[0][r][g], s[1][r][g]);
                acc[r][g] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(si), _mm512_mul_ps(dw, dx), acc[r][g]);
            }
        }
    }
    for (; npf; npf--) pf_walk_one(&p);
    *pf = p;
    for (int g = 0; g < G; g++) lx_wstore(R, acc, g, j, n, t + 16 * (size_t)g, accumulate);
}

/* Rows [b0, b1) of one K chunk for the tokens of gs (G groups from token t). */
LX_AI void lx_wrows(int slot, int G, const ak__linear_job *j, size_t b0, size_t b1, size_t kb,
                    size_t nb, const lx_wgroup *gs, size_t t, int accumulate, pf_walk *pf,
                    size_t per) {
    size_t n = b0;
    for (; n + LX_R <= b1; n += LX_R)
        lx_wtile(slot, LX_R, G, j, n, kb, nb, gs, t, accumulate, pf, per);
    for (; n < b1; n++) lx_wtile(slot, 1, G, j, n, kb, nb, gs, t, accumulate, pf, 0);
}

/* Blocks of rows (≤ 128 KiB of weights, kept in L2) outer, then K chunks, then tiles of
 * 32 tokens, as lx_quant_lanes. */
LX_AI void lx_quant_lanes_wide(int slot, const ak__linear_job *j, size_t n0, size_t n1) {
    lx_wgroup gs[LX_WG];
    size_t sb = lx_used_bytes(slot, j), nbk = ((size_t)128 << 10) / (sb ? sb : 1) / LX_R * LX_R;
    size_t nball = j->K / AK__QK, tiles_t = lx_div_up(j->T, 16 * (size_t)LX_WG);
    nbk = nbk < LX_R ? LX_R : nbk;
    for (size_t b0 = n0; b0 < n1; b0 += nbk) {
        size_t b1 = b0 + nbk < n1 ? b0 + nbk : n1, nx = b1 + nbk < n1 ? b1 + nbk : n1;
        size_t chunks = lx_div_up(nball, (size_t)LX_WKB);
        size_t tiles = lx_div_up(b1 - b0, (size_t)LX_R) * tiles_t * chunks;
        pf_walk next = lx_pf_rows(slot, j, b1, nx - b1, 0);
        size_t per = lx_div_up(lx_pf_lines(&next), tiles);
        for (size_t kb = 0; kb < nball; kb += LX_WKB) {
            size_t nb = nball - kb < LX_WKB ? nball - kb : LX_WKB;
            int accumulate = kb ? 1 : j->accumulate;
            for (size_t t = 0; t < j->T; t += 16 * LX_WG) {
                size_t groups = lx_div_up(j->T - t, 16);
                int G = groups < LX_WG ? (int)groups : LX_WG;
                for (int g = 0; g < G; g++) lx_winterleave(j, t + 16 * (size_t)g, kb, nb, &gs[g]);
                if (G == 2) lx_wrows(slot, 2, j, b0, b1, kb, nb, gs, t, accumulate, &next, per);
                else lx_wrows(slot, 1, j, b0, b1, kb, nb, gs, t, accumulate, &next, per);
            }
        }
    }
}
#endif /* LX_WIDE */
#endif /* LX_VNNI */

/* ---- T = 1: one row at a time ------------------------------------------------------------ */

/* GEMV rows go one at a time, so the weights are read as long sequential streams that
 * the hardware prefetcher follows; rows read 4 at a time are 4 short streams (1.5 KB
 * each for f16 K = 768) and ran at under half the bandwidth. The driver below alternates
 * rows of the two halves of its range: two long streams, and two independent rows in
 * flight, measured 5-20 % faster than one stream (most for Q8_0); four streams were no
 * better. (Software prefetch 0.5-4 KB ahead did not help either.) */
LX_AI void lx_float_row(int slot, const ak__linear_job *j, size_t n) {
    const uint8_t *w = j->W + n * j->row_bytes;
    const float *x = j->X;
    size_t K = j->K, k = 0;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (; k + 32 <= K; k += 32) {
        a0 = _mm256_fmadd_ps(lx_load8(slot, w, k), _mm256_loadu_ps(x + k), a0);
        a1 = _mm256_fmadd_ps(lx_load8(slot, w, k + 8), _mm256_loadu_ps(x + k + 8), a1);
        a2 = _mm256_fmadd_ps(lx_load8(slot, w, k + 16), _mm256_loadu_ps(x + k + 16), a2);
        a3 = _mm256_fmadd_ps(lx_load8(slot, w, k + 24), _mm256_loadu_ps(x + k + 24), a3);
    }
    for (; k + 8 <= K; k += 8)
        a0 = _mm256_fmadd_ps(lx_load8(slot, w, k), _mm256_loadu_ps(x + k), a0);
    float s = lx_hsum1(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    for (; k < K; k++) s += lx_load1(slot, w, k) * x[k];
    j->Y[n] = j->accumulate ? j->Y[n] + s : s;
}

/* acc + d_w·d_x·(block b of the weight row at blk · block b of the only token) */
/* The int32 lanes of block b of a weight row (at blk) · block b of the only token,
 * without the Q4_0 / VNNI Q8_0 offset term (lx_quant_row adds it per 8 blocks). */
LX_AI __m256i lx_quant_dot1(int slot, const ak__linear_job *j, const uint8_t *blk, size_t b) {
    __m256i xv = _mm256_loadu_si256((const __m256i *)(const void *)(j->xq + b * AK__QK));
    __m256i xa = LX_VNNI || slot == AK__LIN_Q4_0 ? _mm256_setzero_si256() : lx_xaux(slot, xv, 0);
    return lx_dot32(slot, lx_wbytes(slot, blk), xv, xa);
}

/* d_w·d_x of 8 consecutive blocks: the 8 f16 scales put into one vector, converted and
 * multiplied at once (per block that was 3 vector operations; a vpgatherdd of the 8
 * scales measured slower than these inserts). */
LX_AI __m256 lx_scales8(const uint8_t *blk, size_t bsz, const float *xd) {
    uint16_t h;
    memcpy(&h, blk, sizeof h);
    __m128i hv = _mm_cvtsi32_si128(h);
#define LX_INS(i_)                                                                            \
    memcpy(&h, blk + (i_) * bsz, sizeof h);                                                   \
    hv = _mm_insert_epi16(hv, h, i_)
    LX_INS(1);
    LX_INS(2);
    LX_INS(3);
    LX_INS(4);
    LX_INS(5);
    LX_INS(6);
    LX_INS(7);
#undef LX_INS
    return _mm256_mul_ps(_mm256_cvtph_ps(hv), _mm256_loadu_ps(xd));
}

/* Does the offset term apply (unsigned weight bytes)? */
#define LX_HAS_OFFSET(slot) (LX_VNNI || (slot) == AK__LIN_Q4_0)

/* One row against the only token. Per 8 blocks the scales are combined in one vector
 * (stored to sc for per-block broadcasts), and the offset terms of the 8 blocks are
 * added as one Σ d_w·d_x·offset vector product instead of per block in the int32 lanes
 * (which measured 10 % slower). The integer dot products stay exact; only the float
 * sums round, as in the reference. */
LX_AI void lx_quant_row(int slot, const ak__linear_job *j, size_t n) {
    size_t nb = j->K / AK__QK;
    size_t bsz = slot == AK__LIN_Q8_0 ? sizeof(ak__block_q8_0) : sizeof(ak__block_q4_0);
    const uint8_t *w = j->W + n * j->row_bytes;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, off = a0;
    _Alignas(32) float sc[8];
    size_t b = 0;
    for (; b + 8 <= nb; b += 8) { /* four chains: the FMA latency is not the limit */
        __m256 s8 = lx_scales8(w + b * bsz, bsz, j->xd + b);
        _mm256_store_ps(sc, s8);
        if (LX_HAS_OFFSET(slot)) {
            __m256i o = _mm256_loadu_si256((const __m256i *)(const void *)(j->xo + b));
            off = _mm256_fmadd_ps(s8, _mm256_cvtepi32_ps(o), off);
        }
        for (int i = 0; i < 8; i += 4) {
            __m256i p0 = lx_quant_dot1(slot, j, w + (b + i) * bsz, b + i);
            __m256i p1 = lx_quant_dot1(slot, j, w + (b + i + 1) * bsz, b + i + 1);
            __m256i p2 = lx_quant_dot1(slot, j, w + (b + i + 2) * bsz, b + i + 2);
            __m256i p3 = lx_quant_dot1(slot, j, w + (b + i + 3) * bsz, b + i + 3);
            a0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p0), _mm256_broadcast_ss(sc + i), a0);
            a1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p1), _mm256_broadcast_ss(sc + i + 1), a1);
            a2 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p2), _mm256_broadcast_ss(sc + i + 2), a2);
            a3 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p3), _mm256_broadcast_ss(sc + i + 3), a3);
        }
    }
    a0 = _mm256_add_ps(_mm256_add_ps(a0, a2), off);
    a1 = _mm256_add_ps(a1, a3);
    float s = 0.0f;
    for (; b < nb; b++) {
        const uint8_t *blk = w + b * bsz;
        int32_t o = LX_HAS_OFFSET(slot) ? j->xo[b] : 0;
        __m256i p = _mm256_add_epi32(lx_quant_dot1(slot, j, blk, b),
                                     _mm256_setr_epi32(o, 0, 0, 0, 0, 0, 0, 0));
        __m256 px = _mm256_mul_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(j->xd[b]));
        a0 = _mm256_fmadd_ps(px, lx_scale8(blk), a0);
    }
    s += lx_hsum1(_mm256_add_ps(a0, a1));
    j->Y[n] = j->accumulate ? j->Y[n] + s : s;
}

#if LX_VNNI
/* Two rows (the two streams of the T = 1 driver) against the only token, with VNNI: each
 * activation block is loaded once for both rows, the offset term starts the vpdpbusd
 * (lane 0), and the scale product d_w·d_x is formed per block in a scalar register.
 * lx_quant_row's 8-block scale vectors (a chain of 8 word inserts, stored and reloaded
 * per block) held Q4_0, whose blocks are half the bytes of Q8_0's, at half the read
 * bandwidth. */
LX_AI void lx_quant_row2(int slot, const ak__linear_job *j, size_t n, size_t m) {
    size_t nb = j->K / AK__QK;
    size_t bsz = slot == AK__LIN_Q8_0 ? sizeof(ak__block_q8_0) : sizeof(ak__block_q4_0);
    const uint8_t *wn = j->W + n * j->row_bytes, *wm = j->W + m * j->row_bytes;
    __m256 an0 = _mm256_setzero_ps(), an1 = an0, am0 = an0, am1 = an0;
    size_t b = 0;
    for (; b + 2 <= nb; b += 2) { /* two chains per row: the FMA latency is not the limit */
        for (int u = 0; u < 2; u++) {
            const __m256i xv = _mm256_loadu_si256((const __m256i *)(const void *)(j->xq + (b + u) * AK__QK));
            const __m256i xo = _mm256_zextsi128_si256(_mm_cvtsi32_si128(j->xo[b + u]));
            const uint8_t *bn = wn + (b + u) * bsz, *bm = wm + (b + u) * bsz;
            float dx = j->xd[b + u];
            __m256 pn = _mm256_cvtepi32_ps(_mm256_dpbusd_epi32(xo, lx_wbytes(slot, bn), xv));
            __m256 pm = _mm256_cvtepi32_ps(_mm256_dpbusd_epi32(xo, lx_wbytes(slot, bm), xv));
            if (u == 0) {
                an0 = _mm256_fmadd_ps(pn, _mm256_set1_ps(lx_scale(bn) * dx), an0);
                am0 = _mm256_fmadd_ps(pm, _mm256_set1_ps(lx_scale(bm) * dx), am0);
            } else {
                an1 = _mm256_fmadd_ps(pn, _mm256_set1_ps(lx_scale(bn) * dx), an1);
                am1 = _mm256_fmadd_ps(pm, _mm256_set1_ps(lx_scale(bm) * dx), am1);
            }
        }
    }
    for (; b < nb; b++) {
        const __m256i xv = _mm256_loadu_si256((const __m256i *)(const void *)(j->xq + b * AK__QK));
        const __m256i xo = _mm256_zextsi128_si256(_mm_cvtsi32_si128(j->xo[b]));
        const uint8_t *bn = wn + b * bsz, *bm = wm + b * bsz;
        __m256 pn = _mm256_cvtepi32_ps(_mm256_dpbusd_epi32(xo, lx_wbytes(slot, bn), xv));
        __m256 pm = _mm256_cvtepi32_ps(_mm256_dpbusd_epi32(xo, lx_wbytes(slot, bm), xv));
        an0 = _mm256_fmadd_ps(pn, _mm256_set1_ps(lx_scale(bn) * j->xd[b]), an0);
        am0 = _mm256_fmadd_ps(pm, _mm256_set1_ps(lx_scale(bm) * j->xd[b]), am0);
    }
    __m128 s = lx_hsum4(_mm256_add_ps(an0, an1), _mm256_add_ps(am0, am1), an0, an0);
    float sn = _mm_cvtss_f32(s), sm = _mm_cvtss_f32(_mm_movehdup_ps(s));
    j->Y[n] = j->accumulate ? j->Y[n] + sn : sn;
    j->Y[m] = j->accumulate ? j->Y[m] + sm : sm;
}
#define LX_QUANT_ROW2(slot, j, n, m) lx_quant_row2(slot, j, n, m)
#else
#define LX_QUANT_ROW2(slot, j, n, m) (lx_quant_row(slot, j, n), lx_quant_row(slot, j, m))
#endif
#define LX_QUANT_ROW(slot, j, n) lx_quant_row(slot, j, n)
#define LX_FLOAT_ROW(slot, j, n) lx_float_row(slot, j, n)
#define LX_FLOAT_ROW2(slot, j, n, m) (lx_float_row(slot, j, n), lx_float_row(slot, j, m))

/* ---- drivers: rows in tiles of 4 (then 1), tokens in tiles of C (then fewer) ------------- */

/* Token groups of C (then the remainder) over one row group [n, n+R); the switch turns
 * the remainder into a constant. Each tile prefetches `per` lines of *pf. */
#define LX_TOKENS(TILE, CMAX, slot, R, j, n, t0, t1, pf, per)                                \
    do {                                                                                      \
        size_t tk_ = (t0);                                                                     \
        for (; tk_ + (CMAX) <= (t1); tk_ += (CMAX)) TILE(slot, R, CMAX, j, n, tk_, pf, per);     \
        switch ((t1) - tk_) {                                                                  \
        case 1: TILE(slot, R, 1, j, n, tk_, pf, per); break;                                   \
        case 2: if ((CMAX) > 2) TILE(slot, R, 2, j, n, tk_, pf, per); break;                   \
        case 3: if ((CMAX) > 3) TILE(slot, R, 3, j, n, tk_, pf, per); break;                   \
        case 4: if ((CMAX) > 4) TILE(slot, R, 4, j, n, tk_, pf, per); break;                   \
        case 5: if ((CMAX) > 5) TILE(slot, R, 5, j, n, tk_, pf, per); break;                   \
        default: break;                                                                       \
        }                                                                                     \
    } while (0)

_Static_assert(LX_FLOAT_C <= 6 && LX_QUANT_C <= 6, "LX_TOKENS handles remainders up to 5");

#define LX_DIV_UP(a, b) (((a) + (b) - 1) / (b))

/* Few tokens: row groups outer, all tokens inner, so each group's 4 rows are read from
 * memory once and reused from L1 by every token group, and the activations (T·K) stay in
 * L2. The token groups share the prefetching of the next row group, so its misses
 * spread over the whole group's time (rows from DRAM ran 2048×768 f16 at T = 16 at 57 %
 * of the speed of the same tiles on rows from L3; spread like this, at 90 %). */
#define LX_ROWS_OUTER(TILE, CMAX, slot, j, n0, n1)                                           \
    do {                                                                                      \
        size_t n_ = (n0), groups_ = LX_DIV_UP((j)->T, (size_t)(CMAX));                        \
        pf_walk none_ = lx_pf_rows(slot, j, n0, 0, 1);                                             \
        for (; n_ + LX_R <= (n1); n_ += LX_R) {                                               \
            size_t ahead_ = n_ + 2 * LX_R <= (n1) ? LX_R : 0;                                 \
            pf_walk pf_ = lx_pf_rows(slot, j, n_ + LX_R, ahead_, 1);                               \
            size_t per_ = LX_DIV_UP(lx_pf_lines(&pf_), groups_);                              \
            LX_TOKENS(TILE, CMAX, slot, LX_R, j, n_, 0, (j)->T, &pf_, per_);                  \
        }                                                                                     \
        for (; n_ < (n1); n_++) LX_TOKENS(TILE, CMAX, slot, 1, j, n_, 0, (j)->T, &none_, 0);   \
    } while (0)

/* Many tokens: blocks of rows (≤ 256 KiB of weights, kept in L2) outer, token groups
 * next, the block's row groups inner: the C tokens' activations stay in L1 across the
 * block instead of all T·K activations streaming from L2 for every 4 rows. The tiles of
 * a block prefetch the next block (into L2); the first block of a range prefetches
 * itself one row group ahead during its first token group. */
#define LX_BLOCKS_OUTER(TILE, CMAX, slot, j, n0, n1)                                         \
    do {                                                                                      \
        size_t sb_ = lx_used_bytes(slot, j), T_ = (j)->T;                                    \
        size_t nbk_ = ((size_t)256 << 10) / (sb_ ? sb_ : 1) / LX_R * LX_R;                    \
        nbk_ = nbk_ < LX_R ? LX_R : nbk_;                                                     \
        for (size_t b0_ = (n0); b0_ < (n1); b0_ += nbk_) {                                    \
            size_t b1_ = b0_ + nbk_ < (n1) ? b0_ + nbk_ : (n1);                               \
            size_t nx_ = b1_ + nbk_ < (n1) ? b1_ + nbk_ : (n1);                               \
            size_t tiles_ = LX_DIV_UP(b1_ - b0_, (size_t)LX_R) * LX_DIV_UP(T_, (size_t)(CMAX)); \
            pf_walk next_ = lx_pf_rows(slot, j, b1_, nx_ - b1_, 0);                                \
            size_t per_ = LX_DIV_UP(lx_pf_lines(&next_), tiles_);                             \
            pf_walk own_ = lx_pf_rows(slot, j, b0_ + LX_R, b0_ == (n0) && b1_ - b0_ > LX_R      \
                                                               ? b1_ - b0_ - LX_R : 0, 1);    \
            size_t own_per_ = LX_DIV_UP(lx_pf_lines(&own_), LX_DIV_UP(b1_ - b0_, (size_t)LX_R)); \
            for (size_t t_ = 0; t_ < T_; t_ += (CMAX)) {                                      \
                size_t te_ = t_ + (CMAX) < T_ ? t_ + (CMAX) : T_;                             \
                pf_walk *pf_ = t_ == 0 && own_.rows ? &own_ : &next_;                           \
                size_t pp_ = t_ == 0 && own_.rows ? own_per_ : per_;                          \
                size_t n_ = b0_;                                                              \
                for (; n_ + LX_R <= b1_; n_ += LX_R)                                          \
                    LX_TOKENS(TILE, CMAX, slot, LX_R, j, n_, t_, te_, pf_, pp_);              \
                for (; n_ < b1_; n_++) LX_TOKENS(TILE, CMAX, slot, 1, j, n_, t_, te_, pf_, 0); \
            }                                                                                 \
        }                                                                                     \
    } while (0)

/* Token groups from which the blocked order wins (measured on 2048×768, T = 16 and 128):
 * float tiles at 2 groups (T ≥ 7: +10 % at T = 16, +25-35 % at T = 128); quantized
 * tiles (int8 activations, 4× smaller) were 7 % slower blocked at T = 16 and even at
 * T = 128, so they switch late. */
#define LX_BLOCKED_FLOAT 2
#define LX_BLOCKED_QUANT 8

#define LX_DEFINE_LINEAR(name, TILE, ROW, CMAX, slot, BLOCKED_FROM)                           \
    void name(const ak__linear_job *j, size_t n0, size_t n1) {                               \
        if (j->T == 1) { /* two sequential streams, one per half of the rows */              \
            size_t h_ = (n1 - n0) / 2, m_ = n0 + h_;                                          \
            for (size_t i_ = 0; i_ < h_; i_++) ROW##2(slot, j, n0 + i_, m_ + i_);             \
            for (size_t n_ = m_ + h_; n_ < n1; n_++) ROW(slot, j, n_);                        \
        } else if (LX_DIV_UP(j->T, (size_t)(CMAX)) >= (BLOCKED_FROM)) {                       \
            LX_BLOCKS_OUTER(TILE, CMAX, slot, j, n0, n1);                                     \
        } else {                                                                              \
            LX_ROWS_OUTER(TILE, CMAX, slot, j, n0, n1);                                       \
        }                                                                                     \
    }

#define LX_FLOAT_KERNEL(name, slot)                                                        \
    LX_DEFINE_LINEAR(name, lx_float_tile, LX_FLOAT_ROW, LX_FLOAT_C, slot, LX_BLOCKED_FLOAT)
#if LX_VNNI
/* T >= 4 takes the tiles of 4 tokens per vector (lx_quant_interleaved); fewer tokens would
 * leave lanes empty there, and take the tiles above. */
#define LX_QUANT_KERNEL(name, slot)                                                        \
    static LX_DEFINE_LINEAR(LX_CAT(name, _tiles), lx_quant_tile, LX_QUANT_ROW, LX_QUANT_C,  \
                            slot, LX_BLOCKED_QUANT)                                         \
    void name(const ak__linear_job *j, size_t n0, size_t n1) {                              \
        if (LX_WIDE && j->T >= 16) LX_LANES_WIDE(slot, j, n0, n1);                          \
        else if (j->T >= 8) lx_quant_lanes(slot, j, n0, n1);                                 \
        else if (j->T >= 4) lx_quant_interleaved(slot, j, n0, n1);                           \
        else LX_CAT(name, _tiles)(j, n0, n1);                                                \
    }
#else
#define LX_QUANT_KERNEL(name, slot)                                                        \
    LX_DEFINE_LINEAR(name, lx_quant_tile, LX_QUANT_ROW, LX_QUANT_C, slot, LX_BLOCKED_QUANT)
#endif
/* the includer's ISA suffix: ak_f32_linear__avx2, ... (declared by kernels/kernels.def) */
#define LX_CAT_(a, b) a##b
#define LX_CAT(a, b) LX_CAT_(a, b)
#define LX_NAME(what) LX_CAT(what, LX_ISA)
/* LX_TILES_ONLY: the includer takes the tiles and drivers above for a kernel of its own
 * (kernels/x86/linear_bf16_avx512.c) and defines none of these */
#ifndef LX_TILES_ONLY
LX_QUANT_KERNEL(LX_NAME(ak_q8_0_linear__), AK__LIN_Q8_0)
LX_QUANT_KERNEL(LX_NAME(ak_q4_0_linear__), AK__LIN_Q4_0)
/* the wide variant (kernels/x86/linear_avx512w.c) has only the quantized kernels of its
 * own; the table takes the rest from avx512 */
#if !LX_WIDE
LX_FLOAT_KERNEL(LX_NAME(ak_f32_linear__), AK__LIN_F32)
LX_FLOAT_KERNEL(LX_NAME(ak_f16_linear__), AK__LIN_F16)
LX_FLOAT_KERNEL(LX_NAME(ak_bf16_linear__), AK__LIN_BF16)

/* ---- activations to Q8_0 ----------------------------------------------------------------- */

/* Bit-identical to ak_f32_quantize_q8_0__ref: d = amax/127 rounded through f16 as stored,
 * q = roundf(x·(1/d)), where roundf (ties away from zero) is trunc(v + copysign(0.5⁻, v))
 * for |v| ≤ 128 (checked over every float in that range). amax is the largest |x| taken
 * as integer bits (the order of non-negative floats), so a NaN anywhere in the block is
 * seen whatever its lane (a float max drops NaN operands by position); a block holding
 * NaN or ±Inf gets d = NaN, q = 0 and sum 0 as in the reference, never cvttps' INT_MIN. */
void LX_NAME(ak_f32_quantize_q8_0__)(const float *x, size_t K, float *d, int32_t *s, int8_t *q) {
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256 half = _mm256_set1_ps(0x1.fffffep-2f);
    for (size_t i = 0; i < K / AK__QK; i++, x += AK__QK) {
        __m256 v[4];
        __m256i m = _mm256_setzero_si256();
        for (int u = 0; u < 4; u++) {
            v[u] = _mm256_loadu_ps(x + 8 * u);
            m = _mm256_max_epi32(m, _mm256_castps_si256(_mm256_and_ps(v[u], absmask)));
        }
        __m128i m4 = _mm_max_epi32(_mm256_castsi256_si128(m), _mm256_extracti128_si256(m, 1));
        m4 = _mm_max_epi32(m4, _mm_shuffle_epi32(m4, 0x4e));
        m4 = _mm_max_epi32(m4, _mm_shuffle_epi32(m4, 0xb1));
        int32_t amax_bits = _mm_cvtsi128_si32(m4);
        if (amax_bits >= 0x7f800000) { /* NaN or ±Inf */
            _mm256_storeu_si256((__m256i *)(void *)(q + i * AK__QK), _mm256_setzero_si256());
            s[i] = 0;
            d[i] = __builtin_nanf("");
            continue;
        }
        float amax;
        memcpy(&amax, &amax_bits, sizeof amax);
        float di = amax / 127.0f;
        float inv = di != 0.0f ? 1.0f / di : 0.0f;
        __m256 id = _mm256_set1_ps(inv <= 0x1.fffffep127f ? inv : 0.0f); /* 1/d overflowed: 0 */
        __m256i qi[4], sum = _mm256_setzero_si256();
        for (int u = 0; u < 4; u++) {
            __m256 p = _mm256_mul_ps(v[u], id);
            __m256 h = _mm256_or_ps(half, _mm256_andnot_ps(absmask, p)); /* ±0.5⁻ */
            qi[u] = _mm256_cvttps_epi32(_mm256_add_ps(p, h));
            sum = _mm256_add_epi32(sum, qi[u]);
        }
        /* pack to bytes: packs works per 128-bit lane, the permute restores the order */
        __m256i w01 = _mm256_packs_epi32(qi[0], qi[1]), w23 = _mm256_packs_epi32(qi[2], qi[3]);
        __m256i b = _mm256_packs_epi16(w01, w23);
        b = _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256((__m256i *)(void *)(q + i * AK__QK), b);
        __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
        s[i] = _mm_cvtsi128_si32(s4);
        d[i] = _cvtsh_ss(_cvtss_sh(di, _MM_FROUND_TO_NEAREST_INT));
    }
}

#endif /* !LX_WIDE */
#endif /* LX_TILES_ONLY */

#endif /* AK_KERNELS_LINEAR_X86_H */
