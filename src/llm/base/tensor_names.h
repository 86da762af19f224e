/* The one table of a Llama-family decoder's tensors: each role's name in a GGUF file
 * (llama.cpp's names) and in a Hugging Face checkpoint, for the model loaders
 * (llm/model/) and both converters (llm/convert/). */
#ifndef AK_LLM_BASE_TENSOR_NAMES_H
#define AK_LLM_BASE_TENSOR_NAMES_H

#include <stddef.h>

/* The tensors of the model: the global ones first (up to AK_T_ROPE_FREQS), then those
 * every layer has. */
typedef enum ak__tensor_role {
    AK_T_TOK_EMBD, AK_T_OUTPUT, AK_T_OUTPUT_NORM, AK_T_ROPE_FREQS,
    AK_T_ATTN_NORM, AK_T_Q, AK_T_K, AK_T_V, AK_T_O, AK_T_BQ, AK_T_BK, AK_T_BV,
    AK_T_FFN_NORM, AK_T_GATE, AK_T_UP, AK_T_DOWN,
    /* beyond Llama: norms of each block's output (Gemma 2/3) and of each q/k head
     * (Qwen3, Gemma 3) */
    AK_T_ATTN_POST_NORM, AK_T_FFN_POST_NORM, AK_T_Q_NORM, AK_T_K_NORM,
    /* mixture of experts: the router, the experts (GGUF: one 3-D tensor each, HF: one
     * matrix per expert, named by an expert naming function), the shared expert and its
     * gate */
    AK_T_GATE_INP, AK_T_GATE_EXPS, AK_T_UP_EXPS, AK_T_DOWN_EXPS, AK_T_GATE_INP_SHEXP,
    AK_T_GATE_SHEXP, AK_T_UP_SHEXP, AK_T_DOWN_SHEXP,
    /* Phi-3's fused projections */
    AK_T_QKV, AK_T_GATE_UP,
    /* StarCoder2's LayerNorm biases (the output norm's is global) and other biases */
    AK_T_OUTPUT_NORM_B, AK_T_ATTN_NORM_B, AK_T_FFN_NORM_B, AK_T_BO, AK_T_B_UP, AK_T_B_DOWN,
    AK_T_COUNT
} ak__tensor_role;

typedef struct ak__tensor_name {
    /* a global tensor's whole name; a layer's after "blk.N." / "model.layers.N.";
     * hf "" where a checkpoint has no such tensor (rope_freqs: computed from config) */
    const char *gguf, *hf;
    int matrix;       /* a weight matrix (else a vector: norm, bias, frequencies) */
    int rows_rotated; /* q and k: GGUF interleaves each head's rows for RoPE, HF keeps
                       * them in rotate-half order; converters permute these */
} ak__tensor_name;

extern const ak__tensor_name ak__tensor_names[AK_T_COUNT];

/* The per-layer roles in the order the converters write them, the q/k/v biases last (a
 * model without them writes the first AK_T_LAYER_ROLES - 3). */
#define AK_T_LAYER_ROLES 12
extern const ak__tensor_role ak__tensor_layer_roles[AK_T_LAYER_ROLES];

/* The full name of role's tensor in layer (ignored for a global role) into buf. */
void ak__tensor_name_gguf(ak__tensor_role role, int layer, char *buf, size_t cap);
void ak__tensor_name_hf(ak__tensor_role role, int layer, char *buf, size_t cap);
/* Gemma 2/3 checkpoints: input_layernorm, post_attention_layernorm (the attention
 * output's norm), pre_feedforward_layernorm, post_feedforward_layernorm. */
void ak__tensor_name_hf_gemma(ak__tensor_role role, int layer, char *buf, size_t cap);
/* Mixture-of-experts checkpoints: Mixtral's block_sparse_moe (gate, experts.E.w1/w3/w2)
 * and Qwen-MoE's mlp (gate, experts.E.*_proj, shared_expert, shared_expert_gate). The
 * expert roles take the expert's index through `expert`. */
/* StarCoder2 checkpoints: the MLP is mlp.c_fc (up) and mlp.c_proj (down). */
void ak__tensor_name_hf_starcoder2(ak__tensor_role role, int layer, char *buf, size_t cap);
void ak__tensor_name_hf_mixtral(ak__tensor_role role, int layer, int expert, char *buf,
                                size_t cap);
/* Mixtral's names of the roles that are not per expert (its router). */
void ak__tensor_name_hf_mixtral_layer(ak__tensor_role role, int layer, char *buf, size_t cap);
void ak__tensor_name_hf_qwen_moe(ak__tensor_role role, int layer, int expert, char *buf,
                                 size_t cap);

#endif /* AK_LLM_BASE_TENSOR_NAMES_H */
