/* Unit tests of the tensor operator family (src/infer/ops/tensor/), driving the
 * operator definitions directly (reshape, then run): the opset forms the ONNX node tests
 * do not reach (Slice/Squeeze/Split attributes, Pad axes and wrap, Split num_outputs),
 * Transpose against a naive reference on every element size and the tiled and threaded
 * paths, exact int64 Range at the extremes, scatter reductions, and hostile indices and
 * shapes that must fail cleanly. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define NAN_F (__builtin_nanf(""))

#include "infer/runtime/op.h"

/* ---- harness ------------------------------------------------------------------------ */

enum { MAX_IO = 8, MAX_ATTRS = 8 };

typedef struct op_call {
    const char *op;
    int64_t opset;
    ak__ir_attr attrs[MAX_ATTRS];
    uint32_t num_attrs;
    const ak__tensor *in[MAX_IO];
    uint32_t num_in, num_out;
    ak__tensor out[MAX_IO];
    void *owned[MAX_IO];
} op_call;

static ak__tensor tensor(ak_elem_type type, int rank, const int64_t *dims, const void *data) {
    ak__tensor t = {0};
    assert_int_equal(ak__tensor_set_shape(&t, type, rank, dims, "test"), AK_OK);
    t.data = (void *)data;
    return t;
}

static void attr_int(op_call *c, const char *name, int64_t v) {
    ak__ir_attr *a = &c->attrs[c->num_attrs++];
    *a = (ak__ir_attr){.name = name, .type = AK_ATTR_INT};
    a->u.i = v;
}

static void attr_ints(op_call *c, const char *name, const int64_t *v, size_t n) {
    ak__ir_attr *a = &c->attrs[c->num_attrs++];
    *a = (ak__ir_attr){.name = name, .type = AK_ATTR_INTS, .count = n};
    a->u.ints = v;
}

static void attr_str(op_call *c, const char *name, const char *v) {
    ak__ir_attr *a = &c->attrs[c->num_attrs++];
    *a = (ak__ir_attr){.name = name, .type = AK_ATTR_STRING};
    a->u.s.data = v;
    a->u.s.len = strlen(v);
}

static ak_status call_with(const ak__op_def *def, ak__op_ctx *ctx_in, op_call *c);

/* Runs the operator the way the session does (create, reshape, run, destroy); outputs
 * get fresh buffers (or input 0's bytes for aliasing operators). */
static ak_status call(op_call *c) {
    ak__ir_node n = {.name = "t", .op_type = c->op, .domain = "", .opset = c->opset,
                     .num_inputs = c->num_in, .num_outputs = c->num_out,
                     .num_attrs = c->num_attrs, .attrs = c->attrs};
    const ak__op_def *def = ak__op_find("", c->op, c->opset);
    assert_non_null(def);
    ak_threadpool *pool;
    assert_int_equal(ak_threadpool_global(&pool), AK_OK);
    ak__tensor *outs[MAX_IO];
    for (uint32_t o = 0; o < c->num_out; o++) outs[o] = &c->out[o];
    const ak__tensor *consts[MAX_IO] = {0};
    void *op_state = NULL;
    if (def->create) {
        ak_status made = def->create(&n, consts, &op_state);
        if (made != AK_OK) return made;
    }
    ak__op_ctx ctx = {&n, op_state, c->num_in, c->num_out, c->in, outs, pool, 0, NULL, 0, NULL,
                      NULL};
    ak_status st = call_with(def, &ctx, c);
    if (def->destroy) def->destroy(op_state);
    return st;
}

static ak_status call_with(const ak__op_def *def, ak__op_ctx *ctx_in, op_call *c) {
    ak__op_ctx ctx = *ctx_in;
    ak_status st = def->reshape(&ctx);
    if (st != AK_OK) return st;
    for (uint32_t o = 0; o < c->num_out; o++) {
        if (o == 0 && (def->flags & AK_OP_ALIAS_INPUT0)) {
            c->out[o].data = c->in[0]->data;
            continue;
        }
        c->owned[o] = malloc(ak__tensor_nbytes(&c->out[o]) + 1);
        assert_non_null(c->owned[o]);
        c->out[o].data = c->owned[o];
    }
    void *ws = malloc(ctx.workspace_bytes + 1);
    ctx.workspace = ws;
    st = def->run ? def->run(&ctx) : AK_OK;
    free(ws);
    return st;
}

static void done(op_call *c) {
    for (uint32_t o = 0; o < MAX_IO; o++) free(c->owned[o]);
    memset(c, 0, sizeof *c);
}

