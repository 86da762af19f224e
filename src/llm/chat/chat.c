/* Chat templates: recognizes which well-known Jinja chat template a model ships
 * (ak_chat_format_detect) and renders messages the way that template would under
 * Hugging Face's apply_chat_template (ak_chat_render), without a Jinja interpreter.
 *
 * Each renderer follows one reference template literally, including its whitespace,
 * its `trim` / `strip()` calls and its raise_exception() checks (returned as
 * AK_ERR_INVALID_ARG). The reference of each format is named above its renderer;
 * docs/server.md lists them. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "accelkit/llm.h"
#include "core/check.h"

/* ---- output buffer ------------------------------------------------------------------- */

/* Counts every byte; stores them while they fit, so one pass gives the size protocol. */
typedef struct out_buf {
    char *buf;
    size_t cap, len;
} out_buf;

static void put(out_buf *o, const char *s, size_t n) {
    if (o->len < o->cap) {
        size_t room = o->cap - o->len;
        memcpy(o->buf + o->len, s, n < room ? n : room);
    }
    o->len += n;
}

static void puts_(out_buf *o, const char *s) { put(o, s, strlen(s)); }

/* ---- whitespace as Python's str.strip() sees it (Jinja's trim uses it too) ------------ */

/* Length of the UTF-8 sequence at s[0..n) if it is a whitespace code point, else 0. */
static size_t space_at(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    if (c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f)) return 1;
    if (c == 0xc2 && n >= 2 && (s[1] == 0x85 || s[1] == 0xa0)) return 2;
    if (n < 3) return 0;
    unsigned cp = ((c & 0x0fu) << 12) | ((s[1] & 0x3fu) << 6) | (s[2] & 0x3fu);
    if ((c & 0xf0) != 0xe0 || (s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80) return 0;
    if (cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 ||
        cp == 0x202f || cp == 0x205f || cp == 0x3000)
        return 3;
    return 0;
}

/* Length of the whitespace code point that ends s[0..n), else 0. */
static size_t space_before(const unsigned char *s, size_t n) {
    for (size_t k = 1; k <= 3 && k <= n; k++) {
        /* a sequence starts at a byte that is not a continuation byte */
        if ((s[n - k] & 0xc0) == 0x80) continue;
        return space_at(s + n - k, k) == k ? k : 0;
    }
    return 0;
}

static void put_stripped(out_buf *o, const char *text, size_t n) {
    const unsigned char *s = (const unsigned char *)text;
    size_t b = 0, k;
    while (b < n && (k = space_at(s + b, n - b)) > 0) b += k;
    while (n > b && (k = space_before(s + b, n - b)) > 0) n -= k;
    put(o, text + b, n - b);
}

/* ---- shared checks ------------------------------------------------------------------- */

enum { ROLE_SYSTEM, ROLE_USER, ROLE_ASSISTANT };

static int role_of(const ak_chat_message *m) {
    if (!strcmp(m->role, "system")) return ROLE_SYSTEM;
    if (!strcmp(m->role, "user")) return ROLE_USER;
    return ROLE_ASSISTANT;
}

/* The templates' "(role == 'user') != (loop.index0 % 2 == 0)" check. */
static ak_status check_alternation(const ak_chat_message *m, size_t i) {
    if ((role_of(m) == ROLE_USER) != (i % 2 == 0))
        return AK_FAIL(AK_ERR_INVALID_ARG,
                       "chat: conversation roles must alternate user/assistant/user/... "
                       "(message %zu is '%s')", i, m->role);
    return AK_OK;
}

typedef struct render_ctx {
    const ak_chat_message *msg;
    size_t n;
    int gen; /* add_generation_prompt */
    const char *bos, *eos;
    out_buf *o;
} render_ctx;

/* ---- the formats --------------------------------------------------------------------- */

/* "<<SYS>>\n" system "\n<</SYS>>\n\n" content, as one string (caller frees). */
static ak_status join_system(const char *sys, const char *content, char **out) {
    static const char head[] = "<<SYS>>\n", tail[] = "\n<</SYS>>\n\n";
    size_t a = strlen(sys), b = strlen(content);
    char *s = malloc(sizeof head + a + sizeof tail + b);
    if (!s) return AK_FAIL(AK_ERR_NO_MEMORY, "chat: system prompt of %zu bytes", a);
    size_t at = 0;
    memcpy(s + at, head, sizeof head - 1);
    at += sizeof head - 1;
    memcpy(s + at, sys, a);
    at += a;
    memcpy(s + at, tail, sizeof tail - 1);
    at += sizeof tail - 1;
    memcpy(s + at, content, b + 1);
    *out = s;
    return AK_OK;
}

/* meta-llama/Llama-2-7b-chat-hf: the system message goes inside the first [INST] in
 * <<SYS>> markers; each user turn is bos + "[INST] " + strip(content) + " [/INST]", each
 * assistant turn " " + strip(content) + " " + eos. No generation prompt exists. */
