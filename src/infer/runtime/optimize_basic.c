/* ---- basic passes: rewrites that keep to standard ONNX operators -------------------------
 * Identity nodes, Transpose pairs that undo each other and Reshape chains are bypassed;
 * duplicated nodes (same operator, attributes and inputs) are computed once;
 * BatchNormalization, and a per-channel Mul/Div/Add/Sub by a constant, are folded into
 * the Conv before them; nodes whose outputs nobody reads are removed. Folded weights need
 * value slots, and a session cannot add values: they take the slots of the constants
 * the folded node read and nobody else does (their names stay; their data and shape
 * change). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "infer/runtime/optimize.h"

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
ak_status ak__opt_redirect(optimizer *o, int32_t from, int32_t to) {
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
        AK_CHECK(ak__opt_arena_array(o, 1, sizeof *copy, (void **)&copy));
        AK_CHECK(ak__opt_arena_array(o, n->num_inputs, sizeof *inputs, (void **)&inputs));
        *copy = *n;
        for (uint32_t i = 0; i < n->num_inputs; i++) {
            inputs[i] = n->inputs[i] == from ? to : n->inputs[i];
            if (n->inputs[i] == from) e->inputs[i] = &s->values[to];
        }
        copy->inputs = inputs;
        e->node = copy;
    }
    ak__opt_count_uses(o);
    return AK_OK;
}

/* Node k computes what its input `src` already holds: readers read src, k goes. */
static ak_status bypass(optimizer *o, int32_t k, int32_t src, const char *what) {
    int32_t out = node_of(o, k)->outputs[0];
    if (src == AK_IR_NONE || o->uses[out] >= (1 << 20)) return AK_OK; /* an output keeps its name */
    AK_CHECK(ak__opt_redirect(o, out, src));
    ak__opt_drop(o->s, &o->s->nodes[k]);
    ak__opt_note(o, what);
    ak__opt_count_uses(o);
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
    AK_CHECK(ak__opt_arena_array(o, 1, sizeof *copy, (void **)&copy));
    AK_CHECK(ak__opt_arena_array(o, r2->num_inputs, sizeof *inputs, (void **)&inputs));
    *copy = *r2;
    memcpy(inputs, r2->inputs, r2->num_inputs * sizeof *inputs);
    inputs[0] = in(r1, 0);
    copy->inputs = inputs;
    e->node = copy;
    e->inputs[0] = &o->s->values[inputs[0]];
    *hit = 1;
    ak__opt_note(o, "Reshape chain shortened");
    ak__opt_count_uses(o);
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
                    AK_CHECK(ak__opt_redirect(o, later->node->outputs[i], earlier->node->outputs[i]));
            ak__opt_drop(s, &s->nodes[k]);
            ak__opt_note(o, "duplicate node merged");
            ak__opt_count_uses(o);
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
        ak__opt_drop(s, e);
        ak__opt_note(o, "dead node removed");
    }
    ak__opt_count_uses(o);
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
    return ak__opt_emit_as(o, &f, chain, 2, what);
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
    int32_t y = conv->outputs[0], kop = ak__opt_sole_reader(o, y);
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

ak_status ak__opt_basic(optimizer *o) {
    static const struct { const char *root; pattern_fn fn; } passes[] = {
        {"Identity", skip_identity}, {"Transpose", cancel_transposes},
        {"Reshape", skip_inner_reshape}, {"BatchNormalization", fold_batchnorm},
        {"Conv", fold_conv_arith},
    };
    for (size_t p = 0; p < 3; p++) AK_CHECK(ak__opt_run_pass(o, passes[p].root, passes[p].fn));
    remove_dead(o);
    AK_CHECK(merge_duplicates(o));
    for (size_t p = 3; p < sizeof passes / sizeof *passes; p++)
        AK_CHECK(ak__opt_run_pass(o, passes[p].root, passes[p].fn));
    remove_dead(o);
    return AK_OK;
}
