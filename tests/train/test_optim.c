/* Tests of the fused optimizers (ak_optim_step, src/train/optim/): the AVX2 variant
 * against the scalar reference for every optimizer and option over sizes 0..67 and a
 * large multi-block size, misaligned, with guard bytes, over several steps; the same
 * bits for any thread count; values worked out by hand from torch's formulas; special
 * values; AK_KERNELS=ref; and argument checking.
 *
 * Tolerances: SGD, Adam and AdamW must equal the reference bit for bit (NaN only has to
 * be NaN): both do the same correctly rounded f32 operations in the same order. LAMB's
 * moments must be bit-equal too; its parameters may differ by 4 ulp, because the two
 * norms are summed in a different order (the trust ratio moves by ~1e-7 relative). Hand
 * values are compared to 2e-6 relative (the f32 rounding of a few operations). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "accelkit/train.h"
#include "core/init.h"
#include "guarded.h"
#include "train/optim/optim_internal.h"

/* ---- configurations under test ------------------------------------------------------ */

typedef struct named_cfg {
    const char *name;
    ak_optim_config cfg;
} named_cfg;

static ak_optim_config make_cfg(ak_optim_kind kind, float lr, float wd) {
    ak_optim_config c = AK_OPTIM_CONFIG_INIT;
    c.kind = kind;
    c.lr = lr;
    c.weight_decay = wd;
    return c;
}

static ak_optim_config sgd_cfg(float momentum, float dampening, int nesterov, float wd) {
    ak_optim_config c = make_cfg(AK_OPTIM_SGD, 0.1f, wd);
    c.momentum = momentum;
    c.dampening = dampening;
    c.nesterov = nesterov;
    return c;
}

#define NCFGS 12
static named_cfg cfgs[NCFGS];

static void setup_cfgs(void) {
    int i = 0;
    cfgs[i++] = (named_cfg){"sgd plain", sgd_cfg(0.0f, 0.0f, 0, 0.0f)};
    cfgs[i++] = (named_cfg){"sgd plain wd", sgd_cfg(0.0f, 0.0f, 0, 0.01f)};
    cfgs[i++] = (named_cfg){"sgd momentum", sgd_cfg(0.9f, 0.0f, 0, 0.0f)};
    cfgs[i++] = (named_cfg){"sgd momentum dampening wd", sgd_cfg(0.9f, 0.1f, 0, 1e-4f)};
    cfgs[i++] = (named_cfg){"sgd nesterov wd", sgd_cfg(0.9f, 0.0f, 1, 1e-4f)};
    cfgs[i++] = (named_cfg){"adam", make_cfg(AK_OPTIM_ADAM, 1e-3f, 0.0f)};
    cfgs[i++] = (named_cfg){"adam l2", make_cfg(AK_OPTIM_ADAM, 1e-3f, 0.01f)};
    cfgs[i++] = (named_cfg){"adamw", make_cfg(AK_OPTIM_ADAMW, 1e-3f, 0.01f)};
    cfgs[i++] = (named_cfg){"adamw no decay", make_cfg(AK_OPTIM_ADAMW, 1e-3f, 0.0f)};
    cfgs[i++] = (named_cfg){"lamb", make_cfg(AK_OPTIM_LAMB, 1e-3f, 0.01f)};
    cfgs[i++] = (named_cfg){"lamb no decay", make_cfg(AK_OPTIM_LAMB, 1e-3f, 0.0f)};
    cfgs[i] = (named_cfg){"adam grad_scale", make_cfg(AK_OPTIM_ADAM, 1e-3f, 0.0f)};
    cfgs[i].cfg.grad_scale = 0.125f;
    cfgs[i].cfg.beta1 = 0.8f;
    cfgs[i].cfg.eps = 1e-6f;
}

/* ---- buffers -------------------------------------------------------------------------- */

/* param, grad, state1, state2, each guarded and shifted by its own misalignment. */
typedef struct bufs {
    guarded_buf b[4];
    size_t n;
} bufs;

static bufs bufs_alloc(size_t n, const size_t misalign[4]) {
    bufs s;
    s.n = n;
    for (int i = 0; i < 4; i++) s.b[i] = guarded_alloc(n * sizeof(float), misalign[i]);
    return s;
}

