/* The graph optimizer: after binding and constant folding, first the basic passes, which
 * keep to standard ONNX operators (Identity, Transpose-pair and Reshape-chain removal,
 * duplicate merging, BatchNormalization and Mul/Div/Add/Sub folded into Conv, dead-node
 * removal: see "basic passes" below); then, at the extended level, rewrites chains of
 * nodes into one node where accelkit has a faster operator for the whole chain.
 *   Conv -> [Add residual] -> [Relu|Clip|LeakyRelu|Sigmoid|Tanh]  => FusedConv (com.microsoft:
 *                                      the residual and activation applied per output tile)
 *   MatMul(A, const B[K,N]) -> Add(const bias[N]) -> [Relu|Gelu]   => MatMulBias
 *   x / sqrt(2) -> Erf -> +1 -> * x -> * 0.5 (either order)        => Gelu
 *   ReduceMean/Sub/Pow 2/ReduceMean/Add eps/Sqrt/Div/Mul g/Add b    => LayerNormalization
 *   DequantizeLinear -> Conv(·, DQ(const int8 W), [DQ(const int32 bias)]) -> [Relu] ->
 *   QuantizeLinear                                                 => QLinearConv (com.accelkit)
 *   DequantizeLinear -> MatMul(·, DQ(const int8 B)) -> QuantizeLinear => QLinearMatMul
 * and then a layout pass: Conv/FusedConv nodes of 1×1 and depthwise layers that feed each
 * other become NchwcConv (com.accelkit) on values stored blocked (NCHW8c); the layers at
 * the edges of such a chain reorder their plain side themselves.
 * A chain is fused only when its intermediate values have no other reader and are not
 * graph outputs; constants are read from initializers and folded values, so the patterns
 * match whatever Identity/Constant nodes an exporter put in front of them. The fused node
 * takes the place of the chain's last node, where all its inputs are ready. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/params.h"
#include "infer/runtime/session.h"

typedef struct optimizer {
    ak_session *s;
    ak_arena *arena;   /* the fused nodes and their arrays (owned by the session) */
    int32_t *uses;     /* readers per value (+1 for graph outputs) */
    int32_t *producer; /* exec node index per value, or -1 */
    size_t fused;
} optimizer;

static int live(const ak__exec_node *e) { return !e->folded && !e->removed; }

static void count_uses(optimizer *o) {
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

/* ---- looking at nodes ----------------------------------------------------------------- */

static const ak__ir_node *node_of(const optimizer *o, int32_t k) {
    return k >= 0 ? o->s->nodes[k].node : NULL;
}

static int is_op(const ak__ir_node *n, const char *op) {
    return n && n->domain[0] == '\0' && strcmp(n->op_type, op) == 0;
}

static int32_t in(const ak__ir_node *n, uint32_t i) {
    return i < n->num_inputs ? n->inputs[i] : AK_IR_NONE;
}

/* The node reading v when it is v's only reader (and v is not a graph output). */
static int32_t sole_reader(const optimizer *o, int32_t v) {
    if (v == AK_IR_NONE || o->uses[v] != 1) return -1;
    for (size_t k = 0; k < o->s->num_nodes; k++) {
        const ak__exec_node *e = &o->s->nodes[k];
        if (!live(e)) continue;
        for (uint32_t i = 0; i < e->node->num_inputs; i++)
            if (e->node->inputs[i] == v) return (int32_t)k;
    }
    return -1;
}

static const ak__tensor *constant(const optimizer *o, int32_t v) {
    if (v == AK_IR_NONE) return NULL;
    uint8_t src = o->s->source[v];
    return src == AK_SRC_CONST || src == AK_SRC_FOLDED ? &o->s->values[v] : NULL;
}

static int const_scalar(const optimizer *o, int32_t v, double *out) {
    const ak__tensor *t = constant(o, v);
    if (!t || t->count != 1 || !ak__elem_is_float(t->type)) return 0;
    *out = ak__elem_get(t->data, t->type, 0);
    return 1;
}

static int const_near(const optimizer *o, int32_t v, double want) {
    double x;
    return const_scalar(o, v, &x) && fabs(x - want) <= 1e-5 * fabs(want);
}

/* For a binary node reading `v` once: its other input. */
static int32_t other_input(const ak__ir_node *n, int32_t v) {
    if (n->num_inputs != 2) return AK_IR_NONE;
    if (n->inputs[0] == v && n->inputs[1] != v) return n->inputs[1];
    if (n->inputs[1] == v && n->inputs[0] != v) return n->inputs[0];
    return AK_IR_NONE;
}

static int last_axis_mean(const ak__ir_node *n) {
    const int64_t *axes;
    return is_op(n, "ReduceMean") && n->opset < 18 && ak__attr_ints(n, "axes", &axes) == 1 &&
           axes[0] == -1 && ak__attr_int(n, "keepdims", 1) == 1;
}


/* ---- emitting a fused node ------------------------------------------------------------ */

#define MAX_CHAIN 12
#define FUSED_MAX_INPUTS 9 /* QLinearConv's */
#define MAX_ATTRS 32

typedef struct fused_spec {
    const char *domain, *op_type;
    int64_t opset;
    int32_t inputs[FUSED_MAX_INPUTS];
    uint32_t num_inputs;
    int32_t output;
    const ak__ir_node *base; /* attributes copied from this node (Conv), or NULL */
    ak__ir_attr extra[4];
    uint32_t num_extra;
    float params[2];
} fused_spec;

/* The next extra attribute of the spec, zeroed, with its name and type set. */
static ak__ir_attr *extra_attr(fused_spec *f, const char *name, ak__ir_attr_type type) {
    ak__ir_attr *a = &f->extra[f->num_extra++];
    memset(a, 0, sizeof *a);
    a->name = name;
    a->type = type;
    return a;
}

static void add_string_attr(fused_spec *f, const char *name, const char *value) {
    ak__ir_attr *a = extra_attr(f, name, AK_ATTR_STRING);
    a->u.s.data = value;
    a->u.s.len = strlen(value);
}

/* activation_params: two floats at most, kept in the spec until the node is built */
static void add_params_attr(fused_spec *f, const float *values, size_t n) {
    ak__ir_attr *a = extra_attr(f, "activation_params", AK_ATTR_FLOATS);
    memcpy(f->params, values, n * sizeof *values);
    a->u.floats = f->params;
    a->count = n;
}

static void add_float_attr(fused_spec *f, const char *name, float value) {
    extra_attr(f, name, AK_ATTR_FLOAT)->u.f = value;
}

static void add_int_attr(fused_spec *f, const char *name, int64_t value) {
    extra_attr(f, name, AK_ATTR_INT)->u.i = value;
}

static ak_status arena_array(optimizer *o, size_t n, size_t size, void **out) {
    AK_CHECK(ak_arena_alloc(o->arena, n ? n * size : 1, 8, out));
    memset(*out, 0, n ? n * size : 1);
    return AK_OK;
}

static ak_status build_node(optimizer *o, const fused_spec *f, const ak__ir_node *first,
                            ak__ir_node **out) {
    ak__ir_node *n;
    uint32_t base_attrs = f->base ? f->base->num_attrs : 0;
    AK_CHECK(arena_array(o, 1, sizeof *n, (void **)&n));
    AK_CHECK(arena_array(o, f->num_inputs, sizeof *n->inputs, (void **)&n->inputs));
    AK_CHECK(arena_array(o, 1, sizeof *n->outputs, (void **)&n->outputs));
    AK_CHECK(arena_array(o, base_attrs + f->num_extra, sizeof *n->attrs, (void **)&n->attrs));
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
            AK_CHECK(arena_array(o, n->attrs[i].count, sizeof *p, (void **)&p));
            memcpy(p, n->attrs[i].u.floats, n->attrs[i].count * sizeof *p);
            n->attrs[i].u.floats = p;
        }
    *out = n;
    return AK_OK;
}

