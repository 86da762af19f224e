/* Recurrent networks: RNN, GRU and LSTM (float32; forward, reverse, bidirectional; both
 * layouts; sequence_lens, initial states, peepholes, clip, custom activations).
 *
 * Per direction, the input projection of all time steps is one SGEMM (X · Wᵀ + Wb over
 * seq_length * batch rows); each step then adds H_prev · Rᵀ + Rb (one small SGEMM) and
 * applies the gate equations row by row. A batch entry past its sequence length keeps its
 * state and writes zeros to Y, so a reverse direction starts at its own last step. */
#include <math.h>
#include <string.h>
#include <strings.h>

#include "accelkit/kernels.h"
#include "infer/runtime/op.h"

enum { KIND_RNN, KIND_GRU, KIND_LSTM };

enum {
    ACT_RELU, ACT_TANH, ACT_SIGMOID, ACT_AFFINE, ACT_LEAKY_RELU, ACT_THRESHOLDED_RELU,
    ACT_SCALED_TANH, ACT_HARD_SIGMOID, ACT_ELU, ACT_SOFTSIGN, ACT_SOFTPLUS, ACT_COUNT
};

typedef struct rnn_act {
    int type;
    float alpha, beta;
} rnn_act;

typedef struct rnn_state {
    int kind, gates, nfunc;  /* gates: 1, 3, 4; nfunc activations per direction: 1, 2, 3 */
    int num_dir, reverse;    /* reverse: the only direction runs backwards */
    int layout, lbr, input_forget;
    int64_t hidden;          /* -1 when taken from R */
    float clip;              /* 0: none */
    rnn_act act[2][3];
} rnn_state;

/* ---- activations --------------------------------------------------------------------- */

static const struct {
    const char *name;
    int uses_alpha, uses_beta;
    float alpha, beta;
} act_info[ACT_COUNT] = {
    [ACT_RELU] = {"Relu", 0, 0, 0, 0},
    [ACT_TANH] = {"Tanh", 0, 0, 0, 0},
    [ACT_SIGMOID] = {"Sigmoid", 0, 0, 0, 0},
    [ACT_AFFINE] = {"Affine", 1, 1, 1.0f, 0.0f},
    [ACT_LEAKY_RELU] = {"LeakyRelu", 1, 0, 0.01f, 0},
    [ACT_THRESHOLDED_RELU] = {"ThresholdedRelu", 1, 0, 1.0f, 0},
    [ACT_SCALED_TANH] = {"ScaledTanh", 1, 1, 1.0f, 1.0f},
    [ACT_HARD_SIGMOID] = {"HardSigmoid", 1, 1, 0.2f, 0.5f},
    [ACT_ELU] = {"Elu", 1, 0, 1.0f, 0},
    [ACT_SOFTSIGN] = {"Softsign", 0, 0, 0, 0},
    [ACT_SOFTPLUS] = {"Softplus", 0, 0, 0, 0},
};

static float sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }

/* x[i] = act(x[i]) over n values */
static void act_apply(const rnn_act *a, float *x, size_t n) {
    float al = a->alpha, be = a->beta;
    switch (a->type) {
    case ACT_RELU: for (size_t i = 0; i < n; i++) x[i] = x[i] > 0.0f ? x[i] : 0.0f; break;
    case ACT_TANH: for (size_t i = 0; i < n; i++) x[i] = tanhf(x[i]); break;
    case ACT_SIGMOID: for (size_t i = 0; i < n; i++) x[i] = sigmoidf(x[i]); break;
    case ACT_AFFINE: for (size_t i = 0; i < n; i++) x[i] = al * x[i] + be; break;
    case ACT_LEAKY_RELU:
        for (size_t i = 0; i < n; i++) x[i] = x[i] >= 0.0f ? x[i] : al * x[i];
        break;
    case ACT_THRESHOLDED_RELU:
        for (size_t i = 0; i < n; i++) x[i] = x[i] > al ? x[i] : 0.0f;
        break;
    case ACT_SCALED_TANH: for (size_t i = 0; i < n; i++) x[i] = al * tanhf(be * x[i]); break;
    case ACT_HARD_SIGMOID:
        for (size_t i = 0; i < n; i++) x[i] = fmaxf(0.0f, fminf(1.0f, al * x[i] + be));
        break;
    case ACT_ELU:
        for (size_t i = 0; i < n; i++) x[i] = x[i] >= 0.0f ? x[i] : al * (expf(x[i]) - 1.0f);
        break;
    case ACT_SOFTSIGN: for (size_t i = 0; i < n; i++) x[i] = x[i] / (1.0f + fabsf(x[i])); break;
    default: /* softplus, stable for large x */
        for (size_t i = 0; i < n; i++)
            x[i] = x[i] > 0.0f ? x[i] + log1pf(expf(-x[i])) : log1pf(expf(x[i]));
        break;
    }
}

