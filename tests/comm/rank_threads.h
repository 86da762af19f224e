/* Test harness for the collective algorithms as threads of one process (included by
 * test_algo.c and test_colls.c): worlds of rank threads over ak_comm_init_local (mem
 * transport), the first failure of any rank recorded for cmocka, and inputs whose exact
 * reduction follows from (seed, rank, index) in every dtype. */
#ifndef AK_TESTS_COMM_RANK_THREADS_H
#define AK_TESTS_COMM_RANK_THREADS_H

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "accelkit/comm.h"
#include "comm/comm_internal.h"
#include "core/half.h"
#include "guarded.h"

#define MAX_W 8
#define BIG_COUNT ((size_t)262147) /* odd, > 1 MB of f32: several ring segments per block */
#define HUGE_COUNT ((size_t)1048577) /* odd, ~1M: what a gradient bucket holds */
#define PERIOD 1021 /* inputs repeat with this prime period, so expectations are cheap */

static const int world_sizes[] = {1, 2, 3, 4, 5, 8};
#define NELEM(a) (sizeof(a) / sizeof *(a))

/* ---- running a world of rank threads ------------------------------------------------ */

typedef struct rank_ctx rank_ctx;
typedef int (*rank_fn)(rank_ctx *x); /* 0 ok, -1 failed (after rank_fail) */

struct rank_ctx {
    ak_comm *comm;
    int rank, n;
    int ranks[MAX_W]; /* identity group */
    ak__group world;
    const void *arg;
    rank_fn fn;
};

static pthread_mutex_t error_lock = PTHREAD_MUTEX_INITIALIZER;
static char first_error[512];
static atomic_int failed;

