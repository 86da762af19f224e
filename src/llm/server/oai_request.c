/* Parsing and validation of OpenAI request bodies (/v1/completions and
 * /v1/chat/completions). Every known field is checked for its JSON type and range; a
 * null value counts as absent, as in OpenAI's API; unknown fields are ignored. A field
 * we cannot honour (echo, suffix, best_of != n, logit_bias) is refused rather than
 * silently ignored. The tool fields and tool messages are checked in tools.c. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "llm/server/oai_format.h"
#include "llm/server/oai.h"

void ak__oai_error_set(ak__oai_error *e, int http, const char *param, const char *code,
                       const char *fmt, ...) {
    e->http = http;
    e->type = http >= 500 ? "server_error" : "invalid_request_error";
    e->param = param;
    e->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
}

/* Returns AK_ERR_INVALID_ARG after filling the error (a 400 on `param`). */
#define BAD(err, param, ...) \
    (ak__oai_error_set((err), 400, (param), NULL, __VA_ARGS__), AK_ERR_INVALID_ARG)

static const char *json_type_name(const cJSON *v) {
    if (cJSON_IsString(v)) return "a string";
    if (cJSON_IsNumber(v)) return "a number";
    if (cJSON_IsBool(v)) return "a boolean";
    if (cJSON_IsArray(v)) return "an array";
    if (cJSON_IsObject(v)) return "an object";
    return "null";
}

/* The field, or NULL when absent or null. */
static const cJSON *field(const cJSON *obj, const char *name) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);
    return v && !cJSON_IsNull(v) ? v : NULL;
}

static ak_status wrong_type(ak__oai_error *err, const char *name, const char *want,
                            const cJSON *v) {
    return BAD(err, name, "Invalid type for '%s': expected %s, but got %s instead.", name, want,
               json_type_name(v));
}

/* ---- typed getters: leave *out alone when the field is absent ------------------------ */

static ak_status get_bool(const cJSON *obj, const char *name, int *out, ak__oai_error *err) {
    const cJSON *v = field(obj, name);
    if (!v) return AK_OK;
    if (!cJSON_IsBool(v)) return wrong_type(err, name, "a boolean", v);
    *out = cJSON_IsTrue(v);
    return AK_OK;
}

/* A number in [lo, hi]; `lo_open` excludes lo. */
static ak_status get_number(const cJSON *obj, const char *name, double lo, int lo_open,
                            double hi, float *out, ak__oai_error *err) {
    const cJSON *v = field(obj, name);
    if (!v) return AK_OK;
    if (!cJSON_IsNumber(v)) return wrong_type(err, name, "a number", v);
    double d = v->valuedouble;
    if (!(lo_open ? d > lo : d >= lo) || !(d <= hi))
        return BAD(err, name, "'%s' must be %s %g and at most %g (got %g).", name,
                   lo_open ? "greater than" : "at least", lo, hi, d);
    *out = (float)d;
    return AK_OK;
}

static int is_whole(double d) {
    return isfinite(d) && d == floor(d) && fabs(d) <= 9007199254740992.0;
}

static ak_status get_int(const cJSON *obj, const char *name, int64_t lo, int64_t hi,
                         int64_t *out, int *present, ak__oai_error *err) {
    const cJSON *v = field(obj, name);
    if (!v) return AK_OK;
    if (!cJSON_IsNumber(v) || !is_whole(v->valuedouble))
        return wrong_type(err, name, "an integer", v);
    double d = v->valuedouble;
    if (d < (double)lo || d > (double)hi)
        return BAD(err, name, "'%s' must be between %lld and %lld (got %.0f).", name,
                   (long long)lo, (long long)hi, d);
    *out = (int64_t)d;
    if (present) *present = 1;
    return AK_OK;
}

static ak_status get_int32(const cJSON *obj, const char *name, int64_t lo, int64_t hi,
                           int32_t *out, ak__oai_error *err) {
    int64_t v = *out;
    AK_CHECK(get_int(obj, name, lo, hi, &v, NULL, err));
    *out = (int32_t)v;
    return AK_OK;
}

