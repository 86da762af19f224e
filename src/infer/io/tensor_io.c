/* Tensors in files: serialized ONNX TensorProto (.pb, the test_data_set format) and
 * NumPy .npy (read and write), for ak run / ak compare and the conformance runner; and
 * SequenceProto / OptionalProto .pb files, read as packed values. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "infer/onnx/onnx_internal.h"
#include "infer/ops/sequence/packed.h"

struct ak_tensor_file {
    char *name;          /* TensorProto name, "" for .npy */
    ak_tensor view;
    int64_t dims[AK_IR_MAX_RANK];
    ak__ir_graph *owner; /* .pb: owns the payload */
    void *data;          /* .npy: owns the payload */
};

static ak_status file_new(ak_tensor_file **out) {
    *out = calloc(1, sizeof **out);
    if (!*out) return AK_FAIL(AK_ERR_NO_MEMORY, "tensor file: out of memory");
    (*out)->view.dims = (*out)->dims;
    return AK_OK;
}

void ak_tensor_file_free(ak_tensor_file *f) {
    if (!f) return;
    free(f->name);
    ak__ir_graph_free(f->owner);
    ak_free(f->data);
    free(f);
}

ak_status ak_tensor_file_get(const ak_tensor_file *f, const char **name, ak_tensor *out) {
    AK_ARG_CHECK(f && out, "ak_tensor_file_get: NULL argument");
    if (name) *name = f->name;
    *out = f->view;
    return AK_OK;
}

static ak_status pb_convert(ak_tensor_file *f, const Akonnx__TensorProto *p, const char *path) {
    AK_CHECK(ak__ir_graph_create(&f->owner));
    ak__onnx_ctx ctx = {NULL, -1};
    ak__ir_tensor *t;
    AK_CHECK(ak__onnx_tensor(f->owner, &ctx, p, path, &t));
    if (t->rank > AK_IR_MAX_RANK)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "'%.200s': rank %d is too large", path, t->rank);
    f->name = strdup(p->name ? p->name : "");
    if (!f->name) return AK_FAIL(AK_ERR_NO_MEMORY, "tensor file: out of memory");
    f->view.type = t->type;
    f->view.rank = t->rank;
    for (int i = 0; i < t->rank; i++) f->dims[i] = t->dims[i];
    f->view.data = t->data;
    return AK_OK;
}

ak_status ak_tensor_load_pb(const char *path, ak_tensor_file **out) {
    AK_ARG_CHECK(path && out, "ak_tensor_load_pb: NULL argument");
    *out = NULL;
    uint8_t *bytes;
    size_t size;
    AK_CHECK(ak__onnx_read_file(path, &bytes, &size));
    Akonnx__TensorProto *p = NULL;
    ak_tensor_file *f = NULL;
    ak_status st = ak__onnx_decode_tensor(bytes, size, &p);
    if (st == AK_OK) st = file_new(&f);
    if (st == AK_OK) st = pb_convert(f, p, path);
    ak__onnx_tensor_free(p);
    free(bytes);
    if (st != AK_OK) {
        ak_tensor_file_free(f);
        return st;
    }
    *out = f;
    return AK_OK;
}

/* ---- NumPy .npy --------------------------------------------------------------------- */

static const struct {
    const char *descr;
    ak_elem_type type;
} npy_types[] = {
    {"f4", AK_ELEM_F32}, {"f8", AK_ELEM_F64}, {"f2", AK_ELEM_F16}, {"i8", AK_ELEM_I64},
    {"i4", AK_ELEM_I32}, {"i2", AK_ELEM_I16}, {"i1", AK_ELEM_I8},  {"u1", AK_ELEM_U8},
    {"u2", AK_ELEM_U16}, {"u4", AK_ELEM_U32}, {"u8", AK_ELEM_U64}, {"b1", AK_ELEM_BOOL},
};

/* descr like '<f4' or '|u1': little-endian or byte-sized only. */
static ak_status npy_descr(const char *d, const char *path, ak_elem_type *out) {
    if ((d[0] == '<' || d[0] == '|' || d[0] == '=') && d[1])
        for (size_t i = 0; i < sizeof npy_types / sizeof *npy_types; i++)
            if (strncmp(d + 1, npy_types[i].descr, 2) == 0 && d[3] == '\'') {
                *out = npy_types[i].type;
                return AK_OK;
            }
    return AK_FAIL(AK_ERR_UNSUPPORTED, "'%.200s': NumPy dtype '%.8s' is not supported "
                   "(little-endian bool, int, uint and float only)", path, d);
}

