/* Communicators: creation (world, local threads, split), topology, transports, freeing.
 *
 * Creation: discover the world (bootstrap/discover), connect to rank 0's store (rank 0
 * serves it), publish this rank's host id and learn everyone's, derive the host layout,
 * then create one transport for same-host peers (shm, or mem for threads of one process)
 * and one for the other hosts (tcp), and finish with a store barrier so nobody returns
 * before every rank can be reached. */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/algo/algo.h"
#include "comm/bootstrap/discover.h"
#include "comm/bootstrap/elastic.h"
#include "comm/comm_internal.h"
#include "comm/comm_model.h"
#include "core/check.h"
#include "core/params.h"

#define HOST_ID_MAX 160

/* ---- configuration ------------------------------------------------------------------ */

static ak_status parse_transport(const char *text, ak_comm_transport *out) {
    static const char *const names[] = {"auto", "tcp", "shm"};
    for (int i = 0; i < 3; i++)
        if (strcmp(text, names[i]) == 0) {
            *out = (ak_comm_transport)i;
            return AK_OK;
        }
    return AK_FAIL(AK_ERR_INVALID_ARG, "AK_COMM_TRANSPORT='%s' is not one of auto, tcp, shm", text);
}

/* Fills the unset fields of cfg from the environment parameters. */
static ak_status resolve_config(const ak_comm_config *in, ak_comm_config *out) {
    ak_comm_config def = AK_COMM_CONFIG_INIT;
    *out = in ? *in : def;
    AK_ARG_CHECK(out->struct_size == sizeof(ak_comm_config),
                 "ak_comm_config.struct_size is %u, expected %zu (initialize with "
                 "AK_COMM_CONFIG_INIT)", out->struct_size, sizeof(ak_comm_config));
    if (out->nstreams <= 0) out->nstreams = (int)ak__param_int(AK_PARAM_COMM_NSTREAMS);
    AK_ARG_CHECK(out->nstreams <= AK_COMM_MAX_STREAMS, "nstreams %d > %d", out->nstreams,
                 AK_COMM_MAX_STREAMS);
    if (out->timeout_ms <= 0) out->timeout_ms = (int)ak__param_int(AK_PARAM_COMM_TIMEOUT);
    if (out->transport == AK_COMM_TRANSPORT_AUTO)
        AK_CHECK(parse_transport(ak__param_str(AK_PARAM_COMM_TRANSPORT), &out->transport));
    if (out->algo == AK_COMM_ALGO_AUTO)
        AK_CHECK(ak__comm_algo_parse(ak__param_str(AK_PARAM_COMM_ALGO), &out->algo));
    AK_ARG_CHECK((unsigned)out->algo < AK_COMM_ALGO_COUNT_, "unknown algorithm %d", (int)out->algo);
    if (!out->tuning_file && ak__param_str(AK_PARAM_COMM_TUNING)[0])
        out->tuning_file = ak__param_str(AK_PARAM_COMM_TUNING);
    return AK_OK;
}

/* ---- topology --------------------------------------------------------------------- */

/* Derives host indices (numbered by lowest rank) from every rank's host id. */
static ak_status build_topology(ak_comm *c, char (*ids)[HOST_ID_MAX]) {
    c->host_of = calloc((size_t)c->size, sizeof *c->host_of);
    c->local_index_of = calloc((size_t)c->size, sizeof *c->local_index_of);
    c->same_host_ranks = calloc((size_t)c->size, sizeof *c->same_host_ranks);
    c->route = calloc((size_t)c->size, sizeof *c->route);
    c->all_ranks = calloc((size_t)c->size, sizeof *c->all_ranks);
    int counts_ok = c->all_ranks != NULL;
    for (int i = 0; i < 4; i++)
        counts_ok &= (c->counts[i] = calloc((size_t)c->size, sizeof *c->counts[i])) != NULL;
    if (!c->host_of || !c->local_index_of || !c->same_host_ranks || !c->route || !counts_ok)
        return AK_FAIL(AK_ERR_NO_MEMORY, "communicator: out of memory");
    for (int r = 0; r < c->size; r++) c->all_ranks[r] = r;
    int hosts = 0;
    for (int r = 0; r < c->size; r++) {
        int h = 0;
        while (h < r && strcmp(ids[h], ids[r]) != 0) h++;
        c->host_of[r] = h < r ? c->host_of[h] : hosts++;
    }
    int *per_host = calloc((size_t)hosts, sizeof *per_host);
    if (!per_host) return AK_FAIL(AK_ERR_NO_MEMORY, "communicator: out of memory");
    for (int r = 0; r < c->size; r++) c->local_index_of[r] = per_host[c->host_of[r]]++;
    free(per_host);
    c->host_count = hosts;
    c->host_index = c->host_of[c->rank];
    c->local_rank = c->local_index_of[c->rank];
    c->local_size = 0;
    for (int r = 0; r < c->size; r++)
        if (c->host_of[r] == c->host_index) c->same_host_ranks[c->local_size++] = r;
    return AK_OK;
}

