/* Training runtime, public calls: init/shutdown, enqueue with validation, handles (poll,
 * wait, output, release), join, barrier and process-set requests. The background thread
 * (train_cycle.c) does the negotiation and train_exec.c the work. */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "core/hash.h"
#include "core/params.h"
#include "train/train_internal.h"

/* ---- signatures ------------------------------------------------------------------- */

size_t ak__sig_elements(const ak__signature *s) {
    size_t n = 1;
    for (int d = 0; d < s->ndim; d++) n *= (size_t)s->shape[d];
    return n;
}

int ak__sig_equal(const ak__signature *a, const ak__signature *b) {
    if (a->kind != b->kind || a->dtype != b->dtype || a->op != b->op ||
        a->compression != b->compression || a->ndim != b->ndim || a->root != b->root ||
        a->prescale != b->prescale || a->postscale != b->postscale || a->group != b->group ||
        a->group_size != b->group_size || a->nsplits != b->nsplits)
        return 0;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d]) return 0;
    for (int i = 0; i < a->nsplits; i++)
        if (a->splits[i] != b->splits[i]) return 0;
    return 1;
}

void ak__sig_free(ak__signature *s) {
    free(s->splits);
    s->splits = NULL;
    s->nsplits = 0;
}

ak_status ak__sig_copy(ak__signature *dst, const ak__signature *src) {
    *dst = *src;
    dst->splits = NULL;
    if (src->nsplits > 0) {
        dst->splits = malloc((size_t)src->nsplits * sizeof(int64_t));
        if (!dst->splits) return AK_FAIL(AK_ERR_NO_MEMORY, "train: out of memory");
        memcpy(dst->splits, src->splits, (size_t)src->nsplits * sizeof(int64_t));
    }
    return AK_OK;
}

/* ---- init / shutdown -------------------------------------------------------------- */

static double cycle_time_from_env(void) {
    const char *text = ak__param_str(AK_PARAM_HVD_CYCLE_TIME);
    char *end = NULL;
    double ms = strtod(text, &end);
    return (end != text && *end == '\0' && ms > 0 && ms <= 10000) ? ms : 1.0;
}

static void read_config(ak_train *t, const ak_train_config *cfg) {
    t->cycle_ms = cfg->cycle_time_ms > 0 ? cfg->cycle_time_ms : cycle_time_from_env();
    t->fusion_threshold = cfg->fusion_threshold >= 0
                              ? (size_t)cfg->fusion_threshold
                              : (size_t)ak__param_int(AK_PARAM_HVD_FUSION_THRESHOLD);
    t->cache_capacity = cfg->cache_capacity >= 0
                            ? cfg->cache_capacity
                            : (int)ak__param_int(AK_PARAM_HVD_CACHE_CAPACITY);
    int stall_off = (int)ak__param_int(AK_PARAM_HVD_STALL_CHECK_DISABLE);
    t->stall_check_s = cfg->stall_check_s >= 0
                           ? cfg->stall_check_s
                           : (stall_off ? 0 : (double)ak__param_int(AK_PARAM_HVD_STALL_CHECK_TIME));
    t->zero_blocks = cfg->zero_blocks >= 0 ? cfg->zero_blocks != 0
                                           : (int)ak__param_int(AK_PARAM_TRAIN_ZERO_BLOCKS);
    t->stall_shutdown_s = cfg->stall_shutdown_s >= 0
                              ? cfg->stall_shutdown_s
                              : (double)ak__param_int(AK_PARAM_HVD_STALL_SHUTDOWN_TIME);
    int streams = cfg->fusion_streams > 0 ? cfg->fusion_streams
                                          : (int)ak__param_int(AK_PARAM_FUSION_STREAMS);
    t->nstreams = streams > 1 ? streams : 0; /* 1: allreduces on the background thread */
    t->fusion_adaptive = cfg->fusion_adaptive >= 0 ? cfg->fusion_adaptive != 0
                                                   : (int)ak__param_int(AK_PARAM_FUSION_ADAPTIVE);
}

