/* AVX2 + FMA variants of the LLM decoder's own loops (kernels/kernels.def: f32_dot_rows,
 * f32_madd_rows, f32_softmax, f32_swiglu, f32_geglu, f32_gelu, f32_softcap, f32_rope), written with GNU vector extensions on
 * eight lanes. This file alone is compiled with -ffp-contract=fast (CMakeLists.txt): the
 * a*b+c of the bodies become FMAs, which ISO C mode would otherwise forbid. The vector
 * helpers are inlined, so the ABI note on vector returns (-Wpsabi) does not apply.
 *
 * exp is kernels/exp_approx.h's approximation lane for lane; results differ from the
 * references (kernels/ref/llm_ref.c) in summation order and fused multiply-adds only. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kernels/dispatch.h"
#include "kernels/exp_approx.h"

#define V8_INLINE static inline __attribute__((always_inline))

/* Eight lanes at any 4-byte alignment. */
typedef float v8f __attribute__((vector_size(32), aligned(4), may_alias));
typedef int32_t v8i __attribute__((vector_size(32), aligned(4), may_alias));

#define load8(p) (*(const v8f *)(const void *)(p))
#define store8(p, v) (*(v8f *)(void *)(p) = (v))

V8_INLINE float hsum8(v8f v) {
    return ((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7]));
}

/* m ? a : b per lane, m from a vector comparison (all ones or zero) */
V8_INLINE v8f select8(v8i m, v8f a, v8f b) {
    return (v8f)(((v8i)a & m) | ((v8i)b & ~m));
}

/* The same on eight lanes, bit for bit (selects instead of the clamp's branches, which
 * the compiler does not turn into vector code). */
V8_INLINE v8f exp_approx8(v8f x) {
    const v8f lo = (v8f){0} - 87.0f, hi = (v8f){0} + 88.0f;
    x = select8(x < lo, lo, x);
    x = select8(x > hi, hi, x);
    v8f n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    v8f r = x - n * 0.693359375f + n * 2.12194440e-4f;
    v8f p = (v8f){0} + 1.0f / 720;
    p = p * r + 1.0f / 120;
    p = p * r + 1.0f / 24;
    p = p * r + 1.0f / 6;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    v8i bits = (__builtin_convertvector(n, v8i) + 127) << 23;
    return p * (v8f)bits;
}

/* ---- attention: scores q·K rows, weighted sums of V rows --------------------------- */

V8_INLINE float dot(const float *a, const float *b, size_t n) {
    v8f s0 = {0}, s1 = {0};
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 += load8(a + i) * load8(b + i);
        s1 += load8(a + i + 8) * load8(b + i + 8);
    }
    for (; i + 8 <= n; i += 8) s0 += load8(a + i) * load8(b + i);
    float s = hsum8(s0 + s1);
    for (; i < n; ++i) s += a[i] * b[i];
    return s;
}

void ak_f32_dot_rows__avx2(float *out, const float *q, const float *rows, size_t n, size_t dim,
                           float scale) {
    for (size_t j = 0; j < n; ++j) out[j] = dot(q, rows + j * dim, dim) * scale;
}

/* 32 outputs at a time held in registers across the rows */
void ak_f32_madd_rows__avx2(float *o, const float *p, const float *rows, size_t n, size_t dim) {
    size_t d = 0;
    for (; d + 32 <= dim; d += 32) {
        v8f a0 = load8(o + d), a1 = load8(o + d + 8), a2 = load8(o + d + 16),
            a3 = load8(o + d + 24);
        for (size_t j = 0; j < n; ++j) {
            const float *vr = rows + j * dim + d;
            float pj = p[j];
            a0 += pj * load8(vr);
            a1 += pj * load8(vr + 8);
            a2 += pj * load8(vr + 16);
            a3 += pj * load8(vr + 24);
        }
        store8(o + d, a0);
        store8(o + d + 8, a1);
        store8(o + d + 16, a2);
        store8(o + d + 24, a3);
    }
    for (; d < dim; ++d) {
        float a = o[d];
        for (size_t j = 0; j < n; ++j) a += p[j] * rows[j * dim + d];
        o[d] = a;
    }
}

