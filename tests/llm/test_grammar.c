/* GBNF grammars: the parser (accepted syntax, errors naming the line or rule, limits), the
 * incremental state against the scalar reference (a backtracking whole-string matcher) on
 * random strings, token masks against the per-token definition on the llama2 vocabulary
 * (the mask walks a trie; the definition feeds each token's bytes to the state), the
 * JSON-schema converter's refusals, and the engine generating under a grammar (every
 * output derived by the grammar, n > 1, refusal with speculative decoding). Prints the
 * time of a mask computation. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "accelkit/llm.h"
#include "llm/grammar/grammar.h"
#include "llm/grammar/json_schema.h"

static char g_model_path[512];
static ak_llm_model *g_m;
static const ak_tokenizer *g_tok;

static int setup(void **state) {
    (void)state;
    snprintf(g_model_path, sizeof g_model_path, "/tmp/ak_test_grammar_%d.gguf", (int)getpid());
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/scripts/llm-make-model --dim 64 --layers 2 "
             "--heads 4 --kv-heads 2 --ffn 192 --ctx 512 --seed 3 --type f32 --out %s >/dev/null",
             AK_SOURCE_DIR, g_model_path);
    if (system(cmd) != 0) {
        print_message("scripts/llm-make-model failed: %s\n", cmd);
        return -1;
    }
    if (ak_llm_model_load(g_model_path, &g_m) != AK_OK) return -1;
    return ak_llm_model_tokenizer(g_m, &g_tok) == AK_OK ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    ak_llm_model_free(g_m);
    remove(g_model_path);
    return 0;
}

static ak_llm_grammar *compile(const char *text) {
    ak_llm_grammar *g = NULL;
    ak_status st = ak_llm_grammar_compile(g_tok, text, strlen(text), &g);
    if (st != AK_OK) print_message("compile failed: %s\n%s\n", ak_last_error(), text);
    assert_int_equal(st, AK_OK);
    return g;
}

/* ---- parser ----------------------------------------------------------------------------- */

static void expect_error(const char *text, const char *needle) {
    ak_llm_grammar *g = NULL;
    ak_status st = ak_llm_grammar_compile(g_tok, text, strlen(text), &g);
    if (st != AK_ERR_INVALID_ARG) print_message("accepted, expected an error: %s\n", text);
    assert_int_equal(st, AK_ERR_INVALID_ARG);
    assert_null(g);
    if (!strstr(ak_last_error(), needle)) {
        print_message("error '%s' does not name '%s' for:\n%s\n", ak_last_error(), needle, text);
        fail();
    }
}

static void test_parse_errors(void **state) {
    (void)state;
    expect_error("", "empty");
    expect_error("# only a comment\n", "empty");
    expect_error("root ::= item\n", "undefined rule 'item'");
    expect_error("root ::= \"a\"\nfoo ::= bar\n", "line 2: undefined rule 'bar'");
    expect_error("expr ::= \"a\"\n", "no rule named 'root'");
    expect_error("root ::= root \"a\" | \"b\"\n", "rule 'root' is left-recursive");
    expect_error("root ::= x\nx ::= y? x \"a\"\ny ::= \"b\"\n", "rule 'x' is left-recursive");
    expect_error("root ::= \"abc", "line 1: unterminated string literal");
    expect_error("root ::= \"a\"\n\nx ::= [abc\n", "line 3: unterminated character class");
    expect_error("root ::= (\"a\" | \"b\"\n", "expected ')'");
    expect_error("root ::= \"a\" )\n", "unmatched ')'");
    expect_error("root ::= \"\\q\"\n", "unknown escape");
    expect_error("root ::= \"a\"{3,1}\n", "n < m");
    expect_error("root ::= * \"a\"\n", "repetition operator without a preceding item");
    expect_error("root ::= \"a\"\nroot ::= \"b\"\n", "defined twice");
    expect_error("root = \"a\"\n", "expected '::='");
    expect_error("root ::= [z-a]\n", "end below its start");
    /* deep nesting is an error, not a crash */
    char deep[2000] = "root ::= ";
    for (int i = 0; i < 300; ++i) strcat(deep, "(");
    strcat(deep, "\"a\"");
    for (int i = 0; i < 300; ++i) strcat(deep, ")");
    strcat(deep, "\n");
    expect_error(deep, "nested deeper");
}

