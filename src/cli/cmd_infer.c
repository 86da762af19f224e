/* Running ONNX models from the command line:
 *   ak run MODEL      run once on inputs from files, write the outputs as .npy
 *   ak compare MODEL  precision against reference outputs (max abs / rel error, cosine)
 *   ak bench MODEL    latency percentiles and throughput (onnxruntime_perf_test-like) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "accelkit/kernels.h"
#include <cjson/cJSON.h>

#include "cli/bench_results.h"
#include "cli/cli.h"
#include "cli/cli_opts.h"
#include "cli/cli_progress.h"
#include "cli/infer_feed.h"

typedef struct infer_args {
    const char *model, *output_dir, *inputs_dir, *reference_dir;
    const char *out; /* ak bench --out DIR: the results line (bench_results.h) */
    long threads, iters, warmup;
    int json, random;
    double tol;
    char *input_args[AK_FEED_MAX]; /* --input name=file, read once the options are valid */
    size_t n_input_args;
    ak_feed feed;
} infer_args;

static const char *parse_input(void *dest, char *value, ak_opt_more *more) {
    infer_args *a = dest;
    (void)more;
    const char *eq = strchr(value, '=');
    if (!eq || eq == value || !eq[1]) return "want name=file.npy (or .pb)";
    if (a->n_input_args == AK_FEED_MAX) return "too many inputs";
    a->input_args[a->n_input_args++] = value;
    return NULL;
}

static const char *parse_dim(void *dest, char *value, ak_opt_more *more) {
    ak_feed *f = dest;
    (void)more;
    const char *eq = strchr(value, '=');
    size_t v;
    if (!eq || eq == value || ak_cli_parse_size(eq + 1, &v)) return "want name=value";
    if (f->num_dim_values == 16) return "at most 16 --dim";
    return ak_feed_add_dim(f, value) ? "cannot record it" : NULL;
}

/* The flags of the three commands; each picks its own in infer_flags[] order by letter. */
enum { F_INPUT, F_INPUTS, F_RANDOM, F_DIM, F_OUTPUT_DIR, F_REFERENCE, F_TOL, F_THREADS,
       F_ITERS, F_WARMUP, F_JSON, F_OUT, F_COUNT };

static void infer_flags(infer_args *a, ak_opt all[F_COUNT]) {
    const ak_opt table[F_COUNT] = {
        [F_INPUT] = {"input", 'i', AK_OPT_CUSTOM, a, "NAME=FILE", "feed input NAME from a .npy or .pb file (repeatable)", .parse = parse_input},
        [F_INPUTS] = {"inputs", 0, AK_OPT_STRING, &a->inputs_dir, "DIR", .help = "feed the inputs from DIR: input_K.pb (by position) or NAME.npy"},
        [F_RANDOM] = {"random", 0, AK_OPT_FLAG, &a->random, .help = "make up the inputs not fed (seeded random, declared shapes)"},
        [F_DIM] = {"dim", 0, AK_OPT_CUSTOM, &a->feed, "NAME=N", "value of a symbolic dimension for made-up inputs (repeatable)", .parse = parse_dim},
        [F_OUTPUT_DIR] = {"output-dir", 'o', AK_OPT_STRING, &a->output_dir, "DIR", .help = "write each output as DIR/NAME.npy"},
        [F_REFERENCE] = {"reference", 0, AK_OPT_STRING, &a->reference_dir, "DIR", .help = "reference outputs: output_K.pb (by position) or NAME.npy (required)"},
        [F_TOL] = {"tol", 0, AK_OPT_DOUBLE, &a->tol, "X", .help = "largest max-norm relative error that passes", .def = "1e-4", .min = 0, .max = HUGE_VAL},
        [F_THREADS] = {"threads", 't', AK_OPT_INT, &a->threads, "N", .help = "threads (0: AK_NUM_THREADS or all cores)", .min = 0, .max = 4096},
        [F_ITERS] = {"iters", 'n', AK_OPT_INT, &a->iters, "N", .help = "timed runs", .def = "50", .min = 1, .max = 1000000000},
        [F_WARMUP] = {"warmup", 'w', AK_OPT_INT, &a->warmup, "N", .help = "untimed runs first", .def = "5", .min = 0, .max = 10000000},
        [F_JSON] = {"json", 0, AK_OPT_FLAG, &a->json, .help = "one JSON object instead of text"},
        [F_OUT] = {"out", 0, AK_OPT_STRING, &a->out, "DIR", .help = "append the result as a JSON line to DIR/infer.jsonl (none: do not)", .def = AK_BENCH_OUT_DEFAULT},
    };
    memcpy(all, table, sizeof table);
}

