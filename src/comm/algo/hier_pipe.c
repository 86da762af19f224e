/* Pipelined hierarchical allreduce, reduce-scatter and allgather for H hosts of L ranks
 * each (the latter two at the end of the file, on the same two-thread pipeline).
 *
 * The unpipelined one (hierarchical.c) runs its three phases one after another: while
 * the host link carries the inter-host ring, the shared-memory phases wait, and while
 * they run the link is idle (87–92 % of the link bound on 2 × 2 emulated hosts). Here
 * the message is cut into K chunks of `chunk_bytes`, and each chunk goes through the
 * same three phases:
 *   RS(k): intra-host ring reduce-scatter of chunk k: local index i ends with block i
 *          of the chunk (ak__block_range(chunk, L, i)) reduced over its host;
 *   X(k):  ring allreduce of that block over {the rank with local index i on each
 *          host} (TCP across hosts);
 *   AG(k): intra-host ring allgather of chunk k's L blocks.
 *
 * Who does what: every local rank owns 1/L of each chunk's inter-host traffic (its
 * block), so all L ranks' connections share each host link and no leader's socket or
 * core is the bottleneck; and every rank runs two threads:
 *   - the caller's thread runs the shared-memory phases, in a fixed order that is the
 *     same on every rank of the host: RS(0), RS(1), …; after RS(k) it takes AG(k − D)
 *     (D = PIPE_DEPTH) once X(k − D) is done, then the remaining AGs at the end. The
 *     order must not depend on timing: the host's ranks exchange these messages with
 *     each other, and a transport matches messages per peer in posting order.
 *   - one helper thread runs X(0), X(1), … over TCP, each as soon as RS(k) is done.
 * So while the link carries X(k), the caller reduce-scatters chunk k + 1 … k + D and
 * allgathers chunk k − 1: the link stays busy from the first RS to the last X, and the
 * call takes ≈ RS(chunk) + X(S) + AG(chunk) instead of RS(S) + X(S) + AG(S). Letting
 * the leaders alone cross hosts would leave L − 1 sockets idle and put all shm copying
 * for the leader's share behind one core; per-rank slices need no extra copy at all.
 *
 * Each thread sees a copy of the algorithm context with only its own transport (the
 * other's vtable NULL): ak__p2p_wait progresses every transport it is given, and two
 * threads must never progress one transport at once. The helper gets its own scratch
 * (the ring reduces received segments in scratch); failures go to the communicator
 * under a lock, and either thread's failure stops the other at its next chunk. When the
 * host's peers and the other hosts' peers share a transport (threads of one process in
 * the tests, AK_COMM_TRANSPORT=tcp), the chunks run one after another on the caller's
 * thread: the same results, no overlap.
 *
 * Chunks are element ranges [k·C, min((k+1)·C, count)); a chunk shorter than L has
 * empty blocks, which the rings skip. Buffers: src is read by RS only; RS, X and AG of
 * chunk k touch chunk k of buf alone, so different chunks' phases never overlap in
 * memory. Unbalanced hosts run the flat ring (ak__allreduce_hierarchical's fallback).
 *
 * Reduce-scatter and allgather: chunk k is piece k of every rank's block, staged as
 * [local index][host][piece] so each ring's blocks lie back to back. Reduce-scatter: the
 * caller stages and reduce-scatters chunk k over the host, the helper reduce-scatters
 * the H pieces of its local index across hosts and copies its own piece out.
 * Allgather: the helper gathers across hosts first, the caller over the host and
 * unpacks. The host link carries (H−1)/H · S instead of the flat ring's (n−1)/n · S. */
#include <pthread.h>
#include <string.h>

#include "comm/algo/algo.h"
#include "core/check.h"

/* RS may run this many chunks ahead of AG: slack for a transfer that runs late without
 * making the caller wait; 2 covers the jitter seen on the emulated links. */
#define PIPE_DEPTH 2

/* What both threads share. */
typedef struct pipe_state {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    size_t rs_done;     /* chunks reduce-scattered (caller) */
    size_t x_done;      /* chunks exchanged across hosts (helper) */
    ak_status stopped;  /* first failure of either thread: both stop */
    const ak__algo_ctx *parent;
} pipe_state;

