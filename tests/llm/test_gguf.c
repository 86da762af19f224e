/* GGUF reader tests: a small valid file built here (every value type, tensors of the
 * engine's types, custom alignment) read back exactly; then hostile variants — truncated
 * at every byte, huge counts, bad offsets, bad types, duplicates, random corruption —
 * which must all fail with AK_ERR_INVALID_MODEL (or, for corruption, any status) and
 * never crash or allocate without bound (the sanitizer build checks that). Also the
 * tokenizer's own metadata checks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "accelkit/llm.h"
#include "gguf_writer.h"

/* ---- a valid file ---------------------------------------------------------------------- */

static const char *const k_names[] = {"a", "bb", "ccc"};

static void write_metadata(gw *w, uint32_t alignment) {
    unsigned char u8 = 200;
    gw_key(w, "t.u8", 0);
    gw_bytes(w, &u8, 1);
    gw_key(w, "t.i8", 1);
    gw_bytes(w, "\xfe", 1); /* -2 */
    gw_key(w, "t.u16", 2);
    gw_bytes(w, "\x34\x12", 2);
    gw_key(w, "t.i16", 3);
    gw_bytes(w, "\x00\x80", 2); /* -32768 */
    gw_kv_u32(w, "t.u32", 4000000000u);
    gw_key(w, "t.i32", 5);
    gw_u32(w, (uint32_t)-7);
    gw_kv_f32(w, "t.f32", 1.5f);
    gw_kv_bool(w, "t.bool", 1);
    gw_kv_string(w, "t.str", "hello");
    gw_key(w, "t.u64", 10);
    gw_u64(w, UINT64_MAX);
    gw_key(w, "t.i64", 11);
    gw_u64(w, (uint64_t)INT64_MIN);
    double d = -0.25;
    uint64_t bits;
    memcpy(&bits, &d, 8);
    gw_key(w, "t.f64", 12);
    gw_u64(w, bits);
    gw_kv_strings(w, "t.names", k_names, NULL, 3);
    const int32_t ints[3] = {-1, 0, 7};
    gw_kv_i32s(w, "t.ints", ints, 3);
    const float fl[2] = {0.5f, -2.0f};
    gw_kv_f32s(w, "t.floats", fl, 2);
    gw_kv_u32(w, "general.alignment", alignment);
}

/* f32 [3,2], f16 [4], bf16 [2,2], q8_0 [32,2], q4_0 [64] — each aligned */
typedef struct tinfo {
    const char *name;
    uint32_t n_dims, type;
    uint64_t dims[2], bytes;
} tinfo;

static const tinfo k_tensors[] = {
    {"w.f32", 2, AK_GGML_F32, {3, 2}, 24},     {"w.f16", 1, AK_GGML_F16, {4, 1}, 8},
    {"w.bf16", 2, AK_GGML_BF16, {2, 2}, 8},    {"w.q8_0", 2, AK_GGML_Q8_0, {32, 2}, 68},
    {"w.q4_0", 1, AK_GGML_Q4_0, {64, 1}, 36},
};
#define N_TENSORS (sizeof k_tensors / sizeof k_tensors[0])

static uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

static void build_valid(gw *w, uint32_t alignment) {
    gw_begin(w, N_TENSORS);
    write_metadata(w, alignment);
    uint64_t off = 0;
    for (size_t i = 0; i < N_TENSORS; i++) {
        gw_tensor(w, k_tensors[i].name, k_tensors[i].n_dims, k_tensors[i].dims, k_tensors[i].type, off);
        off = align_up(off + k_tensors[i].bytes, alignment);
    }
    gw_pad(w, alignment);
    for (size_t i = 0; i < N_TENSORS; i++) {
        unsigned char fill[128];
        memset(fill, (int)(0x10 + i), sizeof fill);
        gw_bytes(w, fill, (size_t)k_tensors[i].bytes);
        if (i + 1 < N_TENSORS) gw_pad(w, alignment);
    }
}

