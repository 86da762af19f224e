/* GBNF text → the compiled rule elements (grammar.h).
 *
 * The format is llama.cpp's: `name ::= alternatives` rules (one per line; newlines are
 * allowed after `|` and inside parentheses), literals "..." and character classes [...]
 * ([^...] negated, a-z ranges) with the escapes \n \r \t \\ \" \[ \] \- \xHH \uHHHH
 * \UHHHHHHHH, `.` (any code point), rule references, ( groups ), postfix * + ? {m} {m,}
 * {m,n}, and # comments. Groups and repetitions become generated rules named after the
 * rule they appear in. After parsing: every referenced rule must be defined, `root` must
 * exist, and no rule may reach itself before consuming a character (left recursion, which
 * the pushdown state could not expand). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "llm/grammar/grammar.h"
#include "llm/strmap.h"

typedef struct elems {
    ak__gelem *v;
    uint32_t n, cap;
} elems;

typedef struct rule {
    char *name;
    elems body;
    int defined;
    size_t pos; /* where it was defined or first referenced (the line is computed on error) */
} rule;

typedef struct parser {
    const char *s;
    size_t n, pos;
    rule *rules;
    uint32_t n_rules, cap_rules;
    ak_strmap names; /* rule name -> index: a scan per lookup made repetitions quadratic */
    uint32_t depth; /* nesting of groups (bounded, the parser recurses) */
    uint32_t total_elems;
} parser;

#define MAX_NESTING 256
#define MAX_REPEAT 10000

static uint32_t line_of(const parser *p, size_t pos) {
    uint32_t line = 1;
    for (size_t i = 0; i < pos && i < p->n; ++i) line += p->s[i] == '\n';
    return line;
}

#define SYNTAX(p, ...) syntax_error(p, __VA_ARGS__)
static ak_status syntax_error(const parser *p, const char *what) {
    return AK_FAIL(AK_ERR_INVALID_ARG, "grammar: line %u: %s", line_of(p, p->pos), what);
}

static ak_status push(parser *p, elems *e, uint32_t type, uint32_t value) {
    if (p->total_elems >= AK__GRAMMAR_MAX_ELEMS)
        return AK_FAIL(AK_ERR_INVALID_ARG, "grammar: more than %u elements", AK__GRAMMAR_MAX_ELEMS);
    if (e->n == e->cap) {
        uint32_t cap = e->cap ? e->cap * 2 : 16;
        ak__gelem *v = realloc(e->v, cap * sizeof *v);
        if (!v) return AK_FAIL(AK_ERR_NO_MEMORY, "grammar: out of memory");
        e->v = v, e->cap = cap;
    }
    e->v[e->n++] = (ak__gelem){type, value};
    p->total_elems++;
    return AK_OK;
}

static ak_status append(parser *p, elems *dst, const ak__gelem *src, uint32_t n) {
    for (uint32_t i = 0; i < n; ++i) AK_CHECK(push(p, dst, src[i].type, src[i].value));
    return AK_OK;
}

/* ---- rule table ------------------------------------------------------------------------- */

static int is_word_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_';
}

/* Makes room in the name index for one more rule (doubling it, rules re-inserted). */
static ak_status names_reserve(parser *p) {
    if (p->names.slots && p->names.count < p->names.limit) return AK_OK;
    ak_strmap bigger;
    AK_CHECK(ak_strmap_init(&bigger, p->names.limit ? p->names.limit * 2 : 64));
    for (uint32_t i = 0; i < p->n_rules; ++i)
        ak_strmap_put(&bigger, p->rules[i].name, strlen(p->rules[i].name), i, 0);
    ak_strmap_free(&p->names);
    p->names = bigger;
    return AK_OK;
}

static ak_status rule_index(parser *p, const char *name, size_t len, uint32_t *out) {
    int64_t known = ak_strmap_get(&p->names, name, len);
    if (known >= 0) {
        *out = (uint32_t)known;
        return AK_OK;
    }
    if (p->n_rules >= AK__GRAMMAR_MAX_RULES)
        return AK_FAIL(AK_ERR_INVALID_ARG, "grammar: more than %u rules", AK__GRAMMAR_MAX_RULES);
    AK_CHECK(names_reserve(p));
    if (p->n_rules == p->cap_rules) {
        uint32_t cap = p->cap_rules ? p->cap_rules * 2 : 32;
        rule *r = realloc(p->rules, cap * sizeof *r);
        if (!r) return AK_FAIL(AK_ERR_NO_MEMORY, "grammar: out of memory");
        p->rules = r, p->cap_rules = cap;
    }
    rule *r = &p->rules[p->n_rules];
    memset(r, 0, sizeof *r);
    r->name = malloc(len + 1);
    if (!r->name) return AK_FAIL(AK_ERR_NO_MEMORY, "grammar: out of memory");
    memcpy(r->name, name, len);
    r->name[len] = 0;
    r->pos = p->pos;
    ak_strmap_put(&p->names, r->name, len, p->n_rules, 0); /* the key is the rule's own copy */
    *out = p->n_rules++;
    return AK_OK;
}

