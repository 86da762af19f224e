/* Tests of the ONNX loader and the IR it builds: tiny models encoded here with protobuf-c
 * (initializers in typed fields, raw_data and external files; symbolic dims; subgraphs),
 * rejection of bad versions, cycles and undefined inputs, hostile files (huge or negative
 * dims, path escapes, deep nesting, allocation bombs, every truncation and bit flip of a
 * valid model), and every model.onnx of Debian's libonnx-testdata. */
#include <ftw.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "accelkit/infer.h"
#include "infer/ir/ir.h"
#include "infer/model.h"
#include "infer/onnx.pb-c.h"
#include "infer/runtime/op.h"

/* ---- building models with protobuf-c ---------------------------------------------------- */

/* Every allocation of a test model goes into one pool freed after the test. */
static void **pool;
static size_t pool_n;

static void *talloc(size_t size) {
    void *p = calloc(1, size ? size : 1);
    assert_non_null(p);
    pool = realloc(pool, (pool_n + 1) * sizeof *pool);
    assert_non_null(pool);
    pool[pool_n++] = p;
    return p;
}

static void pool_free(void) {
    for (size_t i = 0; i < pool_n; i++) free(pool[i]);
    free(pool);
    pool = NULL;
    pool_n = 0;
}

static char *tstr(const char *s) {
    char *c = talloc(strlen(s) + 1);
    strcpy(c, s);
    return c;
}

/* Appends item to a protobuf-c repeated field (count + array of pointers/values). */
#define PUSH(count, array, item)                                                          \
    do {                                                                                 \
        void *grown_ = talloc(((count) + 1) * sizeof *(array));                          \
        if (count) memcpy(grown_, (array), (count) * sizeof *(array));                   \
        (array) = grown_;                                                                \
        (array)[(count)++] = (item);                                                     \
    } while (0)

static Akonnx__ValueInfoProto *value_info(const char *name, int elem, int rank,
                                          const int64_t *dims, const char *const *params) {
    Akonnx__ValueInfoProto *v = talloc(sizeof *v);
    akonnx__value_info_proto__init(v);
    v->name = tstr(name);
    Akonnx__TypeProto *tp = talloc(sizeof *tp);
    akonnx__type_proto__init(tp);
    Akonnx__TypeProto__Tensor *tt = talloc(sizeof *tt);
    akonnx__type_proto__tensor__init(tt);
    tt->has_elem_type = 1;
    tt->elem_type = elem;
    if (rank >= 0) {
        tt->shape = talloc(sizeof *tt->shape);
        akonnx__tensor_shape_proto__init(tt->shape);
        for (int i = 0; i < rank; i++) {
            Akonnx__TensorShapeProto__Dimension *d = talloc(sizeof *d);
            akonnx__tensor_shape_proto__dimension__init(d);
            if (params && params[i]) {
                d->value_case = AKONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
                d->dim_param = tstr(params[i]);
            } else {
                d->value_case = AKONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
                d->dim_value = dims[i];
            }
            PUSH(tt->shape->n_dim, tt->shape->dim, d);
        }
    }
    tp->value_case = AKONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    v->type = tp;
    return v;
}

/* A node from comma-separated input and output names ("" entries allowed). */
static Akonnx__NodeProto *node(Akonnx__GraphProto *g, const char *op, const char *name,
                               const char *ins, const char *outs) {
    Akonnx__NodeProto *n = talloc(sizeof *n);
    akonnx__node_proto__init(n);
    n->op_type = tstr(op);
    n->name = tstr(name);
    const char *lists[2] = {ins, outs};
    for (int l = 0; l < 2; l++) {
        const char *p = lists[l];
        while (p && *p) {
            size_t len = strcspn(p, ",");
            char *s = talloc(len + 1);
            memcpy(s, p, len);
            if (l == 0) PUSH(n->n_input, n->input, s);
            else PUSH(n->n_output, n->output, s);
            p += len + (p[len] == ',');
        }
    }
    if (g) PUSH(g->n_node, g->node, n);
    return n;
}

static Akonnx__AttributeProto *attr(Akonnx__NodeProto *n, const char *name, int type) {
    Akonnx__AttributeProto *a = talloc(sizeof *a);
    akonnx__attribute_proto__init(a);
    a->name = tstr(name);
    a->has_type = 1;
    a->type = type;
    PUSH(n->n_attribute, n->attribute, a);
    return a;
}

static Akonnx__TensorProto *tensor(const char *name, int type, int rank, const int64_t *dims) {
    Akonnx__TensorProto *t = talloc(sizeof *t);
    akonnx__tensor_proto__init(t);
    t->name = tstr(name);
    t->has_data_type = 1;
    t->data_type = type;
    for (int i = 0; i < rank; i++) PUSH(t->n_dims, t->dims, dims[i]);
    return t;
}

static void set_raw(Akonnx__TensorProto *t, const void *data, size_t len) {
    t->has_raw_data = 1;
    t->raw_data.len = len;
    t->raw_data.data = talloc(len);
    memcpy(t->raw_data.data, data, len);
}

static Akonnx__GraphProto *graph(const char *name) {
    Akonnx__GraphProto *g = talloc(sizeof *g);
    akonnx__graph_proto__init(g);
    g->name = tstr(name);
    return g;
}

static Akonnx__ModelProto *model(int64_t ir, int64_t opset, Akonnx__GraphProto *g) {
    Akonnx__ModelProto *m = talloc(sizeof *m);
    akonnx__model_proto__init(m);
    m->has_ir_version = 1;
    m->ir_version = ir;
    m->producer_name = tstr("accelkit-test");
    m->producer_version = tstr("1");
    Akonnx__OperatorSetIdProto *o = talloc(sizeof *o);
    akonnx__operator_set_id_proto__init(o);
    o->domain = tstr("");
    o->has_version = 1;
    o->version = opset;
    PUSH(m->n_opset_import, m->opset_import, o);
    m->graph = g;
    return m;
}

static uint8_t *pack(const Akonnx__ModelProto *m, size_t *len) {
    *len = akonnx__model_proto__get_packed_size(m);
    uint8_t *buf = talloc(*len);
    assert_int_equal(akonnx__model_proto__pack(m, buf), *len);
    return buf;
}

/* Packs and loads; returns the status, the model in *out when non-NULL and loaded. */
static ak_status load(const Akonnx__ModelProto *m, const char *base_dir, ak_model **out) {
    size_t len;
    uint8_t *buf = pack(m, &len);
    ak_model *mm = NULL;
    ak_status st = ak_onnx_load_bytes(buf, len, base_dir, &mm);
    if (out) *out = mm;
    else ak_model_free(mm);
    return st;
}

