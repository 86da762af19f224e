/* Checkpoint conversion tests (ak_llm_convert). Hugging Face folders are written here
 * (config.json, safetensors built with cJSON, a small byte-level tokenizer.json), then:
 *   - the q/k row permutation and its inverse are each other's inverse and match
 *     llama.cpp's reshape(n_head, 2, hd/2, in).swapaxes(1, 2);
 *   - HF → GGUF carries llama.cpp's names, keys and types (norms f32, q/k permuted for
 *     llama, not for qwen2), and GGUF → HF gives every tensor back bit for bit (f32,
 *     bf16 kept), within the quantization error for q8_0/q4_0, with the same config and
 *     the same tokenizer; Llama 3.1 RoPE scaling travels as rope_freqs.weight;
 *   - bad requests and malformed inputs fail cleanly and leave no file behind;
 *   - the streaming GGUF writer writes every value type and reads back exactly;
 *   - the GGUF scripts/llm-make-model writes for a seed equals our conversion of the HF
 *     folder it writes for the same seed (an independent NumPy implementation of the same
 *     layout; one of its folders is sharded).
 * Named test_llm_convert (tests/kernels has a test_convert). */
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
#include <math.h>

#include "accelkit/llm.h"
#include "llm/convert/convert.h"
#include "llm/gguf/gguf_write.h"
#include "llm/hf/hf.h"
#include "llm/hf/safetensors.h"
#include "llm/model/model_files.h"
#include "llm/tokenizer/tokenizer.h"

/* ---- folders ----------------------------------------------------------------------------- */

static void make_dir(char *dir) {
    strcpy(dir, "/tmp/ak_test_convert_XXXXXX");
    assert_non_null(mkdtemp(dir));
}

static void remove_dir(const char *dir) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

static void join(char *out, size_t cap, const char *dir, const char *name) {
    snprintf(out, cap, "%s/%s", dir, name);
}

static void write_text(const char *dir, const char *name, const char *text) {
    char path[512];
    join(path, sizeof path, dir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static int exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* ---- a model folder ---------------------------------------------------------------------- */

typedef struct model_opts {
    const char *arch;   /* "llama" or "qwen2" */
    int dim, layers, heads, kv, ffn, vocab;
    int tied, bias;
    ak__st_dtype dtype; /* of the matrices (vectors are F32) */
    const char *rope_scaling; /* JSON or NULL */
} model_opts;

static model_opts default_opts(void) {
    return (model_opts){"llama", 64, 2, 4, 2, 96, 300, 0, 0, AK_ST_F32, NULL};
}

static uint64_t g_rng;

static float rnd(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (float)((double)(g_rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

typedef struct hf_tensor {
    char name[96];
    uint64_t rows, cols; /* cols = 0: a vector of `rows` */
    ak__st_dtype dtype;
} hf_tensor;

static size_t list_tensors(const model_opts *o, hf_tensor *t) {
    size_t n = 0;
    uint64_t hd = (uint64_t)(o->dim / o->heads), q = hd * (uint64_t)o->heads, kv = hd * (uint64_t)o->kv;
    ak__st_dtype m = o->dtype;
    t[n++] = (hf_tensor){"model.embed_tokens.weight", (uint64_t)o->vocab, (uint64_t)o->dim, m};
    for (int i = 0; i < o->layers; i++) {
        const struct {
            const char *name;
            uint64_t rows, cols;
        } parts[] = {{"input_layernorm.weight", (uint64_t)o->dim, 0},
                     {"self_attn.q_proj.weight", q, (uint64_t)o->dim},
                     {"self_attn.k_proj.weight", kv, (uint64_t)o->dim},
                     {"self_attn.v_proj.weight", kv, (uint64_t)o->dim},
                     {"self_attn.o_proj.weight", (uint64_t)o->dim, q},
                     {"post_attention_layernorm.weight", (uint64_t)o->dim, 0},
                     {"mlp.gate_proj.weight", (uint64_t)o->ffn, (uint64_t)o->dim},
                     {"mlp.up_proj.weight", (uint64_t)o->ffn, (uint64_t)o->dim},
                     {"mlp.down_proj.weight", (uint64_t)o->dim, (uint64_t)o->ffn},
                     {"self_attn.q_proj.bias", q, 0},
                     {"self_attn.k_proj.bias", kv, 0},
                     {"self_attn.v_proj.bias", kv, 0}};
        size_t np = o->bias ? 12 : 9;
        for (size_t k = 0; k < np; k++) {
            hf_tensor *x = &t[n++];
            snprintf(x->name, sizeof x->name, "model.layers.%d.%s", i, parts[k].name);
            x->rows = parts[k].rows;
            x->cols = parts[k].cols;
            x->dtype = parts[k].cols ? m : AK_ST_F32;
        }
    }
    t[n++] = (hf_tensor){"model.norm.weight", (uint64_t)o->dim, 0, AK_ST_F32};
    if (!o->tied) t[n++] = (hf_tensor){"lm_head.weight", (uint64_t)o->vocab, (uint64_t)o->dim, m};
    return n;
}

static uint64_t tensor_bytes(const hf_tensor *t) {
    return t->rows * (t->cols ? t->cols : 1) * ak__st_dtype_size(t->dtype);
}

/* model.safetensors with deterministic values, header made with cJSON. */
static void write_weights(const char *dir, const model_opts *o) {
    hf_tensor t[512];
    size_t n = list_tensors(o, t);
    cJSON *h = cJSON_CreateObject();
    uint64_t off = 0;
    for (size_t i = 0; i < n; i++) {
        cJSON *e = cJSON_AddObjectToObject(h, t[i].name);
        cJSON_AddStringToObject(e, "dtype", ak__st_dtype_name(t[i].dtype));
        cJSON *shape = cJSON_AddArrayToObject(e, "shape");
        cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t[i].rows));
        if (t[i].cols) cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t[i].cols));
        cJSON *offs = cJSON_AddArrayToObject(e, "data_offsets");
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)off));
        off += tensor_bytes(&t[i]);
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)off));
    }
    char *text = cJSON_PrintUnformatted(h);
    cJSON_Delete(h);
    char path[512];
    join(path, sizeof path, dir, "model.safetensors");
    FILE *f = fopen(path, "wb");
    uint64_t len = strlen(text);
    unsigned char le[8];
    for (int i = 0; i < 8; i++) le[i] = (unsigned char)(len >> (8 * i));
    fwrite(le, 1, 8, f);
    fwrite(text, 1, len, f);
    free(text);
    g_rng = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < n; i++) {
        uint64_t count = tensor_bytes(&t[i]) / ak__st_dtype_size(t[i].dtype);
        for (uint64_t k = 0; k < count; k++) {
            float v = rnd();
            uint32_t bits;
            memcpy(&bits, &v, 4);
            if (t[i].dtype == AK_ST_F32) fwrite(&v, 4, 1, f);
            else { /* bf16: the top half */
                uint16_t b = (uint16_t)(bits >> 16);
                fwrite(&b, 2, 1, f);
            }
        }
    }
    fclose(f);
}