/* Parses the flags in `which` (F_* indices, -1 ends) and the one model operand; returns
 * AK_CLI_CONTINUE or an exit code. */
static int parse_infer_args(const ak_cli_cmd *base, const int *which, int argc, char **argv,
                            infer_args *a) {
    ak_opt all[F_COUNT], opts[F_COUNT + 1];
    infer_flags(a, all);
    if (base->usage) /* ak bench MODEL: one thread unless told (figures compare per core) */
        all[F_THREADS].help = "threads (default: AK_NUM_THREADS, else 1)";
    size_t n = 0;
    for (; which[n] >= 0; n++) opts[n] = all[which[n]];
    opts[n] = (ak_opt)AK_OPT_END;
    ak_cli_cmd cmd = *base;
    cmd.opts = opts;
    int first, rc = ak_cli_parse(&cmd, argc, argv, &first);
    if (rc != AK_CLI_CONTINUE) return rc;
    if (first == argc) return ak_cli_usage_error(&cmd, "no model given");
    if (argc - first > 1) return ak_cli_usage_error(&cmd, "one model only ('%s' and '%s')", argv[first], argv[first + 1]);
    a->model = argv[first];
    for (size_t i = 0; i < a->n_input_args; i++)
        if (ak_feed_add_file(&a->feed, a->input_args[i])) return AK_EXIT_ERROR;
    return AK_CLI_CONTINUE;
}

static int open_session(const infer_args *a, ak_model *m, ak_session **s) {
    ak_session_options o;
    ak_session_options_init(&o);
    o.threads = (int)a->threads;
    ak_status st = ak_session_create(m, &o, s);
    return st == AK_OK ? 0 : (ak_cli_report(a->model, st), -1);
}

static int run_once(const infer_args *a, ak_session *s, ak_tensor *outs, size_t nout) {
    ak_status st = ak_session_run(s, a->feed.names, a->feed.tensors, a->feed.n, NULL, outs, nout);
    return st == AK_OK ? 0 : (ak_cli_report("run", st), -1);
}

static size_t numel(const ak_tensor *t) {
    size_t n = 1;
    for (int i = 0; i < t->rank; i++) n *= (size_t)t->dims[i];
    return n;
}

static double value_at(const ak_tensor *t, size_t i) {
    switch (t->type) {
    case AK_ELEM_F32: return ((const float *)t->data)[i];
    case AK_ELEM_F64: return ((const double *)t->data)[i];
    case AK_ELEM_I64: return (double)((const int64_t *)t->data)[i];
    case AK_ELEM_I32: return ((const int32_t *)t->data)[i];
    case AK_ELEM_U8: case AK_ELEM_BOOL: return ((const uint8_t *)t->data)[i];
    case AK_ELEM_I8: return ((const int8_t *)t->data)[i];
    case AK_ELEM_F16: {
        float f;
        ak_f16_to_f32(&f, (const uint16_t *)t->data + i, 1);
        return f;
    }
    default: return NAN;
    }
}

static void print_tensor_line(const char *name, const ak_tensor *t) {
    printf("  %-20s %s [", name, ak_elem_type_name(t->type));
    for (int i = 0; i < t->rank; i++) printf(i ? ", %lld" : "%lld", (long long)t->dims[i]);
    printf("]");
    size_t n = numel(t);
    for (size_t i = 0; i < n && i < 5; i++) {
        if (t->type == AK_ELEM_STRING) { /* quoted, at most 40 bytes each */
            const ak_string *e = &((const ak_string *)t->data)[i];
            printf(" \"%.*s%s\"", (int)(e->len < 40 ? e->len : 40), e->data ? e->data : "",
                   e->len > 40 ? "..." : "");
        } else {
            printf(i ? " %.6g" : "  %.6g", value_at(t, i));
        }
    }
    printf(n > 5 ? " ...\n" : "\n");
}

/* ---- ak run ----------------------------------------------------------------------- */

