/* Fuzz: the OpenAI request parser of `ak serve` (ak__oai_parse) takes any bytes as a
 * /v1/completions body and as a /v1/chat/completions body: it accepts with every field in
 * range, or refuses with a 400 naming a reason — never a crash, a leak or a status
 * without a message. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "llm/server/oai.h"

#define N_VOCAB 1000

static void check_accepted(const ak__oai_request *r) {
    if (r->n < 1 || r->n > AK__OAI_MAX_N || r->n_stops > AK__OAI_MAX_STOPS) abort();
    for (size_t i = 0; i < r->n_stops; i++)
        if (!r->stops[i] || !r->stops[i][0] || strlen(r->stops[i]) > AK__OAI_MAX_STOP_LEN) abort();
    for (size_t i = 0; i < r->n_bias; i++)
        if (r->bias_ids[i] < 0 || r->bias_ids[i] >= N_VOCAB || !(r->bias[i] >= -100.0f) ||
            !(r->bias[i] <= 100.0f))
            abort();
    for (size_t i = 0; i < r->n_prompt_ids; i++)
        if (r->prompt_ids[i] < 0 || r->prompt_ids[i] >= N_VOCAB) abort();
    for (size_t i = 0; i < r->n_stop_ids; i++)
        if (r->stop_ids[i] < 0 || r->stop_ids[i] >= N_VOCAB) abort();
    if (r->sampling.n_logprobs < 0 || r->sampling.n_logprobs > AK__OAI_MAX_LOGPROBS) abort();
    if (r->kind == AK__OAI_CHAT) {
        if (r->n_messages < 1) abort();
        for (size_t i = 0; i < r->n_messages; i++)
            if (!r->messages[i].role || !r->messages[i].content) abort();
    } else {
        if (!r->prompt == !r->prompt_ids) abort(); /* exactly one form of prompt */
        if (r->echo && r->logprobs >= 0) abort();  /* refused together */
    }
}

static void parse_as(ak__oai_kind kind, const uint8_t *data, size_t size) {
    ak__oai_request r;
    ak__oai_error e;
    memset(&e, 0, sizeof e);
    ak_status st = ak__oai_parse(kind, (const char *)data, size, N_VOCAB, &r, &e);
    if (st == AK_OK) check_accepted(&r);
    else if (st == AK_ERR_INVALID_ARG) {
        if (e.http != 400 || !e.message[0] || !e.type) abort();
    } else if (st != AK_ERR_NO_MEMORY) {
        abort();
    }
    ak__oai_request_free(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    parse_as(AK__OAI_COMPLETION, data, size);
    parse_as(AK__OAI_CHAT, data, size);
    return 0;
}
