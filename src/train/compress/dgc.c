/* Deep gradient compression (Lin, Han, Mao, Wang, Dally: "Deep Gradient Compression:
 * Reducing the Communication Bandwidth for Distributed Training", ICLR 2018) of one f32
 * tensor: local gradient clipping, momentum correction, a top-k threshold estimated on a
 * random sample, error feedback through the residual, momentum factor masking and the
 * exponential warm-up of the sparsity. One state per tensor, used by one thread at a
 * time. Steps and parameters: docs/compression.md.
 *
 * One compress call makes two passes over the tensor: (1) clip factor applied, momentum
 * and residual updated block by block, and the sample taken from each block while it is
 * still in cache; (2) the residual scanned against the threshold, writing the selected
 * (index, value) pairs in ascending index order. Only when the sample underestimated
 * the threshold so badly that more than the capacity qualified does a refinement run
 * (up to three histogram passes and a second scan).
 *
 * Magnitudes are compared as sign-cleared f32 bit patterns: for non-negative floats the
 * integer order is the value order, and a NaN sorts above +Inf, so a NaN residual is
 * sent (and shows up in the result, as it would uncompressed) instead of hiding in the
 * residual forever. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "core/check.h"
#include "train/compress/compress.h"

/* Fewest values sampled, and how many sampled values should lie above the threshold:
 * with about 32 hits the share selected varies by about 1/sqrt(32) ≈ 18 %. */
#define AK__DGC_MIN_SAMPLE 1024
#define AK__DGC_SAMPLE_HITS 32
/* Elements per block of the accumulation pass: g, u and v of a block (3 × 8 KiB) are
 * still in L1 when the block's samples are taken. */
#define AK__DGC_BLOCK 2048

struct ak_dgc_state {
    ak_dgc_config cfg;
    size_t n;
    int64_t step;
    size_t capacity;   /* most values one call selects */
    size_t sample_cap; /* most values one call samples */
    float *u;          /* (n) momentum; NULL without momentum correction */
    float *v;          /* (n) residual: accumulated, not yet sent */
    float *sample;     /* (sample_cap) scratch */
    uint64_t rng;      /* same seed on every rank: samples are reproducible */
};

/* ---- small helpers ------------------------------------------------------------------ */

static inline uint32_t abs_bits(float f) {
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    return b & 0x7fffffffu;
}

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double clamp01(double x) { return x > 0.0 ? (x < 1.0 ? x : 1.0) : 0.0; }

/* Share of the values sent at a step. */
static double density_at(const ak_dgc_config *cfg, int64_t step) {
    return clamp01(1.0 - (double)ak__dgc_sparsity_at(cfg, step));
}

/* Target number of values for a density: rounded to nearest (0.95f is 0.9499999881, and
 * rounding up would turn 50 of 1000 into 51), at least 1. */
static size_t target_k(size_t n, double density) {
    size_t k = (size_t)((double)n * density + 0.5);
    return k < 1 ? 1 : (k > n ? n : k);
}

/* Values to sample at a density: the configured share, enough for
 * AK__DGC_SAMPLE_HITS sampled values above the threshold, at least AK__DGC_MIN_SAMPLE;
 * the whole tensor when that is not smaller. */
static size_t sample_size(const ak_dgc_config *cfg, size_t n, double density) {
    if (!(density > 0.0)) return n;
    double m = ceil((double)cfg->sample_ratio * (double)n);
    if (m < AK__DGC_MIN_SAMPLE) m = AK__DGC_MIN_SAMPLE;
    if (m * density < AK__DGC_SAMPLE_HITS) m = ceil(AK__DGC_SAMPLE_HITS / density);
    return m < (double)n ? (size_t)m : n;
}

/* The schedule is monotone between its two ends, so they bound every step. */
static double extreme_density(const ak_dgc_config *cfg, int largest) {
    double a = density_at(cfg, 0), b = density_at(cfg, INT64_MAX);
    return (largest ? a > b : a < b) ? a : b;
}

/* ---- configuration and state -------------------------------------------------------- */