static float *buf_at(bufs *s, int i) { return (float *)s->b[i].data; }

/* Parameters in [-1, 1), gradients in [-1e-2, 1e-2), exp_avg like gradients, exp_avg_sq
 * (and SGD's buffer) small and non-negative, as after some training. */
static void bufs_fill(bufs *s, uint64_t seed) {
    for (size_t i = 0; i < s->n; i++) {
        buf_at(s, 0)[i] = test_rand_f32(&seed);
        buf_at(s, 1)[i] = test_rand_f32(&seed) * 1e-2f;
        buf_at(s, 2)[i] = test_rand_f32(&seed) * 1e-2f;
        float r = test_rand_f32(&seed);
        buf_at(s, 3)[i] = r * r * 1e-4f;
    }
}

static void bufs_copy(bufs *dst, const bufs *src) {
    for (int i = 0; i < 4; i++) memcpy(dst->b[i].data, src->b[i].data, src->n * sizeof(float));
}

static void bufs_free(bufs *s) {
    for (int i = 0; i < 4; i++) {
        assert_true(guarded_intact(&s->b[i]));
        guarded_free(&s->b[i]);
    }
}

/* New gradients for the next step (same for both runs). */
static void regrad(bufs *a, bufs *b, uint64_t *seed) {
    for (size_t i = 0; i < a->n; i++)
        buf_at(a, 1)[i] = buf_at(b, 1)[i] = test_rand_f32(seed) * 1e-2f;
}

/* ---- comparison ----------------------------------------------------------------------- */

