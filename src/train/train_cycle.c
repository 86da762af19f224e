/* Training runtime, background thread: every cycle, per process set,
 *  1. one small allreduce (MIN over bytes) of a state vector: flags (shutdown, has
 *     uncached requests, joined, stall shutdown), then per response-cache slot "ready on
 *     this rank" and "still valid here". In steady state this is all that crosses the wire;
 *  2. cache slots ready on every rank become responses at once (same order everywhere);
 *  3. when some rank has uncached requests, every rank allgathers the requests and runs
 *     the coordinator's logic on the same data, in the same order, so the coordinator's
 *     table is replicated and its decisions need no broadcast; new responses enter the
 *     cache in that order, which keeps the caches identical;
 *  4. the stall inspector names ops that wait too long and the ranks missing;
 *  5. train_exec.c runs the responses (fusion, compression, collectives).
 * The design follows Horovod's controller (coordinator + response cache + bit-vector
 * steady state); replicating the coordinator saves the broadcast step. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/check.h"
#include "core/le_bytes.h"
#include "core/params.h"
#include "train/train_internal.h"

enum { F_ALIVE, F_NO_UNCACHED, F_JOINED, F_NO_STALL_STOP, F_COUNT };

/* ---- process sets ------------------------------------------------------------------- */

ak_status ak__pset_create(ak_train *t, int id, ak_comm *comm, ak__pset **out) {
    ak__pset *p = calloc(1, sizeof *p);
    if (!p) return AK_FAIL(AK_ERR_NO_MEMORY, "train: out of memory");
    p->id = id;
    p->active = 1;
    p->comm = comm;
    p->last_joined = -1;
    if (comm) {
        ak_comm_rank(comm, &p->rank);
        ak_comm_size(comm, &p->size);
    }
    int cap = t->cache_capacity > 0 ? t->cache_capacity : 1;
    p->cache = calloc((size_t)cap, sizeof *p->cache);
    p->invalid = calloc((size_t)cap, 1);
    p->joined = calloc((size_t)(p->size > 0 ? p->size : 1), 1);
    if (!p->cache || !p->invalid || !p->joined) {
        ak__pset_free(p);
        return AK_FAIL(AK_ERR_NO_MEMORY, "train: out of memory");
    }
    *out = p;
    return AK_OK;
}

static void free_row(ak__table_row *row, int n) {
    for (int r = 0; r < n; r++) ak__sig_free(&row->req[r]);
    free(row->req);
    free(row);
}

void ak__pset_free(ak__pset *p) {
    if (!p) return;
    if (p->comm && p->id != 0) ak_comm_free(p->comm);
    while (p->table) {
        ak__table_row *row = p->table;
        p->table = row->next;
        free_row(row, p->size);
    }
    while (p->dgc) {
        ak__dgc_named *d = p->dgc;
        p->dgc = d->next;
        ak__dgc_free(d->state);
        free(d);
    }
    if (p->cache)
        for (int s = 0; s < p->cache_used; s++) ak__sig_free(&p->cache[s].sig);
    free(p->cache);
    free(p->invalid);
    free(p->joined);
    free(p);
}

/* Takes the entries user threads queued since the last call. */
static ak__entry *detach_incoming(ak_train *t, ak__pset *p) {
    pthread_mutex_lock(&t->lock);
    ak__entry *in = p->incoming;
    p->incoming = p->incoming_tail = NULL;
    pthread_mutex_unlock(&t->lock);
    return in;
}

void ak__pset_fail_all(ak_train *t, ak__pset *p, ak_status st, const char *msg) {
    ak__entry *in = detach_incoming(t, p);
    for (ak__entry *e = in, *next; e; e = next) {
        next = e->next;
        ak__train_complete(t, e, st, msg);
    }
    for (ak__entry *e = p->pending, *next; e; e = next) {
        next = e->next;
        ak__train_complete(t, e, st, msg);
    }
    p->pending = NULL;
}

/* ---- response cache ----------------------------------------------------------------- */

static int cacheable(const ak__signature *s) {
    return s->group == 0 && (s->kind == AK_TRAIN_ALLREDUCE || s->kind == AK_TRAIN_BROADCAST ||
                             s->kind == AK_TRAIN_REDUCESCATTER);
}

static int cache_find(const ak__pset *p, const char *name) {
    for (int s = 0; s < p->cache_used; s++)
        if (p->cache[s].used && strcmp(p->cache[s].name, name) == 0) return s;
    return -1;
}

