/* The int8 GEMM of the ONNX engine's quantized operators (MatMulInteger, ConvInteger,
 * QLinearMatMul, QLinearConv, MatMulIntegerToFloat): its function type, the packed layout
 * of its B operand, and the packing routine (kernels/i8gemm_pack.c), shared by every ISA
 * variant so one packed weight serves whichever kernel the CPU runs.
 *
 * The kernel multiplies unsigned 8-bit A by signed 8-bit B into int32, the pairing
 * vpdpbusd and vpmaddubsw take. The operators reach every other pairing by flipping the
 * top bit (u ^ 0x80 = s + 128) and moving the zero point by the same 128, which leaves
 * (a − za)·(b − zb) unchanged. Sums are exact in int32 while K·255·128 < 2^31 (K < 65793);
 * beyond that they wrap as ONNX Runtime's int32 accumulators do. */
#ifndef AK_KERNELS_KF_INT8_H
#define AK_KERNELS_KF_INT8_H

#include <stddef.h>
#include <stdint.h>

/* Columns per packed panel of B, and the k values interleaved per column. */
#define AK_KF_I8_NR 16
#define AK_KF_I8_KG 4

/* B (K×N) packed: panel p holds columns [16p, 16p + 16); inside it k-group g (k in
 * [4g, 4g + 4)) takes 64 bytes at Bp + (p·K4 + g)·64, column j's four values at byte 4j.
 * K4 = ceil(K/4); values past K or N are zero. */
static inline size_t ak__i8_packed_bytes(size_t K, size_t N) {
    size_t k4 = (K + AK_KF_I8_KG - 1) / AK_KF_I8_KG, panels = (N + AK_KF_I8_NR - 1) / AK_KF_I8_NR;
    return panels * k4 * AK_KF_I8_NR * AK_KF_I8_KG;
}

/* C[m][n] = Σ_k A[m][k]·B[k][n] in int32 for m < M, n < N (C's row stride ldc), A uint8
 * row-major with row stride lda (only A[m][0..K) is read), B packed as above. Exact
 * (integer products and sums; no rounding anywhere). */
typedef void ak__kf_u8s8_gemm(size_t M, size_t N, size_t K, const uint8_t *A, size_t lda,
                              const int8_t *Bp, int32_t *C, size_t ldc);

/* Packs B into Bp (ak__i8_packed_bytes(K, N) bytes): element (k, n) read at
 * B[k·rs + n·cs], int8 as it is, or uint8 with its top bit flipped (flip_u8: b − 128).
 * colsum (N int32, may be NULL) receives Σ_k of each packed column. */
void ak__i8_pack_b(const void *B, int flip_u8, size_t K, size_t N, size_t rs, size_t cs,
                   int8_t *Bp, int32_t *colsum);

/* ---- the channel-major product with its epilogue fused (quantized convolutions) -------
 * C[m][p] = Σ_k W[m][k]·X[k][p] for m < M output channels and p < P pixels, W int8 and
 * X uint8 (vpdpbusd's operands the other way round: the weights are broadcast, the
 * pixels fill the vector lanes), so each output channel's pixels come out contiguous, as
 * NCHW stores them, and the requantization runs on the accumulators before they leave
 * the registers.
 *
 * W: M rows of ak__i8_w_stride(K) bytes (zero past K). X packed: k-group g (k in
 * [4g, 4g + 4)) at Xp + g·ak__i8_x_stride(P), pixel p's four values at byte 4p; pixels
 * P to the next multiple of 16 are read and may hold anything (their results are not
 * stored); values past K may too, W being zero there. */
static inline size_t ak__i8_w_stride(size_t K) {
    return (K + AK_KF_I8_KG - 1) / AK_KF_I8_KG * AK_KF_I8_KG;
}
static inline size_t ak__i8_x_stride(size_t P) {
    return (P + AK_KF_I8_NR - 1) / AK_KF_I8_NR * AK_KF_I8_NR * AK_KF_I8_KG;
}

enum { AK_I8_OUT_I32, AK_I8_OUT_U8, AK_I8_OUT_S8 };

/* What becomes of C[m][p]: v = C + row_bias[m] − row_zp[m]·col_sum[p] (int32, wrapping;
 * the row_zp term only when row_zp is not NULL), then
 *   AK_I8_OUT_I32  out[m·ldo + p] = v (int32)
 *   AK_I8_OUT_U8 / AK_I8_OUT_S8  out[m·ldo + p] = saturate(rint((float)v·row_mult[m]) +
 *                  out_zp) in the type's range, rint rounding half to even, a NaN product
 *                  giving the lowest value; with relu, values below out_zp become out_zp. */
typedef struct ak__i8_epilogue {
    int kind;
    const int32_t *row_bias; /* M values (required) */
    const int32_t *row_zp;   /* M values, or NULL */
    const int32_t *col_sum;  /* P values (read only with row_zp) */
    const float *row_mult;   /* M values (U8 / S8) */
    int32_t out_zp;
    int relu;
    void *out;
    size_t ldo; /* elements between rows of out */
} ak__i8_epilogue;

typedef void ak__kf_u8s8_conv(size_t M, size_t P, size_t K, const int8_t *W, const uint8_t *Xp,
                              const ak__i8_epilogue *e);

#endif /* AK_KERNELS_KF_INT8_H */
