/* Linear-layer tests: storage conversions (exact bytes of hand-made Q8_0/Q4_0 blocks,
 * round-trip error bounds), the kernels of every variant table against the scalar
 * reference for each weight type × T ∈ {1, 3, 4, 12, 16, 70} × accumulate, the public
 * ak_linear on 1-3 thread pools with padded strides and guard bytes, and argument checks.
 *
 * Tolerance: |y − y_ref| ≤ 4·(K+2)·eps_f32·Σ_k |w_k·x_k| (+ eps·|y0| when accumulating),
 * the forward error bound of a float dot product (the reference accumulates in double).
 * For Q8_0/Q4_0, w and x are the dequantized weights and the Q8_0 activations: the
 * integer block sums are exact, so only their scaling and summation round. */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "accelkit/kernels.h"
#include "core/half.h"
#include "guarded.h"
#include "kernels/dispatch.h"
#include "kernels/linear.h"

static const char *const variants[] = {"ref", "generic", "avx2", "avx512", "avx512w"};
#define N_VARIANTS (sizeof variants / sizeof variants[0])
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static const ak_wtype wtypes[] = {AK_WTYPE_F32, AK_WTYPE_F16, AK_WTYPE_BF16, AK_WTYPE_Q8_0,
                                  AK_WTYPE_Q4_0};

static int quantized(ak_wtype w) { return w == AK_WTYPE_Q8_0 || w == AK_WTYPE_Q4_0; }

static size_t row_bytes_of(ak_wtype w, size_t K) {
    size_t b = 0;
    assert_int_equal(ak_wtype_row_bytes(w, K, &b), AK_OK);
    return b;
}

static float *rand_floats(size_t n, uint64_t *seed, float scale) {
    float *x = malloc((n ? n : 1) * sizeof(float));
    assert_non_null(x);
    for (size_t i = 0; i < n; i++) x[i] = scale * test_rand_f32(seed);
    return x;
}

/* ---- storage conversions -------------------------------------------------------------- */

static void test_names_and_sizes(void **state) {
    (void)state;
    assert_string_equal(ak_wtype_name(AK_WTYPE_F32), "f32");
    assert_string_equal(ak_wtype_name(AK_WTYPE_F16), "f16");
    assert_string_equal(ak_wtype_name(AK_WTYPE_BF16), "bf16");
    assert_string_equal(ak_wtype_name(AK_WTYPE_Q8_0), "q8_0");
    assert_string_equal(ak_wtype_name(AK_WTYPE_Q4_0), "q4_0");
    assert_string_equal(ak_wtype_name((ak_wtype)3), "unknown");
    assert_int_equal(row_bytes_of(AK_WTYPE_F32, 768), 3072);
    assert_int_equal(row_bytes_of(AK_WTYPE_F16, 7), 14);
    assert_int_equal(row_bytes_of(AK_WTYPE_BF16, 768), 1536);
    assert_int_equal(row_bytes_of(AK_WTYPE_Q8_0, 768), 24 * 34);
    assert_int_equal(row_bytes_of(AK_WTYPE_Q4_0, 64), 36);
    assert_int_equal(row_bytes_of(AK_WTYPE_Q4_0, 0), 0);
}

/* d = 127/127 = 1, so q = roundf(x): ties go away from zero (2.5 → 3, −2.5 → −3). */
static void test_q8_0_known_block(void **state) {
    (void)state;
    float x[32] = {127.0f, -127.0f, 2.5f, -2.5f, 1.4f, -1.6f, 0.5f, -0.49f, 0.0f, 100.7f};
    for (int j = 10; j < 32; j++) x[j] = (float)(j - 20);
    unsigned char got[34], want[34] = {0x00, 0x3c, 127, (unsigned char)-127, 3, (unsigned char)-3,
                                       1, (unsigned char)-2, 1, 0, 0, 101};
    for (int j = 10; j < 32; j++) want[2 + j] = (unsigned char)(signed char)(j - 20);
    assert_int_equal(ak_quantize_row(AK_WTYPE_Q8_0, x, got, 32), AK_OK);
    assert_memory_equal(got, want, 34);
    float back[32];
    assert_int_equal(ak_dequantize_row(AK_WTYPE_Q8_0, got, back, 32), AK_OK);
    assert_true(back[2] == 3.0f && back[3] == -3.0f && back[11] == -9.0f);
    /* a non-finite input is stored without undefined conversions: a block holding Inf
     * or NaN gets d = NaN (f16 0x7e00) and q = 0, so it dequantizes to NaN */
    x[3] = INFINITY;
    assert_int_equal(ak_quantize_row(AK_WTYPE_Q8_0, x, got, 32), AK_OK);
    assert_true(got[0] == 0x00 && got[1] == 0x7e);
    for (int j = 2; j < 34; j++) assert_int_equal(got[j], 0);
    assert_int_equal(ak_dequantize_row(AK_WTYPE_Q8_0, got, back, 32), AK_OK);
    assert_true(isnan(back[0]) && isnan(back[3]));
    x[3] = NAN;
    assert_int_equal(ak_quantize_row(AK_WTYPE_Q8_0, x, got, 32), AK_OK);
    assert_true(got[0] == 0x00 && got[1] == 0x7e && got[2] == 0);
    x[3] = INFINITY;
    assert_int_equal(ak_quantize_row(AK_WTYPE_Q4_0, x, got, 32), AK_OK);
    /* all zeros: d = 0, q = 0 */
    float z[32] = {0};
    assert_int_equal(ak_quantize_row(AK_WTYPE_Q8_0, z, got, 32), AK_OK);
    for (int j = 0; j < 34; j++) assert_int_equal(got[j], 0);
}

