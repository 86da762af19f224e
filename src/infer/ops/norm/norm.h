/* The norm family's operator definitions, listed by norm/table.c: LayerNormalization and
 * MeanVarianceNormalization (layer_norm.c); BatchNormalization, InstanceNormalization
 * and LRN over NCHW tensors (batch_norm.c); the onnxruntime contrib RMS and skip
 * normalizations (rms_norm.c). */
#ifndef AK_INFER_OPS_NORM_NORM_H
#define AK_INFER_OPS_NORM_NORM_H

#include "infer/runtime/op.h"

extern const ak__op_def ak__op_layer_norm, ak__op_mvn;
extern const ak__op_def ak__nn_batchnorm, ak__nn_instancenorm, ak__nn_lrn;
extern const ak__op_def ak__norm_rms_contrib, ak__norm_rms_onnx_domain, ak__norm_skip_ln_contrib,
    ak__norm_skip_rms_contrib;

/* One RMSNorm row: y = x / sqrt(mean(x²) + eps) * g (g[0] for every element when g_all);
 * returns 1/sqrt(mean(x²) + eps). The scalar reference (double sums) and the vectorized
 * path (rms_norm.c). */
float ak__rms_row_ref(const float *x, float *y, size_t n, const float *g, int g_all, float eps);
float ak__rms_row_fast(const float *x, float *y, size_t n, const float *g, int g_all, float eps);

#endif /* AK_INFER_OPS_NORM_NORM_H */
