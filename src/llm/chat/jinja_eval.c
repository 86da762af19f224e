/* Evaluator of the Jinja interpreter: runs the AST over a context of values.
 *
 * Scoping follows Jinja2: each loop iteration and each macro call gets its own frame
 * whose lookups fall back to the enclosing one, so `set` inside a loop does not leak
 * out (templates use namespace() for that); `if` opens no scope. Undefined values print
 * as nothing, are false and iterate as empty; touching an attribute of one is an error. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "llm/chat/jinja.h"

struct jj_macro {
    const jj_node *node;
    jj_frame *frame; /* where it was defined: its body's enclosing scope */
};

enum { CTL_NONE, CTL_BREAK, CTL_CONTINUE };

ak_status ak__jj_oom(void) {
    return AK_FAIL(AK_ERR_NO_MEMORY, "chat template: the render ran out of its memory budget");
}

static ak_status fail_at(jj_ctx *c, ak_status st, const char *msg) {
    return AK_FAIL(st, "chat template: line %d: %s", c->line, msg);
}

static ak_status undefined_error(jj_ctx *c, jj_val v) {
    return AK_FAIL(AK_ERR_INVALID_ARG, "chat template: line %d: '%.*s' is undefined", c->line,
                   (int)v.u.s.n, v.u.s.p ? v.u.s.p : "");
}

static const char *type_name(jj_val v) {
    static const char *const names[] = {"Undefined", "NoneType", "bool", "int", "float",
                                        "str", "list", "dict", "macro", "function",
                                        "method", "LoopContext"};
    if (v.t == JJ_LIST && v.tuple) return "tuple";
    if (v.t == JJ_DICT && v.u.d->is_ns) return "Namespace";
    return names[v.t];
}

/* ---- variables ----------------------------------------------------------------------- */

static const char *const k_globals[] = {"range", "namespace", "dict", "raise_exception",
                                        "strftime_now"};

static jj_val lookup(jj_ctx *c, const char *name) {
    size_t n = strlen(name);
    for (jj_frame *f = c->frame; f; f = f->parent) {
        jj_val *v = ak__jj_dict_get(&f->vars, name, n);
        if (v) return *v;
    }
    for (size_t i = 0; i < sizeof k_globals / sizeof k_globals[0]; i++)
        if (!strcmp(name, k_globals[i])) {
            jj_val g = {JJ_FUNC, 0, {0}};
            g.u.fn.name = k_globals[i];
            return g;
        }
    return jj_undef(name);
}

static ak_status set_var(jj_ctx *c, const char *name, jj_val v) {
    if (!ak__jj_dict_set(c->ar, &c->frame->vars, jj_str(name, strlen(name)), v))
        return ak__jj_oom();
    return AK_OK;
}

static ak_status push_frame(jj_ctx *c, jj_frame *parent) {
    jj_frame *f = ak__jj_alloc(c->ar, sizeof *f);
    if (!f) return ak__jj_oom();
    f->parent = parent;
    c->frame = f;
    return AK_OK;
}

/* Binds targets to `v` (unpacking when there are several). */
static ak_status bind(jj_ctx *c, const char *const *targets, size_t n, jj_val v) {
    if (n == 1) return set_var(c, targets[0], v);
    if (v.t != JJ_LIST || v.u.l->n != n) {
        char msg[96];
        snprintf(msg, sizeof msg, "cannot unpack a %s into %zu names", type_name(v), n);
        return fail_at(c, AK_ERR_INVALID_ARG, msg);
    }
    for (size_t i = 0; i < n; i++) AK_CHECK(set_var(c, targets[i], v.u.l->v[i]));
    return AK_OK;
}

/* ---- attribute and item access ------------------------------------------------------- */

static ak_status loop_attr(jj_ctx *c, const jj_loop *l, const char *name, jj_val *out) {
    int64_t len = (int64_t)l->items->n, i = l->index0;
    if (!strcmp(name, "index")) *out = jj_int(i + 1);
    else if (!strcmp(name, "index0")) *out = jj_int(i);
    else if (!strcmp(name, "revindex")) *out = jj_int(len - i);
    else if (!strcmp(name, "revindex0")) *out = jj_int(len - i - 1);
    else if (!strcmp(name, "first")) *out = jj_bool(i == 0);
    else if (!strcmp(name, "last")) *out = jj_bool(i == len - 1);
    else if (!strcmp(name, "length")) *out = jj_int(len);
    else if (!strcmp(name, "depth")) *out = jj_int(1);
    else if (!strcmp(name, "depth0")) *out = jj_int(0);
    else if (!strcmp(name, "previtem")) *out = i > 0 ? l->items->v[i - 1] : jj_undef("previtem");
    else if (!strcmp(name, "nextitem"))
        *out = i + 1 < len ? l->items->v[i + 1] : jj_undef("nextitem");
    else {
        char msg[96];
        snprintf(msg, sizeof msg, "loop.%s is not supported", name);
        return fail_at(c, AK_ERR_UNSUPPORTED, msg);
    }
    return AK_OK;
}

