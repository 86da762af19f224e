/* SGEMM tests: every variant table (generic, avx2, avx512, and ref against itself) is
 * compared with the scalar reference over sizes around the tile (MR/NR) and block
 * (KC/MC/NC) boundaries, all four transpose combinations, several alpha/beta, padded
 * leading dimensions, guard bytes around C and threaded pools; plus argument checks of
 * the public ak_sgemm.
 *
 * Tolerance: |C - C_ref| ≤ 2·(K+2)·eps_f32·(|alpha|·Σ_p |a_ip||b_pj| + |beta|·|c_ij|) + 1e-30,
 * the forward error bound of a float dot product of length K (the reference accumulates
 * in double, so its own error is negligible). */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "accelkit/kernels.h"
#include "core/init.h"
#include "guarded.h"
#include "kernels/dispatch.h"
#include "kernels/gemm.h"

static const char *const variants[] = {"ref", "generic", "avx2", "avx512", "avx512w"};
#define N_VARIANTS (sizeof variants / sizeof variants[0])

typedef struct gemm_case {
    int ta, tb;
    size_t M, N, K;
    float alpha, beta;
    size_t lda, ldb, ldc;
} gemm_case;

/* Inputs and the expected output of one case, built once and shared by all variants. */
typedef struct gemm_data {
    float *A, *B, *C0, *ref, *bound;
} gemm_data;

static size_t a_rows(const gemm_case *c) { return c->ta ? c->K : c->M; }
static size_t b_rows(const gemm_case *c) { return c->tb ? c->N : c->K; }

static float *rand_matrix(size_t n, uint64_t *seed) {
    float *m = malloc((n ? n : 1) * sizeof(float));
    assert_non_null(m);
    for (size_t i = 0; i < n; i++) m[i] = test_rand_f32(seed);
    return m;
}

/* A copy of x, with absolute values when `absolute`. */
static float *copy_matrix(const float *x, size_t n, int absolute) {
    float *y = malloc((n ? n : 1) * sizeof(float));
    assert_non_null(y);
    for (size_t i = 0; i < n; i++) y[i] = absolute ? fabsf(x[i]) : x[i];
    return y;
}

static gemm_data data_make(const gemm_case *c, uint64_t seed) {
    gemm_data d;
    size_t na = a_rows(c) * c->lda, nb = b_rows(c) * c->ldb, nc = c->M * c->ldc;
    d.A = rand_matrix(na, &seed);
    d.B = rand_matrix(nb, &seed);
    d.C0 = rand_matrix(nc, &seed);
    if (c->beta == 0.0f) /* beta 0 must ignore C: NaN there must not reach the output */
        for (size_t i = 0; i < nc; i++) d.C0[i] = NAN;
    d.ref = copy_matrix(d.C0, nc, 0);
    ak_f32_gemm__ref(c->ta, c->tb, c->M, c->N, c->K, c->alpha, d.A, c->lda, d.B, c->ldb, c->beta,
                  d.ref, c->ldc, NULL);
    /* the error bound's scale: |alpha|·|A||B| + |beta||C| */
    float *aa = copy_matrix(d.A, na, 1), *ab = copy_matrix(d.B, nb, 1);
    d.bound = copy_matrix(d.C0, nc, 1);
    ak_f32_gemm__ref(c->ta, c->tb, c->M, c->N, c->K, fabsf(c->alpha), aa, c->lda, ab, c->ldb,
                  fabsf(c->beta), d.bound, c->ldc, NULL);
    free(aa);
    free(ab);
    return d;
}

static void data_free(gemm_data *d) {
    free(d->A);
    free(d->B);
    free(d->C0);
    free(d->ref);
    free(d->bound);
}

/* Runs `k` on the case with C in a guarded buffer and checks every element: in-tile
 * ones against the reference, the ldc padding and the guards untouched. */
