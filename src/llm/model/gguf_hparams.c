/* Llama-family hyper-parameters and tensor views from a GGUF file, with llama.cpp's key
 * and tensor names and its per-architecture rules (see docs/llm-models.md). Every value
 * is range-checked: a file that would make the model read out of bounds is refused here,
 * not discovered in a kernel; every `{arch}.*` key must be one this reader uses or one
 * known not to change the math, so a feature the engine lacks is refused, never run
 * approximately. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/check.h"
#include "llm/base/tensor_names.h"
#include "llm/model/model_files.h"

/* Writes "{arch}.{suffix}" into key (cap bytes). */
static ak_status arch_key(const char *arch, const char *suffix, char *key, size_t cap) {
    int n = snprintf(key, cap, "%s.%s", arch, suffix);
    if (n < 0 || (size_t)n >= cap) return AK_FAIL(AK_ERR_INVALID_MODEL, "GGUF key too long");
    return AK_OK;
}

ak_status ak__gguf_arch_int(const ak_gguf *g, const char *arch, const char *suffix,
                            int64_t fallback, int64_t lo, int64_t hi, int32_t *out) {
    char key[96];
    AK_CHECK(arch_key(arch, suffix, key, sizeof key));
    ak_gguf_type t;
    AK_CHECK(ak_gguf_key_type(g, key, &t));
    int64_t v = fallback;
    if (t == AK_GGUF_NONE) {
        if (fallback < 0) return AK_FAIL(AK_ERR_INVALID_MODEL, "GGUF lacks the key '%s'", key);
    } else if (ak_gguf_get_int(g, key, &v) != AK_OK) {
        return AK_FAIL(AK_ERR_INVALID_MODEL, "GGUF key '%s' is not an integer", key);
    }
    if (v < lo || v > hi)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "GGUF key '%s' = %lld is out of range [%lld, %lld]",
                       key, (long long)v, (long long)lo, (long long)hi);
    *out = (int32_t)v;
    return AK_OK;
}

ak_status ak__gguf_arch_real(const ak_gguf *g, const char *arch, const char *suffix,
                             double fallback, double lo, double hi, float *out) {
    char key[96];
    AK_CHECK(arch_key(arch, suffix, key, sizeof key));
    ak_gguf_type t;
    AK_CHECK(ak_gguf_key_type(g, key, &t));
    double v = fallback;
    if (t != AK_GGUF_NONE && ak_gguf_get_float(g, key, &v) != AK_OK)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "GGUF key '%s' is not a float", key);
    if (!(v >= lo && v <= hi))
        return AK_FAIL(AK_ERR_INVALID_MODEL, "GGUF key '%s' = %g is out of range [%g, %g]", key,
                       v, lo, hi);
    *out = (float)v;
    return AK_OK;
}

static ak_status get_dim(const ak_gguf *g, const ak__llm_hparams *hp, const char *suffix,
                         int64_t fallback, int64_t lo, int64_t hi, int32_t *out) {
    return ak__gguf_arch_int(g, hp->arch, suffix, fallback, lo, hi, out);
}

static ak_status get_real(const ak_gguf *g, const ak__llm_hparams *hp, const char *suffix,
                          double fallback, double lo, double hi, float *out) {
    return ak__gguf_arch_real(g, hp->arch, suffix, fallback, lo, hi, out);
}

/* The architectures this reader builds, with the RoPE layout llama.cpp gives them
 * (NORM: q/k rows permuted by the converter, adjacent pairs; NEOX: halves). */
static const struct {
    const char *name;
    int neox;
} k_archs[] = {
    {"llama", 0}, {"mistral", 0}, {"granite", 0}, {"qwen2", 1}, {"qwen3", 1},
    {"gemma2", 1}, {"gemma3", 1}, {"qwen2moe", 1}, {"qwen3moe", 1},
    {"olmo2", 1}, {"phi3", 1}, {"starcoder2", 1},
};

static ak_status read_arch(const ak_gguf *g, ak__llm_hparams *hp) {
    const char *s;
    size_t len;
    if (ak_gguf_get_string(g, "general.architecture", &s, &len) != AK_OK)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "GGUF lacks general.architecture");
    if (len == 0 || len >= sizeof hp->arch)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "GGUF general.architecture has a bad length");
    memcpy(hp->arch, s, len);
    hp->arch[len] = '\0';
    for (size_t i = 0; i < sizeof k_archs / sizeof k_archs[0]; ++i)
        if (strcmp(hp->arch, k_archs[i].name) == 0) {
            hp->rope_neox = k_archs[i].neox;
            return AK_OK;
        }
    return AK_FAIL(AK_ERR_UNSUPPORTED, "GGUF architecture '%s' is not supported (llama, "
                   "mistral, granite, qwen2, qwen3, gemma2, gemma3, qwen2moe, qwen3moe, olmo2, phi3, starcoder2)", hp->arch);
}

