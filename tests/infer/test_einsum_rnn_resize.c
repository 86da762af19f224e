/* Tests of Einsum, the recurrent operators and Resize beyond the ONNX node tests: Einsum's
 * SGEMM path (direct, transposed, packed and permuted layouts, batches over the pool)
 * against its double general path; LSTM/GRU reverse directions and sequence_lens against
 * equivalent forward runs; Resize's float32 passes against its generic path, opset 18 axes
 * and keep_aspect_ratio_policy; and rejection of bad equations, scales and indices. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "infer/runtime/op.h"

/* ---- running one operator ---------------------------------------------------------- */

#include "op_harness.h"

static ak_status call_op(op_call *c, const char *op_type, int64_t opset, uint32_t nout) {
    return op_call_run(c, "", op_type, opset, nout, NULL);
}

static void call_free(op_call *c) { op_call_free(c); }

static double *to_double(const float *x, size_t n) {
    double *d = malloc(n * sizeof *d + 1);
    assert_non_null(d);
    for (size_t i = 0; i < n; i++) d[i] = x[i];
    return d;
}

/* ---- Einsum ------------------------------------------------------------------------ */

/* Runs eq on two random float32 operands (SGEMM path) and on their double copies
 * (general path); the results must agree. */
static void einsum_check(const char *eq, int ra, const int64_t *da, int rb, const int64_t *db) {
    size_t na = 1, nb = 1;
    for (int d = 0; d < ra; d++) na *= (size_t)da[d];
    for (int d = 0; d < rb; d++) nb *= (size_t)db[d];
    float *a = op_random_floats(na, -1.0f, 1.0f, 1), *b = op_random_floats(nb, -1.0f, 1.0f, 2);
    double *a64 = to_double(a, na), *b64 = to_double(b, nb);
    op_call f = {0}, g = {0};
    add_in(&f, AK_ELEM_F32, ra, da, a);
    add_in(&f, AK_ELEM_F32, rb, db, b);
    attr_str(&f, "equation", eq);
    assert_int_equal(call_op(&f, "Einsum", 12, 1), AK_OK);
    add_in(&g, AK_ELEM_F64, ra, da, a64);
    add_in(&g, AK_ELEM_F64, rb, db, b64);
    attr_str(&g, "equation", eq);
    assert_int_equal(call_op(&g, "Einsum", 12, 1), AK_OK);
    assert_int_equal(f.out[0].rank, g.out[0].rank);
    assert_int_equal(f.out[0].count, g.out[0].count);
    for (uint64_t i = 0; i < f.out[0].count; i++)
        op_assert_close(((float *)f.out[0].data)[i], ((double *)g.out[0].data)[i], 1e-4, 1e-4);
    call_free(&f);
    call_free(&g);
    free(a), free(b), free(a64), free(b64);
}

static void test_einsum_gemm_layouts(void **s) {
    (void)s;
    einsum_check("bij,bjk->bik", 3, (int64_t[]){3, 17, 33}, 3, (int64_t[]){3, 33, 9});
    einsum_check("bhqd,bhkd->bhqk", 4, (int64_t[]){2, 3, 20, 16}, 4, (int64_t[]){2, 3, 24, 16});
    einsum_check("bhqk,bhkd->bhqd", 4, (int64_t[]){2, 3, 20, 24}, 4, (int64_t[]){2, 3, 24, 16});
    einsum_check("ji,jk->ik", 2, (int64_t[]){40, 30}, 2, (int64_t[]){40, 50});
    einsum_check("ij,jk->ki", 2, (int64_t[]){30, 40}, 2, (int64_t[]){40, 50});
    einsum_check("ibj,kjb->bki", 3, (int64_t[]){7, 5, 11}, 3, (int64_t[]){6, 11, 5});
    einsum_check("bij,jk->bik", 3, (int64_t[]){4, 9, 13}, 2, (int64_t[]){13, 8});
    einsum_check("i,j->ij", 1, (int64_t[]){33}, 1, (int64_t[]){17});
    /* many batches: the per-batch products spread over the pool */
    einsum_check("bij,bkj->bik", 3, (int64_t[]){64, 12, 20}, 3, (int64_t[]){64, 10, 20});
    /* one big product: SGEMM threads internally */
    einsum_check("mk,nk->mn", 2, (int64_t[]){300, 200}, 2, (int64_t[]){250, 200});
}

