/* The public model handle: summaries built after loading (inputs, outputs, operator
 * histogram, parameter totals) and the query calls of accelkit/infer.h. */
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "infer/model.h"

int64_t ak__model_opset(const ak_model *model, const char *domain) {
    for (size_t i = 0; i < model->num_opsets; i++)
        if (strcmp(model->opsets[i].domain, domain) == 0) return model->opsets[i].version;
    return 0;
}

/* Public description of value vi; the arrays live in the graph's arena. */
static ak_status describe_value(ak__ir_graph *g, int32_t vi, ak_value_info *out) {
    const ak__ir_value *v = &g->values[vi];
    out->name = v->name;
    out->kind = v->kind;
    out->type = v->type;
    out->rank = v->rank;
    if (v->rank <= 0) return AK_OK;
    int64_t *dims;
    const char **names;
    AK_CHECK(ak__ir_alloc_array(g, (size_t)v->rank, sizeof *dims, (void **)&dims));
    AK_CHECK(ak__ir_alloc_array(g, (size_t)v->rank, sizeof *names, (void **)&names));
    for (int i = 0; i < v->rank; i++) {
        dims[i] = v->dims[i].value;
        names[i] = v->dims[i].param;
    }
    out->dims = dims;
    out->dim_names = names;
    return AK_OK;
}

