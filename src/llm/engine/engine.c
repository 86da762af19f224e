/* The LLM engine's public face: options, creation (KV cache sized from the memory
 * budget, workspaces, per-step buffers), request submission and cancellation from any
 * thread, the step loop on a background thread, and statistics. */
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "llm/engine/engine_internal.h"

enum { AK_ENGINE_MAX_QUEUED = 4096, AK_ENGINE_MAX_SAMPLES = 16 };

ak_status ak_llm_engine_options_default(ak_llm_engine_options *o) {
    AK_ARG_CHECK(o != NULL, "options is NULL");
    memset(o, 0, sizeof *o);
    o->max_seqs = 64;
    o->max_batch_tokens = 512;
    o->block_size = 16;
    o->kv_dtype = AK_DTYPE_F16;
    o->prefix_caching = 1;
    o->spec_gamma = 4;
    return AK_OK;
}

ak_status ak_llm_request_default(ak_llm_request *r) {
    AK_ARG_CHECK(r != NULL, "request is NULL");
    memset(r, 0, sizeof *r);
    r->max_tokens = 16;
    r->n = 1;
    return ak_sampling_params_default(&r->sampling);
}

/* ---- creation --------------------------------------------------------------------------- */

static ak_status check_options(const ak_llm_model *m, ak_llm_engine_options *o) {
    if (o->max_context <= 0 || o->max_context > m->hp.max_context) o->max_context = m->hp.max_context;
    AK_ARG_CHECK(o->max_seqs >= 1 && o->max_seqs <= 4096, "engine: max_seqs %d not in [1, 4096]",
                 o->max_seqs);
    AK_ARG_CHECK(o->max_batch_tokens >= 1 && o->max_batch_tokens <= 65536,
                 "engine: max_batch_tokens %d not in [1, 65536]", o->max_batch_tokens);
    AK_ARG_CHECK(o->block_size >= 1 && o->block_size <= 1024,
                 "engine: block_size %d not in [1, 1024]", o->block_size);
    AK_ARG_CHECK(o->kv_dtype == AK_DTYPE_F32 || o->kv_dtype == AK_DTYPE_F16,
                 "engine: kv_dtype must be AK_DTYPE_F32 or AK_DTYPE_F16");
    AK_ARG_CHECK(o->kv_q8_0 == 0 || o->kv_q8_0 == 1, "engine: kv_q8_0 %d is not 0 or 1",
                 o->kv_q8_0);
    AK_ARG_CHECK(!o->kv_q8_0 || m->hp.head_dim % 32 == 0,
                 "engine: a q8_0 KV cache needs a head_dim that is a multiple of 32; this "
                 "model's head_dim is %d (use kv type f16 or f32)", m->hp.head_dim);
    AK_ARG_CHECK(!o->kv_q8_0 || !o->draft || o->draft->hp.head_dim % 32 == 0,
                 "engine: a q8_0 KV cache needs a head_dim that is a multiple of 32; the draft "
                 "model's head_dim is %d (use kv type f16 or f32)",
                 o->draft ? o->draft->hp.head_dim : 0);
    AK_ARG_CHECK(o->spec_gamma >= 0 && o->spec_gamma <= 16, "engine: spec_gamma %d not in [0, 16]",
                 o->spec_gamma);
    AK_ARG_CHECK(o->spec_ngram >= 0 && o->spec_ngram <= 16, "engine: spec_ngram %d not in [0, 16]",
                 o->spec_ngram);
    return AK_OK;
}

/* The KV storage the options ask for. */
static ak__kv_type kv_type_of(const ak_llm_engine_options *o) {
    if (o->kv_q8_0) return AK__KV_Q8_0;
    return o->kv_dtype == AK_DTYPE_F32 ? AK__KV_F32 : AK__KV_F16;
}

