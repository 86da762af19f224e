/* Tests of the onnxruntime contrib normalizations (src/infer/ops/norm/rms_norm.c): the
 * vectorized RMSNorm row against its scalar reference over lengths with tails and a
 * one-element gamma; SimplifiedLayerNormalization, SkipLayerNormalization (with beta,
 * bias and the sum output, a skip of X's shape or broadcast, on the pool) and SkipSimplifiedLayerNormalization against
 * double loops written here; refusals of a bad gamma, non-broadcasting skip, float64
 * input and the RMS form's mean output. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "infer/ops/norm/norm.h"
#include "infer/runtime/op.h"
#include "op_harness.h"

/* ---- the RMS row: vectorized against the reference ----------------------------------- */

static void test_rms_row_fast_matches_reference(void **s) {
    (void)s;
    static const size_t lengths[] = {1, 3, 7, 8, 9, 16, 31, 64, 100, 1027};
    for (size_t t = 0; t < sizeof lengths / sizeof *lengths; t++) {
        size_t n = lengths[t];
        float *x = op_random_floats(n, -3.0f, 5.0f, (unsigned)n);
        float *g = op_random_floats(n, 0.5f, 2.0f, 7);
        float *ya = malloc(n * sizeof *ya), *yb = malloc(n * sizeof *yb);
        for (int g_all = 0; g_all < 2; g_all++) {
            float ia = ak__rms_row_ref(x, ya, n, g, g_all, 1e-6f);
            float ib = ak__rms_row_fast(x, yb, n, g, g_all, 1e-6f);
            op_assert_close(ib, ia, 1e-6, 0);
            for (size_t i = 0; i < n; i++) op_assert_close(yb[i], ya[i], 1e-6, 1e-7);
        }
        free(x), free(g), free(ya), free(yb);
    }
}

/* ---- the operators against double loops ------------------------------------------------ */

/* y = norm(x + skip [+ bias]) * g [+ b] over rows of n, in double; sum and inv per row. */
static void expected(const float *x, const float *skip, size_t skip_count, const float *bias,
                     const float *g, const float *b, int rms, int64_t rows, int64_t n,
                     double *y, double *sum, double *inv) {
    for (int64_t r = 0; r < rows; r++) {
        double m = 0.0, ss = 0.0;
        for (int64_t e = 0; e < n; e++) {
            uint64_t i = (uint64_t)(r * n + e);
            sum[i] = (double)x[i] + (skip ? skip[i % skip_count] : 0.0) + (bias ? bias[e] : 0.0);
            m += sum[i] / (double)n;
        }
        if (rms) m = 0.0;
        for (int64_t e = 0; e < n; e++) ss += (sum[r * n + e] - m) * (sum[r * n + e] - m);
        inv[r] = 1.0 / sqrt(ss / (double)n + 1e-5);
        for (int64_t e = 0; e < n; e++)
            y[r * n + e] = (sum[r * n + e] - m) * inv[r] * g[e] + (b ? b[e] : 0.0);
    }
}

static void check_skip(int rms, int64_t rows, int64_t n, int broadcast_skip) {
    int64_t dims[2] = {rows, n};
    float *x = op_random_floats((size_t)(rows * n), -2.0f, 3.0f, 11);
    float *sk = op_random_floats((size_t)(rows * n), -1.0f, 1.0f, 12);
    float *g = op_random_floats((size_t)n, 0.5f, 1.5f, 13);
    float *b = op_random_floats((size_t)n, -1, 1, 14);
    float *bias = op_random_floats((size_t)n, -0.5f, 0.5f, 15);
    op_call c = {0};
    add_in(&c, AK_ELEM_F32, 2, dims, x);
    add_in(&c, AK_ELEM_F32, broadcast_skip ? 1 : 2, broadcast_skip ? &n : dims, sk);
    add_in(&c, AK_ELEM_F32, 1, &n, g);
    if (!rms) add_in(&c, AK_ELEM_F32, 1, &n, b);
    add_in(&c, AK_ELEM_F32, 1, &n, bias);
    const char *op = rms ? "SkipSimplifiedLayerNormalization" : "SkipLayerNormalization";
    assert_int_equal(op_call_run(&c, "com.microsoft", op, 1, 4, NULL),
                     rms ? AK_ERR_UNSUPPORTED : AK_OK); /* RMS: no mean output */
    if (rms) { /* again without the mean: output 1 omitted */
        op_call_free(&c);
        c.nout = 0;
        assert_int_equal(op_call_run(&c, "com.microsoft", op, 1, 1, NULL), AK_OK);
    }
    size_t total = (size_t)(rows * n);
    double *y = malloc(total * sizeof *y), *sum = malloc(total * sizeof *sum);
    double *inv = malloc((size_t)rows * sizeof *inv);
    expected(x, sk, broadcast_skip ? (size_t)n : total, bias, g, rms ? NULL : b, rms, rows, n, y,
             sum, inv);
    for (size_t i = 0; i < total; i++)
        op_assert_close(((float *)c.out[0].data)[i], y[i], 1e-4, 1e-4);
    if (!rms) {
        for (size_t i = 0; i < total; i++)
            op_assert_close(((float *)c.out[3].data)[i], sum[i], 1e-6, 1e-6);
        for (int64_t r = 0; r < rows; r++)
            op_assert_close(((float *)c.out[2].data)[r], inv[r], 1e-5, 0);
        assert_int_equal(c.out[1].rank, 2);
        assert_int_equal(c.out[1].dims[1], 1);
    }
    op_call_free(&c);
    free(x), free(sk), free(g), free(b), free(bias), free(y), free(sum), free(inv);
}

