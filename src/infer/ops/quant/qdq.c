/* QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear (uint8 / int8):
 *   QuantizeLinear     y = saturate(round_half_even(x / y_scale) + y_zero_point)
 *   DequantizeLinear   y = (x − x_zero_point)·x_scale
 *   DynamicQuantizeLinear  y_scale = (max(0, max x) − min(0, min x))/255,
 *                          y_zero_point = round(saturate(0 − min(0, min x)/y_scale)),
 *                          y = QuantizeLinear(x, y_scale, y_zero_point) to uint8.
 * The scale's shape picks the granularity: a scalar (per tensor), a 1-D tensor along
 * `axis` (per axis, opset 13), or x's rank with `axis` divided into blocks of `block_size`
 * (blocked, opset 21). The division is float32's (x / scale, not x·(1/scale)), as the spec
 * and ONNX Runtime compute it, so the rounding of ties agrees with both. A constant-range
 * input (max = min = 0) gets y_scale 1 in DynamicQuantizeLinear, as in ONNX Runtime (the
 * spec's formula would divide by zero). */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "infer/ops/nn/common.h"
#include "infer/ops/quant/quant.h"

/* Where each element of x finds its scale and zero point: x viewed as (outer, D, inner)
 * around the axis; per tensor index 0, per axis index d, blocked (o·S + d/block)·inner + i. */
typedef struct qlayout {
    uint64_t outer, D, inner, S, block;
    int mode; /* 0 tensor, 1 axis, 2 blocked */
} qlayout;

static ak_status layout_make(ak__op_ctx *ctx, const ak__tensor *x, const ak__tensor *scale,
                             const ak__tensor *zp, qlayout *l) {
    l->outer = 1, l->D = 1, l->inner = x->count, l->S = 1, l->block = 1, l->mode = 0;
    int64_t block = ctx->node->opset >= 21 ? ak__attr_int(ctx->node, "block_size", 0) : 0;
    if (zp) {
        int same = zp->rank == scale->rank;
        for (int i = 0; same && i < zp->rank; i++) same = zp->dims[i] == scale->dims[i];
        if (!same)
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                              "the zero point's shape differs from the scale's");
    }
    if (block < 0)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "block_size %lld is negative",
                          (long long)block);
    if (block == 0 && (scale->rank == 0 || (scale->rank == 1 && scale->count == 1)))
        return AK_OK;
    if (ctx->node->opset < 13)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                          "the scale must be a scalar before opset 13 (it has %llu values)",
                          (unsigned long long)scale->count);
    int axis;
    AK_CHECK(ak__op_axis(ctx, ak__attr_int(ctx->node, "axis", 1), x->rank, 0, &axis));
    l->outer = ak__nn_prod(x->dims, axis);
    l->D = (uint64_t)x->dims[axis];
    l->inner = ak__nn_prod(x->dims + axis + 1, x->rank - axis - 1);
    if (block == 0) {
        if (scale->rank != 1 || (uint64_t)scale->count != l->D)
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                              "a per-axis scale must be 1-D with %llu values (axis %d), it has "
                              "%llu in rank %d", (unsigned long long)l->D, axis,
                              (unsigned long long)scale->count, scale->rank);
        l->mode = 1;
        return AK_OK;
    }
    /* blocked: x's shape but ceil(D / block) along the axis */
    int ok = scale->rank == x->rank;
    for (int i = 0; ok && i < x->rank; i++)
        ok = i == axis ? (uint64_t)scale->dims[i] == (l->D + (uint64_t)block - 1) / (uint64_t)block
                       : scale->dims[i] == x->dims[i];
    if (!ok)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                          "a blocked scale (block_size %lld, axis %d) must have x's shape with "
                          "ceil(%llu / %lld) along the axis", (long long)block, axis,
                          (unsigned long long)l->D, (long long)block);
    l->S = (uint64_t)scale->dims[axis];
    l->block = (uint64_t)block;
    l->mode = 2;
    return AK_OK;
}

