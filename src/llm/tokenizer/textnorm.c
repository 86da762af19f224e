/* Text transformations of a Hugging Face tokenizer.json that run on each run of plain text
 * before it is split into words: the normalizers (NFC/NFD/NFKC/NFKD, Lowercase, Strip,
 * Replace, Prepend, Precompiled) and the text-rewriting half of two pre-tokenizers placed first in the
 * chain (Metaspace: spaces → the replacement, and its prefix; ByteLevel's add_prefix_space).
 * The splitting half of every pre-tokenizer is an expression of pretok.c.
 * Where transformers.js (the reference the tests compare with) and the Rust library differ,
 * this follows transformers.js: Lowercase is JavaScript's toLowerCase, Strip trims
 * JavaScript's whitespace. Precompiled (SentencePiece's map) replaces the longest matching
 * prefix at each position, as SentencePiece and llama.cpp do (transformers.js has no such
 * map; the Rust library looks up grapheme clusters, which differs only where a longer
 * sequence than one cluster or a partial cluster is in the map). */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "core/check.h"
#include "llm/tokenizer/tokenizer.h"

typedef struct norm_step {
    int kind;          /* AK_NORM_* */
    char *a, *b;       /* Replace: pattern text, content; Prepend/Metaspace: the string */
    pcre2_code *rx;    /* Replace */
    int flags;         /* Strip: AK_STRIP_*; Metaspace: AK_PREPEND_* */
    ak__charsmap map;  /* Precompiled */
} norm_step;

struct ak__textnorm {
    norm_step *steps;
    size_t n;
};

/* A growing output string. */
typedef struct sbuf {
    char *v;
    size_t n, cap;
} sbuf;

static ak_status sb_add(sbuf *s, const void *p, size_t n) {
    if (s->n + n + 1 > s->cap) {
        size_t cap = (s->n + n + 1) * 2;
        char *v = realloc(s->v, cap);
        if (!v) return AK_FAIL(AK_ERR_NO_MEMORY, "normalized text");
        s->v = v;
        s->cap = cap;
    }
    memcpy(s->v + s->n, p, n);
    s->n += n;
    s->v[s->n] = '\0';
    return AK_OK;
}

static ak_status sb_cp(sbuf *s, int32_t c) {
    utf8proc_uint8_t u[4];
    return sb_add(s, u, (size_t)utf8proc_encode_char(c, u));
}

ak_status ak__textnorm_new(ak__textnorm **out) {
    *out = calloc(1, sizeof **out);
    return *out ? AK_OK : AK_FAIL(AK_ERR_NO_MEMORY, "normalizer");
}

void ak__textnorm_free(ak__textnorm *t) {
    if (!t) return;
    for (size_t i = 0; i < t->n; i++) {
        free(t->steps[i].a);
        free(t->steps[i].b);
        pcre2_code_free(t->steps[i].rx);
        ak__charsmap_free(&t->steps[i].map);
    }
    free(t->steps);
    free(t);
}

size_t ak__textnorm_count(const ak__textnorm *t) { return t ? t->n : 0; }

/* JavaScript's \s: Unicode whitespace (its \d and \w stay ASCII, so PCRE2 runs without UCP
 * and \s is spelled out). */
#define JS_SPACE_CLASS "\\t\\n\\x0B\\f\\r \\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}" \
                       "\\x{2029}\\x{202F}\\x{205F}\\x{3000}\\x{FEFF}"

/* The pattern with \s and \S written as JavaScript means them; *out NULL when \S stands
 * inside a class (not expressible that way: refused). */
static ak_status js_pattern(const char *rx, char **out) {
    size_t n = strlen(rx), cap = n * sizeof JS_SPACE_CLASS + 1;
    char *o = malloc(cap), *w = o;
    if (!o) return AK_FAIL(AK_ERR_NO_MEMORY, "normalizer pattern");
    int in_class = 0;
    for (size_t i = 0; i < n; i++) {
        char c = rx[i];
        if (c == '\\' && i + 1 < n && (rx[i + 1] == 's' || rx[i + 1] == 'S')) {
            int neg = rx[++i] == 'S';
            if (neg && in_class) {
                free(o);
                return AK_FAIL(AK_ERR_UNSUPPORTED, "normalizer Replace pattern '%.80s': \\S "
                               "inside a character class is not supported", rx);
            }
            w += sprintf(w, in_class ? "%s" : neg ? "[^%s]" : "[%s]", JS_SPACE_CLASS);
            continue;
        }
        *w++ = c;
        if (c == '\\' && i + 1 < n) *w++ = rx[++i];
        else if (c == '[' && !in_class) in_class = 1;
        else if (c == ']' && in_class) in_class = 0;
    }
    *w = '\0';
    *out = o;
    return AK_OK;
}