static jj_val method_of(jj_ctx *c, jj_val v, const char *name) {
    jj_val m = {JJ_METHOD, 0, {0}};
    jj_val *self = ak__jj_alloc(c->ar, sizeof *self);
    if (!self) return jj_undef(NULL);
    *self = v;
    m.u.fn.name = name;
    m.u.fn.self = self;
    return m;
}

ak_status ak__jj_getattr(jj_ctx *c, jj_val v, const char *name, size_t n, jj_val *out) {
    char *nm = ak__jj_strdup(c->ar, name, n);
    if (!nm) return ak__jj_oom();
    if (v.t == JJ_UNDEF) return undefined_error(c, v);
    if (v.t == JJ_LOOP) return loop_attr(c, v.u.loop, nm, out);
    if (v.t == JJ_DICT && v.u.d->is_ns) {
        jj_val *hit = ak__jj_dict_get(v.u.d, name, n);
        *out = hit ? *hit : jj_undef(nm);
        return AK_OK;
    }
    if (ak__jj_has_method(v, name, n)) {
        *out = method_of(c, v, nm);
        return out->t == JJ_UNDEF ? ak__jj_oom() : AK_OK;
    }
    if (v.t == JJ_DICT) {
        jj_val *hit = ak__jj_dict_get(v.u.d, name, n);
        *out = hit ? *hit : jj_undef(nm);
        return AK_OK;
    }
    *out = jj_undef(nm);
    return AK_OK;
}

/* Python index i of a sequence of n (negative from the end); -1 when out of range. */
static int64_t norm_index(int64_t i, size_t n) {
    if (i < 0) i += (int64_t)n;
    return i < 0 || i >= (int64_t)n ? -1 : i;
}

static ak_status getitem(jj_ctx *c, jj_val v, jj_val key, jj_val *out) {
    if (v.t == JJ_UNDEF) return undefined_error(c, v);
    if (v.t == JJ_DICT && !v.u.d->is_ns) {
        jj_val *hit = ak__jj_dict_find(v.u.d, key);
        if (hit) {
            *out = *hit;
            return AK_OK;
        }
    }
    int is_int = key.t == JJ_INT || key.t == JJ_BOOL;
    int64_t k = key.t == JJ_INT ? key.u.i : key.u.b;
    if (v.t == JJ_LIST && is_int) {
        int64_t i = norm_index(k, v.u.l->n);
        *out = i < 0 ? jj_undef("index") : v.u.l->v[i];
        return AK_OK;
    }
    if (v.t == JJ_STR && is_int) {
        size_t len = ak__jj_utf8_len(v.u.s.p, v.u.s.n);
        int64_t i = norm_index(k, len);
        if (i < 0) {
            *out = jj_undef("index");
            return AK_OK;
        }
        size_t b = ak__jj_utf8_offset(v.u.s.p, v.u.s.n, (size_t)i);
        size_t e = ak__jj_utf8_offset(v.u.s.p, v.u.s.n, (size_t)i + 1);
        *out = jj_str(v.u.s.p + b, e - b);
        return AK_OK;
    }
    if (key.t == JJ_STR) return ak__jj_getattr(c, v, key.u.s.p, key.u.s.n, out);
    *out = jj_undef("item");
    return AK_OK;
}

/* Python slice bounds over n items. */
static ak_status slice_bounds(jj_ctx *c, const jj_val *parts, size_t n, int64_t *start,
                              int64_t *stop, int64_t *step) {
    for (int k = 0; k < 3; k++)
        if (parts[k].t != JJ_NONE && parts[k].t != JJ_INT)
            return fail_at(c, AK_ERR_INVALID_ARG, "slice indices must be integers or None");
    *step = parts[2].t == JJ_INT ? parts[2].u.i : 1;
    if (*step == 0) return fail_at(c, AK_ERR_INVALID_ARG, "slice step cannot be zero");
    int64_t len = (int64_t)n;
    int64_t lo = *step > 0 ? 0 : -1, hi = *step > 0 ? len : len - 1;
    *start = *step > 0 ? 0 : len - 1;
    *stop = *step > 0 ? len : -1;
    for (int k = 0; k < 2; k++) {
        if (parts[k].t == JJ_NONE) continue;
        int64_t x = parts[k].u.i;
        if (x < 0) x += len;
        *(k == 0 ? start : stop) = x < lo ? lo : x > hi ? hi : x;
    }
    return AK_OK;
}

static ak_status eval(jj_ctx *c, const jj_node *n, jj_val *out);

