/* Public collective entry points: validate the arguments (naming what is wrong), then run
 * the call now or, while the communicator has a progress thread, through its queue. */
#include <limits.h>
#include <stdint.h>

#include "comm/comm_ops.h"
#include "core/check.h"

static ak_status check_common(const ak_comm *c, const char *fn, size_t count, ak_dtype dt) {
    AK_ARG_CHECK(c, "%s: NULL communicator", fn);
    if (c->failed != AK_OK)
        return AK_FAIL(c->failed, "%s: the communicator failed earlier and must be freed", fn);
    AK_ARG_CHECK((unsigned)dt < AK_DTYPE_COUNT_, "%s: unknown dtype %d", fn, (int)dt);
    size_t es = 0;
    ak_dtype_size(dt, &es);
    AK_ARG_CHECK(count <= SIZE_MAX / es / (size_t)c->size, "%s: count %zu overflows", fn, count);
    return AK_OK;
}

static ak_status check_buf(const char *fn, const char *name, const void *p, size_t count) {
    AK_ARG_CHECK(p || count == 0, "%s: %s is NULL with count %zu", fn, name, count);
    return AK_OK;
}

/* A buffer the call reads or writes: AK_IN_PLACE is a marker, not memory, so it is
 * refused wherever the call has no in-place meaning for it (a copy from or to address 1
 * would crash). */
static ak_status check_real(const char *fn, const char *name, const void *p, size_t count) {
    AK_ARG_CHECK(p != AK_IN_PLACE, "%s: %s is AK_IN_PLACE, which only sendbuf may be (and "
                 "the root's recvbuf of ak_comm_scatter)", fn, name);
    return check_buf(fn, name, p, count);
}

static ak_status check_root(const ak_comm *c, const char *fn, int root) {
    AK_ARG_CHECK(root >= 0 && root < c->size, "%s: root %d not in [0, %d)", fn, root, c->size);
    return AK_OK;
}

static ak_status check_op(const char *fn, ak_reduce_op op) {
    AK_ARG_CHECK((unsigned)op < AK_REDUCE_COUNT_, "%s: unknown reduce op %d", fn, (int)op);
    return AK_OK;
}

/* Blocking: behind the progress thread's queue when there is one, else right here. */
static ak_status run_now(ak_comm *c, const ak__coll *k) {
    if (!c->async) return ak__coll_run(c, k);
    ak_comm_request *req;
    AK_CHECK(ak__comm_async_submit(c, k, &req));
    return ak_comm_wait(req);
}

/* ---- validation: each prep_* checks one call's arguments and describes it in *k; the
 * blocking and the async entry point of an operation share it. ----------------------- */

static ak_status prep_allreduce(ak_comm *c, const char *fn, const void *sendbuf, void *recvbuf,
                                size_t count, ak_dtype dt, ak_reduce_op op, ak__coll *k) {
    AK_CHECK(check_common(c, fn, count, dt));
    AK_CHECK(check_op(fn, op));
    AK_CHECK(check_buf(fn, "sendbuf", sendbuf, count));
    AK_CHECK(check_real(fn, "recvbuf", recvbuf, count));
    *k = (ak__coll){AK_COLL_ALLREDUCE, sendbuf, recvbuf, count, dt, op, -1, 0, 0, 0, 0};
    return AK_OK;
}

/* Adasum: f32/f64 only (the rule needs floating point); the tensors must tile count.
 * k->root carries the tensor count (it also enters the wire tag). */
