/* JSON Schema `pattern` → a GBNF expression for the inside of a JSON string.
 *
 * The regular expression (ECMA-262 syntax, as JSON Schema uses) is translated construct by
 * construct: alternation, groups ((...), (?:...), (?<name>...)), the quantifiers * + ? {n}
 * {n,} {n,m} (lazy forms too: same language), literals, `.`, classes with ranges and
 * negation, and the escapes \d \w \s \D \W \S \t \n \r \f \v \0 \xHH \uHHHH and escaped
 * punctuation. A pattern matches anywhere in the string (it is a search), so a side
 * without its anchor (^ at the start, $ at the end of a top-level branch) gets any JSON
 * characters around it.
 *
 * Every character set is written as JSON text: plain characters as a GBNF class, and `"`,
 * `\` and control characters as their JSON escapes, so the output stays a valid JSON
 * string. Where validators read a construct differently the grammar keeps to what both
 * accept: \d, \w and \s generate ASCII digits, word characters and whitespace (ECMA's
 * sets; Python's `re` has Unicode ones that contain them), and the negated \D \W \S, and
 * negated classes holding them, generate printable ASCII only. Backreferences,
 * lookaround, word boundaries, \p{...}, and anchors anywhere else are refused by name. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "llm/grammar/json_pattern.h"

#define MAX_REPEAT 10000
#define MAX_NESTING 64

typedef struct cprange {
    uint32_t lo, hi;
} cprange;

typedef struct cpset {
    cprange r[256];
    int n;
} cpset;

typedef struct rx {
    const char *start, *p, *end;
    const char *any_char; /* the GBNF rule of one JSON string character */
    sbuf *o;
    int depth;
    ak_status st;
} rx;

static ak_status rx_fail(rx *x, const char *what) {
    if (x->st == AK_OK)
        x->st = AK_FAIL(AK_ERR_UNSUPPORTED, "json schema: pattern: %s (at offset %td)", what, x->p - x->start);
    return x->st;
}

/* ---- code point sets ------------------------------------------------------------------- */

static void set_add(rx *x, cpset *s, uint32_t lo, uint32_t hi) {
    if (lo > hi) {
        rx_fail(x, "a class range out of order");
        return;
    }
    if (s->n == (int)(sizeof s->r / sizeof s->r[0])) {
        rx_fail(x, "a class with more than 256 ranges");
        return;
    }
    s->r[s->n++] = (cprange){lo, hi};
}

