/* Det: the determinant of each square matrix of [..., M, M], by LU factorization with
 * partial pivoting in double. */
#include <math.h>
#include <string.h>

#include "infer/ops/math/math.h"
#include "infer/runtime/op.h"

static ak_status check_float(const ak__op_ctx *ctx, uint32_t i, const ak__tensor *t) {
    if (ak__elem_is_float(t->type)) return AK_OK;
    return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED, "input %u has type %s (floats only)", i,
                      ak_elem_type_name(t->type));
}

static ak_status det_reshape(ak__op_ctx *ctx) {
    const ak__tensor *x;
    AK_CHECK(ak__op_require(ctx, 0, &x));
    AK_CHECK(check_float(ctx, 0, x));
    if (x->rank < 2 || x->dims[x->rank - 1] != x->dims[x->rank - 2])
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "X must be [..., M, M]");
    int64_t m = x->dims[x->rank - 1];
    ctx->workspace_bytes = (size_t)(m * m) * sizeof(double);
    return ak__op_set_output(ctx, 0, x->type, x->rank - 2, x->dims);
}

static double det_lu(double *a, int64_t m) {
    double det = 1.0;
    for (int64_t k = 0; k < m; k++) {
        int64_t piv = k;
        for (int64_t i = k + 1; i < m; i++)
            if (fabs(a[i * m + k]) > fabs(a[piv * m + k])) piv = i;
        if (a[piv * m + k] == 0.0) return 0.0;
        if (piv != k) {
            for (int64_t j = 0; j < m; j++) {
                double t = a[k * m + j];
                a[k * m + j] = a[piv * m + j];
                a[piv * m + j] = t;
            }
            det = -det;
        }
        double p = a[k * m + k];
        det *= p;
        for (int64_t i = k + 1; i < m; i++) {
            double f = a[i * m + k] / p;
            for (int64_t j = k + 1; j < m; j++) a[i * m + j] -= f * a[k * m + j];
        }
    }
    return det;
}

static ak_status det_run(ak__op_ctx *ctx) {
    const ak__tensor *x = ctx->inputs[0];
    ak__tensor *y = ctx->outputs[0];
    int64_t m = x->dims[x->rank - 1];
    uint64_t mm = (uint64_t)(m * m);
    double *a = ctx->workspace;
    for (uint64_t b = 0; b < y->count; b++) {
        for (uint64_t i = 0; i < mm; i++) a[i] = ak__elem_get(x->data, x->type, b * mm + i);
        ak__elem_set(y->data, y->type, b, det_lu(a, m));
    }
    return AK_OK;
}

const ak__op_def ak__op_det = {"", "Det", 11, 0, NULL, NULL, det_reshape, det_run};