/* YaRN as llama.cpp runs it: the factor and the original context from the file, the ramp
 * between 32 and 1 rotations (its defaults), cos/sin × (1 + 0.1 ln factor). An attention
 * factor of the file's own (other than 1) is refused: how llama.cpp combines it with that
 * scale has changed between its releases. */
static ak_status read_yarn(const ak_gguf *g, ak__llm_hparams *hp) {
    hp->rope_scaling = AK_ROPE_SCALING_YARN;
    AK_CHECK(get_real(g, hp, "rope.scaling.factor", -1.0, 1.0, 1e6, &hp->rope_factor));
    AK_CHECK(get_dim(g, hp, "rope.scaling.original_context_length", -1, 1, 1 << 24,
                     &hp->rope_orig_context));
    float attn = 1.0f;
    AK_CHECK(get_real(g, hp, "rope.scaling.attn_factor", 1.0, 1e-3, 1e3, &attn));
    if (attn != 1.0f)
        return AK_FAIL(AK_ERR_UNSUPPORTED, "GGUF %s.rope.scaling.attn_factor %g with yarn (only 1)",
                       hp->arch, attn);
    hp->rope_attn_factor = 1.0f + 0.1f * logf(hp->rope_factor);
    hp->rope_yarn_beta_fast = 32.0f, hp->rope_yarn_beta_slow = 1.0f;
    return AK_OK;
}

static ak_status read_rope_scaling(const ak_gguf *g, ak__llm_hparams *hp) {
    char key[96];
    AK_CHECK(arch_key(hp->arch, "rope.scaling.type", key, sizeof key));
    hp->rope_scaling = AK_ROPE_SCALING_NONE;
    hp->rope_factor = 1.0f;
    const char *s;
    size_t len;
    if (ak_gguf_get_string(g, key, &s, &len) != AK_OK) return AK_OK;
    if (len == 4 && memcmp(s, "none", 4) == 0) return AK_OK;
    if (len == 6 && memcmp(s, "linear", 6) == 0) {
        hp->rope_scaling = AK_ROPE_SCALING_LINEAR;
        return get_real(g, hp, "rope.scaling.factor", 1.0, 1e-3, 1e6, &hp->rope_factor);
    }
    if (len == 4 && memcmp(s, "yarn", 4) == 0) return read_yarn(g, hp);
    return AK_FAIL(AK_ERR_UNSUPPORTED, "GGUF %s '%.*s' (supported: none, linear, yarn; llama3 "
                   "comes as a rope_freqs tensor)", key, (int)len, s);
}

static ak_status read_vocab_size(const ak_gguf *g, ak__llm_hparams *hp) {
    ak_gguf_type et;
    uint64_t n_tokens = 0;
    if (ak_gguf_get_array(g, "tokenizer.ggml.tokens", &et, &n_tokens) != AK_OK)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "GGUF lacks the vocabulary tokenizer.ggml.tokens");
    return get_dim(g, hp, "vocab_size", (int64_t)n_tokens, 1, 1 << 24, &hp->n_vocab);
}

static int is_arch(const ak__llm_hparams *hp, const char *name) {
    return strcmp(hp->arch, name) == 0;
}

/* The `{arch}.` keys each architecture may carry: those read below, and those that do
 * not change the math (context/RoPE dimension facts, vocabulary size, ...). Any other
 * key of the architecture is refused, naming it. */
static const char *const k_common_keys[] = {
    "context_length", "embedding_length", "block_count", "feed_forward_length",
    "attention.head_count", "attention.head_count_kv", "attention.key_length",
    "attention.value_length", "attention.layer_norm_rms_epsilon", "rope.freq_base",
    "rope.dimension_count", "rope.scaling.type", "rope.scaling.factor",
    "rope.scaling.original_context_length", "rope.scaling.finetuned", "vocab_size",
    "attention.sliding_window", /* used where the architecture slides (below) */
    "attention.layer_norm_epsilon", /* starcoder2's (others: refused below) */
    "pooling_type", /* embeddings only (model/embed.c) */
    NULL};
static const char *const k_granite_keys[] = {"embedding_scale", "residual_scale",
                                             "attention.scale", "logit_scale", NULL};
