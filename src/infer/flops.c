/* FLOPs of the compute-heavy operators (Conv, ConvTranspose, Gemm, MatMul) from the
 * shapes a file declares. There is no shape inference yet, so a node counts only when its
 * operand shapes are fixed in the file (graph inputs, initializers, value_info); the
 * result says how many nodes that was. One multiply-add counts as 2 FLOPs. */
#include <string.h>

#include "core/check.h"
#include "infer/model.h"

/* Static shape of value vi: 0 and rank/dims filled when every dim is known. */
static int static_shape(const ak__ir_graph *g, int32_t vi, int *rank, const ak__ir_dim **dims) {
    if (vi == AK_IR_NONE) return -1;
    const ak__ir_value *v = &g->values[vi];
    int known;
    ak__ir_value_numel(v, &known);
    if (!known || v->kind != AK_VALUE_TENSOR) return -1;
    *rank = v->rank;
    *dims = v->dims;
    return 0;
}

/* Multiplies into *acc; -1 on overflow. */
static int mul(uint64_t *acc, int64_t x) {
    if (x < 0) return -1;
    if (x && *acc > UINT64_MAX / (uint64_t)x) return -1;
    *acc *= (uint64_t)x;
    return 0;
}

static int64_t attr_int(const ak__ir_node *n, const char *name, int64_t dflt) {
    const ak__ir_attr *a = ak__ir_node_attr(n, name);
    return a && a->type == AK_ATTR_INT ? a->u.i : dflt;
}

static const int64_t *attr_ints(const ak__ir_node *n, const char *name, size_t want) {
    const ak__ir_attr *a = ak__ir_node_attr(n, name);
    return a && a->type == AK_ATTR_INTS && a->count == want ? a->u.ints : NULL;
}

/* (.., M, K) x (.., K, N) with numpy broadcasting of the batch dims. */
static int matmul_flops(const ak__ir_graph *g, const ak__ir_node *n, uint64_t *out) {
    int ra, rb;
    const ak__ir_dim *a, *b;
    if (n->num_inputs < 2 || static_shape(g, n->inputs[0], &ra, &a) ||
        static_shape(g, n->inputs[1], &rb, &b) || ra < 1 || rb < 1)
        return -1;
    int64_t m = ra >= 2 ? a[ra - 2].value : 1, k = a[ra - 1].value;
    int64_t nn = rb >= 2 ? b[rb - 1].value : 1, kb = rb >= 2 ? b[rb - 2].value : b[0].value;
    if (k != kb) return -1;
    uint64_t f = 2;
    if (mul(&f, m) || mul(&f, nn) || mul(&f, k)) return -1;
    int ba = ra > 2 ? ra - 2 : 0, bb = rb > 2 ? rb - 2 : 0, nb = ba > bb ? ba : bb;
    for (int i = 0; i < nb; i++) {
        int64_t da = i < nb - ba ? 1 : a[i - (nb - ba)].value;
        int64_t db = i < nb - bb ? 1 : b[i - (nb - bb)].value;
        if (da != db && da != 1 && db != 1) return -1;
        if (mul(&f, da > db ? da : db)) return -1;
    }
    *out = f;
    return 0;
}

static int gemm_flops(const ak__ir_graph *g, const ak__ir_node *n, uint64_t *out) {
    int ra, rb;
    const ak__ir_dim *a, *b;
    if (n->num_inputs < 2 || static_shape(g, n->inputs[0], &ra, &a) ||
        static_shape(g, n->inputs[1], &rb, &b) || ra != 2 || rb != 2)
        return -1;
    int ta = attr_int(n, "transA", 0) != 0, tb = attr_int(n, "transB", 0) != 0;
    int64_t m = a[ta ? 1 : 0].value, k = a[ta ? 0 : 1].value, nn = b[tb ? 0 : 1].value;
    uint64_t f = 2;
    if (mul(&f, m) || mul(&f, nn) || mul(&f, k)) return -1;
    *out = f;
    return 0;
}

