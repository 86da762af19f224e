/* Typed access to a parsed GGUF file: metadata by key, array elements, tensors.
 *
 * Values are decoded from the mapping on every call (they were bounds-checked when the
 * file was opened), so the handle stays small and zero-copy. */
#include <string.h>

#include "core/check.h"
#include "core/le_bytes.h"
#include "llm/gguf/gguf.h"

const ak_gguf_kv *ak__gguf_find(const ak_gguf *g, const char *key) {
    int64_t i = ak_strmap_get(&g->kv_index, key, strlen(key));
    return i < 0 ? NULL : &g->kv[i];
}

static ak_status find_typed(const ak_gguf *g, const char *key, const ak_gguf_kv **kv) {
    AK_ARG_CHECK(g != NULL && key != NULL, "gguf or key is NULL");
    *kv = ak__gguf_find(g, key);
    if (!*kv) return AK_FAIL(AK_ERR_INVALID_ARG, "GGUF has no key '%s'", key);
    return AK_OK;
}

static int is_int_type(ak_gguf_type t) {
    return t == AK_GGUF_UINT8 || t == AK_GGUF_INT8 || t == AK_GGUF_UINT16 || t == AK_GGUF_INT16 ||
           t == AK_GGUF_UINT32 || t == AK_GGUF_INT32 || t == AK_GGUF_UINT64 || t == AK_GGUF_INT64 ||
           t == AK_GGUF_BOOL;
}

/* Reads an integer of type `t` at `p`; `*neg` tells a negative value (then `*mag` is -v). */
static void load_int(ak_gguf_type t, const unsigned char *p, uint64_t *mag, int *neg) {
    int64_t s = 0;
    *neg = 0;
    switch (t) {
    case AK_GGUF_UINT8: case AK_GGUF_BOOL: *mag = p[0]; return;
    case AK_GGUF_UINT16: *mag = (uint64_t)p[0] | (uint64_t)p[1] << 8; return;
    case AK_GGUF_UINT32: *mag = ak__get_u32(p); return;
    case AK_GGUF_UINT64: *mag = ak__get_u64(p); return;
    case AK_GGUF_INT8: s = (int8_t)p[0]; break;
    case AK_GGUF_INT16: s = (int16_t)(uint16_t)((unsigned)p[0] | (unsigned)p[1] << 8); break;
    case AK_GGUF_INT32: s = (int32_t)ak__get_u32(p); break;
    default: s = (int64_t)ak__get_u64(p); break;
    }
    *neg = s < 0;
    *mag = s < 0 ? (uint64_t)0 - (uint64_t)s : (uint64_t)s;
}

static ak_status to_int64(const char *key, uint64_t mag, int neg, int64_t *v) {
    if (!neg && mag > (uint64_t)INT64_MAX)
        return AK_FAIL(AK_ERR_INVALID_ARG, "GGUF key '%s': value does not fit int64", key);
    *v = neg ? (int64_t)(0 - mag) : (int64_t)mag; /* two's complement wrap is the intent */
    return AK_OK;
}

static double load_float(ak_gguf_type t, const unsigned char *p) {
    if (t == AK_GGUF_FLOAT32) {
        uint32_t bits = ak__get_u32(p);
        float f;
        memcpy(&f, &bits, sizeof f);
        return f;
    }
    uint64_t bits = ak__get_u64(p);
    double d;
    memcpy(&d, &bits, sizeof d);
    return d;
}

/* ---- scalars ------------------------------------------------------------------------- */

ak_status ak_gguf_get_int(const ak_gguf *g, const char *key, int64_t *value) {
    const ak_gguf_kv *kv;
    AK_CHECK(find_typed(g, key, &kv));
    AK_ARG_CHECK(value != NULL, "value is NULL");
    if (!is_int_type(kv->type)) return AK_FAIL(AK_ERR_INVALID_ARG, "GGUF key '%s' is not an integer", key);
    uint64_t mag;
    int neg;
    load_int(kv->type, g->base + kv->pos, &mag, &neg);
    return to_int64(key, mag, neg, value);
}

