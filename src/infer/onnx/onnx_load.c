/* ONNX ModelProto -> accelkit IR: versions and opsets, graphs (with If/Loop/Scan bodies
 * as subgraphs), values, nodes, typed attributes and initializers.
 *
 * A graph is read in passes so that nodes may appear in any order in the file:
 * initializers and inputs, then every node output (a value has one producer), then node
 * attributes and inputs (name resolution, subgraphs), then outputs and value_info, and
 * finally a topological sort. Every name a node reads must resolve here or in an
 * enclosing graph; anything else is AK_ERR_INVALID_MODEL naming the node. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/check.h"
#include "infer/model.h"
#include "infer/onnx/onnx_internal.h"
#include "infer/onnx/onnx_write.h"
#include "infer/runtime/op.h"

#define IR_VERSION_MIN 3
/* IR 10 adds 4-bit types (refused by name where they occur), metadata_props and the
 * overload field of model-local functions (which are not read) */
#define IR_VERSION_MAX 10
#define OPSET_MIN 1 /* operators apply their pre-7 semantics (legacy broadcast etc.) */
/* 19-21 add types (float8, 4-bit) to operators whose semantics stay; the operators whose
 * semantics changed are checked by version when the session binds them
 * (runtime/registry.c, ak__op_version_check) */
#define OPSET_MAX 21

typedef struct loader {
    ak_model *model;
    ak__onnx_ctx ctx;
} loader;

static const char *str(const char *s) { return s ? s : ""; }

/* "node 3 'conv1' (Conv)" for messages; names are cut so the message stays one line. */
static const char *node_label(const Akonnx__NodeProto *n, size_t index, char *buf, size_t size) {
    snprintf(buf, size, "node %zu '%.60s' (%.40s)", index, str(n->name), str(n->op_type));
    return buf;
}

static ak_status load_graph(loader *L, ak__ir_graph *g, const Akonnx__GraphProto *gp);

/* ---- types ------------------------------------------------------------------------- */

static ak_status load_shape(ak__ir_graph *g, const Akonnx__TensorShapeProto *s, const char *what,
                            ak__ir_value *v) {
    if (!s) return AK_OK; /* rank unknown */
    if (s->n_dim > AK_IR_MAX_RANK)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "value '%.80s' has rank %zu (at most %d)", what,
                       s->n_dim, AK_IR_MAX_RANK);
    ak__ir_dim *dims;
    AK_CHECK(ak__ir_alloc_array(g, s->n_dim, sizeof *dims, (void **)&dims));
    for (size_t i = 0; i < s->n_dim; i++) {
        const Akonnx__TensorShapeProto__Dimension *d = s->dim[i];
        dims[i].value = -1;
        if (d->value_case == AKONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
            /* exporters write -1 for "unknown" now and then; treat any negative as that */
            if (d->dim_value >= 0) dims[i].value = d->dim_value;
        } else if (d->value_case == AKONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM &&
                   d->dim_param && d->dim_param[0]) {
            AK_CHECK(ak__ir_strdup(g, d->dim_param, &dims[i].param));
        }
    }
    v->rank = (int)s->n_dim;
    v->dims = dims;
    return AK_OK;
}

/* Applies a declared type to value index vi (values may move while strings are copied,
 * so the value is looked up again after each allocation). */