static int32_t kv_block_count(const ak_llm_model *m, const ak_llm_engine_options *o) {
    size_t per_block = ak__kv_block_bytes(m->hp.n_layers, m->hp.n_kv_heads, m->hp.head_dim,
                                          o->block_size, kv_type_of(o));
    uint64_t budget = o->kv_bytes;
    if (budget == 0) {
        uint64_t seqs = o->max_seqs / 4 > 4 ? (uint64_t)o->max_seqs / 4 : 4;
        budget = seqs * (uint64_t)o->max_context * (per_block / (size_t)o->block_size);
        if (budget > (2ull << 30)) budget = 2ull << 30;
    }
    uint64_t n = budget / per_block;
    return n > INT32_MAX ? INT32_MAX : (int32_t)n;
}

static ak_status alloc_step_buffers(ak_llm_engine *e) {
    size_t T = (size_t)e->o.max_batch_tokens, S = (size_t)e->o.max_seqs;
    size_t vocab = (size_t)e->model->hp.n_vocab;
    e->b_tokens = malloc(T * sizeof *e->b_tokens);
    e->b_pos = malloc(T * sizeof *e->b_pos);
    e->b_seq = malloc(T * sizeof *e->b_seq);
    e->b_out = malloc(T * sizeof *e->b_out);
    e->b_len = malloc(S * sizeof *e->b_len);
    e->b_tables = malloc(S * sizeof *e->b_tables);
    e->b_seqs = malloc(S * sizeof *e->b_seqs);
    e->running = malloc(S * sizeof *e->running);
    e->waiting_cap = AK_ENGINE_MAX_QUEUED * AK_ENGINE_MAX_SAMPLES;
    e->waiting = malloc((size_t)e->waiting_cap * sizeof *e->waiting);
    e->logits = malloc((size_t)e->max_out * vocab * sizeof *e->logits);
    e->probs = malloc(vocab * sizeof *e->probs);
    size_t drafts = e->draft ? S * (size_t)e->o.spec_gamma : 1;
    e->draft_probs = malloc(drafts * vocab * sizeof *e->draft_probs);
    e->draft_logits = malloc(e->draft ? S * vocab * sizeof *e->draft_logits : 1);
    if (!e->b_tokens || !e->b_pos || !e->b_seq || !e->b_out || !e->b_len || !e->b_tables ||
        !e->b_seqs || !e->running || !e->waiting || !e->logits || !e->probs || !e->draft_probs ||
        !e->draft_logits)
        return AK_FAIL(AK_ERR_NO_MEMORY, "engine: out of memory for the step buffers");
    return AK_OK;
}

static ak_status create_parts(ak_llm_engine *e) {
    const ak__llm_hparams *hp = &e->model->hp;
    AK_CHECK(ak_threadpool_create(e->o.n_threads, &e->pool));
    int threads;
    AK_CHECK(ak_threadpool_size(e->pool, &threads));
    int32_t n_blocks = kv_block_count(e->model, &e->o);
    AK_CHECK(ak__kv_create(hp->n_layers, hp->n_kv_heads, hp->head_dim, e->o.block_size, n_blocks,
                           kv_type_of(&e->o), &e->kv));
    int32_t spec = e->o.draft || e->o.spec_ngram ? e->o.spec_gamma : 0;
    e->max_out = e->o.max_seqs * (spec + 1);
    if (e->max_out > e->o.max_batch_tokens) e->max_out = e->o.max_batch_tokens;
    AK_CHECK(ak__forward_ws_create(e->model, e->o.max_batch_tokens, e->max_out, e->o.max_context,
                                   threads, &e->ws));
    if (e->draft) {
        const ak__llm_hparams *dh = &e->draft->hp;
        AK_CHECK(ak__kv_create(dh->n_layers, dh->n_kv_heads, dh->head_dim, e->o.block_size,
                               n_blocks, kv_type_of(&e->o), &e->draft_kv));
        AK_CHECK(ak__forward_ws_create(e->draft, e->o.max_batch_tokens, e->max_out,
                                       e->o.max_context, threads, &e->draft_ws));
    }
    return alloc_step_buffers(e);
}

static ak_status check_draft(const ak_llm_model *m, const ak_llm_model *d) {
    if (!d) return AK_OK;
    if (d->hp.n_vocab != m->hp.n_vocab)
        return AK_FAIL(AK_ERR_INVALID_ARG, "engine: the draft model's vocabulary (%d) differs "
                       "from the target's (%d)", d->hp.n_vocab, m->hp.n_vocab);
    return AK_OK;
}

