/* The graph optimizer's normalization fusions (extended level), matched by what the
 * subgraph computes rather than one node chain:
 *
 *   var = ReduceMean(d²) over the last axis       d² as Pow(d, 2) or Mul(d, d); axes as
 *                                                 attribute (opset < 18) or constant input
 *                                                 (18+), -1 or rank-1; keepdims
 *   r   = 1/sqrt(var + eps)                       Div(d, Sqrt(var + eps)), d * Reciprocal(
 *                                                 Sqrt(..)), d * (1 / Sqrt(..)),
 *                                                 d * Pow(.., -0.5); eps + var either order
 *   y   = d * r [* gamma] [+ beta]                gamma/beta constants of rank ≤ 1, either
 *                                                 operand order, each optional
 *
 * With d = x - ReduceMean(x) (d read only by the chain) it is LayerNormalization(x);
 * otherwise d is the input x itself and it is RMSNorm: SimplifiedLayerNormalization(x,
 * gamma) (no beta; a following Add stays), an onnxruntime contrib operator that
 * onnxruntime registers in the default domain (accelkit also takes it as com.microsoft). An absent
 * gamma becomes a one-element constant 1 in the slot of the variance the chain no longer
 * computes.
 *
 * Then SkipLayerNormalization: LayerNormalization / SimplifiedLayerNormalization over the
 * last axis of Add(a, b) [+ const bias] where a and b are computed values (the kernel
 * broadcasts them as Add does) => com.microsoft Skip[Simplified]LayerNormalization(a, b,
 * gamma, [beta], [bias]); when the sum has other readers it is the fused node's output 3 (the spec's
 * input_skip_bias_sum) and the node takes the Add's place. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "infer/runtime/optimize.h"

/* ---- small matchers ------------------------------------------------------------------- */

/* The producer of v when the chain is v's only reader, else -1. */
static int32_t sole_producer(const optimizer *o, int32_t v) {
    return v != AK_IR_NONE && o->uses[v] == 1 ? o->producer[v] : -1;
}

/* ReduceMean over one axis, keepdims: that axis (-1 as written), else 0 (never the
 * last axis the fusions want: rank 1 has nothing to normalize after a rank-0 input). */
static int64_t mean_axis(const optimizer *o, const ak__ir_node *n) {
    if (!is_op(n, "ReduceMean") || ak__attr_int(n, "keepdims", 1) != 1) return 0;
    if (n->opset < 18) {
        const int64_t *axes;
        return ak__attr_ints(n, "axes", &axes) == 1 ? axes[0] : 0;
    }
    const ak__tensor *t = constant(o, in(n, 1));
    return t && t->count == 1 && t->type == AK_ELEM_I64 ? ((const int64_t *)t->data)[0] : 0;
}

/* `axis` names the last axis: -1, or rank - 1 for the first declared rank of vs. */
static int is_last_axis(const optimizer *o, int64_t axis, const int32_t *vs, size_t n) {
    if (axis == -1) return 1;
    for (size_t i = 0; i < n; i++) {
        int rank = vs[i] == AK_IR_NONE ? -1 : o->s->g->values[vs[i]].rank;
        if (rank > 0) return axis == rank - 1;
    }
    return 0;
}

/* A constant of rank ≤ 1 (gamma, beta): broadcasts along the last axis only. */
static const ak__tensor *row_constant(const optimizer *o, int32_t v, ak_elem_type type) {
    const ak__tensor *t = constant(o, v);
    return t && t->rank <= 1 && t->type == type ? t : NULL;
}

/* The square Pow(d, 2) or Mul(d, d) at node q: d, and how often it reads d. */
static int32_t squared(const optimizer *o, const ak__ir_node *q, int *reads) {
    if (is_op(q, "Pow") && const_near(o, in(q, 1), 2.0)) return *reads = 1, in(q, 0);
    if (is_op(q, "Mul") && in(q, 0) == in(q, 1)) return *reads = 2, in(q, 0);
    return AK_IR_NONE;
}

typedef struct norm_match {
    int32_t chain[16];
    size_t n;
    int32_t x, gamma, beta, out, var;
    double eps;
    int simplified;
} norm_match;

