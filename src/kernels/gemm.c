/* SGEMM: the public ak_sgemm entry point and the blocked (Goto/BLIS) driver behind the
 * generic, AVX2 and AVX-512 variants.
 *
 * Loop nest, outermost first:
 *   jc: NC columns of op(B)   (packed B panel KC×NC lives in L2/L3)
 *   pc: KC deep slice          (beta applies on the first slice only, 1 afterwards)
 *   ic: MC rows of op(A)       (packed A block MC×KC stays in L2)
 *   jr: NR columns             (one B sliver KC×NR stays in L1)
 *   ir: MR rows                (microkernel: MR×NR accumulators in registers)
 * Up to FUSED_MAX_M rows, A is a single block and each B sliver is packed right before
 * use (with the next one prefetched) instead of into a shared panel; a shallow slice
 * packs a group of them and runs each row tile across the group.
 * Threads take regions of C (a cut along M, or along N into a few regions per thread,
 * handed out dynamically) and run the whole nest on each with their own packing
 * buffers, which are cached per thread and only grow; a cut along N with few rows shares
 * one packing of A. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "accelkit/kernels.h"
#include "core/check.h"
#include "core/params.h"
#include "kernels/dispatch.h"
#include "kernels/gemm.h"

/* Below this many multiply-adds packing costs more than it saves. */
#define SMALL_GEMM_MACS 4096u
/* Up to this many rows of A, packed KC deep (384 KB at KC=256), stay in the 1 MB L2 of
 * Zen 4 as one block, so B need not be packed into a shared panel (see run_fused_slice). */
#define FUSED_MAX_M 384u
/* Cutting C along N: up to this many regions per thread, each this many NR slivers wide. */
#define REGIONS_PER_THREAD 4u
#define REGION_MIN_SLIVERS 4u
/* Below this many multiply-adds one thread beats waking the others. */
#define PARALLEL_GEMM_MACS (64u * 64u * 64u)

static size_t min_sz(size_t a, size_t b) { return a < b ? a : b; }
static size_t div_up(size_t a, size_t b) { return (a + b - 1) / b; }
static size_t round_up(size_t a, size_t b) { return div_up(a, b) * b; }

/* ---- per-thread packing buffers -------------------------------------------------- */

/* This thread's packed A block and packed B panel. */
typedef struct pack_cache {
    float *a, *b, *pre;         /* A block, B panel, all of A for the threads (caller only) */
    size_t a_cap, b_cap, pre_cap; /* floats */
} pack_cache;

static pthread_key_t cache_key;
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;
static int cache_key_ok;

static void cache_destroy(void *p) {
    pack_cache *c = p;
    ak_free(c->a);
    ak_free(c->b);
    ak_free(c->pre);
    free(c);
}

static void cache_key_init(void) {
    cache_key_ok = pthread_key_create(&cache_key, cache_destroy) == 0;
}

/* The calling thread's cache (created on first use, freed when the thread exits). */
static pack_cache *cache_get(void) {
    pthread_once(&cache_once, cache_key_init);
    if (!cache_key_ok) return NULL;
    pack_cache *c = pthread_getspecific(cache_key);
    if (c) return c;
    c = calloc(1, sizeof *c);
    if (c && pthread_setspecific(cache_key, c) != 0) {
        free(c);
        c = NULL;
    }
    return c;
}

/* Grows *buf to at least n floats (64-byte aligned); NULL when out of memory. */
static float *buf_reserve(float **buf, size_t *cap, size_t n) {
    if (*cap >= n) return *buf;
    ak_free(*buf);
    *buf = NULL;
    *cap = 0;
    void *p;
    if (ak_alloc(n * sizeof(float), &p) != AK_OK) return NULL;
    *buf = p;
    *cap = n;
    return *buf;
}

/* ---- simple unpacked loop: tiny problems and the out-of-memory fallback ------------ */

/* C = alpha·op(A)·op(B) + beta·C row by row; the inner j loop vectorizes for plain B. */
static void gemm_simple(int ta, int tb, size_t M, size_t N, size_t K, float alpha,
                        const float *A, size_t lda, const float *B, size_t ldb, float beta,
                        float *C, size_t ldc) {
    for (size_t i = 0; i < M; i++) {
        float *c = C + i * ldc;
        for (size_t j = 0; j < N; j++) c[j] = beta == 0.0f ? 0.0f : beta * c[j];
        for (size_t p = 0; p < K; p++) {
            float a = alpha * (ta ? A[p * lda + i] : A[i * lda + p]);
            if (tb)
                for (size_t j = 0; j < N; j++) c[j] += a * B[j * ldb + p];
            else
                for (size_t j = 0; j < N; j++) c[j] += a * B[p * ldb + j];
        }
    }
}

