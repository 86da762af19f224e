/* Tests of the worker's side of the elastic rendezvous (src/comm/bootstrap/elastic.c):
 * this process plays one worker (AK_ELASTIC_* set) and the test plays the launcher on a
 * store it serves on 127.0.0.1, answering requests the way src/cli/launch_elastic.c
 * does. The launcher side with real workers is tested in tests/python/test_elastic.py. */
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
#include "comm/bootstrap/elastic.h"
#include "comm/bootstrap/store.h"

static ak__store_server *server;
static ak__store *launcher;

static int setup(void **state) {
    (void)state;
    int port;
    char text[16];
    assert_int_equal(ak__store_serve("127.0.0.1", 0, &port, &server), AK_OK);
    assert_int_equal(ak__store_connect("127.0.0.1", port, 2000, &launcher), AK_OK);
    snprintf(text, sizeof text, "%d", port);
    setenv("AK_ELASTIC_ADDR", "127.0.0.1", 1);
    setenv("AK_ELASTIC_PORT", text, 1);
    setenv("AK_ELASTIC_ID", "7", 1);
    setenv("AK_ELASTIC_TIMEOUT", "5", 1);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    ak__store_free(launcher);
    ak__store_server_stop(server);
    unsetenv("AK_ELASTIC_ADDR");
    return 0;
}

/* The launcher's answer to worker 7's request `req`, once the request is seen. */
typedef struct answer_arg {
    long long req;
    const char *text;
} answer_arg;

static void *answer_main(void *p) {
    answer_arg *a = p;
    char key[64], val[32];
    size_t len;
    snprintf(key, sizeof key, AK_ELASTIC_KEY_READY, 7);
    for (;;) { /* the worker's request number under its key, as the launcher reads it */
        if (ak__store_get(launcher, key, val, sizeof val - 1, &len, 2000) != AK_OK) return NULL;
        val[len] = '\0';
        if (atoll(val) == a->req) break;
    }
    snprintf(key, sizeof key, AK_ELASTIC_KEY_ASSIGN, 7, a->req);
    ak__store_set(launcher, key, a->text, strlen(a->text));
    return NULL;
}

static ak_status init_answered(long long req, const char *text, ak_comm **comm) {
    pthread_t t;
    answer_arg a = {req, text};
    assert_int_equal(pthread_create(&t, NULL, answer_main, &a), 0);
    ak_status st = ak_comm_init(NULL, comm);
    pthread_join(t, NULL);
    return st;
}

static void set_number(const char *key, long long v) {
    char text[32];
    int n = snprintf(text, sizeof text, "%lld", v);
    assert_int_equal(ak__store_set(launcher, key, text, (size_t)n), AK_OK);
}

static void expect_hosts(int changed, int removed_only) {
    int c = -1, r = -1;
    assert_int_equal(ak_elastic_hosts_changed(&c, &r), AK_OK);
    assert_int_equal(c, changed);
    assert_int_equal(r, removed_only);
}

/* One test, in order: the rounds a worker goes through share its request numbers. */
static void test_rounds_hosts_and_leaving(void **state) {
    (void)state;
    int enabled = -1, round = -2, removed = -1, rank, size;
    assert_int_equal(ak_elastic_status(&enabled, &round, &removed), AK_OK);
    assert_int_equal(enabled, 1);
    assert_int_equal(round, -1);
    ak_comm *c = NULL;
    assert_int_equal(init_answered(0, "3 0 1 2", &c), AK_OK); /* round 3, rank 0 of 1, hosts v2 */
    assert_int_equal(ak_comm_rank(c, &rank), AK_OK);
    assert_int_equal(ak_comm_size(c, &size), AK_OK);
    assert_int_equal(rank, 0);
    assert_int_equal(size, 1);
    assert_int_equal(ak_elastic_status(NULL, &round, &removed), AK_OK);
    assert_int_equal(round, 3);
    assert_int_equal(removed, 0);
    ak_comm_free(c);

    set_number(AK_ELASTIC_KEY_HOSTS, 2); /* what the worker joined at: no change */
    expect_hosts(0, 0);
    set_number("el/hosts/3", 2); /* a host left */
    set_number(AK_ELASTIC_KEY_HOSTS, 3);
    expect_hosts(1, 1);
    set_number("el/hosts/4", 1); /* and one came */
    set_number(AK_ELASTIC_KEY_HOSTS, 4);
    expect_hosts(1, 0);

    /* a malformed answer is an error naming it, not a world */
    assert_int_equal(init_answered(1, "4 5 1 4", &c), AK_ERR_REMOTE);
    assert_non_null(strstr(ak_last_error(), "'4 5 1 4'"));
    assert_null(c);

    assert_int_equal(init_answered(2, "leave its host left the job", &c), AK_ERR_REMOTE);
    assert_non_null(strstr(ak_last_error(), "its host left the job"));
    assert_int_equal(ak_elastic_status(NULL, NULL, &removed), AK_OK);
    assert_int_equal(removed, 1);
}

/* An explicit rank in the config is not the launcher's business. */
static void test_explicit_config_skips_the_rendezvous(void **state) {
    (void)state;
    ak_comm_config cfg = AK_COMM_CONFIG_INIT;
    cfg.rank = 0, cfg.world_size = 1;
    ak_comm *c = NULL;
    assert_int_equal(ak_comm_init(&cfg, &c), AK_OK);
    ak_comm_free(c);
}

static void test_bad_environment_is_named(void **state) {
    (void)state;
    setenv("AK_ELASTIC_ID", "x", 1);
    ak_comm *c = NULL;
    assert_int_equal(ak_comm_init(NULL, &c), AK_ERR_INVALID_ARG);
    assert_non_null(strstr(ak_last_error(), "AK_ELASTIC_ID='x'"));
    int a, b;
    assert_int_equal(ak_elastic_hosts_changed(&a, &b), AK_ERR_INVALID_ARG);
    setenv("AK_ELASTIC_ID", "7", 1);
}

static void test_outside_elastic_nothing_changes(void **state) {
    (void)state;
    const char *keep = getenv("AK_ELASTIC_ADDR");
    char saved[64];
    snprintf(saved, sizeof saved, "%s", keep ? keep : "");
    unsetenv("AK_ELASTIC_ADDR");
    int enabled = -1, c = -1, r = -1;
    assert_int_equal(ak_elastic_status(&enabled, NULL, NULL), AK_OK);
    assert_int_equal(enabled, 0);
    assert_int_equal(ak_elastic_hosts_changed(&c, &r), AK_OK);
    assert_int_equal(c, 0);
    assert_int_equal(r, 0);
    setenv("AK_ELASTIC_ADDR", saved, 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rounds_hosts_and_leaving),
        cmocka_unit_test(test_explicit_config_skips_the_rendezvous),
        cmocka_unit_test(test_bad_environment_is_named),
        cmocka_unit_test(test_outside_elastic_nothing_changes),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
