/* Rooted collectives for large messages, each built from two bandwidth-optimal phases
 * (n ranks, S bytes, blocks of ak__block_range):
 *
 * - broadcast (van de Geijn): a binomial scatter of the root's buffer in n blocks
 *   numbered from the root (ak__scatter_binomial), then a ring allgather of them.
 *   ceil(log2 n) + n − 1 steps; the root sends (n − 1)/n · S in the scatter and every
 *   rank about (n − 1)/n · S in the allgather, against S · ceil(log2 n) out of the root
 *   of a binomial broadcast. Worth it from 3 ranks on and for large S only: the extra
 *   steps cost latency, and every rank forwards blocks.
 * - reduce (Rabenseifner-style): a ring reduce-scatter (n − 1 steps, (n − 1)/n · S sent
 *   per rank, segments pipelined with the reduction), then every rank sends its reduced
 *   block to the root (n − 1 messages into the root, (n − 1)/n · S). The binomial reduce
 *   instead moves and reduces the whole S at each of its ceil(log2 n) levels.
 * Both read only the point-to-point layer and the ring / tree building blocks. */
#include "comm/algo/algo.h"
#include "core/check.h"

ak_status ak__broadcast_scatter_allgather(const ak__algo_ctx *c, const ak__group *g, void *buf,
                                          size_t bytes, int root, uint64_t tag) {
    if (g->n == 1 || bytes == 0) return AK_OK;
    AK_CHECK(ak__scatter_binomial(c, g, buf, bytes, root, tag));
    /* group index i holds block (i − root) mod n: the allgather's blocks rotated by root */
    return ak__allgather_blocks_ring(c, g, buf, bytes, 1, root, tag);
}

/* block i of the reduce's gather: ak__block_range of the count, in bytes */
typedef struct gather_layout {
    size_t count, esize;
    int n;
} gather_layout;

static void gather_block(const void *ctx, int i, size_t *off, size_t *len) {
    const gather_layout *l = ctx;
    ak__block_range(l->count, l->n, i, off, len);
    *off *= l->esize;
    *len *= l->esize;
}

ak_status ak__reduce_scatter_gather(const ak__algo_ctx *c, const ak__group *g, const void *src, void *buf,
                                    size_t count, ak_dtype dt, ak_reduce_op op, int root,
                                    uint64_t tag) {
    if (g->n == 1 || count == 0) return ak__copy_alone(src, buf, count, dt);
    gather_layout l = {count, 0, g->n};
    AK_CHECK(ak_dtype_size(dt, &l.esize));
    AK_CHECK(ak__reduce_scatter_ring(c, g, src, buf, count, dt, op, tag));
    char *p = buf;
    if (g->me == root) return ak__fan(c, g, p, gather_block, &l, 0, tag);
    size_t off, len;
    gather_block(&l, g->me, &off, &len);
    int to = g->ranks[root];
    return len ? ak__p2p_sendrecv(c, to, p + off, len, to, NULL, 0, tag) : AK_OK;
}