/* A new rule named parent_N for a group or repetition. */
static ak_status generated_rule(parser *p, uint32_t parent, uint32_t *out) {
    char name[96];
    for (uint32_t k = p->n_rules;; ++k) {
        int n = snprintf(name, sizeof name, "%.60s_%u", p->rules[parent].name, k);
        if (ak_strmap_get(&p->names, name, (size_t)n) < 0) {
            AK_CHECK(rule_index(p, name, (size_t)n, out));
            p->rules[*out].defined = 1;
            return AK_OK;
        }
    }
}

/* ---- lexing ----------------------------------------------------------------------------- */

static void skip_space(parser *p, int newline_ok) {
    while (p->pos < p->n) {
        char c = p->s[p->pos];
        if (c == '#') {
            while (p->pos < p->n && p->s[p->pos] != '\n' && p->s[p->pos] != '\r') p->pos++;
        } else if (c == ' ' || c == '\t' || (newline_ok && (c == '\n' || c == '\r'))) {
            p->pos++;
        } else {
            break;
        }
    }
}

static int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* One UTF-8 code point of the text (invalid bytes are errors). */
static ak_status read_utf8(parser *p, uint32_t *cp) {
    const unsigned char *s = (const unsigned char *)p->s;
    unsigned char c = s[p->pos];
    int extra = c < 0x80 ? 0 : (c >> 5) == 6 ? 1 : (c >> 4) == 14 ? 2 : (c >> 3) == 30 ? 3 : -1;
    if (extra < 0 || p->pos + (size_t)extra >= p->n + (extra == 0 ? 1 : 0)) {
        if (extra != 0) return SYNTAX(p, "invalid UTF-8 in the grammar text");
    }
    uint32_t v = extra == 0 ? c : extra == 1 ? (c & 0x1Fu) : extra == 2 ? (c & 0x0Fu) : (c & 0x07u);
    for (int i = 1; i <= extra; ++i) {
        if (p->pos + (size_t)i >= p->n || (s[p->pos + (size_t)i] & 0xC0) != 0x80)
            return SYNTAX(p, "invalid UTF-8 in the grammar text");
        v = (v << 6) | (s[p->pos + (size_t)i] & 0x3Fu);
    }
    p->pos += (size_t)extra + 1;
    *cp = v;
    return AK_OK;
}

/* A character of a literal or class, escapes decoded. */
static ak_status read_char(parser *p, uint32_t *cp) {
    if (p->pos >= p->n) return SYNTAX(p, "unexpected end of the grammar text");
    if (p->s[p->pos] != '\\') return read_utf8(p, cp);
    if (p->pos + 1 >= p->n) return SYNTAX(p, "unexpected end after '\\'");
    char e = p->s[p->pos + 1];
    p->pos += 2;
    int digits = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
    if (digits) {
        uint32_t v = 0;
        for (int i = 0; i < digits; ++i) {
            int h = p->pos < p->n ? hex_value(p->s[p->pos]) : -1;
            if (h < 0) return SYNTAX(p, "bad hexadecimal escape");
            v = (v << 4) | (uint32_t)h;
            p->pos++;
        }
        if (v > 0x10FFFF) return SYNTAX(p, "escape beyond U+10FFFF");
        *cp = v;
        return AK_OK;
    }
    switch (e) {
    case 'n': *cp = '\n'; return AK_OK;
    case 'r': *cp = '\r'; return AK_OK;
    case 't': *cp = '\t'; return AK_OK;
    case '\\': case '"': case '[': case ']': case '-': case '\'': case '/': case '.': case '^':
        *cp = (uint32_t)(unsigned char)e;
        return AK_OK;
    default: {
        char msg[64];
        snprintf(msg, sizeof msg, "unknown escape '\\%c'", e);
        return SYNTAX(p, msg);
    }
    }
}

