/* Incremental detokenizer of the server: turns the tokens of one sample into text pieces
 * that are safe to send now — never half a UTF-8 code point, never bytes that may still
 * turn out to be the start of a stop string (the engine reports a matched stop string
 * with ak_llm_event.stop_trim, and those bytes must never have been sent). */
#ifndef AK_LLM_SERVER_DETOK_H
#define AK_LLM_SERVER_DETOK_H

#include <stddef.h>
#include <stdint.h>

#include "accelkit/llm.h"

typedef struct ak__detok {
    const ak_tokenizer *tok;      /* borrowed */
    const char *const *stops;     /* borrowed; the engine's stop strings */
    size_t n_stops;
    char *text;                   /* every decoded byte of the sample so far */
    size_t len, cap;
    size_t sent;                  /* text[0..sent) has been handed out */
    int done;
} ak__detok;

/* A growable byte string (pieces, JSON, SSE): the owner frees `v`. */
typedef struct ak__bytes {
    char *v;
    size_t len, cap;
} ak__bytes;

ak_status ak__bytes_append(ak__bytes *b, const void *p, size_t n);
ak_status ak__bytes_appendf(ak__bytes *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
void ak__bytes_free(ak__bytes *b);

ak_status ak__detok_init(ak__detok *d, const ak_tokenizer *tok, const char *const *stops,
                         size_t n_stops);
void ak__detok_free(ak__detok *d);

/* Decodes one token and appends its bytes (control tokens add nothing). */
ak_status ak__detok_push(ak__detok *d, int32_t token);

/* Appends to `out` the text that can be sent now, as valid UTF-8 (invalid bytes become
 * U+FFFD). With `final`, the last `stop_trim` bytes are dropped and everything else is
 * flushed. */
ak_status ak__detok_take(ak__detok *d, int final, size_t stop_trim, ak__bytes *out);

/* The bytes one token decodes to (for logprobs), raw; `out` is reset first. */
ak_status ak__token_bytes(const ak_tokenizer *tok, int32_t token, ak__bytes *out);

/* Appends text[0..n) to out as valid UTF-8, invalid sequences replaced by U+FFFD. */
ak_status ak__utf8_sanitize(const char *text, size_t n, ak__bytes *out);

/* Length of the longest prefix of text[0..n) that does not end inside a code point that
 * later bytes could still complete. */
size_t ak__utf8_complete_prefix(const char *text, size_t n);

#endif /* AK_LLM_SERVER_DETOK_H */
