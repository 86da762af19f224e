/* AVX2 kernels of the super-block weight types (kernels/x86/kquant_x86.h with maddubs +
 * madd), and the Q8_K activation quantizer. */
#define KQ_VNNI 0
#define KQ_ISA avx2
#include "kernels/x86/kquant_x86.h"

/* ggml's quantize_row_q8_K, bit for bit: cvtps rounds iscale·x to nearest even as
 * ggml's nearest_int does; a block with a non-finite value takes the scalar path (its
 * NaN products convert differently). */
void ak_f32_quantize_q8_k__avx2(const float *x, size_t K, float *d, int16_t *bsums, int8_t *q) {
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    for (size_t i = 0; i < K / AK__QK_K; i++) {
        const float *xb = x + i * AK__QK_K;
        __m256 vmax = _mm256_setzero_ps(), nan = _mm256_setzero_ps();
        for (int k = 0; k < AK__QK_K; k += 8) {
            __m256 v = _mm256_loadu_ps(xb + k);
            vmax = _mm256_max_ps(_mm256_and_ps(v, absmask), vmax);
            nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        }
        float amax = 0, lanes[8];
        _mm256_storeu_ps(lanes, vmax);
        for (int l = 0; l < 8; l++) amax = lanes[l] > amax ? lanes[l] : amax;
        if (!(amax < __builtin_inff()) || amax == 0 || _mm256_movemask_ps(nan)) {
            ak_f32_quantize_q8_k__ref(xb, AK__QK_K, d + i, bsums + 16 * i, q + i * AK__QK_K);
            continue;
        }
        float max = 0;
        for (int k = 0; k < AK__QK_K; k++)
            if (__builtin_fabsf(xb[k]) == amax) {
                max = xb[k];
                break;
            }
        float iscale = -127.f / max;
        const __m256 vs = _mm256_set1_ps(iscale);
        const __m256i top = _mm256_set1_epi32(127);
        int8_t *qb = q + i * AK__QK_K;
        for (int k = 0; k < AK__QK_K; k += 32) {
            __m256i v[4];
            for (int u = 0; u < 4; u++)
                v[u] = _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(vs, _mm256_loadu_ps(xb + k + 8 * u))), top);
            __m256i p16 = _mm256_packs_epi32(v[0], v[1]), p16b = _mm256_packs_epi32(v[2], v[3]);
            __m256i p8 = _mm256_packs_epi16(p16, p16b);
            p8 = _mm256_permutevar8x32_epi32(p8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
            _mm256_storeu_si256((__m256i *)(void *)(qb + k), p8);
        }
        for (int g = 0; g < 16; g++) {
            int s = 0;
            for (int l = 0; l < 16; l++) s += qb[16 * g + l];
            bsums[16 * i + g] = (int16_t)s;
        }
        d[i] = 1 / iscale;
    }
}
