/* GGUF v3 reader: maps a file (or takes a buffer), validates everything, indexes it.
 *
 * Layout (little-endian; the GGUF spec is gguf.md in the ggml repository's docs):
 *   u32 magic "GGUF", u32 version, u64 tensor_count, u64 kv_count,
 *   kv_count × { string key, u32 type, value },
 *   tensor_count × { string name, u32 n_dims, u64 dims[n_dims], u32 type, u64 offset },
 *   padding to general.alignment (default 32), tensor data.
 * A string is u64 length + bytes (no NUL); an array is u32 element type, u64 count, elements.
 *
 * Nothing is copied: the handle keeps positions into the mapping. Every count is checked
 * against the bytes that remain before anything is allocated for it, so a hostile file
 * can make us allocate at most a small multiple of its own size. */
#include "llm/gguf/gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/check.h"
#include "core/le_bytes.h"

#define GGUF_MAGIC 0x46554747u /* "GGUF" read as a little-endian u32 */
#define GGUF_DEFAULT_ALIGNMENT 32u

/* ---- bounded reader ------------------------------------------------------------------ */

typedef struct reader {
    const unsigned char *base;
    uint64_t size, pos;
} reader;

static uint64_t remaining(const reader *r) { return r->size - r->pos; }

static ak_status need(const reader *r, uint64_t n, const char *what) {
    if (n > remaining(r))
        return AK_FAIL(AK_ERR_INVALID_MODEL,
                       "GGUF truncated: %s needs %llu bytes at offset %llu, %llu remain", what,
                       (unsigned long long)n, (unsigned long long)r->pos,
                       (unsigned long long)remaining(r));
    return AK_OK;
}

static ak_status rd_u32(reader *r, uint32_t *v, const char *what) {
    AK_CHECK(need(r, 4, what));
    *v = ak__get_u32(r->base + r->pos);
    r->pos += 4;
    return AK_OK;
}

static ak_status rd_u64(reader *r, uint64_t *v, const char *what) {
    AK_CHECK(need(r, 8, what));
    *v = ak__get_u64(r->base + r->pos);
    r->pos += 8;
    return AK_OK;
}

static ak_status skip(reader *r, uint64_t n, const char *what) {
    AK_CHECK(need(r, n, what));
    r->pos += n;
    return AK_OK;
}

static ak_status rd_str(reader *r, const char **s, size_t *len, const char *what) {
    uint64_t n;
    AK_CHECK(rd_u64(r, &n, what));
    AK_CHECK(need(r, n, what));
    *s = (const char *)r->base + r->pos;
    *len = (size_t)n;
    r->pos += n;
    return AK_OK;
}

/* ---- value types --------------------------------------------------------------------- */

/* Size of a fixed-size value type; 0 for string/array, -1 for an unknown type. */
static int scalar_size(uint32_t type) {
    switch (type) {
    case AK_GGUF_UINT8: case AK_GGUF_INT8: case AK_GGUF_BOOL: return 1;
    case AK_GGUF_UINT16: case AK_GGUF_INT16: return 2;
    case AK_GGUF_UINT32: case AK_GGUF_INT32: case AK_GGUF_FLOAT32: return 4;
    case AK_GGUF_UINT64: case AK_GGUF_INT64: case AK_GGUF_FLOAT64: return 8;
    case AK_GGUF_STRING: case AK_GGUF_ARRAY: return 0;
    default: return -1;
    }
}

/* Reads an array header and indexes or skips its elements. */
static ak_status read_array(reader *r, ak_gguf_kv *kv) {
    uint32_t et;
    AK_CHECK(rd_u32(r, &et, "array element type"));
    AK_CHECK(rd_u64(r, &kv->count, "array count"));
    int es = scalar_size(et);
    if (es < 0)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "key '%.*s': unknown array element type %u",
                       (int)kv->key_len, kv->key, et);
    if (et == AK_GGUF_ARRAY)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "key '%.*s': nested arrays are not supported",
                       (int)kv->key_len, kv->key);
    kv->elem_type = (ak_gguf_type)et;
    kv->pos = r->pos;
    if (es > 0) {
        if (kv->count > remaining(r) / (uint64_t)es)
            return AK_FAIL(AK_ERR_INVALID_MODEL, "key '%.*s': array of %llu elements overruns the file",
                           (int)kv->key_len, kv->key, (unsigned long long)kv->count);
        return skip(r, kv->count * (uint64_t)es, "array");
    }
    /* strings: every element has at least its 8-byte length, which bounds the index */
    if (kv->count > remaining(r) / 8)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "key '%.*s': array of %llu strings overruns the file",
                       (int)kv->key_len, kv->key, (unsigned long long)kv->count);
    kv->elem_pos = malloc((size_t)(kv->count ? kv->count : 1) * sizeof *kv->elem_pos);
    if (!kv->elem_pos) return AK_FAIL(AK_ERR_NO_MEMORY, "string array index");
    for (uint64_t i = 0; i < kv->count; i++) {
        const char *s;
        size_t len;
        kv->elem_pos[i] = r->pos;
        AK_CHECK(rd_str(r, &s, &len, "array string"));
    }
    return AK_OK;
}

