/* Bootstrap store over TCP: the server (one poll()-driven thread that holds every key in
 * memory and parks blocking requests until they can be answered) and the client (an
 * ak__store whose calls send one framed request and wait for its reply with a deadline).
 *
 * Wire format, every integer little-endian:
 *   request  magic u32 | op u8 | key_len u8 | flags u16 (0) | seq u32 | value_len u32 |
 *            arg i64 | timeout_ms i32 | key (key_len bytes, no NUL) | value (value_len)
 *   reply    magic u32 | status u8 | pad 3 (0) | seq u32 | value_len u32 | arg i64 |
 *            value (value_len)
 * op: SET (value), GET (waits up to timeout_ms; the reply carries the value), ADD (arg =
 * delta; the reply's arg = the new value), WAIT_GE (waits until the integer ≥ arg). The
 * status is an ak_status: AK_OK or AK_ERR_TIMEOUT (the server's own deadline passed).
 * Integers are stored as decimal text, exactly like the in-memory store.
 *
 * Each side validates what it reads (magic, op, lengths against AK_STORE_MAX_*, reserved
 * bytes zero, key without NUL); the server drops a client that sends a bad frame instead
 * of guessing where the next frame starts. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
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

#include "comm/bootstrap/store_impl.h"
#include "core/check.h"
#include "core/hash.h"
#include "core/le_bytes.h"

#define WIRE_MAGIC 0x31534b41u /* "AKS1" */
#define REQ_HDR 28
#define REP_HDR 24

enum { OP_SET = 1, OP_GET = 2, OP_ADD = 3, OP_WAIT_GE = 4 };

/* ---- shared helpers ---------------------------------------------------------------- */

/* close() is not retried on EINTR: Linux frees the descriptor anyway, and a retry could
 * close one another thread just opened. A failed close of a socket loses nothing. */
static void close_fd(int fd) {
    if (fd >= 0 && close(fd) != 0 && errno != EINTR)
        AK_LOG_DEBUG(AK_SUBSYS_COMM, "store: close(%d): %s", fd, strerror(errno));
}

static int64_t now_ms(void) { return (int64_t)(ak_now_ns() / 1000000u); }

/* Milliseconds left until deadline, clamped to what poll() takes. */
static int ms_left(int64_t deadline) {
    int64_t left = deadline - now_ms();
    if (left < 0) return 0;
    return left > 1000000000 ? 1000000000 : (int)left;
}

/* Decimal text (as stored for counters) to an integer; junk reads as 0 like strtoll. */
static int64_t text_to_int(const unsigned char *value, size_t len) {
    char text[32];
    size_t n = len < sizeof text - 1 ? len : sizeof text - 1;
    memcpy(text, value, n);
    text[n] = '\0';
    return strtoll(text, NULL, 10);
}

/* ---- server: key table -------------------------------------------------------------- */

#define SRV_BUCKETS 256

typedef struct srv_entry {
    struct srv_entry *next;
    size_t len;
    char key[AK_STORE_MAX_KEY + 1];
    unsigned char value[]; /* len bytes */
} srv_entry;

static unsigned key_hash(const char *key) {
    return (unsigned)(ak__fnv1a64_str(key) % SRV_BUCKETS);
}

static srv_entry *table_find(srv_entry **table, const char *key) {
    for (srv_entry *e = table[key_hash(key)]; e; e = e->next)
        if (strcmp(e->key, key) == 0) return e;
    return NULL;
}

/* Replaces (or adds) key; 0 on success, -1 when out of memory. */
static int table_put(srv_entry **table, const char *key, const void *value, size_t len) {
    srv_entry *e = malloc(sizeof *e + len);
    if (!e) return -1;
    strcpy(e->key, key);
    e->len = len;
    if (len) memcpy(e->value, value, len);
    for (srv_entry **p = &table[key_hash(key)]; *p; p = &(*p)->next) {
        if (strcmp((*p)->key, key) == 0) {
            e->next = (*p)->next;
            free(*p);
            *p = e;
            return 0;
        }
    }
    e->next = table[key_hash(key)];
    table[key_hash(key)] = e;
    return 0;
}

