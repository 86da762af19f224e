/* Tokenizer tests against llama.cpp's vocabulary test files (../shared/llm/vocab, see
 * shared_vocab.h: every line of .inp must encode to the ids of .out, without BOS), round
 * trips, special tokens, and unit tests of the pre-tokenizer table and of tokenizer.json
 * components on tiny hand-made files (splits, NFC, refusals, the name written to GGUF). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include <unistd.h>

#include "accelkit/llm.h"
#include "gguf_writer.h"
#include "llm/hf/hf.h"
#include "llm/tokenizer/tokenizer.h"
#include "shared_vocab.h"

/* ---- files --------------------------------------------------------------------------- */

/* ---- loading a shared vocabulary ------------------------------------------------------ */

typedef struct vocab {
    ak_gguf *g;
    ak_tokenizer *t;
} vocab;

static void vocab_open(const char *name, vocab *v) {
    v->g = open_shared_vocab(name);
    assert_int_equal(ak_tokenizer_from_gguf(v->g, &v->t), AK_OK);
}

static void vocab_close(vocab *v) {
    ak_tokenizer_free(v->t);
    ak_gguf_close(v->g);
}

/* ---- the .inp/.out cases --------------------------------------------------------------- */

static void print_ids(const char *what, const int32_t *ids, size_t n) {
    printf("      %s:", what);
    for (size_t i = 0; i < n; i++) printf(" %d", ids[i]);
    printf("\n");
}

/* Encodes one case; returns whether it matches, and checks the round trip. */
static int run_case(const vocab *v, const char *text, size_t len, const char *want, size_t want_len,
                    int lossless, int *roundtrip_ok) {
    size_t cap = len + 8, n;
    int32_t *ids = malloc(cap * sizeof *ids), *exp = malloc((want_len + 1) * sizeof *exp);
    assert_int_equal(ak_tokenizer_encode(v->t, text, len, 0, ids, cap, &n), AK_OK);
    size_t ne = parse_vocab_ids(want, want_len, exp, want_len + 1);
    int ok = n == ne && (n == 0 || memcmp(ids, exp, n * sizeof *ids) == 0);
    if (!ok) {
        printf("    mismatch for \"%.*s\"\n", (int)len, text);
        print_ids("got ", ids, n);
        print_ids("want", exp, ne);
    }
    char *back = malloc(len * 4 + 16);
    size_t blen;
    assert_int_equal(ak_tokenizer_decode(v->t, ids, n, AK_TOK_STRIP_SPACE, back, len * 4 + 16, &blen), AK_OK);
    *roundtrip_ok = blen == len && memcmp(back, text, len) == 0;
    if (!*roundtrip_ok && (lossless || getenv("AK_TEST_VERBOSE"))) printf("    round trip differs for \"%.*s\": \"%.*s\"\n", (int)len, text, (int)blen, back);
    free(back);
    free(ids);
    free(exp);
    return ok;
}

typedef struct vocab_cases {
    const vocab *v;
    int lossless;
    size_t match, trips;
} vocab_cases;

static void one_case(void *ctx, const char *text, size_t len, const char *want, size_t want_len) {
    vocab_cases *c = ctx;
    int rt;
    c->match += (size_t)run_case(c->v, text, len, want, want_len, c->lossless, &rt);
    c->trips += (size_t)rt;
}

/* n_vocab: the size the vocabulary is known to have.
 * lossless: decode(encode(x)) must give x back (WordPiece lower-cases and drops accents
 * and spacing, so there the round trips are only counted). */
static void run_vocab(const char *name, int32_t n_vocab, int lossless) {
    require_shared();
    vocab v;
    vocab_open(name, &v);
    ak_tokenizer_info info;
    assert_int_equal(ak_tokenizer_get_info(v.t, &info), AK_OK);
    assert_int_equal(info.n_vocab, n_vocab);
    vocab_cases c = {&v, lossless, 0, 0};
    size_t total = for_each_vocab_case(name, one_case, &c), match = c.match, trips = c.trips;
    printf("vocab %-10s %zu/%zu lines match, %zu/%zu round trips\n", name, match, total, trips,
           total);
    assert_true(total >= 40);
    assert_int_equal(match, total);
    if (lossless) assert_int_equal(trips, total);
    vocab_close(&v);
}

