/* Stop strings: an Aho-Corasick automaton over the output bytes (see stop.h).
 *
 * The trie is stored as first-child / next-sibling lists (a stop string set is small, so a
 * linear scan of the children is cheaper than 256-entry rows per node). Failure links make
 * every byte an amortized O(1) step; `out` caches the longest stop string that is a suffix
 * of each node's text, so a completed match is seen at the byte where it ends. */
#include "llm/engine/stop.h"

#include <stdlib.h>
#include <string.h>

#include "core/check.h"

static int32_t find_child(const ak__stop_node *nodes, int32_t v, uint8_t c) {
    for (int32_t u = nodes[v].child; u >= 0; u = nodes[u].sibling)
        if (nodes[u].byte == c) return u;
    return -1;
}

static int32_t add_node(ak__stop *st, int32_t parent, uint8_t c) {
    int32_t u = st->n_nodes++;
    ak__stop_node *n = &st->nodes[u];
    n->child = -1;
    n->sibling = st->nodes[parent].child;
    n->fail = 0;
    n->depth = (uint16_t)(st->nodes[parent].depth + 1);
    n->out = 0;
    n->byte = c;
    st->nodes[parent].child = u;
    return u;
}

static void insert(ak__stop *st, const char *str, size_t len) {
    int32_t v = 0;
    for (size_t i = 0; i < len; i++) {
        uint8_t c = (uint8_t)str[i];
        int32_t u = find_child(st->nodes, v, c);
        v = u >= 0 ? u : add_node(st, v, c);
    }
    st->nodes[v].out = (uint16_t)len;
}

/* Failure links in breadth-first order (a node's link is shallower, so already done). */
static ak_status link(ak__stop *st) {
    ak__stop_node *nd = st->nodes;
    int32_t *queue = malloc((size_t)st->n_nodes * sizeof *queue);
    if (!queue) return AK_FAIL(AK_ERR_NO_MEMORY, "stop strings: no memory");
    int32_t head = 0, tail = 0;
    for (int32_t u = nd[0].child; u >= 0; u = nd[u].sibling) queue[tail++] = u;
    while (head < tail) {
        int32_t v = queue[head++];
        if (nd[v].out == 0) nd[v].out = nd[nd[v].fail].out;
        for (int32_t u = nd[v].child; u >= 0; u = nd[u].sibling) {
            int32_t f = nd[v].fail, w;
            while ((w = find_child(nd, f, nd[u].byte)) < 0 && f != 0) f = nd[f].fail;
            nd[u].fail = w >= 0 ? w : 0;
            queue[tail++] = u;
        }
    }
    free(queue);
    return AK_OK;
}

static ak_status check_strings(const char *const *strings, size_t n, size_t *total) {
    AK_ARG_CHECK(n <= AK__STOP_MAX_STRINGS, "stop strings: at most %d allowed (got %zu)",
                 AK__STOP_MAX_STRINGS, n);
    AK_ARG_CHECK(n == 0 || strings != NULL, "stop strings: the array is NULL");
    *total = 0;
    for (size_t i = 0; i < n; i++) {
        AK_ARG_CHECK(strings[i] != NULL, "stop strings: string %zu is NULL", i);
        size_t len = strlen(strings[i]);
        AK_ARG_CHECK(len > 0, "stop strings: string %zu is empty", i);
        AK_ARG_CHECK(len <= AK__STOP_MAX_LEN, "stop strings: string %zu is %zu bytes (max %d)",
                     i, len, AK__STOP_MAX_LEN);
        *total += len;
    }
    return AK_OK;
}

ak_status ak__stop_init(ak__stop *st, const char *const *strings, size_t n) {
    AK_ARG_CHECK(st != NULL, "ak__stop_init: st is NULL");
    memset(st, 0, sizeof *st);
    size_t total = 0;
    AK_CHECK(check_strings(strings, n, &total));
    if (n == 0) return AK_OK;
    st->nodes = malloc((total + 1) * sizeof *st->nodes);
    if (!st->nodes) return AK_FAIL(AK_ERR_NO_MEMORY, "stop strings: no memory");
    memset(&st->nodes[0], 0, sizeof st->nodes[0]);
    st->nodes[0].child = -1;
    st->nodes[0].sibling = -1;
    st->n_nodes = 1;
    for (size_t i = 0; i < n; i++) insert(st, strings[i], strlen(strings[i]));
    ak_status rc = link(st);
    if (rc != AK_OK) ak__stop_free(st);
    return rc;
}

void ak__stop_free(ak__stop *st) {
    if (!st) return;
    free(st->nodes);
    st->nodes = NULL;
    st->n_nodes = 0;
    st->state = 0;
}

void ak__stop_reset(ak__stop *st) { st->state = 0; }

static int32_t step(const ak__stop_node *nd, int32_t v, uint8_t c) {
    for (;;) {
        int32_t u = find_child(nd, v, c);
        if (u >= 0) return u;
        if (v == 0) return 0;
        v = nd[v].fail;
    }
}

int ak__stop_feed(ak__stop *st, const char *bytes, size_t len, size_t *trim) {
    size_t dummy;
    if (!trim) trim = &dummy;
    *trim = 0;
    if (!st->nodes) return 0;
    const ak__stop_node *nd = st->nodes;
    int32_t v = st->state;
    for (size_t i = 0; i < len; i++) {
        v = step(nd, v, (uint8_t)bytes[i]);
        if (nd[v].out) {
            st->state = v;
            *trim = nd[v].out + (len - i - 1);
            return 1;
        }
    }
    st->state = v;
    *trim = nd[v].depth;
    return 0;
}
