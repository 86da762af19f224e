/* Tests of the gradient compressors (src/train/compress): the fp16 scale rule over every
 * world size 1..1024 and extreme maxima, absmax, the scaled casts bit for bit against the
 * scalar reference with their error bounds; deep gradient compression's share selected,
 * error feedback (mass conservation), schedule, clipping, capacity under adversarial
 * inputs, index checks; and a convergence test: softmax regression trained by 4
 * simulated workers, dense momentum SGD against DGC, final losses within 5 %.
 * AK_COMPRESS_BENCH=1 adds the throughput figures of docs/compression.md (16 M floats). */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "accelkit/ak.h"
#include "core/half.h"
#include "guarded.h"
#include "train/compress/compress.h"

/* ---- helpers ------------------------------------------------------------------------ */

/* Standard normal (Box-Muller on the shared test generator). */
static float test_randn(uint64_t *s) {
    double u1 = ((double)(test_rand_u64(s) >> 11) + 1.0) / 9007199254740993.0;
    double u2 = (double)(test_rand_u64(s) >> 11) / 9007199254740992.0;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

static float *falloc(size_t n) {
    float *p = calloc(n ? n : 1, sizeof(float));
    assert_non_null(p);
    return p;
}

static ak_dgc_config dgc_cfg(float sparsity, float start, int warmup, float momentum) {
    ak_dgc_config c = AK_DGC_CONFIG_INIT;
    c.sparsity = sparsity;
    c.warmup_start_sparsity = start;
    c.warmup_steps = warmup;
    c.momentum = momentum;
    return c;
}

static ak_dgc_state *dgc_new(const ak_dgc_config *cfg, size_t n) {
    ak_dgc_state *st = NULL;
    ak_status s = ak__dgc_create(cfg, n, &st);
    if (s != AK_OK) fail_msg("ak__dgc_create(n = %zu): %s", n, ak_last_error());
    return st;
}

/* One compress call into exact-capacity guarded buffers; checks the invariants every
 * call must keep: 1 <= k <= capacity (k = 0 only for n = 0), ascending indices below n,
 * nothing written past the capacity. */
static size_t dgc_step(ak_dgc_state *st, size_t n, const float *grad, uint32_t *idx_out,
                       float *val_out) {
    size_t cap = ak__dgc_capacity(st);
    guarded_buf gi = guarded_alloc(cap * sizeof(uint32_t), 4);
    guarded_buf gv = guarded_alloc(cap * sizeof(float), 0);
    uint32_t *idx = gi.data;
    float *val = gv.data;
    size_t k = SIZE_MAX;
    ak_status s = ak__dgc_compress(st, grad, idx, val, &k);
    if (s != AK_OK) fail_msg("ak__dgc_compress: %s", ak_last_error());
    if (k > cap) fail_msg("selected %zu values, capacity %zu", k, cap);
    if (n > 0 && k == 0) fail_msg("nothing selected from %zu values", n);
    for (size_t i = 0; i < k; i++) {
        if (idx[i] >= n) fail_msg("idx[%zu] = %u out of %zu", i, idx[i], n);
        if (i && idx[i] <= idx[i - 1]) fail_msg("indices not ascending at %zu", i);
    }
    assert_true(guarded_intact(&gi));
    assert_true(guarded_intact(&gv));
    if (idx_out) memcpy(idx_out, idx, k * sizeof *idx);
    if (val_out) memcpy(val_out, val, k * sizeof *val);
    guarded_free(&gi);
    guarded_free(&gv);
    return k;
}

/* ---- fp16 / bf16 scale rule --------------------------------------------------------- */

static void check_scale(float amax, int world) {
    float s = ak__compress_scale(AK_COMPRESS_FP16, amax, world);
    int e;
    if (!(isfinite(s) && s > 0.0f && frexpf(s, &e) == 0.5f))
        fail_msg("amax %g world %d: scale %g is not a finite power of two", (double)amax, world,
                 (double)s);
    float inv = 1.0f / s;
    if (!isnormal(inv) || inv * s != 1.0f)
        fail_msg("amax %g world %d: 1/scale %g is not exact", (double)amax, world, (double)inv);
    if (!isfinite(amax)) {
        if (s != 1.0f) fail_msg("non-finite amax %g: scale %g, want 1", (double)amax, (double)s);
        return;
    }
    float a = fabsf(amax);
    /* every rank holds the maximum: the sum, and every f16 partial sum of it (each
     * rounded up by at most 2^-11), must stay below the f16 maximum */
    float h = ak__f16_to_f32_ref(ak__f32_to_f16_ref(a * s));
    double worst = (double)world * h * (1.0 + ldexp(1.0, -10));
    if (!(worst <= 65504.0))
        fail_msg("amax %g world %d scale %g: sum over ranks reaches %g", (double)a, world,
                 (double)s, worst);
    if ((double)world * a * s > 32768.0) fail_msg("amax %g world %d: less than 2x margin",
                                                  (double)a, world);
    /* small buffers are scaled up: at least half the headroom is used, unless the scale
     * sits at its cap */
    if (a > 0.0f && e - 1 > -126 && e - 1 < 126 && (double)world * a * s < 16384.0)
        fail_msg("amax %g world %d: scale %g leaves precision unused", (double)a, world,
                 (double)s);
}

static void test_scale_rule(void **state) {
    (void)state;
    const float amaxes[] = {0.0f, -0.0f, 1e-45f, 1e-40f, FLT_MIN / 2, FLT_MIN, 1e-30f, 1e-12f,
                            1e-8f, 6e-5f, 1e-3f, 0.25f, 0.5f, 1.0f, 2.0f, 3.0f, 1000.0f,
                            32768.0f, 65504.0f, 65520.0f, 1e5f, 1e10f, 1e30f, FLT_MAX,
                            -7.5f, INFINITY, -INFINITY, NAN};
    for (int world = 1; world <= 1024; world++)
        for (size_t i = 0; i < sizeof amaxes / sizeof amaxes[0]; i++) check_scale(amaxes[i], world);
    uint64_t rng = 11;
    for (int t = 0; t < 20000; t++) { /* log-uniform over the whole positive f32 range */
        float a = ldexpf(1.0f + (float)(test_rand_u64(&rng) >> 41) / 8388608.0f,
                         (int)(test_rand_u64(&rng) % 277) - 149);
        check_scale(a, 1 + (int)(test_rand_u64(&rng) % 1024));
    }
    /* bf16 keeps the f32 range: never scaled; world below 1 counts as 1 */
    assert_true(ak__compress_scale(AK_COMPRESS_BF16, 1e-30f, 8) == 1.0f);
    assert_true(ak__compress_scale(AK_COMPRESS_BF16, FLT_MAX, 1024) == 1.0f);
    assert_true(ak__compress_scale(AK_COMPRESS_FP16, 1.0f, 0) ==
                ak__compress_scale(AK_COMPRESS_FP16, 1.0f, 1));
    assert_true(ak__compress_scale(AK_COMPRESS_FP16, 1.0f, 1) == 32768.0f);
    assert_true(ak__compress_scale(AK_COMPRESS_FP16, 0.0f, 4) == 1.0f);
}

static void test_absmax(void **state) {
    (void)state;
    float x[37];
    for (size_t n = 0; n <= 37; n++) { /* the maximum at every position of every length */
        for (size_t p = 0; p < n; p++) {
            for (size_t i = 0; i < n; i++) x[i] = (i % 2 ? -1.0f : 1.0f) * (float)i / 64.0f;
            x[p] = p % 2 ? -5.0f : 5.0f;
            if (ak__compress_absmax(x, n) != 5.0f) fail_msg("n %zu max at %zu", n, p);
        }
    }
    assert_true(ak__compress_absmax(x, 0) == 0.0f);
    assert_true(ak__compress_absmax(NULL, 0) == 0.0f);
    for (size_t i = 0; i < 37; i++) x[i] = -0.0f;
    assert_true(ak__compress_absmax(x, 37) == 0.0f);
    x[3] = -INFINITY;
    assert_true(ak__compress_absmax(x, 37) == INFINITY);
    x[30] = NAN;
    assert_true(isnan(ak__compress_absmax(x, 37)));
    x[30] = -NAN;
    assert_true(isnan(ak__compress_absmax(x, 37)));
    x[3] = 1e-45f; /* denormals order correctly */
    x[30] = 2e-45f;
    assert_true(ak__compress_absmax(x, 37) == 2e-45f);
}

/* ---- scaled casts ------------------------------------------------------------------- */

/* Random values with magnitudes 2^lo .. 2^hi and random signs. */
static void fill_logrand(float *x, size_t n, int lo, int hi, uint64_t *rng) {
    for (size_t i = 0; i < n; i++) {
        float m = 1.0f + (float)(test_rand_u64(rng) >> 41) / 8388608.0f;
        int e = lo + (int)(test_rand_u64(rng) % (uint64_t)(hi - lo + 1));
        x[i] = (test_rand_u64(rng) & 1 ? -1.0f : 1.0f) * ldexpf(m, e);
    }
}

/* Casts x with the scale rule for `world` ranks and back. The wire must be the scalar
 * reference of x·scale bit for bit, the round trip within half an ulp of the wire
 * format (f16 subnormals: half of their spacing 2^-24, over the scale). */
static void roundtrip(ak_train_compression kind, const float *x, size_t n, int world,
                      size_t misalign) {
    const int f16 = kind == AK_COMPRESS_FP16;
    float s = ak__compress_scale(kind, ak__compress_absmax(x, n), world), inv = 1.0f / s;
    guarded_buf gw = guarded_alloc(n * 2, misalign * 2);
    guarded_buf go = guarded_alloc(n * 4, misalign * 4);
    uint16_t *w = gw.data;
    float *out = go.data;
    if (ak__compress_cast(kind, x, w, n, s) != AK_OK) fail_msg("cast: %s", ak_last_error());
    if (ak__decompress_cast(kind, w, out, n, inv) != AK_OK)
        fail_msg("decast: %s", ak_last_error());
    assert_true(guarded_intact(&gw));
    assert_true(guarded_intact(&go));
    for (size_t i = 0; i < n; i++) {
        uint16_t want = f16 ? ak__f32_to_f16_ref(x[i] * s) : ak__f32_to_bf16_ref(x[i] * s);
        if (w[i] != want) fail_msg("n %zu [%zu]: wire 0x%04x, want 0x%04x", n, i, w[i], want);
        float back = (f16 ? ak__f16_to_f32_ref(w[i]) : ak__bf16_to_f32_ref(w[i])) * inv;
        if (out[i] != back) fail_msg("n %zu [%zu]: decast %g, want %g", n, i, (double)out[i],
                                     (double)back);
        double err = fabs((double)out[i] - x[i]), ax = fabs((double)x[i]);
        double bound = f16 ? (ax * s >= ldexp(1.0, -14) ? ldexp(ax, -11) : ldexp(1.0, -25) / s)
                           : ldexp(ax, -8);
        if (err > bound) fail_msg("%s n %zu [%zu]: %g -> %g, error %g > %g", f16 ? "f16" : "bf16",
                                  n, i, (double)x[i], (double)out[i], err, bound);
    }
    guarded_free(&gw);
    guarded_free(&go);
}

static void test_cast_roundtrip(void **state) {
    (void)state;
    static const size_t lens[] = {0, 1, 7, 31, 4095, 4096, 4097, 8192 + 33, 100003};
    uint64_t rng = 5;
    float *x = falloc(100003);
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
        size_t n = lens[li];
        /* gradients of ordinary size; tiny ones that plain f16 would flush (the scale
         * lifts them: the relative bound must hold); huge ones that would overflow */
        fill_logrand(x, n, -20, 2, &rng);
        roundtrip(AK_COMPRESS_FP16, x, n, 4, li % 2);
        roundtrip(AK_COMPRESS_BF16, x, n, 4, li % 2);
        fill_logrand(x, n, -30, -18, &rng);
        roundtrip(AK_COMPRESS_FP16, x, n, 64, 0);
        fill_logrand(x, n, 10, 40, &rng);
        roundtrip(AK_COMPRESS_FP16, x, n, 1024, 1);
        roundtrip(AK_COMPRESS_BF16, x, n, 1024, 1);
    }
    /* tiny values: every one keeps f16's relative precision thanks to the scale */
    fill_logrand(x, 1000, -24, -17, &rng);
    float s = ak__compress_scale(AK_COMPRESS_FP16, ak__compress_absmax(x, 1000), 8);
    assert_true(s >= 65536.0f);
    /* bf16 with a scale other than 1 (the chunked path) still round-trips */
    uint16_t w[300];
    float out[300];
    fill_logrand(x, 300, -5, 5, &rng);
    assert_int_equal(ak__compress_cast(AK_COMPRESS_BF16, x, w, 300, 0.25f), AK_OK);
    assert_int_equal(ak__decompress_cast(AK_COMPRESS_BF16, w, out, 300, 4.0f), AK_OK);
    for (int i = 0; i < 300; i++)
        assert_true(fabsf(out[i] - x[i]) <= ldexpf(fabsf(x[i]), -8));
    free(x);
}

