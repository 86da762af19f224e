/* Small parts of the HTTP server kept out of server.c: API keys (auth.c), TLS files
 * (tls.c), and the /tokenize and /detokenize endpoints (tokenize_ep.c). */
#ifndef AK_LLM_SERVER_SERVER_EXTRAS_H
#define AK_LLM_SERVER_SERVER_EXTRAS_H

#include <stddef.h>

#include "llm/server/oai.h"

/* ---- API keys ------------------------------------------------------------------------ */

typedef struct ak__auth {
    char **keys; /* NULL-free list; n == 0 = no key needed */
    size_t n;
} ak__auth;

/* Collects `key` (may be NULL) and the lines of `key_file` (may be NULL; blank lines and
 * lines starting with # skipped). Warns when the file can be read by other users. */
ak_status ak__auth_load(ak__auth *a, const char *key, const char *key_file);
void ak__auth_free(ak__auth *a);
/* Whether an "Authorization" header value carries one of the keys as a Bearer token.
 * Compares in time independent of where the given token differs from a key. */
int ak__auth_check(const ak__auth *a, const char *authorization);

/* ---- TLS ----------------------------------------------------------------------------- */

typedef struct ak__tls {
    char *cert, *key; /* PEM text, NUL-terminated; NULL = plain HTTP */
} ak__tls;

/* Reads both PEM files (both or neither must be given) and checks that libmicrohttpd was
 * built with TLS. */
ak_status ak__tls_load(ak__tls *t, const char *cert_file, const char *key_file);
void ak__tls_free(ak__tls *t);

/* ---- /tokenize and /detokenize ------------------------------------------------------- */

/* {"content": str, "add_special": bool, "with_pieces": bool} → {"tokens": [...]}, the
 * tokens as ids or, with_pieces, as {"id", "piece"} (piece: the token's text, or its bytes
 * as a list when they are not valid UTF-8 on their own), as llama-server answers. */
ak_status ak__tokenize_json(const ak_tokenizer *tok, const char *body, size_t len,
                            ak__bytes *out, ak__oai_error *err);
/* {"tokens": [ids]} → {"content": text} (invalid UTF-8 replaced by U+FFFD). */
ak_status ak__detokenize_json(const ak_tokenizer *tok, int32_t n_vocab, const char *body,
                              size_t len, ak__bytes *out, ak__oai_error *err);

#endif /* AK_LLM_SERVER_SERVER_EXTRAS_H */
