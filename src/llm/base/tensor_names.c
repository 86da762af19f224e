/* The GGUF and Hugging Face names of a Llama-family decoder's tensors (see
 * tensor_names.h). */
#include "llm/base/tensor_names.h"

#include <stdio.h>

const ak__tensor_name ak__tensor_names[AK_T_COUNT] = {
    [AK_T_TOK_EMBD] = {"token_embd.weight", "model.embed_tokens.weight", 1, 0},
    [AK_T_OUTPUT] = {"output.weight", "lm_head.weight", 1, 0},
    [AK_T_OUTPUT_NORM] = {"output_norm.weight", "model.norm.weight", 0, 0},
    [AK_T_ROPE_FREQS] = {"rope_freqs.weight", "", 0, 0},
    [AK_T_ATTN_NORM] = {"attn_norm.weight", "input_layernorm.weight", 0, 0},
    [AK_T_Q] = {"attn_q.weight", "self_attn.q_proj.weight", 1, 1},
    [AK_T_K] = {"attn_k.weight", "self_attn.k_proj.weight", 1, 1},
    [AK_T_V] = {"attn_v.weight", "self_attn.v_proj.weight", 1, 0},
    [AK_T_O] = {"attn_output.weight", "self_attn.o_proj.weight", 1, 0},
    [AK_T_BQ] = {"attn_q.bias", "self_attn.q_proj.bias", 0, 1},
    [AK_T_BK] = {"attn_k.bias", "self_attn.k_proj.bias", 0, 1},
    [AK_T_BV] = {"attn_v.bias", "self_attn.v_proj.bias", 0, 0},
    [AK_T_FFN_NORM] = {"ffn_norm.weight", "post_attention_layernorm.weight", 0, 0},
    [AK_T_GATE] = {"ffn_gate.weight", "mlp.gate_proj.weight", 1, 0},
    [AK_T_UP] = {"ffn_up.weight", "mlp.up_proj.weight", 1, 0},
    [AK_T_DOWN] = {"ffn_down.weight", "mlp.down_proj.weight", 1, 0},
    [AK_T_ATTN_POST_NORM] = {"post_attention_norm.weight", "post_attention_layernorm.weight", 0, 0},
    [AK_T_FFN_POST_NORM] = {"post_ffw_norm.weight", "post_feedforward_layernorm.weight", 0, 0},
    [AK_T_Q_NORM] = {"attn_q_norm.weight", "self_attn.q_norm.weight", 0, 0},
    [AK_T_K_NORM] = {"attn_k_norm.weight", "self_attn.k_norm.weight", 0, 0},
    /* HF names of the experts: ak__tensor_name_hf_mixtral / _qwen_moe */
    [AK_T_GATE_INP] = {"ffn_gate_inp.weight", "mlp.gate.weight", 1, 0},
    [AK_T_GATE_EXPS] = {"ffn_gate_exps.weight", "", 1, 0},
    [AK_T_UP_EXPS] = {"ffn_up_exps.weight", "", 1, 0},
    [AK_T_DOWN_EXPS] = {"ffn_down_exps.weight", "", 1, 0},
    [AK_T_GATE_INP_SHEXP] = {"ffn_gate_inp_shexp.weight", "mlp.shared_expert_gate.weight", 1, 0},
    [AK_T_GATE_SHEXP] = {"ffn_gate_shexp.weight", "mlp.shared_expert.gate_proj.weight", 1, 0},
    [AK_T_UP_SHEXP] = {"ffn_up_shexp.weight", "mlp.shared_expert.up_proj.weight", 1, 0},
    [AK_T_DOWN_SHEXP] = {"ffn_down_shexp.weight", "mlp.shared_expert.down_proj.weight", 1, 0},
    /* GGUF phi3 keeps the fused gate/up under ffn_up */
    [AK_T_QKV] = {"attn_qkv.weight", "self_attn.qkv_proj.weight", 1, 0},
    [AK_T_GATE_UP] = {"ffn_up.weight", "mlp.gate_up_proj.weight", 1, 0},
    [AK_T_OUTPUT_NORM_B] = {"output_norm.bias", "model.norm.bias", 0, 0},
    [AK_T_ATTN_NORM_B] = {"attn_norm.bias", "input_layernorm.bias", 0, 0},
    [AK_T_FFN_NORM_B] = {"ffn_norm.bias", "post_attention_layernorm.bias", 0, 0},
    [AK_T_BO] = {"attn_output.bias", "self_attn.o_proj.bias", 0, 0},
    [AK_T_B_UP] = {"ffn_up.bias", "mlp.up_proj.bias", 0, 0},
    [AK_T_B_DOWN] = {"ffn_down.bias", "mlp.down_proj.bias", 0, 0},
};

