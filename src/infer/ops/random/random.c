/* Seeded random operators: RandomNormal, RandomUniform, RandomNormalLike,
 * RandomUniformLike, Bernoulli, Multinomial, and Dropout (opset 12+) with its random
 * training-mode path.
 *
 * Generator: Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2,
 * 3", SC 2011), a counter-based generator: element i of a node's output in its r-th run
 * is a pure function of (key, counter), key = the node's seed and counter = (elements
 * the node drew before this run) + i. So a seeded node gives the same values for the
 * same run number in every session, whatever the thread count, and two seeds give
 * unrelated streams. Without the `seed` attribute the key comes from the OS
 * (getrandom) once, when the session is created. onnxruntime's generator is another
 * one: values differ from its values; distributions, shapes and types agree.
 *
 * The operators are AK_OP_NONDETERMINISTIC: never constant-folded, never merged with an
 * identical node by the optimizer. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "core/half.h"
#include "infer/runtime/op.h"
#include "infer/ops/tensor/tensor_ops.h"

/* ---- Philox4x32-10 --------------------------------------------------------------------- */

static void philox(uint64_t key, uint64_t counter, uint32_t out[4]) {
    uint32_t c0 = (uint32_t)counter, c1 = (uint32_t)(counter >> 32), c2 = 0, c3 = 0;
    uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
    for (int r = 0; r < 10; r++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c1 = (uint32_t)p1, c3 = (uint32_t)p0, c0 = n0, c2 = n2;
        k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
    }
    out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}

/* Uniform in [0, 1) with 53 random bits, and a standard normal (Box-Muller), for
 * draw `counter`. */
static double uniform_at(uint64_t key, uint64_t counter) {
    uint32_t u[4];
    philox(key, counter, u);
    return (double)(((uint64_t)u[0] << 21) ^ (u[1] >> 11)) * 0x1p-53;
}

static double normal_at(uint64_t key, uint64_t counter) {
    uint32_t u[4];
    philox(key, counter, u);
    double a = ((double)(((uint64_t)u[0] << 21) ^ (u[1] >> 11)) + 0.5) * 0x1p-53; /* (0,1) */
    double b = (double)(((uint64_t)u[2] << 21) ^ (u[3] >> 11)) * 0x1p-53;
    return sqrt(-2.0 * log(a)) * cos(2.0 * M_PI * b);
}

/* ---- per-node state --------------------------------------------------------------------- */

typedef struct random_op {
    uint64_t key;
    uint64_t drawn; /* counter of the next run's first element */
} random_op;

static ak_status random_create(const ak__ir_node *n, const ak__tensor *const *consts,
                               void **state) {
    (void)consts;
    random_op *r = calloc(1, sizeof *r);
    if (!r) return AK_FAIL(AK_ERR_NO_MEMORY, "%s: out of memory", n->op_type);
    if (ak__attr_has(n, "seed")) {
        float seed = ak__attr_float(n, "seed", 0.0f);
        uint32_t bits;
        memcpy(&bits, &seed, sizeof bits);
        r->key = ((uint64_t)bits << 32) ^ 0x5EEDu; /* every float seed its own stream */
    } else if (getrandom(&r->key, sizeof r->key, 0) != (ssize_t)sizeof r->key) {
        free(r);
        return AK_FAIL(AK_ERR_IO, "%s: getrandom failed (no OS seed for a node without "
                       "'seed')", n->op_type);
    }
    *state = r;
    return AK_OK;
}

/* The counter of element 0 of this run; advances the node's stream by n draws. */
static uint64_t take(ak__op_ctx *ctx, uint64_t n) {
    random_op *r = ctx->state;
    uint64_t first = r->drawn;
    r->drawn += n;
    return first;
}

static ak_status float_dtype(const ak__op_ctx *ctx, int64_t dtype, ak_elem_type *out) {
    if (dtype == AK_ELEM_F32 || dtype == AK_ELEM_F64 || dtype == AK_ELEM_F16 ||
        dtype == AK_ELEM_BF16) {
        *out = (ak_elem_type)dtype;
        return AK_OK;
    }
    return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "dtype %lld is not a float type "
                      "(float16, bfloat16, float32, float64)", (long long)dtype);
}

static void put(ak__tensor *y, uint64_t i, double v) {
    if (y->type == AK_ELEM_F32) ((float *)y->data)[i] = (float)v;
    else ak__elem_set(y->data, y->type, i, v);
}

/* ---- RandomNormal / RandomUniform and their Like forms ---------------------------------- */

static ak_status random_reshape(ak__op_ctx *ctx, int like) {
    ak_elem_type type;
    if (like) {
        const ak__tensor *x;
        AK_CHECK(ak__op_require(ctx, 0, &x));
        AK_CHECK(float_dtype(ctx, ak__attr_int(ctx->node, "dtype", x->type), &type));
        return ak__op_set_output(ctx, 0, type, x->rank, x->dims);
    }
    AK_CHECK(float_dtype(ctx, ak__attr_int(ctx->node, "dtype", AK_ELEM_F32), &type));
    const int64_t *shape;
    size_t rank = ak__attr_ints(ctx->node, "shape", &shape);
    if (!ak__attr_has(ctx->node, "shape"))
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "attribute 'shape' is required");
    if (rank > AK_IR_MAX_RANK)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "shape of rank %zu is too deep", rank);
    return ak__op_set_output(ctx, 0, type, (int)rank, shape);
}

