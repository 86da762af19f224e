/* Llama-family hyper-parameters from a Hugging Face config.json (transformers' names and
 * defaults), checked over the same ranges as the GGUF reader (model/gguf_hparams.c). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/check.h"
#include "llm/base/tensor_names.h"
#include "llm/hf/hf_internal.h"

/* config[key] as an int in [lo, hi]; absent (or null) → fallback, required if < 0. */
static ak_status cfg_int(const ak__hf *h, const cJSON *obj, const char *key, int64_t fallback,
                         int64_t lo, int64_t hi, int32_t *out) {
    const cJSON *v = ak__json_get(obj, key);
    double d = (double)fallback;
    if (!v && fallback < 0)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "%s/config.json lacks '%s'", h->dir, key);
    if (v) {
        if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble))
            return AK_FAIL(AK_ERR_INVALID_MODEL, "%s/config.json: '%s' is not an integer",
                           h->dir, key);
        d = v->valuedouble;
    }
    if (!(d >= (double)lo && d <= (double)hi))
        return AK_FAIL(AK_ERR_INVALID_MODEL, "%s/config.json: '%s' = %g is out of range "
                       "[%lld, %lld]", h->dir, key, d, (long long)lo, (long long)hi);
    *out = (int32_t)d;
    return AK_OK;
}

static ak_status cfg_real(const ak__hf *h, const cJSON *obj, const char *key, double fallback,
                          double lo, double hi, float *out) {
    const cJSON *v = ak__json_get(obj, key);
    double d = fallback;
    if (v) {
        if (!cJSON_IsNumber(v))
            return AK_FAIL(AK_ERR_INVALID_MODEL, "%s/config.json: '%s' is not a number", h->dir, key);
        d = v->valuedouble;
    }
    if (!(d >= lo && d <= hi))
        return AK_FAIL(AK_ERR_INVALID_MODEL, "%s/config.json: '%s' = %g is out of range [%g, %g]",
                       h->dir, key, d, lo, hi);
    *out = (float)d;
    return AK_OK;
}

static const struct {
    const char *class_name, *model_type, *arch;
} k_archs[] = {
    {"LlamaForCausalLM", "llama", "llama"},
    {"MistralForCausalLM", "mistral", "mistral"},
    {"Qwen2ForCausalLM", "qwen2", "qwen2"},
    {"Qwen3ForCausalLM", "qwen3", "qwen3"},
    {"GraniteForCausalLM", "granite", "granite"},
    {"Gemma2ForCausalLM", "gemma2", "gemma2"},
    {"Gemma3ForCausalLM", "gemma3_text", "gemma3"},
    {"MixtralForCausalLM", "mixtral", "mixtral"},
    {"Qwen2MoeForCausalLM", "qwen2_moe", "qwen2moe"},
    {"Qwen3MoeForCausalLM", "qwen3_moe", "qwen3moe"},
    {"Olmo2ForCausalLM", "olmo2", "olmo2"},
    {"Phi3ForCausalLM", "phi3", "phi3"},
    {"Starcoder2ForCausalLM", "starcoder2", "starcoder2"},
};

static ak_status read_arch(const ak__hf *h, ak__llm_hparams *hp) {
    const cJSON *archs = ak__json_get(h->config, "architectures");
    const cJSON *first = cJSON_IsArray(archs) ? archs->child : NULL;
    const cJSON *mt = ak__json_get(h->config, "model_type");
    for (size_t i = 0; i < sizeof k_archs / sizeof k_archs[0]; i++) {
        int hit = cJSON_IsString(first) ? strcmp(first->valuestring, k_archs[i].class_name) == 0
                                        : cJSON_IsString(mt) &&
                                              strcmp(mt->valuestring, k_archs[i].model_type) == 0;
        if (hit) {
            snprintf(hp->arch, sizeof hp->arch, "%s", k_archs[i].arch);
            return AK_OK;
        }
    }
    return AK_FAIL(AK_ERR_UNSUPPORTED, "%s: architecture '%s' is not supported "
                   "(LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, "
                   "GraniteForCausalLM, Gemma2ForCausalLM, Gemma3ForCausalLM, MixtralForCausalLM, "
                   "Qwen2MoeForCausalLM, Qwen3MoeForCausalLM, Olmo2ForCausalLM, Phi3ForCausalLM, Starcoder2ForCausalLM)", h->dir,
                   cJSON_IsString(first) ? first->valuestring
                   : cJSON_IsString(mt)  ? mt->valuestring
                                         : "(none in config.json)");
}

