/* Scalar references of the LLM decoder's own loops (kernels/kernels.def: f32_dot_rows,
 * f32_madd_rows, f32_softmax, f32_swiglu, f32_geglu, f32_gelu, f32_softcap, f32_rope, f32_rmsnorm,
 * f32_layernorm, f32_moe_route): the oracle of the ISA variants and
 * what AK_KERNELS=ref runs. Plain loops in element order; exp is kernels/exp_approx.h's
 * (the variants compute the same approximation per lane), so the variants differ from
 * these only in summation order and fused multiply-adds. */
#include <math.h>
#include <stddef.h>

#include "kernels/dispatch.h"
#include "kernels/exp_approx.h"

void ak_f32_dot_rows__ref(float *out, const float *q, const float *rows, size_t n, size_t dim,
                          float scale) {
    for (size_t j = 0; j < n; j++) {
        float s = 0.0f;
        for (size_t d = 0; d < dim; d++) s += q[d] * rows[j * dim + d];
        out[j] = s * scale;
    }
}

void ak_f32_madd_rows__ref(float *o, const float *p, const float *rows, size_t n, size_t dim) {
    for (size_t d = 0; d < dim; d++) {
        float a = o[d];
        for (size_t j = 0; j < n; j++) a += p[j] * rows[j * dim + d];
        o[d] = a;
    }
}

void ak_f32_softmax__ref(float *s, size_t n) {
    if (n == 0) return;
    float mx = s[0];
    for (size_t j = 1; j < n; j++) mx = s[j] > mx ? s[j] : mx;
    float sum = 0.0f;
    for (size_t j = 0; j < n; j++) {
        s[j] = ak__exp_approx(s[j] - mx);
        sum += s[j];
    }
    float inv = 1.0f / sum;
    for (size_t j = 0; j < n; j++) s[j] *= inv;
}

void ak_f32_swiglu__ref(float *x, const float *up, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = x[i] / (1.0f + ak__exp_approx(-x[i])) * up[i];
}

/* gelu_tanh(x) = ½x(1 + tanh u) = x·σ(2u), u = √(2/π)(x + 0.044715x³) */
void ak_f32_geglu__ref(float *x, const float *up, size_t n) {
    for (size_t i = 0; i < n; i++) {
        float v = x[i], u2 = 1.5957691216057308f * (v + 0.044715f * v * v * v);
        x[i] = v / (1.0f + ak__exp_approx(-u2)) * up[i];
    }
}

void ak_f32_gelu__ref(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) {
        float v = x[i], u2 = 1.5957691216057308f * (v + 0.044715f * v * v * v);
        x[i] = v / (1.0f + ak__exp_approx(-u2));
    }
}

/* cap·tanh(x/cap) with tanh y = 1 − 2/(1 + e^(2y)) */
void ak_f32_softcap__ref(float *x, size_t n, float cap) {
    float inv2 = 2.0f / cap;
    for (size_t i = 0; i < n; i++)
        x[i] = cap - 2.0f * cap / (1.0f + ak__exp_approx(x[i] * inv2));
}

void ak_f32_rope__ref(float *x, size_t T, size_t n_heads, size_t hd, int neox, const float *cs) {
    size_t half = hd / 2;
    for (size_t t = 0; t < T; t++) {
        const float *c = cs + t * hd, *s = c + half;
        for (size_t h = 0; h < n_heads; h++) {
            float *v = x + (t * n_heads + h) * hd;
            for (size_t i = 0; i < half; i++) {
                /* the pair: (i, i + half) rotate-half (neox), (2i, 2i + 1) interleaved */
                size_t lo = neox ? i : 2 * i, hi = neox ? i + half : 2 * i + 1;
                float a = v[lo], b = v[hi];
                v[lo] = a * c[i] - b * s[i];
                v[hi] = a * s[i] + b * c[i];
            }
        }
    }
}

/* The sum of squares in double; the ISA tables inherit this one (one pass per row, not
 * where the decoder spends its time). */
void ak_f32_rmsnorm__ref(float *out, const float *x, const float *w, size_t n, float eps) {
    double ss = 0;
    for (size_t i = 0; i < n; ++i) ss += (double)x[i] * x[i];
    float scale = (float)(1.0 / sqrt(ss / (double)n + eps));
    for (size_t i = 0; i < n; ++i) out[i] = x[i] * scale * w[i];
}

/* Mean and variance in double, as RMSNorm's sum of squares (one pass per row). */
void ak_f32_layernorm__ref(float *out, const float *x, const float *w, const float *b, size_t n,
                           float eps) {
    double sum = 0, sq = 0;
    for (size_t i = 0; i < n; ++i) sum += x[i];
    double mean = sum / (double)n;
    for (size_t i = 0; i < n; ++i) sq += ((double)x[i] - mean) * ((double)x[i] - mean);
    float scale = (float)(1.0 / sqrt(sq / (double)n + eps)), m = (float)mean;
    for (size_t i = 0; i < n; ++i) out[i] = (x[i] - m) * scale * w[i] + b[i];
}

void ak_f32_moe_route__ref(float *p, size_t n_experts, size_t k, int norm, int32_t *sel,
                           float *w) {
    ak_f32_softmax__ref(p, n_experts);
    double sum = 0;
    for (size_t j = 0; j < k; ++j) {
        size_t best = n_experts;
        for (size_t e = 0; e < n_experts; ++e) {
            int taken = 0;
            for (size_t i = 0; i < j; ++i) taken |= sel[i] == (int32_t)e;
            if (!taken && (best == n_experts || p[e] > p[best])) best = e;
        }
        sel[j] = (int32_t)best;
        w[j] = p[best];
        sum += p[best];
    }
    if (norm)
        for (size_t j = 0; j < k; ++j) w[j] = (float)(w[j] / sum);
}
