/* The ONNX engine's float32 elementwise kernels (kf_infer.h: ak_f32_ew_unary,
 * ak_f32_ew_binary) written once with GCC vector extensions and compiled twice, by
 * kernels/ref/ew_f32_ref.c and kernels/x86/ew_f32_avx2.c: EW_SFX(name) names this copy's
 * functions and EW_VBYTES is its vector width (16: the baseline ISA's, the reference; 32:
 * AVX2). Each lane runs the same arithmetic without contraction, so both copies give
 * the same bits. EW_INLINE must be defined. No include guard on purpose.
 *
 * Loads and stores go through memcpy so any alignment works. Transcendentals use
 * range reduction + polynomials (exp: Cephes' coefficients, |rel err| < 2e-7; erf:
 * |err| < 3e-7). */

typedef float EW_SFX(vf) __attribute__((vector_size(EW_VBYTES)));
typedef int32_t EW_SFX(vi) __attribute__((vector_size(EW_VBYTES)));
typedef uint32_t EW_SFX(vu) __attribute__((vector_size(EW_VBYTES)));
#define VF EW_SFX(vf)
#define VI EW_SFX(vi)
#define VU EW_SFX(vu)
#define VL ((size_t)(EW_VBYTES / 4))

EW_INLINE VF EW_SFX(load)(const float *p) {
    VF v;
    memcpy(&v, p, sizeof v);
    return v;
}

EW_INLINE void EW_SFX(store)(float *p, VF v) { memcpy(p, &v, sizeof v); }

/* m ? a : b, m from a vector comparison (all ones or zero per lane) */
EW_INLINE VF EW_SFX(sel)(VI m, VF a, VF b) { return (VF)(((VI)a & m) | ((VI)b & ~m)); }

EW_INLINE VF EW_SFX(vmin)(VF a, VF b) { return EW_SFX(sel)((a < b) | (a != a), a, b); }
EW_INLINE VF EW_SFX(vmax)(VF a, VF b) { return EW_SFX(sel)((a > b) | (a != a), a, b); }

/* clamps keep NaN (both comparisons are false) */
EW_INLINE VF EW_SFX(clamp)(VF x, float lo, float hi) {
    VF vlo = (VF){0} + lo, vhi = (VF){0} + hi;
    x = EW_SFX(sel)(x < vlo, vlo, x);
    return EW_SFX(sel)(x > vhi, vhi, x);
}

EW_INLINE VF EW_SFX(vabs)(VF x) { return (VF)((VI)x & 0x7fffffff); }

/* exp(x) over the whole float range: 2^n applied as two factors so n in [-150, 128]
 * (denormal results, overflow to +inf) needs no special case; NaN stays NaN. */
EW_INLINE VF EW_SFX(vexp)(VF x) {
    x = EW_SFX(clamp)(x, -104.0f, 88.8f);
    VF t = x * 1.44269504088896341f + 12582912.0f; /* round to nearest by the magic */
    VF n = t - 12582912.0f;
    VF r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    VF p = (VF){0} + 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    VI ni = __builtin_convertvector(n, VI);
    VI n1 = ni >> 1, n2 = ni - n1;
    VF s1 = (VF)((VU)(n1 + 127) << 23), s2 = (VF)((VU)(n2 + 127) << 23);
    return p * s1 * s2;
}

EW_INLINE VF EW_SFX(copysign)(VF mag, VF sign) {
    return (VF)(((VI)mag & 0x7fffffff) | ((VI)sign & (int32_t)0x80000000u));
}

/* tanh: odd Taylor series below 0.3 (no cancellation), (1-e)/(1+e) with e = exp(-2|x|)
 * above. */
