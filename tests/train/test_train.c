/* Tests of the training runtime (ak_train_*) on worlds of threads: each rank is a thread
 * with its own communicator (ak_comm_init_local) and its own runtime. Covers negotiation
 * in any submission order, the response cache, fusion (and that it does not change
 * results), every op kind, compression, the optimizer update hand-off, join with uneven
 * work, process sets, mismatch errors naming the ranks, the stall inspector and shutdown
 * propagation. */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "accelkit/train.h"
#include "core/params.h"
#include "train/train_internal.h"

typedef struct rank_ctx rank_ctx;
typedef void (*scenario_fn)(rank_ctx *c);

struct rank_ctx {
    int rank, size;
    ak_train *train;
    ak_train_config cfg;
    scenario_fn fn;
    int failed_line;
    char failed_what[256];
    void *user; /* per-world shared data */
};

/* Records the first failing check of a rank thread (cmocka asserts are not thread-safe). */
#define CHECK(cond)                                                                      \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            if (!c->failed_line) {                                                       \
                c->failed_line = __LINE__;                                               \
                snprintf(c->failed_what, sizeof c->failed_what, "%s (last error: %s)",   \
                         #cond, ak_last_error());                                        \
            }                                                                            \
            return;                                                                      \
        }                                                                                \
    } while (0)

/* Like CHECK but goes on: for scenarios whose later collectives (a join) the other ranks
 * wait for, so that a failed check does not leave them waiting forever. */
#define EXPECT(cond)                                                                     \
    do {                                                                                 \
        if (!(cond) && !c->failed_line) {                                                \
            c->failed_line = __LINE__;                                                   \
            snprintf(c->failed_what, sizeof c->failed_what, "%s (last error: %s)", #cond, \
                     ak_last_error());                                                   \
        }                                                                                \
    } while (0)

static void *rank_main(void *arg) {
    rank_ctx *c = arg;
    c->cfg.comm = NULL;
    c->fn(c);
    return NULL;
}

/* Runs fn on n rank threads; cfg (optional) is each runtime's configuration. */
static void run_world(int n, scenario_fn fn, const ak_train_config *cfg, void *user) {
    ak_comm *comms[8];
    ak_train *trains[8];
    rank_ctx ctx[8];
    pthread_t th[8];
    assert_int_equal(ak_comm_init_local(n, NULL, comms), AK_OK);
    /* runtimes start in parallel: ak_train_init is not collective, but its threads are */
    for (int r = 0; r < n; r++) {
        ak_train_config tc = AK_TRAIN_CONFIG_INIT;
        if (cfg) tc = *cfg;
        tc.comm = comms[r];
        assert_int_equal(ak_train_init(&tc, &trains[r]), AK_OK);
        memset(&ctx[r], 0, sizeof ctx[r]);
        ctx[r] = (rank_ctx){.rank = r, .size = n, .train = trains[r], .fn = fn, .user = user};
    }
    for (int r = 0; r < n; r++) pthread_create(&th[r], NULL, rank_main, &ctx[r]);
    for (int r = 0; r < n; r++) pthread_join(th[r], NULL);
    for (int r = 0; r < n; r++) ak_train_shutdown(trains[r]);
    for (int r = 0; r < n; r++) ak_comm_free(comms[r]);
    for (int r = 0; r < n; r++)
        if (ctx[r].failed_line)
            fail_msg("rank %d failed at line %d: %s", r, ctx[r].failed_line, ctx[r].failed_what);
}

static ak_train_op f32_allreduce(const char *name, const float *in, float *out, int64_t n) {
    ak_train_op op = AK_TRAIN_OP_INIT;
    op.name = name;
    op.input = in;
    op.output = out;
    op.ndim = 1;
    op.shape[0] = n;
    return op;
}

/* ---- allreduce, any order, fusion, cache ---------------------------------------------- */

#define NT 12
static int64_t tensor_len(int i) { return 1 + i * 97 % 1000; }

static void scenario_allreduce_orders(rank_ctx *c) {
    float *in[NT], *out[NT];
    char names[NT][32];
    ak_train_stats steady;
    for (int iter = 0; iter < 4; iter++) {
        /* from the second iteration on every name is cached on every rank */
        if (iter == 1) CHECK(ak_train_get_stats(c->train, &steady) == AK_OK);
        ak_train_handle h[NT];
        for (int k = 0; k < NT; k++) {
            int i = c->rank % 2 ? NT - 1 - k : k; /* odd ranks submit in reverse */
            int64_t n = tensor_len(i);
            in[i] = malloc((size_t)n * sizeof(float));
            out[i] = malloc((size_t)n * sizeof(float));
            for (int64_t j = 0; j < n; j++) in[i][j] = (float)(c->rank + 1) * (float)(j % 7 + i);
            snprintf(names[i], sizeof names[i], "grad.%d", i);
            ak_train_op op = f32_allreduce(names[i], in[i], out[i], n);
            op.op = i % 2 ? AK_REDUCE_AVG : AK_REDUCE_SUM;
            CHECK(ak_train_enqueue(c->train, &op, &h[i]) == AK_OK);
        }
        float ranks_sum = (float)(c->size * (c->size + 1) / 2);
        for (int i = 0; i < NT; i++) {
            CHECK(ak_train_wait(c->train, h[i]) == AK_OK);
            for (int64_t j = 0; j < tensor_len(i); j++) {
                float want = ranks_sum * (float)(j % 7 + i) / (i % 2 ? (float)c->size : 1.0f);
                CHECK(fabsf(out[i][j] - want) <= 1e-5f * fabsf(want));
            }
            CHECK(ak_train_release(c->train, h[i]) == AK_OK);
            free(in[i]);
            free(out[i]);
        }
    }
    ak_train_stats st;
    CHECK(ak_train_get_stats(c->train, &st) == AK_OK);
    CHECK(st.cache_hits >= NT); /* later iterations went through the cache */
    CHECK(st.fused_buffers >= 1);
    /* steady state: only the bit-vector exchange, no full negotiation cycle, and every op
     * of iterations 1..3 completed as a cache hit */
    CHECK(st.negotiations == steady.negotiations);
    CHECK(st.cache_hits - steady.cache_hits == 3 * NT);
    CHECK(st.cycles > steady.cycles);
}

static void test_allreduce_any_order(void **state) {
    (void)state;
    run_world(2, scenario_allreduce_orders, NULL, NULL);
    run_world(3, scenario_allreduce_orders, NULL, NULL);
}

/* Fusion must not change a single bit (2 ranks: a + b is the only order). */
static float fused_results[2][4][256];

static void scenario_fusion_bits(rank_ctx *c) {
    int slot = *(int *)c->user;
    float in[4][256];
    ak_train_handle h[4];
    char names[4][16];
    for (int i = 0; i < 4; i++) {
        for (int j = 0; j < 256; j++) in[i][j] = sinf((float)(j * (i + 1) + c->rank)) / 3.0f;
        snprintf(names[i], sizeof names[i], "w%d", i);
        ak_train_op op = f32_allreduce(names[i], in[i], c->rank == 0 ? fused_results[slot][i] : in[i], 256);
        op.op = AK_REDUCE_AVG;
        op.prescale = 0.5;
        CHECK(ak_train_enqueue(c->train, &op, &h[i]) == AK_OK);
    }
    for (int i = 0; i < 4; i++) CHECK(ak_train_wait(c->train, h[i]) == AK_OK);
    for (int i = 0; i < 4; i++) ak_train_release(c->train, h[i]);
}

