/* JSON Schema → GBNF rules (internal): the converter behind ak_llm_json_schema_to_gbnf,
 * usable to embed several schemas in one grammar. */
#ifndef AK_LLM_GRAMMAR_JSON_SCHEMA_H
#define AK_LLM_GRAMMAR_JSON_SCHEMA_H

#include <stddef.h>

#include "accelkit/llm.h"

/* Emits GBNF rules (NUL-terminated, free with ak_free) whose names all start with
 * `prefix` and whose top rule is named exactly `prefix` (there is no `root`), accepting
 * the JSON values the schema describes. `prefix`: [a-zA-Z0-9-]+. A keyword outside the
 * supported subset gives AK_ERR_UNSUPPORTED naming it. */
ak_status ak__json_schema_rules(const char *schema_json, size_t len, const char *prefix,
                                char **gbnf);

/* 1 when no value generated for branch a validates against branch b nor the reverse, as far
 * as the rules in json_schema_oneof.c can prove; 0 when they may overlap. Both are
 * schemas with their top-level $ref already resolved. */
struct cJSON;
int ak__json_schema_disjoint(const struct cJSON *a, const struct cJSON *b);

#endif