/* Block 0: the largest magnitude is −8, d = −8/−8 = 1, value = min(15, (int)(x + 8.5)).
 * Block 1: the first largest magnitude is +8 (a later −8 does not replace it), d = −1,
 * so x = −8 maps to (int)16.5 = 16, clamped to 15. */
static void test_q4_0_known_block(void **state) {
    (void)state;
    float x[64] = {0};
    float b0[32] = {-8.0f, 7.0f, 7.4f, 0.0f, -0.5f, 0.5f, -7.6f, 3.2f};
    memcpy(x, b0, sizeof b0);
    x[16] = 1.0f;  /* high nibble of qs[0]: (int)9.5 = 9 */
    x[17] = -3.0f; /* (int)5.5 = 5 */
    x[32] = 8.0f;
    x[37] = -8.0f;
    x[48] = 2.0f; /* x·(1/d) = −2 → (int)6.5 = 6 */
    unsigned char got[36];
    assert_int_equal(ak_quantize_row(AK_WTYPE_Q4_0, x, got, 64), AK_OK);
    unsigned char want[36] = {0x00, 0x3c, /* d = 1 */
                              0 | 9 << 4, 15 | 5 << 4, 15 | 8 << 4, 8 | 8 << 4, 8 | 8 << 4,
                              9 | 8 << 4, 0 | 8 << 4, 11 | 8 << 4};
    for (int j = 8; j < 16; j++) want[2 + j] = 8 | 8 << 4;
    want[18] = 0x00; /* d = −1 */
    want[19] = 0xbc;
    for (int j = 0; j < 16; j++) want[20 + j] = 8 | 8 << 4;
    want[20] = 0 | 6 << 4; /* x = 8 → (int)0.5 = 0; x[48] = 2 → 6 */
    want[25] = 15 | 8 << 4; /* x = −8 → 16, clamped */
    assert_memory_equal(got, want, 36);
    float back[64];
    assert_int_equal(ak_dequantize_row(AK_WTYPE_Q4_0, got, back, 64), AK_OK);
    assert_true(back[0] == -8.0f && back[1] == 7.0f && back[16] == 1.0f);
    assert_true(back[32] == 8.0f && back[37] == -7.0f && back[48] == 2.0f);
}

/* Largest |x| of each 32-block. */
static float block_amax(const float *x, size_t i) {
    float m = 0.0f;
    for (size_t j = 0; j < 32; j++) m = fmaxf(m, fabsf(x[i * 32 + j]));
    return m;
}

static void test_round_trip_bounds(void **state) {
    (void)state;
    enum { K = 256 };
    uint64_t seed = 11;
    float *x = rand_floats(K, &seed, 3.0f), back[K];
    x[5] = 0.0f;
    unsigned char stored[K * 4];
    for (size_t w = 0; w < COUNT(wtypes); w++) {
        assert_int_equal(ak_quantize_row(wtypes[w], x, stored, K), AK_OK);
        assert_int_equal(ak_dequantize_row(wtypes[w], stored, back, K), AK_OK);
        for (size_t k = 0; k < K; k++) {
            float amax = block_amax(x, k / 32), err = fabsf(back[k] - x[k]), bound = 0.0f;
            switch (wtypes[w]) {
            case AK_WTYPE_F32: bound = 0.0f; break;
            case AK_WTYPE_F16: bound = fabsf(x[k]) * 0x1p-11f + 0x1p-25f; break;
            case AK_WTYPE_BF16: bound = fabsf(x[k]) * 0x1p-8f; break;
            /* half a step of d = amax/127, plus the f16 rounding of d times |q| ≤ 127 */
            case AK_WTYPE_Q8_0: bound = amax / 127.0f * (0.5f + 127.0f * 0x1p-11f) * 1.001f; break;
            /* the far side of the range clamps at 7·|d|, one step of |d| = amax/8 short */
            case AK_WTYPE_Q4_0: bound = amax / 8.0f * (1.0f + 16.0f * 0x1p-11f) * 1.001f; break;
            default: break; /* super-block types: test_kquant.py against ggml */
            }
            if (!(err <= bound)) {
                print_error("%s: x[%zu] = %g came back as %g (bound %g)\n",
                            ak_wtype_name(wtypes[w]), k, (double)x[k], (double)back[k],
                            (double)bound);
                fail();
            }
        }
    }
    free(x);
}

