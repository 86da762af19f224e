/* The collective operations: argument checks, in/out-of-place handling, algorithm choice
 * and dispatch to algo/. Blocking calls run here; async ones go through comm_async.c,
 * and while a communicator has a progress thread, blocking calls queue behind it so
 * every rank keeps the same order. */
#include <stdio.h>
#include <string.h>

#include "comm/algo/adasum.h"
#include "comm/algo/algo.h"
#include "comm/comm_model.h"
#include "comm/comm_ops.h"
#include "core/check.h"

static const char *const coll_names[] = {
    "", "allreduce", "reduce", "broadcast", "allgather", "allgatherv", "reduce_scatter",
    "alltoall", "alltoallv", "gather", "scatter", "barrier", "send", "recv", "adasum"};

static ak__group world_group(ak_comm *c) {
    return (ak__group){c->all_ranks, c->size, c->rank};
}

static size_t esize(ak_dtype dt) {
    size_t s = 0;
    ak_dtype_size(dt, &s);
    return s;
}

static int in_place(const void *sendbuf, const void *recvbuf) {
    return sendbuf == AK_IN_PLACE || sendbuf == recvbuf;
}

static ak_status coll_dispatch(ak_comm *c, const ak__coll *k, ak_comm_algo want);

/* ---- runners ------------------------------------------------------------------------ */

/* The message-passing allreduce algorithms into recvbuf from src (recvbuf when in place).
 * The ring and hierarchical ones read src as they go; the others start from a copy. */
static ak_status run_flat_or_hierarchical(ak_comm *c, ak_comm_algo algo, const ak__coll *k,
                                          const void *src, ak_reduce_op op, uint64_t tag) {
    ak__group g = world_group(c);
    void *buf = k->recvbuf;
    switch (algo) {
    case AK_COMM_ALGO_HIERARCHICAL:
        return ak__allreduce_hierarchical(ak__comm_algo(c), src, buf, k->count, k->dtype, op, tag);
    case AK_COMM_ALGO_HIER_PIPE: /* the model picks the chunk the way it picks the algorithm */
        return ak__allreduce_hier_pipe(ak__comm_algo(c), src, buf, k->count, k->dtype, op,
                                       ak__comm_pipe_chunk(c, AK_COMM_COLL_ALLREDUCE, k->count * esize(k->dtype)),
                                       tag);
    case AK_COMM_ALGO_RING: return ak__allreduce_ring(ak__comm_algo(c), &g, src, buf, k->count, k->dtype, op, tag);
    default: break;
    }
    if (src != buf) memcpy(buf, src, k->count * esize(k->dtype));
    if (algo == AK_COMM_ALGO_TREE)
        return ak__allreduce_tree(ak__comm_algo(c), &g, buf, k->count, k->dtype, op, tag);
    return ak__allreduce_recursive_doubling(ak__comm_algo(c), &g, buf, k->count, k->dtype, op, tag);
}

static ak_status run_allreduce(ak_comm *c, const ak__coll *k, ak_comm_algo want, uint64_t tag) {
    size_t bytes = k->count * esize(k->dtype);
    ak_reduce_op op = k->op == AK_REDUCE_AVG ? AK_REDUCE_SUM : k->op;
    ak_status st;
    ak_comm_algo algo = ak__comm_pick(c, AK_COMM_COLL_ALLREDUCE, bytes, want);
    const void *src = in_place(k->sendbuf, k->recvbuf) ? k->recvbuf : k->sendbuf;
    if (algo == AK_COMM_ALGO_SHM_DIRECT) /* ranks read each other's data straight from src */
        st = ak__allreduce_shm_direct(ak__comm_algo(c), src, k->recvbuf, k->count, k->dtype, op, tag);
    else
        st = run_flat_or_hierarchical(c, algo, k, src, op, tag);
    if (st == AK_OK && k->op == AK_REDUCE_AVG)
        st = ak_reduce_avg_finish(k->dtype, k->recvbuf, k->count, c->size);
    return st;
}

/* The root reduces into recvbuf (holding its input when in place); the others into a
 * work buffer (their recvbuf is ignored, maybe NULL). The binomial tree works in place
 * on a copy of the input; reduce-scatter + gather reads the input where it lies. */
