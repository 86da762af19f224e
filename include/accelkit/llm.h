/* accelkit LLM: GGUF v3 model files and the tokenizers built from their vocabularies.
 *
 * This is the foundation of the LLM engine: a validating, zero-copy GGUF reader
 * and the tokenizers of llama.cpp's GGUF files (SentencePiece-style BPE `llama`,
 * byte-level BPE `gpt2`, WordPiece `bert`). Every call returns an ak_status; the reason of a failure is in
 * ak_last_error(). A malformed file gives AK_ERR_INVALID_MODEL, never a crash. */
#ifndef ACCELKIT_LLM_H
#define ACCELKIT_LLM_H

#include <stddef.h>
#include <stdint.h>

#include "accelkit/ak.h"
#include "accelkit/kernels.h"

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
    AK_GGML_Q2_K = 10,
    AK_GGML_Q3_K = 11,
    AK_GGML_Q4_K = 12,
    AK_GGML_Q5_K = 13,
    AK_GGML_Q6_K = 14,
    AK_GGML_Q8_K = 15,
    AK_GGML_IQ4_NL = 20,
    AK_GGML_IQ4_XS = 23,
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
    AK_TOKENIZER_WPM = 3, /* tokenizer.ggml.model = "bert": WordPiece, greedy longest match */
    AK_TOKENIZER_UGM = 4  /* tokenizer.ggml.model = "t5": SentencePiece Unigram (Viterbi) */
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


/* ---- models -------------------------------------------------------------------------- */

/* A Llama-family decoder (Llama 1/2/3, Mistral, Qwen2, TinyLlama, SmolLM...): RoPE,
 * grouped-query attention, RMSNorm, SwiGLU, tied or separate output, optional QKV bias.
 * Weights stay in their file's storage type (f32, f16, bf16, q8_0, q4_0, q2_K … q6_K,
 * q8_K, iq4_nl, iq4_xs). */
typedef struct ak_llm_model ak_llm_model;

typedef struct ak_llm_model_info {
    char arch[32];          /* "llama", "qwen2", ... */
    int32_t n_vocab, dim, n_layers, n_heads, n_kv_heads, head_dim, ffn_dim;
    int32_t max_context;    /* the trained context length */
    float rope_theta, norm_eps;
    uint32_t weight_type;   /* storage type of most matrices (AK_GGML_*) */
    uint64_t n_params;
    uint64_t weight_bytes;  /* bytes read per token by a decode step (all matrices) */
    /* embeddings */
    int32_t pooling;        /* ak_llm_model_embed's pooling: 0 none, 1 mean, 2 cls, 3 last;
                             * −1: a decoder whose pooling_type is refused (embed says why) */
    int32_t embedding_only; /* 1: an encoder (bert, nomic-bert): embeddings, no text */
} ak_llm_model_info;

/* How a GGUF file's weights come into memory. */
typedef struct ak_llm_load_options {
    /* 1: map the file in place (shared with other processes, paged in on first use; for
     * tools that read little of it). 0 (default): read it into private memory backed by
     * transparent huge pages, which decodes faster (no TLB miss per 4 KiB of weights). */
    int mmap;
} ak_llm_load_options;

AK_API void ak_llm_load_options_default(ak_llm_load_options *o);

/* Loads a GGUF v3 file (every offset/size/dimension validated) or a Hugging Face folder
 * (config.json + *.safetensors, sharded, + tokenizer.json), with default options. */
AK_API ak_status ak_llm_model_load(const char *path, ak_llm_model **out);
AK_API ak_status ak_llm_model_load_with(const char *path, const ak_llm_load_options *o,
                                        ak_llm_model **out);
AK_API ak_status ak_llm_model_free(ak_llm_model *m);
AK_API ak_status ak_llm_model_get_info(const ak_llm_model *m, ak_llm_model_info *info);
/* The model's tokenizer (owned by the model). */
AK_API ak_status ak_llm_model_tokenizer(const ak_llm_model *m, const ak_tokenizer **out);

/* ---- sampling ------------------------------------------------------------------------ */

typedef struct ak_sampling_params {
    float temperature;        /* 0 = greedy (argmax) */
    int32_t top_k;            /* keep the k most likely; 0 = off */
    float top_p;              /* nucleus mass; 1 = off */
    float min_p;              /* drop tokens below min_p·p(max); 0 = off */
    float repetition_penalty; /* >1 penalizes tokens of prompt and output (CTRL); 1 = off */
    float presence_penalty;   /* OpenAI: −= p for every token already generated; 0 = off */
    float frequency_penalty;  /* OpenAI: −= f·count for generated tokens; 0 = off */
    uint64_t seed;            /* same seed and inputs → same tokens */
    int32_t n_logprobs;       /* top-n log-probabilities reported per token, 0..20 */
} ak_sampling_params;

