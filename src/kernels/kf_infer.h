/* Function types and argument blocks of the ONNX engine's kernels (the inference block
 * of kernels/kernels.def): convolution tiles and rows over the NCHWc layout, depthwise
 * rows, pooling rows, the GEMM convolutions' tile finish, and the elementwise, reduce,
 * softmax and layer-norm row loops. Included by kernels/dispatch.h; the operators in
 * src/infer/ops/ fill these blocks and call through ak__kernels_active(), one call per
 * row or tile.
 *
 * Where a kernel finishes its outputs in registers it takes an ak__sgemm_tile_epi
 * (dispatch.h): act AK_SGEMM_ACT_NONE, _MAX (ReLU with lo = 0, NaN → lo) or _CLAMP
 * (Clip, NaN kept); only the tile finish reads its bias and z members (the argument
 * blocks of the others carry them). */
#ifndef AK_KERNELS_KF_INFER_H
#define AK_KERNELS_KF_INFER_H

#include <stddef.h>
#include <stdint.h>

struct ak__sgemm_tile_epi;

/* Channels per block of the NCHWc layout, (N, C/8, H, W, 8). */
#define AK_KF_NCHWC_BLOCK 8

/* ---- NCHWc convolution tiles ---------------------------------------------------------
 * One output row of n outputs × the 8·nb (nb = 1..4) output channels of a weight panel
 * [K][8·nb], K = blocks·kh·kw·lanes rows in the order (input block, ky, kx, lane). The
 * input value of output r for row k is read at
 *     x + block·cb_stride + ky·ky_stride + kx·dx + r·sx + lane;
 * y[(l/8)·plane + r·8 + l%8] = finish(bias[l] + Σ_k x·w[k][l] (+ z at the same place)).
 * Which nb the packing uses is the table's choice (ak__kernels_nchwc_panel_blocks: 4 where
 * a variant has 4-block tiles), but every variant runs every nb. 
 * Variants split the row into tiles of their own size; lanes is 1 (plain rows of a stem)
 * or 8 (a blocked X). */
typedef struct ak__kf_nchwc_tile {
    const float *x;    /* output 0's window, block 0, tap (0, 0) */
    const float *w;    /* the panel */
    const float *bias; /* the panel's 8·nb, or NULL */
    const float *z;    /* laid out like y, or NULL */
    float *y;          /* output 0, the panel's first block */
    uint64_t plane;    /* floats between the two output blocks */
    int64_t blocks, cb_stride, kh, ky_stride, kw, dx, sx;
    int lanes;
    /* the kernels' own (callers leave it): floats between the rows of the whole panel
     * while they run a part of its blocks (ak__nchwc_conv_panel) */
    int64_t w_stride;
} ak__kf_nchwc_tile;
typedef void ak__kf_nchwc_conv_row(const ak__kf_nchwc_tile *t, int nb, int64_t n,
                                   const struct ak__sgemm_tile_epi *fin);

/* ---- windows over a blocked plane (NCHWc depthwise, max pool) -------------------------
 * A 2-D window geometry: output o of an axis covers input positions o·s − pb + j·d,
 * j < k, those outside [0, in) skipped. */
typedef struct ak__kf_win2d {
    int64_t in[2], out[2], k[2], s[2], d[2], pb[2];
} ak__kf_win2d;

/* Depthwise over one block: x (H, W, 8), w (kh·kw, 8), bias 8 floats or NULL, z like
 * y or NULL, y (OH, OW, 8); output rows [oy0, oy1), each finished by fin. */
typedef struct ak__kf_nchwc_dw {
    const float *x, *w, *bias, *z;
    float *y;
} ak__kf_nchwc_dw;
typedef void ak__kf_nchwc_dw_rows(const ak__kf_win2d *g, const ak__kf_nchwc_dw *d, int64_t oy0,
                                  int64_t oy1, const struct ak__sgemm_tile_epi *fin);

/* Max pool, output row oy of one block xb (H, W, 8): the 8 channels of an output maxed
 * together (NaN inputs lose: max(v, acc) keeps acc), −FLT_MAX for an empty window;
 * written blocked (y[ox·8 + l]) or, y_blocked 0, into the 8 planes y + l·P. */
typedef void ak__kf_nchwc_maxpool_row(const ak__kf_win2d *g, const float *xb, int64_t oy,
                                      float *y, uint64_t P, int y_blocked);

/* ---- depthwise convolution of plain planes (Conv with group == C == M) ----------------
 * One plane over its padded, phase-split copy sc (kernels read whole vectors: every
 * tap's run of OW floats may be read up to the next multiple of 8, which the layout
 * pads): y[oy][ox] = finish(bias + Σ_t w[t]·sc[oy·row_step + off[t] + ox] (+ z[oy][ox])). */
