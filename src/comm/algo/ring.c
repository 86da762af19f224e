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
 * Reduce-scatter steps are pipelined: a block is cut into segments (rs_seg),
 * up to RING_WINDOW receives land in comm scratch while earlier segments are reduced
 * into the buffer, and sends keep up to RING_WINDOW segments in flight, so the wire and
 * the reduction kernel overlap. Empty blocks (count < n) send nothing.
 *
 * In the allreduce the last reduce-scatter step also carries the first allgather step:
 * each segment of the rank's own block goes on to the right as soon as it is reduced,
 * while it is still in cache, instead of being read back from memory after the whole
 * reduce-scatter (see rs_forward). */
#include <string.h>

#include "comm/algo/algo.h"
#include "core/check.h"

#define RING_SEG_SMALL ((size_t)64 << 10)  /* segments of messages under RING_SEG_SWITCH */
#define RING_SEG_LARGE ((size_t)256 << 10) /* and from there on */
#define RING_SEG_SWITCH ((size_t)1 << 20)
#define RING_WINDOW 4

void ak__block_range(size_t count, int n, int b, size_t *offset, size_t *len) {
    size_t base = count / (size_t)n, extra = count % (size_t)n, ub = (size_t)b;
    /* the first `extra` blocks carry one element more */
    *offset = ub * base + (ub < extra ? ub : extra);
    *len = base + (ub < extra ? 1 : 0);
}

void ak__block_span(size_t count, int n, int first, int last, size_t *offset, size_t *len) {
    if (last > n) last = n;
    size_t end, end_len;
    ak__block_range(count, n, first, offset, len);
    ak__block_range(count, n, last - 1, &end, &end_len);
    *len = end + end_len - *offset;
}

/* group index me+delta, wrapped */
static int ring_index(const ak__group *g, int delta) {
    return ((g->me + delta) % g->n + g->n) % g->n;
}

/* ---- pipelined exchange-and-reduce step ----------------------------------------------- */

/* One step's state: segments of the outgoing range go to `to`, segments of the incoming
 * range arrive from `from` into RING_WINDOW scratch slots and are reduced into buf. Each
 * direction's segment size follows from its message's length alone, so sender and
 * receiver of a message cut it the same way whatever else their steps carry. */
/* The allgather's first step riding on the reduce-scatter's last: reduced segment k of
 * the rank's own block is sent to `to` right after its reduction, and segment k of the
 * block `from` reduced is received straight into buf. Both links keep the order the
 * transports match messages in (FIFO per peer): in iteration k a rank posts reduce-
 * scatter segment k+RING_WINDOW before forward segment k, on both the sending and the
 * receiving side. */
typedef struct rs_forward {
    size_t roff, rlen;  /* elements of the block arriving already reduced */
    size_t rseg;        /* its segment size, cut as its sender cuts its own block */
    ak__p2p sends[RING_WINDOW], recvs[RING_WINDOW];
} rs_forward;

typedef struct rs_pipe {
    const ak__algo_ctx *c;
    int to, from;        /* communicator ranks */
    uint64_t tag;
    const char *operand; /* the other operand of every reduction (input or buf) */
    char *buf;
    char *scratch;       /* RING_WINDOW slots of rseg elements */
    size_t esize, sseg, rseg;
    ak_dtype dt;
    ak_reduce_op op;
    rs_forward *fwd;     /* NULL unless the step also carries the allgather's first */
} rs_pipe;

/* Segment size for a message of `len` elements. Under 1 MiB, 64 KiB: a message that size
 * crosses TCP whole on one stream in one syscall (larger ones are striped over the
 * streams in smaller chunks), and the message still splits into several to pipeline.
 * From 1 MiB on, 256 KiB: every segment costs a message's fixed overhead, while the
 * window of RING_WINDOW received segments must stay in a 1 MiB L2 for the reduction that
 * reads them, and each reduced segment in cache until it is forwarded. Loopback TCP, 2
 * ranks, against the former quarter of the message within 256-512 KiB: 512 KB 127 µs
 * against 192, 1 MB 218 against 322, 64 MB 18.4 ms against 24.3; 4 MB 1.04 against 0.97
 * ms, the one size that lost. Never more than the message, so small calls need little
 * scratch; at least 1 (an empty message posts nothing). */
