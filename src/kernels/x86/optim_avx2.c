/* AVX2 + FMA fused optimizer kernels (kernels/kernels.def): SGD, Adam/AdamW and the two
 * LAMB phases in one pass each (read p, g, m, v once; write p, m, v once) instead of
 * torch's five to nine passes.
 *
 * Every lane performs kernels/ref/optim_ref.c's operations in its order with correctly rounded
 * vsqrtps / vdivps (no rsqrt or reciprocal estimates), so SGD, Adam and AdamW equal the
 * reference bit for bit. LAMB's norms add f32 squares over 256 elements and then in
 * double, which keeps them within ~1e-7 of the reference's double sums.
 *
 * The options (weight decay, momentum, Nesterov, AdamW) are compile-time arguments of
 * always-inline bodies, so each combination gets a branch-free loop. Tails use masked
 * loads and stores: no access past n, and the same vector code. */
#include <immintrin.h>
#include <stdint.h>

#include "kernels/x86/avx2_common.h"
#include "kernels/optim.h"

/* Lane mask for the first `rem` (< 8) lanes. */
AK_ALWAYS_INLINE __m256i tail_mask(size_t rem) {
    static const int32_t ramp[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
    return _mm256_loadu_si256((const __m256i *)(ramp + 8 - rem));
}

/* Loads 8 floats, or the first `rem` of them (the rest zero) when masked. */
AK_ALWAYS_INLINE __m256 load8(const float *p, int masked, __m256i mask) {
    return masked ? _mm256_maskload_ps(p, mask) : _mm256_loadu_ps(p);
}

AK_ALWAYS_INLINE void store8(float *p, __m256 x, int masked, __m256i mask) {
    if (masked)
        _mm256_maskstore_ps(p, mask, x);
    else
        _mm256_storeu_ps(p, x);
}

/* ---- SGD ---------------------------------------------------------------------------- */

enum { SGD_PLAIN, SGD_FIRST, SGD_MOMENTUM, SGD_FIRST_NESTEROV, SGD_NESTEROV };

AK_ALWAYS_INLINE void sgd8(const ak__optim_coef *c, float *p, const float *g, float *buf,
                           const int wd, const int mode, int masked, __m256i mask) {
    __m256 w = load8(p, masked, mask);
    __m256 d = _mm256_mul_ps(load8(g, masked, mask), _mm256_set1_ps(c->grad_scale));
    if (wd) d = _mm256_fmadd_ps(w, _mm256_set1_ps(c->weight_decay), d);
    if (mode != SGD_PLAIN) {
        __m256 mom = _mm256_set1_ps(c->momentum), b = d;
        if (mode == SGD_MOMENTUM || mode == SGD_NESTEROV)
            b = _mm256_fmadd_ps(d, _mm256_set1_ps(c->one_minus_dampening),
                                _mm256_mul_ps(load8(buf, masked, mask), mom));
        store8(buf, b, masked, mask);
        d = (mode == SGD_FIRST_NESTEROV || mode == SGD_NESTEROV) ? _mm256_fmadd_ps(b, mom, d) : b;
    }
    store8(p, _mm256_fmadd_ps(d, _mm256_set1_ps(c->neg_lr), w), masked, mask);
}

AK_ALWAYS_INLINE void sgd_loop(const ak__optim_coef *c, float *p, const float *g, float *buf,
                               size_t n, const int wd, const int mode) {
    size_t i = 0;
    __m256i none = _mm256_setzero_si256();
    for (; i + 16 <= n; i += 16) {
        sgd8(c, p + i, g + i, buf ? buf + i : NULL, wd, mode, 0, none);
        sgd8(c, p + i + 8, g + i + 8, buf ? buf + i + 8 : NULL, wd, mode, 0, none);
    }
    for (; i + 8 <= n; i += 8) sgd8(c, p + i, g + i, buf ? buf + i : NULL, wd, mode, 0, none);
    if (i < n) sgd8(c, p + i, g + i, buf ? buf + i : NULL, wd, mode, 1, tail_mask(n - i));
}

void ak_f32_sgd__avx2(const ak__optim_coef *c, float *p, const float *g, float *buf, size_t n) {
    int mode = !buf             ? SGD_PLAIN
               : c->first_step ? (c->nesterov ? SGD_FIRST_NESTEROV : SGD_FIRST)
                               : (c->nesterov ? SGD_NESTEROV : SGD_MOMENTUM);
    int wd = c->weight_decay != 0.0f;
#define AK_SGD_CASE(m)                                                                     \
    case m:                                                                                \
        if (wd) sgd_loop(c, p, g, buf, n, 1, m);                                           \
        else sgd_loop(c, p, g, buf, n, 0, m);                                              \
        break;
    switch (mode) {
        AK_SGD_CASE(SGD_PLAIN)
        AK_SGD_CASE(SGD_FIRST)
        AK_SGD_CASE(SGD_MOMENTUM)
        AK_SGD_CASE(SGD_FIRST_NESTEROV)
        AK_SGD_CASE(SGD_NESTEROV)
    }
#undef AK_SGD_CASE
}

/* ---- Adam / AdamW ------------------------------------------------------------------- */

enum { ADAM_PLAIN, ADAM_L2, ADAM_DECOUPLED };

/* Broadcast constants, loaded once per call rather than per vector. */
typedef struct {
    __m256 grad_scale, wd, beta1, omb1, beta2, omb2, eps, decay, neg_step, bc2_sqrt, bc1, bc2;
} adam_consts;

AK_ALWAYS_INLINE adam_consts adam_consts_of(const ak__optim_coef *c) {
    adam_consts k;
    k.grad_scale = _mm256_set1_ps(c->grad_scale);
    k.wd = _mm256_set1_ps(c->weight_decay);
    k.beta1 = _mm256_set1_ps(c->beta1);
    k.omb1 = _mm256_set1_ps(c->one_minus_beta1);
    k.beta2 = _mm256_set1_ps(c->beta2);
    k.omb2 = _mm256_set1_ps(c->one_minus_beta2);
    k.eps = _mm256_set1_ps(c->eps);
    k.decay = _mm256_set1_ps(c->param_decay);
    k.neg_step = _mm256_set1_ps(c->neg_step_size);
    k.bc2_sqrt = _mm256_set1_ps(c->bc2_sqrt);
    k.bc1 = _mm256_set1_ps(c->bc1);
    k.bc2 = _mm256_set1_ps(c->bc2);
    return k;
}

/* The moments, shared by Adam and LAMB: m = β1·m + (1-β1)·d, v = β2·v + (1-β2)·d². */
AK_ALWAYS_INLINE void moments8(const adam_consts *k, __m256 d, __m256 *m, __m256 *v) {
    *m = _mm256_fmadd_ps(d, k->omb1, _mm256_mul_ps(*m, k->beta1));
    *v = _mm256_fmadd_ps(_mm256_mul_ps(k->omb2, d), d, _mm256_mul_ps(*v, k->beta2));
}

AK_ALWAYS_INLINE void adam8(const adam_consts *k, float *p, const float *g, float *m, float *v,
                            const int mode, int masked, __m256i mask) {
    __m256 w = load8(p, masked, mask);
    __m256 d = _mm256_mul_ps(load8(g, masked, mask), k->grad_scale);
    if (mode == ADAM_DECOUPLED) w = _mm256_mul_ps(w, k->decay);
    if (mode == ADAM_L2) d = _mm256_fmadd_ps(w, k->wd, d);
    __m256 mi = load8(m, masked, mask), vi = load8(v, masked, mask);
    moments8(k, d, &mi, &vi);
    __m256 denom = _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(vi), k->bc2_sqrt), k->eps);
    store8(m, mi, masked, mask);
    store8(v, vi, masked, mask);
    store8(p, _mm256_add_ps(w, _mm256_div_ps(_mm256_mul_ps(k->neg_step, mi), denom)), masked,
           mask);
}