static ak_status check_config(const ak_dgc_config *cfg) {
    static const char fn[] = "ak__dgc_create";
    AK_ARG_CHECK(cfg, "%s: config is NULL", fn);
    AK_ARG_CHECK(cfg->struct_size == sizeof(ak_dgc_config),
                 "%s: ak_dgc_config.struct_size is %u, expected %zu (initialize with "
                 "AK_DGC_CONFIG_INIT)", fn, cfg->struct_size, sizeof(ak_dgc_config));
    AK_ARG_CHECK(cfg->sparsity >= 0.0f && cfg->sparsity <= 1.0f,
                 "%s: sparsity %g must be in [0, 1]", fn, (double)cfg->sparsity);
    AK_ARG_CHECK(cfg->warmup_start_sparsity >= 0.0f && cfg->warmup_start_sparsity <= 1.0f,
                 "%s: warmup_start_sparsity %g must be in [0, 1]", fn,
                 (double)cfg->warmup_start_sparsity);
    AK_ARG_CHECK(cfg->warmup_steps >= 0, "%s: warmup_steps %d must be >= 0", fn,
                 cfg->warmup_steps);
    AK_ARG_CHECK(cfg->momentum >= 0.0f && cfg->momentum < 1.0f,
                 "%s: momentum %g must be in [0, 1)", fn, (double)cfg->momentum);
    AK_ARG_CHECK(cfg->clip_norm >= 0.0f && isfinite(cfg->clip_norm),
                 "%s: clip_norm %g must be finite and >= 0 (0: off)", fn,
                 (double)cfg->clip_norm);
    AK_ARG_CHECK(cfg->sample_ratio > 0.0f && cfg->sample_ratio <= 1.0f,
                 "%s: sample_ratio %g must be in (0, 1]", fn, (double)cfg->sample_ratio);
    return AK_OK;
}

/* An n-float array of zeros. */
static ak_status alloc_zeros(size_t n, float **out) {
    void *p;
    AK_CHECK(ak_alloc(n * sizeof(float), &p));
    memset(p, 0, n * sizeof(float));
    *out = p;
    return AK_OK;
}

ak_status ak__dgc_create(const ak_dgc_config *cfg, size_t n, ak_dgc_state **out) {
    AK_ARG_CHECK(out, "ak__dgc_create: out is NULL");
    *out = NULL;
    AK_CHECK(check_config(cfg));
    AK_ARG_CHECK(n <= UINT32_MAX, "ak__dgc_create: %zu values do not fit 32-bit indices", n);
    void *p;
    AK_CHECK(ak_alloc(sizeof(ak_dgc_state), &p));
    ak_dgc_state *st = memset(p, 0, sizeof(ak_dgc_state));
    st->cfg = *cfg;
    st->n = n;
    st->rng = 0x6a09e667f3bcc909ull ^ (uint64_t)n;
    if (n > 0) {
        st->capacity = target_k(n, extreme_density(cfg, 1)) * 2;
        if (st->capacity > n) st->capacity = n;
        st->sample_cap = sample_size(cfg, n, extreme_density(cfg, 0));
    }
    ak_status s;
    AK_CHECK_GOTO(s, alloc_zeros(n, &st->v));
    AK_CHECK_GOTO(s, alloc_zeros(st->sample_cap, &st->sample));
    if (cfg->momentum > 0.0f) AK_CHECK_GOTO(s, alloc_zeros(n, &st->u));
    *out = st;
    return AK_OK;
fail:
    ak__dgc_free(st);
    return s;
}

void ak__dgc_free(ak_dgc_state *state) {
    if (!state) return;
    ak_free(state->u);
    ak_free(state->v);
    ak_free(state->sample);
    ak_free(state);
}

size_t ak__dgc_capacity(const ak_dgc_state *state) { return state ? state->capacity : 0; }

/* Density falls exponentially from 1 - warmup_start_sparsity to 1 - sparsity: with 0.75
 * and 0.999 over 4 steps it gives 75 %, 93.7 %, 98.4 %, 99.6 %, then 99.9 % (the paper's
 * schedule, which divides the density by 4 per epoch). */
float ak__dgc_sparsity_at(const ak_dgc_config *cfg, int64_t step) {
    if (!cfg) return 0.0f;
    double final = clamp01(cfg->sparsity);
    if (cfg->warmup_steps <= 0 || step >= cfg->warmup_steps) return (float)final;
    /* a density of 0 (sparsity 1) has no logarithm: interpolate towards a tiny one */
    double d0 = fmax(1.0 - clamp01(cfg->warmup_start_sparsity), 1e-12);
    double d1 = fmax(1.0 - final, 1e-12);
    double t = step > 0 ? (double)step / cfg->warmup_steps : 0.0;
    return (float)clamp01(1.0 - d0 * pow(d1 / d0, t));
}

/* ---- pass 1: clipping, momentum correction, accumulation, sampling ------------------- */

/* The factor that brings ||g||2 down to clip_norm (1 when off, already below, or when
 * the norm is not finite: NaN / Inf then reach the result unchanged). */
