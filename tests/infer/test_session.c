/* Sessions on models of Debian's libonnx-testdata: no heap allocation in a run once a
 * plan exists (a counting allocator wraps malloc and friends), memory flat over 10 000
 * runs, the arena smaller than one buffer per value, identical results planned and
 * unplanned, with and without the optimizer, and clear errors for bad feeds and
 * unsupported operators; sequence and optional values packed by the public calls.
 * Skips when the test data is not installed. */
#include <dlfcn.h>
#include <malloc.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "accelkit/infer.h"

#define DATA "/usr/share/libonnx-testdata/data"

#include "count_alloc.h"

/* ---- a model and its first test_data_set ----------------------------------------------- */

typedef struct fixture {
    ak_session *s;
    ak_tensor_file *in[8], *out[8];
    const char *names[8];
    ak_tensor inputs[8], want[8];
    size_t nin, nout;
} fixture;

static int open_test(fixture *f, const char *test, int optimize) {
    char path[512];
    memset(f, 0, sizeof *f);
    snprintf(path, sizeof path, DATA "/%s/model.onnx", test);
    if (access(path, F_OK) != 0) return -1;
    ak_session_options o;
    ak_session_options_init(&o);
    o.threads = 2;
    o.optimize = optimize;
    assert_int_equal(ak_session_create_from_file(path, &o, &f->s), AK_OK);
    const ak_model *m = ak_session_model(f->s);
    for (size_t k = 0;; k++) {
        snprintf(path, sizeof path, DATA "/%s/test_data_set_0/input_%zu.pb", test, k);
        if (access(path, F_OK) != 0) break;
        assert_int_equal(ak_tensor_load_pb(path, &f->in[k]), AK_OK);
        ak_tensor_file_get(f->in[k], NULL, &f->inputs[k]);
        ak_value_info info;
        assert_int_equal(ak_model_input(m, k, &info), AK_OK);
        f->names[k] = info.name;
        f->nin++;
    }
    for (size_t k = 0;; k++) {
        snprintf(path, sizeof path, DATA "/%s/test_data_set_0/output_%zu.pb", test, k);
        if (access(path, F_OK) != 0) break;
        assert_int_equal(ak_tensor_load_pb(path, &f->out[k]), AK_OK);
        ak_tensor_file_get(f->out[k], NULL, &f->want[k]);
        f->nout++;
    }
    return 0;
}

static void close_test(fixture *f) {
    ak_session_free(f->s);
    for (size_t k = 0; k < 8; k++) {
        ak_tensor_file_free(f->in[k]);
        ak_tensor_file_free(f->out[k]);
    }
}

static void run_and_check(fixture *f, ak_tensor *outs) {
    assert_int_equal(ak_session_run(f->s, f->names, f->inputs, f->nin, NULL, outs, f->nout), AK_OK);
    for (size_t k = 0; k < f->nout; k++) {
        assert_int_equal(outs[k].type, AK_ELEM_F32);
        const float *got = outs[k].data, *want = f->want[k].data;
        size_t n = 1;
        for (int d = 0; d < outs[k].rank; d++) n *= (size_t)outs[k].dims[d];
        for (size_t i = 0; i < n; i++) assert_true(fabsf(got[i] - want[i]) <= 1e-4f + 1e-3f * fabsf(want[i]));
    }
}

#define SKIP_WITHOUT_DATA(f, test, opt)                                                  \
    do {                                                                                 \
        if (open_test((f), (test), (opt))) {                                             \
            print_message("%s not installed: skipped\n", test);                          \
            skip();                                                                      \
        }                                                                                \
    } while (0)

static const char *const chain_models[] = {
    "pytorch-converted/test_Conv2d_groups",
    "node/test_layer_normalization_4d_axis1_expanded",
    "pytorch-converted/test_ConvTranspose2d",
    "node/test_gemm_all_attributes",
};

/* Runs after the first allocate nothing, and results match the reference each time. */
static void test_no_heap_after_first_run(void **state) {
    (void)state;
    for (size_t t = 0; t < sizeof chain_models / sizeof *chain_models; t++) {
        fixture f;
        SKIP_WITHOUT_DATA(&f, chain_models[t], 1);
        ak_tensor outs[8];
        run_and_check(&f, outs); /* first run: plans */
#if COUNTING
        allocations = 0;
        counting = 1;
#endif
        for (int i = 0; i < 50; i++)
            assert_int_equal(ak_session_run(f.s, f.names, f.inputs, f.nin, NULL, outs, f.nout), AK_OK);
#if COUNTING
        counting = 0;
        if (allocations) print_message("%s: %ld allocations in 50 runs\n", chain_models[t], allocations);
        assert_int_equal(allocations, 0);
#endif
        run_and_check(&f, outs);
        ak_session_memory mem;
        assert_int_equal(ak_session_get_memory(f.s, &mem), AK_OK);
        assert_true(mem.planned);
        assert_true(mem.arena_bytes <= mem.naive_bytes);
        close_test(&f);
    }
}

