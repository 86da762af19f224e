/* The static memory plan: every activation that owns bytes (not an alias, constant or
 * caller input) gets an offset in one arena so that two values alive at the same step
 * never overlap. Greedy by size (largest first, each at the lowest offset that fits
 * between the already placed values whose lifetimes intersect it), which is what
 * TFLite's and ORT's planners do in spirit; near-optimal on chain-like CNN graphs. */
#include <stdlib.h>

#include "infer/runtime/session.h"

typedef struct plan_item {
    int32_t value;
    int32_t first, last; /* execution steps, inclusive */
    size_t size, offset;
} plan_item;

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

static int by_size_desc(const void *a, const void *b) {
    const plan_item *x = a, *y = b;
    if (x->size != y->size) return x->size < y->size ? 1 : -1;
    return x->first - y->first;
}

static int by_offset(const void *a, const void *b) {
    const plan_item *x = *(const plan_item *const *)a, *y = *(const plan_item *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Lowest offset where `it` fits among the placed items whose lifetime meets its own. */
static size_t find_offset(const plan_item *it, plan_item *const *placed, size_t n,
                          const plan_item **scratch) {
    size_t m = 0;
    for (size_t k = 0; k < n; k++)
        if (placed[k]->first <= it->last && it->first <= placed[k]->last) scratch[m++] = placed[k];
    qsort(scratch, m, sizeof *scratch, by_offset);
    size_t offset = 0;
    for (size_t k = 0; k < m; k++) {
        if (scratch[k]->offset >= offset + it->size) break;
        size_t end = scratch[k]->offset + scratch[k]->size;
        if (end > offset) offset = end;
    }
    return offset;
}

static size_t collect(const ak_session *s, plan_item *items) {
    size_t n = 0;
    for (size_t v = 0; v < s->g->num_values; v++) {
        if (s->source[v] != AK_SRC_ACTIVATION || s->alias_root[v] != (int32_t)v) continue;
        if (s->first_def[v] < 0) continue;
        size_t bytes = ak__tensor_nbytes(&s->values[v]);
        if (!bytes) continue;
        items[n++] = (plan_item){(int32_t)v, s->first_def[v], s->last_use[v], align64(bytes), 0};
    }
    return n;
}

ak_status ak__memplan_build(ak_session *s) {
    size_t nv = s->g->num_values ? s->g->num_values : 1;
    plan_item *items = calloc(nv, sizeof *items);
    plan_item **placed = calloc(nv, sizeof *placed);
    const plan_item **scratch = calloc(nv, sizeof *scratch);
    if (!items || !placed || !scratch) {
        free(items);
        free(placed);
        free(scratch);
        return AK_FAIL(AK_ERR_NO_MEMORY, "memory plan: out of memory");
    }
    size_t n = collect(s, items), total = 0, naive = 0;
    qsort(items, n, sizeof *items, by_size_desc);
    for (size_t i = 0; i < n; i++) {
        items[i].offset = find_offset(&items[i], placed, i, scratch);
        placed[i] = &items[i];
        if (items[i].offset + items[i].size > total) total = items[i].offset + items[i].size;
        naive += items[i].size;
        s->plan_offset[items[i].value] = items[i].offset;
    }
    free(items);
    free(placed);
    free(scratch);
    void *arena;
    AK_CHECK(ak_alloc(total, &arena));
    ak_free(s->retired_arena);
    s->retired_arena = s->arena;
    s->arena = arena;
    s->arena_bytes = total;
    s->naive_bytes = naive;
    return AK_OK;
}
