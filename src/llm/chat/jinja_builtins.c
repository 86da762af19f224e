/* Builtins of the Jinja interpreter: the filters, tests, str/dict/list methods and
 * globals (range, namespace, dict, raise_exception, strftime_now) that chat templates
 * use, each with Jinja2's / Python's semantics. A keyword argument a builtin does not
 * take is an error, never ignored. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <utf8proc.h>

#include "core/check.h"
#include "llm/chat/jinja.h"

/* ---- arguments ----------------------------------------------------------------------- */

/* Positional i or keyword `name`; 0 when not given. */
static int arg(const jj_args *a, size_t i, const char *name, jj_val *out) {
    for (size_t k = 0; k < a->n_kw; k++)
        if (!strcmp(a->kw[k], name)) {
            *out = a->kwv[k];
            return 1;
        }
    if (i < a->n) {
        *out = a->pos[i];
        return 1;
    }
    return 0;
}

/* At most `max_pos` positional and only keywords named in `names` (comma-separated). */
static ak_status check_args(jj_ctx *c, const char *what, const char *fn, const jj_args *a,
                            size_t max_pos, const char *names) {
    if (a->n > max_pos)
        return AK_FAIL(AK_ERR_INVALID_ARG, "chat template: line %d: %s '%s' takes at most %zu "
                       "positional argument(s), got %zu", c->line, what, fn, max_pos, a->n);
    for (size_t k = 0; k < a->n_kw; k++) {
        size_t n = strlen(a->kw[k]);
        const char *p = names;
        int found = 0;
        while (p && *p && !found) {
            const char *e = strchr(p, ',');
            size_t len = e ? (size_t)(e - p) : strlen(p);
            found = len == n && !memcmp(p, a->kw[k], n);
            p = e ? e + 1 : NULL;
        }
        if (!found)
            return AK_FAIL(AK_ERR_UNSUPPORTED, "chat template: line %d: %s '%s' has no argument "
                           "'%s' (supported: %s)", c->line, what, fn, a->kw[k],
                           *names ? names : "none");
    }
    return AK_OK;
}

static ak_status bad(jj_ctx *c, const char *fn, const char *msg) {
    return AK_FAIL(AK_ERR_INVALID_ARG, "chat template: line %d: %s: %s", c->line, fn, msg);
}

static jj_val str_val(jj_buf *b) { return jj_str(b->p ? b->p : "", b->n); }
static jj_val list_val(jj_list *l) {
    jj_val v = {JJ_LIST, 0, {0}};
    v.u.l = l;
    return v;
}
static jj_val dict_val(jj_dict *d) {
    jj_val v = {JJ_DICT, 0, {0}};
    v.u.d = d;
    return v;
}

static ak_status to_str(jj_ctx *c, jj_val v, jj_val *out) {
    if (v.t == JJ_STR) {
        *out = v;
        return AK_OK;
    }
    jj_buf b = {0};
    if (!ak__jj_str(c->ar, &b, v)) return ak__jj_oom();
    *out = str_val(&b);
    return AK_OK;
}

static int is_intlike(jj_val v) { return v.t == JJ_INT || v.t == JJ_BOOL; }
static int64_t ival(jj_val v) { return v.t == JJ_INT ? v.u.i : v.u.b; }

/* ---- Unicode case and character classes (utf8proc) ----------------------------------- */

typedef enum { CASE_UPPER, CASE_LOWER, CASE_TITLE, CASE_CAPITALIZE } case_mode;

static int is_cased_letter(int32_t cp) {
    utf8proc_category_t k = utf8proc_category(cp);
    return k == UTF8PROC_CATEGORY_LU || k == UTF8PROC_CATEGORY_LL || k == UTF8PROC_CATEGORY_LT;
}

static ak_status change_case(jj_ctx *c, jj_val s, case_mode mode, jj_val *out) {
    jj_buf b = {0};
    const utf8proc_uint8_t *p = (const utf8proc_uint8_t *)s.u.s.p;
    utf8proc_ssize_t i = 0, n = (utf8proc_ssize_t)s.u.s.n;
    int prev_cased = 0, first = 1;
    while (i < n) {
        int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate(p + i, n - i, &cp);
        if (k <= 0) return bad(c, "case change", "the string is not valid UTF-8");
        int32_t r = cp;
        switch (mode) {
        case CASE_UPPER: r = utf8proc_toupper(cp); break;
        case CASE_LOWER: r = utf8proc_tolower(cp); break;
        case CASE_CAPITALIZE: r = first ? utf8proc_totitle(cp) : utf8proc_tolower(cp); break;
        case CASE_TITLE: r = prev_cased ? utf8proc_tolower(cp) : utf8proc_totitle(cp); break;
        }
        prev_cased = is_cased_letter(cp);
        first = 0;
        utf8proc_uint8_t enc[4];
        utf8proc_ssize_t m = utf8proc_encode_char(r, enc);
        if (!ak__jj_put(c->ar, &b, (const char *)enc, (size_t)m)) return ak__jj_oom();
        i += k;
    }
    *out = str_val(&b);
    return AK_OK;
}

/* ---- strings ------------------------------------------------------------------------- */

/* Whether s[0..n) starts with one of `chars` (a set of code points); its length or 0. */
static size_t char_in_set(const char *s, size_t n, jj_val chars) {
    size_t k = ak__jj_utf8_offset(s, n, 1);
    for (size_t i = 0; i < chars.u.s.n;) {
        size_t e = ak__jj_utf8_offset(chars.u.s.p + i, chars.u.s.n - i, 1);
        if (e == k && !memcmp(chars.u.s.p + i, s, k)) return k;
        i += e;
    }
    return 0;
}

static size_t char_before_in_set(const char *s, size_t n, jj_val chars) {
    size_t k = 1;
    while (k < n && ((unsigned char)s[n - k] & 0xc0) == 0x80) k++;
    return char_in_set(s + n - k, k, chars) == k ? k : 0;
}

/* str.strip / lstrip / rstrip with optional chars (None = whitespace). */
static jj_val strip(jj_val s, int left, int right, const jj_val *chars) {
    const char *p = s.u.s.p;
    size_t b = 0, n = s.u.s.n, k;
    int ws = !chars || chars->t == JJ_NONE;
    while (left && b < n && (k = ws ? ak__jj_space_at(p + b, n - b) : char_in_set(p + b, n - b, *chars)) > 0)
        b += k;
    while (right && n > b &&
           (k = ws ? ak__jj_space_before(p + b, n - b) : char_before_in_set(p + b, n - b, *chars)) > 0)
        n -= k;
    return jj_str(p + b, n - b);
}

static const char *find_sub(const char *s, size_t n, const char *sub, size_t m) {
    if (m == 0) return s;
    for (size_t i = 0; i + m <= n; i++)
        if (!memcmp(s + i, sub, m)) return s + i;
    return NULL;
}

static ak_status replace(jj_ctx *c, jj_val s, jj_val old, jj_val new_, int64_t count,
                         jj_val *out) {
    jj_buf b = {0};
    const char *p = s.u.s.p, *end = p + s.u.s.n;
    if (old.u.s.n == 0) { /* Python inserts `new` between every code point */
        size_t n_cp = ak__jj_utf8_len(p, s.u.s.n);
        for (size_t i = 0; i <= n_cp; i++) {
            if (count < 0 || (int64_t)i < count)
                if (!ak__jj_put(c->ar, &b, new_.u.s.p, new_.u.s.n)) return ak__jj_oom();
            if (i == n_cp) break;
            size_t k = ak__jj_utf8_offset(p, (size_t)(end - p), 1);
            if (!ak__jj_put(c->ar, &b, p, k)) return ak__jj_oom();
            p += k;
        }
        *out = str_val(&b);
        return AK_OK;
    }
    for (int64_t done = 0; count < 0 || done < count; done++) {
        const char *hit = find_sub(p, (size_t)(end - p), old.u.s.p, old.u.s.n);
        if (!hit) break;
        if (!ak__jj_put(c->ar, &b, p, (size_t)(hit - p)) ||
            !ak__jj_put(c->ar, &b, new_.u.s.p, new_.u.s.n))
            return ak__jj_oom();
        p = hit + old.u.s.n;
    }
    if (!ak__jj_put(c->ar, &b, p, (size_t)(end - p))) return ak__jj_oom();
    *out = str_val(&b);
    return AK_OK;
}