/* Same on every rank: responses arrive in the same order and slots are taken lowest
 * first. A full cache simply stops caching. */
static void cache_insert(ak_train *t, ak__pset *p, const char *name, const ak__signature *sig) {
    if (t->cache_capacity <= 0 || !cacheable(sig) || cache_find(p, name) >= 0) return;
    int s = 0;
    while (s < t->cache_capacity && p->cache[s].used) s++;
    if (s == t->cache_capacity) return;
    if (ak__sig_copy(&p->cache[s].sig, sig) != AK_OK) return;
    p->cache[s].used = 1;
    snprintf(p->cache[s].name, sizeof p->cache[s].name, "%s", name);
    p->invalid[s] = 0;
    if (s >= p->cache_used) p->cache_used = s + 1;
}

static void cache_erase(ak__pset *p, int s) {
    ak__sig_free(&p->cache[s].sig);
    p->cache[s].used = 0;
    p->invalid[s] = 0;
    while (p->cache_used > 0 && !p->cache[p->cache_used - 1].used) p->cache_used--;
}

/* New entries: those matching a cache slot go the cheap way; a name cached with another
 * signature invalidates the slot on every rank (they then renegotiate it). */
static void take_incoming(ak_train *t, ak__pset *p) {
    ak__entry *in = detach_incoming(t, p);
    ak__entry **tail = &p->pending;
    while (*tail) tail = &(*tail)->next;
    for (ak__entry *e = in; e; e = e->next) {
        int s = cache_find(p, e->name);
        if (s >= 0 && ak__sig_equal(&p->cache[s].sig, &e->sig)) e->cache_slot = s;
        else if (s >= 0) p->invalid[s] = 1;
        *tail = e;
        tail = &e->next;
    }
}

/* ---- state vector ------------------------------------------------------------------- */

static ak__entry *pending_join(const ak__pset *p) {
    for (ak__entry *e = p->pending; e; e = e->next)
        if (e->sig.kind == AK_TRAIN_JOIN) return e;
    return NULL;
}

static int joined_here(const ak__pset *p) {
    const ak__entry *j = pending_join(p);
    return j && j->sent;
}

static void build_state(ak_train *t, ak__pset *p, unsigned char *v, int stall_stop) {
    int shutdown;
    pthread_mutex_lock(&t->lock);
    shutdown = t->shutdown_requested;
    pthread_mutex_unlock(&t->lock);
    int uncached = 0, joined = joined_here(p);
    unsigned char *hit = v + F_COUNT, *valid = hit + p->cache_used;
    memset(hit, joined, (size_t)p->cache_used);
    for (int s = 0; s < p->cache_used; s++) valid[s] = !p->invalid[s];
    for (ak__entry *e = p->pending; e; e = e->next) {
        if (e->cache_slot >= 0 && !p->invalid[e->cache_slot]) hit[e->cache_slot] = 1;
        else if (e->cache_slot < 0 && !e->sent) uncached = 1;
    }
    v[F_ALIVE] = !shutdown;
    v[F_NO_UNCACHED] = !uncached;
    v[F_JOINED] = (unsigned char)joined;
    v[F_NO_STALL_STOP] = !stall_stop;
}

/* Slots some rank invalidated: erased everywhere; this rank's entries renegotiate. */
static void apply_invalid(ak__pset *p, const unsigned char *valid, int nslots) {
    for (int s = 0; s < nslots; s++) {
        if (valid[s]) continue;
        for (ak__entry *e = p->pending; e; e = e->next)
            if (e->cache_slot == s) e->cache_slot = -1, e->sent = 0;
        cache_erase(p, s);
    }
}

/* ---- responses ---------------------------------------------------------------------- */

typedef struct response_list {
    ak__response *r;
    int n, cap;
} response_list;

static ak__response *response_add(response_list *l, const char *name) {
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 16;
        ak__response *r = realloc(l->r, (size_t)cap * sizeof *r);
        if (!r) return NULL;
        l->r = r;
        l->cap = cap;
    }
    ak__response *r = &l->r[l->n++];
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", name);
    return r;
}

static void responses_free(response_list *l) {
    for (int i = 0; i < l->n; i++) {
        ak__sig_free(&l->r[i].sig);
        free(l->r[i].dim0);
        free(l->r[i].error);
    }
    free(l->r);
}

/* Removes and returns this rank's pending entry of that name (NULL if none). */
static ak__entry *take_pending(ak__pset *p, const char *name) {
    for (ak__entry **pp = &p->pending; *pp; pp = &(*pp)->next) {
        if (strcmp((*pp)->name, name) == 0) {
            ak__entry *e = *pp;
            *pp = e->next;
            e->next = NULL;
            return e;
        }
    }
    return NULL;
}

