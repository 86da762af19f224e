/* The run loop: bind the caller's inputs, run every node in order with outputs placed by
 * the memory plan (or in dynamic buffers while no plan fits), hand back the outputs.
 * Once a plan exists and shapes repeat, nothing here touches the heap. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "infer/runtime/session.h"

static int same_shape(const ak__tensor *a, const ak__tensor *b) {
    if (a->type != b->type || a->rank != b->rank) return 0;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i]) return 0;
    return 1;
}

static ak_status check_input(const ak__ir_value *decl, const ak_tensor *in) {
    if (!in->data && in->rank > 0)
        for (int i = 0; i < in->rank; i++)
            if (in->dims[i] != 0) return AK_FAIL(AK_ERR_INVALID_ARG, "input '%s': data is NULL", decl->name);
    if (decl->type != AK_ELEM_UNDEFINED && in->type != decl->type)
        return AK_FAIL(AK_ERR_INVALID_ARG, "input '%s' has type %s, the model expects %s",
                       decl->name, ak_elem_type_name(in->type), ak_elem_type_name(decl->type));
    if (in->rank < 0 || in->rank > AK_IR_MAX_RANK || (in->rank && !in->dims))
        return AK_FAIL(AK_ERR_INVALID_ARG, "input '%s': invalid rank %d", decl->name, in->rank);
    if (decl->rank >= 0 && in->rank != decl->rank)
        return AK_FAIL(AK_ERR_INVALID_ARG, "input '%s' has rank %d, the model expects %d",
                       decl->name, in->rank, decl->rank);
    for (int i = 0; decl->rank >= 0 && i < in->rank; i++)
        if (decl->dims[i].value >= 0 && in->dims[i] != decl->dims[i].value)
            return AK_FAIL(AK_ERR_INVALID_ARG,
                           "input '%s': dimension %d is %lld, the model fixes it at %lld",
                           decl->name, i, (long long)in->dims[i], (long long)decl->dims[i].value);
    return AK_OK;
}

/* Initializers listed as inputs get their own data back each run (a previous run may
 * have overridden them). */
static void restore_initializers(ak_session *s) {
    const ak__ir_graph *g = s->g;
    for (size_t i = 0; i < g->num_inputs; i++) {
        int32_t v = g->inputs[i];
        const ak__ir_tensor *c = g->values[v].constant;
        if (s->source[v] != AK_SRC_CONST || !c || s->values[v].data == c->data) continue;
        ak__tensor *t = &s->values[v];
        t->type = c->type;
        t->rank = c->rank;
        for (int d = 0; d < c->rank; d++) t->dims[d] = c->dims[d];
        t->count = c->count;
        t->data = c->data;
    }
}

static ak_status bind_inputs(ak_session *s, const char *const *names, const ak_tensor *inputs,
                             size_t n) {
    const ak__ir_graph *g = s->g;
    restore_initializers(s);
    for (size_t i = 0; i < n; i++) {
        AK_ARG_CHECK(names && names[i], "ak_session_run: input name %zu is NULL", i);
        int32_t v = ak__ir_value_find(g, names[i]);
        if (v == AK_IR_NONE || !(g->values[v].flags & AK_IR_VALUE_INPUT))
            return AK_FAIL(AK_ERR_INVALID_ARG, "ak_session_run: the model has no input '%s'",
                           names[i]);
        if (s->source[v] == AK_SRC_FOLDED || s->baked[v])
            return AK_FAIL(AK_ERR_UNSUPPORTED,
                           "input '%s' overrides an initializer that was folded or prepared "
                           "(packed) at session creation; create the session with "
                           "fold_constants = 0 and optimize = 0, and it can still not override "
                           "an operator's packed weights", names[i]);
        AK_CHECK(check_input(&g->values[v], &inputs[i]));
        char what[128];
        snprintf(what, sizeof what, "input '%s'", names[i]);
        AK_CHECK(ak__tensor_set_shape(&s->values[v], inputs[i].type, inputs[i].rank,
                                      inputs[i].dims, what));
        s->values[v].data = inputs[i].data;
    }
    for (size_t i = 0; i < g->num_inputs; i++) {
        int32_t v = g->inputs[i];
        if (s->source[v] != AK_SRC_INPUT) continue;
        size_t k = 0;
        while (k < n && strcmp(names[k], g->values[v].name) != 0) k++;
        if (k == n)
            return AK_FAIL(AK_ERR_INVALID_ARG, "ak_session_run: input '%s' is not fed",
                           g->values[v].name);
    }
    return AK_OK;
}

