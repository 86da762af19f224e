/* Tests of the thread pool: every index exactly once, a slow thread's share taken over by
 * the others, nesting, concurrent callers, and that an idle pool sleeps instead of
 * spinning. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "accelkit/ak.h"

typedef struct coverage {
    _Atomic int *hits;
    _Atomic int max_thread;
} coverage;

static void count_hits(void *ctx, size_t begin, size_t end, int thread_index) {
    coverage *c = ctx;
    for (size_t i = begin; i < end; i++) atomic_fetch_add(&c->hits[i], 1);
    int prev = atomic_load(&c->max_thread);
    while (thread_index > prev && !atomic_compare_exchange_weak(&c->max_thread, &prev, thread_index)) {
    }
}

static void check_coverage(ak_threadpool *pool, size_t n, size_t grain) {
    coverage c = {calloc(n + 1, sizeof(_Atomic int)), 0};
    assert_int_equal(ak_threadpool_parallel_for(pool, n, grain, count_hits, &c), AK_OK);
    for (size_t i = 0; i < n; i++)
        if (c.hits[i] != 1) fail_msg("n=%zu grain=%zu: index %zu hit %d times", n, grain, i, c.hits[i]);
    int size;
    ak_threadpool_size(pool, &size);
    assert_true(c.max_thread < size);
    free(c.hits);
}

static void test_every_index_once(void **state) {
    static const int threads[] = {1, 2, 3, 5};
    static const size_t sizes[] = {0, 1, 2, 3, 7, 64, 1000, 100003};
    static const size_t grains[] = {0, 1, 3, 64, 1000000};
    for (size_t t = 0; t < sizeof threads / sizeof *threads; t++) {
        ak_threadpool *pool;
        assert_int_equal(ak_threadpool_create(threads[t], &pool), AK_OK);
        for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
            for (size_t g = 0; g < sizeof grains / sizeof *grains; g++)
                check_coverage(pool, sizes[s], grains[g]);
        for (int rep = 0; rep < 2000; rep++) check_coverage(pool, 4, 1); /* back to back */
        ak_threadpool_free(pool);
    }
}

/* Records who ran each index; the workers (thread_index > 0) are slow. */
static void slow_workers(void *ctx, size_t begin, size_t end, int thread_index) {
    _Atomic int *ran_by = ctx;
    for (size_t i = begin; i < end; i++) {
        atomic_store(&ran_by[i], thread_index + 1);
        if (thread_index > 0) nanosleep(&(struct timespec){0, 20 * 1000 * 1000}, NULL);
    }
}

/* Each thread owns a contiguous share of the chunks; the caller, done with its own, must
 * take over the slow workers' shares instead of waiting ~20 ms per chunk for them. */
static void test_slow_threads_shares_are_taken_over(void **state) {
    (void)state;
    enum { N = 24 };
    for (int threads = 2; threads <= 3; threads++) {
        ak_threadpool *pool;
        assert_int_equal(ak_threadpool_create(threads, &pool), AK_OK);
        _Atomic int ran_by[N] = {0};
        assert_int_equal(ak_threadpool_parallel_for(pool, N, 1, slow_workers, ran_by), AK_OK);
        int by_caller = 0;
        for (int i = 0; i < N; i++) {
            assert_true(ran_by[i] >= 1 && ran_by[i] <= threads);
            by_caller += ran_by[i] == 1;
        }
        if (by_caller < N / 2 + 2)
            fail_msg("%d threads: the caller ran %d of %d chunks, the slow workers the rest",
                     threads, by_caller, N);
        ak_threadpool_free(pool);
    }
}

static ak_threadpool *shared_pool;

static void nested(void *ctx, size_t begin, size_t end, int thread_index) {
    for (size_t i = begin; i < end; i++) check_coverage(shared_pool, 17, 1);
}

static void test_nested_call_runs_serially(void **state) {
    assert_int_equal(ak_threadpool_create(3, &shared_pool), AK_OK);
    assert_int_equal(ak_threadpool_parallel_for(shared_pool, 8, 1, nested, NULL), AK_OK);
    ak_threadpool_free(shared_pool);
}

static void *hammer(void *arg) {
    for (int i = 0; i < 300; i++) check_coverage(shared_pool, 257, 3);
    return NULL;
}

static void test_concurrent_callers(void **state) {
    assert_int_equal(ak_threadpool_create(2, &shared_pool), AK_OK);
    pthread_t t[3];
    for (int i = 0; i < 3; i++) pthread_create(&t[i], NULL, hammer, NULL);
    for (int i = 0; i < 3; i++) pthread_join(t[i], NULL);
    ak_threadpool_free(shared_pool);
}

static double process_cpu_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* After work ends, workers spin for AK_POOL_SPIN_US and then must sleep. */
static void test_idle_pool_sleeps(void **state) {
    ak_threadpool *pool;
    assert_int_equal(ak_threadpool_create(4, &pool), AK_OK);
    check_coverage(pool, 1000, 1);
    struct timespec settle = {0, 50 * 1000000}, window = {0, 300 * 1000000};
    nanosleep(&settle, NULL);
    double before = process_cpu_seconds();
    nanosleep(&window, NULL);
    double used = process_cpu_seconds() - before;
    /* 3 spinning workers would burn ~0.9 s of CPU in this window */
    if (used > 0.03) fail_msg("idle pool used %.3f s of CPU in 0.3 s", used);
    check_coverage(pool, 1000, 1); /* and wakes up again */
    ak_threadpool_free(pool);
}

static void test_bad_arguments(void **state) {
    ak_threadpool *pool = NULL;
    assert_int_equal(ak_threadpool_create(-1, &pool), AK_ERR_INVALID_ARG);
    assert_null(pool);
    assert_int_equal(ak_threadpool_create(1, NULL), AK_ERR_INVALID_ARG);
    assert_int_equal(ak_threadpool_parallel_for(NULL, 3, 0, count_hits, NULL), AK_ERR_INVALID_ARG);
    assert_int_equal(ak_threadpool_create(2, &pool), AK_OK);
    assert_int_equal(ak_threadpool_parallel_for(pool, 3, 0, NULL, NULL), AK_ERR_INVALID_ARG);
    ak_threadpool_free(pool);
    ak_threadpool_free(NULL);
    ak_threadpool *global1, *global2;
    assert_int_equal(ak_threadpool_global(&global1), AK_OK);
    assert_int_equal(ak_threadpool_global(&global2), AK_OK);
    assert_ptr_equal(global1, global2);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_index_once),
        cmocka_unit_test(test_slow_threads_shares_are_taken_over),
        cmocka_unit_test(test_nested_call_runs_serially),
        cmocka_unit_test(test_concurrent_callers),
        cmocka_unit_test(test_idle_pool_sleeps),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
