/* Internal interface of the Jinja interpreter that renders chat templates: an arena,
 * the value type, the AST the parser builds, and the compile / render entry points.
 *
 * Semantics follow Jinja2 as Hugging Face's apply_chat_template configures it
 * (trim_blocks, lstrip_blocks, loopcontrols, its own tojson, raise_exception,
 * strftime_now); docs/server.md lists the supported subset. Everything a render
 * allocates lives in one arena freed at the end, so values need no ownership rules. */
#ifndef AK_LLM_CHAT_JINJA_H
#define AK_LLM_CHAT_JINJA_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "accelkit/ak.h"

/* ---- arena ------------------------------------------------------------------------- */

typedef struct jj_chunk jj_chunk;
typedef struct jj_arena {
    jj_chunk *head;
    size_t used, limit; /* bytes handed out over all chunks, and the cap */
    int over;           /* set once the cap was hit */
} jj_arena;

/* Zeroed memory; NULL (and `over` set) past the limit or when malloc fails. */
void *ak__jj_alloc(jj_arena *a, size_t n);
void ak__jj_arena_free(jj_arena *a);
char *ak__jj_strdup(jj_arena *a, const char *s, size_t n);

/* ---- values ------------------------------------------------------------------------ */

typedef enum jj_type {
    JJ_UNDEF, JJ_NONE, JJ_BOOL, JJ_INT, JJ_FLOAT, JJ_STR, JJ_LIST, JJ_DICT,
    JJ_MACRO,  /* u.macro */
    JJ_FUNC,   /* a global builtin (range, namespace, ...): u.fn.name */
    JJ_METHOD, /* a bound method: u.fn.name of *u.fn.self */
    JJ_LOOP    /* the `loop` variable of a for */
} jj_type;

struct jj_list;
struct jj_dict;
struct jj_node;
struct jj_loop;
struct jj_macro;

typedef struct jj_val {
    uint8_t t;
    uint8_t tuple; /* JJ_LIST: a tuple (prints with parentheses); JJ_STR: Markup (from
                    * |safe or |escape: adding a plain str to it escapes that str) */
    union {
        int b;
        int64_t i;
        double f;
        struct { const char *p; size_t n; } s; /* JJ_STR; JJ_UNDEF: the missing name */
        struct jj_list *l;
        struct jj_dict *d;
        struct jj_macro *macro;
        struct { const char *name; struct jj_val *self; } fn;
        struct jj_loop *loop;
    } u;
} jj_val;

typedef struct jj_list {
    jj_val *v;
    size_t n, cap;
} jj_list;

typedef struct jj_dict {
    jj_val *k, *v;
    size_t n, cap;
    int is_ns; /* a namespace(): attributes may be assigned */
} jj_dict;

typedef struct jj_loop {
    jj_list *items;
    int64_t index0;
} jj_loop;

static inline jj_val jj_undef(const char *name) {
    jj_val v = {JJ_UNDEF, 0, {0}};
    v.u.s.p = name;
    v.u.s.n = name ? strlen(name) : 0;
    return v;
}
static inline jj_val jj_none(void) { jj_val v = {JJ_NONE, 0, {0}}; return v; }
static inline jj_val jj_bool(int b) { jj_val v = {JJ_BOOL, 0, {0}}; v.u.b = !!b; return v; }
static inline jj_val jj_int(int64_t i) { jj_val v = {JJ_INT, 0, {0}}; v.u.i = i; return v; }
static inline jj_val jj_float(double f) { jj_val v = {JJ_FLOAT, 0, {0}}; v.u.f = f; return v; }
static inline jj_val jj_str(const char *p, size_t n) {
    jj_val v = {JJ_STR, 0, {0}};
    v.u.s.p = p;
    v.u.s.n = n;
    return v;
}

jj_list *ak__jj_list_new(jj_arena *a, size_t cap);
int ak__jj_list_push(jj_arena *a, jj_list *l, jj_val v); /* 0 when out of memory */
jj_dict *ak__jj_dict_new(jj_arena *a);
int ak__jj_dict_set(jj_arena *a, jj_dict *d, jj_val k, jj_val v);
jj_val *ak__jj_dict_get(const jj_dict *d, const char *key, size_t n);
jj_val *ak__jj_dict_find(const jj_dict *d, jj_val key);

/* Python truthiness and equality (1 == 1.0 == True). */
int ak__jj_truthy(jj_val v);
int ak__jj_equal(jj_val a, jj_val b);

/* A growing byte string in the arena. */
typedef struct jj_buf {
    char *p;
    size_t n, cap;
    size_t limit; /* output cap: 0 = none */
    int over;
} jj_buf;
int ak__jj_put(jj_arena *a, jj_buf *b, const char *s, size_t n); /* 0: out of memory/limit */

/* str(v) as Python prints it; repr for items inside lists and dicts. 0 on no memory. */
int ak__jj_str(jj_arena *a, jj_buf *b, jj_val v);
int ak__jj_repr(jj_arena *a, jj_buf *b, jj_val v);
/* Python's repr of a float: the shortest text that reads back. */
void ak__jj_float_repr(double f, char out[40]);

/* json.dumps(v, ensure_ascii=False, indent, sort_keys); AK_ERR_INVALID_ARG for an
 * undefined or callable value. indent < 0: none. */
ak_status ak__jj_tojson(jj_arena *a, jj_buf *b, jj_val v, int indent, int sort_keys);

/* ---- Unicode helpers (Python's str semantics on UTF-8) ----------------------------- */