/* A host id starting with this is a rank's refusal to join (check_world_size). */
#define WORLD_SIZE_REFUSAL '!'

/* Publishes this rank's host id and reads everyone's. */
static ak_status exchange_host_ids(ak_comm *c, const char *my_id) {
    char key[AK_STORE_MAX_KEY + 1];
    char(*ids)[HOST_ID_MAX] = calloc((size_t)c->size, sizeof *ids);
    if (!ids) return AK_FAIL(AK_ERR_NO_MEMORY, "communicator: out of memory");
    snprintf(key, sizeof key, "%s/host/%d", c->prefix, c->rank);
    ak_status st;
    AK_CHECK_GOTO(st, ak__store_set(c->store, key, my_id, strlen(my_id) + 1));
    for (int r = 0; r < c->size; r++) {
        size_t len;
        snprintf(key, sizeof key, "%s/host/%d", c->prefix, r);
        AK_CHECK_GOTO(st, ak__store_get(c->store, key, ids[r], HOST_ID_MAX - 1, &len,
                                        c->config.timeout_ms));
        if (ids[r][0] == WORLD_SIZE_REFUSAL) { /* see check_world_size */
            st = AK_FAIL(AK_ERR_MISMATCH, "%s", ids[r] + 1);
            goto fail;
        }
    }
    st = build_topology(c, ids);
fail:
    free(ids);
    return st;
}

/* ---- transports -------------------------------------------------------------------- */

typedef ak_status (*transport_create_fn)(const ak__transport_setup *, ak__transport *);

/* Creates transport `which` over the ranks whose route is `which`. */
static ak_status create_transport(ak_comm *c, int which, transport_create_fn create,
                                  const char *bind_addr, const char *advertise_addr) {
    int *peers = malloc((size_t)c->size * sizeof *peers), n = 0;
    if (!peers) return AK_FAIL(AK_ERR_NO_MEMORY, "communicator: out of memory");
    for (int r = 0; r < c->size; r++)
        if (r != c->rank && c->route[r] == which) peers[n++] = r;
    char prefix[sizeof c->prefix + 8];
    snprintf(prefix, sizeof prefix, "%s/tp%d", c->prefix, which);
    ak__transport_setup s = {c->store, prefix, c->rank, c->size, peers, n,
                             c->config.nstreams, c->config.timeout_ms, bind_addr,
                             advertise_addr, &c->lost};
    ak_status st = n > 0 ? create(&s, &c->transports[which]) : AK_OK;
    free(peers);
    return st;
}

/* The first non-loopback IPv4 address of an interface that is up; 0 on success. */
static int first_interface_address(char *buf, size_t cap) {
    struct ifaddrs *all = NULL;
    int found = -1;
    if (getifaddrs(&all) != 0) return -1;
    for (struct ifaddrs *i = all; i && found; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP) ||
            (i->ifa_flags & IFF_LOOPBACK))
            continue;
        found = inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, buf,
                          (socklen_t)cap) ? 0 : -1;
    }
    freeifaddrs(all);
    return found;
}

/* Where peers on other hosts dial this rank's TCP listener (AK_COMM_BIND_ADDR unset):
 * the address its store connection leaves from, the interface toward the store's host.
 * The store's own host may reach it over loopback (MASTER_ADDR naming itself; Debian
 * maps the host name to 127.0.1.1): with other hosts in the world, an interface's
 * address then. Publishing 127.0.0.1 made every cross-host connection fail unless
 * AK_COMM_BIND_ADDR was set. */
static ak_status advertised_address(const ak_comm *c, char *buf, size_t cap) {
    AK_CHECK(ak__store_local_address(c->store, buf, cap));
    if (c->host_count > 1 && !strncmp(buf, "127.", 4) && first_interface_address(buf, cap) != 0)
        return AK_FAIL(AK_ERR_IO, "comm: %d hosts but no network interface with an IPv4 "
                       "address here; set AK_COMM_BIND_ADDR", c->host_count);
    return AK_OK;
}

