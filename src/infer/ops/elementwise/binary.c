/* Binary, variadic and ternary elementwise operators with numpy broadcasting: arithmetic
 * (Add Sub Mul Div Pow Mod Min Max PRelu; Sum Mean Min Max over any number of inputs),
 * comparisons, logic, bitwise operators, BitShift and Where.
 *
 * float32 goes through the vector kernels of elementwise/kernels_f32.c; float16/bfloat16 are
 * widened to float32 in short stack chunks, computed and rounded back; float64 and every
 * integer type have typed loops (integers wrap like C unsigned arithmetic). Integer
 * division or remainder by zero gives 0, and INT_MIN / -1 gives INT_MIN (wrapping), so
 * no input can trap. Opset < 7 models' broadcast/axis attributes are honoured. */
#include <math.h>
#include <string.h>

#include "infer/ops/elementwise/elementwise.h"

typedef enum bin_kind {
    BIN_ADD, BIN_SUB, BIN_MUL, BIN_DIV, BIN_MOD, BIN_MIN, BIN_MAX, BIN_PRELU, BIN_POW,
    BIN_EQ, BIN_LT, BIN_GT, BIN_LE, BIN_GE,
    BIN_AND, BIN_OR, BIN_XOR,
    BIN_SHL, BIN_SHR, BIN_BAND, BIN_BOR, BIN_BXOR,
} bin_kind;

typedef struct bin_op {
    bin_kind kind;
    int fmod;            /* Mod: remainder takes the dividend's sign (C fmod / %) */
    ak_elem_type ta, tb; /* operand types (Pow may mix them) */
} bin_op;

static int is_compare(bin_kind k) { return k >= BIN_EQ && k <= BIN_GE; }
static int is_logic(bin_kind k) { return k >= BIN_AND && k <= BIN_XOR; }
static int is_bitwise(bin_kind k) { return k >= BIN_SHL; }

/* ---- float32 (and, widened, float16/bfloat16) ---------------------------------------- */

static float mod_f32(float x, float y, int c_fmod) {
    float r = fmodf(x, y);
    if (!c_fmod && r != 0.0f && (r < 0.0f) != (y < 0.0f)) r += y;
    return r;
}

static void pow_f32(float *d, const float *a, const float *b, size_t n, int sa, int sb) {
    if (!sb && b[0] == 2.0f) { /* x^2 (decomposed norms) */
        for (size_t i = 0; i < n; i++) {
            float x = a[i * (size_t)sa];
            d[i] = x * x;
        }
        return;
    }
    for (size_t i = 0; i < n; i++) d[i] = powf(a[i * (size_t)sa], b[i * (size_t)sb]);
}

#define CMP_LOOP(EXPR)                                                                     \
    for (size_t i = 0; i < n; i++) {                                                       \
        T x = a[i * sa], y = b[i * sb];                                                    \
        d[i] = (uint8_t)(EXPR);                                                            \
    }                                                                                      \
    break;

/* Comparisons of any real type into bool. */
#define CMP_FN(NAME, TT)                                                                   \
    static void NAME(const bin_op *op, uint8_t *d, const TT *a, const TT *b, size_t n,    \
                     size_t sa, size_t sb) {                                               \
        typedef TT T;                                                                      \
        switch (op->kind) {                                                                \
        case BIN_EQ: CMP_LOOP(x == y)                                                      \
        case BIN_LT: CMP_LOOP(x < y)                                                       \
        case BIN_GT: CMP_LOOP(x > y)                                                       \
        case BIN_LE: CMP_LOOP(x <= y)                                                      \
        case BIN_GE: CMP_LOOP(x >= y)                                                      \
        default: break;                                                                    \
        }                                                                                  \
    }
CMP_FN(cmp_f32, float)
CMP_FN(cmp_f64, double)
CMP_FN(cmp_i8, int8_t)
CMP_FN(cmp_u8, uint8_t)
CMP_FN(cmp_i16, int16_t)
CMP_FN(cmp_u16, uint16_t)
CMP_FN(cmp_i32, int32_t)
CMP_FN(cmp_u32, uint32_t)
CMP_FN(cmp_i64, int64_t)
CMP_FN(cmp_u64, uint64_t)

