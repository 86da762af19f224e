/* Structured output fields of the OpenAI requests → a GBNF text, and the compiled-grammar
 * cache (see oai_format.h). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "llm/server/oai_format.h"

#define BAD(err, param, ...) \
    (ak__oai_error_set((err), 400, (param), NULL, __VA_ARGS__), AK_ERR_INVALID_ARG)

static const cJSON *field(const cJSON *obj, const char *name) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);
    return v && !cJSON_IsNull(v) ? v : NULL;
}

/* The GBNF of a JSON schema value, or a 400 naming `param`. */
static ak_status schema_gbnf(const cJSON *schema, const char *param, char **gbnf, ak__oai_error *err) {
    if (!cJSON_IsObject(schema) && !cJSON_IsBool(schema))
        return BAD(err, param, "'%s' must be a JSON schema object.", param);
    char *text = cJSON_PrintUnformatted(schema);
    if (!text) return AK_FAIL(AK_ERR_NO_MEMORY, "server: out of memory");
    char *out = NULL;
    ak_status st = ak_llm_json_schema_to_gbnf(text, strlen(text), &out);
    cJSON_free(text);
    if (st == AK_ERR_INVALID_ARG || st == AK_ERR_UNSUPPORTED)
        return BAD(err, param, "Invalid '%s': %s", param, ak_last_error());
    if (st != AK_OK) return st;
    *gbnf = strdup(out);
    ak_free(out);
    return *gbnf ? AK_OK : AK_FAIL(AK_ERR_NO_MEMORY, "server: out of memory");
}

static ak_status response_format(const cJSON *rf, char **gbnf, ak__oai_error *err) {
    if (!cJSON_IsObject(rf)) return BAD(err, "response_format", "'response_format' must be an object.");
    const cJSON *type = field(rf, "type");
    if (!cJSON_IsString(type))
        return BAD(err, "response_format", "'response_format.type' must be a string (text, json_object, json_schema).");
    const char *t = type->valuestring;
    if (strcmp(t, "text") == 0) return AK_OK;
    if (strcmp(t, "json_object") == 0) {
        cJSON *any = cJSON_Parse("{\"type\":\"object\"}");
        if (!any) return AK_FAIL(AK_ERR_NO_MEMORY, "server: out of memory");
        ak_status st = schema_gbnf(any, "response_format", gbnf, err);
        cJSON_Delete(any);
        return st;
    }
    if (strcmp(t, "json_schema") != 0)
        return BAD(err, "response_format", "'response_format.type' '%s' is not supported (text, json_object, json_schema).", t);
    const cJSON *js = field(rf, "json_schema");
    if (!cJSON_IsObject(js))
        return BAD(err, "response_format", "'response_format.json_schema' must be an object with 'name' and 'schema'.");
    const cJSON *name = field(js, "name"), *strict = field(js, "strict"), *schema = field(js, "schema");
    if (name && !cJSON_IsString(name))
        return BAD(err, "response_format", "'response_format.json_schema.name' must be a string.");
    if (strict && !cJSON_IsBool(strict))
        return BAD(err, "response_format", "'response_format.json_schema.strict' must be a boolean.");
    if (!schema) return BAD(err, "response_format", "'response_format.json_schema.schema' is required.");
    return schema_gbnf(schema, "response_format", gbnf, err);
}

ak_status ak__oai_parse_format(const cJSON *obj, char **gbnf, ak__oai_error *err) {
    *gbnf = NULL;
    const cJSON *rf = field(obj, "response_format"), *gr = field(obj, "grammar"), *js = field(obj, "json_schema");
    int rf_constrains = rf && !(cJSON_IsObject(rf) && cJSON_IsString(field(rf, "type")) &&
                                strcmp(field(rf, "type")->valuestring, "text") == 0);
    const char *given[3];
    int n = 0;
    if (rf_constrains) given[n++] = "response_format";
    if (gr) given[n++] = "grammar";
    if (js) given[n++] = "json_schema";
    if (n > 1)
        return BAD(err, given[1], "'%s' and '%s' cannot be used together (each constrains the output).",
                   given[0], given[1]);
    if (rf) return response_format(rf, gbnf, err);
    if (js) return schema_gbnf(js, "json_schema", gbnf, err);
    if (gr) {
        if (!cJSON_IsString(gr)) return BAD(err, "grammar", "'grammar' must be a string (GBNF).");
        *gbnf = strdup(gr->valuestring);
        return *gbnf ? AK_OK : AK_FAIL(AK_ERR_NO_MEMORY, "server: out of memory");
    }
    return AK_OK;
}

