/* GGUF → Hugging Face folder: config.json, model.safetensors, tokenizer.json and
 * tokenizer_config.json — the inverse of to_gguf.c. GGUF `llama` q/k rows go back to
 * rotate-half order; quantized weights (q8_0, q4_0, the k-quants, iq4) are dequantized (to f32, or the type asked for);
 * f32/f16/bf16 stay as they are unless a type is asked for. A rope_freqs.weight tensor
 * becomes Llama 3.1 rope_scaling: from the accelkit.rope.llama3.* keys that to_gguf.c
 * writes, or else fitted to the factors (refused when no llama3 setting reproduces them). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/check.h"
#include "llm/base/tensor_names.h"
#include "llm/convert/convert.h"
#include "llm/gguf/gguf.h"
#include "llm/hf/hf.h"
#include "llm/hf/safetensors.h"
#include "llm/model/model_files.h"
#include "llm/tokenizer/tokenizer.h"

typedef struct to_hf {
    const char *src, *dst;
    ak_gguf *g;
    ak__llm_hparams hp;
    ak_tokenizer *tok;
    int unpermute;
    int has_type;
    ak_wtype type;
    ak__cv_plan plan;
    ak_wtype main_type; /* of the first layer's q projection: config torch_dtype */
} to_hf;

/* ---- tensors --------------------------------------------------------------------------- */

static ak_wtype hf_type(const to_hf *c, ak_wtype src, int matrix) {
    if (!matrix) return AK_WTYPE_F32;
    if (c->has_type) return c->type;
    /* safetensors hold float types only: quantized weights become f32 */
    return src == AK_WTYPE_F16 || src == AK_WTYPE_BF16 ? src : AK_WTYPE_F32;
}

/* Role's tensor of layer i (ignored for a global role) from the GGUF into the plan under
 * its HF name. */
static ak_status plan(to_hf *c, ak__tensor_role role, int i) {
    const ak__tensor_name *tn = &ak__tensor_names[role];
    char gguf_name[96], hf_name[128];
    ak__tensor_name_gguf(role, i, gguf_name, sizeof gguf_name);
    ak__tensor_name_hf(role, i, hf_name, sizeof hf_name);
    ak__tensor_view v;
    ak_status st = ak__gguf_tensor_view(c->g, gguf_name, &v);
    if (st == AK_ERR_INVALID_ARG)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "%s lacks the tensor '%s'", c->src, gguf_name);
    AK_CHECK(st);
    if (v.n_dims != (tn->matrix ? 2u : 1u))
        return AK_FAIL(AK_ERR_INVALID_MODEL, "%s: tensor '%s' has %u dimensions, expected %d",
                       c->src, gguf_name, v.n_dims, tn->matrix ? 2 : 1);
    ak__cv_rows rows = tn->rows_rotated && c->unpermute ? AK_CV_ROWS_TO_HALVES : AK_CV_ROWS_SAME;
    ak_wtype t = hf_type(c, v.type, tn->matrix);
    if (role == AK_T_Q && i == 0) c->main_type = t;
    return ak__cv_plan_add(&c->plan, hf_name, &v, t, rows, c->hp.head_dim);
}

static ak_status plan_layer(to_hf *c, int i) {
    size_t n = AK_T_LAYER_ROLES - (c->hp.qkv_bias ? 0 : 3);
    for (size_t k = 0; k < n; k++) AK_CHECK(plan(c, ak__tensor_layer_roles[k], i));
    return AK_OK;
}

static ak_status make_plan(to_hf *c) {
    AK_CHECK(plan(c, AK_T_TOK_EMBD, 0));
    for (int i = 0; i < c->hp.n_layers; i++) AK_CHECK(plan_layer(c, i));
    AK_CHECK(plan(c, AK_T_OUTPUT_NORM, 0));
    if (!c->hp.tied_output) AK_CHECK(plan(c, AK_T_OUTPUT, 0));
    return AK_OK;
}

