/* Linear layers over stored weights: the public ak_wtype_* / ak_quantize_row /
 * ak_dequantize_row / ak_linear entry points. ak_linear validates, quantizes the
 * activations to Q8_0 for quantized weights (into a grow-only per-thread buffer, so
 * steady-state calls allocate nothing), and splits the N output columns over the pool;
 * the per-type kernels come from the dispatch table. */
#include "kernels/linear.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "kernels/api_check.h"
#include "kernels/kquant.h"

/* Below this many weight bytes a call runs on the calling thread: waking a worker costs
 * a few µs, which is what streaming ~64 KiB takes. */
#define PARALLEL_MIN_BYTES (64u << 10)
/* Output columns per scheduling unit (a multiple of every kernel's row tile). */
#define ROW_UNIT 16u
/* Chunks per thread for T = 1: a few, so a thread slowed by a noisy neighbour gets
 * fewer. With T > 1 each thread takes one contiguous range: the tiles prefetch the next
 * block of rows, so every range start is cold (T = 16 f16 2048×768 on 2 threads: 330 µs
 * with 4 chunks per thread, 280 µs with one). */
#define CHUNKS_PER_THREAD 4u

static size_t div_up(size_t a, size_t b) { return (a + b - 1) / b; }

/* ---- weight types ------------------------------------------------------------------ */

int ak__linear_slot(ak_wtype wtype) {
    switch (wtype) {
    case AK_WTYPE_F32: return AK__LIN_F32;
    case AK_WTYPE_F16: return AK__LIN_F16;
    case AK_WTYPE_BF16: return AK__LIN_BF16;
    case AK_WTYPE_Q8_0: return AK__LIN_Q8_0;
    case AK_WTYPE_Q4_0: return AK__LIN_Q4_0;
    case AK_WTYPE_Q2_K: return AK__LIN_Q2_K;
    case AK_WTYPE_Q3_K: return AK__LIN_Q3_K;
    case AK_WTYPE_Q4_K: return AK__LIN_Q4_K;
    case AK_WTYPE_Q5_K: return AK__LIN_Q5_K;
    case AK_WTYPE_Q6_K: return AK__LIN_Q6_K;
    case AK_WTYPE_Q8_K: return AK__LIN_Q8_K;
    case AK_WTYPE_IQ4_NL: return AK__LIN_IQ4_NL;
    case AK_WTYPE_IQ4_XS: return AK__LIN_IQ4_XS;
    }
    return -1;
}

const char *ak_wtype_name(ak_wtype wtype) {
    static const char *const names[AK__LINEAR_SLOTS] = {"f32",  "f16",  "bf16", "q8_0",
                                                                "q4_0", "q2_K", "q3_K", "q4_K",
                                                                "q5_K", "q6_K", "q8_K",
                                                                "iq4_nl", "iq4_xs"};
    int slot = ak__linear_slot(wtype);
    return slot < 0 ? "unknown" : names[slot];
}

static int is_quantized(ak_wtype wtype) {
    return wtype == AK_WTYPE_Q8_0 || wtype == AK_WTYPE_Q4_0 || wtype == AK_WTYPE_IQ4_NL;
}

/* Row size of K elements; the caller has checked the type. */
static ak_status row_bytes(const char *fn, ak_wtype wtype, size_t K, size_t *bytes) {
    size_t per, unit = 1; /* bytes per unit of `unit` elements */
    switch (wtype) {
    case AK_WTYPE_F32: per = 4; break;
    case AK_WTYPE_F16:
    case AK_WTYPE_BF16: per = 2; break;
    case AK_WTYPE_Q8_0: per = sizeof(ak__block_q8_0), unit = AK__QK; break;
    default:
        if (!ak__kquant_block(wtype, &unit, &per)) per = sizeof(ak__block_q4_0), unit = AK__QK;
        break;
    }
    AK_ARG_CHECK(K % unit == 0, "%s: K = %zu is not a multiple of the %s block (%zu)", fn, K,
                 ak_wtype_name(wtype), unit);
    AK_ARG_CHECK(K / unit <= SIZE_MAX / per, "%s: K = %zu overflows a row's size", fn, K);
    *bytes = K / unit * per;
    return AK_OK;
}

