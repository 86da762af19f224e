/* Bootstrap store over TCP, the server: one poll()-driven thread that holds every key in
 * memory and parks blocking requests until they can be answered (wire format:
 * store_tcp.h). Each connection first passes the handshake of auth.h, driven by the same
 * loop so a silent or slow peer never blocks the others. It drops a client that sends a
 * bad frame instead of guessing where the next frame starts. */
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
#include <unistd.h>

#include "comm/bootstrap/auth.h"
#include "comm/bootstrap/store_tcp.h"
#include "core/check.h"
#include "core/hash.h"
#include "core/le_bytes.h"

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
    /* the handshake: reading the hello, then the response; authenticated after that */
    enum { AUTH_HELLO, AUTH_RESPONSE, AUTH_DONE } auth_stage;
    unsigned char auth_msg[AK_AUTH_HELLO_BYTES]; /* the hello or the response, as read */
    size_t auth_got;
    ak__auth_session auth;
    int64_t auth_deadline;
    char peer[64]; /* "addr:port", for logs */
    int dead;   /* closed at the end of the loop iteration, so pointers stay valid */
    int parked; /* a complete GET/WAIT_GE waits for its key */
    /* the request being read: header, then body (key + value) */
    unsigned char hdr[REQ_HDR];
    size_t hdr_got;
    unsigned char *body;
    size_t body_len, body_got;
    ak__store_request rq; /* the decoded request */
    int64_t deadline;
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
    ak__auth_key key;            /* the job's, read once when the server starts */
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

/* Appends len bytes to the client's output; NULL (and the client dead) when out of
 * memory: the client sees a closed connection rather than a lost reply. */
static unsigned char *client_queue(srv_client *c, size_t len) {
    unsigned char *out = realloc(c->out, c->out_len + len);
    if (!out) {
        AK_LOG_WARN(AK_SUBSYS_COMM, "store server: out of memory replying to %s", c->peer);
        c->dead = 1;
        return NULL;
    }
    c->out = out;
    c->out_len += len;
    return out + c->out_len - len;
}

/* Queues the reply to the client's current request and ends that request. */
static void client_reply(srv_client *c, ak_status status, int64_t arg, const void *value,
                         size_t len) {
    unsigned char *p = client_queue(c, REP_HDR + len);
    if (!p) return;
    memset(p, 0, REP_HDR);
    ak__put_u32(p, WIRE_MAGIC);
    p[4] = (unsigned char)status;
    ak__put_u32(p + 8, c->rq.seq);
    ak__put_u32(p + 12, (uint32_t)len);
    ak__put_u64(p + 16, (uint64_t)arg);
    if (len) memcpy(p + REP_HDR, value, len);
    client_reset_request(c);
    client_flush(c);
}

/* Answers a GET/WAIT_GE if its key allows; returns 1 when answered. */
static int client_try_answer(ak__store_server *s, srv_client *c) {
    srv_entry *e = table_find(s->table, c->rq.key);
    if (!e) return 0;
    if (c->rq.op == OP_GET) {
        client_reply(c, AK_OK, 0, e->value, e->len);
        return 1;
    }
    if (text_to_int(e->value, e->len) >= c->rq.arg) {
        client_reply(c, AK_OK, 0, NULL, 0);
        return 1;
    }
    return 0;
}

/* After key changed: answers every parked request that now can be. */
static void server_notify(ak__store_server *s, const char *key) {
    for (size_t i = 0; i < s->nclients; i++) {
        srv_client *c = s->clients[i];
        if (!c->dead && c->parked && strcmp(c->rq.key, key) == 0) client_try_answer(s, c);
    }
}

static void server_put(ak__store_server *s, srv_client *c, const void *value, size_t len,
                       int64_t arg) {
    if (table_put(s->table, c->rq.key, value, len) != 0) {
        AK_LOG_WARN(AK_SUBSYS_COMM, "store server: out of memory storing '%s'", c->rq.key);
        c->dead = 1;
        return;
    }
    char key[AK_STORE_MAX_KEY + 1];
    strcpy(key, c->rq.key); /* client_reply ends the request */
    client_reply(c, AK_OK, arg, NULL, 0);
    server_notify(s, key);
}

