/* ONNX conformance runner: every test folder of the ONNX backend suites (model.onnx +
 * test_data_set_N/{input,output}_K.pb) is loaded, run and compared with the reference
 * outputs at the suite's tolerance (rtol 1e-3, atol 1e-7; integers and bools exact).
 * Sequence and optional values (SequenceProto / OptionalProto files) are read packed
 * (ak_value_load_pb) and compared element by element.
 * Prints pass / fail / unsupported per test with the reason, totals per suite, and at the
 * end the pass rate per operator family (the folder of src/infer/ops/ whose registry
 * table holds the operator a test exercises).
 *
 *   onnx_conformance [--filter SUBSTR] [--verbose] [--quiet] [--threads N]
 *                    [--expected FILE] [--write-expected FILE] [DIR...]
 *
 * DIR is a suite (a folder of test_* folders) or one test folder; by default the four
 * suites of Debian's libonnx-testdata. Each test runs in a child process, so a crash or
 * a sanitizer report fails that test and the run goes on. --expected FILE lists tests
 * (suite/test_name) that must pass: the exit status is 1 when one of them does not. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "accelkit/infer.h"
#include "accelkit/kernels.h"
#include "infer/runtime/op.h"

#define DEFAULT_ROOT "/usr/share/libonnx-testdata/data"
#define MAX_IO 64
#define TEST_TIMEOUT_S 60

enum verdict { PASS = 0, FAIL = 1, UNSUPPORTED = 2 };
static const char *verdict_name[] = {"pass", "fail", "unsupported"};

typedef struct options {
    const char *filter, *expected, *write_expected;
    int verbose, quiet, threads;
} options;

/* ---- running one test (in the child) ------------------------------------------------ */

/* dir + "/" + name into out; 0 when it fits. */
static int join(char *out, size_t size, const char *dir, const char *name) {
    int n = snprintf(out, size, "%s/%s", dir, name);
    return n < 0 || (size_t)n >= size ? -1 : 0;
}

typedef struct loaded {
    ak_tensor_file *files[MAX_IO];
    size_t n;
} loaded;

static void loaded_free(loaded *l) {
    for (size_t i = 0; i < l->n; i++) ak_tensor_file_free(l->files[i]);
    l->n = 0;
}

/* The declared kind of model input (or output) i: sequences and optionals are read from
 * SequenceProto / OptionalProto files and cross the API packed. */
static ak_value_kind declared_kind(const ak_model *m, int output, size_t i) {
    ak_value_info info;
    ak_status st = output ? ak_model_output(m, i, &info) : ak_model_input(m, i, &info);
    return st == AK_OK && info.kind != AK_VALUE_UNKNOWN ? info.kind : AK_VALUE_TENSOR;
}

/* Reads prefix_0.pb, prefix_1.pb ... until one is missing. */
static int load_series(const char *dir, const char *prefix, const ak_model *m, loaded *l,
                       char *why, size_t wn) {
    int output = strcmp(prefix, "output") == 0;
    for (l->n = 0; l->n < MAX_IO; l->n++) {
        char path[4096], file[64];
        snprintf(file, sizeof file, "%s_%zu.pb", prefix, l->n);
        if (join(path, sizeof path, dir, file) || access(path, F_OK) != 0) break;
        if (ak_value_load_pb(path, declared_kind(m, output, l->n), &l->files[l->n]) != AK_OK) {
            snprintf(why, wn, "%s_%zu.pb: %s", prefix, l->n, ak_last_error());
            return -1;
        }
    }
    return 0;
}

static int elem_is_float(ak_elem_type t) {
    return t == AK_ELEM_F32 || t == AK_ELEM_F64 || t == AK_ELEM_F16 || t == AK_ELEM_BF16;
}

