/* JSON Schema → GBNF rules.
 *
 * Every schema becomes a GBNF expression; objects, arrays, definitions and helpers become
 * rules named `<prefix>-...`. The generated text accepts only JSON that validates against
 * the schema (for the supported keywords, docs/server.md); where the schema leaves a choice
 * a grammar cannot express exactly, the grammar picks a valid subset, as llama.cpp does:
 *   - properties keep the schema's order; optional ones may be left out;
 *   - additionalProperties absent next to `properties` means none (true / a schema: extra
 *     keys of 1..24 [A-Za-z0-9_] that are none of the named properties);
 *   - numbers with minimum/maximum: decimals of the range with up to 6 fraction digits
 *     (json_number.c); integers have at most 16 digits; strings escape with \uXXXX only outside the surrogates;
 *   - pattern: the regular-expression subset of json_pattern.c, alone on its string;
 *   - oneOf is generated as anyOf, and only accepted when its branches provably cannot
 *     match the same value (json_schema_oneof.c); otherwise it is refused.
 * Anything else (multipleOf, not, if/then, patternProperties, uniqueItems, ...) is refused
 * with AK_ERR_UNSUPPORTED naming the keyword. */
#include <math.h>
#include <stdint.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/check.h"
#include "llm/grammar/gbnf_text.h"
#include "llm/grammar/grammar.h"
#include "llm/grammar/json_number.h"
#include "llm/grammar/json_pattern.h"
#include "llm/grammar/json_schema.h"

enum { NEED_STRING = 1, NEED_NUMBER = 2, NEED_VALUE = 4, NEED_INTEGER = 8 };

typedef struct conv {
    const cJSON *root;
    const char *prefix;
    sbuf rules;         /* finished rules */
    unsigned need;      /* helper rules to emit at the end */
    uint32_t counter;
    const cJSON **defs; /* definitions already given a rule */
    uint32_t n_defs, cap_defs;
    int depth;
} conv;

#define MAX_DEPTH 64

static ak_status refuse(const char *keyword) {
    return AK_FAIL(AK_ERR_UNSUPPORTED, "json schema: keyword '%s' is not supported", keyword);
}

static ak_status schema_expr(conv *c, const cJSON *s, sbuf *out);

/* A new rule name (prefix-N) written into name[64]. */
static void new_name(conv *c, char *name, size_t cap) {
    snprintf(name, cap, "%s-%u", c->prefix, ++c->counter);
}

/* Emits `name ::= body` with body = the expression of schema s. */
static ak_status emit_rule_for(conv *c, const char *name, const cJSON *s) {
    sbuf body = {0};
    ak_status st = schema_expr(c, s, &body);
    if (st == AK_OK) sb_printf(&c->rules, "%s ::= %s\n", name, body.v ? body.v : "\"\"");
    if (body.oom) st = AK_FAIL(AK_ERR_NO_MEMORY, "json schema: out of memory");
    free(body.v);
    return st;
}

/* ---- strings ------------------------------------------------------------------------------- */

static ak_status format_expr(const char *f, sbuf *o) {
    static const char day31[] = "(\"0\" [1-9] | [12] [0-9] | \"3\" [01])";
    static const char day30[] = "(\"0\" [1-9] | [12] [0-9] | \"30\")";
    static const char day28[] = "(\"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8])";
    static const char hour[] = "([01] [0-9] | \"2\" [0-3])";
    char date[512];
    snprintf(date, sizeof date,
             "[1-9] [0-9]{3} \"-\" ((\"0\" [13578] | \"1\" [02]) \"-\" %s | (\"0\" [469] | \"11\") \"-\" %s"
             " | \"02-\" %s)",
             day31, day30, day28);
    char time[512];
    snprintf(time, sizeof time,
             "%s \":\" [0-5] [0-9] \":\" [0-5] [0-9] (\".\" [0-9]{1,6})? (\"Z\" | [+-] %s \":\" [0-5] [0-9])",
             hour, hour);
    if (strcmp(f, "date") == 0) sb_printf(o, "\"\\\"\" %s \"\\\"\"", date);
    else if (strcmp(f, "time") == 0) sb_printf(o, "\"\\\"\" %s \"\\\"\"", time);
    else if (strcmp(f, "date-time") == 0) sb_printf(o, "\"\\\"\" %s \"T\" %s \"\\\"\"", date, time);
    else if (strcmp(f, "uuid") == 0)
        sb_puts(o, "\"\\\"\" [0-9a-f]{8} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{4} \"-\" [0-9a-f]{4} \"-\" "
                   "[0-9a-f]{12} \"\\\"\"");
    else return AK_FAIL(AK_ERR_UNSUPPORTED, "json schema: string format '%s' is not supported", f);
    return AK_OK;
}

