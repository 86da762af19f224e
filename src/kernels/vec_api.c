/* Public elementwise and conversion entry points (kernels.h): validate the arguments,
 * then run the kernel of the active dispatch table. */
#include <stdint.h>

#include "accelkit/kernels.h"
#include "core/check.h"
#include "kernels/api_check.h"
#include "kernels/dispatch.h"

static const struct {
    const char *name;
    size_t size;
} dtype_info[AK_DTYPE_COUNT_] = {
    [AK_DTYPE_F32] = {"f32", 4}, [AK_DTYPE_F16] = {"f16", 2}, [AK_DTYPE_BF16] = {"bf16", 2},
    [AK_DTYPE_F64] = {"f64", 8}, [AK_DTYPE_I8] = {"i8", 1},   [AK_DTYPE_U8] = {"u8", 1},
    [AK_DTYPE_I32] = {"i32", 4}, [AK_DTYPE_I64] = {"i64", 8},
};

const char *ak_dtype_name(ak_dtype dtype) {
    return (unsigned)dtype < AK_DTYPE_COUNT_ ? dtype_info[dtype].name : "unknown";
}

ak_status ak_dtype_size(ak_dtype dtype, size_t *out) {
    AK_ARG_CHECK(out, "ak_dtype_size: out is NULL");
    AK_ARG_CHECK((unsigned)dtype < AK_DTYPE_COUNT_, "unknown dtype %d", (int)dtype);
    *out = dtype_info[dtype].size;
    return AK_OK;
}

/* ---- validation --------------------------------------------------------------------- */

/* The elementwise kernels exist for the floating-point storage types only. */
static ak_status elem_size(const char *fn, ak_dtype dtype, size_t n, size_t *es) {
    AK_CHECK(ak__check_count(fn, dtype, n, es));
    if (dtype != AK_DTYPE_F32 && dtype != AK_DTYPE_F16 && dtype != AK_DTYPE_BF16)
        return AK_FAIL(AK_ERR_UNSUPPORTED, "%s: dtype %s is not supported (f32, f16, bf16)", fn,
                       ak_dtype_name(dtype));
    return AK_OK;
}

/* ---- elementwise -------------------------------------------------------------------- */

ak_status ak_vec_add(ak_dtype dtype, void *dst, const void *a, const void *b, size_t n) {
    static const char fn[] = "ak_vec_add";
    size_t es;
    AK_ENSURE_INIT();
    AK_CHECK(elem_size(fn, dtype, n, &es));
    AK_CHECK(ak__check_binary(fn, dst, a, b, n, es));
    if (n == 0) return AK_OK;
    const ak__kernels *k = ak__kernels_active();
    switch (dtype) {
    case AK_DTYPE_F32: k->f32_add(dst, a, b, n); break;
    case AK_DTYPE_F16: k->f16_add(dst, a, b, n); break;
    default: k->bf16_add(dst, a, b, n); break;
    }
    return AK_OK;
}

ak_status ak_vec_scale(ak_dtype dtype, void *dst, const void *x, float alpha, size_t n) {
    static const char fn[] = "ak_vec_scale";
    size_t es;
    AK_ENSURE_INIT();
    AK_CHECK(elem_size(fn, dtype, n, &es));
    AK_CHECK(ak__check_buf(fn, "dst", dst, n, es));
    AK_CHECK(ak__check_buf(fn, "x", x, n, es));
    AK_CHECK(ak__check_overlap(fn, "dst", dst, n * es, "x", x, n * es, 1));
    if (n == 0) return AK_OK;
    const ak__kernels *k = ak__kernels_active();
    switch (dtype) {
    case AK_DTYPE_F32: k->f32_scale(dst, x, alpha, n); break;
    case AK_DTYPE_F16: k->f16_scale(dst, x, alpha, n); break;
    default: k->bf16_scale(dst, x, alpha, n); break;
    }
    return AK_OK;
}