static void trace_negotiation(const ak__entry *e) {
    if (e && ak_trace_enabled())
        ak_trace_complete("negotiate", e->name, e->enqueue_ns, ak_now_ns() - e->enqueue_ns);
}

static ak_status refuse_if_joined(const ak__pset *p, ak__response *r);

static ak_status cached_responses(ak_train *t, ak__pset *p, const unsigned char *hit,
                                  int nslots, response_list *out) {
    for (int s = 0; s < nslots; s++) {
        if (!hit[s] || !p->cache[s].used) continue;
        ak__response *r = response_add(out, p->cache[s].name);
        if (!r) return AK_FAIL(AK_ERR_NO_MEMORY, "train: out of memory");
        AK_CHECK(ak__sig_copy(&r->sig, &p->cache[s].sig));
        /* a joined rank marks every slot ready: the same refusals as negotiated ops */
        AK_CHECK(refuse_if_joined(p, r));
        r->entry = take_pending(p, p->cache[s].name);
        trace_negotiation(r->entry);
        t->st_cache_hits++;
    }
    return AK_OK;
}

/* ---- the replicated coordinator ------------------------------------------------------ */

static ak__table_row *table_row(ak__pset *p, const char *name) {
    for (ak__table_row *row = p->table; row; row = row->next)
        if (strcmp(row->name, name) == 0) return row;
    ak__table_row *row = calloc(1, sizeof *row);
    if (!row) return NULL;
    row->req = calloc((size_t)p->size, sizeof *row->req);
    if (!row->req) {
        free(row);
        return NULL;
    }
    for (int r = 0; r < p->size; r++) row->req[r].kind = -1;
    snprintf(row->name, sizeof row->name, "%s", name);
    row->first_ns = ak_now_ns();
    if (p->table_tail) p->table_tail->next = row;
    else p->table = row;
    p->table_tail = row;
    return row;
}

static void table_unlink(ak__pset *p, ak__table_row *row) {
    ak__table_row *prev = NULL;
    for (ak__table_row *x = p->table; x && x != row; x = x->next) prev = x;
    if (prev) prev->next = row->next;
    else p->table = row->next;
    if (p->table_tail == row) p->table_tail = prev;
    free_row(row, p->size);
}

static ak_status record_request(ak__pset *p, int rank, const char *name, ak__signature *s) {
    if (s->kind == AK_TRAIN_JOIN) {
        p->joined[rank] = 1;
        p->last_joined = rank;
        ak__sig_free(s);
        return AK_OK;
    }
    ak__table_row *row = table_row(p, name);
    if (!row) return AK_FAIL(AK_ERR_NO_MEMORY, "train: out of memory");
    ak__sig_free(&row->req[rank]); /* a renegotiation replaces the earlier request */
    row->req[rank] = *s;
    s->splits = NULL;
    return AK_OK;
}

static ak_status parse_requests(ak__pset *p, const unsigned char *all, const size_t *counts,
                                const size_t *displs) {
    for (int rank = 0; rank < p->size; rank++) {
        ak__reader rd = {all + displs[rank], all + displs[rank] + counts[rank], 0};
        uint32_t n = ak__read_request_count(&rd);
        for (uint32_t i = 0; i < n; i++) {
            char name[AK__NAME_MAX];
            ak__signature s;
            AK_CHECK(ak__decode_request(&rd, name, &s));
            AK_CHECK(record_request(p, rank, name, &s));
        }
    }
    return AK_OK;
}

static int row_ready(const ak__pset *p, const ak__table_row *row) {
    for (int r = 0; r < p->size; r++)
        if (row->req[r].kind < 0 && !p->joined[r]) return 0;
    return 1;
}

static const ak__signature *first_request(const ak__table_row *row, int n, int *who) {
    for (int r = 0; r < n; r++)
        if (row->req[r].kind >= 0) {
            *who = r;
            return &row->req[r];
        }
    return NULL;
}

static const char *kind_name(int kind) {
    static const char *names[] = {"allreduce", "allgather", "broadcast", "alltoall",
                                  "reducescatter", "barrier", "join", "process_set_add",
                                  "process_set_remove"};
    return kind >= 0 && kind < AK__KIND_COUNT_ ? names[kind] : "?";
}

