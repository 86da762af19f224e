/* The graph optimizer: after binding and constant folding, first the basic passes, which
 * keep to standard ONNX operators (Identity, Transpose-pair and Reshape-chain removal,
 * duplicate merging, BatchNormalization and Mul/Div/Add/Sub folded into Conv, dead-node
 * removal: see "basic passes" below); then, at the extended level, rewrites chains of
 * nodes into one node where accelkit has a faster operator for the whole chain.
 *   Conv -> [Add residual] -> [Relu|Clip|LeakyRelu|Sigmoid|Tanh]  => FusedConv (com.microsoft:
 *                                      the residual and activation applied per output tile)
 *   MatMul(A, const B[K,N]) -> Add(const bias[N]) -> [Relu|Gelu]   => MatMulBias
 *   Gemm(A, const B, const C[N]) (alpha = beta = 1, no transA) -> [act] => MatMulBias
 *   0.5·x·(1 + erf(x/√2)), 0.5·x·(1 + tanh(√(2/π)(x + 0.044715x³)))  => Gelu (none | tanh)
 *   (x - mean(x)) / sqrt(mean(d²) + eps) [* g] [+ b]               => LayerNormalization
 *   x / sqrt(mean(x²) + eps) [* g]                                 => SimplifiedLayerNormalization
 *   Add(x, skip) [+ bias] -> LayerNormalization | Simplified...    => Skip[Simplified]LayerNormalization
 *   (each in every arrangement exporters write: optimize_fuse_gelu.c, optimize_fuse_norm.c)
 *   DequantizeLinear -> Conv(·, DQ(const int8 W), [DQ(const int32 bias)]) -> [Relu] ->
 *   QuantizeLinear                                                 => QLinearConv (com.accelkit)
 *   DequantizeLinear -> MatMul(·, DQ(const int8 B)) -> QuantizeLinear => QLinearMatMul
 * and then a layout pass: Conv/FusedConv nodes of 1×1 and depthwise layers that feed each
 * other become NchwcConv (com.accelkit) on values stored blocked (NCHW8c); the layers at
 * the edges of such a chain reorder their plain side themselves.
 * A chain is fused only when its intermediate values have no other reader and are not
 * graph outputs; constants are read from initializers and folded values, so the patterns
 * match whatever Identity/Constant nodes an exporter put in front of them. The fused node
 * takes the place of the chain's last node, where all its inputs are ready.
 * This file holds the driver and the emitting of fused nodes; the passes are in
 * optimize_basic.c, optimize_fuse*.c, optimize_qdq.c and optimize_layout.c, their shared
 * helpers in optimize.h. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/params.h"
#include "infer/runtime/optimize.h"

void ak__opt_count_uses(optimizer *o) {
    ak_session *s = o->s;
    size_t nv = s->g->num_values;
    for (size_t v = 0; v < nv; v++) o->uses[v] = 0, o->producer[v] = -1;
    for (size_t k = 0; k < s->num_nodes; k++) {
        const ak__exec_node *e = &s->nodes[k];
        if (!live(e)) continue;
        for (uint32_t i = 0; i < e->node->num_inputs; i++)
            if (e->node->inputs[i] != AK_IR_NONE) o->uses[e->node->inputs[i]]++;
        /* a value a subgraph reads is pinned, like a graph output: no fusion hides it */
        for (uint32_t i = 0; i < e->node->num_captures; i++) o->uses[e->node->captures[i]] += 1 << 20;
        for (uint32_t i = 0; i < e->node->num_outputs; i++)
            if (e->node->outputs[i] != AK_IR_NONE) o->producer[e->node->outputs[i]] = (int32_t)k;
    }
    for (size_t i = 0; i < s->g->num_outputs; i++) o->uses[s->g->outputs[i]] += 1 << 20;
}

/* The node reading v when it is v's only reader (and v is not a graph output). */
int32_t ak__opt_sole_reader(const optimizer *o, int32_t v) {
    if (v == AK_IR_NONE || o->uses[v] != 1) return -1;
    for (size_t k = 0; k < o->s->num_nodes; k++) {
        const ak__exec_node *e = &o->s->nodes[k];
        if (!live(e)) continue;
        for (uint32_t i = 0; i < e->node->num_inputs; i++)
            if (e->node->inputs[i] == v) return (int32_t)k;
    }
    return -1;
}

/* ---- emitting a fused node ------------------------------------------------------------ */

/* The next extra attribute of the spec, zeroed, with its name and type set. */
static ak__ir_attr *extra_attr(fused_spec *f, const char *name, ak__ir_attr_type type) {
    ak__ir_attr *a = &f->extra[f->num_extra++];
    memset(a, 0, sizeof *a);
    a->name = name;
    a->type = type;
    return a;
}