static void check_variant(const ak__kernels *k, const gemm_case *c, const gemm_data *d,
                          ak_threadpool *pool) {
    size_t nc = c->M * c->ldc;
    guarded_buf g = guarded_alloc(nc * sizeof(float), 0);
    float *C = g.data;
    for (size_t i = 0; i < nc; i++) C[i] = d->C0[i];
    k->sgemm(c->ta, c->tb, c->M, c->N, c->K, c->alpha, d->A, c->lda, d->B, c->ldb, c->beta, C,
             c->ldc, pool);
    double tol_scale = 2.0 * (double)(c->K + 2) * (double)FLT_EPSILON;
    for (size_t i = 0; i < c->M; i++) {
        for (size_t j = 0; j < c->ldc; j++) {
            size_t at = i * c->ldc + j;
            int bad;
            if (j >= c->N) /* padding between rows: must be left alone (NaN-safe compare) */
                bad = memcmp(&C[at], &d->C0[at], sizeof(float)) != 0;
            else
                bad = !(fabs((double)C[at] - (double)d->ref[at]) <=
                        tol_scale * (double)d->bound[at] + 1e-30);
            if (bad) {
                print_error("%s: ta=%d tb=%d M=%zu N=%zu K=%zu alpha=%g beta=%g lda=%zu "
                            "ldb=%zu ldc=%zu: C[%zu][%zu]=%.9g, expected %.9g\n",
                            k->name, c->ta, c->tb, c->M, c->N, c->K, (double)c->alpha,
                            (double)c->beta, c->lda, c->ldb, c->ldc, i, j, (double)C[at],
                            (double)d->ref[at]);
                fail();
            }
        }
    }
    assert_true(guarded_intact(&g));
    guarded_free(&g);
}

/* Checks every available variant on one case. */
static void check_case(const gemm_case *c, ak_threadpool *pool, uint64_t seed) {
    gemm_data d = data_make(c, seed);
    for (size_t v = 0; v < N_VARIANTS; v++) {
        const ak__kernels *k = ak__kernels_for(variants[v]);
        if (k) check_variant(k, c, &d, pool);
    }
    data_free(&d);
}

static gemm_case make_case(int ta, int tb, size_t M, size_t N, size_t K, float alpha,
                           float beta, size_t pad) {
    gemm_case c = {ta, tb, M, N, K, alpha, beta, 0, 0, 0};
    c.lda = (ta ? M : K) + pad;
    c.ldb = (tb ? K : N) + pad * 2;
    c.ldc = N + pad * 3;
    return c;
}

static const float alphas[] = {1.0f, -0.5f};
static const float betas[] = {0.0f, 1.0f, 0.5f};

/* Sweeps sizes × transposes, rotating alpha/beta/padding through the cases. */
static void sweep(const size_t *Ms, size_t nM, const size_t *Ns, size_t nN, const size_t *Ks,
                  size_t nK, ak_threadpool *pool) {
    size_t idx = 0;
    for (int t = 0; t < 4; t++)
        for (size_t im = 0; im < nM; im++)
            for (size_t in = 0; in < nN; in++)
                for (size_t ik = 0; ik < nK; ik++, idx++) {
                    gemm_case c = make_case(t & 1, t >> 1, Ms[im], Ns[in], Ks[ik],
                                            alphas[idx % 2], betas[idx % 3], idx % 4 == 0 ? 0 : 3);
                    check_case(&c, pool, idx + 1);
                }
}

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* Around the tiles: MR is 4 or 6, NR 8 or 16; M 1..5 each take the AVX2 kernel's
 * own edge code (1-5 valid rows). */
static void test_tile_edges(void **state) {
    (void)state;
    static const size_t Ms[] = {1, 2, 3, 4, 5, 6, 7, 12, 15};
    static const size_t Ns[] = {1, 15, 16, 17, 32, 33};
    static const size_t Ks[] = {1, 7, 8, 9, 64};
    sweep(Ms, COUNT(Ms), Ns, COUNT(Ns), Ks, COUNT(Ks), NULL);
}

/* Around the default blocks: KC 256, MC 128-132 (several A blocks, shared B panel). */
static void test_block_edges(void **state) {
    (void)state;
    static const size_t Ms[] = {37, 139};
    static const size_t Ns[] = {31, 48};
    static const size_t Ks[] = {255, 256, 257, 600};
    sweep(Ms, COUNT(Ms), Ns, COUNT(Ns), Ks, COUNT(Ks), NULL);
}

