/* TCP transport, connection setup (the data path: tcp.c).
 *
 * Setup: every rank listens on an ephemeral port and publishes "<prefix>/tcp/<rank>" =
 * "addr:port" in the store. The lower rank of each pair connects nstreams sockets to the
 * higher one, authenticates it (auth.h, role AK_AUTH_ROLE_TCP: both ends prove they hold
 * the job's secret) and sends a hello (magic, world size, rank, stream index, nstreams,
 * prefix hash); the acceptor validates it against its world and answers with an ack
 * naming itself, so both ends know which (peer, stream) each socket is. A connection
 * that fails the handshake is logged and closed, and the acceptor waits on for its
 * peers: a stranger cannot join or stop the setup. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "comm/bootstrap/auth.h"
#include "comm/transport/tcp_internal.h"
#include "core/check.h"
#include "core/hash.h"
#include "core/le_bytes.h"

static int ms_left(uint64_t deadline) {
    uint64_t now = ak_now_ns();
    return now >= deadline ? 0 : (int)((deadline - now + 999999u) / 1000000u);
}

static void tune_socket(int fd) {
    int one = 1, buf = TCP_SOCKBUF;
    /* failures only cost speed, never correctness */
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
    (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
}

static ak_status set_nonblocking(int fd) {
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
        return AK_FAIL(AK_ERR_IO, "tcp: fcntl(O_NONBLOCK): %s", strerror(errno));
    return AK_OK;
}

/* Blocking-style exact I/O on a blocking socket, bounded by poll against deadline. */
static ak_status io_exact(int fd, void *buf, size_t len, int is_send, uint64_t deadline,
                          int peer) {
    unsigned char *b = buf;
    while (len > 0) {
        struct pollfd pfd = {fd, (short)(is_send ? POLLOUT : POLLIN), 0};
        int prc;
        AK_SYSCHECK(prc, poll(&pfd, 1, ms_left(deadline)));
        if (prc == 0)
            return AK_FAIL(AK_ERR_TIMEOUT, "tcp: handshake with rank %d timed out", peer);
        ssize_t rc;
        if (is_send)
            AK_SYSCHECK(rc, send(fd, b, len, MSG_NOSIGNAL | MSG_DONTWAIT));
        else
            AK_SYSCHECK(rc, recv(fd, b, len, MSG_DONTWAIT));
        if (rc < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) continue;
        if (rc <= 0)
            return AK_FAIL(AK_ERR_REMOTE, "tcp: handshake with rank %d: %s", peer,
                           rc == 0 ? "connection closed" : strerror(errno));
        b += rc;
        len -= (size_t)rc;
    }
    return AK_OK;
}

static ak_status listen_socket(const ak__transport_setup *su, int *fd_out, int *port_out) {
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = 0};
    sa.sin_addr.s_addr = htonl(INADDR_ANY);
    if (su->bind_addr && inet_pton(AF_INET, su->bind_addr, &sa.sin_addr) != 1)
        return AK_FAIL(AK_ERR_INVALID_ARG, "tcp: bind address '%s' is not IPv4", su->bind_addr);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return AK_FAIL(AK_ERR_IO, "tcp: socket: %s", strerror(errno));
    tune_socket(fd); /* accepted sockets inherit the buffer sizes */
    socklen_t len = sizeof sa;
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, SOMAXCONN) < 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &len) < 0) {
        ak_status st = AK_FAIL(AK_ERR_IO, "tcp: cannot listen on %s: %s",
                               su->bind_addr ? su->bind_addr : "0.0.0.0", strerror(errno));
        close(fd);
        return st;
    }
    *fd_out = fd;
    *port_out = ntohs(sa.sin_port);
    return AK_OK;
}