static size_t rs_seg(size_t len, size_t esize) {
    size_t bytes = len * esize;
    size_t seg = (bytes < RING_SEG_SWITCH ? RING_SEG_SMALL : RING_SEG_LARGE) / esize;
    seg = seg < len ? seg : len;
    return seg ? seg : 1;
}

/* Segment k (of size seg) of the range starting at element `off` of length `len`. */
static void rs_segment(size_t seg, size_t off, size_t len, size_t k, size_t *soff, size_t *slen) {
    size_t start = k * seg;
    *soff = off + start;
    *slen = len - start < seg ? len - start : seg;
}

static size_t rs_segments(size_t seg, size_t len) { return (len + seg - 1) / seg; }

static char *rs_slot(const rs_pipe *r, size_t k) {
    return r->scratch + (k % RING_WINDOW) * r->rseg * r->esize;
}

static ak_status rs_post_send(rs_pipe *r, ak__p2p *op, const char *from, size_t off, size_t len,
                              size_t k) {
    size_t soff, slen;
    rs_segment(r->sseg, off, len, k, &soff, &slen);
    ak__p2p_init_send(op, r->to, from + soff * r->esize, slen * r->esize, r->tag);
    return ak__p2p_post(r->c, op);
}

static ak_status rs_post_recv(rs_pipe *r, ak__p2p *op, size_t off, size_t len, size_t k) {
    size_t soff, slen;
    rs_segment(r->rseg, off, len, k, &soff, &slen);
    ak__p2p_init_recv(op, r->from, rs_slot(r, k), slen * r->esize, r->tag);
    return ak__p2p_post(r->c, op);
}

/* Waits for segment k of the incoming range and folds it into buf (operand op received). */
static ak_status rs_reduce_segment(rs_pipe *r, ak__p2p *op, size_t off, size_t len, size_t k) {
    AK_CHECK(ak__p2p_wait(r->c, &op, 1));
    size_t soff, slen;
    rs_segment(r->rseg, off, len, k, &soff, &slen);
    return ak_reduce(r->op, r->dt, r->buf + soff * r->esize, r->operand + soff * r->esize,
                     rs_slot(r, k), slen);
}

/* Forward segment k of the window's ring of ops: waits for segment k-RING_WINDOW in the
 * same slot, then posts segment k (an element range of buf, cut by `seg`) on `op`. */
static ak_status fwd_post(rs_pipe *r, ak__p2p *op, int is_send, size_t seg, size_t off,
                          size_t len, size_t k) {
    if (k >= RING_WINDOW) AK_CHECK(ak__p2p_wait(r->c, &op, 1));
    size_t soff, slen;
    rs_segment(seg, off, len, k, &soff, &slen);
    if (is_send)
        ak__p2p_init_send(op, r->to, r->buf + soff * r->esize, slen * r->esize, r->tag);
    else
        ak__p2p_init_recv(op, r->from, r->buf + soff * r->esize, slen * r->esize, r->tag);
    return ak__p2p_post(r->c, op);
}

/* Iteration k's forward work: segment k of the own block [roff, roff+rlen), reduced
 * just now, goes out; segment k of the already reduced block comes in. */
static ak_status fwd_step(rs_pipe *r, size_t roff, size_t rlen, size_t k) {
    rs_forward *f = r->fwd;
    size_t slot = k % RING_WINDOW;
    if (k < rs_segments(r->rseg, rlen))
        AK_CHECK(fwd_post(r, &f->sends[slot], 1, r->rseg, roff, rlen, k));
    if (k < rs_segments(f->rseg, f->rlen))
        AK_CHECK(fwd_post(r, &f->recvs[slot], 0, f->rseg, f->roff, f->rlen, k));
    return AK_OK;
}