/* ---- kernels against the reference -------------------------------------------------- */

/* One problem: weights stored in `wtype`, activations, initial Y, and the oracle. */
typedef struct lin_case {
    ak_wtype wtype;
    size_t N, K, T, ldx, ldy;
    int accumulate;
    unsigned char *W;
    size_t rb;
    float *X, *Y0, *ref, *bound;
    float *xd;  /* Q8_0 activations (reference quantizer) */
    int32_t *xs, *xo; /* block sums, and the kernels' offset terms */
    int8_t *xq;
} lin_case;

/* x: the activations to use (T rows of stride K + pad), or NULL for random ones. */
static lin_case case_make_x(ak_wtype wtype, size_t N, size_t K, size_t T, int accumulate,
                            size_t pad, uint64_t seed, const float *x_given) {
    lin_case c = {.wtype = wtype, .N = N, .K = K, .T = T, .ldx = K + pad, .ldy = N + 2 * pad,
                  .accumulate = accumulate};
    c.rb = row_bytes_of(wtype, K);
    float *w = rand_floats(N * K, &seed, 1.0f);
    c.W = malloc(N * c.rb + 1);
    assert_non_null(c.W);
    for (size_t n = 0; n < N; n++)
        assert_int_equal(ak_quantize_row(wtype, w + n * K, c.W + n * c.rb, K), AK_OK);
    float *wd = malloc((N * K + 1) * sizeof(float)); /* the weights as the kernels see them */
    for (size_t n = 0; n < N; n++)
        assert_int_equal(ak_dequantize_row(wtype, c.W + n * c.rb, wd + n * K, K), AK_OK);
    c.X = rand_floats(T * c.ldx, &seed, 2.0f);
    if (x_given) memcpy(c.X, x_given, T * c.ldx * sizeof(float));
    if (wtype == AK_WTYPE_BF16 && T >= 2) /* ak_linear rounds them so (ak__linear_job.xb) */
        for (size_t i = 0; i < T * c.ldx; i++)
            c.X[i] = ak__bf16_to_f32_ref(ak__f32_to_bf16_ref(c.X[i]));
    c.Y0 = rand_floats(T * c.ldy, &seed, 4.0f);
    if (!accumulate) /* Y = must ignore the old content */
        for (size_t i = 0; i < T * c.ldy; i++) c.Y0[i] = NAN;
    c.xd = malloc((T * K / 32 + 1) * sizeof(float));
    c.xs = malloc((T * K / 32 + 1) * sizeof(int32_t));
    c.xo = malloc((T * K / 32 + 1) * sizeof(int32_t));
    c.xq = malloc(T * K + 1);
    float *xv = malloc((T * K + 1) * sizeof(float)); /* activations as the kernels see them */
    for (size_t t = 0; t < T; t++) {
        const float *x = c.X + t * c.ldx;
        if (quantized(wtype) && K) {
            ak_f32_quantize_q8_0__ref(x, K, c.xd + t * K / 32, c.xs + t * K / 32, c.xq + t * K);
            for (size_t k = 0; k < K; k++)
                xv[t * K + k] = c.xd[t * K / 32 + k / 32] * c.xq[t * K + k];
        } else {
            memcpy(xv + t * K, x, K * sizeof(float));
        }
    }
    if (quantized(wtype)) {
        memcpy(c.xo, c.xs, T * K / 32 * sizeof(int32_t));
        ak__linear_offsets(wtype, c.xo, T * K / 32);
    }
    c.ref = malloc((T * c.ldy + 1) * sizeof(float));
    c.bound = malloc((T * c.ldy + 1) * sizeof(float));
    memcpy(c.ref, c.Y0, T * c.ldy * sizeof(float));
    ak__linear_job job = {.W = c.W, .row_bytes = c.rb, .K = K, .T = T, .X = c.X, .ldx = c.ldx,
                          .xd = c.xd, .xo = c.xo, .xq = c.xq, .ldq = K, .Y = c.ref, .ldy = c.ldy,
                          .accumulate = accumulate};
    ak__kernels_for("ref")->linear[ak__linear_slot(wtype)](&job, 0, N);
    for (size_t t = 0; t < T; t++)
        for (size_t n = 0; n < N; n++) {
            double s = 0.0;
            for (size_t k = 0; k < K; k++) s += fabs((double)wd[n * K + k] * xv[t * K + k]);
            double b = 4.0 * (double)(K + 2) * FLT_EPSILON * s + 1e-30;
            if (accumulate) b += FLT_EPSILON * fabs((double)c.Y0[t * c.ldy + n]);
            c.bound[t * c.ldy + n] = (float)b;
        }
    free(w);
    free(wd);
    free(xv);
    return c;
}

