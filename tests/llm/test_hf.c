/* Hugging Face folder tests: safetensors headers (valid, then every kind of malformed one,
 * truncation at every byte and random corruption: refused with AK_ERR_INVALID_MODEL, no
 * crash), folders (single file, sharded with an index, bad indexes), config.json
 * hyper-parameters, chat templates, and tokenizer.json: a GPT-2 tokenizer.json written
 * here from the tokens and merges of llama.cpp's ggml-vocab-gpt-2 (../shared/llm/vocab,
 * see shared_vocab.h) must encode every .inp line to its .out line, and tokenizer.json files written by the library from the llama-spm,
 * phi-3, gpt-2 and falcon vocabularies must encode exactly like their GGUF tokenizers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "accelkit/llm.h"
#include "gguf_writer.h"
#include "llm/hf/hf.h"
#include "llm/hf/safetensors.h"
#include "shared_vocab.h"

/* ---- files and folders ----------------------------------------------------------------- */

static void write_file(const char *dir, const char *name, const void *data, size_t n) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    fclose(f);
}

static void write_text(const char *dir, const char *name, const char *text) {
    write_file(dir, name, text, strlen(text));
}

static void make_dir(char *dir) {
    strcpy(dir, "/tmp/ak_test_hf_XXXXXX");
    assert_non_null(mkdtemp(dir));
}

static void remove_dir(const char *dir) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

/* A safetensors image: u64 header length, the header, `data_bytes` bytes of 0..255. */
static unsigned char *st_build(const char *header, size_t data_bytes, size_t *n) {
    size_t h = strlen(header);
    *n = 8 + h + data_bytes;
    unsigned char *b = malloc(*n);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)h >> (8 * i));
    memcpy(b + 8, header, h);
    for (size_t i = 0; i < data_bytes; i++) b[8 + h + i] = (unsigned char)i;
    return b;
}

/* ---- safetensors ----------------------------------------------------------------------- */

static const char k_valid_header[] =
    "{\"__metadata__\":{\"format\":\"pt\"},"
    "\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[8,32]},"
    "\"b\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[0,8]},"
    "\"s\":{\"dtype\":\"F16\",\"shape\":[],\"data_offsets\":[32,34]}}";

static void test_safetensors_valid(void **state) {
    (void)state;
    size_t n;
    unsigned char *b = st_build(k_valid_header, 34, &n);
    ak__st_file f;
    assert_int_equal(ak__st_parse(b, n, "valid", &f), AK_OK);
    assert_int_equal(f.n_tensors, 3);
    const ak__st_tensor *w = ak__st_find(&f, "w"), *s = ak__st_find(&f, "s");
    assert_non_null(w);
    assert_int_equal(w->dtype, AK_ST_F32);
    assert_int_equal(w->n_dims, 2);
    assert_int_equal(w->shape[0], 2);
    assert_int_equal(w->shape[1], 3);
    assert_ptr_equal(w->data, b + 8 + strlen(k_valid_header) + 8);
    assert_int_equal(w->bytes, 24);
    assert_int_equal(s->n_dims, 0);
    assert_int_equal(s->bytes, 2);
    assert_null(ak__st_find(&f, "__metadata__"));
    assert_null(ak__st_find(&f, "nope"));
    ak__st_close(&f);
    free(b);
}

typedef struct bad_case {
    const char *what, *header;
    size_t data;
} bad_case;

