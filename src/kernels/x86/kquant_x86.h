/* x86 kernel bodies of the super-block weight types (kernels/kquant.h), included by
 * kquant_avx2.c (maddubs + madd) and kquant_avx512.c (AVX512-VNNI on 256-bit vectors:
 * vpdpwssd accumulates the scaled group sums, vpdpbusd the scale-free byte products).
 *
 * T = 1 (decode, bandwidth-bound): each block is unpacked in registers and met by the one
 * token directly (kq_dot1_*). T > 1: a weight super-block is decoded once into 256
 * unsigned levels and per-16 integer multipliers (kq_decoded), then met by up to KQ_C
 * tokens' Q8_K activations:
 *   result = dA·dx·Σ_g sc_g·Σ_{i∈g} q_i·x_i  −  dB·dx·Σ_g mn_g·Σ_{i∈g} x_i
 * where the second sum comes from the activation block's sums of 16 (bsums): Q4_K/Q5_K/
 * Q2_K put their mins there (dB = dmin), Q3_K/Q6_K the offset of their signed levels
 * (mn = 4·sc or 32·sc, dB = d). maddubs pairs stay below 2^15 (levels ≤ 63, |x| ≤ 127).
 * Q8_K and the IQ4 types have signed weights: |w| against x with w's sign instead.
 * The integer sums are exact; the float combination differs from the reference only in
 * summation order (within the sweep's dot-product bound).
 *
 * The including file defines KQ_VNNI (0/1), KQ_ISA (avx2, avx512, avx512w) and, for
 * avx512w, KQ_WIDE 1 (the 512-bit tiles of Q4_K and Q6_K, the only kernels it defines). */
#ifndef AK_KERNELS_KQUANT_X86_H
#define AK_KERNELS_KQUANT_X86_H

#include <immintrin.h>
#include <string.h>

#include "core/half.h"
#include "kernels/dispatch.h"
#include "kernels/kquant.h"
#include "kernels/linear.h"
#include "kernels/x86/pf_walk.h"

#define KQ_AI static inline __attribute__((always_inline))
#ifndef KQ_WIDE
#define KQ_WIDE 0
#endif
#define KQ_C 8 /* tokens per pass over a row's blocks */
#define KQ_CAT2(a, b) a##__##b
#define KQ_CAT(a, b) KQ_CAT2(a, b)
#define KQ_NAME(base) KQ_CAT(base, KQ_ISA)

/* One decoded super-block. */
typedef struct kq_decoded {
    _Alignas(32) uint8_t q[AK__QK_K]; /* levels (unsigned), or |w| for signed types */
    _Alignas(32) int8_t sgn[AK__QK_K]; /* signed types: w (for its sign) */
    _Alignas(32) int16_t scv[8][16];   /* per 32 values: [sc_a ×8, sc_b ×8] (two groups) */
    _Alignas(32) int16_t mn[16];       /* bsum multipliers per group of 16 */
    float dA, dB;
    int has_mn, is_signed;
} kq_decoded;

KQ_AI float kq_h2f(uint16_t h) { return _cvtsh_ss(h); }

KQ_AI float kq_hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* scv from one scale per group of 16 */
KQ_AI void kq_scales16(kq_decoded *D, const int *sc) {
    for (int v = 0; v < 8; v++)
        _mm256_store_si256((__m256i *)D->scv[v],
                           _mm256_set_m128i(_mm_set1_epi16((short)sc[2 * v + 1]),
                                            _mm_set1_epi16((short)sc[2 * v])));
}

/* 32 nibbles of 16 bytes: low nibbles then high nibbles. */
KQ_AI __m256i kq_nibbles(const uint8_t *p) {
    __m128i b = _mm_loadu_si128((const __m128i *)(const void *)p), m = _mm_set1_epi8(15);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(b, 4), m), _mm_and_si128(b, m));
}

/* Q4_K / Q5_K: levels of group 2j+h from the nibbles h of qs[32j..], Q5_K's fifth bit
 * from qh bit 2j+h. */
KQ_AI void kq_decode_k4(kq_decoded *D, const uint8_t *qs, const uint8_t *qh,
                        const uint8_t scales[12], uint16_t d, uint16_t dmin) {
    const __m256i m4 = _mm256_set1_epi8(15);
    __m256i hb = qh ? _mm256_loadu_si256((const __m256i *)(const void *)qh) : _mm256_setzero_si256();
    for (int j = 0; j < 4; j++) {
        __m256i b = _mm256_loadu_si256((const __m256i *)(const void *)(qs + 32 * j));
        __m256i lo = _mm256_and_si256(b, m4), hi = _mm256_and_si256(_mm256_srli_epi16(b, 4), m4);
        if (qh) {
            __m256i bit0 = _mm256_set1_epi8((char)(1 << (2 * j))), bit1 = _mm256_set1_epi8((char)(2 << (2 * j)));
            lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hb, bit0), bit0),
                                                      _mm256_set1_epi8(16)));
            hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hb, bit1), bit1),
                                                      _mm256_set1_epi8(16)));
        }
        _mm256_store_si256((__m256i *)(void *)(D->q + 64 * j), lo);
        _mm256_store_si256((__m256i *)(void *)(D->q + 64 * j + 32), hi);
    }
    uint8_t sc[8], m[8];
    ak__kquant_scales_k4(scales, sc, m);
    int s16[16];
    for (int g = 0; g < 16; g++) s16[g] = sc[g / 2], D->mn[g] = m[g / 2];
    kq_scales16(D, s16);
    D->dA = kq_h2f(d), D->dB = kq_h2f(dmin), D->has_mn = 1, D->is_signed = 0;
}

/* 2-bit fields: level of value 128h + 32s + l at bits 2s of qs[32h + l]. */
KQ_AI void kq_decode_2bit(uint8_t *q, const uint8_t *qs) {
    const __m256i m2 = _mm256_set1_epi8(3);
    for (int h = 0; h < 2; h++) {
        __m256i b = _mm256_loadu_si256((const __m256i *)(const void *)(qs + 32 * h));
        for (int s = 0; s < 4; s++)
            _mm256_store_si256((__m256i *)(void *)(q + 128 * h + 32 * s),
                               _mm256_and_si256(_mm256_srli_epi16(b, 2 * s), m2));
    }
}

