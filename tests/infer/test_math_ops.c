/* Tests of softmax, normalization and reduction beyond the ONNX node tests (which are
 * tiny): the float32 fast paths of Softmax, LogSoftmax, LayerNormalization and the
 * reductions on shapes large enough to take every vector path and the thread pool, checked
 * against double references; the vector exp over its whole domain; exact int64 sums;
 * empty-set reductions; TopK ties; and rejection of bad shapes, axes and targets. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "infer/ops/reduce/reduce.h"
#include "infer/runtime/op.h"
#include "kernels/ref/rows_body.h" /* the vector exp the Softmax kernels use */

/* ---- running one operator ---------------------------------------------------------- */

#include "op_harness.h"

static ak_status call_op(op_call *c, const char *op_type, int64_t opset, uint32_t nout) {
    return op_call_run(c, "", op_type, opset, nout, NULL);
}

static void call_free(op_call *c) { op_call_free(c); }

/* ---- the vector exp ---------------------------------------------------------------- */

static void test_exp_accuracy(void **s) {
    (void)s;
    double worst = 0.0;
    for (float x = -87.0f; x <= 0.0f; x += 0.00731f) {
        ak__v8f v = AK_V8_SPLAT(x);
        AK_V8_EXP_NONPOS(v);
        double ref = exp((double)x), rel = fabs(v[0] - ref) / ref;
        if (rel > worst) worst = rel;
    }
    assert_true(worst < 3e-7);
    ak__v8f e = {-INFINITY, -100.0f, -87.5f, 0.0f, NAN, -1e-30f, -0.5f, -10.0f};
    AK_V8_EXP_NONPOS(e);
    assert_true(e[0] == 0.0f && e[1] == 0.0f && e[2] == 0.0f);
    assert_true(e[3] == 1.0f && isnan(e[4]) && e[5] == 1.0f);
}

/* ---- Softmax and LogSoftmax -------------------------------------------------------- */

/* Softmax / LogSoftmax of x[outer][n][inner] along n, checked in double. */
static void check_softmax(const char *op, int64_t rows, int64_t n, int64_t inner, int is_log) {
    int64_t dims[3] = {rows, n, inner};
    size_t count = (size_t)(rows * n * inner);
    float *x = op_random_floats(count, -30.0f, 30.0f, (unsigned)(rows + n));
    op_call c = {0};
    add_in(&c, AK_ELEM_F32, 3, dims, x);
    attr_int(&c, "axis", 1);
    assert_int_equal(call_op(&c, op, 13, 1), AK_OK);
    const float *y = c.out[0].data;
    for (int64_t o = 0; o < rows; o++)
        for (int64_t i = 0; i < inner; i++) {
            double m = -INFINITY, sum = 0.0;
            for (int64_t k = 0; k < n; k++) m = fmax(m, x[(o * n + k) * inner + i]);
            for (int64_t k = 0; k < n; k++) sum += exp(x[(o * n + k) * inner + i] - m);
            for (int64_t k = 0; k < n; k++) {
                size_t at = (size_t)((o * n + k) * inner + i);
                double want = is_log ? x[at] - m - log(sum) : exp(x[at] - m) / sum;
                op_assert_close(y[at], want, 2e-6, is_log ? 2e-5 : 1e-12);
            }
        }
    call_free(&c);
    free(x);
}

static void test_softmax_rows(void **s) {
    (void)s;
    check_softmax("Softmax", 3, 5, 1, 0);      /* tails only */
    check_softmax("Softmax", 37, 1000, 1, 0);  /* vector body and tail */
    check_softmax("Softmax", 64, 4096, 1, 0);  /* the pool */
    check_softmax("LogSoftmax", 37, 1000, 1, 1);
    check_softmax("LogSoftmax", 64, 4096, 1, 1);
}

static void test_softmax_columns(void **s) {
    (void)s;
    check_softmax("Softmax", 4, 100, 70, 0); /* column blocks with a partial one */
    check_softmax("Softmax", 2, 300, 1000, 0);
    check_softmax("LogSoftmax", 4, 100, 70, 1);
}