static ak__st_dtype st_dtype(ak_wtype t) {
    return t == AK_WTYPE_F16 ? AK_ST_F16 : t == AK_WTYPE_BF16 ? AK_ST_BF16 : AK_ST_F32;
}

static ak_status sink(void *ctx, const void *data, size_t bytes) {
    return ak__st_writer_data(ctx, data, bytes);
}

static ak_status write_weights(const to_hf *c) {
    char *path;
    AK_CHECK(ak__hf_path(c->dst, "model.safetensors", &path));
    ak__st_writer *w;
    ak_status st = ak__st_writer_open(path, &w);
    free(path);
    AK_CHECK(st);
    AK_CHECK_GOTO(st, ak__st_writer_meta(w, "format", "pt"));
    for (size_t i = 0; i < c->plan.n; i++) {
        const ak__cv_tensor *t = &c->plan.t[i];
        uint64_t shape[4];
        for (uint32_t d = 0; d < t->src.n_dims; d++) shape[d] = t->src.dims[t->src.n_dims - 1 - d];
        AK_CHECK_GOTO(st, ak__st_writer_add(w, t->name, st_dtype(t->dst_type), t->src.n_dims, shape));
    }
    for (size_t i = 0; i < c->plan.n; i++) {
        AK_LOG_INFO(AK_SUBSYS_LLM, "convert: %s (%s)", c->plan.t[i].name,
                    ak_wtype_name(c->plan.t[i].dst_type));
        AK_CHECK_GOTO(st, ak__cv_stream(&c->plan.t[i], sink, w));
    }
    return ak__st_writer_close(w);
fail:
    ak__st_writer_abort(w);
    return st;
}

/* ---- Llama 3.1 RoPE scaling from rope_freqs ------------------------------------------ */

static int factors_match(const ak__llm_hparams *hp, const float *f, size_t n) {
    float g[512];
    if (n > 512) return 0;
    ak__cv_llama3_factors(hp, g);
    for (size_t i = 0; i < n; i++)
        if (!(fabsf(g[i] - f[i]) <= 1e-4f * fabsf(f[i]))) return 0;
    return 1;
}

/* The factors between 1 and `factor` lie on smooth = a/wavelen + b (smooth as in
 * ak__cv_llama3_factors); two of them fix a and b, and with the original context L =
 * 8192 (Llama 3's) low = −b·L/a, high = (1 − b)·L/a. Fewer than two: Llama 3.1's
 * defaults, if they reproduce the factors. */
static void fit_llama3(ak__llm_hparams *hp, const float *f, size_t n) {
    float factor = 1.0f;
    for (size_t i = 0; i < n; i++) factor = f[i] > factor ? f[i] : factor;
    hp->rope_factor = factor;
    hp->rope_orig_context = 8192;
    hp->rope_low_freq_factor = 1.0f;
    hp->rope_high_freq_factor = 4.0f;
    double x[2], s[2];
    int k = 0;
    for (size_t i = 0; i < n; i++) {
        if (!(f[i] > 1.0001f && f[i] < factor * 0.9999f)) continue;
        double freq = 1.0 / pow(hp->rope_theta, (double)(2 * i) / hp->head_dim);
        x[k > 0] = freq / (2 * M_PI); /* 1/wavelen */
        s[k > 0] = (1.0 / f[i] - 1.0 / factor) / (1.0 - 1.0 / factor);
        k++;
    }
    if (k < 2 || x[0] == x[1]) return;
    double a = (s[0] - s[1]) / (x[0] - x[1]), b = s[0] - a * x[0], L = 8192.0;
    if (!(a > 0)) return;
    /* rounded to 3 decimals: checkpoints use round numbers, and the check below decides */
    hp->rope_low_freq_factor = (float)(round(-b * L / a * 1000.0) / 1000.0);
    hp->rope_high_freq_factor = (float)(round((1.0 - b) * L / a * 1000.0) / 1000.0);
}