static void test_valid_file(void **state) {
    (void)state;
    gw w;
    build_valid(&w, 64);
    ak_gguf *g;
    assert_int_equal(ak_gguf_open_memory(w.v, w.n, &g), AK_OK);
    uint64_t u, a;
    int64_t i;
    double d;
    int b;
    const char *s;
    size_t n;
    assert_int_equal(ak_gguf_alignment(g, &a), AK_OK);
    assert_int_equal(a, 64);
    assert_int_equal(ak_gguf_get_uint(g, "t.u8", &u), AK_OK);
    assert_int_equal(u, 200);
    assert_int_equal(ak_gguf_get_int(g, "t.i8", &i), AK_OK);
    assert_int_equal(i, -2);
    assert_int_equal(ak_gguf_get_int(g, "t.u16", &i), AK_OK);
    assert_int_equal(i, 0x1234);
    assert_int_equal(ak_gguf_get_int(g, "t.i16", &i), AK_OK);
    assert_int_equal(i, -32768);
    assert_int_equal(ak_gguf_get_uint(g, "t.u32", &u), AK_OK);
    assert_int_equal(u, 4000000000u);
    assert_int_equal(ak_gguf_get_int(g, "t.i32", &i), AK_OK);
    assert_int_equal(i, -7);
    assert_int_equal(ak_gguf_get_uint(g, "t.i32", &u), AK_ERR_INVALID_ARG); /* negative */
    assert_int_equal(ak_gguf_get_float(g, "t.f32", &d), AK_OK);
    assert_true(d == 1.5);
    assert_int_equal(ak_gguf_get_bool(g, "t.bool", &b), AK_OK);
    assert_int_equal(b, 1);
    assert_int_equal(ak_gguf_get_string(g, "t.str", &s, &n), AK_OK);
    assert_int_equal(n, 5);
    assert_memory_equal(s, "hello", 5);
    assert_int_equal(ak_gguf_get_uint(g, "t.u64", &u), AK_OK);
    assert_true(u == UINT64_MAX);
    assert_int_equal(ak_gguf_get_int(g, "t.u64", &i), AK_ERR_INVALID_ARG); /* does not fit */
    assert_int_equal(ak_gguf_get_int(g, "t.i64", &i), AK_OK);
    assert_true(i == INT64_MIN);
    assert_int_equal(ak_gguf_get_float(g, "t.f64", &d), AK_OK);
    assert_true(d == -0.25);
    assert_int_equal(ak_gguf_get_string(g, "t.u8", &s, &n), AK_ERR_INVALID_ARG); /* wrong type */
    assert_int_equal(ak_gguf_get_int(g, "nope", &i), AK_ERR_INVALID_ARG);
    ak_gguf_type ty;
    assert_int_equal(ak_gguf_key_type(g, "nope", &ty), AK_OK);
    assert_int_equal(ty, AK_GGUF_NONE);
    /* arrays */
    assert_int_equal(ak_gguf_get_array(g, "t.names", &ty, &u), AK_OK);
    assert_int_equal(ty, AK_GGUF_STRING);
    assert_int_equal(u, 3);
    assert_int_equal(ak_gguf_get_array_string(g, "t.names", 2, &s, &n), AK_OK);
    assert_int_equal(n, 3);
    assert_memory_equal(s, "ccc", 3);
    assert_int_equal(ak_gguf_get_array_string(g, "t.names", 3, &s, &n), AK_ERR_INVALID_ARG);
    assert_int_equal(ak_gguf_get_array_int(g, "t.ints", 0, &i), AK_OK);
    assert_int_equal(i, -1);
    assert_int_equal(ak_gguf_get_array_int(g, "t.ints", 2, &i), AK_OK);
    assert_int_equal(i, 7);
    assert_int_equal(ak_gguf_get_array_float(g, "t.floats", 1, &d), AK_OK);
    assert_true(d == -2.0);
    assert_int_equal(ak_gguf_get_array_float(g, "t.ints", 1, &d), AK_ERR_INVALID_ARG);
    /* tensors */
    assert_int_equal(ak_gguf_tensor_count(g, &u), AK_OK);
    assert_int_equal(u, N_TENSORS);
    for (size_t k = 0; k < N_TENSORS; k++) {
        ak_gguf_tensor t;
        assert_int_equal(ak_gguf_tensor_by_name(g, k_tensors[k].name, &t), AK_OK);
        assert_int_equal(t.type, k_tensors[k].type);
        assert_int_equal(t.size, k_tensors[k].bytes);
        assert_int_equal(t.dims[0], k_tensors[k].dims[0]);
        assert_int_equal(t.offset % 64, 0);
        assert_ptr_equal(t.data, w.v + t.offset);
        assert_int_equal(((const unsigned char *)t.data)[0], 0x10 + k);
        assert_int_equal(((const unsigned char *)t.data)[t.size - 1], 0x10 + k);
    }
    ak_gguf_tensor t;
    assert_int_equal(ak_gguf_tensor_by_name(g, "w.none", &t), AK_ERR_INVALID_ARG);
    ak_gguf_close(g);
    free(w.v);
}

