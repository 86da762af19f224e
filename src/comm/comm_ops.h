/* One collective call as data: what the blocking API runs at once and the async API
 * queues for the progress thread (comm_async.c). */
#ifndef AK_COMM_COMM_OPS_H
#define AK_COMM_COMM_OPS_H

#include "comm/comm_internal.h"

typedef enum ak__coll_kind {
    AK_COLL_ALLREDUCE = 1,
    AK_COLL_REDUCE,
    AK_COLL_BROADCAST,
    AK_COLL_ALLGATHER,
    AK_COLL_ALLGATHERV,
    AK_COLL_REDUCE_SCATTER,
    AK_COLL_ALLTOALL,
    AK_COLL_ALLTOALLV,
    AK_COLL_GATHER,
    AK_COLL_SCATTER,
    AK_COLL_BARRIER,
    AK_COLL_SEND,
    AK_COLL_RECV,
    AK_COLL_ADASUM, /* allreduce with the Adasum rule (algo/adasum.c) */
} ak__coll_kind;

typedef struct ak__coll {
    ak__coll_kind kind;
    const void *sendbuf;
    void *recvbuf;
    size_t count;   /* per-rank count (allgather/alltoall/gather/scatter: per block) */
    ak_dtype dtype;
    ak_reduce_op op;
    int root;       /* root, or the peer of send/recv; adasum: tensors in counts */
    const size_t *counts, *displs;   /* allgatherv; alltoallv: send side; adasum: the
                                        tensors' element counts (NULL: one tensor) */
    const size_t *rcounts, *rdispls; /* alltoallv: receive side */
} ak__coll;

/* Runs the call on the calling thread (arguments already validated). */
ak_status ak__coll_run(ak_comm *comm, const ak__coll *call);
/* The same with the algorithm given instead of chosen (calibration, tests): mapped to the
 * call's collective as a forced one is (ak__comm_pick); AUTO chooses as usual. */
ak_status ak__coll_run_algo(ak_comm *comm, const ak__coll *call, ak_comm_algo algo);
/* Queues the call on the progress thread (started on first use). */
ak_status ak__comm_async_submit(ak_comm *comm, const ak__coll *call, ak_comm_request **req);

#endif /* AK_COMM_COMM_OPS_H */
