/* `ak serve`'s HTTP server (internal API): an OpenAI-compatible front end over a
 * generation backend — the LLM engine in `ak serve` (ak__server_engine_backend), or a
 * scripted one in the tests. libmicrohttpd runs one thread per connection; those threads
 * tokenize, detokenize, run the hooks and write to clients; the backend's event callback
 * only queues events (see gen.c). */
#ifndef AK_LLM_SERVER_SERVER_H
#define AK_LLM_SERVER_SERVER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "accelkit/llm.h"

typedef struct ak__server ak__server;

/* What the server needs from a generator. submit/cancel follow ak_llm_engine_submit /
 * ak_llm_engine_cancel: after a successful submit, every sample gets exactly one event
 * with finish != AK_FINISH_NONE (also after a cancel), on any thread. */
typedef struct ak__server_backend {
    ak_status (*submit)(void *ctx, const ak_llm_request *r, uint64_t *id);
    ak_status (*cancel)(void *ctx, uint64_t id);
    ak_status (*stats)(void *ctx, ak_llm_engine_stats *s); /* optional: NULL = no gauges */
    void *ctx;
} ak__server_backend;

/* The engine as a backend (the engine must outlive the server). */
ak__server_backend ak__server_engine_backend(ak_llm_engine *e);

/* embeddings: what answers /v1/embeddings (embed NULL: the endpoint answers 404) */
typedef struct ak__server_embedder {
    ak_status (*embed)(void *ctx, const int32_t *ids, size_t n, float *out, size_t cap);
    void *ctx;
    int32_t dim, pooling;   /* pooling: ak_llm_model_embed's (0 none is refused) */
    int embedding_only;     /* an encoder: /v1/completions and /v1/chat/completions refused */
} ak__server_embedder;

/* embeddings: the model as the embedder (the model must outlive the server). */
ak__server_embedder ak__server_model_embedder(ak_llm_model *m);

typedef struct ak__server_model {
    const char *name;              /* the model id of /v1/models and responses (copied) */
    const ak_tokenizer *tokenizer; /* borrowed for the server's life */
    int32_t n_ctx;                 /* prompt + max_tokens limit */
    const char *chat_template;     /* the model's Jinja template, NULL if none (read at start) */
} ak__server_model;

typedef struct ak__server_options {
    const char *host;           /* address to bind (default 127.0.0.1) */
    int port;                   /* 0 = any free port; see ak__server_port */
    size_t max_body;            /* request bodies above this get 413 (default 1 MiB) */
    int32_t max_concurrent;     /* generation requests in flight; more get 429 (default 64) */
    const char *chat_format;    /* overrides the template's format (NULL = detect, chatml) */
    const ak_llm_hooks *hooks;  /* NULL = none (copied) */
    /* network security and the access log; zeros = the defaults below */
    const char *api_key;        /* Bearer key clients must send, or NULL */
    const char *api_key_file;   /* more keys, one a line, or NULL */
    int public_health, public_metrics; /* those answer without a key */
    const char *tls_cert_file, *tls_key_file; /* PEM files: HTTPS (both or neither) */
    int32_t max_connections;    /* sockets for any request (default 2048) */
    int32_t reserved_health;    /* more sockets only for GET /health (default 16; -1 = 0) */
    int32_t max_per_client;     /* sockets per client address (default 256; -1 = no limit) */
    int limit_loopback;         /* the per-client limit applies to 127.0.0.1 / ::1 too */
    double request_timeout_s;   /* header + body within this (default 10 s) */
    FILE *access_log;           /* NULL = no access log */
    int access_log_json;        /* JSON lines instead of text */
} ak__server_options;

#define AK__SERVER_DEFAULT_MAX_CONNECTIONS 2048
#define AK__SERVER_DEFAULT_RESERVED_HEALTH 16
#define AK__SERVER_DEFAULT_PER_CLIENT 256
#define AK__SERVER_DEFAULT_REQUEST_TIMEOUT_S 10.0

#define AK__SERVER_OPTIONS_INIT \
    {.host = "127.0.0.1", .port = 8080, .max_body = (size_t)1 << 20, .max_concurrent = 64}

/* Binds and starts serving; returns once the socket listens. */
ak_status ak__server_start(const ak__server_backend *backend, const ak__server_model *model,
                           const ak__server_options *options, ak__server **out);
/* The port it listens on (the chosen one when options.port was 0). */
int ak__server_port(const ak__server *s);
/* The chat format in use ("chatml", ...). */
const char *ak__server_chat_format(const ak__server *s);
/* embeddings: ak__server_start with /v1/embeddings answered by `embedder`; an
 * embedding-only one needs no generation backend (backend may be all NULL). */
ak_status ak__server_start_embeddings(const ak__server_backend *backend,
                                      const ak__server_model *model,
                                      const ak__server_options *options,
                                      const ak__server_embedder *embedder, ak__server **out);
/* Starting in two steps, so that clients can poll /health while the model loads:
 * ak__server_listen binds and answers /health "loading" (503), /metrics, and 503 to
 * everything else; ak__server_attach then gives it the model and backend (the same
 * arguments as ak__server_start_embeddings) and /health turns "ready". */
ak_status ak__server_listen(const ak__server_options *options, ak__server **out);
ak_status ak__server_attach(ak__server *s, const ak__server_backend *backend,
                            const ak__server_model *model, const ak__server_options *options,
                            const ak__server_embedder *embedder);
/* Shutdown, first part: new requests get 503 and /health says "draining"; waits up to
 * `seconds` for the generation requests in flight to finish, then cancels the rest
 * (their streams end with an error event and [DONE]). Returns how many were cancelled. */
int ak__server_drain(ak__server *s, double seconds);
/* Stops listening, cancels requests in flight, waits for their threads, frees. */
ak_status ak__server_stop(ak__server *s);

#endif /* AK_LLM_SERVER_SERVER_H */
