/* Tests of the elementwise kernels (add, scale, axpy, sum over f32 / f16 / bf16): every
 * variant against the scalar reference over lengths around the vector and unroll widths,
 * in-place and out-of-place, misaligned, with guard bytes; special values; and argument
 * checking of the public entry points.
 *
 * Tolerances: add, scale and axpy must equal the reference bit for bit in every dtype
 * (all variants compute in f32 with the same single rounding; axpy is one FMA, which the
 * reference computes with fmaf). NaN results only have to be NaN (which input's payload
 * wins depends on operand order). sum may differ from the reference's double
 * accumulation by 1e-6 of the sum of magnitudes. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "accelkit/kernels.h"
#include "core/half.h"
#include "guarded.h"
#include "kernels/dispatch.h"

static const char *const variants[] = {"generic", "avx2", "avx512"};
#define NVARIANTS (sizeof variants / sizeof variants[0])

static const size_t lengths[] = {0, 1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 1000, 4099};
#define NLENGTHS (sizeof lengths / sizeof lengths[0])

static const ak_dtype dtypes[] = {AK_DTYPE_F32, AK_DTYPE_F16, AK_DTYPE_BF16};

typedef enum { OP_ADD, OP_SCALE, OP_AXPY, OP_COUNT } vec_op;
static const char *const op_names[] = {"add", "scale", "axpy"};

static const float alpha = -1.375f;

static const ak__kernels *ref(void) {
    const ak__kernels *k = ak__kernels_for("ref");
    assert_non_null(k);
    return k;
}

static size_t esize(ak_dtype dt) { return dt == AK_DTYPE_F32 ? 4 : 2; }

/* ---- calling a table by dtype --------------------------------------------------------- */

/* dst = a op b; for axpy dst is y and must already hold a (y += alpha*b). */
static void run_op(const ak__kernels *k, vec_op op, ak_dtype dt, void *dst, const void *a,
                   const void *b, size_t n) {
    switch (op) {
    case OP_ADD:
        if (dt == AK_DTYPE_F32) k->f32_add(dst, a, b, n);
        else if (dt == AK_DTYPE_F16) k->f16_add(dst, a, b, n);
        else k->bf16_add(dst, a, b, n);
        break;
    case OP_SCALE:
        if (dt == AK_DTYPE_F32) k->f32_scale(dst, a, alpha, n);
        else if (dt == AK_DTYPE_F16) k->f16_scale(dst, a, alpha, n);
        else k->bf16_scale(dst, a, alpha, n);
        break;
    default:
        if (dt == AK_DTYPE_F32) k->f32_axpy(dst, alpha, b, n);
        else if (dt == AK_DTYPE_F16) k->f16_axpy(dst, alpha, b, n);
        else k->bf16_axpy(dst, alpha, b, n);
        break;
    }
}

static double run_sum(const ak__kernels *k, ak_dtype dt, const void *x, size_t n) {
    if (dt == AK_DTYPE_F32) return k->f32_sum(x, n);
    if (dt == AK_DTYPE_F16) return k->f16_sum(x, n);
    return k->bf16_sum(x, n);
}

static float value_at(ak_dtype dt, const void *p, size_t i) {
    if (dt == AK_DTYPE_F32) return ((const float *)p)[i];
    uint16_t h = ((const uint16_t *)p)[i];
    return dt == AK_DTYPE_F16 ? ak__f16_to_f32_ref(h) : ak__bf16_to_f32_ref(h);
}

static void set_value(ak_dtype dt, void *p, size_t i, float f) {
    if (dt == AK_DTYPE_F32) ((float *)p)[i] = f;
    else if (dt == AK_DTYPE_F16) ((uint16_t *)p)[i] = ak__f32_to_f16_ref(f);
    else ((uint16_t *)p)[i] = ak__f32_to_bf16_ref(f);
}

static void fill_random(ak_dtype dt, void *p, size_t n, uint64_t *seed) {
    for (size_t i = 0; i < n; i++) set_value(dt, p, i, test_rand_f32(seed) * 4.0f);
}

/* Bit-equal, or both NaN. */
static void expect_same(const char *what, ak_dtype dt, const void *got, const void *want,
                        size_t n) {
    for (size_t i = 0; i < n; i++) {
        float g = value_at(dt, got, i), w = value_at(dt, want, i);
        int same = dt == AK_DTYPE_F32 ? ak__f32_bits(g) == ak__f32_bits(w)
                                      : ((const uint16_t *)got)[i] == ((const uint16_t *)want)[i];
        if (!same && !(isnan(g) && isnan(w)))
            fail_msg("%s %s: n=%zu i=%zu got %.9g want %.9g", what, ak_dtype_name(dt), n, i,
                     (double)g, (double)w);
    }
}

/* ---- variants against the reference --------------------------------------------------- */

/* One (variant, op, dtype, n): out-of-place into a guarded buffer and in-place on a copy
 * of a, both misaligned against the vector width, both compared with the reference. */
