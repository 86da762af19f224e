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
                   "(LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM)", h->dir,
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

ak_status ak__hf_hparams(const ak__hf *h, ak__llm_hparams *hp) {
    AK_ARG_CHECK(h != NULL && hp != NULL, "hf or hparams is NULL");
    memset(hp, 0, sizeof *hp);
    AK_CHECK(read_arch(h, hp));
    const cJSON *act = ak__json_get(h->config, "hidden_act");
    if (act && (!cJSON_IsString(act) || strcmp(act->valuestring, "silu") != 0))
        return AK_FAIL(AK_ERR_UNSUPPORTED, "%s: hidden_act '%s' (only silu)", h->dir,
                       cJSON_IsString(act) ? act->valuestring : "?");
    AK_CHECK(read_shape(h, hp));
    AK_CHECK(read_rope_scaling(h, hp));
    AK_CHECK(read_biases(h, hp));
    hp->rope_neox = 1; /* HF q/k rows are in rotate-half order for every architecture */
    const cJSON *tie = ak__json_get(h->config, "tie_word_embeddings");
    hp->tied_output = cJSON_IsTrue(tie) || !ak__hf_has_tensor(h, ak__tensor_names[AK_T_OUTPUT].hf);
    return AK_OK;
}
