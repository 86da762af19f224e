/* Encoding: special tokens are cut out of the text first (llama.cpp's order: each special
 * token in turn, longest first, splits every remaining run of plain text), then each run of
 * plain text goes to the model's encoder. BOS/EOS and the SPM leading space are added here. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "core/check.h"
#include "llm/tokenizer/tokenizer.h"

/* A piece of the input: a special token (id >= 0) or plain text (id == -1). */
typedef struct fragment {
    int32_t id;
    size_t start, len;
} fragment;

typedef struct fragments {
    fragment *v;
    size_t n, cap;
} fragments;

static ak_status frag_push(fragments *f, int32_t id, size_t start, size_t len) {
    if (f->n == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 16;
        fragment *v = realloc(f->v, cap * sizeof *v);
        if (!v) return AK_FAIL(AK_ERR_NO_MEMORY, "text fragments");
        f->v = v;
        f->cap = cap;
    }
    f->v[f->n++] = (fragment){id, start, len};
    return AK_OK;
}

/* Splits every plain fragment of `in` at the occurrences of token `id` into `out`. */
static ak_status split_on(const char *text, const fragments *in, int32_t id, const char *tok,
                          size_t tlen, fragments *out) {
    out->n = 0;
    for (size_t i = 0; i < in->n; i++) {
        fragment f = in->v[i];
        if (f.id >= 0) {
            AK_CHECK(frag_push(out, f.id, f.start, f.len));
            continue;
        }
        size_t pos = f.start, end = f.start + f.len;
        while (pos < end) {
            const char *hit = memmem(text + pos, end - pos, tok, tlen);
            if (!hit) break;
            size_t at = (size_t)(hit - text);
            if (at > pos) AK_CHECK(frag_push(out, -1, pos, at - pos));
            AK_CHECK(frag_push(out, id, at, tlen));
            pos = at + tlen;
        }
        if (pos < end) AK_CHECK(frag_push(out, -1, pos, end - pos));
    }
    return AK_OK;
}

/* Control and unknown tokens are only recognized when asked; user-defined ones always. */
static ak_status partition(const ak_tokenizer *t, const char *text, size_t len, int parse_special,
                           fragments *a, fragments *b) {
    AK_CHECK(frag_push(a, -1, 0, len));
    for (size_t s = 0; s < t->n_specials; s++) {
        int32_t id = t->specials[s];
        uint8_t ty = t->types[id];
        if (!parse_special && ty != AK_TOKTYPE_USER_DEFINED) continue;
        size_t tlen;
        const char *tok = ak__tok_text(t, id, &tlen);
        if (!memmem(text, len, tok, tlen)) continue;
        AK_CHECK(split_on(text, a, id, tok, tlen, b));
        fragments tmp = *a;
        *a = *b;
        *b = tmp;
    }
    return AK_OK;
}

/* Unicode White_Space, the whitespace an added token with lstrip/rstrip absorbs. */
static int is_space_cp(int32_t c) {
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
           c == 0x205F || c == 0x3000;
}

/* Length of the whitespace run that starts (forward) or ends (!forward) `s[0, n)`. */
static size_t space_run(const char *s, size_t n, int forward) {
    size_t run = 0;
    while (run < n) {
        size_t at = forward ? run : n - run - 1;
        if (!forward)
            while (at > 0 && ((unsigned char)s[at] & 0xC0) == 0x80) at--;
        utf8proc_int32_t c;
        utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)s + at, (utf8proc_ssize_t)(n - at), &c);
        if (k <= 0 || !is_space_cp(c)) break;
        run += (size_t)k;
    }
    return run;
}

/* Added tokens with lstrip/rstrip (Hugging Face) absorb the whitespace before/after them:
 * the neighbouring text fragments are trimmed (an emptied one is then skipped). */
static void absorb_spaces(const ak_tokenizer *t, const char *text, fragments *f) {
    if (!t->strip) return;
    for (size_t i = 0; i < f->n; i++) {
        fragment *fr = &f->v[i];
        if (fr->id < 0) continue;
        uint8_t st = t->strip[fr->id];
        if ((st & AK_STRIP_LEFT) && i > 0 && f->v[i - 1].id < 0)
            f->v[i - 1].len -= space_run(text + f->v[i - 1].start, f->v[i - 1].len, 0);
        if ((st & AK_STRIP_RIGHT) && i + 1 < f->n && f->v[i + 1].id < 0) {
            size_t k = space_run(text + f->v[i + 1].start, f->v[i + 1].len, 1);
            f->v[i + 1].start += k;
            f->v[i + 1].len -= k;
        }
    }
}

/* SPM puts a space in front of plain text that starts the input or follows a special
 * token (SentencePiece's add_dummy_prefix), then escapes spaces as U+2581. */
static ak_status encode_spm_fragment(const ak_tokenizer *t, const char *text, size_t len,
                                     int prefix, ak_ids *out) {
    size_t spaces = prefix;
    for (size_t i = 0; i < len; i++) spaces += text[i] == ' ';
    char *buf = malloc(len + prefix + 2 * spaces + 1);
    if (!buf) return AK_FAIL(AK_ERR_NO_MEMORY, "text buffer");
    size_t n = 0;
    for (size_t i = 0; i < len + (size_t)prefix; i++) {
        char c = (size_t)prefix > i ? ' ' : text[i - (size_t)prefix];
        if (c == ' ') {
            memcpy(buf + n, "\xe2\x96\x81", 3);
            n += 3;
        } else {
            buf[n++] = c;
        }
    }
    ak_status st = ak__spm_encode(t, buf, n, out);
    free(buf);
    return st;
}

