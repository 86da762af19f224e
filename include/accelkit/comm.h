/* accelkit collectives: communicators over TCP (between hosts) and shared memory (inside
 * a host), with ring, recursive-doubling, Bruck, recursive-halving, tree and two-level
 * hierarchical algorithms chosen per (collective, size, topology) by an α–β cost model.
 *
 * Semantics follow MPI/NCCL: every rank of a communicator calls the same collectives in
 * the same order with matching counts, dtypes, ops and roots. A mismatch detected on the
 * wire fails with AK_ERR_MISMATCH; a lost peer fails with AK_ERR_REMOTE or AK_ERR_TIMEOUT
 * (AK_COMM_TIMEOUT) on every surviving rank, never a hang, and the error names the rank
 * lost ("rank 2 was lost"), also on ranks that only saw a neighbour give up. A
 * communicator that failed stays failed: free it. One communicator must not be used by
 * two threads at once (use ak_comm_split for concurrent groups); async calls may have
 * many ops in flight. */
#ifndef ACCELKIT_COMM_H
#define ACCELKIT_COMM_H

#include "ak.h"
#include "kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ak_comm ak_comm;
typedef struct ak_comm_request ak_comm_request;

typedef enum ak_comm_transport {
    AK_COMM_TRANSPORT_AUTO = 0, /* shm inside a host, tcp across hosts */
    AK_COMM_TRANSPORT_TCP = 1,
    AK_COMM_TRANSPORT_SHM = 2, /* only valid when all ranks share one host */
} ak_comm_transport;

/* Algorithms. Forcing one (config.algo, AK_COMM_ALGO) applies to every collective the
 * cost model chooses for, mapped to that collective's algorithm of the same kind:
 *   RING: the bandwidth-optimal one: ring allreduce / allgather / reduce-scatter,
 *         scatter + ring allgather broadcast, ring reduce-scatter + gather reduce;
 *   RECURSIVE_DOUBLING, TREE: the log-step one: recursive-doubling (RD) or binomial-tree
 *         (TREE) allreduce, binomial broadcast and reduce, recursive-doubling allgather
 *         (Bruck when the group is not a power of two), recursive-halving reduce-scatter
 *         (the ring when the group is not a power of two);
 *   HIERARCHICAL, SHM_DIRECT: allreduce only; other collectives use the cost model;
 *   HIER_PIPE: the pipelined hierarchical allreduce, reduce-scatter and allgather;
 *         the others use the cost model.
 * docs/collectives.md gives every algorithm's steps and bytes. */
typedef enum ak_comm_algo {
    AK_COMM_ALGO_AUTO = 0, /* cost model */
    AK_COMM_ALGO_RING = 1,
    AK_COMM_ALGO_RECURSIVE_DOUBLING = 2,
    AK_COMM_ALGO_TREE = 3,
    AK_COMM_ALGO_HIERARCHICAL = 4,
    AK_COMM_ALGO_SHM_DIRECT = 5, /* processes of one host: reduce from each other's memory */
    AK_COMM_ALGO_HIER_PIPE = 6,  /* hierarchical, chunked so its phases overlap */
    AK_COMM_ALGO_COUNT_
} ak_comm_algo;

/* The collectives whose algorithm the cost model chooses per call. */
typedef enum ak_comm_coll {
    AK_COMM_COLL_ALLREDUCE = 0,
    AK_COMM_COLL_BROADCAST = 1,
    AK_COMM_COLL_REDUCE = 2,
    AK_COMM_COLL_ALLGATHER = 3, /* and allgatherv */
    AK_COMM_COLL_REDUCE_SCATTER = 4,
    AK_COMM_COLL_COUNT_
} ak_comm_coll;

/* Versioned options: initialize with AK_COMM_CONFIG_INIT, then set what you need. Fields
 * left at their "unset" value come from the environment (docs/configuration.md), then
 * from rank discovery (ak launch, torchrun, Open MPI, Slurm). */
typedef struct ak_comm_config {
    uint32_t struct_size;         /* sizeof(ak_comm_config), for compatibility */
    int rank, world_size;         /* -1: discover */
    const char *store_addr;       /* NULL: AK_MASTER_ADDR / MASTER_ADDR */
    int store_port;               /* 0: AK_MASTER_PORT / MASTER_PORT */
    const char *host_id;          /* NULL: hostname + network namespace */
    int nstreams;                 /* 0: AK_COMM_NSTREAMS */
    ak_comm_transport transport;  /* AUTO: AK_COMM_TRANSPORT */
    ak_comm_algo algo;            /* AUTO: AK_COMM_ALGO, else cost model */
    int timeout_ms;               /* 0: AK_COMM_TIMEOUT */
    const char *tuning_file;      /* NULL: AK_COMM_TUNING or calibrate */
} ak_comm_config;

#define AK_COMM_CONFIG_INIT                                                              \
    {sizeof(ak_comm_config), -1, -1, NULL, 0, NULL, 0, AK_COMM_TRANSPORT_AUTO,            \
     AK_COMM_ALGO_AUTO, 0, NULL}