KQ_AI void kq_decode(ak_wtype wt, kq_decoded *D, const void *blk) {
    switch (wt) {
    case AK_WTYPE_Q4_K: {
        const ak__block_q4_k *b = blk;
        kq_decode_k4(D, b->qs, NULL, b->scales, b->d, b->dmin);
        break;
    }
    case AK_WTYPE_Q5_K: {
        const ak__block_q5_k *b = blk;
        kq_decode_k4(D, b->qs, b->qh, b->scales, b->d, b->dmin);
        break;
    }
    case AK_WTYPE_Q6_K: {
        const ak__block_q6_k *b = blk;
        const __m256i m4 = _mm256_set1_epi8(15), m2 = _mm256_set1_epi8(3);
        for (int h = 0; h < 2; h++) {
            __m256i l0 = _mm256_loadu_si256((const __m256i *)(const void *)(b->ql + 64 * h));
            __m256i l1 = _mm256_loadu_si256((const __m256i *)(const void *)(b->ql + 64 * h + 32));
            __m256i hb = _mm256_loadu_si256((const __m256i *)(const void *)(b->qh + 32 * h));
            __m256i lows[4] = {_mm256_and_si256(l0, m4), _mm256_and_si256(l1, m4),
                               _mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                               _mm256_and_si256(_mm256_srli_epi16(l1, 4), m4)};
            for (int s = 0; s < 4; s++) {
                __m256i hi = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2 * s), m2), 4);
                _mm256_store_si256((__m256i *)(void *)(D->q + 128 * h + 32 * s), _mm256_or_si256(lows[s], hi));
            }
        }
        int s16[16];
        for (int g = 0; g < 16; g++) s16[g] = b->scales[g], D->mn[g] = (int16_t)(32 * b->scales[g]);
        kq_scales16(D, s16);
        D->dA = D->dB = kq_h2f(b->d), D->has_mn = 1, D->is_signed = 0;
        break;
    }
    case AK_WTYPE_Q3_K: {
        const ak__block_q3_k *b = blk;
        kq_decode_2bit(D->q, b->qs);
        __m256i hm = _mm256_loadu_si256((const __m256i *)(const void *)b->hmask);
        for (int s = 0; s < 8; s++) { /* the high bit of value 32s + l: bit s of hmask[l] */
            __m256i bit = _mm256_set1_epi8((char)(1 << s));
            __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(hm, bit), bit);
            __m256i *p = (__m256i *)(void *)(D->q + 32 * s);
            _mm256_store_si256(p, _mm256_or_si256(_mm256_load_si256(p), _mm256_and_si256(set, _mm256_set1_epi8(4))));
        }
        int8_t sc[16];
        ak__kquant_scales_q3(b->scales, sc);
        int s16[16];
        for (int g = 0; g < 16; g++) s16[g] = sc[g], D->mn[g] = (int16_t)(4 * sc[g]);
        kq_scales16(D, s16);
        D->dA = D->dB = kq_h2f(b->d), D->has_mn = 1, D->is_signed = 0;
        break;
    }
    case AK_WTYPE_Q2_K: {
        const ak__block_q2_k *b = blk;
        kq_decode_2bit(D->q, b->qs);
        int s16[16];
        for (int g = 0; g < 16; g++) s16[g] = b->scales[g] & 15, D->mn[g] = (int16_t)(b->scales[g] >> 4);
        kq_scales16(D, s16);
        D->dA = kq_h2f(b->d), D->dB = kq_h2f(b->dmin), D->has_mn = 1, D->is_signed = 0;
        break;
    }
    case AK_WTYPE_Q8_K: {
        const ak__block_q8_k *b = blk;
        for (int v = 0; v < 8; v++) {
            __m256i w = _mm256_loadu_si256((const __m256i *)(const void *)(b->qs + 32 * v));
            _mm256_store_si256((__m256i *)(void *)(D->q + 32 * v), _mm256_abs_epi8(w));
            _mm256_store_si256((__m256i *)(void *)(D->sgn + 32 * v), w);
        }
        int s16[16];
        for (int g = 0; g < 16; g++) s16[g] = 1;
        kq_scales16(D, s16);
        D->dA = b->d, D->dB = 0, D->has_mn = 0, D->is_signed = 1;
        break;
    }
    case AK_WTYPE_IQ4_XS: {
        const ak__block_iq4_xs *b = blk;
        const __m256i lut = _mm256_broadcastsi128_si256(
            _mm_loadu_si128((const __m128i *)(const void *)ak__iq4nl_values));
        int s16[16];
        for (int g = 0; g < 8; g++) {
            __m256i w = _mm256_shuffle_epi8(lut, kq_nibbles(b->qs + 16 * g));
            _mm256_store_si256((__m256i *)(void *)(D->q + 32 * g), _mm256_abs_epi8(w));
            _mm256_store_si256((__m256i *)(void *)(D->sgn + 32 * g), w);
            int ls = ((b->scales_l[g / 2] >> (4 * (g % 2))) & 0xF) | ((b->scales_h >> (2 * g)) & 3) << 4;
            s16[2 * g] = s16[2 * g + 1] = ls - 32;
        }
        kq_scales16(D, s16);
        D->dA = kq_h2f(b->d), D->dB = 0, D->has_mn = 0, D->is_signed = 1;
        break;
    }
    default: break;
    }
}

/* Σ_g sc_g·Σ q·x of one decoded block against one token's 256 values, as 8 int32 lanes. */
KQ_AI __m256i kq_dot(const kq_decoded *D, const int8_t *x) {
    __m256i acc = _mm256_setzero_si256();
    for (int v = 0; v < 8; v++) {
        __m256i q = _mm256_load_si256((const __m256i *)(const void *)(D->q + 32 * v));
        __m256i xv = _mm256_loadu_si256((const __m256i *)(const void *)(x + 32 * v));
        if (D->is_signed)
            xv = _mm256_sign_epi8(xv, _mm256_load_si256((const __m256i *)(const void *)(D->sgn + 32 * v)));
        __m256i p = _mm256_maddubs_epi16(q, xv);
        __m256i s = _mm256_load_si256((const __m256i *)(const void *)D->scv[v]);
#if KQ_VNNI
        acc = _mm256_dpwssd_epi32(acc, p, s);
#else
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, s));
#endif
    }
    return acc;
}

/* ---- T = 1: fused block dot products (no decoded copy; the weights stream once) ---- */

/* Σ q·x of 32 unsigned levels, scaled by the int16 lanes of s, added to acc. */
KQ_AI __m256i kq_madd_acc(__m256i acc, __m256i q, __m256i x, __m256i s) {
    __m256i p = _mm256_maddubs_epi16(q, x);
#if KQ_VNNI
    return _mm256_dpwssd_epi32(acc, p, s);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(p, s));
#endif
}

/* The 8 6-bit scales and mins of a Q4_K/Q5_K block as bytes (ggml's packing, in 32-bit
 * words: scales 0-3 and mins 0-3 are the low 6 bits of bytes 0-7, scales and mins 4-7
 * take their low nibble from bytes 8-11 and their top two bits from bytes 0-7). */
KQ_AI void kq_k4_scales(const uint8_t s12[12], uint8_t sc[8], uint8_t m[8]) {
    uint32_t a, b, c;
    memcpy(&a, s12, 4), memcpy(&b, s12 + 4, 4), memcpy(&c, s12 + 8, 4);
    uint32_t sc0 = a & 0x3f3f3f3fu, sc1 = (c & 0x0f0f0f0fu) | ((a >> 6) & 0x03030303u) << 4;
    uint32_t m0 = b & 0x3f3f3f3fu, m1 = ((c >> 4) & 0x0f0f0f0fu) | ((b >> 6) & 0x03030303u) << 4;
    memcpy(sc, &sc0, 4), memcpy(sc + 4, &sc1, 4), memcpy(m, &m0, 4), memcpy(m + 4, &m1, 4);
}