static ak_status publish(const ak__transport_setup *su, int port) {
    const char *addr = su->bind_addr && strcmp(su->bind_addr, "0.0.0.0") != 0 ? su->bind_addr
                       : su->advertise_addr                                 ? su->advertise_addr
                                                                            : "127.0.0.1";
    char key[AK_STORE_MAX_KEY + 1], val[TCP_ADDR_MAX];
    int kn = snprintf(key, sizeof key, "%s/tcp/%d", su->prefix, su->rank);
    AK_ARG_CHECK(kn > 0 && (size_t)kn < sizeof key, "tcp: store prefix too long");
    int vn = snprintf(val, sizeof val, "%s:%d", addr, port);
    return ak__store_set(su->store, key, val, (size_t)vn);
}

/* Reads the peer's "addr:port" from the store and resolves it. */
static ak_status peer_address(const ak__transport_setup *su, int peer, uint64_t deadline,
                              struct sockaddr_in *sa) {
    char key[AK_STORE_MAX_KEY + 1], val[TCP_ADDR_MAX];
    size_t len = 0;
    snprintf(key, sizeof key, "%s/tcp/%d", su->prefix, peer);
    ak_status st = ak__store_get(su->store, key, val, sizeof val - 1, &len, ms_left(deadline));
    if (st == AK_ERR_TIMEOUT)
        return AK_FAIL(AK_ERR_TIMEOUT, "tcp: rank %d published no address within %d ms", peer,
                       su->timeout_ms);
    AK_CHECK(st);
    if (len >= sizeof val) return AK_FAIL(AK_ERR_REMOTE, "tcp: rank %d address too long", peer);
    val[len] = '\0';
    char *colon = strrchr(val, ':');
    memset(sa, 0, sizeof *sa);
    sa->sin_family = AF_INET;
    if (!colon) return AK_FAIL(AK_ERR_REMOTE, "tcp: rank %d address '%s' has no port", peer, val);
    *colon = '\0';
    int port = atoi(colon + 1);
    if (inet_pton(AF_INET, val, &sa->sin_addr) != 1 || port <= 0 || port > 65535)
        return AK_FAIL(AK_ERR_REMOTE, "tcp: rank %d published a bad address '%s:%s'", peer, val,
                       colon + 1);
    sa->sin_port = htons((uint16_t)port);
    return AK_OK;
}

/* One nonblocking connect attempt, bounded by the deadline (a blocking connect to an
 * unreachable host could outlive it by minutes). Returns 0 or the errno. */
static int try_connect(int fd, const struct sockaddr_in *sa, uint64_t deadline) {
    if (set_nonblocking(fd) != AK_OK) return errno ? errno : EIO;
    if (connect(fd, (const struct sockaddr *)sa, sizeof *sa) == 0) return 0;
    if (errno != EINPROGRESS && errno != EINTR) return errno;
    struct pollfd pfd = {fd, POLLOUT, 0};
    int prc;
    AK_SYSCHECK(prc, poll(&pfd, 1, ms_left(deadline)));
    if (prc < 0) return errno;
    if (prc == 0) return ETIMEDOUT;
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0) return errno;
    return err;
}

/* Connects, retrying refusals (the peer may not listen yet) until the deadline. */
static ak_status connect_retry(const ak__transport_setup *su, int peer,
                               const struct sockaddr_in *sa, uint64_t deadline, int *fd_out) {
    for (;;) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) return AK_FAIL(AK_ERR_IO, "tcp: socket: %s", strerror(errno));
        tune_socket(fd);
        int err = try_connect(fd, sa, deadline);
        if (err == 0) {
            *fd_out = fd;
            return AK_OK;
        }
        close(fd);
        if (ms_left(deadline) == 0)
            return AK_FAIL(AK_ERR_TIMEOUT, "tcp: cannot connect to rank %d within %d ms: %s",
                           peer, su->timeout_ms, strerror(err));
        struct timespec pause = {0, 10 * 1000000L};
        nanosleep(&pause, NULL);
    }
}

enum { HELLO_BYTES = 32, ACK_BYTES = 12 };

