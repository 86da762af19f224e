/* Tests of the elementwise family beyond the ONNX node tests (which are tiny): broadcast
 * shapes that take every merged-stride path, vector tail and the thread pool against a
 * naive index-arithmetic reference; the float32 vector activations against double math
 * over their whole domain (NaN, infinities, saturation); integer division and remainder
 * by zero and INT_MIN / -1; exact int64 arithmetic; casts at the edges; opset < 7
 * broadcast attributes; and rejection of bad shapes and types. */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/half.h"
#include "infer/runtime/op.h"

/* ---- running one operator ---------------------------------------------------------- */

#include "op_harness.h"

static ak_status call_op(op_call *c, const char *op_type, int64_t opset) {
    return op_call_run(c, "", op_type, opset, 1, NULL);
}

static void call_free(op_call *c) {
    op_call_free(c);
    memset(c, 0, sizeof *c);
}

static void assert_close(double got, double want, double rtol, double atol, const char *what,
                         double x) {
    if (isnan(want) && isnan(got)) return;
    if (isinf(want) && got == want) return;
    if (!(fabs(got - want) <= atol + rtol * fabs(want)))
        fail_msg("%s(%.9g): got %.9g, expected %.9g", what, x, got, want);
}

/* ---- broadcasting ------------------------------------------------------------------ */

/* Offset of output index `flat` in an input of rank ra broadcast to out's shape. */
static size_t bcast_offset(uint64_t flat, int ro, const int64_t *od, int ra, const int64_t *ad) {
    size_t off = 0, stride = 1;
    for (int d = ro - 1; d >= 0; d--) {
        int64_t idx = (int64_t)(flat % (uint64_t)od[d]);
        flat /= (uint64_t)od[d];
        int da = d - (ro - ra);
        if (da < 0) continue;
        if (ad[da] != 1) off += (size_t)idx * stride;
        stride *= (size_t)ad[da];
    }
    return off;
}

static double ref_binary(const char *op, double x, double y) {
    if (!strcmp(op, "Add")) return x + y;
    if (!strcmp(op, "Sub")) return x - y;
    if (!strcmp(op, "Mul")) return x * y;
    if (!strcmp(op, "Div")) return x / y;
    if (!strcmp(op, "Min")) return x < y ? x : y;
    if (!strcmp(op, "Max")) return x > y ? x : y;
    if (!strcmp(op, "PRelu")) return x < 0 ? x * y : x;
    if (!strcmp(op, "Pow")) return pow(x, y);
    return NAN;
}

static void check_binary_f32(const char *op, int ra, const int64_t *da, int rb, const int64_t *db) {
    op_call c = {0};
    size_t na = 1, nb = 1;
    for (int d = 0; d < ra; d++) na *= (size_t)da[d];
    for (int d = 0; d < rb; d++) nb *= (size_t)db[d];
    float *a = op_random_floats(na, -3, 3, 1), *b = op_random_floats(nb, 0.5f, 2, 2);
    add_in(&c, AK_ELEM_F32, ra, da, a);
    add_in(&c, AK_ELEM_F32, rb, db, b);
    assert_int_equal(call_op(&c, op, 17), AK_OK);
    const ak__tensor *o = &c.out[0];
    const float *y = o->data;
    for (uint64_t i = 0; i < o->count; i++) {
        double x0 = a[bcast_offset(i, o->rank, o->dims, ra, da)];
        double x1 = b[bcast_offset(i, o->rank, o->dims, rb, db)];
        assert_close(y[i], (float)ref_binary(op, x0, x1), 1e-6, 0, op, x0);
    }
    call_free(&c);
    free(a);
    free(b);
}

