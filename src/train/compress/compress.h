/* Gradient compressors used by the training runtime (src/train/runtime*.c) on fused f32
 * buffers: casts to f16/bf16 with a shared scale, and deep gradient compression (top-k
 * with sampled threshold, momentum correction and factor masking, clipping, error
 * feedback, warm-up schedule). The casts are tested bit-exact against scalar references,
 * DGC by its invariants (selection share, conservation of mass, capacity, schedule) and a
 * convergence test (tests/train/test_compress.c). */
#ifndef AK_TRAIN_COMPRESS_H
#define AK_TRAIN_COMPRESS_H

#include <stddef.h>
#include <stdint.h>

#include "accelkit/train.h"

/* fp16/bf16 ----------------------------------------------------------------------------
 * The power-of-two scale every rank must use for a buffer whose largest |value| over all
 * ranks is global_absmax, so that the sum over world ranks cannot overflow f16 and small
 * values keep their precision. 1 for bf16 (f32 range). */
float ak__compress_scale(ak_train_compression kind, float global_absmax, int world);
/* Largest |x| of n floats (NaN propagates as NaN). */
float ak__compress_absmax(const float *x, size_t n);
/* wire[i] = half(x[i] * scale); wire holds n f16 or bf16 values. */
ak_status ak__compress_cast(ak_train_compression kind, const float *x, void *wire, size_t n,
                            float scale);
/* out[i] = float(wire[i]) * inv_scale */
ak_status ak__decompress_cast(ak_train_compression kind, const void *wire, float *out,
                              size_t n, float inv_scale);

/* deep gradient compression ------------------------------------------------------------ */
typedef struct ak_dgc_state ak_dgc_state; /* per tensor: momentum, residual, step */

ak_status ak__dgc_create(const ak_dgc_config *cfg, size_t n, ak_dgc_state **out);
void ak__dgc_free(ak_dgc_state *state);
/* Upper bound of values ak__dgc_compress selects for an n-element tensor at any step. */
size_t ak__dgc_capacity(const ak_dgc_state *state);
/* Accumulates grad (n = the state's size) into the residual, selects the values above the
 * sampled top-k threshold into idx/val (at most ak__dgc_capacity), removes them from the
 * residual (and masks the momentum there), advances the step. *k = values selected. */
ak_status ak__dgc_compress(ak_dgc_state *state, const float *grad, uint32_t *idx, float *val,
                           size_t *k);
/* dense[idx[i]] += val[i]; indices are checked against n. */
ak_status ak__dgc_scatter_add(const uint32_t *idx, const float *val, size_t k, float *dense,
                              size_t n);
/* The sparsity the schedule gives at a step (0-based). */
float ak__dgc_sparsity_at(const ak_dgc_config *cfg, int64_t step);

#endif /* AK_TRAIN_COMPRESS_H */