/* Records the first failure of any rank thread (cmocka asserts are not thread-safe). */
static inline int rank_fail(const rank_ctx *x, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static inline int rank_fail(const rank_ctx *x, const char *fmt, ...) {
    pthread_mutex_lock(&error_lock);
    if (!atomic_exchange(&failed, 1)) {
        int k = snprintf(first_error, sizeof first_error, "rank %d/%d: ", x->rank, x->n);
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(first_error + k, sizeof first_error - (size_t)k, fmt, ap);
        va_end(ap);
    }
    pthread_mutex_unlock(&error_lock);
    return -1;
}

static inline int check_st(const rank_ctx *x, ak_status st, const char *what) {
    if (st == AK_OK) return 0;
    return rank_fail(x, "%s: %s (%s)", what, ak_status_str(st), ak_last_error());
}

static inline void *rank_main(void *p) {
    rank_ctx *x = p;
    x->fn(x);
    return NULL;
}

static inline void run_ranks(ak_comm **comms, int n, rank_fn fn, const void *arg) {
    rank_ctx ctx[MAX_W];
    pthread_t threads[MAX_W];
    atomic_store(&failed, 0);
    for (int r = 0; r < n; r++) {
        rank_ctx *x = &ctx[r];
        *x = (rank_ctx){comms[r], r, n, {0}, {NULL, n, r}, arg, fn};
        for (int i = 0; i < n; i++) x->ranks[i] = i;
        x->world.ranks = x->ranks;
        assert_int_equal(pthread_create(&threads[r], NULL, rank_main, x), 0);
    }
    for (int r = 0; r < n; r++) pthread_join(threads[r], NULL);
    if (atomic_load(&failed)) fail_msg("%s", first_error);
}

static inline void world_open(int n, ak_comm **comms) {
    ak_comm_config cfg = AK_COMM_CONFIG_INIT;
    cfg.timeout_ms = 20000; /* a bug shows as a failure, not a hang */
    ak_status st = ak_comm_init_local(n, &cfg, comms);
    if (st != AK_OK) fail_msg("ak_comm_init_local(%d): %s", n, ak_last_error());
}

static inline void world_close(ak_comm **comms, int n) {
    for (int r = 0; r < n; r++) ak_comm_free(comms[r]);
}

/* A fresh world of n ranks runs fn on every rank. */
static inline void run_world(int n, rank_fn fn, const void *arg) {
    ak_comm *comms[MAX_W];
    world_open(n, comms);
    run_ranks(comms, n, fn, arg);
    world_close(comms, n);
}

/* ---- inputs with predictable results -------------------------------------------------- */

static inline uint64_t mix(uint64_t z) { return test_rand_u64(&z); }

static inline int dtype_signed(ak_dtype dt) { return dt != AK_DTYPE_U8; }

static inline size_t dtype_size(ak_dtype dt) {
    size_t s = 0;
    ak_dtype_size(dt, &s);
    return s;
}

/* Small integers, so every partial result is exact in every dtype: SUM in [-2, 2] (|Σ| ≤
 * 16), PROD ±1 or ±2 (|Π| ≤ 256, a power of two; i8/u8 wrap like the kernels do), MIN/MAX
 * in [-60, 60]. Unsigned types use the non-negative variants. */
static inline int64_t input_value(uint64_t seed, int rank, size_t i, ak_reduce_op op,
                                  ak_dtype dt) {
    uint64_t h = mix(seed ^ mix(((uint64_t)rank << 32) | (i % PERIOD)));
    int sgn = dtype_signed(dt);
    switch (op) {
    case AK_REDUCE_AVG: /* a sum, then divided */
    case AK_REDUCE_SUM: return sgn ? (int64_t)(h % 5) - 2 : (int64_t)(h % 5);
    case AK_REDUCE_PROD: {
        int64_t mag = h % 4 == 0 ? 2 : 1;
        return sgn && (h >> 8) % 3 == 0 ? -mag : mag;
    }
    default: return sgn ? (int64_t)(h % 121) - 60 : (int64_t)(h % 121);
    }
}

/* Stores v as element i of p: floats exactly, integers modulo their width. */
static inline void encode(ak_dtype dt, void *p, size_t i, int64_t v) {
    char *e = (char *)p + i * dtype_size(dt);
    float f = (float)v;
    double d = (double)v;
    uint16_t h;
    uint8_t b = (uint8_t)(uint64_t)v;
    uint32_t w = (uint32_t)(uint64_t)v;
    switch (dt) {
    case AK_DTYPE_F32: memcpy(e, &f, 4); break;
    case AK_DTYPE_F64: memcpy(e, &d, 8); break;
    case AK_DTYPE_F16: h = ak__f32_to_f16_ref(f), memcpy(e, &h, 2); break;
    case AK_DTYPE_BF16: h = ak__f32_to_bf16_ref(f), memcpy(e, &h, 2); break;
    case AK_DTYPE_I8:
    case AK_DTYPE_U8: memcpy(e, &b, 1); break;
    case AK_DTYPE_I32: memcpy(e, &w, 4); break;
    default: memcpy(e, &v, 8); break;
    }
}

static inline int64_t combine(ak_reduce_op op, int64_t a, int64_t b) {
    switch (op) {
    case AK_REDUCE_SUM: return a + b;
    case AK_REDUCE_PROD: return a * b;
    case AK_REDUCE_MIN: return a < b ? a : b;
    default: return a > b ? a : b;
    }
}

typedef struct reduce_case {
    uint64_t seed;
    size_t count;
    ak_dtype dt;
    ak_reduce_op op;
} reduce_case;

static inline void fill_input(const reduce_case *k, int rank, void *buf) {
    for (size_t i = 0; i < k->count; i++)
        encode(k->dt, buf, i, input_value(k->seed, rank, i, k->op, k->dt));
}

/* The encoded expected result over group members ranks[0..n) for i in [0, PERIOD). AVG
 * is the exact sum (small integers) finished by the kernel every rank runs once on its
 * result, ak_reduce_avg_finish: the test checks that the collective sums right and
 * finishes exactly once, not the division's rounding (tests/kernels check that). */
static inline void *expected_table(const reduce_case *k, const int *ranks, int n) {
    size_t period = k->count < PERIOD ? k->count : PERIOD;
    char *t = malloc(period * dtype_size(k->dt) + 1);
    ak_reduce_op op = k->op == AK_REDUCE_AVG ? AK_REDUCE_SUM : k->op;
    for (size_t i = 0; i < period; i++) {
        int64_t acc = input_value(k->seed, ranks[0], i, k->op, k->dt);
        for (int r = 1; r < n; r++)
            acc = combine(op, acc, input_value(k->seed, ranks[r], i, k->op, k->dt));
        encode(k->dt, t, i, acc);
    }
    if (k->op == AK_REDUCE_AVG) ak_reduce_avg_finish(k->dt, t, period, n);
    return t;
}

/* Compares elements [begin, end) of buf with the reduction over the group of the input
 * elements `shift` further on (a reduce-scatter's block starts at its offset). */
static inline int check_reduced_at(const rank_ctx *x, const reduce_case *k, const int *ranks,
                                   int n, const void *buf, size_t begin, size_t end, size_t shift,
                                   const char *what) {
    if (begin >= end) return 0;
    size_t es = dtype_size(k->dt);
    char *t = expected_table(k, ranks, n);
    int rc = 0;
    for (size_t i = begin; i < end && !rc; i++)
        if (memcmp((const char *)buf + i * es, t + ((i + shift) % PERIOD) * es, es))
            rc = rank_fail(x, "%s: count %zu %s %s: element %zu differs", what, k->count,
                           ak_dtype_name(k->dt), ak_reduce_op_name(k->op), i + shift);
    free(t);
    return rc;
}

/* Compares elements [begin, end) of buf with the reduction over the group. */
static inline int check_reduced(const rank_ctx *x, const reduce_case *k, const int *ranks, int n,
                                const void *buf, size_t begin, size_t end, const char *what) {
    return check_reduced_at(x, k, ranks, n, buf, begin, end, 0, what);
}

#endif /* AK_TESTS_COMM_RANK_THREADS_H */
