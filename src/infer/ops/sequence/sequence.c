/* Sequence operators (SequenceEmpty/Construct/Insert/Erase/At/Length, ConcatFromSequence,
 * SplitToSequence). A sequence value travels through the runtime as an opaque uint8 tensor
 * holding a packed list (layout in packed.h), so the memory plan, lifetimes and folding
 * need no notion of sequences. */
#include <string.h>

#include "infer/ops/sequence/packed.h"
#include "infer/runtime/op.h"

static ak_status seq_open(const ak__op_ctx *ctx, const ak__tensor *t, ak__seq_view *v) {
    if (t->type != AK_ELEM_U8 || ak__seq_open_bytes(t->data, ak__tensor_nbytes(t), v))
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "input is not a sequence%s",
                          ak__is_none(t) ? " (it is an empty optional)" : "");
    return AK_OK;
}

/* ---- writing: a list of element tensors -> output 0 ---------------------------------- */

typedef struct seq_list {
    const ak__tensor *items[AK__SEQ_MAX];
    uint64_t count;
    ak_elem_type type;
    /* SplitToSequence along an inner axis: items are strided slices of split_src, item i
     * starting at split_start[i] along an axis with `outer` blocks of split_len rows of
     * split_row bytes before it */
    const ak__tensor *split_src;
    uint64_t outer, split_len, split_row, split_start[AK__SEQ_MAX];
} seq_list;

static uint64_t list_bytes(const seq_list *l) {
    uint64_t n = ak__seq_entries_end(l->count);
    for (uint64_t i = 0; i < l->count; i++) n += ak__seq_align64(ak__tensor_nbytes(l->items[i]));
    return n;
}

static ak_status list_set_output(ak__op_ctx *ctx, const seq_list *l) {
    int64_t bytes = (int64_t)list_bytes(l);
    return ak__op_set_output(ctx, 0, AK_ELEM_U8, 1, &bytes);
}

/* Gathers item i of a split list: `outer` blocks of its rows. */
static void copy_slice(const seq_list *l, uint64_t i, uint8_t *dst) {
    uint64_t rows = l->outer ? ak__tensor_nbytes(l->items[i]) / l->outer / l->split_row : 0;
    const uint8_t *src = l->split_src->data;
    for (uint64_t o = 0; o < l->outer; o++)
        memcpy(dst + o * rows * l->split_row,
               src + (o * l->split_len + l->split_start[i]) * l->split_row, rows * l->split_row);
}

static void list_write(const seq_list *l, ak__tensor *out) {
    uint8_t *base = out->data;
    ak__seq_header *h = (ak__seq_header *)base;
    memset(h, 0, sizeof *h);
    h->magic = AK__SEQ_MAGIC;
    h->count = l->count;
    h->elem_type = l->type;
    ak__seq_entry *e = (ak__seq_entry *)(h + 1);
    uint64_t off = ak__seq_entries_end(l->count);
    for (uint64_t i = 0; i < l->count; i++) {
        const ak__tensor *t = l->items[i];
        memset(&e[i], 0, sizeof e[i]);
        e[i].type = t->type;
        e[i].rank = t->rank;
        memcpy(e[i].dims, t->dims, (size_t)t->rank * sizeof *t->dims);
        e[i].offset = off;
        e[i].nbytes = ak__tensor_nbytes(t);
        if (l->split_src) copy_slice(l, i, base + off);
        else if (e[i].nbytes) memmove(base + off, t->data, e[i].nbytes);
        off += ak__seq_align64(e[i].nbytes);
    }
}

/* Builds the list of a sequence input's elements (tensors viewing into it). */
static ak_status list_from(const ak__op_ctx *ctx, const ak__tensor *seq, seq_list *l,
                           ak__tensor *storage) {
    ak__seq_view v;
    AK_CHECK(seq_open(ctx, seq, &v));
    l->count = v.h->count;
    l->split_src = NULL;
    l->type = (ak_elem_type)v.h->elem_type;
    for (uint64_t i = 0; i < l->count; i++) {
        storage[i] = ak__seq_elem(&v, i);
        l->items[i] = &storage[i];
    }
    return AK_OK;
}

static ak_status position(const ak__op_ctx *ctx, uint32_t input, int64_t n, int64_t dflt,
                          int allow_end, int64_t *out) {
    const ak__tensor *p = ak__op_in(ctx, input);
    int64_t pos = dflt, vals[1];
    size_t k;
    if (p) {
        AK_CHECK(ak__op_read_ints(ctx, p, "position", vals, 1, &k));
        if (k != 1) return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "position must be a scalar");
        pos = vals[0];
    }
    int64_t hi = n + (allow_end ? 1 : 0);
    if (pos < -n || pos >= hi)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_ARG, "position %lld is out of range for %lld elements",
                          (long long)pos, (long long)n);
    *out = pos < 0 ? pos + n : pos;
    return AK_OK;
}

