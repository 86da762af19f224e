/* The HTTP side of `ak serve`: libmicrohttpd with one thread per connection, routing,
 * API keys, request bodies under a size limit, the concurrency limit (429), draining at
 * shutdown, the access log, and the small endpoints (/health, /v1/models, /metrics,
 * /tokenize, /detokenize). Generation requests are handed to gen.c; streams are MHD
 * callback responses that block on the request's event queue. Connection admission and
 * request deadlines live in net_guard.c.
 *
 * Why /health used to fail under slow-header clients: every connection holds a thread
 * and a slot of MHD's connection limit (then 2 x max_concurrent + 64), MHD's timeout is
 * an idle one that each trickled byte restarts, and nothing limited one client — so a few
 * hundred trickling sockets held every slot for as long as they liked and MHD refused
 * the rest, /health included. Now a deadline ends each request's reception, one client
 * address gets at most --max-conns-per-client sockets, and slots are kept for /health. */
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <microhttpd.h>

#include "core/check.h"
#include "llm/server/embeddings.h"
#include "llm/server/net_guard.h"
#include "llm/server/server_extras.h"
#include "llm/server/server_internal.h"

#define STREAM_BLOCK 16384   /* bytes MHD asks a stream for at most */
#define IDLE_TIMEOUT_S 120   /* idle keep-alive connections are closed after this */
#define STOP_WAIT_MS 5000    /* at stop, how long the engine gets to end cancelled requests */

typedef struct stream_ctx stream_ctx;

/* One request on a connection: made when its request line arrives (the URI log callback
 * of MHD), freed when MHD reports it completed. */
typedef struct conn {
    int routed;     /* the access handler saw it */
    int ep;         /* AK__EP_* */
    int slot;       /* holds one of max_concurrent */
    int too_big;    /* body over max_body: the rest is discarded, then 413 */
    ak__bytes body;
    /* for the access log */
    uint64_t t_start_ns;
    char method[16];
    char *path;
    char request_id[32];
    char *user;
    int status;         /* the answer's HTTP status, 0 = none */
    uint64_t bytes_out; /* body bytes handed to MHD */
    const char *reject; /* a reason it was refused, for the log */
    stream_ctx *stream; /* a stream response still reading through this request */
} conn;

/* With one thread per connection, the request a thread is serving is its own: MHD's
 * logger (which gets no connection) and respond() find it here. */
static _Thread_local conn *t_conn;

static uint64_t mono_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* ---- answers ------------------------------------------------------------------------- */

/* `allow`: the Allow header of a 405; a 401 gets WWW-Authenticate instead. */
static enum MHD_Result respond(ak__server *s, struct MHD_Connection *c, int ep, int http,
                               const char *type, const ak__bytes *body, const char *allow) {
    struct MHD_Response *r = MHD_create_response_from_buffer(
        body->len, body->len ? body->v : (void *)"", MHD_RESPMEM_MUST_COPY);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    if (allow) MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
    if (http == 401) MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
    conn *st = t_conn;
    if (st) {
        MHD_add_response_header(r, "X-Request-Id", st->request_id);
        st->status = http;
        st->bytes_out = body->len;
    }
    ak__guard_request_received(c);
    enum MHD_Result ok = MHD_queue_response(c, (unsigned)http, r);
    MHD_destroy_response(r);
    ak__metrics_request(&s->metrics, ep, http);
    return ok;
}

static enum MHD_Result respond_error(ak__server *s, struct MHD_Connection *c, int ep,
                                     const ak__oai_error *e, const char *allow) {
    ak__bytes b = {NULL, 0, 0};
    enum MHD_Result ok = MHD_NO;
    if (ak__oai_error_json(e, &b) == AK_OK)
        ok = respond(s, c, ep, e->http, "application/json", &b, allow);
    ak__bytes_free(&b);
    return ok;
}

static enum MHD_Result fail(ak__server *s, struct MHD_Connection *c, int ep, int http,
                            const char *param, const char *code, const char *msg) {
    ak__oai_error e;
    ak__oai_error_set(&e, http, param, code, "%s", msg);
    return respond_error(s, c, ep, &e, NULL);
}

static enum MHD_Result respond_json(ak__server *s, struct MHD_Connection *c, int ep,
                                    ak__bytes *b, ak_status st) {
    enum MHD_Result ok = st == AK_OK ? respond(s, c, ep, 200, "application/json", b, NULL)
                                     : fail(s, c, ep, 500, NULL, NULL, "out of memory");
    ak__bytes_free(b);
    return ok;
}

/* ---- GET endpoints ------------------------------------------------------------------- */