static inline uint64_t param_index(const qlayout *l, uint64_t o, uint64_t d, uint64_t i) {
    return l->mode == 0 ? 0 : l->mode == 1 ? d : (o * l->S + d / l->block) * l->inner + i;
}

/* The job of one Q or DQ node: rows of `inner` elements, row r = (o, d). */
typedef struct qdq_job {
    qlayout l;
    const void *x;
    ak_elem_type xt;
    const float *scale;
    ak__qzp zp;
    void *y;
} qdq_job;

/* n floats quantized with one scale and zero point, the result of ak__q_round_sat written
 * so the compiler vectorizes it (the file is built at -O3): x / s first clamped to a range
 * that saturates alike, one step past each end (NaN to the low end, where
 * ak__q_round_sat sends it), then rounded half to even by adding and subtracting
 * 1.5·2^23, exact for magnitudes below 2^22. */
#define RINT_MAGIC 12582912.0f

static inline __attribute__((always_inline)) void
quantize_run_u8(const float *restrict x, float s, int32_t zp, uint8_t *restrict y, size_t n) {
    float a = -1.0f - (float)zp, b = 256.0f - (float)zp, z = (float)zp;
    for (size_t i = 0; i < n; i++) {
        float v = x[i] / s;
        v = v >= a ? v : a;
        v = v <= b ? v : b;
        float r = (v + RINT_MAGIC) - RINT_MAGIC + z;
        r = r >= 0.0f ? r : 0.0f;
        r = r <= 255.0f ? r : 255.0f;
        y[i] = (uint8_t)(int32_t)r;
    }
}

static inline __attribute__((always_inline)) void
quantize_run_s8(const float *restrict x, float s, int32_t zp, int8_t *restrict y, size_t n) {
    float a = -129.0f - (float)zp, b = 128.0f - (float)zp, z = (float)zp;
    for (size_t i = 0; i < n; i++) {
        float v = x[i] / s;
        v = v >= a ? v : a;
        v = v <= b ? v : b;
        float r = (v + RINT_MAGIC) - RINT_MAGIC + z;
        r = r >= -128.0f ? r : -128.0f;
        r = r <= 127.0f ? r : 127.0f;
        y[i] = (int8_t)(int32_t)r;
    }
}

/* The same loops compiled for AVX-512 (wider divisions), taken where the kernels'
 * dispatch runs its avx512 variant, so AK_KERNELS and AK_ISA choose them as well. The
 * operations are the same IEEE ones in each lane, so are the bytes. */
#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,prefer-vector-width=512")))
static AVX512 void quantize_run_u8_avx512(const float *x, float s, int32_t zp, uint8_t *y,
                                          size_t n) {
    quantize_run_u8(x, s, zp, y, n);
}
static AVX512 void quantize_run_s8_avx512(const float *x, float s, int32_t zp, int8_t *y,
                                          size_t n) {
    quantize_run_s8(x, s, zp, y, n);
}
static void quantize_run_u8_plain(const float *x, float s, int32_t zp, uint8_t *y, size_t n) {
    quantize_run_u8(x, s, zp, y, n);
}
static void quantize_run_s8_plain(const float *x, float s, int32_t zp, int8_t *y, size_t n) {
    quantize_run_s8(x, s, zp, y, n);
}