static void test_cast_special_and_errors(void **state) {
    (void)state;
    float x[5] = {NAN, INFINITY, -INFINITY, -0.0f, 1.0f}, out[5];
    uint16_t w[5];
    float s = ak__compress_scale(AK_COMPRESS_FP16, ak__compress_absmax(x, 5), 2);
    assert_true(s == 1.0f); /* a NaN maximum: no scale can help, values pass as they are */
    assert_int_equal(ak__compress_cast(AK_COMPRESS_FP16, x, w, 5, s), AK_OK);
    assert_int_equal(ak__decompress_cast(AK_COMPRESS_FP16, w, out, 5, 1.0f / s), AK_OK);
    assert_true(isnan(out[0]) && out[1] == INFINITY && out[2] == -INFINITY);
    assert_true(out[3] == 0.0f && signbit(out[3]) && out[4] == 1.0f);

    assert_int_equal(ak__compress_cast(AK_COMPRESS_DGC, x, w, 5, 1.0f), AK_ERR_INVALID_ARG);
    assert_non_null(strstr(ak_last_error(), "not a cast"));
    assert_int_equal(ak__compress_cast(AK_COMPRESS_NONE, x, w, 5, 1.0f), AK_ERR_INVALID_ARG);
    assert_int_equal(ak__compress_cast(AK_COMPRESS_FP16, NULL, w, 5, 1.0f), AK_ERR_INVALID_ARG);
    assert_int_equal(ak__compress_cast(AK_COMPRESS_FP16, x, w, 5, 0.0f), AK_ERR_INVALID_ARG);
    assert_int_equal(ak__compress_cast(AK_COMPRESS_FP16, x, w, 5, NAN), AK_ERR_INVALID_ARG);
    assert_int_equal(ak__decompress_cast(AK_COMPRESS_BF16, w, NULL, 5, 1.0f),
                     AK_ERR_INVALID_ARG);
    assert_int_equal(ak__decompress_cast(AK_COMPRESS_FP16, w, out, 5, INFINITY),
                     AK_ERR_INVALID_ARG);
    assert_int_equal(ak__compress_cast(AK_COMPRESS_FP16, NULL, NULL, 0, 1.0f), AK_OK);
}