/* A run of byte-level BPE text, rewritten first by a tokenizer.json's normalizers (`first`:
 * the run starts the input), or put in NFC when the tokenizer says so (text that is not
 * valid UTF-8 cannot be normalized and is encoded as it is). */
static ak_status encode_bpe_fragment(const ak_tokenizer *t, const char *text, size_t len,
                                     int first, ak_ids *out) {
    if (t->norm) {
        char *norm;
        size_t n;
        AK_CHECK(ak__textnorm_apply(t->norm, text, len, first, &norm, &n));
        ak_status st = ak__bpe_encode(t, norm, n, out);
        free(norm);
        return st;
    }
    if (!t->nfc) return ak__bpe_encode(t, text, len, out);
    utf8proc_uint8_t *nfc = NULL;
    utf8proc_ssize_t n = utf8proc_map((const utf8proc_uint8_t *)text, (utf8proc_ssize_t)len, &nfc,
                                      UTF8PROC_STABLE | UTF8PROC_COMPOSE);
    if (n < 0) return ak__bpe_encode(t, text, len, out);
    ak_status st = ak__bpe_encode(t, (const char *)nfc, (size_t)n, out);
    free(nfc);
    return st;
}

/* A run of Unigram text. A GGUF vocabulary normalizes it itself (ugm.c); a tokenizer.json
 * one runs its normalizers and Metaspace rewriting, then its pre-tokenizer's split, and
 * each word goes through the lattice alone. */
static ak_status encode_ugm_fragment(const ak_tokenizer *t, const char *text, size_t len,
                                     int first, ak_ids *out) {
    if (!t->norm && !t->pre) return ak__ugm_encode(t, text, len, out);
    char *norm = NULL;
    size_t n = len, *bounds = NULL, n_words = 0;
    if (t->norm) AK_CHECK(ak__textnorm_apply(t->norm, text, len, first, &norm, &n));
    const char *s = norm ? norm : text;
    ak_status st = AK_OK;
    if (!t->pre) {
        st = ak__ugm_viterbi(t, s, n, out);
    } else {
        st = ak__pretokenize(t->pre, s, n, &bounds, &n_words);
        for (size_t w = 0; w < n_words && st == AK_OK; w++)
            st = ak__ugm_viterbi(t, s + bounds[2 * w], bounds[2 * w + 1] - bounds[2 * w], out);
    }
    free(bounds);
    free(norm);
    return st;
}

static ak_status encode_fragments(const ak_tokenizer *t, const char *text, const fragments *f,
                                  ak_ids *out) {
    int prev_special = 1; /* the start of the input counts as "after a special token" */
    for (size_t i = 0; i < f->n; i++) {
        const fragment *fr = &f->v[i];
        if (fr->id >= 0) {
            AK_CHECK(ak__ids_push(out, fr->id));
            prev_special = 1;
        } else if (fr->len == 0) {
            continue; /* all of it absorbed by an added token's lstrip/rstrip */
        } else if (t->kind == AK_TOKENIZER_SPM) {
            AK_CHECK(encode_spm_fragment(t, text + fr->start, fr->len,
                                         t->add_space_prefix && prev_special, out));
            prev_special = 0;
        } else if (t->kind == AK_TOKENIZER_UGM) {
            AK_CHECK(encode_ugm_fragment(t, text + fr->start, fr->len, fr->start == 0, out));
            prev_special = 0;
        } else {
            if (t->kind == AK_TOKENIZER_BPE)
                AK_CHECK(encode_bpe_fragment(t, text + fr->start, fr->len, fr->start == 0, out));
            else AK_CHECK(ak__wpm_encode(t, text + fr->start, fr->len, out));
            prev_special = 0;
        }
    }
    return AK_OK;
}

static ak_status encode_ids(const ak_tokenizer *t, const char *text, size_t len, unsigned flags,
                            ak_ids *out) {
    if ((flags & AK_TOK_ADD_SPECIAL) && t->add_bos && t->bos >= 0) AK_CHECK(ak__ids_push(out, t->bos));
    fragments a = {0}, b = {0};
    ak_status st = AK_OK;
    if (len > 0) {
        AK_CHECK_GOTO(st, partition(t, text, len, (flags & AK_TOK_PARSE_SPECIAL) != 0, &a, &b));
        absorb_spaces(t, text, &a);
        AK_CHECK_GOTO(st, encode_fragments(t, text, &a, out));
    }
    if ((flags & AK_TOK_ADD_SPECIAL) && t->add_eos && t->eos >= 0) AK_CHECK_GOTO(st, ak__ids_push(out, t->eos));
fail:
    free(a.v);
    free(b.v);
    return st;
}

ak_status ak_tokenizer_encode(const ak_tokenizer *t, const char *text, size_t len, unsigned flags,
                              int32_t *ids, size_t cap, size_t *n_ids) {
    AK_ARG_CHECK(t != NULL && n_ids != NULL, "tokenizer or n_ids is NULL");
    AK_ARG_CHECK(text != NULL || len == 0, "text is NULL");
    AK_ARG_CHECK(ids != NULL || cap == 0, "ids is NULL with cap %zu", cap);
    ak_ids out = {0};
    ak_status st = encode_ids(t, text, len, flags, &out);
    if (st == AK_OK) {
        *n_ids = out.n;
        if (out.n > cap) st = AK_FAIL(AK_ERR_INVALID_ARG, "%zu tokens do not fit in %zu", out.n, cap);
        else if (out.n) memcpy(ids, out.v, out.n * sizeof *ids);
    }
    free(out.v);
    return st;
}