static ak_status start_timeline(ak_train *t, const ak_train_config *cfg) {
    const char *path = cfg->timeline ? cfg->timeline : ak__param_str(AK_PARAM_HVD_TIMELINE);
    /* Horovod's HOROVOD_TIMELINE=DYNAMIC: no timeline until start_timeline() is called */
    if (!path[0] || strcmp(path, "DYNAMIC") == 0 || t->rank != 0) return AK_OK;
    if (!ak_trace_enabled()) AK_CHECK(ak_trace_start(path));
    t->timeline = 1;
    return AK_OK;
}

static ak_status start_threads(ak_train *t) {
    if (pthread_create(&t->update_thread, NULL, ak__train_update_main, t) != 0)
        return AK_FAIL(AK_ERR_INTERNAL, "train: cannot start the update thread");
    t->update_started = 1;
    if (pthread_create(&t->bg_thread, NULL, ak__train_bg_main, t) != 0)
        return AK_FAIL(AK_ERR_INTERNAL, "train: cannot start the background thread");
    t->bg_started = 1;
    return AK_OK;
}

/* Horovod's HOROVOD_HIERARCHICAL_ALLREDUCE=1 is accelkit's pipelined hierarchical allreduce
 * (intra-host reduce-scatter, inter-host exchange, intra-host allgather, chunks overlapped;
 * one chunk is Horovod's unpipelined form) for every allreduce of the communicator the
 * runtime creates; an explicit AK_COMM_ALGO wins. */
static ak_comm_algo hierarchical_from_env(void) {
    const char *forced = ak__param_str(AK_PARAM_COMM_ALGO);
    int explicit_algo = forced[0] && strcmp(forced, "auto") != 0;
    return ak__param_int(AK_PARAM_HVD_HIERARCHICAL_ALLREDUCE) && !explicit_algo
               ? AK_COMM_ALGO_HIER_PIPE
               : AK_COMM_ALGO_AUTO;
}

static ak_status train_setup(ak_train *t, const ak_train_config *cfg) {
    if (cfg->comm) {
        t->comm = cfg->comm;
    } else {
        ak_comm_config cc = AK_COMM_CONFIG_INIT;
        cc.algo = hierarchical_from_env();
        AK_CHECK(ak_comm_init(&cc, &t->comm));
        t->owns_comm = 1;
    }
    AK_CHECK(ak_comm_rank(t->comm, &t->rank));
    AK_CHECK(ak_comm_size(t->comm, &t->size));
    AK_ARG_CHECK(cfg->fusion_streams <= AK__MAX_STREAMS,
                 "ak_train_init: fusion_streams %d is out of range [1, %d] (0 = AK_FUSION_STREAMS)",
                 cfg->fusion_streams, AK__MAX_STREAMS);
    read_config(t, cfg);
    AK_CHECK(ak__autotune_start(t, cfg));
    ak__train_keep_heap();
    AK_CHECK(start_timeline(t, cfg));
    AK_CHECK(ak__pset_create(t, 0, t->comm, &t->psets[0]));
    t->npsets = 1;
    return start_threads(t);
}

ak_status ak_train_init(const ak_train_config *cfg, ak_train **out) {
    AK_CHECK(ak_init());
    AK_ARG_CHECK(out, "ak_train_init: out is NULL");
    *out = NULL;
    ak_train_config defaults = AK_TRAIN_CONFIG_INIT;
    if (!cfg) cfg = &defaults;
    AK_ARG_CHECK(cfg->struct_size == sizeof(ak_train_config),
                 "ak_train_init: struct_size %u, expected %zu (rebuild against this header)",
                 cfg->struct_size, sizeof(ak_train_config));
    ak_train *t = calloc(1, sizeof *t);
    if (!t) return AK_FAIL(AK_ERR_NO_MEMORY, "ak_train_init: out of memory");
    pthread_mutex_init(&t->lock, NULL);
    pthread_cond_init(&t->changed, NULL);
    pthread_cond_init(&t->uq_changed, NULL);
    /* handles stay unique across runtimes of one process: after an elastic reset
     * (shutdown, init) a stale handle is unknown, never another operation's */
    static _Atomic int64_t runtimes;
    t->next_handle = (ak_train_handle)(atomic_fetch_add(&runtimes, 1) << 32) + 1;
    ak_status st = train_setup(t, cfg);
    if (st != AK_OK) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", ak_last_error());
        ak_train_shutdown(t);
        return AK_FAIL(st, "%s", msg);
    }
    *out = t;
    return AK_OK;
}

