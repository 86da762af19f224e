/* Prometheus metrics of the server (see metrics.h). Names follow Prometheus conventions
 * (base units, _total counters, _seconds histograms) under the prefix ak_llm_. */
#include <stdio.h>
#include <string.h>

#include "core/check.h"
#include "llm/server/metrics.h"

/* Upper bounds of the latency buckets, seconds (the last bucket is +Inf). */
static const double k_ttft_le[AK__METRICS_BUCKETS - 1] = {
    0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10};
static const double k_itl_le[AK__METRICS_BUCKETS - 1] = {
    0.001, 0.0025, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1, 0.25, 0.5, 1};
static const double k_e2e_le[AK__METRICS_BUCKETS - 1] = {
    0.1, 0.25, 0.5, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60};

static const int k_codes[AK__CODE_SLOTS - 1] = {200, 400, 401, 404, 405, 413,
                                                429, 431, 500, 503, 499};
static const char *const k_endpoints[AK__EP_COUNT] = {
    "/v1/completions", "/v1/chat/completions", "/v1/models", "/health", "/metrics",
    "/v1/embeddings", "/tokenize", "/detokenize", "other"};

ak_status ak__metrics_init(ak__metrics *m) {
    memset(m, 0, sizeof *m);
    if (pthread_mutex_init(&m->mu, NULL) != 0) return AK_FAIL(AK_ERR_INTERNAL, "metrics: mutex");
    return AK_OK;
}

void ak__metrics_destroy(ak__metrics *m) { pthread_mutex_destroy(&m->mu); }

void ak__metrics_request(ak__metrics *m, int endpoint, int http_status) {
    int slot = AK__CODE_SLOTS - 1; /* "other" */
    for (int i = 0; i < AK__CODE_SLOTS - 1; i++)
        if (k_codes[i] == http_status) slot = i;
    if (endpoint < 0 || endpoint >= AK__EP_COUNT) endpoint = AK__EP_OTHER;
    pthread_mutex_lock(&m->mu);
    m->requests[endpoint][slot]++;
    pthread_mutex_unlock(&m->mu);
}

void ak__metrics_tokens(ak__metrics *m, uint64_t prompt, uint64_t cached, uint64_t generated) {
    pthread_mutex_lock(&m->mu);
    m->prompt_tokens += prompt;
    m->cached_prompt_tokens += cached;
    m->generation_tokens += generated;
    pthread_mutex_unlock(&m->mu);
}

void ak__metrics_finish(ak__metrics *m, ak_finish_reason reason) {
    pthread_mutex_lock(&m->mu);
    if (reason == AK_FINISH_STOP) m->finished_stop++;
    else if (reason == AK_FINISH_LENGTH) m->finished_length++;
    else if (reason == AK_FINISH_CANCELLED) m->finished_cancelled++;
    else m->finished_error++;
    pthread_mutex_unlock(&m->mu);
}

static void observe(ak__metrics *m, ak__histogram *h, const double *le, double v) {
    int b = 0;
    while (b < AK__METRICS_BUCKETS - 1 && v > le[b]) b++;
    pthread_mutex_lock(&m->mu);
    h->counts[b]++;
    h->sum += v;
    h->count++;
    pthread_mutex_unlock(&m->mu);
}

void ak__metrics_ttft(ak__metrics *m, double s) { observe(m, &m->ttft, k_ttft_le, s); }
void ak__metrics_itl(ak__metrics *m, double s) { observe(m, &m->itl, k_itl_le, s); }
void ak__metrics_e2e(ak__metrics *m, double s) { observe(m, &m->e2e, k_e2e_le, s); }

void ak__metrics_in_flight(ak__metrics *m, int delta) {
    pthread_mutex_lock(&m->mu);
    m->in_flight += delta;
    pthread_mutex_unlock(&m->mu);
}

static const char *const k_reject_names[AK__REJECT_COUNT] = {
    "auth", "per_client_limit", "total_cap", "reserved_slot", "request_deadline",
    "header_too_large", "body_too_large", "malformed", "draining", "loading"};

const char *ak__reject_name(ak__reject r) {
    return r >= 0 && r < AK__REJECT_COUNT ? k_reject_names[r] : "unknown";
}

void ak__metrics_reject(ak__metrics *m, ak__reject reason) {
    if (reason < 0 || reason >= AK__REJECT_COUNT) return;
    pthread_mutex_lock(&m->mu);
    m->rejected[reason]++;
    pthread_mutex_unlock(&m->mu);
}

void ak__metrics_connections(ak__metrics *m, int delta) {
    pthread_mutex_lock(&m->mu);
    m->connections += delta;
    pthread_mutex_unlock(&m->mu);
}

/* ---- rendering ----------------------------------------------------------------------- */