static void assert_dims(const ak__tensor *t, int rank, const int64_t *dims) {
    assert_int_equal(t->rank, rank);
    for (int d = 0; d < rank; d++) assert_int_equal(t->dims[d], dims[d]);
}

static void assert_i64(const ak__tensor *t, const int64_t *want, size_t n) {
    assert_int_equal(t->type, AK_ELEM_I64);
    assert_int_equal(t->count, n);
    for (size_t i = 0; i < n; i++) assert_int_equal(((const int64_t *)t->data)[i], want[i]);
}

static int64_t iota[64] = {0};

static int setup(void **state) {
    (void)state;
    for (int i = 0; i < 64; i++) iota[i] = i;
    return 0;
}

/* ---- Transpose ---------------------------------------------------------------------- */

/* out[i] by walking the output in row-major order and reading through the permutation */
static void naive_transpose(const unsigned char *x, unsigned char *y, size_t elem, int rank,
                            const int64_t *dims, const int *perm) {
    int64_t strides[8], idx[8] = {0}, odims[8], count = 1;
    for (int d = rank - 1, s = 1; d >= 0; d--) {
        strides[d] = s;
        s *= (int)dims[d];
    }
    for (int d = 0; d < rank; d++) {
        odims[d] = dims[perm[d]];
        count *= odims[d];
    }
    for (int64_t i = 0; i < count; i++) {
        int64_t off = 0;
        for (int d = 0; d < rank; d++) off += idx[d] * strides[perm[d]];
        memcpy(y + (size_t)i * elem, x + (size_t)off * elem, elem);
        for (int d = rank - 1; d >= 0 && ++idx[d] == odims[d]; d--) idx[d] = 0;
    }
}

static void check_transpose(ak_elem_type type, int rank, const int64_t *dims, const int *perm) {
    size_t elem = ak_elem_type_size(type), count = 1;
    for (int d = 0; d < rank; d++) count *= (size_t)dims[d];
    unsigned char *x = malloc(count * elem), *want = malloc(count * elem);
    for (size_t i = 0; i < count * elem; i++) x[i] = (unsigned char)(i * 131 + i / 7);
    naive_transpose(x, want, elem, rank, dims, perm);
    op_call c = {.op = "Transpose", .opset = 13, .num_in = 1, .num_out = 1};
    int64_t p64[8];
    for (int d = 0; d < rank; d++) p64[d] = perm[d];
    attr_ints(&c, "perm", p64, (size_t)rank);
    ak__tensor tx = tensor(type, rank, dims, x);
    c.in[0] = &tx;
    assert_int_equal(call(&c), AK_OK);
    assert_memory_equal(c.out[0].data, want, count * elem);
    done(&c);
    free(x);
    free(want);
}

static void test_transpose_matches_reference(void **state) {
    (void)state;
    static const ak_elem_type types[] = {AK_ELEM_U8, AK_ELEM_F16, AK_ELEM_F32, AK_ELEM_I64,
                                         AK_ELEM_C128};
    static const int perms3[][3] = {{2, 0, 1}, {0, 2, 1}, {1, 0, 2}, {2, 1, 0}, {1, 2, 0}};
    const int64_t d3[] = {3, 67, 131};
    for (size_t t = 0; t < sizeof types / sizeof *types; t++)
        for (size_t p = 0; p < sizeof perms3 / sizeof *perms3; p++)
            check_transpose(types[t], 3, d3, perms3[p]);
    /* every permutation of a small 4-D shape */
    const int64_t d4[] = {2, 3, 4, 5};
    int perm[4];
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++)
            for (int c = 0; c < 4; c++)
                for (int d = 0; d < 4; d++) {
                    if (a == b || a == c || a == d || b == c || b == d || c == d) continue;
                    perm[0] = a, perm[1] = b, perm[2] = c, perm[3] = d;
                    check_transpose(AK_ELEM_F32, 4, d4, perm);
                }
    /* big enough for the thread pool, on the tiled and the row paths */
    const int64_t big[] = {8, 257, 300};
    const int tiled[] = {0, 2, 1}, rows[] = {1, 0, 2};
    check_transpose(AK_ELEM_F32, 3, big, tiled);
    check_transpose(AK_ELEM_F32, 3, big, rows);
}

/* ---- Slice -------------------------------------------------------------------------- */