static const char *const k_gemma2_keys[] = {"attn_logit_softcapping", "final_logit_softcapping",
                                            NULL};
static const char *const k_phi3_keys[] = {"rope.scaling.attn_factor", NULL};
static const char *const k_moe_keys[] = {"expert_count", "expert_used_count",
                                         "expert_feed_forward_length",
                                         "expert_shared_feed_forward_length", NULL};

static int in_list(const char *const *list, const char *key, size_t len) {
    for (; list && *list; ++list)
        if (strlen(*list) == len && memcmp(*list, key, len) == 0) return 1;
    return 0;
}

static ak_status check_keys(const ak_gguf *g, const ak__llm_hparams *hp) {
    uint64_t n;
    AK_CHECK(ak_gguf_kv_count(g, &n));
    size_t alen = strlen(hp->arch);
    const char *const *extra = is_arch(hp, "granite")                        ? k_granite_keys
                               : is_arch(hp, "gemma2")                       ? k_gemma2_keys
                               : is_arch(hp, "phi3")                         ? k_phi3_keys
                               : is_arch(hp, "llama") || strstr(hp->arch, "moe") ? k_moe_keys
                                                                             : NULL;
    for (uint64_t i = 0; i < n; ++i) {
        const char *key;
        size_t len;
        ak_gguf_type t;
        AK_CHECK(ak_gguf_kv_at(g, i, &key, &len, &t));
        if (len <= alen || memcmp(key, hp->arch, alen) != 0 || key[alen] != '.') continue;
        const char *suffix = key + alen + 1;
        size_t slen = len - alen - 1;
        if (in_list(k_common_keys, suffix, slen) || in_list(extra, suffix, slen)) continue;
        return AK_FAIL(AK_ERR_UNSUPPORTED, "GGUF key '%.*s' is not implemented for "
                       "architecture '%s' (it would change the model's math)", (int)len, key,
                       hp->arch);
    }
    return AK_OK;
}

/* llama.cpp's rule for Gemma's attention scale: 1/√head_dim, except the 27B shapes
 * (46 layers of Gemma 2, 62 of Gemma 3) whose query_pre_attn_scalar is dim/heads. */
static float gemma_attn_scale(const ak__llm_hparams *hp) {
    int big = (is_arch(hp, "gemma2") && hp->n_layers == 46) ||
              (is_arch(hp, "gemma3") && hp->n_layers == 62);
    return 1.0f / sqrtf(big ? (float)hp->dim / (float)hp->n_heads : (float)hp->head_dim);
}

static ak_status read_gemma(const ak_gguf *g, ak__llm_hparams *hp) {
    hp->post_norms = 1;
    hp->ffn_gelu = 1;
    hp->embed_scale = sqrtf((float)hp->dim);
    hp->attn_scale = gemma_attn_scale(hp);
    AK_CHECK(get_dim(g, hp, "attention.sliding_window", -1, 1, 1 << 24, &hp->sliding_window));
    if (is_arch(hp, "gemma2")) {
        hp->swa_pattern = 2;
        /* llama.cpp's defaults when the keys are absent */
        AK_CHECK(get_real(g, hp, "attn_logit_softcapping", 50.0, 1e-3, 1e6, &hp->attn_softcap));
        return get_real(g, hp, "final_logit_softcapping", 30.0, 1e-3, 1e6, &hp->final_softcap);
    }
    hp->swa_pattern = 6;
    hp->qk_norm = 1;
    hp->rope_theta_local = 10000.0f; /* llama.cpp's fixed base of Gemma 3's sliding layers */
    return AK_OK;
}

/* Granite's four scales (all required, as llama.cpp requires them). */
static ak_status read_granite(const ak_gguf *g, ak__llm_hparams *hp) {
    AK_CHECK(get_real(g, hp, "embedding_scale", -1.0, 1e-6, 1e6, &hp->embed_scale));
    AK_CHECK(get_real(g, hp, "residual_scale", -1.0, 1e-6, 1e6, &hp->residual_scale));
    AK_CHECK(get_real(g, hp, "attention.scale", -1.0, 1e-6, 1e6, &hp->attn_scale));
    float logit_scale;
    AK_CHECK(get_real(g, hp, "logit_scale", -1.0, 1e-6, 1e6, &logit_scale));
    hp->logit_scale = 1.0f / logit_scale;
    return AK_OK;
}

