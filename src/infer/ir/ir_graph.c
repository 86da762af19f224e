/* IR graph construction: allocation helpers, values (with scoped name resolution for
 * subgraphs), nodes, and teardown. */
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "infer/ir/ir.h"
#include "infer/ir/ir_names.h"

/* Grows a malloc'ed array so it holds at least `need` elements (doubling). */
static ak_status reserve(void **array, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return AK_OK;
    size_t n = *cap ? *cap : 8;
    while (n < need) {
        if (n > SIZE_MAX / 2 / elem) return AK_FAIL(AK_ERR_NO_MEMORY, "IR array too large");
        n *= 2;
    }
    void *p = realloc(*array, n * elem);
    if (!p) return AK_FAIL(AK_ERR_NO_MEMORY, "IR: out of memory growing an array to %zu", n);
    *array = p;
    *cap = n;
    return AK_OK;
}

static ak_status graph_init(ak__ir_graph *g) {
    return ak__ir_names_create(&g->names);
}

ak_status ak__ir_graph_create(ak__ir_graph **out) {
    *out = NULL;
    ak__ir_graph *g = calloc(1, sizeof *g);
    if (!g) return AK_FAIL(AK_ERR_NO_MEMORY, "IR graph: out of memory");
    g->root = g;
    ak_status st = ak_arena_create(0, &g->arena);
    if (st == AK_OK) st = graph_init(g);
    if (st != AK_OK) {
        ak__ir_graph_free(g);
        return st;
    }
    *out = g;
    return AK_OK;
}

ak_status ak__ir_subgraph_create(ak__ir_graph *parent, ak__ir_graph **out) {
    *out = NULL;
    ak__ir_graph *root = parent->root;
    AK_CHECK(reserve((void **)&root->subgraphs, &root->cap_subgraphs, root->num_subgraphs + 1,
                     sizeof *root->subgraphs));
    ak__ir_graph *g = calloc(1, sizeof *g);
    if (!g) return AK_FAIL(AK_ERR_NO_MEMORY, "IR subgraph: out of memory");
    g->parent = parent;
    g->root = root;
    g->arena = root->arena;
    root->subgraphs[root->num_subgraphs++] = g; /* freed with the root from here on */
    AK_CHECK(graph_init(g));
    *out = g;
    return AK_OK;
}

/* Frees what one graph level allocated with malloc (not the shared arena). */
static void graph_release(ak__ir_graph *g) {
    free(g->values);
    free(g->nodes);
    free(g->inputs);
    free(g->outputs);
    free(g->order);
    free(g->captures);
    ak__ir_names_free(g->names);
}

void ak__ir_graph_free(ak__ir_graph *g) {
    if (!g || g->root != g) return; /* subgraphs go with their root */
    for (size_t i = 0; i < g->num_subgraphs; i++) {
        graph_release(g->subgraphs[i]);
        free(g->subgraphs[i]);
    }
    for (size_t i = 0; i < g->num_owned; i++) ak_free(g->owned[i]);
    free(g->owned);
    free(g->subgraphs);
    graph_release(g);
    if (g->arena) ak_arena_free(g->arena);
    free(g);
}

/* ---- memory ------------------------------------------------------------------------ */

ak_status ak__ir_alloc(ak__ir_graph *g, size_t size, void **out) {
    AK_CHECK(ak_arena_alloc(g->arena, size ? size : 1, 16, out));
    memset(*out, 0, size);
    return AK_OK;
}

ak_status ak__ir_alloc_array(ak__ir_graph *g, size_t count, size_t elem, void **out) {
    if (elem && count > SIZE_MAX / 4 / elem)
        return AK_FAIL(AK_ERR_NO_MEMORY, "IR: array of %zu x %zu bytes too large", count, elem);
    return ak__ir_alloc(g, count * elem, out);
}

ak_status ak__ir_memdup(ak__ir_graph *g, const void *p, size_t n, const void **out) {
    void *q;
    AK_CHECK(ak__ir_alloc(g, n + 1, &q)); /* +1: a NUL after copied text */
    if (n) memcpy(q, p, n);
    *out = q;
    return AK_OK;
}

