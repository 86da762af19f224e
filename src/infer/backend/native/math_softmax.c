/* Softmax, LogSoftmax and Hardmax.
 *
 * Before opset 13 the input is read as a matrix [prod(dims[:axis]), prod(dims[axis:])]
 * (axis defaults to 1) and each row is normalized; from 13 only dims[axis] is (axis
 * defaults to -1). Both make a layout [outer][n][inner]: the rows of the normalized axis
 * are contiguous when inner is 1, the transformer case, which float32 runs with vector
 * kernels (one pass for the maximum, one for exp and its sum, one to scale) with rows
 * split over the thread pool. inner > 1 works on blocks of columns with the same
 * kernels; other float types go through double. */
#include <math.h>
#include <string.h>

#include "infer/backend/native/math_reduce.h"
#include "infer/backend/native/math_softmax.h"

typedef enum { SM_SOFTMAX, SM_LOGSOFTMAX, SM_HARDMAX } sm_mode;

typedef struct {
    uint64_t outer, n, inner;
} sm_layout;

static ak_status sm_layout_of(const ak__op_ctx *ctx, const ak__tensor *x, sm_layout *l) {
    int old = ctx->node->opset < 13;
    int axis;
    if (x->rank == 0)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "the input is a scalar");
    AK_CHECK(ak__op_axis(ctx, ak__attr_int(ctx->node, "axis", old ? 1 : -1), x->rank, old,
                         &axis));
    l->outer = l->n = l->inner = 1;
    for (int d = 0; d < x->rank; d++) {
        uint64_t v = (uint64_t)x->dims[d];
        if (d < axis) l->outer *= v;
        else if (d == axis || old) l->n *= v;
        else l->inner *= v;
    }
    return AK_OK;
}

static ak_status sm_reshape(ak__op_ctx *ctx) {
    const ak__tensor *x;
    AK_CHECK(ak__op_require(ctx, 0, &x));
    if (!ak__elem_is_float(x->type))
        return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED, "input type %s is not supported",
                          ak_elem_type_name(x->type));
    sm_layout l;
    AK_CHECK(sm_layout_of(ctx, x, &l));
    return ak__op_set_output_like(ctx, 0, x);
}

/* ---- float32 kernels --------------------------------------------------------------- */

/* y[0..k) = exp(x[0..k) - sub) for k <= 8 through a padded vector; returns the sum. */
AK_MATH_INLINE float exp_sub_tail(float *y, const float *x, size_t k, float sub) {
    float buf[8];
    for (size_t l = 0; l < 8; l++) buf[l] = l < k ? x[l] - sub : -INFINITY;
    ak__v8f v;
    AK_V8_LOAD(v, buf);
    AK_V8_EXP_NONPOS(v);
    AK_V8_STORE(buf, v);
    float s = 0.0f;
    for (size_t l = 0; l < k; l++) {
        if (y) y[l] = buf[l];
        s += buf[l];
    }
    return s;
}

/* Normalizes `rows` contiguous rows of n floats (inner == 1). */
AK_MATH_INLINE void rows_body(const float *x, float *y, size_t rows, size_t n, sm_mode mode) {
    for (size_t row = 0; row < rows; row++, x += n, y += n) {
        size_t i = 0;
        ak__v8f m8 = AK_V8_SPLAT(-INFINITY);
        for (; i + 8 <= n; i += 8) {
            ak__v8f v;
            AK_V8_LOAD(v, x + i);
            m8 = AK_V8_SELECT(v > m8, v, m8);
        }
        float m = m8[0];
        for (int l = 1; l < 8; l++) m = m8[l] > m ? m8[l] : m;
        for (; i < n; i++) m = x[i] > m ? x[i] : m;

        /* exp(x - m): stored for Softmax, only summed for LogSoftmax */
        float *dst = mode == SM_SOFTMAX ? y : NULL;
        ak__v8f s8 = AK_V8_SPLAT(0.0f), mm = AK_V8_SPLAT(m);
        for (i = 0; i + 8 <= n; i += 8) {
            ak__v8f v;
            AK_V8_LOAD(v, x + i);
            v -= mm;
            AK_V8_EXP_NONPOS(v);
            if (dst) AK_V8_STORE(dst + i, v);
            s8 += v;
        }
        float s = AK_V8_HSUM(s8);
        if (i < n) s += exp_sub_tail(dst ? dst + i : NULL, x + i, n - i, m);

        if (mode == SM_SOFTMAX) {
            ak__v8f r = AK_V8_SPLAT(1.0f / s);
            for (i = 0; i + 8 <= n; i += 8) {
                ak__v8f v;
                AK_V8_LOAD(v, y + i);
                v *= r;
                AK_V8_STORE(y + i, v);
            }
            for (; i < n; i++) y[i] *= r[0];
        } else {
            float c = m + logf(s);
            ak__v8f cc = AK_V8_SPLAT(c);
            for (i = 0; i + 8 <= n; i += 8) {
                ak__v8f v;
                AK_V8_LOAD(v, x + i);
                v -= cc;
                AK_V8_STORE(y + i, v);
            }
            for (; i < n; i++) y[i] = x[i] - c;
        }
    }
}