static void quantize_rows(void *vj, size_t begin, size_t end, int tid) {
    (void)tid;
    const qdq_job *j = vj;
    int is_signed = j->zp.type == AK_ELEM_I8;
    int wide = ak__kernels_avx512(ak__kernels_active());
    for (size_t r = begin; r < end; r++) {
        uint64_t o = r / j->l.D, d = r % j->l.D, base = r * j->l.inner;
        if (j->xt == AK_ELEM_F32 && j->l.mode != 2) { /* one scale for the whole row */
            uint64_t p = param_index(&j->l, o, d, 0);
            const float *x = (const float *)j->x + base;
            float sc = j->scale[p];
            int32_t zp = ak__qzp_at(&j->zp, p);
            size_t n = (size_t)j->l.inner;
            int8_t *ys = (int8_t *)j->y + base;
            uint8_t *yu = (uint8_t *)j->y + base;
            if (is_signed)
                (wide ? quantize_run_s8_avx512 : quantize_run_s8_plain)(x, sc, zp, ys, n);
            else
                (wide ? quantize_run_u8_avx512 : quantize_run_u8_plain)(x, sc, zp, yu, n);
            continue;
        }
        for (uint64_t i = 0; i < j->l.inner; i++) {
            uint64_t p = param_index(&j->l, o, d, i);
            float x = j->xt == AK_ELEM_F32 ? ((const float *)j->x)[base + i]
                                            : (float)((const int32_t *)j->x)[base + i];
            int32_t q = ak__q_round_sat(x / j->scale[p], ak__qzp_at(&j->zp, p), is_signed);
            if (is_signed) ((int8_t *)j->y)[base + i] = (int8_t)q;
            else ((uint8_t *)j->y)[base + i] = (uint8_t)q;
        }
    }
}

static void dequantize_rows(void *vj, size_t begin, size_t end, int tid) {
    (void)tid;
    const qdq_job *j = vj;
    for (size_t r = begin; r < end; r++) {
        uint64_t o = r / j->l.D, d = r % j->l.D, base = r * j->l.inner;
        float *y = (float *)j->y + base;
        for (uint64_t i = 0; i < j->l.inner; i++) {
            uint64_t p = param_index(&j->l, o, d, i);
            int32_t x = j->xt == AK_ELEM_U8   ? ((const uint8_t *)j->x)[base + i]
                        : j->xt == AK_ELEM_I8 ? ((const int8_t *)j->x)[base + i]
                                              : ((const int32_t *)j->x)[base + i];
            y[i] = (float)(x - ak__qzp_at(&j->zp, p)) * j->scale[p];
        }
    }
}

/* Per-tensor rows of this many elements, so even one big tensor spreads over threads. */
#define FLAT_ROW 4096

static void qdq_spread(ak__op_ctx *ctx, qdq_job *j, ak_parallel_fn fn, uint64_t count) {
    if (j->l.mode == 0) { /* rows of FLAT_ROW; the last, shorter one on its own */
        uint64_t rows = count / FLAT_ROW, tail = count % FLAT_ROW;
        j->l.D = 1, j->l.inner = FLAT_ROW;
        if (rows) ak__nn_parallel(ctx->pool, (size_t)rows, 4, fn, j);
        if (tail) {
            qdq_job t = *j;
            t.l.inner = tail;
            size_t off = (size_t)(rows * FLAT_ROW);
            size_t xs = ak_elem_type_size(j->xt);
            size_t ys = fn == quantize_rows ? 1 : sizeof(float);
            t.x = (const char *)j->x + off * xs, t.y = (char *)j->y + off * ys;
            fn(&t, 0, 1, 0);
        }
        return;
    }
    ak__nn_parallel(ctx->pool, (size_t)(j->l.outer * j->l.D), 1, fn, j);
}

/* ---- QuantizeLinear -------------------------------------------------------------------- */

/* The output type: the zero point's, else output_dtype (opset 21), else uint8. */
static ak_status q_out_type(ak__op_ctx *ctx, ak_elem_type *t) {
    const ak__tensor *zp = ak__op_in(ctx, 2);
    if (zp) {
        *t = zp->type;
    } else {
        int64_t dt = ak__attr_int(ctx->node, "output_dtype", 0);
        *t = dt == 0 || dt == 2 ? AK_ELEM_U8 : dt == 3 ? AK_ELEM_I8 : AK_ELEM_UNDEFINED;
        if (*t == AK_ELEM_UNDEFINED)
            return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED,
                              "output_dtype %lld; uint8 (2) and int8 (3) are implemented",
                              (long long)dt);
    }
    if (*t != AK_ELEM_U8 && *t != AK_ELEM_I8)
        return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED,
                          "y_zero_point has type %s; uint8 and int8 are implemented",
                          ak_elem_type_name(*t));
    return AK_OK;
}

