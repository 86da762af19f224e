/* Inference backends (src/infer/backends): every available backend (own, OpenBLAS, BLIS, oneDNN)
 * against a double reference on MatMul (2-D, batched with B shared, batch broadcast on
 * either side, 1-D operands), Gemm (every transpose, alpha/beta, each C broadcast) and
 * MatMulBias with an activation, on 1 and 2 threads; a library that is absent is skipped
 * with one log line (a missing file put in the dlopen name's place); AK_INFER_BACKENDS
 * refuses unknown names by name; the tuning cache keeps entries across a save and load
 * and refuses corrupt lines and foreign files with a log line; a BLAS backend leaves no
 * thread spinning after a call. Passes without OpenBLAS, BLIS and oneDNN installed too: then
 * the skip is what is tested for them. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/params.h"
#include "infer/backends/choose.h"
#include "op_harness.h"

/* ---- log capture ---------------------------------------------------------------------- */

static char logged[8192];
static void capture(ak_log_level level, ak_subsys subsys, const char *line, void *user) {
    (void)level, (void)subsys, (void)user;
    size_t n = strlen(logged);
    snprintf(logged + n, sizeof logged - n, "%s\n", line);
}
static void log_start(void) {
    logged[0] = '\0';
    assert_int_equal(ak_log_set_callback(capture, NULL), AK_OK);
    assert_int_equal(ak_log_set_level(AK_LOG_INFO), AK_OK);
    assert_int_equal(ak_log_set_subsystems(0xffffffffu), AK_OK);
}
static void log_stop(void) {
    ak_log_set_callback(NULL, NULL);
    ak_log_set_level(AK_LOG_WARN);
}
static int count_lines_with(const char *text) {
    int n = 0;
    for (const char *p = logged; (p = strstr(p, text)); p++) n++;
    return n;
}

/* ---- running one node on one backend --------------------------------------------------- */

typedef struct node_run {
    op_call c;
    ak__ir_node node;
    const ak__op_def *def;
    void *state;
    ak__tensor *outs[1];
    const ak__tensor *ins[OP_MAX_IO];
} node_run;

/* Sets up the node (create, reshape, an output buffer); run() may then be called per
 * backend. */
static void node_setup(node_run *r, const char *domain, const char *op_type) {
    r->def = ak__op_find(domain, op_type, 13);
    assert_non_null(r->def);
    r->node = (ak__ir_node){.name = "t", .op_type = op_type, .domain = domain, .opset = 13,
                            .num_inputs = r->c.nin, .num_outputs = 1,
                            .num_attrs = r->c.nattr, .attrs = r->c.attrs};
    for (uint32_t i = 0; i < r->c.nin; i++) r->ins[i] = r->c.in[i].type ? &r->c.in[i] : NULL;
    r->outs[0] = &r->c.out[0];
    r->c.nout = 1;
    r->state = NULL;
    if (r->def->create) assert_int_equal(r->def->create(&r->node, r->ins, &r->state), AK_OK);
}

static ak_status node_run_on(node_run *r, int b, ak_threadpool *pool) {
    ak__op_ctx ctx = {.node = &r->node, .state = r->state, .num_inputs = r->c.nin,
                      .num_outputs = 1, .inputs = r->ins, .outputs = r->outs, .pool = pool};
    assert_int_equal(r->def->reshape(&ctx), AK_OK);
    free(r->c.out[0].data);
    size_t nb = ak__tensor_nbytes(&r->c.out[0]);
    r->c.out[0].data = malloc(nb + OP_GUARD);
    assert_non_null(r->c.out[0].data);
    memset(r->c.out[0].data, 0xa5, nb + OP_GUARD); /* NaN-like garbage: must be overwritten */
    ak_status st = ak__infer_backend_run(b, ak__infer_backend_op_of(&r->node), &ctx);
    const unsigned char *g = (const unsigned char *)r->c.out[0].data + nb;
    for (int k = 0; k < OP_GUARD; k++) assert_int_equal(g[k], 0xa5);
    return st;
}