/* One thread's view of the communicator: only its transport, its own scratch. */
typedef struct pipe_lane {
    ak__algo_ctx ctx;
    ak__transport transports[AK_COMM_TP_COUNT];
    pipe_state *shared;
    void *scratch; /* helper only: the caller uses the communicator's */
    size_t scratch_bytes;
} pipe_lane;

typedef struct pipe_plan pipe_plan;
/* One phase of chunk k on the thread given by ctx. */
typedef ak_status (*pipe_phase)(const ak__algo_ctx *c, const pipe_plan *p, size_t k);

/* The chunk's geometry, the two groups, and the phases: `before` and `after` on the
 * caller's thread (shared memory), `x` on the helper's (across hosts); either of
 * before/after may be NULL. */
struct pipe_plan {
    const void *src;
    char *buf;
    size_t count, chunk, chunks, esize;
    ak_dtype dt;
    ak_reduce_op op;
    uint64_t tag;
    ak__group intra, inter;
    pipe_phase before, x, after;
    /* reduce-scatter and allgather: chunk k is piece k (chunk elements) of every rank's
     * block of `count`, staged in `stage` as [local index][host][piece] so each phase's
     * blocks lie back to back; `out` is this rank's block (rs) or the whole result (ag) */
    char *stage, *out;
    const int *host_of, *local_index_of;
    int size;
};

/* ---- lanes ------------------------------------------------------------------------- */

static ak_status lane_fail(void *owner, ak_status st) {
    pipe_lane *l = owner;
    pipe_state *s = l->shared;
    pthread_mutex_lock(&s->lock);
    if (s->stopped == AK_OK) s->stopped = st;
    st = s->parent->on_failure(s->parent->owner, st);
    pthread_cond_broadcast(&s->changed);
    pthread_mutex_unlock(&s->lock);
    return st;
}

static ak_status lane_scratch(void *owner, size_t bytes, void **out) {
    pipe_lane *l = owner;
    if (!l->scratch) /* the caller's lane: the communicator's scratch, as ever */
        return l->shared->parent->get_scratch(l->shared->parent->owner, bytes, out);
    if (bytes > l->scratch_bytes) {
        void *grown;
        AK_CHECK(ak_alloc(bytes, &grown));
        ak_free(l->scratch);
        l->scratch = grown;
        l->scratch_bytes = bytes;
    }
    *out = l->scratch;
    return AK_OK;
}

/* A lane that may use transport `keep` only. */
static void lane_init(pipe_lane *l, pipe_state *s, int keep) {
    memset(l, 0, sizeof *l);
    l->shared = s;
    l->ctx = *s->parent;
    for (int t = 0; t < AK_COMM_TP_COUNT; t++) {
        l->transports[t] = s->parent->transports[t];
        if (t != keep) l->transports[t].vt = NULL;
    }
    l->ctx.transports = l->transports;
    l->ctx.on_failure = lane_fail;
    l->ctx.get_scratch = lane_scratch;
    l->ctx.owner = l;
}

/* The transport index every peer of g is routed to, or -1 when they differ. */
static int group_transport(const ak__algo_ctx *c, const ak__group *g) {
    int tp = -1;
    for (int i = 0; i < g->n; i++) {
        if (i == g->me) continue;
        int r = c->route[g->ranks[i]];
        if (tp >= 0 && r != tp) return -1;
        tp = r;
    }
    return tp;
}

/* ---- the three phases of one chunk --------------------------------------------------- */

static size_t chunk_len(const pipe_plan *p, size_t k) {
    size_t off = k * p->chunk;
    return p->count - off < p->chunk ? p->count - off : p->chunk;
}

static ak_status phase_rs(const ak__algo_ctx *c, const pipe_plan *p, size_t k) {
    size_t off = k * p->chunk * p->esize;
    return ak__reduce_scatter_ring(c, &p->intra, (const char *)p->src + off, p->buf + off,
                                   chunk_len(p, k), p->dt, p->op, p->tag);
}

static ak_status phase_x(const ak__algo_ctx *c, const pipe_plan *p, size_t k) {
    size_t off, len;
    ak__block_range(chunk_len(p, k), p->intra.n, p->intra.me, &off, &len);
    if (len == 0) return AK_OK; /* a short last chunk: every host has the same empties */
    char *shard = p->buf + (k * p->chunk + off) * p->esize;
    return ak__allreduce_ring(c, &p->inter, shard, shard, len, p->dt, p->op, p->tag);
}

