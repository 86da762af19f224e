/* Tools (function calling) of `ak serve`'s chat API: request validation, messages for the
 * chat template, format detection, the streaming call parser, the tool_calls JSON and the
 * GBNF of forced calls. See tools.h; docs/server.md describes the behaviour. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "llm/server/oai.h"
#include "llm/server/tools.h"

#define BAD(err, param, ...) \
    (ak__oai_error_set((err), 400, (param), NULL, __VA_ARGS__), AK_ERR_INVALID_ARG)

/* The field, or NULL when absent or null (OpenAI's reading of null). */
static const cJSON *field(const cJSON *obj, const char *name) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);
    return v && !cJSON_IsNull(v) ? v : NULL;
}

/* ---- format detection ----------------------------------------------------------------- */

/* Markers each format's templates write around or into a call, most specific first. */
ak__tool_format ak__tools_detect(const char *t) {
    if (!t) return AK__TOOLS_NONE;
    if (strstr(t, "<tool_call>")) return AK__TOOLS_HERMES;
    if (strstr(t, "[TOOL_CALLS]")) return AK__TOOLS_MISTRAL;
    if (strstr(t, "<|python_tag|>") ||
        (strstr(t, "<|start_header_id|>") && strstr(t, "\"parameters\"")))
        return AK__TOOLS_LLAMA3;
    return AK__TOOLS_NONE;
}

const char *ak__tools_format_name(ak__tool_format f) {
    switch (f) {
    case AK__TOOLS_HERMES: return "hermes";
    case AK__TOOLS_LLAMA3: return "llama3-json";
    case AK__TOOLS_MISTRAL: return "mistral";
    default: return "none";
    }
}

/* ---- the request ------------------------------------------------------------------------ */

/* OpenAI's rule for function names: a-z, A-Z, 0-9, underscores and dashes, 1 to 64. */
static int valid_function_name(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > 64) return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '_' && s[i] != '-') return 0;
    return 1;
}

static ak_status check_tool(const cJSON *tool, size_t i, ak__oai_error *err) {
    if (!cJSON_IsObject(tool)) return BAD(err, "tools", "tools[%zu] must be an object.", i);
    const cJSON *type = field(tool, "type");
    if (!cJSON_IsString(type) || strcmp(type->valuestring, "function"))
        return BAD(err, "tools", "tools[%zu].type must be 'function' (the only tool type "
                   "supported).", i);
    const cJSON *fn = field(tool, "function");
    if (!cJSON_IsObject(fn))
        return BAD(err, "tools", "tools[%zu].function must be an object.", i);
    const cJSON *name = field(fn, "name");
    if (!cJSON_IsString(name) || !valid_function_name(name->valuestring))
        return BAD(err, "tools", "tools[%zu].function.name must be a string of 1 to 64 letters, "
                   "digits, underscores or dashes.", i);
    const cJSON *desc = field(fn, "description");
    if (desc && !cJSON_IsString(desc))
        return BAD(err, "tools", "tools[%zu].function.description must be a string.", i);
    const cJSON *params = field(fn, "parameters");
    if (params && !cJSON_IsObject(params))
        return BAD(err, "tools", "tools[%zu].function.parameters must be a JSON schema object.",
                   i);
    const cJSON *strict = field(fn, "strict");
    if (strict && !cJSON_IsBool(strict))
        return BAD(err, "tools", "tools[%zu].function.strict must be a boolean.", i);
    return AK_OK;
}

static const cJSON *tool_named(const cJSON *tools, const char *name) {
    const cJSON *t;
    cJSON_ArrayForEach(t, tools) {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(field(t, "function"), "name");
        if (cJSON_IsString(n) && !strcmp(n->valuestring, name)) return t;
    }
    return NULL;
}

static ak_status parse_tools(const cJSON *body, ak__oai_tools *out, ak__oai_error *err) {
    const cJSON *tools = field(body, "tools");
    if (!tools) return AK_OK;
    if (!cJSON_IsArray(tools))
        return BAD(err, "tools", "Invalid type for 'tools': expected an array of tools.");
    size_t i = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, tools) {
        AK_CHECK(check_tool(t, i, err));
        const char *name = field(field(t, "function"), "name")->valuestring;
        for (const cJSON *u = tools->child; u != t; u = u->next)
            if (!strcmp(field(field(u, "function"), "name")->valuestring, name))
                return BAD(err, "tools", "tools[%zu]: the function name '%s' is used twice.", i,
                           name);
        i++;
    }
    out->tools = i ? tools : NULL;
    out->n_tools = i;
    return AK_OK;
}

