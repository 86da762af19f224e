/* Bootstrap store over TCP, the client: an ak__store whose calls send one framed request
 * (wire format: store_tcp.h) and wait for its reply with a deadline, over one connection
 * made with retries until the server is up and authenticated (auth.h) before use. */
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "comm/bootstrap/auth.h"
#include "comm/bootstrap/store_tcp.h"
#include "core/check.h"
#include "core/le_bytes.h"

typedef struct tcp_store {
    ak__store base;
    pthread_mutex_t lock; /* one request at a time on the connection */
    int fd;
    int broken; /* the stream lost sync (error, local timeout): every call fails */
    uint32_t seq;
    int io_timeout_ms; /* for the bytes of a request and reply; waits add their own */
    int port;
    char addr[256];
} tcp_store;

static ak_status conn_lost(tcp_store *t, const char *what) {
    t->broken = 1;
    return AK_FAIL(AK_ERR_REMOTE, "store at %s:%d closed the connection (%s)", t->addr, t->port,
                   what);
}

/* Waits for fd to become ready for `events` before deadline. */
static ak_status conn_wait(tcp_store *t, short events, int64_t deadline, const char *what) {
    for (;;) {
        struct pollfd p = {.fd = t->fd, .events = events};
        int rc;
        AK_SYSCHECK(rc, poll(&p, 1, ms_left(deadline)));
        if (rc < 0) {
            t->broken = 1;
            return AK_FAIL(AK_ERR_IO, "store at %s:%d: poll: %s", t->addr, t->port,
                           strerror(errno));
        }
        if (rc > 0) return AK_OK; /* errors and hang-ups show up in the next send/recv */
        if (ms_left(deadline) == 0) {
            t->broken = 1; /* a late reply would arrive where the next one is expected */
            return AK_FAIL(AK_ERR_TIMEOUT, "store at %s:%d: no progress %s before the deadline",
                           t->addr, t->port, what);
        }
    }
}

static ak_status conn_send(tcp_store *t, const void *buf, size_t len, int64_t deadline) {
    const unsigned char *p = buf;
    while (len > 0) {
        ssize_t n;
        AK_SYSCHECK(n, send(t->fd, p, len, MSG_NOSIGNAL));
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            AK_CHECK(conn_wait(t, POLLOUT, deadline, "sending"));
            continue;
        }
        if (n < 0) return conn_lost(t, strerror(errno));
        p += n;
        len -= (size_t)n;
    }
    return AK_OK;
}

/* Receives len bytes into buf; buf NULL discards them. */
static ak_status conn_recv(tcp_store *t, void *buf, size_t len, int64_t deadline) {
    unsigned char scratch[4096];
    unsigned char *p = buf;
    while (len > 0) {
        size_t want = p ? len : (len < sizeof scratch ? len : sizeof scratch);
        ssize_t n;
        AK_SYSCHECK(n, recv(t->fd, p ? p : scratch, want, 0));
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            AK_CHECK(conn_wait(t, POLLIN, deadline, "waiting for the reply"));
            continue;
        }
        if (n == 0) return conn_lost(t, "end of stream");
        if (n < 0) return conn_lost(t, strerror(errno));
        if (p) p += n;
        len -= (size_t)n;
    }
    return AK_OK;
}

typedef struct request {
    int op;
    const char *key;
    const void *value;
    size_t value_len;
    int64_t arg;
    int timeout_ms;
    void *buf; /* GET: where the value goes (cap bytes) */
    size_t cap;
} request;

typedef struct reply {
    ak_status status;
    size_t value_len;
    int64_t arg;
} reply;

