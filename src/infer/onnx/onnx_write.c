/* accelkit IR -> ONNX ModelProto bytes: the inverse of onnx_load.c, encoded by hand
 * (the protobuf wire format is small: varints, fixed32 floats and length-prefixed
 * messages; field numbers as in onnx.proto).
 *
 * What is written: IR version, producer, model version, opset imports, and the main
 * graph with its nodes (attributes of every kind the IR keeps, subgraphs included),
 * initializers (raw little-endian data; strings in string_data), inputs and outputs with
 * their types and (symbolic) shapes, and the types of intermediate values. A graph view
 * replaces the main graph's nodes and initializers by what a session's optimizer left.
 *
 * Domains: the engine's own operators live in "com.accelkit"; files name that domain
 * "ai.accelkit". A standard operator the optimizer placed at a newer opset than the model
 * imports (LayerNormalization-17 fused in an opset-13 model) is written in "ai.accelkit"
 * too, as the loader reads such a node as the standard operator at the newest opset. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/check.h"
#include "infer/onnx/onnx_internal.h"
#include "infer/onnx/onnx_write.h"

/* ---- the wire format --------------------------------------------------------------------- */

enum { WIRE_VARINT = 0, WIRE_LEN = 2, WIRE_FIXED32 = 5 };

typedef struct wbuf {
    uint8_t *p;
    size_t len, cap;
    int oom; /* an allocation failed: everything after it is dropped, reported at the end */
} wbuf;

static int reserve(wbuf *b, size_t n) {
    if (b->oom) return 0;
    if (b->cap - b->len >= n) return 1;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap - b->len < n) {
        if (cap > SIZE_MAX / 2) return b->oom = 1, 0;
        cap *= 2;
    }
    uint8_t *p = realloc(b->p, cap);
    if (!p) return b->oom = 1, 0;
    b->p = p;
    b->cap = cap;
    return 1;
}

static void put_raw(wbuf *b, const void *data, size_t n) {
    if (n && reserve(b, n)) memcpy(b->p + b->len, data, n), b->len += n;
}

static size_t varint_encode(uint64_t v, uint8_t out[10]) {
    size_t n = 0;
    do {
        out[n] = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v) out[n] |= 0x80;
        n++;
    } while (v);
    return n;
}

static void put_varint(wbuf *b, uint64_t v) {
    uint8_t tmp[10];
    put_raw(b, tmp, varint_encode(v, tmp));
}

static void put_key(wbuf *b, uint32_t field, int wire) { put_varint(b, (uint64_t)field << 3 | (unsigned)wire); }

/* int64 and int32 fields: negative numbers are ten-byte varints (two's complement). */
static void put_int(wbuf *b, uint32_t field, int64_t v) {
    put_key(b, field, WIRE_VARINT);
    put_varint(b, (uint64_t)v);
}

static void put_bytes(wbuf *b, uint32_t field, const void *data, size_t n) {
    put_key(b, field, WIRE_LEN);
    put_varint(b, n);
    put_raw(b, data, n);
}

static void put_str(wbuf *b, uint32_t field, const char *s) {
    if (s && s[0]) put_bytes(b, field, s, strlen(s));
}

static void put_float(wbuf *b, uint32_t field, float f) {
    uint32_t bits;
    memcpy(&bits, &f, 4);
    uint8_t le[4] = {(uint8_t)bits, (uint8_t)(bits >> 8), (uint8_t)(bits >> 16), (uint8_t)(bits >> 24)};
    put_key(b, field, WIRE_FIXED32);
    put_raw(b, le, 4);
}

/* A nested message: begin writes its key and returns where its body starts; end moves
 * the body to make room for its length. */
static size_t begin(wbuf *b, uint32_t field) {
    put_key(b, field, WIRE_LEN);
    return b->len;
}

static void end(wbuf *b, size_t start) {
    if (b->oom) return;
    uint8_t tmp[10];
    size_t body = b->len - start, n = varint_encode(body, tmp);
    if (!reserve(b, n)) return;
    memmove(b->p + start + n, b->p + start, body);
    memcpy(b->p + start, tmp, n);
    b->len += n;
}

/* ---- tensors and types ------------------------------------------------------------------- */

static int host_is_little_endian(void) {
    const uint16_t one = 1;
    return *(const uint8_t *)&one == 1;
}

