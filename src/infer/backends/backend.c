/* The backend registry, AK_INFER_BACKENDS, and the "own" backend (the operators' run
 * functions). The BLAS backends are in blas.c. */
#include "infer/backends/backend.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/params.h"
#include "kernels/dispatch.h"

extern const ak__infer_backend_i ak__bk_own_i, ak__bk_openblas_i, ak__bk_blis_i, ak__bk_onednn_i;
extern const ak__op_def ak__nn_gemm, ak__nn_matmul;

static const ak__infer_backend_i *const vtables[AK_BK_COUNT] = {&ak__bk_own_i, &ak__bk_openblas_i,
                                                                &ak__bk_blis_i, &ak__bk_onednn_i};
static const char *const names[AK_BK_COUNT] = {"own", "openblas", "blis", "onednn"};

static pthread_mutex_t probe_lock = PTHREAD_MUTEX_INITIALIZER;
static int probed[AK_BK_COUNT];
static ak__infer_backend backends[AK_BK_COUNT];

const char *ak__infer_backend_name(int b) { return b >= 0 && b < AK_BK_COUNT ? names[b] : "?"; }

int ak__infer_backend_find(const char *name) {
    for (int b = 0; b < AK_BK_COUNT; b++)
        if (strcmp(names[b], name) == 0) return b;
    return -1;
}

const ak__infer_backend *ak__infer_backend_get(int b) {
    if (b < 0 || b >= AK_BK_COUNT) return NULL;
    pthread_mutex_lock(&probe_lock);
    if (!probed[b]) {
        ak__infer_backend *k = &backends[b];
        memset(k, 0, sizeof *k);
        ak_status st = vtables[b]->probe(&k->ctx, k->version, sizeof k->version);
        if (st == AK_OK) {
            k->vt = vtables[b];
            AK_LOG_INFO(AK_SUBSYS_INFER, "inference backend %s: available (%s)", names[b],
                        k->version);
        } else {
            /* absent is normal (the library is optional): one line, and the backend is
             * skipped */
            AK_LOG_INFO(AK_SUBSYS_INFER, "inference backend %s: skipped: %s", names[b],
                        ak_last_error());
        }
        probed[b] = 1;
    }
    pthread_mutex_unlock(&probe_lock);
    return &backends[b];
}

ak_status ak__infer_backends_allowed(unsigned *mask) {
    const char *s = ak__param_str(AK_PARAM_INFER_BACKENDS);
    *mask = 0;
    if (!s || !*s || strcmp(s, "all") == 0) {
        *mask = (1u << AK_BK_COUNT) - 1;
        return AK_OK;
    }
    while (*s) {
        size_t n = strcspn(s, ",");
        char name[32];
        if (n == 0 || n >= sizeof name)
            return AK_FAIL(AK_ERR_INVALID_ARG,
                           "AK_INFER_BACKENDS: empty or over-long entry in '%s' (a comma-separated "
                           "list of own, openblas, blis, onednn; or all)", ak__param_str(AK_PARAM_INFER_BACKENDS));
        memcpy(name, s, n);
        name[n] = '\0';
        int b = ak__infer_backend_find(name);
        if (b < 0)
            return AK_FAIL(AK_ERR_INVALID_ARG,
                           "AK_INFER_BACKENDS: unknown backend '%s' (known: own, openblas, blis, onednn; or all)",
                           name);
        *mask |= 1u << b;
        s += n;
        if (*s == ',') s++;
    }
    return AK_OK;
}

ak__bk_op ak__infer_backend_op_of(const ak__ir_node *n) {
    int onnx = n->domain[0] == '\0' || strcmp(n->domain, "ai.onnx") == 0;
    if (onnx && strcmp(n->op_type, "MatMul") == 0) return AK_BK_OP_MATMUL;
    if (onnx && strcmp(n->op_type, "Gemm") == 0) return AK_BK_OP_GEMM;
    if (strcmp(n->domain, "com.accelkit") == 0 && strcmp(n->op_type, "MatMulBias") == 0)
        return AK_BK_OP_MATMUL_BIAS;
    return AK_BK_OP_NONE;
}

ak_status ak__infer_backend_run(int b, ak__bk_op op, ak__op_ctx *ctx) {
    const ak__infer_backend *k = ak__infer_backend_get(b);
    if (!k || !k->vt) return AK_FAIL(AK_ERR_INTERNAL, "inference backend %s is not available",
                                     ak__infer_backend_name(b));
    ak_status (*fn)(void *, ak__op_ctx *) = op == AK_BK_OP_MATMUL ? k->vt->matmul
                                            : op == AK_BK_OP_GEMM ? k->vt->gemm
                                            : op == AK_BK_OP_MATMUL_BIAS ? k->vt->matmul_bias : NULL;
    if (!fn) return AK_FAIL(AK_ERR_INTERNAL, "inference backend %s does not run %s", names[b],
                            ctx->node->op_type);
    return fn(k->ctx, ctx);
}

void ak__infer_backend_test_set_library(int b, const char *path);
/* defined in blas.c; forgetting the probes is here */
void ak__bk_blas_set_library(int b, const char *path);
void ak__infer_backend_test_set_library(int b, const char *path) {
    pthread_mutex_lock(&probe_lock);
    ak__bk_blas_set_library(b, path);
    memset(probed, 0, sizeof probed);
    pthread_mutex_unlock(&probe_lock);
}

/* ---- own: the operators' own run functions ------------------------------------------ */

static ak_status own_probe(void **ctx, char *version, size_t cap) {
    *ctx = NULL;
    int major = 0, minor = 0, patch = 0;
    (void)ak_version(&major, &minor, &patch);
    /* the kernels' ISA is part of it: a cached choice was measured against those */
    const ak__kernels *k = ak__kernels_active();
    snprintf(version, cap, "%d.%d.%d-%s", major, minor, patch, k ? k->name : "none");
    return AK_OK;
}

static ak_status own_matmul(void *ctx, ak__op_ctx *op) {
    (void)ctx;
    return ak__nn_matmul.run(op);
}

static ak_status own_gemm(void *ctx, ak__op_ctx *op) {
    (void)ctx;
    return ak__nn_gemm.run(op);
}

static ak_status own_matmul_bias(void *ctx, ak__op_ctx *op) {
    (void)ctx;
    const ak__op_def *def = ak__op_find("com.accelkit", "MatMulBias", 1);
    if (!def) return AK_FAIL(AK_ERR_INTERNAL, "MatMulBias is not registered");
    return def->run(op);
}

const ak__infer_backend_i ak__bk_own_i = {"own", own_probe, own_matmul, own_gemm, own_matmul_bias};
