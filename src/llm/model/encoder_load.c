/* Binding a BERT-family encoder from GGUF, with llama.cpp's key and tensor names:
 * `bert` (learned absolute positions, q/k/v with biases, GELU FFN with biases) and
 * `nomic-bert` (rotary positions, fused QKV, SwiGLU FFN, no biases); both post-norm
 * LayerNorm with bias, token-type embeddings (type 0 is added) and a LayerNorm of the
 * embeddings. Every `{arch}.*` key must be one read here or one that does not change the
 * math, as for the decoders (gguf_hparams.c); rank pooling and causal attention are
 * refused by name. Hugging Face BertModel folders (config.json, safetensors, the pooling of
 * sentence-transformers' modules.json) bind the same tensors under transformers' names. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "llm/gguf/gguf.h"
#include "llm/hf/hf_internal.h"
#include "llm/model/encoder.h"
#include "llm/model/model_files.h"

int ak__encoder_arch(const char *arch) {
    return strcmp(arch, "bert") == 0 || strcmp(arch, "nomic-bert") == 0;
}

static const char *const k_encoder_keys[] = {
    "context_length", "embedding_length", "block_count", "feed_forward_length",
    "attention.head_count", "attention.head_count_kv", "attention.layer_norm_epsilon",
    "attention.causal", "pooling_type", "vocab_size", "rope.freq_base",
    "rope.dimension_count", NULL};

static int known_key(const char *suffix, size_t len) {
    for (const char *const *k = k_encoder_keys; *k; ++k)
        if (strlen(*k) == len && memcmp(*k, suffix, len) == 0) return 1;
    return 0;
}

static ak_status check_keys(const ak_gguf *g, const char *arch) {
    uint64_t n;
    AK_CHECK(ak_gguf_kv_count(g, &n));
    size_t alen = strlen(arch);
    for (uint64_t i = 0; i < n; ++i) {
        const char *key;
        size_t len;
        ak_gguf_type t;
        AK_CHECK(ak_gguf_kv_at(g, i, &key, &len, &t));
        if (len <= alen || memcmp(key, arch, alen) != 0 || key[alen] != '.') continue;
        if (!known_key(key + alen + 1, len - alen - 1))
            return AK_FAIL(AK_ERR_UNSUPPORTED, "GGUF key '%.*s' is not implemented for "
                           "architecture '%s' (it would change the model's math)", (int)len,
                           key, arch);
    }
    return AK_OK;
}

/* pooling_type and attention.causal: the two keys that decide what an embedding is. */
static ak_status read_pooling(const ak_gguf *g, const char *arch, int32_t *pooling) {
    int32_t p;
    AK_CHECK(ak__gguf_arch_int(g, arch, "pooling_type", AK__POOL_CLS, 0, 1 << 20, &p));
    if (p == 4)
        return AK_FAIL(AK_ERR_UNSUPPORTED, "GGUF %s.pooling_type = 4 (rank: a reranker's "
                       "classifier head) is not implemented", arch);
    if (p > AK__POOL_LAST)
        return AK_FAIL(AK_ERR_UNSUPPORTED, "GGUF %s.pooling_type = %d is not implemented "
                       "(0 none, 1 mean, 2 cls, 3 last)", arch, p);
    char key[96];
    snprintf(key, sizeof key, "%s.attention.causal", arch);
    int causal = 0;
    ak_gguf_type t;
    AK_CHECK(ak_gguf_key_type(g, key, &t));
    if (t != AK_GGUF_NONE && ak_gguf_get_bool(g, key, &causal) != AK_OK)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "GGUF key '%s' is not a bool", key);
    if (causal)
        return AK_FAIL(AK_ERR_UNSUPPORTED, "GGUF %s = true (a causal encoder) is not "
                       "implemented", key);
    *pooling = p;
    return AK_OK;
}

