/* ak_quantize_model (accelkit/infer.h): a float32 ONNX model rewritten into the INT8
 * forms accelkit and ONNX Runtime both run.
 *
 * Steps, on a private copy of the loaded graph: check what the model holds (refusing what
 * cannot be quantized faithfully); pick the nodes (Conv, MatMul, Gemm with constant
 * float32 weights, not excluded); turn each Gemm into MatMul (+ Add of the bias), so one
 * form serves both; then either
 * - static: calibrate the activations around the picked nodes and insert
 *   QuantizeLinear -> DequantizeLinear on them, DequantizeLinear on int8 weights and int32
 *   biases — exactly the chain runtime/optimize_qdq.c fuses (activations uint8 per
 *   tensor with a zero point, weights int8 per tensor or per output channel on axis 0,
 *   bias at scale x_scale·w_scale computed in float32 as the fusion checks it); or
 * - dynamic: DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul (ONNX Runtime's
 *   dynamic form, which needs no com.microsoft operator);
 * and write the graph in topological order. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "infer/onnx/onnx_write.h"
#include "infer/quantize/quantize.h"

enum { OP_CONV = 1, OP_MATMUL = 2, OP_GEMM = 4 };

typedef struct quantizer {
    ak_model *model;
    ak__ir_graph *g;
    const ak_quantize_options *o;
    unsigned op_mask;
    uint8_t *dropped; /* per node (the first num_dropped): bypassed, not written */
    size_t num_dropped;
    int32_t *picked; /* node indices to quantize */
    size_t num_picked;
    ak_quantize_report report;
} quantizer;

static void stamp_opset(quantizer *q);

ak_status ak_quantize_options_init(ak_quantize_options *opts) {
    AK_ARG_CHECK(opts, "quantize options: NULL");
    memset(opts, 0, sizeof *opts);
    opts->method = AK_CALIBRATE_MINMAX;
    opts->percentile = 99.99;
    return AK_OK;
}

static int op_bit(const char *op) {
    return !strcmp(op, "Conv") ? OP_CONV : !strcmp(op, "MatMul") ? OP_MATMUL
                                           : !strcmp(op, "Gemm") ? OP_GEMM : 0;
}

static ak_status check_options(quantizer *q) {
    const ak_quantize_options *o = q->o;
    q->op_mask = o->num_op_types ? 0 : OP_CONV | OP_MATMUL | OP_GEMM;
    for (size_t i = 0; i < o->num_op_types; i++) {
        int bit = o->op_types && o->op_types[i] ? op_bit(o->op_types[i]) : 0;
        if (!bit)
            return AK_FAIL(AK_ERR_INVALID_ARG, "quantize: unknown op type '%.60s' (known: Conv, "
                           "MatMul, Gemm)", o->op_types && o->op_types[i] ? o->op_types[i] : "");
        q->op_mask |= (unsigned)bit;
    }
    if (o->dynamic) {
        if (q->op_mask & OP_CONV && o->num_op_types)
            return AK_FAIL(AK_ERR_UNSUPPORTED, "quantize: dynamic mode quantizes MatMul and Gemm, "
                           "not Conv");
        q->op_mask &= ~(unsigned)OP_CONV;
    } else {
        AK_ARG_CHECK(o->num_samples > 0, "quantize: static quantization needs calibration samples");
        AK_ARG_CHECK(o->inputs && (o->input_names || !o->num_inputs),
                     "quantize: calibration inputs are NULL");
    }
    AK_ARG_CHECK(o->method == AK_CALIBRATE_MINMAX || o->method == AK_CALIBRATE_PERCENTILE,
                 "quantize: calibration method %d is not one of AK_CALIBRATE_*", (int)o->method);
    AK_ARG_CHECK(o->method != AK_CALIBRATE_PERCENTILE || (o->percentile > 50 && o->percentile <= 100),
                 "quantize: percentile %g is not in (50, 100]", o->percentile);
    return AK_OK;
}

/* ---- what the model holds ------------------------------------------------------------- */

