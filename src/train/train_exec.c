/* Training runtime, execution of negotiated responses (background thread): tensor fusion
 * of allreduces into one buffer, fp16/bf16 and DGC compression, the other collectives,
 * process-set changes, and the update thread that runs fused-optimizer steps as soon as a
 * gradient's allreduce lands (overlapping later buckets' communication).
 * Every decision here (what to fuse, buffer layout) depends only on the responses, which
 * are identical on every rank; a rank without an entry (joined) contributes zeros. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "train/train_internal.h"

/* ---- helpers ------------------------------------------------------------------------ */

static size_t esize_of(ak_dtype d) {
    size_t s = 0;
    ak_dtype_size(d, &s);
    return s;
}

static ak_status ensure(void **buf, size_t *cap, size_t need) {
    if (need <= *cap) return AK_OK;
    void *b = NULL;
    size_t n = need + need / 4;
    if (ak_alloc(n, &b) != AK_OK) return AK_FAIL(AK_ERR_NO_MEMORY, "train: cannot allocate %zu bytes", n);
    ak_free(*buf);
    *buf = b;
    *cap = n;
    return AK_OK;
}

void ak__scratch_free(ak__scratch *sc) {
    ak_free(sc->fusion);
    ak_free(sc->wire);
    ak_free(sc->zmask);
    ak_free(sc->segs);
    *sc = (ak__scratch){0};
}

void ak__exec_free_scratch(ak_train *t) { ak__scratch_free(&t->scratch); }

/* The background thread's channel for p: p's communicator and its scratch. */
static ak__chan bg_chan(ak_train *t, ak__pset *p) { return (ak__chan){p->comm, p->size, &t->scratch}; }

/* An integer scaled as Horovod scales one: the product in double, converted back toward
 * zero. Out-of-range products saturate (C leaves that conversion undefined). */
static double scaled_int(double v, double s, double lo, double hi) {
    double x = trunc(v * s);
    if (!(x >= lo)) return isnan(x) ? 0 : lo;
    return x > hi ? hi : x;
}

#define SCALE_INT_LOOP(T, LO, HI)                                                         \
    do {                                                                                  \
        T *v = x;                                                                         \
        for (size_t i = 0; i < n; i++) v[i] = (T)scaled_int((double)v[i], s, LO, HI);     \
    } while (0)

/* x[i] *= s (no-op when s == 1): floats in their precision, integers through double as
 * above (so prescale/postscale and Average work on integer tensors as in Horovod). */
static void scale_buf(ak_dtype d, void *x, size_t n, double s) {
    if (s == 1.0 || n == 0) return;
    if (d == AK_DTYPE_I8) SCALE_INT_LOOP(int8_t, -128.0, 127.0);
    else if (d == AK_DTYPE_U8) SCALE_INT_LOOP(uint8_t, 0.0, 255.0);
    else if (d == AK_DTYPE_I32) SCALE_INT_LOOP(int32_t, -2147483648.0, 2147483647.0);
    else if (d == AK_DTYPE_I64) /* 2^63 - 1 is not a double: the largest one below 2^63 */
        SCALE_INT_LOOP(int64_t, -9223372036854775808.0, 9223372036854774784.0);
    else if (d == AK_DTYPE_F64) {
        double *v = x;
        for (size_t i = 0; i < n; i++) v[i] *= s;
    } else {
        ak_vec_scale(d, x, x, (float)s, n);
    }
}

static void trace_span(const char *cat, const ak__response *r, int m, uint64_t t0) {
    if (!ak_trace_enabled()) return;
    uint64_t dur = ak_now_ns() - t0;
    for (int i = 0; i < m; i++) ak_trace_complete(cat, r[i].name, t0, dur);
}

static void set_output_shape(ak__entry *e, const ak__signature *s) {
    e->out_ndim = s->ndim;
    memcpy(e->out_shape, s->shape, sizeof e->out_shape);
}

/* Completes an entry, or hands it to the update thread when it carries an optimizer step. */
static void finish_entry(ak_train *t, ak__entry *e) {
    if (!e) return;
    if (!e->op.update) {
        ak__train_complete(t, e, AK_OK, NULL);
        return;
    }
    ak__update_item *it = malloc(sizeof *it);
    if (!it) {
        ak__train_complete(t, e, AK_ERR_NO_MEMORY, "train: out of memory queuing an update");
        return;
    }
    it->entry = e;
    it->next = NULL;
    pthread_mutex_lock(&t->lock);
    if (t->uq_tail) t->uq_tail->next = it;
    else t->uq_head = it;
    t->uq_tail = it;
    pthread_cond_signal(&t->uq_changed);
    pthread_mutex_unlock(&t->lock);
}

void *ak__train_update_main(void *arg) {
    ak_train *t = arg;
    for (;;) {
        pthread_mutex_lock(&t->lock);
        while (!t->uq_head && !t->uq_stop) pthread_cond_wait(&t->uq_changed, &t->lock);
        ak__update_item *it = t->uq_head;
        if (it && !(t->uq_head = it->next)) t->uq_tail = NULL;
        pthread_mutex_unlock(&t->lock);
        if (!it) return NULL;
        ak__entry *e = it->entry;
        free(it);
        uint64_t t0 = ak_now_ns();
        ak_status st = ak_optim_step(e->op.update, e->op.step, e->op.param, e->op.output,
                                     e->op.state1, e->op.state2, e->count);
        uint64_t dur = ak_now_ns() - t0;
        t->st_update_ns += dur;
        if (ak_trace_enabled()) ak_trace_complete("update", e->name, t0, dur);
        ak__train_complete(t, e, st, st == AK_OK ? NULL : ak_last_error());
    }
}

