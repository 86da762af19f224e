/* Tests of the shared-memory transport: W ∈ {2,3,4} ranks as threads sharing an in-memory
 * store (pairwise, ring and many-small-message patterns, byte-exact), tag/length
 * mismatch, stall timeout, a peer that closes, two processes with the peer killed
 * mid-transfer, and no segment left in /dev/shm. */
#include <dirent.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "accelkit/ak.h"
#include "comm/bootstrap/store_impl.h"
#include "comm/transport/transport.h"

#define MAX_W 4
#define MB (1024 * 1024)

static const size_t sizes[] = {0, 1, 7, 4096, MB + 13, 16 * MB};
#define NSIZES (sizeof sizes / sizeof sizes[0])

/* ---- helpers ------------------------------------------------------------------------ */

static unsigned char pattern(int src, int dst, size_t size, size_t i) {
    return (unsigned char)(src * 131 + dst * 31 + size * 7 + i * 13 + (i >> 11));
}

static void fill(unsigned char *b, int src, int dst, size_t size) {
    for (size_t i = 0; i < size; i++) b[i] = pattern(src, dst, size, i);
}

/* Index of the first wrong byte, or size when all match. */
static size_t first_bad(const unsigned char *b, int src, int dst, size_t size) {
    for (size_t i = 0; i < size; i++)
        if (b[i] != pattern(src, dst, size, i)) return i;
    return size;
}

/* Segments of process pid still named in /dev/shm. */
static int leftover_segments(pid_t pid) {
    char prefix[64];
    snprintf(prefix, sizeof prefix, "accelkit-%d-", (int)pid);
    DIR *d = opendir("/dev/shm");
    if (!d) return 0;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) {
            fprintf(stderr, "leftover /dev/shm/%s\n", e->d_name);
            n++;
        }
    closedir(d);
    return n;
}

static ak_status wait_all(ak__transport *t, ak__p2p *ops, int n) {
    ak_status first = AK_OK;
    for (;;) {
        int pending = 0;
        for (int i = 0; i < n; i++) pending += !ops[i].complete;
        if (!pending) break;
        ak_status st = t->vt->progress(t->ctx, 2000);
        if (st != AK_OK && first == AK_OK) first = st;
    }
    for (int i = 0; i < n && first == AK_OK; i++) first = ops[i].status;
    return first;
}

static ak__p2p make_op(int peer, int is_send, void *buf, size_t bytes, uint64_t tag) {
    ak__p2p op;
    memset(&op, 0, sizeof op);
    op.peer = peer;
    op.is_send = is_send;
    op.buf = buf;
    op.bytes = bytes;
    op.tag = tag;
    return op;
}

/* ---- a world of ranks as threads ---------------------------------------------------- */

typedef struct rank_ctx rank_ctx;
typedef int (*rank_body)(rank_ctx *r);

typedef struct world {
    int size, timeout_ms;
    ak__store *store;
    char prefix[64];
    pthread_barrier_t barrier;
    rank_body body;
    _Atomic int errors;
} world;

struct rank_ctx {
    world *w;
    int rank;
    ak__transport t;
    int peers[MAX_W];
};

/* Records a failure in a rank thread (cmocka asserts must stay on the main thread). */
#define T_CHECK(cond, ...)                                                                \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            fprintf(stderr, "rank %d, %s:%d: ", r->rank, __FILE__, __LINE__);             \
            fprintf(stderr, __VA_ARGS__);                                                 \
            fprintf(stderr, " (last error: %s)\n", ak_last_error());                      \
            return 1;                                                                     \
        }                                                                                 \
    } while (0)

static void *rank_main(void *p) {
    rank_ctx *r = p;
    world *w = r->w;
    int n = 0;
    for (int q = 0; q < w->size; q++)
        if (q != r->rank) r->peers[n++] = q;
    ak__transport_setup s = {.store = w->store, .prefix = w->prefix, .rank = r->rank,
                             .world_size = w->size, .peers = r->peers, .npeers = n,
                             .nstreams = 1, .timeout_ms = w->timeout_ms};
    ak_status st = ak__shm_transport_create(&s, &r->t);
    if (st != AK_OK) {
        fprintf(stderr, "rank %d: create: %s\n", r->rank, ak_last_error());
        atomic_fetch_add(&w->errors, 1);
    }
    pthread_barrier_wait(&w->barrier); /* every rank connected: names must be gone */
    if (st == AK_OK && r->rank == 0 && leftover_segments(getpid()))
        atomic_fetch_add(&w->errors, 1);
    if (st == AK_OK && w->body(r)) atomic_fetch_add(&w->errors, 1);
    pthread_barrier_wait(&w->barrier);
    ak__transport_destroy(&r->t);
    return NULL;
}

