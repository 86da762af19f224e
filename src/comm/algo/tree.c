/* Tree and linear algorithms (S = message bytes, n = group size, v = index relative to
 * the root, so the root is v = 0):
 *
 * - broadcast (binomial): v receives from v - 2^k (k = lowest set bit of v) and sends to
 *   v + 2^j for every j < k with v + 2^j < n. ceil(log2 n) rounds; the root sends
 *   S · ceil(log2 n), every other rank receives S once. Messages above one segment
 *   (AK_BCAST_SEG_BYTES) are forwarded segment by segment (pipelined).
 * - scatter (binomial, blocks numbered from the root): the same tree, but each child gets
 *   only its subtree's blocks; the root sends (n-1)/n · S in ceil(log2 n) rounds. It is
 *   the first half of the scatter-allgather broadcast.
 * - reduce (binomial, the mirror image): in round k, v with bit k set sends its partial
 *   result to v - 2^k and stops; the others receive from v + 2^k (if it exists) and
 *   reduce. ceil(log2 n) rounds, every non-root rank sends S once.
 * - allreduce (tree): reduce to index 0, then broadcast from it: 2 · ceil(log2 n) rounds.
 * - gather / scatter (linear): the root exchanges S with each of the n-1 others, a batch
 *   of FAN_BATCH at a time; n-1 messages, (n-1) · S bytes through the root.
 * - alltoallv (pairwise): n-1 steps; at step s index i sends its block for i+s and
 *   receives the block from i-s, so every pair exchanges exactly once and no rank is the
 *   target of two senders in one step.
 * - barrier (dissemination): ceil(log2 n) rounds; in round k index i sends 1 byte to
 *   i + 2^k and waits for 1 byte from i - 2^k. After the last round every rank has
 *   (transitively) heard from every other one.
 * Zero-byte payloads send nothing (both sides know the size). */
#include <string.h>

#include "comm/algo/algo.h"
#include "core/check.h"

#define FAN_BATCH 16
#define TREE_MAX_CHILDREN 32 /* log2 of any int group size */

/* ---- binomial trees ------------------------------------------------------------------ */

static int tree_rel(const ak__group *g, int root) { return (g->me - root + g->n) % g->n; }

/* communicator rank of relative index v */
static int tree_rank(const ak__group *g, int root, int v) { return g->ranks[(v + root) % g->n]; }

/* Lowest set bit of v (the round in which v hears from its parent); n rounded up to a
 * power of two for the root, which has no parent. */
static int tree_parent_mask(int v, int n) {
    int mask = 1;
    while (mask < n && !(v & mask)) mask <<= 1;
    return mask;
}

/* The children of relative index v as distances m (child v + m), largest subtree first;
 * its parent's distance is returned in *mask. */
static int tree_children(const ak__group *g, int v, int *mask, int *dist) {
    int k = 0;
    *mask = tree_parent_mask(v, g->n);
    for (int m = *mask >> 1; m > 0; m >>= 1)
        if (v + m < g->n) dist[k++] = m;
    return k;
}

/* Segment k of a pipelined broadcast of `bytes`. */
static size_t bcast_segment(size_t bytes, size_t k, size_t *len) {
    size_t start = k * AK_BCAST_SEG_BYTES;
    *len = bytes - start < AK_BCAST_SEG_BYTES ? bytes - start : AK_BCAST_SEG_BYTES;
    return start;
}

/* Posts the receive of segment k from the parent into its slot. */
static ak_status bcast_recv(const ak__algo_ctx *c, ak__p2p *op, int parent, char *buf, size_t bytes,
                            size_t k, uint64_t tag) {
    size_t len, off = bcast_segment(bytes, k, &len);
    ak__p2p_init_recv(op, parent, buf + off, len, tag);
    return ak__p2p_post(c, op);
}

/* Binomial broadcast, pipelined: v keeps receives for BCAST_WINDOW segments of
 * AK_BCAST_SEG_BYTES posted to its parent and sends each segment on to its children as
 * it lands, so a chain root → … → leaf streams instead of every hop waiting for the
 * whole message (16 MiB on 4 ranks over loopback TCP: the second hop no longer adds a
 * full t(S)). Up to one segment it is the plain binomial tree. Both ends cut the
 * segments from `bytes` alone. */
