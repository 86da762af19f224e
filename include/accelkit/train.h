/* accelkit training runtime: the engine behind the Horovod API (python/accelkit/torch).
 *
 * Any thread enqueues named operations (allreduce, allgather, broadcast, alltoall,
 * reducescatter, barrier, join) and gets a handle. A background thread negotiates, every
 * cycle, which names are ready on every rank of a process set, fuses ready allreduces of
 * the same kind into one buffer, compresses it if asked, runs the collective and, when a
 * tensor carries an optimizer update, hands it to an update thread so parameters are
 * updated while later buckets still communicate. Every rank must eventually submit the
 * same names with matching dtype, shape, op and root; they may submit in any order.
 *
 * Errors: a mismatch fails the handle on every rank with AK_ERR_MISMATCH naming the tensor
 * and the ranks; a lost peer fails every pending and later handle with AK_ERR_REMOTE or
 * AK_ERR_TIMEOUT. ak_train_wait leaves the handle's message in ak_last_error(). */
#ifndef ACCELKIT_TRAIN_H
#define ACCELKIT_TRAIN_H

#include "ak.h"
#include "comm.h"
#include "kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- fused optimizers: one pass over flat f32 buffers -------------------------------- */

typedef enum ak_optim_kind {
    AK_OPTIM_SGD = 0,   /* momentum, dampening, Nesterov, weight decay (torch.optim.SGD) */
    AK_OPTIM_ADAM = 1,  /* L2 weight decay added to the gradient (torch.optim.Adam) */
    AK_OPTIM_ADAMW = 2, /* decoupled weight decay (torch.optim.AdamW) */
    AK_OPTIM_LAMB = 3,  /* Adam direction scaled by the layer trust ratio ||w|| / ||update|| */
} ak_optim_kind;

typedef struct ak_optim_config {
    uint32_t struct_size; /* sizeof(ak_optim_config) */
    ak_optim_kind kind;
    /* doubles like the Python floats torch derives its constants from (1 - beta2, lr·wd) */
    double lr, weight_decay;
    double momentum, dampening; /* SGD */
    int nesterov;               /* SGD */
    double beta1, beta2, eps;   /* Adam, AdamW, LAMB */
    double grad_scale;          /* the gradient is multiplied by this first (1 = as is) */
} ak_optim_config;

#define AK_OPTIM_CONFIG_INIT                                                             \
    {sizeof(ak_optim_config), AK_OPTIM_SGD, 1e-3, 0.0, 0.0, 0.0, 0, 0.9, 0.999, 1e-8, 1.0}

/* One step (step counts from 1) over n parameters. state1/state2 are caller-owned,
 * zero-initialised before the first step: SGD uses state1 as the momentum buffer (NULL
 * when momentum is 0); Adam/AdamW/LAMB use state1 = exp_avg, state2 = exp_avg_sq.
 * Matches torch.optim's update rules; LAMB treats the buffer as one layer. */
AK_API ak_status ak_optim_step(const ak_optim_config *cfg, int64_t step, float *param,
                               const float *grad, float *state1, float *state2, size_t n);

/* ---- compression on the wire -------------------------------------------------------- */

typedef enum ak_train_compression {
    AK_COMPRESS_NONE = 0,
    AK_COMPRESS_FP16 = 1, /* f16 on the wire, scaled by a shared power of two to avoid
                             overflow, f32 accumulation */
    AK_COMPRESS_BF16 = 2, /* bf16 on the wire, f32 accumulation */
    AK_COMPRESS_DGC = 3,  /* deep gradient compression: sparse (index, value) allgather */
} ak_train_compression;

/* Deep gradient compression (Lin et al. 2018). Sparsity rises from warmup_start_sparsity
 * to sparsity exponentially over warmup_steps steps. */
typedef struct ak_dgc_config {
    uint32_t struct_size;        /* sizeof(ak_dgc_config) */
    float sparsity;              /* final share of values not sent, e.g. 0.999 */
    float warmup_start_sparsity; /* e.g. 0.75 */
    int warmup_steps;            /* 0: no warm-up */
    float momentum;              /* momentum correction (0: off); use plain SGD then */
    int nesterov;                /* Nesterov momentum correction */
    float clip_norm;             /* local gradient clipping on the L2 norm (0: off) */
    float sample_ratio;          /* share of values sampled to estimate the threshold */
} ak_dgc_config;

