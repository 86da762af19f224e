/* `ak bench linear`: ak_linear per weight type and token count T on LLM shapes.
 *
 * T = 1 (decode GEMV) is bandwidth-bound: it reports GB/s of weight bytes read and the %
 * of the streaming-read bandwidth measured in the same run with the same threads. To
 * keep the weights out of the caches, as in a real model step (~85 different matrices),
 * each call reads the next of enough copies to fill several times the last-level cache.
 * T = 16 (sequences decoding together) and T = 128 (prompt prefill) are compute-bound:
 * GFLOP/s (2·N·K·T per call) and % of the measured FMA peak × threads. Medians of
 * repeated batches. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "accelkit/kernels.h"
#include "cli/bench_results.h"
#include "cli/cli.h"
#include "cli/cli_opts.h"
#include "kernels/dispatch.h"

#define MAX_SHAPES 8
#define COLD_BYTES ((size_t)192 << 20) /* weight copies per T = 1 case: several × L3 */
#define READ_BYTES ((size_t)256 << 20) /* the read-bandwidth buffer */
#define BATCHES 11
#define BATCH_NS 20000000ull

static const ak_wtype all_types[] = {AK_WTYPE_F32,   AK_WTYPE_F16,   AK_WTYPE_BF16,
                                     AK_WTYPE_Q8_0,  AK_WTYPE_Q4_0,  AK_WTYPE_Q4_K,
                                     AK_WTYPE_Q6_K,  AK_WTYPE_Q5_K,  AK_WTYPE_Q3_K,
                                     AK_WTYPE_Q2_K,  AK_WTYPE_IQ4_NL, AK_WTYPE_IQ4_XS,
                                     AK_WTYPE_Q8_K};
#define N_TYPES (sizeof all_types / sizeof all_types[0])

typedef struct lin_opts {
    size_t shapes[MAX_SHAPES][2]; /* N, K */
    int nshapes, threads, json, quick;
    const char *out; /* --out: the results folder, or "none" */
    size_t tokens[4];
    int ntokens;
} lin_opts;


static const size_t default_shapes[][2] = {{2048, 768}, {768, 2048}, {32000, 768}};
static const size_t default_tokens[] = {1, 16, 128};

static const char *parse_shape(void *dest, char *value, ak_opt_more *more) {
    lin_opts *o = dest;
    size_t s3[3];
    char buf[64];
    (void)more;
    if (o->nshapes == MAX_SHAPES) return "too many shapes";
    snprintf(buf, sizeof buf, "%sx1", value); /* NxK as a 3-D shape */
    if (ak_cli_parse_shape3(buf, s3) || !s3[0] || !s3[1]) return "want NxK";
    o->shapes[o->nshapes][0] = s3[0];
    o->shapes[o->nshapes++][1] = s3[1];
    return NULL;
}

static const char *parse_tokens(void *dest, char *value, ak_opt_more *more) {
    lin_opts *o = dest;
    long t;
    (void)more;
    if (o->ntokens == 4) return "at most 4 token counts";
    if (ak_cli_parse_long(value, 1, 1 << 20, &t)) return "want an integer in [1, 1048576]";
    o->tokens[o->ntokens++] = (size_t)t;
    return NULL;
}

/* Parses the flags into o; AK_CLI_CONTINUE or an exit code. */
static int parse_opts(int argc, char **argv, lin_opts *o) {
    memset(o, 0, sizeof *o);
    o->out = AK_BENCH_OUT_DEFAULT;
    long threads = ak_cli_bench_threads();
    int first;
    const ak_opt opts[] = {
        {"threads", 0, AK_OPT_INT, &threads, "N", .help = "threads (default: AK_NUM_THREADS, else 1)", .min = 1, .max = 1024},
        {"shape", 0, AK_OPT_CUSTOM, o, "NxK", .help = "a weight shape (repeatable; default: 2048x768, 768x2048, 32000x768)", .parse = parse_shape},
        {"tokens", 0, AK_OPT_CUSTOM, o, "T", .help = "tokens per call (repeatable, up to 4; default: 1, 16, 128)", .parse = parse_tokens},
        {"quick", 0, AK_OPT_FLAG, &o->quick, .help = "the first shape only"},
        {"json", 0, AK_OPT_FLAG, &o->json, .help = "JSON instead of a table"},
        {"out", 0, AK_OPT_STRING, &o->out, "DIR", .help = "append the results as JSON lines to DIR/kernels.jsonl (none: do not)", .def = AK_BENCH_OUT_DEFAULT},
        AK_OPT_END};
    const ak_cli_cmd cmd = {.name = "bench linear", .opts = opts};
    int rc = ak_cli_parse(&cmd, argc, argv, &first);
    if (rc != AK_CLI_CONTINUE) return rc;
    if (first < argc) return ak_cli_usage_error(&cmd, "unexpected argument '%s'", argv[first]);
    o->threads = (int)threads;
    if (o->nshapes == 0) {
        o->nshapes = (int)(sizeof default_shapes / sizeof *default_shapes);
        memcpy(o->shapes, default_shapes, sizeof default_shapes);
    }
    if (o->ntokens == 0) {
        o->ntokens = (int)(sizeof default_tokens / sizeof *default_tokens);
        memcpy(o->tokens, default_tokens, sizeof default_tokens);
    }
    return AK_CLI_CONTINUE;
}

