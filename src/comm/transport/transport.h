/* Point-to-point transports behind a communicator (each a vtable + context).
 *
 * A transport connects this rank to a set of peers and moves byte messages. Algorithms
 * never talk to a transport directly: they post ak__p2p operations through the
 * communicator (algo/p2p.h), which routes each peer to its transport (shm inside a host,
 * tcp across). Contract:
 * - post() queues an operation and returns at once; progress() moves data of every
 *   queued operation, blocking up to timeout_us for I/O (0 = do what is possible now,
 *   < 0 = until every queued op is done or the stall limit passes).
 * - A failed transport stays failed: post() then completes the op at once with the
 *   failure status (and returns it), and every pending op completes with it.
 * - Operations to one peer in one direction complete in posting order and match the
 *   peer's operations in the same order (no wildcards).
 * - Every message carries its tag and length on the wire; a receive whose tag or length
 *   differs from the matching send completes with AK_ERR_MISMATCH (message naming the
 *   peer and both values), and the transport is then failed.
 * - A lost peer (EOF, reset, dead process) completes every pending and future operation
 *   with AK_ERR_REMOTE naming the peer rank; progress() returns that status too. The
 *   first peer lost, and how, is also written to *setup->lost (when not NULL): a
 *   transport may fail ops of other peers with it (shm fails them all), so the ops'
 *   peers cannot tell the communicator which rank to trace (comm.c names the rank
 *   actually lost).
 * - No allocation per message on the fast path. */
#ifndef AK_COMM_TRANSPORT_H
#define AK_COMM_TRANSPORT_H

#include <stddef.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#include "accelkit/ak.h"
#include "comm/bootstrap/store.h"

/* A communicator's transports: one inside a host, one across hosts. */
enum { AK_COMM_TP_INTRA = 0, AK_COMM_TP_INTER = 1, AK_COMM_TP_COUNT = 2 };

#define AK_COMM_MAX_STREAMS 16

typedef struct ak__p2p {
    /* set by the poster */
    int peer;      /* communicator rank */
    int is_send;
    void *buf;     /* const for sends */
    size_t bytes;
    uint64_t tag;  /* must equal the peer's tag for this message */
    /* set by the transport */
    int complete;
    ak_status status;
    /* transport-private progress state */
    size_t done_bytes;
    size_t stream_done[AK_COMM_MAX_STREAMS];
    int stage;
    struct ak__p2p *next;
} ak__p2p;

typedef struct ak__transport_i {
    const char *name;
    ak_status (*post)(void *ctx, ak__p2p *op);
    ak_status (*progress)(void *ctx, int timeout_us);
    void (*destroy)(void *ctx);
} ak__transport_i;

typedef struct ak__transport {
    const ak__transport_i *vt; /* NULL = none */
    void *ctx;
} ak__transport;

/* What every transport needs to connect. */
typedef struct ak__transport_setup {
    ak__store *store;      /* for exchanging addresses */
    const char *prefix;    /* unique per communicator: keys live under it */
    int rank, world_size;  /* communicator rank and size */
    const int *peers;      /* ranks this transport must reach (sorted, without rank) */
    int npeers;
    int nstreams;          /* tcp: connections per peer, 1..AK_COMM_MAX_STREAMS */
    int timeout_ms;        /* connect and I/O stall limit */
    const char *bind_addr; /* tcp: listen address (NULL = all interfaces) */
    const char *advertise_addr; /* tcp: the address peers dial when bind_addr is NULL */
    struct ak__lost *lost; /* where to report the first peer lost; NULL = not wanted */
} ak__transport_setup;

/* How a peer was lost, as far as a transport can tell. */
typedef enum ak__lost_how {
    AK_LOST_CLOSED = 1, /* it closed its end, or stopped answering: it may have failed first
                         * (then it recorded why before closing) or died */
    AK_LOST_FAILED = 2, /* it announced its own failure (a shared state word) and lives: it
                         * records why right after */
    AK_LOST_GONE = 3,   /* its process is gone: it is the rank lost */
} ak__lost_how;

typedef struct ak__lost {
    int peer; /* -1 = none yet */
    ak__lost_how how;
} ak__lost;

/* Reports rank as the lost peer unless one was reported before. */
static inline void ak__transport_lost(ak__lost *lost, int rank, ak__lost_how how) {
    if (lost && lost->peer < 0) lost->peer = rank, lost->how = how;
}

ak_status ak__tcp_transport_create(const ak__transport_setup *setup, ak__transport *out);
ak_status ak__shm_transport_create(const ak__transport_setup *setup, ak__transport *out);
/* Threads of one process (ak_comm_init_local): direct copies between threads. */
ak_status ak__mem_transport_create(const ak__transport_setup *setup, ak__transport *out);

/* Helpers for memory shared between processes, defined in shm.c and also used by the
 * shared-memory direct allreduce (algo/shm_direct.c). */
/* 1 when no process has this pid any more, or it is a zombie nobody reaped yet (a
 * SIGKILLed peer still answers kill(pid, 0) until then). */
int ak__pid_gone(pid_t pid);
/* Futex wait/wake on a word in a shared mapping (not FUTEX_*_PRIVATE). The wait returns
 * after at most ns; every outcome (woken, word moved, timeout, signal) means "look again". */
void ak__shared_futex_wait(_Atomic uint32_t *word, uint32_t expected, uint64_t ns);
void ak__shared_futex_wake_all(_Atomic uint32_t *word);
/* A name for a new segment, "/accelkit-KIND-PIDNS-PID-RANDOM": 128 random bits from
 * getrandom (unguessable: no pid or counter stands in when randomness fails, the call
 * does), then the creator's pid namespace and pid, which let ak__shm_sweep_dead find it
 * if the creator dies before every peer mapped (and unlinked) it. */
ak_status ak__shm_segment_name(char *name, size_t cap, const char *kind);
/* Unlinks the kit's segments (this user's, in /dev/shm) whose creator, in this pid
 * namespace, is gone: what a rank killed during set-up left behind. Called before every
 * segment is created. */
void ak__shm_sweep_dead(void);

static inline void ak__transport_destroy(ak__transport *t) {
    if (t->vt) t->vt->destroy(t->ctx);
    t->vt = NULL;
    t->ctx = NULL;
}

#endif /* AK_COMM_TRANSPORT_H */
