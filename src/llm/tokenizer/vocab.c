/* Builds tokenizers: from arrays (ak__tokenizer_build, also used for Hugging Face
 * tokenizer.json) and from the tokenizer.ggml.* keys of a GGUF file (llama.cpp's names):
 * model, pre, tokens, scores, token_type, merges, bos/eos/unknown/padding ids, add_bos,
 * add_eos, add_space_prefix, and for `t5` remove_extra_whitespaces and precompiled_charsmap. Everything needed is copied, so the sources may go. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "llm/gguf/gguf.h"
#include "llm/tokenizer/tokenizer.h"

ak_status ak__ids_push(ak_ids *ids, int32_t id) {
    if (ids->n == ids->cap) {
        size_t cap = ids->cap ? ids->cap * 2 : 64;
        int32_t *v = realloc(ids->v, cap * sizeof *v);
        if (!v) return AK_FAIL(AK_ERR_NO_MEMORY, "token buffer of %zu", cap);
        ids->v = v;
        ids->cap = cap;
    }
    ids->v[ids->n++] = id;
    return AK_OK;
}

/* ---- building from arrays ------------------------------------------------------------ */

/* Defaults follow llama.cpp: SPM has <unk>=0, <s>=1, </s>=2 and adds BOS and a space;
 * BERT has [PAD]=0, [UNK]=100, [CLS]=101, [SEP]=102 and frames the text with CLS/SEP;
 * GPT-2 uses 11 for BOS and EOS; T5 (UGM) has <pad>=0, </s>=1, <unk>=2, no BOS, adds EOS,
 * no space in front. */
void ak__tok_spec_defaults(ak__tok_spec *s, ak_tokenizer_kind kind) {
    int spm = kind == AK_TOKENIZER_SPM, wpm = kind == AK_TOKENIZER_WPM;
    if (kind == AK_TOKENIZER_UGM) {
        ak__tok_spec_defaults(s, AK_TOKENIZER_SPM);
        s->kind = kind;
        s->bos = -1;
        s->eos = 1;
        s->unk = 2;
        s->pad = 0;
        s->add_bos = 0;
        s->add_eos = 1;
        s->add_space_prefix = 0; /* llama.cpp's default when the file does not say */
        return;
    }
    s->kind = kind;
    /* a BPE vocabulary that names no pre-tokenizer gets llama.cpp's "default" split */
    s->pre_name = kind == AK_TOKENIZER_BPE ? "default" : NULL;
    s->pre_regexes = NULL;
    s->pre_matches_only = NULL;
    s->n_pre_regexes = 0;
    s->ignore_merges = 0;
    s->nfc = 0;
    s->user_spm_pieces = 0;
    s->bos = spm ? 1 : wpm ? 101 : 11;
    s->eos = spm ? 2 : wpm ? 102 : 11;
    s->unk = spm ? 0 : wpm ? 100 : -1;
    s->pad = wpm ? 0 : -1;
    s->add_bos = spm || wpm;
    s->add_eos = wpm;
    s->add_space_prefix = spm;
    s->charsmap = NULL;
    s->charsmap_len = 0;
    s->remove_extra_ws = 0;
    s->byte_fallback = 0;
    s->all_pieces = 0;
}

static size_t str_len(const char *const *s, const size_t *lens, size_t i) {
    return lens ? lens[i] : strlen(s[i]);
}

/* Copies n strings back to back into a new *blob with n + 1 `offsets` and maps each text
 * to its index. keep_last: a repeated text maps to its last index, else the first. */