#define AK_DGC_CONFIG_INIT {sizeof(ak_dgc_config), 0.999f, 0.75f, 0, 0.9f, 0, 0.0f, 0.01f}

/* ---- runtime ------------------------------------------------------------------------ */

typedef struct ak_train ak_train;
typedef int64_t ak_train_handle; /* > 0 */

typedef enum ak_train_op_kind {
    AK_TRAIN_ALLREDUCE = 0,
    AK_TRAIN_ALLGATHER = 1,     /* concatenates along dim 0; dim 0 may differ per rank */
    AK_TRAIN_BROADCAST = 2,
    AK_TRAIN_ALLTOALL = 3,      /* rows of dim 0 split per destination (splits) */
    AK_TRAIN_REDUCESCATTER = 4, /* dim 0 split over the ranks as evenly as possible */
    AK_TRAIN_BARRIER = 5,
    AK_TRAIN_JOIN = 6,          /* internal: use ak_train_join */
    AK_TRAIN_OP_COUNT_
} ak_train_op_kind;

#define AK_TRAIN_MAX_DIMS 8

/* ak_train_op.op of an allreduce: Adasum (ak_comm_allreduce_adasum) instead of an
 * element-wise reduction. f32 or f64, no compression; fused only with Adasum tensors of
 * the same dtype, each keeping its own dot products; refused while ranks have joined
 * (their zeros would count as inputs). prescale/postscale apply as for other ops. */
#define AK_TRAIN_REDUCE_ADASUM ((ak_reduce_op)64)

/* One operation. Pointers must stay valid until the handle completes. */
typedef struct ak_train_op {
    uint32_t struct_size; /* sizeof(ak_train_op) */
    ak_train_op_kind kind;
    const char *name;     /* unique among this rank's pending ops; copied */
    ak_dtype dtype;
    int ndim;
    int64_t shape[AK_TRAIN_MAX_DIMS];
    const void *input;    /* may equal output (in place) */
    void *output;         /* allreduce, broadcast: same shape as input; reducescatter: this
                             rank's rows. allgather, alltoall, reducescatter may pass NULL:
                             the runtime allocates (ak_train_output) */
    ak_reduce_op op;      /* allreduce, reducescatter */
    double prescale, postscale; /* multiply before / after the reduction (1 = none) */
    int root;             /* broadcast */
    const int64_t *splits; /* alltoall: rows to each rank (size entries); NULL = even */
    int process_set;      /* 0 = the global set */
    ak_train_compression compression; /* allreduce of f32 */
    const ak_dgc_config *dgc;         /* AK_COMPRESS_DGC; copied at first use of a name */
    /* Overlap: after the allreduce lands in output (an f32 gradient), run this optimizer
     * step on param (same element count) on the update thread, then complete. */
    const ak_optim_config *update;
    float *param, *state1, *state2;
    int64_t step;
} ak_train_op;

#define AK_TRAIN_OP_INIT                                                                 \
    {sizeof(ak_train_op), AK_TRAIN_ALLREDUCE, NULL, AK_DTYPE_F32, 0, {0}, NULL, NULL, AK_REDUCE_SUM,   \
     1.0, 1.0, 0, NULL, 0, AK_COMPRESS_NONE, NULL, NULL, NULL, NULL, NULL, 0}

/* Runtime options; unset fields come from Horovod's variables (docs/horovod-compat.md). */
typedef struct ak_train_config {
    uint32_t struct_size;     /* sizeof(ak_train_config) */
    ak_comm *comm;            /* NULL: ak_comm_init from the environment (owned); else
                                 borrowed, and used only by the runtime until shutdown */
    double cycle_time_ms;     /* <= 0: HOROVOD_CYCLE_TIME (ms, default 1) */
    int64_t fusion_threshold; /* < 0: HOROVOD_FUSION_THRESHOLD (bytes, default 128 MiB) */
    int cache_capacity;       /* < 0: HOROVOD_CACHE_CAPACITY (default 1024; 0 = off) */
    double stall_check_s;     /* < 0: HOROVOD_STALL_CHECK_TIME_SECONDS (60; 0 = off) */
    double stall_shutdown_s;  /* < 0: HOROVOD_STALL_SHUTDOWN_TIME_SECONDS (0 = never) */
    const char *timeline;     /* NULL: HOROVOD_TIMELINE (Chrome trace, rank 0) */
    int zero_blocks;          /* < 0: AK_TRAIN_ZERO_BLOCKS (default 1): float32 sum/average
                                 allreduces send only the blocks not zero on every rank */
    int fusion_streams;       /* <= 0: AK_FUSION_STREAMS (default 1); 2-8: that many fused
                                 allreduces in flight at once, each on its own connections */
    int fusion_adaptive;      /* < 0: AK_FUSION_ADAPTIVE (default 1): with streams, buffers
                                 sized from the bytes each cycle negotiates */
} ak_train_config;

