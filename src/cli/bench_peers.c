/* dlopen-based SGEMM peers (OpenBLAS, BLIS) for same-run comparisons. */
#include "cli/bench_peers.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { CBLAS_ROW_MAJOR = 101, CBLAS_NO_TRANS = 111 };

typedef struct peer_spec {
    const char *name;
    const char *const libs[3];
    const char *set_threads; /* symbol taking (int) */
} peer_spec;

static const peer_spec specs[PEER_COUNT] = {
    {"OpenBLAS", {"libopenblas.so.0", "libopenblas.so", NULL}, "openblas_set_num_threads"},
    {"BLIS", {"libblis.so.4", "libblis.so", NULL}, "bli_thread_set_num_threads"},
};

void bench_peers_load(sgemm_peer peers[PEER_COUNT], int threads) {
    char num[16];
    snprintf(num, sizeof num, "%d", threads);
    /* read by the libraries' constructors, before any call */
    setenv("OPENBLAS_NUM_THREADS", num, 1);
    setenv("BLIS_NUM_THREADS", num, 1);
    for (int p = 0; p < PEER_COUNT; p++) {
        peers[p] = (sgemm_peer){specs[p].name, NULL, NULL};
        for (int i = 0; specs[p].libs[i] && !peers[p].handle; i++)
            peers[p].handle = dlopen(specs[p].libs[i], RTLD_NOW | RTLD_LOCAL);
        if (!peers[p].handle) continue;
        /* memcpy: ISO C has no cast from dlsym's object pointer to a function pointer */
        void *sym = dlsym(peers[p].handle, "cblas_sgemm");
        memcpy(&peers[p].sgemm, &sym, sizeof sym);
        void (*set_threads)(int) = NULL;
        sym = dlsym(peers[p].handle, specs[p].set_threads);
        memcpy(&set_threads, &sym, sizeof sym);
        if (set_threads) set_threads(threads);
    }
}

void bench_peers_unload(sgemm_peer peers[PEER_COUNT]) {
    /* Not dlclose'd: OpenBLAS's worker threads may outlive the call and crash on unload. */
    for (int p = 0; p < PEER_COUNT; p++) peers[p].sgemm = NULL;
}

void bench_peer_sgemm(const sgemm_peer *peer, size_t M, size_t N, size_t K, const float *A,
                      const float *B, float *C) {
    peer->sgemm(CBLAS_ROW_MAJOR, CBLAS_NO_TRANS, CBLAS_NO_TRANS, (int)M, (int)N, (int)K, 1.0f, A,
                (int)K, B, (int)N, 0.0f, C, (int)N);
}