/* ---- the state against the reference ----------------------------------------------------- */

/* 1 when the state accepts all of text and can end there. */
static int state_accepts(const ak_llm_grammar *g, const char *text, size_t len) {
    ak__grammar_state s;
    assert_int_equal(ak__grammar_state_init(&s, g), AK_OK);
    int ok = ak__grammar_state_accept_bytes(&s, text, len) == AK_OK && ak__grammar_state_can_end(&s);
    ak__grammar_state_free(&s);
    return ok;
}

static const char *const k_grammars[] = {
    "root ::= \"a\" | \"ab\" | \"b\"+\n",
    "root ::= (\"a\" | \"b\")* \"c\"?\n",
    "root ::= [a-c]{2,4} x\nx ::= \"\" | \"b\" x\n",
    "root ::= \"(\" root \")\" root | \"\"\n",
    "root ::= [^ab]? \"a\"{0,3} ([bc] | \"ca\")+ # comment\n",
    "root ::= num (\",\" num)*\nnum ::= \"-\"? [0-9]+\n",
    "root ::= \"\\x61\" \"\\u00e9\"? [\\u00e0-\\u00ff]* .?\n",
    "root ::= item item?\nitem ::= \"a\" | \"a\" \"b\" | \"c\"{1,2}\n",
    "root ::= (\n  \"a\" |\n  \"bc\"\n)+\n",
};

static const char *const k_alphabet[] = {"a", "b", "c", "(", ")", ",", "-", "0", "7", "\xc3\xa9",
                                         "\xc3\xa0", "x", ""};

static void test_state_matches_reference(void **state) {
    (void)state;
    uint64_t rng = 42;
    int agree = 0, positives = 0;
    for (size_t gi = 0; gi < sizeof k_grammars / sizeof *k_grammars; ++gi) {
        ak_llm_grammar *g = compile(k_grammars[gi]);
        for (int trial = 0; trial < 400; ++trial) {
            char text[64] = "";
            size_t len = 0;
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            int n = (int)((rng >> 33) % 8);
            for (int k = 0; k < n; ++k) {
                rng = rng * 6364136223846793005ull + 1442695040888963407ull;
                const char *piece = k_alphabet[(rng >> 33) % 13];
                /* the grammar's own letters most of the time, so many strings match */
                if (gi == 5 && (rng >> 40) % 3) piece = k_alphabet[5 + (rng >> 45) % 4];
                strcat(text, piece);
                len += strlen(piece);
            }
            int ref = ak__gbnf_match_reference(&g->g, text, len);
            assert_true(ref >= 0);
            int inc = state_accepts(g, text, len);
            if (ref != inc) print_message("grammar %zu, \"%s\": reference %d, state %d\n", gi, text, ref, inc);
            assert_int_equal(ref, inc);
            agree++;
            positives += ref;
        }
        ak_llm_grammar_free(g);
    }
    print_message("%d strings agree, %d of them in the language\n", agree, positives);
    assert_true(positives > 200); /* the comparison is not only about rejections */
}

/* ---- masks -------------------------------------------------------------------------------- */

/* The mask by definition: token t is allowed when its bytes are accepted from this state
 * (EOS when the grammar can end). */
static void check_mask_against_definition(const ak_llm_grammar *g, const ak__grammar_state *s) {
    size_t words = ((size_t)g->n_vocab + 31) / 32;
    uint32_t *mask = calloc(words, sizeof *mask);
    assert_int_equal(ak__grammar_state_mask(s, mask), AK_OK);
    int n_allowed = 0;
    for (int32_t t = 0; t < g->n_vocab; ++t) {
        ak__grammar_state c;
        assert_int_equal(ak__grammar_state_copy(&c, s), AK_OK);
        int ok = ak__grammar_state_accept_token(&c, t) == AK_OK;
        ak__grammar_state_free(&c);
        int bit = (int)(mask[t >> 5] >> (t & 31) & 1);
        if (ok != bit) {
            print_message("token %d ('%s'): definition %d, mask %d\n", t, g->pieces[t] ? g->pieces[t] : "", ok, bit);
            fail();
        }
        n_allowed += bit;
    }
    free(mask);
}

