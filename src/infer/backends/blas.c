/* The OpenBLAS, BLIS and oneDNN backends: cblas_sgemm (dnnl_sgemm for oneDNN, row-major
 * too) from a library loaded with dlopen at run time (no build-time link). Each library is set to one thread; accelkit's pool splits
 * every product into blocks of rows (or columns, whichever dimension is longer) and each
 * pool thread hands its block to the library, so the library has no worker threads that
 * spin between calls on the cores the pool uses (backend.h): OpenBLAS with 2 threads on
 * 2 cores leaves its worker busy-waiting 0.1 s of CPU after every call (measured with
 * getrusage over an idle 0.1 s after 256^3 products), with one thread 0. */
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "infer/backends/backend.h"
#include "infer/ops/fused/fused.h"
#include "infer/ops/math/matmul_plan.h"

enum { CBLAS_ROW_MAJOR = 101, CBLAS_NO_TRANS = 111, CBLAS_TRANS = 112 };

typedef void (*cblas_sgemm_fn)(int order, int trans_a, int trans_b, int M, int N, int K,
                               float alpha, const float *A, int lda, const float *B, int ldb,
                               float beta, float *C, int ldc);

/* oneDNN 2.x: dnnl_status_t dnnl_sgemm(char transa, char transb, dnnl_dim_t M, N, K,
 * float alpha, A, lda, B, ldb, float beta, C, ldc), row-major, 0 = dnnl_success */
typedef int (*dnnl_sgemm_fn)(char transa, char transb, int64_t M, int64_t N, int64_t K,
                             float alpha, const float *A, int64_t lda, const float *B,
                             int64_t ldb, float beta, float *C, int64_t ldc);
typedef struct dnnl_version_t {
    int major, minor, patch;
    const char *hash;
    unsigned cpu_runtime, gpu_runtime;
} dnnl_version_t;

typedef struct blas_lib {
    void *handle;
    cblas_sgemm_fn sgemm;
    dnnl_sgemm_fn dnnl_sgemm;
    /* oneDNN's OpenMP: the team size of a parallel region the calling thread starts
     * comes from that thread's own setting (default: every core), so each pool thread
     * sets it to 1: two pool threads would otherwise each start a team of all cores.
     * libgomp's idle team threads spin only ~0.3 ms before sleeping (no spin measured
     * after calls either way, by the test's getrusage check) */
    void (*omp_set_num_threads)(int);
} blas_lib;

static blas_lib libs[AK_BK_COUNT];
/* test hook: the file to load instead of the default names (backend.c) */
static const char *override_path[AK_BK_COUNT];

void ak__bk_blas_set_library(int b, const char *path);
void ak__bk_blas_set_library(int b, const char *path) {
    if (b >= 0 && b < AK_BK_COUNT) override_path[b] = path;
}

/* memcpy: ISO C has no cast from dlsym's object pointer to a function pointer */
static int sym_fn(void *handle, const char *name, void *fn, size_t size) {
    void *sym = dlsym(handle, name);
    if (!sym) return 0;
    memcpy(fn, &sym, size);
    return 1;
}

static ak_status blas_probe(int b, const char *const *defaults, const char *set_threads_name,
                            const char *version_name, void **ctx, char *version, size_t cap) {
    blas_lib *lib = &libs[b];
    const char *one[2] = {override_path[b], NULL};
    const char *const *cands = override_path[b] ? one : defaults;
    void *h = NULL;
    for (int i = 0; cands[i] && !h; i++) h = dlopen(cands[i], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *why = dlerror();
        return AK_FAIL(AK_ERR_UNSUPPORTED, "cannot load %s (%s)", cands[0], why ? why : "not found");
    }
    void (*set_threads)(int) = NULL;
    const char *(*get_version)(void) = NULL;
    if (!sym_fn(h, "cblas_sgemm", &lib->sgemm, sizeof lib->sgemm) ||
        !sym_fn(h, set_threads_name, &set_threads, sizeof set_threads)) {
        dlclose(h);
        return AK_FAIL(AK_ERR_UNSUPPORTED, "%s has no cblas_sgemm or %s", cands[0], set_threads_name);
    }
    set_threads(1);
    /* OpenBLAS started its worker threads when it loaded; idle, each busy-waits about
     * 0.1 s of CPU (measured: 0.098 s in the 0.1 s after dlopen on 2 cores, 0 with this)
     * before sleeping. With one library thread they never get work again: stop them
     * now, before they steal the pool's cores while the session times its nodes. */
    int (*shutdown)(void) = NULL;
    if (b == AK_BK_OPENBLAS && sym_fn(h, "blas_thread_shutdown_", &shutdown, sizeof shutdown))
        (void)shutdown();
    const char *text = sym_fn(h, version_name, &get_version, sizeof get_version) ? get_version() : NULL;
    /* OpenBLAS: "OpenBLAS 0.3.21 NO_AFFINITY ..." (the second word); BLIS: "0.9.0" */
    if (text && b == AK_BK_OPENBLAS && strchr(text, ' ')) text = strchr(text, ' ') + 1;
    snprintf(version, cap, "%s", text && *text ? text : "unknown");
    version[strcspn(version, " \t\n")] = '\0';
    lib->handle = h;
    *ctx = lib;
    return AK_OK;
}

