/* Decoding: ids → bytes, following llama.cpp's token_to_piece.
 *   SPM, UGM, WPM: normal tokens with U+2581 turned back into spaces; SPM/UGM byte tokens <0xXX>
 *   as the byte.
 *   BPE: normal tokens with GPT-2's printable code points turned back into bytes.
 *   Both: user-defined tokens as written; control/unknown tokens only when asked. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "core/check.h"
#include "llm/tokenizer/tokenizer.h"

typedef struct bytes {
    char *v;
    size_t n, cap;
} bytes;

static ak_status put(bytes *b, const char *s, size_t n) {
    if (n == 0) return AK_OK;
    if (b->cap - b->n < n) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap - b->n < n) cap *= 2;
        char *v = realloc(b->v, cap);
        if (!v) return AK_FAIL(AK_ERR_NO_MEMORY, "decode buffer of %zu", cap);
        b->v = v;
        b->cap = cap;
    }
    memcpy(b->v + b->n, s, n);
    b->n += n;
    return AK_OK;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

static ak_status spm_piece(const char *s, size_t n, bytes *out) {
    size_t i = 0, run = 0;
    while (i + run < n) {
        if (n - i - run >= 3 && memcmp(s + i + run, "\xe2\x96\x81", 3) == 0) {
            AK_CHECK(put(out, s + i, run));
            AK_CHECK(put(out, " ", 1));
            i += run + 3;
            run = 0;
        } else {
            run++;
        }
    }
    return put(out, s + i, run);
}

static ak_status byte_piece(const char *s, size_t n, bytes *out) {
    if (n == 6 && s[0] == '<' && s[1] == '0' && s[2] == 'x' && s[5] == '>') {
        int hi = hexval(s[3]), lo = hexval(s[4]);
        if (hi >= 0 && lo >= 0) {
            char c = (char)(hi * 16 + lo);
            return put(out, &c, 1);
        }
    }
    return put(out, s, n); /* not of the <0xXX> form: leave it as written */
}

/* Code points that are not one of GPT-2's 256 byte stand-ins are kept as UTF-8. */
static ak_status bpe_piece(const char *s, size_t n, bytes *out) {
    for (size_t i = 0; i < n;) {
        utf8proc_int32_t c;
        utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(n - i), &c);
        if (k <= 0) k = 1, c = -1;
        int b = c >= 0 ? ak__bpe_cp_to_byte((uint32_t)c) : -1;
        if (b >= 0) {
            char ch = (char)b;
            AK_CHECK(put(out, &ch, 1));
        } else {
            AK_CHECK(put(out, s + i, (size_t)k));
        }
        i += (size_t)k;
    }
    return AK_OK;
}

static ak_status piece(const ak_tokenizer *t, int32_t id, unsigned flags, bytes *out) {
    size_t n;
    const char *s = ak__tok_text(t, id, &n);
    switch (t->types[id]) {
    case AK_TOKTYPE_CONTROL:
    case AK_TOKTYPE_UNKNOWN:
        return (flags & AK_TOK_RENDER_SPECIAL) ? put(out, s, n) : AK_OK;
    case AK_TOKTYPE_USER_DEFINED:
        return t->user_spm_pieces ? spm_piece(s, n, out) : put(out, s, n);
    case AK_TOKTYPE_NORMAL:
        return t->kind == AK_TOKENIZER_BPE ? bpe_piece(s, n, out) : spm_piece(s, n, out);
    case AK_TOKTYPE_BYTE:
        return t->kind == AK_TOKENIZER_SPM || t->kind == AK_TOKENIZER_UGM ? byte_piece(s, n, out) : AK_OK;
    default:
        return AK_OK; /* unused and undefined tokens produce nothing */
    }
}

ak_status ak_tokenizer_decode(const ak_tokenizer *t, const int32_t *ids, size_t n_ids, unsigned flags,
                              char *buf, size_t cap, size_t *len) {
    AK_ARG_CHECK(t != NULL && len != NULL, "tokenizer or len is NULL");
    AK_ARG_CHECK(ids != NULL || n_ids == 0, "ids is NULL");
    AK_ARG_CHECK(buf != NULL || cap == 0, "buf is NULL with cap %zu", cap);
    bytes out = {0};
    ak_status st = AK_OK;
    size_t skip = 0;
    for (size_t i = 0; i < n_ids && st == AK_OK; i++) {
        if (ids[i] < 0 || ids[i] >= t->n_vocab) {
            st = AK_FAIL(AK_ERR_INVALID_ARG, "token id %d out of %d", ids[i], t->n_vocab);
            break;
        }
        size_t before = out.n;
        st = piece(t, ids[i], flags, &out);
        /* the space the SPM encoder put in front of the text (the word marker of WPM) belongs to
         * the first piece */
        if (st == AK_OK && i == 0 && (flags & AK_TOK_STRIP_SPACE) && out.n > before && out.v[before] == ' ' &&
            (((t->kind == AK_TOKENIZER_SPM || t->kind == AK_TOKENIZER_UGM) && t->add_space_prefix) ||
             t->kind == AK_TOKENIZER_WPM))
            skip = 1;
    }
    if (st == AK_OK) {
        *len = out.n - skip;
        if (*len > cap) st = AK_FAIL(AK_ERR_INVALID_ARG, "%zu bytes do not fit in %zu", *len, cap);
        else if (*len) memcpy(buf, out.v + skip, *len);
    }
    free(out.v);
    return st;
}
