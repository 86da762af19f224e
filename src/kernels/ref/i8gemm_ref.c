/* Scalar reference of the int8 GEMM (kernels/kf_int8.h): C = A(uint8)·B(int8, packed) in
 * int32. It defines the result every variant must reproduce bit for bit: the exact sum
 * of the products, wrapping modulo 2^32 as the vector instructions do when K is beyond
 * the range where int32 cannot overflow. */
#include "kernels/dispatch.h"

void ak_u8s8_gemm__ref(size_t M, size_t N, size_t K, const uint8_t *A, size_t lda,
                       const int8_t *Bp, int32_t *C, size_t ldc) {
    size_t k4 = (K + AK_KF_I8_KG - 1) / AK_KF_I8_KG;
    for (size_t m = 0; m < M; m++)
        for (size_t n = 0; n < N; n++) {
            const int8_t *panel = Bp + (n / AK_KF_I8_NR) * k4 * AK_KF_I8_NR * AK_KF_I8_KG;
            size_t j = n % AK_KF_I8_NR;
            uint32_t acc = 0; /* unsigned: wraps where the hardware's int32 lanes wrap */
            for (size_t k = 0; k < K; k++) {
                int32_t b = panel[((k / AK_KF_I8_KG) * AK_KF_I8_NR + j) * AK_KF_I8_KG +
                                  k % AK_KF_I8_KG];
                acc += (uint32_t)((int32_t)A[m * lda + k] * b);
            }
            C[m * ldc + n] = (int32_t)acc;
        }
}

/* The finish of one element (kernels/kf_int8.h's ak__i8_epilogue), defining the rounding
 * the vector variants reproduce: float(v)·multiplier in float32, rint (half to even in
 * the default rounding mode), the zero point added in float (exact: every term is an
 * integer below 2^24 or saturates anyway), comparisons that send NaN to the lowest value. */
static void finish_one(const ak__i8_epilogue *e, size_t m, size_t p, int32_t acc) {
    uint32_t v = (uint32_t)acc + (uint32_t)e->row_bias[m];
    if (e->row_zp) v -= (uint32_t)e->row_zp[m] * (uint32_t)e->col_sum[p];
    size_t at = m * e->ldo + p;
    if (e->kind == AK_I8_OUT_I32) {
        ((int32_t *)e->out)[at] = (int32_t)v;
        return;
    }
    int is_signed = e->kind == AK_I8_OUT_S8;
    float lo = is_signed ? -128.0f : 0.0f, hi = is_signed ? 127.0f : 255.0f;
    float r = __builtin_rintf((float)(int32_t)v * e->row_mult[m]) + (float)e->out_zp;
    r = r >= lo ? r : lo; /* NaN fails the comparison: lo */
    r = r <= hi ? r : hi;
    int32_t y = (int32_t)r;
    if (e->relu && y < e->out_zp) y = e->out_zp;
    if (is_signed) ((int8_t *)e->out)[at] = (int8_t)y;
    else ((uint8_t *)e->out)[at] = (uint8_t)y;
}

void ak_u8s8_conv__ref(size_t M, size_t P, size_t K, const int8_t *W, const uint8_t *Xp,
                       const ak__i8_epilogue *e) {
    size_t ldw = ak__i8_w_stride(K), ldx = ak__i8_x_stride(P);
    for (size_t m = 0; m < M; m++)
        for (size_t p = 0; p < P; p++) {
            uint32_t acc = 0; /* wraps as the hardware's int32 lanes do */
            for (size_t k = 0; k < K; k++)
                acc += (uint32_t)((int32_t)W[m * ldw + k] *
                                  (int32_t)Xp[(k / AK_KF_I8_KG) * ldx + p * AK_KF_I8_KG +
                                              k % AK_KF_I8_KG]);
            finish_one(e, m, p, (int32_t)acc);
        }
}