AK_ALWAYS_INLINE void adam_loop(const ak__optim_coef *c, float *p, const float *g, float *m,
                                float *v, size_t n, const int mode) {
    adam_consts k = adam_consts_of(c);
    __m256i none = _mm256_setzero_si256();
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        adam8(&k, p + i, g + i, m + i, v + i, mode, 0, none);
        adam8(&k, p + i + 8, g + i + 8, m + i + 8, v + i + 8, mode, 0, none);
    }
    for (; i + 8 <= n; i += 8) adam8(&k, p + i, g + i, m + i, v + i, mode, 0, none);
    if (i < n) adam8(&k, p + i, g + i, m + i, v + i, mode, 1, tail_mask(n - i));
}

void ak_f32_adam__avx2(const ak__optim_coef *c, float *p, const float *g, float *m, float *v,
                      size_t n) {
    if (c->param_decay != 1.0f)
        adam_loop(c, p, g, m, v, n, ADAM_DECOUPLED);
    else if (c->weight_decay != 0.0f)
        adam_loop(c, p, g, m, v, n, ADAM_L2);
    else
        adam_loop(c, p, g, m, v, n, ADAM_PLAIN);
}

/* ---- LAMB --------------------------------------------------------------------------- */

/* u = (m / bc1) / (sqrt(v / bc2) + eps) [+ wd·p], as lamb_update in optim_ref.c. */
AK_ALWAYS_INLINE __m256 lamb_update8(const adam_consts *k, __m256 w, __m256 mi, __m256 vi,
                                     const int wd) {
    __m256 den = _mm256_add_ps(_mm256_sqrt_ps(_mm256_div_ps(vi, k->bc2)), k->eps);
    __m256 u = _mm256_div_ps(_mm256_div_ps(mi, k->bc1), den);
    return wd ? _mm256_fmadd_ps(k->wd, w, u) : u;
}

/* Squares summed in f32 over at most this many elements before moving to double. */
#define LAMB_F32_RUN 256

AK_ALWAYS_INLINE __m256d widen_sum(__m256 x) {
    return _mm256_add_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(x)),
                         _mm256_cvtps_pd(_mm256_extractf128_ps(x, 1)));
}