static void test_broadcast_shapes(void **state) {
    (void)state;
    static const struct {
        int ra, rb;
        int64_t da[4], db[4];
    } cases[] = {
        {1, 1, {37}, {37}},                  /* same shape with a vector tail */
        {3, 2, {7, 5, 3}, {5, 1}},           /* middle broadcast */
        {1, 2, {1}, {4, 33}},                /* scalar-like a */
        {4, 3, {2, 3, 4, 5}, {3, 1, 1}},     /* per channel */
        {2, 1, {300, 1000}, {1000}},         /* trailing vector, threaded */
        {2, 0, {513, 257}, {0}},             /* scalar b, threaded */
        {3, 3, {1, 9, 1}, {6, 1, 11}},       /* both broadcast */
        {2, 2, {1000, 1}, {1, 300}},         /* outer product, threaded */
        {4, 4, {2, 1, 3, 1}, {2, 1, 3, 1}},  /* size-1 dims dropped */
    };
    static const char *const ops[] = {"Add", "Sub", "Mul", "Div", "Min", "Max", "PRelu", "Pow"};
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++)
        for (size_t o = 0; o < sizeof ops / sizeof *ops; o++) {
            check_binary_f32(ops[o], cases[k].ra, cases[k].da, cases[k].rb, cases[k].db);
            check_binary_f32(ops[o], cases[k].rb, cases[k].db, cases[k].ra, cases[k].da);
        }
}

static void test_broadcast_errors(void **state) {
    (void)state;
    op_call c = {0};
    float a[6] = {0}, b[4] = {0};
    int64_t da[2] = {2, 3}, db[1] = {4};
    add_in(&c, AK_ELEM_F32, 2, da, a);
    add_in(&c, AK_ELEM_F32, 1, db, b);
    assert_int_equal(call_op(&c, "Add", 17), AK_ERR_INVALID_MODEL);
    call_free(&c);
    uint8_t ba[6] = {0};
    add_in(&c, AK_ELEM_BOOL, 2, da, ba);
    add_in(&c, AK_ELEM_BOOL, 2, da, ba);
    assert_int_equal(call_op(&c, "Add", 17), AK_ERR_UNSUPPORTED);
    call_free(&c);
    add_in(&c, AK_ELEM_F32, 2, da, a);
    add_in(&c, AK_ELEM_F64, 2, da, a);
    assert_int_equal(call_op(&c, "Mul", 17), AK_ERR_UNSUPPORTED);
    call_free(&c);
    add_in(&c, AK_ELEM_F32, 2, da, a);
    assert_int_equal(call_op(&c, "And", 17), AK_ERR_INVALID_MODEL); /* input 1 missing */
    call_free(&c);
}

/* ---- float32 activations ------------------------------------------------------------- */

static double gelu_ref(double x) { return 0.5 * x * (1 + erf(x / sqrt(2.0))); }
static double gelu_tanh_ref(double x) {
    return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}
static double sigmoid_ref(double x) { return 1 / (1 + exp(-x)); }
static double relu_ref(double x) { return x < 0 ? 0 : x; }
static double hardswish_ref(double x) {
    double h = x / 6 + 0.5;
    return x * (h < 0 ? 0 : h > 1 ? 1 : h);
}

static void check_unary(const char *op, double (*ref)(double), double rtol, double atol,
                        const char *approx) {
    /* the domain edges, then every length 1..40 (vector tails), then a threaded run */
    static const float edges[] = {0.0f, -0.0f, 1e-30f, -1e-7f, 0.29f, 0.31f, 0.49f, 0.51f,
                                  -5, 9, 20, -20, 88, -88, 89, -104, 1e30f, -1e30f,
                                  INFINITY, -INFINITY, NAN};
    size_t big = 100003;
    float *x = op_random_floats(big, -12, 12, 7);
    memcpy(x, edges, sizeof edges);
    size_t lens[] = {sizeof edges / sizeof *edges, 1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 31, 40, big};
    for (size_t l = 0; l < sizeof lens / sizeof *lens; l++) {
        op_call c = {0};
        int64_t n = (int64_t)lens[l];
        add_in(&c, AK_ELEM_F32, 1, &n, x);
        if (approx) attr_str(&c, "approximate", approx);
        assert_int_equal(call_op(&c, op, 20), AK_OK);
        const float *y = c.out[0].data;
        for (int64_t i = 0; i < n; i++)
            assert_close(y[i], (float)ref(x[i]), rtol, atol, op, x[i]);
        call_free(&c);
    }
    free(x);
}

