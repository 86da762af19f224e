/* The graph optimizer's float fusions (the extended level): chains of nodes into one
 * operator that computes the whole chain faster — FusedConv, MatMulBias (see optimize.c's
 * overview); GELU is in optimize_fuse_gelu.c, the normalizations in optimize_fuse_norm.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "infer/runtime/optimize.h"

/* ---- patterns ------------------------------------------------------------------------- */

/* An activation node FusedConv/MatMulBias can apply: its kind and parameters. */
static int activation_of(const optimizer *o, const ak__ir_node *n, fused_spec *f) {
    if (is_op(n, "Relu")) return ak__opt_add_string_attr(f, "activation", "Relu"), 1;
    if (is_op(n, "Sigmoid")) return ak__opt_add_string_attr(f, "activation", "Sigmoid"), 1;
    if (is_op(n, "Tanh")) return ak__opt_add_string_attr(f, "activation", "Tanh"), 1;
    if (is_op(n, "Gelu") && strcmp(ak__attr_string(n, "approximate", "none"), "none") == 0)
        return ak__opt_add_string_attr(f, "activation", "Gelu"), 1;
    if (is_op(n, "LeakyRelu")) {
        float alpha = ak__attr_float(n, "alpha", 0.01f);
        ak__opt_add_string_attr(f, "activation", "LeakyRelu");
        ak__opt_add_params_attr(f, &alpha, 1);
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
    ak__opt_add_string_attr(f, "activation", "Clip");
    ak__opt_add_params_attr(f, range, 2);
    return 1;
}

ak_status ak__opt_fuse_conv(optimizer *o, int32_t k, int *hit) {
    const ak__ir_node *conv = node_of(o, k);
    fused_spec f = {"com.microsoft", "FusedConv", 1, {in(conv, 0), in(conv, 1), in(conv, 2)}, 3,
                    conv->outputs[0], conv, {{0}}, 0, {0}};
    int32_t chain[3] = {k}, n = 1, r = ak__opt_sole_reader(o, conv->outputs[0]);
    const ak__ir_node *next = node_of(o, r);
    if (is_op(next, "Add")) { /* a residual produced by another node */
        int32_t z = other_input(next, conv->outputs[0]);
        if (z != AK_IR_NONE && !constant(o, z) && o->producer[z] >= 0) {
            f.inputs[3] = z, f.num_inputs = 4, f.output = next->outputs[0];
            chain[n++] = r;
            next = node_of(o, r = ak__opt_sole_reader(o, f.output));
        }
    }
    if (next && !is_op(next, "Gelu") && activation_of(o, next, &f))
        chain[n++] = r, f.output = next->outputs[0];
    if (n == 1) return AK_OK;
    *hit = 1;
    return ak__opt_emit(o, &f, chain, (size_t)n);
}

/* Emits f over chain[0..n) and the activation reading its output, when there is one. */
static ak_status emit_with_activation(optimizer *o, fused_spec *f, int32_t *chain, size_t n) {
    int32_t a = ak__opt_sole_reader(o, f->output);
    const ak__ir_node *act = node_of(o, a);
    if (act && activation_of(o, act, f)) chain[n++] = a, f->output = act->outputs[0];
    return ak__opt_emit(o, f, chain, n);
}

ak_status ak__opt_fuse_matmul(optimizer *o, int32_t k, int *hit) {
    const ak__ir_node *mm = node_of(o, k);
    const ak__tensor *b = constant(o, in(mm, 1));
    if (!b || b->rank != 2 || b->type != AK_ELEM_F32) return AK_OK;
    int32_t r = ak__opt_sole_reader(o, mm->outputs[0]);
    const ak__ir_node *add = node_of(o, r);
    if (!is_op(add, "Add")) return AK_OK;
    int32_t bias = other_input(add, mm->outputs[0]);
    const ak__tensor *bt = constant(o, bias);
    if (!bt || bt->rank != 1 || bt->type != AK_ELEM_F32 || bt->dims[0] != b->dims[1])
        return AK_OK;
    fused_spec f = {"com.accelkit", "MatMulBias", 1, {in(mm, 0), in(mm, 1), bias}, 3,
                    add->outputs[0], NULL, {{0}}, 0, {0}};
    int32_t chain[3] = {k, r};
    *hit = 1;
    return emit_with_activation(o, &f, chain, 2);
}

/* A float32 constant no caller can override (not also a graph input), read only here. */
static ak__tensor *own_constant(const optimizer *o, int32_t v) {
    const ak__tensor *t = constant(o, v);
    if (!t || t->type != AK_ELEM_F32 || o->uses[v] != 1 ||
        (o->s->g->values[v].flags & AK_IR_VALUE_INPUT))
        return NULL;
    return &o->s->values[v];
}

/* Gives slot v a folded copy of its float32 data, transposed (B[N, K] of Gemm(transB=1)
 * to [K, N]) or as is, with the given shape: a folded value is what the session and
 * `ak optimize` read (an initializer would be written with its model shape). */
static ak_status refold(optimizer *o, int32_t v, int transpose, int rank, const int64_t *dims) {
    ak_session *s = o->s;
    ak__tensor *t = &s->values[v];
    float *p;
    AK_CHECK(ak_alloc((size_t)(t->count ? t->count : 1) * sizeof *p, (void **)&p));
    const float *src = t->data;
    if (transpose) {
        int64_t n = t->dims[0], kk = t->dims[1];
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < kk; j++) p[j * n + i] = src[i * kk + j];
    } else {
        memcpy(p, src, t->count * sizeof *p);
    }
    AK_CHECK(ak__tensor_set_shape(t, AK_ELEM_F32, rank, dims, s->g->values[v].name));
    if (s->folded_data[v]) ak_free(s->folded_data[v]);
    s->folded_data[v] = p;
    s->folded_bytes += t->count * sizeof *p;
    t->data = p;
    s->source[v] = AK_SRC_FOLDED;
    return AK_OK;
}

