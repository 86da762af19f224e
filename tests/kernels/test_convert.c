/* Tests of the f32 <-> f16 / bf16 conversions: the scalar reference (core/half.h) against
 * known constants, then every kernel variant against the reference bit for bit: all 2^16
 * half values, every rounding boundary, special values, random bit patterns, and odd
 * lengths on misaligned buffers with guard bytes. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "accelkit/kernels.h"
#include "core/half.h"
#include "guarded.h"
#include "kernels/dispatch.h"

static const char *const variants[] = {"ref", "generic", "avx2", "avx512"};
#define NVARIANTS (sizeof variants / sizeof variants[0])

/* The reference table is the oracle; the others are compared with it. */
static const ak__kernels *ref(void) {
    const ak__kernels *k = ak__kernels_for("ref");
    assert_non_null(k);
    return k;
}

/* ---- the reference itself ------------------------------------------------------------ */

static void expect_f16_to_f32(uint16_t h, uint32_t want) {
    uint32_t got = ak__f32_bits(ak__f16_to_f32_ref(h));
    if (got != want) fail_msg("f16 0x%04x -> 0x%08x, want 0x%08x", h, got, want);
}

static void expect_f32_to_f16(uint32_t f, uint16_t want) {
    uint16_t got = ak__f32_to_f16_ref(ak__f32_from_bits(f));
    if (got != want) fail_msg("f32 0x%08x -> f16 0x%04x, want 0x%04x", f, got, want);
}

static void expect_f32_to_bf16(uint32_t f, uint16_t want) {
    uint16_t got = ak__f32_to_bf16_ref(ak__f32_from_bits(f));
    if (got != want) fail_msg("f32 0x%08x -> bf16 0x%04x, want 0x%04x", f, got, want);
}

static void test_reference_constants(void **state) {
    (void)state;
    expect_f16_to_f32(0x3c00, ak__f32_bits(1.0f));
    expect_f16_to_f32(0xc000, ak__f32_bits(-2.0f));
    expect_f16_to_f32(0x7bff, ak__f32_bits(65504.0f));
    expect_f16_to_f32(0x0001, ak__f32_bits(ldexpf(1.0f, -24))); /* smallest subnormal */
    expect_f16_to_f32(0x03ff, ak__f32_bits(ldexpf(1023.0f, -24)));
    expect_f16_to_f32(0x0400, ak__f32_bits(ldexpf(1.0f, -14))); /* smallest normal */
    expect_f16_to_f32(0x8000, 0x80000000u);
    expect_f16_to_f32(0x7c00, 0x7f800000u);
    expect_f16_to_f32(0xfc00, 0xff800000u);
    expect_f16_to_f32(0x7e00, 0x7fc00000u);
    expect_f16_to_f32(0x7c01, 0x7fc02000u); /* signaling NaN is quieted, payload kept */
    expect_f16_to_f32(0xfdff, 0xffffe000u);

    expect_f32_to_f16(ak__f32_bits(1.0f), 0x3c00);
    expect_f32_to_f16(ak__f32_bits(65504.0f), 0x7bff);
    expect_f32_to_f16(ak__f32_bits(65520.0f), 0x7c00); /* halfway to 2^16 rounds to Inf */
    expect_f32_to_f16(ak__f32_bits(65520.0f) - 1, 0x7bff);
    expect_f32_to_f16(ak__f32_bits(-1e9f), 0xfc00);
    expect_f32_to_f16(ak__f32_bits(1.0f + ldexpf(1.0f, -11)), 0x3c00); /* tie: even */
    expect_f32_to_f16(ak__f32_bits(1.0f + 3 * ldexpf(1.0f, -11)), 0x3c02);
    expect_f32_to_f16(ak__f32_bits(ldexpf(1.0f, -24)), 0x0001);
    expect_f32_to_f16(ak__f32_bits(ldexpf(1.0f, -25)), 0x0000); /* tie to even zero */
    expect_f32_to_f16(ak__f32_bits(ldexpf(1.0f, -25)) + 1, 0x0001);
    expect_f32_to_f16(ak__f32_bits(ldexpf(3.0f, -25)), 0x0002);
    expect_f32_to_f16(ak__f32_bits(ldexpf(2047.0f, -25)), 0x0400); /* rounds up to normal */
    expect_f32_to_f16(0x80000000u, 0x8000);
    expect_f32_to_f16(0x00000001u, 0x0000); /* f32 subnormal */
    expect_f32_to_f16(0x80000001u, 0x8000);
    expect_f32_to_f16(0x7f800000u, 0x7c00);
    expect_f32_to_f16(0xff800000u, 0xfc00);
    expect_f32_to_f16(0x7fc00000u, 0x7e00);
    expect_f32_to_f16(0x7f800001u, 0x7e00); /* low payload bits are truncated */
    expect_f32_to_f16(0xffa02000u, 0xff01);

    expect_f32_to_bf16(ak__f32_bits(1.0f), 0x3f80);
    expect_f32_to_bf16(ak__f32_bits(1.00390625f), 0x3f80); /* 1 + 2^-8: tie to even */
    expect_f32_to_bf16(ak__f32_bits(1.01171875f), 0x3f82); /* 1 + 3*2^-8: tie to even */
    expect_f32_to_bf16(ak__f32_bits(1.00390625f) + 1, 0x3f81);
    expect_f32_to_bf16(0x7f7fffffu, 0x7f80); /* FLT_MAX rounds to Inf */
    expect_f32_to_bf16(0x7f7f7fffu, 0x7f7f);
    expect_f32_to_bf16(0xff7fffffu, 0xff80);
    expect_f32_to_bf16(0x00008000u, 0x0000); /* subnormals are kept, ties to even */
    expect_f32_to_bf16(0x00018000u, 0x0002);
    expect_f32_to_bf16(0x00008001u, 0x0001);
    expect_f32_to_bf16(0x80000000u, 0x8000);
    expect_f32_to_bf16(0x7f800000u, 0x7f80);
    expect_f32_to_bf16(0x7f800001u, 0x7fc0); /* NaN stays NaN, quieted */
    expect_f32_to_bf16(0xffa00000u, 0xffe0);
    expect_f32_to_bf16(0x7fffffffu, 0x7fff);
    assert_int_equal(ak__f32_bits(ak__bf16_to_f32_ref(0x3f80)), ak__f32_bits(1.0f));
    assert_int_equal(ak__f32_bits(ak__bf16_to_f32_ref(0x0001)), 0x00010000u);
}