static void stop_threads(ak_train *t) {
    pthread_mutex_lock(&t->lock);
    t->shutdown_requested = 1;
    pthread_cond_broadcast(&t->changed);
    pthread_mutex_unlock(&t->lock);
    if (t->bg_started) pthread_join(t->bg_thread, NULL);
    ak__streams_stop(t); /* before the update thread: streams hand it entries */
    if (t->update_started) {
        pthread_mutex_lock(&t->lock);
        t->uq_stop = 1;
        pthread_cond_broadcast(&t->uq_changed);
        pthread_mutex_unlock(&t->lock);
        pthread_join(t->update_thread, NULL);
    }
}

void ak_train_shutdown(ak_train *t) {
    if (!t) return;
    stop_threads(t);
    for (int i = 0; i < t->npsets; i++) {
        if (!t->psets[i]) continue;
        ak__pset_fail_all(t, t->psets[i], AK_ERR_REMOTE, "the training runtime was shut down");
        ak__pset_free(t->psets[i]);
    }
    while (t->all) {
        ak__entry *e = t->all;
        t->all = e->all_next;
        ak__sig_free(&e->sig);
        free(e->error);
        free(e->result);
        free(e->recv_splits);
        free(e);
    }
    ak__exec_free_scratch(t);
    ak__autotune_free(t);
    if (t->timeline) ak_trace_stop();
    if (t->owns_comm) ak_comm_free(t->comm);
    pthread_cond_destroy(&t->uq_changed);
    pthread_cond_destroy(&t->changed);
    pthread_mutex_destroy(&t->lock);
    free(t);
}

ak_status ak_train_comm(const ak_train *t, ak_comm **out) {
    AK_ARG_CHECK(t && out, "ak_train_comm: NULL argument");
    *out = t->comm;
    return AK_OK;
}

/* ---- enqueue ---------------------------------------------------------------------- */

static ak_status check_shape(const ak_train_op *op, const char *name, size_t *count) {
    AK_ARG_CHECK(op->ndim >= 0 && op->ndim <= AK_TRAIN_MAX_DIMS,
                 "'%s': ndim %d outside 0..%d", name, op->ndim, AK_TRAIN_MAX_DIMS);
    size_t n = 1;
    for (int d = 0; d < op->ndim; d++) {
        AK_ARG_CHECK(op->shape[d] >= 0, "'%s': dimension %d is negative (%lld)", name, d,
                     (long long)op->shape[d]);
        n *= (size_t)op->shape[d];
    }
    *count = n;
    return AK_OK;
}

static ak_status check_kind_rules(const ak_train_op *op, const char *name, size_t count,
                                  int set_size) {
    int k = op->kind;
    AK_ARG_CHECK(k >= 0 && k < AK_TRAIN_OP_COUNT_ && k != AK_TRAIN_JOIN,
                 "'%s': unknown op kind %d", name, k);
    AK_ARG_CHECK((unsigned)op->dtype < AK_DTYPE_COUNT_, "'%s': unknown dtype %d", name, op->dtype);
    if (k == AK_TRAIN_BARRIER) return AK_OK;
    AK_ARG_CHECK(count == 0 || op->input, "'%s': input is NULL", name);
    if (k == AK_TRAIN_ALLREDUCE || k == AK_TRAIN_BROADCAST)
        AK_ARG_CHECK(count == 0 || op->output, "'%s': output is NULL", name);
    if (k == AK_TRAIN_ALLREDUCE && op->op == AK_TRAIN_REDUCE_ADASUM) {
        if (op->dtype != AK_DTYPE_F32 && op->dtype != AK_DTYPE_F64)
            return AK_FAIL(AK_ERR_UNSUPPORTED, "'%s': Adasum needs float32 or float64, not %s",
                           name, ak_dtype_name(op->dtype));
    } else if (k == AK_TRAIN_ALLREDUCE || k == AK_TRAIN_REDUCESCATTER) {
        AK_ARG_CHECK((unsigned)op->op < AK_REDUCE_COUNT_, "'%s': unknown reduce op %d", name, op->op);
    }
    AK_ARG_CHECK(isfinite(op->prescale) && isfinite(op->postscale),
                 "'%s': prescale/postscale must be finite", name);
    if (k == AK_TRAIN_BROADCAST)
        AK_ARG_CHECK(op->root >= 0 && op->root < set_size, "'%s': root %d outside 0..%d", name,
                     op->root, set_size - 1);
    if (k == AK_TRAIN_ALLGATHER || k == AK_TRAIN_ALLTOALL || k == AK_TRAIN_REDUCESCATTER)
        AK_ARG_CHECK(op->ndim >= 1, "'%s': %s needs at least one dimension", name,
                     k == AK_TRAIN_ALLGATHER ? "allgather" : k == AK_TRAIN_ALLTOALL ? "alltoall" : "reducescatter");
    return AK_OK;
}