static void node_free(node_run *r) {
    if (r->def->destroy && r->state) r->def->destroy(r->state);
    op_call_free(&r->c);
}

static ak_threadpool *pools[2];

/* Runs r on every available backend and pool, comparing with want (count values). */
static int check_all(node_run *r, const double *want, size_t count, const char *what) {
    int ran = 0;
    for (int b = 0; b < AK_BK_COUNT; b++) {
        if (!ak__infer_backend_get(b)->vt) continue;
        for (int p = 0; p < 2; p++) {
            assert_int_equal(node_run_on(r, b, pools[p]), AK_OK);
            assert_int_equal((size_t)r->c.out[0].count, count);
            const float *y = r->c.out[0].data;
            for (size_t i = 0; i < count; i++)
                if (!(fabs(y[i] - want[i]) <= 1e-4 + 1e-4 * fabs(want[i])))
                    fail_msg("%s on %s (%d threads): y[%zu] = %.9g, expected %.9g", what,
                             ak__infer_backend_name(b), p + 1, i, y[i], want[i]);
            ran++;
        }
    }
    return ran;
}

/* ---- MatMul ----------------------------------------------------------------------------- */

/* A (ra dims da) x B (rb dims db), numpy semantics; the reference in double. */
static void check_matmul(int ra, const int64_t *da, int rb, const int64_t *db) {
    node_run r = {0};
    int64_t ca = 1, cb = 1;
    for (int i = 0; i < ra; i++) ca *= da[i];
    for (int i = 0; i < rb; i++) cb *= db[i];
    float *a = op_random_floats((size_t)ca, -1, 1, 7), *bb = op_random_floats((size_t)cb, -1, 1, 9);
    add_in(&r.c, AK_ELEM_F32, ra, da, a);
    add_in(&r.c, AK_ELEM_F32, rb, db, bb);
    node_setup(&r, "", "MatMul");
    /* the reference: own backend's plan of the shapes, recomputed here in double */
    int64_t M = ra >= 2 ? da[ra - 2] : 1, K = da[ra - 1], N = rb >= 2 ? db[rb - 1] : 1;
    int nb = (ra > 2 ? ra - 2 : 0) > (rb > 2 ? rb - 2 : 0) ? ra - 2 : (rb > 2 ? rb - 2 : 0);
    int64_t bd[8], batch = 1;
    for (int i = 0; i < nb; i++) {
        int ia = i - (nb - (ra - 2)), ib = i - (nb - (rb - 2));
        int64_t x = ra > 2 && ia >= 0 ? da[ia] : 1, y = rb > 2 && ib >= 0 ? db[ib] : 1;
        bd[i] = x > y ? x : y;
        batch *= bd[i];
    }
    double *want = calloc((size_t)(batch * M * N), sizeof *want);
    assert_non_null(want);
    for (int64_t t = 0; t < batch; t++) {
        int64_t ao = 0, bo = 0, sa = 1, sb = 1, rem = t;
        for (int i = nb - 1; i >= 0; i--) {
            int64_t idx = rem % bd[i];
            rem /= bd[i];
            int ia = i - (nb - (ra - 2)), ib = i - (nb - (rb - 2));
            int64_t xa = ra > 2 && ia >= 0 ? da[ia] : 1, xb = rb > 2 && ib >= 0 ? db[ib] : 1;
            ao += (xa == 1 ? 0 : idx) * sa, bo += (xb == 1 ? 0 : idx) * sb;
            sa *= xa, sb *= xb;
        }
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                double acc = 0;
                for (int64_t k = 0; k < K; k++)
                    acc += (double)a[ao * M * K + i * K + k] * bb[bo * K * N + k * N + j];
                want[t * M * N + i * N + j] = acc;
            }
    }
    assert_true(check_all(&r, want, (size_t)(batch * M * N), "MatMul") >= 2);
    node_free(&r);
    free(want);
    free(a);
    free(bb);
}