/* Normalizes columns [0, w) (w <= COLS) of one [n][inner] slab along n. */
#define COLS 64
AK_MATH_INLINE void cols_body(const float *x, float *y, size_t n, size_t inner, size_t w,
                              sm_mode mode) {
    float m[COLS], s[COLS];
    for (size_t c = 0; c < w; c++) m[c] = -INFINITY, s[c] = 0.0f;
    for (size_t k = 0; k < n; k++)
        for (size_t c = 0; c < w; c++) {
            float v = x[k * inner + c];
            m[c] = v > m[c] ? v : m[c];
        }
    for (size_t k = 0; k < n; k++) {
        const float *xk = x + k * inner;
        float *yk = y + k * inner;
        size_t c = 0;
        for (; c + 8 <= w; c += 8) {
            ak__v8f v, mv, sv;
            AK_V8_LOAD(v, xk + c);
            AK_V8_LOAD(mv, m + c);
            AK_V8_LOAD(sv, s + c);
            v -= mv;
            AK_V8_EXP_NONPOS(v);
            sv += v;
            AK_V8_STORE(s + c, sv);
            if (mode == SM_SOFTMAX) AK_V8_STORE(yk + c, v);
        }
        for (; c < w; c++) { /* one lane at a time, same arithmetic */
            float e;
            s[c] += exp_sub_tail(&e, xk + c, 1, m[c]);
            if (mode == SM_SOFTMAX) yk[c] = e;
        }
    }
    for (size_t c = 0; c < w; c++) s[c] = mode == SM_SOFTMAX ? 1.0f / s[c] : m[c] + logf(s[c]);
    for (size_t k = 0; k < n; k++) {
        const float *xk = x + k * inner;
        float *yk = y + k * inner;
        if (mode == SM_SOFTMAX)
            for (size_t c = 0; c < w; c++) yk[c] *= s[c];
        else
            for (size_t c = 0; c < w; c++) yk[c] = xk[c] - s[c];
    }
}

#if AK_MATH_HAVE_AVX2_VARIANT
AK_MATH_TARGET_AVX2 static void rows_avx2(const float *x, float *y, size_t rows, size_t n,
                                          sm_mode mode) {
    rows_body(x, y, rows, n, mode);
}
AK_MATH_TARGET_AVX2 static void cols_avx2(const float *x, float *y, size_t n, size_t inner,
                                          size_t w, sm_mode mode) {
    cols_body(x, y, n, inner, w, mode);
}
#endif
static void rows_base(const float *x, float *y, size_t rows, size_t n, sm_mode mode) {
    rows_body(x, y, rows, n, mode);
}
static void cols_base(const float *x, float *y, size_t n, size_t inner, size_t w,
                      sm_mode mode) {
    cols_body(x, y, n, inner, w, mode);
}

typedef struct {
    sm_mode mode;
    sm_layout l;
    const ak__tensor *x;
    ak__tensor *y;
    int avx2;
} sm_job;

static void rows_worker(void *arg, size_t begin, size_t end, int thread) {
    (void)thread;
    const sm_job *j = arg;
    size_t n = (size_t)j->l.n;
    const float *x = (const float *)j->x->data + begin * n;
    float *y = (float *)j->y->data + begin * n;
#if AK_MATH_HAVE_AVX2_VARIANT
    if (j->avx2) {
        rows_avx2(x, y, end - begin, n, j->mode);
        return;
    }
#endif
    rows_base(x, y, end - begin, n, j->mode);
}