ak_status ak_gguf_get_uint(const ak_gguf *g, const char *key, uint64_t *value) {
    const ak_gguf_kv *kv;
    AK_CHECK(find_typed(g, key, &kv));
    AK_ARG_CHECK(value != NULL, "value is NULL");
    if (!is_int_type(kv->type)) return AK_FAIL(AK_ERR_INVALID_ARG, "GGUF key '%s' is not an integer", key);
    int neg;
    load_int(kv->type, g->base + kv->pos, value, &neg);
    if (neg) return AK_FAIL(AK_ERR_INVALID_ARG, "GGUF key '%s' is negative", key);
    return AK_OK;
}

ak_status ak_gguf_get_float(const ak_gguf *g, const char *key, double *value) {
    const ak_gguf_kv *kv;
    AK_CHECK(find_typed(g, key, &kv));
    AK_ARG_CHECK(value != NULL, "value is NULL");
    if (kv->type != AK_GGUF_FLOAT32 && kv->type != AK_GGUF_FLOAT64)
        return AK_FAIL(AK_ERR_INVALID_ARG, "GGUF key '%s' is not a float", key);
    *value = load_float(kv->type, g->base + kv->pos);
    return AK_OK;
}

ak_status ak_gguf_get_bool(const ak_gguf *g, const char *key, int *value) {
    const ak_gguf_kv *kv;
    AK_CHECK(find_typed(g, key, &kv));
    AK_ARG_CHECK(value != NULL, "value is NULL");
    if (kv->type != AK_GGUF_BOOL) return AK_FAIL(AK_ERR_INVALID_ARG, "GGUF key '%s' is not a bool", key);
    *value = g->base[kv->pos] != 0;
    return AK_OK;
}

ak_status ak_gguf_get_string(const ak_gguf *g, const char *key, const char **s, size_t *len) {
    const ak_gguf_kv *kv;
    AK_CHECK(find_typed(g, key, &kv));
    AK_ARG_CHECK(s != NULL && len != NULL, "s or len is NULL");
    if (kv->type != AK_GGUF_STRING) return AK_FAIL(AK_ERR_INVALID_ARG, "GGUF key '%s' is not a string", key);
    *len = (size_t)ak__get_u64(g->base + kv->pos);
    *s = (const char *)g->base + kv->pos + 8;
    return AK_OK;
}

/* ---- arrays -------------------------------------------------------------------------- */

static ak_status find_element(const ak_gguf *g, const char *key, uint64_t i, const ak_gguf_kv **kv) {
    AK_CHECK(find_typed(g, key, kv));
    if ((*kv)->type != AK_GGUF_ARRAY) return AK_FAIL(AK_ERR_INVALID_ARG, "GGUF key '%s' is not an array", key);
    if (i >= (*kv)->count)
        return AK_FAIL(AK_ERR_INVALID_ARG, "GGUF array '%s': index %llu out of %llu", key,
                       (unsigned long long)i, (unsigned long long)(*kv)->count);
    return AK_OK;
}

static uint64_t elem_size(ak_gguf_type t) {
    switch (t) {
    case AK_GGUF_UINT16: case AK_GGUF_INT16: return 2;
    case AK_GGUF_UINT32: case AK_GGUF_INT32: case AK_GGUF_FLOAT32: return 4;
    case AK_GGUF_UINT64: case AK_GGUF_INT64: case AK_GGUF_FLOAT64: return 8;
    default: return 1;
    }
}

ak_status ak_gguf_get_array(const ak_gguf *g, const char *key, ak_gguf_type *elem_type, uint64_t *count) {
    const ak_gguf_kv *kv;
    AK_CHECK(find_typed(g, key, &kv));
    AK_ARG_CHECK(elem_type != NULL && count != NULL, "elem_type or count is NULL");
    if (kv->type != AK_GGUF_ARRAY) return AK_FAIL(AK_ERR_INVALID_ARG, "GGUF key '%s' is not an array", key);
    *elem_type = kv->elem_type;
    *count = kv->count;
    return AK_OK;
}

ak_status ak_gguf_get_array_string(const ak_gguf *g, const char *key, uint64_t i, const char **s,
                                   size_t *len) {
    const ak_gguf_kv *kv;
    AK_CHECK(find_element(g, key, i, &kv));
    AK_ARG_CHECK(s != NULL && len != NULL, "s or len is NULL");
    if (kv->elem_type != AK_GGUF_STRING)
        return AK_FAIL(AK_ERR_INVALID_ARG, "GGUF array '%s' does not hold strings", key);
    *len = (size_t)ak__get_u64(g->base + kv->elem_pos[i]);
    *s = (const char *)g->base + kv->elem_pos[i] + 8;
    return AK_OK;
}

