/* Einsum: Einstein summation over any number of inputs.
 *
 * The equation is parsed once in create; reshape and run resolve it against the input
 * shapes (ellipsis dimensions right-aligned and broadcast). Every input is then read
 * through one stride per label: a label repeated within a term sums its strides (a
 * diagonal), a broadcast dimension has stride 0. The general path loops over output and
 * summed labels in double (or int64 for integer types, exactly). Two float32 operands
 * without diagonals map onto batched SGEMM: batch labels (both inputs and the output), M
 * (first input and output), N (second input and output) and K (both inputs, summed) —
 * "bij,bjk->bik" and "bhqd,bhkd->bhqk" need no copies at all. */
#include <string.h>

#include "accelkit/kernels.h"
#include "infer/ops/math/math.h"
#include "infer/runtime/op.h"

#define ES_MAX_INPUTS 16
#define ES_LETTERS 52
#define ES_MAX_LABELS (ES_LETTERS + AK_IR_MAX_RANK)
#define ES_MAX_TERM (AK_IR_MAX_RANK + 1)
#define ES_ELLIPSIS (-1)

typedef struct es_term {
    int len;
    int8_t lab[ES_MAX_TERM]; /* letter ids 0..51, ES_ELLIPSIS once at most */
} es_term;

typedef struct es_state {
    int nin, explicit_out;
    es_term in[ES_MAX_INPUTS], out;
} es_state;

/* The equation resolved against the input shapes. Labels 52.. are ellipsis dims. */
typedef struct es_plan {
    int64_t dim[ES_MAX_LABELS];
    int used[ES_MAX_LABELS];     /* occurrences over all inputs */
    int nout, nsum;
    int out[ES_MAX_LABELS], sum[ES_MAX_LABELS];
    int64_t stride[ES_MAX_INPUTS][ES_MAX_LABELS];
    int present[ES_MAX_INPUTS][ES_MAX_LABELS]; /* times the label occurs in the input */
    int broadcast;                             /* some input broadcasts a size-1 dim */
    int ell_rank;
} es_plan;

/* ---- parsing ------------------------------------------------------------------------- */

static int es_letter(char c) {
    if (c >= 'a' && c <= 'z') return c - 'a' + 26; /* uppercase sorts first, as in numpy */
    if (c >= 'A' && c <= 'Z') return c - 'A';
    return -1;
}

/* Parses one term from s[0..n) (spaces already removed). */
static ak_status es_parse_term(const ak__ir_node *node, const char *s, size_t n, es_term *t) {
    t->len = 0;
    int ell = 0;
    for (size_t i = 0; i < n;) {
        if (t->len >= ES_MAX_TERM)
            return AK_OP_FAIL(node, AK_ERR_INVALID_MODEL, "equation term is too long");
        if (s[i] == '.') {
            if (i + 3 > n || s[i + 1] != '.' || s[i + 2] != '.' || ell++)
                return AK_OP_FAIL(node, AK_ERR_INVALID_MODEL, "bad ellipsis in equation");
            t->lab[t->len++] = ES_ELLIPSIS;
            i += 3;
            continue;
        }
        int l = es_letter(s[i]);
        if (l < 0)
            return AK_OP_FAIL(node, AK_ERR_INVALID_MODEL, "bad character '%c' in equation",
                              s[i]);
        t->lab[t->len++] = (int8_t)l;
        i++;
    }
    return AK_OK;
}

