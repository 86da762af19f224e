/* safetensors reader: maps a file, parses its JSON header with cJSON and checks every
 * entry against the data it claims before anything points into it (see safetensors.h).
 * A hostile header can cost at most the header limit in parsing, never a read outside
 * the file. */
#include "llm/hf/safetensors.h"

#include <cjson/cJSON.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/check.h"
#include "core/le_bytes.h"

static const struct {
    const char *name;
    size_t size;
} k_dtypes[AK_ST_N_DTYPES] = {
    [AK_ST_BOOL] = {"BOOL", 1},   [AK_ST_U8] = {"U8", 1},     [AK_ST_I8] = {"I8", 1},
    [AK_ST_F8_E5M2] = {"F8_E5M2", 1}, [AK_ST_F8_E4M3] = {"F8_E4M3", 1},
    [AK_ST_I16] = {"I16", 2},     [AK_ST_U16] = {"U16", 2},   [AK_ST_F16] = {"F16", 2},
    [AK_ST_BF16] = {"BF16", 2},   [AK_ST_I32] = {"I32", 4},   [AK_ST_U32] = {"U32", 4},
    [AK_ST_F32] = {"F32", 4},     [AK_ST_F64] = {"F64", 8},   [AK_ST_I64] = {"I64", 8},
    [AK_ST_U64] = {"U64", 8},
};

const char *ak__st_dtype_name(ak__st_dtype t) {
    return (unsigned)t < AK_ST_N_DTYPES ? k_dtypes[t].name : "?";
}

size_t ak__st_dtype_size(ak__st_dtype t) {
    return (unsigned)t < AK_ST_N_DTYPES ? k_dtypes[t].size : 0;
}

static int dtype_of(const char *s, ak__st_dtype *t) {
    for (int i = 0; i < AK_ST_N_DTYPES; i++)
        if (strcmp(s, k_dtypes[i].name) == 0) {
            *t = (ak__st_dtype)i;
            return 1;
        }
    return 0;
}

/* A JSON number that is a whole number exactly representable in a double. */
static int json_u64(const cJSON *j, uint64_t *v) {
    if (!cJSON_IsNumber(j)) return 0;
    double d = j->valuedouble;
    if (!(d >= 0 && d <= 9007199254740992.0) || d != (double)(uint64_t)d) return 0;
    *v = (uint64_t)d;
    return 1;
}

typedef struct parse_ctx {
    const char *what;
    const unsigned char *data; /* first byte after the header */
    uint64_t data_size;
} parse_ctx;

static ak_status parse_shape(const parse_ctx *c, const char *name, const cJSON *shape,
                             ak__st_tensor *t) {
    if (!cJSON_IsArray(shape))
        return AK_FAIL(AK_ERR_INVALID_MODEL, "%s: tensor '%s' has no shape array", c->what, name);
    int n = cJSON_GetArraySize(shape);
    if (n > AK_ST_MAX_DIMS)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "%s: tensor '%s' has %d dimensions (at most %d)",
                       c->what, name, n, AK_ST_MAX_DIMS);
    t->n_dims = (uint32_t)n;
    int i = 0;
    for (const cJSON *d = shape->child; d; d = d->next, i++)
        if (!json_u64(d, &t->shape[i]))
            return AK_FAIL(AK_ERR_INVALID_MODEL, "%s: tensor '%s': dimension %d is not a "
                           "non-negative integer", c->what, name, i);
    return AK_OK;
}

/* Bytes the shape needs; overflow is a mismatch by definition. */
static int shape_bytes(const ak__st_tensor *t, uint64_t *bytes) {
    uint64_t b = ak__st_dtype_size(t->dtype);
    for (uint32_t i = 0; i < t->n_dims; i++) {
        if (t->shape[i] && b > UINT64_MAX / t->shape[i]) return 0;
        b *= t->shape[i];
    }
    *bytes = b;
    return 1;
}

