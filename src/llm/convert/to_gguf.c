/* Hugging Face folder → GGUF, with the tensor names and keys of llama.cpp's converter
 * (convert_hf_to_gguf.py), so llama.cpp and accelkit both read the result:
 *   model.embed_tokens.weight → token_embd.weight, model.norm.weight → output_norm.weight,
 *   lm_head.weight → output.weight (left out when tied), and per layer N
 *   input_layernorm → blk.N.attn_norm, self_attn.{q,k,v,o}_proj → blk.N.attn_{q,k,v,output},
 *   post_attention_layernorm → blk.N.ffn_norm, mlp.{gate,up,down}_proj → blk.N.ffn_{...}.
 * Llama/Mistral q and k rows are permuted to GGUF `llama`'s adjacent-pair RoPE layout
 * (convert.h); Qwen2 keeps rotate-half (GGUF `qwen2`). Matrices take the output type
 * (f16 when a quantized type does not fit the row length), or llama.cpp's per-tensor mix
 * of a preset such as q4_k_m (quant_mix.c); norms and biases stay f32.
 * Llama 3.1 RoPE scaling becomes a rope_freqs.weight tensor of per-frequency factors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "llm/base/tensor_names.h"
#include "llm/convert/convert.h"
#include "llm/gguf/gguf_write.h"
#include "llm/hf/hf.h"
#include "llm/tokenizer/tokenizer.h"

typedef struct to_gguf {
    const char *src;
    ak__hf *hf;
    ak__llm_hparams hp;
    ak_tokenizer *tok;
    const char *arch;     /* the GGUF architecture */
    int permute;          /* llama/mistral: q/k rows to adjacent pairs */
    int has_type;
    ak_wtype type;
    ak__cv_preset preset; /* llama.cpp's per-tensor mix, or AK_CV_PLAIN */
    ak__cv_plan plan;
    float *rope_freqs;
    ak__gguf_writer *w;
    int n_fallback;       /* matrices stored as f16 instead of the quantized type */
    ak__ugm_form ugm;     /* a Unigram tokenizer's pipeline in GGUF t5 terms */
} to_gguf;

/* ---- the tensor plan ------------------------------------------------------------------- */

static ak_status check_shape(const char *name, const ak__tensor_view *v, uint64_t d0, uint64_t d1) {
    uint32_t n = d1 ? 2 : 1;
    if (v->n_dims != n || v->dims[0] != d0 || (d1 && v->dims[1] != d1))
        return AK_FAIL(AK_ERR_INVALID_MODEL, "tensor '%s' has shape [%llu, %llu] (%u dims), the "
                       "config implies [%llu, %llu] (innermost first)", name,
                       (unsigned long long)v->dims[0], (unsigned long long)v->dims[1], v->n_dims,
                       (unsigned long long)d0, (unsigned long long)d1);
    return AK_OK;
}

/* The output type, or f16 (as llama.cpp does) when rows are not whole quantized blocks;
 * a preset's type for this role and layer (quant_mix.c). */
static ak_wtype matrix_type(to_gguf *c, const ak__tensor_view *v, ak__tensor_role role, int layer) {
    if (c->preset != AK_CV_PLAIN) {
        int n_kv = c->hp.n_kv_heads > 0 ? c->hp.n_kv_heads : 1, fell_back = 0;
        ak__cv_mix_ctx m = {.role = role, .layer = layer, .n_layers = c->hp.n_layers,
                            .n_gqa = c->hp.n_heads / n_kv, .tied = c->hp.tied_output,
                            .row_len = v->dims[0]};
        ak_wtype t = ak__cv_preset_type(c->preset, c->type, &m, &fell_back);
        c->n_fallback += fell_back;
        return t;
    }
    ak_wtype t = c->has_type ? c->type : v->type;
    if ((t == AK_WTYPE_Q8_0 || t == AK_WTYPE_Q4_0) && v->dims[0] % 32 != 0) {
        c->n_fallback++;
        t = AK_WTYPE_F16;
    }
    return t;
}

/* Role's tensor of layer i (ignored for a global role), of shape {d0, d1} (d1 = 0: a
 * vector), from the checkpoint into the plan under its GGUF name. */
