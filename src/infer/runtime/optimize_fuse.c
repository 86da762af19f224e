/* The graph optimizer's float fusions (the extended level): chains of nodes into one
 * operator that computes the whole chain faster — FusedConv, MatMulBias, Gelu,
 * LayerNormalization (see optimize.c's overview). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "infer/runtime/optimize.h"

static int last_axis_mean(const ak__ir_node *n) {
    const int64_t *axes;
    return is_op(n, "ReduceMean") && n->opset < 18 && ak__attr_ints(n, "axes", &axes) == 1 &&
           axes[0] == -1 && ak__attr_int(n, "keepdims", 1) == 1;
}


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
    int32_t chain[3] = {k, r}, n = 2, a = ak__opt_sole_reader(o, add->outputs[0]);
    const ak__ir_node *act = node_of(o, a);
    if ((is_op(act, "Relu") || is_op(act, "Gelu")) && activation_of(o, act, &f))
        chain[n++] = a, f.output = act->outputs[0];
    *hit = 1;
    return ak__opt_emit(o, &f, chain, (size_t)n);
}

/* From the Erf: x/sqrt(2) (or x*(1/sqrt(2))) -> Erf -> +1 -> then x*0.5*(...) in either
 * association. */
ak_status ak__opt_fuse_gelu(optimizer *o, int32_t k, int *hit) {
    const ak__ir_node *erf = node_of(o, k);
    int32_t d = in(erf, 0), dk = o->producer[d >= 0 ? d : 0];
    const ak__ir_node *scale = d >= 0 && o->uses[d] == 1 ? node_of(o, dk) : NULL;
    if (!scale || !((is_op(scale, "Div") && const_near(o, in(scale, 1), M_SQRT2)) ||
                    (is_op(scale, "Mul") && const_near(o, in(scale, 1), M_SQRT1_2))))
        return AK_OK;
    int32_t x = in(scale, 0), ak_ = ak__opt_sole_reader(o, erf->outputs[0]);
    const ak__ir_node *plus = node_of(o, ak_);
    if (!is_op(plus, "Add") || !const_near(o, other_input(plus, erf->outputs[0]), 1.0))
        return AK_OK;
    int32_t mk = ak__opt_sole_reader(o, plus->outputs[0]);
    const ak__ir_node *mul = node_of(o, mk);
    if (!is_op(mul, "Mul")) return AK_OK;
    int32_t t = other_input(mul, plus->outputs[0]);
    fused_spec f = {"", "Gelu", erf->opset, {x}, 1, AK_IR_NONE, NULL, {{0}}, 0, {0}};
    int32_t chain[5] = {dk, k, ak_, mk};
    if (t == x) { /* x * (1 + erf) then * 0.5 */
        int32_t hk = ak__opt_sole_reader(o, mul->outputs[0]);
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
    return ak__opt_emit(o, &f, chain, 5);
}

/* From the Pow: mean = ReduceMean(x); d = x - mean; var = ReduceMean(d^2);
 * y = d / sqrt(var + eps) * gamma + beta, over the last axis. */
ak_status ak__opt_fuse_layernorm(optimizer *o, int32_t k, int *hit) {
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
    const ak__ir_node *m2 = node_of(o, c[3] = ak__opt_sole_reader(o, pw->outputs[0]));
    if (!last_axis_mean(m2)) return AK_OK;
    const ak__ir_node *add = node_of(o, c[4] = ak__opt_sole_reader(o, m2->outputs[0]));
    double eps;
    if (!is_op(add, "Add") || !const_scalar(o, other_input(add, m2->outputs[0]), &eps)) return AK_OK;
    const ak__ir_node *sq = node_of(o, c[5] = ak__opt_sole_reader(o, add->outputs[0]));
    if (!is_op(sq, "Sqrt")) return AK_OK;
    const ak__ir_node *div = node_of(o, c[6] = ak__opt_sole_reader(o, sq->outputs[0]));
    if (!is_op(div, "Div") || in(div, 0) != d || in(div, 1) != sq->outputs[0]) return AK_OK;
    const ak__ir_node *mul = node_of(o, c[7] = ak__opt_sole_reader(o, div->outputs[0]));
    int32_t gamma = mul ? other_input(mul, div->outputs[0]) : AK_IR_NONE;
    const ak__tensor *g = constant(o, gamma);
    if (!is_op(mul, "Mul") || !g || g->rank != 1 || g->type != AK_ELEM_F32) return AK_OK;
    const ak__ir_node *badd = node_of(o, c[8] = ak__opt_sole_reader(o, mul->outputs[0]));
    int32_t beta = badd ? other_input(badd, mul->outputs[0]) : AK_IR_NONE;
    const ak__tensor *b = constant(o, beta);
    if (!is_op(badd, "Add") || !b || b->rank != 1 || b->count != g->count) return AK_OK;
    fused_spec f = {"", "LayerNormalization", 17, {x, gamma, beta}, 3, badd->outputs[0], NULL,
                    {{0}}, 0, {0}};
    ak__opt_add_float_attr(&f, "epsilon", (float)eps);
    *hit = 1;
    return ak__opt_emit(o, &f, c, 9);
}
