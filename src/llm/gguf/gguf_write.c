/* Streaming GGUF v3 writer: metadata and tensor infos buffered, tensor data streamed to
 * `path`.tmp, renamed into place on close (layout in gguf.c's header comment). */
#include "llm/gguf/gguf_write.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "llm/atomic_file.h"
#include "core/le_bytes.h"

#define GGUF_MAGIC "GGUF"
#define GGUF_VERSION 3u

typedef struct wtensor {
    char *name;
    uint32_t n_dims, type;
    uint64_t dims[AK_GGUF_MAX_DIMS];
    uint64_t size, offset; /* offset from the start of the data section */
} wtensor;

struct ak__gguf_writer {
    ak__atomic_file file;
    uint32_t alignment;
    unsigned char *meta; /* the serialized kv pairs */
    size_t meta_n, meta_cap;
    char **keys;
    uint64_t n_kv, keys_cap;
    wtensor *tensors;
    uint64_t n_tensors, tensors_cap, data_end;
    int header_written;
    uint64_t cur, cur_done; /* the tensor receiving data, and its bytes so far */
};

/* ---- the in-memory metadata buffer -------------------------------------------------- */

static ak_status meta_bytes(ak__gguf_writer *w, const void *p, size_t n) {
    if (w->meta_cap - w->meta_n < n) {
        size_t cap = w->meta_cap ? w->meta_cap : 4096;
        while (cap - w->meta_n < n) {
            if (cap > SIZE_MAX / 2) return AK_FAIL(AK_ERR_NO_MEMORY, "GGUF metadata too large");
            cap *= 2;
        }
        unsigned char *v = realloc(w->meta, cap);
        if (!v) return AK_FAIL(AK_ERR_NO_MEMORY, "GGUF metadata of %zu bytes", cap);
        w->meta = v;
        w->meta_cap = cap;
    }
    if (n) memcpy(w->meta + w->meta_n, p, n);
    w->meta_n += n;
    return AK_OK;
}

static ak_status meta_u32(ak__gguf_writer *w, uint32_t v) {
    unsigned char b[4];
    ak__put_u32(b, v);
    return meta_bytes(w, b, 4);
}

static ak_status meta_u64(ak__gguf_writer *w, uint64_t v) {
    unsigned char b[8];
    ak__put_u64(b, v);
    return meta_bytes(w, b, 8);
}

static ak_status meta_str(ak__gguf_writer *w, const char *s, size_t n) {
    AK_CHECK(meta_u64(w, n));
    return meta_bytes(w, s, n);
}

/* Size of a fixed-size value type; 0 for the others. */
static size_t type_size(ak_gguf_type t) {
    switch (t) {
    case AK_GGUF_UINT8: case AK_GGUF_INT8: case AK_GGUF_BOOL: return 1;
    case AK_GGUF_UINT16: case AK_GGUF_INT16: return 2;
    case AK_GGUF_UINT32: case AK_GGUF_INT32: case AK_GGUF_FLOAT32: return 4;
    case AK_GGUF_UINT64: case AK_GGUF_INT64: case AK_GGUF_FLOAT64: return 8;
    default: return 0;
    }
}

/* One element in little-endian order (GGUF), whatever the host. */
static ak_status meta_scalar(ak__gguf_writer *w, ak_gguf_type t, const void *value) {
    size_t n = type_size(t);
    unsigned char b[8];
    uint64_t v = 0;
    switch (n) {
    case 1: v = *(const uint8_t *)value; break;
    case 2: v = *(const uint16_t *)value; break;
    case 4: v = *(const uint32_t *)value; break;
    default: v = *(const uint64_t *)value; break;
    }
    ak__put_u64(b, v);
    return meta_bytes(w, b, n);
}

/* ---- keys ---------------------------------------------------------------------------- */