static ak_status parse_offsets(const parse_ctx *c, const char *name, const cJSON *offs,
                               ak__st_tensor *t) {
    uint64_t begin, end, need;
    if (!cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2 || !json_u64(offs->child, &begin) ||
        !json_u64(offs->child->next, &end) || begin > end)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "%s: tensor '%s': data_offsets must be [begin, end] "
                       "with 0 <= begin <= end", c->what, name);
    if (end > c->data_size)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "%s: tensor '%s': data_offsets [%llu, %llu] pass "
                       "the end of the data (%llu bytes)", c->what, name,
                       (unsigned long long)begin, (unsigned long long)end,
                       (unsigned long long)c->data_size);
    if (!shape_bytes(t, &need))
        return AK_FAIL(AK_ERR_INVALID_MODEL, "%s: tensor '%s': the byte size of its %s shape "
                       "overflows 64 bits", c->what, name, ak__st_dtype_name(t->dtype));
    if (need != end - begin)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "%s: tensor '%s': %s shape needs %llu bytes but "
                       "data_offsets span %llu", c->what, name, ak__st_dtype_name(t->dtype),
                       (unsigned long long)need, (unsigned long long)(end - begin));
    t->data = c->data + begin;
    t->bytes = end - begin;
    return AK_OK;
}

static ak_status parse_entry(const parse_ctx *c, const cJSON *e, ak__st_tensor *t) {
    const char *name = e->string;
    if (!cJSON_IsObject(e))
        return AK_FAIL(AK_ERR_INVALID_MODEL, "%s: entry '%s' is not an object", c->what, name);
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    if (!cJSON_IsString(dt) || !dtype_of(dt->valuestring, &t->dtype))
        return AK_FAIL(AK_ERR_INVALID_MODEL, "%s: tensor '%s' has an unknown dtype %s%s%s",
                       c->what, name, cJSON_IsString(dt) ? "'" : "",
                       cJSON_IsString(dt) ? dt->valuestring : "(missing)",
                       cJSON_IsString(dt) ? "'" : "");
    AK_CHECK(parse_shape(c, name, cJSON_GetObjectItemCaseSensitive(e, "shape"), t));
    return parse_offsets(c, name, cJSON_GetObjectItemCaseSensitive(e, "data_offsets"), t);
}

static int by_data(const void *a, const void *b) {
    const ak__st_tensor *x = a, *y = b;
    const unsigned char *p = x->data, *q = y->data;
    if (p != q) return p < q ? -1 : 1;
    return x->bytes < y->bytes ? -1 : x->bytes > y->bytes;
}

/* Sorted by position, each tensor must end before the next begins. */
static ak_status check_overlaps(const char *what, ak__st_file *f) {
    qsort(f->tensors, f->n_tensors, sizeof *f->tensors, by_data);
    for (size_t i = 1; i < f->n_tensors; i++) {
        const ak__st_tensor *p = &f->tensors[i - 1], *t = &f->tensors[i];
        if ((const unsigned char *)p->data + p->bytes > (const unsigned char *)t->data)
            return AK_FAIL(AK_ERR_INVALID_MODEL, "%s: tensors '%s' and '%s' overlap", what,
                           p->name, t->name);
    }
    return AK_OK;
}

static ak_status index_names(const char *what, ak__st_file *f) {
    AK_CHECK(ak_strmap_init(&f->index, f->n_tensors));
    for (size_t i = 0; i < f->n_tensors; i++) {
        const char *n = f->tensors[i].name;
        if (ak_strmap_put(&f->index, n, strlen(n), (int64_t)i, 0) != -1)
            return AK_FAIL(AK_ERR_INVALID_MODEL, "%s: tensor '%s' appears twice", what, n);
    }
    return AK_OK;
}

