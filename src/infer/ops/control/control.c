/* Control-flow operators: If, Loop and Scan, whose bodies are subgraphs (GraphProto
 * attributes) that may read values of the enclosing graphs by name.
 *
 * Each subgraph gets a subsession at session creation (runtime/subsession.c), so an
 * operator the body uses but accelkit lacks fails the session there. The output shapes
 * of these operators are only known by running the subgraph, so reshape does the work:
 * it runs the branch or every iteration, keeping the results (final loop-carried values,
 * the stacked scan outputs) in buffers of the node's state, and sets the output shapes;
 * run then copies them into the outputs the session placed. This is the one place where
 * reshape allocates (the state's buffers grow to the largest run seen and are reused).
 *
 * Loop-carried values are double-buffered: iteration i reads set A and its results are
 * copied into set B, so a body that passes a carried value through, or swaps two, reads
 * nothing that the copy has overwritten. Sequences travel as opaque uint8 tensors (see
 * ops/sequence), so sequence-typed carried values and If outputs need nothing special.
 * String tensors cannot cross a subgraph boundary yet (their bytes live in the body's
 * buffers): they are refused by name. */
#include <stdlib.h>
#include <string.h>

#include "infer/runtime/session.h"

/* ---- growable buffers and tensor copies ------------------------------------------------ */

typedef struct buffer {
    void *data;
    size_t cap;
} buffer;

static ak_status buffer_reserve(buffer *b, size_t need, int keep) {
    if (need <= b->cap && b->data) return AK_OK;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need) cap *= 2;
    void *p;
    AK_CHECK(ak_alloc(cap, &p));
    if (keep && b->data) memcpy(p, b->data, b->cap);
    ak_free(b->data);
    b->data = p;
    b->cap = cap;
    return AK_OK;
}

static void buffers_free(buffer *b, size_t n) {
    for (size_t i = 0; b && i < n; i++) ak_free(b[i].data);
    free(b);
}

static ak_status check_crossing(const ak__ir_node *node, const ak__tensor *t, const char *what,
                                size_t i) {
    if (t->type == AK_ELEM_STRING || t->type == AK_ELEM_UNDEFINED)
        return AK_OP_FAIL(node, AK_ERR_UNSUPPORTED, "%s %zu is a %s tensor, which cannot cross "
                          "a subgraph boundary yet", what, i,
                          t->type == AK_ELEM_STRING ? "string" : "untyped");
    return AK_OK;
}

/* dst = a copy of src's shape, its bytes in b. */
static ak_status copy_into(buffer *b, ak__tensor *dst, const ak__tensor *src) {
    size_t n = ak__tensor_nbytes(src);
    AK_CHECK(buffer_reserve(b, n, 0));
    if (n) memmove(b->data, src->data, n);
    *dst = *src;
    dst->data = b->data;
    return AK_OK;
}

static int same_shape(const ak__tensor *a, const ak__tensor *b) {
    if (a->type != b->type || a->rank != b->rank) return 0;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i]) return 0;
    return 1;
}

/* The subgraph of graph attribute `name`, or a failure naming it. */
static ak_status graph_attr(const ak__ir_node *node, const char *name, const ak__ir_graph **out) {
    for (uint32_t i = 0; i < node->num_attrs; i++)
        if (strcmp(node->attrs[i].name, name) == 0 && node->attrs[i].type == AK_ATTR_GRAPH) {
            *out = node->attrs[i].u.g;
            return AK_OK;
        }
    return AK_OP_FAIL(node, AK_ERR_INVALID_MODEL, "graph attribute '%s' is missing", name);
}

/* The boolean (or numeric) value of a one-element tensor. */
static ak_status read_flag(const ak__op_ctx *ctx, const ak__tensor *t, const char *what, int *out) {
    if (t->count != 1)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "%s has %llu elements, expected one",
                          what, (unsigned long long)t->count);
    *out = ak__elem_get(t->data, t->type, 0) != 0.0;
    return AK_OK;
}

/* Appends one iteration's scan output `t` to acc (acc_len bytes so far); the first
 * iteration fixes the slice's shape, later ones must repeat it. */
