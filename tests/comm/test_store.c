/* Tests of the bootstrap key-value store: the in-memory store shared by threads, and the
 * TCP server + client (many clients, blocking gets, timeouts, 1 MiB values, limits, a
 * dead server, a busy port, garbage on the wire before and after the handshake).
 * Everything listens on 127.0.0.1; no AK_JOB_SECRET is set, so connections authenticate
 * in same-user mode (test_auth.c covers the secret). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "comm/bootstrap/auth.h"
#include "comm/bootstrap/store.h"

#define NTHREADS 8
#define LOCAL "127.0.0.1"

static int64_t elapsed_ms(uint64_t start_ns) { return (int64_t)((ak_now_ns() - start_ns) / 1000000u); }

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void assert_error_has(const char *needle) {
    if (!strstr(ak_last_error(), needle))
        fail_msg("last error '%s' does not contain '%s'", ak_last_error(), needle);
}

static void get_string(ak__store *s, const char *key, char *buf, size_t cap, int timeout_ms) {
    size_t len = 0;
    assert_int_equal(ak__store_get(s, key, buf, cap - 1, &len, timeout_ms), AK_OK);
    assert_true(len < cap);
    buf[len] = '\0';
}

/* ---- a workload every store must pass, each thread with its own handle ---------------- */

typedef struct worker {
    ak__store *store;
    int index;
    int64_t ticket; /* what its add returned */
    ak_status status;
} worker;

/* add-barrier, publish own key, read everybody's, second barrier. */
static void *exchange(void *arg) {
    worker *w = arg;
    char key[32], value[64], got[64];
    int64_t after;
    w->status = AK_ERR_INTERNAL;
    if (ak__store_add(w->store, "arrived", 1, &w->ticket) != AK_OK) return NULL;
    if (ak__store_wait_ge(w->store, "arrived", NTHREADS, 5000) != AK_OK) return NULL;
    snprintf(key, sizeof key, "addr/%d", w->index);
    snprintf(value, sizeof value, "value of rank %d", w->index);
    if (ak__store_set(w->store, key, value, strlen(value)) != AK_OK) return NULL;
    for (int peer = 0; peer < NTHREADS; peer++) {
        size_t len;
        snprintf(key, sizeof key, "addr/%d", (w->index + peer) % NTHREADS);
        if (ak__store_get(w->store, key, got, sizeof got - 1, &len, 5000) != AK_OK) return NULL;
        got[len] = '\0';
        snprintf(value, sizeof value, "value of rank %d", (w->index + peer) % NTHREADS);
        if (strcmp(got, value) != 0) return NULL;
    }
    if (ak__store_add(w->store, "done", 1, &after) != AK_OK) return NULL;
    if (ak__store_wait_ge(w->store, "done", NTHREADS, 5000) != AK_OK) return NULL;
    w->status = AK_OK;
    return NULL;
}

static void run_exchange(ak__store **stores) {
    pthread_t threads[NTHREADS];
    worker workers[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) {
        workers[i] = (worker){stores[i], i, 0, AK_ERR_INTERNAL};
        assert_int_equal(pthread_create(&threads[i], NULL, exchange, &workers[i]), 0);
    }
    int seen[NTHREADS + 1] = {0};
    for (int i = 0; i < NTHREADS; i++) {
        pthread_join(threads[i], NULL);
        assert_int_equal(workers[i].status, AK_OK);
        assert_true(workers[i].ticket >= 1 && workers[i].ticket <= NTHREADS);
        seen[workers[i].ticket]++;
    }
    for (int t = 1; t <= NTHREADS; t++) assert_int_equal(seen[t], 1); /* adds are atomic */
}

/* ---- in-memory store ------------------------------------------------------------------ */

