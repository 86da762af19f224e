/* Fuzz: every kernel table's fp16/bf16 conversions and f16/bf16 adds must equal the
 * scalar references bit for bit on arbitrary bit patterns. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/half.h"
#include "kernels/dispatch.h"

static const char *const variants[] = {"generic", "avx2", "avx512"};

static void check_table(const ak__kernels *k, const ak__kernels *ref, const uint8_t *data,
                        size_t size) {
    size_t n16 = size / 2, n32 = size / 4;
    uint16_t *h = malloc(n16 * 2 + 2), *h_ref = malloc(n16 * 2 + 2), *o = malloc(n16 * 2 + 2);
    float *f = malloc(n32 * 4 + 4), *f_out = malloc(n16 * 4 + 4), *f_ref = malloc(n16 * 4 + 4);
    memcpy(h, data, n16 * 2);
    memcpy(f, data, n32 * 4);
    k->f16_to_f32(f_out, h, n16);
    ref->f16_to_f32(f_ref, h, n16);
    if (memcmp(f_out, f_ref, n16 * 4)) abort();
    k->bf16_to_f32(f_out, h, n16);
    ref->bf16_to_f32(f_ref, h, n16);
    if (memcmp(f_out, f_ref, n16 * 4)) abort();
    k->f32_to_f16(o, f, n32);
    ref->f32_to_f16(h_ref, f, n32);
    if (memcmp(o, h_ref, n32 * 2)) abort();
    k->f32_to_bf16(o, f, n32);
    ref->f32_to_bf16(h_ref, f, n32);
    if (memcmp(o, h_ref, n32 * 2)) abort();
    free(h), free(h_ref), free(o), free(f), free(f_out), free(f_ref);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (ak_init() != AK_OK) abort();
    const ak__kernels *ref = ak__kernels_for("ref");
    for (size_t v = 0; v < sizeof variants / sizeof *variants; v++) {
        const ak__kernels *k = ak__kernels_for(variants[v]);
        if (k) check_table(k, ref, data, size);
    }
    return 0;
}