static ak_status append_slice(const ak__op_ctx *ctx, size_t k, const ak__tensor *t,
                              ak__tensor *slice, uint64_t iteration, buffer *acc,
                              size_t *acc_len) {
    AK_CHECK(check_crossing(ctx->node, t, "scan output", k));
    if (iteration == 0) {
        *slice = *t;
        slice->data = NULL;
    } else if (!same_shape(slice, t)) {
        char a[96], b[96];
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                          "scan output %zu is %s at iteration %llu but %s before: scan outputs "
                          "are stacked, their shape cannot change", k,
                          ak__tensor_describe(t, a, sizeof a), (unsigned long long)iteration,
                          ak__tensor_describe(slice, b, sizeof b));
    }
    size_t n = ak__tensor_nbytes(t);
    AK_CHECK(buffer_reserve(acc, *acc_len + n, 1));
    if (n) memcpy((char *)acc->data + *acc_len, t->data, n);
    *acc_len += n;
    return AK_OK;
}

/* The shape of a scan output that no iteration produced: [0] + the body's declared
 * shape (unknown dimensions as 0), which is what a stack of nothing holds. */
static ak_status empty_slice(const ak__op_ctx *ctx, const ak__ir_graph *body, size_t out_index,
                             size_t k, ak__tensor *slice) {
    const ak__ir_value *v = &body->values[body->outputs[out_index]];
    if (v->kind != AK_VALUE_TENSOR || v->type == AK_ELEM_UNDEFINED || v->rank < 0)
        return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED,
                          "ran no iteration and the body does not declare the type and rank "
                          "of scan output %zu ('%s')", k, v->name);
    int64_t dims[AK_IR_MAX_RANK];
    for (int i = 0; i < v->rank; i++) dims[i] = v->dims[i].value > 0 ? v->dims[i].value : 0;
    return ak__tensor_set_shape(slice, v->type, v->rank, dims, "scan output");
}

/* ---- If ------------------------------------------------------------------------------- */

typedef struct if_state {
    ak_session *branch[2]; /* else, then */
    int taken;
} if_state;

static void if_destroy(void *p) {
    if_state *st = p;
    if (!st) return;
    ak_session_free(st->branch[0]);
    ak_session_free(st->branch[1]);
    free(st);
}

static ak_status if_create(const ak__ir_node *node, const ak__tensor *const *consts, void **state) {
    (void)consts;
    const ak__ir_graph *g[2];
    AK_CHECK(graph_attr(node, "else_branch", &g[0]));
    AK_CHECK(graph_attr(node, "then_branch", &g[1]));
    for (int b = 0; b < 2; b++)
        if (g[b]->num_outputs != node->num_outputs)
            return AK_OP_FAIL(node, AK_ERR_INVALID_MODEL, "%s_branch has %zu outputs, the node %u",
                              b ? "then" : "else", g[b]->num_outputs, node->num_outputs);
    if_state *st = calloc(1, sizeof *st);
    if (!st) return AK_OP_FAIL(node, AK_ERR_NO_MEMORY, "out of memory");
    ak_status s = ak__subsession_create(g[0], node, &st->branch[0]);
    if (s == AK_OK) s = ak__subsession_create(g[1], node, &st->branch[1]);
    if (s != AK_OK) {
        if_destroy(st);
        return s;
    }
    *state = st;
    return AK_OK;
}

static ak_status if_reshape(ak__op_ctx *ctx) {
    if_state *st = ctx->state;
    const ak__tensor *cond;
    AK_CHECK(ak__op_require(ctx, 0, &cond));
    AK_CHECK(read_flag(ctx, cond, "the condition", &st->taken));
    ak_session *b = st->branch[st->taken];
    AK_CHECK(ak__subsession_run(b, ctx->pool, NULL, 0, ctx->captures));
    for (uint32_t o = 0; o < ctx->num_outputs; o++) {
        const ak__tensor *t = ak__subsession_output(b, o);
        AK_CHECK(check_crossing(ctx->node, t, "output", o));
        AK_CHECK(ak__op_set_output_like(ctx, o, t));
    }
    return AK_OK;
}

static ak_status if_run(ak__op_ctx *ctx) {
    const if_state *st = ctx->state;
    for (uint32_t o = 0; o < ctx->num_outputs; o++) {
        ak__tensor *out = ak__op_out(ctx, o);
        const ak__tensor *t = ak__subsession_output(st->branch[st->taken], o);
        if (out && ak__tensor_nbytes(t)) memcpy(out->data, t->data, ak__tensor_nbytes(t));
    }
    return AK_OK;
}

