/* Point-to-point layer under the collective algorithms: posting an operation to the
 * transport that reaches its peer (the context's route), and waiting for a set
 * of operations while progressing only the transports they are queued on.
 *
 * Waiting policy: with one transport involved, progress() may block in the kernel for a
 * short slice (no busy spin, and the slice bounds how late the timeout is noticed); with
 * several (shm + tcp in the hierarchical allreduce), each gets a non-blocking turn so
 * neither starves the other. A wait fails with AK_ERR_TIMEOUT when config.timeout_ms
 * passes without any op completing or moving bytes, and any failure marks the
 * communicator failed: the ops of an aborted wait may still be queued in a transport,
 * so the communicator must not run another collective. */
#include <sched.h>
#include <string.h>

#include "comm/algo/algo.h"
#include "core/check.h"

#define P2P_BLOCKING_SLICE_US 1000 /* one transport: block this long per progress call */
#define P2P_DEFAULT_TIMEOUT_MS 60000

static void p2p_init(ak__p2p *op, int peer, int is_send, void *buf, size_t bytes, uint64_t tag) {
    memset(op, 0, sizeof *op);
    op->peer = peer;
    op->is_send = is_send;
    op->buf = buf;
    op->bytes = bytes;
    op->tag = tag;
    op->status = AK_OK;
}

void ak__p2p_init_send(ak__p2p *op, int peer, const void *buf, size_t bytes, uint64_t tag) {
    p2p_init(op, peer, 1, (void *)(uintptr_t)buf, bytes, tag);
}

void ak__p2p_init_recv(ak__p2p *op, int peer, void *buf, size_t bytes, uint64_t tag) {
    p2p_init(op, peer, 0, buf, bytes, tag);
}

ak_status ak__p2p_post(const ak__algo_ctx *comm, ak__p2p *op) {
    if (*comm->failed != AK_OK) return *comm->failed; /* its ak_last_error still applies */
    if (op->peer < 0 || op->peer >= comm->size || op->peer == comm->rank)
        return ak__algo_fail(comm, AK_FAIL(AK_ERR_INTERNAL,
                                           "comm: rank %d posted a %s to invalid peer %d "
                                           "(world of %d)",
                                           comm->rank, op->is_send ? "send" : "recv",
                                           op->peer, comm->size));
    const ak__transport *tp = &comm->transports[comm->route[op->peer]];
    if (!tp->vt)
        return ak__algo_fail(comm, AK_FAIL(AK_ERR_INTERNAL, "comm: no transport routes rank %d",
                                           op->peer));
    ak_status st = tp->vt->post(tp->ctx, op);
    if (st == AK_ERR_REMOTE) ak__transport_lost(comm->lost, op->peer, AK_LOST_CLOSED);
    return st == AK_OK ? AK_OK : ak__algo_fail(comm, st);
}

/* One pass over the ops: which transports still have pending ones (bit per transport),
 * the first failure, and a progress mark that grows whenever anything moved. */
typedef struct p2p_scan {
    unsigned pending;
    ak_status failed;
    int failed_peer; /* the peer of the first failed op */
    size_t mark;
} p2p_scan;

/* Whether a transport has completed op. The in-process transport (mem.c) completes an op
 * from its peer's thread with a release store; this acquire load pairs with it, so the
 * op's status and received bytes are visible once complete reads 1. */
static int p2p_is_complete(const ak__p2p *op) {
    return __atomic_load_n(&op->complete, __ATOMIC_ACQUIRE);
}

static p2p_scan p2p_scan_ops(const ak__algo_ctx *comm, ak__p2p *const *ops, int n) {
    p2p_scan s = {0, AK_OK, -1, 0};
    for (int i = 0; i < n; i++) {
        const ak__p2p *op = ops[i];
        int complete = p2p_is_complete(op);
        s.mark += op->done_bytes + (complete ? 1 : 0);
        if (!complete)
            s.pending |= 1u << comm->route[op->peer];
        else if (op->status != AK_OK && s.failed == AK_OK)
            s.failed = op->status, s.failed_peer = op->peer;
    }
    return s;
}