/* ---- packing ---------------------------------------------------------------------- */

/* One full 6-row sliver of a row-major A (rows src + r·lda, depth kb). Packing is a
 * transpose; with SSE2, 4 depth steps at a time as a 4×4 transpose plus a 2×4 one. */
static void pack_a_rows6(const float *src, size_t lda, size_t kb, float *dst) {
    size_t p = 0;
#if defined(__SSE2__)
    for (; p + 4 <= kb; p += 4, dst += 24) {
        __m128 r0 = _mm_loadu_ps(src + p), r1 = _mm_loadu_ps(src + lda + p);
        __m128 r2 = _mm_loadu_ps(src + 2 * lda + p), r3 = _mm_loadu_ps(src + 3 * lda + p);
        __m128 r4 = _mm_loadu_ps(src + 4 * lda + p), r5 = _mm_loadu_ps(src + 5 * lda + p);
        _MM_TRANSPOSE4_PS(r0, r1, r2, r3); /* r<q> = rows 0-3 at depth p+q */
        __m128 lo = _mm_unpacklo_ps(r4, r5), hi = _mm_unpackhi_ps(r4, r5);
        _mm_storeu_ps(dst, r0);
        _mm_storel_pi((__m64 *)(dst + 4), lo);
        _mm_storeu_ps(dst + 6, r1);
        _mm_storeh_pi((__m64 *)(dst + 10), lo);
        _mm_storeu_ps(dst + 12, r2);
        _mm_storel_pi((__m64 *)(dst + 16), hi);
        _mm_storeu_ps(dst + 18, r3);
        _mm_storeh_pi((__m64 *)(dst + 22), hi);
    }
#endif
    for (; p < kb; p++, dst += 6)
        for (size_t r = 0; r < 6; r++) dst[r] = src[r * lda + p];
}

/* Packs op(A) rows [i0, i0+mb) × depth [p0, p0+kb) into MR-tall k-major slivers
 * (sliver s holds rows s·MR.., MR floats per k), zero-padding the last one. */
static void pack_a(int trans, const float *A, size_t lda, size_t i0, size_t mb, size_t p0,
                   size_t kb, size_t mr, float *dst) {
    for (size_t s = 0; s < mb; s += mr, dst += mr * kb) {
        size_t m = min_sz(mr, mb - s);
        if (trans) { /* A is (K,M): MR consecutive floats per k */
            const float *src = A + p0 * lda + i0 + s;
            for (size_t p = 0; p < kb; p++) {
                for (size_t r = 0; r < m; r++) dst[p * mr + r] = src[p * lda + r];
                for (size_t r = m; r < mr; r++) dst[p * mr + r] = 0.0f;
            }
        } else { /* A is (M,K): a transpose of each MR×kb block */
            const float *src = A + (i0 + s) * lda + p0;
            if (mr == 6 && m == 6) {
                pack_a_rows6(src, lda, kb, dst);
                continue;
            }
            for (size_t r = 0; r < m; r++)
                for (size_t p = 0; p < kb; p++) dst[p * mr + r] = src[r * lda + p];
            for (size_t r = m; r < mr; r++)
                for (size_t p = 0; p < kb; p++) dst[p * mr + r] = 0.0f;
        }
    }
}

/* Packs one NR-wide sliver of op(B): columns [j0, j0+n) × depth [p0, p0+kb), NR floats
 * per k, zero-padded to NR. */
static void pack_b_sliver(int trans, const float *B, size_t ldb, size_t p0, size_t kb,
                          size_t j0, size_t n, size_t nr, float *dst) {
    if (trans) { /* B is (N,K): each column of op(B) is a contiguous row of B */
        for (size_t c = 0; c < n; c++) {
            const float *src = B + (j0 + c) * ldb + p0;
            for (size_t p = 0; p < kb; p++) dst[p * nr + c] = src[p];
        }
        for (size_t p = 0; p < kb; p++)
            for (size_t c = n; c < nr; c++) dst[p * nr + c] = 0.0f;
    } else if (n == 16 && nr == 16) { /* the common full AVX2 sliver: constant-length copies */
        for (size_t p = 0; p < kb; p++)
            for (size_t c = 0; c < 16; c++) dst[p * 16 + c] = B[(p0 + p) * ldb + j0 + c];
    } else {
        for (size_t p = 0; p < kb; p++) {
            const float *src = B + (p0 + p) * ldb + j0;
            for (size_t c = 0; c < n; c++) dst[p * nr + c] = src[c];
            for (size_t c = n; c < nr; c++) dst[p * nr + c] = 0.0f;
        }
    }
}

