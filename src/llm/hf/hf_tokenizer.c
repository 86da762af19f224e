/* A tokenizer from a Hugging Face tokenizer.json (+ tokenizer_config.json, config.json).
 *
 * Two kinds of "BPE" model map onto the GGUF tokenizers:
 *  - byte-level BPE (a ByteLevel pre-tokenizer: GPT-2, Llama 3, Qwen2...) → the `gpt2`
 *    tokenizer: the vocabulary is already in GPT-2's byte alphabet, merges by rank; the
 *    pre_tokenizer's Split expressions run as they are (PCRE2), and the pre-tokenizer
 *    table names them for GGUF when it knows them;
 *  - SentencePiece-style BPE ("byte_fallback": true, ▁ for spaces: Llama 2, Mistral...) →
 *    the `llama` tokenizer, which merges by token score: the score of a token is minus the
 *    rank of the first merge that produces it (HF made those merges from the scores, in
 *    score order), and <0xXX> tokens are byte tokens.
 * A Unigram model (T5, ALBERT, XLNet...) → the `t5` tokenizer: its [piece, score] list,
 * the normalizers (Precompiled: SentencePiece's map) and pre-tokenizers run as written,
 * each word through the lattice.
 * added_tokens become control (special) or user-defined tokens; ids missing from both
 * lists, and ids up to config vocab_size, are filled with unused "[PADn]" tokens as
 * llama.cpp's converter does. Every normalizer / pre_tokenizer / decoder component is
 * either implemented or refused by name (check_components). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "llm/hf/hf_internal.h"
#include "llm/tokenizer/tokenizer.h"

#define MAX_VOCAB (1 << 24)
/* Unused ids ("[PADn]" fill) a vocabulary may have beyond as many as it names: real ones
 * pad a few hundred ids at most; one added token at id 16 000 000 would otherwise cost
 * 2 GB of fill (seen fuzzing) */
#define MAX_UNUSED_IDS (1 << 16)

/* Everything read from the files, and the arrays of the spec being assembled. */
typedef struct hf_tok {
    const char *dir;
    cJSON *json, *tcfg, *cfg; /* tokenizer.json, tokenizer_config.json, config.json */
    const cJSON *model;
    ak__tok_spec spec;
    const char **tokens;
    uint8_t *types;
    uint8_t *strip;           /* AK_STRIP_* of added tokens */
    float *scores;
    char **owned;             /* strings made here ([PADn], joined merges) */
    size_t n_owned;
    const char **merges;
    size_t n_merges;
    ak_strmap map;            /* token text → id */
    const char *regexes[16];  /* the byte-level split's expressions */
    uint8_t matches_only[16]; /* ... each kept whole (Isolated) or matches only */
    size_t n_regexes;
    int nfc;                  /* an NFC normalizer and nothing else to rewrite the text */
    ak__textnorm *norm;       /* the normalizers and text-rewriting pre-tokenizers */
    int n_pre_parts;          /* pre-tokenizers read so far */
    int32_t ugm_unk;          /* Unigram: model.unk_id, -1 when none */
} hf_tok;

static void hf_tok_free(hf_tok *x) {
    cJSON_Delete(x->json);
    cJSON_Delete(x->tcfg);
    cJSON_Delete(x->cfg);
    for (size_t i = 0; i < x->n_owned; i++) free(x->owned[i]);
    free(x->owned);
    free(x->tokens);
    free(x->types);
    free(x->strip);
    free(x->scores);
    free(x->merges);
    ak__textnorm_free(x->norm);
    ak_strmap_free(&x->map);
}

/* ---- the JSON pieces ----------------------------------------------------------------- */

static int json_type_is(const cJSON *node, const char *type) {
    const cJSON *t = ak__json_get(node, "type");
    return cJSON_IsString(t) && strcmp(t->valuestring, type) == 0;
}

/* `node` or, for a Sequence, the first member (recursively) of the given type. */
static const cJSON *find_part(const cJSON *node, const char *list_key, const char *type) {
    if (!cJSON_IsObject(node)) return NULL;
    if (json_type_is(node, type)) return node;
    const cJSON *list = ak__json_get(node, list_key);
    for (const cJSON *e = cJSON_IsArray(list) ? list->child : NULL; e; e = e->next) {
        const cJSON *hit = find_part(e, list_key, type);
        if (hit) return hit;
    }
    return NULL;
}

/* A special-token setting: a string or an AddedToken object {"content": ...}. */
static const char *token_setting(const cJSON *obj, const char *key) {
    const cJSON *v = ak__json_get(obj, key);
    if (cJSON_IsObject(v)) v = ak__json_get(v, "content");
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static ak_status json_id(const hf_tok *x, const cJSON *v, const char *what, int32_t *id) {
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble >= MAX_VOCAB ||
        v->valuedouble != floor(v->valuedouble))
        return AK_FAIL(AK_ERR_INVALID_MODEL, "%s/tokenizer.json: %s has a bad id", x->dir, what);
    *id = (int32_t)v->valuedouble;
    return AK_OK;
}

/* ---- kind and pre-tokenizer ---------------------------------------------------------- */

static int is_spm_style(const hf_tok *x) {
    const cJSON *json = x->json;
    if (cJSON_IsTrue(ak__json_get(x->model, "byte_fallback"))) return 1;
    const cJSON *pre = ak__json_get(json, "pre_tokenizer");
    if (find_part(pre, "pretokenizers", "ByteLevel")) return 0;
    if (find_part(pre, "pretokenizers", "Metaspace")) return 1;
    const cJSON *rep = find_part(ak__json_get(json, "normalizer"), "normalizers", "Replace");
    const cJSON *content = rep ? ak__json_get(rep, "content") : NULL;
    return cJSON_IsString(content) && strcmp(content->valuestring, "\xe2\x96\x81") == 0;
}

static ak_status own(hf_tok *x, char *s) {
    if (!s) return AK_FAIL(AK_ERR_NO_MEMORY, "tokenizer strings");
    char **v = realloc(x->owned, (x->n_owned + 1) * sizeof *v);
    if (!v) {
        free(s);
        return AK_FAIL(AK_ERR_NO_MEMORY, "tokenizer strings");
    }
    x->owned = v;
    x->owned[x->n_owned++] = s;
    return AK_OK;
}

/* ---- components ---------------------------------------------------------------------
 * Each normalizer / pre_tokenizer / decoder a tokenizer.json names is either implemented
 * here or refused by name; nothing is skipped silently. */

static const char *type_of(const cJSON *node) {
    const cJSON *t = ak__json_get(node, "type");
    return cJSON_IsString(t) ? t->valuestring : "?";
}

static int in_list(const char *s, const char *const *list) {
    for (; *list; list++)
        if (strcmp(s, *list) == 0) return 1;
    return 0;
}

