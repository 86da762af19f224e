/* `ak bench kernels`: SGEMM GFLOP/s and % of the measured FMA peak beside OpenBLAS and
 * BLIS (same run, alternating A B A B, medians), then GB/s of the reduction and
 * conversion kernels beside memcpy of the same size; `--only table` lists every kernel of
 * kernels/kernels.def with the symbol each variant this CPU runs uses for it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "accelkit/kernels.h"
#include "cli/bench_peers.h"
#include "cli/bench_results.h"
#include "cli/cli.h"
#include "cli/cli_opts.h"
#include "kernels/dispatch.h"

#define MAX_SHAPES 32
#define VEC_BYTES ((size_t)16 << 20)

typedef struct bench_opts {
    size_t shapes[MAX_SHAPES][3];
    int nshapes;
    int gemm, vec, convert, table; /* which sections run */
    int peers, quick, json, threads;
    const char *out; /* --out DIR: the results lines (bench_results.h) */
    /* internal: `--peer-child NAME --reps R [--check]` times a peer (see bench_peers.h) */
    const char *peer_child;
    int reps, check;
} bench_opts;

typedef struct bench_env {
    ak_threadpool *pool;
    double peak_gflops; /* one core */
    double memcpy_gbps;
    int peer_missing[PEER_COUNT]; /* not installed (or its child failed) */
    char peer_version[PEER_COUNT][32];
    ak__bench_out results;
    struct cJSON *json, *json_rows; /* --json: the document and its "results" array */
} bench_env;

static const size_t default_shapes[][3] = {
    {1024, 1024, 1024}, {128, 768, 768}, {128, 3072, 768}, {196, 256, 2304}, {49, 512, 4608},
};

static const char *parse_gemm_shape(void *dest, char *value, ak_opt_more *more) {
    bench_opts *o = dest;
    (void)more;
    if (o->nshapes == MAX_SHAPES) return "too many shapes";
    if (ak_cli_parse_shape3(value, o->shapes[o->nshapes])) return "want MxNxK, each in 1..1000000";
    o->nshapes++;
    return NULL;
}

/* Parses the flags into o; AK_CLI_CONTINUE or an exit code. */
static int parse_opts(int argc, char **argv, bench_opts *o) {
    memset(o, 0, sizeof *o);
    o->peers = 1;
    o->threads = ak_cli_bench_threads();
    int only = -1, no_peers = 0, first;
    long reps = 0;
    const ak_opt opts[] = {
        {"gemm", 0, AK_OPT_CUSTOM, o, "MxNxK", .help = "a GEMM shape to time (repeatable; default: 1024^3 and four CNN/transformer shapes)", .parse = parse_gemm_shape},
        {"only", 0, AK_OPT_ENUM, &only, .choices = "gemm|vec|convert|table", .help = "run one section: gemm, vec, convert, or table (every kernel of the kernel table against its reference; default: the first three)"},
        {"no-peers", 0, AK_OPT_FLAG, &no_peers, .help = "leave out OpenBLAS and BLIS"},
        {"quick", 0, AK_OPT_FLAG, &o->quick, .help = "shorter measurements (less precise)"},
        {"json", 0, AK_OPT_FLAG, &o->json, .help = "JSON instead of a table"},
        {"out", 0, AK_OPT_STRING, &o->out, "DIR", .help = "append the results as JSON lines to DIR/kernels.jsonl (none: do not)", .def = AK_BENCH_OUT_DEFAULT},
        {"peer-child", 0, AK_OPT_STRING, &o->peer_child, "NAME", .help = "internal: time a peer library in this child process"},
        {"reps", 0, AK_OPT_INT, &reps, "N", .help = "internal (--peer-child): calls per timed batch", .min = 1, .max = 1000000000},
        {"check", 0, AK_OPT_FLAG, &o->check, .help = "internal (--peer-child): also return the result for comparison"},
        AK_OPT_END};
    const ak_cli_cmd cmd = {.name = "bench kernels", .opts = opts,
                            .notes = "Threads: AK_NUM_THREADS, else 1 (figures per core)."};
    int rc = ak_cli_parse(&cmd, argc, argv, &first);
    if (rc != AK_CLI_CONTINUE) return rc;
    if (first < argc) return ak_cli_usage_error(&cmd, "unexpected argument '%s'", argv[first]);
    o->reps = (int)reps;
    o->peers = !no_peers;
    o->gemm = only < 0 || only == 0;
    o->vec = only < 0 || only == 1;
    o->convert = only < 0 || only == 2;
    o->table = only == 3;
    if (o->nshapes == 0) {
        o->nshapes = (int)(sizeof default_shapes / sizeof *default_shapes);
        memcpy(o->shapes, default_shapes, sizeof default_shapes);
    } else if (o->nshapes > 0 && !o->vec && !o->convert && !o->table) {
        o->gemm = 1;
    }
    return AK_CLI_CONTINUE;
}