/* Before opset 13 the input is a matrix split at axis: [2, 3, 4] at 1 normalizes 12. */
static void test_softmax_old_coercion(void **s) {
    (void)s;
    int64_t dims[3] = {2, 3, 4};
    float *x = op_random_floats(24, -3.0f, 3.0f, 7);
    op_call c = {0};
    add_in(&c, AK_ELEM_F32, 3, dims, x);
    assert_int_equal(call_op(&c, "Softmax", 11, 1), AK_OK);
    const float *y = c.out[0].data;
    for (int r = 0; r < 2; r++) {
        double sum = 0.0;
        for (int k = 0; k < 12; k++) sum += y[r * 12 + k];
        op_assert_close(sum, 1.0, 1e-6, 0);
    }
    call_free(&c);
    free(x);
}

/* ---- LayerNormalization ------------------------------------------------------------ */

static void check_layer_norm(int64_t rows, int64_t n, int broadcast_bias) {
    int64_t dims[2] = {rows, n}, sdims[2] = {1, n}, one = 1;
    float *x = op_random_floats((size_t)(rows * n), -4.0f, 6.0f, 3);
    float *g = op_random_floats((size_t)n, 0.5f, 2.0f, 4);
    float b1 = 0.25f;
    float *b = broadcast_bias ? &b1 : op_random_floats((size_t)n, -1.0f, 1.0f, 5);
    op_call c = {0};
    add_in(&c, AK_ELEM_F32, 2, dims, x);
    add_in(&c, AK_ELEM_F32, 2, sdims, g); /* [1, n]: leading 1 broadcast */
    add_in(&c, AK_ELEM_F32, 1, broadcast_bias ? &one : &n, b);
    assert_int_equal(call_op(&c, "LayerNormalization", 17, 3), AK_OK);
    assert_int_equal(c.out[1].rank, 2);
    assert_int_equal(c.out[1].dims[0], rows);
    assert_int_equal(c.out[1].dims[1], 1);
    const float *y = c.out[0].data, *mean = c.out[1].data, *inv = c.out[2].data;
    for (int64_t r = 0; r < rows; r++) {
        double sum = 0.0, ss = 0.0;
        for (int64_t e = 0; e < n; e++) sum += x[r * n + e];
        double m = sum / (double)n;
        for (int64_t e = 0; e < n; e++) ss += (x[r * n + e] - m) * (x[r * n + e] - m);
        double is = 1.0 / sqrt(ss / (double)n + 1e-5);
        op_assert_close(mean[r], m, 1e-5, 1e-5);
        op_assert_close(inv[r], is, 1e-5, 0);
        for (int64_t e = 0; e < n; e++)
            op_assert_close(y[r * n + e],
                            (x[r * n + e] - m) * is * g[e] + b[broadcast_bias ? 0 : e], 1e-4, 1e-4);
    }
    call_free(&c);
    free(x);
    free(g);
    if (!broadcast_bias) free(b);
}

static void test_layer_norm(void **s) {
    (void)s;
    check_layer_norm(5, 7, 0);
    check_layer_norm(300, 768, 0); /* the pool */
    check_layer_norm(9, 1030, 1);  /* B expanded from [1] */
}

static void test_layer_norm_bad_scale(void **s) {
    (void)s;
    int64_t dims[2] = {4, 6}, sd = 5;
    float x[24] = {0}, g[5] = {0};
    op_call c = {0};
    add_in(&c, AK_ELEM_F32, 2, dims, x);
    add_in(&c, AK_ELEM_F32, 1, &sd, g);
    assert_int_equal(call_op(&c, "LayerNormalization", 17, 1), AK_ERR_INVALID_MODEL);
}