/* ---- cache ---------------------------------------------------------------------------- */

#define CACHE_SLOTS 32

typedef struct entry {
    char *text;
    uint64_t hash;
    const ak_tokenizer *tok;
    ak_llm_grammar *g;
    int refs;       /* requests holding it */
    int cached;     /* still in the table (else freed by the last release) */
    uint64_t used;  /* LRU clock */
} entry;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static entry *g_slots[CACHE_SLOTS];
static entry *g_held[256]; /* evicted but still held */
static uint64_t g_clock;

static uint64_t text_hash(const char *s) {
    uint64_t h = 0xCBF29CE484222325ull;
    for (; *s; ++s) h = (h ^ (unsigned char)*s) * 0x100000001B3ull;
    return h;
}

static void entry_free(entry *e) {
    ak_llm_grammar_free(e->g);
    free(e->text);
    free(e);
}

/* Finds the entry of a held grammar (cache or evicted list); under g_mu. */
static entry **find_held(const ak_llm_grammar *g) {
    for (int i = 0; i < CACHE_SLOTS; ++i)
        if (g_slots[i] && g_slots[i]->g == g) return &g_slots[i];
    for (int i = 0; i < 256; ++i)
        if (g_held[i] && g_held[i]->g == g) return &g_held[i];
    return NULL;
}

static void insert(entry *e) { /* under g_mu; evicts the least recently used */
    int victim = 0;
    for (int i = 0; i < CACHE_SLOTS; ++i) {
        if (!g_slots[i]) { victim = i; break; }
        if (g_slots[i]->used < g_slots[victim]->used) victim = i;
    }
    entry *old = g_slots[victim];
    g_slots[victim] = e;
    if (!old) return;
    old->cached = 0;
    if (old->refs == 0) {
        entry_free(old);
        return;
    }
    for (int i = 0; i < 256; ++i)
        if (!g_held[i]) { g_held[i] = old; return; }
    old->cached = -1; /* nowhere to park it: leaked until released (never with 256 slots) */
}

ak_status ak__oai_grammar_acquire(const ak_tokenizer *tok, const char *gbnf,
                                  const ak_llm_grammar **out, ak__oai_error *err) {
    uint64_t h = text_hash(gbnf);
    pthread_mutex_lock(&g_mu);
    for (int i = 0; i < CACHE_SLOTS; ++i) {
        entry *e = g_slots[i];
        if (e && e->hash == h && e->tok == tok && strcmp(e->text, gbnf) == 0) {
            e->refs++;
            e->used = ++g_clock;
            *out = e->g;
            pthread_mutex_unlock(&g_mu);
            return AK_OK;
        }
    }
    pthread_mutex_unlock(&g_mu);
    /* compile outside the lock (a large grammar takes milliseconds) */
    ak_llm_grammar *g = NULL;
    ak_status st = ak_llm_grammar_compile(tok, gbnf, strlen(gbnf), &g);
    if (st == AK_ERR_INVALID_ARG || st == AK_ERR_UNSUPPORTED)
        return BAD(err, "grammar", "Invalid grammar: %s", ak_last_error());
    if (st != AK_OK) return st;
    entry *e = calloc(1, sizeof *e);
    char *text = strdup(gbnf);
    if (!e || !text) {
        free(e), free(text);
        ak_llm_grammar_free(g);
        return AK_FAIL(AK_ERR_NO_MEMORY, "server: out of memory");
    }
    *e = (entry){text, h, tok, g, 1, 1, 0};
    pthread_mutex_lock(&g_mu);
    e->used = ++g_clock;
    insert(e);
    pthread_mutex_unlock(&g_mu);
    *out = g;
    return AK_OK;
}

void ak__oai_grammar_release(const ak_llm_grammar *g) {
    if (!g) return;
    pthread_mutex_lock(&g_mu);
    entry **slot = find_held(g);
    if (slot) {
        entry *e = *slot;
        if (--e->refs == 0 && !e->cached) {
            *slot = NULL;
            entry_free(e);
        }
    }
    pthread_mutex_unlock(&g_mu);
}
