/* The per-tensor type mix of llama.cpp's quantization presets (llama_tensor_get_type of
 * llama-quant.cpp, for dense models): `ak convert --type q4_k_m` stores most matrices as
 * Q4_K but the output (and a tied embedding) as Q6_K and, by layer, some attn_v and
 * ffn_down matrices with more bits — the same choice llama.cpp makes, so the files match
 * in layout and size. Rows that are not whole super-blocks fall back as llama.cpp does,
 * except that Q5_0/Q5_1 (which accelkit does not store) become Q8_0. */
#include <string.h>

#include "llm/convert/convert.h"

static const struct {
    const char *name;
    ak__cv_preset preset;
    ak_wtype base;
    uint32_t ftype; /* llama.cpp's LLAMA_FTYPE_MOSTLY_* */
} presets[] = {
    {"q2_k", AK_CV_Q2_K, AK_WTYPE_Q2_K, 10},       {"q3_k_s", AK_CV_Q3_K_S, AK_WTYPE_Q3_K, 11},
    {"q3_k_m", AK_CV_Q3_K_M, AK_WTYPE_Q3_K, 12},   {"q3_k_l", AK_CV_Q3_K_L, AK_WTYPE_Q3_K, 13},
    {"q4_k_s", AK_CV_Q4_K_S, AK_WTYPE_Q4_K, 14},   {"q4_k_m", AK_CV_Q4_K_M, AK_WTYPE_Q4_K, 15},
    {"q5_k_s", AK_CV_Q5_K_S, AK_WTYPE_Q5_K, 16},   {"q5_k_m", AK_CV_Q5_K_M, AK_WTYPE_Q5_K, 17},
    {"q6_k", AK_CV_Q6_K, AK_WTYPE_Q6_K, 18},       {"iq4_nl", AK_CV_IQ4_NL, AK_WTYPE_IQ4_NL, 25},
    {"iq4_xs", AK_CV_IQ4_XS, AK_WTYPE_IQ4_XS, 30},
};

int ak__cv_preset_parse(const char *text, ak__cv_preset *preset, ak_wtype *base) {
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        if (strcmp(text, presets[i].name) == 0) {
            *preset = presets[i].preset;
            *base = presets[i].base;
            return 1;
        }
    return 0;
}

uint32_t ak__cv_preset_file_type(ak__cv_preset preset) {
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        if (presets[i].preset == preset) return presets[i].ftype;
    return 0;
}

/* llama.cpp's choice of spending more bits on a layer: the first and last eighth and
 * every third layer between. */
static int more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

/* The type of one matrix before the row-length fallback. */
static ak_wtype mixed(ak__cv_preset p, ak_wtype base, const ak__cv_mix_ctx *m) {
    if (m->role == AK_T_OUTPUT || (m->role == AK_T_TOK_EMBD && m->tied)) return AK_WTYPE_Q6_K;
    int i = m->layer, n = m->n_layers;
    switch (m->role) {
    case AK_T_V:
        if (p == AK_CV_Q2_K) return m->n_gqa >= 4 ? AK_WTYPE_Q4_K : AK_WTYPE_Q3_K;
        if (p == AK_CV_Q3_K_M) return i < 2 ? AK_WTYPE_Q5_K : AK_WTYPE_Q4_K;
        if (p == AK_CV_Q3_K_L) return AK_WTYPE_Q5_K;
        if ((p == AK_CV_IQ4_NL || p == AK_CV_IQ4_XS) && m->n_gqa >= 4) return AK_WTYPE_Q5_K;
        if ((p == AK_CV_Q4_K_M || p == AK_CV_Q5_K_M) && more_bits(i, n)) return AK_WTYPE_Q6_K;
        if (p == AK_CV_Q4_K_S && i < 4) return AK_WTYPE_Q5_K;
        return base;
    case AK_T_DOWN:
        if (p == AK_CV_Q2_K) return AK_WTYPE_Q3_K;
        if (p == AK_CV_Q3_K_M) return i < n / 16 ? AK_WTYPE_Q5_K : AK_WTYPE_Q4_K;
        if (p == AK_CV_Q3_K_L) return AK_WTYPE_Q5_K;
        if (p == AK_CV_Q4_K_M) return more_bits(i, n) ? AK_WTYPE_Q6_K : base;
        if (i < n / 8 && (p == AK_CV_IQ4_NL || p == AK_CV_IQ4_XS)) return AK_WTYPE_Q5_K;
        if (p == AK_CV_Q5_K_M && more_bits(i, n)) return AK_WTYPE_Q6_K;
        if (p == AK_CV_Q4_K_S && i < n / 8) return AK_WTYPE_Q5_K;
        return base;
    case AK_T_O:
        if (p == AK_CV_Q2_K) return AK_WTYPE_Q3_K;
        if (p == AK_CV_Q3_K_M) return AK_WTYPE_Q4_K;
        if (p == AK_CV_Q3_K_L) return AK_WTYPE_Q5_K;
        return base;
    default:
        return base;
    }
}

ak_wtype ak__cv_preset_type(ak__cv_preset preset, ak_wtype base, const ak__cv_mix_ctx *m,
                            int *fell_back) {
    ak_wtype t = mixed(preset, base, m);
    size_t bytes;
    *fell_back = 0;
    if (ak_wtype_row_bytes(t, (size_t)m->row_len, &bytes) == AK_OK) return t;
    /* llama.cpp: output-like tensors go to Q8_0; others to IQ4_NL (2/3-bit, IQ4_XS),
     * Q5_0 (Q4_K), Q5_1 (Q5_K) or Q8_0 (Q6_K) — Q5_0/Q5_1 here Q8_0; F16 when even
     * blocks of 32 do not fit */
    *fell_back = 1;
    if (m->role == AK_T_OUTPUT || (m->role == AK_T_TOK_EMBD && m->tied)) t = AK_WTYPE_Q8_0;
    else if (t == AK_WTYPE_Q2_K || t == AK_WTYPE_Q3_K || t == AK_WTYPE_IQ4_XS) t = AK_WTYPE_IQ4_NL;
    else t = AK_WTYPE_Q8_0;
    if (ak_wtype_row_bytes(t, (size_t)m->row_len, &bytes) != AK_OK) t = AK_WTYPE_F16;
    return t;
}
