/* String → integer hash map with linear probing (see strmap.h). */
#include "llm/strmap.h"

#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "core/hash.h"

ak_status ak_strmap_init(ak_strmap *m, uint64_t max_keys) {
    memset(m, 0, sizeof *m);
    uint64_t cap = 16;
    /* load factor at most 1/2; the callers bound max_keys by the file size */
    while (cap < max_keys * 2) {
        if (cap > (UINT64_MAX >> 2) || cap > SIZE_MAX / sizeof(ak_strmap_slot) / 2)
            return AK_FAIL(AK_ERR_NO_MEMORY, "hash map for %llu keys is too large",
                           (unsigned long long)max_keys);
        cap *= 2;
    }
    m->slots = malloc((size_t)cap * sizeof *m->slots);
    if (!m->slots) return AK_FAIL(AK_ERR_NO_MEMORY, "hash map of %llu slots", (unsigned long long)cap);
    for (uint64_t i = 0; i < cap; i++) m->slots[i].value = -1;
    m->mask = cap - 1;
    m->limit = max_keys;
    return AK_OK;
}

void ak_strmap_free(ak_strmap *m) {
    free(m->slots);
    memset(m, 0, sizeof *m);
}

static ak_strmap_slot *find_slot(const ak_strmap *m, const char *key, size_t len) {
    uint64_t i = ak__fnv1a64(AK_FNV1A64_BASIS, key, len) & m->mask;
    for (;;) {
        ak_strmap_slot *s = &m->slots[i];
        if (s->value < 0 || (s->len == len && memcmp(s->key, key, len) == 0)) return s;
        i = (i + 1) & m->mask;
    }
}

int64_t ak_strmap_put(ak_strmap *m, const char *key, size_t len, int64_t value, int replace) {
    ak_strmap_slot *s = find_slot(m, key, len);
    if (s->value >= 0) {
        int64_t old = s->value;
        if (replace) s->value = value;
        return old;
    }
    if (m->count >= m->limit) return -2;
    s->key = key;
    s->len = len;
    s->value = value;
    m->count++;
    return -1;
}

int64_t ak_strmap_get(const ak_strmap *m, const char *key, size_t len) {
    if (!m->slots) return -1;
    return find_slot(m, key, len)->value;
}