static int cmp_range(const void *a, const void *b) {
    const cprange *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static void set_normalize(cpset *s) {
    qsort(s->r, (size_t)s->n, sizeof s->r[0], cmp_range);
    int k = 0;
    for (int i = 0; i < s->n; ++i) {
        if (k && s->r[i].lo <= s->r[k - 1].hi + 1) {
            if (s->r[i].hi > s->r[k - 1].hi) s->r[k - 1].hi = s->r[i].hi;
        } else {
            s->r[k++] = s->r[i];
        }
    }
    s->n = k;
}

/* universe minus s (both normalized) */
static void set_complement(rx *x, const cpset *universe, const cpset *s, cpset *out) {
    out->n = 0;
    for (int u = 0; u < universe->n; ++u) {
        uint32_t lo = universe->r[u].lo, hi = universe->r[u].hi;
        for (int i = 0; i < s->n && lo <= hi; ++i) {
            if (s->r[i].hi < lo || s->r[i].lo > hi) continue;
            if (s->r[i].lo > lo) set_add(x, out, lo, s->r[i].lo - 1);
            lo = s->r[i].hi + 1;
        }
        if (lo <= hi) set_add(x, out, lo, hi);
    }
}

enum { SH_DIGIT, SH_WORD, SH_SPACE };

static void add_shorthand(rx *x, cpset *s, int which) {
    if (which == SH_DIGIT) set_add(x, s, '0', '9');
    if (which == SH_WORD) set_add(x, s, '0', '9'), set_add(x, s, 'A', 'Z'), set_add(x, s, 'a', 'z'), set_add(x, s, '_', '_');
    if (which == SH_SPACE) set_add(x, s, '\t', '\r'), set_add(x, s, ' ', ' ');
}

/* printable ASCII and its whitespace: the universe of negated shorthands */
static void ascii_universe(rx *x, cpset *u) {
    u->n = 0;
    set_add(x, u, '\t', '\r'), set_add(x, u, ' ', '~');
}

/* every character but NUL and the surrogates: the universe of `.` and negated classes */
static void unicode_universe(rx *x, cpset *u) {
    u->n = 0;
    set_add(x, u, 1, 0xD7FF), set_add(x, u, 0xE000, 0x10FFFF);
}

/* ---- writing a set as JSON string text -------------------------------------------------- */

static void class_char(sbuf *o, uint32_t cp) {
    if ((cp >= '0' && cp <= '9') || (cp >= 'A' && cp <= 'Z') || (cp >= 'a' && cp <= 'z')) sb_printf(o, "%c", (char)cp);
    else if (cp < 0x80) sb_printf(o, "\\x%02X", cp);
    else if (cp < 0x10000) sb_printf(o, "\\u%04X", cp);
    else sb_printf(o, "\\U%08X", cp);
}

static void json_escape_of(sbuf *o, uint32_t cp) {
    static const char short_escapes[] = "\b" "b" "\t" "t" "\n" "n" "\f" "f" "\r" "r";
    if (cp == '"') sb_puts(o, "\"\\\\\\\"\"");
    else if (cp == '\\') sb_puts(o, "\"\\\\\\\\\"");
    else {
        for (const char *e = short_escapes; *e; e += 2)
            if ((uint32_t)(unsigned char)e[0] == cp) {
                sb_printf(o, "\"\\\\%c\"", e[1]);
                return;
            }
        sb_printf(o, "\"\\\\u%04X\"", cp);
    }
}

/* s (normalized) as alternatives: a class of plain characters, then each character JSON
 * writes escaped. */
static void emit_set(rx *x, const cpset *s) {
    if (s->n == 0) {
        rx_fail(x, "a class no character matches");
        return;
    }
    cpset special = {.n = 0}, plain_universe = {.n = 0}, plain;
    set_add(x, &plain_universe, 0x20, 0x21), set_add(x, &plain_universe, 0x23, 0x5B);
    set_add(x, &plain_universe, 0x5D, 0xD7FF), set_add(x, &plain_universe, 0xE000, 0x10FFFF);
    cpset outside; /* the characters JSON escapes */
    set_complement(x, &plain_universe, s, &outside); /* plain characters not in s */
    set_complement(x, &plain_universe, &outside, &plain);
    for (int i = 0; i < s->n; ++i)
        for (uint32_t cp = s->r[i].lo; cp <= s->r[i].hi && cp < 0x20; ++cp) set_add(x, &special, cp, cp);
    for (int i = 0; i < s->n; ++i) {
        if (s->r[i].lo <= '"' && '"' <= s->r[i].hi) set_add(x, &special, '"', '"');
        if (s->r[i].lo <= '\\' && '\\' <= s->r[i].hi) set_add(x, &special, '\\', '\\');
    }
    sb_puts(x->o, "(");
    int first = 1;
    if (plain.n) {
        sb_puts(x->o, "[");
        for (int i = 0; i < plain.n; ++i) {
            class_char(x->o, plain.r[i].lo);
            if (plain.r[i].hi > plain.r[i].lo) sb_puts(x->o, "-"), class_char(x->o, plain.r[i].hi);
        }
        sb_puts(x->o, "]");
        first = 0;
    }
    for (int i = 0; i < special.n; ++i) {
        if (!first) sb_puts(x->o, " | ");
        json_escape_of(x->o, special.r[i].lo);
        first = 0;
    }
    sb_puts(x->o, ")");
}

/* ---- the parser ------------------------------------------------------------------------- */

static int at(const rx *x, char c) { return x->p < x->end && *x->p == c; }

static uint32_t utf8_next(rx *x) {
    const unsigned char *p = (const unsigned char *)x->p;
    size_t left = (size_t)(x->end - x->p);
    uint32_t cp = p[0];
    int n = cp < 0x80 ? 1 : cp >= 0xF0 ? 4 : cp >= 0xE0 ? 3 : cp >= 0xC0 ? 2 : 0;
    if (n == 0 || (size_t)n > left) {
        rx_fail(x, "invalid UTF-8");
        x->p = x->end;
        return 0;
    }
    if (n > 1) cp &= 0x3Fu >> (n - 1);
    for (int i = 1; i < n; ++i) cp = cp << 6 | (p[i] & 0x3Fu);
    x->p += n;
    return cp;
}

static int hex_digits(rx *x, int n, uint32_t *out) {
    uint32_t v = 0;
    for (int i = 0; i < n; ++i) {
        if (x->p >= x->end) return 0;
        char c = *x->p++;
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return 0;
        v = v << 4 | (uint32_t)d;
    }
    *out = v;
    return 1;
}

/* After a backslash: adds the escape's characters to s. *shorthand gets 1 for \d\w\s,
 * -1 for \D\W\S (their sets are then in s already). */
static void parse_escape(rx *x, cpset *s, int in_class, int *shorthand) {
    *shorthand = 0;
    if (x->p >= x->end) {
        rx_fail(x, "a pattern ending in a backslash");
        return;
    }
    char c = *x->p++;
    static const char shorthands[] = "dwsDWS";
    const char *sh = c ? strchr(shorthands, c) : NULL;
    if (sh) {
        int which = (int)(sh - shorthands) % 3;
        if (sh - shorthands < 3) {
            add_shorthand(x, s, which), *shorthand = 1;
        } else {
            cpset pos = {.n = 0}, u;
            add_shorthand(x, &pos, which), set_normalize(&pos), ascii_universe(x, &u);
            cpset neg;
            set_complement(x, &u, &pos, &neg);
            for (int i = 0; i < neg.n; ++i) set_add(x, s, neg.r[i].lo, neg.r[i].hi);
            *shorthand = -1;
        }
        return;
    }
    uint32_t control = c == 't' ? '\t' : c == 'n' ? '\n' : c == 'r' ? '\r' : c == 'f' ? '\f' : c == 'v' ? '\v' : 0;
    if (control) {
        set_add(x, s, control, control);
        return;
    }
    if (c == '0') {
        rx_fail(x, "\\0 (NUL is never generated)");
        return;
    }
    uint32_t v;
    if (c == 'x' || c == 'u') {
        if (!hex_digits(x, c == 'x' ? 2 : 4, &v)) rx_fail(x, c == 'x' ? "\\x without two hex digits" : "\\u without four hex digits");
        else if (v == 0 || (v >= 0xD800 && v <= 0xDFFF)) rx_fail(x, "\\u of NUL or a surrogate");
        else set_add(x, s, v, v);
        return;
    }
    if (c == 'b' && in_class) {
        set_add(x, s, 8, 8);
        return;
    }
    if (c == 'b' || c == 'B') rx_fail(x, "a word boundary (\\b, \\B)");
    else if (c >= '1' && c <= '9') rx_fail(x, "a backreference");
    else if (c == 'k') rx_fail(x, "a named backreference (\\k)");
    else if (c == 'p' || c == 'P') rx_fail(x, "a Unicode property escape (\\p, \\P)");
    else if (c == 'c') rx_fail(x, "a control escape (\\c)");
    else if ((unsigned char)c < 0x80 && !((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))) set_add(x, s, (uint32_t)c, (uint32_t)c);
    else rx_fail(x, "an unknown escape");
}

/* One class member (a character or an escape); *shorthand as parse_escape. */
static uint32_t class_atom(rx *x, cpset *s, int *shorthand, int *is_char) {
    *shorthand = 0, *is_char = 0;
    if (at(x, '\\')) {
        ++x->p;
        cpset one = {.n = 0};
        parse_escape(x, &one, 1, shorthand);
        for (int i = 0; i < one.n; ++i) set_add(x, s, one.r[i].lo, one.r[i].hi);
        *is_char = !*shorthand && one.n == 1 && one.r[0].lo == one.r[0].hi;
        return *is_char ? one.r[0].lo : 0;
    }
    uint32_t cp = utf8_next(x);
    set_add(x, s, cp, cp);
    *is_char = 1;
    return cp;
}

static void parse_class(rx *x) {
    int negated = at(x, '^');
    if (negated) ++x->p;
    cpset s = {.n = 0};
    int any_shorthand = 0;
    if (at(x, ']')) { /* ECMA: [] matches nothing, [^] anything; Python reads ] as a member */
        rx_fail(x, "an empty class ([] or [^])");
        return;
    }
    while (x->st == AK_OK && x->p < x->end && !at(x, ']')) {
        int sh, is_char;
        uint32_t lo = class_atom(x, &s, &sh, &is_char);
        any_shorthand |= sh != 0;
        if (is_char && at(x, '-') && x->p + 1 < x->end && x->p[1] != ']') {
            ++x->p;
            cpset hi_set = {.n = 0};
            int sh2, is_char2;
            uint32_t hi = class_atom(x, &hi_set, &sh2, &is_char2);
            if (!is_char2) {
                rx_fail(x, "a class range ending in a shorthand");
                return;
            }
            s.n--; /* the range replaces its first character */
            set_add(x, &s, lo, hi);
        }
    }
    if (!at(x, ']')) {
        rx_fail(x, "an unterminated class");
        return;
    }
    ++x->p;
    set_normalize(&s);
    if (!negated) {
        emit_set(x, &s);
        return;
    }
    cpset u, out;
    if (any_shorthand) ascii_universe(x, &u);
    else unicode_universe(x, &u);
    set_complement(x, &u, &s, &out);
    emit_set(x, &out);
}

static void parse_alternatives(rx *x, int top);

static void parse_group(rx *x) {
    if (at(x, '?')) {
        if (x->p + 1 < x->end && x->p[1] == ':') x->p += 2;
        else if (x->p + 2 < x->end && x->p[1] == '<' && x->p[2] != '=' && x->p[2] != '!') {
            const char *close = memchr(x->p, '>', (size_t)(x->end - x->p));
            if (!close) {
                rx_fail(x, "an unterminated group name");
                return;
            }
            x->p = close + 1;
        } else {
            rx_fail(x, "lookaround or a group flag ((?=, (?!, (?<=, (?<!, (?i)");
            return;
        }
    }
    if (++x->depth > MAX_NESTING) {
        rx_fail(x, "groups nested deeper than 64");
        return;
    }
    sb_puts(x->o, "(");
    parse_alternatives(x, 0);
    sb_puts(x->o, ")");
    x->depth--;
    if (!at(x, ')')) rx_fail(x, "an unclosed group");
    else ++x->p;
}

static void parse_atom(rx *x) {
    char c = *x->p;
    if (c == '(') {
        ++x->p;
        parse_group(x);
    } else if (c == '[') {
        ++x->p;
        parse_class(x);
    } else if (c == '.') {
        ++x->p;
        cpset u, breaks = {.n = 0}, dot;
        unicode_universe(x, &u);
        set_add(x, &breaks, '\n', '\n'), set_add(x, &breaks, '\r', '\r'), set_add(x, &breaks, 0x2028, 0x2029);
        set_complement(x, &u, &breaks, &dot);
        emit_set(x, &dot);
    } else if (c == '\\') {
        ++x->p;
        cpset s = {.n = 0};
        int sh;
        parse_escape(x, &s, 0, &sh);
        set_normalize(&s);
        if (x->st == AK_OK) emit_set(x, &s);
    } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        rx_fail(x, "a quantifier with nothing to repeat");
    } else if (c == '^' || c == '$') {
        rx_fail(x, "an anchor (^, $) inside the pattern (only at the start and end of a top-level branch)");
    } else {
        cpset s = {.n = 0};
        uint32_t cp = utf8_next(x);
        set_add(x, &s, cp, cp);
        if (x->st == AK_OK) emit_set(x, &s);
    }
}