static void advance_text(ak__grammar_state *s, const char *text) {
    assert_int_equal(ak__grammar_state_accept_bytes(s, text, strlen(text)), AK_OK);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void test_masks_match_definition(void **state) {
    (void)state;
    char *json = NULL;
    const char *schema = "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},"
                         "\"n\":{\"type\":\"integer\",\"minimum\":-40,\"maximum\":2024},"
                         "\"é\":{\"enum\":[\"日本\",\"x\"]}},\"required\":[\"name\"]}";
    assert_int_equal(ak_llm_json_schema_to_gbnf(schema, strlen(schema), &json), AK_OK);
    ak_llm_grammar *g = compile(json);
    ak_free(json);
    /* prefixes that stop at structure, inside a string, inside a number, mid-code-point */
    const char *prefixes[] = {"", "{", "{\"name\"", "{\"name\": \"ab", "{\"name\":\"x\", \"n\": 20",
                              "{\"name\":\"x\",\"\xc3\xa9\":\"\xe6\x97", "{\"name\":\"x\"}"};
    for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes; ++i) {
        ak__grammar_state s;
        assert_int_equal(ak__grammar_state_init(&s, g), AK_OK);
        advance_text(&s, prefixes[i]);
        check_mask_against_definition(g, &s);
        ak__grammar_state_free(&s);
    }
    ak_llm_grammar_free(g);
    ak_llm_grammar *g2 = compile("root ::= [^\"]* \"\\\"\" [\\u3040-\\u30ff]{1,3} \"!\"\n");
    const char *p2[] = {"", "abc\"", "abc\"\xe3", "abc\"\xe3\x81\x82"};
    for (size_t i = 0; i < sizeof p2 / sizeof *p2; ++i) {
        ak__grammar_state s;
        assert_int_equal(ak__grammar_state_init(&s, g2), AK_OK);
        advance_text(&s, p2[i]);
        check_mask_against_definition(g2, &s);
        ak__grammar_state_free(&s);
    }
    ak_llm_grammar_free(g2);
}

/* The time of one mask, computed (the cache is bypassed by a fresh grammar each time) and
 * from the cache: printed for docs/server.md. */
static void test_mask_time(void **state) {
    (void)state;
    const char *text = "root ::= \"{\\\"s\\\": \\\"\" [^\"\\\\]* \"\\\"}\"\n";
    const char *prefixes[] = {"", "{\"s\": \"abc"};
    for (int i = 0; i < 2; ++i) {
        double computed = 1e9, cached = 1e9;
        for (int rep = 0; rep < 3; ++rep) {
            ak_llm_grammar *g = compile(text);
            ak__grammar_state s;
            assert_int_equal(ak__grammar_state_init(&s, g), AK_OK);
            advance_text(&s, prefixes[i]);
            float *logits = calloc((size_t)g->n_vocab, sizeof *logits);
            double t0 = now_s();
            assert_int_equal(ak__grammar_state_apply(&s, logits), AK_OK);
            double t1 = now_s();
            assert_int_equal(ak__grammar_state_apply(&s, logits), AK_OK);
            double t2 = now_s();
            computed = t1 - t0 < computed ? t1 - t0 : computed;
            cached = t2 - t1 < cached ? t2 - t1 : cached;
            free(logits);
            ak__grammar_state_free(&s);
            ak_llm_grammar_free(g);
        }
        print_message("mask over %s: computed %.3f ms, cached %.3f ms (32000 tokens)\n",
                      i ? "the inside of a string" : "the start", computed * 1e3, cached * 1e3);
    }
}

/* Strict UTF-8: what the detokenizer would turn into U+FFFD never passes, and the grammar
 * cannot end inside a character (llama.cpp's looser decoder differs exactly here). */