/* Routes same-host peers to the intra transport (shm; mem for threads) and the rest to
 * tcp; AK_COMM_TRANSPORT=tcp sends everything over tcp, =shm requires one host. */
static ak_status connect_transports(ak_comm *c, int threads_of_one_process) {
    ak_comm_transport t = c->config.transport;
    if (t == AK_COMM_TRANSPORT_SHM && c->host_count > 1)
        return AK_FAIL(AK_ERR_INVALID_ARG, "AK_COMM_TRANSPORT=shm but the ranks span %d hosts",
                       c->host_count);
    for (int r = 0; r < c->size; r++)
        c->route[r] = (t != AK_COMM_TRANSPORT_TCP && c->host_of[r] == c->host_index)
                          ? AK_COMM_TP_INTRA : AK_COMM_TP_INTER;
    transport_create_fn intra = t == AK_COMM_TRANSPORT_SHM || !threads_of_one_process
                                    ? ak__shm_transport_create : ak__mem_transport_create;
    const char *bind = ak__param_str(AK_PARAM_COMM_BIND_ADDR);
    char advertise[64] = "";
    if (!bind[0]) AK_CHECK(advertised_address(c, advertise, sizeof advertise));
    AK_CHECK(create_transport(c, AK_COMM_TP_INTRA, intra, NULL, NULL));
    /* listening only where peers dial (the advertised address), not on every interface */
    return create_transport(c, AK_COMM_TP_INTER, ak__tcp_transport_create,
                            bind[0] ? bind : advertise, bind[0] ? NULL : advertise);
}

/* Every rank has finished setup: a store counter reaches size. */
static ak_status store_barrier(ak_comm *c, const char *name) {
    char key[AK_STORE_MAX_KEY + 1];
    int64_t after;
    snprintf(key, sizeof key, "%s/%s", c->prefix, name);
    AK_CHECK(ak__store_add(c->store, key, 1, &after));
    return ak__store_wait_ge(c->store, key, c->size, c->config.timeout_ms);
}

/* ---- creation and freeing ----------------------------------------------------------- */

typedef struct comm_spec {
    int rank, size;
    ak__store *store;          /* referenced by the new communicator */
    const char *prefix;
    const ak_comm_config *cfg; /* resolved */
    const char *host_id;
    int threads_of_one_process;
    const ak_comm *parent; /* a split's: its cost model carries over (see comm_model.h) */
    int parent_topology;
} comm_spec;

static ak_status comm_create(const comm_spec *spec, ak_comm **out) {
    ak_comm *c = calloc(1, sizeof *c);
    if (!c) return AK_FAIL(AK_ERR_NO_MEMORY, "communicator: out of memory");
    c->rank = spec->rank;
    c->size = spec->size;
    c->config = *spec->cfg;
    c->threads_local = spec->threads_of_one_process;
    c->lost.peer = -1;
    c->store = ak__store_retain(spec->store);
    snprintf(c->prefix, sizeof c->prefix, "%s", spec->prefix);
    ak_status st;
    AK_CHECK_GOTO(st, exchange_host_ids(c, spec->host_id));
    AK_CHECK_GOTO(st, connect_transports(c, spec->threads_of_one_process));
    AK_CHECK_GOTO(st, ak__comm_model_init(c, spec->threads_of_one_process, spec->parent,
                                          spec->parent_topology));
    AK_CHECK_GOTO(st, store_barrier(c, "ready"));
    *out = c;
    return AK_OK;
fail:
    ak_comm_free(c);
    return st;
}

/* Rank 0 keeps serving the store until the other ranks have left it. After a failure
 * (at most the timeout, 10 s at most): survivors trace the lost rank through the store
 * (see ak__comm_fail), and one that found it gone would blame rank 0 instead. Healthy
 * (2 s at most): a peer may still wait for the answer to its last request, e.g. the
 * barrier that ends ak_comm_init when rank 0 frees the communicator right away. */
static void linger_for_peers(const ak_comm *c) {
    int cap_ms = c->failed != AK_OK ? 10000 : 2000;
    int limit_ms = c->config.timeout_ms < cap_ms ? c->config.timeout_ms : cap_ms;
    uint64_t deadline = ak_now_ns() + (uint64_t)limit_ms * 1000000u;
    while (ak__store_server_clients(c->store_server) > 0 && ak_now_ns() < deadline)
        nanosleep(&(struct timespec){0, 10 * 1000000L}, NULL);
}