/* ---- helpers comparing every variant with the reference ------------------------------ */

typedef enum { TO_F16, TO_BF16 } narrow_kind;

/* Converts n floats with every variant and compares the 16-bit results with the
 * reference table bit for bit. */
static void check_narrow_all_variants(narrow_kind kind, const float *src, size_t n) {
    uint16_t *want = malloc(n * sizeof *want), *got = malloc(n * sizeof *got);
    assert_non_null(want);
    assert_non_null(got);
    (kind == TO_F16 ? ref()->f32_to_f16 : ref()->f32_to_bf16)(want, src, n);
    for (size_t v = 0; v < NVARIANTS; v++) {
        const ak__kernels *k = ak__kernels_for(variants[v]);
        if (!k) continue;
        (kind == TO_F16 ? k->f32_to_f16 : k->f32_to_bf16)(got, src, n);
        for (size_t i = 0; i < n; i++)
            if (got[i] != want[i])
                fail_msg("%s f32_to_%s(0x%08x) = 0x%04x, reference 0x%04x", variants[v],
                         kind == TO_F16 ? "f16" : "bf16", ak__f32_bits(src[i]), got[i],
                         want[i]);
    }
    free(want);
    free(got);
}

typedef enum { FROM_F16, FROM_BF16 } widen_kind;

/* All 2^16 inputs through every variant, compared with half.h one by one. */
static void check_widen_exhaustive(widen_kind kind) {
    enum { N = 65536 };
    uint16_t *src = malloc(N * sizeof *src);
    float *got = malloc(N * sizeof *got);
    assert_non_null(src);
    assert_non_null(got);
    for (size_t i = 0; i < N; i++) src[i] = (uint16_t)i;
    for (size_t v = 0; v < NVARIANTS; v++) {
        const ak__kernels *k = ak__kernels_for(variants[v]);
        if (!k) continue;
        (kind == FROM_F16 ? k->f16_to_f32 : k->bf16_to_f32)(got, src, N);
        for (size_t i = 0; i < N; i++) {
            float want = kind == FROM_F16 ? ak__f16_to_f32_ref(src[i])
                                          : ak__bf16_to_f32_ref(src[i]);
            if (ak__f32_bits(got[i]) != ak__f32_bits(want))
                fail_msg("%s %s_to_f32(0x%04x) = 0x%08x, reference 0x%08x", variants[v],
                         kind == FROM_F16 ? "f16" : "bf16", src[i], ak__f32_bits(got[i]),
                         ak__f32_bits(want));
        }
    }
    free(src);
    free(got);
}

