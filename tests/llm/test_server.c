/* Server tests. Pieces first: the incremental detokenizer (UTF-8 split across byte tokens,
 * stop-string hold-back and trim), request validation (a table of bad bodies, each a 400
 * on the right field), response/chunk JSON shapes and the Prometheus page. Then `ak serve`'s
 * server over HTTP with the real engine on a small random model (scripts/llm-make-model):
 * GET endpoints, 404/405/413/429, whole and streamed completions that agree, stop strings,
 * chat, n > 1, logprobs, hooks, a client that disconnects mid-stream cancels its request,
 * concurrent clients, garbage input; and a scripted backend for engine errors. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "accelkit/llm.h"
#include "llm/server/detok.h"
#include "llm/server/http_client.h"
#include "llm/server/metrics.h"
#include "llm/server/oai.h"
#include "byte_token.h"
#include "llm/server/server.h"

/* ---- fixture: model, engine, three servers -------------------------------------------- */

static char g_model_path[512];
static ak_llm_model *g_model;
static const ak_tokenizer *g_tok;
static ak_llm_engine *g_engine;
static ak__server *g_srv;       /* defaults */
static ak__server *g_small;     /* max_concurrent 1, max_body 1024 */
static ak__server *g_hooked;    /* post_process upper-cases */
static int g_port, g_small_port, g_hooked_port;

static ak_status upper_hook(void *user, const char *text, size_t len, char *out, size_t cap,
                            size_t *out_len) {
    (void)user;
    *out_len = len;
    if (len > cap) return AK_ERR_INVALID_ARG;
    for (size_t i = 0; i < len; i++)
        out[i] = (text[i] >= 'a' && text[i] <= 'z') ? (char)(text[i] - 32) : text[i];
    return AK_OK;
}

static ak__server *start(const ak__server_options *o, int *port) {
    ak__server_model m = {"tiny", g_tok, 256, NULL};
    ak__server_backend be = ak__server_engine_backend(g_engine);
    ak__server *s = NULL;
    if (ak__server_start(&be, &m, o, &s) != AK_OK) return NULL;
    *port = ak__server_port(s);
    return s;
}

static int setup(void **state) {
    (void)state;
    char cmd[2048];
    snprintf(g_model_path, sizeof g_model_path, "/tmp/ak_test_server_%d.gguf", (int)getpid());
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 %s/scripts/llm-make-model --dim 64 --layers 2 --heads 4 "
             "--kv-heads 2 --ffn 172 --ctx 256 --seed 7 --out %s >/dev/null",
             AK_SOURCE_DIR, g_model_path);
    if (system(cmd) != 0) { /* the script printed why */
        print_message("scripts/llm-make-model failed: %s\n", cmd);
        return -1;
    }
    if (ak_llm_model_load(g_model_path, &g_model) != AK_OK) return -1;
    ak_llm_model_tokenizer(g_model, &g_tok);
    ak_llm_engine_options eo;
    ak_llm_engine_options_default(&eo);
    eo.n_threads = 1;
    eo.max_seqs = 16;
    if (ak_llm_engine_create(g_model, &eo, &g_engine) != AK_OK ||
        ak_llm_engine_start(g_engine) != AK_OK)
        return -1;
    ak__server_options o = AK__SERVER_OPTIONS_INIT;
    o.port = 0;
    g_srv = start(&o, &g_port);
    o.max_concurrent = 1;
    o.max_body = 1024;
    g_small = start(&o, &g_small_port);
    static ak_llm_hooks hooks = {NULL, NULL, upper_hook, NULL};
    ak__server_options oh = AK__SERVER_OPTIONS_INIT;
    oh.port = 0;
    oh.hooks = &hooks;
    g_hooked = start(&oh, &g_hooked_port);
    return g_srv && g_small && g_hooked ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    assert_int_equal(ak__server_stop(g_srv), AK_OK);
    assert_int_equal(ak__server_stop(g_small), AK_OK);
    assert_int_equal(ak__server_stop(g_hooked), AK_OK);
    ak_llm_engine_stop(g_engine);
    ak_llm_engine_free(g_engine);
    ak_llm_model_free(g_model);
    remove(g_model_path);
    return 0;
}

/* ---- the detokenizer ----------------------------------------------------------------- */

static int32_t byte_token(unsigned b) { return byte_token_of(g_tok, b); }

static void test_detok_utf8(void **state) {
    (void)state;
    ak__detok d;
    ak__bytes out = {NULL, 0, 0};
    assert_int_equal(ak__detok_init(&d, g_tok, NULL, 0), AK_OK);
    /* "€" = E2 82 AC arrives one byte token at a time: nothing until it is whole */
    assert_int_equal(ak__detok_push(&d, byte_token(0xE2)), AK_OK);
    assert_int_equal(ak__detok_take(&d, 0, 0, &out), AK_OK);
    assert_int_equal(out.len, 0);
    assert_int_equal(ak__detok_push(&d, byte_token(0x82)), AK_OK);
    assert_int_equal(ak__detok_take(&d, 0, 0, &out), AK_OK);
    assert_int_equal(out.len, 0);
    assert_int_equal(ak__detok_push(&d, byte_token(0xAC)), AK_OK);
    assert_int_equal(ak__detok_take(&d, 0, 0, &out), AK_OK);
    assert_string_equal(out.v, "\xE2\x82\xAC");
    /* a byte that can never start a character is replaced at once */
    assert_int_equal(ak__detok_push(&d, byte_token(0xFF)), AK_OK);
    assert_int_equal(ak__detok_push(&d, byte_token('a')), AK_OK);
    out.len = 0;
    assert_int_equal(ak__detok_take(&d, 0, 0, &out), AK_OK);
    assert_string_equal(out.v, "\xEF\xBF\xBD" "a");
    /* a sequence cut short by the end becomes U+FFFD when flushed */
    assert_int_equal(ak__detok_push(&d, byte_token(0xF0)), AK_OK);
    assert_int_equal(ak__detok_push(&d, byte_token(0x9F)), AK_OK);
    out.len = 0;
    assert_int_equal(ak__detok_take(&d, 0, 0, &out), AK_OK);
    assert_int_equal(out.len, 0);
    assert_int_equal(ak__detok_take(&d, 1, 0, &out), AK_OK);
    assert_string_equal(out.v, "\xEF\xBF\xBD");
    ak__detok_free(&d);
    ak__bytes_free(&out);
}

/* Feeds "Hello world" token by token with the stop string "lo w": nothing of the stop
 * string is ever handed out, and the final trim leaves "Hel". */
static void test_detok_stop_holdback(void **state) {
    (void)state;
    const char *text = "Hello world";
    const char *stops[] = {"lo w"};
    int32_t ids[32];
    size_t n = 0;
    assert_int_equal(ak_tokenizer_encode(g_tok, text, strlen(text), 0, ids, 32, &n), AK_OK);
    ak__detok d;
    ak__bytes out = {NULL, 0, 0};
    assert_int_equal(ak__detok_init(&d, g_tok, stops, 1), AK_OK);
    for (size_t i = 0; i < n; i++) { /* what went out never reaches into the stop string */
        assert_int_equal(ak__detok_push(&d, ids[i]), AK_OK);
        assert_int_equal(ak__detok_take(&d, 0, 0, &out), AK_OK);
        assert_true(out.len <= 4);
        assert_memory_equal(out.v, " Hel", out.len);
    }
    size_t at = (size_t)(strstr(d.text, "lo w") - d.text);
    assert_int_equal(ak__detok_take(&d, 1, d.len - at, &out), AK_OK);
    assert_string_equal(out.v, " Hel"); /* SPM decodes the leading word boundary as a space */
    ak__detok_free(&d);
    ak__bytes_free(&out);
}

