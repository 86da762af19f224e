/* Tests of the collective reductions (ak_reduce: SUM, PROD, MIN, MAX, AVG over every
 * dtype): every variant against the scalar reference over lengths around the vector and
 * unroll widths, out of place and in place (dst == a, dst == b), element-aligned and
 * 32-byte-misaligned, with guard bytes; the large out-of-place path that streams; special
 * values with hand-computed results (NaN, ±Inf, ±0, rounding ties, integer wrap); the AVG
 * finish; and argument checking of the public entry points.
 *
 * Tolerance: none. Every variant must equal the reference bit for bit in every dtype
 * (floats compute with the same single rounding; integers wrap). A NaN result only has to
 * be NaN, because which input's payload a NaN carries depends on operand order. */
#include <limits.h>
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

static const size_t lengths[] = {0, 1, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 1000, 4099};
#define NLENGTHS (sizeof lengths / sizeof lengths[0])

static const ak_reduce_op kernel_ops[] = {AK_REDUCE_SUM, AK_REDUCE_PROD, AK_REDUCE_MIN,
                                          AK_REDUCE_MAX};
#define NOPS (sizeof kernel_ops / sizeof kernel_ops[0])

typedef enum { OUT_OF_PLACE, DST_IS_A, DST_IS_B, MODE_COUNT } place_mode;
static const char *const mode_names[] = {"out-of-place", "dst==a", "dst==b"};

static const ak__kernels *ref(void) {
    const ak__kernels *k = ak__kernels_for("ref");
    assert_non_null(k);
    return k;
}

/* Element sizes, read once from the public ak_dtype_size (per-element calls are slow). */
static size_t dtype_sizes[AK_DTYPE_COUNT_];

static size_t esize(ak_dtype dt) {
    if (!dtype_sizes[dt]) assert_int_equal(ak_dtype_size(dt, &dtype_sizes[dt]), AK_OK);
    return dtype_sizes[dt];
}

/* ---- elements as bit patterns (little-endian: the low es bytes of a uint64_t) --------- */

static uint64_t get_bits(ak_dtype dt, const void *p, size_t i) {
    uint64_t v = 0;
    size_t es = esize(dt);
    memcpy(&v, (const unsigned char *)p + i * es, es);
    return v;
}

static void set_bits(ak_dtype dt, void *p, size_t i, uint64_t v) {
    size_t es = esize(dt);
    memcpy((unsigned char *)p + i * es, &v, es);
}

static int is_nan_bits(ak_dtype dt, uint64_t v) {
    switch (dt) {
    case AK_DTYPE_F32: return (v & 0x7fffffffu) > 0x7f800000u;
    case AK_DTYPE_F64: return (v & 0x7fffffffffffffffull) > 0x7ff0000000000000ull;
    case AK_DTYPE_F16: return (v & 0x7fffu) > 0x7c00u;
    case AK_DTYPE_BF16: return (v & 0x7fffu) > 0x7f80u;
    default: return 0;
    }
}

/* Bit-equal, or both NaN. */
static int same_result(ak_dtype dt, uint64_t got, uint64_t want) {
    return got == want || (is_nan_bits(dt, got) && is_nan_bits(dt, want));
}

/* The sign bit of an element (flipping it makes ±0 pairs and negated floats). */
static uint64_t sign_bit(ak_dtype dt) { return 1ull << (esize(dt) * 8 - 1); }

/* ---- inputs ------------------------------------------------------------------------- */

/* NaNs (quiet, negative with payload, signaling), ±Inf, ±0, smallest subnormal, largest
 * finite, one; for integers the extremes, 0, -1 and 1. */