static void test_llama_spm(void **state) { (void)state; run_vocab("llama-spm", 32000, 1); }
static void test_phi3(void **state) { (void)state; run_vocab("phi-3", 32064, 1); }
static void test_gpt2(void **state) { (void)state; run_vocab("gpt-2", 50257, 1); }
static void test_falcon(void **state) { (void)state; run_vocab("falcon", 65024, 1); }
static void test_bert_bge(void **state) { (void)state; run_vocab("bert-bge", 30522, 0); }

static int contains(const int32_t *ids, size_t n, int32_t id) {
    for (size_t i = 0; i < n; i++)
        if (ids[i] == id) return 1;
    return 0;
}

/* Special tokens on the real vocabularies: parsed only when asked, BOS when asked. */
static void test_special_tokens(void **state) {
    (void)state;
    require_shared();
    vocab v;
    int32_t ids[64];
    size_t n;
    char buf[64];
    size_t len;
    const char *text = "a<|endoftext|>b";
    vocab_open("gpt-2", &v);
    assert_int_equal(ak_tokenizer_encode(v.t, text, strlen(text), AK_TOK_PARSE_SPECIAL, ids, 64, &n), AK_OK);
    assert_int_equal(n, 3);
    assert_int_equal(ids[1], 50256);
    assert_int_equal(ak_tokenizer_decode(v.t, ids, n, 0, buf, sizeof buf, &len), AK_OK);
    assert_int_equal(len, 2); /* the control token is not rendered unless asked */
    assert_int_equal(ak_tokenizer_decode(v.t, ids, n, AK_TOK_RENDER_SPECIAL, buf, sizeof buf, &len), AK_OK);
    assert_int_equal(len, strlen(text));
    assert_memory_equal(buf, text, len);
    assert_int_equal(ak_tokenizer_encode(v.t, text, strlen(text), 0, ids, 64, &n), AK_OK);
    assert_false(contains(ids, n, 50256));
    vocab_close(&v);

    vocab_open("llama-spm", &v);
    assert_int_equal(ak_tokenizer_encode(v.t, "Hello", 5, AK_TOK_ADD_SPECIAL, ids, 64, &n), AK_OK);
    assert_int_equal(ids[0], 1);
    assert_int_equal(ak_tokenizer_encode(v.t, "<s>x</s>", 8, AK_TOK_PARSE_SPECIAL, ids, 64, &n), AK_OK);
    assert_int_equal(ids[0], 1);
    assert_int_equal(ids[n - 1], 2);
    assert_int_equal(ak_tokenizer_encode(v.t, "<s>", 3, 0, ids, 64, &n), AK_OK);
    assert_false(contains(ids, n, 1));
    vocab_close(&v);
}


/* ---- the pre-tokenizer table ---------------------------------------------------------- */

/* A byte-level vocabulary: the 256 byte stand-ins, then `extra` words; no merges. */
static void tiny_bpe_spec(ak__tok_spec *s, const char **tokens, const char *const *extra,
                          size_t n_extra, char cps[256][3]) {
    memset(s, 0, sizeof *s);
    ak__tok_spec_defaults(s, AK_TOKENIZER_BPE);
    for (int b = 0; b < 256; b++) {
        uint32_t cp = ak__bpe_byte_to_cp((uint8_t)b);
        if (cp < 0x80) {
            cps[b][0] = (char)cp;
            cps[b][1] = 0;
        } else {
            cps[b][0] = (char)(0xC0 | (cp >> 6));
            cps[b][1] = (char)(0x80 | (cp & 0x3F));
            cps[b][2] = 0;
        }
        tokens[b] = cps[b];
    }
    for (size_t i = 0; i < n_extra; i++) tokens[256 + i] = extra[i];
    s->tokens = tokens;
    s->n_vocab = (int32_t)(256 + n_extra);
    s->bos = s->eos = -1;
}

/* Every name of the table compiles; unknown names and llama.cpp's code-only types are
 * refused by name. */