static ak_status apply_type(ak__ir_graph *g, int32_t vi, const Akonnx__TypeProto *tp) {
    if (!tp) return AK_OK;
    ak__ir_value *v = &g->values[vi];
    const char *what = v->name;
    switch (tp->value_case) {
    case AKONNX__TYPE_PROTO__VALUE_TENSOR_TYPE:
        v->kind = AK_VALUE_TENSOR;
        if (tp->tensor_type->has_elem_type)
            AK_CHECK(ak__onnx_elem_type(tp->tensor_type->elem_type, what, &v->type));
        return load_shape(g, tp->tensor_type->shape, what, v);
    case AKONNX__TYPE_PROTO__VALUE_SPARSE_TENSOR_TYPE:
        v->kind = AK_VALUE_SPARSE_TENSOR;
        if (tp->sparse_tensor_type->has_elem_type)
            AK_CHECK(ak__onnx_elem_type(tp->sparse_tensor_type->elem_type, what, &v->type));
        return load_shape(g, tp->sparse_tensor_type->shape, what, v);
    case AKONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE: v->kind = AK_VALUE_SEQUENCE; return AK_OK;
    case AKONNX__TYPE_PROTO__VALUE_MAP_TYPE: v->kind = AK_VALUE_MAP; return AK_OK;
    case AKONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE: v->kind = AK_VALUE_OPTIONAL; return AK_OK;
    default: return AK_OK; /* no type given */
    }
}

/* ---- initializers and inputs --------------------------------------------------------- */

static ak_status load_initializers(loader *L, ak__ir_graph *g, const Akonnx__GraphProto *gp) {
    if (gp->n_sparse_initializer)
        return AK_FAIL(AK_ERR_UNSUPPORTED, "graph '%.80s' has %zu sparse initializers, which "
                       "accelkit does not read yet", str(gp->name), gp->n_sparse_initializer);
    for (size_t i = 0; i < gp->n_initializer; i++) {
        const Akonnx__TensorProto *tp = gp->initializer[i];
        const char *name = str(tp->name);
        if (!name[0])
            return AK_FAIL(AK_ERR_INVALID_MODEL, "initializer %zu of graph '%.80s' has no name",
                           i, str(gp->name));
        if (ak__ir_value_find(g, name) != AK_IR_NONE)
            return AK_FAIL(AK_ERR_INVALID_MODEL, "initializer '%.80s' is defined twice", name);
        ak__ir_tensor *t;
        AK_CHECK(ak__onnx_tensor(g, &L->ctx, tp, name, &t));
        int32_t vi;
        AK_CHECK(ak__ir_value_add(g, name, &vi));
        ak__ir_value *v = &g->values[vi];
        v->kind = AK_VALUE_TENSOR;
        v->type = t->type;
        v->flags |= AK_IR_VALUE_CONST;
        v->constant = t;
        v->rank = t->rank;
        AK_CHECK(ak__ir_alloc_array(g, (size_t)t->rank, sizeof *v->dims, (void **)&v->dims));
        for (int d = 0; d < t->rank; d++) v->dims[d].value = t->dims[d];
    }
    return AK_OK;
}

static ak_status load_value_infos(ak__ir_graph *g, Akonnx__ValueInfoProto *const *vis, size_t n,
                                  const char *list, int32_t **out) {
    AK_CHECK(ak__ir_alloc_array(g, n, sizeof **out, (void **)out));
    for (size_t i = 0; i < n; i++) {
        const char *name = str(vis[i]->name);
        if (!name[0])
            return AK_FAIL(AK_ERR_INVALID_MODEL, "graph %s %zu has no name", list, i);
        (*out)[i] = ak__ir_value_find(g, name);
    }
    return AK_OK;
}

static ak_status load_inputs(ak__ir_graph *g, const Akonnx__GraphProto *gp) {
    int32_t *found;
    AK_CHECK(load_value_infos(g, gp->input, gp->n_input, "input", &found));
    g->inputs = malloc((gp->n_input ? gp->n_input : 1) * sizeof *g->inputs);
    if (!g->inputs) return AK_FAIL(AK_ERR_NO_MEMORY, "graph inputs: out of memory");
    for (size_t i = 0; i < gp->n_input; i++) {
        const char *name = gp->input[i]->name;
        int32_t vi = found[i];
        if (vi == AK_IR_NONE) {
            AK_CHECK(ak__ir_value_add(g, name, &vi));
        } else if (g->values[vi].flags & AK_IR_VALUE_INPUT) {
            return AK_FAIL(AK_ERR_INVALID_MODEL, "graph input '%.80s' is declared twice", name);
        }
        g->values[vi].flags |= AK_IR_VALUE_INPUT;
        /* an initializer's own shape is exact; a declared type only fills what is unknown */
        if (!(g->values[vi].flags & AK_IR_VALUE_CONST)) AK_CHECK(apply_type(g, vi, gp->input[i]->type));
        g->inputs[g->num_inputs++] = vi;
    }
    return AK_OK;
}