/* temperature 1, top_k 0, top_p 1, min_p 0, penalties off, seed 0, n_logprobs 0 */
AK_API ak_status ak_sampling_params_default(ak_sampling_params *p);

/* ---- engine -------------------------------------------------------------------------- */

typedef struct ak_llm_engine ak_llm_engine;

typedef struct ak_llm_engine_options {
    int32_t n_threads;        /* 0 = AK_NUM_THREADS or the online cores */
    int32_t max_seqs;         /* sequences scheduled together (default 64) */
    int32_t max_batch_tokens; /* tokens per step: decodes + prefill chunks (default 512) */
    int32_t block_size;       /* tokens per KV block (default 16) */
    uint64_t kv_bytes;        /* KV cache budget (default: max_context of max_seqs/4 seqs, ≤ 2 GiB) */
    ak_dtype kv_dtype;        /* AK_DTYPE_F32 or AK_DTYPE_F16 (default) */
    int32_t max_context;      /* 0 = the model's */
    int32_t prefix_caching;   /* reuse full blocks of equal prompt prefixes (default 1) */
    ak_llm_model *draft;      /* speculative decoding: a smaller model, same vocabulary */
    int32_t spec_gamma;       /* draft tokens per step (default 4; 0 = no speculation) */
    int32_t spec_ngram;       /* no draft model: prompt-lookup n-gram size (0 = off) */
    /* q8_0 KV cache */
    int32_t kv_q8_0;          /* 1: K and V in ggml's q8_0 blocks (kv_dtype is then unused;
                                 head_dim must be a multiple of 32) — half f16's bytes */
} ak_llm_engine_options;

AK_API ak_status ak_llm_engine_options_default(ak_llm_engine_options *o);

typedef enum ak_finish_reason {
    AK_FINISH_NONE = 0,      /* still running */
    AK_FINISH_STOP = 1,      /* EOS, a stop token id or a stop string */
    AK_FINISH_LENGTH = 2,    /* max_tokens or the context was reached */
    AK_FINISH_CANCELLED = 3, /* ak_llm_engine_cancel */
    AK_FINISH_ERROR = 4      /* see the event's status */
} ak_finish_reason;

typedef struct ak_llm_logprob {
    int32_t token;
    float logprob;
} ak_llm_logprob;

/* One generated token (or the end) of one sample of one request. Called on the engine
 * thread: copy what you need and return quickly. */
typedef struct ak_llm_event {
    uint64_t request_id;
    int32_t sample;            /* 0..n-1 */
    int32_t token;             /* -1 on an end event without a token */
    float logprob;             /* of `token` under the sampling distribution */
    const ak_llm_logprob *top; /* n_logprobs entries, most likely first */
    int32_t n_top;
    ak_finish_reason finish;   /* != NONE on the last event of this sample */
    size_t stop_trim;          /* bytes at the end of the text that belong to a stop string */
    ak_status status;          /* AK_FINISH_ERROR: why */
    uint32_t n_prompt;         /* prompt tokens, n_cached of them from the prefix cache */
    uint32_t n_cached;
} ak_llm_event;

typedef void (*ak_llm_event_fn)(void *user, const ak_llm_event *event);

/* ---- constrained decoding ------------------------------------------------------------ */

/* A GBNF grammar (llama.cpp's format) compiled against a tokenizer's vocabulary. Sampling
 * with it masks every token the grammar cannot accept next. Read-only after compilation:
 * one grammar may be shared by many requests and threads. */
typedef struct ak_llm_grammar ak_llm_grammar;

/* Compiles `len` bytes of GBNF; the start rule is "root". A syntax error, an undefined
 * rule, left recursion or an empty grammar gives AK_ERR_INVALID_ARG naming the line/rule. */
AK_API ak_status ak_llm_grammar_compile(const ak_tokenizer *tok, const char *gbnf, size_t len,
                                        ak_llm_grammar **out);
AK_API void ak_llm_grammar_free(ak_llm_grammar *g);
/* JSON Schema text → GBNF text (NUL-terminated, free with ak_free) whose root rule accepts
 * exactly the JSON documents the schema describes (within docs/server.md's subset). A
 * keyword outside it gives AK_ERR_UNSUPPORTED naming it. */
AK_API ak_status ak_llm_json_schema_to_gbnf(const char *schema_json, size_t len, char **gbnf);

