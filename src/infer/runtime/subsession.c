/* Subsessions: the session of a subgraph (an If branch, a Loop or Scan body) that a
 * control-flow operator runs once per branch taken or per iteration.
 *
 * A subsession is an ak_session over the subgraph: its nodes are bound, created, folded
 * and optimized like a model's, and it keeps its own memory plan. Its graph inputs are
 * bound by position (the body's iteration number, condition and carried values; a Scan
 * body's slices). Values the subgraph reads from enclosing graphs (AK_IR_VALUE_OUTER
 * stand-ins, not constants) are bound each run from the tensors the owning node
 * captured (ctx->captures), so a body reads the enclosing graph's activations in place.
 *
 * Shapes inside a body may change from one iteration to the next (a growing sequence, a
 * loop-carried tensor that gets longer): the run loop then runs without a plan (dynamic
 * buffers) and plans again from the last shapes, exactly as a session does when its
 * input shapes change. */
#include <stdlib.h>
#include <string.h>

#include "infer/runtime/session.h"

/* outer_slot[v]: where in owner->captures the outer value v is found. */
static ak_status map_outer_values(ak_session *s, const ak__ir_node *owner) {
    const ak__ir_graph *g = s->g;
    s->outer_slot = calloc(g->num_values ? g->num_values : 1, sizeof *s->outer_slot);
    if (!s->outer_slot) return AK_FAIL(AK_ERR_NO_MEMORY, "subgraph: out of memory");
    for (size_t v = 0; v < g->num_values; v++) {
        s->outer_slot[v] = -1;
        if (s->source[v] != AK_SRC_OUTER) continue;
        for (uint32_t c = 0; c < owner->num_captures; c++)
            if (owner->captures[c] == g->values[v].outer) s->outer_slot[v] = (int32_t)c;
        if (s->outer_slot[v] < 0)
            return AK_OP_FAIL(owner, AK_ERR_INTERNAL,
                              "subgraph value '%s' of an enclosing graph is not captured",
                              g->values[v].name);
    }
    return AK_OK;
}

ak_status ak__subsession_create(const ak__ir_graph *g, const ak__ir_node *owner,
                                ak_session **out) {
    *out = NULL;
    ak_session *s = calloc(1, sizeof *s);
    if (!s) return AK_FAIL(AK_ERR_NO_MEMORY, "subgraph session: out of memory");
    s->g = g;
    ak_session_options opts;
    ak_session_options_init(&opts);
    opts.profile = 0;
    ak_status st = ak__session_init(s, &opts);
    if (st == AK_OK) st = map_outer_values(s, owner);
    if (st != AK_OK) {
        ak_session_free(s);
        return st;
    }
    *out = s;
    return AK_OK;
}

/* Type checks only: exporters often declare a body input's shape loosely ([1] for the
 * scalar iteration number, say), and the operators check what they read. */
static ak_status bind_input(ak_session *s, int32_t v, const ak__tensor *t) {
    const ak__ir_value *decl = &s->g->values[v];
    if (decl->kind == AK_VALUE_TENSOR && decl->type != AK_ELEM_UNDEFINED && t->type != decl->type)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "subgraph '%s': input '%s' gets %s, declared %s",
                       s->g->name ? s->g->name : "", decl->name, ak_elem_type_name(t->type),
                       ak_elem_type_name(decl->type));
    s->values[v] = *t;
    return AK_OK;
}

ak_status ak__subsession_run(ak_session *s, ak_threadpool *pool, const ak__tensor *inputs,
                             size_t num_inputs, const ak__tensor *const *captures) {
    const ak__ir_graph *g = s->g;
    if (num_inputs != g->num_inputs)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "subgraph '%s' declares %zu inputs, it is given %zu",
                       g->name ? g->name : "", g->num_inputs, num_inputs);
    s->pool = pool;
    ak__session_release_previous(s);
    for (size_t i = 0; i < num_inputs; i++) {
        if (s->source[g->inputs[i]] != AK_SRC_INPUT) continue; /* an initializer's name */
        AK_CHECK(bind_input(s, g->inputs[i], &inputs[i]));
    }
    for (size_t v = 0; v < g->num_values; v++)
        if (s->source[v] == AK_SRC_OUTER) s->values[v] = *captures[s->outer_slot[v]];
    ak_status st = ak__session_run_nodes(s);
    s->pool = s->own_pool;
    AK_CHECK(st);
    for (size_t i = 0; i < g->num_outputs; i++) {
        int32_t v = g->outputs[i];
        if (s->source[v] == AK_SRC_UNUSED)
            return AK_FAIL(AK_ERR_INVALID_MODEL, "subgraph '%s': output '%s' is never computed",
                           g->name ? g->name : "", g->values[v].name);
    }
    return AK_OK;
}

const ak__tensor *ak__subsession_output(const ak_session *s, size_t i) {
    return &s->values[s->g->outputs[i]];
}
