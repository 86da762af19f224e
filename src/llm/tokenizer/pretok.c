/* Pre-tokenizers of byte-level BPE: split text into words before merging, by a list of
 * regular expressions run with PCRE2 (UTF + Unicode properties, JIT-compiled when the
 * library can). As llama.cpp does, each expression in turn splits every current piece:
 * its matches become pieces, and so does the text between them. An expression only sees
 * the piece it splits (lookahead stops at the piece's end). The lists come from the
 * pre-tokenizer table (pretok_table.c) or from a tokenizer.json's Split expressions. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "llm/tokenizer/tokenizer.h"

struct ak__pretok {
    size_t n;
    pcre2_code **code;
    char **source; /* the expressions as given (kept for writing them back out) */
    uint8_t *matches_only; /* per expression: text between matches is dropped */
};

void ak__pretok_free(ak__pretok *p) {
    if (!p) return;
    for (size_t i = 0; i < p->n; i++) {
        pcre2_code_free(p->code[i]);
        free(p->source[i]);
    }
    free(p->code);
    free(p->source);
    free(p->matches_only);
    free(p);
}

static ak_status compile_one(const char *rx, pcre2_code **out) {
    int err;
    PCRE2_SIZE at;
    uint32_t opts = PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF;
    *out = pcre2_compile((PCRE2_SPTR)rx, PCRE2_ZERO_TERMINATED, opts, &err, &at, NULL);
    if (!*out) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof msg);
        return AK_FAIL(AK_ERR_UNSUPPORTED, "pre-tokenizer expression '%.80s' does not compile "
                       "at offset %zu: %s", rx, (size_t)at, (const char *)msg);
    }
    (void)pcre2_jit_compile(*out, PCRE2_JIT_COMPLETE); /* without JIT the interpreter runs */
    return AK_OK;
}

ak_status ak__pretok_compile(const char *const *regexes, const uint8_t *matches_only, size_t n,
                             ak__pretok **out) {
    *out = NULL;
    if (n == 0) return AK_FAIL(AK_ERR_INVALID_ARG, "a pre-tokenizer without expressions");
    ak__pretok *p = calloc(1, sizeof *p);
    if (!p) return AK_FAIL(AK_ERR_NO_MEMORY, "pre-tokenizer");
    p->code = calloc(n, sizeof *p->code);
    p->source = calloc(n, sizeof *p->source);
    p->matches_only = calloc(n, 1);
    ak_status st = AK_OK;
    if (!p->code || !p->source || !p->matches_only) st = AK_FAIL(AK_ERR_NO_MEMORY, "pre-tokenizer");
    for (size_t i = 0; st == AK_OK && matches_only && i < n; i++) p->matches_only[i] = matches_only[i];
    for (size_t i = 0; st == AK_OK && i < n; i++) {
        p->n = i + 1;
        p->source[i] = strdup(regexes[i]);
        if (!p->source[i]) st = AK_FAIL(AK_ERR_NO_MEMORY, "pre-tokenizer");
        else st = compile_one(regexes[i], &p->code[i]);
    }
    if (st != AK_OK) {
        ak__pretok_free(p);
        return st;
    }
    *out = p;
    return AK_OK;
}

size_t ak__pretok_count(const ak__pretok *p) { return p ? p->n : 0; }

const char *ak__pretok_source(const ak__pretok *p, size_t i) { return p->source[i]; }

int ak__pretok_matches_only(const ak__pretok *p, size_t i) { return p->matches_only[i]; }

/* ---- splitting ----------------------------------------------------------------------- */

/* Pieces are [start, end) byte pairs. */
typedef struct segs {
    size_t *v;
    size_t n, cap; /* n counts pairs */
} segs;

static ak_status seg_push(segs *s, size_t a, size_t b) {
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 32;
        size_t *v = realloc(s->v, 2 * cap * sizeof *v);
        if (!v) return AK_FAIL(AK_ERR_NO_MEMORY, "word list");
        s->v = v;
        s->cap = cap;
    }
    s->v[2 * s->n] = a;
    s->v[2 * s->n + 1] = b;
    s->n++;
    return AK_OK;
}

/* The next match in `piece` from `from`: 1 with [*ms, *me), 0 when none. A JIT that runs
 * out of stack (very long runs of one class) is retried by the interpreter. */
static ak_status next_match(pcre2_code *code, const char *rx, const char *piece, size_t len,
                            size_t from, pcre2_match_data *md, size_t *ms, size_t *me, int *found) {
    int rc = pcre2_match(code, (PCRE2_SPTR)piece, len, from, 0, md, NULL);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
        rc = pcre2_match(code, (PCRE2_SPTR)piece, len, from, PCRE2_NO_JIT, md, NULL);
    *found = rc >= 0;
    if (rc == PCRE2_ERROR_NOMATCH) return AK_OK;
    if (rc < 0) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(rc, msg, sizeof msg);
        return AK_FAIL(AK_ERR_INTERNAL, "pre-tokenizer expression '%.60s': %s", rx, (const char *)msg);
    }
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
    *ms = ov[0];
    *me = ov[1];
    return AK_OK;
}

static size_t next_char(const char *s, size_t len, size_t i) {
    i++;
    while (i < len && ((unsigned char)s[i] & 0xC0) == 0x80) i++;
    return i;
}

/* One expression over one piece [a, b) of `text`: matches and the gaps between them (the
 * gaps dropped when `matches_only`: a tokenizer.json Split inverted with behavior Removed).
 * An empty match only cuts the piece there. */
static ak_status split_piece(pcre2_code *code, const char *rx, int matches_only, const char *text,
                             size_t a, size_t b, pcre2_match_data *md, segs *out) {
    const char *piece = text + a;
    size_t len = b - a, pos = 0, gap = 0;
    while (pos <= len) {
        size_t ms, me;
        int found;
        AK_CHECK(next_match(code, rx, piece, len, pos, md, &ms, &me, &found));
        if (!found) break;
        if (ms > gap && !matches_only) AK_CHECK(seg_push(out, a + gap, a + ms));
        if (me > ms) {
            AK_CHECK(seg_push(out, a + ms, a + me));
            gap = pos = me;
        } else {
            gap = ms;
            if (ms >= len) break;
            pos = next_char(piece, len, ms);
        }
    }
    if (gap < len && !matches_only) AK_CHECK(seg_push(out, a + gap, b));
    return AK_OK;
}

ak_status ak__pretokenize(const ak__pretok *p, const char *text, size_t len, size_t **bounds,
                          size_t *n_words) {
    segs a = {0}, b = {0};
    ak_status st = AK_OK;
    pcre2_match_data *md = pcre2_match_data_create(16, NULL);
    *bounds = NULL;
    *n_words = 0;
    if (!md) return AK_FAIL(AK_ERR_NO_MEMORY, "regex match data");
    if (len) AK_CHECK_GOTO(st, seg_push(&a, 0, len));
    for (size_t r = 0; r < p->n; r++) {
        b.n = 0;
        for (size_t i = 0; i < a.n; i++)
            AK_CHECK_GOTO(st, split_piece(p->code[r], p->source[r], p->matches_only[r], text, a.v[2 * i],
                                          a.v[2 * i + 1], md, &b));
        segs tmp = a;
        a = b;
        b = tmp;
    }
    *bounds = a.v;
    *n_words = a.n;
    a.v = NULL;
fail:
    pcre2_match_data_free(md);
    free(a.v);
    free(b.v);
    return st;
}