/* float32 result of any float kind into d (float, or bool for comparisons). */
static void f32_compute(const bin_op *op, void *d, const float *a, const float *b, size_t n,
                        int sa, int sb) {
    float *df = d;
    switch (op->kind) {
    case BIN_ADD: ew_f32_binary(AK_EW_F32_ADD, df, a, b, n, sa, sb); return;
    case BIN_SUB: ew_f32_binary(AK_EW_F32_SUB, df, a, b, n, sa, sb); return;
    case BIN_MUL: ew_f32_binary(AK_EW_F32_MUL, df, a, b, n, sa, sb); return;
    case BIN_DIV: ew_f32_binary(AK_EW_F32_DIV, df, a, b, n, sa, sb); return;
    case BIN_MIN: ew_f32_binary(AK_EW_F32_MIN, df, a, b, n, sa, sb); return;
    case BIN_MAX: ew_f32_binary(AK_EW_F32_MAX, df, a, b, n, sa, sb); return;
    case BIN_PRELU: ew_f32_binary(AK_EW_F32_PRELU, df, a, b, n, sa, sb); return;
    case BIN_POW: pow_f32(df, a, b, n, sa, sb); return;
    case BIN_MOD:
        for (size_t i = 0; i < n; i++)
            df[i] = mod_f32(a[i * (size_t)sa], b[i * (size_t)sb], op->fmod);
        return;
    default:
        if (is_compare(op->kind)) cmp_f32(op, d, a, b, n, (size_t)sa, (size_t)sb);
        return;
    }
}

static void seg_f32(const void *op, void *dst, const void *const *in, const int *step,
                    size_t n) {
    f32_compute(op, dst, in[0], in[1], n, step[0], step[1]);
}

#define HALF_CHUNK 256

/* float16/bfloat16: widen HALF_CHUNK elements at a time, compute in float32, round once. */
static void seg_half(const void *op_, void *dst, const void *const *in, const int *step,
                     size_t n) {
    const bin_op *op = op_;
    const uint16_t *a = in[0], *b = in[1];
    float fa[HALF_CHUNK], fb[HALF_CHUNK], fd[HALF_CHUNK];
    for (size_t i = 0; i < n; i += HALF_CHUNK) {
        size_t m = n - i < HALF_CHUNK ? n - i : HALF_CHUNK;
        ew_half_to_f32(fa, a + i * (size_t)step[0], step[0] ? m : 1, op->ta);
        ew_half_to_f32(fb, b + i * (size_t)step[1], step[1] ? m : 1, op->tb);
        if (is_compare(op->kind)) {
            f32_compute(op, (uint8_t *)dst + i, fa, fb, m, step[0], step[1]);
        } else {
            f32_compute(op, fd, fa, fb, m, step[0], step[1]);
            ew_f32_to_half((uint16_t *)dst + i, fd, m, op->ta);
        }
    }
}

/* ---- float64 ------------------------------------------------------------------------ */

static double mod_f64(double x, double y, int c_fmod) {
    double r = fmod(x, y);
    if (!c_fmod && r != 0.0 && (r < 0.0) != (y < 0.0)) r += y;
    return r;
}

#define ARITH_LOOP(EXPR)                                                                   \
    for (size_t i = 0; i < n; i++) {                                                       \
        T x = a[i * sa], y = b[i * sb];                                                    \
        d[i] = (T)(EXPR);                                                                  \
    }                                                                                      \
    return;