static ak_status string_expr(conv *c, const cJSON *s, sbuf *o) {
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(s, "format");
    const cJSON *pat = cJSON_GetObjectItemCaseSensitive(s, "pattern");
    const cJSON *mn = cJSON_GetObjectItemCaseSensitive(s, "minLength");
    const cJSON *mx = cJSON_GetObjectItemCaseSensitive(s, "maxLength");
    if (pat) {
        if (!cJSON_IsString(pat)) return refuse("pattern (not a string)");
        if (fmt || mn || mx) return refuse("pattern together with format, minLength or maxLength");
        c->need |= NEED_STRING;
        char any_char[256];
        snprintf(any_char, sizeof any_char, "%s-char", c->prefix);
        return ak__json_pattern_expr(pat->valuestring, strlen(pat->valuestring), any_char, o);
    }
    if (fmt) {
        if (!cJSON_IsString(fmt)) return refuse("format (not a string)");
        if (mn || mx) return refuse("minLength/maxLength together with format");
        return format_expr(fmt->valuestring, o);
    }
    c->need |= NEED_STRING;
    long long lo = 0, hi = -1;
    if (mn) {
        if (!cJSON_IsNumber(mn) || mn->valuedouble < 0 || mn->valuedouble > 10000) return refuse("minLength (not in [0, 10000])");
        lo = (long long)mn->valuedouble;
    }
    if (mx) {
        if (!cJSON_IsNumber(mx) || mx->valuedouble < 0 || mx->valuedouble > 10000) return refuse("maxLength (not in [0, 10000])");
        hi = (long long)mx->valuedouble;
    }
    if (hi >= 0 && hi < lo) return AK_FAIL(AK_ERR_INVALID_ARG, "json schema: maxLength below minLength");
    if (!mn && !mx) {
        sb_printf(o, "%s-string", c->prefix);
        return AK_OK;
    }
    if (hi < 0) sb_printf(o, "\"\\\"\" %s-char{%lld,} \"\\\"\"", c->prefix, lo);
    else sb_printf(o, "\"\\\"\" %s-char{%lld,%lld} \"\\\"\"", c->prefix, lo, hi);
    return AK_OK;
}

/* ---- objects -------------------------------------------------------------------------------- */

/* Extra property names are at most this many characters. Unbounded names let a sampler
 * that rarely picks the closing quote (most tokens are word pieces) write one name until
 * max_tokens: a valid subset, like the 16-digit bound on integers. */
#define EXTRA_NAME_MAX 24

/* Extra property names: [A-Za-z0-9_]{1,EXTRA_NAME_MAX} strings that are none of `names` (a
 * trie walk: at each node, either leave the names' paths or end where no name ends). */