static void test_einsum_rejects(void **s) {
    (void)s;
    float x[12] = {0};
    const char *bad[] = {"ij,jk->ik", "ij->ii", "i.j->ij", "ij->iz", "ij->i,j", "i$->i"};
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        op_call c = {0};
        add_in(&c, AK_ELEM_F32, 2, (int64_t[]){3, 4}, x);
        attr_str(&c, "equation", bad[k]);
        assert_int_equal(call_op(&c, "Einsum", 12, 1), AK_ERR_INVALID_MODEL);
        call_free(&c);
    }
    op_call c = {0}; /* j is 4 in one operand and 3 in the other */
    add_in(&c, AK_ELEM_F32, 2, (int64_t[]){3, 4}, x);
    add_in(&c, AK_ELEM_F32, 2, (int64_t[]){3, 4}, x);
    attr_str(&c, "equation", "ij,jk->ik");
    assert_int_equal(call_op(&c, "Einsum", 12, 1), AK_ERR_INVALID_MODEL);
    call_free(&c);
}

/* ---- recurrent nets ---------------------------------------------------------------- */

enum { T = 6, NB = 3, IN = 5, H = 4 };

/* Runs `kind` over X [t, NB, IN] with one direction's weights; outputs Y and Y_h. */
static void rnn_call(op_call *c, const char *kind, int gates, const char *dir, int nd,
                     float *x, int64_t t, float *w, float *r, float *b, int32_t *lens) {
    memset(c, 0, sizeof *c);
    add_in(c, AK_ELEM_F32, 3, (int64_t[]){t, NB, IN}, x);
    add_in(c, AK_ELEM_F32, 3, (int64_t[]){nd, gates * H, IN}, w);
    add_in(c, AK_ELEM_F32, 3, (int64_t[]){nd, gates * H, H}, r);
    add_in(c, AK_ELEM_F32, 2, (int64_t[]){nd, 2 * gates * H}, b);
    if (lens) add_in(c, AK_ELEM_I32, 1, (int64_t[]){NB}, lens);
    attr_int(c, "hidden_size", H);
    attr_str(c, "direction", dir);
    assert_int_equal(call_op(c, kind, 14, 2), AK_OK);
}

/* The reverse half of a bidirectional run equals a forward run over the time-reversed
 * input; with sequence_lens, entry b's result equals a run over its first lens[b] steps. */
static void rnn_directions(const char *kind, int gates) {
    size_t nx = T * NB * IN, nw = (size_t)gates * H * IN, nr = (size_t)gates * H * H;
    size_t nbias = 2 * (size_t)gates * H;
    float *x = op_random_floats(nx, -1.0f, 1.0f, 3), *w = op_random_floats(2 * nw, -1.0f, 1.0f, 4);
    float *r = op_random_floats(2 * nr, -1.0f, 1.0f, 5);
    float *b = op_random_floats(2 * nbias, -1.0f, 1.0f, 6), *xr = malloc(nx * sizeof *xr);
    assert_non_null(xr);
    for (int t = 0; t < T; t++)
        memcpy(xr + (size_t)t * NB * IN, x + (size_t)(T - 1 - t) * NB * IN,
               NB * IN * sizeof(float));
    op_call bi, fw;
    rnn_call(&bi, kind, gates, "bidirectional", 2, x, T, w, r, b, NULL);
    rnn_call(&fw, kind, gates, "forward", 1, xr, T, w + nw, r + nr, b + nbias, NULL);
    const float *ybi = bi.out[0].data, *yfw = fw.out[0].data;
    for (int t = 0; t < T; t++) /* Y[t, 1] of bidi = Y[T-1-t, 0] of the reversed run */
        for (int i = 0; i < NB * H; i++)
            op_assert_close(ybi[((size_t)t * 2 + 1) * NB * H + i],
                            yfw[(size_t)(T - 1 - t) * NB * H + i], 1e-5, 1e-6);
    for (int i = 0; i < NB * H; i++)
        op_assert_close(((float *)bi.out[1].data)[NB * H + i], ((float *)fw.out[1].data)[i], 1e-5,
                        1e-6);
    call_free(&bi);
    call_free(&fw);

    int32_t lens[NB] = {T, 2, 0};
    op_call rv, part;
    rnn_call(&rv, kind, gates, "reverse", 1, x, T, w, r, b, lens);
    rnn_call(&part, kind, gates, "reverse", 1, x, 2, w, r, b, NULL); /* the first 2 steps */
    const float *y = rv.out[0].data, *yp = part.out[0].data, *yh = rv.out[1].data;
    for (int t = 0; t < T; t++)
        for (int j = 0; j < H; j++) {
            float y1 = y[((size_t)t * NB + 1) * H + j], y2 = y[((size_t)t * NB + 2) * H + j];
            if (t < 2) op_assert_close(y1, yp[((size_t)t * NB + 1) * H + j], 1e-5, 1e-6);
            else assert_true(y1 == 0.0f);
            assert_true(y2 == 0.0f); /* length 0: no output, state stays the initial zeros */
        }
    for (int j = 0; j < H; j++) {
        op_assert_close(yh[H + j], ((float *)part.out[1].data)[H + j], 1e-5, 1e-6);
        assert_true(yh[2 * H + j] == 0.0f);
    }
    call_free(&rv);
    call_free(&part);
    int32_t too_long[NB] = {T + 1, 1, 1};
    op_call bad;
    memset(&bad, 0, sizeof bad);
    add_in(&bad, AK_ELEM_F32, 3, (int64_t[]){T, NB, IN}, x);
    add_in(&bad, AK_ELEM_F32, 3, (int64_t[]){1, gates * H, IN}, w);
    add_in(&bad, AK_ELEM_F32, 3, (int64_t[]){1, gates * H, H}, r);
    add_in(&bad, AK_ELEM_F32, 2, (int64_t[]){1, 2 * gates * H}, b);
    add_in(&bad, AK_ELEM_I32, 1, (int64_t[]){NB}, too_long);
    assert_int_equal(call_op(&bad, kind, 14, 2), AK_ERR_INVALID_ARG);
    call_free(&bad);
    free(x), free(w), free(r), free(b), free(xr);
}

