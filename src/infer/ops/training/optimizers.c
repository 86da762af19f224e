/* The optimizer operators of the ai.onnx.preview.training domain: Adagrad, Adam and
 * Momentum (standard and Nesterov). Each updates n tensors at once: the inputs are the
 * learning rate R, the update count T, then X_1..X_n, G_1..G_n and the per-tensor state
 * (Adagrad: H; Momentum: V; Adam: V then H); the outputs are X_new_1..X_new_n followed by
 * the new state in the same order. The update rules follow the operator specifications
 * word for word, element by element in double precision (float32 and float64 tensors). */
#include <math.h>
#include <string.h>

#include "infer/runtime/op.h"

enum { OPT_ADAGRAD, OPT_ADAM, OPT_MOMENTUM };

typedef struct opt_info {
    const char *name;
    int n_state;                /* state tensors per optimized tensor */
    const char *const *attrs;   /* attributes the operator knows */
} opt_info;

static const char *const adagrad_attrs[] = {"decay_factor", "epsilon", "norm_coefficient", NULL};
static const char *const adam_attrs[] = {"alpha", "beta", "epsilon", "norm_coefficient",
                                         "norm_coefficient_post", NULL};
static const char *const momentum_attrs[] = {"alpha", "beta", "mode", "norm_coefficient", NULL};

static const opt_info infos[] = {
    [OPT_ADAGRAD] = {"Adagrad", 1, adagrad_attrs},
    [OPT_ADAM] = {"Adam", 2, adam_attrs},
    [OPT_MOMENTUM] = {"Momentum", 1, momentum_attrs},
};

/* The attributes of one node, with the specifications' defaults. */
typedef struct opt_attrs {
    double decay_factor, epsilon, norm_coefficient, norm_coefficient_post, alpha, beta;
    int nesterov;
} opt_attrs;

static ak_status read_attrs(const ak__ir_node *node, int kind, opt_attrs *a) {
    for (uint32_t i = 0; i < node->num_attrs; i++) {
        const char *const *known = infos[kind].attrs;
        while (*known && strcmp(*known, node->attrs[i].name) != 0) known++;
        if (!*known)
            return AK_OP_FAIL(node, AK_ERR_UNSUPPORTED, "attribute '%s' is not supported",
                              node->attrs[i].name);
    }
    a->decay_factor = ak__attr_float(node, "decay_factor", 0.0f);
    a->epsilon = ak__attr_float(node, "epsilon", 1e-6f);
    a->norm_coefficient = ak__attr_float(node, "norm_coefficient", 0.0f);
    a->norm_coefficient_post = ak__attr_float(node, "norm_coefficient_post", 0.0f);
    a->alpha = ak__attr_float(node, "alpha", kind == OPT_ADAM ? 0.9f : 0.0f);
    a->beta = ak__attr_float(node, "beta", kind == OPT_ADAM ? 0.999f : 0.0f);
    a->nesterov = 0;
    if (kind == OPT_MOMENTUM) {
        const char *need[] = {"alpha", "beta", "mode", "norm_coefficient"};
        for (size_t i = 0; i < 4; i++)
            if (!ak__attr_has(node, need[i]))
                return AK_OP_FAIL(node, AK_ERR_INVALID_MODEL, "attribute '%s' is required",
                                  need[i]);
        const char *mode = ak__attr_string(node, "mode", "");
        if (strcmp(mode, "nesterov") == 0) a->nesterov = 1;
        else if (strcmp(mode, "standard") != 0)
            return AK_OP_FAIL(node, AK_ERR_UNSUPPORTED, "mode '%s' is not supported (standard, "
                              "nesterov)", mode);
    }
    return AK_OK;
}

/* Number of optimized tensors, from the input count. */
static ak_status group_count(const ak__op_ctx *ctx, int kind, uint32_t *n) {
    uint32_t per = 2 + (uint32_t)infos[kind].n_state;
    if (ctx->num_inputs < 2 + per || (ctx->num_inputs - 2) % per)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "%u inputs: expected R, T and %u "
                          "tensors per optimized tensor", ctx->num_inputs, per);
    *n = (ctx->num_inputs - 2) / per;
    if (ctx->num_outputs > *n * (1 + (uint32_t)infos[kind].n_state))
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "%u outputs for %u optimized tensors",
                          ctx->num_outputs, *n);
    return AK_OK;
}

static int same_dims(const ak__tensor *a, const ak__tensor *b) {
    if (a->rank != b->rank) return 0;
    for (int i = 0; i < a->rank; i++)
        if (a->dims[i] != b->dims[i]) return 0;
    return 1;
}

