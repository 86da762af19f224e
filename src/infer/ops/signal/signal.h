/* The signal-processing operator family (ONNX opset 17+): window generators, the mel
 * filter bank and the discrete Fourier transforms. Each file exports its definitions to
 * the family table in signal/table.c, and the helpers below are shared by them.
 *
 * Every computation runs in double precision and is rounded once into the output type,
 * so float32 results are within one rounding of the exact values. */
#ifndef AK_INFER_OPS_SIGNAL_SIGNAL_H
#define AK_INFER_OPS_SIGNAL_SIGNAL_H

#include "infer/runtime/op.h"

/* signal/window.c */
extern const ak__op_def ak__op_hann_window, ak__op_hamming_window, ak__op_blackman_window;
/* signal/mel.c */
extern const ak__op_def ak__op_mel_weight_matrix;
/* signal/dft.c */
extern const ak__op_def ak__op_dft_17, ak__op_dft_20, ak__op_stft;

/* The element type named by attribute `output_datatype` (default float32), which must be
 * a float or integer type; fails naming the attribute otherwise. */
ak_status ak__signal_output_type(const ak__op_ctx *ctx, ak_elem_type *out);

/* Input i as one integer: a scalar or one-element int32/int64 tensor named `what`. */
ak_status ak__signal_scalar_int(const ak__op_ctx *ctx, uint32_t i, const char *what,
                                int64_t *out);
/* Input i as one number of any numeric type. */
ak_status ak__signal_scalar_double(const ak__op_ctx *ctx, uint32_t i, const char *what,
                                   double *out);

#endif /* AK_INFER_OPS_SIGNAL_SIGNAL_H */
