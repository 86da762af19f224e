/* QLinearAdd in com.accelkit's form: what the optimizer makes of the QDQ residual add
 * (runtime/optimize_qdq.c)
 *   DequantizeLinear(A), DequantizeLinear(B) -> Add [-> Relu] -> QuantizeLinear
 * Inputs as Microsoft's QLinearAdd orders them: A, A_scale, A_zero_point, B, B_scale,
 * B_zero_point, C_scale, C_zero_point (scales and zero points per tensor); attribute
 * relu = 1 when a Relu was folded. C = Q(max?(DQ(A) + DQ(B), 0)) computed exactly as the
 * unfused nodes compute it in float32 — (a − za)·sa + (b − zb)·sb, then / sc, rounded half
 * to even, + zc, saturated — so the fusion changes no bit of the result; only the two
 * float tensors between the nodes are gone. A and B broadcast (numpy rules) and may be
 * uint8 and int8 in any mix; C has C_zero_point's type. */
#include <string.h>

#include "infer/ops/elementwise/elementwise.h"
#include "infer/ops/quant/quant.h"

typedef struct qadd_args {
    const ak__tensor *A, *B;
    float sa, sb, sc;
    int32_t za, zb, zc;
    ak_elem_type c_type;
    int relu;
} qadd_args;

/* One per-tensor (scale, zero point) pair at inputs s and s + 1; the zero point of an
 * 8-bit tensor of type `want` (AK_ELEM_UNDEFINED: either), optional. */
static ak_status read_pair(ak__op_ctx *ctx, uint32_t s, const char *scale_name,
                           const char *zp_name, ak_elem_type want, float *scale, int32_t *zp,
                           ak_elem_type *zp_type) {
    const float *sv;
    size_t n;
    ak__qzp z;
    AK_CHECK(ak__q_scale(ctx, s, scale_name, 0, &sv, &n));
    AK_CHECK(ak__q_zero_point(ctx, s + 1, zp_name, 0, want, 1, &z));
    *scale = sv[0];
    *zp = ak__qzp_at(&z, 0);
    if (zp_type) *zp_type = z.type;
    return AK_OK;
}

static ak_status args_make(ak__op_ctx *ctx, qadd_args *g) {
    AK_CHECK(ak__op_require(ctx, 0, &g->A));
    AK_CHECK(ak__op_require(ctx, 3, &g->B));
    AK_CHECK(ak__q_check_8bit(ctx, 0, g->A, "A"));
    AK_CHECK(ak__q_check_8bit(ctx, 3, g->B, "B"));
    AK_CHECK(read_pair(ctx, 1, "A_scale", "A_zero_point", g->A->type, &g->sa, &g->za, NULL));
    AK_CHECK(read_pair(ctx, 4, "B_scale", "B_zero_point", g->B->type, &g->sb, &g->zb, NULL));
    AK_CHECK(read_pair(ctx, 6, "C_scale", "C_zero_point", AK_ELEM_UNDEFINED, &g->sc, &g->zc,
                       &g->c_type));
    if (!ak__op_in(ctx, 7)) g->c_type = AK_ELEM_U8; /* QuantizeLinear's default */
    g->relu = (int)ak__attr_int(ctx->node, "relu", 0);
    return AK_OK;
}

/* ---- the kernel: chunks of CHUNK elements through two float buffers ------------------- */

#define CHUNK 256

/* dst[i] = (x[i·step] − z)·s as DequantizeLinear computes it */
static inline __attribute__((always_inline)) void
dequantize_chunk(float *restrict dst, const void *x, ak_elem_type t, int step, int32_t z,
                 float s, size_t n) {
    if (step == 0) {
        int32_t v = t == AK_ELEM_U8 ? *(const uint8_t *)x : *(const int8_t *)x;
        float f = (float)(v - z) * s;
        for (size_t i = 0; i < n; i++) dst[i] = f;
    } else if (t == AK_ELEM_U8) {
        const uint8_t *restrict u = x;
        for (size_t i = 0; i < n; i++) dst[i] = (float)((int32_t)u[i] - z) * s;
    } else {
        const int8_t *restrict v = x;
        for (size_t i = 0; i < n; i++) dst[i] = (float)((int32_t)v[i] - z) * s;
    }
}