/* A caller's output buffer must have the type and shape the run computed. */
static ak_status check_bound(const ak_tensor *buf, const ak__tensor *t, const char *name) {
    int same = buf->type == t->type && buf->rank == t->rank;
    for (int i = 0; same && i < t->rank; i++) same = buf->dims[i] == t->dims[i];
    if (same) return AK_OK;
    char want[160] = "", got[160] = "";
    size_t w = 0, g = 0;
    for (int i = 0; i < t->rank && w < sizeof want - 24; i++)
        w += (size_t)snprintf(want + w, sizeof want - w, "%s%lld", i ? "," : "", (long long)t->dims[i]);
    for (int i = 0; i < buf->rank && i < AK_IR_MAX_RANK && g < sizeof got - 24; i++)
        g += (size_t)snprintf(got + g, sizeof got - g, "%s%lld", i ? "," : "", (long long)buf->dims[i]);
    return AK_FAIL(AK_ERR_INVALID_ARG,
                   "output '%s': the bound buffer is %s [%s], the run computes %s [%s]", name,
                   ak_elem_type_name(buf->type), got, ak_elem_type_name(t->type), want);
}

/* Gives output `o` of node e its bytes: input 0's for aliasing operators, the arena
 * slot when planned, else a fresh dynamic buffer. */
static ak_status place_output(ak_session *s, ak__exec_node *e, uint32_t o, int planned) {
    int32_t v = e->node->outputs[o];
    ak__tensor *t = &s->values[v];
    if (o == 0 && (e->def->flags & AK_OP_ALIAS_INPUT0)) {
        const ak__tensor *in = e->inputs[0];
        if (!in || ak__tensor_nbytes(in) != ak__tensor_nbytes(t))
            return AK_OP_FAIL(e->node, AK_ERR_INTERNAL, "aliased output size differs from input");
        t->data = in->data;
        return AK_OK;
    }
    if (s->bound && s->bound[v]) { /* ak_session_run_into: straight into the caller's buffer */
        AK_CHECK(check_bound(s->bound[v], t, s->g->values[v].name));
        t->data = s->bound[v]->data;
        return AK_OK;
    }
    if (planned) {
        t->data = (char *)s->arena + s->plan_offset[v];
        return AK_OK;
    }
    ak_free(s->dynamic[v]);
    s->dynamic[v] = NULL;
    AK_CHECK(ak_alloc(ak__tensor_nbytes(t), &s->dynamic[v]));
    t->data = s->dynamic[v];
    return AK_OK;
}

static ak_status reserve_workspace(ak_session *s, size_t bytes) {
    if (bytes <= s->workspace_bytes) return AK_OK;
    ak_free(s->workspace);
    s->workspace = NULL;
    s->workspace_bytes = 0;
    AK_CHECK(ak_alloc(bytes, &s->workspace));
    s->workspace_bytes = bytes;
    return AK_OK;
}

static void record_time(ak_session *s, ak__exec_node *e, uint64_t t0) {
    uint64_t t1 = ak_now_ns();
    e->ns += t1 - t0;
    e->calls++;
    if (ak_trace_enabled())
        ak_trace_complete("infer", e->node->name[0] ? e->node->name : e->node->op_type, t0,
                          t1 - t0);
    ak__session_log_event(s, (int32_t)(e - s->nodes), t0, t1 - t0);
}

ak_status ak__session_exec_node(ak_session *s, ak__exec_node *e, int *planned) {
    ak__op_ctx ctx = {e->node, e->state, e->node->num_inputs, e->node->num_outputs,
                      e->inputs, e->outputs, s->pool, 0, NULL,
                      e->node->num_captures, e->captures,
                      s->outer_slot ? NULL : &s->run_strings};
    uint64_t t0 = s->profile ? ak_now_ns() : 0;
    AK_CHECK(e->def->reshape(&ctx));
    AK_CHECK(ak__op_strings_check(&ctx));
    for (uint32_t o = 0; o < e->node->num_outputs && *planned; o++) {
        int32_t v = e->node->outputs[o];
        if (v != AK_IR_NONE && !same_shape(&s->values[v], &s->plan_shapes[v])) *planned = 0;
    }
    for (uint32_t o = 0; o < e->node->num_outputs; o++)
        if (e->node->outputs[o] != AK_IR_NONE) AK_CHECK(place_output(s, e, o, *planned));
    AK_CHECK(reserve_workspace(s, ctx.workspace_bytes));
    ctx.workspace = s->workspace;
    if (e->def->run)
        AK_CHECK(s->backends ? ak__bk_run_node(s, (size_t)(e - s->nodes), &ctx) : e->def->run(&ctx));
    if (s->profile) record_time(s, e, t0);
    return AK_OK;
}

