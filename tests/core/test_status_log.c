/* Tests of status codes, the thread-local last error, and logging (level, mask, sink). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "core/check.h"

static void test_status_strings(void **state) {
    for (int s = 0; s < AK_STATUS_COUNT_; s++) {
        const char *text = ak_status_str((ak_status)s);
        assert_non_null(text);
        assert_string_not_equal(text, "unknown status");
    }
    assert_string_equal(ak_status_str((ak_status)999), "unknown status");
    assert_string_equal(ak_status_str(AK_ERR_INVALID_ARG), "invalid argument");
}

static void *fail_in_thread(void *arg) {
    AK_FAIL(AK_ERR_IO, "thread-only failure");
    return NULL;
}

static void test_last_error_is_thread_local(void **state) {
    ak_clear_error();
    assert_string_equal(ak_last_error(), "");
    assert_int_equal(AK_FAIL(AK_ERR_TIMEOUT, "waited %d ms", 42), AK_ERR_TIMEOUT);
    assert_string_equal(ak_last_error(), "waited 42 ms");
    pthread_t t;
    pthread_create(&t, NULL, fail_in_thread, NULL);
    pthread_join(t, NULL);
    assert_string_equal(ak_last_error(), "waited 42 ms");
}

static void test_public_calls_reject_null(void **state) {
    assert_int_equal(ak_version(NULL, NULL, NULL), AK_ERR_INVALID_ARG);
    assert_true(strlen(ak_last_error()) > 0);
    int a, b, c;
    assert_int_equal(ak_version(&a, &b, &c), AK_OK);
    assert_int_equal(a, AK_VERSION_MAJOR);
    assert_int_equal(ak_cpu_get_info(NULL), AK_ERR_INVALID_ARG);
    assert_int_equal(ak_log_parse_level(NULL, NULL), AK_ERR_INVALID_ARG);
}

static void test_parse_level_and_subsystems(void **state) {
    ak_log_level level;
    assert_int_equal(ak_log_parse_level("DEBUG", &level), AK_OK);
    assert_int_equal(level, AK_LOG_DEBUG);
    assert_int_equal(ak_log_parse_level("off", &level), AK_OK);
    assert_int_equal(level, AK_LOG_OFF);
    assert_int_equal(ak_log_parse_level("loud", &level), AK_ERR_INVALID_ARG);
    assert_non_null(strstr(ak_last_error(), "loud"));
    uint32_t mask;
    assert_int_equal(ak_log_parse_subsystems("comm,infer", &mask), AK_OK);
    assert_int_equal(mask, AK_SUBSYS_COMM | AK_SUBSYS_INFER);
    assert_int_equal(ak_log_parse_subsystems("all", &mask), AK_OK);
    assert_int_equal(mask, AK_SUBSYS_ALL);
    assert_int_equal(ak_log_parse_subsystems("", &mask), AK_OK);
    assert_int_equal(mask, 0);
    assert_int_equal(ak_log_parse_subsystems("comm,nope", &mask), AK_ERR_INVALID_ARG);
    assert_non_null(strstr(ak_last_error(), "nope"));
}

typedef struct captured {
    int count;
    ak_log_level level;
    ak_subsys subsys;
    char line[256];
} captured;

static void capture(ak_log_level level, ak_subsys subsys, const char *line, void *user) {
    captured *c = user;
    c->count++;
    c->level = level;
    c->subsys = subsys;
    snprintf(c->line, sizeof c->line, "%s", line);
}

static void test_callback_level_and_mask(void **state) {
    captured c = {0};
    assert_int_equal(ak_log_set_callback(capture, &c), AK_OK);
    ak_log_set_level(AK_LOG_INFO);
    ak_log_set_subsystems(AK_SUBSYS_COMM);
    AK_LOG_INFO(AK_SUBSYS_COMM, "ring step %d", 3);
    assert_int_equal(c.count, 1);
    assert_string_equal(c.line, "ring step 3");
    assert_int_equal(c.subsys, AK_SUBSYS_COMM);
    AK_LOG_DEBUG(AK_SUBSYS_COMM, "too verbose");    /* above the level */
    AK_LOG_ERROR(AK_SUBSYS_INFER, "masked out");    /* subsystem not in the mask */
    assert_int_equal(c.count, 1);
    ak_log_set_level(AK_LOG_DEBUG);
    ak_log_set_subsystems(AK_SUBSYS_ALL);
    AK_FAIL(AK_ERR_IO, "breadcrumb"); /* failures leave a debug line */
    assert_int_equal(c.count, 2);
    assert_non_null(strstr(c.line, "breadcrumb"));
    assert_non_null(strstr(c.line, "test_status_log.c"));
    assert_int_equal(ak_log_set_level((ak_log_level)42), AK_ERR_INVALID_ARG);
    ak_log_set_callback(NULL, NULL);
    ak_log_set_level(AK_LOG_WARN);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_strings),
        cmocka_unit_test(test_last_error_is_thread_local),
        cmocka_unit_test(test_public_calls_reject_null),
        cmocka_unit_test(test_parse_level_and_subsystems),
        cmocka_unit_test(test_callback_level_and_mask),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
