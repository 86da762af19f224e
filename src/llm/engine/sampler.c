/* Token sampling (see sampler.h for the order of the transformations).
 *
 * How a token is sampled without sorting the vocabulary:
 *   1. work[] = penalized logits (a copy; penalties touch only the tokens in the history),
 *      scaled by 1/T; m = their maximum;
 *   2. work[] = e_i = exp(z_i - m), the unnormalized probabilities (the maximum is 1);
 *   3. top-k / top-p: a histogram of e over buckets that are a monotone function of e's
 *      bits (16 per octave) says which bucket holds the cut-off; only that bucket's
 *      members are gathered and a (weighted) quickselect finds the exact cut-off element;
 *   4. min-p is a threshold on e (e ≥ min_p, since the maximum is 1);
 *   5. the kept set is then "every token before the cut-off in the order (e descending,
 *      id ascending)", so one pass sums its mass and one pass draws.
 * Greedy is an argmax over the penalized logits, and over the raw logits when no penalty
 * applies. */
#include "llm/engine/sampler.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"

#define HIST_PROMPT 0x80000000u
#define HIST_COUNT 0x7fffffffu

ak_status ak_sampling_params_default(ak_sampling_params *p) {
    AK_ARG_CHECK(p != NULL, "ak_sampling_params_default: p is NULL");
    memset(p, 0, sizeof *p);
    p->temperature = 1.0f;
    p->top_k = 0;
    p->top_p = 1.0f;
    p->min_p = 0.0f;
    p->repetition_penalty = 1.0f;
    return AK_OK;
}

/* ---- parameters and RNG ------------------------------------------------------------ */

static ak_status check_params(const ak_sampling_params *p) {
    AK_ARG_CHECK(isfinite(p->temperature) && p->temperature >= 0.0f,
                 "sampling: temperature must be a finite number >= 0 (got %g)",
                 (double)p->temperature);
    AK_ARG_CHECK(p->top_k >= 0, "sampling: top_k must be >= 0 (0 = off; got %d)", (int)p->top_k);
    AK_ARG_CHECK(p->top_p > 0.0f && p->top_p <= 1.0f,
                 "sampling: top_p must be in (0, 1] (1 = off; got %g)", (double)p->top_p);
    AK_ARG_CHECK(p->min_p >= 0.0f && p->min_p <= 1.0f,
                 "sampling: min_p must be in [0, 1] (0 = off; got %g)", (double)p->min_p);
    AK_ARG_CHECK(isfinite(p->repetition_penalty) && p->repetition_penalty > 0.0f,
                 "sampling: repetition_penalty must be a finite number > 0 (1 = off; got %g)",
                 (double)p->repetition_penalty);
    AK_ARG_CHECK(isfinite(p->presence_penalty),
                 "sampling: presence_penalty must be finite (got %g)", (double)p->presence_penalty);
    AK_ARG_CHECK(isfinite(p->frequency_penalty),
                 "sampling: frequency_penalty must be finite (got %g)",
                 (double)p->frequency_penalty);
    AK_ARG_CHECK(p->n_logprobs >= 0 && p->n_logprobs <= 20,
                 "sampling: n_logprobs must be in 0..20 (got %d)", (int)p->n_logprobs);
    return AK_OK;
}

static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* SplitMix64 (Steele et al. 2014): the state walks by the golden gamma and each output is
 * a strong mix of it. The start depends on both the seed and the stream, mixed separately
 * so that (seed, stream) pairs do not collide by simple arithmetic. */
static void rng_seed(ak__sampler *s) {
    s->rng_state = mix64(s->p.seed ^ mix64(s->stream + 0x6a09e667f3bcc909ull));
}

static uint64_t rng_next(ak__sampler *s) {
    s->rng_state += 0x9e3779b97f4a7c15ull;
    return mix64(s->rng_state);
}

double ak__sampler_uniform(ak__sampler *s) {
    return (double)(rng_next(s) >> 11) * 0x1.0p-53;
}

/* ---- lifetime and history ---------------------------------------------------------- */