ak_status ak_llm_engine_create(ak_llm_model *model, const ak_llm_engine_options *o,
                               ak_llm_engine **out) {
    AK_ARG_CHECK(model != NULL && out != NULL, "model or out is NULL");
    *out = NULL;
    if (model->enc) /* embeddings: encoders have no output head */
        return AK_FAIL(AK_ERR_UNSUPPORTED, "engine: '%s' is an embedding-only encoder; it "
                       "does not generate text (use ak_llm_model_embed)", model->hp.arch);
    ak_llm_engine_options opts;
    if (o) opts = *o;
    else ak_llm_engine_options_default(&opts);
    AK_CHECK(check_options(model, &opts));
    AK_CHECK(check_draft(model, opts.draft));
    ak_llm_engine *e = calloc(1, sizeof *e);
    if (!e) return AK_FAIL(AK_ERR_NO_MEMORY, "engine: out of memory");
    e->model = model;
    e->draft = opts.draft;
    e->o = opts;
    e->tok = model->tokenizer;
    ak_tokenizer_info ti;
    ak_tokenizer_get_info(e->tok, &ti);
    e->eos = ti.eos;
    e->next_id = 1;
    pthread_mutex_init(&e->lock, NULL);
    pthread_cond_init(&e->wake, NULL);
    ak_status st = create_parts(e);
    if (st != AK_OK) {
        ak_llm_engine_free(e);
        return st;
    }
    *out = e;
    return AK_OK;
}

/* ---- requests ----------------------------------------------------------------------------- */

static void req_free(ak__req *q) {
    if (!q) return;
    if (q->seqs) {
        for (int32_t i = 0; i < q->r.n; ++i) {
            free(q->seqs[i].tokens);
            free(q->seqs[i].blocks);
            ak__sampler_free(&q->seqs[i].sampler);
            ak__stop_free(&q->seqs[i].stop);
            ak__engine_grammar_free(&q->seqs[i]);
        }
    }
    free(q->seqs);
    free(q->prompt);
    free(q->stop_ids);
    if (q->stop_strings)
        for (size_t i = 0; i < q->r.n_stop_strings; ++i) free(q->stop_strings[i]);
    free(q->stop_strings);
    free(q);
}

static ak_status check_request(const ak_llm_engine *e, const ak_llm_request *r) {
    AK_ARG_CHECK(r->prompt != NULL && r->n_prompt >= 1, "request: the prompt is empty");
    AK_ARG_CHECK(r->max_tokens >= 1, "request: max_tokens %d < 1", r->max_tokens);
    AK_ARG_CHECK(r->n >= 1 && r->n <= AK_ENGINE_MAX_SAMPLES, "request: n %d not in [1, %d]", r->n,
                 AK_ENGINE_MAX_SAMPLES);
    AK_ARG_CHECK(r->n <= e->o.max_seqs, "request: n %d exceeds the engine's max_seqs %d", r->n,
                 e->o.max_seqs);
    AK_ARG_CHECK(r->n_prompt + (size_t)r->max_tokens <= (size_t)e->o.max_context,
                 "request: prompt (%zu tokens) + max_tokens (%d) exceeds the context of %d",
                 r->n_prompt, r->max_tokens, e->o.max_context);
    for (size_t i = 0; i < r->n_prompt; ++i)
        AK_ARG_CHECK(r->prompt[i] >= 0 && r->prompt[i] < e->model->hp.n_vocab,
                     "request: prompt token %zu is %d, outside the vocabulary [0, %d)", i,
                     r->prompt[i], e->model->hp.n_vocab);
    AK_ARG_CHECK(r->n_stop_ids == 0 || r->stop_ids != NULL, "request: stop_ids is NULL");
    AK_ARG_CHECK(r->n_stop_strings == 0 || r->stop_strings != NULL, "request: stop_strings is NULL");
    int32_t bs = e->kv->block_size;
    int64_t need = ((int64_t)r->n_prompt + r->max_tokens + 2 * e->o.spec_gamma + bs) / bs;
    AK_ARG_CHECK(need <= e->kv->n_blocks, "request: needs %lld KV blocks, the cache has %d",
                 (long long)need, e->kv->n_blocks);
    return ak__engine_grammar_check(e, r);
}