static double elem(const ak_tensor *t, size_t i) {
    switch (t->type) {
    case AK_ELEM_F32: return ((const float *)t->data)[i];
    case AK_ELEM_F64: return ((const double *)t->data)[i];
    case AK_ELEM_I64: return (double)((const int64_t *)t->data)[i];
    case AK_ELEM_I32: return ((const int32_t *)t->data)[i];
    case AK_ELEM_I16: return ((const int16_t *)t->data)[i];
    case AK_ELEM_I8: return ((const int8_t *)t->data)[i];
    case AK_ELEM_U8: case AK_ELEM_BOOL: return ((const uint8_t *)t->data)[i];
    case AK_ELEM_U16: return ((const uint16_t *)t->data)[i];
    case AK_ELEM_U32: return ((const uint32_t *)t->data)[i];
    case AK_ELEM_U64: return (double)((const uint64_t *)t->data)[i];
    case AK_ELEM_F16: case AK_ELEM_BF16: {
        float f;
        uint16_t h = ((const uint16_t *)t->data)[i];
        if (t->type == AK_ELEM_F16) ak_f16_to_f32(&f, &h, 1);
        else ak_bf16_to_f32(&f, &h, 1);
        return f;
    }
    default: return 0;
    }
}

static size_t numel(const ak_tensor *t) {
    size_t n = 1;
    for (int i = 0; i < t->rank; i++) n *= (size_t)t->dims[i];
    return n;
}

/* 0 when got matches want at the suite's tolerance; else a reason in why. */
static int compare(const ak_tensor *got, const ak_tensor *want, size_t k, char *why, size_t wn) {
    if (got->type != want->type) {
        snprintf(why, wn, "output %zu has type %s, expected %s", k, ak_elem_type_name(got->type),
                 ak_elem_type_name(want->type));
        return -1;
    }
    int same_rank = got->rank == want->rank;
    for (int i = 0; same_rank && i < got->rank; i++)
        if (got->dims[i] != want->dims[i]) same_rank = 0;
    if (!same_rank) {
        snprintf(why, wn, "output %zu has a different shape (rank %d vs %d)", k, got->rank,
                 want->rank);
        return -1;
    }
    size_t n = numel(want);
    if (want->type == AK_ELEM_STRING) /* byte for byte */
        for (size_t i = 0; i < n; i++) {
            const ak_string *a = &((const ak_string *)got->data)[i];
            const ak_string *b = &((const ak_string *)want->data)[i];
            if (a->len == b->len && (!a->len || !memcmp(a->data, b->data, a->len))) continue;
            snprintf(why, wn, "output %zu differs at element %zu: \"%.*s\", expected \"%.*s\"",
                     k, i, (int)(a->len < 60 ? a->len : 60), a->data ? a->data : "",
                     (int)(b->len < 60 ? b->len : 60), b->data ? b->data : "");
            return -1;
        }
    int fl = elem_is_float(want->type);
    for (size_t i = 0; i < n; i++) {
        double a = elem(got, i), b = elem(want, i);
        if (fl && isnan(a) && isnan(b)) continue;
        if (a == b) continue;
        if (fl && fabs(a - b) <= 1e-7 + 1e-3 * fabs(b)) continue;
        if (want->type == AK_ELEM_I64 &&
            ((const int64_t *)got->data)[i] == ((const int64_t *)want->data)[i])
            continue;
        snprintf(why, wn, "output %zu differs at element %zu: %.9g, expected %.9g", k, i, a, b);
        return -1;
    }
    return 0;
}

/* Compares a sequence or optional output: an empty optional must be empty, a sequence
 * must have as many elements, each compared as a tensor. */