/* Experts: Mixtral is GGUF `llama` with expert_count (its experts of
 * feed_forward_length, weights renormalized); Qwen2-MoE (a shared expert, weights as
 * the softmax gives them) and Qwen3-MoE (renormalized) have their own lengths; these
 * are llama.cpp's rules. */
static ak_status read_moe(const ak_gguf *g, ak__llm_hparams *hp) {
    int qwen = strstr(hp->arch, "moe") != NULL;
    AK_CHECK(get_dim(g, hp, "expert_count", qwen ? -1 : 0, 0, 4096, &hp->n_experts));
    if (hp->n_experts == 0) return AK_OK;
    AK_CHECK(get_dim(g, hp, "expert_used_count", -1, 1, hp->n_experts, &hp->n_experts_used));
    hp->norm_topk = !is_arch(hp, "qwen2moe");
    hp->expert_ffn_dim = hp->ffn_dim;
    if (!qwen) return AK_OK;
    AK_CHECK(get_dim(g, hp, "expert_feed_forward_length", -1, 1, 1 << 20, &hp->expert_ffn_dim));
    if (is_arch(hp, "qwen2moe"))
        AK_CHECK(get_dim(g, hp, "expert_shared_feed_forward_length", -1, 1, 1 << 20,
                         &hp->shared_ffn_dim));
    return AK_OK;
}

/* Phi-3: fused projections; longrope when the file has rope_factors_short (the engine
 * then runs up to rope.scaling.original_context_length, where llama.cpp and
 * transformers use the short factors), cos/sin × rope.scaling.attn_factor. */
static ak_status read_phi3(const ak_gguf *g, ak__llm_hparams *hp) {
    hp->fused_qkv = hp->fused_gate_up = 1;
    ak_gguf_tensor t;
    if (ak_gguf_tensor_by_name(g, "rope_factors_short.weight", &t) != AK_OK) return AK_OK;
    if (hp->rope_scaling != AK_ROPE_SCALING_NONE)
        return AK_FAIL(AK_ERR_UNSUPPORTED, "GGUF phi3: rope factors with another RoPE scaling");
    hp->rope_scaling = AK_ROPE_SCALING_LONGROPE;
    AK_CHECK(get_real(g, hp, "rope.scaling.attn_factor", 1.0, 1e-3, 1e3, &hp->rope_attn_factor));
    int32_t orig;
    AK_CHECK(get_dim(g, hp, "rope.scaling.original_context_length", hp->max_context, 1, 1 << 24,
                     &orig));
    if (orig < hp->max_context) hp->max_context = orig;
    return AK_OK;
}

/* Which architecture-specific parts this file has. */
static ak_status read_arch_features(const ak_gguf *g, ak__llm_hparams *hp) {
    if (is_arch(hp, "granite")) AK_CHECK(read_granite(g, hp));
    if (is_arch(hp, "qwen3") || is_arch(hp, "qwen3moe")) hp->qk_norm = 1;
    if (is_arch(hp, "olmo2")) { /* post-norms only, q/k norms over the whole projections */
        hp->qk_norm = 2;
        hp->post_norms = 1;
        hp->no_pre_norms = 1;
    }
    if (is_arch(hp, "llama") || strstr(hp->arch, "moe")) AK_CHECK(read_moe(g, hp));
    if (is_arch(hp, "phi3")) AK_CHECK(read_phi3(g, hp));
    if (is_arch(hp, "starcoder2")) { /* LayerNorm (its own eps key), plain MLP, biases */
        hp->layer_norm = hp->plain_mlp = hp->out_bias = 1;
        AK_CHECK(get_real(g, hp, "attention.layer_norm_epsilon", -1.0, 0.0, 1.0, &hp->norm_eps));
    } else {
        char key[96];
        ak_gguf_type t;
        AK_CHECK(arch_key(hp->arch, "attention.layer_norm_epsilon", key, sizeof key));
        AK_CHECK(ak_gguf_key_type(g, key, &t));
        if (t != AK_GGUF_NONE)
            return AK_FAIL(AK_ERR_UNSUPPORTED, "GGUF key '%s': LayerNorm is not implemented "
                           "for architecture '%s'", key, hp->arch);
    }
    if (is_arch(hp, "gemma2") || is_arch(hp, "gemma3")) AK_CHECK(read_gemma(g, hp));
    else if (is_arch(hp, "llama") || is_arch(hp, "mistral") || is_arch(hp, "phi3"))
        /* not written by llama.cpp's converter (which drops Mistral's window), but a
         * file that has it means it */
        AK_CHECK(get_dim(g, hp, "attention.sliding_window", 0, 0, 1 << 24, &hp->sliding_window));
    else {
        ak_gguf_type t;
        char key[96];
        AK_CHECK(arch_key(hp->arch, "attention.sliding_window", key, sizeof key));
        AK_CHECK(ak_gguf_key_type(g, key, &t));
        if (t != AK_GGUF_NONE)
            return AK_FAIL(AK_ERR_UNSUPPORTED, "GGUF key '%s': a sliding window is not "
                           "implemented for architecture '%s'", key, hp->arch);
    }
    return AK_OK;
}