void ak_f32_softmax__avx2(float *s, size_t n) {
    if (n == 0) return;
    v8f m8 = (v8f){0} + s[0];
    size_t j = 0;
    for (; j + 8 <= n; j += 8) m8 = select8(load8(s + j) > m8, load8(s + j), m8);
    float mx = s[0];
    for (int i = 0; i < 8 && n >= 8; ++i) mx = m8[i] > mx ? m8[i] : mx;
    for (; j < n; ++j) mx = s[j] > mx ? s[j] : mx;
    v8f sum8 = {0};
    for (j = 0; j + 8 <= n; j += 8) {
        v8f e = exp_approx8(load8(s + j) - mx);
        store8(s + j, e);
        sum8 += e;
    }
    float sum = hsum8(sum8);
    for (; j < n; ++j) {
        s[j] = ak__exp_approx(s[j] - mx);
        sum += s[j];
    }
    float inv = 1.0f / sum;
    for (j = 0; j < n; ++j) s[j] *= inv;
}

/* ---- feed-forward and positions --------------------------------------------------- */

void ak_f32_swiglu__avx2(float *x, const float *up, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        v8f v = load8(x + i);
        store8(x + i, v / (1.0f + exp_approx8(-v)) * load8(up + i));
    }
    for (; i < n; ++i) x[i] = x[i] / (1.0f + ak__exp_approx(-x[i])) * up[i];
}

void ak_f32_geglu__avx2(float *x, const float *up, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        v8f v = load8(x + i), u2 = 1.5957691216057308f * (v + 0.044715f * v * v * v);
        store8(x + i, v / (1.0f + exp_approx8(-u2)) * load8(up + i));
    }
    for (; i < n; ++i) {
        float v = x[i], u2 = 1.5957691216057308f * (v + 0.044715f * v * v * v);
        x[i] = v / (1.0f + ak__exp_approx(-u2)) * up[i];
    }
}

void ak_f32_gelu__avx2(float *x, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        v8f v = load8(x + i), u2 = 1.5957691216057308f * (v + 0.044715f * v * v * v);
        store8(x + i, v / (1.0f + exp_approx8(-u2)));
    }
    for (; i < n; ++i) {
        float v = x[i], u2 = 1.5957691216057308f * (v + 0.044715f * v * v * v);
        x[i] = v / (1.0f + ak__exp_approx(-u2));
    }
}

void ak_f32_softcap__avx2(float *x, size_t n, float cap) {
    float inv2 = 2.0f / cap;
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        store8(x + i, cap - 2.0f * cap / (1.0f + exp_approx8(load8(x + i) * inv2)));
    for (; i < n; ++i) x[i] = cap - 2.0f * cap / (1.0f + ak__exp_approx(x[i] * inv2));
}

void ak_f32_rope__avx2(float *x, size_t T, size_t n_heads, size_t hd, int neox,
                       const float *cs) {
    size_t half = hd / 2;
    for (size_t t = 0; t < T; ++t) {
        const float *c = cs + t * hd, *s = c + half;
        for (size_t h = 0; h < n_heads; ++h) {
            float *v = x + (t * n_heads + h) * hd;
            if (neox) {
                float *restrict lo = v, *restrict hi = v + half;
                for (size_t i = 0; i < half; ++i) {
                    float a = lo[i], b = hi[i];
                    lo[i] = a * c[i] - b * s[i];
                    hi[i] = a * s[i] + b * c[i];
                }
            } else {
                for (size_t i = 0; i < half; ++i) {
                    float a = v[2 * i], b = v[2 * i + 1];
                    v[2 * i] = a * c[i] - b * s[i];
                    v[2 * i + 1] = a * s[i] + b * c[i];
                }
            }
        }
    }
}
