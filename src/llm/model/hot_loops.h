/* The model's own hot loops (attention, SwiGLU, RMSNorm, RoPE) compiled twice: a portable
 * body and, on x86-64, a copy of the same body built for AVX2 + FMA + F16C, chosen at run
 * time by the active ISA (so AK_ISA=sse2 runs the portable copy, as the kernels do).
 *
 * GCC's target_clones would do this by itself, but it dispatches "arch=haswell" clones by
 * CPU model (AMD processors got the SSE2 copy) and a clone by one feature cannot have
 * both AVX2 and FMA. Usage:
 *
 *     AK_HOT_BODY void name_body(params) { ... }
 *     AK_HOT_TWIN(name, (params), (args))
 *
 * defines `static void name(params)`. Helpers the body calls must be AK_HOT_INLINE so
 * they are compiled inside each copy. */
#ifndef AK_LLM_MODEL_HOT_LOOPS_H
#define AK_LLM_MODEL_HOT_LOOPS_H

#include <stdint.h>

#include "core/init.h"

#define AK_HOT_INLINE static inline __attribute__((always_inline))
#define AK_HOT_BODY static inline __attribute__((always_inline))

/* Eight lanes at any 4-byte alignment (GNU vector extension: the AVX2 copy compiles them
 * to 256-bit operations, the portable one to SSE pairs). */
typedef float ak__v8f __attribute__((vector_size(32), aligned(4), may_alias));
typedef int32_t ak__v8i __attribute__((vector_size(32), aligned(4), may_alias));

#define ak__load8(p) (*(const ak__v8f *)(const void *)(p))
#define ak__store8(p, v) (*(ak__v8f *)(void *)(p) = (v))

AK_HOT_INLINE float ak__hsum8(ak__v8f v) {
    return ((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7]));
}

/* m ? a : b per lane, m from a vector comparison (all ones or zero) */
AK_HOT_INLINE ak__v8f ak__select8(ak__v8i m, ak__v8f a, ak__v8f b) {
    return (ak__v8f)(((ak__v8i)a & m) | ((ak__v8i)b & ~m));
}


#if defined(__x86_64__) && defined(__GNUC__)
#define AK_HOT_TWIN(name, params, args)                                                       \
    __attribute__((target("avx2,fma,f16c"))) static void name##_avx2 params {                \
        name##_body args;                                                                     \
    }                                                                                         \
    static void name params {                                                                 \
        if (ak__cpu_active_avx2())                                                           \
            name##_avx2 args;                                                                 \
        else                                                                                  \
            name##_body args;                                                                 \
    }
#else
#define AK_HOT_TWIN(name, params, args)                                                       \
    static void name params { name##_body args; }
#endif

#endif /* AK_LLM_MODEL_HOT_LOOPS_H */