/* Frees what the previous run left for its outputs: dynamic buffers of a run made
 * without a plan, and the arena a re-plan replaced. */
void ak__session_release_previous(ak_session *s) {
    size_t nv = s->g->num_values;
    for (size_t v = 0; v < nv; v++) {
        if (!s->dynamic[v]) continue;
        ak_free(s->dynamic[v]);
        s->dynamic[v] = NULL;
    }
    ak_free(s->retired_arena);
    s->retired_arena = NULL;
    ak__string_pool_reset(&s->run_strings);
}

static ak_status fill_outputs(ak_session *s, const char *const *names, ak_tensor *outputs,
                              size_t n) {
    const ak__ir_graph *g = s->g;
    if (!names && n != g->num_outputs)
        return AK_FAIL(AK_ERR_INVALID_ARG, "ak_session_run: the model has %zu outputs, %zu asked",
                       g->num_outputs, n);
    for (size_t i = 0; i < n; i++) {
        int32_t v = names ? ak__ir_value_find(g, names[i]) : g->outputs[i];
        if (v == AK_IR_NONE)
            return AK_FAIL(AK_ERR_INVALID_ARG, "ak_session_run: no value named '%s'", names[i]);
        if (s->source[v] == AK_SRC_UNUSED || (s->source[v] == AK_SRC_ACTIVATION &&
                                              s->first_def[v] < 0))
            return AK_FAIL(AK_ERR_INVALID_ARG, "ak_session_run: '%s' is not computed",
                           g->values[v].name);
        const ak__tensor *t = &s->values[v];
        outputs[i].type = t->type;
        outputs[i].rank = t->rank;
        outputs[i].dims = t->dims;
        outputs[i].data = t->data;
    }
    return AK_OK;
}

static void remember_shapes(ak_session *s) {
    memcpy(s->plan_shapes, s->values, s->g->num_values * sizeof *s->values);
}

ak_status ak_session_run(ak_session *s, const char *const *input_names, const ak_tensor *inputs,
                         size_t num_inputs, const char *const *output_names, ak_tensor *outputs,
                         size_t num_outputs) {
    AK_ARG_CHECK(s, "ak_session_run: session is NULL");
    AK_ARG_CHECK(!num_inputs || inputs, "ak_session_run: inputs is NULL");
    AK_ARG_CHECK(!num_outputs || outputs, "ak_session_run: outputs is NULL");
    ak__session_release_previous(s);
    uint64_t t0 = s->profile ? ak_now_ns() : 0;
    AK_CHECK(bind_inputs(s, input_names, inputs, num_inputs));
    AK_CHECK(ak__session_run_nodes(s));
    if (s->profile) ak__session_log_event(s, -1, t0, ak_now_ns() - t0);
    return fill_outputs(s, output_names, outputs, num_outputs);
}

/* ---- ak_session_run_into: outputs in the caller's buffers --------------------------- */

static ak_status bind_outputs(ak_session *s, const char *const *names, const ak_tensor *outputs,
                              size_t n) {
    const ak__ir_graph *g = s->g;
    if (!s->bound) {
        s->bound = calloc(g->num_values ? g->num_values : 1, sizeof *s->bound);
        if (!s->bound) return AK_FAIL(AK_ERR_NO_MEMORY, "ak_session_run_into: out of memory");
    }
    if (!names && n != g->num_outputs)
        return AK_FAIL(AK_ERR_INVALID_ARG,
                       "ak_session_run_into: the model has %zu outputs, %zu asked",
                       g->num_outputs, n);
    for (size_t i = 0; i < n; i++) {
        if (!outputs[i].data) continue;
        int32_t v = names ? ak__ir_value_find(g, names[i]) : g->outputs[i];
        if (v == AK_IR_NONE)
            return AK_FAIL(AK_ERR_INVALID_ARG, "ak_session_run_into: no value named '%s'",
                           names[i]);
        if (outputs[i].rank < 0 || outputs[i].rank > AK_IR_MAX_RANK ||
            (outputs[i].rank && !outputs[i].dims))
            return AK_FAIL(AK_ERR_INVALID_ARG, "output '%s': invalid rank %d",
                           g->values[v].name, outputs[i].rank);
        if (s->bound[v])
            return AK_FAIL(AK_ERR_INVALID_ARG, "output '%s' is bound twice", g->values[v].name);
        s->bound[v] = &outputs[i];
    }
    return AK_OK;
}