ak_status ak__sampler_init(ak__sampler *s, int32_t n_vocab, const ak_sampling_params *p,
                           uint64_t stream) {
    AK_ARG_CHECK(s != NULL, "ak__sampler_init: s is NULL");
    memset(s, 0, sizeof *s);
    AK_ARG_CHECK(p != NULL, "ak__sampler_init: sampling parameters are NULL");
    AK_ARG_CHECK(n_vocab > 0, "ak__sampler_init: n_vocab must be > 0 (got %d)", (int)n_vocab);
    AK_CHECK(check_params(p));
    s->p = *p;
    s->n_vocab = n_vocab;
    s->stream = stream;
    size_t n = (size_t)n_vocab;
    s->hist = calloc(n, sizeof *s->hist);
    s->touched = malloc(n * sizeof *s->touched);
    s->work = malloc(n * sizeof *s->work);
    s->idx = malloc(n * sizeof *s->idx);
    s->bucket_count = malloc(AK__SAMPLER_BUCKETS * sizeof *s->bucket_count);
    s->bucket_mass = malloc(AK__SAMPLER_BUCKETS * sizeof *s->bucket_mass);
    if (!s->hist || !s->touched || !s->work || !s->idx || !s->bucket_count ||
        !s->bucket_mass) {
        ak__sampler_free(s);
        return AK_FAIL(AK_ERR_NO_MEMORY, "ak__sampler_init: no memory for a %d-token vocabulary",
                       (int)n_vocab);
    }
    rng_seed(s);
    return AK_OK;
}

void ak__sampler_free(ak__sampler *s) {
    if (!s) return;
    free(s->hist);
    free(s->touched);
    free(s->work);
    free(s->idx);
    free(s->bucket_count);
    free(s->bucket_mass);
    free(s->bias_ids);
    free(s->bias);
    s->bias_ids = NULL;
    s->bias = NULL;
    s->n_bias = 0;
    s->hist = NULL;
    s->touched = NULL;
    s->work = NULL;
    s->idx = NULL;
    s->bucket_count = NULL;
    s->bucket_mass = NULL;
    s->n_touched = 0;
}

ak_status ak__sampler_set_bias(ak__sampler *s, const int32_t *ids, const float *bias, size_t n) {
    AK_ARG_CHECK(n == 0 || (ids && bias), "logit bias: ids or values are NULL");
    AK_ARG_CHECK(n <= (size_t)s->n_vocab, "logit bias: %zu entries for %d tokens", n,
                 (int)s->n_vocab);
    for (size_t i = 0; i < n; i++) {
        AK_ARG_CHECK(ids[i] >= 0 && ids[i] < s->n_vocab,
                     "logit bias: token %d outside the vocabulary [0, %d)", ids[i], s->n_vocab);
        AK_ARG_CHECK(isfinite(bias[i]), "logit bias: the bias of token %d is not finite",
                     ids[i]);
    }
    free(s->bias_ids);
    free(s->bias);
    s->bias_ids = NULL;
    s->bias = NULL;
    s->n_bias = 0;
    if (n == 0) return AK_OK;
    s->bias_ids = malloc(n * sizeof *s->bias_ids);
    s->bias = malloc(n * sizeof *s->bias);
    if (!s->bias_ids || !s->bias) return AK_FAIL(AK_ERR_NO_MEMORY, "logit bias");
    memcpy(s->bias_ids, ids, n * sizeof *ids);
    memcpy(s->bias, bias, n * sizeof *bias);
    s->n_bias = (int32_t)n;
    return AK_OK;
}

void ak__sampler_reset(ak__sampler *s) {
    for (int32_t i = 0; i < s->n_touched; i++) s->hist[s->touched[i]] = 0;
    s->n_touched = 0;
    rng_seed(s);
}

void ak__sampler_accept(ak__sampler *s, int32_t token, int is_prompt) {
    if (token < 0 || token >= s->n_vocab) return;
    uint32_t h = s->hist[token];
    if (h == 0) s->touched[s->n_touched++] = token;
    if (is_prompt)
        h |= HIST_PROMPT;
    else if ((h & HIST_COUNT) != HIST_COUNT)
        h++;
    s->hist[token] = h;
}

void ak__sampler_unaccept(ak__sampler *s, int32_t token) {
    if (token < 0 || token >= s->n_vocab || (s->hist[token] & HIST_COUNT) == 0) return;
    if (--s->hist[token] != 0) return;
    /* no longer in the history: drop it from touched (searched from the most recent) */
    for (int32_t j = s->n_touched - 1; j >= 0; j--)
        if (s->touched[j] == token) {
            memmove(&s->touched[j], &s->touched[j + 1],
                    (size_t)(s->n_touched - 1 - j) * sizeof *s->touched);
            s->n_touched--;
            return;
        }
}