static void check_op(const char *variant, const ak__kernels *k, vec_op op, ak_dtype dt,
                     size_t n, uint64_t *seed) {
    size_t es = esize(dt), bytes = n * es;
    char what[64];
    snprintf(what, sizeof what, "%s %s", variant, op_names[op]);
    guarded_buf a = guarded_alloc(bytes, es), b = guarded_alloc(bytes, 2 * es);
    guarded_buf out = guarded_alloc(bytes, 3 * es), in = guarded_alloc(bytes, es);
    void *want = malloc(bytes + 1), *a_copy = malloc(bytes + 1);
    assert_non_null(want);
    assert_non_null(a_copy);
    fill_random(dt, a.data, n, seed);
    fill_random(dt, b.data, n, seed);
    memcpy(a_copy, a.data, bytes);

    memcpy(want, a.data, bytes); /* axpy updates its y in place */
    run_op(ref(), op, dt, want, a.data, b.data, n);

    if (op != OP_AXPY) { /* out of place (axpy has no out-of-place form) */
        run_op(k, op, dt, out.data, a.data, b.data, n);
        expect_same(what, dt, out.data, want, n);
        assert_true(guarded_intact(&out));
        assert_memory_equal(a.data, a_copy, bytes); /* inputs untouched */
    }
    memcpy(in.data, a.data, bytes); /* in place: dst == a (== y for axpy) */
    run_op(k, op, dt, in.data, in.data, b.data, n);
    expect_same(what, dt, in.data, want, n);
    assert_true(guarded_intact(&in));

    free(want);
    free(a_copy);
    guarded_free(&a);
    guarded_free(&b);
    guarded_free(&out);
    guarded_free(&in);
}

static void test_elementwise_vs_ref(void **state) {
    (void)state;
    uint64_t seed = 42;
    for (size_t v = 0; v < NVARIANTS; v++) {
        const ak__kernels *k = ak__kernels_for(variants[v]);
        if (!k) continue;
        for (int op = 0; op < OP_COUNT; op++)
            for (size_t d = 0; d < 3; d++)
                for (size_t l = 0; l < NLENGTHS; l++)
                    check_op(variants[v], k, (vec_op)op, dtypes[d], lengths[l], &seed);
    }
}

/* Out of place over 8 Mi + 13 elements: 48+ MiB of traffic, which takes the streaming
 * store path on machines whose last-level cache is under 96 MiB (check_op misaligns
 * the output, so the aligned head runs too). */
static void test_elementwise_large(void **state) {
    (void)state;
    uint64_t seed = 4242;
    const size_t n = ((size_t)8 << 20) + 13;
    for (size_t v = 0; v < NVARIANTS; v++) {
        const ak__kernels *k = ak__kernels_for(variants[v]);
        if (!k) continue;
        for (size_t d = 0; d < 3; d++) {
            check_op(variants[v], k, OP_ADD, dtypes[d], n, &seed);
            check_op(variants[v], k, OP_SCALE, dtypes[d], n, &seed);
        }
    }
}

/* |sum - ref| <= 1e-6 * sum |x| */
static void check_sum(const char *variant, const ak__kernels *k, ak_dtype dt, size_t n,
                      uint64_t *seed) {
    guarded_buf x = guarded_alloc(n * esize(dt), esize(dt));
    fill_random(dt, x.data, n, seed);
    double want = run_sum(ref(), dt, x.data, n), got = run_sum(k, dt, x.data, n);
    double magnitude = 0.0;
    for (size_t i = 0; i < n; i++) magnitude += fabs((double)value_at(dt, x.data, i));
    if (fabs(got - want) > 1e-6 * magnitude)
        fail_msg("%s sum %s n=%zu: got %.17g want %.17g", variant, ak_dtype_name(dt), n, got,
                 want);
    guarded_free(&x);
}

static void test_sum_vs_ref(void **state) {
    (void)state;
    uint64_t seed = 99;
    static const size_t long_lengths[] = {20000, 1 << 20};
    for (size_t v = 0; v < NVARIANTS; v++) {
        const ak__kernels *k = ak__kernels_for(variants[v]);
        if (!k) continue;
        for (size_t d = 0; d < 3; d++) {
            for (size_t l = 0; l < NLENGTHS; l++)
                check_sum(variants[v], k, dtypes[d], lengths[l], &seed);
            for (size_t l = 0; l < 2; l++)
                check_sum(variants[v], k, dtypes[d], long_lengths[l], &seed);
        }
    }
}

/* NaN, Inf, signed zeros, subnormals and results that overflow the 16-bit formats. */
static void test_special_values(void **state) {
    (void)state;
    static const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1e-40f, -1e-40f,
                                     65504.0f, 60000.0f, 3e38f, -3e38f, 5.9604645e-08f, 1.0f,
                                     -1.0f, 0.5f, 1e-8f, 2.9802322e-08f};
    enum { NS = sizeof specials / sizeof specials[0], N = NS * NS };
    for (size_t d = 0; d < 3; d++) {
        ak_dtype dt = dtypes[d];
        size_t bytes = N * esize(dt);
        void *a = malloc(bytes), *b = malloc(bytes), *want = malloc(bytes), *got = malloc(bytes);
        assert_true(a && b && want && got);
        for (size_t i = 0; i < N; i++) { /* every pair */
            set_value(dt, a, i, specials[i / NS]);
            set_value(dt, b, i, specials[i % NS]);
        }
        for (size_t v = 0; v < NVARIANTS; v++) {
            const ak__kernels *k = ak__kernels_for(variants[v]);
            if (!k) continue;
            for (int op = 0; op < OP_COUNT; op++) {
                memcpy(want, a, bytes);
                memcpy(got, a, bytes);
                run_op(ref(), (vec_op)op, dt, want, want, b, N);
                run_op(k, (vec_op)op, dt, got, got, b, N);
                expect_same(op_names[op], dt, got, want, N);
            }
            double s = run_sum(k, dt, a, N);
            assert_true(isnan(s)); /* NaN and both infinities are in there */
        }
        free(a);
        free(b);
        free(want);
        free(got);
    }
}

