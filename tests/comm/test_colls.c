/* Tests of the collectives whose algorithm the cost model chooses besides allreduce
 * (reduce, broadcast, allgather(v), reduce_scatter), every algorithm forced, as threads of
 * one process (rank_threads.h) over world sizes {1,2,3,4,5,8}:
 * - through the operations with config.algo set as AK_COMM_ALGO sets it (ring → the
 *   ring-based algorithm, rd → the log-step one): every dtype × op × count {0,1,7,64,1000},
 *   in and out of place, roots and uneven allgatherv layouts varying, and an odd ~1M
 *   count for a few (dtype, op) pairs; results exact, guard bytes intact, send buffers
 *   unchanged;
 * - the new algorithms called directly on groups that are not the identity (two
 *   interleaved groups at once, one in reverse order), with counts that do not divide
 *   into the group, gapped allgatherv layouts and separate inputs. */
#include "rank_threads.h"

static const size_t op_counts[] = {0, 1, 7, 64, 1000};
static const ak_comm_algo forced[] = {AK_COMM_ALGO_RING, AK_COMM_ALGO_RECURSIVE_DOUBLING};

/* ---- through the operations ------------------------------------------------------------ */

/* The k-th case of a sweep: which root, whether in place. */
typedef struct op_case {
    reduce_case k; /* seed, count (per rank block for allgather / reduce_scatter), dtype, op */
    int root, in_place;
} op_case;

static int intact(rank_ctx *x, guarded_buf *b, const char *what) {
    return guarded_intact(b) ? 0 : rank_fail(x, "%s wrote outside its buffer", what);
}

/* The send buffer of an out-of-place call must come back as it went in. */
static int unchanged(rank_ctx *x, const reduce_case *k, const void *in, const char *what) {
    guarded_buf want = guarded_alloc(k->count * dtype_size(k->dt), 0);
    fill_input(k, x->rank, want.data);
    int rc = memcmp(want.data, in, k->count * dtype_size(k->dt)) ? rank_fail(x, "%s changed its input", what) : 0;
    guarded_free(&want);
    return rc;
}

static int op_reduce(rank_ctx *x, const op_case *o) {
    const reduce_case *k = &o->k;
    size_t bytes = k->count * dtype_size(k->dt);
    int root = x->rank == o->root, ip = o->in_place && root;
    guarded_buf in = guarded_alloc(bytes, 0), out = guarded_alloc(bytes, 0);
    fill_input(k, x->rank, ip ? out.data : in.data);
    const char *what = ip ? "reduce in place" : "reduce";
    int rc = check_st(x, ak_comm_reduce(x->comm, ip ? AK_IN_PLACE : in.data, root ? out.data : NULL,
                                        k->count, k->dt, k->op, o->root), what);
    if (!rc && root) rc = check_reduced(x, k, x->ranks, x->n, out.data, 0, k->count, what);
    if (!rc) rc = intact(x, &out, what) || intact(x, &in, what);
    if (!rc && !ip) rc = unchanged(x, k, in.data, what);
    guarded_free(&in);
    guarded_free(&out);
    return rc;
}

/* Every rank ends with the root's input (encoded with the root's values). */
static int op_broadcast(rank_ctx *x, const op_case *o) {
    const reduce_case *k = &o->k;
    size_t bytes = k->count * dtype_size(k->dt);
    guarded_buf b = guarded_alloc(bytes, 0), want = guarded_alloc(bytes, 0);
    fill_input(k, o->root, want.data);
    if (x->rank == o->root) memcpy(b.data, want.data, bytes);
    else memset(b.data, 0xEE, bytes);
    int rc = check_st(x, ak_comm_broadcast(x->comm, b.data, k->count, k->dt, o->root), "broadcast");
    if (!rc && memcmp(b.data, want.data, bytes))
        rc = rank_fail(x, "broadcast root %d count %zu %s differs", o->root, k->count,
                       ak_dtype_name(k->dt));
    if (!rc) rc = intact(x, &b, "broadcast");
    guarded_free(&b);
    guarded_free(&want);
    return rc;
}

#define GAP 2        /* elements left between allgatherv blocks: must stay untouched */
#define SENTINEL 0x5A

/* allgather (uniform: v = 0) or allgatherv (v = 1: rank r contributes (r + seed) % 3 ×
 * count elements, blocks GAP apart, some empty). Block r holds rank r's input. */