static ak_status copy_request(ak__req *q, const ak_llm_request *r) {
    q->r = *r;
    q->prompt = malloc(r->n_prompt * sizeof *q->prompt);
    q->stop_ids = malloc((r->n_stop_ids + 1) * sizeof *q->stop_ids);
    q->stop_strings = calloc(r->n_stop_strings + 1, sizeof *q->stop_strings);
    if (!q->prompt || !q->stop_ids || !q->stop_strings)
        return AK_FAIL(AK_ERR_NO_MEMORY, "request: out of memory");
    memcpy(q->prompt, r->prompt, r->n_prompt * sizeof *q->prompt);
    if (r->n_stop_ids) memcpy(q->stop_ids, r->stop_ids, r->n_stop_ids * sizeof *q->stop_ids);
    for (size_t i = 0; i < r->n_stop_strings; ++i) {
        AK_ARG_CHECK(r->stop_strings[i] != NULL, "request: stop string %zu is NULL", i);
        q->stop_strings[i] = strdup(r->stop_strings[i]);
        if (!q->stop_strings[i]) return AK_FAIL(AK_ERR_NO_MEMORY, "request: out of memory");
    }
    q->r.prompt = q->prompt;
    q->r.stop_ids = q->stop_ids;
    q->r.stop_strings = (const char *const *)q->stop_strings;
    return AK_OK; /* the logit bias is copied by each sample's sampler (init_seq) */
}

static ak_status init_seq(const ak_llm_engine *e, ak__req *q, int32_t i) {
    ak__seq *s = &q->seqs[i];
    s->req = q;
    s->sample = i;
    s->n_prompt = s->n_tokens = (int32_t)q->r.n_prompt;
    s->cap = s->n_prompt + q->r.max_tokens + 2 * e->o.spec_gamma + 2;
    s->blocks_cap = (s->cap + e->kv->block_size - 1) / e->kv->block_size + 1;
    s->tokens = malloc((size_t)s->cap * sizeof *s->tokens);
    s->blocks = malloc((size_t)s->blocks_cap * sizeof *s->blocks);
    if (!s->tokens || !s->blocks) return AK_FAIL(AK_ERR_NO_MEMORY, "request: out of memory");
    memcpy(s->tokens, q->prompt, q->r.n_prompt * sizeof *s->tokens);
    AK_CHECK(ak__sampler_init(&s->sampler, e->model->hp.n_vocab, &q->r.sampling, (uint64_t)i));
    AK_CHECK(ak__sampler_set_bias(&s->sampler, q->r.logit_bias_ids, q->r.logit_bias,
                                  q->r.n_logit_bias));
    for (size_t k = 0; k < q->r.n_prompt; ++k) ak__sampler_accept(&s->sampler, q->prompt[k], 1);
    if (q->r.grammar) AK_CHECK(ak__engine_grammar_init(s, q->r.grammar));
    return ak__stop_init(&s->stop, q->r.stop_strings, q->r.n_stop_strings);
}

static ak_status build_request(const ak_llm_engine *e, const ak_llm_request *r, ak__req **out) {
    ak__req *q = calloc(1, sizeof *q);
    if (!q) return AK_FAIL(AK_ERR_NO_MEMORY, "request: out of memory");
    ak_status st = copy_request(q, r);
    if (st == AK_OK) {
        q->seqs = calloc((size_t)r->n, sizeof *q->seqs);
        if (!q->seqs) st = AK_FAIL(AK_ERR_NO_MEMORY, "request: out of memory");
    }
    for (int32_t i = 0; st == AK_OK && i < r->n; ++i) st = init_seq(e, q, i);
    q->r.logit_bias_ids = NULL; /* the caller's arrays: the samplers hold copies */
    q->r.logit_bias = NULL;
    q->r.n_logit_bias = 0;
    if (st != AK_OK) {
        req_free(q);
        return st;
    }
    *out = q;
    return AK_OK;
}

