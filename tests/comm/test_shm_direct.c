/* Tests of the shared-memory direct allreduce (algo/shm_direct.c) between forked
 * processes that build their communicator with ak_comm_init from AK_RANK / AK_WORLD_SIZE /
 * AK_MASTER_ADDR / AK_MASTER_PORT: 2 and 3 ranks, sum / max / prod on f32, bf16 and i32
 * for counts {1, 7, 4099, 3M+1} (both paths, several chunks, in place and out of place),
 * checked element by element against the exact result; a count mismatch; a peer killed
 * between calls (AK_ERR_REMOTE within about a second); and no segment left in /dev/shm. */
#include <dirent.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "accelkit/comm.h"
#include "comm/comm_internal.h"

#define MAX_RANKS 3
#define BIG_COUNT (3u * 1024 * 1024 + 1)

enum { CHILD_OK = 0, CHILD_INIT = 2, CHILD_WRONG = 3, CHILD_NOT_DIRECT = 4, CHILD_STATUS = 10 };

/* ---- helpers ------------------------------------------------------------------------ */

/* A port nobody listens on now (bound and released: the store binds it right after). */
static int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    int port = 0;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0) close(fd);
    return port;
}

/* Input of rank r at i: a small integer, so sums, products and maxima are exact in every
 * dtype here (bf16 holds integers up to 256 exactly). */
static int input(int op, int r, size_t i) {
    static const int factors[4] = {-2, -1, 1, 2}; /* products of 3 stay within ±8 */
    if (op == AK_REDUCE_PROD) return factors[(i * 5 + (size_t)r * 3 + (i >> 9)) % 4];
    return (int)((i * 7 + (size_t)r * 3 + (i >> 9)) % 11) - 5;
}

static int expected(int op, int size, size_t i) {
    int v = input(op, 0, i);
    for (int r = 1; r < size; r++) {
        int x = input(op, r, i);
        v = op == AK_REDUCE_SUM ? v + x : op == AK_REDUCE_PROD ? v * x : (x > v ? x : v);
    }
    return v;
}

static void put(ak_dtype dt, void *buf, size_t i, int v) {
    if (dt == AK_DTYPE_F32) ((float *)buf)[i] = (float)v;
    else if (dt == AK_DTYPE_I32) ((int32_t *)buf)[i] = v;
    else {
        float f = (float)v;
        ak_f32_to_bf16((uint16_t *)buf + i, &f, 1);
    }
}

static int get(ak_dtype dt, const void *buf, size_t i, int *ok) {
    float f;
    if (dt == AK_DTYPE_I32) return ((const int32_t *)buf)[i];
    if (dt == AK_DTYPE_F32) f = ((const float *)buf)[i];
    else ak_bf16_to_f32(&f, (const uint16_t *)buf + i, 1);
    *ok = f == (float)(int)f;
    return (int)f;
}

/* ---- one rank (a forked child) --------------------------------------------------------- */

static void set_env(int rank, int size, int port, int timeout_ms) {
    char v[32];
    snprintf(v, sizeof v, "%d", rank);
    setenv("AK_RANK", v, 1);
    snprintf(v, sizeof v, "%d", size);
    setenv("AK_WORLD_SIZE", v, 1);
    snprintf(v, sizeof v, "%d", port);
    setenv("AK_MASTER_PORT", v, 1);
    snprintf(v, sizeof v, "%d", timeout_ms);
    setenv("AK_COMM_TIMEOUT", v, 1);
    setenv("AK_MASTER_ADDR", "127.0.0.1", 1);
    unsetenv("AK_COMM_ALGO");
    unsetenv("AK_COMM_TRANSPORT");
}

/* One allreduce, checked element by element; in place when `in_place`. */
static int check_one(ak_comm *c, int rank, int size, ak_dtype dt, int op, size_t count,
                     int in_place, void *send, void *recv) {
    for (size_t i = 0; i < count; i++) put(dt, send, i, input(op, rank, i));
    void *out = in_place ? send : recv;
    ak_status st = ak_comm_allreduce(c, in_place ? AK_IN_PLACE : send, out, count, dt,
                                     (ak_reduce_op)op);
    if (st != AK_OK) {
        fprintf(stderr, "rank %d: allreduce: %s\n", rank, ak_last_error());
        return CHILD_STATUS + (int)st;
    }
    if (!c->shm_direct) return CHILD_NOT_DIRECT;
    for (size_t i = 0; i < count; i++) {
        int ok = 1, v = get(dt, out, i, &ok);
        if (!ok || v != expected(op, size, i)) {
            fprintf(stderr, "rank %d: %s %s count %zu: [%zu] = %d, expected %d\n", rank,
                    ak_dtype_name(dt), ak_reduce_op_name((ak_reduce_op)op), count, i, v,
                    expected(op, size, i));
            return CHILD_WRONG;
        }
    }
    return CHILD_OK;
}

static const ak_dtype dtypes[] = {AK_DTYPE_F32, AK_DTYPE_BF16, AK_DTYPE_I32};
static const int ops[] = {AK_REDUCE_SUM, AK_REDUCE_MAX, AK_REDUCE_PROD};
static const size_t counts[] = {1, 7, 4099, BIG_COUNT};