static ak_status npy_shape(const char *s, const char *path, ak_tensor_file *f) {
    if (*s != '(') return AK_FAIL(AK_ERR_INVALID_ARG, "'%.200s': bad .npy shape", path);
    s++;
    int rank = 0;
    for (;;) {
        while (*s == ' ' || *s == ',') s++;
        if (*s == ')') break;
        char *end;
        errno = 0;
        long long d = strtoll(s, &end, 10);
        if (end == s || d < 0 || errno || rank == AK_IR_MAX_RANK)
            return AK_FAIL(AK_ERR_INVALID_ARG, "'%.200s': bad .npy shape", path);
        f->dims[rank++] = d;
        s = end;
    }
    f->view.rank = rank;
    return AK_OK;
}

static ak_status npy_header(const uint8_t *b, size_t size, const char *path, ak_tensor_file *f,
                            size_t *data_off) {
    if (size < 10 || memcmp(b, "\x93NUMPY", 6) != 0)
        return AK_FAIL(AK_ERR_INVALID_ARG, "'%.200s' is not a .npy file", path);
    size_t hoff = b[6] == 1 ? 10 : 12; /* version 1: a 2-byte header length, later: 4 */
    if (size < hoff)
        return AK_FAIL(AK_ERR_INVALID_ARG, "'%.200s': truncated .npy header", path);
    size_t hlen = b[6] == 1 ? (size_t)b[8] | (size_t)b[9] << 8
                            : (size_t)b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 |
                                  (size_t)b[11] << 24;
    if (hoff + hlen > size || hlen > 65536)
        return AK_FAIL(AK_ERR_INVALID_ARG, "'%.200s': truncated .npy header", path);
    char header[65537];
    memcpy(header, b + hoff, hlen);
    header[hlen] = '\0';
    const char *d = strstr(header, "'descr':"), *fo = strstr(header, "'fortran_order':"),
               *sh = strstr(header, "'shape':");
    if (!d || !fo || !sh) return AK_FAIL(AK_ERR_INVALID_ARG, "'%.200s': bad .npy header", path);
    d = strchr(d + 8, '\'');
    if (!d) return AK_FAIL(AK_ERR_INVALID_ARG, "'%.200s': bad .npy descr", path);
    AK_CHECK(npy_descr(d + 1, path, &f->view.type));
    if (strncmp(fo + 16, " True", 5) == 0)
        return AK_FAIL(AK_ERR_UNSUPPORTED, "'%.200s': Fortran-order arrays are not supported", path);
    sh += 8;
    while (*sh == ' ') sh++;
    AK_CHECK(npy_shape(sh, path, f));
    *data_off = hoff + hlen;
    return AK_OK;
}

ak_status ak_tensor_load_npy(const char *path, ak_tensor_file **out) {
    AK_ARG_CHECK(path && out, "ak_tensor_load_npy: NULL argument");
    *out = NULL;
    uint8_t *bytes;
    size_t size, off = 0;
    AK_CHECK(ak__onnx_read_file(path, &bytes, &size));
    ak_tensor_file *f = NULL;
    ak_status st = file_new(&f);
    if (st == AK_OK) st = npy_header(bytes, size, path, f, &off);
    uint64_t count = 1;
    for (int i = 0; st == AK_OK && i < f->view.rank; i++) {
        if (f->dims[i] && count > ((uint64_t)1 << 40) / (uint64_t)f->dims[i])
            st = AK_FAIL(AK_ERR_INVALID_ARG, "'%.200s': shape too large", path);
        count *= (uint64_t)f->dims[i];
    }
    size_t nbytes = st == AK_OK ? (size_t)count * ak_elem_type_size(f->view.type) : 0;
    if (st == AK_OK && size - off < nbytes)
        st = AK_FAIL(AK_ERR_INVALID_ARG, "'%.200s': %zu data bytes, the header needs %zu", path,
                     size - off, nbytes);
    if (st == AK_OK) st = ak_alloc(nbytes, &f->data);
    if (st == AK_OK) {
        memcpy(f->data, bytes + off, nbytes);
        f->view.data = f->data;
        f->name = strdup("");
        if (!f->name) st = AK_FAIL(AK_ERR_NO_MEMORY, "tensor file: out of memory");
    }
    free(bytes);
    if (st != AK_OK) {
        ak_tensor_file_free(f);
        return st;
    }
    *out = f;
    return AK_OK;
}

