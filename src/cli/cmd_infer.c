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
#include "cli/cli.h"
#include "cli/infer_feed.h"

typedef struct infer_args {
    const char *model, *output_dir, *inputs_dir, *reference_dir;
    int threads, iters, warmup, json, random;
    double tol;
    ak_feed feed;
} infer_args;

/* Options common to the three commands; returns 0, or -1 after printing why. */
static int parse_infer_args(int argc, char **argv, infer_args *a) {
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        size_t n;
        if (o[0] != '-') {
            if (a->model) return fprintf(stderr, "ak %s: one model only\n", argv[0]), -1;
            a->model = o;
            continue;
        }
        if (!strcmp(o, "--json")) { a->json = 1; continue; }
        if (!strcmp(o, "--random")) { a->random = 1; continue; }
        if (!v) return fprintf(stderr, "ak %s: %s needs a value\n", argv[0], o), -1;
        i++;
        if (!strcmp(o, "--input") || !strcmp(o, "-i")) { if (ak_feed_add_file(&a->feed, v)) return -1; }
        else if (!strcmp(o, "--dim")) { if (ak_feed_add_dim(&a->feed, v)) return -1; }
        else if (!strcmp(o, "--output-dir") || !strcmp(o, "-o")) a->output_dir = v;
        else if (!strcmp(o, "--inputs")) a->inputs_dir = v;
        else if (!strcmp(o, "--reference")) a->reference_dir = v;
        else if (!strcmp(o, "--tol")) a->tol = atof(v);
        else if ((!strcmp(o, "-t") || !strcmp(o, "--threads")) && !ak_cli_parse_size(v, &n)) a->threads = (int)n;
        else if ((!strcmp(o, "-n") || !strcmp(o, "--iters")) && !ak_cli_parse_size(v, &n) && n) a->iters = (int)n;
        else if ((!strcmp(o, "-w") || !strcmp(o, "--warmup")) && !ak_cli_parse_size(v, &n)) a->warmup = (int)n;
        else return fprintf(stderr, "ak %s: bad option %s %s\n", argv[0], o, v), -1;
    }
    if (!a->model) return fprintf(stderr, "ak %s: no model given (ak %s --help)\n", argv[0], argv[0]), -1;
    return 0;
}