/* str.split(sep=None, maxsplit=-1). */
static ak_status split(jj_ctx *c, jj_val s, jj_val sep, int64_t maxsplit, jj_val *out) {
    jj_list *l = ak__jj_list_new(c->ar, 0);
    if (!l) return ak__jj_oom();
    const char *p = s.u.s.p;
    size_t n = s.u.s.n, i = 0, k;
    if (sep.t == JJ_NONE || sep.t == JJ_UNDEF) {
        for (int64_t parts = 0;; parts++) {
            while (i < n && (k = ak__jj_space_at(p + i, n - i)) > 0) i += k;
            if (i >= n) break;
            size_t start = i;
            if (maxsplit >= 0 && parts >= maxsplit) {
                jj_val rest = strip(jj_str(p + start, n - start), 0, 1, NULL);
                if (!ak__jj_list_push(c->ar, l, rest)) return ak__jj_oom();
                break;
            }
            while (i < n && ak__jj_space_at(p + i, n - i) == 0) i++;
            if (!ak__jj_list_push(c->ar, l, jj_str(p + start, i - start))) return ak__jj_oom();
        }
        *out = list_val(l);
        return AK_OK;
    }
    if (sep.t != JJ_STR || sep.u.s.n == 0) return bad(c, "split", "empty or non-string separator");
    for (int64_t parts = 0;; parts++) {
        const char *hit = maxsplit >= 0 && parts >= maxsplit
                              ? NULL : find_sub(p + i, n - i, sep.u.s.p, sep.u.s.n);
        size_t e = hit ? (size_t)(hit - p) : n;
        if (!ak__jj_list_push(c->ar, l, jj_str(p + i, e - i))) return ak__jj_oom();
        if (!hit) break;
        i = e + sep.u.s.n;
    }
    *out = list_val(l);
    return AK_OK;
}

/* Python's str.splitlines() line breaks: their length at s, or 0. */
static size_t line_break_at(const char *s, size_t n) {
    unsigned char c = (unsigned char)s[0];
    if (c == '\r') return n > 1 && s[1] == '\n' ? 2 : 1;
    if (c == '\n' || c == 0x0b || c == 0x0c || (c >= 0x1c && c <= 0x1e)) return 1;
    if (c == 0xc2 && n > 1 && (unsigned char)s[1] == 0x85) return 2;
    if (c == 0xe2 && n > 2 && (unsigned char)s[1] == 0x80 &&
        ((unsigned char)s[2] == 0xa8 || (unsigned char)s[2] == 0xa9))
        return 3;
    return 0;
}

static ak_status splitlines(jj_ctx *c, jj_val s, jj_list **out) {
    jj_list *l = ak__jj_list_new(c->ar, 0);
    if (!l) return ak__jj_oom();
    size_t i = 0, start = 0, k;
    while (i < s.u.s.n) {
        if ((k = line_break_at(s.u.s.p + i, s.u.s.n - i)) == 0) {
            i++;
            continue;
        }
        if (!ak__jj_list_push(c->ar, l, jj_str(s.u.s.p + start, i - start))) return ak__jj_oom();
        i += k;
        start = i;
    }
    if (start < s.u.s.n && !ak__jj_list_push(c->ar, l, jj_str(s.u.s.p + start, s.u.s.n - start)))
        return ak__jj_oom();
    *out = l;
    return AK_OK;
}

/* Jinja2's indent filter (3.x): the first line and blank lines stay as they are unless
 * `first` / `blank`. */
static ak_status indent(jj_ctx *c, jj_val s, jj_val width, int first, int blank, jj_val *out) {
    jj_val pad;
    jj_buf pb = {0}, b = {0};
    if (width.t == JJ_STR) pad = width;
    else {
        for (int64_t i = 0; i < ival(width); i++)
            if (!ak__jj_put(c->ar, &pb, " ", 1)) return ak__jj_oom();
        pad = str_val(&pb);
    }
    jj_buf sb = {0};
    if (!ak__jj_put(c->ar, &sb, s.u.s.p, s.u.s.n) || !ak__jj_put(c->ar, &sb, "\n", 1))
        return ak__jj_oom();
    jj_list *lines;
    AK_CHECK(splitlines(c, str_val(&sb), &lines));
    if (first && !ak__jj_put(c->ar, &b, pad.u.s.p, pad.u.s.n)) return ak__jj_oom();
    for (size_t i = 0; i < lines->n; i++) {
        jj_val line = lines->v[i];
        if (i > 0) {
            if (!ak__jj_put(c->ar, &b, "\n", 1)) return ak__jj_oom();
            if ((blank || line.u.s.n) && !ak__jj_put(c->ar, &b, pad.u.s.p, pad.u.s.n))
                return ak__jj_oom();
        }
        if (!ak__jj_put(c->ar, &b, line.u.s.p, line.u.s.n)) return ak__jj_oom();
    }
    *out = str_val(&b);
    return AK_OK;
}

ak_status ak__jj_html_escape(jj_ctx *c, jj_val s, jj_val *out) {
    if (s.tuple) { /* already Markup */
        *out = s;
        return AK_OK;
    }
    jj_buf b = {0};
    for (size_t i = 0; i < s.u.s.n; i++) {
        const char *r = NULL;
        switch (s.u.s.p[i]) {
        case '&': r = "&amp;"; break;
        case '<': r = "&lt;"; break;
        case '>': r = "&gt;"; break;
        case '"': r = "&#34;"; break;
        case '\'': r = "&#39;"; break;
        }
        if (r ? !ak__jj_put(c->ar, &b, r, strlen(r)) : !ak__jj_put(c->ar, &b, s.u.s.p + i, 1))
            return ak__jj_oom();
    }
    *out = str_val(&b);
    out->tuple = 1;
    return AK_OK;
}

/* "%s" % args with %s, %d, %i, %r and %%. */
static ak_status percent_format(jj_ctx *c, jj_val fmt, const jj_args *a, jj_val *out) {
    jj_buf b = {0};
    size_t next = 0;
    for (size_t i = 0; i < fmt.u.s.n; i++) {
        char ch = fmt.u.s.p[i];
        if (ch != '%') {
            if (!ak__jj_put(c->ar, &b, &ch, 1)) return ak__jj_oom();
            continue;
        }
        char spec = i + 1 < fmt.u.s.n ? fmt.u.s.p[++i] : 0;
        if (spec == '%') {
            if (!ak__jj_put(c->ar, &b, "%", 1)) return ak__jj_oom();
            continue;
        }
        if (spec != 's' && spec != 'd' && spec != 'i' && spec != 'r')
            return AK_FAIL(AK_ERR_UNSUPPORTED, "chat template: line %d: format: '%%%c' is not "
                           "supported (%%s, %%d, %%r)", c->line, spec ? spec : ' ');
        if (next >= a->n) return bad(c, "format", "not enough arguments for format string");
        jj_val v = a->pos[next++];
        int ok;
        if (spec == 'r') ok = ak__jj_repr(c->ar, &b, v);
        else if (spec != 's' && !is_intlike(v) && v.t != JJ_FLOAT)
            return bad(c, "format", "%d needs a number");
        else ok = ak__jj_str(c->ar, &b, spec != 's' && v.t == JJ_FLOAT ? jj_int((int64_t)v.u.f) : v);
        if (!ok) return ak__jj_oom();
    }
    if (next != a->n) return bad(c, "format", "not all arguments converted during string formatting");
    *out = str_val(&b);
    return AK_OK;
}

/* ---- sequences ----------------------------------------------------------------------- */

static ak_status as_list(jj_ctx *c, jj_val v, const char *fn, jj_list **out) {
    switch (v.t) {
    case JJ_LIST: *out = v.u.l; return AK_OK;
    case JJ_UNDEF: *out = ak__jj_list_new(c->ar, 0); return *out ? AK_OK : ak__jj_oom();
    case JJ_DICT:
        if (v.u.d->is_ns) break;
        *out = ak__jj_list_new(c->ar, v.u.d->n);
        if (!*out) return ak__jj_oom();
        for (size_t i = 0; i < v.u.d->n; i++) (*out)->v[(*out)->n++] = v.u.d->k[i];
        return AK_OK;
    case JJ_STR:
        *out = ak__jj_list_new(c->ar, 0);
        if (!*out) return ak__jj_oom();
        for (size_t i = 0; i < v.u.s.n;) {
            size_t e = ak__jj_utf8_offset(v.u.s.p + i, v.u.s.n - i, 1);
            if (!ak__jj_list_push(c->ar, *out, jj_str(v.u.s.p + i, e))) return ak__jj_oom();
            i += e;
        }
        return AK_OK;
    default: break;
    }
    char msg[64];
    snprintf(msg, sizeof msg, "a %s is not iterable",
             v.t == JJ_NONE ? "None" : v.t == JJ_INT ? "int" : v.t == JJ_FLOAT ? "float"
             : v.t == JJ_BOOL ? "bool" : "value of this type");
    return bad(c, fn, msg);
}