static ak_status eval_slice(jj_ctx *c, const jj_node *n, jj_val *out) {
    jj_val v, parts[3];
    AK_CHECK(eval(c, n->a, &v));
    const jj_node *p[3] = {n->b, n->c, n->d};
    for (int k = 0; k < 3; k++) {
        parts[k] = jj_none();
        if (p[k]) AK_CHECK(eval(c, p[k], &parts[k]));
    }
    if (v.t == JJ_UNDEF) return undefined_error(c, v);
    int is_str = v.t == JJ_STR;
    if (!is_str && v.t != JJ_LIST) return fail_at(c, AK_ERR_INVALID_ARG, "only str and list slice");
    size_t len = is_str ? ak__jj_utf8_len(v.u.s.p, v.u.s.n) : v.u.l->n;
    int64_t start = 0, stop = 0, step = 1;
    AK_CHECK(slice_bounds(c, parts, len, &start, &stop, &step));
    jj_list *l = ak__jj_list_new(c->ar, 0);
    jj_buf b = {0};
    if (!l) return ak__jj_oom();
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
        if (!is_str) {
            if (!ak__jj_list_push(c->ar, l, v.u.l->v[i])) return ak__jj_oom();
            continue;
        }
        size_t s = ak__jj_utf8_offset(v.u.s.p, v.u.s.n, (size_t)i);
        size_t e = ak__jj_utf8_offset(v.u.s.p, v.u.s.n, (size_t)i + 1);
        if (!ak__jj_put(c->ar, &b, v.u.s.p + s, e - s)) return ak__jj_oom();
    }
    if (is_str) *out = jj_str(b.p ? b.p : "", b.n);
    else {
        *out = (jj_val){JJ_LIST, v.tuple, {0}};
        out->u.l = l;
    }
    return AK_OK;
}

/* ---- arithmetic and comparison ------------------------------------------------------- */

static int is_num(jj_val v) { return v.t == JJ_BOOL || v.t == JJ_INT || v.t == JJ_FLOAT; }
static int is_intlike(jj_val v) { return v.t == JJ_BOOL || v.t == JJ_INT; }
static int64_t ival(jj_val v) { return v.t == JJ_INT ? v.u.i : v.u.b; }
static double fval(jj_val v) { return v.t == JJ_FLOAT ? v.u.f : (double)ival(v); }

static ak_status type_error(jj_ctx *c, const char *op, jj_val a, jj_val b) {
    if (a.t == JJ_UNDEF) return undefined_error(c, a);
    if (b.t == JJ_UNDEF) return undefined_error(c, b);
    return AK_FAIL(AK_ERR_INVALID_ARG, "chat template: line %d: unsupported operand types for "
                   "%s: '%s' and '%s'", c->line, op, type_name(a), type_name(b));
}

ak_status ak__jj_compare(jj_ctx *c, jj_val a, jj_val b, int *cmp) {
    if (is_num(a) && is_num(b)) {
        if (is_intlike(a) && is_intlike(b)) *cmp = (ival(a) > ival(b)) - (ival(a) < ival(b));
        else *cmp = (fval(a) > fval(b)) - (fval(a) < fval(b));
        return AK_OK;
    }
    if (a.t == JJ_STR && b.t == JJ_STR) {
        size_t n = a.u.s.n < b.u.s.n ? a.u.s.n : b.u.s.n;
        int r = memcmp(a.u.s.p, b.u.s.p, n);
        *cmp = r ? (r > 0) - (r < 0) : (a.u.s.n > b.u.s.n) - (a.u.s.n < b.u.s.n);
        return AK_OK;
    }
    if (a.t == JJ_LIST && b.t == JJ_LIST) {
        for (size_t i = 0; i < a.u.l->n && i < b.u.l->n; i++) {
            if (ak__jj_equal(a.u.l->v[i], b.u.l->v[i])) continue;
            return ak__jj_compare(c, a.u.l->v[i], b.u.l->v[i], cmp);
        }
        *cmp = (a.u.l->n > b.u.l->n) - (a.u.l->n < b.u.l->n);
        return AK_OK;
    }
    return type_error(c, "comparison", a, b);
}

static ak_status contains(jj_ctx *c, jj_val item, jj_val seq, int *out) {
    if (seq.t == JJ_STR) {
        if (item.t != JJ_STR) return type_error(c, "in", item, seq);
        *out = item.u.s.n == 0;
        for (size_t i = 0; !*out && i + item.u.s.n <= seq.u.s.n; i++)
            *out = !memcmp(seq.u.s.p + i, item.u.s.p, item.u.s.n);
        return AK_OK;
    }
    if (seq.t == JJ_LIST) {
        *out = 0;
        for (size_t i = 0; !*out && i < seq.u.l->n; i++) *out = ak__jj_equal(item, seq.u.l->v[i]);
        return AK_OK;
    }
    if (seq.t == JJ_DICT) {
        *out = ak__jj_dict_find(seq.u.d, item) != NULL;
        return AK_OK;
    }
    if (seq.t == JJ_UNDEF) return undefined_error(c, seq);
    return type_error(c, "in", item, seq);
}