#define BCAST_WINDOW 4
static ak_status binomial_broadcast(const ak__algo_ctx *c, const ak__group *g, char *buf, size_t bytes,
                                    int root, uint64_t tag) {
    int v = tree_rel(g, root), mask, dist[TREE_MAX_CHILDREN];
    int nc = tree_children(g, v, &mask, dist);
    int parent = v ? tree_rank(g, root, v - mask) : -1;
    size_t nseg = (bytes + AK_BCAST_SEG_BYTES - 1) / AK_BCAST_SEG_BYTES;
    ak__p2p recvs[BCAST_WINDOW], sends[BCAST_WINDOW][TREE_MAX_CHILDREN];
    ak__p2p *ptrs[TREE_MAX_CHILDREN], *rop;
    for (size_t k = 0; k < nseg && k < BCAST_WINDOW && parent >= 0; k++)
        AK_CHECK(bcast_recv(c, &recvs[k], parent, buf, bytes, k, tag));
    for (size_t k = 0; k < nseg + BCAST_WINDOW; k++) {
        size_t slot = k % BCAST_WINDOW, len, off;
        /* the sends that last used this slot (segment k - BCAST_WINDOW) are done first */
        for (int j = 0; j < nc; j++) ptrs[j] = &sends[slot][j];
        if (k >= BCAST_WINDOW && nc) AK_CHECK(ak__p2p_wait(c, ptrs, nc));
        if (k >= nseg) continue;
        if (parent >= 0) {
            rop = &recvs[slot];
            AK_CHECK(ak__p2p_wait(c, &rop, 1));
            if (k + BCAST_WINDOW < nseg)
                AK_CHECK(bcast_recv(c, rop, parent, buf, bytes, k + BCAST_WINDOW, tag));
        }
        off = bcast_segment(bytes, k, &len);
        for (int j = 0; j < nc; j++) {
            ak__p2p_init_send(&sends[slot][j], tree_rank(g, root, v + dist[j]), buf + off, len, tag);
            AK_CHECK(ak__p2p_post(c, &sends[slot][j]));
        }
    }
    return AK_OK;
}

/* Binomial scatter: v receives its subtree's blocks [v, v + 2^k) from its parent (k =
 * lowest set bit of v; relative index v owns block v of ak__block_range(bytes, n, v)),
 * then hands each child v + m the blocks of its subtree [v + m, v + 2m), largest first.
 * Empty shares are skipped on both sides. */
static ak_status binomial_scatter(const ak__algo_ctx *c, const ak__group *g, char *buf, size_t bytes,
                                  int root, uint64_t tag) {
    int n = g->n, v = tree_rel(g, root), mask, dist[TREE_MAX_CHILDREN];
    int nc = tree_children(g, v, &mask, dist);
    size_t off, len;
    if (v != 0) {
        ak__block_span(bytes, n, v, v + mask, &off, &len);
        if (len)
            AK_CHECK(ak__p2p_sendrecv(c, 0, NULL, 0, tree_rank(g, root, v - mask), buf + off,
                                      len, tag));
    }
    ak__p2p ops[TREE_MAX_CHILDREN];
    ak__p2p *ptrs[TREE_MAX_CHILDREN];
    int k = 0;
    for (int j = 0; j < nc; j++) {
        ak__block_span(bytes, n, v + dist[j], v + 2 * dist[j], &off, &len);
        if (len == 0) continue;
        ak__p2p_init_send(&ops[k], tree_rank(g, root, v + dist[j]), buf + off, len, tag);
        AK_CHECK(ak__p2p_post(c, &ops[k]));
        ptrs[k] = &ops[k];
        k++;
    }
    return k ? ak__p2p_wait(c, ptrs, k) : AK_OK;
}

ak_status ak__broadcast_tree(const ak__algo_ctx *c, const ak__group *g, void *buf, size_t bytes, int root,
                             uint64_t tag) {
    if (g->n == 1 || bytes == 0) return AK_OK;
    return binomial_broadcast(c, g, buf, bytes, root, tag);
}

ak_status ak__scatter_binomial(const ak__algo_ctx *c, const ak__group *g, void *buf, size_t bytes, int root,
                               uint64_t tag) {
    if (g->n == 1 || bytes == 0) return AK_OK;
    return binomial_scatter(c, g, buf, bytes, root, tag);
}

ak_status ak__reduce_tree(const ak__algo_ctx *c, const ak__group *g, void *buf, size_t count, ak_dtype dt,
                          ak_reduce_op op, int root, uint64_t tag) {
    if (g->n == 1 || count == 0) return AK_OK;
    size_t esize;
    AK_CHECK(ak_dtype_size(dt, &esize));
    size_t bytes = count * esize;
    void *tmp;
    AK_CHECK(ak__algo_scratch(c, bytes, &tmp));
    int v = tree_rel(g, root);
    for (int mask = 1; mask < g->n; mask <<= 1) {
        if (v & mask) /* our subtree is complete: pass it up */
            return ak__p2p_sendrecv(c, tree_rank(g, root, v - mask), buf, bytes, 0, NULL, 0, tag);
        if (v + mask >= g->n) continue;
        AK_CHECK(ak__p2p_sendrecv(c, 0, NULL, 0, tree_rank(g, root, v + mask), tmp, bytes, tag));
        AK_CHECK(ak_reduce(op, dt, buf, buf, tmp, count));
    }
    return AK_OK;
}

ak_status ak__allreduce_tree(const ak__algo_ctx *c, const ak__group *g, void *buf, size_t count,
                             ak_dtype dt, ak_reduce_op op, uint64_t tag) {
    size_t esize;
    AK_CHECK(ak_dtype_size(dt, &esize));
    AK_CHECK(ak__reduce_tree(c, g, buf, count, dt, op, 0, tag));
    return ak__broadcast_tree(c, g, buf, count * esize, 0, tag);
}