/* Attribute "a.b.0" of an item, as Jinja's make_attrgetter walks it. */
static ak_status attr_path(jj_ctx *c, jj_val v, jj_val path, jj_val *out) {
    if (path.t == JJ_INT) {
        if (v.t == JJ_LIST) {
            int64_t i = path.u.i < 0 ? path.u.i + (int64_t)v.u.l->n : path.u.i;
            *out = i >= 0 && i < (int64_t)v.u.l->n ? v.u.l->v[i] : jj_undef("item");
        } else {
            *out = jj_undef("item");
        }
        return AK_OK;
    }
    if (path.t != JJ_STR) return bad(c, "attribute", "must be a string or an integer");
    const char *p = path.u.s.p, *end = p + path.u.s.n;
    while (p <= end) {
        const char *dot = memchr(p, '.', (size_t)(end - p));
        size_t n = dot ? (size_t)(dot - p) : (size_t)(end - p);
        int is_num = n > 0;
        for (size_t i = 0; i < n; i++) is_num &= p[i] >= '0' && p[i] <= '9';
        if (v.t == JJ_UNDEF) break;
        if (is_num && v.t == JJ_LIST) {
            size_t idx = (size_t)strtoull(p, NULL, 10);
            v = idx < v.u.l->n ? v.u.l->v[idx] : jj_undef("item");
        } else if (v.t == JJ_DICT && !v.u.d->is_ns) {
            jj_val *hit = ak__jj_dict_get(v.u.d, p, n);
            if (hit) v = *hit;
            else AK_CHECK(ak__jj_getattr(c, v, p, n, &v));
        } else {
            AK_CHECK(ak__jj_getattr(c, v, p, n, &v));
        }
        if (!dot) break;
        p = dot + 1;
    }
    *out = v;
    return AK_OK;
}

/* select / reject / selectattr / rejectattr. */
static ak_status select_items(jj_ctx *c, const char *fn, jj_val seq, const jj_args *a, int by_attr,
                              int keep_if, jj_val *out) {
    jj_list *in, *kept = ak__jj_list_new(c->ar, 0);
    if (!kept) return ak__jj_oom();
    *out = list_val(kept);
    if (!ak__jj_truthy(seq)) return AK_OK; /* Jinja2: a false value selects nothing */
    AK_CHECK(as_list(c, seq, fn, &in));
    size_t first_arg = by_attr ? 1 : 0;
    if (by_attr && a->n < 1) return bad(c, fn, "needs an attribute name");
    if (a->n_kw) return bad(c, fn, "takes no keyword arguments");
    jj_val test_name = a->n > first_arg ? a->pos[first_arg] : jj_none();
    if (test_name.t != JJ_NONE && test_name.t != JJ_STR) return bad(c, fn, "the test must be a name");
    char name[64] = "";
    if (test_name.t == JJ_STR) {
        size_t n = test_name.u.s.n < sizeof name ? test_name.u.s.n : sizeof name - 1;
        memcpy(name, test_name.u.s.p, n);
        name[n] = '\0';
        if (n != test_name.u.s.n || !ak__jj_is_test(name))
            return AK_FAIL(AK_ERR_UNSUPPORTED, "chat template: line %d: %s: test '%.*s' is not "
                           "supported", c->line, fn, (int)test_name.u.s.n, test_name.u.s.p);
    }
    int has_targs = a->n > first_arg + 1;
    jj_args targs = {has_targs ? a->pos + first_arg + 1 : NULL,
                     has_targs ? a->n - first_arg - 1 : 0, NULL, NULL, 0};
    for (size_t i = 0; i < in->n; i++) {
        jj_val v = in->v[i];
        if (by_attr) AK_CHECK(attr_path(c, v, a->pos[0], &v));
        int r;
        if (name[0]) AK_CHECK(ak__jj_test(c, name, v, &targs, &r));
        else r = ak__jj_truthy(v);
        if (r == keep_if && !ak__jj_list_push(c->ar, kept, in->v[i])) return ak__jj_oom();
    }
    *out = list_val(kept);
    return AK_OK;
}

static ak_status map_items(jj_ctx *c, jj_val seq, const jj_args *a, jj_val *out) {
    jj_list *in, *res = ak__jj_list_new(c->ar, 0);
    if (!res) return ak__jj_oom();
    *out = list_val(res);
    if (!ak__jj_truthy(seq)) return AK_OK; /* Jinja2: a false value maps to nothing */
    AK_CHECK(as_list(c, seq, "map", &in));
    jj_val attr, def;
    int has_attr = arg(a, 99, "attribute", &attr), has_def = arg(a, 99, "default", &def);
    if (has_attr) AK_CHECK(check_args(c, "filter", "map", a, 0, "attribute,default"));
    else if (a->n < 1 || a->pos[0].t != JJ_STR) return bad(c, "map", "needs attribute= or a filter name");
    char *fname = has_attr ? NULL : ak__jj_strdup(c->ar, a->pos[0].u.s.p, a->pos[0].u.s.n);
    if (!has_attr && !ak__jj_is_filter(fname))
        return AK_FAIL(AK_ERR_UNSUPPORTED, "chat template: line %d: map: filter '%s' is not "
                       "supported", c->line, fname);
    jj_args fargs = {a->n > 1 ? a->pos + 1 : NULL, a->n > 1 ? a->n - 1 : 0, a->kw, a->kwv, a->n_kw};
    for (size_t i = 0; i < in->n; i++) {
        jj_val v;
        if (has_attr) {
            AK_CHECK(attr_path(c, in->v[i], attr, &v));
            if (v.t == JJ_UNDEF && has_def) v = def;
        } else {
            AK_CHECK(ak__jj_filter(c, fname, in->v[i], &fargs, &v));
        }
        if (!ak__jj_list_push(c->ar, res, v)) return ak__jj_oom();
    }
    *out = list_val(res);
    return AK_OK;
}

/* Sort keys: strings lowered unless case_sensitive. */
static ak_status sort_key(jj_ctx *c, jj_val v, int case_sensitive, jj_val *out) {
    if (v.t == JJ_STR && !case_sensitive) return change_case(c, v, CASE_LOWER, out);
    *out = v;
    return AK_OK;
}

/* Stable insertion sort of items by keys. */
static ak_status sort_by_keys(jj_ctx *c, jj_val *items, jj_val *keys, size_t n, int reverse) {
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0; j--) {
            int cmp;
            AK_CHECK(ak__jj_compare(c, keys[j], keys[j - 1], &cmp));
            if (reverse ? cmp <= 0 : cmp >= 0) break;
            jj_val t = items[j]; items[j] = items[j - 1]; items[j - 1] = t;
            t = keys[j]; keys[j] = keys[j - 1]; keys[j - 1] = t;
        }
    return AK_OK;
}

static ak_status sort_list(jj_ctx *c, jj_val seq, const jj_args *a, jj_val *out) {
    AK_CHECK(check_args(c, "filter", "sort", a, 3, "reverse,case_sensitive,attribute"));
    jj_val rv = jj_bool(0), cs = jj_bool(0), attr = jj_none();
    arg(a, 0, "reverse", &rv);
    arg(a, 1, "case_sensitive", &cs);
    arg(a, 2, "attribute", &attr);
    jj_list *in;
    AK_CHECK(as_list(c, seq, "sort", &in));
    jj_list *res = ak__jj_list_new(c->ar, in->n);
    jj_val *keys = ak__jj_alloc(c->ar, (in->n + 1) * sizeof *keys);
    if (!res || !keys) return ak__jj_oom();
    for (size_t i = 0; i < in->n; i++) {
        res->v[res->n++] = in->v[i];
        jj_val k = in->v[i];
        if (attr.t != JJ_NONE) AK_CHECK(attr_path(c, k, attr, &k));
        AK_CHECK(sort_key(c, k, ak__jj_truthy(cs), &keys[i]));
    }
    AK_CHECK(sort_by_keys(c, res->v, keys, res->n, ak__jj_truthy(rv)));
    *out = list_val(res);
    return AK_OK;
}