static int op_allgather(rank_ctx *x, const op_case *o, int v) {
    const reduce_case *k = &o->k;
    size_t es = dtype_size(k->dt), cnt[MAX_W], displs[MAX_W], total = 0;
    for (int r = 0; r < x->n; r++) {
        cnt[r] = v ? (size_t)((r + (int)k->seed) % 3) * k->count : k->count;
        displs[r] = total + (v ? GAP : 0);
        total = displs[r] + cnt[r];
    }
    reduce_case mine = *k;
    mine.count = cnt[x->rank];
    guarded_buf in = guarded_alloc(mine.count * es, 0), out = guarded_alloc(total * es, 0);
    memset(out.data, SENTINEL, total * es);
    char *slot = (char *)out.data + displs[x->rank] * es;
    fill_input(&mine, x->rank, o->in_place ? (void *)slot : in.data);
    const void *send = o->in_place ? AK_IN_PLACE : in.data;
    const char *what = v ? (o->in_place ? "allgatherv in place" : "allgatherv")
                         : (o->in_place ? "allgather in place" : "allgather");
    ak_status st = v ? ak_comm_allgatherv(x->comm, send, mine.count, out.data, cnt, displs, k->dt)
                     : ak_comm_allgather(x->comm, send, out.data, k->count, k->dt);
    int rc = check_st(x, st, what);
    guarded_buf want = guarded_alloc(total * es, 0);
    memset(want.data, SENTINEL, total * es);
    for (int r = 0; r < x->n; r++) {
        reduce_case theirs = *k;
        theirs.count = cnt[r];
        fill_input(&theirs, r, (char *)want.data + displs[r] * es);
    }
    if (!rc && memcmp(out.data, want.data, total * es))
        rc = rank_fail(x, "%s count %zu %s: result (blocks or gaps) differs", what, k->count,
                       ak_dtype_name(k->dt));
    if (!rc) rc = intact(x, &out, what) || intact(x, &in, what);
    if (!rc && !o->in_place) rc = unchanged(x, &mine, in.data, what);
    guarded_free(&want);
    guarded_free(&in);
    guarded_free(&out);
    return rc;
}

/* Rank r ends with block r (count elements) of the reduction of all n × count inputs; in
 * place the input is all of recvbuf and the result lands at its start. */
static int op_reduce_scatter(rank_ctx *x, const op_case *o) {
    reduce_case all = o->k;
    all.count = o->k.count * (size_t)x->n;
    size_t es = dtype_size(all.dt);
    guarded_buf in = guarded_alloc(all.count * es, 0);
    guarded_buf out = guarded_alloc((o->in_place ? all.count : o->k.count) * es, 0);
    fill_input(&all, x->rank, o->in_place ? out.data : in.data);
    const char *what = o->in_place ? "reduce_scatter in place" : "reduce_scatter";
    int rc = check_st(x, ak_comm_reduce_scatter(x->comm, o->in_place ? AK_IN_PLACE : in.data,
                                                out.data, o->k.count, all.dt, all.op), what);
    if (!rc)
        rc = check_reduced_at(x, &all, x->ranks, x->n, out.data, 0, o->k.count,
                              (size_t)x->rank * o->k.count, what);
    if (!rc) rc = intact(x, &out, what) || intact(x, &in, what);
    if (!rc && !o->in_place) rc = unchanged(x, &all, in.data, what);
    guarded_free(&in);
    guarded_free(&out);
    return rc;
}

/* One case of every operation that takes it (dtype-only ones once per op loop). */
static int ops_case(rank_ctx *x, const op_case *o, int first_op) {
    if (op_reduce(x, o) || op_reduce_scatter(x, o)) return -1;
    if (!first_op) return 0;
    return op_broadcast(x, o) || op_allgather(x, o, 0) || op_allgather(x, o, 1) ? -1 : 0;
}

/* A few (dtype, op) pairs at an odd ~1M count (allgather and reduce_scatter: about 1M
 * elements in all). */
static int ops_huge(rank_ctx *x) {
    static const struct {
        ak_dtype dt;
        ak_reduce_op op;
    } pairs[] = {{AK_DTYPE_F32, AK_REDUCE_SUM}, {AK_DTYPE_BF16, AK_REDUCE_AVG}, {AK_DTYPE_I32, AK_REDUCE_MAX}};
    for (size_t p = 0; p < NELEM(pairs); p++) {
        op_case o = {{p + 77, HUGE_COUNT, pairs[p].dt, pairs[p].op}, (int)p % x->n, (int)p % 2};
        if (op_reduce(x, &o) || op_broadcast(x, &o)) return -1;
        o.k.count = (HUGE_COUNT / (size_t)x->n) | 1;
        if (op_reduce_scatter(x, &o) || op_allgather(x, &o, 0)) return -1;
    }
    return 0;
}