/* Each sequence op computes its element list in both reshape (for the size) and run
 * (for the bytes); the lists only view inputs, so nothing is allocated: reshape keeps
 * them on the stack, run in the workspace. */
typedef struct seq_work {
    seq_list list;
    ak__tensor views[AK__SEQ_MAX];
    ak__tensor extra;
} seq_work;

typedef ak_status (*build_fn)(ak__op_ctx *ctx, seq_work *w);

static ak_status seq_reshape_with(ak__op_ctx *ctx, build_fn build) {
    ctx->workspace_bytes = sizeof(seq_work);
    seq_work w;
    AK_CHECK(build(ctx, &w));
    return list_set_output(ctx, &w.list);
}

static ak_status seq_run_with(ak__op_ctx *ctx, build_fn build) {
    seq_work *w = ctx->workspace;
    AK_CHECK(build(ctx, w));
    list_write(&w->list, ctx->outputs[0]);
    return AK_OK;
}

static ak_status add_item(const ak__op_ctx *ctx, seq_list *l, const ak__tensor *t, uint64_t at) {
    if (l->count == AK__SEQ_MAX)
        return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED, "sequences hold at most %d elements", AK__SEQ_MAX);
    if (l->count && t->type != l->type)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "element type %s differs from the sequence's %s",
                          ak_elem_type_name(t->type), ak_elem_type_name(l->type));
    memmove(&l->items[at + 1], &l->items[at], (size_t)(l->count - at) * sizeof *l->items);
    l->items[at] = t;
    l->type = t->type;
    l->count++;
    return AK_OK;
}

static ak_status build_empty(ak__op_ctx *ctx, seq_work *w) {
    w->list.count = 0;
    w->list.split_src = NULL;
    w->list.type = (ak_elem_type)ak__attr_int(ctx->node, "dtype", AK_ELEM_F32);
    return AK_OK;
}

static ak_status build_construct(ak__op_ctx *ctx, seq_work *w) {
    w->list.count = 0;
    w->list.split_src = NULL;
    for (uint32_t i = 0; i < ctx->num_inputs; i++) {
        const ak__tensor *t;
        AK_CHECK(ak__op_require(ctx, i, &t));
        AK_CHECK(add_item(ctx, &w->list, t, w->list.count));
    }
    return AK_OK;
}

static ak_status build_insert(ak__op_ctx *ctx, seq_work *w) {
    const ak__tensor *seq, *t;
    AK_CHECK(ak__op_require(ctx, 0, &seq));
    AK_CHECK(ak__op_require(ctx, 1, &t));
    AK_CHECK(list_from(ctx, seq, &w->list, w->views));
    int64_t n = (int64_t)w->list.count, at;
    AK_CHECK(position(ctx, 2, n, n, 1, &at));
    return add_item(ctx, &w->list, t, (uint64_t)at);
}

static ak_status build_erase(ak__op_ctx *ctx, seq_work *w) {
    const ak__tensor *seq;
    AK_CHECK(ak__op_require(ctx, 0, &seq));
    AK_CHECK(list_from(ctx, seq, &w->list, w->views));
    int64_t n = (int64_t)w->list.count, at;
    if (!n) return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_ARG, "erasing from an empty sequence");
    AK_CHECK(position(ctx, 1, n, n - 1, 0, &at));
    memmove(&w->list.items[at], &w->list.items[at + 1], (size_t)(n - at - 1) * sizeof *w->list.items);
    w->list.count--;
    return AK_OK;
}

/* SplitToSequence: chunks along axis, sizes from `split` (scalar: equal chunks with a
 * smaller last one; 1-D: the sizes) or 1 each (then squeezed unless keepdims). */