static ak_status plan(to_gguf *c, ak__tensor_role role, int i, uint64_t d0, uint64_t d1) {
    char hf_name[128], gguf_name[96];
    ak__tensor_name_hf(role, i, hf_name, sizeof hf_name);
    ak__tensor_name_gguf(role, i, gguf_name, sizeof gguf_name);
    ak__tensor_view v;
    ak_status st = ak__hf_tensor(c->hf, hf_name, &v);
    if (st == AK_ERR_INVALID_ARG)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "%s lacks the tensor '%s'", c->src, hf_name);
    AK_CHECK(st);
    AK_CHECK(check_shape(hf_name, &v, d0, d1));
    ak_wtype t = d1 ? matrix_type(c, &v, role, i) : AK_WTYPE_F32;
    int permute = ak__tensor_names[role].rows_rotated;
    ak__cv_rows rows = permute && c->permute ? AK_CV_ROWS_TO_PAIRS : AK_CV_ROWS_SAME;
    return ak__cv_plan_add(&c->plan, gguf_name, &v, t, rows, c->hp.head_dim);
}

static ak_status plan_layer(to_gguf *c, int i) {
    const ak__llm_hparams *hp = &c->hp;
    uint64_t dim = (uint64_t)hp->dim, q = (uint64_t)hp->n_heads * (uint64_t)hp->head_dim;
    uint64_t kv = (uint64_t)hp->n_kv_heads * (uint64_t)hp->head_dim, ffn = (uint64_t)hp->ffn_dim;
    /* each role's shape {d0, d1}, innermost first (d1 = 0: a vector) */
    uint64_t shape[AK_T_COUNT][2] = {
        [AK_T_ATTN_NORM] = {dim, 0}, [AK_T_Q] = {dim, q},    [AK_T_K] = {dim, kv},
        [AK_T_V] = {dim, kv},        [AK_T_O] = {q, dim},    [AK_T_FFN_NORM] = {dim, 0},
        [AK_T_GATE] = {dim, ffn},    [AK_T_UP] = {dim, ffn}, [AK_T_DOWN] = {ffn, dim},
        [AK_T_BQ] = {q, 0},          [AK_T_BK] = {kv, 0},    [AK_T_BV] = {kv, 0},
    };
    size_t n = AK_T_LAYER_ROLES - (hp->qkv_bias ? 0 : 3);
    for (size_t k = 0; k < n; k++) {
        ak__tensor_role role = ak__tensor_layer_roles[k];
        AK_CHECK(plan(c, role, i, shape[role][0], shape[role][1]));
    }
    return AK_OK;
}

static ak_status plan_rope_freqs(to_gguf *c) {
    size_t n = (size_t)c->hp.head_dim / 2;
    if (!(c->rope_freqs = malloc(n * sizeof *c->rope_freqs)))
        return AK_FAIL(AK_ERR_NO_MEMORY, "rope factors");
    ak__cv_llama3_factors(&c->hp, c->rope_freqs);
    ak__tensor_view v = {.type = AK_WTYPE_F32, .n_dims = 1, .dims = {n, 1, 1, 1},
                         .data = c->rope_freqs, .bytes = n * sizeof(float)};
    return ak__cv_plan_add(&c->plan, ak__tensor_names[AK_T_ROPE_FREQS].gguf, &v, AK_WTYPE_F32,
                           AK_CV_ROWS_SAME, 0);
}

static ak_status make_plan(to_gguf *c) {
    uint64_t dim = (uint64_t)c->hp.dim, vocab = (uint64_t)c->hp.n_vocab;
    AK_CHECK(plan(c, AK_T_TOK_EMBD, 0, dim, vocab));
    if (c->hp.rope_scaling == AK_ROPE_SCALING_LLAMA3) AK_CHECK(plan_rope_freqs(c));
    AK_CHECK(plan(c, AK_T_OUTPUT_NORM, 0, dim, 0));
    if (!c->hp.tied_output) AK_CHECK(plan(c, AK_T_OUTPUT, 0, dim, vocab));
    for (int i = 0; i < c->hp.n_layers; i++) AK_CHECK(plan_layer(c, i));
    if (c->n_fallback)
        AK_LOG_WARN(AK_SUBSYS_LLM, "convert: %d matrices have rows that are not whole blocks "
                    "of their type: stored as %s", c->n_fallback,
                    c->preset != AK_CV_PLAIN ? "iq4_nl, q8_0 or f16 (as llama.cpp)" : "f16");
    return AK_OK;
}

/* ---- metadata -------------------------------------------------------------------------- */

static ak_status kv_arch_u32(to_gguf *c, const char *suffix, uint32_t v) {
    char key[96];
    snprintf(key, sizeof key, "%s.%s", c->arch, suffix);
    return ak__gguf_kv_u32(c->w, key, v);
}

static ak_status kv_arch_f32(to_gguf *c, const char *suffix, float v) {
    char key[96];
    snprintf(key, sizeof key, "%s.%s", c->arch, suffix);
    return ak__gguf_kv_f32(c->w, key, v);
}

