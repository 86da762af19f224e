/* Loading a Llama-family model: GGUF files (llama.cpp's tensor names) here, Hugging Face
 * folders through llm/hf/ (model_hf.c); the public getters and freeing. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/check.h"
#include "llm/base/tensor_names.h"
#include "llm/gguf/gguf.h"
#include "llm/model/encoder.h"
#include "llm/model/model.h"
#include "llm/model/model_files.h"

/* Defined in model_hf.c: binds a Hugging Face folder. */
ak_status ak__model_load_hf(ak_llm_model *m, const char *dir);

static const double pi = 3.14159265358979323846;

static double llama3_scale(const ak__llm_hparams *hp, double freq) {
    double orig = hp->rope_orig_context > 0 ? hp->rope_orig_context : 8192;
    double low_wavelen = orig / hp->rope_low_freq_factor;
    double high_wavelen = orig / hp->rope_high_freq_factor;
    double wavelen = 2.0 * pi / freq;
    if (wavelen < high_wavelen) return freq;
    if (wavelen > low_wavelen) return freq / hp->rope_factor;
    double smooth = (orig / wavelen - hp->rope_low_freq_factor) /
                    (hp->rope_high_freq_factor - hp->rope_low_freq_factor);
    return (1.0 - smooth) * freq / hp->rope_factor + smooth * freq;
}

/* YaRN's dimension (pair index) where frequencies make n_rot rotations over the original
 * context: d·ln(ctx / (2π n_rot)) / (2 ln base). */
static double yarn_corr_dim(const ak__llm_hparams *hp, double n_rot) {
    return hp->head_dim * log(hp->rope_orig_context / (n_rot * 2.0 * pi)) / (2.0 * log(hp->rope_theta));
}

/* Pair i's frequency: the interpolated one (÷ factor) for slow pairs, the original for
 * fast ones, blended by a linear ramp between the two correction dimensions. */
static double yarn_scale(const ak__llm_hparams *hp, int i, double freq) {
    double low = floor(yarn_corr_dim(hp, hp->rope_yarn_beta_fast));
    double high = ceil(yarn_corr_dim(hp, hp->rope_yarn_beta_slow));
    if (low < 0) low = 0;
    if (high > hp->head_dim - 1) high = hp->head_dim - 1;
    double y = (i - low) / fmax(0.001, high - low);
    double extrapolate = 1.0 - fmin(1.0, fmax(0.0, y)); /* 1: keep the original */
    double interp = freq / hp->rope_factor;
    return interp * (1.0 - extrapolate) + freq * extrapolate;
}

ak_status ak__model_rope_init(ak_llm_model *m, const float *freq_factors) {
    const ak__llm_hparams *hp = &m->hp;
    int half = hp->head_dim / 2;
    float *f = malloc((size_t)half * sizeof *f);
    if (!f) return AK_FAIL(AK_ERR_NO_MEMORY, "model: out of memory");
    for (int i = 0; i < half; ++i) {
        double freq = pow((double)hp->rope_theta, -2.0 * i / hp->head_dim);
        if (hp->rope_scaling == AK_ROPE_SCALING_LINEAR) freq /= hp->rope_factor;
        else if (hp->rope_scaling == AK_ROPE_SCALING_LLAMA3) freq = llama3_scale(hp, freq);
        else if (hp->rope_scaling == AK_ROPE_SCALING_YARN) freq = yarn_scale(hp, i, freq);
        if (freq_factors) freq /= freq_factors[i];
        f[i] = (float)freq;
    }
    m->inv_freq = f;
    AK_CHECK(ak__model_own(m, f));
    if (hp->rope_theta_local <= 0) return AK_OK;
    /* the sliding layers of Gemma 3: their own base, no scaling */
    float *local = malloc((size_t)half * sizeof *local);
    if (!local) return AK_FAIL(AK_ERR_NO_MEMORY, "model: out of memory");
    for (int i = 0; i < half; ++i)
        local[i] = (float)pow((double)hp->rope_theta_local, -2.0 * i / hp->head_dim);
    m->inv_freq_local = local;
    return ak__model_own(m, local);
}

/* ---- GGUF ---------------------------------------------------------------------------- */

static ak_status gguf_lookup(void *ctx, const char *name, ak__tensor_view *out) {
    return ak__gguf_tensor_view(ctx, name, out);
}

static ak_status copy_template(ak_llm_model *m, const char *s, size_t len) {
    char *t = malloc(len + 1);
    if (!t) return AK_FAIL(AK_ERR_NO_MEMORY, "model: out of memory");
    memcpy(t, s, len);
    t[len] = '\0';
    m->chat_template = t;
    return AK_OK;
}