static void test_strict_utf8(void **state) {
    (void)state;
    ak_llm_grammar *g = compile("root ::= [^\"]*\n");
    const char *valid[] = {"\xc3\xa9", "\xe0\xa0\x80", "\xed\x9f\xbf", "\xf0\x90\x80\x80", "\xf4\x8f\xbf\xbf"};
    const char *invalid[] = {"\xc1\xbf",         /* overlong 2-byte */
                             "\xe0\x9f\xbf",     /* overlong 3-byte */
                             "\xed\xa0\x80",     /* a surrogate */
                             "\xf0\x8f\xbf\xbf", /* overlong 4-byte */
                             "\xf4\x90\x80\x80", /* beyond U+10FFFF */
                             "\xf8\x88\x80\x80", "\xff", "\x80"};
    for (size_t i = 0; i < sizeof valid / sizeof *valid; ++i)
        assert_int_equal(state_accepts(g, valid[i], strlen(valid[i])), 1);
    for (size_t i = 0; i < sizeof invalid / sizeof *invalid; ++i)
        assert_int_equal(state_accepts(g, invalid[i], strlen(invalid[i])), 0);
    /* inside a character: bytes accepted, but no end (EOS) until it is complete */
    ak__grammar_state s;
    assert_int_equal(ak__grammar_state_init(&s, g), AK_OK);
    assert_int_equal(ak__grammar_state_can_end(&s), 1);
    assert_int_equal(ak__grammar_state_accept_bytes(&s, "\xe4\xbc", 2), AK_OK);
    assert_int_equal(ak__grammar_state_can_end(&s), 0);
    assert_int_equal(ak__grammar_state_accept_bytes(&s, "\x9a", 1), AK_OK);
    assert_int_equal(ak__grammar_state_can_end(&s), 1);
    ak__grammar_state_free(&s);
    ak_llm_grammar_free(g);
}

/* JSON Schema `pattern`: a search unless anchored; quotes, backslashes and controls the
 * regex allows are written as JSON escapes. */
static void expect_schema(const char *schema, const char *const *good, const char *const *bad) {
    char *gbnf = NULL;
    if (ak_llm_json_schema_to_gbnf(schema, strlen(schema), &gbnf) != AK_OK)
        print_message("refused %s: %s\n", schema, ak_last_error()), fail();
    ak_llm_grammar *g = compile(gbnf);
    ak_free(gbnf);
    for (; *good; ++good)
        if (!state_accepts(g, *good, strlen(*good))) print_message("%s rejects %s\n", schema, *good), fail();
    for (; *bad; ++bad)
        if (state_accepts(g, *bad, strlen(*bad))) print_message("%s accepts %s\n", schema, *bad), fail();
    ak_llm_grammar_free(g);
}

static void expect_pattern(const char *pattern, const char *const *good, const char *const *bad) {
    char schema[512];
    snprintf(schema, sizeof schema, "{\"type\":\"string\",\"pattern\":%s}", pattern);
    expect_schema(schema, good, bad);
}

/* Decimal ranges: bounds read as the decimals written (0.7 is 7/10), exclusive forms,
 * negative sides, up to 6 fraction digits. */
static void test_number_ranges(void **state) {
    (void)state;
    expect_schema("{\"type\":\"number\",\"minimum\":0.25,\"maximum\":1.5}",
                  (const char *[]){"0.25", "0.250", "1", "1.5", "0.3", "1.499999", "1.0", NULL},
                  (const char *[]){"0.2", "0.249", "1.51", "2", "-0", "0", "1.5000001", NULL});
    expect_schema("{\"type\":\"number\",\"exclusiveMinimum\":-0.7,\"exclusiveMaximum\":0.7}",
                  (const char *[]){"-0.69", "0", "0.699999", "-0.1", "0.0", NULL},
                  (const char *[]){"-0.7", "0.7", "0.70", "-1", "0.71", NULL});
    expect_schema("{\"type\":\"number\",\"minimum\":-12.5,\"maximum\":-3}",
                  (const char *[]){"-12.5", "-3", "-3.0", "-10.25", "-12", NULL},
                  (const char *[]){"-12.6", "-2.9", "3", "-13", "0", NULL});
    expect_schema("{\"type\":\"number\",\"minimum\":100}",
                  (const char *[]){"100", "100.5", "123456.789", NULL}, (const char *[]){"99.99", "-100", NULL});
    expect_schema("{\"type\":\"integer\",\"exclusiveMinimum\":2.5,\"maximum\":4}",
                  (const char *[]){"3", "4", NULL}, (const char *[]){"2", "3.5", "5", NULL});
}

