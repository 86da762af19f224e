/* Stop strings matched on the output bytes of one sample, across token boundaries.
 *
 * An Aho-Corasick automaton over the stop strings (sparse trie + failure links) advances
 * one byte at a time, so a token costs O(its bytes) amortized whatever was generated
 * before, and nothing is allocated after ak__stop_init. The depth of the current state is
 * exactly the length of the longest output suffix that is a prefix of some stop string:
 * the bytes a streaming server must hold back. */
#ifndef AK_LLM_ENGINE_STOP_H
#define AK_LLM_ENGINE_STOP_H

#include <stddef.h>
#include <stdint.h>

#include "accelkit/ak.h"

#define AK__STOP_MAX_STRINGS 16
#define AK__STOP_MAX_LEN 256

typedef struct ak__stop_node {
    int32_t child;   /* first child, -1 = none */
    int32_t sibling; /* next sibling, -1 = none */
    int32_t fail;    /* longest proper suffix that is also a trie node */
    uint16_t depth;  /* bytes from the root */
    uint16_t out;    /* length of the longest stop string ending here (0 = none) */
    uint8_t byte;    /* the byte on the edge from the parent */
} ak__stop_node;

typedef struct ak__stop {
    ak__stop_node *nodes; /* nodes[0] is the root; NULL when there are no strings */
    int32_t n_nodes;
    int32_t state;
} ak__stop;

/* Builds the matcher from `n` strings (copied; NUL-terminated, non-empty, at most
 * AK__STOP_MAX_LEN bytes, at most AK__STOP_MAX_STRINGS of them). n = 0 is valid: it never
 * matches. */
ak_status ak__stop_init(ak__stop *st, const char *const *strings, size_t n);
/* NULL-safe, and safe on a zeroed struct. */
void ak__stop_free(ak__stop *st);
/* Forgets the output seen so far. */
void ak__stop_reset(ak__stop *st);
/* Appends the `len` bytes of one token to the output. Returns 1 when a stop string is now
 * complete: *trim = bytes at the end of the whole output to cut (from the start of the
 * stop string that ends first, the longest of those ending at the same byte, to the end;
 * it may reach into earlier tokens). Returns 0 otherwise, with *trim = bytes at the end of
 * the output that could still start a stop string (to hold back when streaming). trim may
 * be NULL. */
int ak__stop_feed(ak__stop *st, const char *bytes, size_t len, size_t *trim);

#endif /* AK_LLM_ENGINE_STOP_H */