ak_status ak_vec_axpy(ak_dtype dtype, void *y, float alpha, const void *x, size_t n) {
    static const char fn[] = "ak_vec_axpy";
    size_t es;
    AK_ENSURE_INIT();
    AK_CHECK(elem_size(fn, dtype, n, &es));
    AK_CHECK(ak__check_buf(fn, "y", y, n, es));
    AK_CHECK(ak__check_buf(fn, "x", x, n, es));
    AK_CHECK(ak__check_overlap(fn, "y", y, n * es, "x", x, n * es, 1));
    if (n == 0) return AK_OK;
    const ak__kernels *k = ak__kernels_active();
    switch (dtype) {
    case AK_DTYPE_F32: k->f32_axpy(y, alpha, x, n); break;
    case AK_DTYPE_F16: k->f16_axpy(y, alpha, x, n); break;
    default: k->bf16_axpy(y, alpha, x, n); break;
    }
    return AK_OK;
}

ak_status ak_vec_sum(ak_dtype dtype, const void *x, size_t n, double *out) {
    static const char fn[] = "ak_vec_sum";
    size_t es;
    AK_ENSURE_INIT();
    AK_CHECK(elem_size(fn, dtype, n, &es));
    AK_CHECK(ak__check_buf(fn, "x", x, n, es));
    AK_ARG_CHECK(out, "%s: out is NULL", fn);
    const ak__kernels *k = ak__kernels_active();
    if (n == 0)
        *out = 0.0;
    else if (dtype == AK_DTYPE_F32)
        *out = k->f32_sum(x, n);
    else if (dtype == AK_DTYPE_F16)
        *out = k->f16_sum(x, n);
    else
        *out = k->bf16_sum(x, n);
    return AK_OK;
}

/* ---- conversions (dst and src differ in element size: no overlap at all) ------------ */

/* Validates one conversion from src_es-byte to dst_es-byte elements. */
static ak_status check_convert(const char *fn, void *dst, size_t dst_es, const void *src,
                               size_t src_es, size_t n) {
    size_t widest = dst_es > src_es ? dst_es : src_es;
    AK_ARG_CHECK(n <= SIZE_MAX / widest, "%s: n = %zu elements overflows the address space",
                 fn, n);
    AK_CHECK(ak__check_buf(fn, "dst", dst, n, dst_es));
    AK_CHECK(ak__check_buf(fn, "src", src, n, src_es));
    return ak__check_overlap(fn, "dst", dst, n * dst_es, "src", src, n * src_es, 0);
}

ak_status ak_f32_to_f16(uint16_t *dst, const float *src, size_t n) {
    AK_ENSURE_INIT();
    AK_CHECK(check_convert("ak_f32_to_f16", dst, 2, src, 4, n));
    if (n) ak__kernels_active()->f32_to_f16(dst, src, n);
    return AK_OK;
}

ak_status ak_f16_to_f32(float *dst, const uint16_t *src, size_t n) {
    AK_ENSURE_INIT();
    AK_CHECK(check_convert("ak_f16_to_f32", dst, 4, src, 2, n));
    if (n) ak__kernels_active()->f16_to_f32(dst, src, n);
    return AK_OK;
}

ak_status ak_f32_to_bf16(uint16_t *dst, const float *src, size_t n) {
    AK_ENSURE_INIT();
    AK_CHECK(check_convert("ak_f32_to_bf16", dst, 2, src, 4, n));
    if (n) ak__kernels_active()->f32_to_bf16(dst, src, n);
    return AK_OK;
}

ak_status ak_bf16_to_f32(float *dst, const uint16_t *src, size_t n) {
    AK_ENSURE_INIT();
    AK_CHECK(check_convert("ak_bf16_to_f32", dst, 4, src, 2, n));
    if (n) ak__kernels_active()->bf16_to_f32(dst, src, n);
    return AK_OK;
}
