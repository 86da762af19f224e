/* Conversion pieces shared by both directions: tensor plans, row-by-row type conversion
 * with the q/k row permutation, output type names, Llama 3.1 RoPE factors. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "llm/convert/convert.h"

#define CHUNK_BYTES (1u << 20) /* rows are handed to the writer in chunks of about this */

ak_status ak__cv_plan_add(ak__cv_plan *p, const char *name, const ak__tensor_view *src,
                          ak_wtype dst_type, ak__cv_rows rows, int32_t head_dim) {
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 64;
        ak__cv_tensor *v = realloc(p->t, cap * sizeof *v);
        if (!v) return AK_FAIL(AK_ERR_NO_MEMORY, "conversion plan");
        p->t = v;
        p->cap = cap;
    }
    ak__cv_tensor *t = &p->t[p->n];
    memset(t, 0, sizeof *t);
    size_t len = strlen(name);
    if (len >= sizeof t->name) return AK_FAIL(AK_ERR_INVALID_ARG, "tensor name '%s' too long", name);
    memcpy(t->name, name, len + 1);
    t->src = *src;
    t->dst_type = dst_type;
    t->rows = rows;
    t->head_dim = head_dim;
    p->n++;
    return AK_OK;
}

void ak__cv_plan_free(ak__cv_plan *p) {
    free(p->t);
    memset(p, 0, sizeof *p);
}

uint64_t ak__cv_src_row(ak__cv_rows mode, uint64_t r, uint32_t head_dim) {
    if (mode == AK_CV_ROWS_SAME || head_dim < 2) return r;
    uint64_t half = head_dim / 2, base = r - r % head_dim, k = r % head_dim;
    switch (mode) {
    case AK_CV_ROWS_TO_PAIRS: return base + (k % 2) * half + k / 2;  /* GGUF 2i+j ← HF j·half+i */
    case AK_CV_ROWS_TO_HALVES: return base + 2 * (k % half) + k / half; /* HF j·half+i ← GGUF 2i+j */
    default: return r;
    }
}

static uint64_t n_rows(const ak__tensor_view *v) {
    uint64_t r = 1;
    for (uint32_t i = 1; i < v->n_dims; i++) r *= v->dims[i];
    return r;
}

ak_status ak__cv_dst_bytes(const ak__cv_tensor *t, uint64_t *bytes) {
    size_t row;
    AK_CHECK(ak_wtype_row_bytes(t->dst_type, (size_t)t->src.dims[0], &row));
    *bytes = row * n_rows(&t->src);
    return AK_OK;
}

/* The source must hold exactly its shape, and a permutation needs whole heads. */
static ak_status check_source(const ak__cv_tensor *t, size_t src_row, uint64_t rows) {
    if (t->src.bytes != src_row * rows)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "tensor for '%s' holds %llu bytes, its shape needs "
                       "%llu", t->name, (unsigned long long)t->src.bytes,
                       (unsigned long long)(src_row * rows));
    if (t->rows != AK_CV_ROWS_SAME && (t->head_dim < 2 || t->head_dim % 2 || rows % (uint64_t)t->head_dim))
        return AK_FAIL(AK_ERR_INVALID_MODEL, "tensor for '%s': %llu rows are not whole heads of %d",
                       t->name, (unsigned long long)rows, t->head_dim);
    return AK_OK;
}

typedef struct row_bufs {
    float *f32;
    unsigned char *src, *chunk;
} row_bufs;

/* One output row into `out`: copied when the type stays, else through f32. */
static ak_status convert_row(const ak__cv_tensor *t, const row_bufs *b, size_t K,
                             size_t src_bytes, const unsigned char *src, unsigned char *out) {
    if (t->src.type == t->dst_type) {
        memcpy(out, src, src_bytes);
        return AK_OK;
    }
    memcpy(b->src, src, src_bytes); /* the mapping may leave the row unaligned */
    AK_CHECK(ak_dequantize_row(t->src.type, b->src, b->f32, K));
    return ak_quantize_row(t->dst_type, b->f32, out, K);
}

