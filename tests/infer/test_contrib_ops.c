/* Tests of the com.microsoft contrib operators (ops/contrib) run one at a time through the
 * operator harness, so the release and the ASan+UBSan builds both drive them (the
 * comparison with ONNX Runtime is tests/infer/test_contrib_ort.py): MatMulNBits against
 * a double reference that unpacks B and the zero points on its own, for bits 2/4/8, a K
 * that is not a multiple of the block, weights dequantized at creation or tile by tile on
 * each run (fed, or too large), the GEMV and the SGEMM row counts, float32, float16 and
 * bfloat16; FusedMatMul with transBatch, transposes and broadcast against index
 * arithmetic in double, in the same three types; RotaryEmbedding 3-D and 4-D,
 * interleaved and halves, a partial rotary dim; the GELU family in float32 and float16;
 * and refusals. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "infer/runtime/op.h"
#include "core/half.h"

#include "op_harness.h"

#define MS "com.microsoft"

static unsigned next_rand(unsigned *seed) {
    *seed = *seed * 1103515245u + 12345u;
    return (*seed >> 8) & 0xffffu;
}

/* ---- MatMulNBits -------------------------------------------------------------------- */

/* The reference's own unpacking: value j of a bits-wide run, low bits first. */
static unsigned ref_unpack(const uint8_t *run, int64_t j, int bits) {
    int per = 8 / bits;
    return (unsigned)(run[j / per] >> (bits * (j % per))) & ((1u << bits) - 1u);
}

/* For t float16/bfloat16: rounds x[0..n) to t in place and returns its t copy (freed by
 * the caller); for float32: x itself. */
static void *as_type(float *x, size_t n, ak_elem_type t) {
    if (t == AK_ELEM_F32) return x;
    uint16_t *h = malloc(n * 2 + 2);
    assert_non_null(h);
    for (size_t i = 0; i < n; i++) {
        h[i] = t == AK_ELEM_F16 ? ak__f32_to_f16_ref(x[i]) : ak__f32_to_bf16_ref(x[i]);
        x[i] = t == AK_ELEM_F16 ? ak__f16_to_f32_ref(h[i]) : ak__bf16_to_f32_ref(h[i]);
    }
    return h;
}

static double value_of(const void *y, size_t i, ak_elem_type t) {
    if (t == AK_ELEM_F32) return ((const float *)y)[i];
    uint16_t h = ((const uint16_t *)y)[i];
    return t == AK_ELEM_F16 ? ak__f16_to_f32_ref(h) : ak__bf16_to_f32_ref(h);
}

static void free_typed(void *h, const float *x) {
    if (h != x) free(h);
}

static void check_nbits_typed(ak_elem_type t, int64_t T, int64_t K, int64_t N, int bits,
                              int64_t block, int with_zp, int with_bias, int constant) {
    int64_t kb = (K + block - 1) / block, blob = block * bits / 8, zrow = (kb * bits + 7) / 8;
    unsigned seed = (unsigned)(T * 131 + K * 7 + N + bits);
    uint8_t *B = malloc((size_t)(N * kb * blob)), *zp = malloc((size_t)(N * zrow));
    assert_true(B && zp);
    for (int64_t i = 0; i < N * kb * blob; i++) B[i] = (uint8_t)next_rand(&seed);
    for (int64_t i = 0; i < N * zrow; i++) zp[i] = (uint8_t)next_rand(&seed);
    float *A = op_random_floats((size_t)(T * K), -1.0f, 1.0f, seed + 1);
    float *scales = op_random_floats((size_t)(N * kb), 0.01f, 0.1f, seed + 2);
    float *bias = op_random_floats((size_t)N, -1.0f, 1.0f, seed + 3);
    void *At = as_type(A, (size_t)(T * K), t), *st_ = as_type(scales, (size_t)(N * kb), t);
    void *bt = as_type(bias, (size_t)N, t);
    op_call c = {0};
    int64_t ad[2] = {T, K}, bd[3] = {N, kb, blob}, sd[2] = {N, kb}, zd[2] = {N, zrow}, nd[1] = {N};
    add_in(&c, t, 2, ad, At);
    add_in(&c, AK_ELEM_U8, 3, bd, B);
    add_in(&c, t, 2, sd, st_);
    add_in(&c, AK_ELEM_U8, with_zp ? 2 : -1, zd, zp);
    if (with_bias) {
        add_in(&c, AK_ELEM_F32, -1, NULL, NULL); /* g_idx omitted */
        add_in(&c, t, 1, nd, bt);
    }
    if (constant) c.const_mask = 0xe; /* B, scales, zero points */
    attr_int(&c, "K", K);
    attr_int(&c, "N", N);
    attr_int(&c, "bits", bits);
    attr_int(&c, "block_size", block);
    ak_status st = op_call_run(&c, MS, "MatMulNBits", 1, 1, NULL);
    if (st != AK_OK) fail_msg("%s", ak_last_error());
    assert_int_equal(c.out[0].rank, 2);
    assert_int_equal(c.out[0].dims[1], N);
    assert_int_equal(c.out[0].type, t);
    /* one rounding of the float32 result to t */
    double rtol = t == AK_ELEM_F32 ? 1e-4 : t == AK_ELEM_F16 ? 1.0 / 1024 : 1.0 / 128;
    for (int64_t r = 0; r < T; r++)
        for (int64_t n = 0; n < N; n++) {
            double acc = with_bias ? bias[n] : 0.0;
            for (int64_t k = 0; k < K; k++) {
                int64_t b = k / block;
                double z = with_zp ? ref_unpack(zp + n * zrow, b, bits) : (double)(1 << (bits - 1));
                double q = ref_unpack(B + (n * kb + b) * blob, k % block, bits);
                acc += A[r * K + k] * (q - z) * scales[n * kb + b];
            }
            op_assert_close(value_of(c.out[0].data, (size_t)(r * N + n), t), acc, rtol, 1e-4);
        }
    op_call_free(&c);
    free_typed(At, A), free_typed(st_, scales), free_typed(bt, bias);
    free(B), free(zp), free(A), free(scales), free(bias);
}