static ak_status read_llama3_keys(const to_hf *c, ak__llm_hparams *hp, int *found) {
    double f, lo, hi;
    uint64_t L;
    *found = ak_gguf_get_float(c->g, "accelkit.rope.llama3.factor", &f) == AK_OK &&
             ak_gguf_get_float(c->g, "accelkit.rope.llama3.low_freq_factor", &lo) == AK_OK &&
             ak_gguf_get_float(c->g, "accelkit.rope.llama3.high_freq_factor", &hi) == AK_OK &&
             ak_gguf_get_uint(c->g, "accelkit.rope.llama3.original_context_length", &L) == AK_OK;
    if (!*found) return AK_OK;
    if (!(f >= 1 && f < 1e6 && lo > 0 && hi > lo && hi < 1e6 && L >= 1 && L <= (1u << 24)))
        return AK_FAIL(AK_ERR_INVALID_MODEL, "%s: accelkit.rope.llama3.* out of range", c->src);
    hp->rope_factor = (float)f;
    hp->rope_low_freq_factor = (float)lo;
    hp->rope_high_freq_factor = (float)hi;
    hp->rope_orig_context = (int32_t)L;
    return AK_OK;
}

static ak_status read_rope_freqs(to_hf *c) {
    ak__tensor_view v;
    if (ak__gguf_tensor_view(c->g, ak__tensor_names[AK_T_ROPE_FREQS].gguf, &v) != AK_OK)
        return AK_OK;
    size_t n = (size_t)c->hp.head_dim / 2;
    if (v.type != AK_WTYPE_F32 || v.n_dims != 1 || v.dims[0] != n || n > 512)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "%s: rope_freqs.weight is not %zu f32 factors",
                       c->src, n);
    float f[512];
    memcpy(f, v.data, n * sizeof *f);
    ak__llm_hparams hp = c->hp;
    int found;
    AK_CHECK(read_llama3_keys(c, &hp, &found));
    if (!found) fit_llama3(&hp, f, n);
    if (!factors_match(&hp, f, n))
        return AK_FAIL(AK_ERR_UNSUPPORTED, "%s: rope_freqs.weight is no Llama 3.1 rope_scaling "
                       "(Hugging Face configs cannot hold arbitrary factors)", c->src);
    hp.rope_scaling = AK_ROPE_SCALING_LLAMA3;
    c->hp = hp;
    return AK_OK;
}

/* ---- config.json ----------------------------------------------------------------------- */

/* The shortest decimal that reads back as the same float (1e-05, not 9.99999974737875e-06). */
static double short_float(float f) {
    char buf[32];
    for (int p = 1; p < 10; p++) {
        snprintf(buf, sizeof buf, "%.*g", p, (double)f);
        double d = strtod(buf, NULL);
        if ((float)d == f) return d;
    }
    return f;
}

static const char *torch_dtype(ak_wtype t) {
    return t == AK_WTYPE_F16 ? "float16" : t == AK_WTYPE_BF16 ? "bfloat16" : "float32";
}

static int add_rope_scaling(cJSON *cfg, const ak__llm_hparams *hp) {
    if (hp->rope_scaling == AK_ROPE_SCALING_NONE) return cJSON_AddNullToObject(cfg, "rope_scaling") != NULL;
    cJSON *rs = cJSON_AddObjectToObject(cfg, "rope_scaling");
    int llama3 = hp->rope_scaling == AK_ROPE_SCALING_LLAMA3;
    const char *type = llama3 ? "llama3" : "linear";
    int ok = rs && cJSON_AddStringToObject(rs, "rope_type", type) && cJSON_AddStringToObject(rs, "type", type);
    ok = ok && cJSON_AddNumberToObject(rs, "factor", short_float(hp->rope_factor));
    if (ok && llama3) {
        ok = cJSON_AddNumberToObject(rs, "low_freq_factor", short_float(hp->rope_low_freq_factor)) &&
             cJSON_AddNumberToObject(rs, "high_freq_factor", short_float(hp->rope_high_freq_factor)) &&
             cJSON_AddNumberToObject(rs, "original_max_position_embeddings", hp->rope_orig_context);
    }
    return ok;
}