static void test_f16_to_f32_all(void **state) {
    (void)state;
    check_widen_exhaustive(FROM_F16);
}

static void test_bf16_to_f32_all(void **state) {
    (void)state;
    check_widen_exhaustive(FROM_BF16);
}

static int f16_is_nan(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu); }

/* Every f16 survives f16 -> f32 -> f16 unchanged; NaN comes back quieted, exactly as the
 * reference does. */
static void test_f16_roundtrip_all(void **state) {
    (void)state;
    enum { N = 65536 };
    float *src = malloc(N * sizeof *src);
    uint16_t *got = malloc(N * sizeof *got);
    assert_non_null(src);
    assert_non_null(got);
    for (size_t i = 0; i < N; i++) src[i] = ak__f16_to_f32_ref((uint16_t)i);
    for (size_t v = 0; v < NVARIANTS; v++) {
        const ak__kernels *k = ak__kernels_for(variants[v]);
        if (!k) continue;
        k->f32_to_f16(got, src, N);
        for (size_t i = 0; i < N; i++) {
            uint16_t want = f16_is_nan((uint16_t)i) ? (uint16_t)(i | 0x200u) : (uint16_t)i;
            if (got[i] != want)
                fail_msg("%s: f16 0x%04zx round-trips to 0x%04x, want 0x%04x", variants[v], i,
                         got[i], want);
        }
    }
    free(src);
    free(got);
}

/* Appends x, its neighbours one f32 ulp away, and the negatives of all three. */
static size_t push_with_neighbours(float *out, size_t n, uint32_t bits) {
    const uint32_t cand[3] = {bits, bits + 1, bits - 1};
    for (int c = 0; c < 3; c++) {
        out[n++] = ak__f32_from_bits(cand[c]);
        out[n++] = ak__f32_from_bits(cand[c] ^ 0x80000000u);
    }
    return n;
}

/* For each finite f16 value: itself, the exact midpoint to the next one up (65520 for
 * the largest, the threshold of overflow) and one f32 ulp either side of each. */
static void test_f32_to_f16_boundaries(void **state) {
    (void)state;
    float *src = malloc(0x7c00 * 12 * sizeof *src);
    assert_non_null(src);
    size_t n = 0;
    for (uint32_t h = 0; h < 0x7c00; h++) {
        float lo = ak__f16_to_f32_ref((uint16_t)h);
        float hi = h == 0x7bff ? 65536.0f : ak__f16_to_f32_ref((uint16_t)(h + 1));
        float mid = (lo + hi) / 2; /* exact: 12 significant bits at most */
        n = push_with_neighbours(src, n, ak__f32_bits(lo));
        n = push_with_neighbours(src, n, ak__f32_bits(mid));
    }
    check_narrow_all_variants(TO_F16, src, n);
    free(src);
}

/* For each finite bf16 value: itself and the midpoint to the next (the f32 whose low
 * 16 bits are 0x8000), each with f32 neighbours. */
static void test_f32_to_bf16_boundaries(void **state) {
    (void)state;
    float *src = malloc(0x7f80 * 12 * sizeof *src);
    assert_non_null(src);
    size_t n = 0;
    for (uint32_t b = 0; b < 0x7f80; b++) {
        n = push_with_neighbours(src, n, b << 16);
        n = push_with_neighbours(src, n, (b << 16) | 0x8000u);
    }
    check_narrow_all_variants(TO_BF16, src, n);
    free(src);
}

static const uint32_t special_bits[] = {
    0x00000000u, 0x80000000u, 0x00000001u, 0x807fffffu, 0x00800000u, 0x7f7fffffu,
    0xff7fffffu, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00000u, 0x7f800001u,
    0xff800001u, 0x7fbfffffu, 0x7fffffffu, 0xffffffffu, 0x7fa00000u, 0x7f802000u,
    0x7f801fffu, 0x477fefffu, 0x477ff000u, 0x477fe000u, 0x47800000u, 0x33000000u,
    0x33000001u, 0x32ffffffu, 0x387fc000u, 0x387fe000u, 0x38800000u, 0x3f800000u,
    0x3f808000u, 0x3f818000u, 0x3f801000u, 0x3f803000u, 0x4f800000u, 0x3eaaaaabu,
};

