/* Hyper-parameters of a Llama-family decoder and a read-only view of one stored tensor:
 * what the GGUF and Hugging Face readers hand to the model builder (llm/model/). Kept in
 * llm/base/, below the readers, the model and the engine, which all use them. */
#ifndef AK_LLM_BASE_HPARAMS_H
#define AK_LLM_BASE_HPARAMS_H

#include <stdint.h>

#include "accelkit/kernels.h"

typedef enum ak__rope_scaling {
    AK_ROPE_SCALING_NONE = 0,
    AK_ROPE_SCALING_LINEAR = 1, /* positions divided by `factor` */
    AK_ROPE_SCALING_LLAMA3 = 2  /* Llama 3.1: frequencies scaled by wavelength band */
} ak__rope_scaling;

typedef struct ak__llm_hparams {
    char arch[32];       /* "llama", "qwen2", "mistral" ... */
    int32_t n_vocab, dim, n_layers, n_heads, n_kv_heads, head_dim, ffn_dim, max_context;
    float rope_theta, norm_eps;
    /* 0: rotate adjacent pairs (x[2i], x[2i+1]) — GGUF `llama`, whose q/k rows were
     * permuted by the converter; 1: rotate halves (x[i], x[i + head_dim/2]) — Hugging
     * Face checkpoints and GGUF `qwen2`. */
    int32_t rope_neox;
    ak__rope_scaling rope_scaling;
    float rope_factor, rope_low_freq_factor, rope_high_freq_factor;
    int32_t rope_orig_context;
    int32_t tied_output; /* no separate output matrix: the token embedding is reused */
    int32_t qkv_bias;    /* Qwen2: q/k/v projections carry a bias */
} ak__llm_hparams;

/* One stored tensor. dims[0] is the innermost (contiguous) dimension, as in GGUF: a
 * PyTorch [out, in] weight has dims {in, out}. */
typedef struct ak__tensor_view {
    ak_wtype type;
    uint32_t n_dims;
    uint64_t dims[4];
    const void *data;
    uint64_t bytes;
} ak__tensor_view;

#endif /* AK_LLM_BASE_HPARAMS_H */