static ak_status es_parse(const ak__ir_node *node, const char *eq, es_state *st) {
    char buf[512];
    size_t n = 0;
    for (const char *p = eq; *p; p++) {
        if (*p == ' ' || *p == '\t') continue;
        if (n + 1 >= sizeof buf)
            return AK_OP_FAIL(node, AK_ERR_INVALID_MODEL, "equation is too long");
        buf[n++] = *p;
    }
    buf[n] = '\0';
    const char *arrow = strstr(buf, "->");
    size_t lhs_len = arrow ? (size_t)(arrow - buf) : n;
    st->nin = 0;
    for (size_t start = 0;;) {
        size_t end = start;
        while (end < lhs_len && buf[end] != ',') end++;
        if (st->nin >= ES_MAX_INPUTS)
            return AK_OP_FAIL(node, AK_ERR_UNSUPPORTED, "more than %d operands",
                              ES_MAX_INPUTS);
        AK_CHECK(es_parse_term(node, buf + start, end - start, &st->in[st->nin++]));
        if (end >= lhs_len) break;
        start = end + 1;
    }
    st->explicit_out = arrow != NULL;
    if (arrow) {
        AK_CHECK(es_parse_term(node, arrow + 2, n - lhs_len - 2, &st->out));
        unsigned char seen[ES_LETTERS + 1] = {0};
        for (int i = 0; i < st->out.len; i++) {
            int l = st->out.lab[i] < 0 ? ES_LETTERS : st->out.lab[i];
            if (seen[l]++)
                return AK_OP_FAIL(node, AK_ERR_INVALID_MODEL,
                                  "output label repeats in equation '%s'", eq);
        }
    }
    return AK_OK;
}

static ak_status es_create(const ak__ir_node *node, const ak__tensor *const *consts,
                           void **state) {
    const char *eq = ak__attr_string(node, "equation", NULL);
    if (!eq) return AK_OP_FAIL(node, AK_ERR_INVALID_MODEL, "attribute equation is required");
    es_state *st;
    AK_CHECK(ak_alloc(sizeof *st, (void **)&st));
    memset(st, 0, sizeof *st);
    ak_status s = es_parse(node, eq, st);
    if (s == AK_OK && (uint32_t)st->nin != node->num_inputs)
        s = AK_OP_FAIL(node, AK_ERR_INVALID_MODEL, "equation has %d operands, node has %u inputs",
                       st->nin, node->num_inputs);
    if (s != AK_OK) {
        ak_free(st);
        return s;
    }
    *state = st;
    return AK_OK;
}

static void es_destroy(void *state) { ak_free(state); }

/* ---- resolving against shapes -------------------------------------------------------- */

/* Records dimension `dim` of label l for input i at stride `stride`. */
static ak_status es_bind(const ak__op_ctx *ctx, es_plan *p, int i, int l, int64_t dim,
                         int64_t stride) {
    if (p->dim[l] < 0) {
        p->dim[l] = dim;
    } else if (dim != p->dim[l]) {
        /* only ellipsis dims broadcast; a size-1 one was bound with stride 0 */
        if (l < ES_LETTERS || (dim != 1 && p->dim[l] != 1))
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                              "label dimension mismatch: %lld vs %lld", (long long)dim,
                              (long long)p->dim[l]);
        p->broadcast = 1;
        if (dim != 1) p->dim[l] = dim;
    }
    p->stride[i][l] += stride;
    p->present[i][l]++;
    p->used[l]++;
    return AK_OK;
}

static ak_status es_bind_input(const ak__op_ctx *ctx, const es_state *st, es_plan *p, int i) {
    const ak__tensor *t = ctx->inputs[i];
    const es_term *term = &st->in[i];
    int has_ell = 0;
    for (int k = 0; k < term->len; k++) has_ell |= term->lab[k] == ES_ELLIPSIS;
    int nell = t->rank - (term->len - has_ell);
    if (nell < 0 || (!has_ell && nell != 0))
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                          "input %d has rank %d, its term has %d labels", i, t->rank,
                          term->len - has_ell);
    int64_t strides[AK_IR_MAX_RANK], s = 1;
    for (int d = t->rank - 1; d >= 0; d--) {
        strides[d] = s;
        s *= t->dims[d];
    }
    int d = 0;
    for (int k = 0; k < term->len; k++) {
        if (term->lab[k] != ES_ELLIPSIS) {
            AK_CHECK(es_bind(ctx, p, i, term->lab[k], t->dims[d], strides[d]));
            d++;
            continue;
        }
        for (int e = 0; e < nell; e++, d++) { /* right-aligned within the ellipsis dims */
            int l = ES_LETTERS + p->ell_rank - nell + e;
            /* broadcasting against a size-1 dim reads it with stride 0 */
            int64_t st_ = t->dims[d] == 1 ? 0 : strides[d];
            AK_CHECK(es_bind(ctx, p, i, l, t->dims[d], st_));
        }
    }
    return AK_OK;
}

