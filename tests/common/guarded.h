/* Test helper: buffers with guard bytes on both sides, to catch kernels that write
 * outside their output. Header-only so each test executable stays self-contained. */
#ifndef AK_TESTS_GUARDED_H
#define AK_TESTS_GUARDED_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define AK_GUARD_BYTES 64
#define AK_GUARD_FILL 0xA5

typedef struct guarded_buf {
    unsigned char *base; /* allocation: guard | payload | guard */
    void *data;          /* payload, 64-byte aligned + `misalign` bytes */
    size_t bytes;
} guarded_buf;

/* misalign shifts the payload off 64-byte alignment (to test unaligned entry points). */
static inline guarded_buf guarded_alloc(size_t bytes, size_t misalign) {
    guarded_buf g;
    size_t total = AK_GUARD_BYTES * 2 + bytes + 64 + misalign;
    g.base = (unsigned char *)aligned_alloc(64, (total + 63) / 64 * 64);
    memset(g.base, AK_GUARD_FILL, total);
    g.data = g.base + AK_GUARD_BYTES + 64 - AK_GUARD_BYTES % 64 + misalign;
    g.bytes = bytes;
    return g;
}

/* 1 when both guards are intact. */
static inline int guarded_intact(const guarded_buf *g) {
    const unsigned char *p = (const unsigned char *)g->data;
    for (size_t i = 1; i <= AK_GUARD_BYTES; i++)
        if (p[-(ptrdiff_t)i] != AK_GUARD_FILL || p[g->bytes + i - 1] != AK_GUARD_FILL) return 0;
    return 1;
}

static inline void guarded_free(guarded_buf *g) {
    free(g->base);
    g->base = NULL;
    g->data = NULL;
}

/* Deterministic pseudo-random numbers for test inputs (splitmix64). */
static inline uint64_t test_rand_u64(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [-1, 1). */
static inline float test_rand_f32(uint64_t *state) {
    return (float)((double)(test_rand_u64(state) >> 11) * (2.0 / 9007199254740992.0) - 1.0);
}

#endif /* AK_TESTS_GUARDED_H */