static void test_json_pattern(void **state) {
    (void)state;
    expect_pattern("\"^(?<y>\\\\d{2})-[a-c]+$\"", (const char *[]){"\"12-abca\"", NULL},
                   (const char *[]){"\"12-\"", "\"1-a\"", "\"x12-a\"", "\"12-ad\"", NULL});
    expect_pattern("\"ab\"", (const char *[]){"\"ab\"", "\"xxaby\"", "\"\\\"ab\\n\"", NULL},
                   (const char *[]){"\"a b\"", "\"\"", NULL});
    expect_pattern("\"^a|b$\"", (const char *[]){"\"a\"", "\"axy\"", "\"xyb\"", NULL},
                   (const char *[]){"\"ba\"", "\"xa\"", NULL});
    /* a quote, a backslash and a tab in the set: only as JSON escapes */
    expect_pattern("\"^[\\\"\\\\\\\\\\t]{2}$\"", (const char *[]){"\"\\\"\\\\\"", "\"\\t\\t\"", NULL},
                   (const char *[]){"\"\"\"\"", "\"\t\t\"", NULL});
    /* negated shorthands generate ASCII only; `.` no line breaks */
    expect_pattern("\"^\\\\W.$\"", (const char *[]){"\"-x\"", "\"!\xc3\xa9\"", NULL},
                   (const char *[]){"\"\xc3\xa9x\"", "\"a-\"", "\"-\\n\"", NULL});
}

static void test_limits(void **state) {
    (void)state;
    /* an exponentially ambiguous grammar: bounded by the stack limit, an error not a hang */
    ak_llm_grammar *g = compile("root ::= x*\nx ::= \"a\" | \"a\" | y\ny ::= \"a\" \"\" | \"a\"\n");
    ak__grammar_state s;
    assert_int_equal(ak__grammar_state_init(&s, g), AK_OK);
    assert_int_equal(ak__grammar_state_accept_bytes(&s, "aaaaaaaaaaaaaaaaaaaa", 20), AK_OK);
    ak__grammar_state_free(&s);
    ak_llm_grammar_free(g);
    /* deep nesting: the depth limit */
    g = compile("root ::= \"(\" root \")\" | \"x\"\n");
    assert_int_equal(ak__grammar_state_init(&s, g), AK_OK);
    char *deep = malloc(5000);
    memset(deep, '(', 5000);
    ak_status st = ak__grammar_state_accept_bytes(&s, deep, 5000);
    assert_int_equal(st, AK_ERR_INVALID_ARG);
    assert_non_null(strstr(ak_last_error(), "deeper"));
    free(deep);
    ak__grammar_state_free(&s);
    ak_llm_grammar_free(g);
}

/* ---- JSON schema -------------------------------------------------------------------------- */

static void expect_refused(const char *schema, const char *needle) {
    char *out = NULL;
    ak_status st = ak_llm_json_schema_to_gbnf(schema, strlen(schema), &out);
    assert_true(st == AK_ERR_UNSUPPORTED || st == AK_ERR_INVALID_ARG);
    assert_null(out);
    if (!strstr(ak_last_error(), needle)) {
        print_message("'%s' does not name '%s' for %s\n", ak_last_error(), needle, schema);
        fail();
    }
}

