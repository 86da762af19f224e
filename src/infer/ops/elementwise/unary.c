/* Unary elementwise operators: math functions, activations (Relu ... Gelu), Clip, Sign,
 * IsNaN/IsInf, Not and BitwiseNot.
 *
 * Each float formula is written once and compiled for float and double through
 * <tgmath.h>; float32 activations with a vector kernel (elementwise/kernels_f32.c) use it, and
 * float16/bfloat16 are widened to float32 in short stack chunks. Integer inputs are
 * accepted where ONNX allows them (Abs Neg Sign Relu Clip Shrink BitwiseNot), exactly. */
#include <float.h>
#include <string.h>
#include <tgmath.h>

#include "infer/ops/elementwise/elementwise.h"

typedef enum un_kind {
    UN_NOT, UN_BITNOT, UN_ABS, UN_NEG, UN_SQRT, UN_EXP, UN_LOG, UN_SIN, UN_COS, UN_TAN,
    UN_ASIN, UN_ACOS, UN_ATAN, UN_SINH, UN_COSH, UN_ASINH, UN_ACOSH, UN_ATANH,
    UN_RECIPROCAL, UN_FLOOR, UN_CEIL, UN_ROUND, UN_SIGN, UN_ERF, UN_ISNAN, UN_ISINF,
    UN_RELU, UN_LEAKY, UN_SIGMOID, UN_HARDSIGMOID, UN_HARDSWISH, UN_TANH, UN_ELU, UN_SELU,
    UN_CELU, UN_SOFTPLUS, UN_SOFTSIGN, UN_THRELU, UN_SHRINK, UN_MISH, UN_CLIP, UN_GELU,
} un_kind;

typedef struct un_op {
    un_kind kind;
    ak_elem_type type;
    float alpha, beta, gamma; /* the kind's attributes (see un_params) */
    int flag;                 /* Gelu: tanh approximation; IsInf: bit 0 +inf, bit 1 -inf */
    double lo, hi;            /* Clip bounds for float types */
    int has_lo, has_hi;       /* Clip bounds for integer types (bit patterns) */
    uint64_t ilo, ihi;
} un_op;

/* ---- float and double ----------------------------------------------------------------- */

#define UN_LOOP(EXPR)                                                                      \
    for (size_t i = 0; i < n; i++) {                                                       \
        T x = xs[i];                                                                       \
        y[i] = (T)(EXPR);                                                                  \
    }                                                                                      \
    return;

/* The formulas; x has type T, math functions resolve to T's version. */
#define UN_FLOAT_FN(NAME, TT)                                                              \
    static void NAME(const un_op *o, TT *y, const TT *xs, size_t n) {                      \
        typedef TT T;                                                                      \
        const T alpha = (T)o->alpha, beta = (T)o->beta, gamma = (T)o->gamma;               \
        const T lo = (T)o->lo, hi = (T)o->hi;                                              \
        switch (o->kind) {                                                                 \
        case UN_ABS: UN_LOOP(fabs(x))                                                      \
        case UN_NEG: UN_LOOP(-x)                                                           \
        case UN_SQRT: UN_LOOP(sqrt(x))                                                     \
        case UN_EXP: UN_LOOP(exp(x))                                                       \
        case UN_LOG: UN_LOOP(log(x))                                                       \
        case UN_SIN: UN_LOOP(sin(x))                                                       \
        case UN_COS: UN_LOOP(cos(x))                                                       \
        case UN_TAN: UN_LOOP(tan(x))                                                       \
        case UN_ASIN: UN_LOOP(asin(x))                                                     \
        case UN_ACOS: UN_LOOP(acos(x))                                                     \
        case UN_ATAN: UN_LOOP(atan(x))                                                     \
        case UN_SINH: UN_LOOP(sinh(x))                                                     \
        case UN_COSH: UN_LOOP(cosh(x))                                                     \
        case UN_ASINH: UN_LOOP(asinh(x))                                                   \
        case UN_ACOSH: UN_LOOP(acosh(x))                                                   \
        case UN_ATANH: UN_LOOP(atanh(x))                                                   \
        case UN_RECIPROCAL: UN_LOOP((T)1 / x)                                              \
        case UN_FLOOR: UN_LOOP(floor(x))                                                   \
        case UN_CEIL: UN_LOOP(ceil(x))                                                     \
        case UN_ROUND: UN_LOOP(nearbyint(x)) /* ties to even in the default mode */        \
        case UN_SIGN: UN_LOOP(x > 0 ? (T)1 : x < 0 ? (T)-1 : x)                            \
        case UN_ERF: UN_LOOP(erf(x))                                                       \
        case UN_RELU: UN_LOOP(x < 0 ? (T)0 : x)                                            \
        case UN_LEAKY: UN_LOOP(x < 0 ? alpha * x : x)                                      \
        case UN_SIGMOID: UN_LOOP((T)1 / ((T)1 + exp(-x)))                                  \
        case UN_HARDSIGMOID: UN_LOOP(un_clamp01(alpha * x + beta))                         \
        case UN_HARDSWISH: UN_LOOP(x * un_clamp01(alpha * x + beta))                       \
        case UN_TANH: UN_LOOP(tanh(x))                                                     \
        case UN_ELU: UN_LOOP(x < 0 ? alpha * expm1(x) : x)                                 \
        case UN_SELU: UN_LOOP(x > 0 ? gamma * x : gamma * alpha * expm1(x))                \
        case UN_CELU: UN_LOOP(x > 0 ? x : alpha * expm1(x / alpha))                        \
        case UN_SOFTPLUS: UN_LOOP(un_softplus(x))                                          \
        case UN_SOFTSIGN: UN_LOOP(x / ((T)1 + fabs(x)))                                    \
        case UN_THRELU: UN_LOOP(x > alpha ? x : (T)0)                                      \
        case UN_SHRINK: UN_LOOP(x < -alpha ? x + beta : x > alpha ? x - beta : (T)0)       \
        case UN_MISH: UN_LOOP(x * tanh(un_softplus(x)))                                    \
        case UN_CLIP: UN_LOOP(x < lo ? (lo > hi ? hi : lo) : x > hi ? hi : x)              \
        case UN_GELU:                                                                      \
            if (o->flag) {                                                                 \
                UN_LOOP((T)0.5 * x *                                                       \
                        ((T)1 + tanh((T)0.7978845608028654 * (x + (T)0.044715 * x * x * x)))) \
            }                                                                              \
            UN_LOOP((T)0.5 * x * ((T)1 + erf(x * (T)0.7071067811865476)))                  \
        default: return;                                                                   \
        }                                                                                  \
    }

