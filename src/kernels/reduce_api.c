/* Public reduction entry points for the collectives (kernels.h): ak_reduce,
 * ak_reduce_avg_finish, ak_reduce_op_name. They validate their arguments, then run the
 * active dispatch table (AVG runs the SUM kernel; the collective divides afterwards). */
#include <stdint.h>

#include "accelkit/kernels.h"
#include "core/check.h"
#include "kernels/dispatch.h"
/* avg-finish has no dispatch member: one pass after a whole collective, not a hot loop */
#include "kernels/ref/reduce_ref.h"

static const char *const op_names[AK_REDUCE_COUNT_] = {
    [AK_REDUCE_SUM] = "sum", [AK_REDUCE_PROD] = "prod", [AK_REDUCE_MIN] = "min",
    [AK_REDUCE_MAX] = "max", [AK_REDUCE_AVG] = "avg",
};

const char *ak_reduce_op_name(ak_reduce_op op) {
    return (unsigned)op < AK_REDUCE_COUNT_ ? op_names[op] : "unknown";
}

/* ---- validation --------------------------------------------------------------------- */

/* Element size of a known dtype, and n elements must fit in the address space. */
static ak_status reduce_elem_size(const char *fn, ak_dtype dtype, size_t n, size_t *es) {
    AK_ARG_CHECK((unsigned)dtype < AK_DTYPE_COUNT_, "%s: unknown dtype %d", fn, (int)dtype);
    AK_CHECK(ak_dtype_size(dtype, es));
    AK_ARG_CHECK(n <= SIZE_MAX / *es, "%s: n = %zu elements overflows the address space", fn,
                 n);
    return AK_OK;
}

/* A buffer of n elements of es bytes: not NULL unless empty, aligned to es (the kernels
 * access it through typed pointers). */
static ak_status reduce_check_buf(const char *fn, const char *name, const void *p, size_t n,
                                  size_t es) {
    if (n == 0) return AK_OK;
    AK_ARG_CHECK(p, "%s: %s is NULL with n = %zu", fn, name, n);
    AK_ARG_CHECK((uintptr_t)p % es == 0, "%s: %s = %p is not aligned to its %zu-byte elements",
                 fn, name, p, es);
    return AK_OK;
}

/* dst and an input of the same byte length: the same buffer or disjoint. The vector
 * kernels read a block of each input before writing it, which is only safe when the
 * input sits exactly at dst. */
static ak_status reduce_check_alias(const char *fn, const void *dst, const char *name,
                                    const void *src, size_t bytes) {
    if (bytes == 0 || dst == src) return AK_OK;
    uintptr_t d = (uintptr_t)dst, s = (uintptr_t)src;
    AK_ARG_CHECK(d + bytes <= s || s + bytes <= d,
                 "%s: dst overlaps %s without being the same buffer", fn, name);
    return AK_OK;
}

/* ---- entry points ------------------------------------------------------------------- */

ak_status ak_reduce(ak_reduce_op op, ak_dtype dtype, void *dst, const void *a, const void *b,
                    size_t n) {
    static const char fn[] = "ak_reduce";
    size_t es;
    AK_ENSURE_INIT();
    AK_ARG_CHECK((unsigned)op < AK_REDUCE_COUNT_, "%s: unknown op %d", fn, (int)op);
    AK_CHECK(reduce_elem_size(fn, dtype, n, &es));
    AK_CHECK(reduce_check_buf(fn, "dst", dst, n, es));
    AK_CHECK(reduce_check_buf(fn, "a", a, n, es));
    AK_CHECK(reduce_check_buf(fn, "b", b, n, es));
    AK_CHECK(reduce_check_alias(fn, dst, "a", a, n * es));
    AK_CHECK(reduce_check_alias(fn, dst, "b", b, n * es));
    if (n == 0) return AK_OK;
    ak_reduce_op kop = op == AK_REDUCE_AVG ? AK_REDUCE_SUM : op;
    ak__kernels_active()->reduce[kop][dtype](dst, a, b, n);
    return AK_OK;
}

ak_status ak_reduce_avg_finish(ak_dtype dtype, void *buf, size_t n, int divisor) {
    static const char fn[] = "ak_reduce_avg_finish";
    size_t es;
    AK_ENSURE_INIT();
    AK_CHECK(reduce_elem_size(fn, dtype, n, &es));
    AK_CHECK(reduce_check_buf(fn, "buf", buf, n, es));
    AK_ARG_CHECK(divisor >= 1, "%s: divisor = %d must be at least 1", fn, divisor);
    if (n == 0 || divisor == 1) return AK_OK; /* x / 1 == x for every dtype */
    ak__reduce_avg_finish_ref(dtype, buf, n, divisor);
    return AK_OK;
}
