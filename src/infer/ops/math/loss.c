/* NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (opset 12/13).
 *
 * Scores are [N, C, d1..dk] and targets [N, d1..dk]; each position (n, d) with target t
 * costs -logp[n, t, d] * weight[t], where logp is the input itself (NLL) or its
 * log-softmax over C (SCE, also returned as the optional log_prob output). A position
 * whose target is ignore_index costs 0 and weighs 0. reduction "none" returns the costs,
 * "sum" their sum, "mean" their sum over the total weight (the count without weights).
 * A target outside [0, C) that is not ignored is an error. Computed in double. */
#include <math.h>
#include <string.h>

#include "infer/ops/math/math.h"

typedef enum { RED_NONE, RED_SUM, RED_MEAN } loss_red;

typedef struct {
    const ak__tensor *x, *t, *w;
    uint64_t n, c, d; /* batch, classes, positions per batch item */
    loss_red red;
    int has_ignore;
    int64_t ignore;
} loss_layout;

static ak_status loss_layout_of(const ak__op_ctx *ctx, loss_layout *l) {
    memset(l, 0, sizeof *l);
    AK_CHECK(ak__op_require(ctx, 0, &l->x));
    AK_CHECK(ak__op_require(ctx, 1, &l->t));
    l->w = ak__op_in(ctx, 2);
    const ak__tensor *x = l->x, *t = l->t, *w = l->w;
    if (!ak__elem_is_float(x->type))
        return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED, "input type %s is not supported",
                          ak_elem_type_name(x->type));
    if (t->type != AK_ELEM_I64 && t->type != AK_ELEM_I32)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "target has type %s, expected int64",
                          ak_elem_type_name(t->type));
    if (x->rank < 2 || t->rank != x->rank - 1)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                          "input rank %d and target rank %d: expected [N, C, d...] and [N, d...]",
                          x->rank, t->rank);
    for (int i = 0; i < t->rank; i++)
        if (t->dims[i] != x->dims[i == 0 ? 0 : i + 1])
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                              "target dim %d is %lld, the input has %lld", i,
                              (long long)t->dims[i], (long long)x->dims[i == 0 ? 0 : i + 1]);
    l->n = (uint64_t)x->dims[0];
    l->c = (uint64_t)x->dims[1];
    l->d = l->n ? t->count / l->n : 0;
    if (w && (w->rank != 1 || (uint64_t)w->dims[0] != l->c || w->type != x->type))
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                          "weight must be a %s vector of the %llu classes",
                          ak_elem_type_name(x->type), (unsigned long long)l->c);
    const char *red = ak__attr_string(ctx->node, "reduction", "mean");
    if (strcmp(red, "none") == 0) l->red = RED_NONE;
    else if (strcmp(red, "sum") == 0) l->red = RED_SUM;
    else if (strcmp(red, "mean") == 0) l->red = RED_MEAN;
    else return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "unknown reduction '%s'", red);
    l->has_ignore = ak__attr_has(ctx->node, "ignore_index");
    l->ignore = ak__attr_int(ctx->node, "ignore_index", 0);
    return AK_OK;
}

static ak_status loss_reshape(ak__op_ctx *ctx) {
    loss_layout l;
    AK_CHECK(loss_layout_of(ctx, &l));
    if (l.red == RED_NONE) AK_CHECK(ak__op_set_output(ctx, 0, l.x->type, l.t->rank, l.t->dims));
    else AK_CHECK(ak__op_set_output(ctx, 0, l.x->type, 0, NULL));
    return ak__op_set_output_like(ctx, 1, l.x); /* SCE's log_prob */
}

/* log(sum_c exp(x[n, c, d])) for one position. */
static double log_sum_exp(const loss_layout *l, uint64_t n, uint64_t d) {
    uint64_t base = n * l->c * l->d + d;
    double m = -INFINITY, s = 0.0;
    for (uint64_t c = 0; c < l->c; c++) {
        double v = ak__elem_get(l->x->data, l->x->type, base + c * l->d);
        if (v > m || isnan(v)) m = v;
    }
    if (isinf(m) || isnan(m)) return m;
    for (uint64_t c = 0; c < l->c; c++)
        s += exp(ak__elem_get(l->x->data, l->x->type, base + c * l->d) - m);
    return m + log(s);
}

static ak_status loss_run(ak__op_ctx *ctx, int softmax) {
    loss_layout l;
    AK_CHECK(loss_layout_of(ctx, &l));
    ak__tensor *out = ak__op_out(ctx, 0), *logp = softmax ? ak__op_out(ctx, 1) : NULL;
    ak_elem_type xt = l.x->type;
    double total = 0.0, weight = 0.0;
    for (uint64_t n = 0; n < l.n; n++) {
        for (uint64_t d = 0; d < l.d; d++) {
            uint64_t pos = n * l.d + d, base = n * l.c * l.d + d;
            double lse = softmax ? log_sum_exp(&l, n, d) : 0.0;
            if (logp)
                for (uint64_t c = 0; c < l.c; c++)
                    ak__elem_set(logp->data, xt, base + c * l.d,
                                 ak__elem_get(l.x->data, xt, base + c * l.d) - lse);
            int64_t t = l.t->type == AK_ELEM_I64 ? ((const int64_t *)l.t->data)[pos]
                                                 : ((const int32_t *)l.t->data)[pos];
            double cost = 0.0;
            if (!(l.has_ignore && t == l.ignore)) {
                if (t < 0 || (uint64_t)t >= l.c)
                    return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_ARG,
                                      "target %lld at position %llu is outside [0, %llu)",
                                      (long long)t, (unsigned long long)pos,
                                      (unsigned long long)l.c);
                double w = l.w ? ak__elem_get(l.w->data, xt, (uint64_t)t) : 1.0;
                double lp = ak__elem_get(l.x->data, xt, base + (uint64_t)t * l.d) - lse;
                cost = -lp * w;
                weight += w;
            }
            total += cost;
            if (out && l.red == RED_NONE) ak__elem_set(out->data, xt, pos, cost);
        }
    }
    if (out && l.red != RED_NONE)
        ak__elem_set(out->data, xt, 0, l.red == RED_SUM ? total : total / weight);
    return AK_OK;
}

static ak_status nll_run(ak__op_ctx *ctx) { return loss_run(ctx, 0); }
static ak_status sce_run(ak__op_ctx *ctx) { return loss_run(ctx, 1); }

const ak__op_def ak__op_nll_loss = {"", "NegativeLogLikelihoodLoss", 1, 0, NULL, NULL,
                                    loss_reshape, nll_run};
const ak__op_def ak__op_sce_loss = {"", "SoftmaxCrossEntropyLoss", 1, 0, NULL, NULL,
                                    loss_reshape, sce_run};
