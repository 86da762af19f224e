/* Values of the Jinja interpreter: the render arena, lists and dicts, Python's
 * truthiness / equality / str() / repr(), json.dumps as Hugging Face's tojson calls it,
 * and the UTF-8 helpers that give strings Python's code-point semantics. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "llm/chat/jinja.h"

/* ---- arena --------------------------------------------------------------------------- */

struct jj_chunk {
    jj_chunk *next;
    size_t cap, used;
    _Alignas(16) unsigned char data[];
};

void *ak__jj_alloc(jj_arena *a, size_t n) {
    n = (n + 15) & ~(size_t)15;
    if (a->limit && a->used + n > a->limit) {
        a->over = 1;
        return NULL;
    }
    jj_chunk *c = a->head;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > 65536 ? n : 65536;
        c = malloc(sizeof *c + cap);
        if (!c) {
            a->over = 1;
            return NULL;
        }
        c->cap = cap;
        c->used = 0;
        c->next = a->head;
        a->head = c;
    }
    void *p = c->data + c->used;
    c->used += n;
    a->used += n;
    memset(p, 0, n);
    return p;
}

void ak__jj_arena_free(jj_arena *a) {
    while (a->head) {
        jj_chunk *next = a->head->next;
        free(a->head);
        a->head = next;
    }
    a->used = 0;
}

char *ak__jj_strdup(jj_arena *a, const char *s, size_t n) {
    char *p = ak__jj_alloc(a, n + 1);
    if (p && n) memcpy(p, s, n);
    return p;
}

/* ---- lists and dicts ----------------------------------------------------------------- */

jj_list *ak__jj_list_new(jj_arena *a, size_t cap) {
    jj_list *l = ak__jj_alloc(a, sizeof *l);
    if (!l) return NULL;
    if (cap) {
        l->v = ak__jj_alloc(a, cap * sizeof *l->v);
        if (!l->v) return NULL;
        l->cap = cap;
    }
    return l;
}

static int grow(jj_arena *a, jj_val **v, size_t n, size_t *cap) {
    if (n < *cap) return 1;
    size_t nc = *cap ? *cap * 2 : 4;
    jj_val *nv = ak__jj_alloc(a, nc * sizeof *nv);
    if (!nv) return 0;
    if (n) memcpy(nv, *v, n * sizeof *nv);
    *v = nv;
    *cap = nc;
    return 1;
}

int ak__jj_list_push(jj_arena *a, jj_list *l, jj_val v) {
    if (!grow(a, &l->v, l->n, &l->cap)) return 0;
    l->v[l->n++] = v;
    return 1;
}

jj_dict *ak__jj_dict_new(jj_arena *a) { return ak__jj_alloc(a, sizeof(jj_dict)); }

jj_val *ak__jj_dict_find(const jj_dict *d, jj_val key) {
    for (size_t i = 0; i < d->n; i++)
        if (ak__jj_equal(d->k[i], key)) return &d->v[i];
    return NULL;
}

jj_val *ak__jj_dict_get(const jj_dict *d, const char *key, size_t n) {
    for (size_t i = 0; i < d->n; i++)
        if (d->k[i].t == JJ_STR && d->k[i].u.s.n == n && !memcmp(d->k[i].u.s.p, key, n))
            return &d->v[i];
    return NULL;
}

int ak__jj_dict_set(jj_arena *a, jj_dict *d, jj_val k, jj_val v) {
    jj_val *slot = ak__jj_dict_find(d, k);
    if (slot) {
        *slot = v;
        return 1;
    }
    size_t kc = d->cap;
    if (!grow(a, &d->k, d->n, &kc) || !grow(a, &d->v, d->n, &d->cap)) return 0;
    d->k[d->n] = k;
    d->v[d->n++] = v;
    return 1;
}

/* ---- truthiness and equality --------------------------------------------------------- */

int ak__jj_truthy(jj_val v) {
    switch (v.t) {
    case JJ_UNDEF: case JJ_NONE: return 0;
    case JJ_BOOL: return v.u.b;
    case JJ_INT: return v.u.i != 0;
    case JJ_FLOAT: return v.u.f != 0.0;
    case JJ_STR: return v.u.s.n != 0;
    case JJ_LIST: return v.u.l->n != 0;
    case JJ_DICT: return v.u.d->n != 0 || v.u.d->is_ns;
    default: return 1;
    }
}

