/* Tests of rank discovery: each source (config, ak launch, horovodrun, torchrun, Open MPI,
 * Slurm, none), their precedence, the store address and port, bad values named in the
 * error, Slurm node lists, and the host id (which must change inside another network
 * namespace). */
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "comm/bootstrap/discover.h"

static const char *all_vars[] = {
    "AK_RANK", "AK_WORLD_SIZE", "AK_LOCAL_RANK", "AK_LOCAL_SIZE", "HOROVOD_RANK",
    "HOROVOD_SIZE", "HOROVOD_LOCAL_RANK", "HOROVOD_LOCAL_SIZE", "RANK", "WORLD_SIZE",
    "LOCAL_RANK", "LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_PROCID", "SLURM_NTASKS",
    "SLURM_LOCALID", "SLURM_STEP_NODELIST", "SLURM_NODELIST", "SLURM_JOB_NODELIST",
    "AK_MASTER_ADDR", "AK_MASTER_PORT", "MASTER_ADDR", "MASTER_PORT",
};

/* Every test starts from an environment without launcher variables. */
static int clean_env(void **state) {
    for (size_t i = 0; i < sizeof all_vars / sizeof *all_vars; i++) unsetenv(all_vars[i]);
    return 0;
}

static void set(const char *name, const char *value) { setenv(name, value, 1); }

static ak__world_info discover_ok(const ak_comm_config *cfg) {
    ak__world_info w;
    memset(&w, 0x5a, sizeof w);
    ak_status st = ak__discover(cfg, &w);
    if (st != AK_OK) fail_msg("ak__discover: %s", ak_last_error());
    return w;
}

static void expect_invalid(const ak_comm_config *cfg, const char *needle) {
    ak__world_info w;
    assert_int_equal(ak__discover(cfg, &w), AK_ERR_INVALID_ARG);
    if (!strstr(ak_last_error(), needle))
        fail_msg("error '%s' does not name '%s'", ak_last_error(), needle);
}

static void expect_world(const ak__world_info *w, const char *source, int rank, int size,
                         int local_rank, int local_size) {
    assert_string_equal(w->source, source);
    assert_int_equal(w->rank, rank);
    assert_int_equal(w->world_size, size);
    assert_int_equal(w->local_rank, local_rank);
    assert_int_equal(w->local_size, local_size);
}

static void test_single(void **state) {
    ak__world_info w = discover_ok(NULL);
    expect_world(&w, "single", 0, 1, 0, 1);
    assert_string_equal(w.store_addr, "127.0.0.1");
    assert_int_equal(w.store_port, 29500);
    ak_comm_config cfg = AK_COMM_CONFIG_INIT; /* an all-unset config is the same */
    w = discover_ok(&cfg);
    expect_world(&w, "single", 0, 1, 0, 1);
}

static void test_config(void **state) {
    set("RANK", "1"); /* the config wins over any launcher */
    set("WORLD_SIZE", "2");
    set("MASTER_ADDR", "10.0.0.9");
    set("MASTER_PORT", "1234");
    ak_comm_config cfg = AK_COMM_CONFIG_INIT;
    cfg.rank = 3;
    cfg.world_size = 5;
    cfg.store_addr = "store.example";
    cfg.store_port = 4321;
    ak__world_info w = discover_ok(&cfg);
    expect_world(&w, "config", 3, 5, -1, -1);
    assert_string_equal(w.store_addr, "store.example");
    assert_int_equal(w.store_port, 4321);
    /* config store fields unset: the environment's */
    cfg.store_addr = NULL;
    cfg.store_port = 0;
    w = discover_ok(&cfg);
    assert_string_equal(w.store_addr, "10.0.0.9");
    assert_int_equal(w.store_port, 1234);
}

