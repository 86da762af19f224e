/* Tests of the TCP transport: W ranks as threads of one process on 127.0.0.1, sharing an
 * in-memory store, each driving its own transport. Covers striping over 1/2/4 streams,
 * simultaneous both-way traffic, rings, ordering of many small messages, tag and length
 * mismatches, a peer vanishing mid-receive, stalls, and setup timeouts.
 *
 * cmocka's assertions longjmp, which is only safe on the main thread, so rank threads
 * record their first failure and the main thread reports it. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "accelkit/ak.h"
#include "comm/bootstrap/store.h"
#include "comm/transport/transport.h"

#define MAX_RANKS 4
#define MB ((size_t)1 << 20)
#define DRIVE_LIMIT_NS (20ull * 1000000000ull) /* a hang fails the test instead */

typedef struct world world;
typedef struct rank_ctx {
    world *w;
    int rank;
    ak__transport tp;
    char failure[512]; /* first failure of this rank, "" when none */
} rank_ctx;

typedef void (*rank_body)(rank_ctx *rc);

struct world {
    int size, nstreams, timeout_ms;
    ak__store *store;
    char prefix[64];
    pthread_barrier_t barrier;
    rank_body body;
    rank_ctx ranks[MAX_RANKS];
};

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void record(rank_ctx *rc, const char *fmt, ...) {
    if (rc->failure[0]) return;
    int n = snprintf(rc->failure, sizeof rc->failure, "rank %d: ", rc->rank);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rc->failure + n, sizeof rc->failure - (size_t)n, fmt, ap);
    va_end(ap);
}

/* Content predictable from (src, dst, seq, index), so any misplaced byte shows. */
static unsigned char pattern(int src, int dst, int seq, size_t i) {
    return (unsigned char)(src * 131 + dst * 31 + seq * 7 + i * 13 + (i >> 9) * 5);
}

static unsigned char *make_payload(int src, int dst, int seq, size_t bytes) {
    unsigned char *b = malloc(bytes ? bytes : 1);
    for (size_t i = 0; i < bytes; i++) b[i] = pattern(src, dst, seq, i);
    return b;
}

static int verify(rank_ctx *rc, const unsigned char *b, int src, int seq, size_t bytes) {
    for (size_t i = 0; i < bytes; i++)
        if (b[i] != pattern(src, rc->rank, seq, i)) {
            record(rc, "message %d of %zu bytes from rank %d: byte %zu is %u, expected %u", seq,
                   bytes, src, i, b[i], pattern(src, rc->rank, seq, i));
            return 0;
        }
    return 1;
}

static void set_op(ak__p2p *op, int peer, int is_send, void *buf, size_t bytes, uint64_t tag) {
    memset(op, 0, sizeof *op);
    op->peer = peer;
    op->is_send = is_send;
    op->buf = buf;
    op->bytes = bytes;
    op->tag = tag;
}

/* Posts ops[0..n) and progresses until all complete; returns the first failing status. */
static ak_status drive(rank_ctx *rc, ak__p2p *ops, int n) {
    ak_status first = AK_OK;
    for (int i = 0; i < n; i++) {
        ak_status st = rc->tp.vt->post(rc->tp.ctx, &ops[i]);
        if (st != AK_OK && first == AK_OK) first = st;
    }
    uint64_t start = now_ns();
    for (;;) {
        int done = 1;
        for (int i = 0; i < n; i++) done &= ops[i].complete;
        if (done) return first;
        if (now_ns() - start > DRIVE_LIMIT_NS) {
            record(rc, "ops did not complete within %llu s", DRIVE_LIMIT_NS / 1000000000ull);
            return AK_ERR_TIMEOUT;
        }
        ak_status st = rc->tp.vt->progress(rc->tp.ctx, 1000);
        if (st != AK_OK && first == AK_OK) first = st;
    }
}