static void test_activations(void **state) {
    (void)state;
    check_unary("Sigmoid", sigmoid_ref, 2e-6, 1e-30, NULL);
    check_unary("Tanh", tanh, 2e-6, 1e-30, NULL);
    check_unary("Gelu", gelu_ref, 1e-5, 5e-7, NULL);
    check_unary("Gelu", gelu_tanh_ref, 1e-5, 5e-7, "tanh");
    check_unary("Relu", relu_ref, 0, 0, NULL);
    check_unary("Exp", exp, 3e-7, 1e-44, NULL);
    check_unary("Erf", erf, 1e-6, 3e-7, NULL);
    check_unary("HardSwish", hardswish_ref, 1e-6, 1e-7, NULL);
}

static void test_clip_and_relu(void **state) {
    (void)state;
    float x[11] = {-3, -1, -0.5f, 0, 0.5f, 1, 3, NAN, INFINITY, -INFINITY, 2};
    float lo = -1, hi = 1;
    int64_t n = 11, one = 1;
    op_call c = {0};
    add_in(&c, AK_ELEM_F32, 1, &n, x);
    add_in(&c, AK_ELEM_F32, 0, &one, &lo);
    add_in(&c, AK_ELEM_F32, 0, &one, &hi);
    assert_int_equal(call_op(&c, "Clip", 13), AK_OK);
    const float want[11] = {-1, -1, -0.5f, 0, 0.5f, 1, 1, NAN, 1, -1, 1};
    for (int i = 0; i < 11; i++)
        assert_close(((float *)c.out[0].data)[i], want[i], 0, 0, "Clip", x[i]);
    call_free(&c);
    /* max only (min omitted), and opset 6 attributes */
    add_in(&c, AK_ELEM_F32, 1, &n, x);
    c.nin++; /* omitted min */
    add_in(&c, AK_ELEM_F32, 0, &one, &hi);
    assert_int_equal(call_op(&c, "Clip", 13), AK_OK);
    assert_true(((float *)c.out[0].data)[0] == -3 && ((float *)c.out[0].data)[6] == 1);
    call_free(&c);
    add_in(&c, AK_ELEM_F32, 1, &n, x);
    attr_float(&c, "min", 0);
    assert_int_equal(call_op(&c, "Clip", 6), AK_OK);
    assert_true(((float *)c.out[0].data)[0] == 0 && ((float *)c.out[0].data)[6] == 3);
    call_free(&c);
    /* int8 bounds */
    int8_t xi[4] = {-128, -5, 5, 127}, li = -10, hi8 = 100;
    int64_t n4 = 4;
    add_in(&c, AK_ELEM_I8, 1, &n4, xi);
    add_in(&c, AK_ELEM_I8, 0, &one, &li);
    add_in(&c, AK_ELEM_I8, 0, &one, &hi8);
    assert_int_equal(call_op(&c, "Clip", 13), AK_OK);
    const int8_t *yi = c.out[0].data;
    assert_true(yi[0] == -10 && yi[1] == -5 && yi[2] == 5 && yi[3] == 100);
    call_free(&c);
}

/* ---- integers ------------------------------------------------------------------------- */