static void check_basics(ak__store *s) {
    char buf[64];
    int64_t after;
    assert_int_equal(ak__store_set(s, "k", "one", 3), AK_OK);
    get_string(s, "k", buf, sizeof buf, 100);
    assert_string_equal(buf, "one");
    assert_int_equal(ak__store_set(s, "k", "three", 5), AK_OK); /* overwrite */
    get_string(s, "k", buf, sizeof buf, 100);
    assert_string_equal(buf, "three");
    size_t len = 0;
    assert_int_equal(ak__store_get(s, "k", buf, 2, &len, 100), AK_OK); /* short buffer */
    assert_int_equal(len, 5);
    assert_memory_equal(buf, "th", 2);
    assert_int_equal(ak__store_set(s, "empty", NULL, 0), AK_OK);
    /* cap 0 with a real buffer: store.c's memory get passes NULL to memcpy otherwise */
    assert_int_equal(ak__store_get(s, "empty", buf, 0, &len, 100), AK_OK);
    assert_int_equal(len, 0);
    assert_int_equal(ak__store_add(s, "n", 5, &after), AK_OK);
    assert_int_equal(after, 5);
    assert_int_equal(ak__store_add(s, "n", -7, &after), AK_OK);
    assert_int_equal(after, -2);
    get_string(s, "n", buf, sizeof buf, 100); /* counters read back as decimal text */
    assert_string_equal(buf, "-2");
    assert_int_equal(ak__store_wait_ge(s, "n", -2, 100), AK_OK);
    assert_int_equal(ak__store_wait_ge(s, "n", -1, 0), AK_ERR_TIMEOUT);
    /* limits are checked before any implementation sees them */
    char key[AK_STORE_MAX_KEY + 2];
    memset(key, 'k', sizeof key - 1);
    key[sizeof key - 1] = '\0';
    assert_int_equal(ak__store_set(s, key, "x", 1), AK_ERR_INVALID_ARG);
    key[AK_STORE_MAX_KEY] = '\0'; /* exactly the limit is fine */
    assert_int_equal(ak__store_set(s, key, "x", 1), AK_OK);
    get_string(s, key, buf, sizeof buf, 100);
    assert_string_equal(buf, "x");
    assert_int_equal(ak__store_set(s, "", "x", 1), AK_ERR_INVALID_ARG);
    static char big[AK_STORE_MAX_VALUE + 1];
    assert_int_equal(ak__store_set(s, "big", big, sizeof big), AK_ERR_INVALID_ARG);
    assert_error_has("too large");
}

static void check_get_timeout(ak__store *s, int timeout_ms) {
    char buf[8];
    size_t len;
    uint64_t t0 = ak_now_ns();
    assert_int_equal(ak__store_get(s, "never-set", buf, sizeof buf, &len, timeout_ms),
                     AK_ERR_TIMEOUT);
    int64_t took = elapsed_ms(t0);
    if (took < timeout_ms - 5 || took > timeout_ms + 1000)
        fail_msg("timeout of %d ms took %lld ms", timeout_ms, (long long)took);
    assert_error_has("never-set");
}

/* An add past INT64_MAX wraps the same way in both stores (no undefined overflow). */
static void check_add_wraps(ak__store *s) {
    int64_t after = 0;
    assert_int_equal(ak__store_add(s, "wrap", INT64_MAX, &after), AK_OK);
    assert_int_equal(ak__store_add(s, "wrap", 1, &after), AK_OK);
    assert_true(after == INT64_MIN);
}

static void test_memory_basics(void **state) {
    ak__store *s;
    assert_int_equal(ak__store_create_memory(&s), AK_OK);
    check_basics(s);
    check_add_wraps(s);
    check_get_timeout(s, 150);
    ak__store_free(s);
    ak__store_free(NULL);
}

static void test_memory_threads(void **state) {
    ak__store *stores[NTHREADS];
    assert_int_equal(ak__store_create_memory(&stores[0]), AK_OK);
    for (int i = 1; i < NTHREADS; i++) stores[i] = ak__store_retain(stores[0]);
    run_exchange(stores);
    for (int i = 0; i < NTHREADS; i++) ak__store_free(stores[i]);
}

/* ---- TCP ------------------------------------------------------------------------------ */

typedef struct fixture {
    ak__store_server *server;
    int port;
} fixture;

static int start_server(void **state) {
    fixture *f = calloc(1, sizeof *f);
    if (!f || ak__store_serve(LOCAL, 0, &f->port, &f->server) != AK_OK) return -1;
    *state = f;
    return 0;
}

static int stop_server(void **state) {
    fixture *f = *state;
    ak__store_server_stop(f->server); /* NULL when a test stopped it already */
    free(f);
    return 0;
}