static int ops_rank(rank_ctx *x) {
    x->comm->config.algo = *(const ak_comm_algo *)x->arg;
    int seq = 0;
    for (size_t ci = 0; ci < NELEM(op_counts); ci++)
        for (int d = 0; d < AK_DTYPE_COUNT_; d++)
            for (int op = 0; op < AK_REDUCE_COUNT_; op++)
                for (int ip = 0; ip < 2; ip++, seq++) {
                    op_case o = {{(uint64_t)seq, op_counts[ci], (ak_dtype)d, (ak_reduce_op)op},
                                 seq % x->n, ip};
                    if (ops_case(x, &o, op == 0)) return -1;
                }
    return ops_huge(x);
}

static void test_ops_forced(void **state) {
    (void)state;
    for (size_t a = 0; a < NELEM(forced); a++)
        for (size_t w = 0; w < NELEM(world_sizes); w++) run_world(world_sizes[w], ops_rank, &forced[a]);
}

/* ---- the algorithms on groups that are not the identity --------------------------------- */

/* Even ranks in reverse order and odd ranks in order, at the same time: group index and
 * communicator rank differ, and two groups share the transports. */
static ak__group parity_group(const rank_ctx *x, int *members) {
    int m = 0, me = -1;
    for (int i = 0; i < x->n; i++) {
        int r = x->rank % 2 == 0 ? (x->n - 1 - i) : i;
        if (r % 2 != x->rank % 2) continue;
        if (r == x->rank) me = m;
        members[m++] = r;
    }
    return (ak__group){members, m, me};
}

typedef ak_status (*allgatherv_fn)(const ak__algo_ctx *, const ak__group *, void *, const size_t *,
                                   const size_t *, size_t, uint64_t);

/* Group index b contributes (b * 5 + 2) % 4 × scale i32 elements (some none), `gap`
 * elements apart; every element checked, gaps included. */
static int group_allgatherv(rank_ctx *x, const ak__group *g, allgatherv_fn fn, size_t scale,
                            size_t gap) {
    size_t cnt[MAX_W], displs[MAX_W], total = 0;
    for (int b = 0; b < g->n; b++) {
        cnt[b] = (size_t)((b * 5 + 2) % 4) * scale;
        displs[b] = total + gap;
        total = displs[b] + cnt[b];
    }
    int32_t *buf = malloc((total + 1) * sizeof *buf);
    for (size_t i = 0; i < total; i++) buf[i] = -7;
    for (size_t i = 0; i < cnt[g->me]; i++) buf[displs[g->me] + i] = g->ranks[g->me] * 1000003 + (int32_t)i;
    uint64_t tag = ak__comm_next_tag(x->comm, 20, total, 0, 0, g->ranks[0]);
    int rc = check_st(x, fn(ak__comm_algo(x->comm), g, buf, cnt, displs, sizeof *buf, tag), "group allgatherv");
    for (int b = 0, next = 0; b < g->n && !rc; b++) {
        for (; (size_t)next < displs[b] && !rc; next++)
            if (buf[next] != -7) rc = rank_fail(x, "group allgatherv wrote gap element %d", next);
        for (size_t i = 0; i < cnt[b] && !rc; i++, next++)
            if (buf[next] != g->ranks[b] * 1000003 + (int32_t)i)
                rc = rank_fail(x, "group allgatherv (scale %zu, gap %zu): block %d [%zu] differs",
                               scale, gap, b, i);
    }
    free(buf);
    return rc;
}

/* Recursive halving with a separate input (odd seeds) or in place, counts that do not
 * divide into the group: block b of ak__block_range ends reduced on group index b. */
static int group_reduce_scatter(rank_ctx *x, const ak__group *g, const reduce_case *k) {
    size_t bytes = k->count * dtype_size(k->dt), off, len;
    int separate = (int)(k->seed % 2);
    guarded_buf b = guarded_alloc(bytes, 0), in = guarded_alloc(separate ? bytes : 0, 0);
    fill_input(k, x->rank, separate ? in.data : b.data);
    uint64_t tag = ak__comm_next_tag(x->comm, 21, k->count, (int)k->dt, (int)k->op, g->ranks[0]);
    int rc = check_st(x, ak__reduce_scatter_halving(ak__comm_algo(x->comm), g, separate ? in.data : b.data, b.data,
                                                    k->count, k->dt, k->op, tag), "halving");
    ak__block_range(k->count, g->n, g->me, &off, &len);
    if (!rc) rc = check_reduced(x, k, g->ranks, g->n, b.data, off, off + len, "halving");
    if (!rc) rc = intact(x, &b, "halving");
    if (!rc && separate) rc = unchanged(x, k, in.data, "halving");
    guarded_free(&in);
    guarded_free(&b);
    return rc;
}

