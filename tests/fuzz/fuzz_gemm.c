/* Fuzz: ak_sgemm on every kernel table against the scalar reference for fuzzer-chosen
 * shapes, transposes, leading dimensions, alpha and beta. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/dispatch.h"

static const char *const variants[] = {"generic", "avx2", "avx512"};

typedef struct gemm_args {
    size_t M, N, K, lda, ldb, ldc;
    int ta, tb;
    float alpha, beta;
} gemm_args;

static gemm_args decode(const uint8_t *d) {
    gemm_args g;
    g.M = d[0] % 40 + 1, g.N = d[1] % 70 + 1, g.K = d[2] % 300 + 1;
    g.ta = d[3] & 1, g.tb = (d[3] >> 1) & 1;
    g.lda = (g.ta ? g.M : g.K) + d[4] % 3;
    g.ldb = (g.tb ? g.K : g.N) + d[5] % 3;
    g.ldc = g.N + d[6] % 3;
    static const float scalars[] = {0.0f, 1.0f, -1.0f, 0.5f, 2.0f};
    g.alpha = scalars[(d[3] >> 2) % 5];
    g.beta = scalars[(d[3] >> 5) % 5];
    return g;
}

static void fill(float *x, size_t n, uint32_t seed) {
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = (float)(seed >> 9) / 8388608.0f - 1.0f;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 8 || ak_init() != AK_OK) return 0;
    gemm_args g = decode(data);
    size_t a_rows = g.ta ? g.K : g.M, b_rows = g.tb ? g.N : g.K;
    float *A = malloc(a_rows * g.lda * 4), *B = malloc(b_rows * g.ldb * 4);
    float *C0 = malloc(g.M * g.ldc * 4), *C = malloc(g.M * g.ldc * 4);
    fill(A, a_rows * g.lda, data[7]);
    fill(B, b_rows * g.ldb, data[7] + 1u);
    fill(C0, g.M * g.ldc, data[7] + 2u);
    const ak__kernels *ref = ak__kernels_for("ref");
    float *Cref = malloc(g.M * g.ldc * 4);
    memcpy(Cref, C0, g.M * g.ldc * 4);
    ref->sgemm(g.ta, g.tb, g.M, g.N, g.K, g.alpha, A, g.lda, B, g.ldb, g.beta, Cref, g.ldc, NULL);
    for (size_t v = 0; v < sizeof variants / sizeof *variants; v++) {
        const ak__kernels *k = ak__kernels_for(variants[v]);
        if (!k) continue;
        memcpy(C, C0, g.M * g.ldc * 4);
        k->sgemm(g.ta, g.tb, g.M, g.N, g.K, g.alpha, A, g.lda, B, g.ldb, g.beta, C, g.ldc, NULL);
        for (size_t i = 0; i < g.M; i++)
            for (size_t j = 0; j < g.ldc; j++) {
                float want = Cref[i * g.ldc + j], got = C[i * g.ldc + j];
                /* |A|,|B|,|C| ≤ 1, |alpha|,|beta| ≤ 2: rounding error ≤ ~K·eps·(2K + 2) */
                if (fabsf(want - got) > 2.4e-7f * (float)g.K * (2.0f * (float)g.K + 2.0f)) abort();
            }
    }
    free(A), free(B), free(C0), free(C), free(Cref);
    return 0;
}