static int compare_value(const ak_tensor *got, const ak_tensor *want, size_t k, char *why,
                         size_t wn) {
    ak_value_kind kw = ak_value_kind_of(want), kg = ak_value_kind_of(got);
    if (kw == AK_VALUE_TENSOR && kg == AK_VALUE_TENSOR) return compare(got, want, k, why, wn);
    if (kw != kg) {
        static const char *kinds[] = {"a tensor", "a sequence", "a map", "an empty optional"};
        snprintf(why, wn, "output %zu is %s, expected %s", k, kinds[kg], kinds[kw]);
        return -1;
    }
    if (kw == AK_VALUE_OPTIONAL) return 0;
    size_t ng, nw;
    ak_sequence_length(got, &ng, NULL);
    ak_sequence_length(want, &nw, NULL);
    if (ng != nw) {
        snprintf(why, wn, "output %zu has %zu sequence elements, expected %zu", k, ng, nw);
        return -1;
    }
    for (size_t i = 0; i < nw; i++) {
        ak_tensor g, w;
        ak_sequence_at(got, i, &g);
        ak_sequence_at(want, i, &w);
        if (compare(&g, &w, k, why, wn)) {
            size_t len = strlen(why);
            snprintf(why + len, wn - len, " (sequence element %zu)", i);
            return -1;
        }
    }
    return 0;
}

static enum verdict status_verdict(ak_status st) {
    return st == AK_ERR_UNSUPPORTED ? UNSUPPORTED : FAIL;
}

/* Whether the model draws random numbers (Bernoulli, Random*, Multinomial, Dropout in
 * training mode): the reference values are numpy's draws, which no other generator
 * reproduces, so only types and shapes can agree. */
static int draws_random(const ak_model *m) {
    static const char *const ops[] = {"Bernoulli", "RandomNormal", "RandomUniform",
                                      "RandomNormalLike", "RandomUniformLike", "Multinomial",
                                      "Dropout"};
    ak_model_summary sum;
    ak_model_get_summary(m, &sum);
    for (size_t i = 0; i < sum.num_op_types; i++) {
        const char *op;
        size_t count;
        if (ak_model_op_count(m, i, &op, &count) != AK_OK) continue;
        for (size_t k = 0; k < sizeof ops / sizeof *ops; k++)
            if (!strcmp(op, ops[k])) return 1;
    }
    return 0;
}

static enum verdict run_data_set(ak_session *s, const ak_model *m, const char *dir, char *why,
                                 size_t wn) {
    loaded in = {0}, out = {0};
    enum verdict v = FAIL;
    const char *names[MAX_IO];
    ak_tensor inputs[MAX_IO], outputs[MAX_IO];
    ak_model_summary sum;
    ak_model_get_summary(m, &sum);
    if (load_series(dir, "input", m, &in, why, wn) ||
        load_series(dir, "output", m, &out, why, wn)) {
        v = ak_last_error()[0] && strstr(why, "not supported") ? UNSUPPORTED : FAIL;
        goto done;
    }
    for (size_t i = 0; i < in.n; i++) {
        const char *name;
        ak_tensor_file_get(in.files[i], &name, &inputs[i]);
        ak_value_info info;
        names[i] = name;
        if (i < sum.num_inputs && ak_model_input(m, i, &info) == AK_OK) {
            if (!name[0] || strcmp(name, info.name) != 0) names[i] = info.name;
            /* ONNX 1.12 wrote bfloat16 test data as uint16 bit patterns */
            if (info.type == AK_ELEM_BF16 && inputs[i].type == AK_ELEM_U16)
                inputs[i].type = AK_ELEM_BF16;
        }
    }
    if (out.n != sum.num_outputs) {
        snprintf(why, wn, "%zu reference outputs for %zu model outputs", out.n, sum.num_outputs);
        goto done;
    }
    ak_status st = ak_session_run(s, names, inputs, in.n, NULL, outputs, out.n);
    if (st != AK_OK) {
        snprintf(why, wn, "run: %s", ak_last_error());
        v = status_verdict(st);
        goto done;
    }
    v = PASS;
    for (size_t k = 0; k < out.n && v == PASS; k++) {
        ak_tensor want;
        ak_tensor_file_get(out.files[k], NULL, &want);
        if (outputs[k].type == AK_ELEM_BF16 && want.type == AK_ELEM_U16) want.type = AK_ELEM_BF16;
        if (compare_value(&outputs[k], &want, k, why, wn)) v = FAIL;
    }
    if (v == FAIL && strstr(why, "differs at element") && draws_random(m)) {
        char was[256];
        snprintf(was, sizeof was, "%s", why);
        snprintf(why, wn, "random values (types and shapes agree; the reference's generator "
                 "differs): %s", was);
        v = UNSUPPORTED;
    }
done:
    loaded_free(&in);
    loaded_free(&out);
    return v;
}