static void test_fusion_bit_identical(void **state) {
    (void)state;
    ak_train_config cfg = AK_TRAIN_CONFIG_INIT;
    int slot = 0;
    cfg.fusion_threshold = 0;
    run_world(2, scenario_fusion_bits, &cfg, &slot);
    slot = 1;
    cfg.fusion_threshold = 1 << 20;
    run_world(2, scenario_fusion_bits, &cfg, &slot);
    assert_memory_equal(fused_results[0], fused_results[1], sizeof fused_results[0]);
}

/* Zero-block elision: a mostly-zero gradient (each rank's few non-zero blocks in other
 * places, one block that is -0.0 on one rank only, a ragged last block) fused with a small
 * dense one, then a large dense one alone, averaged over 3 ranks. The mostly-zero buffer
 * travels as its marked blocks (counted in zero_bytes_elided), the large dense one whole,
 * and all come out as the dense allreduce gives them: zeros stay +0.0 exactly. */
#define ZB_N 300077
#define ZB_SMALL 50000
static float zb_sparse(int rank, int64_t j) {
    int64_t b = j / 256;
    int touched = b == rank * 5 || b == 100 || b == 1000 + rank || b == ZB_N / 256;
    return touched && j % 3 == 0 ? (float)(rank + 1) * (float)(j % 11 + 1) : 0.0f;
}
static float zb_dense(int rank, int64_t j) { return (float)(rank + 1) * 0.25f + (float)(j % 5); }

/* Allreduces (average) the named inputs together and checks each output against the
 * average of value(r, j) over the ranks. */
static void zb_round(rank_ctx *c, int k, const char *const *names, float *const *in,
                     float *const *out, const int64_t *n, float (*const *value)(int, int64_t),
                     ak_train_compression compression) {
    ak_train_handle h[2];
    float tolerance = compression == AK_COMPRESS_NONE ? 1e-6f : 2e-3f;
    for (int i = 0; i < k; i++) {
        ak_train_op op = f32_allreduce(names[i], in[i], out[i], n[i]);
        op.op = AK_REDUCE_AVG;
        op.compression = compression;
        CHECK(ak_train_enqueue(c->train, &op, &h[i]) == AK_OK);
    }
    for (int i = 0; i < k; i++) CHECK(ak_train_wait(c->train, h[i]) == AK_OK);
    for (int i = 0; i < k; i++) ak_train_release(c->train, h[i]);
    for (int i = 0; i < k; i++)
        for (int64_t j = 0; j < n[i]; j++) {
            float want = 0.0f, got = out[i][j];
            for (int r = 0; r < c->size; r++) want += value[i](r, j) / (float)c->size;
            if (want == 0.0f) CHECK(got == 0.0f && !signbit(got));
            else CHECK(fabsf(got - want) <= tolerance * fabsf(want));
        }
}

static void scenario_zero_blocks(rank_ctx *c) {
    int elide = *(int *)c->user;
    float *sparse = calloc(ZB_N, sizeof(float)), *small = malloc(ZB_SMALL * sizeof(float));
    float *big = malloc(ZB_N * sizeof(float)), *o1 = malloc(ZB_N * sizeof(float));
    float *o2 = malloc(ZB_N * sizeof(float));
    CHECK(sparse && small && big && o1 && o2);
    for (int64_t j = 0; j < ZB_N; j++) {
        sparse[j] = zb_sparse(c->rank, j);
        big[j] = zb_dense(c->rank, j);
        if (j < ZB_SMALL) small[j] = zb_dense(c->rank, j);
    }
    if (c->rank == 0) sparse[1100 * 256 + 7] = -0.0f; /* marked: its block travels */
    static const char *const fused[2] = {"zb.sparse", "zb.small"}, *alone[1] = {"zb.big"};
    float (*const fused_value[2])(int, int64_t) = {zb_sparse, zb_dense};
    float (*const alone_value[1])(int, int64_t) = {zb_dense};
    for (int iter = 0; iter < 2; iter++) {
        zb_round(c, 2, fused, (float *const[]){sparse, small}, (float *const[]){o1, o2},
                 (const int64_t[]){ZB_N, ZB_SMALL}, fused_value, AK_COMPRESS_NONE);
        zb_round(c, 1, alone, (float *const[]){big}, (float *const[]){o1}, (const int64_t[]){ZB_N},
                 alone_value, AK_COMPRESS_NONE);
    }
    /* fp16 on the wire, in place and into an output of garbage: the cast path skips the
     * same blocks, and writes the zeros of the skipped ones where they are not there */
    static const char *const half[2] = {"zb.sparse16", "zb.small16"};
    memcpy(o1, sparse, ZB_N * sizeof(float));
    zb_round(c, 2, half, (float *const[]){o1, small}, (float *const[]){o1, o2},
             (const int64_t[]){ZB_N, ZB_SMALL}, fused_value, AK_COMPRESS_FP16);
    for (int64_t j = 0; j < ZB_N; j++) o1[j] = 7.0f;
    zb_round(c, 2, half, (float *const[]){sparse, small}, (float *const[]){o1, o2},
             (const int64_t[]){ZB_N, ZB_SMALL}, fused_value, AK_COMPRESS_FP16);
    ak_train_stats st;
    CHECK(ak_train_get_stats(c->train, &st) == AK_OK);
    /* 9 blocks of the sparse tensor are non-zero somewhere, 18 at most once fusion puts
     * the small one in front of it; nothing of the dense ones is elided. Float32 rounds
     * elide 4 bytes a value, the fp16 one 2. */
    uint64_t most = 6 * (uint64_t)ZB_N * 2, least = most - 6 * 18 * 256 * 2;
    if (elide) CHECK(st.zero_bytes_elided >= least && st.zero_bytes_elided <= most);
    else CHECK(st.zero_bytes_elided == 0);
    free(sparse), free(small), free(big), free(o1), free(o2);
}

static void test_zero_block_elision(void **state) {
    (void)state;
    ak_train_config cfg = AK_TRAIN_CONFIG_INIT;
    int elide = 1;
    cfg.zero_blocks = 1;
    run_world(3, scenario_zero_blocks, &cfg, &elide);
    elide = 0;
    cfg.zero_blocks = 0;
    run_world(3, scenario_zero_blocks, &cfg, &elide);
}

/* A group is negotiated and run together, also when ranks submit it at other times. */
static void scenario_group(rank_ctx *c) {
    for (int iter = 0; iter < 3; iter++) {
        float a[3] = {1, 2, 3}, b[5] = {1, 1, 1, 1, (float)c->rank}, oa[3], ob[5];
        ak_train_op ops[2] = {f32_allreduce("g.a", a, oa, 3), f32_allreduce("g.b", b, ob, 5)};
        ak_train_handle h[2];
        if (c->rank == 1) usleep(3000);
        CHECK(ak_train_enqueue_group(c->train, ops, 2, h) == AK_OK);
        for (int i = 0; i < 2; i++) CHECK(ak_train_wait(c->train, h[i]) == AK_OK);
        CHECK(oa[2] == 3.0f * (float)c->size && ob[4] == (float)(c->size * (c->size - 1) / 2));
        for (int i = 0; i < 2; i++) ak_train_release(c->train, h[i]);
    }
}

