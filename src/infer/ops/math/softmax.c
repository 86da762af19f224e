/* Softmax, LogSoftmax and Hardmax.
 *
 * Before opset 13 the input is read as a matrix [prod(dims[:axis]), prod(dims[axis:])]
 * (axis defaults to 1) and each row is normalized; from 13 only dims[axis] is (axis
 * defaults to -1). Both make a layout [outer][n][inner]: the rows of the normalized axis
 * are contiguous when inner is 1, the transformer case, which float32 runs with the row
 * kernel (ak_f32_softmax_rows: one pass for the maximum, one for exp and its sum, one to
 * scale) with rows split over the thread pool. inner > 1 works on blocks of columns with the same
 * kernels; other float types go through double. */
#include <math.h>
#include <string.h>

#include "infer/ops/reduce/reduce.h"
#include "infer/ops/math/math.h"
#include "kernels/dispatch.h"

/* Softmax and LogSoftmax as the kernels name them (kernels/kf_infer.h) */
typedef enum { SM_SOFTMAX = AK_KF_SOFTMAX, SM_LOGSOFTMAX = AK_KF_LOGSOFTMAX, SM_HARDMAX } sm_mode;

typedef struct {
    uint64_t outer, n, inner;
} sm_layout;

static ak_status sm_layout_of(const ak__op_ctx *ctx, const ak__tensor *x, sm_layout *l) {
    int old = ctx->node->opset < 13;
    int axis;
    if (x->rank == 0)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "the input is a scalar");
    int64_t a = ak__attr_int(ctx->node, "axis", old ? 1 : -1);
    /* before 13, axis may also be rank (a 2-D view with one column); -1 is still the
     * last axis, not that end position */
    if (old && a < 0) a += x->rank;
    AK_CHECK(ak__op_axis(ctx, a, x->rank, old, &axis));
    l->outer = l->n = l->inner = 1;
    for (int d = 0; d < x->rank; d++) {
        uint64_t v = (uint64_t)x->dims[d];
        if (d < axis) l->outer *= v;
        else if (d == axis || old) l->n *= v;
        else l->inner *= v;
    }
    return AK_OK;
}

static ak_status sm_reshape(ak__op_ctx *ctx) {
    const ak__tensor *x;
    AK_CHECK(ak__op_require(ctx, 0, &x));
    if (!ak__elem_is_float(x->type))
        return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED, "input type %s is not supported",
                          ak_elem_type_name(x->type));
    sm_layout l;
    AK_CHECK(sm_layout_of(ctx, x, &l));
    return ak__op_set_output_like(ctx, 0, x);
}

/* ---- float32: the kernels --------------------------------------------------------------- */

#define COLS AK_KF_SOFTMAX_COLS

typedef struct {
    sm_mode mode;
    sm_layout l;
    const ak__tensor *x;
    ak__tensor *y;
    const ak__kernels *k; /* the kernel table of this run */
} sm_job;

static void rows_worker(void *arg, size_t begin, size_t end, int thread) {
    (void)thread;
    const sm_job *j = arg;
    size_t n = (size_t)j->l.n;
    const float *x = (const float *)j->x->data + begin * n;
    float *y = (float *)j->y->data + begin * n;
    j->k->f32_softmax_rows(x, y, end - begin, n, (int)j->mode);
}

static void cols_worker(void *arg, size_t begin, size_t end, int thread) {
    (void)thread;
    const sm_job *j = arg;
    size_t n = (size_t)j->l.n, inner = (size_t)j->l.inner;
    size_t blocks = (inner + COLS - 1) / COLS;
    for (size_t item = begin; item < end; item++) {
        size_t o = item / blocks, c0 = (item % blocks) * COLS;
        size_t w = inner - c0 < COLS ? inner - c0 : COLS;
        const float *x = (const float *)j->x->data + o * n * inner + c0;
        float *y = (float *)j->y->data + o * n * inner + c0;
        j->k->f32_softmax_cols(x, y, n, inner, w, (int)j->mode);
    }
}

/* ---- any float type, and Hardmax: one (outer, inner) line at a time, in double ------ */

static void generic_worker(void *arg, size_t begin, size_t end, int thread) {
    (void)thread;
    const sm_job *j = arg;
    uint64_t n = j->l.n, inner = j->l.inner;
    ak_elem_type t = j->x->type;
    for (size_t line = begin; line < end; line++) {
        uint64_t base = (line / inner) * n * inner + line % inner;
        double m = -INFINITY, s = 0.0;
        uint64_t arg_max = 0;
        for (uint64_t k = 0; k < n; k++) {
            double v = ak__elem_get(j->x->data, t, base + k * inner);
            if (v > m || (k == 0 && isnan(v))) m = v, arg_max = k;
        }
        if (j->mode == SM_HARDMAX) {
            for (uint64_t k = 0; k < n; k++)
                ak__elem_set(j->y->data, t, base + k * inner, k == arg_max ? 1.0 : 0.0);
            continue;
        }
        for (uint64_t k = 0; k < n; k++)
            s += exp(ak__elem_get(j->x->data, t, base + k * inner) - m);
        double c = m + log(s);
        for (uint64_t k = 0; k < n; k++) {
            double v = ak__elem_get(j->x->data, t, base + k * inner);
            ak__elem_set(j->y->data, t, base + k * inner,
                         j->mode == SM_SOFTMAX ? exp(v - m) / s : v - c);
        }
    }
}

static ak_status sm_run(ak__op_ctx *ctx, sm_mode mode) {
    sm_job j = {mode, {0, 0, 0}, ak__op_in(ctx, 0), ak__op_out(ctx, 0), NULL};
    if (!j.y || j.y->count == 0) return AK_OK;
    AK_CHECK(sm_layout_of(ctx, j.x, &j.l));
    if (j.x->type == AK_ELEM_F32 && mode != SM_HARDMAX) {
        j.k = ak__kernels_active();
        if (j.l.inner == 1)
            return ak__math_parallel(ctx, (size_t)j.l.outer, (size_t)j.l.n * 8, rows_worker,
                                     &j);
        size_t blocks = ((size_t)j.l.inner + COLS - 1) / COLS;
        return ak__math_parallel(ctx, (size_t)j.l.outer * blocks, (size_t)j.l.n * COLS * 8,
                                 cols_worker, &j);
    }
    return ak__math_parallel(ctx, (size_t)(j.l.outer * j.l.inner), (size_t)j.l.n * 16,
                             generic_worker, &j);
}

static ak_status softmax_run(ak__op_ctx *ctx) { return sm_run(ctx, SM_SOFTMAX); }
static ak_status log_softmax_run(ak__op_ctx *ctx) { return sm_run(ctx, SM_LOGSOFTMAX); }
static ak_status hardmax_run(ak__op_ctx *ctx) { return sm_run(ctx, SM_HARDMAX); }

const ak__op_def ak__op_softmax = {"", "Softmax", 1, 0, NULL, NULL, sm_reshape, softmax_run};
const ak__op_def ak__op_log_softmax = {"", "LogSoftmax", 1, 0, NULL, NULL, sm_reshape,
                                       log_softmax_run};
const ak__op_def ak__op_hardmax = {"", "Hardmax", 1, 0, NULL, NULL, sm_reshape, hardmax_run};
