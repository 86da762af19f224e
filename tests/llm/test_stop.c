/* Stop-string tests: hand-written cases (a string split over tokens, matches reaching into
 * earlier tokens, overlapping candidates, several strings, hold-back counts, bytes after
 * the match inside the same token, UTF-8), argument checks, and a randomized comparison
 * with a brute-force matcher that keeps the whole output and searches it after every
 * token. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "accelkit/ak.h"
#include "llm/engine/stop.h"

static void init(ak__stop *st, const char *const *strings, size_t n) {
    assert_int_equal(ak__stop_init(st, strings, n), AK_OK);
}

/* Feeds `tok` and checks the result and trim. */
static void feed(ak__stop *st, const char *tok, int want, size_t want_trim) {
    size_t trim = 12345;
    int got = ak__stop_feed(st, tok, strlen(tok), &trim);
    if (got != want || trim != want_trim)
        fail_msg("feeding \"%s\": got %d trim %zu, want %d trim %zu", tok, got, trim, want,
                 want_trim);
}

static void test_across_tokens(void **state) {
    (void)state;
    const char *const s1[] = {"STOP"};
    ak__stop st;
    init(&st, s1, 1);
    feed(&st, "hello", 0, 0);
    feed(&st, " S", 0, 1); /* "S" could start STOP: hold back 1 byte */
    feed(&st, "T", 0, 2);
    feed(&st, "O", 0, 3);
    feed(&st, "Px", 1, 5); /* STOP spans three earlier tokens; "x" follows in this one */
    ak__stop_reset(&st);
    feed(&st, "ST", 0, 2);
    feed(&st, "ate", 0, 0); /* the candidate died: release everything */
    feed(&st, "xxSTOPyySTOP", 1, 10); /* the first occurrence counts: cut "STOPyySTOP" */
    ak__stop_reset(&st);
    feed(&st, "", 0, 0);
    feed(&st, "STOP", 1, 4);
    ak__stop_free(&st);
}

/* Candidates that overlap themselves: after a failed partial match the automaton must fall
 * back to the longest suffix that is still a prefix. */
static void test_overlapping(void **state) {
    (void)state;
    const char *const s1[] = {"abac"};
    ak__stop st;
    init(&st, s1, 1);
    feed(&st, "ab", 0, 2);
    feed(&st, "ab", 0, 2); /* "abab": "ab" may still start abac */
    feed(&st, "a", 0, 3);  /* "ababa" ends in "aba" */
    feed(&st, "c", 1, 4);
    ak__stop_free(&st);

    const char *const s2[] = {"aaab"};
    init(&st, s2, 1);
    feed(&st, "aaaa", 0, 3);
    feed(&st, "aab", 1, 4);
    ak__stop_free(&st);
}

static void test_several_strings(void **state) {
    (void)state;
    /* "b" ends before "abc" does: the earliest-ending match wins */
    const char *const s1[] = {"abc", "b"};
    ak__stop st;
    init(&st, s1, 2);
    feed(&st, "xa", 0, 1);
    feed(&st, "bc", 1, 2); /* cut "bc": the output becomes "xa" */
    ak__stop_free(&st);
    /* a string inside another: at the same end byte the longer one is cut */
    const char *const s2[] = {"</s>", "s>", "\n\n"};
    init(&st, s2, 3);
    feed(&st, "text</", 0, 2);
    feed(&st, "s>", 1, 4);
    ak__stop_reset(&st);
    feed(&st, "as", 0, 1);
    feed(&st, ">!", 1, 3); /* "s>" then "!" */
    ak__stop_reset(&st);
    feed(&st, "line\n", 0, 1);
    feed(&st, "\nnext", 1, 6);
    ak__stop_free(&st);
    /* hold back the longest candidate among several */
    const char *const s3[] = {"xyz", "yzw", "zwv"};
    init(&st, s3, 3);
    feed(&st, "..xy", 0, 2);
    feed(&st, "z", 1, 3);
    ak__stop_reset(&st);
    feed(&st, "..y", 0, 1);
    feed(&st, "zw", 1, 3); /* "yzw" is complete */
    ak__stop_free(&st);
}

static void test_utf8_and_long(void **state) {
    (void)state;
    const char *const s1[] = {"\xe3\x80\x82" /* 。 */, "User:"};
    ak__stop st;
    init(&st, s1, 2);
    feed(&st, "\xe4\xbd\xa0\xe3", 0, 1); /* half of 。 arrived */
    feed(&st, "\x80", 0, 2);
    feed(&st, "\x82\xe5\xa5\xbd", 1, 6);
    ak__stop_reset(&st);
    char big[2000];
    memset(big, 'u', sizeof big - 1);
    big[sizeof big - 1] = 0;
    memcpy(big + 1500, "User:", 5);
    feed(&st, big, 1, sizeof big - 1 - 1500);
    ak__stop_free(&st);

    char longest[AK__STOP_MAX_LEN + 1];
    memset(longest, 'q', AK__STOP_MAX_LEN);
    longest[AK__STOP_MAX_LEN] = 0;
    const char *const s2[] = {longest};
    init(&st, s2, 1);
    for (int i = 0; i < AK__STOP_MAX_LEN - 1; i++) feed(&st, "q", 0, (size_t)i + 1);
    feed(&st, "q", 1, AK__STOP_MAX_LEN);
    ak__stop_free(&st);
}