static ak_status read_hparams(const ak_gguf *g, ak__llm_hparams *hp, int32_t *pooling) {
    const char *a = hp->arch;
    AK_CHECK(check_keys(g, a));
    ak_gguf_type et;
    uint64_t n_tokens = 0;
    if (ak_gguf_get_array(g, "tokenizer.ggml.tokens", &et, &n_tokens) != AK_OK)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "GGUF lacks the vocabulary tokenizer.ggml.tokens");
    AK_CHECK(ak__gguf_arch_int(g, a, "vocab_size", (int64_t)n_tokens, 1, 1 << 24, &hp->n_vocab));
    AK_CHECK(ak__gguf_arch_int(g, a, "embedding_length", -1, 1, 1 << 16, &hp->dim));
    AK_CHECK(ak__gguf_arch_int(g, a, "block_count", -1, 1, 1024, &hp->n_layers));
    AK_CHECK(ak__gguf_arch_int(g, a, "feed_forward_length", -1, 1, 1 << 18, &hp->ffn_dim));
    AK_CHECK(ak__gguf_arch_int(g, a, "attention.head_count", -1, 1, 1024, &hp->n_heads));
    AK_CHECK(ak__gguf_arch_int(g, a, "attention.head_count_kv", hp->n_heads, hp->n_heads, hp->n_heads,
                     &hp->n_kv_heads));
    AK_CHECK(ak__gguf_arch_int(g, a, "context_length", -1, 1, 1 << 20, &hp->max_context));
    AK_CHECK(ak__gguf_arch_real(g, a, "attention.layer_norm_epsilon", -1.0, 0.0, 1.0, &hp->norm_eps));
    if (hp->dim % hp->n_heads != 0)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "GGUF %s.embedding_length %d is not a multiple of "
                       "the %d heads", a, hp->dim, hp->n_heads);
    hp->head_dim = hp->dim / hp->n_heads;
    if (strcmp(a, "nomic-bert") == 0) {
        AK_CHECK(ak__gguf_arch_real(g, a, "rope.freq_base", 10000.0, 1.0, 1e9, &hp->rope_theta));
        int32_t rot;
        AK_CHECK(ak__gguf_arch_int(g, a, "rope.dimension_count", hp->head_dim, hp->head_dim,
                         hp->head_dim, &rot)); /* partial rotary: refused by the range */
        hp->rope_neox = 1;
        if (hp->head_dim % 2)
            return AK_FAIL(AK_ERR_INVALID_MODEL, "nomic-bert: odd head size %d", hp->head_dim);
    }
    return read_pooling(g, a, pooling);
}

/* ---- tensors ------------------------------------------------------------------------- */

/* transformers' BertModel name of a GGUF name (suffix .weight / .bias kept) */
static const struct {
    const char *gguf, *hf;
} k_hf_names[] = {
    {"token_embd.", "embeddings.word_embeddings."},
    {"token_types.", "embeddings.token_type_embeddings."},
    {"position_embd.", "embeddings.position_embeddings."},
    {"token_embd_norm.", "embeddings.LayerNorm."},
    {"attn_q.", "attention.self.query."},
    {"attn_k.", "attention.self.key."},
    {"attn_v.", "attention.self.value."},
    {"attn_output.", "attention.output.dense."},
    {"attn_output_norm.", "attention.output.LayerNorm."},
    {"ffn_up.", "intermediate.dense."},
    {"ffn_down.", "output.dense."},
    {"layer_output_norm.", "output.LayerNorm."},
};

static void hf_name(const char *gguf, const char *prefix, char *out, size_t cap) {
    int layer = -1, used = 0;
    if (sscanf(gguf, "blk.%d.%n", &layer, &used) == 1 && used > 0) gguf += used;
    else layer = -1;
    for (size_t i = 0; i < sizeof k_hf_names / sizeof k_hf_names[0]; ++i) {
        size_t n = strlen(k_hf_names[i].gguf);
        if (strncmp(gguf, k_hf_names[i].gguf, n) != 0) continue;
        if (layer >= 0)
            snprintf(out, cap, "%sencoder.layer.%d.%s%s", prefix, layer, k_hf_names[i].hf, gguf + n);
        else
            snprintf(out, cap, "%s%s%s", prefix, k_hf_names[i].hf, gguf + n);
        return;
    }
    snprintf(out, cap, "%s%s", prefix, gguf);
}