static ak_status read_shape(const ak__hf *h, ak__llm_hparams *hp) {
    const cJSON *c = h->config;
    AK_CHECK(cfg_int(h, c, "hidden_size", -1, 1, 1 << 16, &hp->dim));
    AK_CHECK(cfg_int(h, c, "num_hidden_layers", -1, 1, 1024, &hp->n_layers));
    AK_CHECK(cfg_int(h, c, "intermediate_size", -1, 1, 1 << 20, &hp->ffn_dim));
    AK_CHECK(cfg_int(h, c, "num_attention_heads", -1, 1, 1024, &hp->n_heads));
    AK_CHECK(cfg_int(h, c, "num_key_value_heads", hp->n_heads, 1, hp->n_heads, &hp->n_kv_heads));
    if (hp->n_heads % hp->n_kv_heads != 0)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "%s: %d heads are not a multiple of %d KV heads",
                       h->dir, hp->n_heads, hp->n_kv_heads);
    if (!ak__json_get(c, "head_dim") && hp->dim % hp->n_heads != 0)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "%s: hidden_size %d is not a multiple of %d heads",
                       h->dir, hp->dim, hp->n_heads);
    AK_CHECK(cfg_int(h, c, "head_dim", hp->dim / hp->n_heads, 2, 1024, &hp->head_dim));
    if (hp->head_dim % 2 != 0)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "%s: head_dim %d is odd", h->dir, hp->head_dim);
    AK_CHECK(cfg_int(h, c, "max_position_embeddings", 2048, 1, 1 << 24, &hp->max_context));
    AK_CHECK(cfg_int(h, c, "vocab_size", -1, 1, 1 << 24, &hp->n_vocab));
    AK_CHECK(cfg_real(h, c, "rope_theta", 10000.0, 1.0, 1e12, &hp->rope_theta));
    return cfg_real(h, c, "rms_norm_eps", 1e-6, 0.0, 1.0, &hp->norm_eps);
}

/* Phi-3's longrope ("su"): the short factors divide the frequencies, and cos/sin are
 * scaled by attention_factor (default √(1 + ln(s)/ln(orig)), s = max/orig, as
 * transformers computes it). transformers switches to the long factors once a sequence
 * outgrows original_max_position_embeddings; the engine's context stops there instead. */
static ak_status read_longrope(const ak__hf *h, const cJSON *rs, ak__llm_hparams *hp) {
    const cJSON *sf = ak__json_get(rs, "short_factor");
    int half = hp->head_dim / 2;
    if (!cJSON_IsArray(sf) || cJSON_GetArraySize(sf) != half || half > 512)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "%s/config.json: longrope short_factor must hold "
                       "%d numbers", h->dir, half);
    int i = 0;
    for (const cJSON *v = sf->child; v; v = v->next, ++i) {
        if (!cJSON_IsNumber(v) || !(v->valuedouble > 0))
            return AK_FAIL(AK_ERR_INVALID_MODEL, "%s/config.json: longrope short_factor[%d] "
                           "is not a positive number", h->dir, i);
        hp->rope_factors[i] = (float)v->valuedouble;
    }
    hp->n_rope_factors = half;
    hp->rope_scaling = AK_ROPE_SCALING_LONGROPE;
    int32_t orig;
    const cJSON *c = ak__json_get(rs, "original_max_position_embeddings") ? rs : h->config;
    AK_CHECK(cfg_int(h, c, "original_max_position_embeddings", hp->max_context, 1, 1 << 24,
                     &orig));
    double s = (double)hp->max_context / orig;
    double af = s <= 1.0 ? 1.0 : sqrt(1.0 + log(s) / log((double)orig));
    float given = 0;
    const cJSON *in_rs = ak__json_get(rs, "attention_factor");
    if (in_rs && !cJSON_IsNull(in_rs))
        AK_CHECK(cfg_real(h, rs, "attention_factor", 1.0, 1e-3, 1e3, &given));
    hp->rope_attn_factor = given > 0 ? given : (float)af;
    if (orig < hp->max_context) hp->max_context = orig;
    return AK_OK;
}

/* rope_scaling: null, {"type"|"rope_type": "linear", "factor"} or Llama 3.1's
 * {"rope_type": "llama3", factor, low_freq_factor, high_freq_factor,
 *  original_max_position_embeddings}. */