static int open_session(const infer_args *a, ak_model *m, ak_session **s) {
    ak_session_options o;
    ak_session_options_init(&o);
    o.threads = a->threads;
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
    for (size_t i = 0; i < n && i < 5; i++) printf(i ? " %.6g" : "  %.6g", value_at(t, i));
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
    infer_args a = {0};
    ak_model *m = NULL;
    ak_session *s = NULL;
    ak_tensor outs[AK_FEED_MAX];
    int rc = AK_EXIT_ERROR;
    if (parse_infer_args(argc, argv, &a) || ak_feed_load_model(a.model, &m)) goto done;
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
static diff measure(const ak_tensor *got, const ak_tensor *ref) {
    diff d = {0, 0, 1, got->rank == ref->rank && numel(got) == numel(ref)};
    for (int i = 0; d.shape_ok && i < got->rank; i++) d.shape_ok = got->dims[i] == ref->dims[i];
    if (!d.shape_ok) return d;
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

static int compare_outputs(const infer_args *a, const ak_model *m, const ak_tensor *outs, size_t n) {
    ak_feed ref = {0};
    int failed = 0;
    if (ak_feed_add_dir(&ref, m, a->reference_dir, "output")) return -1;
    if (a->json) printf("{\"model\": \"%s\", \"tolerance\": %g, \"outputs\": [", a->model, a->tol);
    else printf("output               max_abs      max_rel      cosine      result (tolerance %g, max-norm relative)\n", a->tol);
    for (size_t i = 0; i < n; i++) {
        ak_value_info info;
        ak_model_output(m, i, &info);
        size_t k = 0; /* references by name (.npy) or position (output_K.pb) */
        while (k < ref.n && strcmp(ref.names[k], info.name) != 0) k++;
        if (k == ref.n && i < ref.n && ref.files[i]) k = i;
        if (k == ref.n) {
            fprintf(stderr, "ak compare: no reference for output '%s'\n", info.name);
            ak_feed_free(&ref);
            return -1;
        }
        diff d = measure(&outs[i], &ref.tensors[k]);
        int ok = d.shape_ok && outs[i].type == ref.tensors[k].type && d.max_rel <= a->tol;
        failed += !ok;
        if (a->json)
            printf("%s{\"name\": \"%s\", \"max_abs\": %.6g, \"max_rel\": %.6g, \"cosine\": %.9f, \"pass\": %s}",
                   i ? ", " : "", info.name, d.max_abs, d.max_rel, d.cosine, ok ? "true" : "false");
        else
            printf("%-20s %-12.4g %-12.4g %-11.8f %s%s\n", info.name, d.max_abs, d.max_rel, d.cosine,
                   ok ? "pass" : "FAIL", d.shape_ok ? "" : " (shape differs)");
    }
    if (a->json) printf("], \"pass\": %s}\n", failed ? "false" : "true");
    ak_feed_free(&ref);
    return failed ? 1 : 0;
}

int ak_cli_compare(int argc, char **argv) {
    infer_args a = {.tol = 1e-4};
    ak_model *m = NULL;
    ak_session *s = NULL;
    ak_tensor outs[AK_FEED_MAX];
    int rc = AK_EXIT_ERROR;
    if (parse_infer_args(argc, argv, &a) || ak_feed_load_model(a.model, &m)) goto done;
    if (!a.reference_dir) {
        fprintf(stderr, "ak compare: --reference DIR is required\n");
        goto done;
    }
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

static void print_bench(const infer_args *a, const ak_session *s, double load_ms, double *ts) {
    qsort(ts, (size_t)a->iters, sizeof *ts, cmp_double);
    double mean = 0;
    for (int i = 0; i < a->iters; i++) mean += ts[i] / a->iters;
    size_t n = (size_t)a->iters;
    ak_session_memory mem;
    ak_session_get_memory(s, &mem);
    if (a->json) {
        printf("{\"engine\": \"accelkit %s\", \"model\": \"%s\", \"threads\": %d, \"iters\": %d, "
               "\"load_ms\": %.1f, \"p50_ms\": %.3f, \"p90_ms\": %.3f, \"p99_ms\": %.3f, "
               "\"mean_ms\": %.3f, \"throughput_per_s\": %.2f, \"arena_bytes\": %zu}\n",
               AK_VERSION_STRING, a->model, a->threads, a->iters, load_ms, quantile(ts, n, 0.5),
               quantile(ts, n, 0.9), quantile(ts, n, 0.99), mean, 1000.0 / mean, mem.arena_bytes);
        return;
    }
    printf("model        %s\nthreads      %d\nload         %.1f ms\n", a->model, a->threads, load_ms);
    printf("latency      p50 %.3f ms   p90 %.3f ms   p99 %.3f ms   mean %.3f ms  (%d runs, %d warm-up)\n",
           quantile(ts, n, 0.5), quantile(ts, n, 0.9), quantile(ts, n, 0.99), mean, a->iters, a->warmup);
    printf("throughput   %.2f inferences/s\n", 1000.0 / mean);
    printf("memory       arena %.2f MiB (%.2f MiB without reuse), %zu nodes folded\n",
           mem.arena_bytes / 1048576.0, mem.naive_bytes / 1048576.0, mem.num_folded);
    print_profile(s);
}

int ak_bench_model(int argc, char **argv) {
    infer_args a = {.iters = 50, .warmup = 5, .threads = ak_cli_bench_threads()};
    ak_model *m = NULL;
    ak_session *s = NULL;
    ak_tensor outs[AK_FEED_MAX];
    double *ts = NULL;
    int rc = AK_EXIT_ERROR;
    if (parse_infer_args(argc, argv, &a)) goto done;
    uint64_t t0 = ak_now_ns();
    if (ak_feed_load_model(a.model, &m) || open_session(&a, m, &s)) goto done;
    double load_ms = (double)(ak_now_ns() - t0) / 1e6;
    ak_model_summary sum;
    ak_model_get_summary(m, &sum);
    if (ak_feed_fill_random(&a.feed, m, 42) || sum.num_outputs > AK_FEED_MAX) goto done;
    ts = calloc((size_t)a.iters, sizeof *ts);
    for (int i = 0; i < a.warmup; i++)
        if (run_once(&a, s, outs, sum.num_outputs)) goto done;
    for (int i = 0; ts && i < a.iters; i++) {
        uint64_t t = ak_now_ns();
        if (run_once(&a, s, outs, sum.num_outputs)) goto done;
        ts[i] = (double)(ak_now_ns() - t) / 1e6;
    }
    if (!ts) goto done;
    print_bench(&a, s, load_ms, ts);
    rc = AK_EXIT_OK;
done:
    free(ts);
    ak_session_free(s);
    ak_model_free(m);
    ak_feed_free(&a.feed);
    return rc;
}