static void test_grouped_allreduce(void **state) {
    (void)state;
    run_world(2, scenario_group, NULL, NULL);
    run_world(3, scenario_group, NULL, NULL);
}

/* Enqueues the group {prefix.a (3 floats), prefix.b (2 floats)} of this rank's inputs
 * (rank + 1) on process set ps. */
static ak_status group_of_two(rank_ctx *c, const char *prefix, int ps, float *in, float *out,
                              ak_train_handle h[2]) {
    char na[32], nb[32];
    snprintf(na, sizeof na, "%s.a", prefix);
    snprintf(nb, sizeof nb, "%s.b", prefix);
    for (int i = 0; i < 5; i++) in[i] = (float)(c->rank + 1);
    ak_train_op ops[2] = {f32_allreduce(na, in, out, 3), f32_allreduce(nb, in + 3, out + 3, 2)};
    ops[0].op = ops[1].op = AK_REDUCE_SUM;
    ops[0].process_set = ops[1].process_set = ps;
    return ak_train_enqueue_group(c->train, ops, 2, h);
}

/* Group identity is per process set and independent of submission order: ranks 0 and 1
 * run groups on the set {0, 1} that rank 2 is not in, then everyone runs global groups,
 * two of them submitted in opposite orders on odd and even ranks. A tensor grouped on one
 * rank and not on the others still fails as a group mismatch. */
static void scenario_group_sets(rank_ctx *c) {
    int pair[2] = {0, 1}, id = -1;
    CHECK(ak_train_add_process_set(c->train, pair, 2, &id) == AK_OK);
    float in[4][5], out[4][5];
    ak_train_handle h[4][2];
    if (c->rank < 2)
        for (int iter = 0; iter < 2; iter++) {
            CHECK(group_of_two(c, "pair", id, in[0], out[0], h[0]) == AK_OK);
            for (int i = 0; i < 2; i++) CHECK(ak_train_wait(c->train, h[0][i]) == AK_OK);
            for (int i = 0; i < 2; i++) ak_train_release(c->train, h[0][i]);
            CHECK(out[0][0] == 3.0f && out[0][4] == 3.0f);
        }
    const char *names[3] = {"glob", "first", "second"};
    int order[3] = {0, c->rank % 2 ? 2 : 1, c->rank % 2 ? 1 : 2};
    for (int k = 0; k < 3; k++)
        CHECK(group_of_two(c, names[order[k]], 0, in[order[k]], out[order[k]], h[order[k]]) == AK_OK);
    float total = (float)(c->size * (c->size + 1) / 2);
    for (int g = 0; g < 3; g++) {
        for (int i = 0; i < 2; i++) CHECK(ak_train_wait(c->train, h[g][i]) == AK_OK);
        for (int i = 0; i < 2; i++) ak_train_release(c->train, h[g][i]);
        for (int i = 0; i < 5; i++) CHECK(out[g][i] == total);
    }
    /* rank 0 groups "odd.a" and "odd.b", the others submit them alone */
    if (c->rank == 0) {
        CHECK(group_of_two(c, "odd", 0, in[3], out[3], h[3]) == AK_OK);
    } else {
        ak_train_op a = f32_allreduce("odd.a", in[3], out[3], 3);
        ak_train_op b = f32_allreduce("odd.b", in[3] + 3, out[3] + 3, 2);
        a.op = b.op = AK_REDUCE_SUM;
        CHECK(ak_train_enqueue(c->train, &a, &h[3][0]) == AK_OK);
        CHECK(ak_train_enqueue(c->train, &b, &h[3][1]) == AK_OK);
    }
    for (int i = 0; i < 2; i++) {
        CHECK(ak_train_wait(c->train, h[3][i]) == AK_ERR_MISMATCH);
        const char *msg = ak_last_error();
        CHECK(strstr(msg, "group mismatch") && strstr(msg, i ? "odd.b" : "odd.a") &&
              strstr(msg, "in a group of 2") && strstr(msg, "alone"));
        ak_train_release(c->train, h[3][i]);
    }
    CHECK(ak_train_remove_process_set(c->train, id) == AK_OK);
}

static void test_group_identity(void **state) {
    (void)state;
    run_world(3, scenario_group_sets, NULL, NULL);
}

/* ---- the other ops ------------------------------------------------------------------------ */

typedef struct op_result {
    ak_train_handle h; /* the caller releases it */
    const void *data;
    int ndim;
    int64_t shape[AK_TRAIN_MAX_DIMS];
} op_result;

/* Enqueues op, waits for it and fetches its output. */
static ak_status run_op(ak_train *t, const ak_train_op *op, op_result *res) {
    ak_status st = ak_train_enqueue(t, op, &res->h);
    if (st == AK_OK) st = ak_train_wait(t, res->h);
    if (st == AK_OK) st = ak_train_output(t, res->h, &res->data, &res->ndim, res->shape);
    return st;
}

static void check_allgather(rank_ctx *c) {
    int64_t rows = c->rank + 1; /* dim 0 differs per rank */
    float in[8][3];
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < 3; j++) in[i][j] = (float)(100 * c->rank + 10 * i + j);
    ak_train_op op = AK_TRAIN_OP_INIT;
    op.kind = AK_TRAIN_ALLGATHER;
    op.name = "gather";
    op.input = in;
    op.ndim = 2, op.shape[0] = rows, op.shape[1] = 3;
    op_result res;
    CHECK(run_op(c->train, &op, &res) == AK_OK);
    const float *out = res.data;
    CHECK(res.ndim == 2 && res.shape[0] == c->size * (c->size + 1) / 2 && res.shape[1] == 3);
    int at = 0;
    for (int r = 0; r < c->size; r++)
        for (int i = 0; i <= r; i++, at++)
            for (int j = 0; j < 3; j++) CHECK(out[at * 3 + j] == (float)(100 * r + 10 * i + j));
    ak_train_release(c->train, res.h);
}

static void check_broadcast(rank_ctx *c) {
    double buf[5];
    for (int i = 0; i < 5; i++) buf[i] = c->rank == 1 ? 1.5 * i : -1;
    ak_train_op op = AK_TRAIN_OP_INIT;
    op.kind = AK_TRAIN_BROADCAST;
    op.name = "bcast";
    op.dtype = AK_DTYPE_F64;
    op.input = op.output = buf;
    op.ndim = 1, op.shape[0] = 5, op.root = 1;
    ak_train_handle h;
    CHECK(ak_train_enqueue(c->train, &op, &h) == AK_OK);
    CHECK(ak_train_wait(c->train, h) == AK_OK);
    for (int i = 0; i < 5; i++) CHECK(buf[i] == 1.5 * i);
    ak_train_release(c->train, h);
}

static void check_alltoall(rank_ctx *c) {
    /* rank r sends (d + 1) rows to rank d; row values encode (from, to) */
    int64_t splits[4], rows = 0;
    int32_t in[32];
    for (int d = 0; d < c->size; d++) {
        splits[d] = d + 1;
        for (int k = 0; k <= d; k++) in[rows++] = 10 * c->rank + d;
    }
    ak_train_op op = AK_TRAIN_OP_INIT;
    op.kind = AK_TRAIN_ALLTOALL;
    op.name = "a2a";
    op.dtype = AK_DTYPE_I32;
    op.input = in;
    op.ndim = 1, op.shape[0] = rows, op.splits = splits;
    op_result res;
    CHECK(run_op(c->train, &op, &res) == AK_OK);
    const int32_t *out = res.data;
    int n;
    const int64_t *rs;
    CHECK(ak_train_received_splits(c->train, res.h, &rs, &n) == AK_OK && n == c->size);
    CHECK(res.shape[0] == (int64_t)c->size * (c->rank + 1));
    for (int s = 0, at = 0; s < c->size; s++) {
        CHECK(rs[s] == c->rank + 1);
        for (int k = 0; k <= c->rank; k++) CHECK(out[at++] == 10 * s + c->rank);
    }
    ak_train_release(c->train, res.h);
}

