/* Scalar references of the attention kernels over f16 rows (an LLM's f16 KV cache): the
 * oracle of the ISA variants and what AK_KERNELS=ref runs. Each f16 value is widened
 * exactly (core/half.h) and the products summed in f32 in row / element order; variants
 * sum in other orders, so tests compare within a rounding bound, not bit for bit. */
#include "core/half.h"
#include "kernels/dispatch.h"

void ak_f16_dot_rows__ref(float *out, const float *q, const uint16_t *rows, size_t n,
                                 size_t dim, float scale) {
    for (size_t j = 0; j < n; j++) {
        float s = 0.0f;
        for (size_t d = 0; d < dim; d++) s += q[d] * ak__f16_to_f32_ref(rows[j * dim + d]);
        out[j] = s * scale;
    }
}

void ak_f16_madd_rows__ref(float *o, const float *p, const uint16_t *rows, size_t n,
                                  size_t dim) {
    for (size_t j = 0; j < n; j++)
        for (size_t d = 0; d < dim; d++) o[d] += p[j] * ak__f16_to_f32_ref(rows[j * dim + d]);
}

