/* The "logit lens" of accelkit's LLM: the logits the model would give if it stopped after
 * its first L layers (final norm and output matrix applied to the hidden state there).
 * `ak align --ref torch --layers` compares them, layer by layer, with a PyTorch reference
 * computing the same, to find the layer where an error starts. */
#ifndef AK_LLM_MODEL_MODEL_LENS_H
#define AK_LLM_MODEL_MODEL_LENS_H

#include <stddef.h>
#include <stdint.h>

#include "accelkit/llm.h"

/* Like ak_llm_model_logits (n_ids x n_vocab floats into `logits`), through the first
 * n_layers layers only (1 .. the model's count, which gives its logits). */
ak_status ak__llm_model_lens_logits(const ak_llm_model *m, int32_t n_layers,
                                    const int32_t *ids, size_t n_ids, float *logits,
                                    int32_t n_threads);

#endif /* AK_LLM_MODEL_MODEL_LENS_H */
