/* AVX2+FMA SGEMM microkernel (6×16), its configuration and the avx2 SGEMM entry.
 *
 * The 6×16 tile is 12 ymm accumulators; each k step loads one 16-float row of the packed
 * B sliver (2 ymm) and broadcasts 6 values of the packed A sliver, for 12 FMAs. That
 * leaves 2 of the 16 ymm registers for B and 1 for the broadcast, and keeps 8 loads per
 * 12 FMAs, within what Zen 4 / Intel cores issue per cycle at two FMAs per cycle. */
#include <immintrin.h>

#include "kernels/dispatch.h"
#include "kernels/gemm.h"

#define MR 6
#define NR 16
#define PREFETCH_A_AHEAD 96 /* floats: A streams from L2, fetch ~16 k steps ahead */

/* c<r>0/c<r>1 += A[p][r] · B[p][0:16] */
#define FMA_ROW(r, p)                                   \
    a = _mm256_broadcast_ss(Ap + (p) * MR + (r));       \
    c##r##0 = _mm256_fmadd_ps(a, b0, c##r##0);          \
    c##r##1 = _mm256_fmadd_ps(a, b1, c##r##1)

#define STEP(p)                                         \
    do {                                                \
        __m256 a;                                       \
        __m256 b0 = _mm256_loadu_ps(Bp + (p) * NR);     \
        __m256 b1 = _mm256_loadu_ps(Bp + (p) * NR + 8); \
        FMA_ROW(0, p);                                  \
        FMA_ROW(1, p);                                  \
        FMA_ROW(2, p);                                  \
        FMA_ROW(3, p);                                  \
        FMA_ROW(4, p);                                  \
        FMA_ROW(5, p);                                  \
    } while (0)

/* Writes one full 16-wide row: alpha·acc + beta·C (beta == 0 does not read C). */
static inline void store_row(float *c, __m256 lo, __m256 hi, __m256 valpha, float beta) {
    lo = _mm256_mul_ps(lo, valpha);
    hi = _mm256_mul_ps(hi, valpha);
    if (beta != 0.0f) {
        __m256 vbeta = _mm256_set1_ps(beta);
        lo = _mm256_fmadd_ps(vbeta, _mm256_loadu_ps(c), lo);
        hi = _mm256_fmadd_ps(vbeta, _mm256_loadu_ps(c + 8), hi);
    }
    _mm256_storeu_ps(c, lo);
    _mm256_storeu_ps(c + 8, hi);
}