static ak_status concat_lists(jj_ctx *c, jj_val a, jj_val b, jj_val *out) {
    jj_list *l = ak__jj_list_new(c->ar, a.u.l->n + b.u.l->n);
    if (!l) return ak__jj_oom();
    for (size_t i = 0; i < a.u.l->n; i++) l->v[l->n++] = a.u.l->v[i];
    for (size_t i = 0; i < b.u.l->n; i++) l->v[l->n++] = b.u.l->v[i];
    *out = (jj_val){JJ_LIST, a.tuple, {0}};
    out->u.l = l;
    return AK_OK;
}

static ak_status repeat(jj_ctx *c, jj_val s, int64_t times, jj_val *out) {
    jj_buf b = {0};
    if (times > 0 && s.u.s.n * (uint64_t)times > c->lim->max_output)
        return fail_at(c, AK_ERR_INVALID_ARG, "string repetition beyond the output limit");
    for (int64_t i = 0; i < times; i++)
        if (!ak__jj_put(c->ar, &b, s.u.s.p, s.u.s.n)) return ak__jj_oom();
    *out = jj_str(b.p ? b.p : "", b.n);
    return AK_OK;
}

static ak_status arith(jj_ctx *c, int op, jj_val a, jj_val b, jj_val *out) {
    static const char *const names[] = {"+", "-", "*", "/", "//", "%", "**"};
    if (is_num(a) && is_num(b)) {
        int ints = is_intlike(a) && is_intlike(b);
        int64_t x = ival(a), y = ival(b);
        double fx = fval(a), fy = fval(b);
        switch (op) {
        case JO_ADD: *out = ints ? jj_int(x + y) : jj_float(fx + fy); return AK_OK;
        case JO_SUB: *out = ints ? jj_int(x - y) : jj_float(fx - fy); return AK_OK;
        case JO_MUL: *out = ints ? jj_int(x * y) : jj_float(fx * fy); return AK_OK;
        case JO_DIV:
            if (fy == 0) return fail_at(c, AK_ERR_INVALID_ARG, "division by zero");
            *out = jj_float(fx / fy);
            return AK_OK;
        case JO_FLOORDIV: case JO_MOD:
            if (fy == 0) return fail_at(c, AK_ERR_INVALID_ARG, "integer division or modulo by zero");
            if (ints) {
                int64_t q = x / y, r = x % y;
                if (r != 0 && ((r < 0) != (y < 0))) q--, r += y;
                *out = jj_int(op == JO_MOD ? r : q);
            } else {
                double r = fmod(fx, fy);
                if (r != 0 && ((r < 0) != (fy < 0))) r += fy;
                *out = jj_float(op == JO_MOD ? r : floor(fx / fy));
            }
            return AK_OK;
        case JO_POW:
            if (ints && y >= 0) {
                int64_t r = 1;
                for (int64_t i = 0; i < y && i < 64; i++) r *= x;
                *out = jj_int(r);
            } else {
                *out = jj_float(pow(fx, fy));
            }
            return AK_OK;
        }
    }
    if (op == JO_ADD && a.t == JJ_STR && b.t == JJ_STR) {
        /* Markup (|safe, |escape) + str escapes the str, as markupsafe does */
        int markup = a.tuple || b.tuple;
        if (markup && !a.tuple) AK_CHECK(ak__jj_html_escape(c, a, &a));
        if (markup && !b.tuple) AK_CHECK(ak__jj_html_escape(c, b, &b));
        jj_buf s = {0};
        if (!ak__jj_put(c->ar, &s, a.u.s.p, a.u.s.n) || !ak__jj_put(c->ar, &s, b.u.s.p, b.u.s.n))
            return ak__jj_oom();
        *out = jj_str(s.p ? s.p : "", s.n);
        out->tuple = (uint8_t)markup;
        return AK_OK;
    }
    if (op == JO_ADD && a.t == JJ_LIST && b.t == JJ_LIST) return concat_lists(c, a, b, out);
    if (op == JO_MUL && a.t == JJ_STR && is_intlike(b)) return repeat(c, a, ival(b), out);
    if (op == JO_MUL && b.t == JJ_STR && is_intlike(a)) return repeat(c, b, ival(a), out);
    return type_error(c, names[op], a, b);
}

