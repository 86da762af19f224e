/* The graph optimizer's shared state and helpers, for its passes in optimize*.c:
 * optimize.c (the driver, emitting fused nodes), optimize_basic.c (rewrites into standard
 * operators), optimize_fuse.c (float chains into fused operators), optimize_qdq.c (QDQ
 * chains into INT8 operators), optimize_layout.c (the blocked NCHWc layout). */
#ifndef AK_INFER_RUNTIME_OPTIMIZE_H
#define AK_INFER_RUNTIME_OPTIMIZE_H

#include <math.h>
#include <string.h>

#include "infer/runtime/session.h"

typedef struct optimizer {
    ak_session *s;
    ak_arena *arena;   /* the fused nodes and their arrays (owned by the session) */
    int32_t *uses;     /* readers per value (+1 for graph outputs) */
    int32_t *producer; /* exec node index per value, or -1 */
    size_t fused;
} optimizer;

static inline int live(const ak__exec_node *e) { return !e->folded && !e->removed; }

/* ---- looking at nodes ----------------------------------------------------------------- */

static inline const ak__ir_node *node_of(const optimizer *o, int32_t k) {
    return k >= 0 ? o->s->nodes[k].node : NULL;
}

static inline int is_op(const ak__ir_node *n, const char *op) {
    return n && n->domain[0] == '\0' && strcmp(n->op_type, op) == 0;
}

static inline int32_t in(const ak__ir_node *n, uint32_t i) {
    return i < n->num_inputs ? n->inputs[i] : AK_IR_NONE;
}


static inline const ak__tensor *constant(const optimizer *o, int32_t v) {
    if (v == AK_IR_NONE) return NULL;
    uint8_t src = o->s->source[v];
    return src == AK_SRC_CONST || src == AK_SRC_FOLDED ? &o->s->values[v] : NULL;
}

static inline int const_scalar(const optimizer *o, int32_t v, double *out) {
    const ak__tensor *t = constant(o, v);
    if (!t || t->count != 1 || !ak__elem_is_float(t->type)) return 0;
    *out = ak__elem_get(t->data, t->type, 0);
    return 1;
}

static inline int const_near(const optimizer *o, int32_t v, double want) {
    double x;
    return const_scalar(o, v, &x) && fabs(x - want) <= 1e-5 * fabs(want);
}

/* For a binary node reading `v` once: its other input. */
static inline int32_t other_input(const ak__ir_node *n, int32_t v) {
    if (n->num_inputs != 2) return AK_IR_NONE;
    if (n->inputs[0] == v && n->inputs[1] != v) return n->inputs[1];
    if (n->inputs[1] == v && n->inputs[0] != v) return n->inputs[0];
    return AK_IR_NONE;
}

/* The exec index of v's producer; AK_IR_NONE for an omitted input (a fuzzed MatMul or Conv
 * may name "" as its input) or a value no node computes. */
static inline int32_t producer_index(const optimizer *o, int32_t v) {
    return v == AK_IR_NONE ? AK_IR_NONE : o->producer[v];
}

/* The node reading v when it is v's only reader (and v is not a graph output). */
int32_t ak__opt_sole_reader(const optimizer *o, int32_t v);
/* Recounts uses and producers after a rewrite. */
void ak__opt_count_uses(optimizer *o);

/* ---- emitting a fused node ------------------------------------------------------------ */

#define FUSED_MAX_INPUTS 9 /* QLinearConv's */

typedef struct fused_spec {
    const char *domain, *op_type;
    int64_t opset;
    int32_t inputs[FUSED_MAX_INPUTS];
    uint32_t num_inputs;
    int32_t output;
    const ak__ir_node *base; /* attributes copied from this node (Conv), or NULL */
    ak__ir_attr extra[6]; /* MultiHeadAttention's five at most */
    uint32_t num_extra;
    float params[2];
} fused_spec;

void ak__opt_add_string_attr(fused_spec *f, const char *name, const char *value);
/* activation_params: two floats at most, kept in the spec until the node is built */
void ak__opt_add_params_attr(fused_spec *f, const float *values, size_t n);
void ak__opt_add_float_attr(fused_spec *f, const char *name, float value);
void ak__opt_add_int_attr(fused_spec *f, const char *name, int64_t value);
/* n zeroed elements of the given size from the optimizer's arena */
ak_status ak__opt_arena_array(optimizer *o, size_t n, size_t size, void **out);
void ak__opt_drop(ak_session *s, ak__exec_node *e);
/* Counts one application of a pass (or one fused node of an operator) for
 * ak_session_optimizations; `what` is a static string. */
void ak__opt_note(optimizer *o, const char *what);
/* Replaces the chain (exec indices) by one node built from f at the chain's last place;
 * noted as `what` (a rewrite into a standard operator) or, when NULL, as a fused node
 * of f's operator. */
ak_status ak__opt_emit_as(optimizer *o, const fused_spec *f, const int32_t *chain, size_t n,
                          const char *what);
ak_status ak__opt_emit(optimizer *o, const fused_spec *f, const int32_t *chain, size_t n);
/* Makes every live reader of value `from` read `to` instead. */
ak_status ak__opt_redirect(optimizer *o, int32_t from, int32_t to);

/* ---- passes ----------------------------------------------------------------------------- */

/* A pattern rooted at exec node k; sets *hit when it rewrote the graph. */
typedef ak_status (*pattern_fn)(optimizer *o, int32_t k, int *hit);
/* Runs fn on every live node of operator root_op. */
ak_status ak__opt_run_pass(optimizer *o, const char *root_op, pattern_fn fn);

ak_status ak__opt_basic(optimizer *o);                           /* optimize_basic.c */
ak_status ak__opt_fuse_gelu(optimizer *o, int32_t k, int *hit);      /* optimize_fuse_gelu.c */
ak_status ak__opt_fuse_gelu_tanh(optimizer *o, int32_t k, int *hit);
ak_status ak__opt_fuse_norm(optimizer *o, int32_t k, int *hit);      /* optimize_fuse_norm.c */
ak_status ak__opt_fuse_skip_ln(optimizer *o, int32_t k, int *hit);
ak_status ak__opt_fuse_skip_rms(optimizer *o, int32_t k, int *hit);
ak_status ak__opt_fuse_gemm(optimizer *o, int32_t k, int *hit);      /* optimize_fuse.c */
ak_status ak__opt_fuse_matmul(optimizer *o, int32_t k, int *hit);
ak_status ak__opt_fuse_conv(optimizer *o, int32_t k, int *hit);
ak_status ak__opt_fuse_qdq_conv(optimizer *o, int32_t k, int *hit);  /* optimize_qdq.c */
ak_status ak__opt_fuse_qdq_matmul(optimizer *o, int32_t k, int *hit);
ak_status ak__opt_fuse_qdq_add(optimizer *o, int32_t k, int *hit);
ak_status ak__opt_fuse_dynamic_matmul(optimizer *o, int32_t k, int *hit);
ak_status ak__opt_layout_nchwc(optimizer *o);                    /* optimize_layout.c */
ak_status ak__opt_fuse_attention(optimizer *o, int32_t k, int *hit); /* optimize_attention.c */

#endif