static void seg_f64(const void *op_, void *dst, const void *const *in, const int *step,
                    size_t n) {
    typedef double T;
    const bin_op *op = op_;
    const T *a = in[0], *b = in[1];
    T *d = dst;
    size_t sa = (size_t)step[0], sb = (size_t)step[1];
    switch (op->kind) {
    case BIN_ADD: ARITH_LOOP(x + y)
    case BIN_SUB: ARITH_LOOP(x - y)
    case BIN_MUL: ARITH_LOOP(x * y)
    case BIN_DIV: ARITH_LOOP(x / y)
    case BIN_MOD: ARITH_LOOP(mod_f64(x, y, op->fmod))
    case BIN_MIN: ARITH_LOOP(x < y || x != x ? x : y)
    case BIN_MAX: ARITH_LOOP(x > y || x != x ? x : y)
    case BIN_PRELU: ARITH_LOOP(x < 0 ? x * y : x)
    case BIN_POW: ARITH_LOOP(pow(x, y))
    default: cmp_f64(op, dst, a, b, n, sa, sb); return;
    }
}

/* ---- integers ----------------------------------------------------------------------- */

/* x^e with wrapping multiplication; negative exponents give 1/x^|e| truncated. */
static uint64_t ipow(int64_t x, int64_t e) {
    if (e < 0) return x == 1 ? 1u : x == -1 ? ((e & 1) ? (uint64_t)-1 : 1u) : 0u;
    uint64_t r = 1, base = (uint64_t)x;
    for (uint64_t k = (uint64_t)e; k; k >>= 1) {
        if (k & 1) r *= base;
        base *= base;
    }
    return r;
}

/* T: the type, U: its unsigned twin (wrapping arithmetic without signed overflow). */
#define INT_ARITH_FN(NAME, TT, U, CMP, SIGNED)                                             \
    static void NAME(const void *op_, void *dst, const void *const *in, const int *step,  \
                     size_t n) {                                                           \
        typedef TT T;                                                                      \
        const bin_op *op = op_;                                                            \
        const T *a = in[0], *b = in[1];                                                    \
        T *d = dst;                                                                        \
        size_t sa = (size_t)step[0], sb = (size_t)step[1];                                 \
        const int is_signed = SIGNED;                                                      \
        switch (op->kind) {                                                                \
        case BIN_ADD: ARITH_LOOP((U)((U)x + (U)y))                                         \
        case BIN_SUB: ARITH_LOOP((U)((U)x - (U)y))                                         \
        case BIN_MUL: ARITH_LOOP((U)((U)x * (U)y))                                         \
        case BIN_DIV:                                                                      \
            ARITH_LOOP(y == 0 ? 0 : is_signed && y == (T)-1 ? (T)(U)(0u - (U)x) : (T)(x / y)) \
        case BIN_MOD:                                                                      \
            if (op->fmod) {                                                                \
                ARITH_LOOP(y == 0 || (is_signed && y == (T)-1) ? 0 : x % y)                \
            }                                                                              \
            ARITH_LOOP(int_pymod(x, y, is_signed))                                         \
        case BIN_MIN: ARITH_LOOP(x < y ? x : y)                                            \
        case BIN_MAX: ARITH_LOOP(x > y ? x : y)                                            \
        case BIN_PRELU: ARITH_LOOP(x > 0 || x == 0 ? (U)x : (U)((U)x * (U)y))              \
        case BIN_POW: ARITH_LOOP(ipow((int64_t)x, (int64_t)y))                             \
        default: CMP(op, dst, a, b, n, sa, sb); return;                                    \
        }                                                                                  \
    }

/* Python-style remainder (the divisor's sign), in int64 for every integer type. */
#define int_pymod(x, y, is_signed) ((is_signed) ? (T)pymod_i64((int64_t)(x), (int64_t)(y)) \
                                                : (T)(y == 0 ? 0 : (x) % (y)))

static int64_t pymod_i64(int64_t x, int64_t y) {
    if (y == 0 || y == -1) return 0;
    int64_t r = x % y;
    if (r != 0 && (r < 0) != (y < 0)) r += y;
    return r;
}