/* Joins the world described by cfg (NULL = all from the environment). Blocks until every
 * rank has joined or the timeout passes. */
AK_API ak_status ak_comm_init(const ak_comm_config *cfg, ak_comm **out);
/* A world of `world_size` ranks as threads of this process (in-memory store): fills
 * comms[0..world_size); comms[r] must then be used by one thread each. cfg may be NULL;
 * its rank/world/store fields are ignored. */
AK_API ak_status ak_comm_init_local(int world_size, const ak_comm_config *cfg, ak_comm **comms);
/* Frees a communicator (waits for its in-flight async ops first). NULL is a no-op. */
AK_API void ak_comm_free(ak_comm *comm);

AK_API ak_status ak_comm_rank(const ak_comm *comm, int *rank);
AK_API ak_status ak_comm_size(const ak_comm *comm, int *size);
/* Ranks on this rank's host and this rank's index among them; hosts in the world and
 * this host's index (hosts numbered in order of their lowest rank). */
AK_API ak_status ak_comm_local(const ak_comm *comm, int *local_rank, int *local_size);
AK_API ak_status ak_comm_hosts(const ak_comm *comm, int *host_index, int *host_count);

/* Collective: ranks with the same color form a new communicator, ordered by (key, rank).
 * color < 0: this rank joins none (*out = NULL). */
AK_API ak_status ak_comm_split(ak_comm *comm, int color, int key, ak_comm **out);

/* ---- collectives (blocking). sendbuf == recvbuf (or AK_IN_PLACE) is in place. ---------
 * AK_IN_PLACE follows MPI: passed as sendbuf, the input is read from recvbuf (allreduce,
 * reduce_scatter: all of it; allgather(v): this rank's block at its place; alltoall(v):
 * the blocks to send, by the receive layout). Rooted calls are in place at the root only:
 * reduce and gather with sendbuf = AK_IN_PLACE there (the root's input, or its block at
 * root × count, already in recvbuf); scatter with recvbuf = AK_IN_PLACE there (the root's
 * block stays in sendbuf). Buffers a rank does not use are ignored (reduce and gather:
 * recvbuf off the root; scatter: sendbuf off the root) and may be NULL. AK_IN_PLACE
 * anywhere else fails with AK_ERR_INVALID_ARG naming the argument. */

#define AK_IN_PLACE ((const void *)1)

AK_API ak_status ak_comm_allreduce(ak_comm *comm, const void *sendbuf, void *recvbuf,
                                   size_t count, ak_dtype dtype, ak_reduce_op op);
/* Adasum (Maleki et al. 2020): the pairwise rule adasum(a, b) = (1 − a·b/(2‖a‖²))·a +
 * (1 − a·b/(2‖b‖²))·b applied over a fixed binary tree of the ranks (docs/training.md,
 * "Adasum"), dot products and norms per tensor, in f64. The buffer is count elements of
 * f32 or f64 (other dtypes: AK_ERR_UNSUPPORTED) made of nsegments tensors of
 * segment_counts[i] elements, back to back, summing to count; nsegments 0 (segment_counts
 * may be NULL): one tensor. Every rank gets the same bits. segment_counts is read during
 * the call only. */
AK_API ak_status ak_comm_allreduce_adasum(ak_comm *comm, const void *sendbuf, void *recvbuf,
                                          size_t count, ak_dtype dtype,
                                          const size_t *segment_counts, size_t nsegments);
/* recvbuf is only written (and only needed) on root; sendbuf AK_IN_PLACE only at root */
AK_API ak_status ak_comm_reduce(ak_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
                                ak_dtype dtype, ak_reduce_op op, int root);
AK_API ak_status ak_comm_broadcast(ak_comm *comm, void *buf, size_t count, ak_dtype dtype,
                                   int root);
/* recvbuf holds size × count elements, rank r's at r × count */
AK_API ak_status ak_comm_allgather(ak_comm *comm, const void *sendbuf, void *recvbuf,
                                   size_t count, ak_dtype dtype);
/* rank r contributes counts[r] elements, placed at displs[r] in recvbuf */
AK_API ak_status ak_comm_allgatherv(ak_comm *comm, const void *sendbuf, size_t sendcount,
                                    void *recvbuf, const size_t *counts, const size_t *displs,
                                    ak_dtype dtype);
/* sendbuf holds size × recvcount elements; rank r gets the reduction of block r */
AK_API ak_status ak_comm_reduce_scatter(ak_comm *comm, const void *sendbuf, void *recvbuf,
                                        size_t recvcount, ak_dtype dtype, ak_reduce_op op);
/* block r (count elements) of sendbuf goes to rank r; recvbuf block r comes from rank r */
AK_API ak_status ak_comm_alltoall(ak_comm *comm, const void *sendbuf, void *recvbuf,
                                  size_t count, ak_dtype dtype);