static void test_utf8_sanitize(void **state) {
    (void)state;
    static const struct {
        const char *in, *want;
    } cases[] = {
        {"plain", "plain"},
        {"\xC3\xA9t\xC3\xA9", "\xC3\xA9t\xC3\xA9"},
        {"\xC0\xAF", "\xEF\xBF\xBD\xEF\xBF\xBD"},                 /* overlong: two bad bytes */
        {"\xED\xA0\x80", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"}, /* a surrogate */
        {"\xE2\x82x", "\xEF\xBF\xBDx"},                           /* a cut sequence is one U+FFFD */
        {"\xF4\x90\x80\x80", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"}, /* > U+10FFFF */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ak__bytes out = {NULL, 0, 0};
        assert_int_equal(ak__utf8_sanitize(cases[i].in, strlen(cases[i].in), &out), AK_OK);
        assert_string_equal(out.v, cases[i].want);
        ak__bytes_free(&out);
    }
    assert_int_equal(ak__utf8_complete_prefix("ab\xE2\x82", 4), 2);
    assert_int_equal(ak__utf8_complete_prefix("ab\xFF", 3), 3);
}

/* ---- request validation -------------------------------------------------------------- */

static void test_parse_completion(void **state) {
    (void)state;
    const char *body =
        "{\"model\":\"x\",\"prompt\":[\"Hi\"],\"max_tokens\":5,\"temperature\":0.5,"
        "\"top_p\":0.9,\"top_k\":-1,\"min_p\":0.1,\"n\":3,\"stream\":true,\"stop\":\"\\n\","
        "\"seed\":42,\"presence_penalty\":1,\"frequency_penalty\":-1,"
        "\"repetition_penalty\":1.1,\"logprobs\":2,\"ignore_eos\":true,\"suffix\":null,"
        "\"stream_options\":{\"include_usage\":true},\"stop_token_ids\":[7,8]}";
    ak__oai_request r;
    ak__oai_error e;
    assert_int_equal(ak__oai_parse(AK__OAI_COMPLETION, body, strlen(body), 100, &r, &e), AK_OK);
    assert_string_equal(r.prompt, "Hi");
    assert_int_equal(r.max_tokens, 5);
    assert_true(r.sampling.temperature == 0.5f && r.sampling.top_p == 0.9f &&
                r.sampling.min_p == 0.1f);
    assert_int_equal(r.sampling.top_k, 0);
    assert_int_equal(r.n, 3);
    assert_true(r.stream && r.include_usage && r.ignore_eos && r.seed_set);
    assert_int_equal(r.sampling.seed, 42);
    assert_int_equal(r.n_stops, 1);
    assert_string_equal(r.stops[0], "\n");
    assert_int_equal(r.logprobs, 2);
    assert_int_equal(r.sampling.n_logprobs, 2);
    assert_int_equal(r.n_stop_ids, 2);
    ak__oai_request_free(&r);

    const char *ids = "{\"prompt\":[1,2,99]}";
    assert_int_equal(ak__oai_parse(AK__OAI_COMPLETION, ids, strlen(ids), 100, &r, &e), AK_OK);
    assert_int_equal(r.n_prompt_ids, 3);
    assert_int_equal(r.prompt_ids[2], 99);
    assert_int_equal(r.logprobs, -1);
    ak__oai_request_free(&r);
}

static void test_parse_chat(void **state) {
    (void)state;
    const char *body =
        "{\"messages\":[{\"role\":\"developer\",\"content\":\"Be brief.\"},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},"
        "{\"type\":\"text\",\"text\":\"b\"}]},{\"role\":\"assistant\",\"content\":null}],"
        "\"max_tokens\":9,\"max_completion_tokens\":7,\"logprobs\":true,\"top_logprobs\":3}";
    ak__oai_request r;
    ak__oai_error e;
    assert_int_equal(ak__oai_parse(AK__OAI_CHAT, body, strlen(body), 100, &r, &e), AK_OK);
    assert_int_equal(r.n_messages, 3);
    assert_string_equal(r.messages[0].role, "system");
    assert_string_equal(r.messages[1].content, "a\nb");
    assert_string_equal(r.messages[2].content, "");
    assert_int_equal(r.max_tokens, 7);
    assert_int_equal(r.logprobs, 1);
    assert_int_equal(r.sampling.n_logprobs, 3);
    ak__oai_request_free(&r);
}

static void test_parse_errors(void **state) {
    (void)state;
    static const struct {
        int chat;
        const char *body, *param;
    } cases[] = {
        {0, "{\"prompt\":\"x\"", NULL},
        {0, "[1,2]", NULL},
        {0, "", NULL},
        {0, "{}", "prompt"},
        {0, "{\"prompt\":\"\"}", "prompt"},
        {0, "{\"prompt\":[]}", "prompt"},
        {0, "{\"prompt\":5}", "prompt"},
        {0, "{\"prompt\":[\"a\",\"b\"]}", "prompt"},
        {0, "{\"prompt\":[1,100]}", "prompt"},
        {0, "{\"prompt\":[1,-1]}", "prompt"},
        {0, "{\"prompt\":[1.5]}", "prompt"},
        {0, "{\"prompt\":\"x\",\"n\":0}", "n"},
        {0, "{\"prompt\":\"x\",\"n\":17}", "n"},
        {0, "{\"prompt\":\"x\",\"max_tokens\":0}", "max_tokens"},
        {0, "{\"prompt\":\"x\",\"max_tokens\":1.5}", "max_tokens"},
        {0, "{\"prompt\":\"x\",\"max_tokens\":\"5\"}", "max_tokens"},
        {0, "{\"prompt\":\"x\",\"max_tokens\":1e30}", "max_tokens"},
        {0, "{\"prompt\":\"x\",\"temperature\":-0.1}", "temperature"},
        {0, "{\"prompt\":\"x\",\"temperature\":2.5}", "temperature"},
        {0, "{\"prompt\":\"x\",\"temperature\":\"hot\"}", "temperature"},
        {0, "{\"prompt\":\"x\",\"top_p\":0}", "top_p"},
        {0, "{\"prompt\":\"x\",\"top_p\":1.5}", "top_p"},
        {0, "{\"prompt\":\"x\",\"top_k\":-2}", "top_k"},
        {0, "{\"prompt\":\"x\",\"min_p\":2}", "min_p"},
        {0, "{\"prompt\":\"x\",\"presence_penalty\":3}", "presence_penalty"},
        {0, "{\"prompt\":\"x\",\"repetition_penalty\":0}", "repetition_penalty"},
        {0, "{\"prompt\":\"x\",\"stop\":5}", "stop"},
        {0, "{\"prompt\":\"x\",\"stop\":[\"\"]}", "stop"},
        {0, "{\"prompt\":\"x\",\"stop\":[\"a\",1]}", "stop"},
        {0,
         "{\"prompt\":\"x\",\"stop\":[\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\",\"a\","
         "\"a\","
         "\"a\",\"a\",\"a\",\"a\",\"a\",\"a\"]}",
         "stop"},
        {0, "{\"prompt\":\"x\",\"stream\":\"yes\"}", "stream"},
        {0, "{\"prompt\":\"x\",\"seed\":\"1\"}", "seed"},
        {0, "{\"prompt\":\"x\",\"logprobs\":21}", "logprobs"},
        {0, "{\"prompt\":\"x\",\"logprobs\":true}", "logprobs"},
        {0, "{\"prompt\":\"x\",\"echo\":true,\"logprobs\":0}", "echo"},
        {0, "{\"prompt\":\"x\",\"best_of\":2}", "best_of"},
        {0, "{\"prompt\":\"x\",\"logit_bias\":{\"100\":1}}", "logit_bias"},
        {0, "{\"prompt\":\"x\",\"logit_bias\":{\"-1\":1}}", "logit_bias"},
        {0, "{\"prompt\":\"x\",\"logit_bias\":{\"5x\":1}}", "logit_bias"},
        {0, "{\"prompt\":\"x\",\"logit_bias\":{\"5\":100.5}}", "logit_bias"},
        {0, "{\"prompt\":\"x\",\"logit_bias\":{\"5\":\"1\"}}", "logit_bias"},
        {0, "{\"prompt\":\"x\",\"logit_bias\":[5]}", "logit_bias"},
        {0, "{\"prompt\":\"x\",\"user\":5}", "user"},
        {0, "{\"prompt\":\"x\",\"store\":true}", "store"},
        {0, "{\"prompt\":\"x\",\"service_tier\":\"flex\"}", "service_tier"},
        {1, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"audio\":{\"voice\":\"a\"}}",
         "audio"},
        {1, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"modalities\":[\"audio\"]}",
         "modalities"},
        {1, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"prediction\":{\"type\":\"content\"}}",
         "prediction"},
        {1, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"reasoning_effort\":\"low\"}",
         "reasoning_effort"},
        {1, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"web_search_options\":{\"a\":1}}",
         "web_search_options"},
        {0, "{\"prompt\":\"x\",\"stop_token_ids\":[100]}", "stop_token_ids"},
        {0, "{\"prompt\":\"x\",\"stream_options\":3}", "stream_options"},
        {1, "{}", "messages"},
        {1, "{\"messages\":[]}", "messages"},
        {1, "{\"messages\":{}}", "messages"},
        {1, "{\"messages\":[5]}", "messages"},
        {1, "{\"messages\":[{\"role\":\"tool\",\"content\":\"x\"}]}", "messages"},
        {1, "{\"messages\":[{\"role\":7,\"content\":\"x\"}]}", "messages"},
        {1, "{\"messages\":[{\"role\":\"user\"}]}", "messages"},
        {1, "{\"messages\":[{\"role\":\"user\",\"content\":5}]}", "messages"},
        {1, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\"}]}]}",
         "messages"},
        {1, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"top_logprobs\":2}",
         "top_logprobs"},
        {1, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logprobs\":1}", "logprobs"},
        {1, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_completion_tokens\":0}",
         "max_completion_tokens"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ak__oai_request r;
        ak__oai_error e;
        memset(&e, 0, sizeof e);
        ak__oai_kind kind = cases[i].chat ? AK__OAI_CHAT : AK__OAI_COMPLETION;
        ak_status st = ak__oai_parse(kind, cases[i].body, strlen(cases[i].body), 100, &r, &e);
        ak__oai_request_free(&r);
        if (st != AK_ERR_INVALID_ARG || e.http != 400)
            fail_msg("case %zu (%s) was accepted", i, cases[i].body);
        if (cases[i].param ? !e.param || strcmp(e.param, cases[i].param) : e.param != NULL)
            fail_msg("case %zu (%s): param %s, want %s", i, cases[i].body,
                     e.param ? e.param : "null", cases[i].param ? cases[i].param : "null");
        assert_true(strlen(e.message) > 0);
    }
}

/* ---- response JSON ------------------------------------------------------------------- */

static cJSON *parse_json(const char *s) {
    cJSON *j = cJSON_Parse(s);
    if (!j) fail_msg("not JSON: %s", s);
    return j;
}

static const cJSON *get(const cJSON *o, const char *path) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *k = strtok(buf, "."); k && o; k = strtok(NULL, "."))
        o = (k[0] >= '0' && k[0] <= '9') ? cJSON_GetArrayItem(o, atoi(k))
                                         : cJSON_GetObjectItemCaseSensitive(o, k);
    if (!o) fail_msg("no %s", path);
    return o;
}

static void test_json_shapes(void **state) {
    (void)state;
    ak__oai_logprob lp = {
        byte_token('h'), -0.5f, 2, {{byte_token('h'), -0.5f}, {byte_token('j'), -1.5f}}, 0};
    ak__oai_choice c = {0, "h\xFF", 2, &lp, 1, "stop", 0, NULL, 0, 0, 0};
    ak__oai_usage u = {3, 1, 0};
    ak__oai_meta m = {AK__OAI_COMPLETION, "cmpl-1", 1700000000, "tiny", 1, g_tok};
    ak__bytes out = {NULL, 0, 0};
    assert_int_equal(ak__oai_response_json(&m, &c, 1, &u, &out), AK_OK);
    cJSON *j = parse_json(out.v);
    assert_string_equal(get(j, "object")->valuestring, "text_completion");
    assert_string_equal(get(j, "choices.0.text")->valuestring, "h\xEF\xBF\xBD"); /* made valid */
    assert_string_equal(get(j, "choices.0.finish_reason")->valuestring, "stop");
    assert_string_equal(get(j, "choices.0.logprobs.tokens.0")->valuestring, "h");
    assert_true(get(j, "choices.0.logprobs.token_logprobs.0")->valuedouble == -0.5);
    assert_true(get(j, "choices.0.logprobs.top_logprobs.0.j")->valuedouble == -1.5);
    assert_int_equal(get(j, "choices.0.logprobs.text_offset.0")->valueint, 0);
    assert_int_equal(get(j, "usage.total_tokens")->valueint, 4);
    cJSON_Delete(j);

    m.kind = AK__OAI_CHAT;
    out.len = 0;
    assert_int_equal(ak__oai_response_json(&m, &c, 1, &u, &out), AK_OK);
    j = parse_json(out.v);
    assert_string_equal(get(j, "object")->valuestring, "chat.completion");
    assert_string_equal(get(j, "choices.0.message.role")->valuestring, "assistant");
    assert_string_equal(get(j, "choices.0.logprobs.content.0.token")->valuestring, "h");
    assert_int_equal(get(j, "choices.0.logprobs.content.0.bytes.0")->valueint, 'h');
    assert_string_equal(get(j, "choices.0.logprobs.content.0.top_logprobs.1.token")->valuestring,
                        "j");
    cJSON_Delete(j);

    /* a chunk is one server-sent event */
    out.len = 0;
    c.first = 1;
    c.finish = NULL;
    assert_int_equal(ak__oai_chunk_sse(&m, &c, 1, NULL, &out), AK_OK);
    assert_int_equal(strncmp(out.v, "data: {", 7), 0);
    assert_string_equal(out.v + out.len - 3, "}\n\n");
    j = parse_json(out.v + 6);
    assert_string_equal(get(j, "object")->valuestring, "chat.completion.chunk");
    assert_string_equal(get(j, "choices.0.delta.role")->valuestring, "assistant");
    assert_true(cJSON_IsNull(get(j, "choices.0.finish_reason")));
    cJSON_Delete(j);
    /* the usage chunk has no choices */
    out.len = 0;
    assert_int_equal(ak__oai_chunk_sse(&m, NULL, 0, &u, &out), AK_OK);
    j = parse_json(out.v + 6);
    assert_int_equal(cJSON_GetArraySize(get(j, "choices")), 0);
    assert_int_equal(get(j, "usage.completion_tokens")->valueint, 1);
    cJSON_Delete(j);
    ak__bytes_free(&out);

    ak__oai_error e;
    ak__oai_error_set(&e, 400, "n", NULL, "bad %s", "n");
    out = (ak__bytes){NULL, 0, 0};
    assert_int_equal(ak__oai_error_json(&e, &out), AK_OK);
    assert_string_equal(out.v,
                        "{\"error\":{\"message\":\"bad n\",\"type\":\"invalid_request_error\","
                        "\"param\":\"n\",\"code\":null}}");
    ak__bytes_free(&out);
}

static void test_metrics_page(void **state) {
    (void)state;
    ak__metrics m;
    assert_int_equal(ak__metrics_init(&m), AK_OK);
    ak__metrics_request(&m, AK__EP_COMPLETIONS, 200);
    ak__metrics_request(&m, AK__EP_COMPLETIONS, 200);
    ak__metrics_request(&m, AK__EP_CHAT, 429);
    ak__metrics_tokens(&m, 10, 4, 7);
    ak__metrics_ttft(&m, 0.003);
    ak__metrics_ttft(&m, 0.3);
    ak__metrics_itl(&m, 100.0);
    ak_llm_engine_stats s;
    memset(&s, 0, sizeof s);
    s.running = 3;
    s.kv_blocks_total = 100;
    s.kv_blocks_used = 25;
    ak__bytes out = {NULL, 0, 0};
    assert_int_equal(ak__metrics_render(&m, &s, &out), AK_OK);
    const char *want[] = {
        "ak_llm_http_requests_total{endpoint=\"/v1/completions\",code=\"200\"} 2\n",
        "ak_llm_http_requests_total{endpoint=\"/v1/chat/completions\",code=\"429\"} 1\n",
        "ak_llm_prompt_tokens_total 10\n",
        "ak_llm_generation_tokens_total 7\n",
        "ak_llm_time_to_first_token_seconds_bucket{le=\"0.005\"} 1\n",
        "ak_llm_time_to_first_token_seconds_bucket{le=\"0.25\"} 1\n",
        "ak_llm_time_to_first_token_seconds_bucket{le=\"0.5\"} 2\n",
        "ak_llm_time_to_first_token_seconds_count 2\n",
        "ak_llm_inter_token_latency_seconds_bucket{le=\"1\"} 0\n",
        "ak_llm_inter_token_latency_seconds_bucket{le=\"+Inf\"} 1\n",
        "ak_llm_requests_running 3\n",
        "ak_llm_kv_cache_usage_ratio 0.25\n",
        "# TYPE ak_llm_time_to_first_token_seconds histogram\n",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if (!strstr(out.v, want[i])) fail_msg("missing: %s\n%s", want[i], out.v);
    ak__bytes_free(&out);
    ak__metrics_destroy(&m);
}

/* ---- HTTP helpers -------------------------------------------------------------------- */

typedef struct reply {
    int status;
    ak__bytes body;
    cJSON *json;
} reply;

static reply call(int port, const char *method, const char *path, const char *body) {
    reply r = {0, {NULL, 0, 0}, NULL};
    ak_status st = ak__http_request("127.0.0.1", port, method, path, body, body ? strlen(body) : 0,
                                    &r.status, &r.body);
    if (st != AK_OK) fail_msg("%s %s: %s", method, path, ak_last_error());
    r.json = cJSON_Parse(r.body.v ? r.body.v : "");
    return r;
}

static void reply_free(reply *r) {
    cJSON_Delete(r->json);
    ak__bytes_free(&r->body);
}

static void expect_error(int port, const char *method, const char *path, const char *body,
                         int status, const char *param) {
    reply r = call(port, method, path, body);
    if (r.status != status)
        fail_msg("%s %s %s: status %d, want %d: %s", method, path, body ? body : "", r.status,
                 status, r.body.v);
    assert_non_null(r.json);
    assert_string_equal(get(r.json, "error.type")->valuestring,
                        status >= 500 ? "server_error" : "invalid_request_error");
    assert_true(strlen(get(r.json, "error.message")->valuestring) > 0);
    const cJSON *p = get(r.json, "error.param");
    if (param ? !cJSON_IsString(p) || strcmp(p->valuestring, param) : !cJSON_IsNull(p))
        fail_msg("%s %s: param %s, want %s", path, body ? body : "",
                 cJSON_IsString(p) ? p->valuestring : "null", param ? param : "null");
    reply_free(&r);
}

/* A stream's text (deltas joined), finish reason, event count and usage. */
typedef struct streamed {
    int status;
    ak__bytes text;
    char finish[16];
    int events, done, completion_tokens;
} streamed;

static streamed stream(int port, const char *path, const char *body) {
    streamed s;
    memset(&s, 0, sizeof s);
    ak__http_conn c;
    assert_int_equal(ak__http_connect(&c, "127.0.0.1", port, 10000), AK_OK);
    assert_int_equal(ak__http_begin(&c, "POST", path, body, strlen(body)), AK_OK);
    s.status = c.status;
    ak__bytes ev = {NULL, 0, 0};
    ak__bytes_append(&s.text, "", 0);
    for (int end = 0;;) {
        assert_int_equal(ak__http_next_event(&c, &ev, &end), AK_OK);
        if (end) break;
        if (!strcmp(ev.v, "[DONE]")) {
            s.done = 1;
            continue;
        }
        assert_false(s.done); /* nothing after [DONE] */
        cJSON *j = parse_json(ev.v);
        const cJSON *choices = cJSON_GetObjectItemCaseSensitive(j, "choices");
        const cJSON *ch = cJSON_GetArrayItem(choices, 0);
        if (ch && cJSON_GetObjectItemCaseSensitive(ch, "index")->valueint == 0) { /* sample 0 */
            const cJSON *t = cJSON_GetObjectItemCaseSensitive(ch, "text");
            const cJSON *d = cJSON_GetObjectItemCaseSensitive(ch, "delta");
            if (d) t = cJSON_GetObjectItemCaseSensitive(d, "content");
            if (cJSON_IsString(t))
                ak__bytes_append(&s.text, t->valuestring, strlen(t->valuestring));
            const cJSON *f = cJSON_GetObjectItemCaseSensitive(ch, "finish_reason");
            if (cJSON_IsString(f)) snprintf(s.finish, sizeof s.finish, "%s", f->valuestring);
        }
        const cJSON *u = cJSON_GetObjectItemCaseSensitive(j, "usage");
        if (u)
            s.completion_tokens =
                cJSON_GetObjectItemCaseSensitive(u, "completion_tokens")->valueint;
        s.events++;
        cJSON_Delete(j);
    }
    ak__bytes_free(&ev);
    ak__http_close(&c);
    return s;
}

/* The greedy completion of "Hello world" (whole), the reference for other tests. */
static char *greedy_text(int port, int max_tokens, const char *extra) {
    char body[512];
    snprintf(body, sizeof body, "{\"prompt\":\"Hello world\",\"max_tokens\":%d,\"temperature\":0,"
             "\"ignore_eos\":true%s}", max_tokens, extra ? extra : "");
    reply r = call(port, "POST", "/v1/completions", body);
    if (r.status != 200) fail_msg("status %d: %s", r.status, r.body.v);
    char *text = strdup(get(r.json, "choices.0.text")->valuestring);
    reply_free(&r);
    return text;
}

/* ---- HTTP: the server with the engine ------------------------------------------------ */

static void test_get_endpoints(void **state) {
    (void)state;
    reply r = call(g_port, "GET", "/health", NULL);
    assert_int_equal(r.status, 200);
    assert_string_equal(get(r.json, "status")->valuestring, "ready");
    reply_free(&r);
    r = call(g_port, "GET", "/v1/models", NULL);
    assert_int_equal(r.status, 200);
    assert_string_equal(get(r.json, "data.0.id")->valuestring, "tiny");
    assert_int_equal(get(r.json, "data.0.max_model_len")->valueint, 256);
    reply_free(&r);
    expect_error(g_port, "GET", "/v1/nothing", NULL, 404, NULL);
    expect_error(g_port, "GET", "/v1/completions", NULL, 405, NULL);
    expect_error(g_port, "POST", "/health", "{}", 405, NULL);
    expect_error(g_port, "DELETE", "/v1/models", NULL, 405, NULL);
}

static void test_bad_requests(void **state) {
    (void)state;
    expect_error(g_port, "POST", "/v1/completions", "{\"prompt\":", 400, NULL);
    expect_error(g_port, "POST", "/v1/completions", "{\"prompt\":\"x\",\"n\":99}", 400, "n");
    expect_error(g_port, "POST", "/v1/chat/completions",
                 "{\"messages\":[{\"role\":\"robot\",\"content\":\"x\"}]}", 400, "messages");
    /* prompt + max_tokens over the context of 256 */
    expect_error(g_port, "POST", "/v1/completions", "{\"prompt\":\"Hello\",\"max_tokens\":300}",
                 400, "prompt");
    ak__bytes long_prompt = {NULL, 0, 0};
    ak__bytes_append(&long_prompt, "{\"prompt\":[", 11);
    for (int i = 0; i < 300; i++) ak__bytes_appendf(&long_prompt, "%s%d", i ? "," : "", 100 + i);
    ak__bytes_append(&long_prompt, "]}", 2);
    expect_error(g_port, "POST", "/v1/completions", long_prompt.v, 400, "prompt");
    ak__bytes_free(&long_prompt);
    /* the chat template refuses nothing in chatml, but an empty content is fine */
    reply r = call(g_port, "POST", "/v1/chat/completions",
                   "{\"messages\":[{\"role\":\"user\",\"content\":\"\"}],\"max_tokens\":2}");
    assert_int_equal(r.status, 200);
    reply_free(&r);
}

static void test_body_limit(void **state) {
    (void)state;
    char body[2048];
    memset(body, ' ', sizeof body - 1);
    body[sizeof body - 1] = '\0';
    memcpy(body, "{\"prompt\":\"x\"}", 14);
    expect_error(g_small_port, "POST", "/v1/completions", body, 413, NULL);
    reply r = call(g_small_port, "GET", "/health", NULL); /* still serving */
    assert_int_equal(r.status, 200);
    reply_free(&r);
}

static void test_whole_and_stream_agree(void **state) {
    (void)state;
    char *text = greedy_text(g_port, 24, NULL);
    reply r = call(
        g_port, "POST", "/v1/completions",
        "{\"prompt\":\"Hello world\",\"max_tokens\":24,\"temperature\":0,\"ignore_eos\":true}");
    assert_int_equal(get(r.json, "usage.completion_tokens")->valueint, 24);
    assert_int_equal(get(r.json, "usage.total_tokens")->valueint,
                     24 + get(r.json, "usage.prompt_tokens")->valueint);
    assert_string_equal(get(r.json, "choices.0.finish_reason")->valuestring, "length");
    assert_true(strncmp(get(r.json, "id")->valuestring, "cmpl-", 5) == 0);
    reply_free(&r);
    streamed s = stream(
        g_port, "/v1/completions",
        "{\"prompt\":\"Hello world\",\"max_tokens\":24,\"temperature\":0,\"ignore_eos\":true,"
        "\"stream\":true,\"stream_options\":{\"include_usage\":true}}");
    assert_int_equal(s.status, 200);
    assert_true(s.done);
    assert_string_equal(s.text.v, text);
    assert_string_equal(s.finish, "length");
    assert_int_equal(s.completion_tokens, 24);
    assert_true(s.events >= 2);
    ak__bytes_free(&s.text);
    free(text);
}

/* A stop string taken from the middle of the greedy text: both forms end right before it. */
static void test_stop_string(void **state) {
    (void)state;
    char *text = greedy_text(g_port, 24, NULL);
    size_t len = strlen(text);
    assert_true(len > 12);
    size_t at = len / 2;
    while (at < len && (text[at] & 0xC0) == 0x80) at++; /* start on a character */
    size_t end = at + 3;
    while (end < len && (text[end] & 0xC0) == 0x80) end++;
    char stop[32];
    snprintf(stop, sizeof stop, "%.*s", (int)(end - at), text + at);
    char *first = strstr(text, stop);
    size_t want = (size_t)(first - text);
    cJSON *arr = cJSON_CreateArray();
    cJSON_AddItemToArray(arr, cJSON_CreateString(stop));
    char *stop_json = cJSON_PrintUnformatted(arr);
    char extra[128];
    snprintf(extra, sizeof extra, ",\"stop\":%s", stop_json);
    char *stopped = greedy_text(g_port, 24, extra);
    assert_int_equal(strlen(stopped), want);
    assert_memory_equal(stopped, text, want);
    char body[512];
    snprintf(body, sizeof body, "{\"prompt\":\"Hello world\",\"max_tokens\":24,\"temperature\":0,"
             "\"ignore_eos\":true,\"stream\":true%s}", extra);
    streamed s = stream(g_port, "/v1/completions", body);
    assert_string_equal(s.text.v, stopped);
    assert_string_equal(s.finish, "stop");
    ak__bytes_free(&s.text);
    free(stopped);
    cJSON_free(stop_json);
    cJSON_Delete(arr);
    free(text);
}

static void test_chat(void **state) {
    (void)state;
    const char *msgs = "\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},"
                       "{\"role\":\"user\",\"content\":\"Hi there\"}]";
    char body[512];
    snprintf(body, sizeof body,
             "{%s,\"max_tokens\":6,\"temperature\":0,\"logprobs\":true,\"top_logprobs\":3}", msgs);
    reply r = call(g_port, "POST", "/v1/chat/completions", body);
    assert_int_equal(r.status, 200);
    assert_string_equal(get(r.json, "object")->valuestring, "chat.completion");
    assert_string_equal(get(r.json, "choices.0.message.role")->valuestring, "assistant");
    int n = get(r.json, "usage.completion_tokens")->valueint;
    assert_true(n >= 1 && n <= 6);
    assert_int_equal(cJSON_GetArraySize(get(r.json, "choices.0.logprobs.content")), n);
    assert_int_equal(cJSON_GetArraySize(get(r.json, "choices.0.logprobs.content.0.top_logprobs")),
                     3);
    char *whole = strdup(get(r.json, "choices.0.message.content")->valuestring);
    reply_free(&r);
    snprintf(body, sizeof body, "{%s,\"max_tokens\":6,\"temperature\":0,\"stream\":true}", msgs);
    streamed s = stream(g_port, "/v1/chat/completions", body);
    assert_true(s.done);
    assert_string_equal(s.text.v, whole);
    ak__bytes_free(&s.text);
    free(whole);
    /* n samples with a seed: reproducible, one choice each */
    snprintf(body, sizeof body, "{%s,\"max_tokens\":5,\"n\":3,\"seed\":5,\"temperature\":1}", msgs);
    reply a = call(g_port, "POST", "/v1/chat/completions", body);
    reply b = call(g_port, "POST", "/v1/chat/completions", body);
    assert_int_equal(cJSON_GetArraySize(get(a.json, "choices")), 3);
    for (int i = 0; i < 3; i++) {
        char path[64];
        snprintf(path, sizeof path, "choices.%d.message.content", i);
        assert_string_equal(get(a.json, path)->valuestring, get(b.json, path)->valuestring);
    }
    reply_free(&a);
    reply_free(&b);
}

static void test_completion_logprobs(void **state) {
    (void)state;
    reply r = call(g_port, "POST", "/v1/completions",
                   "{\"prompt\":[1,15043,3186],\"max_tokens\":5,\"temperature\":0,\"ignore_eos\":"
                   "true,\"logprobs\":2}");
    assert_int_equal(r.status, 200);
    assert_int_equal(get(r.json, "usage.prompt_tokens")->valueint, 3);
    const cJSON *lp = get(r.json, "choices.0.logprobs");
    assert_int_equal(cJSON_GetArraySize(get(lp, "tokens")), 5);
    assert_int_equal(cJSON_GetArraySize(get(lp, "token_logprobs")), 5);
    assert_int_equal(cJSON_GetArraySize(get(lp, "text_offset")), 5);
    const cJSON *top = get(lp, "top_logprobs.0");
    assert_true(cJSON_GetArraySize(top) >= 1 && cJSON_GetArraySize(top) <= 2);
    /* greedy: the chosen token is the most likely one */
    assert_true(get(lp, "token_logprobs.0")->valuedouble >= top->child->valuedouble - 1e-5);
    reply_free(&r);
}

static void test_hooks(void **state) {
    (void)state;
    char *plain = greedy_text(g_port, 16, NULL);
    char *upper = greedy_text(g_hooked_port, 16, NULL);
    for (char *p = plain; *p; p++)
        if (*p >= 'a' && *p <= 'z') *p = (char)(*p - 32);
    assert_string_equal(upper, plain);
    free(plain);
    free(upper);
}

static long metric(int port, const char *line_start) {
    reply r = call(port, "GET", "/metrics", NULL);
    assert_int_equal(r.status, 200);
    char key[256];
    snprintf(key, sizeof key, "\n%s", line_start); /* a sample line, not the HELP text */
    const char *p = strstr(r.body.v, key);
    long v = p ? atol(p + strlen(key)) : -1;
    reply_free(&r);
    return v;
}

static void sleep_ms(int ms) {
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

/* Opens a long stream and reads its first event; the caller closes it. */
static void open_stream(int port, ak__http_conn *c) {
    const char *body =
        "{\"prompt\":\"Hello\",\"max_tokens\":240,\"ignore_eos\":true,\"stream\":true}";
    assert_int_equal(ak__http_connect(c, "127.0.0.1", port, 10000), AK_OK);
    assert_int_equal(ak__http_begin(c, "POST", "/v1/completions", body, strlen(body)), AK_OK);
    assert_int_equal(c->status, 200);
    ak__bytes ev = {NULL, 0, 0};
    int end = 0;
    assert_int_equal(ak__http_next_event(c, &ev, &end), AK_OK);
    assert_false(end);
    ak__bytes_free(&ev);
}

static void test_disconnect_cancels(void **state) {
    (void)state;
    const char *key = "ak_llm_request_finished_total{reason=\"cancelled\"} ";
    long before = metric(g_port, key);
    ak__http_conn c;
    open_stream(g_port, &c);
    ak__http_close(&c); /* gone mid-stream */
    long after = before;
    for (int i = 0; i < 200 && after == before; i++, sleep_ms(25)) after = metric(g_port, key);
    assert_int_equal(after, before + 1);
    ak_llm_engine_stats s;
    for (int i = 0; i < 200; i++, sleep_ms(10)) {
        ak_llm_engine_get_stats(g_engine, &s);
        if (s.running == 0 && s.waiting == 0) break;
    }
    assert_int_equal(s.running, 0);
}

/* A client that leaves while waiting for a whole answer cancels its request too. */
static void test_disconnect_whole(void **state) {
    (void)state;
    const char *key = "ak_llm_request_finished_total{reason=\"cancelled\"} ";
    long before = metric(g_port, key);
    /* 16 samples of 240 tokens: far more than the engine can make before the client
     * leaves, even for this tiny model */
    const char *body = "{\"prompt\":\"Hello\",\"max_tokens\":240,\"n\":16,\"ignore_eos\":true}";
    char req[512];
    int n = snprintf(req, sizeof req,
                     "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %zu\r\n\r\n%s",
                     strlen(body), body);
    ak__http_conn c;
    assert_int_equal(ak__http_connect(&c, "127.0.0.1", g_port, 2000), AK_OK);
    assert_int_equal(send(c.fd, req, (size_t)n, MSG_NOSIGNAL), n);
    sleep_ms(20);
    ak__http_close(&c);
    long after = before;
    for (int i = 0; i < 200 && after < before + 16; i++, sleep_ms(25)) after = metric(g_port, key);
    assert_int_equal(after, before + 16); /* every sample */
    assert_int_equal(
        metric(g_port, "ak_llm_http_requests_total{endpoint=\"/v1/completions\",code=\"499\"} "),
        1);
    long in_flight = 1;
    for (int i = 0; i < 200 && in_flight != 0; i++, sleep_ms(10))
        in_flight = metric(g_port, "ak_llm_http_requests_in_flight ");
    assert_int_equal(in_flight, 0);
}

static void test_too_many(void **state) {
    (void)state;
    ak__http_conn c;
    open_stream(g_small_port, &c); /* takes the only slot */
    expect_error(g_small_port, "POST", "/v1/completions", "{\"prompt\":\"x\",\"max_tokens\":1}",
                 429, NULL);
    ak__http_close(&c);
    int status = 429;
    for (int i = 0; i < 100 && status == 429; i++) { /* the slot comes back once it is noticed */
        reply r =
            call(g_small_port, "POST", "/v1/completions", "{\"prompt\":\"x\",\"max_tokens\":1}");
        status = r.status;
        reply_free(&r);
        if (status == 429) sleep_ms(20);
    }
    assert_int_equal(status, 200);
}

typedef struct worker {
    const char *expect;
    int ok;
} worker;

static void *client(void *arg) {
    worker *w = arg;
    ak__bytes out = {NULL, 0, 0};
    int status = 0;
    const char *body =
        "{\"prompt\":\"Hello world\",\"max_tokens\":24,\"temperature\":0,\"ignore_eos\":true}";
    if (ak__http_request("127.0.0.1", g_port, "POST", "/v1/completions", body, strlen(body),
                         &status, &out) == AK_OK) {
        cJSON *j = cJSON_Parse(out.v);
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(
            cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "choices"), 0), "text");
        w->ok = status == 200 && cJSON_IsString(t) && !strcmp(t->valuestring, w->expect);
        cJSON_Delete(j);
    }
    ak__bytes_free(&out);
    return NULL;
}

/* Eight clients at once (batched in the engine) get what one alone gets. */
static void test_concurrent(void **state) {
    (void)state;
    char *text = greedy_text(g_port, 24, NULL);
    pthread_t t[8];
    worker w[8];
    for (int i = 0; i < 8; i++) {
        w[i] = (worker){text, 0};
        assert_int_equal(pthread_create(&t[i], NULL, client, &w[i]), 0);
    }
    for (int i = 0; i < 8; i++) {
        pthread_join(t[i], NULL);
        assert_true(w[i].ok);
    }
    free(text);
    assert_true(
        metric(g_port, "ak_llm_http_requests_total{endpoint=\"/v1/completions\",code=\"200\"} ") >=
        9);
    assert_true(metric(g_port, "ak_llm_generation_tokens_total ") >= 9 * 24);
    assert_true(metric(g_port, "ak_llm_kv_blocks_total ") > 0);
}

/* Raw bytes on the socket: nonsense, a huge header, a lying Content-Length cut short. */
static void raw_send(int port, const char *data, size_t len) {
    ak__http_conn c;
    assert_int_equal(ak__http_connect(&c, "127.0.0.1", port, 2000), AK_OK);
    send(c.fd, data, len, MSG_NOSIGNAL);
    shutdown(c.fd, SHUT_WR);
    char buf[4096];
    while (recv(c.fd, buf, sizeof buf, 0) > 0) {
    }
    ak__http_close(&c);
}

static void test_garbage(void **state) {
    (void)state;
    raw_send(g_port, "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 11); /* a TLS hello */
    raw_send(g_port, "GET / HTTP/9.9\r\n\r\n", 18);
    const char *cut =
        "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"prompt\":";
    raw_send(g_port, cut, strlen(cut));
    char *huge = malloc(200000);
    memset(huge, 'a', 200000);
    memcpy(huge, "GET /health HTTP/1.1\r\nX-Big: ", 29);
    raw_send(g_port, huge, 200000);
    free(huge);
    /* deep nesting and odd JSON */
    ak__bytes deep = {NULL, 0, 0};
    ak__bytes_append(&deep, "{\"prompt\":", 10);
    for (int i = 0; i < 5000; i++) ak__bytes_append(&deep, "[", 1);
    expect_error(g_port, "POST", "/v1/completions", deep.v, 400, NULL);
    ak__bytes_free(&deep);
    expect_error(g_port, "POST", "/v1/completions", "{\"prompt\":\"\\ud800\"}", 400,
                 NULL); /* lone surrogate */
    expect_error(g_port, "POST", "/v1/completions", "{\"prompt\":\"x\",\"max_tokens\":-5}", 400,
                 "max_tokens");
    expect_error(g_port, "POST", "/v1/completions", "null", 400, NULL);
    reply r = call(g_port, "GET", "/health", NULL);
    assert_int_equal(r.status, 200);
    reply_free(&r);
}

/* ---- a scripted backend: engine errors and byte tokens ------------------------------- */

typedef struct script {
    int32_t tokens[8];
    int n;
    ak_finish_reason finish;
} script;

static ak_status script_submit(void *ctx, const ak_llm_request *r, uint64_t *id) {
    const script *s = ctx;
    for (int32_t k = 0; k < r->n; k++) {
        for (int i = 0; i < s->n; i++) {
            ak_llm_event ev = {1, k,     s->tokens[i],          -0.1f, NULL, 0, AK_FINISH_NONE,
                               0, AK_OK, (uint32_t)r->n_prompt, 0};
            r->on_event(r->user, &ev);
        }
        ak_llm_event end = {1,
                            k,
                            -1,
                            0,
                            NULL,
                            0,
                            s->finish,
                            0,
                            s->finish == AK_FINISH_ERROR ? AK_ERR_INTERNAL : AK_OK,
                            (uint32_t)r->n_prompt,
                            0};
        r->on_event(r->user, &end);
    }
    *id = 1;
    return AK_OK;
}

static ak_status script_cancel(void *ctx, uint64_t id) {
    (void)ctx, (void)id;
    return AK_OK;
}

static void test_scripted_backend(void **state) {
    (void)state;
    script sc = {
        {byte_token('o'), byte_token(0xE2), byte_token(0x82), byte_token(0xAC), byte_token('k')},
        5,
        AK_FINISH_STOP};
    ak__server_backend be = {script_submit, script_cancel, NULL, &sc};
    ak__server_model m = {"scripted", g_tok, 64, "{{ '<start_of_turn>' }}"};
    ak__server_options o = AK__SERVER_OPTIONS_INIT;
    o.port = 0;
    ak__server *s = NULL;
    assert_int_equal(ak__server_start(&be, &m, &o, &s), AK_OK);
    assert_string_equal(ak__server_chat_format(s), "jinja"); /* the model's own template */
    int port = ak__server_port(s);
    streamed st = stream(port, "/v1/completions", "{\"prompt\":\"x\",\"stream\":true,\"n\":2}");
    assert_string_equal(st.text.v, "o\xE2\x82\xAC" "k"); /* sample 0 only: joined by stream() */
    ak__bytes_free(&st.text);
    reply r = call(port, "POST", "/v1/completions", "{\"prompt\":\"x\"}");
    assert_string_equal(get(r.json, "choices.0.text")->valuestring, "o\xE2\x82\xAC" "k");
    assert_string_equal(get(r.json, "choices.0.finish_reason")->valuestring, "stop");
    reply_free(&r);
    /* the engine fails: 500 for a whole answer, an error event in a stream */
    sc.finish = AK_FINISH_ERROR;
    expect_error(port, "POST", "/v1/completions", "{\"prompt\":\"x\"}", 500, NULL);
    ak__http_conn c;
    assert_int_equal(ak__http_connect(&c, "127.0.0.1", port, 5000), AK_OK);
    assert_int_equal(
        ak__http_begin(&c, "POST", "/v1/completions", "{\"prompt\":\"x\",\"stream\":true}", 29),
        AK_OK);
    ak__bytes all = {NULL, 0, 0};
    assert_int_equal(ak__http_read_all(&c, &all), AK_OK);
    assert_non_null(strstr(all.v, "data: {\"error\":"));
    assert_non_null(strstr(all.v, "data: [DONE]\n\n"));
    ak__bytes_free(&all);
    ak__http_close(&c);
    assert_int_equal(ak__server_stop(s), AK_OK);
    /* a bad chat format name, a port in use */
    o.chat_format = "vicuna";
    assert_int_equal(ak__server_start(&be, &m, &o, &s), AK_ERR_INVALID_ARG);
    o.chat_format = NULL;
    o.port = g_port;
    assert_int_equal(ak__server_start(&be, &m, &o, &s), AK_ERR_IO);
}

/* ---- logit bias, echo ---------------------------------------------------------------- */

/* Every token id whose bytes are `piece`. */
static int32_t ids_of_piece(const char *piece, int32_t *ids, int32_t cap) {
    ak_tokenizer_info info;
    ak_tokenizer_get_info(g_tok, &info);
    ak__bytes b = {NULL, 0, 0};
    int32_t n = 0;
    for (int32_t id = 0; id < info.n_vocab && n < cap; id++)
        if (ak__token_bytes(g_tok, id, &b) == AK_OK && b.len == strlen(piece) &&
            !memcmp(b.v, piece, b.len))
            ids[n++] = id;
    ak__bytes_free(&b);
    return n;
}

static void test_logit_bias(void **state) {
    (void)state;
    char body[512];
    /* +100 forces " Hello" even at temperature 1 */
    int32_t hello[4];
    assert_true(ids_of_piece(" Hello", hello, 4) >= 1);
    snprintf(body, sizeof body,
             "{\"prompt\":[1,3186],\"max_tokens\":3,\"temperature\":1,\"seed\":3,"
             "\"ignore_eos\":true,\"logit_bias\":{\"%d\":100}}", hello[0]);
    reply r = call(g_port, "POST", "/v1/completions", body);
    assert_int_equal(r.status, 200);
    const char *text = get(r.json, "choices.0.text")->valuestring;
    if (strcmp(text, " Hello Hello Hello") && strcmp(text, "Hello Hello Hello"))
        fail_msg("+100 on ' Hello' gave '%s'", text);
    reply_free(&r);
    /* -100 on the greedy first token: another one comes */
    const char *greedy = "{\"prompt\":[1,15043,3186],\"max_tokens\":1,\"temperature\":0,"
                         "\"ignore_eos\":true,\"logprobs\":1%s}";
    snprintf(body, sizeof body, greedy, "");
    r = call(g_port, "POST", "/v1/completions", body);
    char first[64];
    snprintf(first, sizeof first, "%s", get(r.json, "choices.0.logprobs.tokens.0")->valuestring);
    reply_free(&r);
    int32_t ids[8];
    int32_t n = ids_of_piece(first, ids, 8);
    assert_true(n >= 1);
    char bias[256] = ",\"logit_bias\":{";
    for (int32_t i = 0; i < n; i++)
        snprintf(bias + strlen(bias), sizeof bias - strlen(bias), "%s\"%d\":-100", i ? "," : "",
                 ids[i]);
    strcat(bias, "}");
    snprintf(body, sizeof body, greedy, bias);
    r = call(g_port, "POST", "/v1/completions", body);
    assert_int_equal(r.status, 200);
    assert_string_not_equal(get(r.json, "choices.0.logprobs.tokens.0")->valuestring, first);
    reply_free(&r);
    /* ids outside the vocabulary */
    expect_error(g_port, "POST", "/v1/completions",
                 "{\"prompt\":\"x\",\"logit_bias\":{\"32000\":1}}", 400, "logit_bias");
}

static void test_echo(void **state) {
    (void)state;
    const char *plain = "{\"prompt\":\"Hello world\",\"max_tokens\":4,\"temperature\":0,"
                        "\"ignore_eos\":true%s}";
    char body[256];
    snprintf(body, sizeof body, plain, "");
    reply a = call(g_port, "POST", "/v1/completions", body);
    snprintf(body, sizeof body, plain, ",\"echo\":true");
    reply b = call(g_port, "POST", "/v1/completions", body);
    char want[256];
    snprintf(want, sizeof want, "Hello world%s", get(a.json, "choices.0.text")->valuestring);
    assert_string_equal(get(b.json, "choices.0.text")->valuestring, want);
    assert_int_equal(get(b.json, "usage.completion_tokens")->valueint, 4);
    reply_free(&a);
    reply_free(&b);
    snprintf(body, sizeof body, plain, ",\"echo\":true,\"stream\":true");
    streamed st = stream(g_port, "/v1/completions", body);
    assert_string_equal(st.text.v, want);
    ak__bytes_free(&st.text);
    /* a token prompt is echoed decoded */
    int32_t ids[16];
    size_t n = 0;
    assert_int_equal(ak_tokenizer_encode(g_tok, "Hello world", 11, 0, ids, 16, &n), AK_OK);
    snprintf(body, sizeof body, "{\"prompt\":[");
    for (size_t i = 0; i < n; i++)
        snprintf(body + strlen(body), sizeof body - strlen(body), "%s%d", i ? "," : "", ids[i]);
    strcat(body, "],\"max_tokens\":1,\"echo\":true}");
    reply c = call(g_port, "POST", "/v1/completions", body);
    assert_int_equal(c.status, 200);
    const char *echoed = get(c.json, "choices.0.text")->valuestring;
    if (strncmp(echoed, "Hello world", 11) && strncmp(echoed, " Hello world", 12))
        fail_msg("echo of a token prompt: '%s'", echoed);
    reply_free(&c);
    expect_error(g_port, "POST", "/v1/completions",
                 "{\"prompt\":\"x\",\"echo\":true,\"logprobs\":1}", 400, "echo");
}

/* ---- drain: a backend that makes a token every 10 ms until cancelled ------------------ */

typedef struct slow_req {
    ak_llm_request r;
    int32_t n;
    int cancelled; /* atomic */
    pthread_t th;
} slow_req;

static slow_req g_slow[4];
static int g_n_slow;

static void *slow_run(void *arg) {
    slow_req *q = arg;
    int32_t i = 0;
    for (; i < q->n && !__atomic_load_n(&q->cancelled, __ATOMIC_ACQUIRE); i++) {
        struct timespec t = {0, 10 * 1000000L};
        nanosleep(&t, NULL);
        ak_llm_event ev = {.request_id = 1, .token = byte_token('a'), .n_prompt = 1};
        q->r.on_event(q->r.user, &ev);
    }
    ak_llm_event end = {.request_id = 1, .token = -1, .n_prompt = 1,
                        .finish = i < q->n ? AK_FINISH_CANCELLED : AK_FINISH_LENGTH};
    q->r.on_event(q->r.user, &end);
    return NULL;
}

static ak_status slow_submit(void *ctx, const ak_llm_request *r, uint64_t *id) {
    (void)ctx;
    if (g_n_slow == 4) return AK_ERR_UNSUPPORTED;
    slow_req *q = &g_slow[g_n_slow++];
    q->r = *r;
    q->n = r->max_tokens;
    q->cancelled = 0;
    *id = (uint64_t)g_n_slow;
    return pthread_create(&q->th, NULL, slow_run, q) == 0 ? AK_OK : AK_ERR_INTERNAL;
}

static ak_status slow_cancel(void *ctx, uint64_t id) {
    (void)ctx;
    if (id >= 1 && id <= 4) __atomic_store_n(&g_slow[id - 1].cancelled, 1, __ATOMIC_RELEASE);
    return AK_OK;
}

typedef struct drain_arg {
    ak__server *s;
    double seconds;
    int cancelled;
} drain_arg;

static void *drain_thread(void *arg) {
    drain_arg *d = arg;
    d->cancelled = ak__server_drain(d->s, d->seconds);
    return NULL;
}

/* A stream running at SIGTERM time: with time enough it finishes (and new requests get
 * 503, /health "draining"); without, it ends with an error event and [DONE]. */
/* Listening while the model loads: /health "loading" (503), /metrics served, generation
 * refused with 503 and counted; then attached, everything is served. */
static void test_loading(void **state) {
    (void)state;
    ak__server_options o = AK__SERVER_OPTIONS_INIT;
    o.port = 0;
    ak__server *s = NULL;
    assert_int_equal(ak__server_listen(&o, &s), AK_OK);
    int port = ak__server_port(s);
    reply h = call(port, "GET", "/health", NULL);
    assert_int_equal(h.status, 503);
    assert_string_equal(get(h.json, "status")->valuestring, "loading");
    reply_free(&h);
    expect_error(port, "POST", "/v1/completions", "{\"prompt\":\"x\"}", 503, NULL);
    expect_error(port, "GET", "/v1/models", NULL, 503, NULL);
    reply m = call(port, "GET", "/metrics", NULL);
    assert_int_equal(m.status, 200);
    assert_non_null(strstr(m.body.v, "ak_llm_rejected_total{reason=\"loading\"} 2"));
    reply_free(&m);
    ak__server_model model = {"tiny", g_tok, 256, NULL};
    ak__server_backend be = ak__server_engine_backend(g_engine);
    assert_int_equal(ak__server_attach(s, &be, &model, &o, NULL), AK_OK);
    h = call(port, "GET", "/health", NULL);
    assert_int_equal(h.status, 200);
    assert_string_equal(get(h.json, "status")->valuestring, "ready");
    reply_free(&h);
    reply r = call(port, "POST", "/v1/completions", "{\"prompt\":\"x\",\"max_tokens\":2}");
    assert_int_equal(r.status, 200);
    reply_free(&r);
    assert_int_equal(ak__server_attach(s, &be, &model, &o, NULL), AK_ERR_INVALID_ARG); /* once */
    assert_int_equal(ak__server_stop(s), AK_OK);
}

static void test_drain(void **state) {
    (void)state;
    ak__server_backend be = {slow_submit, slow_cancel, NULL, NULL};
    ak__server_model m = {"slow", g_tok, 2048, NULL};
    for (int round = 0; round < 2; round++) {
        g_n_slow = 0;
        ak__server_options o = AK__SERVER_OPTIONS_INIT;
        o.port = 0;
        ak__server *s = NULL;
        assert_int_equal(ak__server_start(&be, &m, &o, &s), AK_OK);
        int port = ak__server_port(s);
        /* round 0: 30 tokens (0.3 s) within 5 s of draining; round 1: 1000 tokens, 0.3 s */
        const char *body = round == 0
            ? "{\"prompt\":\"x\",\"stream\":true,\"max_tokens\":30}"
            : "{\"prompt\":\"x\",\"stream\":true,\"max_tokens\":1000}";
        ak__http_conn c;
        assert_int_equal(ak__http_connect(&c, "127.0.0.1", port, 10000), AK_OK);
        assert_int_equal(ak__http_begin(&c, "POST", "/v1/completions", body, strlen(body)), AK_OK);
        assert_int_equal(c.status, 200);
        ak__bytes ev = {NULL, 0, 0};
        int end = 0;
        assert_int_equal(ak__http_next_event(&c, &ev, &end), AK_OK); /* it runs */
        drain_arg d = {s, round == 0 ? 5.0 : 0.3, -1};
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, drain_thread, &d), 0);
        struct timespec t = {0, 50 * 1000000L};
        nanosleep(&t, NULL);
        expect_error(port, "POST", "/v1/completions", "{\"prompt\":\"x\"}", 503, NULL);
        reply h = call(port, "GET", "/health", NULL);
        assert_int_equal(h.status, 503);
        assert_string_equal(get(h.json, "status")->valuestring, "draining");
        reply_free(&h);
        ak__bytes all = {NULL, 0, 0};
        assert_int_equal(ak__http_read_all(&c, &all), AK_OK);
        ak__bytes_append(&all, "", 1);
        assert_non_null(strstr(all.v, "data: [DONE]\n\n"));
        if (round == 0) {
            assert_non_null(strstr(all.v, "\"finish_reason\":\"length\""));
            assert_null(strstr(all.v, "\"error\""));
        } else {
            assert_non_null(strstr(all.v, "server_shutting_down"));
            assert_true(strstr(all.v, "server_shutting_down") < strstr(all.v, "[DONE]"));
        }
        ak__bytes_free(&all);
        ak__bytes_free(&ev);
        ak__http_close(&c);
        pthread_join(th, NULL);
        assert_int_equal(d.cancelled, round == 0 ? 0 : 1);
        assert_int_equal(ak__server_stop(s), AK_OK);
        for (int i = 0; i < g_n_slow; i++) pthread_join(g_slow[i].th, NULL);
    }
}

