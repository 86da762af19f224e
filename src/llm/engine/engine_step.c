/* One engine step: take new requests and cancellations, schedule, run one forward pass
 * over the ragged batch of every scheduled chunk, then sample, check the stop conditions
 * and emit events for each sequence whose chunk reached its end. */
#include <string.h>

#include "core/check.h"
#include "llm/engine/engine_internal.h"

static void emit(ak__seq *s, int32_t token, float logprob, const ak_llm_logprob *top,
                 int32_t n_top, ak_finish_reason finish, size_t trim, ak_status status) {
    ak__req *q = s->req;
    if (!q->r.on_event) return;
    ak_llm_event ev = {q->id, s->sample, token, logprob, top, n_top, finish, trim, status,
                       (uint32_t)q->r.n_prompt, q->n_cached_prompt};
    q->r.on_event(q->r.user, &ev);
}

void ak__engine_finish(ak_llm_engine *e, ak__seq *s, ak_finish_reason reason, size_t trim,
                       ak_status status) {
    if (s->done) return;
    s->done = 1;
    ak__engine_retire(e, s);
    emit(s, -1, 0.0f, NULL, 0, reason, trim, status);
    s->req->n_done++;
}

/* ---- stop conditions ------------------------------------------------------------------ */

static int is_stop_id(const ak__req *q, int32_t token) {
    for (size_t i = 0; i < q->r.n_stop_ids; ++i)
        if (q->stop_ids[i] == token) return 1;
    return 0;
}

/* Feeds the token's bytes to the stop-string matcher; 1 with *trim on a match. */
static int stop_string_hit(ak_llm_engine *e, ak__seq *s, int32_t token, size_t *trim) {
    *trim = 0;
    if (s->req->r.n_stop_strings == 0) return 0;
    char piece[512];
    size_t len = 0;
    if (ak_tokenizer_decode(e->tok, &token, 1, 0, piece, sizeof piece, &len) != AK_OK) return 0;
    return ak__stop_feed(&s->stop, piece, len, trim);
}

void ak__engine_deliver(ak_llm_engine *e, ak__seq *s, int32_t token, float logprob,
                        const ak_llm_logprob *top, int32_t n_top) {
    const ak__req *q = s->req;
    e->tally.generated_tokens++;
    if ((token == e->eos && !q->r.ignore_eos) || is_stop_id(q, token)) {
        ak__engine_finish(e, s, AK_FINISH_STOP, 0, AK_OK);
        return;
    }
    s->tokens[s->n_tokens++] = token;
    s->n_generated++;
    size_t trim;
    int hit = stop_string_hit(e, s, token, &trim);
    emit(s, token, logprob, top, n_top, AK_FINISH_NONE, 0, AK_OK);
    if (hit) ak__engine_finish(e, s, AK_FINISH_STOP, trim, AK_OK);
    else if (s->n_generated >= q->r.max_tokens || s->n_tokens >= e->o.max_context)
        ak__engine_finish(e, s, AK_FINISH_LENGTH, 0, AK_OK);
}

/* ---- sampling ------------------------------------------------------------------------------ */

static void sample_and_deliver(ak_llm_engine *e, ak__seq *s, const float *row) {
    ak_llm_logprob top[20];
    int32_t n_top = 0;
    float logprob = 0.0f;
    int want = s->req->r.sampling.n_logprobs > 0;
    if (s->grammar && !(row = ak__engine_grammar_mask(e, s, row))) return;
    int32_t token = ak__sampler_sample(&s->sampler, row, &logprob, want ? top : NULL,
                                       want ? &n_top : NULL);
    ak__sampler_accept(&s->sampler, token, 0);
    if (s->grammar && !ak__engine_grammar_accept(e, s, token)) return;
    ak__engine_deliver(e, s, token, logprob, top, n_top);
    if (s->grammar && !s->done && ak__engine_grammar_done(s))
        ak__engine_finish(e, s, AK_FINISH_STOP, 0, AK_OK);
}