static void shape_text(const ak__signature *s, char *buf, size_t n) {
    size_t used = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < s->ndim && used < n; d++)
        used += (size_t)snprintf(buf + used, n - used, "%s%lld", d ? "," : "", (long long)s->shape[d]);
    if (used < n) snprintf(buf + used, n - used, "]");
}

static void group_text(const ak__signature *s, char *buf, size_t n) {
    if (s->group) snprintf(buf, n, "in a group of %d", s->group_size);
    else snprintf(buf, n, "alone");
}

/* Group ids hash the members' names: different ids mean the ranks grouped the tensor
 * with different tensors (or one did not group it). */
static void group_mismatch(const ak__signature *x, int a, const ak__signature *y, int b,
                           char *msg, size_t n) {
    char gx[48], gy[48];
    group_text(x, gx, sizeof gx);
    group_text(y, gy, sizeof gy);
    if (x->group && y->group)
        snprintf(msg, n, "group mismatch: ranks %d and %d group it with different tensors "
                 "(rank %d %s, rank %d %s)", a, b, a, gx, b, gy);
    else
        snprintf(msg, n, "group mismatch: rank %d submits it %s, rank %d %s", a, gx, b, gy);
}

/* Empty string when every rank's request agrees with rank `a`'s; otherwise what differs. */
static void compare_requests(const ak__signature *x, int a, const ak__signature *y, int b,
                             char *msg, size_t n) {
    msg[0] = '\0';
    int rows_may_differ = x->kind == AK_TRAIN_ALLGATHER || x->kind == AK_TRAIN_ALLTOALL;
    char sx[160], sy[160];
    shape_text(x, sx, sizeof sx);
    shape_text(y, sy, sizeof sy);
    if (x->kind != y->kind)
        snprintf(msg, n, "op mismatch: rank %d %s, rank %d %s", a, kind_name(x->kind), b,
                 kind_name(y->kind));
    else if (x->dtype != y->dtype)
        snprintf(msg, n, "dtype mismatch: rank %d %s, rank %d %s", a, ak_dtype_name(x->dtype), b,
                 ak_dtype_name(y->dtype));
    else if (x->ndim != y->ndim ||
             memcmp(x->shape + rows_may_differ, y->shape + rows_may_differ,
                    sizeof(int64_t) * (size_t)(x->ndim > 0 ? x->ndim - rows_may_differ : 0)) != 0 ||
             (!rows_may_differ && x->ndim > 0 && x->shape[0] != y->shape[0]))
        snprintf(msg, n, "shape mismatch: rank %d %s, rank %d %s", a, sx, b, sy);
    else if (x->op != y->op)
        snprintf(msg, n, "reduce op mismatch: rank %d %s, rank %d %s", a, ak__op_name(x->op),
                 b, ak__op_name(y->op));
    else if (x->root != y->root)
        snprintf(msg, n, "root mismatch: rank %d root %d, rank %d root %d", a, x->root, b, y->root);
    else if (x->prescale != y->prescale || x->postscale != y->postscale)
        snprintf(msg, n, "scaling mismatch: rank %d (%g, %g), rank %d (%g, %g)", a, x->prescale,
                 x->postscale, b, y->prescale, y->postscale);
    else if (x->compression != y->compression)
        snprintf(msg, n, "compression mismatch: rank %d %d, rank %d %d", a, x->compression, b,
                 y->compression);
    else if (x->group != y->group || x->group_size != y->group_size)
        group_mismatch(x, a, y, b, msg, n);
    else if (x->kind == AK__KIND_PSET_ADD &&
             (x->nsplits != y->nsplits ||
              memcmp(x->splits, y->splits, sizeof(int64_t) * (size_t)x->nsplits) != 0))
        snprintf(msg, n, "ranks mismatch between rank %d and rank %d", a, b);
}

/* While ranks of the set have joined they take part in the others' ops with zeros: right
 * for a sum or an average and for an allgather (no rows), wrong for the rest. A Min, Max
 * or Product allreduce would come out as zeros (or the minimum with 0), an Adasum one would
 * count the zeros as inputs (adasum(0, b) = b, so a 3-rank tree would weigh b twice), a joined root has
 * nothing to broadcast, and alltoall / reducescatter need every rank's data. Horovod
 * refuses these too; r becomes an error response (every rank decides the same from the
 * replicated joined marks, so every rank that submitted the op gets the error). */