static void set_blocks(const char *kc, const char *mc, const char *nc) {
    setenv("AK_GEMM_KC", kc, 1);
    setenv("AK_GEMM_MC", mc, 1);
    setenv("AK_GEMM_NC", nc, 1);
    assert_int_equal(ak__init_reset(), AK_OK);
}

/* Small forced blocks put every loop (jc, pc, ic, parts) through several iterations and
 * odd remainders on cheap sizes; with 2 and 3 threads the tasks split rows and columns. */
static void test_forced_blocks_threads(void **state) {
    (void)state;
    static const size_t Ms[] = {7, 50};
    static const size_t Ns[] = {45, 100};
    static const size_t Ks[] = {30, 77};
    set_blocks("16", "12", "32");
    for (int nt = 1; nt <= 3; nt++) {
        ak_threadpool *pool;
        assert_int_equal(ak_threadpool_create(nt, &pool), AK_OK);
        sweep(Ms, COUNT(Ms), Ns, COUNT(Ns), Ks, COUNT(Ks), pool);
        ak_threadpool_free(pool);
    }
    unsetenv("AK_GEMM_KC");
    unsetenv("AK_GEMM_MC");
    unsetenv("AK_GEMM_NC");
    assert_int_equal(ak__init_reset(), AK_OK);
}

/* Default blocks on larger shapes with 2- and 3-thread pools (several MC blocks / the
 * fused small-M path). */
static void test_threaded(void **state) {
    (void)state;
    for (int nt = 2; nt <= 3; nt++) {
        ak_threadpool *pool;
        assert_int_equal(ak_threadpool_create(nt, &pool), AK_OK);
        for (int t = 0; t < 4; t++) {
            gemm_case big = make_case(t & 1, t >> 1, 300, 90, 270, 1.0f, t % 2 ? 0.5f : 0.0f, 1);
            gemm_case wide = make_case(t & 1, t >> 1, 20, 260, 100, -0.5f, 1.0f, 2);
            check_case(&big, pool, 100 + (uint64_t)t);
            check_case(&wide, pool, 200 + (uint64_t)t);
        }
        ak_threadpool_free(pool);
    }
}

/* The driver's paths at default blocks: many rows (MC blocks sharing a packed B panel),
 * few rows (one A block, B packed sliver by sliver), and with 2-3 threads a cut along N
 * into several regions sharing A packed once for all K slices (K > KC). */
static void test_paths(void **state) {
    (void)state;
    for (int t = 0; t < 4; t++) {
        gemm_case tall = make_case(t & 1, t >> 1, 400, 20, 260, 1.0f, 0.5f, t % 2);
        check_case(&tall, NULL, 300 + (uint64_t)t);
    }
    for (int nt = 2; nt <= 3; nt++) {
        ak_threadpool *pool;
        assert_int_equal(ak_threadpool_create(nt, &pool), AK_OK);
        for (int t = 0; t < 4; t++) {
            gemm_case few = make_case(t & 1, t >> 1, 13, 200, 600, -0.5f, t % 2 ? 1.0f : 0.0f, 1);
            gemm_case ragged = make_case(t & 1, t >> 1, 49, 157, 300, 1.0f, 0.5f, 0);
            check_case(&few, pool, 400 + (uint64_t)t);
            check_case(&ragged, pool, 500 + (uint64_t)t);
            /* 1-4 rows of plain B: rows of B summed into C, cut into column chunks (one
             * chunk of M·N over 16 KiB is cut further) */
            gemm_case row1 = make_case(t & 1, 0, 1, 1000, 300, 1.0f, t % 2 ? 0.5f : 0.0f, 1);
            gemm_case row4 = make_case(t & 1, 0, 4, 1500, 70, -0.5f, 1.0f, t % 2);
            check_case(&row1, pool, 600 + (uint64_t)t);
            check_case(&row4, pool, 700 + (uint64_t)t);
        }
        ak_threadpool_free(pool);
    }
}

