/* What the optimizer made, out of the session (kept beside the writer, as the loader is,
 * since it reads the runtime's session): the graph it runs written as an ONNX file
 * (ak_session_save_optimized, through infer/onnx/onnx_write.c) and the list of what each
 * pass did (ak_session_optimizations). */
#include <stdlib.h>
#include <string.h>

#include "infer/onnx/onnx_write.h"
#include "infer/runtime/session.h"

static int live(const ak__exec_node *e) { return !e->folded && !e->removed; }

/* Values the written graph needs: read by a live node (or its subgraphs), graph inputs
 * and graph outputs. */
static void mark_needed(const ak_session *s, uint8_t *needed) {
    const ak__ir_graph *g = s->g;
    for (size_t k = 0; k < s->num_nodes; k++) {
        const ak__exec_node *e = &s->nodes[k];
        if (!live(e)) continue;
        for (uint32_t i = 0; i < e->node->num_inputs; i++)
            if (e->node->inputs[i] != AK_IR_NONE) needed[e->node->inputs[i]] = 1;
        for (uint32_t i = 0; i < e->node->num_captures; i++) needed[e->node->captures[i]] = 1;
    }
    for (size_t i = 0; i < g->num_inputs; i++) needed[g->inputs[i]] = 1;
    for (size_t i = 0; i < g->num_outputs; i++) needed[g->outputs[i]] = 1;
}

/* The initializer for value v: the loaded constant, or a view of a folded tensor. */
static ak_status constant_of(const ak_session *s, int32_t v, ak__ir_tensor *view,
                             const ak__ir_tensor **out) {
    const ak__ir_value *iv = &s->g->values[v];
    *out = NULL;
    if (s->source[v] == AK_SRC_CONST) {
        *out = iv->constant;
        return AK_OK;
    }
    if (s->source[v] != AK_SRC_FOLDED) return AK_OK;
    const ak__tensor *t = &s->values[v]; /* strings: ak_string elements, as ak__ir_bytes */
    *view = (ak__ir_tensor){t->type, t->rank, t->dims, t->count, ak__tensor_nbytes(t), t->data};
    *out = view;
    return AK_OK;
}

ak_status ak_session_save_optimized(const ak_session *s, const char *path) {
    AK_ARG_CHECK(s, "ak_session_save_optimized: session is NULL");
    AK_ARG_CHECK(path && path[0], "ak_session_save_optimized: empty path");
    AK_ARG_CHECK(s->model, "ak_session_save_optimized: not a model's session");
    const ak__ir_graph *g = s->g;
    size_t nv = g->num_values ? g->num_values : 1;
    uint8_t *needed = calloc(nv, 1);
    const ak__ir_tensor **constants = calloc(nv, sizeof *constants);
    ak__ir_tensor *views = calloc(nv, sizeof *views);
    const ak__ir_node **nodes = calloc(s->num_nodes ? s->num_nodes : 1, sizeof *nodes);
    ak_status st = needed && constants && views && nodes
                       ? AK_OK : AK_FAIL(AK_ERR_NO_MEMORY, "ak_session_save_optimized: out of memory");
    ak__onnx_graph_view view = {nodes, 0, constants, 0};
    if (st == AK_OK) {
        mark_needed(s, needed);
        for (size_t k = 0; k < s->num_nodes; k++)
            if (live(&s->nodes[k])) nodes[view.num_nodes++] = s->nodes[k].node;
        for (size_t v = 0; st == AK_OK && v < g->num_values; v++)
            if (needed[v]) st = constant_of(s, (int32_t)v, &views[v], &constants[v]);
    }
    /* intermediate types are not written: a fused node's output may differ from what the
     * file declared (the blocked layout) */
    if (st == AK_OK) st = ak__onnx_write_file(s->model, &view, path);
    free(needed);
    free(constants);
    free(views);
    free(nodes);
    return st;
}

ak_status ak_session_optimizations(const ak_session *s, size_t i, const char **what,
                                   size_t *times, size_t *count) {
    AK_ARG_CHECK(s, "ak_session_optimizations: session is NULL");
    if (count) *count = s->num_opt_notes;
    if (!what && !times) return AK_OK;
    AK_ARG_CHECK(i < s->num_opt_notes, "ak_session_optimizations: index %zu of %zu", i,
                 s->num_opt_notes);
    if (what) *what = s->opt_notes[i].what;
    if (times) *times = s->opt_notes[i].times;
    return AK_OK;
}