static void put_tensor(wbuf *b, uint32_t field, const char *name, const ak__ir_tensor *t) {
    size_t at = begin(b, field);
    for (int d = 0; d < t->rank; d++) put_int(b, 1, t->dims[d]);
    put_int(b, 2, t->type);
    put_str(b, 8, name);
    if (t->type == AK_ELEM_STRING) {
        const ak__ir_bytes *s = t->data;
        for (uint64_t i = 0; i < t->count; i++) put_bytes(b, 6, s[i].data, s[i].len);
    } else {
        put_bytes(b, 9, t->data, (size_t)t->count * ak_elem_type_size(t->type));
    }
    end(b, at);
}

static void put_shape(wbuf *b, const ak__ir_value *v) {
    size_t at = begin(b, 2);
    for (int d = 0; d < v->rank; d++) {
        size_t dim = begin(b, 1);
        if (v->dims[d].value >= 0) put_int(b, 1, v->dims[d].value);
        else put_str(b, 2, v->dims[d].param);
        end(b, dim);
    }
    end(b, at);
}

/* TypeProto of a value: tensor (and sparse tensor) types in full; sequences, maps and
 * optionals as their kind only (the IR does not keep their element types). */
static void put_type(wbuf *b, const ak__ir_value *v) {
    uint32_t which = v->kind == AK_VALUE_TENSOR ? 1 : v->kind == AK_VALUE_SEQUENCE ? 4
                   : v->kind == AK_VALUE_MAP ? 5 : v->kind == AK_VALUE_SPARSE_TENSOR ? 8
                   : v->kind == AK_VALUE_OPTIONAL ? 9 : 0;
    if (!which) return;
    size_t at = begin(b, 2), inner = begin(b, which);
    if (which == 1 || which == 8) {
        if (v->type != AK_ELEM_UNDEFINED) put_int(b, 1, v->type);
        if (v->rank >= 0) put_shape(b, v);
    }
    end(b, inner);
    end(b, at);
}

static void put_value_info(wbuf *b, uint32_t field, const ak__ir_value *v) {
    size_t at = begin(b, field);
    put_str(b, 1, v->name);
    put_type(b, v);
    end(b, at);
}

/* ---- graphs ------------------------------------------------------------------------------- */

typedef struct writer {
    wbuf b;
    const ak_model *model;
    int64_t default_opset;
    int uses_kit, uses_ms;
} writer;

static const char *file_domain(writer *w, const ak__ir_node *n) {
    if (strcmp(n->domain, "com.accelkit") == 0 || (!n->domain[0] && n->opset != w->default_opset)) {
        w->uses_kit = 1;
        return AK_ONNX_KIT_DOMAIN;
    }
    if (strcmp(n->domain, "com.microsoft") == 0) w->uses_ms = 1;
    return n->domain;
}

static ak_status put_graph(writer *w, uint32_t field, const ak__ir_graph *g,
                           const ak__onnx_graph_view *view);

static ak_status put_attr(writer *w, const ak__ir_attr *a, const ak__ir_node *n) {
    wbuf *b = &w->b;
    if (a->type == AK_ATTR_SPARSE_TENSOR || a->type == AK_ATTR_SPARSE_TENSORS)
        return AK_FAIL(AK_ERR_UNSUPPORTED, "cannot write node '%.60s' (%s): its attribute "
                       "'%.60s' is a sparse tensor, which the engine does not read",
                       n->name, n->op_type, a->name);
    size_t at = begin(b, 5);
    put_str(b, 1, a->name);
    put_int(b, 20, a->type);
    switch (a->type) {
    case AK_ATTR_FLOAT: put_float(b, 2, a->u.f); break;
    case AK_ATTR_INT: put_int(b, 3, a->u.i); break;
    case AK_ATTR_STRING: put_bytes(b, 4, a->u.s.data, a->u.s.len); break;
    case AK_ATTR_TENSOR: put_tensor(b, 5, NULL, a->u.t); break;
    case AK_ATTR_GRAPH: AK_CHECK(put_graph(w, 6, a->u.g, NULL)); break;
    case AK_ATTR_FLOATS:
        for (size_t i = 0; i < a->count; i++) put_float(b, 7, a->u.floats[i]);
        break;
    case AK_ATTR_INTS:
        for (size_t i = 0; i < a->count; i++) put_int(b, 8, a->u.ints[i]);
        break;
    case AK_ATTR_STRINGS:
        for (size_t i = 0; i < a->count; i++) put_bytes(b, 9, a->u.strings[i].data, a->u.strings[i].len);
        break;
    case AK_ATTR_TENSORS:
        for (size_t i = 0; i < a->count; i++) put_tensor(b, 10, NULL, a->u.tensors[i]);
        break;
    case AK_ATTR_GRAPHS:
        for (size_t i = 0; i < a->count; i++) AK_CHECK(put_graph(w, 11, a->u.graphs[i], NULL));
        break;
    case AK_ATTR_TYPE_PROTO: /* the serialized TypeProto, as the loader kept it */
        if (a->u.s.data) put_bytes(b, 14, a->u.s.data, a->u.s.len);
        break;
    case AK_ATTR_TYPE_PROTOS:
        for (size_t i = 0; i < a->count; i++) put_bytes(b, 15, a->u.strings[i].data, a->u.strings[i].len);
        break;
    default:
        return AK_FAIL(AK_ERR_INTERNAL, "writer: attribute '%.60s' of type %d", a->name, (int)a->type);
    }
    end(b, at);
    return AK_OK;
}