/* Scale [1, 1, 1, 6] over X [4, 6]: more dims than X, all leading ones. */
static void test_layer_norm_high_rank_scale(void **s) {
    (void)s;
    int64_t dims[2] = {4, 6}, sd[4] = {1, 1, 1, 6};
    float *x = op_random_floats(24, -1.0f, 1.0f, 9), g[6] = {1, 2, 3, 4, 5, 6};
    op_call c = {0};
    add_in(&c, AK_ELEM_F32, 2, dims, x);
    add_in(&c, AK_ELEM_F32, 4, sd, g);
    assert_int_equal(call_op(&c, "LayerNormalization", 17, 1), AK_OK);
    for (int r = 0; r < 4; r++) {
        double m = 0.0, ss = 0.0;
        for (int e = 0; e < 6; e++) m += x[r * 6 + e] / 6.0;
        for (int e = 0; e < 6; e++) ss += (x[r * 6 + e] - m) * (x[r * 6 + e] - m);
        for (int e = 0; e < 6; e++)
            op_assert_close(((float *)c.out[0].data)[r * 6 + e],
                            (x[r * 6 + e] - m) / sqrt(ss / 6.0 + 1e-5) * g[e], 1e-4, 1e-4);
    }
    call_free(&c);
    free(x);
}

/* ---- reductions -------------------------------------------------------------------- */

/* op over axes of x[a][b][c], against a double reference for Sum, Mean and Max. */
static void check_reduce(const char *op, int64_t a, int64_t b, int64_t cc, const int64_t *axes,
                         size_t naxes) {
    int64_t dims[3] = {a, b, cc};
    float *x = op_random_floats((size_t)(a * b * cc), -2.0f, 2.0f, 11);
    op_call c = {0};
    add_in(&c, AK_ELEM_F32, 3, dims, x);
    attr_ints(&c, "axes", axes, naxes);
    assert_int_equal(call_op(&c, op, 13, 1), AK_OK);
    int red[3] = {0, 0, 0};
    for (size_t i = 0; i < naxes; i++) red[axes[i]] = 1;
    int64_t ext[3] = {red[0] ? 1 : a, red[1] ? 1 : b, red[2] ? 1 : cc};
    const float *y = c.out[0].data;
    for (int64_t i = 0; i < ext[0]; i++)
        for (int64_t j = 0; j < ext[1]; j++)
            for (int64_t k = 0; k < ext[2]; k++) {
                double sum = 0.0, mx = -INFINITY, cnt = 0;
                for (int64_t p = 0; p < (red[0] ? a : 1); p++)
                    for (int64_t q = 0; q < (red[1] ? b : 1); q++)
                        for (int64_t r = 0; r < (red[2] ? cc : 1); r++) {
                            double v = x[((i + p) * b + (j + q)) * cc + (k + r)];
                            sum += v;
                            mx = fmax(mx, v);
                            cnt++;
                        }
                double want = strcmp(op, "ReduceSum") == 0    ? sum
                              : strcmp(op, "ReduceMean") == 0 ? sum / cnt
                                                              : mx;
                op_assert_close(y[(i * ext[1] + j) * ext[2] + k], want, 1e-4, 1e-4);
            }
    call_free(&c);
    free(x);
}

static void test_reduce_layouts(void **s) {
    (void)s;
    const int64_t last[1] = {2}, mid[1] = {1}, first[1] = {0}, ends[2] = {0, 2}, all[3] = {0, 1, 2};
    check_reduce("ReduceMean", 3, 300, 1000, last, 1); /* rows, the pool */
    check_reduce("ReduceMean", 7, 5, 13, last, 1);
    check_reduce("ReduceMax", 7, 300, 129, mid, 1);   /* columns */
    check_reduce("ReduceMax", 4, 33, 1000, last, 1);
    check_reduce("ReduceMean", 7, 300, 129, first, 1);
    check_reduce("ReduceMean", 6, 5, 7, ends, 2);      /* two reduced groups: generic */
    check_reduce("ReduceMax", 6, 5, 7, all, 3);
}

static void test_reduce_int64_exact(void **s) {
    (void)s;
    int64_t dims[1] = {3};
    int64_t x[3] = {(INT64_C(1) << 60) + 1, (INT64_C(1) << 60) + 2, 3};
    op_call c = {0};
    add_in(&c, AK_ELEM_I64, 1, dims, x);
    assert_int_equal(call_op(&c, "ReduceSum", 11, 1), AK_OK);
    assert_true(((int64_t *)c.out[0].data)[0] == (INT64_C(1) << 61) + 6);
    call_free(&c);
}

