/* Bootstrap store: argument checks and dispatch, plus the in-memory implementation used
 * by threads of one process (a mutex-protected list of keys and a condition variable
 * that waiters sleep on). */
#include <errno.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/bootstrap/store_impl.h"
#include "core/check.h"

static ak_status check_key(const char *key) {
    AK_ARG_CHECK(key && key[0], "store: empty key");
    AK_ARG_CHECK(strlen(key) <= AK_STORE_MAX_KEY, "store: key longer than %d bytes",
                 AK_STORE_MAX_KEY);
    return AK_OK;
}

ak_status ak__store_set(ak__store *s, const char *key, const void *value, size_t len) {
    AK_ARG_CHECK(s && (value || len == 0), "store set: NULL argument");
    AK_CHECK(check_key(key));
    AK_ARG_CHECK(len <= AK_STORE_MAX_VALUE, "store set '%s': value of %zu bytes too large", key,
                 len);
    return s->ops->set(s, key, value, len);
}

ak_status ak__store_get(ak__store *s, const char *key, void *buf, size_t cap, size_t *len,
                        int timeout_ms) {
    AK_ARG_CHECK(s && (buf || cap == 0) && len, "store get: NULL argument");
    AK_CHECK(check_key(key));
    return s->ops->get(s, key, buf, cap, len, timeout_ms);
}

ak_status ak__store_add(ak__store *s, const char *key, int64_t delta, int64_t *after) {
    AK_ARG_CHECK(s && after, "store add: NULL argument");
    AK_CHECK(check_key(key));
    return s->ops->add(s, key, delta, after);
}

ak_status ak__store_local_address(ak__store *s, char *buf, size_t cap) {
    AK_ARG_CHECK(s && buf && cap >= 16, "store local address: bad argument");
    if (!s->ops->local_address) return snprintf(buf, cap, "127.0.0.1"), AK_OK;
    return s->ops->local_address(s, buf, cap);
}

ak_status ak__store_wait_ge(ak__store *s, const char *key, int64_t value, int timeout_ms) {
    AK_ARG_CHECK(s, "store wait: NULL store");
    AK_CHECK(check_key(key));
    return s->ops->wait_ge(s, key, value, timeout_ms);
}

ak__store *ak__store_retain(ak__store *s) {
    if (s) atomic_fetch_add(&s->refs, 1);
    return s;
}

void ak__store_free(ak__store *s) {
    if (s && atomic_fetch_sub(&s->refs, 1) == 1) s->ops->destroy(s);
}

/* ---- in-memory store ---------------------------------------------------------------- */

typedef struct mem_entry {
    struct mem_entry *next;
    size_t len;
    char key[AK_STORE_MAX_KEY + 1];
    unsigned char value[]; /* len bytes; integers are stored as decimal text */
} mem_entry;

typedef struct mem_store {
    ak__store base;
    pthread_mutex_t lock;
    pthread_cond_t changed;
    mem_entry *entries;
} mem_store;

static mem_entry *mem_find(mem_store *m, const char *key) {
    for (mem_entry *e = m->entries; e; e = e->next)
        if (strcmp(e->key, key) == 0) return e;
    return NULL;
}

/* Replaces (or adds) key; called with the lock held. */
static ak_status mem_put(mem_store *m, const char *key, const void *value, size_t len) {
    mem_entry *e = malloc(sizeof *e + len);
    if (!e) return AK_FAIL(AK_ERR_NO_MEMORY, "store: out of memory for key '%s'", key);
    strcpy(e->key, key);
    e->len = len;
    if (len) memcpy(e->value, value, len);
    for (mem_entry **p = &m->entries; *p; p = &(*p)->next) {
        if (strcmp((*p)->key, key) == 0) {
            e->next = (*p)->next;
            free(*p);
            *p = e;
            pthread_cond_broadcast(&m->changed);
            return AK_OK;
        }
    }
    e->next = m->entries;
    m->entries = e;
    pthread_cond_broadcast(&m->changed);
    return AK_OK;
}

