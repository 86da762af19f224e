/* Collective algorithms, written only against the point-to-point layer below (which
 * routes each peer to its transport). docs/collectives.md gives each algorithm's steps
 * and bytes on the wire.
 *
 * Algorithms run on a group: an ordered list of communicator ranks that take part, with
 * this rank's index in it. Flat collectives use the identity group; the hierarchical
 * allreduce runs the flat ones on a host's ranks and on the same-local-index ranks of
 * every host, without building sub-communicators. Buffers are in place (the caller copies
 * sendbuf to recvbuf first) unless a function also takes a separate `src`, which it only
 * reads. `tag` identifies the collective call: the same on every rank, different per call
 * (see ak__comm_next_tag).
 *
 * Algorithms see their communicator only through an ak__algo_ctx: the ranks and their
 * layout over hosts, the transports, the timeout, scratch, and how to report a failure.
 * The communicator (comm.c) fills it (ak__comm_algo); nothing here includes its struct. */
#ifndef AK_COMM_ALGO_H
#define AK_COMM_ALGO_H

#include <stddef.h>
#include <stdint.h>

#include "accelkit/comm.h"
#include "comm/bootstrap/store.h"
#include "comm/transport/transport.h"

/* What a collective algorithm may use of its communicator. */
typedef struct ak__algo_ctx {
    /* this rank and the communicator's ranks, laid out over hosts */
    int rank, size;
    int local_rank, local_size, host_count;
    const int *host_of;         /* [size]: host index of each rank */
    const int *local_index_of;  /* [size]: index of each rank among its host's ranks */
    const int *same_host_ranks; /* ranks on this host, ascending (local_size entries) */
    int threads_local;          /* ranks are threads of one process (mem transport) */
    /* point to point: the transports and the one that reaches each rank */
    const ak__transport *transports; /* [AK_COMM_TP_COUNT]; vt NULL when absent */
    const uint8_t *route;            /* [size]: AK_COMM_TP_* */
    int timeout_ms;                  /* no progress for this long fails; <= 0: default */
    /* failure reporting: the first failure wins and leaves the communicator unusable */
    const ak_status *failed; /* the communicator's first failure, AK_OK while healthy */
    ak__lost *lost;          /* the peer a failure was first seen on */
    ak_status (*on_failure)(void *owner, ak_status st); /* marks owner failed, returns st */
    /* scratch of at least `bytes` (64-byte aligned), valid until the next call */
    ak_status (*get_scratch)(void *owner, size_t bytes, void **out);
    /* the shared-memory direct allreduce's segment: found through the store under
     * `prefix`, kept in *shm_direct between calls */
    ak__store *store;
    const char *prefix;
    void **shm_direct;
    void *owner; /* the communicator, handed back to on_failure and get_scratch only */
} ak__algo_ctx;

/* Marks the communicator failed (see ak__comm_fail) and returns st. */
static inline ak_status ak__algo_fail(const ak__algo_ctx *c, ak_status st) {
    return c->on_failure(c->owner, st);
}
/* The algorithms' scratch (see ak__comm_scratch). */
static inline ak_status ak__algo_scratch(const ak__algo_ctx *c, size_t bytes, void **out) {
    return c->get_scratch(c->owner, bytes, out);
}

typedef struct ak__group {
    const int *ranks; /* [n] communicator ranks */
    int n;
    int me;           /* index of this rank in ranks */
} ak__group;

/* ---- point to point (algo/p2p.c) ---------------------------------------------------- */

void ak__p2p_init_send(ak__p2p *op, int peer, const void *buf, size_t bytes, uint64_t tag);
void ak__p2p_init_recv(ak__p2p *op, int peer, void *buf, size_t bytes, uint64_t tag);
/* Posts to the peer's transport. */
ak_status ak__p2p_post(const ak__algo_ctx *comm, ak__p2p *op);
/* Progresses until every op in ops[0..n) is complete; fails with the first failing op's
 * status, or AK_ERR_TIMEOUT after the communicator's timeout without progress. */
ak_status ak__p2p_wait(const ak__algo_ctx *comm, ak__p2p *const *ops, int n);
/* Send to `to` and receive from `from` at the same time (both may be this rank's peer
 * in a ring); sbytes or rbytes may be 0 to skip that side. */
ak_status ak__p2p_sendrecv(const ak__algo_ctx *comm, int to, const void *sbuf, size_t sbytes, int from,
                           void *rbuf, size_t rbytes, uint64_t tag);

/* ---- algorithms --------------------------------------------------------------------- */

/* Block b of a count split into n near-equal blocks: [offset, offset + len). */
void ak__block_range(size_t count, int n, int b, size_t *offset, size_t *len);
/* Blocks [first, min(last, n)) of that split as one range (first < n, first < last). */
void ak__block_span(size_t count, int n, int first, int last, size_t *offset, size_t *len);
/* A group of one: src copied to buf unless they are the same buffer. */
ak_status ak__copy_alone(const void *src, void *buf, size_t count, ak_dtype dt);