static void test_ak_launch(void **state) {
    set("AK_RANK", "2");
    set("AK_WORLD_SIZE", "4");
    set("AK_LOCAL_RANK", "0");
    set("AK_LOCAL_SIZE", "2");
    set("RANK", "0"); /* lower precedence */
    set("WORLD_SIZE", "8");
    set("AK_MASTER_ADDR", "10.1.1.1");
    set("MASTER_ADDR", "10.2.2.2");
    set("AK_MASTER_PORT", "7000");
    set("MASTER_PORT", "8000");
    ak__world_info w = discover_ok(NULL);
    expect_world(&w, "ak launch", 2, 4, 0, 2);
    assert_string_equal(w.store_addr, "10.1.1.1");
    assert_int_equal(w.store_port, 7000);
    unsetenv("AK_LOCAL_RANK"); /* optional: unknown locals stay -1 */
    unsetenv("AK_LOCAL_SIZE");
    unsetenv("AK_MASTER_PORT");
    w = discover_ok(NULL);
    expect_world(&w, "ak launch", 2, 4, -1, -1);
    assert_int_equal(w.store_port, 8000);
    set("AK_MASTER_PORT", "0"); /* 0 = unset, as the parameter's default says */
    w = discover_ok(NULL);
    assert_int_equal(w.store_port, 8000);
}

/* horovodrun's variables: after ak launch's, before torchrun's */
static void test_horovod(void **state) {
    set("HOROVOD_RANK", "3");
    set("HOROVOD_SIZE", "4");
    set("HOROVOD_LOCAL_RANK", "1");
    set("HOROVOD_LOCAL_SIZE", "2");
    set("RANK", "0"); /* lower precedence */
    set("WORLD_SIZE", "8");
    set("LOCAL_RANK", "0");
    set("MASTER_ADDR", "10.3.3.3");
    ak__world_info w = discover_ok(NULL);
    expect_world(&w, "horovod", 3, 4, 1, 2);
    assert_string_equal(w.store_addr, "10.3.3.3");
    unsetenv("HOROVOD_LOCAL_RANK"); /* optional: unknown locals stay -1 */
    unsetenv("HOROVOD_LOCAL_SIZE");
    w = discover_ok(NULL);
    expect_world(&w, "horovod", 3, 4, -1, -1);
    set("AK_RANK", "1"); /* ak launch wins */
    set("AK_WORLD_SIZE", "2");
    w = discover_ok(NULL);
    expect_world(&w, "ak launch", 1, 2, -1, -1);
    unsetenv("AK_RANK");
    unsetenv("AK_WORLD_SIZE");
    set("HOROVOD_RANK", "4"); /* checked and named like the others */
    expect_invalid(NULL, "HOROVOD_RANK=4");
    set("HOROVOD_RANK", "x");
    expect_invalid(NULL, "HOROVOD_RANK");
    set("HOROVOD_RANK", "0");
    set("HOROVOD_LOCAL_SIZE", "9");
    expect_invalid(NULL, "HOROVOD_LOCAL_SIZE=9");
    unsetenv("HOROVOD_LOCAL_SIZE");
    unsetenv("HOROVOD_SIZE"); /* one without the other: a mistake, not somebody else's */
    expect_invalid(NULL, "HOROVOD_SIZE");
}

static void test_torchrun(void **state) {
    set("RANK", "5");
    set("WORLD_SIZE", "8");
    set("LOCAL_RANK", "1");
    set("LOCAL_WORLD_SIZE", "4");
    set("MASTER_ADDR", "node7");
    set("MASTER_PORT", "29400");
    set("OMPI_COMM_WORLD_RANK", "0"); /* lower precedence */
    set("OMPI_COMM_WORLD_SIZE", "2");
    ak__world_info w = discover_ok(NULL);
    expect_world(&w, "torchrun", 5, 8, 1, 4);
    assert_string_equal(w.store_addr, "node7");
    assert_int_equal(w.store_port, 29400);
    unsetenv("WORLD_SIZE"); /* a lone RANK is somebody else's variable */
    w = discover_ok(NULL);
    expect_world(&w, "openmpi", 0, 2, -1, -1);
}

