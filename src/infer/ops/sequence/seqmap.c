/* SequenceMap: runs its body subgraph once per element of the input sequence and makes
 * one sequence of each body output. Additional inputs are sequences of the same length
 * (element i is fed at iteration i) or tensors (fed whole to every iteration).
 *
 * Like If and Loop (ops/control), the body runs in a subsession during reshape, since
 * the output sizes are only known by running it: each iteration's outputs are copied
 * into per-output buffers of the node's state (grown to the largest run seen and reused),
 * and run packs them into the outputs the session placed. */
#include <stdlib.h>
#include <string.h>

#include "infer/ops/sequence/packed.h"
#include "infer/runtime/session.h"

typedef struct seqmap_out {
    uint8_t *bytes; /* every iteration's payload, back to back */
    size_t cap, len;
    ak__tensor items[AK__SEQ_MAX]; /* data: offsets into bytes until fixed up */
    ak_elem_type type;
} seqmap_out;

typedef struct seqmap_state {
    ak_session *body;
    size_t n_in, n_out;
    ak__tensor *body_in;
    seqmap_out *out;
    uint64_t count; /* elements of the last run */
} seqmap_state;

static void seqmap_destroy(void *p) {
    seqmap_state *st = p;
    if (!st) return;
    ak_session_free(st->body);
    for (size_t m = 0; st->out && m < st->n_out; m++) free(st->out[m].bytes);
    free(st->out);
    free(st->body_in);
    free(st);
}

static ak_status body_attr(const ak__ir_node *node, const ak__ir_graph **out) {
    for (uint32_t i = 0; i < node->num_attrs; i++) {
        if (strcmp(node->attrs[i].name, "body") == 0 && node->attrs[i].type == AK_ATTR_GRAPH) {
            *out = node->attrs[i].u.g;
            continue;
        }
        return AK_OP_FAIL(node, AK_ERR_UNSUPPORTED, "attribute '%s' is not supported",
                          node->attrs[i].name);
    }
    if (!*out) return AK_OP_FAIL(node, AK_ERR_INVALID_MODEL, "graph attribute 'body' is missing");
    return AK_OK;
}

static ak_status seqmap_create(const ak__ir_node *node, const ak__tensor *const *consts,
                               void **state) {
    (void)consts;
    const ak__ir_graph *body = NULL;
    AK_CHECK(body_attr(node, &body));
    if (node->num_inputs < 1 || body->num_inputs != node->num_inputs ||
        body->num_outputs != node->num_outputs || node->num_outputs < 1)
        return AK_OP_FAIL(node, AK_ERR_INVALID_MODEL, "the body has %zu inputs and %zu outputs, "
                          "the node %u and %u", body->num_inputs, body->num_outputs,
                          node->num_inputs, node->num_outputs);
    seqmap_state *st = calloc(1, sizeof *st);
    ak_status s = st ? AK_OK : AK_OP_FAIL(node, AK_ERR_NO_MEMORY, "out of memory");
    if (s == AK_OK) {
        st->n_in = node->num_inputs;
        st->n_out = node->num_outputs;
        st->body_in = calloc(st->n_in, sizeof *st->body_in);
        st->out = calloc(st->n_out, sizeof *st->out);
        if (!st->body_in || !st->out) s = AK_OP_FAIL(node, AK_ERR_NO_MEMORY, "out of memory");
    }
    if (s == AK_OK) s = ak__subsession_create(body, node, &st->body);
    if (s != AK_OK) {
        seqmap_destroy(st);
        return s;
    }
    *state = st;
    return AK_OK;
}

/* Appends one iteration's body output t to output m (its bytes copied; data holds the
 * offset until fix_items). */
