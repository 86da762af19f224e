/* SentencePiece Unigram (GGUF tokenizer model "t5", tokenizer.json model "Unigram").
 *
 * The normalizer: SentencePiece's precompiled character map is a double-array trie (XOR
 * compressed, each node one packed 32-bit word) over input byte strings whose leaves point
 * at NUL-terminated replacement strings. At each position the longest input prefix found
 * in the trie is replaced; otherwise one UTF-8 character is copied (a byte that starts no
 * valid character becomes U+FFFD). For a GGUF vocabulary the whitespace handling is
 * llama.cpp's: an optional space in front, runs of spaces merged
 * (remove_extra_whitespaces: each word then gets one space in front, trailing spaces go),
 * spaces escaped as U+2581.
 *
 * The model: Viterbi over the lattice of vocabulary pieces. Walking the text one code point
 * at a time, every piece starting there extends the best path ending there by its score
 * (log probability); a code point no one-character piece covers may be the unknown token,
 * scored as the lowest piece score minus 10. Ties keep the path found first. Consecutive
 * unknown tokens of the best path become one. */
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "llm/tokenizer/tokenizer.h"

#define UNKNOWN_PENALTY 10.0f

/* ---- the precompiled character map ----------------------------------------------------- */

ak_status ak__charsmap_parse(const uint8_t *blob, size_t n, ak__charsmap *out) {
    memset(out, 0, sizeof *out);
    if (n == 0) return AK_OK;
    if (n < 4) return AK_FAIL(AK_ERR_INVALID_MODEL, "precompiled_charsmap of %zu bytes is too short", n);
    uint32_t trie_bytes = (uint32_t)blob[0] | (uint32_t)blob[1] << 8 | (uint32_t)blob[2] << 16 |
                          (uint32_t)blob[3] << 24;
    /* llama.cpp also insists on at least one byte of replacement strings after the trie */
    if (trie_bytes % 4 != 0 || (size_t)trie_bytes + 4 >= n)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "precompiled_charsmap: trie of %u bytes does not fit "
                       "in %zu", trie_bytes, n);
    out->n_nodes = trie_bytes / 4;
    out->nodes = malloc(trie_bytes ? trie_bytes : 1);
    out->n_repl = n - 4 - trie_bytes;
    out->repl = malloc(out->n_repl + 1);
    if (!out->nodes || !out->repl) {
        ak__charsmap_free(out);
        return AK_FAIL(AK_ERR_NO_MEMORY, "precompiled_charsmap");
    }
    for (size_t i = 0; i < out->n_nodes; i++) {
        const uint8_t *p = blob + 4 + 4 * i;
        out->nodes[i] = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    }
    memcpy(out->repl, blob + 4 + trie_bytes, out->n_repl);
    out->repl[out->n_repl] = '\0'; /* a last string without its NUL still ends */
    return AK_OK;
}

void ak__charsmap_free(ak__charsmap *m) {
    free(m->nodes);
    free(m->repl);
    memset(m, 0, sizeof *m);
}

/* A node packs BASE in bits 10-30 (shifted left by 8 more when bit 9 is set), the LEAF flag
 * in bit 8, the label in bits 0-7; a value node has bit 31 set and the value in bits 0-30. */
static uint32_t node_base(uint32_t v) { return (v >> 10) << ((v & (1u << 9)) >> 6); }
static uint32_t node_label(uint32_t v) { return v & ((1u << 31) | 0xffu); }
static int node_leaf(uint32_t v) { return (v >> 8) & 1; }
static uint32_t node_value(uint32_t v) { return v & ((1u << 31) - 1); }

ak_status ak__charsmap_match(const ak__charsmap *m, const char *s, size_t n, const char **repl,
                             size_t *repl_len, size_t *consumed) {
    *consumed = 0;
    if (m->n_nodes == 0) return AK_OK;
    size_t best_len = 0, best_value = 0;
    uint32_t node = node_base(m->nodes[0]);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == 0) break;
        node ^= c;
        if (node >= m->n_nodes) goto bad;
        uint32_t v = m->nodes[node];
        if (node_label(v) != c) break;
        node ^= node_base(v);
        if (node >= m->n_nodes) goto bad;
        if (node_leaf(v)) {
            best_len = i + 1;
            best_value = node_value(m->nodes[node]);
        }
    }
    if (best_len == 0) return AK_OK;
    if (best_value >= m->n_repl)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "precompiled_charsmap: replacement %zu is outside "
                       "its %zu bytes", best_value, m->n_repl);
    *repl = m->repl + best_value;
    *repl_len = strlen(*repl);
    *consumed = best_len;
    return AK_OK;
bad:
    return AK_FAIL(AK_ERR_INVALID_MODEL, "precompiled_charsmap: trie node %u outside its %zu",
                   (unsigned)node, m->n_nodes);
}

