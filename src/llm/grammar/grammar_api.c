/* Constrained decoding: the public entry points (stubs until the engine lands). */
#include "accelkit/llm.h"
#include "core/check.h"
#include "llm/grammar/json_schema.h"

ak_status ak_llm_grammar_compile(const ak_tokenizer *tok, const char *gbnf, size_t len,
                                 ak_llm_grammar **out) {
    (void)tok, (void)gbnf, (void)len;
    if (out) *out = NULL;
    return AK_FAIL(AK_ERR_UNSUPPORTED, "grammar: not implemented yet");
}

void ak_llm_grammar_free(ak_llm_grammar *g) { (void)g; }

ak_status ak__json_schema_rules(const char *schema_json, size_t len, const char *prefix,
                                char **gbnf) {
    (void)schema_json, (void)len, (void)prefix;
    if (gbnf) *gbnf = NULL;
    return AK_FAIL(AK_ERR_UNSUPPORTED, "json schema: not implemented yet");
}

ak_status ak_llm_json_schema_to_gbnf(const char *schema_json, size_t len, char **gbnf) {
    (void)schema_json, (void)len;
    if (gbnf) *gbnf = NULL;
    return AK_FAIL(AK_ERR_UNSUPPORTED, "json schema: not implemented yet");
}
