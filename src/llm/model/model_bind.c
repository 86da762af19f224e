/* Binding a model's tensors: every matrix and vector the forward pass reads is looked up
 * by role, checked against the shape the hyper-parameters imply and the storage types
 * the kernels support, and either used in place (mmap) or copied to f32 (vectors, and
 * matrices whose data is not aligned for its element type). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "llm/model/model.h"

ak_status ak__model_own(ak_llm_model *m, float *p) {
    float **grown = realloc(m->owned, (m->n_owned + 1) * sizeof *grown);
    if (!grown) {
        free(p);
        return AK_FAIL(AK_ERR_NO_MEMORY, "model: out of memory");
    }
    m->owned = grown;
    m->owned[m->n_owned++] = p;
    return AK_OK;
}

static ak_status lookup(const ak__tensor_source *src, ak__tensor_role role, int layer,
                        ak__tensor_view *v, char *name, size_t cap) {
    src->name_of(role, layer, name, cap);
    ak_status st = src->lookup(src->ctx, name, v);
    if (st == AK_ERR_INVALID_ARG)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "model: tensor '%s' is missing", name);
    return st;
}

static ak_status check_dims(const char *name, const ak__tensor_view *v, uint32_t n_dims,
                            uint64_t d0, uint64_t d1) {
    uint64_t want[2] = {d0, d1};
    int ok = v->n_dims == n_dims;
    for (uint32_t i = 0; ok && i < n_dims; ++i) ok = v->dims[i] == want[i];
    if (!ok)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "model: tensor '%s' has shape [%llu, %llu] (%u dims), "
                       "expected [%llu, %llu] from the hyper-parameters", name,
                       (unsigned long long)v->dims[0], (unsigned long long)(v->n_dims > 1 ? v->dims[1] : 1),
                       v->n_dims, (unsigned long long)d0, (unsigned long long)(n_dims > 1 ? d1 : 1));
    return AK_OK;
}

static size_t elem_align(ak_wtype t) {
    return t == AK_WTYPE_F32 ? 4 : (t == AK_WTYPE_F16 || t == AK_WTYPE_BF16) ? 2 : 1;
}

/* A rows × cols matrix from the view of tensor `name` (checked 2-D already, or a slice). */
static ak_status use_matrix(ak_llm_model *m, const char *name, ak__tensor_view v, int64_t rows,
                            int64_t cols, ak__matrix *out) {
    size_t row_bytes;
    if (ak_wtype_row_bytes(v.type, (size_t)cols, &row_bytes) != AK_OK)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "model: tensor '%s': %lld columns do not fit %s "
                       "blocks", name, (long long)cols, ak_wtype_name(v.type));
    if (v.bytes != row_bytes * (uint64_t)rows)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "model: tensor '%s' holds %llu bytes, its shape "
                       "needs %llu", name, (unsigned long long)v.bytes,
                       (unsigned long long)(row_bytes * (uint64_t)rows));
    out->type = v.type;
    out->data = v.data;
    out->rows = rows;
    out->cols = cols;
    out->row_bytes = row_bytes;
    if ((uintptr_t)v.data % elem_align(v.type) != 0) { /* safetensors need not align */
        float *copy = malloc(v.bytes + 4);
        if (!copy) return AK_FAIL(AK_ERR_NO_MEMORY, "model: out of memory copying '%s'", name);
        memcpy(copy, v.data, v.bytes);
        AK_CHECK(ak__model_own(m, copy));
        out->data = copy;
    }
    m->n_params += (uint64_t)rows * (uint64_t)cols;
    return AK_OK;
}

static ak_status bind_matrix(ak_llm_model *m, const ak__tensor_source *src, ak__tensor_role role,
                             int layer, int64_t rows, int64_t cols, ak__matrix *out) {
    char name[128];
    ak__tensor_view v;
    AK_CHECK(lookup(src, role, layer, &v, name, sizeof name));
    AK_CHECK(check_dims(name, &v, 2, (uint64_t)cols, (uint64_t)rows));
    return use_matrix(m, name, v, rows, cols, out);
}

static ak_status bind_vector(ak_llm_model *m, const ak__tensor_source *src, ak__tensor_role role,
                             int layer, int64_t n, const float **out);