void ak__opt_add_string_attr(fused_spec *f, const char *name, const char *value) {
    ak__ir_attr *a = extra_attr(f, name, AK_ATTR_STRING);
    a->u.s.data = value;
    a->u.s.len = strlen(value);
}

/* activation_params: two floats at most, kept in the spec until the node is built */
void ak__opt_add_params_attr(fused_spec *f, const float *values, size_t n) {
    ak__ir_attr *a = extra_attr(f, "activation_params", AK_ATTR_FLOATS);
    memcpy(f->params, values, n * sizeof *values);
    a->u.floats = f->params;
    a->count = n;
}

void ak__opt_add_float_attr(fused_spec *f, const char *name, float value) {
    extra_attr(f, name, AK_ATTR_FLOAT)->u.f = value;
}

void ak__opt_add_int_attr(fused_spec *f, const char *name, int64_t value) {
    extra_attr(f, name, AK_ATTR_INT)->u.i = value;
}

ak_status ak__opt_arena_array(optimizer *o, size_t n, size_t size, void **out) {
    AK_CHECK(ak_arena_alloc(o->arena, n ? n * size : 1, 8, out));
    memset(*out, 0, n ? n * size : 1);
    return AK_OK;
}

static ak_status build_node(optimizer *o, const fused_spec *f, const ak__ir_node *first,
                            ak__ir_node **out) {
    ak__ir_node *n;
    uint32_t base_attrs = f->base ? f->base->num_attrs : 0;
    AK_CHECK(ak__opt_arena_array(o, 1, sizeof *n, (void **)&n));
    AK_CHECK(ak__opt_arena_array(o, f->num_inputs, sizeof *n->inputs, (void **)&n->inputs));
    AK_CHECK(ak__opt_arena_array(o, 1, sizeof *n->outputs, (void **)&n->outputs));
    AK_CHECK(ak__opt_arena_array(o, base_attrs + f->num_extra, sizeof *n->attrs, (void **)&n->attrs));
    n->name = first->name;
    n->op_type = f->op_type;
    n->domain = f->domain;
    n->opset = f->opset;
    n->num_inputs = f->num_inputs;
    memcpy(n->inputs, f->inputs, f->num_inputs * sizeof *n->inputs);
    n->num_outputs = 1;
    n->outputs[0] = f->output;
    if (base_attrs) memcpy(n->attrs, f->base->attrs, base_attrs * sizeof *n->attrs);
    memcpy(n->attrs + base_attrs, f->extra, f->num_extra * sizeof *n->attrs);
    n->num_attrs = base_attrs + f->num_extra;
    for (uint32_t i = base_attrs; i < n->num_attrs; i++) /* the spec's floats die with it */
        if (n->attrs[i].type == AK_ATTR_FLOATS) {
            float *p;
            AK_CHECK(ak__opt_arena_array(o, n->attrs[i].count, sizeof *p, (void **)&p));
            memcpy(p, n->attrs[i].u.floats, n->attrs[i].count * sizeof *p);
            n->attrs[i].u.floats = p;
        }
    *out = n;
    return AK_OK;
}

void ak__opt_drop(ak_session *s, ak__exec_node *e) {
    if (e->def->destroy && e->state) e->def->destroy(e->state);
    e->state = NULL;
    e->removed = 1;
}

/* Binds the fused node to its operator and runs its create. */
static ak_status bind_fused(optimizer *o, ak__exec_node *e, ak__ir_node *n) {
    ak_session *s = o->s;
    e->node = n;
    e->def = ak__op_find(n->domain, n->op_type, n->opset);
    if (!e->def)
        return AK_FAIL(AK_ERR_INTERNAL, "optimizer: no operator for fused %s", n->op_type);
    const ak__tensor **io;
    AK_CHECK(ak__opt_arena_array(o, n->num_inputs + 1, sizeof *io, (void **)&io));
    const ak__tensor *consts[FUSED_MAX_INPUTS] = {0};
    for (uint32_t i = 0; i < n->num_inputs; i++) {
        io[i] = n->inputs[i] == AK_IR_NONE ? NULL : &s->values[n->inputs[i]];
        consts[i] = constant(o, n->inputs[i]);
    }
    io[n->num_inputs] = &s->values[n->outputs[0]];
    e->inputs = io;
    e->outputs = (ak__tensor **)io + n->num_inputs;
    e->removed = 0;
    return e->def->create ? e->def->create(n, consts, &e->state) : AK_OK;
}