static void table_clear(srv_entry **table) {
    for (int b = 0; b < SRV_BUCKETS; b++) {
        while (table[b]) {
            srv_entry *e = table[b];
            table[b] = e->next;
            free(e);
        }
    }
}

/* ---- server: clients ---------------------------------------------------------------- */

typedef struct srv_client {
    int fd;
    int dead;   /* closed at the end of the loop iteration, so pointers stay valid */
    int parked; /* a complete GET/WAIT_GE waits for its key */
    /* the request being read: header, then body (key + value) */
    unsigned char hdr[REQ_HDR];
    size_t hdr_got;
    unsigned char *body;
    size_t body_len, body_got;
    /* the decoded request */
    int op;
    uint32_t seq;
    size_t key_len, value_len;
    int64_t arg, deadline;
    char key[AK_STORE_MAX_KEY + 1];
    /* replies not yet written (the socket was full) */
    unsigned char *out;
    size_t out_len, out_off;
} srv_client;

struct ak__store_server {
    pthread_t thread;
    int listen_fd;
    int wake[2]; /* a byte on wake[1] stops the thread */
    int port;
    int64_t accept_paused_until; /* after EMFILE: no busy loop on the listening socket */
    srv_entry *table[SRV_BUCKETS];
    srv_client **clients;
    size_t nclients, cap_clients;
    _Atomic size_t live_clients; /* nclients, for other threads (ak__store_server_clients) */
    struct pollfd *pfds;
    size_t cap_pfds;
};

static void client_close(srv_client *c) {
    close_fd(c->fd);
    free(c->body);
    free(c->out);
    free(c);
}

static void client_reset_request(srv_client *c) {
    free(c->body);
    c->body = NULL;
    c->hdr_got = c->body_len = c->body_got = 0;
    c->parked = 0;
}

/* Writes queued output; marks the client dead on a socket error. */
static void client_flush(srv_client *c) {
    while (!c->dead && c->out_off < c->out_len) {
        ssize_t n;
        AK_SYSCHECK(n, send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL));
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) return;
            AK_LOG_DEBUG(AK_SUBSYS_COMM, "store server: dropping client fd %d: send: %s", c->fd,
                         strerror(errno));
            c->dead = 1;
            return;
        }
        c->out_off += (size_t)n;
    }
    if (c->out_off == c->out_len) {
        free(c->out);
        c->out = NULL;
        c->out_len = c->out_off = 0;
    }
}

/* Queues the reply to the client's current request and ends that request. */
static void client_reply(srv_client *c, ak_status status, int64_t arg, const void *value,
                         size_t len) {
    size_t total = c->out_len + REP_HDR + len;
    unsigned char *out = realloc(c->out, total);
    if (!out) {
        AK_LOG_WARN(AK_SUBSYS_COMM, "store server: out of memory replying to '%s'", c->key);
        c->dead = 1; /* the client sees a closed connection rather than a lost reply */
        return;
    }
    unsigned char *p = out + c->out_len;
    memset(p, 0, REP_HDR);
    ak__put_u32(p, WIRE_MAGIC);
    p[4] = (unsigned char)status;
    ak__put_u32(p + 8, c->seq);
    ak__put_u32(p + 12, (uint32_t)len);
    ak__put_u64(p + 16, (uint64_t)arg);
    if (len) memcpy(p + REP_HDR, value, len);
    c->out = out;
    c->out_len = total;
    client_reset_request(c);
    client_flush(c);
}