static ak_status conn_read_reply(tcp_store *t, const request *rq, int64_t deadline,
                                 reply *rp) {
    unsigned char h[REP_HDR];
    AK_CHECK(conn_recv(t, h, REP_HDR, deadline));
    rp->status = (ak_status)h[4];
    rp->value_len = ak__get_u32(h + 12);
    rp->arg = (int64_t)ak__get_u64(h + 16);
    if (ak__get_u32(h) != WIRE_MAGIC || h[5] || h[6] || h[7] || ak__get_u32(h + 8) != t->seq ||
        (rp->status != AK_OK && rp->status != AK_ERR_TIMEOUT) || (rq->op != OP_GET && rp->value_len)) {
        t->broken = 1;
        return AK_FAIL(AK_ERR_REMOTE, "store at %s:%d sent a malformed reply (not an accelkit "
                       "store?)", t->addr, t->port);
    }
    if (rp->value_len > AK_STORE_MAX_VALUE) { /* nothing of it is read, let alone allocated */
        t->broken = 1;
        return AK_FAIL(AK_ERR_REMOTE, "store at %s:%d sent a value of %zu bytes, over the cap of "
                       "%zu bytes (AK_STORE_MAX_VALUE)", t->addr, t->port, rp->value_len,
                       AK_STORE_MAX_VALUE);
    }
    size_t keep = rp->value_len < rq->cap ? rp->value_len : rq->cap;
    AK_CHECK(conn_recv(t, rq->buf, keep, deadline));
    return conn_recv(t, NULL, rp->value_len - keep, deadline);
}

/* Sends one request and reads its reply; called with the lock held. */
static ak_status conn_roundtrip(tcp_store *t, const request *rq, reply *rp) {
    if (t->broken)
        return AK_FAIL(AK_ERR_REMOTE, "store at %s:%d: the connection was lost by an earlier "
                       "call (closed or timed out)", t->addr, t->port);
    size_t key_len = strlen(rq->key);
    int timeout_ms = rq->timeout_ms > 0 ? rq->timeout_ms : 0;
    unsigned char h[REQ_HDR + AK_STORE_MAX_KEY];
    memset(h, 0, REQ_HDR);
    ak__put_u32(h, WIRE_MAGIC);
    h[4] = (unsigned char)rq->op;
    h[5] = (unsigned char)key_len;
    ak__put_u32(h + 8, ++t->seq);
    ak__put_u32(h + 12, (uint32_t)rq->value_len);
    ak__put_u64(h + 16, (uint64_t)rq->arg);
    ak__put_u32(h + 24, (uint32_t)timeout_ms);
    memcpy(h + REQ_HDR, rq->key, key_len);
    int64_t deadline = now_ms() + t->io_timeout_ms;
    AK_CHECK(conn_send(t, h, REQ_HDR + key_len, deadline));
    AK_CHECK(conn_send(t, rq->value, rq->value_len, deadline));
    /* the server answers a wait at its own deadline; ours adds room for the transfer */
    return conn_read_reply(t, rq, now_ms() + timeout_ms + t->io_timeout_ms, rp);
}

static ak_status tcp_call(ak__store *s, const request *rq, reply *rp) {
    tcp_store *t = (tcp_store *)s;
    pthread_mutex_lock(&t->lock);
    ak_status st = conn_roundtrip(t, rq, rp);
    pthread_mutex_unlock(&t->lock);
    return st;
}

static ak_status tcp_set(ak__store *s, const char *key, const void *value, size_t len) {
    request rq = {.op = OP_SET, .key = key, .value = value, .value_len = len};
    reply rp;
    return tcp_call(s, &rq, &rp);
}

static ak_status tcp_get(ak__store *s, const char *key, void *buf, size_t cap, size_t *len,
                         int timeout_ms) {
    request rq = {.op = OP_GET, .key = key, .timeout_ms = timeout_ms, .buf = buf, .cap = cap};
    reply rp;
    AK_CHECK(tcp_call(s, &rq, &rp));
    if (rp.status == AK_ERR_TIMEOUT)
        return AK_FAIL(AK_ERR_TIMEOUT, "store: waited %d ms for key '%s'", timeout_ms, key);
    *len = rp.value_len;
    return AK_OK;
}

