/* Symbols and the priority queue of candidate merges shared by both BPE encoders.
 *
 * A word is a doubly linked list of symbols (byte ranges of one buffer); a merge joins a
 * symbol with its right neighbour. Queue entries can go stale when a neighbour merged
 * first: an entry is still valid only while the two symbols together span `size` bytes. */
#ifndef AK_LLM_BIGRAM_H
#define AK_LLM_BIGRAM_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/check.h"

typedef struct ak_symbol {
    size_t start, n; /* n == 0: merged into its left neighbour */
    int32_t prev, next;
} ak_symbol;

typedef struct ak_bigram {
    double prio; /* higher merges first: the SPM score, or minus the BPE rank */
    int32_t left, right;
    size_t size;
} ak_bigram;

typedef struct ak_bigram_heap {
    ak_bigram *v;
    size_t n, cap;
} ak_bigram_heap;

/* a before b: higher priority, then the leftmost pair (as SentencePiece and llama.cpp) */
static inline int ak__bigram_before(const ak_bigram *a, const ak_bigram *b) {
    return a->prio > b->prio || (a->prio == b->prio && a->left < b->left);
}

static inline ak_status ak__heap_push(ak_bigram_heap *h, ak_bigram b) {
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 64;
        ak_bigram *v = realloc(h->v, cap * sizeof *v);
        if (!v) return AK_FAIL(AK_ERR_NO_MEMORY, "merge queue");
        h->v = v;
        h->cap = cap;
    }
    size_t i = h->n++;
    while (i > 0 && ak__bigram_before(&b, &h->v[(i - 1) / 2])) {
        h->v[i] = h->v[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->v[i] = b;
    return AK_OK;
}

static inline ak_bigram ak__heap_pop(ak_bigram_heap *h) {
    ak_bigram top = h->v[0], last = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && ak__bigram_before(&h->v[c + 1], &h->v[c])) c++;
        if (!ak__bigram_before(&h->v[c], &last)) break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (h->n) h->v[i] = last;
    return top;
}

/* Joins symbol `b.right` into `b.left` when the entry is still current; returns 1 if so. */
static inline int ak__symbols_merge(ak_symbol *sym, const ak_bigram *b) {
    ak_symbol *l = &sym[b->left], *r = &sym[b->right];
    if (l->n == 0 || r->n == 0 || l->n + r->n != b->size) return 0;
    l->n += r->n;
    r->n = 0;
    l->next = r->next;
    if (r->next >= 0) sym[r->next].prev = b->left;
    return 1;
}

/* Splits buf[0, len) into UTF-8 characters (a bad lead byte counts as one character). */
static inline ak_status ak__symbols_split(const char *buf, size_t len, ak_symbol **out, size_t *n) {
    static const uint8_t lead_len[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    ak_symbol *s = malloc((len ? len : 1) * sizeof *s);
    if (!s) return AK_FAIL(AK_ERR_NO_MEMORY, "symbols for %zu bytes", len);
    size_t count = 0;
    for (size_t off = 0; off < len;) {
        size_t cl = lead_len[(unsigned char)buf[off] >> 4];
        if (cl > len - off) cl = len - off;
        s[count] = (ak_symbol){off, cl, (int32_t)count - 1, off + cl == len ? -1 : (int32_t)count + 1};
        count++;
        off += cl;
    }
    *out = s;
    *n = count;
    return AK_OK;
}

#endif /* AK_LLM_BIGRAM_H */
