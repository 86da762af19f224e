/* Tools in one generation request (gen.c calls these): what the chat format cannot do is
 * refused, each sample's text goes through a call parser (tools.c) — once at the end for
 * whole responses, piece by piece for streams, where calls go out as delta.tool_calls
 * chunks — and forced calls (tool_choice "required" or a named function) get the grammar
 * that constrains the output to the format's call syntax. */
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "llm/grammar/json_schema.h"
#include "llm/server/oai_format.h"
#include "llm/server/server_internal.h"

struct ak__gen_tools {
    ak__tool_parser parsers[AK__OAI_MAX_N];
    ak__bytes content[AK__OAI_MAX_N]; /* whole: each sample's content */
    int32_t n;
    const ak_llm_grammar *grammar; /* forced calls: from the server's grammar cache, released
                                    * with the request (after the engine's last event) */
};

#define BAD(err, param, ...) \
    (ak__oai_error_set((err), 400, (param), NULL, __VA_ARGS__), AK_ERR_INVALID_ARG)

static ak_status refuse_without_template(const ak__gen *g, int offered, ak__oai_error *err) {
    const char *fmt = g->srv->chat_format;
    if (offered)
        return BAD(err, "tools", "'tools' cannot be used with the built-in chat format '%s': it "
                   "has no tool-call format (serve a model whose Jinja chat template supports "
                   "tools).", fmt);
    if (g->req.tools.has_tool_messages)
        return BAD(err, "messages", "tool calls and role 'tool' messages cannot be rendered by "
                   "the built-in chat format '%s' (serve a model whose Jinja chat template "
                   "supports tools).", fmt);
    return AK_OK;
}

static uint64_t seed_of(const ak__gen *g, int32_t i) {
    uint64_t x = g->t_start_ns ^ ((uint64_t)(uintptr_t)g << 7) ^ ((uint64_t)i << 40);
    x ^= x >> 31; /* splitmix-style finalizer */
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 29;
    return x | 1;
}

/* tool_choice "required" or a named function: the output is held to the format's call
 * syntax, with each function's arguments valid for its schema. */
static ak_status forced_grammar(ak__gen *g, ak__oai_error *err) {
    if (g->req.grammar_text)
        return BAD(err, "tool_choice", "a forced tool call ('tool_choice' \"required\" or a "
                   "function) cannot be combined with response_format, grammar or json_schema.");
    char *gbnf = NULL;
    ak_status st = ak__tools_gbnf(g->srv->tool_format, &g->req.tools, ak__json_schema_rules,
                                  &gbnf, err);
    if (st != AK_OK) return st;
    st = ak__oai_grammar_acquire(g->srv->tok, gbnf, &g->tools->grammar, err);
    free(gbnf);
    if (st == AK_ERR_INVALID_ARG) err->param = "tools"; /* the functions' schemas made it */
    return st;
}

ak_status ak__gen_tools_setup(ak__gen *g, ak__oai_error *err) {
    const ak__oai_tools *t = &g->req.tools;
    const ak__server *srv = g->srv;
    if (g->req.kind != AK__OAI_CHAT) return AK_OK;
    int offered = t->tools && t->choice != AK__TOOL_CHOICE_NONE;
    if (!srv->chat_template) return refuse_without_template(g, offered, err);
    if (!offered) return AK_OK;
    if (srv->tool_format == AK__TOOLS_NONE)
        return BAD(err, "tools", "this model's chat template has no tool-call format accelkit "
                   "knows (hermes <tool_call>, llama3 JSON, mistral [TOOL_CALLS]), so 'tools' "
                   "are refused.");
    struct ak__gen_tools *gt = calloc(1, sizeof *gt);
    if (!gt) return AK_FAIL(AK_ERR_NO_MEMORY, "server: tool parsers");
    g->tools = gt;
    gt->n = g->req.n;
    for (int32_t i = 0; i < gt->n; i++)
        ak__tool_parser_init(&gt->parsers[i], srv->tool_format, t->tools, t->parallel,
                             seed_of(g, i));
    if (t->choice == AK__TOOL_CHOICE_REQUIRED || t->choice == AK__TOOL_CHOICE_NAMED)
        return forced_grammar(g, err);
    return AK_OK;
}

ak_status ak__gen_tools_whole(ak__gen *g, ak__oai_choice *choices) {
    struct ak__gen_tools *gt = g->tools;
    for (int32_t i = 0; i < gt->n; i++) {
        ak__tool_parser *p = &gt->parsers[i];
        ak__bytes *c = &gt->content[i];
        c->len = 0;
        AK_CHECK(ak__bytes_append(c, "", 0));
        AK_CHECK(ak__tool_parser_push(p, choices[i].text, choices[i].text_len, 1, c));
        choices[i].text = c->v;
        choices[i].text_len = c->len;
        choices[i].calls = p->calls;
        choices[i].n_calls = p->n_calls;
        choices[i].finish = ak__gen_tools_finish(g, i, choices[i].finish);
    }
    return AK_OK;
}

static ak_status calls_chunk(ak__gen *g, int32_t i, const ak__tool_call *call, int32_t index,
                             int part) {
    ak__oai_choice c = {i, NULL, 0, NULL, 0, NULL, 0, call, 1, index, part};
    return ak__oai_chunk_sse(&g->meta, &c, 1, NULL, &g->out);
}

ak_status ak__gen_tools_stream(ak__gen *g, int32_t i, int ending) {
    struct ak__gen_tools *gt = g->tools;
    ak__gen_sample *s = &g->samples[i];
    ak__tool_parser *p = &gt->parsers[i];
    ak__bytes *c = &gt->content[i];
    size_t before = p->n_calls;
    c->len = 0;
    AK_CHECK(ak__tool_parser_push(p, s->text.v, s->text.len, ending, c));
    s->text.len = 0;
    if (p->n_calls > before) { /* the role and the content decided so far go out first */
        if (!s->started) {
            ak__oai_choice role = {i, "", 0, NULL, 0, NULL, 1, NULL, 0, 0, 0};
            AK_CHECK(ak__oai_chunk_sse(&g->meta, &role, 1, NULL, &g->out));
            s->started = 1;
        }
        if (c->len) {
            ak__oai_choice text = {i, c->v, c->len, NULL, 0, NULL, 0, NULL, 0, 0, 0};
            AK_CHECK(ak__oai_chunk_sse(&g->meta, &text, 1, NULL, &g->out));
            c->len = 0;
        }
        for (size_t k = before; k < p->n_calls; k++) {
            AK_CHECK(calls_chunk(g, i, &p->calls[k], (int32_t)k, 1));
            AK_CHECK(calls_chunk(g, i, &p->calls[k], (int32_t)k, 2));
        }
    }
    return c->len ? ak__bytes_append(&s->text, c->v, c->len) : AK_OK;
}

const char *ak__gen_tools_finish(const ak__gen *g, int32_t i, const char *name) {
    if (!g->tools || !g->tools->parsers[i].n_calls) return name;
    return g->samples[i].finish == AK_FINISH_STOP ? "tool_calls" : name;
}

const ak_llm_grammar *ak__gen_tools_grammar(const ak__gen *g) {
    return g->tools ? g->tools->grammar : NULL;
}

void ak__gen_tools_free(ak__gen *g) {
    struct ak__gen_tools *gt = g->tools;
    if (!gt) return;
    for (int32_t i = 0; i < gt->n; i++) {
        ak__tool_parser_free(&gt->parsers[i]);
        ak__bytes_free(&gt->content[i]);
    }
    if (gt->grammar) ak__oai_grammar_release(gt->grammar);
    free(gt);
    g->tools = NULL;
}