static ak_status prep_adasum(ak_comm *c, const char *fn, const void *sendbuf, void *recvbuf,
                             size_t count, ak_dtype dt, const size_t *segs, size_t nseg,
                             ak__coll *k) {
    AK_CHECK(check_common(c, fn, count, dt));
    if (dt != AK_DTYPE_F32 && dt != AK_DTYPE_F64)
        return AK_FAIL(AK_ERR_UNSUPPORTED, "%s: Adasum needs f32 or f64 data, not %s", fn,
                       ak_dtype_name(dt));
    AK_CHECK(check_buf(fn, "sendbuf", sendbuf, count));
    AK_CHECK(check_real(fn, "recvbuf", recvbuf, count));
    AK_ARG_CHECK(segs || nseg == 0, "%s: segment_counts is NULL with nsegments %zu", fn, nseg);
    AK_ARG_CHECK(nseg <= INT_MAX / 8, "%s: nsegments %zu too large", fn, nseg);
    size_t sum = 0;
    for (size_t i = 0; i < nseg; i++) {
        AK_ARG_CHECK(segs[i] <= count - sum, "%s: segment_counts[0..%zu] sum past count %zu",
                     fn, i, count);
        sum += segs[i];
    }
    AK_ARG_CHECK(nseg == 0 || sum == count, "%s: segment_counts sum to %zu, not count %zu", fn,
                 sum, count);
    *k = (ak__coll){AK_COLL_ADASUM, sendbuf, recvbuf, count, dt, AK_REDUCE_SUM, (int)nseg,
                    nseg ? segs : NULL, 0, 0, 0};
    return AK_OK;
}

/* MPI semantics: only the root reduces in place (its input already in recvbuf); the
 * other ranks read sendbuf and never touch recvbuf, which may be NULL there. */
static ak_status prep_reduce(ak_comm *c, const char *fn, const void *sendbuf, void *recvbuf,
                             size_t count, ak_dtype dt, ak_reduce_op op, int root, ak__coll *k) {
    AK_CHECK(check_common(c, fn, count, dt));
    AK_CHECK(check_op(fn, op));
    AK_CHECK(check_root(c, fn, root));
    if (c->rank == root) {
        AK_CHECK(check_buf(fn, "sendbuf", sendbuf, count));
        AK_CHECK(check_real(fn, "recvbuf", recvbuf, count));
        if (sendbuf == AK_IN_PLACE) sendbuf = recvbuf;
    } else {
        AK_ARG_CHECK(sendbuf != AK_IN_PLACE, "%s: sendbuf is AK_IN_PLACE on rank %d, which is "
                     "not the root (%d): only the root reduces in place (its input in "
                     "recvbuf); other ranks pass their input as sendbuf", fn, c->rank, root);
        AK_CHECK(check_buf(fn, "sendbuf", sendbuf, count));
        recvbuf = NULL; /* not the root: ignored */
    }
    *k = (ak__coll){AK_COLL_REDUCE, sendbuf, recvbuf, count, dt, op, root, 0, 0, 0, 0};
    return AK_OK;
}

static ak_status prep_broadcast(ak_comm *c, const char *fn, void *buf, size_t count,
                                ak_dtype dt, int root, ak__coll *k) {
    AK_CHECK(check_common(c, fn, count, dt));
    AK_CHECK(check_root(c, fn, root));
    AK_CHECK(check_real(fn, "buf", buf, count));
    *k = (ak__coll){AK_COLL_BROADCAST, buf, buf, count, dt, AK_REDUCE_SUM, root, 0, 0, 0, 0};
    return AK_OK;
}

/* sendbuf AK_IN_PLACE: this rank's block already sits at its place in recvbuf */
/* Allgather and alltoall take the same arguments and checks; req NULL runs the operation
 * now, else it is queued on the progress thread (the caller checked req of an i* call). */
static ak_status exchange(ak_comm *c, const char *fn, ak__coll_kind kind, const void *sendbuf,
                          void *recvbuf, size_t count, ak_dtype dt, ak_comm_request **req) {
    AK_CHECK(check_common(c, fn, count, dt));
    AK_CHECK(check_buf(fn, "sendbuf", sendbuf, count));
    AK_CHECK(check_real(fn, "recvbuf", recvbuf, count));
    ak__coll k = {kind, sendbuf, recvbuf, count, dt, AK_REDUCE_SUM, -1, 0, 0, 0, 0};
    return req ? ak__comm_async_submit(c, &k, req) : run_now(c, &k);
}