static void test_slice_attribute_form(void **state) {
    (void)state;
    const int64_t dims[] = {4, 5}, starts[] = {1, 0}, ends[] = {1000, -1}, axes[] = {0, 1};
    op_call c = {.op = "Slice", .opset = 9, .num_in = 1, .num_out = 1};
    attr_ints(&c, "starts", starts, 2);
    attr_ints(&c, "ends", ends, 2);
    attr_ints(&c, "axes", axes, 2);
    ak__tensor x = tensor(AK_ELEM_I64, 2, dims, iota);
    c.in[0] = &x;
    assert_int_equal(call(&c), AK_OK);
    const int64_t want_dims[] = {3, 4}, want[] = {5, 6, 7, 8, 10, 11, 12, 13, 15, 16, 17, 18};
    assert_dims(&c.out[0], 2, want_dims);
    assert_i64(&c.out[0], want, 12);
    done(&c);
}

static ak_status slice13(const int64_t *st, const int64_t *en, const int64_t *step,
                         op_call *c, ak__tensor *ts) {
    const int64_t one = 1, ten = 10;
    ts[0] = tensor(AK_ELEM_I64, 1, &ten, iota);
    ts[1] = tensor(AK_ELEM_I64, 1, &one, st);
    ts[2] = tensor(AK_ELEM_I64, 1, &one, en);
    ts[3] = tensor(AK_ELEM_I64, 1, &one, step);
    *c = (op_call){.op = "Slice", .opset = 13, .num_in = 5, .num_out = 1};
    c->in[0] = &ts[0], c->in[1] = &ts[1], c->in[2] = &ts[2], c->in[4] = &ts[3];
    return call(c);
}

static void test_slice_negative_steps_and_clamping(void **state) {
    (void)state;
    op_call c;
    ak__tensor ts[4];
    const int64_t big = INT64_MAX, small = INT64_MIN, m3 = -3, m100 = -100, m1 = -1, z = 0;
    assert_int_equal(slice13(&big, &small, &m3, &c, ts), AK_OK); /* a[9::-3] */
    const int64_t want[] = {9, 6, 3, 0};
    assert_i64(&c.out[0], want, 4);
    done(&c);
    assert_int_equal(slice13(&m100, &small, &m1, &c, ts), AK_OK); /* a[-100::-1]: empty */
    assert_int_equal(c.out[0].count, 0);
    done(&c);
    assert_int_equal(slice13(&z, &big, &z, &c, ts), AK_ERR_INVALID_MODEL); /* step 0 */
    done(&c);
    const int64_t st = INT64_MIN + 1;
    assert_int_equal(slice13(&z, &big, &st, &c, ts), AK_ERR_INVALID_MODEL); /* huge step */
    done(&c);
}

/* ---- Pad ---------------------------------------------------------------------------- */

static void pad18(const char *mode, int64_t before, int64_t after, const int64_t *want,
                  size_t n) {
    const int64_t dims[] = {2, 3}, two = 2, one = 1, axes[] = {-1};
    const int64_t x[] = {1, 2, 3, 4, 5, 6}, pads[] = {before, after};
    ak__tensor tx = tensor(AK_ELEM_I64, 2, dims, x), tp = tensor(AK_ELEM_I64, 1, &two, pads),
               ta = tensor(AK_ELEM_I64, 1, &one, axes);
    op_call c = {.op = "Pad", .opset = 18, .num_in = 4, .num_out = 1};
    attr_str(&c, "mode", mode);
    c.in[0] = &tx, c.in[1] = &tp, c.in[3] = &ta;
    assert_int_equal(call(&c), AK_OK);
    const int64_t want_dims[] = {2, (int64_t)n};
    assert_dims(&c.out[0], 2, want_dims);
    for (size_t r = 0; r < 2; r++)
        for (size_t i = 0; i < n; i++)
            assert_int_equal(((int64_t *)c.out[0].data)[r * n + i], want[i] + (int64_t)r * 3);
    done(&c);
}

static void test_pad_modes_and_axes(void **state) {
    (void)state;
    /* numpy.pad([1, 2, 3], ...) in each mode (row 2 is the same plus 3) */
    const int64_t reflect[] = {3, 2, 1, 2, 3, 2, 1}, edge[] = {1, 1, 1, 2, 3, 3, 3},
                  wrap[] = {2, 3, 1, 2, 3, 1, 2};
    pad18("reflect", 2, 2, reflect, 7);
    pad18("edge", 2, 2, edge, 7);
    pad18("wrap", 2, 2, wrap, 7);
    const int64_t reflect_far[] = {2, 1, 2, 3, 2, 1, 2, 3, 2, 1, 2, 3};
    const int64_t edge_far[] = {1, 1, 1, 1, 1, 1, 2, 3, 3, 3, 3, 3};
    pad18("reflect", 5, 4, reflect_far, 12);
    pad18("edge", 5, 4, edge_far, 12);
    const int64_t crop[] = {2}; /* negative pads remove elements */
    pad18("constant", -1, -1, crop, 1);
}

