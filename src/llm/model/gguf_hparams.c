/* Llama-family hyper-parameters and tensor views from a GGUF file, with llama.cpp's key
 * and tensor names (see docs/llm.md). Every value is range-checked: a file that would
 * make the model read out of bounds is refused here, not discovered in a kernel. */
#include <stdio.h>
#include <string.h>

#include "core/check.h"
#include "llm/base/tensor_names.h"
#include "llm/model/model_files.h"

static ak_status arch_key(const ak__llm_hparams *hp, const char *suffix, char *key, size_t cap) {
    int n = snprintf(key, cap, "%s.%s", hp->arch, suffix);
    if (n < 0 || (size_t)n >= cap) return AK_FAIL(AK_ERR_INVALID_MODEL, "GGUF key too long");
    return AK_OK;
}

/* Reads {arch}.suffix as an int in [lo, hi]; absent → `fallback` unless fallback < 0. */
static ak_status get_dim(const ak_gguf *g, const ak__llm_hparams *hp, const char *suffix,
                         int64_t fallback, int64_t lo, int64_t hi, int32_t *out) {
    char key[96];
    AK_CHECK(arch_key(hp, suffix, key, sizeof key));
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

static ak_status get_real(const ak_gguf *g, const ak__llm_hparams *hp, const char *suffix,
                          double fallback, double lo, double hi, float *out) {
    char key[96];
    AK_CHECK(arch_key(hp, suffix, key, sizeof key));
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

static ak_status read_arch(const ak_gguf *g, ak__llm_hparams *hp) {
    const char *s;
    size_t len;
    if (ak_gguf_get_string(g, "general.architecture", &s, &len) != AK_OK)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "GGUF lacks general.architecture");
    if (len == 0 || len >= sizeof hp->arch)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "GGUF general.architecture has a bad length");
    memcpy(hp->arch, s, len);
    hp->arch[len] = '\0';
    static const char *const known[] = {"llama", "qwen2", "mistral", "granite"};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; ++i)
        if (strcmp(hp->arch, known[i]) == 0) return AK_OK;
    return AK_FAIL(AK_ERR_UNSUPPORTED, "GGUF architecture '%s' is not a Llama-family decoder "
                   "(llama, qwen2, mistral)", hp->arch);
}

static ak_status read_rope_scaling(const ak_gguf *g, ak__llm_hparams *hp) {
    char key[96];
    AK_CHECK(arch_key(hp, "rope.scaling.type", key, sizeof key));
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
    return AK_FAIL(AK_ERR_UNSUPPORTED, "GGUF %s '%.*s' (supported: none, linear; llama3 comes "
                   "as a rope_freqs tensor)", key, (int)len, s);
}

static ak_status read_vocab_size(const ak_gguf *g, ak__llm_hparams *hp) {
    ak_gguf_type et;
    uint64_t n_tokens = 0;
    if (ak_gguf_get_array(g, "tokenizer.ggml.tokens", &et, &n_tokens) != AK_OK)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "GGUF lacks the vocabulary tokenizer.ggml.tokens");
    return get_dim(g, hp, "vocab_size", (int64_t)n_tokens, 1, 1 << 24, &hp->n_vocab);
}

ak_status ak__gguf_hparams(const ak_gguf *g, ak__llm_hparams *hp) {
    AK_ARG_CHECK(g != NULL && hp != NULL, "gguf or hparams is NULL");
    memset(hp, 0, sizeof *hp);
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
    hp->rope_neox = strcmp(hp->arch, "qwen2") == 0;
    ak_gguf_tensor t;
    char name[96];
    ak__tensor_name_gguf(AK_T_OUTPUT, 0, name, sizeof name);
    hp->tied_output = ak_gguf_tensor_by_name(g, name, &t) != AK_OK;
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