/* ---- microkernel edge tiles ------------------------------------------------------- */

void ak__sgemm_store_edge(const float *tile, size_t ld_tile, float alpha, float beta,
                          float *C, size_t ldc, size_t m, size_t n) {
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++) {
            float v = alpha * tile[i * ld_tile + j];
            C[i * ldc + j] = beta == 0.0f ? v : v + beta * C[i * ldc + j];
        }
}

/* ---- the blocked driver ------------------------------------------------------------ */

/* An epilogue and where the current region of C sits in the caller's C. */
typedef struct gemm_epi_at {
    const ak__gemm_epilogue *epi;
    size_t row0, col0;
} gemm_epi_at;

static void epi_whole(const gemm_epi_at *at, float *C, size_t ldc, size_t M, size_t N) {
    if (at->epi) at->epi->fn(at->epi->ctx, C, ldc, at->row0, at->col0, M, N);
}

typedef struct gemm_job {
    const ak__gemm_config *cfg;
    int ta, tb;
    size_t M, K;
    float alpha;
    const float *A, *B;
    size_t lda, ldb, ldc;
    float *C;
    size_t mc, kc; /* block sizes (mc a multiple of MR) */
    /* the current (jc, pc) slice */
    size_t jc, nb, pc, kb;
    float beta;
    float *bpack; /* packed B panel, kb × round_up(nb, NR) */
    const float *apre; /* fused path: all of op(A) packed by the caller, else NULL */
    size_t n_slivers;
    gemm_epi_at epi; /* finished tiles go through epi.epi (when set) */
} gemm_job;

/* Hands the tile at rows [i, i+m) × columns [j, j+n) of this job's C to the epilogue
 * once its last depth slice is in. */
static inline void finish_tile(const gemm_job *job, size_t i, size_t j, size_t m, size_t n) {
    if (!job->epi.epi || job->pc + job->kb < job->K) return;
    job->epi.epi->fn(job->epi.epi->ctx, job->C + i * job->ldc + j, job->ldc,
                     job->epi.row0 + i, job->epi.col0 + j, m, n);
}

/* The microkernel on the tile at rows [i, i+m) × columns [j, j+n) of this job's C, then
 * its finish: in the microkernel's registers for a full tile of the last depth slice when
 * the epilogue has a fused form, else through finish_tile. */
static inline void run_tile(const gemm_job *job, const float *a, const float *b, size_t i,
                            size_t j, size_t m, size_t n) {
    const ak__gemm_config *cfg = job->cfg;
    float *c = job->C + i * job->ldc + j;
    const ak__gemm_epilogue *epi = job->epi.epi;
    if (epi && epi->fused && cfg->ukernel_epi && job->pc + job->kb == job->K &&
        m == (size_t)cfg->mr && n == (size_t)cfg->nr && job->alpha == 1.0f) {
        size_t row = job->epi.row0 + i, col = job->epi.col0 + j;
        ak__sgemm_tile_epi t = *epi->fused;
        if (t.bias) t.bias += row;
        if (t.z) t.z += row * job->ldc + col;
        if (t.col_bias) t.col_bias += col;
        cfg->ukernel_epi(job->kb, a, b, job->beta, c, job->ldc, &t);
        return;
    }
    cfg->ukernel(job->kb, job->alpha, a, b, job->beta, c, job->ldc, m, n);
    finish_tile(job, i, j, m, n);
}

/* Packs B slivers [begin, end) of the panel. Plain B is read row by row across all the
 * slivers (long sequential reads the hardware prefetcher follows) rather than sliver by
 * sliver (short reads at a large stride, which stall on cache misses). */
static void pack_b_range(const gemm_job *job, size_t begin, size_t end) {
    size_t nr = (size_t)job->cfg->nr, kb = job->kb;
    size_t full_end = min_sz(end, job->nb / nr); /* slivers before the ragged edge */
    if (!job->tb && nr == 16 && begin < full_end) {
        for (size_t p = 0; p < kb; p++) {
            const float *src = job->B + (job->pc + p) * job->ldb + job->jc;
            for (size_t s = begin; s < full_end; s++)
                for (size_t c = 0; c < 16; c++) job->bpack[(s * kb + p) * 16 + c] = src[s * 16 + c];
        }
        begin = full_end;
    }
    for (size_t s = begin; s < end; s++) {
        size_t j = s * nr;
        pack_b_sliver(job->tb, job->B, job->ldb, job->pc, job->kb, job->jc + j,
                      min_sz(nr, job->nb - j), nr, job->bpack + s * nr * job->kb);
    }
}