/* One Q4_K/Q5_K block · one Q8_K block, into acc (float lanes). */
KQ_AI __m256 kq_dot1_k4(const uint8_t *qs, const uint8_t *qh, const uint8_t s12[12], uint16_t d,
                        uint16_t dmin, const int8_t *x, const int16_t *bs, float dx, __m256 acc) {
    uint8_t sc[8], m[8];
    kq_k4_scales(s12, sc, m);
    const __m256i m4 = _mm256_set1_epi8(15);
    __m256i hb = qh ? _mm256_loadu_si256((const __m256i *)(const void *)qh) : _mm256_setzero_si256();
    __m256i sumi = _mm256_setzero_si256();
    for (int j = 0; j < 4; j++) {
        __m256i b = _mm256_loadu_si256((const __m256i *)(const void *)(qs + 32 * j));
        __m256i lo = _mm256_and_si256(b, m4), hi = _mm256_and_si256(_mm256_srli_epi16(b, 4), m4);
        if (qh) { /* bit 2j of qh[l] is value 64j + l's fifth bit, bit 2j+1 value 64j+32+l's */
            __m256i h0 = _mm256_and_si256(_mm256_slli_epi16(_mm256_srli_epi16(hb, 2 * j), 4), _mm256_set1_epi8(16));
            __m256i h1 = _mm256_and_si256(_mm256_slli_epi16(_mm256_srli_epi16(hb, 2 * j + 1), 4), _mm256_set1_epi8(16));
            lo = _mm256_or_si256(lo, h0), hi = _mm256_or_si256(hi, h1);
        }
        __m256i x0 = _mm256_loadu_si256((const __m256i *)(const void *)(x + 64 * j));
        __m256i x1 = _mm256_loadu_si256((const __m256i *)(const void *)(x + 64 * j + 32));
        sumi = kq_madd_acc(sumi, lo, x0, _mm256_set1_epi16(sc[2 * j]));
        sumi = kq_madd_acc(sumi, hi, x1, _mm256_set1_epi16(sc[2 * j + 1]));
    }
    /* Σ_g m_g·(sum of x over group g): the pairs of bsums times the mins */
    __m256i pairs = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)(const void *)bs), _mm256_set1_epi16(1));
    __m128i m8 = _mm_loadl_epi64((const __m128i *)(const void *)m);
    __m256i mins = _mm256_mullo_epi32(pairs, _mm256_cvtepu8_epi32(m8));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), _mm256_set1_ps(kq_h2f(d) * dx), acc);
    return _mm256_fnmadd_ps(_mm256_cvtepi32_ps(mins), _mm256_set1_ps(kq_h2f(dmin) * dx), acc);
}

/* One Q6_K block · one Q8_K block, into acc: Σ_g sc_g·(Σ q·x − 32·Σ x). */
KQ_AI __m256 kq_dot1_q6k(const ak__block_q6_k *b, const int8_t *x, const int16_t *bs, float dx,
                         __m256 acc) {
    const __m256i m4 = _mm256_set1_epi8(15), m2 = _mm256_set1_epi8(3);
    const __m128i sc8 = _mm_loadu_si128((const __m128i *)(const void *)b->scales);
    __m256i sumi = _mm256_setzero_si256();
    for (int h = 0; h < 2; h++) {
        __m256i l0 = _mm256_loadu_si256((const __m256i *)(const void *)(b->ql + 64 * h));
        __m256i l1 = _mm256_loadu_si256((const __m256i *)(const void *)(b->ql + 64 * h + 32));
        __m256i hb = _mm256_loadu_si256((const __m256i *)(const void *)(b->qh + 32 * h));
        __m256i lows[4] = {_mm256_and_si256(l0, m4), _mm256_and_si256(l1, m4),
                           _mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                           _mm256_and_si256(_mm256_srli_epi16(l1, 4), m4)};
        for (int q = 0; q < 4; q++) {
            __m256i hi = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2 * q), m2), 4);
            __m256i xv = _mm256_loadu_si256((const __m256i *)(const void *)(x + 128 * h + 32 * q));
            int g = 8 * h + 2 * q; /* groups g (lanes 0-7 of the products) and g + 1 */
            __m128i pick = _mm_set_epi8((char)(g + 1), (char)(g + 1), (char)(g + 1), (char)(g + 1),
                                        (char)(g + 1), (char)(g + 1), (char)(g + 1), (char)(g + 1),
                                        (char)g, (char)g, (char)g, (char)g, (char)g, (char)g, (char)g, (char)g);
            __m256i s = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc8, pick));
            sumi = kq_madd_acc(sumi, _mm256_or_si256(lows[q], hi), xv, s);
        }
    }
    __m256i off = _mm256_madd_epi16(_mm256_cvtepi8_epi16(sc8),
                                    _mm256_loadu_si256((const __m256i *)(const void *)bs));
    sumi = _mm256_sub_epi32(sumi, _mm256_slli_epi32(off, 5));
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), _mm256_set1_ps(kq_h2f(b->d) * dx), acc);
}

/* [sc_g ×8, sc_g+1 ×8] as int16 from 16 int8 scales (groups of 16 of a 32-value vector). */
KQ_AI __m256i kq_pick_pair(__m128i sc8, int g) {
    __m128i pick = _mm_set_epi8((char)(g + 1), (char)(g + 1), (char)(g + 1), (char)(g + 1),
                                (char)(g + 1), (char)(g + 1), (char)(g + 1), (char)(g + 1),
                                (char)g, (char)g, (char)g, (char)g, (char)g, (char)g, (char)g, (char)g);
    return _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc8, pick));
}

/* The 16 scales of a Q3_K block, −32..31, as int8 lanes (ggml's 12-byte packing: low
 * nibbles in bytes 0-7, two high bits each in bytes 8-11), in 32-bit words. */
KQ_AI __m128i kq_q3_scales(const uint8_t s12[12]) {
    const uint32_t k1 = 0x03030303u, k2 = 0x0f0f0f0fu;
    uint32_t a[3], o[4];
    memcpy(a, s12, 12);
    o[0] = (a[0] & k2) | ((a[2] & k1) << 4);
    o[1] = (a[1] & k2) | (((a[2] >> 2) & k1) << 4);
    o[2] = ((a[0] >> 4) & k2) | (((a[2] >> 4) & k1) << 4);
    o[3] = ((a[1] >> 4) & k2) | (((a[2] >> 6) & k1) << 4);
    return _mm_sub_epi8(_mm_loadu_si128((const __m128i *)(const void *)o), _mm_set1_epi8(32));
}

/* One Q3_K block · one Q8_K block: Σ_g sc_g·(Σ q·x − 4·Σ x), q = 2 low bits + 4·high bit. */
KQ_AI __m256 kq_dot1_q3k(const ak__block_q3_k *b, const int8_t *x, const int16_t *bs, float dx,
                         __m256 acc) {
    const __m256i m2 = _mm256_set1_epi8(3), four = _mm256_set1_epi8(4);
    const __m128i sc8 = kq_q3_scales(b->scales);
    const __m256i hm = _mm256_loadu_si256((const __m256i *)(const void *)b->hmask);
    __m256i sumi = _mm256_setzero_si256();
    for (int h = 0; h < 2; h++) {
        __m256i q2 = _mm256_loadu_si256((const __m256i *)(const void *)(b->qs + 32 * h));
        for (int q = 0; q < 4; q++) {
            __m256i low = _mm256_and_si256(_mm256_srli_epi16(q2, 2 * q), m2);
            __m256i bit = _mm256_set1_epi8((char)(1 << (4 * h + q)));
            __m256i high = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hm, bit), bit), four);
            __m256i xv = _mm256_loadu_si256((const __m256i *)(const void *)(x + 128 * h + 32 * q));
            sumi = kq_madd_acc(sumi, _mm256_or_si256(low, high), xv, kq_pick_pair(sc8, 8 * h + 2 * q));
        }
    }
    __m256i off = _mm256_madd_epi16(_mm256_cvtepi8_epi16(sc8),
                                    _mm256_loadu_si256((const __m256i *)(const void *)bs));
    sumi = _mm256_sub_epi32(sumi, _mm256_slli_epi32(off, 2));
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), _mm256_set1_ps(kq_h2f(b->d) * dx), acc);
}

