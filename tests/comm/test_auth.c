/* Tests of comm authentication (src/comm/bootstrap/auth.c): the job secret from the
 * environment and from a file (a file others can read is refused); a foreign client
 * without the secret or with a wrong one is refused by the store and by a TCP transport
 * listener, the refusal is logged with its address and reason, and the real peers go on
 * unaffected; an oversize frame after a good handshake is dropped, naming the cap; the
 * secret never appears in the bytes either side sends (a relay records them).
 * tests/comm/test_auth_job.sh does the same against a running 3-rank job. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "comm/bootstrap/auth.h"
#include "comm/bootstrap/store.h"
#include "comm/transport/transport.h"

#define SECRET "0123456789abcdef-test-job-secret-of-this-process"
#define WRONG "fedcba9876543210-another-jobs-secret-entirely"
#define LOCAL "127.0.0.1"
#define SECONDS(s) (ak_now_ns() + (uint64_t)(s) * 1000000000u)

static void assert_error_has(const char *needle) {
    if (!strstr(ak_last_error(), needle))
        fail_msg("last error '%s' does not contain '%s'", ak_last_error(), needle);
}

/* ---- the log, captured ---------------------------------------------------------------- */

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char log_text[16384];

static void capture_log(ak_log_level level, ak_subsys subsys, const char *line, void *user) {
    (void)level, (void)subsys, (void)user;
    pthread_mutex_lock(&log_lock);
    size_t n = strlen(log_text);
    snprintf(log_text + n, sizeof log_text - n, "%s\n", line);
    pthread_mutex_unlock(&log_lock);
}

static void log_reset(void) {
    pthread_mutex_lock(&log_lock);
    log_text[0] = '\0';
    pthread_mutex_unlock(&log_lock);
}

/* Waits up to 2 s for the server thread to log a line containing both needles. */
static void assert_logged(const char *a, const char *b) {
    for (int i = 0; i < 200; i++) {
        pthread_mutex_lock(&log_lock);
        int found = 0;
        for (const char *line = log_text; line && *line && !found;) {
            const char *end = strchr(line, '\n');
            size_t n = end ? (size_t)(end - line) : strlen(line);
            char one[1024];
            snprintf(one, sizeof one, "%.*s", (int)(n < sizeof one ? n : sizeof one - 1), line);
            found = strstr(one, a) && strstr(one, b);
            line = end ? end + 1 : NULL;
        }
        pthread_mutex_unlock(&log_lock);
        if (found) return;
        usleep(10000);
    }
    fail_msg("no log line with '%s' and '%s'; the log:\n%s", a, b, log_text);
}

/* ---- helpers -------------------------------------------------------------------------- */