static ak_status check_wtype(const char *fn, ak_wtype wtype) {
    AK_ARG_CHECK(ak__linear_slot(wtype) >= 0, "%s: unknown weight type %d", fn, (int)wtype);
    return AK_OK;
}

ak_status ak_wtype_row_bytes(ak_wtype wtype, size_t K, size_t *bytes) {
    static const char fn[] = "ak_wtype_row_bytes";
    AK_ARG_CHECK(bytes, "%s: bytes is NULL", fn);
    AK_CHECK(check_wtype(fn, wtype));
    return row_bytes(fn, wtype, K, bytes);
}

/* src and dst of a row conversion: K f32 values and one stored row. */
static ak_status check_row_args(const char *fn, ak_wtype wtype, const void *f32, const char *fname,
                                const void *stored, const char *sname, size_t K) {
    size_t bytes = 0;
    AK_CHECK(check_wtype(fn, wtype));
    AK_CHECK(row_bytes(fn, wtype, K, &bytes));
    AK_ARG_CHECK(K <= SIZE_MAX / sizeof(float), "%s: K = %zu overflows", fn, K);
    AK_CHECK(ak__check_buf(fn, fname, f32, K, sizeof(float)));
    AK_CHECK(ak__check_buf(fn, sname, stored, bytes, 1));
    return ak__check_overlap(fn, "dst", stored, bytes, "src", f32, K * sizeof(float), 0);
}

ak_status ak_quantize_row(ak_wtype wtype, const float *src, void *dst, size_t K) {
    AK_CHECK(check_row_args("ak_quantize_row", wtype, src, "src", dst, "dst", K));
    size_t e, b;
    if (K && ak__kquant_block(wtype, &e, &b)) ak__kquant_quantize_ref(wtype, src, dst, K);
    else if (K) ak__quantize_row_ref(wtype, src, dst, K);
    return AK_OK;
}

ak_status ak_dequantize_row(ak_wtype wtype, const void *src, float *dst, size_t K) {
    AK_CHECK(check_row_args("ak_dequantize_row", wtype, dst, "dst", src, "src", K));
    size_t e, b;
    if (K && ak__kquant_block(wtype, &e, &b)) ak__kquant_dequantize_ref(wtype, src, dst, K);
    else if (K) ak__dequantize_row_ref(wtype, src, dst, K);
    return AK_OK;
}

/* ---- per-thread activation scratch ------------------------------------------------- */

typedef struct x_scratch {
    void *buf;
    size_t cap; /* bytes */
} x_scratch;

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;
static int scratch_key_ok;

static void scratch_destroy(void *p) {
    x_scratch *s = p;
    ak_free(s->buf);
    free(s);
}

static void scratch_key_init(void) {
    scratch_key_ok = pthread_key_create(&scratch_key, scratch_destroy) == 0;
}

/* At least `bytes` of this thread's scratch (64-byte aligned; grows, never shrinks). */
static ak_status scratch_get(size_t bytes, void **out) {
    pthread_once(&scratch_once, scratch_key_init);
    if (!scratch_key_ok) return AK_FAIL(AK_ERR_INTERNAL, "ak_linear: no thread-local key");
    x_scratch *s = pthread_getspecific(scratch_key);
    if (!s) {
        s = calloc(1, sizeof *s);
        if (!s || pthread_setspecific(scratch_key, s) != 0) {
            free(s);
            return AK_FAIL(AK_ERR_NO_MEMORY, "ak_linear: no memory for the activation scratch");
        }
    }
    if (s->cap < bytes) {
        ak_free(s->buf);
        s->buf = NULL;
        s->cap = 0;
        AK_CHECK(ak_alloc(bytes, &s->buf));
        s->cap = bytes;
    }
    *out = s->buf;
    return AK_OK;
}

/* ---- ak_linear ---------------------------------------------------------------------- */

/* rows × ld + cols elements of `es` bytes, or 0 on overflow (never a valid extent here,
 * the callers only ask for non-empty ones). */
static size_t extent_bytes(size_t rows, size_t ld, size_t cols, size_t es) {
    size_t e, b;
    if (__builtin_mul_overflow(rows - 1, ld, &e) || __builtin_add_overflow(e, cols, &e) ||
        __builtin_mul_overflow(e, es, &b))
        return 0;
    return b;
}