static int is_data_set(const struct dirent *d) {
    return strncmp(d->d_name, "test_data_set_", 14) == 0;
}

/* ---- the operator family a test exercises ------------------------------------------ */

/* an operator no family table defines (the test can only be unsupported) */
#define FAMILY_NONE "(not implemented)"
/* a model that did not load, so its operators are unknown */
#define FAMILY_UNKNOWN "(model not loaded)"

/* The family whose table defines op ("Conv", or "domain:Op" as ak_model_op_count says). */
static const char *op_family(const char *op) {
    const char *colon = strchr(op, ':');
    char domain[128] = "";
    if (colon && (size_t)(colon - op) < sizeof domain) memcpy(domain, op, (size_t)(colon - op));
    const char *family = ak__op_family_of(domain, colon ? colon + 1 : op);
    return family ? family : FAMILY_NONE;
}

/* Position of a family name in the registry's order (after them: the tests of no family). */
static size_t family_rank(const char *name) {
    size_t f = 0;
    for (; f < ak__op_family_count(); f++)
        if (strcmp(ak__op_family_name(f), name) == 0) break;
    return f;
}

/* s lowercased without '_' into out (test names spell ReduceSum "reduce_sum"). */
static void squash(char *out, size_t size, const char *s) {
    size_t n = 0;
    for (; *s && n + 1 < size; s++)
        if (*s != '_') out[n++] = (char)(*s >= 'A' && *s <= 'Z' ? *s - 'A' + 'a' : *s);
    out[n] = '\0';
}

/* The operator a test exercises: of the main graph's operators, the one whose name is
 * the longest prefix of the test's name without "test_" / "operator_"
 * ("test_reduce_sum_keepdims" -> ReduceSum over Identity). When no operator is named
 * (an expanded test names the function its nodes implement; "test_operator_addmm" runs
 * Gemm), the most frequent operator of the graph. */
static const char *tested_op(const ak_model *m, const char *test_dir) {
    const char *base = strrchr(test_dir, '/') ? strrchr(test_dir, '/') + 1 : test_dir;
    if (strncmp(base, "test_", 5) == 0) base += 5;
    if (strncmp(base, "operator_", 9) == 0) base += 9;
    char test[256];
    squash(test, sizeof test, base);
    ak_model_summary sum;
    if (ak_model_get_summary(m, &sum) != AK_OK || sum.num_op_types == 0) return NULL;
    const char *best = NULL, *first = NULL;
    size_t best_len = 0;
    for (size_t i = 0; i < sum.num_op_types; i++) {
        const char *op;
        size_t count;
        if (ak_model_op_count(m, i, &op, &count) != AK_OK) continue;
        if (!first) first = op;
        char name[128];
        const char *colon = strchr(op, ':');
        squash(name, sizeof name, colon ? colon + 1 : op);
        size_t len = strlen(name);
        if (len > best_len && strncmp(test, name, len) == 0) best = op, best_len = len;
    }
    return best ? best : first;
}

/* Writes the test's family as the first line to fd, before anything that could crash. */
static void send_family(int fd, const ak_model *m, const char *dir) {
    const char *op = m ? tested_op(m, dir) : NULL;
    const char *family = !m ? FAMILY_UNKNOWN : op ? op_family(op) : FAMILY_NONE;
    char line[128];
    int n = snprintf(line, sizeof line, "%s\n", family);
    ssize_t w = write(fd, line, (size_t)n);
    (void)w;
}