/* ---- penalized logits -------------------------------------------------------------- */

static int penalties_on(const ak__sampler *s) {
    return s->n_touched > 0 &&
           (s->p.repetition_penalty != 1.0f || s->p.presence_penalty != 0.0f ||
            s->p.frequency_penalty != 0.0f);
}

/* NaN counts as -inf; +inf is clamped so that z - max stays a number. */
static float sanitize(float x) {
    if (x != x) return -INFINITY;
    return x > FLT_MAX ? FLT_MAX : x;
}

static float penalize(const ak__sampler *s, float x, uint32_t h) {
    if (h == 0) return x;
    float rp = s->p.repetition_penalty;
    if (rp != 1.0f) x = x > 0.0f ? x / rp : x * rp;
    uint32_t gen = h & HIST_COUNT;
    if (gen) x -= s->p.presence_penalty + s->p.frequency_penalty * (float)gen;
    return sanitize(x);
}

/* work = the penalized logits (NaN and inf are dealt with where it matters: argmax
 * ignores NaN, scale_max and the log-sum-exp sanitize). */
static void load_logits(ak__sampler *s, const float *logits) {
    float *w = s->work;
    memcpy(w, logits, (size_t)s->n_vocab * sizeof *w);
    for (int32_t j = 0; j < s->n_bias; j++)
        w[s->bias_ids[j]] = sanitize(sanitize(w[s->bias_ids[j]]) + s->bias[j]);
    if (!penalties_on(s)) return;
    for (int32_t j = 0; j < s->n_touched; j++) {
        int32_t t = s->touched[j];
        w[t] = penalize(s, sanitize(w[t]), s->hist[t]);
    }
}

/* ---- vector loops -------------------------------------------------------------------
 * The loops below work on blocks of LANES floats with a fixed-size inner loop, which the
 * compiler turns into SIMD code at -O2 (this file is not built with -O3 or -march);
 * the scalar code handles the tail and the rare blocks that need a closer look. */
#define LANES 16

static float max_of(const float *x, int32_t n) {
    float lane[LANES];
    for (int j = 0; j < LANES; j++) lane[j] = -INFINITY;
    int32_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int j = 0; j < LANES; j++) lane[j] = x[i + j] > lane[j] ? x[i + j] : lane[j];
    float m = -INFINITY;
    for (int j = 0; j < LANES; j++) m = lane[j] > m ? lane[j] : m;
    for (; i < n; i++) m = x[i] > m ? x[i] : m;
    return m;
}

/* The first i with x[i] == v, or -1. */
static int32_t find_first(const float *x, int32_t n, float v) {
    int32_t i = 0;
    for (; i + LANES <= n; i += LANES) {
        int any = 0;
        for (int j = 0; j < LANES; j++) any |= x[i + j] == v;
        if (any) break;
    }
    for (; i < n; i++)
        if (x[i] == v) return i;
    return -1;
}

int32_t ak__argmax_f32(const float *x, int32_t n) {
    int32_t i = find_first(x, n, max_of(x, n));
    return i < 0 ? 0 : i;
}

/* exp(x) for x <= 0, relative error ~2e-7, exactly 1 at 0, exactly 0 below -87 and for
 * NaN (so tokens masked with -inf can never be drawn). Cody-Waite reduction x = n·ln2 + r,
 * a degree-6 polynomial for e^r, and 2^n built in the exponent bits. The selections are
 * bit masks rather than branches so that loops over it vectorize. */
static inline float exp_nonpos(float x) {
    const float magic = 12582912.0f; /* 1.5·2^23: adding it rounds to an integer */
    const float lowest = -87.0f;
    int32_t ok = -(int32_t)(x >= lowest); /* all ones where x is in range */
    int32_t xi, lim, ti, ei;
    memcpy(&xi, &x, 4);
    memcpy(&lim, &lowest, 4);
    xi = (xi & ok) | (lim & ~ok);
    float xc;
    memcpy(&xc, &xi, 4);
    float t = xc * 1.44269504f + magic;
    float n = t - magic;
    float r = xc - n * 0.693145752f; /* ln2 split in two for an exact product */
    r = r - n * 1.42860677e-6f;
    float q = 1.0f + r * (1.0f + r * (0.5f + r * (1.0f / 6 + r * (1.0f / 24 + r * (1.0f / 120 +
                                                                   r * (1.0f / 720))))));
    memcpy(&ti, &t, 4);
    int32_t bits = (ti - 0x4B400000 + 127) * (1 << 23); /* n >= -126: a normal 2^n */
    float sc, e;
    memcpy(&sc, &bits, 4);
    e = q * sc;
    memcpy(&ei, &e, 4);
    ei &= ok;
    memcpy(&e, &ei, 4);
    return e;
}