static ak_status check_extras(const ak_train_op *op, const char *name) {
    AK_ARG_CHECK((unsigned)op->compression <= AK_COMPRESS_DGC, "'%s': unknown compression %d",
                 name, op->compression);
    if (op->compression != AK_COMPRESS_NONE)
        AK_ARG_CHECK(op->kind == AK_TRAIN_ALLREDUCE && op->dtype == AK_DTYPE_F32 &&
                         (op->op == AK_REDUCE_SUM || op->op == AK_REDUCE_AVG),
                     "'%s': compression applies to f32 sum/average allreduces only", name);
    if (op->compression == AK_COMPRESS_DGC) {
        AK_ARG_CHECK(op->dgc && op->dgc->struct_size == sizeof(ak_dgc_config),
                     "'%s': DGC compression needs an ak_dgc_config (struct_size %zu)", name,
                     sizeof(ak_dgc_config));
        AK_ARG_CHECK(op->dgc->sparsity >= 0 && op->dgc->sparsity < 1,
                     "'%s': DGC sparsity %g outside [0, 1)", name, (double)op->dgc->sparsity);
    }
    if (op->update) {
        AK_ARG_CHECK(op->kind == AK_TRAIN_ALLREDUCE && op->dtype == AK_DTYPE_F32 && op->param,
                     "'%s': an optimizer update needs an f32 allreduce and a param buffer", name);
        AK_ARG_CHECK(op->update->struct_size == sizeof(ak_optim_config),
                     "'%s': ak_optim_config struct_size mismatch", name);
        AK_ARG_CHECK(op->step >= 1, "'%s': optimizer step %lld must be >= 1", name,
                     (long long)op->step);
    }
    return AK_OK;
}

static ak_status check_splits(const ak_train_op *op, const char *name, int set_size) {
    if (op->kind != AK_TRAIN_ALLTOALL) return AK_OK;
    if (!op->splits) {
        AK_ARG_CHECK(op->shape[0] % set_size == 0,
                     "'%s': alltoall without splits needs dimension 0 (%lld) divisible by %d ranks",
                     name, (long long)op->shape[0], set_size);
        return AK_OK;
    }
    int64_t total = 0;
    for (int r = 0; r < set_size; r++) {
        AK_ARG_CHECK(op->splits[r] >= 0, "'%s': split %d is negative", name, r);
        total += op->splits[r];
    }
    AK_ARG_CHECK(total == op->shape[0], "'%s': splits sum to %lld, dimension 0 is %lld", name,
                 (long long)total, (long long)op->shape[0]);
    return AK_OK;
}

static ak__pset *member_set(ak_train *t, int id) {
    if (id < 0 || id >= t->npsets || !t->psets[id] || !t->psets[id]->active) return NULL;
    return t->psets[id];
}

static void fill_signature(ak__entry *e, const ak_train_op *op, int set_size) {
    ak__signature *s = &e->sig;
    s->kind = op->kind;
    s->dtype = op->dtype;
    s->op = (op->kind == AK_TRAIN_ALLREDUCE || op->kind == AK_TRAIN_REDUCESCATTER) ? op->op : 0;
    s->compression = op->compression;
    s->ndim = op->ndim;
    memcpy(s->shape, op->shape, sizeof s->shape);
    s->prescale = op->prescale;
    s->postscale = op->postscale;
    s->root = op->kind == AK_TRAIN_BROADCAST ? op->root : 0;
}