static void test_json_schema(void **state) {
    (void)state;
    expect_refused("{\"type\":\"integer\",\"multipleOf\":3}", "'multipleOf'");
    expect_refused("{\"not\":{}}", "'not'");
    expect_refused("{\"type\":\"string\",\"pattern\":\"(a)\\\\1\"}", "backreference");
    expect_refused("{\"type\":\"string\",\"pattern\":\"a(?=b)\"}", "lookaround");
    expect_refused("{\"type\":\"string\",\"pattern\":\"\\\\bx\"}", "word boundary");
    expect_refused("{\"type\":\"string\",\"pattern\":\"a^b\"}", "anchor");
    expect_refused("{\"type\":\"string\",\"pattern\":\"[]a]\"}", "empty class");
    expect_refused("{\"type\":\"string\",\"pattern\":\"a**\"}", "quantifier on a quantifier");
    expect_refused("{\"type\":\"string\",\"pattern\":\"(ab\"}", "unclosed group");
    expect_refused("{\"type\":\"string\",\"pattern\":\"a\",\"maxLength\":3}", "pattern together");
    expect_refused("{\"type\":\"string\",\"format\":\"email\"}", "'email'");
    expect_refused("{\"$ref\":\"#/properties/a\"}", "$ref");
    expect_refused("{\"type\":\"object\",\"patternProperties\":{}}", "'patternProperties'");
    expect_refused("{\"type\":\"array\",\"uniqueItems\":true}", "'uniqueItems'");
    expect_refused("{\"allOf\":[{\"type\":\"string\"}]}", "allOf");
    expect_refused("{\"type\":\"tuple\"}", "'tuple'");
    expect_refused("[1,", "not valid JSON");
    expect_refused("{\"type\":\"number\",\"minimum\":1.5,\"exclusiveMaximum\":1.5}", "empty number range");
    /* a $ref back to its own schema through anyOf before anything is matched */
    expect_refused("{\"anyOf\":[{\"type\":\"object\"},{\"$ref\":\"#\"}]}", "reaches its own schema");
    expect_refused("{\"$defs\":{\"a\":{\"anyOf\":[{\"type\":\"null\"},{\"$ref\":\"#/$defs/a\"}]}},"
                   "\"$ref\":\"#/$defs/a\"}", "left-recursive");
    /* oneOf: only branches that provably cannot both match (a grammar's "|" is anyOf) */
    expect_refused("{\"oneOf\":[{\"type\":\"integer\"},{\"type\":\"number\"}]}", "oneOf branches 0 and 1");
    expect_refused("{\"oneOf\":[{\"type\":\"string\"},{\"enum\":[1,2]},{\"enum\":[2,3]}]}",
                   "oneOf branches 1 and 2");
    expect_refused("{\"oneOf\":[{\"type\":\"object\",\"properties\":{\"a\":{}}},"
                   "{\"type\":\"object\",\"properties\":{\"b\":{}}}]}", "may match the same value");
    expect_refused("{\"oneOf\":[{\"properties\":{\"a\":{}}},{\"type\":\"string\"}]}", "oneOf branches 0 and 1");
    expect_refused("{\"anyOf\":[{\"type\":\"string\"}],\"oneOf\":[{\"type\":\"null\"}]}", "anyOf next to oneOf");
    const char *disjoint[] = {
        "{\"oneOf\":[{\"type\":\"string\"},{\"type\":\"integer\"},{\"type\":[\"null\",\"boolean\"]}]}",
        "{\"oneOf\":[{\"enum\":[1,\"x\"]},{\"enum\":[2,\"y\"]},{\"const\":null}]}",
        /* a discriminator property, the second branch through $defs */
        "{\"oneOf\":[{\"type\":\"object\",\"properties\":{\"kind\":{\"const\":\"cat\"},\"lives\":{\"type\":\"integer\"}},"
        "\"required\":[\"kind\"]},{\"$ref\":\"#/$defs/dog\"}],\"$defs\":{\"dog\":{\"type\":\"object\","
        "\"properties\":{\"kind\":{\"enum\":[\"dog\",\"puppy\"]}},\"required\":[\"kind\"]}}}",
        /* closed objects each requiring a property the other does not list */
        "{\"oneOf\":[{\"type\":\"object\",\"properties\":{\"a\":{}},\"required\":[\"a\"],\"additionalProperties\":false},"
        "{\"type\":\"object\",\"properties\":{\"b\":{}},\"required\":[\"b\"],\"additionalProperties\":false}]}"};
    for (size_t i = 0; i < sizeof disjoint / sizeof disjoint[0]; ++i) {
        char *gbnf = NULL;
        if (ak_llm_json_schema_to_gbnf(disjoint[i], strlen(disjoint[i]), &gbnf) != AK_OK)
            print_message("refused %s: %s\n", disjoint[i], ak_last_error()), fail();
        ak_free(gbnf);
    }
    /* prefixed rules: no root, every rule named prefix..., usable inside a larger grammar */
    char *rules = NULL;
    const char *s = "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":12}},"
                    "\"required\":[\"a\"],\"additionalProperties\":false}";
    assert_int_equal(ak__json_schema_rules(s, strlen(s), "tool-x", &rules), AK_OK);
    assert_null(strstr(rules, "root"));
    for (const char *line = rules; *line; line = strchr(line, '\n') + 1)
        assert_int_equal(strncmp(line, "tool-x", 6), 0);
    char text[8192];
    snprintf(text, sizeof text, "root ::= \"<call>\" tool-x \"</call>\"\n%s", rules);
    ak_free(rules);
    ak_llm_grammar *g = compile(text);
    const char *good[] = {"<call>{\"a\":1}</call>", "<call>{ \"a\" : 12 }</call>", "<call>{\"a\":7}</call>"};
    const char *bad[] = {"<call>{\"a\":0}</call>", "<call>{\"a\":13}</call>", "<call>{}</call>",
                         "<call>{\"a\":1,\"b\":2}</call>", "<call>{\"a\":01}</call>"};
    for (int i = 0; i < 3; ++i) assert_int_equal(state_accepts(g, good[i], strlen(good[i])), 1);
    for (int i = 0; i < 5; ++i) assert_int_equal(state_accepts(g, bad[i], strlen(bad[i])), 0);
    ak_llm_grammar_free(g);
}