/* ---- mutated bodies: never a crash, always an answer --------------------------------- */

static const char *const k_seed_bodies[] = {
    "{\"prompt\":\"Hello\",\"max_tokens\":3,\"stop\":[\"a\",\"b\"],\"logprobs\":2,\"n\":2}",
    "{\"prompt\":[1,2,3],\"stream\":true,\"temperature\":0.5,\"top_p\":0.9,\"seed\":1}",
    "{\"messages\":[{\"role\":\"system\",\"content\":\"s\"},{\"role\":\"user\",\"content\":"
    "[{\"type\":\"text\",\"text\":\"u\"}]}],\"logprobs\":true,\"top_logprobs\":2,\"stream\":true}",
};

static void mutate(const char *seed, uint64_t *rng, char *out, size_t cap) {
    size_t n = strlen(seed);
    memcpy(out, seed, n + 1);
    int edits = 1 + (int)(*rng % 4);
    for (int k = 0; k < edits; k++) {
        *rng = *rng * 6364136223846793005ull + 1442695040888963407ull;
        size_t at = (size_t)(*rng >> 33) % (n ? n : 1);
        unsigned op = (unsigned)(*rng >> 20) % 3;
        static const char alphabet[] = "{}[]\",:0123456789-.eE truenullfalse\\\x80\xff";
        char c = alphabet[(*rng >> 40) % (sizeof alphabet - 1)];
        if (op == 0) { /* replace */
            out[at] = c;
        } else if (op == 1 && n + 1 < cap) { /* insert */
            memmove(out + at + 1, out + at, n - at + 1);
            out[at] = c;
            n++;
        } else if (n > 0) { /* delete */
            memmove(out + at, out + at + 1, n - at);
            n--;
        }
    }
}