static char *models_json(const ak__server *s) {
    cJSON *root = cJSON_CreateObject();
    int ok = cJSON_AddStringToObject(root, "object", "list") != NULL;
    cJSON *data = cJSON_AddArrayToObject(root, "data");
    cJSON *m = cJSON_CreateObject();
    if (!data || !m || !cJSON_AddItemToArray(data, m)) {
        cJSON_Delete(m); /* not attached */
        m = NULL;
    }
    ok = ok && m && cJSON_AddStringToObject(m, "id", s->name) &&
         cJSON_AddStringToObject(m, "object", "model") &&
         cJSON_AddNumberToObject(m, "created", (double)s->started) &&
         cJSON_AddStringToObject(m, "owned_by", "accelkit") &&
         cJSON_AddNumberToObject(m, "max_model_len", s->n_ctx);
    char *text = ok ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    return text;
}

static enum MHD_Result get_models(ak__server *s, struct MHD_Connection *c) {
    ak__bytes b = {NULL, 0, 0};
    char *text = models_json(s);
    ak_status st = text ? ak__bytes_append(&b, text, strlen(text)) : AK_ERR_NO_MEMORY;
    cJSON_free(text);
    return respond_json(s, c, AK__EP_MODELS, &b, st);
}

static enum MHD_Result get_metrics(ak__server *s, struct MHD_Connection *c) {
    ak__bytes b = {NULL, 0, 0};
    ak_llm_engine_stats stats;
    const ak_llm_engine_stats *sp = NULL;
    if (s->be.stats && s->be.stats(s->be.ctx, &stats) == AK_OK) sp = &stats;
    ak_status st = ak__metrics_render(&s->metrics, sp, &b);
    enum MHD_Result ok = st == AK_OK
        ? respond(s, c, AK__EP_METRICS, 200, "text/plain; version=0.0.4; charset=utf-8", &b, NULL)
        : fail(s, c, AK__EP_METRICS, 500, NULL, NULL, "out of memory");
    ak__bytes_free(&b);
    return ok;
}

/* {"status": "ready"} 200; "loading" 503 while the model loads, "draining" 503 once
 * shutdown began (load balancers keep the instance out until it is ready, and take it
 * out while its running requests finish). */
static enum MHD_Result get_health(ak__server *s, struct MHD_Connection *c) {
    ak__bytes b = {NULL, 0, 0};
    int draining = __atomic_load_n(&s->draining, __ATOMIC_ACQUIRE) ||
                   __atomic_load_n(&s->stopping, __ATOMIC_ACQUIRE);
    int loading = !draining && __atomic_load_n(&s->loading, __ATOMIC_ACQUIRE);
    const char *text = draining  ? "{\"status\":\"draining\"}"
                       : loading ? "{\"status\":\"loading\"}"
                                 : "{\"status\":\"ready\"}";
    ak_status st = ak__bytes_append(&b, text, strlen(text));
    if (st != AK_OK || (!draining && !loading)) return respond_json(s, c, AK__EP_HEALTH, &b, st);
    enum MHD_Result ok = respond(s, c, AK__EP_HEALTH, 503, "application/json", &b, NULL);
    ak__bytes_free(&b);
    return ok;
}

/* /tokenize and /detokenize (tokenize_ep.c). */
static enum MHD_Result tokenizer_endpoint(ak__server *s, struct MHD_Connection *c, conn *st) {
    ak__bytes b = {NULL, 0, 0};
    ak__oai_error err;
    ak_status rc = st->ep == AK__EP_TOKENIZE
                       ? ak__tokenize_json(s->tok, st->body.v, st->body.len, &b, &err)
                       : ak__detokenize_json(s->tok, s->n_vocab, st->body.v, st->body.len, &b, &err);
    if (rc == AK_ERR_INVALID_ARG) {
        ak__bytes_free(&b);
        return respond_error(s, c, st->ep, &err, NULL);
    }
    return respond_json(s, c, st->ep, &b, rc);
}

/* ---- generation endpoints ------------------------------------------------------------ */

/* A stream response's state: the request, and the conn whose byte count it feeds (the
 * two may end in either order; both run on the connection's thread). */
struct stream_ctx {
    ak__gen *g;
    conn *st;
};

/* Gives back the request's generation slot once its generation is over — before the answer
 * is sent, not when MHD reports the connection's request complete: a client that posts
 * again as soon as it has its answer must not find its own finished request still counted
 * (a spurious 429). Runs on the connection's thread; idempotent. */
static void release_slot(ak__server *s, conn *st) {
    if (!st || !st->slot) return;
    st->slot = 0;
    pthread_mutex_lock(&s->mu);
    s->in_flight--;
    pthread_mutex_unlock(&s->mu);
    ak__metrics_in_flight(&s->metrics, -1);
}

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    stream_ctx *x = cls;
    long n = ak__gen_stream_read(x->g, buf, max);
    if (n > 0 && x->st) x->st->bytes_out += (uint64_t)n;
    if (n <= 0) release_slot(x->g->srv, x->st); /* the stream ended */
    return n > 0    ? (ssize_t)n
           : n == 0 ? MHD_CONTENT_READER_END_OF_STREAM
                    : MHD_CONTENT_READER_END_WITH_ERROR;
}