/* Gemm(A, const B, const C) with alpha = beta = 1, transA = 0 and C of N elements =>
 * MatMulBias [+ activation]; transB = 1 transposes B in its slot (only this Gemm reads
 * it). Other alpha, beta, transA or a C of another shape keep the Gemm: exact or nothing. */
ak_status ak__opt_fuse_gemm(optimizer *o, int32_t k, int *hit) {
    const ak__ir_node *gm = node_of(o, k);
    if (ak__attr_float(gm, "alpha", 1.0f) != 1.0f || ak__attr_float(gm, "beta", 1.0f) != 1.0f ||
        ak__attr_int(gm, "transA", 0) != 0 || gm->num_outputs != 1)
        return AK_OK;
    int trans_b = ak__attr_int(gm, "transB", 0) != 0;
    const ak__tensor *b = constant(o, in(gm, 1)), *c = constant(o, in(gm, 2));
    if (!b || b->rank != 2 || b->type != AK_ELEM_F32 || !c || c->type != AK_ELEM_F32 ||
        c->count != (uint64_t)b->dims[trans_b ? 0 : 1] || in(gm, 0) == AK_IR_NONE)
        return AK_OK;
    ak__tensor *cw = c->rank == 1 ? NULL : own_constant(o, in(gm, 2));
    if (c->rank != 1 && !(c->rank == 2 && c->dims[0] == 1 && cw)) return AK_OK;
    if (trans_b && !own_constant(o, in(gm, 1))) return AK_OK;
    if (trans_b) {
        int64_t kn[2] = {b->dims[1], b->dims[0]};
        AK_CHECK(refold(o, in(gm, 1), 1, 2, kn));
    }
    if (cw) { /* [1, N] read as [N] */
        int64_t n = cw->dims[1];
        AK_CHECK(refold(o, in(gm, 2), 0, 1, &n));
    }
    fused_spec f = {"com.accelkit", "MatMulBias", 1, {in(gm, 0), in(gm, 1), in(gm, 2)}, 3,
                    gm->outputs[0], NULL, {{0}}, 0, {0}};
    int32_t chain[2] = {k};
    *hit = 1;
    return emit_with_activation(o, &f, chain, 1);
}
