/* LLM engine tests on a small random Llama model (made by scripts/llm-make-model):
 * greedy decoding through the paged KV cache equals argmax over full recomputation;
 * many requests batched together (ragged batch, chunked prefill, preemption under a
 * tight KV budget) give each the tokens it gets alone; prefix caching reuses blocks;
 * n > 1 samples share the prompt copy-on-write and are reproducible; stop strings,
 * cancellation and bad requests; and a steady decode step allocates nothing. */
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

#include "count_alloc.h"
#include "engine_drive.h"

static char g_model[512], g_draft[512];
static ak_llm_model *g_m, *g_d;

static int setup(void **state) {
    (void)state;
    char cmd[2048];
    snprintf(g_model, sizeof g_model, "/tmp/ak_test_engine_%d.gguf", (int)getpid());
    snprintf(g_draft, sizeof g_draft, "/tmp/ak_test_engine_%d_q4.gguf", (int)getpid());
    const char *files[2] = {g_model, g_draft}, *types[2] = {"f32", "q4_0"};
    for (int i = 0; i < 2; ++i) { /* the draft: the same weights quantized to q4_0 */
        snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/scripts/llm-make-model --dim 64 --layers 2 "
                 "--heads 4 --kv-heads 2 --ffn 192 --ctx 256 --seed 11 --type %s --out %s >/dev/null",
                 AK_SOURCE_DIR, types[i], files[i]);
        if (system(cmd) != 0) { /* the script printed why */
            print_message("scripts/llm-make-model failed: %s\n", cmd);
            return -1;
        }
    }
    return ak_llm_model_load(g_model, &g_m) == AK_OK && ak_llm_model_load(g_draft, &g_d) == AK_OK ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    ak_llm_model_free(g_m);
    ak_llm_model_free(g_d);
    remove(g_model);
    remove(g_draft);
    return 0;
}

/* ---- helpers ---------------------------------------------------------------------------- */

typedef struct collected {
    int32_t ids[16][256];
    int32_t n[16];
    ak_finish_reason finish[16];
    size_t trim[16];
    uint32_t n_cached;
} collected;

static void on_event(void *user, const ak_llm_event *ev) {
    collected *c = user;
    if (ev->token >= 0) c->ids[ev->sample][c->n[ev->sample]++] = ev->token;
    if (ev->finish != AK_FINISH_NONE) {
        c->finish[ev->sample] = ev->finish;
        c->trim[ev->sample] = ev->stop_trim;
    }
    c->n_cached = ev->n_cached;
}

static ak_llm_request greedy_request(const int32_t *p, size_t n, int32_t max_tokens, collected *c) {
    return greedy_request_to(p, n, max_tokens, on_event, c);
}

static ak_llm_model *g_engine_draft; /* draft model of the engines made next */
static int32_t g_engine_ngram;

static ak_llm_engine *engine(int32_t max_batch, uint64_t kv_bytes, ak_dtype kv_dtype) {
    ak_llm_engine_options o;
    ak_llm_engine_options_default(&o);
    o.n_threads = 2;
    o.max_seqs = 16;
    o.max_batch_tokens = max_batch;
    o.kv_bytes = kv_bytes;
    o.kv_dtype = kv_dtype;
    o.draft = g_engine_draft;
    o.spec_ngram = g_engine_ngram;
    ak_llm_engine *e;
    assert_int_equal(ak_llm_engine_create(g_m, &o, &e), AK_OK);
    return e;
}

/* argmax of the last row of a full prefill of ids (no KV reuse at all) */
static int32_t recompute_next(const int32_t *ids, size_t n) {
    ak_llm_model_info info;
    ak_llm_model_get_info(g_m, &info);
    float *logits = malloc(n * (size_t)info.n_vocab * sizeof *logits);
    assert_int_equal(ak_llm_model_logits(g_m, ids, n, logits, 1), AK_OK);
    const float *row = logits + (n - 1) * (size_t)info.n_vocab;
    int32_t best = 0;
    for (int32_t i = 1; i < info.n_vocab; ++i) best = row[i] > row[best] ? i : best;
    free(logits);
    return best;
}

/* ---- tests -------------------------------------------------------------------------------- */