static ak__store *connect_to(const fixture *f) {
    ak__store *s = NULL;
    assert_int_equal(ak__store_connect(LOCAL, f->port, 2000, &s), AK_OK);
    return s;
}

static void test_tcp_basics(void **state) {
    fixture *f = *state;
    assert_true(f->port > 0);
    ak__store *s = connect_to(f);
    check_basics(s);
    check_add_wraps(s);
    check_get_timeout(s, 150);
    /* the server answered the timeout itself: the connection is still in sync */
    char buf[16];
    assert_int_equal(ak__store_wait_ge(s, "n", 100, 50), AK_ERR_TIMEOUT);
    assert_error_has("'n'");
    assert_int_equal(ak__store_set(s, "after", "ok", 2), AK_OK);
    get_string(s, "after", buf, sizeof buf, 100);
    assert_string_equal(buf, "ok");
    /* a second client sees the first one's keys */
    ak__store *other = connect_to(f);
    get_string(other, "k", buf, sizeof buf, 100);
    assert_string_equal(buf, "three");
    ak__store_free(other);
    ak__store_free(s);
}

static void test_tcp_threads(void **state) {
    fixture *f = *state;
    ak__store *stores[NTHREADS];
    for (int i = 0; i < NTHREADS; i++) stores[i] = connect_to(f);
    run_exchange(stores);
    for (int i = 0; i < NTHREADS; i++) ak__store_free(stores[i]);
}

typedef struct waiter {
    ak__store *store;
    const char *key;
    int timeout_ms;
    char value[64];
    ak_status status;
    char error[256];
    int64_t took_ms;
} waiter;

static void *wait_for_key(void *arg) {
    waiter *w = arg;
    size_t len = 0;
    uint64_t t0 = ak_now_ns();
    w->status = ak__store_get(w->store, w->key, w->value, sizeof w->value - 1, &len,
                              w->timeout_ms);
    w->took_ms = elapsed_ms(t0);
    w->value[w->status == AK_OK ? len : 0] = '\0';
    snprintf(w->error, sizeof w->error, "%s", ak_last_error());
    return NULL;
}

static void test_tcp_get_blocks_until_set(void **state) {
    fixture *f = *state;
    ak__store *reader = connect_to(f), *writer = connect_to(f);
    waiter w = {.store = reader, .key = "late", .timeout_ms = 5000};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, wait_for_key, &w), 0);
    sleep_ms(100);
    assert_int_equal(ak__store_set(writer, "late", "here", 4), AK_OK);
    pthread_join(t, NULL);
    assert_int_equal(w.status, AK_OK);
    assert_string_equal(w.value, "here");
    assert_true(w.took_ms >= 90 && w.took_ms < 4000);
    ak__store_free(reader);
    ak__store_free(writer);
}

static void test_tcp_large_value(void **state) {
    fixture *f = *state;
    ak__store *s = connect_to(f);
    size_t n = AK_STORE_MAX_VALUE;
    unsigned char *value = malloc(n), *back = malloc(n);
    assert_non_null(value);
    assert_non_null(back);
    for (size_t i = 0; i < n; i++) value[i] = (unsigned char)(i * 131 + (i >> 12));
    assert_int_equal(ak__store_set(s, "blob", value, n), AK_OK);
    size_t len = 0;
    assert_int_equal(ak__store_get(s, "blob", back, n, &len, 1000), AK_OK);
    assert_int_equal(len, n);
    assert_memory_equal(back, value, n);
    /* a short buffer gets the prefix; the rest is drained so the next call works */
    memset(back, 0, n);
    assert_int_equal(ak__store_get(s, "blob", back, 1000, &len, 1000), AK_OK);
    assert_int_equal(len, n);
    assert_memory_equal(back, value, 1000);
    char buf[8];
    assert_int_equal(ak__store_set(s, "small", "s", 1), AK_OK);
    get_string(s, "small", buf, sizeof buf, 100);
    assert_string_equal(buf, "s");
    free(value);
    free(back);
    ak__store_free(s);
}

