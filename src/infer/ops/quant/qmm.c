/* The int8 product driver of the quantized operators (quant.h): tasks of up to ROWS rows
 * of A × COLS columns of B, spread over the pool. Each task brings its rows of A into
 * its own scratch as uint8 (flipping int8, or through the operator's row producer for
 * convolutions), runs the u8·s8 kernel into an int32 tile, applies the zero-point terms
 * and the operator's finish. */
#include <string.h>

#include "infer/ops/quant/quant.h"

#define ROWS 32
#define COLS 256

size_t ak__qmm_b_bytes(size_t K, size_t N) {
    return (ak__i8_packed_bytes(K, N) + 63) / 64 * 64 + N * sizeof(int32_t);
}

void ak__qmm_b_pack(ak__qmm_b *qb, void *mem, const void *b, ak_elem_type type, size_t K,
                    size_t N, size_t rs, size_t cs) {
    qb->packed = mem;
    qb->colsum = (int32_t *)((char *)mem + (ak__i8_packed_bytes(K, N) + 63) / 64 * 64);
    qb->K = K, qb->N = N;
    qb->flipped = type == AK_ELEM_U8;
    ak__i8_pack_b(b, qb->flipped, K, N, rs, cs, qb->packed, qb->colsum);
}

/* The per-column values of a tile's epilogue, gathered once so the per-row loops below
 * are plain vector loops (the file is built at -O3). */
typedef struct tile_cols {
    uint32_t zb[COLS], colsum[COLS];
    int32_t bias[COLS];
    float mult[COLS], fbias[COLS];
} tile_cols;

/* one thread's scratch: the rows of A, the int32 tile, the tile's column values */
static size_t slot_bytes(size_t K) {
    return (ROWS * K + 63) / 64 * 64 + (size_t)ROWS * COLS * sizeof(int32_t) +
           (sizeof(tile_cols) + 63) / 64 * 64;
}

size_t ak__qmm_workspace(size_t K, int threads) {
    return slot_bytes(K) * (size_t)(threads > 0 ? threads : 1);
}

typedef struct qmm_job {
    const ak__qmm *q;
    char *workspace;
    size_t row_blocks, col_blocks;
    int threads;
} qmm_job;

/* Rows [m0, m0 + mr) of a plain A as uint8 into dst (int8: top bit flipped). */
static const uint8_t *plain_rows(const ak__qmm *q, size_t m0, size_t mr, uint8_t *dst) {
    const uint8_t *a = (const uint8_t *)q->a + m0 * q->lda;
    if (q->a_type == AK_ELEM_U8) return a;
    for (size_t r = 0; r < mr; r++)
        for (size_t k = 0; k < q->K; k++) dst[r * q->K + k] = a[r * q->lda + k] ^ 0x80u;
    return dst;
}

/* The zero points as the kernel's operands see them: A's moved up by 128 when int8 was
 * flipped, B's down by 128 when uint8 was. */
static uint32_t za_at(const ak__qmm *q, size_t m) {
    return (uint32_t)(ak__qzp_at(&q->za, m) + (q->a_type == AK_ELEM_I8 ? 128 : 0));
}
static uint32_t zb_at(const ak__qmm *q, size_t n) {
    return (uint32_t)(ak__qzp_at(&q->zb, n) - (q->b->flipped ? 128 : 0));
}

static void gather_cols(const ak__qmm *q, size_t n0, size_t nc, tile_cols *c) {
    for (size_t j = 0; j < nc; j++) {
        size_t n = n0 + j;
        c->zb[j] = zb_at(q, n);
        c->colsum[j] = (uint32_t)q->b->colsum[n];
        c->bias[j] = q->bias ? q->bias[n] : 0;
        c->mult[j] = q->mult ? q->mult[q->mult_n == 1 ? 0 : n] : 1.0f;
        c->fbias[j] = q->fbias ? q->fbias[n] : 0.0f;
    }
}

/* Σ(a − za)(b − zb) = Σab − zb·Σa − za·Σb + K·za·zb, in wrapping uint32 arithmetic, plus
 * the int32 bias. */
static inline __attribute__((always_inline)) void
apply_zero_points(const ak__qmm *q, const uint8_t *a, size_t lda, size_t m0, size_t mr,
                  size_t nc, const tile_cols *c, int32_t *acc) {
    for (size_t r = 0; r < mr; r++) {
        uint32_t za = za_at(q, m0 + r), rowsum = 0, kza = (uint32_t)q->K * za;
        const uint8_t *ar = a + r * lda;
        for (size_t k = 0; k < q->K; k++) rowsum += ar[k];
        uint32_t *row = (uint32_t *)acc + r * nc;
        for (size_t j = 0; j < nc; j++)
            row[j] += (kza - rowsum) * c->zb[j] - za * c->colsum[j] + (uint32_t)c->bias[j];
    }
}

/* saturate(round_half_even(v·mult) + zp), raised to zp when a Relu was folded */
static inline __attribute__((always_inline)) void
finish_q8_row(const int32_t *restrict v, const float *restrict mult, int32_t zp, int is_signed,
              int relu, void *restrict out, size_t nc) {
    ak__q_rounding rd = ak__q_rounding_for(zp, is_signed, relu);
    for (size_t j = 0; j < nc; j++) {
        float r = ak__q_round_clamp((float)v[j] * mult[j], &rd);
        if (is_signed) ((int8_t *)out)[j] = (int8_t)(int32_t)r;
        else ((uint8_t *)out)[j] = (uint8_t)(int32_t)r;
    }
}