static ak_status read_rope_scaling(const ak__hf *h, ak__llm_hparams *hp) {
    hp->rope_scaling = AK_ROPE_SCALING_NONE;
    hp->rope_factor = 1.0f;
    const cJSON *rs = ak__json_get(h->config, "rope_scaling");
    if (!rs) return AK_OK;
    const cJSON *type = ak__json_get(rs, "rope_type");
    if (!type) type = ak__json_get(rs, "type");
    if (!cJSON_IsObject(rs) || !cJSON_IsString(type))
        return AK_FAIL(AK_ERR_INVALID_MODEL, "%s/config.json: rope_scaling has no type", h->dir);
    const char *t = type->valuestring;
    if (strcmp(t, "default") == 0) return AK_OK;
    if (strcmp(t, "longrope") == 0 || strcmp(t, "su") == 0) return read_longrope(h, rs, hp);
    if (strcmp(t, "linear") == 0) {
        hp->rope_scaling = AK_ROPE_SCALING_LINEAR;
        return cfg_real(h, rs, "factor", -1.0, 1e-3, 1e6, &hp->rope_factor);
    }
    if (strcmp(t, "llama3") != 0)
        return AK_FAIL(AK_ERR_UNSUPPORTED, "%s: rope_scaling type '%s' (supported: linear, "
                       "llama3)", h->dir, t);
    hp->rope_scaling = AK_ROPE_SCALING_LLAMA3;
    AK_CHECK(cfg_real(h, rs, "factor", -1.0, 1.0, 1e6, &hp->rope_factor));
    AK_CHECK(cfg_real(h, rs, "low_freq_factor", 1.0, 1e-3, 1e6, &hp->rope_low_freq_factor));
    AK_CHECK(cfg_real(h, rs, "high_freq_factor", 4.0, 1e-3, 1e6, &hp->rope_high_freq_factor));
    AK_CHECK(cfg_int(h, rs, "original_max_position_embeddings", 8192, 1, 1 << 24,
                     &hp->rope_orig_context));
    if (!(hp->rope_high_freq_factor > hp->rope_low_freq_factor))
        return AK_FAIL(AK_ERR_INVALID_MODEL, "%s: rope_scaling high_freq_factor %g must exceed "
                       "low_freq_factor %g", h->dir, hp->rope_high_freq_factor,
                       hp->rope_low_freq_factor);
    return AK_OK;
}

/* Biases the Llama-family builder does not have are refused rather than ignored. */
static ak_status read_biases(const ak__hf *h, ak__llm_hparams *hp) {
    static const char *const unsupported[] = {
        "model.layers.0.self_attn.o_proj.bias", "model.layers.0.mlp.gate_proj.bias",
        "model.layers.0.mlp.up_proj.bias", "model.layers.0.mlp.down_proj.bias"};
    for (size_t i = 0; i < sizeof unsupported / sizeof unsupported[0]; i++)
        if (ak__hf_has_tensor(h, unsupported[i]))
            return AK_FAIL(AK_ERR_UNSUPPORTED, "%s has '%s' (only q/k/v biases are supported)",
                           h->dir, unsupported[i]);
    char bq[128];
    ak__tensor_name_hf(AK_T_BQ, 0, bq, sizeof bq);
    hp->qkv_bias = ak__hf_has_tensor(h, bq);
    return AK_OK;
}

static int is_arch(const ak__llm_hparams *hp, const char *name) {
    return strcmp(hp->arch, name) == 0;
}

static int is_gemma(const ak__llm_hparams *hp) {
    return is_arch(hp, "gemma2") || is_arch(hp, "gemma3");
}

/* The FFN's activation: SiLU, or GELU's tanh form for Gemma (hidden_activation, which
 * Gemma configs carry beside hidden_act). */
static ak_status read_activation(const ak__hf *h, const ak__llm_hparams *hp) {
    const char *key = is_gemma(hp) && ak__json_get(h->config, "hidden_activation")
                          ? "hidden_activation" : "hidden_act";
    const cJSON *act = ak__json_get(h->config, key);
    const char *want = is_gemma(hp) || is_arch(hp, "starcoder2") ? "gelu_pytorch_tanh" : "silu";
    if (act && (!cJSON_IsString(act) || strcmp(act->valuestring, want) != 0))
        return AK_FAIL(AK_ERR_UNSUPPORTED, "%s: %s '%s' (%s implements %s)", h->dir, key,
                       cJSON_IsString(act) ? act->valuestring : "?", hp->arch, want);
    return AK_OK;
}

/* A config field that changes the math on an architecture that does not implement it
 * is refused (null / false / absent are fine). */
static ak_status refuse_field(const ak__hf *h, const ak__llm_hparams *hp, const char *key) {
    const cJSON *v = ak__json_get(h->config, key);
    if (!v || cJSON_IsNull(v) || cJSON_IsFalse(v)) return AK_OK;
    return AK_FAIL(AK_ERR_UNSUPPORTED, "%s/config.json: '%s' is not implemented for %s", h->dir,
                   key, hp->arch);
}

