/* Shared pieces of the LLM subcommands (ak generate, tokenize, logits, bench llm):
 * parsing id lists and sampling flags, loading a model with a clear error. */
#ifndef AK_CLI_LLM_CLI_H
#define AK_CLI_LLM_CLI_H

#include <stddef.h>
#include <stdint.h>

#include "accelkit/llm.h"

/* Parses "1 2 3" or "1,2,3" into a malloc'd array; 0 on success (errors printed). */
int ak_cli_parse_ids(const char *text, int32_t **ids, size_t *n);
/* Encodes text with the model's tokenizer (BOS as the vocabulary asks); 0 on success. */
int ak_cli_encode(const ak_tokenizer *tok, const char *text, int add_special, int32_t **ids,
                  size_t *n);
/* Consumes a sampling flag at argv[*i] (--temp, --top-k, --top-p, --min-p,
 * --repeat-penalty, --presence-penalty, --frequency-penalty, --seed, --logprobs):
 * 1 when it was one (and *i advanced past its value), 0 when not, -1 on a bad value. */
int ak_cli_sampling_flag(int argc, char **argv, int *i, ak_sampling_params *p);
/* Reads a numeric option value at argv[*i + 1]; 0 on success (errors printed). */
int ak_cli_flag_int(int argc, char **argv, int *i, long lo, long hi, long *out);
int ak_cli_flag_double(int argc, char **argv, int *i, double *out);

#endif /* AK_CLI_LLM_CLI_H */