/* One Q2_K block · one Q8_K block: d·Σ_g sc_g·Σ q·x − dmin·Σ_g m_g·Σ x. */
KQ_AI __m256 kq_dot1_q2k(const ak__block_q2_k *b, const int8_t *x, const int16_t *bs, float dx,
                         __m256 acc) {
    const __m256i m2 = _mm256_set1_epi8(3);
    const __m128i raw = _mm_loadu_si128((const __m128i *)(const void *)b->scales);
    const __m128i sc8 = _mm_and_si128(raw, _mm_set1_epi8(15));
    const __m128i mn8 = _mm_and_si128(_mm_srli_epi16(raw, 4), _mm_set1_epi8(15));
    __m256i sumi = _mm256_setzero_si256();
    for (int h = 0; h < 2; h++) {
        __m256i q2 = _mm256_loadu_si256((const __m256i *)(const void *)(b->qs + 32 * h));
        for (int q = 0; q < 4; q++) {
            __m256i lv = _mm256_and_si256(_mm256_srli_epi16(q2, 2 * q), m2);
            __m256i xv = _mm256_loadu_si256((const __m256i *)(const void *)(x + 128 * h + 32 * q));
            sumi = kq_madd_acc(sumi, lv, xv, kq_pick_pair(sc8, 8 * h + 2 * q));
        }
    }
    __m256i mins = _mm256_madd_epi16(_mm256_cvtepu8_epi16(mn8),
                                     _mm256_loadu_si256((const __m256i *)(const void *)bs));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), _mm256_set1_ps(kq_h2f(b->d) * dx), acc);
    return _mm256_fnmadd_ps(_mm256_cvtepi32_ps(mins), _mm256_set1_ps(kq_h2f(b->dmin) * dx), acc);
}

/* Signed weights w against x: |w| times x with w's sign, as int16 pairs. */
KQ_AI __m256i kq_signed_pairs(__m256i w, __m256i x) {
    return _mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(x, w));
}

/* Σ w·x of 32 signed bytes each, as 8 int32 lanes (vpdpbusd on |w| with VNNI). */
KQ_AI __m256i kq_dot_signed32(__m256i acc, __m256i w, __m256i x) {
#if KQ_VNNI
    return _mm256_dpbusd_epi32(acc, _mm256_abs_epi8(w), _mm256_sign_epi8(x, w));
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(kq_signed_pairs(w, x), _mm256_set1_epi16(1)));
#endif
}

/* One Q8_K block · one Q8_K block. */
KQ_AI __m256 kq_dot1_q8k(const ak__block_q8_k *b, const int8_t *x, float dx, __m256 acc) {
    __m256i sumi = _mm256_setzero_si256();
    for (int v = 0; v < 8; v++)
        sumi = kq_dot_signed32(sumi, _mm256_loadu_si256((const __m256i *)(const void *)(b->qs + 32 * v)),
                               _mm256_loadu_si256((const __m256i *)(const void *)(x + 32 * v)));
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(sumi), _mm256_set1_ps(b->d * dx), acc);
}

/* T = 1: one row after the other, each block once. */
KQ_AI void kq_linear_t1(ak_wtype wt, const ak__linear_job *j, size_t n0, size_t n1) {
    size_t e = 0, bsz = 0, nb = j->K / AK__QK_K;
    ak__kquant_block(wt, &e, &bsz);
    for (size_t n = n0; n < n1; n++) {
        const uint8_t *row = j->W + n * j->row_bytes;
        __m256 acc = _mm256_setzero_ps();
        for (size_t i = 0; i < nb; i++) {
            const void *blk = row + i * bsz;
            const int8_t *x = j->xq + i * AK__QK_K;
            const int16_t *bs = j->kbs + i * 16;
            float dx = j->kd[i];
            if (wt == AK_WTYPE_Q4_K) {
                const ak__block_q4_k *b = blk;
                acc = kq_dot1_k4(b->qs, NULL, b->scales, b->d, b->dmin, x, bs, dx, acc);
            } else if (wt == AK_WTYPE_Q5_K) {
                const ak__block_q5_k *b = blk;
                acc = kq_dot1_k4(b->qs, b->qh, b->scales, b->d, b->dmin, x, bs, dx, acc);
            } else if (wt == AK_WTYPE_Q6_K) {
                acc = kq_dot1_q6k(blk, x, bs, dx, acc);
            } else if (wt == AK_WTYPE_Q3_K) {
                acc = kq_dot1_q3k(blk, x, bs, dx, acc);
            } else if (wt == AK_WTYPE_Q2_K) {
                acc = kq_dot1_q2k(blk, x, bs, dx, acc);
            } else {
                acc = kq_dot1_q8k(blk, x, dx, acc);
            }
        }
        float *y = j->Y + n, v = kq_hsum(acc);
        *y = j->accumulate ? *y + v : v;
    }
}

#if KQ_VNNI
/* ---- VNNI, T >= 4: 4 tokens in the lanes of one vpdpbusd (Q4_K, Q6_K) ----
 * The decoded path above spends a maddubs and a vpdpwssd per 32 values and token. Here,
 * as for Q8_0/Q4_0 (kernels/linear_x86.h), the 8 int32 lanes of one vpdpbusd belong to 4
 * tokens: lane i (< 4) sums token i's values 4c..4c+3 of a 32-value sub-block, lane 4+i
 * its values 16+4c..16+4c+3, against the weight levels' dword c of each 128-bit half
 * broadcast by vpshufd. Four vpdpbusd cover a sub-block for 4 tokens; its lanes 0-3 then
 * hold group 2s (values 0-15) and lanes 4-7 group 2s+1, so one vpmulld by
 * [sc_2s ×4, sc_2s+1 ×4] applies the scales in integer (exact: |sum| < 2^31). The mins
 * (or Q6_K's offset 32·sc) meet the activation sums of 16, interleaved the same way, in
 * 4 vpdpwssd; the float side is paid once per super-block, row and 4 tokens. Lanes i and
 * 4+i are added when a row is stored. The activations of 4 tokens are interleaved (a 4×4
 * dword transpose per half) per chunk of K into a buffer on the stack that stays in L1
 * while the rows of a block of weights (kept in L2) pass under it. */

#define KQ_IG 4  /* groups of 4 tokens per pass over a row: 16 tokens share a block's decode */
#define KQ_IKB 4 /* super-blocks per K chunk: 4 groups × 4.6 KiB in L1 */

