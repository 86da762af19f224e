/* The graph optimizer's attention fusion (the extended level): scaled-dot-product
 * attention recognised by what it computes, from its Softmax,
 *
 *   q = Transpose(Reshape(q_in, [b,s,N,D]), 0,2,1,3)            (the head splits)
 *   k = Reshape(k_in, [b,l,N,D]) transposed to [B,N,D,L]          (Kᵀ)
 *   v = Transpose(Reshape(v_in, [b,l,N,Dv]), 0,2,1,3)
 *   y = Transpose(Softmax(scale·(q·k) [+ mask], last axis)·v, 0,2,1,3) -> Reshape
 *
 * in the arrangements exporters write: Kᵀ as one Transpose(0,2,3,1) or the split's
 * Transpose followed by Transpose(0,1,3,2); the scale as Div by a constant or Mul by one
 * (either operand order) on the scores, on q only, or on q and k separately (d^-1/4 each,
 * torch 2), or several of those (their product is the scale); the additive mask Add'ed
 * in either operand order, whatever computes it (the Hugging Face (1 - mask)·-10000
 * expansion, a causal bias...); a Where(cond, scores, fill) / Where(cond, fill, scores)
 * with fill -inf or about -FLT_MAX (torch's masked_fill), which adding the fill to the
 * score reproduces; with a past, keys and values Concat'ed after past_key/past_value on
 * the sequence axis (their results become the node's present outputs). The whole block
 * becomes one com.accelkit
 * MultiHeadAttention node reading q_in, k_in and v_in (the projections stay where they
 * are, fused into MatMulBias by the later pass) and the mask as attention_bias; its
 * split_shapes attribute holds the three Reshape shapes, so the operator reads its inputs
 * exactly as the splits did. The merging Reshape after the last Transpose stays (it
 * reads the same bytes).
 *
 * Fused only when exact: every intermediate value has the chain as its only reader, the
 * scales are constant scalars, the Softmax is over the last axis of the 4-D scores, the
 * splits' Reshape shapes are constants naming N and D, the heads agree, and the merging
 * Reshape copies no dim past the second. Anything else is left alone. */
#include <math.h>
#include <string.h>

#include "infer/runtime/optimize.h"

enum { MAX_CHAIN = 32, MAX_STEPS = 8 };

typedef struct chain {
    int32_t k[MAX_CHAIN];
    size_t n;
} chain;

static int push(chain *c, int32_t k) {
    if (c->n == MAX_CHAIN) return 0;
    c->k[c->n++] = k;
    return 1;
}

/* The producer of v when v's only reader is the chain being matched. */
static int32_t sole_producer(const optimizer *o, int32_t v) {
    return v >= 0 && o->uses[v] == 1 ? o->producer[v] : -1;
}

/* A constant of one element whose rank does not raise the 4-D operand's by broadcasting. */
static int scalar_of(const optimizer *o, int32_t v, double *out) {
    return const_scalar(o, v, out) && constant(o, v)->rank <= 4;
}

/* A Mul or Div of x by a constant scalar: multiplies *scale by its factor and returns
 * the input it scales, else AK_IR_NONE. */
static int32_t scaled_input(const optimizer *o, const ak__ir_node *n, double *scale) {
    double c;
    if (is_op(n, "Mul") && n->num_inputs == 2) {
        if (scalar_of(o, in(n, 1), &c)) return *scale *= c, in(n, 0);
        if (scalar_of(o, in(n, 0), &c)) return *scale *= c, in(n, 1);
    }
    if (is_op(n, "Div") && n->num_inputs == 2 && scalar_of(o, in(n, 1), &c) && c != 0.0)
        return *scale /= c, in(n, 0);
    return AK_IR_NONE;
}

/* One head split: where it starts and the Reshape's shape; for keys and values with a
 * past, the Concat's past and result (present). */
typedef struct head_split {
    int32_t input;
    int64_t shape[4]; /* [b, s, N, D]: N, D positive */
    int32_t past, present;
} head_split;

static int transpose_perm(const ak__ir_node *n, int64_t perm[4]) {
    const int64_t *p;
    if (ak__attr_ints(n, "perm", &p) != 4) return 0;
    memcpy(perm, p, 4 * sizeof *perm);
    return 1;
}

/* Walks back from v (a MatMul operand) through Transposes and constant scalings to the
 * Reshape of a head split; the Transposes must compose to `want`. */