static ak_status refuse_if_joined(const ak__pset *p, ak__response *r) {
    const ak__signature *x = &r->sig;
    char ranks[256] = "", why[sizeof ranks + 160] = "";
    size_t used = 0;
    for (int k = 0; k < p->size; k++)
        if (p->joined[k] && used < sizeof ranks - 12)
            used += (size_t)snprintf(ranks + used, sizeof ranks - used, "%s%d", used ? "," : "", k);
    if (!used) return AK_OK;
    if (x->kind == AK_TRAIN_ALLREDUCE &&
        (x->op == AK_REDUCE_MIN || x->op == AK_REDUCE_MAX || x->op == AK_REDUCE_PROD ||
         x->op == AK_TRAIN_REDUCE_ADASUM))
        snprintf(why, sizeof why, "reduce op %s is not supported while ranks [%s] have joined "
                 "(joined ranks contribute zeros)", ak__op_name(x->op), ranks);
    else if (x->kind == AK_TRAIN_BROADCAST && p->joined[x->root])
        snprintf(why, sizeof why, "root rank %d has joined (ranks [%s] have joined): nothing "
                 "to broadcast", x->root, ranks);
    else if (x->kind != AK_TRAIN_ALLREDUCE && x->kind != AK_TRAIN_BROADCAST &&
             x->kind != AK_TRAIN_ALLGATHER && x->kind != AK_TRAIN_BARRIER)
        snprintf(why, sizeof why, "not supported while ranks [%s] have joined", ranks);
    if (!why[0]) return AK_OK;
    char full[AK__NAME_MAX + sizeof why + 32];
    snprintf(full, sizeof full, "%s '%s': %s", kind_name(x->kind), r->name, why);
    free(r->error);
    if (!(r->error = strdup(full))) return AK_FAIL(AK_ERR_NO_MEMORY, "train: out of memory");
    r->error_status = AK_ERR_UNSUPPORTED;
    return AK_OK;
}

/* Turns a ready table row into a response (or an error response naming the ranks). */
static ak_status row_response(ak__pset *p, ak__table_row *row, response_list *out) {
    int a = -1;
    const ak__signature *x = first_request(row, p->size, &a);
    ak__response *r = response_add(out, row->name);
    if (!r) return AK_FAIL(AK_ERR_NO_MEMORY, "train: out of memory");
    AK_CHECK(ak__sig_copy(&r->sig, x));
    char msg[400] = "";
    for (int b = a + 1; b < p->size && !msg[0]; b++)
        if (row->req[b].kind >= 0) compare_requests(x, a, &row->req[b], b, msg, sizeof msg);
    if (msg[0]) {
        char full[AK__NAME_MAX + 500];
        snprintf(full, sizeof full, "%s '%s': %s", kind_name(x->kind), row->name, msg);
        r->error = strdup(full);
        r->error_status = AK_ERR_MISMATCH;
    } else if (x->kind == AK_TRAIN_ALLGATHER || x->kind == AK_TRAIN_ALLTOALL) {
        r->dim0 = calloc((size_t)p->size, sizeof(int64_t));
        if (!r->dim0) return AK_FAIL(AK_ERR_NO_MEMORY, "train: out of memory");
        for (int k = 0; k < p->size; k++)
            r->dim0[k] = row->req[k].kind >= 0 ? row->req[k].shape[0] : 0;
    }
    if (!msg[0]) AK_CHECK(refuse_if_joined(p, r));
    r->entry = take_pending(p, row->name);
    trace_negotiation(r->entry);
    return AK_OK;
}

static int group_ready(const ak__pset *p, int64_t group, int size) {
    int n = 0;
    for (const ak__table_row *row = p->table; row; row = row->next) {
        int a;
        const ak__signature *s = first_request(row, p->size, &a);
        if (s && s->group == group) {
            if (!row_ready(p, row)) return 0;
            n++;
        }
    }
    return n == size;
}

static ak_status respond_row(ak_train *t, ak__pset *p, ak__table_row *row, response_list *out) {
    AK_CHECK(row_response(p, row, out));
    ak__response *r = &out->r[out->n - 1];
    if (!r->error) cache_insert(t, p, r->name, &r->sig);
    table_unlink(p, row);
    return AK_OK;
}

/* Every row of a ready group, in table order. */
static ak_status respond_group(ak_train *t, ak__pset *p, int64_t group, response_list *out) {
    ak__table_row *row = p->table;
    while (row) {
        ak__table_row *next = row->next;
        int a;
        const ak__signature *s = first_request(row, p->size, &a);
        if (s && s->group == group) AK_CHECK(respond_row(t, p, row, out));
        row = next;
    }
    return AK_OK;
}