static ak_status read_uint(parser *p, uint32_t *out) {
    size_t start = p->pos;
    uint64_t v = 0;
    while (p->pos < p->n && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') {
        v = v * 10 + (uint64_t)(p->s[p->pos] - '0');
        if (v > MAX_REPEAT) return SYNTAX(p, "repetition count above 10000");
        p->pos++;
    }
    if (p->pos == start) return SYNTAX(p, "expected a number in {m,n}");
    *out = (uint32_t)v;
    return AK_OK;
}

/* ---- sequences -------------------------------------------------------------------------- */

static ak_status parse_alternates(parser *p, uint32_t rule_id, elems *out);

/* Rewrites the last item (elements [item, out->n)) repeated {min, max} (max = UINT32_MAX:
 * unbounded) as references to generated rules. */
static ak_status repeat_item(parser *p, uint32_t parent, elems *out, uint32_t item, uint32_t min,
                             uint32_t max) {
    uint32_t n_item = out->n - item;
    ak__gelem *copy = malloc((n_item ? n_item : 1) * sizeof *copy);
    if (!copy) return AK_FAIL(AK_ERR_NO_MEMORY, "grammar: out of memory");
    if (n_item) memcpy(copy, out->v + item, n_item * sizeof *copy); /* an empty item: v may be NULL */
    p->total_elems -= n_item;
    out->n = item;
    ak_status st = AK_OK;
    for (uint32_t i = 0; i < min && st == AK_OK; ++i) st = append(p, out, copy, n_item);
    if (st == AK_OK && max == UINT32_MAX) {
        /* rep ::= item rep | (empty) */
        uint32_t rep;
        st = generated_rule(p, parent, &rep);
        elems body = {0};
        if (st == AK_OK) st = append(p, &body, copy, n_item);
        if (st == AK_OK) st = push(p, &body, AK__GE_REF, rep);
        if (st == AK_OK) st = push(p, &body, AK__GE_ALT, 0);
        if (st == AK_OK) st = push(p, &body, AK__GE_END, 0);
        if (st == AK_OK) p->rules[rep].body = body;
        else free(body.v);
        if (st == AK_OK) st = push(p, out, AK__GE_REF, rep);
    } else if (st == AK_OK && max > min) {
        /* opt_k ::= item opt_{k-1} | (empty), nested max - min times */
        uint32_t next = UINT32_MAX;
        for (uint32_t k = 0; k < max - min && st == AK_OK; ++k) {
            uint32_t opt;
            st = generated_rule(p, parent, &opt);
            elems body = {0};
            if (st == AK_OK) st = append(p, &body, copy, n_item);
            if (st == AK_OK && next != UINT32_MAX) st = push(p, &body, AK__GE_REF, next);
            if (st == AK_OK) st = push(p, &body, AK__GE_ALT, 0);
            if (st == AK_OK) st = push(p, &body, AK__GE_END, 0);
            if (st == AK_OK) p->rules[opt].body = body;
            else free(body.v);
            next = opt;
        }
        if (st == AK_OK) st = push(p, out, AK__GE_REF, next);
    }
    free(copy);
    return st;
}

static ak_status parse_literal(parser *p, elems *out) {
    size_t start = p->pos++; /* " */
    while (p->pos < p->n && p->s[p->pos] != '"') {
        uint32_t cp;
        AK_CHECK(read_char(p, &cp));
        AK_CHECK(push(p, out, AK__GE_CHAR, cp));
    }
    if (p->pos >= p->n) {
        p->pos = start; /* name the line where it began */
        return SYNTAX(p, "unterminated string literal");
    }
    p->pos++;
    return AK_OK;
}

