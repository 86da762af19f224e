/* Internal layout of a tokenizer built from GGUF vocabulary metadata.
 *
 * One vocabulary (texts, scores, types, text → id map) serves three encoders:
 * spm.c (`llama`: merge adjacent pieces by best score, byte fallback), bpe.c (`gpt2`:
 * pre-tokenize with a list of regular expressions (pretok.c), map bytes to printable code
 * points, merge by rank), wpm.c (`bert`: WordPiece, greedy longest match) and ugm.c (`t5`:
 * SentencePiece Unigram, Viterbi by piece score after SentencePiece's normalizer). encode.c
 * splits out special tokens and dispatches; decode.c turns ids into bytes. */
#ifndef AK_LLM_TOKENIZER_H
#define AK_LLM_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "accelkit/llm.h"
#include "llm/strmap.h"

/* tokenizer.ggml.token_type values */
enum {
    AK_TOKTYPE_NORMAL = 1,
    AK_TOKTYPE_UNKNOWN = 2,
    AK_TOKTYPE_CONTROL = 3,
    AK_TOKTYPE_USER_DEFINED = 4,
    AK_TOKTYPE_UNUSED = 5,
    AK_TOKTYPE_BYTE = 6
};

enum { AK_STRIP_LEFT = 1, AK_STRIP_RIGHT = 2 };

/* A compiled list of pre-tokenizer expressions (pretok.c). */
typedef struct ak__pretok ak__pretok;

/* Flags llama.cpp sets for a pre-tokenizer type. */
enum {
    AK_PRE_IGNORE_MERGES = 1, /* a word that is a token is not merged (Llama 3) */
    AK_PRE_ADD_BOS = 2,       /* add BOS unless the file says otherwise */
    AK_PRE_NO_CLEAN = 4,      /* clean_spaces off */
    AK_PRE_NO_BOS = 8         /* no BOS id by default (ChatGLM) */
};

/* One row of the pre-tokenizer table (pretok_table.c): the tokenizer.ggml.pre names of a
 * type, llama.cpp's expressions for it, their tokenizer.json form where it differs (NULL:
 * the same), and AK_PRE_* flags. */
typedef struct ak__pretok_type {
    const char *const *names;   /* NULL-terminated; the first is the one written */
    const char *const *regexes; /* NULL-terminated */
    const char *const *hf;      /* NULL-terminated, or NULL */
    unsigned flags;
} ak__pretok_type;

/* The type called `name`, NULL when the table has none (*unsupported then says whether
 * llama.cpp knows the name but splits that way by code of its own, not by expressions). */
const ak__pretok_type *ak__pretok_type_find(const char *name, size_t len, int *unsupported);
/* The type whose expressions (either form) are exactly `regexes`, preferring one whose
 * ignore_merges agrees; NULL when none. */
const ak__pretok_type *ak__pretok_type_match(const char *const *regexes, size_t n,
                                             int ignore_merges);

/* matches_only: NULL, or per expression 1 when the text between its matches is dropped. */
ak_status ak__pretok_compile(const char *const *regexes, const uint8_t *matches_only, size_t n,
                             ak__pretok **out);
void ak__pretok_free(ak__pretok *p);
size_t ak__pretok_count(const ak__pretok *p);
const char *ak__pretok_source(const ak__pretok *p, size_t i);
int ak__pretok_matches_only(const ak__pretok *p, size_t i);

/* Text rewriting of a tokenizer.json before the split into words (textnorm.c): its
 * normalizers in order, then the rewriting part of a Metaspace or ByteLevel pre-tokenizer. */
typedef struct ak__textnorm ak__textnorm;
enum {
    AK_NORM_NFC, AK_NORM_NFD, AK_NORM_NFKC, AK_NORM_NFKD,
    AK_NORM_LOWERCASE,
    AK_NORM_STRIP,          /* flags: AK_STRIP_* */
    AK_NORM_REPLACE_REGEX,  /* a: expression, b: content */
    AK_NORM_REPLACE_STRING, /* a: literal text, b: content */
    AK_NORM_PREPEND,        /* a: the prefix */
    AK_NORM_METASPACE,      /* a: the replacement of " ", flags: AK_PREPEND_* */
    AK_NORM_PREFIX_SPACE,   /* ByteLevel add_prefix_space: " " in front unless there is one */
    AK_NORM_PRECOMPILED     /* SentencePiece's precompiled map (ak__textnorm_add_charsmap) */
};
enum { AK_PREPEND_ALWAYS, AK_PREPEND_FIRST, AK_PREPEND_NEVER };