size_t ak__jj_utf8_len(const char *s, size_t n);            /* code points */
size_t ak__jj_utf8_offset(const char *s, size_t n, size_t cp); /* byte offset of a code point */
size_t ak__jj_space_at(const char *s, size_t n);            /* whitespace code point length */
size_t ak__jj_space_before(const char *s, size_t n);

/* ---- AST --------------------------------------------------------------------------- */

typedef enum jj_kind {
    /* statements */
    JN_BODY, JN_DATA, JN_OUTPUT, JN_IF, JN_FOR, JN_SET, JN_SET_ATTR, JN_SET_BLOCK, JN_MACRO,
    JN_BREAK, JN_CONTINUE, JN_FILTER_BLOCK,
    /* expressions */
    JN_LIT, JN_NAME, JN_LIST, JN_TUPLE, JN_DICT, JN_ATTR, JN_ITEM, JN_SLICE, JN_CALL,
    JN_FILTER, JN_TEST, JN_NOT, JN_NEG, JN_POS, JN_BINOP, JN_AND, JN_OR, JN_COND
} jj_kind;

typedef enum jj_op {
    JO_ADD, JO_SUB, JO_MUL, JO_DIV, JO_FLOORDIV, JO_MOD, JO_POW, JO_CONCAT,
    JO_EQ, JO_NE, JO_LT, JO_LE, JO_GT, JO_GE, JO_IN, JO_NOTIN
} jj_op;

typedef struct jj_node {
    jj_kind kind;
    int op;   /* jj_op; JN_TEST: negated */
    int line;
    const char *name; /* names, attributes, filters, tests, macros, set targets */
    jj_val lit;       /* JN_LIT, JN_DATA (the text) */
    struct jj_node *a, *b, *c; /* operands; JN_IF: cond; JN_FOR: iter, filter; JN_SLICE: a[b:c:d] */
    struct jj_node *d;
    struct jj_node **items;    /* JN_BODY statements, list/tuple/dict items, call args */
    size_t n_items;
    const char **kw_names;     /* keyword arguments (calls, filters, macro defaults) */
    struct jj_node **kw_vals;
    size_t n_kw;
    const char **targets;      /* for / set / macro parameter names */
    size_t n_targets;
    struct jj_node *body, *else_body;
} jj_node;

/* ---- compile and render ------------------------------------------------------------ */

typedef struct jj_template {
    jj_arena arena; /* the AST and its strings */
    jj_node *root;
} jj_template;

/* Parses `src`; AK_ERR_UNSUPPORTED names a construct, filter or test outside the subset,
 * AK_ERR_INVALID_ARG a syntax error (with its line). */
ak_status ak__jj_compile(const char *src, size_t n, jj_template **out);
void ak__jj_template_free(jj_template *t);

typedef struct jj_limits {
    size_t max_output;     /* bytes of rendered text */
    size_t max_memory;     /* bytes of the render's arena */
    uint64_t max_iterations; /* loop iterations over the whole render */
    int max_depth;         /* nested macro calls */
} jj_limits;

/* Renders with `vars` (a dict: messages, tools, ...) as the template's context. The
 * text is malloc'ed, NUL-terminated; raise_exception() gives AK_ERR_INVALID_ARG. */
ak_status ak__jj_render(const jj_template *t, jj_arena *ar, const jj_dict *vars,
                        const jj_limits *lim, int64_t now, char **text, size_t *len);

/* ---- evaluation state, shared by the evaluator and the builtins --------------------- */

typedef struct jj_frame {
    struct jj_frame *parent;
    jj_dict vars;
} jj_frame;

typedef struct jj_ctx {
    jj_arena *ar;
    jj_buf *out;          /* where text goes (a macro call or block set swaps it) */
    const jj_limits *lim;
    jj_frame *frame;      /* innermost scope */
    int depth;            /* nested macro calls */
    uint64_t iterations;
    int ctl;              /* pending break / continue */
    int line;             /* of the statement being run, for messages */
    int64_t now;          /* strftime_now's time */
} jj_ctx;

/* Arguments of a call: positional, then keyword. */
typedef struct jj_args {
    jj_val *pos;
    size_t n;
    const char **kw;
    jj_val *kwv;
    size_t n_kw;
} jj_args;

ak_status ak__jj_filter(jj_ctx *c, const char *name, jj_val v, const jj_args *a, jj_val *out);
ak_status ak__jj_test(jj_ctx *c, const char *name, jj_val v, const jj_args *a, int *out);
ak_status ak__jj_method(jj_ctx *c, const char *name, jj_val self, const jj_args *a, jj_val *out);
ak_status ak__jj_global(jj_ctx *c, const char *name, const jj_args *a, jj_val *out);
/* Whether `name` is a method of values of v's type (str, dict, list). */
int ak__jj_has_method(jj_val v, const char *name, size_t n);
/* Calls a macro value (evaluator). */
ak_status ak__jj_call_macro(jj_ctx *c, jj_val macro, const jj_args *a, jj_val *out);
/* Attribute a.name as Jinja's getattr sees it (evaluator). */
ak_status ak__jj_getattr(jj_ctx *c, jj_val v, const char *name, size_t n, jj_val *out);
ak_status ak__jj_compare(jj_ctx *c, jj_val a, jj_val b, int *cmp); /* <0, 0, >0 */
ak_status ak__jj_oom(void);
/* markupsafe's escape: & < > " ' as entities; the result is Markup. */
ak_status ak__jj_html_escape(jj_ctx *c, jj_val s, jj_val *out);

/* Filter / test names the interpreter implements (the parser refuses others). */
int ak__jj_is_filter(const char *name);
int ak__jj_is_test(const char *name);

#endif /* AK_LLM_CHAT_JINJA_H */