static int trace_split(const optimizer *o, int32_t v, const int64_t want[4], int scalable,
                       double *scale, chain *c, head_split *h);

/* Whether v is one of the graph's outputs. */
static int graph_output(const optimizer *o, int32_t v) {
    for (size_t i = 0; i < o->s->g->num_outputs; i++)
        if (o->s->g->outputs[i] == v) return 1;
    return 0;
}

/* Concat(past, new keys or values, axis 2) on [B,N,T,D]: its result may also be a graph
 * output (the present the fused node then writes), read by nothing else (a subgraph
 * reading it could run before the fused node). */
static int trace_past(const optimizer *o, int32_t v, const int64_t perm[4], const int64_t want[4],
                      double *scale, chain *c, head_split *h) {
    static const int64_t split_perm[4] = {0, 2, 1, 3};
    int32_t k = v >= 0 ? o->producer[v] : -1;
    const ak__ir_node *cat = node_of(o, k);
    int64_t axis = cat ? ak__attr_int(cat, "axis", 0) : 0;
    if (!is_op(cat, "Concat") || cat->num_inputs != 2 || (axis != 2 && axis != -2) ||
        (o->uses[v] != 1 && (o->uses[v] != 1 + (1 << 20) || !graph_output(o, v))) ||
        h->past != AK_IR_NONE ||
        in(cat, 0) == AK_IR_NONE || !push(c, k))
        return 0;
    for (int i = 0; i < 4; i++) /* the split's (0,2,1,3), then what follows the Concat */
        if (split_perm[perm[i]] != want[i]) return 0;
    h->past = in(cat, 0), h->present = v;
    return trace_split(o, in(cat, 1), split_perm, 0, scale, c, h);
}

static int trace_split(const optimizer *o, int32_t v, const int64_t want[4], int scalable,
                       double *scale, chain *c, head_split *h) {
    int64_t perm[4] = {0, 1, 2, 3}; /* v = Transpose(current value, perm) */
    for (int step = 0; step < MAX_STEPS; step++) {
        if (v >= 0 && is_op(node_of(o, o->producer[v]), "Concat"))
            return trace_past(o, v, perm, want, scale, c, h);
        int32_t k = sole_producer(o, v);
        const ak__ir_node *n = node_of(o, k);
        if (!n || !push(c, k)) return 0;
        int64_t p[4], next[4];
        if (is_op(n, "Transpose")) {
            if (!transpose_perm(n, p)) return 0;
            for (int i = 0; i < 4; i++) {
                if (perm[i] < 0 || perm[i] > 3 || p[perm[i]] < 0 || p[perm[i]] > 3) return 0;
                next[i] = p[perm[i]];
            }
            memcpy(perm, next, sizeof perm);
            v = in(n, 0);
        } else if (is_op(n, "Reshape")) {
            const ak__tensor *t = constant(o, in(n, 1));
            if (!t || t->type != AK_ELEM_I64 || t->count != 4 || ak__attr_int(n, "allowzero", 0))
                return 0;
            for (int i = 0; i < 4; i++) h->shape[i] = ((const int64_t *)t->data)[i];
            if (h->shape[2] <= 0 || h->shape[3] <= 0 || h->shape[0] < -1 || h->shape[1] < -1)
                return 0;
            h->input = in(n, 0);
            return memcmp(perm, want, sizeof perm) == 0 && h->input != AK_IR_NONE;
        } else {
            int32_t x = scalable ? scaled_input(o, n, scale) : AK_IR_NONE;
            if (x == AK_IR_NONE) return 0;
            v = x;
        }
    }
    return 0;
}

/* A Where(cond, x, fill) or Where(cond, fill, x) with fill a constant scalar the score
 * may be added to with the same result: −inf, or about −FLT_MAX (torch.finfo.min),
 * which absorbs any score below 1e31. */
typedef struct where_mask {
    int32_t cond;
    int keeps; /* 1: true keeps the score */
    float fill;
} where_mask;

static int32_t where_input(const optimizer *o, const ak__ir_node *n, where_mask *w) {
    double fill;
    if (!is_op(n, "Where") || n->num_inputs != 3) return AK_IR_NONE;
    for (int keeps = 1; keeps >= 0; keeps--) {
        int32_t f = in(n, keeps ? 2 : 1), x = in(n, keeps ? 1 : 2);
        if (scalar_of(o, f, &fill) && (fill == -INFINITY || fill <= -3.0e38) &&
            !constant(o, x)) {
            w->cond = in(n, 0), w->keeps = keeps, w->fill = (float)fill;
            return x;
        }
    }
    return AK_IR_NONE;
}

