/* JSON of OpenAI responses: errors, whole completions and chat completions, stream
 * chunks as server-sent events, usage, and logprobs in the shapes of each endpoint
 * (completions: tokens / token_logprobs / top_logprobs / text_offset; chat: content[]
 * with token, logprob, bytes and top_logprobs). */
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "llm/server/oai.h"

/* cJSON reports allocation failures as NULL returns; one flag collects them all. */
typedef struct jb {
    int oom;
    ak__bytes tmp; /* scratch for token texts */
} jb;

static cJSON *add(jb *b, cJSON *parent, const char *name, cJSON *item) {
    if (!item) {
        b->oom = 1;
        return NULL;
    }
    if (!parent) return item;
    int ok = name ? cJSON_AddItemToObject(parent, name, item) : cJSON_AddItemToArray(parent, item);
    if (!ok) {
        cJSON_Delete(item);
        b->oom = 1;
        return NULL;
    }
    return item;
}

static cJSON *add_str(jb *b, cJSON *o, const char *name, const char *s) {
    return add(b, o, name, s ? cJSON_CreateString(s) : cJSON_CreateNull());
}

static cJSON *add_num(jb *b, cJSON *o, const char *name, double v) {
    return add(b, o, name, cJSON_CreateNumber(v));
}

/* A string of n bytes (not NUL-terminated), made valid UTF-8 first. */
static cJSON *add_text(jb *b, cJSON *o, const char *name, const char *s, size_t n) {
    b->tmp.len = 0;
    if (ak__utf8_sanitize(s ? s : "", s ? n : 0, &b->tmp) != AK_OK) {
        b->oom = 1;
        return NULL;
    }
    return add_str(b, o, name, b->tmp.v ? b->tmp.v : "");
}

static ak_status finish_json(jb *b, cJSON *root, const char *prefix, const char *suffix,
                             ak__bytes *out) {
    char *s = b->oom ? NULL : cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    ak__bytes_free(&b->tmp);
    if (!s) return AK_FAIL(AK_ERR_NO_MEMORY, "server: out of memory for a JSON answer");
    ak_status st = ak__bytes_append(out, prefix, strlen(prefix));
    if (st == AK_OK) st = ak__bytes_append(out, s, strlen(s));
    if (st == AK_OK) st = ak__bytes_append(out, suffix, strlen(suffix));
    cJSON_free(s);
    return st;
}

ak_status ak__oai_error_json(const ak__oai_error *e, ak__bytes *out) {
    jb b = {0, {NULL, 0, 0}};
    cJSON *root = add(&b, NULL, NULL, cJSON_CreateObject());
    cJSON *err = root ? add(&b, root, "error", cJSON_CreateObject()) : NULL;
    if (err) {
        add_str(&b, err, "message", e->message);
        add_str(&b, err, "type", e->type ? e->type : "invalid_request_error");
        add_str(&b, err, "param", e->param);
        add_str(&b, err, "code", e->code);
    }
    return finish_json(&b, root, "", "", out);
}

/* ---- logprobs ------------------------------------------------------------------------ */

/* The token's text (valid UTF-8) into b->tmp; its raw bytes stay in `raw`. */
static const char *token_text(jb *b, const ak_tokenizer *tok, int32_t id, ak__bytes *raw) {
    if (ak__token_bytes(tok, id, raw) != AK_OK) {
        raw->len = 0;
        if (raw->v) raw->v[0] = '\0';
    }
    b->tmp.len = 0;
    if (ak__utf8_sanitize(raw->v ? raw->v : "", raw->len, &b->tmp) != AK_OK) b->oom = 1;
    return b->tmp.v ? b->tmp.v : "";
}

static void completion_logprobs(jb *b, cJSON *choice, const ak__oai_meta *m,
                                const ak__oai_choice *c) {
    cJSON *lp = add(b, choice, "logprobs", cJSON_CreateObject());
    cJSON *tokens = lp ? add(b, lp, "tokens", cJSON_CreateArray()) : NULL;
    cJSON *tlp = lp ? add(b, lp, "token_logprobs", cJSON_CreateArray()) : NULL;
    cJSON *top = lp ? add(b, lp, "top_logprobs", cJSON_CreateArray()) : NULL;
    cJSON *off = lp ? add(b, lp, "text_offset", cJSON_CreateArray()) : NULL;
    if (!tokens || !tlp || !top || !off) return;
    ak__bytes raw = {NULL, 0, 0};
    for (size_t i = 0; i < c->n_lps; i++) {
        const ak__oai_logprob *p = &c->lps[i];
        add_str(b, tokens, NULL, token_text(b, m->tok, p->token, &raw));
        add_num(b, tlp, NULL, p->logprob);
        add_num(b, off, NULL, p->text_offset);
        cJSON *alts = add(b, top, NULL, cJSON_CreateObject());
        for (int32_t k = 0; alts && k < p->n_top; k++)
            add_num(b, alts, token_text(b, m->tok, p->top[k].token, &raw), p->top[k].logprob);
    }
    ak__bytes_free(&raw);
}

/* {"token", "logprob", "bytes": [...]} (+ "top_logprobs" when `top` is given). */
static cJSON *chat_token(jb *b, cJSON *arr, const ak_tokenizer *tok, int32_t id, float logprob,
                         ak__bytes *raw) {
    cJSON *t = add(b, arr, NULL, cJSON_CreateObject());
    if (!t) return NULL;
    add_str(b, t, "token", token_text(b, tok, id, raw));
    add_num(b, t, "logprob", logprob);
    cJSON *bytes = add(b, t, "bytes", cJSON_CreateArray());
    for (size_t i = 0; bytes && i < raw->len; i++)
        add_num(b, bytes, NULL, (unsigned char)raw->v[i]);
    return t;
}