static ak_status build_split(ak__op_ctx *ctx, seq_work *w) {
    const ak__tensor *x;
    AK_CHECK(ak__op_require(ctx, 0, &x));
    int axis;
    AK_CHECK(ak__op_axis(ctx, ak__attr_int(ctx->node, "axis", 0), x->rank, 0, &axis));
    int64_t len = x->dims[axis], sizes[AK__SEQ_MAX];
    size_t n = 0;
    const ak__tensor *sp = ak__op_in(ctx, 1);
    int squeeze = !sp && !ak__attr_int(ctx->node, "keepdims", 1);
    if (!sp) {
        if (len > AK__SEQ_MAX) return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED, "more than %d chunks", AK__SEQ_MAX);
        for (n = 0; n < (size_t)len; n++) sizes[n] = 1;
    } else if (sp->rank == 0) {
        int64_t c; /* read through the checked reader: a value of another type (an
                    * undefined one has no data at all) is refused, not reinterpreted */
        size_t k;
        AK_CHECK(ak__op_read_ints(ctx, sp, "split", &c, 1, &k));
        if (k != 1) return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "split must hold one value");
        if (c <= 0 || (len + c - 1) / c > AK__SEQ_MAX)
            return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "split size %lld is invalid", (long long)c);
        for (int64_t done = 0; done < len; done += c) sizes[n++] = len - done < c ? len - done : c;
    } else {
        AK_CHECK(ak__op_read_ints(ctx, sp, "split", sizes, AK__SEQ_MAX, &n));
        int64_t sum = 0;
        for (size_t i = 0; i < n; i++) {
            if (sizes[i] < 0) /* (a negative one could have cancelled a too large one) */
                return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "split size %lld is negative",
                                  (long long)sizes[i]);
            sum += sizes[i];
        }
        if (sum != len) return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "split sizes do not add up to %lld", (long long)len);
    }
    uint64_t outer = 1, inner = ak_elem_type_size(x->type);
    for (int d = 0; d < axis; d++) outer *= (uint64_t)x->dims[d];
    for (int d = axis + 1; d < x->rank; d++) inner *= (uint64_t)x->dims[d];
    w->list.count = 0;
    w->list.type = x->type;
    w->list.split_src = outer != 1 ? x : NULL;
    w->list.outer = outer;
    w->list.split_len = (uint64_t)len;
    w->list.split_row = inner;
    int64_t start = 0;
    for (size_t i = 0; i < n; i++) {
        ak__tensor *t = &w->views[i];
        *t = *x;
        t->dims[axis] = sizes[i];
        if (squeeze) {
            memmove(&t->dims[axis], &t->dims[axis + 1], (size_t)(x->rank - axis - 1) * sizeof *t->dims);
            t->rank--;
        }
        t->count = x->count / (uint64_t)(len ? len : 1) * (uint64_t)sizes[i];
        t->data = (uint8_t *)x->data + (uint64_t)start * inner;
        w->list.split_start[i] = (uint64_t)start;
        start += sizes[i];
        AK_CHECK(add_item(ctx, &w->list, t, w->list.count));
    }
    return AK_OK;
}

#define SEQ_OP(fn)                                                                        \
    static ak_status fn##_reshape(ak__op_ctx *ctx) { return seq_reshape_with(ctx, fn); }  \
    static ak_status fn##_run(ak__op_ctx *ctx) { return seq_run_with(ctx, fn); }
SEQ_OP(build_empty)
SEQ_OP(build_construct)
SEQ_OP(build_insert)
SEQ_OP(build_erase)
SEQ_OP(build_split)

/* ---- reading: SequenceAt, SequenceLength, ConcatFromSequence -------------------------- */

static ak_status at_element(const ak__op_ctx *ctx, ak__tensor *out) {
    const ak__tensor *seq;
    ak__seq_view v;
    AK_CHECK(ak__op_require(ctx, 0, &seq));
    AK_CHECK(seq_open(ctx, seq, &v));
    int64_t at;
    AK_CHECK(position(ctx, 1, (int64_t)v.h->count, 0, 0, &at));
    *out = ak__seq_elem(&v, (uint64_t)at);
    return AK_OK;
}

static ak_status at_reshape(ak__op_ctx *ctx) {
    ak__tensor e;
    AK_CHECK(at_element(ctx, &e));
    return ak__op_set_output_like(ctx, 0, &e);
}

static ak_status at_run(ak__op_ctx *ctx) {
    ak__tensor e;
    AK_CHECK(at_element(ctx, &e));
    if (e.count) memcpy(ctx->outputs[0]->data, e.data, ak__tensor_nbytes(&e));
    return AK_OK;
}

static ak_status length_reshape(ak__op_ctx *ctx) {
    const ak__tensor *seq;
    ak__seq_view v;
    AK_CHECK(ak__op_require(ctx, 0, &seq));
    AK_CHECK(seq_open(ctx, seq, &v));
    return ak__op_set_output(ctx, 0, AK_ELEM_I64, 0, NULL);
}