/* MHD is done with the stream (finished, or the client is gone): the request goes. */
static void stream_free(void *cls) {
    stream_ctx *x = cls;
    if (x->st) x->st->stream = NULL;
    ak__gen_release(x->g);
    free(x);
}

static enum MHD_Result start_stream(ak__server *s, struct MHD_Connection *c, int ep, ak__gen *g) {
    stream_ctx *x = calloc(1, sizeof *x);
    struct MHD_Response *r = x ? MHD_create_response_from_callback(
                                     MHD_SIZE_UNKNOWN, STREAM_BLOCK, stream_reader, x, stream_free)
                               : NULL;
    if (!r) {
        free(x);
        ak__gen_release(g);
        return fail(s, c, ep, 500, NULL, NULL, "out of memory");
    }
    x->g = g;
    x->st = t_conn;
    if (t_conn) {
        t_conn->stream = x;
        t_conn->status = 200;
        MHD_add_response_header(r, "X-Request-Id", t_conn->request_id);
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    MHD_add_response_header(r, "X-Accel-Buffering", "no");
    enum MHD_Result ok = MHD_queue_response(c, 200, r);
    MHD_destroy_response(r); /* stream_free runs when MHD lets go of it */
    ak__metrics_request(&s->metrics, ep, 200);
    return ok;
}

static enum MHD_Result run_whole(ak__server *s, struct MHD_Connection *c, int ep, ak__gen *g) {
    ak__bytes b = {NULL, 0, 0};
    ak__oai_error err;
    int http = 500;
    ak_status st = ak__gen_run_whole(g, &b, &http, &err);
    ak__gen_release(g);
    release_slot(s, t_conn);
    if (st == AK_ERR_REMOTE) { /* the client left: nobody to answer */
        ak__bytes_free(&b);
        if (t_conn) t_conn->status = 499;
        ak__metrics_request(&s->metrics, ep, 499);
        return MHD_NO;
    }
    enum MHD_Result ok = st == AK_OK ? respond(s, c, ep, 200, "application/json", &b, NULL)
                                     : respond_error(s, c, ep, &err, NULL);
    ak__bytes_free(&b);
    return ok;
}

static enum MHD_Result generate(ak__server *s, struct MHD_Connection *c, conn *st) {
    ak__oai_kind kind = st->ep == AK__EP_CHAT ? AK__OAI_CHAT : AK__OAI_COMPLETION;
    ak__oai_request req;
    ak__oai_error err;
    ak_status rc = ak__oai_parse(kind, st->body.v, st->body.len, s->n_vocab, &req, &err);
    if (rc != AK_OK) {
        ak__oai_request_free(&req);
        if (rc != AK_ERR_INVALID_ARG)
            ak__oai_error_set(&err, 500, NULL, NULL, "%s", ak_last_error());
        return respond_error(s, c, st->ep, &err, NULL);
    }
    if (req.user && !st->user) st->user = strdup(req.user); /* for the access log */
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    ak__gen *g = NULL;
    if (ak__gen_create(s, &req, ci ? ci->connect_fd : -1, &g, &err) != AK_OK)
        return respond_error(s, c, st->ep, &err, NULL);
    if (ak__gen_submit(g, &err) != AK_OK) {
        ak__gen_release(g);
        return respond_error(s, c, st->ep, &err, NULL);
    }
    return g->req.stream ? start_stream(s, c, st->ep, g) : run_whole(s, c, st->ep, g);
}

/* embeddings: the whole answer at once (embeddings.c) */
static enum MHD_Result post_embeddings(ak__server *s, struct MHD_Connection *c, conn *st) {
    ak__bytes b = {NULL, 0, 0};
    ak__oai_error err;
    enum MHD_Result ok =
        ak__embeddings_handle(s, st->body.v, st->body.len, &b, &err) == AK_OK
            ? respond(s, c, st->ep, 200, "application/json", &b, NULL)
            : respond_error(s, c, st->ep, &err, NULL);
    ak__bytes_free(&b);
    return ok;
}

/* ---- routing and the body ------------------------------------------------------------ */

static const struct route {
    const char *path, *method;
    int ep;
} k_routes[] = {
    {"/v1/completions", "POST", AK__EP_COMPLETIONS}, {"/v1/chat/completions", "POST", AK__EP_CHAT},
    {"/v1/models", "GET", AK__EP_MODELS},            {"/health", "GET", AK__EP_HEALTH},
    {"/metrics", "GET", AK__EP_METRICS},
    {"/v1/embeddings", "POST", AK__EP_EMBEDDINGS}, /* embeddings.c */
    {"/tokenize", "POST", AK__EP_TOKENIZE},          {"/detokenize", "POST", AK__EP_DETOKENIZE},
};

static const struct route *route_of(const char *url) {
    for (size_t i = 0; i < sizeof k_routes / sizeof k_routes[0]; i++)
        if (!strcmp(url, k_routes[i].path)) return &k_routes[i];
    return NULL;
}

static int method_ok(const struct route *r, const char *method) {
    return !strcmp(method, r->method) || (!strcmp(r->method, "GET") && !strcmp(method, "HEAD"));
}

static enum MHD_Result reject(ak__server *s, struct MHD_Connection *c, conn *st, ak__reject why,
                             int http, const char *code, const char *msg) {
    ak__metrics_reject(&s->metrics, why);
    st->reject = ak__reject_name(why);
    return fail(s, c, st->ep, http, NULL, code, msg);
}

static int is_public(const ak__server *s, int ep) {
    return (ep == AK__EP_HEALTH && s->public_health) || (ep == AK__EP_METRICS && s->public_metrics);
}

/* Refusals before routing: a slot kept for /health used for something else, the API
 * key, shutdown. */
static enum MHD_Result gate(ak__server *s, struct MHD_Connection *c, conn *st, int *done) {
    *done = 1;
    if (ak__guard_on_reserved_slot(c) && st->ep != AK__EP_HEALTH)
        return reject(s, c, st, AK__REJECT_RESERVED_SLOT, 503, "server_busy",
                      "The server holds its connection limit; only GET /health is served on "
                      "this connection.");
    if (!is_public(s, st->ep) &&
        !ak__auth_check(&s->auth, MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                              MHD_HTTP_HEADER_AUTHORIZATION)))
        return reject(s, c, st, AK__REJECT_AUTH, 401, "invalid_api_key",
                      "Incorrect or missing API key: send it as 'Authorization: Bearer KEY'.");
    if (__atomic_load_n(&s->draining, __ATOMIC_ACQUIRE) && st->ep != AK__EP_HEALTH &&
        st->ep != AK__EP_METRICS)
        return reject(s, c, st, AK__REJECT_DRAINING, 503, "server_shutting_down",
                      "The server is shutting down and takes no new requests.");
    if (__atomic_load_n(&s->loading, __ATOMIC_ACQUIRE) && st->ep != AK__EP_HEALTH &&
        st->ep != AK__EP_METRICS)
        return reject(s, c, st, AK__REJECT_LOADING, 503, "model_loading",
                      "The model is still loading; GET /health says \"ready\" once it is served.");
    *done = 0;
    return MHD_YES;
}