/* Unpacked fallback for one task when its thread cannot get a packing buffer. */
static void task_unpacked(const gemm_job *job, size_t i0, size_t mb, size_t j0, size_t n) {
    const float *a = job->ta ? job->A + job->pc * job->lda + i0 : job->A + i0 * job->lda + job->pc;
    const float *b = job->tb ? job->B + j0 * job->ldb + job->pc : job->B + job->pc * job->ldb + j0;
    gemm_simple(job->ta, job->tb, mb, n, job->kb, job->alpha, a, job->lda, b, job->ldb,
                job->beta, job->C + i0 * job->ldc + j0, job->ldc);
    finish_tile(job, i0, j0, mb, n);
}

/* Rows [i0, i0+mb) of A block `ib`, packed into this thread's buffer, times the whole
 * packed B panel. (Packing each B sliver right before use when there is a single A block
 * was tried: its short strided reads of B missed the caches and it lost to the row-wise
 * panel pack.) */
static void run_a_block(const gemm_job *job, pack_cache *cache, size_t ib) {
    const ak__gemm_config *cfg = job->cfg;
    size_t mr = (size_t)cfg->mr, nr = (size_t)cfg->nr;
    size_t i0 = ib * job->mc, mb = min_sz(job->mc, job->M - i0);
    float *apack = buf_reserve(&cache->a, &cache->a_cap, job->mc * job->kc);
    if (!apack) { /* out of memory: still correct, just slow */
        task_unpacked(job, i0, mb, job->jc, job->nb);
        return;
    }
    pack_a(job->ta, job->A, job->lda, i0, mb, job->pc, job->kb, mr, apack);
    for (size_t s = 0; s < job->n_slivers; s++) {
        size_t j = s * nr, n = min_sz(nr, job->nb - j);
        const float *bp = job->bpack + s * nr * job->kb;
        for (size_t i = 0; i < mb; i += mr)
            run_tile(job, apack + i * job->kb, bp, i0 + i, job->jc + j, min_sz(mr, mb - i), n);
    }
}

/* Copies one full 16-wide sliver of plain B (rows src + p·ldb, depth kb). */
static void pack_b16(const float *src, size_t ldb, size_t kb, float *dst) {
    for (size_t p = 0; p < kb; p++, src += ldb, dst += 16) {
#if defined(__SSE2__)
        for (size_t c = 0; c < 16; c += 4) _mm_storeu_ps(dst + c, _mm_loadu_ps(src + c));
#else
        for (size_t c = 0; c < 16; c++) dst[c] = src[c];
#endif
    }
}

/* Rows [p0, p1) of the next B sliver to pull toward L2 (plain B only). */
typedef struct b_prefetch {
    const float *src; /* NULL: nothing to prefetch */
    size_t ldb, p0, p1;
} b_prefetch;

/* Prefetches up to `rows` more rows of the next sliver. Spread between the row tiles so
 * a few misses are in flight at a time: issued all at once, they exhaust the miss
 * buffers and the loop stalls on them. */
static void prefetch_rows(b_prefetch *pf, size_t rows) {
    if (!pf->src) return;
    size_t end = min_sz(pf->p1, pf->p0 + rows);
    for (; pf->p0 < end; pf->p0++) __builtin_prefetch(pf->src + pf->p0 * pf->ldb, 0, 3);
}

/* Packs sliver s of the current slice into dst and aims pf at sliver s+1. */
static void pack_b_one(const gemm_job *job, size_t s, float *dst, b_prefetch *pf) {
    size_t nr = (size_t)job->cfg->nr, j = s * nr, n = min_sz(nr, job->nb - j);
    *pf = (b_prefetch){NULL, job->ldb, 0, job->kb};
    if (!job->tb && nr == 16 && n == 16) {
        const float *src = job->B + job->pc * job->ldb + job->jc + j;
        pack_b16(src, job->ldb, job->kb, dst);
        if (j + nr < job->nb) pf->src = src + nr;
        return;
    }
    pack_b_sliver(job->tb, job->B, job->ldb, job->pc, job->kb, job->jc + j, n, nr, dst);
}

/* B floats a fused slice packs at once (16 KB: in L1 with the A tile). */
#define FUSED_GROUP_FLOATS 4096u
#define FUSED_MAX_GROUP 8u
/* Slivers per group of a fused slice kb deep. */
static size_t fused_group(size_t kb, size_t nr) {
    size_t g = FUSED_GROUP_FLOATS / (kb * nr);
    return g < 1 ? 1 : g > FUSED_MAX_GROUP ? FUSED_MAX_GROUP : g;
}