/* Sum of counts, checking the displacements keep every block inside the buffer's span. */
static ak_status check_layout(const ak_comm *c, const char *fn, const char *what,
                              const size_t *counts, const size_t *displs, size_t *span) {
    AK_ARG_CHECK(counts && displs, "%s: NULL %s counts or displacements", fn, what);
    *span = 0;
    for (int r = 0; r < c->size; r++) {
        AK_ARG_CHECK(counts[r] <= SIZE_MAX / 16 && displs[r] <= SIZE_MAX / 16,
                     "%s: %s count or displacement of rank %d too large", fn, what, r);
        if (counts[r] && displs[r] + counts[r] > *span) *span = displs[r] + counts[r];
    }
    return AK_OK;
}

static ak_status prep_allgatherv(ak_comm *c, const char *fn, const void *sendbuf,
                                 size_t sendcount, void *recvbuf, const size_t *counts,
                                 const size_t *displs, ak_dtype dt, ak__coll *k) {
    size_t span;
    AK_CHECK(check_common(c, fn, sendcount, dt));
    AK_CHECK(check_layout(c, fn, "receive", counts, displs, &span));
    AK_ARG_CHECK(sendcount == counts[c->rank], "%s: sendcount %zu but counts[%d] = %zu", fn,
                 sendcount, c->rank, counts[c->rank]);
    AK_CHECK(check_buf(fn, "sendbuf", sendbuf, sendcount));
    AK_CHECK(check_real(fn, "recvbuf", recvbuf, span));
    *k = (ak__coll){AK_COLL_ALLGATHERV, sendbuf, recvbuf, sendcount, dt, AK_REDUCE_SUM, -1,
                    counts, displs, 0, 0};
    return AK_OK;
}

/* sendbuf AK_IN_PLACE: the size × recvcount input is in recvbuf, the result lands at its
 * start */
static ak_status prep_reduce_scatter(ak_comm *c, const char *fn, const void *sendbuf,
                                     void *recvbuf, size_t recvcount, ak_dtype dt,
                                     ak_reduce_op op, ak__coll *k) {
    AK_CHECK(check_common(c, fn, recvcount, dt));
    AK_CHECK(check_op(fn, op));
    AK_CHECK(check_buf(fn, "sendbuf", sendbuf, recvcount));
    AK_CHECK(check_real(fn, "recvbuf", recvbuf, recvcount));
    *k = (ak__coll){AK_COLL_REDUCE_SCATTER, sendbuf, recvbuf, recvcount, dt, op, -1, 0, 0, 0, 0};
    return AK_OK;
}

/* In place (sendbuf AK_IN_PLACE or recvbuf): block r of recvbuf goes to rank r and is
 * replaced by rank r's block (comm_ops.c sends from a copy). */
/* In place (sendbuf AK_IN_PLACE): the data sent is recvbuf's, laid out by the receive
 * counts and displacements; the send ones are ignored (MPI_Alltoallv's rule). sendbuf ==
 * recvbuf is in place too, but only with identical layouts: otherwise blocks received
 * would land on blocks not yet sent, which is no meaningful operation. */
