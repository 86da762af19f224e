/* The graph optimizer's GELU fusion (extended level), by what the subgraph computes:
 *
 *   erf form   0.5 · x · (1 + erf(x / √2))                                => Gelu
 *   tanh form  0.5 · x · (1 + tanh(√(2/π) · (x + 0.044715 · x³)))         => Gelu(approximate=tanh)
 *              and its `gelu_fast` spelling (x · √(2/π)) · (1 + 0.044715 · x²)
 *
 * in the arrangements exporters write: x / √2 or x · (1/√2); x³ as Pow(x, 3), x·x·x in
 * either association; every constant product in either operand order (Div by 1/c for
 * a product by c); 1 + f either order; and the three factors x, 0.5 and (1 + f) in any
 * association: (x · (1+f)) · 0.5, (x · 0.5) · (1+f), ((1+f) · 0.5) · x. Rooted at the Erf
 * or Tanh; every intermediate must have no reader outside the chain. MatMulBias and
 * FusedConv absorb the erf Gelu nodes made here (the pass runs first). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "infer/runtime/optimize.h"

/* n computes v · factor (Mul either order, or Div by 1/factor): v, else AK_IR_NONE. */
static int32_t scaled(const optimizer *o, const ak__ir_node *n, double factor) {
    if (is_op(n, "Mul")) {
        if (const_near(o, in(n, 1), factor) && !constant(o, in(n, 0))) return in(n, 0);
        if (const_near(o, in(n, 0), factor) && !constant(o, in(n, 1))) return in(n, 1);
    }
    if (is_op(n, "Div") && const_near(o, in(n, 1), 1.0 / factor)) return in(n, 0);
    return AK_IR_NONE;
}

static int32_t sole_producer(const optimizer *o, int32_t v) {
    return v != AK_IR_NONE && o->uses[v] == 1 ? o->producer[v] : -1;
}

typedef struct gelu_match {
    int32_t chain[12];
    size_t n;
} gelu_match;

static int32_t take(gelu_match *m, int32_t k) {
    if (k >= 0) m->chain[m->n++] = k;
    return k;
}

/* v = x³ (Pow(x, 3), Mul(x, Mul(x, x)) either order): x. */
static int32_t cube_root_of(const optimizer *o, gelu_match *m, int32_t v) {
    const ak__ir_node *n = node_of(o, take(m, sole_producer(o, v)));
    if (is_op(n, "Pow") && const_near(o, in(n, 1), 3.0)) return in(n, 0);
    if (!is_op(n, "Mul")) return AK_IR_NONE;
    for (int side = 0; side < 2; side++) {
        const ak__ir_node *sq = node_of(o, sole_producer(o, in(n, side)));
        if (is_op(sq, "Mul") && in(sq, 0) == in(sq, 1) && in(sq, 0) == in(n, 1 - side)) {
            take(m, o->producer[in(n, side)]);
            return in(sq, 0);
        }
    }
    return AK_IR_NONE;
}

/* v = 0.044715 · x² (as k·(x·x), (k·x)·x, x·(x·k), either order): x. */
static int32_t k_times_square(const optimizer *o, gelu_match *m, int32_t v) {
    const ak__ir_node *n = node_of(o, take(m, sole_producer(o, v)));
    int32_t sq = scaled(o, n, 0.044715);
    const ak__ir_node *q = node_of(o, sole_producer(o, sq));
    if (is_op(q, "Mul") && in(q, 0) == in(q, 1)) return take(m, o->producer[sq]), in(q, 0);
    if (!is_op(n, "Mul") || sq != AK_IR_NONE) return AK_IR_NONE;
    for (int side = 0; side < 2; side++) { /* (k · x) · x */
        int32_t kx = in(n, side), kk = sole_producer(o, kx);
        if (kk >= 0 && scaled(o, node_of(o, kk), 0.044715) == in(n, 1 - side))
            return take(m, kk), in(n, 1 - side);
    }
    return AK_IR_NONE;
}

