/* SGEMM peer harness: the GFLOP/s of a CBLAS library (OpenBLAS or BLIS) on row-major
 * C = A·B, measured outside accelkit. bench/kernels/vs_peers.sh builds it once per library:
 *   gcc -O2 blas_sgemm.c -o peer_sgemm_openblas -I/usr/include/x86_64-linux-gnu/openblas-pthread -lopenblas
 *   gcc -O2 blas_sgemm.c -o peer_sgemm_blis -I/usr/include/blis -lblis
 * and runs `peer_sgemm_LIB M N K [M N K ...]` (threads: OPENBLAS_NUM_THREADS,
 * BLIS_NUM_THREADS). Per shape: one untimed call, then 5 batches of as many calls as make
 * about 2 GFLOP; the fastest batch gives the time per call. One line per shape:
 * "M=.. N=.. K=..  X GFLOP/s". */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static float *random_matrix(long n) {
    float *m = malloc((size_t)n * sizeof *m);
    if (!m) return NULL;
    for (long i = 0; i < n; i++) m[i] = (float)rand() / (float)RAND_MAX - 0.5f;
    return m;
}

static void gemm(int M, int N, int K, const float *A, const float *B, float *C) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, A, K, B, N, 0.0f, C, N);
}

/* The best time per call over 5 batches; 0 when the matrices do not fit in memory. */
static double best_seconds(int M, int N, int K) {
    float *A = random_matrix((long)M * K), *B = random_matrix((long)K * N);
    float *C = malloc((size_t)M * (size_t)N * sizeof *C);
    double best = 0;
    if (A && B && C) {
        int calls = (int)(2e9 / (2.0 * M * N * K)) + 1;
        gemm(M, N, K, A, B, C); /* warm-up: threads started, pages touched */
        for (int batch = 0; batch < 5; batch++) {
            double t0 = seconds();
            for (int i = 0; i < calls; i++) gemm(M, N, K, A, B, C);
            double per_call = (seconds() - t0) / calls;
            if (best == 0 || per_call < best) best = per_call;
        }
    }
    free(A);
    free(B);
    free(C);
    return best;
}

int main(int argc, char **argv) {
    if (argc < 4 || (argc - 1) % 3 != 0) {
        fprintf(stderr, "usage: %s M N K [M N K ...]\n", argv[0]);
        return 2;
    }
    for (int a = 1; a + 2 < argc; a += 3) {
        int M = atoi(argv[a]), N = atoi(argv[a + 1]), K = atoi(argv[a + 2]);
        if (M <= 0 || N <= 0 || K <= 0) {
            fprintf(stderr, "%s: bad shape %s %s %s\n", argv[0], argv[a], argv[a + 1], argv[a + 2]);
            return 2;
        }
        double t = best_seconds(M, N, K);
        if (t <= 0) {
            fprintf(stderr, "%s: out of memory for %dx%dx%d\n", argv[0], M, N, K);
            return 1;
        }
        printf("M=%d N=%d K=%d  %.1f GFLOP/s\n", M, N, K, 2.0 * M * N * K / t / 1e9);
    }
    return 0;
}
