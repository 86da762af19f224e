/* Ring algorithms over a group of n ranks (index i sends to i+1, receives from i-1):
 *
 * - reduce-scatter: n-1 steps; at step s index i sends block (i-s-1) and receives block
 *   (i-s-2), which it reduces into its own copy, so block i ends fully reduced on index
 *   i. Each rank sends (n-1)/n · S bytes (S = count · element size).
 * - allgather(v): n-1 steps; at step s index i forwards block (i-s) and receives block
 *   (i-s-1). Each rank sends the n-1 blocks it does not own (≈ (n-1)/n · S).
 * - allreduce = reduce-scatter + allgather over the same blocks (ak__block_range):
 *   2(n-1) steps, 2(n-1)/n · S bytes sent per rank, which is bandwidth-optimal.
 *
 * Reduce-scatter steps are pipelined: a block is cut into segments of RING_SEG_BYTES,
 * up to RING_WINDOW receives land in comm scratch while earlier segments are reduced
 * into the buffer, and sends keep up to RING_WINDOW segments in flight, so the wire and
 * the reduction kernel overlap. Empty blocks (count < n) send nothing. */
#include <string.h>

#include "comm/algo/algo.h"
#include "core/check.h"

#define RING_SEG_BYTES ((size_t)256 << 10)
#define RING_SEG_MAX_BYTES ((size_t)512 << 10)
#define RING_WINDOW 4

void ak__block_range(size_t count, int n, int b, size_t *offset, size_t *len) {
    size_t base = count / (size_t)n, extra = count % (size_t)n, ub = (size_t)b;
    /* the first `extra` blocks carry one element more */
    *offset = ub * base + (ub < extra ? ub : extra);
    *len = base + (ub < extra ? 1 : 0);
}

/* group index me+delta, wrapped */
static int ring_index(const ak__group *g, int delta) {
    return ((g->me + delta) % g->n + g->n) % g->n;
}

/* ---- pipelined reduce-scatter ------------------------------------------------------- */

typedef struct rs_ring {
    ak_comm *c;
    int right, left; /* communicator ranks */
    uint64_t tag;
    const char *src; /* the input: buf (in place) or the caller's separate send buffer */
    char *buf;
    char *scratch;   /* RING_WINDOW slots of seg elements */
    size_t count, esize, seg;
    int n;
    ak_dtype dt;
    ak_reduce_op op;
} rs_ring;

/* Segment k of the block starting at element `off` of length `len`. */
static void rs_segment(const rs_ring *r, size_t off, size_t len, size_t k, size_t *soff,
                       size_t *slen) {
    size_t start = k * r->seg;
    *soff = off + start;
    *slen = len - start < r->seg ? len - start : r->seg;
}

static size_t rs_segments(const rs_ring *r, size_t len) { return (len + r->seg - 1) / r->seg; }

static char *rs_slot(const rs_ring *r, size_t k) {
    return r->scratch + (k % RING_WINDOW) * r->seg * r->esize;
}

static ak_status rs_post_send(rs_ring *r, ak__p2p *op, const char *from, size_t off, size_t len,
                              size_t k) {
    size_t soff, slen;
    rs_segment(r, off, len, k, &soff, &slen);
    ak__p2p_init_send(op, r->right, from + soff * r->esize, slen * r->esize, r->tag);
    return ak__p2p_post(r->c, op);
}

static ak_status rs_post_recv(rs_ring *r, ak__p2p *op, size_t off, size_t len, size_t k) {
    size_t soff, slen;
    rs_segment(r, off, len, k, &soff, &slen);
    ak__p2p_init_recv(op, r->left, rs_slot(r, k), slen * r->esize, r->tag);
    return ak__p2p_post(r->c, op);
}

/* Waits for segment k of the received block and folds it into buf. A rank receives each
 * block at most once during the reduce-scatter, so its own share still lies in src: an
 * out-of-place call needs no copy of the input into buf first. */
static ak_status rs_reduce_segment(rs_ring *r, ak__p2p *op, size_t off, size_t len, size_t k) {
    AK_CHECK(ak__p2p_wait(r->c, &op, 1));
    size_t soff, slen;
    rs_segment(r, off, len, k, &soff, &slen);
    return ak_reduce(r->op, r->dt, r->buf + soff * r->esize, r->src + soff * r->esize,
                     rs_slot(r, k), slen);
}

/* One ring step: send block [soff, soff+slen) of `from` right, receive block
 * [roff, roff+rlen) from the left and reduce it, both streamed in windows of segments. */
static ak_status rs_step(rs_ring *r, const char *from, size_t soff, size_t slen, size_t roff,
                         size_t rlen) {
    ak__p2p sends[RING_WINDOW], recvs[RING_WINDOW];
    size_t ns = rs_segments(r, slen), nr = rs_segments(r, rlen);
    for (size_t k = 0; k < RING_WINDOW; k++) {
        if (k < nr) AK_CHECK(rs_post_recv(r, &recvs[k], roff, rlen, k));
        if (k < ns) AK_CHECK(rs_post_send(r, &sends[k], from, soff, slen, k));
    }
    size_t total = ns > nr ? ns : nr;
    for (size_t k = 0; k < total; k++) {
        ak__p2p *rop = &recvs[k % RING_WINDOW], *sop = &sends[k % RING_WINDOW];
        if (k < nr) {
            AK_CHECK(rs_reduce_segment(r, rop, roff, rlen, k));
            if (k + RING_WINDOW < nr) AK_CHECK(rs_post_recv(r, rop, roff, rlen, k + RING_WINDOW));
        }
        if (k < ns) {
            AK_CHECK(ak__p2p_wait(r->c, &sop, 1));
            if (k + RING_WINDOW < ns)
                AK_CHECK(rs_post_send(r, sop, from, soff, slen, k + RING_WINDOW));
        }
    }
    return AK_OK;
}

