/* Example hooks library for `ak serve --hooks` / `ak generate --hooks`: upper-cases the
 * generated text (post_process) and trims surrounding spaces from prompts (pre_process).
 *
 *   cc -shared -fPIC $(pkg-config --cflags accelkit) examples/hooks/upper.c -o libupper.so
 *   ak serve model.gguf --hooks ./libupper.so
 *
 * Hooks run on the server's threads, several at once: keep them reentrant. */
#include <stddef.h>

#include "accelkit/llm.h"

#if defined(__GNUC__)
#define EXPORT __attribute__((visibility("default")))
#else
#define EXPORT
#endif

/* The size protocol of every text hook: *out_len gets the size of the result; when it
 * is larger than cap, return AK_ERR_INVALID_ARG and the caller retries with that much. */
static ak_status upper(void *user, const char *text, size_t len, char *out, size_t cap,
                       size_t *out_len) {
    (void)user;
    *out_len = len;
    if (len > cap) return AK_ERR_INVALID_ARG;
    for (size_t i = 0; i < len; i++) {
        char c = text[i];
        out[i] = (c >= 'a' && c <= 'z') ? (char)(c - 'a' + 'A') : c; /* UTF-8 bytes pass */
    }
    return AK_OK;
}

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static ak_status trim(void *user, const char *text, size_t len, char *out, size_t cap,
                      size_t *out_len) {
    (void)user;
    size_t b = 0;
    while (b < len && is_space(text[b])) b++;
    while (len > b && is_space(text[len - 1])) len--;
    *out_len = len - b;
    if (len - b > cap) return AK_ERR_INVALID_ARG;
    for (size_t i = b; i < len; i++) out[i - b] = text[i];
    return AK_OK;
}

EXPORT ak_status ak_hooks_init(ak_llm_hooks *hooks);

ak_status ak_hooks_init(ak_llm_hooks *hooks) {
    if (!hooks) return AK_ERR_INVALID_ARG;
    hooks->pre_process = trim;
    hooks->post_process = upper;
    hooks->tokenize = NULL; /* the model's tokenizer */
    hooks->user = NULL;
    return AK_OK;
}