static ak_status binop(jj_ctx *c, int op, jj_val a, jj_val b, jj_val *out) {
    int r;
    switch (op) {
    case JO_CONCAT: {
        jj_buf s = {0};
        if (!ak__jj_str(c->ar, &s, a) || !ak__jj_str(c->ar, &s, b)) return ak__jj_oom();
        *out = jj_str(s.p ? s.p : "", s.n);
        return AK_OK;
    }
    case JO_EQ: *out = jj_bool(ak__jj_equal(a, b)); return AK_OK;
    case JO_NE: *out = jj_bool(!ak__jj_equal(a, b)); return AK_OK;
    case JO_LT: case JO_LE: case JO_GT: case JO_GE:
        AK_CHECK(ak__jj_compare(c, a, b, &r));
        *out = jj_bool(op == JO_LT ? r < 0 : op == JO_LE ? r <= 0 : op == JO_GT ? r > 0 : r >= 0);
        return AK_OK;
    case JO_IN: case JO_NOTIN:
        AK_CHECK(contains(c, a, b, &r));
        *out = jj_bool(op == JO_IN ? r : !r);
        return AK_OK;
    default: return arith(c, op, a, b, out);
    }
}

/* ---- calls --------------------------------------------------------------------------- */

static ak_status eval_args(jj_ctx *c, const jj_node *n, size_t skip_first, jj_args *a) {
    (void)skip_first;
    memset(a, 0, sizeof *a);
    a->n = n->n_items;
    a->n_kw = n->n_kw;
    a->kw = (const char **)n->kw_names;
    if (a->n) {
        a->pos = ak__jj_alloc(c->ar, a->n * sizeof *a->pos);
        if (!a->pos) return ak__jj_oom();
    }
    if (a->n_kw) {
        a->kwv = ak__jj_alloc(c->ar, a->n_kw * sizeof *a->kwv);
        if (!a->kwv) return ak__jj_oom();
    }
    for (size_t i = 0; i < a->n; i++) AK_CHECK(eval(c, n->items[i], &a->pos[i]));
    for (size_t i = 0; i < a->n_kw; i++) AK_CHECK(eval(c, n->kw_vals[i], &a->kwv[i]));
    return AK_OK;
}

static ak_status exec_body(jj_ctx *c, const jj_node *body);

ak_status ak__jj_call_macro(jj_ctx *c, jj_val mv, const jj_args *a, jj_val *out) {
    const struct jj_macro *m = mv.u.macro;
    const jj_node *def = m->node;
    if (c->depth >= c->lim->max_depth)
        return fail_at(c, AK_ERR_INVALID_ARG, "macro calls nested too deep (recursion limit)");
    if (a->n > def->n_targets) {
        char msg[128];
        snprintf(msg, sizeof msg, "macro '%s' takes not more than %zu argument(s)", def->name,
                 def->n_targets);
        return fail_at(c, AK_ERR_INVALID_ARG, msg);
    }
    jj_frame *saved = c->frame;
    AK_CHECK(push_frame(c, m->frame));
    for (size_t i = 0; i < def->n_targets; i++) {
        const char *p = def->targets[i];
        jj_val v = jj_undef(p);
        int given = 0;
        if (i < a->n) v = a->pos[i], given = 1;
        for (size_t k = 0; k < a->n_kw; k++)
            if (!strcmp(a->kw[k], p)) v = a->kwv[k], given = 1;
        for (size_t k = 0; !given && k < def->n_kw; k++)
            if (!strcmp(def->kw_names[k], p)) {
                ak_status st = eval(c, def->kw_vals[k], &v);
                if (st != AK_OK) { c->frame = saved; return st; }
            }
        AK_CHECK(set_var(c, p, v));
    }
    for (size_t k = 0; k < a->n_kw; k++) {
        size_t i = 0;
        while (i < def->n_targets && strcmp(a->kw[k], def->targets[i])) i++;
        if (i == def->n_targets) {
            c->frame = saved;
            char msg[128];
            snprintf(msg, sizeof msg, "macro '%s' has no parameter '%s'", def->name, a->kw[k]);
            return fail_at(c, AK_ERR_INVALID_ARG, msg);
        }
    }
    jj_buf buf = {0}, *saved_out = c->out;
    buf.limit = c->lim->max_output;
    c->out = &buf;
    c->depth++;
    int saved_line = c->line;
    ak_status st = exec_body(c, def->body);
    c->depth--;
    c->line = saved_line;
    c->out = saved_out;
    c->frame = saved;
    AK_CHECK(st);
    *out = jj_str(buf.p ? buf.p : "", buf.n);
    return AK_OK;
}

static ak_status eval_call(jj_ctx *c, const jj_node *n, jj_val *out) {
    jj_val f;
    AK_CHECK(eval(c, n->a, &f));
    jj_args a;
    AK_CHECK(eval_args(c, n, 0, &a));
    switch (f.t) {
    case JJ_MACRO: return ak__jj_call_macro(c, f, &a, out);
    case JJ_FUNC: return ak__jj_global(c, f.u.fn.name, &a, out);
    case JJ_METHOD: return ak__jj_method(c, f.u.fn.name, *f.u.fn.self, &a, out);
    case JJ_UNDEF: return undefined_error(c, f);
    default: {
        char msg[64];
        snprintf(msg, sizeof msg, "'%s' object is not callable", type_name(f));
        return fail_at(c, AK_ERR_INVALID_ARG, msg);
    }
    }
}

