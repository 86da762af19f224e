/* Scalar reference of the memory probe (kernels.def: u64_read_sum): the wrapping sum of n
 * 64-bit words, n a multiple of 32, read as two streams side by side — the halves
 * [0, n/2) and [n/2, n) — with two independent chains per half. */
#include "kernels/dispatch.h"

uint64_t ak_u64_read_sum__ref(const uint64_t *p, size_t n) {
    const uint64_t *lo = p, *hi = p + n / 2;
    uint64_t a = 0, b = 0, c = 0, d = 0;
    for (size_t i = 0; i < n / 2; i += 2) {
        a += lo[i];
        b += lo[i + 1];
        c += hi[i];
        d += hi[i + 1];
    }
    return a + b + c + d;
}