/* A byte-level BPE vocabulary: the 256 byte symbols, merges of letter pairs, one special. */
static void write_tokenizer(const char *dir, int vocab) {
    cJSON *root = cJSON_CreateObject(), *model = cJSON_AddObjectToObject(root, "model");
    cJSON_AddStringToObject(model, "type", "BPE");
    cJSON *v = cJSON_AddObjectToObject(model, "vocab"), *merges = cJSON_AddArrayToObject(model, "merges");
    int id = 0;
    for (int b = 0; b < 256; b++, id++) {
        uint32_t cp = ak__bpe_byte_to_cp((uint8_t)b);
        char s[3] = {0};
        if (cp < 0x80) s[0] = (char)cp;
        else s[0] = (char)(0xC0 | (cp >> 6)), s[1] = (char)(0x80 | (cp & 0x3F));
        cJSON_AddNumberToObject(v, s, id);
    }
    for (int k = 0; id < vocab - 1; k++, id++) {
        char l[2] = {(char)('a' + k % 26), 0}, r[2] = {(char)('a' + (k / 26) % 26), 0}, m[4], tok[3];
        snprintf(m, sizeof m, "%s %s", l, r);
        snprintf(tok, sizeof tok, "%s%s", l, r);
        cJSON_AddItemToArray(merges, cJSON_CreateString(m));
        cJSON_AddNumberToObject(v, tok, id);
    }
    cJSON_AddNumberToObject(v, "<|endoftext|>", id);
    cJSON *added = cJSON_CreateObject();
    cJSON_AddNumberToObject(added, "id", id);
    cJSON_AddStringToObject(added, "content", "<|endoftext|>");
    cJSON_AddTrueToObject(added, "special");
    cJSON_AddItemToArray(cJSON_AddArrayToObject(root, "added_tokens"), added);
    cJSON_AddItemToObject(root, "pre_tokenizer", cJSON_Parse("{\"type\":\"ByteLevel\"}"));
    char *text = cJSON_PrintUnformatted(root);
    write_text(dir, "tokenizer.json", text);
    free(text);
    cJSON_Delete(root);
    write_text(dir, "tokenizer_config.json", "{\"bos_token\":\"<|endoftext|>\",\"eos_token\":"
               "\"<|endoftext|>\",\"chat_template\":\"{{ messages }}\"}");
}

static void write_model(const char *dir, const model_opts *o) {
    char cfg[2048];
    snprintf(cfg, sizeof cfg,
             "{\"architectures\":[\"%s\"],\"hidden_size\":%d,\"intermediate_size\":%d,"
             "\"num_hidden_layers\":%d,\"num_attention_heads\":%d,\"num_key_value_heads\":%d,"
             "\"vocab_size\":%d,\"rms_norm_eps\":1e-05,\"rope_theta\":500000.0,"
             "\"max_position_embeddings\":4096,\"tie_word_embeddings\":%s,\"rope_scaling\":%s}",
             strcmp(o->arch, "qwen2") == 0 ? "Qwen2ForCausalLM" : "LlamaForCausalLM", o->dim,
             o->ffn, o->layers, o->heads, o->kv, o->vocab, o->tied ? "true" : "false",
             o->rope_scaling ? o->rope_scaling : "null");
    write_text(dir, "config.json", cfg);
    write_weights(dir, o);
    write_tokenizer(dir, o->vocab);
}

