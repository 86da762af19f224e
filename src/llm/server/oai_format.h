/* Structured output for the OpenAI endpoints: response_format (text, json_object,
 * json_schema) and llama.cpp's `grammar` (GBNF) and `json_schema` fields turned into one
 * GBNF text, and the server's cache of grammars compiled from such texts. */
#ifndef AK_LLM_SERVER_OAI_FORMAT_H
#define AK_LLM_SERVER_OAI_FORMAT_H

#include <cjson/cJSON.h>

#include "accelkit/llm.h"
#include "llm/server/oai.h"

/* Reads the fields of the request body `obj`; *gbnf = the grammar text (free with free())
 * or NULL when the output is unconstrained. A 400 in `err` (AK_ERR_INVALID_ARG) names the
 * field: two of them at once, a bad type, a schema the converter refuses. */
ak_status ak__oai_parse_format(const cJSON *obj, char **gbnf, ak__oai_error *err);

/* The grammar compiled from `gbnf` for `tok`, from a bounded LRU cache keyed by the text
 * (clients repeat the same schema); held until ak__oai_grammar_release. A grammar that
 * does not compile is a 400 in `err`. */
ak_status ak__oai_grammar_acquire(const ak_tokenizer *tok, const char *gbnf,
                                  const ak_llm_grammar **out, ak__oai_error *err);
void ak__oai_grammar_release(const ak_llm_grammar *g);

#endif
