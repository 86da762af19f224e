/* The access log (see access_log.h). Every text field a client chose (path, user) is
 * escaped, so a request cannot forge log lines. */
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "core/check.h"
#include "llm/server/access_log.h"

ak_status ak__access_log_init(ak__access_log *log, FILE *out, int json) {
    memset(log, 0, sizeof *log);
    if (pthread_mutex_init(&log->mu, NULL) != 0)
        return AK_FAIL(AK_ERR_INTERNAL, "access log: mutex");
    log->out = out;
    log->json = json;
    return AK_OK;
}

void ak__access_log_destroy(ak__access_log *log) {
    if (log->out) fflush(log->out);
    pthread_mutex_destroy(&log->mu);
}

/* Text: bytes outside printable ASCII, quotes and backslashes as \xNN. JSON: a string
 * body with \uNNNN for control bytes and bytes >= 0x7f (each byte on its own). */
static void put_escaped(FILE *f, const char *s, int json) {
    if (!s) s = "-";
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p >= 0x20 && *p < 0x7f && *p != '"' && *p != '\\') fputc(*p, f);
        else if (json && (*p == '"' || *p == '\\')) fprintf(f, "\\%c", *p);
        else if (json) fprintf(f, "\\u%04x", *p);
        else fprintf(f, "\\x%02x", *p);
    }
}

static void put_time(FILE *f) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    time_t t = tv.tv_sec;
    gmtime_r(&t, &tm);
    char buf[32];
    strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
    fprintf(f, "%s.%03dZ", buf, (int)(tv.tv_usec / 1000));
}

static void write_json(FILE *f, const ak__access_entry *e, uint64_t suppressed) {
    fputs("{\"time\":\"", f);
    put_time(f);
    fputs("\",\"client\":\"", f);
    put_escaped(f, e->client, 1);
    fputs("\",\"method\":\"", f);
    put_escaped(f, e->method, 1);
    fputs("\",\"path\":\"", f);
    put_escaped(f, e->path, 1);
    fprintf(f, "\",\"status\":%d,\"bytes\":%llu,\"latency_s\":%.6f,\"request_id\":\"", e->status,
            (unsigned long long)e->bytes, e->latency_s);
    put_escaped(f, e->request_id, 1);
    fputs("\",\"user\":\"", f);
    put_escaped(f, e->user, 1);
    fputc('"', f);
    if (e->reason) fprintf(f, ",\"rejected\":\"%s\"", e->reason);
    if (suppressed) fprintf(f, ",\"rejections_not_logged\":%llu", (unsigned long long)suppressed);
    fputs("}\n", f);
}

static void write_text(FILE *f, const ak__access_entry *e, uint64_t suppressed) {
    put_time(f);
    fputc(' ', f);
    put_escaped(f, e->client, 0);
    fputs(" \"", f);
    put_escaped(f, e->method, 0);
    fputc(' ', f);
    put_escaped(f, e->path, 0);
    fprintf(f, "\" %d %llu %.3fms ", e->status, (unsigned long long)e->bytes,
            e->latency_s * 1e3);
    put_escaped(f, e->request_id, 0);
    fputs(" user=\"", f);
    put_escaped(f, e->user, 0);
    fputc('"', f);
    if (e->reason) fprintf(f, " rejected=%s", e->reason);
    if (suppressed) fprintf(f, " (%llu rejections not logged)", (unsigned long long)suppressed);
    fputc('\n', f);
}

/* Under log->mu: whether a rejection line may be written this second. */
static int rejection_allowed(ak__access_log *log) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    if ((int64_t)t.tv_sec != log->window_s) {
        log->window_s = (int64_t)t.tv_sec;
        log->in_window = 0;
    }
    if (log->in_window >= AK__ACCESS_LOG_REJECTS_PER_S) {
        log->suppressed++;
        return 0;
    }
    log->in_window++;
    return 1;
}

void ak__access_log_write(ak__access_log *log, const ak__access_entry *e) {
    if (!log || !log->out) return;
    pthread_mutex_lock(&log->mu);
    if (!e->rejected || rejection_allowed(log)) {
        uint64_t suppressed = e->rejected ? log->suppressed : 0;
        if (e->rejected) log->suppressed = 0;
        if (log->json) write_json(log->out, e, suppressed);
        else write_text(log->out, e, suppressed);
        fflush(log->out);
    }
    pthread_mutex_unlock(&log->mu);
}