/* Factor applied after a SUM: postscale, divided by the set size for AVG (Horovod's
 * "averaging happens via the postscale factor", integers included). */
static double post_factor(const ak__signature *s, int size) {
    return s->postscale * (s->op == AK_REDUCE_AVG ? 1.0 / size : 1.0);
}

static ak_reduce_op wire_op(ak_reduce_op op) { return op == AK_REDUCE_AVG ? AK_REDUCE_SUM : op; }

static void finish_reduction(const ak__signature *s, void *buf, size_t n, int size) {
    scale_buf(s->dtype, buf, n, post_factor(s, size));
}

/* ---- zero-block elision --------------------------------------------------------------
 * A float32 sum (or average) of buffers that are zero in the same places is zero there:
 * those blocks need not travel. Each rank marks its non-zero 1 KB blocks (any bit set, so
 * -0.0 and NaN count as non-zero), the marks are max-reduced (a byte per block, 1/1024 of
 * the data), and when at most 3/4 of the data is marked on some rank only those blocks
 * are packed, allreduced and put back; the rest stay the zeros they are on every rank. The
 * result is the dense allreduce's (sums of the same values; only the summation order of
 * more than two ranks can differ, as it does between fusion on and off). The embedding
 * gradients of a CTR model (a few hundred rows of 700 000 touched per step) shrink to
 * their rows. Every decision follows from the reduced marks, the same on every rank. */

#define ZERO_BLOCK_FLOATS 256
/* Buffers below this are sent whole: the mark exchange costs a round trip. */
#define ZERO_BLOCK_MIN_FLOATS ((size_t)1 << 18)

/* 1 when any of x[0..n) has a bit set. */
static int any_bits(const float *x, size_t n) {
    const uint32_t *bits = (const uint32_t *)(const void *)x;
    uint32_t any = 0;
    for (size_t i = 0; i < n; i++) any |= bits[i];
    return any != 0;
}

/* Elements from offset `at` of a concatenation, `left` of them in its current tensor, up
 * to the end of at's block (all of them without marks). */
static size_t piece_len(const uint8_t *mark, size_t at, size_t left) {
    size_t to_block_end = ZERO_BLOCK_FLOATS - at % ZERO_BLOCK_FLOATS;
    return mark && to_block_end < left ? to_block_end : left;
}

/* Marks the blocks with a bit set among x[0..n), which sits at offset `at` of the
 * concatenation the marks cover (marks already set stay set). */
static void mark_blocks(const float *x, size_t n, size_t at, uint8_t *mark) {
    for (size_t off = 0, len; off < n; off += len) {
        len = piece_len(mark, at + off, n - off);
        if (any_bits(x + off, len)) mark[(at + off) / ZERO_BLOCK_FLOATS] = 1;
    }
}

/* Marks the blocks of the fused tensors' concatenation (their inputs; a missing entry is
 * zeros) that have a bit set. */
static void mark_fused_blocks(const ak__response *r, int m, uint8_t *mark, size_t blocks) {
    memset(mark, 0, blocks);
    size_t at = 0;
    for (int i = 0; i < m; i++) {
        size_t n = ak__sig_elements(&r[i].sig);
        if (r[i].entry) mark_blocks(r[i].entry->op.input, n, at, mark);
        at += n;
    }
}

/* Max-reduces this rank's marks of `blocks` blocks over n values; returns the values in
 * blocks marked on some rank, or 0 when those are too many to pay (send everything). */
static ak_status exchange_marks(ak_comm *comm, uint8_t *mark, size_t blocks, size_t n,
                                size_t *marked) {
    *marked = 0;
    AK_CHECK(ak_comm_allreduce(comm, AK_IN_PLACE, mark, blocks, AK_DTYPE_U8, AK_REDUCE_MAX));
    size_t floats = 0;
    for (size_t b = 0; b < blocks; b++)
        if (mark[b]) floats += b + 1 < blocks ? ZERO_BLOCK_FLOATS : n - b * ZERO_BLOCK_FLOATS;
    if (floats <= n / 4 * 3) *marked = floats; /* else the packing copies would cost more */
    return AK_OK;
}

/* Copies the marked blocks of x into packed (pack) or back (unpack). */
static void move_marked_blocks(float *x, size_t n, const uint8_t *mark, float *packed,
                               int pack) {
    for (size_t b = 0, at = 0; at < n; b++, at += ZERO_BLOCK_FLOATS) {
        if (!mark[b]) continue;
        size_t len = n - at < ZERO_BLOCK_FLOATS ? n - at : ZERO_BLOCK_FLOATS;
        if (pack) memcpy(packed, x + at, len * sizeof *x);
        else memcpy(x + at, packed, len * sizeof *x);
        packed += len;
    }
}

/* Allreduces (sum) the f32 buffer x of n floats in place, sending only the blocks that
 * are non-zero on some rank when that pays; *done = 0 leaves x for a dense allreduce. */