static void test_openmpi(void **state) {
    set("OMPI_COMM_WORLD_RANK", "3");
    set("OMPI_COMM_WORLD_SIZE", "6");
    set("OMPI_COMM_WORLD_LOCAL_RANK", "0");
    set("OMPI_COMM_WORLD_LOCAL_SIZE", "3");
    set("SLURM_PROCID", "1"); /* lower precedence */
    set("SLURM_NTASKS", "2");
    set("SLURM_NODELIST", "ignored[1-2]");
    ak__world_info w = discover_ok(NULL);
    expect_world(&w, "openmpi", 3, 6, 0, 3);
    assert_string_equal(w.store_addr, "127.0.0.1"); /* Slurm's node list only for Slurm */
    assert_int_equal(w.store_port, 29500);
}

static void test_slurm(void **state) {
    set("SLURM_PROCID", "7");
    set("SLURM_NTASKS", "8");
    set("SLURM_LOCALID", "3");
    set("SLURM_NODELIST", "other[5-6]");
    set("SLURM_STEP_NODELIST", "gpu[007-009,012],cpu1"); /* the step's list wins */
    ak__world_info w = discover_ok(NULL);
    expect_world(&w, "slurm", 7, 8, 3, -1);
    assert_string_equal(w.store_addr, "gpu007");
    assert_int_equal(w.store_port, 29500);
    unsetenv("SLURM_STEP_NODELIST");
    w = discover_ok(NULL);
    assert_string_equal(w.store_addr, "other5");
    set("MASTER_ADDR", "explicit"); /* an explicit address beats the node list */
    w = discover_ok(NULL);
    assert_string_equal(w.store_addr, "explicit");
    unsetenv("MASTER_ADDR");
    set("SLURM_NODELIST", "broken[1-");
    expect_invalid(NULL, "SLURM_NODELIST");
}

static void test_bad_values(void **state) {
    set("RANK", "abc");
    set("WORLD_SIZE", "4");
    expect_invalid(NULL, "RANK='abc'");
    set("RANK", "4");
    expect_invalid(NULL, "RANK=4");
    set("RANK", "-1");
    expect_invalid(NULL, "RANK=-1");
    set("RANK", "1 ");
    expect_invalid(NULL, "RANK");
    set("RANK", "0");
    set("WORLD_SIZE", "0");
    expect_invalid(NULL, "WORLD_SIZE=0");
    set("WORLD_SIZE", "99999999999999");
    expect_invalid(NULL, "WORLD_SIZE");
    set("WORLD_SIZE", "2");
    set("LOCAL_RANK", "2");
    set("LOCAL_WORLD_SIZE", "2");
    expect_invalid(NULL, "LOCAL_RANK=2");
    set("LOCAL_RANK", "x");
    expect_invalid(NULL, "LOCAL_RANK");
    unsetenv("LOCAL_RANK");
    set("LOCAL_WORLD_SIZE", "3");
    expect_invalid(NULL, "LOCAL_WORLD_SIZE=3");
    unsetenv("LOCAL_WORLD_SIZE");
    set("MASTER_PORT", "70000");
    expect_invalid(NULL, "MASTER_PORT");
    set("MASTER_PORT", "http");
    expect_invalid(NULL, "MASTER_PORT");
    unsetenv("MASTER_PORT");
    discover_ok(NULL); /* the rest is fine */
    clean_env(NULL);
    set("AK_RANK", "0"); /* our own launcher must set both */
    expect_invalid(NULL, "AK_WORLD_SIZE");
    unsetenv("AK_RANK");
    set("SLURM_PROCID", "3");
    set("SLURM_NTASKS", "3");
    expect_invalid(NULL, "SLURM_PROCID=3");
    clean_env(NULL);
    ak_comm_config cfg = AK_COMM_CONFIG_INIT;
    cfg.rank = 0; /* world_size left to discovery */
    expect_invalid(&cfg, "world_size");
    cfg.world_size = 0;
    expect_invalid(&cfg, "ak_comm_config.world_size=0");
    cfg.world_size = 2;
    cfg.rank = 2;
    expect_invalid(&cfg, "ak_comm_config.rank=2");
    cfg.rank = 1;
    cfg.store_port = -5;
    expect_invalid(&cfg, "store_port");
    cfg.store_port = 0;
    cfg.struct_size = 0;
    expect_invalid(&cfg, "AK_COMM_CONFIG_INIT");
    assert_int_equal(ak__discover(NULL, NULL), AK_ERR_INVALID_ARG);
}