static void test_pretok_table(void **state) {
    (void)state;
    static const char *const names[] = {
        "default", "gpt-2", "llama-bpe", "llama3", "falcon3", "qwen2", "deepseek-llm",
        "deepseek-coder", "deepseek-v3", "falcon", "mpt", "starcoder", "refact", "command-r",
        "olmo", "dbrx", "smaug-bpe", "stablelm2", "poro-chat", "jais", "viking", "tekken",
        "chatglm-bpe", "bloom", "gpt3-finnish", "exaone", "minerva-7b", "gpt-4o", "codeshell",
        "smollm", "trillion", "bailingmoe", "seed-coder", "chameleon", "superbpe",
        "qwen35", "spark2_5", "youtu", "grok-2", "laguna", "exaone-moe", "minicpm5",
        "granite-embed-multi-97m", "hunyuan", "ufakzeka"};
    const char *tokens[256];
    char cps[256][3];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        ak__tok_spec s;
        tiny_bpe_spec(&s, tokens, NULL, 0, cps);
        s.pre_name = names[i];
        ak_tokenizer *t = NULL;
        ak_status st = ak__tokenizer_build(&s, &t);
        if (st != AK_OK) fail_msg("pre-tokenizer %s: %s", names[i], ak_last_error());
        int32_t ids[64];
        size_t n;
        const char *text = "Hello WORLD's 12345 \xe4\xbd\xa0\xe5\xa5\xbd  \t!";
        assert_int_equal(ak_tokenizer_encode(t, text, strlen(text), 0, ids, 64, &n), AK_OK);
        assert_int_equal(n, strlen(text)); /* no merges: one byte token per byte */
        ak_tokenizer_free(t);
    }
    const char *refused[] = {"no-such-pre", "kimi-k2", "tiny_aya"};
    for (int i = 0; i < 3; i++) {
        ak__tok_spec s;
        tiny_bpe_spec(&s, tokens, NULL, 0, cps);
        s.pre_name = refused[i];
        ak_tokenizer *t = NULL;
        assert_int_equal(ak__tokenizer_build(&s, &t), AK_ERR_UNSUPPORTED);
        assert_non_null(strstr(ak_last_error(), refused[i]));
    }
}

/* The words a tokenizer.json makes: with ignore_merges, a word that is a token is that
 * token, so the split shows in the ids. */
static const char *write_tiny_json_added(char *dir, const char *pre, const char *normalizer,
                                         const char *decoder, int ignore_merges,
                                         const char *extra_vocab, const char *added) {
    cJSON *root = cJSON_CreateObject(), *model = cJSON_CreateObject(), *words = cJSON_CreateObject();
    for (int b = 0; b < 256; b++) {
        uint32_t cp = ak__bpe_byte_to_cp((uint8_t)b);
        char u[3] = {0};
        if (cp < 0x80) u[0] = (char)cp;
        else u[0] = (char)(0xC0 | (cp >> 6)), u[1] = (char)(0x80 | (cp & 0x3F));
        cJSON_AddNumberToObject(words, u, b);
    }
    cJSON *extra = cJSON_Parse(extra_vocab);
    int id = 256;
    for (cJSON *e = extra ? extra->child : NULL; e; e = e->next) cJSON_AddNumberToObject(words, e->valuestring, id++);
    cJSON_Delete(extra);
    cJSON_AddStringToObject(model, "type", "BPE");
    cJSON_AddItemToObject(model, "vocab", words);
    cJSON_AddItemToObject(model, "merges", cJSON_CreateArray());
    cJSON_AddBoolToObject(model, "ignore_merges", ignore_merges);
    cJSON_AddItemToObject(root, "model", model);
    cJSON_AddItemToObject(root, "normalizer", normalizer ? cJSON_Parse(normalizer) : cJSON_CreateNull());
    cJSON_AddItemToObject(root, "pre_tokenizer", cJSON_Parse(pre));
    cJSON_AddItemToObject(root, "decoder", cJSON_Parse(decoder ? decoder : "{\"type\":\"ByteLevel\"}"));
    if (added) cJSON_AddItemToObject(root, "added_tokens", cJSON_Parse(added));
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    char path[512];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    free(text);
    return dir;
}

