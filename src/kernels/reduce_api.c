/* Public reduction entry points for the collectives (kernels.h): ak_reduce,
 * ak_reduce_avg_finish, ak_reduce_op_name. They validate their arguments, then run the
 * active dispatch table (AVG runs the SUM kernel; the collective divides afterwards). */
#include <stdint.h>

#include "accelkit/kernels.h"
#include "core/check.h"
#include "kernels/api_check.h"
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

/* ---- entry points ------------------------------------------------------------------- */

ak_status ak_reduce(ak_reduce_op op, ak_dtype dtype, void *dst, const void *a, const void *b,
                    size_t n) {
    static const char fn[] = "ak_reduce";
    size_t es;
    AK_ENSURE_INIT();
    AK_ARG_CHECK((unsigned)op < AK_REDUCE_COUNT_, "%s: unknown op %d", fn, (int)op);
    AK_CHECK(ak__check_count(fn, dtype, n, &es));
    AK_CHECK(ak__check_binary(fn, dst, a, b, n, es));
    if (n == 0) return AK_OK;
    ak_reduce_op kop = op == AK_REDUCE_AVG ? AK_REDUCE_SUM : op;
    ak__kernels_active()->reduce[kop][dtype](dst, a, b, n);
    return AK_OK;
}

ak_status ak_reduce_avg_finish(ak_dtype dtype, void *buf, size_t n, int divisor) {
    static const char fn[] = "ak_reduce_avg_finish";
    size_t es;
    AK_ENSURE_INIT();
    AK_CHECK(ak__check_count(fn, dtype, n, &es));
    AK_CHECK(ak__check_buf(fn, "buf", buf, n, es));
    AK_ARG_CHECK(divisor >= 1, "%s: divisor = %d must be at least 1", fn, divisor);
    if (n == 0 || divisor == 1) return AK_OK; /* x / 1 == x for every dtype */
    ak__reduce_avg_finish_ref(dtype, buf, n, divisor);
    return AK_OK;
}