/* Every member of `node` (a Sequence is walked) must be of a type in `ok`. */
static ak_status check_types(const hf_tok *x, const char *what, const cJSON *node,
                             const char *list_key, const char *const *ok) {
    if (!node || cJSON_IsNull(node)) return AK_OK;
    const char *type = type_of(node);
    if (strcmp(type, "Sequence") == 0) {
        const cJSON *list = ak__json_get(node, list_key);
        for (const cJSON *e = cJSON_IsArray(list) ? list->child : NULL; e; e = e->next)
            AK_CHECK(check_types(x, what, e, list_key, ok));
        return AK_OK;
    }
    if (!in_list(type, ok))
        return AK_FAIL(AK_ERR_UNSUPPORTED, "%s/tokenizer.json: %s '%s' is not supported for a "
                       "%s tokenizer", x->dir, what, type,
                       x->spec.kind == AK_TOKENIZER_SPM ? "SentencePiece-style"
                       : x->spec.kind == AK_TOKENIZER_UGM ? "Unigram" : "byte-level BPE");
    return AK_OK;
}

/* SentencePiece-style normalizers must be the ▁ escaping the `llama` tokenizer does itself:
 * Replace " " → "▁" and Prepend "▁"; another replacement would be ignored, so it is refused. */
static ak_status check_spm_normalizer(const hf_tok *x, const cJSON *node) {
    if (!node || cJSON_IsNull(node)) return AK_OK;
    const char *type = type_of(node);
    if (strcmp(type, "Sequence") == 0) {
        const cJSON *list = ak__json_get(node, "normalizers");
        for (const cJSON *e = cJSON_IsArray(list) ? list->child : NULL; e; e = e->next)
            AK_CHECK(check_spm_normalizer(x, e));
        return AK_OK;
    }
    const char *want = NULL, *got = NULL;
    if (strcmp(type, "Prepend") == 0) {
        const cJSON *p = ak__json_get(node, "prepend");
        got = cJSON_IsString(p) ? p->valuestring : "?";
        want = "\xe2\x96\x81";
    } else if (strcmp(type, "Replace") == 0) {
        const cJSON *pat = ak__json_get(node, "pattern"), *content = ak__json_get(node, "content");
        const cJSON *str = pat ? ak__json_get(pat, "String") : NULL;
        int ok = cJSON_IsString(str) && strcmp(str->valuestring, " ") == 0 &&
                 cJSON_IsString(content) && strcmp(content->valuestring, "\xe2\x96\x81") == 0;
        got = ok ? "\xe2\x96\x81" : "another replacement";
        want = "\xe2\x96\x81";
    }
    if (want && strcmp(got, want) == 0) return AK_OK;
    return AK_FAIL(AK_ERR_UNSUPPORTED, "%s/tokenizer.json: normalizer %s (%s) is not supported "
                   "for a SentencePiece-style tokenizer (only Prepend \"\xe2\x96\x81\" and Replace "
                   "\" \" by \"\xe2\x96\x81\")", x->dir, type, got ? got : "?");
}

/* The components a tokenizer of this kind may have. SentencePiece-style: the ▁ escaping
 * (Prepend/Replace normalizers, or Metaspace) and its decoders; the Split on " " of Gemma
 * is allowed as it meets no space once spaces are ▁. Byte-level: NFC, the Split/ByteLevel
 * chain read by read_pretok, the ByteLevel decoder. */
static ak_status check_components(hf_tok *x) {
    static const char *const spm_norm[] = {"Prepend", "Replace", NULL};
    static const char *const spm_pre[] = {"Metaspace", "Split", NULL};
    static const char *const spm_dec[] = {"Replace", "ByteFallback", "Fuse", "Strip", "Metaspace", NULL};
    static const char *const bl_norm[] = {"NFC", "NFD", "NFKC", "NFKD", "Lowercase", "Strip",
                                          "Replace", "Prepend", NULL};
    static const char *const bl_pre[] = {"Split", "ByteLevel", "Punctuation", "Digits",
                                         "Whitespace", "WhitespaceSplit", "Metaspace", NULL};
    static const char *const bl_dec[] = {"ByteLevel", NULL};
    int spm = x->spec.kind == AK_TOKENIZER_SPM;
    const cJSON *j = x->json;
    AK_CHECK(check_types(x, "normalizer", ak__json_get(j, "normalizer"), "normalizers",
                         spm ? spm_norm : bl_norm));
    AK_CHECK(check_types(x, "pre_tokenizer", ak__json_get(j, "pre_tokenizer"), "pretokenizers",
                         spm ? spm_pre : bl_pre));
    AK_CHECK(check_types(x, "decoder", ak__json_get(j, "decoder"), "decoders",
                         spm ? spm_dec : bl_dec));
    if (spm) AK_CHECK(check_spm_normalizer(x, ak__json_get(j, "normalizer")));
    /* Gemma's Split on " " meets no space once spaces are ▁: the only Split allowed here */
    const cJSON *split = spm ? find_part(ak__json_get(j, "pre_tokenizer"), "pretokenizers", "Split") : NULL;
    const cJSON *pat = split ? ak__json_get(split, "pattern") : NULL;
    const cJSON *str = pat ? ak__json_get(pat, "String") : NULL;
    if (split && !(cJSON_IsString(str) && strcmp(str->valuestring, " ") == 0))
        return AK_FAIL(AK_ERR_UNSUPPORTED, "%s/tokenizer.json: pre_tokenizer Split other than on "
                       "\" \" is not supported for a SentencePiece-style tokenizer", x->dir);
    const cJSON *m = x->model;
    const cJSON *prefix = ak__json_get(m, "continuing_subword_prefix");
    const cJSON *suffix = ak__json_get(m, "end_of_word_suffix");
    if ((cJSON_IsString(prefix) && prefix->valuestring[0]) ||
        (cJSON_IsString(suffix) && suffix->valuestring[0]))
        return AK_FAIL(AK_ERR_UNSUPPORTED, "%s/tokenizer.json: BPE continuing_subword_prefix / "
                       "end_of_word_suffix are not supported", x->dir);
    const cJSON *dropout = ak__json_get(m, "dropout");
    if (cJSON_IsNumber(dropout) && dropout->valuedouble != 0)
        return AK_FAIL(AK_ERR_UNSUPPORTED, "%s/tokenizer.json: BPE dropout is not supported", x->dir);
    if (!spm && cJSON_IsTrue(ak__json_get(m, "byte_fallback")))
        return AK_FAIL(AK_ERR_UNSUPPORTED, "%s/tokenizer.json: byte_fallback in a byte-level BPE",
                       x->dir);
    return AK_OK;
}

/* ---- normalizers (byte-level BPE) -----------------------------------------------------
 * NFC alone is the tokenizer's nfc flag (what GGUF tokenizers of llama.cpp do without
 * saying); any other normalizer makes a text rewriter (textnorm.c). */

static ak_status norm_step(hf_tok *x, int kind, const char *a, const char *b, int flags) {
    if (!x->norm) AK_CHECK(ak__textnorm_new(&x->norm));
    return ak__textnorm_add(x->norm, kind, a, b, flags);
}

static const char *json_str(const cJSON *node, const char *key) {
    const cJSON *v = node ? ak__json_get(node, key) : NULL;
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static ak_status read_replace(hf_tok *x, const cJSON *node) {
    const cJSON *pat = ak__json_get(node, "pattern");
    const char *rx = json_str(pat, "Regex"), *str = json_str(pat, "String");
    const char *content = json_str(node, "content");
    if ((!rx && !str) || !content)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "%s/tokenizer.json: normalizer Replace without a "
                       "pattern or content", x->dir);
    return norm_step(x, rx ? AK_NORM_REPLACE_REGEX : AK_NORM_REPLACE_STRING, rx ? rx : str,
                     content, 0);
}

