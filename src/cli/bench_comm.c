/* `ak bench comm`: collectives timed the nccl-tests way. One process per rank (under
 * `ak launch`, torchrun, mpirun or Slurm; or `-np N` to start itself locally). Rank 0
 * prints one row per size: bytes, count, time_us, algbw, busbw, errors, where time is the
 * max over ranks of the mean over iterations after warm-up, algbw = bytes / time and
 * busbw = algbw × the collective's factor (allreduce 2(n−1)/n; reduce_scatter, allgather,
 * alltoall (n−1)/n; broadcast, reduce 1), then the algorithm the cost model (or --algo,
 * which sets AK_COMM_ALGO) runs at that size. As in nccl-tests, the size of allgather,
 * reduce_scatter and alltoall is the whole buffer (all ranks' blocks). With --check every
 * element is verified at each size (reduce: at its root, rank 0). `--calibrate FILE`
 * only writes the cost model the communicator measured when it was created, as an
 * AK_COMM_TUNING file. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "accelkit/comm.h"
#include "cli/bench_results.h"
#include "cli/cli.h"
#include "cli/cli_opts.h"
#include "cli/cli_progress.h"
#include "cli/launch.h"
#include "comm/comm_model.h"

typedef enum { COLL_ALLREDUCE, COLL_ALLGATHER, COLL_BROADCAST, COLL_REDUCE_SCATTER, COLL_ALLTOALL,
               COLL_REDUCE, COLL_COUNT } coll;
static const char *const coll_names[COLL_COUNT] = {"allreduce", "allgather", "broadcast",
                                                   "reduce_scatter", "alltoall", "reduce"};
/* the cost model's name of each (alltoall has one algorithm: -1) */
static const int model_colls[COLL_COUNT] = {AK_COMM_COLL_ALLREDUCE, AK_COMM_COLL_ALLGATHER,
                                            AK_COMM_COLL_BROADCAST, AK_COMM_COLL_REDUCE_SCATTER,
                                            -1, AK_COMM_COLL_REDUCE};
static const char *const op_names[] = {"sum", "prod", "min", "max", "avg"};
static const char *const dtype_names[] = {"f32", "f16", "bf16", "f64", "i8", "u8", "i32", "i64"};

typedef struct comm_bench_opts {
    size_t min_bytes, max_bytes, factor;
    int iters, warmup, np, check, json;
    int iters_given;         /* -n given: run exactly that many at every size */
    const char *calibrate;   /* --calibrate FILE: rank 0 writes the cost model there */
    const char *out;         /* --out DIR: rank 0 appends the results lines there */
    coll what;
    ak_reduce_op op;
    ak_dtype dtype;
    const char *algo; /* NULL = auto */
} comm_bench_opts;