ak_status ak__ir_strdup(ak__ir_graph *g, const char *s, const char **out) {
    const void *p;
    AK_CHECK(ak__ir_memdup(g, s ? s : "", s ? strlen(s) : 0, &p));
    *out = p;
    return AK_OK;
}

ak_status ak__ir_alloc_payload(ak__ir_graph *g, size_t size, void **out) {
    ak__ir_graph *root = g->root;
    AK_CHECK(reserve((void **)&root->owned, &root->cap_owned, root->num_owned + 1,
                     sizeof *root->owned));
    AK_CHECK(ak_alloc(size, out));
    root->owned[root->num_owned++] = *out;
    return AK_OK;
}

/* ---- values ------------------------------------------------------------------------ */

ak_status ak__ir_value_add(ak__ir_graph *g, const char *name, int32_t *out) {
    if (g->num_values >= INT32_MAX)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "graph has more than %d values", INT32_MAX);
    AK_CHECK(reserve((void **)&g->values, &g->cap_values, g->num_values + 1, sizeof *g->values));
    ak__ir_value *v = &g->values[g->num_values];
    memset(v, 0, sizeof *v);
    AK_CHECK(ak__ir_strdup(g, name, &v->name));
    v->kind = AK_VALUE_UNKNOWN;
    v->rank = -1;
    v->producer = AK_IR_NONE;
    v->outer = AK_IR_NONE;
    int32_t index = (int32_t)g->num_values;
    AK_CHECK(ak__ir_names_put(g->names, v->name, index));
    g->num_values++;
    *out = index;
    return AK_OK;
}

int32_t ak__ir_value_find(const ak__ir_graph *g, const char *name) {
    return ak__ir_names_get(g->names, name);
}

ak_status ak__ir_value_resolve(ak__ir_graph *g, const char *name, int32_t *out) {
    *out = ak__ir_value_find(g, name);
    if (*out != AK_IR_NONE || !g->parent) return AK_OK;
    int32_t outer;
    /* depth is bounded: the decoder refuses deeply nested files */
    AK_CHECK(ak__ir_value_resolve(g->parent, name, &outer));
    if (outer == AK_IR_NONE) return AK_OK;
    AK_CHECK(reserve((void **)&g->captures, &g->cap_captures, g->num_captures + 1,
                     sizeof *g->captures));
    g->captures[g->num_captures++] = outer;
    int32_t local;
    AK_CHECK(ak__ir_value_add(g, name, &local));
    const ak__ir_value *src = &g->parent->values[outer];
    ak__ir_value *v = &g->values[local];
    /* the stand-in shares the outer value's declared type (dims live in the arena) */
    v->kind = src->kind;
    v->type = src->type;
    v->rank = src->rank;
    v->dims = src->dims;
    v->constant = src->constant;
    v->flags = AK_IR_VALUE_OUTER | (src->flags & AK_IR_VALUE_CONST);
    v->outer = outer;
    *out = local;
    return AK_OK;
}

uint64_t ak__ir_value_numel(const ak__ir_value *v, int *known) {
    *known = 0;
    if (v->rank < 0) return 0;
    uint64_t n = 1;
    for (int i = 0; i < v->rank; i++) {
        if (v->dims[i].value < 0) return 0;
        uint64_t d = (uint64_t)v->dims[i].value;
        if (d && n > UINT64_MAX / d) return 0;
        n *= d;
    }
    *known = 1;
    return n;
}

/* ---- nodes ------------------------------------------------------------------------- */

ak_status ak__ir_node_add(ak__ir_graph *g, int32_t *out) {
    if (g->num_nodes >= INT32_MAX)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "graph has more than %d nodes", INT32_MAX);
    AK_CHECK(reserve((void **)&g->nodes, &g->cap_nodes, g->num_nodes + 1, sizeof *g->nodes));
    memset(&g->nodes[g->num_nodes], 0, sizeof *g->nodes);
    *out = (int32_t)g->num_nodes++;
    return AK_OK;
}

const ak__ir_attr *ak__ir_node_attr(const ak__ir_node *n, const char *name) {
    for (uint32_t i = 0; i < n->num_attrs; i++)
        if (strcmp(n->attrs[i].name, name) == 0) return &n->attrs[i];
    return NULL;
}
