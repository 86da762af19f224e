/* Internal error-handling and logging macros shared by every layer.
 *
 * ak__fail() records a thread-local message for ak_last_error(), leaves a debug-level
 * breadcrumb in the log, and returns the status so code can `return ak__fail(...)`. */
#ifndef AK_CORE_CHECK_H
#define AK_CORE_CHECK_H

#include <errno.h>

#include "accelkit/ak.h"

#if defined(__GNUC__)
#define AK_PRINTF(fmt_idx, arg_idx) __attribute__((format(printf, fmt_idx, arg_idx)))
#define AK_LIKELY(x) __builtin_expect(!!(x), 1)
#define AK_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define AK_PRINTF(fmt_idx, arg_idx)
#define AK_LIKELY(x) (x)
#define AK_UNLIKELY(x) (x)
#endif

/* Records the failure (message formatted like printf) and returns `status`. */
ak_status ak__fail(ak_status status, const char *file, int line, const char *fmt, ...)
    AK_PRINTF(4, 5);
#define AK_FAIL(status, ...) ak__fail((status), __FILE__, __LINE__, __VA_ARGS__)

/* Propagate a failing status to the caller. */
#define AK_CHECK(expr)                                                                   \
    do {                                                                                 \
        ak_status ak_check_st_ = (expr);                                                 \
        if (AK_UNLIKELY(ak_check_st_ != AK_OK)) return ak_check_st_;                     \
    } while (0)

/* Store a failing status in `st` and jump to `fail:` for cleanup. */
#define AK_CHECK_GOTO(st, expr)                                                          \
    do {                                                                                 \
        (st) = (expr);                                                                   \
        if (AK_UNLIKELY((st) != AK_OK)) goto fail;                                       \
    } while (0)

/* Fail with AK_ERR_INVALID_ARG when `cond` is false, naming the condition. */
#define AK_ARG_CHECK(cond, ...)                                                          \
    do {                                                                                 \
        if (AK_UNLIKELY(!(cond))) return AK_FAIL(AK_ERR_INVALID_ARG, __VA_ARGS__);       \
    } while (0)

/* Evaluate a syscall expression, retrying on EINTR; leaves the result in `rc`. */
#define AK_SYSCHECK(rc, expr)                                                            \
    do {                                                                                 \
        (rc) = (expr);                                                                   \
    } while ((rc) == -1 && errno == EINTR)

/* Logging (the mask and level come from AK_LOG / AK_LOG_SUBSYS). */
int ak__log_enabled(ak_log_level level, ak_subsys subsys);
void ak__log(ak_log_level level, ak_subsys subsys, const char *fmt, ...) AK_PRINTF(3, 4);
#define AK_LOG_AT(level, subsys, ...)                                                    \
    do {                                                                                 \
        if (ak__log_enabled((level), (subsys))) ak__log((level), (subsys), __VA_ARGS__); \
    } while (0)
#define AK_LOG_ERROR(subsys, ...) AK_LOG_AT(AK_LOG_ERROR, subsys, __VA_ARGS__)
#define AK_LOG_WARN(subsys, ...) AK_LOG_AT(AK_LOG_WARN, subsys, __VA_ARGS__)
#define AK_LOG_INFO(subsys, ...) AK_LOG_AT(AK_LOG_INFO, subsys, __VA_ARGS__)
#define AK_LOG_DEBUG(subsys, ...) AK_LOG_AT(AK_LOG_DEBUG, subsys, __VA_ARGS__)

/* Runs ak_init() once; every public entry point starts with this. */
#define AK_ENSURE_INIT() AK_CHECK(ak_init())

#endif /* AK_CORE_CHECK_H */
