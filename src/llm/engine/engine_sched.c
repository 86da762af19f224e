/* The scheduler: FCFS admission, running sequences first (decodes, then chunks of
 * prefills), a per-step token budget, a cap on sequences, prefix-cache lookups at
 * admission, copy-on-write of shared blocks, and preemption by recompute — when the
 * cache runs out of blocks the newest running sequence gives all of its blocks back and
 * goes to the front of the queue; it later recomputes its tokens (prefix hits help). */
#include <string.h>

#include "llm/engine/engine_internal.h"

/* ---- the waiting ring ------------------------------------------------------------------ */

void ak__engine_waiting_push_front(ak_llm_engine *e, ak__seq *s) {
    e->waiting_head = (e->waiting_head + e->waiting_cap - 1) % e->waiting_cap;
    e->waiting[e->waiting_head] = s;
    e->n_waiting++;
}

void ak__engine_waiting_push_back(ak_llm_engine *e, ak__seq *s) {
    e->waiting[(e->waiting_head + e->n_waiting) % e->waiting_cap] = s;
    e->n_waiting++;
}

void ak__engine_waiting_forget(ak_llm_engine *e, const ak__req *q) {
    /* a request cancelled while waiting behind others stays queued (waiting_front skips
     * it once at the head); freeing it without this left a dangling pointer there */
    int32_t kept = 0;
    for (int32_t i = 0; i < e->n_waiting; ++i) {
        ak__seq *s = e->waiting[(e->waiting_head + i) % e->waiting_cap];
        if (s->req == q) continue;
        e->waiting[(e->waiting_head + kept++) % e->waiting_cap] = s;
    }
    e->n_waiting = kept;
}

static ak__seq *waiting_front(ak_llm_engine *e) {
    while (e->n_waiting > 0 && e->waiting[e->waiting_head]->done) { /* cancelled meanwhile */
        e->waiting_head = (e->waiting_head + 1) % e->waiting_cap;
        e->n_waiting--;
    }
    return e->n_waiting > 0 ? e->waiting[e->waiting_head] : NULL;
}

static void waiting_pop(ak_llm_engine *e) {
    e->waiting_head = (e->waiting_head + 1) % e->waiting_cap;
    e->n_waiting--;
}

/* ---- blocks ------------------------------------------------------------------------------ */

static void release_blocks(ak_llm_engine *e, ak__seq *s) {
    for (int32_t i = 0; i < s->n_blocks; ++i) ak__kv_unref(e->kv, s->blocks[i]);
    s->n_blocks = 0;
    s->n_cached = 0;
    s->draft_cached = 0;
    s->n_published = 0;
    s->last_hash = 0;
}

int ak__engine_reserve(ak_llm_engine *e, ak__seq *s, int32_t need) {
    int32_t bs = e->kv->block_size;
    int32_t first = s->n_cached / bs, want = (s->n_cached + need + bs - 1) / bs;
    if (first < s->n_blocks && e->kv->ref[s->blocks[first]] > 1) { /* copy on write */
        int32_t fresh = ak__kv_alloc(e->kv);
        if (fresh < 0) return -1;
        ak__kv_copy(e->kv, fresh, s->blocks[first]);
        if (e->draft_kv) ak__kv_copy(e->draft_kv, fresh, s->blocks[first]);
        ak__kv_unref(e->kv, s->blocks[first]);
        s->blocks[first] = fresh;
    }
    while (s->n_blocks < want) {
        int32_t b = ak__kv_alloc(e->kv);
        if (b < 0) return -1;
        s->blocks[s->n_blocks++] = b;
    }
    return 0;
}

void ak__engine_publish(ak_llm_engine *e, ak__seq *s) {
    if (!e->o.prefix_caching) return;
    int32_t bs = e->kv->block_size;
    while ((s->n_published + 1) * bs <= s->n_cached) {
        const int32_t *toks = s->tokens + (size_t)s->n_published * (size_t)bs;
        s->last_hash = ak__kv_chain_hash(s->last_hash, toks, bs);
        ak__kv_publish(e->kv, s->blocks[s->n_published], s->last_hash, toks);
        s->n_published++;
    }
}

/* Reuses cached full blocks of the sequence's leading tokens (never its last token,
 * whose logits are needed). Draft-model caches are not shared, so no reuse with one. */