/* Answers a GET/WAIT_GE if its key allows; returns 1 when answered. */
static int client_try_answer(ak__store_server *s, srv_client *c) {
    srv_entry *e = table_find(s->table, c->key);
    if (!e) return 0;
    if (c->op == OP_GET) {
        client_reply(c, AK_OK, 0, e->value, e->len);
        return 1;
    }
    if (text_to_int(e->value, e->len) >= c->arg) {
        client_reply(c, AK_OK, 0, NULL, 0);
        return 1;
    }
    return 0;
}

/* After key changed: answers every parked request that now can be. */
static void server_notify(ak__store_server *s, const char *key) {
    for (size_t i = 0; i < s->nclients; i++) {
        srv_client *c = s->clients[i];
        if (!c->dead && c->parked && strcmp(c->key, key) == 0) client_try_answer(s, c);
    }
}

static void server_put(ak__store_server *s, srv_client *c, const void *value, size_t len,
                       int64_t arg) {
    if (table_put(s->table, c->key, value, len) != 0) {
        AK_LOG_WARN(AK_SUBSYS_COMM, "store server: out of memory storing '%s'", c->key);
        c->dead = 1;
        return;
    }
    char key[AK_STORE_MAX_KEY + 1];
    strcpy(key, c->key); /* client_reply ends the request */
    client_reply(c, AK_OK, arg, NULL, 0);
    server_notify(s, key);
}

/* Runs a complete request. */
static void client_execute(ak__store_server *s, srv_client *c, int timeout_ms) {
    const unsigned char *value = c->body + c->key_len;
    if (c->op == OP_SET) {
        server_put(s, c, value, c->value_len, 0);
    } else if (c->op == OP_ADD) {
        srv_entry *e = table_find(s->table, c->key);
        int64_t cur = e ? text_to_int(e->value, e->len) : 0;
        int64_t v = (int64_t)((uint64_t)cur + (uint64_t)c->arg); /* wraps, never UB */
        char text[32];
        int n = snprintf(text, sizeof text, "%lld", (long long)v);
        server_put(s, c, text, (size_t)n, v);
    } else if (!client_try_answer(s, c)) {
        if (timeout_ms <= 0) {
            client_reply(c, AK_ERR_TIMEOUT, 0, NULL, 0);
        } else {
            c->parked = 1;
            c->deadline = now_ms() + timeout_ms;
        }
    }
}

/* Checks a request header; returns NULL or what is wrong with it. */
static const char *client_decode_header(srv_client *c) {
    const unsigned char *h = c->hdr;
    if (ak__get_u32(h) != WIRE_MAGIC) return "bad magic";
    c->op = h[4];
    c->key_len = h[5];
    c->seq = ak__get_u32(h + 8);
    c->value_len = ak__get_u32(h + 12);
    c->arg = (int64_t)ak__get_u64(h + 16);
    if (c->op < OP_SET || c->op > OP_WAIT_GE) return "unknown op";
    if (h[6] || h[7]) return "reserved bits set";
    if (c->key_len == 0) return "empty key";
    if (c->value_len > AK_STORE_MAX_VALUE) return "value too large";
    if (c->op != OP_SET && c->value_len) return "value on a request that takes none";
    return NULL;
}

/* Reads into dst[*got..want); returns 1 when complete, 0 when the socket is empty, -1 on
 * EOF or error (the client is then marked dead). */
static int client_recv(srv_client *c, unsigned char *dst, size_t want, size_t *got) {
    while (*got < want) {
        ssize_t n;
        AK_SYSCHECK(n, recv(c->fd, dst + *got, want - *got, 0));
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
        if (n <= 0) {
            AK_LOG_DEBUG(AK_SUBSYS_COMM, "store server: client fd %d left (%s)", c->fd,
                         n == 0 ? "closed" : strerror(errno));
            c->dead = 1;
            return -1;
        }
        *got += (size_t)n;
    }
    return 1;
}

static void client_drop(srv_client *c, const char *why) {
    AK_LOG_DEBUG(AK_SUBSYS_COMM, "store server: dropping client fd %d: %s", c->fd, why);
    c->dead = 1;
}