/* Sums go by chunks of CHUNK floats: LANES float accumulators (vectorizable), reduced
 * into a double once per chunk (the reduction is serial, so not once per block), which
 * also keeps the float error of each partial sum small. */
#define CHUNK 256

static float lanes_sum(const float *lane) {
    float b = 0.0f;
    for (int j = 0; j < LANES; j++) b += lane[j];
    return b;
}

/* Σ exp(sanitized x - m) over one chunk. */
static float chunk_sum_exp(const float *x, float m) {
    float lane[LANES] = {0};
    for (int32_t i = 0; i < CHUNK; i += LANES)
        for (int j = 0; j < LANES; j++) lane[j] += exp_nonpos(sanitize(x[i + j]) - m);
    return lanes_sum(lane);
}

/* Σ exp(sanitized x - m) in double. */
static double sum_exp(const float *x, int32_t n, float m) {
    double sum = 0.0;
    int32_t i = 0;
    for (; i + CHUNK <= n; i += CHUNK) sum += chunk_sum_exp(x + i, m);
    for (; i < n; i++) sum += exp_nonpos(sanitize(x[i]) - m);
    return sum;
}

/* z = work·inv_t, sanitized (NaN -> -inf, +inf -> FLT_MAX); returns the maximum. */
static float scale_max(float *w, int32_t n, float inv_t) {
    float lane[LANES];
    for (int j = 0; j < LANES; j++) lane[j] = -INFINITY;
    int32_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int j = 0; j < LANES; j++) {
            float z = w[i + j] * inv_t;
            z = z > FLT_MAX ? FLT_MAX : z;
            z = z == z ? z : -INFINITY;
            w[i + j] = z;
            lane[j] = z > lane[j] ? z : lane[j];
        }
    float m = -INFINITY;
    for (int j = 0; j < LANES; j++) m = lane[j] > m ? lane[j] : m;
    for (; i < n; i++) {
        float z = sanitize(w[i] * inv_t);
        w[i] = z;
        m = z > m ? z : m;
    }
    return m;
}

/* work = exp(work - m); when every logit is -inf the distribution is uniform. */
static void exponentiate(float *w, int32_t n, float m) {
    if (m == -INFINITY) {
        for (int32_t i = 0; i < n; i++) w[i] = 1.0f;
        return;
    }
    int32_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int j = 0; j < LANES; j++) w[i + j] = exp_nonpos(w[i + j] - m);
    for (; i < n; i++) w[i] = exp_nonpos(w[i] - m);
}

/* Σ x[i] over x[i] >= thr in one chunk; *n_equal += how many equal thr. */
static float chunk_sum_from(const float *x, float thr, int32_t *n_equal) {
    float lane[LANES] = {0};
    int32_t eq[LANES] = {0};
    for (int32_t i = 0; i < CHUNK; i += LANES)
        for (int j = 0; j < LANES; j++) {
            lane[j] += x[i + j] >= thr ? x[i + j] : 0.0f;
            eq[j] += x[i + j] == thr;
        }
    for (int j = 0; j < LANES; j++) *n_equal += eq[j];
    return lanes_sum(lane);
}

/* Σ x[i] over x[i] >= thr, and how many equal thr. */
static double sum_from(const float *x, int32_t n, float thr, int32_t *n_equal) {
    double sum = 0.0;
    int32_t i = 0;
    *n_equal = 0;
    for (; i + CHUNK <= n; i += CHUNK) sum += chunk_sum_from(x + i, thr, n_equal);
    for (; i < n; i++) {
        sum += x[i] >= thr ? x[i] : 0.0f;
        *n_equal += x[i] == thr;
    }
    return sum;
}

/* Inverse-CDF walk in index order over the entries x[i] >= thr: the first i where the
 * running sum exceeds r; when rounding leaves r unreached, the last such entry with
 * x > 0; -1 when there is none. Whole chunks are skipped by their sums. */