/* A tensor by its GGUF name; in a Hugging Face folder by BertModel's name, with or without
 * the "bert." of checkpoints saved from a task model. */
static ak_status lookup(const ak_llm_model *m, const char *name, ak__tensor_view *v,
                        char *shown, size_t cap) {
    snprintf(shown, cap, "%s", name);
    if (!m->hf) return ak__gguf_tensor_view(m->gguf, name, v);
    hf_name(name, "", shown, cap);
    if (!ak__hf_has_tensor(m->hf, shown)) {
        char prefixed[160];
        hf_name(name, "bert.", prefixed, sizeof prefixed);
        if (ak__hf_has_tensor(m->hf, prefixed)) snprintf(shown, cap, "%s", prefixed);
    }
    return ak__hf_tensor(m->hf, shown, v);
}

static ak_status view(const ak_llm_model *m, const char *gguf_name, ak__tensor_view *v,
                      int required) {
    char name[160];
    ak_status st = lookup(m, gguf_name, v, name, sizeof name);
    if (st == AK_ERR_INVALID_ARG) {
        ak_clear_error();
        if (!required) return AK_ERR_INVALID_ARG;
        return AK_FAIL(AK_ERR_INVALID_MODEL, "model: tensor '%s' is missing", name);
    }
    return st;
}

static ak_status bind_matrix(ak_llm_model *m, const char *name, int64_t rows, int64_t cols,
                             ak__matrix *out) {
    ak__tensor_view v;
    AK_CHECK(view(m, name, &v, 1));
    if (v.n_dims != 2 || v.dims[0] != (uint64_t)cols || v.dims[1] != (uint64_t)rows)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "model: tensor '%s' has shape [%llu, %llu], "
                       "expected [%lld, %lld]", name, (unsigned long long)v.dims[0],
                       (unsigned long long)(v.n_dims > 1 ? v.dims[1] : 1), (long long)cols,
                       (long long)rows);
    size_t row_bytes;
    if (ak_wtype_row_bytes(v.type, (size_t)cols, &row_bytes) != AK_OK ||
        v.bytes != row_bytes * (uint64_t)rows)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "model: tensor '%s' has a bad size", name);
    *out = (ak__matrix){v.type, v.data, rows, cols, row_bytes};
    size_t align = v.type == AK_WTYPE_F32 ? 4 : 2;
    if ((uintptr_t)v.data % align != 0) { /* safetensors need not align */
        float *copy = malloc(v.bytes + 4);
        if (!copy) return AK_FAIL(AK_ERR_NO_MEMORY, "model: out of memory copying '%s'", name);
        memcpy(copy, v.data, v.bytes);
        AK_CHECK(ak__model_own(m, copy));
        out->data = copy;
    }
    m->n_params += (uint64_t)rows * (uint64_t)cols;
    m->weight_bytes += v.bytes;
    return AK_OK;
}

/* A vector of n as owned f32; absent and not required → *out = NULL. */
static ak_status bind_vector(ak_llm_model *m, const char *name, int64_t n, int required,
                             const float **out) {
    ak__tensor_view v;
    *out = NULL;
    ak_status st = view(m, name, &v, required);
    if (st == AK_ERR_INVALID_ARG && !required) return AK_OK;
    AK_CHECK(st);
    if (v.n_dims != 1 || v.dims[0] != (uint64_t)n)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "model: tensor '%s' should have %lld values", name,
                       (long long)n);
    float *f = malloc((size_t)n * sizeof *f);
    if (!f) return AK_FAIL(AK_ERR_NO_MEMORY, "model: out of memory");
    AK_CHECK(ak__model_own(m, f));
    AK_CHECK(ak_dequantize_row(v.type, v.data, f, (size_t)n));
    m->n_params += (uint64_t)n;
    *out = f;
    return AK_OK;
}