static ak_status read_kv(reader *r, ak_gguf_kv *kv) {
    uint32_t type;
    AK_CHECK(rd_str(r, &kv->key, &kv->key_len, "metadata key"));
    AK_CHECK(rd_u32(r, &type, "metadata value type"));
    int size = scalar_size(type);
    if (size < 0)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "key '%.*s': unknown value type %u",
                       (int)kv->key_len, kv->key, type);
    kv->type = (ak_gguf_type)type;
    kv->pos = r->pos;
    if (type == AK_GGUF_ARRAY) return read_array(r, kv);
    if (type == AK_GGUF_STRING) {
        const char *s;
        size_t len;
        return rd_str(r, &s, &len, "string value");
    }
    return skip(r, (uint64_t)size, "scalar value");
}

/* ---- tensors ------------------------------------------------------------------------- */

ak_status ak_ggml_type_size(uint32_t type, uint32_t *block_elems, uint32_t *block_bytes) {
    /* {elements per block, bytes per block} by ggml type id; {0,0} = unused id */
    static const uint32_t t[][2] = {
        [0] = {1, 4},     [1] = {1, 2},     [2] = {32, 18},   [3] = {32, 20},
        [6] = {32, 22},   [7] = {32, 24},   [8] = {32, 34},   [9] = {32, 36},
        [10] = {256, 84}, [11] = {256, 110}, [12] = {256, 144}, [13] = {256, 176},
        [14] = {256, 210}, [15] = {256, 292}, [16] = {256, 66}, [17] = {256, 74},
        [18] = {256, 98}, [19] = {256, 50}, [20] = {32, 18},  [21] = {256, 110},
        [22] = {256, 82}, [23] = {256, 136}, [24] = {1, 1},   [25] = {1, 2},
        [26] = {1, 4},    [27] = {1, 8},    [28] = {1, 8},    [29] = {256, 56},
        [30] = {1, 2},    [34] = {256, 54}, [35] = {256, 66},
    };
    if (type >= sizeof t / sizeof t[0] || t[type][0] == 0)
        return AK_FAIL(AK_ERR_UNSUPPORTED, "unknown ggml tensor type %u", type);
    *block_elems = t[type][0];
    *block_bytes = t[type][1];
    return AK_OK;
}

static ak_status read_tensor_info(reader *r, ak_gguf_tensor *t) {
    AK_CHECK(rd_str(r, &t->name, &t->name_len, "tensor name"));
    AK_CHECK(rd_u32(r, &t->n_dims, "tensor n_dims"));
    if (t->n_dims < 1 || t->n_dims > AK_GGUF_MAX_DIMS)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "tensor '%.*s' has %u dimensions (1..%d)",
                       (int)t->name_len, t->name, t->n_dims, AK_GGUF_MAX_DIMS);
    for (int d = 0; d < AK_GGUF_MAX_DIMS; d++) t->dims[d] = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) AK_CHECK(rd_u64(r, &t->dims[d], "tensor dim"));
    AK_CHECK(rd_u32(r, &t->type, "tensor type"));
    AK_CHECK(rd_u64(r, &t->offset, "tensor offset"));
    return AK_OK;
}

