/* Token sampling for the LLM engine: repetition/presence/frequency penalties, temperature,
 * top-k, top-p, min-p, a per-request reproducible RNG and top-n log-probabilities.
 *
 * One ak__sampler per generated sample (sequence). Every array is allocated by
 * ak__sampler_init; accept/dist/draw/sample allocate nothing, so the engine can call them
 * on every token. Not thread-safe: one sampler is used by one thread at a time.
 *
 * The order of the transformations (what ak__sampler_dist returns):
 *   1. penalties on the raw logits: repetition_penalty (CTRL / Hugging Face rule: positive
 *      logits divided, negative multiplied) for every token seen in the prompt or the
 *      output; then presence and frequency penalties (OpenAI) for generated tokens only:
 *      z -= presence + frequency · count;
 *   2. temperature: z / T (T = 0: greedy, a one-hot at the argmax of the penalized logits);
 *   3. softmax, then top-k (the k most likely), then top-p (the smallest most-likely-first
 *      prefix of the top-k set whose mass reaches top_p of that set's mass), then min-p
 *      (drop tokens below min_p · p(most likely)); the survivors are renormalized.
 * Ties are broken by the lower token id, so the kept set is always a well-defined prefix
 * of the order (probability descending, id ascending). */
#ifndef AK_LLM_ENGINE_SAMPLER_H
#define AK_LLM_ENGINE_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

#include "accelkit/llm.h"

/* Buckets of the probability histogram used to find top-k/top-p cut-offs without sorting
 * the vocabulary: 16 per octave of probability down to 2^-40 of the maximum, plus one for
 * everything smaller. */
#define AK__SAMPLER_BUCKETS_PER_OCTAVE 16
#define AK__SAMPLER_OCTAVES 40
#define AK__SAMPLER_BUCKETS (AK__SAMPLER_BUCKETS_PER_OCTAVE * AK__SAMPLER_OCTAVES + 1)

typedef struct ak__sampler {
    ak_sampling_params p; /* a validated copy */
    int32_t n_vocab;
    uint64_t stream;      /* which sample of the request (0..n-1) */
    uint64_t rng_state;   /* SplitMix64 state, seeded from (p.seed, stream) */
    /* Penalty history. hist[t]: bit 31 = seen in the prompt, bits 0..30 = times generated.
     * touched lists the tokens with hist != 0 so penalties and reset cost O(distinct
     * tokens), not O(n_vocab). */
    uint32_t *hist;       /* n_vocab */
    int32_t *touched;     /* n_vocab capacity */
    int32_t n_touched;
    /* Scratch, n_vocab each: penalized logits, then unnormalized probabilities; and the
     * token ids gathered for a cut-off selection. */
    float *work;
    int32_t *idx;
    uint32_t *bucket_count; /* AK__SAMPLER_BUCKETS */
    double *bucket_mass;    /* AK__SAMPLER_BUCKETS */
    /* logit bias: added to these tokens' logits before the penalties (set_bias) */
    int32_t *bias_ids;
    float *bias;
    int32_t n_bias;
} ak__sampler;

/* Validates `p` (a clear message naming the field) and allocates the scratch. `stream`
 * tells the samples of one request apart: the RNG depends only on (p->seed, stream), so
 * results are reproducible whatever the batching. */
ak_status ak__sampler_init(ak__sampler *s, int32_t n_vocab, const ak_sampling_params *p,
                           uint64_t stream);
/* Logit bias: bias[i] is added to the logit of token ids[i] before everything else
 * (copied; ids in [0, n_vocab), biases finite; a repeated id adds up). */
ak_status ak__sampler_set_bias(ak__sampler *s, const int32_t *ids, const float *bias, size_t n);
/* Frees the arrays; the struct may be freed or re-initialized afterwards. NULL-safe, and
 * safe on a zeroed struct. */
void ak__sampler_free(ak__sampler *s);
/* Forgets the penalty history and re-seeds the RNG (preemption by recompute replays the
 * prompt and the generated tokens through accept). */
void ak__sampler_reset(ak__sampler *s);
/* Records one token of the history: is_prompt != 0 for prompt tokens. Ids outside
 * [0, n_vocab) are ignored. */
void ak__sampler_accept(ak__sampler *s, int32_t token, int is_prompt);

/* Takes back one generated token (is_prompt = 0) recorded by accept: speculative decoding
 * accepts draft tokens to compute the next positions' distributions and takes the
 * rejected ones back. Tokens never accepted are ignored. O(1) for the most recent tokens. */
void ak__sampler_unaccept(ak__sampler *s, int32_t token);

/* The final distribution over the vocabulary. logits: (n_vocab) raw model output;
 * probs: (n_vocab) out, zero outside the kept set, sums to 1. NaN logits count as -inf. */
void ak__sampler_dist(ak__sampler *s, const float *logits, float *probs);
/* One draw from `probs` (n_vocab, summing to 1) with the sampler's RNG. */
int32_t ak__sampler_draw(ak__sampler *s, const float *probs);
/* dist + draw without materializing the distribution (no full sort; greedy is a plain
 * argmax). Returns the token. Optional outputs (NULL = not wanted, the work is skipped):
 *   logprob: log p(token);
 *   top, n_top: the min(n_logprobs, tokens with p > 0) most likely tokens, most likely
 *   first (top must hold p.n_logprobs entries).
 * Both use the final sampling distribution, except for greedy (temperature 0), where the
 * one-hot would say nothing: there they use the log-softmax of the penalized logits at
 * temperature 1, which is what OpenAI-style clients expect. Does not call accept. */
int32_t ak__sampler_sample(ak__sampler *s, const float *logits, float *logprob,
                           ak_llm_logprob *top, int32_t *n_top);

/* A uniform double in [0, 1) from the sampler's RNG (speculative verification uses it). */
double ak__sampler_uniform(ak__sampler *s);
/* The first index of the maximum of x[0..n) (vectorized; NaN never wins, 0 when nothing
 * is a number). */
int32_t ak__argmax_f32(const float *x, int32_t n);

#endif /* AK_LLM_ENGINE_SAMPLER_H */