EW_INLINE VF EW_SFX(vtanh)(VF x) {
    VF ax = EW_SFX(vabs)(x);
    VF e = EW_SFX(vexp)(ax * -2.0f);
    VF big = EW_SFX(copysign)((1.0f - e) / (1.0f + e), x);
    VF x2 = x * x;
    VF s = x2 * (62.0f / 2835.0f) + (-17.0f / 315.0f);
    s = s * x2 + (2.0f / 15.0f);
    s = s * x2 + (-1.0f / 3.0f);
    VF small = x + x * x2 * s;
    return EW_SFX(sel)(ax < 0.3f, small, big);
}

/* erf: odd Taylor series below 0.5, Abramowitz-Stegun 7.1.26 above (|err| < 2e-7). */
EW_INLINE VF EW_SFX(verf)(VF x) {
    VF ax = EW_SFX(vabs)(x);
    VF t = 1.0f / (ax * 0.3275911f + 1.0f);
    VF p = t * 1.061405429f + -1.453152027f;
    p = p * t + 1.421413741f;
    p = p * t + -0.284496736f;
    p = p * t + 0.254829592f;
    VF big = EW_SFX(copysign)(1.0f - p * t * EW_SFX(vexp)(-(ax * ax)), x);
    VF x2 = x * x;
    VF s = x2 * (-1.0f / 1320.0f) + (1.0f / 216.0f);
    s = s * x2 + (-1.0f / 42.0f);
    s = s * x2 + (1.0f / 10.0f);
    s = s * x2 + (-1.0f / 3.0f);
    VF small = (x + x * x2 * s) * 1.1283791670955126f;
    return EW_SFX(sel)(ax < 0.5f, small, big);
}

EW_INLINE VF EW_SFX(unary_v)(ak__ew_f32_un op, VF x, float a, float b) {
    switch (op) {
    case AK_EW_F32_RELU: return (VF)((VI)x & ~(x < 0.0f));
    case AK_EW_F32_LEAKY: return EW_SFX(sel)(x < 0.0f, x * a, x);
    case AK_EW_F32_CLIP: return EW_SFX(clamp)(x, a, b);
    case AK_EW_F32_ABS: return EW_SFX(vabs)(x);
    case AK_EW_F32_NEG: return -x;
    case AK_EW_F32_SIGMOID: return 1.0f / (1.0f + EW_SFX(vexp)(-x));
    case AK_EW_F32_TANH: return EW_SFX(vtanh)(x);
    case AK_EW_F32_GELU_ERF: {
        VF e = EW_SFX(verf)(x * 0.70710678118654752f);
        return 0.5f * x * (1.0f + e);
    }
    case AK_EW_F32_GELU_TANH: {
        VF u = (x + 0.044715f * x * x * x) * 0.79788456080286536f;
        return 0.5f * x * (1.0f + EW_SFX(vtanh)(u));
    }
    case AK_EW_F32_HARDSIGMOID: return EW_SFX(clamp)(x * a + b, 0.0f, 1.0f);
    case AK_EW_F32_HARDSWISH: return x * EW_SFX(clamp)(x * (1.0f / 6.0f) + 0.5f, 0.0f, 1.0f);
    case AK_EW_F32_SCALE: return x * a;
    case AK_EW_F32_EXP: return EW_SFX(vexp)(x);
    case AK_EW_F32_ERF: return EW_SFX(verf)(x);
    default: return x;
    }
}

/* One loop per op so the switch sits outside it. */
#define EW_UNARY_CASE(OP)                                                                  \
    case OP:                                                                               \
        for (; i + VL <= n; i += VL)                                                       \
            EW_SFX(store)(dst + i, EW_SFX(unary_v)(OP, EW_SFX(load)(src + i), a, b));     \
        break;