static int32_t walk_from(const float *x, int32_t n, float thr, double r) {
    double acc = 0.0;
    int32_t i = 0, last = -1, n_eq = 0;
    for (; i < n; i += CHUNK) {
        int32_t len = n - i < CHUNK ? n - i : CHUNK;
        if (len == CHUNK) {
            float b = chunk_sum_from(x + i, thr, &n_eq);
            if (acc + b <= r) { /* not in this chunk; remember its last positive entry */
                acc += b;
                for (int32_t j = i + CHUNK - 1; b > 0.0f && j >= i; j--)
                    if (x[j] >= thr && x[j] > 0.0f) {
                        last = j;
                        break;
                    }
                continue;
            }
        }
        for (int32_t j = i; j < i + len; j++) {
            if (!(x[j] >= thr) || !(x[j] > 0.0f)) continue;
            acc += x[j];
            last = j;
            if (acc > r) return j;
        }
    }
    return last;
}

/* ---- the kept set ------------------------------------------------------------------ */

/* Token i is kept iff e_i > thr, or e_i == thr and i <= tie: a prefix of the order
 * (e descending, id ascending). thr = -1 keeps everything. */
typedef struct cutoff {
    float thr;
    int32_t tie;
} cutoff;

static int kept(cutoff c, float e, int32_t i) { return e > c.thr || (e == c.thr && i <= c.tie); }

/* The smaller of two prefixes. */
static cutoff tighter(cutoff a, cutoff b) {
    return (a.thr > b.thr || (a.thr == b.thr && a.tie < b.tie)) ? a : b;
}

/* Bucket of a probability e in [0, 1]: monotone in e (its bits), 16 per octave. (e never
 * exceeds 1 = exp(0); if rounding ever made it, bucket 0 still takes it.) */
static int32_t bucket_of(float e) {
    union {
        float f;
        uint32_t u;
    } b = {e};
    uint32_t d = (0x3f800000u - (b.u < 0x3f800000u ? b.u : 0x3f800000u)) >> (23 - 4);
    return d < AK__SAMPLER_BUCKETS - 1 ? (int32_t)d : AK__SAMPLER_BUCKETS - 1;
}

static void histogram(ak__sampler *s) {
    memset(s->bucket_count, 0, AK__SAMPLER_BUCKETS * sizeof *s->bucket_count);
    memset(s->bucket_mass, 0, AK__SAMPLER_BUCKETS * sizeof *s->bucket_mass);
    const float *e = s->work;
    for (int32_t i = 0; i < s->n_vocab; i++) {
        int32_t b = bucket_of(e[i]);
        s->bucket_count[b]++;
        s->bucket_mass[b] += e[i];
    }
}

/* Float bounds of a bucket: its members are the e with lo < e <= hi. */
static float bits_to_float(uint32_t u) {
    union {
        uint32_t u;
        float f;
    } b = {u};
    return b.f;
}

/* idx = the tokens of one bucket; returns their count. */
static int32_t gather(ak__sampler *s, int32_t bucket) {
    float hi = bucket == 0 ? INFINITY : bits_to_float(0x3f800000u - ((uint32_t)bucket << 19));
    float lo = bucket == AK__SAMPLER_BUCKETS - 1
                   ? -1.0f
                   : bits_to_float(0x3f800000u - ((uint32_t)(bucket + 1) << 19));
    const float *e = s->work;
    int32_t n = 0, i = 0, nv = s->n_vocab;
    for (; i + LANES <= nv; i += LANES) {
        int any = 0;
        for (int j = 0; j < LANES; j++) any |= (e[i + j] > lo) & (e[i + j] <= hi);
        if (!any) continue;
        for (int j = 0; j < LANES; j++)
            if (e[i + j] > lo && e[i + j] <= hi) s->idx[n++] = i + j;
    }
    for (; i < nv; i++)
        if (e[i] > lo && e[i] <= hi) s->idx[n++] = i;
    return n;
}

static int before(const float *e, int32_t a, int32_t b) {
    return e[a] > e[b] || (e[a] == e[b] && a < b);
}

static void swap_idx(int32_t *v, int32_t a, int32_t b) {
    int32_t t = v[a];
    v[a] = v[b];
    v[b] = t;
}

/* Partitions v[lo..hi) around a median-of-three pivot; returns the pivot's position and
 * the weight (count or mass) of the elements placed before it. */
