/* Hugging Face model folders: config.json, the weights in safetensors files (one
 * model.safetensors, or the shards named by model.safetensors.index.json), tokenizer.json
 * with tokenizer_config.json. The model builder and the converter read them through this.
 *
 * Supported: LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM (config "architectures"
 * or "model_type"). Every shard header is validated in full when the folder is opened. */
#ifndef AK_LLM_HF_H
#define AK_LLM_HF_H

#include <stddef.h>
#include <stdint.h>

#include "accelkit/llm.h"
#include "llm/base/hparams.h"

typedef struct ak__hf ak__hf;

/* Parses config.json and maps and validates every safetensors shard;
 * AK_ERR_INVALID_MODEL with a precise message when a file is malformed, AK_ERR_IO when
 * one is missing or unreadable. */
ak_status ak__hf_open(const char *dir, ak__hf **out);
void ak__hf_close(ak__hf *h);

/* The hyper-parameters of config.json, range-checked like ak__gguf_hparams. HF weights
 * rotate halves, so rope_neox = 1 for every architecture. arch: "llama", "mistral",
 * "qwen2". */
ak_status ak__hf_hparams(const ak__hf *h, ak__llm_hparams *hp);

/* A tensor by its Hugging Face name (model.embed_tokens.weight, model.layers.N.*,
 * model.norm.weight, lm_head.weight). F32/F16/BF16 only (AK_ERR_UNSUPPORTED otherwise);
 * dims innermost first (a [out, in] weight has dims {in, out}). AK_ERR_INVALID_ARG when
 * absent. The data lives in the mapping until ak__hf_close. */
ak_status ak__hf_tensor(const ak__hf *h, const char *name, ak__tensor_view *out);
/* Whether the folder has tensor `name` (any dtype). */
int ak__hf_has_tensor(const ak__hf *h, const char *name);
/* Every tensor name, for listing what a converter leaves out; i < count. */
size_t ak__hf_tensor_count(const ak__hf *h);
const char *ak__hf_tensor_name(const ak__hf *h, size_t i);

/* The tokenizer of tokenizer.json (see hf_tokenizer.c), padded to config vocab_size.
 * The caller frees it with ak_tokenizer_free. */
ak_status ak__hf_tokenizer(const ak__hf *h, ak_tokenizer **out);
/* The same from a folder that holds only tokenizer.json (+ tokenizer_config.json,
 * config.json, both optional); vocab_size > the tokenizer's pads it with unused tokens. */
ak_status ak__hf_tokenizer_dir(const char *dir, int32_t vocab_size, ak_tokenizer **out);
/* Writes tokenizer.json and tokenizer_config.json for `t` into `dir` (GGUF → HF):
 * byte-level BPE as such; SPM as BPE with byte_fallback and merges derived from the
 * scores. chat_template may be NULL. */
ak_status ak__hf_write_tokenizer(const ak_tokenizer *t, const char *chat_template,
                                 const char *dir);

/* A tokenizer.json Unigram pipeline in the terms of a GGUF `t5` vocabulary
 * (hf_unigram_form.c): what ak__hf_unigram_form reads from a folder's tokenizer.json,
 * refusing by name a pipeline that has no such form, and what the writer of a `t5`
 * vocabulary's tokenizer.json is given. */
typedef struct ak__ugm_form {
    uint8_t *charsmap;    /* precompiled_charsmap bytes (owned by the reader), NULL: none */
    size_t charsmap_len;
    int add_space_prefix; /* Metaspace prepend_scheme always */
    int remove_extra_ws;  /* Replace " {2,}" with " " */
} ak__ugm_form;
ak_status ak__hf_unigram_form(const char *dir, ak__ugm_form *out);
void ak__ugm_form_free(ak__ugm_form *f);
/* As ak__hf_write_tokenizer, for a Unigram (`t5`) vocabulary with its pipeline. */
ak_status ak__hf_write_unigram_tokenizer(const ak_tokenizer *t, const ak__ugm_form *form,
                                         const char *chat_template, const char *dir);

/* tokenizer_config.json's chat_template (or chat_template.jinja), NULL when none. Owned
 * by `h`. */
ak_status ak__hf_chat_template(const ak__hf *h, const char **text);

/* The folder path (owned by `h`). */
const char *ak__hf_dir(const ak__hf *h);

/* ---- helpers shared by the hf/ files ------------------------------------------------- */

/* Reads `dir`/`name` whole into a NUL-terminated buffer; AK_ERR_IO when missing
 * (*missing = 1 then, if given). */
ak_status ak__hf_read_file(const char *dir, const char *name, char **text, size_t *len,
                           int *missing);
/* Writes `len` bytes to `dir`/`name` (via a temporary file renamed into place). */
ak_status ak__hf_write_file(const char *dir, const char *name, const char *text, size_t len);
/* Joins dir and name into a new string. */
ak_status ak__hf_path(const char *dir, const char *name, char **out);

#endif /* AK_LLM_HF_H */