/* Loads and runs one test; its family goes to family_fd first (see send_family). */
static enum verdict run_test(const char *dir, int threads, int family_fd, char *why,
                             size_t wn) {
    char path[4096];
    if (join(path, sizeof path, dir, "model.onnx")) {
        snprintf(why, wn, "path too long");
        return FAIL;
    }
    ak_model *m;
    ak_status st = ak_onnx_load_file(path, &m);
    send_family(family_fd, st == AK_OK ? m : NULL, dir);
    if (st != AK_OK) {
        snprintf(why, wn, "load: %s", ak_last_error());
        return status_verdict(st);
    }
    ak_session_options o;
    ak_session_options_init(&o);
    o.threads = threads;
    ak_session *s;
    st = ak_session_create(m, &o, &s);
    if (st != AK_OK) {
        snprintf(why, wn, "%s", ak_last_error());
        ak_model_free(m);
        return status_verdict(st);
    }
    struct dirent **sets;
    int n = scandir(dir, &sets, is_data_set, alphasort);
    enum verdict v = n > 0 ? PASS : FAIL;
    if (n <= 0) snprintf(why, wn, "no test_data_set folders");
    for (int i = 0; i < n; i++) {
        if (v == PASS && join(path, sizeof path, dir, sets[i]->d_name)) v = FAIL;
        if (v == PASS) v = run_data_set(s, m, path, why, wn);
        free(sets[i]);
    }
    if (n > 0) free(sets);
    ak_session_free(s);
    ak_model_free(m);
    return v;
}

/* ---- the parent: one child per test ------------------------------------------------- */

/* Moves the family line at the start of text (what the child sent) into family. */
static void split_family(char *text, char *family, size_t fn) {
    char *nl = strchr(text, '\n');
    if (!nl) return;
    *nl = '\0';
    snprintf(family, fn, "%s", text);
    memmove(text, nl + 1, strlen(nl + 1) + 1);
}

/* Runs one test in a child. family (fn bytes) receives the first line the child sent
 * (send_family), FAMILY_UNKNOWN when it sent none; why the rest. */
static enum verdict run_isolated(const char *dir, int threads, char *family, size_t fn,
                                 char *why, size_t wn) {
    snprintf(family, fn, "%s", FAMILY_UNKNOWN);
    int fds[2];
    if (pipe(fds) != 0) {
        snprintf(why, wn, "pipe: %s", strerror(errno));
        return FAIL;
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        alarm(TEST_TIMEOUT_S);
        char reason[1024] = "";
        enum verdict v = run_test(dir, threads, fds[1], reason, sizeof reason);
        ssize_t w = write(fds[1], reason, strlen(reason));
        (void)w;
        _exit((int)v);
    }
    close(fds[1]);
    size_t got = 0;
    ssize_t r;
    while (got + 1 < wn && (r = read(fds[0], why + got, wn - 1 - got)) > 0) got += (size_t)r;
    why[got] = '\0';
    close(fds[0]);
    split_family(why, family, fn);
    int status = 0;
    waitpid(pid, &status, 0);
    if (WIFEXITED(status) && WEXITSTATUS(status) <= UNSUPPORTED) return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        snprintf(why, wn, "crashed: %s", WTERMSIG(status) == SIGALRM ? "timeout"
                                                                     : strsignal(WTERMSIG(status)));
    else snprintf(why, wn, "child exited with %d (sanitizer report?)", WEXITSTATUS(status));
    return FAIL;
}

typedef struct tally {
    size_t n[3];
} tally;

/* Pass counts per operator family over every suite run. */
#define MAX_FAMILIES 32
typedef struct family_tally {
    char names[MAX_FAMILIES][64];
    size_t pass[MAX_FAMILIES], total[MAX_FAMILIES];
    size_t n;
} family_tally;

static family_tally families;

static void count_family(const char *family, enum verdict v) {
    size_t i = 0;
    while (i < families.n && strcmp(families.names[i], family) != 0) i++;
    if (i == families.n) {
        if (families.n == MAX_FAMILIES) return; /* more names than families exist */
        snprintf(families.names[families.n++], sizeof families.names[0], "%s", family);
    }
    families.total[i]++;
    if (v == PASS) families.pass[i]++;
}

/* The table printed at the end: family, passed/total, rate; families in registry order,
 * then the tests of no family. */