static uint64_t special_bits(ak_dtype dt, uint64_t r) {
    static const uint64_t f32[] = {0x7fc00000, 0xffc00001, 0x7f800001, 0x7f800000, 0xff800000,
                                   0,          0x80000000, 1,          0x7f7fffff, 0x3f800000};
    static const uint64_t f64[] = {0x7ff8000000000000, 0xfff8000000000001, 0x7ff0000000000001,
                                   0x7ff0000000000000, 0xfff0000000000000, 0,
                                   0x8000000000000000, 1, 0x7fefffffffffffff,
                                   0x3ff0000000000000};
    static const uint64_t f16[] = {0x7e00, 0xfe01, 0x7c01, 0x7c00, 0xfc00,
                                   0,      0x8000, 1,      0x7bff, 0x3c00};
    static const uint64_t bf16[] = {0x7fc0, 0xffc1, 0x7f81, 0x7f80, 0xff80,
                                    0,      0x8000, 1,      0x7f7f, 0x3f80};
    uint64_t top = sign_bit(dt);
    uint64_t ints[] = {top, top - 1, 0, ~0ull, 1};
    switch (dt) {
    case AK_DTYPE_F32: return f32[r % 10];
    case AK_DTYPE_F64: return f64[r % 10];
    case AK_DTYPE_F16: return f16[r % 10];
    case AK_DTYPE_BF16: return bf16[r % 10];
    default: return ints[r % 5];
    }
}

/* Half of the float values are moderate (rounding matters), half are any bit pattern
 * (overflow, underflow, subnormals, NaN); integers are any bit pattern. */
static uint64_t random_bits(ak_dtype dt, uint64_t *state) {
    uint64_t r = test_rand_u64(state);
    if (r & 1) return r >> 1;
    float f = test_rand_f32(state) * (float)(1u << (r >> 1) % 8);
    switch (dt) {
    case AK_DTYPE_F32: return ak__f32_bits(f);
    case AK_DTYPE_F16: return ak__f32_to_f16_ref(f);
    case AK_DTYPE_BF16: return ak__f32_to_bf16_ref(f);
    case AK_DTYPE_F64: {
        double d = (double)f * (1.0 + 0x1p-40 * (double)(r >> 40));
        uint64_t v;
        memcpy(&v, &d, sizeof v);
        return v;
    }
    default: return r >> 1;
    }
}

/* a and b with specials, equal pairs and sign-flipped pairs mixed in. */
static void fill_inputs(ak_dtype dt, void *a, void *b, size_t n, uint64_t seed) {
    uint64_t st = seed;
    for (size_t i = 0; i < n; i++) {
        uint64_t r = test_rand_u64(&st);
        uint64_t va = r % 16 < 2 ? special_bits(dt, r >> 8) : random_bits(dt, &st);
        uint64_t vb = (r >> 4) % 16 < 2 ? special_bits(dt, r >> 16) : random_bits(dt, &st);
        if (r % 16 == 2) vb = va;
        if (r % 16 == 3) vb = va ^ sign_bit(dt);
        set_bits(dt, a, i, va);
        set_bits(dt, b, i, vb);
    }
}

/* ---- one comparison against the reference -------------------------------------------- */

typedef struct {
    const char *variant;
    ak_reduce_op op;
    ak_dtype dt;
    size_t n;
    place_mode mode;
    size_t misalign;
} red_case;

static void fail_case(const red_case *c, const char *what, size_t i, uint64_t got,
                      uint64_t want) {
    fail_msg("%s %s %s n=%zu %s misalign=%zu: %s at %zu: got 0x%llx want 0x%llx", c->variant,
             ak_reduce_op_name(c->op), ak_dtype_name(c->dt), c->n, mode_names[c->mode],
             c->misalign, what, i, (unsigned long long)got, (unsigned long long)want);
}

static void expect_results(const red_case *c, const void *got, const void *want) {
    for (size_t i = 0; i < c->n; i++) {
        uint64_t g = get_bits(c->dt, got, i), w = get_bits(c->dt, want, i);
        if (!same_result(c->dt, g, w)) fail_case(c, "result", i, g, w);
    }
}

static void expect_unchanged(const red_case *c, const void *buf, const void *copy) {
    if (memcmp(buf, copy, c->n * esize(c->dt)) != 0) fail_case(c, "input modified", 0, 0, 0);
}

