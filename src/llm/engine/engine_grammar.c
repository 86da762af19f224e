/* Constrained decoding in the engine: each sample of a request with a grammar keeps its
 * own grammar state; before sampling, the tokens the grammar cannot accept get -inf (the
 * sampler then runs as usual on the masked logits, so temperature, top-p, ... and the
 * reported log-probabilities are those of the masked distribution); the sampled token
 * advances the state; a complete grammar ends the sample with "stop". */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "llm/engine/engine_internal.h"
#include "llm/grammar/grammar.h"

ak_status ak__engine_grammar_check(const ak_llm_engine *e, const ak_llm_request *r) {
    if (!r->grammar) return AK_OK;
    if (e->draft || e->o.spec_ngram)
        return AK_FAIL(AK_ERR_UNSUPPORTED, "request: a grammar with speculative decoding (draft "
                       "model or n-gram lookup) is not supported");
    AK_ARG_CHECK(r->grammar->n_vocab <= e->model->hp.n_vocab,
                 "request: the grammar's vocabulary (%d tokens) is not the model's (%d)",
                 r->grammar->n_vocab, e->model->hp.n_vocab);
    return AK_OK;
}

ak_status ak__engine_grammar_init(ak__seq *s, const ak_llm_grammar *g) {
    s->grammar = calloc(1, sizeof *s->grammar);
    if (!s->grammar) return AK_FAIL(AK_ERR_NO_MEMORY, "request: out of memory");
    ak_status st = ak__grammar_state_init(s->grammar, g);
    if (st != AK_OK) {
        free(s->grammar);
        s->grammar = NULL;
    }
    return st;
}

void ak__engine_grammar_free(ak__seq *s) {
    if (!s->grammar) return;
    ak__grammar_state_free(s->grammar);
    free(s->grammar);
    s->grammar = NULL;
}

const float *ak__engine_grammar_mask(ak_llm_engine *e, ak__seq *s, const float *row) {
    int32_t vocab = e->model->hp.n_vocab;
    if (!e->grammar_row) e->grammar_row = malloc((size_t)vocab * sizeof *e->grammar_row);
    ak_status st = e->grammar_row ? AK_OK : AK_FAIL(AK_ERR_NO_MEMORY, "grammar: out of memory");
    if (st == AK_OK) {
        memcpy(e->grammar_row, row, (size_t)vocab * sizeof *row);
        for (int32_t t = s->grammar->gr->n_vocab; t < vocab; ++t) e->grammar_row[t] = -INFINITY;
        st = ak__grammar_state_apply(s->grammar, e->grammar_row);
    }
    if (st != AK_OK) {
        ak__engine_finish(e, s, AK_FINISH_ERROR, 0, st);
        return NULL;
    }
    return e->grammar_row;
}

int ak__engine_grammar_accept(ak_llm_engine *e, ak__seq *s, int32_t token) {
    ak_status st = ak__grammar_state_accept_token(s->grammar, token);
    if (st == AK_OK) return 1;
    ak__engine_finish(e, s, AK_FINISH_ERROR, 0, st);
    return 0;
}

int ak__engine_grammar_done(const ak__seq *s) { return ak__grammar_state_must_end(s->grammar); }