/* y[i] = QuantizeLinear(relu?(a[i] + b[i])): the sum divided by the scale, rounded */
static inline __attribute__((always_inline)) void
quantize_sum_chunk(void *y, int is_signed, const float *restrict a, const float *restrict b,
                   int relu, float s, int32_t zp, size_t n) {
    ak__q_rounding rd = ak__q_rounding_for(zp, is_signed, 0);
    for (size_t i = 0; i < n; i++) {
        float v = a[i] + b[i];
        if (relu) v = v > 0.0f ? v : 0.0f;
        float r = ak__q_round_clamp(v / s, &rd);
        if (is_signed) ((int8_t *)y)[i] = (int8_t)(int32_t)r;
        else ((uint8_t *)y)[i] = (uint8_t)(int32_t)r;
    }
}

static inline __attribute__((always_inline)) void
qadd_segment(const void *op, void *dst, const void *const *in, const int *step, size_t n) {
    const qadd_args *g = op;
    float fa[CHUNK], fb[CHUNK];
    int is_signed = g->c_type == AK_ELEM_I8;
    for (size_t at = 0; at < n; at += CHUNK) {
        size_t m = n - at < CHUNK ? n - at : CHUNK;
        dequantize_chunk(fa, (const char *)in[0] + at * (size_t)step[0], g->A->type, step[0],
                         g->za, g->sa, m);
        dequantize_chunk(fb, (const char *)in[1] + at * (size_t)step[1], g->B->type, step[1],
                         g->zb, g->sb, m);
        void *y = (char *)dst + at;
        if (is_signed) quantize_sum_chunk(y, 1, fa, fb, g->relu, g->sc, g->zc, m);
        else quantize_sum_chunk(y, 0, fa, fb, g->relu, g->sc, g->zc, m);
    }
}

/* The segment compiled for AVX-512 (wider divisions, as QuantizeLinear's loop in qdq.c),
 * taken where the kernels' dispatch runs its avx512 variant; the same IEEE operations in
 * each lane, so the same bytes. */
#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,prefer-vector-width=512")))
static AVX512 void qadd_segment_avx512(const void *op, void *dst, const void *const *in,
                                       const int *step, size_t n) {
    qadd_segment(op, dst, in, step, n);
}
static void qadd_segment_plain(const void *op, void *dst, const void *const *in,
                               const int *step, size_t n) {
    qadd_segment(op, dst, in, step, n);
}

static ak_status qadd_reshape(ak__op_ctx *ctx) {
    qadd_args g;
    AK_CHECK(args_make(ctx, &g));
    const ak__tensor *ab[2] = {g.A, g.B};
    int rank;
    int64_t dims[AK_IR_MAX_RANK];
    AK_CHECK(ak__op_broadcast(ctx, ab, 2, &rank, dims));
    return ak__op_set_output(ctx, 0, g.c_type, rank, dims);
}

static ak_status qadd_run(ak__op_ctx *ctx) {
    qadd_args g;
    AK_CHECK(args_make(ctx, &g));
    ak__tensor *C = ak__op_out(ctx, 0);
    if (!C || C->count == 0) return AK_OK;
    const ak__tensor *ab[2] = {g.A, g.B};
    int wide = ak__kernels_avx512(ak__kernels_active());
    return ew_broadcast_run(ctx, C, ab, 2, wide ? qadd_segment_avx512 : qadd_segment_plain, &g,
                            EW_PAR_CHEAP);
}

const ak__op_def ak__q_qlinear_add_fused = {"com.accelkit", "QLinearAdd", 1, 0, NULL, NULL,
                                            qadd_reshape, qadd_run};