/* Outputs whose bytes are not the caller's (inputs, constants, views of other values):
 * copied into the caller's buffer now. */
static ak_status copy_unplaced(ak_session *s, const ak_tensor *got, ak_tensor *outputs, size_t n,
                               const char *const *names) {
    for (size_t i = 0; i < n; i++) {
        if (!outputs[i].data || got[i].data == outputs[i].data) continue;
        int32_t v = names ? ak__ir_value_find(s->g, names[i]) : s->g->outputs[i];
        const ak__tensor *t = &s->values[v];
        AK_CHECK(check_bound(&outputs[i], t, s->g->values[v].name));
        size_t bytes = ak__tensor_nbytes(t);
        if (bytes) memmove(outputs[i].data, got[i].data, bytes);
    }
    return AK_OK;
}

ak_status ak_session_run_into(ak_session *s, const char *const *input_names,
                              const ak_tensor *inputs, size_t num_inputs,
                              const char *const *output_names, ak_tensor *outputs,
                              size_t num_outputs) {
    AK_ARG_CHECK(s, "ak_session_run_into: session is NULL");
    AK_ARG_CHECK(!num_inputs || inputs, "ak_session_run_into: inputs is NULL");
    AK_ARG_CHECK(!num_outputs || outputs, "ak_session_run_into: outputs is NULL");
    ak_tensor *got = calloc(num_outputs ? num_outputs : 1, sizeof *got);
    if (!got) return AK_FAIL(AK_ERR_NO_MEMORY, "ak_session_run_into: out of memory");
    ak_status st = bind_outputs(s, output_names, outputs, num_outputs);
    if (st == AK_OK)
        st = ak_session_run(s, input_names, inputs, num_inputs, output_names, got, num_outputs);
    if (st == AK_OK) st = copy_unplaced(s, got, outputs, num_outputs, output_names);
    if (s->bound) memset(s->bound, 0, s->g->num_values * sizeof *s->bound);
    for (size_t i = 0; st == AK_OK && i < num_outputs; i++)
        if (!outputs[i].data) outputs[i] = got[i];
    free(got);
    return st;
}

ak_status ak__session_run_nodes(ak_session *s) {
    int planned = s->planned;
    for (size_t k = 0; k < s->num_nodes; k++) {
        ak__exec_node *e = &s->nodes[k];
        if (e->folded || e->removed) continue;
        ak_status st = ak__session_exec_node(s, e, &planned);
        if (st != AK_OK) {
            s->planned = 0; /* shapes of this run are partial: plan again next time */
            return st;
        }
    }
    if (!planned) { /* plan from this run's shapes; its outputs stay where they are */
        remember_shapes(s);
        s->planned = 0;
        AK_CHECK(ak__memplan_build(s));
        s->planned = 1;
    }
    return AK_OK;
}

/* ---- profiling ---------------------------------------------------------------------- */

static int cmp_profile(const void *a, const void *b) {
    const ak_op_profile *x = a, *y = b;
    if (x->total_ns != y->total_ns) return x->total_ns < y->total_ns ? 1 : -1;
    return strcmp(x->op_type, y->op_type);
}

ak_status ak_session_profile(const ak_session *s, size_t i, ak_op_profile *out, size_t *count) {
    AK_ARG_CHECK(s && count, "ak_session_profile: NULL argument");
    ak_op_profile *rows = calloc(s->num_nodes ? s->num_nodes : 1, sizeof *rows);
    if (!rows) return AK_FAIL(AK_ERR_NO_MEMORY, "profile: out of memory");
    size_t n = 0;
    for (size_t k = 0; k < s->num_nodes; k++) {
        const ak__exec_node *e = &s->nodes[k];
        if (e->folded || e->removed) continue;
        size_t r = 0;
        while (r < n && strcmp(rows[r].op_type, e->node->op_type) != 0) r++;
        if (r == n) rows[n++].op_type = e->node->op_type;
        rows[r].calls += e->calls;
        rows[r].total_ns += e->ns;
        rows[r].nodes++;
    }
    qsort(rows, n, sizeof *rows, cmp_profile);
    *count = n;
    ak_status st = AK_OK;
    if (out) {
        if (i < n) *out = rows[i];
        else st = AK_FAIL(AK_ERR_INVALID_ARG, "ak_session_profile: index %zu of %zu", i, n);
    }
    free(rows);
    return st;
}