INT_ARITH_FN(seg_i8, int8_t, uint8_t, cmp_i8, 1)
INT_ARITH_FN(seg_u8, uint8_t, uint8_t, cmp_u8, 0)
INT_ARITH_FN(seg_i16, int16_t, uint16_t, cmp_i16, 1)
INT_ARITH_FN(seg_u16, uint16_t, uint16_t, cmp_u16, 0)
INT_ARITH_FN(seg_i32, int32_t, uint32_t, cmp_i32, 1)
INT_ARITH_FN(seg_u32, uint32_t, uint32_t, cmp_u32, 0)
INT_ARITH_FN(seg_i64, int64_t, uint64_t, cmp_i64, 1)
INT_ARITH_FN(seg_u64, uint64_t, uint64_t, cmp_u64, 0)

/* ---- bool logic, bitwise operators, BitShift ------------------------------------------ */

static void seg_logic(const void *op_, void *dst, const void *const *in, const int *step,
                      size_t n) {
    const bin_op *op = op_;
    const uint8_t *a = in[0], *b = in[1];
    uint8_t *d = dst;
    size_t sa = (size_t)step[0], sb = (size_t)step[1];
    for (size_t i = 0; i < n; i++) {
        int x = a[i * sa] != 0, y = b[i * sb] != 0;
        d[i] = (uint8_t)(op->kind == BIN_AND ? x & y : op->kind == BIN_OR ? x | y : x ^ y);
    }
}

/* Bitwise operators depend only on the element width; shifts of the width or more give 0. */
#define BITS_FN(NAME, U, WIDTH)                                                            \
    static void NAME(const void *op_, void *dst, const void *const *in, const int *step,  \
                     size_t n) {                                                           \
        typedef U T;                                                                       \
        const bin_op *op = op_;                                                            \
        const T *a = in[0], *b = in[1];                                                    \
        T *d = dst;                                                                        \
        size_t sa = (size_t)step[0], sb = (size_t)step[1];                                 \
        switch (op->kind) {                                                                \
        case BIN_BAND: ARITH_LOOP(x & y)                                                   \
        case BIN_BOR: ARITH_LOOP(x | y)                                                    \
        case BIN_BXOR: ARITH_LOOP(x ^ y)                                                   \
        case BIN_SHL: ARITH_LOOP(y >= (WIDTH) ? 0 : x << y)                                \
        case BIN_SHR: ARITH_LOOP(y >= (WIDTH) ? 0 : x >> y)                                \
        default: return;                                                                   \
        }                                                                                  \
    }
BITS_FN(bits_8, uint8_t, 8u)
BITS_FN(bits_16, uint16_t, 16u)
BITS_FN(bits_32, uint32_t, 32u)
BITS_FN(bits_64, uint64_t, 64u)

/* ---- Pow over mixed types ------------------------------------------------------------ */

/* Exact integer powers when both are integers, else pow() in double rounded to the base's
 * type (numpy's promotion then the cast ONNX asks for). */
static void seg_pow_mixed(const void *op_, void *dst, const void *const *in, const int *step,
                          size_t n) {
    const bin_op *op = op_;
    size_t sa = (size_t)step[0], sb = (size_t)step[1];
    int ints = ak__elem_is_integer(op->ta) && ak__elem_is_integer(op->tb);
    for (size_t i = 0; i < n; i++) {
        if (ints) {
            ak__elem_set_int(dst, op->ta, i, ipow(ak__elem_get_int(in[0], op->ta, i * sa),
                                         ak__elem_get_int(in[1], op->tb, i * sb)));
        } else {
            double x = ak__elem_get(in[0], op->ta, i * sa), y = ak__elem_get(in[1], op->tb, i * sb);
            ak__elem_set(dst, op->ta, i, pow(x, y));
        }
    }
}

/* ---- choosing a kernel --------------------------------------------------------------- */

