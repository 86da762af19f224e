/* Sessions: binding every node to an operator, constant folding (and the Shape/Size of
 * inputs with fixed dims), lifetimes, and the
 * query calls of accelkit/infer.h. The run loop is in session_run.c, the memory plan in
 * memplan.c. */
#include <stdlib.h>
#include <string.h>

#include "core/params.h"
#include "infer/runtime/session.h"

ak_status ak_session_options_init(ak_session_options *opts) {
    AK_ARG_CHECK(opts, "session options: NULL");
    opts->threads = 0;
    opts->profile = -1;
    opts->fold_constants = 1;
    opts->optimize = 1;
    return AK_OK;
}

/* The tensor view of a constant (initializer) value. */
static void bind_constant(ak__tensor *t, const ak__ir_tensor *c) {
    t->type = c->type;
    t->rank = c->rank;
    for (int i = 0; i < c->rank; i++) t->dims[i] = c->dims[i];
    t->count = c->count;
    t->data = c->data;
}

static ak_status alloc_tables(ak_session *s) {
    size_t n = s->g->num_values ? s->g->num_values : 1;
    s->values = calloc(n, sizeof *s->values);
    s->source = calloc(n, sizeof *s->source);
    s->baked = calloc(n, sizeof *s->baked);
    s->alias_root = calloc(n, sizeof *s->alias_root);
    s->first_def = calloc(n, sizeof *s->first_def);
    s->last_use = calloc(n, sizeof *s->last_use);
    s->folded_data = calloc(n, sizeof *s->folded_data);
    s->plan_shapes = calloc(n, sizeof *s->plan_shapes);
    s->plan_offset = calloc(n, sizeof *s->plan_offset);
    s->dynamic = calloc(n, sizeof *s->dynamic);
    s->nodes = calloc(s->g->num_nodes ? s->g->num_nodes : 1, sizeof *s->nodes);
    if (!s->values || !s->source || !s->baked || !s->alias_root || !s->first_def || !s->last_use ||
        !s->folded_data || !s->plan_shapes || !s->plan_offset || !s->dynamic || !s->nodes)
        return AK_FAIL(AK_ERR_NO_MEMORY, "session: out of memory for %zu values", n);
    return AK_OK;
}

static void classify_values(ak_session *s) {
    const ak__ir_graph *g = s->g;
    for (size_t v = 0; v < g->num_values; v++) {
        const ak__ir_value *iv = &g->values[v];
        s->alias_root[v] = (int32_t)v;
        if (iv->flags & AK_IR_VALUE_CONST) {
            s->source[v] = AK_SRC_CONST;
            bind_constant(&s->values[v], iv->constant);
        } else if (iv->flags & AK_IR_VALUE_INPUT) {
            s->source[v] = AK_SRC_INPUT;
        } else if (iv->flags & AK_IR_VALUE_OUTER) {
            s->source[v] = AK_SRC_OUTER;
        } else {
            s->source[v] = iv->producer != AK_IR_NONE ? AK_SRC_ACTIVATION : AK_SRC_UNUSED;
        }
    }
}

static const char *node_domain(const ak__ir_node *n) {
    return strcmp(n->domain, "ai.onnx") == 0 ? "" : n->domain;
}

/* Finds each node's operator; the first one missing fails the session. */
static ak_status bind_operators(ak_session *s) {
    const ak__ir_graph *g = s->g;
    size_t io = 0;
    for (size_t k = 0; k < g->num_nodes; k++) {
        const ak__ir_node *n = &g->nodes[g->order[k]];
        const ak__op_def *def = ak__op_find(node_domain(n), n->op_type, n->opset);
        if (!def)
            return AK_FAIL(AK_ERR_UNSUPPORTED, "unsupported operator %s%s%s (opset %lld) at node %s",
                           n->domain[0] ? n->domain : "", n->domain[0] ? ":" : "", n->op_type,
                           (long long)n->opset, n->name[0] ? n->name : "<unnamed>");
        AK_CHECK(ak__op_version_check(n, def));
        s->nodes[k].node = n;
        s->nodes[k].def = def;
        io += n->num_inputs + n->num_outputs + n->num_captures;
    }
    s->num_nodes = g->num_nodes;
    s->io_ptrs = calloc(io ? io : 1, sizeof *s->io_ptrs);
    if (!s->io_ptrs) return AK_FAIL(AK_ERR_NO_MEMORY, "session: out of memory");
    const ak__tensor **p = s->io_ptrs;
    for (size_t k = 0; k < s->num_nodes; k++) {
        ak__exec_node *e = &s->nodes[k];
        e->inputs = p;
        for (uint32_t i = 0; i < e->node->num_inputs; i++, p++)
            *p = e->node->inputs[i] == AK_IR_NONE ? NULL : &s->values[e->node->inputs[i]];
        e->outputs = (ak__tensor **)p;
        for (uint32_t i = 0; i < e->node->num_outputs; i++, p++)
            *p = e->node->outputs[i] == AK_IR_NONE ? NULL : &s->values[e->node->outputs[i]];
        e->captures = p;
        for (uint32_t i = 0; i < e->node->num_captures; i++, p++)
            *p = &s->values[e->node->captures[i]];
    }
    return AK_OK;
}