ak_status ak__cv_stream(const ak__cv_tensor *t, ak__cv_sink sink, void *ctx) {
    size_t K = (size_t)t->src.dims[0], src_row, dst_row;
    uint64_t rows = n_rows(&t->src);
    AK_CHECK(ak_wtype_row_bytes(t->src.type, K, &src_row));
    AK_CHECK(ak_wtype_row_bytes(t->dst_type, K, &dst_row));
    AK_CHECK(check_source(t, src_row, rows));
    size_t per_chunk = dst_row >= CHUNK_BYTES ? 1 : CHUNK_BYTES / (dst_row ? dst_row : 1);
    row_bufs b = {malloc(K * sizeof(float) + 16), malloc(src_row + 16), malloc(per_chunk * dst_row + 16)};
    ak_status st = AK_OK;
    if (!b.f32 || !b.src || !b.chunk) st = AK_FAIL(AK_ERR_NO_MEMORY, "row buffers for '%s'", t->name);
    const unsigned char *data = t->src.data;
    for (uint64_t r = 0; st == AK_OK && r < rows;) {
        size_t k = 0;
        for (; st == AK_OK && k < per_chunk && r < rows; k++, r++) {
            uint64_t sr = ak__cv_src_row(t->rows, r, (uint32_t)t->head_dim);
            st = convert_row(t, &b, K, src_row, data + sr * src_row, b.chunk + k * dst_row);
        }
        if (st == AK_OK) st = sink(ctx, b.chunk, k * dst_row);
    }
    free(b.f32);
    free(b.src);
    free(b.chunk);
    return st;
}

ak_status ak__cv_parse_type(const char *text, int *has, ak_wtype *type, ak__cv_preset *preset) {
    static const struct {
        const char *name;
        ak_wtype type;
    } names[] = {{"f32", AK_WTYPE_F32}, {"f16", AK_WTYPE_F16}, {"bf16", AK_WTYPE_BF16},
                 {"q8_0", AK_WTYPE_Q8_0}, {"q4_0", AK_WTYPE_Q4_0}};
    *has = 0;
    *preset = AK_CV_PLAIN;
    if (!text || strcmp(text, "auto") == 0) return AK_OK;
    if (ak__cv_preset_parse(text, preset, type)) {
        *has = 1;
        return AK_OK;
    }
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(text, names[i].name) == 0) {
            *has = 1;
            *type = names[i].type;
            return AK_OK;
        }
    return AK_FAIL(AK_ERR_INVALID_ARG, "output type '%s' (f32, f16, bf16, q8_0, q4_0, q2_k, "
                   "q3_k_s, q3_k_m, q3_k_l, q4_k_s, q4_k_m, q5_k_s, q5_k_m, q6_k, iq4_nl, iq4_xs)",
                   text);
}

/* In float32 throughout, as the reference computes it with torch tensors. */
void ak__cv_llama3_factors(const ak__llm_hparams *hp, float *factors) {
    float L = (float)hp->rope_orig_context, lf = hp->rope_low_freq_factor;
    float hf = hp->rope_high_freq_factor, factor = hp->rope_factor;
    float low_wavelen = L / lf, high_wavelen = L / hf;
    for (int32_t i = 0; i < hp->head_dim / 2; i++) {
        float freq = 1.0f / powf(hp->rope_theta, (float)(2 * i) / (float)hp->head_dim);
        float wavelen = 2.0f * (float)M_PI / freq;
        if (wavelen < high_wavelen) {
            factors[i] = 1.0f;
        } else if (wavelen > low_wavelen) {
            factors[i] = factor;
        } else {
            float smooth = (L / wavelen - lf) / (hf - lf);
            factors[i] = 1.0f / ((1.0f - smooth) / factor + smooth);
        }
    }
}

uint32_t ak__cv_file_type(ak_wtype t) {
    switch (t) {
    case AK_WTYPE_F16: return 1;
    case AK_WTYPE_Q4_0: return 2;
    case AK_WTYPE_Q8_0: return 7;
    case AK_WTYPE_BF16: return 32;
    default: return 0;
    }
}