/* ---- streaming-read bandwidth ------------------------------------------------------------ */

typedef struct read_job {
    const uint64_t *buf;
    size_t chunk; /* words per index */
    uint64_t sink[64];
} read_job;

/* Each index reads its chunk (a multiple of 32 words) through the kernel table's memory
 * probe: the chunk's halves side by side, as ak_linear's GEMV reads its rows. */
static void read_range(void *ctx, size_t begin, size_t end, int thread_index) {
    read_job *r = ctx;
    ak__kf_u64_read_sum *read_sum = ak__kernels_active()->u64_read_sum;
    uint64_t s = 0;
    for (size_t i = begin; i < end; i++) s += read_sum(r->buf + i * r->chunk, r->chunk);
    r->sink[thread_index & 63] += s;
}

/* A buffer far larger than the caches, read in parts (independent chains of vector
 * adds) by the pool's threads. The T = 1 timing batches alternate with read passes so that both
 * see the same machine (other tenants of a VM move the bandwidth by ±20 %). */
typedef struct read_bw {
    uint64_t *buf;
    size_t next; /* the part read next */
} read_bw;

#define READ_PART ((size_t)64 << 20)

/* GB/s of one pass over the next READ_PART bytes. */
static double read_pass(read_bw *rb, ak_threadpool *pool) {
    read_job r = {.buf = rb->buf + rb->next * (READ_PART / sizeof(uint64_t)),
                  .chunk = ((size_t)4 << 20) / sizeof(uint64_t)}; /* long streams */
    rb->next = (rb->next + 1) % (READ_BYTES / READ_PART);
    uint64_t t0 = ak_now_ns();
    if (ak_threadpool_parallel_for(pool, READ_PART / sizeof(uint64_t) / r.chunk, 1, read_range,
                                   &r) != AK_OK)
        return 0;
    return (double)READ_PART / (double)(ak_now_ns() - t0);
}

typedef struct lin_env {
    ak_threadpool *pool;
    read_bw rb;
    double peak_gflops; /* with opts.threads threads */
    cJSON *json, *json_rows; /* --json: the document and its "rows" array */
    ak__bench_out results;   /* the kernels.linear lines (--out) */
} lin_env;

static ak_status read_init(read_bw *rb) {
    rb->next = 0;
    ak_status st = ak_alloc(READ_BYTES, (void **)&rb->buf);
    if (st == AK_OK) memset(rb->buf, 0, READ_BYTES); /* fault the pages in */
    return st;
}

/* ---- one case -------------------------------------------------------------------------- */

typedef struct lin_case {
    ak_wtype wtype;
    size_t N, K, T, copies, rb;
    unsigned char *W; /* `copies` matrices back to back */
    float *X, *Y;
} lin_case;

/* Random weights in the type's storage, copied until the set is cold. */
static ak_status case_init(lin_case *c) {
    ak_status st = ak_wtype_row_bytes(c->wtype, c->K, &c->rb);
    if (st != AK_OK) return st;
    size_t bytes = c->N * c->rb;
    c->copies = (COLD_BYTES + bytes - 1) / bytes;
    float *row = malloc(c->K * sizeof(float));
    c->X = malloc(c->T * c->K * sizeof(float));
    c->Y = malloc(c->T * c->N * sizeof(float));
    st = ak_alloc(bytes * c->copies, (void **)&c->W);
    if (st == AK_OK && (!row || !c->X || !c->Y)) st = AK_ERR_NO_MEMORY;
    uint32_t s = 12345;
    for (size_t i = 0; st == AK_OK && i < c->T * c->K; i++)
        c->X[i] = (float)((s = s * 1664525u + 1013904223u) >> 8) / 16777216.0f - 0.5f;
    for (size_t n = 0; st == AK_OK && n < c->N; n++) {
        for (size_t k = 0; k < c->K; k++)
            row[k] = (float)((s = s * 1664525u + 1013904223u) >> 8) / 16777216.0f - 0.5f;
        st = ak_quantize_row(c->wtype, row, c->W + n * c->rb, c->K);
    }
    for (size_t i = 1; st == AK_OK && i < c->copies; i++) memcpy(c->W + i * bytes, c->W, bytes);
    free(row);
    return st;
}