static ak_status header(ak__bytes *o, const char *name, const char *type, const char *help) {
    return ak__bytes_appendf(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static ak_status scalar(ak__bytes *o, const char *name, const char *type, const char *help,
                        double v) {
    AK_CHECK(header(o, name, type, help));
    return ak__bytes_appendf(o, "%s %.17g\n", name, v);
}

static ak_status histogram(ak__bytes *o, const char *name, const char *help,
                           const ak__histogram *h, const double *le) {
    AK_CHECK(header(o, name, "histogram", help));
    uint64_t cum = 0;
    for (int b = 0; b < AK__METRICS_BUCKETS - 1; b++) {
        cum += h->counts[b];
        AK_CHECK(ak__bytes_appendf(o, "%s_bucket{le=\"%g\"} %llu\n", name, le[b],
                                   (unsigned long long)cum));
    }
    AK_CHECK(
        ak__bytes_appendf(o, "%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)h->count));
    AK_CHECK(ak__bytes_appendf(o, "%s_sum %.17g\n", name, h->sum));
    return ak__bytes_appendf(o, "%s_count %llu\n", name, (unsigned long long)h->count);
}

static ak_status requests(ak__bytes *o, const ak__metrics *m) {
    AK_CHECK(header(o, "ak_llm_http_requests_total", "counter",
                    "HTTP requests by endpoint and status code."));
    for (int e = 0; e < AK__EP_COUNT; e++)
        for (int c = 0; c < AK__CODE_SLOTS; c++) {
            if (!m->requests[e][c]) continue;
            char code[8] = "other";
            if (c < AK__CODE_SLOTS - 1) snprintf(code, sizeof code, "%d", k_codes[c]);
            AK_CHECK(ak__bytes_appendf(
                o, "ak_llm_http_requests_total{endpoint=\"%s\",code=\"%s\"} %llu\n", k_endpoints[e],
                code, (unsigned long long)m->requests[e][c]));
        }
    AK_CHECK(
        header(o, "ak_llm_request_finished_total", "counter", "Finished generations by reason."));
    const char *const reasons[4] = {"stop", "length", "cancelled", "error"};
    const uint64_t counts[4] = {m->finished_stop, m->finished_length, m->finished_cancelled,
                                m->finished_error};
    for (int i = 0; i < 4; i++)
        AK_CHECK(ak__bytes_appendf(o, "ak_llm_request_finished_total{reason=\"%s\"} %llu\n",
                                   reasons[i], (unsigned long long)counts[i]));
    return AK_OK;
}

/* Every reason is listed, also at 0, so alerts can be written before the first one. */
static ak_status rejections(ak__bytes *o, const ak__metrics *m) {
    AK_CHECK(header(o, "ak_llm_rejected_total", "counter",
                    "Connections and requests turned away before an endpoint, by reason."));
    for (int r = 0; r < AK__REJECT_COUNT; r++)
        AK_CHECK(ak__bytes_appendf(o, "ak_llm_rejected_total{reason=\"%s\"} %llu\n",
                                   k_reject_names[r], (unsigned long long)m->rejected[r]));
    return scalar(o, "ak_llm_http_connections", "gauge", "Open client connections.",
                  m->connections);
}

static ak_status engine_gauges(ak__bytes *o, const ak_llm_engine_stats *s) {
    double usage = s->kv_blocks_total > 0 ? (double)s->kv_blocks_used / s->kv_blocks_total : 0;
    double live =
        s->kv_token_slots_used > 0 ? (double)s->kv_tokens_live / (double)s->kv_token_slots_used : 0;
    AK_CHECK(scalar(o, "ak_llm_requests_running", "gauge", "Sequences the engine is running.",
                    s->running));
    AK_CHECK(scalar(o, "ak_llm_requests_waiting", "gauge", "Sequences waiting to be scheduled.",
                    s->waiting));
    AK_CHECK(scalar(o, "ak_llm_kv_cache_usage_ratio", "gauge",
                    "KV blocks in use (by sequences or the prefix cache) / all blocks.", usage));
    AK_CHECK(scalar(o, "ak_llm_kv_cache_live_ratio", "gauge",
                    "Tokens held by running sequences / the token slots of their blocks.", live));
    AK_CHECK(scalar(o, "ak_llm_kv_blocks_total", "gauge", "KV cache blocks.", s->kv_blocks_total));
    AK_CHECK(
        scalar(o, "ak_llm_kv_blocks_used", "gauge", "KV cache blocks in use.", s->kv_blocks_used));
    AK_CHECK(scalar(o, "ak_llm_engine_steps_total", "counter", "Engine steps.", (double)s->steps));
    AK_CHECK(scalar(o, "ak_llm_preemptions_total", "counter", "Sequences preempted for KV blocks.",
                    (double)s->preemptions));
    AK_CHECK(scalar(o, "ak_llm_spec_proposed_tokens_total", "counter", "Draft tokens proposed.",
                    (double)s->spec_proposed));
    return scalar(o, "ak_llm_spec_accepted_tokens_total", "counter", "Draft tokens accepted.",
                  (double)s->spec_accepted);
}

ak_status ak__metrics_render(ak__metrics *m, const ak_llm_engine_stats *stats, ak__bytes *out) {
    pthread_mutex_lock(&m->mu);
    ak__metrics snap = *m; /* render from a copy: the lock is not held across allocations */
    pthread_mutex_unlock(&m->mu);
    AK_CHECK(requests(out, &snap));
    AK_CHECK(rejections(out, &snap));
    AK_CHECK(scalar(out, "ak_llm_prompt_tokens_total", "counter",
                    "Prompt tokens of finished requests.", (double)snap.prompt_tokens));
    AK_CHECK(scalar(out, "ak_llm_prompt_tokens_cached_total", "counter",
                    "Prompt tokens served from the prefix cache.",
                    (double)snap.cached_prompt_tokens));
    AK_CHECK(scalar(out, "ak_llm_generation_tokens_total", "counter", "Generated tokens.",
                    (double)snap.generation_tokens));
    AK_CHECK(scalar(out, "ak_llm_http_requests_in_flight", "gauge",
                    "Generation requests being served.", snap.in_flight));
    AK_CHECK(histogram(out, "ak_llm_time_to_first_token_seconds",
                       "From the request to its first generated token.", &snap.ttft, k_ttft_le));
    AK_CHECK(histogram(out, "ak_llm_inter_token_latency_seconds",
                       "Between consecutive tokens of a sample.", &snap.itl, k_itl_le));
    AK_CHECK(histogram(out, "ak_llm_e2e_request_latency_seconds",
                       "From the request to its last token.", &snap.e2e, k_e2e_le));
    return stats ? engine_gauges(out, stats) : AK_OK;
}