ak_status ak_llm_engine_submit(ak_llm_engine *e, const ak_llm_request *r, uint64_t *id) {
    AK_ARG_CHECK(e != NULL && r != NULL, "engine or request is NULL");
    AK_CHECK(check_request(e, r));
    ak__req *q = NULL;
    AK_CHECK(build_request(e, r, &q));
    pthread_mutex_lock(&e->lock);
    int32_t queued = e->stats.waiting;
    for (ak__req *p = e->inbox; p; p = p->next) queued++;
    if (queued >= AK_ENGINE_MAX_QUEUED) {
        pthread_mutex_unlock(&e->lock);
        req_free(q);
        return AK_FAIL(AK_ERR_UNSUPPORTED, "engine: %d requests are already queued", queued);
    }
    q->id = e->next_id++;
    ak__req **tail = &e->inbox;
    while (*tail) tail = &(*tail)->next;
    *tail = q;
    if (id) *id = q->id;
    pthread_cond_signal(&e->wake);
    pthread_mutex_unlock(&e->lock);
    return AK_OK;
}

ak_status ak_llm_engine_cancel(ak_llm_engine *e, uint64_t id) {
    AK_ARG_CHECK(e != NULL, "engine is NULL");
    pthread_mutex_lock(&e->lock);
    if (e->n_cancel == e->cancel_cap) {
        int32_t cap = e->cancel_cap ? 2 * e->cancel_cap : 16;
        uint64_t *grown = realloc(e->cancel_ids, (size_t)cap * sizeof *grown);
        if (!grown) {
            pthread_mutex_unlock(&e->lock);
            return AK_FAIL(AK_ERR_NO_MEMORY, "engine: out of memory");
        }
        e->cancel_ids = grown;
        e->cancel_cap = cap;
    }
    e->cancel_ids[e->n_cancel++] = id;
    pthread_cond_signal(&e->wake);
    pthread_mutex_unlock(&e->lock);
    return AK_OK;
}

/* ---- the engine thread's side of the inbox --------------------------------------------- */

static void cancel_request(ak_llm_engine *e, uint64_t id) {
    for (ak__req *q = e->active; q; q = q->next) {
        if (q->id != id) continue;
        for (int32_t i = 0; i < q->r.n; ++i)
            ak__engine_finish(e, &q->seqs[i], AK_FINISH_CANCELLED, 0, AK_OK);
        return;
    }
}

void ak__engine_take_inbox(ak_llm_engine *e);

void ak__engine_take_inbox(ak_llm_engine *e) {
    pthread_mutex_lock(&e->lock);
    ak__req *in = e->inbox;
    e->inbox = NULL;
    uint64_t ids[64];
    int32_t n_ids = e->n_cancel < 64 ? e->n_cancel : 64;
    if (n_ids > 0) { /* cancel_ids is NULL until the first cancellation */
        memcpy(ids, e->cancel_ids, (size_t)n_ids * sizeof *ids);
        memmove(e->cancel_ids, e->cancel_ids + n_ids, (size_t)(e->n_cancel - n_ids) * sizeof *ids);
        e->n_cancel -= n_ids;
    }
    pthread_mutex_unlock(&e->lock);
    while (in) {
        ak__req *q = in;
        in = q->next;
        q->next = e->active;
        e->active = q;
        ak__engine_waiting_push_back(e, &q->seqs[0]);
    }
    for (int32_t i = 0; i < n_ids; ++i) cancel_request(e, ids[i]);
}

/* Frees requests whose samples all finished. */
static void reap(ak_llm_engine *e) {
    ak__req **link = &e->active;
    while (*link) {
        ak__req *q = *link;
        if (q->n_done == q->r.n) {
            *link = q->next;
            ak__engine_waiting_forget(e, q);
            req_free(q);
        } else {
            link = &q->next;
        }
    }
}

