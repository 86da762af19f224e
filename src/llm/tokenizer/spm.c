/* SentencePiece-style BPE (GGUF tokenizer model "llama"), as llama.cpp runs it: start from
 * UTF-8 characters, repeatedly merge the adjacent pair whose concatenation is the
 * vocabulary token with the best score, and spell what is not a token with byte tokens
 * <0xXX>. The input is already escaped (spaces are U+2581). */
#include <stdlib.h>

#include "llm/tokenizer/bigram.h"
#include "llm/tokenizer/tokenizer.h"

static ak_status try_pair(const ak_tokenizer *t, const char *buf, const ak_symbol *sym,
                          int32_t left, int32_t right, ak_bigram_heap *h) {
    if (left < 0 || right < 0) return AK_OK;
    size_t size = sym[left].n + sym[right].n;
    int64_t id = ak_strmap_get(&t->vocab, buf + sym[left].start, size);
    if (id < 0) return AK_OK;
    return ak__heap_push(h, (ak_bigram){t->scores[id], left, right, size});
}

/* A final symbol is a token, or else each of its bytes becomes a byte token. */
static ak_status emit(const ak_tokenizer *t, const char *buf, const ak_symbol *s, ak_ids *out) {
    int64_t id = ak_strmap_get(&t->vocab, buf + s->start, s->n);
    if (id >= 0) return ak__ids_push(out, (int32_t)id);
    for (size_t i = 0; i < s->n; i++) {
        int32_t b = t->byte_token[(unsigned char)buf[s->start + i]];
        if (b < 0) b = t->unk;
        if (b >= 0) AK_CHECK(ak__ids_push(out, b));
    }
    return AK_OK;
}

ak_status ak__spm_encode(const ak_tokenizer *t, const char *buf, size_t len, ak_ids *out) {
    ak_symbol *sym = NULL;
    size_t n = 0;
    ak_bigram_heap h = {0};
    ak_status st;
    AK_CHECK_GOTO(st, ak__symbols_split(buf, len, &sym, &n));
    for (size_t i = 1; i < n; i++) AK_CHECK_GOTO(st, try_pair(t, buf, sym, (int32_t)i - 1, (int32_t)i, &h));
    while (h.n) {
        ak_bigram b = ak__heap_pop(&h);
        if (!ak__symbols_merge(sym, &b)) continue;
        AK_CHECK_GOTO(st, try_pair(t, buf, sym, sym[b.left].prev, b.left, &h));
        AK_CHECK_GOTO(st, try_pair(t, buf, sym, b.left, sym[b.left].next, &h));
    }
    for (int32_t i = n ? 0 : -1; i >= 0; i = sym[i].next) AK_CHECK_GOTO(st, emit(t, buf, &sym[i], out));
fail:
    free(sym);
    free(h.v);
    return st;
}
