/* A software-prefetch walk over the weight lines of a run of rows, shared by the linear
 * (kernels/linear_x86.h) and super-block (kernels/x86/kquant_x86.h) tiles. Tiles that read
 * several rows at once read them as short interleaved streams, which the hardware
 * prefetcher does not follow; a tile issues one pf_walk_one per inner step instead, so the
 * rows it needs next arrive while it computes. */
#ifndef AK_KERNELS_X86_PF_WALK_H
#define AK_KERNELS_X86_PF_WALK_H

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

typedef struct pf_walk {
    const uint8_t *row;               /* the row being walked */
    size_t off, bytes, row_bytes, rows; /* offset in it, bytes used per row, stride, rows left */
    int near; /* 1: needed within a few tiles (into L1), 0: later (into L2) */
} pf_walk;

/* Prefetches the next line, if any. */
static inline __attribute__((always_inline)) void pf_walk_one(pf_walk *p) {
    if (!p->rows) return;
    if (p->near)
        _mm_prefetch((const char *)(p->row + p->off), _MM_HINT_T0);
    else /* T0 would evict the tile's activations from L1 */
        _mm_prefetch((const char *)(p->row + p->off), _MM_HINT_T1);
    p->off += 64;
    if (p->off >= p->bytes) {
        p->off = 0;
        p->row += p->row_bytes;
        p->rows--;
    }
}

#endif