void ak_comm_free(ak_comm *c) {
    if (!c) return;
    ak__comm_async_stop(c);
    ak__shm_direct_free(ak__comm_algo(c));
    for (int t = 0; t < AK_COMM_TP_COUNT; t++) ak__transport_destroy(&c->transports[t]);
    ak__store_free(c->store);
    if (c->store_server) linger_for_peers(c);
    ak__store_server_stop(c->store_server);
    free(c->host_of);
    free(c->local_index_of);
    free(c->same_host_ranks);
    free(c->route);
    free(c->all_ranks);
    for (int i = 0; i < 4; i++) free(c->counts[i]);
    ak_free(c->scratch);
    ak_free(c->work);
    free(c);
}

/* Ranks launched with different world sizes would wait for ranks that never come (or
 * never wait for some): rank 0 publishes its size, every other rank compares it with its
 * own first. One that disagrees publishes the reason in place of its host id, which rank
 * 0 waits for next, so both fail at once instead of at the timeout. */
static ak_status check_world_size(ak__store *store, int rank, int size, int timeout_ms) {
    char text[32];
    if (rank == 0) {
        int n = snprintf(text, sizeof text, "%d", size);
        return ak__store_set(store, "w/world_size", text, (size_t)n + 1);
    }
    size_t len;
    AK_CHECK(ak__store_get(store, "w/world_size", text, sizeof text - 1, &len, timeout_ms));
    text[len < sizeof text ? len : sizeof text - 1] = '\0';
    int theirs = atoi(text);
    if (theirs == size) return AK_OK;
    char key[AK_STORE_MAX_KEY + 1], refusal[HOST_ID_MAX];
    snprintf(key, sizeof key, "w/host/%d", rank);
    int n = snprintf(refusal, sizeof refusal, "%crank %d has world size %d, rank 0 (here) %d",
                     WORLD_SIZE_REFUSAL, rank, size, theirs);
    (void)ak__store_set(store, key, refusal, (size_t)n + 1); /* best effort: we fail anyway */
    return AK_FAIL(AK_ERR_MISMATCH, "rank %d: world size %d here but %d at rank 0 (do the "
                   "launchers or AK_WORLD_SIZE disagree?)", rank, size, theirs);
}

/* Where rank 0's store listens: AK_STORE_ADDR, else the store address the ranks dial
 * (loopback for single-host jobs), never every interface unless asked. */
static const char *store_bind_address(const ak__world_info *w) {
    const char *chosen = ak__param_str(AK_PARAM_STORE_ADDR);
    return chosen[0] ? chosen : w->store_addr;
}

/* A worker of an elastic launcher: its rank and world size are its place in the round
 * the launcher forms, whose store the launcher serves (no rank serves one). */
static ak_status comm_init_elastic(const ak_comm_config *resolved, const char *host_id,
                                   ak_comm **out) {
    ak__elastic_place place;
    ak__store *store;
    AK_CHECK(ak__elastic_join(resolved->timeout_ms, &place, &store));
    comm_spec spec = {place.rank, place.size, store, place.prefix, resolved, host_id, 0, NULL, 0};
    ak_status st = comm_create(&spec, out);
    ak__store_free(store);
    AK_CHECK(st);
    AK_LOG_INFO(AK_SUBSYS_COMM, "rank %d/%d (elastic round %d): %d host(s), %d local rank(s)",
                place.rank, place.size, place.round, (*out)->host_count, (*out)->local_size);
    return AK_OK;
}

ak_status ak_comm_init(const ak_comm_config *cfg, ak_comm **out) {
    AK_ARG_CHECK(out, "ak_comm_init: NULL output");
    *out = NULL;
    AK_ENSURE_INIT();
    ak_comm_config resolved;
    AK_CHECK(resolve_config(cfg, &resolved));
    char host_id[HOST_ID_MAX];
    if (resolved.host_id) snprintf(host_id, sizeof host_id, "%s", resolved.host_id);
    else AK_CHECK(ak__host_id(host_id, sizeof host_id));
    /* an explicit rank in the config wins over the launcher, as in ak__discover */
    if (ak__elastic_enabled() && resolved.rank < 0) return comm_init_elastic(&resolved, host_id, out);
    ak__world_info w;
    AK_CHECK(ak__discover(&resolved, &w));
    ak__store_server *server = NULL;
    ak__store *store = NULL;
    ak_status st;
    if (w.rank == 0 && w.world_size > 1)
        AK_CHECK_GOTO(st, ak__store_serve(store_bind_address(&w), w.store_port, NULL, &server));
    if (w.world_size > 1) {
        AK_CHECK_GOTO(st, ak__store_connect(w.store_addr, w.store_port, resolved.timeout_ms, &store));
        AK_CHECK_GOTO(st, check_world_size(store, w.rank, w.world_size, resolved.timeout_ms));
    } else
        AK_CHECK_GOTO(st, ak__store_create_memory(&store));
    comm_spec spec = {w.rank, w.world_size, store, "w", &resolved, host_id, 0, NULL, 0};
    AK_CHECK_GOTO(st, comm_create(&spec, out));
    (*out)->store_server = server; /* freed with the world communicator */
    ak__store_free(store);
    AK_LOG_INFO(AK_SUBSYS_COMM, "rank %d/%d (%s): %d host(s), %d local rank(s)", w.rank,
                w.world_size, w.source, (*out)->host_count, (*out)->local_size);
    return AK_OK;
fail:
    ak__store_free(store);
    ak__store_server_stop(server);
    return st;
}