/* The `gelu_fast` argument (x · √(2/π)) · (1 + 0.044715 · x²) at node n: x. */
static int32_t fast_tanh_argument(const optimizer *o, gelu_match *m, const ak__ir_node *n) {
    if (!is_op(n, "Mul")) return AK_IR_NONE;
    for (int side = 0; side < 2; side++) {
        gelu_match save = *m;
        int32_t sk = sole_producer(o, in(n, side)), ak = sole_producer(o, in(n, 1 - side));
        int32_t x = scaled(o, node_of(o, take(m, sk)), sqrt(2.0 / M_PI));
        const ak__ir_node *add = node_of(o, take(m, ak));
        if (x != AK_IR_NONE && is_op(add, "Add")) {
            for (int a = 0; a < 2; a++)
                if (const_near(o, in(add, a), 1.0) && k_times_square(o, m, in(add, 1 - a)) == x)
                    return x;
        }
        *m = save;
    }
    return AK_IR_NONE;
}

/* The Tanh's input = √(2/π) · (x + 0.044715 · x³), or the fast form: x. */
static int32_t tanh_argument(const optimizer *o, gelu_match *m, int32_t v) {
    const ak__ir_node *top = node_of(o, take(m, sole_producer(o, v)));
    int32_t fast = fast_tanh_argument(o, m, top);
    if (fast != AK_IR_NONE) return fast;
    int32_t u = scaled(o, top, sqrt(2.0 / M_PI));
    const ak__ir_node *add = node_of(o, take(m, sole_producer(o, u)));
    if (!is_op(add, "Add")) return AK_IR_NONE;
    for (int side = 0; side < 2; side++) {
        int32_t x = in(add, side), ck = sole_producer(o, in(add, 1 - side));
        gelu_match save = *m;
        int32_t c = scaled(o, node_of(o, take(m, ck)), 0.044715);
        if (c != AK_IR_NONE && x != AK_IR_NONE && cube_root_of(o, m, c) == x) return x;
        *m = save;
    }
    return AK_IR_NONE;
}

/* p = 1 + f; then the product of x, 0.5 and p in any association: its output. */
static int32_t half_x_times(const optimizer *o, gelu_match *m, int32_t p, int32_t x) {
    const ak__ir_node *r = node_of(o, take(m, ak__opt_sole_reader(o, p)));
    if (!r) return AK_IR_NONE;
    if (is_op(r, "Mul") && other_input(r, p) == x) { /* (x · p) · 0.5 */
        const ak__ir_node *h = node_of(o, take(m, ak__opt_sole_reader(o, r->outputs[0])));
        return h && scaled(o, h, 0.5) == r->outputs[0] ? h->outputs[0] : AK_IR_NONE;
    }
    if (scaled(o, r, 0.5) == p) { /* (p · 0.5) · x */
        const ak__ir_node *h = node_of(o, take(m, ak__opt_sole_reader(o, r->outputs[0])));
        return is_op(h, "Mul") && other_input(h, r->outputs[0]) == x ? h->outputs[0] : AK_IR_NONE;
    }
    if (is_op(r, "Mul")) { /* (x · 0.5) · p */
        int32_t hv = other_input(r, p), hk = sole_producer(o, hv);
        const ak__ir_node *h = node_of(o, hk);
        if (h && scaled(o, h, 0.5) == x) return take(m, hk), r->outputs[0];
    }
    return AK_IR_NONE;
}

/* Rooted at the Erf or the Tanh. */
static ak_status fuse_gelu(optimizer *o, int32_t k, int tanh_form, int *hit) {
    gelu_match m = {{k}, 1};
    const ak__ir_node *f = node_of(o, k);
    int32_t x = tanh_form ? tanh_argument(o, &m, in(f, 0))
                          : scaled(o, node_of(o, take(&m, sole_producer(o, in(f, 0)))), M_SQRT1_2);
    if (x == AK_IR_NONE) return AK_OK;
    const ak__ir_node *plus = node_of(o, take(&m, ak__opt_sole_reader(o, f->outputs[0])));
    if (!is_op(plus, "Add") || !const_near(o, other_input(plus, f->outputs[0]), 1.0)) return AK_OK;
    int32_t out = half_x_times(o, &m, plus->outputs[0], x);
    if (out == AK_IR_NONE) return AK_OK;
    fused_spec g = {"", "Gelu", f->opset, {x}, 1, out, NULL, {{0}}, 0, {0}};
    if (tanh_form) ak__opt_add_string_attr(&g, "approximate", "tanh");
    *hit = 1;
    return ak__opt_emit(o, &g, m.chain, m.n);
}

ak_status ak__opt_fuse_gelu(optimizer *o, int32_t k, int *hit) { return fuse_gelu(o, k, 0, hit); }

ak_status ak__opt_fuse_gelu_tanh(optimizer *o, int32_t k, int *hit) {
    return fuse_gelu(o, k, 1, hit);
}