/* The whole slice for a single A block (small M): B slivers are packed into an L1-sized
 * buffer right before its row tiles use them, while the next one is prefetched, so
 * reading B from memory overlaps the microkernel instead of being a separate pass over
 * the panel (that pass cost ~35% at 48×512×4608, where each B element is used only 48
 * times). A shallow slice packs a group of slivers (FUSED_GROUP_FLOATS of B) and runs
 * each row tile across the group: C is then written in runs of up to 8 tiles per row
 * instead of one 16-wide tile per row and sliver. */
static void run_fused_slice(const gemm_job *job, float *apack, float *bpack) {
    const ak__gemm_config *cfg = job->cfg;
    size_t mr = (size_t)cfg->mr, nr = (size_t)cfg->nr, M = job->M;
    size_t group = fused_group(job->kb, nr);
    size_t pf_rows = div_up(job->kb, div_up(M, mr));
    const float *ap = apack;
    if (job->apre) /* slices are stored one after another, round_up(M, MR) rows each */
        ap = job->apre + round_up(M, mr) * job->pc;
    else
        pack_a(job->ta, job->A, job->lda, 0, M, job->pc, job->kb, mr, apack);
    for (size_t s0 = 0; s0 < job->n_slivers; s0 += group) {
        size_t s1 = min_sz(job->n_slivers, s0 + group);
        b_prefetch pf = {NULL, 0, 0, 0};
        for (size_t s = s0; s < s1; s++) pack_b_one(job, s, bpack + (s - s0) * job->kb * nr, &pf);
        for (size_t i = 0; i < M; i += mr) {
            prefetch_rows(&pf, pf_rows);
            for (size_t s = s0; s < s1; s++) {
                size_t j = s * nr, n = min_sz(nr, job->nb - j);
                run_tile(job, ap + i * job->kb, bpack + (s - s0) * job->kb * nr, i, job->jc + j,
                         min_sz(mr, M - i), n);
            }
        }
    }
}

/* Block size: the AK_GEMM_* parameter when set, else the variant's default; then evened
 * out over the blocks it implies (K=257 with KC=256 becomes 2×129, not 256+1). */
static size_t pick_block(ak__param_id id, int def, size_t total, size_t unit) {
    int64_t v = ak__param_int(id);
    size_t b = v > 0 ? (size_t)v : (size_t)def;
    b = round_up(b ? b : unit, unit);
    size_t nblocks = div_up(total, b);
    return round_up(div_up(total, nblocks ? nblocks : 1), unit);
}

static int pool_threads(ak_threadpool **pool) {
    int n = 1;
    if (!*pool && ak_threadpool_global(pool) != AK_OK) *pool = NULL;
    if (*pool && ak_threadpool_size(*pool, &n) != AK_OK) n = 1;
    return n;
}

static void run_parallel(ak_threadpool *pool, int nthreads, size_t n, size_t grain,
                         ak_parallel_fn fn, void *ctx) {
    if (nthreads <= 1 || n <= 1 || ak_threadpool_parallel_for(pool, n, grain, fn, ctx) != AK_OK)
        fn(ctx, 0, n, 0);
}

