/* fp16 / bf16 gradient compression: the shared power-of-two scale, the absolute maximum
 * every rank allreduces to choose it, and the scaled casts to and from the wire.
 *
 * The conversions themselves are the kernels of include/accelkit/kernels.h (round to
 * nearest even, AVX2/F16C where available). A scale other than 1 is applied chunk by
 * chunk through a small stack buffer that stays in L1, so the scaled cast reads the
 * input once and writes the wire once, like the plain conversion. Multiplying by a power
 * of two is exact in f32 (above the f32 subnormals), so scaling adds no rounding of its
 * own. See docs/compression.md for the scale rule. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "accelkit/kernels.h"
#include "core/check.h"
#include "train/compress/compress.h"

/* Every rank's value times the scale is at most 2^AK__F16_HEADROOM_LOG2 / world, so the
 * sum over all ranks is at most 2^15 = 32768: half of the f16 maximum (65504), which
 * leaves room for the rounding of every partial sum a collective stores in f16. */
#define AK__F16_HEADROOM_LOG2 15
/* The scale stays within [2^-126, 2^126]: it and its inverse are finite normal floats,
 * so inv_scale = 1 / scale is exact. */
#define AK__SCALE_MAX_LOG2 126

/* Floats per chunk of the scaled paths: 4 KiB of f32, so the chunk, its source and its
 * wire slice all stay in L1. Of 512 .. 16384, 512 and 1024 were fastest (about 15 GB/s
 * against 9-10 at 4096 on a Zen 4 VM); below that the per-call checks start to show. */
#define AK__CAST_CHUNK 1024

float ak__compress_scale(ak_train_compression kind, float global_absmax, int world) {
    if (kind != AK_COMPRESS_FP16) return 1.0f; /* bf16 has the f32 exponent range */
    double amax = fabs((double)global_absmax);
    /* nothing to scale (all zero), or the buffer is already NaN / Inf and no scale can
     * help: 1 lets the non-finite values arrive as they are */
    if (!(amax > 0.0) || isinf(amax)) return 1.0f;
    /* world * amax = m * 2^e with m in [0.5, 1), so the product is at most 2^e (2^(e-1)
     * when m is exactly 0.5). Computed in double: FLT_MAX * 1024 neither overflows nor
     * rounds. */
    int e;
    if (frexp(amax * (double)(world > 1 ? world : 1), &e) == 0.5) e--;
    int s = AK__F16_HEADROOM_LOG2 - e;
    if (s > AK__SCALE_MAX_LOG2) s = AK__SCALE_MAX_LOG2;
    if (s < -AK__SCALE_MAX_LOG2) s = -AK__SCALE_MAX_LOG2;
    return ldexpf(1.0f, s);
}

/* The sign-cleared bit pattern orders non-negative floats like their values, and every
 * NaN above +Inf, so an integer maximum is both fast (vectorizes without fast-math) and
 * makes a NaN win. */
float ak__compress_absmax(const float *x, size_t n) {
    if (!x || n == 0) return 0.0f;
    uint32_t m[8] = {0}; /* independent lanes: the compiler keeps them in one register */
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint32_t b[8];
        memcpy(b, x + i, sizeof b);
        for (int j = 0; j < 8; j++) {
            uint32_t a = b[j] & 0x7fffffffu;
            m[j] = a > m[j] ? a : m[j];
        }
    }
    uint32_t best = 0;
    for (int j = 0; j < 8; j++) best = m[j] > best ? m[j] : best;
    for (; i < n; i++) {
        uint32_t a;
        memcpy(&a, x + i, sizeof a);
        a &= 0x7fffffffu;
        best = a > best ? a : best;
    }
    float out;
    memcpy(&out, &best, sizeof out);
    return out;
}

static ak_status check_cast(const char *fn, ak_train_compression kind, const void *a,
                            const void *b, size_t n, float scale) {
    AK_ARG_CHECK(kind == AK_COMPRESS_FP16 || kind == AK_COMPRESS_BF16,
                 "%s: compression %d is not a cast (fp16 = 1, bf16 = 2)", fn, (int)kind);
    AK_ARG_CHECK(n == 0 || (a && b), "%s: NULL buffer for %zu values", fn, n);
    AK_ARG_CHECK(isfinite(scale) && scale > 0.0f, "%s: scale %g must be finite and > 0", fn,
                 (double)scale);
    return AK_OK;
}

ak_status ak__compress_cast(ak_train_compression kind, const float *x, void *wire, size_t n,
                            float scale) {
    AK_CHECK(check_cast("ak__compress_cast", kind, x, wire, n, scale));
    uint16_t *w = wire;
    ak_status (*to_half)(uint16_t *, const float *, size_t) =
        kind == AK_COMPRESS_FP16 ? ak_f32_to_f16 : ak_f32_to_bf16;
    if (scale == 1.0f) return to_half(w, x, n);
    float tmp[AK__CAST_CHUNK];
    for (size_t off = 0; off < n; off += AK__CAST_CHUNK) {
        size_t len = n - off < AK__CAST_CHUNK ? n - off : AK__CAST_CHUNK;
        AK_CHECK(ak_vec_scale(AK_DTYPE_F32, tmp, x + off, scale, len));
        AK_CHECK(to_half(w + off, tmp, len));
    }
    return AK_OK;
}

ak_status ak__decompress_cast(ak_train_compression kind, const void *wire, float *out,
                              size_t n, float inv_scale) {
    AK_CHECK(check_cast("ak__decompress_cast", kind, wire, out, n, inv_scale));
    const uint16_t *w = wire;
    ak_status (*from_half)(float *, const uint16_t *, size_t) =
        kind == AK_COMPRESS_FP16 ? ak_f16_to_f32 : ak_bf16_to_f32;
    if (inv_scale == 1.0f) return from_half(out, w, n);
    /* widen a chunk into out, then scale it in place while it is still in L1 */
    for (size_t off = 0; off < n; off += AK__CAST_CHUNK) {
        size_t len = n - off < AK__CAST_CHUNK ? n - off : AK__CAST_CHUNK;
        AK_CHECK(from_half(out + off, w + off, len));
        AK_CHECK(ak_vec_scale(AK_DTYPE_F32, out + off, out + off, inv_scale, len));
    }
    return AK_OK;
}