static void check_nbits(int64_t T, int64_t K, int64_t N, int bits, int64_t block, int with_zp,
                        int with_bias, int constant) {
    check_nbits_typed(AK_ELEM_F32, T, K, N, bits, block, with_zp, with_bias, constant);
}

static void test_matmul_nbits(void **s) {
    (void)s;
    check_nbits(1, 64, 8, 4, 32, 0, 0, 1);   /* GEMV, default zero point */
    check_nbits(3, 40, 5, 4, 16, 1, 1, 1);   /* padded last block, odd k_blocks, bias */
    check_nbits(7, 100, 9, 4, 64, 1, 0, 0);  /* SGEMM rows, weights dequantized per run */
    check_nbits(5, 80, 6, 2, 32, 1, 1, 1);
    check_nbits(2, 48, 3, 8, 16, 1, 0, 0);
    check_nbits(6, 33, 4, 8, 16, 0, 1, 1);
    /* dequantized tile by tile on each run: tiles of 16 rows of K 8192 (3 tiles), the
     * GEMV and the SGEMM on each; then a constant weight too large to dequantize at
     * creation (17 MB as float32), in tiles of 32 rows */
    check_nbits(2, 8192, 40, 4, 128, 1, 1, 0);
    check_nbits(5, 8192, 37, 4, 64, 0, 0, 0);
    check_nbits(1, 4096, 1040, 4, 32, 1, 0, 1);
    /* float16 and bfloat16 A, scales and bias, weights at creation and in tiles */
    check_nbits_typed(AK_ELEM_F16, 3, 40, 5, 4, 16, 1, 1, 1);
    check_nbits_typed(AK_ELEM_F16, 6, 8192, 20, 4, 64, 0, 1, 0);
    check_nbits_typed(AK_ELEM_BF16, 2, 100, 7, 4, 32, 1, 1, 1);
    check_nbits_typed(AK_ELEM_BF16, 1, 8192, 33, 8, 32, 1, 0, 0);
}

static void nbits_refused(int64_t bits, int64_t block, int with_gidx, const char *what) {
    float A[32] = {0}, sc[4] = {1, 1, 1, 1};
    uint8_t B[32] = {0};
    int32_t g[32] = {0};
    int64_t ad[2] = {1, 32}, bd[3] = {2, 2, 8}, sd[2] = {2, 2}, gd[1] = {32};
    op_call c = {0};
    add_in(&c, AK_ELEM_F32, 2, ad, A);
    add_in(&c, AK_ELEM_U8, 3, bd, B);
    add_in(&c, AK_ELEM_F32, 2, sd, sc);
    if (with_gidx) {
        add_in(&c, AK_ELEM_U8, -1, NULL, NULL);
        add_in(&c, AK_ELEM_I32, 1, gd, g);
    }
    attr_int(&c, "K", 32);
    attr_int(&c, "N", 2);
    attr_int(&c, "bits", bits);
    attr_int(&c, "block_size", block);
    assert_int_not_equal(op_call_run(&c, MS, "MatMulNBits", 1, 1, NULL), AK_OK);
    assert_non_null(strstr(ak_last_error(), what));
    op_call_free(&c);
}

static void test_matmul_nbits_refusals(void **s) {
    (void)s;
    nbits_refused(3, 16, 0, "bits=3");
    nbits_refused(4, 20, 0, "block_size=20");
    nbits_refused(4, 16, 1, "g_idx");
}

/* ---- FusedMatMul -------------------------------------------------------------------- */