/* n_experts matrices of rows × cols for `role`: slices of GGUF's 3-D tensor
 * [n_experts][rows][cols], or HF's one matrix per expert. */
static ak_status bind_experts(ak_llm_model *m, const ak__tensor_source *src, ak__tensor_role role,
                              int layer, int64_t rows, int64_t cols, ak__matrix **out) {
    int32_t n = m->hp.n_experts;
    ak__matrix *e = calloc((size_t)n, sizeof *e);
    if (!e) return AK_FAIL(AK_ERR_NO_MEMORY, "model: out of memory for experts");
    AK_CHECK(ak__model_own(m, (float *)(void *)e)); /* freed with the model like the vectors */
    *out = e;
    char name[128];
    ak__tensor_view v;
    if (src->expert_name_of) {
        for (int32_t x = 0; x < n; ++x) {
            src->expert_name_of(role, layer, x, name, sizeof name);
            ak_status st = src->lookup(src->ctx, name, &v);
            if (st == AK_ERR_INVALID_ARG)
                return AK_FAIL(AK_ERR_INVALID_MODEL, "model: tensor '%s' is missing", name);
            AK_CHECK(st);
            AK_CHECK(check_dims(name, &v, 2, (uint64_t)cols, (uint64_t)rows));
            AK_CHECK(use_matrix(m, name, v, rows, cols, &e[x]));
        }
        return AK_OK;
    }
    AK_CHECK(lookup(src, role, layer, &v, name, sizeof name));
    if (v.n_dims != 3 || v.dims[0] != (uint64_t)cols || v.dims[1] != (uint64_t)rows ||
        v.dims[2] != (uint64_t)n)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "model: tensor '%s' has shape [%llu, %llu, %llu] "
                       "(%u dims), expected [%lld, %lld, %d]", name,
                       (unsigned long long)v.dims[0], (unsigned long long)v.dims[1],
                       (unsigned long long)v.dims[2], v.n_dims, (long long)cols,
                       (long long)rows, n);
    if (v.bytes % (uint64_t)n != 0)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "model: tensor '%s' does not split into %d experts",
                       name, n);
    uint64_t each = v.bytes / (uint64_t)n;
    for (int32_t x = 0; x < n; ++x) {
        ak__tensor_view s = v;
        s.n_dims = 2;
        s.data = (const char *)v.data + (uint64_t)x * each;
        s.bytes = each;
        AK_CHECK(use_matrix(m, name, s, rows, cols, &e[x]));
    }
    return AK_OK;
}

/* The router, the experts and (Qwen2-MoE) the shared expert of layer i. */
static ak_status bind_moe(ak_llm_model *m, const ak__tensor_source *src, int i) {
    const ak__llm_hparams *hp = &m->hp;
    ak__layer *l = &m->layers[i];
    int64_t F = hp->expert_ffn_dim;
    AK_CHECK(bind_matrix(m, src, AK_T_GATE_INP, i, hp->n_experts, hp->dim, &l->router));
    AK_CHECK(bind_experts(m, src, AK_T_GATE_EXPS, i, F, hp->dim, &l->exp_gate));
    AK_CHECK(bind_experts(m, src, AK_T_UP_EXPS, i, F, hp->dim, &l->exp_up));
    AK_CHECK(bind_experts(m, src, AK_T_DOWN_EXPS, i, hp->dim, F, &l->exp_down));
    if (hp->shared_ffn_dim == 0) return AK_OK;
    int64_t S = hp->shared_ffn_dim;
    AK_CHECK(bind_matrix(m, src, AK_T_GATE_SHEXP, i, S, hp->dim, &l->sh_gate));
    AK_CHECK(bind_matrix(m, src, AK_T_UP_SHEXP, i, S, hp->dim, &l->sh_up));
    AK_CHECK(bind_matrix(m, src, AK_T_DOWN_SHEXP, i, hp->dim, S, &l->sh_down));
    /* GGUF: a [dim] vector; HF: a [1, dim] matrix */
    ak__matrix row;
    char name[128];
    ak__tensor_view v;
    AK_CHECK(lookup(src, AK_T_GATE_INP_SHEXP, i, &v, name, sizeof name));
    if (v.n_dims == 1) return bind_vector(m, src, AK_T_GATE_INP_SHEXP, i, hp->dim, &l->sh_gate_inp);
    AK_CHECK(bind_matrix(m, src, AK_T_GATE_INP_SHEXP, i, 1, hp->dim, &row));
    float *f = malloc((size_t)hp->dim * sizeof *f);
    if (!f) return AK_FAIL(AK_ERR_NO_MEMORY, "model: out of memory");
    ak_status st = ak_dequantize_row(row.type, row.data, f, (size_t)hp->dim);
    if (st != AK_OK) {
        free(f);
        return st;
    }
    AK_CHECK(ak__model_own(m, f));
    l->sh_gate_inp = f;
    return AK_OK;
}

