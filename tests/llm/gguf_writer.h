/* Test helper: writes small GGUF v3 files in memory (metadata and tensor infos), so the
 * tests can build valid files, then damage them on purpose. Header-only; aborts on OOM. */
#ifndef AK_TEST_GGUF_WRITER_H
#define AK_TEST_GGUF_WRITER_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct gw {
    unsigned char *v;
    size_t n, cap;
    size_t kv_count_at; /* where the kv count lives, patched as keys are added */
    uint64_t n_kv;
} gw;

static inline void gw_bytes(gw *w, const void *p, size_t n) {
    if (w->cap - w->n < n) {
        while (w->cap - w->n < n) w->cap = w->cap ? w->cap * 2 : 1024;
        w->v = realloc(w->v, w->cap);
        if (!w->v) abort();
    }
    if (n) memcpy(w->v + w->n, p, n);
    w->n += n;
}

static inline void gw_u32(gw *w, uint32_t x) {
    unsigned char b[4];
    for (int i = 0; i < 4; i++) b[i] = (unsigned char)(x >> (8 * i));
    gw_bytes(w, b, 4);
}

static inline void gw_u64(gw *w, uint64_t x) {
    unsigned char b[8];
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(x >> (8 * i));
    gw_bytes(w, b, 8);
}

static inline void gw_str(gw *w, const char *s, size_t n) {
    gw_u64(w, n);
    gw_bytes(w, s, n);
}

/* Header with `n_tensors` tensor infos to follow the metadata. */
static inline void gw_begin(gw *w, uint64_t n_tensors) {
    memset(w, 0, sizeof *w);
    gw_bytes(w, "GGUF", 4);
    gw_u32(w, 3);
    gw_u64(w, n_tensors);
    w->kv_count_at = w->n;
    gw_u64(w, 0);
}

static inline void gw_key(gw *w, const char *key, uint32_t type) {
    gw_str(w, key, strlen(key));
    gw_u32(w, type);
    w->n_kv++;
    for (int i = 0; i < 8; i++) w->v[w->kv_count_at + i] = (unsigned char)(w->n_kv >> (8 * i));
}

static inline void gw_kv_string(gw *w, const char *key, const char *s) {
    gw_key(w, key, 8);
    gw_str(w, s, strlen(s));
}

static inline void gw_kv_u32(gw *w, const char *key, uint32_t v) {
    gw_key(w, key, 4);
    gw_u32(w, v);
}

static inline void gw_kv_bool(gw *w, const char *key, int v) {
    unsigned char b = (unsigned char)(v != 0);
    gw_key(w, key, 7);
    gw_bytes(w, &b, 1);
}

static inline void gw_kv_f32(gw *w, const char *key, float f) {
    uint32_t bits;
    memcpy(&bits, &f, 4);
    gw_key(w, key, 6);
    gw_u32(w, bits);
}

static inline void gw_array_header(gw *w, const char *key, uint32_t elem_type, uint64_t n) {
    gw_key(w, key, 9);
    gw_u32(w, elem_type);
    gw_u64(w, n);
}

static inline void gw_kv_strings(gw *w, const char *key, const char *const *s, const size_t *len, uint64_t n) {
    gw_array_header(w, key, 8, n);
    for (uint64_t i = 0; i < n; i++) gw_str(w, s[i], len ? len[i] : strlen(s[i]));
}

static inline void gw_kv_f32s(gw *w, const char *key, const float *v, uint64_t n) {
    gw_array_header(w, key, 6, n);
    for (uint64_t i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, &v[i], 4);
        gw_u32(w, bits);
    }
}

static inline void gw_kv_i32s(gw *w, const char *key, const int32_t *v, uint64_t n) {
    gw_array_header(w, key, 5, n);
    for (uint64_t i = 0; i < n; i++) gw_u32(w, (uint32_t)v[i]);
}

static inline void gw_tensor(gw *w, const char *name, uint32_t n_dims, const uint64_t *dims, uint32_t type,
                      uint64_t offset) {
    gw_str(w, name, strlen(name));
    gw_u32(w, n_dims);
    for (uint32_t d = 0; d < n_dims; d++) gw_u64(w, dims[d]);
    gw_u32(w, type);
    gw_u64(w, offset);
}

/* Pads to `align` (the start of tensor data). */
static inline void gw_pad(gw *w, size_t align) {
    static const unsigned char zero[64];
    while (w->n % align) gw_bytes(w, zero, 1);
}

#endif /* AK_TEST_GGUF_WRITER_H */