/* ---- comparisons ------------------------------------------------------------------------- */

static float to_f32(ak_wtype t, const void *p, uint64_t i) {
    if (t == AK_WTYPE_F32) {
        float f;
        memcpy(&f, (const char *)p + 4 * i, 4);
        return f;
    }
    uint16_t h;
    memcpy(&h, (const char *)p + 2 * i, 2);
    if (t == AK_WTYPE_F16) { /* IEEE half: sign, 5-bit exponent, 10-bit mantissa */
        int e = (h >> 10) & 31, m = h & 1023;
        float v = e == 0 ? ldexpf((float)m, -24) : e == 31 ? INFINITY : ldexpf((float)(m | 1024), e - 25);
        return h & 0x8000 ? -v : v;
    }
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    assert_int_equal(t, AK_WTYPE_BF16);
    return f;
}

/* Every tensor of folder a is in folder b with the same shape: bit for bit when tol < 0,
 * else |x − y| ≤ tol·(max |x| of its 32-block) + 1e-6. Vectors are always exact. */
static void compare_folders(const char *a, const char *b, double tol) {
    ak__hf *ha, *hb;
    assert_int_equal(ak__hf_open(a, &ha), AK_OK);
    assert_int_equal(ak__hf_open(b, &hb), AK_OK);
    assert_int_equal(ak__hf_tensor_count(ha), ak__hf_tensor_count(hb));
    for (size_t i = 0; i < ak__hf_tensor_count(ha); i++) {
        const char *name = ak__hf_tensor_name(ha, i);
        ak__tensor_view x, y;
        assert_int_equal(ak__hf_tensor(ha, name, &x), AK_OK);
        assert_int_equal(ak__hf_tensor(hb, name, &y), AK_OK);
        assert_int_equal(x.n_dims, y.n_dims);
        assert_memory_equal(x.dims, y.dims, sizeof x.dims);
        if (x.type != y.type && (tol < 0 || x.n_dims == 1)) {
            /* a GGUF keeps vectors in f32: the values must still be the same */
            for (uint64_t k = 0; k < x.dims[0] * x.dims[1]; k++)
                assert_true(to_f32(x.type, x.data, k) == to_f32(y.type, y.data, k));
            continue;
        }
        if (tol < 0 || x.n_dims == 1) {
            assert_int_equal(x.type, y.type);
            assert_int_equal(x.bytes, y.bytes);
            if (memcmp(x.data, y.data, x.bytes) != 0) print_message("tensor %s differs\n", name);
            assert_memory_equal(x.data, y.data, x.bytes);
            continue;
        }
        uint64_t n = x.dims[0] * x.dims[1];
        for (uint64_t k = 0; k < n; k += 32) {
            double amax = 0;
            for (uint64_t j = k; j < k + 32 && j < n; j++) amax = fmax(amax, fabs(to_f32(x.type, x.data, j)));
            for (uint64_t j = k; j < k + 32 && j < n; j++) {
                double err = fabs(to_f32(x.type, x.data, j) - to_f32(y.type, y.data, j));
                if (!(err <= tol * amax + 1e-6)) print_message("%s[%llu]: error %g > %g\n", name, (unsigned long long)j, err, tol * amax);
                assert_true(err <= tol * amax + 1e-6);
            }
        }
    }
    ak__llm_hparams pa, pb;
    assert_int_equal(ak__hf_hparams(ha, &pa), AK_OK);
    assert_int_equal(ak__hf_hparams(hb, &pb), AK_OK);
    assert_memory_equal(&pa, &pb, sizeof pa);
    ak__hf_close(ha);
    ak__hf_close(hb);
}

static void compare_tokenizers(const char *a, const char *b) {
    ak_tokenizer *ta, *tb;
    assert_int_equal(ak__hf_tokenizer_dir(a, 0, &ta), AK_OK);
    assert_int_equal(ak__hf_tokenizer_dir(b, 0, &tb), AK_OK);
    const char *text = "abba cab, the dog's 123 <|endoftext|> zz\n";
    int32_t x[128], y[128];
    size_t nx, ny;
    unsigned fl = AK_TOK_PARSE_SPECIAL | AK_TOK_ADD_SPECIAL;
    assert_int_equal(ak_tokenizer_encode(ta, text, strlen(text), fl, x, 128, &nx), AK_OK);
    assert_int_equal(ak_tokenizer_encode(tb, text, strlen(text), fl, y, 128, &ny), AK_OK);
    assert_int_equal(nx, ny);
    assert_memory_equal(x, y, nx * sizeof *x);
    ak_tokenizer_info ia, ib;
    ak_tokenizer_get_info(ta, &ia);
    ak_tokenizer_get_info(tb, &ib);
    assert_memory_equal(&ia, &ib, sizeof ia);
    ak_tokenizer_free(ta);
    ak_tokenizer_free(tb);
}

static uint32_t gguf_u32(const ak_gguf *g, const char *key) {
    uint64_t v = 0;
    assert_int_equal(ak_gguf_get_uint(g, key, &v), AK_OK);
    return (uint32_t)v;
}