static uint32_t bits_of(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* Distance in units in the last place (same-sign floats are ordered like their bits). */
static uint64_t ulp_diff(float a, float b) {
    if (a == b) return 0;
    int64_t ia = (int32_t)bits_of(a), ib = (int32_t)bits_of(b);
    if (ia < 0) ia = INT32_MIN - ia;
    if (ib < 0) ib = INT32_MIN - ib;
    return (uint64_t)(ia > ib ? ia - ib : ib - ia);
}

static void expect_close(const char *what, int step, const char *buf, const float *got,
                         const float *want, size_t n, uint64_t max_ulp) {
    for (size_t i = 0; i < n; i++) {
        if (isnan(got[i]) && isnan(want[i])) continue;
        int same = max_ulp ? ulp_diff(got[i], want[i]) <= max_ulp
                           : bits_of(got[i]) == bits_of(want[i]);
        if (!same)
            fail_msg("%s step %d %s: n=%zu i=%zu got %.9g want %.9g (%llu ulp)", what, step, buf,
                     n, i, (double)got[i], (double)want[i],
                     (unsigned long long)ulp_diff(got[i], want[i]));
    }
}

static void expect_bufs(const char *what, int step, ak_optim_kind kind, bufs *got, bufs *want) {
    uint64_t p_ulp = kind == AK_OPTIM_LAMB ? 4 : 0;
    expect_close(what, step, "param", buf_at(got, 0), buf_at(want, 0), got->n, p_ulp);
    expect_close(what, step, "state1", buf_at(got, 2), buf_at(want, 2), got->n, 0);
    expect_close(what, step, "state2", buf_at(got, 3), buf_at(want, 3), got->n, 0);
}

/* Three steps (1 takes SGD's first-step path) of cfg with table k on `got` and of the
 * reference on `want` (both start from the same data), compared after each step. */
static void run_steps(const char *what, const ak_optim_config *cfg, const ak__optim_kernels *k,
                      ak_threadpool *pool_got, const ak__optim_kernels *k_want,
                      ak_threadpool *pool_want, bufs *got, bufs *want, uint64_t seed, int exact) {
    for (int step = 1; step <= 3; step++) {
        ak__optim_coef c;
        assert_int_equal(ak__optim_coef_init(cfg, step, &c), AK_OK);
        ak__optim_run(k, cfg->kind, &c, buf_at(got, 0), buf_at(got, 1), buf_at(got, 2),
                      buf_at(got, 3), got->n, pool_got);
        ak__optim_run(k_want, cfg->kind, &c, buf_at(want, 0), buf_at(want, 1), buf_at(want, 2),
                      buf_at(want, 3), want->n, pool_want);
        if (exact) {
            for (int b = 0; b < 4; b++) expect_close(what, step, "buffer", buf_at(got, b),
                                                     buf_at(want, b), got->n, 0);
        } else {
            expect_bufs(what, step, cfg->kind, got, want);
        }
        regrad(got, want, &seed);
    }
}

/* ---- the AVX2 variant against the reference ------------------------------------------- */

static void check_variant(const ak__optim_kernels *k, size_t n, const size_t misalign[4],
                          uint64_t seed) {
    const ak__optim_kernels *ref = ak__optim_kernels_for("ref");
    for (int ci = 0; ci < NCFGS; ci++) {
        char what[96];
        snprintf(what, sizeof what, "%s %s", k->name, cfgs[ci].name);
        bufs got = bufs_alloc(n, misalign), want = bufs_alloc(n, misalign);
        bufs_fill(&want, seed + (uint64_t)ci);
        bufs_copy(&got, &want);
        run_steps(what, &cfgs[ci].cfg, k, NULL, ref, NULL, &got, &want, seed, 0);
        bufs_free(&got);
        bufs_free(&want);
    }
}

static void test_avx2_vs_ref(void **state) {
    (void)state;
    const ak__optim_kernels *k = ak__optim_kernels_for("avx2");
    if (!k) skip();
    static const size_t aligned[4] = {0, 0, 0, 0}, shifted[4] = {4, 8, 12, 20};
    for (size_t n = 0; n <= 67; n++) {
        check_variant(k, n, aligned, 1000 + n);
        check_variant(k, n, shifted, 2000 + n);
    }
    /* several blocks (16 Ki elements each) with a ragged last one */
    check_variant(k, 100003, shifted, 77);
}

/* Values that stress the kernels: zeros of both signs, huge and tiny numbers, Inf and
 * NaN gradients. Both variants must agree (NaN = NaN). */
static void test_special_values(void **state) {
    (void)state;
    const ak__optim_kernels *k = ak__optim_kernels_for("avx2");
    if (!k) skip();
    static const float specials[] = {0.0f, -0.0f, 1e-30f, -1e30f, INFINITY, -INFINITY, NAN,
                                     3.0f, 1e-45f, -2.5f};
    const size_t n = 37, nsp = sizeof specials / sizeof specials[0];
    static const size_t misalign[4] = {4, 0, 8, 4};
    const ak__optim_kernels *ref = ak__optim_kernels_for("ref");
    for (int ci = 0; ci < NCFGS; ci++) {
        bufs got = bufs_alloc(n, misalign), want = bufs_alloc(n, misalign);
        bufs_fill(&want, 5);
        for (size_t i = 0; i < n; i++) {
            buf_at(&want, 1)[i] = specials[i % nsp];
            if (i % 3 == 0) buf_at(&want, 0)[i] = specials[(i / 3) % nsp];
        }
        bufs_copy(&got, &want);
        run_steps(cfgs[ci].name, &cfgs[ci].cfg, k, NULL, ref, NULL, &got, &want, 9, 0);
        bufs_free(&got);
        bufs_free(&want);
    }
}

/* ---- threads --------------------------------------------------------------------------- */

/* 1 and 3 threads give the same bits (LAMB included: its partial sums are per block). */
static void test_threads_same_bits(void **state) {
    (void)state;
    ak_threadpool *one = NULL, *three = NULL;
    assert_int_equal(ak_threadpool_create(1, &one), AK_OK);
    assert_int_equal(ak_threadpool_create(3, &three), AK_OK);
    static const size_t misalign[4] = {0, 4, 8, 12};
    const size_t n = 200003;
    const char *variants[] = {"ref", "avx2"};
    for (int v = 0; v < 2; v++) {
        const ak__optim_kernels *k = ak__optim_kernels_for(variants[v]);
        if (!k) continue;
        for (int ci = 0; ci < NCFGS; ci++) {
            bufs got = bufs_alloc(n, misalign), want = bufs_alloc(n, misalign);
            bufs_fill(&want, 31 + (uint64_t)ci);
            bufs_copy(&got, &want);
            run_steps(cfgs[ci].name, &cfgs[ci].cfg, k, three, k, one, &got, &want, 3, 1);
            bufs_free(&got);
            bufs_free(&want);
        }
    }
    ak_threadpool_free(one);
    ak_threadpool_free(three);
}

/* ---- values worked out by hand ------------------------------------------------------------ */

static void expect_near(const char *what, double got, double want) {
    if (fabs(got - want) > 2e-6 * fabs(want) + 1e-12)
        fail_msg("%s: got %.9g want %.9g", what, got, want);
}

/* torch.optim.SGD, p = 1, g = 0.5, lr = 0.1, momentum 0.9:
 *   wd 0.01:  step 1 d = 0.5 + 0.01·1 = 0.51, buf = d, p = 1 - 0.1·0.51 = 0.949
 *             step 2 d = 0.5 + 0.01·0.949 = 0.50949, buf = 0.9·0.51 + d = 0.96849,
 *                    p = 0.949 - 0.096849 = 0.852151
 *   Nesterov (wd 0.01): step 1 p = 1 - 0.1·(0.51 + 0.9·0.51) = 0.9031
 *             step 2 d = 0.5 + 0.01·0.9031 = 0.509031, buf = 0.459 + d = 0.968031,
 *                    p = 0.9031 - 0.1·(d + 0.9·buf) = 0.76507411
 *   dampening 0.1: step 1 buf = g (no dampening on the first step), p = 0.95;
 *             step 2 buf = 0.9·0.5 + 0.9·0.5 = 0.9, p = 0.95 - 0.09 = 0.86 */
static void sgd_two_steps(ak_optim_config cfg, double want1, double want2, const char *what) {
    float p = 1.0f, g = 0.5f, buf = 0.0f;
    assert_int_equal(ak_optim_step(&cfg, 1, &p, &g, &buf, NULL, 1), AK_OK);
    expect_near(what, p, want1);
    assert_int_equal(ak_optim_step(&cfg, 2, &p, &g, &buf, NULL, 1), AK_OK);
    expect_near(what, p, want2);
}

static void test_hand_sgd(void **state) {
    (void)state;
    sgd_two_steps(sgd_cfg(0.9f, 0.0f, 0, 0.01f), 0.949, 0.852151, "sgd momentum wd");
    sgd_two_steps(sgd_cfg(0.9f, 0.0f, 1, 0.01f), 0.9031, 0.76507411, "sgd nesterov");
    sgd_two_steps(sgd_cfg(0.9f, 0.1f, 0, 0.0f), 0.95, 0.86, "sgd dampening");
    /* no momentum: p -= lr·g, no state needed; grad_scale 2 doubles the step */
    ak_optim_config c = sgd_cfg(0.0f, 0.0f, 0, 0.0f);
    c.grad_scale = 2.0f;
    float p = 1.0f, g = 0.5f;
    assert_int_equal(ak_optim_step(&c, 1, &p, &g, NULL, NULL, 1), AK_OK);
    expect_near("sgd plain", p, 0.9);
}

/* torch.optim.Adam / AdamW, p = 1, lr = 0.1, betas (0.9, 0.999), eps 1e-8, g = 0.5 then
 * -0.25:
 *   Adam: step 1 m = 0.05, v = 0.00025, p = 1 - (0.1/0.1)·0.05/(sqrt(0.00025)/sqrt(0.001)
 *         + 1e-8) = 0.900000002; step 2 m = 0.045 - 0.025 = 0.02, v = 0.00031225,
 *         p = 0.9 - (0.1/0.19)·0.02/(sqrt(0.00031225)/sqrt(0.001999) + 1e-8) = 0.873366299
 *   Adam wd 0.1 (L2): step 1 g = 0.6, m = 0.06, v = 0.00036, p = 0.9000000017;
 *         step 2 g = -0.25 + 0.09 = -0.16, m = 0.038, v = 0.00038524, p = 0.854441367
 *   AdamW wd 0.1: step 1 p = 1·(1 - 0.01) - 0.1 = 0.890000002; step 2 p = 0.8811 - 0.0266337
 *         = 0.854466299 (moments as for Adam) */
static void adam_two_steps(ak_optim_kind kind, float wd, const double want[2][3],
                           const char *what) {
    ak_optim_config cfg = make_cfg(kind, 0.1f, wd);
    float p = 1.0f, m = 0.0f, v = 0.0f, gs[2] = {0.5f, -0.25f};
    for (int s = 0; s < 2; s++) {
        assert_int_equal(ak_optim_step(&cfg, s + 1, &p, &gs[s], &m, &v, 1), AK_OK);
        expect_near(what, p, want[s][0]);
        expect_near(what, m, want[s][1]);
        expect_near(what, v, want[s][2]);
    }
}

static void test_hand_adam(void **state) {
    (void)state;
    static const double adam[2][3] = {{0.900000002, 0.05, 0.00025},
                                      {0.8733662987, 0.02, 0.00031225}};
    static const double adam_l2[2][3] = {{0.9000000016667, 0.06, 0.00036},
                                         {0.8544413675, 0.038, 0.00038524}};
    static const double adamw[2][3] = {{0.890000002, 0.05, 0.00025},
                                       {0.8544662987, 0.02, 0.00031225}};
    /* 0.999f stands for 0.999: 1 - beta2 is 0.001 as in torch, not 1 - 0.99900001287 */
    ak__optim_coef c;
    ak_optim_config cfg = make_cfg(AK_OPTIM_ADAMW, 1e-3f, 1e-2f);
    assert_int_equal(ak__optim_coef_init(&cfg, 1, &c), AK_OK);
    assert_true(c.one_minus_beta2 == (float)0.001 && c.one_minus_beta1 == (float)0.1);
    assert_true(c.param_decay == (float)(1.0 - 1e-3 * 1e-2));
    assert_true(c.bc2_sqrt == (float)sqrt(1.0 - 0.999));
    adam_two_steps(AK_OPTIM_ADAM, 0.0f, adam, "adam");
    adam_two_steps(AK_OPTIM_ADAM, 0.1f, adam_l2, "adam l2");
    adam_two_steps(AK_OPTIM_ADAMW, 0.1f, adamw, "adamw");
}

/* LAMB, p = (3, 4) (||p|| = 5), g = (0.5, -1), lr 0.1, wd 0.01, eps 1e-6:
 *   m̂ = g, v̂ = g², u = m̂/(|g| + 1e-6) + 0.01·p ≈ (1.03, -0.96), ||u|| = 1.408012,
 *   ratio = 5 / 1.408012 = 3.5511095, p -= 0.1·ratio·u = (2.63423643, 4.34090616);
 *   step 2 with g = (0.25, 0.5): p = (2.13966975, 4.45592997).
 * p = 0 gives ||p|| = 0, so the ratio is 1: p = -0.1·g/(|g| + 1e-6) = (-0.0999999, 0.09999995). */
static void test_hand_lamb(void **state) {
    (void)state;
    ak_optim_config cfg = make_cfg(AK_OPTIM_LAMB, 0.1f, 0.01f);
    cfg.eps = 1e-6f;
    float p[2] = {3.0f, 4.0f}, m[2] = {0}, v[2] = {0};
    float g1[2] = {0.5f, -1.0f}, g2[2] = {0.25f, 0.5f};
    assert_int_equal(ak_optim_step(&cfg, 1, p, g1, m, v, 2), AK_OK);
    expect_near("lamb step 1 p0", p[0], 2.6342364286);
    expect_near("lamb step 1 p1", p[1], 4.3409061598);
    assert_int_equal(ak_optim_step(&cfg, 2, p, g2, m, v, 2), AK_OK);
    expect_near("lamb step 2 p0", p[0], 2.1396697484);
    expect_near("lamb step 2 p1", p[1], 4.4559299718);

    cfg.weight_decay = 0.0f;
    float z[2] = {0.0f, 0.0f}, zm[2] = {0}, zv[2] = {0}, g[2] = {1.0f, -2.0f};
    assert_int_equal(ak_optim_step(&cfg, 1, z, g, zm, zv, 2), AK_OK);
    expect_near("lamb zero param p0", z[0], -0.0999999000001);
    expect_near("lamb zero param p1", z[1], 0.099999950000025);

    /* zero gradient and state: ||u|| = 0, ratio 1, u = 0: nothing moves */
    float q[3] = {1.0f, -2.0f, 0.5f}, qg[3] = {0}, qm[3] = {0}, qv[3] = {0};
    assert_int_equal(ak_optim_step(&cfg, 1, q, qg, qm, qv, 3), AK_OK);
    assert_true(q[0] == 1.0f && q[1] == -2.0f && q[2] == 0.5f);
}

/* ---- the public entry point ------------------------------------------------------------ */

/* ak_optim_step over a large buffer (global pool, active variant) equals the driver run
 * with the active table on one thread. */
static void test_public_matches_driver(void **state) {
    (void)state;
    static const size_t misalign[4] = {4, 4, 4, 4};
    const size_t n = 150001;
    for (int ci = 0; ci < NCFGS; ci++) {
        const ak_optim_config *cfg = &cfgs[ci].cfg;
        bufs got = bufs_alloc(n, misalign), want = bufs_alloc(n, misalign);
        bufs_fill(&want, 400 + (uint64_t)ci);
        bufs_copy(&got, &want);
        for (int step = 1; step <= 2; step++) {
            ak__optim_coef c;
            assert_int_equal(ak__optim_coef_init(cfg, step, &c), AK_OK);
            ak__optim_run(ak__optim_kernels_active(), cfg->kind, &c, buf_at(&want, 0),
                          buf_at(&want, 1), buf_at(&want, 2), buf_at(&want, 3), n, NULL);
            assert_int_equal(ak_optim_step(cfg, step, buf_at(&got, 0), buf_at(&got, 1),
                                           buf_at(&got, 2), buf_at(&got, 3), n),
                             AK_OK);
            for (int b = 0; b < 4; b++)
                expect_close(cfgs[ci].name, step, "buffer", buf_at(&got, b), buf_at(&want, b),
                             n, 0);
        }
        bufs_free(&got);
        bufs_free(&want);
    }
}

/* AK_KERNELS=ref (and AK_ISA=generic) select the reference; the default selects AVX2
 * where the CPU has it. */
static void test_kernels_ref_setting(void **state) {
    (void)state;
    setenv("AK_KERNELS", "ref", 1);
    assert_int_equal(ak__init_reset(), AK_OK);
    assert_string_equal(ak__optim_kernels_active()->name, "ref");
    float p[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, g[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1}, m[9] = {0},
          v[9] = {0};
    ak_optim_config cfg = make_cfg(AK_OPTIM_ADAM, 0.5f, 0.0f);
    assert_int_equal(ak_optim_step(&cfg, 1, p, g, m, v, 9), AK_OK);
    expect_near("ref adam", p[8], 8.5); /* m̂/sqrt(v̂) = 1 */
    unsetenv("AK_KERNELS");
    setenv("AK_ISA", "generic", 1);
    assert_int_equal(ak__init_reset(), AK_OK);
    assert_string_equal(ak__optim_kernels_active()->name, "ref");
    unsetenv("AK_ISA");
    assert_int_equal(ak__init_reset(), AK_OK);
    assert_string_equal(ak__optim_kernels_active()->name,
                        ak__optim_kernels_for("avx2") ? "avx2" : "ref");
}

static void expect_invalid(ak_status st, const char *needle) {
    assert_int_equal(st, AK_ERR_INVALID_ARG);
    if (!strstr(ak_last_error(), needle))
        fail_msg("error '%s' does not mention '%s'", ak_last_error(), needle);
    ak_clear_error();
}

static void test_bad_arguments(void **state) {
    (void)state;
    float p[16] = {0}, g[16] = {0}, m[16] = {0}, v[16] = {0};
    ak_optim_config adam = make_cfg(AK_OPTIM_ADAM, 1e-3f, 0.0f), c;

    expect_invalid(ak_optim_step(NULL, 1, p, g, m, v, 4), "cfg is NULL");
    c = adam;
    c.struct_size = 8;
    expect_invalid(ak_optim_step(&c, 1, p, g, m, v, 4), "AK_OPTIM_CONFIG_INIT");
    c = adam;
    c.kind = (ak_optim_kind)7;
    expect_invalid(ak_optim_step(&c, 1, p, g, m, v, 4), "unknown optimizer kind 7");
    expect_invalid(ak_optim_step(&adam, 0, p, g, m, v, 4), "steps count from 1");
    c = adam;
    c.lr = NAN;
    expect_invalid(ak_optim_step(&c, 1, p, g, m, v, 4), "lr = nan");
    c.lr = INFINITY;
    expect_invalid(ak_optim_step(&c, 1, p, g, m, v, 4), "lr = inf");
    c.lr = -1.0f;
    expect_invalid(ak_optim_step(&c, 1, p, g, m, v, 4), "lr = -1");
    c = adam;
    c.weight_decay = -0.1f;
    expect_invalid(ak_optim_step(&c, 1, p, g, m, v, 4), "weight_decay");
    c = adam;
    c.grad_scale = INFINITY;
    expect_invalid(ak_optim_step(&c, 1, p, g, m, v, 4), "grad_scale");
    c = adam;
    c.beta1 = 1.0f;
    expect_invalid(ak_optim_step(&c, 1, p, g, m, v, 4), "beta1");
    c = adam;
    c.beta2 = NAN;
    expect_invalid(ak_optim_step(&c, 1, p, g, m, v, 4), "beta2");
    c = adam;
    c.eps = -1e-8f;
    expect_invalid(ak_optim_step(&c, 1, p, g, m, v, 4), "eps");

    /* buffers */
    expect_invalid(ak_optim_step(&adam, 1, NULL, g, m, v, 4), "param is NULL");
    expect_invalid(ak_optim_step(&adam, 1, p, NULL, m, v, 4), "grad is NULL");
    expect_invalid(ak_optim_step(&adam, 1, p, g, NULL, v, 4), "Adam needs state1 (exp_avg)");
    expect_invalid(ak_optim_step(&adam, 1, p, g, m, NULL, 4), "state2 (exp_avg_sq)");
    c = make_cfg(AK_OPTIM_LAMB, 1e-3f, 0.0f);
    expect_invalid(ak_optim_step(&c, 1, p, g, m, NULL, 4), "LAMB needs state2");
    expect_invalid(ak_optim_step(&adam, 1, (float *)((char *)p + 2), g, m, v, 4), "aligned");
    expect_invalid(ak_optim_step(&adam, 1, p, p + 2, m, v, 4), "param overlaps grad");
    expect_invalid(ak_optim_step(&adam, 1, p, g, m, m, 4), "state1 overlaps state2");
    expect_invalid(ak_optim_step(&adam, 1, p, g, m, v, SIZE_MAX / 2), "overflows");

    /* SGD: momentum needs its buffer; Nesterov needs momentum and no dampening */
    c = sgd_cfg(0.9f, 0.0f, 0, 0.0f);
    expect_invalid(ak_optim_step(&c, 1, p, g, NULL, NULL, 4), "momentum buffer");
    c = sgd_cfg(0.0f, 0.0f, 1, 0.0f);
    expect_invalid(ak_optim_step(&c, 1, p, g, m, NULL, 4), "Nesterov");
    c = sgd_cfg(0.9f, 0.5f, 1, 0.0f);
    expect_invalid(ak_optim_step(&c, 1, p, g, m, NULL, 4), "dampening 0");
    c = sgd_cfg(-0.5f, 0.0f, 0, 0.0f);
    expect_invalid(ak_optim_step(&c, 1, p, g, m, NULL, 4), "momentum = -0.5");

    /* what is fine: empty buffers may be NULL; plain SGD needs no state */
    assert_int_equal(ak_optim_step(&adam, 1, NULL, NULL, NULL, NULL, 0), AK_OK);
    c = sgd_cfg(0.0f, 0.0f, 0, 0.0f);
    assert_int_equal(ak_optim_step(&c, 1, p, g, NULL, NULL, 16), AK_OK);
    assert_int_equal(ak_optim_step(&adam, 1000000, p, g, m, v, 16), AK_OK);
}

int main(void) {
    if (ak_init() != AK_OK) {
        fprintf(stderr, "ak_init failed: %s\n", ak_last_error());
        return 1;
    }
    setup_cfgs();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_avx2_vs_ref),
        cmocka_unit_test(test_special_values),
        cmocka_unit_test(test_threads_same_bits),
        cmocka_unit_test(test_hand_sgd),
        cmocka_unit_test(test_hand_adam),
        cmocka_unit_test(test_hand_lamb),
        cmocka_unit_test(test_public_matches_driver),
        cmocka_unit_test(test_kernels_ref_setting),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