static const char *npy_descr_of(ak_elem_type type) {
    for (size_t i = 0; i < sizeof npy_types / sizeof *npy_types; i++)
        if (npy_types[i].type == type) return npy_types[i].descr;
    return NULL;
}

ak_status ak_tensor_save_npy(const char *path, const ak_tensor *t) {
    AK_ARG_CHECK(path && t, "ak_tensor_save_npy: NULL argument");
    const char *descr = npy_descr_of(t->type);
    if (!descr)
        return AK_FAIL(AK_ERR_UNSUPPORTED, "'%.200s': %s has no .npy dtype here", path,
                       ak_elem_type_name(t->type));
    char header[1024];
    int n = snprintf(header, sizeof header, "{'descr': '%c%s', 'fortran_order': False, 'shape': (",
                     descr[1] == '1' ? '|' : '<', descr);
    uint64_t count = 1;
    for (int i = 0; i < t->rank; i++) {
        n += snprintf(header + n, sizeof header - (size_t)n, "%lld,%s", (long long)t->dims[i],
                      i + 1 < t->rank ? " " : "");
        count *= (uint64_t)t->dims[i];
    }
    if (t->rank > 1) n--; /* numpy writes (2, 3) but (5,) */
    n += snprintf(header + n, sizeof header - (size_t)n, "), }");
    /* pad with spaces so the data starts on a 64-byte boundary, header ends in '\n' */
    size_t total = 10 + (size_t)n + 1;
    size_t pad = (64 - total % 64) % 64;
    FILE *fp = fopen(path, "wb");
    if (!fp) return AK_FAIL(AK_ERR_IO, "cannot write '%.200s': %s", path, strerror(errno));
    size_t hlen = (size_t)n + pad + 1;
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(hlen & 0xff),
                             (unsigned char)(hlen >> 8)};
    fwrite(pre, 1, sizeof pre, fp);
    fwrite(header, 1, (size_t)n, fp);
    for (size_t i = 0; i < pad; i++) fputc(' ', fp);
    fputc('\n', fp);
    size_t nbytes = (size_t)count * ak_elem_type_size(t->type);
    int ok = fwrite(t->data, 1, nbytes, fp) == nbytes;
    if (fclose(fp) != 0 || !ok)
        return AK_FAIL(AK_ERR_IO, "writing '%.200s' failed: %s", path, strerror(errno));
    return AK_OK;
}

/* ---- SequenceProto and OptionalProto (.pb): packed sequence and optional values ----------
 * Read with a small wire-format walk; each element is a TensorProto decoded by the guarded
 * decoder above. The result is packed as ak_session_run takes it (ops/sequence/packed.h). */

enum { PB_VARINT = 0, PB_FIXED64 = 1, PB_LEN = 2, PB_FIXED32 = 5 };
/* SequenceProto.elem_type / OptionalProto.elem_type values */
enum { PB_ELEM_TENSOR = 1, PB_ELEM_SEQUENCE = 3 };

typedef struct pb_field {
    uint32_t num;
    int wire;
    uint64_t value;     /* PB_VARINT */
    const uint8_t *data; /* PB_LEN */
    size_t len;
} pb_field;

static int pb_varint(const uint8_t **p, const uint8_t *end, uint64_t *out) {
    uint64_t v = 0;
    for (int shift = 0; shift < 64 && *p < end; shift += 7) {
        uint8_t b = *(*p)++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return 0;
        }
    }
    return -1;
}