static ak_status openblas_probe(void **ctx, char *version, size_t cap) {
    static const char *const names[] = {"libopenblas.so.0", "libopenblas.so", NULL};
    return blas_probe(AK_BK_OPENBLAS, names, "openblas_set_num_threads", "openblas_get_config",
                      ctx, version, cap);
}

static ak_status blis_probe(void **ctx, char *version, size_t cap) {
    static const char *const names[] = {"libblis.so.4", "libblis.so", NULL};
    return blas_probe(AK_BK_BLIS, names, "bli_thread_set_num_threads", "bli_info_get_version_str",
                      ctx, version, cap);
}

static ak_status onednn_probe(void **ctx, char *version, size_t cap) {
    blas_lib *lib = &libs[AK_BK_ONEDNN];
    const char *path = override_path[AK_BK_ONEDNN] ? override_path[AK_BK_ONEDNN] : "libdnnl.so.2";
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *why = dlerror();
        return AK_FAIL(AK_ERR_UNSUPPORTED, "cannot load %s (%s)", path, why ? why : "not found");
    }
    const dnnl_version_t *(*get_version)(void) = NULL;
    /* dlsym on the handle also searches its dependencies: libgomp's omp_set_num_threads */
    if (!sym_fn(h, "dnnl_sgemm", &lib->dnnl_sgemm, sizeof lib->dnnl_sgemm) ||
        !sym_fn(h, "omp_set_num_threads", &lib->omp_set_num_threads, sizeof lib->omp_set_num_threads) ||
        !sym_fn(h, "dnnl_version", &get_version, sizeof get_version)) {
        dlclose(h);
        return AK_FAIL(AK_ERR_UNSUPPORTED,
                       "%s has no dnnl_sgemm, dnnl_version or OpenMP's omp_set_num_threads "
                       "(only the OpenMP build is supported)", path);
    }
    const dnnl_version_t *v = get_version();
    snprintf(version, cap, "%d.%d.%d", v ? v->major : 0, v ? v->minor : 0, v ? v->patch : 0);
    lib->handle = h;
    *ctx = lib;
    return AK_OK;
}

/* ---- a batch of row-major products split over the pool -------------------------------- */

/* Below this many multiply-adds a product is not split between threads. */
#define SPLIT_MIN_MACS ((uint64_t)32 * 32 * 32)

typedef struct blas_job {
    const blas_lib *lib;
    int ta, tb;
    size_t M, N, K;
    float alpha, beta;
    const float *A, *B;
    float *C;
    size_t lda, ldb, ldc;
    const ak__mm_plan *pl; /* batched MatMul: batch offsets; NULL = one product */
    size_t chunks, step;   /* blocks per product, rows (or columns) per block */
    int split_n;
    atomic_int failed;     /* oneDNN returned an error */
} blas_job;