static cJSON *config_json(const to_hf *c) {
    const ak__llm_hparams *hp = &c->hp;
    int qwen2 = strcmp(hp->arch, "qwen2") == 0, mistral = strcmp(hp->arch, "mistral") == 0;
    const char *cls = qwen2 ? "Qwen2ForCausalLM" : mistral ? "MistralForCausalLM" : "LlamaForCausalLM";
    cJSON *cfg = cJSON_CreateObject();
    int ok = cfg && cJSON_AddItemToObject(cfg, "architectures", cJSON_CreateStringArray(&cls, 1));
    ok = ok && cJSON_AddStringToObject(cfg, "model_type", qwen2 ? "qwen2" : mistral ? "mistral" : "llama");
    ok = ok && cJSON_AddNumberToObject(cfg, "hidden_size", hp->dim);
    ok = ok && cJSON_AddNumberToObject(cfg, "intermediate_size", hp->ffn_dim);
    ok = ok && cJSON_AddNumberToObject(cfg, "num_hidden_layers", hp->n_layers);
    ok = ok && cJSON_AddNumberToObject(cfg, "num_attention_heads", hp->n_heads);
    ok = ok && cJSON_AddNumberToObject(cfg, "num_key_value_heads", hp->n_kv_heads);
    if (ok && hp->head_dim * hp->n_heads != hp->dim) ok = cJSON_AddNumberToObject(cfg, "head_dim", hp->head_dim) != NULL;
    ok = ok && cJSON_AddNumberToObject(cfg, "max_position_embeddings", hp->max_context);
    ok = ok && cJSON_AddNumberToObject(cfg, "rms_norm_eps", short_float(hp->norm_eps));
    ok = ok && cJSON_AddNumberToObject(cfg, "rope_theta", short_float(hp->rope_theta));
    ok = ok && add_rope_scaling(cfg, hp);
    ok = ok && cJSON_AddNumberToObject(cfg, "vocab_size", hp->n_vocab);
    ok = ok && cJSON_AddBoolToObject(cfg, "tie_word_embeddings", hp->tied_output);
    ok = ok && cJSON_AddStringToObject(cfg, "hidden_act", "silu");
    ok = ok && cJSON_AddStringToObject(cfg, "torch_dtype", torch_dtype(c->main_type));
    if (ok && c->tok->bos >= 0) ok = cJSON_AddNumberToObject(cfg, "bos_token_id", c->tok->bos) != NULL;
    if (ok && c->tok->eos >= 0) ok = cJSON_AddNumberToObject(cfg, "eos_token_id", c->tok->eos) != NULL;
    if (!ok) cJSON_Delete(cfg);
    return ok ? cfg : NULL;
}

static ak_status write_config(const to_hf *c) {
    cJSON *cfg = config_json(c);
    char *text = cfg ? cJSON_Print(cfg) : NULL;
    cJSON_Delete(cfg);
    size_t n = text ? strlen(text) : 0;
    char *line = text ? realloc(text, n + 2) : NULL;
    if (!line) {
        free(text);
        return AK_FAIL(AK_ERR_NO_MEMORY, "config.json");
    }
    memcpy(line + n, "\n", 2);
    ak_status st = ak__hf_write_file(c->dst, "config.json", line, n + 1);
    free(line);
    return st;
}

/* ---- the folder ------------------------------------------------------------------------ */

/* A `t5` vocabulary: its normalizer flags and precompiled_charsmap as a Unigram pipeline. */
static ak_status write_unigram(const to_hf *c, const char *tpl) {
    ak__ugm_form f = {NULL, 0, c->tok->add_space_prefix, c->tok->ugm_merge_spaces};
    const ak_gguf_kv *kv = ak__gguf_find(c->g, "tokenizer.ggml.precompiled_charsmap");
    if (kv && kv->count) { /* its type was checked when the tokenizer was read */
        f.charsmap = (uint8_t *)(uintptr_t)(c->g->base + kv->pos);
        f.charsmap_len = (size_t)kv->count;
    }
    return ak__hf_write_unigram_tokenizer(c->tok, &f, tpl, c->dst);
}

