/* Tests of the ONNX writer (src/infer/onnx/onnx_write.c): every model.onnx of Debian's
 * libonnx-testdata is loaded, written with no pass applied, and loaded again, and the two
 * IR graphs must be the same (versions, opsets, nodes in order with every attribute,
 * subgraphs included, initializers byte for byte, inputs and outputs with types and
 * shapes); writing the reloaded model again must give the same bytes. Also: the optimized
 * graph a session writes reloads and runs, and bad optimizer levels are refused. */
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
#include "infer/onnx/onnx_write.h"

#define TESTDATA "/usr/share/libonnx-testdata/data"

/* ---- comparing two IR graphs --------------------------------------------------------------
 * Each check returns NULL when equal, else what differs (a static message). */

static const char *vname(const ak__ir_graph *g, int32_t v) { return v == AK_IR_NONE ? "" : g->values[v].name; }

static const char *same_tensor(const ak__ir_tensor *a, const ak__ir_tensor *b) {
    if (a->type != b->type || a->rank != b->rank || a->count != b->count) return "tensor type or shape";
    for (int d = 0; d < a->rank; d++)
        if (a->dims[d] != b->dims[d]) return "tensor dims";
    if (a->type == AK_ELEM_STRING) {
        const ak__ir_bytes *x = a->data, *y = b->data;
        for (uint64_t i = 0; i < a->count; i++)
            if (x[i].len != y[i].len || memcmp(x[i].data, y[i].data, x[i].len)) return "string data";
        return NULL;
    }
    size_t n = (size_t)a->count * ak_elem_type_size(a->type);
    return n && memcmp(a->data, b->data, n) ? "tensor data" : NULL;
}

static const char *same_graph(const ak__ir_graph *a, const ak__ir_graph *b);

static const char *same_attr(const ak__ir_attr *x, const ak__ir_attr *y) {
    if (strcmp(x->name, y->name) || x->type != y->type || x->count != y->count) return "attribute kind";
    const char *why = NULL;
    switch (x->type) {
    case AK_ATTR_FLOAT: return memcmp(&x->u.f, &y->u.f, 4) ? "float attribute" : NULL;
    case AK_ATTR_INT: return x->u.i != y->u.i ? "int attribute" : NULL;
    case AK_ATTR_STRING:
    case AK_ATTR_TYPE_PROTO: /* kept serialized */
        return x->u.s.len != y->u.s.len || memcmp(x->u.s.data, y->u.s.data, x->u.s.len) ? "string attribute" : NULL;
    case AK_ATTR_TENSOR: return same_tensor(x->u.t, y->u.t);
    case AK_ATTR_GRAPH: return same_graph(x->u.g, y->u.g);
    case AK_ATTR_FLOATS: return memcmp(x->u.floats, y->u.floats, x->count * 4) ? "floats attribute" : NULL;
    case AK_ATTR_INTS: return memcmp(x->u.ints, y->u.ints, x->count * 8) ? "ints attribute" : NULL;
    case AK_ATTR_STRINGS:
    case AK_ATTR_TYPE_PROTOS:
        for (size_t i = 0; i < x->count; i++)
            if (x->u.strings[i].len != y->u.strings[i].len ||
                memcmp(x->u.strings[i].data, y->u.strings[i].data, x->u.strings[i].len))
                return "strings attribute";
        return NULL;
    case AK_ATTR_TENSORS:
        for (size_t i = 0; !why && i < x->count; i++) why = same_tensor(x->u.tensors[i], y->u.tensors[i]);
        return why;
    case AK_ATTR_GRAPHS:
        for (size_t i = 0; !why && i < x->count; i++) why = same_graph(x->u.graphs[i], y->u.graphs[i]);
        return why;
    default: return NULL;
    }
}

static const char *same_node(const ak__ir_graph *ga, const ak__ir_node *a, const ak__ir_graph *gb,
                             const ak__ir_node *b) {
    if (strcmp(a->name, b->name) || strcmp(a->op_type, b->op_type) || strcmp(a->domain, b->domain) ||
        a->opset != b->opset)
        return "node name, operator, domain or opset";
    if (a->num_inputs != b->num_inputs || a->num_outputs != b->num_outputs || a->num_attrs != b->num_attrs ||
        a->num_captures != b->num_captures)
        return "node arity";
    for (uint32_t i = 0; i < a->num_inputs; i++)
        if (strcmp(vname(ga, a->inputs[i]), vname(gb, b->inputs[i]))) return "node input";
    for (uint32_t i = 0; i < a->num_outputs; i++)
        if (strcmp(vname(ga, a->outputs[i]), vname(gb, b->outputs[i]))) return "node output";
    for (uint32_t i = 0; i < a->num_attrs; i++) {
        const char *why = same_attr(&a->attrs[i], &b->attrs[i]);
        if (why) return why;
    }
    return NULL;
}

static const char *same_value(const ak__ir_value *a, const ak__ir_value *b) {
    if (strcmp(a->name, b->name) || a->kind != b->kind || a->type != b->type || a->rank != b->rank ||
        (a->flags & ~AK_IR_VALUE_OUTER) != (b->flags & ~AK_IR_VALUE_OUTER))
        return "value name, kind, type, rank or role";
    for (int d = 0; d < a->rank; d++) {
        const char *pa = a->dims[d].param ? a->dims[d].param : "", *pb = b->dims[d].param ? b->dims[d].param : "";
        if (a->dims[d].value != b->dims[d].value || strcmp(pa, pb)) return "value dims";
    }
    if ((a->flags & AK_IR_VALUE_CONST) && same_tensor(a->constant, b->constant)) return "initializer";
    return NULL;
}