static void test_greedy_matches_recompute(void **state) {
    (void)state;
    int32_t ids[64];
    prompt_of(ids, 9, 1);
    collected c = {0};
    ak_llm_engine *e = engine(512, 0, AK_DTYPE_F32);
    ak_llm_request r = greedy_request(ids, 9, 24, &c);
    assert_int_equal(ak_llm_engine_submit(e, &r, NULL), AK_OK);
    drain(e);
    ak_llm_engine_free(e);
    assert_int_equal(c.n[0], 24);
    assert_int_equal(c.finish[0], AK_FINISH_LENGTH);
    for (int32_t i = 0; i < 24; ++i) {
        assert_int_equal(c.ids[0][i], recompute_next(ids, (size_t)(9 + i)));
        ids[9 + i] = c.ids[0][i];
    }
}

enum { N_REQ = 6 };
static const int32_t req_len[N_REQ] = {5, 40, 17, 63, 2, 33};

static void run_alone(collected *alone) {
    for (int32_t k = 0; k < N_REQ; ++k) {
        int32_t p[64];
        prompt_of(p, req_len[k], k + 3);
        ak_llm_engine *e = engine(512, 0, AK_DTYPE_F32);
        ak_llm_request r = greedy_request(p, (size_t)req_len[k], 20, &alone[k]);
        assert_int_equal(ak_llm_engine_submit(e, &r, NULL), AK_OK);
        drain(e);
        ak_llm_engine_free(e);
    }
}

static void run_together(ak_llm_engine *e, collected *together) {
    int32_t p[N_REQ][64];
    for (int32_t k = 0; k < N_REQ; ++k) {
        prompt_of(p[k], req_len[k], k + 3);
        ak_llm_request r = greedy_request(p[k], (size_t)req_len[k], 20, &together[k]);
        assert_int_equal(ak_llm_engine_submit(e, &r, NULL), AK_OK);
    }
    drain(e);
}

static void test_batched_equals_alone(void **state) {
    (void)state;
    static collected alone[N_REQ], together[N_REQ], tight[N_REQ];
    memset(alone, 0, sizeof alone);
    memset(together, 0, sizeof together);
    memset(tight, 0, sizeof tight);
    run_alone(alone);
    ak_llm_engine *e = engine(24, 0, AK_DTYPE_F32); /* chunked prefill: 24 tokens a step */
    run_together(e, together);
    ak_llm_engine_free(e);
    /* 16 blocks of 16 tokens for six sequences of up to 83 tokens: preemption needed */
    size_t block = 2 * 2 * 2 * 16 * 16 * sizeof(float); /* K+V · layers · kv heads · hd · slots */
    e = engine(64, 16 * block, AK_DTYPE_F32);
    run_together(e, tight);
    ak_llm_engine_stats s;
    ak_llm_engine_get_stats(e, &s);
    ak_llm_engine_free(e);
    assert_true(s.preemptions > 0);
    for (int32_t k = 0; k < N_REQ; ++k) {
        assert_int_equal(together[k].n[0], 20);
        assert_memory_equal(alone[k].ids[0], together[k].ids[0], 20 * sizeof(int32_t));
        assert_memory_equal(alone[k].ids[0], tight[k].ids[0], 20 * sizeof(int32_t));
    }
}

static void test_prefix_cache(void **state) {
    (void)state;
    int32_t p[64];
    prompt_of(p, 50, 9);
    collected a = {0}, b = {0};
    ak_llm_engine *e = engine(512, 0, AK_DTYPE_F32);
    ak_llm_request r = greedy_request(p, 50, 8, &a);
    assert_int_equal(ak_llm_engine_submit(e, &r, NULL), AK_OK);
    drain(e);
    r.user = &b;
    assert_int_equal(ak_llm_engine_submit(e, &r, NULL), AK_OK);
    drain(e);
    ak_llm_engine_stats s;
    ak_llm_engine_get_stats(e, &s);
    ak_llm_engine_free(e);
    assert_int_equal(a.n_cached, 0);
    assert_int_equal(b.n_cached, 48); /* three full blocks of the 49 tokens before the last */
    assert_memory_equal(a.ids[0], b.ids[0], 8 * sizeof(int32_t));
    assert_int_equal(s.kv_tokens_live, 0);
}

