/* The float32 Softmax / LogSoftmax row and column kernels (kf_infer.h), written once for
 * a vector width and included once per instantiation (kernels/ref/rows_ref.c: 4 lanes,
 * kernels/x86/rows_avx2.c: 8 lanes with FMA contraction) with these defined:
 *   VF, VI   float and int32 vector types of VW lanes
 *   KATTR    function attributes
 *   KNAME(x) the instantiation's name for x
 * Deliberately without an include guard. */

/* y[0..k) = exp(x[0..k) - sub) for k <= VW through a padded vector; returns the sum. */
KATTR static inline float KNAME(exp_sub_tail)(float *y, const float *x, size_t k, float sub) {
    float buf[VW];
    for (size_t l = 0; l < VW; l++) buf[l] = l < k ? x[l] - sub : -INFINITY;
    VF v;
    AK_VLOAD(v, buf);
    AK_VEXP_NONPOS(VF, VI, v);
    AK_VSTORE(buf, v);
    float s = 0.0f;
    for (size_t l = 0; l < k; l++) {
        if (y) y[l] = buf[l];
        s += buf[l];
    }
    return s;
}

/* Normalizes `rows` contiguous rows of n floats (inner == 1). */
KATTR static void KNAME(rows)(const float *x, float *y, size_t rows, size_t n, int mode) {
    for (size_t row = 0; row < rows; row++, x += n, y += n) {
        size_t i = 0;
        VF m0 = AK_VSPLAT(VF, -INFINITY), m1 = m0;
        for (; i + 2 * VW <= n; i += 2 * VW) {
            VF a, b;
            AK_VLOAD(a, x + i);
            AK_VLOAD(b, x + i + VW);
            m0 = AK_VSELECT(VI, a > m0, a, m0);
            m1 = AK_VSELECT(VI, b > m1, b, m1);
        }
        m0 = AK_VSELECT(VI, m1 > m0, m1, m0);
        float m = m0[0];
        for (int l = 1; l < VW; l++) m = m0[l] > m ? m0[l] : m;
        for (; i < n; i++) m = x[i] > m ? x[i] : m;

        /* exp(x - m): stored for Softmax, only summed for LogSoftmax; two vectors a step
         * so two exp chains overlap */
        float *dst = mode == AK_KF_SOFTMAX ? y : NULL;
        VF s0 = AK_VSPLAT(VF, 0.0f), s1 = s0;
        for (i = 0; i + 2 * VW <= n; i += 2 * VW) {
            VF a, b;
            AK_VLOAD(a, x + i);
            AK_VLOAD(b, x + i + VW);
            a -= m;
            b -= m;
            AK_VEXP_NONPOS(VF, VI, a);
            AK_VEXP_NONPOS(VF, VI, b);
            if (dst) {
                AK_VSTORE(dst + i, a);
                AK_VSTORE(dst + i + VW, b);
            }
            s0 += a;
            s1 += b;
        }
        s0 += s1;
        float s = 0.0f;
        for (int l = 0; l < VW; l++) s += s0[l];
        for (; i < n; i += VW) {
            size_t k = n - i < VW ? n - i : VW;
            s += KNAME(exp_sub_tail)(dst ? dst + i : NULL, x + i, k, m);
        }

        if (mode == AK_KF_SOFTMAX) {
            float r = 1.0f / s;
            for (i = 0; i + VW <= n; i += VW) {
                VF v;
                AK_VLOAD(v, y + i);
                v *= r;
                AK_VSTORE(y + i, v);
            }
            for (; i < n; i++) y[i] *= r;
        } else {
            float c = m + logf(s);
            for (i = 0; i + VW <= n; i += VW) {
                VF v;
                AK_VLOAD(v, x + i);
                v -= c;
                AK_VSTORE(y + i, v);
            }
            for (; i < n; i++) y[i] = x[i] - c;
        }
    }
}

/* Normalizes columns [0, w) (w <= AK_KF_SOFTMAX_COLS) of one [n][inner] slab along n. */
KATTR static void KNAME(cols)(const float *x, float *y, size_t n, size_t inner, size_t w,
                              int mode) {
    float m[AK_KF_SOFTMAX_COLS], s[AK_KF_SOFTMAX_COLS];
    for (size_t c = 0; c < w; c++) m[c] = -INFINITY, s[c] = 0.0f;
    for (size_t k = 0; k < n; k++)
        for (size_t c = 0; c < w; c++) {
            float v = x[k * inner + c];
            m[c] = v > m[c] ? v : m[c];
        }
    for (size_t k = 0; k < n; k++) {
        const float *xk = x + k * inner;
        float *yk = y + k * inner;
        size_t c = 0;
        for (; c + VW <= w; c += VW) {
            VF v, mv, sv;
            AK_VLOAD(v, xk + c);
            AK_VLOAD(mv, m + c);
            AK_VLOAD(sv, s + c);
            v -= mv;
            AK_VEXP_NONPOS(VF, VI, v);
            sv += v;
            AK_VSTORE(s + c, sv);
            if (mode == AK_KF_SOFTMAX) AK_VSTORE(yk + c, v);
        }
        for (; c < w; c++) { /* one lane at a time, same arithmetic */
            float e;
            s[c] += KNAME(exp_sub_tail)(&e, xk + c, 1, m[c]);
            if (mode == AK_KF_SOFTMAX) yk[c] = e;
        }
    }
    for (size_t c = 0; c < w; c++) s[c] = mode == AK_KF_SOFTMAX ? 1.0f / s[c] : m[c] + logf(s[c]);
    for (size_t k = 0; k < n; k++) {
        const float *xk = x + k * inner;
        float *yk = y + k * inner;
        if (mode == AK_KF_SOFTMAX)
            for (size_t c = 0; c < w; c++) yk[c] *= s[c];
        else
            for (size_t c = 0; c < w; c++) yk[c] = xk[c] - s[c];
    }
}