/* The first call (headers read): refusals that need no body. */
static enum MHD_Result first_call(ak__server *s, struct MHD_Connection *c, const char *url,
                                  const char *method, conn *st) {
    const struct route *r = route_of(url);
    st->ep = r ? r->ep : AK__EP_OTHER;
    int done = 0;
    enum MHD_Result g = gate(s, c, st, &done);
    if (done) return g;
    char msg[256];
    if (!r) {
        snprintf(msg, sizeof msg, "Invalid URL (%s %.200s)", method, url);
        return fail(s, c, st->ep, 404, NULL, "not_found", msg);
    }
    if (!method_ok(r, method)) {
        ak__oai_error e;
        ak__oai_error_set(&e, 405, NULL, "method_not_allowed",
                          "Method %s is not allowed on %s (use %s)", method, r->path, r->method);
        return respond_error(s, c, st->ep, &e, r->method);
    }
    if (s->embedder.embedding_only && (st->ep == AK__EP_COMPLETIONS || st->ep == AK__EP_CHAT)) {
        snprintf(msg, sizeof msg, "The model '%.100s' is an embedding model: it serves "
                 "/v1/embeddings only, not %s", s->name, r->path);
        return fail(s, c, st->ep, 400, "model", "embedding_model", msg);
    }
    if (!strcmp(r->method, "GET")) return MHD_YES;
    const char *cl =
        MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl && strtoull(cl, NULL, 10) > s->max_body) {
        snprintf(msg, sizeof msg, "The request body is larger than the limit of %zu bytes",
                 s->max_body);
        return reject(s, c, st, AK__REJECT_BODY_TOO_LARGE, 413, "request_too_large", msg);
    }
    if (st->ep != AK__EP_COMPLETIONS && st->ep != AK__EP_CHAT) return MHD_YES;
    pthread_mutex_lock(&s->mu);
    int full = s->in_flight >= s->max_concurrent;
    if (!full) s->in_flight++;
    pthread_mutex_unlock(&s->mu);
    if (full) {
        snprintf(msg, sizeof msg, "The server is busy: %d requests are in flight",
                 s->max_concurrent);
        return fail(s, c, st->ep, 429, NULL, "rate_limit_exceeded", msg);
    }
    st->slot = 1;
    ak__metrics_in_flight(&s->metrics, 1);
    return MHD_YES;
}

static enum MHD_Result take_body(ak__server *s, conn *st, const char *data, size_t *size) {
    if (!st->too_big && st->body.len + *size > s->max_body) {
        st->too_big = 1; /* MHD cannot answer mid-upload: discard, answer at the end */
        ak__bytes_free(&st->body);
    }
    if (!st->too_big && ak__bytes_append(&st->body, data, *size) != AK_OK) return MHD_NO;
    *size = 0;
    return MHD_YES;
}

