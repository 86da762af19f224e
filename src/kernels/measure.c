/* Measured machine limits: FP32 FMA peak of one core and memcpy bandwidth. These are the
 * denominators of every "% of peak" accelkit reports, so they are measured, not looked up. */
#include <stdlib.h>
#include <string.h>

#include "accelkit/kernels.h"
#include "core/check.h"
#include "kernels/measure.h"

/* Portable fallback: 8 independent scalar multiply-add chains the compiler keeps apart. */
double ak__fma_loop__generic(uint64_t iters) {
    volatile float sink;
    float a[8] = {0}, m = 0.999f, b = 0.001f;
    for (uint64_t i = 0; i < iters; i++)
        for (int j = 0; j < 8; j++) a[j] = a[j] * m + b;
    sink = a[0] + a[7];
    (void)sink;
    return (double)iters * 8.0 * 2.0;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The best flops/ns of `loop` over `millis` ms of ~5 ms batches: peak means the best the
 * core does when nothing else interferes. */
static double best_rate(double (*loop)(uint64_t), int millis) {
    uint64_t iters = 1 << 16;
    for (;;) {
        uint64_t t0 = ak_now_ns();
        loop(iters);
        if (ak_now_ns() - t0 > 5000000 || iters > (1ull << 40)) break;
        iters *= 2;
    }
    double best = 0;
    uint64_t end = ak_now_ns() + (uint64_t)millis * 1000000ull;
    do {
        uint64_t t0 = ak_now_ns();
        double flops = loop(iters);
        double rate = flops / (double)(ak_now_ns() - t0);
        if (rate > best) best = rate;
    } while (ak_now_ns() < end);
    return best;
}

ak_status ak_measure_fma_peak(int millis, double *gflops) {
    AK_ARG_CHECK(gflops, "ak_measure_fma_peak: NULL output");
    AK_ARG_CHECK(millis > 0 && millis <= 60000, "ak_measure_fma_peak: millis %d not in (0, 60000]",
                 millis);
    AK_ENSURE_INIT();
    ak_cpu_info cpu;
    AK_CHECK(ak_cpu_get_info(&cpu));
    /* With AVX-512 both widths are timed, half the time each: Zen 5 and Intel run zmm
     * FMAs at full width (twice the ymm rate, which is what their SGEMM reaches), Zen 4
     * splits them (the same rate), and the peak is the better one. */
    double best = 0;
    if (cpu.active_isa >= AK_ISA_AVX512) {
        int half = millis / 2 > 0 ? millis / 2 : 1;
        double ymm = best_rate(ak__fma_loop__avx2, half), zmm = best_rate(ak__fma_loop__avx512, half);
        best = ymm > zmm ? ymm : zmm;
    } else {
        best = best_rate(cpu.active_isa >= AK_ISA_AVX2 ? ak__fma_loop__avx2 : ak__fma_loop__generic,
                         millis);
    }
    *gflops = best;
    return AK_OK;
}

ak_status ak_measure_memcpy(size_t bytes, double *gbytes_per_s) {
    AK_ARG_CHECK(gbytes_per_s, "ak_measure_memcpy: NULL output");
    AK_ARG_CHECK(bytes >= 4096 && bytes <= ((size_t)1 << 34),
                 "ak_measure_memcpy: %zu bytes not in [4 KiB, 16 GiB]", bytes);
    void *src = NULL, *dst = NULL;
    ak_status st;
    AK_CHECK_GOTO(st, ak_alloc(bytes, &src));
    AK_CHECK_GOTO(st, ak_alloc(bytes, &dst));
    memset(src, 1, bytes);
    memset(dst, 2, bytes); /* fault the pages in before timing */
    enum { REPS = 15 };
    double rates[REPS];
    for (int r = 0; r < REPS; r++) {
        uint64_t t0 = ak_now_ns();
        memcpy(dst, src, bytes);
        rates[r] = 2.0 * (double)bytes / (double)(ak_now_ns() - t0);
    }
    qsort(rates, REPS, sizeof *rates, cmp_double);
    *gbytes_per_s = rates[REPS / 2];
fail:
    ak_free(src);
    ak_free(dst);
    return st;
}