typedef struct ak_llm_request {
    const int32_t *prompt;
    size_t n_prompt;
    int32_t max_tokens;              /* ≥ 1 */
    int32_t n;                       /* samples sharing the prompt copy-on-write (default 1) */
    ak_sampling_params sampling;
    const int32_t *stop_ids;         /* besides EOS */
    size_t n_stop_ids;
    const char *const *stop_strings; /* matched on the output bytes, across tokens */
    size_t n_stop_strings;
    int32_t ignore_eos;
    ak_llm_event_fn on_event;
    void *user;
    /* constrained decoding */
    const ak_llm_grammar *grammar; /* NULL = unconstrained; read-only, shared by the request's samples, must outlive the request */
    /* logit bias (OpenAI's logit_bias): logit_bias[i] is added to the logit of token
     * logit_bias_ids[i] before penalties and sampling (-100 all but bans a token, +100 all
     * but forces it). Copied at submit; n_logit_bias = 0: none. */
    const int32_t *logit_bias_ids;
    const float *logit_bias;
    size_t n_logit_bias;
} ak_llm_request;

AK_API ak_status ak_llm_request_default(ak_llm_request *r);

/* The engine copies the request (prompt, stops); callable from any thread. */
AK_API ak_status ak_llm_engine_create(ak_llm_model *model, const ak_llm_engine_options *o,
                                      ak_llm_engine **out);
AK_API ak_status ak_llm_engine_free(ak_llm_engine *e);
AK_API ak_status ak_llm_engine_submit(ak_llm_engine *e, const ak_llm_request *r, uint64_t *id);
/* Ends a request (its samples get an AK_FINISH_CANCELLED event); unknown ids are ignored. */
AK_API ak_status ak_llm_engine_cancel(ak_llm_engine *e, uint64_t id);
/* One scheduling step on the calling thread; *n_pending = requests still queued or running. */
AK_API ak_status ak_llm_engine_step(ak_llm_engine *e, int32_t *n_pending);
/* Runs the step loop on a background thread until ak_llm_engine_stop / free. */
AK_API ak_status ak_llm_engine_start(ak_llm_engine *e);
AK_API ak_status ak_llm_engine_stop(ak_llm_engine *e);

typedef struct ak_llm_engine_stats {
    uint64_t steps, prompt_tokens, cached_prompt_tokens, generated_tokens, preemptions;
    uint64_t spec_proposed, spec_accepted;
    int32_t running, waiting;
    int32_t kv_blocks_total, kv_blocks_used; /* used = referenced by a sequence or cached */
    uint64_t kv_tokens_live;                 /* tokens held by running sequences */
    uint64_t kv_token_slots_used;            /* block_size × blocks referenced by them */
} ak_llm_engine_stats;

AK_API ak_status ak_llm_engine_get_stats(ak_llm_engine *e, ak_llm_engine_stats *s);

/* Logits of a whole prompt in one forward pass without the engine (precision tools):
 * `logits` gets n_ids × n_vocab floats. */
AK_API ak_status ak_llm_model_logits(ak_llm_model *m, const int32_t *ids, size_t n_ids,
                                     float *logits, int32_t n_threads);

/* ---- embeddings ----
 * The embedding of one token sequence (tokenize with AK_TOK_ADD_SPECIAL: an encoder
 * expects [CLS] … [SEP]): the final hidden states (decoders: after the final norm),
 * pooled as the model says — GGUF {arch}.pooling_type, llama.cpp's enum 0 none, 1 mean,
 * 2 cls (first token), 3 last; decoders without the key pool the last token — and
 * L2-normalized. `out` gets dim floats (pooling none: n_ids × dim, each row normalized);
 * `cap` is its size in floats. Encoders (bert, nomic-bert) serve only this call: the
 * engine refuses them. */
AK_API ak_status ak_llm_model_embed(ak_llm_model *m, const int32_t *ids, size_t n_ids,
                                    float *out, size_t cap);
/* The pooling ak_llm_model_embed applies (same enum). */
AK_API ak_status ak_llm_model_embed_pooling(const ak_llm_model *m, int32_t *pooling);

/* The chat template text of the model (GGUF tokenizer.chat_template or the HF folder's
 * tokenizer_config.json); *text = NULL when it has none. Owned by the model. */
AK_API ak_status ak_llm_model_chat_template(const ak_llm_model *m, const char **text);

/* ---- chat templates ------------------------------------------------------------------ */

typedef struct ak_chat_message {
    const char *role;    /* "system", "user", "assistant" */
    const char *content;
} ak_chat_message;

