/* Inference backends: interchangeable implementations of float32 GEMM-shaped nodes
 * (MatMul, Gemm, com.accelkit MatMulBias), each a vtable + context as the comm transports.
 *
 *   own       accelkit's kernels (the operators' own run functions)
 *   openblas  OpenBLAS's cblas_sgemm, loaded with dlopen at run time
 *   blis      BLIS's cblas_sgemm, loaded with dlopen at run time
 *   onednn    oneDNN's dnnl_sgemm, loaded with dlopen at run time
 *
 * Nothing links against a library at build time: a library absent at run time makes its
 * backend unavailable, with one log line (info), never an error.
 *
 * Threads: the libraries are set to one thread each (oneDNN: the OpenMP thread count of
 * the calling thread), and accelkit's pool splits a product into blocks of rows or
 * columns that each thread hands to the library. A library's own
 * worker threads would spin after each call (OpenBLAS busy-waits about 2^28 cycles) on
 * the cores the session's pool needs next; with one library thread there are none.
 *
 * Which backend runs a node is measured (choose.c): the first time a node meets a set of
 * shapes, each available backend runs it a few times and the fastest is kept, with the
 * times remembered in a tuning cache file (cache.c) for later sessions. */
#ifndef AK_INFER_BACKENDS_BACKEND_H
#define AK_INFER_BACKENDS_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "infer/runtime/op.h"

enum { AK_BK_OWN = 0, AK_BK_OPENBLAS = 1, AK_BK_BLIS = 2, AK_BK_ONEDNN = 3, AK_BK_COUNT = 4 };

/* The operators a backend may run (their float32 form). */
typedef enum ak__bk_op { AK_BK_OP_NONE = 0, AK_BK_OP_MATMUL, AK_BK_OP_GEMM, AK_BK_OP_MATMUL_BIAS } ak__bk_op;

typedef struct ak__infer_backend_i {
    const char *name;
    /* Loads what the backend needs; AK_OK with *ctx set, or AK_ERR_UNSUPPORTED when it is
     * absent (the message says why). version: the library's version ("0.3.21"). */
    ak_status (*probe)(void **ctx, char *version, size_t cap);
    /* Per-op entry points: compute the node's outputs (set and placed by the session)
     * exactly as the operator's own run does. NULL = the op is not offered. */
    ak_status (*matmul)(void *ctx, ak__op_ctx *op);
    ak_status (*gemm)(void *ctx, ak__op_ctx *op);
    ak_status (*matmul_bias)(void *ctx, ak__op_ctx *op);
} ak__infer_backend_i;

typedef struct ak__infer_backend {
    const ak__infer_backend_i *vt; /* NULL = unavailable */
    void *ctx;
    char version[48];
} ak__infer_backend;

/* The backend with id b (AK_BK_*), probed once per process (thread-safe); vt NULL when
 * unavailable. */
const ak__infer_backend *ak__infer_backend_get(int b);
const char *ak__infer_backend_name(int b);
/* Id of a backend name, or -1. */
int ak__infer_backend_find(const char *name);

/* The backends AK_INFER_BACKENDS allows (a bit per id), or a failure naming a bad entry.
 * Unavailable ones are left in: the caller skips them. */
ak_status ak__infer_backends_allowed(unsigned *mask);

/* Which op node n is when a backend may run it (float32 is checked at run time). */
ak__bk_op ak__infer_backend_op_of(const ak__ir_node *n);

/* Runs op on backend b (available). */
ak_status ak__infer_backend_run(int b, ak__bk_op op, ak__op_ctx *ctx);

/* Tests: the file backend b dlopens (NULL: the default names), and forgets the probe of
 * every backend so the next get probes again. Not thread-safe; tests only. */
void ak__infer_backend_test_set_library(int b, const char *path);


#endif /* AK_INFER_BACKENDS_BACKEND_H */