static ak_status intern_strings(const char *what, const char *const *s, const size_t *lens,
                                size_t n, char **blob, size_t **offsets, ak_strmap *map,
                                int keep_last) {
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (!s[i]) return AK_FAIL(AK_ERR_INVALID_MODEL, "%s %zu is missing", what, i);
        size_t len = str_len(s, lens, i);
        if (len > SIZE_MAX - total) return AK_FAIL(AK_ERR_INVALID_MODEL, "%s: too long", what);
        total += len;
    }
    *blob = malloc(total ? total : 1);
    *offsets = malloc((n + 1) * sizeof **offsets);
    if (!*blob || !*offsets) return AK_FAIL(AK_ERR_NO_MEMORY, "%s: %zu strings", what, n);
    AK_CHECK(ak_strmap_init(map, n));
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len = str_len(s, lens, i);
        memcpy(*blob + off, s[i], len);
        (*offsets)[i] = off;
        ak_strmap_put(map, *blob + off, len, (int64_t)i, keep_last);
        off += len;
    }
    (*offsets)[n] = off;
    return AK_OK;
}

static ak_status build_tokens(const ak__tok_spec *s, ak_tokenizer *t) {
    if (s->n_vocab <= 0 || !s->tokens)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "vocabulary of %d tokens", s->n_vocab);
    t->n_vocab = s->n_vocab;
    size_t n = (size_t)s->n_vocab;
    for (size_t i = 0; i < n; i++) {
        size_t len = s->tokens[i] ? str_len(s->tokens, s->token_lens, i) : 0;
        if (len > t->max_token_len) t->max_token_len = len;
    }
    /* a repeated text maps to its last id, as in llama.cpp */
    AK_CHECK(intern_strings("token", s->tokens, s->token_lens, n, &t->blob, &t->text_off,
                            &t->vocab, 1));
    t->scores = calloc(n, sizeof *t->scores);
    t->types = malloc(n);
    if (!t->scores || !t->types) return AK_FAIL(AK_ERR_NO_MEMORY, "token scores/types");
    for (size_t i = 0; i < n; i++) {
        uint8_t ty = s->types ? s->types[i] : AK_TOKTYPE_NORMAL;
        if (ty > AK_TOKTYPE_BYTE)
            return AK_FAIL(AK_ERR_INVALID_MODEL, "token %zu has unknown type %u", i, ty);
        t->types[i] = ty;
        if (s->scores) t->scores[i] = s->scores[i];
    }
    if (s->strip) {
        t->strip = malloc(n);
        if (!t->strip) return AK_FAIL(AK_ERR_NO_MEMORY, "token strip flags");
        memcpy(t->strip, s->strip, n);
    }
    return AK_OK;
}

/* Merges are "left right"; the rank is the position. Kept whole: a lookup builds the same
 * text from two adjacent symbols. */
static ak_status build_merges(const ak__tok_spec *s, ak_tokenizer *t) {
    if (!s->merges && s->n_merges)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "%zu merges without texts", s->n_merges);
    for (size_t i = 0; i < s->n_merges; i++) {
        const char *m = s->merges[i];
        size_t len = m ? str_len(s->merges, s->merge_lens, i) : 0;
        if (len < 3 || !memchr(m + 1, ' ', len - 1))
            return AK_FAIL(AK_ERR_INVALID_MODEL, "merge %zu ('%.*s') is not 'left right'", i,
                           (int)(len < 64 ? len : 64), m ? m : "");
    }
    t->n_merges = s->n_merges;
    return intern_strings("merge", s->merges, s->merge_lens, s->n_merges, &t->merge_blob,
                          &t->merge_off, &t->merges, 0);
}

static ak_status check_id(const ak_tokenizer *t, const char *what, int32_t id) {
    if (id < -1 || id >= t->n_vocab)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "%s id %d is not a token of this vocabulary of %d",
                       what, id, t->n_vocab);
    return AK_OK;
}

static ak_status build_specials(const ak__tok_spec *s, ak_tokenizer *t) {
    AK_CHECK(check_id(t, "bos", s->bos));
    AK_CHECK(check_id(t, "eos", s->eos));
    AK_CHECK(check_id(t, "unknown", s->unk));
    AK_CHECK(check_id(t, "padding", s->pad));
    t->bos = s->bos;
    t->eos = s->eos;
    t->unk = s->unk;
    t->pad = s->pad;
    t->add_bos = s->add_bos;
    t->add_eos = s->add_eos;
    t->add_space_prefix = s->add_space_prefix;
    return AK_OK;
}

