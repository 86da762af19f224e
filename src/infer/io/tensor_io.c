/* Tensors in files: serialized ONNX TensorProto (.pb, the test_data_set format) and
 * NumPy .npy (read and write), for ak run / ak compare and the conformance runner. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "infer/onnx/onnx_internal.h"

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
    if (t->type == AK_ELEM_STRING)
        return AK_FAIL(AK_ERR_UNSUPPORTED, "'%.200s': string tensors are not supported", path);
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
