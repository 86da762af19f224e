/* Tests of the Adasum allreduce (ak_comm_allreduce_adasum, algo/adasum.c): worlds of
 * threads (ak_comm_init_local), every size in {1,2,3,4,5,8}, f32 and f64, several tensor
 * layouts (zero-length tensors, zero vectors), counts 0/1/odd, in and out of place,
 * checked against a scalar single-process reference of the documented pairwise tree
 * (fold pairs (2j, 2j+1), then a balanced tree over the virtual indices); every rank
 * must hold the same bits. Also Adasum's defining property (orthogonal vectors add,
 * identical ones average), ordering behind async ops, and argument errors. */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "accelkit/comm.h"

#define MAX_W 8
#define NELEM(a) (sizeof(a) / sizeof *(a))

static const int world_sizes[] = {1, 2, 3, 4, 5, 8};

/* ---- the reference: scalar, one process ------------------------------------------- */

static double get(ak_dtype dt, const void *p, size_t i) {
    return dt == AK_DTYPE_F32 ? ((const float *)p)[i] : ((const double *)p)[i];
}

static void put(ak_dtype dt, void *p, size_t i, double v) {
    if (dt == AK_DTYPE_F32) ((float *)p)[i] = (float)v;
    else ((double *)p)[i] = v;
}

/* a = adasum(a, b), tensor by tensor, straight from the paper's formula */
static void ref_pair(ak_dtype dt, void *a, const void *b, const size_t *segs, size_t nseg) {
    size_t at = 0;
    for (size_t s = 0; s < nseg; at += segs[s++]) {
        double ab = 0, aa = 0, bb = 0;
        for (size_t i = at; i < at + segs[s]; i++) {
            double x = get(dt, a, i), y = get(dt, b, i);
            ab += x * y, aa += x * x, bb += y * y;
        }
        double ca = aa == 0 ? 1 : 1 - ab / (2 * aa), cb = bb == 0 ? 1 : 1 - ab / (2 * bb);
        for (size_t i = at; i < at + segs[s]; i++)
            put(dt, a, i, ca * get(dt, a, i) + cb * get(dt, b, i));
    }
}

/* Adasum of in[0..n) into in[...] (clobbered); the result is left in *out. */
static void ref_tree(ak_dtype dt, void **in, int n, const size_t *segs, size_t nseg, void **out) {
    int p = 1;
    while (p * 2 <= n) p *= 2;
    int r = n - p;
    void *v[MAX_W];
    for (int j = 0; j < p; j++) v[j] = j < r ? in[2 * j + 1] : in[j + r];
    for (int j = 0; j < r; j++) ref_pair(dt, v[j], in[2 * j], segs, nseg);
    for (int d = 1; d < p; d <<= 1)
        for (int j = 0; j < p; j += 2 * d) ref_pair(dt, v[j], v[j + d], segs, nseg);
    *out = v[0];
}

/* ---- a world of rank threads --------------------------------------------------------- */

typedef struct job {
    ak_dtype dt;
    size_t count, nseg;
    const size_t *segs;
    int mode;          /* 0: out of place, 1: AK_IN_PLACE, 2: sendbuf == recvbuf */
    int zero_rank;     /* this rank's input is all zeros (-1: none) */
    void *in[MAX_W];   /* inputs, kept for the reference */
    void *out[MAX_W];  /* results */
    ak_status st[MAX_W];
    char err[MAX_W][256];
} job;

typedef struct rank_arg {
    ak_comm *comm;
    int rank;
    job *j;
    ak_status (*fn)(struct rank_arg *a);
} rank_arg;