static void test_pad_attribute_form_and_value(void **state) {
    (void)state;
    const int64_t dims[] = {1, 2}, pads[] = {0, 1, 1, 0};
    const float x[] = {1.f, 2.f};
    op_call c = {.op = "Pad", .opset = 7, .num_in = 1, .num_out = 1};
    attr_ints(&c, "pads", pads, 4);
    c.attrs[c.num_attrs] = (ak__ir_attr){.name = "value", .type = AK_ATTR_FLOAT};
    c.attrs[c.num_attrs++].u.f = 9.f;
    ak__tensor tx = tensor(AK_ELEM_F32, 2, dims, x);
    c.in[0] = &tx;
    assert_int_equal(call(&c), AK_OK);
    const float want[] = {9.f, 1.f, 2.f, 9.f, 9.f, 9.f};
    assert_int_equal(c.out[0].count, 6);
    assert_memory_equal(c.out[0].data, want, sizeof want);
    done(&c);
    /* pads that remove more than the axis holds */
    const int64_t bad[] = {0, -2, 0, -1};
    c = (op_call){.op = "Pad", .opset = 7, .num_in = 1, .num_out = 1};
    attr_ints(&c, "pads", bad, 4);
    c.in[0] = &tx;
    assert_int_equal(call(&c), AK_ERR_INVALID_MODEL);
    done(&c);
}

/* ---- Split, Squeeze, Unsqueeze forms ------------------------------------------------ */

static void test_split_forms(void **state) {
    (void)state;
    const int64_t five = 5;
    ak__tensor x = tensor(AK_ELEM_I64, 1, &five, iota);
    op_call c = {.op = "Split", .opset = 18, .num_in = 1, .num_out = 3};
    attr_int(&c, "num_outputs", 3);
    c.in[0] = &x;
    assert_int_equal(call(&c), AK_OK); /* 5 into 3: 2, 2, 1 */
    const int64_t w0[] = {0, 1}, w1[] = {2, 3}, w2[] = {4};
    assert_i64(&c.out[0], w0, 2);
    assert_i64(&c.out[1], w1, 2);
    assert_i64(&c.out[2], w2, 1);
    done(&c);
    const int64_t split[] = {1, 4};
    c = (op_call){.op = "Split", .opset = 11, .num_in = 1, .num_out = 2};
    attr_ints(&c, "split", split, 2);
    c.in[0] = &x;
    assert_int_equal(call(&c), AK_OK);
    const int64_t v0[] = {0}, v1[] = {1, 2, 3, 4};
    assert_i64(&c.out[0], v0, 1);
    assert_i64(&c.out[1], v1, 4);
    done(&c);
    c = (op_call){.op = "Split", .opset = 13, .num_in = 1, .num_out = 3};
    c.in[0] = &x;
    assert_int_equal(call(&c), AK_ERR_INVALID_MODEL); /* 5 is not 3 equal parts */
    done(&c);
}

static void test_squeeze_unsqueeze_attribute_forms(void **state) {
    (void)state;
    const int64_t dims[] = {1, 3, 1, 2}, axes[] = {0, -2}, bad[] = {1};
    ak__tensor x = tensor(AK_ELEM_I64, 4, dims, iota);
    op_call c = {.op = "Squeeze", .opset = 11, .num_in = 1, .num_out = 1};
    attr_ints(&c, "axes", axes, 2);
    c.in[0] = &x;
    assert_int_equal(call(&c), AK_OK);
    const int64_t sq[] = {3, 2};
    assert_dims(&c.out[0], 2, sq);
    assert_ptr_equal(c.out[0].data, x.data); /* aliases its input */
    done(&c);
    c = (op_call){.op = "Squeeze", .opset = 11, .num_in = 1, .num_out = 1};
    attr_ints(&c, "axes", bad, 1);
    c.in[0] = &x;
    assert_int_equal(call(&c), AK_ERR_INVALID_MODEL); /* axis 1 has size 3 */
    done(&c);
    const int64_t uaxes[] = {-1, 0}, dup[] = {0, -6};
    c = (op_call){.op = "Unsqueeze", .opset = 11, .num_in = 1, .num_out = 1};
    attr_ints(&c, "axes", uaxes, 2);
    c.in[0] = &x;
    assert_int_equal(call(&c), AK_OK);
    const int64_t us[] = {1, 1, 3, 1, 2, 1};
    assert_dims(&c.out[0], 6, us);
    done(&c);
    c = (op_call){.op = "Unsqueeze", .opset = 11, .num_in = 1, .num_out = 1};
    attr_ints(&c, "axes", dup, 2);
    c.in[0] = &x;
    assert_int_equal(call(&c), AK_ERR_INVALID_MODEL); /* 0 and -6 name the same axis */
    done(&c);
}