static void print_families(void) {
    if (!families.n) return;
    printf("== pass rate per operator family (the folder of src/infer/ops/ of the operator "
           "each test exercises)\n");
    printf("   %-20s %13s %7s\n", "family", "passed/total", "rate");
    for (size_t i = 0; i < families.n; i++)
        printf("   %-20s %6zu/%-6zu %6.1f%%\n", families.names[i], families.pass[i],
               families.total[i], 100.0 * (double)families.pass[i] / (double)families.total[i]);
}

/* Registry order for the table (count_family adds in the order tests are met). */
static void sort_families(void) {
    for (size_t i = 0; i < families.n; i++)
        for (size_t j = i + 1; j < families.n; j++) {
            if (family_rank(families.names[j]) >= family_rank(families.names[i])) continue;
            char name[64];
            size_t p = families.pass[i], t = families.total[i];
            memcpy(name, families.names[i], sizeof name);
            memcpy(families.names[i], families.names[j], sizeof name);
            memcpy(families.names[j], name, sizeof name);
            families.pass[i] = families.pass[j], families.total[i] = families.total[j];
            families.pass[j] = p, families.total[j] = t;
        }
}

typedef struct expectations {
    char **names;
    size_t n;
    int *seen;
} expectations;

static int expected_pass(const expectations *e, const char *id, size_t *index) {
    for (size_t i = 0; i < e->n; i++)
        if (strcmp(e->names[i], id) == 0) {
            *index = i;
            return 1;
        }
    return 0;
}

static int run_suite_dir(const char *root, const options *o, tally *total, expectations *e,
                         FILE *write_to, int *regressions);

static int is_test_dir(const struct dirent *d) { return strncmp(d->d_name, "test_", 5) == 0; }

static void report(const char *id, enum verdict v, const char *why, const options *o,
                   const expectations *e, int *regressions, FILE *write_to) {
    size_t idx;
    int exp = e->n && expected_pass(e, id, &idx);
    if (exp) e->seen[idx] = 1;
    if (exp && v != PASS) (*regressions)++;
    if (write_to && v == PASS) fprintf(write_to, "%s\n", id);
    if (o->quiet && !(exp && v != PASS)) return;
    if (v == PASS && !o->verbose) printf("pass         %s\n", id);
    else printf("%-12s %s%s%s%s\n", verdict_name[v], id, why[0] ? ": " : "", why,
                exp && v != PASS ? "   <-- REGRESSION (expected to pass)" : "");
}

/* A suite: every test_* folder below root (or root itself when it holds model.onnx). */
static int run_suite_dir(const char *root, const options *o, tally *total, expectations *e,
                         FILE *write_to, int *regressions) {
    char path[4096];
    if (join(path, sizeof path, root, "model.onnx") == 0 && access(path, F_OK) == 0) {
        char why[1024], family[64];
        enum verdict v = run_isolated(root, o->threads, family, sizeof family, why, sizeof why);
        count_family(family, v);
        total->n[v]++;
        report(root, v, why, o, e, regressions, write_to);
        return 0;
    }
    const char *suite = strrchr(root, '/') ? strrchr(root, '/') + 1 : root;
    struct dirent **tests;
    int n = scandir(root, &tests, is_test_dir, alphasort);
    if (n < 0) {
        fprintf(stderr, "onnx_conformance: cannot read %s: %s\n", root, strerror(errno));
        return -1;
    }
    tally t = {{0}};
    for (int i = 0; i < n; i++) {
        char id[512], dir[4096], why[1024], family[64];
        int ok = join(id, sizeof id, suite, tests[i]->d_name) == 0 &&
                 join(dir, sizeof dir, root, tests[i]->d_name) == 0;
        free(tests[i]);
        if (!ok) continue;
        if (o->filter && !strstr(id, o->filter)) continue;
        enum verdict v = run_isolated(dir, o->threads, family, sizeof family, why, sizeof why);
        count_family(family, v);
        t.n[v]++;
        report(id, v, why, o, e, regressions, write_to);
    }
    free(tests);
    size_t all = t.n[0] + t.n[1] + t.n[2];
    printf("== %s: %zu tests, %zu pass (%.1f%%), %zu fail, %zu unsupported\n", suite, all,
           t.n[PASS], all ? 100.0 * (double)t.n[PASS] / (double)all : 0.0, t.n[FAIL],
           t.n[UNSUPPORTED]);
    for (int k = 0; k < 3; k++) total->n[k] += t.n[k];
    return 0;
}

