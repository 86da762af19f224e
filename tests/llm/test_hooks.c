/* Hooks tests: the example library (examples/hooks/upper.c, built next to the tests) is
 * loaded with ak_llm_hooks_load and its callbacks run; the size protocol helpers grow
 * buffers for expanding hooks and reject lying ones; load failures are reported. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "accelkit/llm.h"
#include "llm/hooks/hooks.h"

#ifndef AK_HOOKS_UPPER
#error "tests/CMakeLists.txt defines AK_HOOKS_UPPER (the example hooks library)"
#endif

static void test_load_example(void **state) {
    (void)state;
    ak_llm_hooks h;
    assert_int_equal(ak_llm_hooks_load(AK_HOOKS_UPPER, &h), AK_OK);
    assert_non_null(h.post_process);
    assert_non_null(h.pre_process);
    assert_null(h.tokenize);
    char *out = NULL;
    size_t n = 0;
    const char *text = "h\xc3\xa9llo, world 42";
    assert_int_equal(ak__hooks_run_text(h.post_process, h.user, text, strlen(text), &out, &n),
                     AK_OK);
    assert_string_equal(out, "H\xc3\xa9LLO, WORLD 42");
    assert_int_equal(n, strlen(text));
    free(out);
    assert_int_equal(ak__hooks_run_text(h.pre_process, h.user, "  \tprompt \n", 11, &out, &n),
                     AK_OK);
    assert_string_equal(out, "prompt");
    free(out);
    /* loading twice is fine: the library is reference counted by the loader */
    ak_llm_hooks again;
    assert_int_equal(ak_llm_hooks_load(AK_HOOKS_UPPER, &again), AK_OK);
    assert_ptr_equal(again.post_process, h.post_process);
}

static void test_load_errors(void **state) {
    (void)state;
    ak_llm_hooks h;
    assert_int_equal(ak_llm_hooks_load("/nonexistent/libhooks.so", &h), AK_ERR_IO);
    assert_non_null(strstr(ak_last_error(), "/nonexistent/libhooks.so"));
    /* a real library without ak_hooks_init */
    assert_int_equal(ak_llm_hooks_load("libm.so.6", &h), AK_ERR_INVALID_ARG);
    assert_non_null(strstr(ak_last_error(), "ak_hooks_init"));
    assert_int_equal(ak_llm_hooks_load("", &h), AK_ERR_INVALID_ARG);
    assert_int_equal(ak_llm_hooks_load(NULL, &h), AK_ERR_INVALID_ARG);
    assert_int_equal(ak_llm_hooks_load(AK_HOOKS_UPPER, NULL), AK_ERR_INVALID_ARG);
}

/* Repeats every byte 100 times: more than the first guess of the helper. */
static ak_status expand(void *user, const char *text, size_t len, char *out, size_t cap,
                        size_t *out_len) {
    int *calls = user;
    (*calls)++;
    *out_len = len * 100;
    if (*out_len > cap) return AK_ERR_INVALID_ARG;
    for (size_t i = 0; i < *out_len; i++) out[i] = text[i / 100];
    return AK_OK;
}

static ak_status liar(void *user, const char *text, size_t len, char *out, size_t cap,
                      size_t *out_len) {
    (void)user, (void)text, (void)len, (void)out;
    *out_len = cap + 1; /* claims success with more bytes than fit */
    return AK_OK;
}

static ak_status greedy(void *user, const char *text, size_t len, char *out, size_t cap,
                        size_t *out_len) {
    (void)user, (void)text, (void)len, (void)out;
    *out_len = cap + 1; /* never satisfied */
    return AK_ERR_INVALID_ARG;
}

static ak_status broken(void *user, const char *text, size_t len, char *out, size_t cap,
                        size_t *out_len) {
    (void)user, (void)text, (void)len, (void)out, (void)cap;
    *out_len = 0;
    return AK_ERR_IO;
}

static void test_text_protocol(void **state) {
    (void)state;
    char *out = NULL;
    size_t n = 0;
    int calls = 0;
    assert_int_equal(ak__hooks_run_text(expand, &calls, "ab", 2, &out, &n), AK_OK);
    assert_int_equal(n, 200);
    assert_int_equal(calls, 2); /* the first guess was too small, then the exact size */
    assert_int_equal(out[99], 'a');
    assert_int_equal(out[100], 'b');
    assert_int_equal(out[200], '\0');
    free(out);
    assert_int_equal(ak__hooks_run_text(NULL, NULL, "same", 4, &out, &n), AK_OK);
    assert_string_equal(out, "same");
    free(out);
    assert_int_equal(ak__hooks_run_text(NULL, NULL, NULL, 0, &out, &n), AK_OK);
    assert_int_equal(n, 0);
    free(out);
    out = NULL;
    assert_int_equal(ak__hooks_run_text(liar, NULL, "x", 1, &out, &n), AK_ERR_INTERNAL);
    assert_int_equal(ak__hooks_run_text(greedy, NULL, "x", 1, &out, &n), AK_ERR_INTERNAL);
    assert_int_equal(ak__hooks_run_text(broken, NULL, "x", 1, &out, &n), AK_ERR_IO);
    assert_null(out);
}

/* One id per byte, but only when there is room for all of them plus 10 extra. */
static ak_status byte_ids(void *user, const char *text, size_t len, int32_t *ids, size_t cap,
                          size_t *n) {
    (void)user;
    *n = len + 10;
    if (*n > cap) return AK_ERR_INVALID_ARG;
    for (size_t i = 0; i < len; i++) ids[i] = (unsigned char)text[i];
    for (size_t i = len; i < *n; i++) ids[i] = -7;
    return AK_OK;
}

static void test_tokenize_hook(void **state) {
    (void)state;
    ak_llm_hooks h;
    memset(&h, 0, sizeof h);
    h.tokenize = byte_ids;
    int32_t *ids = NULL;
    size_t n = 0;
    assert_int_equal(ak__hooks_tokenize(&h, NULL, "AB", 2, 0, &ids, &n), AK_OK);
    assert_int_equal(n, 12);
    assert_int_equal(ids[0], 'A');
    assert_int_equal(ids[1], 'B');
    assert_int_equal(ids[11], -7);
    free(ids);
    /* neither a hook nor a tokenizer */
    assert_int_equal(ak__hooks_tokenize(NULL, NULL, "AB", 2, 0, &ids, &n), AK_ERR_INVALID_ARG);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_load_example),
        cmocka_unit_test(test_load_errors),
        cmocka_unit_test(test_text_protocol),
        cmocka_unit_test(test_tokenize_hook),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