static void test_matmul(void **s) {
    (void)s;
    check_matmul(2, (int64_t[]){37, 53}, 2, (int64_t[]){53, 71});         /* one product */
    check_matmul(2, (int64_t[]){3, 200}, 2, (int64_t[]){200, 300});       /* wide: split by columns */
    check_matmul(3, (int64_t[]){4, 33, 64}, 2, (int64_t[]){64, 48});      /* B shared: folded */
    check_matmul(4, (int64_t[]){2, 3, 17, 40}, 4, (int64_t[]){2, 3, 40, 19}); /* batched */
    check_matmul(4, (int64_t[]){2, 1, 64, 64}, 3, (int64_t[]){3, 64, 64});   /* broadcast both */
    check_matmul(2, (int64_t[]){96, 64}, 3, (int64_t[]){5, 64, 33});       /* A broadcast */
    check_matmul(1, (int64_t[]){65}, 2, (int64_t[]){65, 40});              /* 1-D A */
    check_matmul(3, (int64_t[]){2, 30, 65}, 1, (int64_t[]){65});           /* 1-D B */
}

/* ---- Gemm ------------------------------------------------------------------------------- */

static void check_gemm(int ta, int tb, float alpha, float beta, int crank, const int64_t *cd,
                       int64_t M, int64_t N, int64_t K) {
    node_run r = {0};
    int64_t dA[2] = {ta ? K : M, ta ? M : K}, dB[2] = {tb ? N : K, tb ? K : N};
    int64_t cc = 1;
    for (int i = 0; i < crank; i++) cc *= cd[i];
    float *a = op_random_floats((size_t)(M * K), -1, 1, 3), *b = op_random_floats((size_t)(K * N), -1, 1, 4),
          *c = op_random_floats((size_t)cc, -1, 1, 5);
    add_in(&r.c, AK_ELEM_F32, 2, dA, a);
    add_in(&r.c, AK_ELEM_F32, 2, dB, b);
    if (crank >= 0) add_in(&r.c, AK_ELEM_F32, crank, cd, c);
    attr_int(&r.c, "transA", ta);
    attr_int(&r.c, "transB", tb);
    attr_float(&r.c, "alpha", alpha);
    attr_float(&r.c, "beta", beta);
    node_setup(&r, "", "Gemm");
    double *want = calloc((size_t)(M * N), sizeof *want);
    assert_non_null(want);
    int64_t cr = crank == 2 ? cd[0] : 1, ccol = crank >= 1 ? cd[crank - 1] : 1;
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double acc = 0;
            for (int64_t k = 0; k < K; k++)
                acc += (double)a[ta ? k * M + i : i * K + k] * b[tb ? j * K + k : k * N + j];
            acc *= alpha;
            if (crank >= 0) acc += beta * (double)c[(cr == 1 ? 0 : i) * ccol + (ccol == 1 ? 0 : j)];
            want[i * N + j] = acc;
        }
    char what[96];
    snprintf(what, sizeof what, "Gemm transA=%d transB=%d alpha=%g beta=%g C rank %d", ta, tb,
             (double)alpha, (double)beta, crank);
    assert_true(check_all(&r, want, (size_t)(M * N), what) >= 2);
    node_free(&r);
    free(want);
    free(a);
    free(b);
    free(c);
}

static void test_gemm(void **s) {
    (void)s;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            check_gemm(ta, tb, 1.0f, 1.0f, 1, (int64_t[]){70}, 45, 70, 33);
            check_gemm(ta, tb, 0.5f, -2.0f, 2, (int64_t[]){45, 70}, 45, 70, 33);
        }
    check_gemm(0, 1, 1.0f, 1.0f, 2, (int64_t[]){100, 1}, 100, 20, 64); /* C a column */
    check_gemm(0, 0, 1.5f, 0.0f, 2, (int64_t[]){1, 1}, 20, 100, 64);   /* beta 0: C unread */
    check_gemm(1, 0, 1.0f, 1.0f, 0, NULL, 20, 30, 40);                  /* C a scalar */
    check_gemm(0, 1, 1.0f, 1.0f, -1, NULL, 1, 1000, 512);              /* no C, a classifier */
    check_gemm(0, 0, 2.0f, 1.0f, 1, (int64_t[]){9}, 5, 9, 0);          /* K = 0: beta C */
}