/* ---- loop state shared by Loop and Scan ------------------------------------------------ */

typedef struct loop_state {
    ak_session *body;
    size_t n_carried, n_scan;
    buffer *carry[2];      /* double-buffered carried values */
    ak__tensor *cur;       /* the carried values the next iteration reads */
    buffer *acc;           /* per scan output: the slices of every iteration, in order */
    size_t *acc_len;
    ak__tensor *slice;     /* per scan output: one iteration's shape */
    uint64_t iterations;   /* of the last run */
    /* Scan: final states stacked over the batch (opset 8), and input slices */
    buffer *final;
    size_t *final_len;
    size_t n_scan_in;
    buffer *in_slice;
    ak__tensor *body_in;   /* the body's inputs of one iteration */
    int64_t iter_value;
    uint8_t cond_value;
} loop_state;

static void loop_destroy(void *p) {
    loop_state *st = p;
    if (!st) return;
    ak_session_free(st->body);
    buffers_free(st->carry[0], st->n_carried);
    buffers_free(st->carry[1], st->n_carried);
    buffers_free(st->acc, st->n_scan);
    buffers_free(st->final, st->n_carried);
    buffers_free(st->in_slice, st->n_scan_in);
    free(st->cur);
    free(st->acc_len);
    free(st->final_len);
    free(st->slice);
    free(st->body_in);
    free(st);
}

static ak_status loop_state_create(const ak__ir_node *node, const ak__ir_graph *body,
                                   size_t n_carried, size_t n_scan, size_t n_scan_in,
                                   loop_state **out) {
    loop_state *st = calloc(1, sizeof *st);
    if (!st) return AK_OP_FAIL(node, AK_ERR_NO_MEMORY, "out of memory");
    st->n_carried = n_carried;
    st->n_scan = n_scan;
    st->n_scan_in = n_scan_in;
    size_t nc = n_carried + 1, ns = n_scan + 1, ni = n_scan_in + 1;
    st->carry[0] = calloc(nc, sizeof(buffer));
    st->carry[1] = calloc(nc, sizeof(buffer));
    st->final = calloc(nc, sizeof(buffer));
    st->final_len = calloc(nc, sizeof(size_t));
    st->cur = calloc(nc, sizeof(ak__tensor));
    st->acc = calloc(ns, sizeof(buffer));
    st->acc_len = calloc(ns, sizeof(size_t));
    st->slice = calloc(ns, sizeof(ak__tensor));
    st->in_slice = calloc(ni, sizeof(buffer));
    st->body_in = calloc(body->num_inputs + 1, sizeof(ak__tensor));
    ak_status s = AK_OK;
    if (!st->carry[0] || !st->carry[1] || !st->final || !st->final_len || !st->cur ||
        !st->acc || !st->acc_len || !st->slice || !st->in_slice || !st->body_in)
        s = AK_OP_FAIL(node, AK_ERR_NO_MEMORY, "out of memory");
    if (s == AK_OK) s = ak__subsession_create(body, node, &st->body);
    if (s != AK_OK) {
        loop_destroy(st);
        return s;
    }
    *out = st;
    return AK_OK;
}

/* After an iteration: body outputs [first, first + n_carried) become the carried values
 * (copied into the buffer set the body did not read). */
static ak_status take_carried(const ak__op_ctx *ctx, loop_state *st, size_t first, int *set) {
    int next = 1 - *set;
    for (size_t j = 0; j < st->n_carried; j++) {
        const ak__tensor *t = ak__subsession_output(st->body, first + j);
        AK_CHECK(check_crossing(ctx->node, t, "loop-carried value", j));
        AK_CHECK(copy_into(&st->carry[next][j], &st->cur[j], t));
    }
    *set = next;
    return AK_OK;
}

static ak_status take_scan_outputs(const ak__op_ctx *ctx, loop_state *st, size_t first,
                                   uint64_t iteration) {
    for (size_t k = 0; k < st->n_scan; k++)
        AK_CHECK(append_slice(ctx, k, ak__subsession_output(st->body, first + k), &st->slice[k],
                              iteration, &st->acc[k], &st->acc_len[k]));
    return AK_OK;
}