static ak_status bind_layer(ak_llm_model *m, int li, ak__enc_layer *l) {
    const ak__llm_hparams *hp = &m->hp;
    int nomic = m->enc->nomic;
    int64_t D = hp->dim, F = hp->ffn_dim;
    char n[96];
#define NAME(s) (snprintf(n, sizeof n, "blk.%d.%s", li, s), n)
    if (nomic) {
        AK_CHECK(bind_matrix(m, NAME("attn_qkv.weight"), 3 * D, D, &l->wqkv));
    } else {
        AK_CHECK(bind_matrix(m, NAME("attn_q.weight"), D, D, &l->wq));
        AK_CHECK(bind_matrix(m, NAME("attn_k.weight"), D, D, &l->wk));
        AK_CHECK(bind_matrix(m, NAME("attn_v.weight"), D, D, &l->wv));
        AK_CHECK(bind_vector(m, NAME("attn_q.bias"), D, 1, &l->bq));
        AK_CHECK(bind_vector(m, NAME("attn_k.bias"), D, 1, &l->bk));
        AK_CHECK(bind_vector(m, NAME("attn_v.bias"), D, 1, &l->bv));
        AK_CHECK(bind_vector(m, NAME("attn_output.bias"), D, 1, &l->bo));
        AK_CHECK(bind_vector(m, NAME("ffn_up.bias"), F, 1, &l->b_up));
        AK_CHECK(bind_vector(m, NAME("ffn_down.bias"), D, 1, &l->b_down));
    }
    AK_CHECK(bind_matrix(m, NAME("attn_output.weight"), D, D, &l->wo));
    AK_CHECK(bind_vector(m, NAME("attn_output_norm.weight"), D, 1, &l->attn_norm));
    AK_CHECK(bind_vector(m, NAME("attn_output_norm.bias"), D, 1, &l->attn_norm_b));
    AK_CHECK(bind_matrix(m, NAME("ffn_up.weight"), F, D, &l->w_up));
    if (nomic) AK_CHECK(bind_matrix(m, NAME("ffn_gate.weight"), F, D, &l->w_gate));
    AK_CHECK(bind_matrix(m, NAME("ffn_down.weight"), D, F, &l->w_down));
    AK_CHECK(bind_vector(m, NAME("layer_output_norm.weight"), D, 1, &l->out_norm));
    AK_CHECK(bind_vector(m, NAME("layer_output_norm.bias"), D, 1, &l->out_norm_b));
#undef NAME
    return AK_OK;
}

/* Tensors the encoder does not use (a classifier head, a pooler) are refused by name:
 * they would mean the file expects rank pooling or another output. */
static ak_status check_tensor_names(const ak_llm_model *m) {
    uint64_t n;
    AK_CHECK(ak_gguf_tensor_count(m->gguf, &n));
    for (uint64_t i = 0; i < n; ++i) {
        ak_gguf_tensor ti;
        AK_CHECK(ak_gguf_tensor_at(m->gguf, i, &ti));
        if (ti.name_len >= 3 && memcmp(ti.name, "cls", 3) == 0)
            return AK_FAIL(AK_ERR_UNSUPPORTED, "model: tensor '%.*s' (a classifier head) is "
                           "not implemented", (int)ti.name_len, ti.name);
    }
    return AK_OK;
}

/* Everything after the hyper-parameters: the same for GGUF and HF. */
static ak_status bind_encoder(ak_llm_model *m, struct ak__encoder *e) {
    ak__llm_hparams *hp = &m->hp;
    m->enc = e;
    e->nomic = strcmp(hp->arch, "nomic-bert") == 0;
    if (m->gguf) AK_CHECK(check_tensor_names(m));
    int64_t D = hp->dim;
    AK_CHECK(bind_matrix(m, "token_embd.weight", hp->n_vocab, D, &e->tok_embd));
    ak__tensor_view tv;
    AK_CHECK(view(m, "token_types.weight", &tv, 1));
    int64_t n_types = tv.n_dims == 2 ? (int64_t)tv.dims[1] : 0;
    if (n_types < 1)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "model: the token type embeddings are not a "
                       "[dim, types] matrix");
    AK_CHECK(bind_matrix(m, "token_types.weight", n_types, D, &e->type_embd));
    if (!e->nomic)
        AK_CHECK(bind_matrix(m, "position_embd.weight", hp->max_context, D, &e->pos_embd));
    AK_CHECK(bind_vector(m, "token_embd_norm.weight", D, 1, &e->embd_norm));
    AK_CHECK(bind_vector(m, "token_embd_norm.bias", D, 1, &e->embd_norm_b));
    e->layers = calloc((size_t)hp->n_layers, sizeof *e->layers);
    if (!e->layers) return AK_FAIL(AK_ERR_NO_MEMORY, "model: out of memory");
    AK_CHECK(ak__model_own(m, (float *)(void *)e->layers));
    for (int li = 0; li < hp->n_layers; ++li) AK_CHECK(bind_layer(m, li, &e->layers[li]));
    if (e->nomic) AK_CHECK(ak__model_rope_init(m, NULL));
    return AK_OK;
}

