/* The int8 GEMM (kernels/kf_int8.h) on 256-bit vectors, two kernels from one body
 * (kernels/x86/i8gemm_vnni256.h):
 *
 * - AVX2: vpmaddubsw multiplies uint8 by int8 bytes and adds adjacent pairs into int16
 *   WITH SATURATION: 255·127 + 255·127 = 64770 does not fit, so the plain instruction
 *   gives wrong sums for ordinary weights (ONNX Runtime asks for 7-bit weights instead).
 *   Here each activation byte is split as a = a_lo + 128·a_hi with a_lo = a & 0x7f and
 *   a_hi = a >> 7. A pair of a_lo products is at most 2·127·128 = 32512 in magnitude and
 *   a pair of a_hi products at most 2·128 = 256, so neither vpmaddubsw saturates; vpmaddwd
 *   then widens each to int32 pair sums, with weight 1 for the low part and 128 for the
 *   high part. The result is exact — bit-identical to the reference — at two
 *   vpmaddubsw + two vpmaddwd per 32 products.
 * - AVX-VNNI (VEX vpdpbusd): the four products of a group go straight to int32 without
 *   intermediate saturation, exact in one instruction. */
#include <immintrin.h>

#include "kernels/dispatch.h"
#include "kernels/x86/i8gemm_x86.h"

/* ---- AVX2 ---- */
#define I8_TARGET __attribute__((target("avx2,fma")))
#define I8_NAME ak_u8s8_gemm__avx2
#define I8_TILE tile_avx2
#define I8_DOT(acc, a_lo, a_hi, a, b)                                                     \
    (acc) = _mm256_add_epi32(                                                             \
        (acc), _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16((a_lo), (b)), ones),  \
                                _mm256_madd_epi16(_mm256_maddubs_epi16((a_hi), (b)), c128)))
#include "kernels/x86/i8gemm_vnni256.h"
#undef I8_TARGET
#undef I8_NAME
#undef I8_TILE
#undef I8_DOT

/* ---- AVX-VNNI ---- */
#define I8_TARGET __attribute__((target("avx2,fma,avxvnni")))
#define I8_NAME ak_u8s8_gemm__avxvnni
#define I8_TILE tile_avxvnni
#define I8_DOT(acc, a_lo, a_hi, a, b) (acc) = _mm256_dpbusd_avx_epi32((acc), (a), (b))
#include "kernels/x86/i8gemm_vnni256.h"
#undef I8_TARGET
#undef I8_NAME
#undef I8_TILE
#undef I8_DOT