static void prefix_lookup(ak_llm_engine *e, ak__seq *s) {
    if (!e->o.prefix_caching || e->draft_kv || s->n_blocks > 0) return;
    int32_t bs = e->kv->block_size;
    while ((s->n_blocks + 1) * bs <= s->n_tokens - 1) {
        const int32_t *toks = s->tokens + (size_t)s->n_blocks * (size_t)bs;
        uint64_t h = ak__kv_chain_hash(s->last_hash, toks, bs);
        int32_t b = ak__kv_lookup(e->kv, h, toks);
        if (b < 0) break;
        s->blocks[s->n_blocks++] = b;
        s->last_hash = h;
        s->n_published = s->n_blocks;
        s->n_cached += bs;
    }
}

/* ---- the running list -------------------------------------------------------------------- */

static void running_remove(ak_llm_engine *e, ak__seq *s) {
    for (int32_t i = 0; i < e->n_running; ++i) {
        if (e->running[i] != s) continue;
        memmove(&e->running[i], &e->running[i + 1],
                (size_t)(e->n_running - i - 1) * sizeof *e->running);
        e->n_running--;
        break;
    }
    s->running = 0;
}

void ak__engine_retire(ak_llm_engine *e, ak__seq *s) {
    if (s->running) running_remove(e, s);
    release_blocks(e, s);
}

void ak__engine_preempt(ak_llm_engine *e, ak__seq *s) {
    running_remove(e, s);
    release_blocks(e, s);
    s->chunk = 0;
    ak__engine_waiting_push_front(e, s);
    e->tally.preemptions++;
}

/* ---- one step's plan -------------------------------------------------------------------------- */

/* Tokens a running sequence computes this step: all pending (plus the speculative
 * drafts' slots, reserved by the speculative path itself) within the budget. */
static int32_t pending(const ak__seq *s) { return s->n_tokens - s->n_cached; }

static int schedule_running(ak_llm_engine *e, int32_t *budget, int decodes) {
    for (int32_t i = 0; i < e->n_running && *budget > 0; ++i) {
        ak__seq *s = e->running[i];
        if (s->chunk > 0 || (pending(s) == 1) != decodes) continue;
        int32_t chunk = pending(s) < *budget ? pending(s) : *budget;
        while (ak__engine_reserve(e, s, chunk) != 0) {
            ak__seq *victim = e->running[e->n_running - 1];
            ak__engine_preempt(e, victim);
            if (victim == s) return 0; /* nothing older could give way */
        }
        s->chunk = chunk;
        *budget -= chunk;
    }
    return 0;
}

static int can_admit(const ak_llm_engine *e, const ak__seq *s, int32_t chunk) {
    int32_t bs = e->kv->block_size;
    int32_t need = (s->n_cached + chunk + bs - 1) / bs - s->n_blocks;
    int32_t headroom = e->n_running; /* one block per running sequence to keep decoding */
    return ak__kv_available(e->kv) >= need + headroom;
}

static void admit_waiting(ak_llm_engine *e, int32_t *budget) {
    ak__seq *s;
    while (*budget > 0 && (s = waiting_front(e)) != NULL) {
        int32_t samples = (s->sample == 0 && !s->req->forked) ? s->req->r.n : 1;
        if (e->n_running + samples > e->o.max_seqs) break;
        prefix_lookup(e, s);
        int32_t chunk = pending(s) < *budget ? pending(s) : *budget;
        if (!can_admit(e, s, chunk) || ak__engine_reserve(e, s, chunk) != 0) break;
        waiting_pop(e);
        if (s->sample == 0 && !s->req->forked) s->req->n_cached_prompt = (uint32_t)s->n_cached;
        s->running = 1;
        s->admit_order = ++e->admit_counter;
        s->chunk = chunk;
        s->n_draft = 0;
        e->running[e->n_running++] = s;
        *budget -= chunk;
    }
}

int32_t ak__engine_schedule(ak_llm_engine *e) {
    int32_t budget = e->o.max_batch_tokens;
    for (int32_t i = 0; i < e->n_running; ++i) e->running[i]->chunk = e->running[i]->n_draft = 0;
    schedule_running(e, &budget, 1);
    schedule_running(e, &budget, 0);
    admit_waiting(e, &budget);
    return e->o.max_batch_tokens - budget;
}
