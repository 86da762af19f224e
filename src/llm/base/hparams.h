/* Hyper-parameters of a decoder-only transformer of the Llama family and its relatives
 * (Mistral, Qwen2/3, Gemma 2/3, Granite, ...: see docs/llm-models.md) and a read-only
 * view of one stored tensor: what the GGUF and Hugging Face readers hand to the model
 * builder (llm/model/). Every field that changes the math has a neutral default (0 or 1)
 * that gives the plain Llama decoder, so a reader sets only what its architecture has.
 * Kept in llm/base/, below the readers, the model and the engine, which all use them. */
#ifndef AK_LLM_BASE_HPARAMS_H
#define AK_LLM_BASE_HPARAMS_H

#include <stdint.h>

#include "accelkit/kernels.h"

typedef enum ak__rope_scaling {
    AK_ROPE_SCALING_NONE = 0,
    AK_ROPE_SCALING_LINEAR = 1, /* positions divided by `factor` */
    AK_ROPE_SCALING_LLAMA3 = 2, /* Llama 3.1: frequencies scaled by wavelength band */
    AK_ROPE_SCALING_LONGROPE = 3, /* Phi-3: per-frequency divisors (the short factors, the
                                   * context capped at the original length) and cos/sin
                                   * scaled by rope_attn_factor */
    AK_ROPE_SCALING_YARN = 4 /* YaRN: each frequency blends its interpolated (÷ factor) and
                              * original value by a ramp over the dimensions between
                              * beta_fast and beta_slow rotations in rope_orig_context
                              * positions; cos/sin × rope_attn_factor (1 + 0.1 ln factor) */
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

    /* ---- beyond Llama (neutral values: 1 for the scales, 0 for the rest) ---- */
    float embed_scale;    /* embeddings × this (Granite embedding_multiplier, Gemma √dim) */
    float residual_scale; /* each block's output × this before the residual add (Granite) */
    float attn_scale;     /* scores × this; 0: 1/√head_dim (Granite attention_multiplier,
                           * Gemma query_pre_attn_scalar^-½) */
    float logit_scale;    /* logits × this (Granite: 1/logits_scaling) */
    float attn_softcap;   /* scores ← c·tanh(scores/c) before the mask (Gemma 2); 0 none */
    float final_softcap;  /* logits ← c·tanh(logits/c) (Gemma 2); 0 none */
    int32_t sliding_window; /* a query sees the last `sliding_window` positions, itself
                             * included (Mistral, Gemma); 0: full causal attention */
    int32_t swa_pattern;  /* 0: every layer slides; n: layer i slides iff i % n < n − 1
                           * (Gemma 2: 2, Gemma 3: 6) */
    float rope_theta_local; /* RoPE base of the sliding layers (Gemma 3); 0: rope_theta */
    int32_t qk_norm;      /* 1: RMSNorm of each q/k head (Qwen3, Gemma 3) before RoPE;
                           * 2: of the whole q and k projections (OLMo-2) */
    int32_t no_pre_norms; /* OLMo-2: blocks read the residual itself (post-norms only) */
    /* StarCoder2: LayerNorm with bias instead of RMSNorm, a plain GELU MLP (up + bias →
     * GELU → down + bias) instead of a gated FFN, and a bias on the attention output */
    int32_t layer_norm, plain_mlp, out_bias;
    int32_t post_norms;   /* Gemma 2/3: RMSNorm of each block's output before the add */
    int32_t ffn_gelu;     /* gated FFN with GELU (tanh form) instead of SiLU (Gemma) */
    int32_t norm_plus_one; /* HF Gemma: RMSNorm weights are stored as w − 1 (GGUF holds w) */
    /* mixture of experts (Mixtral, Qwen2-MoE, Qwen3-MoE): every layer's FFN is n_experts
     * SwiGLU experts of expert_ffn_dim, a token runs the n_experts_used best of a softmax
     * router, weighted by their probabilities (renormalized to sum 1 when norm_topk);
     * Qwen2-MoE adds a shared expert of shared_ffn_dim gated by sigmoid(x·w). */
    int32_t n_experts, n_experts_used, expert_ffn_dim, norm_topk, shared_ffn_dim;
    /* Phi-3: q/k/v in one matrix, gate and up in one (gate rows first) */
    int32_t fused_qkv, fused_gate_up;
    float rope_attn_factor; /* cos/sin × this (longrope, yarn); 0: 1 */
    float rope_yarn_beta_fast, rope_yarn_beta_slow; /* yarn: the ramp's ends, in rotations */
    int32_t n_rope_factors; /* HF longrope: head_dim/2 short factors from config.json */
    float rope_factors[512];
} ak__llm_hparams;

/* Zeroed hyper-parameters with the neutral scales (1): the plain Llama decoder. */
static inline void ak__hp_init(ak__llm_hparams *hp) {
    *hp = (ak__llm_hparams){0};
    hp->embed_scale = hp->residual_scale = hp->logit_scale = 1.0f;
}

/* 1 when the model is a plain Llama/Qwen2 decoder (nothing beyond Llama set): what the
 * converters (llm/convert/) know how to write. */
static inline int ak__hp_is_plain_llama(const ak__llm_hparams *hp) {
    return hp->embed_scale == 1.0f && hp->residual_scale == 1.0f && hp->logit_scale == 1.0f &&
           hp->attn_scale == 0 && hp->attn_softcap == 0 && hp->final_softcap == 0 &&
           hp->sliding_window == 0 && hp->rope_theta_local == 0 && !hp->qk_norm &&
           !hp->post_norms && !hp->ffn_gelu && !hp->norm_plus_one && hp->n_experts == 0 &&
           !hp->no_pre_norms && !hp->fused_qkv && !hp->fused_gate_up &&
           hp->rope_scaling != AK_ROPE_SCALING_LONGROPE && !hp->layer_norm && !hp->plain_mlp &&
           !hp->out_bias;
}

/* 1 when layer `layer` uses the sliding window. */
static inline int ak__hp_layer_slides(const ak__llm_hparams *hp, int layer) {
    if (hp->sliding_window <= 0) return 0;
    return hp->swa_pattern <= 0 || layer % hp->swa_pattern < hp->swa_pattern - 1;
}

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
