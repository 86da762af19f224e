/* `ak bench llm --url http://HOST:PORT --concurrency N [--requests M | --duration S]
 * [--prompt-tokens P] [--max-tokens G] [--json]`: N client threads each stream
 * /v1/completions requests one after the other (a prompt of P random token ids, G tokens
 * with ignore_eos, greedy). Reports aggregate output tokens/s, requests/s, time to first
 * token and inter-token latency (p50/p99, from the arrival of the first chunk with text
 * and between text chunks — the server sends one chunk per token), failed requests, and
 * the KV cache utilisation sampled from /metrics during the run. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/bench_llm_server.h"
#include <cjson/cJSON.h>

#include "cli/bench_results.h"
#include "cli/cli.h"
#include "cli/cli_opts.h"
#include "cli/llm_cli.h"
#include "core/check.h"
#include "llm/server/http_client.h"

typedef struct load_args {
    char host[256];
    int port;
    long concurrency, requests, duration_s, prompt_tokens, max_tokens;
    int json;
    const char *out; /* --out DIR: the llm.server results line (bench_results.h) */
} load_args;

/* Growable list of seconds. */
typedef struct samples {
    double *v;
    size_t n, cap;
} samples;

static int samples_push(samples *s, double x) {
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 256;
        double *v = realloc(s->v, cap * sizeof *v);
        if (!v) return -1;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = x;
    return 0;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile of sorted values. */
static double percentile(const samples *s, double p) {
    if (s->n == 0) return 0;
    size_t k = (size_t)(p / 100.0 * (double)s->n + 0.999999);
    return s->v[(k ? k : 1) - 1];
}

typedef struct load_state {
    const load_args *a;
    uint64_t t0, deadline_ns; /* deadline 0 = run --requests */
    long next;                /* the next request number (shared) */
    pthread_mutex_t mu;
    samples ttft, itl;
    uint64_t tokens, ok, failed;
    int done;                 /* the monitor stops */
    double kv_sum, kv_max, live_sum;
    long kv_n;
} load_state;

/* ---- one request --------------------------------------------------------------------- */

typedef struct one_result {
    int ok;
    uint64_t tokens;
    double ttft;
    samples itl;
} one_result;

static char *request_body(const load_args *a, long serial) {
    ak__bytes b = {NULL, 0, 0};
    uint64_t x = 0x9E3779B97F4A7C15ull * (uint64_t)(serial + 1);
    ak_status st = ak__bytes_append(&b, "{\"prompt\":[", 11);
    for (long i = 0; st == AK_OK && i < a->prompt_tokens; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17; /* xorshift: distinct prompts, no prefix reuse */
        st = ak__bytes_appendf(&b, "%s%u", i ? "," : "", 100u + (unsigned)(x % 900));
    }
    if (st == AK_OK)
        st = ak__bytes_appendf(&b,
                               "],\"max_tokens\":%ld,\"temperature\":0,\"ignore_eos\":true,"
                               "\"stream\":true,\"stream_options\":{\"include_usage\":true}}",
                               a->max_tokens);
    if (st != AK_OK) ak__bytes_free(&b);
    return b.v;
}

/* Reads the events of one stream, timing the chunks that carry text. */
static int read_stream(ak__http_conn *c, uint64_t t_send, one_result *r) {
    ak__bytes ev = {NULL, 0, 0};
    uint64_t last = 0;
    int done = 0, end = 0, ok = 1;
    while (ok && !end) {
        if (ak__http_next_event(c, &ev, &end) != AK_OK) ok = 0;
        else if (end) break;
        else if (!strcmp(ev.v, "[DONE]")) done = 1;
        else if (strstr(ev.v, "\"error\"") == ev.v + 1) ok = 0;
        else if (strstr(ev.v, "\"text\":\"") && !strstr(ev.v, "\"text\":\"\"")) {
            uint64_t t = ak_now_ns();
            if (!last) r->ttft = (double)(t - t_send) * 1e-9;
            else if (samples_push(&r->itl, (double)(t - last) * 1e-9) != 0) ok = 0;
            last = t;
        }
        const char *u = ok && !end ? strstr(ev.v, "\"completion_tokens\":") : NULL;
        if (u) r->tokens = strtoull(u + 20, NULL, 10);
    }
    ak__bytes_free(&ev);
    return ok && done && last != 0;
}

/* 0 when the request ran (r->ok says how), -1 when the server cannot be reached. */
static int run_one(const load_args *a, long serial, one_result *r) {
    char *body = request_body(a, serial);
    ak__http_conn c;
    uint64_t t_send = ak_now_ns();
    int reached = body && ak__http_connect(&c, a->host, a->port, 120000) == AK_OK;
    if (reached) {
        if (ak__http_begin(&c, "POST", "/v1/completions", body, strlen(body)) == AK_OK &&
            c.status == 200)
            r->ok = read_stream(&c, t_send, r);
        ak__http_close(&c);
    }
    free(body);
    return reached ? 0 : -1;
}

/* ---- client threads and the /metrics monitor ----------------------------------------- */

static int take_ticket(load_state *s, long *serial) {
    pthread_mutex_lock(&s->mu);
    int go = s->deadline_ns ? ak_now_ns() < s->deadline_ns : s->next < s->a->requests;
    if (go) *serial = s->next++;
    pthread_mutex_unlock(&s->mu);
    return go;
}

static void *client(void *arg) {
    load_state *s = arg;
    long serial;
    for (int reached = 0; reached == 0 && take_ticket(s, &serial);) {
        one_result r;
        memset(&r, 0, sizeof r);
        reached = run_one(s->a, serial, &r); /* a server that is gone ends this client */
        pthread_mutex_lock(&s->mu);
        if (r.ok) {
            s->ok++;
            s->tokens += r.tokens;
            samples_push(&s->ttft, r.ttft);
            for (size_t i = 0; i < r.itl.n; i++) samples_push(&s->itl, r.itl.v[i]);
        } else
            s->failed++;
        pthread_mutex_unlock(&s->mu);
        free(r.itl.v);
    }
    return NULL;
}

static double metric_value(const char *page, const char *name) {
    char key[128];
    snprintf(key, sizeof key, "\n%s ", name);
    const char *p = strstr(page, key);
    return p ? strtod(p + strlen(key), NULL) : -1;
}

/* Samples KV usage every 250 ms while sequences run. */
static void *monitor(void *arg) {
    load_state *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->mu);
        int done = s->done;
        pthread_mutex_unlock(&s->mu);
        if (done) return NULL;
        ak__bytes page = {NULL, 0, 0};
        int status = 0;
        if (ak__http_request(s->a->host, s->a->port, "GET", "/metrics", NULL, 0, &status, &page) ==
                AK_OK &&
            status == 200 && metric_value(page.v, "ak_llm_requests_running") > 0) {
            double kv = metric_value(page.v, "ak_llm_kv_cache_usage_ratio");
            double live = metric_value(page.v, "ak_llm_kv_cache_live_ratio");
            pthread_mutex_lock(&s->mu);
            s->kv_sum += kv;
            s->live_sum += live;
            if (kv > s->kv_max) s->kv_max = kv;
            s->kv_n++;
            pthread_mutex_unlock(&s->mu);
        }
        ak__bytes_free(&page);
        struct timespec t = {0, 250 * 1000000L};
        nanosleep(&t, NULL);
    }
}