static int write_outputs(const char *dir, const ak_model *m, const ak_tensor *outs, size_t n) {
    mkdir(dir, 0755);
    for (size_t i = 0; i < n; i++) {
        ak_value_info info;
        ak_model_output(m, i, &info);
        char file[1024];
        snprintf(file, sizeof file, "%s/%s.npy", dir, info.name);
        for (char *p = file + strlen(dir) + 1; *p; p++)
            if (*p == '/') *p = '_';
        ak_status st = ak_tensor_save_npy(file, &outs[i]);
        if (st != AK_OK) {
            ak_cli_report(file, st);
            return -1;
        }
        printf("wrote %s\n", file);
    }
    return 0;
}

int ak_cli_run(int argc, char **argv) {
    static const int which[] = {F_INPUT, F_INPUTS, F_RANDOM, F_DIM, F_OUTPUT_DIR, F_THREADS, -1};
    static const ak_cli_cmd cmd = {.name = "run"};
    infer_args a = {0};
    ak_model *m = NULL;
    ak_session *s = NULL;
    ak_tensor outs[AK_FEED_MAX];
    int rc = parse_infer_args(&cmd, which, argc, argv, &a);
    if (rc != AK_CLI_CONTINUE) goto done;
    rc = AK_EXIT_ERROR;
    if (ak_feed_load_model(a.model, &m)) goto done;
    if (a.inputs_dir && ak_feed_add_dir(&a.feed, m, a.inputs_dir, "input")) goto done;
    if (a.random && ak_feed_fill_random(&a.feed, m, 42)) goto done;
    ak_model_summary sum;
    ak_model_get_summary(m, &sum);
    if (sum.num_outputs > AK_FEED_MAX || open_session(&a, m, &s) || run_once(&a, s, outs, sum.num_outputs))
        goto done;
    printf("outputs\n");
    for (size_t i = 0; i < sum.num_outputs; i++) {
        ak_value_info info;
        ak_model_output(m, i, &info);
        print_tensor_line(info.name, &outs[i]);
    }
    rc = a.output_dir && write_outputs(a.output_dir, m, outs, sum.num_outputs) ? AK_EXIT_ERROR : AK_EXIT_OK;
done:
    ak_session_free(s);
    ak_model_free(m);
    ak_feed_free(&a.feed);
    return rc;
}

/* ---- ak compare --------------------------------------------------------------------- */

typedef struct diff {
    double max_abs, max_rel, cosine;
    int shape_ok;
} diff;

/* max_rel is max|got - ref| / max|ref| (the max-norm relative error). */
/* Strings have no distance: any differing element (or a type that is not STRING on both
 * sides) is an infinite error and cosine 0; all equal is 0 and 1. */
static diff measure_strings(const ak_tensor *got, const ak_tensor *ref, diff d) {
    int same = got->type == ref->type;
    for (size_t i = 0, n = numel(ref); same && i < n; i++) {
        const ak_string *x = &((const ak_string *)got->data)[i];
        const ak_string *y = &((const ak_string *)ref->data)[i];
        same = x->len == y->len && (!x->len || !memcmp(x->data, y->data, x->len));
    }
    d.max_abs = d.max_rel = same ? 0 : INFINITY;
    d.cosine = same;
    return d;
}

static diff measure(const ak_tensor *got, const ak_tensor *ref) {
    diff d = {0, 0, 1, got->rank == ref->rank && numel(got) == numel(ref)};
    for (int i = 0; d.shape_ok && i < got->rank; i++) d.shape_ok = got->dims[i] == ref->dims[i];
    if (!d.shape_ok) return d;
    if (got->type == AK_ELEM_STRING || ref->type == AK_ELEM_STRING) return measure_strings(got, ref, d);
    double ref_max = 0, dot = 0, ng = 0, nr = 0;
    for (size_t i = 0, n = numel(ref); i < n; i++) {
        double x = value_at(got, i), y = value_at(ref, i), e = fabs(x - y);
        if (isnan(x) != isnan(y)) e = INFINITY;
        else if (isnan(x)) e = 0;
        if (e > d.max_abs) d.max_abs = e;
        if (fabs(y) > ref_max) ref_max = fabs(y);
        dot += x * y, ng += x * x, nr += y * y;
    }
    d.max_rel = ref_max > 0 ? d.max_abs / ref_max : d.max_abs;
    d.cosine = ng > 0 && nr > 0 ? dot / sqrt(ng * nr) : (ng == nr ? 1 : 0);
    return d;
}