static void es_output_labels(const es_state *st, es_plan *p) {
    p->nout = 0;
    if (st->explicit_out) {
        for (int k = 0; k < st->out.len; k++) {
            if (st->out.lab[k] != ES_ELLIPSIS) {
                p->out[p->nout++] = st->out.lab[k];
                continue;
            }
            for (int e = 0; e < p->ell_rank; e++) p->out[p->nout++] = ES_LETTERS + e;
        }
    } else { /* implicit: ellipsis dims, then letters used once, alphabetically */
        for (int e = 0; e < p->ell_rank; e++) p->out[p->nout++] = ES_LETTERS + e;
        for (int l = 0; l < ES_LETTERS; l++)
            if (p->used[l] == 1) p->out[p->nout++] = l;
    }
    int in_out[ES_MAX_LABELS] = {0};
    for (int k = 0; k < p->nout; k++) in_out[p->out[k]] = 1;
    p->nsum = 0;
    for (int l = 0; l < ES_LETTERS + p->ell_rank; l++)
        if (p->used[l] && !in_out[l]) p->sum[p->nsum++] = l;
}

static ak_status es_make_plan(const ak__op_ctx *ctx, const es_state *st, es_plan *p) {
    memset(p, 0, sizeof *p);
    for (int l = 0; l < ES_MAX_LABELS; l++) p->dim[l] = -1;
    for (int i = 0; i < st->nin; i++) {
        const ak__tensor *t;
        AK_CHECK(ak__op_require(ctx, (uint32_t)i, &t));
        if (t->type != ctx->inputs[0]->type)
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "inputs differ in type");
        int has_ell = 0;
        for (int k = 0; k < st->in[i].len; k++) has_ell |= st->in[i].lab[k] == ES_ELLIPSIS;
        int nell = t->rank - (st->in[i].len - has_ell);
        if (has_ell && nell > p->ell_rank) p->ell_rank = nell;
    }
    for (int i = 0; i < st->nin; i++) AK_CHECK(es_bind_input(ctx, st, p, i));
    if (st->explicit_out)
        for (int k = 0; k < st->out.len; k++)
            if (st->out.lab[k] != ES_ELLIPSIS && !p->used[st->out.lab[k]])
                return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                                  "an output label is in no input");
    es_output_labels(st, p);
    return AK_OK;
}

/* ---- the SGEMM path ------------------------------------------------------------------ */

/* Labels of a two-operand float32 contraction by role, in the order the GEMM uses. */
typedef struct es_gemm {
    int nb, nm, nn, nk;
    int b[ES_MAX_LABELS], m[ES_MAX_LABELS], n[ES_MAX_LABELS], k[ES_MAX_LABELS];
    size_t B, M, N, K;
} es_gemm;

static int es_gemm_classify(const ak__op_ctx *ctx, const es_plan *p, es_gemm *g) {
    if (ctx->num_inputs != 2 || ctx->inputs[0]->type != AK_ELEM_F32 || p->broadcast) return 0;
    memset(g, 0, sizeof *g);
    g->B = g->M = g->N = g->K = 1;
    for (int j = 0; j < p->nout; j++) {
        int l = p->out[j], a = p->present[0][l], b = p->present[1][l];
        if (a > 1 || b > 1) return 0;
        if (a && b) g->b[g->nb++] = l, g->B *= (size_t)p->dim[l];
        else if (a) g->m[g->nm++] = l, g->M *= (size_t)p->dim[l];
        else g->n[g->nn++] = l, g->N *= (size_t)p->dim[l];
    }
    for (int j = 0; j < p->nsum; j++) {
        int l = p->sum[j];
        if (p->present[0][l] != 1 || p->present[1][l] != 1) return 0; /* one-sided sums */
        g->k[g->nk++] = l;
        g->K *= (size_t)p->dim[l];
    }
    return 1;
}