/* hard sigmoid's clamp; NaN stays NaN (both comparisons are false) */
static float clamp01_f(float v) { return v < 0 ? 0.0f : v > 1 ? 1.0f : v; }
static double clamp01_d(double v) { return v < 0 ? 0.0 : v > 1 ? 1.0 : v; }
/* log(1 + e^x) without overflow */
static float softplus_f(float v) { return v > 0 ? v + log1p(exp(-v)) : log1p(exp(v)); }
static double softplus_d(double v) { return v > 0 ? v + log1p(exp(-v)) : log1p(exp(v)); }
#define un_clamp01(v) _Generic((v), float: clamp01_f, default: clamp01_d)(v)
#define un_softplus(v) _Generic((v), float: softplus_f, default: softplus_d)(v)

UN_FLOAT_FN(un_f32_scalar, float)
UN_FLOAT_FN(un_f64, double)

/* The vector kernel for kind, or -1. */
static int f32_vector_kind(const un_op *o) {
    switch (o->kind) {
    case UN_RELU: return AK_EW_F32_RELU;
    case UN_LEAKY: return AK_EW_F32_LEAKY;
    case UN_CLIP: return AK_EW_F32_CLIP;
    case UN_ABS: return AK_EW_F32_ABS;
    case UN_NEG: return AK_EW_F32_NEG;
    case UN_SIGMOID: return AK_EW_F32_SIGMOID;
    case UN_TANH: return AK_EW_F32_TANH;
    case UN_GELU: return o->flag ? AK_EW_F32_GELU_TANH : AK_EW_F32_GELU_ERF;
    case UN_HARDSIGMOID: return AK_EW_F32_HARDSIGMOID;
    case UN_HARDSWISH: return AK_EW_F32_HARDSWISH;
    case UN_EXP: return AK_EW_F32_EXP;
    case UN_ERF: return AK_EW_F32_ERF;
    default: return -1;
    }
}

static void un_f32(const un_op *o, float *y, const float *x, size_t n) {
    int v = f32_vector_kind(o);
    if (v < 0) {
        un_f32_scalar(o, y, x, n);
        return;
    }
    float a = o->kind == UN_CLIP ? (float)o->lo : o->alpha;
    float b = o->kind == UN_CLIP ? (float)o->hi : o->beta;
    ew_f32_unary((ak__ew_f32_un)v, y, x, n, a, b);
}

