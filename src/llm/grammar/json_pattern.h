/* JSON Schema `pattern` → GBNF (internal): see json_pattern.c for the regular-expression
 * subset and how each construct is written. */
#ifndef AK_LLM_GRAMMAR_JSON_PATTERN_H
#define AK_LLM_GRAMMAR_JSON_PATTERN_H

#include <stddef.h>

#include "llm/grammar/gbnf_text.h"

/* Appends to o a GBNF expression for the JSON strings (quotes included) that the regular
 * expression `pattern` (len bytes of UTF-8) matches somewhere; `any_char` names the rule
 * of one JSON string character (used beside an unanchored side). A construct outside the
 * subset gives AK_ERR_UNSUPPORTED naming it and its offset. */
ak_status ak__json_pattern_expr(const char *pattern, size_t len, const char *any_char, sbuf *o);

#endif