static ak_status q_check(ak__op_ctx *ctx, qdq_job *j) {
    const ak__tensor *x, *scale, *zp = ak__op_in(ctx, 2);
    AK_CHECK(ak__op_require(ctx, 0, &x));
    AK_CHECK(ak__op_require(ctx, 1, &scale));
    if (x->type != AK_ELEM_F32 && x->type != AK_ELEM_I32)
        return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED,
                          "input 0 (x) has type %s; float32 and int32 are implemented",
                          ak_elem_type_name(x->type));
    ak_elem_type yt;
    AK_CHECK(q_out_type(ctx, &yt));
    const float *s;
    size_t n;
    AK_CHECK(ak__q_scale(ctx, 1, "y_scale", AK_Q_ANY_COUNT, &s, &n));
    AK_CHECK(ak__q_zero_point(ctx, 2, "y_zero_point", AK_Q_ANY_COUNT, yt, 1, &j->zp));
    j->zp.type = yt;
    AK_CHECK(layout_make(ctx, x, scale, zp, &j->l));
    j->x = x->data, j->xt = x->type, j->scale = s;
    return AK_OK;
}

static ak_status q_reshape(ak__op_ctx *ctx) {
    qdq_job j;
    AK_CHECK(q_check(ctx, &j));
    const ak__tensor *x = ctx->inputs[0];
    return ak__op_set_output(ctx, 0, j.zp.type, x->rank, x->dims);
}

static ak_status q_run(ak__op_ctx *ctx) {
    qdq_job j;
    AK_CHECK(q_check(ctx, &j));
    ak__tensor *y = ak__op_out(ctx, 0);
    if (!y || y->count == 0) return AK_OK;
    j.y = y->data;
    qdq_spread(ctx, &j, quantize_rows, y->count);
    return AK_OK;
}

/* ---- DequantizeLinear ------------------------------------------------------------------ */

static ak_status dq_check(ak__op_ctx *ctx, qdq_job *j) {
    const ak__tensor *x, *scale, *zp = ak__op_in(ctx, 2);
    AK_CHECK(ak__op_require(ctx, 0, &x));
    AK_CHECK(ak__op_require(ctx, 1, &scale));
    if (x->type != AK_ELEM_U8 && x->type != AK_ELEM_I8 && x->type != AK_ELEM_I32)
        return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED,
                          "input 0 (x) has type %s; uint8, int8 and int32 are implemented",
                          ak_elem_type_name(x->type));
    int64_t dt = ak__attr_int(ctx->node, "output_dtype", 0);
    if (dt != 0 && dt != 1)
        return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED,
                          "output_dtype %lld; float32 (1) is implemented", (long long)dt);
    const float *s;
    size_t n;
    AK_CHECK(ak__q_scale(ctx, 1, "x_scale", AK_Q_ANY_COUNT, &s, &n));
    j->zp.data = NULL, j->zp.type = AK_ELEM_U8, j->zp.count = 1;
    if (x->type == AK_ELEM_I32) {
        /* int32 has no zero point (the spec's "supposed to be 0"): one given must be 0 */
        if (zp && !(zp->type == AK_ELEM_I32 && zp->count == 1 && *(const int32_t *)zp->data == 0))
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                              "int32 input takes no zero point (or a zero int32 one)");
    } else {
        AK_CHECK(ak__q_zero_point(ctx, 2, "x_zero_point", AK_Q_ANY_COUNT, x->type, 1, &j->zp));
    }
    AK_CHECK(layout_make(ctx, x, scale, zp, &j->l));
    j->x = x->data, j->xt = x->type, j->scale = s;
    return AK_OK;
}

static ak_status dq_reshape(ak__op_ctx *ctx) {
    qdq_job j;
    AK_CHECK(dq_check(ctx, &j));
    const ak__tensor *x = ctx->inputs[0];
    return ak__op_set_output(ctx, 0, AK_ELEM_F32, x->rank, x->dims);
}

static ak_status dq_run(ak__op_ctx *ctx) {
    qdq_job j;
    AK_CHECK(dq_check(ctx, &j));
    ak__tensor *y = ak__op_out(ctx, 0);
    if (!y || y->count == 0) return AK_OK;
    j.y = y->data;
    qdq_spread(ctx, &j, dequantize_rows, y->count);
    return AK_OK;
}