static ak_status parse_choice(const cJSON *body, ak__oai_tools *out, ak__oai_error *err) {
    const cJSON *c = field(body, "tool_choice");
    out->choice = out->tools ? AK__TOOL_CHOICE_AUTO : AK__TOOL_CHOICE_NONE;
    if (!c) return AK_OK;
    if (cJSON_IsString(c)) {
        const char *s = c->valuestring;
        if (!strcmp(s, "none")) out->choice = AK__TOOL_CHOICE_NONE;
        else if (!strcmp(s, "auto")) out->choice = AK__TOOL_CHOICE_AUTO;
        else if (!strcmp(s, "required")) out->choice = AK__TOOL_CHOICE_REQUIRED;
        else
            return BAD(err, "tool_choice", "'tool_choice' must be 'none', 'auto', 'required' or "
                       "{\"type\": \"function\", \"function\": {\"name\": ...}} (got '%s').", s);
    } else if (cJSON_IsObject(c)) {
        const cJSON *type = field(c, "type");
        const cJSON *name = field(field(c, "function"), "name");
        if (!cJSON_IsString(type) || strcmp(type->valuestring, "function") ||
            !cJSON_IsString(name))
            return BAD(err, "tool_choice", "'tool_choice' as an object must be {\"type\": "
                       "\"function\", \"function\": {\"name\": ...}}.");
        if (!out->tools || !tool_named(out->tools, name->valuestring))
            return BAD(err, "tool_choice", "'tool_choice' names the function '%s', which is not "
                       "among 'tools'.", name->valuestring);
        out->choice = AK__TOOL_CHOICE_NAMED;
        out->named = name->valuestring;
    } else {
        return BAD(err, "tool_choice", "Invalid type for 'tool_choice': expected a string or "
                   "an object.");
    }
    if (!out->tools && out->choice != AK__TOOL_CHOICE_NONE)
        return BAD(err, "tool_choice", "'tool_choice' is only allowed when 'tools' are given.");
    return AK_OK;
}

ak_status ak__tools_parse_request(const cJSON *body, ak__oai_tools *out, ak__oai_error *err) {
    out->parallel = 1;
    AK_CHECK(parse_tools(body, out, err));
    AK_CHECK(parse_choice(body, out, err));
    const cJSON *par = field(body, "parallel_tool_calls");
    if (par && !cJSON_IsBool(par))
        return BAD(err, "parallel_tool_calls", "Invalid type for 'parallel_tool_calls': "
                   "expected a boolean.");
    if (par) out->parallel = cJSON_IsTrue(par);
    return AK_OK;
}

/* ---- messages --------------------------------------------------------------------------- */

static ak_status check_call(const cJSON *call, size_t i, size_t k, ak__oai_error *err) {
    const cJSON *id = field(call, "id"), *type = field(call, "type");
    const cJSON *fn = field(call, "function");
    if (!cJSON_IsObject(call) || !cJSON_IsString(id) || !cJSON_IsObject(fn) ||
        (type && (!cJSON_IsString(type) || strcmp(type->valuestring, "function"))))
        return BAD(err, "messages", "messages[%zu].tool_calls[%zu] must be {\"id\": ..., "
                   "\"type\": \"function\", \"function\": {\"name\": ..., \"arguments\": ...}}.",
                   i, k);
    const cJSON *name = field(fn, "name"), *args = field(fn, "arguments");
    if (!cJSON_IsString(name))
        return BAD(err, "messages", "messages[%zu].tool_calls[%zu].function.name must be a "
                   "string.", i, k);
    if (!cJSON_IsString(args))
        return BAD(err, "messages", "messages[%zu].tool_calls[%zu].function.arguments must be a "
                   "string (JSON text).", i, k);
    return AK_OK;
}