static ak_status make_entry(ak_train *t, const ak_train_op *op, ak__entry **out) {
    AK_ARG_CHECK(op && op->struct_size == sizeof(ak_train_op),
                 "ak_train_enqueue: op is NULL or its struct_size is not %zu", sizeof(ak_train_op));
    AK_ARG_CHECK(op->name && op->name[0] && strlen(op->name) < AK__NAME_MAX,
                 "ak_train_enqueue: op name missing or longer than %d bytes", AK__NAME_MAX - 1);
    const char *name = op->name;
    pthread_mutex_lock(&t->lock);
    ak__pset *p = member_set(t, op->process_set);
    int set_size = p ? p->size : 0;
    pthread_mutex_unlock(&t->lock);
    AK_ARG_CHECK(p && p->comm, "'%s': process set %d does not exist or this rank is not in it",
                 name, op->process_set);
    size_t count = 0;
    AK_CHECK(check_shape(op, name, &count));
    AK_CHECK(check_kind_rules(op, name, count, set_size));
    AK_CHECK(check_extras(op, name));
    AK_CHECK(check_splits(op, name, set_size));
    ak__entry *e = calloc(1, sizeof *e);
    if (!e) return AK_FAIL(AK_ERR_NO_MEMORY, "'%s': out of memory", name);
    snprintf(e->name, sizeof e->name, "%s", name);
    e->op = *op;
    e->op.name = e->name;
    if (op->dgc) e->dgc = *op->dgc;
    e->count = count;
    e->pset = op->process_set;
    e->cache_slot = -1;
    e->join_last_rank = -1;
    fill_signature(e, op, set_size);
    *out = e;
    return AK_OK;
}

static int name_pending(ak_train *t, const ak__entry *e) {
    for (ak__entry *o = t->all; o; o = o->all_next)
        if (!o->done && o->pset == e->pset && strcmp(o->name, e->name) == 0) return 1;
    return 0;
}

/* Queues e for the background thread; the caller holds no lock. Frees e on failure. */
static ak_status submit(ak_train *t, ak__entry *e, ak_train_handle *out) {
    pthread_mutex_lock(&t->lock);
    ak_status st = AK_OK;
    if (t->failed != AK_OK || t->shutdown_requested || t->bg_exited)
        st = AK_FAIL(t->failed != AK_OK ? t->failed : AK_ERR_REMOTE,
                     "'%s': the training runtime has stopped: %s", e->name,
                     t->failed_msg[0] ? t->failed_msg : "shut down");
    else if (name_pending(t, e))
        st = AK_FAIL(AK_ERR_INVALID_ARG, "'%s': requested to allreduce, allgather or broadcast a tensor with the "
                     "same name as another tensor still being processed on this rank; submit "
                     "it under a different name",
                     e->name);
    if (st != AK_OK) {
        pthread_mutex_unlock(&t->lock);
        ak__sig_free(&e->sig);
        free(e);
        return st;
    }
    ak__pset *p = t->psets[e->pset];
    e->handle = t->next_handle++;
    e->enqueue_ns = ak_now_ns();
    if (p->incoming_tail) p->incoming_tail->next = e;
    else p->incoming = e;
    p->incoming_tail = e;
    e->all_next = t->all;
    t->all = e;
    *out = e->handle;
    pthread_mutex_unlock(&t->lock);
    return AK_OK;
}

static ak_status copy_splits(ak__entry *e, const int64_t *splits, int n) {
    e->sig.splits = malloc((size_t)n * sizeof(int64_t));
    if (!e->sig.splits) return AK_FAIL(AK_ERR_NO_MEMORY, "'%s': out of memory", e->name);
    memcpy(e->sig.splits, splits, (size_t)n * sizeof(int64_t));
    e->sig.nsplits = n;
    return AK_OK;
}

