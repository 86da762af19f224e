/* In-process transport for ranks that are threads of one process (ak_comm_init_local).
 *
 * Every ordered pair (src -> dst) has a FIFO of posted sends and a FIFO of posted
 * receives. Whichever side progresses first and finds both heads present copies the data
 * once, straight from the send buffer into the receive buffer, and completes both ops;
 * the other rank is woken through its condition variable. Ranks find each other through
 * a process-wide registry keyed by the communicator's store prefix. */
#include <errno.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/transport/transport.h"
#include "core/check.h"

typedef struct mem_queue {
    ak__p2p *head, *tail;
} mem_queue;

typedef struct mem_pair {
    mem_queue sends, recvs; /* guarded by the world lock */
} mem_pair;

typedef struct mem_rank {
    pthread_cond_t wake;
    unsigned long completions; /* bumped whenever one of this rank's ops completes */
    int gone;                  /* transport destroyed */
} mem_rank;

typedef struct mem_world {
    struct mem_world *next;
    char prefix[128];
    int size, refs;
    pthread_mutex_t lock; /* one lock: copies are short next to a collective's latency */
    mem_rank *ranks;
    mem_pair *pairs; /* [src * size + dst] */
} mem_world;

typedef struct mem_ctx {
    mem_world *world;
    int rank;
    unsigned long seen; /* completions already reported by progress() */
} mem_ctx;

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static mem_world *registry;

static mem_world *world_new(const char *prefix, int size) {
    mem_world *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->ranks = calloc((size_t)size, sizeof *w->ranks);
    w->pairs = calloc((size_t)size * (size_t)size, sizeof *w->pairs);
    if (!w->ranks || !w->pairs) {
        free(w->ranks);
        free(w->pairs);
        free(w);
        return NULL;
    }
    snprintf(w->prefix, sizeof w->prefix, "%s", prefix);
    w->size = size;
    pthread_mutex_init(&w->lock, NULL);
    for (int r = 0; r < size; r++) pthread_cond_init(&w->ranks[r].wake, NULL);
    return w;
}

/* Finds or creates the world of `prefix` and takes a reference. */
static mem_world *world_join(const char *prefix, int size) {
    pthread_mutex_lock(&registry_lock);
    mem_world *w = registry;
    while (w && strcmp(w->prefix, prefix) != 0) w = w->next;
    if (!w && (w = world_new(prefix, size))) {
        w->next = registry;
        registry = w;
    }
    if (w) w->refs++;
    pthread_mutex_unlock(&registry_lock);
    return w;
}

static void world_leave(mem_world *w) {
    pthread_mutex_lock(&registry_lock);
    if (--w->refs == 0) {
        for (mem_world **p = &registry; *p; p = &(*p)->next)
            if (*p == w) {
                *p = w->next;
                break;
            }
        for (int r = 0; r < w->size; r++) pthread_cond_destroy(&w->ranks[r].wake);
        pthread_mutex_destroy(&w->lock);
        free(w->ranks);
        free(w->pairs);
        free(w);
    }
    pthread_mutex_unlock(&registry_lock);
}

static void queue_push(mem_queue *q, ak__p2p *op) {
    op->next = NULL;
    if (q->tail) q->tail->next = op;
    else q->head = op;
    q->tail = op;
}

static ak__p2p *queue_pop(mem_queue *q) {
    ak__p2p *op = q->head;
    if (op && !(q->head = op->next)) q->tail = NULL;
    return op;
}

/* Completes op (owned by rank `owner`) and wakes that rank. World lock held. */
static void complete(mem_world *w, int owner, ak__p2p *op, ak_status st) {
    op->status = st;
    __atomic_store_n(&op->complete, 1, __ATOMIC_RELEASE);
    w->ranks[owner].completions++;
    pthread_cond_signal(&w->ranks[owner].wake);
}

/* Matches the heads of pair src -> dst as far as possible. World lock held. */
static void match_pair(mem_world *w, int src, int dst) {
    mem_pair *p = &w->pairs[src * w->size + dst];
    while (p->sends.head && p->recvs.head) {
        ak__p2p *s = queue_pop(&p->sends), *r = queue_pop(&p->recvs);
        ak_status st = AK_OK;
        if (s->tag != r->tag || s->bytes != r->bytes)
            st = AK_FAIL(AK_ERR_MISMATCH,
                         "rank %d expected %zu bytes (tag %llx) from rank %d, which sent %zu "
                         "bytes (tag %llx)", dst, r->bytes, (unsigned long long)r->tag, src,
                         s->bytes, (unsigned long long)s->tag);
        else if (s->bytes)
            memcpy(r->buf, s->buf, s->bytes);
        complete(w, src, s, st);
        complete(w, dst, r, st);
    }
}