static void clip_apply(float clip, float *x, size_t n) {
    if (clip <= 0.0f) return;
    for (size_t i = 0; i < n; i++) x[i] = fmaxf(-clip, fminf(clip, x[i]));
}

/* ---- create -------------------------------------------------------------------------- */

static ak_status rnn_parse_acts(const ak__ir_node *node, rnn_state *st) {
    static const int defaults[3][3] = {
        {ACT_TANH}, {ACT_SIGMOID, ACT_TANH}, {ACT_SIGMOID, ACT_TANH, ACT_TANH}};
    const ak__ir_attr *a = ak__ir_node_attr(node, "activations");
    size_t n = a && a->type == AK_ATTR_STRINGS ? a->count : 0;
    size_t want = (size_t)(st->nfunc * st->num_dir);
    if (n != 0 && n != want && n != (size_t)st->nfunc)
        return AK_OP_FAIL(node, AK_ERR_INVALID_MODEL, "activations has %zu entries, expected %zu",
                          n, want);
    const float *alphas, *betas;
    size_t na = ak__attr_floats(node, "activation_alpha", &alphas), ia = 0;
    size_t nb = ak__attr_floats(node, "activation_beta", &betas), ib = 0;
    for (size_t k = 0; k < want; k++) {
        rnn_act *act = &st->act[k / (size_t)st->nfunc][k % (size_t)st->nfunc];
        act->type = defaults[st->kind][k % (size_t)st->nfunc];
        if (n) {
            const ak__ir_bytes *s = &a->u.strings[k % n];
            act->type = -1;
            for (int t = 0; t < ACT_COUNT; t++)
                if (strlen(act_info[t].name) == s->len &&
                    strncasecmp(act_info[t].name, s->data, s->len) == 0)
                    act->type = t;
            if (act->type < 0)
                return AK_OP_FAIL(node, AK_ERR_UNSUPPORTED, "activation '%.*s'", (int)s->len,
                                  s->data);
        }
        /* alphas and betas go to the activations that use them, in order */
        act->alpha = act_info[act->type].alpha;
        act->beta = act_info[act->type].beta;
        if (act_info[act->type].uses_alpha && ia < na) act->alpha = alphas[ia++];
        if (act_info[act->type].uses_beta && ib < nb) act->beta = betas[ib++];
    }
    return AK_OK;
}

