/* Cast and CastLike between the numeric types and bool.
 *
 * Integer to integer is exact with C's wrapping narrowing; float to integer truncates
 * toward zero and saturates (NaN gives 0), which ONNX leaves undefined; anything to bool
 * is "!= 0" (NaN is true, as numpy); float16/bfloat16 round to nearest even. float32 <->
 * float16/bfloat16/float64/int32/int64 and bool -> float32 have typed loops; the rest go
 * element by element through int64 or double. Strings go to ops/string/cast_string.c;
 * float8 is not handled. */
#include <math.h>
#include <string.h>

#include "core/half.h"
#include "infer/ops/elementwise/elementwise.h"
#include "infer/ops/string/string_ops.h"

typedef struct cast_op {
    ak_elem_type from, to;
} cast_op;

static int castable(ak_elem_type t) {
    return ak__elem_is_float(t) || ak__elem_is_integer(t) || t == AK_ELEM_BOOL;
}

/* The value of an integer element as a double (uint64 above 2^63 kept positive). */
static double int_as_double(const void *p, ak_elem_type t, size_t i) {
    if (t == AK_ELEM_U64) return (double)((const uint64_t *)p)[i];
    return (double)ak__elem_get_int(p, t, i);
}

/* One element of any pair of types. */
static void cast_one(const cast_op *c, void *dst, const void *src, size_t i) {
    int src_int = !ak__elem_is_float(c->from);
    if (c->to == AK_ELEM_BOOL) {
        ((uint8_t *)dst)[i] = src_int ? ak__elem_get_int(src, c->from, i) != 0
                                      : ak__elem_get(src, c->from, i) != 0.0;
    } else if (src_int && ak__elem_is_integer(c->to)) {
        ak__elem_set_int(dst, c->to, i, (uint64_t)ak__elem_get_int(src, c->from, i));
    } else if (src_int) {
        ak__elem_set(dst, c->to, i, int_as_double(src, c->from, i));
    } else if (ak__elem_is_integer(c->to)) {
        /* truncate, then saturate to the target's range (NaN -> 0) */
        double v = trunc(ak__elem_get(src, c->from, i));
        if (c->to == AK_ELEM_U64)
            ((uint64_t *)dst)[i] = !(v > 0)                       ? 0
                                   : v >= 18446744073709551616.0 ? UINT64_MAX
                                                                 : (uint64_t)v;
        else
            ak__elem_set(dst, c->to, i, v); /* saturates to int64, then narrows */
    } else {
        ak__elem_set(dst, c->to, i, ak__elem_get(src, c->from, i));
    }
}

/* float -> int32/int64 truncating and saturating, typed. */
static int64_t f32_to_i64(float v) {
    if (v != v) return 0;
    if (v >= 9.2233720368547758e18f) return INT64_MAX;
    if (v <= -9.2233720368547758e18f) return INT64_MIN;
    return (int64_t)v;
}

static int32_t f32_to_i32(float v) {
    if (v != v) return 0;
    if (v >= 2147483648.0f) return INT32_MAX;
    if (v <= -2147483648.0f) return INT32_MIN;
    return (int32_t)v;
}

#define CAST_LOOP(TS, TD, EXPR)                                                            \
    do {                                                                                   \
        const TS *s = src;                                                                 \
        TD *d = dst;                                                                       \
        for (size_t i = 0; i < n; i++) {                                                   \
            TS x = s[i];                                                                   \
            d[i] = (EXPR);                                                                 \
        }                                                                                  \
        return 1;                                                                          \
    } while (0)

#define PAIR(a, b) ((unsigned)(a) * 64u + (unsigned)(b))

/* The frequent pairs; returns 0 when the pair has no typed loop. */
static int cast_fast(const cast_op *c, void *dst, const void *src, size_t n) {
    switch (PAIR(c->from, c->to)) {
    case PAIR(AK_ELEM_F32, AK_ELEM_F16): case PAIR(AK_ELEM_F32, AK_ELEM_BF16):
        ew_f32_to_half(dst, src, n, c->to);
        return 1;
    case PAIR(AK_ELEM_F16, AK_ELEM_F32): case PAIR(AK_ELEM_BF16, AK_ELEM_F32):
        ew_half_to_f32(dst, src, n, c->from);
        return 1;
    case PAIR(AK_ELEM_F32, AK_ELEM_F64): CAST_LOOP(float, double, (double)x);
    case PAIR(AK_ELEM_F64, AK_ELEM_F32): CAST_LOOP(double, float, (float)x);
    case PAIR(AK_ELEM_I64, AK_ELEM_F32): CAST_LOOP(int64_t, float, (float)x);
    case PAIR(AK_ELEM_I32, AK_ELEM_F32): CAST_LOOP(int32_t, float, (float)x);
    case PAIR(AK_ELEM_F32, AK_ELEM_I64): CAST_LOOP(float, int64_t, f32_to_i64(x));
    case PAIR(AK_ELEM_F32, AK_ELEM_I32): CAST_LOOP(float, int32_t, f32_to_i32(x));
    case PAIR(AK_ELEM_I64, AK_ELEM_I32): CAST_LOOP(int64_t, int32_t, (int32_t)(uint32_t)x);
    case PAIR(AK_ELEM_I32, AK_ELEM_I64): CAST_LOOP(int32_t, int64_t, (int64_t)x);
    case PAIR(AK_ELEM_BOOL, AK_ELEM_F32): CAST_LOOP(uint8_t, float, x ? 1.0f : 0.0f);
    case PAIR(AK_ELEM_F32, AK_ELEM_BOOL): CAST_LOOP(float, uint8_t, x != 0.0f);
    case PAIR(AK_ELEM_I64, AK_ELEM_BOOL): CAST_LOOP(int64_t, uint8_t, x != 0);
    case PAIR(AK_ELEM_BOOL, AK_ELEM_I64): CAST_LOOP(uint8_t, int64_t, x != 0);
    default: return 0;
    }
}

