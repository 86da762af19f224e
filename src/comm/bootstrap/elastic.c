/* Elastic jobs, the worker's side (see elastic.h): joining the launcher's rounds and
 * asking it whether the host set changed. */
#include "comm/bootstrap/elastic.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accelkit/comm.h"
#include "comm/bootstrap/discover.h"
#include "core/check.h"

/* What this process knows of its place in the job; one per process, as the launcher
 * names processes, not communicators. */
static struct {
    pthread_mutex_t lock;
    long long requests;     /* requests made so far: the next one's number */
    int round;              /* last round joined, -1 before the first */
    long long hosts_joined; /* the host set's version when that round formed */
    int removed;
    ak__store *query; /* a connection of its own for ak_elastic_hosts_changed */
} self = {PTHREAD_MUTEX_INITIALIZER, 0, -1, 0, 0, NULL};

int ak__elastic_enabled(void) { return ak__env("AK_ELASTIC_ADDR") != NULL; }

/* The launcher's address, port and this worker's id from the environment. */
static ak_status launcher_of(const char **addr, int *port, int *id) {
    const char *p = ak__env("AK_ELASTIC_PORT"), *i = ak__env("AK_ELASTIC_ID");
    *addr = ak__env("AK_ELASTIC_ADDR");
    char *end = NULL;
    long pv = p ? strtol(p, &end, 10) : 0;
    AK_ARG_CHECK(p && *end == '\0' && pv > 0 && pv < 65536,
                 "elastic: AK_ELASTIC_PORT='%s' is not a port", p ? p : "");
    long iv = i ? strtol(i, &end, 10) : -1;
    AK_ARG_CHECK(i && *end == '\0' && iv >= 0 && iv < INT_MAX,
                 "elastic: AK_ELASTIC_ID='%s' is not a worker id", i ? i : "");
    *port = (int)pv, *id = (int)iv;
    return AK_OK;
}

/* How long a worker waits for its round: the launcher's elastic timeout and a minute more
 * (the launcher fails the job at its own timeout; this one only guards a hung launcher). */
static int round_wait_ms(void) {
    const char *t = ak__env("AK_ELASTIC_TIMEOUT");
    long s = t ? strtol(t, NULL, 10) : 600;
    if (s < 1 || s > 86400) s = 600;
    return (int)(s + 60) * 1000;
}

int ak__elastic_parse_answer(const char *text, ak__elastic_place *place, long long *hosts) {
    if (!strncmp(text, "leave", 5)) return 1;
    char tail;
    if (sscanf(text, "%d %d %d %lld %c", &place->round, &place->rank, &place->size, hosts,
               &tail) != 4 ||
        place->round < 0 || place->size < 1 || place->rank < 0 || place->rank >= place->size ||
        *hosts < 0)
        return -1;
    snprintf(place->prefix, sizeof place->prefix, "e%d", place->round);
    return 0;
}

/* Reads the launcher's answer to request `req` of worker `id` into place. */
static ak_status read_answer(ak__store *store, int id, long long req, ak__elastic_place *place,
                             long long *hosts) {
    char key[AK_STORE_MAX_KEY + 1], val[256];
    size_t len;
    snprintf(key, sizeof key, AK_ELASTIC_KEY_ASSIGN, id, req);
    AK_CHECK(ak__store_get(store, key, val, sizeof val - 1, &len, round_wait_ms()));
    val[len < sizeof val ? len : sizeof val - 1] = '\0'; /* longer answers are cut, not read */
    int parsed = ak__elastic_parse_answer(val, place, hosts);
    if (parsed == 1) {
        pthread_mutex_lock(&self.lock);
        self.removed = 1;
        pthread_mutex_unlock(&self.lock);
        return AK_FAIL(AK_ERR_REMOTE, "elastic: the launcher took worker %d out of the job:%s",
                       id, val + 5);
    }
    if (parsed != 0)
        return AK_FAIL(AK_ERR_REMOTE, "elastic: the launcher's answer '%s' is not a place", val);
    return AK_OK;
}

/* Asks for a place: the request number under the worker's key, then the counter the
 * launcher watches. */