static void sample_n(collected *c) {
    int32_t p[20];
    prompt_of(p, 20, 5);
    ak_llm_engine *e = engine(512, 0, AK_DTYPE_F16);
    ak_llm_request r = greedy_request(p, 20, 30, c);
    r.n = 4;
    r.sampling.temperature = 1.0f;
    r.sampling.seed = 1234;
    assert_int_equal(ak_llm_engine_submit(e, &r, NULL), AK_OK);
    drain(e);
    ak_llm_engine_stats s;
    ak_llm_engine_get_stats(e, &s);
    ak_llm_engine_free(e);
    assert_int_equal(s.running, 0);
}

static void test_n_samples_share_prompt(void **state) {
    (void)state;
    static collected a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    sample_n(&a);
    sample_n(&b);
    assert_memory_equal(&a, &b, sizeof a); /* reproducible with the seed */
    int distinct = 0;
    for (int i = 1; i < 4; ++i) {
        assert_int_equal(a.n[i], 30);
        distinct += memcmp(a.ids[0], a.ids[i], 30 * sizeof(int32_t)) != 0;
    }
    assert_true(distinct >= 2);
}

/* n samples of one prompt hold its KV blocks once (copy-on-write): mid-generation, the
 * cache holds the prompt's full blocks plus one block per sample for its own tokens,
 * not n copies of the prompt. */
static void test_n_samples_share_blocks(void **state) {
    (void)state;
    int32_t p[64];
    prompt_of(p, 64, 9);
    static collected c;
    memset(&c, 0, sizeof c);
    ak_llm_engine *e = engine(512, 0, AK_DTYPE_F16);
    ak_llm_request r = greedy_request(p, 64, 8, &c);
    r.n = 4;
    r.sampling.temperature = 1.0f;
    assert_int_equal(ak_llm_engine_submit(e, &r, NULL), AK_OK);
    int32_t pending = 1;
    ak_llm_engine_stats s;
    memset(&s, 0, sizeof s);
    for (int guard = 0; guard < 100 && s.generated_tokens < 8; guard++) {
        assert_int_equal(ak_llm_engine_step(e, &pending), AK_OK);
        ak_llm_engine_get_stats(e, &s);
    }
    assert_true(s.generated_tokens >= 8 && s.running == 4);
    assert_true(s.kv_tokens_live >= 4 * 65); /* every sample sees the whole prompt */
    int32_t prompt_blocks = 64 / 16, unshared = 4 * (prompt_blocks + 1);
    print_message("n = 4 on a 64-token prompt: %d KV blocks used (%d unshared)\n",
                  s.kv_blocks_used, unshared);
    assert_true(s.kv_blocks_used <= prompt_blocks + 4 + 1);
    drain(e);
    ak_llm_engine_free(e);
}

static void test_stop_string_and_cancel(void **state) {
    (void)state;
    int32_t p[16];
    prompt_of(p, 6, 2);
    collected full = {0}, stopped = {0}, cancelled = {0};
    ak_llm_engine *e = engine(512, 0, AK_DTYPE_F32);
    ak_llm_request r = greedy_request(p, 6, 12, &full);
    assert_int_equal(ak_llm_engine_submit(e, &r, NULL), AK_OK);
    drain(e);
    const ak_tokenizer *tok;
    ak_llm_model_tokenizer(g_m, &tok);
    char piece[64];
    size_t len;
    assert_int_equal(ak_tokenizer_decode(tok, &full.ids[0][5], 1, 0, piece, sizeof piece - 1, &len), AK_OK);
    piece[len] = '\0';
    const char *stops[1] = {piece};
    r.user = &stopped;
    r.stop_strings = stops;
    r.n_stop_strings = 1;
    assert_int_equal(ak_llm_engine_submit(e, &r, NULL), AK_OK);
    drain(e);
    assert_int_equal(stopped.finish[0], AK_FINISH_STOP);
    assert_true(stopped.n[0] <= 6 && stopped.trim[0] >= len);
    r.user = &cancelled;
    r.n_stop_strings = 0;
    r.max_tokens = 200;
    uint64_t id;
    assert_int_equal(ak_llm_engine_submit(e, &r, &id), AK_OK);
    int32_t pending;
    for (int i = 0; i < 3; ++i) ak_llm_engine_step(e, &pending);
    assert_int_equal(ak_llm_engine_cancel(e, id), AK_OK);
    drain(e);
    ak_llm_engine_free(e);
    assert_int_equal(cancelled.finish[0], AK_FINISH_CANCELLED);
    assert_true(cancelled.n[0] < 200);
}

/* A request cancelled while it waits behind others (all max_seqs slots busy) is freed
 * once finished; the waiting queue must not keep a pointer to it (a use-after-free that
 * crashed `ak serve` when clients hung up under load). */