ak_status ak__gguf_hparams(const ak_gguf *g, ak__llm_hparams *hp) {
    AK_ARG_CHECK(g != NULL && hp != NULL, "gguf or hparams is NULL");
    ak__hp_init(hp);
    AK_CHECK(read_arch(g, hp));
    AK_CHECK(get_dim(g, hp, "embedding_length", -1, 1, 1 << 16, &hp->dim));
    AK_CHECK(get_dim(g, hp, "block_count", -1, 1, 1024, &hp->n_layers));
    AK_CHECK(get_dim(g, hp, "feed_forward_length", -1, 1, 1 << 20, &hp->ffn_dim));
    AK_CHECK(get_dim(g, hp, "attention.head_count", -1, 1, 1024, &hp->n_heads));
    AK_CHECK(get_dim(g, hp, "attention.head_count_kv", hp->n_heads, 1, hp->n_heads,
                     &hp->n_kv_heads));
    if (hp->n_heads % hp->n_kv_heads != 0)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "GGUF: %d heads are not a multiple of %d KV heads",
                       hp->n_heads, hp->n_kv_heads);
    if (hp->dim % hp->n_heads != 0)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "GGUF: embedding %d is not a multiple of %d heads",
                       hp->dim, hp->n_heads);
    AK_CHECK(get_dim(g, hp, "attention.key_length", hp->dim / hp->n_heads, 2, 1024,
                     &hp->head_dim));
    if (hp->head_dim % 2 != 0)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "GGUF: head dimension %d is odd", hp->head_dim);
    AK_CHECK(get_dim(g, hp, "context_length", 2048, 1, 1 << 24, &hp->max_context));
    AK_CHECK(get_real(g, hp, "rope.freq_base", 10000.0, 1.0, 1e12, &hp->rope_theta));
    AK_CHECK(get_real(g, hp, "attention.layer_norm_rms_epsilon", 1e-5, 0.0, 1.0, &hp->norm_eps));
    AK_CHECK(read_rope_scaling(g, hp));
    AK_CHECK(read_vocab_size(g, hp));
    AK_CHECK(check_keys(g, hp));
    AK_CHECK(read_arch_features(g, hp));
    ak_gguf_tensor t;
    char name[96];
    ak__tensor_name_gguf(AK_T_OUTPUT, 0, name, sizeof name);
    hp->tied_output |= ak_gguf_tensor_by_name(g, name, &t) != AK_OK;
    ak__tensor_name_gguf(AK_T_BQ, 0, name, sizeof name);
    hp->qkv_bias = ak_gguf_tensor_by_name(g, name, &t) == AK_OK;
    return AK_OK;
}

ak_status ak__gguf_tensor_view(const ak_gguf *g, const char *name, ak__tensor_view *out) {
    ak_gguf_tensor t;
    AK_CHECK(ak_gguf_tensor_by_name(g, name, &t));
    switch (t.type) {
    case AK_GGML_F32: case AK_GGML_F16: case AK_GGML_BF16: case AK_GGML_Q8_0: case AK_GGML_Q4_0:
    case AK_GGML_Q2_K: case AK_GGML_Q3_K: case AK_GGML_Q4_K: case AK_GGML_Q5_K: case AK_GGML_Q6_K:
    case AK_GGML_Q8_K: case AK_GGML_IQ4_NL: case AK_GGML_IQ4_XS:
        break;
    default:
        return AK_FAIL(AK_ERR_UNSUPPORTED, "GGUF tensor '%s' has ggml type %u (supported: f32, "
                       "f16, bf16, q8_0, q4_0, q2_K, q3_K, q4_K, q5_K, q6_K, q8_K, iq4_nl, iq4_xs)",
                       name, t.type);
    }
    out->type = (ak_wtype)t.type;
    out->n_dims = t.n_dims;
    memcpy(out->dims, t.dims, sizeof out->dims);
    out->data = t.data;
    out->bytes = t.size;
    return AK_OK;
}
