/* ---- QDQ: DequantizeLinear -> Conv/MatMul -> QuantizeLinear into one INT8 node ----------
 * The exporters' QDQ form (ONNX Runtime's quantizer) keeps every operator in float between
 * DequantizeLinear and QuantizeLinear; run as written, each layer would dequantize, run in
 * float and quantize again. Where the pattern holds exactly — activations quantized per
 * tensor, constant 8-bit weights (per tensor, or per output channel along axis 0), an int32
 * bias whose scale is exactly x_scale·w_scale — the chain becomes QLinearConv or
 * QLinearMatMul on the quantized values (integer sums, one rounding), which is what the
 * QDQ form specifies up to the float rounding of the unfused path. The weights' DQ nodes
 * were folded into float constants; their int8 inputs are read back from them. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "infer/runtime/optimize.h"

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

/* DequantizeLinear of an activation, per tensor, with a zero point: its type is x's, so x
 * is 8-bit (x is known only at run time; an int32 x has none). */
static int activation_dq(const optimizer *o, const ak__ir_node *dq) {
    return is_op(dq, "DequantizeLinear") && per_tensor_params(o, dq) && in(dq, 2) != AK_IR_NONE;
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
    int32_t r = ak__opt_sole_reader(o, v);
    const ak__ir_node *n = node_of(o, r);
    if (relu && is_op(n, "Relu")) {
        *relu = r;
        n = node_of(o, r = ak__opt_sole_reader(o, n->outputs[0]));
    }
    if (!is_op(n, "QuantizeLinear") || !per_tensor_params(o, n) || in(n, 2) == AK_IR_NONE)
        return -1;
    return r;
}


ak_status ak__opt_fuse_qdq_conv(optimizer *o, int32_t k, int *hit) {
    const ak__ir_node *conv = node_of(o, k);
    int32_t kx = producer_index(o, in(conv, 0));
    const ak__ir_node *dqx = node_of(o, kx);
    if (!activation_dq(o, dqx)) return AK_OK;
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
    if (relu >= 0) ak__opt_add_int_attr(&f, "relu", 1);
    int32_t chain[4] = {k, kq}, n = 2;
    if (relu >= 0) chain[n++] = relu;
    if (o->uses[in(conv, 0)] == 1) chain[n++] = kx; /* the activation's DQ has no other use */
    *hit = 1;
    return ak__opt_emit(o, &f, chain, (size_t)n);
}

ak_status ak__opt_fuse_qdq_matmul(optimizer *o, int32_t k, int *hit) {
    const ak__ir_node *mm = node_of(o, k);
    int32_t ka = producer_index(o, in(mm, 0));
    const ak__ir_node *dqa = node_of(o, ka);
    if (!activation_dq(o, dqa)) return AK_OK;
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
    return ak__opt_emit(o, &f, chain, (size_t)n);
}

/* DequantizeLinear(A), DequantizeLinear(B) -> Add [-> Relu] -> QuantizeLinear, everything
 * per tensor (a residual connection in a QDQ network): QLinearAdd, which computes what
 * these nodes compute without the float tensors between them. */
ak_status ak__opt_fuse_qdq_add(optimizer *o, int32_t k, int *hit) {
    const ak__ir_node *add = node_of(o, k);
    if (add->opset < 7 || add->num_inputs != 2) return AK_OK; /* opset 6's broadcast attribute */
    int32_t ka = producer_index(o, in(add, 0)), kb = producer_index(o, in(add, 1));
    const ak__ir_node *dqa = node_of(o, ka), *dqb = node_of(o, kb);
    if (!activation_dq(o, dqa) || !activation_dq(o, dqb)) return AK_OK;
    int32_t relu = -1, kq = quantize_after(o, add->outputs[0], &relu);
    if (kq < 0) return AK_OK;
    const ak__ir_node *q = node_of(o, kq);
    fused_spec f = {"com.accelkit", "QLinearAdd", 1,
                    {in(dqa, 0), in(dqa, 1), in(dqa, 2), in(dqb, 0), in(dqb, 1), in(dqb, 2),
                     in(q, 1), in(q, 2)},
                    8, q->outputs[0], NULL, {{0}}, 0, {0}};
    if (relu >= 0) ak__opt_add_int_attr(&f, "relu", 1);
    int32_t chain[5] = {k, kq}, n = 2;
    if (relu >= 0) chain[n++] = relu;
    /* a DequantizeLinear no other node reads goes too (the block's input is also read by
     * the next convolution, whose fusion took its own copy of the parameters) */
    if (o->uses[in(add, 0)] == 1) chain[n++] = ka;
    if (ka != kb && o->uses[in(add, 1)] == 1) chain[n++] = kb;
    *hit = 1;
    return ak__opt_emit(o, &f, chain, (size_t)n);
}