static conn *conn_new(ak__server *s) {
    conn *st = calloc(1, sizeof *st);
    if (!st) return NULL;
    st->t_start_ns = mono_ns();
    uint64_t n = __atomic_add_fetch(&s->next_request, 1, __ATOMIC_RELAXED);
    snprintf(st->request_id, sizeof st->request_id, "req-%llx-%llu",
             (unsigned long long)s->started, (unsigned long long)n);
    return st;
}

/* MHD_OPTION_URI_LOG_CALLBACK: the request line arrived; its conn is made here (so the
 * access log sees also the requests MHD refuses itself) and becomes the handler's con_cls. */
static void *on_request_line(void *cls, const char *uri, struct MHD_Connection *c) {
    conn *st = conn_new(cls);
    if (st) st->path = strdup(uri ? uri : "");
    ak__guard_request_line(c);
    t_conn = st;
    return st;
}

static enum MHD_Result dispatch(ak__server *s, struct MHD_Connection *c, conn *st) {
    ak__guard_request_received(c); /* answering can take long: no deadline now */
    switch (st->ep) {
    case AK__EP_MODELS: return get_models(s, c);
    case AK__EP_HEALTH: return get_health(s, c);
    case AK__EP_METRICS: return get_metrics(s, c);
    case AK__EP_TOKENIZE:
    case AK__EP_DETOKENIZE: return tokenizer_endpoint(s, c, st);
    case AK__EP_EMBEDDINGS: return post_embeddings(s, c, st);
    default: return generate(s, c, st);
    }
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *data,
                                  size_t *size, void **con_cls) {
    (void)version;
    ak__server *s = cls;
    conn *st = *con_cls;
    if (!st) { /* no request-line callback ran (out of memory there) */
        st = conn_new(s);
        if (!st) return MHD_NO;
        *con_cls = st;
    }
    t_conn = st;
    if (!st->routed) {
        st->routed = 1;
        snprintf(st->method, sizeof st->method, "%s", method);
        return first_call(s, c, url, method, st);
    }
    if (*size) return take_body(s, st, data, size);
    if (st->too_big) {
        char msg[128];
        snprintf(msg, sizeof msg, "The request body is larger than the limit of %zu bytes",
                 s->max_body);
        return reject(s, c, st, AK__REJECT_BODY_TOO_LARGE, 413, "request_too_large", msg);
    }
    return dispatch(s, c, st);
}

static void access_log(ak__server *s, struct MHD_Connection *c, const conn *st) {
    ak__access_entry e = {
        .client = ak__guard_client(c),
        .method = st->method[0] ? st->method : NULL,
        .path = st->path,
        .status = st->status,
        .bytes = st->bytes_out,
        .latency_s = (double)(mono_ns() - st->t_start_ns) * 1e-9,
        .request_id = st->request_id,
        .user = st->user,
        .rejected = st->reject != NULL,
        .reason = st->reject,
    };
    ak__access_log_write(&s->access, &e);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
    (void)toe;
    ak__server *s = cls;
    conn *st = *con_cls;
    ak__guard_request_done(c);
    if (!st) return;
    release_slot(s, st);
    access_log(s, c, st);
    if (st->stream) st->stream->st = NULL;
    if (t_conn == st) t_conn = NULL;
    ak__bytes_free(&st->body);
    free(st->path);
    free(st->user);
    free(st);
    *con_cls = NULL;
}

/* MHD answers some requests itself (431 header too large, 400 unparsable, 413, 505...)
 * and says so only in its log: "... (HTTP response code is NNN ...". Those are counted
 * here, and noted on the thread's request for its access log line. */
static void count_mhd_refusal(ak__server *s, const char *line) {
    const char *p = strstr(line, "HTTP response code is ");
    if (!p) return;
    int code = atoi(p + 22);
    if (code < 400) return;
    ak__reject why = code == 431   ? AK__REJECT_HEADER_TOO_LARGE
                     : code == 413 ? AK__REJECT_BODY_TOO_LARGE
                                   : AK__REJECT_MALFORMED;
    ak__metrics_reject(&s->metrics, why);
    conn *st = t_conn;
    if (st && !st->status) {
        st->status = code;
        st->reject = ak__reject_name(why);
        return;
    }
    ak__access_entry e = {.status = code, .rejected = 1, .reason = ak__reject_name(why)};
    ak__access_log_write(&s->access, &e);
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap) {
    char line[512];
    vsnprintf(line, sizeof line, fmt, ap);
    size_t n = strlen(line);
    if (n && line[n - 1] == '\n') line[n - 1] = '\0';
    count_mhd_refusal(cls, line);
    AK_LOG_DEBUG(AK_SUBSYS_LLM, "http: %s", line);
}

/* ---- start and stop ------------------------------------------------------------------ */