/* ---- GEMM ------------------------------------------------------------------------- */

typedef struct gemm_case {
    size_t M, N, K;
    const float *A, *B;
    float *C;
    ak_threadpool *pool;
} gemm_case;

static void gemm_once(const gemm_case *g) {
    ak_sgemm(AK_NO_TRANS, AK_NO_TRANS, g->M, g->N, g->K, 1.0f, g->A, g->K, g->B, g->N, 0.0f,
             g->C, g->N, g->pool);
}

/* GFLOP/s of one timed batch of `reps` calls. */
static double gemm_batch(const gemm_case *g, int reps) {
    uint64_t t0 = ak_now_ns();
    for (int r = 0; r < reps; r++) gemm_once(g);
    double flop = 2.0 * (double)g->M * (double)g->N * (double)g->K * reps;
    return flop / (double)(ak_now_ns() - t0);
}

typedef struct gemm_result {
    double gflops, peer_gflops[PEER_COUNT], max_rel_err;
} gemm_result;

/* One peer batch in its child process; marks the peer missing or failed for the run. */
static double peer_round(bench_env *env, int p, const size_t shape[3], int reps, int check,
                         double *max_rel_err) {
    if (env->peer_missing[p]) return 0;
    peer_batch b;
    int rc = bench_peer_batch(p, shape, reps, check, &b);
    if (rc != 0) {
        if (rc < 0) fprintf(stderr, "ak bench kernels: %s child failed\n", bench_peer_names[p]);
        env->peer_missing[p] = 1;
        return 0;
    }
    if (check && b.max_rel_diff > *max_rel_err) *max_rel_err = b.max_rel_diff;
    snprintf(env->peer_version[p], sizeof env->peer_version[p], "%s", b.version);
    return b.gflops;
}

static int gemm_measure(const bench_opts *o, bench_env *env, const size_t shape[3],
                        gemm_result *res) {
    size_t M = shape[0], N = shape[1], K = shape[2];
    float *A = NULL, *B = NULL, *C = NULL;
    if (ak_alloc(M * K * 4, (void **)&A) || ak_alloc(K * N * 4, (void **)&B) ||
        ak_alloc(M * N * 4, (void **)&C)) {
        ak_free(A), ak_free(B);
        return ak_cli_report("gemm buffers", AK_ERR_NO_MEMORY);
    }
    bench_fill_random(A, M * K, 1);
    bench_fill_random(B, K * N, 2);
    double flop = 2.0 * (double)M * N * K;
    int reps = (int)((o->quick ? 2e8 : 2e9) * o->threads / flop) + 1, rounds = o->quick ? 3 : 7;
    gemm_case ours = {M, N, K, A, B, C, env->pool};
    double mine[7], theirs[PEER_COUNT][7];
    res->max_rel_err = 0;
    gemm_once(&ours); /* warm-up: packing buffers, page faults */
    for (int r = 0; r < rounds; r++) { /* alternate A B A B so drift hits both alike */
        mine[r] = gemm_batch(&ours, reps);
        for (int p = 0; p < PEER_COUNT; p++)
            theirs[p][r] = o->peers ? peer_round(env, p, shape, reps, r == 0, &res->max_rel_err) : 0;
    }
    res->gflops = ak_cli_median(mine, (size_t)rounds);
    for (int p = 0; p < PEER_COUNT; p++)
        res->peer_gflops[p] = ak_cli_median(theirs[p], (size_t)rounds);
    ak_free(A), ak_free(B), ak_free(C);
    return 0;
}