/* Counts one application of a pass (or one fused node of an operator) for
 * ak_session_optimizations; `what` is a static string. */
void ak__opt_note(optimizer *o, const char *what) {
    ak_session *s = o->s;
    for (size_t i = 0; i < s->num_opt_notes; i++)
        if (strcmp(s->opt_notes[i].what, what) == 0) {
            s->opt_notes[i].times++;
            return;
        }
    if (s->num_opt_notes < sizeof s->opt_notes / sizeof *s->opt_notes)
        s->opt_notes[s->num_opt_notes++] = (struct ak__opt_note){what, 1};
}

/* Replaces the chain (exec indices) by one node built from f at the chain's last place;
 * noted as `what` (a rewrite into a standard operator) or, when NULL, as a fused node
 * of f's operator. */
ak_status ak__opt_emit_as(optimizer *o, const fused_spec *f, const int32_t *chain, size_t n,
                         const char *what) {
    int32_t last = chain[0];
    for (size_t i = 1; i < n; i++)
        if (chain[i] > last) last = chain[i];
    ak__ir_node *node;
    AK_CHECK(build_node(o, f, o->s->nodes[chain[0]].node, &node));
    for (size_t i = 0; i < n; i++) ak__opt_drop(o->s, &o->s->nodes[chain[i]]);
    AK_CHECK(bind_fused(o, &o->s->nodes[last], node));
    if (!what) o->fused++;
    ak__opt_note(o, what ? what : f->op_type);
    ak__opt_count_uses(o);
    return AK_OK;
}

ak_status ak__opt_emit(optimizer *o, const fused_spec *f, const int32_t *chain, size_t n) {
    return ak__opt_emit_as(o, f, chain, n, NULL);
}

ak_status ak__opt_run_pass(optimizer *o, const char *root_op, pattern_fn fn) {
    for (size_t k = 0; k < o->s->num_nodes; k++) {
        ak__exec_node *e = &o->s->nodes[k];
        if (!live(e) || !is_op(e->node, root_op)) continue;
        int hit = 0;
        AK_CHECK(fn(o, (int32_t)k, &hit));
    }
    return AK_OK;
}

ak_status ak__optimize(ak_session *s, int level) {
    size_t nv = s->g->num_values ? s->g->num_values : 1;
    optimizer o = {s, NULL, calloc(nv, sizeof(int32_t)), calloc(nv, sizeof(int32_t)), 0};
    ak_status st = o.uses && o.producer ? ak_arena_create(0, &s->opt_arena)
                                        : AK_FAIL(AK_ERR_NO_MEMORY, "optimizer: out of memory");
    o.arena = s->opt_arena;
    if (st == AK_OK) {
        ak__opt_count_uses(&o);
        st = ak__opt_basic(&o);
    }
    if (st == AK_OK && level != AK_OPTIMIZE_BASIC) {
        /* Gelu first: MatMulBias absorbs the Gelu nodes it creates */
        static const struct { const char *root; pattern_fn fn; } passes[] = {
            {"Erf", ak__opt_fuse_gelu}, {"Tanh", ak__opt_fuse_gelu_tanh},
            {"ReduceMean", ak__opt_fuse_norm}, /* LayerNorm and RMSNorm (optimize_fuse_norm.c) */
            {"Gemm", ak__opt_fuse_gemm},
            /* QDQ first: the float fusions would take its Conv and MatMul nodes */
            {"Conv", ak__opt_fuse_qdq_conv}, {"MatMul", ak__opt_fuse_qdq_matmul},
            {"Add", ak__opt_fuse_qdq_add}, /* after Conv: it keeps the DQ the Add shares */
            {"MatMulInteger", ak__opt_fuse_dynamic_matmul},
            /* attention before MatMulBias, which then takes the projections it leaves */
            {"Softmax", ak__opt_fuse_attention},
            {"MatMul", ak__opt_fuse_matmul}, {"Conv", ak__opt_fuse_conv},
            /* after MatMulBias took the projections' biases: residual Add + norm */
            {"LayerNormalization", ak__opt_fuse_skip_ln},
            {"SimplifiedLayerNormalization", ak__opt_fuse_skip_rms},
        };
        for (size_t p = 0; st == AK_OK && p < sizeof passes / sizeof *passes; p++)
            st = ak__opt_run_pass(&o, passes[p].root, passes[p].fn);
        if (st == AK_OK && level == AK_OPTIMIZE_ALL) st = ak__opt_layout_nchwc(&o);
    }
    s->num_fused = o.fused;
    free(o.uses);
    free(o.producer);
    return st;
}