/* ---- DGC ---------------------------------------------------------------------------- */

static void test_dgc_schedule(void **state) {
    (void)state;
    ak_dgc_config c = dgc_cfg(0.999f, 0.75f, 4, 0.9f);
    const double want[] = {0.75, 0.9375, 0.984375, 0.99609375, 0.999, 0.999, 0.999};
    for (int t = 0; t < 7; t++) {
        double got = ak__dgc_sparsity_at(&c, t);
        if (fabs(got - want[t]) > 1e-3) fail_msg("step %d: sparsity %g, want %g", t, got, want[t]);
        if (t && got < ak__dgc_sparsity_at(&c, t - 1)) fail_msg("not monotone at %d", t);
    }
    assert_true(ak__dgc_sparsity_at(&c, 1000000) == 0.999f);
    assert_true(ak__dgc_sparsity_at(&c, -5) == 0.75f);
    c.warmup_steps = 0;
    assert_true(ak__dgc_sparsity_at(&c, 0) == 0.999f);
    /* the exponential passes the geometric mean of the densities half way */
    c = dgc_cfg(0.99f, 0.0f, 10, 0.0f);
    assert_true(fabs((1.0 - ak__dgc_sparsity_at(&c, 5)) - 0.1) < 1e-4);
    c = dgc_cfg(1.0f, 0.5f, 4, 0.0f); /* sparsity 1: still a sensible ramp */
    float prev = 0.0f;
    for (int t = 0; t <= 4; t++) {
        float sp = ak__dgc_sparsity_at(&c, t);
        assert_true(sp >= prev && sp <= 1.0f);
        prev = sp;
    }
    assert_true(ak__dgc_sparsity_at(NULL, 3) == 0.0f);
}