/* Token ids: a non-empty array of integers in [0, n_vocab); *ids is malloc'd. */
static ak_status get_ids(const cJSON *arr, const char *name, int32_t n_vocab, int allow_empty,
                         int32_t **ids, size_t *n, ak__oai_error *err) {
    size_t count = (size_t)cJSON_GetArraySize(arr);
    if (count == 0 && !allow_empty) return BAD(err, name, "'%s' must not be empty.", name);
    int32_t *v = malloc((count ? count : 1) * sizeof *v);
    if (!v) return AK_FAIL(AK_ERR_NO_MEMORY, "%zu token ids", count);
    size_t i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, arr) {
        if (!cJSON_IsNumber(e) || !is_whole(e->valuedouble) || e->valuedouble < 0 ||
            e->valuedouble >= n_vocab) {
            free(v);
            return BAD(err, name, "'%s' must hold token ids between 0 and %d (entry %zu).", name,
                       n_vocab - 1, i);
        }
        v[i++] = (int32_t)e->valuedouble;
    }
    *ids = v;
    *n = count;
    return AK_OK;
}

/* ---- fields shared by both endpoints ------------------------------------------------- */

static ak_status parse_stop(const cJSON *obj, ak__oai_request *r, ak__oai_error *err) {
    const cJSON *v = field(obj, "stop");
    if (!v) return AK_OK;
    if (!cJSON_IsString(v) && !cJSON_IsArray(v))
        return wrong_type(err, "stop", "a string or an array of strings", v);
    size_t n = cJSON_IsString(v) ? 1 : (size_t)cJSON_GetArraySize(v);
    if (n > AK__OAI_MAX_STOPS)
        return BAD(err, "stop", "'stop' holds at most %d strings.", AK__OAI_MAX_STOPS);
    r->stops = calloc(n ? n : 1, sizeof *r->stops);
    if (!r->stops) return AK_FAIL(AK_ERR_NO_MEMORY, "stop list");
    const cJSON *e = cJSON_IsString(v) ? v : v->child;
    for (size_t i = 0; i < n; i++, e = e->next) {
        if (!cJSON_IsString(e))
            return wrong_type(err, "stop", "a string or an array of strings", e);
        size_t len = strlen(e->valuestring);
        if (len == 0 || len > AK__OAI_MAX_STOP_LEN)
            return BAD(err, "stop", "each stop string must have 1 to %d bytes.",
                       AK__OAI_MAX_STOP_LEN);
        r->stops[r->n_stops++] = e->valuestring;
    }
    return AK_OK;
}

static ak_status parse_sampling(const cJSON *obj, ak__oai_request *r, ak__oai_error *err) {
    ak_sampling_params *s = &r->sampling;
    int64_t seed = 0;
    AK_CHECK(get_number(obj, "temperature", 0, 0, 2, &s->temperature, err));
    AK_CHECK(get_number(obj, "top_p", 0, 1, 1, &s->top_p, err));
    AK_CHECK(get_number(obj, "min_p", 0, 0, 1, &s->min_p, err));
    AK_CHECK(get_int32(obj, "top_k", -1, INT32_MAX, &s->top_k, err));
    if (s->top_k < 0) s->top_k = 0; /* -1 means off, as in vLLM */
    AK_CHECK(get_number(obj, "presence_penalty", -2, 0, 2, &s->presence_penalty, err));
    AK_CHECK(get_number(obj, "frequency_penalty", -2, 0, 2, &s->frequency_penalty, err));
    AK_CHECK(get_number(obj, "repetition_penalty", 0, 1, 10, &s->repetition_penalty, err));
    AK_CHECK(get_int(obj, "seed", INT64_MIN, INT64_MAX, &seed, &r->seed_set, err));
    s->seed = (uint64_t)seed;
    return AK_OK;
}

static ak_status parse_common(const cJSON *obj, int32_t n_vocab, ak__oai_request *r,
                              ak__oai_error *err) {
    AK_CHECK(parse_sampling(obj, r, err));
    AK_CHECK(get_int32(obj, "max_tokens", 1, INT32_MAX, &r->max_tokens, err));
    AK_CHECK(get_int32(obj, "n", 1, AK__OAI_MAX_N, &r->n, err));
    AK_CHECK(get_bool(obj, "stream", &r->stream, err));
    AK_CHECK(get_bool(obj, "ignore_eos", &r->ignore_eos, err));
    AK_CHECK(parse_stop(obj, r, err));
    const cJSON *so = field(obj, "stream_options");
    if (so && !cJSON_IsObject(so)) return wrong_type(err, "stream_options", "an object", so);
    if (so) AK_CHECK(get_bool(so, "include_usage", &r->include_usage, err));
    const cJSON *ids = field(obj, "stop_token_ids");
    if (ids && !cJSON_IsArray(ids)) return wrong_type(err, "stop_token_ids", "an array", ids);
    if (ids)
        AK_CHECK(get_ids(ids, "stop_token_ids", n_vocab, 1, &r->stop_ids, &r->n_stop_ids, err));
    const cJSON *bias = field(obj, "logit_bias");
    if (bias && (!cJSON_IsObject(bias) || bias->child))
        return BAD(err, "logit_bias", "'logit_bias' is not supported.");
    return AK_OK;
}