ak_status ak__tools_check_message(const cJSON *m, size_t i, int *is_tool_msg,
                                  ak__oai_error *err) {
    const cJSON *role = field(m, "role");
    const cJSON *calls = field(m, "tool_calls");
    *is_tool_msg = 0;
    if (cJSON_IsString(role) && !strcmp(role->valuestring, "tool")) {
        *is_tool_msg = 1;
        const cJSON *id = field(m, "tool_call_id"), *name = field(m, "name");
        if (!cJSON_IsString(id))
            return BAD(err, "messages", "messages[%zu].tool_call_id must be a string (role "
                       "'tool').", i);
        if (name && !cJSON_IsString(name))
            return BAD(err, "messages", "messages[%zu].name must be a string.", i);
        if (calls) return BAD(err, "messages", "messages[%zu]: role 'tool' has no tool_calls.", i);
        return AK_OK;
    }
    if (!calls) return AK_OK;
    if (!cJSON_IsString(role) || strcmp(role->valuestring, "assistant"))
        return BAD(err, "messages", "messages[%zu].tool_calls: only assistant messages have "
                   "tool calls.", i);
    if (!cJSON_IsArray(calls))
        return BAD(err, "messages", "messages[%zu].tool_calls must be an array.", i);
    size_t k = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, calls) AK_CHECK(check_call(c, i, k++, err));
    *is_tool_msg = k > 0;
    return AK_OK;
}

/* tool_calls[].function.arguments: a string holding a JSON object becomes the object. */
static void arguments_as_objects(cJSON *m) {
    cJSON *call;
    cJSON_ArrayForEach(call, cJSON_GetObjectItemCaseSensitive(m, "tool_calls")) {
        cJSON *fn = cJSON_GetObjectItemCaseSensitive(call, "function");
        cJSON *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
        if (!cJSON_IsString(args)) continue;
        cJSON *obj = cJSON_Parse(args->valuestring);
        if (cJSON_IsObject(obj)) cJSON_ReplaceItemInObjectCaseSensitive(fn, "arguments", obj);
        else cJSON_Delete(obj);
    }
}

static cJSON *template_message(const cJSON *raw, const ak_chat_message *parsed) {
    cJSON *m = cJSON_Duplicate(raw, 1);
    if (!m) return NULL;
    const cJSON *content = field(raw, "content");
    int keep_null = !content && field(raw, "tool_calls");
    cJSON *role = cJSON_CreateString(parsed->role);
    cJSON *text = keep_null ? cJSON_CreateNull() : cJSON_CreateString(parsed->content);
    int ok = role && text;
    cJSON_DeleteItemFromObjectCaseSensitive(m, "role");
    cJSON_DeleteItemFromObjectCaseSensitive(m, "content");
    if (ok) {
        ok = cJSON_AddItemToObject(m, "role", role);
        role = NULL;
        ok = ok && cJSON_AddItemToObject(m, "content", text);
        text = NULL;
    }
    cJSON_Delete(role);
    cJSON_Delete(text);
    if (!ok) {
        cJSON_Delete(m);
        return NULL;
    }
    arguments_as_objects(m);
    return m;
}

ak_status ak__tools_template_messages(const cJSON *raw_messages, const ak_chat_message *parsed,
                                      size_t n, cJSON **out) {
    cJSON *msgs = cJSON_CreateArray();
    const cJSON *raw = raw_messages ? raw_messages->child : NULL;
    for (size_t i = 0; msgs && i < n; i++, raw = raw ? raw->next : NULL) {
        cJSON *m = raw ? template_message(raw, &parsed[i]) : NULL;
        if (!m || !cJSON_AddItemToArray(msgs, m)) {
            cJSON_Delete(m);
            cJSON_Delete(msgs);
            msgs = NULL;
        }
    }
    if (!msgs) return AK_FAIL(AK_ERR_NO_MEMORY, "server: %zu messages for the template", n);
    *out = msgs;
    return AK_OK;
}

/* ---- the call parser -------------------------------------------------------------------- */

typedef struct format_syntax {
    const char *open;   /* the marker in front of a call block */
    const char *close;  /* its end marker; NULL: the block is one JSON value */
    char bare;          /* a block may start with this JSON bracket at the message start */
    const char *args;   /* the arguments' key ("parameters" also accepted for llama3) */
    int array;          /* the block is a JSON array of calls */
} format_syntax;