static uint32_t gguf_type(const ak_gguf *g, const char *name) {
    ak_gguf_tensor t;
    assert_int_equal(ak_gguf_tensor_by_name(g, name, &t), AK_OK);
    return t.type;
}

/* ---- tests ------------------------------------------------------------------------------- */

static void test_permutation(void **state) {
    (void)state;
    /* hd = 4: GGUF rows are HF rows 0, 2, 1, 3 of each head */
    const uint64_t want[8] = {0, 2, 1, 3, 4, 6, 5, 7};
    for (uint64_t r = 0; r < 8; r++) assert_int_equal(ak__cv_src_row(AK_CV_ROWS_TO_PAIRS, r, 4), want[r]);
    for (uint32_t hd = 2; hd <= 256; hd += 2)
        for (uint64_t r = 0; r < 3 * (uint64_t)hd; r++) {
            uint64_t pairs = ak__cv_src_row(AK_CV_ROWS_TO_PAIRS, r, hd);
            /* reshape(n, 2, hd/2).swapaxes(1, 2): new (h, i, j) = old (h, j, i) */
            uint64_t h = r / hd, i = (r % hd) / 2, j = r % 2;
            assert_int_equal(pairs, h * hd + j * (hd / 2) + i);
            assert_int_equal(ak__cv_src_row(AK_CV_ROWS_TO_HALVES, pairs, hd), r);
            assert_int_equal(ak__cv_src_row(AK_CV_ROWS_SAME, r, hd), r);
        }
}

/* HF → GGUF (type) → HF; checks the GGUF on the way. */
static void roundtrip(const model_opts *o, const char *type, const char *back_type, double tol) {
    char a[64], b[64], gguf[128];
    make_dir(a);
    make_dir(b);
    snprintf(gguf, sizeof gguf, "%s/model.gguf", b);
    strcat(b, "/hf");
    write_model(a, o);
    assert_int_equal(ak_llm_convert(a, gguf, type), AK_OK);
    char tmp[160];
    snprintf(tmp, sizeof tmp, "%s.tmp", gguf);
    assert_false(exists(tmp));

    ak_gguf *g;
    assert_int_equal(ak_gguf_open(gguf, &g), AK_OK);
    const char *arch = strcmp(o->arch, "qwen2") == 0 ? "qwen2" : "llama";
    const char *s;
    size_t len;
    assert_int_equal(ak_gguf_get_string(g, "general.architecture", &s, &len), AK_OK);
    assert_int_equal(len, strlen(arch));
    assert_memory_equal(s, arch, len);
    char key[96];
    snprintf(key, sizeof key, "%s.block_count", arch);
    assert_int_equal(gguf_u32(g, key), (uint32_t)o->layers);
    snprintf(key, sizeof key, "%s.attention.head_count_kv", arch);
    assert_int_equal(gguf_u32(g, key), (uint32_t)o->kv);
    snprintf(key, sizeof key, "%s.rope.dimension_count", arch);
    assert_int_equal(gguf_u32(g, key), (uint32_t)(o->dim / o->heads));
    assert_int_equal(gguf_u32(g, "general.alignment"), 32);
    assert_int_equal(gguf_type(g, "blk.1.attn_norm.weight"), AK_GGML_F32);
    assert_int_equal(gguf_type(g, "output_norm.weight"), AK_GGML_F32);
    ak_gguf_tensor t;
    assert_int_equal(ak_gguf_tensor_by_name(g, "output.weight", &t), o->tied ? AK_ERR_INVALID_ARG : AK_OK);
    assert_int_equal(ak_gguf_tensor_by_name(g, "blk.0.attn_q.bias", &t), o->bias ? AK_OK : AK_ERR_INVALID_ARG);
    /* the tokenizer reads back from the GGUF as it did from tokenizer.json */
    ak_tokenizer *tok;
    assert_int_equal(ak_tokenizer_from_gguf(g, &tok), AK_OK);
    ak_tokenizer_info info;
    ak_tokenizer_get_info(tok, &info);
    assert_int_equal(info.n_vocab, o->vocab);
    assert_int_equal(info.eos, o->vocab - 1);
    ak_tokenizer_free(tok);
    assert_int_equal(ak_gguf_get_string(g, "tokenizer.chat_template", &s, &len), AK_OK);
    ak_gguf_close(g);

    assert_int_equal(ak_llm_convert(gguf, b, back_type), AK_OK);
    compare_folders(a, b, tol);
    compare_tokenizers(a, b);
    ak__hf *h;
    const char *tpl;
    assert_int_equal(ak__hf_open(b, &h), AK_OK);
    assert_int_equal(ak__hf_chat_template(h, &tpl), AK_OK);
    assert_string_equal(tpl, "{{ messages }}");
    ak__hf_close(h);
    remove_dir(a);
    b[strlen(b) - 3] = '\0';
    remove_dir(b);
}

