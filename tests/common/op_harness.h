/* Running one inference operator outside a session, for the operator unit tests
 * (tests/infer/test_*.c): inputs and attributes are collected in an op_call, then
 * op_call_run drives the operator's create -> reshape -> run like the session does, with
 * outputs in fresh buffers followed by guard bytes that must survive the run.
 * Header-only (static functions) so each test executable carries its own copy. */
#ifndef AK_TESTS_OP_HARNESS_H
#define AK_TESTS_OP_HARNESS_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "infer/runtime/op.h"

#define OP_MAX_IO 8
#define OP_GUARD 16

typedef struct op_call {
    ak__tensor in[OP_MAX_IO], out[OP_MAX_IO];
    uint32_t nin, nout;
    ak__ir_attr attrs[16];
    uint32_t nattr;
    uint32_t const_mask; /* bit i: input i is a constant (create sees it, as in a model) */
    void *ws;
} op_call;

/* rank < 0 adds an omitted optional input. */
static inline void add_in(op_call *c, ak_elem_type t, int rank, const int64_t *dims,
                          const void *data) {
    ak__tensor *x = &c->in[c->nin++];
    if (rank < 0) return;
    assert_int_equal(ak__tensor_set_shape(x, t, rank, dims, "test input"), AK_OK);
    x->data = (void *)data;
}

static inline ak__ir_attr *next_attr(op_call *c, const char *name, ak__ir_attr_type type) {
    assert_true(c->nattr < sizeof c->attrs / sizeof *c->attrs);
    ak__ir_attr *a = &c->attrs[c->nattr++];
    memset(a, 0, sizeof *a);
    a->name = name;
    a->type = type;
    return a;
}
static inline void attr_int(op_call *c, const char *name, int64_t v) {
    next_attr(c, name, AK_ATTR_INT)->u.i = v;
}
static inline void attr_float(op_call *c, const char *name, float v) {
    next_attr(c, name, AK_ATTR_FLOAT)->u.f = v;
}
static inline void attr_str(op_call *c, const char *name, const char *v) {
    ak__ir_attr *a = next_attr(c, name, AK_ATTR_STRING);
    a->u.s.data = v;
    a->u.s.len = strlen(v);
}
static inline void attr_ints(op_call *c, const char *name, const int64_t *v, size_t n) {
    ak__ir_attr *a = next_attr(c, name, AK_ATTR_INTS);
    a->count = n;
    a->u.ints = v;
}

/* Runs domain:op_type at `opset` over c's inputs into nout outputs on `pool` (NULL: the
 * global pool). Outputs are freed by op_call_free. Returns the first failing status. */
static inline ak_status op_call_run(op_call *c, const char *domain, const char *op_type,
                                    int64_t opset, uint32_t nout, ak_threadpool *pool) {
    const ak__op_def *def = ak__op_find(domain, op_type, opset);
    assert_non_null(def);
    ak__ir_node node = {.name = "t", .op_type = op_type, .domain = domain, .opset = opset,
                        .num_inputs = c->nin, .num_outputs = nout, .num_attrs = c->nattr,
                        .attrs = c->attrs};
    const ak__tensor *ins[OP_MAX_IO] = {0}, *consts[OP_MAX_IO] = {0};
    ak__tensor *outs[OP_MAX_IO] = {0};
    for (uint32_t i = 0; i < c->nin; i++) {
        ins[i] = c->in[i].type ? &c->in[i] : NULL;
        if (c->const_mask >> i & 1u) consts[i] = ins[i];
    }
    for (uint32_t i = 0; i < nout; i++) outs[i] = &c->out[i];
    c->nout = nout;
    ak__op_ctx ctx = {.node = &node, .num_inputs = c->nin, .num_outputs = nout,
                      .inputs = ins, .outputs = outs, .pool = pool};
    if (!pool) assert_int_equal(ak_threadpool_global(&ctx.pool), AK_OK);
    void *state = NULL;
    ak_status st = def->create ? def->create(&node, consts, &state) : AK_OK;
    if (st == AK_OK) ctx.state = state, st = def->reshape(&ctx);
    if (st == AK_OK) {
        for (uint32_t i = 0; i < nout; i++) {
            size_t nb = ak__tensor_nbytes(&c->out[i]);
            c->out[i].data = malloc(nb + OP_GUARD);
            assert_non_null(c->out[i].data);
            memset(c->out[i].data, 0xa5, nb + OP_GUARD);
        }
        assert_int_equal(ak_alloc(ctx.workspace_bytes, &c->ws), AK_OK);
        ctx.workspace = c->ws;
        st = def->run ? def->run(&ctx) : AK_OK;
        for (uint32_t i = 0; i < nout; i++) {
            const unsigned char *g = (const unsigned char *)c->out[i].data + ak__tensor_nbytes(&c->out[i]);
            for (int k = 0; k < OP_GUARD; k++) assert_int_equal(g[k], 0xa5);
        }
    }
    if (def->destroy && state) def->destroy(state);
    return st;
}

static inline void op_call_free(op_call *c) {
    for (uint32_t i = 0; i < c->nout; i++) free(c->out[i].data);
    ak_free(c->ws);
    c->ws = NULL;
    c->nout = 0;
}

/* ---- test data and checks ---------------------------------------------------------- */

/* n floats in [lo, hi] from a small LCG: the same values on every machine and libc. */
static inline float *op_random_floats(size_t n, float lo, float hi, unsigned seed) {
    float *p = malloc(n * sizeof *p + 1);
    assert_non_null(p);
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        p[i] = lo + (hi - lo) * (float)((seed >> 8) & 0xffff) / 65535.0f;
    }
    return p;
}

/* |got - want| <= atol + rtol·|want|; a NaN on either side fails. */
static inline void op_assert_close(double got, double want, double rtol, double atol) {
    if (!(fabs(got - want) <= atol + rtol * fabs(want)))
        fail_msg("got %.9g, expected %.9g", got, want);
}

#endif /* AK_TESTS_OP_HARNESS_H */
