/* Topological order of an IR graph (Kahn's algorithm).
 *
 * Edges run from the producer of each node input to the node, and from the producer of
 * each captured value (read inside the node's subgraphs) to the node. Ready nodes leave a
 * min-heap by index, so a file that is already sorted keeps its order exactly and any
 * other file gets a reproducible one. */
#include <stdlib.h>

#include "core/check.h"
#include "infer/ir/ir.h"

typedef struct heap {
    int32_t *a;
    size_t n;
} heap;

static void heap_push(heap *h, int32_t v) {
    size_t i = h->n++;
    while (i > 0 && h->a[(i - 1) / 2] > v) {
        h->a[i] = h->a[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->a[i] = v;
}

static int32_t heap_pop(heap *h) {
    int32_t top = h->a[0], last = h->a[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && h->a[c + 1] < h->a[c]) c++;
        if (last <= h->a[c]) break;
        h->a[i] = h->a[c];
        i = c;
    }
    if (h->n) h->a[i] = last;
    return top;
}

/* The node producing value v of g, or AK_IR_NONE (inputs, constants, outer values). */
static int32_t producer_of(const ak__ir_graph *g, int32_t v) {
    return v == AK_IR_NONE ? AK_IR_NONE : g->values[v].producer;
}

/* Runs `body` with p bound to the producing node of each dependency of node i. */
#define FOR_EACH_DEP(g, i, body)                                                          \
    do {                                                                                 \
        const ak__ir_node *n_ = &(g)->nodes[i];                                          \
        for (uint32_t k_ = 0; k_ < n_->num_inputs + n_->num_captures; k_++) {            \
            int32_t v_ = k_ < n_->num_inputs ? n_->inputs[k_]                           \
                                             : n_->captures[k_ - n_->num_inputs];        \
            int32_t p = producer_of((g), v_);                                            \
            if (p != AK_IR_NONE) body;                                                   \
        }                                                                                \
    } while (0)

/* After Kahn stops early, every unordered node (indeg > 0) has an unordered producer.
 * Stepping to such a producer num_nodes times must end on a cycle, not merely behind one,
 * so the error names a node that really is part of it. */
static size_t on_cycle(const ak__ir_graph *g, const uint32_t *indeg) {
    size_t cur = 0;
    while (indeg[cur] == 0) cur++;
    for (size_t step = 0; step < g->num_nodes; step++) {
        size_t next = cur;
        FOR_EACH_DEP(g, cur, {
            if (next == cur && indeg[p] > 0) next = (size_t)p;
        });
        if (next == cur) break; /* a self-loop */
        cur = next;
    }
    return cur;
}

ak_status ak__ir_graph_sort(ak__ir_graph *g) {
    size_t n = g->num_nodes;
    free(g->order);
    g->order = NULL;
    /* CSR of consumers per producer: start[p]..start[p+1] in edges */
    size_t *start = calloc(n + 1, sizeof *start);
    uint32_t *indeg = calloc(n ? n : 1, sizeof *indeg);
    int32_t *order = malloc((n ? n : 1) * sizeof *order);
    int32_t *heap_mem = malloc((n ? n : 1) * sizeof *heap_mem);
    int32_t *edges = NULL;
    ak_status st = AK_OK;
    if (!start || !indeg || !order || !heap_mem) goto oom;
    for (size_t i = 0; i < n; i++) FOR_EACH_DEP(g, i, { start[p + 1]++; indeg[i]++; });
    for (size_t i = 0; i < n; i++) start[i + 1] += start[i];
    edges = malloc((start[n] ? start[n] : 1) * sizeof *edges);
    if (!edges) goto oom;
    {
        size_t *fill = calloc(n + 1, sizeof *fill);
        if (!fill) goto oom;
        for (size_t i = 0; i < n; i++)
            FOR_EACH_DEP(g, i, { edges[start[p] + fill[p]++] = (int32_t)i; });
        free(fill);
    }
    heap h = {heap_mem, 0};
    for (size_t i = 0; i < n; i++)
        if (indeg[i] == 0) heap_push(&h, (int32_t)i);
    size_t done = 0;
    while (h.n) {
        int32_t i = heap_pop(&h);
        order[done++] = i;
        for (size_t e = start[i]; e < start[i + 1]; e++)
            if (--indeg[edges[e]] == 0) heap_push(&h, edges[e]);
    }
    if (done < n) {
        size_t i = on_cycle(g, indeg);
        const ak__ir_node *node = &g->nodes[i];
        st = AK_FAIL(AK_ERR_INVALID_MODEL,
                     "graph has a cycle through node %zu '%.64s' (%.64s): it depends on its "
                     "own output (%zu of %zu nodes could be ordered)",
                     i, node->name, node->op_type, done, n);
        goto done;
    }
    g->order = order;
    order = NULL;
    goto done;
oom:
    st = AK_FAIL(AK_ERR_NO_MEMORY, "topological sort of %zu nodes: out of memory", n);
done:
    free(start);
    free(indeg);
    free(order);
    free(heap_mem);
    free(edges);
    return st;
}