/* Copies the names and parses each tensor entry of the header object. */
static ak_status parse_entries(const parse_ctx *c, const cJSON *root, ak__st_file *f) {
    size_t n = 0, total = 0;
    for (const cJSON *e = root->child; e; e = e->next) {
        if (strcmp(e->string, "__metadata__") == 0) {
            if (!cJSON_IsObject(e))
                return AK_FAIL(AK_ERR_INVALID_MODEL, "%s: __metadata__ is not an object", c->what);
            continue;
        }
        n++;
        total += strlen(e->string) + 1;
    }
    f->tensors = calloc(n ? n : 1, sizeof *f->tensors);
    f->names = malloc(total ? total : 1);
    if (!f->tensors || !f->names) return AK_FAIL(AK_ERR_NO_MEMORY, "%s: %zu tensors", c->what, n);
    char *p = f->names;
    for (const cJSON *e = root->child; e; e = e->next) {
        if (strcmp(e->string, "__metadata__") == 0) continue;
        ak__st_tensor *t = &f->tensors[f->n_tensors++];
        size_t len = strlen(e->string) + 1;
        memcpy(p, e->string, len);
        t->name = p;
        p += len;
        AK_CHECK(parse_entry(c, e, t));
    }
    return AK_OK;
}

ak_status ak__st_parse(const void *data, size_t size, const char *what, ak__st_file *f) {
    AK_ARG_CHECK(f != NULL && (data != NULL || size == 0), "NULL argument");
    if (!what) what = "safetensors";
    memset(f, 0, sizeof *f);
    f->base = data;
    f->size = size;
    if (size < 8)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "%s: truncated (%zu bytes; the header length "
                       "alone needs 8)", what, size);
    uint64_t n = ak__get_u64(f->base);
    if (n > AK_ST_MAX_HEADER)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "%s: header of %llu bytes exceeds the %u-byte limit",
                       what, (unsigned long long)n, AK_ST_MAX_HEADER);
    if (n > size - 8)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "%s: header of %llu bytes overruns the file of %zu",
                       what, (unsigned long long)n, size);
    cJSON *root = cJSON_ParseWithLength((const char *)f->base + 8, (size_t)n);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return AK_FAIL(AK_ERR_INVALID_MODEL, "%s: the header is not a JSON object", what);
    }
    parse_ctx c = {what, f->base + 8 + n, size - 8 - n};
    ak_status st;
    AK_CHECK_GOTO(st, parse_entries(&c, root, f));
    AK_CHECK_GOTO(st, check_overlaps(what, f));
    AK_CHECK_GOTO(st, index_names(what, f));
    cJSON_Delete(root);
    return AK_OK;
fail:
    cJSON_Delete(root);
    ak__st_close(f);
    return st;
}

ak_status ak__st_open(const char *path, ak__st_file *f) {
    AK_ARG_CHECK(path != NULL && f != NULL, "path or file is NULL");
    memset(f, 0, sizeof *f);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return AK_FAIL(AK_ERR_IO, "cannot open '%s'", path);
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return AK_FAIL(AK_ERR_IO, "'%s' is not a regular file", path);
    }
    if (sb.st_size < 8) {
        close(fd);
        return AK_FAIL(AK_ERR_INVALID_MODEL, "%s: truncated (%lld bytes)", path,
                       (long long)sb.st_size);
    }
    void *map = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return AK_FAIL(AK_ERR_IO, "cannot map '%s'", path);
    ak_status st = ak__st_parse(map, (size_t)sb.st_size, path, f);
    if (st != AK_OK) {
        munmap(map, (size_t)sb.st_size);
        return st;
    }
    f->mapped = 1;
    return AK_OK;
}

void ak__st_close(ak__st_file *f) {
    if (!f) return;
    if (f->mapped) munmap((void *)f->base, f->size);
    free(f->tensors);
    free(f->names);
    ak_strmap_free(&f->index);
    memset(f, 0, sizeof *f);
}

const ak__st_tensor *ak__st_find(const ak__st_file *f, const char *name) {
    int64_t i = ak_strmap_get(&f->index, name, strlen(name));
    return i < 0 ? NULL : &f->tensors[i];
}