static float clip_factor(const ak_dgc_state *st, const float *g) {
    double clip = st->cfg.clip_norm;
    if (!(clip > 0.0)) return 1.0f;
    double s[4] = {0, 0, 0, 0}; /* independent sums: no serial dependency on one adder */
    size_t i = 0;
    for (; i + 4 <= st->n; i += 4)
        for (int j = 0; j < 4; j++) s[j] += (double)g[i + j] * g[i + j];
    for (; i < st->n; i++) s[0] += (double)g[i] * g[i];
    double norm = sqrt(s[0] + s[1] + s[2] + s[3]);
    return isfinite(norm) && norm > clip ? (float)(clip / norm) : 1.0f;
}

/* u = m·u + c·g; v += u (Nesterov: v += c·g + m·u); without momentum v += c·g. */
static void accumulate(const ak_dgc_config *cfg, float *restrict u, float *restrict v,
                       const float *restrict g, float c, size_t len) {
    const float m = cfg->momentum;
    if (!u) {
        for (size_t i = 0; i < len; i++) v[i] += c * g[i];
    } else if (cfg->nesterov) {
        for (size_t i = 0; i < len; i++) {
            float gi = c * g[i], ui = m * u[i] + gi;
            u[i] = ui;
            v[i] += gi + m * ui;
        }
    } else {
        for (size_t i = 0; i < len; i++) {
            float ui = m * u[i] + c * g[i];
            u[i] = ui;
            v[i] += ui;
        }
    }
}

/* Stratified sampling: m strata of nearly equal length tile [0, n), one uniformly random
 * position in each. Positions only increase, so the pass can take them block by block. */
typedef struct ak__sampler {
    size_t m, j;          /* strata, current stratum */
    size_t base, rem;     /* stratum length: base, plus 1 for the first rem strata */
    size_t start, len;    /* current stratum */
    size_t pos;           /* its sampled position */
    uint64_t *rng;
} ak__sampler;

static void sampler_pick(ak__sampler *sp) {
    sp->len = sp->base + (sp->j < sp->rem);
    uint64_t r = splitmix64(sp->rng) >> 32;
    sp->pos = sp->start + (size_t)((r * sp->len) >> 32);
}

static void sampler_init(ak__sampler *sp, size_t n, size_t m, uint64_t *rng) {
    *sp = (ak__sampler){.m = m, .base = n / m, .rem = n % m, .rng = rng};
    sampler_pick(sp);
}

/* Takes the samples whose positions lie below `end` (their block is final). */
static void sampler_take(ak__sampler *sp, const float *v, size_t end, float *sample) {
    while (sp->j < sp->m && sp->pos < end) {
        sample[sp->j++] = v[sp->pos];
        sp->start += sp->len;
        if (sp->j < sp->m) sampler_pick(sp);
    }
}

/* ---- threshold and selection -------------------------------------------------------- */

/* A threshold on |x| bit patterns: `at_least` values have bits >= t, `above` of them
 * bits > t (when the threshold is a single bit pattern; else above = at_least). */
typedef struct ak__cut {
    uint32_t t;
    size_t above, at_least;
} ak__cut;

/* Radix selection of the k-th largest |x| among the values with bits >= lo: one
 * histogram pass per digit (11, 10, 10 bits of the 31), each narrowing to the bucket
 * that holds the k-th value. Stops as soon as keeping everything from the bucket's lower
 * edge up keeps at most k_hi values (k_hi = k: the exact k-th value). If fewer than k
 * values are >= lo, t = lo keeps them all. O(n) per pass whatever the data (ties
 * included), no scratch memory. */
static ak__cut radix_cut(const float *x, size_t n, uint32_t lo, size_t k, size_t k_hi) {
    static const int shift[3] = {20, 10, 0}, width[3] = {11, 10, 10};
    uint32_t hist[1u << 11];
    uint32_t prefix = 0;
    size_t above = 0; /* values >= lo in buckets above the current prefix */
    for (int lv = 0; lv < 3; lv++) {
        const int sh = shift[lv], psh = sh + width[lv];
        const uint32_t nb = 1u << width[lv];
        memset(hist, 0, nb * sizeof hist[0]);
        for (size_t i = 0; i < n; i++) {
            uint32_t b = abs_bits(x[i]);
            if (b >= lo && (b >> psh) == prefix) hist[(b >> sh) & (nb - 1)]++;
        }
        size_t acc = above;
        uint32_t h = nb - 1;
        while (acc + hist[h] < k) {
            acc += hist[h];
            if (h == 0) return (ak__cut){lo, acc, acc}; /* fewer than k in all */
            h--;
        }
        prefix = (prefix << width[lv]) | h;
        uint32_t t = prefix << sh;
        ak__cut cut = {t > lo ? t : lo, acc, acc + hist[h]};
        if (cut.at_least <= k_hi || sh == 0) return cut;
        above = acc;
    }
    return (ak__cut){lo, 0, 0}; /* not reached: the last digit always returns */
}