/* Waits for the forward ops still in flight after the last iteration. */
static ak_status fwd_drain(rs_pipe *r, size_t rlen) {
    rs_forward *f = r->fwd;
    size_t counts[2] = {rs_segments(r->rseg, rlen), rs_segments(f->rseg, f->rlen)};
    ak__p2p *rings[2] = {f->sends, f->recvs};
    for (int d = 0; d < 2; d++)
        for (size_t k = counts[d] > RING_WINDOW ? counts[d] - RING_WINDOW : 0; k < counts[d]; k++) {
            ak__p2p *op = &rings[d][k % RING_WINDOW];
            AK_CHECK(ak__p2p_wait(r->c, &op, 1));
        }
    return AK_OK;
}

/* Sends [soff, soff+slen) of `from`, receives [roff, roff+rlen) and reduces it, both
 * streamed in windows of segments (plus the forward work when r->fwd is set). */
static ak_status rs_step(rs_pipe *r, const char *from, size_t soff, size_t slen, size_t roff,
                         size_t rlen) {
    ak__p2p sends[RING_WINDOW], recvs[RING_WINDOW];
    size_t ns = rs_segments(r->sseg, slen), nr = rs_segments(r->rseg, rlen);
    for (size_t k = 0; k < RING_WINDOW; k++) {
        if (k < nr) AK_CHECK(rs_post_recv(r, &recvs[k], roff, rlen, k));
        if (k < ns) AK_CHECK(rs_post_send(r, &sends[k], from, soff, slen, k));
    }
    size_t total = ns > nr ? ns : nr;
    if (r->fwd) {
        size_t nf = rs_segments(r->fwd->rseg, r->fwd->rlen);
        total = total > nf ? total : nf;
    }
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
        if (r->fwd) AK_CHECK(fwd_step(r, roff, rlen, k));
    }
    return r->fwd ? fwd_drain(r, rlen) : AK_OK;
}

/* One reduce-scatter step, carrying the allgather's first step when fwd is set. */
static ak_status reduce_step_run(const ak__algo_ctx *c, const ak__reduce_step *s, ak_dtype dt,
                                 ak_reduce_op op, uint64_t tag, rs_forward *fwd) {
    size_t esize;
    AK_CHECK(ak_dtype_size(dt, &esize));
    rs_pipe r = {c, s->to, s->from, tag, s->operand, s->buf, NULL, esize,
                 rs_seg(s->slen, esize), rs_seg(s->rlen, esize), dt, op, fwd};
    if (fwd) fwd->rseg = rs_seg(fwd->rlen, esize);
    void *scratch;
    AK_CHECK(ak__algo_scratch(c, RING_WINDOW * r.rseg * esize, &scratch));
    r.scratch = scratch;
    return rs_step(&r, s->send, s->soff, s->slen, s->roff, s->rlen);
}

ak_status ak__reduce_step_run(const ak__algo_ctx *c, const ak__reduce_step *s, ak_dtype dt,
                              ak_reduce_op op, uint64_t tag) {
    return reduce_step_run(c, s, dt, op, tag, NULL);
}

/* A group of one has nothing to exchange: its result is its input. */
ak_status ak__copy_alone(const void *src, void *buf, size_t count, ak_dtype dt) {
    size_t esize;
    AK_CHECK(ak_dtype_size(dt, &esize));
    if (src != buf && count) memcpy(buf, src, count * esize);
    return AK_OK;
}

/* The reduce-scatter ring; with fwd set its last step also carries the allgather's
 * first (the allreduce), receiving block fwd->roff/rlen already reduced. */
static ak_status reduce_scatter_ring(const ak__algo_ctx *c, const ak__group *g, const void *src,
                                     void *buf, size_t count, ak_dtype dt, ak_reduce_op op,
                                     uint64_t tag, rs_forward *fwd) {
    /* the reductions always read the input as their operand: a rank receives each block
     * at most once, so its own share still lies in src (out of place needs no copy) */
    ak__reduce_step s = {g->ranks[ring_index(g, 1)], g->ranks[ring_index(g, -1)], src, 0, 0,
                         src, buf, 0, 0};
    for (int k = 0; k < g->n - 1; k++) {
        ak__block_range(count, g->n, ring_index(g, -k - 1), &s.soff, &s.slen);
        ak__block_range(count, g->n, ring_index(g, -k - 2), &s.roff, &s.rlen);
        /* the first block sent is still the input; every later one was reduced into buf
         * on the step before */
        s.send = k == 0 ? src : buf;
        AK_CHECK(reduce_step_run(c, &s, dt, op, tag, k == g->n - 2 ? fwd : NULL));
    }
    return AK_OK;
}