static int32_t partition(const float *e, int32_t *v, int32_t lo, int32_t hi, int weighted,
                         double *w_before) {
    int32_t mid = lo + (hi - lo) / 2, last = hi - 1;
    if (before(e, v[mid], v[lo])) swap_idx(v, mid, lo);
    if (before(e, v[last], v[lo])) swap_idx(v, last, lo);
    if (before(e, v[mid], v[last])) swap_idx(v, mid, last); /* median now at last */
    int32_t pivot = v[last], store = lo;
    double w = 0.0;
    for (int32_t j = lo; j < last; j++)
        if (before(e, v[j], pivot)) {
            w += weighted ? (double)e[v[j]] : 1.0;
            swap_idx(v, store++, j);
        }
    swap_idx(v, store, last);
    *w_before = w;
    return store;
}

/* Reorders v[0..n) so that v[0..pos] is the shortest prefix of the order whose weight
 * (count, or mass when `weighted`) reaches `need`, and returns pos. When rounding leaves
 * `need` unreached, everything is kept (pos = n - 1). Expected O(n). */
static int32_t select_prefix(const float *e, int32_t *v, int32_t n, double need, int weighted) {
    int32_t lo = 0, hi = n;
    while (hi - lo > 1) {
        double wb;
        int32_t p = partition(e, v, lo, hi, weighted, &wb);
        double wp = weighted ? (double)e[v[p]] : 1.0;
        if (wb >= need) {
            hi = p;
        } else if (wb + wp >= need) {
            return p;
        } else {
            need -= wb + wp;
            lo = p + 1;
            if (lo == hi) return p;
        }
    }
    return lo;
}

static cutoff cut_at(const ak__sampler *s, int32_t token) {
    cutoff c = {s->work[token], token};
    return c;
}

static double mass_of(const float *e, const int32_t *v, int32_t n) {
    double m = 0.0;
    for (int32_t i = 0; i < n; i++) m += e[v[i]];
    return m;
}

/* Where top-k cut: the bucket holding the k-th token, and its kept members idx[0..n). */
typedef struct topk_cut {
    int32_t bucket, n;
    double mass; /* of the whole top-k set */
} topk_cut;

/* Top-k over e = work (histogram already built): the cut-off at the k-th token. */
static cutoff cut_top_k(ak__sampler *s, int32_t k, topk_cut *tk) {
    int64_t cum = 0;
    double cum_mass = 0.0;
    int32_t b = 0;
    for (; b < AK__SAMPLER_BUCKETS - 1 && cum + s->bucket_count[b] < k; b++) {
        cum += s->bucket_count[b];
        cum_mass += s->bucket_mass[b];
    }
    int32_t ng = gather(s, b);
    int32_t pos = select_prefix(s->work, s->idx, ng, (double)(k - cum), 0);
    tk->bucket = b;
    tk->n = pos + 1;
    tk->mass = cum_mass + mass_of(s->work, s->idx, tk->n);
    return cut_at(s, s->idx[pos]);
}

/* Top-p inside the top-k set (tk; bucket = AK__SAMPLER_BUCKETS when there is no top-k):
 * whole buckets before tk->bucket, then that bucket's kept members idx[0..tk->n). */
static cutoff cut_top_p(ak__sampler *s, const topk_cut *tk, cutoff c) {
    double target = (double)s->p.top_p * tk->mass, cum = 0.0;
    for (int32_t b = 0; b < tk->bucket; b++) {
        if (cum + s->bucket_mass[b] >= target) {
            int32_t ng = gather(s, b);
            int32_t pos = select_prefix(s->work, s->idx, ng, target - cum, 1);
            return cut_at(s, s->idx[pos]);
        }
        cum += s->bucket_mass[b];
    }
    if (tk->bucket < AK__SAMPLER_BUCKETS && tk->n > 0) {
        int32_t pos = select_prefix(s->work, s->idx, tk->n, target - cum, 1);
        return cut_at(s, s->idx[pos]);
    }
    return c; /* rounding: the whole set */
}