static ak_status write_tokenizer(const to_hf *c) {
    const char *s;
    size_t len;
    char *tpl = NULL;
    if (ak_gguf_get_string(c->g, "tokenizer.chat_template", &s, &len) == AK_OK) {
        if (!(tpl = malloc(len + 1))) return AK_FAIL(AK_ERR_NO_MEMORY, "chat template");
        memcpy(tpl, s, len);
        tpl[len] = '\0';
    }
    ak_status st = c->tok->kind == AK_TOKENIZER_UGM ? write_unigram(c, tpl)
                                                     : ak__hf_write_tokenizer(c->tok, tpl, c->dst);
    free(tpl);
    return st;
}

static ak_status make_folder(const char *dst) {
    struct stat sb;
    if (mkdir(dst, 0755) == 0 || (errno == EEXIST && stat(dst, &sb) == 0 && S_ISDIR(sb.st_mode)))
        return AK_OK;
    return AK_FAIL(AK_ERR_IO, "cannot create the folder '%s'", dst);
}

static ak_status open_source(to_hf *c) {
    AK_CHECK(ak_gguf_open(c->src, &c->g));
    AK_CHECK(ak__gguf_hparams(c->g, &c->hp));
    if (!ak__hp_is_plain_llama(&c->hp) || strcmp(c->hp.arch, "qwen3") == 0)
        return AK_FAIL(AK_ERR_UNSUPPORTED, "%s: converting %s with these features is not "
                       "implemented (llama, qwen2, mistral without a sliding window)", c->src,
                       c->hp.arch);
    if (strcmp(c->hp.arch, "granite") == 0)
        return AK_FAIL(AK_ERR_UNSUPPORTED, "%s: granite models have no Hugging Face Llama "
                       "equivalent", c->src);
    if (c->hp.rope_scaling == AK_ROPE_SCALING_YARN) /* transformers' yarn differs between releases */
        return AK_FAIL(AK_ERR_UNSUPPORTED, "%s: yarn RoPE scaling is not written as a Hugging Face "
                       "rope_scaling (keep the GGUF file)", c->src);
    /* a Llama config with attention_bias would also need an o_proj bias */
    if (c->hp.qkv_bias && strcmp(c->hp.arch, "qwen2") != 0)
        return AK_FAIL(AK_ERR_UNSUPPORTED, "%s: q/k/v biases are only written for qwen2", c->src);
    AK_CHECK(ak_tokenizer_from_gguf(c->g, &c->tok));
    if (c->tok->kind == AK_TOKENIZER_WPM) /* checked before any file is written */
        return AK_FAIL(AK_ERR_UNSUPPORTED, "%s: a WordPiece vocabulary has no tokenizer.json "
                       "form here (only BPE and SentencePiece-style)", c->src);
    c->unpermute = !c->hp.rope_neox;
    return read_rope_freqs(c);
}

ak_status ak__convert_gguf_to_hf(const char *src, const char *dst, int has_type, ak_wtype type) {
    if (has_type && type != AK_WTYPE_F32 && type != AK_WTYPE_F16 && type != AK_WTYPE_BF16)
        return AK_FAIL(AK_ERR_INVALID_ARG, "Hugging Face weights are f32, f16 or bf16, not %s",
                       ak_wtype_name(type));
    to_hf c;
    memset(&c, 0, sizeof c);
    c.src = src;
    c.dst = dst;
    c.has_type = has_type;
    c.type = type;
    ak_status st;
    AK_CHECK_GOTO(st, open_source(&c));
    AK_CHECK_GOTO(st, make_plan(&c));
    AK_CHECK_GOTO(st, make_folder(dst));
    AK_CHECK_GOTO(st, write_weights(&c));
    AK_CHECK_GOTO(st, write_config(&c));
    AK_CHECK_GOTO(st, write_tokenizer(&c));
fail:
    ak__cv_plan_free(&c.plan);
    ak_tokenizer_free(c.tok);
    ak_gguf_close(c.g);
    return st;
}