/* One pipelined exchange-and-reduce step (algo/ring.c): elements [soff, soff + slen) of
 * `send` go to rank `to` while [roff, roff + rlen) arrive from rank `from`, each segment
 * reduced on arrival as buf = operand op received; ranges in elements, ranks are
 * communicator ranks (to may equal from). The ring reduce-scatter runs one per step,
 * recursive halving one per round. */
typedef struct ak__reduce_step {
    int to, from;
    const void *send;
    size_t soff, slen;
    const void *operand;
    void *buf;
    size_t roff, rlen;
} ak__reduce_step;
ak_status ak__reduce_step_run(const ak__algo_ctx *c, const ak__reduce_step *s, ak_dtype dt,
                              ak_reduce_op op, uint64_t tag);

/* Where index i's block lies (bytes) in a rooted operation's buffer. */
typedef void (*ak__block_fn)(const void *ctx, int i, size_t *off, size_t *len);
/* The root's side of a gather (is_send 0) or scatter (1): one message per other index
 * with a non-empty block, batched (algo/tree.c). */
ak_status ak__fan(const ak__algo_ctx *c, const ak__group *g, char *base, ak__block_fn block, const void *ctx,
                  int is_send, uint64_t tag);

/* Allreduce of src into buf (op SUM/PROD/MIN/MAX; AVG is finished by the caller); the
 * ring and hierarchical ones take src == buf for in place, the others work in place. */
ak_status ak__allreduce_ring(const ak__algo_ctx *c, const ak__group *g, const void *src, void *buf,
                             size_t count, ak_dtype dt, ak_reduce_op op, uint64_t tag);
ak_status ak__allreduce_recursive_doubling(const ak__algo_ctx *c, const ak__group *g, void *buf,
                                           size_t count, ak_dtype dt, ak_reduce_op op,
                                           uint64_t tag);
/* binomial-tree reduce to group index 0, then binomial broadcast */
ak_status ak__allreduce_tree(const ak__algo_ctx *c, const ak__group *g, void *buf, size_t count,
                             ak_dtype dt, ak_reduce_op op, uint64_t tag);
/* intra-host reduce-scatter → inter-host allreduce of every local shard in parallel →
 * intra-host allgather; needs the same number of ranks on every host (else falls back
 * to the ring and says so at debug level) */
ak_status ak__allreduce_hierarchical(const ak__algo_ctx *c, const void *src, void *buf, size_t count,
                                     ak_dtype dt, ak_reduce_op op, uint64_t tag);

/* The hierarchical algorithms' two groups: this rank's host (ordered by local index)
 * and the ranks with its local index on every host (ordered by host). balanced is 0
 * (groups unset) when the hosts differ in size: those run the flat ring. inter.ranks
 * may point into the struct itself: keep it in place while the groups are used. */
#define AK_HIER_STACK_ENTRIES 64 /* hosts / local ranks handled without allocating */
typedef struct ak__hier_groups {
    int balanced;
    ak__group intra, inter;
    int stack_ranks[AK_HIER_STACK_ENTRIES];
    void *heap;
} ak__hier_groups;
ak_status ak__hier_groups_init(ak__hier_groups *g, const ak__algo_ctx *c);
void ak__hier_groups_free(ak__hier_groups *g);
/* The same allreduce cut into chunks of chunk_bytes whose three phases overlap: the
 * inter-host exchange of chunk k on a helper thread while the calling thread reduce-
 * scatters the chunks after it and allgathers the ones before (algo/hier_pipe.c). */
ak_status ak__allreduce_hier_pipe(const ak__algo_ctx *c, const void *src, void *buf, size_t count,
                                  ak_dtype dt, ak_reduce_op op, size_t chunk_bytes, uint64_t tag);
/* Reduce-scatter of src (size blocks of count) into out (count: this rank's block):
 * each chunk's pieces of every block reduced over the host, then across hosts, on the
 * same two threads. stage holds size · count elements (scratch). src may alias the
 * caller's in-place buffer whose first block is out: piece k of block 0 is staged
 * before piece k of the result is written. AK_ERR_UNSUPPORTED (nothing reported) when
 * the hosts differ in size: run the ring. */
ak_status ak__reduce_scatter_hier_pipe(const ak__algo_ctx *c, const void *src, void *out, void *stage,
                                       size_t count, ak_dtype dt, ak_reduce_op op,
                                       size_t chunk_bytes, uint64_t tag);
/* Allgather of count elements from every rank (src: this rank's, may lie in out) into
 * out (size blocks of count), across hosts first and then over the host; same stage
 * and fallback. */
ak_status ak__allgather_hier_pipe(const ak__algo_ctx *c, const void *src, void *out, void *stage,
                                  size_t count, size_t esize, size_t chunk_bytes, uint64_t tag);

/* Reduce-scatter of src into buf (src == buf: in place): block b (ak__block_range over
 * g->n) ends reduced in buf on index b; src is only read. */
ak_status ak__reduce_scatter_ring(const ak__algo_ctx *c, const ak__group *g, const void *src, void *buf,
                                  size_t count, ak_dtype dt, ak_reduce_op op, uint64_t tag);