static int is_float_type(ak_elem_type t) {
    return t == AK_ELEM_F16 || t == AK_ELEM_BF16 || t == AK_ELEM_F64 || t >= AK_ELEM_F8E4M3FN;
}

static ak_status check_model(quantizer *q) {
    const ak__ir_graph *g = q->g;
    int64_t opset = ak__model_opset(q->model, "");
    int64_t need = q->o->dynamic ? 11 : q->o->per_channel ? 13 : 10;
    if (opset < need)
        return AK_FAIL(AK_ERR_UNSUPPORTED, "quantize: the model imports opset %lld; %s needs "
                       "opset %lld or later", (long long)opset,
                       q->o->dynamic ? "DynamicQuantizeLinear"
                       : q->o->per_channel ? "per-channel DequantizeLinear" : "QuantizeLinear",
                       (long long)need);
    for (size_t k = 0; k < g->num_nodes; k++) {
        const ak__ir_node *n = &g->nodes[k];
        if (strstr(n->op_type, "Quantize") || strstr(n->op_type, "QLinear") ||
            strstr(n->op_type, "Integer"))
            return AK_FAIL(AK_ERR_UNSUPPORTED, "quantize: node '%.80s' is %.40s: the model is "
                           "already quantized", n->name, n->op_type);
    }
    for (size_t v = 0; v < g->num_values; v++) {
        const ak__ir_value *iv = &g->values[v];
        ak_elem_type t = iv->flags & AK_IR_VALUE_CONST ? iv->constant->type : iv->type;
        if (is_float_type(t))
            return AK_FAIL(AK_ERR_UNSUPPORTED, "quantize: '%.80s' is %s: only float32 models "
                           "are quantized", iv->name, ak_elem_type_name(t));
    }
    for (size_t i = 0; i < q->o->num_exclude; i++) {
        const char *name = q->o->exclude[i];
        size_t k = 0;
        while (k < g->num_nodes && strcmp(g->nodes[k].name, name ? name : "")) k++;
        if (k == g->num_nodes)
            return AK_FAIL(AK_ERR_INVALID_ARG, "quantize: no node named '%.80s' to exclude",
                           name ? name : "");
    }
    return AK_OK;
}

/* Exporters share one initializer between several nodes through Identity nodes (PyTorch
 * does it for equal biases): readers of such an Identity read the initializer itself,
 * so that its weights are seen as the constants they are; the Identity is not written. */
static ak_status bypass_constant_identities(quantizer *q) {
    ak__ir_graph *g = q->g;
    q->dropped = calloc(g->num_nodes ? g->num_nodes : 1, 1);
    if (!q->dropped) return AK_FAIL(AK_ERR_NO_MEMORY, "quantize: out of memory");
    q->num_dropped = g->num_nodes;
    for (size_t k = 0; k < g->num_nodes; k++) {
        const ak__ir_node *n = &g->nodes[k];
        if (strcmp(n->op_type, "Identity") || n->domain[0] || n->num_inputs != 1) continue;
        int32_t src = n->inputs[0], out = n->outputs[0];
        if (src == AK_IR_NONE || out == AK_IR_NONE || ak__qz_is_graph_output(g, out) ||
            (g->values[src].flags & (AK_IR_VALUE_CONST | AK_IR_VALUE_INPUT)) != AK_IR_VALUE_CONST)
            continue;
        ak__qz_rewire(g, out, src, (int32_t)k);
        q->dropped[k] = 1;
    }
    return AK_OK;
}

/* ---- picking the nodes ----------------------------------------------------------------- */

static const ak__ir_tensor *const_f32(const ak__ir_graph *g, int32_t v) {
    if (v == AK_IR_NONE || !(g->values[v].flags & AK_IR_VALUE_CONST)) return NULL;
    const ak__ir_tensor *t = g->values[v].constant;
    return t->type == AK_ELEM_F32 ? t : NULL;
}

static int64_t attr_int(const ak__ir_node *n, const char *name, int64_t def) {
    const ak__ir_attr *a = ak__ir_node_attr(n, name);
    return a && a->type == AK_ATTR_INT ? a->u.i : def;
}