static char *token_text_copy(const ak_tokenizer *tok, int32_t id) {
    const char *text = "";
    size_t len = 0;
    if (id >= 0 && ak_tokenizer_token_text(tok, id, &text, &len) != AK_OK) len = 0;
    char *copy = malloc(len + 1);
    if (copy) {
        memcpy(copy, text, len);
        copy[len] = '\0';
    }
    return copy;
}

/* The token that ends a turn in `format`, when the vocabulary has it as one token (chat
 * requests stop on it besides EOS). */
static int32_t turn_end_token(const ak_tokenizer *tok, const char *format) {
    static const char *const k_markers[][2] = {{"chatml", "<|im_end|>"},
                                               {"llama-3", "<|eot_id|>"},
                                               {"gemma", "<end_of_turn>"},
                                               {"phi-3", "<|end|>"}};
    for (size_t i = 0; i < sizeof k_markers / sizeof k_markers[0]; i++) {
        if (strcmp(format, k_markers[i][0])) continue;
        int32_t ids[32];
        size_t n = 0;
        const char *m = k_markers[i][1];
        if (ak_tokenizer_encode(tok, m, strlen(m), AK_TOK_PARSE_SPECIAL, ids, 32, &n) == AK_OK &&
            n == 1)
            return ids[0];
    }
    return -1;
}

static ak_status setup_model(ak__server *s, const ak__server_model *m,
                             const ak__server_options *o) {
    ak_tokenizer_info info;
    AK_CHECK(ak_tokenizer_get_info(m->tokenizer, &info));
    s->tok = m->tokenizer;
    s->n_vocab = info.n_vocab;
    s->n_ctx = m->n_ctx;
    s->name = strdup(m->name ? m->name : "model");
    s->bos_text = token_text_copy(m->tokenizer, info.bos);
    s->eos_text = token_text_copy(m->tokenizer, info.eos);
    if (!s->name || !s->bos_text || !s->eos_text)
        return AK_FAIL(AK_ERR_NO_MEMORY, "server: model names");
    if (o->chat_format) { /* a preset chosen by name */
        size_t len = 0;
        if (ak_chat_render(o->chat_format, NULL, 0, 1, NULL, NULL, NULL, 0, &len) ==
                AK_ERR_INVALID_ARG &&
            len == 0)
            return AK_FAIL(AK_ERR_INVALID_ARG,
                           "unknown chat format '%s' (llama-2, llama-3, chatml, "
                           "mistral, zephyr, gemma, phi-3)",
                           o->chat_format);
        s->chat_format = o->chat_format;
    } else if (m->chat_template) { /* the model's own template, rendered with Jinja */
        ak_status st = ak_chat_template_compile(m->chat_template, &s->chat_template);
        if (st != AK_OK)
            return AK_FAIL(st, "the model's chat template: %s (--chat-format NAME picks a "
                           "built-in preset instead)", ak_last_error());
        s->chat_format = "jinja";
        s->tool_format = ak__tools_detect(m->chat_template); /* tools.c */
    } else {
        s->chat_format = "chatml";
        if (!s->embedder.embedding_only) /* embeddings: an encoder has no chat */
            AK_LOG_WARN(AK_SUBSYS_LLM, "the model has no chat template: chat requests use "
                        "the built-in chatml preset (--chat-format NAME picks another)");
    }
    /* the turn-end token: the preset's, or the one of the family the template looks like */
    const char *family = s->chat_format;
    if (s->chat_template && ak_chat_format_detect(m->chat_template, &family) != AK_OK) {
        family = "";
        ak_clear_error();
    }
    s->turn_end_id = turn_end_token(m->tokenizer, family);
    return AK_OK;
}

static ak_status resolve(const char *host, int port, struct sockaddr_storage *addr) {
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    char service[16];
    snprintf(service, sizeof service, "%d", port);
    int rc = getaddrinfo(host, service, &hints, &res);
    if (rc != 0 || !res)
        return AK_FAIL(AK_ERR_INVALID_ARG, "server: cannot resolve '%s': %s", host,
                       gai_strerror(rc));
    memset(addr, 0, sizeof *addr);
    memcpy(addr, res->ai_addr, res->ai_addrlen);
    freeaddrinfo(res);
    return AK_OK;
}

/* 0 when the address is a loopback one or unresolvable (we then do not warn). */
static int is_public_address(const struct sockaddr_storage *a) {
    if (a->ss_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)a)->sin_addr.s_addr) >> 24) != 127;
    if (a->ss_family == AF_INET6)
        return !IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)a)->sin6_addr);
    return 0;
}

static ak_status start_guard(ak__server *s, const ak__server_options *o) {
    ak__guard_options g = {
        o->max_connections ? o->max_connections : AK__SERVER_DEFAULT_MAX_CONNECTIONS,
        o->reserved_health < 0 ? 0 : o->reserved_health ? o->reserved_health
                                                        : AK__SERVER_DEFAULT_RESERVED_HEALTH,
        o->max_per_client < 0 ? 0 : o->max_per_client ? o->max_per_client
                                                      : AK__SERVER_DEFAULT_PER_CLIENT,
        o->limit_loopback,
        o->request_timeout_s > 0 ? o->request_timeout_s : AK__SERVER_DEFAULT_REQUEST_TIMEOUT_S};
    return ak__guard_create(&g, &s->metrics, &s->access, &s->guard);
}