/* Whether input i is laid out contiguously as the label sequence (x..., y..., z...). */
static int es_is_layout(const es_plan *p, int i, const int *x, int nx, const int *y, int ny,
                        const int *z, int nz) {
    int64_t expect = 1;
    const int *parts[3] = {z, y, x};
    int counts[3] = {nz, ny, nx};
    for (int q = 0; q < 3; q++)
        for (int j = counts[q] - 1; j >= 0; j--) {
            int l = parts[q][j];
            if (p->dim[l] != 1 && p->stride[i][l] != expect) return 0;
            expect *= p->dim[l];
        }
    return 1;
}

/* Copies input i into dst contiguous in the label order `order` (n labels). */
static void es_pack(const es_plan *p, int i, const float *src, const int *order, int n,
                    float *dst) {
    int64_t idx[ES_MAX_LABELS] = {0}, total = 1;
    for (int j = 0; j < n; j++) total *= p->dim[order[j]];
    int64_t off = 0;
    for (int64_t e = 0; e < total; e++) {
        dst[e] = src[off];
        for (int j = n - 1; j >= 0; j--) { /* odometer: advance the last label */
            int l = order[j];
            off += p->stride[i][l];
            if (++idx[j] < p->dim[l]) break;
            off -= p->stride[i][l] * p->dim[l];
            idx[j] = 0;
        }
    }
}

typedef struct es_bgemm {
    ak_trans ta, tb;
    const float *a, *b;
    float *c;
    size_t M, N, K;
    ak_threadpool *pool;
} es_bgemm;

static void es_bgemm_range(void *arg, size_t begin, size_t end, int thread) {
    const es_bgemm *g = arg;
    size_t lda = g->ta == AK_TRANS ? g->M : g->K, ldb = g->tb == AK_TRANS ? g->K : g->N;
    for (size_t b = begin; b < end; b++) /* nested in the pool: runs serially here */
        (void)ak_sgemm(g->ta, g->tb, g->M, g->N, g->K, 1.0f, g->a + b * g->M * g->K, lda,
                       g->b + b * g->K * g->N, ldb, 0.0f, g->c + b * g->M * g->N, g->N, g->pool);
}

static ak_status es_gemm_batches(ak__op_ctx *ctx, const es_gemm *g, es_bgemm *bg) {
    bg->M = g->M, bg->N = g->N, bg->K = g->K, bg->pool = ctx->pool;
    if (g->B > 1 && g->M * g->N * g->K < ((size_t)1 << 18))
        return ak_threadpool_parallel_for(ctx->pool, g->B, 1, es_bgemm_range, bg);
    size_t lda = bg->ta == AK_TRANS ? g->M : g->K, ldb = bg->tb == AK_TRANS ? g->K : g->N;
    for (size_t b = 0; b < g->B; b++)
        AK_CHECK(ak_sgemm(bg->ta, bg->tb, g->M, g->N, g->K, 1.0f, bg->a + b * g->M * g->K, lda,
                          bg->b + b * g->K * g->N, ldb, 0.0f, bg->c + b * g->M * g->N, g->N,
                          ctx->pool));
    return AK_OK;
}

/* Workspace floats for the packed operands and result (upper bound). */
static size_t es_gemm_ws(const es_gemm *g) {
    return (g->B * g->M * g->K + g->B * g->K * g->N + g->B * g->M * g->N) * sizeof(float) + 192;
}