static void test_cancel_while_queued(void **state) {
    (void)state;
    enum { N = 20 }; /* engine(): 16 sequences at once, so 4 wait */
    static collected c[N];
    memset(c, 0, sizeof c);
    int32_t p[N][8];
    uint64_t ids[N];
    ak_llm_engine *e = engine(512, 0, AK_DTYPE_F32);
    for (int k = 0; k < N; ++k) {
        prompt_of(p[k], 8, k + 1);
        ak_llm_request r = greedy_request(p[k], 8, 30, &c[k]);
        assert_int_equal(ak_llm_engine_submit(e, &r, &ids[k]), AK_OK);
    }
    int32_t pending;
    assert_int_equal(ak_llm_engine_step(e, &pending), AK_OK);
    assert_int_equal(ak_llm_engine_cancel(e, ids[17]), AK_OK); /* second in the queue */
    assert_int_equal(ak_llm_engine_cancel(e, ids[19]), AK_OK); /* last */
    drain(e);
    ak_llm_engine_free(e);
    for (int k = 0; k < N; ++k) {
        if (k == 17 || k == 19) {
            assert_int_equal(c[k].finish[0], AK_FINISH_CANCELLED);
            assert_int_equal(c[k].n[0], 0);
        } else {
            assert_int_equal(c[k].n[0], 30);
        }
    }
}

static void test_bad_requests(void **state) {
    (void)state;
    int32_t p[4] = {1, 2, 3, 4}, bad[2] = {1, 999999};
    collected c = {0};
    ak_llm_engine *e = engine(512, 0, AK_DTYPE_F32);
    ak_llm_request r = greedy_request(p, 0, 4, &c);
    assert_int_equal(ak_llm_engine_submit(e, &r, NULL), AK_ERR_INVALID_ARG);
    r = greedy_request(p, 4, 0, &c);
    assert_int_equal(ak_llm_engine_submit(e, &r, NULL), AK_ERR_INVALID_ARG);
    r = greedy_request(p, 4, 1000, &c); /* beyond the 256-token context */
    assert_int_equal(ak_llm_engine_submit(e, &r, NULL), AK_ERR_INVALID_ARG);
    r = greedy_request(bad, 2, 4, &c);
    assert_int_equal(ak_llm_engine_submit(e, &r, NULL), AK_ERR_INVALID_ARG);
    r = greedy_request(p, 4, 4, &c);
    r.n = 0;
    assert_int_equal(ak_llm_engine_submit(e, &r, NULL), AK_ERR_INVALID_ARG);
    r.n = 1;
    r.sampling.top_p = 2.0f;
    assert_int_equal(ak_llm_engine_submit(e, &r, NULL), AK_ERR_INVALID_ARG);
    ak_llm_engine_free(e);
}

/* Greedy speculative decoding (q4_0 draft; n-gram lookup) is token-identical to plain
 * decoding for several requests batched together; the draft proposes and some are kept. */
static void test_speculative_greedy_identical(void **state) {
    (void)state;
    static collected alone[N_REQ], with_draft[N_REQ], with_ngram[N_REQ];
    memset(alone, 0, sizeof alone);
    memset(with_draft, 0, sizeof with_draft);
    memset(with_ngram, 0, sizeof with_ngram);
    run_alone(alone);
    g_engine_draft = g_d;
    ak_llm_engine *e = engine(64, 0, AK_DTYPE_F16);
    run_together(e, with_draft);
    ak_llm_engine_stats s;
    ak_llm_engine_get_stats(e, &s);
    ak_llm_engine_free(e);
    g_engine_draft = NULL;
    g_engine_ngram = 2;
    e = engine(64, 0, AK_DTYPE_F32);
    run_together(e, with_ngram);
    ak_llm_engine_free(e);
    g_engine_ngram = 0;
    assert_true(s.spec_proposed > 0 && s.spec_accepted > 0);
    for (int32_t k = 0; k < N_REQ; ++k) {
        assert_memory_equal(alone[k].ids[0], with_draft[k].ids[0], 20 * sizeof(int32_t));
        assert_memory_equal(alone[k].ids[0], with_ngram[k].ids[0], 20 * sizeof(int32_t));
    }
}