/* ---- report -------------------------------------------------------------------------- */

static void report_json(const load_args *a, load_state *s, double wall, double tps, double kv_mean,
                        double live) {
    char url[300];
    snprintf(url, sizeof url, "http://%s:%d", a->host, a->port);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "url", ak_cli_json_text(url));
    cJSON_AddNumberToObject(o, "concurrency", (double)a->concurrency);
    cJSON_AddNumberToObject(o, "prompt_tokens", (double)a->prompt_tokens);
    cJSON_AddNumberToObject(o, "max_tokens", (double)a->max_tokens);
    cJSON_AddNumberToObject(o, "requests_ok", (double)s->ok);
    cJSON_AddNumberToObject(o, "requests_failed", (double)s->failed);
    ak_cli_json_round(o, "duration_s", wall, 3);
    cJSON_AddNumberToObject(o, "output_tokens", (double)s->tokens);
    ak_cli_json_round(o, "output_tokens_per_s", tps, 2);
    ak_cli_json_round(o, "requests_per_s", (double)s->ok / wall, 3);
    ak_cli_json_round(o, "ttft_p50_ms", 1e3 * percentile(&s->ttft, 50), 2);
    ak_cli_json_round(o, "ttft_p99_ms", 1e3 * percentile(&s->ttft, 99), 2);
    ak_cli_json_round(o, "itl_p50_ms", 1e3 * percentile(&s->itl, 50), 3);
    ak_cli_json_round(o, "itl_p99_ms", 1e3 * percentile(&s->itl, 99), 3);
    ak_cli_json_round(o, "kv_usage_mean", kv_mean, 4);
    ak_cli_json_round(o, "kv_usage_max", s->kv_max, 4);
    ak_cli_json_round(o, "kv_live_ratio_mean", live, 4);
    ak_cli_print_json(o);
}