static int is_norm(ak__tensor_role role) {
    switch (role) {
    case AK_T_OUTPUT_NORM: case AK_T_ATTN_NORM: case AK_T_FFN_NORM: case AK_T_ATTN_POST_NORM:
    case AK_T_FFN_POST_NORM: case AK_T_Q_NORM: case AK_T_K_NORM:
        return 1;
    default:
        return 0;
    }
}

/* A 1-D tensor of n values as owned f32 (any storage type); HF Gemma's norm weights
 * (stored as w − 1) get their 1 back. */
static ak_status bind_vector(ak_llm_model *m, const ak__tensor_source *src, ak__tensor_role role,
                             int layer, int64_t n, const float **out) {
    char name[128];
    ak__tensor_view v;
    AK_CHECK(lookup(src, role, layer, &v, name, sizeof name));
    AK_CHECK(check_dims(name, &v, 1, (uint64_t)n, 1));
    size_t bytes;
    if (ak_wtype_row_bytes(v.type, (size_t)n, &bytes) != AK_OK || bytes != v.bytes)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "model: vector '%s' of %lld %s values has %llu "
                       "bytes", name, (long long)n, ak_wtype_name(v.type),
                       (unsigned long long)v.bytes);
    float *f = malloc((size_t)n * sizeof *f);
    void *aligned = malloc(bytes);
    if (!f || !aligned) {
        free(f);
        free(aligned);
        return AK_FAIL(AK_ERR_NO_MEMORY, "model: out of memory for '%s'", name);
    }
    memcpy(aligned, v.data, bytes);
    ak_status st = ak_dequantize_row(v.type, aligned, f, (size_t)n);
    free(aligned);
    if (st != AK_OK) {
        free(f);
        return st;
    }
    if (m->hp.norm_plus_one && is_norm(role))
        for (int64_t i = 0; i < n; ++i) f[i] += 1.0f;
    AK_CHECK(ak__model_own(m, f));
    *out = f;
    m->n_params += (uint64_t)n;
    return AK_OK;
}

/* Rows [first, first + rows) of a bound matrix, in place. */
static ak__matrix row_slice(const ak__matrix *w, int64_t first, int64_t rows) {
    ak__matrix s = *w;
    s.data = (const char *)w->data + (size_t)first * w->row_bytes;
    s.rows = rows;
    return s;
}

/* Phi-3: q, k, v as row ranges of one matrix. */
static ak_status bind_fused_qkv(ak_llm_model *m, const ak__tensor_source *src, int i) {
    const ak__llm_hparams *hp = &m->hp;
    ak__layer *l = &m->layers[i];
    int64_t q = (int64_t)hp->n_heads * hp->head_dim, kv = (int64_t)hp->n_kv_heads * hp->head_dim;
    ak__matrix all;
    AK_CHECK(bind_matrix(m, src, AK_T_QKV, i, q + 2 * kv, hp->dim, &all));
    l->wq = row_slice(&all, 0, q);
    l->wk = row_slice(&all, q, kv);
    l->wv = row_slice(&all, q + kv, kv);
    return AK_OK;
}