/* ---- the public entry points ----------------------------------------------------------- */

static void expect_invalid(ak_status st) {
    assert_int_equal(st, AK_ERR_INVALID_ARG);
    assert_true(strlen(ak_last_error()) > 0);
    ak_clear_error();
}

static void test_public_api(void **state) {
    (void)state;
    float a[33], b[33], d[33];
    uint16_t h[33], hb[33];
    for (int i = 0; i < 33; i++) {
        a[i] = (float)i;
        b[i] = 0.5f;
        h[i] = ak__f32_to_f16_ref((float)i);
        hb[i] = ak__f32_to_bf16_ref(1.0f);
    }
    assert_int_equal(ak_vec_add(AK_DTYPE_F32, d, a, b, 33), AK_OK);
    assert_true(d[0] == 0.5f && d[32] == 32.5f);
    assert_int_equal(ak_vec_add(AK_DTYPE_F32, a, a, b, 33), AK_OK); /* dst == a */
    assert_int_equal(ak_vec_add(AK_DTYPE_F32, b, a, b, 33), AK_OK); /* dst == b */
    assert_true(a[32] == 32.5f && b[32] == 33.0f);
    assert_int_equal(ak_vec_scale(AK_DTYPE_F16, h, h, 2.0f, 33), AK_OK);
    assert_int_equal(h[32], ak__f32_to_f16_ref(64.0f));
    assert_int_equal(ak_vec_axpy(AK_DTYPE_BF16, hb, 3.0f, hb, 33), AK_OK);
    assert_int_equal(hb[7], ak__f32_to_bf16_ref(4.0f));
    double s = 0.0;
    assert_int_equal(ak_vec_sum(AK_DTYPE_F16, h, 33, &s), AK_OK);
    assert_true(s == 2.0 * (32 * 33 / 2));
    assert_int_equal(ak_vec_sum(AK_DTYPE_BF16, NULL, 0, &s), AK_OK);
    assert_true(s == 0.0);
    assert_int_equal(ak_vec_add(AK_DTYPE_F16, NULL, NULL, NULL, 0), AK_OK);

    expect_invalid(ak_vec_add(AK_DTYPE_F32, NULL, a, b, 4));
    expect_invalid(ak_vec_add(AK_DTYPE_F32, d, NULL, b, 4));
    expect_invalid(ak_vec_add(AK_DTYPE_F32, d, a, NULL, 4));
    expect_invalid(ak_vec_scale(AK_DTYPE_F16, h, (const char *)h + 1, 2.0f, 4)); /* odd */
    expect_invalid(ak_vec_axpy(AK_DTYPE_F32, (char *)d + 2, 1.0f, a, 4));
    expect_invalid(ak_vec_add((ak_dtype)AK_DTYPE_COUNT_, d, a, b, 4));
    expect_invalid(ak_vec_sum((ak_dtype)-1, a, 4, &s));
    expect_invalid(ak_vec_sum(AK_DTYPE_F32, a, 4, NULL));
    expect_invalid(ak_vec_add(AK_DTYPE_F32, a + 1, a, b, 8)); /* partial overlap */
    expect_invalid(ak_vec_scale(AK_DTYPE_BF16, h, h + 3, 1.0f, 8));
    expect_invalid(ak_vec_axpy(AK_DTYPE_F16, h + 1, 1.0f, h, 8));
    expect_invalid(ak_vec_add(AK_DTYPE_F32, d, a, b, SIZE_MAX / 2)); /* n * 4 overflows */

    size_t sz = 0;
    assert_int_equal(ak_dtype_size(AK_DTYPE_BF16, &sz), AK_OK);
    assert_int_equal(sz, 2);
    expect_invalid(ak_dtype_size(AK_DTYPE_COUNT_, &sz));
    assert_string_equal(ak_dtype_name(AK_DTYPE_F32), "f32");
    assert_string_equal(ak_dtype_name(AK_DTYPE_COUNT_), "unknown");
}

int main(void) {
    if (ak_init() != AK_OK) {
        fprintf(stderr, "ak_init failed: %s\n", ak_last_error());
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_elementwise_vs_ref),
        cmocka_unit_test(test_elementwise_large),
        cmocka_unit_test(test_sum_vs_ref),
        cmocka_unit_test(test_special_values),
        cmocka_unit_test(test_public_api),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
