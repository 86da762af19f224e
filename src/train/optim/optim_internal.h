/* Internal interface of the fused optimizers (src/train/optim/): the per-step constants
 * ak_optim_step derives from an ak_optim_config, the kernel table each variant fills
 * (optim_ref.c: the scalar oracle; optim_avx2.c: AVX2+FMA), and the chunked driver.
 *
 * Every variant performs the same IEEE operations in the same order (fmaf where torch's
 * CPU kernels fuse, a correctly rounded sqrt and divide), so SGD, Adam and AdamW are
 * bit-identical across variants and to torch.optim (foreach=False) on one thread. LAMB
 * differs only in the summation order of its two norms. */
#ifndef AK_TRAIN_OPTIM_INTERNAL_H
#define AK_TRAIN_OPTIM_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "accelkit/train.h"

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

/* Kernels over one contiguous range; no argument checks (the driver did them). */
typedef struct ak__optim_kernels {
    const char *name; /* "ref", "avx2" */
    /* buf: the momentum buffer, NULL when c->momentum == 0 */
    void (*sgd)(const ak__optim_coef *c, float *p, const float *g, float *buf, size_t n);
    /* Adam (c->weight_decay into the gradient) and AdamW (c->param_decay != 1,
     * c->weight_decay 0) */
    void (*adam)(const ak__optim_coef *c, float *p, const float *g, float *m, float *v,
                 size_t n);
    /* LAMB phase 1: updates m and v, adds Σp² and Σu² of the range to *p_sq, *u_sq
     * (u = m̂ / (sqrt(v̂) + eps) + wd·p, the update direction) */
    void (*lamb_moments)(const ak__optim_coef *c, const float *p, const float *g, float *m,
                         float *v, size_t n, double *p_sq, double *u_sq);
    /* LAMB phase 2: p += neg_lr_ratio · u, with u recomputed from p, m, v bit for bit as
     * in phase 1 (cheaper than a scratch buffer: no allocation, 8 bytes less traffic) */
    void (*lamb_apply)(const ak__optim_coef *c, float *p, const float *m, const float *v,
                       size_t n, float neg_lr_ratio);
} ak__optim_kernels;

extern const ak__optim_kernels ak__optim_kernels_ref;
extern const ak__optim_kernels ak__optim_kernels_avx2;

/* "ref" or "avx2"; NULL for an unknown name or when the CPU lacks AVX2+FMA. */
const ak__optim_kernels *ak__optim_kernels_for(const char *variant);
/* What ak_optim_step uses: avx2 when the active kernel table is avx2/avx512 (so AK_ISA
 * and AK_KERNELS=ref apply here too), else ref. Call after ak_init succeeded. */
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