/* Parses the flags into o; AK_CLI_CONTINUE or an exit code. */
static int parse_comm_opts(int argc, char **argv, comm_bench_opts *o) {
    memset(o, 0, sizeof *o);
    long np = 0, iters = 0, warmup = 0;
    int what = 0, op = 0, dtype = 0, first;
    const ak_opt opts[] = {
        {"np", 0, AK_OPT_INT, &np, "N", .help = "start N ranks here (under a launcher: the launcher's ranks)", .def = "2", .min = 1, .max = 512},
        {"minbytes", 'b', AK_OPT_SIZE, &o->min_bytes, "BYTES", .help = "smallest size (K, M, G suffixes)", .def = "8"},
        {"maxbytes", 'e', AK_OPT_SIZE, &o->max_bytes, "BYTES", .help = "largest size", .def = "64M"},
        {"stepfactor", 'f', AK_OPT_SIZE, &o->factor, "F", .help = "size multiplier between rows", .def = "2", .min = 2, .max = 1 << 20},
        {"iters", 'n', AK_OPT_INT, &iters, "N", .help = "timed calls per size (default: 200 below 1 MiB, 20 below 16 MiB, 5 above)", .min = 1, .max = 1000000000},
        {"warmup_iters", 'w', AK_OPT_INT, &warmup, "N", .help = "untimed calls first", .def = "5", .min = 0, .max = 1000000000},
        {"coll", 0, AK_OPT_ENUM, &what, .choices = "allreduce|allgather|broadcast|reduce_scatter|alltoall|reduce", .help = "the collective", .def = "allreduce"},
        {"op", 0, AK_OPT_ENUM, &op, .choices = "sum|prod|min|max|avg", .help = "reduction", .def = "sum"},
        {"dtype", 0, AK_OPT_ENUM, &dtype, .choices = "f32|f16|bf16|f64|i8|u8|i32|i64", .help = "element type", .def = "f32"},
        {"algo", 0, AK_OPT_STRING, &o->algo, "auto|ring|rd|tree|hier|direct", .help = "force the algorithm (sets AK_COMM_ALGO)", .def = "auto"},
        {"check", 0, AK_OPT_FLAG, &o->check, .help = "verify every element at each size (exit 1 on errors)"},
        {"json", 0, AK_OPT_FLAG, &o->json, .help = "one JSON object per size instead of a table"},
        {"out", 0, AK_OPT_STRING, &o->out, "DIR", .help = "append the results as JSON lines to DIR/comm.jsonl (none: do not)", .def = AK_BENCH_OUT_DEFAULT},
        {"calibrate", 0, AK_OPT_STRING, &o->calibrate, "FILE", .help = "only write the cost model measured at start-up, as an AK_COMM_TUNING file"},
        AK_OPT_END};
    const ak_cli_cmd cmd = {.name = "bench comm", .opts = opts,
                            .notes = "Runs under ak launch, torchrun, mpirun or Slurm (one process per rank), or "
                                     "starts itself with -np N."};
    int rc = ak_cli_parse(&cmd, argc, argv, &first);
    if (rc != AK_CLI_CONTINUE) return rc;
    if (first < argc) return ak_cli_usage_error(&cmd, "unexpected argument '%s'", argv[first]);
    if (o->min_bytes > o->max_bytes) return ak_cli_usage_error(&cmd, "-b is larger than -e");
    o->np = (int)np, o->warmup = (int)warmup, o->what = (coll)what;
    o->op = (ak_reduce_op)op, o->dtype = (ak_dtype)dtype;
    o->iters = iters ? (int)iters : 20, o->iters_given = iters > 0;
    if (o->algo && strcmp(o->algo, "auto") == 0) o->algo = NULL;
    return AK_CLI_CONTINUE;
}

/* ---- values whose reductions are exact in every dtype (small integers) --------------- */

static double input_value(int rank, size_t i, ak_reduce_op op) {
    double base = (double)(i % 7 + 1);
    if (op == AK_REDUCE_PROD) return rank == 0 ? base : 1.0;
    return (double)(rank + 1) * base;
}

static double expected_reduction(int n, size_t i, ak_reduce_op op) {
    double base = (double)(i % 7 + 1), ranks_sum = n * (n + 1) / 2.0;
    switch (op) {
    case AK_REDUCE_SUM: return base * ranks_sum;
    case AK_REDUCE_PROD: return base;
    case AK_REDUCE_MIN: return base;
    case AK_REDUCE_MAX: return base * n;
    default: return base * ranks_sum / n;
    }
}

static void store_value(ak_dtype dt, void *buf, size_t i, double v) {
    float f = (float)v;
    switch (dt) {
    case AK_DTYPE_F32: ((float *)buf)[i] = f; break;
    case AK_DTYPE_F64: ((double *)buf)[i] = v; break;
    case AK_DTYPE_F16: ak_f32_to_f16((uint16_t *)buf + i, &f, 1); break;
    case AK_DTYPE_BF16: ak_f32_to_bf16((uint16_t *)buf + i, &f, 1); break;
    case AK_DTYPE_I8: ((int8_t *)buf)[i] = (int8_t)v; break;
    case AK_DTYPE_U8: ((uint8_t *)buf)[i] = (uint8_t)v; break;
    case AK_DTYPE_I32: ((int32_t *)buf)[i] = (int32_t)v; break;
    default: ((int64_t *)buf)[i] = (int64_t)v; break;
    }
}

/* 1 when buf[i] holds v as dtype would store it (integer avg truncates) */
static int value_matches(ak_dtype dt, const void *buf, size_t i, double v) {
    unsigned char want[8] = {0}, *got = (unsigned char *)buf;
    size_t es;
    ak_dtype_size(dt, &es);
    if (dt >= AK_DTYPE_I8) v = trunc(v);
    store_value(dt, want, 0, v);
    return memcmp(got + i * es, want, es) == 0;
}

/* ---- one collective ------------------------------------------------------------------ */

typedef struct bench_bufs {
    void *send, *recv;
    size_t count; /* elements per rank block */
} bench_bufs;