/* Walks back from the Softmax input: an Add of a mask and a Where in either order (the
 * node adds the bias, then the fill, which absorbs it), then constant scalings, then the
 * Q·Kᵀ MatMul. Returns the MatMul's exec index, or -1. */
static int32_t trace_scores(const optimizer *o, int32_t v, double *scale, int32_t *mask,
                            where_mask *w, chain *c) {
    int after_where = 0, scaled = 0; /* no Where or Add below a scaling (it would scale them) */
    for (int step = 0; step < MAX_STEPS; step++) {
        int32_t k = sole_producer(o, v);
        const ak__ir_node *n = node_of(o, k);
        if (!n) return -1;
        if (is_op(n, "MatMul")) return push(c, k) ? k : -1;
        int32_t x = w->cond == AK_IR_NONE && !scaled ? where_input(o, n, w) : AK_IR_NONE;
        if (x != AK_IR_NONE) {
            if (!push(c, k)) return -1;
            v = x, after_where = step == 0;
            continue;
        }
        if (is_op(n, "Add") && *mask == AK_IR_NONE && (step == 0 || after_where) &&
            n->num_inputs == 2 &&
            in(n, 0) != in(n, 1)) {
            /* either operand may be the scores: try the first, then the second */
            for (int side = 0; side < 2; side++) {
                chain tried = *c;
                double s = *scale;
                where_mask tried_w = *w;
                int32_t m = in(n, 1 - side), found = -1;
                if (push(&tried, k)) {
                    int32_t taken = m; /* a mask is taken only once */
                    found = trace_scores(o, in(n, side), &s, &taken, &tried_w, &tried);
                }
                if (found >= 0) {
                    *c = tried, *scale = s, *mask = m, *w = tried_w;
                    return found;
                }
            }
            return -1;
        }
        x = scaled_input(o, n, scale);
        if (x == AK_IR_NONE || !push(c, k)) return -1;
        v = x, scaled = 1;
    }
    return -1;
}

/* The Softmax normalizes the last axis of the 4-D scores. */
static int last_axis(const ak__ir_node *sm) {
    int64_t axis = ak__attr_int(sm, "axis", sm->opset < 13 ? 1 : -1);
    return axis == -1 || axis == 3;
}

/* The merging Transpose(0,2,1,3) after P·V and the Reshape reading it (kept): the Reshape
 * must not copy a dim past the second, which the fused node's [B,S,N·Dv] would change. */
static int32_t merge_transpose(const optimizer *o, int32_t v) {
    int32_t tk = ak__opt_sole_reader(o, v);
    const ak__ir_node *t = node_of(o, tk);
    int64_t p[4];
    static const int64_t want[4] = {0, 2, 1, 3};
    if (!is_op(t, "Transpose") || !transpose_perm(t, p) || memcmp(p, want, sizeof p)) return -1;
    const ak__ir_node *r = node_of(o, ak__opt_sole_reader(o, t->outputs[0]));
    const ak__tensor *shape = r && is_op(r, "Reshape") ? constant(o, in(r, 1)) : NULL;
    if (!shape || shape->type != AK_ELEM_I64 || in(r, 0) != t->outputs[0] ||
        ak__attr_int(r, "allowzero", 0))
        return -1;
    for (uint64_t i = 2; i < shape->count; i++)
        if (((const int64_t *)shape->data)[i] == 0) return -1;
    return tk;
}

/* Gives the node just emitted at the chain's last place the outputs present_key and
 * present_value (the Concats' results it replaced): the emitting helper makes one. */
static ak_status add_presents(optimizer *o, const chain *c, int32_t present_k, int32_t present_v) {
    int32_t last = c->k[0];
    for (size_t i = 1; i < c->n; i++)
        if (c->k[i] > last) last = c->k[i];
    ak__exec_node *e = &o->s->nodes[last];
    ak__ir_node *n = (ak__ir_node *)e->node; /* made by the optimizer, in its arena */
    int32_t *outs;
    const ak__tensor **io;
    AK_CHECK(ak__opt_arena_array(o, 3, sizeof *outs, (void **)&outs));
    AK_CHECK(ak__opt_arena_array(o, n->num_inputs + 3, sizeof *io, (void **)&io));
    outs[0] = n->outputs[0], outs[1] = present_k, outs[2] = present_v;
    memcpy(io, e->inputs, n->num_inputs * sizeof *io);
    for (int i = 0; i < 3; i++) io[n->num_inputs + i] = &o->s->values[outs[i]];
    n->outputs = outs, n->num_outputs = 3;
    e->inputs = io;
    e->outputs = (ak__tensor **)io + n->num_inputs;
    ak__opt_count_uses(o);
    return AK_OK;
}