static lin_case case_make(ak_wtype wtype, size_t N, size_t K, size_t T, int accumulate,
                          size_t pad, uint64_t seed) {
    return case_make_x(wtype, N, K, T, accumulate, pad, seed, NULL);
}

static void case_free(lin_case *c) {
    free(c->W);
    free(c->X);
    free(c->Y0);
    free(c->ref);
    free(c->bound);
    free(c->xd);
    free(c->xs);
    free(c->xo);
    free(c->xq);
}

/* Compares Y with the reference; columns past N (padding) must be untouched. */
static void check_y(const lin_case *c, const float *Y, const char *who) {
    for (size_t t = 0; t < c->T; t++)
        for (size_t n = 0; n < c->ldy; n++) {
            size_t at = t * c->ldy + n;
            int bad = n >= c->N ? memcmp(&Y[at], &c->Y0[at], sizeof(float)) != 0
                                : !(fabsf(Y[at] - c->ref[at]) <= c->bound[at]);
            if (bad) {
                print_error("%s %s N=%zu K=%zu T=%zu acc=%d: Y[%zu][%zu] = %.9g, expected %.9g "
                            "(± %.3g)\n", who, ak_wtype_name(c->wtype), c->N, c->K, c->T,
                            c->accumulate, t, n, (double)Y[at], (double)c->ref[at],
                            (double)c->bound[at]);
                fail();
            }
        }
}

/* Every variant's kernel on the whole range and on two sub-ranges of columns, and its
 * activation quantizer bit for bit against the reference's. */
static void check_kernels(const lin_case *c) {
    size_t ny = c->T * c->ldy;
    for (size_t v = 0; v < N_VARIANTS; v++) {
        const ak__kernels *k = ak__kernels_for(variants[v]);
        if (!k) continue;
        guarded_buf g = guarded_alloc(ny * sizeof(float), 0);
        float *Y = g.data;
        memcpy(Y, c->Y0, ny * sizeof(float));
        ak__linear_job job = {.W = c->W, .row_bytes = c->rb, .K = c->K, .T = c->T, .X = c->X,
                              .ldx = c->ldx, .xd = c->xd, .xo = c->xo, .xq = c->xq,
                              .ldq = c->K, .Y = Y,
                              .ldy = c->ldy,
                              .accumulate = c->accumulate};
        ak__linear_fn fn = k->linear[ak__linear_slot(c->wtype)];
        size_t cut = c->N / 3;
        fn(&job, 0, cut);
        fn(&job, cut, c->N);
        check_y(c, Y, k->name);
        assert_true(guarded_intact(&g));
        guarded_free(&g);
        if (quantized(c->wtype) && c->K) {
            float d[64];
            int32_t s[64];
            int8_t q[2048];
            assert_true(c->K <= 2048);
            k->linear_quantize_x(c->X, c->K, d, s, q);
            assert_memory_equal(d, c->xd, c->K / 32 * sizeof(float));
            assert_memory_equal(s, c->xs, c->K / 32 * sizeof(int32_t));
            assert_memory_equal(q, c->xq, c->K);
        }
    }
}

/* Non-finite and extreme activations through the Q8_0 quantizer of every variant and the
 * quantized kernels: bit for bit the reference's values, no undefined conversion (the
 * sanitizer build checks), a block holding NaN or ±Inf gives d = NaN, q = 0, sum 0 and
 * NaN outputs (as the float path gives NaN), a block whose 1/d overflows gives q = 0. */