/* IsNaN / IsInf of any float type into bool. */
static void un_classify(const un_op *o, uint8_t *y, const void *x, size_t n) {
    for (size_t i = 0; i < n; i++) {
        double v = ak__elem_get(x, o->type, i);
        if (o->kind == UN_ISNAN)
            y[i] = v != v;
        else
            y[i] = (isinf(v) && v > 0 && (o->flag & 1)) || (isinf(v) && v < 0 && (o->flag & 2));
    }
}

#define HALF_CHUNK 256

static void un_half(const un_op *o, uint16_t *y, const uint16_t *x, size_t n) {
    float f[HALF_CHUNK], g[HALF_CHUNK];
    for (size_t i = 0; i < n; i += HALF_CHUNK) {
        size_t m = n - i < HALF_CHUNK ? n - i : HALF_CHUNK;
        ew_half_to_f32(f, x + i, m, o->type);
        un_f32(o, g, f, m);
        ew_f32_to_half(y + i, g, m, o->type);
    }
}

/* ---- integers and bool ------------------------------------------------------------------ */

/* x < 0 without -Wtype-limits noise for unsigned T */
#define UN_ISNEG(x) (!((x) > 0 || (x) == 0))

/* max then min, as numpy's clip (lo > hi gives hi) */
#define un_clip_int(x, lo, hi, has_lo, has_hi)                                             \
    ((has_hi) && ((has_lo) && (x) < (lo) ? (lo) : (x)) > (hi) ? (hi)                       \
     : (has_lo) && (x) < (lo)                               ? (lo)                         \
                                                            : (x))

#define UN_INT_FN(NAME, TT, U)                                                             \
    static void NAME(const un_op *o, void *dst, const void *src, size_t n) {              \
        typedef TT T;                                                                      \
        const T *xs = src;                                                                 \
        T *y = dst;                                                                        \
        const T lo = (T)o->ilo, hi = (T)o->ihi;                                            \
        switch (o->kind) {                                                                 \
        case UN_ABS: UN_LOOP(UN_ISNEG(x) ? (T)(U)(0u - (U)x) : x)                          \
        case UN_NEG: UN_LOOP((T)(U)(0u - (U)x))                                            \
        case UN_SIGN: UN_LOOP(x > 0 ? (T)1 : UN_ISNEG(x) ? (T)-1 : (T)0)                   \
        case UN_RELU: UN_LOOP(UN_ISNEG(x) ? (T)0 : x)                                      \
        case UN_BITNOT: UN_LOOP((T)(U)~(U)x)                                               \
        case UN_CLIP:                                                                      \
            UN_LOOP(un_clip_int(x, lo, hi, o->has_lo, o->has_hi))                           \
        case UN_SHRINK:                                                                    \
            for (size_t i = 0; i < n; i++) {                                               \
                double v = (double)xs[i];                                                  \
                v = v < -o->alpha ? v + o->beta : v > o->alpha ? v - o->beta : 0.0;       \
                ak__elem_set(y, o->type, i, v);                                            \
            }                                                                              \
            return;                                                                        \
        default: return;                                                                   \
        }                                                                                  \
    }
UN_INT_FN(un_i8, int8_t, uint8_t)
UN_INT_FN(un_u8, uint8_t, uint8_t)
UN_INT_FN(un_i16, int16_t, uint16_t)
UN_INT_FN(un_u16, uint16_t, uint16_t)
UN_INT_FN(un_i32, int32_t, uint32_t)
UN_INT_FN(un_u32, uint32_t, uint32_t)
UN_INT_FN(un_i64, int64_t, uint64_t)
UN_INT_FN(un_u64, uint64_t, uint64_t)

/* ---- dispatch ----------------------------------------------------------------------------- */

static void un_map(const void *op, void *dst, const void *src, size_t n) {
    const un_op *o = op;
    if (o->kind == UN_ISNAN || o->kind == UN_ISINF) {
        un_classify(o, dst, src, n);
        return;
    }
    switch (o->type) {
    case AK_ELEM_F32: un_f32(o, dst, src, n); return;
    case AK_ELEM_F64: un_f64(o, dst, src, n); return;
    case AK_ELEM_F16: case AK_ELEM_BF16: un_half(o, dst, src, n); return;
    case AK_ELEM_BOOL:
        for (size_t i = 0; i < n; i++) ((uint8_t *)dst)[i] = !((const uint8_t *)src)[i];
        return;
    case AK_ELEM_I8: un_i8(o, dst, src, n); return;
    case AK_ELEM_U8: un_u8(o, dst, src, n); return;
    case AK_ELEM_I16: un_i16(o, dst, src, n); return;
    case AK_ELEM_U16: un_u16(o, dst, src, n); return;
    case AK_ELEM_I32: un_i32(o, dst, src, n); return;
    case AK_ELEM_U32: un_u32(o, dst, src, n); return;
    case AK_ELEM_I64: un_i64(o, dst, src, n); return;
    case AK_ELEM_U64: un_u64(o, dst, src, n); return;
    default: return;
    }
}