static ak_status phase_ag(const ak__algo_ctx *c, const pipe_plan *p, size_t k) {
    return ak__allgather_blocks_ring(c, &p->intra, p->buf + k * p->chunk * p->esize, chunk_len(p, k),
                                     p->esize, 0, p->tag);
}

/* ---- one thread: every phase in chunk order ------------------------------------------- */

static ak_status run_serial(const ak__algo_ctx *c, const pipe_plan *p) {
    for (size_t k = 0; k < p->chunks; k++) {
        if (p->before) AK_CHECK(p->before(c, p, k));
        AK_CHECK(p->x(c, p, k));
        if (p->after) AK_CHECK(p->after(c, p, k));
    }
    return AK_OK;
}

/* ---- two threads ------------------------------------------------------------------------ */

typedef struct pipe_helper {
    pipe_lane lane;
    const pipe_plan *plan;
    ak_status status;
} pipe_helper;

/* Waits until *counter > k; returns the other thread's failure if it stopped. */
static ak_status wait_for(pipe_state *s, const size_t *counter, size_t k) {
    pthread_mutex_lock(&s->lock);
    while (*counter <= k && s->stopped == AK_OK) pthread_cond_wait(&s->changed, &s->lock);
    ak_status st = *counter > k ? AK_OK : s->stopped;
    pthread_mutex_unlock(&s->lock);
    return st;
}

static void advance(pipe_state *s, size_t *counter) {
    pthread_mutex_lock(&s->lock);
    (*counter)++;
    pthread_cond_broadcast(&s->changed);
    pthread_mutex_unlock(&s->lock);
}

/* The helper: X(k) once RS(k) is done. A failure was recorded by lane_fail already. */
static void *helper_main(void *arg) {
    pipe_helper *h = arg;
    pipe_state *s = h->lane.shared;
    for (size_t k = 0; k < h->plan->chunks; k++) {
        ak_status st = wait_for(s, &s->rs_done, k);
        if (st == AK_OK) st = h->plan->x(&h->lane.ctx, h->plan, k);
        if (st != AK_OK) {
            h->status = st;
            return NULL;
        }
        advance(s, &s->x_done);
    }
    return NULL;
}

/* Tells the helper to stop (the caller's own failure) unless it already has one. */
static ak_status caller_stop(pipe_state *s, ak_status st) {
    pthread_mutex_lock(&s->lock);
    if (s->stopped == AK_OK) s->stopped = st;
    pthread_cond_broadcast(&s->changed);
    pthread_mutex_unlock(&s->lock);
    return st;
}

/* after(k) once X(k) is done; without an after phase, only the wait. */
static ak_status caller_after(pipe_lane *me, const pipe_plan *p, size_t k) {
    AK_CHECK(wait_for(me->shared, &me->shared->x_done, k));
    return p->after ? p->after(&me->ctx, p, k) : AK_OK;
}

/* The caller: before(k), then after(k − D); the afters left at the end. */
static ak_status caller_run(pipe_lane *me, const pipe_plan *p) {
    size_t done = 0;
    for (size_t k = 0; k < p->chunks; k++) {
        if (p->before) AK_CHECK(p->before(&me->ctx, p, k));
        advance(me->shared, &me->shared->rs_done);
        if (k >= PIPE_DEPTH) AK_CHECK(caller_after(me, p, done++));
    }
    while (done < p->chunks) AK_CHECK(caller_after(me, p, done++));
    return AK_OK;
}

static ak_status run_threaded(const ak__algo_ctx *c, const pipe_plan *p, int intra_tp, int inter_tp) {
    pipe_state s = {.parent = c, .stopped = AK_OK};
    pthread_mutex_init(&s.lock, NULL);
    pthread_cond_init(&s.changed, NULL);
    pipe_lane me;
    pipe_helper h = {.plan = p, .status = AK_OK};
    lane_init(&me, &s, intra_tp);
    lane_init(&h.lane, &s, inter_tp);
    ak_status st = ak_alloc(64, &h.lane.scratch); /* non-NULL marks the helper's lane */
    pthread_t tid;
    if (st == AK_OK && pthread_create(&tid, NULL, helper_main, &h) != 0)
        st = AK_FAIL(AK_ERR_NO_MEMORY, "hierarchical pipelined allreduce: no helper thread");
    if (st == AK_OK) {
        h.lane.scratch_bytes = 64;
        st = caller_run(&me, p);
        if (st != AK_OK) caller_stop(&s, st);
        pthread_join(tid, NULL);
        if (st == AK_OK) st = h.status;
    } else {
        st = c->on_failure(c->owner, st);
    }
    ak_free(h.lane.scratch);
    pthread_cond_destroy(&s.changed);
    pthread_mutex_destroy(&s.lock);
    return st;
}