/* Element (m, n) of the tile to out + (m·out_rs + n·out_cs) in the operator's form. */
static inline __attribute__((always_inline)) void
finish(const ak__qmm *q, size_t m0, size_t mr, size_t n0, size_t nc, const tile_cols *c,
       const int32_t *acc) {
    size_t esize = q->out_kind == AK_QMM_OUT_Q8 ? 1 : 4;
    for (size_t r = 0; r < mr; r++) {
        const int32_t *v = acc + r * nc;
        char *out = (char *)q->out + ((m0 + r) * q->out_rs + n0 * q->out_cs) * esize;
        if (q->out_cs != 1) { /* a transposed output: element by element */
            for (size_t j = 0; j < nc; j++) {
                char *at = out + j * q->out_cs * esize;
                if (q->out_kind == AK_QMM_OUT_I32) *(int32_t *)at = v[j];
                else if (q->out_kind == AK_QMM_OUT_F32)
                    *(float *)at = (float)v[j] * c->mult[j] + c->fbias[j];
                else finish_q8_row(v + j, c->mult + j, q->out_zp, q->out_signed, q->relu, at, 1);
            }
        } else if (q->out_kind == AK_QMM_OUT_I32) {
            memcpy(out, v, nc * sizeof *v);
        } else if (q->out_kind == AK_QMM_OUT_F32) {
            float *restrict f = (float *)out;
            for (size_t j = 0; j < nc; j++) f[j] = (float)v[j] * c->mult[j] + c->fbias[j];
        } else if (q->out_signed) {
            finish_q8_row(v, c->mult, q->out_zp, 1, q->relu, out, nc);
        } else {
            finish_q8_row(v, c->mult, q->out_zp, 0, q->relu, out, nc);
        }
    }
}

/* The epilogue compiled for AVX-512 as well, taken where the kernels' dispatch runs its
 * avx512 variant (the same IEEE operations in each lane, so the same results). */
#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,prefer-vector-width=512")))
static AVX512 void epilogue_avx512(const ak__qmm *q, const uint8_t *a, size_t lda, size_t m0,
                                   size_t mr, size_t n0, size_t nc, const tile_cols *c,
                                   int32_t *acc) {
    apply_zero_points(q, a, lda, m0, mr, nc, c, acc);
    finish(q, m0, mr, n0, nc, c, acc);
}
static void epilogue_plain(const ak__qmm *q, const uint8_t *a, size_t lda, size_t m0,
                           size_t mr, size_t n0, size_t nc, const tile_cols *c, int32_t *acc) {
    apply_zero_points(q, a, lda, m0, mr, nc, c, acc);
    finish(q, m0, mr, n0, nc, c, acc);
}

static void qmm_task(void *vj, size_t begin, size_t end, int tid) {
    const qmm_job *j = vj;
    const ak__qmm *q = j->q;
    if (tid < 0 || tid >= j->threads) tid = 0;
    char *slot = j->workspace + (size_t)tid * slot_bytes(q->K);
    uint8_t *arows = (uint8_t *)slot;
    int32_t *tile = (int32_t *)(slot + (ROWS * q->K + 63) / 64 * 64);
    const ak__kernels *kern = ak__kernels_active();
    int wide = ak__kernels_avx512(kern);
    tile_cols *cols = (tile_cols *)(slot + (ROWS * q->K + 63) / 64 * 64 +
                                    (size_t)ROWS * COLS * sizeof(int32_t));
    for (size_t t = begin; t < end; t++) {
        size_t rb = t / j->col_blocks, cb = t % j->col_blocks;
        size_t m0 = rb * ROWS, mr = q->M - m0 < ROWS ? q->M - m0 : ROWS;
        size_t n0 = cb * COLS, nc = q->N - n0 < COLS ? q->N - n0 : COLS;
        const uint8_t *a;
        size_t lda = q->K;
        if (q->rows) {
            q->rows(q, m0, mr, arows);
            a = arows;
        } else {
            a = plain_rows(q, m0, mr, arows);
            if (a != arows) lda = q->lda;
        }
        /* B's panels for columns from n0 (a multiple of 16) */
        size_t k4 = (q->K + AK_KF_I8_KG - 1) / AK_KF_I8_KG;
        const int8_t *bp = q->b->packed + (n0 / AK_KF_I8_NR) * k4 * AK_KF_I8_NR * AK_KF_I8_KG;
        kern->u8s8_gemm(mr, nc, q->K, a, lda, bp, tile, nc);
        gather_cols(q, n0, nc, cols);
        (wide ? epilogue_avx512 : epilogue_plain)(q, a, lda, m0, mr, n0, nc, cols, tile);
    }
}

void ak__qmm_run(const ak__qmm *q, ak_threadpool *pool, int threads, void *workspace) {
    if (q->M == 0 || q->N == 0) return;
    qmm_job j = {q, workspace, (q->M + ROWS - 1) / ROWS, (q->N + COLS - 1) / COLS,
                 threads > 0 ? threads : 1};
    size_t n = j.row_blocks * j.col_blocks;
    if (n <= 1 || j.threads == 1 ||
        ak_threadpool_parallel_for(pool, n, 1, qmm_task, &j) != AK_OK)
        qmm_task(&j, 0, n, 0);
}