static void not_names_expr(conv *c, const cJSON *props, const char *prefix, size_t plen, sbuf *o) {
    /* the characters that continue some name after `prefix`, and whether a name ends here */
    char next[256] = {0};
    int ends_here = 0, any = 0;
    for (const cJSON *p = props ? props->child : NULL; p; p = p->next) {
        size_t n = strlen(p->string);
        if (n < plen || memcmp(p->string, prefix, plen) != 0) continue;
        if (n == plen) ends_here = 1;
        else next[(unsigned char)p->string[plen]] = 1, any = 1;
    }
    static const char word[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_";
    sb_puts(o, "(");
    int first = 1;
    if (!ends_here && plen > 0) sb_puts(o, "\"\""), first = 0; /* stop here */
    (void)c;
    /* a word character no name continues with: anything may follow */
    sbuf cls = {0};
    for (const char *w = word; *w; ++w)
        if (!next[(unsigned char)*w]) sb_add(&cls, w, 1);
    if (cls.n) {
        if (!first) sb_puts(o, " | ");
        sb_printf(o, "[%s] [A-Za-z0-9_]{0,%zu}", cls.v, (size_t)EXTRA_NAME_MAX - plen - 1);
        first = 0;
    }
    free(cls.v);
    if (any && plen + 1 < EXTRA_NAME_MAX) { /* longer names are never extra names */
        char *pre = malloc(plen + 2);
        if (pre) {
            memcpy(pre, prefix, plen);
            for (const char *w = word; *w; ++w) {
                if (!next[(unsigned char)*w]) continue;
                pre[plen] = *w;
                if (!first) sb_puts(o, " | ");
                sb_printf(o, "\"%c\" ", *w);
                not_names_expr(c, props, pre, plen + 1, o);
                first = 0;
            }
            free(pre);
        }
    }
    if (first) sb_puts(o, "[^\\x00-\\U0010FFFF]"); /* nothing (unreachable in practice) */
    sb_puts(o, ")");
}

static int is_required(const cJSON *required, const char *name) {
    for (const cJSON *r = required ? required->child : NULL; r; r = r->next)
        if (cJSON_IsString(r) && strcmp(r->valuestring, name) == 0) return 1;
    return 0;
}

static ak_status object_expr(conv *c, const cJSON *s, sbuf *o) {
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(s, "properties");
    const cJSON *required = cJSON_GetObjectItemCaseSensitive(s, "required");
    const cJSON *extra = cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
    if (props && !cJSON_IsObject(props)) return refuse("properties (not an object)");
    if (required && !cJSON_IsArray(required)) return refuse("required (not an array)");
    for (const cJSON *r = required ? required->child : NULL; r; r = r->next)
        if (!cJSON_IsString(r) || !cJSON_GetObjectItemCaseSensitive(props, r->valuestring))
            return AK_FAIL(AK_ERR_UNSUPPORTED, "json schema: required property '%s' has no schema "
                           "in properties", cJSON_IsString(r) ? r->valuestring : "?");
    if (!props && !extra) { /* any object */
        c->need |= NEED_VALUE;
        sb_printf(o, "%s-object", c->prefix);
        return AK_OK;
    }
    int extra_ok = extra && !cJSON_IsFalse(extra);
    if (extra && !cJSON_IsBool(extra) && !cJSON_IsObject(extra)) return refuse("additionalProperties");
    /* one rule per property: "name" ws ":" ws value */
    int n = cJSON_GetArraySize(props);
    if (n > 512) return refuse("properties (more than 512)");
    char (*kv)[64] = calloc((size_t)n + 2, sizeof *kv);
    int *req = calloc((size_t)n + 2, sizeof *req);
    if (!kv || !req) {
        free(kv), free(req);
        return AK_FAIL(AK_ERR_NO_MEMORY, "json schema: out of memory");
    }
    ak_status st = AK_OK;
    int i = 0;
    for (const cJSON *p = props ? props->child : NULL; p && st == AK_OK; p = p->next, ++i) {
        char vname[64];
        new_name(c, vname, sizeof vname);
        st = emit_rule_for(c, vname, p);
        new_name(c, kv[i], sizeof kv[i]);
        /* the key as JSON text (escaped), then as a GBNF literal */
        cJSON *tmp = cJSON_CreateString(p->string);
        char *kjson = tmp ? cJSON_PrintUnformatted(tmp) : NULL;
        cJSON_Delete(tmp);
        if (!kjson) {
            st = AK_FAIL(AK_ERR_NO_MEMORY, "json schema: out of memory");
            break;
        }
        sb_printf(&c->rules, "%s ::= ", kv[i]);
        sb_literal(&c->rules, kjson, strlen(kjson));
        sb_printf(&c->rules, " %s-ws \":\" %s-ws %s\n", c->prefix, c->prefix, vname);
        cJSON_free(kjson);
        req[i] = is_required(required, p->string);
    }
    int n_kv = i;
    if (st == AK_OK && extra_ok) { /* an extra key-value pair, repeated */
        char vname[64];
        new_name(c, vname, sizeof vname);
        if (cJSON_IsObject(extra)) st = emit_rule_for(c, vname, extra);
        else c->need |= NEED_VALUE, snprintf(vname, sizeof vname, "%s-value", c->prefix);
        char ename[64];
        new_name(c, ename, sizeof ename);
        sb_printf(&c->rules, "%s ::= \"\\\"\" ", ename);
        not_names_expr(c, props, "", 0, &c->rules);
        sb_printf(&c->rules, " \"\\\"\" %s-ws \":\" %s-ws %s\n", c->prefix, c->prefix, vname);
        snprintf(kv[n_kv], sizeof kv[n_kv], "%s", ename);
    }
    /* rest_i: the pairs from i on after something was written (",") or nothing was (first) */
    char first_name[64] = "", rest_prev[64] = "";
    for (int k = n_kv; k >= 0 && st == AK_OK; --k) {
        char rest[64], head[64];
        new_name(c, rest, sizeof rest);
        new_name(c, head, sizeof head);
        if (k == n_kv) { /* after the named pairs: extra pairs, if any */
            if (extra_ok) {
                sb_printf(&c->rules, "%s ::= (\",\" %s-ws %s)*\n", rest, c->prefix, kv[n_kv]);
                sb_printf(&c->rules, "%s ::= (%s %s)?\n", head, kv[n_kv], rest);
            } else {
                sb_printf(&c->rules, "%s ::= \"\"\n", rest);
                sb_printf(&c->rules, "%s ::= \"\"\n", head);
            }
        } else if (req[k]) {
            sb_printf(&c->rules, "%s ::= \",\" %s-ws %s %s\n", rest, c->prefix, kv[k], rest_prev);
            sb_printf(&c->rules, "%s ::= %s %s\n", head, kv[k], rest_prev);
        } else {
            sb_printf(&c->rules, "%s ::= \",\" %s-ws %s %s | %s\n", rest, c->prefix, kv[k], rest_prev, rest_prev);
            sb_printf(&c->rules, "%s ::= %s %s | %s\n", head, kv[k], rest_prev, first_name);
        }
        snprintf(rest_prev, sizeof rest_prev, "%s", rest);
        snprintf(first_name, sizeof first_name, "%s", head);
    }
    if (st == AK_OK) sb_printf(o, "\"{\" %s-ws %s %s-ws \"}\"", c->prefix, first_name, c->prefix);
    free(kv), free(req);
    return st;
}

/* ---- arrays --------------------------------------------------------------------------------- */

static ak_status array_expr(conv *c, const cJSON *s, sbuf *o) {
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(s, "items");
    const cJSON *prefix = cJSON_GetObjectItemCaseSensitive(s, "prefixItems");
    const cJSON *mn = cJSON_GetObjectItemCaseSensitive(s, "minItems");
    const cJSON *mx = cJSON_GetObjectItemCaseSensitive(s, "maxItems");
    if (prefix && !cJSON_IsArray(prefix)) return refuse("prefixItems (not an array)");
    if (items && cJSON_IsArray(items)) return refuse("items (an array: use prefixItems)");
    long long lo = 0, hi = -1;
    if (mn) {
        if (!cJSON_IsNumber(mn) || mn->valuedouble < 0 || mn->valuedouble > 1000) return refuse("minItems (not in [0, 1000])");
        lo = (long long)mn->valuedouble;
    }
    if (mx) {
        if (!cJSON_IsNumber(mx) || mx->valuedouble < 0 || mx->valuedouble > 1000) return refuse("maxItems (not in [0, 1000])");
        hi = (long long)mx->valuedouble;
    }
    if (hi >= 0 && hi < lo) return AK_FAIL(AK_ERR_INVALID_ARG, "json schema: maxItems below minItems");
    /* the item list as a sequence of rule names (prefix items), then the repeated item */
    sbuf seq = {0};
    ak_status st = AK_OK;
    long long n_prefix = prefix ? cJSON_GetArraySize(prefix) : 0;
    if (hi >= 0 && n_prefix > hi) n_prefix = hi;
    if (n_prefix < lo && prefix && !items) return refuse("minItems (more than prefixItems, no items)");
    long long k = 0;
    for (const cJSON *p = prefix ? prefix->child : NULL; p && k < n_prefix && st == AK_OK; p = p->next, ++k) {
        char name[64];
        new_name(c, name, sizeof name);
        st = emit_rule_for(c, name, p);
        if (k > 0) sb_printf(&seq, " \",\" %s-ws ", c->prefix);
        sb_puts(&seq, name);
    }
    char item[64] = "";
    int more = !prefix || (items && !cJSON_IsFalse(items)) ;
    if (prefix && k < (prefix ? cJSON_GetArraySize(prefix) : 0)) more = 0; /* cut by maxItems */
    if (st == AK_OK && more) {
        if (items && !cJSON_IsTrue(items)) {
            new_name(c, item, sizeof item);
            st = emit_rule_for(c, item, items);
        } else {
            c->need |= NEED_VALUE;
            snprintf(item, sizeof item, "%s-value", c->prefix);
        }
    }
    if (st == AK_OK) {
        sb_puts(o, "\"[\" ");
        sb_printf(o, "%s-ws ", c->prefix);
        long long extra_lo = lo > n_prefix ? lo - n_prefix : 0;
        long long extra_hi = hi < 0 ? -1 : hi - n_prefix;
        if (!more) extra_lo = 0, extra_hi = 0;
        if (n_prefix > 0) {
            sb_puts(o, seq.v);
            if (extra_hi != 0) {
                if (extra_hi < 0) sb_printf(o, " (\",\" %s-ws %s){%lld,}", c->prefix, item, extra_lo);
                else sb_printf(o, " (\",\" %s-ws %s){%lld,%lld}", c->prefix, item, extra_lo, extra_hi);
            }
        } else if (extra_hi != 0) {
            /* item ("," item){lo-1, hi-1}, optional when lo = 0 */
            long long rlo = extra_lo > 0 ? extra_lo - 1 : 0;
            sb_printf(o, "(%s (\",\" %s-ws %s)", item, c->prefix, item);
            if (extra_hi < 0) sb_printf(o, "{%lld,}", rlo);
            else sb_printf(o, "{%lld,%lld}", rlo, extra_hi - 1);
            sb_puts(o, extra_lo == 0 ? ")?" : ")");
        }
        sb_printf(o, " %s-ws \"]\"", c->prefix);
    }
    if (seq.oom) st = AK_FAIL(AK_ERR_NO_MEMORY, "json schema: out of memory");
    free(seq.v);
    return st;
}

/* ---- dispatch ------------------------------------------------------------------------------- */

static ak_status literal_value(const cJSON *v, sbuf *o) {
    char *json = cJSON_PrintUnformatted(v);
    if (!json) return AK_FAIL(AK_ERR_NO_MEMORY, "json schema: out of memory");
    sb_literal(o, json, strlen(json));
    cJSON_free(json);
    return AK_OK;
}

/* "#/definitions/X" or "#/$defs/X" (JSON pointer escapes ~0 ~1 decoded). */
static ak_status resolve_ref(conv *c, const char *ref, const cJSON **out) {
    const char *name = NULL;
    const cJSON *defs = NULL;
    if (strncmp(ref, "#/definitions/", 14) == 0) name = ref + 14, defs = cJSON_GetObjectItemCaseSensitive(c->root, "definitions");
    else if (strncmp(ref, "#/$defs/", 8) == 0) name = ref + 8, defs = cJSON_GetObjectItemCaseSensitive(c->root, "$defs");
    else if (strcmp(ref, "#") == 0) {
        *out = c->root;
        return AK_OK;
    } else return AK_FAIL(AK_ERR_UNSUPPORTED, "json schema: $ref '%s' (only #, #/definitions/NAME and #/$defs/NAME)", ref);
    char key[256];
    size_t k = 0;
    for (const char *p = name; *p && k + 1 < sizeof key; ++p) {
        if (*p == '/') return AK_FAIL(AK_ERR_UNSUPPORTED, "json schema: $ref '%s' (nested path)", ref);
        if (p[0] == '~' && p[1] == '0') key[k++] = '~', ++p;
        else if (p[0] == '~' && p[1] == '1') key[k++] = '/', ++p;
        else key[k++] = *p;
    }
    key[k] = 0;
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(defs, key);
    if (!d) return AK_FAIL(AK_ERR_INVALID_ARG, "json schema: $ref '%s' names no definition", ref);
    *out = d;
    return AK_OK;
}

/* A schema that is only a $ref is an alias of its target; a chain of aliases that comes
 * back to where it started matches nothing and would be a rule defined by itself alone
 * ({"$ref": "#"} at the root), which the grammar compiler rejects: refused here. */
static ak_status check_alias_cycle(conv *c, const cJSON *target, const char *ref) {
    const cJSON *at = target;
    for (int hops = 0; hops < 1000; ++hops) {
        const cJSON *next_ref = cJSON_IsObject(at) ? cJSON_GetObjectItemCaseSensitive(at, "$ref") : NULL;
        if (!cJSON_IsString(next_ref)) return AK_OK;
        if (resolve_ref(c, next_ref->valuestring, &at) != AK_OK) return AK_OK; /* refused later */
        if (at == target)
            return AK_FAIL(AK_ERR_INVALID_ARG, "json schema: $ref '%s' refers to itself through "
                           "$refs alone (it matches nothing)", ref);
    }
    return AK_FAIL(AK_ERR_INVALID_ARG, "json schema: $ref '%s' starts a chain of over 1000 $refs", ref);
}

static ak_status ref_expr(conv *c, const cJSON *ref, sbuf *o) {
    if (!cJSON_IsString(ref)) return refuse("$ref (not a string)");
    const cJSON *target;
    AK_CHECK(resolve_ref(c, ref->valuestring, &target));
    AK_CHECK(check_alias_cycle(c, target, ref->valuestring));
    for (uint32_t i = 0; i < c->n_defs; ++i)
        if (c->defs[i] == target) {
            sb_printf(o, "%s-def-%u", c->prefix, i);
            return AK_OK;
        }
    if (c->n_defs == c->cap_defs) {
        uint32_t cap = c->cap_defs ? c->cap_defs * 2 : 8;
        const cJSON **v = realloc(c->defs, cap * sizeof *v);
        if (!v) return AK_FAIL(AK_ERR_NO_MEMORY, "json schema: out of memory");
        c->defs = v, c->cap_defs = cap;
    }
    uint32_t id = c->n_defs++;
    c->defs[id] = target; /* registered first: a recursive reference finds it */
    char name[64];
    snprintf(name, sizeof name, "%s-def-%u", c->prefix, id);
    AK_CHECK(emit_rule_for(c, name, target));
    sb_puts(o, name);
    return AK_OK;
}

static int type_is(const char *t, const char *name) { return strcmp(t, name) == 0; }

static ak_status typed_expr(conv *c, const cJSON *s, const char *t, sbuf *o) {
    if (type_is(t, "string")) return string_expr(c, s, o);
    if (type_is(t, "boolean")) return sb_puts(o, "(\"true\" | \"false\")"), AK_OK;
    if (type_is(t, "null")) return sb_puts(o, "\"null\""), AK_OK;
    if (type_is(t, "object")) return object_expr(c, s, o);
    if (type_is(t, "array")) return array_expr(c, s, o);
    if (type_is(t, "integer") || type_is(t, "number")) {
        int bounded = 0;
        AK_CHECK(ak__json_number_range(s, type_is(t, "integer"), o, &bounded)); /* json_number.c */
        if (bounded) return AK_OK;
        c->need |= type_is(t, "integer") ? NEED_INTEGER : NEED_NUMBER;
        sb_printf(o, "%s-%s", c->prefix, t);
        return AK_OK;
    }
    return AK_FAIL(AK_ERR_UNSUPPORTED, "json schema: type '%s' is not supported", t);
}

/* Keywords understood, besides the annotations that do not constrain values. */
static const char *const known[] = {
    "type", "properties", "required", "additionalProperties", "enum", "const", "items",
    "prefixItems", "minItems", "maxItems", "anyOf", "oneOf", "allOf", "$ref", "definitions",
    "$defs", "minLength", "maxLength", "pattern", "format", "minimum", "maximum",
    "exclusiveMinimum", "exclusiveMaximum", "title", "description", "$schema", "$id",
    "$comment", "examples", "default", "deprecated", "readOnly", "writeOnly", NULL};

static ak_status check_keywords(const cJSON *s) {
    for (const cJSON *k = s->child; k; k = k->next) {
        int ok = 0;
        for (const char *const *n = known; *n && !ok; ++n) ok = strcmp(*n, k->string) == 0;
        if (!ok) return refuse(k->string);
    }
    return AK_OK;
}

static ak_status alternatives(conv *c, const cJSON *list, sbuf *o) {
    if (!cJSON_IsArray(list) || cJSON_GetArraySize(list) == 0) return refuse("anyOf/oneOf (not a non-empty array)");
    sb_puts(o, "(");
    for (const cJSON *a = list->child; a; a = a->next) {
        char name[64];
        new_name(c, name, sizeof name);
        AK_CHECK(emit_rule_for(c, name, a));
        sb_printf(o, "%s%s", a == list->child ? "" : " | ", name);
    }
    sb_puts(o, ")");
    return AK_OK;
}

/* oneOf: refused unless every pair of branches is provably disjoint (a grammar's "|" is
 * anyOf, which equals oneOf only then). */
static ak_status check_one_of(conv *c, const cJSON *list) {
    if (!cJSON_IsArray(list)) return AK_OK; /* alternatives() refuses it by name */
    int i = 0;
    for (const cJSON *a = list->child; a; a = a->next, ++i) {
        int j = i + 1;
        for (const cJSON *b = a->next; b; b = b->next, ++j) {
            const cJSON *ra = a, *rb = b, *ref;
            if ((ref = cJSON_GetObjectItemCaseSensitive(a, "$ref")) && cJSON_IsString(ref))
                AK_CHECK(resolve_ref(c, ref->valuestring, &ra));
            if ((ref = cJSON_GetObjectItemCaseSensitive(b, "$ref")) && cJSON_IsString(ref))
                AK_CHECK(resolve_ref(c, ref->valuestring, &rb));
            if (!ak__json_schema_disjoint(ra, rb))
                return AK_FAIL(AK_ERR_UNSUPPORTED,
                               "json schema: oneOf branches %d and %d may match the same value, and a "
                               "grammar cannot make them exclusive (give them different types or a "
                               "required const property that tells them apart, or use anyOf)", i, j);
        }
    }
    return AK_OK;
}

/* allOf of object schemas (after $ref): one object with every property and requirement. */
static ak_status all_of(conv *c, const cJSON *s, const cJSON *list, sbuf *o) {
    if (!cJSON_IsArray(list)) return refuse("allOf (not an array)");
    cJSON *merged = cJSON_CreateObject(), *props = cJSON_CreateObject(), *req = cJSON_CreateArray();
    ak_status st = AK_OK;
    if (!merged || !props || !req) st = AK_FAIL(AK_ERR_NO_MEMORY, "json schema: out of memory");
    const cJSON *parts[65];
    int n = 0;
    parts[n++] = s;
    for (const cJSON *a = list->child; a && st == AK_OK; a = a->next) {
        if (n >= 64) st = refuse("allOf (more than 63 parts)");
        const cJSON *p = a;
        const cJSON *ref = cJSON_GetObjectItemCaseSensitive(a, "$ref");
        if (ref && cJSON_IsString(ref) && st == AK_OK) st = resolve_ref(c, ref->valuestring, &p);
        if (st == AK_OK) parts[n++] = p;
    }
    for (int i = 0; i < n && st == AK_OK; ++i) {
        for (const cJSON *k = parts[i]->child; k && st == AK_OK; k = k->next) {
            const char *kw = k->string;
            if (strcmp(kw, "properties") == 0) {
                for (const cJSON *p = k->child; p; p = p->next)
                    if (!cJSON_GetObjectItemCaseSensitive(props, p->string))
                        cJSON_AddItemReferenceToObject(props, p->string, (cJSON *)p);
                    else st = AK_FAIL(AK_ERR_UNSUPPORTED, "json schema: allOf (property '%s' in two parts)", p->string);
            } else if (strcmp(kw, "required") == 0) {
                for (const cJSON *r = k->child; r; r = r->next)
                    cJSON_AddItemToArray(req, cJSON_Duplicate(r, 0));
            } else if (strcmp(kw, "type") == 0) {
                if (!cJSON_IsString(k) || strcmp(k->valuestring, "object") != 0)
                    st = refuse("allOf (only of object schemas)");
            } else if (strcmp(kw, "allOf") == 0 || strcmp(kw, "$ref") == 0 || strcmp(kw, "title") == 0 ||
                       strcmp(kw, "description") == 0 || strcmp(kw, "definitions") == 0 ||
                       strcmp(kw, "$defs") == 0 || strcmp(kw, "$schema") == 0) {
            } else if (strcmp(kw, "additionalProperties") == 0 && cJSON_IsFalse(k)) {
            } else {
                st = AK_FAIL(AK_ERR_UNSUPPORTED, "json schema: allOf with '%s' (not mergeable)", kw);
            }
        }
    }
    if (st == AK_OK) {
        cJSON_AddItemToObject(merged, "properties", props), props = NULL;
        cJSON_AddItemToObject(merged, "required", req), req = NULL;
        st = object_expr(c, merged, o);
    }
    cJSON_Delete(merged), cJSON_Delete(props), cJSON_Delete(req);
    return st;
}

static ak_status schema_body(conv *c, const cJSON *s, sbuf *o) {
    if (cJSON_IsTrue(s)) {
        c->need |= NEED_VALUE;
        sb_printf(o, "%s-value", c->prefix);
        return AK_OK;
    }
    if (cJSON_IsFalse(s)) return refuse("false (a schema no value satisfies)");
    if (!cJSON_IsObject(s)) return AK_FAIL(AK_ERR_INVALID_ARG, "json schema: a schema must be an object or a boolean");
    AK_CHECK(check_keywords(s));
    const cJSON *v;
    if ((v = cJSON_GetObjectItemCaseSensitive(s, "$ref"))) return ref_expr(c, v, o);
    if ((v = cJSON_GetObjectItemCaseSensitive(s, "const"))) return literal_value(v, o);
    if ((v = cJSON_GetObjectItemCaseSensitive(s, "enum"))) {
        if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) == 0) return refuse("enum (not a non-empty array)");
        sb_puts(o, "(");
        for (const cJSON *e = v->child; e; e = e->next) {
            if (e != v->child) sb_puts(o, " | ");
            AK_CHECK(literal_value(e, o));
        }
        sb_puts(o, ")");
        return AK_OK;
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(s, "allOf"))) return all_of(c, s, v, o);
    if (cJSON_GetObjectItemCaseSensitive(s, "anyOf") && cJSON_GetObjectItemCaseSensitive(s, "oneOf"))
        return refuse("anyOf next to oneOf");
    if ((v = cJSON_GetObjectItemCaseSensitive(s, "anyOf"))) return alternatives(c, v, o);
    if ((v = cJSON_GetObjectItemCaseSensitive(s, "oneOf"))) {
        AK_CHECK(check_one_of(c, v));
        return alternatives(c, v, o);
    }
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(s, "type");
    if (!type) {
        if (cJSON_GetObjectItemCaseSensitive(s, "properties")) return object_expr(c, s, o);
        if (cJSON_GetObjectItemCaseSensitive(s, "items") || cJSON_GetObjectItemCaseSensitive(s, "prefixItems"))
            return array_expr(c, s, o);
        c->need |= NEED_VALUE;
        sb_printf(o, "%s-value", c->prefix);
        return AK_OK;
    }
    if (cJSON_IsString(type)) return typed_expr(c, s, type->valuestring, o);
    if (!cJSON_IsArray(type) || cJSON_GetArraySize(type) == 0) return refuse("type (not a string or a non-empty array)");
    sb_puts(o, "(");
    for (const cJSON *t = type->child; t; t = t->next) {
        if (!cJSON_IsString(t)) return refuse("type (array of non-strings)");
        if (t != type->child) sb_puts(o, " | ");
        AK_CHECK(typed_expr(c, s, t->valuestring, o));
    }
    sb_puts(o, ")");
    return AK_OK;
}

