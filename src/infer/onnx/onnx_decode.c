/* Guarded decoding of ONNX protobuf bytes with protobuf-c.
 *
 * protobuf-c parses nested messages recursively and allocates one struct per message, so
 * a hostile file could exhaust the stack (a few bytes per nesting level) or memory (a
 * 2-byte empty message becomes a 100+ byte struct). Before protobuf-c sees the bytes, a
 * bounded walk over the wire format, steered by the generated descriptors, checks every
 * tag and length and the nesting depth. Then protobuf-c decodes with an allocator that
 * fails once a budget proportional to the input is spent. */
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "infer/onnx/onnx_internal.h"

/* ---- wire-format walk --------------------------------------------------------------- */

enum { WIRE_VARINT = 0, WIRE_FIXED64 = 1, WIRE_LEN = 2, WIRE_FIXED32 = 5 };

typedef struct cursor {
    const uint8_t *p, *end;
} cursor;

static int read_varint(cursor *c, uint64_t *out) {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (c->p >= c->end) return -1;
        uint8_t b = *c->p++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return 0;
        }
    }
    return -1; /* more than 10 bytes */
}

static ak_status wire_error(const char *msg_name, size_t offset, const char *what) {
    return AK_FAIL(AK_ERR_INVALID_MODEL, "malformed protobuf in %s at byte %zu: %s", msg_name,
                   offset, what);
}

/* Walks one message of type desc in [c->p, c->end); recurses into sub-messages. */
static ak_status walk(const uint8_t *base, cursor c, const ProtobufCMessageDescriptor *desc,
                      int depth) {
    if (depth > AK_ONNX_MAX_DEPTH)
        return AK_FAIL(AK_ERR_INVALID_MODEL,
                       "messages nested deeper than %d levels (at byte %zu in %s)",
                       AK_ONNX_MAX_DEPTH, (size_t)(c.p - base), desc->short_name);
    while (c.p < c.end) {
        size_t at = (size_t)(c.p - base);
        uint64_t key, len;
        if (read_varint(&c, &key)) return wire_error(desc->short_name, at, "truncated field key");
        uint64_t number = key >> 3;
        if (number == 0 || number > 536870911u)
            return wire_error(desc->short_name, at, "invalid field number");
        switch (key & 7) {
        case WIRE_VARINT:
            if (read_varint(&c, &len)) return wire_error(desc->short_name, at, "truncated varint");
            break;
        case WIRE_FIXED64:
        case WIRE_FIXED32: {
            size_t w = (key & 7) == WIRE_FIXED64 ? 8 : 4;
            if ((size_t)(c.end - c.p) < w)
                return wire_error(desc->short_name, at, "truncated fixed-width field");
            c.p += w;
            break;
        }
        case WIRE_LEN: {
            if (read_varint(&c, &len) || len > (uint64_t)(c.end - c.p))
                return wire_error(desc->short_name, at, "length runs past the end of the data");
            const ProtobufCFieldDescriptor *f =
                protobuf_c_message_descriptor_get_field(desc, (unsigned)number);
            if (f && f->type == PROTOBUF_C_TYPE_MESSAGE) {
                cursor sub = {c.p, c.p + len};
                AK_CHECK(walk(base, sub, f->descriptor, depth + 1));
            }
            c.p += len;
            break;
        }
        default:
            /* groups (3, 4) are a proto1 relic that ONNX never uses */
            return wire_error(desc->short_name, at, "unsupported wire type");
        }
    }
    return AK_OK;
}

/* ---- budgeted allocator --------------------------------------------------------------- */

typedef struct budget {
    size_t left;
    int exhausted;
} budget;

/* Each block remembers its size in a header so free can return it to the budget. */
typedef union block_header {
    size_t size;
    max_align_t align;
} block_header;

static void *budget_alloc(void *data, size_t size) {
    budget *b = data;
    if (size > b->left || size > SIZE_MAX - sizeof(block_header)) {
        b->exhausted = 1;
        return NULL;
    }
    block_header *h = malloc(sizeof *h + size);
    if (!h) return NULL;
    h->size = size;
    b->left -= size;
    return h + 1;
}

static void budget_free(void *data, void *ptr) {
    if (!ptr) return;
    budget *b = data;
    block_header *h = (block_header *)ptr - 1;
    if (b->left <= SIZE_MAX - h->size) b->left += h->size;
    free(h);
}

/* What decoding may allocate: generous for real models (weights decode about 1:1, graph
 * structure up to ~20:1) while a file of empty messages cannot blow up without bound. */
static size_t decode_budget(size_t size) {
    size_t cap = (size_t)1 << 40;
    return size > (cap - ((size_t)64 << 20)) / 32 ? cap : 32 * size + ((size_t)64 << 20);
}

/* protobuf-c frees with the allocator it was given; the model keeps nothing else. */
static ProtobufCAllocator free_allocator = {budget_alloc, budget_free, NULL};

/* Decodes one message of `desc` after the wire-format walk, within the memory budget. */
static ak_status decode_message(const uint8_t *data, size_t size,
                                const ProtobufCMessageDescriptor *desc, const char *what,
                                ProtobufCMessage **out) {
    *out = NULL;
    if (!data && size) return AK_FAIL(AK_ERR_INVALID_ARG, "ONNX decode: NULL data");
    if (size > AK_ONNX_MAX_FILE_BYTES)
        return AK_FAIL(AK_ERR_INVALID_MODEL,
                       "%zu bytes is larger than a protobuf message can be (2 GiB)", size);
    if (size == 0) return AK_FAIL(AK_ERR_INVALID_MODEL, "empty file: not an ONNX %s", what);
    cursor c = {data, data + size};
    AK_CHECK(walk(data, c, desc, 0));
    budget b = {decode_budget(size), 0};
    ProtobufCAllocator alloc = {budget_alloc, budget_free, &b};
    ProtobufCMessage *m = protobuf_c_message_unpack(desc, &alloc, size, data);
    if (!m) {
        if (b.exhausted)
            return AK_FAIL(AK_ERR_INVALID_MODEL,
                           "decoding %zu bytes needs more than %zu bytes of memory: the file is "
                           "not a plausible ONNX %s",
                           size, decode_budget(size), what);
        return AK_FAIL(AK_ERR_INVALID_MODEL,
                       "protobuf-c could not decode the %s (%zu bytes): malformed field "
                       "contents", what, size);
    }
    *out = m;
    return AK_OK;
}

ak_status ak__onnx_decode(const uint8_t *data, size_t size, Akonnx__ModelProto **out) {
    return decode_message(data, size, &akonnx__model_proto__descriptor, "model",
                          (ProtobufCMessage **)out);
}

ak_status ak__onnx_decode_tensor(const uint8_t *data, size_t size, Akonnx__TensorProto **out) {
    return decode_message(data, size, &akonnx__tensor_proto__descriptor, "TensorProto",
                          (ProtobufCMessage **)out);
}

static void free_message(ProtobufCMessage *m) {
    /* the budget is gone by now; freeing only needs the size headers */
    budget unlimited = {SIZE_MAX, 0};
    ProtobufCAllocator alloc = free_allocator;
    alloc.allocator_data = &unlimited;
    protobuf_c_message_free_unpacked(m, &alloc);
}

void ak__onnx_tensor_free(Akonnx__TensorProto *t) {
    if (t) free_message(&t->base);
}

void ak__onnx_model_free(Akonnx__ModelProto *model) {
    if (model) free_message(&model->base);
}