/* Precompiled: SentencePiece's normalizer map, base64 in the file. */
static ak_status read_precompiled(hf_tok *x, const cJSON *node) {
    const char *b64 = json_str(node, "precompiled_charsmap");
    if (!b64)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "%s/tokenizer.json: Precompiled without a "
                       "precompiled_charsmap", x->dir);
    uint8_t *blob;
    size_t n;
    AK_CHECK(ak__base64_decode(x->dir, b64, &blob, &n));
    ak_status st = AK_OK;
    if (!x->norm) st = ak__textnorm_new(&x->norm);
    if (st == AK_OK) st = ak__textnorm_add_charsmap(x->norm, blob, n);
    free(blob);
    return st;
}

static ak_status read_norm_part(hf_tok *x, const cJSON *node) {
    static const struct { const char *name; int kind; } forms[] = {
        {"NFC", AK_NORM_NFC}, {"NFD", AK_NORM_NFD}, {"NFKC", AK_NORM_NFKC},
        {"NFKD", AK_NORM_NFKD}, {"Lowercase", AK_NORM_LOWERCASE}};
    const char *type = type_of(node);
    if (strcmp(type, "Sequence") == 0) {
        const cJSON *list = ak__json_get(node, "normalizers");
        for (const cJSON *e = cJSON_IsArray(list) ? list->child : NULL; e; e = e->next)
            AK_CHECK(read_norm_part(x, e));
        return AK_OK;
    }
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++)
        if (strcmp(type, forms[i].name) == 0) return norm_step(x, forms[i].kind, NULL, NULL, 0);
    if (strcmp(type, "Strip") == 0)
        return norm_step(x, AK_NORM_STRIP, NULL, NULL,
                         (cJSON_IsTrue(ak__json_get(node, "strip_left")) ? AK_STRIP_LEFT : 0) |
                         (cJSON_IsTrue(ak__json_get(node, "strip_right")) ? AK_STRIP_RIGHT : 0));
    if (strcmp(type, "Replace") == 0) return read_replace(x, node);
    if (strcmp(type, "Precompiled") == 0) return read_precompiled(x, node);
    if (strcmp(type, "Prepend") == 0) {
        const char *p = json_str(node, "prepend");
        if (!p) return AK_FAIL(AK_ERR_INVALID_MODEL, "%s/tokenizer.json: Prepend without a "
                               "prepend string", x->dir);
        return norm_step(x, AK_NORM_PREPEND, p, NULL, 0);
    }
    return AK_FAIL(AK_ERR_UNSUPPORTED, "%s/tokenizer.json: normalizer '%s' is not supported",
                   x->dir, type);
}

static ak_status read_normalizers(hf_tok *x) {
    const cJSON *n = ak__json_get(x->json, "normalizer");
    if (!n || cJSON_IsNull(n)) return AK_OK;
    if (strcmp(type_of(n), "NFC") == 0) {
        x->nfc = 1;
        return AK_OK;
    }
    return read_norm_part(x, n);
}

