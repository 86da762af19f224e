/* The server's access log: one line per request (time, client, method, path, status,
 * bytes out, latency, request id, user) and one per connection turned away, as text or
 * as JSON lines. Written straight to its stream, so it shows at the default log level.
 * Lines about rejections are rate-limited, so a flood cannot fill the disk. */
#ifndef AK_LLM_SERVER_ACCESS_LOG_H
#define AK_LLM_SERVER_ACCESS_LOG_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#include "llm/server/metrics.h"

#define AK__ACCESS_LOG_REJECTS_PER_S 20 /* rejection lines per second at most */

typedef struct ak__access_log {
    FILE *out;          /* NULL = off */
    int json;
    pthread_mutex_t mu; /* one line at a time, and the limiter below */
    int64_t window_s;   /* the second the limiter counts in */
    uint32_t in_window;
    uint64_t suppressed; /* rejection lines dropped since the last one written */
} ak__access_log;

typedef struct ak__access_entry {
    const char *client, *method, *path; /* NULL = "-" */
    int status;                         /* 0 = no answer (the connection was closed) */
    uint64_t bytes;                     /* body bytes sent */
    double latency_s;
    const char *request_id, *user;      /* NULL = "-" */
    int rejected;                       /* goes through the rate limiter */
    const char *reason;                 /* the rejection's reason, or NULL */
} ak__access_entry;

ak_status ak__access_log_init(ak__access_log *log, FILE *out, int json);
void ak__access_log_destroy(ak__access_log *log);
void ak__access_log_write(ak__access_log *log, const ak__access_entry *e);

#endif /* AK_LLM_SERVER_ACCESS_LOG_H */