static void run_case(const ak__kernels *k, const red_case *c) {
    const size_t bytes = c->n * esize(c->dt);
    guarded_buf ga = guarded_alloc(bytes, c->misalign), gb = guarded_alloc(bytes, c->misalign);
    guarded_buf gd = guarded_alloc(bytes, c->misalign);
    unsigned char *ca = malloc(bytes + 1), *cb = malloc(bytes + 1), *want = malloc(bytes + 1);
    assert_true(ca && cb && want);
    fill_inputs(c->dt, ga.data, gb.data, c->n, 0x5eed0000u + c->n * 131u + c->dt * 7u + c->op);
    memcpy(ca, ga.data, bytes);
    memcpy(cb, gb.data, bytes);
    ref()->reduce[c->op][c->dt](want, ca, cb, c->n);

    void *dst = c->mode == DST_IS_A ? ga.data : c->mode == DST_IS_B ? gb.data : gd.data;
    k->reduce[c->op][c->dt](dst, ga.data, gb.data, c->n);
    expect_results(c, dst, want);
    if (c->mode != DST_IS_A) expect_unchanged(c, ga.data, ca);
    if (c->mode != DST_IS_B) expect_unchanged(c, gb.data, cb);
    if (!guarded_intact(&ga) || !guarded_intact(&gb) || !guarded_intact(&gd))
        fail_case(c, "guard bytes overwritten", 0, 0, 0);
    guarded_free(&ga);
    guarded_free(&gb);
    guarded_free(&gd);
    free(ca);
    free(cb);
    free(want);
}

/* ---- every variant against the reference --------------------------------------------- */

typedef void (*reduce_fn)(void *dst, const void *a, const void *b, size_t n);

static int already_seen(const reduce_fn *seen, size_t nseen, reduce_fn fn) {
    for (size_t i = 0; i < nseen; i++)
        if (seen[i] == fn) return 1;
    return 0;
}

/* misalign 0: 64-byte aligned; es: element-aligned but off the 32-byte vector grid. */
static void test_variants_match_ref(void **state) {
    (void)state;
    for (size_t v = 0; v < NVARIANTS; v++) {
        const ak__kernels *k = ak__kernels_for(variants[v]);
        if (!k) continue; /* not compiled in, or this CPU cannot run it */
        for (int dt = 0; dt < AK_DTYPE_COUNT_; dt++)
            for (size_t o = 0; o < NOPS; o++)
                for (size_t l = 0; l < NLENGTHS; l++)
                    for (int m = 0; m < MODE_COUNT; m++)
                        for (int mis = 0; mis < 2; mis++) {
                            red_case c = {variants[v], kernel_ops[o], (ak_dtype)dt,
                                          lengths[l], (place_mode)m,
                                          mis ? esize((ak_dtype)dt) : 0};
                            run_case(k, &c);
                        }
    }
}

/* Out of place and past the streaming threshold, with dst off the 32-byte grid so the
 * aligning head, the non-temporal body and the tail all run. Only kernels not already
 * checked here (tables share pointers: generic is the reference, avx512 reuses avx2). */
static void test_large_streaming(void **state) {
    (void)state;
    size_t bytes = ak__kernels_stream_min_bytes() / 3 + 4099;
    for (int dt = 0; dt < AK_DTYPE_COUNT_; dt++)
        for (size_t o = 0; o < NOPS; o++) {
            reduce_fn seen[NVARIANTS + 1] = {ref()->reduce[kernel_ops[o]][dt]};
            size_t nseen = 1;
            for (size_t v = 0; v < NVARIANTS; v++) {
                const ak__kernels *k = ak__kernels_for(variants[v]);
                if (!k || already_seen(seen, nseen, k->reduce[kernel_ops[o]][dt])) continue;
                seen[nseen++] = k->reduce[kernel_ops[o]][dt];
                size_t es = esize((ak_dtype)dt);
                red_case c = {variants[v], kernel_ops[o], (ak_dtype)dt, bytes / es + 3,
                              OUT_OF_PLACE, es};
                run_case(k, &c);
            }
        }
}

/* ---- special values with known results ------------------------------------------------ */

typedef struct {
    ak_reduce_op op;
    ak_dtype dt;
    uint64_t a, b, want; /* want is ignored when want_nan */
    int want_nan;
} special_case;

#define S_F32 AK_DTYPE_F32
#define NAN32 0x7fc00000u
#define NZ32 0x80000000u
#define ONE32 0x3f800000u