/* A (4, 2, 3) with transBatchA: viewed (2, 4, 3), transA: (2, 3, 4) = M 3, K 4;
 * B (1, 5, 4) with transB: (1, 4, 5) broadcast over the batch; Y (2, 3, 5) · alpha; in
 * type t (float16/bfloat16 widened to float32, rounded once). */
static void check_fused_matmul_views(ak_elem_type t) {
    float *A = op_random_floats(24, -1, 1, 5), *B = op_random_floats(20, -1, 1, 6);
    void *At = as_type(A, 24, t), *Bt = as_type(B, 20, t);
    int64_t ad[3] = {4, 2, 3}, bd[3] = {1, 5, 4};
    op_call c = {0};
    add_in(&c, t, 3, ad, At);
    add_in(&c, t, 3, bd, Bt);
    attr_int(&c, "transBatchA", 1);
    attr_int(&c, "transA", 1);
    attr_int(&c, "transB", 1);
    attr_float(&c, "alpha", 0.5f);
    assert_int_equal(op_call_run(&c, MS, "FusedMatMul", 1, 1, NULL), AK_OK);
    assert_int_equal(c.out[0].rank, 3);
    assert_true(c.out[0].dims[0] == 2 && c.out[0].dims[1] == 3 && c.out[0].dims[2] == 5);
    double rtol = t == AK_ELEM_F32 ? 1e-5 : t == AK_ELEM_F16 ? 1.0 / 1024 : 1.0 / 128;
    for (int b = 0; b < 2; b++)
        for (int m = 0; m < 3; m++)
            for (int n = 0; n < 5; n++) {
                double acc = 0;
                for (int k = 0; k < 4; k++) /* op(A)[b][m][k] = A[k][b][m]; op(B)[k][n] = B[0][n][k] */
                    acc += (double)A[(k * 2 + b) * 3 + m] * B[n * 4 + k];
                op_assert_close(value_of(c.out[0].data, (size_t)((b * 3 + m) * 5 + n), t),
                                0.5 * acc, rtol, 1e-5);
            }
    op_call_free(&c);
    free_typed(At, A), free_typed(Bt, B);
    free(A), free(B);
}

static void test_fused_matmul_views(void **s) {
    (void)s;
    check_fused_matmul_views(AK_ELEM_F32);
    check_fused_matmul_views(AK_ELEM_F16);
    check_fused_matmul_views(AK_ELEM_BF16);
}

/* ---- RotaryEmbedding ---------------------------------------------------------------- */

static void check_rope(int four_d, int interleaved, int64_t heads, int64_t head, int64_t rot) {
    int64_t batch = 2, seq = 3, max_seq = 8, half = rot / 2;
    size_t count = (size_t)(batch * seq * heads * head);
    float *x = op_random_floats(count, -1, 1, (unsigned)(head + rot + interleaved));
    float *cs = op_random_floats((size_t)(max_seq * half), -1, 1, 9);
    float *sn = op_random_floats((size_t)(max_seq * half), -1, 1, 10);
    int64_t pos[6] = {7, 0, 3, 1, 1, 5};
    int64_t xd4[4] = {batch, heads, seq, head}, xd3[3] = {batch, seq, heads * head};
    int64_t pd[2] = {batch, seq}, cd[2] = {max_seq, half};
    op_call c = {0};
    add_in(&c, AK_ELEM_F32, four_d ? 4 : 3, four_d ? xd4 : xd3, x);
    add_in(&c, AK_ELEM_I64, 2, pd, pos);
    add_in(&c, AK_ELEM_F32, 2, cd, cs);
    add_in(&c, AK_ELEM_F32, 2, cd, sn);
    c.const_mask = 0xc;
    attr_int(&c, "interleaved", interleaved);
    if (rot != head) {
        attr_int(&c, "num_heads", heads);
        attr_int(&c, "rotary_embedding_dim", rot);
    }
    assert_int_equal(op_call_run(&c, MS, "RotaryEmbedding", 1, 1, NULL), AK_OK);
    const float *y = c.out[0].data;
    for (int64_t b = 0; b < batch; b++)
        for (int64_t t = 0; t < seq; t++)
            for (int64_t h = 0; h < heads; h++) {
                int64_t off = four_d ? ((b * heads + h) * seq + t) * head
                                     : ((b * seq + t) * heads + h) * head;
                int64_t p = pos[b * seq + t];
                for (int64_t i = 0; i < head; i++) {
                    double want = x[off + i];
                    if (i < rot) {
                        int64_t pair = interleaved ? i / 2 : i % half;
                        int first = interleaved ? i % 2 == 0 : i < half;
                        int64_t other = interleaved ? (first ? i + 1 : i - 1)
                                                    : (first ? i + half : i - half);
                        double cv = cs[p * half + pair], sv = sn[p * half + pair];
                        want = first ? x[off + i] * cv - x[off + other] * sv
                                     : x[off + i] * cv + x[off + other] * sv;
                    }
                    op_assert_close(y[off + i], want, 1e-5, 1e-6);
                }
            }
    op_call_free(&c);
    free(x), free(cs), free(sn);
}