/* ---- threads of one process ---------------------------------------------------------- */

typedef struct local_arg {
    comm_spec spec;
    ak_comm **slot;
    ak_status status;
    char error[256];
} local_arg;

static void *local_rank_main(void *p) {
    local_arg *a = p;
    a->status = comm_create(&a->spec, a->slot);
    if (a->status != AK_OK) snprintf(a->error, sizeof a->error, "%s", ak_last_error());
    return NULL;
}

ak_status ak_comm_init_local(int world_size, const ak_comm_config *cfg, ak_comm **comms) {
    AK_ARG_CHECK(comms, "ak_comm_init_local: NULL output array");
    AK_ARG_CHECK(world_size >= 1 && world_size <= 4096, "ak_comm_init_local: world size %d "
                 "not in [1, 4096]", world_size);
    AK_ENSURE_INIT();
    ak_comm_config resolved;
    AK_CHECK(resolve_config(cfg, &resolved));
    static _Atomic int generation;
    char prefix[64];
    snprintf(prefix, sizeof prefix, "local%d", atomic_fetch_add(&generation, 1));
    ak__store *store;
    AK_CHECK(ak__store_create_memory(&store));
    local_arg *args = calloc((size_t)world_size, sizeof *args);
    pthread_t *threads = calloc((size_t)world_size, sizeof *threads);
    ak_status st = args && threads ? AK_OK : AK_FAIL(AK_ERR_NO_MEMORY, "out of memory");
    for (int r = 0; st == AK_OK && r < world_size; r++) {
        comms[r] = NULL;
        args[r] = (local_arg){{r, world_size, store, prefix, &resolved, "local", 1, NULL, 0},
                              &comms[r], AK_OK, ""};
        if (pthread_create(&threads[r], NULL, local_rank_main, &args[r]) != 0) {
            st = AK_FAIL(AK_ERR_NO_MEMORY, "ak_comm_init_local: cannot start thread %d", r);
            world_size = r; /* join only what started */
        }
    }
    for (int r = 0; threads && r < world_size; r++) pthread_join(threads[r], NULL);
    for (int r = 0; args && r < world_size && st == AK_OK; r++)
        if (args[r].status != AK_OK)
            st = AK_FAIL(args[r].status, "rank %d: %s", r, args[r].error);
    if (st != AK_OK)
        for (int r = 0; r < world_size; r++) ak_comm_free(comms[r]), comms[r] = NULL;
    free(args);
    free(threads);
    ak__store_free(store);
    return st;
}

/* ---- split ------------------------------------------------------------------------- */

typedef struct split_entry {
    int color, key, rank;
} split_entry;

static int cmp_split(const void *a, const void *b) {
    const split_entry *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return (x->rank > y->rank) - (x->rank < y->rank);
}

/* Every rank's (color, key), through the store (split is rare; no collective needed). */
static ak_status gather_split_entries(ak_comm *c, int n, int color, int key, split_entry *all) {
    char k[AK_STORE_MAX_KEY + 1], v[64];
    snprintf(k, sizeof k, "%s/split%d/%d", c->prefix, n, c->rank);
    int len = snprintf(v, sizeof v, "%d %d", color, key);
    AK_CHECK(ak__store_set(c->store, k, v, (size_t)len + 1));
    for (int r = 0; r < c->size; r++) {
        size_t got;
        snprintf(k, sizeof k, "%s/split%d/%d", c->prefix, n, r);
        AK_CHECK(ak__store_get(c->store, k, v, sizeof v - 1, &got, c->config.timeout_ms));
        v[got < sizeof v ? got : sizeof v - 1] = '\0';
        all[r].rank = r;
        if (sscanf(v, "%d %d", &all[r].color, &all[r].key) != 2)
            return AK_FAIL(AK_ERR_REMOTE, "ak_comm_split: bad entry from rank %d", r);
    }
    return AK_OK;
}

