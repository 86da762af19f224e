/* Packed sequences and the empty-optional marker (layout in packed.h): the helpers the
 * sequence and optional operators share, and the public calls that let a caller build and
 * read such values at the graph boundary. */
#include <string.h>

#include "core/check.h"
#include "infer/ops/sequence/packed.h"

int ak__seq_open_bytes(const void *bytes, uint64_t size, ak__seq_view *v) {
    const ak__seq_header *h = bytes;
    if (!bytes || size < sizeof *h || ((uintptr_t)bytes & 7) || h->magic != AK__SEQ_MAGIC ||
        h->count > AK__SEQ_MAX || ak__seq_entries_end(h->count) > size)
        return -1;
    v->h = h;
    v->e = (const ak__seq_entry *)(h + 1);
    v->base = bytes;
    for (uint64_t i = 0; i < h->count; i++) {
        const ak__seq_entry *e = &v->e[i];
        if (e->offset > size || e->nbytes > size - e->offset || e->rank < 0 ||
            e->rank > AK_IR_MAX_RANK || e->type <= 0 || e->type >= AK_ELEM_COUNT_ ||
            ak_elem_type_size((ak_elem_type)e->type) == 0)
            return -1;
        uint64_t count = 1;
        for (int d = 0; d < e->rank; d++) {
            uint64_t dim = (uint64_t)e->dims[d];
            if (e->dims[d] < 0 || (dim && count > ((uint64_t)1 << 48) / dim)) return -1;
            count *= (uint64_t)e->dims[d];
        }
        if (count * ak_elem_type_size((ak_elem_type)e->type) != e->nbytes) return -1;
    }
    return 0;
}

ak__tensor ak__seq_elem(const ak__seq_view *v, uint64_t i) {
    ak__tensor t = {0};
    const ak__seq_entry *e = &v->e[i];
    t.type = (ak_elem_type)e->type;
    t.rank = e->rank;
    memcpy(t.dims, e->dims, (size_t)e->rank * sizeof *t.dims);
    t.count = 1;
    for (int d = 0; d < e->rank; d++) t.count *= (uint64_t)e->dims[d];
    t.data = (void *)(v->base + e->offset);
    return t;
}

uint64_t ak__seq_packed_bytes(const ak__tensor *const *items, uint64_t n) {
    uint64_t bytes = ak__seq_entries_end(n);
    for (uint64_t i = 0; i < n; i++) bytes += ak__seq_align64(ak__tensor_nbytes(items[i]));
    return bytes;
}

void ak__seq_pack(const ak__tensor *const *items, uint64_t n, ak_elem_type type, void *out) {
    uint8_t *base = out;
    ak__seq_header *h = out;
    memset(h, 0, sizeof *h);
    h->magic = AK__SEQ_MAGIC;
    h->count = n;
    h->elem_type = type;
    ak__seq_entry *e = (ak__seq_entry *)(h + 1);
    uint64_t off = ak__seq_entries_end(n);
    for (uint64_t i = 0; i < n; i++) {
        const ak__tensor *t = items[i];
        memset(&e[i], 0, sizeof e[i]);
        e[i].type = t->type;
        e[i].rank = t->rank;
        memcpy(e[i].dims, t->dims, (size_t)t->rank * sizeof *t->dims);
        e[i].offset = off;
        e[i].nbytes = ak__tensor_nbytes(t);
        if (e[i].nbytes) memmove(base + off, t->data, e[i].nbytes);
        off += ak__seq_align64(e[i].nbytes);
    }
}

void ak__none_write(void *out) {
    ak__seq_header *h = out;
    memset(h, 0, sizeof *h);
    h->magic = AK__NONE_MAGIC;
}

int ak__is_none(const ak__tensor *t) {
    const ak__seq_header *h = t->data;
    return t->type == AK_ELEM_U8 && t->rank == 1 && t->count == sizeof *h && h &&
           h->magic == AK__NONE_MAGIC && h->count == 0;
}

/* ---- public calls ------------------------------------------------------------------------ */

/* The runtime view of a caller's tensor (no copy); fails on a bad rank or shape. */
static ak_status view_of(const ak_tensor *t, const char *what, ak__tensor *out) {
    AK_ARG_CHECK(t && (t->rank == 0 || t->dims), "%s: NULL tensor or dims", what);
    AK_CHECK(ak__tensor_set_shape(out, t->type, t->rank, t->dims, what));
    out->data = t->data;
    AK_ARG_CHECK(out->data || out->count == 0, "%s: data is NULL", what);
    return AK_OK;
}

