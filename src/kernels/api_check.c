/* Argument checks shared by the public kernel entry points (see api_check.h). */
#include "kernels/api_check.h"

#include <stdint.h>

#include "core/check.h"

ak_status ak__check_count(const char *fn, ak_dtype dtype, size_t n, size_t *es) {
    AK_ARG_CHECK((unsigned)dtype < AK_DTYPE_COUNT_, "%s: unknown dtype %d", fn, (int)dtype);
    AK_CHECK(ak_dtype_size(dtype, es));
    AK_ARG_CHECK(n <= SIZE_MAX / *es, "%s: n = %zu elements overflows the address space", fn, n);
    return AK_OK;
}

ak_status ak__check_buf(const char *fn, const char *name, const void *p, size_t n, size_t es) {
    if (n == 0) return AK_OK;
    AK_ARG_CHECK(p, "%s: %s is NULL with n = %zu", fn, name, n);
    AK_ARG_CHECK((uintptr_t)p % es == 0, "%s: %s = %p is not aligned to its %zu-byte elements",
                 fn, name, p, es);
    return AK_OK;
}

ak_status ak__check_overlap(const char *fn, const char *dname, const void *dst, size_t dbytes,
                            const char *sname, const void *src, size_t sbytes, int exact_ok) {
    if (dbytes == 0 || sbytes == 0 || (exact_ok && dst == src)) return AK_OK;
    uintptr_t d = (uintptr_t)dst, s = (uintptr_t)src;
    AK_ARG_CHECK(d + dbytes <= s || s + sbytes <= d, "%s: %s overlaps %s%s", fn, dname, sname,
                 exact_ok ? " without being the same buffer" : "");
    return AK_OK;
}

ak_status ak__check_binary(const char *fn, const void *dst, const void *a, const void *b,
                           size_t n, size_t es) {
    AK_CHECK(ak__check_buf(fn, "dst", dst, n, es));
    AK_CHECK(ak__check_buf(fn, "a", a, n, es));
    AK_CHECK(ak__check_buf(fn, "b", b, n, es));
    AK_CHECK(ak__check_overlap(fn, "dst", dst, n * es, "a", a, n * es, 1));
    return ak__check_overlap(fn, "dst", dst, n * es, "b", b, n * es, 1);
}
