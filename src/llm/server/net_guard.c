/* Admission control and request deadlines (see net_guard.h).
 *
 * Why a watchdog and not libmicrohttpd's timeout: MHD_OPTION_CONNECTION_TIMEOUT is an idle
 * timeout that every received byte restarts, so a client sending a header byte a second
 * holds its connection (and, with one thread per connection, a thread) forever. We keep
 * MHD's own accept loop and threads — they serve well — and add what it lacks: each
 * socket is recorded when MHD reports it started (NOTIFY_CONNECTION), gets an absolute
 * deadline whenever it waits for a request, and a watchdog thread shuts down (SHUT_RDWR)
 * the sockets still waiting past it; the connection's thread then sees the socket end
 * and MHD closes it through its normal path. Accepting sockets ourselves and handing them
 * over with MHD_add_connection would give the same control at the cost of a second
 * accept loop. The accept-policy callback refuses a socket before MHD spends a thread on
 * it, and runs on the same listening thread as the STARTED notification, so the counts
 * it reads are the ones STARTED then updates. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/check.h"
#include "llm/server/net_guard.h"

#define WATCH_PERIOD_MS 50      /* how often the watchdog looks: deadlines hold to this */
#define RESERVED_TIMEOUT_S 2.0  /* a reserved slot waits this long for its /health request */
#define IP_BUCKETS 1024

typedef struct client_ip {
    struct client_ip *next;
    char addr[INET6_ADDRSTRLEN];
    int32_t conns;
} client_ip;

typedef struct guard_conn {
    struct guard_conn *prev, *next;
    ak__guard *g;
    int fd;
    client_ip *ip;
    uint64_t deadline_ns;  /* 0 = none: a request is being answered */
    int requests_done;     /* answered on this connection so far */
    int request_started;   /* the request line of the awaited request arrived */
    int reserved;          /* holds a slot kept for /health */
    int killed;
} guard_conn;

struct ak__guard {
    ak__guard_options o;
    ak__metrics *m;
    ak__access_log *log;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t watchdog;
    int stop;
    guard_conn *conns;
    int32_t n_conns, n_reserved;
    client_ip *ips[IP_BUCKETS];
};

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* The address as text; an IPv4 client on an IPv6 socket as plain IPv4, so its limit is
 * shared however it connects. */
static void addr_text(const struct sockaddr *a, char *out, size_t cap) {
    snprintf(out, cap, "-");
    if (!a) return;
    if (a->sa_family == AF_INET) {
        inet_ntop(AF_INET, &((const struct sockaddr_in *)a)->sin_addr, out, (socklen_t)cap);
    } else if (a->sa_family == AF_INET6) {
        const struct in6_addr *v6 = &((const struct sockaddr_in6 *)a)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(v6)) inet_ntop(AF_INET, &v6->s6_addr[12], out, (socklen_t)cap);
        else inet_ntop(AF_INET6, v6, out, (socklen_t)cap);
    }
}

static unsigned ip_hash(const char *s) {
    unsigned h = 2166136261u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
    return h % IP_BUCKETS;
}

/* Under g->mu. */
static client_ip *ip_find(ak__guard *g, const char *addr, int create) {
    unsigned b = ip_hash(addr);
    for (client_ip *p = g->ips[b]; p; p = p->next)
        if (!strcmp(p->addr, addr)) return p;
    if (!create) return NULL;
    client_ip *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    snprintf(p->addr, sizeof p->addr, "%s", addr);
    p->next = g->ips[b];
    g->ips[b] = p;
    return p;
}

/* Under g->mu. */
static void ip_release(ak__guard *g, client_ip *ip) {
    if (!ip || --ip->conns > 0) return;
    client_ip **pp = &g->ips[ip_hash(ip->addr)];
    while (*pp && *pp != ip) pp = &(*pp)->next;
    if (*pp) *pp = ip->next;
    free(ip);
}

static void log_reject(ak__guard *g, const char *client, ak__reject why) {
    ak__metrics_reject(g->m, why);
    ak__access_entry e = {.client = client, .rejected = 1, .reason = ak__reject_name(why)};
    ak__access_log_write(g->log, &e);
}

