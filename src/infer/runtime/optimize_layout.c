/* The graph optimizer's layout pass (the layout level): chains of Conv/FusedConv and MaxPool
 * nodes run on values stored blocked (NCHW8c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/params.h"
#include "infer/runtime/optimize.h"

/* ---- the blocked layout ---------------------------------------------------------------- */

static int is_fused_conv(const ak__ir_node *n) {
    return strcmp(n->domain, "com.microsoft") == 0 && strcmp(n->op_type, "FusedConv") == 0;
}

static int attr_all(const ak__ir_node *n, const char *name, int64_t want) {
    const int64_t *v;
    size_t count = ak__attr_ints(n, name, &v);
    for (size_t i = 0; i < count; i++)
        if (v[i] != want) return 0;
    return 1;
}

/* What the blocked layout can run (a Conv/FusedConv with a constant float32 W and output
 * channels in multiples of 8): NCHWC_POINTWISE for 1×1 with stride 1, no pads and input
 * channels multiples of 8, NCHWC_DENSE for any other window of one group over input
 * channels in multiples of 8 (3×3 with or without strides, strided 1×1), NCHWC_DEPTHWISE,
 * NCHWC_STEM (fewer than 8 input channels, read plain); NCHWC_MAXPOOL for a 2-D MaxPool
 * without Indices (reads blocked). */
enum { NCHWC_NONE, NCHWC_POINTWISE, NCHWC_DEPTHWISE, NCHWC_STEM, NCHWC_MAXPOOL, NCHWC_DENSE };
static int nchwc_kind(const optimizer *o, const ak__exec_node *e) {
    const ak__ir_node *n = e->node;
    if (!live(e)) return NCHWC_NONE;
    if (is_op(n, "MaxPool")) {
        const int64_t *k;
        int indices = n->num_outputs > 1 && n->outputs[1] != AK_IR_NONE;
        return !indices && ak__attr_ints(n, "kernel_shape", &k) == 2 ? NCHWC_MAXPOOL : NCHWC_NONE;
    }
    if (!(is_op(n, "Conv") || is_fused_conv(n))) return NCHWC_NONE;
    const ak__tensor *w = constant(o, in(n, 1));
    if (!w || w->type != AK_ELEM_F32 || w->rank != 4 || w->dims[0] % 8 != 0) return NCHWC_NONE;
    int64_t group = ak__attr_int(n, "group", 1), taps = w->dims[2] * w->dims[3];
    if (group == w->dims[0] && w->dims[1] == 1) return taps <= 49 ? NCHWC_DEPTHWISE : NCHWC_NONE;
    if (group == 1 && w->dims[1] < 8) return taps <= 49 ? NCHWC_STEM : NCHWC_NONE;
    if (group != 1 || w->dims[1] % 8 != 0 || taps > 49) return NCHWC_NONE;
    const char *pad = ak__attr_string(n, "auto_pad", "NOTSET");
    if (taps == 1 && attr_all(n, "strides", 1) && attr_all(n, "pads", 0) &&
        (strcmp(pad, "NOTSET") == 0 || strcmp(pad, "VALID") == 0))
        return NCHWC_POINTWISE;
    return NCHWC_DENSE;
}

/* A candidate runs blocked when its X or Y is blocked, and X when it is 1×1 or a pool
 * (reordering its input would cost it as much as it gains); a plain Z it reorders. */
static int nchwc_pays(const ak__ir_node *n, const uint8_t *blocked, int kind) {
    int xb = blocked[n->inputs[0]], yb = blocked[n->outputs[0]];
    return (xb || yb) && (xb || (kind != NCHWC_POINTWISE && kind != NCHWC_MAXPOOL));
}

/* Which values go blocked: those a candidate writes and only candidates read, as X or Z,
 * then, until nothing moves, a candidate that would not pay unblocks every value it
 * touches. */
static void nchwc_choose(optimizer *o, uint8_t *kind, uint8_t *blocked) {
    ak_session *s = o->s;
    for (size_t k = 0; k < s->num_nodes; k++)
        if ((kind[k] = (uint8_t)nchwc_kind(o, &s->nodes[k])))
            blocked[s->nodes[k].node->outputs[0]] = o->uses[s->nodes[k].node->outputs[0]] < (1 << 20);
    for (size_t k = 0; k < s->num_nodes; k++) {
        const ak__ir_node *n = s->nodes[k].node;
        if (!live(&s->nodes[k])) continue;
        for (uint32_t i = 0; i < n->num_inputs; i++)
            if (n->inputs[i] != AK_IR_NONE && !(kind[k] && (i == 0 || i == 3)))
                blocked[n->inputs[i]] = 0;
    }
    for (int moved = 1; moved;) {
        moved = 0;
        for (size_t k = 0; k < s->num_nodes; k++) {
            const ak__ir_node *n = s->nodes[k].node;
            if (!kind[k] || nchwc_pays(n, blocked, kind[k])) continue;
            kind[k] = 0;
            int32_t vs[3] = {n->inputs[0], n->outputs[0], in(n, 3)};
            for (int i = 0; i < 3; i++)
                if (vs[i] != AK_IR_NONE && blocked[vs[i]]) blocked[vs[i]] = 0, moved = 1;
        }
    }
}

/* Conv/FusedConv chains (MobileNet's 1×1 and depthwise layers, ResNet's whole trunk from
 * the stem and its MaxPool on) => NchwcConv (NchwcMaxPool) on blocked values. */
ak_status ak__opt_layout_nchwc(optimizer *o) {
    ak_session *s = o->s;
    if (!ak__param_int(AK_PARAM_CONV_NCHWC)) return AK_OK;
    uint8_t *kind = calloc(s->num_nodes ? s->num_nodes : 1, 1);
    uint8_t *blocked = calloc(s->g->num_values ? s->g->num_values : 1, 1);
    ak_status st = kind && blocked ? AK_OK : AK_FAIL(AK_ERR_NO_MEMORY, "optimizer: out of memory");
    if (st == AK_OK) nchwc_choose(o, kind, blocked);
    for (size_t k = 0; st == AK_OK && k < s->num_nodes; k++) {
        if (!kind[k]) continue;
        const ak__ir_node *n = s->nodes[k].node;
        int pool = kind[k] == NCHWC_MAXPOOL; /* X only, MaxPool's attributes */
        fused_spec f = {"com.accelkit", pool ? "NchwcMaxPool" : "NchwcConv", 1,
                        {in(n, 0), in(n, 1), in(n, 2), in(n, 3)}, pool ? 1 : n->num_inputs,
                        n->outputs[0], n, {{0}}, 0, {0}};
        ak__opt_add_int_attr(&f, "y_blocked", blocked[n->outputs[0]]);
        if (!pool) {
            ak__opt_add_int_attr(&f, "x_blocked", blocked[n->inputs[0]]);
            ak__opt_add_int_attr(&f, "z_blocked", in(n, 3) != AK_IR_NONE && blocked[in(n, 3)]);
        }
        int32_t chain[1] = {(int32_t)k};
        st = ak__opt_emit(o, &f, chain, 1);
    }
    free(kind);
    free(blocked);
    return st;
}