static void encode_hello(unsigned char *h, const ak__transport_setup *su, int stream) {
    ak__put_u32(h, TCP_HELLO_MAGIC);
    ak__put_u32(h + 4, (uint32_t)su->world_size);
    ak__put_u32(h + 8, (uint32_t)su->rank);
    ak__put_u32(h + 12, (uint32_t)stream);
    ak__put_u32(h + 16, (uint32_t)su->nstreams);
    ak__put_u32(h + 20, 0);
    ak__put_u64(h + 24, ak__fnv1a64_str(su->prefix)); /* a connection meant for another
                                                          * communicator is rejected */
}

static ak_status connect_peer(const ak__transport_setup *su, const ak__auth_key *key,
                              tcp_peer *p, uint64_t deadline) {
    struct sockaddr_in sa;
    AK_CHECK(peer_address(su, p->rank, deadline, &sa));
    char what[96], host[INET_ADDRSTRLEN] = "?";
    inet_ntop(AF_INET, &sa.sin_addr, host, sizeof host);
    snprintf(what, sizeof what, "tcp: rank %d at %s:%d", p->rank, host, ntohs(sa.sin_port));
    for (int s = 0; s < su->nstreams; s++) {
        AK_CHECK(connect_retry(su, p->rank, &sa, deadline, &p->fds[s]));
        AK_CHECK(ak__auth_client(p->fds[s], key, AK_AUTH_ROLE_TCP, deadline, what));
        unsigned char hello[HELLO_BYTES], ack[ACK_BYTES];
        encode_hello(hello, su, s);
        AK_CHECK(io_exact(p->fds[s], hello, sizeof hello, 1, deadline, p->rank));
        AK_CHECK(io_exact(p->fds[s], ack, sizeof ack, 0, deadline, p->rank));
        if (ak__get_u32(ack) != TCP_HELLO_MAGIC || ak__get_u32(ack + 4) != (uint32_t)p->rank ||
            ak__get_u32(ack + 8) != (uint32_t)s)
            return AK_FAIL(AK_ERR_REMOTE,
                           "tcp: the listener published by rank %d answered as someone else",
                           p->rank);
    }
    return AK_OK;
}

/* Validates a hello; returns the peer slot it belongs to, or NULL for a stray socket. */
static ak_status check_hello(tcp_ctx *t, const ak__transport_setup *su,
                             const unsigned char *h, tcp_peer **slot, int *stream) {
    *slot = NULL;
    if (ak__get_u32(h) != TCP_HELLO_MAGIC || ak__get_u64(h + 24) != ak__fnv1a64_str(su->prefix)) return AK_OK;
    int from = (int)ak__get_u32(h + 8), s = (int)ak__get_u32(h + 12);
    if ((int)ak__get_u32(h + 4) != su->world_size || (int)ak__get_u32(h + 16) != su->nstreams)
        return AK_FAIL(AK_ERR_MISMATCH,
                       "tcp: rank %d has world size %u and %u streams, this rank %d has %d and %d",
                       from, ak__get_u32(h + 4), ak__get_u32(h + 16), su->rank, su->world_size,
                       su->nstreams);
    if (from < 0 || from >= su->rank || t->peer_index[from] < 0 || s < 0 || s >= su->nstreams)
        return AK_OK;
    tcp_peer *p = &t->peers[t->peer_index[from]];
    if (p->fds[s] >= 0) return AK_OK; /* duplicate */
    *slot = p;
    *stream = s;
    return AK_OK;
}

/* The handshake of an accepted socket, bounded by AK_AUTH_HANDSHAKE_MS (and the setup's
 * deadline): AK_OK, or why it was refused (logged by ak__auth_server). */
static ak_status authenticate_accepted(int fd, const ak__transport_setup *su,
                                       const ak__auth_key *key, uint64_t deadline) {
    uint64_t limit = ak_now_ns() + (uint64_t)AK_AUTH_HANDSHAKE_MS * 1000000u;
    char what[64];
    snprintf(what, sizeof what, "tcp rank %d", su->rank);
    ak_status st = ak__auth_server(fd, key, AK_AUTH_ROLE_TCP, limit < deadline ? limit : deadline,
                                   what);
    if (st == AK_ERR_TIMEOUT && ms_left(deadline) > 0) {
        char peer[64];
        ak__auth_peer_name(fd, peer, sizeof peer);
        AK_LOG_WARN(AK_SUBSYS_COMM, "tcp rank %d: refused %s: no handshake within %d ms", su->rank,
                    peer, AK_AUTH_HANDSHAKE_MS);
        return AK_ERR_REMOTE;
    }
    return st;
}