/* Reads and runs requests until the socket is empty, a request parks, or replies are
 * pending (back-pressure: a client that does not read its replies gets no more served). */
static void client_readable(ak__store_server *s, srv_client *c) {
    while (!c->dead && !c->parked && c->out_len == 0) {
        if (!c->body) { /* still reading the header */
            if (client_recv(c, c->hdr, REQ_HDR, &c->hdr_got) <= 0) return;
            const char *bad = client_decode_header(c);
            if (bad) {
                client_drop(c, bad);
                return;
            }
            c->body_len = c->key_len + c->value_len; /* ≥ 1: keys are never empty */
            c->body = malloc(c->body_len);
            if (!c->body) {
                client_drop(c, "out of memory for the request");
                return;
            }
        }
        if (client_recv(c, c->body, c->body_len, &c->body_got) <= 0) return;
        if (memchr(c->body, '\0', c->key_len)) {
            client_drop(c, "NUL byte in key");
            return;
        }
        memcpy(c->key, c->body, c->key_len);
        c->key[c->key_len] = '\0';
        client_execute(s, c, (int32_t)ak__get_u32(c->hdr + 24));
    }
}

/* ---- server: the loop --------------------------------------------------------------- */

static void server_accept(ak__store_server *s) {
    for (;;) {
        int fd;
        AK_SYSCHECK(fd, accept4(s->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC));
        if (fd < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ECONNABORTED) return;
            AK_LOG_WARN(AK_SUBSYS_COMM, "store server: accept: %s", strerror(errno));
            s->accept_paused_until = now_ms() + 100; /* e.g. EMFILE: retry later */
            return;
        }
        int one = 1;
        (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one); /* latency only */
        srv_client *c = calloc(1, sizeof *c);
        if (c && s->nclients == s->cap_clients) {
            size_t cap = s->cap_clients ? 2 * s->cap_clients : 16;
            srv_client **grown = realloc(s->clients, cap * sizeof *grown);
            if (grown) {
                s->clients = grown;
                s->cap_clients = cap;
            }
        }
        if (!c || s->nclients == s->cap_clients) {
            AK_LOG_WARN(AK_SUBSYS_COMM, "store server: out of memory for a new client");
            free(c);
            close_fd(fd);
            continue;
        }
        c->fd = fd;
        s->clients[s->nclients++] = c;
    }
}

/* Fills s->pfds: [0] wake pipe, [1] listening socket, [2..] clients; returns the count. */
static size_t server_build_pollset(ak__store_server *s) {
    size_t need = s->nclients + 2;
    if (need > s->cap_pfds) {
        struct pollfd *grown = realloc(s->pfds, need * sizeof *grown);
        if (!grown) return 0;
        s->pfds = grown;
        s->cap_pfds = need;
    }
    s->pfds[0] = (struct pollfd){.fd = s->wake[0], .events = POLLIN};
    int accepting = now_ms() >= s->accept_paused_until;
    s->pfds[1] = (struct pollfd){.fd = accepting ? s->listen_fd : -1, .events = POLLIN};
    for (size_t i = 0; i < s->nclients; i++) {
        srv_client *c = s->clients[i];
        short ev = POLLRDHUP;
        if (c->out_len) ev |= POLLOUT;
        else if (!c->parked) ev |= POLLIN;
        s->pfds[i + 2] = (struct pollfd){.fd = c->fd, .events = ev};
    }
    return need;
}

/* poll() timeout: until the next parked deadline or the end of an accept pause. */
static int server_poll_timeout(const ak__store_server *s) {
    int64_t next = -1;
    for (size_t i = 0; i < s->nclients; i++) {
        const srv_client *c = s->clients[i];
        if (c->parked && (next < 0 || c->deadline < next)) next = c->deadline;
    }
    if (s->accept_paused_until > now_ms() && (next < 0 || s->accept_paused_until < next))
        next = s->accept_paused_until;
    return next < 0 ? -1 : ms_left(next);
}