static ak_status allreduce_nonzero_blocks(ak_train *t, ak__chan *ch, float *x, size_t n,
                                          int *done) {
    *done = 0;
    ak__scratch *sc = ch->sc;
    size_t blocks = (n + ZERO_BLOCK_FLOATS - 1) / ZERO_BLOCK_FLOATS, floats;
    AK_CHECK(ensure(&sc->zmask, &sc->zmask_cap, blocks));
    uint8_t *mark = sc->zmask;
    memset(mark, 0, blocks);
    mark_blocks(x, n, 0, mark);
    AK_CHECK(exchange_marks(ch->comm, mark, blocks, n, &floats));
    if (!floats) return AK_OK;
    AK_CHECK(ensure(&sc->wire, &sc->wire_cap, floats * sizeof(float)));
    move_marked_blocks(x, n, mark, sc->wire, 1);
    AK_CHECK(ak_comm_allreduce(ch->comm, AK_IN_PLACE, sc->wire, floats, AK_DTYPE_F32, AK_REDUCE_SUM));
    move_marked_blocks(x, n, mark, sc->wire, 0);
    t->st_zero_elided += (uint64_t)(n - floats) * sizeof(float);
    *done = 1;
    return AK_OK;
}

/* The wire allreduce of an uncompressed buffer of n elements for signature s: zero
 * blocks elided where they may be, else every byte. Adasum gets the tensors' sizes
 * (segs[0..nseg), nseg 0: one tensor) to keep their dot products apart. */
static ak_status allreduce_buffer(ak_train *t, ak__chan *ch, const ak__signature *s, void *buf,
                                  size_t n, const size_t *segs, size_t nseg) {
    if (s->op == AK_TRAIN_REDUCE_ADASUM)
        return ak_comm_allreduce_adasum(ch->comm, AK_IN_PLACE, buf, n, s->dtype, segs, nseg);
    ak_reduce_op op = wire_op(s->op);
    if (t->zero_blocks && s->dtype == AK_DTYPE_F32 && op == AK_REDUCE_SUM &&
        n >= ZERO_BLOCK_MIN_FLOATS) {
        int done = 0;
        AK_CHECK(allreduce_nonzero_blocks(t, ch, buf, n, &done));
        if (done) return AK_OK;
    }
    return ak_comm_allreduce(ch->comm, AK_IN_PLACE, buf, n, s->dtype, op);
}

/* ---- allreduce: fusion, compression ------------------------------------------------- */

static int fusable(const ak__signature *a, const ak__signature *b) {
    return b->kind == AK_TRAIN_ALLREDUCE && a->dtype == b->dtype && a->op == b->op &&
           a->prescale == b->prescale && a->postscale == b->postscale &&
           a->compression == b->compression;
}

/* Copies the inputs (prescaled; zeros for a missing entry) into the fusion buffer. */
static void fusion_copy_in(ak__scratch *sc, ak__response *r, int m, size_t es) {
    char *dst = sc->fusion;
    for (int i = 0; i < m; i++) {
        size_t n = ak__sig_elements(&r[i].sig);
        if (r[i].entry) memcpy(dst, r[i].entry->op.input, n * es);
        else memset(dst, 0, n * es);
        scale_buf(r[i].sig.dtype, dst, n, r[i].sig.prescale);
        dst += n * es;
    }
}

static void fusion_copy_out(ak__scratch *sc, ak__response *r, int m, size_t es) {
    const char *src = sc->fusion;
    for (int i = 0; i < m; i++) {
        size_t n = ak__sig_elements(&r[i].sig);
        if (r[i].entry) memcpy(r[i].entry->op.output, src, n * es);
        src += n * es;
    }
}

/* ---- f16/bf16 on the wire, straight from the inputs into the outputs ----------------
 * No f32 fusion buffer: each tensor is cast (prescale and the shared power-of-two scale
 * in one factor) into its place in the wire buffer, and decompressed with the
 * post-factor folded in straight into its output. Both factors are a float times a power
 * of two, so the results are those of scaling in separate passes. This saves two of the
 * five passes over the f32 data (copy in, copy out): the CTR fp16 step on 4 ranks sharing
 * 2 cores went from about 1.70 to 1.57 s. Sending the wire buffer in async segments, to
 * overlap casting with the wire, measured slower there (the progress thread competes for
 * the same cores). */

/* Casts the inputs (zeros for a missing entry) into the wire buffer, 2 bytes a value;
 * with marks, only the pieces in marked blocks of their concatenation. */
static ak_status cast_in(ak__scratch *sc, ak__response *r, int m, float scale,
                         const uint8_t *mark) {
    char *dst = sc->wire;
    size_t at = 0, len;
    for (int i = 0; i < m; i++) {
        size_t n = ak__sig_elements(&r[i].sig);
        for (size_t off = 0; off < n; off += len) {
            len = piece_len(mark, at + off, n - off);
            if (mark && !mark[(at + off) / ZERO_BLOCK_FLOATS]) continue;
            if (r[i].entry)
                AK_CHECK(ak__compress_cast(r[i].sig.compression,
                                           (const float *)r[i].entry->op.input + off, dst,
                                           len, scale * (float)r[i].sig.prescale));
            else
                memset(dst, 0, len * 2);
            dst += len * 2;
        }
        at += n;
    }
    return AK_OK;
}