static ak_status normal_run(ak__op_ctx *ctx) {
    ak__tensor *y = ak__op_out(ctx, 0);
    double mean = ak__attr_float(ctx->node, "mean", 0.0f);
    double scale = ak__attr_float(ctx->node, "scale", 1.0f);
    random_op *r = ctx->state;
    uint64_t c = take(ctx, y->count);
    for (uint64_t i = 0; i < y->count; i++) put(y, i, mean + scale * normal_at(r->key, c + i));
    return AK_OK;
}

static ak_status uniform_run(ak__op_ctx *ctx) {
    ak__tensor *y = ak__op_out(ctx, 0);
    double low = ak__attr_float(ctx->node, "low", 0.0f);
    double high = ak__attr_float(ctx->node, "high", 1.0f);
    random_op *r = ctx->state;
    uint64_t c = take(ctx, y->count);
    for (uint64_t i = 0; i < y->count; i++) {
        double v = low + (high - low) * uniform_at(r->key, c + i);
        if (y->type == AK_ELEM_F32 && (float)v >= (float)high && high > low) /* keep [low, high) */
            v = nextafterf((float)high, (float)low);
        put(y, i, v);
    }
    return AK_OK;
}

static ak_status shape_reshape(ak__op_ctx *ctx) { return random_reshape(ctx, 0); }
static ak_status like_reshape(ak__op_ctx *ctx) { return random_reshape(ctx, 1); }

#define RANDOM_DEF(name, op, reshape, run)                                                   \
    static const ak__op_def name = {"", op, 1, AK_OP_NONDETERMINISTIC, random_create, free,   \
                                    reshape, run};
RANDOM_DEF(op_random_normal, "RandomNormal", shape_reshape, normal_run)
RANDOM_DEF(op_random_uniform, "RandomUniform", shape_reshape, uniform_run)
RANDOM_DEF(op_random_normal_like, "RandomNormalLike", like_reshape, normal_run)
RANDOM_DEF(op_random_uniform_like, "RandomUniformLike", like_reshape, uniform_run)

/* ---- Bernoulli: 1 with probability input[i] -------------------------------------------- */

static ak_status bernoulli_reshape(ak__op_ctx *ctx) {
    const ak__tensor *x;
    AK_CHECK(ak__op_require(ctx, 0, &x));
    if (!ak__elem_is_float(x->type))
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_ARG, "input has type %s, expected a float "
                          "type", ak_elem_type_name(x->type));
    int64_t dtype = ak__attr_int(ctx->node, "dtype", x->type);
    if (dtype <= 0 || dtype >= AK_ELEM_COUNT_ || dtype == AK_ELEM_STRING ||
        !(ak__elem_is_float((ak_elem_type)dtype) || ak__elem_is_integer((ak_elem_type)dtype) ||
          dtype == AK_ELEM_BOOL))
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "dtype %lld is not a number or bool "
                          "type", (long long)dtype);
    return ak__op_set_output(ctx, 0, (ak_elem_type)dtype, x->rank, x->dims);
}

static ak_status bernoulli_run(ak__op_ctx *ctx) {
    const ak__tensor *x = ak__op_in(ctx, 0);
    ak__tensor *y = ak__op_out(ctx, 0);
    random_op *r = ctx->state;
    uint64_t c = take(ctx, y->count);
    for (uint64_t i = 0; i < y->count; i++) {
        double p = ak__elem_get(x->data, x->type, i);
        if (!(p >= 0.0 && p <= 1.0))
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_ARG, "probability %g (element %llu) is "
                              "outside [0, 1]", p, (unsigned long long)i);
        ak__elem_set(y->data, y->type, i, uniform_at(r->key, c + i) < p ? 1.0 : 0.0);
    }
    return AK_OK;
}

RANDOM_DEF(op_bernoulli, "Bernoulli", bernoulli_reshape, bernoulli_run)

/* ---- Multinomial: sample_size class indices per row of unnormalized log-probabilities -- */

static ak_status multinomial_reshape(ak__op_ctx *ctx) {
    const ak__tensor *x;
    AK_CHECK(ak__op_require(ctx, 0, &x));
    if (!ak__elem_is_float(x->type) || x->rank != 2)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_ARG, "input must be a float [batch, classes] "
                          "tensor");
    int64_t dtype = ak__attr_int(ctx->node, "dtype", AK_ELEM_I32);
    int64_t samples = ak__attr_int(ctx->node, "sample_size", 1);
    if (dtype != AK_ELEM_I32 && dtype != AK_ELEM_I64)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "dtype %lld is not int32 or int64",
                          (long long)dtype);
    if (samples < 1)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "sample_size %lld is below 1",
                          (long long)samples);
    if (x->dims[1] < 1 && x->dims[0] > 0)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_ARG, "input has no classes");
    int64_t dims[2] = {x->dims[0], samples};
    return ak__op_set_output(ctx, 0, (ak_elem_type)dtype, 2, dims);
}