static void cols_worker(void *arg, size_t begin, size_t end, int thread) {
    (void)thread;
    const sm_job *j = arg;
    size_t n = (size_t)j->l.n, inner = (size_t)j->l.inner;
    size_t blocks = (inner + COLS - 1) / COLS;
    for (size_t item = begin; item < end; item++) {
        size_t o = item / blocks, c0 = (item % blocks) * COLS;
        size_t w = inner - c0 < COLS ? inner - c0 : COLS;
        const float *x = (const float *)j->x->data + o * n * inner + c0;
        float *y = (float *)j->y->data + o * n * inner + c0;
#if AK_MATH_HAVE_AVX2_VARIANT
        if (j->avx2) {
            cols_avx2(x, y, n, inner, w, j->mode);
            continue;
        }
#endif
        cols_base(x, y, n, inner, w, j->mode);
    }
}

/* ---- any float type, and Hardmax: one (outer, inner) line at a time, in double ------ */

static void generic_worker(void *arg, size_t begin, size_t end, int thread) {
    (void)thread;
    const sm_job *j = arg;
    uint64_t n = j->l.n, inner = j->l.inner;
    ak_elem_type t = j->x->type;
    for (size_t line = begin; line < end; line++) {
        uint64_t base = (line / inner) * n * inner + line % inner;
        double m = -INFINITY, s = 0.0;
        uint64_t arg_max = 0;
        for (uint64_t k = 0; k < n; k++) {
            double v = ak__elem_get(j->x->data, t, base + k * inner);
            if (v > m || (k == 0 && isnan(v))) m = v, arg_max = k;
        }
        if (j->mode == SM_HARDMAX) {
            for (uint64_t k = 0; k < n; k++)
                ak__elem_set(j->y->data, t, base + k * inner, k == arg_max ? 1.0 : 0.0);
            continue;
        }
        for (uint64_t k = 0; k < n; k++)
            s += exp(ak__elem_get(j->x->data, t, base + k * inner) - m);
        double c = m + log(s);
        for (uint64_t k = 0; k < n; k++) {
            double v = ak__elem_get(j->x->data, t, base + k * inner);
            ak__elem_set(j->y->data, t, base + k * inner,
                         j->mode == SM_SOFTMAX ? exp(v - m) / s : v - c);
        }
    }
}

static ak_status sm_run(ak__op_ctx *ctx, sm_mode mode) {
    sm_job j = {mode, {0, 0, 0}, ak__op_in(ctx, 0), ak__op_out(ctx, 0), 0};
    if (!j.y || j.y->count == 0) return AK_OK;
    AK_CHECK(sm_layout_of(ctx, j.x, &j.l));
    if (j.x->type == AK_ELEM_F32 && mode != SM_HARDMAX) {
        j.avx2 = ak__math_avx2();
        if (j.l.inner == 1)
            return ak__math_parallel(ctx, (size_t)j.l.outer, (size_t)j.l.n * 8, rows_worker,
                                     &j);
        size_t blocks = ((size_t)j.l.inner + COLS - 1) / COLS;
        return ak__math_parallel(ctx, (size_t)j.l.outer * blocks, (size_t)j.l.n * COLS * 8,
                                 cols_worker, &j);
    }
    return ak__math_parallel(ctx, (size_t)(j.l.outer * j.l.inner), (size_t)j.l.n * 16,
                             generic_worker, &j);
}

static ak_status softmax_run(ak__op_ctx *ctx) { return sm_run(ctx, SM_SOFTMAX); }
static ak_status log_softmax_run(ak__op_ctx *ctx) { return sm_run(ctx, SM_LOGSOFTMAX); }
static ak_status hardmax_run(ak__op_ctx *ctx) { return sm_run(ctx, SM_HARDMAX); }

const ak__op_def ak__op_softmax = {"", "Softmax", 1, 0, NULL, NULL, sm_reshape, softmax_run};
const ak__op_def ak__op_log_softmax = {"", "LogSoftmax", 1, 0, NULL, NULL, sm_reshape,
                                       log_softmax_run};
const ak__op_def ak__op_hardmax = {"", "Hardmax", 1, 0, NULL, NULL, sm_reshape, hardmax_run};
