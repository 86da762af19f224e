/* Internal layout of a tokenizer built from GGUF vocabulary metadata.
 *
 * One vocabulary (texts, scores, types, text → id map) serves three encoders:
 * spm.c (`llama`: merge adjacent pieces by best score, byte fallback), bpe.c (`gpt2`:
 * pre-tokenize with a regex-like splitter, map bytes to printable code points, merge by
 * rank) and wpm.c (`bert`: WordPiece, greedy longest match). encode.c splits out special tokens and dispatches; decode.c turns ids into bytes. */
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

/* pre-tokenizers of byte-level BPE (tokenizer.ggml.pre) */
typedef enum ak_pretok { AK_PRETOK_GPT2 = 1, AK_PRETOK_FALCON = 2 } ak_pretok;

/* A growable array of token ids. */
typedef struct ak_ids {
    int32_t *v;
    size_t n, cap;
} ak_ids;

ak_status ak__ids_push(ak_ids *ids, int32_t id);

struct ak_tokenizer {
    ak_tokenizer_kind kind;
    ak_pretok pre;
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
    int32_t *specials;      /* control/user-defined/unknown ids, longest text first */
    size_t n_specials;
    int32_t byte_token[256]; /* SPM: id of <0xXX> (or the 1-byte text), -1 if none */
    size_t max_token_len;    /* WPM: the longest token text, bytes */
};

/* What a tokenizer is built from: GGUF tokenizer.ggml.* metadata (vocab.c) or a Hugging
 * Face tokenizer.json (llm/hf/). The arrays are read during the build and not kept. */
typedef struct ak__tok_spec {
    ak_tokenizer_kind kind;
    ak_pretok pre;                 /* BPE only */
    int32_t n_vocab;
    const char *const *tokens;     /* n_vocab texts */
    const size_t *token_lens;      /* their lengths; NULL = NUL-terminated */
    const float *scores;           /* SPM merge priorities; NULL = all 0 */
    const uint8_t *types;          /* AK_TOKTYPE_*; NULL = all normal */
    const char *const *merges;     /* BPE: "left right"; the rank is the index */
    const size_t *merge_lens;      /* NULL = NUL-terminated */
    size_t n_merges;
    int32_t bos, eos, unk, pad;    /* -1 = none */
    int add_bos, add_eos, add_space_prefix;
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

/* Byte-level BPE helpers (bpe_bytes.c). */
/* The printable code point GPT-2 uses for byte `b`. */
uint32_t ak__bpe_byte_to_cp(uint8_t b);
/* The byte for code point `cp`, -1 when cp is not one of the 256. */
int ak__bpe_cp_to_byte(uint32_t cp);

/* Splits `text` into words (byte ranges, as [start, end) pairs appended to `bounds`). */
ak_status ak__pretokenize(ak_pretok pre, const char *text, size_t len, size_t **bounds,
                          size_t *n_words);

#endif /* AK_LLM_TOKENIZER_H */