/* ---- /v1/completions ----------------------------------------------------------------- */

static ak_status parse_prompt(const cJSON *obj, int32_t n_vocab, ak__oai_request *r,
                              ak__oai_error *err) {
    const cJSON *p = field(obj, "prompt");
    if (!p) return BAD(err, "prompt", "'prompt' is required.");
    /* one prompt, possibly wrapped in a one-element batch */
    if (cJSON_IsArray(p) && cJSON_GetArraySize(p) == 1 &&
        (cJSON_IsString(p->child) || cJSON_IsArray(p->child)))
        p = p->child;
    else if (cJSON_IsArray(p) && p->child && (cJSON_IsString(p->child) || cJSON_IsArray(p->child)))
        return BAD(err, "prompt", "Only one prompt per request is supported.");
    if (cJSON_IsString(p)) {
        if (p->valuestring[0] == '\0') return BAD(err, "prompt", "'prompt' must not be empty.");
        r->prompt = p->valuestring;
        return AK_OK;
    }
    if (!cJSON_IsArray(p)) return wrong_type(err, "prompt", "a string or an array of token ids", p);
    return get_ids(p, "prompt", n_vocab, 0, &r->prompt_ids, &r->n_prompt_ids, err);
}

static ak_status parse_completion(const cJSON *obj, int32_t n_vocab, ak__oai_request *r,
                                  ak__oai_error *err) {
    int echo = 0;
    int64_t best_of = r->n, logprobs = -1;
    AK_CHECK(parse_prompt(obj, n_vocab, r, err));
    AK_CHECK(get_int(obj, "logprobs", 0, AK__OAI_MAX_LOGPROBS, &logprobs, NULL, err));
    r->logprobs = (int)logprobs;
    r->sampling.n_logprobs = logprobs > 0 ? (int32_t)logprobs : 0;
    AK_CHECK(get_bool(obj, "echo", &echo, err));
    if (echo) return BAD(err, "echo", "'echo' is not supported.");
    if (field(obj, "suffix")) return BAD(err, "suffix", "'suffix' is not supported.");
    AK_CHECK(get_int(obj, "best_of", 1, AK__OAI_MAX_N, &best_of, NULL, err));
    if (best_of != r->n)
        return BAD(err, "best_of", "'best_of' must equal 'n' (it is not supported).");
    return AK_OK;
}

/* ---- /v1/chat/completions ------------------------------------------------------------ */

/* Content as a string, null (assistant turns), or an array of {"type":"text"} parts,
 * joined with newlines. */
static ak_status parse_content(const cJSON *c, size_t i, ak__oai_request *r, const char **out,
                               ak__oai_error *err) {
    if (!c) {
        *out = "";
        return AK_OK;
    }
    if (cJSON_IsString(c)) {
        *out = c->valuestring;
        return AK_OK;
    }
    if (!cJSON_IsArray(c))
        return BAD(err, "messages",
                   "messages[%zu].content must be a string or an array of text parts.", i);
    ak__bytes joined = {NULL, 0, 0};
    ak_status st = ak__bytes_append(&joined, "", 0);
    const cJSON *part;
    cJSON_ArrayForEach(part, c) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(part, "type");
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(part, "text");
        if (st != AK_OK) break;
        if (!cJSON_IsString(type) || strcmp(type->valuestring, "text") || !cJSON_IsString(text)) {
            ak__bytes_free(&joined);
            return BAD(err, "messages",
                       "messages[%zu].content: only {\"type\": \"text\", \"text\": ...} "
                       "parts are supported.",
                       i);
        }
        if (joined.len) st = ak__bytes_append(&joined, "\n", 1);
        if (st == AK_OK)
            st = ak__bytes_append(&joined, text->valuestring, strlen(text->valuestring));
    }
    if (st != AK_OK) {
        ak__bytes_free(&joined);
        return st;
    }
    r->owned[r->n_owned++] = joined.v;
    *out = joined.v;
    return AK_OK;
}