/* Sort key of a special token: longer text first, then lower id (deterministic). */
typedef struct special_key {
    size_t len;
    int32_t id;
} special_key;

static int by_length_desc(const void *a, const void *b) {
    const special_key *x = a, *y = b;
    if (x->len != y->len) return x->len > y->len ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* Tokens matched in raw text before the model's own splitting, longest first so that a
 * special token containing another wins. */
static ak_status collect_specials(ak_tokenizer *t) {
    t->specials = malloc((size_t)t->n_vocab * sizeof *t->specials);
    special_key *keys = malloc((size_t)t->n_vocab * sizeof *keys);
    if (!t->specials || !keys) {
        free(keys);
        return AK_FAIL(AK_ERR_NO_MEMORY, "special token list");
    }
    size_t n = 0;
    for (int32_t i = 0; i < t->n_vocab; i++) {
        uint8_t ty = t->types[i];
        size_t len;
        ak__tok_text(t, i, &len);
        if (len && (ty == AK_TOKTYPE_CONTROL || ty == AK_TOKTYPE_USER_DEFINED || ty == AK_TOKTYPE_UNKNOWN))
            keys[n++] = (special_key){len, i};
    }
    qsort(keys, n, sizeof *keys, by_length_desc);
    for (size_t i = 0; i < n; i++) t->specials[i] = keys[i].id;
    t->n_specials = n;
    free(keys);
    return AK_OK;
}

static void find_byte_tokens(ak_tokenizer *t) {
    for (int b = 0; b < 256; b++) {
        char hex[8];
        snprintf(hex, sizeof hex, "<0x%02X>", b);
        int64_t id = ak_strmap_get(&t->vocab, hex, 6);
        if (id < 0) {
            char c = (char)b;
            id = ak_strmap_get(&t->vocab, &c, 1);
        }
        t->byte_token[b] = (int32_t)id;
    }
}

ak_status ak_tokenizer_free(ak_tokenizer *t) {
    if (!t) return AK_OK;
    free(t->blob);
    free(t->text_off);
    free(t->scores);
    free(t->types);
    free(t->merge_blob);
    free(t->merge_off);
    free(t->specials);
    free(t->strip);
    ak__pretok_free(t->pre);
    ak__textnorm_free(t->norm);
    ak__charsmap_free(&t->charsmap);
    ak_strmap_free(&t->ugm_pieces);
    free(t->pre_name);
    ak_strmap_free(&t->vocab);
    ak_strmap_free(&t->merges);
    free(t);
    return AK_OK;
}

/* The pre-tokenizer of a BPE spec: its own expressions, else those of its table name. */
static ak_status build_pretok(const ak__tok_spec *s, ak_tokenizer *t) {
    t->ignore_merges = s->ignore_merges;
    if (s->pre_name) {
        t->pre_name = strdup(s->pre_name);
        if (!t->pre_name) return AK_FAIL(AK_ERR_NO_MEMORY, "pre-tokenizer name");
    }
    if (s->pre_regexes)
        return ak__pretok_compile(s->pre_regexes, s->pre_matches_only, s->n_pre_regexes, &t->pre);
    int unsupported;
    const char *name = s->pre_name ? s->pre_name : "";
    const ak__pretok_type *ty = ak__pretok_type_find(name, strlen(name), &unsupported);
    if (!ty)
        return AK_FAIL(AK_ERR_UNSUPPORTED, "pre-tokenizer '%s' is not supported%s", name,
                       unsupported ? " (llama.cpp splits it with code of its own, not "
                                     "regular expressions; not implemented here)" : "");
    size_t n = 0;
    while (ty->regexes[n]) n++;
    return ak__pretok_compile(ty->regexes, NULL, n, &t->pre);
}

/* Unigram: the normalizer's map and whitespace flags, the pieces of the lattice. */
static ak_status build_ugm(const ak__tok_spec *s, ak_tokenizer *t) {
    AK_CHECK(ak__charsmap_parse(s->charsmap, s->charsmap ? s->charsmap_len : 0, &t->charsmap));
    t->ugm_merge_spaces = s->remove_extra_ws;
    t->ugm_escape_spaces = 1;
    t->ugm_byte_fallback = s->byte_fallback;
    return ak__ugm_prepare(t, s->all_pieces);
}

ak_status ak__tokenizer_build(const ak__tok_spec *s, ak_tokenizer **out) {
    AK_ARG_CHECK(s != NULL && out != NULL, "spec or out is NULL");
    *out = NULL;
    if (s->kind != AK_TOKENIZER_SPM && s->kind != AK_TOKENIZER_BPE && s->kind != AK_TOKENIZER_WPM &&
        s->kind != AK_TOKENIZER_UGM)
        return AK_FAIL(AK_ERR_INVALID_ARG, "tokenizer kind %d", (int)s->kind);
    ak_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return AK_FAIL(AK_ERR_NO_MEMORY, "tokenizer");
    t->kind = s->kind;
    t->nfc = s->nfc;
    t->user_spm_pieces = s->user_spm_pieces;
    ak_status st;
    if (s->kind == AK_TOKENIZER_BPE) AK_CHECK_GOTO(st, build_pretok(s, t));
    /* a tokenizer.json Unigram's split into words, when it has one */
    if (s->kind == AK_TOKENIZER_UGM && s->pre_regexes)
        AK_CHECK_GOTO(st, ak__pretok_compile(s->pre_regexes, s->pre_matches_only, s->n_pre_regexes, &t->pre));
    AK_CHECK_GOTO(st, build_tokens(s, t));
    AK_CHECK_GOTO(st, build_merges(s, t));
    AK_CHECK_GOTO(st, build_specials(s, t));
    AK_CHECK_GOTO(st, collect_specials(t));
    find_byte_tokens(t);
    if (s->kind == AK_TOKENIZER_UGM) AK_CHECK_GOTO(st, build_ugm(s, t));
    *out = t;
    return AK_OK;
fail:
    ak_tokenizer_free(t);
    return st;
}

/* ---- from GGUF metadata -------------------------------------------------------------- */

static int has_key(const ak_gguf *g, const char *key) { return ak__gguf_find(g, key) != NULL; }

static ak_status read_kind(const ak_gguf *g, ak__tok_spec *s) {
    const char *str;
    size_t n;
    if (!has_key(g, "tokenizer.ggml.model"))
        return AK_FAIL(AK_ERR_INVALID_MODEL, "GGUF has no tokenizer.ggml.model");
    AK_CHECK(ak_gguf_get_string(g, "tokenizer.ggml.model", &str, &n));
    if (n == 5 && memcmp(str, "llama", 5) == 0) ak__tok_spec_defaults(s, AK_TOKENIZER_SPM);
    else if (n == 4 && memcmp(str, "gpt2", 4) == 0) ak__tok_spec_defaults(s, AK_TOKENIZER_BPE);
    else if (n == 4 && memcmp(str, "bert", 4) == 0) ak__tok_spec_defaults(s, AK_TOKENIZER_WPM);
    else if (n == 2 && memcmp(str, "t5", 2) == 0) ak__tok_spec_defaults(s, AK_TOKENIZER_UGM);
    else return AK_FAIL(AK_ERR_UNSUPPORTED, "tokenizer model '%.*s' is not supported (llama, gpt2, bert, t5)", (int)n, str);
    /* pre absent (or empty): llama.cpp's "default" split */
    if (s->kind != AK_TOKENIZER_BPE || !has_key(g, "tokenizer.ggml.pre")) return AK_OK;
    AK_CHECK(ak_gguf_get_string(g, "tokenizer.ggml.pre", &str, &n));
    if (n == 0) return AK_OK;
    int unsupported;
    const ak__pretok_type *ty = ak__pretok_type_find(str, n, &unsupported);
    if (!ty)
        return AK_FAIL(AK_ERR_UNSUPPORTED, "pre-tokenizer '%.*s' is not supported%s", (int)n, str,
                       unsupported ? " (llama.cpp splits it with code of its own, not regular "
                                     "expressions; not implemented here)" : "");
    s->pre_name = ty->names[0];
    s->ignore_merges = (ty->flags & AK_PRE_IGNORE_MERGES) != 0;
    if (ty->flags & AK_PRE_ADD_BOS) s->add_bos = 1;
    if (ty->flags & AK_PRE_NO_BOS) s->bos = -1;
    return AK_OK;
}

/* An optional per-token array must have exactly one entry per token. */
static ak_status check_parallel(const ak_gguf *g, const char *key, uint64_t n, int *present) {
    ak_gguf_type et;
    uint64_t count;
    *present = has_key(g, key);
    if (!*present) return AK_OK;
    if (ak_gguf_get_array(g, key, &et, &count) != AK_OK || count != n)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "%s must be an array of %llu entries", key, (unsigned long long)n);
    return AK_OK;
}

