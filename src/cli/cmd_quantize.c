/* `ak quantize IN.onnx OUT.onnx (--calibrate DIR | --dynamic) [options]`: a float32 ONNX
 * model rewritten in INT8 by ak_quantize_model — static QDQ from calibration samples, or
 * dynamic MatMul/Gemm — for accelkit and ONNX Runtime alike.
 *
 * DIR holds the calibration samples in the input layout `ak run --inputs` and
 * `ak compare` read: one sub-folder per sample (test_data_set style input_K.pb, or
 * NAME.npy per model input), or, for a single sample, those files in DIR itself. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accelkit/infer.h"
#include "cli/cli.h"
#include "cli/cli_opts.h"
#include "cli/infer_feed.h"

#define MAX_NAMES 64

typedef struct name_list {
    const char *names[MAX_NAMES];
    size_t n;
} name_list;

/* Comma-separated names, the flag repeatable. */
static const char *parse_names(void *dest, char *value, ak_opt_more *more) {
    (void)more;
    name_list *l = dest;
    for (char *tok = strtok(value, ","); tok; tok = strtok(NULL, ",")) {
        if (l->n == MAX_NAMES) return "more than 64 names";
        l->names[l->n++] = tok;
    }
    return NULL;
}

static int by_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The sample folders under dir, sorted; dir itself when it holds no sub-folder. */
static int sample_dirs(const char *dir, char ***out, size_t *n) {
    DIR *d = opendir(dir);
    if (!d) return ak_cli_error("--calibrate %s: cannot open the folder", dir), -1;
    char **list = NULL;
    size_t count = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        size_t len = strlen(dir) + strlen(e->d_name) + 2;
        char *path = malloc(len);
        char **grown = realloc(list, (count + 1) * sizeof *list);
        if (!path || !grown) {
            free(path);
            free(grown ? grown : list);
            closedir(d);
            return ak_cli_error("out of memory"), -1;
        }
        list = grown;
        snprintf(path, len, "%s/%s", dir, e->d_name);
        DIR *sub = opendir(path);
        if (sub) {
            closedir(sub);
            list[count++] = path;
        } else {
            free(path);
        }
    }
    closedir(d);
    if (count == 0) {
        free(list);
        list = malloc(sizeof *list);
        if (!list || !(list[0] = strdup(dir))) return free(list), ak_cli_error("out of memory"), -1;
        count = 1;
    }
    qsort(list, count, sizeof *list, by_name);
    *out = list;
    *n = count;
    return 0;
}

typedef struct samples {
    ak_feed *feeds;
    size_t n, num_inputs;
    const char **names;
    ak_tensor *tensors; /* n * num_inputs */
} samples;

static void samples_free(samples *s) {
    for (size_t i = 0; s->feeds && i < s->n; i++) ak_feed_free(&s->feeds[i]);
    free(s->feeds);
    free(s->names);
    free(s->tensors);
}

/* Sample k's tensor for every model input (each must be in its folder). */
static int gather(samples *s, size_t k, const char *dir) {
    const ak_feed *f = &s->feeds[k];
    for (size_t i = 0; i < s->num_inputs; i++) {
        size_t j = 0;
        while (j < f->n && strcmp(f->names[j], s->names[i])) j++;
        if (j == f->n)
            return ak_cli_error("--calibrate: %s has no tensor for input '%s' (input_%zu.pb or "
                                "%s.npy)", dir, s->names[i], i, s->names[i]), -1;
        s->tensors[k * s->num_inputs + i] = f->tensors[j];
    }
    return 0;
}

static int load_samples(const char *in, const char *dir, samples *s) {
    ak_model *m;
    if (ak_feed_load_model(in, &m)) return -1;
    ak_model_summary sum;
    ak_model_get_summary(m, &sum);
    char **dirs = NULL;
    size_t nd = 0;
    int rc = sample_dirs(dir, &dirs, &nd);
    if (rc == 0) {
        s->num_inputs = sum.num_inputs;
        s->feeds = calloc(nd, sizeof *s->feeds);
        s->names = calloc(sum.num_inputs + 1, sizeof *s->names);
        s->tensors = calloc(nd * sum.num_inputs + 1, sizeof *s->tensors);
        if (!s->feeds || !s->names || !s->tensors) {
            ak_cli_error("out of memory");
            rc = -1;
        }
    }
    for (size_t i = 0; rc == 0 && i < sum.num_inputs; i++) {
        ak_value_info info;
        ak_model_input(m, i, &info);
        s->names[i] = info.name;
    }
    for (size_t k = 0; rc == 0 && k < nd; k++) {
        s->n = k + 1;
        rc = ak_feed_add_dir(&s->feeds[k], m, dirs[k], "input");
        if (rc == 0) rc = gather(s, k, dirs[k]);
    }
    for (size_t k = 0; k < nd; k++) free(dirs[k]);
    free(dirs);
    /* the names live in the model: keep it until the samples go */
    if (rc == 0) {
        for (size_t i = 0; i < s->num_inputs; i++) s->names[i] = strdup(s->names[i]);
    }
    ak_model_free(m);
    return rc;
}