static ak_status run_coll(ak_comm *c, const comm_bench_opts *o, bench_bufs *b) {
    switch (o->what) {
    case COLL_ALLREDUCE: return ak_comm_allreduce(c, b->send, b->recv, b->count, o->dtype, o->op);
    case COLL_ALLGATHER: return ak_comm_allgather(c, b->send, b->recv, b->count, o->dtype);
    case COLL_BROADCAST: return ak_comm_broadcast(c, b->recv, b->count, o->dtype, 0);
    case COLL_REDUCE_SCATTER:
        return ak_comm_reduce_scatter(c, b->send, b->recv, b->count, o->dtype, o->op);
    case COLL_REDUCE: return ak_comm_reduce(c, b->send, b->recv, b->count, o->dtype, o->op, 0);
    default: return ak_comm_alltoall(c, b->send, b->recv, b->count, o->dtype);
    }
}

/* Elements each rank sends: allgather/alltoall/reduce_scatter have size blocks. */
static size_t send_elems(const comm_bench_opts *o, size_t count, int n) {
    int one_block = o->what == COLL_ALLREDUCE || o->what == COLL_BROADCAST || o->what == COLL_REDUCE;
    return one_block ? count : count * (size_t)n;
}

static void fill_inputs(const comm_bench_opts *o, bench_bufs *b, int rank, int n) {
    size_t sn = send_elems(o, b->count, n);
    for (size_t i = 0; i < sn; i++) store_value(o->dtype, b->send, i, input_value(rank, i, o->op));
    if (o->what == COLL_BROADCAST)
        for (size_t i = 0; i < b->count; i++)
            store_value(o->dtype, b->recv, i, rank == 0 ? input_value(0, i, o->op) : -1);
}

/* Wrong elements in this rank's result (reduce: the root's only). */
static size_t count_errors(const comm_bench_opts *o, const bench_bufs *b, int rank, int n) {
    size_t errors = 0, cnt = b->count;
    if (o->what == COLL_REDUCE && rank != 0) return 0;
    for (size_t i = 0; i < send_elems(o, cnt, n) && o->what != COLL_REDUCE_SCATTER; i++) {
        double want;
        switch (o->what) {
        case COLL_REDUCE:
        case COLL_ALLREDUCE: want = expected_reduction(n, i, o->op); break;
        case COLL_BROADCAST: want = input_value(0, i, o->op); break;
        case COLL_ALLGATHER: want = input_value((int)(i / cnt), i % cnt, o->op); break;
        default: want = input_value((int)(i / cnt), (size_t)rank * cnt + i % cnt, o->op); break;
        }
        errors += !value_matches(o->dtype, b->recv, i, want);
    }
    if (o->what == COLL_REDUCE_SCATTER)
        for (size_t i = 0; i < cnt; i++)
            errors += !value_matches(o->dtype, b->recv, i,
                                     expected_reduction(n, (size_t)rank * cnt + i, o->op));
    return errors;
}

static double busbw_factor(coll what, int n) {
    if (what == COLL_ALLREDUCE) return 2.0 * (n - 1) / n;
    return what == COLL_BROADCAST || what == COLL_REDUCE ? 1.0 : (double)(n - 1) / n;
}

typedef struct size_result {
    double time_us;
    long long errors;
} size_result;

static ak_status measure_size(ak_comm *c, const comm_bench_opts *o, bench_bufs *b, int rank,
                              int n, size_result *out) {
    fill_inputs(o, b, rank, n);
    ak_status st = AK_OK;
    for (int w = 0; st == AK_OK && w < o->warmup; w++) st = run_coll(c, o, b);
    if (st == AK_OK) st = ak_comm_barrier(c);
    uint64_t t0 = ak_now_ns();
    for (int i = 0; st == AK_OK && i < o->iters; i++) st = run_coll(c, o, b);
    double mean_us = (double)(ak_now_ns() - t0) / 1e3 / o->iters;
    /* the inputs are never overwritten (out of place): the last result is checkable */
    double errors = st == AK_OK && o->check ? (double)count_errors(o, b, rank, n) : 0;
    if (st == AK_OK) st = ak_comm_allreduce(c, AK_IN_PLACE, &mean_us, 1, AK_DTYPE_F64, AK_REDUCE_MAX);
    if (st == AK_OK) st = ak_comm_allreduce(c, AK_IN_PLACE, &errors, 1, AK_DTYPE_F64, AK_REDUCE_SUM);
    out->time_us = mean_us;
    out->errors = o->check ? (long long)errors : -1;
    return st;
}

