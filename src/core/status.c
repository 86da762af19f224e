/* Status codes, their names, and the thread-local last-error message. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/check.h"

static _Thread_local char last_error[512];

const char *ak_status_str(ak_status status) {
    switch (status) {
    case AK_OK: return "ok";
    case AK_ERR_INVALID_ARG: return "invalid argument";
    case AK_ERR_UNSUPPORTED: return "unsupported";
    case AK_ERR_NO_MEMORY: return "out of memory";
    case AK_ERR_IO: return "I/O error";
    case AK_ERR_REMOTE: return "remote peer failed";
    case AK_ERR_TIMEOUT: return "timeout";
    case AK_ERR_MISMATCH: return "mismatch across ranks";
    case AK_ERR_INVALID_MODEL: return "invalid model";
    case AK_ERR_INTERNAL: return "internal error";
    case AK_STATUS_COUNT_: break;
    }
    return "unknown status";
}

const char *ak_last_error(void) { return last_error; }

void ak_clear_error(void) { last_error[0] = '\0'; }

ak_status ak__fail(ak_status status, const char *file, int line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    const char *base = strrchr(file, '/');
    /* The breadcrumb: where the failure was first seen, for AK_LOG=debug. */
    AK_LOG_DEBUG(AK_SUBSYS_CORE, "%s:%d: %s: %s", base ? base + 1 : file, line,
                 ak_status_str(status), last_error);
    return status;
}

ak_status ak_version(int *major, int *minor, int *patch) {
    AK_ARG_CHECK(major && minor && patch, "ak_version: NULL output pointer");
    *major = AK_VERSION_MAJOR;
    *minor = AK_VERSION_MINOR;
    *patch = AK_VERSION_PATCH;
    return AK_OK;
}
