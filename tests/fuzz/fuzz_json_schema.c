/* Fuzz: any text given as a JSON schema is converted to GBNF or refused with a message;
 * what the converter writes always parses as a grammar (the converter never emits broken
 * GBNF), and its prefixed form names no rule `root`. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "accelkit/llm.h"
#include "llm/grammar/grammar.h"
#include "llm/grammar/json_schema.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 8192) return 0;
    char *gbnf = NULL;
    ak_status st = ak_llm_json_schema_to_gbnf((const char *)data, size, &gbnf);
    if (st != AK_OK) {
        if (gbnf || !ak_last_error() || !ak_last_error()[0]) abort();
        return 0;
    }
    ak__gbnf g;
    st = ak__gbnf_parse(gbnf, strlen(gbnf), &g);
    /* a grammar over the limits is the only acceptable refusal of converter output */
    if (st != AK_OK && !strstr(ak_last_error(), "more than")) abort();
    if (st == AK_OK) ak__gbnf_free(&g);
    ak_free(gbnf);
    char *rules = NULL;
    if (ak__json_schema_rules((const char *)data, size, "p", &rules) == AK_OK) {
        if (strstr(rules, "\nroot ::=") || strncmp(rules, "root ::=", 8) == 0) abort();
        ak_free(rules);
    }
    return 0;
}