static ak_status begin_key(ak__gguf_writer *w, const char *key, ak_gguf_type type) {
    AK_ARG_CHECK(w != NULL && key != NULL && key[0] != '\0', "GGUF writer or key is NULL/empty");
    AK_ARG_CHECK(!w->header_written, "GGUF key '%s' after the tensor data started", key);
    for (uint64_t i = 0; i < w->n_kv; i++)
        AK_ARG_CHECK(strcmp(w->keys[i], key) != 0, "GGUF key '%s' written twice", key);
    if (w->n_kv == w->keys_cap) {
        uint64_t cap = w->keys_cap ? w->keys_cap * 2 : 32;
        char **k = realloc(w->keys, (size_t)cap * sizeof *k);
        if (!k) return AK_FAIL(AK_ERR_NO_MEMORY, "GGUF keys");
        w->keys = k;
        w->keys_cap = cap;
    }
    if (!(w->keys[w->n_kv] = strdup(key))) return AK_FAIL(AK_ERR_NO_MEMORY, "GGUF key");
    w->n_kv++;
    AK_CHECK(meta_str(w, key, strlen(key)));
    return meta_u32(w, (uint32_t)type);
}

ak_status ak__gguf_kv_scalar(ak__gguf_writer *w, const char *key, ak_gguf_type type,
                             const void *value) {
    AK_ARG_CHECK(type_size(type) > 0 && value != NULL, "GGUF key '%s': type %d is not a "
                 "fixed-size scalar", key ? key : "?", (int)type);
    AK_CHECK(begin_key(w, key, type));
    return meta_scalar(w, type, value);
}

ak_status ak__gguf_kv_u32(ak__gguf_writer *w, const char *key, uint32_t v) {
    return ak__gguf_kv_scalar(w, key, AK_GGUF_UINT32, &v);
}

ak_status ak__gguf_kv_i32(ak__gguf_writer *w, const char *key, int32_t v) {
    return ak__gguf_kv_scalar(w, key, AK_GGUF_INT32, &v);
}

ak_status ak__gguf_kv_u64(ak__gguf_writer *w, const char *key, uint64_t v) {
    return ak__gguf_kv_scalar(w, key, AK_GGUF_UINT64, &v);
}

ak_status ak__gguf_kv_f32(ak__gguf_writer *w, const char *key, float v) {
    return ak__gguf_kv_scalar(w, key, AK_GGUF_FLOAT32, &v);
}

ak_status ak__gguf_kv_f64(ak__gguf_writer *w, const char *key, double v) {
    return ak__gguf_kv_scalar(w, key, AK_GGUF_FLOAT64, &v);
}

ak_status ak__gguf_kv_bool(ak__gguf_writer *w, const char *key, int v) {
    uint8_t b = v != 0;
    return ak__gguf_kv_scalar(w, key, AK_GGUF_BOOL, &b);
}

ak_status ak__gguf_kv_string(ak__gguf_writer *w, const char *key, const char *s, size_t len) {
    AK_ARG_CHECK(s != NULL || len == 0, "GGUF key '%s': string is NULL", key ? key : "?");
    AK_CHECK(begin_key(w, key, AK_GGUF_STRING));
    return meta_str(w, s, len);
}

ak_status ak__gguf_kv_array(ak__gguf_writer *w, const char *key, ak_gguf_type elem,
                            const void *values, uint64_t n) {
    size_t es = type_size(elem);
    AK_ARG_CHECK(es > 0, "GGUF key '%s': array elements of type %d are not fixed-size",
                 key ? key : "?", (int)elem);
    AK_ARG_CHECK(values != NULL || n == 0, "GGUF key '%s': values is NULL", key ? key : "?");
    AK_CHECK(begin_key(w, key, AK_GGUF_ARRAY));
    AK_CHECK(meta_u32(w, (uint32_t)elem));
    AK_CHECK(meta_u64(w, n));
    for (uint64_t i = 0; i < n; i++)
        AK_CHECK(meta_scalar(w, elem, (const unsigned char *)values + i * es));
    return AK_OK;
}

ak_status ak__gguf_kv_strings(ak__gguf_writer *w, const char *key, const char *const *s,
                              const size_t *lens, uint64_t n) {
    AK_ARG_CHECK(s != NULL || n == 0, "GGUF key '%s': strings are NULL", key ? key : "?");
    AK_CHECK(begin_key(w, key, AK_GGUF_ARRAY));
    AK_CHECK(meta_u32(w, (uint32_t)AK_GGUF_STRING));
    AK_CHECK(meta_u64(w, n));
    for (uint64_t i = 0; i < n; i++) {
        AK_ARG_CHECK(s[i] != NULL, "GGUF key '%s': string %llu is NULL", key,
                     (unsigned long long)i);
        AK_CHECK(meta_str(w, s[i], lens ? lens[i] : strlen(s[i])));
    }
    return AK_OK;
}