static int32_t take(norm_match *m, int32_t k) {
    if (k >= 0) m->chain[m->n++] = k;
    return k;
}

/* From the variance's Add eps: the node computing d * 1/sqrt(var + eps); its output. */
static int32_t scaled_by_inverse_std(const optimizer *o, norm_match *m, int32_t addv, int32_t d) {
    const ak__ir_node *n = node_of(o, take(m, ak__opt_sole_reader(o, addv)));
    int32_t r;
    if (is_op(n, "Pow") && in(n, 0) == addv && const_near(o, in(n, 1), -0.5)) {
        r = n->outputs[0];
    } else if (is_op(n, "Sqrt")) {
        int32_t s = n->outputs[0];
        const ak__ir_node *u = node_of(o, take(m, ak__opt_sole_reader(o, s)));
        if (is_op(u, "Div") && in(u, 0) == d && in(u, 1) == s) return u->outputs[0];
        int one_over = is_op(u, "Div") && in(u, 1) == s && const_near(o, in(u, 0), 1.0);
        if (!is_op(u, "Reciprocal") && !one_over) return AK_IR_NONE;
        r = u->outputs[0];
    } else {
        return AK_IR_NONE;
    }
    const ak__ir_node *mul = node_of(o, take(m, ak__opt_sole_reader(o, r)));
    return is_op(mul, "Mul") && other_input(mul, r) == d ? mul->outputs[0] : AK_IR_NONE;
}

/* Gives the dying value slot v a one-element float32 constant 1 (an absent gamma). */
static ak_status make_one(optimizer *o, int32_t v) {
    ak_session *s = o->s;
    ak__tensor *t = &s->values[v];
    int64_t one = 1;
    void *p;
    AK_CHECK(ak_alloc(sizeof(float), &p));
    *(float *)p = 1.0f;
    AK_CHECK(ak__tensor_set_shape(t, AK_ELEM_F32, 1, &one, s->g->values[v].name));
    if (s->folded_data[v]) ak_free(s->folded_data[v]);
    s->folded_data[v] = p;
    s->folded_bytes += sizeof(float);
    t->data = p;
    s->source[v] = AK_SRC_FOLDED;
    return AK_OK;
}

/* ---- LayerNorm and RMSNorm -------------------------------------------------------------- */

/* d = x - ReduceMean(x), d read only by the chain (`reads` times): x, else AK_IR_NONE. */
static int32_t centered_input(const optimizer *o, norm_match *m, int32_t d, int reads,
                              int64_t axis) {
    int32_t sk = o->producer[d];
    const ak__ir_node *sub = node_of(o, sk);
    if (!is_op(sub, "Sub") || o->uses[d] != reads + 1) return AK_IR_NONE;
    int32_t x = in(sub, 0), mk = sole_producer(o, in(sub, 1));
    const ak__ir_node *mean = node_of(o, mk);
    if (!mean || mean_axis(o, mean) != axis || in(mean, 0) != x) return AK_IR_NONE;
    take(m, sk), take(m, mk);
    return x;
}

/* A Cast to `type` of a value of that type (an exporter's `.to(float32)`): the next
 * node after it, taken into the chain. */
static const ak__ir_node *past_same_cast(const optimizer *o, norm_match *m, int32_t *k,
                                         ak_elem_type type) {
    const ak__ir_node *n = node_of(o, *k);
    if (!is_op(n, "Cast") || ak__attr_int(n, "to", 0) != (int64_t)type || m->n >= 15) return n;
    take(m, *k), m->out = n->outputs[0];
    return node_of(o, *k = ak__opt_sole_reader(o, m->out));
}

/* gamma and beta after the normalized value: the fused node's output. */
static void affine(const optimizer *o, norm_match *m, ak_elem_type type) {
    int32_t k = ak__opt_sole_reader(o, m->out);
    const ak__ir_node *n = past_same_cast(o, m, &k, type);
    if (is_op(n, "Mul") && row_constant(o, other_input(n, m->out), type)) {
        m->gamma = other_input(n, m->out), m->out = n->outputs[0], take(m, k);
        n = node_of(o, k = ak__opt_sole_reader(o, m->out));
    }
    if (!m->simplified && is_op(n, "Add") && row_constant(o, other_input(n, m->out), type))
        m->beta = other_input(n, m->out), m->out = n->outputs[0], take(m, k);
}