static ak_status request_place(ak__store *store, int id, long long req) {
    char key[AK_STORE_MAX_KEY + 1], val[32];
    snprintf(key, sizeof key, AK_ELASTIC_KEY_READY, id);
    int n = snprintf(val, sizeof val, "%lld", req);
    AK_CHECK(ak__store_set(store, key, val, (size_t)n));
    int64_t after;
    return ak__store_add(store, AK_ELASTIC_KEY_REQUESTS, 1, &after);
}

ak_status ak__elastic_join(int connect_timeout_ms, ak__elastic_place *place, ak__store **store) {
    const char *addr;
    int port, id;
    *store = NULL;
    AK_CHECK(launcher_of(&addr, &port, &id));
    pthread_mutex_lock(&self.lock);
    long long req = self.requests++;
    pthread_mutex_unlock(&self.lock);
    AK_CHECK(ak__store_connect(addr, port, connect_timeout_ms, store));
    long long hosts = 0;
    ak_status st = request_place(*store, id, req);
    if (st == AK_OK) st = read_answer(*store, id, req, place, &hosts);
    if (st != AK_OK) {
        ak__store_free(*store);
        *store = NULL;
        return st;
    }
    pthread_mutex_lock(&self.lock);
    self.round = place->round;
    self.hosts_joined = hosts;
    pthread_mutex_unlock(&self.lock);
    AK_LOG_INFO(AK_SUBSYS_COMM, "elastic: worker %d joined round %d as rank %d of %d", id,
                place->round, place->rank, place->size);
    return AK_OK;
}

ak_status ak_elastic_status(int *enabled, int *round, int *removed) {
    pthread_mutex_lock(&self.lock);
    if (enabled) *enabled = ak__elastic_enabled();
    if (round) *round = self.round;
    if (removed) *removed = self.removed;
    pthread_mutex_unlock(&self.lock);
    return AK_OK;
}

/* A counter or flag value the launcher set (absent: 0). */
static ak_status read_number(ak__store *store, const char *key, long long *out) {
    char val[32];
    size_t len;
    ak_status st = ak__store_get(store, key, val, sizeof val - 1, &len, 0);
    *out = 0;
    if (st == AK_ERR_TIMEOUT) return AK_OK; /* never set */
    AK_CHECK(st);
    val[len < sizeof val ? len : sizeof val - 1] = '\0';
    *out = strtoll(val, NULL, 10);
    return AK_OK;
}

/* The union of the changes after version `since` up to the current one (0: none). */
static ak_status changes_since(ak__store *store, long long since, int *flags) {
    long long now, f;
    *flags = 0;
    AK_CHECK(read_number(store, AK_ELASTIC_KEY_HOSTS, &now));
    for (long long v = since + 1; v <= now; v++) {
        char key[AK_STORE_MAX_KEY + 1];
        snprintf(key, sizeof key, AK_ELASTIC_KEY_HOSTS_CHANGE, v);
        AK_CHECK(read_number(store, key, &f));
        *flags |= (int)f | (f == 0 ? 1 : 0); /* an unrecorded change counts as hosts coming */
    }
    return AK_OK;
}

ak_status ak_elastic_hosts_changed(int *changed, int *removed_only) {
    AK_ARG_CHECK(changed && removed_only, "ak_elastic_hosts_changed: NULL argument");
    *changed = *removed_only = 0;
    if (!ak__elastic_enabled()) return AK_OK;
    const char *addr;
    int port, id, flags = 0;
    AK_CHECK(launcher_of(&addr, &port, &id));
    pthread_mutex_lock(&self.lock);
    ak_status st = AK_OK;
    if (!self.query) st = ak__store_connect(addr, port, 5000, &self.query);
    if (st == AK_OK) st = changes_since(self.query, self.hosts_joined, &flags);
    if (st != AK_OK && self.query) ak__store_free(self.query), self.query = NULL; /* reconnect next time */
    pthread_mutex_unlock(&self.lock);
    AK_CHECK(st);
    *changed = flags != 0;
    *removed_only = flags == 2;
    return AK_OK;
}
