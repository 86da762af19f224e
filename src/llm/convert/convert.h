/* Checkpoint conversion (ak_llm_convert): Hugging Face folder ↔ GGUF, internals shared by
 * convert.c (entry), to_gguf.c, to_hf.c and convert_common.c (tensor plans, row
 * conversion, q/k row permutation, Llama 3.1 RoPE factors). */
#ifndef AK_LLM_CONVERT_H
#define AK_LLM_CONVERT_H

#include <stddef.h>
#include <stdint.h>

#include "accelkit/llm.h"
#include "llm/base/hparams.h"
#include "llm/base/tensor_names.h"

/* What happens to the rows of a tensor on the way. GGUF `llama` stores q/k rows so that
 * RoPE rotates adjacent pairs; Hugging Face rotates halves. Within each head of hd rows,
 * HF row j·hd/2 + i is GGUF row 2i + j (llama.cpp's reshape(n_head, 2, hd/2, in)
 * .swapaxes(1, 2)). */
typedef enum ak__cv_rows {
    AK_CV_ROWS_SAME = 0,
    AK_CV_ROWS_TO_PAIRS = 1,  /* HF → GGUF llama */
    AK_CV_ROWS_TO_HALVES = 2  /* GGUF llama → HF */
} ak__cv_rows;

/* One output tensor: where its rows come from and what they become. */
typedef struct ak__cv_tensor {
    char name[96];          /* the output name */
    ak__tensor_view src;    /* rows = dims[1..], cols = dims[0] */
    ak_wtype dst_type;
    ak__cv_rows rows;
    int32_t head_dim;       /* for the row permutation */
} ak__cv_tensor;

typedef struct ak__cv_plan {
    ak__cv_tensor *t;
    size_t n, cap;
} ak__cv_plan;

ak_status ak__cv_plan_add(ak__cv_plan *p, const char *name, const ak__tensor_view *src,
                          ak_wtype dst_type, ak__cv_rows rows, int32_t head_dim);
void ak__cv_plan_free(ak__cv_plan *p);

/* The source row that output row `r` of a permuted tensor comes from. */
uint64_t ak__cv_src_row(ak__cv_rows mode, uint64_t r, uint32_t head_dim);

/* Bytes of the converted tensor. */
ak_status ak__cv_dst_bytes(const ak__cv_tensor *t, uint64_t *bytes);

/* Converts every row of `t` in output order and hands each to `sink`. */
typedef ak_status (*ak__cv_sink)(void *ctx, const void *data, size_t bytes);
ak_status ak__cv_stream(const ak__cv_tensor *t, ak__cv_sink sink, void *ctx);


/* Llama 3.1 RoPE frequency factors (head_dim/2 of them), as Meta's reference and
 * llama.cpp's converter compute them for rope_freqs.weight. */
void ak__cv_llama3_factors(const ak__llm_hparams *hp, float *factors);

/* llama.cpp's quantization presets (quant_mix.c): a base type and a per-tensor mix. */
typedef enum ak__cv_preset {
    AK_CV_PLAIN = 0, /* every matrix in one type */
    AK_CV_Q2_K, AK_CV_Q3_K_S, AK_CV_Q3_K_M, AK_CV_Q3_K_L, AK_CV_Q4_K_S, AK_CV_Q4_K_M,
    AK_CV_Q5_K_S, AK_CV_Q5_K_M, AK_CV_Q6_K, AK_CV_IQ4_NL, AK_CV_IQ4_XS
} ak__cv_preset;

/* Where a matrix sits, for the mix. */
typedef struct ak__cv_mix_ctx {
    ak__tensor_role role;
    int layer, n_layers, n_gqa; /* n_gqa = n_heads / n_kv_heads */
    int tied;                   /* the embedding is also the output */
    uint64_t row_len;           /* elements per row (dims[0]) */
} ak__cv_mix_ctx;

/* 1 and the preset and its base type when `text` names one ("q4_k_m", ...). */
int ak__cv_preset_parse(const char *text, ak__cv_preset *preset, ak_wtype *base);
/* llama.cpp's LLAMA_FTYPE_MOSTLY_* of a preset. */
uint32_t ak__cv_preset_file_type(ak__cv_preset preset);
/* The storage type llama.cpp's preset gives this matrix; *fell_back = 1 when its rows are
 * not whole blocks of that type and a fallback type was taken. */
ak_wtype ak__cv_preset_type(ak__cv_preset preset, ak_wtype base, const ak__cv_mix_ctx *m,
                            int *fell_back);

/* Parses "f32", "f16", "bf16", "q8_0", "q4_0" or a preset name (*preset, its base type
 * in *type); *has = 0 for NULL/"auto" (keep). */
ak_status ak__cv_parse_type(const char *text, int *has, ak_wtype *type, ak__cv_preset *preset);

/* GGUF general.file_type (llama.cpp's LlamaFileType) of a storage type. */
uint32_t ak__cv_file_type(ak_wtype t);

/* The two directions (convert.c chooses by what src is). */
ak_status ak__convert_hf_to_gguf(const char *src, const char *dst, int has_type, ak_wtype type,
                                 ak__cv_preset preset);
ak_status ak__convert_gguf_to_hf(const char *src, const char *dst, int has_type, ak_wtype type);

#endif /* AK_LLM_CONVERT_H */