/* Gaussian gradients: every step selects about the target share. */
static void test_dgc_target_share(void **state) {
    (void)state;
    const size_t n = 1 << 20;
    float *g = falloc(n);
    const float sparsities[] = {0.9f, 0.99f, 0.999f};
    for (int si = 0; si < 3; si++) {
        for (int mom = 0; mom < 2; mom++) {
            ak_dgc_config c = dgc_cfg(sparsities[si], 0.0f, 0, mom ? 0.9f : 0.0f);
            ak_dgc_state *st = dgc_new(&c, n);
            double target = n * (1.0 - sparsities[si]), total = 0;
            uint64_t rng = 77 + (uint64_t)si;
            const int steps = 8;
            for (int t = 0; t < steps; t++) {
                for (size_t i = 0; i < n; i++) g[i] = test_randn(&rng);
                size_t k = dgc_step(st, n, g, NULL, NULL);
                if (k < 0.5 * target || k > 2.0 * target)
                    fail_msg("sparsity %g step %d: %zu selected, target %.0f",
                             (double)sparsities[si], t, k, target);
                total += (double)k;
            }
            if (fabs(total / steps / target - 1.0) > 0.25)
                fail_msg("sparsity %g: %.0f selected per step on average, target %.0f",
                         (double)sparsities[si], total / steps, target);
            ak__dgc_free(st);
        }
    }
    free(g);
}

/* Runs zero gradients until the residual is empty: the one-zero-value marker. */
static void flush(ak_dgc_state *st, size_t n, uint32_t *idx, float *val, double *sent) {
    float *zero = falloc(n);
    for (int t = 0;; t++) {
        if (t > 100000) fail_msg("residual never drained");
        size_t k = dgc_step(st, n, zero, idx, val);
        if (k == 1 && val[0] == 0.0f) break;
        for (size_t i = 0; i < k; i++) sent[idx[i]] += val[i];
    }
    free(zero);
}

/* Error feedback without momentum: nothing is lost or created. Gradients on a 2^-10 grid
 * keep every sum exact in f32, so sent + residual equals the sum of gradients bit for
 * bit per coordinate. */
static void test_dgc_conserves_mass(void **state) {
    (void)state;
    const size_t n = 5000;
    ak_dgc_config c = dgc_cfg(0.99f, 0.75f, 3, 0.0f);
    c.sample_ratio = 0.05f;
    ak_dgc_state *st = dgc_new(&c, n);
    size_t cap = ak__dgc_capacity(st);
    uint32_t *idx = calloc(cap, sizeof *idx);
    float *val = falloc(cap), *g = falloc(n);
    double *sent = calloc(n, sizeof *sent), *fed = calloc(n, sizeof *fed);
    assert_non_null(idx);
    assert_non_null(sent);
    assert_non_null(fed);
    uint64_t rng = 3;
    for (int t = 0; t < 40; t++) {
        for (size_t i = 0; i < n; i++) {
            g[i] = (float)((int)(test_rand_u64(&rng) % 2001) - 1000) / 1024.0f;
            fed[i] += g[i];
        }
        size_t k = dgc_step(st, n, g, idx, val);
        for (size_t i = 0; i < k; i++) sent[idx[i]] += val[i];
    }
    flush(st, n, idx, val, sent);
    for (size_t i = 0; i < n; i++)
        if (sent[i] != fed[i]) fail_msg("[%zu]: sent %.17g, fed %.17g", i, sent[i], fed[i]);
    ak__dgc_free(st);
    free(idx), free(val), free(g), free(sent), free(fed);
}

/* With momentum correction (plain and Nesterov), what enters the residual is the
 * momentum-corrected gradient; a model of u with the same masking must account for
 * every value sent. */
static void test_dgc_momentum_mass(void **state) {
    (void)state;
    const size_t n = 3000;
    const float m = 0.9f;
    for (int nesterov = 0; nesterov < 2; nesterov++) {
        ak_dgc_config c = dgc_cfg(0.98f, 0.75f, 2, m);
        c.nesterov = nesterov;
        ak_dgc_state *st = dgc_new(&c, n);
        size_t cap = ak__dgc_capacity(st);
        uint32_t *idx = calloc(cap, sizeof *idx);
        float *val = falloc(cap), *g = falloc(n), *u = falloc(n);
        double *sent = calloc(n, sizeof *sent), *fed = calloc(n, sizeof *fed);
        assert_non_null(idx);
        assert_non_null(sent);
        assert_non_null(fed);
        uint64_t rng = 9;
        for (int t = 0;; t++) {
            int live = t < 30; /* then zero gradients until the residual is empty */
            for (size_t i = 0; i < n; i++) {
                g[i] = live ? test_randn(&rng) : 0.0f;
                u[i] = m * u[i] + g[i];
                fed[i] += nesterov ? (double)(g[i] + m * u[i]) : (double)u[i];
            }
            size_t k = dgc_step(st, n, g, idx, val);
            if (!live && k == 1 && val[0] == 0.0f) break;
            if (t > 100000) fail_msg("residual never drained");
            for (size_t i = 0; i < k; i++) {
                sent[idx[i]] += val[i];
                u[idx[i]] = 0.0f; /* momentum factor masking */
            }
        }
        double tol = 0;
        for (size_t i = 0; i < n; i++) tol += fabs(fed[i]);
        tol = 1e-5 * tol / (double)n + 1e-5;
        for (size_t i = 0; i < n; i++)
            if (fabs(sent[i] - fed[i]) > tol)
                fail_msg("nesterov %d [%zu]: sent %.9g, fed %.9g", nesterov, i, sent[i], fed[i]);
        ak__dgc_free(st);
        free(idx), free(val), free(g), free(u), free(sent), free(fed);
    }
}