#define AK_KF_DW_MAX_TAPS 64
typedef struct ak__kf_dw_plane {
    const float *sc;
    const size_t *off; /* taps' offsets from an output row's first padded row */
    const float *w;    /* taps' weights */
    size_t taps, OH, OW, row_step;
    float bias;
    const float *z; /* (OH, OW), or NULL */
    float *y;       /* (OH, OW) */
} ak__kf_dw_plane;
typedef void ak__kf_dw_rows(const ak__kf_dw_plane *p, const struct ak__sgemm_tile_epi *fin);

/* dst[j] = src[j·stride] for j < n (the phase split's row copies). */
typedef void ak__kf_strided_copy(float *dst, const float *src, int64_t n, int64_t stride);

/* Eight planes at once, channel-interleaved (short rows, strided windows): the interiors
 * of the input planes x + j·Pin (H, W) into sc8, (rows, cols, 8) with the padding pt
 * rows above and pl columns left already zero; every output position p < P (OW per
 * row, window origin at (oy·s0, ox·s1) of sc8) = bias8 + Σ_t wt[t]·sc8[origin + off[t]]
 * per lane, through out8 (room for P rounded up to 8 positions, 8 floats each, 32-byte
 * aligned like sc8 and wt); then y + j·P = finish(lane j (+ z + j·P)). */
typedef struct ak__kf_dw8 {
    const float *x;
    uint64_t Pin, P;
    int64_t H, W, pt, pl, s0, s1;
    size_t rows, cols, OW;
    const float *wt;    /* taps × 8 */
    const float *bias8; /* 8 */
    const size_t *off;  /* taps' offsets in sc8, in floats */
    size_t taps;
    float *sc8, *out8;
    const float *z; /* 8 planes, or NULL */
    float *y;
} ak__kf_dw8;
typedef void ak__kf_dw8_planes(const ak__kf_dw8 *a, const struct ak__sgemm_tile_epi *fin);

/* ---- Winograd F(4×4, 3×3) transforms -------------------------------------------------
 * An output plane (OH, OW) in 4×4 tiles, TH·TW = T of them in row-major order; tile t's
 * 6×6 input patch starts at (4·(t / TW), 4·(t % TW)) of a zero-padded plane (Hp, Wp).
 * V_ξ (ξ = row·6 + column of Bᵀ d B) is stored in the SGEMM microkernel's packed B
 * layout: element ξ of tile t of input channel c at
 *     V[ξ·S·C·nr + (t / nr·C + c)·nr + t % nr]   (S = ⌈T / nr⌉ slivers of nr tiles);
 * M_ξ (the GEMM's result) holds element ξ of tile t of output channel m at
 *     Mo[ξ·Mp·Tp + m·Tp + t]                     (Tp = S·nr).
 * Variants may write V's lanes between T and the next multiple of 8 (never read back). */
typedef struct ak__kf_wino {
    size_t H, W, ph, pw;   /* the image and its padding above and to the left */
    size_t Hp, Wp;         /* the padded plane */
    size_t OH, OW, TW, T;  /* the output plane, tiles per row, tiles */
    size_t C, nr, S;       /* V: input channels, sliver width, slivers */
    size_t Mp, Tp;         /* Mo: rows (output channels rounded up), row length */
} ak__kf_wino;
/* V for every tile of input channel c from its padded plane pad. */
typedef void ak__kf_wino_input(const ak__kf_wino *w, const float *pad, size_t c, float *V);
/* Aᵀ m A of output channel m from Mo into its plane y (OH, OW), unfinished. */
typedef void ak__kf_wino_output(const ak__kf_wino *w, const float *Mo, size_t m, float *y);
/* A blocked X's block src (H, W, 8) into its 8 padded planes dst + l·Hp·Wp, zeros around. */
typedef void ak__kf_wino_pad_blocked(const ak__kf_wino *w, const float *src, float *dst);
/* A blocked Y's block: the 8 plain planes (P floats apart) into y (P, 8), + bias8 (8
 * floats or NULL), then + z (like y, or NULL) and fin's activation. */
typedef void ak__kf_wino_finish_block(const float *planes, size_t P, const float *bias8,
                                      const float *z, float *y,
                                      const struct ak__sgemm_tile_epi *fin);

/* ---- moves: transposes and gathers -------------------------------------------------
 * One band of a 2-D transpose of 32-bit elements: dst[ib·dsb + ia] = src[ib + ia·sa] for
 * ia < na, ib in [ib0, ib1) (the tensor copy engine's tiles, NCHWc reorders). */