/* A required array of strings: 1 with its length, or 0 when absent or of another type. */
static int string_array(const ak_gguf *g, const char *key, uint64_t *n) {
    ak_gguf_type et;
    return has_key(g, key) && ak_gguf_get_array(g, key, &et, n) == AK_OK && et == AK_GGUF_STRING;
}

/* Pointers to the n strings of array `key` (they stay in the mapped file). */
static ak_status gather_strings(const ak_gguf *g, const char *key, uint64_t n,
                                const char ***s, size_t **lens) {
    *s = malloc((size_t)(n ? n : 1) * sizeof **s);
    *lens = malloc((size_t)(n ? n : 1) * sizeof **lens);
    if (!*s || !*lens) return AK_FAIL(AK_ERR_NO_MEMORY, "%s: %llu strings", key, (unsigned long long)n);
    for (uint64_t i = 0; i < n; i++) AK_CHECK(ak_gguf_get_array_string(g, key, i, &(*s)[i], &(*lens)[i]));
    return AK_OK;
}

/* The arrays a GGUF spec points to, freed after the build. */
typedef struct gguf_arrays {
    const char **tokens, **merges;
    size_t *token_lens, *merge_lens;
    float *scores;
    uint8_t *types;
} gguf_arrays;

static void gguf_arrays_free(gguf_arrays *a) {
    free(a->tokens);
    free(a->merges);
    free(a->token_lens);
    free(a->merge_lens);
    free(a->scores);
    free(a->types);
}