static ak_status prep_alltoallv(ak_comm *c, const char *fn, const void *sendbuf,
                                const size_t *sendcounts, const size_t *sdispls, void *recvbuf,
                                const size_t *recvcounts, const size_t *rdispls, ak_dtype dt,
                                ak__coll *k) {
    size_t sspan = 0, rspan;
    AK_CHECK(check_common(c, fn, 0, dt));
    AK_CHECK(check_layout(c, fn, "receive", recvcounts, rdispls, &rspan));
    AK_CHECK(check_real(fn, "recvbuf", recvbuf, rspan));
    if (sendbuf == AK_IN_PLACE) {
        sendcounts = recvcounts, sdispls = rdispls;
    } else {
        AK_CHECK(check_layout(c, fn, "send", sendcounts, sdispls, &sspan));
        AK_CHECK(check_buf(fn, "sendbuf", sendbuf, sspan));
        for (int r = 0; sendbuf == recvbuf && r < c->size; r++)
            AK_ARG_CHECK(sendcounts[r] == recvcounts[r] && sdispls[r] == rdispls[r],
                         "%s: sendbuf == recvbuf but the send and receive layouts differ "
                         "(rank %d: send %zu at %zu, receive %zu at %zu); pass AK_IN_PLACE "
                         "as sendbuf to send recvbuf's blocks by the receive layout", fn, r,
                         sendcounts[r], sdispls[r], recvcounts[r], rdispls[r]);
    }
    *k = (ak__coll){AK_COLL_ALLTOALLV, sendbuf, recvbuf, 0, dt, AK_REDUCE_SUM, -1,
                    sendcounts, sdispls, recvcounts, rdispls};
    return AK_OK;
}

/* ---- entry points ------------------------------------------------------------------ */

ak_status ak_comm_allreduce(ak_comm *c, const void *sendbuf, void *recvbuf, size_t count,
                            ak_dtype dt, ak_reduce_op op) {
    ak__coll k;
    AK_CHECK(prep_allreduce(c, "ak_comm_allreduce", sendbuf, recvbuf, count, dt, op, &k));
    return run_now(c, &k);
}

ak_status ak_comm_allreduce_adasum(ak_comm *c, const void *sendbuf, void *recvbuf, size_t count,
                                   ak_dtype dt, const size_t *segment_counts, size_t nsegments) {
    ak__coll k;
    AK_CHECK(prep_adasum(c, "ak_comm_allreduce_adasum", sendbuf, recvbuf, count, dt,
                         segment_counts, nsegments, &k));
    return run_now(c, &k);
}

ak_status ak_comm_iallreduce(ak_comm *c, const void *sendbuf, void *recvbuf, size_t count,
                             ak_dtype dt, ak_reduce_op op, ak_comm_request **req) {
    static const char fn[] = "ak_comm_iallreduce";
    AK_ARG_CHECK(req, "%s: NULL request pointer", fn);
    ak__coll k;
    AK_CHECK(prep_allreduce(c, fn, sendbuf, recvbuf, count, dt, op, &k));
    return ak__comm_async_submit(c, &k, req);
}

ak_status ak_comm_reduce(ak_comm *c, const void *sendbuf, void *recvbuf, size_t count,
                         ak_dtype dt, ak_reduce_op op, int root) {
    ak__coll k;
    AK_CHECK(prep_reduce(c, "ak_comm_reduce", sendbuf, recvbuf, count, dt, op, root, &k));
    return run_now(c, &k);
}

ak_status ak_comm_broadcast(ak_comm *c, void *buf, size_t count, ak_dtype dt, int root) {
    ak__coll k;
    AK_CHECK(prep_broadcast(c, "ak_comm_broadcast", buf, count, dt, root, &k));
    return run_now(c, &k);
}

ak_status ak_comm_ibroadcast(ak_comm *c, void *buf, size_t count, ak_dtype dt, int root,
                             ak_comm_request **req) {
    static const char fn[] = "ak_comm_ibroadcast";
    AK_ARG_CHECK(req, "%s: NULL request pointer", fn);
    ak__coll k;
    AK_CHECK(prep_broadcast(c, fn, buf, count, dt, root, &k));
    return ak__comm_async_submit(c, &k, req);
}

ak_status ak_comm_allgather(ak_comm *c, const void *sendbuf, void *recvbuf, size_t count,
                            ak_dtype dt) {
    return exchange(c, "ak_comm_allgather", AK_COLL_ALLGATHER, sendbuf, recvbuf, count, dt, NULL);
}

