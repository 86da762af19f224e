/* Speculative decoding inside the engine step. For each decoding sequence a draft of
 * up to γ tokens is proposed — by the draft model (γ small batched steps over its own
 * KV cache, which uses the same block ids as the target's) or by n-gram prompt lookup —
 * and the target verifies all of them in the same ragged forward pass as everything
 * else: the pending token and the drafts each get a logits row. Verification is
 * standard speculative sampling (the target's distribution is preserved; with greedy
 * decoding the output is token-identical to decoding without a draft). */
#include <math.h>
#include <string.h>

#include "core/check.h"
#include "llm/engine/engine_internal.h"
#include "llm/engine/spec.h"

static int is_greedy(const ak__seq *s) { return s->req->r.sampling.temperature == 0.0f; }

static float *draft_q(ak_llm_engine *e, const ak__seq *s, int32_t r) {
    size_t vocab = (size_t)e->model->hp.n_vocab;
    return e->draft_probs + ((size_t)s->spec_slot * (size_t)e->o.spec_gamma + (size_t)r) * vocab;
}

/* The draft token r + 1 from the draft model's logits `row` (its q kept for verification). */
static void propose_from(ak_llm_engine *e, ak__seq *s, int32_t r, const float *row) {
    int32_t token;
    if (is_greedy(s)) {
        token = ak__sampler_sample(&s->sampler, row, NULL, NULL, NULL);
    } else {
        float *q = draft_q(e, s, r);
        ak__sampler_dist(&s->sampler, row, q);
        token = ak__sampler_draw(&s->sampler, q);
    }
    s->tokens[s->n_tokens + r] = token;
}

/* Draft round r: round 0 catches the draft cache up to the pending token, round r > 0
 * feeds draft token r. Returns the number of sequences that got a proposal. */
static ak_status draft_round(ak_llm_engine *e, ak__seq **cand, int32_t n_cand, int32_t r) {
    int32_t t = 0, n_seqs = 0, n_out = 0, budget = e->o.max_batch_tokens;
    for (int32_t i = 0; i < n_cand; ++i) {
        ak__seq *s = cand[i];
        if (s->n_draft <= r) continue;
        int32_t from = r == 0 ? s->draft_cached : s->n_tokens - 1 + r;
        int32_t to = s->n_tokens + r, len = to - from;
        if (len > budget) len = budget;
        if (len <= 0) { s->n_draft = 0; continue; }
        t = ak__engine_batch_add(e, s, from, len, n_seqs++, t);
        budget -= len;
        s->draft_cached = from + len;
        if (from + len < to) s->n_draft = 0; /* still catching up: no draft this step */
        else e->b_out[n_out++] = t - 1;
    }
    if (t == 0) return AK_OK;
    ak__batch b = {t, e->b_tokens, e->b_pos, e->b_seq, n_seqs, e->b_tables, e->b_len, n_out, e->b_out};
    AK_CHECK(ak__forward(e->draft, e->draft_ws, e->draft_kv, &b, e->draft_logits, e->pool));
    size_t vocab = (size_t)e->model->hp.n_vocab;
    for (int32_t i = 0, row = 0; i < n_seqs; ++i) {
        ak__seq *s = e->b_seqs[i];
        if (s->n_draft > r) propose_from(e, s, r, e->draft_logits + (size_t)row++ * vocab);
    }
    return AK_OK;
}

static int32_t draft_budget(const ak_llm_engine *e, const ak__seq *s, int32_t tokens_left) {
    int32_t g = e->o.spec_gamma;
    int32_t room = s->req->r.max_tokens - s->n_generated - 1;
    int32_t ctx = e->o.max_context - s->n_tokens - 1;
    g = g < room ? g : room;
    g = g < ctx ? g : ctx;
    return g < tokens_left ? g : tokens_left;
}

ak_status ak__engine_spec_propose(ak_llm_engine *e) {
    ak__seq *cand[4096];
    int32_t n_cand = 0, used = 0;
    for (int32_t i = 0; i < e->n_running; ++i) used += e->running[i]->chunk;
    int32_t left = e->o.max_batch_tokens - used;
    for (int32_t i = 0; i < e->n_running && n_cand < 4096; ++i) {
        ak__seq *s = e->running[i];
        if (s->chunk != 1 || s->n_tokens - s->n_cached != 1) continue;
        int32_t g = draft_budget(e, s, left);
        if (g <= 0 || ak__engine_reserve(e, s, 1 + g) != 0) continue;
        s->n_draft = g;
        s->spec_slot = n_cand;
        cand[n_cand++] = s;
        left -= g;
    }
    for (int32_t i = 0; !e->draft && i < n_cand; ++i) /* n-gram prompt lookup */
        cand[i]->n_draft = (int32_t)ak__ngram_propose(cand[i]->tokens, (size_t)cand[i]->n_tokens,
                                                      e->o.spec_ngram, cand[i]->n_draft,
                                                      cand[i]->tokens + cand[i]->n_tokens);
    for (int32_t r = 0; e->draft && r < e->o.spec_gamma; ++r) AK_CHECK(draft_round(e, cand, n_cand, r));
    for (int32_t i = 0; i < n_cand; ++i) {
        cand[i]->chunk = 1 + cand[i]->n_draft;
        e->tally.spec_proposed += (uint64_t)cand[i]->n_draft;
    }
    return AK_OK;
}

/* The target's token for logits `row`; *accepted tells whether it is `draft`. */
static int32_t verify_one(ak_llm_engine *e, ak__seq *s, const float *row, int32_t r,
                          int32_t draft, int *accepted, float *logprob) {
    if (is_greedy(s)) {
        int32_t t = ak__sampler_sample(&s->sampler, row, logprob, NULL, NULL);
        *accepted = t == draft;
        return t;
    }
    ak__sampler_dist(&s->sampler, row, e->probs);
    int32_t t = draft < 0 ? ak__spec_bonus(&s->sampler, e->probs)
                          : ak__spec_verify(&s->sampler, e->probs, e->draft ? draft_q(e, s, r) : NULL,
                                            draft, accepted);
    *logprob = logf(e->probs[t] > 0 ? e->probs[t] : 1e-30f);
    return t;
}

void ak__engine_spec_verify(ak_llm_engine *e, ak__seq *s, const float *rows) {
    size_t vocab = (size_t)e->model->hp.n_vocab;
    int32_t base = s->n_cached, n = s->n_draft, drafts[16];
    memcpy(drafts, s->tokens + s->n_tokens, (size_t)n * sizeof *drafts);
    int32_t k = 0;
    for (int32_t j = 0; j <= n; ++j) {
        int accepted = 0;
        float logprob = 0;
        int32_t t = verify_one(e, s, rows + (size_t)j * vocab, j, j < n ? drafts[j] : -1,
                               &accepted, &logprob);
        s->n_cached = base + 1 + j; /* the input of row j is valid */
        ak__sampler_accept(&s->sampler, t, 0);
        ak__engine_deliver(e, s, t, logprob, NULL, 0);
        if (s->done || j == n || !accepted) break;
        k++;
    }
    e->tally.spec_accepted += (uint64_t)k;
    if (s->draft_cached > base + 1 + k) s->draft_cached = base + 1 + k;
}
