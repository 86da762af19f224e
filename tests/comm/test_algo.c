/* Tests of the collective algorithms (src/comm/algo), called directly on groups: worlds of
 * threads (ak_comm_init_local, mem transport), one thread per rank, inputs whose exact
 * result follows from (seed, rank, index) and every output element checked. Covers the
 * allreduce algorithms over world sizes {1,2,3,4,5,8} × counts (up to an odd ~1M) ×
 * dtypes × ops (AVG through the operation layer with the algorithm forced), the
 * hierarchical one on faked host topologies (balanced, interleaved, unbalanced), groups
 * that are not the identity, reduce-scatter, allgatherv, broadcast / reduce from every
 * root, gather / scatter, alltoallv, barrier ordering, and the p2p layer's tags and
 * failures. */
#include <time.h>

#include "rank_threads.h"

static const size_t counts[] = {0, 1, 7, 64, 1000, BIG_COUNT};
/* the allreduce sweep's: one odd ~1M count more */
static const size_t allreduce_counts[] = {0, 1, 7, 64, 1000, BIG_COUNT, HUGE_COUNT};

/* ---- allreduce algorithms --------------------------------------------------------------- */

typedef enum alg { ALG_RING, ALG_RD, ALG_TREE, ALG_HIER, ALG_HIER_PIPE, ALG_COUNT } alg;
static const char *const alg_names[] = {"ring", "recursive doubling", "tree", "hierarchical",
                                        "hierarchical pipelined"};

static const ak_comm_algo alg_forced[] = {AK_COMM_ALGO_RING, AK_COMM_ALGO_RECURSIVE_DOUBLING,
                                          AK_COMM_ALGO_TREE, AK_COMM_ALGO_HIERARCHICAL,
                                          AK_COMM_ALGO_HIER_PIPE};

/* The pipelined hierarchical allreduce's chunk here: 24 bytes (3 f64, 24 i8) up to
 * 1000 elements, so small counts make many chunks, a short last one and chunks with
 * empty blocks; an odd seventh of larger ones (8 chunks, the last short). */
static size_t test_pipe_chunk(size_t count, ak_dtype dt) {
    return count <= 1000 ? 24 : (count / 7 | 1) * dtype_size(dt);
}

/* src == buf runs in place; the ring and hierarchical ones also take a separate src. AVG
 * is not an algorithm's op (the operation layer sums, then divides): it runs through
 * ak_comm_allreduce with the algorithm forced, on the whole communicator. */
static ak_status run_allreduce(alg a, ak_comm *c, const ak__group *g, const void *src, void *buf,
                               const reduce_case *k, uint64_t tag) {
    if (k->op == AK_REDUCE_AVG) {
        if (g->n != c->size) return AK_ERR_INTERNAL; /* a test bug: AVG on a subgroup */
        ak_comm_algo saved = c->config.algo;
        c->config.algo = alg_forced[a];
        ak_status st = ak_comm_allreduce(c, src == buf ? AK_IN_PLACE : src, buf, k->count,
                                         k->dt, AK_REDUCE_AVG);
        c->config.algo = saved;
        return st;
    }
    switch (a) {
    case ALG_RING: return ak__allreduce_ring(ak__comm_algo(c), g, src, buf, k->count, k->dt, k->op, tag);
    case ALG_RD: return ak__allreduce_recursive_doubling(ak__comm_algo(c), g, buf, k->count, k->dt, k->op, tag);
    case ALG_TREE: return ak__allreduce_tree(ak__comm_algo(c), g, buf, k->count, k->dt, k->op, tag);
    case ALG_HIER_PIPE:
        return ak__allreduce_hier_pipe(ak__comm_algo(c), src, buf, k->count, k->dt, k->op,
                                       test_pipe_chunk(k->count, k->dt), tag);
    default: return ak__allreduce_hierarchical(ak__comm_algo(c), src, buf, k->count, k->dt, k->op, tag);
    }
}

/* One allreduce on group g: fill, run, check every element and the guard bytes. Odd
 * seeds run the ring and hierarchical algorithms out of place, from a separate input
 * that must come back untouched. */
