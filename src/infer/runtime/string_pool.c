/* String pools: bump allocation in blocks of at least 4 KiB (see string_pool.h). */
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "infer/runtime/string_pool.h"

struct ak__string_block {
    ak__string_block *next;
    size_t size, used;
    char bytes[];
};

enum { MIN_BLOCK = 4096 };

ak_status ak__string_pool_alloc(ak__string_pool *p, size_t n, char **out) {
    ak__string_block *b = p->head;
    if (!b || b->size - b->used < n) {
        size_t size = n > MIN_BLOCK ? n : MIN_BLOCK;
        if (b && b->size * 2 > size && b->size * 2 >= n) size = b->size * 2;
        if (size > SIZE_MAX - sizeof *b)
            return AK_FAIL(AK_ERR_NO_MEMORY, "string of %zu bytes is too large", n);
        b = malloc(sizeof *b + size);
        if (!b) return AK_FAIL(AK_ERR_NO_MEMORY, "strings: out of memory (%zu bytes)", size);
        b->size = size;
        b->used = 0;
        b->next = p->head;
        p->head = b;
        p->bytes += size;
    }
    *out = b->bytes + b->used;
    b->used += n;
    return AK_OK;
}

ak_status ak__string_pool_copy(ak__string_pool *p, const char *data, size_t n, ak_string *out) {
    char *dst;
    AK_CHECK(ak__string_pool_alloc(p, n, &dst));
    if (n) memcpy(dst, data, n);
    out->data = dst;
    out->len = n;
    return AK_OK;
}

void ak__string_pool_reset(ak__string_pool *p) {
    ak__string_block *keep = NULL;
    for (ak__string_block *b = p->head; b; b = b->next)
        if (!keep || b->size > keep->size) keep = b;
    for (ak__string_block *b = p->head, *next; b; b = next) {
        next = b->next;
        if (b != keep) free(b);
    }
    p->head = keep;
    p->bytes = keep ? keep->size : 0;
    if (keep) keep->used = 0, keep->next = NULL;
}

void ak__string_pool_free(ak__string_pool *p) {
    for (ak__string_block *b = p->head, *next; b; b = next) {
        next = b->next;
        free(b);
    }
    p->head = NULL;
    p->bytes = 0;
}
