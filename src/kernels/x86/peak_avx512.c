/* FP32 FMA peak probe on 512-bit vectors: as peak_avx2.c with zmm registers. Cores that run
 * 512-bit FMAs at full width (Zen 5, Intel) reach twice the ymm figure; Zen 4 the same. */
#include <stdint.h>

#include "kernels/measure.h"

/* Runs `iters` iterations of 12 FMAs on 16 floats each; returns flops done. */
double ak__fma_loop__avx512(uint64_t iters) {
    uint64_t n = iters;
    __asm__ volatile(
        "vpxord %%zmm0, %%zmm0, %%zmm0\n\t"
        "vmovaps %%zmm0, %%zmm1\n\t"
        "vmovaps %%zmm0, %%zmm2\n\t"
        "vmovaps %%zmm0, %%zmm3\n\t"
        "vmovaps %%zmm0, %%zmm4\n\t"
        "vmovaps %%zmm0, %%zmm5\n\t"
        "vmovaps %%zmm0, %%zmm6\n\t"
        "vmovaps %%zmm0, %%zmm7\n\t"
        "vmovaps %%zmm0, %%zmm8\n\t"
        "vmovaps %%zmm0, %%zmm9\n\t"
        "vmovaps %%zmm0, %%zmm10\n\t"
        "vmovaps %%zmm0, %%zmm11\n\t"
        "vmovaps %%zmm0, %%zmm12\n\t"
        "vmovaps %%zmm0, %%zmm13\n\t"
        "1:\n\t"
        "vfmadd231ps %%zmm12, %%zmm13, %%zmm0\n\t"
        "vfmadd231ps %%zmm12, %%zmm13, %%zmm1\n\t"
        "vfmadd231ps %%zmm12, %%zmm13, %%zmm2\n\t"
        "vfmadd231ps %%zmm12, %%zmm13, %%zmm3\n\t"
        "vfmadd231ps %%zmm12, %%zmm13, %%zmm4\n\t"
        "vfmadd231ps %%zmm12, %%zmm13, %%zmm5\n\t"
        "vfmadd231ps %%zmm12, %%zmm13, %%zmm6\n\t"
        "vfmadd231ps %%zmm12, %%zmm13, %%zmm7\n\t"
        "vfmadd231ps %%zmm12, %%zmm13, %%zmm8\n\t"
        "vfmadd231ps %%zmm12, %%zmm13, %%zmm9\n\t"
        "vfmadd231ps %%zmm12, %%zmm13, %%zmm10\n\t"
        "vfmadd231ps %%zmm12, %%zmm13, %%zmm11\n\t"
        "dec %0\n\t"
        "jnz 1b\n\t"
        "vzeroupper\n\t"
        : "+r"(n)
        :
        : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9",
          "xmm10", "xmm11", "xmm12", "xmm13", "cc");
    return (double)iters * 12.0 * 16.0 * 2.0;
}
