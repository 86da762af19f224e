/* The AVX-512 SGEMM microkernel body (MR × 16: MR zmm accumulators), included by
 * gemm_avx512.c (MR 8) and gemm_avx512w.c (MR 16, for cores that run zmm FMAs at full
 * width), which define MR, GA_UKERNEL and GA_UKERNEL_EPI (the two kernels' symbols) and
 * then their configuration and SGEMM entry.
 *
 * The tile is MR rows × one 16-float zmm: each k step loads the packed B row once and
 * multiplies it by MR broadcast values of the packed A sliver (an FMA with an embedded
 * broadcast each). The packed B layout (16 floats per k) is the AVX2 kernel's, so code
 * that packs for sgemm_nr works unchanged. */
#include <immintrin.h>

#include "kernels/dispatch.h"
#include "kernels/gemm.h"

#define NR 16
_Static_assert(MR == 8 || MR == 16, "the row cases below cover MR 8 and 16");

#define PREFETCH_A_AHEAD (16 * MR) /* floats: A streams from L2, fetch 16 k steps ahead */

/* Rows of C (and Z) are only touched after the loop: start pulling their lines in now. */
static inline void prefetch_rows(const float *C, size_t ldc, size_t m) {
    for (size_t r = 0; r < m; r++) _mm_prefetch((const char *)(C + r * ldc), _MM_HINT_T0);
}

/* acc[r] = Σ_k A[k][r] · B[k][0:16] for r < rows. Inlined with a constant `rows`, acc
 * lives in registers. With few rows the chains are too short to hide the FMA latency,
 * so up to 4 rows even and odd k steps go to separate accumulators. */
static inline __attribute__((always_inline)) void accumulate(int rows, size_t k, const float *Ap,
                                                             const float *Bp, __m512 acc[MR]) {
    __m512 odd[MR];
    for (int r = 0; r < rows; r++) acc[r] = odd[r] = _mm512_setzero_ps();
    if (rows <= 4)
        for (; k >= 2; k -= 2, Ap += 2 * MR, Bp += 2 * NR) {
            __m512 b0 = _mm512_loadu_ps(Bp), b1 = _mm512_loadu_ps(Bp + NR);
            for (int r = 0; r < rows; r++) {
                acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(Ap[r]), b0, acc[r]);
                odd[r] = _mm512_fmadd_ps(_mm512_set1_ps(Ap[MR + r]), b1, odd[r]);
            }
        }
    for (; k >= 4; k -= 4, Ap += 4 * MR, Bp += 4 * NR) {
        _mm_prefetch((const char *)(Ap + PREFETCH_A_AHEAD), _MM_HINT_T0);
#pragma GCC unroll 4
        for (int p = 0; p < 4; p++) {
            __m512 b = _mm512_loadu_ps(Bp + p * NR);
            for (int r = 0; r < rows; r++)
                acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(Ap[p * MR + r]), b, acc[r]);
        }
    }
    for (; k > 0; k--, Ap += MR, Bp += NR) {
        __m512 b = _mm512_loadu_ps(Bp);
        for (int r = 0; r < rows; r++) acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(Ap[r]), b, acc[r]);
    }
    if (rows <= 4)
        for (int r = 0; r < rows; r++) acc[r] = _mm512_add_ps(acc[r], odd[r]);
}

/* The valid m×n part of the tile: alpha·acc + beta·C (beta == 0 does not read C); full
 * 16-wide rows straight to C, a ragged edge through a spilled tile. */
static inline __attribute__((always_inline)) void store_tile(int rows, const __m512 acc[MR],
                                                             float alpha, float beta, float *C,
                                                             size_t ldc, size_t n) {
    __m512 valpha = _mm512_set1_ps(alpha);
    if (n == NR) {
        for (int r = 0; r < rows; r++) {
            float *c = C + (size_t)r * ldc;
            __m512 v = _mm512_mul_ps(acc[r], valpha);
            if (beta != 0.0f) v = _mm512_fmadd_ps(_mm512_set1_ps(beta), _mm512_loadu_ps(c), v);
            _mm512_storeu_ps(c, v);
        }
        return;
    }
    float tile[MR][NR];
    for (int r = 0; r < rows; r++) _mm512_storeu_ps(tile[r], acc[r]);
    ak__sgemm_store_edge(&tile[0][0], NR, alpha, beta, C, ldc, (size_t)rows, n);
}

static inline __attribute__((always_inline)) void tile_rows(int rows, size_t k, float alpha,
                                                            const float *Ap, const float *Bp,
                                                            float beta, float *C, size_t ldc,
                                                            size_t n) {
    __m512 acc[MR];
    prefetch_rows(C, ldc, (size_t)rows);
    accumulate(rows, k, Ap, Bp, acc);
    store_tile(rows, acc, alpha, beta, C, ldc, n);
}

void GA_UKERNEL(size_t k, float alpha, const float *Ap, const float *Bp, float beta, float *C,
                     size_t ldc, size_t m, size_t n) {
    switch (m) { /* each case a constant-row instance: the last row tile of M % MR ≠ 0 */
#define GA_ROWS(r_) case r_: tile_rows(r_, k, alpha, Ap, Bp, beta, C, ldc, n); break;
    GA_ROWS(1) GA_ROWS(2) GA_ROWS(3) GA_ROWS(4) GA_ROWS(5) GA_ROWS(6) GA_ROWS(7)
#if MR > 8
    GA_ROWS(8) GA_ROWS(9) GA_ROWS(10) GA_ROWS(11) GA_ROWS(12) GA_ROWS(13) GA_ROWS(14) GA_ROWS(15)
#endif
#undef GA_ROWS
    default: tile_rows(MR, k, alpha, Ap, Bp, beta, C, ldc, n); break;
    }
}

/* The full-tile kernel finishing in its accumulators: + beta·C, + bias (per row), + the
 * column bias, + z, the activation, stored. */
void GA_UKERNEL_EPI(size_t k, const float *Ap, const float *Bp, float beta, float *C,
                          size_t ldc, const ak__sgemm_tile_epi *epi) {
    __m512 acc[MR];
    prefetch_rows(C, ldc, MR);
    if (epi->z) prefetch_rows(epi->z, ldc, MR);
    accumulate(MR, k, Ap, Bp, acc);
    __m512 vlo = _mm512_set1_ps(epi->lo), vhi = _mm512_set1_ps(epi->hi);
    __m512 vcol = epi->col_bias ? _mm512_loadu_ps(epi->col_bias) : _mm512_setzero_ps();
    for (int r = 0; r < MR; r++) {
        float *c = C + (size_t)r * ldc;
        __m512 v = acc[r];
        if (beta != 0.0f) v = _mm512_fmadd_ps(_mm512_set1_ps(beta), _mm512_loadu_ps(c), v);
        if (epi->bias) v = _mm512_add_ps(v, _mm512_set1_ps(epi->bias[r]));
        if (epi->col_bias) v = _mm512_add_ps(v, vcol);
        if (epi->z) v = _mm512_add_ps(v, _mm512_loadu_ps(epi->z + (size_t)r * ldc));
        if (epi->act == AK_SGEMM_ACT_MAX) v = _mm512_max_ps(v, vlo); /* max(x, lo): NaN → lo */
        else if (epi->act == AK_SGEMM_ACT_CLAMP) v = _mm512_min_ps(vhi, _mm512_max_ps(vlo, v));
        _mm512_storeu_ps(c, v);
    }
}

