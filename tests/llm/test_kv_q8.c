/* The q8_0 KV cache (llm/base/kv_cache.h, llm/model/attention.c) on small random Llama
 * models made by scripts/llm-make-model: a head_dim that is not a multiple of 32 is
 * refused by name; logits decoded token by token over a q8_0 cache stay within a bound of
 * the f32-cache logits (max abs difference, top-1 agreement; f16 printed alongside); and
 * the engine's block machinery works on q8_0 blocks — prefix caching reuses them,
 * n > 1 samples copy the prompt's last block on write, and preemption under a tight KV
 * budget recomputes them — each giving the tokens of the plain run. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "accelkit/llm.h"
#include "llm/base/kv_cache.h"
#include "llm/model/model.h"
#include "engine_drive.h"

static char g_path64[512], g_path16[512];
static ak_llm_model *g_m;   /* head_dim 64 (two q8_0 blocks per row), 2 query heads per KV head */
static ak_llm_model *g_m16; /* head_dim 16 */

static int make_model(char *path, size_t cap, const char *tag, const char *shape) {
    char cmd[2048];
    snprintf(path, cap, "/tmp/ak_test_kv_q8_%s_%d.gguf", tag, (int)getpid());
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/scripts/llm-make-model %s --layers 2 "
             "--ctx 512 --seed 21 --type f32 --out %s >/dev/null", AK_SOURCE_DIR, shape, path);
    if (system(cmd) != 0) { /* the script printed why */
        print_message("scripts/llm-make-model failed: %s\n", cmd);
        return -1;
    }
    return 0;
}

static int setup(void **state) {
    (void)state;
    if (make_model(g_path64, sizeof g_path64, "hd64", "--dim 256 --heads 4 --kv-heads 2 --ffn 512") ||
        make_model(g_path16, sizeof g_path16, "hd16", "--dim 64 --heads 4 --kv-heads 2 --ffn 128"))
        return -1;
    return ak_llm_model_load(g_path64, &g_m) == AK_OK && ak_llm_model_load(g_path16, &g_m16) == AK_OK
               ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    ak_llm_model_free(g_m);
    ak_llm_model_free(g_m16);
    remove(g_path64);
    remove(g_path16);
    return 0;
}

/* ---- refusal ------------------------------------------------------------------------ */

static void test_head_dim_not_multiple_of_32_refused(void **state) {
    (void)state;
    ak_llm_engine_options o;
    ak_llm_engine_options_default(&o);
    o.kv_q8_0 = 1;
    ak_llm_engine *e = NULL;
    assert_int_equal(ak_llm_engine_create(g_m16, &o, &e), AK_ERR_INVALID_ARG);
    assert_null(e);
    assert_non_null(strstr(ak_last_error(), "q8_0"));
    assert_non_null(strstr(ak_last_error(), "head_dim is 16"));
    ak__kv_cache *kv = NULL;
    assert_int_equal(ak__kv_create(2, 2, 48, 16, 4, AK__KV_Q8_0, &kv), AK_ERR_INVALID_ARG);
    assert_non_null(strstr(ak_last_error(), "head_dim is 48"));
    /* the same shape in f16 is fine */
    assert_int_equal(ak__kv_create(2, 2, 48, 16, 4, AK__KV_F16, &kv), AK_OK);
    ak__kv_free(kv);
}

/* ---- accuracy against the f32 cache ------------------------------------------------- */

enum { ACC_N = 320 }; /* positions: 20 KV blocks, so every score row spans many q8_0 blocks */

typedef struct logits_diff {
    double max_abs, logit_spread; /* spread: max − min of the f32 logits over all rows */
    int agree;                    /* rows whose argmax equals the f32 cache's */
} logits_diff;

static int32_t argmax(const float *row, int32_t n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; ++i) best = row[i] > row[best] ? i : best;
    return best;
}

static logits_diff compare(const float *want, const float *got, int32_t rows, int32_t vocab) {
    logits_diff d = {0, 0, 0};
    float lo = want[0], hi = want[0];
    for (int32_t r = 0; r < rows; ++r) {
        const float *w = want + (size_t)r * (size_t)vocab, *g = got + (size_t)r * (size_t)vocab;
        for (int32_t i = 0; i < vocab; ++i) {
            double a = fabs((double)w[i] - g[i]);
            d.max_abs = a > d.max_abs ? a : d.max_abs;
            lo = w[i] < lo ? w[i] : lo;
            hi = w[i] > hi ? w[i] : hi;
        }
        d.agree += argmax(w, vocab) == argmax(g, vocab);
    }
    d.logit_spread = (double)hi - lo;
    return d;
}

static void test_logits_close_to_f32_cache(void **state) {
    (void)state;
    ak_llm_model_info info;
    ak_llm_model_get_info(g_m, &info);
    int32_t ids[ACC_N], vocab = info.n_vocab;
    prompt_of(ids, ACC_N, 3);
    size_t count = (size_t)ACC_N * (size_t)vocab;
    float *f32 = malloc(count * sizeof *f32), *f16 = malloc(count * sizeof *f16),
          *q8 = malloc(count * sizeof *q8);
    assert_non_null(f32), assert_non_null(f16), assert_non_null(q8);
    assert_int_equal(ak__model_logits_stepwise(g_m, ids, ACC_N, f32, 2, AK__KV_F32), AK_OK);
    assert_int_equal(ak__model_logits_stepwise(g_m, ids, ACC_N, f16, 2, AK__KV_F16), AK_OK);
    assert_int_equal(ak__model_logits_stepwise(g_m, ids, ACC_N, q8, 2, AK__KV_Q8_0), AK_OK);
    logits_diff d16 = compare(f32, f16, ACC_N, vocab), d8 = compare(f32, q8, ACC_N, vocab);
    print_message("over %d positions (f32 logits span %.3f): f16 cache max |diff| %.5f, top-1 "
                  "%d/%d; q8_0 cache max |diff| %.5f, top-1 %d/%d\n", ACC_N, d8.logit_spread,
                  d16.max_abs, d16.agree, ACC_N, d8.max_abs, d8.agree, ACC_N);
    /* q8_0 keeps 8 bits where f16 keeps 11: its error is larger but stays a small fraction
     * of the logits' range, and the argmax moves only where two logits nearly tie */
    assert_true(d8.max_abs > 0);
    assert_true(d8.max_abs <= 0.02 * d8.logit_spread);
    assert_true(d8.agree >= ACC_N * 95 / 100);
    assert_true(d16.max_abs <= d8.max_abs);
    free(f32), free(f16), free(q8);
}

