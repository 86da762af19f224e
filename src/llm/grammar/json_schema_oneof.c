/* JSON Schema oneOf: when may a grammar stand for "exactly one branch"?
 *
 * A grammar can only say "one branch or another" (anyOf). That equals oneOf when no value
 * the grammar generates from one branch also validates against another, so the converter
 * accepts a oneOf only when every pair of branches is provably disjoint, by one of:
 *   - kinds: the JSON kinds one branch generates are ones the other never accepts
 *     (integer counts as number: 3 is valid for both);
 *   - values: both branches are const/enum with no value in common;
 *   - a discriminator: both generate objects and a property required by both has
 *     const/enum values in common in neither;
 *   - a closed object: one branch requires a property the other, with
 *     additionalProperties false, does not list.
 * Anything else (e.g. oneOf integer / number) may produce a value that matches two
 * branches, which breaks the schema, so it is refused. Branch $refs are resolved by the
 * caller; nested $refs count as "anything". */
#include <string.h>

#include <cjson/cJSON.h>

#include "llm/grammar/json_schema.h"

enum {
    KIND_NULL = 1,
    KIND_BOOL = 2,
    KIND_NUMBER = 4,
    KIND_STRING = 8,
    KIND_ARRAY = 16,
    KIND_OBJECT = 32,
    KIND_ANY = 63
};

static unsigned kind_of_value(const cJSON *v) {
    if (cJSON_IsNull(v)) return KIND_NULL;
    if (cJSON_IsBool(v)) return KIND_BOOL;
    if (cJSON_IsNumber(v)) return KIND_NUMBER;
    if (cJSON_IsString(v)) return KIND_STRING;
    if (cJSON_IsArray(v)) return KIND_ARRAY;
    return KIND_OBJECT;
}

static unsigned kind_of_type_name(const char *t) {
    static const struct {
        const char *name;
        unsigned kind;
    } names[] = {{"null", KIND_NULL},     {"boolean", KIND_BOOL}, {"integer", KIND_NUMBER},
                 {"number", KIND_NUMBER}, {"string", KIND_STRING}, {"array", KIND_ARRAY},
                 {"object", KIND_OBJECT}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; ++i)
        if (strcmp(names[i].name, t) == 0) return names[i].kind;
    return KIND_ANY; /* an unknown type is refused by the converter itself */
}

/* Kinds named by const/enum/type, or 0 when the schema names none. */
static unsigned declared_kinds(const cJSON *s) {
    const cJSON *v;
    if ((v = cJSON_GetObjectItemCaseSensitive(s, "const"))) return kind_of_value(v);
    unsigned k = 0;
    if ((v = cJSON_GetObjectItemCaseSensitive(s, "enum"))) {
        for (const cJSON *e = v->child; e; e = e->next) k |= kind_of_value(e);
        return k;
    }
    v = cJSON_GetObjectItemCaseSensitive(s, "type");
    if (cJSON_IsString(v)) return kind_of_type_name(v->valuestring);
    if (cJSON_IsArray(v))
        for (const cJSON *t = v->child; t; t = t->next) k |= cJSON_IsString(t) ? kind_of_type_name(t->valuestring) : KIND_ANY;
    return k;
}

static int combines(const cJSON *s) {
    return cJSON_GetObjectItemCaseSensitive(s, "$ref") || cJSON_GetObjectItemCaseSensitive(s, "anyOf") ||
           cJSON_GetObjectItemCaseSensitive(s, "oneOf") || cJSON_GetObjectItemCaseSensitive(s, "allOf");
}

/* Kinds a value the converter generates for s can have (an untyped schema with
 * properties is generated as an object, with items as an array). */
static unsigned generated_kinds(const cJSON *s) {
    if (!cJSON_IsObject(s)) return cJSON_IsFalse(s) ? 0 : KIND_ANY;
    if (combines(s)) return cJSON_GetObjectItemCaseSensitive(s, "allOf") ? KIND_OBJECT : KIND_ANY;
    unsigned k = declared_kinds(s);
    if (k) return k;
    if (cJSON_GetObjectItemCaseSensitive(s, "properties")) return KIND_OBJECT;
    if (cJSON_GetObjectItemCaseSensitive(s, "items") || cJSON_GetObjectItemCaseSensitive(s, "prefixItems"))
        return KIND_ARRAY;
    return KIND_ANY;
}

/* Kinds a value valid against s can have (validation: an untyped schema takes any kind). */
static unsigned accepted_kinds(const cJSON *s) {
    if (!cJSON_IsObject(s)) return cJSON_IsFalse(s) ? 0 : KIND_ANY;
    if (combines(s)) return KIND_ANY;
    unsigned k = declared_kinds(s);
    return k ? k : KIND_ANY;
}

/* The const/enum values of s, as an array view: 1 and *one set for const, 0 when neither. */
static int value_set(const cJSON *s, const cJSON **list, const cJSON **one) {
    if (!cJSON_IsObject(s) || combines(s)) return 0;
    const cJSON *v;
    if ((v = cJSON_GetObjectItemCaseSensitive(s, "const"))) {
        *one = v, *list = NULL;
        return 1;
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(s, "enum")) && cJSON_IsArray(v)) {
        *one = NULL, *list = v;
        return 1;
    }
    return 0;
}

static int values_disjoint(const cJSON *a, const cJSON *b) {
    const cJSON *la, *oa, *lb, *ob;
    if (!value_set(a, &la, &oa) || !value_set(b, &lb, &ob)) return 0;
    for (const cJSON *x = oa ? oa : la->child; x; x = oa ? NULL : x->next)
        for (const cJSON *y = ob ? ob : lb->child; y; y = ob ? NULL : y->next)
            if (cJSON_Compare(x, y, 1)) return 0;
    return 1;
}

static int requires(const cJSON *s, const char *name) {
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(s, "required");
    for (const cJSON *r = cJSON_IsArray(req) ? req->child : NULL; r; r = r->next)
        if (cJSON_IsString(r) && strcmp(r->valuestring, name) == 0) return 1;
    return 0;
}

static const cJSON *property(const cJSON *s, const char *name) {
    return cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(s, "properties"), name);
}

/* A property both require whose const/enum values never meet. */
static int has_discriminator(const cJSON *a, const cJSON *b) {
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(a, "required");
    for (const cJSON *r = cJSON_IsArray(req) ? req->child : NULL; r; r = r->next)
        if (cJSON_IsString(r) && requires(b, r->valuestring) &&
            values_disjoint(property(a, r->valuestring), property(b, r->valuestring)))
            return 1;
    return 0;
}

/* a requires a property that closed b does not list, so no value of a is valid for b. */
static int excluded_by_closed(const cJSON *a, const cJSON *b) {
    if (!cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(b, "additionalProperties"))) return 0;
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(a, "required");
    for (const cJSON *r = cJSON_IsArray(req) ? req->child : NULL; r; r = r->next)
        if (cJSON_IsString(r) && !property(b, r->valuestring)) return 1;
    return 0;
}

int ak__json_schema_disjoint(const cJSON *a, const cJSON *b) {
    unsigned ga = generated_kinds(a), gb = generated_kinds(b);
    if (!(ga & accepted_kinds(b)) && !(gb & accepted_kinds(a))) return 1;
    if (values_disjoint(a, b)) return 1;
    if (ga != KIND_OBJECT || gb != KIND_OBJECT) return 0;
    /* both generate only objects: a value of either fails the other's object keywords */
    return has_discriminator(a, b) || (excluded_by_closed(a, b) && excluded_by_closed(b, a));
}
