/* The training runtime's request wire format: what a rank sends in a negotiation (its
 * uncached requests, allgathered by train_cycle.c) and how each is read back.
 *
 * A request: u16 name length, name, u8 kind, dtype, op, compression, ndim,
 * i64 shape[ndim], f64 prescale, postscale (bits), i32 root, i64 group, i32 group size,
 * u32 nsplits, i64 splits[nsplits]. A rank's message: u32 count, then its requests. */
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "core/le_bytes.h"
#include "train/train_internal.h"


static size_t request_size(const ak__entry *e) {
    return 2 + strlen(e->name) + 5 + 8 * (size_t)e->sig.ndim + 16 + 4 + 8 + 4 + 4 +
           8 * (size_t)e->sig.nsplits;
}

static unsigned char *put_f64(unsigned char *q, double d) {
    uint64_t u;
    memcpy(&u, &d, 8);
    ak__put_u64(q, u);
    return q + 8;
}

static unsigned char *encode_request(unsigned char *q, const ak__entry *e) {
    const ak__signature *s = &e->sig;
    size_t len = strlen(e->name);
    q[0] = (unsigned char)len, q[1] = (unsigned char)(len >> 8);
    memcpy(q + 2, e->name, len);
    q += 2 + len;
    *q++ = (unsigned char)s->kind, *q++ = (unsigned char)s->dtype, *q++ = (unsigned char)s->op;
    *q++ = (unsigned char)s->compression, *q++ = (unsigned char)s->ndim;
    for (int d = 0; d < s->ndim; d++, q += 8) ak__put_u64(q, (uint64_t)s->shape[d]);
    q = put_f64(q, s->prescale);
    q = put_f64(q, s->postscale);
    ak__put_u32(q, (uint32_t)s->root), q += 4;
    ak__put_u64(q, (uint64_t)s->group), q += 8;
    ak__put_u32(q, (uint32_t)s->group_size), q += 4;
    ak__put_u32(q, (uint32_t)s->nsplits), q += 4;
    for (int i = 0; i < s->nsplits; i++, q += 8) ak__put_u64(q, (uint64_t)s->splits[i]);
    return q;
}

ak_status ak__encode_requests(ak__pset *p, unsigned char **out, size_t *len) {
    size_t n = 4;
    uint32_t count = 0;
    for (ak__entry *e = p->pending; e; e = e->next)
        if (e->cache_slot < 0 && !e->sent) n += request_size(e), count++;
    unsigned char *buf = malloc(n), *q = buf + 4;
    if (!buf) return AK_FAIL(AK_ERR_NO_MEMORY, "train: out of memory");
    ak__put_u32(buf, count);
    for (ak__entry *e = p->pending; e; e = e->next)
        if (e->cache_slot < 0 && !e->sent) q = encode_request(q, e), e->sent = 1;
    *out = buf;
    *len = n;
    return AK_OK;
}

static const unsigned char *need(ak__reader *r, size_t n) {
    if (r->bad || (size_t)(r->end - r->p) < n) {
        r->bad = 1;
        return NULL;
    }
    const unsigned char *q = r->p;
    r->p += n;
    return q;
}

static uint64_t rd_u64(ak__reader *r) {
    const unsigned char *q = need(r, 8);
    return q ? ak__get_u64(q) : 0;
}

static uint32_t rd_u32(ak__reader *r) {
    const unsigned char *q = need(r, 4);
    return q ? ak__get_u32(q) : 0;
}

static double rd_f64(ak__reader *r) {
    uint64_t u = rd_u64(r);
    double d;
    memcpy(&d, &u, 8);
    return d;
}

static int rd_u8(ak__reader *r) {
    const unsigned char *q = need(r, 1);
    return q ? q[0] : 0;
}

ak_status ak__decode_request(ak__reader *r, char *name, ak__signature *s) {
    const unsigned char *q = need(r, 2);
    size_t len = q ? (size_t)(q[0] | q[1] << 8) : 0;
    const unsigned char *nm = need(r, len);
    if (r->bad || len >= AK__NAME_MAX) return AK_FAIL(AK_ERR_INTERNAL, "train: bad request");
    memcpy(name, nm, len);
    name[len] = '\0';
    memset(s, 0, sizeof *s);
    s->kind = rd_u8(r), s->dtype = (ak_dtype)rd_u8(r), s->op = (ak_reduce_op)rd_u8(r);
    s->compression = (ak_train_compression)rd_u8(r), s->ndim = rd_u8(r);
    if (s->ndim > AK_TRAIN_MAX_DIMS) r->bad = 1;
    for (int d = 0; d < s->ndim && !r->bad; d++) s->shape[d] = (int64_t)rd_u64(r);
    s->prescale = rd_f64(r), s->postscale = rd_f64(r);
    s->root = (int)rd_u32(r), s->group = (int64_t)rd_u64(r), s->group_size = (int)rd_u32(r);
    uint32_t ns = rd_u32(r);
    if (r->bad || ns > (uint32_t)(r->end - r->p) / 8)
        return AK_FAIL(AK_ERR_INTERNAL, "train: bad request");
    if (ns) {
        s->splits = malloc(ns * sizeof(int64_t));
        if (!s->splits) return AK_FAIL(AK_ERR_NO_MEMORY, "train: out of memory");
        for (uint32_t i = 0; i < ns; i++) s->splits[i] = (int64_t)rd_u64(r);
        s->nsplits = (int)ns;
    }
    return AK_OK;
}

uint32_t ak__read_request_count(ak__reader *r) { return rd_u32(r); }
