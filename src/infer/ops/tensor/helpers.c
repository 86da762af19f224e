/* Helpers shared by the tensor operator family: index and scalar inputs, and the strided
 * copy engine behind Transpose, Slice, Expand, DepthToSpace and SpaceToDepth.
 *
 * The copy engine first simplifies the view (drops size-1 dims, merges dims that are
 * contiguous in the source), so most copies end as a few long memcpy rows. Transposes
 * whose innermost output dim is strided in the source go through cache-sized 2-D tiles. */
#include <string.h>

#include "infer/ops/tensor/tensor_ops.h"
#include "kernels/dispatch.h"


/* ---- inputs ------------------------------------------------------------------------- */

ak_status ak__tops_check_index(const ak__op_ctx *ctx, const ak__tensor *t, const char *what) {
    if (t->type == AK_ELEM_I64 || t->type == AK_ELEM_I32) return AK_OK;
    return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "%s has type %s, expected int32 or int64",
                      what, ak_elem_type_name(t->type));
}

ak_status ak__tops_wrap_index(const ak__op_ctx *ctx, int64_t *v, int64_t dim, int axis,
                              const char *what) {
    int64_t i = *v < 0 ? *v + dim : *v;
    if (i < 0 || i >= dim)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_ARG,
                          "%s %lld is out of range [-%lld, %lld) on axis %d", what,
                          (long long)*v, (long long)dim, (long long)dim, axis);
    *v = i;
    return AK_OK;
}

static ak_status check_scalar(const ak__op_ctx *ctx, const ak__tensor *t, const char *what) {
    if (t->count != 1 || t->rank > 1)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "%s must hold one element, not %llu",
                          what, (unsigned long long)t->count);
    if (!ak__elem_is_float(t->type) && !ak__elem_is_integer(t->type) && t->type != AK_ELEM_BOOL)
        return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED, "%s has unsupported type %s", what,
                          ak_elem_type_name(t->type));
    return AK_OK;
}

ak_status ak__tops_scalar_int(const ak__op_ctx *ctx, const ak__tensor *t, const char *what,
                              int64_t *out) {
    AK_CHECK(check_scalar(ctx, t, what));
    if (t->type == AK_ELEM_I64 || t->type == AK_ELEM_I32) /* exact beyond 2^53 */
        *out = ak__tops_index_at(t, 0);
    else if (t->type == AK_ELEM_U64)
        *out = (int64_t)*(const uint64_t *)t->data;
    else {
        double v = ak__elem_get(t->data, t->type, 0);
        /* NaN, ±Inf and values past int64 have no integer (converting them is undefined) */
        if (!(v >= -9223372036854775808.0 && v < 9223372036854775808.0))
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL,
                              "%s is %g, which is not a 64-bit integer", what, v);
        *out = (int64_t)v;
    }
    return AK_OK;
}

ak_status ak__tops_scalar_double(const ak__op_ctx *ctx, const ak__tensor *t, const char *what,
                                 double *out) {
    AK_CHECK(check_scalar(ctx, t, what));
    *out = ak__elem_get(t->data, t->type, 0);
    return AK_OK;
}

/* ---- shapes and bytes --------------------------------------------------------------- */

void ak__tops_strides(int rank, const int64_t *dims, int64_t *strides) {
    int64_t s = 1;
    for (int d = rank - 1; d >= 0; d--) {
        strides[d] = s;
        s *= dims[d];
    }
}

int64_t ak__tops_prod(const int64_t *dims, int begin, int end) {
    int64_t p = 1;
    for (int d = begin; d < end; d++) p *= dims[d];
    return p;
}

void ak__tops_copy_bytes(void *dst, const void *src, size_t n) {
    if (n && dst != src) memcpy(dst, src, n);
}

void ak__tops_fill(void *dst, const void *value, size_t elem, uint64_t n) {
    if (!n) return;
    memcpy(dst, value, elem);
    /* doubling copies: log2(n) memcpy calls whatever the element size */
    uint64_t done = 1;
    while (done < n) {
        uint64_t k = done < n - done ? done : n - done;
        memcpy((char *)dst + done * elem, dst, (size_t)(k * elem));
        done += k;
    }
}

/* ---- strided copy ------------------------------------------------------------------- */