static ak_status rnn_create_kind(const ak__ir_node *node, int kind, void **state) {
    rnn_state *st;
    AK_CHECK(ak_alloc(sizeof *st, (void **)&st));
    memset(st, 0, sizeof *st);
    st->kind = kind;
    st->gates = kind == KIND_RNN ? 1 : kind == KIND_GRU ? 3 : 4;
    st->nfunc = kind == KIND_RNN ? 1 : kind == KIND_GRU ? 2 : 3;
    st->hidden = ak__attr_int(node, "hidden_size", -1);
    st->layout = (int)ak__attr_int(node, "layout", 0);
    st->lbr = ak__attr_int(node, "linear_before_reset", 0) != 0;
    st->input_forget = ak__attr_int(node, "input_forget", 0) != 0;
    st->clip = ak__ir_node_attr(node, "clip") ? ak__attr_float(node, "clip", 0.0f) : 0.0f;
    const char *dir = ak__attr_string(node, "direction", "forward");
    ak_status s = AK_OK;
    st->num_dir = strcmp(dir, "bidirectional") == 0 ? 2 : 1;
    st->reverse = strcmp(dir, "reverse") == 0;
    if (st->num_dir == 1 && !st->reverse && strcmp(dir, "forward") != 0)
        s = AK_OP_FAIL(node, AK_ERR_INVALID_MODEL, "unknown direction '%s'", dir);
    else if (st->layout != 0 && st->layout != 1)
        s = AK_OP_FAIL(node, AK_ERR_INVALID_MODEL, "layout must be 0 or 1");
    else if (ak__ir_node_attr(node, "clip") && !(st->clip > 0.0f))
        s = AK_OP_FAIL(node, AK_ERR_INVALID_MODEL, "clip must be positive");
    else if (st->hidden == 0 || st->hidden < -1)
        s = AK_OP_FAIL(node, AK_ERR_INVALID_MODEL, "hidden_size must be positive");
    else
        s = rnn_parse_acts(node, st);
    if (s != AK_OK) {
        ak_free(st);
        return s;
    }
    *state = st;
    return AK_OK;
}

static ak_status rnn_create(const ak__ir_node *node, const ak__tensor *const *consts,
                            void **state) {
    return rnn_create_kind(node, KIND_RNN, state);
}
static ak_status gru_create(const ak__ir_node *node, const ak__tensor *const *consts,
                            void **state) {
    return rnn_create_kind(node, KIND_GRU, state);
}
static ak_status lstm_create(const ak__ir_node *node, const ak__tensor *const *consts,
                             void **state) {
    return rnn_create_kind(node, KIND_LSTM, state);
}
static void rnn_destroy(void *state) { ak_free(state); }

/* ---- shapes -------------------------------------------------------------------------- */

typedef struct rnn_dims {
    int64_t seq, batch, in, hidden;
} rnn_dims;

static ak_status rnn_check_shape(const ak__op_ctx *ctx, uint32_t i, const ak__tensor *t,
                                 int rank, const int64_t *dims) {
    int ok = t->rank == rank && t->type == AK_ELEM_F32;
    for (int d = 0; ok && d < rank; d++) ok = t->dims[d] == dims[d];
    if (ok) return AK_OK;
    char buf[96];
    return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "input %u is %s, expected float32 of rank %d"
                      " [%lld,%lld%s]", i, ak__tensor_describe(t, buf, sizeof buf), rank,
                      (long long)dims[0], (long long)dims[1], rank > 2 ? ",..." : "");
}