static void test_rnn_directions(void **s) {
    (void)s;
    rnn_directions("RNN", 1);
    rnn_directions("GRU", 3);
    rnn_directions("LSTM", 4);
}

/* ---- Resize ------------------------------------------------------------------------ */

static void resize_compare(const char *mode, const char *coord, const float *scales) {
    int64_t dims[4] = {2, 3, 37, 29};
    size_t n = 2 * 3 * 37 * 29;
    float *x = op_random_floats(n, -1.0f, 1.0f, 7);
    double *x64 = to_double(x, n);
    op_call f = {0}, g = {0};
    op_call *calls[2] = {&f, &g};
    for (int k = 0; k < 2; k++) {
        add_in(calls[k], k ? AK_ELEM_F64 : AK_ELEM_F32, 4, dims, k ? (void *)x64 : (void *)x);
        add_in(calls[k], AK_ELEM_F32, -1, NULL, NULL); /* roi omitted */
        add_in(calls[k], AK_ELEM_F32, 1, (int64_t[]){4}, (void *)scales);
        attr_str(calls[k], "mode", mode);
        attr_str(calls[k], "coordinate_transformation_mode", coord);
        assert_int_equal(call_op(calls[k], "Resize", 13, 1), AK_OK);
    }
    assert_int_equal(f.out[0].count, g.out[0].count);
    for (uint64_t i = 0; i < f.out[0].count; i++)
        op_assert_close(((float *)f.out[0].data)[i], ((double *)g.out[0].data)[i], 1e-5, 1e-6);
    call_free(&f);
    call_free(&g);
    free(x), free(x64);
}

static void test_resize_paths(void **s) {
    (void)s;
    resize_compare("linear", "half_pixel", (float[]){1, 1, 2.5f, 0.5f});
    resize_compare("cubic", "align_corners", (float[]){1, 1, 0.7f, 3.0f});
    resize_compare("nearest", "asymmetric", (float[]){1, 2, 1.5f, 0.75f});
    resize_compare("linear", "pytorch_half_pixel", (float[]){2, 1, 1, 1.3f});
}

