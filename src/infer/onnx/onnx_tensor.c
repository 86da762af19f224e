/* ONNX TensorProto -> IR constant tensor.
 *
 * A tensor's payload sits in one of three places: a typed repeated field (float_data,
 * int32_data, ...), raw_data (fixed width, little-endian), or an external file named by
 * external_data. Every count is checked against the declared shape before anything is
 * allocated, so the allocation never exceeds data that really exists in the input. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#if defined(__linux__) && defined(SYS_openat2)
#include <linux/openat2.h>
#endif

#include "core/check.h"
#include "infer/onnx/onnx_internal.h"

enum { LOCATION_DEFAULT = 0, LOCATION_EXTERNAL = 1 };

ak_status ak__onnx_elem_type(int32_t code, const char *what, ak_elem_type *out) {
    if (code == 21 || code == 22) /* ONNX IR 10's 4-bit types, packed two per byte */
        return AK_FAIL(AK_ERR_UNSUPPORTED, "%.80s: data type %s (IR version 10) is not supported",
                       what, code == 21 ? "uint4" : "int4");
    if (code < 0 || code >= AK_ELEM_COUNT_)
        return AK_FAIL(AK_ERR_UNSUPPORTED, "%.80s: data type %d is not supported (known: 0-%d)",
                       what, (int)code, AK_ELEM_COUNT_ - 1);
    *out = (ak_elem_type)code;
    return AK_OK;
}

/* Shape and element count, with every dimension and the byte size checked. */
static ak_status tensor_shape(ak__ir_graph *g, const Akonnx__TensorProto *t, const char *what,
                              ak__ir_tensor *out) {
    if (t->n_dims > AK_IR_MAX_RANK)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "tensor '%.80s' has rank %zu (at most %d)", what,
                       t->n_dims, AK_IR_MAX_RANK);
    int64_t *dims;
    AK_CHECK(ak__ir_alloc_array(g, t->n_dims, sizeof *dims, (void **)&dims));
    uint64_t count = 1;
    for (size_t i = 0; i < t->n_dims; i++) {
        if (t->dims[i] < 0)
            return AK_FAIL(AK_ERR_INVALID_MODEL, "tensor '%.80s' has negative dimension %lld",
                           what, (long long)t->dims[i]);
        uint64_t d = (uint64_t)t->dims[i];
        if (d && count > UINT64_MAX / d)
            return AK_FAIL(AK_ERR_INVALID_MODEL, "tensor '%.80s': element count overflows", what);
        count *= d;
        dims[i] = t->dims[i];
    }
    size_t es = ak_elem_type_size(out->type);
    if (es && count > SIZE_MAX / 2 / es)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "tensor '%.80s': %llu elements is too large", what,
                       (unsigned long long)count);
    out->rank = (int)t->n_dims;
    out->dims = dims;
    out->count = count;
    out->nbytes = es * (size_t)count;
    return AK_OK;
}

/* Width of the scalars a type is made of: complex numbers are two floats or doubles. */
static size_t scalar_width(ak_elem_type type) {
    if (type == AK_ELEM_C64) return 4;
    if (type == AK_ELEM_C128) return 8;
    return ak_elem_type_size(type);
}

/* Converts nbytes of little-endian scalars of width w to host order (dst may be src). */
static void copy_le(void *dst, const uint8_t *src, size_t nbytes, size_t w) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    uint8_t *d = dst;
    for (size_t i = 0; i < nbytes; i += w)
        for (size_t b = 0; b < w / 2; b++) {
            uint8_t lo = src[i + b], hi = src[i + w - 1 - b];
            d[i + b] = hi;
            d[i + w - 1 - b] = lo;
        }
#else
    (void)w;
    if (dst != src && nbytes) memcpy(dst, src, nbytes);
#endif
}

static ak_status count_mismatch(const char *what, const ak__ir_tensor *t, size_t have,
                                const char *field) {
    return AK_FAIL(AK_ERR_INVALID_MODEL,
                   "tensor '%.80s' (%s, %llu elements) holds %zu values in %s", what,
                   ak_elem_type_name(t->type), (unsigned long long)t->count, have, field);
}

