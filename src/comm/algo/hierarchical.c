/* Two-level hierarchical allreduce for H hosts of L ranks each (S = message bytes):
 *
 * 1. intra-host ring reduce-scatter over the host's L ranks: local index i ends with
 *    block i (ak__block_range(count, L, i)) reduced over its host. (L-1) steps, each rank
 *    sends (L-1)/L · S over shared memory.
 * 2. every local index i, in parallel, runs a ring allreduce of its block over the group
 *    {the rank with local index i on each host}, ordered by host. 2(H-1) steps, each rank
 *    sends 2(H-1)/H · S/L across hosts — L connections per host pair share the link, so
 *    no single leader bottlenecks the inter-host traffic.
 * 3. intra-host ring allgather of the L blocks: (L-1)/L · S per rank over shared memory.
 * Inter-host bytes per host: 2(H-1)/H · S, the same as a flat ring over hosts, but the
 * slow link is crossed by 2(H-1) steps instead of 2(HL-1).
 *
 * It needs the same L on every host; otherwise it runs the flat ring and logs why. The
 * check reads only the world-wide topology arrays, so every rank decides the same. */
#include <stdlib.h>

#include "comm/algo/algo.h"
#include "core/check.h"

#define HIER_STACK_ENTRIES 64 /* hosts / local ranks handled without allocating */

/* Every host has exactly L ranks iff all local indices are < L and size == H·L
 * (no host can exceed L, and the total leaves no room for one to fall short). */
static int hier_balanced(const ak__algo_ctx *c) {
    int L = c->local_size;
    if (L <= 0 || c->host_count <= 0 || c->size != c->host_count * L) return 0;
    for (int r = 0; r < c->size; r++)
        if (c->local_index_of[r] < 0 || c->local_index_of[r] >= L) return 0;
    return 1;
}

/* Scratch arrays for the groups and the allgather layout: on the stack when small. */
typedef struct hier_plan {
    int stack_ranks[HIER_STACK_ENTRIES];
    size_t stack_sizes[2 * HIER_STACK_ENTRIES];
    int *inter_ranks;       /* [H] */
    size_t *counts, *displs; /* [L] */
    void *heap;
    ak__group intra, inter;
} hier_plan;

static ak_status hier_plan_init(hier_plan *p, const ak__algo_ctx *c, size_t count) {
    int H = c->host_count, L = c->local_size;
    p->heap = NULL;
    p->inter_ranks = p->stack_ranks;
    p->counts = p->stack_sizes;
    if (H > HIER_STACK_ENTRIES || L > HIER_STACK_ENTRIES) {
        AK_CHECK(ak_alloc((size_t)H * sizeof(int) + 2 * (size_t)L * sizeof(size_t), &p->heap));
        p->counts = p->heap;
        p->inter_ranks = (int *)(p->counts + 2 * (size_t)L);
    }
    p->displs = p->counts + L;
    for (int i = 0; i < L; i++) ak__block_range(count, L, i, &p->displs[i], &p->counts[i]);
    p->intra.ranks = c->same_host_ranks;
    p->intra.n = L;
    p->intra.me = c->local_index_of[c->rank];
    int li = p->intra.me;
    for (int r = 0; r < c->size; r++)
        if (c->local_index_of[r] == li) p->inter_ranks[c->host_of[r]] = r;
    p->inter.ranks = p->inter_ranks;
    p->inter.n = H;
    p->inter.me = c->host_of[c->rank];
    return AK_OK;
}

static ak_status hier_run(const ak__algo_ctx *c, hier_plan *p, const void *src, char *buf, size_t count,
                          ak_dtype dt, ak_reduce_op op, uint64_t tag) {
    size_t esize;
    AK_CHECK(ak_dtype_size(dt, &esize));
    int li = p->intra.me;
    AK_CHECK(ak__reduce_scatter_ring(c, &p->intra, src, buf, count, dt, op, tag));
    char *shard = buf + p->displs[li] * esize;
    AK_CHECK(ak__allreduce_ring(c, &p->inter, shard, shard, p->counts[li], dt, op, tag));
    return ak__allgatherv_ring(c, &p->intra, buf, p->counts, p->displs, esize, tag);
}

static ak_status hier_flat(const ak__algo_ctx *c, const void *src, void *buf, size_t count, ak_dtype dt,
                           ak_reduce_op op, uint64_t tag) {
    AK_LOG_DEBUG(AK_SUBSYS_COMM,
                 "comm: hierarchical allreduce needs the same ranks on every host "
                 "(%d ranks on %d hosts, %d here): using the flat ring",
                 c->size, c->host_count, c->local_size);
    int stack[HIER_STACK_ENTRIES], *ranks = stack;
    void *heap = NULL;
    if (c->size > HIER_STACK_ENTRIES) {
        AK_CHECK(ak_alloc((size_t)c->size * sizeof(int), &heap));
        ranks = heap;
    }
    for (int r = 0; r < c->size; r++) ranks[r] = r;
    ak__group g = {ranks, c->size, c->rank};
    ak_status st = ak__allreduce_ring(c, &g, src, buf, count, dt, op, tag);
    ak_free(heap);
    return st;
}

ak_status ak__allreduce_hierarchical(const ak__algo_ctx *c, const void *src, void *buf, size_t count,
                                     ak_dtype dt, ak_reduce_op op, uint64_t tag) {
    if (count == 0) return AK_OK;
    if (!hier_balanced(c)) return hier_flat(c, src, buf, count, dt, op, tag);
    hier_plan p;
    AK_CHECK(hier_plan_init(&p, c, count));
    ak_status st = hier_run(c, &p, src, buf, count, dt, op, tag);
    ak_free(p.heap);
    return st;
}