/* Length of the valid UTF-8 character at s (as llama.cpp checks it: lead byte and
 * continuation bytes), 0 when there is none. */
static size_t utf8_char_len(const unsigned char *s, size_t n) {
    size_t k = s[0] < 0x80 ? 1 : (s[0] & 0xE0) == 0xC0 ? 2 : (s[0] & 0xF0) == 0xE0 ? 3
             : (s[0] & 0xF8) == 0xF0 ? 4 : 0;
    if (k == 0 || k > n) return 0;
    for (size_t i = 1; i < k; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    return k;
}

/* The normalized form of the text's next piece: a replacement from the map, or the next
 * character as it is, or U+FFFD for one byte that starts no character. */
static ak_status normalize_prefix(const ak__charsmap *m, const char *s, size_t n, const char **out,
                                  size_t *out_len, size_t *consumed) {
    AK_CHECK(ak__charsmap_match(m, s, n, out, out_len, consumed));
    if (*consumed) return AK_OK;
    size_t k = utf8_char_len((const unsigned char *)s, n);
    if (k == 0) {
        *out = "\xef\xbf\xbd";
        *out_len = 3;
        *consumed = 1;
    } else {
        *out = s;
        *out_len = k;
        *consumed = k;
    }
    return AK_OK;
}

/* ---- a growing byte string --------------------------------------------------------------- */

typedef struct ubuf {
    char *v;
    size_t n, cap;
} ubuf;

static ak_status ub_add(ubuf *b, const char *s, size_t n) {
    if (b->cap - b->n < n + 1) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap - b->n < n + 1) cap *= 2;
        char *v = realloc(b->v, cap);
        if (!v) return AK_FAIL(AK_ERR_NO_MEMORY, "normalized text of %zu bytes", cap);
        b->v = v;
        b->cap = cap;
    }
    memcpy(b->v + b->n, s, n);
    b->n += n;
    b->v[b->n] = '\0';
    return AK_OK;
}

ak_status ak__charsmap_apply(const ak__charsmap *m, const char *text, size_t len, char **out,
                             size_t *out_len) {
    ubuf b = {0};
    ak_status st = ub_add(&b, "", 0);
    for (size_t at = 0; at < len && st == AK_OK;) {
        const char *piece;
        size_t plen, used;
        st = normalize_prefix(m, text + at, len - at, &piece, &plen, &used);
        if (st == AK_OK) st = ub_add(&b, piece, plen);
        at += used;
    }
    if (st != AK_OK) {
        free(b.v);
        return st;
    }
    *out = b.v;
    *out_len = b.n;
    return AK_OK;
}

/* llama.cpp's whitespace handling around the map (GGUF vocabularies). */
static ak_status gguf_normalize(const ak_tokenizer *t, const char *text, size_t len, ubuf *out) {
    const char *space = t->ugm_escape_spaces ? "\xe2\x96\x81" : " ";
    size_t space_len = strlen(space);
    int merge = t->ugm_merge_spaces, prefix = t->add_space_prefix;
    int prefixed = 0, in_word = 0;
    AK_CHECK(ub_add(out, "", 0));
    for (size_t at = 0; at < len;) {
        const char *piece;
        size_t plen, used;
        AK_CHECK(normalize_prefix(&t->charsmap, text + at, len - at, &piece, &plen, &used));
        for (size_t i = 0; i < plen; i++) {
            if (piece[i] != ' ') {
                if (!in_word) {
                    in_word = 1;
                    if ((prefix && !prefixed) || merge) {
                        AK_CHECK(ub_add(out, space, space_len));
                        prefixed = 1;
                    }
                }
                AK_CHECK(ub_add(out, piece + i, 1));
            } else {
                in_word = 0;
                if (!merge) AK_CHECK(ub_add(out, space, space_len));
            }
        }
        at += used;
    }
    return AK_OK;
}

/* ---- Viterbi ------------------------------------------------------------------------------ */

/* The best path to a position: its last token, where that token starts, the path's score. */
typedef struct best_path {
    int32_t id;
    size_t start;
    double score;
} best_path;

/* Bytes of the UTF-8 character whose lead byte is c (llama.cpp's table: a stray
 * continuation byte counts as one). */
