/* Driving the LLM engine by hand in tests: deterministic prompts, greedy requests whose
 * events go to the test's callback, and stepping until no request is left. */
#ifndef AK_TESTS_LLM_ENGINE_DRIVE_H
#define AK_TESTS_LLM_ENGINE_DRIVE_H

#include "accelkit/llm.h"

/* n token ids in [1, 31000], fixed by seed. */
static inline void prompt_of(int32_t *p, int32_t n, int32_t seed) {
    for (int32_t i = 0; i < n; ++i) p[i] = 1 + (seed * 7919 + i * 104729) % 31000;
}

/* Greedy (temperature 0), EOS ignored, max_tokens tokens, events to on_event(user). */
static inline ak_llm_request greedy_request_to(const int32_t *p, size_t n, int32_t max_tokens,
                                               ak_llm_event_fn on_event, void *user) {
    ak_llm_request r;
    ak_llm_request_default(&r);
    r.prompt = p;
    r.n_prompt = n;
    r.max_tokens = max_tokens;
    r.sampling.temperature = 0.0f;
    r.ignore_eos = 1;
    r.on_event = on_event;
    r.user = user;
    return r;
}

/* Steps the engine until every request has ended. */
static inline void drain(ak_llm_engine *e) {
    int32_t pending = 1;
    for (int guard = 0; pending > 0 && guard < 100000; ++guard)
        assert_int_equal(ak_llm_engine_step(e, &pending), AK_OK);
    assert_int_equal(pending, 0);
}

#endif