/* Typed fields: each ONNX type has one designated repeated field. */
static ak_status from_typed(ak__ir_graph *g, const Akonnx__TensorProto *p, const char *what,
                            ak__ir_tensor *t) {
    size_t n = (size_t)t->count;
    int complex = t->type == AK_ELEM_C64 || t->type == AK_ELEM_C128;
    size_t want = complex ? 2 * n : n;
    switch (t->type) {
    case AK_ELEM_F32:
    case AK_ELEM_C64:
        if (p->n_float_data != want) return count_mismatch(what, t, p->n_float_data, "float_data");
        AK_CHECK(ak__ir_alloc_payload(g, t->nbytes, &t->data));
        if (want) memcpy(t->data, p->float_data, want * sizeof(float));
        return AK_OK;
    case AK_ELEM_F64:
    case AK_ELEM_C128:
        if (p->n_double_data != want)
            return count_mismatch(what, t, p->n_double_data, "double_data");
        AK_CHECK(ak__ir_alloc_payload(g, t->nbytes, &t->data));
        if (want) memcpy(t->data, p->double_data, want * sizeof(double));
        return AK_OK;
    case AK_ELEM_I64:
        if (p->n_int64_data != n) return count_mismatch(what, t, p->n_int64_data, "int64_data");
        AK_CHECK(ak__ir_alloc_payload(g, t->nbytes, &t->data));
        if (n) memcpy(t->data, p->int64_data, n * sizeof(int64_t));
        return AK_OK;
    case AK_ELEM_U32:
    case AK_ELEM_U64:
        if (p->n_uint64_data != n) return count_mismatch(what, t, p->n_uint64_data, "uint64_data");
        AK_CHECK(ak__ir_alloc_payload(g, t->nbytes, &t->data));
        for (size_t i = 0; i < n; i++) {
            if (t->type == AK_ELEM_U32) ((uint32_t *)t->data)[i] = (uint32_t)p->uint64_data[i];
            else ((uint64_t *)t->data)[i] = p->uint64_data[i];
        }
        return AK_OK;
    case AK_ELEM_STRING: {
        if (p->n_string_data != n) return count_mismatch(what, t, p->n_string_data, "string_data");
        ak__ir_bytes *s;
        AK_CHECK(ak__ir_alloc_array(g, n, sizeof *s, (void **)&s));
        size_t total = 0;
        for (size_t i = 0; i < n; i++) {
            const void *copy;
            AK_CHECK(ak__ir_memdup(g, p->string_data[i].data, p->string_data[i].len, &copy));
            s[i].data = copy;
            s[i].len = p->string_data[i].len;
            total += s[i].len;
        }
        t->data = s;
        t->nbytes = total;
        return AK_OK;
    }
    default: /* the narrow types all travel in int32_data, one value per element */
        break;
    }
    if (p->n_int32_data != n) return count_mismatch(what, t, p->n_int32_data, "int32_data");
    AK_CHECK(ak__ir_alloc_payload(g, t->nbytes, &t->data));
    size_t es = ak_elem_type_size(t->type);
    for (size_t i = 0; i < n; i++) {
        uint32_t v = (uint32_t)p->int32_data[i];
        if (es == 4) ((uint32_t *)t->data)[i] = v;
        else if (es == 2) ((uint16_t *)t->data)[i] = (uint16_t)v;
        else ((uint8_t *)t->data)[i] = (uint8_t)v;
    }
    return AK_OK;
}

static ak_status from_raw(ak__ir_graph *g, const uint8_t *bytes, size_t len, const char *what,
                          ak__ir_tensor *t) {
    if (t->type == AK_ELEM_STRING)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "tensor '%.80s': string tensors cannot use raw_data",
                       what);
    if (len != t->nbytes)
        return AK_FAIL(AK_ERR_INVALID_MODEL,
                       "tensor '%.80s' (%s, %llu elements) needs %zu bytes, raw data has %zu",
                       what, ak_elem_type_name(t->type), (unsigned long long)t->count, t->nbytes,
                       len);
    AK_CHECK(ak__ir_alloc_payload(g, t->nbytes, &t->data));
    copy_le(t->data, bytes, t->nbytes, scalar_width(t->type));
    return AK_OK;
}

