/* `ak serve MODEL`: loads the model (GGUF file or Hugging Face folder), starts the engine's
 * step loop on a background thread and the OpenAI-compatible HTTP server in front of it,
 * prints the URL, and on SIGINT/SIGTERM drains (no new requests, running ones get
 * --drain-seconds to finish) and stops. */
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "cli/cli.h"
#include "cli/cli_opts.h"
#include "cli/llm_cli.h"
#include "core/check.h"
#include "llm/server/server.h"

typedef struct serve_args {
    const char *model, *draft, *host, *hooks, *chat_format, *name;
    long port, threads, max_seqs, ctx, max_concurrent, gamma, ngram, kv_mib;
    size_t max_body;
    int kv_f32, mmap;
    /* network security, access log, shutdown */
    const char *api_key, *api_key_file, *ssl_cert, *ssl_key, *access_log;
    int public_health, public_metrics, limit_loopback, log_format;
    long max_connections, max_per_client;
    double request_timeout, drain_seconds;
    int kv_type; /* --kv-type: 0 f32, 1 f16, 2 q8_0; -1 not given */
} serve_args;

/* Parses the flags into a; AK_CLI_CONTINUE or an exit code. */
static int parse_args(int argc, char **argv, serve_args *a) {
    const char *model_flag = NULL;
    int first;
    const ak_opt opts[] = {
        {"model", 'm', AK_OPT_STRING, &model_flag, "MODEL", .help = "GGUF file or Hugging Face folder (or as the operand)"},
        {"host", 0, AK_OPT_STRING, &a->host, "ADDR", .help = "address to listen on", .def = "127.0.0.1"},
        {"port", 0, AK_OPT_INT, &a->port, "PORT", .help = "port (0: any free one)", .def = "8080", .min = 0, .max = 65535},
        {"threads", 't', AK_OPT_INT, &a->threads, "N", .help = "threads (0: AK_NUM_THREADS or all cores)", .def = "0", .min = 0, .max = 1024},
        {"max-seqs", 0, AK_OPT_INT, &a->max_seqs, "N", .help = "sequences decoded together (default: the engine's)", .min = 1, .max = 4096},
        {"ctx", 0, AK_OPT_INT, &a->ctx, "N", .help = "context length per sequence (0: the model's)", .def = "0", .min = 0, .max = 1 << 24},
        {"kv-mib", 0, AK_OPT_INT, &a->kv_mib, "MiB", .help = "KV cache size (0: the engine's choice)", .def = "0", .min = 0, .max = 1 << 20},
        {"kv-f32", 0, AK_OPT_FLAG, &a->kv_f32, .help = "f32 KV cache (default: f16; the same as --kv-type f32)"},
        {"kv-type", 0, AK_OPT_ENUM, &a->kv_type, "TYPE", .choices = "f32|f16|q8_0", .help = "KV cache storage: f32, f16 (default) or q8_0 (ggml blocks, half of f16's bytes; head_dim a multiple of 32)"},
        {"mmap", 0, AK_OPT_FLAG, &a->mmap, .help = "map the weights instead of reading them"},
        {"draft", 0, AK_OPT_STRING, &a->draft, "MODEL", .help = "speculative decoding with this draft model"},
        {"gamma", 0, AK_OPT_INT, &a->gamma, "G", .help = "draft tokens per step (default: the engine's)", .min = 0, .max = 16},
        {"ngram", 0, AK_OPT_INT, &a->ngram, "N", .help = "speculative decoding from N-grams of the context (0: off)", .def = "0", .min = 0, .max = 16},
        {"hooks", 0, AK_OPT_STRING, &a->hooks, "LIB.so", .help = "pre/post-processing hooks from a shared library"},
        {"chat-format", 0, AK_OPT_STRING, &a->chat_format, "NAME", .help = "a built-in chat template preset: llama-2, llama-3, chatml, mistral, zephyr, gemma, phi-3 (default: the model's own Jinja template)"},
        {"name", 0, AK_OPT_STRING, &a->name, "ID", .help = "model id clients see (default: the file or folder name)"},
        {"max-body", 0, AK_OPT_SIZE, &a->max_body, "BYTES", .help = "largest request body (default: the server's)", .min = 64, .max = 1e15},
        {"max-concurrent", 0, AK_OPT_INT, &a->max_concurrent, "N", .help = "requests served at once, more wait (default: the server's)", .min = 1, .max = 4096},
        {"api-key", 0, AK_OPT_STRING, &a->api_key, "KEY", .help = "clients must send 'Authorization: Bearer KEY' (default: $AK_API_KEY)"},
        {"api-key-file", 0, AK_OPT_STRING, &a->api_key_file, "FILE", .help = "more API keys, one a line (keep it chmod 600)"},
        {"public-health", 0, AK_OPT_FLAG, &a->public_health, .help = "GET /health answers without a key"},
        {"public-metrics", 0, AK_OPT_FLAG, &a->public_metrics, .help = "GET /metrics answers without a key"},
        {"ssl-cert", 0, AK_OPT_STRING, &a->ssl_cert, "FILE", .help = "HTTPS with this PEM certificate (with --ssl-key)"},
        {"ssl-key", 0, AK_OPT_STRING, &a->ssl_key, "FILE", .help = "the certificate's PEM private key"},
        {"max-connections", 0, AK_OPT_INT, &a->max_connections, "N", .help = "open connections at most (a few more are kept for /health)", .def = "2048", .min = 1, .max = 1 << 20},
        {"max-conns-per-client", 0, AK_OPT_INT, &a->max_per_client, "N", .help = "open connections per client address (0: no limit; loopback exempt unless --limit-loopback)", .def = "256", .min = 0, .max = 1 << 20},
        {"limit-loopback", 0, AK_OPT_FLAG, &a->limit_loopback, .help = "apply --max-conns-per-client to 127.0.0.1 and ::1 too"},
        {"request-timeout", 0, AK_OPT_DOUBLE, &a->request_timeout, "S", .help = "seconds to receive a request's header and body (trickling does not extend it)", .def = "10", .min = 0.05, .max = 86400},
        {"log-format", 0, AK_OPT_ENUM, &a->log_format, .choices = "text|json", .help = "access log lines", .def = "text"},
        {"access-log", 0, AK_OPT_STRING, &a->access_log, "FILE", .help = "where the access log goes: a file, - (stderr) or off", .def = "-"},
        {"drain-seconds", 0, AK_OPT_DOUBLE, &a->drain_seconds, "S", .help = "at SIGTERM/SIGINT, how long running requests may finish before they are cancelled", .def = "30", .min = 0, .max = 86400},
        AK_OPT_END};
    const ak_cli_cmd cmd = {.name = "serve", .opts = opts};
    int rc = ak_cli_parse(&cmd, argc, argv, &first);
    if (rc != AK_CLI_CONTINUE) return rc;
    if (argc - first > 1) return ak_cli_usage_error(&cmd, "one model only ('%s' and '%s')", argv[first], argv[first + 1]);
    a->model = first < argc ? argv[first] : model_flag;
    if (first < argc && model_flag) return ak_cli_usage_error(&cmd, "the model is given twice");
    if (!a->model) return ak_cli_usage_error(&cmd, "no model given");
    if (a->kv_f32 && a->kv_type >= 0 && a->kv_type != 0)
        return ak_cli_usage_error(&cmd, "--kv-f32 and --kv-type %s disagree", a->kv_type == 1 ? "f16" : "q8_0");
    return AK_CLI_CONTINUE;
}