/* Rooted at the ReduceMean of the square. */
ak_status ak__opt_fuse_norm(optimizer *o, int32_t k, int *hit) {
    norm_match m = {{k}, 1, AK_IR_NONE, AK_IR_NONE, AK_IR_NONE, AK_IR_NONE, AK_IR_NONE, 0, 0};
    const ak__ir_node *var = node_of(o, k);
    int64_t axis = mean_axis(o, var);
    if (axis == 0) return AK_OK;
    int reads = 0;
    const ak__ir_node *sq = node_of(o, take(&m, sole_producer(o, in(var, 0))));
    int32_t d = sq ? squared(o, sq, &reads) : AK_IR_NONE;
    if (d == AK_IR_NONE) return AK_OK;
    m.var = var->outputs[0];
    const ak__ir_node *add = node_of(o, take(&m, ak__opt_sole_reader(o, m.var)));
    if (!is_op(add, "Add") || !const_scalar(o, other_input(add, m.var), &m.eps)) return AK_OK;
    m.out = scaled_by_inverse_std(o, &m, add->outputs[0], d);
    if (m.out == AK_IR_NONE) return AK_OK;
    m.x = centered_input(o, &m, d, reads, axis);
    m.simplified = m.x == AK_IR_NONE;
    if (m.simplified) m.x = d;
    int32_t shaped[4] = {m.x, d, in(var, 0), m.out};
    if (!is_last_axis(o, axis, shaped, 4)) return AK_OK;
    /* the type of x: eps's, which Add makes equal to the variance's */
    ak_elem_type type = constant(o, other_input(add, m.var))->type;
    if (type != AK_ELEM_F32 && (m.simplified || !ak__elem_is_float(type))) return AK_OK;
    affine(o, &m, type);
    if (m.gamma == AK_IR_NONE) {
        if (type != AK_ELEM_F32) return AK_OK;
        AK_CHECK(make_one(o, m.var));
        m.gamma = m.var;
    }
    fused_spec f = {"", "LayerNormalization", 17, {m.x, m.gamma, m.beta}, 3, m.out, NULL,
                    {{0}}, 0, {0}};
    if (m.simplified) f.op_type = "SimplifiedLayerNormalization", f.opset = 1;
    if (m.beta == AK_IR_NONE) f.num_inputs = 2;
    ak__opt_add_float_attr(&f, "epsilon", (float)m.eps);
    *hit = 1;
    return ak__opt_emit(o, &f, m.chain, m.n);
}

/* ---- SkipLayerNormalization ------------------------------------------------------------- */

/* A computed (not constant, not omitted) value. */
static int computed(const optimizer *o, int32_t v) {
    return v != AK_IR_NONE && !constant(o, v);
}

/* v omitted, or a float32 constant of rank ≤ 1 with as many elements as gamma (not 1). */
static int row_vector_like(const optimizer *o, int32_t v, const ak__tensor *gamma) {
    if (v == AK_IR_NONE) return 1;
    const ak__tensor *t = row_constant(o, v, AK_ELEM_F32);
    return t && gamma->count > 1 && t->count == gamma->count;
}

/* Gives the fused node at exec index k the extra output `sum` as output 3. */
static ak_status add_sum_output(optimizer *o, int32_t k, int32_t sum) {
    ak__exec_node *e = &o->s->nodes[k];
    ak__ir_node *n = (ak__ir_node *)e->node; /* built by the optimizer, in its arena */
    int32_t *outs;
    const ak__tensor **io;
    AK_CHECK(ak__opt_arena_array(o, 4, sizeof *outs, (void **)&outs));
    AK_CHECK(ak__opt_arena_array(o, n->num_inputs + 4, sizeof *io, (void **)&io));
    outs[0] = n->outputs[0], outs[1] = outs[2] = AK_IR_NONE, outs[3] = sum;
    memcpy(io, e->inputs, n->num_inputs * sizeof *io);
    io[n->num_inputs] = &o->s->values[outs[0]];
    io[n->num_inputs + 3] = &o->s->values[sum];
    n->outputs = outs, n->num_outputs = 4;
    e->inputs = io;
    e->outputs = (ak__tensor **)io + n->num_inputs;
    return AK_OK;
}