static void check_reducescatter(rank_ctx *c) {
    float in[7][2]; /* 7 rows over 2 or 3 ranks: uneven */
    for (int i = 0; i < 7; i++) in[i][0] = (float)i, in[i][1] = (float)c->rank;
    ak_train_op op = AK_TRAIN_OP_INIT;
    op.kind = AK_TRAIN_REDUCESCATTER;
    op.name = "rs";
    op.input = in;
    op.ndim = 2, op.shape[0] = 7, op.shape[1] = 2;
    op_result res;
    CHECK(run_op(c->train, &op, &res) == AK_OK);
    const float *out = res.data;
    int64_t base = 7 / c->size, extra = 7 % c->size;
    int64_t mine = base + (c->rank < extra), off = c->rank * base + (c->rank < extra ? c->rank : extra);
    CHECK(res.shape[0] == mine && res.shape[1] == 2);
    float rank_sum = (float)(c->size * (c->size - 1) / 2);
    for (int64_t i = 0; i < mine; i++)
        CHECK(out[2 * i] == (float)(off + i) * (float)c->size && out[2 * i + 1] == rank_sum);
    ak_train_release(c->train, res.h);
}

static void scenario_other_ops(rank_ctx *c) {
    check_allgather(c);
    check_broadcast(c);
    check_alltoall(c);
    check_reducescatter(c);
    CHECK(ak_train_barrier(c->train, 0) == AK_OK);
}

static void test_other_ops(void **state) {
    (void)state;
    run_world(2, scenario_other_ops, NULL, NULL);
    run_world(3, scenario_other_ops, NULL, NULL);
}

/* ---- fusion streams ----------------------------------------------------------------------
 * AK_FUSION_STREAMS: many tensors of mixed dtypes and ops, submitted in a different order
 * and rhythm on each rank, reduced over 2-4 streams: exact results (small integers), and
 * the same fusion decisions (tensors, buffer sizes, streams) on every rank. */
#define FS_N 40
#define FS_ITERS 3

typedef struct fs_world {
    uint64_t digest[8];
    uint64_t buffers[8];
    size_t buffer_bytes[8];
    int peak[8];
} fs_world;

static ak_dtype fs_dtype(int i) {
    static const ak_dtype kinds[] = {AK_DTYPE_F32, AK_DTYPE_F64, AK_DTYPE_I32, AK_DTYPE_I64,
                                     AK_DTYPE_F32};
    return kinds[i % 5];
}

/* Some tensors large enough that a cycle carries several adaptive buffers' worth. */
static int64_t fs_len(int i) { return i % 7 == 3 ? 150000 + i : 1 + (int64_t)i * 331 % 5000; }

static double fs_value(int rank, int i, int64_t j) { return (double)((rank + 1) * ((j + i) % 9)); }

static void fs_store(ak_dtype d, void *buf, int64_t j, double v) {
    if (d == AK_DTYPE_F32) ((float *)buf)[j] = (float)v;
    else if (d == AK_DTYPE_F64) ((double *)buf)[j] = v;
    else if (d == AK_DTYPE_I32) ((int32_t *)buf)[j] = (int32_t)v;
    else ((int64_t *)buf)[j] = (int64_t)v;
}

static double fs_load(ak_dtype d, const void *buf, int64_t j) {
    if (d == AK_DTYPE_F32) return ((const float *)buf)[j];
    if (d == AK_DTYPE_F64) return ((const double *)buf)[j];
    if (d == AK_DTYPE_I32) return ((const int32_t *)buf)[j];
    return (double)((const int64_t *)buf)[j];
}

/* Tensor i's op: sums, a max, and fp16 on the wire for every fifth (float32). */
static ak_train_op fs_op(int i, const char *name, const void *in, void *out) {
    ak_train_op op = AK_TRAIN_OP_INIT;
    op.name = name;
    op.dtype = fs_dtype(i);
    op.input = in;
    op.output = out;
    op.ndim = 1;
    op.shape[0] = fs_len(i);
    op.op = i % 5 == 2 ? AK_REDUCE_MAX : AK_REDUCE_SUM;
    if (i % 5 == 4) op.compression = AK_COMPRESS_FP16;
    return op;
}

static double fs_expected(int size, int i, int64_t j) {
    double unit = (double)((j + i) % 9);
    return i % 5 == 2 ? unit * size : unit * size * (size + 1) / 2;
}

static void fs_check(rank_ctx *c, int i, const void *out) {
    ak_dtype d = fs_dtype(i);
    for (int64_t j = 0; j < fs_len(i); j++) {
        double want = fs_expected(c->size, i, j), got = fs_load(d, out, j);
        CHECK(i % 5 == 4 ? fabs(got - want) <= 1e-3 * (want + 1) : got == want);
    }
}

static void scenario_fusion_streams(rank_ctx *c) {
    fs_world *w = c->user;
    void *in[FS_N], *out[FS_N];
    char names[FS_N][24];
    for (int i = 0; i < FS_N; i++) {
        size_t es = 0;
        ak_dtype_size(fs_dtype(i), &es);
        in[i] = malloc((size_t)fs_len(i) * es);
        out[i] = malloc((size_t)fs_len(i) * es);
        for (int64_t j = 0; j < fs_len(i); j++) fs_store(fs_dtype(i), in[i], j, fs_value(c->rank, i, j));
        snprintf(names[i], sizeof names[i], "stream.%d", i);
    }
    unsigned seed = 17u + (unsigned)c->rank;
    for (int iter = 0; iter < FS_ITERS; iter++) {
        ak_train_handle h[FS_N];
        for (int k = 0; k < FS_N; k++) {
            int i = c->rank % 2 ? FS_N - 1 - k : k; /* odd ranks submit in reverse */
            ak_train_op op = fs_op(i, names[i], in[i], out[i]);
            CHECK(ak_train_enqueue(c->train, &op, &h[i]) == AK_OK);
            seed = seed * 1103515245u + 12345u; /* each rank its own rhythm */
            if ((seed >> 16) % 4 == 0) usleep((seed >> 8) % 1500);
        }
        for (int i = 0; i < FS_N; i++) {
            CHECK(ak_train_wait(c->train, h[i]) == AK_OK);
            fs_check(c, i, out[i]);
            CHECK(ak_train_release(c->train, h[i]) == AK_OK);
        }
    }
    /* every dispatch happened before the last completion this thread waited for */
    ak_train *t = c->train;
    w->digest[c->rank] = t->fusion_digest;
    w->buffers[c->rank] = t->stream_next;
    w->buffer_bytes[c->rank] = t->stream_buffer;
    w->peak[c->rank] = atomic_load(&t->in_flight_peak);
    for (int i = 0; i < FS_N; i++) {
        free(in[i]);
        free(out[i]);
    }
}