static ak_status es_run_gemm(ak__op_ctx *ctx, const es_plan *p, const es_gemm *g) {
    const float *a = ctx->inputs[0]->data, *b = ctx->inputs[1]->data;
    float *ws = ctx->workspace, *y = ctx->outputs[0]->data;
    float *pa = ws, *pb = pa + g->B * g->M * g->K, *pc = pb + g->B * g->K * g->N;
    es_bgemm bg = {AK_NO_TRANS, AK_NO_TRANS, a, b, y, 0, 0, 0, NULL};
    if (es_is_layout(p, 0, g->b, g->nb, g->m, g->nm, g->k, g->nk)) {
        bg.a = a;
    } else if (es_is_layout(p, 0, g->b, g->nb, g->k, g->nk, g->m, g->nm)) {
        bg.a = a, bg.ta = AK_TRANS;
    } else {
        int order[ES_MAX_LABELS], n = 0;
        for (int j = 0; j < g->nb; j++) order[n++] = g->b[j];
        for (int j = 0; j < g->nm; j++) order[n++] = g->m[j];
        for (int j = 0; j < g->nk; j++) order[n++] = g->k[j];
        es_pack(p, 0, a, order, n, pa);
        bg.a = pa;
    }
    if (es_is_layout(p, 1, g->b, g->nb, g->k, g->nk, g->n, g->nn)) {
        bg.b = b;
    } else if (es_is_layout(p, 1, g->b, g->nb, g->n, g->nn, g->k, g->nk)) {
        bg.b = b, bg.tb = AK_TRANS;
    } else {
        int order[ES_MAX_LABELS], n = 0;
        for (int j = 0; j < g->nb; j++) order[n++] = g->b[j];
        for (int j = 0; j < g->nk; j++) order[n++] = g->k[j];
        for (int j = 0; j < g->nn; j++) order[n++] = g->n[j];
        es_pack(p, 1, b, order, n, pb);
        bg.b = pb;
    }
    /* the result is (batch, M, N); the output wants p->out's order */
    int direct = 1;
    for (int j = 0; j < p->nout; j++) {
        int want = j < g->nb ? g->b[j] : j < g->nb + g->nm ? g->m[j - g->nb]
                                                           : g->n[j - g->nb - g->nm];
        if (p->out[j] != want) direct = 0;
    }
    bg.c = direct ? y : pc;
    AK_CHECK(es_gemm_batches(ctx, g, &bg));
    if (direct) return AK_OK;
    /* permute: strides of (batch, M, N) labels in pc, then walk the output order */
    es_plan q = *p;
    int64_t s = 1;
    const int *parts[3] = {g->n, g->m, g->b};
    int counts[3] = {g->nn, g->nm, g->nb};
    for (int r = 0; r < 3; r++)
        for (int j = counts[r] - 1; j >= 0; j--) {
            q.stride[0][parts[r][j]] = s;
            s *= p->dim[parts[r][j]];
        }
    es_pack(&q, 0, pc, p->out, p->nout, y);
    return AK_OK;
}

/* ---- the general path ---------------------------------------------------------------- */

typedef struct es_general {
    const es_plan *p;
    int nin, integer;
    const void *src[ES_MAX_INPUTS]; /* double or int64 copies of the inputs */
    void *dst;                      /* double or int64 result */
    int64_t sum_total;
} es_general;

static void es_general_range(void *arg, size_t begin, size_t end, int thread) {
    const es_general *g = arg;
    const es_plan *p = g->p;
    for (size_t e = begin; e < end; e++) {
        int64_t base[ES_MAX_INPUTS] = {0}, rem = (int64_t)e;
        for (int j = p->nout - 1; j >= 0; j--) {
            int l = p->out[j];
            int64_t v = rem % p->dim[l];
            rem /= p->dim[l];
            for (int i = 0; i < g->nin; i++) base[i] += v * p->stride[i][l];
        }
        int64_t idx[ES_MAX_LABELS] = {0};
        double accd = 0.0;
        int64_t acci = 0;
        for (int64_t s = 0; s < g->sum_total; s++) {
            if (g->integer) {
                uint64_t prod = 1; /* wraps like the integer type would */
                for (int i = 0; i < g->nin; i++)
                    prod *= (uint64_t)((const int64_t *)g->src[i])[base[i]];
                acci = (int64_t)((uint64_t)acci + prod);
            } else {
                double prod = 1.0;
                for (int i = 0; i < g->nin; i++) prod *= ((const double *)g->src[i])[base[i]];
                accd += prod;
            }
            for (int j = p->nsum - 1; j >= 0; j--) {
                int l = p->sum[j];
                for (int i = 0; i < g->nin; i++) base[i] += p->stride[i][l];
                if (++idx[j] < p->dim[l]) break;
                for (int i = 0; i < g->nin; i++) base[i] -= p->stride[i][l] * p->dim[l];
                idx[j] = 0;
            }
        }
        if (g->integer)
            ((int64_t *)g->dst)[e] = acci;
        else
            ((double *)g->dst)[e] = accd;
    }
}