static void test_args(void **state) {
    (void)state;
    ak__stop st;
    /* no strings: valid, never matches, holds nothing */
    init(&st, NULL, 0);
    feed(&st, "anything", 0, 0);
    assert_int_equal(ak__stop_feed(&st, "x", 1, NULL), 0);
    ak__stop_free(&st);
    ak__stop_free(&st); /* twice is fine */
    ak__stop_free(NULL);

    const char *const empty[] = {"ok", ""};
    assert_int_equal(ak__stop_init(&st, empty, 2), AK_ERR_INVALID_ARG);
    assert_non_null(strstr(ak_last_error(), "empty"));
    const char *const null_one[] = {"ok", NULL};
    assert_int_equal(ak__stop_init(&st, null_one, 2), AK_ERR_INVALID_ARG);
    assert_int_equal(ak__stop_init(&st, NULL, 1), AK_ERR_INVALID_ARG);
    char too_long[AK__STOP_MAX_LEN + 2];
    memset(too_long, 'a', sizeof too_long - 1);
    too_long[sizeof too_long - 1] = 0;
    const char *const tl[] = {too_long};
    assert_int_equal(ak__stop_init(&st, tl, 1), AK_ERR_INVALID_ARG);
    const char *many[AK__STOP_MAX_STRINGS + 1];
    for (int i = 0; i <= AK__STOP_MAX_STRINGS; i++) many[i] = "s";
    assert_int_equal(ak__stop_init(&st, many, AK__STOP_MAX_STRINGS + 1), AK_ERR_INVALID_ARG);
    init(&st, many, AK__STOP_MAX_STRINGS); /* the maximum, duplicates included */
    feed(&st, "xs", 1, 1);
    ak__stop_free(&st);
    assert_int_equal(ak__stop_init(NULL, many, 1), AK_ERR_INVALID_ARG);
}

/* ---- randomized against brute force ------------------------------------------------ */

typedef struct brute {
    char out[4096];
    size_t len;
    const char *const *strings;
    size_t n;
} brute;

static int ends_with_at(const brute *b, size_t end, const char *s) {
    size_t l = strlen(s);
    return l <= end && memcmp(b->out + end - l, s, l) == 0;
}

/* The same contract as ak__stop_feed, by searching the whole output. */
static int brute_feed(brute *b, const char *tok, size_t len, size_t *trim) {
    size_t old = b->len;
    memcpy(b->out + b->len, tok, len);
    b->len += len;
    for (size_t end = old + 1; end <= b->len; end++) {
        size_t best = 0;
        for (size_t k = 0; k < b->n; k++)
            if (ends_with_at(b, end, b->strings[k]) && strlen(b->strings[k]) > best)
                best = strlen(b->strings[k]);
        if (best) {
            *trim = b->len - (end - best);
            return 1;
        }
    }
    *trim = 0; /* longest suffix that is a proper prefix of a string */
    for (size_t k = 0; k < b->n; k++) {
        size_t l = strlen(b->strings[k]);
        for (size_t h = l - 1; h > *trim; h--)
            if (h <= b->len && memcmp(b->out + b->len - h, b->strings[k], h) == 0) {
                *trim = h;
                break;
            }
    }
    return 0;
}

static uint64_t rng(uint64_t *st) {
    *st = *st * 6364136223846793005ull + 1442695040888963407ull;
    return *st >> 33;
}

static void random_word(uint64_t *seed, char *buf, size_t max_len) {
    size_t len = 2 + rng(seed) % (max_len - 1); /* 2..max_len: 1-byte strings end runs early */
    for (size_t i = 0; i < len; i++) buf[i] = (char)('a' + rng(seed) % 3);
    buf[len] = 0;
}

static uint64_t g_feeds, g_matches;

static void one_random_run(uint64_t *seed) {
    char words[4][8];
    const char *strings[4];
    size_t n = 1 + rng(seed) % 4;
    for (size_t k = 0; k < n; k++) {
        random_word(seed, words[k], k == 0 ? 6 : 4);
        strings[k] = words[k];
    }
    ak__stop st;
    init(&st, strings, n);
    brute b = {.len = 0, .strings = strings, .n = n};
    for (int t = 0; t < 60; t++) {
        char tok[8];
        size_t len = rng(seed) % 5;
        for (size_t i = 0; i < len; i++) tok[i] = (char)('a' + rng(seed) % 3);
        size_t trim, want_trim;
        int got = ak__stop_feed(&st, tok, len, &trim);
        int want = brute_feed(&b, tok, len, &want_trim);
        if (got != want || trim != want_trim)
            fail_msg("output \"%.*s\": got %d/%zu, want %d/%zu", (int)b.len, b.out, got, trim,
                     want, want_trim);
        g_feeds++;
        if (got) {
            g_matches++;
            break;
        }
    }
    ak__stop_free(&st);
}

static void test_random_vs_brute_force(void **state) {
    (void)state;
    uint64_t seed = 2024;
    for (int run = 0; run < 20000; run++) one_random_run(&seed);
    print_message("%llu tokens fed, %llu matches\n", (unsigned long long)g_feeds,
                  (unsigned long long)g_matches);
    assert_true(g_matches > 5000 && g_feeds > 100000);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_across_tokens),
        cmocka_unit_test(test_overlapping),
        cmocka_unit_test(test_several_strings),
        cmocka_unit_test(test_utf8_and_long),
        cmocka_unit_test(test_args),
        cmocka_unit_test(test_random_vs_brute_force),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