static ak_status render_llama2(const render_ctx *c) {
    size_t first = c->n > 0 && role_of(&c->msg[0]) == ROLE_SYSTEM;
    for (size_t i = first; i < c->n; i++) {
        const ak_chat_message *m = &c->msg[i];
        AK_CHECK(check_alternation(m, i - first));
        int role = role_of(m);
        if (role == ROLE_SYSTEM) continue; /* the template prints nothing for it */
        /* strip() applies to the whole content, <<SYS>> block included */
        const char *content = m->content;
        char *joined = NULL;
        if (i == first && first) {
            AK_CHECK(join_system(c->msg[0].content, m->content, &joined));
            content = joined;
        }
        size_t len = strlen(content);
        if (role == ROLE_USER) {
            puts_(c->o, c->bos);
            puts_(c->o, "[INST] ");
            put_stripped(c->o, content, len);
            puts_(c->o, " [/INST]");
        } else {
            puts_(c->o, " ");
            put_stripped(c->o, content, len);
            puts_(c->o, " ");
            puts_(c->o, c->eos);
        }
        free(joined);
    }
    return AK_OK;
}

/* meta-llama/Meta-Llama-3-8B-Instruct: bos, then per message
 * "<|start_header_id|>" role "<|end_header_id|>\n\n" trim(content) "<|eot_id|>". */
static ak_status render_llama3(const render_ctx *c) {
    for (size_t i = 0; i < c->n; i++) {
        if (i == 0) puts_(c->o, c->bos);
        puts_(c->o, "<|start_header_id|>");
        puts_(c->o, c->msg[i].role);
        puts_(c->o, "<|end_header_id|>\n\n");
        put_stripped(c->o, c->msg[i].content, strlen(c->msg[i].content));
        puts_(c->o, "<|eot_id|>");
    }
    if (c->gen) puts_(c->o, "<|start_header_id|>assistant<|end_header_id|>\n\n");
    return AK_OK;
}

/* Every message as open + role + mid + content + close, content as given (the formats
 * that mark turns with tokens alone). */
static void put_turns(const render_ctx *c, const char *open, const char *mid, const char *close) {
    for (size_t i = 0; i < c->n; i++) {
        puts_(c->o, open);
        puts_(c->o, c->msg[i].role);
        puts_(c->o, mid);
        puts_(c->o, c->msg[i].content);
        puts_(c->o, close);
    }
}

/* ChatML (teknium/OpenHermes-2.5-Mistral-7B, Qwen without its default system prompt):
 * "<|im_start|>" role "\n" content "<|im_end|>\n"; no bos. */
static ak_status render_chatml(const render_ctx *c) {
    put_turns(c, "<|im_start|>", "\n", "<|im_end|>\n");
    if (c->gen) puts_(c->o, "<|im_start|>assistant\n");
    return AK_OK;
}

/* mistralai/Mixtral-8x7B-Instruct-v0.1 and Mistral-7B-Instruct-v0.1/v0.2 (the v1
 * templates of 2024, which accept a first system message): bos, then
 * " [INST] " [system "\n\n"] content " [/INST]" and " " content eos; no stripping. */
static ak_status render_mistral(const render_ctx *c) {
    size_t first = c->n > 0 && role_of(&c->msg[0]) == ROLE_SYSTEM;
    puts_(c->o, c->bos);
    for (size_t i = first; i < c->n; i++) {
        const ak_chat_message *m = &c->msg[i];
        AK_CHECK(check_alternation(m, i - first));
        int role = role_of(m);
        if (role == ROLE_SYSTEM)
            return AK_FAIL(AK_ERR_INVALID_ARG, "chat: mistral accepts a system message only first");
        if (role == ROLE_USER) {
            puts_(c->o, " [INST] ");
            if (i == first && first) {
                puts_(c->o, c->msg[0].content);
                puts_(c->o, "\n\n");
            }
            puts_(c->o, m->content);
            puts_(c->o, " [/INST]");
        } else {
            puts_(c->o, " ");
            puts_(c->o, m->content);
            puts_(c->o, c->eos);
        }
    }
    return AK_OK;
}

/* HuggingFaceH4/zephyr-7b-beta: "<|role|>\n" content eos "\n" per message; the
 * generation prompt "<|assistant|>\n" follows the last message. */
static ak_status render_zephyr(const render_ctx *c) {
    for (size_t i = 0; i < c->n; i++) {
        puts_(c->o, "<|");
        puts_(c->o, c->msg[i].role);
        puts_(c->o, "|>\n");
        puts_(c->o, c->msg[i].content);
        puts_(c->o, c->eos);
        puts_(c->o, "\n");
        if (i + 1 == c->n && c->gen) puts_(c->o, "<|assistant|>\n");
    }
    return AK_OK;
}

/* google/gemma-3 (a first system message is put in front of the first user turn with
 * "\n\n"; gemma-1/2 templates render the same turns and refuse a system message):
 * bos, then "<start_of_turn>" user|model "\n" trim(content) "<end_of_turn>\n". */