static ak_status start_daemon(ak__server *s, const ak__server_options *o) {
    struct sockaddr_storage addr;
    const char *host = o->host ? o->host : "127.0.0.1";
    AK_CHECK(resolve(host, o->port, &addr));
    if (is_public_address(&addr) && s->auth.n == 0)
        AK_LOG_WARN(AK_SUBSYS_LLM, "listening on %s, reachable from other machines, without an "
                    "API key: anyone who can connect can use the model (--api-key or "
                    "--api-key-file)", host);
    AK_CHECK(start_guard(s, o));
    unsigned flags =
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL_INTERNAL_THREAD | MHD_USE_ERROR_LOG;
    if (addr.ss_family == AF_INET6) flags |= MHD_USE_IPv6;
    if (s->tls.cert) flags |= MHD_USE_TLS;
    struct MHD_OptionItem opts[] = {
        {MHD_OPTION_SOCK_ADDR, 0, &addr},
        {MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)on_completed, s},
        {MHD_OPTION_URI_LOG_CALLBACK, (intptr_t)on_request_line, s},
        {MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)ak__guard_notify, s->guard},
        {MHD_OPTION_CONNECTION_LIMIT, (intptr_t)ak__guard_mhd_limit(s->guard), NULL},
        {MHD_OPTION_CONNECTION_TIMEOUT, (intptr_t)IDLE_TIMEOUT_S, NULL},
        {MHD_OPTION_THREAD_STACK_SIZE, (intptr_t)((size_t)1 << 20), NULL},
        {MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)on_mhd_log, s},
        {s->tls.cert ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, 0, s->tls.cert},
        {s->tls.cert ? MHD_OPTION_HTTPS_MEM_KEY : MHD_OPTION_END, 0, s->tls.key},
        {MHD_OPTION_END, 0, NULL}};
    s->mhd = MHD_start_daemon(flags, (uint16_t)o->port, ak__guard_accept, s->guard, on_request, s,
                              MHD_OPTION_ARRAY, opts, MHD_OPTION_END);
    if (!s->mhd)
        return AK_FAIL(AK_ERR_IO,
                       "server: cannot listen on %s:%d (in use, not an address here, or a bad "
                       "TLS certificate/key?)",
                       host, o->port);
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->mhd, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di ? di->port : o->port;
    return AK_OK;
}

static void server_free(ak__server *s) {
    ak__guard_free(s->guard);
    ak__auth_free(&s->auth);
    ak__tls_free(&s->tls);
    ak__access_log_destroy(&s->access);
    ak__metrics_destroy(&s->metrics);
    pthread_mutex_destroy(&s->mu);
    ak_chat_template_free(s->chat_template);
    free(s->name);
    free(s->bos_text);
    free(s->eos_text);
    free(s);
}

ak_status ak__server_start(const ak__server_backend *backend, const ak__server_model *model,
                           const ak__server_options *options, ak__server **out) {
    return ak__server_start_embeddings(backend, model, options, NULL, out);
}

/* Listening without a model: /health answers "loading", /metrics its counters, anything
 * else 503 until ak__server_attach. */
ak_status ak__server_listen(const ak__server_options *options, ak__server **out) {
    AK_ENSURE_INIT();
    AK_ARG_CHECK(options && options->port >= 0 && options->port <= 65535, "server: bad port");
    AK_ARG_CHECK(options->max_body >= 64, "server: max_body %zu < 64", options->max_body);
    AK_ARG_CHECK(options->max_concurrent >= 1 && options->max_concurrent <= 4096,
                 "server: max_concurrent %d not in [1, 4096]", options->max_concurrent);
    AK_ARG_CHECK(out != NULL, "out is NULL");
    ak__server *s = calloc(1, sizeof *s);
    if (!s) return AK_FAIL(AK_ERR_NO_MEMORY, "server");
    if (pthread_mutex_init(&s->mu, NULL) != 0 || ak__metrics_init(&s->metrics) != AK_OK ||
        ak__access_log_init(&s->access, options->access_log, options->access_log_json) != AK_OK) {
        free(s);
        return AK_FAIL(AK_ERR_INTERNAL, "server: mutex");
    }
    s->loading = 1;
    s->public_health = options->public_health;
    s->public_metrics = options->public_metrics;
    s->max_body = options->max_body;
    s->max_concurrent = options->max_concurrent;
    s->started = (int64_t)time(NULL);
    ak_status st = ak__auth_load(&s->auth, options->api_key, options->api_key_file);
    if (st == AK_OK) st = ak__tls_load(&s->tls, options->tls_cert_file, options->tls_key_file);
    if (st == AK_OK) st = start_daemon(s, options);
    if (st != AK_OK) {
        server_free(s);
        return st;
    }
    *out = s;
    return AK_OK;
}

