/* Incremental, UTF-8-safe detokenizing with stop-string hold-back (see detok.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "llm/server/detok.h"

/* ---- growable bytes ------------------------------------------------------------------ */

static ak_status bytes_reserve(ak__bytes *b, size_t extra) {
    if (b->cap - b->len > extra) return AK_OK; /* keeps one byte for a NUL */
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->len <= extra) {
        if (cap > SIZE_MAX / 2) return AK_FAIL(AK_ERR_NO_MEMORY, "byte string too large");
        cap *= 2;
    }
    char *v = realloc(b->v, cap);
    if (!v) return AK_FAIL(AK_ERR_NO_MEMORY, "byte string of %zu", cap);
    b->v = v;
    b->cap = cap;
    return AK_OK;
}

ak_status ak__bytes_append(ak__bytes *b, const void *p, size_t n) {
    AK_CHECK(bytes_reserve(b, n));
    if (n) memcpy(b->v + b->len, p, n);
    b->len += n;
    b->v[b->len] = '\0';
    return AK_OK;
}

ak_status ak__bytes_appendf(ak__bytes *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return AK_FAIL(AK_ERR_INTERNAL, "format '%s'", fmt);
    AK_CHECK(bytes_reserve(b, (size_t)n));
    va_start(ap, fmt);
    vsnprintf(b->v + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return AK_OK;
}

void ak__bytes_free(ak__bytes *b) {
    free(b->v);
    memset(b, 0, sizeof *b);
}

/* ---- UTF-8 --------------------------------------------------------------------------- */

/* The sequence at s[0..n): its length when valid; 0 when it is a valid start cut short
 * by the end of the data; -k when it is invalid after its first k bytes (the maximal
 * subpart that becomes one U+FFFD). */
static int utf8_check(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    int len;
    unsigned lo = 0x80, hi = 0xbf; /* range of the second byte */
    if (c < 0x80) return 1;
    if (c >= 0xc2 && c <= 0xdf) len = 2;
    else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        if (c == 0xe0) lo = 0xa0;
        if (c == 0xed) hi = 0x9f; /* no surrogates */
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        if (c == 0xf0) lo = 0x90;
        if (c == 0xf4) hi = 0x8f; /* ≤ U+10FFFF */
    } else
        return -1;
    for (int k = 1; k < len; k++) {
        if ((size_t)k >= n) return 0;
        unsigned b = s[k];
        if (k == 1 ? (b < lo || b > hi) : (b & 0xc0) != 0x80) return -k;
    }
    return len;
}

size_t ak__utf8_complete_prefix(const char *text, size_t n) {
    const unsigned char *s = (const unsigned char *)text;
    size_t i = 0;
    while (i < n) {
        int k = utf8_check(s + i, n - i);
        if (k == 0) return i;
        i += (size_t)(k > 0 ? k : -k);
    }
    return n;
}

ak_status ak__utf8_sanitize(const char *text, size_t n, ak__bytes *out) {
    const unsigned char *s = (const unsigned char *)text;
    size_t i = 0, run = 0; /* valid bytes not yet copied start at i - run */
    AK_CHECK(bytes_reserve(out, n));
    while (i < n) {
        int k = utf8_check(s + i, n - i);
        if (k > 0) {
            i += (size_t)k;
            run += (size_t)k;
            continue;
        }
        AK_CHECK(ak__bytes_append(out, text + i - run, run));
        AK_CHECK(ak__bytes_append(out, "\xef\xbf\xbd", 3));
        run = 0;
        i += k == 0 ? n - i : (size_t)-k;
    }
    return ak__bytes_append(out, text + n - run, run);
}

/* ---- detokenizer --------------------------------------------------------------------- */

ak_status ak__detok_init(ak__detok *d, const ak_tokenizer *tok, const char *const *stops,
                         size_t n_stops) {
    AK_ARG_CHECK(d != NULL && tok != NULL, "detok: no tokenizer");
    AK_ARG_CHECK(stops != NULL || n_stops == 0, "detok: stops is NULL");
    memset(d, 0, sizeof *d);
    d->tok = tok;
    d->stops = stops;
    d->n_stops = n_stops;
    return AK_OK;
}

void ak__detok_free(ak__detok *d) {
    free(d->text);
    memset(d, 0, sizeof *d);
}

ak_status ak__token_bytes(const ak_tokenizer *tok, int32_t token, ak__bytes *out) {
    out->len = 0;
    size_t need = 0;
    AK_CHECK(bytes_reserve(out, 64));
    ak_status st = ak_tokenizer_decode(tok, &token, 1, 0, out->v, out->cap - 1, &need);
    if (st == AK_ERR_INVALID_ARG && need >= out->cap) {
        AK_CHECK(bytes_reserve(out, need));
        st = ak_tokenizer_decode(tok, &token, 1, 0, out->v, out->cap - 1, &need);
    }
    AK_CHECK(st);
    out->len = need;
    out->v[need] = '\0';
    return AK_OK;
}

ak_status ak__detok_push(ak__detok *d, int32_t token) {
    ak__bytes piece = {d->text, d->len, d->cap};
    ak__bytes tmp = {NULL, 0, 0};
    ak_status st = ak__token_bytes(d->tok, token, &tmp);
    if (st == AK_OK) st = ak__bytes_append(&piece, tmp.v, tmp.len);
    ak__bytes_free(&tmp);
    d->text = piece.v;
    d->len = piece.len;
    d->cap = piece.cap;
    return st;
}

/* Where the unsent text stops being safe: at the first complete stop string in it (its
 * finish event may come after this token's), else at the longest suffix that could still
 * become one. */
static size_t stop_safe_end(const ak__detok *d) {
    size_t end = d->len;
    const char *pending = d->text + d->sent;
    size_t n = d->len - d->sent;
    for (size_t i = 0; i < d->n_stops; i++) {
        size_t m = strlen(d->stops[i]);
        if (m == 0) continue;
        const char *hit = memmem(pending, n, d->stops[i], m);
        if (hit && (size_t)(hit - d->text) < end) end = (size_t)(hit - d->text);
        for (size_t k = m - 1 < n ? m - 1 : n; k > 0 && d->len - k < end; k--)
            if (!memcmp(d->text + d->len - k, d->stops[i], k)) {
                end = d->len - k;
                break;
            }
    }
    return end;
}

ak_status ak__detok_take(ak__detok *d, int final, size_t stop_trim, ak__bytes *out) {
    if (d->done) return AK_OK;
    size_t end;
    /* no text yet leaves d->text NULL, and NULL + 0 is undefined: read "" instead */
    const char *unsent = d->text ? d->text + d->sent : "";
    if (final) {
        end = stop_trim < d->len - d->sent ? d->len - stop_trim : d->sent;
        d->done = 1;
    } else {
        end = stop_safe_end(d);
        end = d->sent + ak__utf8_complete_prefix(unsent, end - d->sent);
    }
    AK_CHECK(ak__utf8_sanitize(unsent, end - d->sent, out));
    d->sent = final ? d->len : end;
    return AK_OK;
}
