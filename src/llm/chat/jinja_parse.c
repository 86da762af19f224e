/* Lexer and parser of the Jinja interpreter: template text → token array → AST.
 *
 * The lexer reproduces Jinja2's whitespace rules as Hugging Face configures them:
 * newlines normalized to "\n", one trailing newline dropped, `{%-` / `-%}` stripping,
 * trim_blocks (the newline after a block or comment tag goes) and lstrip_blocks (spaces
 * and tabs before a block or comment tag on its own line go). The parser follows
 * Jinja2's operator precedence; anything outside the subset is refused by name. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "llm/chat/jinja.h"

#define MAX_NESTING 200 /* parser recursion: nested expressions and blocks */

/* ---- tokens -------------------------------------------------------------------------- */

typedef enum tok_kind {
    T_DATA, T_VAR_BEGIN, T_VAR_END, T_BLOCK_BEGIN, T_BLOCK_END, T_NAME, T_STRING, T_INT,
    T_FLOAT, T_OP, T_EOF
} tok_kind;

typedef struct token {
    tok_kind kind;
    int line;
    const char *s; /* T_DATA / T_STRING (decoded) / T_NAME / T_OP text, in the arena */
    size_t n;
    int64_t i;
    double f;
} token;

typedef struct lexer {
    jj_arena *ar;
    const char *src; /* normalized */
    size_t n, pos;
    int line, line_starting;
    token *toks;
    size_t n_toks, cap_toks;
} lexer;

static ak_status syntax(int line, const char *what) {
    return AK_FAIL(AK_ERR_INVALID_ARG, "chat template: line %d: %s", line, what);
}

static ak_status push_tok(lexer *L, tok_kind k, const char *s, size_t n) {
    if (L->n_toks == L->cap_toks) {
        size_t nc = L->cap_toks ? L->cap_toks * 2 : 256;
        token *nt = ak__jj_alloc(L->ar, nc * sizeof *nt);
        if (!nt) return AK_FAIL(AK_ERR_NO_MEMORY, "chat template: out of memory");
        if (L->n_toks) memcpy(nt, L->toks, L->n_toks * sizeof *nt);
        L->toks = nt;
        L->cap_toks = nc;
    }
    token *t = &L->toks[L->n_toks++];
    memset(t, 0, sizeof *t);
    t->kind = k;
    t->line = L->line;
    t->s = s;
    t->n = n;
    return AK_OK;
}

static int count_lines(const char *s, size_t n) {
    int k = 0;
    for (size_t i = 0; i < n; i++) k += s[i] == '\n';
    return k;
}

/* Length of the whitespace run at s[0..n) (Python's \s). */
static size_t space_run(const char *s, size_t n) {
    size_t i = 0, k;
    while (i < n && (k = ak__jj_space_at(s + i, n - i)) > 0) i += k;
    return i;
}

/* Text before a tag, after `-` stripping or lstrip_blocks. */
static ak_status emit_text(lexer *L, size_t from, size_t to, char sign, int is_block) {
    const char *s = L->src + from;
    size_t n = to - from, k;
    if (sign == '-') {
        while (n > 0 && (k = ak__jj_space_before(s, n)) > 0) n -= k;
    } else if (sign != '+' && is_block) {
        size_t l_pos = n;
        while (l_pos > 0 && s[l_pos - 1] != '\n') l_pos--;
        if ((l_pos > 0 || L->line_starting) && l_pos < n &&
            space_run(s + l_pos, n - l_pos) == n - l_pos)
            n = l_pos;
    }
    if (n) AK_CHECK(push_tok(L, T_DATA, s, n));
    L->line += count_lines(L->src + from, to - from);
    return AK_OK;
}

/* After a block/comment end at `p` (just past "%}"): trim_blocks eats one "\n". */
static size_t after_block_end(lexer *L, size_t p, char sign) {
    if (sign == '-') return p + space_run(L->src + p, L->n - p);
    if (sign != '+' && p < L->n && L->src[p] == '\n') return p + 1;
    return p;
}

static void set_line_starting(lexer *L, size_t end) {
    L->line_starting = end > 0 && L->src[end - 1] == '\n';
}

/* ---- expression tokens --------------------------------------------------------------- */