/* Runs a complete request. */
static void client_execute(ak__store_server *s, srv_client *c, int timeout_ms) {
    const unsigned char *value = c->body + c->rq.key_len;
    if (c->rq.op == OP_SET) {
        server_put(s, c, value, c->rq.value_len, 0);
    } else if (c->rq.op == OP_ADD) {
        srv_entry *e = table_find(s->table, c->rq.key);
        int64_t cur = e ? text_to_int(e->value, e->len) : 0;
        int64_t v = (int64_t)((uint64_t)cur + (uint64_t)c->rq.arg); /* wraps, never UB */
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

static int bad_frame(char *why, size_t cap, const char *what) {
    snprintf(why, cap, "%s", what);
    return -1;
}

int ak__store_decode_header(const unsigned char *h, ak__store_request *rq, char *why,
                            size_t why_cap) {
    memset(rq, 0, sizeof *rq);
    if (ak__get_u32(h) != WIRE_MAGIC) return bad_frame(why, why_cap, "bad magic");
    rq->op = h[4];
    rq->key_len = h[5];
    rq->seq = ak__get_u32(h + 8);
    rq->value_len = ak__get_u32(h + 12);
    rq->arg = (int64_t)ak__get_u64(h + 16);
    rq->timeout_ms = (int32_t)ak__get_u32(h + 24);
    if (rq->op < OP_SET || rq->op > OP_WAIT_GE) return bad_frame(why, why_cap, "unknown op");
    if (h[6] || h[7]) return bad_frame(why, why_cap, "reserved bits set");
    if (rq->key_len == 0) return bad_frame(why, why_cap, "empty key");
    if (rq->value_len > AK_STORE_MAX_VALUE) {
        snprintf(why, why_cap, "value length %zu over the cap of %zu bytes (AK_STORE_MAX_VALUE)",
                 rq->value_len, AK_STORE_MAX_VALUE);
        return -1;
    }
    if (rq->op != OP_SET && rq->value_len)
        return bad_frame(why, why_cap, "value on a request that takes none");
    return 0;
}

int ak__store_decode_key(const unsigned char *body, ak__store_request *rq, char *why,
                         size_t why_cap) {
    if (rq->key_len == 0 || rq->key_len > AK_STORE_MAX_KEY)
        return bad_frame(why, why_cap, "key length out of range");
    if (memchr(body, '\0', rq->key_len)) return bad_frame(why, why_cap, "NUL byte in key");
    memcpy(rq->key, body, rq->key_len);
    rq->key[rq->key_len] = '\0';
    return 0;
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

/* A peer that broke the protocol or failed the handshake: logged where an operator sees
 * it (its address and what was wrong), dropped; the job goes on. */
static void client_reject(srv_client *c, const char *why) {
    AK_LOG_WARN(AK_SUBSYS_COMM, "store server: refused %s: %s", c->peer, why);
    c->dead = 1;
}

/* Refuses the handshake: the refusal goes out best effort (the socket is fresh, its
 * buffer empty), then the connection is dropped. */
static void client_refuse_auth(srv_client *c, int status, int challenge, const char *why) {
    unsigned char msg[AK_AUTH_CHALLENGE_BYTES];
    ak__auth_refusal(status, challenge, msg);
    ssize_t n;
    AK_SYSCHECK(n, send(c->fd, msg, challenge ? AK_AUTH_CHALLENGE_BYTES : AK_AUTH_RESULT_BYTES,
                        MSG_NOSIGNAL | MSG_DONTWAIT));
    (void)n;
    client_reject(c, why);
}

/* Advances the handshake by one message if it has arrived; 1 when it did. */
static int client_authenticate(srv_client *c) {
    if (c->auth_stage == AUTH_HELLO) {
        if (client_recv(c, c->auth_msg, AK_AUTH_HELLO_BYTES, &c->auth_got) <= 0) return 0;
        unsigned char challenge[AK_AUTH_CHALLENGE_BYTES];
        int status = AK_AUTH_NOT_SAME_USER;
        const char *why = ak__auth_check_peer(c->fd, c->auth.key);
        if (!why) why = ak__auth_server_on_hello(&c->auth, c->auth_msg, challenge, &status);
        if (why) {
            client_refuse_auth(c, status, 1, why);
            return 0;
        }
        unsigned char *out = client_queue(c, sizeof challenge);
        if (!out) return 0;
        memcpy(out, challenge, sizeof challenge);
        c->auth_stage = AUTH_RESPONSE;
        c->auth_got = 0;
        client_flush(c);
        return 1;
    }
    if (client_recv(c, c->auth_msg, AK_AUTH_RESPONSE_BYTES, &c->auth_got) <= 0) return 0;
    unsigned char result[AK_AUTH_RESULT_BYTES];
    const char *why = ak__auth_server_on_response(&c->auth, c->auth_msg, result);
    if (why) {
        client_refuse_auth(c, AK_AUTH_BAD_PROOF, 0, why);
        return 0;
    }
    unsigned char *out = client_queue(c, sizeof result);
    if (!out) return 0;
    memcpy(out, result, sizeof result);
    c->auth_stage = AUTH_DONE;
    AK_LOG_DEBUG(AK_SUBSYS_COMM, "store server: %s authenticated", c->peer);
    client_flush(c);
    return 1;
}

/* Reads and runs requests until the socket is empty, a request parks, or replies are
 * pending (back-pressure: a client that does not read its replies gets no more served). */
static void client_readable(ak__store_server *s, srv_client *c) {
    while (!c->dead && !c->parked && c->out_len == 0) {
        if (c->auth_stage != AUTH_DONE) {
            if (!client_authenticate(c)) return;
            continue;
        }
        if (!c->body) { /* still reading the header */
            if (client_recv(c, c->hdr, REQ_HDR, &c->hdr_got) <= 0) return;
            char why[128];
            if (ak__store_decode_header(c->hdr, &c->rq, why, sizeof why) != 0) {
                client_reject(c, why);
                return;
            }
            c->body_len = c->rq.key_len + c->rq.value_len; /* ≥ 1: keys are never empty */
            c->body = malloc(c->body_len);
            if (!c->body) {
                client_drop(c, "out of memory for the request");
                return;
            }
        }
        if (client_recv(c, c->body, c->body_len, &c->body_got) <= 0) return;
        char why[128];
        if (ak__store_decode_key(c->body, &c->rq, why, sizeof why) != 0) {
            client_reject(c, why);
            return;
        }
        client_execute(s, c, c->rq.timeout_ms);
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
        c->auth.key = &s->key;
        c->auth.role = AK_AUTH_ROLE_STORE;
        c->auth_deadline = now_ms() + AK_AUTH_HANDSHAKE_MS;
        ak__auth_peer_name(fd, c->peer, sizeof c->peer);
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
        if (c->auth_stage != AUTH_DONE && (next < 0 || c->auth_deadline < next))
            next = c->auth_deadline;
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
        if (!c->dead && c->auth_stage != AUTH_DONE && c->auth_deadline <= now)
            client_reject(c, "no handshake within the time allowed (AK_AUTH_HANDSHAKE_MS)");
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
    memset(&s->key, 0, sizeof s->key);
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
    s->listen_fd = -1;
    ak_status st = ak__auth_key_from_env(&s->key);
    if (st != AK_OK) {
        server_free(s);
        return st;
    }
    const char *gai_error = NULL;
    s->listen_fd = listen_on(bind_addr, port, &gai_error);
    if (s->listen_fd < 0) {
        st = AK_FAIL(AK_ERR_IO, "store: cannot listen on %s:%d: %s", shown, port,
                               gai_error ? gai_error : strerror(errno));
        server_free(s);
        return st;
    }
    char what[300];
    snprintf(what, sizeof what, "the store's listening address %s", shown);
    struct sockaddr_storage bound;
    socklen_t bound_len = sizeof bound;
    st = getsockname(s->listen_fd, (struct sockaddr *)&bound, &bound_len) == 0
             ? ak__auth_check_address(&s->key, &bound, what)
             : AK_FAIL(AK_ERR_IO, "store: getsockname: %s", strerror(errno));
    if (st != AK_OK) {
        server_free(s);
        return st;
    }
    s->port = bound_port_of(s->listen_fd);
    if (s->port < 0 || pipe2(s->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
        st = AK_FAIL(AK_ERR_IO, "store: setting up the server on %s:%d: %s", shown,
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
