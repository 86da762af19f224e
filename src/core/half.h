/* Scalar fp16/bf16 <-> fp32 conversion: the reference every vector variant is tested
 * against. Round to nearest, ties to even. NaN stays NaN with the quiet bit set and its
 * payload truncated (what F16C's vcvtps2ph does); f16 subnormals are exact both ways. */
#ifndef AK_CORE_HALF_H
#define AK_CORE_HALF_H

#include <stdint.h>
#include <string.h>

static inline uint32_t ak__f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float ak__f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline float ak__f16_to_f32_ref(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    if (exp == 0x1f) /* Inf keeps payload 0; NaN is quieted (as vcvtph2ps does) */
        return ak__f32_from_bits(sign | 0x7f800000u | (man << 13) | (man ? 0x400000u : 0));
    if (exp == 0) {
        if (man == 0) return ak__f32_from_bits(sign);
        /* subnormal: man * 2^-24, exact in f32 */
        int shift = 0;
        while (!(man & 0x400u)) {
            man <<= 1;
            shift++;
        }
        man &= 0x3ffu;
        return ak__f32_from_bits(sign | ((uint32_t)(113 - shift) << 23) | (man << 13));
    }
    return ak__f32_from_bits(sign | ((exp + 112) << 23) | (man << 13));
}

static inline uint16_t ak__f32_to_f16_ref(float f) {
    uint32_t u = ak__f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t exp = (u >> 23) & 0xffu;
    uint32_t man = u & 0x7fffffu;
    if (exp == 0xff) /* Inf or NaN */
        return (uint16_t)(sign | 0x7c00u | (man ? 0x200u | (man >> 13) : 0));
    int32_t e = (int32_t)exp - 127 + 15;
    if (e >= 0x1f) return (uint16_t)(sign | 0x7c00u); /* overflow: Inf */
    if (e <= 0) {                                      /* subnormal or zero */
        if (e < -10) return sign;                      /* below half the smallest */
        uint32_t m = man | 0x800000u;
        uint32_t shift = (uint32_t)(14 - e);
        uint32_t result = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1);
        uint32_t halfway = 1u << (shift - 1);
        if (rem > halfway || (rem == halfway && (result & 1u))) result++;
        return (uint16_t)(sign | result);
    }
    uint32_t result = ((uint32_t)e << 10) | (man >> 13);
    uint32_t rem = man & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (result & 1u))) result++; /* may carry to Inf */
    return (uint16_t)(sign | result);
}

static inline float ak__bf16_to_f32_ref(uint16_t b) {
    return ak__f32_from_bits((uint32_t)b << 16);
}

static inline uint16_t ak__f32_to_bf16_ref(float f) {
    uint32_t u = ak__f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

#endif /* AK_CORE_HALF_H */