static const char *write_tiny_json(char *dir, const char *pre, const char *normalizer,
                                   const char *decoder, int ignore_merges, const char *extra_vocab) {
    return write_tiny_json_added(dir, pre, normalizer, decoder, ignore_merges, extra_vocab, NULL);
}

#define BL_NO_REGEX "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":false}"
#define SPLIT(rx, behavior, invert)                                                           \
    "{\"type\":\"Split\",\"pattern\":{\"Regex\":\"" rx "\"},\"behavior\":\"" behavior        \
    "\",\"invert\":" invert "}"

static size_t encode_str(const ak_tokenizer *t, const char *text, int32_t *ids, size_t cap) {
    size_t n;
    assert_int_equal(ak_tokenizer_encode(t, text, strlen(text), 0, ids, cap, &n), AK_OK);
    return n;
}

static void test_hf_components(void **state) {
    (void)state;
    char dir[] = "/tmp/ak_tok_unitXXXXXX";
    assert_non_null(mkdtemp(dir));
    ak_tokenizer *t = NULL;
    int32_t ids[32];
    /* Isolated split by \p{N}{1,3}: "12345" is the words "123" and "45" */
    write_tiny_json(dir, "{\"type\":\"Sequence\",\"pretokenizers\":[" SPLIT("\\\\p{N}{1,3}", "Isolated", "false")
                    "," BL_NO_REGEX "]}", NULL, NULL, 1, "[\"123\",\"45\",\"12345\"]");
    assert_int_equal(ak__hf_tokenizer_dir(dir, 0, &t), AK_OK);
    assert_int_equal(encode_str(t, "12345", ids, 32), 2);
    assert_int_equal(ids[0], 256);
    assert_int_equal(ids[1], 257);
    assert_null(t->pre_name); /* a split llama.cpp has no name for */
    ak_tokenizer_free(t);
    /* Removed + inverted keeps only the matches: "ab  cd" is "ab" and "cd" */
    write_tiny_json(dir, "{\"type\":\"Sequence\",\"pretokenizers\":[" SPLIT("[a-z]+", "Removed", "true")
                    "," BL_NO_REGEX "]}", NULL, NULL, 1, "[\"ab\",\"cd\"]");
    assert_int_equal(ak__hf_tokenizer_dir(dir, 0, &t), AK_OK);
    assert_int_equal(encode_str(t, "ab  cd", ids, 32), 2);
    assert_int_equal(ids[0], 256);
    assert_int_equal(ids[1], 257);
    ak_tokenizer_free(t);
    /* NFC: e + U+0301 becomes U+00E9 (bytes C3 A9) before the split */
    write_tiny_json(dir, "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":true}",
                    "{\"type\":\"NFC\"}", NULL, 0, "[]");
    assert_int_equal(ak__hf_tokenizer_dir(dir, 0, &t), AK_OK);
    assert_int_equal(encode_str(t, "e\xcc\x81", ids, 32), 2);
    assert_int_equal(ids[0], 0xC3);
    assert_int_equal(ids[1], 0xA9);
    assert_string_equal(t->pre_name, "gpt-2"); /* ByteLevel's own split is GPT-2's */
    ak_tokenizer_free(t);
    /* Llama 3's split with ignore_merges is llama.cpp's "llama-bpe" */
    write_tiny_json(dir, "{\"type\":\"Sequence\",\"pretokenizers\":[" SPLIT(
        "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}{1,3}| ?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+",
        "Isolated", "false") "," BL_NO_REGEX "]}", NULL, NULL, 1, "[]");
    assert_int_equal(ak__hf_tokenizer_dir(dir, 0, &t), AK_OK);
    assert_string_equal(t->pre_name, "llama-bpe");
    ak_tokenizer_free(t);
    /* added tokens with lstrip/rstrip absorb the whitespace beside them */
    write_tiny_json_added(dir, "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":true}",
                          NULL, NULL, 0, "[]",
                          "[{\"id\":256,\"content\":\"<x>\",\"special\":false,\"lstrip\":true,"
                          "\"rstrip\":false},{\"id\":257,\"content\":\"<y>\",\"special\":false,"
                          "\"lstrip\":false,\"rstrip\":true}]");
    assert_int_equal(ak__hf_tokenizer_dir(dir, 0, &t), AK_OK);
    /* "a  " | <x> | " b" | <y> | " \t c": <x> takes the spaces before it, <y> those after */
    assert_int_equal(encode_str(t, "a  <x> b<y> \t c", ids, 32), 6);
    const int32_t want[] = {'a', 256, ' ', 'b', 257, 'c'};
    assert_memory_equal(ids, want, sizeof want);
    ak_tokenizer_free(t);
    /* Metaspace with split: each ▁ starts a word (words "▁a" and "▁b" are tokens) */
    write_tiny_json(dir, "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Metaspace\","
                    "\"replacement\":\"\xe2\x96\x81\",\"prepend_scheme\":\"always\",\"split\":true},"
                    BL_NO_REGEX "]}", NULL, NULL, 1, "[\"\xc3\xa2\xc4\xb8\xc4\xa3" "a\",\"\xc3\xa2\xc4\xb8\xc4\xa3" "b\"]");
    assert_int_equal(ak__hf_tokenizer_dir(dir, 0, &t), AK_OK);
    assert_int_equal(encode_str(t, "a b", ids, 32), 2);
    assert_int_equal(ids[0], 256);
    assert_int_equal(ids[1], 257);
    assert_null(t->pre_name); /* it rewrites the text: no GGUF name */
    ak_tokenizer_free(t);
    /* Punctuation (Isolated by default): "!!" is two words; Lowercase: İ → i + U+0307, a
     * final Σ → ς; Strip; Replace; Prepend */
    write_tiny_json(dir, "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Punctuation\"},"
                    BL_NO_REGEX "]}", "{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Strip\","
                    "\"strip_left\":true,\"strip_right\":true},{\"type\":\"Lowercase\"},{\"type\":"
                    "\"Replace\",\"pattern\":{\"Regex\":\"\\\\d+\"},\"content\":\"#\"},{\"type\":"
                    "\"Prepend\",\"prepend\":\"x\"}]}", NULL, 1, "[\"xa\"]");
    assert_int_equal(ak__hf_tokenizer_dir(dir, 0, &t), AK_OK);
    assert_int_equal(encode_str(t, " \tA!!", ids, 32), 3); /* "xa" "!" "!" */
    assert_int_equal(ids[0], 256);
    assert_int_equal(ids[1], '!');
    assert_int_equal(ids[2], '!');
    /* "x" "i" U+0307 σ ς " " | "#": bytes 78 69 CC 87 CF 83 CF 82 20 | 23 */
    assert_int_equal(encode_str(t, "\xc4\xb0\xce\xa3\xce\xa3 12", ids, 32), 10);
    const int32_t want_lower[] = {'x', 'i', 0xCC, 0x87, 0xCF, 0x83, 0xCF, 0x82, ' ', '#'};
    assert_memory_equal(ids, want_lower, sizeof want_lower);
    ak_tokenizer_free(t);
    /* components not implemented are refused by name */
    const struct {
        const char *pre, *norm, *dec, *name;
    } refused[] = {
        {"{\"type\":\"BertPreTokenizer\"}", NULL, NULL, "BertPreTokenizer"},
        {BL_NO_REGEX, "{\"type\":\"StripAccents\"}", NULL, "StripAccents"},
        {"{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Punctuation\",\"behavior\":"
         "\"MergedWithNext\"}," BL_NO_REGEX "]}", NULL, NULL, "MergedWithNext"},
        {"{\"type\":\"Sequence\",\"pretokenizers\":[" BL_NO_REGEX ",{\"type\":\"Metaspace\","
         "\"replacement\":\"_\"}]}", NULL, NULL, "Metaspace after"},
        {BL_NO_REGEX, "{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Precompiled\"}]}", NULL, "Precompiled"},
        {BL_NO_REGEX, NULL, "{\"type\":\"WordPiece\"}", "WordPiece"},
        {SPLIT("x", "MergedWithNext", "false"), NULL, NULL, "MergedWithNext"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        write_tiny_json(dir, refused[i].pre, refused[i].norm, refused[i].dec, 0, "[]");
        assert_int_equal(ak__hf_tokenizer_dir(dir, 0, &t), AK_ERR_UNSUPPORTED);
        if (!strstr(ak_last_error(), refused[i].name))
            fail_msg("refusal of %s does not name it: %s", refused[i].name, ak_last_error());
    }
    char path[512];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    unlink(path);
    rmdir(dir);
}

