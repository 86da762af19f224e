/* Scalar reference optimizer kernels (f32_sgd, f32_adam, f32_lamb_moments,
 * f32_lamb_apply of kernels/kernels.def): the test oracle for every vector variant and
 * the path AK_KERNELS=ref forces.
 *
 * Each line is one f32 operation of torch.optim's CPU kernels (torch 1.13, foreach=False),
 * in torch's order: add(alpha=)/add_(alpha=) is fmaf(b, alpha, a), addcmul_(t, t, value=s)
 * is fmaf(s·t, t, x), addcdiv_(m, d, value=s) is x + (s·m)/d. Checked bit for bit against
 * torch by bench/train/optim_vs_torch.py. LAMB follows apex FusedLAMB (adam_w_mode) and
 * sums its norms in double. */
#include <math.h>

#include "kernels/optim.h"

void ak_f32_sgd__ref(const ak__optim_coef *c, float *p, const float *g, float *buf, size_t n) {
    for (size_t i = 0; i < n; i++) {
        float d = g[i] * c->grad_scale;
        if (c->weight_decay != 0.0f) d = fmaf(p[i], c->weight_decay, d);
        if (buf) {
            float b = c->first_step ? d : fmaf(d, c->one_minus_dampening, buf[i] * c->momentum);
            buf[i] = b;
            d = c->nesterov ? fmaf(b, c->momentum, d) : b;
        }
        p[i] = fmaf(d, c->neg_lr, p[i]);
    }
}

void ak_f32_adam__ref(const ak__optim_coef *c, float *p, const float *g, float *m, float *v,
                      size_t n) {
    for (size_t i = 0; i < n; i++) {
        float w = p[i];
        float d = g[i] * c->grad_scale;
        if (c->param_decay != 1.0f) w = w * c->param_decay; /* AdamW */
        if (c->weight_decay != 0.0f) d = fmaf(w, c->weight_decay, d); /* Adam's L2 */
        float mi = fmaf(d, c->one_minus_beta1, m[i] * c->beta1);
        float vi = fmaf(c->one_minus_beta2 * d, d, v[i] * c->beta2);
        float denom = sqrtf(vi) / c->bc2_sqrt + c->eps;
        m[i] = mi;
        v[i] = vi;
        p[i] = w + (c->neg_step_size * mi) / denom;
    }
}

/* The LAMB direction for one element (shared by both phases so they agree bit for bit). */
static float lamb_update(const ak__optim_coef *c, float w, float mi, float vi) {
    float u = (mi / c->bc1) / (sqrtf(vi / c->bc2) + c->eps);
    return c->weight_decay != 0.0f ? fmaf(c->weight_decay, w, u) : u;
}

void ak_f32_lamb_moments__ref(const ak__optim_coef *c, const float *p, const float *g,
                               float *m, float *v, size_t n, double *p_sq, double *u_sq) {
    double ps = 0.0, us = 0.0;
    for (size_t i = 0; i < n; i++) {
        float d = g[i] * c->grad_scale;
        float mi = fmaf(d, c->one_minus_beta1, m[i] * c->beta1);
        float vi = fmaf(c->one_minus_beta2 * d, d, v[i] * c->beta2);
        m[i] = mi;
        v[i] = vi;
        double u = lamb_update(c, p[i], mi, vi);
        ps += (double)p[i] * p[i]; /* exact products: only the sums round */
        us += u * u;
    }
    *p_sq += ps;
    *u_sq += us;
}

void ak_f32_lamb_apply__ref(const ak__optim_coef *c, float *p, const float *m, const float *v,
                             size_t n, float neg_lr_ratio) {
    for (size_t i = 0; i < n; i++)
        p[i] = fmaf(lamb_update(c, p[i], m[i], v[i]), neg_lr_ratio, p[i]);
}