static int is_constant(const ak_session *s, int32_t v) {
    return s->source[v] == AK_SRC_CONST || s->source[v] == AK_SRC_FOLDED;
}

static int foldable(const ak_session *s, const ak__exec_node *e) {
    if (e->def->flags & AK_OP_NONDETERMINISTIC) return 0;
    for (uint32_t i = 0; i < e->node->num_attrs; i++)
        if (e->node->attrs[i].type == AK_ATTR_GRAPH || e->node->attrs[i].type == AK_ATTR_GRAPHS)
            return 0;
    for (uint32_t i = 0; i < e->node->num_inputs; i++) {
        int32_t v = e->node->inputs[i];
        if (v != AK_IR_NONE && !is_constant(s, v)) return 0;
    }
    return 1;
}

/* Computes a node whose inputs are all constant once, now; its outputs become constants
 * owned by the session. */
static ak_status fold_node(ak_session *s, ak__exec_node *e) {
    ak__op_ctx ctx = {e->node, e->state, e->node->num_inputs, e->node->num_outputs,
                      e->inputs, e->outputs, s->pool, 0, NULL, 0, NULL, &s->folded_strings};
    AK_CHECK(e->def->reshape(&ctx));
    AK_CHECK(ak__op_strings_check(&ctx));
    for (uint32_t o = 0; o < e->node->num_outputs; o++) {
        int32_t v = e->node->outputs[o];
        if (v == AK_IR_NONE) continue;
        ak__tensor *t = &s->values[v];
        if (o == 0 && (e->def->flags & AK_OP_ALIAS_INPUT0)) {
            t->data = e->inputs[0]->data;
        } else {
            AK_CHECK(ak_alloc(ak__tensor_nbytes(t), &s->folded_data[v]));
            t->data = s->folded_data[v];
            s->folded_bytes += ak__tensor_nbytes(t);
        }
        s->source[v] = AK_SRC_FOLDED;
    }
    void *ws = NULL;
    if (ctx.workspace_bytes) AK_CHECK(ak_alloc(ctx.workspace_bytes, &ws));
    ctx.workspace = ws;
    ak_status st = e->def->run ? e->def->run(&ctx) : AK_OK;
    ak_free(ws);
    e->folded = 1;
    s->num_folded++;
    return st;
}

/* ---- Shape and Size of a graph input with fixed dims ---------------------------------- */

/* Shape (its start/end range) or Size of a model's graph input whose dims there are all
 * fixed numbers: every run's input has them (session_run.c's check_input refuses any
 * other), so the result is known now. A symbolic or unknown dim, a subgraph's input
 * (model NULL: bound from its parent unchecked) or any other value is not. Returns the
 * result's element count (Size: -1 with the product in out[0]), or 0 when not static. */
static int static_shape_of_input(const ak_session *s, const ak__ir_node *n, int64_t *out) {
    int size = strcmp(n->op_type, "Size") == 0;
    if (!s->model || n->domain[0] || n->num_inputs != 1 || n->num_outputs != 1 ||
        n->inputs[0] == AK_IR_NONE || (!size && strcmp(n->op_type, "Shape") != 0))
        return 0;
    const ak__ir_value *x = &s->g->values[n->inputs[0]];
    if (!(x->flags & AK_IR_VALUE_INPUT) || s->source[n->inputs[0]] != AK_SRC_INPUT || x->rank < 0)
        return 0;
    int64_t r = x->rank, lo = size ? 0 : ak__attr_int(n, "start", 0),
            hi = size ? r : ak__attr_int(n, "end", r);
    lo = lo < 0 ? lo + r : lo, hi = hi < 0 ? hi + r : hi;
    lo = lo < 0 ? 0 : lo > r ? r : lo, hi = hi < 0 ? 0 : hi > r ? r : hi;
    int64_t count = 1;
    for (int64_t i = lo; i < hi; i++) {
        int64_t d = x->dims[i].value;
        if (d < 0 || x->dims[i].param || (d && count > INT64_MAX / d)) return 0;
        out[i - lo] = d;
        count *= d;
    }
    if (size) return out[0] = count, -1;
    return hi > lo ? (int)(hi - lo) : 0; /* an empty range: left to run */
}