/* ---- nodes --------------------------------------------------------------------------- */

static ak_status node_opset(loader *L, const char *domain, const char *label, int64_t *out) {
    *out = ak__model_opset(L->model, domain);
    if (*out == 0)
        return AK_FAIL(AK_ERR_INVALID_MODEL,
                       "%s uses domain '%.60s', which the model does not import (opset_import)",
                       label, domain[0] ? domain : "ai.onnx");
    return AK_OK;
}

/* Pass 1: the node, its op and its outputs (each value has exactly one producer). */
static ak_status declare_node(loader *L, ak__ir_graph *g, const Akonnx__NodeProto *np, size_t i) {
    char label[160];
    node_label(np, i, label, sizeof label);
    if (!np->op_type || !np->op_type[0])
        return AK_FAIL(AK_ERR_INVALID_MODEL, "%s has no op_type", label);
    if (np->n_input > UINT32_MAX / 2 || np->n_output > UINT32_MAX / 2 ||
        np->n_attribute > UINT32_MAX / 2)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "%s has too many inputs, outputs or attributes", label);
    const char *domain = str(np->domain);
    if (strcmp(domain, "ai.onnx") == 0) domain = "";
    int32_t ni;
    AK_CHECK(ak__ir_node_add(g, &ni));
    ak__ir_node *n = ak__ir_node_at(g, ni);
    AK_CHECK(node_opset(L, domain, label, &n->opset));
    if (strcmp(domain, AK_ONNX_KIT_DOMAIN) == 0) { /* what `ak optimize` wrote (onnx_write.c) */
        if (ak__op_find("com.accelkit", np->op_type, 1)) domain = "com.accelkit", n->opset = 1;
        else if (ak__op_find("", np->op_type, OPSET_MAX)) domain = "", n->opset = OPSET_MAX;
    }
    AK_CHECK(ak__ir_strdup(g, np->name, &n->name));
    AK_CHECK(ak__ir_strdup(g, np->op_type, &n->op_type));
    AK_CHECK(ak__ir_strdup(g, domain, &n->domain));
    n->num_outputs = (uint32_t)np->n_output;
    AK_CHECK(ak__ir_alloc_array(g, np->n_output, sizeof *n->outputs, (void **)&n->outputs));
    for (size_t k = 0; k < np->n_output; k++) {
        const char *name = str(np->output[k]);
        n->outputs[k] = AK_IR_NONE;
        if (!name[0]) continue; /* an optional output the model does not want */
        int32_t prev = ak__ir_value_find(g, name);
        if (prev != AK_IR_NONE) {
            const ak__ir_value *pv = &g->values[prev];
            return AK_FAIL(AK_ERR_INVALID_MODEL, "%s writes '%.80s', which %s already defines",
                           label, name,
                           pv->producer != AK_IR_NONE ? "another node"
                           : pv->flags & AK_IR_VALUE_CONST ? "an initializer" : "a graph input");
        }
        int32_t vi;
        AK_CHECK(ak__ir_value_add(g, name, &vi));
        g->values[vi].producer = ni;
        n->outputs[k] = vi;
    }
    return AK_OK;
}

static ak_status load_attr_value(loader *L, ak__ir_graph *g, const Akonnx__AttributeProto *a,
                                 const char *label, ak__ir_attr *out);

