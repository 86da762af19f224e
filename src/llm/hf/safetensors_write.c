/* safetensors writer: tensors are declared first (the header holds every offset), then
 * their data is streamed in declaration order. The header is padded with spaces to a
 * multiple of 8 bytes, as the reference writer does, so the data starts 8-aligned. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "llm/atomic_file.h"
#include "core/le_bytes.h"
#include "llm/hf/safetensors.h"

typedef struct st_entry {
    char *name;
    ak__st_dtype dtype;
    uint32_t n_dims;
    uint64_t shape[AK_ST_MAX_DIMS];
    uint64_t begin, bytes;
} st_entry;

struct ak__st_writer {
    ak__atomic_file file;
    cJSON *meta;
    st_entry *e;
    size_t n, cap;
    uint64_t total;
    int started;
    size_t cur;
    uint64_t cur_done;
};

static void writer_free(ak__st_writer *w) {
    for (size_t i = 0; i < w->n; i++) free(w->e[i].name);
    free(w->e);
    cJSON_Delete(w->meta);
    free(w);
}

ak_status ak__st_writer_open(const char *path, ak__st_writer **out) {
    AK_ARG_CHECK(path != NULL && out != NULL, "path or out is NULL");
    *out = NULL;
    ak__st_writer *w = calloc(1, sizeof *w);
    if (!w) return AK_FAIL(AK_ERR_NO_MEMORY, "safetensors writer");
    w->meta = cJSON_CreateObject();
    if (!w->meta) {
        writer_free(w);
        return AK_FAIL(AK_ERR_NO_MEMORY, "safetensors writer");
    }
    ak_status st = ak__atomic_open(&w->file, path);
    if (st != AK_OK) {
        writer_free(w);
        return st;
    }
    *out = w;
    return AK_OK;
}

ak_status ak__st_writer_meta(ak__st_writer *w, const char *key, const char *value) {
    AK_ARG_CHECK(w != NULL && key != NULL && value != NULL, "NULL argument");
    AK_ARG_CHECK(!w->started, "safetensors metadata after the data started");
    cJSON_DeleteItemFromObjectCaseSensitive(w->meta, key);
    if (!cJSON_AddStringToObject(w->meta, key, value))
        return AK_FAIL(AK_ERR_NO_MEMORY, "safetensors metadata");
    return AK_OK;
}

ak_status ak__st_writer_add(ak__st_writer *w, const char *name, ak__st_dtype dtype,
                            uint32_t n_dims, const uint64_t *shape) {
    AK_ARG_CHECK(w != NULL && name != NULL && name[0] && (shape != NULL || n_dims == 0),
                 "NULL argument");
    AK_ARG_CHECK(!w->started, "safetensors tensor '%s' after the data started", name);
    AK_ARG_CHECK(n_dims <= AK_ST_MAX_DIMS, "safetensors tensor '%s': %u dimensions", name, n_dims);
    AK_ARG_CHECK(ak__st_dtype_size(dtype) > 0, "safetensors tensor '%s': dtype %d", name,
                 (int)dtype);
    AK_ARG_CHECK(strcmp(name, "__metadata__") != 0, "a tensor cannot be called __metadata__");
    for (size_t i = 0; i < w->n; i++)
        AK_ARG_CHECK(strcmp(w->e[i].name, name) != 0, "safetensors tensor '%s' added twice", name);
    st_entry e = {.dtype = dtype, .n_dims = n_dims, .begin = w->total};
    e.bytes = ak__st_dtype_size(dtype);
    for (uint32_t i = 0; i < n_dims; i++) {
        AK_ARG_CHECK(shape[i] == 0 || e.bytes <= (1ull << 52) / shape[i],
                     "safetensors tensor '%s' is too large", name);
        e.shape[i] = shape[i];
        e.bytes *= shape[i];
    }
    if (w->n == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 64;
        st_entry *v = realloc(w->e, cap * sizeof *v);
        if (!v) return AK_FAIL(AK_ERR_NO_MEMORY, "safetensors entries");
        w->e = v;
        w->cap = cap;
    }
    if (!(e.name = strdup(name))) return AK_FAIL(AK_ERR_NO_MEMORY, "safetensors name");
    w->total += e.bytes;
    w->e[w->n++] = e;
    return AK_OK;
}

static cJSON *entry_json(const st_entry *e) {
    cJSON *o = cJSON_CreateObject(), *shape = cJSON_CreateArray(), *offs = cJSON_CreateArray();
    if (o && shape && offs) {
        cJSON_AddStringToObject(o, "dtype", ak__st_dtype_name(e->dtype));
        for (uint32_t i = 0; i < e->n_dims; i++)
            cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)e->shape[i]));
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)e->begin));
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)(e->begin + e->bytes)));
        cJSON_AddItemToObject(o, "shape", shape);
        cJSON_AddItemToObject(o, "data_offsets", offs);
        return o;
    }
    cJSON_Delete(o);
    cJSON_Delete(shape);
    cJSON_Delete(offs);
    return NULL;
}

/* The header text; the caller frees it. */
static char *header_text(ak__st_writer *w) {
    cJSON *root = cJSON_CreateObject();
    if (!root) return NULL;
    int ok = 1;
    if (w->meta->child) {
        cJSON_AddItemToObject(root, "__metadata__", w->meta);
        w->meta = NULL;
    }
    for (size_t i = 0; ok && i < w->n; i++) {
        cJSON *e = entry_json(&w->e[i]);
        ok = e != NULL;
        if (ok) cJSON_AddItemToObject(root, w->e[i].name, e);
    }
    char *text = ok ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    return text;
}