static const special_case specials[] = {
    /* f32: Inf - Inf, overflow, signed zeros, NaN either side of min/max */
    {AK_REDUCE_SUM, S_F32, 0x7f800000, 0xff800000, 0, 1},
    {AK_REDUCE_SUM, S_F32, 0x7f7fffff, 0x7f7fffff, 0x7f800000, 0},
    {AK_REDUCE_SUM, S_F32, NZ32, NZ32, NZ32, 0},
    {AK_REDUCE_SUM, S_F32, NZ32, 0, 0, 0},
    {AK_REDUCE_PROD, S_F32, NZ32, 0x40a00000, NZ32, 0},
    {AK_REDUCE_PROD, S_F32, 0, 0x7f800000, 0, 1},
    {AK_REDUCE_MIN, S_F32, NAN32, ONE32, 0, 1},
    {AK_REDUCE_MIN, S_F32, ONE32, NAN32, 0, 1},
    {AK_REDUCE_MAX, S_F32, NAN32, ONE32, 0, 1},
    {AK_REDUCE_MAX, S_F32, ONE32, NAN32, 0, 1},
    {AK_REDUCE_MIN, S_F32, 0x7f800001, ONE32, 0, 1}, /* signaling NaN */
    {AK_REDUCE_MIN, S_F32, NZ32, 0, NZ32, 0},
    {AK_REDUCE_MIN, S_F32, 0, NZ32, NZ32, 0},
    {AK_REDUCE_MAX, S_F32, NZ32, 0, 0, 0},
    {AK_REDUCE_MAX, S_F32, 0, NZ32, 0, 0},
    {AK_REDUCE_MIN, S_F32, 0xff800000, 0x40400000, 0xff800000, 0},
    {AK_REDUCE_MAX, S_F32, 0xff800000, 0x40400000, 0x40400000, 0},
    /* f64 */
    {AK_REDUCE_SUM, AK_DTYPE_F64, 0x7ff0000000000000, 0xfff0000000000000, 0, 1},
    {AK_REDUCE_MIN, AK_DTYPE_F64, 0x8000000000000000, 0, 0x8000000000000000, 0},
    {AK_REDUCE_MAX, AK_DTYPE_F64, 0, 0x8000000000000000, 0, 0},
    {AK_REDUCE_MIN, AK_DTYPE_F64, 0x3ff0000000000000, 0x7ff8000000000000, 0, 1},
    {AK_REDUCE_MAX, AK_DTYPE_F64, 0x7ff8000000000000, 0x3ff0000000000000, 0, 1},
    {AK_REDUCE_PROD, AK_DTYPE_F64, 0x4000000000000000, 0xc008000000000000,
     0xc018000000000000, 0},
    /* f16: one rounding (ties to even), overflow, subnormal ties, NaN, signed zeros */
    {AK_REDUCE_SUM, AK_DTYPE_F16, 0x3c00, 0x1000, 0x3c00, 0},
    {AK_REDUCE_SUM, AK_DTYPE_F16, 0x3c01, 0x1000, 0x3c02, 0},
    {AK_REDUCE_SUM, AK_DTYPE_F16, 0x7bff, 0x7bff, 0x7c00, 0},
    {AK_REDUCE_PROD, AK_DTYPE_F16, 0x0001, 0x3800, 0x0000, 0},
    {AK_REDUCE_PROD, AK_DTYPE_F16, 0x0003, 0x3800, 0x0002, 0},
    {AK_REDUCE_PROD, AK_DTYPE_F16, 0x3c00, 0x7e00, 0, 1},
    {AK_REDUCE_MIN, AK_DTYPE_F16, 0x7e00, 0x3c00, 0, 1},
    {AK_REDUCE_MAX, AK_DTYPE_F16, 0x3c00, 0x7c01, 0, 1},
    {AK_REDUCE_MIN, AK_DTYPE_F16, 0x8000, 0x0000, 0x8000, 0},
    {AK_REDUCE_MAX, AK_DTYPE_F16, 0x8000, 0x0000, 0x0000, 0},
    {AK_REDUCE_MAX, AK_DTYPE_F16, 0x3c00, 0x7c00, 0x7c00, 0},
    /* bf16 */
    {AK_REDUCE_SUM, AK_DTYPE_BF16, 0x3f80, 0x3b80, 0x3f80, 0},
    {AK_REDUCE_SUM, AK_DTYPE_BF16, 0x3f81, 0x3b80, 0x3f82, 0},
    {AK_REDUCE_SUM, AK_DTYPE_BF16, 0x7f7f, 0x7f7f, 0x7f80, 0},
    {AK_REDUCE_MIN, AK_DTYPE_BF16, 0x7fc0, 0x3f80, 0, 1},
    {AK_REDUCE_MAX, AK_DTYPE_BF16, 0x3f80, 0xffc1, 0, 1},
    {AK_REDUCE_MIN, AK_DTYPE_BF16, 0x0000, 0x8000, 0x8000, 0},
    {AK_REDUCE_MAX, AK_DTYPE_BF16, 0xff80, 0xbf80, 0xbf80, 0},
    /* i8: wrap, INT8_MIN * -1, signed compares */
    {AK_REDUCE_SUM, AK_DTYPE_I8, 0x7f, 0x01, 0x80, 0},
    {AK_REDUCE_SUM, AK_DTYPE_I8, 0x80, 0xff, 0x7f, 0},
    {AK_REDUCE_PROD, AK_DTYPE_I8, 0x80, 0xff, 0x80, 0},
    {AK_REDUCE_PROD, AK_DTYPE_I8, 0x10, 0x10, 0x00, 0},
    {AK_REDUCE_PROD, AK_DTYPE_I8, 0xff, 0xff, 0x01, 0},
    {AK_REDUCE_PROD, AK_DTYPE_I8, 0x0b, 0x0d, 0x8f, 0},
    {AK_REDUCE_MIN, AK_DTYPE_I8, 0x80, 0x7f, 0x80, 0},
    {AK_REDUCE_MAX, AK_DTYPE_I8, 0x80, 0x7f, 0x7f, 0},
    {AK_REDUCE_MIN, AK_DTYPE_I8, 0xff, 0x01, 0xff, 0},
    /* u8: wrap, unsigned compares */
    {AK_REDUCE_SUM, AK_DTYPE_U8, 0xff, 0x01, 0x00, 0},
    {AK_REDUCE_PROD, AK_DTYPE_U8, 0xff, 0xff, 0x01, 0},
    {AK_REDUCE_MIN, AK_DTYPE_U8, 0x00, 0xff, 0x00, 0},
    {AK_REDUCE_MAX, AK_DTYPE_U8, 0x80, 0x7f, 0x80, 0},
    {AK_REDUCE_MIN, AK_DTYPE_U8, 0x80, 0x7f, 0x7f, 0},
    /* i32: INT_MAX + 1, INT_MIN - 1, INT_MIN * -1, 2^16 * 2^16 */
    {AK_REDUCE_SUM, AK_DTYPE_I32, 0x7fffffff, 1, 0x80000000, 0},
    {AK_REDUCE_SUM, AK_DTYPE_I32, 0x80000000, 0xffffffff, 0x7fffffff, 0},
    {AK_REDUCE_PROD, AK_DTYPE_I32, 0x80000000, 0xffffffff, 0x80000000, 0},
    {AK_REDUCE_PROD, AK_DTYPE_I32, 0x10000, 0x10000, 0, 0},
    {AK_REDUCE_PROD, AK_DTYPE_I32, 0xffffffff, 0xffffffff, 1, 0},
    {AK_REDUCE_MIN, AK_DTYPE_I32, 0x80000000, 0x7fffffff, 0x80000000, 0},
    {AK_REDUCE_MAX, AK_DTYPE_I32, 0x80000000, 0x7fffffff, 0x7fffffff, 0},
    {AK_REDUCE_MIN, AK_DTYPE_I32, 0xffffffff, 1, 0xffffffff, 0},
    /* i64: wrap, products across the 32-bit halves, signed compares */
    {AK_REDUCE_SUM, AK_DTYPE_I64, 0x7fffffffffffffff, 1, 0x8000000000000000, 0},
    {AK_REDUCE_PROD, AK_DTYPE_I64, 0x8000000000000000, ~0ull, 0x8000000000000000, 0},
    {AK_REDUCE_PROD, AK_DTYPE_I64, 1ull << 32, 1ull << 32, 0, 0},
    {AK_REDUCE_PROD, AK_DTYPE_I64, 0x100000001, 0x100000001, 0x200000001, 0},
    {AK_REDUCE_PROD, AK_DTYPE_I64, 0xffffffff, 0xffffffff, 0xfffffffe00000001, 0},
    {AK_REDUCE_PROD, AK_DTYPE_I64, (uint64_t)-3, 5, (uint64_t)-15, 0},
    {AK_REDUCE_MIN, AK_DTYPE_I64, ~0ull, 1, ~0ull, 0},
    {AK_REDUCE_MAX, AK_DTYPE_I64, ~0ull, 1, 1, 0},
    {AK_REDUCE_MIN, AK_DTYPE_I64, 0x8000000000000000, 0x7fffffffffffffff, 0x8000000000000000,
     0},
    {AK_REDUCE_MAX, AK_DTYPE_I64, 0x8000000000000000, 0x7fffffffffffffff, 0x7fffffffffffffff,
     0},
};

