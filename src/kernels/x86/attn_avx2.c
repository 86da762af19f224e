/* AVX2 + FMA + F16C attention kernels over f16 rows (see dispatch.h): the f16 keys and
 * values are widened in registers (vcvtph2ps) inside the dot products instead of into a
 * buffer first. For a decode token the buffer cost as much as the arithmetic: each
 * widened row was used once, so it was stored, reloaded and evicted for nothing.
 *
 * dot_rows: four rows at a time, each with its own accumulator, sharing the loads of q;
 * the four sums are reduced together. madd_rows: 32 outputs held in registers across all
 * rows. Dimensions that are not a multiple of 8 finish with scalar tails. */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "kernels/dispatch.h"
#include "kernels/x86/avx2_common.h"

AK_ALWAYS_INLINE __m256 ak__h8(const uint16_t *p) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p));
}

AK_ALWAYS_INLINE float ak__h1(const uint16_t *p) {
    uint16_t h;
    memcpy(&h, p, sizeof h);
    return _cvtsh_ss(h);
}

/* {Σa, Σb, Σc, Σd} */
AK_ALWAYS_INLINE __m128 ak__hsum4(__m256 a, __m256 b, __m256 c, __m256 d) {
    __m256 s = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
    return _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
}

AK_ALWAYS_INLINE float ak__hsum1(__m256 a) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

static float dot_tail(const float *q, const uint16_t *r, size_t d, size_t dim) {
    float s = 0.0f;
    for (; d < dim; d++) s += q[d] * ak__h1(r + d);
    return s;
}

void ak_f16_dot_rows__avx2(float *out, const float *q, const uint16_t *rows, size_t n,
                                  size_t dim, float scale) {
    size_t d8 = dim / 8 * 8, j = 0;
    for (; j + 4 <= n; j += 4) {
        const uint16_t *r0 = rows + j * dim, *r1 = r0 + dim, *r2 = r1 + dim, *r3 = r2 + dim;
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (size_t d = 0; d < d8; d += 8) {
            __m256 qv = _mm256_loadu_ps(q + d);
            a0 = _mm256_fmadd_ps(qv, ak__h8(r0 + d), a0);
            a1 = _mm256_fmadd_ps(qv, ak__h8(r1 + d), a1);
            a2 = _mm256_fmadd_ps(qv, ak__h8(r2 + d), a2);
            a3 = _mm256_fmadd_ps(qv, ak__h8(r3 + d), a3);
        }
        __m128 s = ak__hsum4(a0, a1, a2, a3);
        if (d8 < dim)
            s = _mm_add_ps(s, _mm_setr_ps(dot_tail(q, r0, d8, dim), dot_tail(q, r1, d8, dim),
                                          dot_tail(q, r2, d8, dim), dot_tail(q, r3, d8, dim)));
        _mm_storeu_ps(out + j, _mm_mul_ps(s, _mm_set1_ps(scale)));
    }
    for (; j < n; j++) {
        const uint16_t *r = rows + j * dim;
        __m256 a = _mm256_setzero_ps();
        for (size_t d = 0; d < d8; d += 8) a = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), ak__h8(r + d), a);
        out[j] = (ak__hsum1(a) + dot_tail(q, r, d8, dim)) * scale;
    }
}

void ak_f16_madd_rows__avx2(float *o, const float *p, const uint16_t *rows, size_t n,
                                   size_t dim) {
    size_t d = 0;
    for (; d + 32 <= dim; d += 32) {
        __m256 a0 = _mm256_loadu_ps(o + d), a1 = _mm256_loadu_ps(o + d + 8);
        __m256 a2 = _mm256_loadu_ps(o + d + 16), a3 = _mm256_loadu_ps(o + d + 24);
        for (size_t j = 0; j < n; j++) {
            const uint16_t *r = rows + j * dim + d;
            __m256 pj = _mm256_set1_ps(p[j]);
            a0 = _mm256_fmadd_ps(pj, ak__h8(r), a0);
            a1 = _mm256_fmadd_ps(pj, ak__h8(r + 8), a1);
            a2 = _mm256_fmadd_ps(pj, ak__h8(r + 16), a2);
            a3 = _mm256_fmadd_ps(pj, ak__h8(r + 24), a3);
        }
        _mm256_storeu_ps(o + d, a0);
        _mm256_storeu_ps(o + d + 8, a1);
        _mm256_storeu_ps(o + d + 16, a2);
        _mm256_storeu_ps(o + d + 24, a3);
    }
    for (; d + 8 <= dim; d += 8) {
        __m256 a = _mm256_loadu_ps(o + d);
        for (size_t j = 0; j < n; j++)
            a = _mm256_fmadd_ps(_mm256_set1_ps(p[j]), ak__h8(rows + j * dim + d), a);
        _mm256_storeu_ps(o + d, a);
    }
    for (; d < dim; d++) {
        float a = o[d];
        for (size_t j = 0; j < n; j++) a += p[j] * ak__h1(rows + j * dim + d);
        o[d] = a;
    }
}

