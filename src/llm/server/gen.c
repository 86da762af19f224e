/* One generation request of the server, from a parsed body to the bytes sent back.
 *
 * Threads: the backend calls on_event on its own thread (the engine's); it only copies
 * the event into the request's queue and signals. Everything else — rendering the chat
 * template, hooks, tokenizing, detokenizing, JSON, waiting — runs on the connection's
 * thread. The request is reference counted (connection + backend) because either side
 * may finish first: a client can vanish while the engine still owes the final events
 * of a cancelled request. */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/check.h"
#include "llm/chat/chat.h"
#include "llm/hooks/hooks.h"
#include "llm/server/oai_format.h"
#include "llm/server/server_internal.h"

#define WAIT_SLICE_MS 50 /* how often a waiting connection checks its client and the server */

static const char *finish_name(ak_finish_reason r) {
    switch (r) {
    case AK_FINISH_STOP: return "stop";
    case AK_FINISH_LENGTH: return "length";
    case AK_FINISH_CANCELLED: return "abort";
    case AK_FINISH_ERROR: return "error";
    default: return NULL;
    }
}

/* ---- life cycle ---------------------------------------------------------------------- */

static void gen_free(ak__gen *g) {
    ak__server *srv = g->srv;
    pthread_mutex_lock(&srv->mu);
    if (g->live_prev) g->live_prev->live_next = g->live_next;
    else if (srv->live == g) srv->live = g->live_next;
    if (g->live_next) g->live_next->live_prev = g->live_prev;
    pthread_mutex_unlock(&srv->mu);
    for (int i = 0; i < AK__OAI_MAX_N; i++) {
        ak__detok_free(&g->samples[i].detok);
        ak__bytes_free(&g->samples[i].text);
        free(g->samples[i].lps);
    }
    ak__gen_tools_free(g);
    ak__oai_request_free(&g->req);
    ak__oai_grammar_release(g->grammar);
    ak__bytes_free(&g->out);
    free(g->prompt);
    free(g->q);
    free(g->work);
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
    free(g);
}