static ak_status opt_reshape(ak__op_ctx *ctx, int kind) {
    opt_attrs a;
    uint32_t n;
    AK_CHECK(read_attrs(ctx->node, kind, &a));
    AK_CHECK(group_count(ctx, kind, &n));
    const ak__tensor *r, *t;
    AK_CHECK(ak__op_require(ctx, 0, &r));
    AK_CHECK(ak__op_require(ctx, 1, &t));
    if (r->count != 1 || (r->type != AK_ELEM_F32 && r->type != AK_ELEM_F64))
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "R must be one float32 or float64");
    AK_CHECK(ak__op_check_type(ctx, 1, t, AK_ELEM_I64));
    if (t->count != 1) return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "T must be one int64");
    uint32_t per = 2 + (uint32_t)infos[kind].n_state;
    for (uint32_t i = 0; i < n; i++) {
        const ak__tensor *x;
        AK_CHECK(ak__op_require(ctx, 2 + i, &x));
        if (x->type != AK_ELEM_F32 && x->type != AK_ELEM_F64)
            return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED, "X_%u is %s (float32 and float64 "
                              "are supported)", i + 1, ak_elem_type_name(x->type));
        for (uint32_t k = 1; k < per; k++) {
            uint32_t in = 2 + k * n + i;
            const ak__tensor *o;
            AK_CHECK(ak__op_require(ctx, in, &o));
            AK_CHECK(ak__op_check_type(ctx, in, o, x->type));
            if (!same_dims(o, x))
                return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "input %u's shape differs "
                                  "from X_%u's", in, i + 1);
        }
        for (uint32_t k = 0; k < per - 1; k++) AK_CHECK(ak__op_set_output_like(ctx, k * n + i, x));
    }
    return AK_OK;
}

/* One element of an update: x, g and state s[] in, the new x and s[] out. */
static double update(int kind, const opt_attrs *a, double r, int64_t t, double x, double g,
                     double *s) {
    double g_reg = a->norm_coefficient * x + g;
    switch (kind) {
    case OPT_ADAGRAD: {
        double r_adj = r / (1.0 + (double)t * a->decay_factor);
        s[0] = s[0] + g_reg * g_reg;
        return x - r_adj * g_reg / (sqrt(s[0]) + a->epsilon);
    }
    case OPT_ADAM: {
        s[0] = a->alpha * s[0] + (1.0 - a->alpha) * g_reg;
        s[1] = a->beta * s[1] + (1.0 - a->beta) * (g_reg * g_reg);
        double h_sqrt = sqrt(s[1]) + a->epsilon;
        double r_adj = t > 0 ? r * sqrt(1.0 - pow(a->beta, (double)t)) /
                                   (1.0 - pow(a->alpha, (double)t))
                             : r;
        double x_new = x - r_adj * (s[0] / h_sqrt);
        return (1.0 - a->norm_coefficient_post) * x_new;
    }
    default: {
        double beta_adj = t > 0 ? a->beta : 1.0;
        s[0] = a->alpha * s[0] + beta_adj * g_reg;
        return a->nesterov ? x - r * (g_reg + a->alpha * s[0]) : x - r * s[0];
    }
    }
}

static ak_status opt_run(ak__op_ctx *ctx, int kind) {
    opt_attrs a;
    uint32_t n;
    AK_CHECK(read_attrs(ctx->node, kind, &a));
    AK_CHECK(group_count(ctx, kind, &n));
    double r = ak__elem_get(ctx->inputs[0]->data, ctx->inputs[0]->type, 0);
    int64_t t = *(const int64_t *)ctx->inputs[1]->data;
    int ns = infos[kind].n_state;
    for (uint32_t i = 0; i < n; i++) {
        const ak__tensor *x = ctx->inputs[2 + i], *g = ctx->inputs[2 + n + i];
        for (uint64_t e = 0; e < x->count; e++) {
            double s[2];
            for (int k = 0; k < ns; k++) {
                const ak__tensor *st = ctx->inputs[2 + (uint32_t)(2 + k) * n + i];
                s[k] = ak__elem_get(st->data, st->type, e);
            }
            double x_new = update(kind, &a, r, t, ak__elem_get(x->data, x->type, e),
                                  ak__elem_get(g->data, g->type, e), s);
            ak__tensor *out = ak__op_out(ctx, i);
            if (out) ak__elem_set(out->data, out->type, e, x_new);
            for (int k = 0; k < ns; k++) {
                out = ak__op_out(ctx, (uint32_t)(1 + k) * n + i);
                if (out) ak__elem_set(out->data, out->type, e, s[k]);
            }
        }
    }
    return AK_OK;
}

#define OPT_OP(sym, kind, name)                                                             \
    static ak_status sym##_reshape(ak__op_ctx *ctx) { return opt_reshape(ctx, kind); }     \
    static ak_status sym##_run(ak__op_ctx *ctx) { return opt_run(ctx, kind); }             \
    static const ak__op_def sym = {"ai.onnx.preview.training", name, 1, 0, NULL, NULL,      \
                                   sym##_reshape, sym##_run};
OPT_OP(op_adagrad, OPT_ADAGRAD, "Adagrad")
OPT_OP(op_adam, OPT_ADAM, "Adam")
OPT_OP(op_momentum, OPT_MOMENTUM, "Momentum")

const ak__op_def *const ak__ops_training[] = {&op_adagrad, &op_adam, &op_momentum, NULL};