static ak_status read_tokens(const ak_gguf *g, ak__tok_spec *s, gguf_arrays *a) {
    uint64_t n;
    if (!string_array(g, "tokenizer.ggml.tokens", &n))
        return AK_FAIL(AK_ERR_INVALID_MODEL, "tokenizer.ggml.tokens must be an array of strings");
    if (n == 0 || n > INT32_MAX) return AK_FAIL(AK_ERR_INVALID_MODEL, "vocabulary of %llu tokens", (unsigned long long)n);
    s->n_vocab = (int32_t)n;
    AK_CHECK(gather_strings(g, "tokenizer.ggml.tokens", n, &a->tokens, &a->token_lens));
    s->tokens = a->tokens;
    s->token_lens = a->token_lens;
    return AK_OK;
}

static ak_status read_scores_types(const ak_gguf *g, ak__tok_spec *s, gguf_arrays *a) {
    uint64_t n = (uint64_t)s->n_vocab;
    int has_scores, has_types;
    AK_CHECK(check_parallel(g, "tokenizer.ggml.scores", n, &has_scores));
    AK_CHECK(check_parallel(g, "tokenizer.ggml.token_type", n, &has_types));
    a->scores = calloc((size_t)n, sizeof *a->scores);
    a->types = malloc((size_t)n);
    if (!a->scores || !a->types) return AK_FAIL(AK_ERR_NO_MEMORY, "token scores/types");
    for (uint64_t i = 0; i < n; i++) {
        double sc = 0;
        int64_t ty = AK_TOKTYPE_NORMAL;
        if (has_scores && ak_gguf_get_array_float(g, "tokenizer.ggml.scores", i, &sc) != AK_OK)
            return AK_FAIL(AK_ERR_INVALID_MODEL, "tokenizer.ggml.scores must hold floats");
        if (has_types && ak_gguf_get_array_int(g, "tokenizer.ggml.token_type", i, &ty) != AK_OK)
            return AK_FAIL(AK_ERR_INVALID_MODEL, "tokenizer.ggml.token_type must hold integers");
        if (ty < 0 || ty > AK_TOKTYPE_BYTE)
            return AK_FAIL(AK_ERR_INVALID_MODEL, "token %llu has unknown type %lld", (unsigned long long)i, (long long)ty);
        a->scores[i] = (float)sc;
        a->types[i] = (uint8_t)ty;
    }
    s->scores = a->scores;
    s->types = a->types;
    return AK_OK;
}