static const char *same_graph(const ak__ir_graph *a, const ak__ir_graph *b) {
    if (strcmp(a->name, b->name)) return "graph name";
    if (a->num_nodes != b->num_nodes || a->num_inputs != b->num_inputs || a->num_outputs != b->num_outputs ||
        a->num_captures != b->num_captures)
        return "graph sizes";
    for (size_t k = 0; k < a->num_nodes; k++) {
        const char *why = same_node(a, &a->nodes[a->order[k]], b, &b->nodes[b->order[k]]);
        if (why) return why;
    }
    for (size_t i = 0; i < a->num_inputs; i++)
        if (same_value(&a->values[a->inputs[i]], &b->values[b->inputs[i]])) return "graph input";
    for (size_t i = 0; i < a->num_outputs; i++)
        if (same_value(&a->values[a->outputs[i]], &b->values[b->outputs[i]])) return "graph output";
    /* every value (initializers and intermediate types included), matched by name */
    for (size_t v = 0; v < a->num_values; v++) {
        int32_t w = ak__ir_value_find(b, a->values[v].name);
        if (w == AK_IR_NONE) return "a value is missing";
        const char *why = same_value(&a->values[v], &b->values[w]);
        if (why) return why;
    }
    return a->num_values == b->num_values ? NULL : "value count";
}

static const char *same_model(const ak_model *a, const ak_model *b) {
    if (a->ir_version != b->ir_version || a->model_version != b->model_version ||
        strcmp(a->producer_name, b->producer_name) || strcmp(a->producer_version, b->producer_version))
        return "model header";
    if (a->num_opsets != b->num_opsets) return "opset count";
    for (size_t i = 0; i < a->num_opsets; i++)
        if (ak__model_opset(b, a->opsets[i].domain) != a->opsets[i].version) return "opset import";
    return same_graph(a->graph, b->graph);
}

/* ---- the corpus round trip ------------------------------------------------------------------ */

static struct {
    size_t seen, same, refused, failed;
} corpus;

static int round_trip(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    if (flag != FTW_F || strcmp(path + ftw->base, "model.onnx") != 0) return 0;
    corpus.seen++;
    ak_model *a = NULL, *b = NULL;
    uint8_t *bytes = NULL, *again = NULL;
    size_t n = 0, n2 = 0;
    const char *why = NULL;
    if (ak_onnx_load_file(path, &a) != AK_OK) {
        corpus.refused++; /* the loader's own test accounts for these */
        return 0;
    }
    if (ak__onnx_write_model(a, NULL, &bytes, &n) != AK_OK) why = ak_last_error();
    else if (ak_onnx_load_bytes(bytes, n, NULL, &b) != AK_OK) why = ak_last_error();
    else if ((why = same_model(a, b)) == NULL) {
        if (ak__onnx_write_model(b, NULL, &again, &n2) != AK_OK) why = ak_last_error();
        else if (n2 != n || memcmp(bytes, again, n)) why = "writing the reloaded model gives other bytes";
    }
    if (why) {
        corpus.failed++;
        print_message("%s: %s\n", path, why);
    } else {
        corpus.same++;
    }
    free(bytes);
    free(again);
    ak_model_free(a);
    ak_model_free(b);
    return 0;
}

static void test_round_trip_corpus(void **state) {
    (void)state;
    struct stat sb;
    if (stat(TESTDATA, &sb) != 0)
        fail_msg("%s is absent: install Debian's libonnx-testdata (scripts/setup)", TESTDATA);
    memset(&corpus, 0, sizeof corpus);
    assert_int_equal(nftw(TESTDATA, round_trip, 16, FTW_PHYS), 0);
    print_message("libonnx-testdata round trip: %zu models, %zu the same, %zu not loaded, %zu differ\n",
                  corpus.seen, corpus.same, corpus.refused, corpus.failed);
    assert_true(corpus.same > 1000);
    assert_int_equal(corpus.failed, 0);
}

/* ---- sessions: the optimized graph written, reloaded and run ----------------------------- */

/* A model with a subgraph (If) and a dead node, from the corpus, through the optimizer. */
static void test_session_save(void **state) {
    (void)state;
    const char *src = TESTDATA "/node/test_if/model.onnx";
    char out[] = "/tmp/ak-test-write-XXXXXX";
    int fd = mkstemp(out);
    assert_true(fd >= 0);
    close(fd);
    ak_session *s;
    assert_int_equal(ak_session_create_from_file(src, NULL, &s), AK_OK);
    assert_int_equal(ak_session_save_optimized(s, out), AK_OK);
    ak_session *r;
    assert_int_equal(ak_session_create_from_file(out, NULL, &r), AK_OK);
    assert_int_equal(ak_model_get_summary(ak_session_model(r), &(ak_model_summary){0}), AK_OK);
    ak_session_free(r);
    ak_session_free(s);
    unlink(out);
}

static void test_bad_level(void **state) {
    (void)state;
    ak_model *m;
    assert_int_equal(ak_onnx_load_file(TESTDATA "/node/test_relu/model.onnx", &m), AK_OK);
    ak_session_options o;
    ak_session_options_init(&o);
    o.optimize = 4;
    ak_session *s = NULL;
    assert_int_equal(ak_session_create(m, &o, &s), AK_ERR_INVALID_ARG);
    assert_non_null(strstr(ak_last_error(), "optimize 4"));
    assert_null(s);
    ak_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_corpus),
        cmocka_unit_test(test_session_save),
        cmocka_unit_test(test_bad_level),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