ak_status ak_train_enqueue(ak_train *t, const ak_train_op *op, ak_train_handle *out) {
    AK_ARG_CHECK(t && out, "ak_train_enqueue: NULL argument");
    ak__entry *e;
    AK_CHECK(make_entry(t, op, &e));
    if (op->kind == AK_TRAIN_ALLTOALL && op->splits) {
        ak_status st = copy_splits(e, op->splits, t->psets[op->process_set]->size);
        if (st != AK_OK) {
            free(e);
            return st;
        }
    }
    return submit(t, e, out);
}

/* splitmix64's finalizer: spreads every input bit over the whole word. */
static uint64_t mix64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* A group's id follows from what it holds, not from when it was submitted: every rank
 * derives the same id from the same member names, count and process set, whatever groups
 * it submitted before (on other process sets too) and in whichever order its threads
 * submit groups. A per-rank counter did not: ranks that had run a group on a process set
 * they alone belong to disagreed on every later id. The members' hashes are summed, so
 * the order of the names inside the group does not matter either. Names are unique among
 * a set's pending ops, so two pending groups share an id only if they hold the same names
 * (or on a 64-bit collision); groups that truly differ across ranks get different ids and
 * fail as a group mismatch. Never 0 (0 = not grouped). */
static int64_t group_id(ak__entry *const *es, int n, int pset) {
    uint64_t sum = 0;
    for (int i = 0; i < n; i++) sum += mix64(ak__fnv1a64_str(es[i]->name));
    uint64_t h = mix64(sum ^ mix64(((uint64_t)(uint32_t)n << 32) | (uint32_t)pset)) >> 1;
    return h ? (int64_t)h : 1;
}

ak_status ak_train_enqueue_group(ak_train *t, const ak_train_op *ops, int n,
                                 ak_train_handle *out) {
    AK_ARG_CHECK(t && ops && out && n > 0, "ak_train_enqueue_group: NULL argument or n <= 0");
    ak__entry **es = calloc((size_t)n, sizeof *es);
    if (!es) return AK_FAIL(AK_ERR_NO_MEMORY, "ak_train_enqueue_group: out of memory");
    ak_status st = AK_OK;
    for (int i = 0; i < n && st == AK_OK; i++) {
        st = make_entry(t, &ops[i], &es[i]);
        if (st == AK_OK && ops[i].kind != AK_TRAIN_ALLREDUCE)
            st = AK_FAIL(AK_ERR_INVALID_ARG, "'%s': groups hold allreduces only", ops[i].name);
        if (st == AK_OK && ops[i].process_set != ops[0].process_set)
            st = AK_FAIL(AK_ERR_INVALID_ARG, "'%s': a group must use one process set", ops[i].name);
    }
    if (st == AK_OK) {
        int64_t group = group_id(es, n, ops[0].process_set);
        for (int i = 0; i < n; i++) es[i]->sig.group = group, es[i]->sig.group_size = n;
    }
    for (int i = 0; i < n; i++) {
        if (st == AK_OK) st = submit(t, es[i], &out[i]);
        else if (es[i]) free(es[i]);
        es[i] = NULL;
    }
    free(es);
    return st;
}

/* ---- handles ---------------------------------------------------------------------- */

void ak__train_complete(ak_train *t, ak__entry *e, ak_status st, const char *msg) {
    pthread_mutex_lock(&t->lock);
    if (!e->done) {
        e->status = st;
        if (st != AK_OK && msg) e->error = strdup(msg);
        e->done = 1;
        pthread_cond_broadcast(&t->changed);
    }
    pthread_mutex_unlock(&t->lock);
}

static ak__entry *find_locked(ak_train *t, ak_train_handle h) {
    for (ak__entry *e = t->all; e; e = e->all_next)
        if (e->handle == h) return e;
    return NULL;
}

ak_status ak_train_poll(ak_train *t, ak_train_handle h, int *done) {
    AK_ARG_CHECK(t && done, "ak_train_poll: NULL argument");
    pthread_mutex_lock(&t->lock);
    ak__entry *e = find_locked(t, h);
    if (e) *done = e->done;
    pthread_mutex_unlock(&t->lock);
    AK_ARG_CHECK(e, "ak_train_poll: unknown handle %lld", (long long)h);
    return AK_OK;
}