static ak_status parse_class(parser *p, elems *out) {
    size_t start = p->pos++; /* [ */
    uint32_t start_type = AK__GE_CHAR;
    if (p->pos < p->n && p->s[p->pos] == '^') start_type = AK__GE_CHAR_NOT, p->pos++;
    uint32_t first = out->n;
    while (p->pos < p->n && p->s[p->pos] != ']') {
        uint32_t cp;
        AK_CHECK(read_char(p, &cp));
        AK_CHECK(push(p, out, out->n == first ? start_type : AK__GE_CHAR_ALT, cp));
        if (p->pos + 1 < p->n && p->s[p->pos] == '-' && p->s[p->pos + 1] != ']') {
            p->pos++;
            uint32_t hi;
            AK_CHECK(read_char(p, &hi));
            if (hi < cp) return SYNTAX(p, "character range with its end below its start");
            AK_CHECK(push(p, out, AK__GE_RNG_UPPER, hi));
        }
    }
    if (p->pos >= p->n) {
        p->pos = start;
        return SYNTAX(p, "unterminated character class");
    }
    p->pos++;
    /* [] matches nothing and [^] anything: llama.cpp accepts both; keep them expressible */
    if (out->n == first) {
        if (start_type == AK__GE_CHAR_NOT) return push(p, out, AK__GE_ANY, 0);
        return SYNTAX(p, "empty character class []");
    }
    return AK_OK;
}

static ak_status parse_sequence(parser *p, uint32_t rule_id, elems *out, int nested) {
    uint32_t last_item = out->n;
    int have_item = 0;
    while (p->pos < p->n) {
        char c = p->s[p->pos];
        uint32_t item_start = out->n;
        if (c == '"') {
            AK_CHECK(parse_literal(p, out));
        } else if (c == '[') {
            AK_CHECK(parse_class(p, out));
        } else if (c == '.') {
            p->pos++;
            AK_CHECK(push(p, out, AK__GE_ANY, 0));
        } else if (is_word_char(c)) {
            size_t start = p->pos;
            while (p->pos < p->n && is_word_char(p->s[p->pos])) p->pos++;
            uint32_t ref;
            AK_CHECK(rule_index(p, p->s + start, p->pos - start, &ref));
            AK_CHECK(push(p, out, AK__GE_REF, ref));
        } else if (c == '(') {
            if (++p->depth > MAX_NESTING) return SYNTAX(p, "groups nested deeper than 256");
            p->pos++;
            skip_space(p, 1);
            uint32_t sub;
            AK_CHECK(generated_rule(p, rule_id, &sub));
            elems body = {0};
            ak_status st = parse_alternates(p, rule_id, &body);
            if (st != AK_OK) {
                free(body.v);
                return st;
            }
            p->rules[sub].body = body;
            if (p->pos >= p->n || p->s[p->pos] != ')') return SYNTAX(p, "expected ')'");
            p->pos++;
            p->depth--;
            AK_CHECK(push(p, out, AK__GE_REF, sub));
        } else if (c == '*' || c == '+' || c == '?' || c == '{') {
            if (!have_item) return SYNTAX(p, "repetition operator without a preceding item");
            uint32_t min = 0, max = UINT32_MAX;
            p->pos++;
            if (c == '+') min = 1;
            else if (c == '?') max = 1;
            else if (c == '{') {
                skip_space(p, 0);
                AK_CHECK(read_uint(p, &min));
                skip_space(p, 0);
                max = min;
                if (p->pos < p->n && p->s[p->pos] == ',') {
                    p->pos++;
                    skip_space(p, 0);
                    max = UINT32_MAX;
                    if (p->pos < p->n && p->s[p->pos] != '}') AK_CHECK(read_uint(p, &max));
                    skip_space(p, 0);
                }
                if (p->pos >= p->n || p->s[p->pos] != '}') return SYNTAX(p, "expected '}'");
                p->pos++;
                if (max < min) return SYNTAX(p, "repetition {m,n} with n < m");
            }
            AK_CHECK(repeat_item(p, rule_id, out, last_item, min, max));
            have_item = 0; /* x** is refused like llama.cpp does */
            skip_space(p, nested);
            continue;
        } else {
            break;
        }
        last_item = item_start;
        have_item = 1;
        skip_space(p, nested);
    }
    return AK_OK;
}

static ak_status parse_alternates(parser *p, uint32_t rule_id, elems *out) {
    AK_CHECK(parse_sequence(p, rule_id, out, p->depth > 0));
    while (p->pos < p->n && p->s[p->pos] == '|') {
        p->pos++;
        skip_space(p, 1);
        AK_CHECK(push(p, out, AK__GE_ALT, 0));
        AK_CHECK(parse_sequence(p, rule_id, out, p->depth > 0));
    }
    return push(p, out, AK__GE_END, 0);
}