static void blas_task(void *vj, size_t begin, size_t end, int tid) {
    (void)tid;
    blas_job *j = vj; /* read-only but for its failure flag */
    for (size_t i = begin; i < end; i++) {
        size_t t = i / j->chunks, c = i % j->chunks;
        const float *A = j->A, *B = j->B;
        float *C = j->C;
        if (j->pl) {
            uint64_t ao, bo;
            ak__mm_offsets(j->pl, t, &ao, &bo);
            A += ao * j->M * j->K;
            B += bo * j->K * j->N;
            C += t * j->M * j->N;
        }
        size_t D = j->split_n ? j->N : j->M, lo = c * j->step;
        if (lo >= D) continue;
        size_t len = D - lo < j->step ? D - lo : j->step, m = j->M, n = j->N;
        if (j->split_n) { /* columns lo.. of op(B) and C */
            B += j->tb ? lo * j->ldb : lo;
            C += lo;
            n = len;
        } else { /* rows lo.. of op(A) and C */
            A += j->ta ? lo : lo * j->lda;
            C += lo * j->ldc;
            m = len;
        }
        if (j->lib->dnnl_sgemm) {
            j->lib->omp_set_num_threads(1);
            /* the shapes are valid (checked by reshape): a failure would be an
             * out-of-memory inside oneDNN, reported through the job */
            if (j->lib->dnnl_sgemm(j->ta ? 'T' : 'N', j->tb ? 'T' : 'N', (int64_t)m, (int64_t)n,
                                   (int64_t)j->K, j->alpha, A, (int64_t)j->lda, B,
                                   (int64_t)j->ldb, j->beta, C, (int64_t)j->ldc) != 0)
                atomic_store(&j->failed, 1);
            continue;
        }
        j->lib->sgemm(CBLAS_ROW_MAJOR, j->ta ? CBLAS_TRANS : CBLAS_NO_TRANS,
                      j->tb ? CBLAS_TRANS : CBLAS_NO_TRANS, (int)m, (int)n, (int)j->K, j->alpha,
                      A, (int)j->lda, B, (int)j->ldb, j->beta, C, (int)j->ldc);
    }
}

/* C (batch x M x N) = alpha op(A) op(B) + beta C for `batch` products (pl: their offsets). */
static ak_status blas_run(const blas_lib *lib, ak_threadpool *pool, blas_job *j, size_t batch) {
    if (j->M > (size_t)INT32_MAX || j->N > (size_t)INT32_MAX || j->K > (size_t)INT32_MAX ||
        j->lda > (size_t)INT32_MAX || j->ldb > (size_t)INT32_MAX || j->ldc > (size_t)INT32_MAX)
        return AK_FAIL(AK_ERR_UNSUPPORTED, "a dimension over 2^31-1 does not fit cblas_sgemm");
    int threads = 1;
    AK_CHECK(ak_threadpool_size(pool, &threads));
    j->lib = lib;
    j->split_n = j->N > j->M;
    size_t D = j->split_n ? j->N : j->M, want = 1;
    if ((uint64_t)j->M * j->N * j->K >= SPLIT_MIN_MACS && batch < (size_t)threads)
        want = ((size_t)threads + batch - 1) / batch;
    /* blocks of a multiple of 16 rows/columns: whole register tiles of either library */
    size_t step = (D + want - 1) / want;
    step = (step + 15) / 16 * 16;
    if (step == 0) step = 1;
    j->step = step;
    j->chunks = (D + step - 1) / step;
    if (j->chunks == 0) j->chunks = 1;
    atomic_init(&j->failed, 0);
    AK_CHECK(ak_threadpool_parallel_for(pool, batch * j->chunks, 1, blas_task, j));
    if (atomic_load(&j->failed))
        return AK_FAIL(AK_ERR_NO_MEMORY, "dnnl_sgemm failed on a %zux%zux%zu product", j->M, j->N, j->K);
    return AK_OK;
}

static ak_status blas_matmul(void *ctx, ak__op_ctx *op) {
    const ak__tensor *A = op->inputs[0], *B = op->inputs[1];
    ak__tensor *Y = ak__op_out(op, 0);
    if (A->type != AK_ELEM_F32 || B->type != AK_ELEM_F32)
        return AK_OP_FAIL(op->node, AK_ERR_INTERNAL, "a BLAS backend got a non-float32 MatMul");
    ak__mm_plan pl;
    AK_CHECK(ak__mm_plan_make(op, A, B, &pl));
    if (!Y || Y->count == 0) return AK_OK;
    if (pl.K == 0) {
        memset(Y->data, 0, ak__tensor_nbytes(Y));
        return AK_OK;
    }
    blas_job j = {0};
    j.N = pl.N, j.K = pl.K, j.alpha = 1.0f, j.beta = 0.0f;
    j.A = A->data, j.B = B->data, j.C = Y->data;
    j.lda = pl.K, j.ldb = pl.N, j.ldc = pl.N;
    if (pl.fold || pl.batch == 1) { /* one product over batch*M rows */
        j.M = pl.batch * pl.M;
        return blas_run(ctx, op->pool, &j, 1);
    }
    j.M = pl.M;
    j.pl = &pl;
    return blas_run(ctx, op->pool, &j, pl.batch);
}