/* GPT-2's split, which a ByteLevel pre-tokenizer with use_regex runs. */
static const char k_gpt2_regex[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

static ak_status push_regex(hf_tok *x, const char *rx, int matches_only) {
    if (x->n_regexes == sizeof x->regexes / sizeof x->regexes[0])
        return AK_FAIL(AK_ERR_UNSUPPORTED, "%s/tokenizer.json: more than %zu pre-tokenizer "
                       "splits", x->dir, sizeof x->regexes / sizeof x->regexes[0]);
    x->matches_only[x->n_regexes] = (uint8_t)matches_only;
    x->regexes[x->n_regexes++] = rx;
    return AK_OK;
}

/* A Split is an expression: behavior Isolated (matches and the text between them are
 * pieces), or inverted with behavior Removed (only the matches are); a String pattern is
 * matched literally. */
static ak_status read_split(hf_tok *x, const cJSON *split) {
    const cJSON *pattern = ak__json_get(split, "pattern");
    const cJSON *regex = pattern ? ak__json_get(pattern, "Regex") : NULL;
    const cJSON *str = pattern ? ak__json_get(pattern, "String") : NULL;
    const cJSON *behavior = ak__json_get(split, "behavior");
    const char *b = cJSON_IsString(behavior) ? behavior->valuestring : "?";
    int invert = cJSON_IsTrue(ak__json_get(split, "invert"));
    int isolated = strcmp(b, "Isolated") == 0 && !invert;
    int matches_only = strcmp(b, "Removed") == 0 && invert;
    if (!isolated && !matches_only)
        return AK_FAIL(AK_ERR_UNSUPPORTED, "%s/tokenizer.json: pre_tokenizer Split with behavior "
                       "'%s'%s is not supported (Isolated, or Removed inverted)", x->dir, b,
                       invert ? " inverted" : "");
    if (cJSON_IsString(regex)) return push_regex(x, regex->valuestring, matches_only);
    if (!cJSON_IsString(str))
        return AK_FAIL(AK_ERR_INVALID_MODEL, "%s/tokenizer.json: a Split without a pattern", x->dir);
    size_t n = strlen(str->valuestring);
    char *q = malloc(n + 5);
    AK_CHECK(own(x, q));
    memcpy(q, "\\Q", 2);
    memcpy(q + 2, str->valuestring, n);
    memcpy(q + 2 + n, "\\E", 3);
    return push_regex(x, q, matches_only);
}

/* JavaScript's \s (transformers.js's Whitespace and WhitespaceSplit use it), as a class body */
#define JS_SPACE "\\t\\n\\x0B\\f\\r \\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}" \
                 "\\x{202F}\\x{205F}\\x{3000}\\x{FEFF}"
/* transformers.js's punctuation: \p{P} and the ASCII symbols */
#define PUNCT "\\p{P}\\x{21}-\\x{2F}\\x{3A}-\\x{40}\\x{5B}-\\x{60}\\x{7B}-\\x{7E}"

/* Pre-tokenizers that are one expression whose matches are the words. Whitespace's \w is
 * ASCII, as in transformers.js (the Rust library's is Unicode). */
static ak_status read_pattern_pre(hf_tok *x, const cJSON *part, const char *type) {
    if (strcmp(type, "Whitespace") == 0)
        return push_regex(x, "[A-Za-z0-9_]+|[^A-Za-z0-9_" JS_SPACE "]+", 1);
    if (strcmp(type, "WhitespaceSplit") == 0) return push_regex(x, "[^" JS_SPACE "]+", 1);
    if (strcmp(type, "Digits") == 0)
        return push_regex(x, cJSON_IsTrue(ak__json_get(part, "individual_digits"))
                                 ? "[^0-9]+|[0-9]" : "[^0-9]+|[0-9]+", 1);
    /* Punctuation: Contiguous keeps a run of punctuation together, Isolated (the default)
     * makes each mark a word */
    const char *b = json_str(part, "behavior");
    if (!b || strcmp(b, "Isolated") == 0) return push_regex(x, "[^" PUNCT "]+|[" PUNCT "]", 1);
    if (strcmp(b, "Contiguous") == 0) return push_regex(x, "[^" PUNCT "]+|[" PUNCT "]+", 1);
    return AK_FAIL(AK_ERR_UNSUPPORTED, "%s/tokenizer.json: pre_tokenizer Punctuation with "
                   "behavior '%s' is not supported (Isolated, Contiguous)", x->dir, b);
}

/* Metaspace rewrites the text (spaces → the replacement, which may also go in front) and,
 * with split, cuts it before each replacement; it must come first (it rewrites the whole
 * run of text, not each word). */
static ak_status read_metaspace(hf_tok *x, const cJSON *part, int position) {
    const char *rep = json_str(part, "replacement");
    if (!rep || !rep[0])
        return AK_FAIL(AK_ERR_INVALID_MODEL, "%s/tokenizer.json: Metaspace without a "
                       "replacement", x->dir);
    if (position != 0)
        return AK_FAIL(AK_ERR_UNSUPPORTED, "%s/tokenizer.json: pre_tokenizer Metaspace after "
                       "another pre-tokenizer is not supported", x->dir);
    const char *scheme = json_str(part, "prepend_scheme");
    int flags = cJSON_IsFalse(ak__json_get(part, "add_prefix_space")) ? AK_PREPEND_NEVER
                                                                         : AK_PREPEND_ALWAYS;
    if (scheme && strcmp(scheme, "always") == 0) flags = AK_PREPEND_ALWAYS;
    else if (scheme && strcmp(scheme, "first") == 0) flags = AK_PREPEND_FIRST;
    else if (scheme && strcmp(scheme, "never") == 0) flags = AK_PREPEND_NEVER;
    else if (scheme)
        return AK_FAIL(AK_ERR_UNSUPPORTED, "%s/tokenizer.json: Metaspace prepend_scheme '%s' is "
                       "not supported (always, first, never)", x->dir, scheme);
    AK_CHECK(norm_step(x, AK_NORM_METASPACE, rep, NULL, flags));
    if (cJSON_IsFalse(ak__json_get(part, "split"))) return AK_OK;
    /* each replacement starts a word (MergedWithNext) */
    size_t n = strlen(rep);
    char *rx = malloc(4 * n + 64);
    AK_CHECK(own(x, rx));
    snprintf(rx, 4 * n + 64, "(?s)(?:(?!\\Q%s\\E).)+|\\Q%s\\E(?:(?!\\Q%s\\E).)*", rep, rep, rep);
    return push_regex(x, rx, 1);
}

static ak_status read_pre_part(hf_tok *x, const cJSON *part, int *byte_level) {
    const char *type = type_of(part);
    if (strcmp(type, "Sequence") == 0) {
        const cJSON *list = ak__json_get(part, "pretokenizers");
        for (const cJSON *e = cJSON_IsArray(list) ? list->child : NULL; e; e = e->next)
            AK_CHECK(read_pre_part(x, e, byte_level));
        return AK_OK;
    }
    int position = x->n_pre_parts++;
    if (strcmp(type, "Split") == 0) return read_split(x, part);
    if (strcmp(type, "Whitespace") == 0 || strcmp(type, "WhitespaceSplit") == 0 ||
        strcmp(type, "Digits") == 0 || strcmp(type, "Punctuation") == 0)
        return read_pattern_pre(x, part, type);
    if (strcmp(type, "Metaspace") == 0) return read_metaspace(x, part, position);
    if (strcmp(type, "ByteLevel") == 0) {
        *byte_level = 1;
        if (cJSON_IsTrue(ak__json_get(part, "add_prefix_space"))) {
            if (position != 0)
                return AK_FAIL(AK_ERR_UNSUPPORTED, "%s/tokenizer.json: pre_tokenizer ByteLevel "
                               "with add_prefix_space after another pre-tokenizer is not "
                               "supported", x->dir);
            AK_CHECK(norm_step(x, AK_NORM_PREFIX_SPACE, NULL, NULL, 0));
        }
        if (!cJSON_IsFalse(ak__json_get(part, "use_regex"))) return push_regex(x, k_gpt2_regex, 0);
        return AK_OK;
    }
    return AK_FAIL(AK_ERR_UNSUPPORTED, "%s/tokenizer.json: pre_tokenizer '%s' is not supported "
                   "in this position", x->dir, type);
}

/* The byte-level pre_tokenizer: Falcon's (Punctuation, ByteLevel, Digits) is the table's
 * "falcon"; otherwise a chain of Split and ByteLevel gives the expressions, and the table
 * names them when it knows them (for writing GGUF). */
/* Falcon's chain: Punctuation, ByteLevel with its split, Digits (, Split of 3 digits). */
static int is_falcon_chain(const cJSON *pre) {
    const cJSON *list = ak__json_get(pre, "pretokenizers");
    const cJSON *a = cJSON_IsArray(list) ? list->child : NULL, *b = a ? a->next : NULL;
    const cJSON *c = b ? b->next : NULL;
    return a && b && c && json_type_is(a, "Punctuation") && json_type_is(b, "ByteLevel") &&
           !cJSON_IsFalse(ak__json_get(b, "use_regex")) && json_type_is(c, "Digits");
}

static ak_status read_pretok(hf_tok *x) {
    const cJSON *pre = ak__json_get(x->json, "pre_tokenizer");
    x->spec.ignore_merges = cJSON_IsTrue(ak__json_get(x->model, "ignore_merges"));
    if (!x->norm && is_falcon_chain(pre)) {
        x->spec.pre_name = "falcon";
        return AK_OK;
    }
    int byte_level = 0;
    if (pre && !cJSON_IsNull(pre)) AK_CHECK(read_pre_part(x, pre, &byte_level));
    if (!byte_level)
        return AK_FAIL(AK_ERR_UNSUPPORTED, "%s/tokenizer.json: a BPE model that is neither "
                       "byte-level (a ByteLevel pre-tokenizer) nor SentencePiece-style", x->dir);
    if (x->n_regexes == 0) AK_CHECK(push_regex(x, "(?s).+", 1)); /* the text is one word */
    x->spec.pre_regexes = x->regexes;
    x->spec.pre_matches_only = x->matches_only;
    x->spec.n_pre_regexes = x->n_regexes;
    const ak__pretok_type *ty = ak__pretok_type_match(x->regexes, x->n_regexes, x->spec.ignore_merges);
    /* a tokenizer that rewrites its text has no GGUF name: converting it is refused */
    x->spec.pre_name = ty && !x->norm ? ty->names[0] : NULL;
    return AK_OK;
}

/* ---- vocabulary ---------------------------------------------------------------------- */

/* The vocabulary size: one past the largest id of vocab and added_tokens, at least
 * `min_size`. */
static ak_status vocab_size(hf_tok *x, int32_t min_size, int32_t *n) {
    const cJSON *vocab = ak__json_get(x->model, "vocab");
    if (!cJSON_IsObject(vocab))
        return AK_FAIL(AK_ERR_INVALID_MODEL, "%s/tokenizer.json: model.vocab is not an object",
                       x->dir);
    int32_t max = min_size - 1, id, named = 0;
    for (const cJSON *e = vocab->child; e; e = e->next, named++) {
        AK_CHECK(json_id(x, e, e->string, &id));
        if (id > max) max = id;
    }
    const cJSON *added = ak__json_get(x->json, "added_tokens");
    for (const cJSON *e = cJSON_IsArray(added) ? added->child : NULL; e; e = e->next, named++) {
        AK_CHECK(json_id(x, ak__json_get(e, "id"), "an added token", &id));
        if (id > max) max = id;
    }
    if (max < 0) return AK_FAIL(AK_ERR_INVALID_MODEL, "%s/tokenizer.json: no tokens", x->dir);
    int32_t unused = max + 1 - named; /* at least: a name given twice counts twice */
    if (unused > MAX_UNUSED_IDS && unused > named)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "%s/tokenizer.json: ids (or config vocab_size) "
                       "run to %d but only %d tokens are named: %d unused ids, more than the "
                       "named ones and more than %d", x->dir, max + 1, named, unused,
                       MAX_UNUSED_IDS);
    *n = max + 1;
    return AK_OK;
}