static void run_world(int size, int timeout_ms, rank_body body) {
    static int run_id;
    world w = {.size = size, .timeout_ms = timeout_ms, .body = body};
    snprintf(w.prefix, sizeof w.prefix, "test/shm/%d", run_id++);
    assert_int_equal(ak__store_create_memory(&w.store), AK_OK);
    pthread_barrier_init(&w.barrier, NULL, (unsigned)size);
    rank_ctx ranks[MAX_W];
    pthread_t threads[MAX_W];
    for (int i = 0; i < size; i++) {
        ranks[i] = (rank_ctx){.w = &w, .rank = i};
        ak__store_retain(w.store);
        assert_int_equal(pthread_create(&threads[i], NULL, rank_main, &ranks[i]), 0);
    }
    for (int i = 0; i < size; i++) pthread_join(threads[i], NULL);
    for (int i = 0; i < size; i++) ak__store_free(w.store);
    ak__store_free(w.store);
    pthread_barrier_destroy(&w.barrier);
    assert_int_equal(atomic_load(&w.errors), 0);
    assert_int_equal(leftover_segments(getpid()), 0);
}

/* ---- data patterns ------------------------------------------------------------------ */

/* Every rank sends to and receives from every peer at once, for each size. */
static int body_pairwise(rank_ctx *r) {
    int W = r->w->size, n = W - 1;
    for (size_t k = 0; k < NSIZES; k++) {
        size_t size = sizes[k];
        if (size > 2 * MB && W > 2) continue; /* 16 MB all-to-all: memory, not coverage */
        ak__p2p ops[2 * MAX_W];
        unsigned char *bufs[2 * MAX_W];
        for (int i = 0; i < n; i++) {
            int q = r->peers[i];
            bufs[i] = malloc(size + 1);
            bufs[n + i] = malloc(size + 1);
            fill(bufs[i], r->rank, q, size);
            ops[i] = make_op(q, 1, bufs[i], size, k);
            ops[n + i] = make_op(q, 0, bufs[n + i], size, k);
        }
        for (int i = 0; i < 2 * n; i++) T_CHECK(r->t.vt->post(r->t.ctx, &ops[i]) == AK_OK, "post");
        ak_status st = wait_all(&r->t, ops, 2 * n);
        T_CHECK(st == AK_OK, "pairwise %zu bytes: %s", size, ak_status_str(st));
        for (int i = 0; i < n; i++) {
            size_t bad = first_bad(bufs[n + i], r->peers[i], r->rank, size);
            T_CHECK(bad == size, "pairwise %zu bytes from %d: byte %zu wrong", size,
                    r->peers[i], bad);
        }
        for (int i = 0; i < 2 * n; i++) free(bufs[i]);
    }
    return 0;
}

/* Send to the next rank, receive from the previous one. */
static int body_ring(rank_ctx *r) {
    int W = r->w->size, next = (r->rank + 1) % W, prev = (r->rank + W - 1) % W;
    for (size_t k = 0; k < NSIZES; k++) {
        size_t size = sizes[k];
        unsigned char *out = malloc(size + 1), *in = malloc(size + 1);
        fill(out, r->rank, next, size);
        ak__p2p ops[2] = {make_op(prev, 0, in, size, 100 + k),
                          make_op(next, 1, out, size, 100 + k)};
        for (int i = 0; i < 2; i++) T_CHECK(r->t.vt->post(r->t.ctx, &ops[i]) == AK_OK, "post");
        ak_status st = wait_all(&r->t, ops, 2);
        T_CHECK(st == AK_OK, "ring %zu bytes: %s", size, ak_status_str(st));
        size_t bad = first_bad(in, prev, r->rank, size);
        T_CHECK(bad == size, "ring %zu bytes: byte %zu wrong", size, bad);
        free(out);
        free(in);
    }
    return 0;
}

#define NSMALL 2000
static size_t small_size(int i) { return (size_t)(i * 37) % 300; }

/* NSMALL messages of mixed small sizes to every peer, all posted before progressing:
 * they must arrive in order, each with its own tag and bytes. */