/* One group of 4 tokens, one chunk of super-blocks, interleaved: per super-block, per
 * sub-block of 32, 4 vectors (dword c of every half of each token); the sums of 16 as 4
 * vectors the same way (dword s = the pair of sums of sub-block s); the 4 scales. Tokens
 * past T are zeros. */
typedef struct kq_igroup {
    _Alignas(32) int8_t q[KQ_IKB][8][4][32];
    _Alignas(32) int16_t bs[KQ_IKB][4][16];
    _Alignas(16) float d[KQ_IKB][4];
} kq_igroup;

/* Per 128-bit half: rows = the 4 vectors (tokens), columns = dwords; transposed into out. */
KQ_AI void kq_transpose4v(const __m256i v[4], __m256i out[4]) {
    __m256i a0 = _mm256_unpacklo_epi32(v[0], v[1]), a1 = _mm256_unpackhi_epi32(v[0], v[1]);
    __m256i a2 = _mm256_unpacklo_epi32(v[2], v[3]), a3 = _mm256_unpackhi_epi32(v[2], v[3]);
    out[0] = _mm256_unpacklo_epi64(a0, a2);
    out[1] = _mm256_unpackhi_epi64(a0, a2);
    out[2] = _mm256_unpacklo_epi64(a1, a3);
    out[3] = _mm256_unpackhi_epi64(a1, a3);
}

KQ_AI void kq_transpose4(const __m256i v[4], void *dst) {
    __m256i out[4];
    kq_transpose4v(v, out);
    for (int c = 0; c < 4; c++) _mm256_store_si256((__m256i *)dst + c, out[c]);
}

/* Vector s (0-7: the values of sub-block s; 8: the sums of 16) of super-block kb + b of
 * tokens [t, t + 4) ∩ [0, T), each token's in one vector (zeros past T). */
KQ_AI void kq_token_vectors(const ak__linear_job *j, size_t t, size_t kb, size_t b, int s,
                            __m256i v[4]) {
    size_t nbk = j->K / AK__QK_K, live = t < j->T ? (j->T - t < 4 ? j->T - t : 4) : 0;
    for (size_t i = 0; i < 4; i++) {
        size_t tok = t + i;
        const void *src = s < 8 ? (const void *)(j->xq + tok * j->ldq + (kb + b) * AK__QK_K + 32 * s)
                                : (const void *)(j->kbs + (tok * nbk + kb + b) * 16);
        v[i] = i < live ? _mm256_loadu_si256((const __m256i *)src) : _mm256_setzero_si256();
    }
}

/* Tokens [t, t + 4) ∩ [0, T), super-blocks [kb, kb + nb) of the job's Q8_K activations
 * into g. */
KQ_AI void kq_interleave(const ak__linear_job *j, size_t t, size_t kb, size_t nb, kq_igroup *g) {
    size_t nbk = j->K / AK__QK_K, live = j->T - t < 4 ? j->T - t : 4;
    for (size_t b = 0; b < nb; b++) {
        for (int s = 0; s <= 8; s++) { /* s = 8: the sums of 16 */
            __m256i v[4];
            kq_token_vectors(j, t, kb, b, s, v);
            kq_transpose4(v, s < 8 ? (void *)g->q[b][s] : (void *)g->bs[b]);
        }
        for (size_t i = 0; i < 4; i++) g->d[b][i] = i < live ? j->kd[(t + i) * nbk + kb + b] : 0.0f;
    }
}

/* One Q4_K or Q6_K super-block as kq_irow meets it, unpacked in registers: the levels of
 * sub-block s (32 values) in q[s], its integer scales in the lanes of one vpdpbusd
 * result (lanes 0-3: values 0-15, lanes 4-7: values 16-31) in sc[s], the bsum
 * multipliers of the 16 groups of 16 in mn. The scales go from the block's bytes to
 * vectors by widening and vpermd, not through kq_decoded's per-group scalar stores,
 * which cost as much as the super-block's dot products for 4 tokens. */
typedef struct kq_unpacked {
    __m256i q[8], sc[8], mn;
    float dA, dB;
} kq_unpacked;

/* vpermd indices: dword s of src into lanes 0-3 and dword s + 1 into lanes 4-7 */
KQ_AI __m256i kq_pair_index(int s) {
    return _mm256_setr_epi32(s, s, s, s, s + 1, s + 1, s + 1, s + 1);
}

KQ_AI void kq_unpack(ak_wtype wt, const void *blk, kq_unpacked *U) {
    const __m256i m4 = _mm256_set1_epi8(15);
    if (wt == AK_WTYPE_Q4_K) {
        const ak__block_q4_k *b = blk;
        for (int j = 0; j < 4; j++) { /* sub-blocks 2j (low nibbles) and 2j+1 (high) */
            __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(b->qs + 32 * j));
            U->q[2 * j] = _mm256_and_si256(v, m4);
            U->q[2 * j + 1] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
        }
        uint8_t sc[8], m[8];
        kq_k4_scales(b->scales, sc, m);
        __m256i sc32 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)sc));
        for (int s = 0; s < 8; s++) /* one scale per 32 values */
            U->sc[s] = _mm256_permutevar8x32_epi32(sc32, _mm256_set1_epi32(s));
        __m128i m8 = _mm_loadl_epi64((const __m128i *)(const void *)m);
        U->mn = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8)); /* m[g/2] for g < 16 */
        U->dA = kq_h2f(b->d), U->dB = kq_h2f(b->dmin);
        return;
    }
    const ak__block_q6_k *b = blk; /* Q6_K */
    const __m256i m2 = _mm256_set1_epi8(3);
    for (int h = 0; h < 2; h++) {
        __m256i l0 = _mm256_loadu_si256((const __m256i *)(const void *)(b->ql + 64 * h));
        __m256i l1 = _mm256_loadu_si256((const __m256i *)(const void *)(b->ql + 64 * h + 32));
        __m256i hb = _mm256_loadu_si256((const __m256i *)(const void *)(b->qh + 32 * h));
        __m256i lows[4] = {_mm256_and_si256(l0, m4), _mm256_and_si256(l1, m4),
                           _mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                           _mm256_and_si256(_mm256_srli_epi16(l1, 4), m4)};
        for (int s = 0; s < 4; s++) {
            __m256i hi = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2 * s), m2), 4);
            U->q[4 * h + s] = _mm256_or_si256(lows[s], hi);
        }
    }
    __m128i sc8 = _mm_loadu_si128((const __m128i *)(const void *)b->scales);
    __m256i lo = _mm256_cvtepi8_epi32(sc8), hi = _mm256_cvtepi8_epi32(_mm_srli_si128(sc8, 8));
    for (int s = 0; s < 4; s++) { /* one scale per 16 values: groups 2s and 2s + 1 */
        U->sc[s] = _mm256_permutevar8x32_epi32(lo, kq_pair_index(2 * s));
        U->sc[4 + s] = _mm256_permutevar8x32_epi32(hi, kq_pair_index(2 * s));
    }
    U->mn = _mm256_slli_epi16(_mm256_cvtepi8_epi16(sc8), 5); /* the offset 32·sc */
    U->dA = U->dB = kq_h2f(b->d);
}

/* The next block of rows is prefetched into L2 (a pf_walk, near = 0) a few lines per row
 * of the current block: with K over one chunk, a block's rows are read a chunk at a time
 * (short strided pieces the hardware prefetcher does not follow), and without this
 * 768×2048 Q6_K ran at half the speed of 2048×768. */

