/* Measured streaming read bandwidth (all threads of a pool reading disjoint slices of a
 * buffer far larger than the caches): the bound of bandwidth-limited kernels such as
 * single-stream LLM decoding, which must read every weight once per token. */
#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

#include "accelkit/kernels.h"
#include "core/check.h"

typedef struct read_ctx {
    uint64_t (*read)(const uint64_t *, size_t);
    const uint64_t *buf;
    size_t words;
    uint64_t sink[64];
} read_ctx;

static uint64_t read_words(const uint64_t *p, size_t n) {
    uint64_t a = 0, b = 0, c = 0, d = 0;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        a += p[i];
        b += p[i + 1];
        c += p[i + 2];
        d += p[i + 3];
    }
    for (; i < n; ++i) a += p[i];
    return a ^ b ^ c ^ d;
}

/* 256-bit loads, four independent accumulators: the widest reads every x86-64 CPU with
 * AVX2 issues, so the loop is bound by memory, not by instructions. */
__attribute__((target("avx2"))) static uint64_t read_words_avx2(const uint64_t *p, size_t n) {
    __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a = _mm256_xor_si256(a, _mm256_loadu_si256((const __m256i *)(p + i)));
        b = _mm256_xor_si256(b, _mm256_loadu_si256((const __m256i *)(p + i + 4)));
        c = _mm256_xor_si256(c, _mm256_loadu_si256((const __m256i *)(p + i + 8)));
        d = _mm256_xor_si256(d, _mm256_loadu_si256((const __m256i *)(p + i + 12)));
    }
    a = _mm256_xor_si256(_mm256_xor_si256(a, b), _mm256_xor_si256(c, d));
    uint64_t lanes[4];
    _mm256_storeu_si256((__m256i *)lanes, a);
    return lanes[0] ^ lanes[1] ^ lanes[2] ^ lanes[3] ^ read_words(p + i, n - i);
}

static void read_slice(void *ctx, size_t begin, size_t end, int thread_index) {
    read_ctx *c = ctx;
    size_t chunk = c->words / 256;
    for (size_t s = begin; s < end; ++s)
        c->sink[thread_index & 63] += c->read(c->buf + s * chunk, chunk);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

ak_status ak_measure_read_bandwidth(size_t bytes, ak_threadpool *pool, double *gbytes_per_s) {
    AK_ARG_CHECK(gbytes_per_s != NULL, "ak_measure_read_bandwidth: NULL output");
    AK_ARG_CHECK(bytes >= (1u << 20), "ak_measure_read_bandwidth: %zu bytes < 1 MiB", bytes);
    if (!pool) AK_CHECK(ak_threadpool_global(&pool));
    ak_cpu_info cpu;
    AK_CHECK(ak_cpu_get_info(&cpu));
    size_t words = bytes / sizeof(uint64_t) / 256 * 256;
    uint64_t *buf = malloc(words * sizeof *buf);
    if (!buf) return AK_FAIL(AK_ERR_NO_MEMORY, "ak_measure_read_bandwidth: %zu bytes", bytes);
    for (size_t i = 0; i < words; ++i) buf[i] = i; /* touch every page */
    read_ctx c = {cpu.active_isa >= AK_ISA_AVX2 ? read_words_avx2 : read_words, buf, words, {0}};
    double rates[7];
    for (int r = 0; r < 7; ++r) {
        uint64_t t0 = ak_now_ns();
        ak_threadpool_parallel_for(pool, 256, 8, read_slice, &c);
        rates[r] = (double)(words * sizeof *buf) / (double)(ak_now_ns() - t0);
    }
    free(buf);
    qsort(rates, 7, sizeof rates[0], cmp_double);
    *gbytes_per_s = rates[3];
    return AK_OK;
}