static ak_status tcp_add(ak__store *s, const char *key, int64_t delta, int64_t *after) {
    request rq = {.op = OP_ADD, .key = key, .arg = delta};
    reply rp;
    AK_CHECK(tcp_call(s, &rq, &rp));
    *after = rp.arg;
    return AK_OK;
}

static ak_status tcp_wait_ge(ak__store *s, const char *key, int64_t value, int timeout_ms) {
    request rq = {.op = OP_WAIT_GE, .key = key, .arg = value, .timeout_ms = timeout_ms};
    reply rp;
    AK_CHECK(tcp_call(s, &rq, &rp));
    if (rp.status == AK_ERR_TIMEOUT)
        return AK_FAIL(AK_ERR_TIMEOUT, "store: waited %d ms for key '%s' to reach %lld",
                       timeout_ms, key, (long long)value);
    return AK_OK;
}

static void tcp_destroy(ak__store *s) {
    tcp_store *t = (tcp_store *)s;
    close_fd(t->fd);
    pthread_mutex_destroy(&t->lock);
    free(t);
}

static ak_status tcp_local_address(ak__store *s, char *buf, size_t cap) {
    struct sockaddr_in sa;
    socklen_t len = sizeof sa;
    if (getsockname(((tcp_store *)s)->fd, (struct sockaddr *)&sa, &len) != 0 ||
        sa.sin_family != AF_INET || !inet_ntop(AF_INET, &sa.sin_addr, buf, (socklen_t)cap))
        return AK_FAIL(AK_ERR_IO, "store: no IPv4 address of this end: %s", strerror(errno));
    return AK_OK;
}

static const ak__store_ops tcp_ops = {tcp_set, tcp_get, tcp_add, tcp_wait_ge, tcp_destroy,
                                      tcp_local_address};

/* A loopback connect to a closed port in the ephemeral range can connect to itself
 * (simultaneous open); such a socket must count as refused. */
static int is_self_connect(int fd) {
    struct sockaddr_storage a, b;
    socklen_t la = sizeof a, lb = sizeof b;
    if (getsockname(fd, (struct sockaddr *)&a, &la) != 0) return 0;
    if (getpeername(fd, (struct sockaddr *)&b, &lb) != 0) return 0;
    return la == lb && memcmp(&a, &b, la) == 0;
}

/* One non-blocking connect to ai before deadline; the socket, or -1 with errno set. */
static int connect_one(const struct addrinfo *ai, int64_t deadline) {
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                    ai->ai_protocol);
    if (fd < 0) return -1;
    int rc, err = 0;
    AK_SYSCHECK(rc, connect(fd, ai->ai_addr, ai->ai_addrlen));
    if (rc != 0 && errno != EINPROGRESS) err = errno;
    if (rc != 0 && !err) {
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        AK_SYSCHECK(rc, poll(&p, 1, ms_left(deadline)));
        socklen_t len = sizeof err;
        if (rc < 0) err = errno;
        else if (rc == 0) err = ETIMEDOUT;
        else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    }
    if (!err && is_self_connect(fd)) err = ECONNREFUSED;
    if (err) {
        close_fd(fd);
        errno = err;
        return -1;
    }
    return fd;
}

/* One attempt over every address of addr:port. Returns the socket or -1; *err gets the
 * reason and *permanent is set when retrying cannot help (the name does not resolve). */