/* Element count and byte size, overflow-checked; offset and end checked against the file. */
static ak_status place_tensor(const ak_gguf *g, ak_gguf_tensor *t) {
    uint32_t be, bb;
    if (ak_ggml_type_size(t->type, &be, &bb) != AK_OK)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "tensor '%.*s' has unknown type %u",
                       (int)t->name_len, t->name, t->type);
    uint64_t n = 1;
    for (int d = 0; d < AK_GGUF_MAX_DIMS; d++) {
        if (t->dims[d] > (uint64_t)INT64_MAX || (t->dims[d] && n > (uint64_t)INT64_MAX / t->dims[d]))
            return AK_FAIL(AK_ERR_INVALID_MODEL, "tensor '%.*s': element count overflows",
                           (int)t->name_len, t->name);
        n *= t->dims[d];
    }
    if (t->dims[0] % be != 0)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "tensor '%.*s': row of %llu is not a multiple of the block (%u)",
                       (int)t->name_len, t->name, (unsigned long long)t->dims[0], be);
    uint64_t blocks = n / be;
    if (blocks > UINT64_MAX / bb)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "tensor '%.*s': byte size overflows", (int)t->name_len, t->name);
    t->size = blocks * bb;
    if (t->offset % g->alignment != 0)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "tensor '%.*s': offset %llu is not aligned to %llu",
                       (int)t->name_len, t->name, (unsigned long long)t->offset,
                       (unsigned long long)g->alignment);
    if (g->data_offset > g->size)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "tensor '%.*s': the data section starts past the end of the file",
                       (int)t->name_len, t->name);
    uint64_t avail = g->size - g->data_offset;
    if (t->offset > avail || t->size > avail - t->offset)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "tensor '%.*s': bytes [%llu, +%llu) lie outside the data (%llu bytes)",
                       (int)t->name_len, t->name, (unsigned long long)t->offset,
                       (unsigned long long)t->size, (unsigned long long)avail);
    t->offset += g->data_offset;
    t->data = g->base + t->offset;
    return AK_OK;
}

/* ---- parsing ------------------------------------------------------------------------- */

static ak_status read_header(reader *r, ak_gguf *g) {
    uint32_t magic;
    AK_CHECK(rd_u32(r, &magic, "magic"));
    if (magic != GGUF_MAGIC) return AK_FAIL(AK_ERR_INVALID_MODEL, "not a GGUF file (bad magic)");
    AK_CHECK(rd_u32(r, &g->version, "version"));
    if (g->version == 0x03000000u || g->version == 0x02000000u)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "big-endian GGUF files are not supported");
    if (g->version != 2 && g->version != 3)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "GGUF version %u is not supported (2 or 3)", g->version);
    AK_CHECK(rd_u64(r, &g->n_tensors, "tensor count"));
    AK_CHECK(rd_u64(r, &g->n_kv, "metadata count"));
    /* smallest kv: 8-byte key length + 4-byte type + 1-byte value; smallest tensor info:
     * 8 (name length) + 4 (n_dims) + 8 (one dim) + 4 (type) + 8 (offset) */
    if (g->n_kv > remaining(r) / 13)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "%llu metadata entries cannot fit in the file",
                       (unsigned long long)g->n_kv);
    if (g->n_tensors > remaining(r) / 32)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "%llu tensors cannot fit in the file",
                       (unsigned long long)g->n_tensors);
    return AK_OK;
}

static ak_status read_metadata(reader *r, ak_gguf *g) {
    g->kv = calloc((size_t)(g->n_kv ? g->n_kv : 1), sizeof *g->kv);
    if (!g->kv) return AK_FAIL(AK_ERR_NO_MEMORY, "metadata table");
    AK_CHECK(ak_strmap_init(&g->kv_index, g->n_kv));
    for (uint64_t i = 0; i < g->n_kv; i++) {
        AK_CHECK(read_kv(r, &g->kv[i]));
        if (ak_strmap_put(&g->kv_index, g->kv[i].key, g->kv[i].key_len, (int64_t)i, 0) != -1)
            return AK_FAIL(AK_ERR_INVALID_MODEL, "metadata key '%.*s' appears twice",
                           (int)g->kv[i].key_len, g->kv[i].key);
    }
    return AK_OK;
}

static ak_status read_alignment(ak_gguf *g) {
    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    const ak_gguf_kv *kv = ak__gguf_find(g, "general.alignment");
    if (!kv) return AK_OK;
    if (kv->type != AK_GGUF_UINT32)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "general.alignment must be a uint32");
    uint32_t a = ak__get_u32(g->base + kv->pos);
    if (a == 0 || (a & (a - 1)) != 0)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "general.alignment %u is not a power of two", a);
    g->alignment = a;
    return AK_OK;
}

static ak_status read_tensors(reader *r, ak_gguf *g) {
    g->tensors = calloc((size_t)(g->n_tensors ? g->n_tensors : 1), sizeof *g->tensors);
    if (!g->tensors) return AK_FAIL(AK_ERR_NO_MEMORY, "tensor table");
    AK_CHECK(ak_strmap_init(&g->tensor_index, g->n_tensors));
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        ak_gguf_tensor *t = &g->tensors[i];
        AK_CHECK(read_tensor_info(r, t));
        if (ak_strmap_put(&g->tensor_index, t->name, t->name_len, (int64_t)i, 0) != -1)
            return AK_FAIL(AK_ERR_INVALID_MODEL, "tensor '%.*s' appears twice", (int)t->name_len, t->name);
    }
    /* the data section starts at the next multiple of the alignment */
    uint64_t pad = (g->alignment - r->pos % g->alignment) % g->alignment;
    g->data_offset = r->pos + pad; /* r->pos <= size < 2^63, no overflow */
    for (uint64_t i = 0; i < g->n_tensors; i++) AK_CHECK(place_tensor(g, &g->tensors[i]));
    return AK_OK;
}