static int accepts(un_kind k, ak_elem_type t) {
    int fl = ak__elem_is_float(t), in = ak__elem_is_integer(t);
    switch (k) {
    case UN_NOT: return t == AK_ELEM_BOOL;
    case UN_BITNOT: return in;
    case UN_ABS: case UN_NEG: case UN_SIGN: case UN_RELU: case UN_CLIP: case UN_SHRINK:
        return fl || in;
    default: return fl;
    }
}

static int is_cheap(un_kind k) {
    switch (k) {
    case UN_NOT: case UN_BITNOT: case UN_ABS: case UN_NEG: case UN_RELU: case UN_LEAKY:
    case UN_CLIP: case UN_SIGN: case UN_FLOOR: case UN_CEIL: case UN_ROUND:
    case UN_HARDSIGMOID: case UN_HARDSWISH: case UN_THRELU: case UN_SHRINK:
    case UN_RECIPROCAL: case UN_SOFTSIGN: case UN_ISNAN: case UN_ISINF:
        return 1;
    default: return 0;
    }
}

static ak_status un_reshape(ak__op_ctx *ctx, un_kind k) {
    const ak__tensor *x;
    AK_CHECK(ak__op_require(ctx, 0, &x));
    if (!accepts(k, x->type))
        return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED, "input type %s is not handled",
                          ak_elem_type_name(x->type));
    ak_elem_type out = k == UN_ISNAN || k == UN_ISINF ? AK_ELEM_BOOL : x->type;
    return ak__op_set_output(ctx, 0, out, x->rank, x->dims);
}

/* Attribute defaults of ONNX per kind. */
static ak_status un_params(const ak__op_ctx *ctx, un_kind k, un_op *o) {
    const ak__ir_node *nd = ctx->node;
    switch (k) {
    case UN_LEAKY: o->alpha = ak__attr_float(nd, "alpha", 0.01f); break;
    case UN_HARDSIGMOID:
        o->alpha = ak__attr_float(nd, "alpha", 0.2f);
        o->beta = ak__attr_float(nd, "beta", 0.5f);
        break;
    case UN_HARDSWISH: o->alpha = 1.0f / 6.0f; o->beta = 0.5f; break;
    case UN_ELU: case UN_CELU: case UN_THRELU: o->alpha = ak__attr_float(nd, "alpha", 1.0f); break;
    case UN_SELU:
        o->alpha = ak__attr_float(nd, "alpha", 1.67326319217681884765625f);
        o->gamma = ak__attr_float(nd, "gamma", 1.05070102214813232421875f);
        break;
    case UN_SHRINK:
        o->alpha = ak__attr_float(nd, "lambd", 0.5f);
        o->beta = ak__attr_float(nd, "bias", 0.0f);
        break;
    case UN_ISINF:
        o->flag = (ak__attr_int(nd, "detect_positive", 1) ? 1 : 0) |
                  (ak__attr_int(nd, "detect_negative", 1) ? 2 : 0);
        break;
    case UN_GELU: {
        const char *a = ak__attr_string(nd, "approximate", "none");
        if (strcmp(a, "none") && strcmp(a, "tanh"))
            return AK_OP_FAIL(nd, AK_ERR_INVALID_MODEL,
                              "approximate is '%s', expected none or tanh", a);
        o->flag = a[0] == 't';
        break;
    }
    default: break;
    }
    return AK_OK;
}

/* Clip's bounds: attributes before opset 11, optional scalar inputs from 11 on. */
static ak_status clip_bounds(const ak__op_ctx *ctx, un_op *o) {
    o->lo = -INFINITY;
    o->hi = INFINITY;
    if (ctx->node->opset < 11) {
        o->lo = ak__attr_float(ctx->node, "min", -FLT_MAX);
        o->hi = ak__attr_float(ctx->node, "max", FLT_MAX);
        o->has_lo = o->has_hi = 1;
        o->ilo = (uint64_t)(int64_t)fmax(o->lo, -9.2e18); /* float-only then: unused */
        o->ihi = (uint64_t)(int64_t)fmin(o->hi, 9.2e18);
        return AK_OK;
    }
    for (uint32_t i = 1; i <= 2; i++) {
        const ak__tensor *b = ak__op_in(ctx, i);
        if (!b) continue;
        if (b->type != o->type || b->count != 1)
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                              "input %u (%s) must be a %s scalar", i, i == 1 ? "min" : "max",
                              ak_elem_type_name(o->type));
        double v = ak__elem_get(b->data, b->type, 0);
        uint64_t bits = 0;
        memcpy(&bits, b->data, ak_elem_type_size(b->type)); /* little-endian low bytes */
        if (ak__elem_is_integer(b->type) && ak_elem_type_size(b->type) < 8) {
            int64_t iv = (int64_t)v; /* sign-extend narrow integers */
            bits = (uint64_t)iv;
        }
        if (i == 1) {
            o->lo = v;
            o->ilo = bits;
            o->has_lo = 1;
        } else {
            o->hi = v;
            o->ihi = bits;
            o->has_hi = 1;
        }
    }
    return AK_OK;
}