static ak_status dict_items(jj_ctx *c, const jj_dict *d, jj_val *out) {
    jj_list *l = ak__jj_list_new(c->ar, d->n);
    if (!l) return ak__jj_oom();
    for (size_t i = 0; i < d->n; i++) {
        jj_list *pair = ak__jj_list_new(c->ar, 2);
        if (!pair) return ak__jj_oom();
        pair->v[0] = d->k[i];
        pair->v[1] = d->v[i];
        pair->n = 2;
        l->v[l->n] = list_val(pair);
        l->v[l->n++].tuple = 1;
    }
    *out = list_val(l);
    return AK_OK;
}

static ak_status dictsort(jj_ctx *c, jj_val v, const jj_args *a, jj_val *out) {
    AK_CHECK(check_args(c, "filter", "dictsort", a, 3, "case_sensitive,by,reverse"));
    if (v.t != JJ_DICT || v.u.d->is_ns) return bad(c, "dictsort", "needs a dict");
    jj_val cs = jj_bool(0), by = jj_str("key", 3), rv = jj_bool(0);
    arg(a, 0, "case_sensitive", &cs);
    arg(a, 1, "by", &by);
    arg(a, 2, "reverse", &rv);
    int by_value = by.t == JJ_STR && by.u.s.n == 5 && !memcmp(by.u.s.p, "value", 5);
    if (!by_value && !(by.t == JJ_STR && by.u.s.n == 3 && !memcmp(by.u.s.p, "key", 3)))
        return bad(c, "dictsort", "by must be 'key' or 'value'");
    AK_CHECK(dict_items(c, v.u.d, out));
    jj_list *l = out->u.l;
    jj_val *keys = ak__jj_alloc(c->ar, (l->n + 1) * sizeof *keys);
    if (!keys) return ak__jj_oom();
    for (size_t i = 0; i < l->n; i++)
        AK_CHECK(sort_key(c, l->v[i].u.l->v[by_value], ak__jj_truthy(cs), &keys[i]));
    return sort_by_keys(c, l->v, keys, l->n, ak__jj_truthy(rv));
}

static ak_status unique(jj_ctx *c, jj_val seq, const jj_args *a, jj_val *out) {
    AK_CHECK(check_args(c, "filter", "unique", a, 2, "case_sensitive,attribute"));
    jj_val cs = jj_bool(0), attr = jj_none();
    arg(a, 0, "case_sensitive", &cs);
    arg(a, 1, "attribute", &attr);
    jj_list *in, *res = ak__jj_list_new(c->ar, 0), *seen = ak__jj_list_new(c->ar, 0);
    if (!res || !seen) return ak__jj_oom();
    AK_CHECK(as_list(c, seq, "unique", &in));
    for (size_t i = 0; i < in->n; i++) {
        jj_val k = in->v[i];
        if (attr.t != JJ_NONE) AK_CHECK(attr_path(c, k, attr, &k));
        AK_CHECK(sort_key(c, k, ak__jj_truthy(cs), &k));
        int dup = 0;
        for (size_t j = 0; j < seen->n && !dup; j++) dup = ak__jj_equal(seen->v[j], k);
        if (dup) continue;
        if (!ak__jj_list_push(c->ar, seen, k) || !ak__jj_list_push(c->ar, res, in->v[i]))
            return ak__jj_oom();
    }
    *out = list_val(res);
    return AK_OK;
}

static ak_status min_max(jj_ctx *c, const char *fn, jj_val seq, const jj_args *a, int want_max,
                         jj_val *out) {
    AK_CHECK(check_args(c, "filter", fn, a, 2, "case_sensitive,attribute"));
    jj_val cs = jj_bool(0), attr = jj_none();
    arg(a, 0, "case_sensitive", &cs);
    arg(a, 1, "attribute", &attr);
    jj_list *in;
    AK_CHECK(as_list(c, seq, fn, &in));
    *out = jj_undef(fn);
    jj_val best_key = jj_none();
    for (size_t i = 0; i < in->n; i++) {
        jj_val k = in->v[i];
        if (attr.t != JJ_NONE) AK_CHECK(attr_path(c, k, attr, &k));
        AK_CHECK(sort_key(c, k, ak__jj_truthy(cs), &k));
        int cmp = 1;
        if (i > 0) AK_CHECK(ak__jj_compare(c, k, best_key, &cmp));
        if (i == 0 || (want_max ? cmp > 0 : cmp < 0)) *out = in->v[i], best_key = k;
    }
    return AK_OK;
}

static ak_status join(jj_ctx *c, jj_val seq, const jj_args *a, jj_val *out) {
    AK_CHECK(check_args(c, "filter", "join", a, 2, "d,attribute"));
    jj_val sep = jj_str("", 0), attr = jj_none();
    arg(a, 0, "d", &sep);
    arg(a, 1, "attribute", &attr);
    AK_CHECK(to_str(c, sep, &sep));
    jj_list *in;
    AK_CHECK(as_list(c, seq, "join", &in));
    jj_buf b = {0};
    for (size_t i = 0; i < in->n; i++) {
        jj_val v = in->v[i];
        if (attr.t != JJ_NONE) AK_CHECK(attr_path(c, v, attr, &v));
        if ((i && !ak__jj_put(c->ar, &b, sep.u.s.p, sep.u.s.n)) || !ak__jj_str(c->ar, &b, v))
            return ak__jj_oom();
    }
    *out = str_val(&b);
    return AK_OK;
}

/* Python's round(x, ndigits) (half to even on the exact binary value), or floor / ceil. */
static double round_to(double x, int64_t digits, char method) {
    if (method == 'f' || method == 'c') {
        double m = pow(10.0, (double)digits);
        return (method == 'f' ? floor(x * m) : ceil(x * m)) / m;
    }
    if (digits == 0) return nearbyint(x);
    char buf[400];
    if (digits > 0 && digits < 300) {
        snprintf(buf, sizeof buf, "%.*f", (int)digits, x);
        return strtod(buf, NULL);
    }
    double m = pow(10.0, (double)-digits);
    return nearbyint(x / m) * m;
}

/* ---- filters ------------------------------------------------------------------------- */

static const char *const k_filters[] = {
    "abs", "capitalize", "count", "d", "default", "dictsort", "e", "escape", "first", "float",
    "format", "indent", "int", "items", "join", "last", "length", "list", "lower", "map", "max",
    "min", "reject", "rejectattr", "replace", "reverse", "round", "safe", "select", "selectattr",
    "sort", "string", "sum", "title", "tojson", "trim", "unique", "upper", "wordcount"};

int ak__jj_is_filter(const char *name) {
    for (size_t i = 0; i < sizeof k_filters / sizeof k_filters[0]; i++)
        if (!strcmp(name, k_filters[i])) return 1;
    return 0;
}

static ak_status need_str(jj_ctx *c, const char *fn, jj_val v, jj_val *out) {
    if (v.t == JJ_UNDEF)
        return AK_FAIL(AK_ERR_INVALID_ARG, "chat template: line %d: '%.*s' is undefined", c->line,
                       (int)v.u.s.n, v.u.s.p ? v.u.s.p : "");
    (void)fn;
    return to_str(c, v, out);
}

static ak_status filter_length(jj_ctx *c, jj_val v, jj_val *out) {
    switch (v.t) {
    case JJ_UNDEF: *out = jj_int(0); return AK_OK;
    case JJ_STR: *out = jj_int((int64_t)ak__jj_utf8_len(v.u.s.p, v.u.s.n)); return AK_OK;
    case JJ_LIST: *out = jj_int((int64_t)v.u.l->n); return AK_OK;
    case JJ_DICT: if (!v.u.d->is_ns) { *out = jj_int((int64_t)v.u.d->n); return AK_OK; } break;
    case JJ_LOOP: *out = jj_int((int64_t)v.u.loop->items->n); return AK_OK;
    default: break;
    }
    return bad(c, "length", "the value has no length");
}

