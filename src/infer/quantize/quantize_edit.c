/* Small graph edits for the quantizer: new values, constants and nodes appended to a
 * loaded model's graph, and readers moved from one value to another. The graph is the
 * quantizer's private copy; the writer puts the nodes back in topological order. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "infer/quantize/quantize.h"

ak_status ak__qz_value(ak__ir_graph *g, const char *base, const char *suffix, int32_t *out) {
    size_t len = strlen(base) + strlen(suffix) + 24;
    char *name = malloc(len);
    if (!name) return AK_FAIL(AK_ERR_NO_MEMORY, "quantize: out of memory");
    snprintf(name, len, "%s%s", base, suffix);
    for (int k = 2; ak__ir_value_find(g, name) != AK_IR_NONE; k++)
        snprintf(name, len, "%s%s_%d", base, suffix, k);
    ak_status st = ak__ir_value_add(g, name, out);
    free(name);
    if (st == AK_OK) g->values[*out].kind = AK_VALUE_TENSOR;
    return st;
}

ak_status ak__qz_constant(ak__ir_graph *g, const char *base, const char *suffix,
                          ak_elem_type type, int rank, const int64_t *dims, const void *data,
                          int32_t *out) {
    uint64_t count = 1;
    for (int i = 0; i < rank; i++) count *= (uint64_t)dims[i];
    size_t nbytes = (size_t)count * ak_elem_type_size(type);
    ak__ir_tensor *t;
    int64_t *d = NULL;
    void *payload;
    AK_CHECK(ak__ir_alloc(g, sizeof *t, (void **)&t));
    if (rank) AK_CHECK(ak__ir_alloc_array(g, (size_t)rank, sizeof *d, (void **)&d));
    AK_CHECK(ak__ir_alloc_payload(g, nbytes ? nbytes : 1, &payload));
    if (rank) memcpy(d, dims, (size_t)rank * sizeof *d);
    memcpy(payload, data, nbytes);
    *t = (ak__ir_tensor){type, rank, d, count, nbytes, payload};
    AK_CHECK(ak__qz_value(g, base, suffix, out));
    ak__ir_value *v = &g->values[*out];
    v->flags |= AK_IR_VALUE_CONST;
    v->constant = t;
    v->type = type;
    return AK_OK;
}

static int node_name_taken(const ak__ir_graph *g, const char *name) {
    for (size_t k = 0; k < g->num_nodes; k++)
        if (!strcmp(g->nodes[k].name, name)) return 1;
    return 0;
}

/* base_OpType, made unique among the graph's node names with a counter. */
static ak_status node_name(ak__ir_graph *g, const char *base, const char *op_type,
                           const char **out) {
    size_t len = strlen(base) + strlen(op_type) + 24;
    char *name = malloc(len);
    if (!name) return AK_FAIL(AK_ERR_NO_MEMORY, "quantize: out of memory");
    snprintf(name, len, "%s_%s", base, op_type);
    for (int k = 2; node_name_taken(g, name); k++) snprintf(name, len, "%s_%s_%d", base, op_type, k);
    ak_status st = ak__ir_strdup(g, name, out);
    free(name);
    return st;
}

ak_status ak__qz_node(ak__ir_graph *g, const char *op_type, const char *name,
                      const int32_t *ins, uint32_t num_ins, const int32_t *outs,
                      uint32_t num_outs, int32_t *out) {
    int32_t *in_copy, *out_copy;
    const char *op, *nm;
    AK_CHECK(ak__ir_alloc_array(g, num_ins, sizeof *in_copy, (void **)&in_copy));
    AK_CHECK(ak__ir_alloc_array(g, num_outs, sizeof *out_copy, (void **)&out_copy));
    AK_CHECK(ak__ir_strdup(g, op_type, &op));
    AK_CHECK(node_name(g, name, op_type, &nm));
    memcpy(in_copy, ins, num_ins * sizeof *ins);
    memcpy(out_copy, outs, num_outs * sizeof *outs);
    int32_t k;
    AK_CHECK(ak__ir_node_add(g, &k));
    ak__ir_node *n = ak__ir_node_at(g, k);
    n->name = nm;
    n->op_type = op;
    n->domain = "";
    n->opset = 0; /* not written: the file's opset imports say it, read back on loading */
    n->num_inputs = num_ins;
    n->num_outputs = num_outs;
    n->inputs = in_copy;
    n->outputs = out_copy;
    for (uint32_t i = 0; i < num_outs; i++)
        if (outs[i] != AK_IR_NONE) g->values[outs[i]].producer = k;
    if (out) *out = k;
    return AK_OK;
}

ak_status ak__qz_int_attr(ak__ir_graph *g, int32_t k, const char *name, int64_t value) {
    ak__ir_attr *a;
    AK_CHECK(ak__ir_alloc(g, sizeof *a, (void **)&a));
    AK_CHECK(ak__ir_strdup(g, name, &a->name));
    a->type = AK_ATTR_INT;
    a->u.i = value;
    ak__ir_node *n = ak__ir_node_at(g, k);
    n->attrs = a;
    n->num_attrs = 1;
    return AK_OK;
}

size_t ak__qz_readers(const ak__ir_graph *g, int32_t v, int32_t skip) {
    size_t count = 0;
    for (size_t k = 0; k < g->num_nodes; k++) {
        if ((int32_t)k == skip) continue;
        const ak__ir_node *n = &g->nodes[k];
        for (uint32_t i = 0; i < n->num_inputs; i++) count += n->inputs[i] == v;
        for (uint32_t i = 0; i < n->num_captures; i++) count += n->captures[i] == v;
    }
    return count;
}

void ak__qz_rewire(ak__ir_graph *g, int32_t from, int32_t to, int32_t skip) {
    for (size_t k = 0; k < g->num_nodes; k++) {
        if ((int32_t)k == skip) continue;
        ak__ir_node *n = &g->nodes[k];
        for (uint32_t i = 0; i < n->num_inputs; i++)
            if (n->inputs[i] == from) n->inputs[i] = to;
    }
}

int ak__qz_is_graph_output(const ak__ir_graph *g, int32_t v) {
    for (size_t i = 0; i < g->num_outputs; i++)
        if (g->outputs[i] == v) return 1;
    return 0;
}