static ak_status read_granite(const ak__hf *h, ak__llm_hparams *hp) {
    const cJSON *c = h->config;
    float logits_scaling;
    AK_CHECK(cfg_real(h, c, "embedding_multiplier", 1.0, 1e-6, 1e6, &hp->embed_scale));
    AK_CHECK(cfg_real(h, c, "residual_multiplier", 1.0, 1e-6, 1e6, &hp->residual_scale));
    AK_CHECK(cfg_real(h, c, "attention_multiplier", 1.0, 1e-6, 1e6, &hp->attn_scale));
    AK_CHECK(cfg_real(h, c, "logits_scaling", 1.0, 1e-6, 1e6, &logits_scaling));
    hp->logit_scale = 1.0f / logits_scaling;
    return AK_OK;
}

/* An optional positive number: null or absent → 0. */
static ak_status cfg_optional(const ak__hf *h, const char *key, float *out) {
    const cJSON *v = ak__json_get(h->config, key);
    *out = 0;
    if (!v || cJSON_IsNull(v)) return AK_OK;
    return cfg_real(h, h->config, key, 0, 1e-6, 1e6, out);
}

static ak_status read_gemma(const ak__hf *h, ak__llm_hparams *hp) {
    const cJSON *c = h->config;
    hp->post_norms = 1;
    hp->ffn_gelu = 1;
    hp->norm_plus_one = 1;
    hp->embed_scale = sqrtf((float)hp->dim);
    float qpas;
    /* transformers' default for both Gemma configs */
    AK_CHECK(cfg_real(h, c, "query_pre_attn_scalar", 256, 1e-3, 1e6, &qpas));
    hp->attn_scale = 1.0f / sqrtf(qpas);
    AK_CHECK(cfg_optional(h, "attn_logit_softcapping", &hp->attn_softcap));
    AK_CHECK(cfg_optional(h, "final_logit_softcapping", &hp->final_softcap));
    AK_CHECK(cfg_int(h, c, "sliding_window", 4096, 1, 1 << 24, &hp->sliding_window));
    if (is_arch(hp, "gemma2")) {
        hp->swa_pattern = 2;
        return AK_OK;
    }
    if (ak__json_get(c, "layer_types"))
        return AK_FAIL(AK_ERR_UNSUPPORTED, "%s/config.json: 'layer_types' (an explicit "
                       "per-layer list) is not implemented; sliding_window_pattern is", h->dir);
    hp->qk_norm = 1;
    AK_CHECK(cfg_int(h, c, "sliding_window_pattern", 6, 1, 1 << 20, &hp->swa_pattern));
    return cfg_real(h, c, "rope_local_base_freq", 10000.0, 1.0, 1e12, &hp->rope_theta_local);
}

/* Mixtral: num_local_experts experts of intermediate_size, always renormalized;
 * Qwen-MoE: num_experts of moe_intermediate_size, norm_topk_prob, Qwen2-MoE's shared
 * expert; every layer sparse (other decoder_sparse_step / mlp_only_layers refused). */
static ak_status read_moe(const ak__hf *h, ak__llm_hparams *hp) {
    const cJSON *c = h->config;
    if (is_arch(hp, "mixtral")) {
        AK_CHECK(cfg_int(h, c, "num_local_experts", -1, 1, 4096, &hp->n_experts));
        hp->expert_ffn_dim = hp->ffn_dim;
        hp->norm_topk = 1;
    } else {
        AK_CHECK(cfg_int(h, c, "num_experts", -1, 1, 4096, &hp->n_experts));
        AK_CHECK(cfg_int(h, c, "moe_intermediate_size", -1, 1, 1 << 20, &hp->expert_ffn_dim));
        const cJSON *norm = ak__json_get(c, "norm_topk_prob");
        hp->norm_topk = cJSON_IsTrue(norm);
        int32_t step;
        AK_CHECK(cfg_int(h, c, "decoder_sparse_step", 1, 1, 1 << 20, &step));
        const cJSON *dense = ak__json_get(c, "mlp_only_layers");
        if (step != 1 || (cJSON_IsArray(dense) && cJSON_GetArraySize(dense) > 0))
            return AK_FAIL(AK_ERR_UNSUPPORTED, "%s/config.json: dense layers among the experts "
                           "(decoder_sparse_step, mlp_only_layers) are not implemented", h->dir);
    }
    AK_CHECK(cfg_int(h, c, "num_experts_per_tok", -1, 1, hp->n_experts, &hp->n_experts_used));
    if (is_arch(hp, "qwen2moe"))
        AK_CHECK(cfg_int(h, c, "shared_expert_intermediate_size", -1, 1, 1 << 20,
                         &hp->shared_ffn_dim));
    return AK_OK;
}