static uint64_t mix(uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Inputs in [-1, 1) from (rank, index); the third tensor is zero on every rank. */
static double input(const job *j, int rank, size_t i) {
    if (rank == j->zero_rank) return 0;
    size_t at = 0;
    for (size_t s = 0; s < j->nseg; at += j->segs[s++])
        if (s == 2 && i >= at && i < at + j->segs[s]) return 0;
    return (double)(mix((uint64_t)rank << 40 ^ i) >> 11) / 4503599627370496.0 - 1.0;
}

static double rounded(ak_dtype dt, double v) { return dt == AK_DTYPE_F32 ? (float)v : v; }

static ak_status run_adasum(rank_arg *a) {
    job *j = a->j;
    void *in = j->in[a->rank], *out = j->out[a->rank];
    const void *send = j->mode == 0 ? in : j->mode == 1 ? AK_IN_PLACE : out;
    if (j->mode) memcpy(out, in, j->count * (j->dt == AK_DTYPE_F32 ? 4 : 8));
    return ak_comm_allreduce_adasum(a->comm, send, out, j->count, j->dt, j->segs, j->nseg);
}

static void *rank_main(void *p) {
    rank_arg *a = p;
    ak_status st = a->fn(a);
    a->j->st[a->rank] = st;
    if (st != AK_OK) snprintf(a->j->err[a->rank], sizeof a->j->err[0], "%s", ak_last_error());
    return NULL;
}

static void run_world(int n, job *j, ak_status (*fn)(rank_arg *)) {
    ak_comm *comms[MAX_W];
    ak_comm_config cfg = AK_COMM_CONFIG_INIT;
    cfg.timeout_ms = 5000; /* a bug shows as a failure, not a hang */
    assert_int_equal(ak_comm_init_local(n, &cfg, comms), AK_OK);
    pthread_t th[MAX_W];
    rank_arg args[MAX_W];
    for (int r = 0; r < n; r++) {
        args[r] = (rank_arg){comms[r], r, j, fn};
        assert_int_equal(pthread_create(&th[r], NULL, rank_main, &args[r]), 0);
    }
    for (int r = 0; r < n; r++) pthread_join(th[r], NULL);
    for (int r = 0; r < n; r++) ak_comm_free(comms[r]);
}

/* ---- the sweep ------------------------------------------------------------------------ */

static void check_job(job *j, int n) {
    size_t es = j->dt == AK_DTYPE_F32 ? 4 : 8, bytes = j->count * es;
    for (int r = 0; r < n; r++)
        if (j->st[r] != AK_OK) fail_msg("n=%d count=%zu rank %d: %s", n, j->count, r, j->err[r]);
    for (int r = 1; r < n; r++)
        if (bytes && memcmp(j->out[r], j->out[0], bytes))
            fail_msg("n=%d count=%zu: rank %d differs from rank 0", n, j->count, r);
    for (int r = 0; r < n; r++) /* out of place leaves the input alone */
        for (size_t i = 0; j->mode == 0 && i < j->count; i++)
            if (get(j->dt, j->in[r], i) != rounded(j->dt, input(j, r, i)))
                fail_msg("rank %d: input changed", r);
    void *ref;
    size_t whole[1] = {j->count};
    ref_tree(j->dt, j->in, n, j->nseg ? j->segs : whole, j->nseg ? j->nseg : 1, &ref);
    double tol = j->dt == AK_DTYPE_F32 ? 1e-5 : 1e-12;
    for (size_t i = 0; i < j->count; i++) {
        double want = get(j->dt, ref, i), got = get(j->dt, j->out[0], i);
        if (!(fabs(got - want) <= tol * (1 + fabs(want))))
            fail_msg("n=%d count=%zu %s mode %d: [%zu] = %.17g, reference %.17g", n, j->count,
                     j->dt == AK_DTYPE_F32 ? "f32" : "f64", j->mode, i, got, want);
    }
}

static void sweep_one(int n, ak_dtype dt, size_t count, const size_t *segs, size_t nseg,
                      int mode, int zero_rank) {
    job j = {dt, count, nseg, segs, mode, zero_rank, {0}, {0}, {0}, {{0}}};
    size_t es = dt == AK_DTYPE_F32 ? 4 : 8;
    for (int r = 0; r < n; r++) {
        j.in[r] = malloc(count * es + 1);
        j.out[r] = malloc(count * es + 1);
        for (size_t i = 0; i < count; i++) put(dt, j.in[r], i, input(&j, r, i));
    }
    run_world(n, &j, run_adasum);
    check_job(&j, n);
    for (int r = 0; r < n; r++) free(j.in[r]), free(j.out[r]);
}

static void test_sweep(void **state) {
    (void)state;
    static const size_t one[] = {1}, odd[] = {3, 0, 2, 2}, big[] = {1, 333, 100, 0, 567, 4096};
    struct { size_t count; const size_t *segs; size_t nseg; } layouts[] = {
        {0, NULL, 0}, {1, one, 1}, {1, NULL, 0}, {7, odd, 4}, {7, NULL, 0}, {5097, big, 6}};
    ak_dtype dts[] = {AK_DTYPE_F32, AK_DTYPE_F64};
    for (size_t w = 0; w < NELEM(world_sizes); w++)
        for (size_t d = 0; d < 2; d++)
            for (size_t l = 0; l < NELEM(layouts); l++)
                for (int mode = 0; mode < 3; mode++)
                    sweep_one(world_sizes[w], dts[d], layouts[l].count, layouts[l].segs,
                              layouts[l].nseg, mode, mode == 1 ? world_sizes[w] - 1 : -1);
}

/* ---- Adasum's defining property -------------------------------------------------------- */

static ak_status run_prop(rank_arg *a) {
    return ak_comm_allreduce_adasum(a->comm, a->j->in[a->rank], a->j->out[a->rank], 4,
                                    AK_DTYPE_F64, NULL, 0);
}

static void test_orthogonal_sum_identical_average(void **state) {
    (void)state;
    static double in[MAX_W][4], out[MAX_W][4];
    job j = {AK_DTYPE_F64, 4, 0, NULL, 0, -1, {0}, {0}, {0}, {{0}}};
    for (int n = 2; n <= 4; n++) { /* orthogonal: e_0 · 1, e_1 · 2, … add up */
        for (int r = 0; r < n; r++) {
            memset(in[r], 0, sizeof in[r]);
            in[r][r] = r + 1.0;
            j.in[r] = in[r], j.out[r] = out[r];
        }
        run_world(n, &j, run_prop);
        for (int r = 0; r < n; r++) {
            assert_int_equal(j.st[r], AK_OK);
            for (int i = 0; i < 4; i++) assert_true(out[r][i] == (i < n ? i + 1.0 : 0.0));
        }
    }
    for (int n = 2; n <= 5; n++) { /* identical: the average, i.e. the vector itself */
        for (int r = 0; r < n; r++) {
            for (int i = 0; i < 4; i++) in[r][i] = 0.5 * i - 0.75;
            j.in[r] = in[r], j.out[r] = out[r];
        }
        run_world(n, &j, run_prop);
        for (int r = 0; r < n; r++)
            for (int i = 0; i < 4; i++) assert_true(fabs(out[r][i] - (0.5 * i - 0.75)) < 1e-15);
    }
}

/* ---- ordering behind async ops, mismatches -------------------------------------------- */

static ak_status run_behind_async(rank_arg *a) {
    float sum[3] = {1, 2, 3};
    double v[2] = {a->rank == 0, a->rank == 1};
    ak_comm_request *req;
    ak_status st = ak_comm_iallreduce(a->comm, AK_IN_PLACE, sum, 3, AK_DTYPE_F32, AK_REDUCE_SUM, &req);
    if (st != AK_OK) return st;
    ak_status sa = ak_comm_allreduce_adasum(a->comm, AK_IN_PLACE, v, 2, AK_DTYPE_F64, NULL, 0);
    if ((st = ak_comm_wait(req)) != AK_OK || sa != AK_OK) return st != AK_OK ? st : sa;
    if (sum[0] != 2 || sum[2] != 6 || v[0] != 1 || v[1] != 1) return AK_ERR_INTERNAL;
    return AK_OK;
}

static ak_status run_segment_mismatch(rank_arg *a) {
    static const size_t s0[] = {3, 4}, s1[] = {4, 3};
    double v[7] = {0};
    return ak_comm_allreduce_adasum(a->comm, AK_IN_PLACE, v, 7, AK_DTYPE_F64,
                                    a->rank ? s1 : s0, 2);
}

static void test_async_order_and_mismatch(void **state) {
    (void)state;
    job j = {AK_DTYPE_F64, 0, 0, NULL, 0, -1, {0}, {0}, {0}, {{0}}};
    run_world(2, &j, run_behind_async);
    for (int r = 0; r < 2; r++)
        if (j.st[r] != AK_OK) fail_msg("rank %d: %s (%s)", r, ak_status_str(j.st[r]), j.err[r]);
    run_world(2, &j, run_segment_mismatch);
    for (int r = 0; r < 2; r++) assert_int_equal(j.st[r], AK_ERR_MISMATCH);
}

/* ---- argument errors: refused locally, before any message ---------------------------- */

static void expect(ak_status st, ak_status want, const char *needle) {
    assert_int_equal(st, want);
    if (!strstr(ak_last_error(), needle)) fail_msg("error '%s' lacks '%s'", ak_last_error(), needle);
}

static void test_bad_arguments(void **state) {
    (void)state;
    ak_comm *c;
    assert_int_equal(ak_comm_init_local(1, NULL, &c), AK_OK);
    float f[4] = {0};
    int32_t i32[4] = {0};
    size_t segs[] = {2, 1}, over[] = {3, 3};
    expect(ak_comm_allreduce_adasum(NULL, f, f, 4, AK_DTYPE_F32, NULL, 0), AK_ERR_INVALID_ARG,
           "NULL communicator");
    expect(ak_comm_allreduce_adasum(c, i32, i32, 4, AK_DTYPE_I32, NULL, 0), AK_ERR_UNSUPPORTED,
           "f32 or f64");
    expect(ak_comm_allreduce_adasum(c, f, f, 4, AK_DTYPE_F16, NULL, 0), AK_ERR_UNSUPPORTED, "f16");
    expect(ak_comm_allreduce_adasum(c, f, f, 4, AK_DTYPE_F32, segs, 2), AK_ERR_INVALID_ARG,
           "sum to 3, not count 4");
    expect(ak_comm_allreduce_adasum(c, f, f, 4, AK_DTYPE_F32, over, 2), AK_ERR_INVALID_ARG,
           "sum past count");
    expect(ak_comm_allreduce_adasum(c, f, f, 4, AK_DTYPE_F32, NULL, 2), AK_ERR_INVALID_ARG,
           "segment_counts is NULL");
    expect(ak_comm_allreduce_adasum(c, NULL, f, 4, AK_DTYPE_F32, NULL, 0), AK_ERR_INVALID_ARG,
           "sendbuf");
    expect(ak_comm_allreduce_adasum(c, f, (void *)AK_IN_PLACE, 4, AK_DTYPE_F32, NULL, 0),
           AK_ERR_INVALID_ARG, "recvbuf");
    /* the communicator is still usable: count 0 with no buffers at all */
    assert_int_equal(ak_comm_allreduce_adasum(c, NULL, NULL, 0, AK_DTYPE_F64, NULL, 0), AK_OK);
    ak_comm_free(c);
}

int main(void) {
    if (ak_init() != AK_OK) {
        fprintf(stderr, "ak_init failed: %s\n", ak_last_error());
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_orthogonal_sum_identical_average),
        cmocka_unit_test(test_async_order_and_mismatch),
        cmocka_unit_test(test_sweep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