static int body_many_small(rank_ctx *r) {
    int n = r->w->size - 1, nops = 2 * n * NSMALL;
    ak__p2p *ops = calloc((size_t)nops, sizeof *ops);
    unsigned char *mem = malloc((size_t)nops * 300);
    for (int i = 0; i < n; i++) {
        for (int m = 0; m < NSMALL; m++) {
            int q = r->peers[i], s = (i * NSMALL + m) * 2;
            size_t size = small_size(m);
            fill(mem + (size_t)s * 300, r->rank, q, size);
            ops[s] = make_op(q, 1, mem + (size_t)s * 300, size, (uint64_t)m);
            ops[s + 1] = make_op(q, 0, mem + (size_t)(s + 1) * 300, size, (uint64_t)m);
        }
    }
    for (int i = 0; i < nops; i++) T_CHECK(r->t.vt->post(r->t.ctx, &ops[i]) == AK_OK, "post");
    ak_status st = wait_all(&r->t, ops, nops);
    T_CHECK(st == AK_OK, "many small: %s", ak_status_str(st));
    for (int s = 1; s < nops; s += 2) {
        size_t size = ops[s].bytes;
        T_CHECK(first_bad(ops[s].buf, ops[s].peer, r->rank, size) == size,
                "small message %d from %d corrupt", s / 2 % NSMALL, ops[s].peer);
    }
    free(ops);
    free(mem);
    return 0;
}

static void test_pairwise(void **state) {
    for (int w = 2; w <= MAX_W; w++) run_world(w, 10000, body_pairwise);
}

static void test_ring(void **state) {
    for (int w = 2; w <= MAX_W; w++) run_world(w, 10000, body_ring);
}

static void test_many_small(void **state) {
    for (int w = 2; w <= MAX_W; w++) run_world(w, 10000, body_many_small);
}

/* ---- errors ------------------------------------------------------------------------- */

static uint64_t mm_recv_tag = 6;
static size_t mm_recv_bytes = 100;

/* Rank 1 expects a different tag or length: it fails with MISMATCH, and rank 0 learns it
 * on its next operation instead of waiting for the timeout. */
static int body_mismatch(rank_ctx *r) {
    unsigned char buf[128] = {0};
    if (r->rank == 0) {
        ak__p2p send = make_op(1, 1, buf, 100, 6);
        T_CHECK(r->t.vt->post(r->t.ctx, &send) == AK_OK, "post");
        T_CHECK(wait_all(&r->t, &send, 1) == AK_OK, "send");
        ak__p2p recv = make_op(1, 0, buf, 8, 7);
        T_CHECK(r->t.vt->post(r->t.ctx, &recv) == AK_OK, "post");
        ak_status st = wait_all(&r->t, &recv, 1);
        T_CHECK(st == AK_ERR_MISMATCH, "rank 0 got %s", ak_status_str(st));
        return 0;
    }
    ak__p2p recv = make_op(0, 0, buf, mm_recv_bytes, mm_recv_tag);
    T_CHECK(r->t.vt->post(r->t.ctx, &recv) == AK_OK, "post");
    ak_status st = wait_all(&r->t, &recv, 1);
    T_CHECK(st == AK_ERR_MISMATCH && recv.status == AK_ERR_MISMATCH, "got %s",
            ak_status_str(st));
    T_CHECK(strstr(ak_last_error(), "rank 0"), "message '%s' names no peer", ak_last_error());
    /* the transport stays failed: a later post completes at once with the same error */
    ak__p2p again = make_op(0, 1, buf, 1, 1);
    T_CHECK(r->t.vt->post(r->t.ctx, &again) == AK_ERR_MISMATCH && again.complete, "refail");
    return 0;
}

static void test_mismatch(void **state) {
    mm_recv_tag = 9; /* tag differs */
    mm_recv_bytes = 100;
    run_world(2, 10000, body_mismatch);
    mm_recv_tag = 6; /* length differs */
    mm_recv_bytes = 101;
    run_world(2, 10000, body_mismatch);
}

/* Rank 1 never sends: rank 0's receive fails with TIMEOUT after timeout_ms. */
static int body_timeout(rank_ctx *r) {
    if (r->rank == 1) return 0; /* waits at the final barrier, transport alive */
    char b;
    ak__p2p recv = make_op(1, 0, &b, 1, 0);
    T_CHECK(r->t.vt->post(r->t.ctx, &recv) == AK_OK, "post");
    uint64_t t0 = ak_now_ns();
    ak_status st = wait_all(&r->t, &recv, 1);
    double ms = (double)(ak_now_ns() - t0) / 1e6;
    T_CHECK(st == AK_ERR_TIMEOUT, "got %s", ak_status_str(st));
    T_CHECK(ms > 250 && ms < 1500, "timed out after %.0f ms, limit 300", ms);
    return 0;
}