/* The next field at *p: 1 when read, 0 at the end, -1 on malformed bytes. */
static int pb_next(const uint8_t **p, const uint8_t *end, pb_field *f) {
    if (*p >= end) return 0;
    uint64_t key;
    if (pb_varint(p, end, &key) || (key >> 3) == 0 || (key >> 3) > UINT32_MAX) return -1;
    f->num = (uint32_t)(key >> 3);
    f->wire = (int)(key & 7);
    switch (f->wire) {
    case PB_VARINT: return pb_varint(p, end, &f->value) ? -1 : 1;
    case PB_FIXED64: if (end - *p < 8) return -1; *p += 8; return 1;
    case PB_FIXED32: if (end - *p < 4) return -1; *p += 4; return 1;
    case PB_LEN:
        if (pb_varint(p, end, &f->value) || f->value > (uint64_t)(end - *p)) return -1;
        f->data = *p;
        f->len = (size_t)f->value;
        *p += f->len;
        return 1;
    default: return -1;
    }
}

typedef struct seq_reader {
    ak_tensor_file *f;
    const char *path;
    ak__tensor items[AK__SEQ_MAX];
    uint64_t n;
    ak_elem_type type;
} seq_reader;

static ak_status seq_add_tensor(seq_reader *r, const uint8_t *bytes, size_t len) {
    if (r->n == AK__SEQ_MAX)
        return AK_FAIL(AK_ERR_UNSUPPORTED, "'%.200s': more than %d sequence elements", r->path,
                       AK__SEQ_MAX);
    Akonnx__TensorProto *p = NULL;
    ak__ir_tensor *t = NULL;
    ak__onnx_ctx ctx = {NULL, -1};
    ak_status st = ak__onnx_decode_tensor(bytes, len, &p);
    if (st == AK_OK) st = ak__onnx_tensor(r->f->owner, &ctx, p, r->path, &t);
    ak__onnx_tensor_free(p);
    AK_CHECK(st);
    if (t->type == AK_ELEM_STRING)
        return AK_FAIL(AK_ERR_UNSUPPORTED, "'%.200s': sequences of strings are not supported", r->path);
    if (r->n && t->type != r->type)
        return AK_FAIL(AK_ERR_INVALID_ARG, "'%.200s': sequence element %llu is %s, the first %s",
                       r->path, (unsigned long long)r->n, ak_elem_type_name(t->type),
                       ak_elem_type_name(r->type));
    ak__tensor *e = &r->items[r->n];
    AK_CHECK(ak__tensor_set_shape(e, t->type, t->rank, t->dims, r->path));
    e->data = t->data;
    r->type = t->type;
    r->n++;
    return AK_OK;
}

/* Reads the SequenceProto in bytes into r (tensor elements only). */
static ak_status seq_read(seq_reader *r, const uint8_t *bytes, size_t len) {
    const uint8_t *p = bytes, *end = bytes + len;
    pb_field fd;
    int got;
    while ((got = pb_next(&p, end, &fd)) == 1) {
        if (fd.num == 2 && fd.wire == PB_VARINT && fd.value != PB_ELEM_TENSOR && fd.value != 0)
            return AK_FAIL(AK_ERR_UNSUPPORTED, "'%.200s': sequences of element kind %llu (not "
                           "tensors) are not supported", r->path, (unsigned long long)fd.value);
        if (fd.num == 3 && fd.wire == PB_LEN) AK_CHECK(seq_add_tensor(r, fd.data, fd.len));
        else if (fd.num >= 4 && fd.num <= 7)
            return AK_FAIL(AK_ERR_UNSUPPORTED, "'%.200s': sequences of sparse tensors, sequences, "
                           "maps or optionals are not supported", r->path);
    }
    if (got < 0) return AK_FAIL(AK_ERR_INVALID_ARG, "'%.200s': malformed SequenceProto", r->path);
    return AK_OK;
}

static ak_status seq_store(seq_reader *r) {
    const ak__tensor *items[AK__SEQ_MAX];
    for (uint64_t i = 0; i < r->n; i++) items[i] = &r->items[i];
    uint64_t bytes = ak__seq_packed_bytes(items, r->n);
    AK_CHECK(ak_alloc((size_t)bytes, &r->f->data));
    ak__seq_pack(items, r->n, r->type, r->f->data);
    r->f->dims[0] = (int64_t)bytes;
    return AK_OK;
}

static ak_status store_none(ak_tensor_file *f) {
    AK_CHECK(ak_alloc(sizeof(ak__seq_header), &f->data));
    ak__none_write(f->data);
    f->dims[0] = (int64_t)sizeof(ak__seq_header);
    return AK_OK;
}

