/* Collective algorithms, written only against the point-to-point layer below (which
 * routes each peer to its transport). docs/collectives.md gives each algorithm's steps
 * and bytes on the wire.
 *
 * Algorithms run on a group: an ordered list of communicator ranks that take part, with
 * this rank's index in it. Flat collectives use the identity group; the hierarchical
 * allreduce runs the flat ones on a host's ranks and on the same-local-index ranks of
 * every host, without building sub-communicators. All buffers are in place (the caller
 * copies sendbuf to recvbuf first). `tag` identifies the collective call: the same on
 * every rank, different per call (see ak__comm_next_tag). */
#ifndef AK_COMM_ALGO_H
#define AK_COMM_ALGO_H

#include "comm/comm_internal.h"

typedef struct ak__group {
    const int *ranks; /* [n] communicator ranks */
    int n;
    int me;           /* index of this rank in ranks */
} ak__group;

/* ---- point to point (algo/p2p.c) ---------------------------------------------------- */

/* Tag of the next collective: the sequence number plus a digest of what the caller
 * asked for (kind, count, dtype, op, root), so mismatched calls fail on the wire. */
uint64_t ak__comm_next_tag(ak_comm *comm, int kind, size_t count, int dtype, int op, int root);

void ak__p2p_init_send(ak__p2p *op, int peer, const void *buf, size_t bytes, uint64_t tag);
void ak__p2p_init_recv(ak__p2p *op, int peer, void *buf, size_t bytes, uint64_t tag);
/* Posts to the peer's transport. */
ak_status ak__p2p_post(ak_comm *comm, ak__p2p *op);
/* Progresses until every op in ops[0..n) is complete; fails with the first failing op's
 * status, or AK_ERR_TIMEOUT after the communicator's timeout without progress. */
ak_status ak__p2p_wait(ak_comm *comm, ak__p2p *const *ops, int n);
/* Send to `to` and receive from `from` at the same time (both may be this rank's peer
 * in a ring); sbytes or rbytes may be 0 to skip that side. */
ak_status ak__p2p_sendrecv(ak_comm *comm, int to, const void *sbuf, size_t sbytes, int from,
                           void *rbuf, size_t rbytes, uint64_t tag);

/* ---- algorithms --------------------------------------------------------------------- */

/* Block b of a count split into n near-equal blocks: [offset, offset + len). */
void ak__block_range(size_t count, int n, int b, size_t *offset, size_t *len);

/* Allreduce of src into buf (op SUM/PROD/MIN/MAX; AVG is finished by the caller); the
 * ring and hierarchical ones take src == buf for in place, the others work in place. */
ak_status ak__allreduce_ring(ak_comm *c, const ak__group *g, const void *src, void *buf,
                             size_t count, ak_dtype dt, ak_reduce_op op, uint64_t tag);
ak_status ak__allreduce_recursive_doubling(ak_comm *c, const ak__group *g, void *buf,
                                           size_t count, ak_dtype dt, ak_reduce_op op,
                                           uint64_t tag);
/* binomial-tree reduce to group index 0, then binomial broadcast */
ak_status ak__allreduce_tree(ak_comm *c, const ak__group *g, void *buf, size_t count,
                             ak_dtype dt, ak_reduce_op op, uint64_t tag);
/* intra-host reduce-scatter → inter-host allreduce of every local shard in parallel →
 * intra-host allgather; needs the same number of ranks on every host (else falls back
 * to the ring and says so at debug level) */
ak_status ak__allreduce_hierarchical(ak_comm *c, const void *src, void *buf, size_t count,
                                     ak_dtype dt, ak_reduce_op op, uint64_t tag);

/* Reduce-scatter of src into buf (src == buf: in place): block b (ak__block_range over
 * g->n) ends reduced in buf on index b; src is only read. */
ak_status ak__reduce_scatter_ring(ak_comm *c, const ak__group *g, const void *src, void *buf,
                                  size_t count, ak_dtype dt, ak_reduce_op op, uint64_t tag);
/* Allgather in place: block b (counts[b] elements at displs[b]) comes from index b. */
ak_status ak__allgatherv_ring(ak_comm *c, const ak__group *g, void *buf, const size_t *counts,
                              const size_t *displs, size_t elem_size, uint64_t tag);
ak_status ak__broadcast_tree(ak_comm *c, const ak__group *g, void *buf, size_t bytes, int root,
                             uint64_t tag);
/* Reduce to group index root; buf on non-roots is clobbered (used as scratch). */
ak_status ak__reduce_tree(ak_comm *c, const ak__group *g, void *buf, size_t count, ak_dtype dt,
                          ak_reduce_op op, int root, uint64_t tag);
/* Pairwise exchange (step s: send to me+s, receive from me-s). */
ak_status ak__alltoallv_pairwise(ak_comm *c, const ak__group *g, const void *sendbuf,
                                 const size_t *scounts, const size_t *sdispls, void *recvbuf,
                                 const size_t *rcounts, const size_t *rdispls,
                                 size_t elem_size, uint64_t tag);
/* Linear gather/scatter at group index root (rank r's block at r × bytes). */
ak_status ak__gather_linear(ak_comm *c, const ak__group *g, const void *sendbuf, void *recvbuf,
                            size_t bytes, int root, uint64_t tag);
ak_status ak__scatter_linear(ak_comm *c, const ak__group *g, const void *sendbuf, void *recvbuf,
                             size_t bytes, int root, uint64_t tag);
/* Dissemination barrier: ceil(log2 n) rounds of 1-byte messages. */
ak_status ak__barrier_dissemination(ak_comm *c, const ak__group *g, uint64_t tag);

/* ---- shared-memory direct allreduce (algo/shm_direct.c) ------------------------------ */

/* Allreduce among processes of one host (host_count == 1, not threads_local): every
 * rank stages its data in one shared segment and reduces its block by reading the peers'
 * copies directly. Unlike the algorithms above it takes both buffers (sendbuf may equal
 * recvbuf), so an out-of-place call costs no extra copy. The segment is created on the
 * first call (collective; the store under comm->prefix) and kept in comm->shm_direct. */
ak_status ak__allreduce_shm_direct(ak_comm *c, const void *sendbuf, void *recvbuf, size_t count,
                                   ak_dtype dt, ak_reduce_op op, uint64_t tag);
/* Unmaps comm->shm_direct and tells peers still waiting on it; NULL state is a no-op. */
void ak__shm_direct_free(ak_comm *c);

#endif /* AK_COMM_ALGO_H */