/* ---- linear -------------------------------------------------------------------------- */

/* The root's side of a gather (recv) / scatter (send): block i of base (where `block`
 * says) with every other index, at most FAN_BATCH messages in flight; empty blocks are
 * skipped (their owners skip them too). */
ak_status ak__fan(const ak__algo_ctx *c, const ak__group *g, char *base, ak__block_fn block, const void *ctx,
                  int is_send, uint64_t tag) {
    ak__p2p ops[FAN_BATCH];
    ak__p2p *ptrs[FAN_BATCH];
    int k = 0;
    for (int i = 0; i < g->n; i++) {
        size_t off, len;
        block(ctx, i, &off, &len);
        if (i == g->me || len == 0) continue;
        if (is_send) ak__p2p_init_send(&ops[k], g->ranks[i], base + off, len, tag);
        else ak__p2p_init_recv(&ops[k], g->ranks[i], base + off, len, tag);
        AK_CHECK(ak__p2p_post(c, &ops[k]));
        ptrs[k] = &ops[k];
        if (++k == FAN_BATCH) {
            AK_CHECK(ak__p2p_wait(c, ptrs, k));
            k = 0;
        }
    }
    return k ? ak__p2p_wait(c, ptrs, k) : AK_OK;
}

/* gather / scatter blocks: `bytes` each, index i's at i × bytes */
static void uniform_block(const void *ctx, int i, size_t *off, size_t *len) {
    *len = *(const size_t *)ctx;
    *off = (size_t)i * *len;
}

static ak_status fan(const ak__algo_ctx *c, const ak__group *g, char *base, size_t bytes, int is_send,
                     uint64_t tag) {
    return ak__fan(c, g, base, uniform_block, &bytes, is_send, tag);
}

/* memmove: the caller may pass its own block of the big buffer as the small one */
static void copy_block(void *dst, const void *src, size_t bytes) {
    if (dst != src && bytes) memmove(dst, src, bytes);
}

ak_status ak__gather_linear(const ak__algo_ctx *c, const ak__group *g, const void *sendbuf, void *recvbuf,
                            size_t bytes, int root, uint64_t tag) {
    if (bytes == 0) return AK_OK;
    int to = g->ranks[root];
    if (g->me != root) return ak__p2p_sendrecv(c, to, sendbuf, bytes, to, NULL, 0, tag);
    copy_block((char *)recvbuf + (size_t)g->me * bytes, sendbuf, bytes);
    return fan(c, g, recvbuf, bytes, 0, tag);
}

ak_status ak__scatter_linear(const ak__algo_ctx *c, const ak__group *g, const void *sendbuf, void *recvbuf,
                             size_t bytes, int root, uint64_t tag) {
    if (bytes == 0) return AK_OK;
    int from = g->ranks[root];
    if (g->me != root) return ak__p2p_sendrecv(c, from, NULL, 0, from, recvbuf, bytes, tag);
    copy_block(recvbuf, (const char *)sendbuf + (size_t)g->me * bytes, bytes);
    return fan(c, g, (char *)(uintptr_t)sendbuf, bytes, 1, tag);
}

/* ---- all to all ---------------------------------------------------------------------- */

ak_status ak__alltoallv_pairwise(const ak__algo_ctx *c, const ak__group *g, const void *sendbuf,
                                 const size_t *scounts, const size_t *sdispls, void *recvbuf,
                                 const size_t *rcounts, const size_t *rdispls,
                                 size_t elem_size, uint64_t tag) {
    const char *sb = sendbuf;
    char *rb = recvbuf;
    int me = g->me, n = g->n;
    copy_block(rb + rdispls[me] * elem_size, sb + sdispls[me] * elem_size,
               rcounts[me] < scounts[me] ? rcounts[me] * elem_size : scounts[me] * elem_size);
    for (int s = 1; s < n; s++) {
        int to = (me + s) % n, from = (me - s + n) % n;
        AK_CHECK(ak__p2p_sendrecv(c, g->ranks[to], sb + sdispls[to] * elem_size,
                                  scounts[to] * elem_size, g->ranks[from],
                                  rb + rdispls[from] * elem_size, rcounts[from] * elem_size, tag));
    }
    return AK_OK;
}

/* ---- barrier ------------------------------------------------------------------------- */

ak_status ak__barrier_dissemination(const ak__algo_ctx *c, const ak__group *g, uint64_t tag) {
    unsigned char out = 1, in = 0;
    for (int dist = 1; dist < g->n; dist <<= 1) {
        int to = g->ranks[(g->me + dist) % g->n];
        int from = g->ranks[(g->me - dist % g->n + g->n) % g->n];
        AK_CHECK(ak__p2p_sendrecv(c, to, &out, 1, from, &in, 1, tag));
    }
    return AK_OK;
}