static ak_status new_encoder(ak_llm_model *m, struct ak__encoder **out) {
    struct ak__encoder *e = calloc(1, sizeof *e);
    if (!e) return AK_FAIL(AK_ERR_NO_MEMORY, "model: out of memory");
    AK_CHECK(ak__model_own(m, (float *)(void *)e));
    *out = e;
    return AK_OK;
}

ak_status ak__encoder_load_gguf(ak_llm_model *m) {
    AK_CHECK(read_hparams(m->gguf, &m->hp, &m->embed_pooling));
    struct ak__encoder *e = NULL;
    AK_CHECK(new_encoder(m, &e));
    return bind_encoder(m, e);
}

/* ---- Hugging Face BertModel ---------------------------------------------------------- */

int ak__encoder_hf_arch(const ak__hf *h) {
    const cJSON *archs = ak__json_get(h->config, "architectures");
    const cJSON *first = cJSON_IsArray(archs) ? archs->child : NULL;
    const cJSON *mt = ak__json_get(h->config, "model_type");
    return cJSON_IsString(first) ? strcmp(first->valuestring, "BertModel") == 0
                                 : cJSON_IsString(mt) && strcmp(mt->valuestring, "bert") == 0;
}

static ak_status cfg_int(const ak__hf *h, const char *key, int64_t fallback, int64_t lo,
                         int64_t hi, int32_t *out) {
    const cJSON *v = ak__json_get(h->config, key);
    double d = (double)fallback;
    if (v && !cJSON_IsNumber(v))
        return AK_FAIL(AK_ERR_INVALID_MODEL, "%s/config.json: '%s' is not a number", h->dir, key);
    if (v) d = v->valuedouble;
    else if (fallback < lo)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "%s/config.json lacks '%s'", h->dir, key);
    if (!(d >= (double)lo && d <= (double)hi) || d != (double)(int64_t)d)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "%s/config.json: '%s' = %g is out of range "
                       "[%lld, %lld]", h->dir, key, d, (long long)lo, (long long)hi);
    *out = (int32_t)d;
    return AK_OK;
}

/* config.json fields that change the math, each implemented or refused */
static ak_status hf_features(const ak__hf *h, struct ak__encoder *e) {
    const cJSON *act = ak__json_get(h->config, "hidden_act");
    const char *a = cJSON_IsString(act) ? act->valuestring : "gelu";
    if (strcmp(a, "gelu") == 0) e->gelu_erf = 1; /* transformers' exact GELU */
    else if (strcmp(a, "gelu_new") && strcmp(a, "gelu_pytorch_tanh"))
        return AK_FAIL(AK_ERR_UNSUPPORTED, "%s/config.json: hidden_act '%s' is not implemented "
                       "(gelu, gelu_new, gelu_pytorch_tanh)", h->dir, a);
    const cJSON *pos = ak__json_get(h->config, "position_embedding_type");
    if (pos && !(cJSON_IsString(pos) && strcmp(pos->valuestring, "absolute") == 0))
        return AK_FAIL(AK_ERR_UNSUPPORTED, "%s/config.json: position_embedding_type other than "
                       "absolute is not implemented", h->dir);
    static const char *const k_off[] = {"is_decoder", "add_cross_attention"};
    for (size_t i = 0; i < 2; ++i)
        if (cJSON_IsTrue(ak__json_get(h->config, k_off[i])))
            return AK_FAIL(AK_ERR_UNSUPPORTED, "%s/config.json: %s is not implemented (a "
                           "causal or cross-attending BERT)", h->dir, k_off[i]);
    return AK_OK;
}