/* Row n, super-blocks [kb, kb + nb), against the G groups of gs from token t; prefetches
 * `npf` lines of *pf on the way (one per super-block, the rest at the end). */
KQ_AI void kq_irow(ak_wtype wt, int G, const ak__linear_job *j, size_t bsz, size_t n, size_t kb,
                   size_t nb, const kq_igroup *gs, size_t t, int accumulate, pf_walk *pf,
                   size_t npf) {
    const uint8_t *row = j->W + n * j->row_bytes + kb * bsz;
    __m256 acc[KQ_IG];
    for (int g = 0; g < G; g++) acc[g] = _mm256_setzero_ps();
    kq_unpacked U;
    pf_walk p = *pf; /* a local copy stays in registers */
    for (size_t b = 0; b < nb; b++) {
        if (npf) {
            pf_walk_one(&p);
            npf--;
        }
        kq_unpack(wt, row + b * bsz, &U);
        __m256i si[KQ_IG];
        for (int g = 0; g < G; g++) si[g] = _mm256_setzero_si256();
        for (int s = 0; s < 8; s++) {
            __m256i wv = U.q[s];
            __m256i w0 = _mm256_shuffle_epi32(wv, 0x00), w1 = _mm256_shuffle_epi32(wv, 0x55);
            __m256i w2 = _mm256_shuffle_epi32(wv, 0xaa), w3 = _mm256_shuffle_epi32(wv, 0xff);
            for (int g = 0; g < G; g++) {
                const __m256i *x = (const __m256i *)(const void *)gs[g].q[b][s];
                __m256i d = _mm256_dpbusd_epi32(_mm256_setzero_si256(), w0, _mm256_load_si256(x));
                d = _mm256_dpbusd_epi32(d, w1, _mm256_load_si256(x + 1));
                d = _mm256_dpbusd_epi32(d, w2, _mm256_load_si256(x + 2));
                d = _mm256_dpbusd_epi32(d, w3, _mm256_load_si256(x + 3));
                si[g] = _mm256_add_epi32(si[g], _mm256_mullo_epi32(d, U.sc[s]));
            }
        }
        __m256i mn = U.mn;
        __m256i m0 = _mm256_shuffle_epi32(mn, 0x00), m1 = _mm256_shuffle_epi32(mn, 0x55);
        __m256i m2 = _mm256_shuffle_epi32(mn, 0xaa), m3 = _mm256_shuffle_epi32(mn, 0xff);
        __m256 dA = _mm256_set1_ps(U.dA), dB = _mm256_set1_ps(U.dB);
        for (int g = 0; g < G; g++) {
            const __m256i *bs = (const __m256i *)(const void *)gs[g].bs[b];
            __m256i m = _mm256_dpwssd_epi32(_mm256_setzero_si256(), m0, _mm256_load_si256(bs));
            m = _mm256_dpwssd_epi32(m, m1, _mm256_load_si256(bs + 1));
            m = _mm256_dpwssd_epi32(m, m2, _mm256_load_si256(bs + 2));
            m = _mm256_dpwssd_epi32(m, m3, _mm256_load_si256(bs + 3));
            __m256 dx = _mm256_broadcast_ps((const __m128 *)(const void *)gs[g].d[b]);
            acc[g] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(si[g]), _mm256_mul_ps(dA, dx), acc[g]);
            acc[g] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(m), _mm256_mul_ps(dB, dx), acc[g]);
        }
    }
    for (; npf; npf--) pf_walk_one(&p);
    *pf = p;
    for (int g = 0; g < G; g++) {
        _Alignas(16) float v[4];
        _mm_store_ps(v, _mm_add_ps(_mm256_castps256_ps128(acc[g]), _mm256_extractf128_ps(acc[g], 1)));
        size_t tg = t + 4 * (size_t)g, live = j->T - tg < 4 ? j->T - tg : 4;
        float *y = j->Y + tg * j->ldy + n;
        for (size_t i = 0; i < live; i++, y += j->ldy) *y = accumulate ? *y + v[i] : v[i];
    }
}

/* Blocks of rows (≤ 128 KiB of weights, kept in L2) outer, then K chunks, then tiles of
 * 16 tokens, whose interleaved activations the block's rows pass under; the rows of a
 * block prefetch the next block. A chunk after the first adds to Y. */
KQ_AI void kq_linear_interleaved(ak_wtype wt, const ak__linear_job *j, size_t n0, size_t n1) {
    kq_igroup gs[KQ_IG];
    size_t e = 0, bsz = 0, nball = j->K / AK__QK_K;
    ak__kquant_block(wt, &e, &bsz);
    size_t rowb = nball * bsz, nbk = ((size_t)128 << 10) / (rowb ? rowb : 1);
    nbk = nbk < 1 ? 1 : nbk;
    for (size_t b0 = n0; b0 < n1; b0 += nbk) {
        size_t b1 = b0 + nbk < n1 ? b0 + nbk : n1, nx = b1 + nbk < n1 ? b1 + nbk : n1;
        size_t calls = (b1 - b0) * ((nball + KQ_IKB - 1) / KQ_IKB) * ((j->T + 4 * KQ_IG - 1) / (4 * KQ_IG));
        pf_walk next = {j->W + b1 * j->row_bytes, 0, rowb, j->row_bytes, nx - b1, 0};
        size_t per = ((nx - b1) * ((rowb + 63) / 64) + calls - 1) / calls;
        for (size_t kb = 0; kb < nball; kb += KQ_IKB) {
            size_t nb = nball - kb < KQ_IKB ? nball - kb : KQ_IKB;
            int accumulate = kb ? 1 : j->accumulate;
            for (size_t t = 0; t < j->T; t += 4 * KQ_IG) {
                size_t groups = (j->T - t + 3) / 4;
                int G = groups < KQ_IG ? (int)groups : KQ_IG;
                for (int g = 0; g < G; g++) kq_interleave(j, t + 4 * (size_t)g, kb, nb, &gs[g]);
                for (size_t n = b0; n < b1; n++) { /* G a constant in each call: unrolled */
                    if (G == 4) kq_irow(wt, 4, j, bsz, n, kb, nb, gs, t, accumulate, &next, per);
                    else if (G == 3) kq_irow(wt, 3, j, bsz, n, kb, nb, gs, t, accumulate, &next, per);
                    else if (G == 2) kq_irow(wt, 2, j, bsz, n, kb, nb, gs, t, accumulate, &next, per);
                    else kq_irow(wt, 1, j, bsz, n, kb, nb, gs, t, accumulate, &next, per);
                }
            }
        }
    }
}

#if KQ_WIDE
/* ---- 512-bit tiles (table avx512w: Zen 5, Intel), T >= 8, Q4_K and Q6_K ---------------
 * kq_irow's tiles with two groups of 4 tokens in one zmm: lanes 0-7 are one group's
 * vector as kq_interleave lays it out, lanes 8-15 the next group's; the weights' dwords
 * are broadcast to both halves. A zmm vpdpbusd, vpmulld or vpdpwssd then covers 8 tokens
 * where these cores take about as long as for a ymm one of 4. */