/* ---- entries ------------------------------------------------------------------------------- */

/* Two threads where the host's peers and the other hosts' are on different transports
 * and there is more than one chunk; else one. */
static ak_status pipe_run(const ak__algo_ctx *c, const pipe_plan *p, const char *what) {
    int intra_tp = group_transport(c, &p->intra), inter_tp = group_transport(c, &p->inter);
    int threaded = p->chunks > 1 && intra_tp >= 0 && inter_tp >= 0 && intra_tp != inter_tp;
    AK_LOG_DEBUG(AK_SUBSYS_COMM, "comm: pipelined hierarchical %s of %zu elements in %zu "
                 "chunks of %zu (%s)", what, p->count, p->chunks, p->chunk,
                 threaded ? "two threads" : "one thread");
    return threaded ? run_threaded(c, p, intra_tp, inter_tp) : run_serial(c, p);
}

ak_status ak__allreduce_hier_pipe(const ak__algo_ctx *c, const void *src, void *buf, size_t count,
                                  ak_dtype dt, ak_reduce_op op, size_t chunk_bytes, uint64_t tag) {
    if (count == 0) return AK_OK;
    ak__hier_groups groups;
    AK_CHECK(ak__hier_groups_init(&groups, c));
    if (!groups.balanced) {
        ak__hier_groups_free(&groups);
        return ak__allreduce_hierarchical(c, src, buf, count, dt, op, tag); /* the flat ring */
    }
    pipe_plan p = {.src = src, .buf = buf, .count = count, .dt = dt, .op = op, .tag = tag,
                   .intra = groups.intra, .inter = groups.inter,
                   .before = phase_rs, .x = phase_x, .after = phase_ag};
    ak_status st = ak_dtype_size(dt, &p.esize);
    if (st == AK_OK) {
        p.chunk = chunk_bytes / p.esize;
        if (p.chunk < (size_t)groups.intra.n) p.chunk = (size_t)groups.intra.n;
        p.chunks = (count + p.chunk - 1) / p.chunk;
        st = pipe_run(c, &p, "allreduce");
    }
    ak__hier_groups_free(&groups);
    return st;
}

/* ---- reduce-scatter and allgather: pieces of every rank's block ---------------------- */

/* Elements of piece k of each block, and where chunk k starts in the stage. */
static size_t piece_len(const pipe_plan *p, size_t k) { return chunk_len(p, k); }
static char *stage_chunk(const pipe_plan *p, size_t k) {
    return p->stage + k * p->chunk * (size_t)p->size * p->esize;
}
/* Slot of rank r's piece in a staged chunk of pieces of len elements. */
static size_t stage_slot(const pipe_plan *p, int r, size_t len) {
    size_t slot = (size_t)p->local_index_of[r] * (size_t)p->inter.n + (size_t)p->host_of[r];
    return slot * len * p->esize;
}
/* Where piece k of rank r's block lies in a buffer of size blocks of count. */
static size_t piece_at(const pipe_plan *p, int r, size_t k) {
    return ((size_t)r * p->count + k * p->chunk) * p->esize;
}

/* Reduce-scatter, caller: stage piece k of every block, then reduce it over the host:
 * local index i ends with the H pieces of the ranks of local index i reduced. */
static ak_status rs_before(const ak__algo_ctx *c, const pipe_plan *p, size_t k) {
    size_t len = piece_len(p, k), bytes = len * p->esize;
    char *st = stage_chunk(p, k);
    for (int r = 0; r < p->size; r++)
        memcpy(st + stage_slot(p, r, len), (const char *)p->src + piece_at(p, r, k), bytes);
    return ak__reduce_scatter_ring(c, &p->intra, st, st, len * (size_t)p->size, p->dt, p->op,
                                   p->tag);
}

/* Reduce-scatter, helper: reduce those H pieces across hosts (this rank's piece ends
 * reduced on it), then into this rank's block of the result. */