/* Ready rows in table order (the same on every rank); a group only when all of it is,
 * and then all of it together. */
static ak_status ready_responses(ak_train *t, ak__pset *p, response_list *out) {
    ak__table_row *row = p->table;
    while (row) {
        ak__table_row *next = row->next;
        int a;
        const ak__signature *s = first_request(row, p->size, &a);
        if (row_ready(p, row) && s->group == 0) {
            AK_CHECK(respond_row(t, p, row, out));
        } else if (row_ready(p, row) && group_ready(p, s->group, s->group_size)) {
            AK_CHECK(respond_group(t, p, s->group, out));
            next = p->table; /* the group's rows are gone: rescan */
        }
        row = next;
    }
    return AK_OK;
}

ak_status ak__wire_bytes(const char *what, int64_t count, size_t elem, size_t *bytes) {
    uint64_t cap = (uint64_t)ak__param_int(AK_PARAM_COMM_MAX_BYTES);
    if (cap == 0) {
        long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
        cap = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : UINT64_MAX;
    }
    if (cap > SIZE_MAX) cap = SIZE_MAX;
    if (count < 0 || (elem && (uint64_t)count > cap / elem))
        return AK_FAIL(AK_ERR_MISMATCH, "train: %s: %lld elements of %zu bytes from other ranks "
                       "exceed AK_COMM_MAX_BYTES (%llu bytes)", what, (long long)count, elem,
                       (unsigned long long)cap);
    *bytes = (size_t)count * elem;
    return AK_OK;
}

ak_status ak__allgather_bytes(ak_comm *comm, int size, const void *mine, size_t len,
                              unsigned char **all, size_t **counts) {
    *all = NULL;
    *counts = calloc(2 * (size_t)size, sizeof(size_t));
    int64_t my_len = (int64_t)len, *lens = calloc((size_t)size, sizeof(int64_t));
    ak_status st = *counts && lens ? AK_OK : AK_FAIL(AK_ERR_NO_MEMORY, "train: out of memory");
    if (st == AK_OK) st = ak_comm_allgather(comm, &my_len, lens, 1, AK_DTYPE_I64);
    size_t total = 0, *displs = *counts ? *counts + size : NULL;
    for (int r = 0; st == AK_OK && r < size; r++) { /* lengths from the wire: bounded */
        displs[r] = total;
        st = ak__wire_bytes("negotiation message", lens[r], 1, &(*counts)[r]);
        if (st == AK_OK) st = ak__wire_bytes("negotiation messages", (int64_t)(total + (*counts)[r]), 1, &total);
    }
    if (st == AK_OK && !(*all = malloc(total ? total : 1)))
        st = AK_FAIL(AK_ERR_NO_MEMORY, "train: out of memory");
    if (st == AK_OK) st = ak_comm_allgatherv(comm, mine, len, *all, *counts, displs, AK_DTYPE_U8);
    free(lens);
    return st;
}

static ak_status negotiate(ak_train *t, ak__pset *p, response_list *out) {
    unsigned char *mine = NULL, *all = NULL;
    size_t len = 0, *counts = NULL;
    ak_status st = ak__encode_requests(p, &mine, &len);
    if (st == AK_OK) st = ak__allgather_bytes(p->comm, p->size, mine, len, &all, &counts);
    if (st == AK_OK) st = parse_requests(p, all, counts, counts + p->size);
    if (st == AK_OK) st = ready_responses(t, p, out);
    free(mine);
    free(all);
    free(counts);
    t->st_negotiations++;
    return st;
}

/* ---- join ---------------------------------------------------------------------------- */

static void finish_join(ak_train *t, ak__pset *p) {
    ak__entry *j = pending_join(p);
    if (j) {
        take_pending(p, j->name);
        pthread_mutex_lock(&t->lock);
        j->join_last_rank = p->last_joined;
        pthread_mutex_unlock(&t->lock);
        ak__train_complete(t, j, AK_OK, NULL);
    }
    memset(p->joined, 0, (size_t)p->size);
    p->last_joined = -1;
}

/* ---- stall inspector ----------------------------------------------------------------- */

/* The ranks (global numbering of the set: its index) that did and did not submit row. */
static void row_ranks(const ak__pset *p, const ak__table_row *row, char *have, char *missing,
                      size_t cap) {
    size_t m = 0, h = 0;
    have[0] = missing[0] = '\0';
    for (int r = 0; r < p->size; r++) {
        int got = row->req[r].kind >= 0 || p->joined[r];
        char *buf = got ? have : missing;
        size_t *used = got ? &h : &m;
        if (*used < cap - 12)
            *used += (size_t)snprintf(buf + *used, cap - *used, "%s%d", *used ? "," : "", r);
    }
}