static ak_status append(const ak__op_ctx *ctx, seqmap_out *o, uint64_t i, const ak__tensor *t,
                        size_t m) {
    if (ak_elem_type_size(t->type) == 0)
        return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED, "body output %zu is a %s tensor, which "
                          "cannot be put in a sequence", m, ak_elem_type_name(t->type));
    if (i && t->type != o->type)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "body output %zu is %s at element "
                          "%llu but %s before", m, ak_elem_type_name(t->type),
                          (unsigned long long)i, ak_elem_type_name(o->type));
    size_t n = ak__tensor_nbytes(t);
    if (o->len + n > o->cap) {
        size_t cap = o->cap ? o->cap : 256;
        while (cap < o->len + n) cap *= 2;
        uint8_t *p = realloc(o->bytes, cap);
        if (!p) return AK_OP_FAIL(ctx->node, AK_ERR_NO_MEMORY, "out of memory");
        o->bytes = p;
        o->cap = cap;
    }
    if (n) memcpy(o->bytes + o->len, t->data, n);
    o->items[i] = *t;
    o->items[i].data = (void *)(uintptr_t)o->len;
    o->len += n;
    o->type = t->type;
    return AK_OK;
}

/* Body input j at iteration i: element i of a sequence input, or a tensor input whole. */
static ak_status body_input(const ak__op_ctx *ctx, size_t j, uint64_t i, uint64_t n,
                            ak__tensor *out) {
    const ak__tensor *in;
    AK_CHECK(ak__op_require(ctx, (uint32_t)j, &in));
    ak__seq_view v;
    int is_seq = in->type == AK_ELEM_U8 && !ak__seq_open_bytes(in->data, ak__tensor_nbytes(in), &v);
    if (j == 0 && !is_seq)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "input 0 is not a sequence");
    if (!is_seq) {
        *out = *in;
        return AK_OK;
    }
    if (v.h->count != n)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "input %zu has %llu elements, input 0 "
                          "%llu", j, (unsigned long long)v.h->count, (unsigned long long)n);
    *out = ak__seq_elem(&v, i);
    return AK_OK;
}

static ak_status seqmap_reshape(ak__op_ctx *ctx) {
    seqmap_state *st = ctx->state;
    const ak__tensor *seq;
    ak__seq_view v;
    AK_CHECK(ak__op_require(ctx, 0, &seq));
    if (seq->type != AK_ELEM_U8 || ak__seq_open_bytes(seq->data, ak__tensor_nbytes(seq), &v))
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "input 0 is not a sequence");
    uint64_t n = v.h->count;
    for (size_t m = 0; m < st->n_out; m++) st->out[m].len = 0;
    for (uint64_t i = 0; i < n; i++) {
        for (size_t j = 0; j < st->n_in; j++) AK_CHECK(body_input(ctx, j, i, n, &st->body_in[j]));
        AK_CHECK(ak__subsession_run(st->body, ctx->pool, st->body_in, st->n_in, ctx->captures));
        for (size_t m = 0; m < st->n_out; m++)
            AK_CHECK(append(ctx, &st->out[m], i, ak__subsession_output(st->body, m), m));
    }
    st->count = n;
    const ak__ir_graph *body = st->body->g;
    for (size_t m = 0; m < st->n_out; m++) {
        seqmap_out *o = &st->out[m];
        if (!n) o->type = body->values[body->outputs[m]].type; /* as declared, maybe undefined */
        const ak__tensor *items[AK__SEQ_MAX];
        for (uint64_t i = 0; i < n; i++) items[i] = &o->items[i];
        int64_t bytes = (int64_t)ak__seq_packed_bytes(items, n);
        AK_CHECK(ak__op_set_output(ctx, (uint32_t)m, AK_ELEM_U8, 1, &bytes));
    }
    return AK_OK;
}

static ak_status seqmap_run(ak__op_ctx *ctx) {
    seqmap_state *st = ctx->state;
    for (size_t m = 0; m < st->n_out; m++) {
        ak__tensor *out = ak__op_out(ctx, (uint32_t)m);
        if (!out) continue;
        seqmap_out *o = &st->out[m];
        ak__tensor views[AK__SEQ_MAX];
        const ak__tensor *items[AK__SEQ_MAX];
        for (uint64_t i = 0; i < st->count; i++) {
            views[i] = o->items[i];
            views[i].data = o->bytes + (uintptr_t)o->items[i].data;
            items[i] = &views[i];
        }
        ak__seq_pack(items, st->count, o->type, out->data);
    }
    return AK_OK;
}

const ak__op_def ak__op_sequence_map = {"", "SequenceMap", 17, 0, seqmap_create,
                                        seqmap_destroy, seqmap_reshape, seqmap_run};