static ak_status rs_x(const ak__algo_ctx *c, const pipe_plan *p, size_t k) {
    size_t len = piece_len(p, k), hlen = len * (size_t)p->inter.n;
    char *mine = stage_chunk(p, k) + (size_t)p->intra.me * hlen * p->esize;
    AK_CHECK(ak__reduce_scatter_ring(c, &p->inter, mine, mine, hlen, p->dt, p->op, p->tag));
    memcpy(p->out + k * p->chunk * p->esize, mine + (size_t)p->inter.me * len * p->esize,
           len * p->esize);
    return AK_OK;
}

/* Allgather, helper: this rank's piece k into its slot, then the pieces of the ranks of
 * its local index gathered across hosts. */
static ak_status ag_x(const ak__algo_ctx *c, const pipe_plan *p, size_t k) {
    size_t len = piece_len(p, k), hlen = len * (size_t)p->inter.n;
    char *st = stage_chunk(p, k);
    memcpy(st + stage_slot(p, c->rank, len), (const char *)p->src + k * p->chunk * p->esize,
           len * p->esize);
    return ak__allgather_blocks_ring(c, &p->inter, st + (size_t)p->intra.me * hlen * p->esize,
                                     hlen, p->esize, 0, p->tag);
}

/* Allgather, caller: the host's ranks exchange their gathered pieces, then every piece
 * goes to its rank's block of the result. */
static ak_status ag_after(const ak__algo_ctx *c, const pipe_plan *p, size_t k) {
    size_t len = piece_len(p, k);
    char *st = stage_chunk(p, k);
    AK_CHECK(ak__allgather_blocks_ring(c, &p->intra, st, len * (size_t)p->size, p->esize, 0, p->tag));
    for (int r = 0; r < p->size; r++)
        memcpy(p->out + piece_at(p, r, k), st + stage_slot(p, r, len), len * p->esize);
    return AK_OK;
}

/* The shared set-up: groups, geometry (chunk_bytes counts all ranks' pieces), stage. */
static ak_status blocks_plan(const ak__algo_ctx *c, ak__hier_groups *g, pipe_plan *p, size_t count,
                             size_t chunk_bytes, void *stage) {
    p->intra = g->intra;
    p->inter = g->inter;
    p->count = count;
    p->stage = stage;
    p->host_of = c->host_of;
    p->local_index_of = c->local_index_of;
    p->size = c->size;
    p->chunk = chunk_bytes / (p->esize * (size_t)c->size);
    if (p->chunk == 0) p->chunk = 1;
    p->chunks = (count + p->chunk - 1) / p->chunk;
    return AK_OK;
}

ak_status ak__reduce_scatter_hier_pipe(const ak__algo_ctx *c, const void *src, void *out, void *stage,
                                       size_t count, ak_dtype dt, ak_reduce_op op,
                                       size_t chunk_bytes, uint64_t tag) {
    if (count == 0) return AK_OK;
    ak__hier_groups g;
    AK_CHECK(ak__hier_groups_init(&g, c));
    if (!g.balanced) {
        ak__hier_groups_free(&g);
        return AK_ERR_UNSUPPORTED; /* the caller runs the ring */
    }
    pipe_plan p = {.src = src, .out = out, .dt = dt, .op = op, .tag = tag,
                   .before = rs_before, .x = rs_x};
    ak_status st = ak_dtype_size(dt, &p.esize);
    if (st == AK_OK) st = blocks_plan(c, &g, &p, count, chunk_bytes, stage);
    if (st == AK_OK) st = pipe_run(c, &p, "reduce-scatter");
    ak__hier_groups_free(&g);
    return st;
}

ak_status ak__allgather_hier_pipe(const ak__algo_ctx *c, const void *src, void *out, void *stage,
                                  size_t count, size_t esize, size_t chunk_bytes, uint64_t tag) {
    if (count == 0) return AK_OK;
    ak__hier_groups g;
    AK_CHECK(ak__hier_groups_init(&g, c));
    if (!g.balanced) {
        ak__hier_groups_free(&g);
        return AK_ERR_UNSUPPORTED;
    }
    pipe_plan p = {.src = src, .out = out, .esize = esize, .tag = tag, .x = ag_x, .after = ag_after};
    ak_status st = blocks_plan(c, &g, &p, count, chunk_bytes, stage);
    if (st == AK_OK) st = pipe_run(c, &p, "allgather");
    ak__hier_groups_free(&g);
    return st;
}
