/* Sampler tests: parameter checks; greedy = argmax of the penalized logits; penalties on
 * hand-computed cases; ak__sampler_dist against a double-precision reference that sorts
 * the whole vocabulary (same kept set, probabilities within 2e-6 relative, more at low temperatures); draws and
 * top-k/top-p/min-p sampling against their distributions by a chi-square test; seeds and
 * streams; log-probabilities against a double log-softmax; and the per-token time at
 * n_vocab = 32000 (greedy < 30 µs, filtered sampling < 300 µs). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "accelkit/llm.h"
#include "llm/engine/sampler.h"

/* ---- helpers ----------------------------------------------------------------------- */

static uint64_t rng_u64(uint64_t *st) {
    uint64_t z = (*st += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double rng_unit(uint64_t *st) { return (double)(rng_u64(st) >> 11) * 0x1.0p-53; }

/* Roughly normal (sum of uniforms), scaled: the shape of real logits. */
static float rng_logit(uint64_t *st, float scale) {
    double a = rng_unit(st) + rng_unit(st) + rng_unit(st) + rng_unit(st) - 2.0;
    return (float)(a * 1.7 * scale);
}

static float *random_logits(int32_t n, uint64_t seed, float scale) {
    float *x = malloc((size_t)n * sizeof *x);
    assert_non_null(x);
    for (int32_t i = 0; i < n; i++) x[i] = rng_logit(&seed, scale);
    return x;
}

static ak_sampling_params params(float t, int32_t k, float p, float min_p) {
    ak_sampling_params sp;
    assert_int_equal(ak_sampling_params_default(&sp), AK_OK);
    sp.temperature = t;
    sp.top_k = k;
    sp.top_p = p;
    sp.min_p = min_p;
    return sp;
}

static void init(ak__sampler *s, int32_t n, const ak_sampling_params *p, uint64_t stream) {
    assert_int_equal(ak__sampler_init(s, n, p, stream), AK_OK);
}

/* Chi-square of observed counts against probabilities; bins with p = 0 must be empty.
 * Returns the statistic and the degrees of freedom. */
static double chi_square(const uint64_t *obs, const double *p, int32_t n, uint64_t total,
                         int *df) {
    double chi = 0.0;
    *df = -1;
    for (int32_t i = 0; i < n; i++) {
        if (p[i] <= 0.0) {
            assert_int_equal(obs[i], 0);
            continue;
        }
        double e = p[i] * (double)total;
        chi += ((double)obs[i] - e) * ((double)obs[i] - e) / e;
        (*df)++;
    }
    return chi;
}

/* The chi-square value exceeded with probability ~1e-6 (Wilson-Hilferty, z = 4.75). */
static double chi_critical(int df) {
    if (df <= 0) return 1e-9;
    double a = 2.0 / (9.0 * df);
    double c = 1.0 - a + 4.75 * sqrt(a);
    return df * c * c * c;
}

/* ---- the reference: every step in double, the whole vocabulary sorted -------------- */

typedef struct ref_hist {
    int prompt[64];
    int gen[64];
} ref_hist;

static const double *g_sort_p;

static int by_prob(const void *a, const void *b) {
    int32_t i = *(const int32_t *)a, j = *(const int32_t *)b;
    if (g_sort_p[i] != g_sort_p[j]) return g_sort_p[i] > g_sort_p[j] ? -1 : 1;
    return i < j ? -1 : 1;
}

/* z after penalties (sampler.h's rules), for tokens < 64 of the history h. */
static double ref_penalized(const ak_sampling_params *sp, const ref_hist *h, int32_t i,
                            double x) {
    if (!h || i >= 64 || (!h->prompt[i] && !h->gen[i])) return x;
    double rp = sp->repetition_penalty;
    x = x > 0 ? x / rp : x * rp;
    if (h->gen[i]) x -= sp->presence_penalty + (double)sp->frequency_penalty * h->gen[i];
    return x;
}

/* The final distribution in double. */
static void ref_dist(const ak_sampling_params *sp, const ref_hist *h, const float *logits,
                     int32_t n, double *out) {
    double *z = malloc((size_t)n * sizeof *z);
    int32_t *ord = malloc((size_t)n * sizeof *ord);
    assert_true(z && ord);
    double m = -INFINITY, sum = 0.0;
    for (int32_t i = 0; i < n; i++) {
        z[i] = ref_penalized(sp, h, i, logits[i]) / sp->temperature;
        if (z[i] > m) m = z[i];
    }
    for (int32_t i = 0; i < n; i++) sum += (out[i] = exp(z[i] - m));
    for (int32_t i = 0; i < n; i++) out[i] /= sum;
    for (int32_t i = 0; i < n; i++) ord[i] = i;
    g_sort_p = out;
    qsort(ord, (size_t)n, sizeof *ord, by_prob);
    int32_t keep = sp->top_k > 0 && sp->top_k < n ? sp->top_k : n;
    double mass_k = 0.0, cum = 0.0;
    for (int32_t r = 0; r < keep; r++) mass_k += out[ord[r]];
    int32_t keep_p = 0;
    while (keep_p < keep) { /* the shortest prefix reaching top_p of the top-k mass */
        cum += out[ord[keep_p++]];
        if (cum >= sp->top_p * mass_k) break;
    }
    double pmax = out[ord[0]], total = 0.0;
    for (int32_t r = 0; r < n; r++) {
        int32_t i = ord[r];
        if (r >= keep_p || out[i] < sp->min_p * pmax) out[i] = 0.0;
        total += out[i];
    }
    for (int32_t i = 0; i < n; i++) out[i] /= total;
    free(z);
    free(ord);
}

/* ---- parameters -------------------------------------------------------------------- */

static void expect_bad(ak_sampling_params sp, const char *field) {
    ak__sampler s;
    assert_int_equal(ak__sampler_init(&s, 10, &sp, 0), AK_ERR_INVALID_ARG);
    assert_non_null(strstr(ak_last_error(), field));
    ak__sampler_free(&s);
}

static void test_params(void **state) {
    (void)state;
    ak_sampling_params sp;
    assert_int_equal(ak_sampling_params_default(NULL), AK_ERR_INVALID_ARG);
    assert_int_equal(ak_sampling_params_default(&sp), AK_OK);
    assert_true(sp.temperature == 1.0f && sp.top_k == 0 && sp.top_p == 1.0f);
    assert_true(sp.min_p == 0.0f && sp.repetition_penalty == 1.0f);
    assert_true(sp.presence_penalty == 0.0f && sp.frequency_penalty == 0.0f);
    assert_true(sp.seed == 0 && sp.n_logprobs == 0);

    ak_sampling_params b = sp;
    b.temperature = -0.1f;
    expect_bad(b, "temperature");
    b.temperature = NAN;
    expect_bad(b, "temperature");
    b = sp;
    b.top_p = 0.0f;
    expect_bad(b, "top_p");
    b.top_p = 1.5f;
    expect_bad(b, "top_p");
    b = sp;
    b.min_p = -0.5f;
    expect_bad(b, "min_p");
    b.min_p = 1.01f;
    expect_bad(b, "min_p");
    b = sp;
    b.top_k = -1;
    expect_bad(b, "top_k");
    b = sp;
    b.repetition_penalty = 0.0f;
    expect_bad(b, "repetition_penalty");
    b = sp;
    b.presence_penalty = INFINITY;
    expect_bad(b, "presence_penalty");
    b = sp;
    b.frequency_penalty = NAN;
    expect_bad(b, "frequency_penalty");
    b = sp;
    b.n_logprobs = 21;
    expect_bad(b, "n_logprobs");
    b.n_logprobs = -1;
    expect_bad(b, "n_logprobs");

    ak__sampler s;
    assert_int_equal(ak__sampler_init(&s, 0, &sp, 0), AK_ERR_INVALID_ARG);
    assert_non_null(strstr(ak_last_error(), "n_vocab"));
    assert_int_equal(ak__sampler_init(&s, 10, NULL, 0), AK_ERR_INVALID_ARG);
    assert_int_equal(ak__sampler_init(NULL, 10, &sp, 0), AK_ERR_INVALID_ARG);
    ak__sampler_free(NULL);
}

/* ---- greedy and penalties ---------------------------------------------------------- */

static int32_t ref_argmax(const double *z, int32_t n) {
    int32_t b = 0;
    for (int32_t i = 1; i < n; i++)
        if (z[i] > z[b]) b = i;
    return b;
}

static void test_greedy(void **state) {
    (void)state;
    const int32_t n = 5000;
    float *x = random_logits(n, 7, 3.0f);
    ak_sampling_params sp = params(0.0f, 0, 1.0f, 0.0f);
    ak__sampler s;
    init(&s, n, &sp, 0);
    double *z = malloc(n * sizeof *z);
    for (int32_t i = 0; i < n; i++) z[i] = x[i];
    assert_int_equal(ak__sampler_sample(&s, x, NULL, NULL, NULL), ref_argmax(z, n));
    /* ties go to the lower id; NaN never wins */
    x[10] = x[20] = 100.0f;
    x[3] = NAN;
    assert_int_equal(ak__sampler_sample(&s, x, NULL, NULL, NULL), 10);
    x[20] = 101.0f;
    float *probs = malloc(n * sizeof *probs);
    ak__sampler_dist(&s, x, probs);
    for (int32_t i = 0; i < n; i++) assert_true(probs[i] == (i == 20 ? 1.0f : 0.0f));
    ak__sampler_free(&s);

    /* with penalties: the argmax of the penalized logits */
    sp.repetition_penalty = 1.3f;
    sp.presence_penalty = 0.4f;
    sp.frequency_penalty = 0.2f;
    init(&s, n, &sp, 0);
    ref_hist h = {{0}, {0}};
    x[20] = 40.0f;
    x[10] = 39.0f;
    for (int32_t i = 0; i < n; i++) z[i] = x[i] == x[i] ? x[i] : -INFINITY;
    ak__sampler_accept(&s, 20, 1); /* a prompt token: 40/1.3 = 30.8 < 39 */
    h.prompt[20] = 1;
    z[20] = ref_penalized(&sp, &h, 20, x[20]);
    assert_int_equal(ak__sampler_sample(&s, x, NULL, NULL, NULL), ref_argmax(z, n));
    assert_int_equal(ref_argmax(z, n), 10);
    for (int r = 0; r < 3; r++) { /* generated 3 times: 39/1.3 - 0.4 - 0.6 = 29 < 30.8 */
        ak__sampler_accept(&s, 10, 0);
        h.gen[10]++;
    }
    z[10] = ref_penalized(&sp, &h, 10, x[10]);
    assert_int_equal(ak__sampler_sample(&s, x, NULL, NULL, NULL), ref_argmax(z, n));
    assert_int_equal(ref_argmax(z, n), 20);
    /* a negative presence penalty pulls a token up */
    ak__sampler_free(&s);
    sp.repetition_penalty = 1.0f;
    sp.presence_penalty = -50.0f;
    sp.frequency_penalty = 0.0f;
    init(&s, n, &sp, 0);
    ak__sampler_accept(&s, 4321, 0);
    assert_int_equal(ak__sampler_sample(&s, x, NULL, NULL, NULL), 4321);
    ak__sampler_accept(&s, 99, 1); /* presence is for generated tokens only */
    assert_int_equal(ak__sampler_sample(&s, x, NULL, NULL, NULL), 4321);
    ak__sampler_reset(&s);
    assert_int_equal(ak__sampler_sample(&s, x, NULL, NULL, NULL), 20);
    ak__sampler_accept(&s, -1, 0); /* out of range: ignored */
    ak__sampler_accept(&s, n, 0);
    assert_int_equal(ak__sampler_sample(&s, x, NULL, NULL, NULL), 20);
    ak__sampler_free(&s);
    free(probs);
    free(z);
    free(x);
}

/* A 4-token case computed by hand: prompt {0}, generated {1, 1, 3}; repetition 2,
 * presence 0.5, frequency 0.25. */
static void test_penalties_exact(void **state) {
    (void)state;
    const float x[4] = {2.0f, -1.0f, 0.5f, 3.0f};
    /* t0: 2/2 = 1 (prompt only: no presence/frequency); t1: -1·2 - 0.5 - 0.25·2 = -3;
     * t2: untouched 0.5; t3: 3/2 - 0.5 - 0.25 = 0.75 */
    const double want_z[4] = {1.0, -3.0, 0.5, 0.75};
    ak_sampling_params sp = params(1.0f, 0, 1.0f, 0.0f);
    sp.repetition_penalty = 2.0f;
    sp.presence_penalty = 0.5f;
    sp.frequency_penalty = 0.25f;
    ak__sampler s;
    init(&s, 4, &sp, 0);
    ak__sampler_accept(&s, 0, 1);
    ak__sampler_accept(&s, 1, 0);
    ak__sampler_accept(&s, 1, 0);
    ak__sampler_accept(&s, 3, 0);
    double sum = 0.0;
    for (int i = 0; i < 4; i++) sum += exp(want_z[i]);
    float probs[4];
    ak__sampler_dist(&s, x, probs);
    for (int i = 0; i < 4; i++) assert_float_equal(probs[i], exp(want_z[i]) / sum, 1e-6);
    /* at temperature 0.5 the penalized logits are doubled */
    s.p.temperature = 0.5f;
    ak__sampler_dist(&s, x, probs);
    double sum2 = 0.0;
    for (int i = 0; i < 4; i++) sum2 += exp(2 * want_z[i]);
    for (int i = 0; i < 4; i++) assert_float_equal(probs[i], exp(2 * want_z[i]) / sum2, 1e-6);
    /* greedy logprob: log-softmax of the penalized logits at temperature 1 */
    s.p.temperature = 0.0f;
    float lp;
    assert_int_equal(ak__sampler_sample(&s, x, &lp, NULL, NULL), 0);
    assert_float_equal(lp, want_z[0] - log(sum), 1e-6);
    /* taking generated tokens back undoes exactly their penalties */
    ak__sampler_accept(&s, 2, 0);
    ak__sampler_accept(&s, 3, 0);
    ak__sampler_unaccept(&s, 3);
    ak__sampler_unaccept(&s, 2);
    ak__sampler_unaccept(&s, 0); /* a prompt token: nothing to take back */
    s.p.temperature = 1.0f;
    ak__sampler_dist(&s, x, probs);
    for (int i = 0; i < 4; i++) assert_float_equal(probs[i], exp(want_z[i]) / sum, 1e-6);
    assert_int_equal(s.n_touched, 3);
    ak__sampler_unaccept(&s, 3); /* 3 leaves the history */
    assert_int_equal(s.n_touched, 2);
    ak__sampler_dist(&s, x, probs);
    double z3[4] = {1.0, -3.0, 0.5, 3.0}, sum3 = 0.0;
    for (int i = 0; i < 4; i++) sum3 += exp(z3[i]);
    for (int i = 0; i < 4; i++) assert_float_equal(probs[i], exp(z3[i]) / sum3, 1e-6);
    s.p.temperature = 0.0f;
    /* reset forgets the history */
    ak__sampler_reset(&s);
    assert_int_equal(ak__sampler_sample(&s, x, NULL, NULL, NULL), 3);
    s.p.temperature = 1.0f;
    ak__sampler_dist(&s, x, probs);
    double raw = exp(2.0) + exp(-1.0) + exp(0.5) + exp(3.0);
    for (int i = 0; i < 4; i++) assert_float_equal(probs[i], exp(x[i]) / raw, 1e-6);
    ak__sampler_free(&s);
}

/* ---- the distribution against the reference ---------------------------------------- */

typedef struct dist_case {
    int32_t n;
    float t;
    int32_t k;
    float p, min_p;
    int penalties;
} dist_case;

static void check_dist(const dist_case *c, uint64_t seed) {
    float *x = random_logits(c->n, seed, 2.5f);
    ak_sampling_params sp = params(c->t, c->k, c->p, c->min_p);
    ref_hist h = {{0}, {0}};
    ak__sampler s;
    if (c->penalties) {
        sp.repetition_penalty = 1.5f;
        sp.presence_penalty = 0.3f;
        sp.frequency_penalty = 0.1f;
    }
    init(&s, c->n, &sp, 0);
    for (int32_t i = 0; c->penalties && i < 40 && i < c->n; i += 3) {
        ak__sampler_accept(&s, i, (i % 2) == 0);
        if (i % 2 == 0)
            h.prompt[i] = 1;
        else
            h.gen[i] = 1;
        if (i % 5 == 0) { /* and once more, generated */
            ak__sampler_accept(&s, i, 0);
            h.gen[i]++;
        }
    }
    float *probs = malloc((size_t)c->n * sizeof *probs);
    double *want = malloc((size_t)c->n * sizeof *want);
    ak__sampler_dist(&s, x, probs);
    ref_dist(&sp, c->penalties ? &h : NULL, x, c->n, want);
    /* float z = x/T carries a relative error of ~|z|·2^-24, which exp turns into the same
     * relative error of p: the tolerance grows as the temperature falls */
    double zmax = 0.0, sum = 0.0;
    for (int32_t i = 0; i < c->n; i++) zmax = fmax(zmax, fabs(x[i] / c->t));
    double tol = 2e-6 + 4 * 0x1p-24 * zmax;
    for (int32_t i = 0; i < c->n; i++) {
        if ((want[i] > 0.0) != (probs[i] > 0.0))
            fail_msg("n=%d T=%g k=%d p=%g min_p=%g: token %d kept %d, reference %d (p=%g)",
                     c->n, (double)c->t, c->k, (double)c->p, (double)c->min_p, i,
                     probs[i] > 0.0f, want[i] > 0.0, want[i]);
        if (!(fabs(probs[i] - want[i]) <= tol * want[i] + 1e-12))
            fail_msg("n=%d T=%g k=%d p=%g: token %d p=%.9g, reference %.9g", c->n, (double)c->t,
                     c->k, (double)c->p, i, (double)probs[i], want[i]);
        sum += probs[i];
    }
    assert_float_equal(sum, 1.0, 1e-5);
    ak__sampler_free(&s);
    free(probs);
    free(want);
    free(x);
}

static void test_dist_reference(void **state) {
    (void)state;
    static const dist_case cases[] = {
        {1, 1.0f, 0, 1.0f, 0.0f, 0},    {2, 0.7f, 1, 1.0f, 0.0f, 0},
        {7, 1.0f, 3, 0.9f, 0.0f, 0},    {100, 1.2f, 0, 0.5f, 0.0f, 1},
        {100, 0.8f, 10, 1.0f, 0.05f, 1}, {1000, 1.0f, 0, 1.0f, 0.0f, 0},
        {1000, 0.9f, 40, 0.95f, 0.0f, 1}, {1000, 0.6f, 0, 0.9f, 0.02f, 0},
        {1000, 1.0f, 999, 1.0f, 0.0f, 0}, {1000, 1.0f, 1000, 0.3f, 0.0f, 0},
        {1000, 2.0f, 0, 1.0f, 0.2f, 1},  {1000, 1.0f, 0, 1.0f, 1.0f, 0},
        {32000, 0.8f, 0, 0.9f, 0.0f, 1}, {32000, 1.0f, 50, 0.95f, 0.01f, 0},
        {32000, 1.0f, 5000, 0.99f, 0.0f, 0}, {32000, 5.0f, 20000, 0.5f, 0.0f, 0},
        {32000, 0.05f, 0, 0.999f, 0.0f, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (uint64_t seed = 1; seed <= 3; seed++) check_dist(&cases[i], seed * 1000 + i);
}

/* Ties and flat distributions: equal logits are ordered by id, so top-k of a flat
 * vocabulary keeps the k lowest ids and top-p their prefix. */
static void test_ties(void **state) {
    (void)state;
    const int32_t n = 3000;
    float *x = calloc(n, sizeof *x);
    float *probs = malloc(n * sizeof *probs);
    ak_sampling_params sp = params(1.0f, 100, 1.0f, 0.0f);
    ak__sampler s;
    init(&s, n, &sp, 0);
    ak__sampler_dist(&s, x, probs);
    for (int32_t i = 0; i < n; i++) assert_float_equal(probs[i], (i < 100 ? 0.01 : 0.0), 1e-7);
    s.p.top_k = 0;
    s.p.top_p = 0.5f; /* 1500 of 3000 reach exactly half */
    ak__sampler_dist(&s, x, probs);
    int32_t kept = 0;
    for (int32_t i = 0; i < n; i++) kept += probs[i] > 0.0f;
    assert_in_range(kept, 1500, 1501);
    for (int32_t i = 0; i < kept; i++) assert_true(probs[i] > 0.0f);
    /* masked tokens (-inf) are never kept, even without any filter */
    s.p.top_p = 1.0f;
    for (int32_t i = 0; i < n; i += 2) x[i] = -INFINITY;
    ak__sampler_dist(&s, x, probs);
    for (int32_t i = 0; i < n; i++) assert_float_equal(probs[i], (i % 2 ? 2.0 / n : 0.0), 1e-7);
    for (int r = 0; r < 1000; r++) assert_true(ak__sampler_sample(&s, x, NULL, NULL, NULL) % 2);
    ak__sampler_free(&s);
    free(x);
    free(probs);
}

/* ---- statistics -------------------------------------------------------------------- */

/* ak__sampler_draw follows its input distribution. */
static void test_draw_statistics(void **state) {
    (void)state;
    const float pf[8] = {0.3f, 0.2f, 0.0f, 0.15f, 0.1f, 0.1f, 0.1f, 0.05f};
    double p[8];
    uint64_t obs[8] = {0};
    const uint64_t total = 200000;
    ak_sampling_params sp = params(1.0f, 0, 1.0f, 0.0f);
    sp.seed = 42;
    ak__sampler s;
    init(&s, 8, &sp, 0);
    for (int i = 0; i < 8; i++) p[i] = pf[i];
    for (uint64_t r = 0; r < total; r++) obs[ak__sampler_draw(&s, pf)]++;
    int df;
    double chi = chi_square(obs, p, 8, total, &df);
    print_message("draw: chi2 = %.2f (df %d, critical %.2f)\n", chi, df, chi_critical(df));
    assert_true(chi < chi_critical(df));
    /* the same check rejects a wrong distribution (the test has power) */
    double wrong[8] = {0.28, 0.22, 0.0, 0.15, 0.1, 0.1, 0.1, 0.05};
    assert_true(chi_square(obs, wrong, 8, total, &df) > chi_critical(df));
    ak__sampler_free(&s);
}

/* ak__sampler_sample with filters follows the reference distribution. */
static void check_sample_stats(float t, int32_t k, float p, float min_p, uint64_t seed) {
    const int32_t n = 12;
    const uint64_t total = 200000;
    float *x = random_logits(n, seed, 1.5f);
    ak_sampling_params sp = params(t, k, p, min_p);
    sp.seed = seed;
    double want[12];
    uint64_t obs[12] = {0};
    ref_dist(&sp, NULL, x, n, want);
    ak__sampler s;
    init(&s, n, &sp, 0);
    for (uint64_t r = 0; r < total; r++) obs[ak__sampler_sample(&s, x, NULL, NULL, NULL)]++;
    int df;
    double chi = chi_square(obs, want, n, total, &df);
    print_message("sample T=%g k=%d p=%g min_p=%g: chi2 = %.2f (df %d, critical %.2f)\n",
                  (double)t, k, (double)p, (double)min_p, chi, df, chi_critical(df));
    assert_true(chi < chi_critical(df));
    ak__sampler_free(&s);
    free(x);
}

static void test_sample_statistics(void **state) {
    (void)state;
    check_sample_stats(1.0f, 0, 1.0f, 0.0f, 1);
    check_sample_stats(0.7f, 5, 1.0f, 0.0f, 2);
    check_sample_stats(1.0f, 0, 0.8f, 0.0f, 3);
    check_sample_stats(1.3f, 0, 1.0f, 0.1f, 4);
    check_sample_stats(1.0f, 8, 0.9f, 0.05f, 5);
}

/* ---- seeds ------------------------------------------------------------------------- */

static void run_tokens(ak__sampler *s, const float *x, int32_t *out, int n) {
    for (int i = 0; i < n; i++) {
        out[i] = ak__sampler_sample(s, x, NULL, NULL, NULL);
        ak__sampler_accept(s, out[i], 0);
    }
}

static void test_reproducible(void **state) {
    (void)state;
    const int32_t n = 1000;
    enum { T = 300 };
    float *x = random_logits(n, 3, 1.0f);
    ak_sampling_params sp = params(1.0f, 50, 0.95f, 0.0f);
    sp.seed = 1234;
    sp.frequency_penalty = 0.1f;
    ak__sampler a, b, c, d;
    init(&a, n, &sp, 0);
    init(&b, n, &sp, 0);
    init(&c, n, &sp, 1);
    sp.seed = 1235;
    init(&d, n, &sp, 0);
    int32_t ta[T], tb[T], tc[T], td[T];
    run_tokens(&a, x, ta, T);
    run_tokens(&b, x, tb, T);
    run_tokens(&c, x, tc, T);
    run_tokens(&d, x, td, T);
    assert_memory_equal(ta, tb, sizeof ta);
    assert_memory_not_equal(ta, tc, sizeof ta);
    assert_memory_not_equal(ta, td, sizeof ta);
    ak__sampler_reset(&a); /* re-seeded and history forgotten: the same tokens again */
    run_tokens(&a, x, tb, T);
    assert_memory_equal(ta, tb, sizeof ta);
    /* dist + draw with the same RNG state gives the same token as sample */
    ak__sampler_reset(&a);
    ak__sampler_reset(&b);
    float *probs = malloc(n * sizeof *probs);
    for (int i = 0; i < 50; i++) {
        ak__sampler_dist(&b, x, probs);
        assert_int_equal(ak__sampler_sample(&a, x, NULL, NULL, NULL), ak__sampler_draw(&b, probs));
    }
    free(probs);
    ak__sampler_free(&a);
    ak__sampler_free(&b);
    ak__sampler_free(&c);
    ak__sampler_free(&d);
    free(x);
}

/* ---- log-probabilities ------------------------------------------------------------- */

static void check_top(const ak_llm_logprob *top, int32_t n_top, const double *ref_lp,
                      int32_t n, int32_t want_n) {
    assert_int_equal(n_top, want_n);
    for (int32_t j = 0; j < n_top; j++) {
        int32_t t = top[j].token;
        assert_in_range(t, 0, n - 1);
        assert_float_equal(top[j].logprob, ref_lp[t], 1e-5);
        if (j > 0) assert_true(top[j].logprob <= top[j - 1].logprob);
        /* nothing left out is more likely than the last one reported */
    }
    int32_t more = 0;
    for (int32_t i = 0; i < n; i++) more += ref_lp[i] > (double)top[n_top - 1].logprob + 1e-5;
    assert_true(more < n_top);
}

static void test_logprobs(void **state) {
    (void)state;
    const int32_t n = 2000;
    float *x = random_logits(n, 11, 2.0f);
    double *want = malloc(n * sizeof *want), *lp = malloc(n * sizeof *lp);
    ak_llm_logprob top[20];
    int32_t n_top;
    float l;
    /* sampled: logprob under the final (filtered) distribution */
    ak_sampling_params sp = params(0.8f, 40, 0.9f, 0.0f);
    sp.n_logprobs = 20;
    ak__sampler s;
    init(&s, n, &sp, 5);
    ref_dist(&sp, NULL, x, n, want);
    int32_t kept = 0;
    for (int32_t i = 0; i < n; i++) {
        lp[i] = want[i] > 0 ? log(want[i]) : -INFINITY;
        kept += want[i] > 0;
    }
    for (int r = 0; r < 200; r++) {
        int32_t t = ak__sampler_sample(&s, x, &l, top, &n_top);
        assert_true(want[t] > 0.0);
        assert_float_equal(l, lp[t], 1e-5);
        check_top(top, n_top, lp, n, kept < 20 ? kept : 20);
    }
    /* fewer kept tokens than asked: only those are reported */
    s.p.top_k = 3;
    s.p.top_p = 1.0f;
    ak__sampler_sample(&s, x, &l, top, &n_top);
    assert_int_equal(n_top, 3);
    ak__sampler_free(&s);

    /* greedy: log-softmax of the penalized logits at temperature 1 */
    sp = params(0.0f, 0, 1.0f, 0.0f);
    sp.n_logprobs = 5;
    sp.repetition_penalty = 1.2f;
    init(&s, n, &sp, 0);
    ref_hist h = {{0}, {0}};
    for (int32_t i = 0; i < 64; i += 7) {
        ak__sampler_accept(&s, i, 1);
        h.prompt[i] = 1;
    }
    double m = -INFINITY, sum = 0.0;
    for (int32_t i = 0; i < n; i++) {
        lp[i] = ref_penalized(&sp, &h, i, x[i]);
        if (lp[i] > m) m = lp[i];
    }
    for (int32_t i = 0; i < n; i++) sum += exp(lp[i] - m);
    for (int32_t i = 0; i < n; i++) lp[i] -= m + log(sum);
    int32_t t = ak__sampler_sample(&s, x, &l, top, &n_top);
    assert_int_equal(t, ref_argmax(lp, n));
    assert_float_equal(l, lp[t], 1e-5);
    check_top(top, n_top, lp, n, 5);
    assert_int_equal(top[0].token, t);
    /* NULL outputs are allowed */
    assert_int_equal(ak__sampler_sample(&s, x, NULL, top, NULL), t);
    ak__sampler_free(&s);
    free(want);
    free(lp);
    free(x);
}

/* ---- speed ------------------------------------------------------------------------- */

/* Best of 5 rounds of the mean time per call, in µs. */
static double time_sample(ak__sampler *s, const float *x, int with_logprob) {
    double best = INFINITY;
    ak_llm_logprob top[20];
    int32_t n_top;
    float lp;
    for (int round = 0; round < 5; round++) {
        const int calls = 200;
        uint64_t t0 = ak_now_ns();
        for (int i = 0; i < calls; i++)
            ak__sampler_sample(s, x, with_logprob ? &lp : NULL, with_logprob ? top : NULL,
                               with_logprob ? &n_top : NULL);
        double us = (double)(ak_now_ns() - t0) / 1e3 / calls;
        if (us < best) best = us;
    }
    return best;
}

/* Timing limits hold for optimized builds; sanitizer and -O0 builds only print. The
 * suite runs tests two at a time on two cores, so the limits get a 4x allowance: enough
 * to catch an algorithmic regression (a full sort of the vocabulary costs ~2 ms), not a
 * busy neighbour. The quiet-machine figures are the printed ones. */
#if defined(__SANITIZE_ADDRESS__) || !defined(__OPTIMIZE__)
#define TIME_SCALE 1000.0
#else
#define TIME_SCALE 4.0
#endif

static double time_case(const float *x, int32_t n, ak_sampling_params sp, int with_logprob,
                        const char *name) {
    ak__sampler s;
    init(&s, n, &sp, 0);
    for (int32_t i = 0; i < 200; i++) ak__sampler_accept(&s, i * 37 % n, i < 150);
    double us = time_sample(&s, x, with_logprob);
    print_message("n_vocab %d, %-34s %8.1f us/token\n", n, name, us);
    ak__sampler_free(&s);
    return us / TIME_SCALE;
}

/* Logit bias: the reference is the sampler on logits with the bias added by hand; +100
 * forces a token, -100 bans the greedy one, and bad entries are refused. */
static void test_logit_bias(void **state) {
    (void)state;
    const int32_t n = 1000;
    float *logits = random_logits(n, 77, 3.0f);
    float *biased = malloc((size_t)n * sizeof *biased);
    float *p_ref = malloc((size_t)n * sizeof *p_ref), *p_got = malloc((size_t)n * sizeof *p_got);
    memcpy(biased, logits, (size_t)n * sizeof *biased);
    const int32_t ids[3] = {5, 500, 5};
    const float bias[3] = {1.5f, -2.0f, 0.5f}; /* a repeated id adds up */
    biased[5] += 2.0f;
    biased[500] -= 2.0f;
    ak__sampler with, ref;
    ak_sampling_params p = params(0.8f, 0, 1.0f, 0.0f);
    init(&with, n, &p, 0);
    init(&ref, n, &p, 0);
    assert_int_equal(ak__sampler_set_bias(&with, ids, bias, 3), AK_OK);
    ak__sampler_dist(&with, logits, p_got);
    ak__sampler_dist(&ref, biased, p_ref);
    for (int32_t i = 0; i < n; i++) assert_float_equal(p_got[i], p_ref[i], 1e-6);
    /* greedy: -100 on the argmax bans it, +100 on another token forces that one */
    ak__sampler g;
    ak_sampling_params pg = params(0.0f, 0, 1.0f, 0.0f);
    init(&g, n, &pg, 0);
    int32_t top = ak__sampler_sample(&g, logits, NULL, NULL, NULL);
    const float ban = -100.0f, force = 100.0f;
    assert_int_equal(ak__sampler_set_bias(&g, &top, &ban, 1), AK_OK);
    assert_int_not_equal(ak__sampler_sample(&g, logits, NULL, NULL, NULL), top);
    int32_t other = (top + 1) % n;
    assert_int_equal(ak__sampler_set_bias(&g, &other, &force, 1), AK_OK);
    for (int k = 0; k < 5; k++) assert_int_equal(ak__sampler_sample(&g, logits, NULL, NULL, NULL), other);
    assert_int_equal(ak__sampler_set_bias(&with, &other, &force, 1), AK_OK);
    for (int k = 0; k < 20; k++) assert_int_equal(ak__sampler_sample(&with, logits, NULL, NULL, NULL), other);
    /* bad entries */
    const int32_t bad_id = n;
    const float nan_bias = NAN;
    assert_int_equal(ak__sampler_set_bias(&g, &bad_id, &force, 1), AK_ERR_INVALID_ARG);
    assert_int_equal(ak__sampler_set_bias(&g, &other, &nan_bias, 1), AK_ERR_INVALID_ARG);
    ak__sampler_free(&with);
    ak__sampler_free(&ref);
    ak__sampler_free(&g);
    free(logits);
    free(biased);
    free(p_ref);
    free(p_got);
}

static void test_speed(void **state) {
    (void)state;
    const int32_t n = 32000;
    float *x = random_logits(n, 99, 3.0f);
    ak_sampling_params sp = params(0.0f, 0, 1.0f, 0.0f);
    assert_true(time_case(x, n, sp, 0, "greedy") < 30.0);
    sp.repetition_penalty = 1.1f;
    assert_true(time_case(x, n, sp, 0, "greedy + penalties") < 30.0);
    time_case(x, n, sp, 1, "greedy + penalties + 20 logprobs");
    sp = params(0.8f, 0, 1.0f, 0.0f);
    assert_true(time_case(x, n, sp, 0, "temperature") < 300.0);
    sp = params(0.8f, 40, 1.0f, 0.0f);
    assert_true(time_case(x, n, sp, 0, "top-k 40") < 300.0);
    sp = params(0.8f, 0, 0.9f, 0.0f);
    assert_true(time_case(x, n, sp, 0, "top-p 0.9") < 300.0);
    sp = params(0.8f, 40, 0.95f, 0.05f);
    sp.repetition_penalty = 1.1f;
    assert_true(time_case(x, n, sp, 1, "top-k/p + min-p + pen + logprobs") < 300.0);
    float *flat = calloc(n, sizeof *flat); /* one bucket holds everything */
    sp = params(1.0f, 0, 0.5f, 0.0f);
    assert_true(time_case(flat, n, sp, 0, "top-p 0.5, all logits equal") < 3000.0);
    free(flat);
    free(x);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_params),
        cmocka_unit_test(test_greedy),
        cmocka_unit_test(test_penalties_exact),
        cmocka_unit_test(test_dist_reference),
        cmocka_unit_test(test_ties),
        cmocka_unit_test(test_draw_statistics),
        cmocka_unit_test(test_sample_statistics),
        cmocka_unit_test(test_reproducible),
        cmocka_unit_test(test_logprobs),
        cmocka_unit_test(test_logit_bias),
        cmocka_unit_test(test_speed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