static void warn_stalled_row(const ak__pset *p, const ak__table_row *row, double waited) {
    char missing[512], have[512];
    row_ranks(p, row, have, missing, sizeof missing);
    AK_LOG_WARN(AK_SUBSYS_TRAIN,
                "stall: '%s' (process set %d) has waited %.0f s: submitted by ranks [%s], "
                "not yet by ranks [%s]",
                row->name, p->id, waited, have, missing);
}

/* Returns 1 when a stall lasted past the shutdown time. */
static int inspect_stalls(ak_train *t, ak__pset *p) {
    if (t->stall_check_s <= 0) return 0;
    uint64_t now = ak_now_ns();
    int stop = 0;
    for (ak__table_row *row = p->table; row; row = row->next) {
        double waited = (double)(now - row->first_ns) / 1e9;
        if (waited >= t->stall_check_s && !row->stall_warned) {
            row->stall_warned = 1;
            if (p->rank == 0) warn_stalled_row(p, row, waited);
        }
        if (t->stall_shutdown_s > 0 && waited >= t->stall_shutdown_s) stop = 1;
    }
    /* cached ops are invisible to the coordinator: a long wait sends them through it */
    for (ak__entry *e = p->pending; e; e = e->next) {
        double waited = (double)(now - e->enqueue_ns) / 1e9;
        if (e->cache_slot >= 0 && !e->stall_demoted && waited >= t->stall_check_s / 2) {
            e->stall_demoted = 1;
            p->invalid[e->cache_slot] = 1;
        }
    }
    return stop;
}

/* Why the runtime stops when a rank shut down (why = 1) or an op stalled past the shutdown
 * time (why = 2): the op that waited longest in the replicated table (the same on every
 * rank), with the ranks that did not submit it, so that every rank's error names them. */
static void describe_stop(ak_train *t, const ak__pset *p, int why, char *msg, size_t cap) {
    const ak__table_row *oldest = NULL;
    for (const ak__table_row *row = p->table; row; row = row->next)
        if (!oldest || row->first_ns < oldest->first_ns) oldest = row;
    const char *what = why == 2 ? "a stalled op shut the training runtime down on every rank"
                                : "a rank shut the training runtime down";
    if (!oldest) { /* not negotiated yet: this rank's oldest pending op, if any */
        const ak__entry *e = p->pending;
        for (const ak__entry *x = p->pending; x; x = x->next)
            if (x->enqueue_ns < e->enqueue_ns) e = x;
        if (e) snprintf(msg, cap, "%s while '%.200s' (process set %d) was pending on this rank",
                        what, e->name, p->id);
        else snprintf(msg, cap, "%s", what);
        return;
    }
    char missing[256], have[256];
    row_ranks(p, oldest, have, missing, sizeof missing);
    double waited = (double)(ak_now_ns() - oldest->first_ns) / 1e9;
    if (why == 2)
        snprintf(msg, cap, "%s: '%.120s' (process set %d) waited %.1f s for ranks [%.80s] (submitted by "
                 "ranks [%.80s]; HOROVOD_STALL_SHUTDOWN_TIME_SECONDS=%g)", what, oldest->name, p->id,
                 waited, missing, have, t->stall_shutdown_s);
    else
        snprintf(msg, cap, "%s while '%.160s' (process set %d) waited for ranks [%.100s] (submitted by "
                 "ranks [%.100s])", what, oldest->name, p->id, missing, have);
}

/* ---- one cycle of one process set ---------------------------------------------------- */

static ak_status exchange_state(ak_train *t, ak__pset *p, unsigned char **v, int *nslots,
                                int stall_stop) {
    *nslots = p->cache_used;
    size_t n = F_COUNT + 2 * (size_t)*nslots;
    *v = malloc(n);
    if (!*v) return AK_FAIL(AK_ERR_NO_MEMORY, "train: out of memory");
    build_state(t, p, *v, stall_stop);
    uint64_t t0 = ak_now_ns();
    ak_status st = ak_comm_allreduce(p->comm, AK_IN_PLACE, *v, n, AK_DTYPE_U8, AK_REDUCE_MIN);
    t->st_negotiate_ns += ak_now_ns() - t0;
    t->st_cycles++;
    return st;
}

