/* `ak bench pool`: how fast the thread pool wakes its workers.
 *
 * Each job has one chunk per thread; every chunk records when it starts and then waits
 * until all threads have started, so each worker must take its own chunk. Wake-up
 * latency = time from the call until the last worker starts. "spinning" calls follow
 * each other at once (workers still spinning); "sleeping" calls come after an idle gap
 * longer than AK_POOL_SPIN_US (workers asleep on the futex). */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "accelkit/ak.h"
#include "cli/bench_results.h"
#include "cli/cli.h"
#include "cli/cli_opts.h"

typedef struct wake_probe {
    _Atomic int started;
    int nthreads;
    _Atomic uint64_t last_start_ns;
} wake_probe;

static void wake_task(void *ctx, size_t begin, size_t end, int thread_index) {
    wake_probe *p = ctx;
    uint64_t now = ak_now_ns();
    uint64_t prev = atomic_load(&p->last_start_ns);
    while (now > prev && !atomic_compare_exchange_weak(&p->last_start_ns, &prev, now)) {
    }
    atomic_fetch_add(&p->started, 1);
    uint64_t give_up = now + 50000000; /* 50 ms: never hang if a worker is lost */
    while (atomic_load(&p->started) < p->nthreads && ak_now_ns() < give_up) {
    }
}

static void empty_task(void *ctx, size_t begin, size_t end, int thread_index) {}

static void sleep_us(long us) {
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

/* Median and p99 of `reps` wake-ups in µs, with `gap_us` idle time between calls. */
static void measure_wake(ak_threadpool *pool, int nthreads, int reps, long gap_us, double *p50,
                         double *p99) {
    static double lat[2000];
    for (int r = 0; r < reps; r++) {
        if (gap_us) sleep_us(gap_us);
        wake_probe probe = {0, nthreads, 0};
        uint64_t t0 = ak_now_ns();
        ak_threadpool_parallel_for(pool, (size_t)nthreads, 1, wake_task, &probe);
        lat[r] = (double)(atomic_load(&probe.last_start_ns) - t0) / 1e3;
    }
    *p50 = ak_cli_median(lat, (size_t)reps);
    *p99 = lat[(size_t)(reps * 0.99)];
}

static double measure_empty_call_us(ak_threadpool *pool, int nthreads, int reps) {
    static double t[2000];
    for (int r = 0; r < reps; r++) {
        uint64_t t0 = ak_now_ns();
        ak_threadpool_parallel_for(pool, (size_t)nthreads, 1, empty_task, NULL);
        t[r] = (double)(ak_now_ns() - t0) / 1e3;
    }
    return ak_cli_median(t, (size_t)reps);
}

/* What one `ak bench pool` measures, in µs. */
typedef struct pool_figures {
    double hot50, hot99, cold50, cold99, empty;
} pool_figures;

/* The figures under their names, in the --json object and the results line alike. */
static void add_figures(cJSON *o, const pool_figures *f) {
    ak_cli_json_round(o, "wake_spinning_p50_us", f->hot50, 2);
    ak_cli_json_round(o, "wake_spinning_p99_us", f->hot99, 2);
    ak_cli_json_round(o, "wake_sleeping_p50_us", f->cold50, 2);
    ak_cli_json_round(o, "wake_sleeping_p99_us", f->cold99, 2);
    ak_cli_json_round(o, "empty_parallel_for_us", f->empty, 2);
}

/* The core.pool results line (docs/report.md). */
static int record_pool(const char *dir, int n, const pool_figures *f) {
    ak__bench_out out;
    int rc = ak__bench_out_open(&out, dir, "kernels", 0, 0);
    if (rc || !out.file) return rc;
    cJSON *params = cJSON_CreateObject(), *figures = cJSON_CreateObject();
    cJSON_AddNumberToObject(params, "threads", n);
    add_figures(figures, f);
    ak__bench_out_add(&out, "core.pool", NULL, NULL, params, figures);
    ak__bench_out_close(&out);
    return 0;
}

static int print_json(int n, const pool_figures *f) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "threads", n);
    add_figures(o, f);
    return ak_cli_print_json(o) ? AK_EXIT_ERROR : AK_EXIT_OK;
}

int ak_bench_pool(int argc, char **argv) {
    int json = 0, first;
    long threads = 0;
    const char *out = AK_BENCH_OUT_DEFAULT;
    const ak_opt opts[] = {
        {"threads", 0, AK_OPT_INT, &threads, "N", .help = "pool threads, the caller included (default: the online cores, at least 2)", .min = 2, .max = 256},
        {"json", 0, AK_OPT_FLAG, &json, .help = "one JSON object instead of text"},
        {"out", 0, AK_OPT_STRING, &out, "DIR", .help = "append the result as a JSON line to DIR/kernels.jsonl (none: do not)", .def = AK_BENCH_OUT_DEFAULT},
        AK_OPT_END};
    const ak_cli_cmd cmd = {.name = "bench pool", .opts = opts};
    int rc = ak_cli_parse(&cmd, argc, argv, &first);
    if (rc != AK_CLI_CONTINUE) return rc;
    if (first < argc) return ak_cli_usage_error(&cmd, "unexpected argument '%s'", argv[first]);
    ak_cpu_info cpu;
    ak_status st = ak_cpu_get_info(&cpu);
    if (st != AK_OK) return ak_cli_report("cpu", st);
    int n = threads ? (int)threads : (cpu.logical_cores > 2 ? cpu.logical_cores : 2);
    ak_threadpool *pool;
    if ((st = ak_threadpool_create(n, &pool)) != AK_OK) return ak_cli_report("thread pool", st);
    pool_figures f;
    measure_wake(pool, n, 2000, 0, &f.hot50, &f.hot99);
    measure_wake(pool, n, 200, 3000, &f.cold50, &f.cold99);
    f.empty = measure_empty_call_us(pool, n, 2000);
    ak_threadpool_free(pool);
    if ((rc = record_pool(out, n, &f)) != 0) return rc;
    if (json) return print_json(n, &f);
    printf("thread pool, %d threads (caller included)\n", n);
    printf("%-34s %9s %9s\n", "", "p50 µs", "p99 µs");
    printf("%-34s %9.2f %9.2f\n", "wake-up, workers spinning", f.hot50, f.hot99);
    printf("%-34s %9.2f %9.2f\n", "wake-up, workers asleep (futex)", f.cold50, f.cold99);
    printf("%-34s %9.2f\n", "empty parallel_for round trip", f.empty);
    return AK_EXIT_OK;
}