/* Pass 2 of a node: attributes (subgraphs included) and then its inputs. */
static ak_status link_node(loader *L, ak__ir_graph *g, const Akonnx__NodeProto *np, int32_t ni) {
    char label[160];
    node_label(np, (size_t)ni, label, sizeof label);
    ak__ir_node *n = ak__ir_node_at(g, ni); /* nodes are not added in this pass */
    n->num_attrs = (uint32_t)np->n_attribute;
    AK_CHECK(ak__ir_alloc_array(g, np->n_attribute, sizeof *n->attrs, (void **)&n->attrs));
    for (size_t k = 0; k < np->n_attribute; k++) {
        AK_CHECK(load_attr_value(L, g, np->attribute[k], label, &n->attrs[k]));
        for (size_t j = 0; j < k; j++)
            if (strcmp(n->attrs[j].name, n->attrs[k].name) == 0)
                return AK_FAIL(AK_ERR_INVALID_MODEL, "%s has attribute '%.60s' twice", label,
                               n->attrs[k].name);
    }
    n->num_inputs = (uint32_t)np->n_input;
    AK_CHECK(ak__ir_alloc_array(g, np->n_input, sizeof *n->inputs, (void **)&n->inputs));
    for (size_t k = 0; k < np->n_input; k++) {
        const char *name = str(np->input[k]);
        n->inputs[k] = AK_IR_NONE;
        if (!name[0]) continue; /* an omitted optional input */
        AK_CHECK(ak__ir_value_resolve(g, name, &n->inputs[k]));
        if (n->inputs[k] == AK_IR_NONE)
            return AK_FAIL(AK_ERR_INVALID_MODEL,
                           "%s reads '%.80s', which no node, graph input or initializer defines",
                           label, name);
    }
    return AK_OK;
}

/* The node's implicit inputs: outer values read by any of its subgraphs, once each. */
static ak_status collect_captures(ak__ir_graph *g, ak__ir_node *n) {
    size_t total = 0;
    for (uint32_t k = 0; k < n->num_attrs; k++) {
        const ak__ir_attr *a = &n->attrs[k];
        if (a->type == AK_ATTR_GRAPH) total += a->u.g->num_captures;
        if (a->type == AK_ATTR_GRAPHS)
            for (size_t j = 0; j < a->count; j++) total += a->u.graphs[j]->num_captures;
    }
    if (total == 0) return AK_OK;
    AK_CHECK(ak__ir_alloc_array(g, total, sizeof *n->captures, (void **)&n->captures));
    uint8_t *seen = calloc(g->num_values, 1);
    if (!seen) return AK_FAIL(AK_ERR_NO_MEMORY, "captures: out of memory");
    for (uint32_t k = 0; k < n->num_attrs; k++) {
        const ak__ir_attr *a = &n->attrs[k];
        size_t nsub = a->type == AK_ATTR_GRAPH ? 1 : a->type == AK_ATTR_GRAPHS ? a->count : 0;
        for (size_t j = 0; j < nsub; j++) {
            const ak__ir_graph *sub = a->type == AK_ATTR_GRAPH ? a->u.g : a->u.graphs[j];
            for (size_t c = 0; c < sub->num_captures; c++) {
                int32_t v = sub->captures[c];
                if (!seen[v]) n->captures[n->num_captures++] = v;
                seen[v] = 1;
            }
        }
    }
    free(seen);
    return AK_OK;
}

/* ---- attributes ---------------------------------------------------------------------- */

static ak_status load_subgraph(loader *L, ak__ir_graph *g, const Akonnx__GraphProto *gp,
                               ak__ir_graph **out) {
    AK_CHECK(ak__ir_subgraph_create(g, out));
    return load_graph(L, *out, gp);
}

static ak_status copy_bytes_list(ak__ir_graph *g, const ProtobufCBinaryData *src, size_t n,
                                 const ak__ir_bytes **out) {
    ak__ir_bytes *b;
    AK_CHECK(ak__ir_alloc_array(g, n, sizeof *b, (void **)&b));
    for (size_t i = 0; i < n; i++) {
        const void *copy;
        AK_CHECK(ak__ir_memdup(g, src[i].data, src[i].len, &copy));
        b[i].data = copy;
        b[i].len = src[i].len;
    }
    *out = b;
    return AK_OK;
}