ak_status ak_train_wait(ak_train *t, ak_train_handle h) {
    AK_ARG_CHECK(t, "ak_train_wait: NULL runtime");
    pthread_mutex_lock(&t->lock);
    ak__entry *e = find_locked(t, h);
    while (e && !e->done) pthread_cond_wait(&t->changed, &t->lock);
    ak_status st = e ? e->status : AK_OK;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", e && e->error ? e->error : "");
    pthread_mutex_unlock(&t->lock);
    AK_ARG_CHECK(e, "ak_train_wait: unknown handle %lld", (long long)h);
    if (st != AK_OK) return AK_FAIL(st, "%s", msg);
    return AK_OK;
}

ak_status ak_train_output(ak_train *t, ak_train_handle h, const void **data, int *ndim,
                          int64_t shape[AK_TRAIN_MAX_DIMS]) {
    AK_ARG_CHECK(t && data && ndim && shape, "ak_train_output: NULL argument");
    pthread_mutex_lock(&t->lock);
    ak__entry *e = find_locked(t, h);
    int ok = e && e->done && e->status == AK_OK;
    if (ok) {
        *data = e->result ? e->result : e->op.output;
        *ndim = e->out_ndim;
        memcpy(shape, e->out_shape, sizeof e->out_shape);
    }
    pthread_mutex_unlock(&t->lock);
    AK_ARG_CHECK(ok, "ak_train_output: handle %lld is unknown, not done or failed", (long long)h);
    return AK_OK;
}

ak_status ak_train_received_splits(ak_train *t, ak_train_handle h, const int64_t **splits,
                                   int *n) {
    AK_ARG_CHECK(t && splits && n, "ak_train_received_splits: NULL argument");
    pthread_mutex_lock(&t->lock);
    ak__entry *e = find_locked(t, h);
    int ok = e && e->done && e->status == AK_OK && e->recv_splits;
    if (ok) *splits = e->recv_splits, *n = e->nrecv_splits;
    pthread_mutex_unlock(&t->lock);
    AK_ARG_CHECK(ok, "ak_train_received_splits: handle %lld is not a completed alltoall",
                 (long long)h);
    return AK_OK;
}

ak_status ak_train_release(ak_train *t, ak_train_handle h) {
    AK_ARG_CHECK(t, "ak_train_release: NULL runtime");
    pthread_mutex_lock(&t->lock);
    ak__entry **pp = &t->all, *e = NULL;
    while (*pp && (*pp)->handle != h) pp = &(*pp)->all_next;
    if (*pp && (*pp)->done) {
        e = *pp;
        *pp = e->all_next;
    }
    pthread_mutex_unlock(&t->lock);
    AK_ARG_CHECK(e, "ak_train_release: handle %lld is unknown or still running", (long long)h);
    ak__sig_free(&e->sig);
    free(e->error);
    free(e->result);
    free(e->recv_splits);
    free(e);
    return AK_OK;
}

/* ---- join, barrier, process sets --------------------------------------------------- */

/* Runs an internal op and waits for it. Its name counts per process set, so names match
 * across ranks that make the same calls in the same order. */
static ak_status run_internal(ak_train *t, int pset, int kind, const char *prefix,
                              const int64_t *splits, int nsplits, int root, int *last_rank) {
    AK_ARG_CHECK(pset >= 0 && pset < AK__MAX_PSETS, "process set %d does not exist", pset);
    pthread_mutex_lock(&t->lock);
    long seq = t->internal_seq[pset]++;
    pthread_mutex_unlock(&t->lock);
    char name[96];
    snprintf(name, sizeof name, "%s.%ld", prefix, seq);
    ak_train_op op = AK_TRAIN_OP_INIT;
    op.kind = AK_TRAIN_BARRIER; /* passes validation; the kind is set below */
    op.name = name;
    op.process_set = pset;
    ak__entry *e;
    AK_CHECK(make_entry(t, &op, &e));
    e->sig.kind = kind;
    e->op.kind = (ak_train_op_kind)kind;
    e->sig.root = root;
    if (nsplits > 0 && copy_splits(e, splits, nsplits) != AK_OK) {
        free(e);
        return AK_ERR_NO_MEMORY;
    }
    ak_train_handle h;
    AK_CHECK(submit(t, e, &h));
    ak_status st = ak_train_wait(t, h);
    if (st == AK_OK && last_rank) {
        pthread_mutex_lock(&t->lock);
        *last_rank = e->join_last_rank;
        pthread_mutex_unlock(&t->lock);
    }
    char msg[512];
    snprintf(msg, sizeof msg, "%s", ak_last_error());
    ak_train_release(t, h);
    return st == AK_OK ? AK_OK : AK_FAIL(st, "%s", msg);
}