static int load_expected(const char *path, expectations *e) {
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "onnx_conformance: cannot read %s: %s\n", path, strerror(errno));
        return -1;
    }
    char line[512];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = '\0';
        if (!line[0] || line[0] == '#') continue;
        e->names = realloc(e->names, (e->n + 1) * sizeof *e->names);
        e->names[e->n++] = strdup(line);
    }
    fclose(f);
    e->seen = calloc(e->n ? e->n : 1, sizeof *e->seen);
    return 0;
}

static int parse_args(int argc, char **argv, options *o, int *first_dir) {
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--verbose")) o->verbose = 1;
        else if (!strcmp(a, "--quiet")) o->quiet = 1;
        else if (!strcmp(a, "--filter") && i + 1 < argc) o->filter = argv[++i];
        else if (!strcmp(a, "--expected") && i + 1 < argc) o->expected = argv[++i];
        else if (!strcmp(a, "--write-expected") && i + 1 < argc) o->write_expected = argv[++i];
        else if (!strcmp(a, "--threads") && i + 1 < argc) o->threads = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: onnx_conformance [--filter S] [--verbose] [--quiet] "
                            "[--threads N] [--expected F] [--write-expected F] [DIR...]\n");
            return -1;
        }
    }
    *first_dir = i;
    return 0;
}

int main(int argc, char **argv) {
    options o = {NULL, NULL, NULL, 0, 0, 1};
    int first;
    if (parse_args(argc, argv, &o, &first)) return 2;
    static const char *defaults[] = {DEFAULT_ROOT "/node", DEFAULT_ROOT "/pytorch-converted",
                                     DEFAULT_ROOT "/pytorch-operator", DEFAULT_ROOT "/simple"};
    const char *const *dirs = first < argc ? (const char *const *)argv + first : defaults;
    int ndirs = first < argc ? argc - first : 4;
    if (first == argc && access(DEFAULT_ROOT, F_OK) != 0) {
        printf("onnx_conformance: %s not installed (Debian libonnx-testdata); skipped\n",
               DEFAULT_ROOT);
        return 77;
    }
    expectations e = {0};
    if (o.expected && load_expected(o.expected, &e)) return 2;
    FILE *w = o.write_expected ? fopen(o.write_expected, "w") : NULL;
    if (w)
        fprintf(w, "# ONNX backend tests that must pass (suite/test), written by\n"
                   "#   build/tests/onnx_conformance --write-expected tests/infer/conformance_expected.txt\n"
                   "# after checking that every change in it is intended. A test missing from here may pass;\n"
                   "# a test listed here that stops passing fails `make test`.\n");
    tally total = {{0}};
    int regressions = 0;
    for (int i = 0; i < ndirs; i++)
        if (run_suite_dir(dirs[i], &o, &total, &e, w, &regressions)) return 2;
    if (w) fclose(w);
    sort_families();
    print_families();
    size_t all = total.n[0] + total.n[1] + total.n[2];
    printf("== total: %zu tests, %zu pass (%.1f%%), %zu fail, %zu unsupported\n", all,
           total.n[PASS], all ? 100.0 * (double)total.n[PASS] / (double)all : 0.0,
           total.n[FAIL], total.n[UNSUPPORTED]);
    if (regressions) printf("== %d expected-to-pass tests did not pass\n", regressions);
    for (size_t i = 0; i < e.n; i++) free(e.names[i]);
    free(e.names);
    free(e.seen);
    return regressions ? 1 : 0;
}