static ak_status bind_layer(ak_llm_model *m, const ak__tensor_source *src, int i) {
    const ak__llm_hparams *hp = &m->hp;
    ak__layer *l = &m->layers[i];
    int64_t q_dim = (int64_t)hp->n_heads * hp->head_dim, kv_dim = (int64_t)hp->n_kv_heads * hp->head_dim;
    if (!hp->no_pre_norms) AK_CHECK(bind_vector(m, src, AK_T_ATTN_NORM, i, hp->dim, &l->attn_norm));
    if (hp->layer_norm) {
        AK_CHECK(bind_vector(m, src, AK_T_ATTN_NORM_B, i, hp->dim, &l->attn_norm_b));
        AK_CHECK(bind_vector(m, src, AK_T_FFN_NORM_B, i, hp->dim, &l->ffn_norm_b));
    }
    if (hp->out_bias) AK_CHECK(bind_vector(m, src, AK_T_BO, i, hp->dim, &l->bo));
    if (hp->fused_qkv) {
        AK_CHECK(bind_fused_qkv(m, src, i));
    } else {
        AK_CHECK(bind_matrix(m, src, AK_T_Q, i, q_dim, hp->dim, &l->wq));
        AK_CHECK(bind_matrix(m, src, AK_T_K, i, kv_dim, hp->dim, &l->wk));
        AK_CHECK(bind_matrix(m, src, AK_T_V, i, kv_dim, hp->dim, &l->wv));
    }
    AK_CHECK(bind_matrix(m, src, AK_T_O, i, hp->dim, q_dim, &l->wo));
    if (hp->qkv_bias) {
        AK_CHECK(bind_vector(m, src, AK_T_BQ, i, q_dim, &l->bq));
        AK_CHECK(bind_vector(m, src, AK_T_BK, i, kv_dim, &l->bk));
        AK_CHECK(bind_vector(m, src, AK_T_BV, i, kv_dim, &l->bv));
    }
    if (hp->qk_norm) { /* per head, or (2) over the whole projection */
        AK_CHECK(bind_vector(m, src, AK_T_Q_NORM, i, hp->qk_norm == 2 ? q_dim : hp->head_dim,
                             &l->q_norm));
        AK_CHECK(bind_vector(m, src, AK_T_K_NORM, i, hp->qk_norm == 2 ? kv_dim : hp->head_dim,
                             &l->k_norm));
    }
    if (hp->post_norms) {
        AK_CHECK(bind_vector(m, src, AK_T_ATTN_POST_NORM, i, hp->dim, &l->attn_post_norm));
        AK_CHECK(bind_vector(m, src, AK_T_FFN_POST_NORM, i, hp->dim, &l->ffn_post_norm));
    }
    if (!hp->no_pre_norms) AK_CHECK(bind_vector(m, src, AK_T_FFN_NORM, i, hp->dim, &l->ffn_norm));
    if (hp->n_experts > 0) return bind_moe(m, src, i);
    if (hp->plain_mlp) { /* StarCoder2: up → GELU → down, both with biases */
        AK_CHECK(bind_matrix(m, src, AK_T_UP, i, hp->ffn_dim, hp->dim, &l->w_up));
        AK_CHECK(bind_vector(m, src, AK_T_B_UP, i, hp->ffn_dim, &l->b_up));
        AK_CHECK(bind_matrix(m, src, AK_T_DOWN, i, hp->dim, hp->ffn_dim, &l->w_down));
        return bind_vector(m, src, AK_T_B_DOWN, i, hp->dim, &l->b_down);
    }
    if (hp->fused_gate_up) { /* Phi-3: gate rows, then up rows */
        ak__matrix both;
        AK_CHECK(bind_matrix(m, src, AK_T_GATE_UP, i, 2 * (int64_t)hp->ffn_dim, hp->dim, &both));
        l->w_gate = row_slice(&both, 0, hp->ffn_dim);
        l->w_up = row_slice(&both, hp->ffn_dim, hp->ffn_dim);
        return bind_matrix(m, src, AK_T_DOWN, i, hp->dim, hp->ffn_dim, &l->w_down);
    }
    AK_CHECK(bind_matrix(m, src, AK_T_GATE, i, hp->ffn_dim, hp->dim, &l->w_gate));
    AK_CHECK(bind_matrix(m, src, AK_T_UP, i, hp->ffn_dim, hp->dim, &l->w_up));
    AK_CHECK(bind_matrix(m, src, AK_T_DOWN, i, hp->dim, hp->ffn_dim, &l->w_down));
    return AK_OK;
}