static void EW_SFX(ew_f32_unary)(ak__ew_f32_un op, float *dst, const float *src, size_t n,
                                 float a, float b) {
    size_t i = 0;
    switch (op) {
        EW_UNARY_CASE(AK_EW_F32_RELU)
        EW_UNARY_CASE(AK_EW_F32_LEAKY)
        EW_UNARY_CASE(AK_EW_F32_CLIP)
        EW_UNARY_CASE(AK_EW_F32_ABS)
        EW_UNARY_CASE(AK_EW_F32_NEG)
        EW_UNARY_CASE(AK_EW_F32_SIGMOID)
        EW_UNARY_CASE(AK_EW_F32_TANH)
        EW_UNARY_CASE(AK_EW_F32_GELU_ERF)
        EW_UNARY_CASE(AK_EW_F32_GELU_TANH)
        EW_UNARY_CASE(AK_EW_F32_HARDSIGMOID)
        EW_UNARY_CASE(AK_EW_F32_HARDSWISH)
        EW_UNARY_CASE(AK_EW_F32_SCALE)
        EW_UNARY_CASE(AK_EW_F32_EXP)
        EW_UNARY_CASE(AK_EW_F32_ERF)
    default: break;
    }
    if (i < n) { /* the tail through one padded vector */
        float tmp[EW_VBYTES / 4] = {0};
        memcpy(tmp, src + i, (n - i) * sizeof *tmp);
        EW_SFX(store)(tmp, EW_SFX(unary_v)(op, EW_SFX(load)(tmp), a, b));
        memcpy(dst + i, tmp, (n - i) * sizeof *tmp);
    }
}

EW_INLINE VF EW_SFX(binary_v)(ak__ew_f32_bin op, VF x, VF y) {
    switch (op) {
    case AK_EW_F32_ADD: return x + y;
    case AK_EW_F32_SUB: return x - y;
    case AK_EW_F32_MUL: return x * y;
    case AK_EW_F32_DIV: return x / y;
    case AK_EW_F32_MIN: return EW_SFX(vmin)(x, y);
    case AK_EW_F32_MAX: return EW_SFX(vmax)(x, y);
    case AK_EW_F32_PRELU: return EW_SFX(sel)(x < 0.0f, x * y, x);
    default: return x;
    }
}

/* The three operand layouts: both contiguous, b broadcast, a broadcast. */
#define EW_BINARY_CASE(OP)                                                                 \
    case OP:                                                                               \
        if (sa && sb)                                                                      \
            for (; i + VL <= n; i += VL)                                                   \
                EW_SFX(store)(dst + i, EW_SFX(binary_v)(OP, EW_SFX(load)(a + i),           \
                                                        EW_SFX(load)(b + i)));             \
        else if (sa)                                                                       \
            for (VF y = (VF){0} + b[0]; i + VL <= n; i += VL)                              \
                EW_SFX(store)(dst + i, EW_SFX(binary_v)(OP, EW_SFX(load)(a + i), y));      \
        else if (sb)                                                                       \
            for (VF x = (VF){0} + a[0]; i + VL <= n; i += VL)                              \
                EW_SFX(store)(dst + i, EW_SFX(binary_v)(OP, x, EW_SFX(load)(b + i)));      \
        break;

static void EW_SFX(ew_f32_binary)(ak__ew_f32_bin op, float *dst, const float *a, const float *b,
                                  size_t n, int sa, int sb) {
    size_t i = 0;
    switch (op) {
        EW_BINARY_CASE(AK_EW_F32_ADD)
        EW_BINARY_CASE(AK_EW_F32_SUB)
        EW_BINARY_CASE(AK_EW_F32_MUL)
        EW_BINARY_CASE(AK_EW_F32_DIV)
        EW_BINARY_CASE(AK_EW_F32_MIN)
        EW_BINARY_CASE(AK_EW_F32_MAX)
        EW_BINARY_CASE(AK_EW_F32_PRELU)
    default: break;
    }
    for (; i < n; i++) {
        VF x = (VF){0} + a[i * (size_t)sa], y = (VF){0} + b[i * (size_t)sb];
        dst[i] = EW_SFX(binary_v)(op, x, y)[0];
    }
}

#undef EW_UNARY_CASE
#undef EW_BINARY_CASE
#undef VF
#undef VI
#undef VU
#undef VL
