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

/* one thread's scratch: the rows of A, then the int32 tile */
static size_t slot_bytes(size_t K) {
    return (ROWS * K + 63) / 64 * 64 + (size_t)ROWS * COLS * sizeof(int32_t);
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

/* Σ(a − za)(b − zb) = Σab − zb·Σa − za·Σb + K·za·zb, in wrapping uint32 arithmetic. */
static void apply_zero_points(const ak__qmm *q, const uint8_t *a, size_t lda, size_t m0,
                              size_t mr, size_t n0, size_t nc, int32_t *acc) {
    for (size_t r = 0; r < mr; r++) {
        uint32_t za = za_at(q, m0 + r), rowsum = 0;
        for (size_t k = 0; k < q->K; k++) rowsum += a[r * lda + k];
        for (size_t j = 0; j < nc; j++) {
            uint32_t zb = zb_at(q, n0 + j), v = (uint32_t)acc[r * nc + j];
            v += -zb * rowsum - za * (uint32_t)q->b->colsum[n0 + j] + (uint32_t)q->K * za * zb;
            acc[r * nc + j] = (int32_t)v;
        }
    }
}

static void finish(const ak__qmm *q, size_t m0, size_t mr, size_t n0, size_t nc,
                   const int32_t *acc) {
    for (size_t r = 0; r < mr; r++) {
        size_t m = m0 + r;
        for (size_t j = 0; j < nc; j++) {
            size_t n = n0 + j, at = m * q->out_rs + n * q->out_cs;
            int32_t v = acc[r * nc + j];
            if (q->bias) v = (int32_t)((uint32_t)v + (uint32_t)q->bias[n]);
            float mult = q->mult ? q->mult[q->mult_n == 1 ? 0 : n] : 1.0f;
            switch (q->out_kind) {
            case AK_QMM_OUT_I32: ((int32_t *)q->out)[at] = v; break;
            case AK_QMM_OUT_Q8: {
                int32_t y = ak__q_round_sat((float)v * mult, q->out_zp, q->out_signed);
                if (q->relu && y < q->out_zp) y = q->out_zp;
                if (q->out_signed) ((int8_t *)q->out)[at] = (int8_t)y;
                else ((uint8_t *)q->out)[at] = (uint8_t)y;
                break;
            }
            default:
                ((float *)q->out)[at] = (float)v * mult + (q->fbias ? q->fbias[n] : 0.0f);
                break;
            }
        }
    }
}

static void qmm_task(void *vj, size_t begin, size_t end, int tid) {
    const qmm_job *j = vj;
    const ak__qmm *q = j->q;
    if (tid < 0 || tid >= j->threads) tid = 0;
    char *slot = j->workspace + (size_t)tid * slot_bytes(q->K);
    uint8_t *arows = (uint8_t *)slot;
    int32_t *tile = (int32_t *)(slot + (ROWS * q->K + 63) / 64 * 64);
    const ak__kernels *kern = ak__kernels_active();
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
        apply_zero_points(q, a, lda, m0, mr, n0, nc, tile);
        finish(q, m0, mr, n0, nc, tile);
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