static ew_seg_fn arith_seg(ak_elem_type t) {
    switch (t) {
    case AK_ELEM_F32: return seg_f32;
    case AK_ELEM_F16: case AK_ELEM_BF16: return seg_half;
    case AK_ELEM_F64: return seg_f64;
    case AK_ELEM_I8: return seg_i8;
    case AK_ELEM_U8: return seg_u8;
    case AK_ELEM_BOOL: return seg_u8;
    case AK_ELEM_I16: return seg_i16;
    case AK_ELEM_U16: return seg_u16;
    case AK_ELEM_I32: return seg_i32;
    case AK_ELEM_U32: return seg_u32;
    case AK_ELEM_I64: return seg_i64;
    case AK_ELEM_U64: return seg_u64;
    default: return NULL;
    }
}

static ew_seg_fn bits_seg(ak_elem_type t) {
    switch (ak_elem_type_size(t)) {
    case 1: return bits_8;
    case 2: return bits_16;
    case 4: return bits_32;
    case 8: return bits_64;
    default: return NULL;
    }
}

/* The kernel for kind on these types, or NULL when the types are not accepted. */
/* Equal on STRING tensors (ak_string elements): byte for byte. */
static void seg_equal_strings(const void *op, void *dst, const void *const *in, const int *step,
                              size_t n) {
    (void)op;
    const ak_string *a = in[0], *b = in[1];
    uint8_t *d = dst;
    for (size_t i = 0; i < n; i++) {
        const ak_string *x = &a[i * (size_t)step[0]], *y = &b[i * (size_t)step[1]];
        d[i] = x->len == y->len && (!x->len || !memcmp(x->data, y->data, x->len));
    }
}

static ew_seg_fn pick_seg(bin_kind k, ak_elem_type ta, ak_elem_type tb) {
    int num = ak__elem_is_float(ta) || ak__elem_is_integer(ta);
    if (k == BIN_POW) {
        if (!num || !(ak__elem_is_float(tb) || ak__elem_is_integer(tb))) return NULL;
        return ta == tb ? arith_seg(ta) : seg_pow_mixed;
    }
    if (ta != tb) return NULL;
    if (k == BIN_EQ && ta == AK_ELEM_STRING) return seg_equal_strings;
    if (is_compare(k)) return num || ta == AK_ELEM_BOOL ? arith_seg(ta) : NULL;
    if (is_logic(k)) return ta == AK_ELEM_BOOL ? seg_logic : NULL;
    if (is_bitwise(k)) return ak__elem_is_integer(ta) ? bits_seg(ta) : NULL;
    return num ? arith_seg(ta) : NULL;
}

/* ---- operands, shapes and the run ----------------------------------------------------- */

/* Opset < 7 "broadcast" attribute: B lines up with A from `axis` (default: the trailing
 * dims); a view of B padded with trailing 1s makes numpy rules do the same. */
static ak_status legacy_operand(const ak__op_ctx *ctx, const ak__tensor *a, const ak__tensor *b,
                                ak__tensor *view, const ak__tensor **out) {
    *out = b;
    if (ctx->node->opset >= 7 || !ak__attr_int(ctx->node, "broadcast", 0)) return AK_OK;
    int axis = a->rank - b->rank;
    if (ak__attr_has(ctx->node, "axis"))
        AK_CHECK(ak__op_axis(ctx, ak__attr_int(ctx->node, "axis", 0), a->rank, 0, &axis));
    if (axis + b->rank > a->rank)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                          "broadcast axis %d with a rank-%d B does not fit rank-%d A", axis,
                          b->rank, a->rank);
    *view = *b;
    view->rank = a->rank - axis;
    for (int d = b->rank; d < view->rank; d++) view->dims[d] = 1;
    *out = view;
    return AK_OK;
}

/* Opset < 7 PRelu: a 1-D slope of size C applies per channel (dim 1). */
static void prelu_operand(const ak__op_ctx *ctx, const ak__tensor *x, const ak__tensor *slope,
                          ak__tensor *view, const ak__tensor **out) {
    *out = slope;
    if (ctx->node->opset >= 7 || x->rank < 3 || slope->rank != 1 ||
        slope->dims[0] != x->dims[1] || slope->dims[0] == x->dims[x->rank - 1])
        return;
    *view = *slope;
    view->rank = x->rank - 1;
    for (int d = 1; d < view->rank; d++) view->dims[d] = 1;
    *out = view;
}

