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

/* ---- the channel-major product with the fused epilogue (ak__kf_u8s8_conv) ----------------
 * Tiles of up to 6 output channels × 4 vectors of 16 pixels: 24 accumulators, four pixel
 * vectors loaded per k-group, each channel's four weights broadcast from memory. The
 * epilogue runs on the accumulators: the same float32 operations as the reference
 * (convert, multiply, round to nearest even, add the zero point, clamp with NaN sent to
 * the low bound by vmaxps's second-operand rule), then a truncating byte store. */
#define CONV_ROWS 6
#define CONV_VECS 4

static inline __attribute__((always_inline)) VNNI void
conv_finish(const ak__i8_epilogue *e, size_t m, size_t p, __mmask16 mask, __m512i acc) {
    __m512i v = _mm512_add_epi32(acc, _mm512_set1_epi32(e->row_bias[m]));
    if (e->row_zp)
        v = _mm512_sub_epi32(v, _mm512_mullo_epi32(_mm512_set1_epi32(e->row_zp[m]),
                                                   _mm512_maskz_loadu_epi32(mask, e->col_sum + p)));
    size_t at = m * e->ldo + p;
    if (e->kind == AK_I8_OUT_I32) {
        _mm512_mask_storeu_epi32((int32_t *)e->out + at, mask, v);
        return;
    }
    int is_signed = e->kind == AK_I8_OUT_S8;
    __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(v), _mm512_set1_ps(e->row_mult[m]));
    f = _mm512_roundscale_ps(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    f = _mm512_add_ps(f, _mm512_set1_ps((float)e->out_zp));
    f = _mm512_max_ps(f, _mm512_set1_ps(is_signed ? -128.0f : 0.0f)); /* NaN: the bound */
    f = _mm512_min_ps(f, _mm512_set1_ps(is_signed ? 127.0f : 255.0f));
    __m512i y = _mm512_cvtps_epi32(f);
    if (e->relu) y = _mm512_max_epi32(y, _mm512_set1_epi32(e->out_zp));
    _mm512_mask_cvtepi32_storeu_epi8((uint8_t *)e->out + at, mask, y);
}

static inline __attribute__((always_inline)) VNNI void
conv_tile(int mr, int nv, size_t k4, const int8_t *W, size_t ldw, const uint8_t *X,
          size_t ldx, size_t m0, size_t p0, size_t P, const ak__i8_epilogue *e) {
    __m512i acc[CONV_ROWS][CONV_VECS];
    for (int r = 0; r < CONV_ROWS; r++)
        for (int v = 0; v < CONV_VECS; v++) acc[r][v] = _mm512_setzero_si512();
    const uint8_t *x = X + p0 * AK_KF_I8_KG;
    for (size_t g = 0; g < k4; g++, x += ldx) {
        __m512i xv[CONV_VECS];
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++) xv[v] = _mm512_loadu_si512(x + v * 64);
#pragma GCC unroll 6
        for (int r = 0; r < mr; r++) {
            int32_t w;
            memcpy(&w, W + r * ldw + g * AK_KF_I8_KG, 4);
            __m512i wb = _mm512_set1_epi32(w);
#pragma GCC unroll 4
            for (int v = 0; v < nv; v++) acc[r][v] = _mm512_dpbusd_epi32(acc[r][v], xv[v], wb);
        }
    }
#pragma GCC unroll 6
    for (int r = 0; r < mr; r++)
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++) {
            size_t p = p0 + (size_t)v * 16, left = P - p;
            __mmask16 mask = left >= 16 ? 0xffff : (__mmask16)((1u << left) - 1);
            conv_finish(e, m0 + (size_t)r, p, mask, acc[r][v]);
        }
}

#define CONV_CASE(R)                                                                       \
    case R:                                                                                \
        switch (nv) {                                                                      \
        case 1: conv_tile(R, 1, k4, W, ldw, X, ldx, m0, p0, P, e); break;                   \
        case 2: conv_tile(R, 2, k4, W, ldw, X, ldx, m0, p0, P, e); break;                   \
        case 3: conv_tile(R, 3, k4, W, ldw, X, ldx, m0, p0, P, e); break;                   \
        default: conv_tile(R, 4, k4, W, ldw, X, ldx, m0, p0, P, e); break;                  \
        }                                                                                  \
        break;

static VNNI void conv_tile_any(int mr, int nv, size_t k4, const int8_t *W, size_t ldw,
                               const uint8_t *X, size_t ldx, size_t m0, size_t p0, size_t P,
                               const ak__i8_epilogue *e) {
    switch (mr) {
        CONV_CASE(1) CONV_CASE(2) CONV_CASE(3) CONV_CASE(4) CONV_CASE(5) CONV_CASE(6)
    default: break;
    }
}

/* Channel blocks outside, pixel vectors inside: a block's weights (6·K bytes) stay in L1
 * while the packed pixels (the caller keeps them near L2's size) stream past. */
VNNI void ak_u8s8_conv__avx512vnni(size_t M, size_t P, size_t K, const int8_t *W,
                                   const uint8_t *Xp, const ak__i8_epilogue *e) {
    size_t k4 = (K + AK_KF_I8_KG - 1) / AK_KF_I8_KG, ldw = ak__i8_w_stride(K);
    size_t ldx = ak__i8_x_stride(P);
    for (size_t m0 = 0; m0 < M; m0 += CONV_ROWS) {
        int mr = (int)(M - m0 < CONV_ROWS ? M - m0 : CONV_ROWS);
        for (size_t p0 = 0; p0 < P; p0 += CONV_VECS * 16) {
            size_t left = (P - p0 + 15) / 16;
            int nv = (int)(left < CONV_VECS ? left : CONV_VECS);
            conv_tile_any(mr, nv, k4, W + m0 * ldw, ldw, Xp, ldx, m0, p0, P, e);
        }
    }
}