/* general.name: the last part of the folder path. */
static const char *model_name(const char *dir, size_t *len) {
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') n--;
    size_t start = n;
    while (start > 0 && dir[start - 1] != '/') start--;
    *len = n - start;
    return dir + start;
}

static ak_status write_general(to_gguf *c) {
    size_t len;
    const char *name = model_name(c->src, &len);
    AK_CHECK(ak__gguf_kv_string(c->w, "general.architecture", c->arch, strlen(c->arch)));
    AK_CHECK(ak__gguf_kv_string(c->w, "general.name", name, len));
    /* the file type is what most matrices are: the first layer's q projection */
    ak_wtype ft = c->plan.t[0].dst_type;
    char q0[96];
    ak__tensor_name_gguf(AK_T_Q, 0, q0, sizeof q0);
    for (size_t i = 0; i < c->plan.n; i++)
        if (strcmp(c->plan.t[i].name, q0) == 0) ft = c->plan.t[i].dst_type;
    uint32_t file_type = c->preset != AK_CV_PLAIN ? ak__cv_preset_file_type(c->preset)
                                                  : ak__cv_file_type(ft);
    return ak__gguf_kv_u32(c->w, "general.file_type", file_type);
}

static ak_status write_llama3_keys(to_gguf *c) {
    /* not read by llama.cpp (it has rope_freqs.weight); they let GGUF → HF restore the
     * config exactly */
    AK_CHECK(ak__gguf_kv_f32(c->w, "accelkit.rope.llama3.factor", c->hp.rope_factor));
    AK_CHECK(ak__gguf_kv_f32(c->w, "accelkit.rope.llama3.low_freq_factor", c->hp.rope_low_freq_factor));
    AK_CHECK(ak__gguf_kv_f32(c->w, "accelkit.rope.llama3.high_freq_factor", c->hp.rope_high_freq_factor));
    return ak__gguf_kv_u32(c->w, "accelkit.rope.llama3.original_context_length",
                           (uint32_t)c->hp.rope_orig_context);
}

static ak_status write_hparams(to_gguf *c) {
    const ak__llm_hparams *hp = &c->hp;
    AK_CHECK(kv_arch_u32(c, "context_length", (uint32_t)hp->max_context));
    AK_CHECK(kv_arch_u32(c, "embedding_length", (uint32_t)hp->dim));
    AK_CHECK(kv_arch_u32(c, "block_count", (uint32_t)hp->n_layers));
    AK_CHECK(kv_arch_u32(c, "feed_forward_length", (uint32_t)hp->ffn_dim));
    AK_CHECK(kv_arch_u32(c, "attention.head_count", (uint32_t)hp->n_heads));
    AK_CHECK(kv_arch_u32(c, "attention.head_count_kv", (uint32_t)hp->n_kv_heads));
    AK_CHECK(kv_arch_f32(c, "attention.layer_norm_rms_epsilon", hp->norm_eps));
    AK_CHECK(kv_arch_f32(c, "rope.freq_base", hp->rope_theta));
    AK_CHECK(kv_arch_u32(c, "rope.dimension_count", (uint32_t)hp->head_dim));
    if (hp->head_dim * hp->n_heads != hp->dim) {
        AK_CHECK(kv_arch_u32(c, "attention.key_length", (uint32_t)hp->head_dim));
        AK_CHECK(kv_arch_u32(c, "attention.value_length", (uint32_t)hp->head_dim));
    }
    AK_CHECK(kv_arch_u32(c, "vocab_size", (uint32_t)hp->n_vocab));
    if (hp->rope_scaling == AK_ROPE_SCALING_LINEAR) {
        char key[96];
        snprintf(key, sizeof key, "%s.rope.scaling.type", c->arch);
        AK_CHECK(ak__gguf_kv_string(c->w, key, "linear", 6));
        AK_CHECK(kv_arch_f32(c, "rope.scaling.factor", hp->rope_factor));
    }
    if (hp->rope_scaling == AK_ROPE_SCALING_LLAMA3) AK_CHECK(write_llama3_keys(c));
    if (hp->rope_scaling == AK_ROPE_SCALING_YARN) {
        char key[96];
        snprintf(key, sizeof key, "%s.rope.scaling.type", c->arch);
        AK_CHECK(ak__gguf_kv_string(c->w, key, "yarn", 4));
        AK_CHECK(kv_arch_f32(c, "rope.scaling.factor", hp->rope_factor));
        AK_CHECK(kv_arch_u32(c, "rope.scaling.original_context_length", (uint32_t)hp->rope_orig_context));
    }
    return AK_OK;
}

