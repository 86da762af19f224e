/* Name -> index map for IR values (open addressing, linear probing, FNV-1a hash).
 * Graphs reach hundreds of thousands of values, so name lookup must not be linear. */
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "core/hash.h"
#include "infer/ir/ir_names.h"

typedef struct slot {
    const char *name; /* NULL: empty */
    int32_t index;
} slot;

struct ak__ir_names {
    slot *slots;
    size_t cap;   /* power of two */
    size_t count;
};

ak_status ak__ir_names_create(ak__ir_names **out) {
    ak__ir_names *m = calloc(1, sizeof *m);
    if (m) m->slots = calloc(16, sizeof *m->slots);
    if (!m || !m->slots) {
        free(m);
        return AK_FAIL(AK_ERR_NO_MEMORY, "IR name map: out of memory");
    }
    m->cap = 16;
    *out = m;
    return AK_OK;
}

void ak__ir_names_free(ak__ir_names *m) {
    if (!m) return;
    free(m->slots);
    free(m);
}

static void insert(slot *slots, size_t cap, const char *name, int32_t index) {
    size_t i = ak__fnv1a64_str(name) & (cap - 1);
    while (slots[i].name) i = (i + 1) & (cap - 1);
    slots[i].name = name;
    slots[i].index = index;
}

/* Keeps the load factor at or below 1/2 so probes stay short. */
static ak_status grow(ak__ir_names *m) {
    if (m->cap > SIZE_MAX / 2 / sizeof(slot)) return AK_FAIL(AK_ERR_NO_MEMORY, "IR name map too large");
    size_t cap = m->cap * 2;
    slot *s = calloc(cap, sizeof *s);
    if (!s) return AK_FAIL(AK_ERR_NO_MEMORY, "IR name map: out of memory");
    for (size_t i = 0; i < m->cap; i++)
        if (m->slots[i].name) insert(s, cap, m->slots[i].name, m->slots[i].index);
    free(m->slots);
    m->slots = s;
    m->cap = cap;
    return AK_OK;
}

ak_status ak__ir_names_put(ak__ir_names *m, const char *name, int32_t index) {
    if ((m->count + 1) * 2 > m->cap) AK_CHECK(grow(m));
    insert(m->slots, m->cap, name, index);
    m->count++;
    return AK_OK;
}

int32_t ak__ir_names_get(const ak__ir_names *m, const char *name) {
    size_t i = ak__fnv1a64_str(name) & (m->cap - 1);
    for (; m->slots[i].name; i = (i + 1) & (m->cap - 1))
        if (strcmp(m->slots[i].name, name) == 0) return m->slots[i].index;
    return -1;
}