static ak_status compile_replace(norm_step *s, int literal) {
    int err;
    PCRE2_SIZE at;
    uint32_t opts = PCRE2_UTF | PCRE2_MATCH_INVALID_UTF | (literal ? PCRE2_LITERAL : 0);
    char *rx = s->a;
    if (!literal) AK_CHECK(js_pattern(s->a, &rx));
    s->rx = pcre2_compile((PCRE2_SPTR)rx, PCRE2_ZERO_TERMINATED, opts, &err, &at, NULL);
    if (rx != s->a) free(rx);
    if (s->rx) return AK_OK;
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    return AK_FAIL(AK_ERR_UNSUPPORTED, "normalizer Replace pattern '%.80s' does not compile at "
                   "offset %zu: %s", s->a, (size_t)at, (const char *)msg);
}

ak_status ak__textnorm_add(ak__textnorm *t, int kind, const char *a, const char *b, int flags) {
    norm_step *v = realloc(t->steps, (t->n + 1) * sizeof *v);
    if (!v) return AK_FAIL(AK_ERR_NO_MEMORY, "normalizer");
    t->steps = v;
    norm_step *s = &t->steps[t->n];
    memset(s, 0, sizeof *s);
    s->kind = kind;
    s->flags = flags;
    if ((a && !(s->a = strdup(a))) || (b && !(s->b = strdup(b)))) {
        free(s->a);
        free(s->b);
        return AK_FAIL(AK_ERR_NO_MEMORY, "normalizer");
    }
    t->n++; /* counted now so that free() releases it on a failed compile */
    if (kind == AK_NORM_REPLACE_REGEX || kind == AK_NORM_REPLACE_STRING)
        return compile_replace(s, kind == AK_NORM_REPLACE_STRING);
    return AK_OK;
}

ak_status ak__textnorm_add_charsmap(ak__textnorm *t, const uint8_t *blob, size_t n) {
    AK_CHECK(ak__textnorm_add(t, AK_NORM_PRECOMPILED, NULL, NULL, 0));
    return ak__charsmap_parse(blob, n, &t->steps[t->n - 1].map);
}

/* ---- the steps ------------------------------------------------------------------------ */

static ak_status unicode_form(const sbuf *in, int kind, sbuf *out) {
    int flags = UTF8PROC_STABLE;
    flags |= kind == AK_NORM_NFC || kind == AK_NORM_NFKC ? UTF8PROC_COMPOSE : UTF8PROC_DECOMPOSE;
    if (kind == AK_NORM_NFKC || kind == AK_NORM_NFKD) flags |= UTF8PROC_COMPAT;
    utf8proc_uint8_t *r = NULL;
    utf8proc_ssize_t n = utf8proc_map((const utf8proc_uint8_t *)in->v, (utf8proc_ssize_t)in->n, &r,
                                      (utf8proc_option_t)flags);
    if (n < 0) return sb_add(out, in->v, in->n); /* not UTF-8: left as it is */
    ak_status st = sb_add(out, r, (size_t)n);
    free(r);
    return st;
}

static int is_cased(int32_t c) {
    utf8proc_category_t k = utf8proc_category(c);
    return k == UTF8PROC_CATEGORY_LU || k == UTF8PROC_CATEGORY_LL || k == UTF8PROC_CATEGORY_LT ||
           utf8proc_tolower(c) != c || utf8proc_toupper(c) != c;
}

