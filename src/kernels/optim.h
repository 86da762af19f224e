/* The fused optimizer kernels' per-step constants (kernels/kernels.def lists the kernels:
 * f32_sgd, f32_adam, f32_lamb_moments, f32_lamb_apply). train/optim/ derives them from an
 * ak_optim_config once per step and runs the kernels over blocks of the buffers.
 *
 * Every variant performs the same IEEE operations in the same order (fmaf where torch's
 * CPU kernels fuse, a correctly rounded sqrt and divide), so SGD, Adam and AdamW are
 * bit-identical across variants and to torch.optim (foreach=False) on one thread. LAMB
 * differs only in the summation order of its two norms. */
#ifndef AK_KERNELS_OPTIM_H
#define AK_KERNELS_OPTIM_H

#include "kernels/dispatch.h"

/* Constants of one step, all rounded to f32 once (torch hands its Python-double scalars
 * to the f32 kernels the same way). */
typedef struct ak__optim_coef {
    float grad_scale;   /* g = grad * grad_scale, first */
    float weight_decay; /* SGD, Adam: g += wd * p; LAMB: u += wd * p; 0 = skipped */
    float neg_lr;       /* -lr (SGD step, LAMB before the trust ratio) */
    /* SGD */
    float momentum;            /* 0 = no momentum buffer */
    float one_minus_dampening; /* 1 - dampening */
    int nesterov;
    int first_step;            /* step == 1: the momentum buffer becomes the gradient */
    /* Adam, AdamW, LAMB */
    float beta1, one_minus_beta1, beta2, one_minus_beta2, eps;
    float param_decay;   /* AdamW: p *= 1 - lr*wd before the update; 1 = none */
    float neg_step_size; /* Adam, AdamW: -lr / (1 - beta1^step) */
    float bc2_sqrt;      /* Adam, AdamW: sqrt(1 - beta2^step) */
    float bc1, bc2;      /* LAMB: 1 - beta1^step, 1 - beta2^step */
} ak__optim_coef;

#endif /* AK_KERNELS_OPTIM_H */