static void test_integer_division(void **state) {
    (void)state;
    int64_t n = 6;
    int32_t a32[6] = {7, -7, INT32_MIN, 5, -9, 9}, b32[6] = {0, 2, -1, -1, 4, -4};
    op_call c = {0};
    add_in(&c, AK_ELEM_I32, 1, &n, a32);
    add_in(&c, AK_ELEM_I32, 1, &n, b32);
    assert_int_equal(call_op(&c, "Div", 14), AK_OK);
    const int32_t *q = c.out[0].data;
    assert_int_equal(q[0], 0);
    assert_int_equal(q[1], -3);
    assert_int_equal(q[2], INT32_MIN);
    assert_int_equal(q[3], -5);
    call_free(&c);
    add_in(&c, AK_ELEM_I32, 1, &n, a32);
    add_in(&c, AK_ELEM_I32, 1, &n, b32);
    assert_int_equal(call_op(&c, "Mod", 13), AK_OK); /* sign of the divisor */
    const int32_t *r = c.out[0].data;
    assert_int_equal(r[0], 0);
    assert_int_equal(r[1], 1);
    assert_int_equal(r[2], 0);
    assert_int_equal(r[4], 3);
    assert_int_equal(r[5], -3);
    call_free(&c);
    add_in(&c, AK_ELEM_I32, 1, &n, a32);
    add_in(&c, AK_ELEM_I32, 1, &n, b32);
    attr_int(&c, "fmod", 1);
    assert_int_equal(call_op(&c, "Mod", 13), AK_OK); /* sign of the dividend */
    r = c.out[0].data;
    assert_int_equal(r[1], -1);
    assert_int_equal(r[4], -1);
    assert_int_equal(r[5], 1);
    call_free(&c);
    int64_t a64[2] = {INT64_MIN, (int64_t)1 << 62}, b64[2] = {-1, 0};
    int64_t two = 2;
    add_in(&c, AK_ELEM_I64, 1, &two, a64);
    add_in(&c, AK_ELEM_I64, 1, &two, b64);
    assert_int_equal(call_op(&c, "Div", 14), AK_OK);
    assert_true(((int64_t *)c.out[0].data)[0] == INT64_MIN && ((int64_t *)c.out[0].data)[1] == 0);
    call_free(&c);
    /* exact int64 beyond 2^53 */
    int64_t x[2] = {((int64_t)1 << 60) + 1, -((int64_t)1 << 60) - 3}, y[2] = {2, 5};
    add_in(&c, AK_ELEM_I64, 1, &two, x);
    add_in(&c, AK_ELEM_I64, 1, &two, y);
    assert_int_equal(call_op(&c, "Add", 14), AK_OK);
    assert_true(((int64_t *)c.out[0].data)[0] == ((int64_t)1 << 60) + 3);
    assert_true(((int64_t *)c.out[0].data)[1] == -((int64_t)1 << 60) + 2);
    call_free(&c);
    add_in(&c, AK_ELEM_I64, 1, &two, x);
    add_in(&c, AK_ELEM_I64, 1, &two, y);
    assert_int_equal(call_op(&c, "Pow", 15), AK_OK);
    assert_true(((int64_t *)c.out[0].data)[0] == (int64_t)((uint64_t)x[0] * (uint64_t)x[0]));
    call_free(&c);
}

static void test_bits_and_where(void **state) {
    (void)state;
    int64_t n = 4, one = 1;
    uint8_t x[4] = {1, 2, 128, 255}, s[4] = {1, 7, 8, 200};
    op_call c = {0};
    add_in(&c, AK_ELEM_U8, 1, &n, x);
    add_in(&c, AK_ELEM_U8, 1, &n, s);
    attr_str(&c, "direction", "LEFT");
    assert_int_equal(call_op(&c, "BitShift", 11), AK_OK);
    const uint8_t *y = c.out[0].data;
    assert_true(y[0] == 2 && y[1] == 0 && y[2] == 0 && y[3] == 0);
    call_free(&c);
    add_in(&c, AK_ELEM_U8, 1, &n, x);
    add_in(&c, AK_ELEM_U8, 1, &n, s);
    attr_str(&c, "direction", "UP");
    assert_int_equal(call_op(&c, "BitShift", 11), AK_ERR_INVALID_MODEL);
    call_free(&c);
    /* Where(cond[4], x[1], y[2,4]) */
    uint8_t cond[4] = {1, 0, 1, 0};
    int64_t xv = 7, yv[8] = {0, 1, 2, 3, 4, 5, 6, 7}, dy[2] = {2, 4};
    add_in(&c, AK_ELEM_BOOL, 1, &n, cond);
    add_in(&c, AK_ELEM_I64, 1, &one, &xv);
    add_in(&c, AK_ELEM_I64, 2, dy, yv);
    assert_int_equal(call_op(&c, "Where", 16), AK_OK);
    const int64_t *w = c.out[0].data;
    assert_int_equal(c.out[0].rank, 2);
    assert_true(w[0] == 7 && w[1] == 1 && w[2] == 7 && w[3] == 3 && w[4] == 7 && w[5] == 5);
    call_free(&c);
}

