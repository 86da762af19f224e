/* Fuzz: any text given as a GBNF grammar is parsed or refused with a message, and a parsed
 * one runs its incremental state over a text (the input after the first NUL, or a default)
 * and agrees with the backtracking reference on whether the whole text matches — never a
 * crash, a hang past the stack limits, or a status without a message. Either side may
 * give up instead of deciding: the reference when its step budget runs out (-1), the
 * state when a limit stops it (too many stacks or expansions for an ambiguous grammar,
 * nesting too deep: a refusal with a message, not a verdict on the text), and then the
 * two are not compared. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "llm/grammar/grammar.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* 1 when the state's last failure was one of its limits (grammar_state.c's messages). */
static int state_gave_up(void) {
    const char *e = ak_last_error();
    return e && (strstr(e, "too ambiguous") || strstr(e, "nesting too deep") ||
                 strstr(e, "out of memory"));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 4096) return 0;
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = 0;
    size_t glen = strlen(text);
    const char *input = glen < size ? text + glen + 1 : "{\"a\": [1, 2]}";
    size_t ilen = glen < size ? size - glen - 1 : strlen(input);
    ak_llm_grammar gr;
    memset(&gr, 0, sizeof gr);
    ak_status st = ak__gbnf_parse(text, glen, &gr.g);
    if (st != AK_OK) {
        if (!ak_last_error() || !ak_last_error()[0]) abort();
        free(text);
        return 0;
    }
    ak__grammar_state s;
    st = ak__grammar_state_init(&s, &gr);
    if (st == AK_OK) {
        ak_status ast = ak__grammar_state_accept_bytes(&s, input, ilen);
        if (ast != AK_OK && (!ak_last_error() || !ak_last_error()[0])) abort();
        int decided = ast == AK_OK || !state_gave_up();
        int accepted = ast == AK_OK && ak__grammar_state_can_end(&s);
        /* the reference assumes valid UTF-8 and may give up (-1); compare when it decided
         * and the text has no NUL or invalid bytes (it runs only then: its backtracking is
         * most of this target's time) */
        int plain = 1;
        for (size_t i = 0; i < ilen; ++i) plain &= (unsigned char)input[i] > 0 && (unsigned char)input[i] < 0x80;
        int ref = plain && decided ? ak__gbnf_match_reference(&gr.g, input, ilen) : -1;
        if (ref >= 0 && ref != accepted) abort();
        ak__grammar_state_free(&s);
    } else if (!ak_last_error() || !ak_last_error()[0]) {
        abort();
    }
    ak__gbnf_free(&gr.g);
    free(text);
    return 0;
}