static int is_case_ignorable(int32_t c) {
    utf8proc_category_t k = utf8proc_category(c);
    return k == UTF8PROC_CATEGORY_MN || k == UTF8PROC_CATEGORY_ME || k == UTF8PROC_CATEGORY_CF ||
           k == UTF8PROC_CATEGORY_LM || k == UTF8PROC_CATEGORY_SK || c == '\'' || c == '.' ||
           c == ':' || c == 0xB7 || c == 0x2019;
}

/* Decodes `s` into code points (invalid bytes: -1 each, kept as bytes). */
static ak_status decode_cps(const sbuf *s, int32_t **cps, size_t *n) {
    *cps = malloc((s->n + 1) * sizeof **cps);
    if (!*cps) return AK_FAIL(AK_ERR_NO_MEMORY, "text");
    *n = 0;
    for (size_t i = 0; i < s->n;) {
        utf8proc_int32_t c;
        utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)s->v + i,
                                              (utf8proc_ssize_t)(s->n - i), &c);
        if (k <= 0) {
            (*cps)[(*n)++] = -1 - (int32_t)(unsigned char)s->v[i++];
            continue;
        }
        (*cps)[(*n)++] = c;
        i += (size_t)k;
    }
    return AK_OK;
}

/* Σ is ς at the end of a word: after a cased letter, not before one (case-ignorable
 * characters in between are skipped), as JavaScript's toLowerCase does. */
static int final_sigma(const int32_t *c, size_t n, size_t i) {
    size_t j = i;
    while (j > 0 && c[j - 1] >= 0 && is_case_ignorable(c[j - 1])) j--;
    if (j == 0 || c[j - 1] < 0 || !is_cased(c[j - 1])) return 0;
    for (j = i + 1; j < n && c[j] >= 0 && is_case_ignorable(c[j]); j++) {}
    return !(j < n && c[j] >= 0 && is_cased(c[j]));
}

static ak_status lowercase(const sbuf *in, sbuf *out) {
    int32_t *c;
    size_t n;
    AK_CHECK(decode_cps(in, &c, &n));
    ak_status st = AK_OK;
    for (size_t i = 0; i < n && st == AK_OK; i++) {
        if (c[i] < 0) {
            char b = (char)(-1 - c[i]);
            st = sb_add(out, &b, 1);
        } else if (c[i] == 0x130) { /* İ → i + combining dot (SpecialCasing) */
            st = sb_add(out, "i\xcc\x87", 3);
        } else if (c[i] == 0x3A3) {
            st = sb_cp(out, final_sigma(c, n, i) ? 0x3C2 : 0x3C3);
        } else {
            st = sb_cp(out, utf8proc_tolower(c[i]));
        }
    }
    free(c);
    return st;
}

/* JavaScript's whitespace (what String.prototype.trim removes). */
static int js_space(int32_t c) {
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
           c == 0x205F || c == 0x3000 || c == 0xFEFF;
}

static ak_status strip(const sbuf *in, int flags, sbuf *out) {
    int32_t *c;
    size_t n, a = 0, b;
    AK_CHECK(decode_cps(in, &c, &n));
    b = n;
    if (flags & AK_STRIP_LEFT)
        while (a < b && c[a] >= 0 && js_space(c[a])) a++;
    if (flags & AK_STRIP_RIGHT)
        while (b > a && c[b - 1] >= 0 && js_space(c[b - 1])) b--;
    ak_status st = AK_OK;
    for (size_t i = a; i < b && st == AK_OK; i++) {
        char byte = (char)(-1 - c[i]);
        st = c[i] < 0 ? sb_add(out, &byte, 1) : sb_cp(out, c[i]);
    }
    free(c);
    return st;
}

/* Every match (empty ones too, as JavaScript's replaceAll) becomes the content, taken
 * literally. */