static int is_loopback(const struct sockaddr *a) {
    if (!a) return 0;
    if (a->sa_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)a)->sin_addr.s_addr) >> 24) == 127;
    if (a->sa_family != AF_INET6) return 0;
    const struct in6_addr *v6 = &((const struct sockaddr_in6 *)a)->sin6_addr;
    return IN6_IS_ADDR_LOOPBACK(v6) || (IN6_IS_ADDR_V4MAPPED(v6) && v6->s6_addr[12] == 127);
}

/* ---- admission ----------------------------------------------------------------------- */

enum MHD_Result ak__guard_accept(void *cls, const struct sockaddr *addr, socklen_t len) {
    (void)len;
    ak__guard *g = cls;
    char text[INET6_ADDRSTRLEN];
    addr_text(addr, text, sizeof text);
    pthread_mutex_lock(&g->mu);
    const client_ip *ip = ip_find(g, text, 0);
    int exempt = !g->o.limit_loopback && is_loopback(addr);
    int per_client = !exempt && g->o.max_per_client > 0 && ip && ip->conns >= g->o.max_per_client;
    int full = g->n_conns >= g->o.max_connections + g->o.reserved_health;
    pthread_mutex_unlock(&g->mu);
    if (!per_client && !full) return MHD_YES;
    log_reject(g, text, per_client ? AK__REJECT_PER_CLIENT : AK__REJECT_TOTAL_CAP);
    return MHD_NO;
}

static void conn_started(ak__guard *g, struct MHD_Connection *c, void **socket_context) {
    guard_conn *k = calloc(1, sizeof *k);
    if (!k) return; /* unguarded, but served */
    const union MHD_ConnectionInfo *fd = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    const union MHD_ConnectionInfo *ca = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    char text[INET6_ADDRSTRLEN];
    addr_text(ca ? ca->client_addr : NULL, text, sizeof text);
    k->g = g;
    k->fd = fd ? fd->connect_fd : -1;
    pthread_mutex_lock(&g->mu);
    k->ip = ip_find(g, text, 1);
    if (k->ip) k->ip->conns++;
    k->reserved = g->n_conns >= g->o.max_connections;
    double wait_s = k->reserved && RESERVED_TIMEOUT_S < g->o.request_timeout_s
                        ? RESERVED_TIMEOUT_S : g->o.request_timeout_s;
    k->deadline_ns = now_ns() + (uint64_t)(wait_s * 1e9);
    g->n_conns++;
    g->n_reserved += k->reserved;
    k->next = g->conns;
    if (g->conns) g->conns->prev = k;
    g->conns = k;
    pthread_mutex_unlock(&g->mu);
    ak__metrics_connections(g->m, 1);
    *socket_context = k;
}

static void conn_closed(ak__guard *g, void **socket_context) {
    guard_conn *k = *socket_context;
    if (!k) return;
    pthread_mutex_lock(&g->mu);
    if (k->prev) k->prev->next = k->next;
    else g->conns = k->next;
    if (k->next) k->next->prev = k->prev;
    g->n_conns--;
    g->n_reserved -= k->reserved;
    ip_release(g, k->ip);
    pthread_mutex_unlock(&g->mu);
    ak__metrics_connections(g->m, -1);
    free(k);
    *socket_context = NULL;
}

void ak__guard_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                      enum MHD_ConnectionNotificationCode code) {
    if (code == MHD_CONNECTION_NOTIFY_STARTED) conn_started(cls, c, socket_context);
    else if (code == MHD_CONNECTION_NOTIFY_CLOSED) conn_closed(cls, socket_context);
}

unsigned ak__guard_mhd_limit(const ak__guard *g) {
    return (unsigned)(g->o.max_connections + g->o.reserved_health) + 16;
}

/* ---- per request --------------------------------------------------------------------- */

static guard_conn *conn_of(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *i =
        c ? MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT) : NULL;
    return i ? i->socket_context : NULL;
}

void ak__guard_request_line(struct MHD_Connection *c) {
    guard_conn *k = conn_of(c);
    if (!k) return;
    pthread_mutex_lock(&k->g->mu);
    k->request_started = 1;
    pthread_mutex_unlock(&k->g->mu);
}