static void test_skip_layer_norm(void **s) {
    (void)s;
    check_skip(0, 5, 7, 0);
    check_skip(0, 300, 768, 1); /* the pool; a skip broadcast over the rows */
    check_skip(0, 300, 768, 0); /* the pool; X and skip of one shape: each task sums its rows */
    check_skip(1, 4, 33, 0);
    check_skip(1, 64, 256, 1);
    check_skip(1, 64, 256, 0);
}

static void test_simplified_layer_norm(void **s) {
    (void)s;
    int64_t dims[3] = {2, 3, 19}, n = 19, one = 1;
    float *x = op_random_floats(114, -2.0f, 2.0f, 21), *g = op_random_floats(19, 0.5f, 1.5f, 22);
    float g1 = 1.5f;
    for (int broadcast = 0; broadcast < 2; broadcast++) {
        op_call c = {0};
        add_in(&c, AK_ELEM_F32, 3, dims, x);
        add_in(&c, AK_ELEM_F32, 1, broadcast ? &one : &n, broadcast ? &g1 : g);
        attr_float(&c, "epsilon", 1e-5f);
        assert_int_equal(op_call_run(&c, "", "SimplifiedLayerNormalization", 1, 2, NULL), AK_OK);
        double y[114], sum[114], inv[6];
        float gb[19];
        for (int e = 0; e < 19; e++) gb[e] = broadcast ? g1 : g[e];
        expected(x, NULL, 0, NULL, gb, NULL, 1, 6, 19, y, sum, inv);
        for (int i = 0; i < 114; i++)
            op_assert_close(((float *)c.out[0].data)[i], y[i], 1e-5, 1e-6);
        for (int r = 0; r < 6; r++) op_assert_close(((float *)c.out[1].data)[r], inv[r], 1e-5, 0);
        assert_int_equal(c.out[1].rank, 3);
        assert_int_equal(c.out[1].dims[2], 1);
        op_call_free(&c);
    }
    free(x), free(g);
}

static void test_refusals(void **s) {
    (void)s;
    int64_t dims[2] = {4, 6}, bad = 5, skd[2] = {3, 6}, n = 6;
    float x[24] = {0}, g[6] = {1, 1, 1, 1, 1, 1};
    double xd[24] = {0};
    op_call c = {0};
    add_in(&c, AK_ELEM_F32, 2, dims, x);
    add_in(&c, AK_ELEM_F32, 1, &bad, g);
    assert_int_equal(op_call_run(&c, "com.microsoft", "SimplifiedLayerNormalization", 1, 1, NULL),
                     AK_ERR_INVALID_MODEL); /* gamma of 5 for rows of 6 */
    op_call d = {0};
    add_in(&d, AK_ELEM_F32, 2, dims, x);
    add_in(&d, AK_ELEM_F32, 2, skd, x); /* [3, 6] does not broadcast with [4, 6] */
    add_in(&d, AK_ELEM_F32, 1, &n, g);
    assert_int_equal(op_call_run(&d, "com.microsoft", "SkipLayerNormalization", 1, 1, NULL),
                     AK_ERR_INVALID_MODEL);
    op_call e = {0};
    add_in(&e, AK_ELEM_F64, 2, dims, xd);
    add_in(&e, AK_ELEM_F32, 1, &n, g);
    assert_int_equal(op_call_run(&e, "com.microsoft", "SimplifiedLayerNormalization", 1, 1, NULL),
                     AK_ERR_UNSUPPORTED);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rms_row_fast_matches_reference),
        cmocka_unit_test(test_simplified_layer_norm),
        cmocka_unit_test(test_skip_layer_norm),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