/* Recursive halving (power-of-two n; other sizes run the ring): same contract. */
ak_status ak__reduce_scatter_halving(const ak__algo_ctx *c, const ak__group *g, const void *src, void *buf,
                                     size_t count, ak_dtype dt, ak_reduce_op op, uint64_t tag);
/* Allgather in place: block b (counts[b] elements at displs[b]) comes from index b. */
ak_status ak__allgatherv_ring(const ak__algo_ctx *c, const ak__group *g, void *buf, const size_t *counts,
                              const size_t *displs, size_t elem_size, uint64_t tag);
/* Ring allgather of the blocks of ak__block_range(count, n, ·) where index i holds block
 * (i − rot) mod n (rot 0: the allreduce's layout; rot = root: the broadcast's). */
ak_status ak__allgather_blocks_ring(const ak__algo_ctx *c, const ak__group *g, void *buf, size_t count,
                                    size_t elem_size, int rot, uint64_t tag);
/* Same contract as the ring, in ceil(log2 n) steps: recursive doubling when n is a power
 * of two and the blocks lie back to back in group order, else Bruck (algo/bruck.c). */
ak_status ak__allgatherv_recursive_doubling(const ak__algo_ctx *c, const ak__group *g, void *buf,
                                            const size_t *counts, const size_t *displs,
                                            size_t elem_size, uint64_t tag);
ak_status ak__allgatherv_bruck(const ak__algo_ctx *c, const ak__group *g, void *buf, const size_t *counts,
                               const size_t *displs, size_t elem_size, uint64_t tag);
/* Binomial broadcast, forwarded in segments of AK_BCAST_SEG_BYTES (pipelined). */
#define AK_BCAST_SEG_BYTES ((size_t)512 << 10)
ak_status ak__broadcast_tree(const ak__algo_ctx *c, const ak__group *g, void *buf, size_t bytes, int root,
                             uint64_t tag);
/* Binomial scatter from root: index i ends with block (i − root) mod n of
 * ak__block_range(bytes, n, ·) (and the blocks of its subtree) in place in buf. */
ak_status ak__scatter_binomial(const ak__algo_ctx *c, const ak__group *g, void *buf, size_t bytes, int root,
                               uint64_t tag);
/* Scatter + ring allgather (van de Geijn): the broadcast for large messages. */
ak_status ak__broadcast_scatter_allgather(const ak__algo_ctx *c, const ak__group *g, void *buf,
                                          size_t bytes, int root, uint64_t tag);
/* Reduce to group index root; buf on non-roots is clobbered (used as scratch). */
ak_status ak__reduce_tree(const ak__algo_ctx *c, const ak__group *g, void *buf, size_t count, ak_dtype dt,
                          ak_reduce_op op, int root, uint64_t tag);
/* Ring reduce-scatter of src into buf (src == buf: in place), then every index sends its
 * reduced block to root: the reduce for large messages. buf is the result at the root,
 * scratch (count elements) elsewhere; src is only read. */
ak_status ak__reduce_scatter_gather(const ak__algo_ctx *c, const ak__group *g, const void *src, void *buf,
                                    size_t count, ak_dtype dt, ak_reduce_op op, int root,
                                    uint64_t tag);
/* Pairwise exchange (step s: send to me+s, receive from me-s). */
ak_status ak__alltoallv_pairwise(const ak__algo_ctx *c, const ak__group *g, const void *sendbuf,
                                 const size_t *scounts, const size_t *sdispls, void *recvbuf,
                                 const size_t *rcounts, const size_t *rdispls,
                                 size_t elem_size, uint64_t tag);
/* Linear gather/scatter at group index root (rank r's block at r × bytes). */
ak_status ak__gather_linear(const ak__algo_ctx *c, const ak__group *g, const void *sendbuf, void *recvbuf,
                            size_t bytes, int root, uint64_t tag);
ak_status ak__scatter_linear(const ak__algo_ctx *c, const ak__group *g, const void *sendbuf, void *recvbuf,
                             size_t bytes, int root, uint64_t tag);
/* Dissemination barrier: ceil(log2 n) rounds of 1-byte messages. */
ak_status ak__barrier_dissemination(const ak__algo_ctx *c, const ak__group *g, uint64_t tag);

/* ---- shared-memory direct allreduce (algo/shm_direct.c) ------------------------------ */

/* Allreduce among processes of one host (host_count == 1, not threads_local): every
 * rank stages its data in one shared segment and reduces its block by reading the peers'
 * copies directly. Unlike the algorithms above it takes both buffers (sendbuf may equal
 * recvbuf), so an out-of-place call costs no extra copy. The segment is created on the
 * first call (collective; the store under c->prefix) and kept in *c->shm_direct. */
ak_status ak__allreduce_shm_direct(const ak__algo_ctx *c, const void *sendbuf, void *recvbuf, size_t count,
                                   ak_dtype dt, ak_reduce_op op, uint64_t tag);
/* Unmaps *c->shm_direct and tells peers still waiting on it; NULL state is a no-op. */
void ak__shm_direct_free(const ak__algo_ctx *c);

#endif /* AK_COMM_ALGO_H */
