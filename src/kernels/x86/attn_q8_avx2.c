/* AVX2 + FMA + F16C attention kernels over q8_0 rows (the q8_0 KV cache; see
 * kernels/ref/attn_q8_ref.c for what each computes). The int8 values are widened in
 * registers (vpmovsxbd + vcvtdq2ps) next to the multiply, so a row is read once at its
 * stored size — 34 bytes per 32 values, about half of f16's — and never written out
 * widened. q8_0_dot_rows_q8 is the integer form: |k| as unsigned bytes times the query's
 * values with k's sign (vpmaddubsw, exact: 2·127² fits in int16), pairs summed in int32
 * (vpmaddwd), one float multiply-add per block. */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "kernels/dispatch.h"
#include "kernels/linear.h"
#include "kernels/x86/avx2_common.h"

AK_ALWAYS_INLINE __m256 ak__q8_widen8(const int8_t *p) {
    __m128i b = _mm_loadl_epi64((const __m128i *)(const void *)p);
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b));
}

AK_ALWAYS_INLINE float ak__q8_scale(const ak__block_q8_0 *b) {
    uint16_t h;
    memcpy(&h, &b->d, sizeof h);
    return _cvtsh_ss(h);
}

AK_ALWAYS_INLINE float ak__q8_hsum(__m256 a) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

void ak_q8_0_dot_rows__avx2(float *out, const float *q, const void *rows, size_t n,
                            size_t dim, float scale) {
    size_t nb = dim / AK__QK;
    const ak__block_q8_0 *r = rows;
    for (size_t j = 0; j < n; j++, r += nb) {
        __m256 acc = _mm256_setzero_ps();
        for (size_t b = 0; b < nb; b++) {
            const float *qb = q + b * AK__QK;
            const int8_t *k = r[b].qs;
            __m256 s0 = _mm256_mul_ps(_mm256_loadu_ps(qb), ak__q8_widen8(k));
            __m256 s1 = _mm256_mul_ps(_mm256_loadu_ps(qb + 8), ak__q8_widen8(k + 8));
            s0 = _mm256_fmadd_ps(_mm256_loadu_ps(qb + 16), ak__q8_widen8(k + 16), s0);
            s1 = _mm256_fmadd_ps(_mm256_loadu_ps(qb + 24), ak__q8_widen8(k + 24), s1);
            acc = _mm256_fmadd_ps(_mm256_add_ps(s0, s1), _mm256_set1_ps(ak__q8_scale(&r[b])), acc);
        }
        out[j] = ak__q8_hsum(acc) * scale;
    }
}

void ak_q8_0_dot_rows_q8__avx2(float *out, const float *qd, const int8_t *qq, const void *rows,
                               size_t n, size_t dim, float scale) {
    size_t nb = dim / AK__QK;
    const ak__block_q8_0 *r = rows;
    const __m256i ones = _mm256_set1_epi16(1);
    for (size_t j = 0; j < n; j++, r += nb) {
        __m256 acc = _mm256_setzero_ps();
        for (size_t b = 0; b < nb; b++) {
            __m256i k = _mm256_loadu_si256((const __m256i *)(const void *)r[b].qs);
            __m256i x = _mm256_loadu_si256((const __m256i *)(const void *)(qq + b * AK__QK));
            __m256i pairs = _mm256_maddubs_epi16(_mm256_abs_epi8(k), _mm256_sign_epi8(x, k));
            __m256 dot = _mm256_cvtepi32_ps(_mm256_madd_epi16(pairs, ones));
            acc = _mm256_fmadd_ps(dot, _mm256_set1_ps(qd[b] * ak__q8_scale(&r[b])), acc);
        }
        out[j] = ak__q8_hsum(acc) * scale;
    }
}

void ak_q8_0_madd_rows__avx2(float *o, const float *p, const void *rows, size_t n, size_t dim) {
    size_t nb = dim / AK__QK;
    const ak__block_q8_0 *r0 = rows;
    for (size_t b = 0; b < nb; b++) {
        float *ob = o + b * AK__QK;
        __m256 a0 = _mm256_loadu_ps(ob), a1 = _mm256_loadu_ps(ob + 8);
        __m256 a2 = _mm256_loadu_ps(ob + 16), a3 = _mm256_loadu_ps(ob + 24);
        for (size_t j = 0; j < n; j++) {
            const ak__block_q8_0 *blk = r0 + j * nb + b;
            __m256 w = _mm256_set1_ps(p[j] * ak__q8_scale(blk));
            a0 = _mm256_fmadd_ps(w, ak__q8_widen8(blk->qs), a0);
            a1 = _mm256_fmadd_ps(w, ak__q8_widen8(blk->qs + 8), a1);
            a2 = _mm256_fmadd_ps(w, ak__q8_widen8(blk->qs + 16), a2);
            a3 = _mm256_fmadd_ps(w, ak__q8_widen8(blk->qs + 24), a3);
        }
        _mm256_storeu_ps(ob, a0);
        _mm256_storeu_ps(ob + 8, a1);
        _mm256_storeu_ps(ob + 16, a2);
        _mm256_storeu_ps(ob + 24, a3);
    }
}