static ak_status run_reduce(ak_comm *c, const ak__coll *k, ak_comm_algo want, uint64_t tag) {
    size_t bytes = k->count * esize(k->dtype);
    int root = c->rank == k->root;
    void *buf = k->recvbuf;
    if (!root) AK_CHECK(ak__comm_work(c, bytes, &buf));
    const void *src = root && in_place(k->sendbuf, k->recvbuf) ? k->recvbuf : k->sendbuf;
    ak__group g = world_group(c);
    ak_reduce_op op = k->op == AK_REDUCE_AVG ? AK_REDUCE_SUM : k->op;
    if (ak__comm_pick(c, AK_COMM_COLL_REDUCE, bytes, want) == AK_COMM_ALGO_RING) {
        AK_CHECK(ak__reduce_scatter_gather(ak__comm_algo(c), &g, src, buf, k->count, k->dtype, op, k->root, tag));
    } else {
        if (bytes && src != buf) memcpy(buf, src, bytes);
        AK_CHECK(ak__reduce_tree(ak__comm_algo(c), &g, buf, k->count, k->dtype, op, k->root, tag));
    }
    if (root && k->op == AK_REDUCE_AVG) return ak_reduce_avg_finish(k->dtype, buf, k->count, c->size);
    return AK_OK;
}

/* Adasum works in place in recvbuf; k->root holds the number of tensors. */
static ak_status run_adasum(ak_comm *c, const ak__coll *k, uint64_t tag) {
    if (!in_place(k->sendbuf, k->recvbuf) && k->count)
        memcpy(k->recvbuf, k->sendbuf, k->count * esize(k->dtype));
    ak__group g = world_group(c);
    return ak__allreduce_adasum(ak__comm_algo(c), &g, k->recvbuf, k->count, k->dtype, k->counts,
                                (size_t)k->root, tag);
}

/* allgather and allgatherv: place this rank's block, then the chosen algorithm fills
 * the rest (the model counts all blocks together) */
static ak_status run_allgather(ak_comm *c, const ak__coll *k, ak_comm_algo want, uint64_t tag) {
    size_t es = esize(k->dtype), total = 0;
    const size_t *counts = k->counts, *displs = k->displs;
    if (k->kind == AK_COLL_ALLGATHER) {
        for (int r = 0; r < c->size; r++) c->counts[0][r] = k->count, c->counts[1][r] = r * k->count;
        counts = c->counts[0];
        displs = c->counts[1];
    }
    for (int r = 0; r < c->size; r++) total += counts[r];
    unsigned char *mine = (unsigned char *)k->recvbuf + displs[c->rank] * es;
    if (k->sendbuf != AK_IN_PLACE && k->sendbuf != mine) memcpy(mine, k->sendbuf, counts[c->rank] * es);
    ak__group g = world_group(c);
    ak_comm_algo algo = ak__comm_pick(c, AK_COMM_COLL_ALLGATHER, total * es, want);
    if (algo == AK_COMM_ALGO_HIER_PIPE && k->kind == AK_COLL_ALLGATHER) { /* not the v-variant */
        void *stage;
        AK_CHECK(ak__comm_work(c, total * es, &stage));
        ak_status st = ak__allgather_hier_pipe(ak__comm_algo(c), mine, k->recvbuf, stage, k->count, es,
                                               ak__comm_pipe_chunk(c, AK_COMM_COLL_ALLGATHER, total * es),
                                               tag);
        if (st != AK_ERR_UNSUPPORTED) return st; /* else hosts of unequal size: the ring */
    }
    if (algo == AK_COMM_ALGO_RECURSIVE_DOUBLING)
        return ak__allgatherv_recursive_doubling(ak__comm_algo(c), &g, k->recvbuf, counts, displs, es, tag);
    return ak__allgatherv_ring(ak__comm_algo(c), &g, k->recvbuf, counts, displs, es, tag);
}

/* Into a work buffer (the algorithms leave partial sums in the other blocks), then this
 * rank's block out to recvbuf. */