/* Each case fills 37 elements (a vector body and a tail) and runs every variant. */
static void test_special_values(void **state) {
    (void)state;
    enum { N = 37 };
    uint64_t a[N], b[N], d[N]; /* 8-byte aligned: fits every element size */
    for (size_t v = 0; v < NVARIANTS; v++) {
        const ak__kernels *k = ak__kernels_for(variants[v]);
        if (!k) continue;
        for (size_t s = 0; s < sizeof specials / sizeof specials[0]; s++) {
            const special_case *sc = &specials[s];
            for (size_t i = 0; i < N; i++) {
                set_bits(sc->dt, a, i, sc->a);
                set_bits(sc->dt, b, i, sc->b);
            }
            k->reduce[sc->op][sc->dt](d, a, b, N);
            for (size_t i = 0; i < N; i++) {
                uint64_t got = get_bits(sc->dt, d, i);
                int ok = sc->want_nan ? is_nan_bits(sc->dt, got) : got == sc->want;
                if (!ok)
                    fail_msg("%s special #%zu %s %s(0x%llx, 0x%llx) at %zu: got 0x%llx want %s"
                             "0x%llx",
                             variants[v], s, ak_reduce_op_name(sc->op), ak_dtype_name(sc->dt),
                             (unsigned long long)sc->a, (unsigned long long)sc->b, i,
                             (unsigned long long)got, sc->want_nan ? "NaN, not " : "",
                             (unsigned long long)sc->want);
            }
        }
    }
}