static ak_status put(ak__st_writer *w, const void *p, size_t n) {
    return ak__atomic_write(&w->file, p, n);
}

static ak_status write_header(ak__st_writer *w) {
    char *text = header_text(w);
    if (!text) return AK_FAIL(AK_ERR_NO_MEMORY, "safetensors header");
    size_t n = strlen(text), padded = (n + 7) / 8 * 8;
    unsigned char len[8];
    ak__put_u64(len, padded);
    ak_status st = put(w, len, 8);
    if (st == AK_OK) st = put(w, text, n);
    for (size_t i = n; st == AK_OK && i < padded; i++) st = put(w, " ", 1);
    free(text);
    w->started = 1;
    return st;
}

ak_status ak__st_writer_data(ak__st_writer *w, const void *data, size_t bytes) {
    AK_ARG_CHECK(w != NULL && (data != NULL || bytes == 0), "NULL argument");
    if (!w->started) AK_CHECK(write_header(w));
    const unsigned char *p = data;
    while (bytes) {
        while (w->cur < w->n && w->cur_done == w->e[w->cur].bytes) {
            w->cur++;
            w->cur_done = 0;
        }
        AK_ARG_CHECK(w->cur < w->n, "safetensors data beyond the declared tensors");
        uint64_t k = w->e[w->cur].bytes - w->cur_done;
        if (k > bytes) k = bytes;
        AK_CHECK(put(w, p, (size_t)k));
        p += k;
        bytes -= (size_t)k;
        w->cur_done += k;
    }
    return AK_OK;
}

void ak__st_writer_abort(ak__st_writer *w) {
    if (!w) return;
    ak__atomic_abort(&w->file);
    writer_free(w);
}

ak_status ak__st_writer_close(ak__st_writer *w) {
    AK_ARG_CHECK(w != NULL, "safetensors writer is NULL");
    ak_status st = AK_OK;
    if (!w->started) AK_CHECK_GOTO(st, write_header(w));
    while (w->cur < w->n && w->cur_done == w->e[w->cur].bytes) {
        w->cur++;
        w->cur_done = 0;
    }
    int whole = w->cur == w->n;
    AK_CHECK_GOTO(st, ak__atomic_commit_tensors(&w->file, "safetensors",
                                                whole ? NULL : w->e[w->cur].name, w->cur_done,
                                                whole ? 0 : w->e[w->cur].bytes));
    writer_free(w);
    return AK_OK;
fail:
    ak__st_writer_abort(w);
    return st;
}