static size_t lead_len(unsigned char c) {
    static const uint8_t len[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return len[c >> 4];
}

/* The unknown piece spelled with byte tokens (tokenizer.json byte_fallback), when every
 * byte has one; otherwise the unknown token. */
static ak_status push_unknown(const ak_tokenizer *t, const char *s, size_t n, ak_ids *out) {
    int bytes = t->ugm_byte_fallback;
    for (size_t i = 0; i < n && bytes; i++) bytes = t->byte_token[(unsigned char)s[i]] >= 0;
    if (!bytes) return ak__ids_push(out, t->unk);
    for (size_t i = 0; i < n; i++) AK_CHECK(ak__ids_push(out, t->byte_token[(unsigned char)s[i]]));
    return AK_OK;
}

/* Every piece that starts at `at` competes for the best path ending where it ends. */
static void extend(const ak_tokenizer *t, const char *s, size_t n, size_t at, best_path *best) {
    size_t step = lead_len((unsigned char)s[at]);
    if (step > n - at) step = n - at;
    int single = 0;
    size_t longest = t->ugm_max_piece < n - at ? t->ugm_max_piece : n - at;
    for (size_t len = 1; len <= longest; len++) {
        int64_t id = ak_strmap_get(&t->ugm_pieces, s + at, len);
        if (id < 0) continue;
        if (len == step) single = 1;
        double score = best[at].score +
                       (t->types[id] == AK_TOKTYPE_USER_DEFINED ? 0.0 : (double)t->scores[id]);
        if (score > best[at + len].score) best[at + len] = (best_path){(int32_t)id, at, score};
    }
    if (!single) {
        double score = best[at].score + t->ugm_unk_score;
        if (score > best[at + step].score) best[at + step] = (best_path){t->unk, at, score};
    }
}

ak_status ak__ugm_viterbi(const ak_tokenizer *t, const char *s, size_t n, ak_ids *out) {
    if (n == 0) return AK_OK;
    best_path *best = malloc((n + 1) * sizeof *best);
    size_t *ends = malloc((n + 1) * sizeof *ends);
    if (!best || !ends) {
        free(best);
        free(ends);
        return AK_FAIL(AK_ERR_NO_MEMORY, "lattice of %zu bytes", n);
    }
    for (size_t i = 0; i <= n; i++) best[i] = (best_path){t->unk, 0, -DBL_MAX};
    best[0].score = 0;
    for (size_t at = 0; at < n; at += lead_len((unsigned char)s[at])) extend(t, s, n, at, best);
    /* back from the end: the ends of the path's tokens, last first */
    size_t k = 0;
    for (size_t end = n;; end = best[end].start) {
        ends[k++] = end;
        if (best[end].start == 0) break;
    }
    ak_status st = AK_OK;
    for (size_t i = k; i-- > 0 && st == AK_OK;) {
        size_t end = ends[i], start = best[end].start;
        if (best[end].id != t->unk) {
            st = ak__ids_push(out, best[end].id);
            continue;
        }
        while (i > 0 && best[ends[i - 1]].id == t->unk) end = ends[--i]; /* one unknown */
        st = push_unknown(t, s + start, end - start, out);
    }
    free(best);
    free(ends);
    return st;
}

ak_status ak__ugm_encode(const ak_tokenizer *t, const char *text, size_t len, ak_ids *out) {
    ubuf norm = {0};
    ak_status st = gguf_normalize(t, text, len, &norm);
    if (st == AK_OK) st = ak__ugm_viterbi(t, norm.v, norm.n, out);
    free(norm.v);
    return st;
}

/* ---- building ------------------------------------------------------------------------------ */

ak_status ak__ugm_prepare(ak_tokenizer *t, int all_pieces) {
    if (t->unk < 0)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "a Unigram vocabulary needs an unknown token id");
    AK_CHECK(ak_strmap_init(&t->ugm_pieces, (uint64_t)t->n_vocab));
    float min_score = FLT_MAX;
    for (int32_t i = 0; i < t->n_vocab; i++) {
        uint8_t ty = t->types[i];
        if (ty == AK_TOKTYPE_NORMAL || all_pieces) min_score = t->scores[i] < min_score ? t->scores[i] : min_score;
        /* llama.cpp matches normal, user-defined and unused pieces; a tokenizer.json every
         * piece but its special tokens (Hugging Face cuts those out of the text before the
         * model sees it; left in the text, they are spelled like any text, as in
         * SentencePiece) */
        int matched = all_pieces ? ty != AK_TOKTYPE_CONTROL && ty != AK_TOKTYPE_UNKNOWN
                                 : ty == AK_TOKTYPE_NORMAL || ty == AK_TOKTYPE_USER_DEFINED ||
                                       ty == AK_TOKTYPE_UNUSED;
        if (!matched) continue;
        size_t len;
        const char *s = ak__tok_text(t, i, &len);
        if (len == 0) continue;
        ak_strmap_put(&t->ugm_pieces, s, len, i, 1);
        if (len > t->ugm_max_piece) t->ugm_max_piece = len;
    }
    t->ugm_unk_score = (double)(min_score - UNKNOWN_PENALTY);
    return AK_OK;
}