/* ---- the public API -------------------------------------------------------------------- */

/* ak_reduce runs the active table; AVG is SUM. */
static void test_public_reduce_and_avg_is_sum(void **state) {
    (void)state;
    enum { N = 1000 };
    static uint64_t a[N], b[N], got[N], want[N];
    for (int dt = 0; dt < AK_DTYPE_COUNT_; dt++) {
        fill_inputs((ak_dtype)dt, a, b, N, 77u + (uint64_t)dt);
        for (int op = 0; op < AK_REDUCE_COUNT_; op++) {
            ak_reduce_op kop = op == AK_REDUCE_AVG ? AK_REDUCE_SUM : (ak_reduce_op)op;
            ref()->reduce[kop][dt](want, a, b, N);
            assert_int_equal(ak_reduce((ak_reduce_op)op, (ak_dtype)dt, got, a, b, N), AK_OK);
            red_case c = {"public", (ak_reduce_op)op, (ak_dtype)dt, N, OUT_OF_PLACE, 0};
            expect_results(&c, got, want);
        }
    }
}

static void test_avg_finish_floats(void **state) {
    (void)state;
    float f[5] = {6.0f, 1.0f, -7.5f, 3e38f, -0.0f};
    float f_in[5];
    memcpy(f_in, f, sizeof f);
    assert_int_equal(ak_reduce_avg_finish(AK_DTYPE_F32, f, 5, 3), AK_OK);
    for (int i = 0; i < 5; i++) /* the contract: one multiply by the rounded reciprocal */
        assert_true(ak__f32_bits(f[i]) == ak__f32_bits(f_in[i] * (1.0f / 3.0f)));
    assert_true(f[0] == 2.0f);

    double d[3] = {1.0, -6.0, 0.5};
    assert_int_equal(ak_reduce_avg_finish(AK_DTYPE_F64, d, 3, 4), AK_OK);
    assert_true(d[0] == 0.25 && d[1] == -1.5 && d[2] == 0.125);

    /* f16 / bf16 go through f32 and round once: 3/3 = 1, 1/4 = 0.25, 65504/2 = 32752 */
    uint16_t h[3] = {0x4200, 0x3c00, 0x7bff};
    assert_int_equal(ak_reduce_avg_finish(AK_DTYPE_F16, h, 3, 3), AK_OK);
    assert_int_equal(h[0], 0x3c00);
    assert_int_equal(h[1], ak__f32_to_f16_ref(1.0f * (1.0f / 3.0f)));
    uint16_t h2[2] = {0x3c00, 0x7bff};
    assert_int_equal(ak_reduce_avg_finish(AK_DTYPE_F16, h2, 2, 2), AK_OK);
    assert_int_equal(h2[0], 0x3800);
    assert_int_equal(h2[1], 0x77ff);
    uint16_t bh[2] = {0x4040, 0x3f80};
    assert_int_equal(ak_reduce_avg_finish(AK_DTYPE_BF16, bh, 2, 3), AK_OK);
    assert_int_equal(bh[0], 0x3f80);
    assert_int_equal(bh[1], ak__f32_to_bf16_ref(1.0f / 3.0f));
}