static int is_num(jj_val v) { return v.t == JJ_BOOL || v.t == JJ_INT || v.t == JJ_FLOAT; }
static double num(jj_val v) {
    return v.t == JJ_FLOAT ? v.u.f : v.t == JJ_INT ? (double)v.u.i : (double)v.u.b;
}

int ak__jj_equal(jj_val a, jj_val b) {
    if (is_num(a) && is_num(b)) {
        if (a.t != JJ_FLOAT && b.t != JJ_FLOAT)
            return (a.t == JJ_INT ? a.u.i : a.u.b) == (b.t == JJ_INT ? b.u.i : b.u.b);
        return num(a) == num(b);
    }
    if (a.t != b.t) return 0;
    switch (a.t) {
    case JJ_UNDEF: case JJ_NONE: return 1;
    case JJ_STR: return a.u.s.n == b.u.s.n && !memcmp(a.u.s.p, b.u.s.p, a.u.s.n);
    case JJ_LIST:
        if (a.u.l->n != b.u.l->n || a.tuple != b.tuple) return 0;
        for (size_t i = 0; i < a.u.l->n; i++)
            if (!ak__jj_equal(a.u.l->v[i], b.u.l->v[i])) return 0;
        return 1;
    case JJ_DICT:
        if (a.u.d == b.u.d) return 1;
        if (a.u.d->is_ns || b.u.d->is_ns || a.u.d->n != b.u.d->n) return 0;
        for (size_t i = 0; i < a.u.d->n; i++) {
            jj_val *o = ak__jj_dict_find(b.u.d, a.u.d->k[i]);
            if (!o || !ak__jj_equal(a.u.d->v[i], *o)) return 0;
        }
        return 1;
    case JJ_MACRO: return a.u.macro == b.u.macro;
    case JJ_LOOP: return a.u.loop == b.u.loop;
    default: return a.u.fn.name == b.u.fn.name && a.u.fn.self == b.u.fn.self;
    }
}

/* ---- byte strings -------------------------------------------------------------------- */

int ak__jj_put(jj_arena *a, jj_buf *b, const char *s, size_t n) {
    if (b->limit && b->n + n > b->limit) {
        b->over = 1;
        return 0;
    }
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 64;
        while (nc < b->n + n + 1) nc *= 2;
        char *np = ak__jj_alloc(a, nc);
        if (!np) return 0;
        if (b->n) memcpy(np, b->p, b->n);
        b->p = np;
        b->cap = nc;
    }
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
    return 1;
}

static int put_s(jj_arena *a, jj_buf *b, const char *s) { return ak__jj_put(a, b, s, strlen(s)); }

/* ---- Python's float repr ------------------------------------------------------------- */

void ak__jj_float_repr(double f, char out[40]) {
    if (isnan(f)) { strcpy(out, "nan"); return; }
    if (isinf(f)) { strcpy(out, f < 0 ? "-inf" : "inf"); return; }
    if (f == 0) { strcpy(out, signbit(f) ? "-0.0" : "0.0"); return; }
    char e[40];
    int prec = 1;
    for (; prec <= 17; prec++) {
        snprintf(e, sizeof e, "%.*e", prec - 1, f);
        if (strtod(e, NULL) == f) break;
    }
    /* e = [-]d[.ddd]e[+-]XX: split into digits and exponent */
    const char *p = e;
    char digits[24];
    int nd = 0, neg = 0;
    if (*p == '-') neg = 1, p++;
    for (; *p && *p != 'e'; p++)
        if (*p != '.') digits[nd++] = *p;
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    digits[nd] = '\0';
    int exp = atoi(p + 1);
    char *o = out;
    if (neg) *o++ = '-';
    if (exp >= 16 || exp < -4) {
        *o++ = digits[0];
        if (nd > 1) {
            *o++ = '.';
            memcpy(o, digits + 1, (size_t)nd - 1);
            o += nd - 1;
        }
        sprintf(o, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
        return;
    }
    if (exp < 0) {
        *o++ = '0';
        *o++ = '.';
        for (int i = 0; i < -exp - 1; i++) *o++ = '0';
        memcpy(o, digits, (size_t)nd);
        o += nd;
    } else {
        for (int i = 0; i <= exp; i++) *o++ = i < nd ? digits[i] : '0';
        *o++ = '.';
        if (nd > exp + 1) {
            memcpy(o, digits + exp + 1, (size_t)(nd - exp - 1));
            o += nd - exp - 1;
        } else {
            *o++ = '0';
        }
    }
    *o = '\0';
}

/* ---- str() and repr() ---------------------------------------------------------------- */

static int repr_string(jj_arena *a, jj_buf *b, const char *s, size_t n) {
    int has_sq = memchr(s, '\'', n) != NULL, has_dq = memchr(s, '"', n) != NULL;
    char q = has_sq && !has_dq ? '"' : '\'';
    if (!ak__jj_put(a, b, &q, 1)) return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[8];
        const char *out = NULL;
        if (c == '\\') out = "\\\\";
        else if (c == '\n') out = "\\n";
        else if (c == '\r') out = "\\r";
        else if (c == '\t') out = "\\t";
        else if (c == (unsigned char)q) out = q == '\'' ? "\\'" : "\\\"";
        else if (c < 0x20 || c == 0x7f) {
            snprintf(esc, sizeof esc, "\\x%02x", c);
            out = esc;
        }
        if (out ? !put_s(a, b, out) : !ak__jj_put(a, b, s + i, 1)) return 0;
    }
    return ak__jj_put(a, b, &q, 1);
}

