/* SGEMM peers for `ak bench kernels`: OpenBLAS and BLIS, each timed in a child process of
 * its own (`ak bench kernels --peer-child NAME ...`) that loads the library with dlopen.
 * A child per batch keeps every library on a clean machine: an in-process peer leaves
 * worker threads that spin or sched_yield after each call and take cores from whatever
 * is timed next. No build-time dependency on either library. */
#ifndef AK_CLI_BENCH_PEERS_H
#define AK_CLI_BENCH_PEERS_H

#include <stddef.h>

enum { PEER_OPENBLAS, PEER_BLIS, PEER_COUNT };

/* "openblas", "blis" (command line) and "OpenBLAS", "BLIS" (display). */
extern const char *const bench_peer_ids[PEER_COUNT];
extern const char *const bench_peer_names[PEER_COUNT];

typedef struct peer_batch {
    double gflops;
    double max_rel_diff; /* vs ak_sgemm on the same inputs; < 0 when not checked */
    char version[32];    /* the library's own version string ("0.3.21"), "unknown" if none */
} peer_batch;

/* Parent side: runs one warm-up and one timed batch of `reps` calls of peer `p` on an
 * M×N×K problem (inputs from bench_fill_random) in a child process, which uses as many
 * threads as the parent (AK_NUM_THREADS). Returns 0 on success, 1 when the library is
 * not installed, -1 on error. */
int bench_peer_batch(int p, const size_t shape[3], int reps, int check, peer_batch *out);

/* Child side: the body of `ak bench kernels --peer-child`. Prints "ok GFLOPS DIFF VERSION" or
 * "missing" on stdout. */
int bench_peer_child(const char *peer_id, const size_t shape[3], int reps, int threads,
                     int check);

/* Inputs both sides generate identically, so results can be compared. */
void bench_fill_random(float *x, size_t n, unsigned seed);
/* Normwise max |x - y| / max |y|. */
double bench_max_rel_diff(const float *x, const float *y, size_t n);

#endif /* AK_CLI_BENCH_PEERS_H */