static void test_avg_finish_ints(void **state) {
    (void)state;
    int32_t i32[5] = {-7, 7, INT32_MIN, INT32_MAX, 0};
    assert_int_equal(ak_reduce_avg_finish(AK_DTYPE_I32, i32, 5, 2), AK_OK);
    assert_true(i32[0] == -3 && i32[1] == 3 && i32[2] == INT32_MIN / 2 &&
                i32[3] == INT32_MAX / 2 && i32[4] == 0);
    int8_t i8[3] = {-128, 127, -7};
    assert_int_equal(ak_reduce_avg_finish(AK_DTYPE_I8, i8, 3, 3), AK_OK);
    assert_true(i8[0] == -42 && i8[1] == 42 && i8[2] == -2);
    int8_t i8b[2] = {-128, 127}; /* a divisor beyond the dtype's range */
    assert_int_equal(ak_reduce_avg_finish(AK_DTYPE_I8, i8b, 2, 300), AK_OK);
    assert_true(i8b[0] == 0 && i8b[1] == 0);
    uint8_t u8[2] = {255, 7};
    assert_int_equal(ak_reduce_avg_finish(AK_DTYPE_U8, u8, 2, 4), AK_OK);
    assert_true(u8[0] == 63 && u8[1] == 1);
    int64_t i64[3] = {INT64_MIN, -7, INT64_MAX};
    assert_int_equal(ak_reduce_avg_finish(AK_DTYPE_I64, i64, 3, 2), AK_OK);
    assert_true(i64[0] == INT64_MIN / 2 && i64[1] == -3 && i64[2] == INT64_MAX / 2);
    int32_t same[2] = {INT32_MIN, 5}; /* divisor 1 leaves everything as it is */
    assert_int_equal(ak_reduce_avg_finish(AK_DTYPE_I32, same, 2, 1), AK_OK);
    assert_true(same[0] == INT32_MIN && same[1] == 5);
}

/* The status is INVALID_ARG and the message names what was wrong. */
static void expect_invalid(ak_status st, const char *needle) {
    assert_int_equal(st, AK_ERR_INVALID_ARG);
    if (!strstr(ak_last_error(), needle))
        fail_msg("error '%s' does not mention '%s'", ak_last_error(), needle);
}