static void test_reduce_empty_set(void **s) {
    (void)s;
    int64_t dims[2] = {3, 0};
    const int64_t axes[1] = {1};
    static const char *const ops[] = {"ReduceSum", "ReduceProd", "ReduceMax", "ReduceMin",
                                      "ReduceLogSumExp"};
    const double want[] = {0.0, 1.0, -INFINITY, INFINITY, -INFINITY};
    for (int k = 0; k < 5; k++) {
        op_call c = {0};
        float dummy;
        add_in(&c, AK_ELEM_F32, 2, dims, &dummy);
        attr_ints(&c, "axes", axes, 1);
        attr_int(&c, "keepdims", 0);
        assert_int_equal(call_op(&c, ops[k], 11, 1), AK_OK);
        assert_int_equal(c.out[0].count, 3);
        for (int i = 0; i < 3; i++) assert_true(((float *)c.out[0].data)[i] == (float)want[k]);
        call_free(&c);
    }
}

static void test_reduce_bad_axes(void **s) {
    (void)s;
    int64_t dims[2] = {2, 2};
    float x[4] = {0};
    const int64_t twice[2] = {1, -1}, far[1] = {2};
    op_call c = {0};
    add_in(&c, AK_ELEM_F32, 2, dims, x);
    attr_ints(&c, "axes", twice, 2);
    assert_int_equal(call_op(&c, "ReduceMean", 13, 1), AK_ERR_INVALID_MODEL);
    c.attrs[0].u.ints = far;
    c.attrs[0].count = 1;
    assert_int_equal(call_op(&c, "ReduceMean", 13, 1), AK_ERR_INVALID_MODEL);
}

/* ---- TopK and the losses ----------------------------------------------------------- */

static void test_topk_ties(void **s) {
    (void)s;
    int64_t dims[1] = {6}, kd = 1, k = 4;
    float x[6] = {1, 3, 3, NAN, 0, 3};
    op_call c = {0};
    add_in(&c, AK_ELEM_F32, 1, dims, x);
    add_in(&c, AK_ELEM_I64, 1, &kd, &k);
    assert_int_equal(call_op(&c, "TopK", 11, 2), AK_OK);
    const int64_t *idx = c.out[1].data;
    assert_true(idx[0] == 3 && idx[1] == 1 && idx[2] == 2 && idx[3] == 5);
    call_free(&c);
    k = 7;
    assert_int_equal(call_op(&c, "TopK", 11, 2), AK_ERR_INVALID_ARG);
}

static void test_loss_bad_target(void **s) {
    (void)s;
    int64_t xd[2] = {2, 3}, td = 2;
    float x[6] = {0};
    int64_t t[2] = {1, 3};
    op_call c = {0};
    add_in(&c, AK_ELEM_F32, 2, xd, x);
    add_in(&c, AK_ELEM_I64, 1, &td, t);
    assert_int_equal(call_op(&c, "NegativeLogLikelihoodLoss", 13, 1), AK_ERR_INVALID_ARG);
    call_free(&c);
    assert_int_equal(call_op(&c, "SoftmaxCrossEntropyLoss", 13, 1), AK_ERR_INVALID_ARG);
    call_free(&c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exp_accuracy),
        cmocka_unit_test(test_softmax_rows),
        cmocka_unit_test(test_softmax_columns),
        cmocka_unit_test(test_softmax_old_coercion),
        cmocka_unit_test(test_layer_norm),
        cmocka_unit_test(test_layer_norm_bad_scale),
        cmocka_unit_test(test_layer_norm_high_rank_scale),
        cmocka_unit_test(test_reduce_layouts),
        cmocka_unit_test(test_reduce_int64_exact),
        cmocka_unit_test(test_reduce_empty_set),
        cmocka_unit_test(test_reduce_bad_axes),
        cmocka_unit_test(test_topk_ties),
        cmocka_unit_test(test_loss_bad_target),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