static ak_status read_merges(const ak_gguf *g, ak__tok_spec *s, gguf_arrays *a) {
    uint64_t n;
    if (!string_array(g, "tokenizer.ggml.merges", &n))
        return AK_FAIL(AK_ERR_INVALID_MODEL, "a gpt2 tokenizer needs tokenizer.ggml.merges (strings)");
    AK_CHECK(gather_strings(g, "tokenizer.ggml.merges", n, &a->merges, &a->merge_lens));
    s->merges = a->merges;
    s->merge_lens = a->merge_lens;
    s->n_merges = (size_t)n;
    return AK_OK;
}

/* An optional token id; out of range is a malformed file. */
static ak_status read_id(const ak_gguf *g, const ak__tok_spec *s, const char *key, int32_t *id) {
    if (!has_key(g, key)) {
        if (*id >= s->n_vocab) *id = -1; /* the default does not exist in this vocabulary */
        return AK_OK;
    }
    int64_t v;
    if (ak_gguf_get_int(g, key, &v) != AK_OK || v < -1 || v >= s->n_vocab)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "%s is not a token id of this vocabulary", key);
    *id = (int32_t)v;
    return AK_OK;
}

static ak_status read_flag(const ak_gguf *g, const char *key, int *flag) {
    if (!has_key(g, key)) return AK_OK;
    if (ak_gguf_get_bool(g, key, flag) != AK_OK) return AK_FAIL(AK_ERR_INVALID_MODEL, "%s must be a bool", key);
    return AK_OK;
}

/* tokenizer.ggml.precompiled_charsmap: an array of bytes, used where it lies in the file. */
static ak_status read_charsmap(const ak_gguf *g, ak__tok_spec *s) {
    const ak_gguf_kv *kv = ak__gguf_find(g, "tokenizer.ggml.precompiled_charsmap");
    if (!kv) return AK_OK;
    if (kv->type != AK_GGUF_ARRAY || (kv->elem_type != AK_GGUF_UINT8 && kv->elem_type != AK_GGUF_INT8))
        return AK_FAIL(AK_ERR_INVALID_MODEL, "tokenizer.ggml.precompiled_charsmap must be an "
                       "array of bytes");
    s->charsmap = g->base + kv->pos;
    s->charsmap_len = (size_t)kv->count;
    return AK_OK;
}

static ak_status read_specials(const ak_gguf *g, ak__tok_spec *s) {
    AK_CHECK(read_id(g, s, "tokenizer.ggml.bos_token_id", &s->bos));
    AK_CHECK(read_id(g, s, "tokenizer.ggml.eos_token_id", &s->eos));
    /* embeddings: llama.cpp ends a WordPiece sequence with the separator ([SEP]) the file
     * names (its [CLS] is the BOS id; cls_token_id is not read, as in llama.cpp) */
    if (s->kind == AK_TOKENIZER_WPM)
        AK_CHECK(read_id(g, s, "tokenizer.ggml.seperator_token_id", &s->eos));
    AK_CHECK(read_id(g, s, "tokenizer.ggml.unknown_token_id", &s->unk));
    AK_CHECK(read_id(g, s, "tokenizer.ggml.padding_token_id", &s->pad));
    AK_CHECK(read_flag(g, "tokenizer.ggml.add_bos_token", &s->add_bos));
    AK_CHECK(read_flag(g, "tokenizer.ggml.add_eos_token", &s->add_eos));
    AK_CHECK(read_flag(g, "tokenizer.ggml.add_space_prefix", &s->add_space_prefix));
    if (s->kind != AK_TOKENIZER_UGM) return AK_OK;
    AK_CHECK(read_flag(g, "tokenizer.ggml.remove_extra_whitespaces", &s->remove_extra_ws));
    return read_charsmap(g, s);
}