static void test_bad_arguments(void **state) {
    (void)state;
    _Alignas(64) float buf[32] = {0};
    float *a = buf, *b = buf + 8, *d = buf + 16;
    const ak_reduce_op sum = AK_REDUCE_SUM;
    expect_invalid(ak_reduce(sum, AK_DTYPE_F32, NULL, a, b, 4), "dst is NULL");
    expect_invalid(ak_reduce(sum, AK_DTYPE_F32, d, NULL, b, 4), "a is NULL");
    expect_invalid(ak_reduce(sum, AK_DTYPE_F32, d, a, NULL, 4), "b is NULL");
    assert_int_equal(ak_reduce(sum, AK_DTYPE_F32, NULL, NULL, NULL, 0), AK_OK);
    expect_invalid(ak_reduce(AK_REDUCE_COUNT_, AK_DTYPE_F32, d, a, b, 4), "op");
    expect_invalid(ak_reduce((ak_reduce_op)-1, AK_DTYPE_F32, d, a, b, 4), "op");
    expect_invalid(ak_reduce(sum, AK_DTYPE_COUNT_, d, a, b, 4), "dtype");
    expect_invalid(ak_reduce(sum, (ak_dtype)-1, d, a, b, 4), "dtype");
    /* misaligned for the element size, each argument in turn */
    void *odd = (char *)d + 2;
    expect_invalid(ak_reduce(sum, AK_DTYPE_F32, odd, a, b, 4), "dst");
    expect_invalid(ak_reduce(sum, AK_DTYPE_F32, d, (char *)a + 1, b, 4), "a =");
    expect_invalid(ak_reduce(sum, AK_DTYPE_I64, d, a, (char *)b + 4, 2), "b =");
    assert_int_equal(ak_reduce(sum, AK_DTYPE_F16, odd, a, b, 4), AK_OK); /* 2-byte aligned */
    /* partial overlap is rejected, exact aliasing accepted, inputs may overlap each other */
    expect_invalid(ak_reduce(sum, AK_DTYPE_F32, a + 1, a, b, 8), "overlaps a");
    expect_invalid(ak_reduce(sum, AK_DTYPE_F32, b - 1, a, b, 4), "overlaps b");
    assert_int_equal(ak_reduce(sum, AK_DTYPE_F32, a, a, b, 8), AK_OK);
    assert_int_equal(ak_reduce(sum, AK_DTYPE_F32, b, a, b, 8), AK_OK);
    assert_int_equal(ak_reduce(sum, AK_DTYPE_F32, d, a, a + 1, 7), AK_OK);
    expect_invalid(ak_reduce(sum, AK_DTYPE_F32, d, a, b, SIZE_MAX / 2), "overflows");

    expect_invalid(ak_reduce_avg_finish(AK_DTYPE_F32, a, 4, 0), "divisor");
    expect_invalid(ak_reduce_avg_finish(AK_DTYPE_F32, a, 4, -3), "divisor");
    expect_invalid(ak_reduce_avg_finish(AK_DTYPE_F32, NULL, 4, 2), "buf is NULL");
    expect_invalid(ak_reduce_avg_finish(AK_DTYPE_COUNT_, a, 4, 2), "dtype");
    expect_invalid(ak_reduce_avg_finish(AK_DTYPE_I32, (char *)a + 2, 4, 2), "buf");
    assert_int_equal(ak_reduce_avg_finish(AK_DTYPE_I32, NULL, 0, 2), AK_OK);
}

static void test_op_names(void **state) {
    (void)state;
    assert_string_equal(ak_reduce_op_name(AK_REDUCE_SUM), "sum");
    assert_string_equal(ak_reduce_op_name(AK_REDUCE_PROD), "prod");
    assert_string_equal(ak_reduce_op_name(AK_REDUCE_MIN), "min");
    assert_string_equal(ak_reduce_op_name(AK_REDUCE_MAX), "max");
    assert_string_equal(ak_reduce_op_name(AK_REDUCE_AVG), "avg");
    assert_string_equal(ak_reduce_op_name(AK_REDUCE_COUNT_), "unknown");
    assert_string_equal(ak_reduce_op_name((ak_reduce_op)-1), "unknown");
}

/* Every table has every (op, dtype) kernel. */
static void test_tables_complete(void **state) {
    (void)state;
    for (size_t v = 0; v < NVARIANTS; v++) {
        const ak__kernels *k = ak__kernels_for(variants[v]);
        if (!k) continue;
        for (int op = 0; op < AK_REDUCE_AVG; op++)
            for (int dt = 0; dt < AK_DTYPE_COUNT_; dt++) assert_non_null(k->reduce[op][dt]);
    }
}

int main(void) {
    if (ak_init() != AK_OK) {
        fprintf(stderr, "ak_init failed: %s\n", ak_last_error());
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tables_complete),
        cmocka_unit_test(test_variants_match_ref),
        cmocka_unit_test(test_large_streaming),
        cmocka_unit_test(test_special_values),
        cmocka_unit_test(test_public_reduce_and_avg_is_sum),
        cmocka_unit_test(test_avg_finish_floats),
        cmocka_unit_test(test_avg_finish_ints),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_op_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