static void test_timeout(void **state) { run_world(2, 300, body_timeout); }

/* Rank 1 sends one message and closes: rank 0 still receives it, then gets REMOTE. */
static int body_closed(rank_ctx *r) {
    unsigned char buf[64];
    if (r->rank == 1) {
        fill(buf, 1, 0, 64);
        ak__p2p send = make_op(0, 1, buf, 64, 3);
        T_CHECK(r->t.vt->post(r->t.ctx, &send) == AK_OK, "post");
        T_CHECK(wait_all(&r->t, &send, 1) == AK_OK, "send");
        ak__transport_destroy(&r->t);
        pthread_barrier_wait(&r->w->barrier);
        return 0;
    }
    pthread_barrier_wait(&r->w->barrier); /* rank 1 is gone */
    ak__p2p recv[2] = {make_op(1, 0, buf, 64, 3), make_op(1, 0, buf, 64, 4)};
    for (int i = 0; i < 2; i++) T_CHECK(r->t.vt->post(r->t.ctx, &recv[i]) == AK_OK, "post");
    ak_status st = wait_all(&r->t, recv, 2);
    T_CHECK(recv[0].status == AK_OK && first_bad(buf, 1, 0, 64) == 64, "data before close");
    T_CHECK(st == AK_ERR_REMOTE && recv[1].status == AK_ERR_REMOTE, "got %s",
            ak_status_str(st));
    T_CHECK(strstr(ak_last_error(), "rank 1"), "message '%s' names no peer", ak_last_error());
    return 0;
}

static void test_peer_closed(void **state) { run_world(2, 10000, body_closed); }

/* ---- two processes ------------------------------------------------------------------ */

/* A store for a forked peer: the in-memory store is per process, so this one lives in a
 * MAP_SHARED anonymous mapping created before fork, guarded by a process-shared mutex.
 * Only set and get are used by the transport. */
#define FS_KEYS 8
typedef struct fork_store {
    ak__store base;
    pthread_mutex_t lock;
    pthread_cond_t changed;
    int n;
    struct {
        char key[AK_STORE_MAX_KEY + 1];
        char value[256];
        size_t len;
    } e[FS_KEYS];
} fork_store;

static ak_status fs_set(ak__store *s, const char *key, const void *v, size_t len) {
    fork_store *f = (fork_store *)s;
    if (len > sizeof f->e[0].value) return AK_ERR_INVALID_ARG;
    pthread_mutex_lock(&f->lock);
    int i = 0;
    while (i < f->n && strcmp(f->e[i].key, key) != 0) i++;
    ak_status st = i < FS_KEYS ? AK_OK : AK_ERR_NO_MEMORY;
    if (st == AK_OK) {
        if (i == f->n) f->n++;
        strcpy(f->e[i].key, key);
        memcpy(f->e[i].value, v, len);
        f->e[i].len = len;
        pthread_cond_broadcast(&f->changed);
    }
    pthread_mutex_unlock(&f->lock);
    return st;
}

static ak_status fs_get(ak__store *s, const char *key, void *buf, size_t cap, size_t *len,
                        int timeout_ms) {
    fork_store *f = (fork_store *)s;
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += timeout_ms / 1000 + 1;
    ak_status st = AK_ERR_TIMEOUT;
    pthread_mutex_lock(&f->lock);
    for (;;) {
        for (int i = 0; i < f->n; i++)
            if (strcmp(f->e[i].key, key) == 0) {
                *len = f->e[i].len;
                memcpy(buf, f->e[i].value, f->e[i].len < cap ? f->e[i].len : cap);
                st = AK_OK;
            }
        if (st == AK_OK || pthread_cond_timedwait(&f->changed, &f->lock, &dl)) break;
    }
    pthread_mutex_unlock(&f->lock);
    return st;
}

static ak_status fs_add(ak__store *s, const char *k, int64_t d, int64_t *a) {
    return AK_ERR_UNSUPPORTED;
}
static ak_status fs_wait_ge(ak__store *s, const char *k, int64_t v, int t) {
    return AK_ERR_UNSUPPORTED;
}
static void fs_destroy(ak__store *s) { munmap(s, sizeof(fork_store)); }