static void test_tcp_server_stopped_while_waiting(void **state) {
    fixture *f = *state;
    ak__store *s = connect_to(f);
    waiter w = {.store = s, .key = "never", .timeout_ms = 8000};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, wait_for_key, &w), 0);
    sleep_ms(100);
    ak__store_server_stop(f->server);
    f->server = NULL;
    pthread_join(t, NULL);
    assert_int_equal(w.status, AK_ERR_REMOTE);
    assert_true(w.took_ms < 3000);
    if (!strstr(w.error, "closed the connection")) fail_msg("error: %s", w.error);
    char port[16];
    snprintf(port, sizeof port, ":%d", f->port);
    if (!strstr(w.error, port)) fail_msg("error does not name the port: %s", w.error);
    int64_t after;
    assert_int_equal(ak__store_add(s, "x", 1, &after), AK_ERR_REMOTE); /* and stays failed */
    ak__store_free(s);
}

static void test_tcp_port_in_use(void **state) {
    fixture *f = *state;
    ak__store_server *second = NULL;
    int port = -1;
    assert_int_equal(ak__store_serve(LOCAL, f->port, &port, &second), AK_ERR_IO);
    assert_null(second);
    assert_error_has("cannot listen on 127.0.0.1:");
    assert_error_has("Address already in use");
    ak__store_server_stop(NULL);
    assert_int_equal(ak__store_serve(LOCAL, 70000, &port, &second), AK_ERR_INVALID_ARG);
}

/* A port nobody listens on: bound but not listening, so nothing else can take it. */
static int closed_port(int *fd_out) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof sa;
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &len) != 0)
        return -1;
    *fd_out = fd;
    return ntohs(sa.sin_port);
}

static void test_tcp_connect_times_out(void **state) {
    int fd;
    int port = closed_port(&fd);
    assert_true(port > 0);
    ak__store *s = NULL;
    uint64_t t0 = ak_now_ns();
    assert_int_equal(ak__store_connect(LOCAL, port, 300, &s), AK_ERR_TIMEOUT);
    int64_t took = elapsed_ms(t0);
    if (took < 290 || took > 1300) fail_msg("connect timeout of 300 ms took %lld ms", (long long)took);
    assert_null(s);
    char where[32];
    snprintf(where, sizeof where, "127.0.0.1:%d", port);
    assert_error_has(where);
    assert_error_has("is the store (rank 0) running?");
    close(fd);
    assert_int_equal(ak__store_connect(LOCAL, 0, 300, &s), AK_ERR_INVALID_ARG);
    assert_int_equal(ak__store_connect(NULL, port, 300, &s), AK_ERR_INVALID_ARG);
}

/* The client may start first: connect keeps retrying until the server appears. */
typedef struct late_server {
    int port;
    ak__store_server *server;
} late_server;

static void *serve_late(void *arg) {
    late_server *l = arg;
    sleep_ms(200);
    if (ak__store_serve(LOCAL, l->port, NULL, &l->server) != AK_OK) l->server = NULL;
    return NULL;
}

static void test_tcp_connect_retries(void **state) {
    int fd;
    late_server l = {closed_port(&fd), NULL};
    assert_true(l.port > 0);
    close(fd); /* free the port for the late server (a tiny race we accept in a test) */
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, serve_late, &l), 0);
    ak__store *s = NULL;
    ak_status st = ak__store_connect(LOCAL, l.port, 3000, &s);
    pthread_join(t, NULL);
    if (!l.server) skip(); /* someone else took the port meanwhile */
    assert_int_equal(st, AK_OK);
    int64_t after;
    assert_int_equal(ak__store_add(s, "c", 2, &after), AK_OK);
    assert_int_equal(after, 2);
    ak__store_free(s);
    ak__store_server_stop(l.server);
}

