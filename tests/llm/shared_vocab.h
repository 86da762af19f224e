/* Test helper: llama.cpp's vocabulary test files, the tokenizer tests' data, which live
 * outside the checkout in ../shared/llm/vocab ($AK_SHARED_DIR/llm/vocab when set): finding
 * the folder (or failing), opening its vocabulary GGUFs and walking
 * its .inp/.out cases. Include after <cmocka.h>; used by test_tokenizer.c and test_hf.c. */
#ifndef AK_TEST_SHARED_VOCAB_H
#define AK_TEST_SHARED_VOCAB_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "accelkit/llm.h"

static char g_shared[4096];

/* 1 when the shared data folder (with llm/vocab) exists; g_shared then names it. */
static inline int find_shared(void) {
    const char *env = getenv("AK_SHARED_DIR");
    snprintf(g_shared, sizeof g_shared, "%s", env && env[0] ? env : AK_SOURCE_DIR "/../shared");
    char probe[4200];
    struct stat sb;
    snprintf(probe, sizeof probe, "%s/llm/vocab", g_shared);
    return stat(probe, &sb) == 0 && S_ISDIR(sb.st_mode);
}

/* Returns when the folder is there; without it the test fails, naming the folder (the
 * tokenizer tests are never skipped). */
static inline void require_shared(void) {
    if (find_shared()) return;
    fail_msg("%s/llm/vocab is missing: the tokenizer tests need llama.cpp's vocabulary test "
             "files there (set AK_SHARED_DIR to their folder's parent)", g_shared);
}

static inline unsigned char *read_all(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    *n = 0;
    if (!f) return NULL;
    size_t cap = 1 << 16, len = 0, k;
    unsigned char *b = malloc(cap);
    while ((k = fread(b + len, 1, cap - len, f)) > 0) {
        len += k;
        if (len == cap) b = realloc(b, cap *= 2);
    }
    fclose(f);
    *n = len;
    return b;
}

/* The shared vocabulary `name` (ggml-vocab-NAME.gguf) as a GGUF; the test fails if it
 * does not open. */
static inline ak_gguf *open_shared_vocab(const char *name) {
    char path[4300];
    snprintf(path, sizeof path, "%s/llm/vocab/ggml-vocab-%s.gguf", g_shared, name);
    ak_gguf *g = NULL;
    ak_status st = ak_gguf_open(path, &g);
    if (st != AK_OK) fail_msg("%s: %s", path, ak_last_error());
    return g;
}

/* ---- llama.cpp's .inp/.out cases ------------------------------------------------------ */

#define VOCAB_CASE_SEP "\n__ggml_vocab_test__\n"

/* The space-separated ids of one .out line. */
static inline size_t parse_vocab_ids(const char *line, size_t len, int32_t *ids, size_t cap) {
    size_t n = 0;
    for (size_t i = 0; i < len && n < cap;) {
        while (i < len && line[i] == ' ') i++;
        if (i >= len) break;
        ids[n++] = (int32_t)strtol(line + i, NULL, 10);
        while (i < len && line[i] != ' ') i++;
    }
    return n;
}

typedef void (*vocab_case_fn)(void *ctx, const char *text, size_t len, const char *want,
                              size_t want_len);

/* Calls fn for every case of ggml-vocab-`name`.gguf.inp with its .out line; returns the
 * number of cases. */
static inline size_t for_each_vocab_case(const char *name, vocab_case_fn fn, void *ctx) {
    char path[4300];
    size_t ni, no, total = 0, ip = 0, op = 0, sep_len = strlen(VOCAB_CASE_SEP);
    snprintf(path, sizeof path, "%s/llm/vocab/ggml-vocab-%s.gguf.inp", g_shared, name);
    char *inp = (char *)read_all(path, &ni);
    snprintf(path, sizeof path, "%s/llm/vocab/ggml-vocab-%s.gguf.out", g_shared, name);
    char *out = (char *)read_all(path, &no);
    assert_non_null(inp);
    assert_non_null(out);
    while (ip < ni) {
        const char *sep = memmem(inp + ip, ni - ip, VOCAB_CASE_SEP, sep_len);
        size_t len = sep ? (size_t)(sep - (inp + ip)) : ni - ip;
        assert_true(op < no); /* one expected line per case */
        const char *nl = memchr(out + op, '\n', no - op);
        size_t ol = nl ? (size_t)(nl - (out + op)) : no - op;
        fn(ctx, inp + ip, len, out + op, ol);
        total++;
        ip += len + (sep ? sep_len : 0);
        op += ol + 1;
    }
    free(inp);
    free(out);
    return total;
}

#endif /* AK_TEST_SHARED_VOCAB_H */