static const format_syntax k_syntax[] = {
    [AK__TOOLS_NONE] = {NULL, NULL, 0, NULL, 0},
    [AK__TOOLS_HERMES] = {"<tool_call>", "</tool_call>", 0, "arguments", 0},
    /* <|python_tag|> and [TOOL_CALLS] are control tokens, which the detokenizer drops:
     * the bare JSON at the start of the message is a call block too */
    [AK__TOOLS_LLAMA3] = {"<|python_tag|>", NULL, '{', "parameters", 0},
    [AK__TOOLS_MISTRAL] = {"[TOOL_CALLS]", NULL, '[', "arguments", 1},
};

void ak__tool_parser_init(ak__tool_parser *p, ak__tool_format fmt, const cJSON *tools,
                          int parallel, uint64_t seed) {
    memset(p, 0, sizeof *p);
    p->fmt = fmt;
    p->tools = tools;
    p->parallel = parallel;
    p->bare_open = 1;
    p->rng = seed ? seed : 0x9e3779b97f4a7c15ull;
}

void ak__tool_parser_free(ak__tool_parser *p) {
    if (!p) return;
    for (size_t i = 0; i < p->n_calls; i++) {
        free(p->calls[i].name);
        free(p->calls[i].arguments);
    }
    free(p->calls);
    ak__bytes_free(&p->text);
    ak__bytes_free(&p->ws);
    memset(p, 0, sizeof *p);
}

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static int all_space(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!is_space(s[i])) return 0;
    return 1;
}

/* Space, and Llama's ';' between calls. */
static int is_separator(const ak__tool_parser *p, char c) {
    return is_space(c) || (p->fmt == AK__TOOLS_LLAMA3 && c == ';');
}

/* Content decided. Trailing whitespace waits for more content: at the end it is dropped
 * when calls were made (the space around calls is not content), so the result does not
 * depend on how the text was cut into pieces. */
static ak_status emit_content(ak__tool_parser *p, const char *s, size_t n, ak__bytes *out) {
    size_t body = n;
    while (body > 0 && is_separator(p, s[body - 1])) body--;
    if (body > 0) {
        if (p->ws.len) AK_CHECK(ak__bytes_append(out, p->ws.v, p->ws.len));
        p->ws.len = 0;
        p->bare_open = 0;
        AK_CHECK(ak__bytes_append(out, s, body));
    }
    return n > body ? ak__bytes_append(&p->ws, s + body, n - body) : AK_OK;
}

/* The end of the JSON object or array starting at s[0] (after spaces): 1 with *end just
 * past it, 0 when more text is needed, -1 when it is not one. */
static int json_value_end(const char *s, size_t n, size_t *end) {
    size_t i = 0;
    while (i < n && is_space(s[i])) i++;
    if (i == n) return 0;
    if (s[i] != '{' && s[i] != '[') return -1;
    int depth = 0, in_str = 0, esc = 0;
    for (; i < n; i++) {
        char c = s[i];
        if (in_str) {
            if (esc) esc = 0;
            else if (c == '\\') esc = 1;
            else if (c == '"') in_str = 0;
        } else if (c == '"') {
            in_str = 1;
        } else if (c == '{' || c == '[') {
            if (++depth > 256) return -1;
        } else if (c == '}' || c == ']') {
            if (--depth == 0) {
                *end = i + 1;
                return 1;
            }
        }
    }
    return 0;
}