#define KQ_WG 2 /* groups of 8 tokens per pass over a row: 16 tokens share a block's unpacking */

typedef struct kq_wgroup {
    _Alignas(64) int8_t q[KQ_IKB][8][4][64];
    _Alignas(64) int16_t bs[KQ_IKB][4][32];
    _Alignas(64) float d[KQ_IKB][16]; /* lanes as the sums: tokens 0-3 twice, 4-7 twice */
} kq_wgroup;

/* Tokens [t, t + 8) ∩ [0, T), super-blocks [kb, kb + nb) into g. */
KQ_AI void kq_winterleave(const ak__linear_job *j, size_t t, size_t kb, size_t nb, kq_wgroup *g) {
    size_t nbk = j->K / AK__QK_K;
    for (size_t b = 0; b < nb; b++) {
        for (int s = 0; s <= 8; s++)
            for (int h = 0; h < 2; h++) {
                __m256i v[4], out[4];
                kq_token_vectors(j, t + 4 * (size_t)h, kb, b, s, v);
                kq_transpose4v(v, out);
                for (int c = 0; c < 4; c++) {
                    void *dst = s < 8 ? (void *)&g->q[b][s][c][32 * h] : (void *)&g->bs[b][c][16 * h];
                    _mm256_store_si256(dst, out[c]);
                }
            }
        for (size_t i = 0; i < 8; i++) {
            float d = t + i < j->T ? j->kd[(t + i) * nbk + kb + b] : 0.0f;
            g->d[b][8 * (i / 4) + i % 4] = g->d[b][8 * (i / 4) + 4 + i % 4] = d;
        }
    }
}

/* kq_irow on 8-token groups. */
KQ_AI void kq_wrow(ak_wtype wt, int G, const ak__linear_job *j, size_t bsz, size_t n, size_t kb,
                   size_t nb, const kq_wgroup *gs, size_t t, int accumulate, pf_walk *pf,
                   size_t npf) {
    const uint8_t *row = j->W + n * j->row_bytes + kb * bsz;
    __m512 acc[KQ_WG];
    for (int g = 0; g < G; g++) acc[g] = _mm512_setzero_ps();
    kq_unpacked U;
    pf_walk p = *pf;
    for (size_t b = 0; b < nb; b++) {
        if (npf) {
            pf_walk_one(&p);
            npf--;
        }
        kq_unpack(wt, row + b * bsz, &U);
        __m512i si[KQ_WG];
        for (int g = 0; g < G; g++) si[g] = _mm512_setzero_si512();
        for (int s = 0; s < 8; s++) {
            __m512i wv = _mm512_broadcast_i64x4(U.q[s]), sc = _mm512_broadcast_i64x4(U.sc[s]);
            __m512i w0 = _mm512_shuffle_epi32(wv, 0x00), w1 = _mm512_shuffle_epi32(wv, 0x55);
            __m512i w2 = _mm512_shuffle_epi32(wv, 0xaa), w3 = _mm512_shuffle_epi32(wv, 0xff);
            for (int g = 0; g < G; g++) {
                const void *x = gs[g].q[b][s];
                __m512i d = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w0, _mm512_load_si512(x));
                d = _mm512_dpbusd_epi32(d, w1, _mm512_load_si512((const char *)x + 64));
                d = _mm512_dpbusd_epi32(d, w2, _mm512_load_si512((const char *)x + 128));
                d = _mm512_dpbusd_epi32(d, w3, _mm512_load_si512((const char *)x + 192));
                si[g] = _mm512_add_epi32(si[g], _mm512_mullo_epi32(d, sc));
            }
        }
        __m512i mn = _mm512_broadcast_i64x4(U.mn);
        __m512i m0 = _mm512_shuffle_epi32(mn, 0x00), m1 = _mm512_shuffle_epi32(mn, 0x55);
        __m512i m2 = _mm512_shuffle_epi32(mn, 0xaa), m3 = _mm512_shuffle_epi32(mn, 0xff);
        __m512 dA = _mm512_set1_ps(U.dA), dB = _mm512_set1_ps(U.dB);
        for (int g = 0; g < G; g++) {
            const char *bs = (const char *)gs[g].bs[b];
            __m512i m = _mm512_dpwssd_epi32(_mm512_setzero_si512(), m0, _mm512_load_si512(bs));
            m = _mm512_dpwssd_epi32(m, m1, _mm512_load_si512(bs + 64));
            m = _mm512_dpwssd_epi32(m, m2, _mm512_load_si512(bs + 128));
            m = _mm512_dpwssd_epi32(m, m3, _mm512_load_si512(bs + 192));
            __m512 dx = _mm512_load_ps(gs[g].d[b]);
            acc[g] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(si[g]), _mm512_mul_ps(dA, dx), acc[g]);
            acc[g] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(m), _mm512_mul_ps(dB, dx), acc[g]);
        }
    }
    for (; npf; npf--) pf_walk_one(&p);
    *pf = p;
    for (int g = 0; g < G; g++) {
        __m256 lo = _mm512_castps512_ps256(acc[g]), hi = _mm512_extractf32x8_ps(acc[g], 1);
        _Alignas(32) float v[8]; /* tokens 0-3: the two halves of lo added; 4-7: of hi */
        _mm_store_ps(v, _mm_add_ps(_mm256_castps256_ps128(lo), _mm256_extractf128_ps(lo, 1)));
        _mm_store_ps(v + 4, _mm_add_ps(_mm256_castps256_ps128(hi), _mm256_extractf128_ps(hi, 1)));
        size_t tg = t + 8 * (size_t)g, live = j->T - tg < 8 ? j->T - tg : 8;
        float *y = j->Y + tg * j->ldy + n;
        for (size_t i = 0; i < live; i++, y += j->ldy) *y = accumulate ? *y + v[i] : v[i];
    }
}

/* kq_linear_interleaved on 8-token groups. */
KQ_AI void kq_linear_wide(ak_wtype wt, const ak__linear_job *j, size_t n0, size_t n1) {
    kq_wgroup gs[KQ_WG];
    size_t e = 0, bsz = 0, nball = j->K / AK__QK_K;
    ak__kquant_block(wt, &e, &bsz);
    size_t rowb = nball * bsz, nbk = ((size_t)128 << 10) / (rowb ? rowb : 1);
    nbk = nbk < 1 ? 1 : nbk;
    for (size_t b0 = n0; b0 < n1; b0 += nbk) {
        size_t b1 = b0 + nbk < n1 ? b0 + nbk : n1, nx = b1 + nbk < n1 ? b1 + nbk : n1;
        size_t calls = (b1 - b0) * ((nball + KQ_IKB - 1) / KQ_IKB) * ((j->T + 8 * KQ_WG - 1) / (8 * KQ_WG));
        pf_walk next = {j->W + b1 * j->row_bytes, 0, rowb, j->row_bytes, nx - b1, 0};
        size_t per = ((nx - b1) * ((rowb + 63) / 64) + calls - 1) / calls;
        for (size_t kb = 0; kb < nball; kb += KQ_IKB) {
            size_t nb = nball - kb < KQ_IKB ? nball - kb : KQ_IKB;
            int accumulate = kb ? 1 : j->accumulate;
            for (size_t t = 0; t < j->T; t += 8 * KQ_WG) {
                size_t groups = (j->T - t + 7) / 8;
                int G = groups < KQ_WG ? (int)groups : KQ_WG;
                for (int g = 0; g < G; g++) kq_winterleave(j, t + 8 * (size_t)g, kb, nb, &gs[g]);
                for (size_t n = b0; n < b1; n++) {
                    if (G == 2) kq_wrow(wt, 2, j, bsz, n, kb, nb, gs, t, accumulate, &next, per);
                    else kq_wrow(wt, 1, j, bsz, n, kb, nb, gs, t, accumulate, &next, per);
                }
            }
        }
    }
}
#endif /* KQ_WIDE */
#endif /* KQ_VNNI */

