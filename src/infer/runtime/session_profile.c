/* A profiling session's event log and its Chrome-trace file (ak_session_end_profiling):
 * one event per node run and one per ak_session_run, kept in memory until written, so a
 * trace covers exactly the runs between two calls (onnxruntime's end_profiling). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "infer/runtime/session.h"

/* About 24 bytes each: 16 M events (~400 MB) caps a session that profiles forever. */
#define AK_PROFILE_MAX_EVENTS ((size_t)1 << 24)

void ak__session_log_event(ak_session *s, int32_t node, uint64_t t0_ns, uint64_t dur_ns) {
    if (!s->profile || !s->model) return; /* subsessions: their owner node is the event */
    if (s->num_events == s->cap_events) {
        if (s->cap_events >= AK_PROFILE_MAX_EVENTS) return;
        size_t cap = s->cap_events ? s->cap_events * 2 : 1024;
        ak__profile_event *grown = realloc(s->events, cap * sizeof *grown);
        if (!grown) return; /* profiling must not fail a run: the trace is shorter */
        s->events = grown;
        s->cap_events = cap;
    }
    s->events[s->num_events++] = (ak__profile_event){node, t0_ns, dur_ns};
}

void ak__session_free_events(ak_session *s) {
    free(s->events);
    s->events = NULL;
    s->num_events = s->cap_events = 0;
}

/* A JSON string literal of `text` then `suffix` (quotes, backslashes and control bytes of
 * text escaped). */
static void put_json_string(FILE *f, const char *text, const char *suffix) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
        else fputc(*p, f);
    }
    fputs(suffix, f);
    fputc('"', f);
}

static void put_event(FILE *f, const ak_session *s, const ak__profile_event *ev, int first) {
    double ts = (double)(ev->t0_ns - s->profile_start_ns) / 1000.0;
    double dur = (double)ev->dur_ns / 1000.0;
    fputs(first ? "\n" : ",\n", f);
    if (ev->node < 0) {
        fprintf(f, "{\"cat\":\"Session\",\"name\":\"model_run\",\"ph\":\"X\",\"pid\":1,\"tid\":1,"
                   "\"ts\":%.3f,\"dur\":%.3f,\"args\":{}}", ts, dur);
        return;
    }
    const ak__ir_node *n = s->nodes[ev->node].node;
    fputs("{\"cat\":\"Node\",\"name\":", f);
    put_json_string(f, n->name[0] ? n->name : n->op_type, "_kernel_time"); /* as onnxruntime */
    fprintf(f, ",\"ph\":\"X\",\"pid\":1,\"tid\":1,\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"op_name\":",
            ts, dur);
    put_json_string(f, n->op_type, "");
    fputs("}}", f);
}

ak_status ak_session_end_profiling(ak_session *s, const char *path) {
    AK_ARG_CHECK(s && path, "ak_session_end_profiling: NULL argument");
    if (!s->profile)
        return AK_FAIL(AK_ERR_INVALID_ARG,
                       "ak_session_end_profiling: the session was created without profiling");
    FILE *f = fopen(path, "w");
    if (!f) return AK_FAIL(AK_ERR_IO, "cannot write the profile '%s'", path);
    fputc('[', f);
    for (size_t i = 0; i < s->num_events; i++) put_event(f, s, &s->events[i], i == 0);
    fputs("\n]\n", f);
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) return AK_FAIL(AK_ERR_IO, "writing the profile '%s' failed", path);
    s->num_events = 0;
    return AK_OK;
}
