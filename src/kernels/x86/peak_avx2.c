/* FP32 FMA peak probe: 12 independent vfmadd231ps chains in inline asm (enough to cover
 * FMA latency × throughput on current x86 cores), so the compiler cannot merge them. */
#include <stdint.h>

#include "kernels/measure.h"

/* Runs `iters` iterations of 12 FMAs on 8 floats each; returns flops done. */
double ak__fma_loop__avx2(uint64_t iters) {
    uint64_t n = iters;
    __asm__ volatile(
        "vxorps %%ymm0, %%ymm0, %%ymm0\n\t"
        "vmovaps %%ymm0, %%ymm1\n\t"
        "vmovaps %%ymm0, %%ymm2\n\t"
        "vmovaps %%ymm0, %%ymm3\n\t"
        "vmovaps %%ymm0, %%ymm4\n\t"
        "vmovaps %%ymm0, %%ymm5\n\t"
        "vmovaps %%ymm0, %%ymm6\n\t"
        "vmovaps %%ymm0, %%ymm7\n\t"
        "vmovaps %%ymm0, %%ymm8\n\t"
        "vmovaps %%ymm0, %%ymm9\n\t"
        "vmovaps %%ymm0, %%ymm10\n\t"
        "vmovaps %%ymm0, %%ymm11\n\t"
        "vmovaps %%ymm0, %%ymm12\n\t"
        "vmovaps %%ymm0, %%ymm13\n\t"
        "1:\n\t"
        "vfmadd231ps %%ymm12, %%ymm13, %%ymm0\n\t"
        "vfmadd231ps %%ymm12, %%ymm13, %%ymm1\n\t"
        "vfmadd231ps %%ymm12, %%ymm13, %%ymm2\n\t"
        "vfmadd231ps %%ymm12, %%ymm13, %%ymm3\n\t"
        "vfmadd231ps %%ymm12, %%ymm13, %%ymm4\n\t"
        "vfmadd231ps %%ymm12, %%ymm13, %%ymm5\n\t"
        "vfmadd231ps %%ymm12, %%ymm13, %%ymm6\n\t"
        "vfmadd231ps %%ymm12, %%ymm13, %%ymm7\n\t"
        "vfmadd231ps %%ymm12, %%ymm13, %%ymm8\n\t"
        "vfmadd231ps %%ymm12, %%ymm13, %%ymm9\n\t"
        "vfmadd231ps %%ymm12, %%ymm13, %%ymm10\n\t"
        "vfmadd231ps %%ymm12, %%ymm13, %%ymm11\n\t"
        "dec %0\n\t"
        "jnz 1b\n\t"
        "vzeroupper\n\t"
        : "+r"(n)
        :
        : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9",
          "xmm10", "xmm11", "xmm12", "xmm13", "cc");
    return (double)iters * 12.0 * 8.0 * 2.0;
}