/* The llm.server line: latency percentiles at this concurrency, for `ak report`. */
static void record(const load_args *a, load_state *s, double tps) {
    ak__bench_out out;
    if (ak__bench_out_open(&out, a->out, "llm", 0, 0) || !out.file) return;
    cJSON *params = cJSON_CreateObject(), *figures = cJSON_CreateObject();
    cJSON_AddNumberToObject(params, "concurrency", (double)a->concurrency);
    cJSON_AddNumberToObject(params, "prompt_tokens", (double)a->prompt_tokens);
    cJSON_AddNumberToObject(params, "max_tokens", (double)a->max_tokens);
    static const int pcts[] = {50, 90, 99};
    for (int i = 0; i < 3; i++) {
        char key[32];
        snprintf(key, sizeof key, "ttft_p%d_ms", pcts[i]);
        ak_cli_json_round(figures, key, 1e3 * percentile(&s->ttft, pcts[i]), 2);
        snprintf(key, sizeof key, "itl_p%d_ms", pcts[i]);
        ak_cli_json_round(figures, key, 1e3 * percentile(&s->itl, pcts[i]), 3);
    }
    ak_cli_json_round(figures, "tokens_per_s", tps, 2);
    cJSON_AddNumberToObject(figures, "requests_failed", (double)s->failed);
    ak__bench_out_add(&out, "llm.server", NULL, NULL, params, figures);
    ak__bench_out_close(&out);
}

static void report(const load_args *a, load_state *s, double wall) {
    qsort(s->ttft.v, s->ttft.n, sizeof *s->ttft.v, cmp_double);
    qsort(s->itl.v, s->itl.n, sizeof *s->itl.v, cmp_double);
    double tps = wall > 0 ? (double)s->tokens / wall : 0;
    record(a, s, tps);
    double kv_mean = s->kv_n ? s->kv_sum / (double)s->kv_n : 0,
           live = s->kv_n ? s->live_sum / (double)s->kv_n : 0;
    if (a->json) {
        report_json(a, s, wall, tps, kv_mean, live);
        return;
    }
    printf("server http://%s:%d, %ld clients, prompt %ld tokens, %ld output tokens each\n", a->host,
           a->port, a->concurrency, a->prompt_tokens, a->max_tokens);
    printf("requests       %llu ok, %llu failed in %.2f s (%.3f req/s)\n",
           (unsigned long long)s->ok, (unsigned long long)s->failed, wall, (double)s->ok / wall);
    printf("output         %llu tokens, %.1f tokens/s\n", (unsigned long long)s->tokens, tps);
    printf("TTFT           p50 %.1f ms, p99 %.1f ms\n", 1e3 * percentile(&s->ttft, 50),
           1e3 * percentile(&s->ttft, 99));
    printf("inter-token    p50 %.2f ms, p99 %.2f ms\n", 1e3 * percentile(&s->itl, 50),
           1e3 * percentile(&s->itl, 99));
    printf("KV cache       usage mean %.1f %%, max %.1f %%; live tokens / slots of their blocks "
           "%.1f %%\n",
           100 * kv_mean, 100 * s->kv_max, 100 * live);
}