static ak_status kv_id(ak__gguf_writer *w, const char *key, int32_t id) {
    return id >= 0 ? ak__gguf_kv_u32(w, key, (uint32_t)id) : AK_OK;
}

/* tokenizer.ggml.tokens / token_type / scores (SPM) / merges (BPE). */
static ak_status write_vocab(ak__gguf_writer *w, const ak_tokenizer *t) {
    size_t n = (size_t)t->n_vocab;
    const char **s = malloc(n * sizeof *s);
    size_t *lens = malloc(n * sizeof *lens);
    int32_t *types = malloc(n * sizeof *types);
    ak_status st = AK_OK;
    if (!s || !lens || !types) st = AK_FAIL(AK_ERR_NO_MEMORY, "vocabulary");
    for (size_t i = 0; st == AK_OK && i < n; i++) {
        s[i] = ak__tok_text(t, (int32_t)i, &lens[i]);
        types[i] = t->types[i];
    }
    if (st == AK_OK) st = ak__gguf_kv_strings(w, "tokenizer.ggml.tokens", s, lens, n);
    if (st == AK_OK && (t->kind == AK_TOKENIZER_SPM || t->kind == AK_TOKENIZER_UGM))
        st = ak__gguf_kv_array(w, "tokenizer.ggml.scores", AK_GGUF_FLOAT32, t->scores, n);
    if (st == AK_OK) st = ak__gguf_kv_array(w, "tokenizer.ggml.token_type", AK_GGUF_INT32, types, n);
    free(s);
    free(lens);
    free(types);
    return st;
}

static ak_status write_merges(ak__gguf_writer *w, const ak_tokenizer *t) {
    const char **s = malloc((t->n_merges ? t->n_merges : 1) * sizeof *s);
    size_t *lens = malloc((t->n_merges ? t->n_merges : 1) * sizeof *lens);
    ak_status st = AK_OK;
    if (!s || !lens) st = AK_FAIL(AK_ERR_NO_MEMORY, "merges");
    for (size_t i = 0; st == AK_OK && i < t->n_merges; i++) s[i] = ak__tok_merge(t, i, &lens[i]);
    if (st == AK_OK) st = ak__gguf_kv_strings(w, "tokenizer.ggml.merges", s, lens, t->n_merges);
    free(s);
    free(lens);
    return st;
}

static ak_status write_specials(to_gguf *c);

/* A Unigram tokenizer.json as llama.cpp's `t5` vocabulary: its pipeline in those terms
 * (refused by name when it has none, before any file is written), then the pieces. */
static ak_status write_unigram(to_gguf *c) {
    ak__gguf_writer *w = c->w;
    const ak__ugm_form *f = &c->ugm;
    AK_CHECK(ak__gguf_kv_string(w, "tokenizer.ggml.model", "t5", 2));
    AK_CHECK(write_vocab(w, c->tok));
    AK_CHECK(ak__gguf_kv_bool(w, "tokenizer.ggml.add_space_prefix", f->add_space_prefix));
    AK_CHECK(ak__gguf_kv_bool(w, "tokenizer.ggml.remove_extra_whitespaces", f->remove_extra_ws));
    if (f->charsmap)
        AK_CHECK(ak__gguf_kv_array(w, "tokenizer.ggml.precompiled_charsmap", AK_GGUF_UINT8,
                                   f->charsmap, f->charsmap_len));
    return AK_OK;
}

static ak_status write_tokenizer(to_gguf *c) {
    const ak_tokenizer *t = c->tok;
    ak__gguf_writer *w = c->w;
    int spm = t->kind == AK_TOKENIZER_SPM;
    if (t->kind == AK_TOKENIZER_UGM) {
        AK_CHECK(write_unigram(c));
        return write_specials(c);
    }
    AK_CHECK(ak__gguf_kv_string(w, "tokenizer.ggml.model", spm ? "llama" : "gpt2", spm ? 5 : 4));
    /* llama.cpp knows a byte-level split only by name: one not in the table cannot be
     * written so that llama.cpp splits the same way */
    if (!spm && !t->pre_name)
        return AK_FAIL(AK_ERR_UNSUPPORTED, "the tokenizer's pre-tokenizer expressions (first: "
                       "'%.80s') match no tokenizer.ggml.pre type llama.cpp knows, so a GGUF "
                       "cannot carry them", ak__pretok_source(t->pre, 0));
    const char *pre = spm ? "default" : t->pre_name;
    AK_CHECK(ak__gguf_kv_string(w, "tokenizer.ggml.pre", pre, strlen(pre)));
    AK_CHECK(write_vocab(w, t));
    if (!spm) AK_CHECK(write_merges(w, t));
    if (spm) AK_CHECK(ak__gguf_kv_bool(w, "tokenizer.ggml.add_space_prefix", t->add_space_prefix));
    return write_specials(c);
}