static int is_byte_token(const char *s) {
    return strlen(s) == 6 && memcmp(s, "<0x", 3) == 0 && s[5] == '>' &&
           strchr("0123456789ABCDEF", s[3]) && strchr("0123456789ABCDEF", s[4]);
}

static ak_status fill_added(hf_tok *x, int32_t n);

static ak_status fill_vocab(hf_tok *x, int32_t n) {
    x->tokens = calloc((size_t)n, sizeof *x->tokens);
    x->types = malloc((size_t)n);
    x->strip = calloc((size_t)n, 1);
    x->scores = malloc((size_t)n * sizeof *x->scores);
    if (!x->tokens || !x->types || !x->strip || !x->scores)
        return AK_FAIL(AK_ERR_NO_MEMORY, "vocabulary");
    int spm = x->spec.kind == AK_TOKENIZER_SPM;
    for (const cJSON *e = ak__json_get(x->model, "vocab")->child; e; e = e->next) {
        int32_t id = (int32_t)e->valuedouble;
        x->tokens[id] = e->string;
        x->types[id] = spm && is_byte_token(e->string) ? AK_TOKTYPE_BYTE : AK_TOKTYPE_NORMAL;
    }
    return fill_added(x, n);
}

/* added_tokens over the model's vocabulary; ids neither names become unused "[PADn]". */
static ak_status fill_added(hf_tok *x, int32_t n) {
    const cJSON *added = ak__json_get(x->json, "added_tokens");
    for (const cJSON *e = cJSON_IsArray(added) ? added->child : NULL; e; e = e->next) {
        const cJSON *content = ak__json_get(e, "content");
        if (!cJSON_IsString(content))
            return AK_FAIL(AK_ERR_INVALID_MODEL, "%s/tokenizer.json: an added token has no "
                           "content", x->dir);
        int32_t id = (int32_t)ak__json_get(e, "id")->valuedouble;
        x->tokens[id] = content->valuestring;
        x->types[id] = cJSON_IsTrue(ak__json_get(e, "special")) ? AK_TOKTYPE_CONTROL
                                                                : AK_TOKTYPE_USER_DEFINED;
        x->strip[id] = (uint8_t)((cJSON_IsTrue(ak__json_get(e, "lstrip")) ? AK_STRIP_LEFT : 0) |
                                 (cJSON_IsTrue(ak__json_get(e, "rstrip")) ? AK_STRIP_RIGHT : 0));
        if (cJSON_IsTrue(ak__json_get(e, "single_word")))
            return AK_FAIL(AK_ERR_UNSUPPORTED, "%s/tokenizer.json: added token '%.40s' has "
                           "single_word, which is not supported", x->dir, content->valuestring);
    }
    /* the missing ids' "[PADn]" texts share one block (one string each would be one
     * growth of `owned` per id: quadratic for an id near MAX_VOCAB) */
    size_t missing = 0;
    for (int32_t i = 0; i < n; i++) missing += !x->tokens[i];
    if (!missing) return AK_OK;
    enum { PAD_TEXT = sizeof "[PAD-2147483648]" }; /* any int: no truncation */
    char *pads = malloc(missing * PAD_TEXT);
    AK_CHECK(own(x, pads));
    for (int32_t i = 0; i < n; i++) {
        if (x->tokens[i]) continue;
        snprintf(pads, PAD_TEXT, "[PAD%d]", i);
        x->tokens[i] = pads;
        x->types[i] = AK_TOKTYPE_UNUSED;
        pads += PAD_TEXT;
    }
    return AK_OK;
}

/* Merges as "left right" strings in rank order ("a b" strings or [a, b] pairs). */
static ak_status read_merges(hf_tok *x) {
    const cJSON *m = ak__json_get(x->model, "merges");
    if (!cJSON_IsArray(m))
        return AK_FAIL(AK_ERR_INVALID_MODEL, "%s/tokenizer.json: model.merges is not a list",
                       x->dir);
    size_t n = (size_t)cJSON_GetArraySize(m);
    x->merges = malloc((n ? n : 1) * sizeof *x->merges);
    if (!x->merges) return AK_FAIL(AK_ERR_NO_MEMORY, "merges");
    for (const cJSON *e = m->child; e; e = e->next) {
        if (cJSON_IsString(e)) {
            x->merges[x->n_merges++] = e->valuestring;
            continue;
        }
        const cJSON *a = cJSON_IsArray(e) ? e->child : NULL, *b = a ? a->next : NULL;
        if (!cJSON_IsString(a) || !cJSON_IsString(b) || b->next)
            return AK_FAIL(AK_ERR_INVALID_MODEL, "%s/tokenizer.json: merge %zu is neither "
                           "\"a b\" nor [a, b]", x->dir, x->n_merges);
        size_t la = strlen(a->valuestring), lb = strlen(b->valuestring);
        char *s = malloc(la + lb + 2);
        AK_CHECK(own(x, s));
        memcpy(s, a->valuestring, la);
        s[la] = ' ';
        memcpy(s + la + 1, b->valuestring, lb + 1);
        x->merges[x->n_merges++] = s;
    }
    return AK_OK;
}

/* SPM scores: −(rank of the first merge producing the token); tokens no merge produces
 * rank after every merge. */
static ak_status derive_scores(hf_tok *x, int32_t n) {
    for (int32_t i = 0; i < n; i++) x->scores[i] = NAN;
    char *buf = NULL;
    size_t cap = 0;
    ak_status st = AK_OK;
    for (size_t r = 0; r < x->n_merges && st == AK_OK; r++) {
        const char *m = x->merges[r], *sp = strchr(m + (m[0] != '\0'), ' ');
        size_t len = strlen(m);
        if (!sp) {
            st = AK_FAIL(AK_ERR_INVALID_MODEL, "%s/tokenizer.json: merge %zu ('%.40s') is not "
                         "'left right'", x->dir, r, m);
            break;
        }
        if (len > cap) {
            char *b = realloc(buf, cap = len + 64);
            if (!b) st = AK_FAIL(AK_ERR_NO_MEMORY, "merge text");
            else buf = b;
        }
        if (st != AK_OK) break;
        size_t left = (size_t)(sp - m);
        memcpy(buf, m, left);
        memcpy(buf + left, sp + 1, len - left - 1);
        int64_t id = ak_strmap_get(&x->map, buf, len - 1);
        if (id >= 0 && isnan(x->scores[id])) x->scores[id] = -(float)r;
    }
    for (int32_t i = 0; i < n; i++)
        if (isnan(x->scores[i])) x->scores[i] = -(float)(x->n_merges + (size_t)i);
    free(buf);
    return st;
}