/* One results line per engine: accelkit's, then each peer that ran. */
static void gemm_record(const bench_opts *o, bench_env *env, const size_t s[3],
                        const gemm_result *r) {
    for (int p = -1; p < PEER_COUNT; p++) {
        double gflops = p < 0 ? r->gflops : r->peer_gflops[p];
        if (p >= 0 && (!o->peers || env->peer_missing[p] || gflops <= 0)) continue;
        cJSON *params = cJSON_CreateObject(), *figures = cJSON_CreateObject();
        cJSON_AddNumberToObject(params, "m", (double)s[0]);
        cJSON_AddNumberToObject(params, "n", (double)s[1]);
        cJSON_AddNumberToObject(params, "k", (double)s[2]);
        cJSON_AddNumberToObject(params, "threads", o->threads);
        ak_cli_json_round(figures, "gflops", gflops, 2);
        ak_cli_json_round(figures, "pct_peak", 100.0 * gflops / (env->peak_gflops * o->threads), 1);
        if (p >= 0 && o->peers) cJSON_AddNumberToObject(figures, "max_rel_diff", r->max_rel_err);
        ak__bench_out_add(&env->results, "kernels.sgemm", p < 0 ? NULL : bench_peer_names[p],
                          p < 0 ? NULL : env->peer_version[p], params, figures);
    }
}

static void gemm_print(const bench_opts *o, bench_env *env, const size_t s[3],
                       const gemm_result *r) {
    double pct = 100.0 * r->gflops / (env->peak_gflops * o->threads);
    const double ob = r->peer_gflops[PEER_OPENBLAS], bl = r->peer_gflops[PEER_BLIS];
    gemm_record(o, env, s, r);
    if (o->json) {
        cJSON *row = cJSON_CreateObject();
        cJSON_AddStringToObject(row, "section", "gemm");
        cJSON_AddNumberToObject(row, "m", (double)s[0]);
        cJSON_AddNumberToObject(row, "n", (double)s[1]);
        cJSON_AddNumberToObject(row, "k", (double)s[2]);
        cJSON_AddNumberToObject(row, "threads", o->threads);
        ak_cli_json_round(row, "gflops", r->gflops, 2);
        ak_cli_json_round(row, "pct_peak", pct, 1);
        ak_cli_json_round(row, "openblas_gflops", ob, 2);
        ak_cli_json_round(row, "blis_gflops", bl, 2);
        ak_cli_json_round(row, "vs_openblas", ob > 0 ? r->gflops / ob : 0, 3);
        ak_cli_json_round(row, "vs_blis", bl > 0 ? r->gflops / bl : 0, 3);
        cJSON_AddNumberToObject(row, "max_rel_diff", r->max_rel_err);
        cJSON_AddItemToArray(env->json_rows, row);
        return;
    }
    char shape[64];
    snprintf(shape, sizeof shape, "%zux%zux%zu", s[0], s[1], s[2]);
    printf("%-16s %9.1f %7.1f%% %9.1f %9.1f %8.3f %8.3f %10.1e\n", shape, r->gflops, pct, ob, bl,
           ob > 0 ? r->gflops / ob : 0, bl > 0 ? r->gflops / bl : 0, r->max_rel_err);
}

static int bench_gemm(const bench_opts *o, bench_env *env) {
    if (!o->json) {
        printf("\nSGEMM, row-major C = A·B, %d thread(s), median of alternating batches\n",
               o->threads);
        printf("%-16s %9s %8s %9s %9s %8s %8s %10s\n", "M×N×K", "GFLOP/s", "%peak",
               "OpenBLAS", "BLIS", "vs OB", "vs BLIS", "max rel Δ");
    }
    for (int i = 0; i < o->nshapes; i++) {
        gemm_result r = {0};
        if (gemm_measure(o, env, o->shapes[i], &r)) return AK_EXIT_ERROR;
        gemm_print(o, env, o->shapes[i], &r);
    }
    return AK_EXIT_OK;
}

/* ---- reductions and conversions ---------------------------------------------------- */

typedef enum vec_kind {
    VEC_ADD, VEC_ADD_INPLACE, VEC_AXPY, VEC_SUM, CONV_TO16, CONV_FROM16
} vec_kind;

typedef struct vec_case {
    const char *name;
    vec_kind kind;
    ak_dtype dtype;
    double traffic; /* bytes moved per byte of one operand buffer (reads + writes) */
} vec_case;