/* ---- external data -------------------------------------------------------------------- */

/* A location must stay inside the model's directory: relative, no ".." component. */
static ak_status check_location(const char *loc, const char *what) {
    if (!loc[0]) return AK_FAIL(AK_ERR_INVALID_MODEL, "tensor '%.80s': empty external location", what);
    if (strlen(loc) >= PATH_MAX)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "tensor '%.80s': external location too long", what);
    if (loc[0] == '/' || loc[0] == '\\')
        return AK_FAIL(AK_ERR_INVALID_MODEL,
                       "tensor '%.80s': external location '%.120s' is absolute; it must be "
                       "relative to the model's directory", what, loc);
    for (const char *c = loc; *c;) {
        size_t n = strcspn(c, "/\\");
        if (n == 2 && c[0] == '.' && c[1] == '.')
            return AK_FAIL(AK_ERR_INVALID_MODEL,
                           "tensor '%.80s': external location '%.120s' leaves the model's "
                           "directory ('..')", what, loc);
        c += n;
        if (*c) c++;
    }
    return AK_OK;
}

/* Strict decimal: digits only, no sign, fits in int64. */
static int parse_u63(const char *s, uint64_t *out) {
    if (!s || !*s) return -1;
    uint64_t v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9') return -1;
        if (v > ((uint64_t)INT64_MAX - (uint64_t)(*s - '0')) / 10) return -1;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    *out = v;
    return 0;
}

/* Opens loc below the model directory. openat2(RESOLVE_BENEATH) also stops symlinks that
 * point outside; where the kernel lacks it, O_NOFOLLOW guards the last component. */
static int open_beneath(int dir, const char *loc) {
#if defined(__linux__) && defined(SYS_openat2)
    struct open_how how;
    memset(&how, 0, sizeof how);
    how.flags = O_RDONLY | O_CLOEXEC;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
    int fd = (int)syscall(SYS_openat2, dir, loc, &how, sizeof how);
    if (fd >= 0 || (errno != ENOSYS && errno != EPERM)) return fd;
#endif
    return openat(dir, loc, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
}

static ak_status read_region(int fd, uint64_t offset, void *dst, size_t len, const char *what,
                             const char *loc) {
    size_t done = 0;
    while (done < len) {
        ssize_t r = pread(fd, (char *)dst + done, len - done, (off_t)(offset + done));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0)
            return AK_FAIL(AK_ERR_IO, "tensor '%.80s': reading '%.120s' failed: %s", what, loc,
                           r < 0 ? strerror(errno) : "unexpected end of file");
        done += (size_t)r;
    }
    return AK_OK;
}

typedef struct external_ref {
    const char *location;
    uint64_t offset, length;
    int has_length;
} external_ref;

static ak_status parse_external(const Akonnx__TensorProto *p, const char *what, external_ref *r) {
    memset(r, 0, sizeof *r);
    for (size_t i = 0; i < p->n_external_data; i++) {
        const char *k = p->external_data[i]->key ? p->external_data[i]->key : "";
        const char *v = p->external_data[i]->value ? p->external_data[i]->value : "";
        if (strcmp(k, "location") == 0) {
            if (r->location)
                return AK_FAIL(AK_ERR_INVALID_MODEL, "tensor '%.80s': two external locations", what);
            r->location = v;
        } else if (strcmp(k, "offset") == 0 || strcmp(k, "length") == 0) {
            uint64_t *dst = k[0] == 'o' ? &r->offset : &r->length;
            if (parse_u63(v, dst))
                return AK_FAIL(AK_ERR_INVALID_MODEL,
                               "tensor '%.80s': external %s '%.40s' is not a non-negative integer",
                               what, k, v);
            if (k[0] == 'l') r->has_length = 1;
        } /* "checksum" and unknown keys are not needed to read the data */
    }
    if (!r->location)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "tensor '%.80s': external data without a location",
                       what);
    return check_location(r->location, what);
}