static void test_reshape_rules(void **state) {
    (void)state;
    const int64_t dims[] = {2, 0, 3}, n3 = 3;
    ak__tensor x = tensor(AK_ELEM_F32, 3, dims, NULL);
    struct {
        int64_t shape[3];
        int allowzero;
        ak_status st;
        int64_t want[3];
    } cases[] = {
        {{0, 3, 0}, 1, AK_OK, {0, 3, 0}},        /* allowzero: 0 is a dim */
        {{3, 0, 2}, 0, AK_OK, {3, 0, 2}},        /* 0 copies input dim 1 (0) */
        {{-1, 2, -1}, 0, AK_ERR_INVALID_MODEL, {0}},
        {{-1, 0, 6}, 0, AK_ERR_INVALID_MODEL, {0}}, /* -1 with a zero-sized rest */
        {{5, 0, 0}, 1, AK_OK, {5, 0, 0}},        /* 0 elements into 0 elements */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        ak__tensor s = tensor(AK_ELEM_I64, 1, &n3, cases[i].shape);
        op_call c = {.op = "Reshape", .opset = 14, .num_in = 2, .num_out = 1};
        attr_int(&c, "allowzero", cases[i].allowzero);
        c.in[0] = &x, c.in[1] = &s;
        assert_int_equal(call(&c), cases[i].st);
        if (cases[i].st == AK_OK) assert_dims(&c.out[0], 3, cases[i].want);
        done(&c);
    }
    /* 6 elements: a 0 past the input rank, and a count mismatch */
    const int64_t d2[] = {2, 3}, n4 = 4, past[] = {1, 1, 6, 0}, wrong[] = {1, 1, 1, 5};
    ak__tensor y = tensor(AK_ELEM_F32, 2, d2, NULL);
    const int64_t *bad[] = {past, wrong};
    for (int i = 0; i < 2; i++) {
        ak__tensor s = tensor(AK_ELEM_I64, 1, &n4, bad[i]);
        op_call c = {.op = "Reshape", .opset = 13, .num_in = 2, .num_out = 1};
        c.in[0] = &y, c.in[1] = &s;
        assert_int_equal(call(&c), AK_ERR_INVALID_MODEL);
        done(&c);
    }
}

/* ---- indexing ----------------------------------------------------------------------- */

static ak_status gather(int64_t index, ak_elem_type itype, int64_t *got) {
    const int64_t five = 5, one = 1;
    int32_t i32 = (int32_t)index;
    ak__tensor x = tensor(AK_ELEM_I64, 1, &five, iota + 10),
               i = tensor(itype, 1, &one, itype == AK_ELEM_I64 ? (const void *)&index : &i32);
    op_call c = {.op = "Gather", .opset = 13, .num_in = 2, .num_out = 1};
    c.in[0] = &x, c.in[1] = &i;
    ak_status st = call(&c);
    if (st == AK_OK) *got = *(int64_t *)c.out[0].data;
    done(&c);
    return st;
}

static void test_gather_indices_checked(void **state) {
    (void)state;
    int64_t v = 0;
    assert_int_equal(gather(-5, AK_ELEM_I64, &v), AK_OK);
    assert_int_equal(v, 10);
    assert_int_equal(gather(4, AK_ELEM_I32, &v), AK_OK);
    assert_int_equal(v, 14);
    assert_int_equal(gather(5, AK_ELEM_I64, &v), AK_ERR_INVALID_ARG);
    assert_int_equal(gather(-6, AK_ELEM_I32, &v), AK_ERR_INVALID_ARG);
    assert_int_equal(gather(INT64_MIN, AK_ELEM_I64, &v), AK_ERR_INVALID_ARG);
    assert_int_equal(gather(0, AK_ELEM_F32, &v), AK_ERR_INVALID_MODEL); /* index type */
}