static ak_status load_attr_lists(loader *L, ak__ir_graph *g, const Akonnx__AttributeProto *a,
                                 const char *label, ak__ir_attr *out) {
    const void *copy;
    switch (out->type) {
    case AK_ATTR_FLOATS:
        out->count = a->n_floats;
        AK_CHECK(ak__ir_memdup(g, a->floats, a->n_floats * sizeof(float), &copy));
        out->u.floats = copy;
        return AK_OK;
    case AK_ATTR_INTS:
        out->count = a->n_ints;
        AK_CHECK(ak__ir_memdup(g, a->ints, a->n_ints * sizeof(int64_t), &copy));
        out->u.ints = copy;
        return AK_OK;
    case AK_ATTR_STRINGS:
        out->count = a->n_strings;
        return copy_bytes_list(g, a->strings, a->n_strings, &out->u.strings);
    case AK_ATTR_TENSORS: {
        ak__ir_tensor **ts;
        AK_CHECK(ak__ir_alloc_array(g, a->n_tensors, sizeof *ts, (void **)&ts));
        for (size_t i = 0; i < a->n_tensors; i++)
            AK_CHECK(ak__onnx_tensor(g, &L->ctx, a->tensors[i], out->name, &ts[i]));
        out->count = a->n_tensors;
        out->u.tensors = ts;
        return AK_OK;
    }
    case AK_ATTR_GRAPHS: {
        ak__ir_graph **gs;
        AK_CHECK(ak__ir_alloc_array(g, a->n_graphs, sizeof *gs, (void **)&gs));
        for (size_t i = 0; i < a->n_graphs; i++) AK_CHECK(load_subgraph(L, g, a->graphs[i], &gs[i]));
        out->count = a->n_graphs;
        out->u.graphs = gs;
        return AK_OK;
    }
    default:
        return AK_FAIL(AK_ERR_INTERNAL, "%s: attribute list type %d", label, (int)out->type);
    }
}

/* A TypeProto attribute, serialized again into the arena (only Optional ops read one). */
static ak_status pack_type(ak__ir_graph *g, const Akonnx__TypeProto *tp, ak__ir_bytes *out) {
    size_t n = akonnx__type_proto__get_packed_size(tp);
    void *p;
    AK_CHECK(ak__ir_alloc(g, n ? n : 1, &p));
    out->len = akonnx__type_proto__pack(tp, p);
    out->data = p;
    return AK_OK;
}

static ak_status load_attr_value(loader *L, ak__ir_graph *g, const Akonnx__AttributeProto *a,
                                 const char *label, ak__ir_attr *out) {
    if (!a->name || !a->name[0])
        return AK_FAIL(AK_ERR_INVALID_MODEL, "%s has an attribute without a name", label);
    AK_CHECK(ak__ir_strdup(g, a->name, &out->name));
    if (a->ref_attr_name && a->ref_attr_name[0])
        return AK_FAIL(AK_ERR_INVALID_MODEL, "%s: attribute '%.60s' refers to a function "
                       "attribute outside a function", label, a->name);
    if (!a->has_type || a->type <= AK_ATTR_UNDEFINED || a->type > AK_ATTR_TYPE_PROTOS)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "%s: attribute '%.60s' has no valid type (%d)", label,
                       a->name, a->has_type ? (int)a->type : 0);
    out->type = (ak__ir_attr_type)a->type;
    switch (out->type) {
    case AK_ATTR_FLOAT: out->u.f = a->f; return AK_OK;
    case AK_ATTR_INT: out->u.i = a->i; return AK_OK;
    case AK_ATTR_STRING: {
        const void *copy;
        AK_CHECK(ak__ir_memdup(g, a->s.data, a->s.len, &copy));
        out->u.s.data = copy;
        out->u.s.len = a->s.len;
        return AK_OK;
    }
    case AK_ATTR_TENSOR:
        if (!a->t) return AK_FAIL(AK_ERR_INVALID_MODEL, "%s: tensor attribute '%.60s' is empty",
                                  label, a->name);
        return ak__onnx_tensor(g, &L->ctx, a->t, out->name, &out->u.t);
    case AK_ATTR_GRAPH:
        if (!a->g) return AK_FAIL(AK_ERR_INVALID_MODEL, "%s: graph attribute '%.60s' is empty",
                                  label, a->name);
        return load_subgraph(L, g, a->g, &out->u.g);
    case AK_ATTR_SPARSE_TENSOR:
    case AK_ATTR_SPARSE_TENSORS:
        return AK_FAIL(AK_ERR_UNSUPPORTED, "%s: sparse tensor attribute '%.60s' is not read yet",
                       label, a->name);
    case AK_ATTR_TYPE_PROTO: /* kept serialized (u.s), for the writer */
        return a->tp ? pack_type(g, a->tp, &out->u.s) : AK_OK;
    case AK_ATTR_TYPE_PROTOS: {
        ak__ir_bytes *list;
        AK_CHECK(ak__ir_alloc_array(g, a->n_type_protos, sizeof *list, (void **)&list));
        for (size_t i = 0; i < a->n_type_protos; i++) AK_CHECK(pack_type(g, a->type_protos[i], &list[i]));
        out->count = a->n_type_protos;
        out->u.strings = list;
        return AK_OK;
    }
    default:
        return load_attr_lists(L, g, a, label, out);
    }
}