static unsigned char byte_at(int root, size_t i) { return (unsigned char)(mix((uint64_t)root * 31 + i) & 0xff); }

/* Scatter + allgather broadcast from group index root: every byte checked. */
static int group_broadcast(rank_ctx *x, const ak__group *g, size_t bytes, int root) {
    guarded_buf b = guarded_alloc(bytes, 0);
    unsigned char *p = b.data;
    for (size_t i = 0; i < bytes; i++) p[i] = g->me == root ? byte_at(g->ranks[root], i) : 0;
    uint64_t tag = ak__comm_next_tag(x->comm, 22, bytes, 0, 0, g->ranks[root]);
    int rc = check_st(x, ak__broadcast_scatter_allgather(ak__comm_algo(x->comm), g, p, bytes, root, tag),
                      "scatter-allgather broadcast");
    for (size_t i = 0; i < bytes && !rc; i++)
        if (p[i] != byte_at(g->ranks[root], i))
            rc = rank_fail(x, "scatter-allgather broadcast root %d, %zu bytes: byte %zu differs",
                           root, bytes, i);
    if (!rc) rc = intact(x, &b, "scatter-allgather broadcast");
    guarded_free(&b);
    return rc;
}

/* Reduce-scatter + gather to group index root from a separate input. */
static int group_reduce(rank_ctx *x, const ak__group *g, const reduce_case *k, int root) {
    size_t bytes = k->count * dtype_size(k->dt);
    guarded_buf b = guarded_alloc(bytes, 0), in = guarded_alloc(bytes, 0);
    fill_input(k, x->rank, in.data);
    uint64_t tag = ak__comm_next_tag(x->comm, 23, k->count, (int)k->dt, (int)k->op, g->ranks[root]);
    int rc = check_st(x, ak__reduce_scatter_gather(ak__comm_algo(x->comm), g, in.data, b.data, k->count, k->dt,
                                                   k->op, root, tag), "reduce-scatter + gather");
    if (!rc && g->me == root) rc = check_reduced(x, k, g->ranks, g->n, b.data, 0, k->count, "rs+gather");
    if (!rc) rc = intact(x, &b, "reduce-scatter + gather");
    if (!rc) rc = unchanged(x, k, in.data, "reduce-scatter + gather");
    guarded_free(&in);
    guarded_free(&b);
    return rc;
}

static int groups_rank(rank_ctx *x) {
    int members[MAX_W];
    ak__group g = parity_group(x, members);
    static const allgatherv_fn ag[] = {ak__allgatherv_recursive_doubling, ak__allgatherv_bruck};
    static const size_t sizes[] = {1, 7, 1000, BIG_COUNT};
    static const ak_dtype dts[] = {AK_DTYPE_F32, AK_DTYPE_BF16, AK_DTYPE_I8, AK_DTYPE_I64};
    for (size_t a = 0; a < NELEM(ag); a++)
        for (size_t gap = 0; gap < 2; gap++)
            if (group_allgatherv(x, &g, ag[a], 1, gap) || group_allgatherv(x, &g, ag[a], 4099, gap))
                return -1;
    for (size_t si = 0; si < NELEM(sizes); si++)
        for (int root = 0; root < g.n; root++) {
            reduce_case k = {si * 7 + (size_t)root, sizes[si], dts[(si + (size_t)root) % NELEM(dts)],
                             (ak_reduce_op)((si + (size_t)root) % 4)};
            if (group_reduce_scatter(x, &g, &k) || group_broadcast(x, &g, sizes[si], root) ||
                group_reduce(x, &g, &k, root))
                return -1;
        }
    return 0;
}

static void test_groups(void **state) {
    (void)state;
    static const int ns[] = {1, 2, 3, 4, 5, 8}; /* groups of 1 to 4 */
    for (size_t w = 0; w < NELEM(ns); w++) run_world(ns[w], groups_rank, NULL);
}

int main(void) {
    if (ak_init() != AK_OK) {
        fprintf(stderr, "ak_init failed: %s\n", ak_last_error());
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_groups),
        cmocka_unit_test(test_ops_forced),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