static ak_status filter_to_number(jj_ctx *c, jj_val v, const jj_args *a, int want_int,
                                  jj_val *out) {
    AK_CHECK(check_args(c, "filter", want_int ? "int" : "float", a, want_int ? 2 : 1,
                        want_int ? "default,base" : "default"));
    jj_val def = want_int ? jj_int(0) : jj_float(0.0);
    arg(a, 0, "default", &def);
    double f = 0;
    int ok = 1;
    if (v.t == JJ_INT || v.t == JJ_BOOL) f = (double)ival(v);
    else if (v.t == JJ_FLOAT) f = v.u.f;
    else if (v.t == JJ_STR) {
        jj_val t = strip(v, 1, 1, NULL);
        char buf[64];
        if (t.u.s.n == 0 || t.u.s.n >= sizeof buf) ok = 0;
        else {
            memcpy(buf, t.u.s.p, t.u.s.n);
            buf[t.u.s.n] = '\0';
            char *end;
            if (want_int) {
                long long x = strtoll(buf, &end, 10);
                if (*end) { f = strtod(buf, &end); ok = !*end; if (ok) { *out = jj_int((int64_t)f); return AK_OK; } }
                else { *out = jj_int(x); return AK_OK; }
            } else {
                f = strtod(buf, &end);
                ok = !*end;
            }
        }
    } else ok = 0;
    if (!ok) *out = def;
    else *out = want_int ? jj_int((int64_t)f) : jj_float(f);
    return AK_OK;
}

static ak_status filter_tojson(jj_ctx *c, jj_val v, const jj_args *a, jj_val *out) {
    AK_CHECK(check_args(c, "filter", "tojson", a, 4, "ensure_ascii,indent,separators,sort_keys"));
    jj_val ea = jj_bool(0), ind = jj_none(), sep = jj_none(), sk = jj_bool(0);
    arg(a, 0, "ensure_ascii", &ea);
    arg(a, 1, "indent", &ind);
    arg(a, 2, "separators", &sep);
    arg(a, 3, "sort_keys", &sk);
    if (ak__jj_truthy(ea) || sep.t != JJ_NONE)
        return AK_FAIL(AK_ERR_UNSUPPORTED, "chat template: line %d: tojson: ensure_ascii=True and "
                       "separators are not supported", c->line);
    if (ind.t != JJ_NONE && !is_intlike(ind)) return bad(c, "tojson", "indent must be an integer");
    jj_buf b = {0};
    AK_CHECK(ak__jj_tojson(c->ar, &b, v, ind.t == JJ_NONE ? -1 : (int)ival(ind), ak__jj_truthy(sk)));
    *out = str_val(&b);
    return AK_OK;
}

static ak_status filter_sum(jj_ctx *c, jj_val seq, const jj_args *a, jj_val *out) {
    AK_CHECK(check_args(c, "filter", "sum", a, 2, "attribute,start"));
    jj_val attr = jj_none(), acc = jj_int(0);
    arg(a, 0, "attribute", &attr);
    arg(a, 1, "start", &acc);
    jj_list *in;
    AK_CHECK(as_list(c, seq, "sum", &in));
    for (size_t i = 0; i < in->n; i++) {
        jj_val v = in->v[i];
        if (attr.t != JJ_NONE) AK_CHECK(attr_path(c, v, attr, &v));
        if (!(is_intlike(v) || v.t == JJ_FLOAT) || !(is_intlike(acc) || acc.t == JJ_FLOAT))
            return bad(c, "sum", "only numbers can be summed");
        acc = is_intlike(v) && is_intlike(acc) ? jj_int(ival(acc) + ival(v))
              : jj_float((acc.t == JJ_FLOAT ? acc.u.f : (double)ival(acc)) +
                         (v.t == JJ_FLOAT ? v.u.f : (double)ival(v)));
    }
    *out = acc;
    return AK_OK;
}

static ak_status filter_wordcount(jj_ctx *c, jj_val s, jj_val *out) {
    /* re.findall(r"\w+"): letters, digits (categories L*, N*), and the underscore */
    const utf8proc_uint8_t *p = (const utf8proc_uint8_t *)s.u.s.p;
    utf8proc_ssize_t i = 0, n = (utf8proc_ssize_t)s.u.s.n;
    int64_t words = 0;
    int in_word = 0;
    while (i < n) {
        int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate(p + i, n - i, &cp);
        if (k <= 0) return bad(c, "wordcount", "the string is not valid UTF-8");
        utf8proc_category_t cat = utf8proc_category(cp);
        int w = cp == '_' || (cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO) ||
                (cat >= UTF8PROC_CATEGORY_ND && cat <= UTF8PROC_CATEGORY_NO);
        words += w && !in_word;
        in_word = w;
        i += k;
    }
    *out = jj_int(words);
    return AK_OK;
}