/* Rooted at a LayerNormalization or SimplifiedLayerNormalization node. */
static ak_status fuse_skip(optimizer *o, int32_t k, int simplified, int *hit) {
    const ak__ir_node *ln = node_of(o, k);
    for (uint32_t i = 1; i < ln->num_outputs; i++)
        if (ln->outputs[i] != AK_IR_NONE && o->uses[ln->outputs[i]]) return AK_OK;
    int32_t s = in(ln, 0), ak = producer_index(o, s);
    if (s == AK_IR_NONE || ak < 0 || !is_last_axis(o, ak__attr_int(ln, "axis", -1), &s, 1))
        return AK_OK;
    const ak__ir_node *add = node_of(o, ak);
    if (!is_op(add, "Add")) return AK_OK; /* float32: gamma's type, checked below */
    int32_t a = in(add, 0), b = in(add, 1), bias = AK_IR_NONE, chain[3] = {ak, k}, n = 2;
    for (int side = 0; side < 2 && bias == AK_IR_NONE; side++) { /* (a + bias) + b */
        int32_t v = side ? b : a, pk = sole_producer(o, v);
        const ak__ir_node *p = node_of(o, pk);
        int32_t c = is_op(p, "Add") ? (row_constant(o, in(p, 1), AK_ELEM_F32) ? 1 : 0) : -1;
        if (c < 0 || !row_constant(o, in(p, c), AK_ELEM_F32) || !computed(o, in(p, 1 - c)))
            continue;
        bias = in(p, c), chain[n++] = pk;
        if (side) b = in(p, 1 - c);
        else a = in(p, 1 - c);
    }
    if (!computed(o, a) || !computed(o, b) || a == b) return AK_OK;
    /* gamma of n elements (or 1), beta and bias of gamma's n: what the kernel takes */
    const ak__tensor *g = row_constant(o, in(ln, 1), AK_ELEM_F32);
    if (!g || !row_vector_like(o, in(ln, 2), g) || !row_vector_like(o, bias, g)) return AK_OK;
    fused_spec f = {"com.microsoft", "SkipLayerNormalization", 1,
                    {a, b, in(ln, 1), in(ln, 2), bias}, 5, ln->outputs[0], NULL, {{0}}, 0, {0}};
    if (simplified) {
        if (in(ln, 2) != AK_IR_NONE) return AK_OK;
        f.op_type = "SkipSimplifiedLayerNormalization", f.inputs[3] = bias, f.num_inputs = 4;
    }
    while (f.num_inputs > 3 && f.inputs[f.num_inputs - 1] == AK_IR_NONE) f.num_inputs--;
    ak__opt_add_float_attr(&f, "epsilon", ak__attr_float(ln, "epsilon", 1e-5f));
    int keep_sum = o->uses[s] > 1;
    *hit = 1;
    AK_CHECK(ak__opt_emit(o, &f, chain, (size_t)n));
    if (!keep_sum) return AK_OK;
    /* the sum's other readers may run before the norm did: the node moves to the Add's place */
    AK_CHECK(add_sum_output(o, k, s));
    ak__exec_node moved = o->s->nodes[k];
    o->s->nodes[k] = o->s->nodes[ak];
    o->s->nodes[ak] = moved;
    ak__opt_count_uses(o);
    return AK_OK;
}

ak_status ak__opt_fuse_skip_ln(optimizer *o, int32_t k, int *hit) {
    return fuse_skip(o, k, 0, hit);
}

ak_status ak__opt_fuse_skip_rms(optimizer *o, int32_t k, int *hit) {
    return fuse_skip(o, k, 1, hit);
}