static ak_status operands(const ak__op_ctx *ctx, bin_kind k, const ak__tensor **ab,
                          ak__tensor *view) {
    AK_CHECK(ak__op_require(ctx, 0, &ab[0]));
    AK_CHECK(ak__op_require(ctx, 1, &ab[1]));
    if (k == BIN_PRELU) {
        prelu_operand(ctx, ab[0], ab[1], view, &ab[1]);
        return AK_OK;
    }
    return legacy_operand(ctx, ab[0], ab[1], view, &ab[1]);
}

static ak_status bin_reshape(ak__op_ctx *ctx, bin_kind k) {
    const ak__tensor *ab[2];
    ak__tensor view;
    AK_CHECK(operands(ctx, k, ab, &view));
    if (!pick_seg(k, ab[0]->type, ab[1]->type))
        return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED,
                          "inputs of types %s and %s are not handled",
                          ak_elem_type_name(ab[0]->type), ak_elem_type_name(ab[1]->type));
    int rank;
    int64_t dims[AK_IR_MAX_RANK];
    AK_CHECK(ak__op_broadcast(ctx, ab, 2, &rank, dims));
    ak_elem_type t = is_compare(k) || is_logic(k) ? AK_ELEM_BOOL : ab[0]->type;
    return ak__op_set_output(ctx, 0, t, rank, dims);
}

static ak_status bin_apply(const ak__op_ctx *ctx, bin_kind k, ak__tensor *out,
                           const ak__tensor *a, const ak__tensor *b) {
    bin_op op = {k, (int)ak__attr_int(ctx->node, "fmod", 0), a->type, b->type};
    if (k == BIN_SHL || k == BIN_SHR) {
        const char *dir = ak__attr_string(ctx->node, "direction", "");
        if (strcmp(dir, "LEFT") && strcmp(dir, "RIGHT"))
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                              "direction is '%s', expected LEFT or RIGHT", dir);
        op.kind = dir[0] == 'L' ? BIN_SHL : BIN_SHR;
    }
    ew_seg_fn fn = pick_seg(op.kind, a->type, b->type);
    const ak__tensor *ins[2] = {a, b};
    uint64_t par = k == BIN_POW || k == BIN_MOD ? EW_PAR_COSTLY : EW_PAR_CHEAP;
    return ew_broadcast_run(ctx, out, ins, 2, fn, &op, par);
}

static ak_status bin_run(ak__op_ctx *ctx, bin_kind k) {
    const ak__tensor *ab[2];
    ak__tensor view;
    AK_CHECK(operands(ctx, k, ab, &view));
    ak__tensor *out = ak__op_out(ctx, 0);
    if (!out) return AK_OK;
    return bin_apply(ctx, k, out, ab[0], ab[1]);
}

#define BINARY_OP(name, ONNX, KIND)                                                        \
    static ak_status reshape_##name(ak__op_ctx *ctx) { return bin_reshape(ctx, KIND); }    \
    static ak_status run_##name(ak__op_ctx *ctx) { return bin_run(ctx, KIND); }            \
    const ak__op_def ew_op_##name = {"", ONNX, 1, 0, NULL, NULL, reshape_##name, run_##name};

BINARY_OP(add, "Add", BIN_ADD)
BINARY_OP(sub, "Sub", BIN_SUB)
BINARY_OP(mul, "Mul", BIN_MUL)
BINARY_OP(div, "Div", BIN_DIV)
BINARY_OP(pow, "Pow", BIN_POW)
BINARY_OP(mod, "Mod", BIN_MOD)
BINARY_OP(prelu, "PRelu", BIN_PRELU)
BINARY_OP(equal, "Equal", BIN_EQ)
BINARY_OP(less, "Less", BIN_LT)
BINARY_OP(greater, "Greater", BIN_GT)
BINARY_OP(less_equal, "LessOrEqual", BIN_LE)
BINARY_OP(greater_equal, "GreaterOrEqual", BIN_GE)
BINARY_OP(and, "And", BIN_AND)
BINARY_OP(or, "Or", BIN_OR)
BINARY_OP(xor, "Xor", BIN_XOR)
BINARY_OP(bitshift, "BitShift", BIN_SHL)
BINARY_OP(bitwise_and, "BitwiseAnd", BIN_BAND)
BINARY_OP(bitwise_or, "BitwiseOr", BIN_BOR)
BINARY_OP(bitwise_xor, "BitwiseXor", BIN_BXOR)

