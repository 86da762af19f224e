/* Internal structures of the training runtime, shared by its parts:
 *   train_api.c     public calls: validation, handles, waiting, process-set requests
 *   train_cycle.c   the background thread: per-cycle state exchange, response cache,
 *                   replicated coordinator (negotiation), stall inspector
 *   train_exec.c    running responses: fusion, compression, collectives, update thread
 *   train_stream.c  AK_FUSION_STREAMS: fused allreduces in flight on several channels
 *   train_heap.c    AK_TRAIN_KEEP_HEAP: glibc's malloc keeps the step's pages mapped
 *
 * Threads: user threads enqueue into a process set's `incoming` list under train->lock;
 * the background thread owns everything else in a process set; the update thread runs
 * optimizer steps handed over by the background thread; with fusion streams, each stream
 * thread runs the fused allreduces the background thread queued on it, on its own
 * communicator and scratch. An entry completes exactly once
 * (complete_entry) and is freed by ak_train_release. */
#ifndef AK_TRAIN_INTERNAL_H
#define AK_TRAIN_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "accelkit/train.h"
#include "train/compress/compress.h"

static inline int ak__is_float(ak_dtype d) {
    return d == AK_DTYPE_F32 || d == AK_DTYPE_F64 || d == AK_DTYPE_F16 || d == AK_DTYPE_BF16;
}

/* A reduce op's name in messages, Adasum included. */
static inline const char *ak__op_name(ak_reduce_op op) {
    return op == AK_TRAIN_REDUCE_ADASUM ? "adasum" : ak_reduce_op_name(op);
}

/* Internal op kinds, negotiated like user ops on the global set. */
enum {
    AK__KIND_PSET_ADD = AK_TRAIN_OP_COUNT_, /* splits = member ranks */
    AK__KIND_PSET_REMOVE,                   /* root = process-set id */
    AK__KIND_COUNT_
};

#define AK__NAME_MAX 512

/* What every rank must agree on for one op (the cache key besides the name). */
typedef struct ak__signature {
    int kind;
    ak_dtype dtype;
    ak_reduce_op op;
    ak_train_compression compression;
    int ndim;
    int64_t shape[AK_TRAIN_MAX_DIMS];
    double prescale, postscale;
    int root;
    int64_t group; /* 0: not grouped; else a hash of the members' names (train_api.c) */
    int group_size;
    int nsplits;
    int64_t *splits; /* owned copy (alltoall splits, process-set ranks) */
} ak__signature;

/* One operation submitted on this rank. */
typedef struct ak__entry {
    ak_train_handle handle;
    char name[AK__NAME_MAX];
    ak__signature sig;
    ak_train_op op; /* the caller's op (pointers); name points at entry->name */
    ak_dgc_config dgc;
    size_t count;   /* elements */
    int pset;
    uint64_t enqueue_ns;
    /* background-thread state */
    int cache_slot; /* -1: goes through full negotiation */
    int sent;       /* request already sent to the coordinator */
    int stall_demoted;
    struct ak__entry *next; /* in the process set's incoming or pending list */
    /* result (guarded by train->lock) */
    int done;
    ak_status status;
    char *error;
    void *result; /* runtime-allocated output */
    int out_ndim;
    int64_t out_shape[AK_TRAIN_MAX_DIMS];
    int64_t *recv_splits;
    int nrecv_splits;
    int join_last_rank;
    struct ak__entry *all_next; /* every live entry, for handle lookup */
} ak__entry;

/* One cached response: the signature every rank agreed on for a name. */
typedef struct ak__cache_slot {
    int used;
    char name[AK__NAME_MAX];
    ak__signature sig;
} ak__cache_slot;

/* The coordinator's record of a name some rank requested (replicated on every rank). */
typedef struct ak__table_row {
    char name[AK__NAME_MAX];
    ak__signature *req; /* per rank of the set; req[r].kind < 0: not yet requested */
    uint64_t first_ns;
    int stall_warned;
    struct ak__table_row *next;
} ak__table_row;

/* A response: one op all ranks run now (or fail with `error`). */
typedef struct ak__response {
    char name[AK__NAME_MAX];
    ak__signature sig;
    int64_t *dim0; /* allgather: rows per rank */
    ak_status error_status;
    char *error;
    ak__entry *entry; /* this rank's entry (NULL: joined, or not submitted) */
} ak__response;

typedef struct ak__dgc_named {
    char name[AK__NAME_MAX];
    ak_dgc_state *state;
    struct ak__dgc_named *next;
} ak__dgc_named;