static const char *value_name(const ak__ir_graph *g, int32_t v) {
    return v == AK_IR_NONE ? "" : g->values[v].name;
}

static ak_status put_node(writer *w, const ak__ir_graph *g, const ak__ir_node *n) {
    wbuf *b = &w->b;
    size_t at = begin(b, 1);
    /* repeated strings keep their positions: an omitted optional input is "" */
    for (uint32_t i = 0; i < n->num_inputs; i++) {
        const char *s = value_name(g, n->inputs[i]);
        put_bytes(b, 1, s, strlen(s));
    }
    for (uint32_t i = 0; i < n->num_outputs; i++) {
        const char *s = value_name(g, n->outputs[i]);
        put_bytes(b, 2, s, strlen(s));
    }
    put_str(b, 3, n->name);
    put_str(b, 4, n->op_type);
    for (uint32_t i = 0; i < n->num_attrs; i++) AK_CHECK(put_attr(w, &n->attrs[i], n));
    put_str(b, 7, file_domain(w, n));
    end(b, at);
    return AK_OK;
}

static const ak__ir_tensor *initializer_of(const ak__ir_graph *g, const ak__onnx_graph_view *view,
                                           size_t v) {
    if (view) return view->constants[v];
    return g->values[v].flags & AK_IR_VALUE_CONST ? g->values[v].constant : NULL;
}

/* Intermediate values with a declared or inferred type (value_info). */
static int intermediate(const ak__ir_value *v) {
    uint32_t edge = AK_IR_VALUE_INPUT | AK_IR_VALUE_OUTPUT | AK_IR_VALUE_CONST | AK_IR_VALUE_OUTER;
    return !(v->flags & edge) && v->producer != AK_IR_NONE && v->kind != AK_VALUE_UNKNOWN;
}

static ak_status put_graph(writer *w, uint32_t field, const ak__ir_graph *g,
                           const ak__onnx_graph_view *view) {
    wbuf *b = &w->b;
    size_t at = begin(b, field);
    if (view) {
        for (size_t k = 0; k < view->num_nodes; k++) AK_CHECK(put_node(w, g, view->nodes[k]));
    } else {
        for (size_t k = 0; k < g->num_nodes; k++) AK_CHECK(put_node(w, g, &g->nodes[g->order[k]]));
    }
    put_str(b, 2, g->name);
    for (size_t v = 0; v < g->num_values; v++) {
        const ak__ir_tensor *t = initializer_of(g, view, v);
        if (t) put_tensor(b, 5, g->values[v].name, t);
    }
    for (size_t i = 0; i < g->num_inputs; i++) put_value_info(b, 11, &g->values[g->inputs[i]]);
    for (size_t i = 0; i < g->num_outputs; i++) put_value_info(b, 12, &g->values[g->outputs[i]]);
    if (!view || view->value_info)
        for (size_t v = 0; v < g->num_values; v++)
            if (intermediate(&g->values[v])) put_value_info(b, 13, &g->values[v]);
    end(b, at);
    return AK_OK;
}