static void expect_fail(const Akonnx__ModelProto *m, ak_status want, const char *needle) {
    ak_status st = load(m, NULL, NULL);
    if (st != want || !strstr(ak_last_error(), needle))
        print_error("wanted %s with '%s', got %s: %s\n", ak_status_str(want), needle,
                    ak_status_str(st), ak_last_error());
    assert_int_equal(st, want);
    assert_non_null(strstr(ak_last_error(), needle));
}

/* Y = Relu(X @ W + B), X: (batch, 3), W: (3, 4) in raw_data, B: (4) in float_data. The
 * nodes are written in reverse so the loader has to sort them. */
static const float W_DATA[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
static const float B_DATA[4] = {0.5f, -1, 2, 0};

static Akonnx__ModelProto *tiny_model(void) {
    Akonnx__GraphProto *g = graph("tiny");
    const char *batch[] = {"batch", NULL};
    PUSH(g->n_input, g->input, value_info("X", AK_ELEM_F32, 2, (int64_t[]){0, 3}, batch));
    PUSH(g->n_output, g->output, value_info("Z", AK_ELEM_F32, 2, (int64_t[]){0, 4}, batch));
    Akonnx__TensorProto *w = tensor("W", AK_ELEM_F32, 2, (int64_t[]){3, 4});
    set_raw(w, W_DATA, sizeof W_DATA);
    Akonnx__TensorProto *b = tensor("B", AK_ELEM_F32, 1, (int64_t[]){4});
    b->n_float_data = 4;
    b->float_data = talloc(sizeof B_DATA);
    memcpy(b->float_data, B_DATA, sizeof B_DATA);
    PUSH(g->n_initializer, g->initializer, w);
    PUSH(g->n_initializer, g->initializer, b);
    node(g, "Relu", "relu", "Y", "Z");
    node(g, "Add", "add", "Y0,B", "Y");
    node(g, "MatMul", "mm", "X,W", "Y0");
    return model(8, 13, g);
}

/* ---- well-formed models ----------------------------------------------------------------- */

static void test_tiny_model(void **state) {
    ak_model *m;
    assert_int_equal(load(tiny_model(), NULL, &m), AK_OK);
    ak_model_summary s;
    assert_int_equal(ak_model_get_summary(m, &s), AK_OK);
    assert_int_equal(s.ir_version, 8);
    assert_string_equal(s.producer_name, "accelkit-test");
    assert_int_equal(s.num_inputs, 1);
    assert_int_equal(s.num_outputs, 1);
    assert_int_equal(s.num_nodes, 3);
    assert_int_equal(s.num_initializers, 2);
    assert_int_equal(s.num_params, 16);
    assert_int_equal(s.param_bytes, 64);
    const char *domain;
    int64_t version;
    assert_int_equal(ak_model_opset(m, 0, &domain, &version), AK_OK);
    assert_string_equal(domain, "");
    assert_int_equal(version, 13);

    ak_value_info in;
    assert_int_equal(ak_model_input(m, 0, &in), AK_OK);
    assert_string_equal(in.name, "X");
    assert_int_equal(in.type, AK_ELEM_F32);
    assert_int_equal(in.rank, 2);
    assert_int_equal(in.dims[0], -1);
    assert_string_equal(in.dim_names[0], "batch");
    assert_int_equal(in.dims[1], 3);
    assert_null(in.dim_names[1]);
    assert_int_equal(ak_model_input(m, 1, &in), AK_ERR_INVALID_ARG);

    /* histogram: all counts 1, so by name */
    const char *op;
    size_t count;
    assert_int_equal(ak_model_op_count(m, 0, &op, &count), AK_OK);
    assert_string_equal(op, "Add");
    assert_int_equal(count, 1);

    /* IR: topological order MatMul, Add, Relu (file order was reversed) */
    const ak__ir_graph *g = m->graph;
    assert_non_null(g->order);
    assert_string_equal(g->nodes[g->order[0]].op_type, "MatMul");
    assert_string_equal(g->nodes[g->order[1]].op_type, "Add");
    assert_string_equal(g->nodes[g->order[2]].op_type, "Relu");
    const ak__ir_node *mm = &g->nodes[g->order[0]];
    assert_int_equal(mm->opset, 13);
    assert_int_equal(mm->num_inputs, 2);
    const ak__ir_value *w = &g->values[mm->inputs[1]];
    assert_string_equal(w->name, "W");
    assert_true(w->flags & AK_IR_VALUE_CONST);
    assert_memory_equal(w->constant->data, W_DATA, sizeof W_DATA);
    assert_int_equal(g->values[mm->outputs[0]].producer, g->order[0]);
    const ak__ir_value *b = &g->values[ak__ir_value_find(g, "B")];
    assert_memory_equal(b->constant->data, B_DATA, sizeof B_DATA);

    /* FLOPs: X has a symbolic batch, so MatMul cannot be counted without inference */
    ak_model_flops f;
    assert_int_equal(ak_model_get_flops(m, &f), AK_OK);
    assert_int_equal(f.candidates, 1);
    assert_int_equal(f.counted, 0);
    ak_model_free(m);
    pool_free();
}

static void test_flops_static(void **state) {
    Akonnx__GraphProto *g = graph("conv");
    PUSH(g->n_input, g->input, value_info("X", AK_ELEM_F32, 4, (int64_t[]){1, 3, 8, 8}, NULL));
    PUSH(g->n_output, g->output, value_info("Y", AK_ELEM_F32, -1, NULL, NULL));
    float wdata[16 * 3 * 3 * 3] = {0};
    Akonnx__TensorProto *w = tensor("W", AK_ELEM_F32, 4, (int64_t[]){16, 3, 3, 3});
    set_raw(w, wdata, sizeof wdata);
    PUSH(g->n_initializer, g->initializer, w);
    Akonnx__NodeProto *n = node(g, "Conv", "conv", "X,W", "Y");
    Akonnx__AttributeProto *pads = attr(n, "pads", AK_ATTR_INTS);
    for (int i = 0; i < 4; i++) PUSH(pads->n_ints, pads->ints, 1);
    ak_model *m;
    assert_int_equal(load(model(7, 11, g), NULL, &m), AK_OK);
    ak_model_flops f;
    assert_int_equal(ak_model_get_flops(m, &f), AK_OK);
    assert_int_equal(f.counted, 1);
    /* 2 * N1 * M16 * C3 * 8x8 out * 3x3 kernel */
    assert_int_equal(f.flops, 2ull * 16 * 3 * 64 * 9);
    ak_model_free(m);
    pool_free();
}

static void test_typed_fields(void **state) {
    Akonnx__GraphProto *g = graph("typed");
    PUSH(g->n_output, g->output, value_info("o", AK_ELEM_F32, -1, NULL, NULL));
    Akonnx__TensorProto *i8 = tensor("i8", AK_ELEM_I8, 1, (int64_t[]){3});
    int32_t i8v[3] = {-1, 2, 127};
    i8->n_int32_data = 3;
    i8->int32_data = talloc(sizeof i8v);
    memcpy(i8->int32_data, i8v, sizeof i8v);
    Akonnx__TensorProto *f16 = tensor("f16", AK_ELEM_F16, 1, (int64_t[]){2});
    int32_t f16v[2] = {0x3c00, 0xc000}; /* 1.0, -2.0 as float16 bits */
    f16->n_int32_data = 2;
    f16->int32_data = talloc(sizeof f16v);
    memcpy(f16->int32_data, f16v, sizeof f16v);
    Akonnx__TensorProto *i64 = tensor("i64", AK_ELEM_I64, 0, NULL); /* a scalar */
    i64->n_int64_data = 1;
    i64->int64_data = talloc(sizeof(int64_t));
    i64->int64_data[0] = -5000000000LL;
    Akonnx__TensorProto *u32 = tensor("u32", AK_ELEM_U32, 1, (int64_t[]){1});
    u32->n_uint64_data = 1;
    u32->uint64_data = talloc(sizeof(uint64_t));
    u32->uint64_data[0] = 4000000000u;
    Akonnx__TensorProto *s = tensor("s", AK_ELEM_STRING, 1, (int64_t[]){2});
    ProtobufCBinaryData sv[2] = {{3, (uint8_t *)"abc"}, {0, NULL}};
    s->n_string_data = 2;
    s->string_data = talloc(sizeof sv);
    memcpy(s->string_data, sv, sizeof sv);
    Akonnx__TensorProto *empty = tensor("empty", AK_ELEM_F32, 2, (int64_t[]){0, 5});
    Akonnx__TensorProto *t[] = {i8, f16, i64, u32, s, empty};
    for (size_t i = 0; i < 6; i++) PUSH(g->n_initializer, g->initializer, t[i]);
    node(g, "Identity", "", "i8", "o");
    ak_model *m;
    assert_int_equal(load(model(9, 18, g), NULL, &m), AK_OK);
    const ak__ir_graph *ir = m->graph;
    const ak__ir_tensor *c = ir->values[ak__ir_value_find(ir, "i8")].constant;
    assert_int_equal(((int8_t *)c->data)[0], -1);
    assert_int_equal(((int8_t *)c->data)[2], 127);
    c = ir->values[ak__ir_value_find(ir, "f16")].constant;
    assert_int_equal(((uint16_t *)c->data)[1], 0xc000);
    c = ir->values[ak__ir_value_find(ir, "i64")].constant;
    assert_int_equal(c->rank, 0);
    assert_int_equal(c->count, 1);
    assert_int_equal(((int64_t *)c->data)[0], -5000000000LL);
    c = ir->values[ak__ir_value_find(ir, "u32")].constant;
    assert_int_equal(((uint32_t *)c->data)[0], 4000000000u);
    c = ir->values[ak__ir_value_find(ir, "s")].constant;
    assert_int_equal(((ak__ir_bytes *)c->data)[0].len, 3);
    assert_memory_equal(((ak__ir_bytes *)c->data)[0].data, "abc", 3);
    c = ir->values[ak__ir_value_find(ir, "empty")].constant;
    assert_int_equal(c->count, 0);
    ak_model_free(m);
    pool_free();
}

/* If with both branches reading an outer value: the If must run after its producer, even
 * when the file lists it first. */
static void test_subgraph_captures(void **state) {
    Akonnx__GraphProto *g = graph("main");
    PUSH(g->n_input, g->input, value_info("c", AK_ELEM_BOOL, 0, NULL, NULL));
    PUSH(g->n_input, g->input, value_info("x", AK_ELEM_F32, 1, (int64_t[]){4}, NULL));
    PUSH(g->n_output, g->output, value_info("y", AK_ELEM_F32, 1, (int64_t[]){4}, NULL));
    Akonnx__NodeProto *iff = node(g, "If", "if", "c", "y");
    node(g, "Relu", "relu", "x", "r");
    const char *names[2] = {"then", "else"};
    for (int b = 0; b < 2; b++) {
        Akonnx__GraphProto *body = graph(names[b]);
        node(body, b ? "Neg" : "Abs", "", "r", "out");
        PUSH(body->n_output, body->output, value_info("out", AK_ELEM_F32, 1, (int64_t[]){4}, NULL));
        attr(iff, b ? "else_branch" : "then_branch", AK_ATTR_GRAPH)->g = body;
    }
    ak_model *m;
    assert_int_equal(load(model(8, 16, g), NULL, &m), AK_OK);
    const ak__ir_graph *ir = m->graph;
    assert_string_equal(ir->nodes[ir->order[0]].op_type, "Relu");
    assert_string_equal(ir->nodes[ir->order[1]].op_type, "If");
    const ak__ir_node *n = &ir->nodes[ir->order[1]];
    assert_int_equal(n->num_captures, 1);
    assert_string_equal(ir->values[n->captures[0]].name, "r");
    const ak__ir_attr *then = ak__ir_node_attr(n, "then_branch");
    assert_non_null(then);
    const ak__ir_graph *body = then->u.g;
    const ak__ir_value *r = &body->values[ak__ir_value_find(body, "r")];
    assert_true(r->flags & AK_IR_VALUE_OUTER);
    assert_int_equal(r->outer, n->captures[0]);
    ak_model_summary s;
    assert_int_equal(ak_model_get_summary(m, &s), AK_OK);
    assert_int_equal(s.num_subgraph_nodes, 2);
    ak_model_free(m);
    pool_free();
}

/* ---- what onnxruntime's Python API asks of a model and session ---------------------------- */

static Akonnx__StringStringEntryProto *entry(const char *k, const char *v) {
    Akonnx__StringStringEntryProto *e = talloc(sizeof *e);
    akonnx__string_string_entry_proto__init(e);
    e->key = tstr(k);
    e->value = tstr(v);
    return e;
}

/* tiny_model with a domain, descriptions, two metadata_props, B listed as an input (an
 * overridable initializer) and a second output C = Identity(Z) (a view, so copied). */
static Akonnx__ModelProto *described_model(void) {
    Akonnx__ModelProto *m = tiny_model();
    m->domain = tstr("ai.accelkit.test");
    m->doc_string = tstr("a \"tiny\" model");
    m->graph->doc_string = tstr("the graph");
    PUSH(m->n_metadata_props, m->metadata_props, entry("author", "test"));
    PUSH(m->n_metadata_props, m->metadata_props, entry("license", "none"));
    Akonnx__GraphProto *g = m->graph;
    PUSH(g->n_input, g->input, value_info("B", AK_ELEM_F32, 1, (int64_t[]){4}, NULL));
    PUSH(g->n_output, g->output, value_info("C", AK_ELEM_F32, -1, NULL, NULL));
    node(g, "Identity", "copy", "Z", "C");
    return m;
}

static void test_metadata(void **state) {
    ak_model *m;
    assert_int_equal(load(described_model(), NULL, &m), AK_OK);
    ak_model_metadata md;
    assert_int_equal(ak_model_get_metadata(m, &md), AK_OK);
    assert_string_equal(md.domain, "ai.accelkit.test");
    assert_string_equal(md.description, "a \"tiny\" model");
    assert_string_equal(md.graph_description, "the graph");
    assert_int_equal(md.num_props, 2);
    const char *k, *v;
    assert_int_equal(ak_model_metadata_prop(m, 1, &k, &v), AK_OK);
    assert_string_equal(k, "license");
    assert_string_equal(v, "none");
    assert_int_equal(ak_model_metadata_prop(m, 2, &k, &v), AK_ERR_INVALID_ARG);
    assert_int_equal(md.num_overridable, 1);
    ak_value_info info;
    assert_int_equal(ak_model_overridable(m, 0, &info), AK_OK);
    assert_string_equal(info.name, "B");
    assert_int_equal(info.rank, 1);
    assert_int_equal(ak_model_overridable(m, 1, &info), AK_ERR_INVALID_ARG);
    ak_model_free(m);
    /* absent fields read as "" */
    assert_int_equal(load(tiny_model(), NULL, &m), AK_OK);
    assert_int_equal(ak_model_get_metadata(m, &md), AK_OK);
    assert_string_equal(md.domain, "");
    assert_string_equal(md.description, "");
    assert_int_equal(md.num_props, 0);
    assert_int_equal(md.num_overridable, 0);
    ak_model_free(m);
    pool_free();
}

static ak_session *described_session(ak_model **m, int profile) {
    assert_int_equal(load(described_model(), NULL, m), AK_OK);
    ak_session_options o;
    ak_session_options_init(&o);
    o.threads = 1;
    o.profile = profile;
    ak_session *s;
    assert_int_equal(ak_session_create(*m, &o, &s), AK_OK);
    return s;
}

/* Outputs written into the caller's buffers: Z by its operator directly (the data pointer
 * the run reports is the caller's), C (a view of Z) copied; equal to ak_session_run's. */
static void test_run_into(void **state) {
    ak_model *m;
    ak_session *s = described_session(&m, 0);
    const float x[6] = {1, -2, 0.5f, 3, 0, -1};
    const int64_t xd[2] = {2, 3}, zd[2] = {2, 4}, bad[2] = {2, 5};
    const char *in_names[] = {"X"}, *out_names[] = {"Z", "C"};
    ak_tensor in = {AK_ELEM_F32, 2, xd, (void *)x}, ref[2];
    assert_int_equal(ak_session_run(s, in_names, &in, 1, out_names, ref, 2), AK_OK);
    float want[8];
    memcpy(want, ref[0].data, sizeof want);
    for (int pass = 0; pass < 2; pass++) { /* unplanned, then planned */
        float z[8], c[8];
        memset(z, 0xff, sizeof z);
        memset(c, 0xff, sizeof c);
        ak_tensor outs[2] = {{AK_ELEM_F32, 2, zd, z}, {AK_ELEM_F32, 2, zd, c}};
        assert_int_equal(ak_session_run_into(s, in_names, &in, 1, out_names, outs, 2), AK_OK);
        assert_ptr_equal(outs[0].data, z);
        assert_memory_equal(z, want, sizeof want);
        assert_memory_equal(c, want, sizeof want);
    }
    /* unbound outputs are filled as ak_session_run does; the next plain run is unaffected */
    ak_tensor mixed[2] = {{AK_ELEM_F32, 0, NULL, NULL}, {AK_ELEM_F32, 0, NULL, NULL}};
    assert_int_equal(ak_session_run_into(s, in_names, &in, 1, out_names, mixed, 2), AK_OK);
    assert_memory_equal(mixed[0].data, want, sizeof want);
    assert_int_equal(ak_session_run(s, in_names, &in, 1, NULL, ref, 2), AK_OK);
    assert_memory_equal(ref[0].data, want, sizeof want);
    /* a buffer of the wrong shape or type is refused, naming the output */
    float big[10];
    ak_tensor wrong = {AK_ELEM_F32, 2, bad, big};
    assert_int_equal(ak_session_run_into(s, in_names, &in, 1, out_names, &wrong, 1),
                     AK_ERR_INVALID_ARG);
    assert_non_null(strstr(ak_last_error(), "output 'Z'"));
    assert_non_null(strstr(ak_last_error(), "[2,4]"));
    ak_tensor wrong_type = {AK_ELEM_F64, 2, zd, big};
    assert_int_equal(ak_session_run_into(s, in_names, &in, 1, out_names, &wrong_type, 1),
                     AK_ERR_INVALID_ARG);
    const char *twice[] = {"Z", "Z"};
    float z2[8], z3[8];
    ak_tensor two[2] = {{AK_ELEM_F32, 2, zd, z2}, {AK_ELEM_F32, 2, zd, z3}};
    assert_int_equal(ak_session_run_into(s, in_names, &in, 1, twice, two, 2), AK_ERR_INVALID_ARG);
    assert_non_null(strstr(ak_last_error(), "bound twice"));
    assert_int_equal(ak_session_run(s, in_names, &in, 1, NULL, ref, 2), AK_OK);
    assert_memory_equal(ref[0].data, want, sizeof want);
    ak_session_free(s);
    ak_model_free(m);
    pool_free();
}

/* An initializer listed as an input may be fed to replace it for one run; the next run
 * without it uses the file's data again. Where creation prepared it (packed, folded,
 * fused), overriding is refused rather than silently not reaching the result. */
static void check_override(ak_session *s, int must_apply) {
    const float x[3] = {1, 2, 3}, zero_b[4] = {0, 0, 0, 0};
    const int64_t xd[2] = {1, 3}, bd[1] = {4};
    const char *names[] = {"X", "B"};
    ak_tensor in[2] = {{AK_ELEM_F32, 2, xd, (void *)x}, {AK_ELEM_F32, 1, bd, (void *)zero_b}};
    ak_tensor out[2];
    float base[4], want[4];
    assert_int_equal(ak_session_run(s, names, in, 1, NULL, out, 2), AK_OK);
    memcpy(base, out[0].data, sizeof base);
    for (int j = 0; j < 4; j++) { /* Relu(x W), no bias */
        float acc = 0;
        for (int k = 0; k < 3; k++) acc += x[k] * W_DATA[k * 4 + j];
        want[j] = acc > 0 ? acc : 0;
        assert_float_equal(base[j], fmaxf(acc + B_DATA[j], 0), 1e-5);
    }
    ak_status st = ak_session_run(s, names, in, 2, NULL, out, 2);
    if (must_apply) assert_int_equal(st, AK_OK); /* Add prepares nothing at creation */
    if (st == AK_OK) {
        for (int j = 0; j < 4; j++) assert_float_equal(((float *)out[0].data)[j], want[j], 1e-5);
    } else {
        assert_int_equal(st, AK_ERR_UNSUPPORTED);
        assert_non_null(strstr(ak_last_error(), "input 'B' overrides an initializer"));
    }
    assert_int_equal(ak_session_run(s, names, in, 1, NULL, out, 2), AK_OK);
    assert_memory_equal(out[0].data, base, sizeof base);
}

static void test_override_initializer(void **state) {
    ak_model *m;
    assert_int_equal(load(described_model(), NULL, &m), AK_OK);
    for (int prepare = 0; prepare < 2; prepare++) {
        ak_session_options o;
        ak_session_options_init(&o);
        o.threads = 1;
        o.fold_constants = o.optimize = prepare;
        ak_session *s;
        assert_int_equal(ak_session_create(m, &o, &s), AK_OK);
        check_override(s, !prepare);
        ak_session_free(s);
    }
    ak_model_free(m);
    pool_free();
}

static char *read_all(const char *path) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static char text[1 << 16];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = 0;
    return text;
}