ak_status ak__textnorm_new(ak__textnorm **out);
ak_status ak__textnorm_add(ak__textnorm *t, int kind, const char *a, const char *b, int flags);
size_t ak__textnorm_count(const ak__textnorm *t);
/* A Precompiled step: the blob is SentencePiece's precompiled_charsmap (copied). */
ak_status ak__textnorm_add_charsmap(ak__textnorm *t, const uint8_t *blob, size_t n);
void ak__textnorm_free(ak__textnorm *t);
/* The rewritten text in a new *out (NUL-terminated); `first`: the text starts the input. */
ak_status ak__textnorm_apply(const ak__textnorm *t, const char *text, size_t len, int first,
                             char **out, size_t *out_len);

/* SentencePiece's precompiled normalizer (ugm.c): a double-array trie of input byte
 * strings and the replacement strings its leaves point to. */
typedef struct ak__charsmap {
    uint32_t *nodes;
    size_t n_nodes;
    char *repl;   /* NUL-terminated strings back to back (one NUL added at the end) */
    size_t n_repl;
} ak__charsmap;

/* An empty blob gives an empty map (nothing replaced); AK_ERR_INVALID_MODEL when malformed. */
ak_status ak__charsmap_parse(const uint8_t *blob, size_t n, ak__charsmap *out);
void ak__charsmap_free(ak__charsmap *m);
/* The longest prefix of s[0, n) the map replaces: *consumed bytes (0: none) → *repl. */
ak_status ak__charsmap_match(const ak__charsmap *m, const char *s, size_t n, const char **repl,
                             size_t *repl_len, size_t *consumed);
/* The whole text through the map (unmatched characters copied, invalid bytes → U+FFFD). */
ak_status ak__charsmap_apply(const ak__charsmap *m, const char *text, size_t len, char **out,
                             size_t *out_len);

/* A growable array of token ids. */
typedef struct ak_ids {
    int32_t *v;
    size_t n, cap;
} ak_ids;

ak_status ak__ids_push(ak_ids *ids, int32_t id);

struct ak_tokenizer {
    ak_tokenizer_kind kind;
    ak__pretok *pre;        /* BPE: the split into words */
    char *pre_name;         /* BPE: its tokenizer.ggml.pre name, NULL when not in the table */
    int ignore_merges;      /* BPE: a word that is a token is that token */
    int nfc;                /* BPE: text is put in Unicode NFC first (tokenizer.json's NFC) */
    ak__textnorm *norm;     /* BPE from tokenizer.json: its normalizers etc., or NULL */
    int user_spm_pieces;    /* SPM: user-defined tokens decode with ▁ as a space, as the
                             * tokenizer.json decoders do (llama.cpp leaves them as written) */
    int32_t n_vocab;
    char *blob;             /* every token text, back to back */
    size_t *text_off;       /* n_vocab + 1 offsets into blob */
    float *scores;          /* SPM merge priorities (0 when the file has none) */
    uint8_t *types;         /* AK_TOKTYPE_* */
    ak_strmap vocab;        /* text → id */
    char *merge_blob;       /* BPE merges "left right", back to back */
    size_t *merge_off;      /* n_merges + 1 offsets into merge_blob (rank order) */
    size_t n_merges;
    ak_strmap merges;       /* merge text → rank */
    int32_t bos, eos, unk, pad;
    int add_bos, add_eos, add_space_prefix;
    uint8_t *strip;         /* NULL, or per token AK_STRIP_*: an added token that absorbs the
                             * whitespace beside it (tokenizer.json lstrip/rstrip) */
    int32_t *specials;      /* control/user-defined/unknown ids, longest text first */
    size_t n_specials;
    int32_t byte_token[256]; /* SPM: id of <0xXX> (or the 1-byte text), -1 if none */
    size_t max_token_len;    /* WPM: the longest token text, bytes */
    /* UGM (ugm.c) */
    ak__charsmap charsmap;   /* GGUF: tokenizer.ggml.precompiled_charsmap (may be empty) */
    int ugm_merge_spaces;    /* GGUF: remove_extra_whitespaces */
    int ugm_escape_spaces;   /* GGUF: spaces become U+2581 */
    int ugm_byte_fallback;   /* tokenizer.json: unknown pieces spelled with <0xXX> tokens */
    ak_strmap ugm_pieces;    /* text → id of the pieces the lattice may use */
    size_t ugm_max_piece;    /* the longest of them, bytes */
    double ugm_unk_score;    /* the lowest piece score minus 10 */
};

