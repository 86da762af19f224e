/* Speculative decoding: verification of draft tokens by rejection sampling, and
 * prompt-lookup (n-gram) drafting when there is no draft model.
 *
 * Standard speculative sampling (Leviathan et al. 2023; Chen et al. 2023): a draft token x
 * proposed from q is accepted with probability min(1, p(x)/q(x)); on rejection the emitted
 * token is drawn from norm(max(0, p - q)). The emitted token is then distributed exactly
 * as p. p and q are full distributions from ak__sampler_dist of the target and the draft
 * with the same sampler settings. Greedy samplers (temperature 0): x is accepted iff it is
 * argmax p, and on rejection argmax p is emitted, so the output is token-identical to
 * non-speculative greedy decoding. Nothing here allocates. */
#ifndef AK_LLM_ENGINE_SPEC_H
#define AK_LLM_ENGINE_SPEC_H

#include <stddef.h>
#include <stdint.h>

#include "llm/engine/sampler.h"

/* Verifies one draft token. p_target, q_draft: (n_vocab) distributions. Returns the token
 * to emit (draft_token when *accepted = 1). q_draft = NULL for deterministic drafts
 * (n-gram): q is one-hot at the draft token, so x is accepted with probability p(x) and a
 * rejection draws from p with x removed, renormalized. Uses s's RNG; s's history is not
 * touched (the engine calls accept). */
int32_t ak__spec_verify(ak__sampler *s, const float *p_target, const float *q_draft,
                        int32_t draft_token, int *accepted);
/* The extra token after all γ drafts were accepted: a draw from p_target (argmax when
 * greedy). */
int32_t ak__spec_bonus(ak__sampler *s, const float *p_target);

/* Prompt lookup: finds the most recent earlier occurrence of the last `ngram` tokens of
 * history[0..n) and copies up to `gamma` of the tokens that followed it into out (gamma
 * entries). Returns how many (0 when there is none or the arguments make no sense). */
size_t ak__ngram_propose(const int32_t *history, size_t n, int32_t ngram, int32_t gamma,
                         int32_t *out);

#endif /* AK_LLM_ENGINE_SPEC_H */