ak_status ak__reduce_scatter_ring(const ak__algo_ctx *c, const ak__group *g, const void *src, void *buf,
                                  size_t count, ak_dtype dt, ak_reduce_op op, uint64_t tag) {
    if (g->n == 1 || count == 0) return ak__copy_alone(src, buf, count, dt);
    return reduce_scatter_ring(c, g, src, buf, count, dt, op, tag, NULL);
}

/* ---- allgather ---------------------------------------------------------------------- */

/* Where the block of group index b lies: explicit counts/displs (allgatherv), or when
 * counts is NULL ak__block_range(count, n, b - rot): block b of an allreduce (rot 0), or
 * of a broadcast whose blocks are numbered from its root (rot = root). */
typedef struct ag_layout {
    const size_t *counts, *displs;
    size_t count, esize;
    int n, rot;
} ag_layout;

static void ag_block(const ag_layout *l, int b, size_t *off_bytes, size_t *len_bytes) {
    size_t off, len;
    if (l->counts) {
        off = l->displs[b];
        len = l->counts[b];
    } else {
        ak__block_range(l->count, l->n, (b - l->rot + l->n) % l->n, &off, &len);
    }
    *off_bytes = off * l->esize;
    *len_bytes = len * l->esize;
}

/* Allgather steps first..n-2 (the allreduce ran step 0 inside its reduce-scatter). */
static ak_status ring_allgather(const ak__algo_ctx *c, const ak__group *g, char *buf, const ag_layout *l,
                                int first, uint64_t tag) {
    int right = g->ranks[ring_index(g, 1)], left = g->ranks[ring_index(g, -1)];
    for (int s = first; s < g->n - 1; s++) {
        size_t soff, slen, roff, rlen;
        ag_block(l, ring_index(g, -s), &soff, &slen);
        ag_block(l, ring_index(g, -s - 1), &roff, &rlen);
        AK_CHECK(ak__p2p_sendrecv(c, right, buf + soff, slen, left, buf + roff, rlen, tag));
    }
    return AK_OK;
}

ak_status ak__allgatherv_ring(const ak__algo_ctx *c, const ak__group *g, void *buf, const size_t *counts,
                              const size_t *displs, size_t elem_size, uint64_t tag) {
    ag_layout l = {counts, displs, 0, elem_size, g->n, 0};
    return ring_allgather(c, g, buf, &l, 0, tag);
}

ak_status ak__allgather_blocks_ring(const ak__algo_ctx *c, const ak__group *g, void *buf, size_t count,
                                    size_t elem_size, int rot, uint64_t tag) {
    ag_layout l = {NULL, NULL, count, elem_size, g->n, rot};
    return ring_allgather(c, g, buf, &l, 0, tag);
}

ak_status ak__allreduce_ring(const ak__algo_ctx *c, const ak__group *g, const void *src, void *buf,
                             size_t count, ak_dtype dt, ak_reduce_op op, uint64_t tag) {
    if (g->n == 1 || count == 0) return ak__copy_alone(src, buf, count, dt);
    rs_forward fwd;
    memset(&fwd, 0, sizeof fwd);
    ak__block_range(count, g->n, ring_index(g, -1), &fwd.roff, &fwd.rlen);
    AK_CHECK(reduce_scatter_ring(c, g, src, buf, count, dt, op, tag, &fwd));
    size_t esize;
    AK_CHECK(ak_dtype_size(dt, &esize));
    ag_layout l = {NULL, NULL, count, esize, g->n, 0};
    return ring_allgather(c, g, buf, &l, 1, tag);
}
