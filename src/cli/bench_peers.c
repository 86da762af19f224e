/* SGEMM peers (OpenBLAS, BLIS) timed in child processes for same-run comparisons. */
#include "cli/bench_peers.h"

#include <dlfcn.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "accelkit/kernels.h"
#include "cli/cli.h"

extern char **environ;

enum { CBLAS_ROW_MAJOR = 101, CBLAS_NO_TRANS = 111 };

typedef void (*cblas_sgemm_fn)(int order, int trans_a, int trans_b, int M, int N, int K,
                               float alpha, const float *A, int lda, const float *B, int ldb,
                               float beta, float *C, int ldc);

const char *const bench_peer_ids[PEER_COUNT] = {"openblas", "blis"};
const char *const bench_peer_names[PEER_COUNT] = {"OpenBLAS", "BLIS"};

static const char *const peer_libs[PEER_COUNT][3] = {
    {"libopenblas.so.0", "libopenblas.so", NULL},
    {"libblis.so.4", "libblis.so", NULL},
};
static const char *const peer_set_threads[PEER_COUNT] = {"openblas_set_num_threads",
                                                         "bli_thread_set_num_threads"};

void bench_fill_random(float *x, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = (float)(seed >> 8) / 16777216.0f - 0.5f;
    }
}

double bench_max_rel_diff(const float *x, const float *y, size_t n) {
    double worst = 0, scale = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)x[i] - y[i]);
        if (d > worst || isnan(d)) worst = isnan(d) ? INFINITY : d;
        if (fabs((double)y[i]) > scale) scale = fabs((double)y[i]);
    }
    return scale > 0 ? worst / scale : worst;
}

/* ---- child ------------------------------------------------------------------------ */

static void *dlsym_fn(void *handle, const char *name) { return handle ? dlsym(handle, name) : NULL; }

/* The loaded library's version for the results' envelope: OpenBLAS says "OpenBLAS 0.3.21
 * NO_AFFINITY ..." (the second word), BLIS "0.9.0". */
static void peer_version(int p, void *handle, char *out, size_t cap) {
    const char *(*get)(void) = NULL;
    void *sym = dlsym_fn(handle, p == PEER_OPENBLAS ? "openblas_get_config" : "bli_info_get_version_str");
    memcpy(&get, &sym, sizeof sym);
    const char *text = get ? get() : NULL;
    if (text && p == PEER_OPENBLAS && strchr(text, ' ')) text = strchr(text, ' ') + 1;
    snprintf(out, cap, "%s", text && *text ? text : "unknown");
    out[strcspn(out, " \t\n")] = '\0';
}

static cblas_sgemm_fn load_peer(int p, int threads, char *version, size_t cap) {
    char num[16];
    snprintf(num, sizeof num, "%d", threads);
    setenv("OPENBLAS_NUM_THREADS", num, 1); /* read by the libraries' constructors */
    setenv("BLIS_NUM_THREADS", num, 1);
    void *handle = NULL;
    for (int i = 0; peer_libs[p][i] && !handle; i++)
        handle = dlopen(peer_libs[p][i], RTLD_NOW | RTLD_LOCAL);
    /* memcpy: ISO C has no cast from dlsym's object pointer to a function pointer */
    cblas_sgemm_fn sgemm = NULL;
    void (*set_threads)(int) = NULL;
    void *sym = dlsym_fn(handle, "cblas_sgemm");
    memcpy(&sgemm, &sym, sizeof sym);
    sym = dlsym_fn(handle, peer_set_threads[p]);
    memcpy(&set_threads, &sym, sizeof sym);
    if (set_threads) set_threads(threads);
    peer_version(p, handle, version, cap);
    return sgemm;
}

int bench_peer_child(const char *peer_id, const size_t s[3], int reps, int threads, int check) {
    int p = 0;
    while (p < PEER_COUNT && strcmp(bench_peer_ids[p], peer_id) != 0) p++;
    char version[32] = "unknown";
    cblas_sgemm_fn sgemm = p < PEER_COUNT ? load_peer(p, threads, version, sizeof version) : NULL;
    if (!sgemm) {
        printf("missing\n");
        return AK_EXIT_OK;
    }
    size_t M = s[0], N = s[1], K = s[2];
    float *A = malloc(M * K * 4), *B = malloc(K * N * 4), *C = malloc(M * N * 4),
          *Cak = malloc(M * N * 4);
    if (!A || !B || !C || !Cak) return AK_EXIT_ERROR;
    bench_fill_random(A, M * K, 1);
    bench_fill_random(B, K * N, 2);
#define PEER_CALL() sgemm(CBLAS_ROW_MAJOR, CBLAS_NO_TRANS, CBLAS_NO_TRANS, (int)M, (int)N, (int)K, \
                          1.0f, A, (int)K, B, (int)N, 0.0f, C, (int)N)
    PEER_CALL(); /* warm-up: the library's threads, buffers and page faults */
    uint64_t t0 = ak_now_ns();
    for (int r = 0; r < reps; r++) PEER_CALL();
    double gflops = 2.0 * (double)M * N * K * reps / (double)(ak_now_ns() - t0);
#undef PEER_CALL
    double diff = -1;
    if (check &&
        ak_sgemm(AK_NO_TRANS, AK_NO_TRANS, M, N, K, 1.0f, A, K, B, N, 0.0f, Cak, N, NULL) == AK_OK)
        diff = bench_max_rel_diff(Cak, C, M * N);
    printf("ok %.6f %.6e %s\n", gflops, diff, version);
    free(A), free(B), free(C), free(Cak);
    return AK_EXIT_OK;
}

/* ---- parent ------------------------------------------------------------------------ */

static int read_all(int fd, char *buf, size_t cap) {
    size_t len = 0;
    ssize_t got;
    while (len + 1 < cap && (got = read(fd, buf + len, cap - 1 - len)) > 0) len += (size_t)got;
    buf[len] = '\0';
    return (int)len;
}

int bench_peer_batch(int p, const size_t s[3], int reps, int check, peer_batch *out) {
    char exe[4096], shape[96], reps_text[24];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return -1;
    exe[n] = '\0';
    snprintf(shape, sizeof shape, "%zux%zux%zu", s[0], s[1], s[2]);
    snprintf(reps_text, sizeof reps_text, "%d", reps);
    char *argv[] = {exe, "bench", "kernels", "--peer-child", (char *)bench_peer_ids[p],
                    "--gemm", shape, "--reps", reps_text, check ? "--check" : NULL, NULL};
    int fds[2];
    if (pipe(fds) != 0) return -1;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&actions, fds[0]);
    pid_t pid;
    int rc = posix_spawn(&pid, exe, &actions, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    close(fds[1]);
    char line[256] = "";
    if (rc == 0) read_all(fds[0], line, sizeof line);
    close(fds[0]);
    int status = 0;
    if (rc != 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status))
        return -1;
    if (strncmp(line, "missing", 7) == 0) return 1;
    return sscanf(line, "ok %lf %lf %31s", &out->gflops, &out->max_rel_diff, out->version) == 3 ? 0 : -1;
}
