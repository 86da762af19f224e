/* Fuzz: the server's incremental detokenizer and UTF-8 sanitizer (src/llm/server/detok.c).
 * Input: a stop string up to the first NUL, then token ids (two bytes each, modulo the
 * vocabulary of tests/fuzz/corpus/fuzz_gguf/spm_vocab.gguf, a byte-fallback SPM vocab).
 * Checked: every piece handed out is valid UTF-8; nothing handed out before the end
 * holds the stop string; without a stop string the pieces join to the sanitized text of
 * all tokens; the sanitizer's output is valid UTF-8 and a fixed point; the complete
 * prefix is never longer than its input. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accelkit/llm.h"
#include "llm/server/detok.h"

static ak_tokenizer *g_tok;
static int32_t g_n_vocab;

static void load_vocab(void) {
    if (g_tok) return;
    FILE *f = fopen(AK_SOURCE_DIR "/tests/fuzz/corpus/fuzz_gguf/spm_vocab.gguf", "rb");
    if (!f) abort();
    static unsigned char buf[65536];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    ak_gguf *g = NULL;
    ak_tokenizer_info info;
    if (ak_gguf_open_memory(buf, n, &g) != AK_OK || ak_tokenizer_from_gguf(g, &g_tok) != AK_OK ||
        ak_tokenizer_get_info(g_tok, &info) != AK_OK)
        abort();
    ak_gguf_close(g); /* the tokenizer copied what it needs; it lives for the process */
    g_n_vocab = info.n_vocab;
}

/* 1 when text[0..n) is valid UTF-8 (sanitizing changes nothing). */
static int valid_utf8(const char *text, size_t n) {
    ak__bytes b = {NULL, 0, 0};
    if (ak__utf8_sanitize(text, n, &b) != AK_OK) abort();
    int same = b.len == n && (n == 0 || !memcmp(b.v, text, n));
    ak__bytes_free(&b);
    return same;
}

static void check_sanitizer(const uint8_t *data, size_t size) {
    ak__bytes once = {NULL, 0, 0};
    if (ak__utf8_sanitize((const char *)data, size, &once) != AK_OK) abort();
    if (!valid_utf8(once.v ? once.v : "", once.len)) abort();
    if (ak__utf8_complete_prefix((const char *)data, size) > size) abort();
    ak__bytes_free(&once);
}

static void check_detok(const char *stop, const uint8_t *ids, size_t n_bytes) {
    const char *stops[1] = {stop};
    size_t n_stops = stop[0] ? 1 : 0;
    ak__detok d;
    if (ak__detok_init(&d, g_tok, stops, n_stops) != AK_OK) abort();
    ak__bytes out = {NULL, 0, 0}, piece = {NULL, 0, 0};
    for (size_t i = 0; i + 1 < n_bytes; i += 2) {
        int32_t id = (int32_t)(((unsigned)ids[i] << 8 | ids[i + 1]) % (unsigned)g_n_vocab);
        if (ak__detok_push(&d, id) != AK_OK) abort();
        piece.len = 0;
        if (ak__detok_take(&d, 0, 0, &piece) != AK_OK) abort();
        if (!valid_utf8(piece.v ? piece.v : "", piece.len)) abort();
        if (piece.len && ak__bytes_append(&out, piece.v, piece.len) != AK_OK) abort();
        if (n_stops && out.len && memmem(out.v, out.len, stop, strlen(stop))) abort();
    }
    piece.len = 0;
    if (ak__detok_take(&d, 1, 0, &piece) != AK_OK) abort();
    if (!valid_utf8(piece.v ? piece.v : "", piece.len)) abort();
    if (piece.len && ak__bytes_append(&out, piece.v, piece.len) != AK_OK) abort();
    if (!n_stops) {
        ak__bytes all = {NULL, 0, 0};
        if (ak__utf8_sanitize(d.text ? d.text : "", d.len, &all) != AK_OK) abort();
        if (all.len != out.len || (all.len && memcmp(all.v, out.v, all.len))) abort();
        ak__bytes_free(&all);
    }
    ak__bytes_free(&piece);
    ak__bytes_free(&out);
    ak__detok_free(&d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    load_vocab();
    check_sanitizer(data, size);
    const uint8_t *nul = memchr(data, 0, size);
    size_t stop_len = nul ? (size_t)(nul - data) : 0;
    if (stop_len > 64) stop_len = 64;
    char stop[65];
    memcpy(stop, data, stop_len);
    stop[stop_len] = '\0';
    size_t skip = nul ? (size_t)(nul - data) + 1 : 0;
    check_detok(stop, data + skip, size - skip);
    return 0;
}