static ak_status init_carried(const ak__op_ctx *ctx, loop_state *st, const ak__tensor *const *init,
                              int *set) {
    *set = 0;
    for (size_t j = 0; j < st->n_carried; j++) {
        if (!init[j])
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "initial value %zu is missing", j);
        AK_CHECK(check_crossing(ctx->node, init[j], "loop-carried value", j));
        AK_CHECK(copy_into(&st->carry[0][j], &st->cur[j], init[j]));
    }
    return AK_OK;
}

/* ---- Loop ------------------------------------------------------------------------------ */

static ak_status loop_create(const ak__ir_node *node, const ak__tensor *const *consts,
                             void **state) {
    (void)consts;
    const ak__ir_graph *body;
    AK_CHECK(graph_attr(node, "body", &body));
    if (node->num_inputs < 2)
        return AK_OP_FAIL(node, AK_ERR_INVALID_MODEL, "needs inputs M and cond (either may be '')");
    size_t n_carried = node->num_inputs - 2;
    if (body->num_inputs != n_carried + 2)
        return AK_OP_FAIL(node, AK_ERR_INVALID_MODEL, "the body has %zu inputs, expected %zu "
                          "(iteration number, condition, %zu carried values)",
                          body->num_inputs, n_carried + 2, n_carried);
    if (body->num_outputs < n_carried + 1 || node->num_outputs != body->num_outputs - 1)
        return AK_OP_FAIL(node, AK_ERR_INVALID_MODEL, "the body has %zu outputs and the node %u: "
                          "expected 1 + %zu + K and %zu + K", body->num_outputs,
                          node->num_outputs, n_carried, n_carried);
    size_t n_scan = body->num_outputs - 1 - n_carried;
    loop_state *st;
    AK_CHECK(loop_state_create(node, body, n_carried, n_scan, 0, &st));
    *state = st;
    return AK_OK;
}

static ak_status loop_bounds(const ak__op_ctx *ctx, int64_t *max_trips, int *keep) {
    const ak__tensor *m = ak__op_in(ctx, 0), *c = ak__op_in(ctx, 1);
    if (!m && !c)
        return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED,
                          "neither M nor cond is given: the loop would never end");
    *max_trips = INT64_MAX;
    if (m) {
        if (m->count != 1 || (m->type != AK_ELEM_I64 && m->type != AK_ELEM_I32))
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "M must be one int64");
        *max_trips = ak__elem_get_int(m->data, m->type, 0);
    }
    *keep = 1;
    if (c) AK_CHECK(read_flag(ctx, c, "cond", keep));
    return AK_OK;
}

static ak_status loop_reshape(ak__op_ctx *ctx) {
    loop_state *st = ctx->state;
    int64_t max_trips;
    int keep = 0, set = 0;
    AK_CHECK(loop_bounds(ctx, &max_trips, &keep));
    AK_CHECK(init_carried(ctx, st, ctx->inputs + 2, &set));
    for (size_t k = 0; k < st->n_scan; k++) st->acc_len[k] = 0;
    ak__tensor *in = st->body_in;
    uint64_t i = 0;
    for (; (int64_t)i < max_trips && keep; i++) {
        st->iter_value = (int64_t)i;
        st->cond_value = 1;
        AK_CHECK(ak__tensor_set_shape(&in[0], AK_ELEM_I64, 0, NULL, "iteration number"));
        in[0].data = &st->iter_value;
        AK_CHECK(ak__tensor_set_shape(&in[1], AK_ELEM_BOOL, 0, NULL, "condition"));
        in[1].data = &st->cond_value;
        for (size_t j = 0; j < st->n_carried; j++) in[2 + j] = st->cur[j];
        AK_CHECK(ak__subsession_run(st->body, ctx->pool, in, 2 + st->n_carried, ctx->captures));
        AK_CHECK(read_flag(ctx, ak__subsession_output(st->body, 0), "the body's condition", &keep));
        AK_CHECK(take_carried(ctx, st, 1, &set));
        AK_CHECK(take_scan_outputs(ctx, st, 1 + st->n_carried, i));
    }
    st->iterations = i;
    for (size_t j = 0; j < st->n_carried; j++)
        AK_CHECK(ak__op_set_output_like(ctx, (uint32_t)j, &st->cur[j]));
    for (size_t k = 0; k < st->n_scan; k++) {
        if (i == 0) AK_CHECK(empty_slice(ctx, st->body->g, 1 + st->n_carried + k, k, &st->slice[k]));
        ak__tensor *sl = &st->slice[k];
        int64_t dims[AK_IR_MAX_RANK];
        if (sl->rank + 1 > AK_IR_MAX_RANK)
            return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED, "scan output %zu is too deep", k);
        dims[0] = (int64_t)i;
        memcpy(dims + 1, sl->dims, (size_t)sl->rank * sizeof *dims);
        AK_CHECK(ak__op_set_output(ctx, (uint32_t)(st->n_carried + k), sl->type, sl->rank + 1, dims));
    }
    return AK_OK;
}