static int allreduce_once(rank_ctx *x, alg a, const ak__group *g, const reduce_case *k) {
    size_t bytes = k->count * dtype_size(k->dt);
    int separate = (a == ALG_RING || a == ALG_HIER || a == ALG_HIER_PIPE) && k->seed % 2;
    guarded_buf b = guarded_alloc(bytes, 0), in = guarded_alloc(separate ? bytes : 0, 0);
    fill_input(k, g->ranks[g->me], separate ? in.data : b.data);
    uint64_t tag = ak__comm_next_tag(x->comm, 1, k->count, (int)k->dt, (int)k->op, 0);
    char what[64];
    snprintf(what, sizeof what, "allreduce %s%s", alg_names[a], separate ? " out of place" : "");
    int rc = check_st(x, run_allreduce(a, x->comm, g, separate ? in.data : b.data, b.data, k, tag),
                      what);
    if (!rc) rc = check_reduced(x, k, g->ranks, g->n, b.data, 0, k->count, what);
    if (!rc && !guarded_intact(&b)) rc = rank_fail(x, "%s wrote outside the buffer", what);
    if (!rc && separate) {
        guarded_buf want = guarded_alloc(bytes, 0);
        fill_input(k, g->ranks[g->me], want.data);
        if (memcmp(want.data, in.data, bytes) || !guarded_intact(&in))
            rc = rank_fail(x, "%s changed its input", what);
        guarded_free(&want);
    }
    guarded_free(&in);
    guarded_free(&b);
    return rc;
}

/* Every dtype and op for small counts; a few representative ones for the large counts. */
static int case_selected(size_t count, ak_dtype dt, ak_reduce_op op) {
    if (count == HUGE_COUNT)
        return (dt == AK_DTYPE_F32 && op == AK_REDUCE_AVG) ||
               (dt == AK_DTYPE_BF16 && op == AK_REDUCE_SUM);
    if (count != BIG_COUNT) return 1;
    return (dt == AK_DTYPE_F32 && (op == AK_REDUCE_SUM || op == AK_REDUCE_MAX)) ||
           (dt == AK_DTYPE_BF16 && op == AK_REDUCE_SUM) ||
           (dt == AK_DTYPE_I32 && (op == AK_REDUCE_PROD || op == AK_REDUCE_AVG));
}

typedef struct sweep {
    const alg *algs;
    int nalgs;
    const ak_dtype *dtypes; /* NULL: all */
    int ndtypes;
} sweep;

static int sweep_rank(rank_ctx *x) {
    const sweep *s = x->arg;
    int ndt = s->dtypes ? s->ndtypes : AK_DTYPE_COUNT_;
    for (size_t ci = 0; ci < NELEM(allreduce_counts); ci++)
        for (int d = 0; d < ndt; d++)
            for (int op = 0; op < AK_REDUCE_COUNT_; op++) {
                ak_dtype dt = s->dtypes ? s->dtypes[d] : (ak_dtype)d;
                size_t count = allreduce_counts[ci];
                if (!case_selected(count, dt, (ak_reduce_op)op)) continue;
                reduce_case k = {ci * 131 + (size_t)d * 7 + (size_t)op, count, dt,
                                 (ak_reduce_op)op};
                for (int a = 0; a < s->nalgs; a++)
                    if (allreduce_once(x, s->algs[a], &x->world, &k)) return -1;
            }
    return 0;
}

static void test_allreduce_flat(void **state) {
    /* hierarchical on the real topology of a local world: one host of n ranks */
    static const alg algs[] = {ALG_RING, ALG_RD, ALG_TREE, ALG_HIER};
    sweep s = {algs, (int)NELEM(algs), NULL, 0};
    for (size_t w = 0; w < NELEM(world_sizes); w++) run_world(world_sizes[w], sweep_rank, &s);
}

/* Every rank must end with the same bits even where an op's result could depend on the
 * operand order (MIN/MAX of +0 and -0): recursive doubling computes the result on every
 * rank, so it orders operands by group index; the kernels also make ±0 symmetric. */
#define ZEROS 64
typedef struct zero_results {
    uint32_t bits[ALG_COUNT][2][MAX_W][ZEROS];
} zero_results;