static ak_status render_gemma(const render_ctx *c) {
    size_t first = c->n > 0 && role_of(&c->msg[0]) == ROLE_SYSTEM;
    puts_(c->o, c->bos);
    for (size_t i = first; i < c->n; i++) {
        const ak_chat_message *m = &c->msg[i];
        AK_CHECK(check_alternation(m, i - first));
        puts_(c->o, "<start_of_turn>");
        puts_(c->o, role_of(m) == ROLE_ASSISTANT ? "model" : m->role);
        puts_(c->o, "\n");
        if (i == first && first) {
            puts_(c->o, c->msg[0].content);
            puts_(c->o, "\n\n");
        }
        put_stripped(c->o, m->content, strlen(m->content));
        puts_(c->o, "<end_of_turn>\n");
    }
    if (c->gen) puts_(c->o, "<start_of_turn>model\n");
    return AK_OK;
}

/* microsoft/Phi-3-mini-4k-instruct: "<|role|>\n" content "<|end|>\n"; then the
 * generation prompt "<|assistant|>\n", or eos without it. */
static ak_status render_phi3(const render_ctx *c) {
    put_turns(c, "<|", "|>\n", "<|end|>\n");
    puts_(c->o, c->gen ? "<|assistant|>\n" : c->eos);
    return AK_OK;
}

/* ---- registry ------------------------------------------------------------------------ */

typedef struct chat_format {
    const char *name;
    ak_status (*render)(const render_ctx *c);
} chat_format;

static const chat_format k_formats[] = {
    {"llama-2", render_llama2}, {"llama-3", render_llama3}, {"chatml", render_chatml},
    {"mistral", render_mistral}, {"zephyr", render_zephyr}, {"gemma", render_gemma},
    {"phi-3", render_phi3},
};
#define N_FORMATS (sizeof k_formats / sizeof k_formats[0])

static const chat_format *find_format(const char *name) {
    for (size_t i = 0; i < N_FORMATS; i++)
        if (!strcmp(k_formats[i].name, name)) return &k_formats[i];
    return NULL;
}

/* Marker tests, most specific first: llama-2 and mistral both use [INST]; phi-3 and
 * zephyr both use <|user|> (phi-3 closes turns with <|end|>). */
ak_status ak_chat_format_detect(const char *template_text, const char **format) {
    AK_ARG_CHECK(template_text != NULL, "template_text is NULL");
    AK_ARG_CHECK(format != NULL, "format is NULL");
    const char *t = template_text, *name = NULL;
    if (strstr(t, "<|start_header_id|>")) name = "llama-3";
    else if (strstr(t, "<|im_start|>")) name = "chatml";
    else if (strstr(t, "<start_of_turn>")) name = "gemma";
    else if (strstr(t, "[INST]")) name = strstr(t, "<<SYS>>") ? "llama-2" : "mistral";
    else if (strstr(t, "<|user|>")) name = strstr(t, "<|end|>") ? "phi-3" : "zephyr";
    *format = name;
    if (!name) return AK_FAIL(AK_ERR_UNSUPPORTED, "chat template matches no known format");
    return AK_OK;
}

static ak_status check_messages(const ak_chat_message *messages, size_t n) {
    AK_ARG_CHECK(messages != NULL || n == 0, "messages is NULL with n %zu", n);
    for (size_t i = 0; i < n; i++) {
        const ak_chat_message *m = &messages[i];
        AK_ARG_CHECK(m->role != NULL && m->content != NULL, "message %zu has no role or content",
                     i);
        AK_ARG_CHECK(!strcmp(m->role, "system") || !strcmp(m->role, "user") ||
                         !strcmp(m->role, "assistant"),
                     "message %zu: unknown role '%s' (system, user, assistant)", i, m->role);
    }
    return AK_OK;
}

ak_status ak_chat_render(const char *format, const ak_chat_message *messages, size_t n,
                         int add_generation_prompt, const char *bos, const char *eos, char *buf,
                         size_t cap, size_t *len) {
    AK_ARG_CHECK(format != NULL, "format is NULL");
    AK_ARG_CHECK(len != NULL, "len is NULL");
    AK_ARG_CHECK(buf != NULL || cap == 0, "buf is NULL with cap %zu", cap);
    const chat_format *f = find_format(format);
    if (!f)
        return AK_FAIL(AK_ERR_INVALID_ARG, "unknown chat format '%s' (llama-2, llama-3, chatml, "
                       "mistral, zephyr, gemma, phi-3)", format);
    AK_CHECK(check_messages(messages, n));
    /* a counting pass first, so a buffer that is too small is left untouched */
    out_buf o = {NULL, 0, 0};
    render_ctx c = {messages, n, add_generation_prompt, bos ? bos : "", eos ? eos : "", &o};
    AK_CHECK(f->render(&c));
    *len = o.len;
    if (o.len > cap)
        return AK_FAIL(AK_ERR_INVALID_ARG, "chat: %zu bytes do not fit in %zu", o.len, cap);
    o = (out_buf){buf, cap, 0};
    AK_CHECK(f->render(&c));
    if (o.len < cap) buf[o.len] = '\0';
    return AK_OK;
}