static int read_count(rx *x, long *v) {
    if (x->p >= x->end || *x->p < '0' || *x->p > '9') return 0;
    long n = 0;
    while (x->p < x->end && *x->p >= '0' && *x->p <= '9') {
        n = n * 10 + (*x->p++ - '0');
        if (n > MAX_REPEAT) return rx_fail(x, "a repetition count above 10000"), 0;
    }
    *v = n;
    return 1;
}

static void parse_quantifier(rx *x) {
    char c = *x->p;
    if (c == '*' || c == '+' || c == '?') {
        ++x->p;
        sb_printf(x->o, "%c", c);
    } else {
        ++x->p; /* '{' */
        long lo, hi = -1;
        if (!read_count(x, &lo)) {
            rx_fail(x, "a '{' that is no {n}, {n,} or {n,m} quantifier");
            return;
        }
        int open = 0;
        if (at(x, ',')) {
            ++x->p, open = 1;
            if (!at(x, '}') && !read_count(x, &hi)) rx_fail(x, "a malformed {n,m} quantifier");
        }
        if (!at(x, '}')) {
            rx_fail(x, "an unclosed {n,m} quantifier");
            return;
        }
        ++x->p;
        if (hi >= 0 && hi < lo) rx_fail(x, "a {n,m} quantifier with m below n");
        if (!open) sb_printf(x->o, "{%ld}", lo);
        else if (hi < 0) sb_printf(x->o, "{%ld,}", lo);
        else sb_printf(x->o, "{%ld,%ld}", lo, hi);
    }
    if (at(x, '?')) ++x->p; /* lazy: the same strings */
    if (at(x, '*') || at(x, '+') || at(x, '?') || at(x, '{')) rx_fail(x, "a quantifier on a quantifier");
}

