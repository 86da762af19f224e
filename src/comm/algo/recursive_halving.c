/* Recursive-halving reduce-scatter, the latency-optimal reduce-scatter for a power-of-two
 * group (all our ops are commutative, which it needs: each block is reduced in an order
 * that depends on the rank that ends with it).
 *
 * Blocks are those of ak__block_range over the n group indices. Index i starts owning
 * the whole range [0, n); in the round at distance m = n/2, n/4, …, 1 it pairs with
 * i XOR m, keeps the half of its range holding block i, sends the other half to the
 * partner and reduces the partner's copy of the kept half into its own. After log2 n
 * rounds it holds block i reduced over the group.
 * Steps: log2 n; bytes each rank sends: S/2 + S/4 + … = (n − 1)/n · S, as much as the
 * ring, which needs n − 1 steps. Each round is the ring's pipelined step
 * (ak__reduce_step_run), so large halves still overlap the wire with the reduction.
 * A group that is not a power of two runs the ring instead. */
#include "comm/algo/algo.h"
#include "core/check.h"

ak_status ak__reduce_scatter_halving(const ak__algo_ctx *c, const ak__group *g, const void *src, void *buf,
                                     size_t count, ak_dtype dt, ak_reduce_op op, uint64_t tag) {
    int n = g->n, me = g->me;
    if (n & (n - 1)) return ak__reduce_scatter_ring(c, g, src, buf, count, dt, op, tag);
    if (n == 1 || count == 0) return ak__copy_alone(src, buf, count, dt);
    /* the first round reads the input; later ones what the earlier rounds reduced */
    ak__reduce_step s = {0, 0, src, 0, 0, src, buf, 0, 0};
    int lo = 0; /* the range held is blocks [lo, lo + 2m) */
    for (int m = n / 2; m >= 1; m /= 2) {
        int keep = me < lo + m ? lo : lo + m, give = keep == lo ? lo + m : lo;
        s.to = s.from = g->ranks[me ^ m];
        ak__block_span(count, n, give, give + m, &s.soff, &s.slen);
        ak__block_span(count, n, keep, keep + m, &s.roff, &s.rlen);
        AK_CHECK(ak__reduce_step_run(c, &s, dt, op, tag));
        s.send = s.operand = buf;
        lo = keep;
    }
    return AK_OK;
}