ak_status ak__opt_fuse_attention(optimizer *o, int32_t k, int *hit) {
    static const int64_t split_perm[4] = {0, 2, 1, 3}, kt_perm[4] = {0, 2, 3, 1};
    const ak__ir_node *sm = node_of(o, k);
    if (!last_axis(sm)) return AK_OK;
    chain c = {{k}, 1};
    /* forward: P·V, then the merging Transpose */
    int32_t pvk = ak__opt_sole_reader(o, sm->outputs[0]);
    const ak__ir_node *pv = node_of(o, pvk);
    if (!is_op(pv, "MatMul") || in(pv, 0) != sm->outputs[0] || !push(&c, pvk)) return AK_OK;
    int32_t tk = merge_transpose(o, pv->outputs[0]);
    if (tk < 0 || !push(&c, tk)) return AK_OK;
    head_split hq = {AK_IR_NONE, {0}, AK_IR_NONE, AK_IR_NONE}, hk = hq, hv = hq;
    double scale = 1.0;
    if (!trace_split(o, in(pv, 1), split_perm, 0, &scale, &c, &hv)) return AK_OK;
    /* backward: mask, Where, scale, Q·Kᵀ */
    int32_t mask = AK_IR_NONE;
    where_mask w = {AK_IR_NONE, 1, 0.0f};
    int32_t qk = trace_scores(o, in(sm, 0), &scale, &mask, &w, &c);
    const ak__ir_node *mm = node_of(o, qk);
    if (!mm || !trace_split(o, in(mm, 0), split_perm, 1, &scale, &c, &hq) ||
        !trace_split(o, in(mm, 1), kt_perm, 1, &scale, &c, &hk))
        return AK_OK;
    if (hq.shape[2] != hk.shape[2] || hq.shape[2] != hv.shape[2] || hq.shape[3] != hk.shape[3] ||
        !(scale > 0.0) || !isfinite(scale) || hq.past != AK_IR_NONE ||
        (hk.past == AK_IR_NONE) != (hv.past == AK_IR_NONE))
        return AK_OK;
    for (size_t i = 0; i < c.n; i++) /* a node reached twice (shared splits) is no block */
        for (size_t j = i + 1; j < c.n; j++)
            if (c.k[i] == c.k[j]) return AK_OK;
    fused_spec f = {"com.accelkit", "MultiHeadAttention", 1,
                    {hq.input, hk.input, hv.input, AK_IR_NONE, w.cond, mask, hk.past, hv.past},
                    hk.past != AK_IR_NONE ? 8 : mask != AK_IR_NONE ? 6 : w.cond != AK_IR_NONE ? 5 : 3,
                    node_of(o, tk)->outputs[0], NULL, {{0}}, 0, {0}};
    ak__opt_add_int_attr(&f, "num_heads", hq.shape[2]);
    ak__opt_add_float_attr(&f, "scale", (float)scale);
    if (w.cond != AK_IR_NONE) {
        ak__opt_add_float_attr(&f, "mask_filter_value", w.fill);
        ak__opt_add_int_attr(&f, "bool_mask_keeps", w.keeps);
    }
    int64_t *shapes;
    AK_CHECK(ak__opt_arena_array(o, 12, sizeof *shapes, (void **)&shapes));
    memcpy(shapes, hq.shape, sizeof hq.shape);
    memcpy(shapes + 4, hk.shape, sizeof hk.shape);
    memcpy(shapes + 8, hv.shape, sizeof hv.shape);
    ak__ir_attr *a = &f.extra[f.num_extra++];
    memset(a, 0, sizeof *a);
    a->name = "split_shapes", a->type = AK_ATTR_INTS, a->u.ints = shapes, a->count = 12;
    *hit = 1;
    AK_CHECK(ak__opt_emit(o, &f, c.k, c.n));
    return hk.past == AK_IR_NONE ? AK_OK : add_presents(o, &c, hk.present, hv.present);
}