static ak_status from_external(ak__ir_graph *g, ak__onnx_ctx *ctx, const Akonnx__TensorProto *p,
                               const char *what, ak__ir_tensor *t) {
    external_ref r;
    AK_CHECK(parse_external(p, what, &r));
    if (t->type == AK_ELEM_STRING)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "tensor '%.80s': string tensors cannot be external",
                       what);
    if (r.has_length && r.length != t->nbytes)
        return AK_FAIL(AK_ERR_INVALID_MODEL,
                       "tensor '%.80s' needs %zu bytes, its external length says %llu", what,
                       t->nbytes, (unsigned long long)r.length);
    if (!ctx->base_dir)
        return AK_FAIL(AK_ERR_INVALID_ARG,
                       "tensor '%.80s' is stored in external file '%.120s', but the model was "
                       "loaded from memory without a base directory", what, r.location);
    if (ctx->base_fd < 0) {
        ctx->base_fd = open(ctx->base_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (ctx->base_fd < 0)
            return AK_FAIL(AK_ERR_IO, "cannot open model directory '%.200s': %s", ctx->base_dir,
                           strerror(errno));
    }
    int fd = open_beneath(ctx->base_fd, r.location);
    if (fd < 0)
        return AK_FAIL(errno == EXDEV || errno == ELOOP ? AK_ERR_INVALID_MODEL : AK_ERR_IO,
                       "tensor '%.80s': cannot open external file '%.120s' in '%.120s': %s", what,
                       r.location, ctx->base_dir,
                       errno == EXDEV ? "it resolves outside the model's directory"
                                      : strerror(errno));
    ak_status st = AK_OK;
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        st = AK_FAIL(AK_ERR_INVALID_MODEL, "tensor '%.80s': external '%.120s' is not a regular file",
                     what, r.location);
    } else if (r.offset > (uint64_t)sb.st_size || t->nbytes > (uint64_t)sb.st_size - r.offset) {
        st = AK_FAIL(AK_ERR_INVALID_MODEL,
                     "tensor '%.80s': %zu bytes at offset %llu run past the end of '%.120s' "
                     "(%lld bytes)", what, t->nbytes, (unsigned long long)r.offset, r.location,
                     (long long)sb.st_size);
    } else {
        st = ak__ir_alloc_payload(g, t->nbytes, &t->data);
        if (st == AK_OK) st = read_region(fd, r.offset, t->data, t->nbytes, what, r.location);
        /* files are little-endian like raw_data */
        if (st == AK_OK) copy_le(t->data, t->data, t->nbytes, scalar_width(t->type));
    }
    close(fd);
    return st;
}

ak_status ak__onnx_tensor(ak__ir_graph *g, ak__onnx_ctx *ctx, const Akonnx__TensorProto *p,
                          const char *what, ak__ir_tensor **out) {
    *out = NULL;
    ak__ir_tensor *t;
    AK_CHECK(ak__ir_alloc(g, sizeof *t, (void **)&t));
    if (!p->has_data_type || p->data_type == AK_ELEM_UNDEFINED)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "tensor '%.80s' has no data type", what);
    AK_CHECK(ak__onnx_elem_type(p->data_type, what, &t->type));
    AK_CHECK(tensor_shape(g, p, what, t));
    int32_t loc = p->has_data_location ? p->data_location : LOCATION_DEFAULT;
    if (loc == LOCATION_EXTERNAL) AK_CHECK(from_external(g, ctx, p, what, t));
    else if (loc != LOCATION_DEFAULT)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "tensor '%.80s': unknown data_location %d", what,
                       (int)loc);
    else if (p->has_raw_data) AK_CHECK(from_raw(g, p->raw_data.data, p->raw_data.len, what, t));
    else AK_CHECK(from_typed(g, p, what, t));
    *out = t;
    return AK_OK;
}