static int connect_local(int port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_true(fd >= 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    return fd;
}

static int local_port_of(int fd) {
    struct sockaddr_in sa;
    socklen_t len = sizeof sa;
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    return ntohs(sa.sin_port);
}

/* Reads until the peer closes (3 s at most); returns 1 when it did. */
static int closed_by_peer(int fd) {
    struct timeval tv = {3, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char buf[256];
    ssize_t n;
    while ((n = recv(fd, buf, sizeof buf, 0)) > 0) {
    }
    return n == 0 || errno == ECONNRESET;
}

static void use_secret(const char *secret) {
    unsetenv("AK_JOB_SECRET_FILE");
    if (secret) setenv("AK_JOB_SECRET", secret, 1);
    else unsetenv("AK_JOB_SECRET");
}

/* A store server with the job secret, and a legitimate client's round trip through it. */
static void check_store_serves(int port) {
    ak__store *s = NULL;
    assert_int_equal(ak__store_connect(LOCAL, port, 3000, &s), AK_OK);
    int64_t after = 0;
    assert_int_equal(ak__store_add(s, "count", 1, &after), AK_OK);
    assert_true(after >= 1);
    ak__store_free(s);
}

/* ---- the key ------------------------------------------------------------------------ */

static void test_key_from_env(void **state) {
    (void)state;
    ak__auth_key key;
    use_secret(NULL);
    assert_int_equal(ak__auth_key_from_env(&key), AK_OK);
    assert_true(key.same_user);
    use_secret("short");
    assert_int_equal(ak__auth_key_from_env(&key), AK_ERR_INVALID_ARG);
    assert_error_has("AK_JOB_SECRET has 5 bytes");
    use_secret(SECRET);
    assert_int_equal(ak__auth_key_from_env(&key), AK_OK);
    assert_false(key.same_user);
    assert_int_equal(key.len, strlen(SECRET));
    char hex[65], hex2[65];
    assert_int_equal(ak__auth_generate_secret(hex), AK_OK);
    assert_int_equal(ak__auth_generate_secret(hex2), AK_OK);
    assert_int_equal(strlen(hex), 64);
    assert_true(strspn(hex, "0123456789abcdef") == 64);
    assert_string_not_equal(hex, hex2);
}

static void test_secret_file_mode(void **state) {
    (void)state;
    char path[] = "/tmp/ak-test-secret-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, SECRET "\n", strlen(SECRET) + 1), (ssize_t)strlen(SECRET) + 1);
    close(fd);
    unsetenv("AK_JOB_SECRET");
    setenv("AK_JOB_SECRET_FILE", path, 1);
    ak__auth_key key;
    assert_int_equal(chmod(path, 0644), 0); /* world readable: refused */
    assert_int_equal(ak__auth_key_from_env(&key), AK_ERR_INVALID_ARG);
    assert_error_has("mode 0644");
    assert_error_has("AK_JOB_SECRET_FILE");
    assert_int_equal(chmod(path, 0640), 0); /* group readable: refused */
    assert_int_equal(ak__auth_key_from_env(&key), AK_ERR_INVALID_ARG);
    assert_error_has("mode 0640");
    /* refused by the store too: no server starts on an unsafe secret */
    ak__store_server *server = NULL;
    assert_int_equal(ak__store_serve(LOCAL, 0, NULL, &server), AK_ERR_INVALID_ARG);
    assert_null(server);
    assert_int_equal(chmod(path, 0600), 0);
    assert_int_equal(ak__auth_key_from_env(&key), AK_OK);
    assert_int_equal(key.len, strlen(SECRET)); /* the newline is not part of it */
    assert_memory_equal(key.secret, SECRET, strlen(SECRET));
    unlink(path);
    assert_int_equal(ak__auth_key_from_env(&key), AK_ERR_IO); /* gone */
    unsetenv("AK_JOB_SECRET_FILE");
}

/* Same-user mode (no secret) allows loopback only, naming the variable to set. */
static void test_no_secret_needs_loopback(void **state) {
    (void)state;
    use_secret(NULL);
    ak__store_server *server = NULL;
    assert_int_equal(ak__store_serve("0.0.0.0", 0, NULL, &server), AK_ERR_INVALID_ARG);
    assert_error_has("AK_JOB_SECRET");
    int port = 0;
    assert_int_equal(ak__store_serve(LOCAL, 0, &port, &server), AK_OK);
    check_store_serves(port);
    ak__store_server_stop(server);
}

/* A store server on loopback, for a job whose secret is SECRET; *port gets its port. */
static ak__store_server *serve_with_secret(int *port) {
    use_secret(SECRET);
    ak__store_server *server = NULL;
    *port = 0;
    assert_int_equal(ak__store_serve(LOCAL, 0, port, &server), AK_OK);
    return server;
}

/* ---- the store refuses strangers ---------------------------------------------------- */

static void test_store_refuses_foreign(void **state) {
    (void)state;
    int port = 0;
    ak__store_server *server = serve_with_secret(&port);
    ak__store *job = NULL; /* a job's client, connected before the strangers come */
    assert_int_equal(ak__store_connect(LOCAL, port, 3000, &job), AK_OK);
    assert_int_equal(ak__store_set(job, "k", "v1", 2), AK_OK);
    log_reset();

    ak__auth_key wrong, none;
    assert_int_equal(ak__auth_key_from_secret(WRONG, &wrong), AK_OK);
    use_secret(NULL);
    assert_int_equal(ak__auth_key_from_env(&none), AK_OK);
    use_secret(SECRET);

    /* a wrong secret: the client sees the server's proof fail and the server, its own */
    int fd = connect_local(port);
    int from = local_port_of(fd);
    assert_int_equal(ak__auth_client(fd, &wrong, AK_AUTH_ROLE_STORE, SECONDS(3), "store"),
                     AK_ERR_REMOTE);
    assert_error_has("does not know this job's secret");
    close(fd);
    /* a client that goes on regardless: the server refuses its proof and logs it */
    ak__auth_session s = {.key = &wrong, .role = AK_AUTH_ROLE_STORE};
    unsigned char hello[AK_AUTH_HELLO_BYTES], ch[AK_AUTH_CHALLENGE_BYTES];
    unsigned char resp[AK_AUTH_RESPONSE_BYTES] = {0x41, 0x4b, 0x41, 0x33};
    fd = connect_local(port);
    from = local_port_of(fd);
    assert_int_equal(ak__auth_client_hello(&s, hello), AK_OK);
    assert_int_equal(send(fd, hello, sizeof hello, 0), (ssize_t)sizeof hello);
    assert_int_equal(recv(fd, ch, sizeof ch, MSG_WAITALL), (ssize_t)sizeof ch);
    assert_int_equal(send(fd, resp, sizeof resp, 0), (ssize_t)sizeof resp);
    assert_true(closed_by_peer(fd));
    close(fd);
    char addr[64];
    snprintf(addr, sizeof addr, "refused 127.0.0.1:%d", from);
    assert_logged(addr, "wrong job secret");

    /* no secret at all (same-user hello to a server with a secret) */
    fd = connect_local(port);
    from = local_port_of(fd);
    assert_int_equal(ak__auth_client(fd, &none, AK_AUTH_ROLE_STORE, SECONDS(3), "store"),
                     AK_ERR_REMOTE);
    assert_error_has("one side has a job secret");
    close(fd);
    snprintf(addr, sizeof addr, "refused 127.0.0.1:%d", from);
    assert_logged(addr, "one side has a job secret");

    /* a store request without any handshake */
    fd = connect_local(port);
    from = local_port_of(fd);
    unsigned char junk[64];
    memset(junk, 0, sizeof junk);
    memcpy(junk, "AKS1", 4);
    assert_int_equal(send(fd, junk, sizeof junk, 0), (ssize_t)sizeof junk);
    assert_true(closed_by_peer(fd));
    close(fd);
    snprintf(addr, sizeof addr, "refused 127.0.0.1:%d", from);
    assert_logged(addr, "not an accelkit handshake");

    /* the right role only: a transport's proof is no store's */
    fd = connect_local(port);
    ak__auth_key right;
    assert_int_equal(ak__auth_key_from_env(&right), AK_OK);
    assert_int_equal(ak__auth_client(fd, &right, AK_AUTH_ROLE_TCP, SECONDS(3), "store"),
                     AK_ERR_REMOTE);
    close(fd);

    /* the job is unaffected: its connection and new ones work, the keys are intact */
    char buf[8];
    size_t len = 0;
    assert_int_equal(ak__store_get(job, "k", buf, sizeof buf, &len, 1000), AK_OK);
    assert_int_equal(len, 2);
    assert_memory_equal(buf, "v1", 2);
    check_store_serves(port);
    ak__store_free(job);
    ak__store_server_stop(server);
}

/* A stranger that connects and says nothing is dropped after AK_AUTH_HANDSHAKE_MS and
 * holds nobody up meanwhile. */
static void test_store_silent_stranger(void **state) {
    (void)state;
    int port = 0;
    ak__store_server *server = serve_with_secret(&port);
    int fd = connect_local(port);
    uint64_t t0 = ak_now_ns();
    check_store_serves(port); /* served while the stranger sits there */
    assert_true(ak_now_ns() - t0 < 1000000000u);
    struct timeval tv = {AK_AUTH_HANDSHAKE_MS / 1000 + 3, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char c;
    assert_int_equal(recv(fd, &c, 1, 0), 0); /* dropped */
    close(fd);
    ak__store_server_stop(server);
}

/* An oversize frame after a good handshake: dropped, the cap named in the log, nothing of
 * the claimed size allocated (ASan would see 4 GiB). */
static void test_store_oversize_frame(void **state) {
    (void)state;
    int port = 0;
    ak__store_server *server = serve_with_secret(&port);
    log_reset();
    ak__auth_key key;
    assert_int_equal(ak__auth_key_from_env(&key), AK_OK);
    int fd = connect_local(port);
    assert_int_equal(ak__auth_client(fd, &key, AK_AUTH_ROLE_STORE, SECONDS(3), "store"), AK_OK);
    unsigned char h[28] = {0x41, 0x4b, 0x53, 0x31, 1 /* SET */, 1 /* key length */};
    h[12] = h[13] = h[14] = h[15] = 0xff; /* value length 4 GiB - 1 */
    assert_int_equal(send(fd, h, sizeof h, 0), (ssize_t)sizeof h);
    assert_true(closed_by_peer(fd));
    close(fd);
    assert_logged("value length 4294967295 over the cap of 1048576 bytes", "refused 127.0.0.1");
    check_store_serves(port);
    ak__store_server_stop(server);
}

/* ---- the secret never goes on the wire ---------------------------------------------- */

typedef struct relay {
    int listen_fd, server_port;
    unsigned char up[65536], down[65536]; /* client -> server, server -> client */
    size_t up_len, down_len;
} relay;

static void record(unsigned char *log, size_t *len, const unsigned char *data, size_t n) {
    size_t room = 65536 - *len;
    memcpy(log + *len, data, n < room ? n : room);
    *len += n < room ? n : room;
}

/* Forwards one connection both ways, recording each direction, until either side closes. */
static void *relay_main(void *arg) {
    relay *r = arg;
    int a = accept(r->listen_fd, NULL, NULL);
    if (a < 0) return NULL;
    int b = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)r->server_port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (connect(b, (struct sockaddr *)&sa, sizeof sa) != 0) {
        close(a);
        close(b);
        return NULL;
    }
    for (;;) {
        struct pollfd p[2] = {{a, POLLIN, 0}, {b, POLLIN, 0}};
        if (poll(p, 2, 5000) <= 0) break;
        unsigned char buf[4096];
        ssize_t n = 0;
        if (p[0].revents) {
            if ((n = recv(a, buf, sizeof buf, 0)) <= 0) break;
            record(r->up, &r->up_len, buf, (size_t)n);
            if (send(b, buf, (size_t)n, MSG_NOSIGNAL) != n) break;
        }
        if (p[1].revents) {
            if ((n = recv(b, buf, sizeof buf, 0)) <= 0) break;
            record(r->down, &r->down_len, buf, (size_t)n);
            if (send(a, buf, (size_t)n, MSG_NOSIGNAL) != n) break;
        }
    }
    close(a);
    close(b);
    return NULL;
}

static void test_secret_never_on_wire(void **state) {
    (void)state;
    use_secret(SECRET);
    ak__store_server *server = NULL;
    static relay r;
    memset(&r, 0, sizeof r);
    assert_int_equal(ak__store_serve(LOCAL, 0, &r.server_port, &server), AK_OK);
    r.listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(r.listen_fd, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(listen(r.listen_fd, 1), 0);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, relay_main, &r), 0);
    ak__store *s = NULL;
    assert_int_equal(ak__store_connect(LOCAL, local_port_of(r.listen_fd), 3000, &s), AK_OK);
    assert_int_equal(ak__store_set(s, "key", "value", 5), AK_OK);
    char buf[8];
    size_t len;
    assert_int_equal(ak__store_get(s, "key", buf, sizeof buf, &len, 1000), AK_OK);
    ak__store_free(s);
    pthread_join(t, NULL);
    close(r.listen_fd);
    ak__store_server_stop(server);
    /* the whole session went through: handshake (40 + 36 up, 72 + 8 down) and requests */
    assert_true(r.up_len >= 40 + 36 + 2 * 28);
    assert_true(r.down_len >= 72 + 8 + 2 * 24);
    assert_non_null(memmem(r.up, r.up_len, "value", 5));
    /* the secret is in neither direction, nor any 8-byte piece of it */
    const char *secret = SECRET;
    for (size_t i = 0; i + 8 <= strlen(secret); i++) {
        assert_null(memmem(r.up, r.up_len, secret + i, 8));
        assert_null(memmem(r.down, r.down_len, secret + i, 8));
    }
}

/* ---- a TCP transport listener refuses strangers -------------------------------------- */

typedef struct tp_rank {
    ak__store *store;
    int rank;
    ak__transport tp;
    ak_status status;
    char error[256];
} tp_rank;

static void *tp_rank_main(void *arg) {
    tp_rank *r = arg;
    int peer = 1 - r->rank;
    ak__transport_setup su = {r->store, "auth", r->rank, 2, &peer, 1, 2, 5000, LOCAL, NULL, NULL};
    r->status = ak__tcp_transport_create(&su, &r->tp);
    if (r->status != AK_OK) {
        snprintf(r->error, sizeof r->error, "%s", ak_last_error());
        return NULL;
    }
    /* one message each way, checked */
    uint32_t out = 0xA0 + (uint32_t)r->rank, in = 0;
    ak__p2p ops[2] = {{.peer = peer, .is_send = 1, .buf = &out, .bytes = 4, .tag = 7},
                      {.peer = peer, .is_send = 0, .buf = &in, .bytes = 4, .tag = 7}};
    for (int i = 0; i < 2 && r->status == AK_OK; i++) r->status = r->tp.vt->post(r->tp.ctx, &ops[i]);
    while (r->status == AK_OK && !(ops[0].complete && ops[1].complete))
        r->status = r->tp.vt->progress(r->tp.ctx, 1000);
    if (r->status == AK_OK && in != 0xA0 + (uint32_t)peer) r->status = AK_ERR_INTERNAL;
    r->tp.vt->destroy(r->tp.ctx);
    return NULL;
}

static void test_transport_refuses_foreign(void **state) {
    (void)state;
    use_secret(SECRET);
    ak__store *store = NULL;
    assert_int_equal(ak__store_create_memory(&store), AK_OK);
    tp_rank ranks[2] = {{.store = store, .rank = 0}, {.store = store, .rank = 1}};
    log_reset();
    pthread_t t1, t0;
    /* rank 1 listens (the lower rank connects); strangers come before rank 0 does */
    assert_int_equal(pthread_create(&t1, NULL, tp_rank_main, &ranks[1]), 0);
    char addr[64];
    size_t len = 0;
    assert_int_equal(ak__store_get(store, "auth/tcp/1", addr, sizeof addr - 1, &len, 3000), AK_OK);
    addr[len] = '\0';
    int port = atoi(strrchr(addr, ':') + 1);
    ak__auth_key wrong, none;
    assert_int_equal(ak__auth_key_from_secret(WRONG, &wrong), AK_OK);
    use_secret(NULL);
    assert_int_equal(ak__auth_key_from_env(&none), AK_OK);
    use_secret(SECRET);
    int fd = connect_local(port);
    assert_int_equal(ak__auth_client(fd, &wrong, AK_AUTH_ROLE_TCP, SECONDS(3), "rank 1"),
                     AK_ERR_REMOTE);
    close(fd);
    fd = connect_local(port);
    int from = local_port_of(fd);
    assert_int_equal(ak__auth_client(fd, &none, AK_AUTH_ROLE_TCP, SECONDS(3), "rank 1"),
                     AK_ERR_REMOTE);
    close(fd);
    char needle[64];
    snprintf(needle, sizeof needle, "refused a connection from 127.0.0.1:%d", from);
    assert_logged(needle, "one side has a job secret");
    /* a fake hello of rank 0 without any handshake */
    fd = connect_local(port);
    unsigned char junk[AK_AUTH_HELLO_BYTES] = {0x54, 0x41, 0x4b, 0x48};
    assert_int_equal(send(fd, junk, sizeof junk, 0), (ssize_t)sizeof junk);
    assert_true(closed_by_peer(fd));
    close(fd);
    assert_logged("tcp rank 1 refused a connection", "not an accelkit handshake");
    /* rank 0 now: the pair connects and exchanges its messages */
    assert_int_equal(pthread_create(&t0, NULL, tp_rank_main, &ranks[0]), 0);
    pthread_join(t0, NULL);
    pthread_join(t1, NULL);
    for (int r = 0; r < 2; r++)
        if (ranks[r].status != AK_OK) fail_msg("rank %d: %s", r, ranks[r].error);
    ak__store_free(store);
}

int main(void) {
    if (ak_init() != AK_OK) return 1;
    ak_log_set_callback(capture_log, NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_key_from_env),
        cmocka_unit_test(test_secret_file_mode),
        cmocka_unit_test(test_no_secret_needs_loopback),
        cmocka_unit_test(test_store_refuses_foreign),
        cmocka_unit_test(test_store_silent_stranger),
        cmocka_unit_test(test_store_oversize_frame),
        cmocka_unit_test(test_secret_never_on_wire),
        cmocka_unit_test(test_transport_refuses_foreign),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
