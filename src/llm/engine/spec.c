/* Speculative decoding: rejection-sampling verification and prompt-lookup drafts
 * (see spec.h). */
#include "llm/engine/spec.h"

#include <string.h>

static int32_t argmax_p(const float *p, int32_t n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (p[i] > p[best]) best = i;
    return best;
}

/* max(0, p - q) at i; q = NULL is the one-hot at x. */
static double residual(const float *p, const float *q, int32_t x, int32_t i) {
    double d = (double)p[i] - (q ? (double)q[i] : (i == x ? 1.0 : 0.0));
    return d > 0.0 ? d : 0.0;
}

/* A draw from norm(max(0, p - q)); from p itself when that has no mass (p <= q
 * everywhere only happens by rounding, since rejection then has probability ~0). */
static int32_t draw_residual(ak__sampler *s, const float *p, const float *q, int32_t x) {
    int32_t n = s->n_vocab;
    double total = 0.0;
    for (int32_t i = 0; i < n; i++) total += residual(p, q, x, i);
    if (!(total > 0.0)) return ak__sampler_draw(s, p);
    double r = ak__sampler_uniform(s) * total, acc = 0.0;
    int32_t last = 0;
    for (int32_t i = 0; i < n; i++) {
        double d = residual(p, q, x, i);
        if (d <= 0.0) continue;
        acc += d;
        last = i;
        if (acc > r) return i;
    }
    return last;
}

int32_t ak__spec_verify(ak__sampler *s, const float *p_target, const float *q_draft,
                        int32_t draft_token, int *accepted) {
    int32_t n = s->n_vocab;
    if (s->p.temperature == 0.0f) {
        int32_t best = argmax_p(p_target, n);
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
    return draw_residual(s, p_target, q_draft, draft_token);
}

int32_t ak__spec_bonus(ak__sampler *s, const float *p_target) {
    if (s->p.temperature == 0.0f) return argmax_p(p_target, s->n_vocab);
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