static void run_streams(int ranks, int streams, int adaptive, int64_t threshold) {
    ak_train_config cfg = AK_TRAIN_CONFIG_INIT;
    cfg.fusion_streams = streams;
    cfg.fusion_adaptive = adaptive;
    cfg.fusion_threshold = threshold;
    fs_world w;
    memset(&w, 0, sizeof w);
    run_world(ranks, scenario_fusion_streams, &cfg, &w);
    for (int r = 1; r < ranks; r++) {
        assert_int_equal(w.digest[r], w.digest[0]); /* same fusion decisions everywhere */
        assert_int_equal(w.buffers[r], w.buffers[0]);
    }
    assert_true(w.buffers[0] >= (uint64_t)streams); /* every stream carried buffers */
    if (adaptive) /* sized from the arrivals, within its bounds */
        assert_true(w.buffer_bytes[0] >= ((size_t)256 << 10) && w.buffer_bytes[0] <= (size_t)threshold);
    print_message("fusion streams %d on %d ranks (adaptive %d): %llu buffers, last %zu bytes, "
                  "at most %d in flight at once on rank 0\n", streams, ranks, adaptive,
                  (unsigned long long)w.buffers[0], w.buffer_bytes[0], w.peak[0]);
}

static void test_fusion_streams(void **state) {
    (void)state;
    run_streams(2, 2, 1, 128 << 20);
    run_streams(3, 3, 1, 1 << 20);
    run_streams(4, 4, 0, 96 << 10); /* fixed small buffers: many per cycle */
    /* bad values are refused by name */
    ak_comm *comm = NULL;
    ak_train *t = NULL;
    assert_int_equal(ak_comm_init_local(1, NULL, &comm), AK_OK);
    ak_train_config cfg = AK_TRAIN_CONFIG_INIT;
    cfg.comm = comm;
    cfg.fusion_streams = 9;
    assert_int_equal(ak_train_init(&cfg, &t), AK_ERR_INVALID_ARG);
    assert_non_null(strstr(ak_last_error(), "fusion_streams"));
    ak_comm_free(comm);
    setenv("AK_FUSION_STREAMS", "0", 1);
    assert_int_equal(ak__params_load(), AK_ERR_INVALID_ARG);
    assert_non_null(strstr(ak_last_error(), "AK_FUSION_STREAMS"));
    unsetenv("AK_FUSION_STREAMS");
    assert_int_equal(ak__params_load(), AK_OK);
}

/* ---- compression and the optimizer hand-off ----------------------------------------------- */

/* Three tensors enqueued together (fused when they meet in one cycle), the last in place,
 * AVG with pre- and post-scaling: f16/bf16 on the wire, cast straight from the inputs and
 * back into the outputs. */
static void scenario_compression(rank_ctx *c) {
    enum { NT_C = 3 };
    static const ak_train_compression kinds[] = {AK_COMPRESS_FP16, AK_COMPRESS_BF16};
    static const int64_t lens[NT_C] = {5000, 1, 2999};
    static const char *names[2][NT_C] = {{"fp16.a", "fp16.b", "fp16.c"},
                                         {"bf16.a", "bf16.b", "bf16.c"}};
    float *in[NT_C], *out[NT_C];
    for (int i = 0; i < NT_C; i++) {
        in[i] = malloc((size_t)lens[i] * sizeof(float));
        out[i] = i == NT_C - 1 ? in[i] : malloc((size_t)lens[i] * sizeof(float));
    }
    double mean_rank_factor = (c->size + 1) / 2.0; /* AVG over ranks of (rank + 1) */
    for (int k = 0; k < 2; k++) {
        ak_train_handle h[NT_C];
        for (int i = 0; i < NT_C; i++) {
            for (int64_t j = 0; j < lens[i]; j++)
                in[i][j] = (float)(c->rank + 1) * 1e3f * sinf((float)(j + 7 * i));
            ak_train_op op = f32_allreduce(names[k][i], in[i], out[i], lens[i]);
            op.compression = kinds[k];
            op.op = AK_REDUCE_AVG;
            op.prescale = 0.5;
            op.postscale = 4.0;
            CHECK(ak_train_enqueue(c->train, &op, &h[i]) == AK_OK);
        }
        float amp = (float)(mean_rank_factor * 2e3), tol = k ? 1e-2f : 2e-3f; /* bf16: 8 bits */
        for (int i = 0; i < NT_C; i++) {
            CHECK(ak_train_wait(c->train, h[i]) == AK_OK);
            for (int64_t j = 0; j < lens[i]; j++)
                CHECK(fabsf(out[i][j] - amp * sinf((float)(j + 7 * i))) <= tol * amp);
            ak_train_release(c->train, h[i]);
        }
    }
    for (int i = 0; i < NT_C; i++) {
        if (out[i] != in[i]) free(out[i]);
        free(in[i]);
    }
}

static void test_compression(void **state) {
    (void)state;
    run_world(2, scenario_compression, NULL, NULL);
    run_world(3, scenario_compression, NULL, NULL);
}

static void scenario_dgc(rank_ctx *c) {
    enum { N = 4000 };
    float grad[N], out[N];
    ak_dgc_config dgc = AK_DGC_CONFIG_INIT;
    dgc.sparsity = 0.99f;
    dgc.momentum = 0;
    for (int step = 0; step < 3; step++) {
        for (int j = 0; j < N; j++) grad[j] = (j % 100 == 0) ? 10.0f : 0.001f * (float)c->rank;
        ak_train_op op = f32_allreduce("dgc.w", grad, out, N);
        op.compression = AK_COMPRESS_DGC;
        op.dgc = &dgc;
        ak_train_handle h;
        CHECK(ak_train_enqueue(c->train, &op, &h) == AK_OK);
        CHECK(ak_train_wait(c->train, h) == AK_OK);
        int big = 0;
        for (int j = 0; j < N; j++) big += out[j] >= 10.0f * (float)c->size - 1e-3f;
        CHECK(big >= 35); /* the 40 large entries are the top 1 % on every rank */
        ak_train_release(c->train, h);
    }
}

static void test_dgc(void **state) {
    (void)state;
    run_world(2, scenario_dgc, NULL, NULL);
}

static void scenario_update(rank_ctx *c) {
    enum { N = 300 };
    float grad[N], param[N], mom[N] = {0};
    for (int j = 0; j < N; j++) param[j] = 1.0f, grad[j] = (float)(c->rank + 1);
    ak_optim_config oc = AK_OPTIM_CONFIG_INIT;
    oc.kind = AK_OPTIM_SGD;
    oc.lr = 0.1f;
    oc.momentum = 0.9f;
    ak_train_op op = f32_allreduce("upd", grad, grad, N);
    op.op = AK_REDUCE_AVG;
    op.update = &oc;
    op.param = param, op.state1 = mom, op.step = 1;
    ak_train_handle h;
    CHECK(ak_train_enqueue(c->train, &op, &h) == AK_OK);
    CHECK(ak_train_wait(c->train, h) == AK_OK);
    float avg = (float)(c->size + 1) / 2.0f;
    for (int j = 0; j < N; j++) CHECK(fabsf(param[j] - (1.0f - 0.1f * avg)) < 1e-6f);
    ak_train_release(c->train, h);
}

static void test_update_handoff(void **state) {
    (void)state;
    run_world(2, scenario_update, NULL, NULL);
}

/* ---- join, process sets ------------------------------------------------------------------ */