static const ak__store_ops fork_store_ops = {fs_set, fs_get, fs_add, fs_wait_ge, fs_destroy, NULL};

static ak__store *fork_store_create(void) {
    fork_store *f = mmap(NULL, sizeof *f, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                         -1, 0);
    assert_true(f != MAP_FAILED);
    memset(f, 0, sizeof *f);
    f->base.ops = &fork_store_ops;
    atomic_init(&f->base.refs, 1);
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
    pthread_mutex_init(&f->lock, &ma);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED);
    pthread_condattr_setclock(&ca, CLOCK_REALTIME);
    pthread_cond_init(&f->changed, &ca);
    return &f->base;
}

static ak_status fork_rank_create(ak__store *store, int rank, ak__transport *t) {
    static const int peer_of[2][1] = {{1}, {0}};
    ak__transport_setup s = {.store = store, .prefix = "test/shm/fork", .rank = rank,
                             .world_size = 2, .peers = peer_of[rank], .npeers = 1,
                             .nstreams = 1, .timeout_ms = 10000};
    return ak__shm_transport_create(&s, t);
}

/* Both directions at once through the transport; 0 when the bytes arrived exactly. */
static int fork_exchange(ak__transport *t, int me, size_t size) {
    unsigned char *out = malloc(size), *in = malloc(size);
    fill(out, me, 1 - me, size);
    ak__p2p ops[2] = {make_op(1 - me, 1, out, size, 42), make_op(1 - me, 0, in, size, 42)};
    int bad = t->vt->post(t->ctx, &ops[0]) || t->vt->post(t->ctx, &ops[1]) ||
              wait_all(t, ops, 2) || first_bad(in, 1 - me, me, size) != size;
    free(out);
    free(in);
    return bad;
}

#define BIG (64 * MB)

/* The child: exchange, then start a 64 MB send and stop in the middle of it. */
static void fork_child(ak__store *store) {
    ak__transport t;
    if (fork_rank_create(store, 1, &t) || fork_exchange(&t, 1, MB + 13)) _exit(2);
    unsigned char *big = calloc(1, BIG);
    ak__p2p send = make_op(0, 1, big, BIG, 7);
    if (t.vt->post(t.ctx, &send)) _exit(3);
    while (send.done_bytes < 8 * (size_t)MB)
        if (t.vt->progress(t.ctx, 1000)) _exit(4);
    for (;;) pause(); /* killed here by the parent */
}

static void test_two_processes_peer_killed(void **state) {
    ak__store *store = fork_store_create();
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) fork_child(store);
    ak__transport t;
    assert_int_equal(fork_rank_create(store, 0, &t), AK_OK);
    assert_int_equal(leftover_segments(getpid()) + leftover_segments(child), 0);
    assert_int_equal(fork_exchange(&t, 0, MB + 13), 0);
    unsigned char *big = malloc(BIG);
    ak__p2p recv = make_op(1, 0, big, BIG, 7);
    assert_int_equal(t.vt->post(t.ctx, &recv), AK_OK);
    while (recv.done_bytes < 4 * (size_t)MB) assert_int_equal(t.vt->progress(t.ctx, 1000), AK_OK);
    assert_int_equal(kill(child, SIGKILL), 0); /* not reaped yet: a zombie must count as gone */
    uint64_t t0 = ak_now_ns();
    ak_status st = AK_OK;
    while (!recv.complete) st = t.vt->progress(t.ctx, 10000);
    double ms = (double)(ak_now_ns() - t0) / 1e6;
    assert_int_equal(st, AK_ERR_REMOTE);
    assert_int_equal(recv.status, AK_ERR_REMOTE);
    assert_non_null(strstr(ak_last_error(), "rank 1"));
    assert_true(ms < 1000);
    int wstatus;
    assert_int_equal(waitpid(child, &wstatus, 0), child);
    assert_true(WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGKILL);
    ak__transport_destroy(&t);
    free(big);
    ak__store_free(store);
    assert_int_equal(leftover_segments(getpid()) + leftover_segments(child), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pairwise),
        cmocka_unit_test(test_ring),
        cmocka_unit_test(test_many_small),
        cmocka_unit_test(test_mismatch),
        cmocka_unit_test(test_timeout),
        cmocka_unit_test(test_peer_closed),
        cmocka_unit_test(test_two_processes_peer_killed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
