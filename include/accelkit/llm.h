/* accelkit LLM: GGUF v3 model files and the tokenizers built from their vocabularies.
 *
 * This is the foundation of the LLM engine (issue 7): a validating, zero-copy GGUF reader
 * and the tokenizers of llama.cpp's GGUF files (SentencePiece-style BPE `llama`,
 * byte-level BPE `gpt2`, WordPiece `bert`). Every call returns an ak_status; the reason of a failure is in
 * ak_last_error(). A malformed file gives AK_ERR_INVALID_MODEL, never a crash. */
#ifndef ACCELKIT_LLM_H
#define ACCELKIT_LLM_H

#include <stddef.h>
#include <stdint.h>

#include "accelkit/ak.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- GGUF ---------------------------------------------------------------------------- */

typedef struct ak_gguf ak_gguf;

/* Value types of GGUF metadata (the numbers are the file format's). */
typedef enum ak_gguf_type {
    AK_GGUF_NONE = -1, /* key absent (ak_gguf_key_type only) */
    AK_GGUF_UINT8 = 0,
    AK_GGUF_INT8 = 1,
    AK_GGUF_UINT16 = 2,
    AK_GGUF_INT16 = 3,
    AK_GGUF_UINT32 = 4,
    AK_GGUF_INT32 = 5,
    AK_GGUF_FLOAT32 = 6,
    AK_GGUF_BOOL = 7,
    AK_GGUF_STRING = 8,
    AK_GGUF_ARRAY = 9,
    AK_GGUF_UINT64 = 10,
    AK_GGUF_INT64 = 11,
    AK_GGUF_FLOAT64 = 12
} ak_gguf_type;

/* Tensor element types (ggml numbering); others are recognized by id for their sizes. */
enum {
    AK_GGML_F32 = 0,
    AK_GGML_F16 = 1,
    AK_GGML_Q4_0 = 2,
    AK_GGML_Q8_0 = 8,
    AK_GGML_BF16 = 30
};

#define AK_GGUF_MAX_DIMS 4

/* One tensor; `name` and `data` point into the mapped file (name is NOT NUL-terminated). */
typedef struct ak_gguf_tensor {
    const char *name;
    size_t name_len;
    uint32_t n_dims;
    uint64_t dims[AK_GGUF_MAX_DIMS]; /* dims[0] is the innermost (contiguous) one; unused = 1 */
    uint32_t type;                   /* AK_GGML_* */
    uint64_t offset;                 /* from the start of the file */
    uint64_t size;                   /* bytes */
    const void *data;
} ak_gguf_tensor;

/* Maps and validates `path` (read-only). */
AK_API ak_status ak_gguf_open(const char *path, ak_gguf **out);
/* Parses `size` bytes at `data` without copying; the buffer must outlive the handle. */
AK_API ak_status ak_gguf_open_memory(const void *data, size_t size, ak_gguf **out);
AK_API ak_status ak_gguf_close(ak_gguf *g);

AK_API ak_status ak_gguf_version(const ak_gguf *g, uint32_t *version);
AK_API ak_status ak_gguf_alignment(const ak_gguf *g, uint64_t *alignment);
AK_API ak_status ak_gguf_kv_count(const ak_gguf *g, uint64_t *count);
/* Key `i` (not NUL-terminated) and its type. */
AK_API ak_status ak_gguf_kv_at(const ak_gguf *g, uint64_t i, const char **key, size_t *key_len,
                               ak_gguf_type *type);
/* The type of `key`, AK_GGUF_NONE when absent (that is not an error). */
AK_API ak_status ak_gguf_key_type(const ak_gguf *g, const char *key, ak_gguf_type *type);

/* Typed getters: AK_ERR_INVALID_ARG when the key is absent or of another kind. Integers
 * convert between widths when the value fits; floats accept FLOAT32/FLOAT64. */
AK_API ak_status ak_gguf_get_int(const ak_gguf *g, const char *key, int64_t *value);
AK_API ak_status ak_gguf_get_uint(const ak_gguf *g, const char *key, uint64_t *value);
AK_API ak_status ak_gguf_get_float(const ak_gguf *g, const char *key, double *value);
AK_API ak_status ak_gguf_get_bool(const ak_gguf *g, const char *key, int *value);
/* Strings point into the file and are NOT NUL-terminated. */
AK_API ak_status ak_gguf_get_string(const ak_gguf *g, const char *key, const char **s, size_t *len);
AK_API ak_status ak_gguf_get_array(const ak_gguf *g, const char *key, ak_gguf_type *elem_type,
                                   uint64_t *count);