static void scenario_join(rank_ctx *c) {
    int steps = c->rank == 0 ? 3 : 1; /* rank 0 has more batches */
    for (int s = 0; s < steps; s++) {
        float v[4] = {1, 1, 1, 1}, out[4];
        ak_train_op op = f32_allreduce("step.grad", v, out, 4);
        ak_train_handle h;
        CHECK(ak_train_enqueue(c->train, &op, &h) == AK_OK);
        CHECK(ak_train_wait(c->train, h) == AK_OK);
        CHECK(out[0] == (s == 0 ? (float)c->size : 1.0f)); /* joined ranks add zeros */
        ak_train_release(c->train, h);
    }
    int last = -2;
    CHECK(ak_train_join(c->train, 0, &last) == AK_OK);
    CHECK(last == 0);
}

static void test_join_uneven(void **state) {
    (void)state;
    run_world(2, scenario_join, NULL, NULL);
    run_world(3, scenario_join, NULL, NULL);
    ak_train_config cfg = AK_TRAIN_CONFIG_INIT; /* joined ranks' zeros through streams */
    cfg.fusion_streams = 2;
    run_world(3, scenario_join, &cfg, NULL);
}

/* One f32 op of 2 elements (this rank's value in both), waited for; returns its status
 * and leaves the result in out. */
static ak_status run_op2(rank_ctx *c, ak_train_op_kind kind, const char *name, ak_reduce_op op,
                         int root, float *out) {
    float in[2] = {(float)(c->rank + 1), (float)(c->rank + 1)};
    ak_train_op o = f32_allreduce(name, in, out, 2);
    o.kind = kind;
    o.op = op;
    o.root = root;
    ak_train_handle h;
    ak_status st = ak_train_enqueue(c->train, &o, &h);
    if (st != AK_OK) return st;
    st = ak_train_wait(c->train, h);
    ak_train_release(c->train, h);
    return st;
}

/* While rank 2 has joined, ranks 0 and 1 get an error instead of a wrong result for a
 * Min/Max/Product allreduce (negotiated, and cached before the join) and for a broadcast
 * from the joined rank; sums and broadcasts from a present rank still work. */
static void scenario_join_refusals(rank_ctx *c) {
    float out[2];
    EXPECT(run_op2(c, AK_TRAIN_ALLREDUCE, "j.max", AK_REDUCE_MAX, 0, out) == AK_OK);
    EXPECT(out[0] == 3.0f);
    if (c->rank < 2) {
        EXPECT(run_op2(c, AK_TRAIN_ALLREDUCE, "j.min", AK_REDUCE_MIN, 0, out) == AK_ERR_UNSUPPORTED);
        EXPECT(strstr(ak_last_error(), "'j.min'") && strstr(ak_last_error(), "joined") &&
               strstr(ak_last_error(), "[2]"));
        EXPECT(run_op2(c, AK_TRAIN_ALLREDUCE, "j.max", AK_REDUCE_MAX, 0, out) == AK_ERR_UNSUPPORTED);
        EXPECT(strstr(ak_last_error(), "'j.max'"));
        EXPECT(run_op2(c, AK_TRAIN_ALLREDUCE, "j.prod", AK_REDUCE_PROD, 0, out) == AK_ERR_UNSUPPORTED);
        EXPECT(run_op2(c, AK_TRAIN_BROADCAST, "j.bc2", AK_REDUCE_SUM, 2, out) == AK_ERR_UNSUPPORTED);
        EXPECT(strstr(ak_last_error(), "'j.bc2'") && strstr(ak_last_error(), "root rank 2"));
        EXPECT(run_op2(c, AK_TRAIN_ALLREDUCE, "j.sum", AK_REDUCE_SUM, 0, out) == AK_OK);
        EXPECT(out[0] == 3.0f); /* 1 + 2 + the joined rank's zero */
        EXPECT(run_op2(c, AK_TRAIN_BROADCAST, "j.bc1", AK_REDUCE_SUM, 1, out) == AK_OK);
        EXPECT(out[1] == 2.0f);
    }
    EXPECT(ak_train_join(c->train, 0, NULL) == AK_OK);
    /* everyone is back: the cached Max runs again */
    EXPECT(run_op2(c, AK_TRAIN_ALLREDUCE, "j.max", AK_REDUCE_MAX, 0, out) == AK_OK);
    EXPECT(out[0] == 3.0f);
}

static void test_join_refusals(void **state) {
    (void)state;
    run_world(3, scenario_join_refusals, NULL, NULL);
}

static void scenario_process_sets(rank_ctx *c) {
    int ranks[2] = {0, 2}, id = -1;
    CHECK(ak_train_add_process_set(c->train, ranks, 2, &id) == AK_OK);
    CHECK(id == 1);
    int prank, psize;
    CHECK(ak_train_process_set_info(c->train, id, &prank, &psize) == AK_OK);
    CHECK(psize == 2 && prank == (c->rank == 1 ? -1 : c->rank / 2));
    if (c->rank != 1) {
        float v = (float)c->rank, out;
        ak_train_op op = f32_allreduce("ps.x", &v, &out, 1);
        op.process_set = id;
        ak_train_handle h;
        CHECK(ak_train_enqueue(c->train, &op, &h) == AK_OK);
        CHECK(ak_train_wait(c->train, h) == AK_OK);
        CHECK(out == 2.0f);
        ak_train_release(c->train, h);
    } else {
        float v = 0, out;
        ak_train_op op = f32_allreduce("ps.x", &v, &out, 1);
        op.process_set = id;
        ak_train_handle h;
        CHECK(ak_train_enqueue(c->train, &op, &h) == AK_ERR_INVALID_ARG);
    }
    CHECK(ak_train_barrier(c->train, 0) == AK_OK);
    CHECK(ak_train_remove_process_set(c->train, id) == AK_OK);
    CHECK(ak_train_process_set_info(c->train, id, &prank, &psize) == AK_ERR_INVALID_ARG);
}

static void test_process_sets(void **state) {
    (void)state;
    run_world(3, scenario_process_sets, NULL, NULL);
    /* with fusion streams: the global set's allreduces on the streams, the others not */
    ak_train_config cfg = AK_TRAIN_CONFIG_INIT;
    cfg.fusion_streams = 2;
    run_world(3, scenario_process_sets, &cfg, NULL);
}

/* ---- errors: mismatch, stall, shutdown ----------------------------------------------------- */

static void scenario_mismatch(rank_ctx *c) {
    float v[6] = {0}, out[6];
    ak_train_op op = f32_allreduce("bad.shape", v, out, c->rank == 1 ? 6 : 5);
    ak_train_handle h;
    CHECK(ak_train_enqueue(c->train, &op, &h) == AK_OK);
    CHECK(ak_train_wait(c->train, h) == AK_ERR_MISMATCH);
    const char *msg = ak_last_error();
    CHECK(strstr(msg, "bad.shape") && strstr(msg, "rank 0") && strstr(msg, "rank 1"));
    ak_train_release(c->train, h);
    /* the runtime goes on working */
    float w = 1, sum;
    ak_train_op ok = f32_allreduce("fine", &w, &sum, 1);
    CHECK(ak_train_enqueue(c->train, &ok, &h) == AK_OK);
    CHECK(ak_train_wait(c->train, h) == AK_OK && sum == (float)c->size);
    ak_train_release(c->train, h);
    /* a cached name submitted with another dtype is renegotiated and reported */
    double d = 1, dsum;
    ak_train_op again = f32_allreduce("fine", c->rank == 0 ? (const void *)&d : &w,
                                      c->rank == 0 ? (void *)&dsum : &sum, 1);
    if (c->rank == 0) again.dtype = AK_DTYPE_F64;
    CHECK(ak_train_enqueue(c->train, &again, &h) == AK_OK);
    CHECK(ak_train_wait(c->train, h) == AK_ERR_MISMATCH);
    CHECK(strstr(ak_last_error(), "dtype mismatch"));
    ak_train_release(c->train, h);
}