/* What a tokenizer is built from: GGUF tokenizer.ggml.* metadata (vocab.c) or a Hugging
 * Face tokenizer.json (llm/hf/). The arrays are read during the build and not kept. */
typedef struct ak__tok_spec {
    ak_tokenizer_kind kind;
    /* BPE only: the pre-tokenizer, as a name of the table (pre_name, its expressions used
     * when pre_regexes is NULL) and/or expressions of its own (a tokenizer.json's) */
    const char *pre_name;
    const char *const *pre_regexes;
    const uint8_t *pre_matches_only; /* NULL, or per expression: drop the text between matches */
    size_t n_pre_regexes;
    int ignore_merges;
    int nfc;                       /* NFC normalizer (Hugging Face) */
    int user_spm_pieces;           /* see ak_tokenizer */
    int32_t n_vocab;
    const char *const *tokens;     /* n_vocab texts */
    const size_t *token_lens;      /* their lengths; NULL = NUL-terminated */
    const float *scores;           /* SPM merge priorities; NULL = all 0 */
    const uint8_t *types;          /* AK_TOKTYPE_*; NULL = all normal */
    const uint8_t *strip;          /* AK_STRIP_* per token; NULL = none */
    const char *const *merges;     /* BPE: "left right"; the rank is the index */
    const size_t *merge_lens;      /* NULL = NUL-terminated */
    size_t n_merges;
    int32_t bos, eos, unk, pad;    /* -1 = none */
    int add_bos, add_eos, add_space_prefix;
    /* UGM only */
    const uint8_t *charsmap;       /* precompiled_charsmap bytes (GGUF); NULL = none */
    size_t charsmap_len;
    int remove_extra_ws;           /* GGUF remove_extra_whitespaces */
    int byte_fallback;             /* tokenizer.json Unigram byte_fallback */
    int all_pieces;                /* tokenizer.json: every vocabulary entry is a piece */
} ak__tok_spec;

/* llama.cpp's defaults of `kind` for the special ids and flags (ids that do not exist in
 * the vocabulary must be set to -1 by the caller before building). */
void ak__tok_spec_defaults(ak__tok_spec *s, ak_tokenizer_kind kind);
/* Builds a tokenizer from `s` (copies everything); AK_ERR_INVALID_MODEL naming what is
 * wrong: no tokens, a type out of range, an id outside the vocabulary, a bad merge. */
ak_status ak__tokenizer_build(const ak__tok_spec *s, ak_tokenizer **out);

static inline const char *ak__tok_merge(const ak_tokenizer *t, size_t rank, size_t *len) {
    *len = t->merge_off[rank + 1] - t->merge_off[rank];
    return t->merge_blob + t->merge_off[rank];
}

static inline const char *ak__tok_text(const ak_tokenizer *t, int32_t id, size_t *len) {
    *len = t->text_off[id + 1] - t->text_off[id];
    return t->blob + t->text_off[id];
}

/* Encoders of one run of plain text (no special tokens in it). */
ak_status ak__spm_encode(const ak_tokenizer *t, const char *text, size_t len, ak_ids *out);
ak_status ak__bpe_encode(const ak_tokenizer *t, const char *text, size_t len, ak_ids *out);
ak_status ak__wpm_encode(const ak_tokenizer *t, const char *text, size_t len, ak_ids *out);
/* UGM: a GGUF vocabulary's normalizer then Viterbi (ak__ugm_encode), or Viterbi alone on
 * text already normalized and split (tokenizer.json). */
ak_status ak__ugm_encode(const ak_tokenizer *t, const char *text, size_t len, ak_ids *out);
ak_status ak__ugm_viterbi(const ak_tokenizer *t, const char *text, size_t len, ak_ids *out);
/* Builds the piece map and the unknown score (after the tokens and specials are in place). */
ak_status ak__ugm_prepare(ak_tokenizer *t, int all_pieces);

/* Byte-level BPE helpers (bpe_bytes.c). */
/* The printable code point GPT-2 uses for byte `b`. */
uint32_t ak__bpe_byte_to_cp(uint8_t b);
/* The byte for code point `cp`, -1 when cp is not one of the 256. */
int ak__bpe_cp_to_byte(uint32_t cp);

/* Splits `text` into words (byte ranges, as [start, end) pairs in a new *bounds). */
ak_status ak__pretokenize(const ak__pretok *p, const char *text, size_t len, size_t **bounds,
                          size_t *n_words);

#endif /* AK_LLM_TOKENIZER_H */