/* ---- the engine --------------------------------------------------------------------------- */

typedef struct collected {
    int32_t ids[4][256];
    int32_t n[4];
    ak_finish_reason finish[4];
} collected;

static void on_event(void *user, const ak_llm_event *ev) {
    collected *c = user;
    if (ev->token >= 0 && c->n[ev->sample] < 256) c->ids[ev->sample][c->n[ev->sample]++] = ev->token;
    if (ev->finish != AK_FINISH_NONE) c->finish[ev->sample] = ev->finish;
}

static void test_engine_generates_in_the_grammar(void **state) {
    (void)state;
    const char *text = "root ::= \"[\" item (\", \" item){0,3} \"]\"\nitem ::= \"-\"? [1-9] [0-9]{0,2} | \"\\\"\" [a-z ]{1,8} \"\\\"\"\n";
    ak_llm_grammar *g = compile(text);
    ak_llm_engine_options o;
    ak_llm_engine_options_default(&o);
    o.n_threads = 1;
    ak_llm_engine *e;
    assert_int_equal(ak_llm_engine_create(g_m, &o, &e), AK_OK);
    for (int seed = 0; seed < 6; ++seed) {
        int32_t prompt[3] = {1, 450 + seed, 3};
        collected c = {0};
        ak_llm_request r;
        ak_llm_request_default(&r);
        r.prompt = prompt, r.n_prompt = 3, r.max_tokens = 200, r.n = 3;
        r.sampling.temperature = 1.0f;
        r.sampling.seed = (uint64_t)seed;
        r.sampling.n_logprobs = 2;
        r.on_event = on_event, r.user = &c, r.grammar = g;
        assert_int_equal(ak_llm_engine_submit(e, &r, NULL), AK_OK);
        int32_t pending = 1;
        while (pending) assert_int_equal(ak_llm_engine_step(e, &pending), AK_OK);
        for (int k = 0; k < 3; ++k) {
            char out[4096];
            size_t len = 0;
            assert_int_equal(ak_tokenizer_decode(g_tok, c.ids[k], (size_t)c.n[k], 0, out, sizeof out, &len), AK_OK);
            out[len] = 0;
            assert_int_equal(c.finish[k], AK_FINISH_STOP);
            if (ak__gbnf_match_reference(&g->g, out, len) != 1) {
                print_message("output not in the grammar: %s\n", out);
                fail();
            }
        }
    }
    /* speculative decoding with a grammar is refused by name */
    ak_llm_engine_free(e);
    o.spec_ngram = 3;
    assert_int_equal(ak_llm_engine_create(g_m, &o, &e), AK_OK);
    int32_t prompt[2] = {1, 2};
    ak_llm_request r;
    ak_llm_request_default(&r);
    r.prompt = prompt, r.n_prompt = 2, r.grammar = g;
    assert_int_equal(ak_llm_engine_submit(e, &r, NULL), AK_ERR_UNSUPPORTED);
    assert_non_null(strstr(ak_last_error(), "speculative"));
    ak_llm_engine_free(e);
    ak_llm_grammar_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_state_matches_reference),
        cmocka_unit_test(test_masks_match_definition),
        cmocka_unit_test(test_mask_time),
        cmocka_unit_test(test_strict_utf8),
        cmocka_unit_test(test_json_pattern),
        cmocka_unit_test(test_number_ranges),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_json_schema),
        cmocka_unit_test(test_engine_generates_in_the_grammar),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
