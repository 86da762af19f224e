/* Logging with a level and a subsystem mask (AK_LOG, AK_LOG_SUBSYS) and a settable sink. */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "core/check.h"

static _Atomic int log_level = AK_LOG_WARN;
static _Atomic uint32_t log_mask = AK_SUBSYS_ALL;
static pthread_mutex_t sink_lock = PTHREAD_MUTEX_INITIALIZER;
static ak_log_fn sink_fn;
static void *sink_user;

static const char *const level_names[] = {"off", "error", "warn", "info", "debug", "trace"};
static const char *const subsys_names[] = {"core",  "kernels", "comm", "train",
                                           "infer", "llm",     "plan", "cli"};

ak_status ak_log_parse_level(const char *text, ak_log_level *out) {
    AK_ARG_CHECK(text && out, "ak_log_parse_level: NULL argument");
    for (int i = 0; i <= AK_LOG_TRACE; i++) {
        if (strcasecmp(text, level_names[i]) == 0) {
            *out = (ak_log_level)i;
            return AK_OK;
        }
    }
    if (strcasecmp(text, "warning") == 0) {
        *out = AK_LOG_WARN;
        return AK_OK;
    }
    return AK_FAIL(AK_ERR_INVALID_ARG,
                   "log level '%s' is not one of off, error, warn, info, debug, trace", text);
}

static int subsys_lookup(const char *name, size_t len, uint32_t *bit) {
    if (len == 3 && strncasecmp(name, "all", 3) == 0) {
        *bit = AK_SUBSYS_ALL;
        return 1;
    }
    for (size_t i = 0; i < sizeof subsys_names / sizeof *subsys_names; i++) {
        if (strlen(subsys_names[i]) == len && strncasecmp(name, subsys_names[i], len) == 0) {
            *bit = 1u << i;
            return 1;
        }
    }
    return 0;
}

ak_status ak_log_parse_subsystems(const char *text, uint32_t *out) {
    AK_ARG_CHECK(text && out, "ak_log_parse_subsystems: NULL argument");
    uint32_t mask = 0;
    const char *p = text;
    while (*p) {
        size_t len = strcspn(p, ",");
        uint32_t bit;
        if (len > 0 && !subsys_lookup(p, len, &bit))
            return AK_FAIL(AK_ERR_INVALID_ARG,
                           "unknown log subsystem '%.*s' (known: core, kernels, comm, train, "
                           "infer, llm, plan, cli, all)",
                           (int)len, p);
        if (len > 0) mask |= bit;
        p += len;
        if (*p == ',') p++;
    }
    *out = mask;
    return AK_OK;
}

ak_status ak_log_set_level(ak_log_level level) {
    AK_ARG_CHECK(level >= AK_LOG_OFF && level <= AK_LOG_TRACE, "log level %d out of range",
                 (int)level);
    atomic_store(&log_level, (int)level);
    return AK_OK;
}

ak_status ak_log_set_subsystems(uint32_t mask) {
    atomic_store(&log_mask, mask);
    return AK_OK;
}

ak_status ak_log_set_callback(ak_log_fn fn, void *user) {
    pthread_mutex_lock(&sink_lock);
    sink_fn = fn;
    sink_user = user;
    pthread_mutex_unlock(&sink_lock);
    return AK_OK;
}

int ak__log_enabled(ak_log_level level, ak_subsys subsys) {
    return (int)level <= atomic_load_explicit(&log_level, memory_order_relaxed) &&
           (atomic_load_explicit(&log_mask, memory_order_relaxed) & (uint32_t)subsys);
}

static const char *subsys_name(ak_subsys subsys) {
    for (size_t i = 0; i < sizeof subsys_names / sizeof *subsys_names; i++)
        if ((uint32_t)subsys == 1u << i) return subsys_names[i];
    return "?";
}

void ak__log(ak_log_level level, ak_subsys subsys, const char *fmt, ...) {
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    /* The lock keeps lines whole and lets ak_log_set_callback swap the sink safely. */
    pthread_mutex_lock(&sink_lock);
    if (sink_fn) {
        sink_fn(level, subsys, line, sink_user);
    } else {
        fprintf(stderr, "[ak %s %s] %s\n", level_names[level], subsys_name(subsys), line);
    }
    pthread_mutex_unlock(&sink_lock);
}