static size_t count_of(const char *text, const char *needle) {
    size_t n = 0;
    for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}

/* The Chrome trace: one model_run per run and one event per node run (MatMul, Add and
 * Relu may be fused into fewer nodes, so counted by runs), emptied by each call. */
static void test_end_profiling(void **state) {
    ak_model *m;
    ak_session *s = described_session(&m, 1);
    const float x[3] = {1, 2, 3};
    const int64_t xd[2] = {1, 3};
    const char *in_names[] = {"X"};
    ak_tensor in = {AK_ELEM_F32, 2, xd, (void *)x}, outs[2];
    for (int i = 0; i < 3; i++)
        assert_int_equal(ak_session_run(s, in_names, &in, 1, NULL, outs, 2), AK_OK);
    char path[] = "/tmp/ak_profile_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(ak_session_end_profiling(s, path), AK_OK);
    const char *text = read_all(path);
    assert_true(text[0] == '[');
    assert_non_null(strstr(text, "_kernel_time\",\"ph\":\"X\""));
    assert_int_equal(count_of(text, "\"name\":\"model_run\""), 3);
    size_t nodes = count_of(text, "\"cat\":\"Node\"");
    assert_true(nodes >= 3 && nodes % 3 == 0);
    assert_non_null(strstr(text, "\"ph\":\"X\""));
    assert_int_equal(ak_session_run(s, in_names, &in, 1, NULL, outs, 2), AK_OK);
    assert_int_equal(ak_session_end_profiling(s, path), AK_OK);
    text = read_all(path);
    assert_int_equal(count_of(text, "\"name\":\"model_run\""), 1);
    assert_int_equal(count_of(text, "\"cat\":\"Node\""), nodes / 3);
    assert_int_equal(ak_session_end_profiling(s, "/nonexistent-dir/p.json"), AK_ERR_IO);
    unlink(path);
    ak_session_free(s);
    ak_model_free(m);
    s = described_session(&m, 0); /* profiling off: refused */
    assert_int_equal(ak_session_end_profiling(s, path), AK_ERR_INVALID_ARG);
    assert_non_null(strstr(ak_last_error(), "without profiling"));
    ak_session_free(s);
    ak_model_free(m);
    pool_free();
}