/* The whole loop nest on one region of C, on the calling thread. */
static void blocked_region(const ak__gemm_config *cfg, int trans_a, int trans_b, size_t M,
                           size_t N, size_t K, float alpha, const float *A, size_t lda,
                           const float *B, size_t ldb, float beta, float *C, size_t ldc,
                           const float *apre, gemm_epi_at epi) {
    size_t mr = (size_t)cfg->mr, nr = (size_t)cfg->nr;
    gemm_job job = {.cfg = cfg, .ta = trans_a, .tb = trans_b, .M = M, .K = K, .alpha = alpha,
                    .A = A, .B = B, .lda = lda, .ldb = ldb, .ldc = ldc, .C = C, .apre = apre,
                    .epi = epi};
    job.kc = pick_block(AK_PARAM_GEMM_KC, cfg->kc, K, 1);
    job.mc = pick_block(AK_PARAM_GEMM_MC, cfg->mc, M, mr);
    size_t nc = pick_block(AK_PARAM_GEMM_NC, cfg->nc, N, nr);
    /* Up to FUSED_MAX_M rows all of A is one block (unless MC is forced) and B goes
     * sliver by sliver: measured faster than MC-row blocks sharing a packed B panel. */
    if (M <= FUSED_MAX_M && ak__param_int(AK_PARAM_GEMM_MC) <= 0) job.mc = round_up(M, mr);
    size_t m_blocks = div_up(M, job.mc);
    int fused = m_blocks == 1;
    if (!fused) job.apre = NULL;
    pack_cache *cache = cache_get();
    size_t fused_b = job.kc * nr * fused_group(job.kc, nr);
    job.bpack = cache ? buf_reserve(&cache->b, &cache->b_cap, fused ? fused_b : job.kc * nc) : NULL;
    float *apack = fused && job.bpack ? buf_reserve(&cache->a, &cache->a_cap, job.mc * job.kc) : NULL;
    if (!job.bpack || (fused && !apack)) { /* out of memory: still correct, just slow */
        gemm_simple(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        epi_whole(&epi, C, ldc, M, N);
        return;
    }
    for (job.jc = 0; job.jc < N; job.jc += nc) {
        job.nb = min_sz(nc, N - job.jc);
        job.n_slivers = div_up(job.nb, nr);
        for (job.pc = 0; job.pc < K; job.pc += job.kc) {
            job.kb = min_sz(job.kc, K - job.pc);
            job.beta = job.pc == 0 ? beta : 1.0f;
            if (fused) {
                run_fused_slice(&job, apack, job.bpack);
                continue;
            }
            pack_b_range(&job, 0, job.n_slivers);
            for (size_t ib = 0; ib < m_blocks; ib++) run_a_block(&job, cache, ib);
        }
    }
}

/* ---- public entry point ------------------------------------------------------------ */

/* C = beta·C, with beta == 0 writing zeros without reading C. */
static void scale_c(size_t M, size_t N, float beta, float *C, size_t ldc) {
    for (size_t i = 0; i < M; i++)
        for (size_t j = 0; j < N; j++)
            C[i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[i * ldc + j];
}

/* 1 when rows·ld floats fit in size_t bytes. */
static int extent_ok(size_t rows, size_t ld) {
    size_t elems, bytes;
    return !__builtin_mul_overflow(rows, ld, &elems) &&
           !__builtin_mul_overflow(elems, sizeof(float), &bytes);
}

static ak_status sgemm_validate(ak_trans ta, ak_trans tb, size_t M, size_t N, size_t K,
                                const float *A, size_t lda, const float *B, size_t ldb,
                                const float *C, size_t ldc) {
    AK_ARG_CHECK(ta == AK_NO_TRANS || ta == AK_TRANS,
                 "ak_sgemm: trans_a must be AK_NO_TRANS or AK_TRANS (got %d)", (int)ta);
    AK_ARG_CHECK(tb == AK_NO_TRANS || tb == AK_TRANS,
                 "ak_sgemm: trans_b must be AK_NO_TRANS or AK_TRANS (got %d)", (int)tb);
    size_t mn, mnk;
    AK_ARG_CHECK(!__builtin_mul_overflow(M, N, &mn) && !__builtin_mul_overflow(mn, K, &mnk),
                 "ak_sgemm: M*N*K overflows (M=%zu N=%zu K=%zu)", M, N, K);
    size_t a_rows = ta ? K : M, a_cols = ta ? M : K;
    size_t b_rows = tb ? N : K, b_cols = tb ? K : N;
    AK_ARG_CHECK(lda >= a_cols, "ak_sgemm: lda=%zu < %zu (columns of stored A)", lda, a_cols);
    AK_ARG_CHECK(ldb >= b_cols, "ak_sgemm: ldb=%zu < %zu (columns of stored B)", ldb, b_cols);
    AK_ARG_CHECK(ldc >= N, "ak_sgemm: ldc=%zu < N=%zu", ldc, N);
    AK_ARG_CHECK(A || M == 0 || K == 0, "ak_sgemm: A is NULL with M=%zu K=%zu", M, K);
    AK_ARG_CHECK(B || N == 0 || K == 0, "ak_sgemm: B is NULL with K=%zu N=%zu", K, N);
    AK_ARG_CHECK(C || M == 0 || N == 0, "ak_sgemm: C is NULL with M=%zu N=%zu", M, N);
    AK_ARG_CHECK(extent_ok(a_rows, lda) && extent_ok(b_rows, ldb) && extent_ok(M, ldc),
                 "ak_sgemm: a matrix extent (rows × leading dimension) overflows");
    return AK_OK;
}

ak_status ak_sgemm(ak_trans trans_a, ak_trans trans_b, size_t M, size_t N, size_t K,
                   float alpha, const float *A, size_t lda, const float *B, size_t ldb,
                   float beta, float *C, size_t ldc, ak_threadpool *pool) {
    AK_ENSURE_INIT();
    AK_CHECK(sgemm_validate(trans_a, trans_b, M, N, K, A, lda, B, ldb, C, ldc));
    if (M == 0 || N == 0) return AK_OK;
    if (K == 0 || alpha == 0.0f) {
        scale_c(M, N, beta, C, ldc);
        return AK_OK;
    }
    ak__kernels_active()->sgemm((int)trans_a, (int)trans_b, M, N, K, alpha, A, lda, B, ldb,
                                beta, C, ldc, pool);
    return AK_OK;
}

/* ---- threading: independent regions of C ------------------------------------------ */

/* With several threads C is cut into one region per thread along M or N, and each thread
 * runs the whole loop nest on its region with its own packed panels: no barrier per
 * slice. Cutting M makes every thread pack all of B, cutting N all of A, so the cut goes
 * across the smaller operand's dimension. */
typedef struct region_job {
    const ak__gemm_config *cfg;
    int ta, tb, split_n;
    size_t M, N, K, unit, nregions;
    float alpha, beta;
    const float *A, *B;
    size_t lda, ldb, ldc;
    float *C;
    const float *apre; /* cut along N with few rows: A packed once for all regions */
    size_t kc;         /* depth block of apre's slices */
    const ak__gemm_epilogue *epi;
} region_job;

static void region_range(void *vjob, size_t begin, size_t end, int thread_index) {
    const region_job *r = vjob;
    (void)thread_index;
    size_t total = r->split_n ? r->N : r->M;
    size_t units = div_up(total, r->unit);
    for (size_t g = begin; g < end; g++) {
        size_t lo = min_sz(total, units * g / r->nregions * r->unit);
        size_t hi = min_sz(total, units * (g + 1) / r->nregions * r->unit);
        if (lo >= hi) continue;
        const float *a = r->A, *b = r->B;
        float *c;
        if (r->split_n) {
            b += r->tb ? lo * r->ldb : lo;
            c = r->C + lo;
            blocked_region(r->cfg, r->ta, r->tb, r->M, hi - lo, r->K, r->alpha, a, r->lda, b,
                           r->ldb, r->beta, c, r->ldc, r->apre, (gemm_epi_at){r->epi, 0, lo});
        } else {
            a += r->ta ? lo : lo * r->lda;
            c = r->C + lo * r->ldc;
            blocked_region(r->cfg, r->ta, r->tb, hi - lo, r->N, r->K, r->alpha, a, r->lda, b,
                           r->ldb, r->beta, c, r->ldc, NULL, (gemm_epi_at){r->epi, lo, 0});
        }
    }
}

/* Packs depth slices [begin, end) of op(A) into r->apre (all M rows each). */
static void prepack_range(void *vjob, size_t begin, size_t end, int thread_index) {
    const region_job *r = vjob;
    (void)thread_index;
    size_t mp = round_up(r->M, (size_t)r->cfg->mr);
    for (size_t s = begin; s < end; s++) {
        size_t p0 = s * r->kc, kb = min_sz(r->kc, r->K - p0);
        pack_a(r->ta, r->A, r->lda, 0, r->M, p0, kb, (size_t)r->cfg->mr,
               (float *)r->apre + mp * p0);
    }
}

/* For a cut along N on the fused path (few rows), packs all of op(A) once, in parallel,
 * instead of once per region: with regions narrower than M·~20 columns the repeated
 * A packing cost more than the regions' compute saved (49×512×4608 on 2 threads).
 * Leaves apre NULL (regions pack their own) when MC is forced or memory is short. */
static void prepack_a(region_job *r, ak_threadpool *pool, int nthreads) {
    if (r->M > FUSED_MAX_M || ak__param_int(AK_PARAM_GEMM_MC) > 0) return;
    pack_cache *cache = cache_get();
    size_t mp = round_up(r->M, (size_t)r->cfg->mr);
    if (!cache || !buf_reserve(&cache->pre, &cache->pre_cap, mp * r->K)) return;
    r->kc = pick_block(AK_PARAM_GEMM_KC, r->cfg->kc, r->K, 1); /* as blocked_region does */
    r->apre = cache->pre;
    run_parallel(pool, nthreads, div_up(r->K, r->kc), 1, prepack_range, r);
}

/* Regions for a cut along N. More regions than threads, handed out dynamically, keep
 * both cores busy when one runs slower (shared VM cores, an uneven last region); the
 * price is packing A once per region, small next to the region's work while each keeps
 * REGION_MIN_SLIVERS slivers. */
static size_t n_regions(size_t slivers, size_t nthreads) {
    size_t n = min_sz(slivers / REGION_MIN_SLIVERS, nthreads * REGIONS_PER_THREAD);
    return n > nthreads ? n : nthreads;
}

/* ---- a few rows times a row-major B: no packing ----------------------------------------- */

/* With M ≤ ROW_GEMM_MAX_M rows and B not transposed, C's rows are sums of B's rows
 * (C[i,:] = Σ_p alpha·A[i,p]·B[p,:]): B is streamed once, row by row, into C rows that
 * stay in L1, instead of being packed (a copy of all of B) for a microkernel that would
 * use one row of its tile. A classifier's 1×1280 × 1280×1000 ran 3× faster this way
 * (MobileNetV2's last layer, 1 thread). Columns are cut into chunks for the threads. */
#define ROW_GEMM_MAX_M 4u
#define ROW_GEMM_L1_FLOATS 4096u /* the M rows of a chunk of C: 16 KiB */

typedef struct row_gemm_job {
    size_t M, N, K, chunk, lda, ldb, ldc;
    int ta;
    float alpha, beta;
    const float *A, *B;
    float *C;
    const ak__gemm_epilogue *epi;
    ak__kf_f32_axpy *axpy;
} row_gemm_job;

static void row_gemm_range(void *vjob, size_t begin, size_t end, int thread_index) {
    const row_gemm_job *j = vjob;
    (void)thread_index;
    for (size_t ch = begin; ch < end; ch++) {
        size_t j0 = ch * j->chunk, nb = min_sz(j->chunk, j->N - j0);
        for (size_t i = 0; i < j->M; i++) {
            float *c = j->C + i * j->ldc + j0;
            for (size_t q = 0; q < nb; q++) c[q] = j->beta == 0.0f ? 0.0f : j->beta * c[q];
        }
        for (size_t p = 0; p < j->K; p++) {
            const float *b = j->B + p * j->ldb + j0;
            for (size_t i = 0; i < j->M; i++) {
                float a = j->alpha * (j->ta ? j->A[p * j->lda + i] : j->A[i * j->lda + p]);
                j->axpy(j->C + i * j->ldc + j0, a, b, nb);
            }
        }
        if (j->epi) j->epi->fn(j->epi->ctx, j->C + j0, j->ldc, 0, j0, j->M, nb);
    }
}

static void row_gemm(int trans_a, size_t M, size_t N, size_t K, float alpha, const float *A,
                     size_t lda, const float *B, size_t ldb, float beta, float *C, size_t ldc,
                     ak_threadpool *pool, const ak__gemm_epilogue *epi, ak__kf_f32_axpy *axpy) {
    int nthreads = M * N * K < PARALLEL_GEMM_MACS ? 1 : pool_threads(&pool);
    size_t chunk = round_up(div_up(N, (size_t)nthreads), 16);
    chunk = min_sz(chunk, ROW_GEMM_L1_FLOATS / M / 16 * 16);
    row_gemm_job j = {M, N, K, chunk, lda, ldb, ldc, trans_a, alpha, beta, A, B, C, epi, axpy};
    run_parallel(pool, nthreads, div_up(N, chunk), 1, row_gemm_range, &j);
}

void ak__sgemm_blocked(const ak__gemm_config *cfg, int trans_a, int trans_b, size_t M,
                       size_t N, size_t K, float alpha, const float *A, size_t lda,
                       const float *B, size_t ldb, float beta, float *C, size_t ldc,
                       ak_threadpool *pool) {
    ak__sgemm_blocked_epi(cfg, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc,
                          pool, NULL);
}

void ak__sgemm_blocked_epi(const ak__gemm_config *cfg, int trans_a, int trans_b, size_t M,
                           size_t N, size_t K, float alpha, const float *A, size_t lda,
                           const float *B, size_t ldb, float beta, float *C, size_t ldc,
                           ak_threadpool *pool, const ak__gemm_epilogue *epi) {
    gemm_epi_at whole = {epi, 0, 0};
    if (M * N * K <= SMALL_GEMM_MACS || K == 0) {
        gemm_simple(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        epi_whole(&whole, C, ldc, M, N);
        return;
    }
    ak__kf_f32_axpy *axpy = ak__kernels_active()->f32_axpy;
    if (M <= ROW_GEMM_MAX_M && !trans_b && axpy) {
        row_gemm(trans_a, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, pool, epi, axpy);
        return;
    }
    int nthreads = M * N * K < PARALLEL_GEMM_MACS ? 1 : pool_threads(&pool);
    if (nthreads <= 1) {
        blocked_region(cfg, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc,
                       NULL, whole);
        return;
    }
    region_job r = {.cfg = cfg, .ta = trans_a, .tb = trans_b, .M = M, .N = N, .K = K,
                    .alpha = alpha, .beta = beta, .A = A, .B = B, .lda = lda, .ldb = ldb,
                    .ldc = ldc, .C = C, .nregions = (size_t)nthreads, .epi = epi};
    r.split_n = M < N;
    r.unit = (size_t)(r.split_n ? cfg->nr : cfg->mr);
    if (r.split_n) {
        r.nregions = n_regions(div_up(N, r.unit), (size_t)nthreads);
        prepack_a(&r, pool, nthreads);
    }
    run_parallel(pool, nthreads, r.nregions, 1, region_range, &r);
}