ak_status ak__server_attach(ak__server *s, const ak__server_backend *backend,
                            const ak__server_model *model, const ak__server_options *options,
                            const ak__server_embedder *embedder) {
    AK_ARG_CHECK(s && __atomic_load_n(&s->loading, __ATOMIC_ACQUIRE), "server: not loading");
    AK_ARG_CHECK(backend && ((backend->submit && backend->cancel) ||
                             (embedder && embedder->embedding_only)), "server: no backend");
    AK_ARG_CHECK(model && model->tokenizer, "server: no tokenizer");
    AK_ARG_CHECK(model->n_ctx >= 2, "server: context of %d tokens", model->n_ctx);
    AK_ARG_CHECK(options != NULL, "server: no options");
    s->be = *backend;
    if (embedder) s->embedder = *embedder; /* embeddings */
    if (options->hooks) s->hooks = *options->hooks, s->has_hooks = 1;
    AK_CHECK(setup_model(s, model, options));
    __atomic_store_n(&s->loading, 0, __ATOMIC_RELEASE); /* publishes every field set above */
    return AK_OK;
}

ak_status ak__server_start_embeddings(const ak__server_backend *backend,
                                      const ak__server_model *model,
                                      const ak__server_options *options,
                                      const ak__server_embedder *embedder, ak__server **out) {
    AK_ARG_CHECK(backend && ((backend->submit && backend->cancel) ||
                             (embedder && embedder->embedding_only)), "server: no backend");
    AK_ARG_CHECK(model && model->tokenizer, "server: no tokenizer");
    AK_ARG_CHECK(model->n_ctx >= 2, "server: context of %d tokens", model->n_ctx);
    ak__server *s = NULL;
    AK_CHECK(ak__server_listen(options, &s));
    ak_status st = ak__server_attach(s, backend, model, options, embedder);
    if (st != AK_OK) {
        ak_status kept = st;
        char why[512];
        snprintf(why, sizeof why, "%s", ak_last_error());
        ak__server_stop(s);
        return AK_FAIL(kept, "%s", why);
    }
    *out = s;
    return AK_OK;
}

int ak__server_port(const ak__server *s) { return s ? s->port : -1; }

const char *ak__server_chat_format(const ak__server *s) { return s ? s->chat_format : NULL; }

/* Waits until the backend delivered the last events of every request; 0 on time out. */
static int wait_live_empty(ak__server *s) {
    for (int waited = 0; waited < STOP_WAIT_MS; waited += 10) {
        pthread_mutex_lock(&s->mu);
        int empty = s->live == NULL;
        pthread_mutex_unlock(&s->mu);
        if (empty) return 1;
        struct timespec t = {0, 10 * 1000000L};
        nanosleep(&t, NULL);
    }
    return 0;
}

static int32_t in_flight(ak__server *s) {
    pthread_mutex_lock(&s->mu);
    int32_t n = s->in_flight;
    pthread_mutex_unlock(&s->mu);
    return n;
}

int ak__server_drain(ak__server *s, double seconds) {
    if (!s) return 0;
    __atomic_store_n(&s->draining, 1, __ATOMIC_RELEASE);
    uint64_t end = mono_ns() + (uint64_t)(seconds > 0 ? seconds * 1e9 : 0);
    while (in_flight(s) > 0 && mono_ns() < end) {
        struct timespec t = {0, 10 * 1000000L};
        nanosleep(&t, NULL);
    }
    int left = in_flight(s);
    if (left == 0) return 0;
    AK_LOG_WARN(AK_SUBSYS_LLM, "server: %d requests still running after %g s of draining: "
                "cancelling them", left, seconds);
    __atomic_store_n(&s->drain_cancelled, 1, __ATOMIC_RELEASE);
    ak__gen_cancel_all(s);
    /* their connections write the error event and [DONE], then let go of their slots */
    for (int waited = 0; in_flight(s) > 0 && waited < STOP_WAIT_MS; waited += 10) {
        struct timespec t = {0, 10 * 1000000L};
        nanosleep(&t, NULL);
    }
    return left;
}

ak_status ak__server_stop(ak__server *s) {
    if (!s) return AK_OK;
    __atomic_store_n(&s->stopping, 1, __ATOMIC_RELEASE);
    ak__gen_cancel_all(s);
    MHD_stop_daemon(s->mhd); /* joins every connection thread: their waits see `stopping` */
    if (!wait_live_empty(s)) {
        /* the backend still holds requests whose callbacks point here: keep the memory */
        AK_LOG_WARN(AK_SUBSYS_LLM, "server: the engine did not end every request in %d ms",
                    STOP_WAIT_MS);
        return AK_FAIL(AK_ERR_TIMEOUT, "server: requests still in the engine at stop");
    }
    server_free(s);
    return AK_OK;
}