static void put_opset(wbuf *b, const char *domain, int64_t version) {
    size_t at = begin(b, 8);
    put_str(b, 1, domain);
    put_int(b, 2, version);
    end(b, at);
}

/* ---- entry points ------------------------------------------------------------------------- */

ak_status ak__onnx_write_model(const ak_model *model, const ak__onnx_graph_view *view,
                               uint8_t **out, size_t *size) {
    *out = NULL;
    *size = 0;
    if (!host_is_little_endian())
        return AK_FAIL(AK_ERR_UNSUPPORTED, "the ONNX writer needs a little-endian host");
    writer w = {{0}, model, ak__model_opset(model, ""), 0, 0};
    put_int(&w.b, 1, model->ir_version);
    put_str(&w.b, 2, model->producer_name);
    put_str(&w.b, 3, model->producer_version);
    if (model->model_version) put_int(&w.b, 5, model->model_version);
    ak_status st = put_graph(&w, 7, model->graph, view);
    for (size_t i = 0; st == AK_OK && i < model->num_opsets; i++)
        put_opset(&w.b, model->opsets[i].domain, model->opsets[i].version);
    if (w.uses_kit && !ak__model_opset(model, AK_ONNX_KIT_DOMAIN)) put_opset(&w.b, AK_ONNX_KIT_DOMAIN, 1);
    if (w.uses_ms && !ak__model_opset(model, "com.microsoft")) put_opset(&w.b, "com.microsoft", 1);
    if (st == AK_OK && w.b.oom)
        st = AK_FAIL(AK_ERR_NO_MEMORY, "ONNX writer: out of memory after %zu bytes", w.b.len);
    if (st == AK_OK && w.b.len > AK_ONNX_MAX_FILE_BYTES)
        st = AK_FAIL(AK_ERR_UNSUPPORTED, "the model needs %zu bytes, more than one ONNX protobuf "
                     "can hold (2 GiB); external data is not written", w.b.len);
    if (st != AK_OK) {
        free(w.b.p);
        return st;
    }
    *out = w.b.p;
    *size = w.b.len;
    return AK_OK;
}

static ak_status write_all(int fd, const uint8_t *p, size_t n, const char *path) {
    while (n) {
        ssize_t r = write(fd, p, n);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return AK_FAIL(AK_ERR_IO, "writing '%.200s': %s", path, strerror(errno));
        p += r, n -= (size_t)r;
    }
    return AK_OK;
}

ak_status ak__onnx_write_file(const ak_model *model, const ak__onnx_graph_view *view,
                              const char *path) {
    uint8_t *data;
    size_t size;
    AK_CHECK(ak__onnx_write_model(model, view, &data, &size));
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 16);
    ak_status st = tmp ? AK_OK : AK_FAIL(AK_ERR_NO_MEMORY, "ONNX writer: out of memory");
    int fd = -1;
    if (st == AK_OK) {
        snprintf(tmp, plen + 16, "%s.tmp.XXXXXX", path);
        fd = mkstemp(tmp);
        if (fd < 0) st = AK_FAIL(AK_ERR_IO, "cannot create a file beside '%.200s': %s", path, strerror(errno));
    }
    if (st == AK_OK) st = write_all(fd, data, size, path);
    if (fd >= 0 && close(fd) != 0 && st == AK_OK)
        st = AK_FAIL(AK_ERR_IO, "writing '%.200s': %s", path, strerror(errno));
    if (st == AK_OK && fchmodat(AT_FDCWD, tmp, 0644, 0) != 0) { /* mkstemp makes it 0600 */
        st = AK_FAIL(AK_ERR_IO, "chmod '%.200s': %s", tmp, strerror(errno));
    }
    if (st == AK_OK && rename(tmp, path) != 0)
        st = AK_FAIL(AK_ERR_IO, "cannot write '%.200s': %s", path, strerror(errno));
    if (st != AK_OK && fd >= 0) unlink(tmp);
    free(tmp);
    free(data);
    return st;
}

/* ---- public --------------------------------------------------------------------------------- */

ak_status ak_onnx_save_file(const ak_model *model, const char *path) {
    AK_ENSURE_INIT();
    AK_ARG_CHECK(model, "ak_onnx_save_file: model is NULL");
    AK_ARG_CHECK(path && path[0], "ak_onnx_save_file: empty path");
    return ak__onnx_write_file(model, NULL, path);
}