static ak_status loop_run(ak__op_ctx *ctx) {
    const loop_state *st = ctx->state;
    for (size_t j = 0; j < st->n_carried; j++) {
        ak__tensor *out = ak__op_out(ctx, (uint32_t)j);
        if (out && ak__tensor_nbytes(out)) memcpy(out->data, st->cur[j].data, ak__tensor_nbytes(out));
    }
    for (size_t k = 0; k < st->n_scan; k++) {
        ak__tensor *out = ak__op_out(ctx, (uint32_t)(st->n_carried + k));
        if (out && st->acc_len[k]) memcpy(out->data, st->acc[k].data, st->acc_len[k]);
    }
    return AK_OK;
}

/* ---- Scan ------------------------------------------------------------------------------ */

/* Opset 8 scans a batch: every input has a leading batch axis, the scan axis is 1, and
 * an optional first input gives per-batch sequence lengths. Opset 9 dropped the batch
 * and added per-input and per-output axes and directions. */
typedef struct scan_attrs {
    int batched; /* opset 8 */
    size_t n_state, n_scan_in, n_scan_out, first_input;
    const int64_t *in_axes, *in_dirs, *out_axes, *out_dirs;
    size_t n_in_axes, n_in_dirs, n_out_axes, n_out_dirs;
} scan_attrs;

static ak_status scan_attrs_read(const ak__ir_node *node, const ak__ir_graph *body, scan_attrs *a) {
    memset(a, 0, sizeof *a);
    a->batched = node->opset < 9;
    int64_t m = ak__attr_int(node, "num_scan_inputs", -1);
    a->first_input = a->batched ? 1 : 0;
    if (m < 1 || (size_t)m + a->first_input > node->num_inputs)
        return AK_OP_FAIL(node, AK_ERR_INVALID_MODEL, "num_scan_inputs %lld does not fit %u inputs",
                          (long long)m, node->num_inputs);
    a->n_scan_in = (size_t)m;
    a->n_state = node->num_inputs - a->first_input - a->n_scan_in;
    if (node->num_outputs < a->n_state)
        return AK_OP_FAIL(node, AK_ERR_INVALID_MODEL, "has %u outputs for %zu states",
                          node->num_outputs, a->n_state);
    a->n_scan_out = node->num_outputs - a->n_state;
    if (body->num_inputs != a->n_state + a->n_scan_in ||
        body->num_outputs != a->n_state + a->n_scan_out)
        return AK_OP_FAIL(node, AK_ERR_INVALID_MODEL, "the body has %zu inputs and %zu outputs, "
                          "expected %zu and %zu", body->num_inputs, body->num_outputs,
                          a->n_state + a->n_scan_in, a->n_state + a->n_scan_out);
    if (a->batched) {
        a->n_in_dirs = ak__attr_ints(node, "directions", &a->in_dirs);
    } else {
        a->n_in_axes = ak__attr_ints(node, "scan_input_axes", &a->in_axes);
        a->n_in_dirs = ak__attr_ints(node, "scan_input_directions", &a->in_dirs);
        a->n_out_axes = ak__attr_ints(node, "scan_output_axes", &a->out_axes);
        a->n_out_dirs = ak__attr_ints(node, "scan_output_directions", &a->out_dirs);
    }
    if ((a->n_in_axes && a->n_in_axes != a->n_scan_in) ||
        (a->n_in_dirs && a->n_in_dirs != a->n_scan_in) ||
        (a->n_out_axes && a->n_out_axes != a->n_scan_out) ||
        (a->n_out_dirs && a->n_out_dirs != a->n_scan_out))
        return AK_OP_FAIL(node, AK_ERR_INVALID_MODEL,
                          "an axes or directions attribute has the wrong number of entries");
    return AK_OK;
}

typedef struct scan_state {
    loop_state *loop;
    scan_attrs attrs;
} scan_state;