static void test_special_values(void **state) {
    (void)state;
    enum { NS = sizeof special_bits / sizeof special_bits[0] };
    float src[NS * 3]; /* three copies so the vector body sees them, not just the tail */
    for (size_t i = 0; i < NS * 3; i++) src[i] = ak__f32_from_bits(special_bits[i % NS]);
    check_narrow_all_variants(TO_F16, src, NS * 3);
    check_narrow_all_variants(TO_BF16, src, NS * 3);
}

static void test_random_bits(void **state) {
    (void)state;
    enum { N = 1 << 22 };
    float *src = malloc(N * sizeof *src);
    assert_non_null(src);
    uint64_t seed = 12345;
    for (size_t i = 0; i < N; i += 2) {
        uint64_t r = test_rand_u64(&seed);
        src[i] = ak__f32_from_bits((uint32_t)r);
        src[i + 1] = ak__f32_from_bits((uint32_t)(r >> 32));
    }
    check_narrow_all_variants(TO_F16, src, N);
    check_narrow_all_variants(TO_BF16, src, N);
    free(src);
}

/* ---- lengths, alignment and guard bytes ---------------------------------------------- */

/* 16-bit buffers start 2 bytes past 64-byte alignment (so not 4-, 16- or 32-byte
 * aligned); f32 buffers 4 bytes past (the public API requires natural alignment). */
enum { MISALIGN16 = 2, MISALIGN32 = 4 };

/* kind 0 is f16, kind 1 bf16: the variant's kernels and the scalar reference. */
static void widen(const ak__kernels *k, int kind, float *dst, const uint16_t *src, size_t n) {
    (kind == 0 ? k->f16_to_f32 : k->bf16_to_f32)(dst, src, n);
}

static void narrow(const ak__kernels *k, int kind, uint16_t *dst, const float *src, size_t n) {
    (kind == 0 ? k->f32_to_f16 : k->f32_to_bf16)(dst, src, n);
}

static uint32_t widen_ref(int kind, uint16_t h) {
    return ak__f32_bits(kind == 0 ? ak__f16_to_f32_ref(h) : ak__bf16_to_f32_ref(h));
}

static uint16_t narrow_ref(int kind, float f) {
    return kind == 0 ? ak__f32_to_f16_ref(f) : ak__f32_to_bf16_ref(f);
}

/* Lengths 0..67 cover empty, tail-only, one vector, unrolled body + every tail size. */
static void check_lengths_guarded(const char *variant, const ak__kernels *k, size_t n,
                                  uint64_t *seed) {
    guarded_buf f = guarded_alloc(n * 4, MISALIGN32), h = guarded_alloc(n * 2, MISALIGN16);
    guarded_buf fo = guarded_alloc(n * 4, MISALIGN32), ho = guarded_alloc(n * 2, MISALIGN16);
    float *fs = f.data, *fd = fo.data;
    uint16_t *hs = h.data, *hd = ho.data;
    for (size_t i = 0; i < n; i++) {
        fs[i] = test_rand_f32(seed) * 70000.0f; /* some overflow f16 */
        hs[i] = (uint16_t)test_rand_u64(seed);
    }
    for (int kind = 0; kind < 2; kind++) {
        widen(k, kind, fd, hs, n);
        for (size_t i = 0; i < n; i++)
            if (ak__f32_bits(fd[i]) != widen_ref(kind, hs[i]))
                fail_msg("%s widen %d: n=%zu i=%zu", variant, kind, n, i);
        narrow(k, kind, hd, fs, n);
        for (size_t i = 0; i < n; i++)
            if (hd[i] != narrow_ref(kind, fs[i]))
                fail_msg("%s narrow %d: n=%zu i=%zu", variant, kind, n, i);
        if (!guarded_intact(&fo) || !guarded_intact(&ho))
            fail_msg("%s kind %d n=%zu wrote outside its output", variant, kind, n);
    }
    guarded_free(&f);
    guarded_free(&h);
    guarded_free(&fo);
    guarded_free(&ho);
}

static void test_lengths_guarded(void **state) {
    (void)state;
    uint64_t seed = 7;
    for (size_t v = 0; v < NVARIANTS; v++) {
        const ak__kernels *k = ak__kernels_for(variants[v]);
        if (!k) continue;
        for (size_t n = 0; n <= 67; n++) check_lengths_guarded(variants[v], k, n, &seed);
    }
}