/* Progresses every transport of the communicator, not only those of the ops waited on:
 * a send posted earlier on another transport (a ring step's send over TCP while this
 * rank waits for a shared-memory receive) must keep moving, or its receiver starves.
 * With one transport it may block for a slice; with several each gets a non-blocking
 * turn, and the thread yields between rounds so ranks sharing a core all advance. */
static ak_status p2p_progress(const ak__algo_ctx *comm, unsigned pending) {
    int present = 0;
    for (int t = 0; t < AK_COMM_TP_COUNT; t++) present += comm->transports[t].vt != NULL;
    for (int t = 0; t < AK_COMM_TP_COUNT; t++) {
        const ak__transport *tp = &comm->transports[t];
        if (!tp->vt) continue;
        int block = present == 1 && (pending & (1u << t));
        ak_status st = tp->vt->progress(tp->ctx, block ? P2P_BLOCKING_SLICE_US : 0);
        if (st != AK_OK) return st;
    }
    if (present > 1) sched_yield();
    return AK_OK;
}

static ak_status p2p_timeout(const ak__algo_ctx *comm, ak__p2p *const *ops, int n, int timeout_ms) {
    const ak__p2p *op = ops[0];
    for (int i = 0; i < n; i++)
        if (!p2p_is_complete(ops[i])) {
            op = ops[i];
            break;
        }
    ak__transport_lost(comm->lost, op->peer, AK_LOST_CLOSED); /* it let us wait */
    return ak__algo_fail(comm, AK_FAIL(AK_ERR_TIMEOUT,
                                       "comm: rank %d: no progress for %d ms on a %zu-byte %s "
                                       "rank %d (tag %016llx); peer lost or calls out of step?",
                                       comm->rank, timeout_ms, op->bytes,
                                       op->is_send ? "send to" : "recv from", op->peer,
                                       (unsigned long long)op->tag));
}

ak_status ak__p2p_wait(const ak__algo_ctx *comm, ak__p2p *const *ops, int n) {
    int timeout_ms = comm->timeout_ms > 0 ? comm->timeout_ms : P2P_DEFAULT_TIMEOUT_MS;
    uint64_t limit_ns = (uint64_t)timeout_ms * 1000000u;
    uint64_t since = 0; /* when the mark last changed; read lazily */
    size_t last_mark = (size_t)-1;
    for (;;) {
        p2p_scan s = p2p_scan_ops(comm, ops, n);
        if (s.failed != AK_OK) {
            /* the transport's report wins: shm fails every op when one peer is lost */
            if (s.failed == AK_ERR_REMOTE)
                ak__transport_lost(comm->lost, s.failed_peer, AK_LOST_CLOSED);
            return ak__algo_fail(comm, s.failed);
        }
        if (!s.pending) return AK_OK;
        uint64_t now = ak_now_ns();
        if (s.mark != last_mark) {
            last_mark = s.mark;
            since = now;
        } else if (now - since > limit_ns) {
            return p2p_timeout(comm, ops, n, timeout_ms);
        }
        ak_status st = p2p_progress(comm, s.pending);
        if (st != AK_OK) return ak__algo_fail(comm, st);
    }
}

ak_status ak__p2p_sendrecv(const ak__algo_ctx *comm, int to, const void *sbuf, size_t sbytes, int from,
                           void *rbuf, size_t rbytes, uint64_t tag) {
    ak__p2p send, recv;
    ak__p2p *ops[2];
    int n = 0;
    /* receive first: a transport that copies directly can then land the peer's data
     * without staging it */
    if (rbytes > 0) {
        ak__p2p_init_recv(&recv, from, rbuf, rbytes, tag);
        AK_CHECK(ak__p2p_post(comm, &recv));
        ops[n++] = &recv;
    }
    if (sbytes > 0) {
        ak__p2p_init_send(&send, to, sbuf, sbytes, tag);
        AK_CHECK(ak__p2p_post(comm, &send));
        ops[n++] = &send;
    }
    return n ? ak__p2p_wait(comm, ops, n) : AK_OK;
}