ak_status ak__jj_filter(jj_ctx *c, const char *f, jj_val v, const jj_args *a, jj_val *out) {
    jj_val s, x, y;
    jj_list *l;
#define IS(name) (!strcmp(f, name))
#define ARGS(max, names) AK_CHECK(check_args(c, "filter", f, a, (max), (names)))
    if (IS("default") || IS("d")) {
        ARGS(2, "default_value,boolean");
        jj_val def = jj_str("", 0), boolean = jj_bool(0);
        arg(a, 0, "default_value", &def);
        arg(a, 1, "boolean", &boolean);
        *out = v.t == JJ_UNDEF || (ak__jj_truthy(boolean) && !ak__jj_truthy(v)) ? def : v;
        return AK_OK;
    }
    if (IS("length") || IS("count")) { ARGS(0, ""); return filter_length(c, v, out); }
    if (IS("safe")) {
        ARGS(0, "");
        AK_CHECK(to_str(c, v, out));
        out->tuple = 1; /* Markup */
        return AK_OK;
    }
    if (IS("string")) { ARGS(0, ""); return to_str(c, v, out); }
    if (IS("tojson")) return filter_tojson(c, v, a, out);
    if (IS("items")) {
        ARGS(0, "");
        if (v.t == JJ_UNDEF) { *out = list_val(ak__jj_list_new(c->ar, 0)); return out->u.l ? AK_OK : ak__jj_oom(); }
        if (v.t != JJ_DICT || v.u.d->is_ns) return bad(c, "items", "needs a mapping");
        return dict_items(c, v.u.d, out);
    }
    if (IS("list")) {
        ARGS(0, "");
        AK_CHECK(as_list(c, v, f, &l));
        jj_list *copy = ak__jj_list_new(c->ar, l->n);
        if (!copy) return ak__jj_oom();
        for (size_t i = 0; i < l->n; i++) copy->v[copy->n++] = l->v[i];
        *out = list_val(copy);
        return AK_OK;
    }
    if (IS("first") || IS("last")) {
        ARGS(0, "");
        AK_CHECK(as_list(c, v, f, &l));
        *out = l->n ? l->v[IS("first") ? 0 : l->n - 1] : jj_undef(f);
        return AK_OK;
    }
    if (IS("reverse")) {
        ARGS(0, "");
        if (v.t == JJ_STR) {
            AK_CHECK(as_list(c, v, f, &l));
            jj_buf b = {0};
            for (size_t i = l->n; i-- > 0;)
                if (!ak__jj_put(c->ar, &b, l->v[i].u.s.p, l->v[i].u.s.n)) return ak__jj_oom();
            *out = str_val(&b);
            return AK_OK;
        }
        AK_CHECK(as_list(c, v, f, &l));
        jj_list *r = ak__jj_list_new(c->ar, l->n);
        if (!r) return ak__jj_oom();
        for (size_t i = l->n; i-- > 0;) r->v[r->n++] = l->v[i];
        *out = list_val(r);
        return AK_OK;
    }
    if (IS("join")) return join(c, v, a, out);
    if (IS("map")) return map_items(c, v, a, out);
    if (IS("select") || IS("reject")) return select_items(c, f, v, a, 0, IS("select"), out);
    if (IS("selectattr") || IS("rejectattr"))
        return select_items(c, f, v, a, 1, IS("selectattr"), out);
    if (IS("sort")) return sort_list(c, v, a, out);
    if (IS("dictsort")) return dictsort(c, v, a, out);
    if (IS("unique")) return unique(c, v, a, out);
    if (IS("min") || IS("max")) return min_max(c, f, v, a, IS("max"), out);
    if (IS("sum")) return filter_sum(c, v, a, out);
    if (IS("int") || IS("float")) return filter_to_number(c, v, a, IS("int"), out);
    if (IS("abs")) {
        ARGS(0, "");
        if (v.t == JJ_FLOAT) *out = jj_float(fabs(v.u.f));
        else if (is_intlike(v)) *out = jj_int(ival(v) < 0 ? -ival(v) : ival(v));
        else return bad(c, "abs", "needs a number");
        return AK_OK;
    }
    if (IS("round")) {
        ARGS(2, "precision,method");
        jj_val prec = jj_int(0), method = jj_str("common", 6);
        arg(a, 0, "precision", &prec);
        arg(a, 1, "method", &method);
        if (!is_intlike(v) && v.t != JJ_FLOAT) return bad(c, "round", "needs a number");
        if (!is_intlike(prec) || method.t != JJ_STR) return bad(c, "round", "bad arguments");
        char m = 0;
        if (method.u.s.n == 6 && !memcmp(method.u.s.p, "common", 6)) m = 'r';
        else if (method.u.s.n == 4 && !memcmp(method.u.s.p, "ceil", 4)) m = 'c';
        else if (method.u.s.n == 5 && !memcmp(method.u.s.p, "floor", 5)) m = 'f';
        else return bad(c, "round", "method must be common, ceil or floor");
        double x0 = v.t == JJ_FLOAT ? v.u.f : (double)ival(v);
        *out = jj_float(round_to(x0, ival(prec), m));
        return AK_OK;
    }
    if (IS("format")) {
        AK_CHECK(need_str(c, f, v, &s));
        if (a->n_kw) return AK_FAIL(AK_ERR_UNSUPPORTED, "chat template: line %d: format with "
                                    "keyword arguments is not supported", c->line);
        return percent_format(c, s, a, out);
    }
    /* the string filters */
    AK_CHECK(need_str(c, f, v, &s));
    if (IS("trim")) {
        ARGS(1, "chars");
        jj_val chars = jj_none();
        arg(a, 0, "chars", &chars);
        *out = strip(s, 1, 1, &chars);
        return AK_OK;
    }
    if (IS("upper")) { ARGS(0, ""); return change_case(c, s, CASE_UPPER, out); }
    if (IS("lower")) { ARGS(0, ""); return change_case(c, s, CASE_LOWER, out); }
    if (IS("capitalize")) { ARGS(0, ""); return change_case(c, s, CASE_CAPITALIZE, out); }
    if (IS("title")) { ARGS(0, ""); return change_case(c, s, CASE_TITLE, out); }
    if (IS("escape") || IS("e")) { ARGS(0, ""); return ak__jj_html_escape(c, s, out); }
    if (IS("wordcount")) { ARGS(0, ""); return filter_wordcount(c, s, out); }
    if (IS("replace")) {
        ARGS(3, "old,new,count");
        jj_val n = jj_none();
        if (!arg(a, 0, "old", &x) || !arg(a, 1, "new", &y)) return bad(c, f, "needs old and new");
        arg(a, 2, "count", &n);
        AK_CHECK(to_str(c, x, &x));
        AK_CHECK(to_str(c, y, &y));
        return replace(c, s, x, y, is_intlike(n) ? ival(n) : -1, out);
    }
    if (IS("indent")) {
        ARGS(3, "width,first,blank");
        jj_val w = jj_int(4), first = jj_bool(0), blank = jj_bool(0);
        arg(a, 0, "width", &w);
        arg(a, 1, "first", &first);
        arg(a, 2, "blank", &blank);
        if (!is_intlike(w) && w.t != JJ_STR) return bad(c, f, "width must be an int or a string");
        return indent(c, s, w, ak__jj_truthy(first), ak__jj_truthy(blank), out);
    }
#undef ARGS
#undef IS
    return AK_FAIL(AK_ERR_UNSUPPORTED, "chat template: line %d: filter '%s' is not supported",
                   c->line, f);
}

/* ---- tests --------------------------------------------------------------------------- */

static const char *const k_tests[] = {
    "boolean", "callable", "defined", "divisibleby", "eq", "equalto", "even", "false", "float",
    "ge", "gt", "greaterthan", "in", "integer", "iterable", "le", "lower", "lt", "lessthan",
    "mapping", "ne", "none", "number", "odd", "sameas", "sequence", "string", "true",
    "undefined", "upper"};

int ak__jj_is_test(const char *name) {
    for (size_t i = 0; i < sizeof k_tests / sizeof k_tests[0]; i++)
        if (!strcmp(name, k_tests[i])) return 1;
    return 0;
}

ak_status ak__jj_test(jj_ctx *c, const char *t, jj_val v, const jj_args *a, int *out) {
#define IS(name) (!strcmp(t, name))
    size_t want = IS("divisibleby") || IS("eq") || IS("equalto") || IS("ge") || IS("gt") ||
                  IS("greaterthan") || IS("in") || IS("le") || IS("lt") || IS("lessthan") ||
                  IS("ne") || IS("sameas");
    if (a->n != want || a->n_kw)
        return AK_FAIL(AK_ERR_INVALID_ARG, "chat template: line %d: test '%s' takes %zu "
                       "argument(s)", c->line, t, want);
    jj_val x = want ? a->pos[0] : jj_none();
    int cmp = 0;
    if (IS("defined")) *out = v.t != JJ_UNDEF;
    else if (IS("undefined")) *out = v.t == JJ_UNDEF;
    else if (IS("none")) *out = v.t == JJ_NONE;
    else if (IS("boolean")) *out = v.t == JJ_BOOL;
    else if (IS("true")) *out = v.t == JJ_BOOL && v.u.b;
    else if (IS("false")) *out = v.t == JJ_BOOL && !v.u.b;
    else if (IS("string")) *out = v.t == JJ_STR;
    else if (IS("number")) *out = v.t == JJ_INT || v.t == JJ_FLOAT || v.t == JJ_BOOL;
    else if (IS("integer")) *out = v.t == JJ_INT;
    else if (IS("float")) *out = v.t == JJ_FLOAT;
    else if (IS("mapping")) *out = v.t == JJ_DICT && !v.u.d->is_ns;
    else if (IS("sequence")) *out = v.t == JJ_STR || v.t == JJ_LIST || (v.t == JJ_DICT && !v.u.d->is_ns);
    else if (IS("iterable"))
        *out = v.t == JJ_STR || v.t == JJ_LIST || (v.t == JJ_DICT && !v.u.d->is_ns) || v.t == JJ_UNDEF;
    else if (IS("callable")) *out = v.t == JJ_MACRO || v.t == JJ_FUNC || v.t == JJ_METHOD;
    else if (IS("even") || IS("odd") || IS("divisibleby")) {
        if (v.t == JJ_UNDEF) return ak__jj_getattr(c, v, "", 0, &x); /* the undefined error */
        if (!is_intlike(v) || (want && !is_intlike(x)))
            return bad(c, t, "needs integers");
        int64_t d = IS("divisibleby") ? ival(x) : 2;
        if (d == 0) return bad(c, t, "division by zero");
        int64_t r = ival(v) % d;
        *out = IS("odd") ? r != 0 : r == 0;
    } else if (IS("eq") || IS("equalto")) *out = ak__jj_equal(v, x);
    else if (IS("ne")) *out = !ak__jj_equal(v, x);
    else if (IS("sameas"))
        *out = v.t == x.t && (ak__jj_equal(v, x) && (v.t <= JJ_BOOL ||
               (v.t == JJ_LIST && v.u.l == x.u.l) || (v.t == JJ_DICT && v.u.d == x.u.d)));
    else if (IS("in")) {
        jj_val seq = x;
        if (seq.t == JJ_STR && v.t == JJ_STR) *out = find_sub(seq.u.s.p, seq.u.s.n, v.u.s.p, v.u.s.n) != NULL;
        else if (seq.t == JJ_LIST) {
            *out = 0;
            for (size_t i = 0; i < seq.u.l->n && !*out; i++) *out = ak__jj_equal(v, seq.u.l->v[i]);
        } else if (seq.t == JJ_DICT) *out = ak__jj_dict_find(seq.u.d, v) != NULL;
        else return bad(c, t, "needs a container");
    } else if (IS("lower") || IS("upper")) {
        if (v.t != JJ_STR) { *out = 0; return AK_OK; }
        jj_val conv;
        AK_CHECK(change_case(c, v, IS("lower") ? CASE_LOWER : CASE_UPPER, &conv));
        int cased = 0;
        for (size_t i = 0; i < v.u.s.n; i++) {
            int32_t cp;
            utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)v.u.s.p + i,
                                                  (utf8proc_ssize_t)(v.u.s.n - i), &cp);
            if (k <= 0) break;
            cased |= is_cased_letter(cp);
            i += (size_t)k - 1;
        }
        *out = cased && ak__jj_equal(conv, v);
    } else {
        AK_CHECK(ak__jj_compare(c, v, x, &cmp));
        if (IS("ge")) *out = cmp >= 0;
        else if (IS("gt") || IS("greaterthan")) *out = cmp > 0;
        else if (IS("le")) *out = cmp <= 0;
        else *out = cmp < 0;
    }