static int sweep(ak_comm *c, int rank, int size) {
    void *send = malloc(BIG_COUNT * 4), *recv = malloc(BIG_COUNT * 4);
    int rc = send && recv ? CHILD_OK : CHILD_INIT, n = 0;
    for (size_t d = 0; d < 3 && rc == CHILD_OK; d++)
        for (size_t o = 0; o < 3 && rc == CHILD_OK; o++)
            for (size_t k = 0; k < 4 && rc == CHILD_OK; k++)
                rc = check_one(c, rank, size, dtypes[d], ops[o], counts[k], n++ % 2, send, recv);
    free(send);
    free(recv);
    return rc;
}

/* mode 0: the sweep; 1: rank 1 allreduces a different count; 2: rank 1 dies after one
 * call and rank 0's next call must fail with AK_ERR_REMOTE within 1.5 s */
static int child(int rank, int size, int port, int mode) {
    set_env(rank, size, port, mode == 2 ? 20000 : 30000);
    ak_comm *c = NULL;
    if (ak_comm_init(NULL, &c) != AK_OK) {
        fprintf(stderr, "rank %d: init: %s\n", rank, ak_last_error());
        return CHILD_INIT;
    }
    int rc = CHILD_OK;
    if (mode == 0) rc = sweep(c, rank, size);
    float buf[1024] = {0};
    if (mode == 1) {
        ak_status st = ak_comm_allreduce(c, AK_IN_PLACE, buf, rank ? 512 : 1024, AK_DTYPE_F32,
                                         AK_REDUCE_SUM);
        rc = CHILD_STATUS + (int)st;
    }
    if (mode == 2) {
        ak_status st = ak_comm_allreduce(c, AK_IN_PLACE, buf, 1024, AK_DTYPE_F32, AK_REDUCE_SUM);
        if (rank == 1 && st == AK_OK) raise(SIGKILL);
        uint64_t t0 = ak_now_ns();
        if (st == AK_OK)
            st = ak_comm_allreduce(c, AK_IN_PLACE, buf, 1024, AK_DTYPE_F32, AK_REDUCE_SUM);
        double ms = (double)(ak_now_ns() - t0) / 1e6;
        fprintf(stderr, "rank %d: after the kill: %s in %.0f ms: %s\n", rank, ak_status_str(st),
                ms, ak_last_error());
        rc = st == AK_ERR_REMOTE && ms < 1500 ? CHILD_OK : CHILD_STATUS + (int)st;
    }
    ak_comm_free(c);
    return rc;
}

/* ---- the parent ---------------------------------------------------------------------- */

/* Segments named by process pid still in /dev/shm. */
static int leftovers(pid_t pid) {
    char prefix[64];
    snprintf(prefix, sizeof prefix, "accelkit-sd-%d-", (int)pid);
    DIR *d = opendir("/dev/shm");
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) {
            fprintf(stderr, "leftover /dev/shm/%s\n", e->d_name);
            n++;
        }
    if (d) closedir(d);
    return n;
}

/* Forks `size` ranks running `mode`; fills each rank's exit code (or 128 + signal). */
static void run_world(int size, int mode, int *codes) {
    int port = free_port();
    assert_true(port > 0);
    fflush(NULL);
    pid_t pids[MAX_RANKS];
    for (int r = 0; r < size; r++) {
        pids[r] = fork();
        assert_true(pids[r] >= 0);
        if (pids[r] == 0) _exit(child(r, size, port, mode));
    }
    for (int r = 0; r < size; r++) {
        int ws = 0;
        assert_int_equal(waitpid(pids[r], &ws, 0), pids[r]);
        codes[r] = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
    }
    for (int r = 0; r < size; r++) assert_int_equal(leftovers(pids[r]), 0);
}

static void test_sweep_2(void **state) {
    (void)state;
    int codes[MAX_RANKS];
    run_world(2, 0, codes);
    for (int r = 0; r < 2; r++) assert_int_equal(codes[r], CHILD_OK);
}

static void test_sweep_3(void **state) {
    (void)state;
    int codes[MAX_RANKS];
    run_world(3, 0, codes);
    for (int r = 0; r < 3; r++) assert_int_equal(codes[r], CHILD_OK);
}

static void test_count_mismatch(void **state) {
    (void)state;
    int codes[MAX_RANKS];
    run_world(2, 1, codes);
    for (int r = 0; r < 2; r++) assert_int_equal(codes[r], CHILD_STATUS + AK_ERR_MISMATCH);
}

static void test_killed_peer(void **state) {
    (void)state;
    int codes[MAX_RANKS];
    run_world(2, 2, codes);
    assert_int_equal(codes[0], CHILD_OK);
    assert_int_equal(codes[1], 128 + SIGKILL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sweep_2),
        cmocka_unit_test(test_sweep_3),
        cmocka_unit_test(test_count_mismatch),
        cmocka_unit_test(test_killed_peer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
