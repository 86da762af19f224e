/* The reduce family (Reduce*, ArgMax, ArgMin; reduce.c) and the helpers the softmaxes
 * (math/softmax.c) and the layer norms (norm/layer_norm.c) share with it: the split of a shape into kept and reduced axes, a row
 * splitter over the thread pool, and 8-lane float vectors for the f32 fast paths.
 *
 * The vectors are GCC/clang vector extensions: a kernel body is written once as an
 * always-inline function taking only pointers and scalars (vector values never cross a
 * call, so no vector ABI is involved) and instantiated twice, for AVX2+FMA and for the
 * baseline ISA; ak__math_avx2() picks one at run time. */
#ifndef AK_INFER_OPS_REDUCE_REDUCE_H
#define AK_INFER_OPS_REDUCE_REDUCE_H

#include <stddef.h>
#include <stdint.h>

#include "infer/runtime/op.h"

extern const ak__op_def ak__op_reduce_sum, ak__op_reduce_mean,
    ak__op_reduce_max, ak__op_reduce_min, ak__op_reduce_prod, ak__op_reduce_l1,
    ak__op_reduce_l2, ak__op_reduce_log_sum, ak__op_reduce_log_sum_exp,
    ak__op_reduce_sum_square, ak__op_argmax, ak__op_argmin;

/* ---- kept and reduced axes --------------------------------------------------------- */

/* A shape split into kept and reduced axes, adjacent axes of one kind merged (size-1
 * axes dropped). Output element o (row-major over the kept axes, the order the output
 * has with or without keepdims) reduces the input elements at base(o) + roff(j) for j
 * over the reduced set. */
typedef struct ak__math_split {
    int nk, nr;                                  /* kept / reduced groups */
    int64_t kdim[AK_IR_MAX_RANK], kstr[AK_IR_MAX_RANK];
    int64_t rdim[AK_IR_MAX_RANK], rstr[AK_IR_MAX_RANK];
    uint64_t nout, nred;                         /* kept count, reduced count */
    /* the common layouts: [outer kept][reduced][inner kept] with one reduced group, */
    int simple;                                  /* 1 when it is that layout */
    uint64_t outer, inner;                       /* then nred is the middle size */
} ak__math_split;

void ak__math_split_init(ak__math_split *s, int rank, const int64_t *dims,
                         const uint8_t *reduced);

/* Walks a set of (dim, stride) pairs row-major, giving the offset of each step. */
typedef struct ak__math_odo {
    int n;
    const int64_t *dim, *str;
    int64_t idx[AK_IR_MAX_RANK];
    int64_t off;
} ak__math_odo;

static inline void ak__math_odo_start(ak__math_odo *o, int n, const int64_t *dim,
                                      const int64_t *str) {
    o->n = n;
    o->dim = dim;
    o->str = str;
    for (int i = 0; i < n; i++) o->idx[i] = 0;
    o->off = 0;
}
/* Advances to the next position (wrapping to 0 after the last). */
static inline void ak__math_odo_next(ak__math_odo *o) {
    for (int i = o->n - 1; i >= 0; i--) {
        o->off += o->str[i];
        if (++o->idx[i] < o->dim[i]) return;
        o->off -= o->str[i] * o->dim[i];
        o->idx[i] = 0;
    }
}
/* Positions the walk at flat index k of its row-major order. */
static inline void ak__math_odo_seek(ak__math_odo *o, uint64_t k) {
    o->off = 0;
    for (int i = o->n - 1; i >= 0; i--) {
        o->idx[i] = (int64_t)(k % (uint64_t)o->dim[i]);
        k /= (uint64_t)o->dim[i];
        o->off += o->idx[i] * o->str[i];
    }
}

/* Reads a set of axes from an ints list into a per-axis mask; fails on an out-of-range or
 * repeated axis. */
ak_status ak__math_axes_mask(const ak__op_ctx *ctx, const int64_t *axes, size_t n, int rank,
                             uint8_t *mask);

/* ---- threads ----------------------------------------------------------------------- */

/* Runs fn over [0, n) items of about `item_cost` elementary operations each: inline when
 * the whole job is small, else over ctx->pool. */
ak_status ak__math_parallel(const ak__op_ctx *ctx, size_t n, size_t item_cost,
                            ak_parallel_fn fn, void *arg);

/* ---- f32 vectors ------------------------------------------------------------------- */