/* ---- SentencePiece Unigram --------------------------------------------------------------- */

#define LOWER_BLOCK "\xe2\x96\x81" /* U+2581, SentencePiece's escaped space */

/* <pad> </s> <unk> ▁ ▁a b ab a <0x63>: the lattice's choices are easy to work out by hand. */
static ak_status tiny_unigram(int merge_spaces, int32_t unk, ak_tokenizer **t) {
    static const char *tokens[] = {"<pad>", "</s>", "<unk>", LOWER_BLOCK, LOWER_BLOCK "a", "b",
                                   "ab", "a", "<0x63>"};
    static const float scores[] = {0, 0, 0, -2, -1, -3, -2.5f, -3, 0};
    static const uint8_t types[] = {AK_TOKTYPE_CONTROL, AK_TOKTYPE_CONTROL, AK_TOKTYPE_UNKNOWN,
                                    1, 1, 1, 1, 1, AK_TOKTYPE_BYTE};
    ak__tok_spec s;
    memset(&s, 0, sizeof s);
    ak__tok_spec_defaults(&s, AK_TOKENIZER_UGM);
    s.n_vocab = 9;
    s.tokens = tokens;
    s.scores = scores;
    s.types = types;
    s.unk = unk;
    s.add_space_prefix = 1;
    s.remove_extra_ws = merge_spaces;
    return ak__tokenizer_build(&s, t);
}

