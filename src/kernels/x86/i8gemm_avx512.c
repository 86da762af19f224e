/* The int8 GEMM (kernels/kf_int8.h) on AVX-512 VNNI: vpdpbusd multiplies the four uint8
 * activations of a k-group (broadcast) by the four int8 weights of each of 16 columns
 * and adds the four products to that column's int32 lane, without intermediate
 * saturation (unlike vpmaddubsw, and unlike vpdpbusds) — bit-identical to the reference.
 * Tiles of up to 8 rows × 2 panels (32 columns): 16 accumulators, two weight vectors. */
#include <immintrin.h>

#include "kernels/dispatch.h"
#include "kernels/x86/i8gemm_x86.h"

#define VNNI __attribute__((target("avx512f,avx512bw,avx512vnni")))
#define TILE_ROWS 8

/* One tile: mr rows (≤ 8) × np panels (1 or 2) starting at A and panel Bp0, ncols valid
 * columns. Inlined with constant mr and np, so the accumulators stay in registers. */
static inline __attribute__((always_inline)) VNNI void
tile(int mr, int np, size_t ncols, size_t K, size_t k4, const uint8_t *A, size_t lda,
     const int8_t *Bp0, int32_t *C, size_t ldc) {
    __m512i acc[TILE_ROWS][2];
    for (int r = 0; r < TILE_ROWS; r++) acc[r][0] = acc[r][1] = _mm512_setzero_si512();
    const size_t panel_stride = k4 * AK_KF_I8_NR * AK_KF_I8_KG;
    size_t full = K / AK_KF_I8_KG;
    for (size_t g = 0; g < k4; g++) {
        __m512i b0 = _mm512_loadu_si512(Bp0 + g * 64), b1 = b0;
        if (np > 1) b1 = _mm512_loadu_si512(Bp0 + panel_stride + g * 64);
#pragma GCC unroll 8
        for (int r = 0; r < mr; r++) {
            int32_t w;
            if (g < full) memcpy(&w, A + r * lda + g * AK_KF_I8_KG, 4);
            else w = ak__i8_a_word(A + r * lda, g, K);
            __m512i a = _mm512_set1_epi32(w);
            acc[r][0] = _mm512_dpbusd_epi32(acc[r][0], a, b0);
            if (np > 1) acc[r][1] = _mm512_dpbusd_epi32(acc[r][1], a, b1);
        }
    }
    __mmask16 m0 = ncols >= 16 ? 0xffff : (__mmask16)((1u << ncols) - 1);
    __mmask16 m1 = ncols >= 32 ? 0xffff : ncols > 16 ? (__mmask16)((1u << (ncols - 16)) - 1) : 0;
#pragma GCC unroll 8
    for (int r = 0; r < mr; r++) {
        _mm512_mask_storeu_epi32(C + r * ldc, m0, acc[r][0]);
        if (np > 1) _mm512_mask_storeu_epi32(C + r * ldc + 16, m1, acc[r][1]);
    }
}

#define TILE_CASE(R)                                                                      \
    case R:                                                                               \
        if (np > 1) tile(R, 2, ncols, K, k4, A, lda, Bp0, C, ldc);                        \
        else tile(R, 1, ncols, K, k4, A, lda, Bp0, C, ldc);                               \
        break;

static VNNI void tile_any(int mr, int np, size_t ncols, size_t K, size_t k4, const uint8_t *A,
                          size_t lda, const int8_t *Bp0, int32_t *C, size_t ldc) {
    switch (mr) {
        TILE_CASE(1) TILE_CASE(2) TILE_CASE(3) TILE_CASE(4)
        TILE_CASE(5) TILE_CASE(6) TILE_CASE(7) TILE_CASE(8)
    default: break;
    }
}

VNNI void ak_u8s8_gemm__avx512vnni(size_t M, size_t N, size_t K, const uint8_t *A, size_t lda,
                                   const int8_t *Bp, int32_t *C, size_t ldc) {
    size_t k4 = (K + AK_KF_I8_KG - 1) / AK_KF_I8_KG;
    size_t panels = (N + AK_KF_I8_NR - 1) / AK_KF_I8_NR;
    size_t panel_bytes = k4 * AK_KF_I8_NR * AK_KF_I8_KG, chunk = ak__i8_chunk_panels(K);
    for (size_t p0 = 0; p0 < panels; p0 += chunk) {
        size_t p1 = p0 + chunk < panels ? p0 + chunk : panels;
        for (size_t m = 0; m < M; m += TILE_ROWS) {
            int mr = (int)(M - m < TILE_ROWS ? M - m : TILE_ROWS);
            for (size_t p = p0; p < p1; p += 2) {
                int np = p + 1 < p1 ? 2 : 1;
                size_t n0 = p * AK_KF_I8_NR, ncols = N - n0 < 32 ? N - n0 : 32;
                tile_any(mr, np, ncols, K, k4, A + m * lda, lda, Bp + p * panel_bytes,
                         C + m * ldc + n0, ldc);
            }
        }
    }
}