static int unauthenticated_connect(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_true(fd >= 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    return fd;
}

/* A connection past the handshake, for writing frames by hand. */
static int raw_connect(int port) {
    int fd = unauthenticated_connect(port);
    ak__auth_key key;
    assert_int_equal(ak__auth_key_from_env(&key), AK_OK);
    assert_int_equal(ak__auth_client(fd, &key, AK_AUTH_ROLE_STORE, ak_now_ns() + 3000000000u,
                                     "test store"), AK_OK);
    return fd;
}

/* Sends bytes and expects the server to hang up on us: recv ends with 0 or an error,
 * after at most a refusal message and never a reply. */
static void expect_dropped_on(int fd, const void *bytes, size_t len) {
    assert_int_equal(send(fd, bytes, len, MSG_NOSIGNAL), (ssize_t)len);
    struct timeval tv = {3, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char c[128];
    size_t got = 0;
    ssize_t n;
    while ((n = recv(fd, c, sizeof c, 0)) > 0) got += (size_t)n;
    assert_true(n == 0 || errno == ECONNRESET);
    assert_true(got <= AK_AUTH_CHALLENGE_BYTES);
    close(fd);
}

static void expect_dropped(int port, const void *bytes, size_t len) {
    expect_dropped_on(raw_connect(port), bytes, len);
}

static void put32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* A request header as the client writes it (see store_tcp.h). */
static void make_header(unsigned char *h, int op, int key_len, uint32_t value_len) {
    memset(h, 0, 28);
    put32(h, 0x31534b41u);
    h[4] = (unsigned char)op;
    h[5] = (unsigned char)key_len;
    put32(h + 8, 1);
    put32(h + 12, value_len);
}

static void test_tcp_garbage(void **state) {
    fixture *f = *state;
    unsigned char junk[4096];
    srand(7);
    for (size_t i = 0; i < sizeof junk; i++) junk[i] = (unsigned char)rand();
    expect_dropped_on(unauthenticated_connect(f->port), junk, sizeof junk); /* no handshake */
    expect_dropped(f->port, junk, sizeof junk);
    unsigned char h[40];
    make_header(h, 9, 1, 0); /* unknown op */
    expect_dropped(f->port, h, 29);
    make_header(h, 1, 1, (uint32_t)AK_STORE_MAX_VALUE + 1); /* oversize value */
    expect_dropped(f->port, h, 29);
    make_header(h, 2, 1, 0xffffffffu); /* a GET carrying a value */
    expect_dropped(f->port, h, 29);
    make_header(h, 2, 0, 0); /* empty key */
    expect_dropped(f->port, h, 28);
    make_header(h, 1, 3, 0); /* NUL inside the key */
    memcpy(h + 28, "a\0b", 3);
    expect_dropped(f->port, h, 31);
    /* a truncated frame, then a close; and a waiter that leaves while parked */
    int fd = raw_connect(f->port);
    assert_int_equal(send(fd, h, 10, MSG_NOSIGNAL), 10);
    close(fd);
    make_header(h, 2, 4, 0);
    put32(h + 24, 60000);
    memcpy(h + 28, "gone", 4);
    fd = raw_connect(f->port);
    assert_int_equal(send(fd, h, 32, MSG_NOSIGNAL), 32);
    sleep_ms(20);
    close(fd);
    /* the server still serves, including the key the departed waiter wanted */
    ak__store *s = connect_to(f);
    char buf[16];
    assert_int_equal(ak__store_set(s, "gone", "late", 4), AK_OK);
    get_string(s, "gone", buf, sizeof buf, 1000);
    assert_string_equal(buf, "late");
    ak__store_free(s);
}

int main(void) {
    if (ak_init() != AK_OK) return 1; /* so AK_LOG=debug shows the breadcrumbs */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_memory_basics),
        cmocka_unit_test(test_memory_threads),
        cmocka_unit_test_setup_teardown(test_tcp_basics, start_server, stop_server),
        cmocka_unit_test_setup_teardown(test_tcp_threads, start_server, stop_server),
        cmocka_unit_test_setup_teardown(test_tcp_get_blocks_until_set, start_server, stop_server),
        cmocka_unit_test_setup_teardown(test_tcp_large_value, start_server, stop_server),
        cmocka_unit_test_setup_teardown(test_tcp_server_stopped_while_waiting, start_server,
                                        stop_server),
        cmocka_unit_test_setup_teardown(test_tcp_port_in_use, start_server, stop_server),
        cmocka_unit_test(test_tcp_connect_times_out),
        cmocka_unit_test(test_tcp_connect_retries),
        cmocka_unit_test_setup_teardown(test_tcp_garbage, start_server, stop_server),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