static const bad_case k_bad[] = {
    {"not JSON", "{\"w\":{\"dtype\":", 0},
    {"not an object", "[1,2,3]", 0},
    {"unknown dtype", "{\"w\":{\"dtype\":\"F12\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4},
    {"no dtype", "{\"w\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4},
    {"entry not an object", "{\"w\":5}", 0},
    {"shape/size mismatch", "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,12]}}", 16},
    {"offsets past EOF", "{\"w\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 8},
    {"begin after end", "{\"w\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[4,0]}}", 8},
    {"overlap", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12},
    {"same span twice", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                        "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8},
    {"duplicate name", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                       "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8},
    {"negative dim", "{\"w\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4},
    {"fractional offset", "{\"w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0.5,1.5]}}", 4},
    {"three offsets", "{\"w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1,2]}}", 4},
    {"shape not a list", "{\"w\":{\"dtype\":\"U8\",\"shape\":7,\"data_offsets\":[0,1]}}", 4},
    {"shape overflow", "{\"w\":{\"dtype\":\"F64\",\"shape\":[4294967296,4294967296,4294967296],"
                       "\"data_offsets\":[0,0]}}", 0},
    {"nine dims", "{\"w\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,1]}}", 1},
    {"metadata not an object", "{\"__metadata__\":3}", 0},
    {"huge offset", "{\"w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1e300,1e300]}}", 4},
};

static void expect_invalid(const unsigned char *b, size_t n, const char *what) {
    ak__st_file f;
    ak_status st = ak__st_parse(b, n, what, &f);
    if (st != AK_ERR_INVALID_MODEL) print_message("case '%s' gave status %d\n", what, st);
    assert_int_equal(st, AK_ERR_INVALID_MODEL);
    assert_true(strstr(ak_last_error(), what) != NULL); /* the message names the file */
}

static void test_safetensors_malformed(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof k_bad / sizeof k_bad[0]; i++) {
        size_t n;
        unsigned char *b = st_build(k_bad[i].header, k_bad[i].data, &n);
        expect_invalid(b, n, k_bad[i].what);
        free(b);
    }
    /* header lengths: past the end of the file, huge, and files too short for one */
    size_t n;
    unsigned char *b = st_build(k_valid_header, 34, &n);
    b[0] += 1;
    expect_invalid(b, n, "length off by one");
    memset(b, 0, 8);
    b[5] = 1; /* 2^40 */
    expect_invalid(b, n, "huge header length");
    memset(b, 0xff, 8);
    expect_invalid(b, n, "all-ones header length");
    expect_invalid(b, 5, "five bytes");
    expect_invalid(b, 0, "empty");
    free(b);
}

/* Every prefix of a valid file is refused; random byte damage never crashes. */
static void test_safetensors_truncated_and_corrupted(void **state) {
    (void)state;
    size_t n;
    unsigned char *b = st_build(k_valid_header, 34, &n);
    for (size_t len = 0; len < n; len++) {
        unsigned char *copy = malloc(len ? len : 1); /* exact size: overruns are caught by ASan */
        memcpy(copy, b, len);
        ak__st_file f;
        assert_int_equal(ak__st_parse(copy, len, "prefix", &f), AK_ERR_INVALID_MODEL);
        free(copy);
    }
    srand(7);
    for (int iter = 0; iter < 3000; iter++) {
        unsigned char *copy = malloc(n);
        memcpy(copy, b, n);
        for (int k = 0; k < 1 + iter % 4; k++) copy[(size_t)rand() % n] = (unsigned char)rand();
        ak__st_file f;
        if (ak__st_parse(copy, n, "corrupt", &f) == AK_OK) {
            for (size_t t = 0; t < f.n_tensors; t++) { /* whatever it accepted lies inside */
                const unsigned char *p = f.tensors[t].data;
                assert_true(p >= copy && p + f.tensors[t].bytes <= copy + n);
            }
            ak__st_close(&f);
        }
        free(copy);
    }
    free(b);
}

/* ---- folders --------------------------------------------------------------------------- */

static const char k_config[] =
    "{\"architectures\":[\"LlamaForCausalLM\"],\"hidden_size\":8,\"intermediate_size\":16,"
    "\"num_hidden_layers\":1,\"num_attention_heads\":2,\"num_key_value_heads\":1,"
    "\"max_position_embeddings\":64,\"vocab_size\":10,\"rms_norm_eps\":1e-5,"
    "\"rope_theta\":500000.0,\"tie_word_embeddings\":false,\"hidden_act\":\"silu\"}";

/* embed [10, 8] F32, q_proj [8, 8] BF16, an I32 tensor */
static const char k_model_header[] =
    "{\"model.embed_tokens.weight\":{\"dtype\":\"F32\",\"shape\":[10,8],\"data_offsets\":[0,320]},"
    "\"model.layers.0.self_attn.q_proj.weight\":{\"dtype\":\"BF16\",\"shape\":[8,8],"
    "\"data_offsets\":[320,448]},"
    "\"ids\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[448,456]}}";

static void write_single(const char *dir) {
    size_t n;
    unsigned char *b = st_build(k_model_header, 456, &n);
    write_file(dir, "model.safetensors", b, n);
    free(b);
}

static void test_hf_folder(void **state) {
    (void)state;
    char dir[64];
    make_dir(dir);
    ak__hf *h;
    assert_int_equal(ak__hf_open(dir, &h), AK_ERR_IO); /* no config.json */
    write_text(dir, "config.json", k_config);
    assert_int_equal(ak__hf_open(dir, &h), AK_ERR_INVALID_MODEL); /* no weights */
    write_single(dir);
    assert_int_equal(ak__hf_open(dir, &h), AK_OK);

    ak__llm_hparams hp;
    assert_int_equal(ak__hf_hparams(h, &hp), AK_OK);
    assert_string_equal(hp.arch, "llama");
    assert_int_equal(hp.dim, 8);
    assert_int_equal(hp.n_heads, 2);
    assert_int_equal(hp.n_kv_heads, 1);
    assert_int_equal(hp.head_dim, 4);
    assert_int_equal(hp.n_vocab, 10);
    assert_int_equal(hp.max_context, 64);
    assert_true(hp.rope_theta == 500000.0f);
    assert_true(hp.norm_eps == 1e-5f);
    assert_int_equal(hp.rope_neox, 1);
    assert_int_equal(hp.tied_output, 1); /* no lm_head.weight in the files */
    assert_int_equal(hp.qkv_bias, 0);

    ak__tensor_view v;
    assert_int_equal(ak__hf_tensor(h, "model.embed_tokens.weight", &v), AK_OK);
    assert_int_equal(v.type, AK_WTYPE_F32);
    assert_int_equal(v.n_dims, 2);
    assert_int_equal(v.dims[0], 8); /* innermost first */
    assert_int_equal(v.dims[1], 10);
    assert_int_equal(v.bytes, 320);
    assert_int_equal(((const unsigned char *)v.data)[1], 1);
    assert_int_equal(ak__hf_tensor(h, "model.layers.0.self_attn.q_proj.weight", &v), AK_OK);
    assert_int_equal(v.type, AK_WTYPE_BF16);
    assert_int_equal(((const unsigned char *)v.data)[0], 320 % 256);
    assert_int_equal(ak__hf_tensor(h, "lm_head.weight", &v), AK_ERR_INVALID_ARG);
    assert_int_equal(ak__hf_tensor(h, "ids", &v), AK_ERR_UNSUPPORTED);
    assert_int_equal(ak__hf_tensor_count(h), 3);
    const char *tpl = "x";
    assert_int_equal(ak__hf_chat_template(h, &tpl), AK_OK);
    assert_null(tpl);
    ak__hf_close(h);

    /* a malformed shard makes the folder fail with the shard's reason */
    size_t n;
    unsigned char *b = st_build(k_bad[6].header, k_bad[6].data, &n);
    write_file(dir, "model.safetensors", b, n);
    free(b);
    assert_int_equal(ak__hf_open(dir, &h), AK_ERR_INVALID_MODEL);
    assert_non_null(strstr(ak_last_error(), "pass the end of the data"));
    write_text(dir, "config.json", "{\"hidden_size\": 8,");
    assert_int_equal(ak__hf_open(dir, &h), AK_ERR_INVALID_MODEL);
    remove_dir(dir);
}

static void write_shards(const char *dir, const char *index) {
    size_t n;
    unsigned char *b = st_build("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, &n);
    write_file(dir, "model-00001-of-00002.safetensors", b, n);
    free(b);
    b = st_build("{\"b\":{\"dtype\":\"F16\",\"shape\":[3],\"data_offsets\":[0,6]}}", 6, &n);
    write_file(dir, "model-00002-of-00002.safetensors", b, n);
    free(b);
    write_text(dir, "model.safetensors.index.json", index);
}

static void test_hf_sharded(void **state) {
    (void)state;
    char dir[64];
    make_dir(dir);
    write_text(dir, "config.json", k_config);
    write_shards(dir, "{\"metadata\":{\"total_size\":14},\"weight_map\":{"
                      "\"a\":\"model-00001-of-00002.safetensors\","
                      "\"b\":\"model-00002-of-00002.safetensors\"}}");
    ak__hf *h;
    assert_int_equal(ak__hf_open(dir, &h), AK_OK);
    ak__tensor_view v;
    assert_int_equal(ak__hf_tensor(h, "a", &v), AK_OK);
    assert_int_equal(v.dims[0], 2);
    assert_int_equal(ak__hf_tensor(h, "b", &v), AK_OK);
    assert_int_equal(v.type, AK_WTYPE_F16);
    assert_int_equal(v.dims[0], 3);
    ak__hf_close(h);

    /* the index names a tensor its shard does not hold */
    write_shards(dir, "{\"weight_map\":{\"a\":\"model-00002-of-00002.safetensors\"}}");
    assert_int_equal(ak__hf_open(dir, &h), AK_ERR_INVALID_MODEL);
    /* a shard outside the folder */
    write_shards(dir, "{\"weight_map\":{\"a\":\"../model-00001-of-00002.safetensors\"}}");
    assert_int_equal(ak__hf_open(dir, &h), AK_ERR_INVALID_MODEL);
    /* a missing shard */
    write_shards(dir, "{\"weight_map\":{\"a\":\"model-00003-of-00002.safetensors\"}}");
    assert_int_equal(ak__hf_open(dir, &h), AK_ERR_IO);
    /* no weight map */
    write_shards(dir, "{\"metadata\":{}}");
    assert_int_equal(ak__hf_open(dir, &h), AK_ERR_INVALID_MODEL);
    /* the same tensor in two shards (found by scanning when there is no index) */
    char path[128];
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    unlink(path);
    assert_int_equal(ak__hf_open(dir, &h), AK_OK); /* scanned: a and b */
    assert_int_equal(ak__hf_tensor_count(h), 2);
    ak__hf_close(h);
    size_t n;
    unsigned char *b = st_build("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, &n);
    write_file(dir, "model-00002-of-00002.safetensors", b, n);
    free(b);
    assert_int_equal(ak__hf_open(dir, &h), AK_ERR_INVALID_MODEL);
    remove_dir(dir);
}

/* config.json variants → hparams */
static ak_status hparams_of(const char *dir, const char *config, ak__llm_hparams *hp) {
    write_text(dir, "config.json", config);
    ak__hf *h;
    ak_status st = ak__hf_open(dir, &h);
    if (st != AK_OK) return st;
    st = ak__hf_hparams(h, hp);
    ak__hf_close(h);
    return st;
}

static void test_hf_hparams(void **state) {
    (void)state;
    char dir[64];
    make_dir(dir);
    write_single(dir);
    ak__llm_hparams hp;
    const char *base = "\"hidden_size\":8,\"intermediate_size\":16,\"num_hidden_layers\":2,"
                       "\"num_attention_heads\":2,\"vocab_size\":10";
    char cfg[1024];
    snprintf(cfg, sizeof cfg, "{\"model_type\":\"mistral\",%s}", base);
    assert_int_equal(hparams_of(dir, cfg, &hp), AK_OK);
    assert_string_equal(hp.arch, "mistral");
    assert_int_equal(hp.n_kv_heads, 2);          /* default: heads */
    assert_true(hp.rope_theta == 10000.0f);      /* default */
    assert_int_equal(hp.max_context, 2048);
    assert_int_equal(hp.rope_scaling, AK_ROPE_SCALING_NONE);

    snprintf(cfg, sizeof cfg, "{\"architectures\":[\"LlamaForCausalLM\"],%s,\"head_dim\":6,"
             "\"rope_scaling\":{\"type\":\"linear\",\"factor\":4.0}}", base);
    assert_int_equal(hparams_of(dir, cfg, &hp), AK_OK);
    assert_int_equal(hp.head_dim, 6);
    assert_int_equal(hp.rope_scaling, AK_ROPE_SCALING_LINEAR);
    assert_true(hp.rope_factor == 4.0f);

    snprintf(cfg, sizeof cfg, "{\"architectures\":[\"LlamaForCausalLM\"],%s,\"rope_scaling\":"
             "{\"rope_type\":\"llama3\",\"factor\":8.0,\"low_freq_factor\":1.0,"
             "\"high_freq_factor\":4.0,\"original_max_position_embeddings\":8192}}", base);
    assert_int_equal(hparams_of(dir, cfg, &hp), AK_OK);
    assert_int_equal(hp.rope_scaling, AK_ROPE_SCALING_LLAMA3);
    assert_true(hp.rope_factor == 8.0f && hp.rope_high_freq_factor == 4.0f);
    assert_int_equal(hp.rope_orig_context, 8192);

    snprintf(cfg, sizeof cfg, "{\"architectures\":[\"LlamaForCausalLM\"],%s,\"rope_scaling\":"
             "{\"type\":\"yarn\",\"factor\":4.0}}", base);
    assert_int_equal(hparams_of(dir, cfg, &hp), AK_ERR_UNSUPPORTED);
    snprintf(cfg, sizeof cfg, "{\"architectures\":[\"GPT2LMHeadModel\"],%s}", base);
    assert_int_equal(hparams_of(dir, cfg, &hp), AK_ERR_UNSUPPORTED);
    snprintf(cfg, sizeof cfg, "{\"model_type\":\"llama\",%s,\"num_key_value_heads\":3}", base);
    assert_int_equal(hparams_of(dir, cfg, &hp), AK_ERR_INVALID_MODEL);
    snprintf(cfg, sizeof cfg, "{\"model_type\":\"llama\",%s,\"hidden_act\":\"gelu\"}", base);
    assert_int_equal(hparams_of(dir, cfg, &hp), AK_ERR_UNSUPPORTED);
    assert_int_equal(hparams_of(dir, "{\"model_type\":\"llama\",\"hidden_size\":8}", &hp),
                     AK_ERR_INVALID_MODEL);
    snprintf(cfg, sizeof cfg, "{\"model_type\":\"llama\",%s,\"rms_norm_eps\":\"small\"}", base);
    assert_int_equal(hparams_of(dir, cfg, &hp), AK_ERR_INVALID_MODEL);
    assert_int_equal(hparams_of(dir, "{\"model_type\":\"llama\",\"hidden_size\":8,"
                     "\"intermediate_size\":16,\"num_hidden_layers\":0,\"num_attention_heads\":2,"
                     "\"vocab_size\":10}", &hp), AK_ERR_INVALID_MODEL);
    snprintf(cfg, sizeof cfg, "{\"model_type\":\"llama\",%s,\"head_dim\":5}", base);
    assert_int_equal(hparams_of(dir, cfg, &hp), AK_ERR_INVALID_MODEL);

    /* Qwen2 with q/k/v biases; a tied model */
    size_t n;
    unsigned char *b = st_build("{\"model.layers.0.self_attn.q_proj.bias\":{\"dtype\":\"F32\","
                                "\"shape\":[2],\"data_offsets\":[0,8]}}", 8, &n);
    write_file(dir, "model.safetensors", b, n);
    free(b);
    snprintf(cfg, sizeof cfg, "{\"architectures\":[\"Qwen2ForCausalLM\"],%s,"
             "\"tie_word_embeddings\":true}", base);
    assert_int_equal(hparams_of(dir, cfg, &hp), AK_OK);
    assert_string_equal(hp.arch, "qwen2");
    assert_int_equal(hp.qkv_bias, 1);
    assert_int_equal(hp.tied_output, 1);
    remove_dir(dir);
}

static void test_hf_chat_template(void **state) {
    (void)state;
    char dir[64];
    make_dir(dir);
    write_text(dir, "config.json", k_config);
    write_single(dir);
    write_text(dir, "tokenizer_config.json", "{\"chat_template\":\"{% for m in messages %}"
                                             "{{ m.content }}{% endfor %}\"}");
    ak__hf *h;
    const char *tpl;
    assert_int_equal(ak__hf_open(dir, &h), AK_OK);
    assert_int_equal(ak__hf_chat_template(h, &tpl), AK_OK);
    assert_string_equal(tpl, "{% for m in messages %}{{ m.content }}{% endfor %}");
    ak__hf_close(h);
    write_text(dir, "tokenizer_config.json", "{\"chat_template\":[{\"name\":\"tool_use\","
               "\"template\":\"T\"},{\"name\":\"default\",\"template\":\"D\"}]}");
    assert_int_equal(ak__hf_open(dir, &h), AK_OK);
    assert_int_equal(ak__hf_chat_template(h, &tpl), AK_OK);
    assert_string_equal(tpl, "D");
    ak__hf_close(h);
    write_text(dir, "tokenizer_config.json", "{}");
    write_text(dir, "chat_template.jinja", "J");
    assert_int_equal(ak__hf_open(dir, &h), AK_OK);
    assert_int_equal(ak__hf_chat_template(h, &tpl), AK_OK);
    assert_string_equal(tpl, "J");
    ak__hf_close(h);
    remove_dir(dir);
}

/* ---- tokenizers ------------------------------------------------------------------------ */

typedef struct json_cases {
    const char *name;
    const ak_tokenizer *t;
    size_t match;
} json_cases;

static void one_json_case(void *ctx, const char *text, size_t len, const char *want, size_t want_len) {
    json_cases *c = ctx;
    int32_t *ids = malloc((len + 8) * sizeof *ids), expected[4096];
    size_t n, nw = parse_vocab_ids(want, want_len, expected, 4096);
    assert_int_equal(ak_tokenizer_encode(c->t, text, len, 0, ids, len + 8, &n), AK_OK);
    int ok = n == nw && (n == 0 || memcmp(ids, expected, n * sizeof *ids) == 0);
    if (!ok) print_message("  %s: mismatch for \"%.*s\"\n", c->name, (int)len, text);
    c->match += (size_t)ok;
    free(ids);
}

/* Every .inp case of `name` must encode with `t` to its .out line. */
static void check_vocab_cases(const char *name, const ak_tokenizer *t) {
    json_cases c = {name, t, 0};
    size_t total = for_each_vocab_case(name, one_json_case, &c);
    printf("tokenizer.json %-10s %zu/%zu lines match\n", name, c.match, total);
    assert_true(total >= 40);
    assert_int_equal(c.match, total);
}

static char *gguf_cstr(const ak_gguf *g, const char *key, uint64_t i) {
    const char *s;
    size_t len;
    assert_int_equal(ak_gguf_get_array_string(g, key, i, &s, &len), AK_OK);
    char *c = malloc(len + 1);
    memcpy(c, s, len);
    c[len] = '\0';
    return c;
}

/* GPT-2's tokenizer.json as Hugging Face publishes it, from the GGUF's tokens and merges. */
static char *gpt2_tokenizer_json(const ak_gguf *g) {
    cJSON *root = cJSON_CreateObject(), *model = cJSON_CreateObject();
    cJSON *vocab = cJSON_CreateObject(), *merges = cJSON_CreateArray();
    cJSON *added = cJSON_AddArrayToObject(root, "added_tokens");
    cJSON_AddItemToObject(root, "pre_tokenizer", cJSON_Parse("{\"type\":\"ByteLevel\","
                          "\"add_prefix_space\":false,\"trim_offsets\":true,\"use_regex\":true}"));
    ak_gguf_type et;
    uint64_t n_tok, n_merge;
    assert_int_equal(ak_gguf_get_array(g, "tokenizer.ggml.tokens", &et, &n_tok), AK_OK);
    assert_int_equal(ak_gguf_get_array(g, "tokenizer.ggml.merges", &et, &n_merge), AK_OK);
    for (uint64_t i = 0; i < n_tok; i++) {
        char *s = gguf_cstr(g, "tokenizer.ggml.tokens", i);
        cJSON_AddNumberToObject(vocab, s, (double)i);
        int64_t type = 1;
        ak_gguf_get_array_int(g, "tokenizer.ggml.token_type", i, &type);
        if (type == 3) { /* control */
            cJSON *a = cJSON_CreateObject();
            cJSON_AddNumberToObject(a, "id", (double)i);
            cJSON_AddStringToObject(a, "content", s);
            cJSON_AddTrueToObject(a, "special");
            cJSON_AddItemToArray(added, a);
        }
        free(s);
    }
    for (uint64_t i = 0; i < n_merge; i++) {
        char *s = gguf_cstr(g, "tokenizer.ggml.merges", i);
        if (i % 2) { /* both spellings of a merge: "a b" and ["a", "b"] */
            cJSON_AddItemToArray(merges, cJSON_CreateString(s));
        } else {
            char *sp = strchr(s + 1, ' ');
            *sp = '\0';
            const char *pair[2] = {s, sp + 1};
            cJSON_AddItemToArray(merges, cJSON_CreateStringArray(pair, 2));
        }
        free(s);
    }
    cJSON_AddStringToObject(model, "type", "BPE");
    cJSON_AddItemToObject(model, "vocab", vocab);
    cJSON_AddItemToObject(model, "merges", merges);
    cJSON_AddItemToObject(root, "model", model);
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return text;
}

static void test_hf_tokenizer_gpt2(void **state) {
    (void)state;
    require_shared();
    ak_gguf *g = open_shared_vocab("gpt-2");
    char dir[64];
    make_dir(dir);
    char *json = gpt2_tokenizer_json(g);
    write_text(dir, "tokenizer.json", json);
    write_text(dir, "tokenizer_config.json", "{\"bos_token\":\"<|endoftext|>\","
                                             "\"eos_token\":{\"content\":\"<|endoftext|>\"}}");
    free(json);
    ak_tokenizer *t;
    assert_int_equal(ak__hf_tokenizer_dir(dir, 0, &t), AK_OK);
    ak_tokenizer_info info;
    assert_int_equal(ak_tokenizer_get_info(t, &info), AK_OK);
    assert_int_equal(info.kind, AK_TOKENIZER_BPE);
    assert_int_equal(info.n_vocab, 50257);
    assert_int_equal(info.bos, 50256);
    assert_int_equal(info.eos, 50256);
    assert_int_equal(info.add_bos, 0);
    check_vocab_cases("gpt-2", t);
    int32_t ids[8];
    size_t n;
    assert_int_equal(ak_tokenizer_encode(t, "a<|endoftext|>", 14, AK_TOK_PARSE_SPECIAL, ids, 8, &n), AK_OK);
    assert_int_equal(n, 2);
    assert_int_equal(ids[1], 50256);
    ak_tokenizer_free(t);
    /* config.json's vocab_size pads the vocabulary with unused tokens */
    assert_int_equal(ak__hf_tokenizer_dir(dir, 50304, &t), AK_OK);
    assert_int_equal(ak_tokenizer_get_info(t, &info), AK_OK);
    assert_int_equal(info.n_vocab, 50304);
    const char *text;
    size_t len;
    assert_int_equal(ak_tokenizer_token_text(t, 50300, &text, &len), AK_OK);
    assert_int_equal(len, strlen("[PAD50300]"));
    ak_tokenizer_free(t);
    /* not a tokenizer.json */
    write_text(dir, "tokenizer.json", "{\"model\":{\"type\":\"WordPiece\",\"vocab\":{}}}");
    assert_int_equal(ak__hf_tokenizer_dir(dir, 0, &t), AK_ERR_UNSUPPORTED);
    write_text(dir, "tokenizer.json", "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":-4},"
                                      "\"merges\":[]},\"pre_tokenizer\":{\"type\":\"ByteLevel\"}}");
    assert_int_equal(ak__hf_tokenizer_dir(dir, 0, &t), AK_ERR_INVALID_MODEL);
    write_text(dir, "tokenizer.json", "{\"model\":");
    assert_int_equal(ak__hf_tokenizer_dir(dir, 0, &t), AK_ERR_INVALID_MODEL);
    remove_dir(dir);
    ak_gguf_close(g);
}

/* GGUF vocabulary → tokenizer.json (the library's writer) → tokenizer: same encodings. */
static void roundtrip_vocab(const char *name) {
    ak_gguf *g = open_shared_vocab(name);
    ak_tokenizer *ref, *t;
    assert_int_equal(ak_tokenizer_from_gguf(g, &ref), AK_OK);
    char dir[64];
    make_dir(dir);
    assert_int_equal(ak__hf_write_tokenizer(ref, "{{ x }}", dir), AK_OK);
    assert_int_equal(ak__hf_tokenizer_dir(dir, 0, &t), AK_OK);
    ak_tokenizer_info a, b;
    assert_int_equal(ak_tokenizer_get_info(ref, &a), AK_OK);
    assert_int_equal(ak_tokenizer_get_info(t, &b), AK_OK);
    assert_int_equal(a.kind, b.kind);
    assert_int_equal(a.n_vocab, b.n_vocab);
    assert_int_equal(a.bos, b.bos);
    assert_int_equal(a.eos, b.eos);
    assert_int_equal(a.unk, b.unk);
    assert_int_equal(a.add_bos, b.add_bos);
    assert_int_equal(a.add_eos, b.add_eos);
    check_vocab_cases(name, t);
    /* with BOS and specials parsed too */
    const char *text = "Hello <s> world</s>";
    int32_t x[64], y[64];
    size_t nx, ny;
    unsigned fl = AK_TOK_ADD_SPECIAL | AK_TOK_PARSE_SPECIAL;
    assert_int_equal(ak_tokenizer_encode(ref, text, strlen(text), fl, x, 64, &nx), AK_OK);
    assert_int_equal(ak_tokenizer_encode(t, text, strlen(text), fl, y, 64, &ny), AK_OK);
    assert_int_equal(nx, ny);
    assert_memory_equal(x, y, nx * sizeof *x);
    ak_tokenizer_free(ref);
    ak_tokenizer_free(t);
    remove_dir(dir);
    ak_gguf_close(g);
}

static void test_hf_tokenizer_write_spm(void **state) {
    (void)state;
    require_shared();
    roundtrip_vocab("llama-spm");
    roundtrip_vocab("phi-3");
}

static void test_hf_tokenizer_write_bpe(void **state) {
    (void)state;
    require_shared();
    roundtrip_vocab("gpt-2");
    roundtrip_vocab("falcon");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_safetensors_valid),
        cmocka_unit_test(test_safetensors_malformed),
        cmocka_unit_test(test_safetensors_truncated_and_corrupted),
        cmocka_unit_test(test_hf_folder),
        cmocka_unit_test(test_hf_sharded),
        cmocka_unit_test(test_hf_hparams),
        cmocka_unit_test(test_hf_chat_template),
        cmocka_unit_test(test_hf_tokenizer_gpt2),
        cmocka_unit_test(test_hf_tokenizer_write_spm),
        cmocka_unit_test(test_hf_tokenizer_write_bpe),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
