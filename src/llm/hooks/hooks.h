/* Internal helpers that run ak_llm_hooks callbacks with their size protocol (the output
 * buffer grows until the hook's result fits), shared by `ak serve` and the CLI. */
#ifndef AK_LLM_HOOKS_HOOKS_H
#define AK_LLM_HOOKS_HOOKS_H

#include <stddef.h>
#include <stdint.h>

#include "accelkit/llm.h"

typedef ak_status (*ak__text_hook_fn)(void *user, const char *text, size_t len, char *out,
                                      size_t cap, size_t *out_len);

/* Runs a pre_process/post_process hook on text[0..len). *out gets a malloc'd,
 * NUL-terminated result (the caller frees it); when fn is NULL it is a copy of text. */
ak_status ak__hooks_run_text(ak__text_hook_fn fn, void *user, const char *text, size_t len,
                             char **out, size_t *out_len);

/* Tokenizes with hooks->tokenize when set (hooks may be NULL), else with `tok` and
 * `flags`. *ids gets a malloc'd array of *n_ids tokens (the caller frees it). */
ak_status ak__hooks_tokenize(const ak_llm_hooks *hooks, const ak_tokenizer *tok,
                             const char *text, size_t len, unsigned flags, int32_t **ids,
                             size_t *n_ids);

#endif /* AK_LLM_HOOKS_HOOKS_H */