static int is_name_start(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
static int is_digit(char c) { return c >= '0' && c <= '9'; }
static int hexval(char c) {
    return is_digit(c) ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10
           : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
}

static size_t put_utf8(char *o, unsigned cp) {
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) { o[0] = (char)(0xc0 | cp >> 6); o[1] = (char)(0x80 | (cp & 0x3f)); return 2; }
    if (cp < 0x10000) {
        o[0] = (char)(0xe0 | cp >> 12); o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        o[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    o[0] = (char)(0xf0 | cp >> 18); o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3f)); o[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* A quoted string at L->pos with Python's escapes decoded. */
static ak_status lex_string(lexer *L) {
    char q = L->src[L->pos];
    size_t i = L->pos + 1;
    while (i < L->n && L->src[i] != q) i += L->src[i] == '\\' ? 2 : 1;
    if (i >= L->n) return syntax(L->line, "unterminated string");
    char *out = ak__jj_alloc(L->ar, i - L->pos + 1);
    if (!out) return AK_FAIL(AK_ERR_NO_MEMORY, "chat template: out of memory");
    size_t o = 0;
    for (size_t k = L->pos + 1; k < i; k++) {
        char c = L->src[k];
        if (c != '\\') { out[o++] = c; continue; }
        char e = L->src[++k];
        int digits = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
        if (digits) {
            unsigned cp = 0;
            for (int d = 0; d < digits; d++) {
                int h = k + 1 + (size_t)d < i ? hexval(L->src[k + 1 + d]) : -1;
                if (h < 0) return syntax(L->line, "bad \\x, \\u or \\U escape in a string");
                cp = cp * 16 + (unsigned)h;
            }
            if (cp > 0x10ffff) return syntax(L->line, "escape beyond U+10FFFF");
            k += (size_t)digits;
            o += put_utf8(out + o, cp);
            continue;
        }
        if (e >= '0' && e <= '7') {
            unsigned cp = 0;
            int d = 0;
            for (; d < 3 && k < i && L->src[k] >= '0' && L->src[k] <= '7'; d++, k++)
                cp = cp * 8 + (unsigned)(L->src[k] - '0');
            k--;
            o += put_utf8(out + o, cp);
            continue;
        }
        const char *from = "nrtabfv\\'\"\n", *to = "\n\r\t\a\b\f\v\\'\"";
        const char *hit = strchr(from, e);
        if (e == '\n') continue; /* a backslash-newline joins lines */
        if (hit) out[o++] = to[hit - from];
        else { out[o++] = '\\'; out[o++] = e; } /* unknown escapes stay as written */
    }
    AK_CHECK(push_tok(L, T_STRING, out, o));
    L->line += count_lines(L->src + L->pos, i - L->pos);
    L->pos = i + 1;
    return AK_OK;
}

static ak_status lex_number(lexer *L) {
    size_t i = L->pos;
    char buf[64];
    size_t b = 0;
    int is_float = 0;
    while (i < L->n && (is_digit(L->src[i]) || L->src[i] == '_'))
        if (L->src[i++] != '_' && b < 60) buf[b++] = L->src[i - 1];
    if (i + 1 < L->n && L->src[i] == '.' && is_digit(L->src[i + 1])) {
        is_float = 1;
        buf[b++] = '.';
        i++;
        while (i < L->n && (is_digit(L->src[i]) || L->src[i] == '_'))
            if (L->src[i++] != '_' && b < 60) buf[b++] = L->src[i - 1];
    }
    if (i < L->n && (L->src[i] == 'e' || L->src[i] == 'E')) {
        size_t j = i + 1;
        if (j < L->n && (L->src[j] == '+' || L->src[j] == '-')) j++;
        if (j < L->n && is_digit(L->src[j])) {
            is_float = 1;
            for (; i < j; i++) if (b < 60) buf[b++] = L->src[i];
            while (i < L->n && is_digit(L->src[i])) if (b < 60) buf[b++] = L->src[i++]; else i++;
        }
    }
    buf[b] = '\0';
    AK_CHECK(push_tok(L, is_float ? T_FLOAT : T_INT, L->src + L->pos, i - L->pos));
    token *t = &L->toks[L->n_toks - 1];
    if (is_float) t->f = strtod(buf, NULL);
    else {
        char *end;
        long long v = strtoll(buf, &end, 10);
        if (b > 18) return syntax(L->line, "integer literal too large");
        t->i = v;
    }
    L->pos = i;
    return AK_OK;
}

static const char *const k_ops[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/",
                                    "%", "~", "<", ">", "=", "(", ")", "[", "]", "{", "}",
                                    ",", ".", ":", "|", ";"};

/* Tokens inside {{ }} or {% %} up to the end tag; `end` is "}}" or "%}". */
static ak_status lex_tag(lexer *L, const char *end, int is_block) {
    int depth = 0;
    for (;;) {
        size_t ws = space_run(L->src + L->pos, L->n - L->pos);
        L->line += count_lines(L->src + L->pos, ws);
        L->pos += ws;
        if (L->pos >= L->n) return syntax(L->line, is_block ? "missing '%}'" : "missing '}}'");
        const char *p = L->src + L->pos;
        size_t left = L->n - L->pos;
        if (depth == 0) {
            char sign = 0;
            size_t len = 0;
            if (left >= 3 && (p[0] == '-' || (p[0] == '+' && is_block)) && !memcmp(p + 1, end, 2))
                sign = p[0], len = 3;
            else if (left >= 2 && !memcmp(p, end, 2))
                len = 2;
            if (len) {
                AK_CHECK(push_tok(L, is_block ? T_BLOCK_END : T_VAR_END, p, len));
                size_t e = L->pos + len;
                if (is_block) e = after_block_end(L, e, sign);
                else if (sign == '-') e += space_run(L->src + e, L->n - e);
                L->line += count_lines(L->src + L->pos, e - L->pos);
                L->pos = e;
                set_line_starting(L, e);
                return AK_OK;
            }
        }
        if (*p == '\'' || *p == '"') { AK_CHECK(lex_string(L)); continue; }
        if (is_digit(*p)) { AK_CHECK(lex_number(L)); continue; }
        if (is_name_start(*p)) {
            size_t k = 1;
            while (k < left && (is_name_start(p[k]) || is_digit(p[k]))) k++;
            AK_CHECK(push_tok(L, T_NAME, p, k));
            L->pos += k;
            continue;
        }
        size_t k = 0;
        for (size_t o = 0; o < sizeof k_ops / sizeof k_ops[0] && !k; o++) {
            size_t ol = strlen(k_ops[o]);
            if (ol <= left && !memcmp(p, k_ops[o], ol)) k = ol;
        }
        if (!k) {
            char msg[64];
            snprintf(msg, sizeof msg, "unexpected character '%c'", *p);
            return syntax(L->line, msg);
        }
        if (*p == '(' || *p == '[' || *p == '{') depth++;
        if ((*p == ')' || *p == ']' || *p == '}') && depth > 0) depth--;
        AK_CHECK(push_tok(L, T_OP, p, k));
        L->pos += k;
    }
}

/* {% raw %}: at `p` (the '{'), returns the end of the begin tag or 0 if not raw. */
static size_t raw_begin(const lexer *L, size_t p) {
    size_t i = p + 2;
    if (i < L->n && (L->src[i] == '-' || L->src[i] == '+')) i++;
    i += space_run(L->src + i, L->n - i);
    if (L->n - i < 3 || memcmp(L->src + i, "raw", 3)) return 0;
    i += 3;
    size_t ws = space_run(L->src + i, L->n - i);
    if (L->n - i - ws >= 3 && !memcmp(L->src + i + ws, "-%}", 3))
        return i + ws + 3 + space_run(L->src + i + ws + 3, L->n - i - ws - 3);
    if (L->n - i - ws >= 2 && !memcmp(L->src + i + ws, "%}", 2)) return i + ws + 2;
    return 0;
}

static ak_status lex_raw(lexer *L, size_t body) {
    L->line += count_lines(L->src + L->pos, body - L->pos);
    L->pos = body;
    set_line_starting(L, body);
    for (size_t p = body; p + 1 < L->n; p++) {
        if (L->src[p] != '{' || L->src[p + 1] != '%') continue;
        size_t i = p + 2;
        char sign = 0;
        if (i < L->n && (L->src[i] == '-' || L->src[i] == '+')) sign = L->src[i++];
        i += space_run(L->src + i, L->n - i);
        if (L->n - i < 6 || memcmp(L->src + i, "endraw", 6)) continue;
        i += 6;
        i += space_run(L->src + i, L->n - i);
        char esign = 0;
        if (i < L->n && (L->src[i] == '-' || L->src[i] == '+')) esign = L->src[i++];
        if (L->n - i < 2 || memcmp(L->src + i, "%}", 2)) continue;
        AK_CHECK(emit_text(L, body, p, sign, 1));
        size_t e = after_block_end(L, i + 2, esign);
        L->line += count_lines(L->src + p, e - p);
        L->pos = e;
        set_line_starting(L, e);
        return AK_OK;
    }
    return syntax(L->line, "missing {% endraw %}");
}

static ak_status lex(lexer *L) {
    while (L->pos < L->n) {
        const char *p = L->src + L->pos;
        const char *hit = NULL;
        for (const char *q = p; (q = memchr(q, '{', (size_t)(L->src + L->n - q))) != NULL; q++)
            if (q + 1 < L->src + L->n && (q[1] == '{' || q[1] == '%' || q[1] == '#')) {
                hit = q;
                break;
            }
        if (!hit) {
            AK_CHECK(emit_text(L, L->pos, L->n, 0, 0));
            break;
        }
        size_t at = (size_t)(hit - L->src);
        char type = hit[1];
        char sign = at + 2 < L->n && (hit[2] == '-' || hit[2] == '+') ? hit[2] : 0;
        size_t raw = type == '%' ? raw_begin(L, at) : 0;
        AK_CHECK(emit_text(L, L->pos, at, sign, type != '{'));
        if (raw) {
            AK_CHECK(lex_raw(L, raw));
            continue;
        }
        L->pos = at + 2 + (sign ? 1 : 0);
        if (type == '#') {
            const char *c = L->src + L->pos, *stop = NULL;
            for (; c + 1 < L->src + L->n; c++)
                if (c[0] == '#' && c[1] == '}') { stop = c; break; }
            if (!stop) return syntax(L->line, "missing end of comment tag");
            size_t e = (size_t)(stop - L->src) + 2;
            char esign = stop > L->src + L->pos && (stop[-1] == '-' || stop[-1] == '+') ? stop[-1] : 0;
            e = after_block_end(L, e, esign);
            L->line += count_lines(L->src + at, e - at);
            L->pos = e;
            set_line_starting(L, e);
            continue;
        }
        AK_CHECK(push_tok(L, type == '%' ? T_BLOCK_BEGIN : T_VAR_BEGIN, hit, 2));
        AK_CHECK(lex_tag(L, type == '%' ? "%}" : "}}", type == '%'));
    }
    return push_tok(L, T_EOF, "", 0);
}

/* "\r\n" and "\r" become "\n"; one trailing newline goes (keep_trailing_newline off). */
static char *normalize(jj_arena *a, const char *src, size_t n, size_t *out_n) {
    char *s = ak__jj_alloc(a, n + 1);
    if (!s) return NULL;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (src[i] == '\r') {
            s[o++] = '\n';
            if (i + 1 < n && src[i + 1] == '\n') i++;
        } else {
            s[o++] = src[i];
        }
    }
    if (o > 0 && s[o - 1] == '\n') o--;
    s[o] = '\0';
    *out_n = o;
    return s;
}

/* ---- parser -------------------------------------------------------------------------- */

typedef struct parser {
    jj_arena *ar;
    token *t;
    size_t pos;
    int depth;
} parser;

static token *cur(parser *P) { return &P->t[P->pos]; }
static int is_op(const token *t, const char *op) {
    return t->kind == T_OP && t->n == strlen(op) && !memcmp(t->s, op, t->n);
}
static int is_name(const token *t, const char *name) {
    return t->kind == T_NAME && t->n == strlen(name) && !memcmp(t->s, name, t->n);
}
static int skip_op(parser *P, const char *op) {
    if (!is_op(cur(P), op)) return 0;
    P->pos++;
    return 1;
}
static int skip_name(parser *P, const char *name) {
    if (!is_name(cur(P), name)) return 0;
    P->pos++;
    return 1;
}

static ak_status expected(parser *P, const char *what) {
    token *t = cur(P);
    const char *got = t->kind == T_EOF ? "end of template" : t->kind == T_BLOCK_END ? "'%}'"
                      : t->kind == T_VAR_END ? "'}}'" : NULL;
    if (got)
        return AK_FAIL(AK_ERR_INVALID_ARG, "chat template: line %d: expected %s, got %s", t->line,
                       what, got);
    return AK_FAIL(AK_ERR_INVALID_ARG, "chat template: line %d: expected %s, got '%.*s'", t->line,
                   what, (int)(t->n > 40 ? 40 : t->n), t->s);
}

static ak_status expect_op(parser *P, const char *op) {
    if (skip_op(P, op)) return AK_OK;
    char what[16];
    snprintf(what, sizeof what, "'%s'", op);
    return expected(P, what);
}

static ak_status new_node(parser *P, jj_kind k, jj_node **out) {
    *out = ak__jj_alloc(P->ar, sizeof **out);
    if (!*out) return AK_FAIL(AK_ERR_NO_MEMORY, "chat template: out of memory");
    (*out)->kind = k;
    (*out)->line = cur(P)->line;
    return AK_OK;
}

static char *tok_str(parser *P, const token *t) { return ak__jj_strdup(P->ar, t->s, t->n); }

static ak_status name_tok(parser *P, const char **out) {
    if (cur(P)->kind != T_NAME) return expected(P, "a name");
    *out = tok_str(P, cur(P));
    P->pos++;
    return *out ? AK_OK : AK_FAIL(AK_ERR_NO_MEMORY, "chat template: out of memory");
}

/* A growable array of node pointers (or strings) in the arena. */
static ak_status append(parser *P, void ***arr, size_t *n, void *item) {
    if ((*n & (*n - 1)) == 0) { /* n is 0 or a power of two: double */
        void **na = ak__jj_alloc(P->ar, (*n ? *n * 2 : 1) * sizeof *na);
        if (!na) return AK_FAIL(AK_ERR_NO_MEMORY, "chat template: out of memory");
        if (*n) memcpy(na, *arr, *n * sizeof *na);
        *arr = na;
    }
    (*arr)[(*n)++] = item;
    return AK_OK;
}
#define APPEND(P, arr, n, item) append((P), (void ***)(void *)&(arr), &(n), (void *)(item))

static ak_status parse_expr(parser *P, int with_cond, jj_node **out);
static ak_status parse_unary(parser *P, int with_filter, jj_node **out);
static ak_status parse_or(parser *P, jj_node **out);

static ak_status enter(parser *P) {
    if (++P->depth > MAX_NESTING)
        return AK_FAIL(AK_ERR_INVALID_ARG, "chat template: line %d: nesting deeper than %d",
                       cur(P)->line, MAX_NESTING);
    return AK_OK;
}

/* (args, name=value, ...) after the '(' was consumed. */
static ak_status parse_args(parser *P, jj_node *n) {
    while (!skip_op(P, ")")) {
        if (n->n_items + n->n_kw > 0) AK_CHECK(expect_op(P, ","));
        if (skip_op(P, ")")) break; /* trailing comma */
        if (is_op(cur(P), "*") || is_op(cur(P), "**"))
            return AK_FAIL(AK_ERR_UNSUPPORTED, "chat template: line %d: *args / **kwargs in a "
                           "call are not supported", cur(P)->line);
        if (cur(P)->kind == T_NAME && is_op(&P->t[P->pos + 1], "=")) {
            const char *k;
            AK_CHECK(name_tok(P, &k));
            P->pos++;
            jj_node *v;
            AK_CHECK(parse_expr(P, 1, &v));
            AK_CHECK(APPEND(P, n->kw_names, n->n_kw, k));
            size_t nk = n->n_kw - 1;
            AK_CHECK(APPEND(P, n->kw_vals, nk, v));
            continue;
        }
        if (n->n_kw) return expected(P, "a keyword argument (positional after keyword)");
        jj_node *v;
        AK_CHECK(parse_expr(P, 1, &v));
        AK_CHECK(APPEND(P, n->items, n->n_items, v));
    }
    return AK_OK;
}

static ak_status parse_primary(parser *P, jj_node **out) {
    token *t = cur(P);
    jj_node *n = NULL;
    AK_CHECK(enter(P));
    if (t->kind == T_NAME) {
        static const char *const lits[] = {"true", "True", "false", "False", "none", "None"};
        AK_CHECK(new_node(P, JN_LIT, &n));
        for (int i = 0; i < 6; i++)
            if (is_name(t, lits[i])) {
                n->lit = i < 4 ? jj_bool(i < 2) : jj_none();
                P->pos++;
                goto done;
            }
        n->kind = JN_NAME;
        AK_CHECK(name_tok(P, &n->name));
    } else if (t->kind == T_STRING) {
        /* adjacent strings concatenate */
        size_t total = 0, k = P->pos;
        for (; P->t[k].kind == T_STRING; k++) total += P->t[k].n;
        char *s = ak__jj_alloc(P->ar, total + 1);
        if (!s) return AK_FAIL(AK_ERR_NO_MEMORY, "chat template: out of memory");
        size_t o = 0;
        for (; P->pos < k; P->pos++) {
            memcpy(s + o, P->t[P->pos].s, P->t[P->pos].n);
            o += P->t[P->pos].n;
        }
        AK_CHECK(new_node(P, JN_LIT, &n));
        n->lit = jj_str(s, total);
    } else if (t->kind == T_INT || t->kind == T_FLOAT) {
        AK_CHECK(new_node(P, JN_LIT, &n));
        n->lit = t->kind == T_INT ? jj_int(t->i) : jj_float(t->f);
        P->pos++;
    } else if (skip_op(P, "(")) {
        if (skip_op(P, ")")) {
            AK_CHECK(new_node(P, JN_TUPLE, &n));
            goto done;
        }
        jj_node *first;
        AK_CHECK(parse_expr(P, 1, &first));
        if (skip_op(P, ")")) {
            n = first;
            goto done;
        }
        AK_CHECK(new_node(P, JN_TUPLE, &n));
        AK_CHECK(APPEND(P, n->items, n->n_items, first));
        while (skip_op(P, ",")) {
            if (is_op(cur(P), ")")) break;
            jj_node *v;
            AK_CHECK(parse_expr(P, 1, &v));
            AK_CHECK(APPEND(P, n->items, n->n_items, v));
        }
        AK_CHECK(expect_op(P, ")"));
    } else if (skip_op(P, "[")) {
        AK_CHECK(new_node(P, JN_LIST, &n));
        while (!skip_op(P, "]")) {
            if (n->n_items) AK_CHECK(expect_op(P, ","));
            if (skip_op(P, "]")) break;
            jj_node *v;
            AK_CHECK(parse_expr(P, 1, &v));
            AK_CHECK(APPEND(P, n->items, n->n_items, v));
        }
    } else if (skip_op(P, "{")) {
        AK_CHECK(new_node(P, JN_DICT, &n));
        while (!skip_op(P, "}")) {
            if (n->n_items) AK_CHECK(expect_op(P, ","));
            if (skip_op(P, "}")) break;
            jj_node *k, *v;
            AK_CHECK(parse_expr(P, 1, &k));
            AK_CHECK(expect_op(P, ":"));
            AK_CHECK(parse_expr(P, 1, &v));
            AK_CHECK(APPEND(P, n->items, n->n_items, k));
            AK_CHECK(APPEND(P, n->items, n->n_items, v));
        }
    } else {
        return expected(P, "an expression");
    }
done:
    P->depth--;
    *out = n;
    return AK_OK;
}

/* a[...] after '[': an index or a slice a[b:c:d]. */
static ak_status parse_subscript(parser *P, jj_node *target, jj_node **out) {
    jj_node *parts[3] = {NULL, NULL, NULL};
    int colons = 0;
    for (;;) {
        if (is_op(cur(P), ":")) {
            if (++colons > 2) return expected(P, "']'");
            P->pos++;
            continue;
        }
        if (is_op(cur(P), "]")) break;
        if (parts[colons]) return expected(P, "':' or ']'");
        AK_CHECK(parse_expr(P, 1, &parts[colons]));
    }
    P->pos++;
    jj_node *n;
    AK_CHECK(new_node(P, colons ? JN_SLICE : JN_ITEM, &n));
    n->a = target;
    n->b = parts[0];
    n->c = parts[1];
    n->d = parts[2];
    if (!colons && !parts[0]) return expected(P, "an index");
    *out = n;
    return AK_OK;
}

/* Chains (a.b.c, x|f|g, 1+2+3) build left-deep trees that the evaluator walks
 * recursively: each link counts against the nesting limit until the chain ends. */
static ak_status parse_postfix(parser *P, jj_node **node) {
    int saved = P->depth;
    for (;; P->depth++) {
        if (P->depth > MAX_NESTING) return enter(P);
        jj_node *n = NULL;
        if (skip_op(P, ".")) {
            if (cur(P)->kind == T_INT) { /* foo.0 is foo[0] */
                AK_CHECK(new_node(P, JN_ITEM, &n));
                AK_CHECK(new_node(P, JN_LIT, &n->b));
                n->b->lit = jj_int(cur(P)->i);
                P->pos++;
            } else {
                AK_CHECK(new_node(P, JN_ATTR, &n));
                AK_CHECK(name_tok(P, &n->name));
            }
            n->a = *node;
        } else if (skip_op(P, "[")) {
            AK_CHECK(parse_subscript(P, *node, &n));
        } else if (skip_op(P, "(")) {
            AK_CHECK(new_node(P, JN_CALL, &n));
            n->a = *node;
            AK_CHECK(parse_args(P, n));
        } else {
            P->depth = saved;
            return AK_OK;
        }
        *node = n;
    }
}

/* `is [not] name [arg | (args)]` after the 'is'. */
static ak_status parse_test(parser *P, jj_node *target, jj_node **out) {
    jj_node *n;
    AK_CHECK(new_node(P, JN_TEST, &n));
    n->a = target;
    n->op = skip_name(P, "not");
    AK_CHECK(name_tok(P, &n->name));
    if (!ak__jj_is_test(n->name))
        return AK_FAIL(AK_ERR_UNSUPPORTED, "chat template: line %d: test '%s' is not supported",
                       n->line, n->name);
    token *t = cur(P);
    if (skip_op(P, "(")) {
        AK_CHECK(parse_args(P, n));
    } else if ((t->kind == T_NAME || t->kind == T_STRING || t->kind == T_INT ||
                t->kind == T_FLOAT || is_op(t, "[") || is_op(t, "{")) &&
               !is_name(t, "else") && !is_name(t, "or") && !is_name(t, "and")) {
        jj_node *arg;
        AK_CHECK(parse_primary(P, &arg));
        AK_CHECK(parse_postfix(P, &arg));
        AK_CHECK(APPEND(P, n->items, n->n_items, arg));
    }
    *out = n;
    return AK_OK;
}

static ak_status parse_filters(parser *P, jj_node **node) {
    int saved = P->depth;
    for (;; P->depth++) {
        if (P->depth > MAX_NESTING) return enter(P);
        jj_node *n = NULL;
        if (skip_op(P, "|")) {
            AK_CHECK(new_node(P, JN_FILTER, &n));
            AK_CHECK(name_tok(P, &n->name));
            if (!ak__jj_is_filter(n->name))
                return AK_FAIL(AK_ERR_UNSUPPORTED,
                               "chat template: line %d: filter '%s' is not supported", n->line,
                               n->name);
            n->a = *node;
            if (skip_op(P, "(")) AK_CHECK(parse_args(P, n));
        } else if (skip_name(P, "is")) {
            AK_CHECK(parse_test(P, *node, &n));
        } else if (skip_op(P, "(")) {
            AK_CHECK(new_node(P, JN_CALL, &n));
            n->a = *node;
            AK_CHECK(parse_args(P, n));
        } else {
            P->depth = saved;
            return AK_OK;
        }
        *node = n;
    }
}

static ak_status parse_unary(parser *P, int with_filter, jj_node **out) {
    AK_CHECK(enter(P));
    jj_node *n = NULL;
    if (is_op(cur(P), "-") || is_op(cur(P), "+")) {
        AK_CHECK(new_node(P, is_op(cur(P), "-") ? JN_NEG : JN_POS, &n));
        P->pos++;
        AK_CHECK(parse_unary(P, 0, &n->a));
    } else {
        AK_CHECK(parse_primary(P, &n));
    }
    AK_CHECK(parse_postfix(P, &n));
    if (with_filter) AK_CHECK(parse_filters(P, &n));
    P->depth--;
    *out = n;
    return AK_OK;
}

typedef ak_status (*level_fn)(parser *P, jj_node **out);

/* One left-associative binary level: operands from `next`, operators from `ops`. */
static ak_status binary_level(parser *P, level_fn next, const char *const *ops,
                              const jj_op *codes, size_t n_ops, jj_node **out) {
    jj_node *left;
    int saved = P->depth;
    AK_CHECK(next(P, &left));
    for (;;) {
        size_t k = 0;
        while (k < n_ops && !is_op(cur(P), ops[k])) k++;
        if (k == n_ops) break;
        AK_CHECK(enter(P));
        P->pos++;
        jj_node *n;
        AK_CHECK(new_node(P, JN_BINOP, &n));
        n->op = (int)codes[k];
        n->a = left;
        AK_CHECK(next(P, &n->b));
        left = n;
    }
    P->depth = saved;
    *out = left;
    return AK_OK;
}

static ak_status parse_unary_f(parser *P, jj_node **out) { return parse_unary(P, 1, out); }
static ak_status parse_pow(parser *P, jj_node **out) {
    static const char *const ops[] = {"**"};
    static const jj_op codes[] = {JO_POW};
    return binary_level(P, parse_unary_f, ops, codes, 1, out);
}
static ak_status parse_math2(parser *P, jj_node **out) {
    static const char *const ops[] = {"*", "/", "//", "%"};
    static const jj_op codes[] = {JO_MUL, JO_DIV, JO_FLOORDIV, JO_MOD};
    return binary_level(P, parse_pow, ops, codes, 4, out);
}
static ak_status parse_concat(parser *P, jj_node **out) {
    static const char *const ops[] = {"~"};
    static const jj_op codes[] = {JO_CONCAT};
    return binary_level(P, parse_math2, ops, codes, 1, out);
}
static ak_status parse_math1(parser *P, jj_node **out) {
    static const char *const ops[] = {"+", "-"};
    static const jj_op codes[] = {JO_ADD, JO_SUB};
    return binary_level(P, parse_concat, ops, codes, 2, out);
}

static ak_status parse_compare(parser *P, jj_node **out) {
    static const char *const ops[] = {"==", "!=", "<=", ">=", "<", ">"};
    static const jj_op codes[] = {JO_EQ, JO_NE, JO_LE, JO_GE, JO_LT, JO_GT};
    jj_node *left;
    AK_CHECK(parse_math1(P, &left));
    int op = -1;
    for (size_t k = 0; k < 6 && op < 0; k++)
        if (is_op(cur(P), ops[k])) op = (int)codes[k], P->pos++;
    if (op < 0 && skip_name(P, "in")) op = JO_IN;
    if (op < 0 && is_name(cur(P), "not") && is_name(&P->t[P->pos + 1], "in")) {
        P->pos += 2;
        op = JO_NOTIN;
    }
    if (op < 0) {
        *out = left;
        return AK_OK;
    }
    jj_node *n;
    AK_CHECK(new_node(P, JN_BINOP, &n));
    n->op = op;
    n->a = left;
    AK_CHECK(parse_math1(P, &n->b));
    for (size_t k = 0; k < 6; k++)
        if (is_op(cur(P), ops[k]) || is_name(cur(P), "in"))
            return AK_FAIL(AK_ERR_UNSUPPORTED, "chat template: line %d: chained comparisons "
                           "(a < b < c) are not supported", cur(P)->line);
    *out = n;
    return AK_OK;
}

static ak_status parse_not(parser *P, jj_node **out) {
    if (is_name(cur(P), "not")) {
        AK_CHECK(enter(P));
        jj_node *n;
        AK_CHECK(new_node(P, JN_NOT, &n));
        P->pos++;
        AK_CHECK(parse_not(P, &n->a));
        P->depth--;
        *out = n;
        return AK_OK;
    }
    return parse_compare(P, out);
}

static ak_status logic_level(parser *P, level_fn next, const char *word, jj_kind kind,
                             jj_node **out) {
    jj_node *left;
    int saved = P->depth;
    AK_CHECK(next(P, &left));
    while (skip_name(P, word)) {
        AK_CHECK(enter(P));
        jj_node *n;
        AK_CHECK(new_node(P, kind, &n));
        n->a = left;
        AK_CHECK(next(P, &n->b));
        left = n;
    }
    P->depth = saved;
    *out = left;
    return AK_OK;
}
static ak_status parse_and(parser *P, jj_node **out) {
    return logic_level(P, parse_not, "and", JN_AND, out);
}
static ak_status parse_or(parser *P, jj_node **out) {
    return logic_level(P, parse_and, "or", JN_OR, out);
}

/* `a if c else b` (with_cond) over or-expressions. */
static ak_status parse_expr(parser *P, int with_cond, jj_node **out) {
    int saved = P->depth;
    AK_CHECK(enter(P));
    jj_node *n;
    AK_CHECK(parse_or(P, &n));
    while (with_cond && skip_name(P, "if")) {
        AK_CHECK(enter(P));
        jj_node *c;
        AK_CHECK(new_node(P, JN_COND, &c));
        c->b = n;
        AK_CHECK(parse_or(P, &c->a));
        if (skip_name(P, "else")) AK_CHECK(parse_expr(P, 1, &c->c));
        n = c;
    }
    P->depth = saved;
    *out = n;
    return AK_OK;
}

/* An expression, or a tuple when commas follow (`{{ a, b }}`, `set x = 1, 2`). */
static ak_status parse_tuple(parser *P, int with_cond, jj_node **out) {
    jj_node *first;
    AK_CHECK(parse_expr(P, with_cond, &first));
    if (!is_op(cur(P), ",")) {
        *out = first;
        return AK_OK;
    }
    jj_node *t;
    AK_CHECK(new_node(P, JN_TUPLE, &t));
    AK_CHECK(APPEND(P, t->items, t->n_items, first));
    while (skip_op(P, ",")) {
        if (cur(P)->kind == T_BLOCK_END || cur(P)->kind == T_VAR_END) break;
        jj_node *v;
        AK_CHECK(parse_expr(P, with_cond, &v));
        AK_CHECK(APPEND(P, t->items, t->n_items, v));
    }
    *out = t;
    return AK_OK;
}

/* ---- statements ---------------------------------------------------------------------- */

static ak_status parse_body(parser *P, const char *const *ends, jj_node **out);

static ak_status block_end(parser *P) {
    if (cur(P)->kind == T_BLOCK_END) {
        P->pos++;
        return AK_OK;
    }
    return expected(P, "'%}'");
}

/* After a nested body stopped at `{% name`: consume the name (caller checks which). */
static const char *end_name(parser *P) {
    token *t = &P->t[P->pos + 1];
    return t->kind == T_NAME ? t->s : "";
}
static int at_end(parser *P, const char *name) { return is_name(&P->t[P->pos + 1], name); }
static void skip_end_tag(parser *P) { P->pos += 2; }

static ak_status parse_targets(parser *P, jj_node *n) {
    do {
        const char *name;
        if (skip_op(P, "(")) return AK_FAIL(AK_ERR_UNSUPPORTED, "chat template: line %d: "
                                            "nested unpacking is not supported", cur(P)->line);
        AK_CHECK(name_tok(P, &name));
        AK_CHECK(APPEND(P, n->targets, n->n_targets, name));
    } while (skip_op(P, ","));
    return AK_OK;
}

/* The tail of an if or for block, after its body: an optional {% else %} body up to the
 * block's end tag (else_ends), then that end tag. */
static ak_status parse_else_and_end(parser *P, const char *const *else_ends, jj_node *n) {
    if (at_end(P, "else")) {
        skip_end_tag(P);
        AK_CHECK(block_end(P));
        AK_CHECK(parse_body(P, else_ends, &n->else_body));
    }
    skip_end_tag(P);
    return block_end(P);
}

static ak_status parse_if(parser *P, jj_node **out) {
    jj_node *n;
    AK_CHECK(new_node(P, JN_IF, &n));
    AK_CHECK(parse_tuple(P, 0, &n->a));
    AK_CHECK(block_end(P));
    static const char *const ends[] = {"elif", "else", "endif", NULL};
    AK_CHECK(parse_body(P, ends, &n->body));
    if (at_end(P, "elif")) {
        skip_end_tag(P);
        AK_CHECK(new_node(P, JN_BODY, &n->else_body));
        jj_node *inner;
        AK_CHECK(parse_if(P, &inner)); /* consumes through endif */
        AK_CHECK(APPEND(P, n->else_body->items, n->else_body->n_items, inner));
        *out = n;
        return AK_OK;
    }
    static const char *const else_ends[] = {"endif", NULL};
    AK_CHECK(parse_else_and_end(P, else_ends, n));
    *out = n;
    return AK_OK;
}

static ak_status parse_for(parser *P, jj_node **out) {
    jj_node *n;
    AK_CHECK(new_node(P, JN_FOR, &n));
    AK_CHECK(parse_targets(P, n));
    if (!skip_name(P, "in")) return expected(P, "'in'");
    AK_CHECK(parse_tuple(P, 0, &n->a));
    if (skip_name(P, "if")) AK_CHECK(parse_expr(P, 1, &n->b));
    if (is_name(cur(P), "recursive"))
        return AK_FAIL(AK_ERR_UNSUPPORTED, "chat template: line %d: recursive loops are not "
                       "supported", cur(P)->line);
    AK_CHECK(block_end(P));
    static const char *const ends[] = {"else", "endfor", NULL};
    AK_CHECK(parse_body(P, ends, &n->body));
    static const char *const else_ends[] = {"endfor", NULL};
    AK_CHECK(parse_else_and_end(P, else_ends, n));
    *out = n;
    return AK_OK;
}

static ak_status parse_set(parser *P, jj_node **out) {
    jj_node *n;
    AK_CHECK(new_node(P, JN_SET, &n));
    const char *name;
    AK_CHECK(name_tok(P, &name));
    if (skip_op(P, ".")) { /* namespace attribute: {% set ns.attr = value %} */
        n->kind = JN_SET_ATTR;
        n->name = name;
        const char *attr;
        AK_CHECK(name_tok(P, &attr));
        AK_CHECK(APPEND(P, n->targets, n->n_targets, attr));
    } else {
        AK_CHECK(APPEND(P, n->targets, n->n_targets, name));
        while (skip_op(P, ",")) {
            AK_CHECK(name_tok(P, &name));
            AK_CHECK(APPEND(P, n->targets, n->n_targets, name));
        }
    }
    if (skip_op(P, "=")) {
        AK_CHECK(parse_tuple(P, 1, &n->a));
        AK_CHECK(block_end(P));
        *out = n;
        return AK_OK;
    }
    if (n->kind != JN_SET || n->n_targets != 1) return expected(P, "'='");
    if (is_op(cur(P), "|"))
        return AK_FAIL(AK_ERR_UNSUPPORTED, "chat template: line %d: a filtered block set is not "
                       "supported", cur(P)->line);
    AK_CHECK(block_end(P));
    n->kind = JN_SET_BLOCK;
    static const char *const ends[] = {"endset", NULL};
    AK_CHECK(parse_body(P, ends, &n->body));
    skip_end_tag(P);
    AK_CHECK(block_end(P));
    *out = n;
    return AK_OK;
}

static ak_status parse_macro(parser *P, jj_node **out) {
    jj_node *n;
    AK_CHECK(new_node(P, JN_MACRO, &n));
    AK_CHECK(name_tok(P, &n->name));
    AK_CHECK(expect_op(P, "("));
    while (!skip_op(P, ")")) {
        if (n->n_targets) AK_CHECK(expect_op(P, ","));
        const char *param;
        AK_CHECK(name_tok(P, &param));
        AK_CHECK(APPEND(P, n->targets, n->n_targets, param));
        if (skip_op(P, "=")) {
            jj_node *def;
            AK_CHECK(parse_expr(P, 1, &def));
            AK_CHECK(APPEND(P, n->kw_names, n->n_kw, param));
            size_t nk = n->n_kw - 1;
            AK_CHECK(APPEND(P, n->kw_vals, nk, def));
        } else if (n->n_kw) {
            return expected(P, "a default value (non-default parameter after a default one)");
        }
    }
    AK_CHECK(block_end(P));
    static const char *const ends[] = {"endmacro", NULL};
    AK_CHECK(parse_body(P, ends, &n->body));
    skip_end_tag(P);
    AK_CHECK(block_end(P));
    *out = n;
    return AK_OK;
}

/* {% filter name(args) %}...{% endfilter %}: the body's text through a filter. */
static ak_status parse_filter_block(parser *P, jj_node **out) {
    jj_node *n;
    AK_CHECK(new_node(P, JN_FILTER_BLOCK, &n));
    AK_CHECK(name_tok(P, &n->name));
    if (!ak__jj_is_filter(n->name))
        return AK_FAIL(AK_ERR_UNSUPPORTED, "chat template: line %d: filter '%s' is not supported",
                       n->line, n->name);
    if (skip_op(P, "(")) AK_CHECK(parse_args(P, n));
    if (is_op(cur(P), "|"))
        return AK_FAIL(AK_ERR_UNSUPPORTED, "chat template: line %d: chained filters in a filter "
                       "block are not supported", cur(P)->line);
    AK_CHECK(block_end(P));
    static const char *const ends[] = {"endfilter", NULL};
    AK_CHECK(parse_body(P, ends, &n->body));
    skip_end_tag(P);
    AK_CHECK(block_end(P));
    *out = n;
    return AK_OK;
}

static ak_status parse_statement(parser *P, jj_node **out) {
    token *t = cur(P);
    if (t->kind != T_NAME) return expected(P, "a statement name");
    P->pos++;
    if (is_name(t, "if")) return parse_if(P, out);
    if (is_name(t, "for")) return parse_for(P, out);
    if (is_name(t, "set")) return parse_set(P, out);
    if (is_name(t, "macro")) return parse_macro(P, out);
    if (is_name(t, "filter")) return parse_filter_block(P, out);
    if (is_name(t, "break") || is_name(t, "continue")) {
        AK_CHECK(new_node(P, is_name(t, "break") ? JN_BREAK : JN_CONTINUE, out));
        return block_end(P);
    }
    return AK_FAIL(AK_ERR_UNSUPPORTED, "chat template: line %d: the '%.*s' tag is not supported",
                   t->line, (int)(t->n > 40 ? 40 : t->n), t->s);
}

/* Statements until EOF (ends == NULL) or a `{% name` with a name in `ends` (left there). */
static ak_status parse_body(parser *P, const char *const *ends, jj_node **out) {
    AK_CHECK(enter(P));
    jj_node *body;
    AK_CHECK(new_node(P, JN_BODY, &body));
    int line = cur(P)->line;
    for (;;) {
        token *t = cur(P);
        jj_node *n = NULL;
        if (t->kind == T_EOF) {
            if (!ends) break;
            const char *closer = ends[0];
            for (size_t k = 0; ends[k]; k++)
                if (!strncmp(ends[k], "end", 3)) closer = ends[k];
            return AK_FAIL(AK_ERR_INVALID_ARG, "chat template: line %d: the block opened here "
                           "has no {%% %s %%}", line, closer);
        }
        if (t->kind == T_DATA) {
            AK_CHECK(new_node(P, JN_DATA, &n));
            n->lit = jj_str(t->s, t->n);
            P->pos++;
        } else if (t->kind == T_VAR_BEGIN) {
            P->pos++;
            AK_CHECK(new_node(P, JN_OUTPUT, &n));
            AK_CHECK(parse_tuple(P, 1, &n->a));
            if (cur(P)->kind != T_VAR_END) return expected(P, "'}}'");
            P->pos++;
        } else if (t->kind == T_BLOCK_BEGIN) {
            const char *name = end_name(P);
            for (size_t k = 0; ends && ends[k]; k++)
                if (at_end(P, ends[k])) goto finished;
            static const char *const closers[] = {"endif", "endfor", "endmacro", "endset",
                                                  "elif", "else", "endraw", "endfilter"};
            for (size_t k = 0; k < sizeof closers / sizeof closers[0]; k++)
                if (at_end(P, closers[k]))
                    return AK_FAIL(AK_ERR_INVALID_ARG, "chat template: line %d: unexpected "
                                   "{%% %s %%}", t->line, closers[k]);
            (void)name;
            P->pos++;
            AK_CHECK(parse_statement(P, &n));
        } else {
            return expected(P, "text, '{{' or '{%'");
        }
        AK_CHECK(APPEND(P, body->items, body->n_items, n));
    }
finished:
    P->depth--;
    *out = body;
    return AK_OK;
}

/* ---- entry points -------------------------------------------------------------------- */

ak_status ak__jj_compile(const char *src, size_t n, jj_template **out) {
    jj_template *t = calloc(1, sizeof *t);
    if (!t) return AK_FAIL(AK_ERR_NO_MEMORY, "chat template: out of memory");
    t->arena.limit = 64u << 20;
    ak_status st;
    size_t len;
    lexer L = {&t->arena, NULL, 0, 0, 1, 1, NULL, 0, 0};
    L.src = normalize(&t->arena, src, n, &len);
    if (!L.src) {
        st = AK_FAIL(AK_ERR_NO_MEMORY, "chat template: out of memory");
        goto fail;
    }
    L.n = len;
    AK_CHECK_GOTO(st, lex(&L));
    parser P = {&t->arena, L.toks, 0, 0};
    AK_CHECK_GOTO(st, parse_body(&P, NULL, &t->root));
    *out = t;
    return AK_OK;
fail:
    ak__jj_template_free(t);
    return st;
}

void ak__jj_template_free(jj_template *t) {
    if (!t) return;
    ak__jj_arena_free(&t->arena);
    free(t);
}