static void scan_destroy(void *p) {
    scan_state *st = p;
    if (!st) return;
    loop_destroy(st->loop);
    free(st);
}

static ak_status scan_create(const ak__ir_node *node, const ak__tensor *const *consts,
                             void **state) {
    (void)consts;
    const ak__ir_graph *body;
    AK_CHECK(graph_attr(node, "body", &body));
    scan_state *st = calloc(1, sizeof *st);
    if (!st) return AK_OP_FAIL(node, AK_ERR_NO_MEMORY, "out of memory");
    ak_status s = scan_attrs_read(node, body, &st->attrs);
    if (s == AK_OK)
        s = loop_state_create(node, body, st->attrs.n_state, st->attrs.n_scan_out,
                              st->attrs.n_scan_in, &st->loop);
    if (s != AK_OK) {
        scan_destroy(st);
        return s;
    }
    *state = st;
    return AK_OK;
}

/* Bytes before, along and after `axis` of t: t is outer x len x inner (inner in bytes). */
static void split_at(const ak__tensor *t, int axis, size_t *outer, size_t *len, size_t *inner) {
    *outer = 1;
    *inner = ak_elem_type_size(t->type);
    for (int i = 0; i < axis; i++) *outer *= (size_t)t->dims[i];
    for (int i = axis + 1; i < t->rank; i++) *inner *= (size_t)t->dims[i];
    *len = (size_t)t->dims[axis];
}

/* out = slice `index` of t along axis (a view when nothing precedes the axis). */
static ak_status take_slice(const ak__tensor *t, int axis, size_t index, buffer *b, ak__tensor *out) {
    size_t outer, len, inner;
    split_at(t, axis, &outer, &len, &inner);
    int64_t dims[AK_IR_MAX_RANK];
    int r = 0;
    for (int i = 0; i < t->rank; i++)
        if (i != axis) dims[r++] = t->dims[i];
    AK_CHECK(ak__tensor_set_shape(out, t->type, r, dims, "scan slice"));
    const char *src = t->data;
    if (outer == 1) {
        out->data = (void *)(src + index * inner);
        return AK_OK;
    }
    AK_CHECK(buffer_reserve(b, outer * inner, 0));
    for (size_t o = 0; o < outer; o++)
        memcpy((char *)b->data + o * inner, src + (o * len + index) * inner, inner);
    out->data = b->data;
    return AK_OK;
}

/* Row b of a batched tensor (opset 8), as a view. */
static ak_status batch_row(const ak__tensor *t, size_t b, ak__tensor *out) {
    if (t->rank < 1) return AK_FAIL(AK_ERR_INVALID_MODEL, "Scan (opset 8): an input has no batch axis");
    AK_CHECK(ak__tensor_set_shape(out, t->type, t->rank - 1, t->dims + 1, "scan batch row"));
    out->data = (char *)t->data + b * ak__tensor_nbytes(out);
    return AK_OK;
}

typedef struct scan_run {
    const ak__tensor *scan_in[AK_IR_MAX_RANK * 8]; /* this batch row's scan inputs */
    int in_axis[AK_IR_MAX_RANK * 8];
    size_t seq_len;
} scan_run;

/* The scan inputs' axes and their common length. */
static ak_status scan_axes(const ak__op_ctx *ctx, const scan_attrs *a, scan_run *r) {
    if (a->n_scan_in > sizeof r->in_axis / sizeof *r->in_axis)
        return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED, "too many scan inputs (%zu)", a->n_scan_in);
    for (size_t m = 0; m < a->n_scan_in; m++) {
        const ak__tensor *t = ak__op_in(ctx, (uint32_t)(a->first_input + a->n_state + m));
        if (!t) return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "scan input %zu is missing", m);
        int rank = a->batched ? t->rank - 1 : t->rank, axis = 0;
        if (rank < 1)
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "scan input %zu has no scan axis", m);
        AK_CHECK(ak__op_axis(ctx, a->n_in_axes ? a->in_axes[m] : 0, rank, 0, &axis));
        r->in_axis[m] = axis;
        size_t len = (size_t)t->dims[a->batched ? axis + 1 : axis];
        if (m > 0 && len != r->seq_len)
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                              "scan inputs have different lengths (%zu and %zu)", r->seq_len, len);
        r->seq_len = len;
    }
    return AK_OK;
}