static ak_status replace(const norm_step *s, const sbuf *in, sbuf *out) {
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(s->rx, NULL);
    if (!md) return AK_FAIL(AK_ERR_NO_MEMORY, "regex match data");
    ak_status st = AK_OK;
    size_t pos = 0, copied = 0, clen = strlen(s->b);
    while (st == AK_OK && pos <= in->n) {
        int rc = pcre2_match(s->rx, (PCRE2_SPTR)in->v, in->n, pos, 0, md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            st = AK_FAIL(AK_ERR_INTERNAL, "normalizer Replace '%.60s': match error %d", s->a, rc);
            break;
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        st = sb_add(out, in->v + copied, ov[0] - copied);
        if (st == AK_OK) st = sb_add(out, s->b, clen);
        copied = ov[1];
        if (ov[1] > ov[0]) {
            pos = ov[1];
        } else { /* an empty match: step over one character */
            if (ov[0] >= in->n) break;
            pos = ov[0] + 1;
            while (pos < in->n && ((unsigned char)in->v[pos] & 0xC0) == 0x80) pos++;
            st = st == AK_OK ? sb_add(out, in->v + copied, pos - copied) : st;
            copied = pos;
        }
    }
    if (st == AK_OK && copied < in->n) st = sb_add(out, in->v + copied, in->n - copied);
    pcre2_match_data_free(md);
    return st;
}

static int starts_with(const sbuf *s, const char *p) {
    size_t n = strlen(p);
    return s->n >= n && memcmp(s->v, p, n) == 0;
}

/* Metaspace: every " " becomes the replacement, which is also put in front (scheme
 * "always", or "first" on the text that starts the input) unless the text starts with it. */
static ak_status metaspace(const norm_step *s, const sbuf *in, int first, sbuf *out) {
    int prepend = s->flags == AK_PREPEND_ALWAYS || (s->flags == AK_PREPEND_FIRST && first);
    size_t rlen = strlen(s->a);
    ak_status st = AK_OK;
    for (size_t i = 0; i < in->n && st == AK_OK; i++)
        st = in->v[i] == ' ' ? sb_add(out, s->a, rlen) : sb_add(out, in->v + i, 1);
    /* empty text stays empty (no word to mark: WhitespaceSplit may have removed them all) */
    if (st != AK_OK || !prepend || in->n == 0 || starts_with(out, s->a)) return st;
    sbuf tmp = {0};
    st = sb_add(&tmp, s->a, rlen);
    if (st == AK_OK) st = sb_add(&tmp, out->v ? out->v : "", out->n);
    free(out->v);
    *out = tmp;
    return st;
}

static ak_status run_step(const norm_step *s, const sbuf *in, int first, sbuf *out) {
    switch (s->kind) {
    case AK_NORM_NFC: case AK_NORM_NFD: case AK_NORM_NFKC: case AK_NORM_NFKD:
        return unicode_form(in, s->kind, out);
    case AK_NORM_LOWERCASE: return lowercase(in, out);
    case AK_NORM_STRIP: return strip(in, s->flags, out);
    case AK_NORM_REPLACE_REGEX: case AK_NORM_REPLACE_STRING: return replace(s, in, out);
    case AK_NORM_PREPEND: /* as Hugging Face's: nothing in front of an empty text */
        if (in->n) AK_CHECK(sb_add(out, s->a, strlen(s->a)));
        return sb_add(out, in->v, in->n);
    case AK_NORM_METASPACE: return metaspace(s, in, first, out);
    case AK_NORM_PRECOMPILED: {
        char *mapped;
        size_t n;
        AK_CHECK(ak__charsmap_apply(&s->map, in->v, in->n, &mapped, &n));
        ak_status st = sb_add(out, mapped, n);
        free(mapped);
        return st;
    }
    case AK_NORM_PREFIX_SPACE:
        if (!(in->n && in->v[0] == ' ')) AK_CHECK(sb_add(out, " ", 1));
        return sb_add(out, in->v, in->n);
    default: return AK_FAIL(AK_ERR_INTERNAL, "normalizer step %d", s->kind);
    }
}

ak_status ak__textnorm_apply(const ak__textnorm *t, const char *text, size_t len, int first,
                             char **out, size_t *out_len) {
    sbuf cur = {0};
    *out = NULL;
    *out_len = 0;
    AK_CHECK(sb_add(&cur, text, len));
    for (size_t i = 0; i < t->n; i++) {
        sbuf next = {0};
        ak_status st = sb_add(&next, "", 0);
        if (st == AK_OK) st = run_step(&t->steps[i], &cur, first, &next);
        free(cur.v);
        cur = next;
        if (st != AK_OK) {
            free(cur.v);
            return st;
        }
    }
    *out = cur.v;
    *out_len = cur.n;
    return AK_OK;
}