static ak_status parse_rule(parser *p) {
    size_t start = p->pos;
    while (p->pos < p->n && is_word_char(p->s[p->pos])) p->pos++;
    if (p->pos == start) return SYNTAX(p, "expected a rule name");
    uint32_t id;
    AK_CHECK(rule_index(p, p->s + start, p->pos - start, &id));
    skip_space(p, 0);
    if (p->n - p->pos < 3 || memcmp(p->s + p->pos, "::=", 3) != 0) return SYNTAX(p, "expected '::='");
    p->pos += 3;
    skip_space(p, 1);
    if (p->rules[id].defined) {
        char msg[160];
        snprintf(msg, sizeof msg, "rule '%.100s' defined twice", p->rules[id].name);
        return SYNTAX(p, msg);
    }
    p->rules[id].defined = 1;
    p->rules[id].pos = start;
    elems body = {0};
    ak_status st = parse_alternates(p, id, &body);
    if (st != AK_OK) {
        free(body.v);
        return st;
    }
    p->rules[id].body = body;
    if (p->pos < p->n && p->s[p->pos] == '\r') p->pos++;
    if (p->pos < p->n && p->s[p->pos] != '\n') {
        if (p->s[p->pos] == ')') return SYNTAX(p, "unmatched ')'");
        return SYNTAX(p, "expected the end of the line");
    }
    skip_space(p, 1);
    return AK_OK;
}

/* ---- checks ----------------------------------------------------------------------------- */

/* nullable[r]: rule r can derive the empty string (fixed point). */
static void compute_nullable(const ak__gbnf *g, uint8_t *nullable) {
    memset(nullable, 0, g->n_rules);
    for (int changed = 1; changed;) {
        changed = 0;
        for (uint32_t r = 0; r < g->n_rules; ++r) {
            if (nullable[r]) continue;
            const ak__gelem *e = g->elems + g->rule_start[r];
            int alt_ok = 1;
            for (;; ++e) {
                if (e->type == AK__GE_END || e->type == AK__GE_ALT) {
                    if (alt_ok) {
                        nullable[r] = 1, changed = 1;
                        break;
                    }
                    if (e->type == AK__GE_END) break;
                    alt_ok = 1;
                } else if (e->type == AK__GE_REF) {
                    if (!nullable[e->value]) alt_ok = 0;
                } else if (e->type != AK__GE_RNG_UPPER && e->type != AK__GE_CHAR_ALT) {
                    alt_ok = 0;
                }
            }
        }
    }
}

/* The rules each rule may start with (a reference preceded only by nullable ones):
 * edges of the left-recursion graph, as a CSR list. */
static ak_status start_edges(const ak__gbnf *g, const uint8_t *nullable, uint32_t **off_out,
                             uint32_t **dst_out) {
    uint32_t *off = calloc((size_t)g->n_rules + 1, sizeof *off);
    uint32_t *dst = malloc(((size_t)g->n_elems + 1) * sizeof *dst);
    if (!off || !dst) {
        free(off), free(dst);
        return AK_FAIL(AK_ERR_NO_MEMORY, "grammar: out of memory");
    }
    uint32_t n = 0;
    for (uint32_t r = 0; r < g->n_rules; ++r) {
        off[r] = n;
        int at_start = 1;
        for (const ak__gelem *e = g->elems + g->rule_start[r]; e->type != AK__GE_END; ++e) {
            if (e->type == AK__GE_ALT) at_start = 1;
            else if (e->type == AK__GE_REF) {
                if (at_start) dst[n++] = e->value;
                if (!nullable[e->value]) at_start = 0;
            } else if (e->type != AK__GE_RNG_UPPER && e->type != AK__GE_CHAR_ALT) at_start = 0;
        }
    }
    off[g->n_rules] = n;
    *off_out = off, *dst_out = dst;
    return AK_OK;
}