/* Opset 8: sequence_lens, when given, must be the full length for every batch row. */
static ak_status check_sequence_lens(const ak__op_ctx *ctx, size_t seq_len) {
    const ak__tensor *lens = ak__op_in(ctx, 0);
    if (!lens) return AK_OK;
    for (uint64_t i = 0; i < lens->count; i++)
        if ((size_t)ak__elem_get_int(lens->data, lens->type, i) != seq_len)
            return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED,
                              "sequence_lens shorter than the scan length (%zu) are not supported",
                              seq_len);
    return AK_OK;
}

/* All iterations over one batch row (or the whole input after opset 8). */
static ak_status scan_sequence(ak__op_ctx *ctx, scan_state *ss, scan_run *r,
                               const ak__tensor *const *init, uint64_t *iteration) {
    loop_state *st = ss->loop;
    const scan_attrs *a = &ss->attrs;
    int set;
    AK_CHECK(init_carried(ctx, st, init, &set));
    ak__tensor *in = st->body_in;
    for (size_t t = 0; t < r->seq_len; t++, (*iteration)++) {
        for (size_t j = 0; j < a->n_state; j++) in[j] = st->cur[j];
        for (size_t m = 0; m < a->n_scan_in; m++) {
            size_t idx = a->n_in_dirs && a->in_dirs[m] ? r->seq_len - 1 - t : t;
            AK_CHECK(take_slice(r->scan_in[m], r->in_axis[m], idx, &st->in_slice[m],
                                &in[a->n_state + m]));
        }
        AK_CHECK(ak__subsession_run(st->body, ctx->pool, in, a->n_state + a->n_scan_in,
                                    ctx->captures));
        AK_CHECK(take_carried(ctx, st, 0, &set));
        AK_CHECK(take_scan_outputs(ctx, st, a->n_state, *iteration));
    }
    for (size_t j = 0; j < a->n_state; j++) { /* stacked over batch rows (opset 8) */
        size_t n = ak__tensor_nbytes(&st->cur[j]);
        AK_CHECK(buffer_reserve(&st->final[j], st->final_len[j] + n, 1));
        if (n) memcpy((char *)st->final[j].data + st->final_len[j], st->cur[j].data, n);
        st->final_len[j] += n;
    }
    return AK_OK;
}

static ak_status scan_output_shapes(ak__op_ctx *ctx, scan_state *ss, size_t batch, size_t seq_len) {
    loop_state *st = ss->loop;
    const scan_attrs *a = &ss->attrs;
    int64_t dims[AK_IR_MAX_RANK];
    for (size_t j = 0; j < a->n_state; j++) {
        const ak__tensor *c = &st->cur[j];
        if (c->rank + 1 > AK_IR_MAX_RANK)
            return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED, "state %zu is too deep", j);
        dims[0] = (int64_t)batch;
        memcpy(dims + a->batched, c->dims, (size_t)c->rank * sizeof *dims);
        AK_CHECK(ak__op_set_output(ctx, (uint32_t)j, c->type, c->rank + a->batched, dims));
    }
    for (size_t k = 0; k < a->n_scan_out; k++) {
        if (seq_len == 0 || batch == 0)
            AK_CHECK(empty_slice(ctx, st->body->g, a->n_state + k, k, &st->slice[k]));
        const ak__tensor *sl = &st->slice[k];
        if (sl->rank + 2 > AK_IR_MAX_RANK)
            return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED, "scan output %zu is too deep", k);
        int axis = 0, r = 0;
        if (!a->batched) AK_CHECK(ak__op_axis(ctx, a->n_out_axes ? a->out_axes[k] : 0, sl->rank + 1, 0, &axis));
        if (a->batched) dims[r++] = (int64_t)batch;
        for (int i = 0; i <= sl->rank; i++)
            dims[r++] = i == axis ? (int64_t)seq_len : sl->dims[i < axis ? i : i - 1];
        AK_CHECK(ak__op_set_output(ctx, (uint32_t)(a->n_state + k), sl->type, r, dims));
    }
    return AK_OK;
}