ak_status ak_train_join(ak_train *t, int pset, int *last_rank) {
    AK_ARG_CHECK(t, "ak_train_join: NULL runtime");
    int last = -1;
    AK_CHECK(run_internal(t, pset, AK_TRAIN_JOIN, "__ak.join", NULL, 0, 0, &last));
    if (last_rank) *last_rank = last;
    return AK_OK;
}

ak_status ak_train_barrier(ak_train *t, int pset) {
    AK_ARG_CHECK(t, "ak_train_barrier: NULL runtime");
    return run_internal(t, pset, AK_TRAIN_BARRIER, "__ak.barrier", NULL, 0, 0, NULL);
}

ak_status ak_train_add_process_set(ak_train *t, const int *ranks, int n, int *id) {
    AK_ARG_CHECK(t && ranks && id && n > 0, "ak_train_add_process_set: NULL argument or n <= 0");
    int64_t *r64 = malloc((size_t)n * sizeof *r64);
    if (!r64) return AK_FAIL(AK_ERR_NO_MEMORY, "ak_train_add_process_set: out of memory");
    ak_status st = AK_OK;
    for (int i = 0; i < n && st == AK_OK; i++) {
        r64[i] = ranks[i];
        if (ranks[i] < 0 || ranks[i] >= t->size || (i > 0 && ranks[i] <= ranks[i - 1]))
            st = AK_FAIL(AK_ERR_INVALID_ARG,
                         "ak_train_add_process_set: ranks must be increasing in 0..%d (got %d at %d)",
                         t->size - 1, ranks[i], i);
    }
    int new_id = -1;
    if (st == AK_OK)
        st = run_internal(t, 0, AK__KIND_PSET_ADD, "__ak.process_set.add", r64, n, 0, &new_id);
    free(r64);
    if (st == AK_OK) *id = new_id;
    return st;
}

ak_status ak_train_remove_process_set(ak_train *t, int id) {
    AK_ARG_CHECK(t, "ak_train_remove_process_set: NULL runtime");
    AK_ARG_CHECK(id > 0 && id < t->npsets && t->psets[id] && t->psets[id]->active,
                 "ak_train_remove_process_set: no process set %d (0 is the global set)", id);
    return run_internal(t, 0, AK__KIND_PSET_REMOVE, "__ak.process_set.remove", NULL, 0, id, NULL);
}

ak_status ak_train_process_set_info(ak_train *t, int id, int *rank, int *size) {
    AK_ARG_CHECK(t && rank && size, "ak_train_process_set_info: NULL argument");
    pthread_mutex_lock(&t->lock);
    ak__pset *p = (id >= 0 && id < t->npsets) ? t->psets[id] : NULL;
    int ok = p && p->active;
    if (ok) *rank = p->comm ? p->rank : -1, *size = p->size;
    pthread_mutex_unlock(&t->lock);
    AK_ARG_CHECK(ok, "ak_train_process_set_info: no process set %d", id);
    return AK_OK;
}

ak_status ak_train_get_stats(ak_train *t, ak_train_stats *out) {
    AK_ARG_CHECK(t && out, "ak_train_get_stats: NULL argument");
    out->cycles = t->st_cycles;
    out->negotiations = t->st_negotiations;
    out->cache_hits = t->st_cache_hits;
    out->fused_buffers = t->st_fused;
    out->collectives = t->st_collectives;
    out->negotiate_ns = t->st_negotiate_ns;
    out->fusion_copy_ns = t->st_fusion_ns;
    out->comm_ns = t->st_comm_ns;
    out->update_ns = t->st_update_ns;
    out->negotiate_cpu_ns = t->st_negotiate_cpu_ns;
    out->zero_bytes_elided = t->st_zero_elided;
    return AK_OK;
}
