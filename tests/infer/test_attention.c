/* Unit test of the attention computation (src/infer/ops/attention/core.c): the fast path
 * (SGEMMs per block of query rows across the thread pool, the vectorized softmax rows)
 * against the scalar reference, over shapes that cross the row blocks, strided views
 * (packed and per-head layouts), every key-mask kind, broadcast additive bias and
 * causal attention with a past. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "infer/ops/attention/attention.h"

static float frand(uint32_t *s) {
    *s = *s * 1664525u + 1013904223u;
    return (float)((*s >> 8) & 0xffff) / 32768.0f - 1.0f;
}

typedef struct shape {
    size_t B, N, S, T, D, Dv;
    int packed; /* Q, K, V interleaved per token like packed QKV */
    int causal, bias_kind, mask_kind;
} shape;

static void check_shape(const shape *c) {
    size_t B = c->B, N = c->N, S = c->S, T = c->T, D = c->D, Dv = c->Dv;
    uint32_t seed = 7;
    size_t width = N * (2 * D + Dv), nq = B * S * width, nkv = B * T * width;
    float *qbuf = malloc(nq * sizeof(float)), *kvbuf = malloc(nkv * sizeof(float));
    float *bias = malloc(B * N * S * T * sizeof(float));
    float *fast = calloc(B * S * N * Dv, sizeof(float)), *ref = calloc(B * S * N * Dv, sizeof(float));
    int32_t *mask = malloc(B * S * T * sizeof(int32_t) + 2 * B * sizeof(int32_t));
    assert_non_null(qbuf), assert_non_null(kvbuf), assert_non_null(bias), assert_non_null(mask);
    assert_non_null(fast), assert_non_null(ref);
    for (size_t i = 0; i < nq; i++) qbuf[i] = frand(&seed);
    for (size_t i = 0; i < nkv; i++) kvbuf[i] = frand(&seed);
    for (size_t i = 0; i < B * N * S * T; i++) bias[i] = frand(&seed);
    ak__attn_problem p = {0};
    p.B = B, p.N = N, p.S = S, p.T = T, p.D = D, p.Dv = Dv;
    if (c->packed) { /* [B, rows, N, (D | D | Dv)] */
        size_t h = 2 * D + Dv;
        p.q = (ak__attn_view){qbuf, S * N * h, h, N * h};
        p.k = (ak__attn_view){kvbuf + D, T * N * h, h, N * h};
        p.v = (ak__attn_view){kvbuf + 2 * D, T * N * h, h, N * h};
    } else { /* q by token, k and v by head */
        p.q = (ak__attn_view){qbuf, S * N * D, D, N * D};
        p.k = (ak__attn_view){kvbuf, N * T * D, T * D, D};
        p.v = (ak__attn_view){kvbuf + B * N * T * D, N * T * Dv, T * Dv, Dv};
    }
    p.scale = 1.0f / sqrtf((float)D);
    p.mask_filter = -10000.0f;
    p.causal = c->causal;
    if (c->bias_kind == 1) p.bias = bias, p.bias_batch = N * S * T, p.bias_head = S * T, p.bias_row = T;
    if (c->bias_kind == 2) p.bias = bias, p.bias_batch = T, p.bias_head = 0, p.bias_row = 0;
    p.mask_kind = (ak__attn_mask_kind)c->mask_kind;
    p.mask = mask;
    for (size_t b = 0; b < B; b++) { /* END / END_START: lengths and starts; else 0/1 */
        mask[b] = T ? (int32_t)(T - b % T) : 0;
        mask[B + b] = (int32_t)(b % 2);
    }
    if (p.mask_kind == AK_ATTN_MASK_KEYS || p.mask_kind == AK_ATTN_MASK_ROWS)
        for (size_t i = 0; i < B * S * T; i++) mask[i] = (frand(&seed) > -0.5f) || (T && i % T == 0);
    uint8_t *cond = (uint8_t *)mask; /* BOOL: [B,1,S,T], false masks (keep = 1) */
    if (p.mask_kind == AK_ATTN_MASK_BOOL) {
        for (size_t i = 0; i < B * S * T; i++) cond[i] = (frand(&seed) > -0.5f) || (T && i % T == 0);
        p.bool_mask = cond, p.bool_keep = 1;
        p.bool_stride[0] = S * T, p.bool_stride[1] = 0, p.bool_stride[2] = T, p.bool_stride[3] = 1;
        p.mask_filter = -INFINITY;
    }
    p.out = fast, p.out_batch = S * N * Dv, p.out_head = Dv, p.out_row = N * Dv;
    ak_threadpool *pool;
    assert_int_equal(ak_threadpool_create(3, &pool), AK_OK);
    void *ws = malloc(ak__attn_workspace_bytes(&p, 3));
    assert_non_null(ws);
    assert_int_equal(ak__attn_run(&p, ws, pool), AK_OK);
    p.out = ref;
    assert_int_equal(ak__attn_reference(&p), AK_OK);
    for (size_t i = 0; i < B * S * N * Dv; i++)
        if (fabsf(fast[i] - ref[i]) > 2e-5f + 2e-5f * fabsf(ref[i]))
            fail_msg("B%zu N%zu S%zu T%zu D%zu mask %d: element %zu fast %g reference %g", B, N, S,
                     T, D, c->mask_kind, i, fast[i], ref[i]);
    ak_threadpool_free(pool);
    free(ws), free(qbuf), free(kvbuf), free(bias), free(fast), free(ref), free(mask);
}

static void test_fast_matches_reference(void **state) {
    (void)state;
    static const shape shapes[] = {
        {1, 1, 1, 1, 1, 1, 0, 0, 0, AK_ATTN_MASK_NONE},
        {2, 3, 5, 5, 8, 8, 0, 0, 1, AK_ATTN_MASK_KEYS},
        {1, 2, 130, 130, 16, 16, 1, 1, 0, AK_ATTN_MASK_NONE},  /* three row blocks, causal */
        {2, 2, 70, 75, 12, 20, 0, 1, 2, AK_ATTN_MASK_ROWS},    /* past of 5, broadcast bias */
        {3, 2, 4, 9, 8, 4, 1, 0, 0, AK_ATTN_MASK_END},
        {2, 4, 1, 17, 32, 32, 0, 1, 1, AK_ATTN_MASK_END_START}, /* one decode step */
        {2, 3, 6, 6, 8, 8, 0, 0, 0, AK_ATTN_MASK_BOOL},        /* a [B,1,S,T] condition */
        {1, 2, 3, 0, 4, 4, 0, 0, 0, AK_ATTN_MASK_NONE},          /* no keys: zeros */
    };
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) check_shape(&shapes[i]);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_fast_matches_reference)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