/* ---- the engine's block machinery on q8_0 blocks ------------------------------------ */

typedef struct collected {
    int32_t ids[8][64];
    int32_t n[8];
    uint32_t n_cached;
} collected;

static void on_event(void *user, const ak_llm_event *ev) {
    collected *c = user;
    if (ev->token >= 0 && c->n[ev->sample] < 64) c->ids[ev->sample][c->n[ev->sample]++] = ev->token;
    c->n_cached = ev->n_cached;
}

static ak_llm_engine *q8_engine(int32_t max_batch, uint64_t kv_bytes) {
    ak_llm_engine_options o;
    ak_llm_engine_options_default(&o);
    o.n_threads = 2;
    o.max_seqs = 8;
    o.max_batch_tokens = max_batch;
    o.kv_bytes = kv_bytes;
    o.kv_q8_0 = 1;
    ak_llm_engine *e;
    assert_int_equal(ak_llm_engine_create(g_m, &o, &e), AK_OK);
    return e;
}

static ak_llm_request greedy(const int32_t *p, size_t n, int32_t max_tokens, collected *c) {
    return greedy_request_to(p, n, max_tokens, on_event, c);
}

static void test_prefix_cache_and_copy_on_write(void **state) {
    (void)state;
    int32_t p[50];
    prompt_of(p, 50, 9);
    static collected a, b, n3;
    memset(&a, 0, sizeof a), memset(&b, 0, sizeof b), memset(&n3, 0, sizeof n3);
    ak_llm_engine *e = q8_engine(512, 0);
    ak_llm_request r = greedy(p, 50, 12, &a);
    assert_int_equal(ak_llm_engine_submit(e, &r, NULL), AK_OK);
    drain(e);
    r.user = &b; /* the same prompt again: three full q8_0 blocks from the prefix cache */
    assert_int_equal(ak_llm_engine_submit(e, &r, NULL), AK_OK);
    drain(e);
    ak_llm_engine_free(e);
    assert_int_equal(a.n_cached, 0);
    assert_int_equal(b.n_cached, 48);
    assert_memory_equal(a.ids[0], b.ids[0], 12 * sizeof(int32_t));
    /* n = 3 greedy samples: the prompt's blocks shared, its partly filled last block copied
     * for each sample on its first write — a wrong copy would change their tokens */
    e = q8_engine(512, 0);
    r = greedy(p, 50, 12, &n3);
    r.n = 3;
    assert_int_equal(ak_llm_engine_submit(e, &r, NULL), AK_OK);
    drain(e);
    ak_llm_engine_free(e);
    for (int i = 0; i < 3; ++i) {
        assert_int_equal(n3.n[i], 12);
        assert_memory_equal(a.ids[0], n3.ids[i], 12 * sizeof(int32_t));
    }
}

enum { N_REQ = 6 };
static const int32_t req_len[N_REQ] = {5, 40, 17, 63, 2, 33};

static void test_preemption_recomputes_q8_blocks(void **state) {
    (void)state;
    static collected alone[N_REQ], tight[N_REQ];
    memset(alone, 0, sizeof alone), memset(tight, 0, sizeof tight);
    int32_t p[N_REQ][64];
    for (int32_t k = 0; k < N_REQ; ++k) {
        prompt_of(p[k], req_len[k], k + 3);
        ak_llm_engine *e = q8_engine(512, 0);
        ak_llm_request r = greedy(p[k], (size_t)req_len[k], 20, &alone[k]);
        assert_int_equal(ak_llm_engine_submit(e, &r, NULL), AK_OK);
        drain(e);
        ak_llm_engine_free(e);
    }
    /* 16 blocks of 16 tokens for six sequences of up to 83 tokens: preemption needed */
    ak_llm_model_info info;
    ak_llm_model_get_info(g_m, &info);
    size_t block = ak__kv_block_bytes(info.n_layers, 2, 64, 16, AK__KV_Q8_0);
    ak_llm_engine *e = q8_engine(512, 16 * block);
    for (int32_t k = 0; k < N_REQ; ++k) {
        ak_llm_request r = greedy(p[k], (size_t)req_len[k], 20, &tight[k]);
        assert_int_equal(ak_llm_engine_submit(e, &r, NULL), AK_OK);
    }
    drain(e);
    ak_llm_engine_stats s;
    ak_llm_engine_get_stats(e, &s);
    ak_llm_engine_free(e);
    assert_true(s.preemptions > 0);
    for (int32_t k = 0; k < N_REQ; ++k) {
        assert_int_equal(tight[k].n[0], 20);
        assert_memory_equal(alone[k].ids[0], tight[k].ids[0], 20 * sizeof(int32_t));
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_head_dim_not_multiple_of_32_refused),
        cmocka_unit_test(test_logits_close_to_f32_cache),
        cmocka_unit_test(test_prefix_cache_and_copy_on_write),
        cmocka_unit_test(test_preemption_recomputes_q8_blocks),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