/* ---- graphs -------------------------------------------------------------------------- */

static ak_status load_outputs(ak__ir_graph *g, const Akonnx__GraphProto *gp) {
    g->outputs = malloc((gp->n_output ? gp->n_output : 1) * sizeof *g->outputs);
    if (!g->outputs) return AK_FAIL(AK_ERR_NO_MEMORY, "graph outputs: out of memory");
    for (size_t i = 0; i < gp->n_output; i++) {
        const char *name = str(gp->output[i]->name);
        if (!name[0]) return AK_FAIL(AK_ERR_INVALID_MODEL, "graph output %zu has no name", i);
        int32_t vi;
        AK_CHECK(ak__ir_value_resolve(g, name, &vi));
        if (vi == AK_IR_NONE)
            return AK_FAIL(AK_ERR_INVALID_MODEL, "graph output '%.80s' is never produced", name);
        g->values[vi].flags |= AK_IR_VALUE_OUTPUT;
        if (g->values[vi].kind == AK_VALUE_UNKNOWN) AK_CHECK(apply_type(g, vi, gp->output[i]->type));
        g->outputs[g->num_outputs++] = vi;
    }
    return AK_OK;
}

/* value_info is optional, possibly stale, documentation of intermediate types: applied
 * only to values whose type is not known yet, and ignored for names that do not exist. */
static ak_status load_value_info(ak__ir_graph *g, const Akonnx__GraphProto *gp) {
    for (size_t i = 0; i < gp->n_value_info; i++) {
        int32_t vi = ak__ir_value_find(g, str(gp->value_info[i]->name));
        if (vi != AK_IR_NONE && g->values[vi].kind == AK_VALUE_UNKNOWN)
            AK_CHECK(apply_type(g, vi, gp->value_info[i]->type));
    }
    return AK_OK;
}

static ak_status load_graph(loader *L, ak__ir_graph *g, const Akonnx__GraphProto *gp) {
    AK_CHECK(ak__ir_strdup(g, gp->name, &g->name));
    AK_CHECK(load_initializers(L, g, gp));
    AK_CHECK(load_inputs(g, gp));
    for (size_t i = 0; i < gp->n_node; i++) AK_CHECK(declare_node(L, g, gp->node[i], i));
    for (size_t i = 0; i < gp->n_node; i++) {
        AK_CHECK(link_node(L, g, gp->node[i], (int32_t)i));
        AK_CHECK(collect_captures(g, ak__ir_node_at(g, (int32_t)i)));
    }
    AK_CHECK(load_outputs(g, gp));
    AK_CHECK(load_value_info(g, gp));
    return ak__ir_graph_sort(g);
}

