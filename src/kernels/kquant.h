/* ggml's super-block weight types (k-quants Q2_K…Q6_K, Q8_K, IQ4_NL, IQ4_XS): block
 * layouts, the storage conversions and the Q8_K activation quantizer shared by the
 * linear-layer driver (linear.c), the scalar references (ref/kquant_ref.c) and the x86
 * kernels (x86/kquant_*.c).
 *
 * Every layout is byte for byte ggml's, so a GGUF tensor's data is used as stored. A
 * super-block holds 256 weights (IQ4_NL: a block of 32) and f16 scales; values in the
 * comments are w = the dequantized weight. */
#ifndef AK_KERNELS_KQUANT_H
#define AK_KERNELS_KQUANT_H

#include <stddef.h>
#include <stdint.h>

#include "accelkit/kernels.h"

#define AK__QK_K 256 /* weights per super-block */

/* Q2_K (84 bytes): 16 groups of 16; scales[g] = scale (low nibble) | min (high nibble);
 * w = d·sc·q − dmin·m, q ∈ 0..3 stored 2 bits apart in qs (see ak__q2_k_value). */
typedef struct ak__block_q2_k {
    uint8_t scales[16];
    uint8_t qs[64];
    uint16_t d, dmin;
} ak__block_q2_k;

/* Q3_K (110 bytes): 16 groups of 16 with 6-bit scales (stored +32, packed in 12 bytes);
 * w = d·(sc − 32)·(q − 4), q = 2 low bits in qs + the high bit in hmask. */
typedef struct ak__block_q3_k {
    uint8_t hmask[32];
    uint8_t qs[64];
    uint8_t scales[12];
    uint16_t d;
} ak__block_q3_k;

/* Q4_K (144 bytes): 8 groups of 32 with 6-bit scale and min (packed in 12 bytes);
 * w = d·sc·q − dmin·m, q ∈ 0..15; group 2i in the low nibbles of qs[32i..32i+32),
 * group 2i+1 in the high nibbles. */
typedef struct ak__block_q4_k {
    uint16_t d, dmin;
    uint8_t scales[12];
    uint8_t qs[128];
} ak__block_q4_k;

/* Q5_K (176 bytes): Q4_K plus a fifth bit per weight in qh (bit 2i of qh[l] for group
 * 2i, bit 2i+1 for group 2i+1). */
typedef struct ak__block_q5_k {
    uint16_t d, dmin;
    uint8_t scales[12];
    uint8_t qh[32];
    uint8_t qs[128];
} ak__block_q5_k;

/* Q6_K (210 bytes): 16 groups of 16 with int8 scales; w = d·sc·(q − 32), q ∈ 0..63:
 * 4 low bits in ql, 2 high bits in qh. */
typedef struct ak__block_q6_k {
    uint8_t ql[128];
    uint8_t qh[64];
    int8_t scales[16];
    uint16_t d;
} ak__block_q6_k;

/* Q8_K (292 bytes): f32 scale, 256 int8 values, and the sums of each 16 of them. */
typedef struct ak__block_q8_k {
    float d;
    int8_t qs[AK__QK_K];
    int16_t bsums[AK__QK_K / 16];
} ak__block_q8_k;

/* IQ4_NL (18 bytes, 32 weights): w = d·ak__iq4nl_values[nibble] (nibbles as Q4_0). */
typedef struct ak__block_iq4_nl {
    uint16_t d;
    uint8_t qs[16];
} ak__block_iq4_nl;

/* IQ4_XS (136 bytes): 8 groups of 32 with 6-bit scales (low 4 bits in scales_l, high 2
 * in scales_h, stored +32); w = d·(sc − 32)·ak__iq4nl_values[nibble]. */
typedef struct ak__block_iq4_xs {
    uint16_t d;
    uint16_t scales_h;
    uint8_t scales_l[4];
    uint8_t qs[128];
} ak__block_iq4_xs;

/* The 16 non-linear levels of IQ4_NL / IQ4_XS (ggml's kvalues_iq4nl). */
extern const int8_t ak__iq4nl_values[16];

/* Elements per block and bytes per block of a super-block type; 0 when `wtype` is not
 * one of them. */
int ak__kquant_block(ak_wtype wtype, size_t *elems, size_t *bytes);
/* 1 when the linear layer quantizes activations to Q8_K for `wtype` (IQ4_NL uses Q8_0). */
int ak__kquant_uses_q8_k(ak_wtype wtype);

/* Storage conversions of the super-block types (K a multiple of the block): quantize is
 * ggml's reference quantizer (quantize_row_*_ref / the IQ4 quantizers without an
 * importance matrix), bit for bit; dequantize is ggml's to_float, bit for bit. */
void ak__kquant_quantize_ref(ak_wtype wtype, const float *src, void *dst, size_t K);
void ak__kquant_dequantize_ref(ak_wtype wtype, const void *src, float *dst, size_t K);

/* One row of activations to Q8_K: d[K/256] scales, bsums[K/16] sums of 16 values,
 * q[K] values (ggml's quantize_row_q8_K). */
void ak_f32_quantize_q8_k__ref(const float *x, size_t K, float *d, int16_t *bsums, int8_t *q);

/* Unpacked 6-bit scales and mins of a Q4_K / Q5_K block (ggml's get_scale_min_k4). */
void ak__kquant_scales_k4(const uint8_t scales[12], uint8_t sc[8], uint8_t m[8]);
/* The 16 signed scales (−32..31) of a Q3_K block. */
void ak__kquant_scales_q3(const uint8_t scales[12], int8_t sc[16]);

#endif /* AK_KERNELS_KQUANT_H */