static void print_compare_row(cJSON *rows, const char *name, const diff *d, int ok) {
    if (!rows) {
        printf("%-20s %-12.4g %-12.4g %-11.8f %s%s\n", name, d->max_abs, d->max_rel, d->cosine,
               ok ? "pass" : "FAIL", d->shape_ok ? "" : " (shape differs)");
        return;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "name", ak_cli_json_text(name));
    cJSON_AddNumberToObject(o, "max_abs", d->max_abs);
    cJSON_AddNumberToObject(o, "max_rel", d->max_rel);
    cJSON_AddNumberToObject(o, "cosine", d->cosine);
    cJSON_AddBoolToObject(o, "pass", ok);
    cJSON_AddItemToArray(rows, o);
}

static int compare_outputs(const infer_args *a, const ak_model *m, const ak_tensor *outs, size_t n) {
    ak_feed ref = {0};
    int failed = 0;
    if (ak_feed_add_dir(&ref, m, a->reference_dir, "output")) return -1;
    cJSON *root = NULL, *rows = NULL;
    if (a->json) {
        root = cJSON_CreateObject();
        cJSON_AddItemToObject(root, "model", ak_cli_json_text(a->model));
        cJSON_AddNumberToObject(root, "tolerance", a->tol);
        rows = cJSON_AddArrayToObject(root, "outputs");
    } else {
        printf("output               max_abs      max_rel      cosine      result (tolerance %g, max-norm relative)\n", a->tol);
    }
    for (size_t i = 0; i < n; i++) {
        ak_value_info info;
        ak_model_output(m, i, &info);
        size_t k = 0; /* references by name (.npy) or position (output_K.pb) */
        while (k < ref.n && strcmp(ref.names[k], info.name) != 0) k++;
        if (k == ref.n && i < ref.n && ref.files[i]) k = i;
        if (k == ref.n) {
            ak_cli_error("no reference for output '%s'", info.name);
            ak_feed_free(&ref);
            cJSON_Delete(root);
            return -1;
        }
        diff d = measure(&outs[i], &ref.tensors[k]);
        int ok = d.shape_ok && outs[i].type == ref.tensors[k].type && d.max_rel <= a->tol;
        failed += !ok;
        print_compare_row(rows, info.name, &d, ok);
    }
    ak_feed_free(&ref);
    if (root) {
        cJSON_AddBoolToObject(root, "pass", !failed);
        if (ak_cli_print_json(root)) return -1;
    }
    return failed ? 1 : 0;
}

int ak_cli_compare(int argc, char **argv) {
    static const int which[] = {F_INPUTS, F_INPUT, F_DIM, F_REFERENCE, F_TOL, F_THREADS, F_JSON, -1};
    static const ak_cli_cmd cmd = {.name = "compare"};
    infer_args a = {0};
    ak_model *m = NULL;
    ak_session *s = NULL;
    ak_tensor outs[AK_FEED_MAX];
    int rc = parse_infer_args(&cmd, which, argc, argv, &a);
    if (rc != AK_CLI_CONTINUE) goto done;
    if (!a.reference_dir) {
        rc = ak_cli_usage_error(&cmd, "--reference DIR is required");
        goto done;
    }
    rc = AK_EXIT_ERROR;
    if (ak_feed_load_model(a.model, &m)) goto done;
    if (a.inputs_dir && ak_feed_add_dir(&a.feed, m, a.inputs_dir, "input")) goto done;
    ak_model_summary sum;
    ak_model_get_summary(m, &sum);
    if (sum.num_outputs > AK_FEED_MAX || open_session(&a, m, &s) || run_once(&a, s, outs, sum.num_outputs))
        goto done;
    int r = compare_outputs(&a, m, outs, sum.num_outputs);
    rc = r < 0 ? AK_EXIT_ERROR : r ? AK_EXIT_FAIL : AK_EXIT_OK;
done:
    ak_session_free(s);
    ak_model_free(m);
    ak_feed_free(&a.feed);
    return rc;
}

/* ---- ak bench MODEL ----------------------------------------------------------------- */

static int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static double quantile(const double *sorted, size_t n, double q) {
    size_t i = (size_t)(q * (double)n);
    return sorted[i < n ? i : n - 1];
}