/* ---- model --------------------------------------------------------------------------- */

static ak_status load_opsets(ak_model *model, const Akonnx__ModelProto *m) {
    ak__ir_graph *g = model->graph;
    AK_CHECK(ak__ir_alloc_array(g, m->n_opset_import, sizeof *model->opsets,
                                (void **)&model->opsets));
    for (size_t i = 0; i < m->n_opset_import; i++) {
        const char *domain = str(m->opset_import[i]->domain);
        if (strcmp(domain, "ai.onnx") == 0) domain = "";
        int64_t version = m->opset_import[i]->version;
        if (ak__model_opset(model, domain) != 0)
            return AK_FAIL(AK_ERR_INVALID_MODEL, "opset of domain '%.60s' is imported twice",
                           domain[0] ? domain : "ai.onnx");
        if (version <= 0)
            return AK_FAIL(AK_ERR_INVALID_MODEL, "opset version %lld of domain '%.60s' is invalid",
                           (long long)version, domain);
        if (!domain[0] && (version < OPSET_MIN || version > OPSET_MAX))
            return AK_FAIL(AK_ERR_UNSUPPORTED,
                           "ONNX opset %lld is not supported (accelkit reads opsets %d-%d)",
                           (long long)version, OPSET_MIN, OPSET_MAX);
        AK_CHECK(ak__ir_strdup(g, domain, &model->opsets[model->num_opsets].domain));
        model->opsets[model->num_opsets++].version = version;
    }
    return AK_OK;
}

/* What the file says about itself (onnxruntime's ModelMetadata): domain, descriptions
 * and the metadata_props key/value pairs. */
static ak_status load_metadata(ak_model *model, const Akonnx__ModelProto *m) {
    ak__ir_graph *g = model->graph;
    AK_CHECK(ak__ir_strdup(g, m->domain, &model->domain));
    AK_CHECK(ak__ir_strdup(g, m->doc_string, &model->description));
    AK_CHECK(ak__ir_strdup(g, m->graph ? m->graph->doc_string : NULL, &model->graph_description));
    size_t n = m->n_metadata_props;
    if (!n) return AK_OK;
    AK_CHECK(ak__ir_alloc_array(g, n, sizeof *model->prop_keys, (void **)&model->prop_keys));
    AK_CHECK(ak__ir_alloc_array(g, n, sizeof *model->prop_values, (void **)&model->prop_values));
    for (size_t i = 0; i < n; i++) {
        AK_CHECK(ak__ir_strdup(g, m->metadata_props[i]->key, &model->prop_keys[i]));
        AK_CHECK(ak__ir_strdup(g, m->metadata_props[i]->value, &model->prop_values[i]));
    }
    model->num_props = n;
    return AK_OK;
}

static ak_status load_model(loader *L, const Akonnx__ModelProto *m) {
    ak_model *model = L->model;
    if (!m->has_ir_version)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "no ir_version: not an ONNX model");
    if (m->ir_version < IR_VERSION_MIN || m->ir_version > IR_VERSION_MAX)
        return AK_FAIL(AK_ERR_UNSUPPORTED,
                       "ONNX IR version %lld is not supported (accelkit reads IR versions %d-%d)",
                       (long long)m->ir_version, IR_VERSION_MIN, IR_VERSION_MAX);
    if (!m->graph) return AK_FAIL(AK_ERR_INVALID_MODEL, "the model has no graph");
    model->ir_version = m->ir_version;
    model->model_version = m->model_version;
    ak__ir_graph *g = model->graph;
    AK_CHECK(ak__ir_strdup(g, m->producer_name, &model->producer_name));
    AK_CHECK(ak__ir_strdup(g, m->producer_version, &model->producer_version));
    AK_CHECK(load_metadata(model, m));
    AK_CHECK(load_opsets(model, m));
    AK_CHECK(load_graph(L, g, m->graph));
    return ak__model_finish(model);
}