static void *rank_main(void *arg) {
    rank_ctx *rc = arg;
    world *w = rc->w;
    int peers[MAX_RANKS], np = 0;
    for (int r = 0; r < w->size; r++)
        if (r != rc->rank) peers[np++] = r;
    ak__transport_setup su = {.store = w->store, .prefix = w->prefix, .rank = rc->rank,
                              .world_size = w->size, .peers = peers, .npeers = np,
                              .nstreams = w->nstreams, .timeout_ms = w->timeout_ms,
                              .bind_addr = "127.0.0.1"};
    ak_status st = ak__tcp_transport_create(&su, &rc->tp);
    if (st != AK_OK) record(rc, "create: %s: %s", ak_status_str(st), ak_last_error());
    pthread_barrier_wait(&w->barrier);
    if (st == AK_OK) w->body(rc);
    pthread_barrier_wait(&w->barrier); /* nobody closes while a peer still reads */
    ak__transport_destroy(&rc->tp);
    return NULL;
}

static void run_world_timeout(int size, int nstreams, rank_body body, int timeout_ms) {
    static int worlds;
    world *w = calloc(1, sizeof *w);
    w->timeout_ms = timeout_ms;
    w->size = size;
    w->nstreams = nstreams;
    w->body = body;
    snprintf(w->prefix, sizeof w->prefix, "test%d", worlds++);
    assert_int_equal(ak__store_create_memory(&w->store), AK_OK);
    pthread_barrier_init(&w->barrier, NULL, (unsigned)size);
    pthread_t th[MAX_RANKS];
    for (int r = 0; r < size; r++) {
        w->ranks[r].w = w;
        w->ranks[r].rank = r;
        pthread_create(&th[r], NULL, rank_main, &w->ranks[r]);
    }
    for (int r = 0; r < size; r++) pthread_join(th[r], NULL);
    for (int r = 0; r < size; r++)
        if (w->ranks[r].failure[0])
            fail_msg("world %d x %d streams: %s", size, nstreams, w->ranks[r].failure);
    pthread_barrier_destroy(&w->barrier);
    ak__store_free(w->store);
    free(w);
}

static void run_world(int size, int nstreams, rank_body body) {
    run_world_timeout(size, nstreams, body, 10000);
}

/* ---- data movement ------------------------------------------------------------------ */

static const size_t sizes[] = {0, 1, 7, 4096, MB + 13, 16 * MB};
#define NSIZES (sizeof sizes / sizeof sizes[0])

/* Sends to `to` and receives from `from` at once (both may be the same peer). */
static void exchange(rank_ctx *rc, int to, int from, int seq, size_t bytes) {
    unsigned char *out = make_payload(rc->rank, to, seq, bytes);
    unsigned char *in = malloc(bytes ? bytes : 1);
    ak__p2p ops[2];
    set_op(&ops[0], from, 0, in, bytes, (uint64_t)seq);
    set_op(&ops[1], to, 1, out, bytes, (uint64_t)seq);
    ak_status st = drive(rc, ops, 2);
    if (st != AK_OK)
        record(rc, "exchange of %zu bytes: %s: %s", bytes, ak_status_str(st), ak_last_error());
    else
        verify(rc, in, from, seq, bytes);
    free(out);
    free(in);
}

static void body_pairwise(rank_ctx *rc) {
    for (size_t i = 0; i < NSIZES; i++) exchange(rc, 1 - rc->rank, 1 - rc->rank, (int)i, sizes[i]);
}

static void body_ring(rank_ctx *rc) {
    int n = rc->w->size;
    for (size_t i = 0; i < NSIZES; i++)
        exchange(rc, (rc->rank + 1) % n, (rc->rank + n - 1) % n, (int)i, sizes[i]);
}

static void test_pairwise(void **state) {
    (void)state;
    for (int ns = 1; ns <= 4; ns *= 2) run_world(2, ns, body_pairwise);
}

static void test_ring(void **state) {
    (void)state;
    run_world(3, 2, body_ring);
    run_world(4, 1, body_ring);
    run_world(4, 4, body_ring);
}

/* Every rank posts many messages of varying sizes to every peer at once; each must land
 * in its own receive, in order. Large and small ones mixed exercise per-stream cursors. */