static ak_status schema_expr(conv *c, const cJSON *s, sbuf *o) {
    if (++c->depth > MAX_DEPTH) return AK_FAIL(AK_ERR_UNSUPPORTED, "json schema: nested deeper than %d", MAX_DEPTH);
    ak_status st = schema_body(c, s, o);
    c->depth--;
    return st;
}

static void emit_helpers(conv *c) {
    const char *p = c->prefix;
    sbuf *r = &c->rules;
    sb_printf(r, "%s-ws ::= \" \"?\n", p);
    if (c->need & NEED_VALUE) c->need |= NEED_STRING | NEED_NUMBER;
    if (c->need & NEED_STRING) {
        sb_printf(r, "%s-char ::= [^\"\\\\\\x00-\\x1F\\uD800-\\uDFFF] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" ([0-9a-cA-CeEfF] "
                     "[0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2}))\n", p);
        sb_printf(r, "%s-string ::= \"\\\"\" %s-char* \"\\\"\"\n", p, p);
    }
    if (c->need & (NEED_NUMBER | NEED_INTEGER))
        sb_printf(r, "%s-integer ::= \"-\"? (\"0\" | [1-9] [0-9]{0,15})\n", p);
    if (c->need & NEED_NUMBER)
        sb_printf(r, "%s-number ::= %s-integer (\".\" [0-9]{1,16})? ([eE] [-+]? [0-9]{1,2})?\n", p, p);
    if (c->need & NEED_VALUE) {
        sb_printf(r, "%s-value ::= %s-object | %s-array | %s-string | %s-number | \"true\" | \"false\" | \"null\"\n",
                  p, p, p, p, p);
        sb_printf(r, "%s-object ::= \"{\" %s-ws (%s-string %s-ws \":\" %s-ws %s-value (\",\" %s-ws %s-string %s-ws "
                     "\":\" %s-ws %s-value)*)? %s-ws \"}\"\n", p, p, p, p, p, p, p, p, p, p, p, p);
        sb_printf(r, "%s-array ::= \"[\" %s-ws (%s-value (\",\" %s-ws %s-value)*)? %s-ws \"]\"\n", p, p, p, p, p, p);
    }
}

/* Whether `s` is well-formed UTF-8 (no overlong form, surrogate or code point past
 * U+10FFFF): the grammar's literals must be, and cJSON passes any bytes through. */
static int utf8_valid(const unsigned char *s) {
    while (*s) {
        unsigned c = *s, n = c < 0x80 ? 0 : (c & 0xE0) == 0xC0 ? 1 : (c & 0xF0) == 0xE0 ? 2
                                           : (c & 0xF8) == 0xF0 ? 3 : 9;
        if (n == 9) return 0;
        uint32_t cp = n == 0 ? c : c & (0x3Fu >> n);
        for (unsigned i = 1; i <= n; ++i) {
            if ((s[i] & 0xC0) != 0x80) return 0;
            cp = cp << 6 | (s[i] & 0x3Fu);
        }
        static const uint32_t min_cp[4] = {0, 0x80, 0x800, 0x10000};
        if (cp < min_cp[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
        s += n + 1;
    }
    return 1;
}

/* Every key and string value of the schema is valid UTF-8 (they become literals). */
static ak_status check_strings(const cJSON *n) {
    for (; n; n = n->next) {
        if ((n->string && !utf8_valid((const unsigned char *)n->string)) ||
            (cJSON_IsString(n) && !utf8_valid((const unsigned char *)n->valuestring)))
            return AK_FAIL(AK_ERR_INVALID_ARG, "json schema: a key or string is not valid UTF-8");
        AK_CHECK(check_strings(n->child));
    }
    return AK_OK;
}

/* The written rules are parsed once as the grammar compiler will: a schema whose $ref
 * comes back to itself through anyOf/oneOf/allOf before anything is matched
 * ({"anyOf": [{"type": "object"}, {"$ref": "#"}]}) becomes a left-recursive rule, and
 * a huge one can pass the compiler's limits; both are refused here, naming why, rather
 * than handed on as a grammar that does not compile. */
static ak_status check_compiles(const char *prefix, const char *rules) {
    sbuf text = {0};
    sb_printf(&text, "root ::= %s\n%s", prefix, rules);
    if (text.oom) {
        free(text.v);
        return AK_FAIL(AK_ERR_NO_MEMORY, "json schema: out of memory");
    }
    ak__gbnf g;
    ak_status st = ak__gbnf_parse(text.v, text.n, &g);
    free(text.v);
    if (st == AK_OK) {
        ak__gbnf_free(&g);
        return AK_OK;
    }
    if (st == AK_ERR_NO_MEMORY) return st;
    char why[512]; /* copied: the new error is written where the old one is */
    snprintf(why, sizeof why, "%s", ak_last_error());
    return AK_FAIL(AK_ERR_INVALID_ARG, "json schema: its grammar does not compile%s: %s",
                   strstr(why, "left-recursive") ? " (a $ref reaches its own schema before "
                                                   "matching any character)" : "", why);
}

ak_status ak__json_schema_rules(const char *schema_json, size_t len, const char *prefix, char **gbnf) {
    AK_ARG_CHECK(gbnf != NULL, "json schema: gbnf is NULL");
    *gbnf = NULL;
    AK_ARG_CHECK(schema_json != NULL && prefix != NULL && *prefix, "json schema: NULL argument");
    for (const char *p = prefix; *p; ++p)
        AK_ARG_CHECK((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '-',
                     "json schema: prefix '%s' is not [a-zA-Z0-9-]+", prefix);
    AK_ARG_CHECK(strlen(prefix) < 32, "json schema: prefix longer than 31 characters");
    cJSON *root = cJSON_ParseWithLength(schema_json, len);
    if (!root) return AK_FAIL(AK_ERR_INVALID_ARG, "json schema: not valid JSON");
    ak_status st = check_strings(root);
    if (st != AK_OK) {
        cJSON_Delete(root);
        return st;
    }
    conv c = {.root = root, .prefix = prefix};
    sbuf top = {0};
    st = schema_expr(&c, root, &top);
    if (st == AK_OK) {
        sbuf all = {0};
        sb_printf(&all, "%s ::= %s\n", prefix, top.v ? top.v : "\"\"");
        emit_helpers(&c);
        if (c.rules.v) sb_puts(&all, c.rules.v);
        if (all.oom || c.rules.oom || top.oom) st = AK_FAIL(AK_ERR_NO_MEMORY, "json schema: out of memory");
        if (st == AK_OK) st = check_compiles(prefix, all.v);
        if (st == AK_OK) st = ak_alloc(all.n + 1, (void **)gbnf);
        if (st == AK_OK) memcpy(*gbnf, all.v, all.n + 1);
        free(all.v);
    }
    free(top.v), free(c.rules.v), free(c.defs);
    cJSON_Delete(root);
    return st;
}
