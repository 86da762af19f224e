/* For the server tests (include after cmocka.h): the byte-fallback token <0xXX> of a
 * byte, taken from the tokenizer's own byte table (SPM vocabularies have all 256); a
 * vocabulary without that token fails the test. */
#ifndef AK_TESTS_LLM_BYTE_TOKEN_H
#define AK_TESTS_LLM_BYTE_TOKEN_H

#include <string.h>

#include "accelkit/llm.h"
#include "llm/tokenizer/tokenizer.h"

static inline int32_t byte_token_of(const ak_tokenizer *tok, unsigned b) {
    int32_t id = tok->byte_token[b & 255]; /* <0xXX>, else the 1-byte text, else -1 */
    const char *text;
    size_t n;
    if (id < 0 || ak_tokenizer_token_text(tok, id, &text, &n) != AK_OK || n != 6 ||
        strncmp(text, "<0x", 3) != 0)
        fail_msg("the vocabulary has no <0x%02X> token", b & 255);
    return id;
}

#endif /* AK_TESTS_LLM_BYTE_TOKEN_H */