static ak_status length_run(ak__op_ctx *ctx) {
    ak__seq_view v;
    AK_CHECK(seq_open(ctx, ctx->inputs[0], &v));
    *(int64_t *)ctx->outputs[0]->data = (int64_t)v.h->count;
    return AK_OK;
}

/* ConcatFromSequence: along axis, or stacked along a new axis with new_axis = 1. */
static ak_status concat_shape(const ak__op_ctx *ctx, ak__seq_view *v, int *axis, ak__tensor *shape) {
    const ak__tensor *seq;
    AK_CHECK(ak__op_require(ctx, 0, &seq));
    AK_CHECK(seq_open(ctx, seq, v));
    if (!v->h->count) return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_ARG, "concatenating an empty sequence");
    int new_axis = (int)ak__attr_int(ctx->node, "new_axis", 0);
    ak__tensor first = ak__seq_elem(v, 0);
    AK_CHECK(ak__op_axis(ctx, ak__attr_int(ctx->node, "axis", 0), first.rank, new_axis, axis));
    *shape = first;
    if (new_axis) {
        if (first.rank == AK_IR_MAX_RANK) return AK_OP_FAIL(ctx->node, AK_ERR_UNSUPPORTED, "rank too large");
        memmove(&shape->dims[*axis + 1], &shape->dims[*axis], (size_t)(first.rank - *axis) * sizeof *shape->dims);
        shape->dims[*axis] = 0;
        shape->rank++;
    } else {
        shape->dims[*axis] = 0;
    }
    for (uint64_t i = 0; i < v->h->count; i++) {
        ak__tensor e = ak__seq_elem(v, i);
        for (int d = 0; d < first.rank; d++)
            if (e.rank != first.rank || (e.dims[d] != first.dims[d] && (new_axis || d != *axis)))
                return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "element %llu's shape does not fit", (unsigned long long)i);
        shape->dims[*axis] += new_axis ? 1 : e.dims[*axis];
    }
    return AK_OK;
}

static ak_status concat_reshape(ak__op_ctx *ctx) {
    ak__seq_view v;
    int axis;
    ak__tensor shape;
    AK_CHECK(concat_shape(ctx, &v, &axis, &shape));
    return ak__op_set_output(ctx, 0, shape.type, shape.rank, shape.dims);
}

static ak_status concat_run(ak__op_ctx *ctx) {
    ak__seq_view v;
    int axis;
    ak__tensor shape;
    AK_CHECK(concat_shape(ctx, &v, &axis, &shape));
    uint64_t outer = 1, esz = ak_elem_type_size(shape.type);
    for (int d = 0; d < axis; d++) outer *= (uint64_t)shape.dims[d];
    uint8_t *dst = ctx->outputs[0]->data;
    for (uint64_t o = 0; o < outer; o++)
        for (uint64_t i = 0; i < v.h->count; i++) {
            ak__tensor e = ak__seq_elem(&v, i);
            uint64_t chunk = outer ? e.count / outer * esz : 0;
            memcpy(dst, (const uint8_t *)e.data + o * chunk, chunk);
            dst += chunk;
        }
    return AK_OK;
}

#define SEQ_DEF(sym, name, since, reshape, run) \
    static const ak__op_def sym = {"", name, since, 0, NULL, NULL, reshape, run};
SEQ_DEF(seq_empty, "SequenceEmpty", 11, build_empty_reshape, build_empty_run)
SEQ_DEF(seq_construct, "SequenceConstruct", 11, build_construct_reshape, build_construct_run)
SEQ_DEF(seq_insert, "SequenceInsert", 11, build_insert_reshape, build_insert_run)
SEQ_DEF(seq_erase, "SequenceErase", 11, build_erase_reshape, build_erase_run)
SEQ_DEF(seq_split, "SplitToSequence", 11, build_split_reshape, build_split_run)
SEQ_DEF(seq_at, "SequenceAt", 11, at_reshape, at_run)
SEQ_DEF(seq_length, "SequenceLength", 11, length_reshape, length_run)
SEQ_DEF(seq_concat, "ConcatFromSequence", 11, concat_reshape, concat_run)

/* optional.c, seqmap.c */
extern const ak__op_def ak__op_optional, ak__op_optional_has_element, ak__op_optional_get_element;
extern const ak__op_def ak__op_sequence_map; /* seqmap.c */

const ak__op_def *const ak__ops_sequence[] = {
    &seq_empty, &seq_construct, &seq_insert, &seq_erase, &seq_split,
    &seq_at,    &seq_length,    &seq_concat,
    &ak__op_optional, &ak__op_optional_has_element, &ak__op_optional_get_element,
    &ak__op_sequence_map, NULL,
};