/* llama.cpp recognizes end-of-turn, end-of-generation and fill-in-the-middle tokens by
 * their text and makes them control tokens whatever the file says (so they are parsed
 * only with AK_TOK_PARSE_SPECIAL and not rendered by default); a few tokens of gpt-oss it
 * makes user-defined. A GGUF tokenizes as in llama.cpp only with the same overrides. */
static const char *const k_control_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
    "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<｜end▁of▁sentence｜>",
    "<end_of_utterance>", "<|eom_id|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
    "</s>", "<eos>", "<turn|>", "<|tool_response>", "[e~[",
    "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>",
    "▁<PRE>", "<|code_prefix|>", "<|prefix|>",
    "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>",
    "▁<SUF>", "<|code_suffix|>", "<|suffix|>",
    "<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>",
    "▁<MID>", "<|code_middle|>", "<|middle|>",
    "<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]",
    "<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>", "<|file_sep|>", NULL};
static const char *const k_user_texts[] = {"<|channel|>", "<|message|>", "<|start|>",
                                           "<|constrain|>", NULL};

static int text_in(const char *s, size_t n, const char *const *list) {
    for (; *list; list++)
        if (strlen(*list) == n && memcmp(*list, s, n) == 0) return 1;
    return 0;
}

static void override_types_by_text(const ak__tok_spec *s, gguf_arrays *a) {
    for (int32_t i = 0; i < s->n_vocab; i++) {
        const char *text = s->tokens[i];
        size_t n = s->token_lens[i];
        if (n < 3 || n > 32) continue;
        if (text_in(text, n, k_control_texts)) a->types[i] = AK_TOKTYPE_CONTROL;
        else if (text_in(text, n, k_user_texts)) a->types[i] = AK_TOKTYPE_USER_DEFINED;
    }
}

ak_status ak_tokenizer_from_gguf(const ak_gguf *g, ak_tokenizer **out) {
    AK_ARG_CHECK(g != NULL && out != NULL, "gguf or out is NULL");
    *out = NULL;
    ak__tok_spec s;
    memset(&s, 0, sizeof s);
    gguf_arrays a;
    memset(&a, 0, sizeof a);
    ak_status st;
    AK_CHECK_GOTO(st, read_kind(g, &s));
    AK_CHECK_GOTO(st, read_tokens(g, &s, &a));
    AK_CHECK_GOTO(st, read_scores_types(g, &s, &a));
    override_types_by_text(&s, &a);
    if (s.kind == AK_TOKENIZER_BPE) AK_CHECK_GOTO(st, read_merges(g, &s, &a));
    AK_CHECK_GOTO(st, read_specials(g, &s));
    st = ak__tokenizer_build(&s, out);
fail:
    gguf_arrays_free(&a);
    return st;
}

ak_status ak_tokenizer_get_info(const ak_tokenizer *t, ak_tokenizer_info *info) {
    AK_ARG_CHECK(t != NULL && info != NULL, "tokenizer or info is NULL");
    info->kind = t->kind;
    info->n_vocab = t->n_vocab;
    info->bos = t->bos;
    info->eos = t->eos;
    info->unk = t->unk;
    info->pad = t->pad;
    info->add_bos = t->add_bos;
    info->add_eos = t->add_eos;
    return AK_OK;
}

ak_status ak_tokenizer_token_text(const ak_tokenizer *t, int32_t id, const char **text, size_t *len) {
    AK_ARG_CHECK(t != NULL && text != NULL && len != NULL, "NULL argument");
    AK_ARG_CHECK(id >= 0 && id < t->n_vocab, "token id %d out of %d", id, t->n_vocab);
    *text = ak__tok_text(t, id, len);
    return AK_OK;
}