static ak_status build_io(ak_model *m) {
    ak__ir_graph *g = m->graph;
    AK_CHECK(ak__ir_alloc_array(g, g->num_inputs, sizeof *m->inputs, (void **)&m->inputs));
    AK_CHECK(ak__ir_alloc_array(g, g->num_outputs, sizeof *m->outputs, (void **)&m->outputs));
    AK_CHECK(ak__ir_alloc_array(g, g->num_inputs, sizeof *m->overridable,
                                (void **)&m->overridable));
    for (size_t i = 0; i < g->num_inputs; i++) {
        /* inputs backed by an initializer are weights with an overridable default, not
         * something a caller has to feed (IR < 4 lists every weight as an input) */
        if (g->values[g->inputs[i]].flags & AK_IR_VALUE_CONST) {
            AK_CHECK(describe_value(g, g->inputs[i], &m->overridable[m->num_overridable++]));
            continue;
        }
        AK_CHECK(describe_value(g, g->inputs[i], &m->inputs[m->num_inputs++]));
    }
    for (size_t i = 0; i < g->num_outputs; i++)
        AK_CHECK(describe_value(g, g->outputs[i], &m->outputs[m->num_outputs++]));
    return AK_OK;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Sorts by count, most frequent first, then by name. */
typedef struct op_entry {
    const char *name;
    size_t count;
} op_entry;

static int cmp_op(const void *a, const void *b) {
    const op_entry *x = a, *y = b;
    if (x->count != y->count) return x->count < y->count ? 1 : -1;
    return strcmp(x->name, y->name);
}

static ak_status build_histogram(ak_model *m) {
    ak__ir_graph *g = m->graph;
    size_t n = g->num_nodes;
    const char **keys;
    AK_CHECK(ak__ir_alloc_array(g, n, sizeof *keys, (void **)&keys));
    for (size_t i = 0; i < n; i++) {
        const ak__ir_node *node = &g->nodes[i];
        if (!node->domain[0]) {
            keys[i] = node->op_type;
            continue;
        }
        size_t len = strlen(node->domain) + 1 + strlen(node->op_type);
        char *k;
        AK_CHECK(ak__ir_alloc(g, len + 1, (void **)&k));
        strcpy(k, node->domain);
        strcat(k, ":");
        strcat(k, node->op_type);
        keys[i] = k;
    }
    qsort(keys, n, sizeof *keys, cmp_str);
    op_entry *ops;
    AK_CHECK(ak__ir_alloc_array(g, n, sizeof *ops, (void **)&ops));
    size_t nops = 0;
    for (size_t i = 0; i < n; i++) {
        if (nops && strcmp(ops[nops - 1].name, keys[i]) == 0) ops[nops - 1].count++;
        else ops[nops++] = (op_entry){keys[i], 1};
    }
    qsort(ops, nops, sizeof *ops, cmp_op);
    AK_CHECK(ak__ir_alloc_array(g, nops, sizeof *m->op_names, (void **)&m->op_names));
    AK_CHECK(ak__ir_alloc_array(g, nops, sizeof *m->op_counts, (void **)&m->op_counts));
    for (size_t i = 0; i < nops; i++) {
        m->op_names[i] = ops[i].name;
        m->op_counts[i] = ops[i].count;
    }
    m->num_op_types = nops;
    return AK_OK;
}

ak_status ak__model_finish(ak_model *m) {
    ak__ir_graph *g = m->graph;
    AK_CHECK(build_io(m));
    AK_CHECK(build_histogram(m));
    for (size_t i = 0; i < g->num_values; i++) {
        const ak__ir_tensor *t = g->values[i].constant;
        if (!t || (g->values[i].flags & AK_IR_VALUE_OUTER)) continue;
        m->num_initializers++;
        m->num_params += t->count;
        m->param_bytes += t->nbytes;
    }
    for (size_t i = 0; i < g->num_subgraphs; i++) m->num_subgraph_nodes += g->subgraphs[i]->num_nodes;
    return AK_OK;
}

/* ---- public queries ------------------------------------------------------------------ */

void ak_model_free(ak_model *model) {
    if (!model) return;
    ak__ir_graph_free(model->graph);
    free(model);
}

ak_status ak_model_get_summary(const ak_model *m, ak_model_summary *out) {
    AK_ARG_CHECK(m && out, "ak_model_get_summary: NULL argument");
    memset(out, 0, sizeof *out);
    out->ir_version = m->ir_version;
    out->model_version = m->model_version;
    out->producer_name = m->producer_name;
    out->producer_version = m->producer_version;
    out->graph_name = m->graph->name;
    out->num_opsets = m->num_opsets;
    out->num_inputs = m->num_inputs;
    out->num_outputs = m->num_outputs;
    out->num_nodes = m->graph->num_nodes;
    out->num_subgraph_nodes = m->num_subgraph_nodes;
    out->num_op_types = m->num_op_types;
    out->num_initializers = m->num_initializers;
    out->num_params = m->num_params;
    out->param_bytes = m->param_bytes;
    return AK_OK;
}

ak_status ak_model_opset(const ak_model *m, size_t i, const char **domain, int64_t *version) {
    AK_ARG_CHECK(m && domain && version, "ak_model_opset: NULL argument");
    AK_ARG_CHECK(i < m->num_opsets, "ak_model_opset: index %zu of %zu", i, m->num_opsets);
    *domain = m->opsets[i].domain;
    *version = m->opsets[i].version;
    return AK_OK;
}

ak_status ak_model_input(const ak_model *m, size_t i, ak_value_info *out) {
    AK_ARG_CHECK(m && out, "ak_model_input: NULL argument");
    AK_ARG_CHECK(i < m->num_inputs, "ak_model_input: index %zu of %zu", i, m->num_inputs);
    *out = m->inputs[i];
    return AK_OK;
}

ak_status ak_model_output(const ak_model *m, size_t i, ak_value_info *out) {
    AK_ARG_CHECK(m && out, "ak_model_output: NULL argument");
    AK_ARG_CHECK(i < m->num_outputs, "ak_model_output: index %zu of %zu", i, m->num_outputs);
    *out = m->outputs[i];
    return AK_OK;
}

ak_status ak_model_op_count(const ak_model *m, size_t i, const char **op_type, size_t *count) {
    AK_ARG_CHECK(m && op_type && count, "ak_model_op_count: NULL argument");
    AK_ARG_CHECK(i < m->num_op_types, "ak_model_op_count: index %zu of %zu", i, m->num_op_types);
    *op_type = m->op_names[i];
    *count = m->op_counts[i];
    return AK_OK;
}

ak_status ak_model_get_metadata(const ak_model *m, ak_model_metadata *out) {
    AK_ARG_CHECK(m && out, "ak_model_get_metadata: NULL argument");
    out->domain = m->domain ? m->domain : "";
    out->description = m->description ? m->description : "";
    out->graph_description = m->graph_description ? m->graph_description : "";
    out->num_props = m->num_props;
    out->num_overridable = m->num_overridable;
    return AK_OK;
}

ak_status ak_model_metadata_prop(const ak_model *m, size_t i, const char **key,
                                 const char **value) {
    AK_ARG_CHECK(m && key && value, "ak_model_metadata_prop: NULL argument");
    AK_ARG_CHECK(i < m->num_props, "ak_model_metadata_prop: index %zu of %zu", i, m->num_props);
    *key = m->prop_keys[i];
    *value = m->prop_values[i];
    return AK_OK;
}

ak_status ak_model_overridable(const ak_model *m, size_t i, ak_value_info *out) {
    AK_ARG_CHECK(m && out, "ak_model_overridable: NULL argument");
    AK_ARG_CHECK(i < m->num_overridable, "ak_model_overridable: index %zu of %zu", i,
                 m->num_overridable);
    *out = m->overridable[i];
    return AK_OK;
}