/* ---- tensors ------------------------------------------------------------------------- */

static uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

/* Bytes of a tensor, refusing shapes that are not whole blocks or overflow. */
static ak_status tensor_size(const char *name, uint32_t n_dims, const uint64_t *dims,
                             uint32_t type, uint64_t *size) {
    uint32_t be, bb;
    if (ak_ggml_type_size(type, &be, &bb) != AK_OK)
        return AK_FAIL(AK_ERR_INVALID_ARG, "GGUF tensor '%s': unknown ggml type %u", name, type);
    AK_ARG_CHECK(dims[0] % be == 0, "GGUF tensor '%s': inner dimension %llu is not a multiple "
                 "of the block of %u", name, (unsigned long long)dims[0], be);
    uint64_t s = dims[0] / be * bb;
    for (uint32_t d = 1; d < n_dims; d++) {
        AK_ARG_CHECK(s <= UINT64_MAX / 2 / dims[d], "GGUF tensor '%s' is too large", name);
        s *= dims[d];
    }
    *size = s;
    return AK_OK;
}

ak_status ak__gguf_add_tensor(ak__gguf_writer *w, const char *name, uint32_t n_dims,
                              const uint64_t *dims, uint32_t type) {
    AK_ARG_CHECK(w != NULL && name != NULL && name[0] && dims != NULL, "NULL argument");
    AK_ARG_CHECK(!w->header_written, "GGUF tensor '%s' after the tensor data started", name);
    AK_ARG_CHECK(n_dims >= 1 && n_dims <= AK_GGUF_MAX_DIMS, "GGUF tensor '%s': %u dimensions",
                 name, n_dims);
    for (uint32_t d = 0; d < n_dims; d++)
        AK_ARG_CHECK(dims[d] >= 1, "GGUF tensor '%s': dimension %u is 0", name, d);
    for (uint64_t i = 0; i < w->n_tensors; i++)
        AK_ARG_CHECK(strcmp(w->tensors[i].name, name) != 0, "GGUF tensor '%s' added twice", name);
    wtensor t = {.n_dims = n_dims, .type = type, .dims = {1, 1, 1, 1}};
    memcpy(t.dims, dims, n_dims * sizeof *dims);
    AK_CHECK(tensor_size(name, n_dims, dims, type, &t.size));
    if (w->n_tensors == w->tensors_cap) {
        uint64_t cap = w->tensors_cap ? w->tensors_cap * 2 : 64;
        wtensor *v = realloc(w->tensors, (size_t)cap * sizeof *v);
        if (!v) return AK_FAIL(AK_ERR_NO_MEMORY, "GGUF tensor infos");
        w->tensors = v;
        w->tensors_cap = cap;
    }
    if (!(t.name = strdup(name))) return AK_FAIL(AK_ERR_NO_MEMORY, "GGUF tensor name");
    t.offset = w->data_end;
    w->data_end = align_up(t.offset + t.size, w->alignment);
    w->tensors[w->n_tensors++] = t;
    return AK_OK;
}

ak_status ak__gguf_tensor_bytes(const ak__gguf_writer *w, uint64_t i, uint64_t *bytes) {
    AK_ARG_CHECK(w != NULL && bytes != NULL && i < w->n_tensors, "no GGUF tensor %llu",
                 (unsigned long long)i);
    *bytes = w->tensors[i].size;
    return AK_OK;
}

/* ---- the file ------------------------------------------------------------------------ */

static ak_status put(ak__gguf_writer *w, const void *p, size_t n) {
    return ak__atomic_write(&w->file, p, n);
}

static ak_status put_zeros(ak__gguf_writer *w, size_t n) {
    static const unsigned char zero[64];
    while (n) {
        size_t k = n < sizeof zero ? n : sizeof zero;
        AK_CHECK(put(w, zero, k));
        n -= k;
    }
    return AK_OK;
}

static ak_status put_u64(ak__gguf_writer *w, uint64_t v) {
    unsigned char b[8];
    ak__put_u64(b, v);
    return put(w, b, 8);
}