/* The special ids and flags, and the chat template. */
static ak_status write_specials(to_gguf *c) {
    const ak_tokenizer *t = c->tok;
    ak__gguf_writer *w = c->w;
    AK_CHECK(kv_id(w, "tokenizer.ggml.bos_token_id", t->bos));
    AK_CHECK(kv_id(w, "tokenizer.ggml.eos_token_id", t->eos));
    AK_CHECK(kv_id(w, "tokenizer.ggml.unknown_token_id", t->unk));
    AK_CHECK(kv_id(w, "tokenizer.ggml.padding_token_id", t->pad));
    AK_CHECK(ak__gguf_kv_bool(w, "tokenizer.ggml.add_bos_token", t->add_bos));
    AK_CHECK(ak__gguf_kv_bool(w, "tokenizer.ggml.add_eos_token", t->add_eos));
    const char *tpl;
    AK_CHECK(ak__hf_chat_template(c->hf, &tpl));
    if (tpl) AK_CHECK(ak__gguf_kv_string(w, "tokenizer.chat_template", tpl, strlen(tpl)));
    return AK_OK;
}

/* ---- the file -------------------------------------------------------------------------- */

static ak_status sink(void *ctx, const void *data, size_t bytes) {
    return ak__gguf_write_data(ctx, data, bytes);
}

static ak_status write_file(to_gguf *c, const char *dst) {
    AK_CHECK(ak__gguf_writer_open(dst, 32, &c->w));
    AK_CHECK(write_general(c));
    AK_CHECK(write_hparams(c));
    AK_CHECK(write_tokenizer(c));
    for (size_t i = 0; i < c->plan.n; i++) {
        const ak__cv_tensor *t = &c->plan.t[i];
        AK_CHECK(ak__gguf_add_tensor(c->w, t->name, t->src.n_dims, t->src.dims, (uint32_t)t->dst_type));
    }
    for (size_t i = 0; i < c->plan.n; i++) {
        AK_LOG_INFO(AK_SUBSYS_LLM, "convert: %s (%s)", c->plan.t[i].name,
                    ak_wtype_name(c->plan.t[i].dst_type));
        AK_CHECK(ak__cv_stream(&c->plan.t[i], sink, c->w));
    }
    ak__gguf_writer *w = c->w;
    c->w = NULL;
    return ak__gguf_writer_close(w);
}

static ak_status open_source(to_gguf *c) {
    AK_CHECK(ak__hf_open(c->src, &c->hf));
    AK_CHECK(ak__hf_hparams(c->hf, &c->hp));
    AK_CHECK(ak__hf_tokenizer(c->hf, &c->tok));
    if (c->tok->kind == AK_TOKENIZER_UGM) AK_CHECK(ak__hf_unigram_form(c->src, &c->ugm));
    if (c->tok->n_vocab > c->hp.n_vocab)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "%s: tokenizer.json has %d tokens, more than the "
                       "model's vocab_size %d", c->src, c->tok->n_vocab, c->hp.n_vocab);
    if (!ak__hp_is_plain_llama(&c->hp) || strcmp(c->hp.arch, "qwen3") == 0)
        return AK_FAIL(AK_ERR_UNSUPPORTED, "%s: converting %s with these features is not "
                       "implemented (llama, qwen2, mistral without a sliding window)", c->src,
                       c->hp.arch);
    int qwen2 = strcmp(c->hp.arch, "qwen2") == 0;
    c->arch = qwen2 ? "qwen2" : "llama"; /* Mistral is GGUF `llama`, as in llama.cpp */
    c->permute = !qwen2;
    return AK_OK;
}

ak_status ak__convert_hf_to_gguf(const char *src, const char *dst, int has_type, ak_wtype type,
                                 ak__cv_preset preset) {
    to_gguf c;
    memset(&c, 0, sizeof c);
    c.src = src;
    c.has_type = has_type;
    c.type = type;
    c.preset = preset;
    ak_status st;
    AK_CHECK_GOTO(st, open_source(&c));
    AK_CHECK_GOTO(st, make_plan(&c));
    AK_CHECK_GOTO(st, write_file(&c, dst));
fail:
    ak__gguf_writer_abort(c.w);
    ak__cv_plan_free(&c.plan);
    free(c.rope_freqs);
    ak_tokenizer_free(c.tok);
    ak__ugm_form_free(&c.ugm);
    ak__hf_close(c.hf);
    return st;
}