static void chat_logprobs(jb *b, cJSON *choice, const ak__oai_meta *m, const ak__oai_choice *c) {
    cJSON *lp = add(b, choice, "logprobs", cJSON_CreateObject());
    cJSON *content = lp ? add(b, lp, "content", cJSON_CreateArray()) : NULL;
    if (lp) add(b, lp, "refusal", cJSON_CreateNull());
    if (!content) return;
    ak__bytes raw = {NULL, 0, 0};
    for (size_t i = 0; i < c->n_lps; i++) {
        const ak__oai_logprob *p = &c->lps[i];
        cJSON *t = chat_token(b, content, m->tok, p->token, p->logprob, &raw);
        cJSON *top = t ? add(b, t, "top_logprobs", cJSON_CreateArray()) : NULL;
        for (int32_t k = 0; top && k < p->n_top; k++)
            chat_token(b, top, m->tok, p->top[k].token, p->top[k].logprob, &raw);
    }
    ak__bytes_free(&raw);
}

static void add_logprobs(jb *b, cJSON *choice, const ak__oai_meta *m, const ak__oai_choice *c) {
    if (!m->logprobs || !c->lps) add(b, choice, "logprobs", cJSON_CreateNull());
    else if (m->kind == AK__OAI_CHAT) chat_logprobs(b, choice, m, c);
    else completion_logprobs(b, choice, m, c);
}

/* ---- responses and chunks ------------------------------------------------------------ */

static cJSON *envelope(jb *b, const ak__oai_meta *m, int chunk) {
    static const char *const objects[2][2] = {{"text_completion", "text_completion"},
                                              {"chat.completion", "chat.completion.chunk"}};
    cJSON *root = add(b, NULL, NULL, cJSON_CreateObject());
    if (!root) return NULL;
    add_str(b, root, "id", m->id);
    add_str(b, root, "object", objects[m->kind == AK__OAI_CHAT][chunk]);
    add_num(b, root, "created", (double)m->created);
    add_str(b, root, "model", m->model);
    return root;
}

static void add_usage(jb *b, cJSON *root, const ak__oai_usage *u) {
    cJSON *usage = add(b, root, "usage", cJSON_CreateObject());
    if (!usage) return;
    add_num(b, usage, "prompt_tokens", u->prompt_tokens);
    add_num(b, usage, "completion_tokens", u->completion_tokens);
    add_num(b, usage, "total_tokens", (double)u->prompt_tokens + u->completion_tokens);
    cJSON *details = add(b, usage, "prompt_tokens_details", cJSON_CreateObject());
    if (details) add_num(b, details, "cached_tokens", u->cached_tokens);
}

/* Chat: a message (response) or a delta (chunk); completions: text. */
static void add_choice_text(jb *b, cJSON *choice, const ak__oai_meta *m, const ak__oai_choice *c,
                            int chunk) {
    if (m->kind != AK__OAI_CHAT) {
        add_text(b, choice, "text", c->text, c->text_len);
        return;
    }
    cJSON *msg = add(b, choice, chunk ? "delta" : "message", cJSON_CreateObject());
    if (!msg) return;
    if (!chunk || c->first) add_str(b, msg, "role", "assistant");
    if (c->n_calls) { /* tools.c: content is null when the message is only calls */
        if (!chunk && c->text_len) add_text(b, msg, "content", c->text, c->text_len);
        else if (!chunk) add(b, msg, "content", cJSON_CreateNull());
        add(b, msg, "tool_calls",
            ak__tools_calls_json(c->calls, c->n_calls, c->call_index, chunk ? c->call_part : 0));
        return;
    }
    /* the final chunk of a sample has an empty delta */
    if (!chunk || c->first || c->text_len || !c->finish)
        add_text(b, msg, "content", c->text, c->text_len);
}

static cJSON *build(jb *b, const ak__oai_meta *m, const ak__oai_choice *choices, size_t n,
                    const ak__oai_usage *usage, int chunk) {
    cJSON *root = envelope(b, m, chunk);
    cJSON *arr = root ? add(b, root, "choices", cJSON_CreateArray()) : NULL;
    for (size_t i = 0; arr && i < n; i++) {
        cJSON *choice = add(b, arr, NULL, cJSON_CreateObject());
        if (!choice) break;
        add_num(b, choice, "index", choices[i].index);
        add_choice_text(b, choice, m, &choices[i], chunk);
        add_logprobs(b, choice, m, &choices[i]);
        add_str(b, choice, "finish_reason", choices[i].finish);
    }
    if (root && usage) add_usage(b, root, usage);
    return root;
}

ak_status ak__oai_response_json(const ak__oai_meta *m, const ak__oai_choice *choices, size_t n,
                                const ak__oai_usage *usage, ak__bytes *out) {
    jb b = {0, {NULL, 0, 0}};
    return finish_json(&b, build(&b, m, choices, n, usage, 0), "", "", out);
}

ak_status ak__oai_chunk_sse(const ak__oai_meta *m, const ak__oai_choice *choices, size_t n,
                            const ak__oai_usage *usage, ak__bytes *out) {
    jb b = {0, {NULL, 0, 0}};
    return finish_json(&b, build(&b, m, choices, n, usage, 1), "data: ", "\n\n", out);
}