/* Sparsity 0 sends everything, so the values sent are the clipped gradient itself. */
static void test_dgc_clipping(void **state) {
    (void)state;
    const size_t n = 1000;
    ak_dgc_config c = dgc_cfg(0.0f, 0.0f, 0, 0.0f);
    c.clip_norm = 1.5f;
    ak_dgc_state *st = dgc_new(&c, n);
    assert_int_equal(ak__dgc_capacity(st), n);
    uint32_t *idx = calloc(n, sizeof *idx);
    float *val = falloc(n), *g = falloc(n);
    assert_non_null(idx);
    uint64_t rng = 21;
    double norm = 0;
    for (size_t i = 0; i < n; i++) {
        g[i] = 1.0f + 0.5f * test_rand_f32(&rng); /* never 0: all are sent */
        norm += (double)g[i] * g[i];
    }
    norm = sqrt(norm); /* about 32: well above the clip */
    assert_int_equal(dgc_step(st, n, g, idx, val), n);
    double sent = 0;
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(idx[i], i);
        sent += (double)val[i] * val[i];
        if (fabs(val[i] - g[i] * 1.5 / norm) > 1e-6 * fabs(g[i]))
            fail_msg("[%zu]: %g, want %g", i, (double)val[i], g[i] * 1.5 / norm);
    }
    assert_true(fabs(sqrt(sent) - 1.5) < 1e-5);
    /* below the clip: untouched, bit for bit */
    for (size_t i = 0; i < n; i++) g[i] *= 0.01f;
    assert_int_equal(dgc_step(st, n, g, idx, val), n);
    for (size_t i = 0; i < n; i++) assert_true(val[i] == g[i]);
    ak__dgc_free(st);
    free(idx), free(val), free(g);
}

typedef enum {
    IN_GAUSS, IN_EQUAL, IN_ZERO, IN_ONE_HUGE, IN_CAUCHY, IN_RAMP, IN_SPARSE, IN_NAN, IN_COUNT
} input_kind;

static void fill_input(input_kind kind, float *g, size_t n, uint64_t *rng) {
    for (size_t i = 0; i < n; i++) {
        switch (kind) {
        case IN_GAUSS: g[i] = test_randn(rng); break;
        case IN_EQUAL: g[i] = i % 2 ? -0.5f : 0.5f; break;
        case IN_ZERO: g[i] = 0.0f; break;
        case IN_ONE_HUGE: g[i] = i == n / 2 ? 1e30f : 1e-3f * test_rand_f32(rng); break;
        case IN_CAUCHY: g[i] = (float)tan(3.14159 * 0.4999 * test_rand_f32(rng)); break;
        case IN_RAMP: g[i] = (float)i; break; /* the largest all at the end */
        case IN_SPARSE: g[i] = test_rand_u64(rng) % 1000 == 0 ? test_randn(rng) : 0.0f; break;
        case IN_NAN: g[i] = i % 97 == 5 ? NAN : test_randn(rng); break;
        default: break;
        }
    }
}

/* Whatever the data, sizes and schedule: within capacity, at least one value, ascending
 * indices (checked by dgc_step), the exact target under ties. */
static void test_dgc_capacity_adversarial(void **state) {
    (void)state;
    static const size_t sizes[] = {1, 2, 3, 10, 999, 4096, 100000};
    static const float sparsities[] = {0.0f, 0.5f, 0.9f, 0.999f, 1.0f};
    float *g = falloc(100000);
    uint32_t *idx = calloc(100000, sizeof *idx);
    float *val = falloc(100000);
    assert_non_null(idx);
    uint64_t rng = 1;
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        size_t n = sizes[si];
        for (size_t pi = 0; pi < sizeof sparsities / sizeof sparsities[0]; pi++) {
            ak_dgc_config c = dgc_cfg(sparsities[pi], 0.75f, (int)(pi % 3), pi % 2 ? 0.9f : 0.0f);
            c.nesterov = (int)(si % 2);
            ak_dgc_state *st = dgc_new(&c, n);
            size_t cap = ak__dgc_capacity(st);
            assert_true(cap >= 1 && cap <= n);
            for (int kind = 0; kind < IN_COUNT; kind++) {
                fill_input((input_kind)kind, g, n, &rng);
                size_t k = dgc_step(st, n, g, idx, val);
                if (kind == IN_NAN && n > 5) { /* NaN is sent, not hidden in the residual */
                    int found = 0;
                    for (size_t i = 0; i < k; i++) found |= idx[i] == 5 && isnan(val[i]);
                    if (!found) fail_msg("n %zu: NaN at 5 not sent", n);
                }
            }
            ak__dgc_free(st);
        }
    }
    /* ties: every |v| equal, so the sampled threshold passes them all; the refinement
     * must cut at exactly the target */
    const size_t n = 100000;
    ak_dgc_config c = dgc_cfg(0.99f, 0.0f, 0, 0.0f);
    ak_dgc_state *st = dgc_new(&c, n);
    fill_input(IN_EQUAL, g, n, &rng);
    assert_int_equal(dgc_step(st, n, g, idx, val), 1000);
    ak__dgc_free(st);
    /* everything zero: one (zero) value, so every rank still has something to send */
    st = dgc_new(&c, n);
    fill_input(IN_ZERO, g, n, &rng);
    assert_int_equal(dgc_step(st, n, g, idx, val), 1);
    assert_true(val[0] == 0.0f);
    /* a few non-zero values among zeros: those are sent, no zeros */
    for (size_t i = 0; i < 10; i++) g[i * 1000 + 7] = (float)(i + 1);
    assert_int_equal(dgc_step(st, n, g, idx, val), 10);
    for (size_t i = 0; i < 10; i++) assert_true(idx[i] == i * 1000 + 7 && val[i] == i + 1.0f);
    ak__dgc_free(st);
    /* empty tensor */
    st = dgc_new(&c, 0);
    assert_int_equal(ak__dgc_capacity(st), 0);
    size_t k = 5;
    assert_int_equal(ak__dgc_compress(st, NULL, NULL, NULL, &k), AK_OK);
    assert_int_equal(k, 0);
    ak__dgc_free(st);
    free(g), free(idx), free(val);
}

/* Capacity bounds what one call can select, from the largest density of the schedule. */
static void test_dgc_capacity_value(void **state) {
    (void)state;
    ak_dgc_config c = dgc_cfg(0.999f, 0.75f, 5, 0.9f);
    ak_dgc_state *st = dgc_new(&c, 1000000);
    assert_int_equal(ak__dgc_capacity(st), 500000); /* 2 × 25 % at the start */
    ak__dgc_free(st);
    c.warmup_steps = 0;
    st = dgc_new(&c, 1000000);
    assert_int_equal(ak__dgc_capacity(st), 2000); /* 2 × 0.1 % */
    ak__dgc_free(st);
    assert_int_equal(ak__dgc_capacity(NULL), 0);
}