static ak_status un_run(ak__op_ctx *ctx, un_kind k) {
    const ak__tensor *x = ak__op_in(ctx, 0);
    ak__tensor *y = ak__op_out(ctx, 0);
    if (!y || !x) return AK_OK;
    un_op o;
    memset(&o, 0, sizeof o);
    o.kind = k;
    o.type = x->type;
    AK_CHECK(un_params(ctx, k, &o));
    if (k == UN_CLIP) AK_CHECK(clip_bounds(ctx, &o));
    return ew_map_run(ctx, y, x, un_map, &o, is_cheap(k) ? EW_PAR_CHEAP : EW_PAR_COSTLY);
}

#define UNARY_OP(name, ONNX, KIND)                                                         \
    static ak_status reshape_##name(ak__op_ctx *ctx) { return un_reshape(ctx, KIND); }     \
    static ak_status run_##name(ak__op_ctx *ctx) { return un_run(ctx, KIND); }             \
    const ak__op_def ew_op_##name = {"", ONNX, 1, 0, NULL, NULL, reshape_##name, run_##name};

UNARY_OP(not, "Not", UN_NOT)
UNARY_OP(bitwise_not, "BitwiseNot", UN_BITNOT)
UNARY_OP(abs, "Abs", UN_ABS)
UNARY_OP(neg, "Neg", UN_NEG)
UNARY_OP(sqrt, "Sqrt", UN_SQRT)
UNARY_OP(exp, "Exp", UN_EXP)
UNARY_OP(log, "Log", UN_LOG)
UNARY_OP(sin, "Sin", UN_SIN)
UNARY_OP(cos, "Cos", UN_COS)
UNARY_OP(tan, "Tan", UN_TAN)
UNARY_OP(asin, "Asin", UN_ASIN)
UNARY_OP(acos, "Acos", UN_ACOS)
UNARY_OP(atan, "Atan", UN_ATAN)
UNARY_OP(sinh, "Sinh", UN_SINH)
UNARY_OP(cosh, "Cosh", UN_COSH)
UNARY_OP(asinh, "Asinh", UN_ASINH)
UNARY_OP(acosh, "Acosh", UN_ACOSH)
UNARY_OP(atanh, "Atanh", UN_ATANH)
UNARY_OP(reciprocal, "Reciprocal", UN_RECIPROCAL)
UNARY_OP(floor, "Floor", UN_FLOOR)
UNARY_OP(ceil, "Ceil", UN_CEIL)
UNARY_OP(round, "Round", UN_ROUND)
UNARY_OP(sign, "Sign", UN_SIGN)
UNARY_OP(erf, "Erf", UN_ERF)
UNARY_OP(isnan, "IsNaN", UN_ISNAN)
UNARY_OP(isinf, "IsInf", UN_ISINF)
UNARY_OP(relu, "Relu", UN_RELU)
UNARY_OP(leaky_relu, "LeakyRelu", UN_LEAKY)
UNARY_OP(sigmoid, "Sigmoid", UN_SIGMOID)
UNARY_OP(hard_sigmoid, "HardSigmoid", UN_HARDSIGMOID)
UNARY_OP(hard_swish, "HardSwish", UN_HARDSWISH)
UNARY_OP(tanh, "Tanh", UN_TANH)
UNARY_OP(elu, "Elu", UN_ELU)
UNARY_OP(selu, "Selu", UN_SELU)
UNARY_OP(celu, "Celu", UN_CELU)
UNARY_OP(softplus, "Softplus", UN_SOFTPLUS)
UNARY_OP(softsign, "Softsign", UN_SOFTSIGN)
UNARY_OP(thresholded_relu, "ThresholdedRelu", UN_THRELU)
UNARY_OP(shrink, "Shrink", UN_SHRINK)
UNARY_OP(mish, "Mish", UN_MISH)
UNARY_OP(clip, "Clip", UN_CLIP)
UNARY_OP(gelu, "Gelu", UN_GELU)