static int signed_zero_rank(rank_ctx *x) {
    zero_results *out = (zero_results *)(uintptr_t)x->arg;
    for (int a = ALG_RING; a <= ALG_TREE; a++)
        for (int o = 0; o < 2; o++) {
            float buf[ZEROS];
            for (int i = 0; i < ZEROS; i++) buf[i] = ((x->rank + i) % 3) ? 0.0f : -0.0f;
            reduce_case k = {0, ZEROS, AK_DTYPE_F32, o ? AK_REDUCE_MAX : AK_REDUCE_MIN};
            uint64_t tag = ak__comm_next_tag(x->comm, 1, ZEROS, 0, (int)k.op, 0);
            if (check_st(x, run_allreduce((alg)a, x->comm, &x->world, buf, buf, &k, tag), "zeros"))
                return -1;
            memcpy(out->bits[a][o][x->rank], buf, sizeof buf);
        }
    return 0;
}

static void test_signed_zero_agreement(void **state) {
    static const int ns[] = {3, 4, 5, 8};
    zero_results *res = calloc(1, sizeof *res);
    for (size_t w = 0; w < NELEM(ns); w++) {
        run_world(ns[w], signed_zero_rank, res);
        for (int a = ALG_RING; a <= ALG_TREE; a++)
            for (int o = 0; o < 2; o++)
                for (int r = 1; r < ns[w]; r++)
                    if (memcmp(res->bits[a][o][r], res->bits[a][o][0], sizeof res->bits[a][o][0]))
                        fail_msg("%s %s: rank %d and rank 0 disagree on the bits of ±0",
                                 alg_names[a], o ? "max" : "min", r);
    }
    free(res);
}

/* ---- hierarchical on faked topologies --------------------------------------------------- */

typedef struct topo_save {
    int *host_of, *local_index_of, *same_host_ranks;
    int local_rank, local_size, host_index, host_count;
} topo_save;

typedef struct fake_topo {
    int host_of[MAX_W], local_index_of[MAX_W], same_host_ranks[MAX_W];
} fake_topo;

/* Points comm's topology fields at t, built from hosts[] (numbered by lowest rank), as
 * comm.c would; the algorithm reads nothing else. */
static void topo_apply(ak_comm *c, fake_topo *t, const int *hosts, topo_save *save) {
    *save = (topo_save){c->host_of, c->local_index_of, c->same_host_ranks,
                        c->local_rank, c->local_size, c->host_index, c->host_count};
    int per_host[MAX_W] = {0}, host_count = 0;
    for (int r = 0; r < c->size; r++) {
        t->host_of[r] = hosts[r];
        t->local_index_of[r] = per_host[hosts[r]]++;
        if (hosts[r] + 1 > host_count) host_count = hosts[r] + 1;
    }
    c->host_of = t->host_of;
    c->local_index_of = t->local_index_of;
    c->same_host_ranks = t->same_host_ranks;
    c->host_index = hosts[c->rank];
    c->host_count = host_count;
    c->local_rank = t->local_index_of[c->rank];
    c->local_size = 0;
    for (int r = 0; r < c->size; r++)
        if (hosts[r] == c->host_index) t->same_host_ranks[c->local_size++] = r;
}

static void topo_restore(ak_comm *c, const topo_save *s) {
    c->host_of = s->host_of;
    c->local_index_of = s->local_index_of;
    c->same_host_ranks = s->same_host_ranks;
    c->local_rank = s->local_rank;
    c->local_size = s->local_size;
    c->host_index = s->host_index;
    c->host_count = s->host_count;
}