AK_API ak_status ak_comm_alltoallv(ak_comm *comm, const void *sendbuf, const size_t *sendcounts,
                                   const size_t *sdispls, void *recvbuf,
                                   const size_t *recvcounts, const size_t *rdispls,
                                   ak_dtype dtype);
AK_API ak_status ak_comm_gather(ak_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
                                ak_dtype dtype, int root);
AK_API ak_status ak_comm_scatter(ak_comm *comm, const void *sendbuf, void *recvbuf,
                                 size_t count, ak_dtype dtype, int root);
AK_API ak_status ak_comm_barrier(ak_comm *comm);
/* point to point; messages between a pair arrive in the order sent; the counts must match */
AK_API ak_status ak_comm_send(ak_comm *comm, const void *buf, size_t count, ak_dtype dtype,
                              int peer);
AK_API ak_status ak_comm_recv(ak_comm *comm, void *buf, size_t count, ak_dtype dtype, int peer);

/* ---- async: the same operations run on the communicator's progress thread, in the
 * order submitted. Buffers must stay valid until the request completes. -------------- */

AK_API ak_status ak_comm_iallreduce(ak_comm *comm, const void *sendbuf, void *recvbuf,
                                    size_t count, ak_dtype dtype, ak_reduce_op op,
                                    ak_comm_request **req);
AK_API ak_status ak_comm_ibroadcast(ak_comm *comm, void *buf, size_t count, ak_dtype dtype,
                                    int root, ak_comm_request **req);
AK_API ak_status ak_comm_iallgather(ak_comm *comm, const void *sendbuf, void *recvbuf,
                                    size_t count, ak_dtype dtype, ak_comm_request **req);
/* counts and displs are read when the operation runs: keep them valid until it completes */
AK_API ak_status ak_comm_iallgatherv(ak_comm *comm, const void *sendbuf, size_t sendcount,
                                     void *recvbuf, const size_t *counts, const size_t *displs,
                                     ak_dtype dtype, ak_comm_request **req);
AK_API ak_status ak_comm_ireduce_scatter(ak_comm *comm, const void *sendbuf, void *recvbuf,
                                         size_t recvcount, ak_dtype dtype, ak_reduce_op op,
                                         ak_comm_request **req);
AK_API ak_status ak_comm_ialltoall(ak_comm *comm, const void *sendbuf, void *recvbuf,
                                   size_t count, ak_dtype dtype, ak_comm_request **req);
/* *done = 1 once complete; then the request still needs ak_comm_wait to be released. */
AK_API ak_status ak_comm_test(ak_comm_request *req, int *done);
/* Waits, returns the operation's status and frees the request. */
AK_API ak_status ak_comm_wait(ak_comm_request *req);

/* ---- introspection ---------------------------------------------------------------- */

AK_API const char *ak_comm_algo_name(ak_comm_algo algo);
/* The algorithm the cost model (or AK_COMM_ALGO) picks for an allreduce of `bytes`. */
AK_API ak_status ak_comm_choose_algo(const ak_comm *comm, size_t bytes, ak_comm_algo *out);
/* The algorithm a call of `coll` moving `bytes` runs: the forced one mapped to coll (see
 * ak_comm_algo), or the cost model's choice. bytes is the message for allreduce,
 * broadcast and reduce, all ranks' blocks together for allgather(v), the whole input
 * for reduce_scatter. *out is never AUTO. */
AK_API ak_status ak_comm_choose_coll_algo(const ak_comm *comm, ak_comm_coll coll, size_t bytes,
                                          ak_comm_algo *out);

/* ---- elastic jobs ---------------------------------------------------------------------
 * Under `ak launch --min-np/--max-np/--host-discovery-script` (see docs/elastic.md) the
 * launcher serves the rendezvous (AK_ELASTIC_ADDR, AK_ELASTIC_PORT, AK_ELASTIC_ID): each
 * ak_comm_init joins the next round it forms and takes its rank and world size from it,
 * so a job survives lost workers and grows or shrinks with its hosts between rounds. */

/* *enabled: 1 in an elastic job. *round: the rendezvous round this process last joined
 * (-1 before its first). *removed: 1 when the launcher took this worker out of the job at
 * its last ak_comm_init (its host left or the job is at --max-np); that call failed with
 * AK_ERR_REMOTE and the worker should exit with status 0. Any pointer may be NULL. */
AK_API ak_status ak_elastic_status(int *enabled, int *round, int *removed);
/* Asks the launcher whether its host set changed since this process joined its round:
 * *changed = 1 if so; *removed_only = 1 when hosts only left (the ranks that stay hold
 * the training state already, so a reset may skip syncing it). Outside an elastic job
 * both are 0. Fails with AK_ERR_REMOTE when the launcher cannot be reached. */
AK_API ak_status ak_elastic_hosts_changed(int *changed, int *removed_only);

#ifdef __cplusplus
}
#endif
#endif /* ACCELKIT_COMM_H */