static ak_status parse_message(const cJSON *m, size_t i, ak__oai_request *r, ak__oai_error *err) {
    if (!cJSON_IsObject(m)) return BAD(err, "messages", "messages[%zu] must be an object.", i);
    const cJSON *role = field(m, "role");
    if (!cJSON_IsString(role))
        return BAD(err, "messages", "messages[%zu].role must be a string.", i);
    const char *name = role->valuestring;
    if (!strcmp(name, "developer")) name = "system"; /* OpenAI's newer name for it */
    if (strcmp(name, "system") && strcmp(name, "user") && strcmp(name, "assistant") &&
        strcmp(name, "tool"))
        return BAD(err, "messages", "messages[%zu].role '%s' is not supported (system, developer, "
                   "user, assistant, tool).", i, role->valuestring);
    int is_tool_msg = 0; /* tool_call_id, tool_calls: tools.c */
    AK_CHECK(ak__tools_check_message(m, i, &is_tool_msg, err));
    r->tools.has_tool_messages |= is_tool_msg;
    const cJSON *content = field(m, "content");
    if (!content && strcmp(name, "assistant"))
        return BAD(err, "messages", "messages[%zu].content is required.", i);
    r->messages[i].role = name;
    return parse_content(content, i, r, &r->messages[i].content, err);
}

static ak_status parse_chat(const cJSON *obj, ak__oai_request *r, ak__oai_error *err) {
    const cJSON *msgs = field(obj, "messages");
    if (!msgs) return BAD(err, "messages", "'messages' is required.");
    if (!cJSON_IsArray(msgs)) return wrong_type(err, "messages", "an array", msgs);
    size_t n = (size_t)cJSON_GetArraySize(msgs);
    if (n == 0) return BAD(err, "messages", "'messages' must not be empty.");
    r->messages = calloc(n, sizeof *r->messages);
    r->owned = calloc(n, sizeof *r->owned);
    if (!r->messages || !r->owned) return AK_FAIL(AK_ERR_NO_MEMORY, "%zu messages", n);
    r->n_messages = n;
    size_t i = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, msgs) AK_CHECK(parse_message(m, i++, r, err));
    AK_CHECK(ak__tools_parse_request(obj, &r->tools, err));
    /* max_completion_tokens is the newer name; it wins */
    AK_CHECK(get_int32(obj, "max_completion_tokens", 1, INT32_MAX, &r->max_tokens, err));
    int64_t top = 0;
    int has_top = 0;
    AK_CHECK(get_bool(obj, "logprobs", &r->logprobs, err));
    AK_CHECK(get_int(obj, "top_logprobs", 0, AK__OAI_MAX_LOGPROBS, &top, &has_top, err));
    if (has_top && !r->logprobs)
        return BAD(err, "top_logprobs", "'top_logprobs' requires 'logprobs' to be true.");
    r->top_logprobs = (int)top;
    r->sampling.n_logprobs = r->logprobs ? (int32_t)top : 0;
    return AK_OK;
}

/* ---- entry --------------------------------------------------------------------------- */

ak_status ak__oai_parse(ak__oai_kind kind, const char *body, size_t len, int32_t n_vocab,
                        ak__oai_request *out, ak__oai_error *err) {
    AK_ARG_CHECK(out != NULL && err != NULL, "out or err is NULL");
    memset(out, 0, sizeof *out);
    out->kind = kind;
    out->n = 1;
    out->logprobs = kind == AK__OAI_COMPLETION ? -1 : 0;
    AK_CHECK(ak_sampling_params_default(&out->sampling));
    out->root = body ? cJSON_ParseWithLength(body, len) : NULL;
    if (!out->root) return BAD(err, NULL, "The request body is not valid JSON.");
    if (!cJSON_IsObject(out->root))
        return BAD(err, NULL, "The request body must be a JSON object.");
    /* max_tokens before the chat fields, so max_completion_tokens overrides it */
    AK_CHECK(parse_common(out->root, n_vocab, out, err));
    AK_CHECK(ak__oai_parse_format(out->root, &out->grammar_text, err));
    if (kind == AK__OAI_CHAT) return parse_chat(out->root, out, err);
    return parse_completion(out->root, n_vocab, out, err);
}

void ak__oai_request_free(ak__oai_request *r) {
    if (!r) return;
    cJSON_Delete(r->root);
    free(r->prompt_ids);
    free(r->messages);
    for (size_t i = 0; i < r->n_owned; i++) free(r->owned[i]);
    free(r->owned);
    free(r->stops);
    free(r->stop_ids);
    free(r->grammar_text);
    memset(r, 0, sizeof *r);
}
