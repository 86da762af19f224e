/* Tokenizer tests against llama.cpp's vocabulary test files (../shared/llm/vocab, see
 * shared_vocab.h: every line of .inp must encode to the ids of .out, without BOS), round
 * trips, and synthetic vocabularies for special tokens and the buffer protocol. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "accelkit/llm.h"
#include "gguf_writer.h"
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama_spm),
        cmocka_unit_test(test_phi3),
        cmocka_unit_test(test_gpt2),
        cmocka_unit_test(test_falcon),
        cmocka_unit_test(test_bert_bge),
        cmocka_unit_test(test_special_tokens),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