/* ---- special ids and flags ----------------------------------------------------------- */

static ak_status map_tokens(hf_tok *x, int32_t n) {
    AK_CHECK(ak_strmap_init(&x->map, (uint64_t)n));
    /* a repeated text maps to its last id, as the tokenizer's own map does */
    for (int32_t i = 0; i < n; i++) ak_strmap_put(&x->map, x->tokens[i], strlen(x->tokens[i]), i, 1);
    return AK_OK;
}

static int32_t lookup(const hf_tok *x, const char *text) {
    return text ? (int32_t)ak_strmap_get(&x->map, text, strlen(text)) : -1;
}

/* config.json's bos_token_id / eos_token_id: an id or a list (then the first). */
static int32_t config_id(const hf_tok *x, const char *key) {
    const cJSON *v = x->cfg ? ak__json_get(x->cfg, key) : NULL;
    if (cJSON_IsArray(v)) v = v->child;
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble >= x->spec.n_vocab) return -1;
    return (int32_t)v->valuedouble;
}

static int cfg_flag(const cJSON *obj, const char *key, int *flag) {
    const cJSON *v = obj ? ak__json_get(obj, key) : NULL;
    if (!cJSON_IsBool(v)) return 0;
    *flag = cJSON_IsTrue(v);
    return 1;
}

/* TemplateProcessing's "single": special tokens before the sequence are BOS, after it EOS. */
static void template_flags(hf_tok *x, int *add_bos, int *add_eos) {
    const cJSON *tp = find_part(ak__json_get(x->json, "post_processor"), "processors",
                                "TemplateProcessing");
    const cJSON *single = tp ? ak__json_get(tp, "single") : NULL;
    int seen_seq = 0;
    for (const cJSON *e = cJSON_IsArray(single) ? single->child : NULL; e; e = e->next) {
        const cJSON *sp = ak__json_get(e, "SpecialToken");
        const cJSON *name = sp ? ak__json_get(sp, "id") : NULL;
        int32_t id = cJSON_IsString(name) ? lookup(x, name->valuestring) : -1;
        if (ak__json_get(e, "Sequence")) seen_seq = 1;
        if (id < 0) continue;
        int32_t *slot = seen_seq ? &x->spec.eos : &x->spec.bos;
        *(seen_seq ? add_eos : add_bos) = 1;
        if (*slot < 0) *slot = id;
    }
}

/* SentencePiece's dummy prefix: a Prepend normalizer or a Metaspace that prepends. */
static int space_prefix(const hf_tok *x) {
    int flag;
    if (cfg_flag(x->tcfg, "add_prefix_space", &flag)) return flag;
    if (find_part(ak__json_get(x->json, "normalizer"), "normalizers", "Prepend")) return 1;
    const cJSON *ms = find_part(ak__json_get(x->json, "pre_tokenizer"), "pretokenizers", "Metaspace");
    if (ms) {
        const cJSON *scheme = ak__json_get(ms, "prepend_scheme");
        if (cJSON_IsString(scheme)) return strcmp(scheme->valuestring, "never") != 0;
        return cfg_flag(ms, "add_prefix_space", &flag) ? flag : 1;
    }
    /* a Replace-only normalizer (no Prepend) means no prefix */
    return !find_part(ak__json_get(x->json, "normalizer"), "normalizers", "Replace");
}

static void read_specials(hf_tok *x) {
    ak__tok_spec *s = &x->spec;
    s->bos = lookup(x, token_setting(x->tcfg, "bos_token"));
    s->eos = lookup(x, token_setting(x->tcfg, "eos_token"));
    s->pad = lookup(x, token_setting(x->tcfg, "pad_token"));
    s->unk = lookup(x, token_setting(x->model, "unk_token"));
    if (s->unk < 0) s->unk = lookup(x, token_setting(x->tcfg, "unk_token"));
    if (s->bos < 0) s->bos = config_id(x, "bos_token_id");
    if (s->eos < 0) s->eos = config_id(x, "eos_token_id");
    if (s->kind == AK_TOKENIZER_UGM) s->unk = x->ugm_unk;
    if (s->unk >= 0 && (s->kind == AK_TOKENIZER_SPM || s->kind == AK_TOKENIZER_UGM))
        x->types[s->unk] = AK_TOKTYPE_UNKNOWN;
    int add_bos = 0, add_eos = 0;
    template_flags(x, &add_bos, &add_eos);
    /* Llama-2 folders without a post-processor still add BOS (LlamaTokenizer's default) */
    if (!ak__json_get(x->json, "post_processor") && s->kind == AK_TOKENIZER_SPM) add_bos = 1;
    if (!cfg_flag(x->tcfg, "add_bos_token", &s->add_bos)) s->add_bos = add_bos;
    if (!cfg_flag(x->tcfg, "add_eos_token", &s->add_eos)) s->add_eos = add_eos;
    s->add_space_prefix = (s->kind == AK_TOKENIZER_SPM || s->kind == AK_TOKENIZER_UGM) &&
                          space_prefix(x);
}

/* ---- assembling ---------------------------------------------------------------------- */

static ak_status read_files(hf_tok *x) {
    AK_CHECK(ak__hf_read_json(x->dir, "tokenizer.json", 0, &x->json));
    AK_CHECK(ak__hf_read_json(x->dir, "tokenizer_config.json", 1, &x->tcfg));
    AK_CHECK(ak__hf_read_json(x->dir, "config.json", 1, &x->cfg));
    x->model = ak__json_get(x->json, "model");
    if (!cJSON_IsObject(x->model))
        return AK_FAIL(AK_ERR_INVALID_MODEL, "%s/tokenizer.json has no model", x->dir);
    const cJSON *type = ak__json_get(x->model, "type");
    if (type && !json_type_is(x->model, "BPE") && !json_type_is(x->model, "WordPiece") &&
        !json_type_is(x->model, "Unigram"))
        return AK_FAIL(AK_ERR_UNSUPPORTED, "%s/tokenizer.json: model type '%s' (only BPE, "
                       "WordPiece and Unigram)", x->dir, cJSON_IsString(type) ? type->valuestring : "?");
    return AK_OK;
}

/* ---- WordPiece (embeddings: BERT) ----------------------------------------------------
 * The `bert` tokenizer (wpm.c) is llama.cpp's: NFD, lowercase, accents stripped, split on
 * whitespace, punctuation and CJK characters, greedy longest match. That is exactly
 * BertNormalizer (lowercase, clean_text, handle_chinese_chars, strip_accents unset or
 * true) + BertPreTokenizer + WordPiece with "##" continuations; anything else is refused.
 * Tokens get llama.cpp's converter's spelling (▁ before word starts, ## dropped). */

static int json_flag(const cJSON *obj, const char *key, int fallback) {
    const cJSON *v = ak__json_get(obj, key);
    return cJSON_IsBool(v) ? cJSON_IsTrue(v) : fallback;
}