static ak_status linear_validate(ak_wtype wtype, const void *W, size_t N, size_t K,
                                 const float *X, size_t ldx, size_t T, const float *Y,
                                 size_t ldy, size_t *rb) {
    static const char fn[] = "ak_linear";
    AK_CHECK(check_wtype(fn, wtype));
    AK_CHECK(row_bytes(fn, wtype, K, rb));
    AK_ARG_CHECK(ldx >= K, "%s: ldx = %zu < K = %zu", fn, ldx, K);
    AK_ARG_CHECK(ldy >= N, "%s: ldy = %zu < N = %zu", fn, ldy, N);
    if (N == 0 || T == 0) return AK_OK;
    size_t wbytes, ybytes = extent_bytes(T, ldy, N, sizeof(float));
    AK_ARG_CHECK(!__builtin_mul_overflow(N, *rb, &wbytes) && ybytes,
                 "%s: N = %zu, T = %zu, K = %zu overflow the address space", fn, N, T, K);
    AK_CHECK(ak__check_buf(fn, "Y", Y, 1, sizeof(float)));
    if (K == 0) return AK_OK;
    size_t xbytes = extent_bytes(T, ldx, K, sizeof(float));
    AK_ARG_CHECK(xbytes, "%s: T = %zu rows of ldx = %zu overflow", fn, T, ldx);
    AK_CHECK(ak__check_buf(fn, "W", W, 1, 1));
    AK_CHECK(ak__check_buf(fn, "X", X, 1, sizeof(float)));
    AK_CHECK(ak__check_overlap(fn, "Y", Y, ybytes, "X", X, xbytes, 0));
    return ak__check_overlap(fn, "Y", Y, ybytes, "W", W, wbytes, 0);
}

/* K == 0: every dot product is empty. */
static void linear_empty(size_t N, size_t T, float *Y, size_t ldy, int accumulate) {
    if (accumulate) return;
    for (size_t t = 0; t < T; t++) memset(Y + t * ldy, 0, N * sizeof(float));
}

/* A row stride (bytes) that puts every row at the same L1 set (a multiple of 4 KiB) gets
 * 64 bytes more: a tile reads up to 6 activation rows and 4 weight rows at the same k,
 * and 10 lines in one set of the 8-way L1 evict each other. K = 2048 f32 activations
 * (8 KiB rows) ran at 64 % of the FMA peak at T = 128; restrided, at 82 %. */
static size_t unaliased(size_t row_bytes) {
    return row_bytes % 4096 == 0 ? row_bytes + 64 : row_bytes;
}

/* Quantizes the T activation rows into the scratch layout of ak__linear_job: scales,
 * block sums, then values (rows 64-byte aligned when K is a multiple of 64). */
static ak_status quantize_x(const ak__kernels *k, ak_wtype wtype, ak__linear_job *job) {
    size_t ldq = job->T > 1 ? unaliased(job->K) : job->K, ldb = ldq / AK__QK;
    size_t dbytes = job->T * ldb * sizeof(float);
    void *buf = NULL;
    AK_CHECK(scratch_get(2 * dbytes + job->T * ldq + 64, &buf));
    float *xd = buf;
    int32_t *xs = (int32_t *)(xd + job->T * ldb);
    int8_t *xq = (int8_t *)buf + (2 * dbytes + 63) / 64 * 64;
    for (size_t t = 0; t < job->T; t++) {
        k->linear_quantize_x(job->X + t * job->ldx, job->K, xd + t * ldb, xs + t * ldb,
                             xq + t * ldq);
        ak__linear_offsets(wtype, xs + t * ldb, job->K / AK__QK);
    }
    job->xd = xd;
    job->xo = xs;
    job->xq = xq;
    job->ldq = ldq;
    return AK_OK;
}

/* Quantizes the T activation rows to Q8_K for super-block weights: scales, sums of 16,
 * then values (rows 64-byte aligned; K is a multiple of 256). */