/* Columns [n0, n1) of a super-block type against Q8_K activations. */
KQ_AI void kq_linear(ak_wtype wt, const ak__linear_job *j, size_t n0, size_t n1) {
#if KQ_WIDE
    if (j->T >= 8 && (wt == AK_WTYPE_Q4_K || wt == AK_WTYPE_Q6_K)) {
        kq_linear_wide(wt, j, n0, n1);
        return;
    }
#endif
#if KQ_VNNI
    if (j->T >= 4 && (wt == AK_WTYPE_Q4_K || wt == AK_WTYPE_Q6_K)) {
        kq_linear_interleaved(wt, j, n0, n1);
        return;
    }
#endif
    if (j->T == 1 && wt != AK_WTYPE_IQ4_XS) { /* IQ4_XS: the decoded path is faster (209 vs
                                               * 286 µs fused, 2048×2048 on Zen 4) */
        kq_linear_t1(wt, j, n0, n1);
        return;
    }
    size_t e = 0, bsz = 0, nb = j->K / AK__QK_K;
    ak__kquant_block(wt, &e, &bsz);
    kq_decoded D;
    for (size_t n = n0; n < n1; n++) {
        const uint8_t *row = j->W + n * j->row_bytes;
        for (size_t t0 = 0; t0 < j->T; t0 += KQ_C) {
            size_t tc = j->T - t0 < KQ_C ? j->T - t0 : KQ_C;
            __m256 acc[KQ_C];
            for (size_t c = 0; c < KQ_C; c++) acc[c] = _mm256_setzero_ps();
            for (size_t i = 0; i < nb; i++) {
                if (i + 2 < nb) _mm_prefetch((const char *)(row + (i + 2) * bsz), _MM_HINT_T0);
                kq_decode(wt, &D, row + i * bsz);
                __m256i mn = _mm256_load_si256((const __m256i *)(const void *)D.mn);
                for (size_t c = 0; c < tc; c++) {
                    size_t t = t0 + c;
                    float dx = j->kd[t * nb + i];
                    __m256i s = kq_dot(&D, j->xq + t * j->ldq + i * AK__QK_K);
                    acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(D.dA * dx), acc[c]);
                    if (D.has_mn) {
                        __m256i bs = _mm256_loadu_si256((const __m256i *)(const void *)(j->kbs + (t * nb + i) * 16));
                        __m256i m = _mm256_madd_epi16(mn, bs);
                        acc[c] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(m), _mm256_set1_ps(D.dB * dx), acc[c]);
                    }
                }
            }
            for (size_t c = 0; c < tc; c++) {
                float *y = j->Y + (t0 + c) * j->ldy + n, v = kq_hsum(acc[c]);
                *y = j->accumulate ? *y + v : v;
            }
        }
    }
}

/* IQ4_NL: blocks of 32 on the IQ4 levels against Q8_0 activations. */
KQ_AI void kq_linear_iq4_nl(const ak__linear_job *j, size_t n0, size_t n1) {
    size_t nb = j->K / 32;
    const __m256i lut = _mm256_broadcastsi128_si256(
        _mm_loadu_si128((const __m128i *)(const void *)ak__iq4nl_values));
    if (j->T == 1) { /* decode: two chains of block sums */
        for (size_t n = n0; n < n1; n++) {
            const ak__block_iq4_nl *row = (const void *)(j->W + n * j->row_bytes);
            __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
            for (size_t i = 0; i < nb; i++) {
                __m256i w = _mm256_shuffle_epi8(lut, kq_nibbles(row[i].qs));
                __m256i xv = _mm256_loadu_si256((const __m256i *)(const void *)(j->xq + 32 * i));
                __m256i s = kq_dot_signed32(_mm256_setzero_si256(), w, xv);
                acc[i & 1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s),
                                             _mm256_set1_ps(kq_h2f(row[i].d) * j->xd[i]), acc[i & 1]);
            }
            float *y = j->Y + n, v = kq_hsum(_mm256_add_ps(acc[0], acc[1]));
            *y = j->accumulate ? *y + v : v;
        }
        return;
    }
    for (size_t n = n0; n < n1; n++) {
        const ak__block_iq4_nl *row = (const void *)(j->W + n * j->row_bytes);
        for (size_t t0 = 0; t0 < j->T; t0 += KQ_C) { /* each block decoded once per KQ_C tokens */
            size_t tc = j->T - t0 < KQ_C ? j->T - t0 : KQ_C;
            __m256 acc[KQ_C];
            for (size_t c = 0; c < KQ_C; c++) acc[c] = _mm256_setzero_ps();
            for (size_t i = 0; i < nb; i++) {
                __m256i w = _mm256_shuffle_epi8(lut, kq_nibbles(row[i].qs));
                float dw = kq_h2f(row[i].d);
                for (size_t c = 0; c < tc; c++) {
                    size_t t = t0 + c;
                    __m256i xv = _mm256_loadu_si256((const __m256i *)(const void *)(j->xq + t * j->ldq + 32 * i));
                    __m256i s = kq_dot_signed32(_mm256_setzero_si256(), w, xv);
                    acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s),
                                             _mm256_set1_ps(dw * j->xd[t * (j->ldq / 32) + i]), acc[c]);
                }
            }
            for (size_t c = 0; c < tc; c++) {
                float *y = j->Y + (t0 + c) * j->ldy + n, v = kq_hsum(acc[c]);
                *y = j->accumulate ? *y + v : v;
            }
        }
    }
}

#define KQ_DEFINE(ty, TY)                                                                  \
    void KQ_NAME(ak_##ty##_linear)(const ak__linear_job *j, size_t n0, size_t n1) {        \
        kq_linear(AK_WTYPE_##TY, j, n0, n1);                                               \
    }
KQ_DEFINE(q4_k, Q4_K)
KQ_DEFINE(q6_k, Q6_K)
/* the wide variant (kquant_avx512w.c) has only the types whose tiles differ */
#if !KQ_WIDE
KQ_DEFINE(q2_k, Q2_K)
KQ_DEFINE(q3_k, Q3_K)
KQ_DEFINE(q5_k, Q5_K)
KQ_DEFINE(q8_k, Q8_K)
KQ_DEFINE(iq4_xs, IQ4_XS)
#undef KQ_DEFINE

void KQ_NAME(ak_iq4_nl_linear)(const ak__linear_job *j, size_t n0, size_t n1) {
    kq_linear_iq4_nl(j, n0, n1);
}
#endif /* !KQ_WIDE */

#endif /* AK_KERNELS_KQUANT_X86_H */