/* ---- Sum, Mean, Min, Max over 1..n inputs --------------------------------------------- */

static ak_status var_reshape(ak__op_ctx *ctx, bin_kind k) {
    if (ctx->num_inputs == 0)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "needs at least one input");
    const ak__tensor *first;
    AK_CHECK(ak__op_require(ctx, 0, &first));
    for (uint32_t i = 1; i < ctx->num_inputs; i++) {
        const ak__tensor *t;
        AK_CHECK(ak__op_require(ctx, i, &t));
        AK_CHECK(ak__op_check_type(ctx, i, t, first->type));
    }
    if (!pick_seg(k, first->type, first->type) || (k == BIN_ADD && first->type == AK_ELEM_BOOL))
        return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED, "type %s is not handled",
                          ak_elem_type_name(first->type));
    int rank;
    int64_t dims[AK_IR_MAX_RANK];
    AK_CHECK(ak__op_broadcast(ctx, ctx->inputs, ctx->num_inputs, &rank, dims));
    return ak__op_set_output(ctx, 0, first->type, rank, dims);
}

static void seg_copy(const void *op, void *dst, const void *const *in, const int *step,
                     size_t n) {
    size_t es = *(const size_t *)op;
    if (step[0]) {
        memcpy(dst, in[0], n * es);
        return;
    }
    for (size_t i = 0; i < n; i++) memcpy((char *)dst + i * es, in[0], es);
}

/* Mean's final division, in place. */
static void seg_scale(const void *op_, void *dst, const void *const *in, const int *step,
                      size_t n) {
    (void)in;
    (void)step;
    const bin_op *op = op_;
    double f = 1.0 / op->fmod; /* fmod holds the input count here */
    if (op->ta == AK_ELEM_F32) {
        ew_f32_unary(AK_EW_F32_SCALE, dst, dst, n, (float)f, 0.0f);
    } else if (op->ta == AK_ELEM_F64) {
        for (size_t i = 0; i < n; i++) ((double *)dst)[i] *= f;
    } else { /* float16 / bfloat16 */
        for (size_t i = 0; i < n; i++)
            ak__elem_set(dst, op->ta, i, ak__elem_get(dst, op->ta, i) * f);
    }
}

static ak_status var_run(ak__op_ctx *ctx, bin_kind k, int mean) {
    ak__tensor *out = ak__op_out(ctx, 0);
    if (!out) return AK_OK;
    const ak__tensor *const *in = ctx->inputs;
    uint32_t n = ctx->num_inputs;
    if (n == 1) {
        size_t es = ak_elem_type_size(out->type);
        AK_CHECK(ew_broadcast_run(ctx, out, in, 1, seg_copy, &es, EW_PAR_CHEAP));
    } else {
        AK_CHECK(bin_apply(ctx, k, out, in[0], in[1]));
        for (uint32_t i = 2; i < n; i++) AK_CHECK(bin_apply(ctx, k, out, out, in[i]));
    }
    if (!mean || n == 1) return AK_OK;
    bin_op op = {k, (int)n, out->type, out->type};
    const ak__tensor *self[1] = {out};
    return ew_broadcast_run(ctx, out, self, 1, seg_scale, &op, EW_PAR_CHEAP);
}