static void drop(ak_session *s, ak__exec_node *e) {
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
    AK_CHECK(arena_array(o, n->num_inputs + 1, sizeof *io, (void **)&io));
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
static void note(optimizer *o, const char *what) {
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
static ak_status emit_as(optimizer *o, const fused_spec *f, const int32_t *chain, size_t n,
                         const char *what) {
    int32_t last = chain[0];
    for (size_t i = 1; i < n; i++)
        if (chain[i] > last) last = chain[i];
    ak__ir_node *node;
    AK_CHECK(build_node(o, f, o->s->nodes[chain[0]].node, &node));
    for (size_t i = 0; i < n; i++) drop(o->s, &o->s->nodes[chain[i]]);
    AK_CHECK(bind_fused(o, &o->s->nodes[last], node));
    if (!what) o->fused++;
    note(o, what ? what : f->op_type);
    count_uses(o);
    return AK_OK;
}

static ak_status emit(optimizer *o, const fused_spec *f, const int32_t *chain, size_t n) {
    return emit_as(o, f, chain, n, NULL);
}

/* ---- patterns ------------------------------------------------------------------------- */

/* An activation node FusedConv/MatMulBias can apply: its kind and parameters. */
static int activation_of(const optimizer *o, const ak__ir_node *n, fused_spec *f) {
    if (is_op(n, "Relu")) return add_string_attr(f, "activation", "Relu"), 1;
    if (is_op(n, "Sigmoid")) return add_string_attr(f, "activation", "Sigmoid"), 1;
    if (is_op(n, "Tanh")) return add_string_attr(f, "activation", "Tanh"), 1;
    if (is_op(n, "Gelu") && strcmp(ak__attr_string(n, "approximate", "none"), "none") == 0)
        return add_string_attr(f, "activation", "Gelu"), 1;
    if (is_op(n, "LeakyRelu")) {
        float alpha = ak__attr_float(n, "alpha", 0.01f);
        add_string_attr(f, "activation", "LeakyRelu");
        add_params_attr(f, &alpha, 1);
        return 1;
    }
    if (!is_op(n, "Clip")) return 0;
    double lo = -3.4e38, hi = 3.4e38;
    if (n->opset < 11) {
        lo = ak__attr_float(n, "min", -3.4e38f);
        hi = ak__attr_float(n, "max", 3.4e38f);
    } else if ((in(n, 1) != AK_IR_NONE && !const_scalar(o, in(n, 1), &lo)) ||
               (in(n, 2) != AK_IR_NONE && !const_scalar(o, in(n, 2), &hi))) {
        return 0;
    }
    float range[2] = {(float)lo, (float)hi};
    add_string_attr(f, "activation", "Clip");
    add_params_attr(f, range, 2);
    return 1;
}

static ak_status fuse_conv(optimizer *o, int32_t k, int *hit) {
    const ak__ir_node *conv = node_of(o, k);
    fused_spec f = {"com.microsoft", "FusedConv", 1, {in(conv, 0), in(conv, 1), in(conv, 2)}, 3,
                    conv->outputs[0], conv, {{0}}, 0, {0}};
    int32_t chain[3] = {k}, n = 1, r = sole_reader(o, conv->outputs[0]);
    const ak__ir_node *next = node_of(o, r);
    if (is_op(next, "Add")) { /* a residual produced by another node */
        int32_t z = other_input(next, conv->outputs[0]);
        if (z != AK_IR_NONE && !constant(o, z) && o->producer[z] >= 0) {
            f.inputs[3] = z, f.num_inputs = 4, f.output = next->outputs[0];
            chain[n++] = r;
            next = node_of(o, r = sole_reader(o, f.output));
        }
    }
    if (next && !is_op(next, "Gelu") && activation_of(o, next, &f))
        chain[n++] = r, f.output = next->outputs[0];
    if (n == 1) return AK_OK;
    *hit = 1;
    return emit(o, &f, chain, (size_t)n);
}

static ak_status fuse_matmul(optimizer *o, int32_t k, int *hit) {
    const ak__ir_node *mm = node_of(o, k);
    const ak__tensor *b = constant(o, in(mm, 1));
    if (!b || b->rank != 2 || b->type != AK_ELEM_F32) return AK_OK;
    int32_t r = sole_reader(o, mm->outputs[0]);
    const ak__ir_node *add = node_of(o, r);
    if (!is_op(add, "Add")) return AK_OK;
    int32_t bias = other_input(add, mm->outputs[0]);
    const ak__tensor *bt = constant(o, bias);
    if (!bt || bt->rank != 1 || bt->type != AK_ELEM_F32 || bt->dims[0] != b->dims[1])
        return AK_OK;
    fused_spec f = {"com.accelkit", "MatMulBias", 1, {in(mm, 0), in(mm, 1), bias}, 3,
                    add->outputs[0], NULL, {{0}}, 0, {0}};
    int32_t chain[3] = {k, r}, n = 2, a = sole_reader(o, add->outputs[0]);
    const ak__ir_node *act = node_of(o, a);
    if ((is_op(act, "Relu") || is_op(act, "Gelu")) && activation_of(o, act, &f))
        chain[n++] = a, f.output = act->outputs[0];
    *hit = 1;
    return emit(o, &f, chain, (size_t)n);
}

/* From the Erf: x/sqrt(2) (or x*(1/sqrt(2))) -> Erf -> +1 -> then x*0.5*(...) in either
 * association. */
static ak_status fuse_gelu(optimizer *o, int32_t k, int *hit) {
    const ak__ir_node *erf = node_of(o, k);
    int32_t d = in(erf, 0), dk = o->producer[d >= 0 ? d : 0];
    const ak__ir_node *scale = d >= 0 && o->uses[d] == 1 ? node_of(o, dk) : NULL;
    if (!scale || !((is_op(scale, "Div") && const_near(o, in(scale, 1), M_SQRT2)) ||
                    (is_op(scale, "Mul") && const_near(o, in(scale, 1), M_SQRT1_2))))
        return AK_OK;
    int32_t x = in(scale, 0), ak_ = sole_reader(o, erf->outputs[0]);
    const ak__ir_node *plus = node_of(o, ak_);
    if (!is_op(plus, "Add") || !const_near(o, other_input(plus, erf->outputs[0]), 1.0))
        return AK_OK;
    int32_t mk = sole_reader(o, plus->outputs[0]);
    const ak__ir_node *mul = node_of(o, mk);
    if (!is_op(mul, "Mul")) return AK_OK;
    int32_t t = other_input(mul, plus->outputs[0]);
    fused_spec f = {"", "Gelu", erf->opset, {x}, 1, AK_IR_NONE, NULL, {{0}}, 0, {0}};
    int32_t chain[5] = {dk, k, ak_, mk};
    if (t == x) { /* x * (1 + erf) then * 0.5 */
        int32_t hk = sole_reader(o, mul->outputs[0]);
        const ak__ir_node *half = node_of(o, hk);
        if (!is_op(half, "Mul") || !const_near(o, other_input(half, mul->outputs[0]), 0.5))
            return AK_OK;
        chain[4] = hk, f.output = half->outputs[0];
    } else { /* (x * 0.5) * (1 + erf) */
        const ak__ir_node *half = t >= 0 && o->uses[t] == 1 ? node_of(o, o->producer[t]) : NULL;
        if (!is_op(half, "Mul") || other_input(half, x) == AK_IR_NONE ||
            !const_near(o, other_input(half, x), 0.5))
            return AK_OK;
        chain[4] = o->producer[t], f.output = mul->outputs[0];
    }
    *hit = 1;
    return emit(o, &f, chain, 5);
}

/* From the Pow: mean = ReduceMean(x); d = x - mean; var = ReduceMean(d^2);
 * y = d / sqrt(var + eps) * gamma + beta, over the last axis. */
static ak_status fuse_layernorm(optimizer *o, int32_t k, int *hit) {
    const ak__ir_node *pw = node_of(o, k);
    int32_t d = in(pw, 0);
    if (d < 0 || !const_near(o, in(pw, 1), 2.0) || o->uses[d] != 2) return AK_OK;
    int32_t c[9] = {-1, o->producer[d], k};
    const ak__ir_node *sub = node_of(o, c[1]);
    if (!is_op(sub, "Sub")) return AK_OK;
    int32_t x = in(sub, 0), mean = in(sub, 1);
    c[0] = mean >= 0 && o->uses[mean] == 1 ? o->producer[mean] : -1;
    const ak__ir_node *m1 = node_of(o, c[0]);
    if (!last_axis_mean(m1) || in(m1, 0) != x) return AK_OK;
    const ak__ir_node *m2 = node_of(o, c[3] = sole_reader(o, pw->outputs[0]));
    if (!last_axis_mean(m2)) return AK_OK;
    const ak__ir_node *add = node_of(o, c[4] = sole_reader(o, m2->outputs[0]));
    double eps;
    if (!is_op(add, "Add") || !const_scalar(o, other_input(add, m2->outputs[0]), &eps)) return AK_OK;
    const ak__ir_node *sq = node_of(o, c[5] = sole_reader(o, add->outputs[0]));
    if (!is_op(sq, "Sqrt")) return AK_OK;
    const ak__ir_node *div = node_of(o, c[6] = sole_reader(o, sq->outputs[0]));
    if (!is_op(div, "Div") || in(div, 0) != d || in(div, 1) != sq->outputs[0]) return AK_OK;
    const ak__ir_node *mul = node_of(o, c[7] = sole_reader(o, div->outputs[0]));
    int32_t gamma = mul ? other_input(mul, div->outputs[0]) : AK_IR_NONE;
    const ak__tensor *g = constant(o, gamma);
    if (!is_op(mul, "Mul") || !g || g->rank != 1 || g->type != AK_ELEM_F32) return AK_OK;
    const ak__ir_node *badd = node_of(o, c[8] = sole_reader(o, mul->outputs[0]));
    int32_t beta = badd ? other_input(badd, mul->outputs[0]) : AK_IR_NONE;
    const ak__tensor *b = constant(o, beta);
    if (!is_op(badd, "Add") || !b || b->rank != 1 || b->count != g->count) return AK_OK;
    fused_spec f = {"", "LayerNormalization", 17, {x, gamma, beta}, 3, badd->outputs[0], NULL,
                    {{0}}, 0, {0}};
    add_float_attr(&f, "epsilon", (float)eps);
    *hit = 1;
    return emit(o, &f, c, 9);
}

/* ---- the passes ----------------------------------------------------------------------- */

/* ---- the blocked layout ---------------------------------------------------------------- */

static int is_fused_conv(const ak__ir_node *n) {
    return strcmp(n->domain, "com.microsoft") == 0 && strcmp(n->op_type, "FusedConv") == 0;
}

static int attr_all(const ak__ir_node *n, const char *name, int64_t want) {
    const int64_t *v;
    size_t count = ak__attr_ints(n, name, &v);
    for (size_t i = 0; i < count; i++)
        if (v[i] != want) return 0;
    return 1;
}

/* What the blocked layout can run (a Conv/FusedConv with a constant float32 W and output
 * channels in multiples of 8): NCHWC_POINTWISE for 1×1 with stride 1, no pads and input
 * channels multiples of 8, NCHWC_DENSE for any other window of one group over input
 * channels in multiples of 8 (3×3 with or without strides, strided 1×1), NCHWC_DEPTHWISE,
 * NCHWC_STEM (fewer than 8 input channels, read plain); NCHWC_MAXPOOL for a 2-D MaxPool
 * without Indices (reads blocked). */
enum { NCHWC_NONE, NCHWC_POINTWISE, NCHWC_DEPTHWISE, NCHWC_STEM, NCHWC_MAXPOOL, NCHWC_DENSE };
static int nchwc_kind(const optimizer *o, const ak__exec_node *e) {
    const ak__ir_node *n = e->node;
    if (!live(e)) return NCHWC_NONE;
    if (is_op(n, "MaxPool")) {
        const int64_t *k;
        int indices = n->num_outputs > 1 && n->outputs[1] != AK_IR_NONE;
        return !indices && ak__attr_ints(n, "kernel_shape", &k) == 2 ? NCHWC_MAXPOOL : NCHWC_NONE;
    }
    if (!(is_op(n, "Conv") || is_fused_conv(n))) return NCHWC_NONE;
    const ak__tensor *w = constant(o, in(n, 1));
    if (!w || w->type != AK_ELEM_F32 || w->rank != 4 || w->dims[0] % 8 != 0) return NCHWC_NONE;
    int64_t group = ak__attr_int(n, "group", 1), taps = w->dims[2] * w->dims[3];
    if (group == w->dims[0] && w->dims[1] == 1) return taps <= 49 ? NCHWC_DEPTHWISE : NCHWC_NONE;
    if (group == 1 && w->dims[1] < 8) return taps <= 49 ? NCHWC_STEM : NCHWC_NONE;
    if (group != 1 || w->dims[1] % 8 != 0 || taps > 49) return NCHWC_NONE;
    const char *pad = ak__attr_string(n, "auto_pad", "NOTSET");
    if (taps == 1 && attr_all(n, "strides", 1) && attr_all(n, "pads", 0) &&
        (strcmp(pad, "NOTSET") == 0 || strcmp(pad, "VALID") == 0))
        return NCHWC_POINTWISE;
    return NCHWC_DENSE;
}

/* A candidate runs blocked when its X or Y is blocked, and X when it is 1×1 or a pool
 * (reordering its input would cost it as much as it gains); a plain Z it reorders. */
static int nchwc_pays(const ak__ir_node *n, const uint8_t *blocked, int kind) {
    int xb = blocked[n->inputs[0]], yb = blocked[n->outputs[0]];
    return (xb || yb) && (xb || (kind != NCHWC_POINTWISE && kind != NCHWC_MAXPOOL));
}

/* Which values go blocked: those a candidate writes and only candidates read, as X or Z,
 * then, until nothing moves, a candidate that would not pay unblocks every value it
 * touches. */
static void nchwc_choose(optimizer *o, uint8_t *kind, uint8_t *blocked) {
    ak_session *s = o->s;
    for (size_t k = 0; k < s->num_nodes; k++)
        if ((kind[k] = (uint8_t)nchwc_kind(o, &s->nodes[k])))
            blocked[s->nodes[k].node->outputs[0]] = o->uses[s->nodes[k].node->outputs[0]] < (1 << 20);
    for (size_t k = 0; k < s->num_nodes; k++) {
        const ak__ir_node *n = s->nodes[k].node;
        if (!live(&s->nodes[k])) continue;
        for (uint32_t i = 0; i < n->num_inputs; i++)
            if (n->inputs[i] != AK_IR_NONE && !(kind[k] && (i == 0 || i == 3)))
                blocked[n->inputs[i]] = 0;
    }
    for (int moved = 1; moved;) {
        moved = 0;
        for (size_t k = 0; k < s->num_nodes; k++) {
            const ak__ir_node *n = s->nodes[k].node;
            if (!kind[k] || nchwc_pays(n, blocked, kind[k])) continue;
            kind[k] = 0;
            int32_t vs[3] = {n->inputs[0], n->outputs[0], in(n, 3)};
            for (int i = 0; i < 3; i++)
                if (vs[i] != AK_IR_NONE && blocked[vs[i]]) blocked[vs[i]] = 0, moved = 1;
        }
    }
}

/* Conv/FusedConv chains (MobileNet's 1×1 and depthwise layers, ResNet's whole trunk from
 * the stem and its MaxPool on) => NchwcConv (NchwcMaxPool) on blocked values. */
static ak_status layout_nchwc(optimizer *o) {
    ak_session *s = o->s;
    if (!ak__param_int(AK_PARAM_CONV_NCHWC)) return AK_OK;
    uint8_t *kind = calloc(s->num_nodes ? s->num_nodes : 1, 1);
    uint8_t *blocked = calloc(s->g->num_values ? s->g->num_values : 1, 1);
    ak_status st = kind && blocked ? AK_OK : AK_FAIL(AK_ERR_NO_MEMORY, "optimizer: out of memory");
    if (st == AK_OK) nchwc_choose(o, kind, blocked);
    for (size_t k = 0; st == AK_OK && k < s->num_nodes; k++) {
        if (!kind[k]) continue;
        const ak__ir_node *n = s->nodes[k].node;
        int pool = kind[k] == NCHWC_MAXPOOL; /* X only, MaxPool's attributes */
        fused_spec f = {"com.accelkit", pool ? "NchwcMaxPool" : "NchwcConv", 1,
                        {in(n, 0), in(n, 1), in(n, 2), in(n, 3)}, pool ? 1 : n->num_inputs,
                        n->outputs[0], n, {{0}}, 0, {0}};
        add_int_attr(&f, "y_blocked", blocked[n->outputs[0]]);
        if (!pool) {
            add_int_attr(&f, "x_blocked", blocked[n->inputs[0]]);
            add_int_attr(&f, "z_blocked", in(n, 3) != AK_IR_NONE && blocked[in(n, 3)]);
        }
        int32_t chain[1] = {(int32_t)k};
        st = emit(o, &f, chain, 1);
    }
    free(kind);
    free(blocked);
    return st;
}

/* ---- QDQ: DequantizeLinear -> Conv/MatMul -> QuantizeLinear into one INT8 node ----------
 * The exporters' QDQ form (ONNX Runtime's quantizer) keeps every operator in float between
 * DequantizeLinear and QuantizeLinear; run as written, each layer would dequantize, run in
 * float and quantize again. Where the pattern holds exactly — activations quantized per
 * tensor, constant 8-bit weights (per tensor, or per output channel along axis 0), an int32
 * bias whose scale is exactly x_scale·w_scale — the chain becomes QLinearConv or
 * QLinearMatMul on the quantized values (integer sums, one rounding), which is what the
 * QDQ form specifies up to the float rounding of the unfused path. The weights' DQ nodes
 * were folded into float constants; their int8 inputs are read back from them. */

/* The node (live or folded) that produced v, or NULL. */
static const ak__ir_node *any_producer(const optimizer *o, int32_t v) {
    if (v == AK_IR_NONE) return NULL;
    for (size_t k = 0; k < o->s->num_nodes; k++) {
        const ak__exec_node *e = &o->s->nodes[k];
        if (e->removed) continue;
        for (uint32_t i = 0; i < e->node->num_outputs; i++)
            if (e->node->outputs[i] == v) return e->node;
    }
    return NULL;
}

static int is_8bit(const ak__tensor *t) {
    return t && (t->type == AK_ELEM_U8 || t->type == AK_ELEM_I8);
}

/* A per-tensor (scale, zero point) pair of constants: float32 scalar, 8-bit scalar or none. */
static int per_tensor_params(const optimizer *o, const ak__ir_node *n) {
    const ak__tensor *s = constant(o, in(n, 1)), *z = constant(o, in(n, 2));
    if (!s || s->type != AK_ELEM_F32 || s->count != 1) return 0;
    if (in(n, 2) == AK_IR_NONE) return 1;
    return is_8bit(z) && z->count == 1;
}

/* DequantizeLinear of a constant 8-bit tensor with constant scale and zero point, per tensor
 * or per slice of axis 0 (M slices): the weights' form. */
static int const_weight_dq(const optimizer *o, const ak__ir_node *dq, int64_t M) {
    if (!is_op(dq, "DequantizeLinear") || (dq->opset >= 21 && ak__attr_int(dq, "block_size", 0)))
        return 0;
    const ak__tensor *w = constant(o, in(dq, 0)), *s = constant(o, in(dq, 1));
    const ak__tensor *z = constant(o, in(dq, 2));
    if (!is_8bit(w) || !s || s->type != AK_ELEM_F32 || (in(dq, 2) != AK_IR_NONE && !is_8bit(z)))
        return 0;
    if (s->count == 1 && (!z || z->count == 1)) return 1;
    int64_t axis = ak__attr_int(dq, "axis", 1);
    return s->rank == 1 && s->count == (uint64_t)M && (axis == 0 || axis == -w->rank) &&
           (!z || z->count == s->count);
}

/* The bias of a QLinearConv: DequantizeLinear of a constant int32 vector, no zero point (or
 * zeros), its scale exactly x_scale·w_scale per output channel (float32 products). */
static int const_bias_dq(const optimizer *o, const ak__ir_node *dq, const ak__tensor *xs,
                         const ak__tensor *ws, int64_t M) {
    if (!is_op(dq, "DequantizeLinear")) return 0;
    const ak__tensor *b = constant(o, in(dq, 0)), *s = constant(o, in(dq, 1));
    const ak__tensor *z = constant(o, in(dq, 2));
    if (!b || b->type != AK_ELEM_I32 || b->rank != 1 || b->count != (uint64_t)M || !s ||
        s->type != AK_ELEM_F32 || (s->count != 1 && s->count != (uint64_t)M))
        return 0;
    if (in(dq, 2) != AK_IR_NONE) {
        if (!z || z->type != AK_ELEM_I32) return 0;
        for (uint64_t i = 0; i < z->count; i++)
            if (((const int32_t *)z->data)[i] != 0) return 0;
    }
    float x = *(const float *)xs->data;
    for (int64_t c = 0; c < M; c++) {
        float want = x * ((const float *)ws->data)[ws->count == 1 ? 0 : c];
        if (((const float *)s->data)[s->count == 1 ? 0 : c] != want) return 0;
    }
    return 1;
}

/* The QuantizeLinear ending the chain at `v` (through one Relu when relu is not NULL), with
 * per-tensor constants; its exec index, or -1. */
static int32_t quantize_after(const optimizer *o, int32_t v, int32_t *relu) {
    int32_t r = sole_reader(o, v);
    const ak__ir_node *n = node_of(o, r);
    if (relu && is_op(n, "Relu")) {
        *relu = r;
        n = node_of(o, r = sole_reader(o, n->outputs[0]));
    }
    if (!is_op(n, "QuantizeLinear") || !per_tensor_params(o, n) || in(n, 2) == AK_IR_NONE)
        return -1;
    return r;
}

/* The exec index of v's producer; AK_IR_NONE for an omitted input (a fuzzed MatMul or Conv
 * may name "" as its input) or a value no node computes. */
static int32_t producer_index(const optimizer *o, int32_t v) {
    return v == AK_IR_NONE ? AK_IR_NONE : o->producer[v];
}

static ak_status fuse_qdq_conv(optimizer *o, int32_t k, int *hit) {
    const ak__ir_node *conv = node_of(o, k);
    int32_t kx = producer_index(o, in(conv, 0));
    const ak__ir_node *dqx = node_of(o, kx);
    /* its zero point's type is x's (x is known only at run time; int32 x has none) */
    if (!is_op(dqx, "DequantizeLinear") || !per_tensor_params(o, dqx) || in(dqx, 2) == AK_IR_NONE)
        return AK_OK;
    const ak__ir_node *dqw = any_producer(o, in(conv, 1));
    const ak__tensor *w = dqw ? constant(o, in(dqw, 0)) : NULL;
    if (!w || w->rank < 3 || !const_weight_dq(o, dqw, w->dims[0])) return AK_OK;
    const ak__ir_node *dqb = NULL;
    if (in(conv, 2) != AK_IR_NONE) {
        dqb = any_producer(o, in(conv, 2));
        if (!const_bias_dq(o, dqb, constant(o, in(dqx, 1)), constant(o, in(dqw, 1)), w->dims[0]))
            return AK_OK;
    }
    int32_t relu = -1, kq = quantize_after(o, conv->outputs[0], &relu);
    if (kq < 0) return AK_OK;
    const ak__ir_node *q = node_of(o, kq);
    fused_spec f = {"com.accelkit", "QLinearConv", 1,
                    {in(dqx, 0), in(dqx, 1), in(dqx, 2), in(dqw, 0), in(dqw, 1), in(dqw, 2),
                     in(q, 1), in(q, 2), dqb ? in(dqb, 0) : AK_IR_NONE},
                    9, q->outputs[0], conv, {{0}}, 0, {0}};
    if (relu >= 0) add_int_attr(&f, "relu", 1);
    int32_t chain[4] = {k, kq}, n = 2;
    if (relu >= 0) chain[n++] = relu;
    if (o->uses[in(conv, 0)] == 1) chain[n++] = kx; /* the activation's DQ has no other use */
    *hit = 1;
    return emit(o, &f, chain, (size_t)n);
}

static ak_status fuse_qdq_matmul(optimizer *o, int32_t k, int *hit) {
    const ak__ir_node *mm = node_of(o, k);
    int32_t ka = producer_index(o, in(mm, 0));
    const ak__ir_node *dqa = node_of(o, ka);
    if (!is_op(dqa, "DequantizeLinear") || !per_tensor_params(o, dqa) || in(dqa, 2) == AK_IR_NONE)
        return AK_OK;
    const ak__ir_node *dqb = any_producer(o, in(mm, 1));
    const ak__tensor *b = dqb ? constant(o, in(dqb, 0)) : NULL;
    /* per column of B is axis 1 of a 2-D B; per tensor only, to keep to QLinearMatMul's */
    if (!b || b->rank != 2 || !const_weight_dq(o, dqb, -1)) return AK_OK;
    int32_t kq = quantize_after(o, mm->outputs[0], NULL);
    if (kq < 0) return AK_OK;
    const ak__ir_node *q = node_of(o, kq);
    fused_spec f = {"com.accelkit", "QLinearMatMul", 1,
                    {in(dqa, 0), in(dqa, 1), in(dqa, 2), in(dqb, 0), in(dqb, 1), in(dqb, 2),
                     in(q, 1), in(q, 2)},
                    8, q->outputs[0], NULL, {{0}}, 0, {0}};
    int32_t chain[3] = {k, kq}, n = 2;
    if (o->uses[in(mm, 0)] == 1) chain[n++] = ka;
    *hit = 1;
    return emit(o, &f, chain, (size_t)n);
}

typedef ak_status (*pattern_fn)(optimizer *o, int32_t k, int *hit);

static ak_status run_pass(optimizer *o, const char *root_op, pattern_fn fn) {
    for (size_t k = 0; k < o->s->num_nodes; k++) {
        ak__exec_node *e = &o->s->nodes[k];
        if (!live(e) || !is_op(e->node, root_op)) continue;
        int hit = 0;
        AK_CHECK(fn(o, (int32_t)k, &hit));
    }
    return AK_OK;
}

/* ---- basic passes: rewrites that keep to standard ONNX operators -------------------------
 * Identity nodes, Transpose pairs that undo each other and Reshape chains are bypassed;
 * duplicated nodes (same operator, attributes and inputs) are computed once;
 * BatchNormalization, and a per-channel Mul/Div/Add/Sub by a constant, are folded into
 * the Conv before them; nodes whose outputs nobody reads are removed. Folded weights need
 * value slots, and a session cannot add values: they take the slots of the constants
 * the folded node read and nobody else does (their names stay; their data and shape
 * change). */

/* A constant no caller can override (not an initializer that is also a graph input). */
static const ak__tensor *fixed_constant(const optimizer *o, int32_t v) {
    const ak__tensor *t = constant(o, v);
    return t && !(o->s->g->values[v].flags & AK_IR_VALUE_INPUT) ? t : NULL;
}

/* A constant slot only the node being folded reads. */
static int free_slot(const optimizer *o, int32_t v) {
    return v != AK_IR_NONE && o->uses[v] == 1 && fixed_constant(o, v);
}

/* Float32 data for a value slot (aligned: freed with the session's folded data). */
static float *slot_floats(uint64_t n) {
    void *p = NULL;
    return ak_alloc((size_t)(n ? n : 1) * sizeof(float), &p) == AK_OK ? p : NULL;
}

/* Gives value slot v new float32 data of the given shape (the data is taken). */
static ak_status set_constant(optimizer *o, int32_t v, int rank, const int64_t *dims, float *data) {
    ak_session *s = o->s;
    ak__tensor *t = &s->values[v];
    AK_CHECK(ak__tensor_set_shape(t, AK_ELEM_F32, rank, dims, s->g->values[v].name));
    if (s->folded_data[v]) ak_free(s->folded_data[v]);
    s->folded_data[v] = data;
    s->folded_bytes += ak__tensor_nbytes(t);
    t->data = data;
    s->source[v] = AK_SRC_FOLDED;
    return AK_OK;
}

/* Makes every live reader of value `from` read `to` instead (a copy of the reader's node
 * with the input changed: the original belongs to the model). */
static ak_status redirect(optimizer *o, int32_t from, int32_t to) {
    ak_session *s = o->s;
    for (size_t k = 0; k < s->num_nodes; k++) {
        ak__exec_node *e = &s->nodes[k];
        if (!live(e)) continue;
        const ak__ir_node *n = e->node;
        int reads = 0;
        for (uint32_t i = 0; i < n->num_inputs; i++) reads |= n->inputs[i] == from;
        if (!reads) continue;
        ak__ir_node *copy;
        int32_t *inputs;
        AK_CHECK(arena_array(o, 1, sizeof *copy, (void **)&copy));
        AK_CHECK(arena_array(o, n->num_inputs, sizeof *inputs, (void **)&inputs));
        *copy = *n;
        for (uint32_t i = 0; i < n->num_inputs; i++) {
            inputs[i] = n->inputs[i] == from ? to : n->inputs[i];
            if (n->inputs[i] == from) e->inputs[i] = &s->values[to];
        }
        copy->inputs = inputs;
        e->node = copy;
    }
    count_uses(o);
    return AK_OK;
}

/* Node k computes what its input `src` already holds: readers read src, k goes. */
static ak_status bypass(optimizer *o, int32_t k, int32_t src, const char *what) {
    int32_t out = node_of(o, k)->outputs[0];
    if (src == AK_IR_NONE || o->uses[out] >= (1 << 20)) return AK_OK; /* an output keeps its name */
    AK_CHECK(redirect(o, out, src));
    drop(o->s, &o->s->nodes[k]);
    note(o, what);
    count_uses(o);
    return AK_OK;
}

static ak_status skip_identity(optimizer *o, int32_t k, int *hit) {
    *hit = 1;
    return bypass(o, k, in(node_of(o, k), 0), "Identity removed");
}

/* The permutation of a Transpose (perm, or the reversal when absent and the rank known). */
static size_t transpose_perm(const optimizer *o, const ak__ir_node *n, int64_t *perm) {
    const int64_t *p;
    size_t r = ak__attr_ints(n, "perm", &p);
    if (r > AK_IR_MAX_RANK) return 0;
    if (r) {
        memcpy(perm, p, r * sizeof *p);
        return r;
    }
    int rank = o->s->g->values[in(n, 0)].rank;
    for (int i = 0; i < rank; i++) perm[i] = rank - 1 - i;
    return rank > 0 ? (size_t)rank : 0;
}

/* Transpose(Transpose(x, p1), p2) with p1[p2[i]] == i is x. */
static ak_status cancel_transposes(optimizer *o, int32_t k, int *hit) {
    const ak__ir_node *t2 = node_of(o, k);
    int32_t mid = in(t2, 0);
    const ak__ir_node *t1 = mid == AK_IR_NONE ? NULL : node_of(o, o->producer[mid]);
    if (!is_op(t1, "Transpose")) return AK_OK;
    int64_t p1[AK_IR_MAX_RANK], p2[AK_IR_MAX_RANK];
    size_t r1 = transpose_perm(o, t1, p1), r2 = transpose_perm(o, t2, p2);
    if (!r1 || r1 != r2) return AK_OK;
    for (size_t i = 0; i < r2; i++)
        if (p2[i] < 0 || (size_t)p2[i] >= r1 || p1[p2[i]] != (int64_t)i) return AK_OK;
    *hit = 1;
    return bypass(o, k, in(t1, 0), "Transpose pair cancelled");
}

/* Reshape(Reshape(x, s1), s2) is Reshape(x, s2) when s2 is constant and copies no
 * dimension from its input (no 0 without allowzero). */
static ak_status skip_inner_reshape(optimizer *o, int32_t k, int *hit) {
    ak__exec_node *e = &o->s->nodes[k];
    const ak__ir_node *r2 = e->node;
    int32_t mid = in(r2, 0);
    const ak__ir_node *r1 = mid == AK_IR_NONE ? NULL : node_of(o, o->producer[mid]);
    const ak__tensor *shape = constant(o, in(r2, 1));
    if (!(is_op(r1, "Reshape") || is_op(r1, "Flatten")) || !shape || shape->type != AK_ELEM_I64)
        return AK_OK;
    if (!(r2->opset >= 14 && ak__attr_int(r2, "allowzero", 0)))
        for (uint64_t i = 0; i < shape->count; i++)
            if (((const int64_t *)shape->data)[i] == 0) return AK_OK;
    ak__ir_node *copy;
    int32_t *inputs;
    AK_CHECK(arena_array(o, 1, sizeof *copy, (void **)&copy));
    AK_CHECK(arena_array(o, r2->num_inputs, sizeof *inputs, (void **)&inputs));
    *copy = *r2;
    memcpy(inputs, r2->inputs, r2->num_inputs * sizeof *inputs);
    inputs[0] = in(r1, 0);
    copy->inputs = inputs;
    e->node = copy;
    e->inputs[0] = &o->s->values[inputs[0]];
    *hit = 1;
    note(o, "Reshape chain shortened");
    count_uses(o);
    return AK_OK;
}

static int same_attrs(const ak__ir_node *a, const ak__ir_node *b) {
    if (a->num_attrs != b->num_attrs) return 0;
    for (uint32_t i = 0; i < a->num_attrs; i++) {
        const ak__ir_attr *x = &a->attrs[i], *y = ak__ir_node_attr(b, x->name);
        if (!y || x->type != y->type || x->count != y->count) return 0;
        switch (x->type) {
        case AK_ATTR_FLOAT: if (memcmp(&x->u.f, &y->u.f, sizeof x->u.f)) return 0; break;
        case AK_ATTR_INT: if (x->u.i != y->u.i) return 0; break;
        case AK_ATTR_STRING:
            if (x->u.s.len != y->u.s.len || memcmp(x->u.s.data, y->u.s.data, x->u.s.len)) return 0;
            break;
        case AK_ATTR_FLOATS: if (memcmp(x->u.floats, y->u.floats, x->count * sizeof(float))) return 0; break;
        case AK_ATTR_INTS: if (memcmp(x->u.ints, y->u.ints, x->count * sizeof(int64_t))) return 0; break;
        default: return 0; /* tensors, graphs, lists of strings: not compared, never merged */
        }
    }
    return 1;
}

/* Nodes computing the same function of the same values. */
static int same_computation(const ak__exec_node *a, const ak__exec_node *b) {
    const ak__ir_node *x = a->node, *y = b->node;
    if (x->num_inputs != y->num_inputs || x->num_outputs != y->num_outputs ||
        x->num_captures || a->def != b->def || (a->def->flags & AK_OP_NONDETERMINISTIC))
        return 0;
    for (uint32_t i = 0; i < x->num_inputs; i++)
        if (x->inputs[i] != y->inputs[i]) return 0;
    for (uint32_t i = 0; i < x->num_outputs; i++)
        if ((x->outputs[i] == AK_IR_NONE) != (y->outputs[i] == AK_IR_NONE)) return 0;
    return strcmp(x->op_type, y->op_type) == 0 && strcmp(x->domain, y->domain) == 0 &&
           x->opset == y->opset && same_attrs(x, y);
}

/* A later node computing what an earlier one does: its readers read the earlier one's
 * outputs (when none of its outputs is a graph output or read by a subgraph). */
static ak_status merge_duplicates(optimizer *o) {
    ak_session *s = o->s;
    for (size_t k = 0; k < s->num_nodes; k++) {
        const ak__exec_node *later = &s->nodes[k];
        if (!live(later)) continue;
        int pinned = 0;
        for (uint32_t i = 0; i < later->node->num_outputs; i++)
            if (later->node->outputs[i] != AK_IR_NONE && o->uses[later->node->outputs[i]] >= (1 << 20))
                pinned = 1;
        for (size_t j = 0; !pinned && j < k; j++) {
            const ak__exec_node *earlier = &s->nodes[j];
            if (!live(earlier) || !same_computation(earlier, later)) continue;
            for (uint32_t i = 0; i < later->node->num_outputs; i++)
                if (later->node->outputs[i] != AK_IR_NONE)
                    AK_CHECK(redirect(o, later->node->outputs[i], earlier->node->outputs[i]));
            drop(s, &s->nodes[k]);
            note(o, "duplicate node merged");
            count_uses(o);
            break;
        }
    }
    return AK_OK;
}

/* Live nodes none of whose outputs is read (nor a graph output), last to first. */
static void remove_dead(optimizer *o) {
    ak_session *s = o->s;
    for (size_t k = s->num_nodes; k-- > 0;) {
        ak__exec_node *e = &s->nodes[k];
        if (!live(e)) continue;
        int read = 0;
        for (uint32_t i = 0; i < e->node->num_outputs; i++)
            if (e->node->outputs[i] != AK_IR_NONE && o->uses[e->node->outputs[i]]) read = 1;
        if (read) continue;
        for (uint32_t i = 0; i < e->node->num_inputs; i++)
            if (e->node->inputs[i] != AK_IR_NONE) o->uses[e->node->inputs[i]]--;
        for (uint32_t i = 0; i < e->node->num_captures; i++) o->uses[e->node->captures[i]] -= 1 << 20;
        drop(s, e);
        note(o, "dead node removed");
    }
    count_uses(o);
}

/* ---- folding into Conv ---------------------------------------------------------------- */

/* Conv's float32 constant weights [M, C/group, k...] and optional bias [M]. */
static int conv_weights(const optimizer *o, const ak__ir_node *conv, const ak__tensor **w,
                        const ak__tensor **b) {
    *w = fixed_constant(o, in(conv, 1));
    *b = in(conv, 2) == AK_IR_NONE ? NULL : fixed_constant(o, in(conv, 2));
    if (!*w || (*w)->type != AK_ELEM_F32 || (*w)->rank < 3) return 0;
    if (in(conv, 2) == AK_IR_NONE) return 1;
    return *b && (*b)->type == AK_ELEM_F32 && (*b)->count == (uint64_t)(*w)->dims[0];
}

/* y = x·scale[m] + shift[m] per output channel folded into Conv's W and bias: W' goes to
 * slot wslot (AK_IR_NONE: W unchanged), bias' to slot bslot (AK_IR_NONE: no bias, for a
 * Conv without one and a shift of zeros). */
static ak_status fold_affine(optimizer *o, int32_t kconv, int32_t kop, const float *scale,
                             const float *shift, int32_t wslot, int32_t bslot, const char *what) {
    const ak__ir_node *conv = node_of(o, kconv), *op = node_of(o, kop);
    const ak__tensor *w, *b;
    conv_weights(o, conv, &w, &b);
    int64_t m_count = w->dims[0], wdims[AK_IR_MAX_RANK];
    uint64_t per = w->count / (uint64_t)m_count;
    memcpy(wdims, w->dims, (size_t)w->rank * sizeof *wdims);
    int wrank = w->rank;
    float *nb = bslot != AK_IR_NONE ? slot_floats((uint64_t)m_count) : NULL;
    float *nw = wslot != AK_IR_NONE ? slot_floats(w->count) : NULL;
    if ((bslot != AK_IR_NONE && !nb) || (wslot != AK_IR_NONE && !nw)) {
        ak_free(nb);
        ak_free(nw);
        return AK_FAIL(AK_ERR_NO_MEMORY, "optimizer: out of memory");
    }
    for (int64_t m = 0; nb && m < m_count; m++)
        nb[m] = (b ? ((const float *)b->data)[m] : 0.0f) * scale[m] + shift[m];
    for (uint64_t i = 0; nw && i < w->count; i++) nw[i] = ((const float *)w->data)[i] * scale[i / per];
    ak_status st = nb ? set_constant(o, bslot, 1, &m_count, nb) : AK_OK;
    if (st != AK_OK) ak_free(nb);
    if (st == AK_OK && nw) st = set_constant(o, wslot, wrank, wdims, nw);
    if (st != AK_OK) ak_free(nw); /* not taken */
    AK_CHECK(st);
    fused_spec f = {"", "Conv", conv->opset,
                    {in(conv, 0), wslot != AK_IR_NONE ? wslot : in(conv, 1), bslot},
                    bslot != AK_IR_NONE ? 3 : 2, op->outputs[0], conv, {{0}}, 0, {0}};
    int32_t chain[2] = {kconv, kop};
    return emit_as(o, &f, chain, 2, what);
}

/* The Conv producing v for a folding: v has no other reader, W is a float constant. */
static int32_t conv_before(const optimizer *o, int32_t v) {
    if (v == AK_IR_NONE || o->uses[v] != 1 || o->producer[v] < 0) return -1;
    const ak__ir_node *conv = node_of(o, o->producer[v]);
    const ak__tensor *w, *b;
    return is_op(conv, "Conv") && conv_weights(o, conv, &w, &b) ? o->producer[v] : -1;
}

static int f32_vector(const ak__tensor *t, int64_t m) {
    return t && t->type == AK_ELEM_F32 && t->rank == 1 && t->dims[0] == m;
}

/* BatchNormalization (inference form) after Conv: scale' = s/sqrt(var+eps), shift' =
 * bias - mean·scale'; the results take two of its constants' slots. */
static ak_status fold_batchnorm(optimizer *o, int32_t k, int *hit) {
    const ak__ir_node *bn = node_of(o, k);
    int32_t kconv = conv_before(o, in(bn, 0));
    /* opsets before 9 also had per-activation statistics (spatial = 0) */
    if (kconv < 0 || bn->num_inputs != 5 || ak__attr_int(bn, "training_mode", 0) ||
        !ak__attr_int(bn, "spatial", 1))
        return AK_OK;
    for (uint32_t i = 1; i < bn->num_outputs; i++)
        if (bn->outputs[i] != AK_IR_NONE) return AK_OK;
    const ak__ir_node *conv = node_of(o, kconv);
    int64_t m = fixed_constant(o, in(conv, 1))->dims[0];
    const ak__tensor *p[4];
    int32_t slots[2] = {AK_IR_NONE, AK_IR_NONE};
    for (int i = 0, n = 0; i < 4; i++) {
        p[i] = fixed_constant(o, in(bn, (uint32_t)i + 1));
        if (!f32_vector(p[i], m)) return AK_OK;
        int distinct = 1;
        for (int j = 0; j < i; j++) distinct &= in(bn, (uint32_t)j + 1) != in(bn, (uint32_t)i + 1);
        if (n < 2 && distinct && free_slot(o, in(bn, (uint32_t)i + 1))) slots[n++] = in(bn, (uint32_t)i + 1);
    }
    if (slots[1] == AK_IR_NONE) return AK_OK;
    float eps = ak__attr_float(bn, "epsilon", 1e-5f);
    float *scale = malloc(2 * (size_t)m * sizeof *scale);
    if (!scale) return AK_FAIL(AK_ERR_NO_MEMORY, "optimizer: out of memory");
    float *shift = scale + m;
    for (int64_t c = 0; c < m; c++) {
        const float *g = p[0]->data, *beta = p[1]->data, *mean = p[2]->data, *var = p[3]->data;
        scale[c] = g[c] / sqrtf(var[c] + eps);
        shift[c] = beta[c] - mean[c] * scale[c];
    }
    *hit = 1;
    ak_status st = fold_affine(o, kconv, k, scale, shift, slots[0], slots[1],
                               "BatchNormalization folded into Conv");
    free(scale);
    return st;
}

/* The per-channel values of a float32 constant broadcast against Conv's output (rank r,
 * channels m on axis 1): a scalar, or m values on axis 1 and ones elsewhere. */
static int per_channel(const ak__tensor *c, int r, int64_t m, float *out) {
    if (!c || c->type != AK_ELEM_F32 || c->rank > r) return 0;
    if (c->count == 1) {
        for (int64_t i = 0; i < m; i++) out[i] = *(const float *)c->data;
        return 1;
    }
    if (c->rank < r - 1 || c->count != (uint64_t)m) return 0;
    for (int d = 0; d < c->rank; d++) { /* axis d of c is axis d + r - rank of the output */
        int axis = d + r - c->rank;
        if (c->dims[d] != (axis == 1 ? m : 1)) return 0;
    }
    memcpy(out, c->data, (size_t)m * sizeof *out);
    return 1;
}

/* Conv followed by Mul, Div, Add or Sub with a per-channel constant (x op c; c op x too
 * for Mul and Add). */
static ak_status fold_conv_arith(optimizer *o, int32_t k, int *hit) {
    const ak__ir_node *conv = node_of(o, k);
    const ak__tensor *w, *b;
    if (!conv_weights(o, conv, &w, &b)) return AK_OK;
    int32_t y = conv->outputs[0], kop = sole_reader(o, y);
    const ak__ir_node *op = node_of(o, kop);
    int mul = is_op(op, "Mul"), div = is_op(op, "Div"), add = is_op(op, "Add"), sub = is_op(op, "Sub");
    if (!(mul || div || add || sub) || o->uses[y] != 1) return AK_OK;
    int32_t cv = other_input(op, y);
    if (cv == AK_IR_NONE || ((div || sub) && in(op, 0) != y) || !free_slot(o, cv)) return AK_OK;
    int64_t m = w->dims[0];
    float *vals = malloc(2 * (size_t)m * sizeof *vals);
    if (!vals) return AK_FAIL(AK_ERR_NO_MEMORY, "optimizer: out of memory");
    float *scale = vals, *shift = vals + m;
    ak_status st = AK_OK;
    if (per_channel(constant(o, cv), w->rank, m, mul || div ? scale : shift)) {
        for (int64_t c = 0; c < m; c++) {
            if (mul || div) scale[c] = div ? 1.0f / scale[c] : scale[c], shift[c] = 0.0f;
            else scale[c] = 1.0f, shift[c] = sub ? -shift[c] : shift[c];
        }
        /* Mul/Div: W' in the constant's slot and bias' in the bias's; Add/Sub: bias' in
         * the constant's */
        int32_t wslot = AK_IR_NONE, bslot = cv;
        if (mul || div) {
            wslot = cv;
            bslot = in(conv, 2);
        }
        if (bslot == AK_IR_NONE || free_slot(o, bslot)) {
            *hit = 1;
            st = fold_affine(o, k, kop, scale, shift, wslot, bslot,
                             mul || div ? "Mul/Div folded into Conv" : "Add/Sub folded into Conv");
        }
    }
    free(vals);
    return st;
}

static ak_status optimize_basic(optimizer *o) {
    static const struct { const char *root; pattern_fn fn; } passes[] = {
        {"Identity", skip_identity}, {"Transpose", cancel_transposes},
        {"Reshape", skip_inner_reshape}, {"BatchNormalization", fold_batchnorm},
        {"Conv", fold_conv_arith},
    };
    for (size_t p = 0; p < 3; p++) AK_CHECK(run_pass(o, passes[p].root, passes[p].fn));
    remove_dead(o);
    AK_CHECK(merge_duplicates(o));
    for (size_t p = 3; p < sizeof passes / sizeof *passes; p++)
        AK_CHECK(run_pass(o, passes[p].root, passes[p].fn));
    remove_dead(o);
    return AK_OK;
}

ak_status ak__optimize(ak_session *s, int level) {
    size_t nv = s->g->num_values ? s->g->num_values : 1;
    optimizer o = {s, NULL, calloc(nv, sizeof(int32_t)), calloc(nv, sizeof(int32_t)), 0};
    ak_status st = o.uses && o.producer ? ak_arena_create(0, &s->opt_arena)
                                        : AK_FAIL(AK_ERR_NO_MEMORY, "optimizer: out of memory");
    o.arena = s->opt_arena;
    if (st == AK_OK) {
        count_uses(&o);
        st = optimize_basic(&o);
    }
    if (st == AK_OK && level != AK_OPTIMIZE_BASIC) {
        /* Gelu first: MatMulBias absorbs the Gelu nodes it creates */
        static const struct { const char *root; pattern_fn fn; } passes[] = {
            {"Erf", fuse_gelu}, {"Pow", fuse_layernorm},
            /* QDQ first: the float fusions would take its Conv and MatMul nodes */
            {"Conv", fuse_qdq_conv}, {"MatMul", fuse_qdq_matmul},
            {"MatMul", fuse_matmul}, {"Conv", fuse_conv},
        };
        for (size_t p = 0; st == AK_OK && p < sizeof passes / sizeof *passes; p++)
            st = run_pass(&o, passes[p].root, passes[p].fn);
        if (st == AK_OK && level == AK_OPTIMIZE_ALL) st = layout_nchwc(&o);
    }
    s->num_fused = o.fused;
    free(o.uses);
    free(o.producer);
    return st;
}