/* ---- external data ------------------------------------------------------------------------ */

static char tmpdir[64];

static void write_file(const char *name, const void *data, size_t len) {
    char path[256];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    fclose(f);
}

static void add_entry(Akonnx__TensorProto *t, const char *k, const char *v) {
    Akonnx__StringStringEntryProto *e = talloc(sizeof *e);
    akonnx__string_string_entry_proto__init(e);
    e->key = tstr(k);
    e->value = tstr(v);
    PUSH(t->n_external_data, t->external_data, e);
}

/* A model whose one initializer W (3 floats) lives in an external file. */
static Akonnx__ModelProto *external_model(const char *location, const char *offset,
                                          const char *length) {
    Akonnx__GraphProto *g = graph("ext");
    PUSH(g->n_output, g->output, value_info("y", AK_ELEM_F32, 1, (int64_t[]){3}, NULL));
    Akonnx__TensorProto *w = tensor("W", AK_ELEM_F32, 1, (int64_t[]){3});
    w->has_data_location = 1;
    w->data_location = 1;
    add_entry(w, "location", location);
    if (offset) add_entry(w, "offset", offset);
    if (length) add_entry(w, "length", length);
    PUSH(g->n_initializer, g->initializer, w);
    node(g, "Identity", "id", "W", "y");
    return model(8, 13, g);
}

