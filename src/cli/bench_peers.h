/* SGEMM peers for `ak bench kernels`: OpenBLAS and BLIS loaded at run time with dlopen,
 * so the benchmark measures them in the same run without a build-time dependency. */
#ifndef AK_CLI_BENCH_PEERS_H
#define AK_CLI_BENCH_PEERS_H

#include <stddef.h>

typedef void (*cblas_sgemm_fn)(int order, int trans_a, int trans_b, int M, int N, int K,
                               float alpha, const float *A, int lda, const float *B, int ldb,
                               float beta, float *C, int ldc);

typedef struct sgemm_peer {
    const char *name;
    void *handle;
    cblas_sgemm_fn sgemm; /* NULL when the library is not installed */
} sgemm_peer;

enum { PEER_OPENBLAS, PEER_BLIS, PEER_COUNT };

/* Loads the peers that are installed and sets their thread count. */
void bench_peers_load(sgemm_peer peers[PEER_COUNT], int threads);
void bench_peers_unload(sgemm_peer peers[PEER_COUNT]);
/* Row-major, no transposes, C = A·B. */
void bench_peer_sgemm(const sgemm_peer *peer, size_t M, size_t N, size_t K, const float *A,
                      const float *B, float *C);

#endif /* AK_CLI_BENCH_PEERS_H */
