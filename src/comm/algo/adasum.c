/* Adasum allreduce: vector-halving distance-doubling with per-tensor dot products.
 *
 * Pairwise rule, per tensor (segment): adasum(a, b) = (1 − a·b / (2‖a‖²))·a +
 * (1 − a·b / (2‖b‖²))·b, dot products and norms accumulated in f64 (f32 data too), the
 * combination computed in f64 and rounded once to the dtype. Zero guard: a tensor whose
 * squared norm is 0 (it is all zeros) gets coefficient 1, so adasum(0, b) = b and
 * adasum(0, 0) = 0; any other norm, however small, uses the formula (its term is bounded
 * by ‖b‖/2, so it cannot blow up).
 *
 * Steps (group of n, p the largest power of two ≤ n, r = n − p):
 * 1. fold: index 2j (j < r) sends its whole vector to 2j+1, which combines the two
 *    locally; the p remaining ranks are virtual indices v (2j+1 → j, others i → i − r).
 * 2. for d = 1, 2, …, p/2: partner v^d; each keeps one half of its current range (the
 *    lower index the first half) and swaps the other half with the partner, so both now
 *    hold the two block results L (virtual block v & ~(2d−1), lower d indices) and U
 *    (upper d) on the kept half. Per tensor, the partial L·U, ‖L‖², ‖U‖² of the kept half
 *    are summed over the 2d ranks of the block by recursive doubling (3 f64 per tensor,
 *    log2(2d) exchanges), then the kept half becomes adasum(L, U).
 * 3. allgather in reverse (d = p/2 … 1): swap kept ranges with v^d.
 * 4. unfold: 2j+1 sends the result to 2j.
 * Every element of the result is computed by exactly one rank, then copied, so all ranks
 * hold the same bits; the scalar sums are bit-identical too (each exchange adds two
 * values, and x + y == y + x). The result is the pairwise tree documented in
 * docs/training.md: fold pairs (x_2j, x_2j+1), then a balanced binary tree over the
 * virtual indices in order. Bytes a rank sends: S/2 + S/4 + … ≈ S out and the same back
 * in the allgather (2·S·(p−1)/p in all, like a ring allreduce), plus 24 bytes per tensor
 * per scalar exchange, plus S for a fold pair. */
#include <string.h>

#include "comm/algo/adasum.h"
#include "core/check.h"
#include "core/hash.h"

#define AD_MAX_LEVELS 32 /* p ≤ 2^31 */

typedef struct ad_ctx {
    const ak__algo_ctx *c;
    const ak__group *g;
    char *buf;     /* the vector, reduced in place */
    char *tmp;     /* the partner's copy of the kept range */
    double *dots;  /* [3 · nseg]: per tensor L·U, ‖L‖², ‖U‖² */
    double *rdots; /* the partner's, during the scalar exchange */
    size_t count, es, nseg;
    const size_t *segs;
    ak_dtype dt;
    int r; /* folded pairs */
    uint64_t tag;
} ad_ctx;

/* Group index of virtual index v (the first r virtual indices are the odd fold ranks). */
static int ad_real(int v, int r) { return v < r ? 2 * v + 1 : v + r; }

static void ad_coeffs(double dot, double nl, double nu, double *cl, double *cu) {
    *cl = nl > 0 ? 1.0 - dot / (2.0 * nl) : 1.0;
    *cu = nu > 0 ? 1.0 - dot / (2.0 * nu) : 1.0;
}

/* d = {a·b, ‖a‖², ‖b‖²} over n elements. */
static void ad_dots(ak_dtype dt, const void *a, const void *b, size_t n, double d[3]) {
    double ab = 0, aa = 0, bb = 0;
    if (dt == AK_DTYPE_F32) {
        const float *x = a, *y = b;
        for (size_t i = 0; i < n; i++) {
            double u = x[i], v = y[i];
            ab += u * v, aa += u * u, bb += v * v;
        }
    } else {
        const double *x = a, *y = b;
        for (size_t i = 0; i < n; i++) ab += x[i] * y[i], aa += x[i] * x[i], bb += y[i] * y[i];
    }
    d[0] = ab, d[1] = aa, d[2] = bb;
}