static ak_status accept_one(tcp_ctx *t, const ak__transport_setup *su, const ak__auth_key *key,
                            int lfd, uint64_t deadline, int *accepted) {
    struct pollfd pfd = {lfd, POLLIN, 0};
    int prc;
    AK_SYSCHECK(prc, poll(&pfd, 1, ms_left(deadline)));
    if (prc == 0) return AK_ERR_TIMEOUT; /* the caller names the missing peers */
    int fd;
    AK_SYSCHECK(fd, accept4(lfd, NULL, NULL, SOCK_CLOEXEC));
    if (fd < 0) return AK_FAIL(AK_ERR_IO, "tcp: accept: %s", strerror(errno));
    unsigned char hello[HELLO_BYTES], ack[ACK_BYTES];
    tcp_peer *p = NULL;
    int s = 0;
    ak_status st = authenticate_accepted(fd, su, key, deadline);
    if (st == AK_OK) st = io_exact(fd, hello, sizeof hello, 0, deadline, -1);
    if (st == AK_OK) st = check_hello(t, su, hello, &p, &s);
    if (st == AK_OK && p) {
        ak__put_u32(ack, TCP_HELLO_MAGIC);
        ak__put_u32(ack + 4, (uint32_t)su->rank);
        ak__put_u32(ack + 8, (uint32_t)s);
        st = io_exact(fd, ack, sizeof ack, 1, deadline, p->rank);
    }
    if (st == AK_OK && p) {
        p->fds[s] = fd;
        (*accepted)++;
        return AK_OK;
    }
    close(fd);
    if (st == AK_OK || st == AK_ERR_REMOTE) {
        AK_LOG_DEBUG(AK_SUBSYS_COMM, "tcp rank %d: dropped a stray connection", su->rank);
        return AK_OK;
    }
    return st;
}

static ak_status missing_peers_error(tcp_ctx *t, const ak__transport_setup *su) {
    for (int i = 0; i < t->npeers; i++)
        for (int s = 0; s < su->nstreams; s++)
            if (t->peers[i].fds[s] < 0)
                return AK_FAIL(AK_ERR_TIMEOUT,
                               "tcp: rank %d did not connect (stream %d) within %d ms",
                               t->peers[i].rank, s, su->timeout_ms);
    return AK_FAIL(AK_ERR_TIMEOUT, "tcp: connection setup timed out");
}

static ak_status connect_all(tcp_ctx *t, const ak__transport_setup *su, const ak__auth_key *key,
                             int lfd) {
    uint64_t deadline = ak_now_ns() + (uint64_t)su->timeout_ms * 1000000u;
    int expected = 0, accepted = 0;
    /* lower rank connects: higher peers first, so the highest rank only accepts and the
     * chain of acks always ends */
    for (int i = 0; i < t->npeers; i++) {
        if (t->peers[i].rank > su->rank)
            AK_CHECK(connect_peer(su, key, &t->peers[i], deadline));
        else
            expected += su->nstreams;
    }
    while (accepted < expected) {
        ak_status st = accept_one(t, su, key, lfd, deadline, &accepted);
        if (st == AK_ERR_TIMEOUT && ms_left(deadline) == 0) return missing_peers_error(t, su);
        AK_CHECK(st);
    }
    return AK_OK;
}