static ak_status write_header(ak__gguf_writer *w) {
    AK_CHECK(ak__gguf_kv_u32(w, "general.alignment", w->alignment));
    unsigned char b[4];
    AK_CHECK(put(w, GGUF_MAGIC, 4));
    ak__put_u32(b, GGUF_VERSION);
    AK_CHECK(put(w, b, 4));
    AK_CHECK(put_u64(w, w->n_tensors));
    AK_CHECK(put_u64(w, w->n_kv));
    AK_CHECK(put(w, w->meta, w->meta_n));
    uint64_t pos = 24 + w->meta_n;
    for (uint64_t i = 0; i < w->n_tensors; i++) {
        const wtensor *t = &w->tensors[i];
        size_t len = strlen(t->name);
        AK_CHECK(put_u64(w, len));
        AK_CHECK(put(w, t->name, len));
        ak__put_u32(b, t->n_dims);
        AK_CHECK(put(w, b, 4));
        for (uint32_t d = 0; d < t->n_dims; d++) AK_CHECK(put_u64(w, t->dims[d]));
        ak__put_u32(b, t->type);
        AK_CHECK(put(w, b, 4));
        AK_CHECK(put_u64(w, t->offset));
        pos += 8 + len + 4 + 8 * (uint64_t)t->n_dims + 4 + 8;
    }
    AK_CHECK(put_zeros(w, (size_t)(align_up(pos, w->alignment) - pos)));
    w->header_written = 1;
    return AK_OK;
}

ak_status ak__gguf_write_data(ak__gguf_writer *w, const void *data, size_t bytes) {
    AK_ARG_CHECK(w != NULL && (data != NULL || bytes == 0), "NULL argument");
    if (!w->header_written) AK_CHECK(write_header(w));
    const unsigned char *p = data;
    while (bytes) {
        AK_ARG_CHECK(w->cur < w->n_tensors, "GGUF data beyond the %llu declared tensors",
                     (unsigned long long)w->n_tensors);
        const wtensor *t = &w->tensors[w->cur];
        uint64_t k = t->size - w->cur_done;
        if (k > bytes) k = bytes;
        AK_CHECK(put(w, p, (size_t)k));
        p += k;
        bytes -= (size_t)k;
        w->cur_done += k;
        if (w->cur_done == t->size) {
            /* padding so the next tensor starts aligned (the last one is padded too) */
            AK_CHECK(put_zeros(w, (size_t)(align_up(t->offset + t->size, w->alignment) -
                                           (t->offset + t->size))));
            w->cur++;
            w->cur_done = 0;
        }
    }
    return AK_OK;
}

static void writer_free(ak__gguf_writer *w) {
    for (uint64_t i = 0; i < w->n_kv; i++) free(w->keys[i]);
    for (uint64_t i = 0; i < w->n_tensors; i++) free(w->tensors[i].name);
    free(w->keys);
    free(w->tensors);
    free(w->meta);
    free(w);
}

ak_status ak__gguf_writer_open(const char *path, uint32_t alignment, ak__gguf_writer **out) {
    AK_ARG_CHECK(path != NULL && out != NULL, "path or out is NULL");
    if (alignment == 0) alignment = 32;
    AK_ARG_CHECK(alignment >= 8 && (alignment & (alignment - 1)) == 0,
                 "GGUF alignment %u is not a power of two >= 8", alignment);
    *out = NULL;
    ak__gguf_writer *w = calloc(1, sizeof *w);
    if (!w) return AK_FAIL(AK_ERR_NO_MEMORY, "GGUF writer");
    w->alignment = alignment;
    ak_status st = ak__atomic_open(&w->file, path);
    if (st != AK_OK) {
        writer_free(w);
        return st;
    }
    *out = w;
    return AK_OK;
}

void ak__gguf_writer_abort(ak__gguf_writer *w) {
    if (!w) return;
    ak__atomic_abort(&w->file);
    writer_free(w);
}

ak_status ak__gguf_writer_close(ak__gguf_writer *w) {
    AK_ARG_CHECK(w != NULL, "GGUF writer is NULL");
    ak_status st = AK_OK;
    if (!w->header_written) AK_CHECK_GOTO(st, write_header(w));
    int whole = w->cur == w->n_tensors;
    AK_CHECK_GOTO(st, ak__atomic_commit_tensors(&w->file, "GGUF",
                                                whole ? NULL : w->tensors[w->cur].name,
                                                w->cur_done, whole ? 0 : w->tensors[w->cur].size));
    writer_free(w);
    return AK_OK;
fail:
    ak__gguf_writer_abort(w);
    return st;
}
