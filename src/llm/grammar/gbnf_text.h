/* Building GBNF text (internal): a growing NUL-terminated string whose out-of-memory state
 * is sticky (checked once at the end), and GBNF string literals. Used by the JSON-schema
 * and regular-expression converters. */
#ifndef AK_LLM_GRAMMAR_GBNF_TEXT_H
#define AK_LLM_GRAMMAR_GBNF_TEXT_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"

typedef struct sbuf {
    char *v;
    size_t n, cap;
    int oom;
} sbuf;

static inline void sb_add(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *v = realloc(b->v, cap);
        if (!v) {
            b->oom = 1;
            return;
        }
        b->v = v, b->cap = cap;
    }
    memcpy(b->v + b->n, s, n);
    b->n += n;
    b->v[b->n] = 0;
}

static inline void sb_puts(sbuf *b, const char *s) { sb_add(b, s, strlen(s)); }

static inline void sb_printf(sbuf *b, const char *fmt, ...) AK_PRINTF(2, 3);
static inline void sb_printf(sbuf *b, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof tmp) {
        sb_add(b, tmp, (size_t)n);
        return;
    }
    char *big = malloc((size_t)n + 1);
    if (!big) {
        b->oom = 1;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    sb_add(b, big, (size_t)n);
    free(big);
}

/* A GBNF string literal of `n` bytes: quotes, backslashes and controls escaped. */
static inline void sb_literal(sbuf *b, const char *s, size_t n) {
    sb_puts(b, "\"");
    for (size_t i = 0; i < n; ++i) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') sb_printf(b, "\\%c", c);
        else if (c < 0x20 || c == 0x7F) sb_printf(b, "\\x%02X", c);
        else sb_add(b, (const char *)&c, 1);
    }
    sb_puts(b, "\"");
}

#endif
