/* Shared pieces of the LLM subcommands (ak generate, tokenize, logits, bench llm):
 * parsing id lists and sampling flags, loading a model with a clear error. */
#ifndef AK_CLI_LLM_CLI_H
#define AK_CLI_LLM_CLI_H

#include <stddef.h>
#include <stdint.h>

#include "accelkit/llm.h"
#include "cli/cli_opts.h"

/* Parses "1 2 3" or "1,2,3" into a malloc'd array; 0 on success (errors printed). */
int ak_cli_parse_ids(const char *text, int32_t **ids, size_t *n);
/* Encodes text with the model's tokenizer (BOS as the vocabulary asks); 0 on success. */
int ak_cli_encode(const ak_tokenizer *tok, const char *text, int add_special, int32_t **ids,
                  size_t *n);
/* The sampling flags (--temp, --top-k, --top-p, --min-p, --repeat-penalty,
 * --presence-penalty, --frequency-penalty, --seed, --logprobs) as parsed; defaults as
 * ak_sampling_params_default. */
typedef struct ak_cli_sampling {
    double temp, top_p, min_p, repeat_penalty, presence_penalty, frequency_penalty;
    long top_k, seed, logprobs;
} ak_cli_sampling;

#define AK_CLI_SAMPLING_OPTS 9
/* Writes the AK_CLI_SAMPLING_OPTS option-table rows that parse into s. */
void ak_cli_sampling_opts(ak_cli_sampling *s, ak_opt *rows);
void ak_cli_sampling_apply(const ak_cli_sampling *s, ak_sampling_params *p);

/* Loads `model`, runs one prefill of the ids in `ids_text` and writes its float32
 * [n_ids, vocab] logits to `out` as .npy (`ak logits`); with layer >= 0 the logits read
 * after the model's first `layer` layers instead (`ak align --layer-logits`, through
 * model/model_lens.h). Returns an exit code, errors printed. */
int ak_cli_logits_npy(const char *model, const char *ids_text, const char *out, int32_t layer,
                      int32_t threads);

#endif /* AK_CLI_LLM_CLI_H */