static uint64_t matrix_bytes(const ak__matrix *w) { return w->row_bytes * (uint64_t)w->rows; }

static uint64_t moe_bytes(const ak__llm_hparams *hp, const ak__layer *l) {
    uint64_t b = matrix_bytes(&l->router) + matrix_bytes(&l->sh_gate) + matrix_bytes(&l->sh_up) +
                 matrix_bytes(&l->sh_down);
    for (int32_t x = 0; x < hp->n_experts; ++x)
        b += matrix_bytes(&l->exp_gate[x]) + matrix_bytes(&l->exp_up[x]) +
             matrix_bytes(&l->exp_down[x]);
    return b;
}

static void count_weight_bytes(ak_llm_model *m) {
    uint64_t b = matrix_bytes(&m->output);
    for (int i = 0; i < m->hp.n_layers; ++i) {
        const ak__layer *l = &m->layers[i];
        b += matrix_bytes(&l->wq) + matrix_bytes(&l->wk) + matrix_bytes(&l->wv) +
             matrix_bytes(&l->wo) + matrix_bytes(&l->w_gate) + matrix_bytes(&l->w_up) +
             matrix_bytes(&l->w_down);
        if (m->hp.n_experts > 0) b += moe_bytes(&m->hp, l);
    }
    m->weight_bytes = b;
}

static ak_status bind_rope(ak_llm_model *m, const ak__tensor_source *src) {
    char name[128];
    ak__tensor_view v;
    if (m->hp.rope_scaling == AK_ROPE_SCALING_LONGROPE) {
        if (m->hp.n_rope_factors > 0) return ak__model_rope_init(m, m->hp.rope_factors);
        /* GGUF phi3: the short factors as a tensor (the long ones serve contexts beyond
         * the original length, which the engine does not offer) */
        int half = m->hp.head_dim / 2;
        if (src->lookup(src->ctx, "rope_factors_short.weight", &v) != AK_OK || v.n_dims != 1 ||
            v.dims[0] != (uint64_t)half || v.type != AK_WTYPE_F32)
            return AK_FAIL(AK_ERR_INVALID_MODEL, "model: longrope needs an f32 "
                           "rope_factors_short.weight of %d values", half);
        memcpy(m->hp.rope_factors, v.data, (size_t)half * sizeof(float));
        m->hp.n_rope_factors = half;
        return ak__model_rope_init(m, m->hp.rope_factors);
    }
    src->name_of(AK_T_ROPE_FREQS, 0, name, sizeof name);
    if (name[0] == '\0' || src->lookup(src->ctx, name, &v) != AK_OK)
        return ak__model_rope_init(m, NULL);
    const float *factors;
    AK_CHECK(bind_vector(m, src, AK_T_ROPE_FREQS, 0, m->hp.head_dim / 2, &factors));
    m->n_params -= (uint64_t)(m->hp.head_dim / 2); /* not a parameter */
    return ak__model_rope_init(m, factors);
}

ak_status ak__model_bind(ak_llm_model *m, const ak__tensor_source *src) {
    const ak__llm_hparams *hp = &m->hp;
    m->layers = calloc((size_t)hp->n_layers, sizeof *m->layers);
    if (!m->layers) return AK_FAIL(AK_ERR_NO_MEMORY, "model: out of memory for layers");
    AK_CHECK(bind_matrix(m, src, AK_T_TOK_EMBD, 0, hp->n_vocab, hp->dim, &m->tok_embd));
    if (hp->tied_output) m->output = m->tok_embd;
    else AK_CHECK(bind_matrix(m, src, AK_T_OUTPUT, 0, hp->n_vocab, hp->dim, &m->output));
    AK_CHECK(bind_vector(m, src, AK_T_OUTPUT_NORM, 0, hp->dim, &m->output_norm));
    if (hp->layer_norm)
        AK_CHECK(bind_vector(m, src, AK_T_OUTPUT_NORM_B, 0, hp->dim, &m->output_norm_b));
    for (int i = 0; i < hp->n_layers; ++i) AK_CHECK(bind_layer(m, src, i));
    AK_CHECK(bind_rope(m, src));
    count_weight_bytes(m);
    return AK_OK;
}