/* a = ca·a + cb·b, in f64, rounded once. */
static void ad_axpby(ak_dtype dt, void *a, const void *b, size_t n, double ca, double cb) {
    if (dt == AK_DTYPE_F32) {
        float *x = a;
        const float *y = b;
        for (size_t i = 0; i < n; i++) x[i] = (float)(ca * x[i] + cb * y[i]);
    } else {
        double *x = a;
        const double *y = b;
        for (size_t i = 0; i < n; i++) x[i] = ca * x[i] + cb * y[i];
    }
}

/* Calls fn on each tensor's part of [lo, hi) (buf holds it at its place, tmp from lo). */
typedef void (*ad_seg_fn)(ad_ctx *x, size_t s, size_t at, size_t n, size_t lo, int lower);

static void ad_each_segment(ad_ctx *x, size_t lo, size_t hi, int lower, ad_seg_fn fn) {
    size_t so = 0;
    for (size_t s = 0; s < x->nseg && so < hi; so += x->segs[s++]) {
        size_t a = so > lo ? so : lo, b = so + x->segs[s] < hi ? so + x->segs[s] : hi;
        if (a < b) fn(x, s, a, b - a, lo, lower);
    }
}

/* Partial dots of one tensor part; `lower`: this rank's data is L (else U). */
static void ad_seg_dots(ad_ctx *x, size_t s, size_t at, size_t n, size_t lo, int lower) {
    double d[3];
    ad_dots(x->dt, x->buf + at * x->es, x->tmp + (at - lo) * x->es, n, d);
    x->dots[3 * s] = d[0];
    x->dots[3 * s + 1] = lower ? d[1] : d[2];
    x->dots[3 * s + 2] = lower ? d[2] : d[1];
}

static void ad_seg_combine(ad_ctx *x, size_t s, size_t at, size_t n, size_t lo, int lower) {
    double cl, cu;
    ad_coeffs(x->dots[3 * s], x->dots[3 * s + 1], x->dots[3 * s + 2], &cl, &cu);
    ad_axpby(x->dt, x->buf + at * x->es, x->tmp + (at - lo) * x->es, n, lower ? cl : cu,
             lower ? cu : cl);
}

static void ad_partial_dots(ad_ctx *x, size_t lo, size_t hi, int lower) {
    memset(x->dots, 0, 3 * x->nseg * sizeof(double));
    ad_each_segment(x, lo, hi, lower, ad_seg_dots);
}

/* Sums the dots over the 2d virtual indices of v's block (recursive doubling). */
static ak_status ad_sum_dots(ad_ctx *x, int v, int d) {
    size_t bytes = 3 * x->nseg * sizeof(double);
    for (int dd = 1; dd <= d; dd <<= 1) {
        int peer = x->g->ranks[ad_real(v ^ dd, x->r)];
        AK_CHECK(ak__p2p_sendrecv(x->c, peer, x->dots, bytes, peer, x->rdots, bytes, x->tag));
        for (size_t i = 0; i < 3 * x->nseg; i++) x->dots[i] += x->rdots[i];
    }
    return AK_OK;
}

/* Step 1 on the odd rank of a fold pair: the partner's whole vector, combined locally. */
static ak_status ad_fold_in(ad_ctx *x, int partner) {
    AK_CHECK(ak__p2p_sendrecv(x->c, partner, NULL, 0, partner, x->tmp, x->count * x->es, x->tag));
    ad_partial_dots(x, 0, x->count, 0);
    ad_each_segment(x, 0, x->count, 0, ad_seg_combine);
    return AK_OK;
}