static ak_status fold_static_shape(ak_session *s, ak__exec_node *e, const int64_t *dims, int n) {
    int32_t v = e->node->outputs[0];
    ak__tensor *t = &s->values[v];
    int64_t len = n;
    AK_CHECK(ak__tensor_set_shape(t, AK_ELEM_I64, n < 0 ? 0 : 1, &len, s->g->values[v].name));
    AK_CHECK(ak_alloc(ak__tensor_nbytes(t), &s->folded_data[v]));
    memcpy(s->folded_data[v], dims, (size_t)(n < 0 ? 1 : n) * sizeof *dims);
    t->data = s->folded_data[v];
    s->folded_bytes += ak__tensor_nbytes(t);
    s->source[v] = AK_SRC_FOLDED;
    e->folded = 1;
    s->num_folded++;
    return AK_OK;
}

/* Runs each operator's create in execution order, folding constant nodes as it goes so
 * later nodes see folded values as constants (weights behind a Transpose, say). */
static ak_status create_operators(ak_session *s, int fold) {
    const ak__tensor *consts[64];
    for (size_t k = 0; k < s->num_nodes; k++) {
        ak__exec_node *e = &s->nodes[k];
        const ak__ir_node *n = e->node;
        const ak__tensor **cv = consts, **heap = NULL;
        if (n->num_inputs > 64) {
            heap = calloc(n->num_inputs, sizeof *heap);
            if (!heap) return AK_FAIL(AK_ERR_NO_MEMORY, "session: out of memory");
            cv = heap;
        }
        for (uint32_t i = 0; i < n->num_inputs; i++)
            cv[i] = n->inputs[i] != AK_IR_NONE && is_constant(s, n->inputs[i])
                        ? &s->values[n->inputs[i]] : NULL;
        ak_status st = e->def->create ? e->def->create(n, cv, &e->state) : AK_OK;
        free(heap);
        AK_CHECK(st);
        if (fold && foldable(s, e)) AK_CHECK(fold_node(s, e));
        int64_t dims[AK_IR_MAX_RANK];
        int nd = fold && !e->folded && e->node->num_outputs == 1 &&
                         e->node->outputs[0] != AK_IR_NONE ? static_shape_of_input(s, n, dims) : 0;
        if (nd) AK_CHECK(fold_static_shape(s, e, dims, nd));
    }
    return AK_OK;
}

/* Marks the constants that creates (of the nodes left after optimizing) and folding
 * consumed: overriding one at run time would not reach what was made from it. */
static void mark_baked(ak_session *s) {
    for (size_t k = 0; k < s->num_nodes; k++) {
        const ak__exec_node *e = &s->nodes[k];
        if (e->removed || (!e->folded && !e->def->create)) continue;
        for (uint32_t i = 0; i < e->node->num_inputs; i++) {
            int32_t v = e->node->inputs[i];
            if (v != AK_IR_NONE && s->source[v] == AK_SRC_CONST) s->baked[v] = 1;
        }
    }
}

/* first_def / last_use per value (execution steps; graph outputs live to the end), and
 * the values sharing bytes with another through AK_OP_ALIAS_INPUT0. */
static void compute_lifetimes(ak_session *s) {
    const ak__ir_graph *g = s->g;
    int32_t end = (int32_t)s->num_nodes;
    for (size_t v = 0; v < g->num_values; v++) s->first_def[v] = s->last_use[v] = -1;
    for (size_t k = 0; k < s->num_nodes; k++) {
        const ak__exec_node *e = &s->nodes[k];
        if (e->folded || e->removed) continue;
        for (uint32_t i = 0; i < e->node->num_inputs; i++)
            if (e->node->inputs[i] != AK_IR_NONE) s->last_use[e->node->inputs[i]] = (int32_t)k;
        for (uint32_t i = 0; i < e->node->num_captures; i++) /* read by a subgraph */
            s->last_use[e->node->captures[i]] = (int32_t)k;
        for (uint32_t o = 0; o < e->node->num_outputs; o++) {
            int32_t v = e->node->outputs[o];
            if (v == AK_IR_NONE) continue;
            s->first_def[v] = (int32_t)k;
            if (s->last_use[v] < (int32_t)k) s->last_use[v] = (int32_t)k;
        }
        if ((e->def->flags & AK_OP_ALIAS_INPUT0) && e->node->num_inputs &&
            e->node->inputs[0] != AK_IR_NONE && e->node->outputs[0] != AK_IR_NONE)
            s->alias_root[e->node->outputs[0]] = s->alias_root[e->node->inputs[0]];
    }
    for (size_t i = 0; i < g->num_outputs; i++) s->last_use[g->outputs[i]] = end;
    for (size_t v = 0; v < g->num_values; v++) {
        int32_t r = s->alias_root[v];
        if (r != (int32_t)v && s->last_use[v] > s->last_use[r]) s->last_use[r] = s->last_use[v];
    }
}

