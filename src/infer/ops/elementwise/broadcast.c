/* The elementwise loop drivers: numpy broadcasting by per-dimension strides (adjacent
 * dimensions merged so same-shape, scalar and trailing-vector operands become a few long
 * contiguous segments) and flat maps, both split over the thread pool. */
#include <string.h>

#include "infer/ops/elementwise/elementwise.h"

typedef struct ew_plan {
    int rank, nin; /* rank after merging, >= 1 */
    int64_t dims[AK_IR_MAX_RANK];
    int64_t strides[EW_MAX_IN][AK_IR_MAX_RANK]; /* in elements; 0 on broadcast dims */
    size_t esize[EW_MAX_IN], esize_out;
    const char *base[EW_MAX_IN];
    char *out;
    ew_seg_fn fn;
    const void *op;
} ew_plan;

/* Input k's element strides over out's dims (right-aligned, 0 where it has size 1). */
static void input_strides(const ak__tensor *out, const ak__tensor *in, int64_t *st) {
    int off = out->rank - in->rank;
    int64_t s = 1;
    for (int d = out->rank - 1; d >= 0; d--) {
        int64_t dim = d < off ? 1 : in->dims[d - off];
        st[d] = dim == 1 ? 0 : s;
        s *= dim;
    }
}

/* Drops size-1 output dims and merges a dim into the kept one outside it whenever every
 * input walks both as one (contiguous across them, or broadcast over both). */
static void plan_build(ew_plan *p, const ak__tensor *out, const ak__tensor *const *ins,
                       int nin) {
    int64_t st[EW_MAX_IN][AK_IR_MAX_RANK];
    for (int k = 0; k < nin; k++) input_strides(out, ins[k], st[k]);
    int r = 0;
    for (int d = 0; d < out->rank; d++) {
        int64_t dim = out->dims[d];
        if (dim == 1) continue;
        int merge = r > 0;
        for (int k = 0; k < nin && merge; k++)
            merge = p->strides[k][r - 1] == st[k][d] * dim;
        if (merge) {
            p->dims[r - 1] *= dim;
            for (int k = 0; k < nin; k++) p->strides[k][r - 1] = st[k][d];
            continue;
        }
        p->dims[r] = dim;
        for (int k = 0; k < nin; k++) p->strides[k][r] = st[k][d];
        r++;
    }
    if (r == 0) { /* a single element */
        p->dims[0] = 1;
        for (int k = 0; k < nin; k++) p->strides[k][0] = 0;
        r = 1;
    }
    p->rank = r;
    p->nin = nin;
    for (int k = 0; k < nin; k++) {
        p->esize[k] = ak_elem_type_size(ins[k]->type);
        p->base[k] = ins[k]->data;
    }
    p->esize_out = ak_elem_type_size(out->type);
    p->out = out->data;
}

/* Output elements [begin, end): an odometer over the outer dims, one fn call per row. */
static void plan_chunk(void *arg, size_t begin, size_t end, int thread_index) {
    (void)thread_index;
    const ew_plan *p = arg;
    const int r = p->rank, nin = p->nin;
    const int64_t n = p->dims[r - 1];
    int64_t idx[AK_IR_MAX_RANK], off[EW_MAX_IN] = {0};
    int step[EW_MAX_IN] = {0};
    uint64_t row = begin / (uint64_t)n;
    int64_t col = (int64_t)(begin % (uint64_t)n);
    for (int d = r - 2; d >= 0; d--) {
        idx[d] = (int64_t)(row % (uint64_t)p->dims[d]);
        row /= (uint64_t)p->dims[d];
        for (int k = 0; k < nin; k++) off[k] += idx[d] * p->strides[k][d];
    }
    for (int k = 0; k < nin; k++) step[k] = (int)p->strides[k][r - 1];
    for (size_t pos = begin; pos < end;) {
        size_t len = (size_t)(n - col);
        if (len > end - pos) len = end - pos;
        const void *in[EW_MAX_IN] = {0};
        for (int k = 0; k < nin; k++)
            in[k] = p->base[k] + (size_t)(off[k] + col * step[k]) * p->esize[k];
        p->fn(p->op, p->out + pos * p->esize_out, in, step, len);
        pos += len;
        col += (int64_t)len;
        if (col < n) continue;
        col = 0;
        for (int d = r - 2; d >= 0; d--) {
            for (int k = 0; k < nin; k++) off[k] += p->strides[k][d];
            if (++idx[d] < p->dims[d]) break;
            for (int k = 0; k < nin; k++) off[k] -= p->strides[k][d] * p->dims[d];
            idx[d] = 0;
        }
    }
}

static ak_status run_split(const ak__op_ctx *ctx, uint64_t total, uint64_t par_min,
                           ak_parallel_fn fn, void *arg) {
    if (total == 0) return AK_OK;
    if (total < par_min || !ctx->pool) {
        fn(arg, 0, (size_t)total, 0);
        return AK_OK;
    }
    return ak_threadpool_parallel_for(ctx->pool, (size_t)total, (size_t)(par_min / 2), fn, arg);
}

ak_status ew_broadcast_run(const ak__op_ctx *ctx, ak__tensor *out, const ak__tensor *const *ins,
                           int nin, ew_seg_fn fn, const void *op, uint64_t par_min) {
    ew_plan p;
    plan_build(&p, out, ins, nin);
    p.fn = fn;
    p.op = op;
    return run_split(ctx, out->count, par_min, plan_chunk, &p);
}

typedef struct ew_map {
    ew_map_fn fn;
    const void *op;
    char *dst;
    const char *src;
    size_t eo, ei;
} ew_map;

static void map_chunk(void *arg, size_t begin, size_t end, int thread_index) {
    (void)thread_index;
    const ew_map *m = arg;
    m->fn(m->op, m->dst + begin * m->eo, m->src + begin * m->ei, end - begin);
}

ak_status ew_map_run(const ak__op_ctx *ctx, ak__tensor *out, const ak__tensor *in,
                     ew_map_fn fn, const void *op, uint64_t par_min) {
    ew_map m = {fn, op, out->data, in->data, ak_elem_type_size(out->type),
                ak_elem_type_size(in->type)};
    return run_split(ctx, out->count, par_min, map_chunk, &m);
}