#define NMSG 96
static size_t mixed_size(int k) {
    static const size_t big[] = {MB + 13, 0, 3 * 512 * 1024 + 5, 600 * 1024, 70001};
    return k % 8 == 7 ? big[(k / 8) % 5] : (size_t)(k * 37 % 101);
}

static void body_many(rank_ctx *rc) {
    int n = rc->w->size, nops = 2 * NMSG * (n - 1), o = 0;
    ak__p2p *ops = calloc((size_t)nops, sizeof *ops);
    unsigned char **bufs = calloc((size_t)nops, sizeof *bufs);
    for (int peer = 0; peer < n; peer++) {
        if (peer == rc->rank) continue;
        for (int k = 0; k < NMSG; k++) {
            size_t bytes = mixed_size(k);
            bufs[o] = malloc(bytes ? bytes : 1);
            set_op(&ops[o], peer, 0, bufs[o], bytes, 1000u + (uint64_t)k);
            o++;
            bufs[o] = make_payload(rc->rank, peer, k, bytes);
            set_op(&ops[o], peer, 1, bufs[o], bytes, 1000u + (uint64_t)k);
            o++;
        }
    }
    /* progress(-1) must not return before every op is done */
    ak_status st = AK_OK;
    for (int i = 0; i < nops && st == AK_OK; i++) st = rc->tp.vt->post(rc->tp.ctx, &ops[i]);
    if (st == AK_OK) st = rc->tp.vt->progress(rc->tp.ctx, -1);
    for (int i = 0; i < nops && st == AK_OK; i++)
        if (!ops[i].complete) st = AK_ERR_INTERNAL;
    if (st != AK_OK) record(rc, "many: %s: %s", ak_status_str(st), ak_last_error());
    for (int i = 0; i < nops && st == AK_OK; i += 2)
        if (!verify(rc, bufs[i], ops[i].peer, (i / 2) % NMSG, ops[i].bytes)) break;
    for (int i = 0; i < nops; i++) free(bufs[i]);
    free(bufs);
    free(ops);
}

static void test_many_messages_in_order(void **state) {
    (void)state;
    run_world(2, 4, body_many);
    run_world(3, 2, body_many);
    run_world(4, 1, body_many);
}

/* ---- errors ------------------------------------------------------------------------- */

/* Rank 0 sends (tag 5, send_bytes); rank 1 expects (recv_tag, recv_bytes): must fail. */
static size_t mm_send_bytes, mm_recv_bytes;
static uint64_t mm_recv_tag;

static void body_mismatch(rank_ctx *rc) {
    size_t bytes = rc->rank == 0 ? mm_send_bytes : mm_recv_bytes;
    unsigned char *buf = make_payload(0, 1, 0, bytes); /* exact size: ASan sees overruns */
    ak__p2p op;
    set_op(&op, 1 - rc->rank, rc->rank == 0, buf, bytes, rc->rank == 0 ? 5 : mm_recv_tag);
    if (rc->rank == 0) {
        (void)rc->tp.vt->post(rc->tp.ctx, &op);
        /* the receiver may fail before taking everything: only push what fits */
        for (int i = 0; i < 200 && !op.complete; i++) (void)rc->tp.vt->progress(rc->tp.ctx, 1000);
    } else {
        ak_status st = drive(rc, &op, 1);
        if (st != AK_ERR_MISMATCH || op.status != AK_ERR_MISMATCH)
            record(rc, "expected a mismatch, got %s / op %s", ak_status_str(st),
                   ak_status_str(op.status));
        else if (!strstr(ak_last_error(), "rank 0"))
            record(rc, "error does not name the peer: %s", ak_last_error());
        /* the transport is failed afterwards */
        set_op(&op, 0, 0, buf, bytes, mm_recv_tag);
        if (rc->tp.vt->post(rc->tp.ctx, &op) == AK_OK && !op.complete)
            record(rc, "a post after a mismatch was accepted");
    }
    free(buf);
}

static void test_tag_mismatch(void **state) {
    (void)state;
    mm_send_bytes = mm_recv_bytes = 64;
    mm_recv_tag = 6;
    run_world(2, 1, body_mismatch);
    mm_send_bytes = mm_recv_bytes = 0;
    run_world(2, 2, body_mismatch);
}