static void expect_ids(const ak_tokenizer *t, const char *text, const int32_t *want, size_t n) {
    int32_t ids[32];
    size_t got = encode_str(t, text, ids, 32);
    if (got != n || memcmp(ids, want, n * sizeof *ids) != 0) {
        print_ids("got", ids, got);
        fail_msg("'%s': %zu ids, want %zu", text, got, n);
    }
}

static void write_unigram_json(const char *dir, const char *norm, const char *pre,
                               const char *dec, int byte_fallback) {
    char path[512];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "{\"model\":{\"type\":\"Unigram\",\"unk_id\":2,\"byte_fallback\":%s,\"vocab\":["
            "[\"<pad>\",0],[\"</s>\",0],[\"<unk>\",0],[\"" LOWER_BLOCK "\",-2],[\"" LOWER_BLOCK
            "a\",-1],[\"b\",-3],[\"ab\",-2.5],[\"a\",-3],[\"<0x63>\",0]]},"
            "\"added_tokens\":[{\"id\":1,\"content\":\"</s>\",\"special\":true}],"
            "\"normalizer\":%s,\"pre_tokenizer\":%s,\"decoder\":%s}",
            byte_fallback ? "true" : "false", norm, pre, dec);
    fclose(f);
}

#define METASPACE "{\"type\":\"Metaspace\",\"replacement\":\"" LOWER_BLOCK "\"," \
                  "\"prepend_scheme\":\"always\",\"split\":true}"