/* ---- variadic, legacy broadcast, Cast ------------------------------------------------- */

static void test_variadic(void **state) {
    (void)state;
    float a[6] = {1, 2, 3, 4, 5, 6}, b[3] = {10, 20, 30}, s = 100;
    int64_t da[2] = {2, 3}, db[1] = {3}, one = 1;
    op_call c = {0};
    add_in(&c, AK_ELEM_F32, 0, &one, &s);
    add_in(&c, AK_ELEM_F32, 1, db, b);
    add_in(&c, AK_ELEM_F32, 2, da, a);
    assert_int_equal(call_op(&c, "Mean", 13), AK_OK);
    const float *y = c.out[0].data;
    assert_int_equal(c.out[0].count, 6);
    for (int i = 0; i < 6; i++) assert_close(y[i], (a[i] + b[i % 3] + s) / 3, 1e-6, 0, "Mean", i);
    call_free(&c);
    add_in(&c, AK_ELEM_F32, 2, da, a);
    assert_int_equal(call_op(&c, "Max", 13), AK_OK);
    assert_memory_equal(c.out[0].data, a, sizeof a);
    call_free(&c);
}

static void test_legacy_broadcast(void **state) {
    (void)state;
    float a[24], b[3] = {1, 2, 3};
    for (int i = 0; i < 24; i++) a[i] = (float)i;
    int64_t da[4] = {2, 3, 2, 2}, db[1] = {3};
    op_call c = {0};
    add_in(&c, AK_ELEM_F32, 4, da, a);
    add_in(&c, AK_ELEM_F32, 1, db, b);
    attr_int(&c, "broadcast", 1);
    attr_int(&c, "axis", 1);
    assert_int_equal(call_op(&c, "Add", 6), AK_OK);
    const float *y = c.out[0].data;
    for (int i = 0; i < 24; i++) assert_close(y[i], a[i] + b[(i / 4) % 3], 0, 0, "Add", i);
    call_free(&c);
    /* PRelu opset 6: slope [C] per channel */
    for (int i = 0; i < 24; i++) a[i] = (float)-i;
    add_in(&c, AK_ELEM_F32, 4, da, a);
    add_in(&c, AK_ELEM_F32, 1, db, b);
    assert_int_equal(call_op(&c, "PRelu", 6), AK_OK);
    y = c.out[0].data;
    for (int i = 0; i < 24; i++) assert_close(y[i], a[i] * b[(i / 4) % 3], 0, 0, "PRelu", i);
    call_free(&c);
}

static void test_cast(void **state) {
    (void)state;
    float x[7] = {NAN, 1e20f, -1e20f, -2.7f, 2.7f, 65520.0f, 1.0f / 3};
    int64_t n = 7;
    op_call c = {0};
    add_in(&c, AK_ELEM_F32, 1, &n, x);
    attr_int(&c, "to", AK_ELEM_I32);
    assert_int_equal(call_op(&c, "Cast", 13), AK_OK);
    const int32_t *i32 = c.out[0].data;
    assert_true(i32[0] == 0 && i32[1] == INT32_MAX && i32[2] == INT32_MIN && i32[3] == -2 &&
                i32[4] == 2);
    call_free(&c);
    add_in(&c, AK_ELEM_F32, 1, &n, x);
    attr_int(&c, "to", AK_ELEM_F16);
    assert_int_equal(call_op(&c, "Cast", 13), AK_OK);
    const uint16_t *h = c.out[0].data;
    assert_int_equal(h[5], 0x7c00); /* 65520 rounds to +inf */
    assert_int_equal(h[6], ak__f32_to_f16_ref(1.0f / 3));
    call_free(&c);
    add_in(&c, AK_ELEM_F32, 1, &n, x);
    attr_int(&c, "to", AK_ELEM_BOOL);
    assert_int_equal(call_op(&c, "Cast", 13), AK_OK);
    assert_int_equal(((uint8_t *)c.out[0].data)[0], 1); /* NaN is true */
    call_free(&c);
    uint64_t big[2] = {UINT64_MAX, 3};
    int64_t two = 2;
    add_in(&c, AK_ELEM_U64, 1, &two, big);
    attr_int(&c, "to", AK_ELEM_F64);
    assert_int_equal(call_op(&c, "Cast", 13), AK_OK);
    assert_true(((double *)c.out[0].data)[0] == 18446744073709551615.0);
    call_free(&c);
    add_in(&c, AK_ELEM_F16, 1, &n, x); /* float16 -> string is refused by name */
    attr_int(&c, "to", AK_ELEM_STRING);
    assert_int_equal(call_op(&c, "Cast", 13), AK_ERR_UNSUPPORTED);
    call_free(&c);
    add_in(&c, AK_ELEM_F32, 1, &n, x);
    attr_int(&c, "to", 99);
    assert_int_equal(call_op(&c, "Cast", 13), AK_ERR_INVALID_MODEL);
    call_free(&c);
}