/* Checks every input against X, W and R; fills the dimensions. */
static ak_status rnn_check(const ak__op_ctx *ctx, const rnn_state *st, rnn_dims *rd) {
    const ak__tensor *x, *w, *r;
    AK_CHECK(ak__op_require(ctx, 0, &x));
    AK_CHECK(ak__op_require(ctx, 1, &w));
    AK_CHECK(ak__op_require(ctx, 2, &r));
    if (x->type != AK_ELEM_F32)
        return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED, "type %s (float32 only)",
                          ak_elem_type_name(x->type));
    if (x->rank != 3 || r->rank != 3)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "X and R must have rank 3");
    rd->seq = x->dims[st->layout ? 1 : 0];
    rd->batch = x->dims[st->layout ? 0 : 1];
    rd->in = x->dims[2];
    rd->hidden = st->hidden > 0 ? st->hidden : r->dims[2];
    int64_t nd = st->num_dir, gh = st->gates * rd->hidden, h = rd->hidden, b = rd->batch;
    AK_CHECK(rnn_check_shape(ctx, 1, w, 3, (int64_t[]){nd, gh, rd->in}));
    AK_CHECK(rnn_check_shape(ctx, 2, r, 3, (int64_t[]){nd, gh, h}));
    const ak__tensor *t;
    if ((t = ak__op_in(ctx, 3))) AK_CHECK(rnn_check_shape(ctx, 3, t, 2, (int64_t[]){nd, 2 * gh}));
    if ((t = ak__op_in(ctx, 4)) && (t->rank != 1 || t->dims[0] != b || t->type != AK_ELEM_I32))
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "sequence_lens must be int32 [%lld]",
                          (long long)b);
    int64_t state_dims[3] = {nd, b, h};
    if (st->layout) state_dims[0] = b, state_dims[1] = nd;
    if ((t = ak__op_in(ctx, 5))) AK_CHECK(rnn_check_shape(ctx, 5, t, 3, state_dims));
    if (st->kind == KIND_LSTM) {
        if ((t = ak__op_in(ctx, 6))) AK_CHECK(rnn_check_shape(ctx, 6, t, 3, state_dims));
        if ((t = ak__op_in(ctx, 7)))
            AK_CHECK(rnn_check_shape(ctx, 7, t, 2, (int64_t[]){nd, 3 * h}));
    }
    return AK_OK;
}

static size_t rnn_floats(const rnn_state *st, const rnn_dims *rd) {
    size_t gh = (size_t)(st->gates * rd->hidden), b = (size_t)rd->batch, h = (size_t)rd->hidden;
    /* XW, recurrent gates, H, C, r*H and its projection */
    return (size_t)rd->seq * b * gh + b * gh + 4 * b * h + 6 * 16;
}

static ak_status rnn_reshape(ak__op_ctx *ctx) {
    const rnn_state *st = ctx->state;
    rnn_dims rd;
    AK_CHECK(rnn_check(ctx, st, &rd));
    int64_t nd = st->num_dir;
    int64_t y[4] = {rd.seq, nd, rd.batch, rd.hidden}, yh[3] = {nd, rd.batch, rd.hidden};
    if (st->layout) {
        y[0] = rd.batch, y[1] = rd.seq, y[2] = nd;
        yh[0] = rd.batch, yh[1] = nd;
    }
    AK_CHECK(ak__op_set_output(ctx, 0, AK_ELEM_F32, 4, y));
    AK_CHECK(ak__op_set_output(ctx, 1, AK_ELEM_F32, 3, yh));
    if (st->kind == KIND_LSTM) AK_CHECK(ak__op_set_output(ctx, 2, AK_ELEM_F32, 3, yh));
    double bytes = ((double)rd.seq * (double)rd.batch + (double)rd.batch) * (double)st->gates *
                   (double)rd.hidden * 4.0;
    if (bytes > 1e15)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "sizes are too large");
    ctx->workspace_bytes = rnn_floats(st, &rd) * sizeof(float);
    return AK_OK;
}

/* ---- run ----------------------------------------------------------------------------- */

typedef struct rnn_run_ctx {
    const rnn_state *st;
    rnn_dims rd;
    int dir;          /* 0 or 1 */
    const float *w, *r, *wb, *rb, *p; /* this direction's weights (wb, rb, p may be NULL) */
    const int32_t *lens;
    float *xw, *gates, *h, *c, *rh, *rhp;
    const rnn_act *act;
} rnn_run_ctx;

/* Offset of Y[t, dir, b, 0] (or its layout-1 place) in floats. */
static size_t y_off(const rnn_run_ctx *k, int64_t t, int64_t b) {
    int64_t nd = k->st->num_dir, H = k->rd.hidden;
    if (k->st->layout) return (size_t)(((b * k->rd.seq + t) * nd + k->dir) * H);
    return (size_t)(((t * nd + k->dir) * k->rd.batch + b) * H);
}

