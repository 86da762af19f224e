/* Internal interface of the fused optimizers (src/train/optim/): the per-step constants
 * ak_optim_step derives from an ak_optim_config (their type is kernels/optim.h's), a view
 * of one kernel table's optimizer kernels (the loops are table kernels:
 * kernels/ref/optim_ref.c is the scalar oracle, kernels/x86/optim_avx2.c the AVX2+FMA
 * variant), and the chunked driver. */
#ifndef AK_TRAIN_OPTIM_INTERNAL_H
#define AK_TRAIN_OPTIM_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "accelkit/train.h"
#include "kernels/optim.h"


/* The optimizer kernels of one kernel table, over one contiguous range; no argument
 * checks (the driver did them). name: the variant whose loops they are ("ref" or
 * "avx2": generic inherits ref's, avx512 avx2's). See kernels/kernels.def for each
 * kernel's contract. */
typedef struct ak__optim_kernels {
    const char *name;
    ak__kf_optim_sgd *sgd;
    ak__kf_optim_adam *adam;
    ak__kf_optim_lamb_moments *lamb_moments;
    ak__kf_optim_lamb_apply *lamb_apply;
} ak__optim_kernels;

/* The view of variant's table ("ref", "generic", "avx2", "avx512"); NULL for an unknown
 * name or when the CPU cannot run it. */
const ak__optim_kernels *ak__optim_kernels_for(const char *variant);
/* What ak_optim_step uses: the active kernel table's (so AK_ISA and AK_KERNELS=ref apply
 * here too). */
const ak__optim_kernels *ak__optim_kernels_active(void);

/* Validates cfg/step (not the buffers) and derives the step constants. */
ak_status ak__optim_coef_init(const ak_optim_config *cfg, int64_t step, ak__optim_coef *out);

/* The multiplier of u in LAMB's phase 2: -lr · ||p|| / ||u||, or -lr when either norm
 * is 0 (NaN or Inf sums propagate, as a non-finite gradient should). */
float ak__optim_lamb_neg_lr_ratio(const ak__optim_coef *c, double p_sq, double u_sq);

/* One step with kernel table k, in blocks spread over pool (NULL = on this thread).
 * The blocks and the order of LAMB's partial sums do not depend on the pool, so the
 * result is the same for any thread count. Buffers must already be checked. */
void ak__optim_run(const ak__optim_kernels *k, ak_optim_kind kind, const ak__optim_coef *c,
                   float *param, const float *grad, float *state1, float *state2, size_t n,
                   ak_threadpool *pool);

#endif /* AK_TRAIN_OPTIM_INTERNAL_H */