static ak_status multinomial_run(ak__op_ctx *ctx) {
    const ak__tensor *x = ak__op_in(ctx, 0);
    ak__tensor *y = ak__op_out(ctx, 0);
    random_op *r = ctx->state;
    uint64_t rows = (uint64_t)x->dims[0], k = (uint64_t)x->dims[1], s = (uint64_t)y->dims[1];
    uint64_t c = take(ctx, y->count);
    for (uint64_t b = 0; b < rows; b++) {
        double most = -INFINITY, total = 0.0;
        for (uint64_t j = 0; j < k; j++) most = fmax(most, ak__elem_get(x->data, x->type, b * k + j));
        for (uint64_t j = 0; j < k; j++) total += exp(ak__elem_get(x->data, x->type, b * k + j) - most);
        for (uint64_t t = 0; t < s; t++) {
            double u = uniform_at(r->key, c + b * s + t) * total, acc = 0.0;
            uint64_t j = 0;
            for (; j + 1 < k; j++) {
                acc += exp(ak__elem_get(x->data, x->type, b * k + j) - most);
                if (u < acc) break;
            }
            ak__elem_set_int(y->data, y->type, b * s + t, j);
        }
    }
    return AK_OK;
}

RANDOM_DEF(op_multinomial, "Multinomial", multinomial_reshape, multinomial_run)

/* ---- Dropout (opset 12+): random in training mode --------------------------------------
 * Inference (training_mode absent or false, or ratio 0) copies the input and sets the
 * mask all true; training mode keeps each element with probability 1 - ratio and scales
 * it by 1 / (1 - ratio) (ratio 1 drops everything). The inference-only definition for
 * older opsets stays in ops/tensor/shape.c, where output 0 aliases the input. */

typedef struct dropout_mode {
    int training;
    double ratio;
} dropout_mode;

static ak_status dropout_mode_read(const ak__op_ctx *ctx, dropout_mode *m) {
    const ak__tensor *r = ak__op_in(ctx, 1), *t = ak__op_in(ctx, 2);
    int64_t training = 0;
    m->ratio = 0.5;
    if (r) AK_CHECK(ak__tops_scalar_double(ctx, r, "ratio", &m->ratio));
    if (t) AK_CHECK(ak__tops_scalar_int(ctx, t, "training_mode", &training));
    if (!(m->ratio >= 0.0 && m->ratio <= 1.0))
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_ARG, "ratio %g is outside [0, 1]", m->ratio);
    m->training = training && m->ratio != 0.0;
    return AK_OK;
}

static ak_status dropout_reshape(ak__op_ctx *ctx) {
    const ak__tensor *x;
    dropout_mode m;
    AK_CHECK(ak__op_require(ctx, 0, &x));
    AK_CHECK(dropout_mode_read(ctx, &m));
    if (m.training && !ak__elem_is_float(x->type))
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_ARG, "training mode needs a float input, "
                          "not %s", ak_elem_type_name(x->type));
    AK_CHECK(ak__op_set_output_like(ctx, 0, x));
    return ak__op_set_output(ctx, 1, AK_ELEM_BOOL, x->rank, x->dims);
}

static ak_status dropout_run(ak__op_ctx *ctx) {
    const ak__tensor *x = ak__op_in(ctx, 0);
    ak__tensor *y = ak__op_out(ctx, 0), *mask = ak__op_out(ctx, 1);
    dropout_mode m;
    AK_CHECK(dropout_mode_read(ctx, &m));
    if (!m.training) {
        if (y && x->count) memmove(y->data, x->data, ak__tensor_nbytes(x));
        if (mask && mask->count) memset(mask->data, 1, (size_t)mask->count);
        return AK_OK;
    }
    random_op *r = ctx->state;
    uint64_t c = take(ctx, x->count);
    double scale = m.ratio < 1.0 ? 1.0 / (1.0 - m.ratio) : 0.0;
    for (uint64_t i = 0; i < x->count; i++) {
        int keep = uniform_at(r->key, c + i) >= m.ratio;
        if (mask) ((uint8_t *)mask->data)[i] = (uint8_t)keep;
        if (!y) continue;
        if (y->type == AK_ELEM_F32)
            ((float *)y->data)[i] = keep ? (float)(((const float *)x->data)[i] * scale) : 0.0f;
        else
            ak__elem_set(y->data, y->type, i, keep ? ak__elem_get(x->data, x->type, i) * scale : 0.0);
    }
    return AK_OK;
}

static const ak__op_def op_dropout_12 = {"", "Dropout", 12, AK_OP_NONDETERMINISTIC,
                                         random_create, free, dropout_reshape, dropout_run};

const ak__op_def *const ak__ops_random[] = {
    &op_random_normal, &op_random_uniform, &op_random_normal_like, &op_random_uniform_like,
    &op_bernoulli,     &op_multinomial,    &op_dropout_12,          NULL,
};
