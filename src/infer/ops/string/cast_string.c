/* Cast and CastLike to and from STRING (called by ops/elementwise/cast.c).
 *
 * Number -> text: integers in decimal; float32 and float64 with the fewest significant
 * digits that read back to the same value (the ONNX node tests' text, numpy's digits),
 * in "%g" notation that keeps up to 8 digits before switching to an exponent; NaN as
 * "NaN", infinities as "INF" and "-INF". onnxruntime prints "%.8g": the same text
 * whenever 8 digits are the shortest or more than needed (0.5, 100, 1e+20, 0.33333334),
 * but not where it prints float noise ("9.9999997e-05" for 0.0001f, "0.30000001" for
 * 0.3f) or cuts a float64 short ("0.33333333" for 1/3). Text -> number: strtof / strtod for floats (so "NaN", "INF", "+INF", "-INF",
 * "1e-3" and hex floats are read), strtoll / strtoull for integers (values out of range
 * fail); surrounding whitespace is allowed, any other trailing text fails naming the
 * string. bool and float16/bfloat16/float8 are refused by name. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "infer/ops/string/string_ops.h"

static int text_type(ak_elem_type t) {
    return t == AK_ELEM_F32 || t == AK_ELEM_F64 || ak__elem_is_integer(t) || t == AK_ELEM_STRING;
}

ak_status ak__cast_strings_check(const ak__op_ctx *ctx, ak_elem_type from, ak_elem_type to) {
    if (text_type(from) && text_type(to)) return AK_OK;
    return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED, "cast from %s to %s is not handled",
                      ak_elem_type_name(from), ak_elem_type_name(to));
}

/* The fewest significant digits that read back to v (float32 when single), printed as
 * "%g" prints them, but with up to 8 digits before the exponent is used ("100", not
 * "1e+02"; "1e+20"). */
static int format_float(char *buf, size_t size, double v, int single) {
    if (isnan(v)) return snprintf(buf, size, "NaN");
    if (isinf(v)) return snprintf(buf, size, v < 0 ? "-INF" : "INF");
    int p = 1;
    for (; p < 17; p++) {
        snprintf(buf, size, "%.*e", p - 1, v);
        if (single ? strtof(buf, NULL) == (float)v : strtod(buf, NULL) == v) break;
    }
    snprintf(buf, size, "%.*e", p - 1, v); /* the exponent of the rounded value */
    int exp10 = atoi(strchr(buf, 'e') + 1);
    int fixed = exp10 + 1 < 8 ? exp10 + 1 : 8;
    return snprintf(buf, size, "%.*g", p > fixed ? p : fixed, v);
}

static ak_status to_text(ak__op_ctx *ctx, const ak__tensor *x, ak__tensor *y) {
    ak__string_pool *pool = NULL;
    AK_CHECK(ak__strings_pool(ctx, &pool));
    ak_string *out = y->data;
    for (uint64_t i = 0; i < x->count; i++) {
        char buf[64];
        int n;
        if (x->type == AK_ELEM_F32) n = format_float(buf, sizeof buf, ((const float *)x->data)[i], 1);
        else if (x->type == AK_ELEM_F64) n = format_float(buf, sizeof buf, ((const double *)x->data)[i], 0);
        else if (x->type == AK_ELEM_U64) n = snprintf(buf, sizeof buf, "%llu", (unsigned long long)((const uint64_t *)x->data)[i]);
        else n = snprintf(buf, sizeof buf, "%lld", (long long)ak__elem_get_int(x->data, x->type, i));
        AK_CHECK(ak__string_pool_copy(pool, buf, (size_t)n, &out[i]));
    }
    return AK_OK;
}

static ak_status bad_text(const ak__op_ctx *ctx, ak_string s, ak_elem_type to, const char *why) {
    return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_ARG, "string \"%.*s\" is not a %s (%s)",
                      (int)(s.len < 80 ? s.len : 80), s.data ? s.data : "", ak_elem_type_name(to),
                      why);
}

/* Reads one number of type `to` into element i of y. */
static ak_status parse_one(const ak__op_ctx *ctx, ak_string s, ak__tensor *y, uint64_t i) {
    char buf[128];
    if (s.len >= sizeof buf || memchr(s.data ? s.data : "", 0, s.len))
        return bad_text(ctx, s, y->type, "too long or contains a NUL byte");
    if (s.len) memcpy(buf, s.data, s.len);
    buf[s.len] = 0;
    char *end;
    errno = 0;
    if (y->type == AK_ELEM_F32) ((float *)y->data)[i] = strtof(buf, &end);
    else if (y->type == AK_ELEM_F64) ((double *)y->data)[i] = strtod(buf, &end);
    else if (y->type == AK_ELEM_U64 || y->type == AK_ELEM_U32 || y->type == AK_ELEM_U16 ||
             y->type == AK_ELEM_U8) {
        if (strchr(buf, '-')) return bad_text(ctx, s, y->type, "negative");
        unsigned long long v = strtoull(buf, &end, 10);
        ak__elem_set_int(y->data, y->type, i, v);
        if (y->type != AK_ELEM_U64 && v > (UINT64_MAX >> (64 - 8 * ak_elem_type_size(y->type))))
            errno = ERANGE;
    } else {
        long long v = strtoll(buf, &end, 10);
        int bits = 8 * (int)ak_elem_type_size(y->type);
        if (bits < 64 && (v < -(1LL << (bits - 1)) || v >= (1LL << (bits - 1)))) errno = ERANGE;
        ak__elem_set_int(y->data, y->type, i, (uint64_t)v);
    }
    if (end == buf) return bad_text(ctx, s, y->type, "no number");
    while (*end == ' ' || (*end >= '\t' && *end <= '\r')) end++;
    if (*end) return bad_text(ctx, s, y->type, "trailing text");
    if (errno == ERANGE && !ak__elem_is_float(y->type)) return bad_text(ctx, s, y->type, "out of range");
    return AK_OK;
}

ak_status ak__cast_strings(ak__op_ctx *ctx, const ak__tensor *x, ak__tensor *y) {
    if (x->type == AK_ELEM_STRING && y->type == AK_ELEM_STRING) {
        if (x->count) memmove(y->data, x->data, ak__tensor_nbytes(x));
        return AK_OK;
    }
    if (y->type == AK_ELEM_STRING) return to_text(ctx, x, y);
    for (uint64_t i = 0; i < x->count; i++)
        AK_CHECK(parse_one(ctx, ((const ak_string *)x->data)[i], y, i));
    return AK_OK;
}