int ak__jj_repr(jj_arena *a, jj_buf *b, jj_val v) {
    if (v.t == JJ_STR) return repr_string(a, b, v.u.s.p, v.u.s.n);
    return ak__jj_str(a, b, v);
}

int ak__jj_str(jj_arena *a, jj_buf *b, jj_val v) {
    char tmp[48];
    switch (v.t) {
    case JJ_UNDEF: return 1;
    case JJ_NONE: return put_s(a, b, "None");
    case JJ_BOOL: return put_s(a, b, v.u.b ? "True" : "False");
    case JJ_INT:
        snprintf(tmp, sizeof tmp, "%lld", (long long)v.u.i);
        return put_s(a, b, tmp);
    case JJ_FLOAT:
        ak__jj_float_repr(v.u.f, tmp);
        return put_s(a, b, tmp);
    case JJ_STR: return ak__jj_put(a, b, v.u.s.p, v.u.s.n);
    case JJ_LIST: {
        if (!put_s(a, b, v.tuple ? "(" : "[")) return 0;
        for (size_t i = 0; i < v.u.l->n; i++)
            if ((i && !put_s(a, b, ", ")) || !ak__jj_repr(a, b, v.u.l->v[i])) return 0;
        if (v.tuple && v.u.l->n == 1 && !put_s(a, b, ",")) return 0;
        return put_s(a, b, v.tuple ? ")" : "]");
    }
    case JJ_DICT: {
        if (v.u.d->is_ns) return put_s(a, b, "<Namespace>");
        if (!put_s(a, b, "{")) return 0;
        for (size_t i = 0; i < v.u.d->n; i++)
            if ((i && !put_s(a, b, ", ")) || !ak__jj_repr(a, b, v.u.d->k[i]) ||
                !put_s(a, b, ": ") || !ak__jj_repr(a, b, v.u.d->v[i]))
                return 0;
        return put_s(a, b, "}");
    }
    case JJ_MACRO: return put_s(a, b, "<Macro>");
    case JJ_LOOP: return put_s(a, b, "<LoopContext>");
    default: return put_s(a, b, "<built-in function>");
    }
}

/* ---- json.dumps ---------------------------------------------------------------------- */

static int json_string(jj_arena *a, jj_buf *b, const char *s, size_t n) {
    if (!put_s(a, b, "\"")) return 0;
    size_t run = 0; /* bytes copied as they are, flushed before each escape */
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *out = NULL;
        char esc[8];
        if (c == '"') out = "\\\"";
        else if (c == '\\') out = "\\\\";
        else if (c == '\n') out = "\\n";
        else if (c == '\r') out = "\\r";
        else if (c == '\t') out = "\\t";
        else if (c == '\b') out = "\\b";
        else if (c == '\f') out = "\\f";
        else if (c < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            out = esc;
        }
        if (!out) continue;
        if (!ak__jj_put(a, b, s + run, i - run) || !put_s(a, b, out)) return 0;
        run = i + 1;
    }
    return ak__jj_put(a, b, s + run, n - run) && put_s(a, b, "\"");
}