static int run(const load_args *a) {
    load_state s;
    memset(&s, 0, sizeof s);
    s.a = a;
    pthread_mutex_init(&s.mu, NULL);
    s.t0 = ak_now_ns();
    if (a->duration_s) s.deadline_ns = s.t0 + (uint64_t)a->duration_s * 1000000000ull;
    pthread_t *t = calloc((size_t)a->concurrency, sizeof *t), mon;
    int have_mon = pthread_create(&mon, NULL, monitor, &s) == 0;
    long started = 0;
    for (long i = 0; t && i < a->concurrency; i++, started++)
        if (pthread_create(&t[i], NULL, client, &s) != 0) break;
    for (long i = 0; i < started; i++) pthread_join(t[i], NULL);
    double wall = (double)(ak_now_ns() - s.t0) * 1e-9;
    pthread_mutex_lock(&s.mu);
    s.done = 1;
    pthread_mutex_unlock(&s.mu);
    if (have_mon) pthread_join(mon, NULL);
    if (started < a->concurrency)
        fprintf(stderr, "ak bench llm: only %ld client threads started\n", started);
    report(a, &s, wall);
    free(t);
    free(s.ttft.v);
    free(s.itl.v);
    pthread_mutex_destroy(&s.mu);
    return s.failed == 0 && s.ok > 0 ? AK_EXIT_OK : AK_EXIT_FAIL;
}

int ak_bench_llm_server(int argc, char **argv) {
    load_args a = {.host = "127.0.0.1", .port = 8080, .prompt_tokens = 128, .max_tokens = 128};
    const char *url = NULL;
    int first;
    const ak_opt opts[] = {
        {"url", 0, AK_OPT_STRING, &url, "URL", .help = "the server", .def = "http://127.0.0.1:8080"},
        {"concurrency", 0, AK_OPT_INT, &a.concurrency, "N", .help = "client threads, each streaming one request after the other (required)", .min = 1, .max = 4096},
        {"requests", 0, AK_OPT_INT, &a.requests, "M", .help = "requests in all (default: 4 per client unless --duration)", .min = 1, .max = 100000000},
        {"duration", 0, AK_OPT_INT, &a.duration_s, "S", .help = "run for S seconds instead of a number of requests", .min = 1, .max = 86400},
        {"prompt-tokens", 0, AK_OPT_INT, &a.prompt_tokens, "P", .help = "random prompt token ids per request", .def = "128", .min = 1, .max = 1 << 20},
        {"max-tokens", 0, AK_OPT_INT, &a.max_tokens, "G", .help = "tokens generated per request (ignore_eos)", .def = "128", .min = 1, .max = 1 << 20},
        {"json", 0, AK_OPT_FLAG, &a.json, .help = "one JSON object instead of text"},
        {"out", 0, AK_OPT_STRING, &a.out, "DIR", .help = "append the result as a JSON line to DIR/llm.jsonl (none: do not)", .def = AK_BENCH_OUT_DEFAULT},
        AK_OPT_END};
    const ak_cli_cmd cmd = {.name = "bench llm", .opts = opts,
                            .usage = "ak bench llm --url URL --concurrency N [options]",
                            .summary = "load test of a running `ak serve`: tokens/s, requests/s, time to "
                                       "first token, inter-token latency, KV cache use"};
    int rc = ak_cli_parse(&cmd, argc, argv, &first);
    if (rc != AK_CLI_CONTINUE) return rc;
    if (first < argc) return ak_cli_usage_error(&cmd, "unexpected argument '%s'", argv[first]);
    if (!a.concurrency) return ak_cli_usage_error(&cmd, "--concurrency N is required");
    if (a.requests && a.duration_s) return ak_cli_usage_error(&cmd, "give --requests or --duration, not both");
    if (!a.requests && !a.duration_s) a.requests = 4 * a.concurrency;
    ak_status st = ak__http_parse_url(url, a.host, sizeof a.host, &a.port);
    if (st != AK_OK) return ak_cli_report("--url", st);
    return run(&a);
}