/* q rows in the GGUF are the HF rows permuted (llama) or the same (qwen2). */
static void check_q_rows(const model_opts *o) {
    char a[64], gguf[128];
    make_dir(a);
    write_model(a, o);
    snprintf(gguf, sizeof gguf, "%s/m.gguf", a);
    assert_int_equal(ak_llm_convert(a, gguf, "f32"), AK_OK);
    ak__hf *h;
    ak_gguf *g;
    assert_int_equal(ak__hf_open(a, &h), AK_OK);
    assert_int_equal(ak_gguf_open(gguf, &g), AK_OK);
    const char *pairs[][2] = {{"model.layers.1.self_attn.q_proj.weight", "blk.1.attn_q.weight"},
                              {"model.layers.1.self_attn.k_proj.weight", "blk.1.attn_k.weight"},
                              {"model.layers.1.self_attn.v_proj.weight", "blk.1.attn_v.weight"}};
    int permuted = strcmp(o->arch, "qwen2") != 0;
    uint32_t hd = (uint32_t)(o->dim / o->heads);
    for (int p = 0; p < 3; p++) {
        ak__tensor_view v;
        ak_gguf_tensor t;
        assert_int_equal(ak__hf_tensor(h, pairs[p][0], &v), AK_OK);
        assert_int_equal(ak_gguf_tensor_by_name(g, pairs[p][1], &t), AK_OK);
        size_t row = (size_t)v.dims[0] * 4;
        for (uint64_t r = 0; r < v.dims[1]; r++) {
            uint64_t src = permuted && p < 2 ? ak__cv_src_row(AK_CV_ROWS_TO_PAIRS, r, hd) : r;
            assert_memory_equal((const char *)t.data + r * row, (const char *)v.data + src * row, row);
        }
    }
    ak_gguf_close(g);
    ak__hf_close(h);
    remove_dir(a);
}

static void test_roundtrip_f32(void **state) {
    (void)state;
    model_opts o = default_opts();
    roundtrip(&o, "f32", NULL, -1);
    check_q_rows(&o);
}

static void test_roundtrip_bf16(void **state) {
    (void)state;
    model_opts o = default_opts();
    o.dtype = AK_ST_BF16;
    roundtrip(&o, NULL, NULL, -1);          /* kept bf16 both ways: exact */
    roundtrip(&o, "f16", "bf16", 1.0 / 128); /* bf16 → f16 → bf16: f16 is finer here */
}

static void test_roundtrip_quantized(void **state) {
    (void)state;
    model_opts o = default_opts();
    /* q8_0: |error| ≤ d/2 with d = max/127 (+ the f16 rounding of d) */
    roundtrip(&o, "q8_0", NULL, 0.5 / 127 + 1.0 / 512);
    /* q4_0: d = max/−8, the far side can be off by a whole step */
    roundtrip(&o, "q4_0", "f32", 1.0 / 8 + 1.0 / 256);
    /* rows of 40 are not whole q4_0 blocks: those matrices fall back to f16 */
    o.dim = 40;
    o.heads = 2;
    o.kv = 2;
    o.ffn = 64;
    char a[64], gguf[128];
    make_dir(a);
    write_model(a, &o);
    snprintf(gguf, sizeof gguf, "%s/m.gguf", a);
    assert_int_equal(ak_llm_convert(a, gguf, "q4_0"), AK_OK);
    ak_gguf *g;
    assert_int_equal(ak_gguf_open(gguf, &g), AK_OK);
    assert_int_equal(gguf_type(g, "blk.0.attn_q.weight"), AK_GGML_F16);
    assert_int_equal(gguf_type(g, "blk.0.ffn_down.weight"), AK_GGML_Q4_0); /* rows of 64 */
    assert_int_equal(gguf_u32(g, "general.file_type"), 1);
    ak_gguf_close(g);
    remove_dir(a);
}

static void test_qwen2_bias_tied(void **state) {
    (void)state;
    model_opts o = default_opts();
    o.arch = "qwen2";
    o.bias = 1;
    o.tied = 1;
    roundtrip(&o, "f32", NULL, -1);
    check_q_rows(&o);
}

static void test_llama3_rope(void **state) {
    (void)state;
    model_opts o = default_opts();
    o.dim = 256; /* head_dim 64: several factors between 1 and 8 */
    o.heads = 4;
    o.kv = 4;
    o.layers = 1;
    o.ffn = 64;
    o.rope_scaling = "{\"rope_type\":\"llama3\",\"factor\":8.0,\"low_freq_factor\":1.0,"
                     "\"high_freq_factor\":4.0,\"original_max_position_embeddings\":8192}";
    char a[64], gguf[128];
    make_dir(a);
    write_model(a, &o);
    snprintf(gguf, sizeof gguf, "%s/m.gguf", a);
    assert_int_equal(ak_llm_convert(a, gguf, NULL), AK_OK);
    ak_gguf *g;
    ak_gguf_tensor t;
    assert_int_equal(ak_gguf_open(gguf, &g), AK_OK);
    assert_int_equal(ak_gguf_tensor_by_name(g, "rope_freqs.weight", &t), AK_OK);
    assert_int_equal(t.dims[0], 32);
    int mid = 0;
    for (int i = 0; i < 32; i++) { /* Llama 3.1's formula, in double */
        double freq = pow(500000.0, -2.0 * i / 64), wl = 2 * M_PI / freq, want;
        if (wl < 8192.0 / 4) want = 1;
        else if (wl > 8192.0) want = 8;
        else {
            double s = (8192.0 / wl - 1) / 3;
            want = 1 / ((1 - s) / 8 + s);
            mid++;
        }
        float got;
        memcpy(&got, (const char *)t.data + 4 * i, 4);
        assert_true(fabs(got - want) <= 1e-5 * want);
    }
    assert_true(mid >= 2);
    ak__llm_hparams hp;
    assert_int_equal(ak__gguf_hparams(g, &hp), AK_OK); /* the GGUF reader accepts it */
    ak_gguf_close(g);
    char b[160];
    snprintf(b, sizeof b, "%s/back", a);
    assert_int_equal(ak_llm_convert(gguf, b, NULL), AK_OK);
    compare_folders(a, b, -1); /* includes rope_scaling in the hyper-parameters */
    remove_dir(a);
}

