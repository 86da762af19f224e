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
#include <string.h>

#include "comm/algo/algo.h"
#include "core/check.h"

/* Every host has exactly L ranks iff all local indices are < L and size == H·L
 * (no host can exceed L, and the total leaves no room for one to fall short). */
static int hier_balanced(const ak__algo_ctx *c) {
    int L = c->local_size;
    if (L <= 0 || c->host_count <= 0 || c->size != c->host_count * L) return 0;
    for (int r = 0; r < c->size; r++)
        if (c->local_index_of[r] < 0 || c->local_index_of[r] >= L) return 0;
    return 1;
}

ak_status ak__hier_groups_init(ak__hier_groups *g, const ak__algo_ctx *c) {
    memset(g, 0, sizeof *g);
    g->balanced = hier_balanced(c);
    if (!g->balanced) return AK_OK;
    int H = c->host_count, L = c->local_size;
    int *inter_ranks = g->stack_ranks;
    if (H > AK_HIER_STACK_ENTRIES) {
        AK_CHECK(ak_alloc((size_t)H * sizeof(int), &g->heap));
        inter_ranks = g->heap;
    }
    g->intra = (ak__group){c->same_host_ranks, L, c->local_index_of[c->rank]};
    for (int r = 0; r < c->size; r++)
        if (c->local_index_of[r] == g->intra.me) inter_ranks[c->host_of[r]] = r;
    g->inter = (ak__group){inter_ranks, H, c->host_of[c->rank]};
    return AK_OK;
}

void ak__hier_groups_free(ak__hier_groups *g) {
    ak_free(g->heap);
    g->heap = NULL;
}

/* The three phases one after another; the allgather's layout is the L blocks of
 * ak__block_range(count, L, ·), as the reduce-scatter left them. */
static ak_status hier_run(const ak__algo_ctx *c, const ak__hier_groups *g, const void *src, char *buf,
                          size_t count, ak_dtype dt, ak_reduce_op op, uint64_t tag) {
    size_t esize;
    AK_CHECK(ak_dtype_size(dt, &esize));
    int L = g->intra.n, li = g->intra.me;
    size_t stack[2 * AK_HIER_STACK_ENTRIES], *counts = stack;
    void *heap = NULL;
    if (L > AK_HIER_STACK_ENTRIES) {
        AK_CHECK(ak_alloc(2 * (size_t)L * sizeof(size_t), &heap));
        counts = heap;
    }
    size_t *displs = counts + L;
    for (int i = 0; i < L; i++) ak__block_range(count, L, i, &displs[i], &counts[i]);
    ak_status st = ak__reduce_scatter_ring(c, &g->intra, src, buf, count, dt, op, tag);
    char *shard = buf + displs[li] * esize;
    if (st == AK_OK) st = ak__allreduce_ring(c, &g->inter, shard, shard, counts[li], dt, op, tag);
    if (st == AK_OK) st = ak__allgatherv_ring(c, &g->intra, buf, counts, displs, esize, tag);
    ak_free(heap);
    return st;
}

static ak_status hier_flat(const ak__algo_ctx *c, const void *src, void *buf, size_t count, ak_dtype dt,
                           ak_reduce_op op, uint64_t tag) {
    AK_LOG_DEBUG(AK_SUBSYS_COMM,
                 "comm: hierarchical allreduce needs the same ranks on every host "
                 "(%d ranks on %d hosts, %d here): using the flat ring",
                 c->size, c->host_count, c->local_size);
    int stack[AK_HIER_STACK_ENTRIES], *ranks = stack;
    void *heap = NULL;
    if (c->size > AK_HIER_STACK_ENTRIES) {
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
    ak__hier_groups g;
    AK_CHECK(ak__hier_groups_init(&g, c));
    ak_status st = g.balanced ? hier_run(c, &g, src, buf, count, dt, op, tag)
                              : hier_flat(c, src, buf, count, dt, op, tag);
    ak__hier_groups_free(&g);
    return st;
}