ak_status ak_comm_split(ak_comm *c, int color, int key, ak_comm **out) {
    AK_ARG_CHECK(c && out, "ak_comm_split: NULL argument");
    *out = NULL;
    AK_CHECK(c->failed);
    int n = c->split_count++;
    split_entry *all = calloc((size_t)c->size, sizeof *all);
    if (!all) return AK_FAIL(AK_ERR_NO_MEMORY, "ak_comm_split: out of memory");
    ak_status st;
    AK_CHECK_GOTO(st, gather_split_entries(c, n, color, key, all));
    if (color < 0) goto fail; /* st == AK_OK: this rank joins no group */
    int members = 0;
    for (int r = 0; r < c->size; r++)
        if (all[r].color == color) all[members++] = all[r];
    qsort(all, (size_t)members, sizeof *all, cmp_split);
    int me = 0;
    while (all[me].rank != c->rank) me++;
    char prefix[sizeof c->prefix], host[32];
    if (snprintf(prefix, sizeof prefix, "%s/s%d.%d", c->prefix, n, color) >= (int)sizeof prefix) {
        st = AK_FAIL(AK_ERR_UNSUPPORTED, "ak_comm_split: communicators nested too deeply");
        goto fail;
    }
    snprintf(host, sizeof host, "h%d", c->host_index); /* hosts as the parent saw them */
    int same = members == c->size;
    for (int r = 0; r < members && same; r++) same = all[r].rank == r;
    comm_spec spec = {me, members, c->store, prefix, &c->config, host, c->threads_local, c, same};
    st = comm_create(&spec, out);
fail:
    free(all);
    return st;
}

/* ---- queries ----------------------------------------------------------------------- */

ak_status ak_comm_rank(const ak_comm *c, int *rank) {
    AK_ARG_CHECK(c && rank, "ak_comm_rank: NULL argument");
    *rank = c->rank;
    return AK_OK;
}

ak_status ak_comm_size(const ak_comm *c, int *size) {
    AK_ARG_CHECK(c && size, "ak_comm_size: NULL argument");
    *size = c->size;
    return AK_OK;
}

ak_status ak_comm_local(const ak_comm *c, int *local_rank, int *local_size) {
    AK_ARG_CHECK(c && local_rank && local_size, "ak_comm_local: NULL argument");
    *local_rank = c->local_rank;
    *local_size = c->local_size;
    return AK_OK;
}

ak_status ak_comm_hosts(const ak_comm *c, int *host_index, int *host_count) {
    AK_ARG_CHECK(c && host_index && host_count, "ak_comm_hosts: NULL argument");
    *host_index = c->host_index;
    *host_count = c->host_count;
    return AK_OK;
}

/* Grows *buf to at least `bytes`; contents are not kept. */
static ak_status grow_buffer(void **buf, size_t *cap, size_t bytes, void **out) {
    if (bytes > *cap) {
        ak_free(*buf);
        *buf = NULL;
        *cap = 0;
        AK_CHECK(ak_alloc(bytes, buf));
        *cap = bytes;
    }
    *out = *buf;
    return AK_OK;
}

ak_status ak__comm_scratch(ak_comm *c, size_t bytes, void **out) {
    return grow_buffer(&c->scratch, &c->scratch_bytes, bytes, out);
}

ak_status ak__comm_work(ak_comm *c, size_t bytes, void **out) {
    return grow_buffer(&c->work, &c->work_bytes, bytes, out);
}

/* ---- what the algorithms see -------------------------------------------------------- */

static ak_status algo_scratch(void *owner, size_t bytes, void **out) {
    return ak__comm_scratch(owner, bytes, out);
}

static ak_status algo_fail(void *owner, ak_status st) { return ak__comm_fail(owner, st); }

/* Refilled on every call (a dozen stores): the communicator's fields stay the one truth,
 * whatever changed them since (the tests' fake topologies, a changed timeout). */