/* The first sample finished the prompt: the others share its blocks from here on. */
static void fork_samples(ak_llm_engine *e, ak__seq *lead) {
    ak__req *q = lead->req;
    q->forked = 1;
    for (int32_t i = 1; i < q->r.n; ++i) {
        ak__seq *f = &q->seqs[i];
        if (f->done) continue;
        memcpy(f->blocks, lead->blocks, (size_t)lead->n_blocks * sizeof *f->blocks);
        for (int32_t b = 0; b < lead->n_blocks; ++b) ak__kv_ref(e->kv, lead->blocks[b]);
        f->n_blocks = lead->n_blocks;
        f->n_cached = lead->n_cached;
        f->draft_cached = lead->draft_cached;
        f->n_published = lead->n_published;
        f->last_hash = lead->last_hash;
        f->running = 1;
        f->admit_order = ++e->admit_counter;
        e->running[e->n_running++] = f;
    }
}

static void after_forward(ak_llm_engine *e, ak__seq **seqs, int32_t n) {
    size_t vocab = (size_t)e->model->hp.n_vocab;
    for (int32_t i = 0; i < n; ++i) {
        ak__seq *s = seqs[i];
        if (s->n_draft > 0) { /* verification sets n_cached to what was accepted */
            ak__engine_spec_verify(e, s, e->logits + (size_t)s->out_row * vocab);
            if (!s->done) ak__engine_publish(e, s);
            continue;
        }
        s->n_cached += s->chunk;
        if (s->sample == 0 && !s->req->forked) e->tally.prompt_tokens += (uint64_t)s->chunk;
        ak__engine_publish(e, s);
        if (s->out_row < 0 || s->done) continue;
        const float *row = e->logits + (size_t)s->out_row * vocab;

        if (s->sample == 0 && !s->req->forked && s->req->r.n > 1) {
            fork_samples(e, s);
            for (int32_t k = 1; k < s->req->r.n; ++k)
                if (!s->req->seqs[k].done) sample_and_deliver(e, &s->req->seqs[k], row);
        }
        if (s->sample == 0) s->req->forked = 1;
        sample_and_deliver(e, s, row);
    }
}

/* ---- the batch ------------------------------------------------------------------------------ */

int32_t ak__engine_batch_add(ak_llm_engine *e, ak__seq *s, int32_t from, int32_t len,
                             int32_t slot, int32_t t) {
    for (int32_t j = 0; j < len; ++j, ++t) {
        e->b_tokens[t] = s->tokens[from + j];
        e->b_pos[t] = from + j;
        e->b_seq[t] = slot;
    }
    e->b_tables[slot] = s->blocks;
    e->b_len[slot] = from + len;
    e->b_seqs[slot] = s;
    return t;
}

static int32_t build_batch(ak_llm_engine *e, ak__batch *b) {
    int32_t t = 0, n_seqs = 0, n_out = 0;
    for (int32_t i = 0; i < e->n_running; ++i) {
        ak__seq *s = e->running[i];
        if (s->chunk == 0) continue;
        t = ak__engine_batch_add(e, s, s->n_cached, s->chunk, n_seqs, t);
        s->out_row = -1;
        if (s->n_draft > 0) { /* every position is verified */
            s->out_row = n_out;
            for (int32_t j = s->chunk; j > 0; --j) e->b_out[n_out++] = t - j;
        } else if (s->n_cached + s->chunk == s->n_tokens) {
            s->out_row = n_out;
            e->b_out[n_out++] = t - 1;
        }
        n_seqs++;
    }
    *b = (ak__batch){t, e->b_tokens, e->b_pos, e->b_seq, n_seqs, e->b_tables, e->b_len,
                     n_out, e->b_out};
    return n_seqs;
}

/* Drains submissions and cancellations (taken under the lock). */
void ak__engine_take_inbox(ak_llm_engine *e);

ak_status ak__engine_run_step(ak_llm_engine *e) {
    ak__engine_take_inbox(e);
    if (ak__engine_schedule(e) == 0) return AK_OK;
    if (e->draft || e->o.spec_ngram) AK_CHECK(ak__engine_spec_propose(e));
    ak__batch b;
    int32_t n_seqs = build_batch(e, &b);
    ak_status st = ak__forward(e->model, e->ws, e->kv, &b, e->logits, e->pool);
    if (st != AK_OK) {
        for (int32_t i = 0; i < n_seqs; ++i) ak__engine_finish(e, e->b_seqs[i], AK_FINISH_ERROR, 0, st);
        return st;
    }
    after_forward(e, e->b_seqs, n_seqs);
    e->tally.steps++;
    return AK_OK;
}