static ak_status load_gguf(ak_llm_model *m, const char *path, const ak_llm_load_options *o) {
    if (o->mmap)
        AK_CHECK(ak_gguf_open(path, &m->gguf));
    else
        AK_CHECK(ak__gguf_open_private(path, &m->gguf));
    const char *arch;
    size_t arch_len;
    int encoder = 0;
    if (ak_gguf_get_string(m->gguf, "general.architecture", &arch, &arch_len) == AK_OK &&
        arch_len < sizeof m->hp.arch) { /* embeddings: bert, nomic-bert (encoder_load.c) */
        ak__hp_init(&m->hp);
        memcpy(m->hp.arch, arch, arch_len);
        encoder = ak__encoder_arch(m->hp.arch);
    }
    if (encoder) AK_CHECK(ak__encoder_load_gguf(m));
    else AK_CHECK(ak__gguf_hparams(m->gguf, &m->hp));
    AK_CHECK(ak_tokenizer_from_gguf(m->gguf, &m->tokenizer));
    ak_tokenizer_info ti;
    AK_CHECK(ak_tokenizer_get_info(m->tokenizer, &ti));
    if (ti.n_vocab != m->hp.n_vocab)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "model: the vocabulary has %d tokens but the model "
                       "%d", ti.n_vocab, m->hp.n_vocab);
    const char *tmpl;
    size_t len;
    if (ak_gguf_get_string(m->gguf, "tokenizer.chat_template", &tmpl, &len) == AK_OK)
        AK_CHECK(copy_template(m, tmpl, len));
    if (encoder) return AK_OK;
    ak__tensor_source src = {m->gguf, gguf_lookup, ak__tensor_name_gguf, NULL};
    return ak__model_bind(m, &src);
}

void ak_llm_load_options_default(ak_llm_load_options *o) {
    if (o) *o = (ak_llm_load_options){.mmap = 0};
}

ak_status ak_llm_model_load(const char *path, ak_llm_model **out) {
    ak_llm_load_options o;
    ak_llm_load_options_default(&o);
    return ak_llm_model_load_with(path, &o, out);
}

ak_status ak_llm_model_load_with(const char *path, const ak_llm_load_options *o,
                                 ak_llm_model **out) {
    AK_ARG_CHECK(path != NULL && out != NULL && o != NULL, "path, options or out is NULL");
    *out = NULL;
    struct stat sb;
    if (stat(path, &sb) != 0) return AK_FAIL(AK_ERR_IO, "model: cannot open '%s'", path);
    ak_llm_model *m = calloc(1, sizeof *m);
    if (!m) return AK_FAIL(AK_ERR_NO_MEMORY, "model: out of memory");
    ak_status st = S_ISDIR(sb.st_mode) ? ak__model_load_hf(m, path) : load_gguf(m, path, o);
    if (st != AK_OK) {
        ak_llm_model_free(m);
        return st;
    }
    *out = m;
    return AK_OK;
}

/* Defined in model_hf.c. */
void ak__model_close_hf(ak_llm_model *m);

ak_status ak_llm_model_free(ak_llm_model *m) {
    if (!m) return AK_OK;
    for (size_t i = 0; i < m->n_owned; ++i) free(m->owned[i]);
    free(m->owned);
    free(m->layers);
    free((char *)m->chat_template);
    if (m->tokenizer) ak_tokenizer_free(m->tokenizer);
    if (m->gguf) ak_gguf_close(m->gguf);
    ak__model_close_hf(m);
    free(m);
    return AK_OK;
}

ak_status ak_llm_model_get_info(const ak_llm_model *m, ak_llm_model_info *info) {
    AK_ARG_CHECK(m != NULL && info != NULL, "model or info is NULL");
    const ak__llm_hparams *hp = &m->hp;
    memset(info, 0, sizeof *info);
    snprintf(info->arch, sizeof info->arch, "%s", hp->arch);
    info->n_vocab = hp->n_vocab;
    info->dim = hp->dim;
    info->n_layers = hp->n_layers;
    info->n_heads = hp->n_heads;
    info->n_kv_heads = hp->n_kv_heads;
    info->head_dim = hp->head_dim;
    info->ffn_dim = hp->ffn_dim;
    info->max_context = hp->max_context;
    info->rope_theta = hp->rope_theta;
    info->norm_eps = hp->norm_eps;
    /* an MoE layer has no dense FFN: its attention's type stands for the model's */
    info->weight_type = (uint32_t)(m->enc ? m->enc->layers[0].w_up.type
                                   : hp->n_experts > 0 || hp->plain_mlp ? m->layers[0].wq.type
                                                                        : m->layers[0].w_gate.type);
    info->embedding_only = m->enc != NULL;
    if (ak_llm_model_embed_pooling(m, &info->pooling) != AK_OK) { /* text still works */
        info->pooling = -1;
        ak_clear_error();
    }
    info->n_params = m->n_params;
    info->weight_bytes = m->weight_bytes;
    return AK_OK;
}

ak_status ak_llm_model_tokenizer(const ak_llm_model *m, const ak_tokenizer **out) {
    AK_ARG_CHECK(m != NULL && out != NULL, "model or out is NULL");
    *out = m->tokenizer;
    return AK_OK;
}

ak_status ak_llm_model_chat_template(const ak_llm_model *m, const char **text) {
    AK_ARG_CHECK(m != NULL && text != NULL, "model or text is NULL");
    *text = m->chat_template;
    return AK_OK;
}