/* The exec index of the sole reader of v when it is operator `op`, else -1. */
static int32_t sole_reader_op(const optimizer *o, int32_t v, const char *op) {
    int32_t r = ak__opt_sole_reader(o, v);
    return is_op(node_of(o, r), op) ? r : -1;
}

/* A constant float32 scale of 1 or N values (rank 0 or 1), or a bias: 1-D of N. */
static int const_f32_vector(const optimizer *o, int32_t v, int64_t N, int is_scale) {
    const ak__tensor *t = constant(o, v);
    if (!t || t->type != AK_ELEM_F32) return 0;
    if (!is_scale) return t->rank == 1 && t->count == (uint64_t)N;
    return t->rank <= 1 && (t->count == (uint64_t)N || t->count == 1);
}

/* The dynamically quantized MatMul as quantizers write it (`ak quantize --dynamic`,
 * ONNX Runtime's dynamic quantizer):
 *   DynamicQuantizeLinear(x) -> (xq, xs, xz)
 *   MatMulInteger(xq, const 8-bit W [K, N], xz[, wz]) -> Cast(float) -> Mul(·, Mul(xs, ws))
 *   [-> Add(·, const bias [N])]
 * with ws a constant float32 of 1 or N values: com.microsoft MatMulIntegerToFloat(xq, W,
 * xs, ws, xz, wz, bias), whose epilogue computes acc·(xs·ws) (+ bias) with the same
 * float32 product and the same two roundings, without the int32 and float tensors
 * between. xs must come from a DynamicQuantizeLinear (a scalar, as the fused operator
 * requires). */
ak_status ak__opt_fuse_dynamic_matmul(optimizer *o, int32_t k, int *hit) {
    const ak__ir_node *mmi = node_of(o, k);
    const ak__ir_node *dql = node_of(o, producer_index(o, in(mmi, 0)));
    const ak__tensor *w = constant(o, in(mmi, 1));
    if (!is_op(dql, "DynamicQuantizeLinear") || dql->outputs[0] != in(mmi, 0) ||
        (in(mmi, 2) != AK_IR_NONE && in(mmi, 2) != dql->outputs[2]) || !is_8bit(w) ||
        w->rank != 2)
        return AK_OK;
    int64_t N = w->dims[1];
    int32_t kc = sole_reader_op(o, mmi->outputs[0], "Cast");
    if (kc < 0 || ak__attr_int(node_of(o, kc), "to", 0) != 1 /* FLOAT */) return AK_OK;
    int32_t km = sole_reader_op(o, node_of(o, kc)->outputs[0], "Mul");
    if (km < 0) return AK_OK;
    const ak__ir_node *mul = node_of(o, km);
    int32_t cast_out = node_of(o, kc)->outputs[0];
    int32_t scale = in(mul, 0) == cast_out ? in(mul, 1) : in(mul, 0);
    int32_t ks = producer_index(o, scale);
    const ak__ir_node *smul = node_of(o, ks);
    if (!is_op(smul, "Mul")) return AK_OK;
    /* Mul(xs, ws) in either order */
    int32_t ws = in(smul, 0) == dql->outputs[1] ? in(smul, 1)
                 : in(smul, 1) == dql->outputs[1] ? in(smul, 0) : AK_IR_NONE;
    if (ws == AK_IR_NONE || !const_f32_vector(o, ws, N, 1)) return AK_OK;
    int32_t out = mul->outputs[0], bias = AK_IR_NONE, chain[5] = {k, kc, km}, n = 3;
    int32_t ka = sole_reader_op(o, out, "Add");
    if (ka >= 0) {
        const ak__ir_node *add = node_of(o, ka);
        int32_t b = in(add, 0) == out ? in(add, 1) : in(add, 0);
        if (const_f32_vector(o, b, N, 0)) bias = b, out = add->outputs[0], chain[n++] = ka;
    }
    fused_spec f = {"com.microsoft", "MatMulIntegerToFloat", 1,
                    {in(mmi, 0), in(mmi, 1), dql->outputs[1], ws, in(mmi, 2), in(mmi, 3), bias},
                    7, out, NULL, {{0}}, 0, {0}};
    if (o->uses[scale] == 1) chain[n++] = ks; /* the scale product has no other reader */
    *hit = 1;
    return ak__opt_emit(o, &f, chain, (size_t)n);
}