const ak__algo_ctx *ak__comm_algo(ak_comm *c) {
    c->algo = (ak__algo_ctx){
        .rank = c->rank, .size = c->size,
        .local_rank = c->local_rank, .local_size = c->local_size, .host_count = c->host_count,
        .host_of = c->host_of, .local_index_of = c->local_index_of,
        .same_host_ranks = c->same_host_ranks, .threads_local = c->threads_local,
        .transports = c->transports, .route = c->route, .timeout_ms = c->config.timeout_ms,
        .failed = &c->failed, .lost = &c->lost, .on_failure = algo_fail, .get_scratch = algo_scratch,
        .store = c->store, .prefix = c->prefix, .shm_direct = &c->shm_direct, .owner = c,
    };
    return &c->algo;
}

/* splitmix64 finalizer: a cheap, well-mixed digest of the call's arguments */
static uint64_t tag_mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The high 32 bits count collectives (two ranks out of step disagree there), the low 32
 * are a digest of (kind, count, dtype, op, root) so mismatched calls differ on the wire
 * even when issued in step. */
uint64_t ak__comm_next_tag(ak_comm *comm, int kind, size_t count, int dtype, int op,
                           int root) {
    uint64_t h = tag_mix(((uint64_t)(uint32_t)kind << 32) ^ (uint64_t)(uint32_t)root);
    h = tag_mix(h ^ ((uint64_t)(uint8_t)dtype << 8 | (uint8_t)op));
    h = tag_mix(h ^ (uint64_t)count);
    uint64_t seq = comm->seq++;
    return (seq << 32) | (h & 0xffffffffu);
}


/* ---- failures --------------------------------------------------------------------------
 *
 * With more than two ranks a loss reaches most ranks second hand: the ranks next to a dead
 * one fail and close their transports, so ranks further away see *them* close. To name the
 * rank actually lost, every failing rank records "<prefix>/fail/<rank>" = "<lost> <origin>
 * <status>" in the store before it closes anything. A rank that sees peer s close (or
 * time out) reads s's record: the rank s lost, if it names one; else s failed by itself
 * (a mismatch, ...: its origin). No record within CLOSED_WAIT_MS means s went without a
 * word (killed, crashed, hung); an unreachable store means rank 0 is gone, as it serves
 * the store (ak_comm_free keeps it serving after a failure until the others left).
 * Shared memory tells more: a peer whose pid is gone is the rank lost (no look-up), and
 * one that announced its failure in a shared word is alive and records its reason next,
 * possibly after tracing its own loss, so it gets FAILED_WAIT_MS. So does a peer over
 * sockets that flagged "<prefix>/failing/<rank>": it timed out too (a rank further away
 * stopped) and is still tracing, so its record names the rank actually lost. */

#define CLOSED_WAIT_MS 300  /* closed ends recorded first: this is only slack */
#define FAILED_WAIT_MS 2000 /* > CLOSED_WAIT_MS: the announcer may be tracing a closed end */

typedef struct fail_record {
    int lost;         /* the rank lost, or -1 */
    int origin;       /* when lost < 0: the rank whose own failure this is */
    ak_status status; /* the failure seen by the rank that detected it first */
} fail_record;

/* snprintf where a long message may be cut short (the peer's view comes last) */
static void say(char *msg, size_t cap, const char *fmt, ...) AK_PRINTF(3, 4);
static void say(char *msg, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, cap, fmt, ap);
    va_end(ap);
}

/* The error text of this rank's failure, naming the rank lost where there is one; fills
 * what this rank records for its peers. `seen` is this rank's own view of the failure. */