static float attr_float(const ak__ir_node *n, const char *name, float def) {
    const ak__ir_attr *a = ak__ir_node_attr(n, name);
    return a && a->type == AK_ATTR_FLOAT ? a->u.f : def;
}

static int in(const ak__ir_node *n, uint32_t i) {
    return i < n->num_inputs ? n->inputs[i] : AK_IR_NONE;
}

/* Whether node n has the form the quantizer writes (weights constant float32). */
static int quantizable(const ak__ir_graph *g, const ak__ir_node *n, int bit) {
    const ak__ir_tensor *w = const_f32(g, in(n, 1));
    if (!w || in(n, 0) == AK_IR_NONE || (g->values[in(n, 0)].flags & AK_IR_VALUE_CONST))
        return 0;
    if (bit == OP_CONV) {
        const ak__ir_tensor *b = const_f32(g, in(n, 2));
        return w->rank >= 3 && (in(n, 2) == AK_IR_NONE || (b && b->count == (uint64_t)w->dims[0]));
    }
    if (w->rank != 2) return 0;
    if (bit == OP_MATMUL) return 1;
    int64_t N = attr_int(n, "transB", 0) ? w->dims[0] : w->dims[1];
    const ak__ir_tensor *c = const_f32(g, in(n, 2));
    return !attr_int(n, "transA", 0) &&
           (in(n, 2) == AK_IR_NONE || (c && c->count == (uint64_t)N && c->dims[c->rank - 1] == N));
}

static int excluded(const quantizer *q, const ak__ir_node *n) {
    for (size_t i = 0; i < q->o->num_exclude; i++)
        if (q->o->exclude[i] && !strcmp(q->o->exclude[i], n->name)) return 1;
    return 0;
}

static ak_status pick_nodes(quantizer *q) {
    const ak__ir_graph *g = q->g;
    q->picked = malloc((g->num_nodes ? g->num_nodes : 1) * sizeof *q->picked);
    if (!q->picked) return AK_FAIL(AK_ERR_NO_MEMORY, "quantize: out of memory");
    for (size_t j = 0; j < g->num_nodes; j++) {
        int32_t k = g->order[j];
        const ak__ir_node *n = &g->nodes[k];
        int bit = n->domain[0] ? 0 : op_bit(n->op_type);
        if (!(bit & (int)q->op_mask) || excluded(q, n)) continue;
        if (quantizable(g, n, bit))
            q->picked[q->num_picked++] = k;
        else
            q->report.skipped++;
    }
    return AK_OK;
}

/* ---- Gemm -> MatMul (+ Add) -------------------------------------------------------------- */

/* Node k (a Gemm of the picked form) becomes MatMul(A, alpha·B') followed by Add(beta·C). */
static ak_status gemm_to_matmul(quantizer *q, int32_t k) {
    ak__ir_graph *g = q->g;
    ak__ir_node *n = ak__ir_node_at(g, k);
    const ak__ir_tensor *w = const_f32(g, in(n, 1)), *c = const_f32(g, in(n, 2));
    int trans = (int)attr_int(n, "transB", 0);
    float alpha = attr_float(n, "alpha", 1.0f), beta = attr_float(n, "beta", 1.0f);
    int64_t K = trans ? w->dims[1] : w->dims[0], N = trans ? w->dims[0] : w->dims[1];
    float *b = malloc((size_t)(K * N) * sizeof *b), *bias = malloc((size_t)N * sizeof *bias);
    ak_status st = b && bias ? AK_OK : AK_FAIL(AK_ERR_NO_MEMORY, "quantize: out of memory");
    const float *src = w->data;
    for (int64_t i = 0; st == AK_OK && i < K; i++)
        for (int64_t j = 0; j < N; j++) b[i * N + j] = alpha * (trans ? src[j * K + i] : src[i * N + j]);
    for (int64_t j = 0; c && st == AK_OK && j < N; j++) bias[j] = beta * ((const float *)c->data)[j];
    int32_t vb = AK_IR_NONE, vc = AK_IR_NONE, out = n->outputs[0], mm_out = out;
    const char *name = n->name[0] ? n->name : g->values[out].name;
    int64_t dims[2] = {K, N};
    if (st == AK_OK) st = ak__qz_constant(g, name, "_MatMul_B", AK_ELEM_F32, 2, dims, b, &vb);
    if (st == AK_OK && c) st = ak__qz_constant(g, name, "_bias", AK_ELEM_F32, 1, &N, bias, &vc);
    if (st == AK_OK && c) st = ak__qz_value(g, name, "_MatMul_Y", &mm_out);
    free(b);
    free(bias);
    AK_CHECK(st);
    n = ak__ir_node_at(g, k);
    n->op_type = "MatMul";
    n->num_attrs = 0;
    n->num_inputs = 2;
    n->inputs[1] = vb;
    n->outputs[0] = mm_out;
    g->values[mm_out].producer = k;
    if (!c) return AK_OK;
    int32_t ins[2] = {mm_out, vc};
    return ak__qz_node(g, "Add", name, ins, 2, &out, 1, NULL);
}

