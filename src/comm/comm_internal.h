/* The communicator's internals, shared by comm.c (setup, routing, dispatch), the
 * operations layer, the cost model and the async engine. The algorithms in algo/ see
 * only the ak__algo_ctx it hands them. */
#ifndef AK_COMM_COMM_INTERNAL_H
#define AK_COMM_COMM_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include "accelkit/comm.h"
#include "comm/algo/algo.h"
#include "comm/bootstrap/store.h"
#include "comm/transport/transport.h"

/* One link class (inside a host, across hosts): one-way message time measured at a few
 * sizes, interpolated linearly between them (α–β within each segment). Several points
 * rather than one α and β because real paths have regimes: a rate limiter's burst lets
 * small messages through at line speed, and caches speed up small copies. */
#define AK_LINK_POINTS 3
typedef struct ak__link_model {
    double bytes[AK_LINK_POINTS]; /* ascending */
    double us[AK_LINK_POINTS];    /* one-way time of a message of bytes[i] */
} ak__link_model;

/* Sizes at which the cost model times every algorithm of every collective it chooses
 * for (comm_calibrate.c). */
#define AK_COMM_MEASURED_SIZES 4

typedef struct ak__async ak__async; /* progress thread and its queue (comm_async.c) */

struct ak_comm {
    int rank, size;
    int local_rank, local_size;  /* on this rank's host */
    int host_index, host_count;
    int *host_of;                /* [size]: host index of each rank */
    int *local_index_of;         /* [size]: index of each rank among its host's ranks */
    int *same_host_ranks;        /* ranks on this host, ascending (local_size entries) */
    int *all_ranks;              /* [size]: 0, 1, ..., size-1 (the world group) */

    ak__store *store;
    ak__store_server *store_server; /* rank 0 of a world communicator */
    char prefix[128];               /* store key prefix, unique per communicator */

    ak__transport transports[AK_COMM_TP_COUNT];
    uint8_t *route;                 /* [size]: AK_COMM_TP_* used to reach each rank */

    ak_comm_config config;          /* resolved: no "unset" fields left */
    ak__link_model links[AK_COMM_TP_COUNT];
    /* bytes per second all ranks of a host send at once (each to a neighbour on the same
     * host), GB/s; INFINITY when not measured (one rank per host, threads, old tuning
     * files): a host whose ranks share cores moves less than a link alone does times the
     * links in use (comm_model.c) */
    double host_gbps;
    /* measured time per collective and algorithm at comm_calibrate.c's sizes; 0 = none */
    double algo_measured_us[AK_COMM_COLL_COUNT_][AK_COMM_ALGO_COUNT_][AK_COMM_MEASURED_SIZES];
    uint64_t seq;                   /* collectives issued: part of every tag */
    ak_status failed;               /* first failure; the communicator is unusable after */
    ak__lost lost;                  /* the peer a failure was first seen on (peer -1 =
                                     * none), as transports and algorithms report it */

    void *scratch;                  /* algorithm scratch, grown on demand, never shrunk */
    size_t scratch_bytes;
    void *work;                     /* operation-level copy (reduce, reduce_scatter) */
    size_t work_bytes;
    size_t *counts[4];              /* [size] each: uniform counts/displacements */

    ak__async *async;               /* created on first async call */
    int split_count;                /* ak_comm_split calls, for child prefixes */
    int threads_local;              /* ranks are threads of one process (mem transport) */
    void *shm_direct;               /* shm direct allreduce segment (algo/shm_direct.c) */
    ak__algo_ctx algo;              /* what the algorithms see (ak__comm_algo) */
};

/* The algorithms' view of c, refreshed from c's fields; valid while c lives. */
const ak__algo_ctx *ak__comm_algo(ak_comm *c);
/* Tag of the next collective: the sequence number plus a digest of what the caller
 * asked for (kind, count, dtype, op, root), so mismatched calls fail on the wire. */
uint64_t ak__comm_next_tag(ak_comm *comm, int kind, size_t count, int dtype, int op, int root);

/* Scratch of at least `bytes` (64-byte aligned), valid until the next call. The
 * algorithms own `scratch`; the operations layer (comm_ops.c) owns `work`. */
ak_status ak__comm_scratch(ak_comm *comm, size_t bytes, void **out);
ak_status ak__comm_work(ak_comm *comm, size_t bytes, void **out);
/* Marks the communicator failed (first status wins) and returns st. A loss (AK_ERR_REMOTE
 * or AK_ERR_TIMEOUT seen on comm->lost.peer) is traced to the rank actually lost and the
 * error names it (see comm.c); every failure is recorded in the store for the peers. */
ak_status ak__comm_fail(ak_comm *comm, ak_status st);
/* Stops the progress thread after its queued ops ran (comm_async.c); no-op without one. */
void ak__comm_async_stop(ak_comm *comm);

#endif /* AK_COMM_COMM_INTERNAL_H */