/* s->g is set; a subsession makes a one-thread pool (no worker threads) for folding and
 * runs on its parent's pool. */
ak_status ak__session_init(ak_session *s, const ak_session_options *opts) {
    s->profile = opts->profile >= 0 ? opts->profile : (int)ak__param_int(AK_PARAM_PROFILE);
    AK_CHECK(ak_threadpool_create(s->model ? opts->threads : 1, &s->own_pool));
    s->pool = s->own_pool;
    AK_CHECK(alloc_tables(s));
    classify_values(s);
    AK_CHECK(bind_operators(s));
    AK_CHECK(create_operators(s, opts->fold_constants));
    if (opts->optimize != AK_OPTIMIZE_NONE) AK_CHECK(ak__optimize(s, opts->optimize));
    mark_baked(s);
    compute_lifetimes(s);
    return ak__bk_session_init(s);
}

ak_status ak_session_create(const ak_model *model, const ak_session_options *opts,
                            ak_session **out) {
    AK_ARG_CHECK(out, "ak_session_create: out is NULL");
    *out = NULL;
    AK_ARG_CHECK(model, "ak_session_create: model is NULL");
    ak_session_options defaults;
    ak_session_options_init(&defaults);
    if (!opts) opts = &defaults;
    AK_ARG_CHECK(opts->threads >= 0, "session options: threads %d is negative", opts->threads);
    AK_ARG_CHECK(opts->optimize >= AK_OPTIMIZE_NONE && opts->optimize <= AK_OPTIMIZE_EXTENDED,
                 "session options: optimize %d is not an optimizer level (0-3, AK_OPTIMIZE_*)",
                 opts->optimize);
    ak_session *s = calloc(1, sizeof *s);
    if (!s) return AK_FAIL(AK_ERR_NO_MEMORY, "session: out of memory");
    s->model = model;
    s->g = model->graph;
    s->profile_start_ns = ak_now_ns(); /* time zero of ak_session_end_profiling's trace */
    ak_status st = ak__session_init(s, opts);
    if (st != AK_OK) {
        ak_session_free(s);
        return st;
    }
    *out = s;
    return AK_OK;
}

ak_status ak_session_create_from_file(const char *path, const ak_session_options *opts,
                                      ak_session **out) {
    AK_ARG_CHECK(out, "ak_session_create_from_file: out is NULL");
    *out = NULL;
    ak_model *model;
    AK_CHECK(ak_onnx_load_file(path, &model));
    ak_status st = ak_session_create(model, opts, out);
    if (st != AK_OK) {
        ak_model_free(model);
        return st;
    }
    (*out)->owned_model = model;
    return AK_OK;
}

void ak_session_free(ak_session *s) {
    if (!s) return;
    size_t nv = s->g ? s->g->num_values : 0;
    for (size_t k = 0; k < s->num_nodes; k++)
        if (s->nodes[k].def && s->nodes[k].def->destroy && s->nodes[k].state)
            s->nodes[k].def->destroy(s->nodes[k].state);
    for (size_t v = 0; v < nv; v++) {
        if (s->folded_data) ak_free(s->folded_data[v]);
        if (s->dynamic) ak_free(s->dynamic[v]);
    }
    ak_free(s->arena);
    ak_free(s->retired_arena);
    ak_free(s->workspace);
    ak__string_pool_free(&s->folded_strings);
    ak__string_pool_free(&s->run_strings);
    free(s->values);
    free(s->source);
    free(s->baked);
    free(s->alias_root);
    free(s->first_def);
    free(s->last_use);
    free(s->folded_data);
    free(s->plan_shapes);
    free(s->plan_offset);
    free(s->dynamic);
    free(s->nodes);
    free(s->io_ptrs);
    ak_arena_free(s->opt_arena);
    ak_threadpool_free(s->own_pool);
    free(s->outer_slot);
    free(s->bound);
    ak__session_free_events(s);
    ak__bk_session_free(s->backends);
    ak_model_free(s->owned_model);
    free(s);
}

const ak_model *ak_session_model(const ak_session *s) { return s ? s->model : NULL; }

ak_status ak_session_get_memory(const ak_session *s, ak_session_memory *out) {
    AK_ARG_CHECK(s && out, "ak_session_get_memory: NULL argument");
    out->arena_bytes = s->arena_bytes;
    out->naive_bytes = s->naive_bytes;
    out->workspace_bytes = s->workspace_bytes;
    out->folded_bytes = s->folded_bytes;
    out->num_folded = s->num_folded;
    out->num_fused = s->num_fused;
    out->planned = s->planned;
    return AK_OK;
}