static ak_status blas_gemm(void *ctx, ak__op_ctx *op) {
    const ak__tensor *A = op->inputs[0], *B = op->inputs[1], *C = ak__op_in(op, 2);
    ak__tensor *Y = ak__op_out(op, 0);
    if (A->type != AK_ELEM_F32)
        return AK_OP_FAIL(op->node, AK_ERR_INTERNAL, "a BLAS backend got a non-float32 Gemm");
    if (!Y || Y->count == 0) return AK_OK;
    /* the session's reshape checked the shapes: Y is (M, N), op(A) (M, K) */
    int ta = ak__attr_int(op->node, "transA", 0) != 0, tb = ak__attr_int(op->node, "transB", 0) != 0;
    float alpha = ak__attr_float(op->node, "alpha", 1.0f), beta = ak__attr_float(op->node, "beta", 1.0f);
    size_t M = (size_t)Y->dims[0], N = (size_t)Y->dims[1], K = (size_t)A->dims[ta ? 0 : 1];
    float *y = Y->data, b = 0.0f;
    if (C && beta != 0.0f) { /* Y = beta*C broadcast to (M, N), then accumulate */
        size_t cr = C->rank == 2 ? (size_t)C->dims[0] : 1, cc = C->rank >= 1 ? (size_t)C->dims[C->rank - 1] : 1;
        const float *c = C->data;
        for (size_t i = 0; i < M; i++) {
            const float *crow = c + (cr == 1 ? 0 : i) * cc;
            for (size_t n = 0; n < N; n++) y[i * N + n] = beta * crow[cc == 1 ? 0 : n];
        }
        b = 1.0f;
    }
    if (K == 0) { /* nothing to add (cblas would still scale by beta) */
        if (b == 0.0f) memset(y, 0, M * N * sizeof *y);
        return AK_OK;
    }
    blas_job j = {0};
    j.ta = ta, j.tb = tb, j.M = M, j.N = N, j.K = K, j.alpha = alpha, j.beta = b;
    j.A = A->data, j.B = B->data, j.C = y;
    j.lda = ta ? M : K, j.ldb = tb ? K : N, j.ldc = N;
    return blas_run(ctx, op->pool, &j, 1);
}

static ak_status blas_matmul_bias(void *ctx, ak__op_ctx *op) {
    const ak__tensor *a = op->inputs[0], *b = op->inputs[1], *bias = op->inputs[2];
    ak__tensor *y = op->outputs[0];
    size_t k = (size_t)b->dims[0], n = (size_t)b->dims[1], m = n ? (size_t)(y->count / n) : 0;
    float *c = y->data;
    for (size_t i = 0; i < m; i++) memcpy(c + i * n, bias->data, n * sizeof *c); /* C = bias rows */
    if (k > 0 && m > 0) {
        blas_job j = {0};
        j.M = m, j.N = n, j.K = k, j.alpha = 1.0f, j.beta = 1.0f;
        j.A = a->data, j.B = b->data, j.C = c;
        j.lda = k, j.ldb = n, j.ldc = n;
        AK_CHECK(blas_run(ctx, op->pool, &j, 1));
    }
    return ak__matmul_bias_epilogue(op);
}

const ak__infer_backend_i ak__bk_openblas_i = {"openblas", openblas_probe, blas_matmul, blas_gemm,
                                               blas_matmul_bias};
const ak__infer_backend_i ak__bk_blis_i = {"blis", blis_probe, blas_matmul, blas_gemm,
                                           blas_matmul_bias};
const ak__infer_backend_i ak__bk_onednn_i = {"onednn", onednn_probe, blas_matmul, blas_gemm,
                                             blas_matmul_bias};
