/* Shared by the x86 variants of the int8 GEMM (kernels/x86/i8gemm_*.c): the four
 * activation bytes of one k-group as a 32-bit word (zero-padded past K, so the last
 * group never reads beyond a row), and the column blocking of the drivers. */
#ifndef AK_KERNELS_X86_I8GEMM_X86_H
#define AK_KERNELS_X86_I8GEMM_X86_H

#include <stdint.h>
#include <string.h>

#include "kernels/kf_int8.h"

static inline int32_t ak__i8_a_word(const uint8_t *row, size_t g, size_t K) {
    uint32_t w = 0;
    size_t k = g * AK_KF_I8_KG;
    if (k + AK_KF_I8_KG <= K) {
        memcpy(&w, row + k, sizeof w);
    } else {
        for (size_t i = 0; k + i < K; i++) w |= (uint32_t)row[k + i] << (8 * i);
    }
    return (int32_t)w;
}

/* Panels of B per column chunk: the chunk (K × 16·panels bytes) is kept near 128 KiB so
 * it stays in L2 while every row block of A passes over it. */
static inline size_t ak__i8_chunk_panels(size_t K) {
    size_t k4 = (K + AK_KF_I8_KG - 1) / AK_KF_I8_KG;
    size_t per_panel = k4 * AK_KF_I8_NR * AK_KF_I8_KG;
    size_t n = ((size_t)128 << 10) / (per_panel ? per_panel : 1);
    return n < 2 ? 2 : n & ~(size_t)1;
}

#endif /* AK_KERNELS_X86_I8GEMM_X86_H */