/* The parser on 20 000 mutated bodies (the sanitizer build checks memory). */
static void test_parse_fuzz(void **state) {
    (void)state;
    uint64_t rng = 12345;
    char body[512];
    int accepted = 0;
    for (int i = 0; i < 20000; i++) {
        int which = i % 3;
        mutate(k_seed_bodies[which], &rng, body, sizeof body);
        ak__oai_request r;
        ak__oai_error e;
        ak_status st = ak__oai_parse(which == 2 ? AK__OAI_CHAT : AK__OAI_COMPLETION, body,
                                     strlen(body), 100, &r, &e);
        assert_true(st == AK_OK || (st == AK_ERR_INVALID_ARG && e.http == 400));
        accepted += st == AK_OK;
        ak__oai_request_free(&r);
    }
    assert_true(accepted > 100); /* the mutations are not all fatal: both paths ran */
}

/* 300 mutated requests over HTTP to a scripted backend: each gets an answer, the server
 * stays healthy. */
static void test_http_fuzz(void **state) {
    (void)state;
    script sc = {{byte_token('o'), byte_token('k')}, 2, AK_FINISH_STOP};
    ak__server_backend be = {script_submit, script_cancel, NULL, &sc};
    ak__server_model m = {"scripted", g_tok, 64, NULL};
    ak__server_options o = AK__SERVER_OPTIONS_INIT;
    o.port = 0;
    ak__server *s = NULL;
    assert_int_equal(ak__server_start(&be, &m, &o, &s), AK_OK);
    int port = ak__server_port(s);
    uint64_t rng = 777;
    char body[512];
    for (int i = 0; i < 300; i++) {
        int which = i % 3;
        mutate(k_seed_bodies[which], &rng, body, sizeof body);
        reply r = call(port, "POST", which == 2 ? "/v1/chat/completions" : "/v1/completions", body);
        assert_true(r.status == 200 || r.status == 400);
        if (r.status == 400) assert_non_null(r.json);
        reply_free(&r);
    }
    reply r = call(port, "GET", "/health", NULL);
    assert_int_equal(r.status, 200);
    reply_free(&r);
    assert_int_equal(ak__server_stop(s), AK_OK);
}