AK_API ak_status ak_gguf_get_array_string(const ak_gguf *g, const char *key, uint64_t i,
                                          const char **s, size_t *len);
AK_API ak_status ak_gguf_get_array_int(const ak_gguf *g, const char *key, uint64_t i, int64_t *value);
AK_API ak_status ak_gguf_get_array_float(const ak_gguf *g, const char *key, uint64_t i, double *value);

AK_API ak_status ak_gguf_tensor_count(const ak_gguf *g, uint64_t *count);
AK_API ak_status ak_gguf_tensor_at(const ak_gguf *g, uint64_t i, ak_gguf_tensor *out);
/* AK_ERR_INVALID_ARG when no tensor has that name. */
AK_API ak_status ak_gguf_tensor_by_name(const ak_gguf *g, const char *name, ak_gguf_tensor *out);
/* Block size (elements) and bytes per block of a ggml type; AK_ERR_UNSUPPORTED if unknown. */
AK_API ak_status ak_ggml_type_size(uint32_t type, uint32_t *block_elems, uint32_t *block_bytes);

/* ---- tokenizer ----------------------------------------------------------------------- */

typedef struct ak_tokenizer ak_tokenizer;

typedef enum ak_tokenizer_kind {
    AK_TOKENIZER_SPM = 1, /* tokenizer.ggml.model = "llama": BPE by score, byte fallback */
    AK_TOKENIZER_BPE = 2, /* tokenizer.ggml.model = "gpt2": byte-level BPE by merge rank */
    AK_TOKENIZER_WPM = 3  /* tokenizer.ggml.model = "bert": WordPiece, greedy longest match */
} ak_tokenizer_kind;

typedef struct ak_tokenizer_info {
    ak_tokenizer_kind kind;
    int32_t n_vocab;
    int32_t bos, eos, unk, pad; /* -1 when the vocabulary has none */
    int add_bos, add_eos;       /* what the file asks for when encoding with AK_TOK_ADD_SPECIAL */
} ak_tokenizer_info;

enum {
    AK_TOK_ADD_SPECIAL = 1u << 0,   /* encode: BOS/EOS as the vocabulary asks */
    AK_TOK_PARSE_SPECIAL = 1u << 1, /* encode: control tokens written in the text are parsed */
    AK_TOK_RENDER_SPECIAL = 1u << 2, /* decode: control tokens produce their text */
    AK_TOK_STRIP_SPACE = 1u << 3     /* decode: drop the space the SPM/WPM encoder put in front */
};

/* Builds a tokenizer from the tokenizer.ggml.* metadata; it copies what it needs. */
AK_API ak_status ak_tokenizer_from_gguf(const ak_gguf *g, ak_tokenizer **out);
AK_API ak_status ak_tokenizer_free(ak_tokenizer *t);
AK_API ak_status ak_tokenizer_get_info(const ak_tokenizer *t, ak_tokenizer_info *info);

/* Encodes `len` bytes of UTF-8. `*n_ids` gets the number of tokens; when it exceeds `cap`
 * nothing is written and AK_ERR_INVALID_ARG is returned (len + 3 entries always suffice). */
AK_API ak_status ak_tokenizer_encode(const ak_tokenizer *t, const char *text, size_t len,
                                     unsigned flags, int32_t *ids, size_t cap, size_t *n_ids);
/* Decodes ids to bytes (not NUL-terminated); same size protocol as encode via `*len`. */
AK_API ak_status ak_tokenizer_decode(const ak_tokenizer *t, const int32_t *ids, size_t n_ids,
                                     unsigned flags, char *buf, size_t cap, size_t *len);
/* The vocabulary text of one token (pointer owned by the tokenizer, not NUL-terminated). */
AK_API ak_status ak_tokenizer_token_text(const ak_tokenizer *t, int32_t id, const char **text,
                                         size_t *len);

#ifdef __cplusplus
}
#endif

#endif /* ACCELKIT_LLM_H */
