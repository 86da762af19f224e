/* JSON Schema numeric ranges → GBNF (internal): json_number.c. */
#ifndef AK_LLM_GRAMMAR_JSON_NUMBER_H
#define AK_LLM_GRAMMAR_JSON_NUMBER_H

#include <cjson/cJSON.h>

#include "llm/grammar/gbnf_text.h"

/* Appends to o an expression for the integers (integer = 1) or decimals of the schema's
 * minimum / exclusiveMinimum / maximum / exclusiveMaximum range and sets *bounded; with
 * no bound it appends nothing and sets *bounded = 0. An empty range gives
 * AK_ERR_INVALID_ARG, a non-numeric or over-16-digit bound AK_ERR_UNSUPPORTED. */
ak_status ak__json_number_range(const cJSON *s, int integer, sbuf *o, int *bounded);

#endif