static const vec_case vec_cases[] = {
    {"f32 add a+b->c", VEC_ADD, AK_DTYPE_F32, 3},   {"f32 add a+=b", VEC_ADD_INPLACE, AK_DTYPE_F32, 3},
    {"f16 add a+b->c", VEC_ADD, AK_DTYPE_F16, 3},   {"f16 add a+=b", VEC_ADD_INPLACE, AK_DTYPE_F16, 3},
    {"bf16 add a+b->c", VEC_ADD, AK_DTYPE_BF16, 3}, {"bf16 add a+=b", VEC_ADD_INPLACE, AK_DTYPE_BF16, 3},
    {"f32 axpy", VEC_AXPY, AK_DTYPE_F32, 3},        {"f32 sum", VEC_SUM, AK_DTYPE_F32, 1},
    {"f16 sum", VEC_SUM, AK_DTYPE_F16, 1},          {"bf16 sum", VEC_SUM, AK_DTYPE_BF16, 1},
};

static const vec_case conv_cases[] = {
    /* 16 MiB of input: narrowing writes half of it, widening twice */
    {"f32->f16", CONV_TO16, AK_DTYPE_F16, 1.5},  {"f16->f32", CONV_FROM16, AK_DTYPE_F16, 3},
    {"f32->bf16", CONV_TO16, AK_DTYPE_BF16, 1.5}, {"bf16->f32", CONV_FROM16, AK_DTYPE_BF16, 3},
};

typedef struct vec_buffers {
    void *a, *b, *c;
} vec_buffers;

static void vec_run(const vec_case *v, const vec_buffers *buf, size_t bytes) {
    size_t esize;
    ak_dtype_size(v->dtype, &esize);
    size_t n = bytes / esize;
    double sum;
    switch (v->kind) {
    case VEC_ADD: ak_vec_add(v->dtype, buf->c, buf->a, buf->b, n); break;
    case VEC_ADD_INPLACE: ak_vec_add(v->dtype, buf->a, buf->a, buf->b, n); break;
    case VEC_AXPY: ak_vec_axpy(v->dtype, buf->a, 1e-3f, buf->b, n); break;
    case VEC_SUM: ak_vec_sum(v->dtype, buf->a, n, &sum); break;
    case CONV_TO16: /* `bytes` of f32 input */
        if (v->dtype == AK_DTYPE_F16) ak_f32_to_f16(buf->c, buf->a, bytes / 4);
        else ak_f32_to_bf16(buf->c, buf->a, bytes / 4);
        break;
    case CONV_FROM16: /* `bytes` of 16-bit input */
        if (v->dtype == AK_DTYPE_F16) ak_f16_to_f32(buf->c, buf->a, bytes / 2);
        else ak_bf16_to_f32(buf->c, buf->a, bytes / 2);
        break;
    }
}

/* Median GB/s of the kernel (traffic-weighted) and of memcpy, interleaved. */
static void vec_measure(const vec_case *v, const vec_buffers *buf, int rounds, double *gbps,
                        double *memcpy_gbps) {
    double mine[15], copy[15];
    vec_run(v, buf, VEC_BYTES); /* warm-up */
    for (int r = 0; r < rounds; r++) {
        uint64_t t0 = ak_now_ns();
        vec_run(v, buf, VEC_BYTES);
        uint64_t t1 = ak_now_ns();
        memcpy(buf->c, buf->b, VEC_BYTES);
        uint64_t t2 = ak_now_ns();
        mine[r] = v->traffic * VEC_BYTES / (double)(t1 - t0);
        copy[r] = 2.0 * VEC_BYTES / (double)(t2 - t1);
    }
    *gbps = ak_cli_median(mine, (size_t)rounds);
    *memcpy_gbps = ak_cli_median(copy, (size_t)rounds);
}