static void test_rotary_embedding(void **s) {
    (void)s;
    for (int il = 0; il < 2; il++) {
        check_rope(1, il, 3, 8, 8);
        check_rope(0, il, 2, 10, 10);
        check_rope(0, il, 2, 12, 6);
        check_rope(1, il, 1, 14, 4);
    }
}

/* A position past the caches' rows (pos_last 9 of 2 rows), or scale != 1. */
static void rope_refused(int64_t pos_last, int with_scale, const char *what) {
    float x[16] = {0}, cs[8] = {0};
    int64_t pos[2] = {0, pos_last}, xd[3] = {1, 2, 8}, pd[2] = {1, 2}, cd[2] = {2, 4};
    op_call c = {0};
    add_in(&c, AK_ELEM_F32, 3, xd, x);
    add_in(&c, AK_ELEM_I64, 2, pd, pos);
    add_in(&c, AK_ELEM_F32, 2, cd, cs);
    add_in(&c, AK_ELEM_F32, 2, cd, cs);
    if (with_scale) attr_float(&c, "scale", 0.5f);
    assert_int_not_equal(op_call_run(&c, MS, "RotaryEmbedding", 1, 1, NULL), AK_OK);
    assert_non_null(strstr(ak_last_error(), what));
    op_call_free(&c);
}

static void test_rotary_refusals(void **s) {
    (void)s;
    rope_refused(9, 0, "position_ids");
    rope_refused(1, 1, "scale");
}

/* ---- the GELU family ---------------------------------------------------------------- */

static double gelu_ref(const char *op, double x, double alpha) {
    if (!strcmp(op, "FastGelu"))
        return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
    if (!strcmp(op, "QuickGelu")) return x / (1.0 + exp(-alpha * x));
    return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
}

static void check_gelu(const char *op, int with_bias, int half, int64_t rows, int64_t H) {
    size_t count = (size_t)(rows * H);
    float *x = op_random_floats(count, -5, 5, (unsigned)(rows + H));
    float *b = op_random_floats((size_t)H, -1, 1, 3);
    uint16_t *xh = malloc(count * 2 + 2), *bh = malloc((size_t)H * 2 + 2);
    assert_true(xh && bh);
    for (size_t i = 0; i < count; i++) xh[i] = ak__f32_to_f16_ref(x[i]), x[i] = ak__f16_to_f32_ref(xh[i]);
    for (int64_t i = 0; i < H; i++) bh[i] = ak__f32_to_f16_ref(b[i]), b[i] = ak__f16_to_f32_ref(bh[i]);
    int64_t xd[2] = {rows, H}, bd[1] = {H};
    ak_elem_type t = half ? AK_ELEM_F16 : AK_ELEM_F32;
    op_call c = {0};
    add_in(&c, t, 2, xd, half ? (void *)xh : (void *)x);
    if (with_bias) add_in(&c, t, 1, bd, half ? (void *)bh : (void *)b);
    if (!strcmp(op, "QuickGelu")) attr_float(&c, "alpha", 1.25f);
    assert_int_equal(op_call_run(&c, MS, op, 1, 1, NULL), AK_OK);
    for (size_t i = 0; i < count; i++) {
        double v = (double)x[i] + (with_bias ? b[i % (size_t)H] : 0.0);
        double want = gelu_ref(op, v, 1.25);
        double got = half ? ak__f16_to_f32_ref(((const uint16_t *)c.out[0].data)[i])
                          : ((const float *)c.out[0].data)[i];
        if (half) op_assert_close(got, want, 2e-3, 2e-3);
        else op_assert_close(got, want, 1e-5, 2e-6);
    }
    op_call_free(&c);
    free(x), free(b), free(xh), free(bh);
}

static void test_gelu_family(void **s) {
    (void)s;
    for (int half = 0; half < 2; half++) {
        check_gelu("Gelu", 0, half, 3, 7);
        check_gelu("BiasGelu", 1, half, 5, 300);   /* a row longer than one chunk */
        check_gelu("FastGelu", 0, half, 1, 9000); /* split over the pool */
        check_gelu("FastGelu", 1, half, 40, 257);
        check_gelu("QuickGelu", 0, half, 2, 33);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matmul_nbits),
        cmocka_unit_test(test_matmul_nbits_refusals),
        cmocka_unit_test(test_fused_matmul_views),
        cmocka_unit_test(test_rotary_embedding),
        cmocka_unit_test(test_rotary_refusals),
        cmocka_unit_test(test_gelu_family),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