void ak__guard_request_received(struct MHD_Connection *c) {
    guard_conn *k = conn_of(c);
    if (!k) return;
    pthread_mutex_lock(&k->g->mu);
    k->deadline_ns = 0;
    pthread_mutex_unlock(&k->g->mu);
}

void ak__guard_request_done(struct MHD_Connection *c) {
    guard_conn *k = conn_of(c);
    if (!k) return;
    pthread_mutex_lock(&k->g->mu);
    k->requests_done++;
    k->request_started = 0;
    k->deadline_ns = now_ns() + (uint64_t)(k->g->o.request_timeout_s * 1e9);
    pthread_mutex_unlock(&k->g->mu);
}

int ak__guard_on_reserved_slot(struct MHD_Connection *c) {
    const guard_conn *k = conn_of(c);
    return k && k->reserved;
}

const char *ak__guard_client(struct MHD_Connection *c) {
    const guard_conn *k = conn_of(c);
    return k && k->ip ? k->ip->addr : "-";
}

/* ---- the watchdog -------------------------------------------------------------------- */

/* Under g->mu: shuts down the sockets past their deadline. A connection that never
 * answered a request, or whose request line came, was too slow: a rejection; an idle
 * keep-alive connection is just closed. */
static void sweep(ak__guard *g, uint64_t now) {
    for (guard_conn *k = g->conns; k; k = k->next) {
        if (k->killed || !k->deadline_ns || now < k->deadline_ns) continue;
        k->killed = 1;
        if (k->fd >= 0) shutdown(k->fd, SHUT_RDWR);
        if (k->requests_done == 0 || k->request_started)
            log_reject(g, k->ip ? k->ip->addr : "-", AK__REJECT_REQUEST_DEADLINE);
    }
}

static void *watchdog(void *arg) {
    ak__guard *g = arg;
    pthread_mutex_lock(&g->mu);
    while (!g->stop) {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        t.tv_nsec += WATCH_PERIOD_MS * 1000000L;
        if (t.tv_nsec >= 1000000000L) t.tv_sec++, t.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&g->cv, &g->mu, &t);
        if (!g->stop) sweep(g, now_ns());
    }
    pthread_mutex_unlock(&g->mu);
    return NULL;
}

ak_status ak__guard_create(const ak__guard_options *o, ak__metrics *m, ak__access_log *log,
                           ak__guard **out) {
    AK_ARG_CHECK(o->max_connections >= 1, "server: max connections %d < 1", o->max_connections);
    AK_ARG_CHECK(o->reserved_health >= 0, "server: reserved /health slots %d < 0",
                 o->reserved_health);
    AK_ARG_CHECK(o->max_per_client >= 0, "server: connections per client %d < 0",
                 o->max_per_client);
    AK_ARG_CHECK(o->request_timeout_s > 0 && o->request_timeout_s <= 86400,
                 "server: request timeout %g s not in (0, 86400]", o->request_timeout_s);
    ak__guard *g = calloc(1, sizeof *g);
    if (!g) return AK_FAIL(AK_ERR_NO_MEMORY, "server: guard");
    g->o = *o;
    g->m = m;
    g->log = log;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int ok = pthread_mutex_init(&g->mu, NULL) == 0 && pthread_cond_init(&g->cv, &ca) == 0;
    pthread_condattr_destroy(&ca);
    if (!ok || pthread_create(&g->watchdog, NULL, watchdog, g) != 0) {
        free(g);
        return AK_FAIL(AK_ERR_INTERNAL, "server: cannot start the connection watchdog");
    }
    *out = g;
    return AK_OK;
}

void ak__guard_free(ak__guard *g) {
    if (!g) return;
    pthread_mutex_lock(&g->mu);
    g->stop = 1;
    pthread_cond_signal(&g->cv);
    pthread_mutex_unlock(&g->mu);
    pthread_join(g->watchdog, NULL);
    for (int b = 0; b < IP_BUCKETS; b++)
        for (client_ip *p = g->ips[b], *n; p; p = n) n = p->next, free(p);
    for (guard_conn *k = g->conns, *n; k; k = n) n = k->next, free(k);
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
    free(g);
}