/* The reduced wire buffer into the outputs; with marks, the pieces in unmarked blocks
 * (zero on every rank) are zero: already so in place, else written. */
static ak_status decompress_out(ak__scratch *sc, ak__response *r, int m, float scale, int size,
                                const uint8_t *mark) {
    const char *src = sc->wire;
    size_t at = 0, len;
    for (int i = 0; i < m; i++) {
        size_t n = ak__sig_elements(&r[i].sig);
        ak__entry *e = r[i].entry;
        for (size_t off = 0; off < n; off += len) {
            len = piece_len(mark, at + off, n - off);
            if (mark && !mark[(at + off) / ZERO_BLOCK_FLOATS]) {
                if (e && e->op.output != e->op.input)
                    memset((float *)e->op.output + off, 0, len * sizeof(float));
                continue;
            }
            if (e)
                AK_CHECK(ak__decompress_cast(r[i].sig.compression, src, (float *)e->op.output + off, len,
                                             (float)post_factor(&r[i].sig, size) / scale));
            src += len * 2;
        }
        at += n;
    }
    return AK_OK;
}

/* Largest |input * prescale| over the fused tensors of this rank. */
static float fused_absmax(ak__response *r, int m) {
    float amax = 0.0f;
    for (int i = 0; i < m; i++) {
        if (!r[i].entry) continue;
        float a = ak__compress_absmax(r[i].entry->op.input, ak__sig_elements(&r[i].sig)) *
                  fabsf((float)r[i].sig.prescale);
        if (!(a <= amax)) amax = a; /* a NaN wins */
    }
    return amax;
}

static ak_status allreduce_cast(ak_train *t, ak__chan *ch, ak__response *r, int m, size_t total) {
    ak_train_compression kind = r[0].sig.compression;
    ak__scratch *sc = ch->sc;
    float global = fused_absmax(r, m);
    AK_CHECK(ak_comm_allreduce(ch->comm, AK_IN_PLACE, &global, 1, AK_DTYPE_F32, AK_REDUCE_MAX));
    AK_CHECK(ensure(&sc->wire, &sc->wire_cap, total * 2));
    float scale = ak__compress_scale(kind, global, ch->size);
    /* zero blocks elided as for float32 (the casts of zeros are zeros) */
    const uint8_t *mark = NULL;
    size_t sent = total;
    if (t->zero_blocks && wire_op(r[0].sig.op) == AK_REDUCE_SUM && total >= ZERO_BLOCK_MIN_FLOATS) {
        size_t blocks = (total + ZERO_BLOCK_FLOATS - 1) / ZERO_BLOCK_FLOATS, floats;
        AK_CHECK(ensure(&sc->zmask, &sc->zmask_cap, blocks));
        mark_fused_blocks(r, m, sc->zmask, blocks);
        AK_CHECK(exchange_marks(ch->comm, sc->zmask, blocks, total, &floats));
        if (floats) mark = sc->zmask, sent = floats;
    }
    AK_CHECK(cast_in(sc, r, m, scale, mark));
    ak_dtype wd = kind == AK_COMPRESS_FP16 ? AK_DTYPE_F16 : AK_DTYPE_BF16;
    AK_CHECK(ak_comm_allreduce(ch->comm, AK_IN_PLACE, sc->wire, sent, wd, AK_REDUCE_SUM));
    t->st_zero_elided += (uint64_t)(total - sent) * 2;
    return decompress_out(sc, r, m, scale, ch->size, mark);
}

/* The element counts of the m fused tensors, in sc->segs. */
static ak_status tensor_sizes(ak__scratch *sc, const ak__response *r, int m, size_t **out) {
    AK_CHECK(ensure(&sc->segs, &sc->segs_cap, (size_t)m * sizeof(size_t)));
    size_t *segs = sc->segs;
    for (int i = 0; i < m; i++) segs[i] = ak__sig_elements(&r[i].sig);
    *out = segs;
    return AK_OK;
}

static ak_status allreduce_fused(ak_train *t, ak__chan *ch, ak__response *r, int m) {
    const ak__signature *s = &r[0].sig;
    ak__scratch *sc = ch->sc;
    size_t es = esize_of(s->dtype), total = 0;
    for (int i = 0; i < m; i++) total += ak__sig_elements(&r[i].sig);
    uint64_t t0 = ak_now_ns();
    if (s->compression != AK_COMPRESS_NONE) { /* casts straight from inputs to outputs */
        ak_status st = allreduce_cast(t, ch, r, m, total);
        t->st_comm_ns += ak_now_ns() - t0;
        trace_span("communicate", r, m, t0);
        return st;
    }
    AK_CHECK(ensure(&sc->fusion, &sc->fusion_cap, total * es));
    size_t *segs = NULL; /* only Adasum keeps the fused tensors apart */
    if (s->op == AK_TRAIN_REDUCE_ADASUM) AK_CHECK(tensor_sizes(sc, r, m, &segs));
    fusion_copy_in(sc, r, m, es);
    uint64_t t1 = ak_now_ns();
    t->st_fusion_ns += t1 - t0;
    trace_span("fusion_copy_in", r, m, t0);
    AK_CHECK(allreduce_buffer(t, ch, s, sc->fusion, total, segs, segs ? (size_t)m : 0));
    uint64_t t2 = ak_now_ns();
    t->st_comm_ns += t2 - t1;
    trace_span("communicate", r, m, t1);
    finish_reduction(s, sc->fusion, total, ch->size);
    fusion_copy_out(sc, r, m, es);
    t->st_fusion_ns += ak_now_ns() - t2;
    trace_span("fusion_copy_out", r, m, t2);
    return AK_OK;
}