static void test_url(void **state) {
    (void)state;
    char host[64];
    int port;
    assert_int_equal(ak__http_parse_url("http://127.0.0.1:8080/v1", host, sizeof host, &port),
                     AK_OK);
    assert_string_equal(host, "127.0.0.1");
    assert_int_equal(port, 8080);
    assert_int_equal(ak__http_parse_url("localhost", host, sizeof host, &port), AK_OK);
    assert_int_equal(port, 80);
    assert_int_equal(ak__http_parse_url("https://x", host, sizeof host, &port), AK_ERR_INVALID_ARG);
    assert_int_equal(ak__http_parse_url("http://x:99999", host, sizeof host, &port),
                     AK_ERR_INVALID_ARG);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_detok_utf8),
        cmocka_unit_test(test_detok_stop_holdback),
        cmocka_unit_test(test_utf8_sanitize),
        cmocka_unit_test(test_parse_completion),
        cmocka_unit_test(test_parse_chat),
        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_json_shapes),
        cmocka_unit_test(test_metrics_page),
        cmocka_unit_test(test_url),
        cmocka_unit_test(test_get_endpoints),
        cmocka_unit_test(test_bad_requests),
        cmocka_unit_test(test_body_limit),
        cmocka_unit_test(test_whole_and_stream_agree),
        cmocka_unit_test(test_stop_string),
        cmocka_unit_test(test_chat),
        cmocka_unit_test(test_completion_logprobs),
        cmocka_unit_test(test_hooks),
        cmocka_unit_test(test_disconnect_cancels),
        cmocka_unit_test(test_disconnect_whole),
        cmocka_unit_test(test_too_many),
        cmocka_unit_test(test_concurrent),
        cmocka_unit_test(test_garbage),
        cmocka_unit_test(test_scripted_backend),
        cmocka_unit_test(test_logit_bias),
        cmocka_unit_test(test_echo),
        cmocka_unit_test(test_loading),
        cmocka_unit_test(test_drain),
        cmocka_unit_test(test_parse_fuzz),
        cmocka_unit_test(test_http_fuzz),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