static void expect_external(const char *loc, const char *off, const char *len, ak_status want,
                            const char *needle) {
    ak_status st = load(external_model(loc, off, len), tmpdir, NULL);
    if (st != want || !strstr(ak_last_error(), needle))
        print_error("%s: wanted %s '%s', got %s: %s\n", loc, ak_status_str(want), needle,
                    ak_status_str(st), ak_last_error());
    assert_int_equal(st, want);
    assert_non_null(strstr(ak_last_error(), needle));
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    return remove(path);
}

static void test_external_data(void **state) {
    strcpy(tmpdir, "/tmp/ak_onnx_XXXXXX");
    assert_non_null(mkdtemp(tmpdir));
    const float data[5] = {-1, 10, 20, 30, -2};
    write_file("w.bin", data, sizeof data);
    char sub[128];
    snprintf(sub, sizeof sub, "%s/sub", tmpdir);
    assert_int_equal(mkdir(sub, 0700), 0);
    write_file("sub/w.bin", data, sizeof data);

    /* good: offset 4, 12 bytes; also through a sub-directory and "./" */
    ak_model *m;
    assert_int_equal(load(external_model("w.bin", "4", "12"), tmpdir, &m), AK_OK);
    const ak__ir_graph *g = m->graph;
    assert_memory_equal(g->values[ak__ir_value_find(g, "W")].constant->data, data + 1, 12);
    ak_model_free(m);
    assert_int_equal(load(external_model("./sub/w.bin", "8", NULL), tmpdir, NULL), AK_OK);

    /* the model file itself, loaded from disk, finds its data beside it */
    size_t len;
    uint8_t *bytes = pack(external_model("w.bin", "4", NULL), &len);
    write_file("model.onnx", bytes, len);
    char path[256];
    snprintf(path, sizeof path, "%s/model.onnx", tmpdir);
    assert_int_equal(ak_onnx_load_file(path, &m), AK_OK);
    ak_model_free(m);

    /* escapes and bad ranges */
    expect_external("../w.bin", NULL, NULL, AK_ERR_INVALID_MODEL, "leaves the model's directory");
    expect_external("sub/../../w.bin", NULL, NULL, AK_ERR_INVALID_MODEL, "'..'");
    expect_external("/etc/passwd", NULL, NULL, AK_ERR_INVALID_MODEL, "absolute");
    expect_external("", NULL, NULL, AK_ERR_INVALID_MODEL, "empty external location");
    expect_external("w.bin", "9", NULL, AK_ERR_INVALID_MODEL, "run past the end");
    expect_external("w.bin", "99999999999999999999", NULL, AK_ERR_INVALID_MODEL,
                    "not a non-negative integer");
    expect_external("w.bin", "-4", NULL, AK_ERR_INVALID_MODEL, "not a non-negative integer");
    expect_external("w.bin", "0", "8", AK_ERR_INVALID_MODEL, "external length says 8");
    expect_external("missing.bin", NULL, NULL, AK_ERR_IO, "cannot open external file");
    expect_external("sub", NULL, NULL, AK_ERR_INVALID_MODEL, "not a regular file");
    /* a symlink that points outside the directory */
    char link[256];
    snprintf(link, sizeof link, "%s/escape.bin", tmpdir);
    assert_int_equal(symlink("/etc/hostname", link), 0);
    ak_status st = load(external_model("escape.bin", NULL, NULL), tmpdir, NULL);
    assert_int_not_equal(st, AK_OK);
    /* from memory without a base directory */
    assert_int_equal(load(external_model("w.bin", NULL, NULL), NULL, NULL), AK_ERR_INVALID_ARG);
    nftw(tmpdir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
    pool_free();
}

/* Operator versions after 18 whose semantics changed are refused unless the definition
 * implements them; versions that only add types pass. */
static void test_version_changes(void **state) {
    (void)state;
    ak__ir_node n = {.name = "g", .op_type = "GroupNormalization", .domain = "", .opset = 21};
    ak__op_def old = {.domain = "", .op_type = "GroupNormalization", .min_opset = 18};
    assert_int_equal(ak__op_version_check(&n, &old), AK_ERR_UNSUPPORTED);
    assert_non_null(strstr(ak_last_error(), "GroupNormalization-21 at node g"));
    n.opset = 18;
    assert_int_equal(ak__op_version_check(&n, &old), AK_OK);
    n.opset = 21;
    old.min_opset = 21;
    assert_int_equal(ak__op_version_check(&n, &old), AK_OK);
    n.op_type = old.op_type = "DFT"; /* a change without a per-node condition */
    n.opset = 20;
    old.min_opset = 17;
    assert_int_equal(ak__op_version_check(&n, &old), AK_ERR_UNSUPPORTED);
    assert_non_null(strstr(ak_last_error(), "DFT-20"));
}

/* ---- rejected models ------------------------------------------------------------------------ */

static void test_versions(void **state) {
    Akonnx__ModelProto *m = tiny_model();
    m->ir_version = 2;
    expect_fail(m, AK_ERR_UNSUPPORTED, "IR version 2");
    m->ir_version = 11;
    expect_fail(m, AK_ERR_UNSUPPORTED, "IR version 11");
    m->ir_version = 10; /* IR 10 with opset 21 loads (4-bit types are refused by name) */
    m->opset_import[0]->version = 21;
    ak_model *ok = NULL;
    assert_int_equal(load(m, NULL, &ok), AK_OK);
    ak_model_free(ok);
    PUSH(m->graph->n_initializer, m->graph->initializer,
         tensor("Q4", 22, 1, (int64_t[]){2}));
    expect_fail(m, AK_ERR_UNSUPPORTED, "data type int4");
    m->graph->n_initializer--;
    m->ir_version = 8;
    m->opset_import[0]->version = 0;
    expect_fail(m, AK_ERR_INVALID_MODEL, "opset version 0");
    m->opset_import[0]->version = 22;
    expect_fail(m, AK_ERR_UNSUPPORTED, "opset 22");
    m->opset_import[0]->version = 13;
    m->opset_import[0]->domain = tstr("com.example");
    expect_fail(m, AK_ERR_INVALID_MODEL, "does not import");
    m->has_ir_version = 0;
    expect_fail(m, AK_ERR_INVALID_MODEL, "no ir_version");
    m->has_ir_version = 1;
    m->graph = NULL;
    expect_fail(m, AK_ERR_INVALID_MODEL, "no graph");
    pool_free();
}

static void test_graph_errors(void **state) {
    /* a cycle: a = Relu(b), b = Relu(a) */
    Akonnx__GraphProto *g = graph("cycle");
    PUSH(g->n_output, g->output, value_info("b", AK_ELEM_F32, -1, NULL, NULL));
    node(g, "Relu", "first", "b", "a");
    node(g, "Relu", "second", "a", "b");
    expect_fail(model(8, 13, g), AK_ERR_INVALID_MODEL, "cycle through node");
    /* a self-loop */
    g = graph("self");
    PUSH(g->n_output, g->output, value_info("a", AK_ELEM_F32, -1, NULL, NULL));
    node(g, "Add", "loop", "a,a", "a");
    expect_fail(model(8, 13, g), AK_ERR_INVALID_MODEL, "'loop' (Add)");
    /* an undefined input, named with its node */
    g = graph("undef");
    PUSH(g->n_output, g->output, value_info("y", AK_ELEM_F32, -1, NULL, NULL));
    node(g, "Relu", "r", "nowhere", "y");
    expect_fail(model(8, 13, g), AK_ERR_INVALID_MODEL, "'r' (Relu) reads 'nowhere'");
    /* two producers of one value */
    g = graph("dup");
    PUSH(g->n_input, g->input, value_info("x", AK_ELEM_F32, -1, NULL, NULL));
    PUSH(g->n_output, g->output, value_info("y", AK_ELEM_F32, -1, NULL, NULL));
    node(g, "Relu", "r1", "x", "y");
    node(g, "Relu", "r2", "x", "y");
    expect_fail(model(8, 13, g), AK_ERR_INVALID_MODEL, "already defines");
    /* an output nobody produces; a node without op_type; an attribute without a type */
    g = graph("noout");
    PUSH(g->n_output, g->output, value_info("ghost", AK_ELEM_F32, -1, NULL, NULL));
    expect_fail(model(8, 13, g), AK_ERR_INVALID_MODEL, "never produced");
    g = graph("noop");
    node(g, "", "x", "", "y");
    expect_fail(model(8, 13, g), AK_ERR_INVALID_MODEL, "no op_type");
    g = graph("attr");
    PUSH(g->n_input, g->input, value_info("x", AK_ELEM_F32, -1, NULL, NULL));
    attr(node(g, "Relu", "r", "x", "y"), "alpha", 0)->has_type = 0;
    expect_fail(model(8, 13, g), AK_ERR_INVALID_MODEL, "no valid type");
    pool_free();
}

static void test_hostile_tensors(void **state) {
    struct {
        int type, rank;
        int64_t dims[40];
        size_t raw;
        const char *needle;
        ak_status want;
    } cases[] = {
        {AK_ELEM_F32, 2, {(int64_t)1 << 40, (int64_t)1 << 20}, 0, "holds 0 values", AK_ERR_INVALID_MODEL},
        {AK_ELEM_F32, 3, {1 << 30, 1 << 30, 1 << 30}, 0, "overflows", AK_ERR_INVALID_MODEL},
        {AK_ELEM_F64, 2, {(int64_t)1 << 31, (int64_t)1 << 29}, 0, "too large", AK_ERR_INVALID_MODEL},
        {AK_ELEM_F32, 4, {INT64_MAX, INT64_MAX, 2, 2}, 0, "overflows", AK_ERR_INVALID_MODEL},
        {AK_ELEM_F32, 1, {-4}, 0, "negative dimension", AK_ERR_INVALID_MODEL},
        {AK_ELEM_F32, 1, {1000000}, 0, "holds 0 values in float_data", AK_ERR_INVALID_MODEL},
        {AK_ELEM_F32, 1, {3}, 8, "raw data has 8", AK_ERR_INVALID_MODEL},
        {AK_ELEM_STRING, 1, {1}, 1, "cannot use raw_data", AK_ERR_INVALID_MODEL},
        {AK_ELEM_F32, 40, {0}, 0, "rank 40", AK_ERR_INVALID_MODEL},
        {99, 1, {1}, 4, "data type 99", AK_ERR_UNSUPPORTED},
        {0, 1, {1}, 4, "no data type", AK_ERR_INVALID_MODEL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        Akonnx__ModelProto *m = tiny_model();
        Akonnx__TensorProto *t = tensor("W", cases[i].type, cases[i].rank, cases[i].dims);
        if (cases[i].raw) {
            uint8_t zeros[8] = {0};
            set_raw(t, zeros, cases[i].raw);
        }
        m->graph->initializer[0] = t;
        expect_fail(m, cases[i].want, cases[i].needle);
    }
    /* the same checks guard tensors inside attributes */
    Akonnx__ModelProto *m = tiny_model();
    Akonnx__AttributeProto *a = attr(m->graph->node[0], "value", AK_ATTR_TENSOR);
    a->t = tensor("v", AK_ELEM_I64, 1, (int64_t[]){-1});
    expect_fail(m, AK_ERR_INVALID_MODEL, "negative dimension");
    /* an unknown data_location */
    m = tiny_model();
    m->graph->initializer[0]->has_data_location = 1;
    m->graph->initializer[0]->data_location = 7;
    expect_fail(m, AK_ERR_INVALID_MODEL, "data_location 7");
    pool_free();
}

/* ---- hostile bytes -------------------------------------------------------------------------- */

typedef struct buf {
    uint8_t *p;
    size_t n;
} buf;

static void put_varint(buf *b, uint64_t v) {
    b->p = realloc(b->p, b->n + 10);
    assert_non_null(b->p);
    do {
        b->p[b->n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
}

/* Wraps b as length-delimited field `field` (in place). */
static void wrap(buf *b, unsigned field) {
    buf out = {NULL, 0};
    put_varint(&out, (uint64_t)field << 3 | 2);
    put_varint(&out, b->n);
    out.p = realloc(out.p, out.n + b->n + 1);
    assert_non_null(out.p);
    if (b->n) memcpy(out.p + out.n, b->p, b->n);
    out.n += b->n;
    free(b->p);
    *b = out;
}

static ak_status load_buf(const buf *b) {
    /* ir_version 8, then the payload */
    uint8_t *data = malloc(b->n + 2);
    assert_non_null(data);
    data[0] = 0x08;
    data[1] = 8;
    if (b->n) memcpy(data + 2, b->p, b->n);
    ak_model *m = NULL;
    ak_status st = ak_onnx_load_bytes(data, b->n + 2, NULL, &m);
    ak_model_free(m);
    free(data);
    return st;
}

static void test_deep_nesting(void **state) {
    /* 20000 levels of Graph > Node > Attribute > Graph: protobuf-c alone would recurse
     * 60000 frames deep */
    buf b = {NULL, 0};
    for (int i = 0; i < 20000; i++) {
        wrap(&b, 6); /* AttributeProto.g */
        wrap(&b, 5); /* NodeProto.attribute */
        wrap(&b, 1); /* GraphProto.node */
    }
    wrap(&b, 7); /* ModelProto.graph */
    assert_int_equal(load_buf(&b), AK_ERR_INVALID_MODEL);
    assert_non_null(strstr(ak_last_error(), "nested deeper"));
    free(b.p);
    /* TypeProto recursion: sequence of sequence of ... */
    b = (buf){NULL, 0};
    for (int i = 0; i < 50000; i++) {
        wrap(&b, 1); /* Sequence.elem_type */
        wrap(&b, 4); /* TypeProto.sequence_type */
    }
    wrap(&b, 2);  /* ValueInfoProto.type */
    wrap(&b, 11); /* GraphProto.input */
    wrap(&b, 7);
    assert_int_equal(load_buf(&b), AK_ERR_INVALID_MODEL);
    free(b.p);
}

static void test_allocation_bomb(void **state) {
    /* 2 million empty attributes (4 MB) would decode into ~400 MB of structs */
    buf b = {NULL, 0};
    size_t n = 2000000;
    b.p = malloc(2 * n);
    assert_non_null(b.p);
    for (size_t i = 0; i < n; i++) {
        b.p[2 * i] = 5 << 3 | 2; /* NodeProto.attribute, length 0 */
        b.p[2 * i + 1] = 0;
    }
    b.n = 2 * n;
    wrap(&b, 1); /* GraphProto.node */
    wrap(&b, 7);
    assert_int_equal(load_buf(&b), AK_ERR_INVALID_MODEL);
    assert_non_null(strstr(ak_last_error(), "memory"));
    free(b.p);
}

static void test_malformed_bytes(void **state) {
    ak_model *m = NULL;
    assert_int_equal(ak_onnx_load_bytes("", 0, NULL, &m), AK_ERR_INVALID_MODEL);
    const uint8_t junk[][12] = {
        {0x3a, 0xff, 0xff, 0xff, 0xff, 0x0f},                  /* graph longer than data */
        {0x3a, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}, /* varint */
        {0x08},                                                /* truncated ir_version */
        {0x0b, 0x00},                                          /* group wire type */
        {0x00, 0x00},                                          /* field number 0 */
        {0x0d, 0x01, 0x02},                                    /* truncated fixed32 */
    };
    size_t lens[] = {6, 12, 1, 2, 2, 3};
    for (size_t i = 0; i < sizeof lens / sizeof *lens; i++) {
        assert_int_equal(ak_onnx_load_bytes(junk[i], lens[i], NULL, &m), AK_ERR_INVALID_MODEL);
        assert_null(m);
    }
    assert_int_equal(ak_onnx_load_bytes(NULL, 4, NULL, &m), AK_ERR_INVALID_ARG);
    assert_int_equal(ak_onnx_load_file("/nonexistent/model.onnx", &m), AK_ERR_IO);
    assert_int_equal(ak_onnx_load_file("/tmp", &m), AK_ERR_IO);
}

/* Every prefix and every single-bit flip of a valid model: a status, never a crash (the
 * sanitizer build checks for memory errors on the way). */
static void test_truncation_and_bitflips(void **state) {
    Akonnx__ModelProto *mp = tiny_model();
    /* an If with a subgraph and an attribute tensor, so flips reach those paths too */
    Akonnx__NodeProto *c = node(mp->graph, "Constant", "k", "", "kc");
    Akonnx__AttributeProto *a = attr(c, "value", AK_ATTR_TENSOR);
    a->t = tensor("kv", AK_ELEM_I64, 1, (int64_t[]){2});
    a->t->n_int64_data = 2;
    a->t->int64_data = talloc(2 * sizeof(int64_t));
    Akonnx__NodeProto *iff = node(mp->graph, "If", "if", "kc", "w");
    Akonnx__GraphProto *body = graph("b");
    node(body, "Neg", "", "Z", "o");
    PUSH(body->n_output, body->output, value_info("o", AK_ELEM_F32, -1, NULL, NULL));
    attr(iff, "then_branch", AK_ATTR_GRAPH)->g = body;
    attr(iff, "else_branch", AK_ATTR_GRAPH)->g = body;
    size_t len;
    uint8_t *good = pack(mp, &len);
    ak_model *m;
    assert_int_equal(ak_onnx_load_bytes(good, len, NULL, &m), AK_OK);
    ak_model_free(m);
    uint8_t *copy = malloc(len);
    assert_non_null(copy);
    size_t ok = 0;
    for (size_t cut = 0; cut < len; cut++) {
        memcpy(copy, good, cut);
        ak_status st = ak_onnx_load_bytes(copy, cut, NULL, &m);
        assert_true(st == AK_OK || st == AK_ERR_INVALID_MODEL || st == AK_ERR_UNSUPPORTED);
        ok += st == AK_OK;
        ak_model_free(m);
    }
    for (size_t bit = 0; bit < len * 8; bit++) {
        memcpy(copy, good, len);
        copy[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        ak_status st = ak_onnx_load_bytes(copy, len, NULL, &m);
        assert_true(st == AK_OK || st == AK_ERR_INVALID_MODEL || st == AK_ERR_UNSUPPORTED ||
                    st == AK_ERR_INVALID_ARG /* a flip into external data */);
        if (st == AK_OK) {
            ak_model_summary s;
            assert_int_equal(ak_model_get_summary(m, &s), AK_OK);
            ak_model_flops f;
            assert_int_equal(ak_model_get_flops(m, &f), AK_OK);
        }
        ak_model_free(m);
    }
    print_message("model of %zu bytes: %zu truncations and %zu bit flips, no crash\n", len, len,
                  len * 8);
    free(copy);
    pool_free();
}

/* ---- Debian libonnx-testdata ------------------------------------------------------------ */

#define TESTDATA "/usr/share/libonnx-testdata/data"

static struct {
    size_t seen, loaded, unsupported, invalid, other;
} corpus;

static int load_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    if (flag != FTW_F || strcmp(path + ftw->base, "model.onnx") != 0) return 0;
    corpus.seen++;
    ak_model *m;
    ak_status st = ak_onnx_load_file(path, &m);
    if (st == AK_OK) {
        ak_model_summary s;
        ak_model_flops f;
        if (ak_model_get_summary(m, &s) != AK_OK || ak_model_get_flops(m, &f) != AK_OK) corpus.other++;
        else corpus.loaded++;
        ak_model_free(m);
        return 0;
    }
    /* the only expected refusals: opsets and IR versions outside accelkit's range */
    if (st == AK_ERR_UNSUPPORTED && (strstr(ak_last_error(), "opset") ||
                                     strstr(ak_last_error(), "IR version")))
        corpus.unsupported++;
    else {
        corpus.other++;
        print_message("%s: %s: %s\n", path, ak_status_str(st), ak_last_error());
    }
    return 0;
}

static void test_libonnx_testdata(void **state) {
    struct stat sb;
    if (stat(TESTDATA, &sb) != 0) {
        print_message("SKIP: %s is absent (Debian package libonnx-testdata; scripts/setup "
                      "installs it)\n", TESTDATA);
        skip();
    }
    memset(&corpus, 0, sizeof corpus);
    assert_int_equal(nftw(TESTDATA, load_one, 16, FTW_PHYS), 0);
    print_message("libonnx-testdata: %zu models, %zu loaded, %zu refused as unsupported "
                  "(opset/IR version out of range), %zu other failures\n",
                  corpus.seen, corpus.loaded, corpus.unsupported, corpus.other);
    assert_true(corpus.seen > 0);
    assert_int_equal(corpus.other, 0);
    /* every model of libonnx-testdata 1.12 (opsets 1-17, IR 3-8) loads */
    assert_int_equal(corpus.loaded, corpus.seen);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tiny_model),
        cmocka_unit_test(test_flops_static),
        cmocka_unit_test(test_typed_fields),
        cmocka_unit_test(test_subgraph_captures),
        cmocka_unit_test(test_metadata),
        cmocka_unit_test(test_run_into),
        cmocka_unit_test(test_override_initializer),
        cmocka_unit_test(test_end_profiling),
        cmocka_unit_test(test_external_data),
        cmocka_unit_test(test_versions),
        cmocka_unit_test(test_version_changes),
        cmocka_unit_test(test_graph_errors),
        cmocka_unit_test(test_hostile_tensors),
        cmocka_unit_test(test_deep_nesting),
        cmocka_unit_test(test_allocation_bomb),
        cmocka_unit_test(test_malformed_bytes),
        cmocka_unit_test(test_truncation_and_bitflips),
        cmocka_unit_test(test_libonnx_testdata),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