/* float16 / bfloat16 go through float32 in chunks: a length crossing the chunk size, a
 * broadcast operand, a comparison into bool and an activation. */
static void test_half_types(void **state) {
    (void)state;
    enum { N = 600 };
    uint16_t a[N], b = ak__f32_to_f16_ref(0.25f);
    for (int i = 0; i < N; i++) a[i] = ak__f32_to_f16_ref((float)(i % 50) / 8 - 3);
    int64_t n = N, one = 1;
    op_call c = {0};
    add_in(&c, AK_ELEM_F16, 1, &n, a);
    add_in(&c, AK_ELEM_F16, 0, &one, &b);
    assert_int_equal(call_op(&c, "Add", 14), AK_OK);
    const uint16_t *y = c.out[0].data;
    for (int i = 0; i < N; i++)
        assert_int_equal(y[i], ak__f32_to_f16_ref(ak__f16_to_f32_ref(a[i]) + 0.25f));
    call_free(&c);
    add_in(&c, AK_ELEM_F16, 1, &n, a);
    add_in(&c, AK_ELEM_F16, 0, &one, &b);
    assert_int_equal(call_op(&c, "Greater", 13), AK_OK);
    assert_int_equal(c.out[0].type, AK_ELEM_BOOL);
    for (int i = 0; i < N; i++)
        assert_int_equal(((uint8_t *)c.out[0].data)[i], ak__f16_to_f32_ref(a[i]) > 0.25f);
    call_free(&c);
    uint16_t bf[N];
    for (int i = 0; i < N; i++) bf[i] = ak__f32_to_bf16_ref((float)(i % 50) / 8 - 3);
    add_in(&c, AK_ELEM_BF16, 1, &n, bf);
    assert_int_equal(call_op(&c, "Sigmoid", 13), AK_OK);
    y = c.out[0].data;
    for (int i = 0; i < N; i++) {
        double x = ak__bf16_to_f32_ref(bf[i]);
        assert_close(ak__bf16_to_f32_ref(y[i]), 1 / (1 + exp(-x)), 8e-3, 0, "Sigmoid", x);
    }
    call_free(&c);
    float f[2] = {1.00390625f, 1.01171875f}; /* halfway cases: round to even */
    int64_t two = 2;
    add_in(&c, AK_ELEM_F32, 1, &two, f);
    attr_int(&c, "to", AK_ELEM_BF16);
    assert_int_equal(call_op(&c, "Cast", 13), AK_OK);
    assert_int_equal(((uint16_t *)c.out[0].data)[0], 0x3f80);
    assert_int_equal(((uint16_t *)c.out[0].data)[1], 0x3f82);
    call_free(&c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_broadcast_shapes), cmocka_unit_test(test_broadcast_errors),
        cmocka_unit_test(test_activations),      cmocka_unit_test(test_clip_and_relu),
        cmocka_unit_test(test_integer_division), cmocka_unit_test(test_bits_and_where),
        cmocka_unit_test(test_variadic),         cmocka_unit_test(test_legacy_broadcast),
        cmocka_unit_test(test_cast),             cmocka_unit_test(test_half_types),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