static int newline_indent(jj_arena *a, jj_buf *b, int indent, int level) {
    if (!put_s(a, b, "\n")) return 0;
    for (int i = 0; i < indent * level; i++)
        if (!put_s(a, b, " ")) return 0;
    return 1;
}

static int str_less(jj_val x, jj_val y) {
    size_t n = x.u.s.n < y.u.s.n ? x.u.s.n : y.u.s.n;
    int c = memcmp(x.u.s.p, y.u.s.p, n);
    return c < 0 || (c == 0 && x.u.s.n < y.u.s.n);
}

static ak_status json_value(jj_arena *a, jj_buf *b, jj_val v, int indent, int sort, int level);

static ak_status json_key(jj_arena *a, jj_buf *b, jj_val k) {
    jj_buf tmp = {0};
    switch (k.t) {
    case JJ_STR: return json_string(a, b, k.u.s.p, k.u.s.n) ? AK_OK : AK_ERR_NO_MEMORY;
    case JJ_NONE: return put_s(a, b, "\"null\"") ? AK_OK : AK_ERR_NO_MEMORY;
    case JJ_BOOL: return put_s(a, b, k.u.b ? "\"true\"" : "\"false\"") ? AK_OK : AK_ERR_NO_MEMORY;
    case JJ_INT: case JJ_FLOAT:
        if (!ak__jj_str(a, &tmp, k)) return AK_ERR_NO_MEMORY;
        return json_string(a, b, tmp.p, tmp.n) ? AK_OK : AK_ERR_NO_MEMORY;
    default:
        return AK_FAIL(AK_ERR_INVALID_ARG, "tojson: keys must be str, int, float, bool or None");
    }
}

static ak_status json_dict(jj_arena *a, jj_buf *b, const jj_dict *d, int indent, int sort,
                           int level) {
    if (d->n == 0) return put_s(a, b, "{}") ? AK_OK : AK_ERR_NO_MEMORY;
    size_t *order = ak__jj_alloc(a, d->n * sizeof *order);
    if (!order) return AK_ERR_NO_MEMORY;
    for (size_t i = 0; i < d->n; i++) order[i] = i;
    if (sort) /* insertion sort: stable, and dicts in templates are small */
        for (size_t i = 1; i < d->n; i++)
            for (size_t j = i; j > 0; j--) {
                jj_val x = d->k[order[j]], y = d->k[order[j - 1]];
                if (x.t != JJ_STR || y.t != JJ_STR)
                    return AK_FAIL(AK_ERR_INVALID_ARG, "tojson: sort_keys needs str keys");
                if (!str_less(x, y)) break;
                size_t t = order[j];
                order[j] = order[j - 1];
                order[j - 1] = t;
            }
    if (!put_s(a, b, "{")) return AK_ERR_NO_MEMORY;
    for (size_t i = 0; i < d->n; i++) {
        if (i && !put_s(a, b, indent >= 0 ? "," : ", ")) return AK_ERR_NO_MEMORY;
        if (indent >= 0 && !newline_indent(a, b, indent, level + 1)) return AK_ERR_NO_MEMORY;
        AK_CHECK(json_key(a, b, d->k[order[i]]));
        if (!put_s(a, b, ": ")) return AK_ERR_NO_MEMORY;
        AK_CHECK(json_value(a, b, d->v[order[i]], indent, sort, level + 1));
    }
    if (indent >= 0 && !newline_indent(a, b, indent, level)) return AK_ERR_NO_MEMORY;
    return put_s(a, b, "}") ? AK_OK : AK_ERR_NO_MEMORY;
}