static void release(ak_gguf *g) {
    if (!g) return;
    /* the table is zeroed, so entries never reached hold NULL */
    if (g->kv)
        for (uint64_t i = 0; i < g->n_kv; i++) free(g->kv[i].elem_pos);
    free(g->kv);
    free(g->tensors);
    ak_strmap_free(&g->kv_index);
    ak_strmap_free(&g->tensor_index);
    if (g->mapped) munmap((void *)g->base, g->size);
    free(g);
}

static ak_status parse(const void *data, size_t size, int mapped, ak_gguf **out) {
    ak_gguf *g = calloc(1, sizeof *g);
    if (!g) {
        if (mapped) munmap((void *)data, size);
        return AK_FAIL(AK_ERR_NO_MEMORY, "GGUF handle");
    }
    g->base = data;
    g->size = size;
    g->mapped = mapped;
    reader r = {g->base, size, 0};
    ak_status st;
    AK_CHECK_GOTO(st, read_header(&r, g));
    AK_CHECK_GOTO(st, read_metadata(&r, g));
    AK_CHECK_GOTO(st, read_alignment(g));
    AK_CHECK_GOTO(st, read_tensors(&r, g));
    *out = g;
    return AK_OK;
fail:
    release(g);
    return st;
}

/* ---- public: open / close ------------------------------------------------------------ */

ak_status ak_gguf_open_memory(const void *data, size_t size, ak_gguf **out) {
    AK_ARG_CHECK(out != NULL, "out is NULL");
    *out = NULL;
    AK_ARG_CHECK(data != NULL || size == 0, "data is NULL");
    if (size == 0) return AK_FAIL(AK_ERR_INVALID_MODEL, "GGUF buffer is empty");
    return parse(data, size, 0, out);
}

/* Opens a regular, non-empty file; *size its length. */
static ak_status open_file(const char *path, int *fd_out, size_t *size) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return AK_FAIL(AK_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return AK_FAIL(AK_ERR_IO, "'%s' is not a regular file", path);
    }
    if (sb.st_size == 0) {
        close(fd);
        return AK_FAIL(AK_ERR_INVALID_MODEL, "'%s' is empty", path);
    }
    *fd_out = fd;
    *size = (size_t)sb.st_size;
    return AK_OK;
}

ak_status ak_gguf_open(const char *path, ak_gguf **out) {
    AK_ARG_CHECK(path != NULL && out != NULL, "path or out is NULL");
    *out = NULL;
    int fd;
    size_t size;
    AK_CHECK(open_file(path, &fd, &size));
    void *p = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd); /* the mapping keeps the file */
    if (p == MAP_FAILED) return AK_FAIL(AK_ERR_IO, "cannot map '%s': %s", path, strerror(errno));
    return parse(p, size, 1, out);
}

/* Reads all of fd into p. */
static ak_status read_all(int fd, void *p, size_t size, const char *path) {
    for (size_t off = 0; off < size;) {
        ssize_t r = pread(fd, (char *)p + off, size - off, (off_t)off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0)
            return AK_FAIL(AK_ERR_IO, "cannot read '%s' at byte %zu: %s", path, off,
                           r < 0 ? strerror(errno) : "the file got shorter");
        off += (size_t)r;
    }
    return AK_OK;
}

ak_status ak__gguf_open_private(const char *path, ak_gguf **out) {
    AK_ARG_CHECK(path != NULL && out != NULL, "path or out is NULL");
    *out = NULL;
    int fd;
    size_t size;
    AK_CHECK(open_file(path, &fd, &size));
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        close(fd);
        return AK_FAIL(AK_ERR_NO_MEMORY, "no memory for the %zu bytes of '%s'", size, path);
    }
#ifdef MADV_HUGEPAGE
    (void)madvise(p, size, MADV_HUGEPAGE); /* a hint: without THP the copy still works */
#endif
    ak_status st = read_all(fd, p, size, path);
    close(fd);
    if (st != AK_OK) {
        munmap(p, size);
        return st;
    }
    mprotect(p, size, PROT_READ); /* the weights are never written */
    return parse(p, size, 1, out);
}

ak_status ak_gguf_close(ak_gguf *g) {
    release(g);
    return AK_OK;
}