static void test_allreduce_hierarchical(void **state) {
    static const struct {
        int n;
        int hosts[MAX_W];
    } topos[] = {
        {2, {0, 1}},                   /* one rank per host */
        {4, {0, 0, 1, 1}},             /* 2 × 2 */
        {4, {0, 1, 0, 1}},             /* 2 × 2, hosts interleaved in rank order */
        {6, {0, 0, 0, 1, 1, 1}},       /* 2 × 3 */
        {8, {0, 0, 0, 0, 1, 1, 1, 1}}, /* 2 × 4 */
        {8, {0, 1, 2, 3, 0, 1, 2, 3}}, /* 4 × 2 */
        {3, {0, 0, 1}},                /* unbalanced: flat ring fallback */
        {5, {0, 1, 0, 1, 0}},          /* unbalanced, interleaved */
    };
    static const alg algs[] = {ALG_HIER, ALG_HIER_PIPE};
    static const ak_dtype dts[] = {AK_DTYPE_F32, AK_DTYPE_BF16, AK_DTYPE_I8, AK_DTYPE_I32,
                                   AK_DTYPE_F64};
    sweep s = {algs, 2, dts, (int)NELEM(dts)};
    for (size_t t = 0; t < NELEM(topos); t++) {
        int n = topos[t].n;
        ak_comm *comms[MAX_W];
        fake_topo fake[MAX_W];
        topo_save save[MAX_W];
        world_open(n, comms);
        for (int r = 0; r < n; r++) topo_apply(comms[r], &fake[r], topos[t].hosts, &save[r]);
        run_ranks(comms, n, sweep_rank, &s);
        for (int r = 0; r < n; r++) topo_restore(comms[r], &save[r]);
        world_close(comms, n);
    }
}

/* ---- groups other than the identity ----------------------------------------------------- */

/* Even ranks in reverse order and odd ranks in order run allreduces at the same time:
 * group index and communicator rank differ, and two groups share the transports. */
static int subgroup_rank(rank_ctx *x) {
    int members[MAX_W], m = 0, me = -1;
    for (int i = 0; i < x->n; i++) {
        int r = x->rank % 2 == 0 ? (x->n - 1 - i) : i;
        if (r % 2 != x->rank % 2) continue;
        if (r == x->rank) me = m;
        members[m++] = r;
    }
    ak__group g = {members, m, me};
    static const size_t sub_counts[] = {1, 7, 1000, BIG_COUNT};
    for (size_t ci = 0; ci < NELEM(sub_counts); ci++)
        for (int a = ALG_RING; a <= ALG_TREE; a++) {
            reduce_case k = {ci + 99, sub_counts[ci], AK_DTYPE_I32, AK_REDUCE_SUM};
            if (allreduce_once(x, (alg)a, &g, &k)) return -1;
        }
    return 0;
}

static void test_subgroups(void **state) {
    run_world(5, subgroup_rank, NULL);
    run_world(8, subgroup_rank, NULL);
}

/* ---- reduce-scatter, allgatherv ----------------------------------------------------------- */

static int reduce_scatter_rank(rank_ctx *x) {
    static const ak_dtype dts[] = {AK_DTYPE_F32, AK_DTYPE_F16, AK_DTYPE_U8, AK_DTYPE_I64};
    for (size_t ci = 0; ci < NELEM(counts); ci++)
        for (size_t d = 0; d < NELEM(dts); d++) {
            reduce_case k = {ci * 5 + d, counts[ci], dts[d], d % 2 ? AK_REDUCE_MIN : AK_REDUCE_SUM};
            guarded_buf b = guarded_alloc(k.count * dtype_size(k.dt), 0);
            fill_input(&k, x->rank, b.data);
            uint64_t tag = ak__comm_next_tag(x->comm, 2, k.count, (int)k.dt, (int)k.op, 0);
            size_t off, len;
            ak__block_range(k.count, x->n, x->rank, &off, &len);
            int rc = check_st(x, ak__reduce_scatter_ring(ak__comm_algo(x->comm), &x->world, b.data, b.data,
                                                         k.count, k.dt, k.op, tag),
                              "reduce_scatter");
            if (!rc) rc = check_reduced(x, &k, x->ranks, x->n, b.data, off, off + len, "rs");
            if (!rc && !guarded_intact(&b)) rc = rank_fail(x, "reduce_scatter wrote outside");
            guarded_free(&b);
            if (rc) return rc;
        }
    return 0;
}

static void test_reduce_scatter(void **state) {
    for (size_t w = 0; w < NELEM(world_sizes); w++)
        run_world(world_sizes[w], reduce_scatter_rank, NULL);
}