/* Large enough (24+ MiB of traffic) to take the streaming-store path on machines whose
 * last-level cache is under 48 MiB; misaligned so the aligned head is exercised too. */
static void test_large_guarded(void **state) {
    (void)state;
    const size_t n = ((size_t)1 << 22) + 13;
    uint64_t seed = 2024;
    guarded_buf f = guarded_alloc(n * 4, MISALIGN32), h = guarded_alloc(n * 2, MISALIGN16);
    guarded_buf fo = guarded_alloc(n * 4, MISALIGN32), ho = guarded_alloc(n * 2, MISALIGN16);
    float *fs = f.data, *fd = fo.data;
    uint16_t *hs = h.data, *hd = ho.data;
    for (size_t i = 0; i < n; i++) {
        uint64_t r = test_rand_u64(&seed);
        fs[i] = ak__f32_from_bits((uint32_t)r);
        hs[i] = (uint16_t)(r >> 32);
    }
    for (size_t v = 0; v < NVARIANTS; v++) {
        const ak__kernels *k = ak__kernels_for(variants[v]);
        if (!k) continue;
        for (int kind = 0; kind < 2; kind++) {
            widen(k, kind, fd, hs, n);
            for (size_t i = 0; i < n; i++)
                if (ak__f32_bits(fd[i]) != widen_ref(kind, hs[i]))
                    fail_msg("%s widen %d: n=%zu i=%zu", variants[v], kind, n, i);
            narrow(k, kind, hd, fs, n);
            for (size_t i = 0; i < n; i++)
                if (hd[i] != narrow_ref(kind, fs[i]))
                    fail_msg("%s narrow %d: n=%zu i=%zu", variants[v], kind, n, i);
            if (!guarded_intact(&fo) || !guarded_intact(&ho))
                fail_msg("%s kind %d wrote outside its output", variants[v], kind);
        }
    }
    guarded_free(&f);
    guarded_free(&h);
    guarded_free(&fo);
    guarded_free(&ho);
}

/* ---- the public entry points ----------------------------------------------------------- */

static void expect_invalid(ak_status st) {
    assert_int_equal(st, AK_ERR_INVALID_ARG);
    assert_true(strlen(ak_last_error()) > 0);
    ak_clear_error();
}

static void test_public_api(void **state) {
    (void)state;
    float f[40];
    uint16_t h[40];
    for (int i = 0; i < 40; i++) f[i] = (float)i - 19.5f;
    assert_int_equal(ak_f32_to_f16(h, f, 40), AK_OK);
    for (int i = 0; i < 40; i++) assert_int_equal(h[i], ak__f32_to_f16_ref(f[i]));
    assert_int_equal(ak_f16_to_f32(f, h, 40), AK_OK);
    assert_true(f[0] == -19.5f && f[39] == 19.5f);
    assert_int_equal(ak_f32_to_bf16(h, f, 40), AK_OK);
    assert_int_equal(ak_bf16_to_f32(f, h, 40), AK_OK);
    assert_true(f[0] == -19.5f && f[39] == 19.5f);
    assert_int_equal(ak_f32_to_f16(NULL, NULL, 0), AK_OK);

    expect_invalid(ak_f32_to_f16(NULL, f, 3));
    expect_invalid(ak_f16_to_f32(f, NULL, 3));
    expect_invalid(ak_f32_to_bf16((uint16_t *)((char *)h + 1), f, 3)); /* misaligned dst */
    expect_invalid(ak_bf16_to_f32((float *)((char *)f + 2), h, 3));    /* misaligned dst */
    expect_invalid(ak_f32_to_f16((uint16_t *)f, f, 8));                /* overlap */
    expect_invalid(ak_f16_to_f32(f + 1, (uint16_t *)f, 8));
}

int main(void) {
    if (ak_init() != AK_OK) {
        fprintf(stderr, "ak_init failed: %s\n", ak_last_error());
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_constants),
        cmocka_unit_test(test_f16_to_f32_all),
        cmocka_unit_test(test_bf16_to_f32_all),
        cmocka_unit_test(test_f16_roundtrip_all),
        cmocka_unit_test(test_f32_to_f16_boundaries),
        cmocka_unit_test(test_f32_to_bf16_boundaries),
        cmocka_unit_test(test_special_values),
        cmocka_unit_test(test_random_bits),
        cmocka_unit_test(test_lengths_guarded),
        cmocka_unit_test(test_large_guarded),
        cmocka_unit_test(test_public_api),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