static ak_status read_sliding(const ak__hf *h, ak__llm_hparams *hp) {
    if (is_arch(hp, "mistral") || is_arch(hp, "mixtral") || is_arch(hp, "phi3") ||
        is_arch(hp, "starcoder2")) {
        const cJSON *v = ak__json_get(h->config, "sliding_window");
        if (!v || cJSON_IsNull(v)) return AK_OK;
        return cfg_int(h, h->config, "sliding_window", 0, 1, 1 << 24, &hp->sliding_window);
    }
    /* Qwen2/3 carry sliding_window with use_sliding_window false */
    if (strncmp(hp->arch, "qwen", 4) == 0) return refuse_field(h, hp, "use_sliding_window");
    return refuse_field(h, hp, "sliding_window");
}

/* The fields of other architectures that change the math, refused where not read. */
static ak_status refuse_foreign_fields(const ak__hf *h, const ak__llm_hparams *hp) {
    static const char *const gemma[] = {"attn_logit_softcapping", "final_logit_softcapping",
                                        "query_pre_attn_scalar", "rope_local_base_freq"};
    static const char *const granite[] = {"embedding_multiplier", "residual_multiplier",
                                          "attention_multiplier", "logits_scaling"};
    if (!is_gemma(hp))
        for (size_t i = 0; i < sizeof gemma / sizeof *gemma; ++i)
            AK_CHECK(refuse_field(h, hp, gemma[i]));
    if (!is_arch(hp, "granite"))
        for (size_t i = 0; i < sizeof granite / sizeof *granite; ++i)
            AK_CHECK(refuse_field(h, hp, granite[i]));
    return AK_OK;
}

ak_status ak__hf_hparams(const ak__hf *h, ak__llm_hparams *hp) {
    AK_ARG_CHECK(h != NULL && hp != NULL, "hf or hparams is NULL");
    ak__hp_init(hp);
    AK_CHECK(read_arch(h, hp));
    AK_CHECK(read_activation(h, hp));
    AK_CHECK(read_shape(h, hp));
    AK_CHECK(read_rope_scaling(h, hp));
    if (is_arch(hp, "starcoder2")) { /* LayerNorm, plain GELU MLP, biases everywhere */
        hp->layer_norm = hp->plain_mlp = hp->out_bias = 1;
        AK_CHECK(cfg_real(h, h->config, "norm_epsilon", 1e-5, 0.0, 1.0, &hp->norm_eps));
        const cJSON *ub = ak__json_get(h->config, "use_bias");
        if (ub && !cJSON_IsTrue(ub))
            return AK_FAIL(AK_ERR_UNSUPPORTED, "%s/config.json: starcoder2 without biases "
                           "(use_bias false) is not implemented", h->dir);
        char bq[128];
        ak__tensor_name_hf(AK_T_BQ, 0, bq, sizeof bq);
        hp->qkv_bias = ak__hf_has_tensor(h, bq);
    } else {
        AK_CHECK(read_biases(h, hp));
    }
    AK_CHECK(refuse_foreign_fields(h, hp));
    if (is_arch(hp, "granite")) AK_CHECK(read_granite(h, hp));
    if (is_arch(hp, "qwen3") || is_arch(hp, "qwen3moe")) hp->qk_norm = 1;
    if (is_arch(hp, "phi3")) {
        hp->fused_qkv = hp->fused_gate_up = 1;
        float partial;
        AK_CHECK(cfg_real(h, h->config, "partial_rotary_factor", 1.0, 0.0, 1.0, &partial));
        if (partial != 1.0f)
            return AK_FAIL(AK_ERR_UNSUPPORTED, "%s/config.json: partial_rotary_factor %g is not "
                           "implemented", h->dir, partial);
    }
    if (is_arch(hp, "olmo2")) { /* post-norms only, q/k norms over the whole projections */
        hp->qk_norm = 2;
        hp->post_norms = 1;
        hp->no_pre_norms = 1;
    }
    if (is_arch(hp, "mixtral") || strstr(hp->arch, "moe")) AK_CHECK(read_moe(h, hp));
    if (is_gemma(hp)) AK_CHECK(read_gemma(h, hp));
    else AK_CHECK(read_sliding(h, hp));
    hp->rope_neox = 1; /* HF q/k rows are in rotate-half order for every architecture */
    const cJSON *tie = ak__json_get(h->config, "tie_word_embeddings");
    hp->tied_output = cJSON_IsTrue(tie) || !ak__hf_has_tensor(h, ak__tensor_names[AK_T_OUTPUT].hf);
    return AK_OK;
}
