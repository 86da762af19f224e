/* The static memory plan: every activation that owns bytes (not an alias, constant or
 * caller input) gets an offset in one arena so that two values alive at the same step
 * never overlap. Greedy by size (largest first, each at the lowest offset that fits
 * between the already placed values whose lifetimes intersect it), which is what
 * TFLite's and ORT's planners do in spirit; near-optimal on chain-like CNN graphs.
 *
 * Outputs written over an input (AK_OP_Y_OVER_Z: a convolution's residual Z, read element
 * by element just before the same element of Y is written) share the input's slot when
 * the input dies at that node and has Y's size: the slot then spans both lifetimes, and Y
 * is written into lines the kernel has just read instead of lines that have to be fetched
 * for ownership. */
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

static int owns_bytes(const ak_session *s, int32_t v) {
    return s->source[v] == AK_SRC_ACTIVATION && s->alias_root[v] == v && s->first_def[v] >= 0 &&
           ak__tensor_nbytes(&s->values[v]) > 0;
}

/* The Z whose slot node step k's Y may take (see the top), or AK_IR_NONE. */
static int32_t reusable_z(const ak_session *s, size_t k) {
    const ak__exec_node *e = &s->nodes[k];
    const ak__ir_node *n = e->node;
    if (e->folded || e->removed || !(e->def->flags & AK_OP_Y_OVER_Z) || n->num_inputs < 4 ||
        n->inputs[3] == AK_IR_NONE || n->outputs[0] == AK_IR_NONE)
        return AK_IR_NONE;
    int32_t z = s->alias_root[n->inputs[3]], y = n->outputs[0];
    if (!owns_bytes(s, z) || !owns_bytes(s, y) || s->last_use[z] != (int32_t)k ||
        ak__tensor_nbytes(&s->values[z]) != ak__tensor_nbytes(&s->values[y]))
        return AK_IR_NONE;
    for (uint32_t i = 0; i < 3; i++) /* an input sharing Z's bytes would be overwritten */
        if (n->inputs[i] != AK_IR_NONE && s->alias_root[n->inputs[i]] == z) return AK_IR_NONE;
    return z;
}

/* slot[v]: the value whose arena slot v uses (itself, or a Z it was written over); the
 * slot's lifetime is the union of its values'. */
static void share_slots(const ak_session *s, int32_t *slot, int32_t *last) {
    for (size_t v = 0; v < s->g->num_values; v++) slot[v] = (int32_t)v, last[v] = s->last_use[v];
    for (size_t k = 0; k < s->num_nodes; k++) {
        int32_t z = reusable_z(s, k);
        if (z == AK_IR_NONE) continue;
        int32_t y = s->nodes[k].node->outputs[0], root = slot[z];
        slot[y] = root;
        if (last[y] > last[root]) last[root] = last[y];
    }
}

static size_t collect(const ak_session *s, const int32_t *slot, const int32_t *last,
                      plan_item *items) {
    size_t n = 0;
    for (size_t v = 0; v < s->g->num_values; v++) {
        if (!owns_bytes(s, (int32_t)v) || slot[v] != (int32_t)v) continue;
        size_t bytes = align64(ak__tensor_nbytes(&s->values[v]));
        items[n++] = (plan_item){(int32_t)v, s->first_def[v], last[v], bytes, 0};
    }
    return n;
}

ak_status ak__memplan_build(ak_session *s) {
    size_t nv = s->g->num_values ? s->g->num_values : 1;
    plan_item *items = calloc(nv, sizeof *items);
    plan_item **placed = calloc(nv, sizeof *placed);
    const plan_item **scratch = calloc(nv, sizeof *scratch);
    int32_t *slot = calloc(nv, sizeof *slot), *last = calloc(nv, sizeof *last);
    if (!items || !placed || !scratch || !slot || !last) {
        free(items);
        free(placed);
        free(scratch);
        free(slot);
        free(last);
        return AK_FAIL(AK_ERR_NO_MEMORY, "memory plan: out of memory");
    }
    share_slots(s, slot, last);
    size_t n = collect(s, slot, last, items), total = 0, naive = 0;
    qsort(items, n, sizeof *items, by_size_desc);
    for (size_t i = 0; i < n; i++) {
        items[i].offset = find_offset(&items[i], placed, i, scratch);
        placed[i] = &items[i];
        if (items[i].offset + items[i].size > total) total = items[i].offset + items[i].size;
        s->plan_offset[items[i].value] = items[i].offset;
    }
    for (size_t v = 0; v < s->g->num_values; v++) {
        if (!owns_bytes(s, (int32_t)v)) continue;
        naive += align64(ak__tensor_nbytes(&s->values[v]));
        if (slot[v] != (int32_t)v) s->plan_offset[v] = s->plan_offset[slot[v]]; /* a root */
    }
    free(items);
    free(placed);
    free(scratch);
    free(slot);
    free(last);
    void *arena;
    AK_CHECK(ak_alloc(total, &arena));
    ak_free(s->retired_arena);
    s->retired_arena = s->arena;
    s->arena = arena;
    s->arena_bytes = total;
    s->naive_bytes = naive;
    return AK_OK;
}