typedef struct scopy {
    char *dst;
    const char *src;
    size_t elem;
    int rank; /* >= 1 after simplification */
    int64_t dims[AK_TOPS_MAX_RANK];
    int64_t strides[AK_TOPS_MAX_RANK]; /* source, in elements */
    /* tiled transpose: output dims a (innermost, strided source) and b (source stride 1) */
    int tile_b;
} scopy;

/* One output row of n elements read with source stride s (elements). */
static void copy_row(char *d, const char *src, int64_t n, int64_t s, size_t elem) {
    if (s == 1) {
        memcpy(d, src, (size_t)n * elem);
        return;
    }
#define ROW(T)                                                   \
    do {                                                         \
        T *dd = (T *)(void *)d;                                  \
        const T *ss = (const T *)(const void *)src;              \
        for (int64_t i = 0; i < n; i++) dd[i] = ss[i * s];       \
    } while (0)
    switch (elem) {
    case 1: ROW(uint8_t); break;
    case 2: ROW(uint16_t); break;
    case 4: ROW(uint32_t); break;
    case 8: ROW(uint64_t); break;
    default:
        for (int64_t i = 0; i < n; i++)
            memcpy(d + (size_t)i * elem, src + i * s * (int64_t)elem, elem);
    }
#undef ROW
}

/* Source byte offset of outer position r over dims[0..k) (row-major). */
static int64_t outer_offset(const scopy *c, int k, uint64_t r, int64_t *idx) {
    int64_t off = 0;
    for (int d = k - 1; d >= 0; d--) {
        idx[d] = (int64_t)(r % (uint64_t)c->dims[d]);
        r /= (uint64_t)c->dims[d];
        off += idx[d] * c->strides[d];
    }
    return off * (int64_t)c->elem;
}

static void scopy_rows(void *p, size_t begin, size_t end, int thread_index) {
    (void)thread_index;
    const scopy *c = p;
    int k = c->rank - 1;
    int64_t n = c->dims[k], idx[AK_TOPS_MAX_RANK];
    const char *s = c->src + outer_offset(c, k, begin, idx);
    char *d = c->dst + begin * (size_t)n * c->elem;
    for (size_t r = begin; r < end; r++) {
        copy_row(d, s, n, c->strides[k], c->elem);
        d += (size_t)n * c->elem;
        for (int j = k - 1; j >= 0; j--) { /* odometer step */
            s += c->strides[j] * (int64_t)c->elem;
            if (++idx[j] < c->dims[j]) break;
            s -= c->dims[j] * c->strides[j] * (int64_t)c->elem;
            idx[j] = 0;
        }
    }
}

enum { TILE = 32 };

/* A TILE x dims[a] band of a 2-D transpose: dst[ib][ia] = src[ib + ia * sa]. */
#define TILE_LOOP(T)                                                                  \
    do {                                                                              \
        for (int64_t ia0 = 0; ia0 < na; ia0 += TILE) {                               \
            int64_t ia1 = ia0 + TILE < na ? ia0 + TILE : na;                         \
            for (int64_t ib = ib0; ib < ib1; ib++) {                                  \
                T *dd = (T *)(void *)d + ib * dsb;                                    \
                const T *ss = (const T *)(const void *)s + ib;                        \
                for (int64_t ia = ia0; ia < ia1; ia++) dd[ia] = ss[ia * sa];          \
            }                                                                         \
        }                                                                             \
    } while (0)

void ak__tops_transpose_f32(float *dst, int64_t ld_dst, const float *src, int64_t ld_src,
                            int64_t rows, int64_t cols) {
    ak__kernels_active()->f32_transpose32_band((uint32_t *)(void *)dst,
                                               (const uint32_t *)(const void *)src, rows, 0, cols,
                                               ld_src, ld_dst);
}

