/* Speculative-decoding tests. The theorem of speculative sampling is checked empirically:
 * for random target/draft distributions p, q (with zeros on either side) the emitted first
 * token over 200k trials follows p (chi-square), and the acceptance rate is Σ min(p, q);
 * the same for deterministic drafts (q = NULL: acceptance p(x)); and for whole rounds
 * (γ = 2 drafts + bonus) on a toy conditional model, the joint law of the first three
 * emitted tokens is the target's. Greedy verification is token-identical to greedy
 * decoding (toy models, draft model and n-gram drafts). Plus prompt-lookup proposals. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "accelkit/llm.h"
#include "llm/engine/sampler.h"
#include "llm/engine/spec.h"

/* ---- helpers ----------------------------------------------------------------------- */

static uint64_t rng_u64(uint64_t *st) {
    uint64_t z = (*st += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double rng_unit(uint64_t *st) { return (double)(rng_u64(st) >> 11) * 0x1.0p-53; }

/* A draw from p (n entries) with the test's own RNG, independent of the sampler's. */
static int32_t draw(const float *p, int32_t n, uint64_t *st) {
    double u = rng_unit(st), acc = 0.0;
    int32_t last = 0;
    for (int32_t i = 0; i < n; i++) {
        if (p[i] <= 0.0f) continue;
        acc += p[i];
        last = i;
        if (acc > u) return i;
    }
    return last;
}

/* A random distribution with `zeros` entries forced to 0. */
static void random_dist(float *p, int32_t n, int zeros, uint64_t *st) {
    double sum = 0.0, d[16];
    for (int32_t i = 0; i < n; i++) sum += d[i] = 0.05 + rng_unit(st);
    for (int z = 0; z < zeros; z++) {
        int32_t i = (int32_t)(rng_u64(st) % (uint64_t)n);
        sum -= d[i]; /* 0 when already zeroed */
        d[i] = 0.0;
    }
    for (int32_t i = 0; i < n; i++) p[i] = (float)(d[i] / sum);
}

static void sampler(ak__sampler *s, int32_t n, float t, uint64_t seed) {
    ak_sampling_params sp;
    assert_int_equal(ak_sampling_params_default(&sp), AK_OK);
    sp.temperature = t;
    sp.seed = seed;
    assert_int_equal(ak__sampler_init(s, n, &sp, 0), AK_OK);
}

/* Chi-square of counts against probabilities (bins with p = 0 must be empty); asserts
 * that it stays below the value exceeded with probability ~1e-6. Returns the statistic. */
static double chi_square(const uint64_t *obs, const double *p, int32_t n, uint64_t total) {
    double chi = 0.0;
    int df = -1;
    for (int32_t i = 0; i < n; i++) {
        if (p[i] <= 0.0) {
            if (obs[i]) return INFINITY;
            continue;
        }
        double e = p[i] * (double)total;
        chi += ((double)obs[i] - e) * ((double)obs[i] - e) / e;
        df++;
    }
    double a = 2.0 / (9.0 * df), c = 1.0 - a + 4.75 * sqrt(a);
    double crit = df * c * c * c;
    return chi / crit; /* < 1: consistent with p */
}

/* ---- the first emitted token follows p --------------------------------------------- */

enum { V = 6 };
static const uint64_t TRIALS = 200000;

/* Verifies TRIALS drafts x ~ q (q = NULL: the fixed token x0) and checks the emitted
 * tokens against p and the acceptance rate against its expectation. */
static void check_verify(const float *p, const float *q, int32_t x0, uint64_t seed) {
    ak__sampler s;
    sampler(&s, V, 1.0f, seed);
    uint64_t obs[V] = {0}, acc = 0, st = seed * 7919;
    for (uint64_t t = 0; t < TRIALS; t++) {
        int32_t x = q ? draw(q, V, &st) : x0;
        int ok = -1;
        int32_t y = ak__spec_verify(&s, p, q, x, &ok);
        assert_true(ok == 0 || ok == 1);
        if (ok) assert_int_equal(y, x);
        assert_in_range(y, 0, V - 1);
        obs[y]++;
        acc += (uint64_t)ok;
    }
    double pd[V], qd[V], want_acc = 0.0;
    for (int i = 0; i < V; i++) {
        pd[i] = p[i];
        qd[i] = q ? q[i] : (i == x0);
        want_acc += fmin(pd[i], qd[i]);
    }
    double r = chi_square(obs, pd, V, TRIALS);
    print_message("verify (q %s): chi2/critical = %.3f, acceptance %.4f (expected %.4f)\n",
                  q ? "given" : "NULL", r, (double)acc / TRIALS, want_acc);
    assert_true(r < 1.0);
    double sd = sqrt(want_acc * (1 - want_acc) / TRIALS);
    assert_true(fabs((double)acc / TRIALS - want_acc) <= 5 * sd + 1e-9);
    /* the emitted tokens are not simply the drafts' law (the check has power) */
    int differ = 0;
    for (int i = 0; i < V; i++) differ |= fabs(pd[i] - qd[i]) > 0.02;
    if (differ) assert_true(chi_square(obs, qd, V, TRIALS) > 1.0);
    ak__sampler_free(&s);
}

static void test_verify_preserves_target(void **state) {
    (void)state;
    uint64_t st = 1;
    float p[V], q[V];
    for (int round = 0; round < 4; round++) {
        random_dist(p, V, round % 3, &st); /* zeros in p ... */
        random_dist(q, V, (round + 1) % 3, &st); /* ... and in q */
        check_verify(p, q, 0, 100 + round);
    }
    /* equal distributions: every draft is accepted */
    random_dist(p, V, 0, &st);
    ak__sampler s;
    sampler(&s, V, 1.0f, 5);
    int ok;
    for (int t = 0; t < 1000; t++) {
        int32_t x = (int32_t)(t % V);
        assert_int_equal(ak__spec_verify(&s, p, p, x, &ok), x);
        assert_int_equal(ok, 1);
    }
    ak__sampler_free(&s);
}

static void test_verify_deterministic_draft(void **state) {
    (void)state;
    uint64_t st = 2;
    float p[V];
    random_dist(p, V, 1, &st);
    int32_t zero = 0;
    while (p[zero] > 0.0f) zero++;
    check_verify(p, NULL, zero == 0 ? 1 : 0, 200); /* a likely draft */
    check_verify(p, NULL, zero, 201);              /* an impossible one: always rejected */
    /* a draft holding almost all the mass: rejections must still draw from the rest */
    float heavy[V] = {0.002f, 0.99f, 0.001f, 0.004f, 0.0f, 0.003f};
    check_verify(heavy, NULL, 1, 202);
    /* a certain token is always accepted */
    float one[V] = {0, 0, 1, 0, 0, 0};
    ak__sampler s;
    sampler(&s, V, 1.0f, 3);
    int ok;
    for (int t = 0; t < 1000; t++) {
        assert_int_equal(ak__spec_verify(&s, one, NULL, 2, &ok), 2);
        assert_int_equal(ok, 1);
        assert_int_equal(ak__spec_verify(&s, one, NULL, 4, &ok), 2);
        assert_int_equal(ok, 0);
    }
    /* a draft that is not a token is rejected */
    assert_int_equal(ak__spec_verify(&s, one, NULL, V + 3, &ok), 2);
    assert_int_equal(ok, 0);
    ak__sampler_free(&s);
}

/* Vocabularies of several chunks plus a tail: the chunked residual walk. */
static void test_verify_large_vocab(void **state) {
    (void)state;
    enum { N = 1000 + 37 };
    static float p[N], q[N];
    static double pd[N];
    static uint64_t obs[N];
    uint64_t st = 9;
    for (int i = 0; i < N; i++) { /* q favours the low ids, p the high ones */
        pd[i] = (i % 7 == 3) ? 0.0 : 1.0 + (double)i / N;
        q[i] = (float)((i % 11 == 5) ? 0.0 : 2.0 - (double)i / N);
    }
    double sp = 0.0, sq = 0.0;
    for (int i = 0; i < N; i++) {
        sp += pd[i];
        sq += q[i];
    }
    for (int i = 0; i < N; i++) {
        pd[i] /= sp;
        p[i] = (float)pd[i];
        q[i] = (float)(q[i] / sq);
    }
    ak__sampler s;
    sampler(&s, N, 1.0f, 10);
    uint64_t acc = 0;
    for (uint64_t t = 0; t < TRIALS; t++) {
        int ok;
        obs[ak__spec_verify(&s, p, q, draw(q, N, &st), &ok)]++;
        acc += (uint64_t)ok;
    }
    double r = chi_square(obs, pd, N, TRIALS);
    print_message("verify, %d tokens: chi2/critical = %.3f, acceptance %.4f\n", N, r,
                  (double)acc / TRIALS);
    assert_true(r < 1.0);
    ak__sampler_free(&s);
}

static void test_bonus(void **state) {
    (void)state;
    uint64_t st = 3, obs[V] = {0};
    float p[V];
    double pd[V];
    random_dist(p, V, 2, &st);
    for (int i = 0; i < V; i++) pd[i] = p[i];
    ak__sampler s;
    sampler(&s, V, 0.9f, 4);
    for (uint64_t t = 0; t < TRIALS; t++) obs[ak__spec_bonus(&s, p)]++;
    assert_true(chi_square(obs, pd, V, TRIALS) < 1.0);
    ak__sampler_free(&s);
}

/* ---- whole rounds on a toy conditional model --------------------------------------- */

/* p(. | previous token) and q(. | previous token); context V = the start. Built through
 * ak__sampler_dist with top-k 3, so target and draft have different supports. */
typedef struct toy {
    float p[V + 1][V], q[V + 1][V];
} toy;

static void toy_build(toy *m, uint64_t seed) {
    ak__sampler s;
    ak_sampling_params sp;
    assert_int_equal(ak_sampling_params_default(&sp), AK_OK);
    sp.top_k = 3;
    sp.temperature = 0.9f;
    assert_int_equal(ak__sampler_init(&s, V, &sp, 0), AK_OK);
    for (int c = 0; c <= V; c++) {
        float lt[V], ld[V];
        for (int v = 0; v < V; v++) {
            lt[v] = (float)(2.0 * rng_unit(&seed));
            ld[v] = lt[v] + (float)(1.5 * rng_unit(&seed) - 0.75);
        }
        ak__sampler_dist(&s, lt, m->p[c]);
        ak__sampler_dist(&s, ld, m->q[c]);
    }
    ak__sampler_free(&s);
}

/* One speculative round with γ = 2 after context `ctx`: appends 1 to 3 tokens to out.
 * Returns the new count. */
static int toy_round(const toy *m, ak__sampler *s, int ctx, int32_t *out, int n,
                     uint64_t *st) {
    int32_t x[2];
    int c = ctx;
    for (int i = 0; i < 2; i++) c = x[i] = draw(m->q[c], V, st);
    c = ctx;
    for (int i = 0; i < 2; i++) {
        int ok;
        int32_t y = ak__spec_verify(s, m->p[c], m->q[c], x[i], &ok);
        out[n++] = y;
        if (!ok) return n;
        c = y;
    }
    out[n++] = ak__spec_bonus(s, m->p[c]);
    return n;
}

static void test_rounds_joint_law(void **state) {
    (void)state;
    toy m;
    toy_build(&m, 77);
    ak__sampler s;
    sampler(&s, V, 0.9f, 6);
    static uint64_t obs[V * V * V];
    memset(obs, 0, sizeof obs);
    uint64_t st = 8;
    const uint64_t trials = 300000;
    for (uint64_t t = 0; t < trials; t++) {
        int32_t out[8];
        int n = 0;
        while (n < 3) n = toy_round(&m, &s, n ? out[n - 1] : V, out, n, &st);
        obs[(out[0] * V + out[1]) * V + out[2]]++;
    }
    static double want[V * V * V];
    for (int a = 0; a < V; a++)
        for (int b = 0; b < V; b++)
            for (int c = 0; c < V; c++)
                want[(a * V + b) * V + c] = (double)m.p[V][a] * m.p[a][b] * m.p[b][c];
    double r = chi_square(obs, want, V * V * V, trials);
    print_message("joint law of 3 tokens (gamma 2): chi2/critical = %.3f\n", r);
    assert_true(r < 1.0);
    ak__sampler_free(&s);
}

/* ---- greedy ------------------------------------------------------------------------ */

enum { GV = 64 };

/* Toy logits for the token after (a, b): a hash; the draft adds a perturbation that
 * sometimes changes the argmax. */
static void toy_logits(int32_t a, int32_t b, int draft, float *out) {
    uint64_t st = (uint64_t)(a * 1000 + b), noise = st ^ 0x5555;
    for (int v = 0; v < GV; v++) {
        out[v] = (float)(4.0 * rng_unit(&st));
        if (draft) out[v] += (float)(0.6 * rng_unit(&noise));
    }
}

static void greedy_reference(int32_t *seq, int n) {
    ak__sampler s;
    sampler(&s, GV, 0.0f, 0);
    float l[GV];
    for (int i = 2; i < n; i++) {
        toy_logits(seq[i - 2], seq[i - 1], 0, l);
        seq[i] = ak__sampler_sample(&s, l, NULL, NULL, NULL);
    }
    ak__sampler_free(&s);
}

/* Speculative greedy decoding with the draft model (ngram = 0) or prompt lookup. Returns
 * the number of accepted drafts. */
static int greedy_speculative(int32_t *seq, int n, int ngram) {
    ak__sampler s;
    sampler(&s, GV, 0.0f, 0);
    float l[GV], p[5][GV], q[4][GV]; /* p: after each of up to 4 drafts, and the bonus */
    int len = 2, accepted = 0;
    while (len < n) {
        int32_t d[4];
        int g;
        if (ngram) {
            g = (int)ak__ngram_propose(seq, (size_t)len, ngram, 4, d);
        } else {
            int32_t a = seq[len - 2], b = seq[len - 1];
            for (g = 0; g < 4; g++) { /* the draft proposes greedily */
                toy_logits(a, b, 1, l);
                ak__sampler_dist(&s, l, q[g]);
                d[g] = ak__sampler_draw(&s, q[g]);
                a = b;
                b = d[g];
            }
        }
        int32_t a = seq[len - 2], b = seq[len - 1];
        for (int i = 0; i <= g; i++) { /* the target's distributions after each draft */
            toy_logits(a, b, 0, l);
            ak__sampler_dist(&s, l, p[i]);
            a = b;
            b = i < g ? d[i] : 0;
        }
        int i = 0, ok = 1;
        for (; i < g && ok && len < n; i++) {
            seq[len++] = ak__spec_verify(&s, p[i], ngram ? NULL : q[i], d[i], &ok);
            accepted += ok;
        }
        if (ok && len < n) seq[len++] = ak__spec_bonus(&s, p[i]);
    }
    ak__sampler_free(&s);
    return accepted;
}

static void test_greedy_identical(void **state) {
    (void)state;
    enum { N = 200 };
    int32_t want[N] = {3, 5}, got[N] = {3, 5}, got_ng[N] = {3, 5};
    greedy_reference(want, N);
    int acc = greedy_speculative(got, N, 0);
    int acc_ng = greedy_speculative(got_ng, N, 2);
    print_message("greedy: %d of %d tokens from accepted drafts (draft model), %d (n-gram)\n",
                  acc, N - 2, acc_ng);
    assert_memory_equal(want, got, sizeof want);
    assert_memory_equal(want, got_ng, sizeof want);
    assert_true(acc > 0 && acc < N - 2); /* both branches of verification were taken */
    /* greedy verify: accepted iff the draft is the argmax; the argmax is emitted */
    ak__sampler s;
    sampler(&s, 4, 0.0f, 0);
    const float p[4] = {0.1f, 0.6f, 0.3f, 0.0f};
    int ok;
    assert_int_equal(ak__spec_verify(&s, p, p, 1, &ok), 1);
    assert_int_equal(ok, 1);
    assert_int_equal(ak__spec_verify(&s, p, p, 2, &ok), 1);
    assert_int_equal(ok, 0);
    assert_int_equal(ak__spec_verify(&s, p, NULL, 0, &ok), 1);
    assert_int_equal(ok, 0);
    assert_int_equal(ak__spec_bonus(&s, p), 1);
    ak__sampler_free(&s);
}

/* ---- prompt lookup ----------------------------------------------------------------- */

static void test_ngram(void **state) {
    (void)state;
    int32_t out[8];
    const int32_t h1[] = {1, 2, 3, 4, 1, 2};
    assert_int_equal(ak__ngram_propose(h1, 6, 2, 3, out), 3);
    assert_int_equal(out[0], 3);
    assert_int_equal(out[1], 4);
    assert_int_equal(out[2], 1);
    assert_int_equal(ak__ngram_propose(h1, 6, 2, 1, out), 1); /* at most gamma */
    assert_int_equal(out[0], 3);
    /* the most recent occurrence wins */
    const int32_t h2[] = {7, 8, 1, 7, 8, 2, 9, 7, 8};
    assert_int_equal(ak__ngram_propose(h2, 9, 2, 4, out), 4);
    assert_int_equal(out[0], 2);
    assert_int_equal(out[3], 8);
    assert_int_equal(ak__ngram_propose(h2, 9, 3, 4, out), 0); /* "9 7 8" never before */
    /* the continuation may run into the tail itself, and stops at the end */
    const int32_t h3[] = {5, 5, 5};
    assert_int_equal(ak__ngram_propose(h3, 3, 1, 4, out), 1);
    assert_int_equal(out[0], 5);
    assert_int_equal(ak__ngram_propose(h3, 3, 2, 4, out), 1);
    /* nothing to propose */
    assert_int_equal(ak__ngram_propose(h1, 2, 2, 3, out), 0);
    assert_int_equal(ak__ngram_propose(h1, 6, 0, 3, out), 0);
    assert_int_equal(ak__ngram_propose(h1, 6, 2, 0, out), 0);
    assert_int_equal(ak__ngram_propose(NULL, 6, 2, 3, out), 0);
    assert_int_equal(ak__ngram_propose(h1, 6, 2, 3, NULL), 0);
    const int32_t h4[] = {1, 2, 3, 4};
    assert_int_equal(ak__ngram_propose(h4, 4, 1, 3, out), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_verify_preserves_target),
        cmocka_unit_test(test_verify_deterministic_draft),
        cmocka_unit_test(test_verify_large_vocab),
        cmocka_unit_test(test_bonus),
        cmocka_unit_test(test_rounds_joint_law),
        cmocka_unit_test(test_greedy_identical),
        cmocka_unit_test(test_ngram),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
