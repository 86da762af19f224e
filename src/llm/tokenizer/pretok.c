/* Pre-tokenizers of byte-level BPE: split text into words before merging.
 *
 * Instead of a regex engine, each pattern is a hand-written matcher over code points and
 * their Unicode categories (from utf8proc). A split pass runs one matcher over every
 * current segment, leftmost match first; text between matches stays a word of its own,
 * which is how llama.cpp applies a list of regexes.
 *
 *   gpt-2:  's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 *   falcon: [\p{P}\$\+<=>\^~\|`]+   then the gpt-2 pattern   then [0-9][0-9][0-9]   */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "core/check.h"
#include "llm/tokenizer/tokenizer.h"

enum { F_LETTER = 1, F_NUMBER = 2, F_PUNCT = 4, F_SPACE = 8, F_ASSIGNED = 16 };

/* Unicode's White_Space property (what \s means in these patterns). */
static int is_space(int32_t c) {
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
           c == 0x205F || c == 0x3000;
}

static uint8_t flags_of(int32_t c) {
    utf8proc_category_t cat = utf8proc_category(c);
    uint8_t f = is_space(c) ? F_SPACE : 0;
    if (cat != UTF8PROC_CATEGORY_CN) f |= F_ASSIGNED;
    if (cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO) f |= F_LETTER;
    if (cat >= UTF8PROC_CATEGORY_ND && cat <= UTF8PROC_CATEGORY_NO) f |= F_NUMBER;
    if (cat >= UTF8PROC_CATEGORY_PC && cat <= UTF8PROC_CATEGORY_PO) f |= F_PUNCT;
    return f;
}

typedef struct text_cps {
    int32_t *cp;
    uint8_t *fl;
    size_t *off; /* byte offset of each code point, n + 1 entries */
    size_t n;
} text_cps;

/* A matcher returns the length of its match at `pos` (0: none) within [pos, end). */
typedef size_t (*matcher)(const text_cps *t, size_t pos, size_t end);

static size_t run_of(const text_cps *t, size_t p, size_t end, uint8_t want) {
    while (p < end && (t->fl[p] & want)) p++;
    return p;
}

static size_t match_contraction(const text_cps *t, size_t pos, size_t end) {
    if (t->cp[pos] != '\'' || pos + 1 >= end) return 0;
    int32_t a = t->cp[pos + 1];
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if (pos + 2 >= end) return 0;
    int32_t b = t->cp[pos + 2];
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
}

static int is_other(uint8_t f) { return !(f & (F_SPACE | F_LETTER | F_NUMBER)) && (f & F_ASSIGNED); }

static size_t match_gpt2(const text_cps *t, size_t pos, size_t end) {
    size_t m = match_contraction(t, pos, end);
    if (m) return m;
    /* " ?X+": an optional single space, then a run of one class */
    size_t p = pos + (t->cp[pos] == ' ' && pos + 1 < end);
    uint8_t f = t->fl[p];
    if (f & F_LETTER) return run_of(t, p, end, F_LETTER) - pos;
    if (f & F_NUMBER) return run_of(t, p, end, F_NUMBER) - pos;
    if (is_other(f)) {
        while (p < end && is_other(t->fl[p])) p++;
        return p - pos;
    }
    size_t ws = run_of(t, pos, end, F_SPACE) - pos;
    if (ws > 1 && pos + ws < end) return ws - 1; /* \s+(?!\S): leave the last space to the word */
    if (ws > 0) return ws;
    return 1; /* nothing matched (an unassigned code point): a word of its own */
}

static int falcon_punct(const text_cps *t, size_t p) {
    int32_t c = t->cp[p];
    return (t->fl[p] & F_PUNCT) || (c < 0x80 && c > 0 && strchr("$+<=>^~|`", (int)c));
}

static size_t match_falcon_punct(const text_cps *t, size_t pos, size_t end) {
    size_t p = pos;
    while (p < end && falcon_punct(t, p)) p++;
    return p - pos;
}

static size_t match_three_digits(const text_cps *t, size_t pos, size_t end) {
    if (pos + 3 > end) return 0;
    for (size_t i = pos; i < pos + 3; i++)
        if (t->cp[i] < '0' || t->cp[i] > '9') return 0;
    return 3;
}

/* Segments are [start, end) pairs of code point indices. */
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

static ak_status split_pass(const text_cps *t, const segs *in, matcher m, segs *out) {
    out->n = 0;
    for (size_t i = 0; i < in->n; i++) {
        size_t pos = in->v[2 * i], end = in->v[2 * i + 1], gap = pos;
        while (pos < end) {
            size_t k = m(t, pos, end);
            if (!k) {
                pos++;
                continue;
            }
            if (gap < pos) AK_CHECK(seg_push(out, gap, pos));
            AK_CHECK(seg_push(out, pos, pos + k));
            pos += k;
            gap = pos;
        }
        if (gap < end) AK_CHECK(seg_push(out, gap, end));
    }
    return AK_OK;
}

static ak_status decode_cps(const char *text, size_t len, text_cps *t) {
    t->cp = malloc((len + 1) * sizeof *t->cp);
    t->fl = malloc(len + 1);
    t->off = malloc((len + 1) * sizeof *t->off);
    if (!t->cp || !t->fl || !t->off) return AK_FAIL(AK_ERR_NO_MEMORY, "code points of %zu bytes", len);
    size_t n = 0;
    for (size_t i = 0; i < len;) {
        utf8proc_int32_t c;
        utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)text + i, (utf8proc_ssize_t)(len - i), &c);
        if (k <= 0) { /* invalid UTF-8: one byte, shown as U+FFFD */
            c = 0xFFFD;
            k = 1;
        }
        t->cp[n] = c;
        t->fl[n] = flags_of(c);
        t->off[n++] = i;
        i += (size_t)k;
    }
    t->off[n] = len;
    t->fl[n] = 0; /* a sentinel: matchers may peek one past a segment's end */
    t->cp[n] = -1;
    t->n = n;
    return AK_OK;
}

ak_status ak__pretokenize(ak_pretok pre, const char *text, size_t len, size_t **bounds, size_t *n_words) {
    text_cps t = {0};
    segs a = {0}, b = {0};
    ak_status st;
    *bounds = NULL;
    *n_words = 0;
    AK_CHECK_GOTO(st, decode_cps(text, len, &t));
    AK_CHECK_GOTO(st, seg_push(&a, 0, t.n));
    matcher passes[3] = {match_gpt2, NULL, NULL};
    if (pre == AK_PRETOK_FALCON) {
        passes[0] = match_falcon_punct;
        passes[1] = match_gpt2;
        passes[2] = match_three_digits;
    }
    for (int p = 0; p < 3 && passes[p]; p++) {
        AK_CHECK_GOTO(st, split_pass(&t, &a, passes[p], &b));
        segs tmp = a;
        a = b;
        b = tmp;
    }
    for (size_t i = 0; i < 2 * a.n; i++) a.v[i] = t.off[a.v[i]]; /* code points → bytes */
    *bounds = a.v;
    *n_words = a.n;
    a.v = NULL;
fail:
    free(a.v);
    free(b.v);
    free(t.cp);
    free(t.fl);
    free(t.off);
    return st;
}