/* The six nccl-tests columns, then the algorithm the communicator ran (bytes counts as
 * the model does: all blocks for allgather and reduce_scatter). */
/* The row as a results line: benchmark comm.<collective>, parameters and figures. */
static void record_row(const comm_bench_opts *o, ak__bench_out *results, size_t bytes,
                       size_t count, int n, const size_result *r, double algbw, double busbw,
                       const char *algo) {
    const char *transport = getenv("AK_COMM_TRANSPORT");
    cJSON *params = cJSON_CreateObject(), *figures = cJSON_CreateObject();
    cJSON_AddNumberToObject(params, "bytes", (double)bytes);
    cJSON_AddNumberToObject(params, "count", (double)count);
    cJSON_AddNumberToObject(params, "ranks", n);
    cJSON_AddStringToObject(params, "dtype", dtype_names[o->dtype]);
    cJSON_AddStringToObject(params, "op", op_names[o->op]);
    cJSON_AddStringToObject(params, "transport", transport && *transport ? transport : "auto");
    cJSON_AddStringToObject(params, "algo", o->algo ? o->algo : "auto");
    ak_cli_json_round(figures, "time_us", r->time_us, 2);
    ak_cli_json_round(figures, "algbw", algbw, 4);
    ak_cli_json_round(figures, "busbw", busbw, 4);
    cJSON_AddNumberToObject(figures, "errors", (double)r->errors);
    cJSON_AddStringToObject(figures, "algo_run", algo);
    char benchmark[48];
    snprintf(benchmark, sizeof benchmark, "comm.%s", coll_names[o->what]);
    ak__bench_out_add(results, benchmark, NULL, NULL, params, figures);
}

static void print_row(const comm_bench_opts *o, ak_comm *c, ak__bench_out *results,
                      size_t bytes, size_t count, int n, const size_result *r) {
    double algbw = (double)bytes / (r->time_us * 1e3), busbw = algbw * busbw_factor(o->what, n);
    ak_comm_algo algo = AK_COMM_ALGO_AUTO;
    int mc = model_colls[o->what];
    const char *name = "-";
    if (mc >= 0 && ak_comm_choose_coll_algo(c, (ak_comm_coll)mc, bytes, &algo) == AK_OK)
        name = ak_comm_algo_name(algo);
    record_row(o, results, bytes, count, n, r, algbw, busbw, name);
    if (o->json) {
        cJSON *row = cJSON_CreateObject();
        cJSON_AddNumberToObject(row, "bytes", (double)bytes);
        cJSON_AddNumberToObject(row, "count", (double)count);
        ak_cli_json_round(row, "time_us", r->time_us, 2);
        ak_cli_json_round(row, "algbw", algbw, 4);
        ak_cli_json_round(row, "busbw", busbw, 4);
        cJSON_AddNumberToObject(row, "errors", (double)r->errors);
        cJSON_AddStringToObject(row, "algo", name);
        ak_cli_print_json(row);
    } else
        printf("%12zu %12zu %12.2f %10.4f %10.4f %8lld  %s\n", bytes, count, r->time_us, algbw,
               busbw, r->errors, name);
    fflush(stdout);
}

/* Without -n, the peer harness's counts (bench/peers/mpi_allreduce.c), so both means
 * average alike: 200 below 1 MiB, where 20 calls of a few µs let one stall of a shared
 * vCPU double the mean (4 KB over TCP: 18-20 µs in some runs, 7.2-8.1 µs in the rest);
 * 20 below 16 MiB; 5 above, so a sweep stays in seconds. */
static int iters_for(const comm_bench_opts *o, size_t bytes) {
    if (o->iters_given) return o->iters;
    return bytes < (1u << 20) ? 200 : bytes < (16u << 20) ? 20 : 5;
}