static ak_status json_value(jj_arena *a, jj_buf *b, jj_val v, int indent, int sort, int level) {
    char tmp[48];
    if (level > 200) return AK_FAIL(AK_ERR_INVALID_ARG, "tojson: nesting deeper than 200");
    switch (v.t) {
    case JJ_NONE: return put_s(a, b, "null") ? AK_OK : AK_ERR_NO_MEMORY;
    case JJ_BOOL: return put_s(a, b, v.u.b ? "true" : "false") ? AK_OK : AK_ERR_NO_MEMORY;
    case JJ_INT:
        snprintf(tmp, sizeof tmp, "%lld", (long long)v.u.i);
        return put_s(a, b, tmp) ? AK_OK : AK_ERR_NO_MEMORY;
    case JJ_FLOAT:
        if (isnan(v.u.f)) strcpy(tmp, "NaN");
        else if (isinf(v.u.f)) strcpy(tmp, v.u.f < 0 ? "-Infinity" : "Infinity");
        else ak__jj_float_repr(v.u.f, tmp);
        return put_s(a, b, tmp) ? AK_OK : AK_ERR_NO_MEMORY;
    case JJ_STR: return json_string(a, b, v.u.s.p, v.u.s.n) ? AK_OK : AK_ERR_NO_MEMORY;
    case JJ_LIST: {
        if (v.u.l->n == 0) return put_s(a, b, "[]") ? AK_OK : AK_ERR_NO_MEMORY;
        if (!put_s(a, b, "[")) return AK_ERR_NO_MEMORY;
        for (size_t i = 0; i < v.u.l->n; i++) {
            if (i && !put_s(a, b, indent >= 0 ? "," : ", ")) return AK_ERR_NO_MEMORY;
            if (indent >= 0 && !newline_indent(a, b, indent, level + 1)) return AK_ERR_NO_MEMORY;
            AK_CHECK(json_value(a, b, v.u.l->v[i], indent, sort, level + 1));
        }
        if (indent >= 0 && !newline_indent(a, b, indent, level)) return AK_ERR_NO_MEMORY;
        return put_s(a, b, "]") ? AK_OK : AK_ERR_NO_MEMORY;
    }
    case JJ_DICT:
        if (!v.u.d->is_ns) return json_dict(a, b, v.u.d, indent, sort, level);
        return AK_FAIL(AK_ERR_INVALID_ARG, "tojson: a namespace is not JSON serializable");
    case JJ_UNDEF:
        return AK_FAIL(AK_ERR_INVALID_ARG, "tojson: an undefined value ('%.*s') is not JSON "
                       "serializable", (int)v.u.s.n, v.u.s.p ? v.u.s.p : "");
    default:
        return AK_FAIL(AK_ERR_INVALID_ARG, "tojson: a callable is not JSON serializable");
    }
}

ak_status ak__jj_tojson(jj_arena *a, jj_buf *b, jj_val v, int indent, int sort_keys) {
    ak_status st = json_value(a, b, v, indent, sort_keys, 0);
    if (st == AK_ERR_NO_MEMORY) return AK_FAIL(st, "chat template: out of memory in tojson");
    return st;
}

/* ---- UTF-8 --------------------------------------------------------------------------- */

size_t ak__jj_utf8_len(const char *s, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) k += ((unsigned char)s[i] & 0xc0) != 0x80;
    return k;
}

size_t ak__jj_utf8_offset(const char *s, size_t n, size_t cp) {
    size_t i = 0;
    for (; i < n; i++) {
        if (((unsigned char)s[i] & 0xc0) == 0x80) continue;
        if (cp == 0) return i;
        cp--;
    }
    return n;
}

/* Python's str.isspace() code points, as UTF-8. */
size_t ak__jj_space_at(const char *text, size_t n) {
    const unsigned char *s = (const unsigned char *)text;
    unsigned c = s[0];
    if (c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f)) return 1;
    if (c == 0xc2 && n >= 2 && (s[1] == 0x85 || s[1] == 0xa0)) return 2;
    if (n < 3 || (c & 0xf0) != 0xe0 || (s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80) return 0;
    unsigned cp = ((c & 0x0fu) << 12) | ((s[1] & 0x3fu) << 6) | (s[2] & 0x3fu);
    if (cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 ||
        cp == 0x202f || cp == 0x205f || cp == 0x3000)
        return 3;
    return 0;
}

size_t ak__jj_space_before(const char *text, size_t n) {
    const unsigned char *s = (const unsigned char *)text;
    for (size_t k = 1; k <= 3 && k <= n; k++) {
        if ((s[n - k] & 0xc0) == 0x80) continue;
        return ak__jj_space_at(text + n - k, k) == k ? k : 0;
    }
    return 0;
}