static void trace_failure(ak_comm *c, ak_status st, const char *seen, char *msg, size_t cap,
                          fail_record *rec) {
    int s = c->lost.peer, me = c->rank;
    *rec = (fail_record){-1, me, st};
    say(msg, cap, "%s", seen);
    if ((st != AK_ERR_REMOTE && st != AK_ERR_TIMEOUT) || s < 0 || s >= c->size || s == me)
        return; /* this rank's own failure */
    if (c->lost.how == AK_LOST_GONE) {
        *rec = (fail_record){s, -1, st};
        say(msg, cap, "comm: rank %d was lost (its process is gone); rank %d saw: %s", s, me,
            seen);
        return;
    }
    char key[AK_STORE_MAX_KEY + 1], val[64];
    size_t len;
    snprintf(key, sizeof key, "%s/fail/%d", c->prefix, s);
    int wait_ms = c->lost.how == AK_LOST_FAILED ? FAILED_WAIT_MS : CLOSED_WAIT_MS;
    if (wait_ms > c->config.timeout_ms) wait_ms = c->config.timeout_ms;
    ak_status got = ak__store_get(c->store, key, val, sizeof val - 1, &len, wait_ms);
    if (got == AK_ERR_TIMEOUT && wait_ms < FAILED_WAIT_MS) {
        /* s may have timed out at the same moment as this rank and still be tracing its
         * own loss (a rank further away stopped): it said so under "failing" */
        char flag_key[AK_STORE_MAX_KEY + 1], flag[8];
        size_t flag_len;
        snprintf(flag_key, sizeof flag_key, "%s/failing/%d", c->prefix, s);
        int wait_more = FAILED_WAIT_MS > c->config.timeout_ms ? c->config.timeout_ms
                                                             : FAILED_WAIT_MS;
        if (ak__store_get(c->store, flag_key, flag, sizeof flag, &flag_len, 1) == AK_OK)
            got = ak__store_get(c->store, key, val, sizeof val - 1, &len, wait_more);
    }
    fail_record theirs;
    int their_st;
    if (got == AK_OK) {
        val[len < sizeof val ? len : sizeof val - 1] = '\0';
        if (sscanf(val, "%d %d %d", &theirs.lost, &theirs.origin, &their_st) != 3 ||
            theirs.lost >= c->size || theirs.origin >= c->size)
            return; /* not ours to interpret: keep this rank's view */
        theirs.status = (ak_status)their_st;
        if (theirs.lost >= 0 && theirs.lost != me) {
            *rec = (fail_record){theirs.lost, -1, theirs.status};
            say(msg, cap, "comm: rank %d %s (reported by rank %d); rank %d saw: %s",
                     theirs.lost, theirs.status == AK_ERR_TIMEOUT ? "stopped responding"
                                                                 : "was lost", s, me, seen);
        } else if (theirs.lost == me) { /* s gave up waiting for this rank */
            *rec = (fail_record){-1, s, theirs.status};
            say(msg, cap, "comm: rank %d failed first (%s waiting for rank %d); rank %d "
                     "saw: %s", s, ak_status_str(theirs.status), me, me, seen);
        } else if (theirs.origin >= 0) {
            *rec = (fail_record){-1, theirs.origin, theirs.status};
            say(msg, cap, "comm: rank %d failed first (%s); rank %d saw: %s", theirs.origin,
                     ak_status_str(theirs.status), me, seen);
        }
    } else if (got == AK_ERR_TIMEOUT) { /* s left no record: it is the one lost */
        *rec = (fail_record){s, -1, st};
        say(msg, cap, "comm: rank %d %s (no failure recorded by it: killed, crashed or "
                 "hung); rank %d saw: %s", s, st == AK_ERR_TIMEOUT ? "stopped responding"
                                                                   : "was lost", me, seen);
    } else if (!c->threads_local && !strchr(c->prefix, '/')) {
        /* a world communicator whose store (served by its rank 0) is gone */
        *rec = (fail_record){0, -1, st};
        say(msg, cap, "comm: rank 0 was lost (the store it serves is unreachable); rank "
                 "%d saw: %s", me, seen);
    }
}

/* A failure closes this rank's transports at once, while the failing operation's frame
 * is still alive: no transport keeps pointers to its posted ops, and peers blocked on
 * this rank see the connection drop (AK_ERR_REMOTE) instead of waiting for the timeout,
 * so one rank's mismatch or loss becomes an error on every rank quickly. The failure is
 * recorded in the store first, so that those peers can tell what happened. */
ak_status ak__comm_fail(ak_comm *c, ak_status st) {
    if (st == AK_OK || c->failed != AK_OK) return st;
    c->failed = st;
    char seen[512], msg[512], key[AK_STORE_MAX_KEY + 1], val[64];
    snprintf(seen, sizeof seen, "%s", ak_last_error()); /* store calls overwrite it */
    snprintf(key, sizeof key, "%s/failing/%d", c->prefix, c->rank);
    ak__store_set(c->store, key, "1", 1); /* alive and tracing: a record follows */
    fail_record rec;
    trace_failure(c, st, seen, msg, sizeof msg, &rec);
    snprintf(key, sizeof key, "%s/fail/%d", c->prefix, c->rank);
    int n = snprintf(val, sizeof val, "%d %d %d", rec.lost, rec.origin, (int)rec.status);
    if (ak__store_set(c->store, key, val, (size_t)n + 1) != AK_OK)
        AK_LOG_DEBUG(AK_SUBSYS_COMM, "rank %d: cannot record its failure: %s", c->rank,
                     ak_last_error());
    for (int t = 0; t < AK_COMM_TP_COUNT; t++) ak__transport_destroy(&c->transports[t]);
    return AK_FAIL(st, "%s", msg);
}