/* One uncompressed tensor: reduced in place in the caller's output, no fusion copy. */
static ak_status allreduce_single(ak_train *t, ak__chan *ch, ak__response *r) {
    const ak__signature *s = &r->sig;
    size_t n = ak__sig_elements(s), es = esize_of(s->dtype);
    void *buf = r->entry->op.output;
    if (r->entry->op.input != buf) memcpy(buf, r->entry->op.input, n * es);
    scale_buf(s->dtype, buf, n, s->prescale);
    uint64_t t0 = ak_now_ns();
    AK_CHECK(allreduce_buffer(t, ch, s, buf, n, NULL, 0));
    t->st_comm_ns += ak_now_ns() - t0;
    trace_span("communicate", r, 1, t0);
    finish_reduction(s, buf, n, ch->size);
    return AK_OK;
}

/* ---- DGC: sparse (index, value) allgather, applied densely ---------------------------- */

static ak_status dgc_state_for(ak__pset *p, const ak__entry *e, ak_dgc_state **out) {
    for (ak__dgc_named *d = p->dgc; d; d = d->next)
        if (strcmp(d->name, e->name) == 0) {
            *out = d->state;
            return AK_OK;
        }
    ak__dgc_named *d = calloc(1, sizeof *d);
    if (!d) return AK_FAIL(AK_ERR_NO_MEMORY, "train: out of memory");
    ak_status st = ak__dgc_create(&e->dgc, e->count, &d->state);
    if (st != AK_OK) {
        free(d);
        return st;
    }
    snprintf(d->name, sizeof d->name, "%s", e->name);
    d->next = p->dgc;
    p->dgc = d;
    *out = d->state;
    return AK_OK;
}

/* This rank's message: per tensor u32 k, k u32 indices, k f32 values (prescaled). */
static ak_status dgc_encode(ak_train *t, ak__pset *p, ak__response *r, int m, size_t *len) {
    size_t need = 0;
    ak_dgc_state **states = calloc((size_t)m, sizeof *states);
    if (!states) return AK_FAIL(AK_ERR_NO_MEMORY, "train: out of memory");
    ak_status st = AK_OK;
    for (int i = 0; i < m && st == AK_OK; i++) {
        need += 4;
        if (!r[i].entry) continue;
        st = dgc_state_for(p, r[i].entry, &states[i]);
        if (st == AK_OK) need += 8 * ak__dgc_capacity(states[i]);
    }
    if (st == AK_OK) st = ensure(&t->scratch.wire, &t->scratch.wire_cap, need);
    unsigned char *q = t->scratch.wire;
    for (int i = 0; i < m && st == AK_OK; i++) {
        size_t k = 0;
        uint32_t *idx = (uint32_t *)(void *)(q + 4);
        if (r[i].entry) {
            size_t cap = ak__dgc_capacity(states[i]);
            float *val = (float *)(void *)(q + 4 + 4 * cap);
            st = ak__dgc_compress(states[i], r[i].entry->op.input, idx, val, &k);
            if (st == AK_OK && k < cap) memmove(idx + k, val, k * sizeof(float));
            if (st == AK_OK) scale_buf(AK_DTYPE_F32, idx + k, k, r[i].sig.prescale);
        }
        uint32_t k32 = (uint32_t)k;
        memcpy(q, &k32, 4);
        q += 4 + 8 * k;
    }
    free(states);
    *len = (size_t)(q - (unsigned char *)t->scratch.wire);
    return st;
}

static ak_status dgc_apply(ak__response *r, int m, const unsigned char *q, size_t len) {
    const unsigned char *end = q + len;
    for (int i = 0; i < m; i++) {
        uint32_t k;
        if (end - q < 4) return AK_FAIL(AK_ERR_INTERNAL, "train: DGC message truncated");
        memcpy(&k, q, 4);
        if ((size_t)(end - q - 4) / 8 < k) return AK_FAIL(AK_ERR_INTERNAL, "train: DGC message truncated");
        if (r[i].entry) { /* message offsets are multiples of 4: aligned for u32/f32 */
            const uint32_t *idx = (const uint32_t *)(const void *)(q + 4);
            AK_CHECK(ak__dgc_scatter_add(idx, (const float *)(const void *)(idx + k), k,
                                         r[i].entry->op.output, r[i].entry->count));
        }
        q += 4 + 8 * (size_t)k;
    }
    return AK_OK;
}

static ak_status allreduce_dgc(ak_train *t, ak__pset *p, ak__response *r, int m) {
    uint64_t t0 = ak_now_ns();
    size_t len = 0;
    AK_CHECK(dgc_encode(t, p, r, m, &len));
    unsigned char *all = NULL;
    size_t *counts = NULL;
    ak_status st = ak__allgather_bytes(p->comm, p->size, t->scratch.wire, len, &all, &counts);
    const size_t *displs = counts ? counts + p->size : NULL;
    t->st_comm_ns += ak_now_ns() - t0;
    trace_span("communicate", r, m, t0);
    for (int i = 0; st == AK_OK && i < m; i++)
        if (r[i].entry) memset(r[i].entry->op.output, 0, r[i].entry->count * sizeof(float));
    for (int k = 0; st == AK_OK && k < p->size; k++) st = dgc_apply(r, m, all + displs[k], counts[k]);
    for (int i = 0; st == AK_OK && i < m; i++)
        if (r[i].entry) finish_reduction(&r[i].sig, r[i].entry->op.output, r[i].entry->count, p->size);
    free(all);
    free(counts);
    return st;
}