static void test_nonfinite_activations(void **state) {
    (void)state;
    enum { K = 256, T = 3, N = 5, NB = K / 32 };
    uint64_t seed = 5;
    float *x = rand_floats(T * K, &seed, 2.0f);
    float neg_nan;
    uint32_t neg_nan_bits = 0xffc00001u;
    memcpy(&neg_nan, &neg_nan_bits, sizeof neg_nan);
    x[0 * 32 + 13] = NAN;                             /* token 0: NaN mid-block */
    x[2 * 32 + 31] = INFINITY;                        /* +Inf in the last lane */
    x[3 * 32 + 0] = -INFINITY;                        /* -Inf in the first */
    x[4 * 32 + 7] = INFINITY, x[4 * 32 + 8] = NAN;    /* both */
    for (int j = 0; j < 32; j++) x[5 * 32 + j] = 3e38f * (j % 2 ? 1 : -1) / (float)(j + 1);
    for (int j = 0; j < 32; j++) x[K + 6 * 32 + j] = 1e-38f / (float)(j + 1); /* token 1: 1/d = Inf */
    memset(x + K + 7 * 32, 0, 32 * sizeof(float));
    x[K + 7 * 32 + 3] = 0x1p-130f;                    /* a lone subnormal */
    x[2 * K + 1 * 32 + 30] = neg_nan;                 /* token 2: a negative NaN */
    float rd[T * NB];
    int32_t rs[T * NB];
    int8_t rq[T * K];
    for (size_t t = 0; t < T; t++)
        ak_f32_quantize_q8_0__ref(x + t * K, K, rd + t * NB, rs + t * NB, rq + t * K);
    int nonfinite[T * NB] = {[0] = 1, [2] = 1, [3] = 1, [4] = 1, [2 * NB + 1] = 1};
    for (size_t i = 0; i < T * NB; i++) {
        if (nonfinite[i]) assert_true(isnan(rd[i]) && rs[i] == 0);
        else assert_true(!isnan(rd[i]) && labs((long)rs[i]) <= 32 * 127);
        for (int j = 0; j < 32; j++)
            if (nonfinite[i] || i == NB + 6 || i == NB + 7) assert_int_equal(rq[i * 32 + j], 0);
    }
    assert_true(rd[NB + 6] == 0.0f && rd[NB + 7] == 0.0f); /* below f16's range */
    assert_true(isinf(rd[5])); /* 3e38/127 is above f16's range (as in ggml's Q8_0) */
    unsigned char W[N * (K / 32) * sizeof(ak__block_q8_0)];
    float *w = rand_floats(N * K, &seed, 1.0f);
    for (size_t v = 0; v < N_VARIANTS; v++) {
        const ak__kernels *k = ak__kernels_for(variants[v]);
        if (!k) continue;
        float d[T * NB];
        int32_t sums[T * NB];
        int8_t q[T * K];
        for (size_t t = 0; t < T; t++)
            k->linear_quantize_x(x + t * K, K, d + t * NB, sums + t * NB, q + t * K);
        if (memcmp(d, rd, sizeof d)) print_error("%s: quantizer scales differ\n", variants[v]);
        assert_memory_equal(d, rd, sizeof d);
        assert_memory_equal(sums, rs, sizeof sums);
        assert_memory_equal(q, rq, sizeof q);
        for (int wt = 0; wt < 2; wt++) {
            ak_wtype wtype = wt ? AK_WTYPE_Q4_0 : AK_WTYPE_Q8_0;
            size_t rb = row_bytes_of(wtype, K);
            for (size_t n = 0; n < N; n++)
                assert_int_equal(ak_quantize_row(wtype, w + n * K, W + n * rb, K), AK_OK);
            memcpy(sums, rs, sizeof sums);
            ak__linear_offsets(wtype, sums, T * NB);
            float Y[T * N];
            ak__linear_job job = {.W = W, .row_bytes = rb, .K = K, .T = T, .X = x, .ldx = K,
                                  .xd = d, .xo = sums, .xq = q, .ldq = K, .Y = Y, .ldy = N};
            k->linear[ak__linear_slot(wtype)](&job, 0, N);
            for (size_t t = 0; t < T; t++)
                for (size_t n = 0; n < N; n++)
                    if (t == 1 ? !isfinite(Y[t * N + n]) : !isnan(Y[t * N + n])) {
                        print_error("%s %s: Y[%zu][%zu] = %g\n", variants[v],
                                    ak_wtype_name(wtype), t, n, (double)Y[t * N + n]);
                        fail();
                    }
            assert_int_equal(ak_linear(wtype, W, N, K, x, K, T, Y, N, 0, NULL), AK_OK);
            for (size_t n = 0; n < N; n++)
                assert_true(isnan(Y[n]) && isfinite(Y[N + n]) && isnan(Y[2 * N + n]));
        }
    }
    free(w);
    free(x);
}

