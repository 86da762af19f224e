/* Readers of model files into hyper-parameters and tensor views: GGUF here
 * (model/gguf_hparams.c); Hugging Face folders in llm/hf/. */
#ifndef AK_LLM_MODEL_FILES_H
#define AK_LLM_MODEL_FILES_H

#include "accelkit/llm.h"
#include "llm/base/hparams.h"

/* The Llama-family hyper-parameters of a GGUF file ({arch}.* keys, llama.cpp's names);
 * AK_ERR_INVALID_MODEL naming the key when one is missing or out of range. */
ak_status ak__gguf_hparams(const ak_gguf *g, ak__llm_hparams *hp);
/* Reads the key "{arch}.{suffix}" as an integer (or a real) in [lo, hi]; when the file lacks
 * it, `fallback` is used, and a negative fallback makes it required. */
ak_status ak__gguf_arch_int(const ak_gguf *g, const char *arch, const char *suffix,
                            int64_t fallback, int64_t lo, int64_t hi, int32_t *out);
ak_status ak__gguf_arch_real(const ak_gguf *g, const char *arch, const char *suffix,
                             double fallback, double lo, double hi, float *out);
/* The tensor `name` as a view; AK_ERR_INVALID_ARG when absent, AK_ERR_UNSUPPORTED for a
 * storage type other than f32/f16/bf16/q8_0/q4_0 and the super-block types (q2_K … q6_K,
 * q8_K, iq4_nl, iq4_xs). */
ak_status ak__gguf_tensor_view(const ak_gguf *g, const char *name, ak__tensor_view *out);

#endif /* AK_LLM_MODEL_FILES_H */