static ak_status gen_alloc(ak__server *srv, ak__oai_request *req, int fd, ak__gen **out) {
    ak__gen *g = calloc(1, sizeof *g);
    if (!g) return AK_FAIL(AK_ERR_NO_MEMORY, "server: out of memory for a request");
    if (pthread_mutex_init(&g->mu, NULL) != 0) {
        free(g);
        return AK_FAIL(AK_ERR_INTERNAL, "server: mutex");
    }
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int rc = pthread_cond_init(&g->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (rc != 0) {
        pthread_mutex_destroy(&g->mu);
        free(g);
        return AK_FAIL(AK_ERR_INTERNAL, "server: condition variable");
    }
    g->srv = srv;
    g->req = *req;
    memset(req, 0, sizeof *req);
    g->fd = fd;
    g->refs = 1;
    g->t_start_ns = ak_now_ns();
    pthread_mutex_lock(&srv->mu);
    uint64_t serial = ++srv->next_id;
    g->live_next = srv->live;
    if (srv->live) srv->live->live_prev = g;
    srv->live = g;
    pthread_mutex_unlock(&srv->mu);
    snprintf(g->id, sizeof g->id, "%s-%llx%08llx",
             g->req.kind == AK__OAI_CHAT ? "chatcmpl" : "cmpl", (unsigned long long)serial,
             (unsigned long long)(g->t_start_ns & 0xffffffffu));
    *out = g;
    return AK_OK;
}

/* ---- the prompt ---------------------------------------------------------------------- */

/* The model's Jinja template over the request's messages (roles normalized, content parts
 * joined, as parsed; tool calls and tool_call_id kept: tools.c) and its "tools" (none with
 * tool_choice "none"). A template that refuses the conversation (raise_exception, an
 * undefined value, a limit) is the client's 400. */
static ak_status render_jinja(ak__gen *g, char **text, size_t *len, ak__oai_error *err) {
    const ak__server *srv = g->srv;
    const ak__oai_request *r = &g->req;
    cJSON *msgs = NULL;
    AK_CHECK(ak__tools_template_messages(cJSON_GetObjectItemCaseSensitive(r->root, "messages"),
                                         r->messages, r->n_messages, &msgs));
    const cJSON *tools = r->tools.choice == AK__TOOL_CHOICE_NONE ? NULL : r->tools.tools;
    ak_status st = ak__chat_template_render_json(srv->chat_template, msgs, tools, NULL, 1,
                                                 srv->bos_text, srv->eos_text, 0, text, len);
    cJSON_Delete(msgs);
    if (st == AK_ERR_INVALID_ARG) {
        ak__oai_error_set(err, 400, "messages", NULL, "%s", ak_last_error());
        return st;
    }
    return st;
}

static ak_status render_chat(ak__gen *g, char **text, size_t *len, ak__oai_error *err) {
    const ak__server *srv = g->srv;
    const ak__oai_request *r = &g->req;
    if (srv->chat_template) return render_jinja(g, text, len, err);
    size_t need = 0;
    ak_status st = ak_chat_render(srv->chat_format, r->messages, r->n_messages, 1, srv->bos_text,
                                  srv->eos_text, NULL, 0, &need);
    if (st != AK_OK && need == 0) { /* the template refused the conversation */
        ak__oai_error_set(err, 400, "messages", NULL, "%s", ak_last_error());
        return AK_ERR_INVALID_ARG;
    }
    *text = malloc(need + 1);
    if (!*text) return AK_FAIL(AK_ERR_NO_MEMORY, "server: prompt of %zu bytes", need);
    AK_CHECK(ak_chat_render(srv->chat_format, r->messages, r->n_messages, 1, srv->bos_text,
                            srv->eos_text, *text, need + 1, len));
    return AK_OK;
}

/* pre_process hook, then the tokenize hook or the model's tokenizer. */
static ak_status tokenize_text(ak__gen *g, const char *text, size_t len, unsigned flags,
                               ak__oai_error *err) {
    const ak__server *srv = g->srv;
    const ak_llm_hooks *h = srv->has_hooks ? &srv->hooks : NULL;
    char *pre = NULL;
    size_t pre_len = 0;
    ak_status st = ak__hooks_run_text(h ? h->pre_process : NULL, h ? h->user : NULL, text, len,
                                      &pre, &pre_len);
    if (st == AK_OK)
        st = ak__hooks_tokenize(h, srv->tok, pre, pre_len, flags, &g->prompt, &g->n_prompt);
    free(pre);
    if (st != AK_OK) {
        ak__oai_error_set(err, 500, NULL, NULL, "tokenizing the prompt failed: %s",
                          ak_last_error());
        return st;
    }
    for (size_t i = 0; i < g->n_prompt; i++)
        if (g->prompt[i] < 0 || g->prompt[i] >= srv->n_vocab) {
            ak__oai_error_set(err, 500, NULL, NULL, "the tokenize hook returned token %d",
                              g->prompt[i]);
            return AK_ERR_INTERNAL;
        }
    return AK_OK;
}

static ak_status build_prompt(ak__gen *g, ak__oai_error *err) {
    ak__oai_request *r = &g->req;
    if (r->prompt_ids) { /* token prompts go to the engine as they are */
        g->prompt = r->prompt_ids;
        g->n_prompt = r->n_prompt_ids;
        r->prompt_ids = NULL;
        return AK_OK;
    }
    if (r->kind == AK__OAI_COMPLETION)
        return tokenize_text(g, r->prompt, strlen(r->prompt),
                             AK_TOK_ADD_SPECIAL | AK_TOK_PARSE_SPECIAL, err);
    /* the template writes BOS and the turn markers itself */
    char *text = NULL;
    size_t len = 0;
    ak_status st = render_chat(g, &text, &len, err);
    if (st == AK_OK) st = tokenize_text(g, text, len, AK_TOK_PARSE_SPECIAL, err);
    free(text);
    return st;
}

static ak_status check_lengths(ak__gen *g, ak__oai_error *err) {
    const ak__server *srv = g->srv;
    const char *what = g->req.kind == AK__OAI_CHAT ? "messages" : "prompt";
    int64_t room = (int64_t)srv->n_ctx - (int64_t)g->n_prompt;
    if (g->n_prompt == 0) {
        ak__oai_error_set(err, 400, what, NULL, "The %s is empty after tokenization.", what);
        return AK_ERR_INVALID_ARG;
    }
    int64_t want = g->req.max_tokens;
    if (want == 0) { /* not given: OpenAI's 16 for completions, the rest of the context for chat */
        want = g->req.kind == AK__OAI_CHAT || room < 16 ? room : 16;
        if (want < 1) want = 1;
    }
    if (room < 1 || want > room) {
        ak__oai_error_set(
            err, 400, what, "context_length_exceeded",
            "This model's maximum context length is %d tokens. However, you requested "
            "%lld tokens (%zu in the %s, %d for the completion). Please reduce the "
            "length of the %s or completion.",
            srv->n_ctx, (long long)g->n_prompt + want, g->n_prompt, what, (int)want, what);
        return AK_ERR_INVALID_ARG;
    }
    g->max_tokens = (int32_t)want;
    return AK_OK;
}

static ak_status setup_output(ak__gen *g) {
    const ak__server *srv = g->srv;
    const ak__oai_request *r = &g->req;
    for (size_t i = 0; i < r->n_stop_ids && g->n_stop_ids < 63; i++)
        g->stop_ids[g->n_stop_ids++] = r->stop_ids[i];
    if (r->kind == AK__OAI_CHAT && srv->turn_end_id >= 0)
        g->stop_ids[g->n_stop_ids++] = srv->turn_end_id;
    g->meta.kind = r->kind;
    g->meta.id = g->id;
    g->meta.created = (int64_t)time(NULL);
    g->meta.model = srv->name;
    g->meta.logprobs = r->kind == AK__OAI_CHAT ? r->logprobs : r->logprobs >= 0;
    g->meta.tok = srv->tok;
    for (int32_t i = 0; i < r->n; i++)
        AK_CHECK(ak__detok_init(&g->samples[i].detok, srv->tok, r->stops, r->n_stops));
    return AK_OK;
}

ak_status ak__gen_create(ak__server *srv, ak__oai_request *req, int fd, ak__gen **out,
                         ak__oai_error *err) {
    ak__gen *g = NULL;
    ak_status st = gen_alloc(srv, req, fd, &g);
    if (st != AK_OK) {
        ak__oai_request_free(req);
        ak__oai_error_set(err, 500, NULL, NULL, "%s", ak_last_error());
        return st;
    }
    st = ak__gen_tools_setup(g, err);
    if (st == AK_OK) st = build_prompt(g, err);
    if (st == AK_OK) st = check_lengths(g, err);
    if (st == AK_OK && (st = setup_output(g)) != AK_OK)
        ak__oai_error_set(err, 500, NULL, NULL, "%s", ak_last_error());
    if (st != AK_OK) {
        if (st == AK_ERR_NO_MEMORY) ak__oai_error_set(err, 500, NULL, NULL, "out of memory");
        ak__gen_release(g);
        return st;
    }
    *out = g;
    return AK_OK;
}

/* ---- events: the backend's thread ---------------------------------------------------- */

static void on_event(void *user, const ak_llm_event *ev) {
    ak__gen *g = user;
    int last = 0;
    pthread_mutex_lock(&g->mu);
    if (g->q_len == g->q_cap) {
        size_t cap = g->q_cap ? 2 * g->q_cap : 64;
        ak__gen_event *q = realloc(g->q, cap * sizeof *q);
        if (q) g->q = q, g->q_cap = cap;
    }
    if (g->q_len < g->q_cap) {
        ak__gen_event *e = &g->q[g->q_len++];
        e->sample = ev->sample;
        e->token = ev->token;
        e->logprob = ev->logprob;
        e->n_top = ev->top && ev->n_top > 0
                       ? (ev->n_top < AK__OAI_MAX_LOGPROBS ? ev->n_top : AK__OAI_MAX_LOGPROBS)
                       : 0;
        if (e->n_top) memcpy(e->top, ev->top, (size_t)e->n_top * sizeof *e->top);
        e->finish = ev->finish;
        e->status = ev->status;
        e->stop_trim = (uint32_t)ev->stop_trim;
        e->n_cached = ev->n_cached;
        e->t_ns = ak_now_ns();
    } else {
        g->q_oom = 1; /* the consumer fails the request */
    }
    if (ev->finish != AK_FINISH_NONE && --g->samples_open == 0) last = --g->refs == 0;
    pthread_cond_signal(&g->cv);
    pthread_mutex_unlock(&g->mu);
    if (last) gen_free(g);
}

static uint64_t random_seed(const ak__gen *g) {
    uint64_t x = ak_now_ns() ^ ((uint64_t)(uintptr_t)g << 16);
    x ^= x >> 33; /* splitmix-style finalizer */
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

ak_status ak__gen_submit(ak__gen *g, ak__oai_error *err) {
    ak__oai_request *r = &g->req;
    ak_llm_request q;
    AK_CHECK(ak_llm_request_default(&q));
    q.prompt = g->prompt;
    q.n_prompt = g->n_prompt;
    q.max_tokens = g->max_tokens;
    q.n = r->n;
    q.sampling = r->sampling;
    if (!r->seed_set) q.sampling.seed = random_seed(g);
    q.stop_ids = g->stop_ids;
    q.n_stop_ids = g->n_stop_ids;
    q.stop_strings = r->stops;
    q.n_stop_strings = r->n_stops;
    q.ignore_eos = r->ignore_eos;
    q.grammar = ak__gen_tools_grammar(g); /* forced tool calls */
    q.on_event = on_event;
    q.user = g;
    if (r->grammar_text) {
        AK_CHECK(ak__oai_grammar_acquire(g->srv->tok, r->grammar_text, &g->grammar, err));
        q.grammar = g->grammar;
    }
    pthread_mutex_lock(&g->mu);
    g->refs++; /* the backend's, dropped with the last final event */
    g->samples_open = r->n;
    pthread_mutex_unlock(&g->mu);
    uint64_t id = 0;
    ak_status st = g->srv->be.submit(g->srv->be.ctx, &q, &id);
    pthread_mutex_lock(&g->mu);
    if (st == AK_OK) {
        g->engine_id = id;
        g->submitted = 1;
    } else {
        g->refs--;
        g->samples_open = 0;
    }
    pthread_mutex_unlock(&g->mu);
    if (st == AK_ERR_INVALID_ARG) ak__oai_error_set(err, 400, NULL, NULL, "%s", ak_last_error());
    else if (st != AK_OK)
        ak__oai_error_set(err, 503, NULL, NULL, "the engine cannot take the request: %s",
                          ak_last_error());
    return st;
}

/* ---- consuming events: the connection's thread --------------------------------------- */

static int client_gone(const ak__gen *g) {
    if (g->fd < 0) return 0;
    struct pollfd p = {g->fd, POLLRDHUP, 0};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

static void cancel(ak__gen *g) {
    pthread_mutex_lock(&g->mu);
    int open = g->submitted && !g->cancelled && g->samples_open > 0;
    g->cancelled = 1;
    uint64_t id = g->engine_id;
    pthread_mutex_unlock(&g->mu);
    if (open) g->srv->be.cancel(g->srv->be.ctx, id);
}

/* Takes the queued events into g->work; -1 when the client left or the server stops
 * (checked every WAIT_SLICE_MS, also while events keep coming). */
static int wait_events(ak__gen *g, size_t *n) {
    for (;;) {
        uint64_t now = ak_now_ns();
        if (now - g->checked_ns >= WAIT_SLICE_MS * 1000000ull) {
            g->checked_ns = now;
            if (__atomic_load_n(&g->srv->stopping, __ATOMIC_ACQUIRE) || client_gone(g)) return -1;
        }
        pthread_mutex_lock(&g->mu);
        if (g->q_len == 0 && !g->q_oom) {
            struct timespec t;
            clock_gettime(CLOCK_MONOTONIC, &t);
            t.tv_nsec += WAIT_SLICE_MS * 1000000L;
            if (t.tv_nsec >= 1000000000L) t.tv_sec++, t.tv_nsec -= 1000000000L;
            pthread_cond_timedwait(&g->cv, &g->mu, &t);
        }
        if (g->q_len > 0 || g->q_oom) break;
        pthread_mutex_unlock(&g->mu);
    }
    ak__gen_event *q = g->q;
    size_t cap = g->q_cap;
    *n = g->q_len;
    g->q = g->work; /* the producer refills the buffer we just drained */
    g->q_cap = g->work_cap;
    g->q_len = 0;
    g->work = q;
    g->work_cap = cap;
    int oom = g->q_oom;
    pthread_mutex_unlock(&g->mu);
    return oom ? -2 : 0;
}

/* A piece of output text, through the post_process hook. */
static ak_status emit_piece(ak__gen *g, ak__gen_sample *s, const ak__bytes *piece) {
    if (piece->len == 0) return AK_OK;
    const ak__server *srv = g->srv;
    if (!srv->has_hooks || !srv->hooks.post_process)
        return ak__bytes_append(&s->text, piece->v, piece->len);
    char *out = NULL;
    size_t len = 0;
    AK_CHECK(ak__hooks_run_text(srv->hooks.post_process, srv->hooks.user, piece->v, piece->len,
                                &out, &len));
    ak_status st = ak__bytes_append(&s->text, out, len);
    free(out);
    return st;
}

static ak_status push_logprob(ak__gen_sample *s, const ak__gen_event *e) {
    if (s->n_lps == s->cap_lps) {
        size_t cap = s->cap_lps ? 2 * s->cap_lps : 16;
        ak__oai_logprob *v = realloc(s->lps, cap * sizeof *v);
        if (!v) return AK_FAIL(AK_ERR_NO_MEMORY, "server: logprobs");
        s->lps = v;
        s->cap_lps = cap;
    }
    ak__oai_logprob *p = &s->lps[s->n_lps++];
    p->token = e->token;
    p->logprob = e->logprob;
    p->n_top = e->n_top;
    memcpy(p->top, e->top, (size_t)e->n_top * sizeof *p->top);
    p->text_offset = (uint32_t)s->detok.len;
    return AK_OK;
}

static void time_token(ak__gen *g, ak__gen_sample *s, uint64_t t) {
    if (!g->first_token_seen) {
        g->first_token_seen = 1;
        ak__metrics_ttft(&g->srv->metrics, (double)(t - g->t_start_ns) * 1e-9);
    }
    if (s->last_ns) ak__metrics_itl(&g->srv->metrics, (double)(t - s->last_ns) * 1e-9);
    s->last_ns = t;
}

static ak_status process_event(ak__gen *g, const ak__gen_event *e, ak__bytes *piece) {
    if (e->sample < 0 || e->sample >= g->req.n) return AK_OK; /* not ours: ignore */
    ak__gen_sample *s = &g->samples[e->sample];
    if (s->finish != AK_FINISH_NONE) return AK_OK;
    g->n_cached = e->n_cached;
    piece->len = 0;
    if (e->token >= 0) {
        s->n_tokens++;
        time_token(g, s, e->t_ns);
        if (g->meta.logprobs) AK_CHECK(push_logprob(s, e));
        AK_CHECK(ak__detok_push(&s->detok, e->token));
        AK_CHECK(ak__detok_take(&s->detok, 0, 0, piece));
    }
    if (e->finish != AK_FINISH_NONE) {
        AK_CHECK(ak__detok_take(&s->detok, 1, e->stop_trim, piece));
        s->finish = e->finish;
        s->status = e->status;
        g->n_done++;
    }
    return emit_piece(g, s, piece);
}

static ak_status emit_chunks(ak__gen *g);

/* Waits for and processes one batch of events, streams emitting a chunk per event (one
 * token each, as OpenAI does); -1 client gone / server stopping. */
static int advance(ak__gen *g, ak_status *st) {
    size_t n = 0;
    int rc = wait_events(g, &n);
    if (rc == -2) *st = AK_FAIL(AK_ERR_NO_MEMORY, "server: out of memory for events");
    if (rc != 0) {
        cancel(g);
        return rc == -1 ? -1 : 0;
    }
    ak__bytes piece = {NULL, 0, 0};
    for (size_t i = 0; i < n && *st == AK_OK; i++) {
        *st = process_event(g, &g->work[i], &piece);
        if (*st == AK_OK && g->req.stream) *st = emit_chunks(g);
    }
    ak__bytes_free(&piece);
    if (*st != AK_OK) cancel(g);
    return 0;
}

static void usage_of(const ak__gen *g, ak__oai_usage *u) {
    u->prompt_tokens = (uint32_t)g->n_prompt;
    u->cached_tokens = g->n_cached;
    u->completion_tokens = 0;
    for (int32_t i = 0; i < g->req.n; i++) u->completion_tokens += g->samples[i].n_tokens;
}

static ak_status sample_error(const ak__gen *g) {
    for (int32_t i = 0; i < g->req.n; i++)
        if (g->samples[i].finish == AK_FINISH_ERROR)
            return AK_FAIL(g->samples[i].status ? g->samples[i].status : AK_ERR_INTERNAL,
                           "generation failed: %s", ak_status_str(g->samples[i].status));
    return AK_OK;
}

/* ---- whole responses ----------------------------------------------------------------- */

ak_status ak__gen_run_whole(ak__gen *g, ak__bytes *body, int *http, ak__oai_error *err) {
    ak_status st = AK_OK;
    while (g->n_done < g->req.n && st == AK_OK)
        if (advance(g, &st) < 0) {
            ak__oai_error_set(err, 503, NULL, NULL, "the request was abandoned");
            *http = 503;
            return AK_ERR_REMOTE;
        }
    if (st == AK_OK) st = sample_error(g);
    if (st != AK_OK) {
        ak__oai_error_set(err, 500, NULL, NULL, "%s", ak_last_error());
        *http = 500;
        return st;
    }
    ak__oai_choice choices[AK__OAI_MAX_N];
    for (int32_t i = 0; i < g->req.n; i++) {
        const ak__gen_sample *s = &g->samples[i];
        choices[i] = (ak__oai_choice){i, s->text.v ? s->text.v : "", s->text.len, s->lps, s->n_lps,
                                      finish_name(s->finish), 0, NULL, 0, 0, 0};
    }
    if (g->tools && (st = ak__gen_tools_whole(g, choices)) != AK_OK) {
        ak__oai_error_set(err, 500, NULL, NULL, "%s", ak_last_error());
        *http = 500;
        return st;
    }
    ak__oai_usage u;
    usage_of(g, &u);
    *http = 200;
    return ak__oai_response_json(&g->meta, choices, (size_t)g->req.n, &u, body);
}

/* ---- streams ------------------------------------------------------------------------- */

static ak_status chunk(ak__gen *g, int32_t i, const char *text, size_t len, int first,
                       const char *finish) {
    ak__gen_sample *s = &g->samples[i];
    ak__oai_choice c = {i, text, len, first ? NULL : s->lps, first ? 0 : s->n_lps, finish, first,
                        NULL, 0, 0, 0};
    return ak__oai_chunk_sse(&g->meta, &c, 1, NULL, &g->out);
}

static ak_status error_event(ak__gen *g, ak_status st) {
    ak__oai_error e;
    ak__oai_error_set(&e, 500, NULL, NULL, "generation failed: %s (%s)", ak_status_str(st),
                      ak_last_error());
    AK_CHECK(ak__bytes_append(&g->out, "data: ", 6));
    AK_CHECK(ak__oai_error_json(&e, &g->out));
    return ak__bytes_append(&g->out, "\n\n", 2);
}

/* One chunk per sample with new text, logprobs or its end. */
static ak_status emit_chunks(ak__gen *g) {
    for (int32_t i = 0; i < g->req.n; i++) {
        ak__gen_sample *s = &g->samples[i];
        int ending = s->finish != AK_FINISH_NONE && !s->finished;
        if (g->tools && s->finish != AK_FINISH_ERROR) AK_CHECK(ak__gen_tools_stream(g, i, ending));
        if (!s->text.len && !s->n_lps && !ending) continue;
        if (s->finish == AK_FINISH_ERROR) {
            s->finished = 1;
            AK_CHECK(error_event(g, s->status ? s->status : AK_ERR_INTERNAL));
            continue;
        }
        if (g->req.kind == AK__OAI_CHAT && !s->started) AK_CHECK(chunk(g, i, "", 0, 1, NULL));
        s->started = 1;
        const char *finish = ending ? ak__gen_tools_finish(g, i, finish_name(s->finish)) : NULL;
        AK_CHECK(chunk(g, i, s->text.v, s->text.len, 0, finish));
        s->finished |= ending;
        s->text.len = 0;
        s->n_lps = 0;
    }
    return AK_OK;
}

static ak_status end_stream(ak__gen *g) {
    if (g->req.include_usage) {
        ak__oai_usage u;
        usage_of(g, &u);
        AK_CHECK(ak__oai_chunk_sse(&g->meta, NULL, 0, &u, &g->out));
    }
    g->stream_done = 1;
    return ak__bytes_append(&g->out, "data: [DONE]\n\n", 14);
}

long ak__gen_stream_read(ak__gen *g, char *buf, size_t max) {
    for (;;) {
        if (g->out_pos < g->out.len) {
            size_t n = g->out.len - g->out_pos < max ? g->out.len - g->out_pos : max;
            memcpy(buf, g->out.v + g->out_pos, n);
            g->out_pos += n;
            return (long)n;
        }
        g->out.len = g->out_pos = 0;
        if (g->stream_done) return 0;
        ak_status st = AK_OK;
        if (g->n_done == g->req.n) st = end_stream(g);
        else if (advance(g, &st) < 0) return -1;
        if (st != AK_OK && !g->stream_done) { /* tell the client, then end */
            cancel(g);
            if (error_event(g, st) != AK_OK || end_stream(g) != AK_OK) return -1;
        }
    }
}

/* ---- the end ------------------------------------------------------------------------- */

static void record(ak__gen *g) {
    ak__metrics *m = &g->srv->metrics;
    ak__oai_usage u;
    usage_of(g, &u);
    ak__metrics_tokens(m, g->submitted ? u.prompt_tokens : 0, g->submitted ? u.cached_tokens : 0,
                       u.completion_tokens);
    if (!g->submitted) return;
    for (int32_t i = 0; i < g->req.n; i++)
        ak__metrics_finish(m, g->samples[i].finish ? g->samples[i].finish : AK_FINISH_CANCELLED);
    ak__metrics_e2e(m, (double)(ak_now_ns() - g->t_start_ns) * 1e-9);
}

void ak__gen_release(ak__gen *g) {
    if (!g) return;
    cancel(g);
    record(g);
    pthread_mutex_lock(&g->mu);
    int last = --g->refs == 0;
    pthread_mutex_unlock(&g->mu);
    if (last) gen_free(g);
}

void ak__gen_cancel_all(ak__server *srv) {
    /* ids first, cancels after: the backend may call back into gen_free, which takes mu */
    size_t n = 0, cap = 0;
    pthread_mutex_lock(&srv->mu);
    for (ak__gen *g = srv->live; g; g = g->live_next) cap++;
    uint64_t *ids = malloc((cap ? cap : 1) * sizeof *ids);
    for (ak__gen *g = srv->live; g && ids; g = g->live_next) {
        pthread_mutex_lock(&g->mu);
        if (g->submitted && g->samples_open > 0) ids[n++] = g->engine_id;
        pthread_mutex_unlock(&g->mu);
    }
    pthread_mutex_unlock(&srv->mu);
    for (size_t i = 0; i < n; i++) srv->be.cancel(srv->be.ctx, ids[i]);
    free(ids);
}