static ak_status check_setup(const ak__transport_setup *su, ak__transport *out) {
    AK_ARG_CHECK(su && out && su->store && su->prefix, "tcp: NULL setup, store or prefix");
    AK_ARG_CHECK(su->world_size >= 1 && su->rank >= 0 && su->rank < su->world_size,
                 "tcp: rank %d outside world of %d", su->rank, su->world_size);
    AK_ARG_CHECK(su->npeers >= 0 && su->npeers < su->world_size && (su->peers || !su->npeers),
                 "tcp: %d peers in a world of %d", su->npeers, su->world_size);
    AK_ARG_CHECK(su->nstreams >= 1 && su->nstreams <= AK_COMM_MAX_STREAMS,
                 "tcp: nstreams %d outside 1..%d", su->nstreams, AK_COMM_MAX_STREAMS);
    AK_ARG_CHECK(su->timeout_ms > 0, "tcp: timeout_ms %d must be positive", su->timeout_ms);
    for (int i = 0; i < su->npeers; i++)
        AK_ARG_CHECK(su->peers[i] >= 0 && su->peers[i] < su->world_size &&
                         su->peers[i] != su->rank && (i == 0 || su->peers[i] > su->peers[i - 1]),
                     "tcp: peer list must be sorted ranks other than %d", su->rank);
    return AK_OK;
}

static ak_status ctx_new(const ak__transport_setup *su, tcp_ctx **out) {
    tcp_ctx *t = calloc(1, sizeof *t);
    if (!t) return AK_FAIL(AK_ERR_NO_MEMORY, "tcp: out of memory");
    t->rank = su->rank;
    t->world_size = su->world_size;
    t->nstreams = su->nstreams;
    t->npeers = su->npeers;
    t->stall_ns = (uint64_t)su->timeout_ms * 1000000u;
    t->lost = su->lost;
    t->peers = calloc((size_t)su->npeers + 1, sizeof *t->peers);
    t->peer_index = malloc((size_t)su->world_size * sizeof *t->peer_index);
    t->pfds = calloc((size_t)su->npeers * (size_t)su->nstreams + 1, sizeof *t->pfds);
    if (!t->peers || !t->peer_index || !t->pfds) {
        ak__tcp_ctx_free(t);
        return AK_FAIL(AK_ERR_NO_MEMORY, "tcp: out of memory");
    }
    for (int r = 0; r < su->world_size; r++) t->peer_index[r] = -1;
    for (int i = 0; i < su->npeers; i++) {
        t->peers[i].rank = su->peers[i];
        t->peer_index[su->peers[i]] = i;
        for (int s = 0; s < AK_COMM_MAX_STREAMS; s++) t->peers[i].fds[s] = -1;
    }
    *out = t;
    return AK_OK;
}

static ak_status finish_sockets(tcp_ctx *t) {
    for (int i = 0; i < t->npeers; i++)
        for (int s = 0; s < t->nstreams; s++) AK_CHECK(set_nonblocking(t->peers[i].fds[s]));
    return AK_OK;
}

ak_status ak__tcp_transport_create(const ak__transport_setup *setup, ak__transport *out) {
    AK_CHECK(check_setup(setup, out));
    tcp_ctx *t = NULL;
    int lfd = -1, port = 0;
    ak_status st;
    ak__auth_key key;
    AK_CHECK(ak__auth_key_from_env(&key));
    AK_CHECK(ctx_new(setup, &t));
    AK_CHECK_GOTO(st, listen_socket(setup, &lfd, &port));
    AK_CHECK_GOTO(st, publish(setup, port));
    AK_CHECK_GOTO(st, connect_all(t, setup, &key, lfd));
    memset(&key, 0, sizeof key);
    AK_CHECK_GOTO(st, finish_sockets(t));
    close(lfd);
    AK_LOG_DEBUG(AK_SUBSYS_COMM, "tcp rank %d: connected to %d peers x %d streams (port %d)",
                 setup->rank, setup->npeers, setup->nstreams, port);
    out->vt = &ak__tcp_vtable;
    out->ctx = t;
    return AK_OK;
fail:
    memset(&key, 0, sizeof key);
    if (lfd >= 0) close(lfd);
    ak__tcp_ctx_free(t);
    return st;
}