static ak_status load_decoded(const uint8_t *data, size_t size, const char *base_dir,
                              ak_model **out) {
    *out = NULL;
    Akonnx__ModelProto *m;
    AK_CHECK(ak__onnx_decode(data, size, &m));
    loader L = {.ctx = {base_dir, -1}};
    ak_status st = AK_OK;
    L.model = calloc(1, sizeof *L.model);
    if (!L.model) st = AK_FAIL(AK_ERR_NO_MEMORY, "ONNX load: out of memory");
    if (st == AK_OK) st = ak__ir_graph_create(&L.model->graph);
    if (st == AK_OK) st = load_model(&L, m);
    if (L.ctx.base_fd >= 0) close(L.ctx.base_fd);
    ak__onnx_model_free(m);
    if (st != AK_OK) {
        ak_model_free(L.model);
        return st;
    }
    *out = L.model;
    return AK_OK;
}

/* ---- public entry points --------------------------------------------------------------- */

ak_status ak_onnx_load_bytes(const void *data, size_t size, const char *base_dir, ak_model **out) {
    AK_ENSURE_INIT();
    AK_ARG_CHECK(out, "ak_onnx_load_bytes: out is NULL");
    *out = NULL;
    AK_ARG_CHECK(data || size == 0, "ak_onnx_load_bytes: data is NULL");
    return load_decoded(data, size, base_dir, out);
}

ak_status ak__onnx_read_file(const char *path, uint8_t **data, size_t *size) {
    *data = NULL;
    *size = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return AK_FAIL(AK_ERR_IO, "cannot open '%.200s': %s", path, strerror(errno));
    ak_status st = AK_OK;
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        st = AK_FAIL(AK_ERR_IO, "'%.200s' is not a regular file", path);
    } else if ((uint64_t)sb.st_size > AK_ONNX_MAX_FILE_BYTES) {
        st = AK_FAIL(AK_ERR_INVALID_MODEL, "'%.200s' is %lld bytes; an ONNX protobuf cannot "
                     "exceed 2 GiB (large weights belong in external data files)", path,
                     (long long)sb.st_size);
    } else if ((*data = malloc(sb.st_size ? (size_t)sb.st_size : 1)) == NULL) {
        st = AK_FAIL(AK_ERR_NO_MEMORY, "cannot allocate %lld bytes for '%.200s'",
                     (long long)sb.st_size, path);
    } else {
        size_t done = 0, want = (size_t)sb.st_size;
        while (st == AK_OK && done < want) {
            ssize_t r = read(fd, *data + done, want - done);
            if (r < 0 && errno == EINTR) continue;
            if (r < 0) st = AK_FAIL(AK_ERR_IO, "reading '%.200s': %s", path, strerror(errno));
            else if (r == 0) st = AK_FAIL(AK_ERR_IO, "'%.200s' shrank while being read", path);
            else done += (size_t)r;
        }
        *size = done;
    }
    close(fd);
    if (st != AK_OK) {
        free(*data);
        *data = NULL;
    }
    return st;
}

ak_status ak_onnx_load_file(const char *path, ak_model **out) {
    AK_ENSURE_INIT();
    AK_ARG_CHECK(out, "ak_onnx_load_file: out is NULL");
    *out = NULL;
    AK_ARG_CHECK(path && path[0], "ak_onnx_load_file: empty path");
    uint8_t *data = NULL;
    size_t size = 0;
    AK_CHECK(ak__onnx_read_file(path, &data, &size));
    /* external data is looked up beside the model file */
    char *dir = strdup(path);
    ak_status st = AK_OK;
    if (!dir) {
        st = AK_FAIL(AK_ERR_NO_MEMORY, "ak_onnx_load_file: out of memory");
    } else {
        char *slash = strrchr(dir, '/');
        if (!slash) strcpy(dir, ".");
        else if (slash == dir) dir[1] = '\0';
        else *slash = '\0';
        st = load_decoded(data, size, dir, out);
    }
    free(dir);
    free(data);
    return st;
}