/* Writes the values with bits > t, and the first `ties` with bits == t, as (index,
 * value) in ascending index order, at most cap of them. Returns how many qualified,
 * which exceeds cap when the threshold was too low. */
static size_t gather(const float *v, size_t n, uint32_t t, size_t ties, uint32_t *idx,
                     float *val, size_t cap) {
    size_t cnt = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t b = abs_bits(v[i]);
        if (AK_LIKELY(b < t)) continue;
        if (b == t) {
            if (ties == 0) continue;
            ties--;
        }
        if (cnt < cap) {
            idx[cnt] = (uint32_t)i;
            val[cnt] = v[i];
        }
        cnt++;
    }
    return cnt;
}

/* Selects about k values of the residual (never more than the capacity): everything at
 * or above the sampled threshold; if more than the capacity pass it, the exact top k
 * among them. */
static size_t select_top(ak_dgc_state *st, size_t k, size_t m, uint32_t *idx, float *val) {
    const size_t n = st->n, cap = st->capacity;
    size_t ks = m == n ? k : target_k(m, (double)k / (double)n);
    uint32_t lo = radix_cut(st->sample, m, 0, ks, ks).t;
    if (lo == 0) lo = 1; /* zeros carry nothing: never worth a slot */
    size_t cnt = gather(st->v, n, lo, SIZE_MAX, idx, val, cap);
    if (cnt > cap) {
        ak__cut c = radix_cut(st->v, n, lo, k, cap);
        size_t ties = c.at_least <= cap ? SIZE_MAX : k - c.above;
        cnt = gather(st->v, n, c.t, ties, idx, val, cap);
    }
    if (cnt == 0) { /* an all-zero residual still sends one value */
        idx[0] = 0;
        val[0] = st->v[0];
        cnt = 1;
    }
    return cnt;
}

/* ---- compress and decompress -------------------------------------------------------- */

ak_status ak__dgc_compress(ak_dgc_state *st, const float *grad, uint32_t *idx, float *val,
                           size_t *k) {
    static const char fn[] = "ak__dgc_compress";
    AK_ARG_CHECK(st && k, "%s: state or k is NULL", fn);
    AK_ARG_CHECK(st->n == 0 || (grad && idx && val), "%s: NULL grad, idx or val for a "
                 "tensor of %zu values", fn, st->n);
    const size_t n = st->n;
    *k = 0;
    if (n == 0) {
        st->step++;
        return AK_OK;
    }
    double density = density_at(&st->cfg, st->step);
    size_t kt = target_k(n, density);
    if (kt > st->capacity) kt = st->capacity; /* rounding of the schedule in between */
    size_t m = sample_size(&st->cfg, n, density);
    if (m > st->sample_cap) m = st->sample_cap;

    float c = clip_factor(st, grad);
    ak__sampler sp;
    sampler_init(&sp, n, m, &st->rng);
    for (size_t off = 0; off < n; off += AK__DGC_BLOCK) {
        size_t len = n - off < AK__DGC_BLOCK ? n - off : AK__DGC_BLOCK;
        accumulate(&st->cfg, st->u ? st->u + off : NULL, st->v + off, grad + off, c, len);
        sampler_take(&sp, st->v, off + len, st->sample);
    }

    size_t cnt = select_top(st, kt, m, idx, val);
    /* error feedback: what is sent leaves the residual; momentum factor masking stops
     * the momentum from pushing the same coordinates again */
    for (size_t i = 0; i < cnt; i++) {
        st->v[idx[i]] = 0.0f;
        if (st->u) st->u[idx[i]] = 0.0f;
    }
    st->step++;
    *k = cnt;
    return AK_OK;
}

ak_status ak__dgc_scatter_add(const uint32_t *idx, const float *val, size_t k, float *dense,
                              size_t n) {
    static const char fn[] = "ak__dgc_scatter_add";
    AK_ARG_CHECK(k == 0 || (idx && val && dense), "%s: NULL idx, val or dense with k = %zu",
                 fn, k);
    /* every index is checked before the first add, so a bad list leaves dense as it was */
    for (size_t i = 0; i < k; i++)
        AK_ARG_CHECK(idx[i] < n, "%s: idx[%zu] = %u is out of range for %zu values", fn, i,
                     (unsigned)idx[i], n);
    for (size_t i = 0; i < k; i++) dense[idx[i]] += val[i];
    return AK_OK;
}