static ak_status rs_setup(rs_ring *r, ak_comm *c, const ak__group *g, const void *src, void *buf,
                          size_t count, ak_dtype dt, ak_reduce_op op, uint64_t tag) {
    memset(r, 0, sizeof *r);
    AK_CHECK(ak_dtype_size(dt, &r->esize));
    r->c = c;
    r->n = g->n;
    r->right = g->ranks[ring_index(g, 1)];
    r->left = g->ranks[ring_index(g, -1)];
    r->tag = tag;
    r->src = src;
    r->buf = buf;
    r->count = count;
    r->dt = dt;
    r->op = op;
    /* segments never exceed the largest block, so small calls need little scratch */
    size_t largest = (count + (size_t)g->n - 1) / (size_t)g->n;
    /* big blocks get bigger segments (a quarter block, up to RING_SEG_MAX_BYTES): every
     * segment costs a message's fixed overhead, and 4 per block still overlap the wire
     * with the reduction; the cap keeps the window of received segments in cache for the
     * reduction that reads them (on loopback TCP 8 MiB segments measured 5-10 % slower) */
    size_t seg = RING_SEG_BYTES / r->esize, quarter = largest / 4, cap = RING_SEG_MAX_BYTES / r->esize;
    if (quarter > seg) seg = quarter < cap ? quarter : cap;
    r->seg = seg < largest ? seg : largest;
    void *scratch;
    AK_CHECK(ak__comm_scratch(c, RING_WINDOW * r->seg * r->esize, &scratch));
    r->scratch = scratch;
    return AK_OK;
}

/* A group of one has nothing to exchange: its result is its input. */
static ak_status copy_alone(const void *src, void *buf, size_t count, ak_dtype dt) {
    size_t esize;
    AK_CHECK(ak_dtype_size(dt, &esize));
    if (src != buf && count) memcpy(buf, src, count * esize);
    return AK_OK;
}

ak_status ak__reduce_scatter_ring(ak_comm *c, const ak__group *g, const void *src, void *buf,
                                  size_t count, ak_dtype dt, ak_reduce_op op, uint64_t tag) {
    if (g->n == 1 || count == 0) return copy_alone(src, buf, count, dt);
    rs_ring r;
    AK_CHECK(rs_setup(&r, c, g, src, buf, count, dt, op, tag));
    for (int s = 0; s < g->n - 1; s++) {
        size_t soff, slen, roff, rlen;
        ak__block_range(count, g->n, ring_index(g, -s - 1), &soff, &slen);
        ak__block_range(count, g->n, ring_index(g, -s - 2), &roff, &rlen);
        /* the first block sent is still the input; every later one was reduced into buf
         * on the step before */
        AK_CHECK(rs_step(&r, s == 0 ? r.src : r.buf, soff, slen, roff, rlen));
    }
    return AK_OK;
}

/* ---- allgather ---------------------------------------------------------------------- */

/* Where block b lies: explicit counts/displs (allgatherv), or ak__block_range of count
 * (the second half of an allreduce) when counts is NULL. */
typedef struct ag_layout {
    const size_t *counts, *displs;
    size_t count, esize;
    int n;
} ag_layout;

static void ag_block(const ag_layout *l, int b, size_t *off_bytes, size_t *len_bytes) {
    size_t off, len;
    if (l->counts) {
        off = l->displs[b];
        len = l->counts[b];
    } else {
        ak__block_range(l->count, l->n, b, &off, &len);
    }
    *off_bytes = off * l->esize;
    *len_bytes = len * l->esize;
}

static ak_status ring_allgather(ak_comm *c, const ak__group *g, char *buf, const ag_layout *l,
                                uint64_t tag) {
    int right = g->ranks[ring_index(g, 1)], left = g->ranks[ring_index(g, -1)];
    for (int s = 0; s < g->n - 1; s++) {
        size_t soff, slen, roff, rlen;
        ag_block(l, ring_index(g, -s), &soff, &slen);
        ag_block(l, ring_index(g, -s - 1), &roff, &rlen);
        AK_CHECK(ak__p2p_sendrecv(c, right, buf + soff, slen, left, buf + roff, rlen, tag));
    }
    return AK_OK;
}

ak_status ak__allgatherv_ring(ak_comm *c, const ak__group *g, void *buf, const size_t *counts,
                              const size_t *displs, size_t elem_size, uint64_t tag) {
    ag_layout l = {counts, displs, 0, elem_size, g->n};
    return ring_allgather(c, g, buf, &l, tag);
}

ak_status ak__allreduce_ring(ak_comm *c, const ak__group *g, const void *src, void *buf,
                             size_t count, ak_dtype dt, ak_reduce_op op, uint64_t tag) {
    if (g->n == 1 || count == 0) return copy_alone(src, buf, count, dt);
    AK_CHECK(ak__reduce_scatter_ring(c, g, src, buf, count, dt, op, tag));
    ag_layout l = {NULL, NULL, count, 0, g->n};
    AK_CHECK(ak_dtype_size(dt, &l.esize));
    return ring_allgather(c, g, buf, &l, tag);
}