ak_status ak_comm_iallgather(ak_comm *c, const void *sendbuf, void *recvbuf, size_t count,
                             ak_dtype dt, ak_comm_request **req) {
    AK_ARG_CHECK(req, "ak_comm_iallgather: NULL request pointer");
    return exchange(c, "ak_comm_iallgather", AK_COLL_ALLGATHER, sendbuf, recvbuf, count, dt, req);
}

ak_status ak_comm_allgatherv(ak_comm *c, const void *sendbuf, size_t sendcount, void *recvbuf,
                             const size_t *counts, const size_t *displs, ak_dtype dt) {
    ak__coll k;
    AK_CHECK(prep_allgatherv(c, "ak_comm_allgatherv", sendbuf, sendcount, recvbuf, counts,
                             displs, dt, &k));
    return run_now(c, &k);
}

ak_status ak_comm_iallgatherv(ak_comm *c, const void *sendbuf, size_t sendcount, void *recvbuf,
                              const size_t *counts, const size_t *displs, ak_dtype dt,
                              ak_comm_request **req) {
    static const char fn[] = "ak_comm_iallgatherv";
    AK_ARG_CHECK(req, "%s: NULL request pointer", fn);
    ak__coll k;
    AK_CHECK(prep_allgatherv(c, fn, sendbuf, sendcount, recvbuf, counts, displs, dt, &k));
    return ak__comm_async_submit(c, &k, req);
}

ak_status ak_comm_reduce_scatter(ak_comm *c, const void *sendbuf, void *recvbuf,
                                 size_t recvcount, ak_dtype dt, ak_reduce_op op) {
    ak__coll k;
    AK_CHECK(prep_reduce_scatter(c, "ak_comm_reduce_scatter", sendbuf, recvbuf, recvcount, dt,
                                 op, &k));
    return run_now(c, &k);
}

ak_status ak_comm_ireduce_scatter(ak_comm *c, const void *sendbuf, void *recvbuf,
                                  size_t recvcount, ak_dtype dt, ak_reduce_op op,
                                  ak_comm_request **req) {
    static const char fn[] = "ak_comm_ireduce_scatter";
    AK_ARG_CHECK(req, "%s: NULL request pointer", fn);
    ak__coll k;
    AK_CHECK(prep_reduce_scatter(c, fn, sendbuf, recvbuf, recvcount, dt, op, &k));
    return ak__comm_async_submit(c, &k, req);
}

ak_status ak_comm_alltoall(ak_comm *c, const void *sendbuf, void *recvbuf, size_t count,
                           ak_dtype dt) {
    return exchange(c, "ak_comm_alltoall", AK_COLL_ALLTOALL, sendbuf, recvbuf, count, dt, NULL);
}

ak_status ak_comm_ialltoall(ak_comm *c, const void *sendbuf, void *recvbuf, size_t count,
                            ak_dtype dt, ak_comm_request **req) {
    AK_ARG_CHECK(req, "ak_comm_ialltoall: NULL request pointer");
    return exchange(c, "ak_comm_ialltoall", AK_COLL_ALLTOALL, sendbuf, recvbuf, count, dt, req);
}

ak_status ak_comm_alltoallv(ak_comm *c, const void *sendbuf, const size_t *sendcounts,
                            const size_t *sdispls, void *recvbuf, const size_t *recvcounts,
                            const size_t *rdispls, ak_dtype dt) {
    ak__coll k;
    AK_CHECK(prep_alltoallv(c, "ak_comm_alltoallv", sendbuf, sendcounts, sdispls, recvbuf,
                            recvcounts, rdispls, dt, &k));
    return run_now(c, &k);
}

/* MPI semantics: only the root gathers in place (its block already at root × count in
 * recvbuf); recvbuf is ignored elsewhere. */