/* Uncompressed tensors this large are reduced in place: fusing them saves no latency
 * worth two copies of megabytes (the copies would cost more than the saved messages). */
#define AK__FUSE_MAX_BYTES ((size_t)4 << 20)

static int fuse_candidate(const ak__signature *s, size_t bytes) {
    return s->compression != AK_COMPRESS_NONE || bytes < AK__FUSE_MAX_BYTES;
}

/* Indices of the responses from i on that fuse with r[i] (same kind of reduction) within
 * the threshold, in order; marks them taken. Returns how many. */
static int collect_fusion(size_t threshold, const ak__response *r, int n, int i, char *taken,
                          int *group) {
    size_t es = esize_of(r[i].sig.dtype);
    size_t bytes = ak__sig_elements(&r[i].sig) * es;
    int m = 0;
    group[m++] = i;
    taken[i] = 1;
    if (!fuse_candidate(&r[i].sig, bytes)) return m;
    for (int j = i + 1; j < n; j++) {
        if (taken[j] || r[j].error || !fusable(&r[i].sig, &r[j].sig)) continue;
        size_t b = ak__sig_elements(&r[j].sig) * es;
        if (!fuse_candidate(&r[j].sig, b) || bytes + b > threshold) continue;
        bytes += b;
        group[m++] = j;
        taken[j] = 1;
    }
    return m;
}

/* Sets the outputs' shapes and completes (or hands to the update thread) g's entries. */
static void complete_allreduce(ak_train *t, ak__response *g, int m) {
    for (int i = 0; i < m; i++) {
        if (!g[i].entry) continue;
        set_output_shape(g[i].entry, &g[i].sig);
        finish_entry(t, g[i].entry);
        g[i].entry = NULL;
    }
}

ak_status ak__run_allreduce(ak_train *t, ak__chan *ch, ak__response *g, int m) {
    t->st_collectives++;
    if (m > 1) t->st_fused++;
    if (m == 1 && g[0].entry && g[0].sig.compression == AK_COMPRESS_NONE)
        AK_CHECK(allreduce_single(t, ch, &g[0]));
    else
        AK_CHECK(allreduce_fused(t, ch, g, m));
    complete_allreduce(t, g, m);
    return AK_OK;
}

/* On the background thread: DGC (its per-name state is p's), the rest via the channel. */
static ak_status run_allreduce(ak_train *t, ak__pset *p, ak__response *g, int m) {
    if (g[0].sig.compression != AK_COMPRESS_DGC) {
        ak__chan ch = bg_chan(t, p);
        return ak__run_allreduce(t, &ch, g, m);
    }
    t->st_collectives++;
    if (m > 1) t->st_fused++;
    AK_CHECK(allreduce_dgc(t, p, g, m));
    complete_allreduce(t, g, m);
    return AK_OK;
}

/* ---- the other collectives ------------------------------------------------------------ */

static ak_status run_broadcast(ak_train *t, ak__pset *p, ak__response *r) {
    const ak__signature *s = &r->sig;
    size_t n = ak__sig_elements(s), es = esize_of(s->dtype);
    void *buf;
    if (r->entry) {
        buf = r->entry->op.output;
        if (p->rank == s->root && r->entry->op.input != buf) memcpy(buf, r->entry->op.input, n * es);
    } else {
        AK_CHECK(ensure(&t->scratch.fusion, &t->scratch.fusion_cap, n * es + 1));
        buf = t->scratch.fusion;
    }
    uint64_t t0 = ak_now_ns();
    AK_CHECK(ak_comm_broadcast(p->comm, buf, n, s->dtype, s->root));
    trace_span("communicate", r, 1, t0);
    return AK_OK;
}

static size_t row_elements(const ak__signature *s) {
    size_t n = 1;
    for (int d = 1; d < s->ndim; d++) n *= (size_t)s->shape[d];
    return n;
}

static ak_status alloc_result(ak__entry *e, size_t bytes) {
    free(e->result);
    e->result = malloc(bytes ? bytes : 1);
    return e->result ? AK_OK : AK_FAIL(AK_ERR_NO_MEMORY, "'%s': cannot allocate %zu bytes", e->name, bytes);
}