static ak_status check_wordpiece(const hf_tok *x) {
    const cJSON *norm = ak__json_get(x->json, "normalizer");
    const cJSON *pre = ak__json_get(x->json, "pre_tokenizer");
    const cJSON *dec = ak__json_get(x->json, "decoder");
    const cJSON *prefix = ak__json_get(x->model, "continuing_subword_prefix");
    if (!norm || !json_type_is(norm, "BertNormalizer"))
        return AK_FAIL(AK_ERR_UNSUPPORTED, "%s/tokenizer.json: WordPiece with normalizer '%s' "
                       "(only BertNormalizer)", x->dir, norm ? type_of(norm) : "none");
    if (!json_flag(norm, "lowercase", 1) || !json_flag(norm, "strip_accents", 1) ||
        !json_flag(norm, "clean_text", 1) || !json_flag(norm, "handle_chinese_chars", 1))
        return AK_FAIL(AK_ERR_UNSUPPORTED, "%s/tokenizer.json: BertNormalizer without "
                       "lowercase, strip_accents, clean_text or handle_chinese_chars (a cased "
                       "WordPiece model) is not supported", x->dir);
    if (!pre || !json_type_is(pre, "BertPreTokenizer"))
        return AK_FAIL(AK_ERR_UNSUPPORTED, "%s/tokenizer.json: WordPiece with pre_tokenizer "
                       "'%s' (only BertPreTokenizer)", x->dir, pre ? type_of(pre) : "none");
    if (dec && !json_type_is(dec, "WordPiece"))
        return AK_FAIL(AK_ERR_UNSUPPORTED, "%s/tokenizer.json: WordPiece with decoder '%s'",
                       x->dir, type_of(dec));
    if (prefix && !(cJSON_IsString(prefix) && strcmp(prefix->valuestring, "##") == 0))
        return AK_FAIL(AK_ERR_UNSUPPORTED, "%s/tokenizer.json: WordPiece "
                       "continuing_subword_prefix other than \"##\"", x->dir);
    return AK_OK;
}

/* llama.cpp's spelling of vocab.txt entries: [X] stays, ##piece → piece, word → ▁word */
static ak_status wordpiece_spelling(hf_tok *x, int32_t n) {
    for (int32_t i = 0; i < n; i++) {
        const char *t = x->tokens[i];
        size_t len = strlen(t);
        if (x->types[i] != AK_TOKTYPE_NORMAL || (len >= 2 && t[0] == '[' && t[len - 1] == ']'))
            continue;
        if (len >= 2 && t[0] == '#' && t[1] == '#') {
            x->tokens[i] = t + 2;
            continue;
        }
        char *s = malloc(len + 4);
        if (!s) return AK_FAIL(AK_ERR_NO_MEMORY, "vocabulary");
        memcpy(s, "\xe2\x96\x81", 3);
        memcpy(s + 3, t, len + 1);
        AK_CHECK(own(x, s));
        x->tokens[i] = s;
    }
    return AK_OK;
}

/* [CLS] and [SEP]: TemplateProcessing's single, or BertProcessing's cls / sep pairs. */
static void wordpiece_specials(hf_tok *x) {
    ak__tok_spec *s = &x->spec;
    s->unk = lookup(x, token_setting(x->model, "unk_token"));
    s->pad = lookup(x, token_setting(x->tcfg, "pad_token"));
    s->bos = s->eos = -1;
    int add_bos = 0, add_eos = 0;
    template_flags(x, &add_bos, &add_eos);
    const cJSON *bp = find_part(ak__json_get(x->json, "post_processor"), "processors",
                                "BertProcessing");
    const cJSON *cls = bp ? ak__json_get(bp, "cls") : NULL, *sep = bp ? ak__json_get(bp, "sep") : NULL;
    if (cJSON_IsArray(cls) && cJSON_IsString(cls->child))
        s->bos = lookup(x, cls->child->valuestring), add_bos = 1;
    if (cJSON_IsArray(sep) && cJSON_IsString(sep->child))
        s->eos = lookup(x, sep->child->valuestring), add_eos = 1;
    s->add_bos = add_bos;
    s->add_eos = add_eos;
}

static ak_status assemble_wordpiece(hf_tok *x, int32_t min_vocab) {
    ak__tok_spec_defaults(&x->spec, AK_TOKENIZER_WPM);
    AK_CHECK(check_wordpiece(x));
    int32_t n = 0;
    AK_CHECK(vocab_size(x, min_vocab, &n));
    x->spec.n_vocab = n;
    AK_CHECK(fill_vocab(x, n));
    AK_CHECK(wordpiece_spelling(x, n));
    AK_CHECK(map_tokens(x, n));
    x->spec.tokens = x->tokens;
    x->spec.types = x->types;
    x->spec.strip = x->strip;
    wordpiece_specials(x);
    return AK_OK;
}

/* ---- Unigram (T5, ALBERT, XLNet...) ----------------------------------------------------- */

static ak_status check_unigram(hf_tok *x) {
    static const char *const norm[] = {"Precompiled", "Replace", "NFC", "NFD", "NFKC", "NFKD",
                                       "Lowercase", "Strip", "Prepend", NULL};
    static const char *const pre[] = {"Metaspace", "WhitespaceSplit", "Whitespace", "Split",
                                      "Digits", "Punctuation", NULL};
    static const char *const dec[] = {"Metaspace", "Replace", "ByteFallback", "Fuse", "Strip", NULL};
    const cJSON *j = x->json;
    AK_CHECK(check_types(x, "normalizer", ak__json_get(j, "normalizer"), "normalizers", norm));
    AK_CHECK(check_types(x, "pre_tokenizer", ak__json_get(j, "pre_tokenizer"), "pretokenizers", pre));
    return check_types(x, "decoder", ak__json_get(j, "decoder"), "decoders", dec);
}

/* The vocabulary: [piece, score] pairs, their index the id. */
static ak_status unigram_vocab(hf_tok *x, int32_t min_vocab, int32_t *n_out) {
    const cJSON *vocab = ak__json_get(x->model, "vocab");
    if (!cJSON_IsArray(vocab))
        return AK_FAIL(AK_ERR_INVALID_MODEL, "%s/tokenizer.json: Unigram model.vocab is not a "
                       "list", x->dir);
    int32_t n = cJSON_GetArraySize(vocab), id;
    if (n > MAX_VOCAB) return AK_FAIL(AK_ERR_INVALID_MODEL, "%s/tokenizer.json: %d pieces", x->dir, n);
    if (n < min_vocab) n = min_vocab;
    const cJSON *added = ak__json_get(x->json, "added_tokens");
    for (const cJSON *e = cJSON_IsArray(added) ? added->child : NULL; e; e = e->next) {
        AK_CHECK(json_id(x, ak__json_get(e, "id"), "an added token", &id));
        if (id >= n) n = id + 1;
    }
    if (n <= 0) return AK_FAIL(AK_ERR_INVALID_MODEL, "%s/tokenizer.json: no tokens", x->dir);
    x->tokens = calloc((size_t)n, sizeof *x->tokens);
    x->types = malloc((size_t)n);
    x->strip = calloc((size_t)n, 1);
    x->scores = calloc((size_t)n, sizeof *x->scores);
    if (!x->tokens || !x->types || !x->strip || !x->scores)
        return AK_FAIL(AK_ERR_NO_MEMORY, "vocabulary");
    int fallback = cJSON_IsTrue(ak__json_get(x->model, "byte_fallback"));
    id = 0;
    for (const cJSON *e = vocab->child; e; e = e->next, id++) {
        const cJSON *piece = cJSON_IsArray(e) ? e->child : NULL, *score = piece ? piece->next : NULL;
        if (!cJSON_IsString(piece) || !cJSON_IsNumber(score))
            return AK_FAIL(AK_ERR_INVALID_MODEL, "%s/tokenizer.json: Unigram piece %d is not "
                           "[text, score]", x->dir, id);
        x->tokens[id] = piece->valuestring;
        x->scores[id] = (float)score->valuedouble;
        x->types[id] = fallback && is_byte_token(piece->valuestring) ? AK_TOKTYPE_BYTE
                                                                     : AK_TOKTYPE_NORMAL;
    }
    *n_out = n;
    return fill_added(x, n);
}