/* Work item w = (outer position, band of TILE rows of dim b). */
static void scopy_tiles(void *p, size_t begin, size_t end, int thread_index) {
    (void)thread_index;
    const scopy *c = p;
    int a = c->rank - 1, b = c->tile_b;
    int64_t na = c->dims[a], nb = c->dims[b], sa = c->strides[a];
    int64_t bands = (nb + TILE - 1) / TILE, dsb = 1;
    ak__kf_transpose32_band *band32 = ak__kernels_active()->f32_transpose32_band;
    for (int d = b + 1; d < c->rank; d++) dsb *= c->dims[d];
    for (size_t w = begin; w < end; w++) {
        uint64_t o = w / (uint64_t)bands;
        int64_t ib0 = (int64_t)(w % (uint64_t)bands) * TILE;
        int64_t ib1 = ib0 + TILE < nb ? ib0 + TILE : nb;
        /* outer dims are every dim except a and b, row-major */
        int64_t soff = 0, doff = 0, dstride = 1;
        for (int d = c->rank - 1; d >= 0; d--) {
            if (d == a || d == b) {
                dstride *= c->dims[d];
                continue;
            }
            int64_t i = (int64_t)(o % (uint64_t)c->dims[d]);
            o /= (uint64_t)c->dims[d];
            soff += i * c->strides[d];
            doff += i * dstride;
            dstride *= c->dims[d];
        }
        char *d = c->dst + doff * (int64_t)c->elem;
        const char *s = c->src + soff * (int64_t)c->elem;
        if (c->elem == 4) { /* the kernel's 8×8 register blocks */
            band32((uint32_t *)(void *)d, (const uint32_t *)(const void *)s, na, ib0, ib1, sa, dsb);
            continue;
        }
        switch (c->elem) {
        case 1: TILE_LOOP(uint8_t); break;
        case 2: TILE_LOOP(uint16_t); break;
        case 4: TILE_LOOP(uint32_t); break;
        default: TILE_LOOP(uint64_t); break; /* tiling is only chosen for 1/2/4/8 bytes */
        }
    }
}
#undef TILE_LOOP

/* Drops size-1 dims and merges neighbours contiguous in the source. */
static void simplify(scopy *c, int rank, const int64_t *dims, const int64_t *strides) {
    int r = 0;
    for (int d = 0; d < rank; d++) {
        if (dims[d] == 1) continue;
        if (r > 0 && c->strides[r - 1] == strides[d] * dims[d]) {
            c->dims[r - 1] *= dims[d];
            c->strides[r - 1] = strides[d];
            continue;
        }
        c->dims[r] = dims[d];
        c->strides[r] = strides[d];
        r++;
    }
    if (r == 0) { /* a single element */
        c->dims[0] = 1;
        c->strides[0] = 1;
        r = 1;
    }
    c->rank = r;
}

/* The output dim (not the innermost) read with source stride 1, when tiling pays. */
static int pick_tile_dim(const scopy *c) {
    int a = c->rank - 1;
    if (c->rank < 2 || c->strides[a] == 1 || c->strides[a] == 0 || c->dims[a] < 8) return -1;
    if (c->elem != 1 && c->elem != 2 && c->elem != 4 && c->elem != 8) return -1;
    for (int d = a - 1; d >= 0; d--)
        if (c->strides[d] == 1 && c->dims[d] >= 8) return d;
    return -1;
}

void ak__tops_strided_copy(const ak__op_ctx *ctx, void *dst, const void *src, size_t elem,
                           int rank, const int64_t *dims, const int64_t *src_strides) {
    uint64_t count = (uint64_t)ak__tops_prod(dims, 0, rank);
    if (count == 0) return;
    scopy c = {.dst = dst, .src = src, .elem = elem};
    simplify(&c, rank, dims, src_strides);
    c.tile_b = pick_tile_dim(&c);
    int parallel = count * elem >= (1u << 16) && ctx->pool;
    size_t items, grain;
    ak_parallel_fn fn;
    if (c.tile_b >= 0) {
        int64_t bands = (c.dims[c.tile_b] + TILE - 1) / TILE;
        items = (size_t)(count / (uint64_t)(c.dims[c.tile_b] * c.dims[c.rank - 1]) * bands);
        grain = 1;
        fn = scopy_tiles;
    } else {
        uint64_t n = (uint64_t)c.dims[c.rank - 1];
        items = (size_t)(count / n);
        grain = n >= 16384 ? 1 : (size_t)(16384 / n);
        fn = scopy_rows;
    }
    if (parallel)
        (void)ak_threadpool_parallel_for(ctx->pool, items, grain, fn, &c);
    else
        fn(&c, 0, items, 0);
}