static int bench_rank(ak_comm *c, comm_bench_opts *o) {
    int rank, n;
    ak_comm_rank(c, &rank);
    ak_comm_size(c, &n);
    size_t es;
    ak_dtype_size(o->dtype, &es);
    bench_bufs b = {0};
    size_t max_elems = send_elems(o, o->max_bytes / es + 1, n);
    if (ak_alloc(max_elems * es, &b.send) || ak_alloc(max_elems * es, &b.recv))
        return ak_cli_report("buffers", AK_ERR_NO_MEMORY);
    if (rank == 0 && !o->json)
        printf("# %s %s %s, %d ranks\n%12s %12s %12s %10s %10s %8s  %s\n", coll_names[o->what],
               dtype_names[o->dtype], op_names[o->op], n, "bytes", "count", "time_us",
               "algbw", "busbw", "errors", "algo");
    ak__bench_out results = {0};
    int rc = rank == 0 ? ak__bench_out_open(&results, o->out, "comm", 0, 0) : AK_EXIT_OK;
    if (rc) return rc;
    ak_cli_progress progress;
    ak_cli_progress_begin(&progress, "ak bench comm:");
    progress.tty = progress.tty && rank == 0;
    for (size_t bytes = o->min_bytes; bytes <= o->max_bytes; bytes *= o->factor) {
        char detail[64];
        snprintf(detail, sizeof detail, "%zu bytes", bytes);
        ak_cli_progress_update(&progress, -1, detail);
        /* nccl-tests sizes: the whole buffer (all ranks' blocks) for gather-like ops */
        size_t blocks = send_elems(o, 1, n);
        b.count = bytes / es / blocks ? bytes / es / blocks : 1;
        comm_bench_opts sized = *o;
        sized.iters = iters_for(o, bytes);
        size_result r;
        ak_status st = measure_size(c, &sized, &b, rank, n, &r);
        if (st != AK_OK) {
            rc = ak_cli_report("collective", st);
            break;
        }
        ak_cli_progress_end(&progress);
        if (rank == 0) print_row(o, c, &results, b.count * blocks * es, b.count * blocks, n, &r);
        if (r.errors > 0) rc = AK_EXIT_FAIL;
        if (bytes == 0) break;
    }
    ak_cli_progress_end(&progress);
    ak__bench_out_close(&results);
    ak_free(b.send);
    ak_free(b.recv);
    return rc;
}

static int under_launcher(void) {
    return getenv("AK_RANK") || getenv("RANK") || getenv("OMPI_COMM_WORLD_RANK") ||
           getenv("SLURM_PROCID");
}

/* Starts this same command N times under `ak launch`, without -np. */
static int relaunch(int argc, char **argv, int np) {
    static char exe[4096];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len <= 0) return AK_EXIT_ERROR;
    exe[len] = '\0';
    char **args = calloc((size_t)argc + 4, sizeof *args);
    int k = 0;
    args[k++] = exe, args[k++] = "bench", args[k++] = "comm";
    for (int i = 1; i < argc; i++) { /* -np N, --np N (-np is "--np" once parsed), --np=N */
        if (!strcmp(argv[i], "-np") || !strcmp(argv[i], "--np")) { i++; continue; }
        if (!strncmp(argv[i], "--np=", 5) || !strncmp(argv[i], "-np=", 4)) continue;
        args[k++] = argv[i];
    }
    static ak_launch_plan plan;
    memset(&plan, 0, sizeof plan);
    plan.np = np;
    plan.argv = args;
    int rc = ak_launch_run(&plan);
    free(args);
    return rc;
}

int ak_bench_comm(int argc, char **argv) {
    comm_bench_opts o;
    int rc = parse_comm_opts(argc, argv, &o);
    if (rc != AK_CLI_CONTINUE) return rc;
    if (!under_launcher() && o.np > 1) return relaunch(argc, argv, o.np);
    if (o.algo) setenv("AK_COMM_ALGO", o.algo, 1);
    ak_comm *c;
    ak_cli_busy busy; /* creating the communicator measures the links (seconds) */
    ak_cli_busy_begin(&busy, "ak bench comm: measuring the links");
    ak_status st = ak_comm_init(NULL, &c);
    ak_cli_busy_end(&busy);
    if (st != AK_OK) return ak_cli_report("ak_comm_init", st);
    int rank;
    ak_comm_rank(c, &rank);
    if (o.calibrate) { /* the communicator calibrated itself when created: keep the result */
        st = rank == 0 ? ak__comm_model_save(c, o.calibrate) : AK_OK;
        rc = st == AK_OK ? AK_EXIT_OK : ak_cli_report("--calibrate", st);
        if (rank == 0 && st == AK_OK) printf("wrote the cost model to %s (use AK_COMM_TUNING=%s)\n", o.calibrate, o.calibrate);
    } else {
        rc = bench_rank(c, &o);
    }
    ak_comm_free(c);
    return rc;
}