static void cast_map(const void *op, void *dst, const void *src, size_t n) {
    const cast_op *c = op;
    if (c->from == c->to) {
        memcpy(dst, src, n * ak_elem_type_size(c->to));
        return;
    }
    if (cast_fast(c, dst, src, n)) return;
    for (size_t i = 0; i < n; i++) cast_one(c, dst, src, i);
}

static ak_status cast_check(const ak__op_ctx *ctx, ak_elem_type from, int64_t to) {
    if (to <= 0 || to >= AK_ELEM_COUNT_)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "target type %lld is not an ONNX type",
                          (long long)to);
    if (from == AK_ELEM_STRING || to == AK_ELEM_STRING) /* ops/string/cast_string.c */
        return ak__cast_strings_check(ctx, from, (ak_elem_type)to);
    if (!castable(from) || !castable((ak_elem_type)to))
        return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED, "cast from %s to %s is not handled",
                          ak_elem_type_name(from), ak_elem_type_name((ak_elem_type)to));
    return AK_OK;
}

static ak_status cast_target(const ak__op_ctx *ctx, int like, int64_t *to) {
    if (like) {
        const ak__tensor *t;
        AK_CHECK(ak__op_require(ctx, 1, &t));
        *to = t->type;
        return AK_OK;
    }
    if (!ak__attr_has(ctx->node, "to"))
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "attribute 'to' is required");
    const char *name = ak__attr_string(ctx->node, "to", NULL);
    if (!name) {
        *to = ak__attr_int(ctx->node, "to", 0);
        return AK_OK;
    }
    /* opset < 6 names the type */
    static const char *const names[] = {
        [AK_ELEM_F32] = "FLOAT",   [AK_ELEM_U8] = "UINT8",    [AK_ELEM_I8] = "INT8",
        [AK_ELEM_U16] = "UINT16",  [AK_ELEM_I16] = "INT16",   [AK_ELEM_I32] = "INT32",
        [AK_ELEM_I64] = "INT64",   [AK_ELEM_STRING] = "STRING", [AK_ELEM_BOOL] = "BOOL",
        [AK_ELEM_F16] = "FLOAT16", [AK_ELEM_F64] = "DOUBLE",  [AK_ELEM_U32] = "UINT32",
        [AK_ELEM_U64] = "UINT64",
    };
    for (size_t t = 0; t < sizeof names / sizeof *names; t++)
        if (names[t] && strcmp(names[t], name) == 0) {
            *to = (int64_t)t;
            return AK_OK;
        }
    return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "target type '%s' is unknown", name);
}

static ak_status cast_reshape_impl(ak__op_ctx *ctx, int like) {
    const ak__tensor *x;
    int64_t to = 0;
    AK_CHECK(ak__op_require(ctx, 0, &x));
    AK_CHECK(cast_target(ctx, like, &to));
    AK_CHECK(cast_check(ctx, x->type, to));
    return ak__op_set_output(ctx, 0, (ak_elem_type)to, x->rank, x->dims);
}

static ak_status cast_run(ak__op_ctx *ctx) {
    const ak__tensor *x = ak__op_in(ctx, 0);
    ak__tensor *y = ak__op_out(ctx, 0);
    if (!x || !y) return AK_OK;
    if (x->type == AK_ELEM_STRING || y->type == AK_ELEM_STRING) return ak__cast_strings(ctx, x, y);
    cast_op c = {x->type, y->type};
    return ew_map_run(ctx, y, x, cast_map, &c, EW_PAR_CHEAP);
}

static ak_status cast_reshape(ak__op_ctx *ctx) { return cast_reshape_impl(ctx, 0); }
static ak_status cast_like_reshape(ak__op_ctx *ctx) { return cast_reshape_impl(ctx, 1); }

const ak__op_def ew_op_cast = {"", "Cast", 1, 0, NULL, NULL, cast_reshape, cast_run};
const ak__op_def ew_op_cast_like = {"", "CastLike", 1, 0, NULL, NULL, cast_like_reshape, cast_run};
