/* `ak serve MODEL`: loads the model (GGUF file or Hugging Face folder), starts the engine's
 * step loop on a background thread and the OpenAI-compatible HTTP server in front of it,
 * prints the URL, and stops cleanly on SIGINT/SIGTERM. */
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/llm_cli.h"
#include "core/check.h"
#include "llm/server/server.h"

typedef struct serve_args {
    const char *model, *draft, *host, *hooks, *chat_format, *name;
    long port, threads, max_seqs, ctx, max_body, max_concurrent, gamma, ngram, kv_mib;
    int kv_f32, mmap;
} serve_args;

static int usage(void) {
    fprintf(stderr,
            "usage: ak serve MODEL [--draft M] [--host 127.0.0.1] [--port 8080] [-t threads] "
            "[--max-seqs N] [--ctx N] [--kv-mib MiB] [--kv-f32] [--mmap] [--gamma 4] [--ngram N] "
            "[--hooks lib.so] [--chat-format NAME] [--name ID] [--max-body BYTES] "
            "[--max-concurrent N]\n");
    return AK_EXIT_ERROR;
}

static int parse_flag(int argc, char **argv, int *i, serve_args *a) {
    static const char *const names[] = {"-m",      "--model",       "--draft", "--host",
                                        "--hooks", "--chat-format", "--name"};
    const char **strs[] = {&a->model, &a->model,       &a->draft, &a->host,
                           &a->hooks, &a->chat_format, &a->name};
    const char *f = argv[*i];
    for (size_t k = 0; k < sizeof names / sizeof names[0]; ++k)
        if (!strcmp(f, names[k]) && *i + 1 < argc) {
            *strs[k] = argv[++*i];
            return 0;
        }
    if (!strcmp(f, "--port")) return ak_cli_flag_int(argc, argv, i, 0, 65535, &a->port);
    if (!strcmp(f, "-t")) return ak_cli_flag_int(argc, argv, i, 0, 1024, &a->threads);
    if (!strcmp(f, "--max-seqs")) return ak_cli_flag_int(argc, argv, i, 1, 4096, &a->max_seqs);
    if (!strcmp(f, "--ctx")) return ak_cli_flag_int(argc, argv, i, 0, 1 << 24, &a->ctx);
    if (!strcmp(f, "--kv-mib")) return ak_cli_flag_int(argc, argv, i, 0, 1 << 20, &a->kv_mib);
    if (!strcmp(f, "--gamma")) return ak_cli_flag_int(argc, argv, i, 0, 16, &a->gamma);
    if (!strcmp(f, "--ngram")) return ak_cli_flag_int(argc, argv, i, 0, 16, &a->ngram);
    if (!strcmp(f, "--max-body")) return ak_cli_flag_int(argc, argv, i, 64, LONG_MAX, &a->max_body);
    if (!strcmp(f, "--max-concurrent"))
        return ak_cli_flag_int(argc, argv, i, 1, 4096, &a->max_concurrent);
    if (!strcmp(f, "--kv-f32")) return a->kv_f32 = 1, 0;
    if (!strcmp(f, "--mmap")) return a->mmap = 1, 0;
    if (f[0] != '-' && !a->model) return a->model = f, 0;
    fprintf(stderr, "ak serve: unknown or incomplete option '%s'\n", f);
    return -1;
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
    ak_llm_model *model, *draft;
    ak_llm_engine *engine;
    ak__server *server;
    ak_llm_hooks hooks;
} serve_state;

static ak_status start_engine(const serve_args *a, serve_state *s) {
    ak_llm_load_options lo = {.mmap = a->mmap};
    AK_CHECK(ak_llm_model_load_with(a->model, &lo, &s->model));
    if (a->draft) AK_CHECK(ak_llm_model_load_with(a->draft, &lo, &s->draft));
    ak_llm_engine_options o;
    AK_CHECK(ak_llm_engine_options_default(&o));
    o.n_threads = (int32_t)a->threads;
    if (a->max_seqs) o.max_seqs = (int32_t)a->max_seqs;
    o.max_context = (int32_t)a->ctx;
    o.kv_bytes = (uint64_t)a->kv_mib << 20;
    if (a->kv_f32) o.kv_dtype = AK_DTYPE_F32;
    o.draft = s->draft;
    if (a->gamma >= 0) o.spec_gamma = (int32_t)a->gamma;
    o.spec_ngram = (int32_t)a->ngram;
    AK_CHECK(ak_llm_engine_create(s->model, &o, &s->engine));
    return ak_llm_engine_start(s->engine);
}

static ak_status start_server(const serve_args *a, serve_state *s) {
    ak_llm_model_info info;
    const ak_tokenizer *tok = NULL;
    const char *tmpl = NULL;
    AK_CHECK(ak_llm_model_get_info(s->model, &info));
    AK_CHECK(ak_llm_model_tokenizer(s->model, &tok));
    AK_CHECK(ak_llm_model_chat_template(s->model, &tmpl));
    if (a->hooks) AK_CHECK(ak_llm_hooks_load(a->hooks, &s->hooks));
    int32_t ctx = a->ctx > 0 && a->ctx < info.max_context ? (int32_t)a->ctx : info.max_context;
    ak__server_model m = {model_name(a), tok, ctx, tmpl};
    ak__server_options o = AK__SERVER_OPTIONS_INIT;
    o.host = a->host;
    o.port = (int)a->port;
    if (a->max_body) o.max_body = (size_t)a->max_body;
    if (a->max_concurrent) o.max_concurrent = (int32_t)a->max_concurrent;
    o.chat_format = a->chat_format;
    o.hooks = a->hooks ? &s->hooks : NULL;
    ak__server_backend be = ak__server_engine_backend(s->engine);
    AK_CHECK(ak__server_start(&be, &m, &o, &s->server));
    printf("ak serve: %s (%s, %d layers, context %d, chat format %s) on http://%s:%d/v1\n",
           m.name, info.arch, info.n_layers, ctx, ak__server_chat_format(s->server), a->host,
           ak__server_port(s->server));
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
}

int ak_cli_serve(int argc, char **argv) {
    serve_args a = {.host = "127.0.0.1", .port = 8080, .gamma = -1};
    for (int i = 1; i < argc; ++i)
        if (parse_flag(argc, argv, &i, &a) != 0) return usage();
    if (!a.model) return usage();
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
    ak_status st = start_engine(&a, &s);
    if (st == AK_OK) st = start_server(&a, &s);
    if (st != AK_OK) {
        int rc = ak_cli_report("serve", st);
        stop_all(&s);
        return rc;
    }
    int sig = 0;
    sigwait(&sigs, &sig);
    fprintf(stderr, "ak serve: %s, stopping\n", sig == SIGINT ? "interrupted" : "terminated");
    stop_all(&s);
    return AK_EXIT_OK;
}
