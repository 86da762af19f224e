/* Server metrics in Prometheus text format (GET /metrics): requests by endpoint and HTTP
 * status, prompt and generated tokens, histograms of time to first token, inter-token
 * latency and request latency, and the engine's gauges (running/waiting requests, KV
 * cache usage) read from ak_llm_engine_get_stats when the page is rendered.
 * Thread-safe: observations come from every connection thread. */
#ifndef AK_LLM_SERVER_METRICS_H
#define AK_LLM_SERVER_METRICS_H

#include <pthread.h>
#include <stdint.h>

#include "accelkit/llm.h"
#include "llm/server/detok.h"

#define AK__METRICS_BUCKETS 16

typedef struct ak__histogram {
    uint64_t counts[AK__METRICS_BUCKETS]; /* per bucket (not cumulative) + the +Inf one */
    double sum;
    uint64_t count;
} ak__histogram;

enum { AK__EP_COMPLETIONS, AK__EP_CHAT, AK__EP_MODELS, AK__EP_HEALTH, AK__EP_METRICS,
       AK__EP_EMBEDDINGS, AK__EP_TOKENIZE, AK__EP_DETOKENIZE, AK__EP_OTHER, AK__EP_COUNT };
enum { AK__CODE_SLOTS = 12 };

/* Why a connection or request was turned away before reaching an endpoint (net_guard.c,
 * the API key check, and the answers libmicrohttpd gives by itself). */
typedef enum ak__reject {
    AK__REJECT_AUTH,             /* missing or wrong API key (401) */
    AK__REJECT_PER_CLIENT,       /* the client address holds its connection limit */
    AK__REJECT_TOTAL_CAP,        /* every connection slot, the reserved ones too, is taken */
    AK__REJECT_RESERVED_SLOT,    /* a non-/health request on a slot kept for /health (503) */
    AK__REJECT_REQUEST_DEADLINE, /* header + body not received within the request timeout */
    AK__REJECT_HEADER_TOO_LARGE, /* 431 */
    AK__REJECT_BODY_TOO_LARGE,   /* 413 */
    AK__REJECT_MALFORMED,        /* a request libmicrohttpd could not parse (400 and kin) */
    AK__REJECT_DRAINING,         /* the server is shutting down (503) */
    AK__REJECT_LOADING,          /* the model is still loading (503) */
    AK__REJECT_COUNT
} ak__reject;

/* The label value of a reason in ak_llm_rejected_total. */
const char *ak__reject_name(ak__reject r);

typedef struct ak__metrics {
    pthread_mutex_t mu;
    uint64_t requests[AK__EP_COUNT][AK__CODE_SLOTS];
    uint64_t prompt_tokens, generation_tokens, cached_prompt_tokens;
    uint64_t finished_stop, finished_length, finished_cancelled, finished_error;
    ak__histogram ttft, itl, e2e;
    int32_t in_flight;
    uint64_t rejected[AK__REJECT_COUNT]; /* connections and requests turned away, by reason */
    int32_t connections;                 /* open client connections */
} ak__metrics;

ak_status ak__metrics_init(ak__metrics *m);
void ak__metrics_destroy(ak__metrics *m);

void ak__metrics_request(ak__metrics *m, int endpoint, int http_status);
void ak__metrics_tokens(ak__metrics *m, uint64_t prompt, uint64_t cached, uint64_t generated);
void ak__metrics_finish(ak__metrics *m, ak_finish_reason reason);
void ak__metrics_ttft(ak__metrics *m, double seconds);
void ak__metrics_itl(ak__metrics *m, double seconds);
void ak__metrics_e2e(ak__metrics *m, double seconds);
void ak__metrics_in_flight(ak__metrics *m, int delta);
void ak__metrics_reject(ak__metrics *m, ak__reject reason);
void ak__metrics_connections(ak__metrics *m, int delta);

/* Appends the Prometheus page; `stats` may be NULL (no engine gauges). */
ak_status ak__metrics_render(ak__metrics *m, const ak_llm_engine_stats *stats, ak__bytes *out);

#endif /* AK_LLM_SERVER_METRICS_H */