/* The public entry point on a pool (NULL = the global one), Y inside guard bytes. */
static void check_public(const lin_case *c, ak_threadpool *pool) {
    size_t ny = c->T * c->ldy;
    guarded_buf g = guarded_alloc(ny * sizeof(float), 0);
    float *Y = g.data;
    memcpy(Y, c->Y0, ny * sizeof(float));
    assert_int_equal(ak_linear(c->wtype, c->W, c->N, c->K, c->X, c->ldx, c->T, Y, c->ldy,
                               c->accumulate, pool),
                     AK_OK);
    check_y(c, Y, "ak_linear");
    assert_true(guarded_intact(&g));
    guarded_free(&g);
}

/* 4, 12, 16, 70: the VNNI tiles of 1, 3, 4 and 4 + 2 groups of 4 tokens */
static const size_t Ts[] = {1, 3, 4, 12, 16, 70};

/* Every type × T × accumulate on shapes around the kernels' row and k tiles. */
static void test_kernels_vs_ref(void **state) {
    (void)state;
    static const size_t shapes[][2] = {{1, 32}, {7, 64}, {17, 96}, {33, 256}, {50, 800}};
    uint64_t seed = 1;
    for (size_t w = 0; w < COUNT(wtypes); w++)
        for (size_t s = 0; s < COUNT(shapes); s++)
            for (size_t t = 0; t < COUNT(Ts); t++)
                for (int acc = 0; acc <= 1; acc++) {
                    lin_case c = case_make(wtypes[w], shapes[s][0], shapes[s][1], Ts[t], acc,
                                           (s + t) % 3, seed++);
                    check_kernels(&c);
                    case_free(&c);
                }
}

/* The public call with 1-3 threads on shapes big enough to be split, plus the LLM's. */
static void test_public_threads(void **state) {
    (void)state;
    uint64_t seed = 100;
    for (int nt = 1; nt <= 3; nt++) {
        ak_threadpool *pool;
        assert_int_equal(ak_threadpool_create(nt, &pool), AK_OK);
        for (size_t w = 0; w < COUNT(wtypes); w++)
            for (size_t t = 0; t < COUNT(Ts); t++) {
                lin_case c = case_make(wtypes[w], 300, 768, Ts[t], (int)(t & 1), t % 2, seed++);
                check_public(&c, pool);
                case_free(&c);
            }
        ak_threadpool_free(pool);
    }
    lin_case c = case_make(AK_WTYPE_Q4_0, 129, 2048, 5, 1, 0, seed++);
    check_public(&c, NULL);
    case_free(&c);
    /* several 256 KiB row blocks of a quantized type in one range (blocked order); then
     * Q4_0 / Q8_0 with several 128 KiB row blocks, two K chunks of 32 blocks, a
     * remainder row and a part-filled group of 8 tokens (the VNNI one-token-per-lane
     * tiles), accumulating; T = 57: the 512-bit lane tiles (avx512w) with a tile of two
     * groups of 16 whose second holds 9 tokens, over 3 K chunks of 16 blocks and a part */
    static const struct { ak_wtype wt; int slot; size_t N, K, T; int acc; } big[] = {
        {AK_WTYPE_Q4_0, AK__LIN_Q4_0, 700, 1024, 70, 0},
        {AK_WTYPE_Q4_0, AK__LIN_Q4_0, 701, 2048, 13, 1},
        {AK_WTYPE_Q8_0, AK__LIN_Q8_0, 301, 2048, 16, 1},
        {AK_WTYPE_Q8_0, AK__LIN_Q8_0, 131, 1600, 57, 1},
    };
    for (size_t i = 0; i < COUNT(big); i++) {
        c = case_make(big[i].wt, big[i].N, big[i].K, big[i].T, big[i].acc, 0, seed++);
        ak__linear_job job = {.W = c.W, .row_bytes = c.rb, .K = c.K, .T = c.T, .X = c.X,
                              .ldx = c.ldx, .xd = c.xd, .xo = c.xo, .xq = c.xq, .ldq = c.K,
                              .Y = NULL, .ldy = c.ldy, .accumulate = big[i].acc};
        for (size_t v = 0; v < N_VARIANTS; v++) {
            const ak__kernels *k = ak__kernels_for(variants[v]);
            if (!k) continue;
            float *Y = malloc(c.T * c.ldy * sizeof(float));
            memcpy(Y, c.Y0, c.T * c.ldy * sizeof(float));
            job.Y = Y;
            k->linear[big[i].slot](&job, 0, c.N);
            check_y(&c, Y, k->name);
            free(Y);
        }
        case_free(&c);
    }
}

