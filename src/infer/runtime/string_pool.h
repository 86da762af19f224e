/* Storage for the bytes of STRING tensors that operators compute.
 *
 * A STRING tensor's data is an array of ak_string (pointer, length); the element array
 * lives where any tensor's data lives (the planned arena, a dynamic or folded buffer),
 * and the bytes the elements point at live in a string pool. A session has two: one for
 * folded constants (freed with the session) and one for runs (emptied when the next run
 * starts, which is when the previous run's outputs stop being valid). Strings copied
 * from an input, a constant or another value keep pointing at their bytes (which live
 * at least as long), so Identity, Reshape, Gather or Concat move 16-byte elements only. */
#ifndef AK_INFER_RUNTIME_STRING_POOL_H
#define AK_INFER_RUNTIME_STRING_POOL_H

#include <stddef.h>

#include "accelkit/infer.h"

typedef struct ak__string_block ak__string_block;
typedef struct ak__string_pool {
    ak__string_block *head; /* newest block first */
    size_t bytes;           /* held in all blocks (for ak_session_get_memory users) */
} ak__string_pool;

/* n bytes (n may be 0) valid until the pool is reset or freed. */
ak_status ak__string_pool_alloc(ak__string_pool *p, size_t n, char **out);
/* Copies n bytes into the pool and makes *out point at the copy. */
ak_status ak__string_pool_copy(ak__string_pool *p, const char *data, size_t n, ak_string *out);
/* Forgets every string; keeps the largest block for the next run. */
void ak__string_pool_reset(ak__string_pool *p);
void ak__string_pool_free(ak__string_pool *p);

#endif /* AK_INFER_RUNTIME_STRING_POOL_H */