/* The model id clients see: --name, else the file or folder name. */
static const char *model_name(const serve_args *a) {
    if (a->name) return a->name;
    size_t len = strlen(a->model);
    while (len > 1 && a->model[len - 1] == '/') len--;
    const char *slash = a->model + len;
    while (slash > a->model && slash[-1] != '/') slash--;
    return slash;
}

typedef struct serve_state {
    FILE *access_log;
    ak_llm_model *model, *draft;
    ak_llm_engine *engine;
    ak__server *server;
    ak__server_options options; /* kept from listening to attaching the model */
    ak_llm_hooks hooks;
} serve_state;

static ak_status start_engine(const serve_args *a, serve_state *s) {
    ak_llm_load_options lo = {.mmap = a->mmap};
    AK_CHECK(ak_llm_model_load_with(a->model, &lo, &s->model));
    ak_llm_model_info mi;
    AK_CHECK(ak_llm_model_get_info(s->model, &mi));
    if (mi.embedding_only) return AK_OK; /* embeddings: an encoder needs no engine */
    if (a->draft) AK_CHECK(ak_llm_model_load_with(a->draft, &lo, &s->draft));
    ak_llm_engine_options o;
    AK_CHECK(ak_llm_engine_options_default(&o));
    o.n_threads = (int32_t)a->threads;
    if (a->max_seqs) o.max_seqs = (int32_t)a->max_seqs;
    o.max_context = (int32_t)a->ctx;
    o.kv_bytes = (uint64_t)a->kv_mib << 20;
    if (a->kv_f32 || a->kv_type == 0) o.kv_dtype = AK_DTYPE_F32;
    o.kv_q8_0 = a->kv_type == 2;
    o.draft = s->draft;
    if (a->gamma >= 0) o.spec_gamma = (int32_t)a->gamma;
    o.spec_ngram = (int32_t)a->ngram;
    AK_CHECK(ak_llm_engine_create(s->model, &o, &s->engine));
    return ak_llm_engine_start(s->engine);
}