/* ak_linear_multi: three matrices of one input (row counts like Q, K, V; the middle one
 * smaller than a scheduling unit) against each one's reference, on 1 and 2 threads. */
static void test_multi(void **state) {
    (void)state;
    static const size_t Ns[] = {200, 9, 64};
    uint64_t seed = 900;
    for (int nt = 1; nt <= 2; nt++) {
        ak_threadpool *pool;
        assert_int_equal(ak_threadpool_create(nt, &pool), AK_OK);
        for (size_t w = 0; w < COUNT(wtypes); w++)
            for (size_t t = 0; t < COUNT(Ts); t++) {
                lin_case c[3];
                ak_linear_out outs[3];
                guarded_buf g[3];
                int acc = (int)(t & 1);
                for (int i = 0; i < 3; i++) {
                    c[i] = case_make_x(wtypes[w], Ns[i], 256, Ts[t], acc, 1, seed++,
                                       i ? c[0].X : NULL);
                    g[i] = guarded_alloc(c[i].T * c[i].ldy * sizeof(float), 0);
                    memcpy(g[i].data, c[i].Y0, c[i].T * c[i].ldy * sizeof(float));
                    outs[i] = (ak_linear_out){c[i].W, c[i].N, g[i].data, c[i].ldy};
                }
                assert_int_equal(ak_linear_multi(wtypes[w], 256, c[0].X, c[0].ldx, Ts[t], outs,
                                                 3, acc, pool), AK_OK);
                for (int i = 0; i < 3; i++) {
                    check_y(&c[i], g[i].data, "ak_linear_multi");
                    assert_true(guarded_intact(&g[i]));
                    guarded_free(&g[i]);
                    case_free(&c[i]);
                }
            }
        ak_threadpool_free(pool);
    }
}

/* Rows of a multiple of 4 KiB with many tokens: the driver copies float activations
 * to a padded stride and pads the quantized ones, on 1 and 2 threads. */
static void test_aliasing_rows(void **state) {
    (void)state;
    static const struct { ak_wtype w; size_t K, T; } cases[] = {
        {AK_WTYPE_F32, 2048, 70}, {AK_WTYPE_F16, 4096, 16}, {AK_WTYPE_BF16, 1024, 128},
        {AK_WTYPE_Q8_0, 4096, 70}, {AK_WTYPE_Q4_0, 8192, 64},
    };
    uint64_t seed = 500;
    for (int nt = 1; nt <= 2; nt++) {
        ak_threadpool *pool;
        assert_int_equal(ak_threadpool_create(nt, &pool), AK_OK);
        for (size_t i = 0; i < COUNT(cases); i++) {
            lin_case c = case_make(cases[i].w, 37, cases[i].K, cases[i].T, (int)(i & 1), 0, seed++);
            check_public(&c, pool);
            case_free(&c);
        }
        ak_threadpool_free(pool);
    }
}

/* K = 0: Y = 0 (or unchanged when accumulating); N = 0 / T = 0: nothing happens. */
static void test_empty(void **state) {
    (void)state;
    float Y[6] = {1, 2, 3, 4, 5, 6};
    assert_int_equal(ak_linear(AK_WTYPE_F16, NULL, 3, 0, NULL, 0, 2, Y, 3, 1, NULL), AK_OK);
    assert_true(Y[5] == 6.0f);
    assert_int_equal(ak_linear(AK_WTYPE_F16, NULL, 3, 0, NULL, 0, 2, Y, 3, 0, NULL), AK_OK);
    for (int i = 0; i < 6; i++) assert_true(Y[i] == 0.0f);
    assert_int_equal(ak_linear(AK_WTYPE_Q8_0, NULL, 0, 32, NULL, 32, 5, NULL, 0, 0, NULL), AK_OK);
    assert_int_equal(ak_linear(AK_WTYPE_F32, NULL, 4, 8, NULL, 8, 0, NULL, 4, 0, NULL), AK_OK);
}

static void expect_invalid(ak_status st) {
    assert_int_equal(st, AK_ERR_INVALID_ARG);
    assert_true(ak_last_error()[0] != '\0');
    ak_clear_error();
}