/* ---- weights ------------------------------------------------------------------------------ */

/* Symmetric int8 of w: `groups` scales, over slices of `inner` elements repeated `outer`
 * times each (axis 0: outer 1; columns of a [K, N] matrix: groups N, inner 1, outer K). */
static void quantize_weight(const float *w, size_t outer, size_t groups, size_t inner,
                            int8_t *wq, float *scale) {
    for (size_t c = 0; c < groups; c++) {
        float m = 0;
        for (size_t o = 0; o < outer; o++)
            for (size_t i = 0; i < inner; i++) m = fmaxf(m, fabsf(w[(o * groups + c) * inner + i]));
        scale[c] = m > 0 ? m / 127.0f : 1.0f;
        for (size_t o = 0; o < outer; o++)
            for (size_t i = 0; i < inner; i++) {
                size_t at = (o * groups + c) * inner + i;
                float r = nearbyintf(w[at] / scale[c]);
                wq[at] = (int8_t)(r > 127 ? 127 : r < -127 ? -127 : r);
            }
    }
}

/* The int8 weight of node k's input 1 as constants: data, scale, zero point (per column
 * of a 2-D weight with by_column, per output channel (axis 0) with per_channel). */
typedef struct qweight {
    int32_t data, scale, zero;
    size_t groups;
    float *scales; /* groups entries, owned */
} qweight;

static ak_status weight_constants(quantizer *q, const ak__ir_tensor *w, const char *name,
                                  int per_group, int by_column, qweight *out) {
    ak__ir_graph *g = q->g;
    size_t count = (size_t)w->count;
    size_t groups = !per_group ? 1 : (size_t)(by_column ? w->dims[1] : w->dims[0]);
    size_t inner = by_column || !per_group ? 1 : count / groups;
    size_t outer = by_column && per_group ? (size_t)w->dims[0] : 1;
    if (!per_group) inner = count;
    int8_t *wq = malloc(count ? count : 1), *zeros = calloc(groups, 1);
    out->scales = malloc(groups * sizeof *out->scales);
    out->groups = groups;
    ak_status st = wq && zeros && out->scales
                       ? AK_OK : AK_FAIL(AK_ERR_NO_MEMORY, "quantize: out of memory");
    if (st == AK_OK) quantize_weight(w->data, outer, groups, inner, wq, out->scales);
    int64_t gdim = (int64_t)groups;
    int grank = per_group ? 1 : 0;
    if (st == AK_OK)
        st = ak__qz_constant(g, name, "_quantized", AK_ELEM_I8, w->rank, w->dims, wq, &out->data);
    if (st == AK_OK)
        st = ak__qz_constant(g, name, "_scale", AK_ELEM_F32, grank, &gdim, out->scales, &out->scale);
    if (st == AK_OK)
        st = ak__qz_constant(g, name, "_zero_point", AK_ELEM_I8, grank, &gdim, zeros, &out->zero);
    free(wq);
    free(zeros);
    return st;
}

