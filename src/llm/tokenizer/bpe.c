/* Byte-level BPE (GGUF tokenizer model "gpt2"), as GPT-2 and llama.cpp run it: split the
 * text into words (pretok.c, by the vocabulary's regular expressions), write each byte of a word as GPT-2's printable code point
 * (so every byte sequence is spelled by the 256 base tokens), then repeatedly merge the
 * adjacent pair with the lowest merge rank. */
#include <stdlib.h>
#include <string.h>

#include "llm/tokenizer/bigram.h"
#include "llm/tokenizer/tokenizer.h"

/* GPT-2 keeps printable Latin-1 bytes as themselves and moves the other 68 bytes (controls,
 * space, DEL, NBSP, soft hyphen) to 256.. in byte order. */
static int printable(unsigned b) { return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174; }

uint32_t ak__bpe_byte_to_cp(uint8_t b) {
    if (printable(b)) return b;
    unsigned k = b <= 32 ? b : b <= 160 ? 33 + (b - 127u) : 67; /* the rest is 173 */
    return 256 + k;
}

int ak__bpe_cp_to_byte(uint32_t cp) {
    if (cp < 256) return printable(cp) ? (int)cp : -1;
    if (cp > 256 + 67) return -1;
    unsigned k = cp - 256;
    return k < 33 ? (int)k : k < 67 ? (int)(127 + k - 33) : 173;
}

/* Appends the UTF-8 form of the mapped code point of each byte (1 or 2 bytes each). */
static size_t map_bytes(const char *in, size_t len, char *out) {
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        uint32_t cp = ak__bpe_byte_to_cp((uint8_t)in[i]);
        if (cp < 0x80) {
            out[n++] = (char)cp;
        } else {
            out[n++] = (char)(0xC0 | (cp >> 6));
            out[n++] = (char)(0x80 | (cp & 0x3F));
        }
    }
    return n;
}

typedef struct word_ctx {
    const ak_tokenizer *t;
    const char *buf;  /* the mapped word */
    char *key;        /* scratch for "left right" */
    ak_symbol *sym;
    ak_bigram_heap heap;
} word_ctx;

static ak_status try_pair(word_ctx *w, int32_t left, int32_t right) {
    if (left < 0 || right < 0) return AK_OK;
    const ak_symbol *l = &w->sym[left], *r = &w->sym[right];
    memcpy(w->key, w->buf + l->start, l->n);
    w->key[l->n] = ' ';
    memcpy(w->key + l->n + 1, w->buf + r->start, r->n);
    int64_t rank = ak_strmap_get(&w->t->merges, w->key, l->n + 1 + r->n);
    if (rank < 0) return AK_OK;
    return ak__heap_push(&w->heap, (ak_bigram){-(double)rank, left, right, l->n + r->n});
}

/* A final symbol is a token; otherwise its single bytes are looked up (llama.cpp does the
 * same and drops what it cannot find; with a complete byte alphabet that never happens). */
static ak_status emit(const word_ctx *w, const ak_symbol *s, ak_ids *out) {
    int64_t id = ak_strmap_get(&w->t->vocab, w->buf + s->start, s->n);
    if (id >= 0) return ak__ids_push(out, (int32_t)id);
    for (size_t i = 0; i < s->n; i++) {
        id = ak_strmap_get(&w->t->vocab, w->buf + s->start + i, 1);
        if (id >= 0) AK_CHECK(ak__ids_push(out, (int32_t)id));
    }
    return AK_OK;
}

static ak_status encode_word(word_ctx *w, size_t len, ak_ids *out) {
    if (w->t->ignore_merges) { /* a whole word that is a token is that token (Llama 3) */
        int64_t id = ak_strmap_get(&w->t->vocab, w->buf, len);
        if (id >= 0) return ak__ids_push(out, (int32_t)id);
    }
    size_t n = 0;
    w->heap.n = 0;
    AK_CHECK(ak__symbols_split(w->buf, len, &w->sym, &n));
    ak_status st = AK_OK;
    for (size_t i = 1; i < n && st == AK_OK; i++) st = try_pair(w, (int32_t)i - 1, (int32_t)i);
    while (st == AK_OK && w->heap.n) {
        ak_bigram b = ak__heap_pop(&w->heap);
        if (!ak__symbols_merge(w->sym, &b)) continue;
        st = try_pair(w, w->sym[b.left].prev, b.left);
        if (st == AK_OK) st = try_pair(w, b.left, w->sym[b.left].next);
    }
    for (int32_t i = n ? 0 : -1; st == AK_OK && i >= 0; i = w->sym[i].next) st = emit(w, &w->sym[i], out);
    free(w->sym);
    w->sym = NULL;
    return st;
}

ak_status ak__bpe_encode(const ak_tokenizer *t, const char *text, size_t len, ak_ids *out) {
    size_t *bounds = NULL, n_words = 0;
    AK_CHECK(ak__pretokenize(t->pre, text, len, &bounds, &n_words));
    word_ctx w = {.t = t};
    char *mapped = malloc(2 * len + 1), *key = malloc(2 * len + 2);
    ak_status st = AK_OK;
    if (!mapped || !key) st = AK_FAIL(AK_ERR_NO_MEMORY, "word buffers for %zu bytes", len);
    w.buf = mapped;
    w.key = key;
    for (size_t i = 0; st == AK_OK && i < n_words; i++) {
        size_t start = bounds[2 * i], end = bounds[2 * i + 1];
        size_t n = map_bytes(text + start, end - start, mapped);
        st = encode_word(&w, n, out);
    }
    free(w.heap.v);
    free(mapped);
    free(key);
    free(bounds);
    return st;
}