static void test_length_mismatch(void **state) {
    (void)state;
    mm_recv_tag = 5;
    mm_send_bytes = 100, mm_recv_bytes = 64;
    run_world(2, 1, body_mismatch);
    mm_send_bytes = 64, mm_recv_bytes = 100;
    run_world(2, 1, body_mismatch);
    /* striped: the receiver must not write past its 1 MB buffer on any stream */
    mm_send_bytes = 3 * MB + 1, mm_recv_bytes = MB;
    run_world(2, 4, body_mismatch);
    mm_send_bytes = MB, mm_recv_bytes = 3 * MB + 1;
    run_world(2, 4, body_mismatch);
}

/* Rank 0 destroys its transport in the middle of a large send that rank 1 receives. */
static void body_peer_gone(rank_ctx *rc) {
    size_t bytes = 64 * MB;
    unsigned char *buf = calloc(1, bytes);
    ak__p2p op;
    set_op(&op, 1 - rc->rank, rc->rank == 0, buf, bytes, 9);
    if (rc->rank == 0) {
        (void)rc->tp.vt->post(rc->tp.ctx, &op);
        (void)rc->tp.vt->progress(rc->tp.ctx, 0); /* fills the socket buffers, no more */
        pthread_barrier_wait(&rc->w->barrier);
        struct timespec pause = {0, 50 * 1000000L};
        nanosleep(&pause, NULL);
        ak__transport_destroy(&rc->tp);
        free(buf);
        return;
    }
    pthread_barrier_wait(&rc->w->barrier); /* nobody reads until rank 0 is stuck */
    uint64_t start = now_ns();
    ak_status st = drive(rc, &op, 1);
    double waited = (double)(now_ns() - start) / 1e9;
    if (st != AK_ERR_REMOTE || op.status != AK_ERR_REMOTE)
        record(rc, "expected remote error, got %s / op %s", ak_status_str(st),
               ak_status_str(op.status));
    else if (!strstr(ak_last_error(), "rank 0"))
        record(rc, "error does not name rank 0: %s", ak_last_error());
    else if (waited > 1.0)
        record(rc, "noticed the lost peer after %.2f s", waited);
    else if (op.done_bytes == 0 || op.done_bytes == bytes)
        record(rc, "the peer was not lost mid-message (%zu bytes received)", op.done_bytes);
    set_op(&op, 0, 1, buf, 8, 11);
    if (rc->tp.vt->post(rc->tp.ctx, &op) != AK_ERR_REMOTE || op.status != AK_ERR_REMOTE)
        record(rc, "a post to the lost peer did not fail with a remote error");
    free(buf);
}

static void test_peer_gone(void **state) {
    (void)state;
    run_world(2, 1, body_peer_gone);
    run_world(2, 4, body_peer_gone);
}

/* Rank 1 waits in progress(-1) for a message rank 0 never sends: a timeout naming rank 0
 * after the setup's stall limit (300 ms), and the transport still works afterwards. */
static void body_stall(rank_ctx *rc) {
    unsigned char byte = 42;
    ak__p2p op;
    if (rc->rank == 1) {
        set_op(&op, 0, 0, &byte, 1, 3);
        (void)rc->tp.vt->post(rc->tp.ctx, &op);
        uint64_t start = now_ns();
        ak_status st = rc->tp.vt->progress(rc->tp.ctx, -1);
        double waited = (double)(now_ns() - start) / 1e9;
        if (st != AK_ERR_TIMEOUT || !strstr(ak_last_error(), "rank 0"))
            record(rc, "expected a timeout naming rank 0, got %s: %s", ak_status_str(st),
                   ak_last_error());
        else if (waited < 0.25 || waited > 1.5)
            record(rc, "stall reported after %.2f s, limit 0.3 s", waited);
    }
    pthread_barrier_wait(&rc->w->barrier);
    if (rc->rank == 0) {
        set_op(&op, 1, 1, &byte, 1, 3);
        if (drive(rc, &op, 1) != AK_OK) record(rc, "send after the stall failed");
    } else {
        if (rc->tp.vt->progress(rc->tp.ctx, -1) != AK_OK || !op.complete || byte != 42)
            record(rc, "the late message was not received: %s", ak_last_error());
    }
}

