/* WordPiece (GGUF tokenizer model "bert"), as llama.cpp runs it.
 *
 * Normalize each code point to the first code point of its canonical decomposition (which
 * drops accents) and lower-case it; drop control characters; split at whitespace, and
 * make each punctuation mark, ASCII symbol and CJK ideograph a word of its own. Each word
 * gets the U+2581 word-start marker (the GGUF converter wrote "##piece" as "piece" and
 * "word" as "▁word"), then is cut greedily into the longest vocabulary tokens from the
 * left; a word that cannot be cut completely becomes the unknown token. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "core/check.h"
#include "llm/tokenizer/tokenizer.h"

static int is_space(int32_t c) {
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
           c == 0x205F || c == 0x3000;
}

/* The CJK ranges of BERT's _is_chinese_char (0x2B920 is what the reference uses). */
static int is_cjk(int32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

static int32_t base_of(int32_t c) {
    utf8proc_int32_t d[8];
    int bound = 0;
    utf8proc_ssize_t n = utf8proc_decompose_char(c, d, 8, UTF8PROC_DECOMPOSE, &bound);
    return n >= 1 ? d[0] : c;
}

/* Words as byte ranges of one buffer: normalized text, "▁" in front of each word. */
typedef struct words {
    char *buf;
    size_t n, cap;
    size_t *bounds; /* [start, end) pairs */
    size_t count, bcap;
    int open;       /* a word is being written */
} words;

static ak_status grow(words *w, size_t more) {
    if (w->cap - w->n >= more) return AK_OK;
    size_t cap = w->cap ? w->cap : 256;
    while (cap - w->n < more) cap *= 2;
    char *b = realloc(w->buf, cap);
    if (!b) return AK_FAIL(AK_ERR_NO_MEMORY, "word buffer");
    w->buf = b;
    w->cap = cap;
    return AK_OK;
}

static ak_status end_word(words *w) {
    if (!w->open) return AK_OK;
    w->open = 0;
    w->bounds[2 * w->count + 1] = w->n;
    w->count++;
    return AK_OK;
}

static ak_status add_char(words *w, int32_t c) {
    AK_CHECK(grow(w, 3 + 4));
    if (!w->open) {
        if (w->count == w->bcap) { /* make room for the start now; end_word stores the end */
            size_t cap = w->bcap ? w->bcap * 2 : 32;
            size_t *b = realloc(w->bounds, 2 * cap * sizeof *b);
            if (!b) return AK_FAIL(AK_ERR_NO_MEMORY, "word list");
            w->bounds = b;
            w->bcap = cap;
        }
        w->bounds[2 * w->count] = w->n;
        memcpy(w->buf + w->n, "\xe2\x96\x81", 3);
        w->n += 3;
        w->open = 1;
    }
    w->n += (size_t)utf8proc_encode_char(c, (utf8proc_uint8_t *)w->buf + w->n);
    return AK_OK;
}

static ak_status split_words(const char *text, size_t len, words *w) {
    for (size_t i = 0; i < len;) {
        utf8proc_int32_t c;
        utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)text + i, (utf8proc_ssize_t)(len - i), &c);
        if (k <= 0) k = 1, c = 0xFFFD;
        i += (size_t)k;
        c = base_of(c);
        if (is_space(c)) {
            AK_CHECK(end_word(w));
            continue;
        }
        utf8proc_category_t cat = utf8proc_category(c);
        if (c == 0 || c == 0xFFFD || cat == UTF8PROC_CATEGORY_CC || cat == UTF8PROC_CATEGORY_CF ||
            cat == UTF8PROC_CATEGORY_CS || cat == UTF8PROC_CATEGORY_CO)
            continue;
        int alone = (cat >= UTF8PROC_CATEGORY_PC && cat <= UTF8PROC_CATEGORY_PO) ||
                    (c < 0x7F && cat >= UTF8PROC_CATEGORY_SM && cat <= UTF8PROC_CATEGORY_SO) || is_cjk(c);
        if (alone) AK_CHECK(end_word(w));
        AK_CHECK(add_char(w, utf8proc_tolower(c)));
        if (alone) AK_CHECK(end_word(w));
    }
    return end_word(w);
}

/* Greedy longest match from the left; all or nothing per word. */
static ak_status cut_word(const ak_tokenizer *t, const char *s, size_t n, ak_ids *out) {
    size_t mark = out->n;
    for (size_t i = 0; i < n;) {
        size_t j = n - i > t->max_token_len ? i + t->max_token_len : n;
        int64_t id = -1;
        for (; j > i; j--)
            if ((id = ak_strmap_get(&t->vocab, s + i, j - i)) >= 0) break;
        if (id < 0) {
            out->n = mark;
            break;
        }
        AK_CHECK(ak__ids_push(out, (int32_t)id));
        i = j;
    }
    if (out->n == mark && t->unk >= 0) AK_CHECK(ak__ids_push(out, t->unk));
    return AK_OK;
}

ak_status ak__wpm_encode(const ak_tokenizer *t, const char *text, size_t len, ak_ids *out) {
    words w = {0};
    ak_status st = split_words(text, len, &w);
    for (size_t i = 0; st == AK_OK && i < w.count; i++)
        st = cut_word(t, w.buf + w.bounds[2 * i], w.bounds[2 * i + 1] - w.bounds[2 * i], out);
    free(w.buf);
    free(w.bounds);
    return st;
}
