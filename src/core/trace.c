/* The process-wide Chrome-trace (Perfetto JSON) writer.
 *
 * Events are appended to an in-memory list under a mutex (cheap next to what is being
 * traced: collectives, operators, steps) and written as one JSON document on stop, so
 * a crash-free run always leaves a well-formed file. Open with chrome://tracing or
 * ui.perfetto.dev. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/check.h"
#include "core/init.h"

typedef struct trace_event {
    char phase; /* 'X' complete, 'i' instant, 'C' counter */
    char *category, *name;
    uint64_t ts_ns, dur_ns;
    double value;
    long tid;
} trace_event;

static pthread_mutex_t trace_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int trace_on;
static char *trace_path;
static trace_event *events;
static size_t nevents, cap_events;
static uint64_t trace_origin_ns;

static long current_tid(void) {
    static _Thread_local long tid;
    if (!tid) tid = (long)syscall(SYS_gettid);
    return tid;
}

int ak_trace_enabled(void) { return atomic_load_explicit(&trace_on, memory_order_relaxed); }

/* Copies path with every "%p" replaced by the process id: one file per rank when several
 * processes share one AK_TRACE setting. */
static ak_status expand_path(const char *path, char *out, size_t cap) {
    size_t n = 0;
    for (const char *p = path; *p; p++) {
        char pid[24] = "";
        const char *piece = pid;
        if (p[0] == '%' && p[1] == 'p') {
            snprintf(pid, sizeof pid, "%d", (int)getpid());
            p++;
        } else {
            pid[0] = *p, pid[1] = '\0';
        }
        size_t len = strlen(piece);
        if (n + len >= cap) return AK_FAIL(AK_ERR_INVALID_ARG, "ak_trace_start: path too long");
        memcpy(out + n, piece, len);
        n += len;
    }
    out[n] = '\0';
    return AK_OK;
}

ak_status ak_trace_start(const char *path_template) {
    AK_ARG_CHECK(path_template && path_template[0], "ak_trace_start: empty path");
    char path[4096];
    AK_CHECK(expand_path(path_template, path, sizeof path));
    FILE *probe = fopen(path, "w"); /* fail now, not at the end of a long run */
    if (!probe) return AK_FAIL(AK_ERR_IO, "ak_trace_start: cannot open '%s' for writing", path);
    fclose(probe);
    pthread_mutex_lock(&trace_lock);
    ak_status st = AK_OK;
    if (atomic_load(&trace_on)) {
        st = AK_FAIL(AK_ERR_INVALID_ARG, "ak_trace_start: a trace to '%s' is already running",
                     trace_path);
    } else {
        free(trace_path);
        trace_path = strdup(path);
        trace_origin_ns = ak_now_ns();
        atomic_store(&trace_on, 1);
    }
    pthread_mutex_unlock(&trace_lock);
    return st;
}

static ak_status push_event(char phase, const char *category, const char *name, uint64_t ts,
                            uint64_t dur, double value) {
    if (!ak_trace_enabled()) return AK_OK;
    AK_ARG_CHECK(category && name, "trace event: NULL category or name");
    trace_event e = {phase, strdup(category), strdup(name), ts, dur, value, current_tid()};
    if (!e.category || !e.name) goto oom;
    pthread_mutex_lock(&trace_lock);
    if (nevents == cap_events) {
        size_t cap = cap_events ? cap_events * 2 : 1024;
        trace_event *grown = realloc(events, cap * sizeof *grown);
        if (!grown) {
            pthread_mutex_unlock(&trace_lock);
            goto oom;
        }
        events = grown;
        cap_events = cap;
    }
    events[nevents++] = e;
    pthread_mutex_unlock(&trace_lock);
    return AK_OK;
oom:
    free(e.category);
    free(e.name);
    return AK_FAIL(AK_ERR_NO_MEMORY, "trace: out of memory");
}

ak_status ak_trace_complete(const char *category, const char *name, uint64_t start_ns,
                            uint64_t dur_ns) {
    return push_event('X', category, name, start_ns, dur_ns, 0);
}

ak_status ak_trace_instant(const char *category, const char *name) {
    return push_event('i', category, name, ak_now_ns(), 0, 0);
}

ak_status ak_trace_counter(const char *category, const char *name, double value) {
    return push_event('C', category, name, ak_now_ns(), 0, value);
}

static void write_json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static void write_event(FILE *f, const trace_event *e, int pid) {
    double ts_us = (double)(int64_t)(e->ts_ns - trace_origin_ns) / 1e3;
    fprintf(f, "{\"ph\":\"%c\",\"pid\":%d,\"tid\":%ld,\"ts\":%.3f,\"cat\":", e->phase, pid,
            e->tid, ts_us);
    write_json_string(f, e->category);
    fputs(",\"name\":", f);
    write_json_string(f, e->name);
    if (e->phase == 'X') fprintf(f, ",\"dur\":%.3f", (double)e->dur_ns / 1e3);
    if (e->phase == 'i') fputs(",\"s\":\"t\"", f);
    if (e->phase == 'C') {
        fputs(",\"args\":{", f);
        write_json_string(f, e->name);
        fprintf(f, ":%.17g}", e->value);
    }
    fputc('}', f);
}

ak_status ak_trace_stop(void) {
    pthread_mutex_lock(&trace_lock);
    if (!atomic_load(&trace_on)) {
        pthread_mutex_unlock(&trace_lock);
        return AK_OK;
    }
    atomic_store(&trace_on, 0);
    ak_status st = AK_OK;
    FILE *f = fopen(trace_path, "w");
    if (!f) {
        st = AK_FAIL(AK_ERR_IO, "ak_trace_stop: cannot write '%s'", trace_path);
    } else {
        int pid = (int)getpid();
        fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n", f);
        for (size_t i = 0; i < nevents; i++) {
            write_event(f, &events[i], pid);
            fputs(i + 1 < nevents ? ",\n" : "\n", f);
        }
        fputs("]}\n", f);
        if (fclose(f) != 0) st = AK_FAIL(AK_ERR_IO, "ak_trace_stop: error writing '%s'", trace_path);
    }
    for (size_t i = 0; i < nevents; i++) {
        free(events[i].category);
        free(events[i].name);
    }
    free(events);
    events = NULL;
    nevents = cap_events = 0;
    pthread_mutex_unlock(&trace_lock);
    return st;
}

static void trace_at_exit(void) { ak_trace_stop(); }

ak_status ak__trace_start_at_exit(const char *path) {
    AK_CHECK(ak_trace_start(path));
    atexit(trace_at_exit);
    return AK_OK;
}