static int32_t block_value(int owner, size_t i) { return owner * 1000003 + (int32_t)i; }

#define GAP 3          /* elements left between allgatherv blocks: must stay untouched */
#define SENTINEL (-7)

/* Uneven counts with empty blocks; scale 1 or 4099 for a large case. */
static int allgatherv_case(rank_ctx *x, size_t scale) {
    size_t cnt[MAX_W], displs[MAX_W], total = 0;
    for (int b = 0; b < x->n; b++) {
        cnt[b] = (size_t)((b * 5 + 2) % 4) * scale; /* 2,3,0,1,2,... */
        displs[b] = total + GAP;
        total = displs[b] + cnt[b];
    }
    int32_t *buf = malloc((total + GAP) * sizeof *buf);
    for (size_t i = 0; i < total + GAP; i++) buf[i] = SENTINEL;
    for (size_t i = 0; i < cnt[x->rank]; i++) buf[displs[x->rank] + i] = block_value(x->rank, i);
    uint64_t tag = ak__comm_next_tag(x->comm, 3, total, 0, 0, 0);
    int rc = check_st(x, ak__allgatherv_ring(ak__comm_algo(x->comm), &x->world, buf, cnt, displs, 4, tag),
                      "allgatherv");
    size_t next = 0; /* every element: block data inside blocks, sentinel in the gaps */
    for (int b = 0; b < x->n && !rc; b++) {
        for (; next < displs[b] && !rc; next++)
            if (buf[next] != SENTINEL) rc = rank_fail(x, "allgatherv wrote gap element %zu", next);
        for (size_t i = 0; i < cnt[b] && !rc; i++, next++)
            if (buf[next] != block_value(b, i))
                rc = rank_fail(x, "allgatherv block %d element %zu differs", b, i);
    }
    free(buf);
    return rc;
}

static int allgatherv_rank(rank_ctx *x) {
    return allgatherv_case(x, 1) || allgatherv_case(x, 4099) ? -1 : 0;
}

static void test_allgatherv(void **state) {
    for (size_t w = 0; w < NELEM(world_sizes); w++) run_world(world_sizes[w], allgatherv_rank, NULL);
}

/* ---- broadcast, reduce, gather, scatter from every root ---------------------------------- */

static unsigned char byte_value(int root, size_t i) { return (unsigned char)(mix((uint64_t)root * 977 + i) & 0xff); }

static const size_t root_bytes[] = {0, 1, 7, 1000, BIG_COUNT};

/* the last one: several segments of the pipelined binomial broadcast, the last partial */
static const size_t bcast_bytes[] = {0, 1, 7, 1000, BIG_COUNT, 3 * AK_BCAST_SEG_BYTES + 5};

static int broadcast_rank(rank_ctx *x) {
    for (size_t bi = 0; bi < NELEM(bcast_bytes); bi++)
        for (int root = 0; root < x->n; root++) {
            size_t bytes = bcast_bytes[bi];
            guarded_buf b = guarded_alloc(bytes, 0);
            unsigned char *p = b.data;
            for (size_t i = 0; i < bytes; i++) p[i] = x->rank == root ? byte_value(root, i) : 0;
            uint64_t tag = ak__comm_next_tag(x->comm, 4, bytes, 0, 0, root);
            int rc = check_st(x, ak__broadcast_tree(ak__comm_algo(x->comm), &x->world, p, bytes, root, tag),
                              "broadcast");
            for (size_t i = 0; i < bytes && !rc; i++)
                if (p[i] != byte_value(root, i))
                    rc = rank_fail(x, "broadcast root %d bytes %zu: byte %zu differs", root, bytes, i);
            if (!rc && !guarded_intact(&b)) rc = rank_fail(x, "broadcast wrote outside");
            guarded_free(&b);
            if (rc) return rc;
        }
    return 0;
}

static void test_broadcast(void **state) {
    for (size_t w = 0; w < NELEM(world_sizes); w++) run_world(world_sizes[w], broadcast_rank, NULL);
}