/* 1 when the AVX2+FMA instantiations may run (the CPU has them and AK_ISA allows it). */
int ak__math_avx2(void);

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define AK_MATH_HAVE_AVX2_VARIANT 1
#define AK_MATH_TARGET_AVX2 __attribute__((target("avx2,fma")))
#else
#define AK_MATH_HAVE_AVX2_VARIANT 0
#define AK_MATH_TARGET_AVX2
#endif
#define AK_MATH_INLINE static inline __attribute__((always_inline))

/* 8 lanes (AVX2 instantiations) and 4 lanes (baseline instantiations: GCC splits wider
 * vectors badly on SSE, comparisons lane by lane). The AK_V* macros take any width. */
typedef float ak__v8f __attribute__((vector_size(32)));
typedef int32_t ak__v8i __attribute__((vector_size(32)));
typedef float ak__v4f __attribute__((vector_size(16)));
typedef int32_t ak__v4i __attribute__((vector_size(16)));

#define AK_VLOAD(v, p) __builtin_memcpy(&(v), (p), sizeof(v))
#define AK_VSTORE(p, v) __builtin_memcpy((p), &(v), sizeof(v))
#define AK_VSPLAT(VF, s) ((VF){0} + (float)(s))
/* lane-wise select: m ? a : b, m from a comparison (all ones or zero) */
#define AK_VSELECT(VI, m, a, b) ((__typeof__(a))(((VI)(a) & (m)) | ((VI)(b) & ~(m))))

/* v = exp(v) for v <= 0 (softmax after subtracting the row maximum): Cody-Waite range
 * reduction to r in [-ln2/2, ln2/2], the degree-7 Taylor polynomial (error below 1e-8)
 * evaluated by Estrin's scheme (short dependency chains: the loop is latency-bound), and
 * 2^n built in the exponent bits. Below -87.33 (where exp is subnormal) gives 0; NaN
 * stays NaN. Within 2 ulp of expf. */
#define AK_VEXP_NONPOS(VF, VI, v)                                                       \
    do {                                                                                \
        VI ak_under_ = (v) < AK_VSPLAT(VF, -87.33654f);                                 \
        VF ak_x_ = AK_VSELECT(VI, ak_under_, AK_VSPLAT(VF, -87.33654f), (v));           \
        VF ak_t_ = ak_x_ * 1.44269504f + 12582912.0f;                                   \
        VF ak_n_ = ak_t_ - 12582912.0f;                                                 \
        VF ak_r_ = ak_x_ - ak_n_ * 0.693359375f;                                        \
        ak_r_ = ak_r_ + ak_n_ * 2.12194440e-4f;                                         \
        VF ak_r2_ = ak_r_ * ak_r_;                                                      \
        VF ak_r4_ = ak_r2_ * ak_r2_;                                                    \
        VF ak_p01_ = ak_r_ + 1.0f;                                                      \
        VF ak_p23_ = ak_r_ * (1.0f / 6.0f) + 0.5f;                                      \
        VF ak_p45_ = ak_r_ * (1.0f / 120.0f) + (1.0f / 24.0f);                          \
        VF ak_p67_ = ak_r_ * (1.0f / 5040.0f) + (1.0f / 720.0f);                        \
        VF ak_p_ = (ak_p01_ + ak_r2_ * ak_p23_) + ak_r4_ * (ak_p45_ + ak_r2_ * ak_p67_); \
        VI ak_e_ = ((VI)ak_t_ - (0x4B400000 - 127)) << 23;                              \
        VF ak_y_ = ak_p_ * (VF)ak_e_;                                                   \
        (v) = (VF)((VI)ak_y_ & ~ak_under_);                                             \
    } while (0)

/* The 8-lane spellings the kernels written for one width use. */
#define AK_V8_LOAD(v, p) AK_VLOAD(v, p)
#define AK_V8_STORE(p, v) AK_VSTORE(p, v)
#define AK_V8_SPLAT(s) AK_VSPLAT(ak__v8f, s)
#define AK_V8_SELECT(m, a, b) AK_VSELECT(ak__v8i, m, a, b)
#define AK_V8_EXP_NONPOS(v) AK_VEXP_NONPOS(ak__v8f, ak__v8i, v)
#define AK_V8_HSUM(v) \
    ((((v)[0] + (v)[4]) + ((v)[1] + (v)[5])) + (((v)[2] + (v)[6]) + ((v)[3] + (v)[7])))

#endif /* AK_INFER_OPS_REDUCE_REDUCE_H */