static int is_global(ak__tensor_role role) {
    return role <= AK_T_ROPE_FREQS || role == AK_T_OUTPUT_NORM_B;
}

const ak__tensor_role ak__tensor_layer_roles[AK_T_LAYER_ROLES] = {
    AK_T_ATTN_NORM, AK_T_Q,    AK_T_K,  AK_T_V,    AK_T_O,  AK_T_FFN_NORM,
    AK_T_GATE,      AK_T_UP,   AK_T_DOWN, AK_T_BQ, AK_T_BK, AK_T_BV,
};

void ak__tensor_name_gguf(ak__tensor_role role, int layer, char *buf, size_t cap) {
    if (is_global(role)) snprintf(buf, cap, "%s", ak__tensor_names[role].gguf);
    else snprintf(buf, cap, "blk.%d.%s", layer, ak__tensor_names[role].gguf);
}

void ak__tensor_name_hf(ak__tensor_role role, int layer, char *buf, size_t cap) {
    if (is_global(role)) snprintf(buf, cap, "%s", ak__tensor_names[role].hf);
    else snprintf(buf, cap, "model.layers.%d.%s", layer, ak__tensor_names[role].hf);
}

void ak__tensor_name_hf_gemma(ak__tensor_role role, int layer, char *buf, size_t cap) {
    if (role == AK_T_FFN_NORM)
        snprintf(buf, cap, "model.layers.%d.pre_feedforward_layernorm.weight", layer);
    else ak__tensor_name_hf(role, layer, buf, cap);
}

void ak__tensor_name_hf_mixtral(ak__tensor_role role, int layer, int expert, char *buf,
                                size_t cap) {
    const char *w = role == AK_T_GATE_EXPS ? "w1" : role == AK_T_UP_EXPS ? "w3" : "w2";
    if (role == AK_T_GATE_INP)
        snprintf(buf, cap, "model.layers.%d.block_sparse_moe.gate.weight", layer);
    else if (role >= AK_T_GATE_EXPS && role <= AK_T_DOWN_EXPS)
        snprintf(buf, cap, "model.layers.%d.block_sparse_moe.experts.%d.%s.weight", layer,
                 expert, w);
    else ak__tensor_name_hf(role, layer, buf, cap);
}

void ak__tensor_name_hf_qwen_moe(ak__tensor_role role, int layer, int expert, char *buf,
                                 size_t cap) {
    const char *w = role == AK_T_GATE_EXPS ? "gate" : role == AK_T_UP_EXPS ? "up" : "down";
    if (role >= AK_T_GATE_EXPS && role <= AK_T_DOWN_EXPS)
        snprintf(buf, cap, "model.layers.%d.mlp.experts.%d.%s_proj.weight", layer, expert, w);
    else ak__tensor_name_hf(role, layer, buf, cap);
}

void ak__tensor_name_hf_mixtral_layer(ak__tensor_role role, int layer, char *buf, size_t cap) {
    ak__tensor_name_hf_mixtral(role, layer, 0, buf, cap);
}

void ak__tensor_name_hf_starcoder2(ak__tensor_role role, int layer, char *buf, size_t cap) {
    const char *mlp = role == AK_T_UP     ? "c_fc.weight"
                      : role == AK_T_B_UP ? "c_fc.bias"
                      : role == AK_T_DOWN ? "c_proj.weight"
                      : role == AK_T_B_DOWN ? "c_proj.bias"
                                            : NULL;
    if (mlp) snprintf(buf, cap, "model.layers.%d.mlp.%s", layer, mlp);
    else ak__tensor_name_hf(role, layer, buf, cap);
}