static void test_dgc_errors(void **state) {
    (void)state;
    ak_dgc_state *st = NULL;
    ak_dgc_config c = dgc_cfg(0.99f, 0.75f, 4, 0.9f);
    ak_dgc_config bad = c;
    bad.struct_size = 4;
    assert_int_equal(ak__dgc_create(&bad, 10, &st), AK_ERR_INVALID_ARG);
    assert_non_null(strstr(ak_last_error(), "struct_size"));
    assert_null(st);
    bad = c, bad.sparsity = 1.5f;
    assert_int_equal(ak__dgc_create(&bad, 10, &st), AK_ERR_INVALID_ARG);
    bad = c, bad.sparsity = NAN;
    assert_int_equal(ak__dgc_create(&bad, 10, &st), AK_ERR_INVALID_ARG);
    bad = c, bad.momentum = 1.0f;
    assert_int_equal(ak__dgc_create(&bad, 10, &st), AK_ERR_INVALID_ARG);
    bad = c, bad.sample_ratio = 0.0f;
    assert_int_equal(ak__dgc_create(&bad, 10, &st), AK_ERR_INVALID_ARG);
    bad = c, bad.clip_norm = -1.0f;
    assert_int_equal(ak__dgc_create(&bad, 10, &st), AK_ERR_INVALID_ARG);
    bad = c, bad.warmup_steps = -1;
    assert_int_equal(ak__dgc_create(&bad, 10, &st), AK_ERR_INVALID_ARG);
    assert_int_equal(ak__dgc_create(NULL, 10, &st), AK_ERR_INVALID_ARG);
    assert_int_equal(ak__dgc_create(&c, 10, NULL), AK_ERR_INVALID_ARG);
#if SIZE_MAX > UINT32_MAX
    assert_int_equal(ak__dgc_create(&c, (size_t)UINT32_MAX + 1, &st), AK_ERR_INVALID_ARG);
    assert_non_null(strstr(ak_last_error(), "32-bit"));
#endif
    st = dgc_new(&c, 10);
    size_t k;
    float g[10] = {0};
    assert_int_equal(ak__dgc_compress(st, NULL, NULL, NULL, &k), AK_ERR_INVALID_ARG);
    assert_int_equal(ak__dgc_compress(NULL, g, NULL, NULL, &k), AK_ERR_INVALID_ARG);
    ak__dgc_free(st);
    ak__dgc_free(NULL);

    /* scatter-add: a bad index fails naming it, and leaves the output as it was */
    float dense[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    uint32_t idx[3] = {0, 7, 8};
    float val[3] = {2, 3, 4};
    assert_int_equal(ak__dgc_scatter_add(idx, val, 3, dense, 8), AK_ERR_INVALID_ARG);
    assert_non_null(strstr(ak_last_error(), "idx[2] = 8"));
    for (int i = 0; i < 8; i++) assert_true(dense[i] == 1.0f);
    assert_int_equal(ak__dgc_scatter_add(idx, val, 2, dense, 8), AK_OK);
    assert_true(dense[0] == 3.0f && dense[7] == 4.0f && dense[3] == 1.0f);
    uint32_t dup[2] = {4, 4}; /* repeated indices add up */
    assert_int_equal(ak__dgc_scatter_add(dup, val, 2, dense, 8), AK_OK);
    assert_true(dense[4] == 6.0f);
    assert_int_equal(ak__dgc_scatter_add(NULL, NULL, 0, NULL, 0), AK_OK);
    assert_int_equal(ak__dgc_scatter_add(NULL, val, 1, dense, 8), AK_ERR_INVALID_ARG);
}

/* ---- convergence: softmax regression, 4 simulated workers ----------------------------
 * 20 features × 4 classes (84 parameters), 400 samples whose labels are drawn from the
 * softmax of a random teacher, so the best loss stays well above 0 and the comparison
 * measures optimisation, not a race to zero. Each step every worker takes the gradient
 * of a minibatch of its own 100-sample shard (the same minibatches in every run).
 *   dense: the average gradient drives momentum SGD (torch's rule);
 *   DGC:   each worker compresses its gradient (momentum correction inside), the sparse
 *          lists are summed densely and averaged, and a plain SGD step applies them;
 *   top-k: the control. The same number of values per worker, but the largest of the raw
 *          gradient with no residual and no momentum correction, then momentum SGD. It
 *          must miss the 5 % bar, or the bar would prove nothing.
 * Sparsity 99 %: one value of 84 per worker and step after a 20-step warm-up from 75 %
 * (the smallest selection there is; 1.65 % of the values sent over the run). Over 8 other
 * data seeds DGC ended +1.1 .. +1.6 % above dense, top-k +32.6 .. +56.5 %. */
#define CV_FEAT 20
#define CV_CLASS 4
#define CV_ROW (CV_FEAT + 1) /* weights, then the bias */
#define CV_PARAMS (CV_CLASS * CV_ROW)
#define CV_WORKERS 4
#define CV_SHARD 100
#define CV_SAMPLES (CV_WORKERS * CV_SHARD)
#define CV_BATCH 20
#define CV_STEPS 300

typedef struct cv_data {
    float x[CV_SAMPLES][CV_FEAT];
    int y[CV_SAMPLES];
} cv_data;

static void cv_generate(cv_data *d) {
    uint64_t rng = 2018;
    float teacher[CV_CLASS][CV_FEAT];
    for (int c = 0; c < CV_CLASS; c++)
        for (int f = 0; f < CV_FEAT; f++) teacher[c][f] = 0.6f * test_randn(&rng);
    for (int s = 0; s < CV_SAMPLES; s++) {
        double z[CV_CLASS], zmax = -1e300, sum = 0;
        for (int f = 0; f < CV_FEAT; f++) d->x[s][f] = test_randn(&rng);
        for (int c = 0; c < CV_CLASS; c++) {
            z[c] = 0;
            for (int f = 0; f < CV_FEAT; f++) z[c] += teacher[c][f] * d->x[s][f];
            zmax = fmax(zmax, z[c]);
        }
        for (int c = 0; c < CV_CLASS; c++) sum += z[c] = exp(z[c] - zmax);
        double r = (double)(test_rand_u64(&rng) >> 11) / 9007199254740992.0 * sum;
        int y = 0;
        while (y < CV_CLASS - 1 && (r -= z[y]) > 0) y++;
        d->y[s] = y;
    }
}

/* Cross-entropy of sample s; adds its gradient times `weight` into grad (if not NULL). */
static double cv_sample(const cv_data *d, const float *w, int s, float *grad, float weight) {
    double z[CV_CLASS], zmax = -1e300, sum = 0;
    for (int c = 0; c < CV_CLASS; c++) {
        const float *row = w + c * CV_ROW;
        z[c] = row[CV_FEAT];
        for (int f = 0; f < CV_FEAT; f++) z[c] += (double)row[f] * d->x[s][f];
        zmax = fmax(zmax, z[c]);
    }
    for (int c = 0; c < CV_CLASS; c++) sum += exp(z[c] - zmax);
    double loss = log(sum) - (z[d->y[s]] - zmax);
    if (grad)
        for (int c = 0; c < CV_CLASS; c++) {
            float dz = (float)(exp(z[c] - zmax) / sum - (c == d->y[s])) * weight;
            float *row = grad + c * CV_ROW;
            for (int f = 0; f < CV_FEAT; f++) row[f] += dz * d->x[s][f];
            row[CV_FEAT] += dz;
        }
    return loss;
}

static double cv_loss(const cv_data *d, const float *w) {
    double l = 0;
    for (int s = 0; s < CV_SAMPLES; s++) l += cv_sample(d, w, s, NULL, 0.0f);
    return l / CV_SAMPLES;
}

/* The minibatch gradient of worker r at a step (the batch depends on step and rank only). */
static void cv_grad(const cv_data *d, const float *w, int r, int step, float *grad) {
    memset(grad, 0, CV_PARAMS * sizeof(float));
    uint64_t rng = (uint64_t)step * 1000003u + (uint64_t)r;
    for (int b = 0; b < CV_BATCH; b++) {
        int s = r * CV_SHARD + (int)(test_rand_u64(&rng) % CV_SHARD);
        cv_sample(d, w, s, grad, 1.0f / CV_BATCH);
    }
}

typedef enum { CV_DENSE, CV_DGC, CV_TOPK } cv_mode;

/* Moves the topk largest |g| into sum (the control's sparsifier: the rest is dropped). */
static void cv_add_topk(float *g, size_t topk, float *sum) {
    for (size_t j = 0; j < topk; j++) {
        int best = 0;
        for (int i = 1; i < CV_PARAMS; i++) best = fabsf(g[i]) > fabsf(g[best]) ? i : best;
        sum[best] += g[best];
        g[best] = 0.0f;
    }
}

/* Trains from zero weights and returns the final loss over all samples. *sent (DGC)
 * gets the share of values the workers sent. */
static double cv_train(const cv_data *d, cv_mode mode, const ak_dgc_config *dgc, float lr,
                       double *sent) {
    float w[CV_PARAMS] = {0}, buf[CV_PARAMS] = {0}, avg[CV_PARAMS], g[CV_PARAMS];
    float val[CV_PARAMS];
    uint32_t idx[CV_PARAMS];
    ak_dgc_state *st[CV_WORKERS] = {0};
    const size_t topk = (size_t)fmax(1.0, round(CV_PARAMS * (1.0 - dgc->sparsity)));
    size_t count = 0;
    if (mode == CV_DGC)
        for (int r = 0; r < CV_WORKERS; r++) st[r] = dgc_new(dgc, CV_PARAMS);
    for (int step = 0; step < CV_STEPS; step++) {
        memset(avg, 0, sizeof avg);
        for (int r = 0; r < CV_WORKERS; r++) {
            cv_grad(d, w, r, step, g);
            if (mode == CV_DENSE) {
                for (int i = 0; i < CV_PARAMS; i++) avg[i] += g[i];
            } else if (mode == CV_TOPK) {
                cv_add_topk(g, topk, avg);
            } else {
                size_t k = dgc_step(st[r], CV_PARAMS, g, idx, val);
                assert_int_equal(ak__dgc_scatter_add(idx, val, k, avg, CV_PARAMS), AK_OK);
                count += k;
            }
        }
        for (int i = 0; i < CV_PARAMS; i++) {
            avg[i] /= CV_WORKERS;
            if (mode == CV_DGC) { /* the momentum is inside DGC: plain SGD */
                w[i] -= lr * avg[i];
            } else {
                buf[i] = dgc->momentum * buf[i] + avg[i];
                w[i] -= lr * buf[i];
            }
        }
    }
    for (int r = 0; r < CV_WORKERS; r++) ak__dgc_free(st[r]);
    if (sent) *sent = (double)count / ((double)CV_STEPS * CV_WORKERS * CV_PARAMS);
    return cv_loss(d, w);
}

static void test_dgc_convergence(void **state) {
    (void)state;
    cv_data *d = malloc(sizeof *d);
    assert_non_null(d);
    cv_generate(d);
    const float lr = 0.02f;
    const ak_dgc_config c = dgc_cfg(0.99f, 0.75f, 20, 0.9f);
    float w0[CV_PARAMS] = {0};
    double sent, initial = cv_loss(d, w0);
    double dense = cv_train(d, CV_DENSE, &c, lr, NULL);
    double dgc = cv_train(d, CV_DGC, &c, lr, &sent);
    double topk = cv_train(d, CV_TOPK, &c, lr, NULL);
    printf("convergence: %d params, %d workers, %d steps, lr %g, momentum %g: loss from %.4f "
           "to dense %.4f, DGC %.4f (%+.2f %%) at sparsity %g %% (%.2f %% of the values "
           "sent), top-k without feedback %.4f (%+.1f %%)\n",
           CV_PARAMS, CV_WORKERS, CV_STEPS, (double)lr, (double)c.momentum, initial, dense,
           dgc, 100.0 * (dgc / dense - 1.0), 100.0 * c.sparsity, 100.0 * sent, topk,
           100.0 * (topk / dense - 1.0));
    assert_true(dense < 0.5 * initial); /* the task was learned */
    assert_true(sent < 0.02);           /* and DGC really sent few values */
    if (fabs(dgc - dense) > 0.05 * dense)
        fail_msg("DGC final loss %.4f is not within 5 %% of dense %.4f", dgc, dense);
    if (!(topk > 1.05 * dense))
        fail_msg("the top-k control (%.4f) is within 5 %% of dense (%.4f): the test cannot "
                 "tell DGC from dropping values", topk, dense);
    free(d);
}

/* ---- throughput (AK_COMPRESS_BENCH=1) ------------------------------------------------ */

typedef ak_status (*bench_fn)(void *ctx);

static double bench_gbs(const char *what, bench_fn fn, void *ctx, double bytes) {
    double best = 1e30;
    for (int rep = 0; rep < 7; rep++) {
        uint64_t t0 = ak_now_ns();
        assert_int_equal(fn(ctx), AK_OK);
        double dt = (double)(ak_now_ns() - t0) * 1e-9;
        best = dt < best ? dt : best;
    }
    printf("  %-34s %8.2f ms  %6.2f GB/s\n", what, best * 1e3, bytes / best * 1e-9);
    return best;
}

typedef struct bench_ctx {
    float *x, *out, *val;
    uint16_t *wire;
    uint32_t *idx;
    size_t n;
    ak_train_compression kind;
    float scale;
    ak_dgc_state *st;
} bench_ctx;

static ak_status bench_absmax(void *p) {
    bench_ctx *b = p;
    volatile float m = ak__compress_absmax(b->x, b->n);
    (void)m;
    return AK_OK;
}
static ak_status bench_cast(void *p) {
    bench_ctx *b = p;
    return ak__compress_cast(b->kind, b->x, b->wire, b->n, b->scale);
}
static ak_status bench_decast(void *p) {
    bench_ctx *b = p;
    return ak__decompress_cast(b->kind, b->wire, b->out, b->n, 1.0f / b->scale);
}
static ak_status bench_dgc(void *p) {
    bench_ctx *b = p;
    size_t k;
    return ak__dgc_compress(b->st, b->x, b->idx, b->val, &k);
}

static void test_bench(void **state) {
    (void)state;
    const char *env = getenv("AK_COMPRESS_BENCH");
    if (!env || strcmp(env, "1") != 0) skip();
    bench_ctx b = {.n = (size_t)16 << 20};
    b.x = falloc(b.n), b.out = falloc(b.n), b.val = falloc(b.n);
    b.wire = calloc(b.n, 2), b.idx = calloc(b.n, 4);
    assert_non_null(b.wire);
    assert_non_null(b.idx);
    uint64_t rng = 1;
    for (size_t i = 0; i < b.n; i++) b.x[i] = 1e-3f * test_randn(&rng);
    const double n = (double)b.n;
    printf("compress throughput, %zu floats (GB/s of f32 input):\n", b.n);
    bench_gbs("absmax", bench_absmax, &b, 4 * n);
    b.kind = AK_COMPRESS_FP16;
    b.scale = ak__compress_scale(b.kind, ak__compress_absmax(b.x, b.n), 8);
    bench_gbs("cast f16 (scale 2^k)", bench_cast, &b, 4 * n);
    bench_gbs("decast f16 (scale 2^-k)", bench_decast, &b, 4 * n);
    b.scale = 1.0f;
    bench_gbs("cast f16 (scale 1)", bench_cast, &b, 4 * n);
    bench_gbs("decast f16 (scale 1)", bench_decast, &b, 4 * n);
    b.kind = AK_COMPRESS_BF16;
    bench_gbs("cast bf16", bench_cast, &b, 4 * n);
    bench_gbs("decast bf16", bench_decast, &b, 4 * n);
    static const float sp[] = {0.99f, 0.999f};
    for (int i = 0; i < 2; i++)
        for (int mom = 0; mom < 2; mom++) {
            ak_dgc_config c = dgc_cfg(sp[i], 0.0f, 0, mom ? 0.9f : 0.0f);
            b.st = dgc_new(&c, b.n);
            char what[64];
            snprintf(what, sizeof what, "dgc_compress %.1f %%%s", 100.0 * sp[i],
                     mom ? " momentum" : "");
            bench_gbs(what, bench_dgc, &b, 4 * n);
            ak__dgc_free(b.st);
        }
    free(b.x), free(b.out), free(b.val), free(b.wire), free(b.idx);
}

int main(void) {
    if (ak_init() != AK_OK) {
        fprintf(stderr, "ak_init failed: %s\n", ak_last_error());
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scale_rule),
        cmocka_unit_test(test_absmax),
        cmocka_unit_test(test_cast_roundtrip),
        cmocka_unit_test(test_cast_special_and_errors),
        cmocka_unit_test(test_dgc_schedule),
        cmocka_unit_test(test_dgc_target_share),
        cmocka_unit_test(test_dgc_conserves_mass),
        cmocka_unit_test(test_dgc_momentum_mass),
        cmocka_unit_test(test_dgc_clipping),
        cmocka_unit_test(test_dgc_capacity_adversarial),
        cmocka_unit_test(test_dgc_capacity_value),
        cmocka_unit_test(test_dgc_errors),
        cmocka_unit_test(test_dgc_convergence),
        cmocka_unit_test(test_bench),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