static ak_status scan_reshape(ak__op_ctx *ctx) {
    scan_state *ss = ctx->state;
    loop_state *st = ss->loop;
    const scan_attrs *a = &ss->attrs;
    scan_run r;
    memset(&r, 0, sizeof r);
    AK_CHECK(scan_axes(ctx, a, &r));
    size_t batch = 1;
    if (a->batched) {
        AK_CHECK(check_sequence_lens(ctx, r.seq_len));
        batch = (size_t)ak__op_in(ctx, (uint32_t)(a->first_input + a->n_state))->dims[0];
        if (batch == 0) /* the states' row shape would come from no row */
            return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED, "an empty batch (opset 8) is not "
                              "supported");
    }
    for (size_t k = 0; k < a->n_scan_out; k++) st->acc_len[k] = 0;
    for (size_t j = 0; j < a->n_state; j++) st->final_len[j] = 0;
    const ak__tensor *init[AK_IR_MAX_RANK * 8];
    ak__tensor rows[AK_IR_MAX_RANK * 8];
    if (a->n_state + a->n_scan_in > sizeof rows / sizeof *rows)
        return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED, "too many inputs");
    uint64_t iteration = 0;
    for (size_t b = 0; b < batch; b++) {
        for (size_t j = 0; j < a->n_state; j++) {
            const ak__tensor *t = ak__op_in(ctx, (uint32_t)(a->first_input + j));
            if (!t) return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "state %zu is missing", j);
            if (a->batched) AK_CHECK(batch_row(t, b, &rows[j]));
            init[j] = a->batched ? &rows[j] : t;
        }
        for (size_t m = 0; m < a->n_scan_in; m++) {
            const ak__tensor *t = ak__op_in(ctx, (uint32_t)(a->first_input + a->n_state + m));
            if (a->batched) AK_CHECK(batch_row(t, b, &rows[a->n_state + m]));
            r.scan_in[m] = a->batched ? &rows[a->n_state + m] : t;
        }
        AK_CHECK(scan_sequence(ctx, ss, &r, init, &iteration));
    }
    st->iterations = iteration;
    return scan_output_shapes(ctx, ss, batch, r.seq_len);
}

/* Slice t of scan output k (stacked in iteration order) goes to its place along the
 * output axis, from the end for a reverse direction. */
static void place_scan_output(const scan_state *ss, size_t k, ak__tensor *out) {
    const loop_state *st = ss->loop;
    const scan_attrs *a = &ss->attrs;
    if (a->batched) { /* [batch, seq, ...] is iteration order already */
        memcpy(out->data, st->acc[k].data, st->acc_len[k]);
        return;
    }
    /* the axis scan_output_shapes put the length at (checked there) */
    int64_t ax = a->n_out_axes ? a->out_axes[k] : 0;
    int axis = (int)(ax < 0 ? ax + out->rank : ax);
    size_t outer, len, inner;
    split_at(out, axis, &outer, &len, &inner);
    size_t slice_bytes = outer * inner;
    int reverse = a->n_out_dirs && a->out_dirs[k];
    for (size_t t = 0; t < len; t++) {
        size_t p = reverse ? len - 1 - t : t;
        const char *src = (const char *)st->acc[k].data + t * slice_bytes;
        for (size_t o = 0; o < outer; o++)
            memcpy((char *)out->data + (o * len + p) * inner, src + o * inner, inner);
    }
}

static ak_status scan_run_op(ak__op_ctx *ctx) {
    const scan_state *ss = ctx->state;
    const loop_state *st = ss->loop;
    for (size_t j = 0; j < ss->attrs.n_state; j++) {
        ak__tensor *out = ak__op_out(ctx, (uint32_t)j);
        if (out && st->final_len[j]) memcpy(out->data, st->final[j].data, st->final_len[j]);
    }
    for (size_t k = 0; k < ss->attrs.n_scan_out; k++) {
        ak__tensor *out = ak__op_out(ctx, (uint32_t)(ss->attrs.n_state + k));
        if (out && ak__tensor_nbytes(out)) place_scan_output(ss, k, out);
    }
    return AK_OK;
}

/* ---- the family table ---------------------------------------------------------------- */

static const ak__op_def op_if = {"", "If", 1, 0, if_create, if_destroy, if_reshape, if_run};
static const ak__op_def op_loop = {"", "Loop", 1, 0, loop_create, loop_destroy, loop_reshape,
                                   loop_run};
static const ak__op_def op_scan = {"", "Scan", 8, 0, scan_create, scan_destroy, scan_reshape,
                                   scan_run_op};

const ak__op_def *const ak__ops_control[] = {&op_if, &op_loop, &op_scan, NULL};