/* ---- hostile input --------------------------------------------------------------------- */

static void expect_invalid(const gw *w) {
    ak_gguf *g = (ak_gguf *)1;
    assert_int_equal(ak_gguf_open_memory(w->v, w->n, &g), AK_ERR_INVALID_MODEL);
    assert_null(g);
    assert_non_null(ak_last_error());
}

static void test_truncated_everywhere(void **state) {
    (void)state;
    gw w;
    build_valid(&w, 32);
    for (size_t n = 1; n < w.n; n++) {
        ak_gguf *g;
        assert_int_equal(ak_gguf_open_memory(w.v, n, &g), AK_ERR_INVALID_MODEL);
    }
    ak_gguf *g;
    assert_int_equal(ak_gguf_open_memory(w.v, 0, &g), AK_ERR_INVALID_MODEL);
    assert_int_equal(ak_gguf_open_memory(w.v, w.n, &g), AK_OK);
    ak_gguf_close(g);
    free(w.v);
}

static void patch_u64(gw *w, size_t at, uint64_t v) {
    for (int i = 0; i < 8; i++) w->v[at + (size_t)i] = (unsigned char)(v >> (8 * i));
}

static void test_huge_counts(void **state) {
    (void)state;
    gw w;
    gw_begin(&w, 0);
    gw_kv_string(&w, "k", "v");
    patch_u64(&w, 16, UINT64_MAX); /* kv count */
    expect_invalid(&w);
    patch_u64(&w, 16, 1);
    patch_u64(&w, 8, (uint64_t)1 << 40); /* tensor count */
    expect_invalid(&w);
    free(w.v);

    gw_begin(&w, 0); /* string length far past the end */
    gw_key(&w, "k", 8);
    gw_u64(&w, UINT64_MAX - 3);
    gw_bytes(&w, "abc", 3);
    expect_invalid(&w);
    free(w.v);

    gw_begin(&w, 0); /* array counts that would overflow count * size */
    gw_array_header(&w, "k", 11, UINT64_MAX / 4);
    gw_u64(&w, 1);
    expect_invalid(&w);
    free(w.v);
    gw_begin(&w, 0);
    gw_array_header(&w, "k", 8, (uint64_t)1 << 60);
    gw_str(&w, "x", 1);
    expect_invalid(&w);
    free(w.v);
}

static void test_bad_structure(void **state) {
    (void)state;
    gw w;
    gw_begin(&w, 0); /* unknown value type */
    gw_key(&w, "k", 13);
    gw_u32(&w, 0);
    expect_invalid(&w);
    free(w.v);
    gw_begin(&w, 0); /* nested array */
    gw_array_header(&w, "k", 9, 1);
    gw_u32(&w, 4);
    gw_u64(&w, 0);
    expect_invalid(&w);
    free(w.v);
    gw_begin(&w, 0); /* duplicate key */
    gw_kv_u32(&w, "k", 1);
    gw_kv_u32(&w, "k", 2);
    expect_invalid(&w);
    free(w.v);
    const uint32_t bad_align[] = {0, 3, 48};
    for (int i = 0; i < 3; i++) {
        gw_begin(&w, 0);
        gw_kv_u32(&w, "general.alignment", bad_align[i]);
        expect_invalid(&w);
        free(w.v);
    }
    gw_begin(&w, 0); /* alignment of the wrong type */
    gw_kv_string(&w, "general.alignment", "32");
    expect_invalid(&w);
    free(w.v);
    gw_begin(&w, 0); /* bad magic, old and big-endian versions */
    gw_kv_u32(&w, "k", 1);
    w.v[0] = 'X';
    expect_invalid(&w);
    w.v[0] = 'G';
    w.v[4] = 1;
    expect_invalid(&w);
    w.v[4] = 0;
    w.v[7] = 3;
    expect_invalid(&w);
    free(w.v);
}