static size_t state_off(const rnn_run_ctx *k, int64_t b) {
    int64_t nd = k->st->num_dir, H = k->rd.hidden;
    return (size_t)((k->st->layout ? b * nd + k->dir : k->dir * k->rd.batch + b) * H);
}

/* Row of XW for time t, batch entry b (X's own row order). */
static const float *xw_row(const rnn_run_ctx *k, int64_t t, int64_t b) {
    int64_t row = k->st->layout ? b * k->rd.seq + t : t * k->rd.batch + b;
    return k->xw + (size_t)row * (size_t)(k->st->gates * k->rd.hidden);
}

static void step_rnn(const rnn_run_ctx *k, int64_t t, int64_t b, float *g) {
    size_t H = (size_t)k->rd.hidden;
    const float *x = xw_row(k, t, b);
    for (size_t j = 0; j < H; j++) g[j] += x[j];
    clip_apply(k->st->clip, g, H);
    act_apply(&k->act[0], g, H);
    memcpy(k->h + (size_t)b * H, g, H * sizeof(float));
}

static void step_lstm(const rnn_run_ctx *k, int64_t t, int64_t b, float *g) {
    size_t H = (size_t)k->rd.hidden;
    const float *x = xw_row(k, t, b);
    float *h = k->h + (size_t)b * H, *c = k->c + (size_t)b * H;
    float *gi = g, *go = g + H, *gf = g + 2 * H, *gc = g + 3 * H;
    for (size_t j = 0; j < 4 * H; j++) g[j] += x[j];
    if (k->p)
        for (size_t j = 0; j < H; j++) gi[j] += k->p[j] * c[j], gf[j] += k->p[2 * H + j] * c[j];
    clip_apply(k->st->clip, gi, H); /* o is clipped once its peephole term is known */
    clip_apply(k->st->clip, gf, 2 * H);
    act_apply(&k->act[0], gi, H);
    act_apply(&k->act[0], gf, H);
    act_apply(&k->act[1], gc, H);
    if (k->st->input_forget)
        for (size_t j = 0; j < H; j++) gf[j] = 1.0f - gi[j];
    for (size_t j = 0; j < H; j++) c[j] = gf[j] * c[j] + gi[j] * gc[j];
    if (k->p)
        for (size_t j = 0; j < H; j++) go[j] += k->p[H + j] * c[j];
    clip_apply(k->st->clip, go, H);
    act_apply(&k->act[0], go, H);
    memcpy(gc, c, H * sizeof(float)); /* h(C) without touching the cell state */
    act_apply(&k->act[2], gc, H);
    for (size_t j = 0; j < H; j++) h[j] = go[j] * gc[j];
}

/* GRU gates z and r (first 2H of g, already holding H_prev·Rᵀ + Rb). */
static void step_gru_zr(const rnn_run_ctx *k, int64_t t, int64_t b, float *g) {
    size_t H = (size_t)k->rd.hidden;
    const float *x = xw_row(k, t, b);
    for (size_t j = 0; j < 2 * H; j++) g[j] += x[j];
    clip_apply(k->st->clip, g, 2 * H);
    act_apply(&k->act[0], g, 2 * H);
}

/* GRU candidate and new state; hr is (r ⊙ H_prev)·Rhᵀ + Rbh, or with linear_before_reset
 * r ⊙ (H_prev·Rhᵀ + Rbh). */
static void step_gru_h(const rnn_run_ctx *k, int64_t t, int64_t b, float *g, const float *hr) {
    size_t H = (size_t)k->rd.hidden;
    const float *x = xw_row(k, t, b) + 2 * H;
    float *z = g, *hc = g + 2 * H, *h = k->h + (size_t)b * H;
    for (size_t j = 0; j < H; j++) hc[j] = x[j] + hr[j];
    clip_apply(k->st->clip, hc, H);
    act_apply(&k->act[1], hc, H);
    for (size_t j = 0; j < H; j++) h[j] = (1.0f - z[j]) * hc[j] + z[j] * h[j];
}