static void test_unigram(void **state) {
    (void)state;
    ak_tokenizer *t = NULL;
    assert_int_equal(tiny_unigram(0, 2, &t), AK_OK);
    /* "▁ab": ▁a + b = -4 beats ▁ + ab = -4.5 and ▁ + a + b = -8 */
    expect_ids(t, "ab", (const int32_t[]){4, 5}, 2);
    /* x and y have no piece: one unknown token for both (each scores -3 - 10) */
    expect_ids(t, "xyb", (const int32_t[]){3, 2, 5}, 3);
    /* spaces kept: "a  b" is ▁a ▁ ▁ b; byte pieces are not matched in text */
    expect_ids(t, "a  b", (const int32_t[]){4, 3, 3, 5}, 4);
    expect_ids(t, "c", (const int32_t[]){3, 2}, 2);
    char text[32];
    size_t len;
    const int32_t round[] = {4, 5, 3, 8};
    assert_int_equal(ak_tokenizer_decode(t, round, 4, 0, text, sizeof text, &len), AK_OK);
    assert_int_equal(len, 5);
    assert_memory_equal(text, " ab c", 5);
    ak_tokenizer_free(t);
    /* remove_extra_whitespaces: "  a  b " is ▁a▁b */
    assert_int_equal(tiny_unigram(1, 2, &t), AK_OK);
    expect_ids(t, "  a  b ", (const int32_t[]){4, 3, 5}, 3);
    ak_tokenizer_free(t);
    /* no unknown token: refused when built */
    assert_int_equal(tiny_unigram(0, -1, &t), AK_ERR_INVALID_MODEL);
    /* malformed precompiled maps are refused */
    ak__charsmap m;
    const uint8_t short_blob[] = {1, 0, 0};
    const uint8_t long_trie[] = {8, 0, 0, 0, 0, 0, 0, 0};
    assert_int_equal(ak__charsmap_parse(short_blob, sizeof short_blob, &m), AK_ERR_INVALID_MODEL);
    assert_int_equal(ak__charsmap_parse(long_trie, sizeof long_trie, &m), AK_ERR_INVALID_MODEL);

    /* tokenizer.json: Metaspace splits "a b" into ▁a | ▁b, b alone is ▁ b; byte_fallback
     * spells the unknown "c" with <0x63> */
    char dir[] = "/tmp/ak_tok_ugmXXXXXX";
    assert_non_null(mkdtemp(dir));
    write_unigram_json(dir, "null", METASPACE, METASPACE, 1);
    assert_int_equal(ak__hf_tokenizer_dir(dir, 0, &t), AK_OK);
    expect_ids(t, "ab c", (const int32_t[]){4, 5, 3, 8}, 4);
    ak_tokenizer_free(t);
    /* Hugging Face's T5 chain: WhitespaceSplit then Metaspace; NFKC first (ａ → a) */
    write_unigram_json(dir, "{\"type\":\"NFKC\"}", "{\"type\":\"Sequence\",\"pretokenizers\":["
                       "{\"type\":\"WhitespaceSplit\"}," METASPACE "]}", METASPACE, 0);
    assert_int_equal(ak__hf_tokenizer_dir(dir, 0, &t), AK_OK);
    expect_ids(t, " \xef\xbd\x81  b ", (const int32_t[]){4, 3, 5}, 3);
    ak_tokenizer_free(t);
    /* components not implemented are refused by name */
    const struct {
        const char *norm, *pre, *dec, *name;
    } refused[] = {
        {"{\"type\":\"StripAccents\"}", METASPACE, METASPACE, "StripAccents"},
        {"null", "{\"type\":\"ByteLevel\"}", METASPACE, "ByteLevel"},
        {"null", "{\"type\":\"BertPreTokenizer\"}", METASPACE, "BertPreTokenizer"},
        {"null", METASPACE, "{\"type\":\"WordPiece\"}", "WordPiece"},
        {"{\"type\":\"BertNormalizer\"}", METASPACE, METASPACE, "BertNormalizer"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        write_unigram_json(dir, refused[i].norm, refused[i].pre, refused[i].dec, 0);
        assert_int_equal(ak__hf_tokenizer_dir(dir, 0, &t), AK_ERR_UNSUPPORTED);
        if (!strstr(ak_last_error(), refused[i].name))
            fail_msg("refusal of %s does not name it: %s", refused[i].name, ak_last_error());
    }
    char path[512];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    unlink(path);
    rmdir(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama_spm),
        cmocka_unit_test(test_phi3),
        cmocka_unit_test(test_gpt2),
        cmocka_unit_test(test_falcon),
        cmocka_unit_test(test_bert_bge),
        cmocka_unit_test(test_special_tokens),
        cmocka_unit_test(test_pretok_table),
        cmocka_unit_test(test_hf_components),
        cmocka_unit_test(test_unigram),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