static void test_element_and_nd_indices_checked(void **state) {
    (void)state;
    const int64_t d22[] = {2, 2}, bad[] = {0, 2, 1, 0}, d21[] = {2, 1}, nd_bad[] = {0, 7};
    ak__tensor x = tensor(AK_ELEM_I64, 2, d22, iota), ib = tensor(AK_ELEM_I64, 2, d22, bad);
    op_call c = {.op = "GatherElements", .opset = 13, .num_in = 2, .num_out = 1};
    attr_int(&c, "axis", 1);
    c.in[0] = &x, c.in[1] = &ib;
    assert_int_equal(call(&c), AK_ERR_INVALID_ARG);
    done(&c);
    c = (op_call){.op = "ScatterElements", .opset = 16, .num_in = 3, .num_out = 1};
    c.in[0] = &x, c.in[1] = &ib, c.in[2] = &x;
    assert_int_equal(call(&c), AK_ERR_INVALID_ARG);
    done(&c);
    /* GatherND with batch_dims 1: one index per batch row; 7 is out of range */
    ak__tensor in = tensor(AK_ELEM_I64, 2, d21, nd_bad);
    c = (op_call){.op = "GatherND", .opset = 13, .num_in = 2, .num_out = 1};
    attr_int(&c, "batch_dims", 1);
    c.in[0] = &x, c.in[1] = &in;
    assert_int_equal(call(&c), AK_ERR_INVALID_ARG);
    done(&c);
    const int64_t ok[] = {1, -1};
    ak__tensor iok = tensor(AK_ELEM_I64, 2, d21, ok);
    c = (op_call){.op = "GatherND", .opset = 13, .num_in = 2, .num_out = 1};
    attr_int(&c, "batch_dims", 1);
    c.in[0] = &x, c.in[1] = &iok;
    assert_int_equal(call(&c), AK_OK);
    const int64_t want[] = {1, 3};
    assert_i64(&c.out[0], want, 2);
    done(&c);
    /* ScatterND with an out-of-range tuple */
    const int64_t d11[] = {1, 1}, d12[] = {1, 2}, far[] = {2}, upd[] = {9, 9};
    ak__tensor it = tensor(AK_ELEM_I64, 2, d11, far), tu = tensor(AK_ELEM_I64, 2, d12, upd);
    c = (op_call){.op = "ScatterND", .opset = 16, .num_in = 3, .num_out = 1};
    c.in[0] = &x, c.in[1] = &it, c.in[2] = &tu;
    assert_int_equal(call(&c), AK_ERR_INVALID_ARG);
    done(&c);
}

static void test_scatter_elements_reductions(void **state) {
    (void)state;
    const int64_t three = 3, four = 4, idx[] = {0, 2, 0, 2};
    const float data[] = {1.f, 2.f, 3.f}, upd[] = {5.f, -1.f, 0.5f, 7.f};
    ak__tensor x = tensor(AK_ELEM_F32, 1, &three, data), i = tensor(AK_ELEM_I64, 1, &four, idx),
               u = tensor(AK_ELEM_F32, 1, &four, upd);
    static const struct {
        const char *red;
        int64_t opset;
        float want[3];
    } cases[] = {{"add", 16, {6.5f, 2.f, 9.f}},
                 {"mul", 16, {2.5f, 2.f, -21.f}},
                 {"max", 18, {5.f, 2.f, 7.f}},
                 {"min", 18, {0.5f, 2.f, -1.f}}};
    for (size_t k = 0; k < 4; k++) {
        op_call c = {.op = "ScatterElements", .opset = cases[k].opset, .num_in = 3, .num_out = 1};
        attr_str(&c, "reduction", cases[k].red);
        c.in[0] = &x, c.in[1] = &i, c.in[2] = &u;
        assert_int_equal(call(&c), AK_OK);
        assert_memory_equal(c.out[0].data, cases[k].want, sizeof cases[k].want);
        done(&c);
    }
}

static void test_onehot_out_of_range_is_off(void **state) {
    (void)state;
    const int64_t three = 3, two = 2, one = 1, ind[] = {-1, 3, 0}, depth = 3;
    const float vals[] = {0.f, 1.f};
    ak__tensor ti = tensor(AK_ELEM_I64, 1, &three, ind), td = tensor(AK_ELEM_I64, 1, &one, &depth),
               tv = tensor(AK_ELEM_F32, 1, &two, vals);
    op_call c = {.op = "OneHot", .opset = 11, .num_in = 3, .num_out = 1};
    c.in[0] = &ti, c.in[1] = &td, c.in[2] = &tv;
    assert_int_equal(call(&c), AK_OK);
    const float want[] = {0, 0, 1, 0, 0, 0, 1, 0, 0};
    assert_memory_equal(c.out[0].data, want, sizeof want);
    done(&c);
}

/* ---- Range, Dropout, hostile shapes ------------------------------------------------- */