static void test_convert_errors(void **state) {
    (void)state;
    char a[64], path[160], tmp[200];
    make_dir(a);
    model_opts o = default_opts();
    write_model(a, &o);
    snprintf(path, sizeof path, "%s/out.gguf", a);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    assert_int_equal(ak_llm_convert(a, path, "q5_k"), AK_ERR_INVALID_ARG);
    assert_int_equal(ak_llm_convert(NULL, path, NULL), AK_ERR_INVALID_ARG);
    assert_int_equal(ak_llm_convert("/nonexistent/model", path, NULL), AK_ERR_IO);
    assert_int_equal(ak_llm_convert(a, a, NULL), AK_ERR_INVALID_ARG);
    assert_int_equal(ak_llm_convert(a, "/nonexistent/dir/x.gguf", NULL), AK_ERR_IO);
    /* a GGUF becomes f32/f16/bf16 weights only */
    assert_int_equal(ak_llm_convert(a, path, "f32"), AK_OK);
    char back[160];
    snprintf(back, sizeof back, "%s/back", a);
    assert_int_equal(ak_llm_convert(path, back, "q8_0"), AK_ERR_INVALID_ARG);
    unlink(path);
    /* a matrix of the wrong shape: refused, and no file is left behind */
    o.ffn = 128;
    write_text(a, "config.json", "{\"architectures\":[\"LlamaForCausalLM\"],\"hidden_size\":64,"
               "\"intermediate_size\":128,\"num_hidden_layers\":2,\"num_attention_heads\":4,"
               "\"num_key_value_heads\":2,\"vocab_size\":300}");
    assert_int_equal(ak_llm_convert(a, path, NULL), AK_ERR_INVALID_MODEL);
    assert_non_null(strstr(ak_last_error(), "mlp.gate_proj"));
    assert_false(exists(path));
    assert_false(exists(tmp));
    /* a missing layer */
    write_text(a, "config.json", "{\"architectures\":[\"LlamaForCausalLM\"],\"hidden_size\":64,"
               "\"intermediate_size\":96,\"num_hidden_layers\":3,\"num_attention_heads\":4,"
               "\"num_key_value_heads\":2,\"vocab_size\":300}");
    assert_int_equal(ak_llm_convert(a, path, NULL), AK_ERR_INVALID_MODEL);
    assert_non_null(strstr(ak_last_error(), "model.layers.2."));
    /* no tokenizer */
    write_model(a, &o);
    snprintf(tmp, sizeof tmp, "%s/tokenizer.json", a);
    unlink(tmp);
    assert_int_equal(ak_llm_convert(a, path, NULL), AK_ERR_IO);
    /* not a GGUF */
    write_text(a, "junk.gguf", "GGUF but not really");
    snprintf(tmp, sizeof tmp, "%s/junk.gguf", a);
    assert_int_equal(ak_llm_convert(tmp, back, NULL), AK_ERR_INVALID_MODEL);
    assert_false(exists(back));
    remove_dir(a);
}

/* The streaming GGUF writer: every value type, string arrays, a custom alignment, data in
 * uneven pieces; read back by the validating reader. Misuse fails and leaves no file. */