/* ---- MatMulBias (the optimizer's fused MatMul + Add [+ activation]) -------------------- */

static void test_matmul_bias(void **s) {
    (void)s;
    for (int relu = 0; relu < 2; relu++) {
        node_run r = {0};
        int64_t M = 2 * 61, K = 96, N = 80;
        float *a = op_random_floats((size_t)(M * K), -1, 1, 11), *b = op_random_floats((size_t)(K * N), -1, 1, 12),
              *bias = op_random_floats((size_t)N, -1, 1, 13);
        add_in(&r.c, AK_ELEM_F32, 3, (int64_t[]){2, 61, K}, a);
        add_in(&r.c, AK_ELEM_F32, 2, (int64_t[]){K, N}, b);
        add_in(&r.c, AK_ELEM_F32, 1, (int64_t[]){N}, bias);
        if (relu) attr_str(&r.c, "activation", "Relu");
        node_setup(&r, "com.accelkit", "MatMulBias");
        double *want = malloc((size_t)(M * N) * sizeof *want);
        assert_non_null(want);
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                double acc = bias[j];
                for (int64_t k = 0; k < K; k++) acc += (double)a[i * K + k] * b[k * N + j];
                want[i * N + j] = relu && acc < 0 ? 0 : acc;
            }
        assert_true(check_all(&r, want, (size_t)(M * N), relu ? "MatMulBias Relu" : "MatMulBias") >= 2);
        node_free(&r);
        free(want);
        free(a);
        free(b);
        free(bias);
    }
}

/* ---- absent libraries, AK_INFER_BACKENDS ------------------------------------------------ */

static void test_missing_library_skipped(void **s) {
    (void)s;
    log_start();
    ak__infer_backend_test_set_library(AK_BK_OPENBLAS, "/nonexistent/libopenblas-missing.so.0");
    ak__infer_backend_test_set_library(AK_BK_BLIS, "/nonexistent/libblis-missing.so.4");
    ak__infer_backend_test_set_library(AK_BK_ONEDNN, "/nonexistent/libdnnl-missing.so.2");
    assert_null(ak__infer_backend_get(AK_BK_OPENBLAS)->vt);
    assert_null(ak__infer_backend_get(AK_BK_BLIS)->vt);
    assert_null(ak__infer_backend_get(AK_BK_ONEDNN)->vt);
    assert_non_null(ak__infer_backend_get(AK_BK_OWN)->vt);
    ak__infer_backend_get(AK_BK_OPENBLAS); /* probed once: no second line */
    log_stop();
    assert_int_equal(count_lines_with("inference backend openblas: skipped"), 1);
    assert_int_equal(count_lines_with("inference backend blis: skipped"), 1);
    assert_int_equal(count_lines_with("inference backend onednn: skipped"), 1);
    assert_non_null(strstr(logged, "libopenblas-missing.so.0"));
    /* back to the installed libraries (if any) for the other tests */
    ak__infer_backend_test_set_library(AK_BK_OPENBLAS, NULL);
    ak__infer_backend_test_set_library(AK_BK_BLIS, NULL);
    ak__infer_backend_test_set_library(AK_BK_ONEDNN, NULL);
}