/* Top-k then top-p over e = work (max 1): the cut-off, from the histogram. */
static cutoff topk_topp(ak__sampler *s) {
    cutoff c = {-1.0f, INT32_MAX};
    int32_t k = s->p.top_k;
    int use_k = k > 0 && k < s->n_vocab, use_p = s->p.top_p < 1.0f;
    if (!use_k && !use_p) return c;
    histogram(s);
    topk_cut tk = {AK__SAMPLER_BUCKETS, 0, 0.0};
    if (use_k) {
        c = cut_top_k(s, k, &tk);
    } else {
        for (int32_t b = 0; b < AK__SAMPLER_BUCKETS; b++) tk.mass += s->bucket_mass[b];
    }
    return use_p ? cut_top_p(s, &tk, c) : c;
}

/* The kept mass. When at most the cut-off token itself sits exactly at the threshold
 * (nearly always), "kept" is simply e >= thr and the cut-off is rewritten so (tie =
 * INT32_MAX), which lets the later passes use the vector loops. */
static double kept_mass(const ak__sampler *s, cutoff *c) {
    int32_t n_eq;
    double sum = sum_from(s->work, s->n_vocab, c->thr, &n_eq);
    if (c->tie == INT32_MAX || n_eq <= 1) {
        c->tie = INT32_MAX;
        return sum;
    }
    sum = 0.0;
    for (int32_t i = 0; i < s->n_vocab; i++)
        if (kept(*c, s->work[i], i)) sum += s->work[i];
    return sum;
}

/* Everything up to the kept set: work = e (max 1), the cut-off and the kept mass. */
static cutoff prepare(ak__sampler *s, const float *logits, float *max_z, double *mass) {
    load_logits(s, logits);
    float m = scale_max(s->work, s->n_vocab, 1.0f / s->p.temperature);
    exponentiate(s->work, s->n_vocab, m);
    cutoff c = topk_topp(s);
    if (s->p.min_p > 0.0f) {
        cutoff cm = {s->p.min_p, INT32_MAX};
        c = tighter(c, cm);
    }
    *max_z = m;
    *mass = kept_mass(s, &c);
    return c;
}

void ak__sampler_dist(ak__sampler *s, const float *logits, float *probs) {
    int32_t n = s->n_vocab;
    if (s->p.temperature == 0.0f) {
        load_logits(s, logits);
        memset(probs, 0, (size_t)n * sizeof *probs);
        probs[ak__argmax_f32(s->work, n)] = 1.0f;
        return;
    }
    float m;
    double mass;
    cutoff c = prepare(s, logits, &m, &mass);
    float inv = (float)(1.0 / mass);
    const float *e = s->work;
    if (c.tie == INT32_MAX) {
        for (int32_t i = 0; i < n; i++) probs[i] = e[i] >= c.thr ? e[i] * inv : 0.0f;
    } else {
        for (int32_t i = 0; i < n; i++) probs[i] = kept(c, e[i], i) ? e[i] * inv : 0.0f;
    }
}

int32_t ak__sampler_draw(ak__sampler *s, const float *probs) {
    int32_t t = walk_from(probs, s->n_vocab, 0x1p-149f, ak__sampler_uniform(s));
    return t < 0 ? 0 : t;
}

/* ---- sample ------------------------------------------------------------------------ */

/* Inserts token i of value v into out[0..*cnt) (at most n, descending, ids ascending on
 * ties since tokens come in id order). */
static void insert_top(const float *val, int32_t i, int32_t n, int32_t *out, int32_t *cnt) {
    float v = val[i];
    if (*cnt == n && !(v > val[out[n - 1]])) return;
    int32_t j = *cnt < n ? (*cnt)++ : n - 1;
    while (j > 0 && v > val[out[j - 1]]) {
        out[j] = out[j - 1];
        j--;
    }
    out[j] = i;
}

/* The n most likely tokens of `val` among the kept ones (c) with val > floor; returns
 * their count. Blocks whose maximum cannot enter the list are skipped. */
static int32_t top_n(const float *val, int32_t n_vocab, cutoff c, float floor, int32_t n,
                     int32_t *out) {
    int32_t cnt = 0, i = 0;
    for (; i + LANES <= n_vocab; i += LANES) {
        float bar = cnt == n ? val[out[n - 1]] : floor;
        int any = 0;
        for (int j = 0; j < LANES; j++) any |= val[i + j] > bar;
        if (!any) continue;
        for (int j = 0; j < LANES; j++)
            if (val[i + j] > floor && kept(c, val[i + j], i + j))
                insert_top(val, i + j, n, out, &cnt);
    }
    for (; i < n_vocab; i++)
        if (val[i] > floor && kept(c, val[i], i)) insert_top(val, i, n, out, &cnt);
    return cnt;
}