static void test_mismatch(void **state) {
    (void)state;
    run_world(2, scenario_mismatch, NULL, NULL);
}

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char stall_log[1024];

static void capture_log(ak_log_level level, ak_subsys subsys, const char *msg, void *user) {
    (void)level, (void)subsys, (void)user;
    pthread_mutex_lock(&log_lock);
    if (strstr(msg, "stall")) snprintf(stall_log, sizeof stall_log, "%s", msg);
    pthread_mutex_unlock(&log_lock);
}

static void scenario_stall(rank_ctx *c) {
    float v = 1, out;
    if (c->rank == 1) usleep(700 * 1000); /* rank 1 is late */
    ak_train_op op = f32_allreduce("slow.tensor", &v, &out, 1);
    ak_train_handle h;
    CHECK(ak_train_enqueue(c->train, &op, &h) == AK_OK);
    CHECK(ak_train_wait(c->train, h) == AK_OK);
    ak_train_release(c->train, h);
}

static void test_stall_inspector(void **state) {
    (void)state;
    ak_log_set_callback(capture_log, NULL);
    ak_train_config cfg = AK_TRAIN_CONFIG_INIT;
    cfg.stall_check_s = 0.2;
    run_world(2, scenario_stall, &cfg, NULL);
    ak_log_set_callback(NULL, NULL);
    assert_non_null(strstr(stall_log, "slow.tensor"));
    assert_non_null(strstr(stall_log, "not yet by ranks [1]"));
}

/* A stall past the shutdown time fails every rank, naming the op and the missing rank:
 * rank 1 never submits "lonely"; its later op fails with the same reason. */
static void scenario_stall_shutdown(rank_ctx *c) {
    float v = 1, out;
    ak_train_op op = f32_allreduce(c->rank == 0 ? "lonely" : "late", &v, &out, 1);
    ak_train_handle h;
    if (c->rank == 1) usleep(1500 * 1000);
    ak_status st = ak_train_enqueue(c->train, &op, &h);
    if (st == AK_OK) {
        st = ak_train_wait(c->train, h);
        ak_train_release(c->train, h);
    }
    CHECK(st == AK_ERR_TIMEOUT);
    CHECK(strstr(ak_last_error(), "'lonely'") != NULL);
    CHECK(strstr(ak_last_error(), "for ranks [1]") != NULL);
}

static void test_stall_shutdown_names_op(void **state) {
    (void)state;
    ak_train_config cfg = AK_TRAIN_CONFIG_INIT;
    cfg.stall_check_s = 0.2;
    cfg.stall_shutdown_s = 0.5;
    run_world(2, scenario_stall_shutdown, &cfg, NULL);
}

static void scenario_shutdown(rank_ctx *c) {
    if (c->rank == 1) {
        ak_train_shutdown(c->train); /* leaves while rank 0 waits */
        c->train = NULL;
        return;
    }
    float v = 1, out;
    ak_train_op op = f32_allreduce("never", &v, &out, 1);
    ak_train_handle h;
    ak_status st = ak_train_enqueue(c->train, &op, &h);
    if (st == AK_OK) {
        CHECK(ak_train_wait(c->train, h) != AK_OK);
        ak_train_release(c->train, h);
    }
    CHECK(ak_train_enqueue(c->train, &op, &h) != AK_OK); /* stopped for good */
}

static void test_shutdown_propagates(void **state) {
    (void)state;
    ak_comm *comms[2];
    ak_train *trains[2];
    rank_ctx ctx[2];
    pthread_t th[2];
    assert_int_equal(ak_comm_init_local(2, NULL, comms), AK_OK);
    for (int r = 0; r < 2; r++) {
        ak_train_config tc = AK_TRAIN_CONFIG_INIT;
        tc.comm = comms[r];
        assert_int_equal(ak_train_init(&tc, &trains[r]), AK_OK);
        ctx[r] = (rank_ctx){.rank = r, .size = 2, .train = trains[r], .fn = scenario_shutdown};
    }
    for (int r = 0; r < 2; r++) pthread_create(&th[r], NULL, rank_main, &ctx[r]);
    for (int r = 0; r < 2; r++) pthread_join(th[r], NULL);
    ak_train_shutdown(ctx[0].train);
    for (int r = 0; r < 2; r++) ak_comm_free(comms[r]);
    if (ctx[0].failed_line) fail_msg("line %d: %s", ctx[0].failed_line, ctx[0].failed_what);
}

/* ---- integer scale factors -------------------------------------------------------------------- */

/* Horovod's rule, the reference: v * factor in double, truncated toward zero (saturated). */
static int64_t scaled_ref(int64_t v, double factor, double lo, double hi) {
    double x = trunc((double)v * factor);
    return (int64_t)(x < lo ? lo : x > hi ? hi : x);
}

typedef struct int_case {
    ak_dtype dtype;
    double lo, hi;
} int_case;

static const int_case int_cases[] = {{AK_DTYPE_I8, -128, 127},
                                     {AK_DTYPE_U8, 0, 255},
                                     {AK_DTYPE_I32, -2147483648.0, 2147483647.0},
                                     /* 2^63 - 1 is no double: the largest below */
                                     {AK_DTYPE_I64, -9223372036854775808.0,
                                      9223372036854774784.0}};

/* j = 0 with `big`: the dtype's largest value, which saturates once scaled up (only for
 * Max: a sum of it would overflow) */
static int64_t int_input(int rank, int j, const int_case *k, int big) {
    if (j == 0 && big) return (int64_t)k->hi;
    int64_t v = (j * 7 + rank * 3) % 19 - (k->lo < 0 ? 9 : 0);
    return v;
}

static void store_int(ak_dtype d, void *buf, int j, int64_t v) {
    if (d == AK_DTYPE_I8) ((int8_t *)buf)[j] = (int8_t)v;
    else if (d == AK_DTYPE_U8) ((uint8_t *)buf)[j] = (uint8_t)v;
    else if (d == AK_DTYPE_I32) ((int32_t *)buf)[j] = (int32_t)v;
    else ((int64_t *)buf)[j] = v;
}

static int64_t load_int(ak_dtype d, const void *buf, int j) {
    if (d == AK_DTYPE_I8) return ((const int8_t *)buf)[j];
    if (d == AK_DTYPE_U8) return ((const uint8_t *)buf)[j];
    if (d == AK_DTYPE_I32) return ((const int32_t *)buf)[j];
    return ((const int64_t *)buf)[j];
}