static ak_status open_access_log(const serve_args *a, serve_state *s) {
    if (!strcmp(a->access_log, "off")) return AK_OK;
    if (!strcmp(a->access_log, "-")) {
        s->access_log = stderr;
        return AK_OK;
    }
    s->access_log = fopen(a->access_log, "a");
    if (!s->access_log) return AK_FAIL(AK_ERR_IO, "cannot open the access log %s", a->access_log);
    return AK_OK;
}

static ak_status security_options(const serve_args *a, serve_state *s, ak__server_options *o) {
    const char *env_key = getenv("AK_API_KEY");
    o->api_key = a->api_key ? a->api_key : env_key && env_key[0] ? env_key : NULL;
    o->api_key_file = a->api_key_file;
    o->public_health = a->public_health;
    o->public_metrics = a->public_metrics;
    o->tls_cert_file = a->ssl_cert;
    o->tls_key_file = a->ssl_key;
    o->max_connections = (int32_t)a->max_connections;
    o->max_per_client = a->max_per_client ? (int32_t)a->max_per_client : -1;
    o->limit_loopback = a->limit_loopback;
    o->request_timeout_s = a->request_timeout;
    o->access_log_json = a->log_format == 1;
    AK_CHECK(open_access_log(a, s));
    o->access_log = s->access_log;
    return AK_OK;
}

/* Every connection is a socket and a thread: the soft descriptor limit (often 1024) is
 * raised to the hard one so --max-connections can be reached. */
static void raise_fd_limit(void) {
    struct rlimit r;
    if (getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max) {
        r.rlim_cur = r.rlim_max;
        setrlimit(RLIMIT_NOFILE, &r);
    }
}