static int reduce_rank(rank_ctx *x) {
    static const ak_dtype dts[] = {AK_DTYPE_F32, AK_DTYPE_BF16, AK_DTYPE_I8};
    for (size_t bi = 0; bi < NELEM(root_bytes); bi++)
        for (int root = 0; root < x->n; root++) {
            int d = (int)(bi + (size_t)root) % 3;
            reduce_case k = {bi * 17 + (size_t)root, root_bytes[bi], dts[d], (ak_reduce_op)(root % 4)};
            guarded_buf b = guarded_alloc(k.count * dtype_size(k.dt), 0);
            fill_input(&k, x->rank, b.data);
            uint64_t tag = ak__comm_next_tag(x->comm, 5, k.count, (int)k.dt, (int)k.op, root);
            int rc = check_st(x, ak__reduce_tree(ak__comm_algo(x->comm), &x->world, b.data, k.count, k.dt, k.op,
                                                 root, tag), "reduce");
            if (!rc && x->rank == root)
                rc = check_reduced(x, &k, x->ranks, x->n, b.data, 0, k.count, "reduce");
            if (!rc && !guarded_intact(&b)) rc = rank_fail(x, "reduce wrote outside");
            guarded_free(&b);
            if (rc) return rc;
        }
    return 0;
}

static void test_reduce(void **state) {
    for (size_t w = 0; w < NELEM(world_sizes); w++) run_world(world_sizes[w], reduce_rank, NULL);
}

static const size_t gather_bytes[] = {0, 1, 13, 4099};

/* in_place: the root's send block already sits at its slot of the receive buffer */
static int gather_case(rank_ctx *x, size_t bytes, int root, int in_place) {
    unsigned char *all = calloc((size_t)x->n * bytes + 1, 1), *mine = malloc(bytes + 1);
    for (size_t i = 0; i < bytes; i++) mine[i] = byte_value(x->rank, i);
    const void *send = mine;
    if (in_place && x->rank == root) {
        memcpy(all + (size_t)root * bytes, mine, bytes);
        send = all + (size_t)root * bytes;
    }
    uint64_t tag = ak__comm_next_tag(x->comm, 6, bytes, 0, 0, root);
    int rc = check_st(x, ak__gather_linear(ak__comm_algo(x->comm), &x->world, send, all, bytes, root, tag),
                      "gather");
    for (int r = 0; r < x->n && !rc && x->rank == root; r++)
        for (size_t i = 0; i < bytes && !rc; i++)
            if (all[(size_t)r * bytes + i] != byte_value(r, i))
                rc = rank_fail(x, "gather root %d: block %d byte %zu differs", root, r, i);
    free(all);
    free(mine);
    return rc;
}

static int scatter_case(rank_ctx *x, size_t bytes, int root) {
    unsigned char *all = malloc((size_t)x->n * bytes + 1), *mine = calloc(bytes + 1, 1);
    for (int r = 0; r < x->n && x->rank == root; r++)
        for (size_t i = 0; i < bytes; i++) all[(size_t)r * bytes + i] = byte_value(r + 50, i);
    uint64_t tag = ak__comm_next_tag(x->comm, 7, bytes, 0, 0, root);
    int rc = check_st(x, ak__scatter_linear(ak__comm_algo(x->comm), &x->world, all, mine, bytes, root, tag),
                      "scatter");
    for (size_t i = 0; i < bytes && !rc; i++)
        if (mine[i] != byte_value(x->rank + 50, i))
            rc = rank_fail(x, "scatter root %d: byte %zu differs", root, i);
    free(all);
    free(mine);
    return rc;
}

static int gather_scatter_rank(rank_ctx *x) {
    for (size_t bi = 0; bi < NELEM(gather_bytes); bi++)
        for (int root = 0; root < x->n; root++)
            if (gather_case(x, gather_bytes[bi], root, 0) ||
                gather_case(x, gather_bytes[bi], root, 1) ||
                scatter_case(x, gather_bytes[bi], root))
                return -1;
    return 0;
}

static void test_gather_scatter(void **state) {
    for (size_t w = 0; w < NELEM(world_sizes); w++)
        run_world(world_sizes[w], gather_scatter_rank, NULL);
}

/* ---- alltoallv ------------------------------------------------------------------------- */