AK_ALWAYS_INLINE double hsum_pd(__m256d x) {
    __m128d s = _mm_add_pd(_mm256_castpd256_pd128(x), _mm256_extractf128_pd(x, 1));
    return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

AK_ALWAYS_INLINE void lamb_moments8(const adam_consts *k, const float *p, const float *g,
                                    float *m, float *v, const int wd, int masked,
                                    __m256i mask, __m256 *ps, __m256 *us) {
    __m256 w = load8(p, masked, mask);
    __m256 d = _mm256_mul_ps(load8(g, masked, mask), k->grad_scale);
    __m256 mi = load8(m, masked, mask), vi = load8(v, masked, mask);
    moments8(k, d, &mi, &vi);
    store8(m, mi, masked, mask);
    store8(v, vi, masked, mask);
    __m256 u = lamb_update8(k, w, mi, vi, wd);
    /* masked lanes load zeros: w adds nothing, but u is 0/0 there when eps is 0 */
    if (masked) u = _mm256_and_ps(u, _mm256_castsi256_ps(mask));
    *ps = _mm256_fmadd_ps(w, w, *ps);
    *us = _mm256_fmadd_ps(u, u, *us);
}

AK_ALWAYS_INLINE void lamb_moments_loop(const ak__optim_coef *c, const float *p,
                                        const float *g, float *m, float *v, size_t n,
                                        double *p_sq, double *u_sq, const int wd) {
    adam_consts k = adam_consts_of(c);
    __m256i none = _mm256_setzero_si256();
    __m256d psd = _mm256_setzero_pd(), usd = _mm256_setzero_pd();
    size_t i = 0;
    while (i < n) {
        size_t end = n - i > LAMB_F32_RUN ? i + LAMB_F32_RUN : n;
        __m256 ps0 = _mm256_setzero_ps(), us0 = ps0, ps1 = ps0, us1 = ps0;
        for (; i + 16 <= end; i += 16) {
            lamb_moments8(&k, p + i, g + i, m + i, v + i, wd, 0, none, &ps0, &us0);
            lamb_moments8(&k, p + i + 8, g + i + 8, m + i + 8, v + i + 8, wd, 0, none, &ps1,
                          &us1);
        }
        for (; i + 8 <= end; i += 8)
            lamb_moments8(&k, p + i, g + i, m + i, v + i, wd, 0, none, &ps0, &us0);
        if (i < end) {
            lamb_moments8(&k, p + i, g + i, m + i, v + i, wd, 1, tail_mask(end - i), &ps0,
                          &us0);
            i = end;
        }
        psd = _mm256_add_pd(psd, widen_sum(_mm256_add_ps(ps0, ps1)));
        usd = _mm256_add_pd(usd, widen_sum(_mm256_add_ps(us0, us1)));
    }
    *p_sq += hsum_pd(psd);
    *u_sq += hsum_pd(usd);
}

void ak_f32_lamb_moments__avx2(const ak__optim_coef *c, const float *p, const float *g, float *m,
                              float *v, size_t n, double *p_sq, double *u_sq) {
    if (c->weight_decay != 0.0f)
        lamb_moments_loop(c, p, g, m, v, n, p_sq, u_sq, 1);
    else
        lamb_moments_loop(c, p, g, m, v, n, p_sq, u_sq, 0);
}

AK_ALWAYS_INLINE void lamb_apply8(const adam_consts *k, float *p, const float *m, const float *v,
                                  __m256 scale, const int wd, int masked, __m256i mask) {
    __m256 w = load8(p, masked, mask);
    __m256 u = lamb_update8(k, w, load8(m, masked, mask), load8(v, masked, mask), wd);
    store8(p, _mm256_fmadd_ps(u, scale, w), masked, mask);
}

AK_ALWAYS_INLINE void lamb_apply_loop(const ak__optim_coef *c, float *p, const float *m,
                                      const float *v, size_t n, float neg_lr_ratio,
                                      const int wd) {
    adam_consts k = adam_consts_of(c);
    __m256 scale = _mm256_set1_ps(neg_lr_ratio);
    __m256i none = _mm256_setzero_si256();
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        lamb_apply8(&k, p + i, m + i, v + i, scale, wd, 0, none);
        lamb_apply8(&k, p + i + 8, m + i + 8, v + i + 8, scale, wd, 0, none);
    }
    for (; i + 8 <= n; i += 8) lamb_apply8(&k, p + i, m + i, v + i, scale, wd, 0, none);
    if (i < n) lamb_apply8(&k, p + i, m + i, v + i, scale, wd, 1, tail_mask(n - i));
}

void ak_f32_lamb_apply__avx2(const ak__optim_coef *c, float *p, const float *m, const float *v,
                            size_t n, float neg_lr_ratio) {
    if (c->weight_decay != 0.0f)
        lamb_apply_loop(c, p, m, v, n, neg_lr_ratio, 1);
    else
        lamb_apply_loop(c, p, m, v, n, neg_lr_ratio, 0);
}