/* Conversions add their figure of merit, GB/s of input, beside the traffic figure. */
static void vec_print_row(const bench_opts *o, bench_env *env, const char *section,
                          const vec_case *v, double gbps, double copy_gbps) {
    int is_conv = v->kind == CONV_TO16 || v->kind == CONV_FROM16;
    double input_gbps = gbps / v->traffic;
    cJSON *params = cJSON_CreateObject(), *figures = cJSON_CreateObject();
    cJSON_AddStringToObject(params, "kernel", v->name);
    cJSON_AddNumberToObject(params, "bytes", (double)VEC_BYTES);
    ak_cli_json_round(figures, "gbps", gbps, 2);
    ak_cli_json_round(figures, "memcpy_gbps", copy_gbps, 2);
    ak_cli_json_round(figures, "pct_memcpy", 100.0 * gbps / copy_gbps, 1);
    if (is_conv) ak_cli_json_round(figures, "input_gbps", input_gbps, 2);
    char benchmark[32];
    snprintf(benchmark, sizeof benchmark, "kernels.%s", section);
    ak__bench_out_add(&env->results, benchmark, NULL, NULL, params, figures);
    if (o->json) {
        cJSON *row = cJSON_CreateObject();
        cJSON_AddStringToObject(row, "section", section);
        cJSON_AddStringToObject(row, "kernel", v->name);
        cJSON_AddNumberToObject(row, "bytes", (double)VEC_BYTES);
        ak_cli_json_round(row, "gbps", gbps, 2);
        ak_cli_json_round(row, "memcpy_gbps", copy_gbps, 2);
        ak_cli_json_round(row, "pct_memcpy", 100.0 * gbps / copy_gbps, 1);
        if (is_conv) ak_cli_json_round(row, "input_gbps", input_gbps, 2);
        cJSON_AddItemToArray(env->json_rows, row);
        return;
    }
    printf("%-18s %9.2f %9.2f %8.1f%%", v->name, gbps, copy_gbps, 100.0 * gbps / copy_gbps);
    if (is_conv) printf(" %11.2f", input_gbps);
    printf("\n");
}

static int bench_vec_section(const bench_opts *o, bench_env *env, const char *section,
                             const vec_case *cases, size_t ncases) {
    vec_buffers buf = {0};
    /* conversions write 2× the input for f16->f32, so c is twice as large */
    if (ak_alloc(VEC_BYTES, &buf.a) || ak_alloc(VEC_BYTES, &buf.b) ||
        ak_alloc(2 * VEC_BYTES, &buf.c)) {
        ak_free(buf.a), ak_free(buf.b);
        return ak_cli_report("vector buffers", AK_ERR_NO_MEMORY);
    }
    /* small values that stay finite in every format under repeated a += b */
    float *fa = buf.a, *fb = buf.b;
    bench_fill_random(fa, VEC_BYTES / 4, 3);
    bench_fill_random(fb, VEC_BYTES / 4, 4);
    for (size_t i = 0; i < VEC_BYTES / 4; i++) fb[i] *= 1e-6f;
    memset(buf.c, 0, 2 * VEC_BYTES);
    if (!o->json)
        printf("\n%s, one thread, 16 MiB operands; GB/s = bytes read + written per second\n"
               "%-18s %9s %9s %9s%s\n", section, "kernel", "GB/s", "memcpy", "%memcpy",
               cases[0].kind >= CONV_TO16 ? "  input GB/s" : "");
    for (size_t i = 0; i < ncases; i++) {
        double gbps, copy;
        vec_measure(&cases[i], &buf, o->quick ? 3 : 11, &gbps, &copy);
        vec_print_row(o, env, section, &cases[i], gbps, copy);
    }
    ak_free(buf.a), ak_free(buf.b), ak_free(buf.c);
    return AK_EXIT_OK;
}

/* ---- the kernel table ------------------------------------------------------------- */

/* One row per kernel of kernels.def: its checker, and per variant the CPU can run the
 * symbol that variant's table holds (its own or inherited); the active table first. */