/* Fails every queued op of pairs that involve a rank that is gone. World lock held. */
static void fail_gone_pairs(mem_world *w, int gone) {
    for (int other = 0; other < w->size; other++) {
        mem_pair *pairs[2] = {&w->pairs[gone * w->size + other], &w->pairs[other * w->size + gone]};
        for (int k = 0; k < 2; k++) {
            mem_queue *qs[2] = {&pairs[k]->sends, &pairs[k]->recvs};
            for (int q = 0; q < 2; q++) {
                ak__p2p *op;
                while ((op = queue_pop(qs[q]))) {
                    int owner = op->is_send ? (k == 0 ? gone : other) : (k == 0 ? other : gone);
                    complete(w, owner, op,
                             AK_FAIL(AK_ERR_REMOTE, "rank %d left the communicator", gone));
                }
            }
        }
    }
}

static ak_status mem_post(void *vctx, ak__p2p *op) {
    mem_ctx *c = vctx;
    mem_world *w = c->world;
    AK_ARG_CHECK(op->peer >= 0 && op->peer < w->size && op->peer != c->rank,
                 "mem transport: bad peer %d", op->peer);
    op->complete = 0;
    op->status = AK_OK;
    pthread_mutex_lock(&w->lock);
    int src = op->is_send ? c->rank : op->peer, dst = op->is_send ? op->peer : c->rank;
    if (w->ranks[op->peer].gone) {
        complete(w, c->rank, op, AK_FAIL(AK_ERR_REMOTE, "rank %d left the communicator", op->peer));
    } else {
        mem_pair *p = &w->pairs[src * w->size + dst];
        queue_push(op->is_send ? &p->sends : &p->recvs, op);
        match_pair(w, src, dst);
    }
    pthread_mutex_unlock(&w->lock);
    return AK_OK;
}

/* Matching happens at post time, so progress only waits for the peers' posts. */
static ak_status mem_progress(void *vctx, int timeout_us) {
    mem_ctx *c = vctx;
    mem_world *w = c->world;
    if (timeout_us <= 0) return AK_OK;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    long ns = ts.tv_nsec + (long)timeout_us * 1000L;
    ts.tv_sec += ns / 1000000000L;
    ts.tv_nsec = ns % 1000000000L;
    pthread_mutex_lock(&w->lock);
    /* compare with what the last call saw, so a completion that landed between the
     * caller's check and this call returns at once instead of after the timeout */
    while (w->ranks[c->rank].completions == c->seen &&
           pthread_cond_timedwait(&w->ranks[c->rank].wake, &w->lock, &ts) != ETIMEDOUT) {
    }
    c->seen = w->ranks[c->rank].completions;
    pthread_mutex_unlock(&w->lock);
    return AK_OK;
}

static void mem_destroy(void *vctx) {
    mem_ctx *c = vctx;
    mem_world *w = c->world;
    pthread_mutex_lock(&w->lock);
    w->ranks[c->rank].gone = 1;
    fail_gone_pairs(w, c->rank);
    pthread_mutex_unlock(&w->lock);
    world_leave(w);
    free(c);
}

static const ak__transport_i mem_vtable = {"mem", mem_post, mem_progress, mem_destroy};

ak_status ak__mem_transport_create(const ak__transport_setup *setup, ak__transport *out) {
    AK_ARG_CHECK(setup && out && setup->prefix, "mem transport: NULL argument");
    AK_ARG_CHECK(setup->rank >= 0 && setup->rank < setup->world_size,
                 "mem transport: rank %d not in [0, %d)", setup->rank, setup->world_size);
    mem_ctx *c = calloc(1, sizeof *c);
    if (!c) return AK_FAIL(AK_ERR_NO_MEMORY, "mem transport: out of memory");
    c->rank = setup->rank;
    c->world = world_join(setup->prefix, setup->world_size);
    if (!c->world || c->world->size != setup->world_size) {
        if (c->world) world_leave(c->world);
        free(c);
        return AK_FAIL(AK_ERR_INTERNAL, "mem transport: cannot join world '%s'", setup->prefix);
    }
    out->vt = &mem_vtable;
    out->ctx = c;
    return AK_OK;
}