static void server_expire_and_reap(ak__store_server *s) {
    int64_t now = now_ms();
    size_t kept = 0;
    for (size_t i = 0; i < s->nclients; i++) {
        srv_client *c = s->clients[i];
        if (!c->dead && c->parked && c->deadline <= now) client_reply(c, AK_ERR_TIMEOUT, 0, NULL, 0);
        if (c->dead) client_close(c);
        else s->clients[kept++] = c;
    }
    s->nclients = kept;
}

static void server_client_event(ak__store_server *s, srv_client *c, short revents) {
    if (revents & (POLLERR | POLLHUP | POLLNVAL)) {
        client_drop(c, "connection lost");
        return;
    }
    if (revents & POLLOUT) client_flush(c);
    if (revents & POLLIN) client_readable(s, c);
    /* a parked request's client went away: nobody to answer */
    if (!c->dead && c->parked && (revents & POLLRDHUP)) client_drop(c, "closed while waiting");
    /* replies just drained: requests may be waiting in the socket */
    if (!c->dead && !c->parked && c->out_len == 0 && (revents & POLLOUT)) client_readable(s, c);
}

static void *server_main(void *arg) {
    ak__store_server *s = arg;
    for (;;) {
        size_t n = server_build_pollset(s);
        if (n == 0) {
            AK_LOG_ERROR(AK_SUBSYS_COMM, "store server: out of memory, stopping");
            break;
        }
        int rc;
        AK_SYSCHECK(rc, poll(s->pfds, n, server_poll_timeout(s)));
        if (rc < 0) {
            AK_LOG_ERROR(AK_SUBSYS_COMM, "store server: poll: %s, stopping", strerror(errno));
            break;
        }
        if (s->pfds[0].revents) break; /* ak__store_server_stop */
        for (size_t i = 2; i < n; i++)
            if (s->pfds[i].revents) server_client_event(s, s->clients[i - 2], s->pfds[i].revents);
        if (s->pfds[1].revents) server_accept(s);
        server_expire_and_reap(s);
        atomic_store(&s->live_clients, s->nclients);
    }
    /* closing every client makes its waiting calls fail with AK_ERR_REMOTE, not hang */
    for (size_t i = 0; i < s->nclients; i++) client_close(s->clients[i]);
    s->nclients = 0;
    return NULL;
}

/* ---- server: start and stop --------------------------------------------------------- */