static int active(const rnn_run_ctx *k, int64_t t, int64_t b) {
    return !k->lens || t < (int64_t)k->lens[b];
}

static void add_bias(float *g, const float *bias, size_t rows, size_t cols) {
    if (!bias) return;
    for (size_t i = 0; i < rows; i++)
        for (size_t j = 0; j < cols; j++) g[i * cols + j] += bias[j];
}

/* One time step of every batch entry. */
static ak_status rnn_step(ak__op_ctx *ctx, rnn_run_ctx *k, int64_t t) {
    const rnn_state *st = k->st;
    size_t B = (size_t)k->rd.batch, H = (size_t)k->rd.hidden, gh = (size_t)st->gates * H;
    int gru_split = st->kind == KIND_GRU && !st->lbr; /* r gates H before Rh */
    size_t cols = gru_split ? 2 * H : gh;
    AK_CHECK(ak_sgemm(AK_NO_TRANS, AK_TRANS, B, cols, H, 1.0f, k->h, H, k->r, H, 0.0f, k->gates,
                      gh, ctx->pool));
    for (size_t b = 0; b < B; b++)
        if (k->rb) add_bias(k->gates + b * gh, k->rb, 1, cols);
    for (size_t b = 0; b < B; b++) {
        if (!active(k, t, (int64_t)b)) continue;
        float *g = k->gates + b * gh;
        if (st->kind == KIND_RNN) step_rnn(k, t, (int64_t)b, g);
        else if (st->kind == KIND_LSTM) step_lstm(k, t, (int64_t)b, g);
        else step_gru_zr(k, t, (int64_t)b, g);
    }
    if (st->kind == KIND_GRU) {
        const float *rbh = k->rb ? k->rb + 2 * H : NULL;
        if (gru_split) {
            for (size_t b = 0; b < B; b++)
                for (size_t j = 0; j < H; j++)
                    k->rh[b * H + j] = k->gates[b * gh + H + j] * k->h[b * H + j];
            AK_CHECK(ak_sgemm(AK_NO_TRANS, AK_TRANS, B, H, H, 1.0f, k->rh, H, k->r + 2 * H * H, H,
                              0.0f, k->rhp, H, ctx->pool));
            add_bias(k->rhp, rbh, B, H);
        } else {
            for (size_t b = 0; b < B; b++)
                for (size_t j = 0; j < H; j++)
                    k->rhp[b * H + j] = k->gates[b * gh + H + j] * k->gates[b * gh + 2 * H + j];
        }
        for (size_t b = 0; b < B; b++)
            if (active(k, t, (int64_t)b)) step_gru_h(k, t, (int64_t)b, k->gates + b * gh,
                                                     k->rhp + b * H);
    }
    float *y = ak__op_out(ctx, 0) ? ctx->outputs[0]->data : NULL;
    if (y)
        for (size_t b = 0; b < B; b++) {
            float *dst = y + y_off(k, t, (int64_t)b);
            if (active(k, t, (int64_t)b)) memcpy(dst, k->h + b * H, H * sizeof(float));
            else memset(dst, 0, H * sizeof(float));
        }
    return AK_OK;
}

/* Initial state of this direction from input `i` (zeros when absent) into dst [B, H]. */
static void load_state(const ak__op_ctx *ctx, const rnn_run_ctx *k, uint32_t i, float *dst) {
    const ak__tensor *t = ak__op_in(ctx, i);
    size_t H = (size_t)k->rd.hidden;
    for (int64_t b = 0; b < k->rd.batch; b++) {
        float *d = dst + (size_t)b * H;
        if (t) memcpy(d, (const float *)t->data + state_off(k, b), H * sizeof(float));
        else memset(d, 0, H * sizeof(float));
    }
}

static void store_state(ak__op_ctx *ctx, const rnn_run_ctx *k, uint32_t i, const float *src) {
    ak__tensor *t = ak__op_out(ctx, i);
    size_t H = (size_t)k->rd.hidden;
    if (!t) return;
    for (int64_t b = 0; b < k->rd.batch; b++)
        memcpy((float *)t->data + state_off(k, b), src + (size_t)b * H, H * sizeof(float));
}