/* The pre-tokenizer. Hugging Face's T5 chain (WhitespaceSplit, then Metaspace prepending
 * to every word) is the same as whitespace runs made one space and the ends trimmed, then
 * Metaspace on the whole text. */
static ak_status unigram_pretok(hf_tok *x) {
    const cJSON *pre = ak__json_get(x->json, "pre_tokenizer");
    if (!pre || cJSON_IsNull(pre)) return AK_OK;
    const cJSON *list = ak__json_get(pre, "pretokenizers");
    const cJSON *a = json_type_is(pre, "Sequence") && cJSON_IsArray(list) ? list->child : NULL;
    const cJSON *b = a ? a->next : NULL;
    int byte_level = 0;
    if (a && b && !b->next && json_type_is(a, "WhitespaceSplit") && json_type_is(b, "Metaspace")) {
        const char *scheme = json_str(b, "prepend_scheme");
        if ((scheme && strcmp(scheme, "always") != 0) || cJSON_IsFalse(ak__json_get(b, "add_prefix_space")))
            return AK_FAIL(AK_ERR_UNSUPPORTED, "%s/tokenizer.json: pre_tokenizer WhitespaceSplit "
                           "then Metaspace is supported with prepend_scheme 'always' only", x->dir);
        AK_CHECK(norm_step(x, AK_NORM_REPLACE_REGEX, "\\s+", " ", 0));
        AK_CHECK(norm_step(x, AK_NORM_STRIP, NULL, NULL, AK_STRIP_LEFT | AK_STRIP_RIGHT));
        AK_CHECK(read_pre_part(x, b, &byte_level));
    } else {
        AK_CHECK(read_pre_part(x, pre, &byte_level));
    }
    if (byte_level)
        return AK_FAIL(AK_ERR_UNSUPPORTED, "%s/tokenizer.json: pre_tokenizer ByteLevel with a "
                       "Unigram model is not supported", x->dir);
    if (x->n_regexes == 0) return AK_OK;
    x->spec.pre_regexes = x->regexes;
    x->spec.pre_matches_only = x->matches_only;
    x->spec.n_pre_regexes = x->n_regexes;
    return AK_OK;
}

static ak_status assemble_unigram(hf_tok *x, int32_t min_vocab) {
    ak__tok_spec_defaults(&x->spec, AK_TOKENIZER_UGM);
    AK_CHECK(check_unigram(x));
    const cJSON *unk = ak__json_get(x->model, "unk_id");
    x->ugm_unk = -1;
    if (unk && !cJSON_IsNull(unk)) AK_CHECK(json_id(x, unk, "model.unk_id", &x->ugm_unk));
    AK_CHECK(read_normalizers(x));
    if (x->nfc) { /* a lone NFC normalizer is a text rewriting step like any other here */
        x->nfc = 0;
        AK_CHECK(norm_step(x, AK_NORM_NFC, NULL, NULL, 0));
    }
    AK_CHECK(unigram_pretok(x));
    if (!x->norm) AK_CHECK(ak__textnorm_new(&x->norm)); /* marks a tokenizer.json's text */
    int32_t n = 0;
    AK_CHECK(unigram_vocab(x, min_vocab, &n));
    if (x->ugm_unk >= n)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "%s/tokenizer.json: model.unk_id %d is not a "
                       "token", x->dir, x->ugm_unk);
    x->spec.n_vocab = n;
    AK_CHECK(map_tokens(x, n));
    x->spec.tokens = x->tokens;
    x->spec.types = x->types;
    x->spec.strip = x->strip;
    x->spec.scores = x->scores;
    x->spec.user_spm_pieces = 1; /* the Metaspace decoder turns ▁ back in added tokens too */
    x->spec.all_pieces = 1;
    x->spec.byte_fallback = cJSON_IsTrue(ak__json_get(x->model, "byte_fallback"));
    read_specials(x);
    return AK_OK;
}

static ak_status assemble(hf_tok *x, int32_t min_vocab) {
    AK_CHECK(read_files(x));
    if (json_type_is(x->model, "WordPiece")) return assemble_wordpiece(x, min_vocab);
    if (json_type_is(x->model, "Unigram")) return assemble_unigram(x, min_vocab);
    int spm = is_spm_style(x);
    ak__tok_spec_defaults(&x->spec, spm ? AK_TOKENIZER_SPM : AK_TOKENIZER_BPE);
    AK_CHECK(check_components(x));
    if (!spm) AK_CHECK(read_normalizers(x));
    if (!spm) AK_CHECK(read_pretok(x));
    x->spec.nfc = x->nfc;
    x->spec.user_spm_pieces = spm; /* its Replace decoder turns ▁ back in added tokens too */
    int32_t n = 0;
    AK_CHECK(vocab_size(x, min_vocab, &n));
    x->spec.n_vocab = n;
    AK_CHECK(fill_vocab(x, n));
    AK_CHECK(read_merges(x));
    AK_CHECK(map_tokens(x, n));
    if (spm) {
        AK_CHECK(derive_scores(x, n));
        x->spec.scores = x->scores;
    } else {
        x->spec.merges = x->merges;
        x->spec.n_merges = x->n_merges;
    }
    x->spec.tokens = x->tokens;
    x->spec.types = x->types;
    x->spec.strip = x->strip;
    read_specials(x);
    return AK_OK;
}

ak_status ak__hf_tokenizer_dir(const char *dir, int32_t vocab_size, ak_tokenizer **out) {
    AK_ARG_CHECK(dir != NULL && out != NULL, "dir or out is NULL");
    AK_ARG_CHECK(vocab_size >= 0 && vocab_size <= MAX_VOCAB, "vocab_size %d", vocab_size);
    *out = NULL;
    hf_tok x;
    memset(&x, 0, sizeof x);
    x.dir = dir;
    ak_status st = assemble(&x, vocab_size);
    if (st == AK_OK) st = ak__tokenizer_build(&x.spec, out);
    if (st == AK_OK) { /* the text rewriter goes to the tokenizer as it is */
        (*out)->norm = x.norm;
        x.norm = NULL;
    }
    hf_tok_free(&x);
    return st;
}

ak_status ak__hf_tokenizer(const ak__hf *h, ak_tokenizer **out) {
    AK_ARG_CHECK(h != NULL && out != NULL, "hf or out is NULL");
    const cJSON *v = ak__json_get(h->config, "vocab_size");
    int32_t n = cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble <= MAX_VOCAB
                    ? (int32_t)v->valuedouble : 0;
    return ak__hf_tokenizer_dir(h->dir, n, out);
}