/* One tensor described by the arguments, followed by `data` bytes of data. */
static void one_tensor(gw *w, const char *name, uint32_t n_dims, const uint64_t *dims, uint32_t type,
                       uint64_t offset, size_t data) {
    gw_begin(w, 1);
    gw_tensor(w, name, n_dims, dims, type, offset);
    gw_pad(w, 32);
    for (size_t i = 0; i < data; i++) gw_bytes(w, "\0", 1);
}

static void test_bad_tensors(void **state) {
    (void)state;
    gw w;
    uint64_t dims[5] = {4, 4, 1, 1, 1};
    one_tensor(&w, "t", 2, dims, AK_GGML_F32, 0, 64);
    ak_gguf *g;
    assert_int_equal(ak_gguf_open_memory(w.v, w.n, &g), AK_OK); /* the control case */
    ak_gguf_close(g);
    free(w.v);
    one_tensor(&w, "t", 2, dims, AK_GGML_F32, 0, 63); /* data one byte short */
    expect_invalid(&w);
    free(w.v);
    one_tensor(&w, "t", 2, dims, AK_GGML_F32, 32, 64); /* offset pushes it past the end */
    expect_invalid(&w);
    free(w.v);
    one_tensor(&w, "t", 2, dims, AK_GGML_F32, 4, 128); /* misaligned */
    expect_invalid(&w);
    free(w.v);
    one_tensor(&w, "t", 2, dims, AK_GGML_F32, UINT64_MAX - 31, 64); /* offset + size wraps */
    expect_invalid(&w);
    free(w.v);
    one_tensor(&w, "t", 0, dims, AK_GGML_F32, 0, 64); /* no dims */
    expect_invalid(&w);
    free(w.v);
    one_tensor(&w, "t", 5, dims, AK_GGML_F32, 0, 64); /* too many dims */
    expect_invalid(&w);
    free(w.v);
    one_tensor(&w, "t", 2, dims, 4, 0, 64); /* a removed ggml type id */
    expect_invalid(&w);
    free(w.v);
    one_tensor(&w, "t", 2, dims, AK_GGML_Q8_0, 0, 64); /* row of 4 is not a block of 32 */
    expect_invalid(&w);
    free(w.v);
    uint64_t huge[4] = {1ull << 32, 1ull << 32, 1ull << 32, 1}; /* element count overflows */
    one_tensor(&w, "t", 3, huge, AK_GGML_F32, 0, 64);
    expect_invalid(&w);
    free(w.v);
    uint64_t big[2] = {1ull << 62, 1}; /* the byte size overflows (the count does not) */
    one_tensor(&w, "t", 2, big, AK_GGML_F32, 0, 64);
    expect_invalid(&w);
    free(w.v);
    uint64_t empty[1] = {0}; /* zero bytes, but its data section starts past the end */
    gw_begin(&w, 1);
    gw_tensor(&w, "t", 1, empty, AK_GGML_F32, 0);
    if (w.n % 32 == 0) gw_bytes(&w, "x", 1); /* make sure the padding is missing */
    expect_invalid(&w);
    free(w.v);
    gw_begin(&w, 2); /* duplicate tensor names */
    gw_tensor(&w, "t", 1, dims, AK_GGML_F32, 0);
    gw_tensor(&w, "t", 1, dims, AK_GGML_F32, 32);
    gw_pad(&w, 32);
    for (int i = 0; i < 64; i++) gw_bytes(&w, "\0", 1);
    expect_invalid(&w);
    free(w.v);
}