static ak_status run_reduce_scatter(ak_comm *c, const ak__coll *k, ak_comm_algo want, uint64_t tag) {
    size_t es = esize(k->dtype), total = k->count * (size_t)c->size;
    void *work;
    AK_CHECK(ak__comm_work(c, total * es, &work));
    const void *src = k->sendbuf == AK_IN_PLACE ? k->recvbuf : k->sendbuf;
    ak__group g = world_group(c);
    ak_reduce_op op = k->op == AK_REDUCE_AVG ? AK_REDUCE_SUM : k->op;
    ak_comm_algo algo = ak__comm_pick(c, AK_COMM_COLL_REDUCE_SCATTER, total * es, want);
    ak_status st = AK_ERR_UNSUPPORTED;
    if (algo == AK_COMM_ALGO_HIER_PIPE) /* writes this rank's block straight to recvbuf */
        st = ak__reduce_scatter_hier_pipe(ak__comm_algo(c), src, k->recvbuf, work, k->count, k->dtype, op,
                                          ak__comm_pipe_chunk(c, AK_COMM_COLL_REDUCE_SCATTER, total * es),
                                          tag);
    if (st == AK_ERR_UNSUPPORTED) { /* or hosts of unequal size: the ring */
        if (algo == AK_COMM_ALGO_RECURSIVE_DOUBLING)
            AK_CHECK(ak__reduce_scatter_halving(ak__comm_algo(c), &g, src, work, total, k->dtype, op, tag));
        else
            AK_CHECK(ak__reduce_scatter_ring(ak__comm_algo(c), &g, src, work, total, k->dtype, op, tag));
        if (k->count) /* an empty call has no work buffer to copy from */
            memcpy(k->recvbuf, (unsigned char *)work + (size_t)c->rank * k->count * es, k->count * es);
    } else {
        AK_CHECK(st);
    }
    if (k->op == AK_REDUCE_AVG) return ak_reduce_avg_finish(k->dtype, k->recvbuf, k->count, c->size);
    return AK_OK;
}

/* In place (comm_api.c made the send layout the receive one), the blocks go out from a
 * copy of recvbuf: the pairwise exchange receives block j while block j+s may still be
 * unsent, and both live in recvbuf. */
static ak_status run_alltoall(ak_comm *c, const ak__coll *k, uint64_t tag) {
    const size_t *sc = k->counts, *sd = k->displs, *rc = k->rcounts, *rd = k->rdispls;
    size_t es = esize(k->dtype);
    if (k->kind == AK_COLL_ALLTOALL) {
        for (int r = 0; r < c->size; r++) {
            c->counts[0][r] = c->counts[2][r] = k->count;
            c->counts[1][r] = c->counts[3][r] = r * k->count;
        }
        sc = c->counts[0], sd = c->counts[1], rc = c->counts[2], rd = c->counts[3];
    }
    const void *src = k->sendbuf;
    if (in_place(k->sendbuf, k->recvbuf)) {
        size_t span = 0;
        for (int r = 0; r < c->size; r++)
            if (rc[r] && rd[r] + rc[r] > span) span = rd[r] + rc[r];
        void *copy = NULL;
        if (span) {
            AK_CHECK(ak__comm_work(c, span * es, &copy));
            memcpy(copy, k->recvbuf, span * es);
        }
        src = copy;
    }
    ak__group g = world_group(c);
    return ak__alltoallv_pairwise(ak__comm_algo(c), &g, src, sc, sd, k->recvbuf, rc, rd, es, tag);
}

static ak_status run_point_to_point(ak_comm *c, const ak__coll *k) {
    ak__p2p op;
    size_t bytes = k->count * esize(k->dtype);
    /* no sequence number: only the two ends see a send; count and dtype still checked */
    uint64_t tag = 0x5000000000000000ull ^ ((uint64_t)k->count << 8) ^ (uint64_t)k->dtype;
    if (k->kind == AK_COLL_SEND) ak__p2p_init_send(&op, k->root, k->sendbuf, bytes, tag);
    else ak__p2p_init_recv(&op, k->root, k->recvbuf, bytes, tag);
    AK_CHECK(ak__p2p_post(ak__comm_algo(c), &op));
    ak__p2p *ops[1] = {&op};
    return ak__p2p_wait(ak__comm_algo(c), ops, 1);
}