/* ---- static: QDQ ------------------------------------------------------------------------- */

/* Activation quantization parameters of the float range [lo, hi] (0 put inside). */
static void activation_params(float lo, float hi, float *scale, uint8_t *zero) {
    lo = fminf(lo, 0.0f);
    hi = fmaxf(hi, 0.0f);
    *scale = (hi - lo) / 255.0f;
    if (!(*scale > 0) || !isfinite(*scale)) {
        *scale = 1.0f;
        *zero = 0;
        return;
    }
    float z = nearbyintf(-lo / *scale);
    *zero = (uint8_t)(z < 0 ? 0 : z > 255 ? 255 : z);
}

typedef struct qact {
    int32_t value, dq;   /* the float value and its DequantizeLinear output */
    float scale;
    uint8_t zero;
} qact;

/* The value quantized after node n: its output, or the output of a Relu that alone reads
 * it; AK_IR_NONE when that is a graph output (left in float). */
static int32_t output_to_quantize(const ak__ir_graph *g, const ak__ir_node *n) {
    int32_t y = n->outputs[0];
    if (ak__qz_is_graph_output(g, y)) return AK_IR_NONE;
    if (ak__qz_readers(g, y, AK_IR_NONE) == 1) {
        for (size_t k = 0; k < g->num_nodes; k++) {
            const ak__ir_node *r = &g->nodes[k];
            if (!strcmp(r->op_type, "Relu") && !r->domain[0] && r->inputs[0] == y)
                return ak__qz_is_graph_output(g, r->outputs[0]) ? AK_IR_NONE : r->outputs[0];
        }
    }
    return y;
}

static size_t add_unique(int32_t *list, size_t n, int32_t v) {
    for (size_t i = 0; i < n; i++)
        if (list[i] == v) return n;
    list[n] = v;
    return n + 1;
}

/* The activations to calibrate: each picked node's input and quantized output. */
static size_t activations(const quantizer *q, int32_t *list) {
    size_t n = 0;
    for (size_t i = 0; i < q->num_picked; i++) {
        const ak__ir_node *node = &q->g->nodes[q->picked[i]];
        n = add_unique(list, n, node->inputs[0]);
        int32_t y = output_to_quantize(q->g, node);
        if (y != AK_IR_NONE) n = add_unique(list, n, y);
    }
    return n;
}

/* QuantizeLinear -> DequantizeLinear on a: every reader of a.value now reads a.dq. */
static ak_status insert_qdq(quantizer *q, qact *a) {
    ak__ir_graph *g = q->g;
    const char *name = g->values[a->value].name;
    int32_t s, z, vq, kq;
    AK_CHECK(ak__qz_constant(g, name, "_scale", AK_ELEM_F32, 0, NULL, &a->scale, &s));
    AK_CHECK(ak__qz_constant(g, name, "_zero_point", AK_ELEM_U8, 0, NULL, &a->zero, &z));
    AK_CHECK(ak__qz_value(g, name, "_QuantizeLinear_Output", &vq));
    AK_CHECK(ak__qz_value(g, name, "_DequantizeLinear_Output", &a->dq));
    int32_t qin[3] = {a->value, s, z}, dqin[3] = {vq, s, z};
    AK_CHECK(ak__qz_node(g, "QuantizeLinear", name, qin, 3, &vq, 1, &kq));
    ak__qz_rewire(g, a->value, a->dq, kq);
    return ak__qz_node(g, "DequantizeLinear", name, dqin, 3, &a->dq, 1, NULL);
}

/* DequantizeLinear of constants (data, scale, zero or NONE) into a new float value. */
static ak_status const_dq(ak__ir_graph *g, const char *name, int32_t data, int32_t scale,
                          int32_t zero, int axis0, int32_t *out) {
    int32_t k, ins[3] = {data, scale, zero};
    AK_CHECK(ak__qz_value(g, name, "_DequantizeLinear_Output", out));
    AK_CHECK(ak__qz_node(g, "DequantizeLinear", name, ins, zero == AK_IR_NONE ? 2 : 3, out, 1, &k));
    return axis0 ? ak__qz_int_attr(g, k, "axis", 0) : AK_OK;
}