/* The public entry point on the active table, plus its K == 0 / alpha == 0 shortcuts. */
static void test_public_api(void **state) {
    (void)state;
    gemm_case c = make_case(AK_TRANS, AK_NO_TRANS, 70, 40, 90, 1.0f, 0.0f, 2);
    gemm_data d = data_make(&c, 7);
    float *C = malloc(c.M * c.ldc * sizeof(float));
    for (size_t i = 0; i < c.M * c.ldc; i++) C[i] = d.C0[i];
    assert_int_equal(ak_sgemm(AK_TRANS, AK_NO_TRANS, c.M, c.N, c.K, c.alpha, d.A, c.lda, d.B,
                              c.ldb, c.beta, C, c.ldc, NULL),
                     AK_OK);
    for (size_t i = 0; i < c.M; i++)
        for (size_t j = 0; j < c.N; j++)
            assert_true(fabsf(C[i * c.ldc + j] - d.ref[i * c.ldc + j]) <= 1e-4f);
    /* alpha == 0, beta == 0: zeros even over NaN; K == 0, beta 0.5: C halves */
    for (size_t i = 0; i < c.M * c.ldc; i++) C[i] = NAN;
    assert_int_equal(ak_sgemm(0, 0, c.M, c.N, c.K, 0.0f, d.A, c.K, d.B, c.N, 0.0f, C, c.ldc,
                              NULL), AK_OK);
    assert_true(C[0] == 0.0f && C[(c.M - 1) * c.ldc + c.N - 1] == 0.0f);
    C[0] = 4.0f;
    assert_int_equal(ak_sgemm(0, 0, c.M, c.N, 0, 1.0f, NULL, 0, NULL, c.N, 0.5f, C, c.ldc,
                              NULL), AK_OK);
    assert_true(C[0] == 2.0f);
    /* M == 0: nothing to do; A and C (empty) may be NULL */
    assert_int_equal(ak_sgemm(0, 0, 0, 5, 5, 1.0f, NULL, 5, d.B, 5, 0.0f, NULL, 5, NULL), AK_OK);
    free(C);
    data_free(&d);
}

static void expect_invalid(ak_status st) {
    assert_int_equal(st, AK_ERR_INVALID_ARG);
    assert_true(ak_last_error()[0] != '\0');
    ak_clear_error();
}

static void test_bad_args(void **state) {
    (void)state;
    float A[64] = {0}, B[64] = {0}, C[64] = {0};
    expect_invalid(ak_sgemm(0, 0, 4, 4, 4, 1.0f, NULL, 4, B, 4, 0.0f, C, 4, NULL));
    expect_invalid(ak_sgemm(0, 0, 4, 4, 4, 1.0f, A, 4, NULL, 4, 0.0f, C, 4, NULL));
    expect_invalid(ak_sgemm(0, 0, 4, 4, 4, 1.0f, A, 4, B, 4, 0.0f, NULL, 4, NULL));
    expect_invalid(ak_sgemm(0, 0, 4, 4, 4, 1.0f, A, 3, B, 4, 0.0f, C, 4, NULL));  /* lda < K */
    expect_invalid(ak_sgemm(1, 0, 5, 4, 4, 1.0f, A, 4, B, 4, 0.0f, C, 4, NULL));  /* lda < M */
    expect_invalid(ak_sgemm(0, 0, 4, 4, 4, 1.0f, A, 4, B, 3, 0.0f, C, 4, NULL));  /* ldb < N */
    expect_invalid(ak_sgemm(0, 1, 4, 4, 5, 1.0f, A, 5, B, 4, 0.0f, C, 4, NULL));  /* ldb < K */
    expect_invalid(ak_sgemm(0, 0, 4, 4, 4, 1.0f, A, 4, B, 4, 0.0f, C, 3, NULL));  /* ldc < N */
    expect_invalid(ak_sgemm((ak_trans)2, 0, 4, 4, 4, 1.0f, A, 4, B, 4, 0.0f, C, 4, NULL));
    expect_invalid(ak_sgemm(0, (ak_trans)-1, 4, 4, 4, 1.0f, A, 4, B, 4, 0.0f, C, 4, NULL));
    expect_invalid(ak_sgemm(0, 0, SIZE_MAX / 2, 4, 4, 1.0f, A, 4, B, 4, 0.0f, C, 4, NULL));
}

static int setup(void **state) {
    (void)state;
    return ak_init() == AK_OK ? 0 : -1;
}

/* The fused-finish microkernel (sgemm_ukernel_epi) against the plain sum in double,
 * then + beta·C + bias + column bias + Z and the activation, on full tiles of packed
 * panels: every finish (none, ReLU with NaN → 0, Clip), with and without bias, column
 * bias (MatMulBias) and Z, beta 0 and 1. */