/* Random byte changes: any status is fine, a crash or a leak is not. */
static void test_random_corruption(void **state) {
    (void)state;
    gw w;
    build_valid(&w, 32);
    unsigned char *copy = malloc(w.n);
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (int round = 0; round < 3000; round++) {
        memcpy(copy, w.v, w.n);
        for (int k = 0; k < 1 + round % 4; k++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            copy[x % w.n] = (unsigned char)(x >> 32);
        }
        ak_gguf *g;
        if (ak_gguf_open_memory(copy, w.n, &g) == AK_OK) {
            uint64_t nt;
            ak_gguf_tensor_count(g, &nt);
            for (uint64_t i = 0; i < nt; i++) {
                ak_gguf_tensor t;
                assert_int_equal(ak_gguf_tensor_at(g, i, &t), AK_OK);
                assert_true(t.offset + t.size <= w.n);
            }
            ak_gguf_close(g);
        }
    }
    free(copy);
    free(w.v);
}

/* ---- tokenizer metadata ---------------------------------------------------------------- */

static const char *const k_spm_tokens[] = {"<unk>", "<s>", "</s>", "\xe2\x96\x81", "a", "b",
                                           "\xe2\x96\x81" "a", "ab", "<|user|>"};
static const float k_spm_scores[] = {0, 0, 0, -1, -2, -3, -0.5f, -0.25f, 0};
static const int32_t k_spm_types[] = {2, 3, 3, 1, 1, 1, 1, 1, 4};
#define N_SPM 9

static void build_spm(gw *w, const int32_t *types) {
    gw_begin(w, 0);
    gw_kv_string(w, "tokenizer.ggml.model", "llama");
    gw_kv_strings(w, "tokenizer.ggml.tokens", k_spm_tokens, NULL, N_SPM);
    gw_kv_f32s(w, "tokenizer.ggml.scores", k_spm_scores, N_SPM);
    gw_kv_i32s(w, "tokenizer.ggml.token_type", types, N_SPM);
}

static ak_tokenizer *open_tok(const gw *w, ak_gguf **g) {
    assert_int_equal(ak_gguf_open_memory(w->v, w->n, g), AK_OK);
    ak_tokenizer *t;
    assert_int_equal(ak_tokenizer_from_gguf(*g, &t), AK_OK);
    return t;
}

static void test_spm_small(void **state) {
    (void)state;
    gw w;
    build_spm(&w, k_spm_types);
    ak_gguf *g;
    ak_tokenizer *t = open_tok(&w, &g);
    int32_t ids[16];
    size_t n;
    /* "▁ab": the pair (a, b) scores -0.25, better than (▁, a) at -0.5, so ▁ stays alone */
    assert_int_equal(ak_tokenizer_encode(t, "ab", 2, AK_TOK_ADD_SPECIAL, ids, 16, &n), AK_OK);
    assert_int_equal(n, 3);
    assert_int_equal(ids[0], 1); /* BOS */
    assert_int_equal(ids[1], 3); /* ▁ */
    assert_int_equal(ids[2], 7); /* ab */
    /* a user-defined token is always cut out; control tokens only with PARSE_SPECIAL */
    assert_int_equal(ak_tokenizer_encode(t, "a<|user|></s>", 13, 0, ids, 16, &n), AK_OK);
    assert_int_equal(ids[0], 6);
    assert_int_equal(ids[1], 8);
    assert_true(n > 3); /* "</s>" spelled with unknown tokens */
    assert_int_equal(ak_tokenizer_encode(t, "a</s>", 5, AK_TOK_PARSE_SPECIAL, ids, 16, &n), AK_OK);
    assert_int_equal(n, 2);
    assert_int_equal(ids[1], 2);
    /* the size protocol: too small reports the count */
    assert_int_equal(ak_tokenizer_encode(t, "ab", 2, 0, ids, 1, &n), AK_ERR_INVALID_ARG);
    assert_int_equal(n, 2);
    char buf[32];
    size_t len;
    const int32_t seq[] = {1, 6, 2};
    assert_int_equal(ak_tokenizer_decode(t, seq, 3, 0, buf, sizeof buf, &len), AK_OK);
    assert_int_equal(len, 2);
    assert_memory_equal(buf, " a", 2);
    assert_int_equal(ak_tokenizer_decode(t, seq, 3, AK_TOK_RENDER_SPECIAL, buf, sizeof buf, &len), AK_OK);
    assert_int_equal(len, 9);
    assert_memory_equal(buf, "<s> a</s>", 9);
    const int32_t bad[] = {9};
    assert_int_equal(ak_tokenizer_decode(t, bad, 1, 0, buf, sizeof buf, &len), AK_ERR_INVALID_ARG);
    ak_tokenizer_free(t);
    ak_gguf_close(g);
    free(w.v);
}