static void test_range_int64_exact(void **state) {
    (void)state;
    const int64_t s = INT64_MIN, l = INT64_MAX, d = INT64_MAX;
    ak__tensor ts = tensor(AK_ELEM_I64, 0, NULL, &s), tl = tensor(AK_ELEM_I64, 0, NULL, &l),
               td = tensor(AK_ELEM_I64, 0, NULL, &d);
    op_call c = {.op = "Range", .opset = 11, .num_in = 3, .num_out = 1};
    c.in[0] = &ts, c.in[1] = &tl, c.in[2] = &td;
    assert_int_equal(call(&c), AK_OK);
    const int64_t want[] = {INT64_MIN, -1, INT64_MAX - 1};
    assert_i64(&c.out[0], want, 3);
    done(&c);
    const int64_t zero = 0; /* delta 0 */
    ak__tensor tz = tensor(AK_ELEM_I64, 0, NULL, &zero);
    c = (op_call){.op = "Range", .opset = 11, .num_in = 3, .num_out = 1};
    c.in[0] = &ts, c.in[1] = &tl, c.in[2] = &tz;
    assert_int_equal(call(&c), AK_ERR_INVALID_MODEL);
    done(&c);
    const int64_t one = 1; /* 2^64 elements */
    ak__tensor t1 = tensor(AK_ELEM_I64, 0, NULL, &one);
    c = (op_call){.op = "Range", .opset = 11, .num_in = 3, .num_out = 1};
    c.in[0] = &ts, c.in[1] = &tl, c.in[2] = &t1;
    assert_int_equal(call(&c), AK_ERR_INVALID_MODEL);
    done(&c);
}

static void test_dropout_inference(void **state) {
    (void)state;
    const int64_t four = 4;
    const float x[] = {1, 2, 3, 4}, ratio = 0.5f;
    const uint8_t yes = 1;
    ak__tensor tx = tensor(AK_ELEM_F32, 1, &four, x), tr = tensor(AK_ELEM_F32, 0, NULL, &ratio),
               tt = tensor(AK_ELEM_BOOL, 0, NULL, &yes);
    op_call c = {.op = "Dropout", .opset = 13, .num_in = 2, .num_out = 2};
    c.in[0] = &tx, c.in[1] = &tr;
    assert_int_equal(call(&c), AK_OK);
    assert_memory_equal(c.out[0].data, x, sizeof x);
    assert_int_equal(c.out[1].type, AK_ELEM_BOOL);
    const uint8_t all[] = {1, 1, 1, 1};
    assert_memory_equal(c.out[1].data, all, 4);
    done(&c);
    c = (op_call){.op = "Dropout", .opset = 13, .num_in = 3, .num_out = 1};
    c.in[0] = &tx, c.in[1] = &tr, c.in[2] = &tt;
    assert_int_equal(call(&c), AK_OK); /* training: each kept x doubled, the rest 0 */
    for (int i = 0; i < 4; i++) {
        float y = ((const float *)c.out[0].data)[i];
        assert_true(y == 0.0f || y == 2.0f * x[i]);
    }
    done(&c);
}

static void test_hostile_shapes(void **state) {
    (void)state;
    const int64_t d2[] = {1024, 1024}, n2 = 2, huge[] = {1 << 30, 1 << 30}, neg[] = {-2, 3};
    ak__tensor x = tensor(AK_ELEM_F32, 2, d2, NULL), th = tensor(AK_ELEM_I64, 1, &n2, huge),
               tn = tensor(AK_ELEM_I64, 1, &n2, neg);
    const char *ops[] = {"Tile", "Expand", "Expand", "ConstantOfShape"};
    const ak__tensor *second[] = {&th, &tn, &th, NULL};
    const int64_t d11[] = {1, 1};
    ak__tensor x11 = tensor(AK_ELEM_F32, 2, d11, NULL);
    const ak__tensor *first[] = {&x, &x, &x11, &th}; /* the last: [2^30, 2^30] floats */
    for (int k = 0; k < 4; k++) {
        op_call c = {.op = ops[k], .opset = 13, .num_in = second[k] ? 2 : 1, .num_out = 1};
        c.in[0] = first[k], c.in[1] = second[k];
        assert_int_not_equal(call(&c), AK_OK);
        done(&c);
    }
    /* DepthToSpace with channels that do not divide, Concat of mismatched ranks */
    const int64_t d4[] = {1, 3, 2, 2};
    ak__tensor t4 = tensor(AK_ELEM_F32, 4, d4, NULL);
    op_call c = {.op = "DepthToSpace", .opset = 13, .num_in = 1, .num_out = 1};
    attr_int(&c, "blocksize", 2);
    c.in[0] = &t4;
    assert_int_equal(call(&c), AK_ERR_INVALID_MODEL);
    done(&c);
    c = (op_call){.op = "Concat", .opset = 13, .num_in = 2, .num_out = 1};
    attr_int(&c, "axis", 0);
    c.in[0] = &t4, c.in[1] = &x;
    assert_int_equal(call(&c), AK_ERR_INVALID_MODEL);
    done(&c);
}