/* Steps 2 and 3 for virtual index v of p. */
static ak_status ad_halving_doubling(ad_ctx *x, int v, int p) {
    size_t lo[AD_MAX_LEVELS], hi[AD_MAX_LEVELS]; /* the range before each level */
    size_t l = 0, h = x->count, es = x->es;
    int levels = 0;
    for (int d = 1; d < p; d <<= 1, levels++) {
        int lower = !(v & d), peer = x->g->ranks[ad_real(v ^ d, x->r)];
        size_t mid = l + (h - l) / 2;
        size_t kl = lower ? l : mid, kh = lower ? mid : h, sl = lower ? mid : l, sh = lower ? h : mid;
        lo[levels] = l, hi[levels] = h;
        AK_CHECK(ak__p2p_sendrecv(x->c, peer, x->buf + sl * es, (sh - sl) * es, peer, x->tmp,
                                  (kh - kl) * es, x->tag));
        ad_partial_dots(x, kl, kh, lower);
        AK_CHECK(ad_sum_dots(x, v, d));
        ad_each_segment(x, kl, kh, lower, ad_seg_combine);
        l = kl, h = kh;
    }
    for (int k = levels - 1; k >= 0; k--) { /* the other part of the parent range comes back */
        int d = 1 << k, lower = !(v & d), peer = x->g->ranks[ad_real(v ^ d, x->r)];
        size_t ol = lower ? h : lo[k], oh = lower ? hi[k] : l;
        AK_CHECK(ak__p2p_sendrecv(x->c, peer, x->buf + l * es, (h - l) * es, peer,
                                  x->buf + ol * es, (oh - ol) * es, x->tag));
        l = lo[k], h = hi[k];
    }
    return AK_OK;
}

ak_status ak__allreduce_adasum(const ak__algo_ctx *c, const ak__group *g, void *buf, size_t count,
                               ak_dtype dt, const size_t *segs, size_t nsegs, uint64_t tag) {
    if (g->n == 1 || count == 0) return AK_OK;
    size_t one = count;
    if (!nsegs) segs = &one, nsegs = 1;
    /* the tensor sizes folded into the tag: ranks that split the same count into different
     * tensors fail on the wire (AK_ERR_MISMATCH) instead of mixing them */
    tag ^= ak__fnv1a64(AK_FNV1A64_BASIS, segs, nsegs * sizeof *segs) & 0xffffffffu;
    ad_ctx x = {c, g, buf, NULL, NULL, NULL, count, 0, nsegs, segs, dt, 0, tag};
    AK_CHECK(ak_dtype_size(dt, &x.es));
    int p = 1;
    while (p * 2 <= g->n) p *= 2;
    int me = g->me;
    x.r = g->n - p;
    if (me < 2 * x.r && me % 2 == 0) { /* folded: hand the data over, get the result back */
        int partner = g->ranks[me + 1];
        AK_CHECK(ak__p2p_sendrecv(c, partner, buf, count * x.es, partner, NULL, 0, tag));
        return ak__p2p_sendrecv(c, partner, NULL, 0, partner, buf, count * x.es, tag);
    }
    /* the fold receives a whole vector, the first halving level at most half of one */
    size_t tmp_bytes = (me < 2 * x.r ? count : (count + 1) / 2) * x.es;
    tmp_bytes = (tmp_bytes + 63) & ~(size_t)63;
    void *scratch;
    AK_CHECK(ak__algo_scratch(c, tmp_bytes + 6 * x.nseg * sizeof(double), &scratch));
    x.tmp = scratch;
    x.dots = (double *)(x.tmp + tmp_bytes);
    x.rdots = x.dots + 3 * x.nseg;
    if (me < 2 * x.r) AK_CHECK(ad_fold_in(&x, g->ranks[me - 1]));
    AK_CHECK(ad_halving_doubling(&x, me < 2 * x.r ? me / 2 : me - x.r, p));
    if (me < 2 * x.r) return ak__p2p_sendrecv(c, g->ranks[me - 1], buf, count * x.es, 0, NULL, 0, tag);
    return AK_OK;
}