static void check_ukernel_epi(const ak__kernels *k, size_t K, float beta, int with_bias,
                              int with_z, int with_col, int act, uint64_t seed) {
    size_t mr = (size_t)k->sgemm_mr, nr = (size_t)k->sgemm_nr, ldc = nr + 3;
    float *Ap = rand_matrix(K * mr, &seed), *Bp = rand_matrix(K * nr, &seed);
    float *C = rand_matrix(mr * ldc, &seed), *Z = rand_matrix(mr * ldc, &seed);
    float *bias = rand_matrix(mr, &seed), *C0 = copy_matrix(C, mr * ldc, 0);
    float *col = rand_matrix(nr, &seed);
    C[ldc + 1] = C0[ldc + 1] = beta != 0.0f ? NAN : C[ldc + 1]; /* a NaN through the finish */
    ak__sgemm_tile_epi e = {with_bias ? bias : NULL, with_z ? Z : NULL, act, -0.25f, 0.5f,
                            with_col ? col : NULL};
    if (act == AK_SGEMM_ACT_MAX) e.lo = 0.0f;
    k->sgemm_ukernel_epi(K, Ap, Bp, beta, C, ldc, &e);
    for (size_t r = 0; r < mr; r++)
        for (size_t j = 0; j < ldc; j++) {
            float got = C[r * ldc + j];
            if (j >= nr) { /* padding between rows: untouched */
                assert_memory_equal(&got, &C0[r * ldc + j], sizeof got);
                continue;
            }
            double sum = 0.0, bound = 0.0;
            for (size_t p = 0; p < K; p++) {
                sum += (double)Ap[p * mr + r] * Bp[p * nr + j];
                bound += fabs((double)Ap[p * mr + r] * Bp[p * nr + j]);
            }
            double v = sum + (beta != 0.0f ? (double)C0[r * ldc + j] : 0.0) +
                       (with_bias ? bias[r] : 0.0) + (with_z ? Z[r * ldc + j] : 0.0) +
                       (with_col ? col[j] : 0.0);
            if (act == AK_SGEMM_ACT_MAX) v = v > 0.0 ? v : 0.0; /* NaN → 0 */
            if (act == AK_SGEMM_ACT_CLAMP && !isnan(v)) v = v < e.lo ? e.lo : v > e.hi ? e.hi : v;
            double tol = 2.0 * (double)(K + 4) * FLT_EPSILON * (bound + 4.0) + 1e-30;
            if (isnan(v) ? !isnan(got) : !(fabs((double)got - v) <= tol))
                fail_msg("%s: K=%zu beta=%g bias=%d z=%d col=%d act=%d: C[%zu][%zu]=%.9g, "
                         "expected %.9g", k->name, K, (double)beta, with_bias, with_z, with_col,
                         act, r, j, (double)got, v);
        }
    free(Ap), free(Bp), free(C), free(Z), free(bias), free(C0), free(col);
}

static void test_ukernel_epi(void **state) {
    (void)state;
    static const size_t Ks[] = {1, 7, 64, 300};
    uint64_t seed = 1;
    for (size_t v = 0; v < N_VARIANTS; v++) {
        const ak__kernels *k = ak__kernels_for(variants[v]);
        if (!k || !k->sgemm_ukernel_epi) continue;
        for (size_t ik = 0; ik < COUNT(Ks); ik++)
            for (int act = AK_SGEMM_ACT_NONE; act <= AK_SGEMM_ACT_CLAMP; act++)
                for (int flags = 0; flags < 16; flags++)
                    check_ukernel_epi(k, Ks[ik], (flags & 4) ? 1.0f : 0.0f, flags & 1,
                                      (flags >> 1) & 1, (flags >> 3) & 1, act, seed++);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tile_edges),
        cmocka_unit_test(test_block_edges),
        cmocka_unit_test(test_forced_blocks_threads),
        cmocka_unit_test(test_threaded),
        cmocka_unit_test(test_paths),
        cmocka_unit_test(test_ukernel_epi),
        cmocka_unit_test(test_public_api),
        cmocka_unit_test(test_bad_args),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