/* Binds and listens on the first address of bind_addr:port that works; -1 + errno. */
static int listen_on(const char *bind_addr, int port, const char **gai_error) {
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    char service[16];
    snprintf(service, sizeof service, "%d", port);
    int gai = getaddrinfo(bind_addr && bind_addr[0] ? bind_addr : NULL, service, &hints, &res);
    if (gai != 0) {
        *gai_error = gai_strerror(gai);
        return -1;
    }
    int fd = -1, err = EADDRNOTAVAIL;
    for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) {
            err = errno;
            continue;
        }
        int one = 1;
        /* a restarted rank 0 must rebind while old connections sit in TIME_WAIT */
        if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
            bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, SOMAXCONN) != 0) {
            err = errno;
            close_fd(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    if (fd < 0) errno = err;
    return fd;
}

static int bound_port_of(int fd) {
    struct sockaddr_storage sa;
    socklen_t len = sizeof sa;
    if (getsockname(fd, (struct sockaddr *)&sa, &len) != 0) return -1;
    if (sa.ss_family == AF_INET) return ntohs(((struct sockaddr_in *)&sa)->sin_port);
    if (sa.ss_family == AF_INET6) return ntohs(((struct sockaddr_in6 *)&sa)->sin6_port);
    return -1;
}

static void server_free(ak__store_server *s) {
    close_fd(s->listen_fd);
    close_fd(s->wake[0]);
    close_fd(s->wake[1]);
    table_clear(s->table);
    free(s->clients);
    free(s->pfds);
    free(s);
}

ak_status ak__store_serve(const char *bind_addr, int port, int *bound_port,
                          ak__store_server **out) {
    AK_ARG_CHECK(out, "ak__store_serve: NULL output");
    AK_ARG_CHECK(port >= 0 && port <= 65535, "ak__store_serve: port %d out of range", port);
    *out = NULL;
    const char *shown = bind_addr && bind_addr[0] ? bind_addr : "*";
    ak__store_server *s = calloc(1, sizeof *s);
    if (!s) return AK_FAIL(AK_ERR_NO_MEMORY, "store: out of memory for the server");
    s->wake[0] = s->wake[1] = -1;
    const char *gai_error = NULL;
    s->listen_fd = listen_on(bind_addr, port, &gai_error);
    if (s->listen_fd < 0) {
        ak_status st = AK_FAIL(AK_ERR_IO, "store: cannot listen on %s:%d: %s", shown, port,
                               gai_error ? gai_error : strerror(errno));
        server_free(s);
        return st;
    }
    s->port = bound_port_of(s->listen_fd);
    if (s->port < 0 || pipe2(s->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
        ak_status st = AK_FAIL(AK_ERR_IO, "store: setting up the server on %s:%d: %s", shown,
                               port, strerror(errno));
        server_free(s);
        return st;
    }
    int err = pthread_create(&s->thread, NULL, server_main, s);
    if (err != 0) {
        server_free(s);
        return AK_FAIL(AK_ERR_IO, "store: cannot start the server thread: %s", strerror(err));
    }
    AK_LOG_DEBUG(AK_SUBSYS_COMM, "store server listening on %s:%d", shown, s->port);
    if (bound_port) *bound_port = s->port;
    *out = s;
    return AK_OK;
}

size_t ak__store_server_clients(ak__store_server *s) {
    return s ? atomic_load(&s->live_clients) : 0;
}

void ak__store_server_stop(ak__store_server *s) {
    if (!s) return;
    ssize_t n;
    AK_SYSCHECK(n, write(s->wake[1], "x", 1));
    if (n != 1) /* cannot happen with an empty pipe; joining would hang, so leak instead */
        AK_LOG_ERROR(AK_SUBSYS_COMM, "store server: cannot wake the thread: %s", strerror(errno));
    else {
        pthread_join(s->thread, NULL);
        server_free(s);
    }
}

/* ---- client ------------------------------------------------------------------------- */

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
        (rp->status != AK_OK && rp->status != AK_ERR_TIMEOUT) ||
        rp->value_len > AK_STORE_MAX_VALUE || (rq->op != OP_GET && rp->value_len)) {
        t->broken = 1;
        return AK_FAIL(AK_ERR_REMOTE, "store at %s:%d sent a malformed reply (not an accelkit "
                       "store?)", t->addr, t->port);
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

ak_status ak__store_connect(const char *addr, int port, int timeout_ms, ak__store **out) {
    AK_ARG_CHECK(out, "ak__store_connect: NULL output");
    *out = NULL;
    AK_ARG_CHECK(addr && addr[0], "ak__store_connect: empty address");
    AK_ARG_CHECK(strlen(addr) < sizeof ((tcp_store *)0)->addr, "ak__store_connect: address "
                 "too long");
    AK_ARG_CHECK(port > 0 && port <= 65535, "ak__store_connect: port %d out of range", port);
    AK_ARG_CHECK(timeout_ms >= 0, "ak__store_connect: negative timeout %d ms", timeout_ms);
    int fd = -1;
    AK_CHECK(connect_retrying(addr, port, timeout_ms, &fd));
    int one = 1;
    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) {
        ak_status st = AK_FAIL(AK_ERR_IO, "store: TCP_NODELAY on %s:%d: %s", addr, port,
                               strerror(errno));
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