static int bench_table(const bench_opts *o) {
    const ak__kernels *tables[AK__KERNEL_VARIANTS];
    for (int v = 0; v < AK__KERNEL_VARIANTS; v++)
        tables[v] = ak__kernels_for(ak__kernel_variants[v]);
    const ak__kernels *active = ak__kernels_active();
    if (o->json) {
        cJSON *root = cJSON_CreateObject(), *list = cJSON_AddArrayToObject(root, "kernels");
        cJSON_AddStringToObject(root, "active", active->name);
        for (size_t i = 0; i < AK__KERNEL_COUNT_; i++) {
            const ak__kernel_info *k = &ak__kernel_list[i];
            cJSON *row = cJSON_CreateObject();
            cJSON_AddStringToObject(row, "kernel", k->name);
            cJSON_AddStringToObject(row, "type", k->type);
            cJSON_AddStringToObject(row, "elem", k->elem);
            cJSON_AddStringToObject(row, "check", k->check);
            for (int v = 0; v < AK__KERNEL_VARIANTS; v++)
                if (tables[v]) cJSON_AddStringToObject(row, ak__kernel_variants[v], tables[v]->impl[i]);
            cJSON_AddItemToArray(list, row);
        }
        return ak_cli_print_json(root);
    }
    printf("kernels/kernels.def: %d kernels, active table '%s'\n", AK__KERNEL_COUNT_,
           active->name);
    printf("%-18s %-10s", "kernel", "checker");
    for (int v = 0; v < AK__KERNEL_VARIANTS; v++)
        if (tables[v]) printf(" %-30s", ak__kernel_variants[v]);
    printf("\n");
    for (size_t i = 0; i < AK__KERNEL_COUNT_; i++) {
        printf("%-18s %-10s", ak__kernel_list[i].name, ak__kernel_list[i].check);
        for (int v = 0; v < AK__KERNEL_VARIANTS; v++)
            if (tables[v]) printf(" %-30s", tables[v]->impl[i]);
        printf("\n");
    }
    return AK_EXIT_OK;
}

/* ---- entry ------------------------------------------------------------------------ */

static int bench_setup(const bench_opts *o, bench_env *env) {
    ak_status st;
    memset(env, 0, sizeof *env);
    if ((st = ak_threadpool_create(o->threads, &env->pool)) != AK_OK)
        return ak_cli_report("thread pool", st);
    if ((st = ak_measure_fma_peak(o->quick ? 50 : 300, &env->peak_gflops)) != AK_OK ||
        (st = ak_measure_memcpy(VEC_BYTES, &env->memcpy_gbps)) != AK_OK)
        return ak_cli_report("machine limits", st);
    int rc = ak__bench_out_open(&env->results, o->out, "kernels", env->peak_gflops, env->memcpy_gbps);
    if (rc) return rc;
    ak_cpu_info cpu;
    ak_cpu_get_info(&cpu);
    if (o->json) {
        env->json = cJSON_CreateObject();
        cJSON_AddStringToObject(env->json, "isa", ak_isa_name(cpu.active_isa));
        cJSON_AddNumberToObject(env->json, "threads", o->threads);
        ak_cli_json_round(env->json, "fma_peak_gflops_per_core", env->peak_gflops, 2);
        ak_cli_json_round(env->json, "memcpy_gbps", env->memcpy_gbps, 2);
        env->json_rows = cJSON_AddArrayToObject(env->json, "results");
    } else {
        printf("accelkit kernels: isa %s, %d thread(s), FP32 FMA peak %.1f GFLOP/s per core, "
               "memcpy %.1f GB/s\n", ak_isa_name(cpu.active_isa), o->threads, env->peak_gflops,
               env->memcpy_gbps);
    }
    return AK_EXIT_OK;
}

int ak_bench_kernels(int argc, char **argv) {
    bench_opts o;
    bench_env env;
    int parsed = parse_opts(argc, argv, &o);
    if (parsed != AK_CLI_CONTINUE) return parsed;
    if (o.peer_child)
        return bench_peer_child(o.peer_child, o.shapes[0], o.reps > 0 ? o.reps : 1, o.threads,
                                o.check);
    if (o.table) return bench_table(&o);
    int rc = bench_setup(&o, &env);
    if (rc == AK_EXIT_OK && o.gemm) rc = bench_gemm(&o, &env);
    if (rc == AK_EXIT_OK && o.vec)
        rc = bench_vec_section(&o, &env, "reductions", vec_cases,
                               sizeof vec_cases / sizeof *vec_cases);
    if (rc == AK_EXIT_OK && o.convert)
        rc = bench_vec_section(&o, &env, "conversions", conv_cases,
                               sizeof conv_cases / sizeof *conv_cases);
    if (env.json && rc == AK_EXIT_OK) rc = ak_cli_print_json(env.json); /* frees it */
    else cJSON_Delete(env.json);
    ak__bench_out_close(&env.results);
    ak_threadpool_free(env.pool);
    return rc;
}