/* Depth-first search over the start edges; a back edge is left recursion. */
static ak_status check_left_recursion(const ak__gbnf *g, const uint8_t *nullable) {
    uint32_t n = g->n_rules, *off = NULL, *dst = NULL;
    AK_CHECK(start_edges(g, nullable, &off, &dst));
    uint8_t *color = calloc(n, 1); /* 0 new, 1 on the path, 2 done */
    uint32_t *stack = malloc(n * sizeof *stack), *cursor = malloc(n * sizeof *cursor);
    ak_status st = AK_OK;
    if (!color || !stack || !cursor) st = AK_FAIL(AK_ERR_NO_MEMORY, "grammar: out of memory");
    for (uint32_t r0 = 0; r0 < n && st == AK_OK; ++r0) {
        if (color[r0]) continue;
        uint32_t sp = 0;
        stack[sp] = r0, cursor[sp] = off[r0], sp++;
        color[r0] = 1;
        while (sp > 0 && st == AK_OK) {
            uint32_t r = stack[sp - 1];
            if (cursor[sp - 1] == off[r + 1]) {
                color[r] = 2;
                sp--;
                continue;
            }
            uint32_t next = dst[cursor[sp - 1]++];
            if (color[next] == 1)
                st = AK_FAIL(AK_ERR_INVALID_ARG,
                             "grammar: rule '%s' is left-recursive (it can reach itself before "
                             "consuming a character)",
                             g->rule_names[next]);
            else if (color[next] == 0) {
                color[next] = 1;
                stack[sp] = next, cursor[sp] = off[next], sp++;
            }
        }
    }
    free(color), free(stack), free(cursor), free(off), free(dst);
    return st;
}

static void free_parser(parser *p) {
    for (uint32_t i = 0; i < p->n_rules; ++i) free(p->rules[i].name), free(p->rules[i].body.v);
    free(p->rules);
    ak_strmap_free(&p->names);
}

void ak__gbnf_free(ak__gbnf *g) {
    if (!g) return;
    for (uint32_t i = 0; i < g->n_rules; ++i) free(g->rule_names[i]);
    free(g->rule_names), free(g->rule_start), free(g->elems);
    memset(g, 0, sizeof *g);
}

ak_status ak__gbnf_parse(const char *text, size_t len, ak__gbnf *out) {
    AK_ARG_CHECK(out != NULL && (text != NULL || len == 0), "grammar: NULL argument");
    memset(out, 0, sizeof *out);
    AK_ARG_CHECK(len <= AK__GRAMMAR_MAX_TEXT, "grammar: text of %zu bytes is above the limit of %u",
                 len, AK__GRAMMAR_MAX_TEXT);
    parser p = {.s = text, .n = len};
    ak_status st = AK_OK;
    skip_space(&p, 1);
    while (st == AK_OK && p.pos < p.n) st = parse_rule(&p);
    if (st == AK_OK && p.n_rules == 0) st = AK_FAIL(AK_ERR_INVALID_ARG, "grammar: empty (no rules)");
    for (uint32_t i = 0; st == AK_OK && i < p.n_rules; ++i)
        if (!p.rules[i].defined)
            st = AK_FAIL(AK_ERR_INVALID_ARG, "grammar: line %u: undefined rule '%s'", line_of(&p, p.rules[i].pos),
                         p.rules[i].name);
    uint32_t root = UINT32_MAX;
    for (uint32_t i = 0; st == AK_OK && i < p.n_rules; ++i)
        if (strcmp(p.rules[i].name, "root") == 0) root = i;
    if (st == AK_OK && root == UINT32_MAX) st = AK_FAIL(AK_ERR_INVALID_ARG, "grammar: no rule named 'root'");
    if (st != AK_OK) {
        free_parser(&p);
        return st;
    }
    /* concatenate the rule bodies */
    out->n_rules = p.n_rules;
    out->root = root;
    out->rule_start = malloc(p.n_rules * sizeof *out->rule_start);
    out->rule_names = calloc(p.n_rules, sizeof *out->rule_names);
    out->elems = malloc(((size_t)p.total_elems + 1) * sizeof *out->elems);
    if (!out->rule_start || !out->rule_names || !out->elems) {
        free_parser(&p);
        ak__gbnf_free(out);
        return AK_FAIL(AK_ERR_NO_MEMORY, "grammar: out of memory");
    }
    uint32_t k = 0;
    for (uint32_t i = 0; i < p.n_rules; ++i) {
        out->rule_start[i] = k;
        memcpy(out->elems + k, p.rules[i].body.v, p.rules[i].body.n * sizeof *out->elems);
        k += p.rules[i].body.n;
        out->rule_names[i] = p.rules[i].name;
        p.rules[i].name = NULL;
    }
    out->n_elems = k;
    free_parser(&p);
    uint8_t *nullable = malloc(out->n_rules);
    if (!nullable) {
        ak__gbnf_free(out);
        return AK_FAIL(AK_ERR_NO_MEMORY, "grammar: out of memory");
    }
    compute_nullable(out, nullable);
    st = check_left_recursion(out, nullable);
    free(nullable);
    if (st != AK_OK) ak__gbnf_free(out);
    return st;
}