typedef struct ak__pset {
    int id, active;
    ak_comm *comm; /* global comm for set 0, owned split otherwise; NULL: not a member */
    int rank, size;
    ak__entry *incoming, *incoming_tail; /* user threads append (train->lock) */
    ak__entry *pending;                  /* background thread only */
    ak__cache_slot *cache;
    int cache_used;        /* highest used slot + 1 */
    unsigned char *invalid; /* local invalidation marks per slot */
    ak__table_row *table, *table_tail;
    unsigned char *joined; /* per rank of the set */
    int last_joined;
    ak__dgc_named *dgc;
} ak__pset;

#define AK__MAX_PSETS 64

/* Scratch of one thread that runs allreduces (the background thread, each stream). */
typedef struct ak__scratch {
    void *fusion;
    size_t fusion_cap;
    void *wire;
    size_t wire_cap;
    void *zmask; /* a byte per block: non-zero on this rank, then on any */
    size_t zmask_cap;
    void *segs; /* Adasum: the fused tensors' element counts (size_t each) */
    size_t segs_cap; /* bytes */
} ak__scratch;

/* Where a collective runs: a communicator and the scratch of the thread that uses it. */
typedef struct ak__chan {
    ak_comm *comm;
    int size;
    ak__scratch *sc;
} ak__chan;

/* One fused allreduce queued on a stream: copies of its responses (entries owned). */
typedef struct ak__stream_job {
    ak__response *r;
    int m;
    struct ak__stream_job *next;
} ak__stream_job;

/* A fusion stream (train_stream.c): a thread, its own communicator (a split of the
 * global one: its own connections) and scratch, and a queue the background thread fills
 * in negotiated order, the same on every rank. */
typedef struct ak__stream {
    struct ak_train *t;
    int index;
    ak__chan chan;
    ak__scratch sc;
    pthread_t thread;
    int started;
    pthread_mutex_t lock;
    pthread_cond_t changed;
    ak__stream_job *head, *tail;
    int stop; /* drain and exit */
} ak__stream;

#define AK__MAX_STREAMS 8

typedef struct ak__update_item {
    ak__entry *entry;
    struct ak__update_item *next;
} ak__update_item;

struct ak_train {
    ak_comm *comm;
    int owns_comm;
    int rank, size;
    double cycle_ms;
    size_t fusion_threshold;
    int zero_blocks; /* elide all-zero blocks from f32 sum/average allreduces */
    int cache_capacity;
    double stall_check_s, stall_shutdown_s;
    char stop_msg[512];  /* why the background thread stopped (stall shutdown, a rank left) */
    struct ak__autotune *autotune; /* HOROVOD_AUTOTUNE's search (NULL: off) */
    int timeline;

    pthread_mutex_t lock;
    pthread_cond_t changed; /* an entry completed, or new work arrived */
    ak__pset *psets[AK__MAX_PSETS];
    int npsets;
    ak__entry *all; /* live entries */
    ak_train_handle next_handle;
    long internal_seq[AK__MAX_PSETS];
    int shutdown_requested;
    ak_status failed; /* AK_OK until a fatal error */
    char failed_msg[512];
    int bg_exited;

    pthread_t bg_thread, update_thread;
    int bg_started, update_started;
    ak__update_item *uq_head, *uq_tail;
    int uq_stop;
    pthread_cond_t uq_changed;

    /* fusion and compression scratch (background thread) */
    ak__scratch scratch;

    /* AK_FUSION_STREAMS (train_stream.c); nstreams 0: allreduces run on the background
     * thread. The fields below streams belong to the background thread. */
    int nstreams;
    int fusion_adaptive;
    ak__stream *streams;
    uint64_t stream_next;  /* fused buffers dispatched: the next goes to this % nstreams */
    double arrival_ema;    /* allreduce bytes negotiated per cycle (moving average) */
    size_t stream_buffer;  /* the buffer size of the last dispatch */
    uint64_t fusion_digest; /* hash of every dispatch decision (tests compare ranks) */
    ak_status stream_failed; /* guarded by lock: first failure of a stream */
    char stream_msg[512];
    _Atomic int in_flight, in_flight_peak; /* streams inside a collective */

    _Atomic uint64_t st_cycles, st_negotiations, st_cache_hits, st_fused, st_collectives,
        st_negotiate_ns, st_fusion_ns, st_comm_ns, st_update_ns, st_negotiate_cpu_ns,
        st_zero_elided;
};