int ak_cli_quantize(int argc, char **argv) {
    const char *calib = NULL;
    int dynamic = 0, per_channel = 0, method = 0;
    double percentile = 99.99;
    long threads = 0;
    name_list op_types = {{0}, 0}, exclude = {{0}, 0};
    const ak_opt opts[] = {
        {"calibrate", 0, AK_OPT_STRING, &calib, "DIR",
         .help = "static QDQ: calibrate on the samples in DIR (one sub-folder per sample, each "
                 "with input_K.pb or NAME.npy per input, as `ak compare` reads)"},
        {"dynamic", 0, AK_OPT_FLAG, &dynamic,
         .help = "dynamic: MatMul/Gemm -> DynamicQuantizeLinear + MatMulInteger (no calibration)"},
        {"per-channel", 0, AK_OPT_FLAG, &per_channel,
         .help = "one weight scale per output channel (Conv; per column in dynamic MatMul)"},
        {"method", 0, AK_OPT_ENUM, &method, "METHOD", .def = "minmax", .choices = "minmax|percentile",
         .help = "activation ranges: min/max seen, or the central --percentile of the values"},
        {"percentile", 0, AK_OPT_DOUBLE, &percentile, "P", .def = "99.99", .min = 50.001, .max = 100,
         .help = "with --method percentile: the share of values kept inside the range"},
        {"op-types", 0, AK_OPT_CUSTOM, &op_types, "OP,...", .parse = parse_names,
         .help = "operators to quantize (default Conv,MatMul,Gemm)"},
        {"exclude", 0, AK_OPT_CUSTOM, &exclude, "NODE,...", .parse = parse_names,
         .help = "nodes left in float, by name (repeatable)"},
        {"threads", 't', AK_OPT_INT, &threads, "N", .def = "0", .min = 0, .max = 1024,
         .help = "calibration threads (0: AK_NUM_THREADS or all cores)"},
        AK_OPT_END};
    const ak_cli_cmd cmd = {.name = "quantize", .opts = opts};
    int first, rc = ak_cli_parse(&cmd, argc, argv, &first);
    if (rc != AK_CLI_CONTINUE) return rc;
    if (argc - first != 2) return ak_cli_usage_error(&cmd, "want an input and an output model");
    if (!calib == !dynamic) return ak_cli_usage_error(&cmd, "want one of --calibrate DIR or --dynamic");
    const char *in = argv[first], *out = argv[first + 1];
    ak_quantize_options qo;
    ak_quantize_options_init(&qo);
    qo.dynamic = dynamic;
    qo.per_channel = per_channel;
    qo.method = method ? AK_CALIBRATE_PERCENTILE : AK_CALIBRATE_MINMAX;
    qo.percentile = percentile;
    qo.op_types = op_types.names;
    qo.num_op_types = op_types.n;
    qo.exclude = exclude.names;
    qo.num_exclude = exclude.n;
    qo.threads = (int)threads;
    samples s = {0};
    if (calib && load_samples(in, calib, &s)) {
        samples_free(&s);
        return AK_EXIT_ERROR;
    }
    qo.num_samples = s.n;
    qo.num_inputs = s.num_inputs;
    qo.input_names = s.names;
    qo.inputs = s.tensors;
    ak_quantize_report rep;
    ak_status st = ak_quantize_model(in, out, &qo, &rep);
    for (size_t i = 0; calib && i < s.num_inputs; i++) free((void *)s.names[i]);
    samples_free(&s);
    if (st != AK_OK) return ak_cli_report(in, st);
    printf("%s -> %s: %zu nodes quantized (%s", in, out, rep.quantized,
           dynamic ? "dynamic" : "static QDQ");
    if (!dynamic)
        printf(", %zu activations calibrated on %zu samples, %s", rep.calibrated, qo.num_samples,
               method ? "percentile" : "minmax");
    printf(")");
    if (rep.skipped) printf(", %zu left in float (weight not a constant float32 tensor)", rep.skipped);
    printf("\n");
    return AK_EXIT_OK;
}