static ak_status reshape_sum(ak__op_ctx *ctx) { return var_reshape(ctx, BIN_ADD); }
static ak_status run_sum(ak__op_ctx *ctx) { return var_run(ctx, BIN_ADD, 0); }
static ak_status reshape_mean(ak__op_ctx *ctx) {
    const ak__tensor *t = ak__op_in(ctx, 0);
    if (t && !ak__elem_is_float(t->type))
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "type %s is not a float type",
                          ak_elem_type_name(t->type));
    return var_reshape(ctx, BIN_ADD);
}
static ak_status run_mean(ak__op_ctx *ctx) { return var_run(ctx, BIN_ADD, 1); }
static ak_status reshape_min(ak__op_ctx *ctx) { return var_reshape(ctx, BIN_MIN); }
static ak_status run_min(ak__op_ctx *ctx) { return var_run(ctx, BIN_MIN, 0); }
static ak_status reshape_max(ak__op_ctx *ctx) { return var_reshape(ctx, BIN_MAX); }
static ak_status run_max(ak__op_ctx *ctx) { return var_run(ctx, BIN_MAX, 0); }

const ak__op_def ew_op_sum = {"", "Sum", 1, 0, NULL, NULL, reshape_sum, run_sum};
const ak__op_def ew_op_mean = {"", "Mean", 1, 0, NULL, NULL, reshape_mean, run_mean};
const ak__op_def ew_op_min = {"", "Min", 1, 0, NULL, NULL, reshape_min, run_min};
const ak__op_def ew_op_max = {"", "Max", 1, 0, NULL, NULL, reshape_max, run_max};

/* ---- Where ------------------------------------------------------------------------------ */

#define WHERE_FN(NAME, T)                                                                  \
    static void NAME(const void *op, void *dst, const void *const *in, const int *step,   \
                     size_t n) {                                                           \
        (void)op;                                                                          \
        const uint8_t *c = in[0];                                                          \
        const T *x = in[1], *y = in[2];                                                    \
        T *d = dst;                                                                        \
        size_t sc = (size_t)step[0], sx = (size_t)step[1], sy = (size_t)step[2];           \
        for (size_t i = 0; i < n; i++) d[i] = c[i * sc] ? x[i * sx] : y[i * sy];           \
    }
WHERE_FN(where_8, uint8_t)
WHERE_FN(where_16, uint16_t)
WHERE_FN(where_32, uint32_t)
WHERE_FN(where_64, uint64_t)
WHERE_FN(where_strings, ak_string) /* the elements: their bytes stay where they are */

static ew_seg_fn where_seg(ak_elem_type t) {
    if (t == AK_ELEM_STRING) return where_strings;
    switch (ak_elem_type_size(t)) {
    case 1: return where_8;
    case 2: return where_16;
    case 4: return where_32;
    case 8: return where_64;
    default: return NULL;
    }
}

static ak_status where_reshape(ak__op_ctx *ctx) {
    const ak__tensor *t[3];
    for (uint32_t i = 0; i < 3; i++) AK_CHECK(ak__op_require(ctx, i, &t[i]));
    AK_CHECK(ak__op_check_type(ctx, 0, t[0], AK_ELEM_BOOL));
    AK_CHECK(ak__op_check_type(ctx, 2, t[2], t[1]->type));
    if (!where_seg(t[1]->type))
        return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED, "type %s is not handled",
                          ak_elem_type_name(t[1]->type));
    int rank;
    int64_t dims[AK_IR_MAX_RANK];
    AK_CHECK(ak__op_broadcast(ctx, t, 3, &rank, dims));
    return ak__op_set_output(ctx, 0, t[1]->type, rank, dims);
}

static ak_status where_run(ak__op_ctx *ctx) {
    ak__tensor *out = ak__op_out(ctx, 0);
    if (!out) return AK_OK;
    return ew_broadcast_run(ctx, out, ctx->inputs, 3, where_seg(out->type), NULL, EW_PAR_CHEAP);
}

const ak__op_def ew_op_where = {"", "Where", 1, 0, NULL, NULL, where_reshape, where_run};