static ak_status rnn_direction(ak__op_ctx *ctx, rnn_run_ctx *k) {
    const rnn_state *st = k->st;
    size_t gh = (size_t)st->gates * (size_t)k->rd.hidden, rows = (size_t)(k->rd.seq * k->rd.batch);
    const float *x = ctx->inputs[0]->data;
    AK_CHECK(ak_sgemm(AK_NO_TRANS, AK_TRANS, rows, gh, (size_t)k->rd.in, 1.0f, x,
                      (size_t)k->rd.in, k->w, (size_t)k->rd.in, 0.0f, k->xw, gh, ctx->pool));
    add_bias(k->xw, k->wb, rows, gh);
    load_state(ctx, k, 5, k->h);
    if (st->kind == KIND_LSTM) load_state(ctx, k, 6, k->c);
    int backwards = st->reverse || k->dir == 1;
    for (int64_t s = 0; s < k->rd.seq; s++)
        AK_CHECK(rnn_step(ctx, k, backwards ? k->rd.seq - 1 - s : s));
    store_state(ctx, k, 1, k->h);
    if (st->kind == KIND_LSTM) store_state(ctx, k, 2, k->c);
    return AK_OK;
}

static ak_status rnn_run(ak__op_ctx *ctx) {
    const rnn_state *st = ctx->state;
    rnn_run_ctx k = {.st = st};
    AK_CHECK(rnn_check(ctx, st, &k.rd));
    size_t B = (size_t)k.rd.batch, H = (size_t)k.rd.hidden, gh = (size_t)st->gates * H;
    const ak__tensor *lens = ak__op_in(ctx, 4), *bias = ak__op_in(ctx, 3), *peep = NULL;
    if (lens) {
        k.lens = lens->data;
        for (size_t b = 0; b < B; b++)
            if (k.lens[b] < 0 || k.lens[b] > k.rd.seq)
                return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_ARG,
                                  "sequence_lens[%zu] = %d is outside [0, %lld]", b,
                                  (int)k.lens[b], (long long)k.rd.seq);
    }
    if (st->kind == KIND_LSTM) peep = ak__op_in(ctx, 7);
    float *ws = ctx->workspace;
    k.xw = ws;
    k.gates = k.xw + (size_t)k.rd.seq * B * gh + 16;
    k.h = k.gates + B * gh + 16;
    k.c = k.h + B * H + 16;
    k.rh = k.c + B * H + 16;
    k.rhp = k.rh + B * H + 16;
    for (int d = 0; d < st->num_dir; d++) {
        k.dir = d;
        k.act = st->act[d];
        k.w = (const float *)ctx->inputs[1]->data + (size_t)d * gh * (size_t)k.rd.in;
        k.r = (const float *)ctx->inputs[2]->data + (size_t)d * gh * H;
        k.wb = bias ? (const float *)bias->data + (size_t)d * 2 * gh : NULL;
        k.rb = bias ? k.wb + gh : NULL;
        k.p = peep ? (const float *)peep->data + (size_t)d * 3 * H : NULL;
        AK_CHECK(rnn_direction(ctx, &k));
    }
    return AK_OK;
}

const ak__op_def ak__op_rnn = {"", "RNN", 7, 0, rnn_create, rnn_destroy, rnn_reshape, rnn_run};
const ak__op_def ak__op_gru = {"", "GRU", 7, 0, gru_create, rnn_destroy, rnn_reshape, rnn_run};
const ak__op_def ak__op_lstm = {"", "LSTM", 7, 0, lstm_create, rnn_destroy, rnn_reshape,
                                rnn_run};

/* The rnn operator family: the table registry.c searches. */
const ak__op_def *const ak__ops_rnn[] = {&ak__op_rnn, &ak__op_gru, &ak__op_lstm, NULL};