/* ---- DynamicQuantizeLinear -------------------------------------------------------------- */

static ak_status dyn_reshape(ak__op_ctx *ctx) {
    const ak__tensor *x;
    AK_CHECK(ak__op_require(ctx, 0, &x));
    AK_CHECK(ak__op_check_type(ctx, 0, x, AK_ELEM_F32));
    AK_CHECK(ak__op_set_output(ctx, 0, AK_ELEM_U8, x->rank, x->dims));
    AK_CHECK(ak__op_set_output(ctx, 1, AK_ELEM_F32, 0, NULL));
    return ak__op_set_output(ctx, 2, AK_ELEM_U8, 0, NULL);
}

/* The range of x widened to include 0, NaN never taken. Sixteen running minima and
 * maxima side by side in four SSE registers: minps(v, m) is exactly `v < m ? v : m` (m
 * when either is NaN), the scalar rule, and the order of taking minima does not change
 * them; one running minimum would be a reduction the compiler keeps scalar without
 * -ffast-math. */
static void range_with_zero(const float *x, uint64_t n, float *lo_out, float *hi_out) {
    __m128 lo[4], hi[4];
    for (int l = 0; l < 4; l++) lo[l] = hi[l] = _mm_setzero_ps();
    uint64_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int l = 0; l < 4; l++) {
            __m128 v = _mm_loadu_ps(x + i + 4 * (uint64_t)l);
            lo[l] = _mm_min_ps(v, lo[l]);
            hi[l] = _mm_max_ps(v, hi[l]);
        }
    float lv[16], hv[16];
    for (int l = 0; l < 4; l++) _mm_storeu_ps(lv + 4 * l, lo[l]), _mm_storeu_ps(hv + 4 * l, hi[l]);
    for (; i < n; i++) {
        lv[0] = x[i] < lv[0] ? x[i] : lv[0];
        hv[0] = x[i] > hv[0] ? x[i] : hv[0];
    }
    for (int l = 1; l < 16; l++) {
        lv[0] = lv[l] < lv[0] ? lv[l] : lv[0];
        hv[0] = hv[l] > hv[0] ? hv[l] : hv[0];
    }
    *lo_out = lv[0], *hi_out = hv[0];
}

static ak_status dyn_run(ak__op_ctx *ctx) {
    const ak__tensor *x = ctx->inputs[0];
    const float *xv = x->data;
    float lo, hi;
    range_with_zero(xv, x->count, &lo, &hi);
    float scale = hi == lo ? 1.0f : (hi - lo) / 255.0f;
    float zp_real = 0.0f - lo / scale;
    zp_real = zp_real < 0.0f ? 0.0f : zp_real > 255.0f ? 255.0f : zp_real;
    uint8_t zp = (uint8_t)rintf(zp_real);
    ak__tensor *y = ak__op_out(ctx, 0), *ys = ak__op_out(ctx, 1), *yz = ak__op_out(ctx, 2);
    if (ys) *(float *)ys->data = scale;
    if (yz) *(uint8_t *)yz->data = zp;
    if (!y || y->count == 0) return AK_OK;
    qdq_job j = {{1, 1, x->count, 1, 1, 0}, xv, AK_ELEM_F32, &scale,
                 {&zp, AK_ELEM_U8, 1}, y->data};
    qdq_spread(ctx, &j, quantize_rows, y->count);
    return AK_OK;
}

const ak__op_def ak__q_quantize_linear = {"", "QuantizeLinear", 10, 0, NULL, NULL, q_reshape,
                                          q_run};
const ak__op_def ak__q_dequantize_linear = {"", "DequantizeLinear", 10, 0, NULL, NULL,
                                            dq_reshape, dq_run};
const ak__op_def ak__q_dynamic_quantize_linear = {"", "DynamicQuantizeLinear", 11, 0, NULL,
                                                  NULL, dyn_reshape, dyn_run};