/* A branch: atoms with their quantifiers, up to '|' or ')' (or the end). At the top level a
 * leading ^ and a trailing $ anchor it; a side without its anchor takes any characters. */
static void parse_branch(rx *x, int top) {
    int anchored_start = top && at(x, '^'), anchored_end = 0;
    if (anchored_start) ++x->p;
    if (top && !anchored_start) sb_printf(x->o, "%s* ", x->any_char);
    sb_puts(x->o, "(\"\"");
    while (x->st == AK_OK && x->p < x->end && !at(x, '|') && !at(x, ')')) {
        if (top && at(x, '$') && (x->p + 1 == x->end || x->p[1] == '|')) {
            ++x->p, anchored_end = 1;
            break;
        }
        sb_puts(x->o, " (");
        parse_atom(x);
        sb_puts(x->o, ")");
        if (x->st == AK_OK && x->p < x->end && strchr("*+?{", *x->p)) parse_quantifier(x);
    }
    sb_puts(x->o, ")");
    if (top && !anchored_end) sb_printf(x->o, " %s*", x->any_char);
}

static void parse_alternatives(rx *x, int top) {
    parse_branch(x, top);
    while (x->st == AK_OK && at(x, '|')) {
        ++x->p;
        sb_puts(x->o, " | ");
        parse_branch(x, top);
    }
}

ak_status ak__json_pattern_expr(const char *pattern, size_t len, const char *any_char, sbuf *o) {
    rx x = {.start = pattern, .p = pattern, .end = pattern + len, .any_char = any_char, .o = o, .st = AK_OK};
    sb_puts(o, "\"\\\"\" (");
    parse_alternatives(&x, 1);
    if (x.st == AK_OK && x.p < x.end) rx_fail(&x, "an unmatched ')'");
    sb_puts(o, ") \"\\\"\"");
    return x.st;
}