static long rss_kib(void) {
    FILE *fp = fopen("/proc/self/statm", "r");
    long pages = 0, rss = 0;
    if (fp && fscanf(fp, "%ld %ld", &pages, &rss) != 2) rss = 0;
    if (fp) fclose(fp);
    return rss * (sysconf(_SC_PAGESIZE) / 1024);
}

static void test_memory_flat(void **state) {
    (void)state;
    fixture f;
    SKIP_WITHOUT_DATA(&f, "node/test_layer_normalization_4d_axis1_expanded", 1);
    ak_tensor outs[8];
    for (int i = 0; i < 100; i++) run_and_check(&f, outs);
    long before = rss_kib();
    struct mallinfo2 m0 = mallinfo2();
#if COUNTING
    allocations = 0;
    counting = 1;
#endif
    for (int i = 0; i < 10000; i++)
        assert_int_equal(ak_session_run(f.s, f.names, f.inputs, f.nin, NULL, outs, f.nout), AK_OK);
#if COUNTING
    counting = 0;
    assert_int_equal(allocations, 0);
#endif
    struct mallinfo2 m1 = mallinfo2();
    long after = rss_kib();
    print_message("RSS %ld -> %ld KiB, heap in use %zu -> %zu bytes over 10000 runs\n", before,
                  after, m0.uordblks, m1.uordblks);
    assert_true(after - before < 1024);
    /* no malloc call was counted; glibc may still book a few hundred bytes once (its own
     * internal allocations are not interposed) */
    assert_true(m1.uordblks < m0.uordblks + 65536);
    run_and_check(&f, outs);
    close_test(&f);
}

/* The optimizer's fused graph gives the reference results too. */
static void test_optimizer_off_same_results(void **state) {
    (void)state;
    for (size_t t = 0; t < sizeof chain_models / sizeof *chain_models; t++) {
        fixture f;
        SKIP_WITHOUT_DATA(&f, chain_models[t], 0);
        ak_tensor outs[8];
        run_and_check(&f, outs);
        run_and_check(&f, outs);
        close_test(&f);
    }
}

static void expect_run_error(fixture *f, ak_status want, const char *text) {
    ak_tensor outs[8];
    assert_int_equal(ak_session_run(f->s, f->names, f->inputs, f->nin, NULL, outs, f->nout), want);
    if (!strstr(ak_last_error(), text)) fail_msg("'%s' lacks '%s'", ak_last_error(), text);
}

static void test_bad_feeds(void **state) {
    (void)state;
    fixture f;
    SKIP_WITHOUT_DATA(&f, "pytorch-converted/test_Conv2d_groups", 1);
    ak_tensor saved = f.inputs[0];
    f.inputs[0].type = AK_ELEM_I64;
    expect_run_error(&f, AK_ERR_INVALID_ARG, "has type int64, the model expects float32");
    f.inputs[0] = saved;
    f.inputs[0].rank = 3;
    expect_run_error(&f, AK_ERR_INVALID_ARG, "has rank 3");
    f.inputs[0] = saved;
    int64_t dims[4] = {saved.dims[0], saved.dims[1] + 1, saved.dims[2], saved.dims[3]};
    f.inputs[0].dims = dims;
    expect_run_error(&f, AK_ERR_INVALID_ARG, "the model fixes it at");
    f.inputs[0] = saved;
    const char *bad = "nope";
    f.names[0] = bad;
    expect_run_error(&f, AK_ERR_INVALID_ARG, "has no input 'nope'");
    ak_tensor outs[8];
    assert_int_equal(ak_session_run(f.s, f.names, f.inputs, 0, NULL, outs, f.nout), AK_ERR_INVALID_ARG);
    close_test(&f);
}

static void test_unsupported_operator(void **state) {
    (void)state;
    const char *path = DATA "/node/test_tfidfvectorizer_tf_only_bigrams_skip0/model.onnx";
    if (access(path, F_OK) != 0) skip();
    ak_session *s = NULL;
    assert_int_equal(ak_session_create_from_file(path, NULL, &s), AK_ERR_UNSUPPORTED);
    assert_null(s);
    assert_non_null(strstr(ak_last_error(), "unsupported operator TfIdfVectorizer (opset 9) at node"));
}

/* Sequence and optional values built with the public packing calls, checked by reading
 * them back and by running them through models that take and return them. */