static void random_id(ak__tool_parser *p, char *id, size_t cap) {
    static const char alnum[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    /* Mistral's templates insist on 9 alphanumerics; OpenAI writes call_ + 24 */
    int mistral = p->fmt == AK__TOOLS_MISTRAL;
    size_t n = mistral ? 9 : 24, at = 0;
    if (!mistral) at = (size_t)snprintf(id, cap, "call_");
    for (size_t i = 0; i < n && at + 1 < cap; i++) {
        p->rng ^= p->rng << 13; /* xorshift64 */
        p->rng ^= p->rng >> 7;
        p->rng ^= p->rng << 17;
        id[at++] = alnum[p->rng % (sizeof alnum - 1)];
    }
    id[at] = '\0';
}

/* One call object {"name": <a tool>, "arguments": {...}} into *call; 0 when it is not. */
static int read_call(ak__tool_parser *p, const cJSON *obj, ak__tool_call *call) {
    const format_syntax *fs = &k_syntax[p->fmt];
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(obj, "name");
    if (!cJSON_IsObject(obj) || !cJSON_IsString(name) || !tool_named(p->tools, name->valuestring))
        return 0;
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(obj, fs->args);
    if (!args) args = cJSON_GetObjectItemCaseSensitive(obj, "arguments");
    cJSON *parsed = NULL;
    if (cJSON_IsString(args)) args = parsed = cJSON_Parse(args->valuestring);
    int ok = cJSON_IsObject(args);
    call->name = ok ? strdup(name->valuestring) : NULL;
    call->arguments = ok ? cJSON_PrintUnformatted(args) : NULL;
    cJSON_Delete(parsed);
    if (!call->name || !call->arguments) {
        free(call->name);
        free(call->arguments);
        call->name = call->arguments = NULL;
        return 0;
    }
    random_id(p, call->id, sizeof call->id);
    return 1;
}

static ak_status push_calls(ak__tool_parser *p, ak__tool_call *calls, size_t n) {
    if (p->n_calls + n > p->cap_calls) {
        size_t cap = p->cap_calls ? 2 * p->cap_calls : 4;
        while (cap < p->n_calls + n) cap *= 2;
        ak__tool_call *v = realloc(p->calls, cap * sizeof *v);
        if (!v) return AK_FAIL(AK_ERR_NO_MEMORY, "server: tool calls");
        p->calls = v;
        p->cap_calls = cap;
    }
    memcpy(p->calls + p->n_calls, calls, n * sizeof *calls);
    p->n_calls += n;
    return AK_OK;
}

/* Parses a block's JSON body (a call, or an array of calls): 1 taken, 0 stays text. */
static int take_block(ak__tool_parser *p, const char *s, size_t n, ak_status *st) {
    const char *end = NULL;
    cJSON *v = cJSON_ParseWithLengthOpts(s, n, &end, 0);
    if (!v || !all_space(end, n - (size_t)(end - s))) {
        cJSON_Delete(v);
        return 0;
    }
    size_t count = cJSON_IsArray(v) ? (size_t)cJSON_GetArraySize(v) : 1;
    ak__tool_call *calls = calloc(count ? count : 1, sizeof *calls);
    size_t got = 0;
    const cJSON *c = cJSON_IsArray(v) ? v->child : v;
    int want_array = k_syntax[p->fmt].array;
    int ok = calls && count > 0 && (want_array == !!cJSON_IsArray(v));
    for (; ok && c && got < count; c = c->next, got++) ok = read_call(p, c, &calls[got]);
    if (ok) *st = push_calls(p, calls, count);
    else
        for (size_t i = 0; calls && i < got; i++) {
            free(calls[i].name);
            free(calls[i].arguments);
        }
    free(calls);
    cJSON_Delete(v);
    return ok;
}

/* Where the next call block may start in s[0..n): its offset and the marker's length
 * (0 for a bare bracket); 0 when none. *hold: bytes at the end to keep back because they
 * could still start one. */
static int find_block(const ak__tool_parser *p, const char *s, size_t n, size_t *at,
                      size_t *mlen, size_t *hold) {
    const format_syntax *fs = &k_syntax[p->fmt];
    size_t ml = strlen(fs->open);
    const char *hit = n >= ml ? memmem(s, n, fs->open, ml) : NULL;
    *hold = 0;
    if (p->bare_open && fs->bare) {
        size_t j = 0;
        while (j < n && is_separator(p, s[j])) j++;
        if (j < n && s[j] == fs->bare && (!hit || (size_t)(hit - s) > j)) {
            *at = j;
            *mlen = 0;
            return 1;
        }
        if (j == n) { /* only space so far: a call may still begin */
            *hold = n;
            return 0;
        }
    }
    if (hit) {
        *at = (size_t)(hit - s);
        *mlen = ml;
        return 1;
    }
    for (size_t k = ml - 1 < n ? ml - 1 : n; k > 0; k--)
        if (!memcmp(s + n - k, fs->open, k)) {
            *hold = k;
            break;
        }
    return 0;
}

/* The end of the block whose body starts at s[0]: 1 with *body_len and *block_len, 0 when
 * more text is needed, -1 when it cannot be a block. */
static int block_end(const ak__tool_parser *p, const char *s, size_t n, size_t *body_len,
                     size_t *block_len) {
    const format_syntax *fs = &k_syntax[p->fmt];
    if (fs->close) {
        size_t cl = strlen(fs->close);
        const char *hit = n >= cl ? memmem(s, n, fs->close, cl) : NULL;
        if (!hit) return 0;
        *body_len = (size_t)(hit - s);
        *block_len = *body_len + cl;
        return 1;
    }
    size_t end = 0;
    int r = json_value_end(s, n, &end);
    if (r == 1) *body_len = *block_len = end;
    return r;
}

/* One step over the undecided text: 1 to go on, 0 when waiting for more. */
static int step(ak__tool_parser *p, int final, ak__bytes *out, ak_status *st) {
    const char *s = p->text.v + p->pos;
    size_t n = p->text.len - p->pos, at = 0, mlen = 0, hold = 0;
    if (p->done) {
        *st = emit_content(p, s, n, out);
        p->pos += n;
        return 0;
    }
    if (!find_block(p, s, n, &at, &mlen, &hold)) {
        if (final) hold = 0;
        *st = emit_content(p, s, n - hold, out);
        p->pos += n - hold;
        return 0;
    }
    if ((*st = emit_content(p, s, at, out)) != AK_OK) return 0;
    p->pos += at;
    s += at;
    n -= at;
    size_t body = 0, block = 0;
    int r = block_end(p, s + mlen, n - mlen, &body, &block);
    if (r == 0 && !final) return 0; /* wait for the rest of the block */
    if (r == 1 && take_block(p, s + mlen, body, st)) {
        p->pos += mlen + block;
        p->bare_open = 1; /* another call may follow directly */
        p->done = !p->parallel;
        return *st == AK_OK;
    }
    if (*st != AK_OK) return 0;
    /* not a call: the marker (or bracket) and what it claimed stay text */
    size_t text_len = r == 1 ? mlen + block : (mlen ? mlen : 1);
    if (r == 0) text_len = n; /* final: an unfinished block */
    p->bare_open = 0;
    *st = emit_content(p, s, text_len, out);
    p->pos += text_len;
    return *st == AK_OK;
}

ak_status ak__tool_parser_push(ak__tool_parser *p, const char *text, size_t n, int final,
                               ak__bytes *content) {
    AK_ARG_CHECK(p && p->fmt != AK__TOOLS_NONE, "tool parser without a format");
    if (n) AK_CHECK(ak__bytes_append(&p->text, text, n));
    ak_status st = AK_OK;
    while (p->pos < p->text.len && step(p, final, content, &st)) {
    }
    if (st == AK_OK && final) {
        if (!p->n_calls && p->ws.len) st = ak__bytes_append(content, p->ws.v, p->ws.len);
        p->ws.len = 0;
    }
    return st;
}

/* ---- tool_calls JSON -------------------------------------------------------------------- */

static int add_call(cJSON *arr, const ak__tool_call *c, int32_t index, int part) {
    cJSON *o = cJSON_CreateObject();
    if (!o || !cJSON_AddItemToArray(arr, o)) {
        cJSON_Delete(o);
        return 0;
    }
    if (part && !cJSON_AddNumberToObject(o, "index", index)) return 0;
    if (part != 2 && (!cJSON_AddStringToObject(o, "id", c->id) ||
                      !cJSON_AddStringToObject(o, "type", "function")))
        return 0;
    cJSON *fn = cJSON_AddObjectToObject(o, "function");
    if (!fn) return 0;
    if (part != 2 && !cJSON_AddStringToObject(fn, "name", c->name)) return 0;
    return cJSON_AddStringToObject(fn, "arguments", part == 1 ? "" : c->arguments) != NULL;
}

cJSON *ak__tools_calls_json(const ak__tool_call *calls, size_t n, int32_t first_index,
                            int part) {
    cJSON *arr = cJSON_CreateArray();
    for (size_t i = 0; arr && i < n; i++)
        if (!add_call(arr, &calls[i], first_index + (int32_t)i, part)) {
            cJSON_Delete(arr);
            arr = NULL;
        }
    return arr;
}

/* ---- forced calls: GBNF ------------------------------------------------------------------ */

/* One function's call in the format's syntax, its arguments rule being `args`. */
static ak_status call_rule(ak__bytes *g, ak__tool_format fmt, size_t k, const char *name) {
    switch (fmt) {
    case AK__TOOLS_HERMES:
        return ak__bytes_appendf(g, "fn-%zu ::= \"<tool_call>\\n{\\\"name\\\": \\\"%s\\\", "
                                 "\\\"arguments\\\": \" args-%zu \"}\\n</tool_call>\"\n", k, name, k);
    case AK__TOOLS_LLAMA3:
        return ak__bytes_appendf(g, "fn-%zu ::= \"{\\\"name\\\": \\\"%s\\\", \\\"parameters\\\": \" "
                                 "args-%zu \"}\"\n", k, name, k);
    default:
        return ak__bytes_appendf(g, "fn-%zu ::= \"{\\\"name\\\": \\\"%s\\\", \\\"arguments\\\": \" "
                                 "args-%zu \"}\"\n", k, name, k);
    }
}

/* The root: one call, or (parallel "required") several; Mistral's are in an array. */
static ak_status root_rule(ak__bytes *g, ak__tool_format fmt, int many) {
    if (fmt == AK__TOOLS_MISTRAL)
        return ak__bytes_appendf(g, "root ::= \"[\" call %s\"]\"\n", many ? "(\", \" call)* " : "");
    if (fmt == AK__TOOLS_HERMES && many) return ak__bytes_appendf(g, "root ::= call (\"\\n\" call)*\n");
    return ak__bytes_appendf(g, "root ::= call\n");
}

static ak_status args_rules(ak__bytes *g, const cJSON *fn, size_t k, size_t i,
                            ak__schema_rules_fn rules, ak__oai_error *err) {
    const cJSON *params = field(fn, "parameters");
    if (!params) return ak__bytes_appendf(g, "args-%zu ::= \"{}\"\n", k);
    char *schema = cJSON_PrintUnformatted(params);
    if (!schema) return AK_FAIL(AK_ERR_NO_MEMORY, "server: a tool's schema");
    char prefix[32], *text = NULL;
    snprintf(prefix, sizeof prefix, "args-%zu", k);
    ak_status st = rules(schema, strlen(schema), prefix, &text);
    free(schema);
    if (st == AK_ERR_INVALID_ARG || st == AK_ERR_UNSUPPORTED)
        return BAD(err, "tools", "tools[%zu].function.parameters: %s", i, ak_last_error());
    if (st == AK_OK) st = ak__bytes_appendf(g, "%s\n", text);
    ak_free(text);
    return st;
}

ak_status ak__tools_gbnf(ak__tool_format fmt, const ak__oai_tools *t, ak__schema_rules_fn rules,
                         char **gbnf, ak__oai_error *err) {
    AK_ARG_CHECK(fmt != AK__TOOLS_NONE && t && t->tools && rules && gbnf, "tools_gbnf arguments");
    ak__bytes g = {NULL, 0, 0};
    int many = t->parallel && t->choice == AK__TOOL_CHOICE_REQUIRED && fmt != AK__TOOLS_LLAMA3;
    ak_status st = root_rule(&g, fmt, many);
    if (st == AK_OK) st = ak__bytes_appendf(&g, "call ::=");
    size_t i = 0, k = 0;
    const cJSON *tool;
    cJSON_ArrayForEach(tool, t->tools) { /* the alternatives */
        const char *name = field(field(tool, "function"), "name")->valuestring;
        if (st == AK_OK && (t->choice != AK__TOOL_CHOICE_NAMED || !strcmp(name, t->named)))
            st = ak__bytes_appendf(&g, "%s fn-%zu", k++ ? " |" : "", i);
        i++;
    }
    if (st == AK_OK) st = ak__bytes_append(&g, "\n", 1);
    i = 0;
    cJSON_ArrayForEach(tool, t->tools) {
        const cJSON *fn = field(tool, "function");
        const char *name = field(fn, "name")->valuestring;
        if (st == AK_OK && (t->choice != AK__TOOL_CHOICE_NAMED || !strcmp(name, t->named))) {
            st = call_rule(&g, fmt, i, name);
            if (st == AK_OK) st = args_rules(&g, fn, i, i, rules, err);
        }
        i++;
    }
    if (st != AK_OK) {
        ak__bytes_free(&g);
        return st;
    }
    *gbnf = g.v;
    return AK_OK;
}