/* Node k's weight (and Conv bias) behind DequantizeLinear; x_scale is its input's scale. */
static ak_status quantize_node_weights(quantizer *q, int32_t k, float x_scale) {
    ak__ir_graph *g = q->g;
    const ak__ir_node *n = ak__ir_node_at(g, k);
    int conv = !strcmp(n->op_type, "Conv"), per_channel = conv && q->o->per_channel;
    int32_t wv = n->inputs[1], bv = in(n, 2);
    const char *wname = g->values[wv].name;
    qweight w = {0};
    int32_t wdq, bdq = AK_IR_NONE;
    ak_status st = weight_constants(q, g->values[wv].constant, wname, per_channel, 0, &w);
    if (st == AK_OK) st = const_dq(g, wname, w.data, w.scale, w.zero, per_channel, &wdq);
    if (st == AK_OK && conv && bv != AK_IR_NONE) {
        const ak__ir_tensor *b = g->values[bv].constant;
        const char *bname = g->values[bv].name;
        size_t M = (size_t)b->count;
        int32_t *bq = malloc(M * sizeof *bq);
        float *bs = malloc(M * sizeof *bs);
        int32_t vq, vs;
        int64_t dim = (int64_t)M;
        st = bq && bs ? AK_OK : AK_FAIL(AK_ERR_NO_MEMORY, "quantize: out of memory");
        for (size_t c = 0; st == AK_OK && c < M; c++) {
            bs[c] = x_scale * w.scales[w.groups == 1 ? 0 : c]; /* float32, as the fusion checks */
            double r = nearbyint((double)((const float *)b->data)[c] / bs[c]);
            bq[c] = (int32_t)(r > INT32_MAX ? INT32_MAX : r < -INT32_MAX ? -INT32_MAX : r);
        }
        if (st == AK_OK) st = ak__qz_constant(g, bname, "_quantized", AK_ELEM_I32, 1, &dim, bq, &vq);
        if (st == AK_OK)
            st = ak__qz_constant(g, bname, "_scale", AK_ELEM_F32, per_channel ? 1 : 0, &dim, bs, &vs);
        if (st == AK_OK) st = const_dq(g, bname, vq, vs, AK_IR_NONE, per_channel, &bdq);
        free(bq);
        free(bs);
    }
    free(w.scales);
    AK_CHECK(st);
    ak__ir_node *node = ak__ir_node_at(g, k);
    node->inputs[1] = wdq;
    if (bdq != AK_IR_NONE) node->inputs[2] = bdq;
    return AK_OK;
}

static ak_status quantize_static(quantizer *q) {
    ak__ir_graph *g = q->g;
    size_t cap = 2 * q->num_picked + 1; /* each node's input and output at most */
    int32_t *list = malloc(cap * sizeof *list);
    const char **names = malloc(cap * sizeof *names);
    float *lo = malloc(cap * sizeof *lo), *hi = malloc(cap * sizeof *hi);
    qact *acts = calloc(cap, sizeof *acts);
    ak_status st = list && names && lo && hi && acts
                       ? AK_OK : AK_FAIL(AK_ERR_NO_MEMORY, "quantize: out of memory");
    size_t n = st == AK_OK ? activations(q, list) : 0;
    for (size_t i = 0; i < n; i++) names[i] = g->values[list[i]].name;
    if (st == AK_OK) st = ak__ir_graph_sort(g);
    stamp_opset(q);
    if (st == AK_OK) st = ak__qz_calibrate(q->model, names, n, q->o, lo, hi);
    for (size_t i = 0; st == AK_OK && i < n; i++) {
        acts[i].value = list[i];
        activation_params(lo[i], hi[i], &acts[i].scale, &acts[i].zero);
        st = insert_qdq(q, &acts[i]);
    }
    q->report.calibrated = n;
    for (size_t i = 0; st == AK_OK && i < q->num_picked; i++) {
        /* the node reads its input's DQ now; the scale is that activation's */
        int32_t x = g->nodes[q->picked[i]].inputs[0];
        size_t a = 0;
        while (a < n && acts[a].dq != x) a++;
        if (a == n) {
            st = AK_FAIL(AK_ERR_INTERNAL, "quantize: node '%.80s' lost its input's scale",
                         g->nodes[q->picked[i]].name);
            break;
        }
        st = quantize_node_weights(q, q->picked[i], acts[a].scale);
        q->report.quantized++;
    }
    free(list);
    free(names);
    free(lo);
    free(hi);
    free(acts);
    return st;
}