/* sentence-transformers' pooling (modules.json → its Pooling folder's config.json), as
 * llama.cpp's converter reads it; none without one. */
static ak_status hf_pooling(const ak__hf *h, int32_t *pooling) {
    *pooling = AK__POOL_NONE;
    cJSON *modules = NULL, *cfg = NULL;
    AK_CHECK(ak__hf_read_json(h->dir, "modules.json", 1, &modules));
    const char *path = NULL;
    for (const cJSON *mod = cJSON_IsArray(modules) ? modules->child : NULL; mod; mod = mod->next) {
        const cJSON *type = ak__json_get(mod, "type"), *p = ak__json_get(mod, "path");
        if (cJSON_IsString(type) && strstr(type->valuestring, "Pooling") && cJSON_IsString(p))
            path = p->valuestring;
    }
    ak_status st = AK_OK;
    if (path) {
        char name[256];
        snprintf(name, sizeof name, "%s/config.json", path);
        st = ak__hf_read_json(h->dir, name, 0, &cfg);
    }
    static const struct { const char *key; int32_t pooling; } k_modes[] = {
        {"pooling_mode_mean_tokens", AK__POOL_MEAN}, {"pooling_mode_cls_token", AK__POOL_CLS},
        {"pooling_mode_lasttoken", AK__POOL_LAST}};
    static const char *const k_refused[] = {"pooling_mode_max_tokens",
                                            "pooling_mode_mean_sqrt_len_tokens",
                                            "pooling_mode_weightedmean_tokens"};
    for (size_t i = 0; st == AK_OK && cfg && i < 3; ++i) {
        if (cJSON_IsTrue(ak__json_get(cfg, k_modes[i].key))) *pooling = k_modes[i].pooling;
        if (cJSON_IsTrue(ak__json_get(cfg, k_refused[i])))
            st = AK_FAIL(AK_ERR_UNSUPPORTED, "%s/%s/config.json: %s is not implemented",
                         h->dir, path, k_refused[i]);
    }
    cJSON_Delete(modules);
    cJSON_Delete(cfg);
    return st;
}

ak_status ak__encoder_load_hf(ak_llm_model *m) {
    const ak__hf *h = m->hf;
    ak__llm_hparams *hp = &m->hp;
    ak__hp_init(hp);
    snprintf(hp->arch, sizeof hp->arch, "bert");
    AK_CHECK(cfg_int(h, "vocab_size", -1, 1, 1 << 24, &hp->n_vocab));
    AK_CHECK(cfg_int(h, "hidden_size", -1, 1, 1 << 16, &hp->dim));
    AK_CHECK(cfg_int(h, "num_hidden_layers", -1, 1, 1024, &hp->n_layers));
    AK_CHECK(cfg_int(h, "num_attention_heads", -1, 1, 1024, &hp->n_heads));
    AK_CHECK(cfg_int(h, "intermediate_size", -1, 1, 1 << 18, &hp->ffn_dim));
    AK_CHECK(cfg_int(h, "max_position_embeddings", -1, 1, 1 << 20, &hp->max_context));
    const cJSON *eps = ak__json_get(h->config, "layer_norm_eps");
    hp->norm_eps = cJSON_IsNumber(eps) ? (float)eps->valuedouble : 1e-12f;
    if (!(hp->norm_eps >= 0 && hp->norm_eps < 1))
        return AK_FAIL(AK_ERR_INVALID_MODEL, "%s/config.json: layer_norm_eps out of range", h->dir);
    if (hp->dim % hp->n_heads)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "%s/config.json: hidden_size %d is not a multiple "
                       "of the %d heads", h->dir, hp->dim, hp->n_heads);
    hp->n_kv_heads = hp->n_heads;
    hp->head_dim = hp->dim / hp->n_heads;
    struct ak__encoder *e = NULL;
    AK_CHECK(new_encoder(m, &e));
    AK_CHECK(hf_features(h, e));
    AK_CHECK(hf_pooling(h, &m->embed_pooling));
    return bind_encoder(m, e);
}