static void test_tokenizer_bad_metadata(void **state) {
    (void)state;
    gw w;
    ak_gguf *g;
    ak_tokenizer *t;
    int32_t types[N_SPM];
    memcpy(types, k_spm_types, sizeof types);
    types[4] = 9; /* unknown token type */
    build_spm(&w, types);
    assert_int_equal(ak_gguf_open_memory(w.v, w.n, &g), AK_OK);
    assert_int_equal(ak_tokenizer_from_gguf(g, &t), AK_ERR_INVALID_MODEL);
    ak_gguf_close(g);
    free(w.v);

    build_spm(&w, k_spm_types); /* BOS outside the vocabulary */
    gw_kv_u32(&w, "tokenizer.ggml.bos_token_id", N_SPM);
    assert_int_equal(ak_gguf_open_memory(w.v, w.n, &g), AK_OK);
    assert_int_equal(ak_tokenizer_from_gguf(g, &t), AK_ERR_INVALID_MODEL);
    ak_gguf_close(g);
    free(w.v);

    gw_begin(&w, 0); /* scores of the wrong length */
    gw_kv_string(&w, "tokenizer.ggml.model", "llama");
    gw_kv_strings(&w, "tokenizer.ggml.tokens", k_spm_tokens, NULL, N_SPM);
    gw_kv_f32s(&w, "tokenizer.ggml.scores", k_spm_scores, 3);
    assert_int_equal(ak_gguf_open_memory(w.v, w.n, &g), AK_OK);
    assert_int_equal(ak_tokenizer_from_gguf(g, &t), AK_ERR_INVALID_MODEL);
    ak_gguf_close(g);
    free(w.v);

    const char *merges[] = {"ab"}; /* a merge without a space */
    gw_begin(&w, 0);
    gw_kv_string(&w, "tokenizer.ggml.model", "gpt2");
    gw_kv_strings(&w, "tokenizer.ggml.tokens", k_spm_tokens, NULL, N_SPM);
    gw_kv_strings(&w, "tokenizer.ggml.merges", merges, NULL, 1);
    assert_int_equal(ak_gguf_open_memory(w.v, w.n, &g), AK_OK);
    assert_int_equal(ak_tokenizer_from_gguf(g, &t), AK_ERR_INVALID_MODEL);
    ak_gguf_close(g);
    free(w.v);

    gw_begin(&w, 0); /* a model we do not have */
    gw_kv_string(&w, "tokenizer.ggml.model", "rwkv");
    gw_kv_strings(&w, "tokenizer.ggml.tokens", k_spm_tokens, NULL, N_SPM);
    assert_int_equal(ak_gguf_open_memory(w.v, w.n, &g), AK_OK);
    assert_int_equal(ak_tokenizer_from_gguf(g, &t), AK_ERR_UNSUPPORTED);
    ak_gguf_close(g);
    free(w.v);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_file),
        cmocka_unit_test(test_truncated_everywhere),
        cmocka_unit_test(test_huge_counts),
        cmocka_unit_test(test_bad_structure),
        cmocka_unit_test(test_bad_tensors),
        cmocka_unit_test(test_random_corruption),
        cmocka_unit_test(test_spm_small),
        cmocka_unit_test(test_tokenizer_bad_metadata),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