/* Sampled speculative decoding with n > 1 samples (draft K/V copied on write too). */
static void test_speculative_sampled_runs(void **state) {
    (void)state;
    static collected c;
    memset(&c, 0, sizeof c);
    g_engine_draft = g_d;
    int32_t p[12];
    prompt_of(p, 12, 8);
    ak_llm_engine *e = engine(512, 0, AK_DTYPE_F16);
    ak_llm_request r = greedy_request(p, 12, 40, &c);
    r.n = 3;
    r.sampling.temperature = 0.8f;
    r.sampling.top_k = 40;
    assert_int_equal(ak_llm_engine_submit(e, &r, NULL), AK_OK);
    drain(e);
    ak_llm_engine_stats s;
    ak_llm_engine_get_stats(e, &s);
    ak_llm_engine_free(e);
    g_engine_draft = NULL;
    for (int i = 0; i < 3; ++i) assert_int_equal(c.n[i], 40);
    assert_true(s.spec_proposed > 0);
    assert_int_equal(s.kv_tokens_live, 0);
}

/* The weights mapped in place and read into (huge-page) private memory give the same
 * logits, bit for bit; a missing file fails cleanly either way. */
static void test_load_modes_agree(void **state) {
    (void)state;
    ak_llm_load_options o;
    ak_llm_load_options_default(&o);
    assert_int_equal(o.mmap, 0);
    o.mmap = 1;
    ak_llm_model *mapped;
    assert_int_equal(ak_llm_model_load_with(g_model, &o, &mapped), AK_OK);
    ak_llm_model_info info;
    ak_llm_model_get_info(g_m, &info);
    const int32_t ids[] = {1, 5, 9, 2};
    size_t nv = (size_t)info.n_vocab;
    float *a = malloc(4 * nv * sizeof *a), *b = malloc(4 * nv * sizeof *b);
    assert_int_equal(ak_llm_model_logits(g_m, ids, 4, a, 1), AK_OK);
    assert_int_equal(ak_llm_model_logits(mapped, ids, 4, b, 1), AK_OK);
    assert_memory_equal(a, b, 4 * nv * sizeof *a);
    free(a);
    free(b);
    ak_llm_model_free(mapped);
    for (int mode = 0; mode <= 1; ++mode) {
        o.mmap = mode;
        ak_llm_model *m = NULL;
        assert_int_equal(ak_llm_model_load_with("/nonexistent/model.gguf", &o, &m), AK_ERR_IO);
        assert_null(m);
        ak_clear_error();
    }
    assert_int_equal(ak_llm_model_load_with(g_model, NULL, &mapped), AK_ERR_INVALID_ARG);
    ak_clear_error();
}

static void test_decode_step_allocates_nothing(void **state) {
    (void)state;
#if COUNTING
    int32_t p[4][16];
    collected c[4];
    memset(c, 0, sizeof c);
    ak_llm_engine *e = engine(512, 0, AK_DTYPE_F16);
    for (int k = 0; k < 4; ++k) {
        prompt_of(p[k], 10 + k, k);
        ak_llm_request r = greedy_request(p[k], (size_t)(10 + k), 60, &c[k]);
        r.sampling.temperature = 0.7f;
        r.sampling.top_p = 0.9f;
        r.sampling.n_logprobs = 3;
        assert_int_equal(ak_llm_engine_submit(e, &r, NULL), AK_OK);
    }
    int32_t pending;
    for (int i = 0; i < 5; ++i) ak_llm_engine_step(e, &pending); /* warm-up */
    counting = 1;
    for (int i = 0; i < 40; ++i) ak_llm_engine_step(e, &pending);
    counting = 0;
    drain(e);
    ak_llm_engine_free(e);
    assert_int_equal(allocations, 0);
#else
    skip();
#endif
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_greedy_matches_recompute),
        cmocka_unit_test(test_batched_equals_alone),
        cmocka_unit_test(test_prefix_cache),
        cmocka_unit_test(test_n_samples_share_prompt),
        cmocka_unit_test(test_n_samples_share_blocks),
        cmocka_unit_test(test_stop_string_and_cancel),
        cmocka_unit_test(test_cancel_while_queued),
        cmocka_unit_test(test_bad_requests),
        cmocka_unit_test(test_speculative_greedy_identical),
        cmocka_unit_test(test_speculative_sampled_runs),
        cmocka_unit_test(test_load_modes_agree),
        cmocka_unit_test(test_decode_step_allocates_nothing),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