typedef void ak__kf_transpose32_band(uint32_t *dst, const uint32_t *src, int64_t na, int64_t ib0,
                                     int64_t ib1, int64_t sa, int64_t dsb);
/* dst[j] = src[2·j] for j < 16; src[0..32) must be readable (implicit GEMM's packing of a
 * stride-2 window row). */
typedef void ak__kf_gather_even16(const float *src, float *dst);

/* ---- the GEMM convolutions' tile finish ------------------------------------------------
 * y (m rows of n, ld apart) = act(y + bias[r] + z) in place; bias, z as in fin (NULL:
 * none; z laid out like y). */
typedef void ak__kf_tile_finish(float *y, uint64_t ld, size_t m, size_t n,
                                const struct ak__sgemm_tile_epi *fin);

/* ---- elementwise float32 -------------------------------------------------------------
 * dst[i] = a[i·sa] op b[i·sb] (sa, sb in {0, 1}: contiguous or broadcast; dst may equal
 * a or b), and dst[i] = f(src[i]) with parameters a, b (LeakyRelu alpha, Clip min/max,
 * HardSigmoid alpha/beta, Scale factor; dst may equal src). Transcendentals are range
 * reductions and polynomials (exp: |rel err| < 2e-7, erf: |err| < 3e-7); every variant
 * gives the reference's bits. */
typedef enum ak__ew_f32_bin {
    AK_EW_F32_ADD, AK_EW_F32_SUB, AK_EW_F32_MUL, AK_EW_F32_DIV, AK_EW_F32_MIN, AK_EW_F32_MAX,
    AK_EW_F32_PRELU, AK_EW_F32_BIN_COUNT
} ak__ew_f32_bin;
typedef enum ak__ew_f32_un {
    AK_EW_F32_RELU, AK_EW_F32_LEAKY, AK_EW_F32_CLIP, AK_EW_F32_ABS, AK_EW_F32_NEG,
    AK_EW_F32_SIGMOID, AK_EW_F32_TANH, AK_EW_F32_GELU_ERF, AK_EW_F32_GELU_TANH,
    AK_EW_F32_HARDSIGMOID, AK_EW_F32_HARDSWISH, AK_EW_F32_SCALE, AK_EW_F32_EXP, AK_EW_F32_ERF,
    AK_EW_F32_UN_COUNT
} ak__ew_f32_un;
typedef void ak__kf_ew_binary(ak__ew_f32_bin op, float *dst, const float *a, const float *b,
                              size_t n, int sa, int sb);
typedef void ak__kf_ew_unary(ak__ew_f32_un op, float *dst, const float *src, size_t n, float a,
                             float b);

/* ---- row loops: Reduce*, LayerNormalization, Softmax ---------------------------------
 * Reduce each of `rows` contiguous rows of n floats to y[row]: a sum of the values (kind
 * AK_KF_ROWS_SUM), of their magnitudes (_ABS) or squares (_SQUARES), their product, max
 * or min (NaN wins). Bit-identical across variants. */
enum {
    AK_KF_ROWS_SUM, AK_KF_ROWS_ABS, AK_KF_ROWS_SQUARES, AK_KF_ROWS_PROD, AK_KF_ROWS_MAX,
    AK_KF_ROWS_MIN
};
typedef void ak__kf_reduce_rows(const float *x, float *y, size_t rows, size_t n, int kind);
/* LayerNormalization of `rows` rows of n: y = (x − mean)·inv·g (+ b; b may be NULL), inv =
 * 1/sqrt(var + eps) (two passes); mean_out[row], inv_out[row] when not NULL.
 * Bit-identical across variants. */
typedef void ak__kf_layer_norm_rows(const float *x, float *y, size_t rows, size_t n,
                                    const float *g, const float *b, float eps, float *mean_out,
                                    float *inv_out);
/* Softmax (mode AK_KF_SOFTMAX) or LogSoftmax of `rows` contiguous rows of n, and of the
 * columns [0, w) (w ≤ AK_KF_SOFTMAX_COLS) of one [n][inner] slab along n. exp within 2
 * ulp of expf; variants differ by the roundings of their lane count and FMAs. */
enum { AK_KF_SOFTMAX, AK_KF_LOGSOFTMAX };
#define AK_KF_SOFTMAX_COLS 64
typedef void ak__kf_softmax_rows(const float *x, float *y, size_t rows, size_t n, int mode);
typedef void ak__kf_softmax_cols(const float *x, float *y, size_t n, size_t inner, size_t w,
                                 int mode);

#endif /* AK_KERNELS_KF_INFER_H */