/* ---- expressions --------------------------------------------------------------------- */

static ak_status eval_seq(jj_ctx *c, const jj_node *n, int tuple, jj_val *out) {
    jj_list *l = ak__jj_list_new(c->ar, n->n_items);
    if (!l) return ak__jj_oom();
    for (size_t i = 0; i < n->n_items; i++) AK_CHECK(eval(c, n->items[i], &l->v[l->n++]));
    *out = (jj_val){JJ_LIST, (uint8_t)tuple, {0}};
    out->u.l = l;
    return AK_OK;
}

static ak_status eval_dict(jj_ctx *c, const jj_node *n, jj_val *out) {
    jj_dict *d = ak__jj_dict_new(c->ar);
    if (!d) return ak__jj_oom();
    for (size_t i = 0; i + 1 < n->n_items; i += 2) {
        jj_val k, v;
        AK_CHECK(eval(c, n->items[i], &k));
        AK_CHECK(eval(c, n->items[i + 1], &v));
        if (!ak__jj_dict_set(c->ar, d, k, v)) return ak__jj_oom();
    }
    *out = (jj_val){JJ_DICT, 0, {0}};
    out->u.d = d;
    return AK_OK;
}

static ak_status eval(jj_ctx *c, const jj_node *n, jj_val *out) {
    jj_val a, b;
    switch (n->kind) {
    case JN_LIT: *out = n->lit; return AK_OK;
    case JN_NAME: *out = lookup(c, n->name); return AK_OK;
    case JN_LIST: return eval_seq(c, n, 0, out);
    case JN_TUPLE: return eval_seq(c, n, 1, out);
    case JN_DICT: return eval_dict(c, n, out);
    case JN_ATTR:
        AK_CHECK(eval(c, n->a, &a));
        return ak__jj_getattr(c, a, n->name, strlen(n->name), out);
    case JN_ITEM:
        AK_CHECK(eval(c, n->a, &a));
        AK_CHECK(eval(c, n->b, &b));
        return getitem(c, a, b, out);
    case JN_SLICE: return eval_slice(c, n, out);
    case JN_CALL: return eval_call(c, n, out);
    case JN_FILTER: {
        jj_args args;
        AK_CHECK(eval(c, n->a, &a));
        AK_CHECK(eval_args(c, n, 0, &args));
        return ak__jj_filter(c, n->name, a, &args, out);
    }
    case JN_TEST: {
        jj_args args;
        int r;
        AK_CHECK(eval(c, n->a, &a));
        AK_CHECK(eval_args(c, n, 0, &args));
        AK_CHECK(ak__jj_test(c, n->name, a, &args, &r));
        *out = jj_bool(n->op ? !r : r);
        return AK_OK;
    }
    case JN_NOT:
        AK_CHECK(eval(c, n->a, &a));
        *out = jj_bool(!ak__jj_truthy(a));
        return AK_OK;
    case JN_NEG: case JN_POS:
        AK_CHECK(eval(c, n->a, &a));
        if (!is_num(a)) return type_error(c, n->kind == JN_NEG ? "unary -" : "unary +", a, a);
        if (n->kind == JN_POS) *out = a.t == JJ_BOOL ? jj_int(a.u.b) : a;
        else *out = a.t == JJ_FLOAT ? jj_float(-a.u.f) : jj_int(-ival(a));
        return AK_OK;
    case JN_BINOP:
        AK_CHECK(eval(c, n->a, &a));
        AK_CHECK(eval(c, n->b, &b));
        return binop(c, n->op, a, b, out);
    case JN_AND: case JN_OR:
        AK_CHECK(eval(c, n->a, &a));
        if (ak__jj_truthy(a) == (n->kind == JN_OR)) {
            *out = a;
            return AK_OK;
        }
        return eval(c, n->b, out);
    case JN_COND:
        AK_CHECK(eval(c, n->a, &a));
        if (ak__jj_truthy(a)) return eval(c, n->b, out);
        if (n->c) return eval(c, n->c, out);
        *out = jj_undef("else");
        return AK_OK;
    default: return fail_at(c, AK_ERR_INVALID_ARG, "internal: a statement used as an expression");
    }
}

/* ---- statements ---------------------------------------------------------------------- */

static ak_status emit(jj_ctx *c, const char *s, size_t n) {
    if (ak__jj_put(c->ar, c->out, s, n)) return AK_OK;
    if (c->out->over)
        return AK_FAIL(AK_ERR_INVALID_ARG, "chat template: the output exceeds %zu bytes",
                       c->lim->max_output);
    return ak__jj_oom();
}