/* The scaled, penalized logit of one token: z_t as in work before exponentiation. */
static float score(const ak__sampler *s, const float *logits, int32_t t, float inv_t) {
    float x = sanitize(logits[t]);
    for (int32_t j = 0; j < s->n_bias; j++)
        if (s->bias_ids[j] == t) x = sanitize(x + s->bias[j]);
    if (penalties_on(s)) x = penalize(s, x, s->hist[t]);
    return sanitize(x * inv_t);
}

/* log p(t) of a kept token, from its logit rather than from e_t, so that it keeps full
 * precision even where e_t is tiny. m = -inf: every logit was -inf, uniform. */
static float log_prob(const ak__sampler *s, const float *logits, int32_t t, float m,
                      double mass) {
    if (m == -INFINITY) return (float)-log(mass);
    float z = score(s, logits, t, 1.0f / s->p.temperature);
    return (float)((double)z - (double)m - log(mass));
}

/* Greedy log-probabilities: log-softmax of the penalized logits (work) at temperature 1. */
static void greedy_logprobs(ak__sampler *s, int32_t tok, float *logprob, ak_llm_logprob *top,
                            int32_t *n_top) {
    const float *z = s->work;
    float m = sanitize(z[tok]);
    double lse = m == -INFINITY ? 0.0 : (double)m + log(sum_exp(z, s->n_vocab, m));
    if (logprob) *logprob = (float)((double)sanitize(z[tok]) - lse);
    if (!top || !n_top) return;
    int32_t ids[20];
    cutoff all = {-INFINITY, INT32_MAX};
    int32_t cnt = top_n(z, s->n_vocab, all, -INFINITY, s->p.n_logprobs, ids);
    for (int32_t j = 0; j < cnt; j++) {
        top[j].token = ids[j];
        top[j].logprob = (float)((double)sanitize(z[ids[j]]) - lse);
    }
    *n_top = cnt;
}

static int32_t sample_greedy(ak__sampler *s, const float *logits, float *logprob,
                             ak_llm_logprob *top, int32_t *n_top) {
    int want_top = top && n_top && s->p.n_logprobs > 0;
    if (!logprob && !want_top && !penalties_on(s) && !s->n_bias)
        return ak__argmax_f32(logits, s->n_vocab);
    load_logits(s, logits);
    int32_t tok = ak__argmax_f32(s->work, s->n_vocab);
    if (logprob || want_top) greedy_logprobs(s, tok, logprob, want_top ? top : NULL, n_top);
    return tok;
}

/* One draw from the kept set of e = work. */
static int32_t draw_kept(ak__sampler *s, cutoff c, double mass) {
    const float *e = s->work;
    double r = ak__sampler_uniform(s) * mass;
    if (c.tie == INT32_MAX) {
        int32_t t = walk_from(e, s->n_vocab, c.thr, r);
        return t < 0 ? ak__argmax_f32(e, s->n_vocab) : t;
    }
    double acc = 0.0;
    int32_t tok = -1;
    for (int32_t i = 0; i < s->n_vocab; i++) {
        if (!kept(c, e[i], i) || e[i] <= 0.0f) continue;
        acc += e[i];
        tok = i;
        if (acc > r) break;
    }
    return tok < 0 ? ak__argmax_f32(e, s->n_vocab) : tok; /* no mass at all: impossible, max e = 1 */
}

int32_t ak__sampler_sample(ak__sampler *s, const float *logits, float *logprob,
                           ak_llm_logprob *top, int32_t *n_top) {
    if (n_top) *n_top = 0;
    if (s->p.temperature == 0.0f) return sample_greedy(s, logits, logprob, top, n_top);
    float m;
    double mass;
    cutoff c = prepare(s, logits, &m, &mass);
    int32_t tok = draw_kept(s, c, mass);
    if (logprob) *logprob = log_prob(s, logits, tok, m, mass);
    if (top && n_top && s->p.n_logprobs > 0) {
        int32_t ids[20];
        int32_t cnt = top_n(s->work, s->n_vocab, c, 0.0f, s->p.n_logprobs, ids);
        for (int32_t j = 0; j < cnt; j++) {
            top[j].token = ids[j];
            top[j].logprob = log_prob(s, logits, ids[j], m, mass);
        }
        *n_top = cnt;
    }
    return tok;
}