static void test_backends_param(void **s) {
    (void)s;
    unsigned mask;
    setenv("AK_INFER_BACKENDS", "own,blis", 1);
    assert_int_equal(ak__params_load(), AK_OK);
    assert_int_equal(ak__infer_backends_allowed(&mask), AK_OK);
    assert_int_equal(mask, (1u << AK_BK_OWN) | (1u << AK_BK_BLIS));
    setenv("AK_INFER_BACKENDS", "own,mkl", 1);
    assert_int_equal(ak__params_load(), AK_OK);
    assert_int_equal(ak__infer_backends_allowed(&mask), AK_ERR_INVALID_ARG);
    assert_non_null(strstr(ak_last_error(), "unknown backend 'mkl'"));
    setenv("AK_INFER_BACKENDS", "own,,blis", 1);
    assert_int_equal(ak__params_load(), AK_OK);
    assert_int_equal(ak__infer_backends_allowed(&mask), AK_ERR_INVALID_ARG);
    unsetenv("AK_INFER_BACKENDS");
    assert_int_equal(ak__params_load(), AK_OK);
    assert_int_equal(ak__infer_backends_allowed(&mask), AK_OK);
    assert_int_equal(mask, (1u << AK_BK_COUNT) - 1);
}

/* ---- the tuning cache ------------------------------------------------------------------- */

static char cache_dir[256];

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_cache_round_trip(void **s) {
    (void)s;
    snprintf(cache_dir, sizeof cache_dir, "/tmp/ak-test-backends-%ld", (long)getpid());
    const char *outer = getenv("XDG_CACHE_HOME"); /* ctest's (the build tree): restored */
    char saved[512] = "";
    if (outer) snprintf(saved, sizeof saved, "%s", outer);
    setenv("XDG_CACHE_HOME", cache_dir, 1);
    char path[512];
    assert_non_null(ak__bk_cache_path(path, sizeof path));
    assert_non_null(strstr(path, cache_dir));
    unlink(path);
    ak__bk_session w = {0};
    ak__bk_entry *e = ak__bk_entry_add(&w, "MatMul|f32[1x128x768],f32[768x768]||threads=2|cpu=x");
    e->ns[AK_BK_OWN] = 1500000, e->ns[AK_BK_BLIS] = 1200000;
    ak__bk_cache_save(&w, e);
    e = ak__bk_entry_add(&w, "Gemm|f32[1x512],f32[1000x512]|transA=0|cpu=x");
    e->ns[AK_BK_OWN] = 90000, e->ns[AK_BK_OPENBLAS] = 95000, e->ns[AK_BK_BLIS] = 99000;
    ak__bk_cache_save(&w, e);
    ak__bk_session r = {0};
    log_start();
    ak__bk_cache_load(&r);
    log_stop();
    assert_string_equal(logged, "");
    assert_int_equal(r.num_entries, 2);
    assert_string_equal(r.entries[0].key, w.entries[0].key);
    assert_memory_equal(r.entries[0].ns, w.entries[0].ns, sizeof r.entries[0].ns);
    assert_memory_equal(r.entries[1].ns, w.entries[1].ns, sizeof r.entries[1].ns);
    assert_true(r.entries[0].from_cache);
    for (size_t i = 0; i < r.num_entries; i++) free(r.entries[i].key);
    free(r.entries);

    /* corrupt lines: each refused (one log line for the first, a count after), the good
     * line kept */
    FILE *f = fopen(path, "a");
    assert_non_null(f);
    fputs("no tab here\nK1\town=abc\nK2\tmkl=5\nK3\town=0\nK4\n", f);
    fputs("Good|key\town=7 blis=9\n", f);
    fclose(f);
    memset(&r, 0, sizeof r);
    log_start();
    ak__bk_cache_load(&r);
    log_stop();
    assert_int_equal(r.num_entries, 3);
    assert_string_equal(r.entries[2].key, "Good|key");
    assert_int_equal(r.entries[2].ns[AK_BK_OWN], 7);
    assert_int_equal(r.entries[2].ns[AK_BK_BLIS], 9);
    assert_non_null(strstr(logged, "line 4 is not"));
    assert_non_null(strstr(logged, "5 lines refused"));
    for (size_t i = 0; i < r.num_entries; i++) free(r.entries[i].key);
    free(r.entries);

    /* a foreign file: ignored with a log line, and replaced by the next save */
    write_file(path, "{\"some\": \"other program's json\"}\n");
    memset(&r, 0, sizeof r);
    log_start();
    ak__bk_cache_load(&r);
    log_stop();
    assert_int_equal(r.num_entries, 0);
    assert_true(r.cache_bad);
    assert_non_null(strstr(logged, "is not one of accelkit's"));
    ak__bk_cache_save(&r, &w.entries[0]);
    ak__bk_session r2 = {0};
    ak__bk_cache_load(&r2);
    assert_false(r2.cache_bad);
    assert_int_equal(r2.num_entries, 1);
    assert_string_equal(r2.entries[0].key, w.entries[0].key);
    for (size_t i = 0; i < r2.num_entries; i++) free(r2.entries[i].key);
    free(r2.entries);
    for (size_t i = 0; i < w.num_entries; i++) free(w.entries[i].key);
    free(w.entries);
    unlink(path);
    char dir[300];
    snprintf(dir, sizeof dir, "%s/accelkit", cache_dir);
    rmdir(dir);
    rmdir(cache_dir);
    if (saved[0]) setenv("XDG_CACHE_HOME", saved, 1);
    else unsetenv("XDG_CACHE_HOME");
}