static ak_status run_allgather(ak__pset *p, ak__response *r) {
    const ak__signature *s = &r->sig;
    size_t row = row_elements(s), es = esize_of(s->dtype), total = 0;
    size_t *counts = calloc(2 * (size_t)p->size, sizeof *counts), *displs;
    if (!counts) return AK_FAIL(AK_ERR_NO_MEMORY, "train: out of memory");
    displs = counts + p->size;
    ak_status st = AK_OK;
    size_t rows_bytes = 0, bytes = 0;
    for (int k = 0; k < p->size && st == AK_OK; k++) { /* rows from the wire: bounded */
        displs[k] = total;
        st = ak__wire_bytes("allgather rows", r->dim0[k], row * es, &rows_bytes);
        counts[k] = (size_t)r->dim0[k] * row;
        if (st == AK_OK) st = ak__wire_bytes("allgather result", (int64_t)(total + counts[k]), es, &bytes);
        total += counts[k];
    }
    if (st != AK_OK) return free(counts), st;
    char scratch;
    void *out = &scratch;
    if (r->entry) {
        st = alloc_result(r->entry, total * es);
        out = r->entry->result;
    }
    if (st == AK_OK && !r->entry) {
        out = malloc(total * es + 1); /* a joined rank still receives */
        if (!out) st = AK_FAIL(AK_ERR_NO_MEMORY, "train: out of memory");
    }
    const void *in = r->entry ? r->entry->op.input : NULL;
    if (st == AK_OK) st = ak_comm_allgatherv(p->comm, in, counts[p->rank], out, counts, displs, s->dtype);
    if (!r->entry && out != &scratch) free(out);
    if (st == AK_OK && r->entry) {
        set_output_shape(r->entry, s);
        int64_t rows = 0;
        for (int k = 0; k < p->size; k++) rows += r->dim0[k];
        r->entry->out_shape[0] = rows;
    }
    free(counts);
    return st;
}

static ak_status alltoall_counts(ak__pset *p, ak__entry *e, size_t row, size_t *sc, size_t *sd,
                                 size_t *rc, size_t *rd, int64_t *recv_rows) {
    int64_t *send_rows = calloc((size_t)p->size, sizeof *send_rows);
    if (!send_rows) return AK_FAIL(AK_ERR_NO_MEMORY, "train: out of memory");
    for (int k = 0; k < p->size; k++)
        send_rows[k] = e->sig.splits ? e->sig.splits[k] : e->sig.shape[0] / p->size;
    ak_status st = ak_comm_alltoall(p->comm, send_rows, recv_rows, 1, AK_DTYPE_I64);
    size_t so = 0, ro = 0;
    for (int k = 0; st == AK_OK && k < p->size; k++) {
        sc[k] = (size_t)send_rows[k] * row, sd[k] = so, so += sc[k];
        rc[k] = (size_t)recv_rows[k] * row, rd[k] = ro, ro += rc[k];
    }
    free(send_rows);
    return st;
}

static ak_status run_alltoall(ak__pset *p, ak__response *r) {
    ak__entry *e = r->entry;
    if (!e) return AK_FAIL(AK_ERR_INTERNAL, "train: alltoall without an entry");
    size_t row = row_elements(&r->sig), es = esize_of(r->sig.dtype), n = (size_t)p->size;
    size_t *c = calloc(4 * n, sizeof *c);
    e->recv_splits = calloc(n, sizeof(int64_t));
    if (!c || !e->recv_splits) {
        free(c);
        return AK_FAIL(AK_ERR_NO_MEMORY, "train: out of memory");
    }
    e->nrecv_splits = p->size;
    ak_status st = alltoall_counts(p, e, row, c, c + n, c + 2 * n, c + 3 * n, e->recv_splits);
    int64_t rows = 0;
    size_t bytes = 0;
    for (int k = 0; k < p->size && st == AK_OK; k++) { /* splits from the wire: bounded */
        st = ak__wire_bytes("alltoall rows", e->recv_splits[k], row * es, &bytes);
        if (st == AK_OK) st = ak__wire_bytes("alltoall result", rows + e->recv_splits[k], row * es, &bytes);
        rows += e->recv_splits[k];
    }
    if (st == AK_OK) st = alloc_result(e, bytes);
    if (st == AK_OK)
        st = ak_comm_alltoallv(p->comm, e->op.input, c, c + n, e->result, c + 2 * n, c + 3 * n,
                               r->sig.dtype);
    if (st == AK_OK) set_output_shape(e, &r->sig), e->out_shape[0] = rows;
    free(c);
    return st;
}

/* Rows of dim 0 per rank: the first (rows % size) ranks get one more. */
static void scatter_rows(int64_t rows, int size, int rank, int64_t *mine, int64_t *offset) {
    int64_t base = rows / size, extra = rows % size;
    *mine = base + (rank < extra);
    *offset = rank * base + (rank < extra ? rank : extra);
}

static ak_status run_reducescatter(ak_train *t, ak__pset *p, ak__response *r) {
    ak__entry *e = r->entry;
    if (!e) return AK_FAIL(AK_ERR_INTERNAL, "train: reducescatter without an entry");
    const ak__signature *s = &r->sig;
    size_t row = row_elements(s), es = esize_of(s->dtype), n = ak__sig_elements(s);
    int64_t mine, off;
    scatter_rows(s->shape[0], p->size, p->rank, &mine, &off);
    void *work = NULL;
    AK_CHECK(ensure(&t->scratch.fusion, &t->scratch.fusion_cap, n * es + 1));
    work = t->scratch.fusion;
    memcpy(work, e->op.input, n * es);
    scale_buf(s->dtype, work, n, s->prescale);
    void *out = e->op.output;
    if (!out) {
        AK_CHECK(alloc_result(e, (size_t)mine * row * es));
        out = e->result;
    }
    if (s->shape[0] % p->size == 0) {
        AK_CHECK(ak_comm_reduce_scatter(p->comm, work, out, (size_t)mine * row, s->dtype,
                                        wire_op(s->op)));
    } else {
        AK_CHECK(ak_comm_allreduce(p->comm, AK_IN_PLACE, work, n, s->dtype, wire_op(s->op)));
        memcpy(out, (char *)work + (size_t)off * row * es, (size_t)mine * row * es);
    }
    finish_reduction(s, out, (size_t)mine * row, p->size);
    set_output_shape(e, s);
    e->out_shape[0] = mine;
    return AK_OK;
}