static void test_bad_args(void **state) {
    (void)state;
    float W[256] = {0}, X[128] = {0}, Y[64] = {0};
    size_t b;
    expect_invalid(ak_wtype_row_bytes(AK_WTYPE_Q8_0, 48, &b)); /* K % 32 */
    expect_invalid(ak_wtype_row_bytes((ak_wtype)7, 32, &b));
    expect_invalid(ak_wtype_row_bytes(AK_WTYPE_F32, 32, NULL));
    expect_invalid(ak_quantize_row(AK_WTYPE_Q4_0, X, W, 40));
    expect_invalid(ak_quantize_row(AK_WTYPE_F16, NULL, W, 8));
    expect_invalid(ak_quantize_row(AK_WTYPE_F16, X, NULL, 8));
    expect_invalid(ak_quantize_row(AK_WTYPE_F32, X, X + 2, 8)); /* overlap */
    expect_invalid(ak_dequantize_row(AK_WTYPE_Q8_0, W, Y, 33));
    expect_invalid(ak_dequantize_row((ak_wtype)99, W, Y, 32));
    expect_invalid(ak_dequantize_row(AK_WTYPE_BF16, W, NULL, 32));
    /* ak_linear: K not a multiple of the block, NULLs, strides, overlap, overflow */
    expect_invalid(ak_linear(AK_WTYPE_Q8_0, W, 2, 48, X, 48, 1, Y, 2, 0, NULL));
    expect_invalid(ak_linear(AK_WTYPE_Q4_0, W, 2, 16, X, 16, 1, Y, 2, 0, NULL));
    expect_invalid(ak_linear((ak_wtype)5, W, 2, 32, X, 32, 1, Y, 2, 0, NULL));
    expect_invalid(ak_linear(AK_WTYPE_F32, NULL, 2, 32, X, 32, 1, Y, 2, 0, NULL));
    expect_invalid(ak_linear(AK_WTYPE_F32, W, 2, 32, NULL, 32, 1, Y, 2, 0, NULL));
    expect_invalid(ak_linear(AK_WTYPE_F32, W, 2, 32, X, 32, 1, NULL, 2, 0, NULL));
    expect_invalid(ak_linear(AK_WTYPE_F32, W, 2, 32, X, 31, 1, Y, 2, 0, NULL)); /* ldx < K */
    expect_invalid(ak_linear(AK_WTYPE_F32, W, 2, 32, X, 32, 2, Y, 1, 0, NULL)); /* ldy < N */
    expect_invalid(ak_linear(AK_WTYPE_F32, W, 2, 32, X, 32, 2, X + 8, 2, 0, NULL)); /* Y in X */
    expect_invalid(ak_linear(AK_WTYPE_F32, W, 2, 32, X, 32, 1, W + 4, 2, 0, NULL)); /* Y in W */
    expect_invalid(ak_linear(AK_WTYPE_F32, W, 2, 32, (const float *)((char *)X + 1), 32, 1, Y, 2,
                             0, NULL)); /* misaligned X */
    expect_invalid(ak_linear(AK_WTYPE_F32, W, SIZE_MAX / 8, 32, X, 32, 1, Y, SIZE_MAX / 8, 0,
                             NULL));
    expect_invalid(ak_linear(AK_WTYPE_F16, W, 2, 32, X, SIZE_MAX / 2, 3, Y, 2, 0, NULL));
    /* ak_linear_multi: no outputs, too many, NULL, overlapping outputs, a bad one */
    ak_linear_out outs[9];
    for (int i = 0; i < 9; i++) outs[i] = (ak_linear_out){W, 2, Y + 2 * i, 2};
    expect_invalid(ak_linear_multi(AK_WTYPE_F32, 32, X, 32, 1, outs, 0, 0, NULL));
    expect_invalid(ak_linear_multi(AK_WTYPE_F32, 32, X, 32, 1, outs, 9, 0, NULL));
    expect_invalid(ak_linear_multi(AK_WTYPE_F32, 32, X, 32, 1, NULL, 1, 0, NULL));
    outs[1].Y = Y + 1;
    expect_invalid(ak_linear_multi(AK_WTYPE_F32, 32, X, 32, 1, outs, 2, 0, NULL));
    outs[1] = (ak_linear_out){W, 2, NULL, 2};
    expect_invalid(ak_linear_multi(AK_WTYPE_F32, 32, X, 32, 1, outs, 2, 0, NULL));
}

static int setup(void **state) {
    (void)state;
    return ak_init() == AK_OK ? 0 : -1;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names_and_sizes),
        cmocka_unit_test(test_q8_0_known_block),
        cmocka_unit_test(test_q4_0_known_block),
        cmocka_unit_test(test_round_trip_bounds),
        cmocka_unit_test(test_kernels_vs_ref),
        cmocka_unit_test(test_nonfinite_activations),
        cmocka_unit_test(test_public_threads),
        cmocka_unit_test(test_multi),
        cmocka_unit_test(test_aliasing_rows),
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_bad_args),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