/* Listens before the model loads, so /health can say "loading" (503) meanwhile. */
static ak_status listen_early(const serve_args *a, serve_state *s) {
    ak__server_options *o = &s->options;
    *o = (ak__server_options)AK__SERVER_OPTIONS_INIT;
    o->host = a->host;
    o->port = (int)a->port;
    if (a->max_body) o->max_body = a->max_body;
    if (a->max_concurrent) o->max_concurrent = (int32_t)a->max_concurrent;
    o->chat_format = a->chat_format;
    o->hooks = a->hooks ? &s->hooks : NULL;
    AK_CHECK(security_options(a, s, o));
    AK_CHECK(ak__server_listen(o, &s->server));
    /* not "on URL": scripts wait for the ready banner's " on http://..." */
    fprintf(stderr, "ak serve: loading %s, listening at %s://%s:%d (GET /health: \"loading\")\n",
            a->model, a->ssl_cert ? "https" : "http", a->host, ak__server_port(s->server));
    return AK_OK;
}

/* The loaded model goes behind the listening server; the banner line says it is ready. */
static ak_status attach_model(const serve_args *a, serve_state *s) {
    ak_llm_model_info info;
    const ak_tokenizer *tok = NULL;
    const char *tmpl = NULL;
    AK_CHECK(ak_llm_model_get_info(s->model, &info));
    AK_CHECK(ak_llm_model_tokenizer(s->model, &tok));
    AK_CHECK(ak_llm_model_chat_template(s->model, &tmpl));
    if (a->hooks) AK_CHECK(ak_llm_hooks_load(a->hooks, &s->hooks));
    int32_t ctx = a->ctx > 0 && a->ctx < info.max_context ? (int32_t)a->ctx : info.max_context;
    ak__server_model m = {model_name(a), tok, ctx, tmpl};
    ak__server_embedder emb = ak__server_model_embedder(s->model); /* embeddings */
    ak__server_backend be = s->engine ? ak__server_engine_backend(s->engine)
                                      : (ak__server_backend){0}; /* embedding-only */
    AK_CHECK(ak__server_attach(s->server, &be, &m, &s->options, &emb));
    printf("ak serve: %s (%s, %d layers, context %d, chat format %s) on %s://%s:%d/v1\n",
           m.name, info.arch, info.n_layers, ctx, ak__server_chat_format(s->server),
           a->ssl_cert ? "https" : "http", a->host, ak__server_port(s->server));
    fflush(stdout);
    return AK_OK;
}

static void stop_all(serve_state *s) {
    if (s->server && ak__server_stop(s->server) != AK_OK) {
        /* the engine still holds requests that point into the server: leave it to exit */
        fprintf(stderr, "ak serve: %s\n", ak_last_error());
        return;
    }
    if (s->engine) {
        ak_llm_engine_stop(s->engine);
        ak_llm_engine_free(s->engine);
    }
    ak_llm_model_free(s->draft);
    ak_llm_model_free(s->model);
    if (s->access_log && s->access_log != stderr) fclose(s->access_log);
}

int ak_cli_serve(int argc, char **argv) {
    serve_args a = {.gamma = -1, .kv_type = -1};
    int rc = parse_args(argc, argv, &a);
    if (rc != AK_CLI_CONTINUE) return rc;
    /* every thread started from here on inherits the mask; this one waits for the signal.
     * A shell starts background jobs with SIGINT ignored, and an ignored signal never
     * reaches sigwait: take it back so `kill -INT` stops the server too. */
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    serve_state s;
    memset(&s, 0, sizeof s);
    raise_fd_limit();
    ak_status st = listen_early(&a, &s);
    if (st == AK_OK) st = start_engine(&a, &s);
    if (st == AK_OK) st = attach_model(&a, &s);
    if (st != AK_OK) {
        rc = ak_cli_report("start", st);
        stop_all(&s);
        return rc;
    }
    int sig = 0;
    sigwait(&sigs, &sig);
    fprintf(stderr, "ak serve: %s, draining (up to %g s)\n",
            sig == SIGINT ? "interrupted" : "terminated", a.drain_seconds);
    int cancelled = ak__server_drain(s.server, a.drain_seconds);
    fprintf(stderr, "ak serve: drained (%d requests cancelled), stopping\n", cancelled);
    stop_all(&s);
    return AK_EXIT_OK;
}
