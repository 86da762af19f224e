/* AVX2 memory probe (kernels.def: u64_read_sum): the halves of the buffer read side by
 * side with 256-bit loads into four independent chains of integer adds, so only memory
 * limits it (one stream measured 5-20 % below the two a GEMV's rows make). The sum wraps
 * like the reference's, so both give the same number. */
#include <immintrin.h>

#include "kernels/dispatch.h"

uint64_t ak_u64_read_sum__avx2(const uint64_t *p, size_t n) {
    const __m256i *lo = (const __m256i *)(const void *)p;
    const __m256i *hi = (const __m256i *)(const void *)(p + n / 2);
    __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
    for (size_t i = 0; i < n / 8; i += 2) { /* n/8 vectors of 4 words in each half */
        a = _mm256_add_epi64(a, _mm256_loadu_si256(lo + i));
        b = _mm256_add_epi64(b, _mm256_loadu_si256(lo + i + 1));
        c = _mm256_add_epi64(c, _mm256_loadu_si256(hi + i));
        d = _mm256_add_epi64(d, _mm256_loadu_si256(hi + i + 1));
    }
    a = _mm256_add_epi64(_mm256_add_epi64(a, b), _mm256_add_epi64(c, d));
    uint64_t lanes[4];
    _mm256_storeu_si256((__m256i *)(void *)lanes, a);
    return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}