/* elements rank `from` sends to rank `to`: uneven, some zero */
static size_t a2a_count(int from, int to, size_t scale) { return (size_t)((from * 3 + to * 5) % 4) * scale; }

static int32_t a2a_value(int from, int to, size_t i) { return from * 100000000 + to * 1000000 + (int32_t)i; }

static int alltoallv_case(rank_ctx *x, size_t scale) {
    size_t sc[MAX_W], sd[MAX_W], rc_[MAX_W], rd[MAX_W], stot = 0, rtot = 0;
    for (int j = 0; j < x->n; j++) {
        sc[j] = a2a_count(x->rank, j, scale), sd[j] = stot, stot += sc[j] + 1; /* 1-element gaps */
        rc_[j] = a2a_count(j, x->rank, scale), rd[j] = rtot, rtot += rc_[j];
    }
    int32_t *sbuf = malloc((stot + 1) * sizeof *sbuf), *rbuf = malloc((rtot + 1) * sizeof *rbuf);
    for (int j = 0; j < x->n; j++)
        for (size_t i = 0; i < sc[j]; i++) sbuf[sd[j] + i] = a2a_value(x->rank, j, i);
    uint64_t tag = ak__comm_next_tag(x->comm, 8, scale, 6, 0, 0);
    int rc = check_st(x, ak__alltoallv_pairwise(ak__comm_algo(x->comm), &x->world, sbuf, sc, sd, rbuf, rc_, rd,
                                                4, tag), "alltoallv");
    for (int j = 0; j < x->n && !rc; j++)
        for (size_t i = 0; i < rc_[j] && !rc; i++)
            if (rbuf[rd[j] + i] != a2a_value(j, x->rank, i))
                rc = rank_fail(x, "alltoallv from %d element %zu differs", j, i);
    free(sbuf);
    free(rbuf);
    return rc;
}

static int alltoallv_rank(rank_ctx *x) {
    return alltoallv_case(x, 1) || alltoallv_case(x, 3001) ? -1 : 0;
}

static void test_alltoallv(void **state) {
    for (size_t w = 0; w < NELEM(world_sizes); w++) run_world(world_sizes[w], alltoallv_rank, NULL);
}

/* ---- barrier ------------------------------------------------------------------------------ */

static atomic_int arrived[MAX_W];

/* Each round one rank is late; after the barrier every rank must see every stamp. */
static int barrier_rank(rank_ctx *x) {
    for (int round = 1; round <= 20; round++) {
        if (round % x->n == x->rank) nanosleep(&(struct timespec){0, 2000000}, NULL);
        atomic_store(&arrived[x->rank], round);
        uint64_t tag = ak__comm_next_tag(x->comm, 9, 0, 0, 0, 0);
        if (check_st(x, ak__barrier_dissemination(ak__comm_algo(x->comm), &x->world, tag), "barrier")) return -1;
        for (int r = 0; r < x->n; r++)
            if (atomic_load(&arrived[r]) < round)
                return rank_fail(x, "round %d: left the barrier before rank %d arrived", round, r);
    }
    return 0;
}

static void test_barrier(void **state) {
    for (size_t w = 0; w < NELEM(world_sizes); w++) {
        for (int r = 0; r < MAX_W; r++) atomic_store(&arrived[r], 0);
        run_world(world_sizes[w], barrier_rank, NULL);
    }
}

/* ---- building blocks ---------------------------------------------------------------------- */

static void test_block_range(void **state) {
    static const size_t cs[] = {0, 1, 7, 8, 9, 1000, 262147};
    for (size_t ci = 0; ci < NELEM(cs); ci++)
        for (int n = 1; n <= 9; n++) {
            size_t next = 0, lo = (size_t)-1, hi = 0;
            for (int b = 0; b < n; b++) {
                size_t off, len;
                ak__block_range(cs[ci], n, b, &off, &len);
                assert_int_equal(off, next); /* contiguous, in order */
                next = off + len;
                lo = len < lo ? len : lo;
                hi = len > hi ? len : hi;
            }
            assert_int_equal(next, cs[ci]);
            assert_true(hi - lo <= 1);
        }
}