#undef IS
    return AK_OK;
}

/* ---- methods ------------------------------------------------------------------------- */

static const char *const k_str_methods[] = {
    "strip", "lstrip", "rstrip", "split", "rsplit", "startswith", "endswith", "upper", "lower",
    "title", "capitalize", "replace", "find", "count", "join", "splitlines", "isdigit",
    "isalpha", "isspace", "islower", "isupper"};
static const char *const k_dict_methods[] = {"get", "items", "keys", "values", "update", "pop",
                                             "copy", "setdefault", "clear"};
static const char *const k_list_methods[] = {"append", "extend", "pop", "index", "count",
                                             "insert", "copy", "reverse", "sort", "remove", "clear"};

static int in_names(const char *const *names, size_t k, const char *name, size_t n) {
    for (size_t i = 0; i < k; i++)
        if (strlen(names[i]) == n && !memcmp(names[i], name, n)) return 1;
    return 0;
}

int ak__jj_has_method(jj_val v, const char *name, size_t n) {
#define HAS(tab) in_names(tab, sizeof tab / sizeof tab[0], name, n)
    if (v.t == JJ_STR) return HAS(k_str_methods);
    if (v.t == JJ_DICT && !v.u.d->is_ns) return HAS(k_dict_methods);
    if (v.t == JJ_LIST) return HAS(k_list_methods);
#undef HAS
    return 0;
}

static ak_status str_affix(jj_ctx *c, jj_val s, jj_val x, int at_end, int *out) {
    if (x.t == JJ_LIST && x.tuple) {
        *out = 0;
        for (size_t i = 0; i < x.u.l->n && !*out; i++) AK_CHECK(str_affix(c, s, x.u.l->v[i], at_end, out));
        return AK_OK;
    }
    if (x.t != JJ_STR) return bad(c, at_end ? "endswith" : "startswith", "needs a str or a tuple");
    *out = x.u.s.n <= s.u.s.n &&
           !memcmp(s.u.s.p + (at_end ? s.u.s.n - x.u.s.n : 0), x.u.s.p, x.u.s.n);
    return AK_OK;
}

static ak_status str_predicate(jj_ctx *c, const char *m, jj_val s, jj_val *out) {
    const utf8proc_uint8_t *p = (const utf8proc_uint8_t *)s.u.s.p;
    utf8proc_ssize_t i = 0, n = (utf8proc_ssize_t)s.u.s.n;
    int all = n > 0, cased = 0;
    while (i < n && all) {
        int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate(p + i, n - i, &cp);
        if (k <= 0) return bad(c, m, "the string is not valid UTF-8");
        utf8proc_category_t cat = utf8proc_category(cp);
        if (!strcmp(m, "isdigit")) all = cat == UTF8PROC_CATEGORY_ND;
        else if (!strcmp(m, "isalpha")) all = cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO;
        else if (!strcmp(m, "isspace")) all = ak__jj_space_at(s.u.s.p + i, (size_t)(n - i)) > 0;
        else {
            int lower = !strcmp(m, "islower");
            if (is_cased_letter(cp)) {
                cased = 1;
                all = lower ? cat == UTF8PROC_CATEGORY_LL : cat == UTF8PROC_CATEGORY_LU;
            }
        }
        i += k;
    }
    if (!strcmp(m, "islower") || !strcmp(m, "isupper")) all = all && cased;
    *out = jj_bool(all);
    return AK_OK;
}

static ak_status str_method(jj_ctx *c, const char *m, jj_val s, const jj_args *a, jj_val *out) {
    jj_val x, y;
#define IS(name) (!strcmp(m, name))
#define ARGS(max, names) AK_CHECK(check_args(c, "method", m, a, (max), (names)))
    if (IS("strip") || IS("lstrip") || IS("rstrip")) {
        ARGS(1, "");
        jj_val chars = jj_none();
        arg(a, 0, "", &chars);
        if (chars.t != JJ_NONE && chars.t != JJ_STR) return bad(c, m, "chars must be a str");
        *out = strip(s, !IS("rstrip"), !IS("lstrip"), &chars);
        return AK_OK;
    }
    if (IS("split")) {
        ARGS(2, "sep,maxsplit");
        jj_val sep = jj_none(), maxs = jj_int(-1);
        arg(a, 0, "sep", &sep);
        arg(a, 1, "maxsplit", &maxs);
        return split(c, s, sep, is_intlike(maxs) ? ival(maxs) : -1, out);
    }
    if (IS("startswith") || IS("endswith")) {
        ARGS(1, "");
        int r;
        if (a->n != 1) return bad(c, m, "takes one argument");
        AK_CHECK(str_affix(c, s, a->pos[0], IS("endswith"), &r));
        *out = jj_bool(r);
        return AK_OK;
    }
    if (IS("upper") || IS("lower") || IS("title") || IS("capitalize")) {
        ARGS(0, "");
        return change_case(c, s, IS("upper") ? CASE_UPPER : IS("lower") ? CASE_LOWER
                                 : IS("title") ? CASE_TITLE : CASE_CAPITALIZE, out);
    }
    if (IS("replace")) {
        ARGS(3, "");
        if (a->n < 2 || a->pos[0].t != JJ_STR || a->pos[1].t != JJ_STR)
            return bad(c, m, "needs two strings");
        return replace(c, s, a->pos[0], a->pos[1], a->n > 2 && is_intlike(a->pos[2]) ? ival(a->pos[2]) : -1, out);
    }
    if (IS("find") || IS("count")) {
        ARGS(1, "");
        if (a->n != 1 || a->pos[0].t != JJ_STR) return bad(c, m, "needs a string");
        x = a->pos[0];
        if (IS("find")) {
            const char *hit = find_sub(s.u.s.p, s.u.s.n, x.u.s.p, x.u.s.n);
            *out = jj_int(hit ? (int64_t)ak__jj_utf8_len(s.u.s.p, (size_t)(hit - s.u.s.p)) : -1);
            return AK_OK;
        }
        int64_t k = 0;
        if (x.u.s.n == 0) k = (int64_t)ak__jj_utf8_len(s.u.s.p, s.u.s.n) + 1;
        else for (const char *p = s.u.s.p, *e = p + s.u.s.n; (p = find_sub(p, (size_t)(e - p), x.u.s.p, x.u.s.n)); p += x.u.s.n) k++;
        *out = jj_int(k);
        return AK_OK;
    }
    if (IS("join")) {
        ARGS(1, "");
        if (a->n != 1) return bad(c, m, "takes one argument");
        jj_list *l;
        AK_CHECK(as_list(c, a->pos[0], m, &l));
        jj_buf b = {0};
        for (size_t i = 0; i < l->n; i++) {
            if (l->v[i].t != JJ_STR) return bad(c, m, "needs a sequence of strings");
            if ((i && !ak__jj_put(c->ar, &b, s.u.s.p, s.u.s.n)) ||
                !ak__jj_put(c->ar, &b, l->v[i].u.s.p, l->v[i].u.s.n))
                return ak__jj_oom();
        }
        *out = str_val(&b);
        return AK_OK;
    }
    if (IS("splitlines")) {
        ARGS(0, "");
        jj_list *l;
        AK_CHECK(splitlines(c, s, &l));
        *out = list_val(l);
        return AK_OK;
    }
    if (IS("rsplit")) {
        ARGS(2, "sep,maxsplit");
        jj_val maxs = jj_int(-1);
        arg(a, 1, "maxsplit", &maxs);
        if (is_intlike(maxs) && ival(maxs) >= 0)
            return AK_FAIL(AK_ERR_UNSUPPORTED, "chat template: line %d: rsplit with maxsplit is "
                           "not supported", c->line);
        y = jj_none();
        arg(a, 0, "sep", &y);
        return split(c, s, y, -1, out);
    }
    ARGS(0, "");
    return str_predicate(c, m, s, out);
#undef ARGS
#undef IS
}

