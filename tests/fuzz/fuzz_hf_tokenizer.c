/* Fuzz: a Hugging Face tokenizer.json (with tokenizer_config.json): the input is
 * tokenizer.json, optionally followed by a NUL and tokenizer_config.json. The tokenizer is
 * built as the model loader builds it (ak__hf_tokenizer_dir) or refused with a message
 * naming the component; a built one must encode a fixed text (spaces, digits, accents,
 * CJK, emoji, special-token spellings, invalid UTF-8) to ids inside its vocabulary and
 * decode them back without fault. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_file.h"
#include "llm/hf/hf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char k_text[] = "Hello world!  It's 2024: caf\xc3\xa9 na\xc3\xafve \xe4\xbd\xa0\xe5\xa5\xbd "
                             "\xf0\x9f\x98\x80\t\n<s> </s> <unk> [CLS] <|endoftext|> \xe2\x96\x81x "
                             "\xff\xfe ab##c 1234567 ";

static void use_tokenizer(const ak_tokenizer *t) {
    ak_tokenizer_info info;
    if (ak_tokenizer_get_info(t, &info) != AK_OK || info.n_vocab <= 0) abort();
    int32_t ids[512];
    size_t n = 0;
    size_t len = sizeof k_text - 1;
    if (ak_tokenizer_encode(t, k_text, len, AK_TOK_ADD_SPECIAL | AK_TOK_PARSE_SPECIAL, ids,
                            sizeof ids / sizeof *ids, &n) != AK_OK)
        return;
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= info.n_vocab) abort();
    char out[8192];
    size_t out_len;
    ak_tokenizer_decode(t, ids, n, AK_TOK_RENDER_SPECIAL, out, sizeof out, &out_len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *nul = memchr(data, '\0', size);
    size_t json_len = nul ? (size_t)(nul - data) : size;
    fuzz_write_file("tokenizer.json", data, json_len);
    if (nul) fuzz_write_file("tokenizer_config.json", nul + 1, size - json_len - 1);
    else fuzz_remove_file("tokenizer_config.json");
    ak_tokenizer *t = NULL;
    if (ak__hf_tokenizer_dir(fuzz_dir(), 0, &t) != AK_OK) {
        if (t) abort();
        fuzz_refused("tokenizer");
        return 0;
    }
    fuzz_accepted("tokenizer");
    use_tokenizer(t);
    ak_tokenizer_free(t);
    return 0;
}