static void test_gguf_writer(void **state) {
    (void)state;
    char dir[64], path[128], tmp[160];
    make_dir(dir);
    snprintf(path, sizeof path, "%s/w.gguf", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    ak__gguf_writer *w;
    assert_int_equal(ak__gguf_writer_open(path, 24, &w), AK_ERR_INVALID_ARG); /* not 2^k */
    assert_int_equal(ak__gguf_writer_open(path, 64, &w), AK_OK);
    const int16_t i16 = -300;
    const double f64 = -0.125;
    assert_int_equal(ak__gguf_kv_scalar(w, "t.i16", AK_GGUF_INT16, &i16), AK_OK);
    assert_int_equal(ak__gguf_kv_u32(w, "t.u32", 4000000000u), AK_OK);
    assert_int_equal(ak__gguf_kv_i32(w, "t.i32", -7), AK_OK);
    assert_int_equal(ak__gguf_kv_u64(w, "t.u64", UINT64_MAX), AK_OK);
    assert_int_equal(ak__gguf_kv_f32(w, "t.f32", 1.5f), AK_OK);
    assert_int_equal(ak__gguf_kv_scalar(w, "t.f64", AK_GGUF_FLOAT64, &f64), AK_OK);
    assert_int_equal(ak__gguf_kv_bool(w, "t.bool", 1), AK_OK);
    assert_int_equal(ak__gguf_kv_string(w, "t.str", "hello", 5), AK_OK);
    const char *names[3] = {"a", "", "ccc"};
    assert_int_equal(ak__gguf_kv_strings(w, "t.names", names, NULL, 3), AK_OK);
    const float fl[3] = {1, 2, 3};
    assert_int_equal(ak__gguf_kv_array(w, "t.floats", AK_GGUF_FLOAT32, fl, 3), AK_OK);
    assert_int_equal(ak__gguf_kv_u32(w, "t.u32", 1), AK_ERR_INVALID_ARG); /* twice */
    assert_int_equal(ak__gguf_kv_array(w, "t.x", AK_GGUF_STRING, fl, 1), AK_ERR_INVALID_ARG);
    const uint64_t d1[2] = {3, 2}, d2[1] = {64}, bad[1] = {33};
    assert_int_equal(ak__gguf_add_tensor(w, "a", 2, d1, AK_GGML_F32), AK_OK);
    assert_int_equal(ak__gguf_add_tensor(w, "q", 1, d2, AK_GGML_Q8_0), AK_OK);
    assert_int_equal(ak__gguf_add_tensor(w, "q", 1, d2, AK_GGML_F32), AK_ERR_INVALID_ARG);
    assert_int_equal(ak__gguf_add_tensor(w, "b", 1, bad, AK_GGML_Q4_0), AK_ERR_INVALID_ARG);
    uint64_t bytes;
    assert_int_equal(ak__gguf_tensor_bytes(w, 1, &bytes), AK_OK);
    assert_int_equal(bytes, 68);
    unsigned char data[24 + 68];
    for (size_t i = 0; i < sizeof data; i++) data[i] = (unsigned char)(i * 7);
    assert_int_equal(ak__gguf_write_data(w, data, 5), AK_OK);
    assert_int_equal(ak__gguf_write_data(w, data + 5, 40), AK_OK); /* across the two tensors */
    assert_int_equal(ak__gguf_kv_u32(w, "late", 1), AK_ERR_INVALID_ARG);
    assert_int_equal(ak__gguf_write_data(w, data + 45, sizeof data - 45), AK_OK);
    assert_int_equal(ak__gguf_write_data(w, data, 1), AK_ERR_INVALID_ARG); /* beyond */
    assert_int_equal(ak__gguf_writer_close(w), AK_OK);
    assert_false(exists(tmp));

    ak_gguf *g;
    assert_int_equal(ak_gguf_open(path, &g), AK_OK);
    uint64_t align, u;
    int64_t i;
    double d;
    int b;
    const char *s;
    size_t len;
    assert_int_equal(ak_gguf_alignment(g, &align), AK_OK);
    assert_int_equal(align, 64);
    assert_int_equal(ak_gguf_get_int(g, "t.i16", &i), AK_OK);
    assert_int_equal(i, -300);
    assert_int_equal(ak_gguf_get_uint(g, "t.u32", &u), AK_OK);
    assert_int_equal(u, 4000000000u);
    assert_int_equal(ak_gguf_get_int(g, "t.i32", &i), AK_OK);
    assert_int_equal(i, -7);
    assert_int_equal(ak_gguf_get_uint(g, "t.u64", &u), AK_OK);
    assert_true(u == UINT64_MAX);
    assert_int_equal(ak_gguf_get_float(g, "t.f32", &d), AK_OK);
    assert_true(d == 1.5);
    assert_int_equal(ak_gguf_get_float(g, "t.f64", &d), AK_OK);
    assert_true(d == -0.125);
    assert_int_equal(ak_gguf_get_bool(g, "t.bool", &b), AK_OK);
    assert_int_equal(b, 1);
    assert_int_equal(ak_gguf_get_string(g, "t.str", &s, &len), AK_OK);
    assert_int_equal(len, 5);
    assert_int_equal(ak_gguf_get_array_string(g, "t.names", 2, &s, &len), AK_OK);
    assert_int_equal(len, 3);
    assert_int_equal(ak_gguf_get_array_string(g, "t.names", 1, &s, &len), AK_OK);
    assert_int_equal(len, 0);
    assert_int_equal(ak_gguf_get_array_float(g, "t.floats", 2, &d), AK_OK);
    assert_true(d == 3.0);
    ak_gguf_tensor t;
    assert_int_equal(ak_gguf_tensor_by_name(g, "a", &t), AK_OK);
    assert_memory_equal(t.data, data, 24);
    assert_int_equal(ak_gguf_tensor_by_name(g, "q", &t), AK_OK);
    assert_int_equal(t.offset % 64, 0);
    assert_memory_equal(t.data, data + 24, 68);
    ak_gguf_close(g);

    /* incomplete data: close fails and removes the partial file */
    unlink(path);
    assert_int_equal(ak__gguf_writer_open(path, 0, &w), AK_OK);
    assert_int_equal(ak__gguf_add_tensor(w, "a", 2, d1, AK_GGML_F32), AK_OK);
    assert_int_equal(ak__gguf_write_data(w, data, 10), AK_OK);
    assert_int_equal(ak__gguf_writer_close(w), AK_ERR_INVALID_ARG);
    assert_false(exists(path));
    assert_false(exists(tmp));
    remove_dir(dir);
}

/* ---- against scripts/llm-make-model ------------------------------------------------------ */

/* The script's model with the gpt-2 vocabulary, which it converts with $AK_BIN's
 * `ak convert` on first use; any failure (no python3 or numpy, no npm package, the
 * conversion) fails the test with the script's own message above it. */
static void make_model(const char *args, const char *format, const char *out) {
    char cmd[12288];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s %s --format %s --vocab gpt2 --seed 5 "
             "--out %s >/dev/null", AK_SOURCE_DIR "/scripts/llm-make-model", args, format, out);
    int rc = system(cmd);
    if (rc != 0) print_message("scripts/llm-make-model failed (%d): %s\n", rc, cmd);
    assert_int_equal(rc, 0);
}