static ak_status dict_method(jj_ctx *c, const char *m, jj_dict *d, const jj_args *a,
                             jj_val *out) {
#define IS(name) (!strcmp(m, name))
    if (IS("get")) {
        AK_CHECK(check_args(c, "method", m, a, 2, ""));
        if (a->n < 1) return bad(c, m, "needs a key");
        jj_val *hit = ak__jj_dict_find(d, a->pos[0]);
        *out = hit ? *hit : a->n > 1 ? a->pos[1] : jj_none();
        return AK_OK;
    }
    AK_CHECK(check_args(c, "method", m, a, 0, ""));
    if (IS("items")) return dict_items(c, d, out);
    if (IS("keys") || IS("values")) {
        jj_list *l = ak__jj_list_new(c->ar, d->n);
        if (!l) return ak__jj_oom();
        for (size_t i = 0; i < d->n; i++) l->v[l->n++] = IS("keys") ? d->k[i] : d->v[i];
        *out = list_val(l);
        return AK_OK;
    }
#undef IS
    return AK_FAIL(AK_ERR_UNSUPPORTED, "chat template: line %d: dict method '%s' is not "
                   "supported (get, items, keys, values)", c->line, m);
}

static ak_status list_method(jj_ctx *c, const char *m, jj_list *l, const jj_args *a,
                             jj_val *out) {
    AK_CHECK(check_args(c, "method", m, a, 1, ""));
    if (!strcmp(m, "append")) {
        if (a->n != 1) return bad(c, m, "takes one argument");
        if (!ak__jj_list_push(c->ar, l, a->pos[0])) return ak__jj_oom();
        *out = jj_none();
        return AK_OK;
    }
    if (!strcmp(m, "extend")) {
        jj_list *more;
        if (a->n != 1) return bad(c, m, "takes one argument");
        AK_CHECK(as_list(c, a->pos[0], m, &more));
        size_t k = more->n; /* extending a list by itself */
        for (size_t i = 0; i < k; i++)
            if (!ak__jj_list_push(c->ar, l, more->v[i])) return ak__jj_oom();
        *out = jj_none();
        return AK_OK;
    }
    if (!strcmp(m, "pop")) {
        int64_t i = a->n ? (is_intlike(a->pos[0]) ? ival(a->pos[0]) : 0) : -1;
        if (i < 0) i += (int64_t)l->n;
        if (i < 0 || i >= (int64_t)l->n) return bad(c, m, "pop index out of range");
        *out = l->v[i];
        memmove(l->v + i, l->v + i + 1, (l->n - (size_t)i - 1) * sizeof *l->v);
        l->n--;
        return AK_OK;
    }
    if (!strcmp(m, "index") || !strcmp(m, "count")) {
        if (a->n != 1) return bad(c, m, "takes one argument");
        int64_t k = 0, at = -1;
        for (size_t i = 0; i < l->n; i++)
            if (ak__jj_equal(l->v[i], a->pos[0])) { k++; if (at < 0) at = (int64_t)i; }
        if (!strcmp(m, "index") && at < 0) return bad(c, m, "value is not in list");
        *out = jj_int(!strcmp(m, "index") ? at : k);
        return AK_OK;
    }
    return AK_FAIL(AK_ERR_UNSUPPORTED, "chat template: line %d: list method '%s' is not "
                   "supported (append, extend, pop, index, count)", c->line, m);
}

ak_status ak__jj_method(jj_ctx *c, const char *m, jj_val self, const jj_args *a, jj_val *out) {
    if (self.t == JJ_STR) return str_method(c, m, self, a, out);
    if (self.t == JJ_DICT) return dict_method(c, m, self.u.d, a, out);
    return list_method(c, m, self.u.l, a, out);
}

/* ---- globals ------------------------------------------------------------------------- */

static ak_status global_range(jj_ctx *c, const jj_args *a, jj_val *out) {
    AK_CHECK(check_args(c, "function", "range", a, 3, ""));
    for (size_t i = 0; i < a->n; i++)
        if (!is_intlike(a->pos[i])) return bad(c, "range", "needs integers");
    if (a->n == 0) return bad(c, "range", "needs at least one argument");
    int64_t start = a->n > 1 ? ival(a->pos[0]) : 0, stop = ival(a->pos[a->n > 1 ? 1 : 0]);
    int64_t step = a->n > 2 ? ival(a->pos[2]) : 1;
    if (step == 0) return bad(c, "range", "step must not be zero");
    jj_list *l = ak__jj_list_new(c->ar, 0);
    if (!l) return ak__jj_oom();
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
        /* each item counts as an iteration: ranges are where runaway loops come from */
        if (++c->iterations > c->lim->max_iterations)
            return AK_FAIL(AK_ERR_INVALID_ARG, "chat template: line %d: more than %llu loop "
                           "iterations", c->line, (unsigned long long)c->lim->max_iterations);
        if (!ak__jj_list_push(c->ar, l, jj_int(i))) return ak__jj_oom();
    }
    *out = list_val(l);
    return AK_OK;
}

/* namespace(...) / dict(...): keyword arguments, after an optional mapping. */
static ak_status global_mapping(jj_ctx *c, const char *fn, const jj_args *a, int is_ns,
                                jj_val *out) {
    jj_dict *d = ak__jj_dict_new(c->ar);
    if (!d) return ak__jj_oom();
    d->is_ns = is_ns;
    if (a->n > 1) return bad(c, fn, "takes at most one positional argument");
    if (a->n == 1) {
        jj_val m = a->pos[0];
        if (m.t != JJ_DICT || m.u.d->is_ns) return bad(c, fn, "the positional argument must be a dict");
        for (size_t i = 0; i < m.u.d->n; i++)
            if (!ak__jj_dict_set(c->ar, d, m.u.d->k[i], m.u.d->v[i])) return ak__jj_oom();
    }
    for (size_t k = 0; k < a->n_kw; k++)
        if (!ak__jj_dict_set(c->ar, d, jj_str(a->kw[k], strlen(a->kw[k])), a->kwv[k]))
            return ak__jj_oom();
    *out = dict_val(d);
    return AK_OK;
}

static ak_status global_strftime(jj_ctx *c, const jj_args *a, jj_val *out) {
    AK_CHECK(check_args(c, "function", "strftime_now", a, 1, ""));
    if (a->n != 1 || a->pos[0].t != JJ_STR) return bad(c, "strftime_now", "needs a format string");
    char fmt[256], text[512];
    if (a->pos[0].u.s.n >= sizeof fmt) return bad(c, "strftime_now", "format too long");
    memcpy(fmt, a->pos[0].u.s.p, a->pos[0].u.s.n);
    fmt[a->pos[0].u.s.n] = '\0';
    time_t t = c->now ? (time_t)c->now : time(NULL);
    struct tm tm;
    if (!localtime_r(&t, &tm)) return bad(c, "strftime_now", "no local time");
    size_t n = strftime(text, sizeof text, fmt, &tm);
    char *s = ak__jj_strdup(c->ar, text, n);
    if (!s) return ak__jj_oom();
    *out = jj_str(s, n);
    return AK_OK;
}

ak_status ak__jj_global(jj_ctx *c, const char *name, const jj_args *a, jj_val *out) {
    if (!strcmp(name, "range")) return global_range(c, a, out);
    if (!strcmp(name, "namespace")) return global_mapping(c, name, a, 1, out);
    if (!strcmp(name, "dict")) return global_mapping(c, name, a, 0, out);
    if (!strcmp(name, "strftime_now")) return global_strftime(c, a, out);
    /* raise_exception(message): the template refuses the conversation */
    jj_val msg = a->n ? a->pos[0] : jj_str("", 0);
    AK_CHECK(to_str(c, msg, &msg));
    return AK_FAIL(AK_ERR_INVALID_ARG, "chat template: %.*s", (int)msg.u.s.n, msg.u.s.p);
}