/* ---- process sets --------------------------------------------------------------------- */

static ak_status run_pset_add(ak_train *t, ak__pset *p, ak__response *r) {
    const ak__signature *s = &r->sig;
    if (t->npsets >= AK__MAX_PSETS)
        return AK_FAIL(AK_ERR_UNSUPPORTED, "train: at most %d process sets", AK__MAX_PSETS);
    int member = 0;
    for (int i = 0; i < s->nsplits; i++) member |= s->splits[i] == t->rank;
    ak_comm *sub = NULL;
    AK_CHECK(ak_comm_split(p->comm, member ? 0 : -1, t->rank, &sub));
    ak__pset *np = NULL;
    ak_status st = ak__pset_create(t, t->npsets, sub, &np);
    if (st != AK_OK) {
        ak_comm_free(sub);
        return st;
    }
    if (!sub) np->rank = -1, np->size = s->nsplits;
    pthread_mutex_lock(&t->lock);
    int id = t->npsets;
    t->psets[t->npsets++] = np;
    if (r->entry) r->entry->join_last_rank = id;
    pthread_mutex_unlock(&t->lock);
    return AK_OK;
}

static void run_pset_remove(ak_train *t, ak__response *r) {
    int id = r->sig.root;
    if (id <= 0 || id >= t->npsets || !t->psets[id] || !t->psets[id]->active) return;
    ak__pset *victim = t->psets[id];
    ak__pset_fail_all(t, victim, AK_ERR_INVALID_ARG, "its process set was removed");
    pthread_mutex_lock(&t->lock);
    victim->active = 0;
    pthread_mutex_unlock(&t->lock);
    if (victim->comm) ak_comm_free(victim->comm);
    victim->comm = NULL;
}

/* ---- dispatch ------------------------------------------------------------------------- */

static ak_status run_one(ak_train *t, ak__pset *p, ak__response *r) {
    ak_status st = AK_OK;
    t->st_collectives += r->sig.kind != AK_TRAIN_BARRIER;
    switch (r->sig.kind) {
    case AK_TRAIN_BROADCAST: st = run_broadcast(t, p, r); break;
    case AK_TRAIN_ALLGATHER: st = run_allgather(p, r); break;
    case AK_TRAIN_ALLTOALL: st = run_alltoall(p, r); break;
    case AK_TRAIN_REDUCESCATTER: st = run_reducescatter(t, p, r); break;
    case AK__KIND_PSET_ADD: st = run_pset_add(t, p, r); break;
    case AK__KIND_PSET_REMOVE: run_pset_remove(t, r); break;
    default: break; /* barrier: negotiation itself synchronised the ranks */
    }
    if (st == AK_OK && r->entry) {
        if (r->sig.kind == AK_TRAIN_BROADCAST) set_output_shape(r->entry, &r->sig);
        ak__train_complete(t, r->entry, AK_OK, NULL);
        r->entry = NULL;
    }
    return st;
}

ak_status ak__exec_responses(ak_train *t, ak__pset *p, ak__response *r, int n) {
    char *taken = calloc((size_t)n, 1);
    int *idx = malloc((size_t)n * sizeof *idx);
    ak__response *group = malloc((size_t)n * sizeof *group);
    if (!taken || !idx || !group) {
        free(taken);
        free(idx);
        free(group);
        return AK_FAIL(AK_ERR_NO_MEMORY, "train: out of memory");
    }
    ak_status st = AK_OK;
    /* with fusion streams: one size for this cycle's buffers, from the responses alone */
    size_t threshold = ak__streams_buffer_bytes(t, p, r, n);
    for (int i = 0; i < n && st == AK_OK; i++) {
        if (taken[i]) continue;
        if (r[i].error) {
            taken[i] = 1;
            if (r[i].entry) ak__train_complete(t, r[i].entry, r[i].error_status, r[i].error);
            r[i].entry = NULL;
        } else if (r[i].sig.kind == AK_TRAIN_ALLREDUCE) {
            int streamed = ak__streams_take(t, p, &r[i].sig);
            int m = collect_fusion(streamed ? threshold : t->fusion_threshold, r, n, i, taken, idx);
            for (int k = 0; k < m; k++) group[k] = r[idx[k]]; /* shallow: r keeps ownership */
            st = streamed ? ak__streams_dispatch(t, group, m) : run_allreduce(t, p, group, m);
            for (int k = 0; k < m; k++) r[idx[k]].entry = group[k].entry; /* NULL once done */
        } else {
            taken[i] = 1;
            st = run_one(t, p, &r[i]);
        }
    }
    /* on a failed collective the caller fails everything still pending; entries taken
     * out of the pending list for these responses must fail too */
    for (int i = 0; i < n; i++)
        if (r[i].entry && st != AK_OK) ak__train_complete(t, r[i].entry, st, ak_last_error());
    free(taken);
    free(idx);
    free(group);
    return st;
}