/* A model's own Jinja chat template, compiled. The interpreter implements the Jinja2
 * subset chat templates use, with Hugging Face's settings (trim_blocks, lstrip_blocks,
 * loopcontrols, its tojson, raise_exception, strftime_now); docs/server.md lists it. A
 * construct, filter or test outside it is refused at compile time with
 * AK_ERR_UNSUPPORTED naming it; a syntax error is AK_ERR_INVALID_ARG with its line. */
typedef struct ak_chat_template ak_chat_template;

AK_API ak_status ak_chat_template_compile(const char *text, ak_chat_template **out);
AK_API void ak_chat_template_free(ak_chat_template *t);

typedef struct ak_chat_render_opts {
    /* JSON array of messages as OpenAI / Hugging Face write them: role, content (a string
     * or a list of parts), and optionally tool_calls, tool_call_id, name, ... */
    const char *messages_json;
    const char *tools_json;    /* JSON array of tools, or NULL (the template sees none) */
    const char *extra_json;    /* JSON object of more template variables, or NULL */
    int add_generation_prompt;
    const char *bos_token, *eos_token; /* the model's texts (NULL = "") */
    int64_t now;               /* strftime_now()'s time, seconds since the epoch; 0 = now */
} ak_chat_render_opts;

/* Renders the template. raise_exception(msg) in the template gives AK_ERR_INVALID_ARG
 * with msg; limits on output size, loop iterations, macro depth and memory give
 * AK_ERR_INVALID_ARG naming the limit. Same size protocol as ak_tokenizer_decode; the
 * text is NUL-terminated when it fits. */
AK_API ak_status ak_chat_template_render(const ak_chat_template *t, const ak_chat_render_opts *o,
                                         char *buf, size_t cap, size_t *len);

/* The built-in presets (hand-written renderers of well-known templates), used when chosen
 * by name or when a model has no template.
 * The known format a Jinja chat template implements: "llama-2", "llama-3", "chatml",
 * "mistral", "zephyr", "gemma", "phi-3"; AK_ERR_UNSUPPORTED when none matches. */
AK_API ak_status ak_chat_format_detect(const char *template_text, const char **format);
/* Renders `messages` as the prompt text of `format` (a name above), ending with the
 * assistant's turn header when add_generation_prompt. bos/eos: the model's texts (may be
 * NULL). Same size protocol as ak_tokenizer_decode; the text is NUL-terminated when it fits. */
AK_API ak_status ak_chat_render(const char *format, const ak_chat_message *messages, size_t n,
                                int add_generation_prompt, const char *bos, const char *eos,
                                char *buf, size_t cap, size_t *len);

/* ---- hooks --------------------------------------------------------------------------- */

/* Text-level callbacks around the engine (`ak serve|generate --hooks lib.so`). A NULL
 * member keeps the default. Called from the server's/CLI's threads, never the engine's. */
typedef struct ak_llm_hooks {
    /* replaces the model's tokenizer for prompts */
    ak_status (*tokenize)(void *user, const char *text, size_t len, int32_t *ids, size_t cap,
                          size_t *n_ids);
    /* rewrites the prompt text before tokenizing */
    ak_status (*pre_process)(void *user, const char *text, size_t len, char *out, size_t cap,
                             size_t *out_len);
    /* rewrites each piece of generated text before it is sent */
    ak_status (*post_process)(void *user, const char *text, size_t len, char *out, size_t cap,
                              size_t *out_len);
    void *user;
} ak_llm_hooks;

/* dlopens `path`, which exports `ak_status ak_hooks_init(ak_llm_hooks *hooks)`, and calls it. */
AK_API ak_status ak_llm_hooks_load(const char *path, ak_llm_hooks *out);

/* ---- conversion ---------------------------------------------------------------------- */

/* Hugging Face folder → GGUF file (dst ends in .gguf), or GGUF → Hugging Face folder
 * (config.json, model.safetensors, tokenizer.json). out_type: "f32", "f16", "bf16",
 * "q8_0", "q4_0", or one of llama.cpp's presets "q2_k", "q3_k_s", "q3_k_m", "q3_k_l",
 * "q4_k_s", "q4_k_m", "q5_k_s", "q5_k_m", "q6_k", "iq4_nl", "iq4_xs" with its per-tensor
 * mix (GGUF only), or NULL to keep the source's. */
AK_API ak_status ak_llm_convert(const char *src, const char *dst, const char *out_type);

#ifdef __cplusplus
}
#endif

#endif /* ACCELKIT_LLM_H */