/* ---- dynamic ------------------------------------------------------------------------------ */

/* MatMul node k: A -> DynamicQuantizeLinear (shared by MatMuls reading the same A) ->
 * MatMulInteger with the int8 weight -> Cast -> Mul by a_scale·w_scale. */
static ak_status quantize_dynamic_node(quantizer *q, int32_t k, int32_t (*dql)[4], size_t *num_dql) {
    ak__ir_graph *g = q->g;
    int32_t a = g->nodes[k].inputs[0], wv = g->nodes[k].inputs[1], y = g->nodes[k].outputs[0];
    const char *aname = g->values[a].name, *wname = g->values[wv].name;
    size_t d = 0;
    while (d < *num_dql && dql[d][0] != a) d++;
    if (d == *num_dql) { /* a_q, a_scale, a_zero */
        dql[d][0] = a;
        AK_CHECK(ak__qz_value(g, aname, "_quantized", &dql[d][1]));
        AK_CHECK(ak__qz_value(g, aname, "_scale", &dql[d][2]));
        AK_CHECK(ak__qz_value(g, aname, "_zero_point", &dql[d][3]));
        AK_CHECK(ak__qz_node(g, "DynamicQuantizeLinear", aname, &a, 1, &dql[d][1], 3, NULL));
        (*num_dql)++;
    }
    qweight w = {0};
    ak_status st = weight_constants(q, g->values[wv].constant, wname, q->o->per_channel, 1, &w);
    free(w.scales);
    AK_CHECK(st);
    const char *name = g->nodes[k].name[0] ? g->nodes[k].name : g->values[y].name;
    int32_t acc, accf, scale;
    AK_CHECK(ak__qz_value(g, name, "_MatMulInteger_Y", &acc));
    AK_CHECK(ak__qz_value(g, name, "_float", &accf));
    AK_CHECK(ak__qz_value(g, name, "_scale", &scale));
    ak__ir_node *n = ak__ir_node_at(g, k);
    int32_t *ins;
    AK_CHECK(ak__ir_alloc_array(g, 3, sizeof *ins, (void **)&ins));
    ins[0] = dql[d][1], ins[1] = w.data, ins[2] = dql[d][3];
    n->op_type = "MatMulInteger";
    n->inputs = ins;
    n->num_inputs = 3;
    n->outputs[0] = acc;
    g->values[acc].producer = k;
    int32_t cast;
    AK_CHECK(ak__qz_node(g, "Cast", name, &acc, 1, &accf, 1, &cast));
    AK_CHECK(ak__qz_int_attr(g, cast, "to", AK_ELEM_F32));
    int32_t sin[2] = {dql[d][2], w.scale}, yin[2] = {accf, scale};
    AK_CHECK(ak__qz_node(g, "Mul", name, sin, 2, &scale, 1, NULL));
    AK_CHECK(ak__qz_node(g, "Mul", name, yin, 2, &y, 1, NULL));
    q->report.quantized++;
    return AK_OK;
}

static ak_status quantize_dynamic(quantizer *q) {
    int32_t (*dql)[4] = malloc((q->num_picked + 1) * sizeof *dql);
    if (!dql) return AK_FAIL(AK_ERR_NO_MEMORY, "quantize: out of memory");
    size_t num_dql = 0;
    ak_status st = AK_OK;
    for (size_t i = 0; st == AK_OK && i < q->num_picked; i++)
        st = quantize_dynamic_node(q, q->picked[i], dql, &num_dql);
    free(dql);
    return st;
}