#define AK_TRAIN_CONFIG_INIT {sizeof(ak_train_config), NULL, 0.0, -1, -1, -1.0, -1.0, NULL, -1, 0, -1}

AK_API ak_status ak_train_init(const ak_train_config *cfg, ak_train **out);
/* Completes every pending handle with an error, stops the threads, frees (NULL: no-op). */
AK_API void ak_train_shutdown(ak_train *train);
/* The global communicator (for rank, size, local and host queries). Not for collectives
 * while the runtime runs. */
AK_API ak_status ak_train_comm(const ak_train *train, ak_comm **out);

AK_API ak_status ak_train_enqueue(ak_train *train, const ak_train_op *op, ak_train_handle *out);
/* Enqueues n allreduces that are negotiated and run together. */
AK_API ak_status ak_train_enqueue_group(ak_train *train, const ak_train_op *ops, int n,
                                        ak_train_handle *out);
AK_API ak_status ak_train_poll(ak_train *train, ak_train_handle handle, int *done);
/* Blocks until done; returns the op's status (message in ak_last_error()). The handle
 * stays valid for ak_train_output until ak_train_release. */
AK_API ak_status ak_train_wait(ak_train *train, ak_train_handle handle);
/* Result of a completed op: its data (runtime-allocated or the caller's output), dims. */
AK_API ak_status ak_train_output(ak_train *train, ak_train_handle handle, const void **data,
                                 int *ndim, int64_t shape[AK_TRAIN_MAX_DIMS]);
/* alltoall: rows received from each rank of the set (*n entries, valid until release). */
AK_API ak_status ak_train_received_splits(ak_train *train, ak_train_handle handle,
                                          const int64_t **splits, int *n);
AK_API ak_status ak_train_release(ak_train *train, ak_train_handle handle);

/* Blocks until every rank of the set has joined; meanwhile this rank takes part in the
 * others' allreduces with zeros (and receives their broadcasts). *last_rank: the rank
 * that joined last. */
AK_API ak_status ak_train_join(ak_train *train, int process_set, int *last_rank);
AK_API ak_status ak_train_barrier(ak_train *train, int process_set);

/* Process sets (collective over the global set; every rank passes the same ranks). */
AK_API ak_status ak_train_add_process_set(ak_train *train, const int *ranks, int n, int *id);
AK_API ak_status ak_train_remove_process_set(ak_train *train, int id);
/* *rank = -1 when this rank is not a member. */
AK_API ak_status ak_train_process_set_info(ak_train *train, int id, int *rank, int *size);

/* Counters since init, for tests and the timeline report. */
typedef struct ak_train_stats {
    uint64_t cycles;            /* background cycles that exchanged state */
    uint64_t negotiations;      /* cycles that needed the full (uncached) exchange */
    uint64_t cache_hits;        /* ops completed through the response cache */
    uint64_t fused_buffers;     /* collectives that carried more than one tensor */
    uint64_t collectives;       /* collectives run for ops */
    uint64_t negotiate_ns;      /* time in state exchange and negotiation */
    uint64_t fusion_copy_ns;    /* time copying into and out of the fusion buffer */
    uint64_t comm_ns;           /* time in the collectives */
    uint64_t update_ns;         /* time in optimizer updates */
    uint64_t negotiate_cpu_ns;  /* CPU time (not waiting) the background thread spent on
                                   state exchange and negotiation: the runtime's own cost */
    uint64_t zero_bytes_elided; /* allreduce bytes not sent: blocks zero on every rank */
} ak_train_stats;
AK_API ak_status ak_train_get_stats(ak_train *train, ak_train_stats *out);

#ifdef __cplusplus
}
#endif
#endif /* ACCELKIT_TRAIN_H */