static void expect_first(const char *list, const char *first) {
    char buf[64];
    if (ak__slurm_first_node(list, buf, sizeof buf) != AK_OK)
        fail_msg("'%s': %s", list, ak_last_error());
    assert_string_equal(buf, first);
}

static void test_slurm_node_lists(void **state) {
    expect_first("host", "host");
    expect_first("a,b", "a");
    expect_first("node[01-04,07]", "node01");
    expect_first("node[01-04,07],gpu2", "node01");
    expect_first("node[7,1-3]", "node7");
    expect_first("gpu[007]", "gpu007");
    expect_first("rack[1-2]-n[3-4]", "rack1-n3");
    expect_first("n1.cluster.local,n2", "n1.cluster.local");
    static const char *bad[] = {"", ",a", "node[", "node[]", "node[4-1]", "node[1-]",
                                "node[a]", "node]", "no de", "node[1-3"};
    char buf[64];
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        if (ak__slurm_first_node(bad[i], buf, sizeof buf) != AK_ERR_INVALID_ARG)
            fail_msg("'%s' was accepted as '%s'", bad[i], buf);
    }
    assert_int_equal(ak__slurm_first_node("node[01-04]", buf, 6), AK_ERR_INVALID_ARG);
    assert_int_equal(ak__slurm_first_node("node[01-04]", buf, 7), AK_OK);
    assert_string_equal(buf, "node01");
    assert_int_equal(ak__slurm_first_node(NULL, buf, sizeof buf), AK_ERR_INVALID_ARG);
}

static void test_host_id(void **state) {
    char a[512], b[512];
    assert_int_equal(ak__host_id(a, sizeof a), AK_OK);
    assert_int_equal(ak__host_id(b, sizeof b), AK_OK);
    assert_true(a[0] != '\0');
    assert_string_equal(a, b);
    char host[256];
    assert_int_equal(gethostname(host, sizeof host), 0);
    assert_int_equal(strncmp(a, host, strlen(host)), 0);
    assert_int_equal(ak__host_id(a, 2), AK_ERR_INVALID_ARG);
    assert_int_equal(ak__host_id(NULL, 10), AK_ERR_INVALID_ARG);
}

/* In a child inside a fresh network namespace the id must change; skipped without the
 * privilege to create one. */
static void test_host_id_netns(void **state) {
    char mine[512], theirs[512] = "";
    assert_int_equal(ak__host_id(mine, sizeof mine), AK_OK);
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char id[512] = "";
        if (unshare(CLONE_NEWNET) == 0 && ak__host_id(id, sizeof id) == AK_OK) {
            ssize_t n = write(fds[1], id, strlen(id));
            (void)n;
        }
        _exit(0);
    }
    close(fds[1]);
    ssize_t n = read(fds[0], theirs, sizeof theirs - 1);
    close(fds[0]);
    int status;
    waitpid(pid, &status, 0);
    if (n <= 0) skip(); /* no CAP_SYS_ADMIN here */
    theirs[n] = '\0';
    assert_string_not_equal(mine, theirs);
}

int main(void) {
    if (ak_init() != AK_OK) return 1; /* so AK_LOG=debug shows the breadcrumbs */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_single, clean_env),
        cmocka_unit_test_setup(test_config, clean_env),
        cmocka_unit_test_setup(test_ak_launch, clean_env),
        cmocka_unit_test_setup(test_horovod, clean_env),
        cmocka_unit_test_setup(test_torchrun, clean_env),
        cmocka_unit_test_setup(test_openmpi, clean_env),
        cmocka_unit_test_setup(test_slurm, clean_env),
        cmocka_unit_test_setup(test_bad_values, clean_env),
        cmocka_unit_test(test_slurm_node_lists),
        cmocka_unit_test(test_host_id),
        cmocka_unit_test(test_host_id_netns),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