static ak_status mem_set(ak__store *s, const char *key, const void *value, size_t len) {
    mem_store *m = (mem_store *)s;
    pthread_mutex_lock(&m->lock);
    ak_status st = mem_put(m, key, value, len);
    pthread_mutex_unlock(&m->lock);
    return st;
}

static struct timespec deadline_after(int timeout_ms) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += timeout_ms / 1000;
    ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

static int64_t entry_int(const mem_entry *e) {
    char text[32];
    size_t n = e->len < sizeof text - 1 ? e->len : sizeof text - 1;
    memcpy(text, e->value, n);
    text[n] = '\0';
    return strtoll(text, NULL, 10);
}

/* Waits (lock held) until pred holds for the entry of key; AK_ERR_TIMEOUT after timeout. */
static ak_status mem_wait(mem_store *m, const char *key, int64_t at_least, int want_int,
                          int timeout_ms, mem_entry **found) {
    struct timespec deadline = deadline_after(timeout_ms);
    for (;;) {
        mem_entry *e = mem_find(m, key);
        if (e && (!want_int || entry_int(e) >= at_least)) {
            *found = e;
            return AK_OK;
        }
        if (pthread_cond_timedwait(&m->changed, &m->lock, &deadline) == ETIMEDOUT)
            return AK_FAIL(AK_ERR_TIMEOUT, "store: waited %d ms for key '%s'", timeout_ms, key);
    }
}

static ak_status mem_get(ak__store *s, const char *key, void *buf, size_t cap, size_t *len,
                         int timeout_ms) {
    mem_store *m = (mem_store *)s;
    mem_entry *e;
    pthread_mutex_lock(&m->lock);
    ak_status st = mem_wait(m, key, 0, 0, timeout_ms, &e);
    if (st == AK_OK) {
        *len = e->len;
        if (cap && e->len) memcpy(buf, e->value, e->len < cap ? e->len : cap);
    }
    pthread_mutex_unlock(&m->lock);
    return st;
}

static ak_status mem_add(ak__store *s, const char *key, int64_t delta, int64_t *after) {
    mem_store *m = (mem_store *)s;
    pthread_mutex_lock(&m->lock);
    mem_entry *e = mem_find(m, key);
    /* wraps like the TCP server's add, never signed overflow (fuzz_store found it) */
    int64_t v = (int64_t)((uint64_t)(e ? entry_int(e) : 0) + (uint64_t)delta);
    char text[32];
    int n = snprintf(text, sizeof text, "%lld", (long long)v);
    ak_status st = mem_put(m, key, text, (size_t)n);
    pthread_mutex_unlock(&m->lock);
    *after = v;
    return st;
}

static ak_status mem_wait_ge(ak__store *s, const char *key, int64_t value, int timeout_ms) {
    mem_store *m = (mem_store *)s;
    mem_entry *e;
    pthread_mutex_lock(&m->lock);
    ak_status st = mem_wait(m, key, value, 1, timeout_ms, &e);
    pthread_mutex_unlock(&m->lock);
    return st;
}

static void mem_destroy(ak__store *s) {
    mem_store *m = (mem_store *)s;
    while (m->entries) {
        mem_entry *e = m->entries;
        m->entries = e->next;
        free(e);
    }
    pthread_cond_destroy(&m->changed);
    pthread_mutex_destroy(&m->lock);
    free(m);
}

static const ak__store_ops mem_ops = {mem_set, mem_get, mem_add, mem_wait_ge, mem_destroy, NULL};

ak_status ak__store_create_memory(ak__store **out) {
    AK_ARG_CHECK(out, "ak__store_create_memory: NULL output");
    mem_store *m = calloc(1, sizeof *m);
    if (!m) return AK_FAIL(AK_ERR_NO_MEMORY, "store: out of memory");
    m->base.ops = &mem_ops;
    atomic_init(&m->base.refs, 1);
    pthread_mutex_init(&m->lock, NULL);
    pthread_cond_init(&m->changed, NULL);
    *out = &m->base;
    return AK_OK;
}