static void test_tags(void **state) {
    ak_comm *comms[2];
    world_open(2, comms);
    uint64_t a0 = ak__comm_next_tag(comms[0], 1, 100, 0, 0, 0);
    uint64_t a1 = ak__comm_next_tag(comms[1], 1, 100, 0, 0, 0);
    assert_true(a0 == a1); /* same call on two ranks */
    uint64_t b0 = ak__comm_next_tag(comms[0], 1, 100, 0, 0, 0);
    assert_true(b0 != a0); /* the next call differs */
    uint64_t b1 = ak__comm_next_tag(comms[1], 1, 101, 0, 0, 0);
    assert_true(b1 != b0); /* a different count differs */
    assert_true(ak__comm_next_tag(comms[0], 1, 100, 1, 0, 0) !=
                ak__comm_next_tag(comms[1], 1, 100, 0, 0, 0)); /* different dtype */
    world_close(comms, 2);
}

static int mismatch_rank(rank_ctx *x) {
    char buf[8] = {0};
    /* rank 0 sends 8 bytes, rank 1 expects 4: both must see the mismatch */
    ak_status st = x->rank == 0 ? ak__p2p_sendrecv(ak__comm_algo(x->comm), 1, buf, 8, 1, NULL, 0, 42)
                                : ak__p2p_sendrecv(ak__comm_algo(x->comm), 0, NULL, 0, 0, buf, 4, 42);
    if (st != AK_ERR_MISMATCH) return rank_fail(x, "expected a mismatch, got %s", ak_status_str(st));
    if (x->comm->failed != AK_ERR_MISMATCH) return rank_fail(x, "communicator not marked failed");
    if (ak__p2p_sendrecv(ak__comm_algo(x->comm), !x->rank, buf, 1, !x->rank, NULL, 0, 43) != AK_ERR_MISMATCH)
        return rank_fail(x, "a failed communicator accepted another op");
    return 0;
}

static void test_p2p_failures(void **state) {
    ak_comm *comms[2];
    ak_comm_config cfg = AK_COMM_CONFIG_INIT;
    cfg.timeout_ms = 200;
    assert_int_equal(ak_comm_init_local(2, &cfg, comms), AK_OK);
    /* a receive nobody answers times out after config.timeout_ms; the op stays alive
     * until the world is freed because the transport still holds it */
    ak__p2p op;
    ak__p2p *ops[1] = {&op};
    char byte;
    ak__p2p_init_recv(&op, 1, &byte, 1, 7);
    assert_int_equal(ak__p2p_post(ak__comm_algo(comms[0]), &op), AK_OK);
    uint64_t t0 = ak_now_ns();
    assert_int_equal(ak__p2p_wait(ak__comm_algo(comms[0]), ops, 1), AK_ERR_TIMEOUT);
    uint64_t ms = (ak_now_ns() - t0) / 1000000;
    assert_true(ms >= 190 && ms < 2000);
    assert_int_equal(comms[0]->failed, AK_ERR_TIMEOUT);
    /* sending to oneself is an algorithm bug */
    ak__p2p self;
    ak__p2p_init_send(&self, 1, &byte, 1, 7);
    assert_int_equal(ak__p2p_post(ak__comm_algo(comms[1]), &self), AK_ERR_INTERNAL);
    world_close(comms, 2);

    run_world(2, mismatch_rank, NULL);
}

int main(void) {
    if (ak_init() != AK_OK) {
        fprintf(stderr, "ak_init failed: %s\n", ak_last_error());
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_block_range),
        cmocka_unit_test(test_tags),
        cmocka_unit_test(test_p2p_failures),
        cmocka_unit_test(test_allreduce_flat),
        cmocka_unit_test(test_allreduce_hierarchical),
        cmocka_unit_test(test_signed_zero_agreement),
        cmocka_unit_test(test_subgroups),
        cmocka_unit_test(test_reduce_scatter),
        cmocka_unit_test(test_allgatherv),
        cmocka_unit_test(test_broadcast),
        cmocka_unit_test(test_reduce),
        cmocka_unit_test(test_gather_scatter),
        cmocka_unit_test(test_alltoallv),
        cmocka_unit_test(test_barrier),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