/* Nodes the quantizer added carry the model's default opset (the writer puts a default-
 * domain node of another version into accelkit's own domain). */
static void stamp_opset(quantizer *q) {
    int64_t opset = ak__model_opset(q->model, "");
    for (size_t k = 0; k < q->g->num_nodes; k++)
        if (q->g->nodes[k].opset == 0 && !q->g->nodes[k].domain[0]) q->g->nodes[k].opset = opset;
}

/* ---- writing -------------------------------------------------------------------------------- */

/* The graph in topological order without constants no node reads any more (the float
 * weights that were replaced). */
static ak_status write_result(quantizer *q, const char *path) {
    ak__ir_graph *g = q->g;
    AK_CHECK(ak__ir_graph_sort(g));
    stamp_opset(q);
    const ak__ir_node **nodes = malloc((g->num_nodes ? g->num_nodes : 1) * sizeof *nodes);
    const ak__ir_tensor **constants = calloc(g->num_values ? g->num_values : 1, sizeof *constants);
    ak_status st = nodes && constants ? AK_OK : AK_FAIL(AK_ERR_NO_MEMORY, "quantize: out of memory");
    size_t num_nodes = 0;
    for (size_t k = 0; st == AK_OK && k < g->num_nodes; k++) {
        int32_t i = g->order[k];
        if (i < (int32_t)q->num_dropped && q->dropped[i]) continue;
        const ak__ir_node *n = nodes[num_nodes++] = &g->nodes[i];
        for (uint32_t j = 0; j < n->num_inputs + n->num_captures; j++) {
            int32_t v = j < n->num_inputs ? n->inputs[j] : n->captures[j - n->num_inputs];
            if (v != AK_IR_NONE && (g->values[v].flags & AK_IR_VALUE_CONST))
                constants[v] = g->values[v].constant;
        }
    }
    for (size_t v = 0; st == AK_OK && v < g->num_values; v++) {
        const ak__ir_value *iv = &g->values[v];
        if ((iv->flags & AK_IR_VALUE_CONST) && (iv->flags & (AK_IR_VALUE_INPUT | AK_IR_VALUE_OUTPUT)))
            constants[v] = iv->constant;
    }
    ak__onnx_graph_view view = {nodes, num_nodes, constants, 0};
    if (st == AK_OK) st = ak__onnx_write_file(q->model, &view, path);
    free(nodes);
    free(constants);
    return st;
}

static ak_status quantize_loaded(quantizer *q, const char *out_path) {
    AK_CHECK(check_options(q));
    AK_CHECK(check_model(q));
    AK_CHECK(ak__ir_graph_sort(q->g));
    AK_CHECK(bypass_constant_identities(q));
    AK_CHECK(pick_nodes(q));
    for (size_t i = 0; i < q->num_picked; i++)
        if (!strcmp(q->g->nodes[q->picked[i]].op_type, "Gemm"))
            AK_CHECK(gemm_to_matmul(q, q->picked[i]));
    AK_CHECK(q->o->dynamic ? quantize_dynamic(q) : quantize_static(q));
    return write_result(q, out_path);
}

ak_status ak_quantize_model(const char *in_path, const char *out_path,
                            const ak_quantize_options *opts, ak_quantize_report *report) {
    AK_ENSURE_INIT();
    AK_ARG_CHECK(in_path && in_path[0], "ak_quantize_model: empty input path");
    AK_ARG_CHECK(out_path && out_path[0], "ak_quantize_model: empty output path");
    AK_ARG_CHECK(opts, "ak_quantize_model: options are NULL");
    quantizer q = {0};
    q.o = opts;
    AK_CHECK(ak_onnx_load_file(in_path, &q.model));
    q.g = q.model->graph;
    ak_status st = quantize_loaded(&q, out_path);
    if (report) *report = q.report;
    free(q.picked);
    free(q.dropped);
    ak_model_free(q.model);
    return st;
}