static void test_resize_opset18(void **s) {
    (void)s;
    float x[6] = {1, 2, 3, 4, 5, 6}; /* [1, 2, 3] */
    int64_t axes[2] = {2, 1}, sizes[2] = {6, 6};
    op_call c = {0};
    add_in(&c, AK_ELEM_F32, 3, (int64_t[]){1, 2, 3}, x);
    add_in(&c, AK_ELEM_F32, -1, NULL, NULL);
    add_in(&c, AK_ELEM_F32, -1, NULL, NULL);
    add_in(&c, AK_ELEM_I64, 1, (int64_t[]){2}, sizes);
    attr_ints(&c, "axes", axes, 2);
    attr_str(&c, "keep_aspect_ratio_policy", "not_larger"); /* scale min(6/3, 6/2) = 2 */
    attr_str(&c, "coordinate_transformation_mode", "asymmetric");
    assert_int_equal(call_op(&c, "Resize", 18, 1), AK_OK);
    assert_int_equal(c.out[0].rank, 3);
    assert_true(c.out[0].dims[0] == 1 && c.out[0].dims[1] == 4 && c.out[0].dims[2] == 6);
    const float *y = c.out[0].data;
    assert_true(y[0] == 1 && y[1] == 1 && y[2] == 2 && y[5] == 3 && y[6] == 1 && y[12] == 4);
    assert_true(y[23] == 6);
    call_free(&c);
}

static void test_resize_rejects(void **s) {
    (void)s;
    float x[4] = {0}, neg[4] = {1, 1, -2, 1};
    op_call c = {0};
    add_in(&c, AK_ELEM_F32, 4, (int64_t[]){1, 1, 2, 2}, x);
    add_in(&c, AK_ELEM_F32, -1, NULL, NULL);
    add_in(&c, AK_ELEM_F32, 1, (int64_t[]){4}, neg);
    assert_int_equal(call_op(&c, "Resize", 13, 1), AK_ERR_INVALID_MODEL);
    call_free(&c);
    memset(&c, 0, sizeof c); /* tf_crop_and_resize without roi */
    float ok[4] = {1, 1, 2, 2};
    add_in(&c, AK_ELEM_F32, 4, (int64_t[]){1, 1, 2, 2}, x);
    add_in(&c, AK_ELEM_F32, -1, NULL, NULL);
    add_in(&c, AK_ELEM_F32, 1, (int64_t[]){4}, ok);
    attr_str(&c, "coordinate_transformation_mode", "tf_crop_and_resize");
    assert_int_equal(call_op(&c, "Resize", 13, 1), AK_ERR_INVALID_MODEL);
    call_free(&c);
    memset(&c, 0, sizeof c); /* scales of the wrong length */
    add_in(&c, AK_ELEM_F32, 4, (int64_t[]){1, 1, 2, 2}, x);
    add_in(&c, AK_ELEM_F32, -1, NULL, NULL);
    add_in(&c, AK_ELEM_F32, 1, (int64_t[]){3}, ok);
    assert_int_equal(call_op(&c, "Resize", 13, 1), AK_ERR_INVALID_MODEL);
    call_free(&c);
}

/* ---- MaxUnpool, RoiAlign ----------------------------------------------------------- */

static void test_index_checks(void **s) {
    (void)s;
    float x[4] = {1, 2, 3, 4};
    int64_t idx[4] = {0, 3, 5, 16}; /* 16 is past the 4x4 output */
    int64_t kernel[2] = {2, 2};
    op_call c = {0};
    add_in(&c, AK_ELEM_F32, 4, (int64_t[]){1, 1, 2, 2}, x);
    add_in(&c, AK_ELEM_I64, 4, (int64_t[]){1, 1, 2, 2}, idx);
    attr_ints(&c, "kernel_shape", kernel, 2);
    attr_ints(&c, "strides", kernel, 2);
    assert_int_equal(call_op(&c, "MaxUnpool", 11, 1), AK_ERR_INVALID_ARG);
    call_free(&c);

    float img[16] = {0}, rois[4] = {0, 0, 2, 2};
    int64_t batch[1] = {1}; /* only image 0 exists */
    memset(&c, 0, sizeof c);
    add_in(&c, AK_ELEM_F32, 4, (int64_t[]){1, 1, 4, 4}, img);
    add_in(&c, AK_ELEM_F32, 2, (int64_t[]){1, 4}, rois);
    add_in(&c, AK_ELEM_I64, 1, (int64_t[]){1}, batch);
    assert_int_equal(call_op(&c, "RoiAlign", 16, 1), AK_ERR_INVALID_ARG);
    call_free(&c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_einsum_gemm_layouts), cmocka_unit_test(test_einsum_rejects),
        cmocka_unit_test(test_rnn_directions),      cmocka_unit_test(test_resize_paths),
        cmocka_unit_test(test_resize_opset18),      cmocka_unit_test(test_resize_rejects),
        cmocka_unit_test(test_index_checks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