static void test_stall_timeout(void **state) {
    (void)state;
    run_world_timeout(2, 2, body_stall, 300);
}

/* Only one rank of two shows up: setup must time out and name the missing one. */
static void check_alone(int rank, int peer) {
    ak__store *store;
    assert_int_equal(ak__store_create_memory(&store), AK_OK);
    ak__transport tp = {0};
    ak__transport_setup su = {.store = store, .prefix = "alone", .rank = rank,
                              .world_size = 2, .peers = &peer, .npeers = 1, .nstreams = 2,
                              .timeout_ms = 300, .bind_addr = "127.0.0.1"};
    uint64_t start = now_ns();
    assert_int_equal(ak__tcp_transport_create(&su, &tp), AK_ERR_TIMEOUT);
    assert_true(now_ns() - start < 3000000000ull);
    char want[16];
    snprintf(want, sizeof want, "rank %d", peer);
    if (!strstr(ak_last_error(), want)) fail_msg("error does not name %s: %s", want, ak_last_error());
    assert_null(tp.vt);
    ak__store_free(store);
}

static void test_setup_timeout(void **state) {
    (void)state;
    check_alone(0, 1); /* connecting side: no address published */
    check_alone(1, 0); /* accepting side: nobody connects */
}

/* The peer published an address nobody listens on: retries end at the timeout. */
static void test_connect_refused(void **state) {
    (void)state;
    ak__store *store;
    assert_int_equal(ak__store_create_memory(&store), AK_OK);
    const char addr[] = "127.0.0.1:1";
    assert_int_equal(ak__store_set(store, "refused/tcp/1", addr, sizeof addr - 1), AK_OK);
    int peer = 1;
    ak__transport tp = {0};
    ak__transport_setup su = {.store = store, .prefix = "refused", .rank = 0, .world_size = 2,
                              .peers = &peer, .npeers = 1, .nstreams = 1, .timeout_ms = 300,
                              .bind_addr = "127.0.0.1"};
    uint64_t start = now_ns();
    assert_int_equal(ak__tcp_transport_create(&su, &tp), AK_ERR_TIMEOUT);
    assert_true(now_ns() - start < 3000000000ull);
    if (!strstr(ak_last_error(), "rank 1")) fail_msg("error does not name rank 1: %s", ak_last_error());
    ak__store_free(store);
}

static void test_invalid_setup(void **state) {
    (void)state;
    ak__store *store;
    assert_int_equal(ak__store_create_memory(&store), AK_OK);
    int peer = 1;
    ak__transport tp = {0};
    ak__transport_setup su = {.store = store, .prefix = "bad", .rank = 0, .world_size = 2,
                              .peers = &peer, .npeers = 1, .nstreams = 0, .timeout_ms = 100};
    assert_int_equal(ak__tcp_transport_create(&su, &tp), AK_ERR_INVALID_ARG);
    su.nstreams = AK_COMM_MAX_STREAMS + 1;
    assert_int_equal(ak__tcp_transport_create(&su, &tp), AK_ERR_INVALID_ARG);
    su.nstreams = 1;
    su.rank = 2;
    assert_int_equal(ak__tcp_transport_create(&su, &tp), AK_ERR_INVALID_ARG);
    su.rank = 0;
    su.bind_addr = "not-an-address";
    assert_int_equal(ak__tcp_transport_create(&su, &tp), AK_ERR_INVALID_ARG);
    assert_null(tp.vt);
    ak__store_free(store);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pairwise),
        cmocka_unit_test(test_ring),
        cmocka_unit_test(test_many_messages_in_order),
        cmocka_unit_test(test_tag_mismatch),
        cmocka_unit_test(test_length_mismatch),
        cmocka_unit_test(test_peer_gone),
        cmocka_unit_test(test_stall_timeout),
        cmocka_unit_test(test_setup_timeout),
        cmocka_unit_test(test_connect_refused),
        cmocka_unit_test(test_invalid_setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