/* The name (field 1) of a SequenceProto or OptionalProto. */
static ak_status value_name(ak_tensor_file *f, const uint8_t *bytes, size_t len) {
    const uint8_t *p = bytes, *end = bytes + len;
    pb_field fd;
    const char *name = "";
    size_t n = 0;
    while (pb_next(&p, end, &fd) == 1)
        if (fd.num == 1 && fd.wire == PB_LEN) name = (const char *)fd.data, n = fd.len;
    f->name = malloc(n + 1);
    if (f->name) memcpy(f->name, name, n), f->name[n] = '\0';
    return f->name ? AK_OK : AK_FAIL(AK_ERR_NO_MEMORY, "tensor file: out of memory");
}

/* An OptionalProto: its tensor_value (3) or sequence_value (5), or nothing. */
static ak_status optional_read(seq_reader *r, const uint8_t *bytes, size_t len) {
    const uint8_t *p = bytes, *end = bytes + len;
    pb_field fd;
    int got, kind = 0;
    const uint8_t *payload = NULL;
    size_t plen = 0;
    while ((got = pb_next(&p, end, &fd)) == 1) {
        if ((fd.num == 3 || fd.num == 5) && fd.wire == PB_LEN) {
            kind = fd.num == 3 ? PB_ELEM_TENSOR : PB_ELEM_SEQUENCE;
            payload = fd.data, plen = fd.len;
        } else if (fd.num == 4 || fd.num == 6 || fd.num == 7) {
            return AK_FAIL(AK_ERR_UNSUPPORTED, "'%.200s': optionals of sparse tensors, maps or "
                           "optionals are not supported", r->path);
        }
    }
    if (got < 0) return AK_FAIL(AK_ERR_INVALID_ARG, "'%.200s': malformed OptionalProto", r->path);
    if (!kind) return store_none(r->f);
    if (kind == PB_ELEM_SEQUENCE) {
        AK_CHECK(seq_read(r, payload, plen));
        return seq_store(r);
    }
    AK_CHECK(seq_add_tensor(r, payload, plen));
    ak__tensor *t = &r->items[0];
    r->f->view.type = t->type;
    r->f->view.rank = t->rank;
    memcpy(r->f->dims, t->dims, (size_t)t->rank * sizeof *t->dims);
    r->f->view.data = t->data;
    return AK_OK;
}

ak_status ak_value_load_pb(const char *path, ak_value_kind kind, ak_tensor_file **out) {
    AK_ARG_CHECK(path && out, "ak_value_load_pb: NULL argument");
    if (kind == AK_VALUE_TENSOR) return ak_tensor_load_pb(path, out);
    *out = NULL;
    if (kind != AK_VALUE_SEQUENCE && kind != AK_VALUE_OPTIONAL)
        return AK_FAIL(AK_ERR_UNSUPPORTED, "'%.200s': only tensors, sequences of tensors and "
                       "optionals are read (value kind %d)", path, (int)kind);
    uint8_t *bytes;
    size_t size;
    AK_CHECK(ak__onnx_read_file(path, &bytes, &size));
    seq_reader *r = calloc(1, sizeof *r);
    ak_status st = r ? file_new(&r->f) : AK_FAIL(AK_ERR_NO_MEMORY, "tensor file: out of memory");
    if (st == AK_OK) st = ak__ir_graph_create(&r->f->owner);
    if (st == AK_OK) st = value_name(r->f, bytes, size);
    if (st == AK_OK) {
        r->path = path;
        r->f->view.type = AK_ELEM_U8;
        r->f->view.rank = 1;
        st = kind == AK_VALUE_SEQUENCE ? seq_read(r, bytes, size) : optional_read(r, bytes, size);
        if (st == AK_OK && kind == AK_VALUE_SEQUENCE) st = seq_store(r);
        if (st == AK_OK && r->f->view.type == AK_ELEM_U8 && r->f->view.rank == 1 && r->f->data)
            r->f->view.data = r->f->data;
    }
    free(bytes);
    if (st != AK_OK) {
        if (r) ak_tensor_file_free(r->f);
        free(r);
        return st;
    }
    *out = r->f;
    free(r);
    return AK_OK;
}
