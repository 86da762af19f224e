/* Tests of aligned allocation, arenas, the monotonic clock and the trace writer. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "accelkit/ak.h"
#include "core/params.h"

static void test_aligned_alloc(void **state) {
    for (size_t size = 0; size < 5000; size += 37) {
        void *p;
        assert_int_equal(ak_alloc(size, &p), AK_OK);
        assert_non_null(p);
        assert_int_equal((uintptr_t)p % AK_ALIGNMENT, 0);
        memset(p, 0xab, size);
        ak_free(p);
    }
    void *p = (void *)1;
    assert_int_equal(ak_alloc(SIZE_MAX - 8, &p), AK_ERR_INVALID_ARG);
    assert_null(p);
    assert_int_equal(ak_alloc((size_t)1 << 62, &p), AK_ERR_NO_MEMORY);
    assert_int_equal(ak_alloc(8, NULL), AK_ERR_INVALID_ARG);
}

/* AK_MAX_ALLOC_BYTES caps one allocation, named in the error; 0 means physical memory. */
static void test_alloc_limit(void **state) {
    void *p = (void *)1;
    setenv("AK_MAX_ALLOC_BYTES", "1000000", 1);
    assert_int_equal(ak__params_load(), AK_OK);
    assert_int_equal(ak_alloc(1000001, &p), AK_ERR_NO_MEMORY);
    assert_null(p);
    assert_non_null(strstr(ak_last_error(), "1000001 bytes"));
    assert_non_null(strstr(ak_last_error(), "AK_MAX_ALLOC_BYTES"));
    assert_int_equal(ak_alloc(1000000, &p), AK_OK);
    ak_free(p);
    unsetenv("AK_MAX_ALLOC_BYTES");
    assert_int_equal(ak__params_load(), AK_OK);
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    assert_int_equal(ak_alloc((size_t)pages * (size_t)page + 1, &p), AK_ERR_NO_MEMORY);
    assert_non_null(strstr(ak_last_error(), "physical memory"));
    assert_int_equal(ak_alloc(1000001, &p), AK_OK);
    ak_free(p);
}

static void test_arena(void **state) {
    ak_arena *a;
    assert_int_equal(ak_arena_create(4096, &a), AK_OK);
    size_t used = 0;
    for (int i = 0; i < 200; i++) {
        size_t align = (size_t)1 << (i % 8);
        void *p;
        assert_int_equal(ak_arena_alloc(a, (size_t)(i * 13 % 700), align, &p), AK_OK);
        assert_int_equal((uintptr_t)p % align, 0);
        memset(p, i, (size_t)(i * 13 % 700));
    }
    void *big;
    assert_int_equal(ak_arena_alloc(a, 100000, 64, &big), AK_OK); /* bigger than a block */
    memset(big, 1, 100000);
    assert_int_equal(ak_arena_used(a, &used), AK_OK);
    assert_true(used >= 100000);
    assert_int_equal(ak_arena_reset(a), AK_OK);
    assert_int_equal(ak_arena_used(a, &used), AK_OK);
    assert_int_equal(used, 0);
    void *p;
    assert_int_equal(ak_arena_alloc(a, 10, 3, &p), AK_ERR_INVALID_ARG); /* not a power of 2 */
    assert_int_equal(ak_arena_alloc(a, 10, 8192, &p), AK_ERR_INVALID_ARG);
    assert_int_equal(ak_arena_alloc(NULL, 10, 8, &p), AK_ERR_INVALID_ARG);
    ak_arena_free(a);
    ak_arena_free(NULL);
}

static void test_clock_is_monotonic(void **state) {
    uint64_t prev = ak_now_ns();
    for (int i = 0; i < 100000; i++) {
        uint64_t now = ak_now_ns();
        assert_true(now >= prev);
        prev = now;
    }
}

static void *trace_from_thread(void *arg) {
    for (int i = 0; i < 500; i++) {
        uint64_t t0 = ak_now_ns();
        ak_trace_complete("test", "work \"quoted\"\n", t0, 1000);
    }
    return NULL;
}

static int count_substr(const char *s, const char *needle) {
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)); p++) n++;
    return n;
}

static void test_trace_threads(void **state) {
    char path[] = "/tmp/ak_trace_test_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(ak_trace_start(path), AK_OK);
    assert_true(ak_trace_enabled());
    assert_int_equal(ak_trace_start(path), AK_ERR_INVALID_ARG); /* one per process */
    pthread_t t[4];
    for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, trace_from_thread, NULL);
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    ak_trace_instant("test", "marker");
    ak_trace_counter("test", "bytes", 42.5);
    assert_int_equal(ak_trace_stop(), AK_OK);
    assert_false(ak_trace_enabled());
    assert_int_equal(ak_trace_complete("test", "ignored", 0, 1), AK_OK); /* off: no-op */

    FILE *f = fopen(path, "r");
    assert_non_null(f);
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    assert_int_equal(strncmp(buf, "{\"displayTimeUnit\"", 18), 0);
    assert_non_null(strstr(buf, "]}\n"));
    assert_int_equal(count_substr(buf, "\"ph\":\"X\""), 2000);
    assert_int_equal(count_substr(buf, "work \\\"quoted\\\"\\u000a"), 2000);
    assert_int_equal(count_substr(buf, "\"ph\":\"i\""), 1);
    assert_non_null(strstr(buf, "\"args\":{\"bytes\":42.5}"));
    unlink(path);
    /* %p becomes the pid: one file per process when ranks share the setting */
    char expect[64];
    snprintf(expect, sizeof expect, "/tmp/ak_trace_pid_%d.json", (int)getpid());
    assert_int_equal(ak_trace_start("/tmp/ak_trace_pid_%p.json"), AK_OK);
    ak_trace_instant("test", "pid");
    assert_int_equal(ak_trace_stop(), AK_OK);
    assert_int_equal(access(expect, R_OK), 0);
    unlink(expect);
    assert_int_equal(ak_trace_start("/nonexistent-dir/x.json"), AK_ERR_IO);
    assert_int_equal(ak_trace_start(""), AK_ERR_INVALID_ARG);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_aligned_alloc),
        cmocka_unit_test(test_alloc_limit),
        cmocka_unit_test(test_arena),
        cmocka_unit_test(test_clock_is_monotonic),
        cmocka_unit_test(test_trace_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
