/* Speculative decoding: rejection-sampling verification and prompt-lookup drafts
 * (see spec.h). */
#include "llm/engine/spec.h"

#include <string.h>

#define LANES 16
#define CHUNK 256

/* Σ max(0, p - q) over one chunk, in LANES float lanes so that it vectorizes. */
static float chunk_residual(const float *p, const float *q) {
    float lane[LANES] = {0};
    for (int32_t i = 0; i < CHUNK; i += LANES)
        for (int j = 0; j < LANES; j++) {
            float d = p[i + j] - q[i + j];
            lane[j] += d > 0.0f ? d : 0.0f;
        }
    float sum = 0.0f;
    for (int j = 0; j < LANES; j++) sum += lane[j];
    return sum;
}

/* Element-wise walk of max(0, p - q) over [i0, i1): returns the index where the running
 * sum *acc exceeds r, or -1 (then *last = the last index with mass, if any). */
static int32_t walk_residual(const float *p, const float *q, int32_t i0, int32_t i1, double r,
                             double *acc, int32_t *last) {
    for (int32_t i = i0; i < i1; i++) {
        float d = p[i] - q[i];
        if (!(d > 0.0f)) continue;
        *acc += d;
        *last = i;
        if (*acc > r) return i;
    }
    return -1;
}

/* A draw from norm(max(0, p - q)) over n entries: one pass for the total, then a walk
 * that skips whole chunks by their sums. From p itself when the residual has no mass
 * (p <= q everywhere only happens by rounding: rejection then has probability ~0). */
static int32_t draw_residual(ak__sampler *s, const float *p, const float *q) {
    int32_t n = s->n_vocab, i = 0, last = -1;
    double total = 0.0, acc = 0.0;
    for (; i + CHUNK <= n; i += CHUNK) total += chunk_residual(p + i, q + i);
    for (; i < n; i++) total += p[i] > q[i] ? (double)p[i] - q[i] : 0.0;
    if (!(total > 0.0)) return ak__sampler_draw(s, p);
    double r = ak__sampler_uniform(s) * total;
    for (i = 0; i < n; i += CHUNK) {
        int32_t end = n - i < CHUNK ? n : i + CHUNK;
        if (end - i == CHUNK) {
            float b = chunk_residual(p + i, q + i);
            if (acc + b <= r && b > 0.0f) { /* not in this chunk */
                acc += b;
                for (int32_t j = end - 1; j >= i; j--)
                    if (p[j] > q[j]) {
                        last = j;
                        break;
                    }
                continue;
            }
        }
        int32_t t = walk_residual(p, q, i, end, r, &acc, &last);
        if (t >= 0) return t;
    }
    return last >= 0 ? last : ak__sampler_draw(s, p);
}

/* A draw from p with token x removed, by a scalar walk. */
static int32_t walk_without(ak__sampler *s, const float *p, int32_t x) {
    double total = 0.0, acc = 0.0;
    int32_t n = s->n_vocab, last = -1;
    for (int32_t i = 0; i < n; i++)
        if (i != x && p[i] > 0.0f) total += p[i];
    if (!(total > 0.0)) return ak__sampler_draw(s, p);
    double r = ak__sampler_uniform(s) * total;
    for (int32_t i = 0; i < n; i++) {
        if (i == x || !(p[i] > 0.0f)) continue;
        acc += p[i];
        last = i;
        if (acc > r) return i;
    }
    return last;
}

/* A draw from p with token x removed and renormalized (the residual of a one-hot draft):
 * draws from p until one is not x, which is exact and costs one (fast) draw on average
 * per verification, since this runs only after a rejection, i.e. with probability
 * 1 - p(x), and takes 1 / (1 - p(x)) draws. A few misses fall back to the exact walk. */
static int32_t draw_without(ak__sampler *s, const float *p, int32_t x) {
    for (int k = 0; k < 16; k++) {
        int32_t t = ak__sampler_draw(s, p);
        if (t != x) return t;
    }
    return walk_without(s, p, x);
}

int32_t ak__spec_verify(ak__sampler *s, const float *p_target, const float *q_draft,
                        int32_t draft_token, int *accepted) {
    int32_t n = s->n_vocab;
    if (s->p.temperature == 0.0f) {
        int32_t best = ak__argmax_f32(p_target, n);
        *accepted = best == draft_token;
        return best;
    }
    if (draft_token < 0 || draft_token >= n) { /* not a token: reject, emit a draw from p */
        *accepted = 0;
        return ak__sampler_draw(s, p_target);
    }
    double px = p_target[draft_token], qx = q_draft ? q_draft[draft_token] : 1.0;
    /* accept with probability min(1, p/q): u·q < p (q = 0 means the draft could not have
     * proposed x; then accept iff p > 0) */
    double u = ak__sampler_uniform(s);
    if (px > 0.0 && u * qx < px) {
        *accepted = 1;
        return draft_token;
    }
    *accepted = 0;
    return q_draft ? draw_residual(s, p_target, q_draft) : draw_without(s, p_target, draft_token);
}

int32_t ak__spec_bonus(ak__sampler *s, const float *p_target) {
    if (s->p.temperature == 0.0f) return ak__argmax_f32(p_target, s->n_vocab);
    return ak__sampler_draw(s, p_target);
}

size_t ak__ngram_propose(const int32_t *history, size_t n, int32_t ngram, int32_t gamma,
                         int32_t *out) {
    if (!history || !out || ngram <= 0 || gamma <= 0 || n <= (size_t)ngram) return 0;
    size_t g = (size_t)ngram;
    const int32_t *tail = history + n - g;
    /* most recent first: the occurrence at j is followed by history[j + g] (j + g < n) */
    for (size_t j = n - g; j-- > 0;) {
        if (memcmp(history + j, tail, g * sizeof *tail) != 0) continue;
        size_t k = n - (j + g);
        if (k > (size_t)gamma) k = (size_t)gamma;
        memcpy(out, history + j + g, k * sizeof *out);
        return k;
    }
    return 0;
}