static void case_free(lin_case *c) {
    ak_free(c->W);
    free(c->X);
    free(c->Y);
}

/* One case's timing: median seconds per call; for T = 1 also the median read bandwidth
 * and the median of each batch's GB/s over the read pass right after it (pairing the
 * two cancels slow drifts of the machine's bandwidth). */
typedef struct lin_time {
    double sec, read_gbps, pct_read;
} lin_time;

/* Batches of ~20 ms, each call on the next weight copy. */
static ak_status time_case(const lin_case *c, lin_env *env, lin_time *out) {
    size_t bytes = c->N * c->rb, reps = 1, next = 0;
    ak_status st = AK_OK;
    double per[BATCHES], rd[BATCHES], ratio[BATCHES];
    for (int b = -1; b < BATCHES && st == AK_OK; b++) { /* b = -1: warm-up and calibration */
        uint64_t t0 = ak_now_ns();
        for (size_t r = 0; r < reps && st == AK_OK; r++, next = (next + 1) % c->copies)
            st = ak_linear(c->wtype, c->W + next * bytes, c->N, c->K, c->X, c->K, c->T, c->Y,
                           c->N, 0, env->pool);
        uint64_t dt = ak_now_ns() - t0;
        if (b < 0) {
            reps = dt ? (size_t)(BATCH_NS * reps / dt) : 1000;
            reps = reps < c->copies ? c->copies : reps;
            continue;
        }
        per[b] = (double)dt * 1e-9 / (double)reps;
        rd[b] = c->T == 1 ? read_pass(&env->rb, env->pool) : 0;
        ratio[b] = rd[b] > 0 ? (double)bytes / per[b] * 1e-9 / rd[b] : 0;
    }
    out->sec = ak_cli_median(per, BATCHES);
    out->read_gbps = ak_cli_median(rd, BATCHES);
    out->pct_read = 100.0 * ak_cli_median(ratio, BATCHES);
    return st;
}

/* One kernels.linear results line (docs/report.md). */
static void record_row(lin_env *env, const lin_opts *o, const lin_case *c, double sec,
                       double gbps, double gflops, double pct) {
    if (!env->results.file) return;
    cJSON *params = cJSON_CreateObject(), *figures = cJSON_CreateObject();
    cJSON_AddStringToObject(params, "type", ak_wtype_name(c->wtype));
    cJSON_AddNumberToObject(params, "n", (double)c->N);
    cJSON_AddNumberToObject(params, "k", (double)c->K);
    cJSON_AddNumberToObject(params, "tokens", (double)c->T);
    cJSON_AddNumberToObject(params, "threads", o->threads);
    ak_cli_json_round(figures, "us", sec * 1e6, 2);
    ak_cli_json_round(figures, "gbps", gbps, 2);
    ak_cli_json_round(figures, "gflops", gflops, 2);
    ak_cli_json_round(figures, c->T == 1 ? "pct_read_bw" : "pct_fma_peak", pct, 1);
    ak__bench_out_add(&env->results, "kernels.linear", NULL, NULL, params, figures);
}