ak_status ak_gguf_get_array_int(const ak_gguf *g, const char *key, uint64_t i, int64_t *value) {
    const ak_gguf_kv *kv;
    AK_CHECK(find_element(g, key, i, &kv));
    AK_ARG_CHECK(value != NULL, "value is NULL");
    if (!is_int_type(kv->elem_type))
        return AK_FAIL(AK_ERR_INVALID_ARG, "GGUF array '%s' does not hold integers", key);
    uint64_t mag;
    int neg;
    load_int(kv->elem_type, g->base + kv->pos + i * elem_size(kv->elem_type), &mag, &neg);
    return to_int64(key, mag, neg, value);
}

ak_status ak_gguf_get_array_float(const ak_gguf *g, const char *key, uint64_t i, double *value) {
    const ak_gguf_kv *kv;
    AK_CHECK(find_element(g, key, i, &kv));
    AK_ARG_CHECK(value != NULL, "value is NULL");
    if (kv->elem_type != AK_GGUF_FLOAT32 && kv->elem_type != AK_GGUF_FLOAT64)
        return AK_FAIL(AK_ERR_INVALID_ARG, "GGUF array '%s' does not hold floats", key);
    *value = load_float(kv->elem_type, g->base + kv->pos + i * elem_size(kv->elem_type));
    return AK_OK;
}

/* ---- file facts and keys ------------------------------------------------------------- */

ak_status ak_gguf_version(const ak_gguf *g, uint32_t *version) {
    AK_ARG_CHECK(g != NULL && version != NULL, "gguf or version is NULL");
    *version = g->version;
    return AK_OK;
}

ak_status ak_gguf_alignment(const ak_gguf *g, uint64_t *alignment) {
    AK_ARG_CHECK(g != NULL && alignment != NULL, "gguf or alignment is NULL");
    *alignment = g->alignment;
    return AK_OK;
}

ak_status ak_gguf_kv_count(const ak_gguf *g, uint64_t *count) {
    AK_ARG_CHECK(g != NULL && count != NULL, "gguf or count is NULL");
    *count = g->n_kv;
    return AK_OK;
}

ak_status ak_gguf_kv_at(const ak_gguf *g, uint64_t i, const char **key, size_t *key_len,
                        ak_gguf_type *type) {
    AK_ARG_CHECK(g != NULL && key != NULL && key_len != NULL && type != NULL, "NULL argument");
    AK_ARG_CHECK(i < g->n_kv, "metadata index %llu out of %llu", (unsigned long long)i,
                 (unsigned long long)g->n_kv);
    *key = g->kv[i].key;
    *key_len = g->kv[i].key_len;
    *type = g->kv[i].type;
    return AK_OK;
}

ak_status ak_gguf_key_type(const ak_gguf *g, const char *key, ak_gguf_type *type) {
    AK_ARG_CHECK(g != NULL && key != NULL && type != NULL, "NULL argument");
    const ak_gguf_kv *kv = ak__gguf_find(g, key);
    *type = kv ? kv->type : AK_GGUF_NONE;
    return AK_OK;
}

/* ---- tensors ------------------------------------------------------------------------- */

ak_status ak_gguf_tensor_count(const ak_gguf *g, uint64_t *count) {
    AK_ARG_CHECK(g != NULL && count != NULL, "gguf or count is NULL");
    *count = g->n_tensors;
    return AK_OK;
}

ak_status ak_gguf_tensor_at(const ak_gguf *g, uint64_t i, ak_gguf_tensor *out) {
    AK_ARG_CHECK(g != NULL && out != NULL, "gguf or out is NULL");
    AK_ARG_CHECK(i < g->n_tensors, "tensor index %llu out of %llu", (unsigned long long)i,
                 (unsigned long long)g->n_tensors);
    *out = g->tensors[i];
    return AK_OK;
}

ak_status ak_gguf_tensor_by_name(const ak_gguf *g, const char *name, ak_gguf_tensor *out) {
    AK_ARG_CHECK(g != NULL && name != NULL && out != NULL, "NULL argument");
    int64_t i = ak_strmap_get(&g->tensor_index, name, strlen(name));
    if (i < 0) return AK_FAIL(AK_ERR_INVALID_ARG, "GGUF has no tensor '%s'", name);
    *out = g->tensors[i];
    return AK_OK;
}