static uint64_t thread_cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static ak_status pset_cycle(ak_train *t, ak__pset *p, int *stop) {
    uint64_t cpu0 = thread_cpu_ns();
    take_incoming(t, p);
    int stall_stop = inspect_stalls(t, p);
    unsigned char *v = NULL;
    int nslots = 0;
    ak_status st = exchange_state(t, p, &v, &nslots, stall_stop);
    if (st != AK_OK) {
        free(v);
        return st;
    }
    if (!v[F_ALIVE] || !v[F_NO_STALL_STOP]) {
        *stop = v[F_ALIVE] ? 2 : 1;
        describe_stop(t, p, *stop, t->stop_msg, sizeof t->stop_msg);
        free(v);
        return AK_OK;
    }
    response_list list = {0};
    const unsigned char *hit = v + F_COUNT, *valid = hit + nslots;
    apply_invalid(p, valid, nslots);
    if (!v[F_JOINED]) st = cached_responses(t, p, hit, nslots, &list);
    uint64_t t0 = ak_now_ns();
    if (st == AK_OK && !v[F_NO_UNCACHED]) st = negotiate(t, p, &list);
    t->st_negotiate_ns += ak_now_ns() - t0;
    t->st_negotiate_cpu_ns += thread_cpu_ns() - cpu0;
    if (st == AK_OK && v[F_JOINED]) finish_join(t, p);
    if (st == AK_OK && list.n) st = ak__exec_responses(t, p, list.r, list.n);
    if (st == AK_OK && list.n && t->autotune) st = ak__autotune_update(t, p, list.r, list.n);
    free(v);
    responses_free(&list);
    return st;
}

/* ---- the thread ---------------------------------------------------------------------- */

static void fail_everything(ak_train *t, ak_status st, const char *msg) {
    pthread_mutex_lock(&t->lock);
    if (t->failed == AK_OK) {
        t->failed = st;
        snprintf(t->failed_msg, sizeof t->failed_msg, "%s", msg);
    }
    pthread_mutex_unlock(&t->lock);
    for (int i = 0; i < t->npsets; i++)
        if (t->psets[i]) ak__pset_fail_all(t, t->psets[i], st, msg);
}

static ak_status cycle_all(ak_train *t, int *stop) {
    char msg[512];
    ak_status failed = ak__streams_failed(t, msg, sizeof msg);
    if (failed != AK_OK) return AK_FAIL(failed, "%s", msg);
    for (int i = 0; i < t->npsets && !*stop; i++) {
        ak__pset *p = t->psets[i];
        if (p && p->active && p->comm) AK_CHECK(pset_cycle(t, p, stop));
    }
    return AK_OK;
}

static void sleep_until(ak_train *t, uint64_t deadline_ns) {
    pthread_mutex_lock(&t->lock);
    while (!t->shutdown_requested) {
        uint64_t now = ak_now_ns();
        if (now >= deadline_ns) break;
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t wake = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec +
                        (deadline_ns - now);
        ts.tv_sec = (time_t)(wake / 1000000000ull);
        ts.tv_nsec = (long)(wake % 1000000000ull);
        pthread_mutex_unlock(&t->lock);
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
        pthread_mutex_lock(&t->lock);
    }
    pthread_mutex_unlock(&t->lock);
}

void *ak__train_bg_main(void *arg) {
    ak_train *t = arg;
    /* here, not in ak_train_init: splitting is collective, and init is not */
    int started = ak__streams_start(t) == AK_OK;
    if (!started) {
        char msg[600];
        snprintf(msg, sizeof msg, "cannot start the fusion streams: %s", ak_last_error());
        fail_everything(t, AK_ERR_REMOTE, msg);
    }
    while (started) {
        uint64_t cycle_ns = (uint64_t)(t->cycle_ms * 1e6); /* autotune may change it */
        uint64_t start = ak_now_ns();
        int stop = 0;
        ak_status st = cycle_all(t, &stop);
        if (st != AK_OK) {
            char msg[600];
            snprintf(msg, sizeof msg, "a collective of the training runtime failed (lost peer?): %s",
                     ak_last_error());
            fail_everything(t, st, msg);
            break;
        }
        if (stop) {
            fail_everything(t, stop == 2 ? AK_ERR_TIMEOUT : AK_ERR_REMOTE, t->stop_msg);
            break;
        }
        ak__train_heap_advise();
        sleep_until(t, start + cycle_ns);
    }
    pthread_mutex_lock(&t->lock);
    t->bg_exited = 1;
    pthread_cond_broadcast(&t->changed);
    pthread_mutex_unlock(&t->lock);
    return NULL;
}
