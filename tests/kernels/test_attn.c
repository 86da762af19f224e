/* The attention kernels over f16 rows (f16_dot_rows, f16_madd_rows) of every variant
 * against the scalar reference: head sizes around the 8- and 32-wide vector steps, row
 * counts around the 4-row groups, misaligned buffers inside guard bytes. Variants sum in
 * other orders than the reference, so each result must lie within a bound derived from
 * the magnitudes of its terms. */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "accelkit/kernels.h"
#include "core/half.h"
#include "guarded.h"
#include "kernels/dispatch.h"

static const char *const variants[] = {"ref", "generic", "avx2", "avx512"};
#define NVARIANTS (sizeof variants / sizeof variants[0])

static float rnd(uint64_t *s) {
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((double)(*s >> 40) / (double)(1ULL << 24) * 2.0 - 1.0);
}

static const size_t dims[] = {1, 7, 8, 24, 32, 40, 64, 100, 128};
static const size_t ns[] = {1, 3, 4, 5, 16};

/* rows[n][dim] f16 of random values, q[dim] (or p[n]) f32; bound[i] = Σ|terms|·ε·(K+2) */
static void check_dot(const ak__kernels *ref, const ak__kernels *k, size_t n, size_t dim,
                      uint64_t *seed) {
    guarded_buf rows_g = guarded_alloc(n * dim * sizeof(uint16_t) + 2, 2);
    uint16_t *rows = rows_g.data;
    float *q = malloc(dim * sizeof *q), *want = malloc(n * sizeof *want);
    guarded_buf out_g = guarded_alloc(n * sizeof(float), 0);
    float *out = out_g.data;
    for (size_t i = 0; i < n * dim; i++) rows[i] = ak__f32_to_f16_ref(rnd(seed) * 4);
    for (size_t d = 0; d < dim; d++) q[d] = rnd(seed);
    ref->f16_dot_rows(want, q, rows, n, dim, 0.125f);
    k->f16_dot_rows(out, q, rows, n, dim, 0.125f);
    for (size_t j = 0; j < n; j++) {
        double mag = 0;
        for (size_t d = 0; d < dim; d++)
            mag += fabs((double)q[d] * ak__f16_to_f32_ref(rows[j * dim + d]));
        double bound = 0.125 * mag * FLT_EPSILON * (double)(dim + 2) + 1e-30;
        if (!(fabs((double)out[j] - want[j]) <= bound))
            fail_msg("%s f16_dot_rows n=%zu dim=%zu row %zu: %.9g, reference %.9g", k->name, n,
                     dim, j, (double)out[j], (double)want[j]);
    }
    assert_true(guarded_intact(&rows_g) && guarded_intact(&out_g));
    guarded_free(&rows_g);
    guarded_free(&out_g);
    free(q);
    free(want);
}

static void check_madd(const ak__kernels *ref, const ak__kernels *k, size_t n, size_t dim,
                       uint64_t *seed) {
    uint16_t *rows = malloc(n * dim * sizeof *rows);
    float *p = malloc(n * sizeof *p), *o0 = malloc(dim * sizeof *o0), *want = malloc(dim * sizeof *want);
    guarded_buf out_g = guarded_alloc(dim * sizeof(float), 4);
    float *out = out_g.data;
    for (size_t i = 0; i < n * dim; i++) rows[i] = ak__f32_to_f16_ref(rnd(seed) * 4);
    for (size_t j = 0; j < n; j++) p[j] = (rnd(seed) + 1) / 2;
    for (size_t d = 0; d < dim; d++) o0[d] = rnd(seed);
    memcpy(want, o0, dim * sizeof *o0);
    memcpy(out, o0, dim * sizeof *o0);
    ref->f16_madd_rows(want, p, rows, n, dim);
    k->f16_madd_rows(out, p, rows, n, dim);
    for (size_t d = 0; d < dim; d++) {
        double mag = fabs((double)o0[d]);
        for (size_t j = 0; j < n; j++) mag += fabs((double)p[j] * ak__f16_to_f32_ref(rows[j * dim + d]));
        double bound = mag * FLT_EPSILON * (double)(n + 2) + 1e-30;
        if (!(fabs((double)out[d] - want[d]) <= bound))
            fail_msg("%s f16_madd_rows n=%zu dim=%zu element %zu: %.9g, reference %.9g", k->name,
                     n, dim, d, (double)out[d], (double)want[d]);
    }
    assert_true(guarded_intact(&out_g));
    guarded_free(&out_g);
    free(rows);
    free(p);
    free(o0);
    free(want);
}

static void test_variants_vs_ref(void **state) {
    (void)state;
    const ak__kernels *ref = ak__kernels_for("ref");
    assert_non_null(ref);
    uint64_t seed = 7;
    for (size_t v = 0; v < NVARIANTS; v++) {
        const ak__kernels *k = ak__kernels_for(variants[v]);
        if (!k) continue;
        for (size_t a = 0; a < sizeof dims / sizeof dims[0]; a++)
            for (size_t b = 0; b < sizeof ns / sizeof ns[0]; b++) {
                check_dot(ref, k, ns[b], dims[a], &seed);
                check_madd(ref, k, ns[b], dims[a], &seed);
            }
    }
}

/* The reference itself on a case worked by hand: rows {1, 2} and {0.5, -1}, q = {2, 1}. */
static void test_reference_by_hand(void **state) {
    (void)state;
    const ak__kernels *ref = ak__kernels_for("ref");
    uint16_t rows[4] = {0x3c00, 0x4000, 0x3800, 0xbc00}; /* 1, 2, 0.5, -1 */
    float q[2] = {2, 1}, out[2], o[2] = {1, 1}, p[2] = {0.5f, 2};
    ref->f16_dot_rows(out, q, rows, 2, 2, 0.5f);
    assert_true(out[0] == 2.0f && out[1] == 0.0f); /* (2+2)/2, (1-1)/2 */
    ref->f16_madd_rows(o, p, rows, 2, 2);
    assert_true(o[0] == 2.5f && o[1] == 0.0f); /* 1 + 0.5 + 1, 1 + 1 - 2 */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_by_hand),
        cmocka_unit_test(test_variants_vs_ref),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