static void print_profile(const ak_session *s) {
    size_t n;
    if (ak_session_profile(s, 0, NULL, &n) != AK_OK || !n) return;
    uint64_t total = 0;
    ak_op_profile p;
    for (size_t i = 0; i < n; i++) ak_session_profile(s, i, &p, &n), total += p.total_ns;
    if (!total) return; /* profiling off (AK_PROFILE=1 turns it on) */
    printf("\nop type               nodes    calls     total ms     share\n");
    for (size_t i = 0; i < n; i++) {
        ak_session_profile(s, i, &p, &n);
        printf("%-20s %6zu %8llu %12.3f %8.1f%%\n", p.op_type, p.nodes, (unsigned long long)p.calls,
               p.total_ns / 1e6, total ? 100.0 * (double)p.total_ns / (double)total : 0.0);
    }
}

static int print_bench_json(const infer_args *a, const ak_session_memory *mem, double load_ms,
                            const double *ts, double mean) {
    size_t n = (size_t)a->iters;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "engine", "accelkit " AK_VERSION_STRING);
    cJSON_AddItemToObject(o, "model", ak_cli_json_text(a->model));
    cJSON_AddNumberToObject(o, "threads", (double)a->threads);
    cJSON_AddNumberToObject(o, "iters", (double)a->iters);
    ak_cli_json_round(o, "load_ms", load_ms, 1);
    ak_cli_json_round(o, "p50_ms", quantile(ts, n, 0.5), 3);
    ak_cli_json_round(o, "p90_ms", quantile(ts, n, 0.9), 3);
    ak_cli_json_round(o, "p99_ms", quantile(ts, n, 0.99), 3);
    ak_cli_json_round(o, "mean_ms", mean, 3);
    ak_cli_json_round(o, "throughput_per_s", 1000.0 / mean, 2);
    cJSON_AddNumberToObject(o, "arena_bytes", (double)mem->arena_bytes);
    return ak_cli_print_json(o) ? AK_EXIT_ERROR : AK_EXIT_OK;
}

/* With AK_PROFILE=1: one infer.profile line per operator type, its time per run in ms
 * (its nodes' time over every timed and warm-up run, divided by the runs). */
static void record_profile(ak__bench_out *out, const infer_args *a, const ak_session *s,
                           const char *model) {
    size_t n;
    ak_op_profile p;
    if (ak_session_profile(s, 0, NULL, &n) != AK_OK) return;
    for (size_t i = 0; i < n; i++) {
        if (ak_session_profile(s, i, &p, &n) != AK_OK || !p.total_ns || !p.nodes) continue;
        double runs = (double)p.calls / (double)p.nodes;
        cJSON *params = cJSON_CreateObject(), *figures = cJSON_CreateObject();
        cJSON_AddItemToObject(params, "model", ak_cli_json_text(model));
        cJSON_AddNumberToObject(params, "threads", (double)a->threads);
        cJSON_AddItemToObject(params, "op", ak_cli_json_text(p.op_type));
        ak_cli_json_round(figures, "ms", (double)p.total_ns / 1e6 / runs, 4);
        cJSON_AddNumberToObject(figures, "nodes", (double)p.nodes);
        ak__bench_out_add(out, "infer.profile", NULL, NULL, params, figures);
    }
}

/* The infer.latency line: the model by its file name, latencies in ms (and the
 * infer.profile lines when profiling is on). */
static int record_bench(const infer_args *a, const ak_session *s, double load_ms,
                        const double *ts, double mean) {
    ak__bench_out out;
    int rc = ak__bench_out_open(&out, a->out, "infer", 0, 0);
    if (rc || !out.file) return rc;
    size_t n = (size_t)a->iters;
    char name[256];
    const char *base = strrchr(a->model, '/') ? strrchr(a->model, '/') + 1 : a->model;
    snprintf(name, sizeof name, "%s", base);
    if (strlen(name) > 5 && !strcmp(name + strlen(name) - 5, ".onnx")) name[strlen(name) - 5] = '\0';
    cJSON *params = cJSON_CreateObject(), *figures = cJSON_CreateObject();
    cJSON_AddItemToObject(params, "model", ak_cli_json_text(name));
    cJSON_AddNumberToObject(params, "threads", (double)a->threads);
    cJSON_AddNumberToObject(params, "iters", (double)a->iters);
    ak_cli_json_round(figures, "p50_ms", quantile(ts, n, 0.5), 3);
    ak_cli_json_round(figures, "p90_ms", quantile(ts, n, 0.9), 3);
    ak_cli_json_round(figures, "p99_ms", quantile(ts, n, 0.99), 3);
    ak_cli_json_round(figures, "mean_ms", mean, 3);
    ak_cli_json_round(figures, "load_ms", load_ms, 1);
    ak__bench_out_add(&out, "infer.latency", NULL, NULL, params, figures);
    record_profile(&out, a, s, name);
    ak__bench_out_close(&out);
    return 0;
}

