/* A fixed-capacity open-addressing hash map from byte strings to non-negative integers.
 *
 * The keys are not copied: they must outlive the map. The LLM code knows how many keys it
 * will insert before it starts (metadata keys, tensor names, vocabulary, merges), so the
 * table is sized once and never grows. */
#ifndef AK_LLM_STRMAP_H
#define AK_LLM_STRMAP_H

#include <stddef.h>
#include <stdint.h>

#include "accelkit/ak.h"

typedef struct ak_strmap_slot {
    const char *key;
    size_t len;
    int64_t value; /* -1 marks an empty slot */
} ak_strmap_slot;

typedef struct ak_strmap {
    ak_strmap_slot *slots;
    uint64_t mask; /* capacity - 1 (capacity is a power of two) */
    uint64_t count, limit;
} ak_strmap;

/* Room for `max_keys` keys. */
ak_status ak_strmap_init(ak_strmap *m, uint64_t max_keys);
void ak_strmap_free(ak_strmap *m);
/* Inserts or (when `replace`) overwrites. Returns the previous value, or -1 if new.
 * Inserting more than max_keys distinct keys is a bug and returns -2. */
int64_t ak_strmap_put(ak_strmap *m, const char *key, size_t len, int64_t value, int replace);
/* The value of `key`, -1 when absent. */
int64_t ak_strmap_get(const ak_strmap *m, const char *key, size_t len);

#endif /* AK_LLM_STRMAP_H */