static void scenario_int_scaling(rank_ctx *c) {
    enum { N = 9 };
    static const struct { ak_reduce_op op; double pre, post; } modes[] = {
        {AK_REDUCE_SUM, 0.5, 3.0}, {AK_REDUCE_AVG, 1.0, 1.0}, {AK_REDUCE_AVG, 2.5, 0.4},
        {AK_REDUCE_MAX, 2.5, 0.5}};
    for (size_t k = 0; k < sizeof int_cases / sizeof *int_cases; k++) {
        const int_case *ic = &int_cases[k];
        for (size_t m = 0; m < sizeof modes / sizeof *modes; m++) {
            int64_t in[N], out[N];
            int big = modes[m].op == AK_REDUCE_MAX;
            for (int j = 0; j < N; j++) store_int(ic->dtype, in, j, int_input(c->rank, j, ic, big));
            char name[32];
            snprintf(name, sizeof name, "int.%zu.%zu", k, m);
            ak_train_op op = AK_TRAIN_OP_INIT;
            op.name = name, op.dtype = ic->dtype, op.input = in, op.output = out;
            op.ndim = 1, op.shape[0] = N;
            op.op = modes[m].op, op.prescale = modes[m].pre, op.postscale = modes[m].post;
            ak_train_handle h;
            CHECK(ak_train_enqueue(c->train, &op, &h) == AK_OK);
            CHECK(ak_train_wait(c->train, h) == AK_OK);
            ak_train_release(c->train, h);
            double post = modes[m].post / (modes[m].op == AK_REDUCE_AVG ? c->size : 1);
            for (int j = 0; j < N; j++) {
                int64_t acc = modes[m].op == AK_REDUCE_MAX ? INT64_MIN : 0;
                for (int r = 0; r < c->size; r++) {
                    int64_t x = scaled_ref(int_input(r, j, ic, big), modes[m].pre, ic->lo, ic->hi);
                    acc = modes[m].op == AK_REDUCE_MAX ? (x > acc ? x : acc) : acc + x;
                }
                CHECK(load_int(ic->dtype, out, j) == scaled_ref(acc, post, ic->lo, ic->hi));
            }
        }
    }
}

static void test_integer_scaling(void **state) {
    (void)state;
    run_world(3, scenario_int_scaling, NULL, NULL); /* 1/3: not a power of two */
}

/* ---- argument checks ------------------------------------------------------------------------ */

/* A runtime over a one-rank in-memory communicator (free both after use). */
static ak_train *single_rank_runtime(ak_comm **comm) {
    ak_train *t = NULL;
    assert_int_equal(ak_comm_init_local(1, NULL, comm), AK_OK);
    ak_train_config cfg = AK_TRAIN_CONFIG_INIT;
    cfg.comm = *comm;
    assert_int_equal(ak_train_init(&cfg, &t), AK_OK);
    return t;
}

static void test_bad_arguments(void **state) {
    (void)state;
    ak_comm *comm;
    ak_train *t = single_rank_runtime(&comm);
    float x[4] = {0}, y[4];
    ak_train_handle h;
    ak_train_op op = f32_allreduce(NULL, x, y, 4);
    assert_int_equal(ak_train_enqueue(t, &op, &h), AK_ERR_INVALID_ARG);
    op.name = "x";
    op.shape[0] = -1;
    assert_int_equal(ak_train_enqueue(t, &op, &h), AK_ERR_INVALID_ARG);
    assert_non_null(strstr(ak_last_error(), "negative"));
    op.shape[0] = 4;
    op.output = NULL;
    assert_int_equal(ak_train_enqueue(t, &op, &h), AK_ERR_INVALID_ARG);
    op.output = y;
    op.dtype = AK_DTYPE_I32;
    op.compression = AK_COMPRESS_FP16;
    assert_int_equal(ak_train_enqueue(t, &op, &h), AK_ERR_INVALID_ARG);
    op.dtype = AK_DTYPE_F32;
    op.compression = AK_COMPRESS_NONE;
    op.process_set = 5;
    assert_int_equal(ak_train_enqueue(t, &op, &h), AK_ERR_INVALID_ARG);
    op.process_set = 0;
    assert_int_equal(ak_train_wait(t, 12345), AK_ERR_INVALID_ARG);
    assert_int_equal(ak_train_enqueue(t, &op, &h), AK_OK);
    ak_train_handle h2;
    ak_status dup = ak_train_enqueue(t, &op, &h2); /* same name while pending (or done) */
    assert_int_equal(ak_train_wait(t, h), AK_OK);
    if (dup == AK_OK) assert_int_equal(ak_train_wait(t, h2), AK_OK), ak_train_release(t, h2);
    assert_int_equal(ak_train_release(t, h), AK_OK);
    assert_int_equal(ak_train_release(t, h), AK_ERR_INVALID_ARG);
    ak_train_shutdown(t);
    ak_comm_free(comm);
}

/* ---- AK_TRAIN_KEEP_HEAP ---------------------------------------------------------------------- */

#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
/* 1 when some [heap] mapping of this process carries the huge-page advice (VmFlags hg). */
static int heap_has_huge_page_advice(void) {
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) return 0;
    char line[512];
    int in_heap = 0, advised = 0;
    while (!advised && fgets(line, sizeof line, f)) {
        if (strchr(line, '-') && strchr(line, ' ') && strchr(line, '-') < strchr(line, ' '))
            in_heap = strstr(line, "[heap]") != NULL; /* a mapping's header line */
        else if (in_heap && strncmp(line, "VmFlags:", 8) == 0)
            advised = strstr(line, " hg") != NULL;
    }
    fclose(f);
    return advised;
}
#endif

/* After ak_train_init a block far above glibc's mmap threshold comes from the heap, and
 * freeing it keeps its pages: the next step's tensors reuse them without page faults. */
static void test_heap_kept(void **state) {
    (void)state;
#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
    if (getenv("MALLOC_MMAP_MAX_") || getenv("GLIBC_TUNABLES")) skip(); /* the user's own */
    ak_comm *comm;
    ak_train *t = single_rank_runtime(&comm);
    struct mallinfo2 before = mallinfo2();
    size_t big = (size_t)96 << 20;
    char *p = malloc(big);
    assert_non_null(p);
    memset(p, 1, big);
    struct mallinfo2 during = mallinfo2();
    assert_int_equal(during.hblks, before.hblks); /* not a fresh mmap */
    free(p);
    struct mallinfo2 after = mallinfo2();
    assert_true(after.arena >= during.arena); /* not trimmed back to the system */
    assert_true(after.fordblks >= big);       /* free in the heap, ready for reuse */
    if (ak__train_huge_pages_on_advice()) {              /* the background thread advised the growth */
        int advised = 0;
        for (int tries = 0; tries < 200 && !(advised = heap_has_huge_page_advice()); tries++)
            usleep(5000);
        assert_true(advised);
    }
    ak_train_shutdown(t);
    ak_comm_free(comm);
#else
    skip(); /* another C library or a sanitizer's allocator */
#endif
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_allreduce_any_order),
        cmocka_unit_test(test_fusion_bit_identical),
        cmocka_unit_test(test_zero_block_elision),
        cmocka_unit_test(test_grouped_allreduce),
        cmocka_unit_test(test_group_identity),
        cmocka_unit_test(test_other_ops),
        cmocka_unit_test(test_compression),
        cmocka_unit_test(test_fusion_streams),
        cmocka_unit_test(test_dgc),
        cmocka_unit_test(test_update_handoff),
        cmocka_unit_test(test_join_uneven),
        cmocka_unit_test(test_join_refusals),
        cmocka_unit_test(test_process_sets),
        cmocka_unit_test(test_mismatch),
        cmocka_unit_test(test_stall_inspector),
        cmocka_unit_test(test_stall_shutdown_names_op),
        cmocka_unit_test(test_integer_scaling),
        cmocka_unit_test(test_shutdown_propagates),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_heap_kept),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