static int connect_attempt(const char *addr, int port, int64_t deadline, char *err,
                           size_t err_cap, int *permanent) {
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    char service[16];
    snprintf(service, sizeof service, "%d", port);
    int gai = getaddrinfo(addr, service, &hints, &res);
    if (gai != 0) {
        snprintf(err, err_cap, "%s", gai == EAI_SYSTEM ? strerror(errno) : gai_strerror(gai));
        *permanent = gai != EAI_AGAIN && gai != EAI_SYSTEM;
        return -1;
    }
    int fd = -1;
    for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
        fd = connect_one(ai, deadline);
        if (fd < 0) snprintf(err, err_cap, "%s", strerror(errno));
    }
    freeaddrinfo(res);
    return fd;
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Connects, retrying every 50 ms: ranks start in any order, the store may come later. */
static ak_status connect_retrying(const char *addr, int port, int timeout_ms, int *fd_out) {
    int64_t deadline = now_ms() + timeout_ms;
    char err[128] = "no attempt";
    for (;;) {
        int permanent = 0;
        int fd = connect_attempt(addr, port, deadline, err, sizeof err, &permanent);
        if (fd >= 0) {
            *fd_out = fd;
            return AK_OK;
        }
        if (permanent)
            return AK_FAIL(AK_ERR_IO, "store: cannot resolve %s:%d: %s", addr, port, err);
        int left = ms_left(deadline);
        if (left == 0)
            return AK_FAIL(AK_ERR_TIMEOUT, "store: cannot connect to %s:%d within %d ms (%s): "
                           "is the store (rank 0) running?", addr, port, timeout_ms, err);
        sleep_ms(left < 50 ? left : 50);
    }
}

/* Checks the connection is allowed (same-user mode: loopback only) and runs the client's
 * side of the handshake. */
static ak_status authenticate(int fd, const ak__auth_key *key, const char *addr, int port,
                              int timeout_ms) {
    char what[300];
    snprintf(what, sizeof what, "store at %s:%d", addr, port);
    struct sockaddr_storage peer;
    socklen_t len = sizeof peer;
    if (getpeername(fd, (struct sockaddr *)&peer, &len) != 0)
        return AK_FAIL(AK_ERR_IO, "%s: getpeername: %s", what, strerror(errno));
    AK_CHECK(ak__auth_check_address(key, &peer, what));
    int one = 1;
    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0)
        return AK_FAIL(AK_ERR_IO, "%s: TCP_NODELAY: %s", what, strerror(errno));
    int budget = timeout_ms > AK_AUTH_HANDSHAKE_MS ? timeout_ms : AK_AUTH_HANDSHAKE_MS;
    return ak__auth_client(fd, key, AK_AUTH_ROLE_STORE,
                           ak_now_ns() + (uint64_t)budget * 1000000u, what);
}

ak_status ak__store_connect(const char *addr, int port, int timeout_ms, ak__store **out) {
    AK_ARG_CHECK(out, "ak__store_connect: NULL output");
    *out = NULL;
    AK_ARG_CHECK(addr && addr[0], "ak__store_connect: empty address");
    AK_ARG_CHECK(strlen(addr) < sizeof ((tcp_store *)0)->addr, "ak__store_connect: address "
                 "too long");
    AK_ARG_CHECK(port > 0 && port <= 65535, "ak__store_connect: port %d out of range", port);
    AK_ARG_CHECK(timeout_ms >= 0, "ak__store_connect: negative timeout %d ms", timeout_ms);
    ak__auth_key key;
    AK_CHECK(ak__auth_key_from_env(&key));
    int fd = -1;
    AK_CHECK(connect_retrying(addr, port, timeout_ms, &fd));
    ak_status st = authenticate(fd, &key, addr, port, timeout_ms);
    memset(&key, 0, sizeof key);
    if (st != AK_OK) {
        close_fd(fd);
        return st;
    }
    tcp_store *t = calloc(1, sizeof *t);
    if (!t) {
        close_fd(fd);
        return AK_FAIL(AK_ERR_NO_MEMORY, "store: out of memory for the client");
    }
    t->base.ops = &tcp_ops;
    atomic_init(&t->base.refs, 1);
    pthread_mutex_init(&t->lock, NULL);
    t->fd = fd;
    /* request bytes get as long as the connect did, at least 1 s */
    t->io_timeout_ms = timeout_ms > 1000 ? timeout_ms : 1000;
    t->port = port;
    snprintf(t->addr, sizeof t->addr, "%s", addr);
    AK_LOG_DEBUG(AK_SUBSYS_COMM, "store client connected to %s:%d", addr, port);
    *out = &t->base;
    return AK_OK;
}