static void test_packed_values(void **state) {
    (void)state;
    int64_t d0[2] = {2, 3}, d1[1] = {4};
    float a[6] = {1, 2, 3, 4, 5, 6}, b[4] = {-1, -2, -3, -4};
    ak_tensor elems[2] = {{AK_ELEM_F32, 2, d0, a}, {AK_ELEM_F32, 1, d1, b}};
    size_t size = 0, n = 0;
    assert_int_equal(ak_sequence_pack(AK_ELEM_F32, elems, 2, NULL, 0, &size), AK_OK);
    void *buf = NULL;
    assert_int_equal(ak_alloc(size, &buf), AK_OK);
    assert_int_equal(ak_sequence_pack(AK_ELEM_F32, elems, 2, buf, size - 1, &size), AK_ERR_INVALID_ARG);
    assert_int_equal(ak_sequence_pack(AK_ELEM_I64, elems, 2, buf, size, &size), AK_ERR_INVALID_ARG);
    assert_non_null(strstr(ak_last_error(), "element 0 has type float32"));
    assert_int_equal(ak_sequence_pack(AK_ELEM_F32, elems, 2, buf, size, &size), AK_OK);
    int64_t sdim = (int64_t)size;
    ak_tensor seq = {AK_ELEM_U8, 1, &sdim, buf}, e;
    assert_int_equal(ak_value_kind_of(&seq), AK_VALUE_SEQUENCE);
    ak_elem_type et;
    assert_int_equal(ak_sequence_length(&seq, &n, &et), AK_OK);
    assert_int_equal(n, 2);
    assert_int_equal(et, AK_ELEM_F32);
    assert_int_equal(ak_sequence_at(&seq, 1, &e), AK_OK);
    assert_int_equal(e.rank, 1);
    assert_int_equal(e.dims[0], 4);
    assert_memory_equal(e.data, b, sizeof b);
    assert_int_equal(ak_sequence_at(&seq, 2, &e), AK_ERR_INVALID_ARG);
    ak_tensor plain = {AK_ELEM_F32, 2, d0, a};
    assert_int_equal(ak_value_kind_of(&plain), AK_VALUE_TENSOR);
    assert_int_equal(ak_sequence_length(&plain, &n, NULL), AK_ERR_INVALID_ARG);

    /* through a model: Identity of a sequence returns the same elements */
    const char *path = DATA "/node/test_identity_sequence/model.onnx";
    ak_session *s = NULL;
    if (access(path, F_OK) != 0) fail_msg("%s is missing: scripts/setup installs libonnx-testdata", path);
    assert_int_equal(ak_session_create_from_file(path, NULL, &s), AK_OK);
    const ak_model *m = ak_session_model(s);
    ak_value_info info;
    assert_int_equal(ak_model_input(m, 0, &info), AK_OK);
    assert_int_equal(info.kind, AK_VALUE_SEQUENCE);
    const char *names[1] = {info.name};
    ak_tensor out;
    assert_int_equal(ak_session_run(s, names, &seq, 1, NULL, &out, 1), AK_OK);
    assert_int_equal(ak_sequence_length(&out, &n, NULL), AK_OK);
    assert_int_equal(n, 2);
    assert_int_equal(ak_sequence_at(&out, 0, &e), AK_OK);
    assert_int_equal(e.rank, 2);
    assert_memory_equal(e.data, a, sizeof a);
    ak_session_free(s);

    /* an empty optional: OptionalHasElement says false, a tensor makes it true */
    assert_int_equal(ak_optional_none(buf, size, &size), AK_OK);
    sdim = (int64_t)size;
    assert_int_equal(ak_value_kind_of(&seq), AK_VALUE_OPTIONAL);
    path = DATA "/node/test_optional_has_element/model.onnx";
    assert_int_equal(ak_session_create_from_file(path, NULL, &s), AK_OK);
    assert_int_equal(ak_model_input(ak_session_model(s), 0, &info), AK_OK);
    names[0] = info.name;
    assert_int_equal(ak_session_run(s, names, &seq, 1, NULL, &out, 1), AK_OK);
    assert_int_equal(*(const uint8_t *)out.data, 0);
    int64_t four = 4;
    ak_tensor full = {AK_ELEM_F32, 1, &four, b};
    assert_int_equal(ak_session_run(s, names, &full, 1, NULL, &out, 1), AK_OK);
    assert_int_equal(*(const uint8_t *)out.data, 1);
    ak_session_free(s);
    ak_free(buf);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_heap_after_first_run),
        cmocka_unit_test(test_memory_flat),
        cmocka_unit_test(test_optimizer_off_same_results),
        cmocka_unit_test(test_bad_feeds),
        cmocka_unit_test(test_unsupported_operator),
        cmocka_unit_test(test_packed_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