static void test_data_dependent_checks(void **state) {
    (void)state;
    /* Compress: a true condition entry past the axis */
    const int64_t three = 3, four = 4;
    const uint8_t cond[] = {1, 0, 0, 1};
    ak__tensor x = tensor(AK_ELEM_I64, 1, &three, iota), tc = tensor(AK_ELEM_BOOL, 1, &four, cond);
    op_call c = {.op = "Compress", .opset = 11, .num_in = 2, .num_out = 1};
    attr_int(&c, "axis", 0);
    c.in[0] = &x, c.in[1] = &tc;
    assert_int_equal(call(&c), AK_ERR_INVALID_ARG);
    done(&c);
    /* ReverseSequence: a length longer than the time axis */
    const int64_t d23[] = {2, 3}, lens[] = {2, 3}, bad[] = {1, 4};
    ak__tensor tx = tensor(AK_ELEM_I64, 2, d23, iota);
    const int64_t *l[] = {lens, bad};
    for (int k = 0; k < 2; k++) {
        const int64_t two = 2;
        ak__tensor tl = tensor(AK_ELEM_I64, 1, &two, l[k]);
        c = (op_call){.op = "ReverseSequence", .opset = 10, .num_in = 2, .num_out = 1};
        attr_int(&c, "batch_axis", 0);
        attr_int(&c, "time_axis", 1);
        c.in[0] = &tx, c.in[1] = &tl;
        assert_int_equal(call(&c), k ? AK_ERR_INVALID_ARG : AK_OK);
        const int64_t want[] = {1, 0, 2, 5, 4, 3};
        if (!k) assert_i64(&c.out[0], want, 6);
        done(&c);
    }
    /* NonZero: -0.0 (f16 0x8000) is zero, NaN (0x7e00) is not */
    const uint16_t h[] = {0x8000, 0x7e00, 0x0000, 0x3c00};
    ak__tensor th = tensor(AK_ELEM_F16, 1, &four, h);
    c = (op_call){.op = "NonZero", .opset = 13, .num_in = 1, .num_out = 1};
    c.in[0] = &th;
    assert_int_equal(call(&c), AK_OK);
    const int64_t nz[] = {1, 3};
    assert_i64(&c.out[0], nz, 2);
    done(&c);
    /* OneHot with float indices: NaN and huge values select nothing */
    const float fi[] = {NAN_F, 1e30f, 1.f};
    const float vals[] = {0.f, 1.f};
    const int64_t one = 1, two = 2, depth = 2;
    ak__tensor ti = tensor(AK_ELEM_F32, 1, &three, fi), td = tensor(AK_ELEM_I64, 1, &one, &depth),
               tv = tensor(AK_ELEM_F32, 1, &two, vals);
    c = (op_call){.op = "OneHot", .opset = 11, .num_in = 3, .num_out = 1};
    c.in[0] = &ti, c.in[1] = &td, c.in[2] = &tv;
    assert_int_equal(call(&c), AK_OK);
    const float want[] = {0, 0, 0, 0, 0, 1};
    assert_memory_equal(c.out[0].data, want, sizeof want);
    done(&c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_transpose_matches_reference),
        cmocka_unit_test(test_slice_attribute_form),
        cmocka_unit_test(test_slice_negative_steps_and_clamping),
        cmocka_unit_test(test_pad_modes_and_axes),
        cmocka_unit_test(test_pad_attribute_form_and_value),
        cmocka_unit_test(test_split_forms),
        cmocka_unit_test(test_squeeze_unsqueeze_attribute_forms),
        cmocka_unit_test(test_reshape_rules),
        cmocka_unit_test(test_gather_indices_checked),
        cmocka_unit_test(test_element_and_nd_indices_checked),
        cmocka_unit_test(test_scatter_elements_reductions),
        cmocka_unit_test(test_onehot_out_of_range_is_off),
        cmocka_unit_test(test_range_int64_exact),
        cmocka_unit_test(test_dropout_inference),
        cmocka_unit_test(test_hostile_shapes),
        cmocka_unit_test(test_data_dependent_checks),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