/* Output size of one spatial axis, as the Conv operator defines it. */
static int64_t conv_out_dim(const ak__ir_node *n, int axis, int nsp, int64_t in, int64_t k) {
    const int64_t *strides = attr_ints(n, "strides", (size_t)nsp);
    const int64_t *dil = attr_ints(n, "dilations", (size_t)nsp);
    const int64_t *pads = attr_ints(n, "pads", 2 * (size_t)nsp);
    int64_t s = strides ? strides[axis] : 1, d = dil ? dil[axis] : 1;
    int64_t pb = pads ? pads[axis] : 0, pe = pads ? pads[axis + nsp] : 0;
    /* file values are arbitrary int64: keep the arithmetic below far from overflow */
    const int64_t lim = (int64_t)1 << 40;
    if (s <= 0 || s > lim || d <= 0 || d > (1 << 20) || k > lim || in > lim || pb < -lim ||
        pb > lim || pe < -lim || pe > lim)
        return -1;
    const ak__ir_attr *ap = ak__ir_node_attr(n, "auto_pad");
    if (ap && ap->type == AK_ATTR_STRING && ap->u.s.len >= 4 &&
        memcmp(ap->u.s.data, "SAME", 4) == 0)
        return (in + s - 1) / s;
    int64_t span = in + pb + pe - d * (k - 1) - 1;
    return span < 0 ? -1 : span / s + 1;
}

/* Conv: 2 * N * M * prod(out) * C/group * prod(k); ConvTranspose: the same with the
 * input's spatial size, since each input pixel scatters one kernel. */
static int conv_flops(const ak__ir_graph *g, const ak__ir_node *n, int transpose, uint64_t *out) {
    int rx, rw;
    const ak__ir_dim *x, *w;
    if (n->num_inputs < 2 || static_shape(g, n->inputs[0], &rx, &x) ||
        static_shape(g, n->inputs[1], &rw, &w) || rx < 3 || rw != rx)
        return -1;
    int nsp = rx - 2;
    int64_t group = attr_int(n, "group", 1);
    if (group <= 0) return -1;
    uint64_t f = 2;
    if (mul(&f, x[0].value) || mul(&f, w[0].value) || mul(&f, w[1].value)) return -1;
    for (int i = 0; i < nsp; i++) {
        int64_t k = w[2 + i].value;
        int64_t sp = transpose ? x[2 + i].value : conv_out_dim(n, i, nsp, x[2 + i].value, k);
        if (mul(&f, sp) || mul(&f, k)) return -1;
    }
    /* W is (M, C/group, k..) for Conv: N*M*C/group already; for ConvTranspose W is
     * (C, M/group, k..) so C * M/group is right as is */
    *out = f;
    return 0;
}

ak_status ak_model_get_flops(const ak_model *model, ak_model_flops *out) {
    AK_ARG_CHECK(model && out, "ak_model_get_flops: NULL argument");
    memset(out, 0, sizeof *out);
    const ak__ir_graph *g = model->graph;
    for (size_t i = 0; i < g->num_nodes; i++) {
        const ak__ir_node *n = &g->nodes[i];
        if (n->domain[0]) continue;
        uint64_t f = 0;
        int rc;
        if (strcmp(n->op_type, "MatMul") == 0) rc = matmul_flops(g, n, &f);
        else if (strcmp(n->op_type, "Gemm") == 0) rc = gemm_flops(g, n, &f);
        else if (strcmp(n->op_type, "Conv") == 0) rc = conv_flops(g, n, 0, &f);
        else if (strcmp(n->op_type, "ConvTranspose") == 0) rc = conv_flops(g, n, 1, &f);
        else continue;
        out->candidates++;
        if (rc == 0 && out->flops <= UINT64_MAX - f) {
            out->flops += f;
            out->counted++;
        }
    }
    return AK_OK;
}