static void print_row(lin_env *env, const lin_opts *o, const lin_case *c, const lin_time *tm) {
    double sec = tm->sec, read_gbps = tm->read_gbps;
    double gbps = (double)(c->N * c->rb) / sec * 1e-9;
    double gflops = 2.0 * (double)c->N * (double)c->K * (double)c->T / sec * 1e-9;
    double pct = c->T == 1 ? tm->pct_read : 100.0 * gflops / env->peak_gflops;
    record_row(env, o, c, sec, gbps, gflops, pct);
    if (o->json) {
        cJSON *row = cJSON_CreateObject();
        cJSON_AddStringToObject(row, "wtype", ak_wtype_name(c->wtype));
        cJSON_AddNumberToObject(row, "n", (double)c->N);
        cJSON_AddNumberToObject(row, "k", (double)c->K);
        cJSON_AddNumberToObject(row, "t", (double)c->T);
        cJSON_AddNumberToObject(row, "threads", o->threads);
        ak_cli_json_round(row, "us", sec * 1e6, 2);
        ak_cli_json_round(row, "gbps", gbps, 2);
        ak_cli_json_round(row, "gflops", gflops, 2);
        ak_cli_json_round(row, "read_gbps", read_gbps, 2);
        ak_cli_json_round(row, "pct", pct, 1);
        cJSON_AddStringToObject(row, "of", c->T == 1 ? "read_bw" : "fma_peak");
        cJSON_AddItemToArray(env->json_rows, row);
        return;
    }
    if (c->T == 1)
        printf("%-5s %6zux%-6zu %4zu %10.1f %8.1f %9.1f %7.1f%% of read %.1f GB/s\n",
               ak_wtype_name(c->wtype), c->N, c->K, c->T, sec * 1e6, gbps, gflops, pct, read_gbps);
    else
        printf("%-5s %6zux%-6zu %4zu %10.1f %8.1f %9.1f %7.1f%% of FMA peak\n",
               ak_wtype_name(c->wtype), c->N, c->K, c->T, sec * 1e6, gbps, gflops, pct);
}

static int run_case(lin_env *env, const lin_opts *o, ak_wtype w, const size_t shape[2], size_t T) {
    lin_case c = {.wtype = w, .N = shape[0], .K = shape[1], .T = T};
    lin_time tm = {0, 0, 0};
    ak_status st = case_init(&c);
    if (st == AK_OK) st = time_case(&c, env, &tm);
    case_free(&c);
    if (st != AK_OK) return ak_cli_report("ak bench linear", st);
    print_row(env, o, &c, &tm);
    fflush(stdout);
    return AK_EXIT_OK;
}

/* Every token count × type × shape (--quick: the first shape only). */
static int run_all(lin_env *env, const lin_opts *o) {
    for (int ti = 0; ti < o->ntokens; ti++)
        for (size_t w = 0; w < N_TYPES; w++)
            for (int s = 0; s < (o->quick ? 1 : o->nshapes); s++) {
                int rc = run_case(env, o, all_types[w], o->shapes[s], o->tokens[ti]);
                if (rc != AK_EXIT_OK) return rc;
            }
    return AK_EXIT_OK;
}

int ak_bench_linear(int argc, char **argv) {
    lin_opts o;
    int parsed = parse_opts(argc, argv, &o);
    if (parsed != AK_CLI_CONTINUE) return parsed;
    lin_env env = {0};
    double peak1 = 0;
    ak_status st = ak_threadpool_create(o.threads, &env.pool);
    if (st == AK_OK) st = ak_measure_fma_peak(o.quick ? 100 : 300, &peak1);
    if (st == AK_OK) st = read_init(&env.rb);
    if (st != AK_OK) {
        ak_threadpool_free(env.pool);
        ak_free(env.rb.buf);
        return ak_cli_report("ak bench linear", st);
    }
    env.peak_gflops = peak1 * o.threads;
    int rc = ak__bench_out_open(&env.results, o.out, "kernels", peak1, 0);
    if (rc) {
        ak_threadpool_free(env.pool);
        ak_free(env.rb.buf);
        return rc;
    }
    if (o.json) {
        env.json = cJSON_CreateObject();
        cJSON_AddNumberToObject(env.json, "threads", o.threads);
        ak_cli_json_round(env.json, "fma_peak_gflops", env.peak_gflops, 1);
        env.json_rows = cJSON_AddArrayToObject(env.json, "rows");
    } else
        printf("ak_linear, %d thread(s), FMA peak %.1f GFLOP/s; T = 1: %% of the streaming "
               "read bandwidth measured after each batch (median of the pairs)\n"
               "%-5s %13s %4s %10s %8s %9s %8s\n",
               o.threads, env.peak_gflops, "type", "N×K", "T", "µs/call", "GB/s", "GFLOP/s", "%");
    rc = run_all(&env, &o);
    ak__bench_out_close(&env.results);
    if (env.json && rc == AK_EXIT_OK) rc = ak_cli_print_json(env.json); /* frees it */
    else cJSON_Delete(env.json);
    ak_threadpool_free(env.pool);
    ak_free(env.rb.buf);
    return rc;
}