static size_t es_general_ws(const ak__op_ctx *ctx) {
    size_t n = ak__tensor_nbytes(ctx->outputs[0]) / ak_elem_type_size(ctx->outputs[0]->type);
    size_t bytes = n * 8 + 64;
    for (uint32_t i = 0; i < ctx->num_inputs; i++)
        bytes += (size_t)ctx->inputs[i]->count * 8 + 64;
    return bytes;
}

static ak_status es_run_general(ak__op_ctx *ctx, const es_plan *p) {
    es_general g = {.p = p, .nin = (int)ctx->num_inputs};
    ak_elem_type type = ctx->inputs[0]->type;
    g.integer = ak__elem_is_integer(type) || type == AK_ELEM_BOOL;
    char *ws = ctx->workspace;
    for (int i = 0; i < g.nin; i++) {
        const ak__tensor *t = ctx->inputs[i];
        if (g.integer) {
            int64_t *d = (int64_t *)ws;
            for (uint64_t k = 0; k < t->count; k++)
                d[k] = t->type == AK_ELEM_I64 ? ((const int64_t *)t->data)[k]
                       : t->type == AK_ELEM_U64 ? (int64_t)((const uint64_t *)t->data)[k]
                                                : (int64_t)ak__elem_get(t->data, t->type, k);
        } else {
            double *d = (double *)ws;
            for (uint64_t k = 0; k < t->count; k++) d[k] = ak__elem_get(t->data, t->type, k);
        }
        g.src[i] = ws;
        ws += ((size_t)t->count * 8 + 63) & ~(size_t)63;
    }
    g.dst = ws;
    g.sum_total = 1;
    for (int j = 0; j < p->nsum; j++) g.sum_total *= p->dim[p->sum[j]];
    ak__tensor *y = ctx->outputs[0];
    AK_CHECK(ak_threadpool_parallel_for(ctx->pool, (size_t)y->count,
                                        (size_t)(65536 / (g.sum_total + 1)) + 1,
                                        es_general_range, &g));
    for (uint64_t k = 0; k < y->count; k++) {
        if (y->type == AK_ELEM_I64)
            ((int64_t *)y->data)[k] = ((const int64_t *)g.dst)[k];
        else if (y->type == AK_ELEM_U64)
            ((uint64_t *)y->data)[k] = (uint64_t)((const int64_t *)g.dst)[k];
        else if (g.integer)
            ak__elem_set(y->data, y->type, k, (double)((const int64_t *)g.dst)[k]);
        else
            ak__elem_set(y->data, y->type, k, ((const double *)g.dst)[k]);
    }
    return AK_OK;
}

/* ---- reshape and run ----------------------------------------------------------------- */

static ak_status es_reshape(ak__op_ctx *ctx) {
    es_plan p;
    AK_CHECK(es_make_plan(ctx, ctx->state, &p));
    ak_elem_type type = ctx->inputs[0]->type;
    if (!ak__elem_is_float(type) && !ak__elem_is_integer(type))
        return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED, "type %s is not supported",
                          ak_elem_type_name(type));
    int64_t dims[AK_IR_MAX_RANK];
    if (p.nout > AK_IR_MAX_RANK)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "output rank %d is too large", p.nout);
    for (int j = 0; j < p.nout; j++) dims[j] = p.dim[p.out[j]];
    AK_CHECK(ak__op_set_output(ctx, 0, type, p.nout, dims));
    es_gemm g;
    if (!ctx->outputs[0]) return AK_OK;
    ctx->workspace_bytes = es_gemm_classify(ctx, &p, &g) ? es_gemm_ws(&g) : es_general_ws(ctx);
    return AK_OK;
}

static ak_status es_run(ak__op_ctx *ctx) {
    es_plan p;
    AK_CHECK(es_make_plan(ctx, ctx->state, &p));
    ak__tensor *y = ctx->outputs[0];
    if (!y || y->count == 0) return AK_OK;
    es_gemm g;
    if (es_gemm_classify(ctx, &p, &g)) return es_run_gemm(ctx, &p, &g);
    return es_run_general(ctx, &p);
}

const ak__op_def ak__op_einsum = {"", "Einsum", 12, 0, es_create, es_destroy, es_reshape,
                                  es_run};