static ak_status quantize_x_k(const ak__kernels *k, ak__linear_job *job) {
    size_t ldq = job->T > 1 ? unaliased(job->K) : job->K, nb = job->K / AK__QK_K;
    size_t dbytes = job->T * nb * sizeof(float), sbytes = job->T * nb * 16 * sizeof(int16_t);
    size_t head = (dbytes + sbytes + 63) / 64 * 64;
    void *buf = NULL;
    AK_CHECK(scratch_get(head + job->T * ldq + 64, &buf));
    float *kd = buf;
    int16_t *kbs = (int16_t *)(void *)((uint8_t *)buf + dbytes);
    int8_t *xq = (int8_t *)buf + head;
    for (size_t t = 0; t < job->T; t++)
        k->linear_quantize_xk(job->X + t * job->ldx, job->K, kd + t * nb, kbs + t * nb * 16,
                              xq + t * ldq);
    job->kd = kd;
    job->kbs = kbs;
    job->xq = xq;
    job->ldq = ldq;
    return AK_OK;
}

/* Float activations whose rows would alias in L1 (see unaliased) are copied to the
 * scratch with a padded stride. */
static ak_status restride_x(ak__linear_job *job) {
    size_t ld = unaliased(job->ldx * sizeof(float)) / sizeof(float);
    if (job->T == 1 || ld == job->ldx) return AK_OK;
    void *buf = NULL;
    AK_CHECK(scratch_get(job->T * ld * sizeof(float), &buf));
    float *x = buf;
    for (size_t t = 0; t < job->T; t++)
        memcpy(x + t * ld, job->X + t * job->ldx, job->K * sizeof(float));
    job->X = x;
    job->ldx = ld;
    return AK_OK;
}

/* bf16 weights, T >= 2: the activations rounded to bf16 (xb) and widened back (X), as
 * llama.cpp computes bf16 matrix products, so that CPUs with AVX512-BF16 take two
 * products per lane and instruction (vdpbf16ps) and every variant computes the same
 * products (see ak__linear_job.xb). */
static ak_status round_x_bf16(const ak__kernels *k, ak__linear_job *job) {
    size_t ld = unaliased(job->K * sizeof(float)) / sizeof(float);
    size_t ldb = (job->K + 31) / 32 * 32; /* 64-byte rows */
    ldb = unaliased(ldb * sizeof(uint16_t)) / sizeof(uint16_t);
    void *buf = NULL;
    AK_CHECK(scratch_get(job->T * (ld * sizeof(float) + ldb * sizeof(uint16_t)), &buf));
    float *x = buf;
    uint16_t *xb = (uint16_t *)(x + job->T * ld);
    for (size_t t = 0; t < job->T; t++) {
        k->f32_to_bf16(xb + t * ldb, job->X + t * job->ldx, job->K);
        k->bf16_to_f32(x + t * ld, xb + t * ldb, job->K);
    }
    job->X = x;
    job->ldx = ld;
    job->xb = xb;
    job->ldxb = ldb;
    return AK_OK;
}

/* ---- splitting the work: the rows of all matrices over the threads --------------------- */

enum { MAX_MULTI = 8 }; /* matrices of one ak_linear_multi call */

typedef struct par_ctx {
    ak__linear_fn fn;
    ak__linear_job jobs[MAX_MULTI]; /* one per matrix, sharing X (or its quantized copy) */
    size_t first_unit[MAX_MULTI + 1]; /* matrix i owns units [first_unit[i], first_unit[i+1]) */
    size_t n_jobs;
} par_ctx;

/* Units [begin, end) of the concatenated row space, matrix by matrix. */
static void run_units(void *vctx, size_t begin, size_t end, int thread_index) {
    const par_ctx *c = vctx;
    (void)thread_index;
    for (size_t i = 0; i < c->n_jobs && begin < end; i++) {
        size_t u0 = c->first_unit[i], u1 = c->first_unit[i + 1];
        if (begin >= u1) continue;
        size_t stop = end < u1 ? end : u1, N = (u1 - u0) * ROW_UNIT;
        size_t n1 = (stop - u0) * ROW_UNIT;
        N = c->jobs[i].N < N ? c->jobs[i].N : N;
        c->fn(&c->jobs[i], (begin - u0) * ROW_UNIT, n1 < N ? n1 : N);
        begin = stop;
    }
}

