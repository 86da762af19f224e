/* The process-wide Chrome-trace (Perfetto JSON) writer.
 *
 * Events are appended to an in-memory list under a mutex (cheap next to what is being
 * traced: collectives, operators, steps) and streamed to the file, which stays open from
 * start to stop: the thread that adds an event writes the list out once it holds
 * TRACE_FLUSH_EVENTS events or TRACE_FLUSH_NS has passed since the last write. So a job
 * that is killed keeps every event up to about a second before its end; its file lacks
 * only the closing "\n]}\n" (each event is written with the separator before it, so
 * appending that makes it valid JSON). A stopped trace is a complete JSON document. Open
 * with chrome://tracing or ui.perfetto.dev. */
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

/* Buffered events are written out at this many, or this long after the last write. */
#define TRACE_FLUSH_EVENTS 4096
#define TRACE_FLUSH_NS 1000000000ull

static pthread_mutex_t trace_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int trace_on;
static char *trace_path;
static FILE *trace_file;      /* open while the trace runs */
static size_t trace_written;  /* events already in the file */
static int trace_write_error; /* a write failed: reported by ak_trace_stop */
static uint64_t trace_flushed_ns;
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
    pthread_mutex_lock(&trace_lock);
    ak_status st = AK_OK;
    FILE *f = NULL;
    char *copy = NULL;
    if (atomic_load(&trace_on)) {
        /* checked before opening: "w" would truncate the running trace's file */
        st = AK_FAIL(AK_ERR_INVALID_ARG, "ak_trace_start: a trace to '%s' is already running",
                     trace_path);
    } else if (!(f = fopen(path, "w"))) { /* fail now, not at the end of a long run */
        st = AK_FAIL(AK_ERR_IO, "ak_trace_start: cannot open '%s' for writing", path);
    } else if (!(copy = strdup(path))) {
        fclose(f);
        st = AK_FAIL(AK_ERR_NO_MEMORY, "ak_trace_start: out of memory");
    } else {
        free(trace_path);
        trace_path = copy;
        trace_file = f;
        trace_written = 0;
        trace_write_error = fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[", f) < 0 ||
                            fflush(f) != 0;
        trace_origin_ns = trace_flushed_ns = ak_now_ns();
        atomic_store(&trace_on, 1);
    }
    pthread_mutex_unlock(&trace_lock);
    return st;
}

static void write_event(FILE *f, const trace_event *e, int pid);

/* Writes the buffered events to the file and frees them; the caller holds trace_lock. */
static void flush_locked(void) {
    int pid = (int)getpid();
    for (size_t i = 0; i < nevents; i++) {
        if (trace_file) {
            fputs(trace_written++ ? ",\n" : "\n", trace_file);
            write_event(trace_file, &events[i], pid);
        }
        free(events[i].category);
        free(events[i].name);
    }
    nevents = 0;
    if (trace_file && (ferror(trace_file) || fflush(trace_file) != 0)) trace_write_error = 1;
    trace_flushed_ns = ak_now_ns();
}

static ak_status push_event(char phase, const char *category, const char *name, uint64_t ts,
                            uint64_t dur, double value) {
    if (!ak_trace_enabled()) return AK_OK;
    AK_ARG_CHECK(category && name, "trace event: NULL category or name");
    trace_event e = {phase, strdup(category), strdup(name), ts, dur, value, current_tid()};
    if (!e.category || !e.name) goto oom;
    pthread_mutex_lock(&trace_lock);
    if (!atomic_load(&trace_on)) { /* stopped since the check above: the file is closed */
        pthread_mutex_unlock(&trace_lock);
        free(e.category);
        free(e.name);
        return AK_OK;
    }
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
    if (nevents >= TRACE_FLUSH_EVENTS || ak_now_ns() - trace_flushed_ns >= TRACE_FLUSH_NS)
        flush_locked();
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
    flush_locked();
    if (fputs("\n]}\n", trace_file) < 0) trace_write_error = 1;
    if (fclose(trace_file) != 0) trace_write_error = 1;
    trace_file = NULL;
    ak_status st = AK_OK;
    if (trace_write_error) st = AK_FAIL(AK_ERR_IO, "ak_trace_stop: error writing '%s'", trace_path);
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