/* Our conversion of the script's HF folder equals the script's GGUF of the same seed. */
static void crosscheck(const char *args, const char *hf_extra, const char *hf_type, const char *type) {
    char dir[64], hf[128], theirs[128], ours[128], back[128];
    make_dir(dir);
    snprintf(hf, sizeof hf, "%s/hf", dir);
    snprintf(theirs, sizeof theirs, "%s/theirs.gguf", dir);
    snprintf(ours, sizeof ours, "%s/ours.gguf", dir);
    snprintf(back, sizeof back, "%s/back", dir);
    char full[512];
    snprintf(full, sizeof full, "%s %s --type %s", args, hf_extra, hf_type);
    make_model(full, "hf", hf);
    snprintf(full, sizeof full, "%s --type %s", args, type);
    make_model(full, "gguf", theirs);
    assert_int_equal(ak_llm_convert(hf, ours, type), AK_OK);
    ak_gguf *a, *b;
    assert_int_equal(ak_gguf_open(theirs, &a), AK_OK);
    assert_int_equal(ak_gguf_open(ours, &b), AK_OK);
    uint64_t na, nb;
    ak_gguf_tensor_count(a, &na);
    ak_gguf_tensor_count(b, &nb);
    assert_int_equal(na, nb);
    for (uint64_t i = 0; i < na; i++) {
        ak_gguf_tensor x, y;
        char name[128];
        ak_gguf_tensor_at(a, i, &x);
        snprintf(name, sizeof name, "%.*s", (int)x.name_len, x.name);
        assert_int_equal(ak_gguf_tensor_by_name(b, name, &y), AK_OK);
        assert_int_equal(x.type, y.type);
        assert_memory_equal(x.dims, y.dims, sizeof x.dims);
        assert_int_equal(x.size, y.size);
        if (strcmp(name, "rope_freqs.weight") == 0) { /* theirs in double, ours in float */
            for (uint64_t k = 0; k < x.dims[0]; k++) {
                float p, q;
                memcpy(&p, (const char *)x.data + 4 * k, 4);
                memcpy(&q, (const char *)y.data + 4 * k, 4);
                assert_true(fabsf(p - q) <= 1e-5f * p);
            }
            continue;
        }
        if (memcmp(x.data, y.data, x.size) != 0) print_message("%s differs (%s)\n", name, args);
        assert_memory_equal(x.data, y.data, x.size);
    }
    ak__llm_hparams pa, pb;
    assert_int_equal(ak__gguf_hparams(a, &pa), AK_OK);
    assert_int_equal(ak__gguf_hparams(b, &pb), AK_OK);
    assert_memory_equal(&pa, &pb, sizeof pa);
    ak_gguf_close(a);
    ak_gguf_close(b);
    /* and their GGUF back to a folder holds the HF weights again (f32: exactly) */
    assert_int_equal(ak_llm_convert(theirs, back, NULL), AK_OK);
    if (strcmp(type, hf_type) == 0) compare_folders(hf, back, -1);
    remove_dir(dir);
}

static void test_against_script(void **state) {
    (void)state;
    crosscheck("--dim 64 --layers 2 --heads 4 --kv-heads 2 --ffn 96", "", "f32", "f32");
    crosscheck("--arch qwen2 --dim 64 --layers 2 --heads 4 --kv-heads 2 --ffn 64 --tied",
               "--shards 3", "f32", "f32");
    crosscheck("--dim 256 --layers 1 --heads 4 --ffn 64 --rope-scaling llama3", "", "f16", "f16");
    crosscheck("--dim 64 --layers 1 --heads 2 --ffn 64 --rope-scaling linear:4", "", "f32", "q8_0");
    crosscheck("--dim 64 --layers 1 --heads 2 --ffn 64 --q4-grid", "", "f32", "q4_0");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_permutation),
        cmocka_unit_test(test_roundtrip_f32),
        cmocka_unit_test(test_roundtrip_bf16),
        cmocka_unit_test(test_roundtrip_quantized),
        cmocka_unit_test(test_qwen2_bias_tied),
        cmocka_unit_test(test_llama3_rope),
        cmocka_unit_test(test_convert_errors),
        cmocka_unit_test(test_gguf_writer),
        cmocka_unit_test(test_against_script),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