/* Splits the rows over the pool, or runs them here when the call is small. */
static void run_columns(par_ctx *c, ak_threadpool *pool) {
    int nthreads = 1;
    size_t units = c->first_unit[c->n_jobs], bytes = 0;
    for (size_t i = 0; i < c->n_jobs; i++) bytes += c->jobs[i].N * c->jobs[i].row_bytes;
    size_t T = c->jobs[0].T;
    if (bytes * T >= PARALLEL_MIN_BYTES && units > 1) {
        if (!pool && ak_threadpool_global(&pool) != AK_OK) pool = NULL;
        if (pool && ak_threadpool_size(pool, &nthreads) != AK_OK) nthreads = 1;
    }
    size_t grain = div_up(units, (size_t)nthreads * (T == 1 ? CHUNKS_PER_THREAD : 1));
    if (nthreads <= 1 || ak_threadpool_parallel_for(pool, units, grain, run_units, c) != AK_OK)
        run_units(c, 0, units, 0);
}

/* The shared input of a call: validated against every output, quantized or restrided
 * once into job (whose W, N, Y, ldy the caller fills per matrix). */
static ak_status prepare_input(const ak__kernels *k, ak_wtype wtype, ak__linear_job *job) {
    if (ak__kquant_uses_q8_k(wtype)) return quantize_x_k(k, job);
    if (is_quantized(wtype)) return quantize_x(k, wtype, job);
    if (wtype == AK_WTYPE_BF16 && job->T >= 2) return round_x_bf16(k, job);
    return restride_x(job);
}

ak_status ak_linear(ak_wtype wtype, const void *W, size_t N, size_t K, const float *X,
                    size_t ldx, size_t T, float *Y, size_t ldy, int accumulate,
                    ak_threadpool *pool) {
    ak_linear_out out = {W, N, Y, ldy};
    return ak_linear_multi(wtype, K, X, ldx, T, &out, 1, accumulate, pool);
}

/* The outputs of one call must not overlap each other (each was checked against X, W). */
static ak_status check_outputs_apart(const ak_linear_out *outs, size_t n_outs, size_t T) {
    for (size_t i = 0; i < n_outs; i++)
        for (size_t j = i + 1; j < n_outs; j++) {
            if (!outs[i].N || !outs[j].N) continue;
            AK_CHECK(ak__check_overlap("ak_linear_multi", "Y", outs[i].Y,
                                       extent_bytes(T, outs[i].ldy, outs[i].N, sizeof(float)),
                                       "another Y", outs[j].Y,
                                       extent_bytes(T, outs[j].ldy, outs[j].N, sizeof(float)), 0));
        }
    return AK_OK;
}

ak_status ak_linear_multi(ak_wtype wtype, size_t K, const float *X, size_t ldx, size_t T,
                          const ak_linear_out *outs, size_t n_outs, int accumulate,
                          ak_threadpool *pool) {
    size_t rb = 0;
    AK_ENSURE_INIT();
    AK_ARG_CHECK(outs && n_outs >= 1 && n_outs <= MAX_MULTI,
                 "ak_linear_multi: %zu outputs (1 to %d)", n_outs, (int)MAX_MULTI);
    size_t live = 0;
    for (size_t i = 0; i < n_outs; i++) {
        AK_CHECK(linear_validate(wtype, outs[i].W, outs[i].N, K, X, ldx, T, outs[i].Y,
                                 outs[i].ldy, &rb));
        if (outs[i].N == 0 || T == 0) continue;
        if (K == 0) linear_empty(outs[i].N, T, outs[i].Y, outs[i].ldy, accumulate);
        else live++;
    }
    if (live == 0) return AK_OK;
    AK_CHECK(check_outputs_apart(outs, n_outs, T));
    const ak__kernels *k = ak__kernels_active();
    par_ctx c = {.fn = k->linear[ak__linear_slot(wtype)]};
    ak__linear_job input = {.row_bytes = rb, .K = K, .T = T, .X = X, .ldx = ldx,
                            .accumulate = accumulate != 0};
    AK_CHECK(prepare_input(k, wtype, &input));
    for (size_t i = 0; i < n_outs; i++) {
        if (outs[i].N == 0) continue;
        ak__linear_job *j = &c.jobs[c.n_jobs];
        *j = input;
        j->W = outs[i].W;
        j->N = outs[i].N;
        j->Y = outs[i].Y;
        j->ldy = outs[i].ldy;
        c.first_unit[c.n_jobs + 1] = c.first_unit[c.n_jobs] + div_up(outs[i].N, ROW_UNIT);
        c.n_jobs++;
    }
    run_columns(&c, pool);
    return AK_OK;
}