/* The values a for loop walks over. */
static ak_status iterable(jj_ctx *c, jj_val v, jj_list **out) {
    *out = NULL;
    switch (v.t) {
    case JJ_LIST: *out = v.u.l; return AK_OK;
    case JJ_UNDEF: *out = ak__jj_list_new(c->ar, 0); break;
    case JJ_DICT: {
        if (v.u.d->is_ns) break;
        *out = ak__jj_list_new(c->ar, v.u.d->n);
        if (!*out) return ak__jj_oom();
        for (size_t i = 0; i < v.u.d->n; i++) (*out)->v[(*out)->n++] = v.u.d->k[i];
        return AK_OK;
    }
    case JJ_STR: {
        *out = ak__jj_list_new(c->ar, 0);
        if (!*out) return ak__jj_oom();
        for (size_t i = 0; i < v.u.s.n;) {
            size_t e = ak__jj_utf8_offset(v.u.s.p + i, v.u.s.n - i, 1);
            if (!ak__jj_list_push(c->ar, *out, jj_str(v.u.s.p + i, e))) return ak__jj_oom();
            i += e;
        }
        return AK_OK;
    }
    default: break;
    }
    if (v.t == JJ_UNDEF) return *out ? AK_OK : ak__jj_oom();
    char msg[64];
    snprintf(msg, sizeof msg, "'%s' object is not iterable", type_name(v));
    return fail_at(c, AK_ERR_INVALID_ARG, msg);
}

static ak_status count_iteration(jj_ctx *c) {
    if (++c->iterations <= c->lim->max_iterations) return AK_OK;
    return AK_FAIL(AK_ERR_INVALID_ARG, "chat template: more than %llu loop iterations",
                   (unsigned long long)c->lim->max_iterations);
}

/* The items that pass a for's `if` filter (evaluated with the targets bound). */
static ak_status filter_items(jj_ctx *c, const jj_node *n, jj_list *all, jj_list **out) {
    jj_list *kept = ak__jj_list_new(c->ar, 0);
    if (!kept) return ak__jj_oom();
    jj_frame *saved = c->frame;
    AK_CHECK(push_frame(c, saved));
    for (size_t i = 0; i < all->n; i++) {
        jj_val keep;
        ak_status st = count_iteration(c);
        if (st == AK_OK) st = bind(c, n->targets, n->n_targets, all->v[i]);
        if (st == AK_OK) st = eval(c, n->b, &keep);
        if (st != AK_OK) { c->frame = saved; return st; }
        if (ak__jj_truthy(keep) && !ak__jj_list_push(c->ar, kept, all->v[i])) {
            c->frame = saved;
            return ak__jj_oom();
        }
    }
    c->frame = saved;
    *out = kept;
    return AK_OK;
}

static ak_status exec_for(jj_ctx *c, const jj_node *n) {
    jj_val seq;
    jj_list *items = NULL;
    AK_CHECK(eval(c, n->a, &seq));
    AK_CHECK(iterable(c, seq, &items));
    if (n->b) AK_CHECK(filter_items(c, n, items, &items));
    if (items->n == 0) return n->else_body ? exec_body(c, n->else_body) : AK_OK;
    jj_loop *loop = ak__jj_alloc(c->ar, sizeof *loop);
    if (!loop) return ak__jj_oom();
    loop->items = items;
    jj_val lv = {JJ_LOOP, 0, {0}};
    lv.u.loop = loop;
    jj_frame *saved = c->frame;
    AK_CHECK(push_frame(c, saved));
    jj_frame *iteration = c->frame; /* emptied for each iteration, not reallocated */
    c->frame = saved;
    ak_status st = AK_OK;
    size_t n_items = items->n; /* appends to the list inside the loop do not extend it */
    for (size_t i = 0; i < n_items && st == AK_OK; i++) {
        loop->index0 = (int64_t)i;
        st = count_iteration(c);
        iteration->vars.n = 0;
        c->frame = iteration;
        if (st == AK_OK) st = set_var(c, "loop", lv);
        if (st == AK_OK) st = bind(c, n->targets, n->n_targets, items->v[i]);
        if (st == AK_OK) st = exec_body(c, n->body);
        c->frame = saved;
        int ctl = c->ctl;
        c->ctl = CTL_NONE;
        if (ctl == CTL_BREAK) break;
    }
    return st;
}