#define STORE_ROW(r) store_row(C + (r) * ldc, c##r##0, c##r##1, valpha, beta)
#define SPILL_ROW(r)                                   \
    _mm256_storeu_ps(tile[r], c##r##0);                \
    _mm256_storeu_ps(tile[r] + 8, c##r##1)

/* The valid m×n part of rows held in acc[r][0..1]: full-width rows straight to C, a
 * ragged edge through a spilled tile. */
static inline void store_rows(__m256 acc[][2], int rows, float alpha, float beta, float *C,
                              size_t ldc, size_t n) {
    __m256 valpha = _mm256_set1_ps(alpha);
    if (n == NR) {
        for (int r = 0; r < rows; r++) store_row(C + (size_t)r * ldc, acc[r][0], acc[r][1], valpha, beta);
        return;
    }
    float tile[MR][NR];
    for (int r = 0; r < rows; r++) {
        _mm256_storeu_ps(tile[r], acc[r][0]);
        _mm256_storeu_ps(tile[r] + 8, acc[r][1]);
    }
    ak__sgemm_store_edge(&tile[0][0], NR, alpha, beta, C, ldc, (size_t)rows, n);
}

/* A tile with rows < MR valid rows (the last row tile of M % 6 ≠ 0): only those rows'
 * FMAs, instead of a full 6-row tile for e.g. the 49th row of M = 49. The packed A sliver
 * keeps its MR stride. With few rows the FMA chains are too short to hide FMA latency, so
 * up to 3 rows even and odd k steps go to separate accumulators. Inlined with a constant
 * `rows`, the loops unroll and acc lives in registers. */
static inline __attribute__((always_inline)) void edge_rows(int rows, size_t k, float alpha,
                                                            const float *Ap, const float *Bp,
                                                            float beta, float *C, size_t ldc,
                                                            size_t n) {
    __m256 acc[MR][2], odd[MR][2];
    for (int r = 0; r < rows; r++) acc[r][0] = acc[r][1] = odd[r][0] = odd[r][1] = _mm256_setzero_ps();
    if (rows <= 3)
        for (; k >= 2; k -= 2, Ap += 2 * MR, Bp += 2 * NR) {
            __m256 b0 = _mm256_loadu_ps(Bp), b1 = _mm256_loadu_ps(Bp + 8);
            __m256 b2 = _mm256_loadu_ps(Bp + NR), b3 = _mm256_loadu_ps(Bp + NR + 8);
            for (int r = 0; r < rows; r++) {
                __m256 a = _mm256_broadcast_ss(Ap + r), a1 = _mm256_broadcast_ss(Ap + MR + r);
                acc[r][0] = _mm256_fmadd_ps(a, b0, acc[r][0]);
                acc[r][1] = _mm256_fmadd_ps(a, b1, acc[r][1]);
                odd[r][0] = _mm256_fmadd_ps(a1, b2, odd[r][0]);
                odd[r][1] = _mm256_fmadd_ps(a1, b3, odd[r][1]);
            }
        }
    for (; k > 0; k--, Ap += MR, Bp += NR) {
        __m256 b0 = _mm256_loadu_ps(Bp), b1 = _mm256_loadu_ps(Bp + 8);
        for (int r = 0; r < rows; r++) {
            __m256 a = _mm256_broadcast_ss(Ap + r);
            acc[r][0] = _mm256_fmadd_ps(a, b0, acc[r][0]);
            acc[r][1] = _mm256_fmadd_ps(a, b1, acc[r][1]);
        }
    }
    for (int r = 0; r < rows; r++) {
        acc[r][0] = _mm256_add_ps(acc[r][0], odd[r][0]);
        acc[r][1] = _mm256_add_ps(acc[r][1], odd[r][1]);
    }
    store_rows(acc, rows, alpha, beta, C, ldc, n);
}

/* m = 1..5 valid rows; each case a constant-row instance of edge_rows. */
static void edge_tile(size_t k, float alpha, const float *Ap, const float *Bp, float beta,
                      float *C, size_t ldc, size_t m, size_t n) {
    switch (m) {
    case 1: edge_rows(1, k, alpha, Ap, Bp, beta, C, ldc, n); break;
    case 2: edge_rows(2, k, alpha, Ap, Bp, beta, C, ldc, n); break;
    case 3: edge_rows(3, k, alpha, Ap, Bp, beta, C, ldc, n); break;
    case 4: edge_rows(4, k, alpha, Ap, Bp, beta, C, ldc, n); break;
    default: edge_rows(5, k, alpha, Ap, Bp, beta, C, ldc, n); break;
    }
}

/* The 12 accumulators of a full tile. */
#define DECLARE_ACC                                                                        \
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, \
           c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00

/* Σ over k of the full tile, 4 steps per iteration. */
#define ACCUMULATE                                                            \
    do {                                                                      \
        for (; k >= 4; k -= 4, Ap += 4 * MR, Bp += 4 * NR) {                  \
            _mm_prefetch((const char *)(Ap + PREFETCH_A_AHEAD), _MM_HINT_T0); \
            STEP(0);                                                          \
            STEP(1);                                                          \
            STEP(2);                                                          \
            STEP(3);                                                          \
        }                                                                     \
        for (; k > 0; k--, Ap += MR, Bp += NR) STEP(0);                       \
    } while (0)

/* Rows of C (and Z) are only touched after the loop: start pulling their lines in now. */
static inline void prefetch_tile_rows(const float *C, size_t ldc, size_t m) {
    for (size_t r = 0; r < m; r++) {
        _mm_prefetch((const char *)(C + r * ldc), _MM_HINT_T0);
        _mm_prefetch((const char *)(C + r * ldc + NR - 1), _MM_HINT_T0);
    }
}

void ak_f32_gemm_ukernel_6x16__avx2(size_t k, float alpha, const float *Ap, const float *Bp,
                                    float beta, float *C, size_t ldc, size_t m, size_t n) {
    if (m < MR) {
        edge_tile(k, alpha, Ap, Bp, beta, C, ldc, m, n);
        return;
    }
    DECLARE_ACC;
    prefetch_tile_rows(C, ldc, m);
    ACCUMULATE;

    __m256 valpha = _mm256_set1_ps(alpha);
    if (m == MR && n == NR) {
        STORE_ROW(0);
        STORE_ROW(1);
        STORE_ROW(2);
        STORE_ROW(3);
        STORE_ROW(4);
        STORE_ROW(5);
        return;
    }
    float tile[MR][NR];
    SPILL_ROW(0);
    SPILL_ROW(1);
    SPILL_ROW(2);
    SPILL_ROW(3);
    SPILL_ROW(4);
    SPILL_ROW(5);
    ak__sgemm_store_edge(&tile[0][0], NR, alpha, beta, C, ldc, m, n);
}

/* One finished row of the tile: + beta·C, + bias (per row), + the column bias, + z, the
 * activation, stored. */
static inline void store_row_epi(float *c, __m256 lo, __m256 hi, float beta, int r,
                                 const ak__sgemm_tile_epi *e, size_t ldc) {
    if (beta != 0.0f) {
        __m256 vbeta = _mm256_set1_ps(beta);
        lo = _mm256_fmadd_ps(vbeta, _mm256_loadu_ps(c), lo);
        hi = _mm256_fmadd_ps(vbeta, _mm256_loadu_ps(c + 8), hi);
    }
    if (e->bias) {
        __m256 b = _mm256_broadcast_ss(e->bias + r);
        lo = _mm256_add_ps(lo, b);
        hi = _mm256_add_ps(hi, b);
    }
    if (e->col_bias) {
        lo = _mm256_add_ps(lo, _mm256_loadu_ps(e->col_bias));
        hi = _mm256_add_ps(hi, _mm256_loadu_ps(e->col_bias + 8));
    }
    if (e->z) {
        const float *z = e->z + (size_t)r * ldc;
        lo = _mm256_add_ps(lo, _mm256_loadu_ps(z));
        hi = _mm256_add_ps(hi, _mm256_loadu_ps(z + 8));
    }
    if (e->act == AK_SGEMM_ACT_MAX) { /* max(x, lo): NaN → lo */
        __m256 vlo = _mm256_broadcast_ss(&e->lo);
        lo = _mm256_max_ps(lo, vlo);
        hi = _mm256_max_ps(hi, vlo);
    } else if (e->act == AK_SGEMM_ACT_CLAMP) { /* max(lo, x): NaN kept */
        __m256 vlo = _mm256_broadcast_ss(&e->lo), vhi = _mm256_broadcast_ss(&e->hi);
        lo = _mm256_min_ps(vhi, _mm256_max_ps(vlo, lo));
        hi = _mm256_min_ps(vhi, _mm256_max_ps(vlo, hi));
    }
    _mm256_storeu_ps(c, lo);
    _mm256_storeu_ps(c + 8, hi);
}

#define STORE_ROW_EPI(r) store_row_epi(C + (r) * ldc, c##r##0, c##r##1, beta, r, epi, ldc)

/* The full-tile kernel finishing in its accumulators. (Storing the tile and finishing
 * it from L1 instead measured 1.5 % slower on MobileNetV2, 15 % on a store-bound 1×1
 * layer, 16→96 channels at 112×112.) */
void ak_f32_gemm_ukernel_6x16_epi__avx2(size_t k, const float *Ap, const float *Bp, float beta,
                                        float *C, size_t ldc, const ak__sgemm_tile_epi *epi) {
    DECLARE_ACC;
    prefetch_tile_rows(C, ldc, MR);
    if (epi->z) prefetch_tile_rows(epi->z, ldc, MR);
    ACCUMULATE;
    STORE_ROW_EPI(0);
    STORE_ROW_EPI(1);
    STORE_ROW_EPI(2);
    STORE_ROW_EPI(3);
    STORE_ROW_EPI(4);
    STORE_ROW_EPI(5);
}

/* Zen 4 (32 KB L1d, 1 MB L2): the B sliver KC×16 (16 KB at KC=256) stays in L1 next to
 * the streaming A sliver; the A block MC×KC (~132 KB) sits in L2; the B panel KC×NC
 * (4 MB) in L3. Tuned with AK_GEMM_KC/MC/NC sweeps at 1024³ and the inference shapes. */
const ak__gemm_config ak_f32_gemm_config__avx2 = {
    .ukernel = ak_f32_gemm_ukernel_6x16__avx2,
    .ukernel_epi = ak_f32_gemm_ukernel_6x16_epi__avx2,
    .mr = MR, .nr = NR,
    .kc = 256, .mc = 132, .nc = 4096,
};

void ak_f32_gemm__avx2(int trans_a, int trans_b, size_t M, size_t N, size_t K, float alpha,
    const float *A, size_t lda, const float *B, size_t ldb, float beta, float *C, size_t ldc,
    ak_threadpool *pool) {
    ak__sgemm_blocked(&ak_f32_gemm_config__avx2, trans_a, trans_b, M, N, K, alpha, A, lda, B,
                      ldb, beta, C, ldc, pool);
}

