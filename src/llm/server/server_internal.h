/* Inside the server: the server object (server.c, the HTTP side) and one generation
 * request (gen.c: prompt → backend → events → text, streamed or whole). */
#ifndef AK_LLM_SERVER_SERVER_INTERNAL_H
#define AK_LLM_SERVER_SERVER_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include "llm/server/access_log.h"
#include "llm/server/detok.h"
#include "llm/server/metrics.h"
#include "llm/server/oai.h"
#include "llm/server/server.h"
#include "llm/server/server_extras.h"

struct MHD_Daemon;
typedef struct ak__gen ak__gen;
typedef struct ak__guard ak__guard;

struct ak__server {
    struct MHD_Daemon *mhd;
    ak__server_backend be;
    const ak_tokenizer *tok;
    int32_t n_ctx, n_vocab;
    char *name;
    const char *chat_format;       /* "jinja" (the model's template) or a preset's name */
    ak_chat_template *chat_template; /* the model's template compiled, NULL with a preset */
    char *bos_text, *eos_text;     /* the model's texts for chat templates ("" if none) */
    int32_t turn_end_id;           /* the format's end-of-turn token, -1 if none */
    size_t max_body;
    int32_t max_concurrent;
    ak_llm_hooks hooks;
    int has_hooks;
    int64_t started;               /* unix time, for /v1/models */
    ak__metrics metrics;
    pthread_mutex_t mu;            /* guards the fields below */
    int32_t in_flight;             /* generation requests holding a slot */
    ak__gen *live;                 /* every request not yet freed */
    uint64_t next_id;
    int stopping;                  /* read without the lock too (atomic) */
    int port;
    /* tools: the call format of the model's template (tools.c) */
    ak__tool_format tool_format;
    ak__server_embedder embedder;  /* embeddings (embeddings.c); zero = none */
    /* network security and shutdown (net_guard.c, auth.c, tls.c, access_log.c) */
    ak__guard *guard;
    ak__auth auth;
    ak__tls tls;
    ak__access_log access;
    int public_health, public_metrics;
    int draining;                  /* shutdown began: new requests get 503 (atomic) */
    int loading;                   /* listening before the model is attached: only /health
                                    * and /metrics are served (atomic; cleared with release
                                    * order once every model field below is set) */
    int drain_cancelled;           /* the drain time ran out: streams end with an error */
    uint64_t next_request;         /* request ids (atomic) */
};

/* One event as the engine reported it, copied on the engine thread. */
typedef struct ak__gen_event {
    int32_t sample, token;
    float logprob;
    int32_t n_top;
    ak_llm_logprob top[AK__OAI_MAX_LOGPROBS];
    ak_finish_reason finish;
    ak_status status;
    uint32_t stop_trim, n_cached;
    uint64_t t_ns;
} ak__gen_event;

typedef struct ak__gen_sample {
    ak__detok detok;
    ak__bytes text;              /* output not yet sent (stream) or all of it (whole) */
    ak__oai_logprob *lps;        /* tokens not yet sent / all of them */
    size_t n_lps, cap_lps;
    uint32_t n_tokens;
    uint64_t last_ns;            /* time of the previous token */
    ak_finish_reason finish;
    ak_status status;
    int started;                 /* chat stream: the role chunk went out */
    int finished;                /* its finish chunk went out / was recorded */
} ak__gen_sample;

struct ak__gen {
    ak__server *srv;
    ak__oai_request req;
    ak__oai_meta meta;
    char id[48];
    int32_t *prompt;
    size_t n_prompt;
    int32_t stop_ids[64];
    size_t n_stop_ids;
    int32_t max_tokens;
    int fd;                      /* the client's socket, polled for a hang-up; -1 = none */
    /* shared with the engine thread, under mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    ak__gen_event *q;
    size_t q_len, q_cap;
    int q_oom;
    int refs;                    /* the connection's + the engine's until its last event */
    int samples_open;
    /* the connection thread's own */
    ak__gen_event *work;
    size_t work_cap;
    uint64_t engine_id;
    int submitted, cancelled;
    ak__gen_sample samples[AK__OAI_MAX_N];
    int32_t n_done;
    uint64_t t_start_ns, checked_ns; /* checked: the last look at the client and the server */
    int first_token_seen;
    uint32_t n_cached;
    ak__bytes out;               /* stream: SSE bytes not yet handed to the socket */
    size_t out_pos;
    int stream_done;
    ak__gen *live_prev, *live_next;
    /* constrained decoding: held from the grammar cache until gen_free */
    const ak_llm_grammar *grammar;
    /* tools: call parsers and the forced-call grammar (gen_tools.c), NULL without tools */
    struct ak__gen_tools *tools;
};

/* Builds the request from a parsed body: the prompt is rendered (chat), pre-processed and
 * tokenized, limits checked. On a client error returns AK_ERR_INVALID_ARG with `err`
 * filled; takes `req` over (also on failure). */
ak_status ak__gen_create(ak__server *srv, ak__oai_request *req, int fd, ak__gen **out,
                         ak__oai_error *err);
/* Hands the request to the backend. */
ak_status ak__gen_submit(ak__gen *g, ak__oai_error *err);
/* Whole response: waits for every sample, then writes the JSON body (or the error). */
ak_status ak__gen_run_whole(ak__gen *g, ak__bytes *body, int *http, ak__oai_error *err);
/* Stream: blocks until SSE bytes are ready, copies up to `max` of them; 0 = the stream
 * ended, -1 = it failed (client gone, server stopping). */
long ak__gen_stream_read(ak__gen *g, char *buf, size_t max);
/* The connection is done with it: cancels what still runs, records metrics, drops its
 * reference. */
void ak__gen_release(ak__gen *g);
/* Server stop: cancels every request in flight. */
void ak__gen_cancel_all(ak__server *srv);

/* ---- tools (gen_tools.c) ----------------------------------------------------------------- */

/* Refuses what the chat format cannot do with tools (a preset, an unknown format), makes
 * the call parsers and, for forced calls, the grammar. After the prompt is built. */
ak_status ak__gen_tools_setup(ak__gen *g, ak__oai_error *err);
/* Whole response: each choice's text becomes its content, its calls and finish_reason
 * "tool_calls" are added. */
ak_status ak__gen_tools_whole(ak__gen *g, ak__oai_choice *choices);
/* Stream: sample i's new text goes through its parser (content back into s->text); chunks
 * for new calls are written first. */
ak_status ak__gen_tools_stream(ak__gen *g, int32_t i, int ending);
/* finish_reason of sample i: "tool_calls" when it made calls and stopped, else `name`. */
const char *ak__gen_tools_finish(const ak__gen *g, int32_t i, const char *name);
/* The forced-call grammar for the engine, or NULL. */
const ak_llm_grammar *ak__gen_tools_grammar(const ak__gen *g);
void ak__gen_tools_free(ak__gen *g);

#endif /* AK_LLM_SERVER_SERVER_INTERNAL_H */