static ak_status run_rooted(ak_comm *c, const ak__coll *k, ak_comm_algo want, uint64_t tag) {
    ak__group g = world_group(c);
    size_t bytes = k->count * esize(k->dtype);
    switch (k->kind) {
    case AK_COLL_BROADCAST:
        if (ak__comm_pick(c, AK_COMM_COLL_BROADCAST, bytes, want) == AK_COMM_ALGO_RING)
            return ak__broadcast_scatter_allgather(ak__comm_algo(c), &g, k->recvbuf, bytes, k->root, tag);
        return ak__broadcast_tree(ak__comm_algo(c), &g, k->recvbuf, bytes, k->root, tag);
    case AK_COLL_GATHER: {
        /* the root's block already in place: "copy" it onto itself, i.e. not at all */
        const void *send = k->sendbuf;
        if (c->rank == k->root && send == AK_IN_PLACE)
            send = (const char *)k->recvbuf + (size_t)k->root * bytes;
        return ak__gather_linear(ak__comm_algo(c), &g, send, k->recvbuf, bytes, k->root, tag);
    }
    case AK_COLL_SCATTER: {
        void *recv = k->recvbuf; /* the root's block stays in sendbuf when in place */
        if (c->rank == k->root && recv == AK_IN_PLACE)
            recv = (char *)(uintptr_t)k->sendbuf + (size_t)k->root * bytes;
        return ak__scatter_linear(ak__comm_algo(c), &g, k->sendbuf, recv, bytes, k->root, tag);
    }
    default: return AK_FAIL(AK_ERR_INTERNAL, "run_rooted: kind %d", (int)k->kind);
    }
}

/* One Chrome-trace event per collective (AK_TRACE=file): name, bytes and the rank. */
static void trace_call(const ak_comm *c, const ak__coll *k, uint64_t t0) {
    char name[96];
    snprintf(name, sizeof name, "%s %zu x %s (rank %d/%d)", coll_names[k->kind], k->count,
             ak_dtype_name(k->dtype), c->rank, c->size);
    ak_trace_complete("comm", name, t0, ak_now_ns() - t0);
}

ak_status ak__coll_run_algo(ak_comm *c, const ak__coll *k, ak_comm_algo algo) {
    uint64_t t0 = ak_trace_enabled() ? ak_now_ns() : 0;
    ak_status st = coll_dispatch(c, k, algo);
    if (t0) trace_call(c, k, t0);
    return st;
}

ak_status ak__coll_run(ak_comm *c, const ak__coll *k) {
    return ak__coll_run_algo(c, k, AK_COMM_ALGO_AUTO);
}

static ak_status coll_dispatch(ak_comm *c, const ak__coll *k, ak_comm_algo want) {
    AK_CHECK(c->failed);
    if (k->kind == AK_COLL_SEND || k->kind == AK_COLL_RECV)
        return ak__comm_fail(c, run_point_to_point(c, k));
    /* v-variants legitimately differ in their own count per rank: the per-message length
     * check (counts[] on both sides) covers them instead */
    int varying = k->kind == AK_COLL_ALLGATHERV || k->kind == AK_COLL_ALLTOALLV;
    uint64_t tag = ak__comm_next_tag(c, (int)k->kind, varying ? 0 : k->count, (int)k->dtype,
                                     (int)k->op, k->root);
    ak_status st;
    switch (k->kind) {
    case AK_COLL_ALLREDUCE: st = run_allreduce(c, k, want, tag); break;
    case AK_COLL_REDUCE: st = run_reduce(c, k, want, tag); break;
    case AK_COLL_ADASUM: st = run_adasum(c, k, tag); break;
    case AK_COLL_ALLGATHER:
    case AK_COLL_ALLGATHERV: st = run_allgather(c, k, want, tag); break;
    case AK_COLL_REDUCE_SCATTER: st = run_reduce_scatter(c, k, want, tag); break;
    case AK_COLL_ALLTOALL:
    case AK_COLL_ALLTOALLV: st = run_alltoall(c, k, tag); break;
    case AK_COLL_BARRIER: {
        ak__group g = world_group(c);
        st = ak__barrier_dissemination(ak__comm_algo(c), &g, tag);
        break;
    }
    default: st = run_rooted(c, k, want, tag); break;
    }
    if (st != AK_OK) AK_LOG_DEBUG(AK_SUBSYS_COMM, "rank %d: %s failed: %s", c->rank,
                                  coll_names[k->kind], ak_last_error());
    return ak__comm_fail(c, st);
}