static void publish_stats(ak_llm_engine *e) {
    uint64_t live = 0, slots = 0;
    for (int32_t i = 0; i < e->n_running; ++i) {
        live += (uint64_t)e->running[i]->n_cached;
        slots += (uint64_t)e->running[i]->n_blocks * (uint64_t)e->kv->block_size;
    }
    ak_llm_engine_stats s = e->tally; /* the counters; the gauges are set below */
    s.running = e->n_running;
    s.waiting = e->n_waiting;
    s.kv_blocks_total = e->kv->n_blocks;
    s.kv_blocks_used = e->kv->n_blocks - e->kv->n_free;
    s.kv_tokens_live = live;
    s.kv_token_slots_used = slots;
    pthread_mutex_lock(&e->lock);
    e->stats = s;
    pthread_mutex_unlock(&e->lock);
}

ak_status ak_llm_engine_step(ak_llm_engine *e, int32_t *n_pending) {
    AK_ARG_CHECK(e != NULL, "engine is NULL");
    ak_status st = ak__engine_run_step(e);
    reap(e);
    publish_stats(e);
    if (n_pending) {
        int32_t n = 0;
        for (ak__req *q = e->active; q; q = q->next) n++;
        pthread_mutex_lock(&e->lock);
        for (ak__req *q = e->inbox; q; q = q->next) n++;
        if (e->n_cancel) n++;
        pthread_mutex_unlock(&e->lock);
        *n_pending = n;
    }
    return st;
}

ak_status ak_llm_engine_get_stats(ak_llm_engine *e, ak_llm_engine_stats *s) {
    AK_ARG_CHECK(e != NULL && s != NULL, "engine or stats is NULL");
    pthread_mutex_lock(&e->lock);
    *s = e->stats;
    pthread_mutex_unlock(&e->lock);
    return AK_OK;
}

/* ---- the background loop ------------------------------------------------------------------ */

static void *engine_loop(void *arg) {
    ak_llm_engine *e = arg;
    for (;;) {
        pthread_mutex_lock(&e->lock);
        while (!e->stop_requested && !e->inbox && !e->n_cancel && !e->active)
            pthread_cond_wait(&e->wake, &e->lock);
        int stop = e->stop_requested;
        pthread_mutex_unlock(&e->lock);
        if (stop) break;
        ak_llm_engine_step(e, NULL);
    }
    return NULL;
}

ak_status ak_llm_engine_start(ak_llm_engine *e) {
    AK_ARG_CHECK(e != NULL, "engine is NULL");
    if (e->thread_running) return AK_OK;
    e->stop_requested = 0;
    if (pthread_create(&e->thread, NULL, engine_loop, e) != 0)
        return AK_FAIL(AK_ERR_NO_MEMORY, "engine: cannot start the engine thread");
    e->thread_running = 1;
    return AK_OK;
}

ak_status ak_llm_engine_stop(ak_llm_engine *e) {
    AK_ARG_CHECK(e != NULL, "engine is NULL");
    if (!e->thread_running) return AK_OK;
    pthread_mutex_lock(&e->lock);
    e->stop_requested = 1;
    pthread_cond_signal(&e->wake);
    pthread_mutex_unlock(&e->lock);
    pthread_join(e->thread, NULL);
    e->thread_running = 0;
    return AK_OK;
}

ak_status ak_llm_engine_free(ak_llm_engine *e) {
    if (!e) return AK_OK;
    ak_llm_engine_stop(e);
    while (e->active) {
        ak__req *q = e->active;
        e->active = q->next;
        req_free(q);
    }
    while (e->inbox) {
        ak__req *q = e->inbox;
        e->inbox = q->next;
        req_free(q);
    }
    ak__kv_free(e->kv);
    ak__kv_free(e->draft_kv);
    ak__forward_ws_free(e->ws);
    ak__forward_ws_free(e->draft_ws);
    if (e->pool) ak_threadpool_free(e->pool);
    void *bufs[] = {e->b_tokens, e->b_pos, e->b_seq, e->b_out, e->b_len, (void *)e->b_tables,
                    e->b_seqs, e->running, e->waiting, e->logits, e->probs, e->draft_probs,
                    e->draft_logits, e->cancel_ids, e->grammar_row};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; ++i) free(bufs[i]);
    pthread_mutex_destroy(&e->lock);
    pthread_cond_destroy(&e->wake);
    free(e);
    return AK_OK;
}