static int print_bench(const infer_args *a, const ak_session *s, double load_ms, double *ts) {
    qsort(ts, (size_t)a->iters, sizeof *ts, cmp_double);
    double mean = 0;
    for (long i = 0; i < a->iters; i++) mean += ts[i] / (double)a->iters;
    size_t n = (size_t)a->iters;
    if (record_bench(a, s, load_ms, ts, mean)) return AK_EXIT_ERROR;
    ak_session_memory mem;
    ak_session_get_memory(s, &mem);
    if (a->json) return print_bench_json(a, &mem, load_ms, ts, mean);
    printf("model        %s\nthreads      %ld\nload         %.1f ms\n", a->model, a->threads, load_ms);
    printf("latency      p50 %.3f ms   p90 %.3f ms   p99 %.3f ms   mean %.3f ms  (%ld runs, %ld warm-up)\n",
           quantile(ts, n, 0.5), quantile(ts, n, 0.9), quantile(ts, n, 0.99), mean, a->iters, a->warmup);
    printf("throughput   %.2f inferences/s\n", 1000.0 / mean);
    printf("memory       arena %.2f MiB (%.2f MiB without reuse), %zu nodes folded\n",
           mem.arena_bytes / 1048576.0, mem.naive_bytes / 1048576.0, mem.num_folded);
    print_profile(s);
    return AK_EXIT_OK;
}

const char ak__bench_model_summary[] =
    "load time, latency p50/p90/p99, throughput of an ONNX model on made-up or given inputs "
    "(AK_PROFILE=1 adds time per operator type)";

int ak_bench_model(int argc, char **argv) {
    static const int which[] = {F_THREADS, F_ITERS, F_WARMUP, F_DIM, F_INPUT, F_JSON, F_OUT, -1};
    static const ak_cli_cmd cmd = {.name = "bench", .usage = "ak bench MODEL.onnx [options]",
                                   .summary = ak__bench_model_summary};
    infer_args a = {.threads = ak_cli_bench_threads()};
    ak_model *m = NULL;
    ak_session *s = NULL;
    ak_tensor outs[AK_FEED_MAX];
    double *ts = NULL;
    ak_cli_progress progress;
    int rc = parse_infer_args(&cmd, which, argc, argv, &a);
    if (rc != AK_CLI_CONTINUE) goto done;
    rc = AK_EXIT_ERROR;
    uint64_t t0 = ak_now_ns();
    if (ak_feed_load_model(a.model, &m) || open_session(&a, m, &s)) goto done;
    double load_ms = (double)(ak_now_ns() - t0) / 1e6;
    ak_model_summary sum;
    ak_model_get_summary(m, &sum);
    if (ak_feed_fill_random(&a.feed, m, 42) || sum.num_outputs > AK_FEED_MAX) goto done;
    ts = calloc((size_t)a.iters, sizeof *ts);
    for (long i = 0; i < a.warmup; i++)
        if (run_once(&a, s, outs, sum.num_outputs)) goto done;
    ak_cli_progress_begin(&progress, "ak bench: timing");
    for (long i = 0; ts && i < a.iters; i++) {
        uint64_t t = ak_now_ns();
        if (run_once(&a, s, outs, sum.num_outputs)) {
            ak_cli_progress_end(&progress);
            goto done;
        }
        ts[i] = (double)(ak_now_ns() - t) / 1e6;
        ak_cli_progress_update(&progress, (double)(i + 1) / (double)a.iters, NULL);
    }
    ak_cli_progress_end(&progress);
    if (!ts) goto done;
    rc = print_bench(&a, s, load_ms, ts);
done:
    free(ts);
    ak_session_free(s);
    ak_model_free(m);
    ak_feed_free(&a.feed);
    return rc;
}
