/* Recursive doubling: the latency-optimal allreduce and allgather for small messages
 * (the allgather is described at its function below).
 *
 * Allreduce: with p the largest power of two ≤ n and r = n - p, the first 2r group indices pair up
 * (2j, 2j+1): 2j sends its whole buffer to 2j+1 and sits out (fold). The p remaining
 * ranks (2j+1 for j < r, then r..n-1 shifted down by r) run log2(p) rounds, exchanging
 * the whole buffer with the partner whose virtual index differs in bit k and reducing.
 * Finally each 2j+1 sends the result back to 2j (unfold).
 * Steps: log2(p), plus 2 when n is not a power of two; every step moves S bytes each way
 * (S = count · element size), so a rank sends S · log2(p) (+ S for fold ranks).
 *
 * Each rank computes its own result, so both partners reduce with the operand of the
 * lower group index first: the result is then bit-identical on every rank even where an
 * op is not (min/max of ±0, NaN payloads). */
#include "comm/algo/algo.h"
#include "core/check.h"

typedef struct rd_ctx {
    const ak__algo_ctx *c;
    const ak__group *g;
    char *buf, *tmp;
    size_t count, bytes;
    ak_dtype dt;
    ak_reduce_op op;
    uint64_t tag;
} rd_ctx;

/* Group index of virtual index v (the first r virtual indices are the odd fold ranks). */
static int rd_real(int v, int r) { return v < r ? 2 * v + 1 : v + r; }

/* Exchange with group index `peer` (to and/or from) and fold its data into buf. */
static ak_status rd_combine(rd_ctx *x, int peer, int send) {
    int rank = x->g->ranks[peer];
    AK_CHECK(ak__p2p_sendrecv(x->c, rank, x->buf, send ? x->bytes : 0, rank, x->tmp, x->bytes,
                              x->tag));
    int mine_first = x->g->me < peer;
    return ak_reduce(x->op, x->dt, x->buf, mine_first ? x->buf : x->tmp,
                     mine_first ? x->tmp : x->buf, x->count);
}

ak_status ak__allreduce_recursive_doubling(const ak__algo_ctx *c, const ak__group *g, void *buf,
                                           size_t count, ak_dtype dt, ak_reduce_op op,
                                           uint64_t tag) {
    if (g->n == 1 || count == 0) return AK_OK;
    rd_ctx x = {c, g, buf, NULL, count, 0, dt, op, tag};
    size_t esize;
    AK_CHECK(ak_dtype_size(dt, &esize));
    x.bytes = count * esize;
    int p = 1;
    while (p * 2 <= g->n) p *= 2;
    int r = g->n - p, me = g->me;
    if (me < 2 * r && me % 2 == 0) { /* folded: hand the data over, get the result back */
        int partner = g->ranks[me + 1];
        AK_CHECK(ak__p2p_sendrecv(c, partner, buf, x.bytes, partner, NULL, 0, tag));
        return ak__p2p_sendrecv(c, partner, NULL, 0, partner, buf, x.bytes, tag);
    }
    void *tmp;
    AK_CHECK(ak__algo_scratch(c, x.bytes, &tmp));
    x.tmp = tmp;
    if (me < 2 * r) AK_CHECK(rd_combine(&x, me - 1, 0));
    int v = me < 2 * r ? me / 2 : me - r;
    for (int mask = 1; mask < p; mask <<= 1) AK_CHECK(rd_combine(&x, rd_real(v ^ mask, r), 1));
    if (me < 2 * r) return ak__p2p_sendrecv(c, g->ranks[me - 1], buf, x.bytes, 0, NULL, 0, tag);
    return AK_OK;
}

/* ---- allgather ------------------------------------------------------------------------ */

/* Blocks back to back in group order: every aligned run of them is one contiguous span. */
static int blocks_contiguous(const size_t *counts, const size_t *displs, int n) {
    for (int b = 1; b < n; b++)
        if (displs[b] != displs[b - 1] + counts[b - 1]) return 0;
    return 1;
}

/* Recursive-doubling allgather (n a power of two): in the round at distance m = 1, 2, 4, …
 * index i holds the m blocks of its aligned run [i & ~(m−1), +m) and swaps them with
 * partner i XOR m, whose run is the neighbouring one; after log2 n rounds every rank
 * holds all n. Bytes each rank sends: S/n + 2S/n + … = (n − 1)/n · S, in log2 n steps
 * instead of the ring's n − 1, straight between the places in buf (no copy). Each run
 * is one message, so the blocks must lie back to back in group order; other layouts and
 * other group sizes take the Bruck allgather (same steps, one local copy more). */
ak_status ak__allgatherv_recursive_doubling(const ak__algo_ctx *c, const ak__group *g, void *buf,
                                            const size_t *counts, const size_t *displs,
                                            size_t elem_size, uint64_t tag) {
    int n = g->n, me = g->me;
    if ((n & (n - 1)) || !blocks_contiguous(counts, displs, n))
        return ak__allgatherv_bruck(c, g, buf, counts, displs, elem_size, tag);
    char *p = buf;
    for (int m = 1; m < n; m <<= 1) {
        int mine = me & ~(m - 1), theirs = (me ^ m) & ~(m - 1), peer = g->ranks[me ^ m];
        size_t so = displs[mine], ro = displs[theirs];
        size_t sl = displs[mine + m - 1] + counts[mine + m - 1] - so;
        size_t rl = displs[theirs + m - 1] + counts[theirs + m - 1] - ro;
        AK_CHECK(ak__p2p_sendrecv(c, peer, p + so * elem_size, sl * elem_size, peer,
                                  p + ro * elem_size, rl * elem_size, tag));
    }
    return AK_OK;
}