static ak_status exec_set(jj_ctx *c, const jj_node *n) {
    jj_val v;
    if (n->kind == JN_SET_BLOCK) {
        jj_buf buf = {0}, *saved = c->out;
        buf.limit = c->lim->max_output;
        c->out = &buf;
        ak_status st = exec_body(c, n->body);
        c->out = saved;
        AK_CHECK(st);
        return set_var(c, n->targets[0], jj_str(buf.p ? buf.p : "", buf.n));
    }
    AK_CHECK(eval(c, n->a, &v));
    if (n->kind == JN_SET) return bind(c, n->targets, n->n_targets, v);
    jj_val ns = lookup(c, n->name);
    if (ns.t != JJ_DICT || !ns.u.d->is_ns) {
        char msg[128];
        snprintf(msg, sizeof msg, "cannot assign attribute on '%s' (not a namespace)", n->name);
        return fail_at(c, AK_ERR_INVALID_ARG, msg);
    }
    if (!ak__jj_dict_set(c->ar, ns.u.d, jj_str(n->targets[0], strlen(n->targets[0])), v))
        return ak__jj_oom();
    return AK_OK;
}

static ak_status exec_filter_block(jj_ctx *c, const jj_node *n) {
    jj_buf buf = {0}, *saved = c->out;
    buf.limit = c->lim->max_output;
    c->out = &buf;
    ak_status st = exec_body(c, n->body);
    c->out = saved;
    AK_CHECK(st);
    jj_args args;
    jj_val v;
    AK_CHECK(eval_args(c, n, 0, &args));
    AK_CHECK(ak__jj_filter(c, n->name, jj_str(buf.p ? buf.p : "", buf.n), &args, &v));
    jj_buf text = {0};
    if (!ak__jj_str(c->ar, &text, v)) return ak__jj_oom();
    return emit(c, text.p ? text.p : "", text.n);
}

static ak_status exec_stmt(jj_ctx *c, const jj_node *n) {
    jj_val v;
    c->line = n->line;
    switch (n->kind) {
    case JN_DATA: return emit(c, n->lit.u.s.p, n->lit.u.s.n);
    case JN_OUTPUT: {
        AK_CHECK(eval(c, n->a, &v));
        size_t before = c->out->n;
        if (ak__jj_str(c->ar, c->out, v)) return AK_OK;
        c->out->n = before;
        if (!c->out->over) return ak__jj_oom();
        return AK_FAIL(AK_ERR_INVALID_ARG, "chat template: the output exceeds %zu bytes",
                       c->lim->max_output);
    }
    case JN_IF:
        AK_CHECK(eval(c, n->a, &v));
        if (ak__jj_truthy(v)) return exec_body(c, n->body);
        return n->else_body ? exec_body(c, n->else_body) : AK_OK;
    case JN_FOR: return exec_for(c, n);
    case JN_SET: case JN_SET_ATTR: case JN_SET_BLOCK: return exec_set(c, n);
    case JN_MACRO: {
        struct jj_macro *m = ak__jj_alloc(c->ar, sizeof *m);
        if (!m) return ak__jj_oom();
        m->node = n;
        m->frame = c->frame;
        jj_val mv = {JJ_MACRO, 0, {0}};
        mv.u.macro = m;
        return set_var(c, n->name, mv);
    }
    case JN_FILTER_BLOCK: return exec_filter_block(c, n);
    case JN_BREAK: c->ctl = CTL_BREAK; return AK_OK;
    case JN_CONTINUE: c->ctl = CTL_CONTINUE; return AK_OK;
    default: return fail_at(c, AK_ERR_INVALID_ARG, "internal: an expression used as a statement");
    }
}

static ak_status exec_body(jj_ctx *c, const jj_node *body) {
    for (size_t i = 0; i < body->n_items; i++) {
        AK_CHECK(exec_stmt(c, body->items[i]));
        if (c->ctl != CTL_NONE) return AK_OK;
    }
    return AK_OK;
}

ak_status ak__jj_render(const jj_template *t, jj_arena *ar, const jj_dict *vars,
                        const jj_limits *lim, int64_t now, char **text, size_t *len) {
    jj_buf out = {0};
    out.limit = lim->max_output;
    jj_frame *root = ak__jj_alloc(ar, sizeof *root);
    if (!root) return ak__jj_oom();
    for (size_t i = 0; i < vars->n; i++)
        if (!ak__jj_dict_set(ar, &root->vars, vars->k[i], vars->v[i])) return ak__jj_oom();
    jj_ctx c = {ar, &out, lim, root, 0, 0, CTL_NONE, 1, now};
    ak_status st = exec_body(&c, t->root);
    if (st != AK_OK) return st;
    if (c.ctl != CTL_NONE)
        return AK_FAIL(AK_ERR_INVALID_ARG, "chat template: break/continue outside a loop");
    *text = malloc(out.n + 1);
    if (!*text) return AK_FAIL(AK_ERR_NO_MEMORY, "chat template: %zu bytes of output", out.n);
    if (out.n) memcpy(*text, out.p, out.n);
    (*text)[out.n] = '\0';
    *len = out.n;
    return AK_OK;
}