ak_status ak_comm_gather(ak_comm *c, const void *sendbuf, void *recvbuf, size_t count,
                         ak_dtype dt, int root) {
    static const char fn[] = "ak_comm_gather";
    AK_CHECK(check_common(c, fn, count, dt));
    AK_CHECK(check_root(c, fn, root));
    if (c->rank == root) {
        AK_CHECK(check_buf(fn, "sendbuf", sendbuf, count));
        AK_CHECK(check_real(fn, "recvbuf", recvbuf, count));
    } else {
        AK_ARG_CHECK(sendbuf != AK_IN_PLACE, "%s: sendbuf is AK_IN_PLACE on rank %d, which is "
                     "not the root (%d): only the root gathers in place", fn, c->rank, root);
        AK_CHECK(check_buf(fn, "sendbuf", sendbuf, count));
        recvbuf = NULL; /* not the root: ignored */
    }
    ak__coll k = {AK_COLL_GATHER, sendbuf, recvbuf, count, dt, AK_REDUCE_SUM, root, 0, 0, 0, 0};
    return run_now(c, &k);
}

/* MPI semantics: the root scatters in place with recvbuf AK_IN_PLACE (its own block stays
 * where it is in sendbuf); sendbuf is ignored elsewhere. */
ak_status ak_comm_scatter(ak_comm *c, const void *sendbuf, void *recvbuf, size_t count,
                          ak_dtype dt, int root) {
    static const char fn[] = "ak_comm_scatter";
    AK_CHECK(check_common(c, fn, count, dt));
    AK_CHECK(check_root(c, fn, root));
    if (c->rank == root) {
        AK_ARG_CHECK(sendbuf != AK_IN_PLACE, "%s: sendbuf is AK_IN_PLACE at the root: it must "
                     "hold every rank's block (to scatter in place, pass recvbuf = "
                     "AK_IN_PLACE at the root)", fn);
        AK_CHECK(check_buf(fn, "sendbuf", sendbuf, count));
        if (recvbuf != AK_IN_PLACE) AK_CHECK(check_buf(fn, "recvbuf", recvbuf, count));
    } else {
        AK_ARG_CHECK(recvbuf != AK_IN_PLACE, "%s: recvbuf is AK_IN_PLACE on rank %d, which is "
                     "not the root (%d): only the root scatters in place", fn, c->rank, root);
        AK_CHECK(check_buf(fn, "recvbuf", recvbuf, count));
        sendbuf = NULL; /* not the root: ignored */
    }
    ak__coll k = {AK_COLL_SCATTER, sendbuf, recvbuf, count, dt, AK_REDUCE_SUM, root, 0, 0, 0, 0};
    return run_now(c, &k);
}

ak_status ak_comm_barrier(ak_comm *c) {
    AK_CHECK(check_common(c, "ak_comm_barrier", 0, AK_DTYPE_U8));
    ak__coll k = {AK_COLL_BARRIER, NULL, NULL, 0, AK_DTYPE_U8, AK_REDUCE_SUM, -1, 0, 0, 0, 0};
    return run_now(c, &k);
}

static ak_status point_to_point(ak_comm *c, const char *fn, ak__coll_kind kind, void *buf,
                                size_t count, ak_dtype dt, int peer) {
    AK_CHECK(check_common(c, fn, count, dt));
    AK_CHECK(check_real(fn, "buf", buf, count));
    AK_ARG_CHECK(peer >= 0 && peer < c->size && peer != c->rank,
                 "%s: peer %d is not another rank of [0, %d)", fn, peer, c->size);
    ak__coll k = {kind, buf, buf, count, dt, AK_REDUCE_SUM, peer, 0, 0, 0, 0};
    return run_now(c, &k);
}

ak_status ak_comm_send(ak_comm *c, const void *buf, size_t count, ak_dtype dt, int peer) {
    return point_to_point(c, "ak_comm_send", AK_COLL_SEND, (void *)buf, count, dt, peer);
}

ak_status ak_comm_recv(ak_comm *c, void *buf, size_t count, ak_dtype dt, int peer) {
    return point_to_point(c, "ak_comm_recv", AK_COLL_RECV, buf, count, dt, peer);
}