/* train_api.c */
void ak__train_complete(ak_train *t, ak__entry *e, ak_status st, const char *msg);
size_t ak__sig_elements(const ak__signature *s);
int ak__sig_equal(const ak__signature *a, const ak__signature *b);
void ak__sig_free(ak__signature *s);
ak_status ak__sig_copy(ak__signature *dst, const ak__signature *src);

/* train_cycle.c */
void *ak__train_bg_main(void *arg);
ak_status ak__pset_create(ak_train *t, int id, ak_comm *comm, ak__pset **out);
void ak__pset_free(ak__pset *p);
/* Fails every entry of the set (pending and incoming) with st/msg. */
void ak__pset_fail_all(ak_train *t, ak__pset *p, ak_status st, const char *msg);

/* ---- request wire format (train_wire.c) -------------------------------------------- */

/* Serializes this rank's unsent uncached entries (marking them sent) into *out (malloc). */
ak_status ak__encode_requests(ak__pset *p, unsigned char **out, size_t *len);
/* Reads one rank's message: its request count, then each request. A short or malformed
 * message sets bad (the count reads 0; a request fails with AK_ERR_INTERNAL). */
typedef struct ak__reader {
    const unsigned char *p, *end;
    int bad;
} ak__reader;
uint32_t ak__read_request_count(ak__reader *r);
/* name holds AK__NAME_MAX bytes; s->splits is malloc'ed when the request has splits. */
ak_status ak__decode_request(ak__reader *r, char *name, ak__signature *s);

/* count elements of elem bytes whose count came from other ranks: *bytes, or
 * AK_ERR_MISMATCH (naming what) when negative, overflowing or above AK_COMM_MAX_BYTES. */
ak_status ak__wire_bytes(const char *what, int64_t count, size_t elem, size_t *bytes);

/* Every rank's byte message, lengths may differ: *all holds them in rank order, (*counts)
 * has 2 × size entries, the counts then the displacements. The caller frees both. */
ak_status ak__allgather_bytes(ak_comm *comm, int size, const void *mine, size_t len,
                              unsigned char **all, size_t **counts);

/* train_exec.c */
/* Runs responses[0..n) in order, fusing compatible allreduces. A failed collective
 * returns its status (fatal for the runtime); per-op errors complete their entries. */
ak_status ak__exec_responses(ak_train *t, ak__pset *p, ak__response *r, int n);
void *ak__train_update_main(void *arg);
void ak__exec_free_scratch(ak_train *t);

/* AK_TRAIN_KEEP_HEAP (train_heap.c): 1 when glibc's malloc was set to keep its heap;
 * ak__train_heap_advise, called every cycle, advises huge pages over the heap's growth. */
int ak__train_keep_heap(void);
void ak__train_heap_advise(void);

/* The allreduce of the fused responses g[0..m) on ch, completing their entries. */
ak_status ak__run_allreduce(ak_train *t, ak__chan *ch, ak__response *g, int m);
void ak__scratch_free(ak__scratch *sc);

/* train_stream.c: AK_FUSION_STREAMS */
/* Splits the global communicator once per stream and starts the threads (nstreams > 0). */
ak_status ak__streams_start(ak_train *t);
/* 1 when the fused allreduces of p's signature s go to the streams. */
int ak__streams_take(const ak_train *t, const ak__pset *p, const ak__signature *s);
/* The bytes per fused buffer for this cycle's responses r[0..n) of p (the adaptive size
 * when on; it learns from the global set's responses only). */
size_t ak__streams_buffer_bytes(ak_train *t, const ak__pset *p, const ak__response *r, int n);
/* Queues the fused allreduce g[0..m) on the next stream; on success the entries are the
 * stream's (g[i].entry set NULL). */
ak_status ak__streams_dispatch(ak_train *t, ak__response *g, int m);
/* A stream's failure (AK_OK: none), its message into msg. */
ak_status ak__streams_failed(ak_train *t, char *msg, size_t cap);
/* Drains (runs, or fails after a failure) the queued jobs, stops and frees the streams. */
void ak__streams_stop(ak_train *t);

/* train_autotune.c: HOROVOD_AUTOTUNE (background thread) */
typedef struct ak__autotune ak__autotune;
ak_status ak__autotune_start(ak_train *t, const ak_train_config *cfg);
ak_status ak__autotune_update(ak_train *t, ak__pset *p, const ak__response *r, int n);
void ak__autotune_free(ak_train *t);
/* 1 when the kernel gives transparent huge pages only to advised memory (THP "madvise"). */
int ak__train_huge_pages_on_advice(void);

#endif /* AK_TRAIN_INTERNAL_H */