/* ---- no spinning library threads after a call --------------------------------------- */

static double cpu_seconds(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_utime.tv_sec + u.ru_utime.tv_usec / 1e6 + (double)u.ru_stime.tv_sec +
           u.ru_stime.tv_usec / 1e6;
}

static void test_no_spinning_after_call(void **s) {
    (void)s;
    for (int b = AK_BK_OPENBLAS; b < AK_BK_COUNT; b++) {
        if (!ak__infer_backend_get(b)->vt) continue;
        node_run r = {0};
        float *a = op_random_floats(256 * 256, -1, 1, 1), *bb = op_random_floats(256 * 256, -1, 1, 2);
        add_in(&r.c, AK_ELEM_F32, 2, (int64_t[]){256, 256}, a);
        add_in(&r.c, AK_ELEM_F32, 2, (int64_t[]){256, 256}, bb);
        node_setup(&r, "", "MatMul");
        for (int i = 0; i < 3; i++) assert_int_equal(node_run_on(&r, b, pools[1]), AK_OK);
        /* the pool's own workers spin AK_POOL_SPIN_US (100 us) and sleep: wait that out */
        struct timespec pause = {0, 20 * 1000 * 1000};
        nanosleep(&pause, NULL);
        double c0 = cpu_seconds();
        struct timespec idle = {0, 200 * 1000 * 1000};
        nanosleep(&idle, NULL);
        double used = cpu_seconds() - c0;
        /* a library thread spinning would burn ~0.2 s of CPU here */
        if (used > 0.02) fail_msg("%s: %.3f s of CPU used in a 0.2 s idle pause after calls",
                                  ak__infer_backend_name(b), used);
        node_free(&r);
        free(a);
        free(bb);
    }
}

int main(void) {
    assert_int_equal(ak_init(), AK_OK);
    assert_int_equal(ak_threadpool_create(1, &pools[0]), AK_OK);
    assert_int_equal(ak_threadpool_create(2, &pools[1]), AK_OK);
    for (int b = 0; b < AK_BK_COUNT; b++)
        printf("# backend %s: %s\n", ak__infer_backend_name(b),
               ak__infer_backend_get(b)->vt ? ak__infer_backend_get(b)->version : "absent");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matmul),
        cmocka_unit_test(test_gemm),
        cmocka_unit_test(test_matmul_bias),
        cmocka_unit_test(test_no_spinning_after_call),
        cmocka_unit_test(test_backends_param),
        cmocka_unit_test(test_cache_round_trip),
        cmocka_unit_test(test_missing_library_skipped),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    ak_threadpool_free(pools[0]);
    ak_threadpool_free(pools[1]);
    return rc;
}
