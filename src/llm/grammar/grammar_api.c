/* Constrained decoding: compiling a GBNF grammar against a tokenizer (the parsed rules,
 * each token's piece and the byte trie of the pieces) and the public entry points. */
#include <stdlib.h>
#include <string.h>

#include "accelkit/llm.h"
#include "core/check.h"
#include "llm/grammar/grammar.h"
#include "llm/grammar/json_schema.h"

void ak__mask_cache_free(ak__mask_cache *c);

static void trie_free(ak__trie *t) {
    free(t->child), free(t->sibling), free(t->byte), free(t->first_tok), free(t->next_tok);
    memset(t, 0, sizeof *t);
}

static ak_status trie_grow(ak__trie *t, uint32_t *cap) {
    uint32_t n = *cap * 2;
    uint32_t *c = realloc(t->child, n * sizeof *c);
    if (c) t->child = c;
    uint32_t *s = realloc(t->sibling, n * sizeof *s);
    if (s) t->sibling = s;
    uint8_t *b = realloc(t->byte, n);
    if (b) t->byte = b;
    int32_t *f = realloc(t->first_tok, n * sizeof *f);
    if (f) t->first_tok = f;
    if (!c || !s || !b || !f) return AK_FAIL(AK_ERR_NO_MEMORY, "grammar: out of memory");
    *cap = n;
    return AK_OK;
}

/* The node under `node` for byte b, created when missing (siblings kept sorted by byte). */
static ak_status trie_child(ak__trie *t, uint32_t *cap, uint32_t node, uint8_t b, uint32_t *out) {
    uint32_t prev = 0, ch = t->child[node];
    while (ch && t->byte[ch] < b) prev = ch, ch = t->sibling[ch];
    if (ch && t->byte[ch] == b) {
        *out = ch;
        return AK_OK;
    }
    if (t->n_nodes == *cap) AK_CHECK(trie_grow(t, cap));
    uint32_t n = t->n_nodes++;
    t->child[n] = 0, t->sibling[n] = ch, t->byte[n] = b, t->first_tok[n] = -1;
    if (prev) t->sibling[prev] = n;
    else t->child[node] = n;
    *out = n;
    return AK_OK;
}

static ak_status build_trie(ak_llm_grammar *gr) {
    ak__trie *t = &gr->trie;
    uint32_t cap = 1024;
    t->child = malloc(cap * sizeof *t->child), t->sibling = malloc(cap * sizeof *t->sibling);
    t->byte = malloc(cap), t->first_tok = malloc(cap * sizeof *t->first_tok);
    t->next_tok = malloc((size_t)gr->n_vocab * sizeof *t->next_tok);
    t->n_vocab = gr->n_vocab;
    if (!t->child || !t->sibling || !t->byte || !t->first_tok || !t->next_tok)
        return AK_FAIL(AK_ERR_NO_MEMORY, "grammar: out of memory");
    t->n_nodes = 1;
    t->child[0] = t->sibling[0] = 0, t->byte[0] = 0, t->first_tok[0] = -1;
    for (int32_t id = gr->n_vocab; id-- > 0;) { /* prepending keeps ids ascending per node */
        t->next_tok[id] = -1;
        if (!gr->pieces[id] || gr->is_eog[id]) continue;
        uint32_t node = 0;
        for (uint32_t i = 0; i < gr->piece_len[id]; ++i)
            AK_CHECK(trie_child(t, &cap, node, (uint8_t)gr->pieces[id][i], &node));
        t->next_tok[id] = t->first_tok[node];
        t->first_tok[node] = id;
    }
    return AK_OK;
}

/* Every token's text as the server's detokenizer writes it (control tokens: none). */
static ak_status load_pieces(ak_llm_grammar *gr, const ak_tokenizer *tok) {
    ak_tokenizer_info info;
    AK_CHECK(ak_tokenizer_get_info(tok, &info));
    gr->n_vocab = info.n_vocab;
    gr->eos = info.eos;
    gr->pieces = calloc((size_t)info.n_vocab, sizeof *gr->pieces);
    gr->piece_len = calloc((size_t)info.n_vocab, sizeof *gr->piece_len);
    gr->is_eog = calloc((size_t)info.n_vocab, 1);
    if (!gr->pieces || !gr->piece_len || !gr->is_eog)
        return AK_FAIL(AK_ERR_NO_MEMORY, "grammar: out of memory");
    if (info.eos >= 0 && info.eos < info.n_vocab) gr->is_eog[info.eos] = 1;
    char buf[1024];
    for (int32_t id = 0; id < info.n_vocab; ++id) {
        size_t len = 0;
        if (ak_tokenizer_decode(tok, &id, 1, 0, buf, sizeof buf, &len) != AK_OK || len == 0) continue;
        gr->pieces[id] = malloc(len + 1);
        if (!gr->pieces[id]) return AK_FAIL(AK_ERR_NO_MEMORY, "grammar: out of memory");
        memcpy(gr->pieces[id], buf, len);
        gr->pieces[id][len] = 0;
        gr->piece_len[id] = (uint32_t)len;
    }
    return AK_OK;
}

ak_status ak_llm_grammar_compile(const ak_tokenizer *tok, const char *gbnf, size_t len,
                                 ak_llm_grammar **out) {
    AK_ARG_CHECK(out != NULL, "grammar: out is NULL");
    *out = NULL;
    AK_ARG_CHECK(tok != NULL, "grammar: tokenizer is NULL");
    AK_ARG_CHECK(gbnf != NULL || len == 0, "grammar: text is NULL");
    ak_llm_grammar *gr = calloc(1, sizeof *gr);
    if (!gr) return AK_FAIL(AK_ERR_NO_MEMORY, "grammar: out of memory");
    pthread_mutex_init(&gr->cache_lock, NULL);
    ak_status st = ak__gbnf_parse(gbnf, len, &gr->g);
    if (st == AK_OK) st = load_pieces(gr, tok);
    if (st == AK_OK) st = build_trie(gr);
    if (st == AK_OK) { /* the start state must be reachable within the limits */
        ak__grammar_state s;
        st = ak__grammar_state_init(&s, gr);
        ak__grammar_state_free(&s);
    }
    if (st != AK_OK) {
        ak_llm_grammar_free(gr);
        return st;
    }
    *out = gr;
    return AK_OK;
}

void ak_llm_grammar_free(ak_llm_grammar *g) {
    if (!g) return;
    ak__gbnf_free(&g->g);
    trie_free(&g->trie);
    if (g->pieces)
        for (int32_t i = 0; i < g->n_vocab; ++i) free(g->pieces[i]);
    free(g->pieces), free(g->piece_len), free(g->is_eog);
    ak__mask_cache_free(g->cache);
    pthread_mutex_destroy(&g->cache_lock);
    free(g);
}

ak_status ak_llm_json_schema_to_gbnf(const char *schema_json, size_t len, char **gbnf) {
    AK_ARG_CHECK(gbnf != NULL, "json schema: gbnf is NULL");
    *gbnf = NULL;
    char *rules = NULL;
    AK_CHECK(ak__json_schema_rules(schema_json, len, "schema", &rules));
    static const char head[] = "root ::= schema\n";
    size_t n = strlen(rules);
    char *text = NULL;
    ak_status st = ak_alloc(sizeof head + n, (void **)&text);
    if (st == AK_OK) {
        memcpy(text, head, sizeof head - 1);
        memcpy(text + sizeof head - 1, rules, n + 1);
        *gbnf = text;
    }
    ak_free(rules);
    return st;
}