ak_status ak_sequence_pack(ak_elem_type elem_type, const ak_tensor *elems, size_t n, void *buf,
                           size_t cap, size_t *size) {
    AK_ARG_CHECK(size && (elems || n == 0), "ak_sequence_pack: NULL argument");
    if (n > AK__SEQ_MAX)
        return AK_FAIL(AK_ERR_UNSUPPORTED, "ak_sequence_pack: %zu elements (at most %d)", n,
                       AK__SEQ_MAX);
    AK_ARG_CHECK(ak_elem_type_size(elem_type) > 0, "ak_sequence_pack: element type %s cannot be "
                 "packed", ak_elem_type_name(elem_type));
    ak__tensor views[AK__SEQ_MAX];
    const ak__tensor *items[AK__SEQ_MAX];
    for (size_t i = 0; i < n; i++) {
        AK_CHECK(view_of(&elems[i], "ak_sequence_pack: element", &views[i]));
        AK_ARG_CHECK(views[i].type == elem_type, "ak_sequence_pack: element %zu has type %s, the "
                     "sequence %s", i, ak_elem_type_name(views[i].type),
                     ak_elem_type_name(elem_type));
        items[i] = &views[i];
    }
    uint64_t need = ak__seq_packed_bytes(items, n);
    *size = (size_t)need;
    if (!buf) return AK_OK;
    AK_ARG_CHECK(cap >= need, "ak_sequence_pack: buffer of %zu bytes, %llu needed", cap,
                 (unsigned long long)need);
    AK_ARG_CHECK(((uintptr_t)buf & 63) == 0, "ak_sequence_pack: buffer is not 64-byte aligned");
    ak__seq_pack(items, n, elem_type, buf);
    return AK_OK;
}

ak_status ak_optional_none(void *buf, size_t cap, size_t *size) {
    AK_ARG_CHECK(size, "ak_optional_none: NULL size");
    *size = sizeof(ak__seq_header);
    if (!buf) return AK_OK;
    AK_ARG_CHECK(cap >= sizeof(ak__seq_header), "ak_optional_none: buffer of %zu bytes, %zu "
                 "needed", cap, sizeof(ak__seq_header));
    AK_ARG_CHECK(((uintptr_t)buf & 63) == 0, "ak_optional_none: buffer is not 64-byte aligned");
    ak__none_write(buf);
    return AK_OK;
}

static uint64_t packed_size(const ak_tensor *t) {
    return t && t->type == AK_ELEM_U8 && t->rank == 1 && t->dims && t->dims[0] > 0
               ? (uint64_t)t->dims[0] : 0;
}

ak_value_kind ak_value_kind_of(const ak_tensor *value) {
    ak__seq_view v;
    uint64_t size = packed_size(value);
    if (!size || !value->data) return AK_VALUE_TENSOR;
    if (ak__seq_open_bytes(value->data, size, &v) == 0) return AK_VALUE_SEQUENCE;
    const ak__seq_header *h = value->data;
    if (size == sizeof *h && h->magic == AK__NONE_MAGIC && h->count == 0) return AK_VALUE_OPTIONAL;
    return AK_VALUE_TENSOR;
}

static ak_status open_public(const ak_tensor *seq, const char *what, ak__seq_view *v) {
    AK_ARG_CHECK(seq, "%s: NULL sequence", what);
    if (ak__seq_open_bytes(seq->data, packed_size(seq), v))
        return AK_FAIL(AK_ERR_INVALID_ARG, "%s: the tensor is not a packed sequence", what);
    return AK_OK;
}

ak_status ak_sequence_length(const ak_tensor *seq, size_t *n, ak_elem_type *elem_type) {
    ak__seq_view v;
    AK_CHECK(open_public(seq, "ak_sequence_length", &v));
    if (n) *n = (size_t)v.h->count;
    if (elem_type) *elem_type = (ak_elem_type)v.h->elem_type;
    return AK_OK;
}

ak_status ak_sequence_at(const ak_tensor *seq, size_t i, ak_tensor *out) {
    ak__seq_view v;
    AK_ARG_CHECK(out, "ak_sequence_at: NULL out");
    AK_CHECK(open_public(seq, "ak_sequence_at", &v));
    AK_ARG_CHECK(i < v.h->count, "ak_sequence_at: element %zu of %llu", i,
                 (unsigned long long)v.h->count);
    const ak__seq_entry *e = &v.e[i];
    out->type = (ak_elem_type)e->type;
    out->rank = e->rank;
    out->dims = e->dims;
    out->data = (void *)(v.base + e->offset);
    return AK_OK;
}
