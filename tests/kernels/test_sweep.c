/* The reference-vs-variant sweep over kernels/kernels.def: every kernel of the list, in
 * every variant table this CPU can run, against the scalar reference, at lengths around
 * the vector and tile widths (8, 16, 32, 64 lanes: exact, multiples, one below, one
 * above), in place where the kernel allows it, with outputs inside guard bytes and one
 * element off alignment. The list names each kernel's checker; a kernel whose checker
 * is missing here fails the sweep, so no kernel can be added untested.
 *
 * Tolerances (stated per kernel shape):
 * - elementwise maps, reductions, conversions, the Q8_0 and Q8_K activation quantizers:
 *   bit for bit
 *   (the references define the exact results, see the kernels/ref/ files);
 * - the fused optimizers: parameters and moments bit for bit (every variant performs the
 *   reference's operations in its order); LAMB's two norms within 1e-6 relative;
 * - the LLM decoder's loops: softmax 1e-5 relative, SwiGLU 1e-6·(|x| + 1)·|up|, RoPE
 *   2ε·(|a·c| + |b·s|), RMSNorm 4ε relative (e^x approximated alike in all variants);
 * - sums to one number: |got − ref| ≤ 1e-6·Σ|x| (the reference sums in double);
 * - dot products (attention rows f16/f32, linear layers, SGEMM): |got − ref| ≤
 *   (K + 2)·ε_f32·Σ|terms| per output, the forward error bound of a float dot product
 *   summed in any order (ε·|old value| more where the output accumulates); the
 *   super-block types (kernels/kquant.h) the same with Σ(|w| + 2·max|w|)·|x|, since their
 *   scale and min terms are each up to a row's range larger than w·x. */
#include <float.h>
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
#include "kernels/kquant.h"
#include "kernels/linear.h"
#include "kernels/optim.h"

static const size_t lengths[] = {0,  1,  3,  7,  8,  9,  15, 16,  17,  31,  32,  33,
                                 48, 63, 64, 65, 96, 127, 128, 129, 255, 256, 257, 1001};
#define N_LENGTHS (sizeof lengths / sizeof lengths[0])

/* ---- element types ------------------------------------------------------------------ */

static size_t elem_size(const char *elem) {
    if (!strcmp(elem, "F32") || !strcmp(elem, "I32")) return 4;
    if (!strcmp(elem, "F16") || !strcmp(elem, "BF16")) return 2;
    if (!strcmp(elem, "F64") || !strcmp(elem, "I64")) return 8;
    if (!strcmp(elem, "I8") || !strcmp(elem, "U8")) return 1;
    fail_msg("kernels.def names element type %s, unknown to the sweep", elem);
    return 0;
}

/* Values a kernel of this element type sees in practice: floats in [-scale, scale),
 * 16-bit floats rounded from those, integers over their whole range (wrap-around). */
static void fill_random(const char *elem, void *p, size_t n, uint64_t *seed, float scale) {
    for (size_t i = 0; i < n; i++) {
        float f = scale * test_rand_f32(seed);
        if (!strcmp(elem, "F32")) ((float *)p)[i] = f;
        else if (!strcmp(elem, "F64")) ((double *)p)[i] = (double)f * (1.0 + 1e-9 * i);
        else if (!strcmp(elem, "F16")) ((uint16_t *)p)[i] = ak__f32_to_f16_ref(f);
        else if (!strcmp(elem, "BF16")) ((uint16_t *)p)[i] = ak__f32_to_bf16_ref(f);
        else {
            uint64_t r = test_rand_u64(seed);
            memcpy((char *)p + i * elem_size(elem), &r, elem_size(elem));
        }
    }
}

static double value_at(const char *elem, const void *p, size_t i) {
    if (!strcmp(elem, "F16")) return ak__f16_to_f32_ref(((const uint16_t *)p)[i]);
    if (!strcmp(elem, "BF16")) return ak__bf16_to_f32_ref(((const uint16_t *)p)[i]);
    return ((const float *)p)[i];
}

/* ---- one case: a kernel of one variant, the reference, and their outputs ------------- */

typedef struct sweep_case {
    const ak__kernel_info *info;
    size_t index;
    const ak__kernels *k, *ref;
} sweep_case;

/* The kernel pointer of table t, as the function type the checker calls. */
#define KERNEL(c, t, type) ((type *)ak__kernel_get((t), (c)->index))

static void *xmalloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    assert_non_null(p);
    return p;
}

/* Output buffers (guarded, one element off alignment) for the variant; compared to the
 * reference's bytes and checked for writes outside. */
static guarded_buf out_alloc(size_t bytes, size_t esize) {
    guarded_buf g = guarded_alloc(bytes, esize);
    assert_non_null(g.base);
    return g;
}

static void expect_same_bytes(const sweep_case *c, const void *got, const void *want,
                              size_t bytes, size_t n, const char *how) {
    if (memcmp(got, want, bytes) != 0)
        fail_msg("%s %s (%s) n=%zu%s: differs from the reference %s", c->k->name, c->info->name,
                 c->k->impl[c->index], n, how, c->info->ref);
}

static void expect_guards(const sweep_case *c, const guarded_buf *g, size_t n) {
    if (!guarded_intact(g))
        fail_msg("%s %s n=%zu: wrote outside its output", c->k->name, c->info->name, n);
}

/* ---- elementwise shapes: binary (dst = a op b), reduce, scale, axpy ---------------- */

typedef enum { MAP_BINARY, MAP_SCALE, MAP_AXPY } map_shape;

/* dst(out) from a, b; in place: 0 none, 1 dst == a, 2 dst == b */
static void call_map(const sweep_case *c, const ak__kernels *t, map_shape shape, void *out,
                     const void *a, const void *b, size_t n) {
    const float alpha = 0.3125f;
    int f32 = !strcmp(c->info->elem, "F32");
    if (!strcmp(c->info->type, "ak__kf_reduce")) {
        KERNEL(c, t, ak__kf_reduce)(out, a, b, n);
    } else if (shape == MAP_BINARY) {
        if (f32) KERNEL(c, t, ak__kf_f32_binary)(out, a, b, n);
        else KERNEL(c, t, ak__kf_h16_binary)(out, a, b, n);
    } else if (shape == MAP_SCALE) {
        if (f32) KERNEL(c, t, ak__kf_f32_scale)(out, a, alpha, n);
        else KERNEL(c, t, ak__kf_h16_scale)(out, a, alpha, n);
    } else { /* axpy: out += alpha·b, out starts as a */
        memmove(out, a, n * elem_size(c->info->elem));
        if (f32) KERNEL(c, t, ak__kf_f32_axpy)(out, alpha, b, n);
        else KERNEL(c, t, ak__kf_h16_axpy)(out, alpha, b, n);
    }
}

static void check_map_at(const sweep_case *c, map_shape shape, size_t n, int in_place,
                         uint64_t *seed) {
    size_t es = elem_size(c->info->elem), bytes = n * es;
    void *a = xmalloc(bytes), *b = xmalloc(bytes), *want = xmalloc(bytes);
    fill_random(c->info->elem, a, n, seed, 8.0f);
    fill_random(c->info->elem, b, n, seed, 8.0f);
    guarded_buf g = out_alloc(bytes, es);
    if (in_place) { /* the reference computes out of place, the variant over its input */
        call_map(c, c->ref, shape, want, a, b, n);
        memcpy(g.data, in_place == 1 ? a : b, bytes);
        call_map(c, c->k, shape, g.data, in_place == 1 ? g.data : a, in_place == 2 ? g.data : b,
                 n);
    } else {
        call_map(c, c->ref, shape, want, a, b, n);
        call_map(c, c->k, shape, g.data, a, b, n);
    }
    expect_same_bytes(c, g.data, want, bytes, n, in_place ? " in place" : "");
    expect_guards(c, &g, n);
    guarded_free(&g);
    free(a), free(b), free(want);
}

static void check_map(const sweep_case *c, map_shape shape, int in_place_ops) {
    uint64_t seed = 11;
    for (size_t l = 0; l < N_LENGTHS; l++)
        for (int ip = 0; ip <= in_place_ops; ip++) check_map_at(c, shape, lengths[l], ip, &seed);
}

static void check_binary(const sweep_case *c) { check_map(c, MAP_BINARY, 1); }
static void check_reduce(const sweep_case *c) { check_map(c, MAP_BINARY, 2); }
static void check_scale(const sweep_case *c) { check_map(c, MAP_SCALE, 1); }
static void check_axpy(const sweep_case *c) { check_map(c, MAP_AXPY, 0); }

/* sum: |got − ref| ≤ 1e-6·Σ|x| */
static void check_sum(const sweep_case *c) {
    uint64_t seed = 12;
    int f32 = !strcmp(c->info->elem, "F32");
    for (size_t l = 0; l < N_LENGTHS; l++) {
        size_t n = lengths[l], es = elem_size(c->info->elem);
        guarded_buf x = out_alloc(n * es, es); /* read only: guards catch nothing, keep it tidy */
        fill_random(c->info->elem, x.data, n, &seed, 8.0f);
        double want = f32 ? KERNEL(c, c->ref, ak__kf_f32_sum)(x.data, n)
                          : KERNEL(c, c->ref, ak__kf_h16_sum)(x.data, n);
        double got = f32 ? KERNEL(c, c->k, ak__kf_f32_sum)(x.data, n)
                         : KERNEL(c, c->k, ak__kf_h16_sum)(x.data, n);
        double mag = 0;
        for (size_t i = 0; i < n; i++) mag += fabs(value_at(c->info->elem, x.data, i));
        if (!(fabs(got - want) <= 1e-6 * mag))
            fail_msg("%s %s n=%zu: %.17g, reference %.17g", c->k->name, c->info->name, n, got,
                     want);
        guarded_free(&x);
    }
}

/* ---- memory probe: a wrapping integer sum, so every variant gives the same number ------ */

static void check_read_sum(const sweep_case *c) {
    uint64_t seed = 20;
    static const size_t words[] = {32, 64, 96, 1024, 32 * 1001};
    for (size_t l = 0; l < sizeof words / sizeof *words; l++) {
        size_t n = words[l];
        uint64_t *x = xmalloc(n * 8);
        fill_random("I64", x, n, &seed, 1.0f);
        uint64_t want = KERNEL(c, c->ref, ak__kf_u64_read_sum)(x, n);
        uint64_t got = KERNEL(c, c->k, ak__kf_u64_read_sum)(x, n);
        if (got != want)
            fail_msg("%s %s n=%zu: %llu, reference %llu", c->k->name, c->info->name, n,
                     (unsigned long long)got, (unsigned long long)want);
        free(x);
    }
}

/* ---- conversions --------------------------------------------------------------------- */

static void check_convert(const sweep_case *c, int narrow) {
    uint64_t seed = 13;
    for (size_t l = 0; l < N_LENGTHS; l++) {
        size_t n = lengths[l], out_es = narrow ? 2 : 4;
        void *src = xmalloc(n * 4), *want = xmalloc(n * out_es);
        if (narrow) fill_random("F32", src, n, &seed, 70000.0f); /* f16 overflows too */
        else fill_random(c->info->elem, src, n, &seed, 100.0f);
        guarded_buf g = out_alloc(n * out_es, out_es);
        if (narrow) {
            KERNEL(c, c->ref, ak__kf_narrow16)(want, src, n);
            KERNEL(c, c->k, ak__kf_narrow16)(g.data, src, n);
        } else {
            KERNEL(c, c->ref, ak__kf_widen16)(want, src, n);
            KERNEL(c, c->k, ak__kf_widen16)(g.data, src, n);
        }
        expect_same_bytes(c, g.data, want, n * out_es, n, "");
        expect_guards(c, &g, n);
        guarded_free(&g);
        free(src), free(want);
    }
}

static void check_narrow(const sweep_case *c) { check_convert(c, 1); }
static void check_widen(const sweep_case *c) { check_convert(c, 0); }

/* ---- dot-product shapes -------------------------------------------------------------- */

static void expect_within(const sweep_case *c, double got, double want, double bound,
                          const char *where) {
    if (!(fabs(got - want) <= bound))
        fail_msg("%s %s %s: %.9g, reference %.9g (± %.3g)", c->k->name, c->info->name, where,
                 got, want, bound);
}

/* Rows of n × dim values as the attention kernels read them: f16 (the KV cache) or f32.
 * value_at widens either. */
static void *rows_make(const char *elem, size_t count, uint64_t *seed) {
    void *rows = xmalloc(count * elem_size(elem));
    fill_random(elem, rows, count, seed, 4.0f);
    return rows;
}

/* attention scores: out[j] = scale·q·rows[j] over n rows of dim values */
static void check_dot_rows(const sweep_case *c) {
    uint64_t seed = 14;
    static const size_t ns[] = {1, 3, 4, 5, 16};
    const char *elem = c->info->elem;
    int f16 = !strcmp(elem, "F16");
    for (size_t l = 1; l < N_LENGTHS; l++)
        for (size_t r = 0; r < sizeof ns / sizeof *ns; r++) {
            size_t dim = lengths[l], n = ns[r];
            void *rows = rows_make(elem, n * dim, &seed);
            float *q = xmalloc(dim * 4), *want = xmalloc(n * 4);
            fill_random("F32", q, dim, &seed, 1.0f);
            guarded_buf g = out_alloc(n * 4, 4);
            if (f16) {
                KERNEL(c, c->ref, ak__kf_dot_rows)(want, q, rows, n, dim, 0.125f);
                KERNEL(c, c->k, ak__kf_dot_rows)(g.data, q, rows, n, dim, 0.125f);
            } else {
                KERNEL(c, c->ref, ak__kf_f32_dot_rows)(want, q, rows, n, dim, 0.125f);
                KERNEL(c, c->k, ak__kf_f32_dot_rows)(g.data, q, rows, n, dim, 0.125f);
            }
            for (size_t j = 0; j < n; j++) {
                double mag = 0;
                for (size_t d = 0; d < dim; d++)
                    mag += fabs(q[d] * value_at(elem, rows, j * dim + d));
                char where[96];
                snprintf(where, sizeof where, "n=%zu dim=%zu row %zu", n, dim, j);
                expect_within(c, ((float *)g.data)[j], want[j],
                              0.125 * mag * FLT_EPSILON * (double)(dim + 2) + 1e-30, where);
            }
            expect_guards(c, &g, dim);
            guarded_free(&g);
            free(rows), free(q), free(want);
        }
}

/* attention values: o[d] += Σ_j p[j]·rows[j][d] */
static void check_madd_rows(const sweep_case *c) {
    uint64_t seed = 15;
    static const size_t ns[] = {1, 3, 4, 5, 16};
    const char *elem = c->info->elem;
    int f16 = !strcmp(elem, "F16");
    for (size_t l = 1; l < N_LENGTHS; l++)
        for (size_t r = 0; r < sizeof ns / sizeof *ns; r++) {
            size_t dim = lengths[l], n = ns[r];
            void *rows = rows_make(elem, n * dim, &seed);
            float *p = xmalloc(n * 4), *o0 = xmalloc(dim * 4), *want = xmalloc(dim * 4);
            fill_random("F32", p, n, &seed, 1.0f);
            fill_random("F32", o0, dim, &seed, 1.0f);
            guarded_buf g = out_alloc(dim * 4, 4);
            memcpy(want, o0, dim * 4);
            memcpy(g.data, o0, dim * 4);
            if (f16) {
                KERNEL(c, c->ref, ak__kf_madd_rows)(want, p, rows, n, dim);
                KERNEL(c, c->k, ak__kf_madd_rows)(g.data, p, rows, n, dim);
            } else {
                KERNEL(c, c->ref, ak__kf_f32_madd_rows)(want, p, rows, n, dim);
                KERNEL(c, c->k, ak__kf_f32_madd_rows)(g.data, p, rows, n, dim);
            }
            for (size_t d = 0; d < dim; d++) {
                double mag = fabs(o0[d]);
                for (size_t j = 0; j < n; j++)
                    mag += fabs(p[j] * value_at(elem, rows, j * dim + d));
                char where[96];
                snprintf(where, sizeof where, "n=%zu dim=%zu [%zu]", n, dim, d);
                expect_within(c, ((float *)g.data)[d], want[d],
                              mag * FLT_EPSILON * (double)(n + 2) + 1e-30, where);
            }
            expect_guards(c, &g, dim);
            guarded_free(&g);
            free(rows), free(p), free(o0), free(want);
        }
}

/* ---- attention over q8_0 rows (the q8_0 KV cache) ------------------------------------ */

static const size_t q8_dims[] = {32, 64, 96, 128, 256};
static const size_t q8_ns[] = {1, 3, 4, 5, 16};

/* n rows of dim values as the q8_0 cache stores them (quantized from random floats, so
 * every block is one ggml's quantizer can write), and their exact f32 values. */
static void *q8_rows_make(size_t n, size_t dim, uint64_t *seed, float **values) {
    float *x = xmalloc(n * dim * 4);
    fill_random("F32", x, n * dim, seed, 4.0f);
    if (n * dim >= 64) x[3] = 0, x[37] = 0; /* zeros (and an all-small block) included */
    void *rows = xmalloc(n * dim / AK__QK * sizeof(ak__block_q8_0));
    ak__quantize_row_ref(AK_WTYPE_Q8_0, x, rows, n * dim);
    ak__dequantize_row_ref(AK_WTYPE_Q8_0, rows, x, n * dim);
    *values = x;
    return rows;
}

/* scores with the f32 query: out[j] = scale·q·rows[j] */
static void check_q8_dot_rows(const sweep_case *c) {
    uint64_t seed = 41;
    for (size_t l = 0; l < sizeof q8_dims / sizeof *q8_dims; l++)
        for (size_t r = 0; r < sizeof q8_ns / sizeof *q8_ns; r++) {
            size_t dim = q8_dims[l], n = q8_ns[r];
            float *vals, *q = xmalloc(dim * 4), *want = xmalloc(n * 4);
            void *rows = q8_rows_make(n, dim, &seed, &vals);
            fill_random("F32", q, dim, &seed, 1.0f);
            guarded_buf g = out_alloc(n * 4, 4);
            KERNEL(c, c->ref, ak__kf_q8_dot_rows)(want, q, rows, n, dim, 0.125f);
            KERNEL(c, c->k, ak__kf_q8_dot_rows)(g.data, q, rows, n, dim, 0.125f);
            for (size_t j = 0; j < n; j++) {
                double mag = 0, exact = 0;
                for (size_t d = 0; d < dim; d++) {
                    mag += fabs(q[d] * vals[j * dim + d]);
                    exact += (double)q[d] * vals[j * dim + d];
                }
                char where[96];
                snprintf(where, sizeof where, "n=%zu dim=%zu row %zu", n, dim, j);
                double bound = 0.125 * mag * FLT_EPSILON * (double)(dim + 2) + 1e-30;
                expect_within(c, ((float *)g.data)[j], want[j], bound, where);
                expect_within(c, want[j], 0.125 * exact, bound, where); /* the reference too */
            }
            expect_guards(c, &g, dim);
            guarded_free(&g);
            free(rows), free(vals), free(q), free(want);
        }
}

/* scores with the query quantized (linear_quantize_x's reference): integer per block */
static void check_q8_dot_rows_q8(const sweep_case *c) {
    uint64_t seed = 42;
    for (size_t l = 0; l < sizeof q8_dims / sizeof *q8_dims; l++)
        for (size_t r = 0; r < sizeof q8_ns / sizeof *q8_ns; r++) {
            size_t dim = q8_dims[l], n = q8_ns[r], nb = dim / AK__QK;
            float *vals, *q = xmalloc(dim * 4), *want = xmalloc(n * 4), *qd = xmalloc(nb * 4);
            int32_t *qs = xmalloc(nb * 4);
            int8_t *qq = xmalloc(dim);
            void *rows = q8_rows_make(n, dim, &seed, &vals);
            fill_random("F32", q, dim, &seed, 1.0f);
            ak_f32_quantize_q8_0__ref(q, dim, qd, qs, qq);
            guarded_buf g = out_alloc(n * 4, 4);
            KERNEL(c, c->ref, ak__kf_q8_dot_rows_q8)(want, qd, qq, rows, n, dim, 0.125f);
            KERNEL(c, c->k, ak__kf_q8_dot_rows_q8)(g.data, qd, qq, rows, n, dim, 0.125f);
            for (size_t j = 0; j < n; j++) {
                double mag = 0, exact = 0;
                for (size_t d = 0; d < dim; d++) {
                    double qv = (double)qd[d / AK__QK] * qq[d];
                    mag += fabs(qv * vals[j * dim + d]);
                    exact += qv * vals[j * dim + d];
                }
                char where[96];
                snprintf(where, sizeof where, "n=%zu dim=%zu row %zu", n, dim, j);
                double bound = 0.125 * mag * FLT_EPSILON * (double)(nb + 10) + 1e-30;
                expect_within(c, ((float *)g.data)[j], want[j], bound, where);
                expect_within(c, want[j], 0.125 * exact, bound, where);
            }
            expect_guards(c, &g, dim);
            guarded_free(&g);
            free(rows), free(vals), free(q), free(want), free(qd), free(qs), free(qq);
        }
}

/* values: o[d] += Σ_j p[j]·rows[j][d] */
static void check_q8_madd_rows(const sweep_case *c) {
    uint64_t seed = 43;
    for (size_t l = 0; l < sizeof q8_dims / sizeof *q8_dims; l++)
        for (size_t r = 0; r < sizeof q8_ns / sizeof *q8_ns; r++) {
            size_t dim = q8_dims[l], n = q8_ns[r];
            float *vals, *p = xmalloc(n * 4), *o0 = xmalloc(dim * 4), *want = xmalloc(dim * 4);
            void *rows = q8_rows_make(n, dim, &seed, &vals);
            fill_random("F32", p, n, &seed, 1.0f);
            fill_random("F32", o0, dim, &seed, 1.0f);
            guarded_buf g = out_alloc(dim * 4, 4);
            memcpy(want, o0, dim * 4);
            memcpy(g.data, o0, dim * 4);
            KERNEL(c, c->ref, ak__kf_q8_madd_rows)(want, p, rows, n, dim);
            KERNEL(c, c->k, ak__kf_q8_madd_rows)(g.data, p, rows, n, dim);
            for (size_t d = 0; d < dim; d++) {
                double mag = fabs(o0[d]), exact = o0[d];
                for (size_t j = 0; j < n; j++) {
                    mag += fabs(p[j] * vals[j * dim + d]);
                    exact += (double)p[j] * vals[j * dim + d];
                }
                char where[96];
                snprintf(where, sizeof where, "n=%zu dim=%zu [%zu]", n, dim, d);
                double bound = 2 * mag * FLT_EPSILON * (double)(n + 2) + 1e-30;
                expect_within(c, ((float *)g.data)[d], want[d], bound, where);
                expect_within(c, want[d], exact, bound, where);
            }
            expect_guards(c, &g, dim);
            guarded_free(&g);
            free(rows), free(vals), free(p), free(o0), free(want);
        }
}

/* ---- the LLM decoder's elementwise loops ------------------------------------------- */

/* softmax in place over scores of a wide range: |got − ref| ≤ 1e-5·ref + 1e-9 (e^x to
 * 3e-7 in both, FMAs and summation order in the variant) */
static void check_softmax(const sweep_case *c) {
    uint64_t seed = 20;
    for (size_t l = 1; l < N_LENGTHS; l++) {
        size_t n = lengths[l];
        float *want = xmalloc(n * 4);
        guarded_buf g = out_alloc(n * 4, 4);
        fill_random("F32", want, n, &seed, 30.0f);
        memcpy(g.data, want, n * 4);
        KERNEL(c, c->ref, ak__kf_f32_softmax)(want, n);
        KERNEL(c, c->k, ak__kf_f32_softmax)(g.data, n);
        for (size_t i = 0; i < n; i++) {
            char where[64];
            snprintf(where, sizeof where, "n=%zu [%zu]", n, i);
            expect_within(c, ((float *)g.data)[i], want[i], 1e-5 * want[i] + 1e-9, where);
        }
        expect_guards(c, &g, n);
        guarded_free(&g);
        free(want);
    }
}

/* SwiGLU in place: |got − ref| ≤ 1e-6·(|x| + 1)·|up| (one e^x, a divide, FMAs) */
static void check_swiglu(const sweep_case *c) {
    uint64_t seed = 21;
    for (size_t l = 0; l < N_LENGTHS; l++) {
        size_t n = lengths[l];
        float *x = xmalloc(n * 4), *up = xmalloc(n * 4), *want = xmalloc(n * 4);
        fill_random("F32", x, n, &seed, 12.0f);
        fill_random("F32", up, n, &seed, 3.0f);
        guarded_buf g = out_alloc(n * 4, 4);
        memcpy(want, x, n * 4);
        memcpy(g.data, x, n * 4);
        KERNEL(c, c->ref, ak__kf_f32_gated)(want, up, n);
        KERNEL(c, c->k, ak__kf_f32_gated)(g.data, up, n);
        for (size_t i = 0; i < n; i++) {
            char where[64];
            snprintf(where, sizeof where, "n=%zu [%zu]", n, i);
            expect_within(c, ((float *)g.data)[i], want[i],
                          1e-6 * (fabs(x[i]) + 1) * fabs(up[i]) + 1e-30, where);
        }
        expect_guards(c, &g, n);
        guarded_free(&g);
        free(x), free(up), free(want);
    }
}

/* soft-capping in place: |got − ref| ≤ 1e-6·cap (one e^x and a divide per value) */
static void check_softcap(const sweep_case *c) {
    uint64_t seed = 24;
    for (size_t l = 0; l < N_LENGTHS; l++) {
        size_t n = lengths[l];
        float *want = xmalloc(n * 4 + 4);
        guarded_buf g = out_alloc(n * 4, 4);
        fill_random("F32", want, n, &seed, 120.0f);
        memcpy(g.data, want, n * 4);
        KERNEL(c, c->ref, ak__kf_f32_softcap)(want, n, 30.0f);
        KERNEL(c, c->k, ak__kf_f32_softcap)(g.data, n, 30.0f);
        for (size_t i = 0; i < n; i++) {
            char where[64];
            snprintf(where, sizeof where, "n=%zu [%zu]", n, i);
            expect_within(c, ((float *)g.data)[i], want[i], 30.0 * 1e-6, where);
        }
        expect_guards(c, &g, n);
        guarded_free(&g);
        free(want);
    }
}

/* GELU in place: |got − ref| ≤ 1e-6·(|x| + 1) (one e^x and a divide) */
static void check_gelu(const sweep_case *c) {
    uint64_t seed = 25;
    for (size_t l = 0; l < N_LENGTHS; l++) {
        size_t n = lengths[l];
        float *x = xmalloc(n * 4 + 4), *want = xmalloc(n * 4 + 4);
        guarded_buf g = out_alloc(n * 4, 4);
        fill_random("F32", x, n, &seed, 12.0f);
        memcpy(want, x, n * 4);
        memcpy(g.data, x, n * 4);
        KERNEL(c, c->ref, ak__kf_f32_gelu)(want, n);
        KERNEL(c, c->k, ak__kf_f32_gelu)(g.data, n);
        for (size_t i = 0; i < n; i++) {
            char where[64];
            snprintf(where, sizeof where, "n=%zu [%zu]", n, i);
            expect_within(c, ((float *)g.data)[i], want[i], 1e-6 * (fabs(x[i]) + 1), where);
        }
        expect_guards(c, &g, n);
        guarded_free(&g);
        free(x), free(want);
    }
}

/* LayerNorm of one row: |got − ref| ≤ 4ε·(|ref| + |b|) (mean and variance in double) */
static void check_layernorm(const sweep_case *c) {
    uint64_t seed = 26;
    for (size_t l = 1; l < N_LENGTHS; l++) {
        size_t n = lengths[l];
        float *x = xmalloc(n * 4), *w = xmalloc(n * 4), *b = xmalloc(n * 4), *want = xmalloc(n * 4);
        fill_random("F32", x, n, &seed, 3.0f);
        fill_random("F32", w, n, &seed, 1.0f);
        fill_random("F32", b, n, &seed, 1.0f);
        guarded_buf g = out_alloc(n * 4, 4);
        KERNEL(c, c->ref, ak__kf_layernorm)(want, x, w, b, n, 1e-5f);
        KERNEL(c, c->k, ak__kf_layernorm)(g.data, x, w, b, n, 1e-5f);
        for (size_t i = 0; i < n; i++) {
            char where[64];
            snprintf(where, sizeof where, "n=%zu [%zu]", n, i);
            expect_within(c, ((float *)g.data)[i], want[i],
                          4 * FLT_EPSILON * (fabs(want[i]) + fabs(b[i])), where);
        }
        expect_guards(c, &g, n);
        guarded_free(&g);
        free(x), free(w), free(b), free(want);
    }
}

/* MoE routing: the same experts, weights within 1e-6 (softmax + top-k of one token) */
static void check_moe_route(const sweep_case *c) {
    uint64_t seed = 27;
    static const size_t shapes[][2] = {{4, 1}, {4, 2}, {8, 2}, {60, 4}, {128, 8}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (int norm = 0; norm < 2; norm++) {
            size_t E = shapes[s][0], K = shapes[s][1];
            float *p = xmalloc(E * 4), *q = xmalloc(E * 4), *w1 = xmalloc(K * 4), *w2 = xmalloc(K * 4);
            int32_t *s1 = xmalloc(K * 4), *s2 = xmalloc(K * 4);
            fill_random("F32", p, E, &seed, 4.0f);
            memcpy(q, p, E * 4);
            KERNEL(c, c->ref, ak__kf_moe_route)(p, E, K, norm, s1, w1);
            KERNEL(c, c->k, ak__kf_moe_route)(q, E, K, norm, s2, w2);
            for (size_t j = 0; j < K; j++) {
                char where[64];
                snprintf(where, sizeof where, "E=%zu K=%zu norm=%d [%zu]", E, K, norm, j);
                expect_within(c, (float)s2[j], (float)s1[j], 0, where);
                expect_within(c, w2[j], w1[j], 1e-6, where);
            }
            free(p), free(q), free(w1), free(w2), free(s1), free(s2);
        }
}

/* RoPE over T tokens × heads, both pair layouts: |got − ref| ≤ 2ε·(|a·c| + |b·s|) */
static void check_rope(const sweep_case *c) {
    uint64_t seed = 22;
    static const size_t hds[] = {2, 8, 16, 32, 34, 64, 128};
    for (size_t h = 0; h < sizeof hds / sizeof *hds; h++)
        for (int neox = 0; neox < 2; neox++) {
            size_t hd = hds[h], T = 3, heads = 5, count = T * heads * hd;
            float *x = xmalloc(count * 4), *cs = xmalloc(T * hd * 4), *want = xmalloc(count * 4);
            fill_random("F32", x, count, &seed, 4.0f);
            fill_random("F32", cs, T * hd, &seed, 1.0f);
            guarded_buf g = out_alloc(count * 4, 4);
            memcpy(want, x, count * 4);
            memcpy(g.data, x, count * 4);
            KERNEL(c, c->ref, ak__kf_rope)(want, T, heads, hd, neox, cs);
            KERNEL(c, c->k, ak__kf_rope)(g.data, T, heads, hd, neox, cs);
            for (size_t i = 0; i < count; i++) {
                /* magnitudes of both products, bounded by the pair's largest value */
                size_t row = i / hd, t = row / heads, half = hd / 2, k = i % hd;
                size_t pair = neox ? k % half : k / 2;
                size_t base = row * hd, lo = neox ? pair : 2 * pair;
                size_t hi = neox ? pair + half : 2 * pair + 1;
                double mag = (fabs(x[base + lo]) + fabs(x[base + hi])) *
                             (fabs(cs[t * hd + pair]) + fabs(cs[t * hd + half + pair]));
                char where[96];
                snprintf(where, sizeof where, "hd=%zu neox=%d [%zu]", hd, neox, i);
                expect_within(c, ((float *)g.data)[i], want[i], 2 * FLT_EPSILON * mag + 1e-30,
                              where);
            }
            expect_guards(c, &g, count);
            guarded_free(&g);
            free(x), free(cs), free(want);
        }
}

/* RMSNorm of one row: |got − ref| ≤ 4ε·|ref| (the sum of squares in double) */
static void check_rmsnorm(const sweep_case *c) {
    uint64_t seed = 23;
    for (size_t l = 1; l < N_LENGTHS; l++) {
        size_t n = lengths[l];
        float *x = xmalloc(n * 4), *w = xmalloc(n * 4), *want = xmalloc(n * 4);
        fill_random("F32", x, n, &seed, 3.0f);
        fill_random("F32", w, n, &seed, 1.0f);
        guarded_buf g = out_alloc(n * 4, 4);
        KERNEL(c, c->ref, ak__kf_rmsnorm)(want, x, w, n, 1e-5f);
        KERNEL(c, c->k, ak__kf_rmsnorm)(g.data, x, w, n, 1e-5f);
        for (size_t i = 0; i < n; i++) {
            char where[64];
            snprintf(where, sizeof where, "n=%zu [%zu]", n, i);
            expect_within(c, ((float *)g.data)[i], want[i], 4 * FLT_EPSILON * fabs(want[i]),
                          where);
        }
        expect_guards(c, &g, n);
        guarded_free(&g);
        free(x), free(w), free(want);
    }
}

/* SGEMM C = alpha·op(A)·op(B) + beta·C, square-ish shapes around the tiles (MR 4-8,
 * NR 8-16), both transposes, beta 0 (C holds NaN: must not be read) and 0.5 */
static void check_sgemm_at(const sweep_case *c, size_t M, size_t N, size_t K, int ta, int tb,
                           float beta, uint64_t *seed) {
    size_t lda = (ta ? M : K) + 1, ldb = (tb ? K : N) + 2, ldc = N + 3;
    float *A = xmalloc((ta ? K : M) * lda * 4), *B = xmalloc((tb ? N : K) * ldb * 4);
    float *C0 = xmalloc(M * ldc * 4), *want = xmalloc(M * ldc * 4);
    fill_random("F32", A, (ta ? K : M) * lda, seed, 1.0f);
    fill_random("F32", B, (tb ? N : K) * ldb, seed, 1.0f);
    fill_random("F32", C0, M * ldc, seed, 1.0f);
    if (beta == 0.0f)
        for (size_t i = 0; i < M * ldc; i++) C0[i] = NAN;
    guarded_buf g = out_alloc(M * ldc * 4, 4);
    float *C = g.data;
    memcpy(want, C0, M * ldc * 4);
    memcpy(C, C0, M * ldc * 4);
    KERNEL(c, c->ref, ak__kf_sgemm)(ta, tb, M, N, K, 1.5f, A, lda, B, ldb, beta, want, ldc, NULL);
    KERNEL(c, c->k, ak__kf_sgemm)(ta, tb, M, N, K, 1.5f, A, lda, B, ldb, beta, C, ldc, NULL);
    for (size_t i = 0; i < M; i++)
        for (size_t j = 0; j < ldc; j++) {
            char where[160];
            snprintf(where, sizeof where, "%zux%zux%zu ta=%d tb=%d beta=%g C[%zu][%zu]", M, N, K,
                     ta, tb, (double)beta, i, j);
            if (j >= N) { /* padding between rows: untouched */
                if (memcmp(&C[i * ldc + j], &C0[i * ldc + j], 4) != 0)
                    fail_msg("%s sgemm %s: wrote the padding", c->k->name, where);
                continue;
            }
            double mag = beta != 0.0f ? fabs(beta * C0[i * ldc + j]) : 0;
            for (size_t p = 0; p < K; p++)
                mag += 1.5 * fabs((double)A[ta ? p * lda + i : i * lda + p] *
                                  B[tb ? j * ldb + p : p * ldb + j]);
            expect_within(c, C[i * ldc + j], want[i * ldc + j],
                          mag * FLT_EPSILON * (double)(K + 2) + 1e-30, where);
        }
    expect_guards(c, &g, M * N);
    guarded_free(&g);
    free(A), free(B), free(C0), free(want);
}

static void check_sgemm(const sweep_case *c) {
    static const size_t sizes[] = {1, 5, 8, 9, 16, 17, 33};
    uint64_t seed = 16;
    for (size_t m = 0; m < 7; m++)
        for (size_t n = 0; n < 7; n++) {
            size_t K = sizes[(m + n) % 7] * 3;
            check_sgemm_at(c, sizes[m], sizes[n], K, (int)(m & 1), (int)(n & 1),
                           (m + n) % 2 ? 0.5f : 0.0f, &seed);
        }
    check_sgemm_at(c, 70, 130, 300, 0, 0, 0.0f, &seed); /* several blocks of every loop */
}

/* linear layers: Y[t][n] (+)= W[n]·x_t over the kernel's weight type; K a multiple of 32
 * (the quantized blocks), N and T around the row and token tiles */
static ak_wtype wtype_of(const char *elem) {
    if (!strcmp(elem, "F16")) return AK_WTYPE_F16;
    if (!strcmp(elem, "BF16")) return AK_WTYPE_BF16;
    if (!strcmp(elem, "Q8_0")) return AK_WTYPE_Q8_0;
    if (!strcmp(elem, "Q4_0")) return AK_WTYPE_Q4_0;
    return AK_WTYPE_F32;
}

typedef struct linear_data {
    ak__linear_job job;
    float *wd, *xv, *y0;
    size_t ny;
} linear_data;

/* bf16 weights with T >= 2 get their activations as the driver passes them: rounded to
 * bf16 (xb, a row stride off the vector width) and X their widened values. */
static void bf16_activations(ak__linear_job *job, float *X) {
    uint16_t *xb = xmalloc(job->T * (job->K + 3) * sizeof *xb);
    for (size_t t = 0; t < job->T; t++)
        for (size_t k = 0; k < job->K; k++) {
            xb[t * (job->K + 3) + k] = ak__f32_to_bf16_ref(X[t * job->ldx + k]);
            X[t * job->ldx + k] = ak__bf16_to_f32_ref(xb[t * (job->K + 3) + k]);
        }
    job->xb = xb;
    job->ldxb = job->K + 3;
}

static linear_data linear_make(ak_wtype w, size_t N, size_t K, size_t T, int acc,
                               uint64_t *seed) {
    linear_data d = {.job = {.K = K, .T = T, .N = N, .ldx = K + 1, .ldq = K, .ldy = N + 2,
                             .accumulate = acc}};
    size_t rb = 0;
    assert_int_equal(ak_wtype_row_bytes(w, K, &rb), AK_OK);
    float *wf = xmalloc(N * K * 4), *X = xmalloc(T * d.job.ldx * 4);
    uint8_t *W = xmalloc(N * rb);
    d.wd = xmalloc(N * K * 4), d.xv = xmalloc(T * K * 4);
    fill_random("F32", wf, N * K, seed, 1.0f);
    fill_random("F32", X, T * d.job.ldx, seed, 2.0f);
    if (w == AK_WTYPE_BF16 && T >= 2) bf16_activations(&d.job, X);
    for (size_t n = 0; n < N; n++) {
        assert_int_equal(ak_quantize_row(w, wf + n * K, W + n * rb, K), AK_OK);
        assert_int_equal(ak_dequantize_row(w, W + n * rb, d.wd + n * K, K), AK_OK);
    }
    float *xd = xmalloc(T * K / 32 * 4);
    int32_t *xs = xmalloc(T * K / 32 * 4), *xo = xmalloc(T * K / 32 * 4);
    int8_t *xq = xmalloc(T * K);
    memset(xs, 0, T * K / 32 * 4); /* K off the blocks (float weights) leaves some unused */
    for (size_t t = 0; t < T; t++) {
        ak_f32_quantize_q8_0__ref(X + t * d.job.ldx, K, xd + t * K / 32, xs + t * K / 32,
                                  xq + t * K);
        for (size_t k = 0; k < K; k++)
            d.xv[t * K + k] = (w == AK_WTYPE_Q8_0 || w == AK_WTYPE_Q4_0)
                                  ? xd[t * K / 32 + k / 32] * xq[t * K + k]
                                  : X[t * d.job.ldx + k];
    }
    memcpy(xo, xs, T * K / 32 * 4);
    ak__linear_offsets(w, xo, T * K / 32);
    d.ny = T * d.job.ldy;
    d.y0 = xmalloc(d.ny * 4);
    fill_random("F32", d.y0, d.ny, seed, 4.0f);
    d.job.W = W, d.job.row_bytes = rb, d.job.X = X;
    d.job.xd = xd, d.job.xo = xo, d.job.xq = xq;
    free(wf), free(xs);
    return d;
}

static void linear_free(linear_data *d) {
    free((void *)d->job.W), free((void *)d->job.X), free((void *)d->job.xd);
    free((void *)d->job.xo), free((void *)d->job.xq), free((void *)d->job.xb);
    free(d->wd), free(d->xv), free(d->y0);
}

static void check_linear_at(const sweep_case *c, size_t N, size_t K, size_t T, int acc,
                            uint64_t *seed) {
    linear_data d = linear_make(wtype_of(c->info->elem), N, K, T, acc, seed);
    float *want = xmalloc(d.ny * 4);
    guarded_buf g = out_alloc(d.ny * 4, 4);
    memcpy(want, d.y0, d.ny * 4);
    memcpy(g.data, d.y0, d.ny * 4);
    ak__linear_job rj = d.job, kj = d.job;
    rj.Y = want, kj.Y = g.data;
    KERNEL(c, c->ref, ak__kf_linear)(&rj, 0, N);
    KERNEL(c, c->k, ak__kf_linear)(&kj, 0, N / 3); /* two column ranges, as the pool splits */
    KERNEL(c, c->k, ak__kf_linear)(&kj, N / 3, N);
    for (size_t t = 0; t < T; t++)
        for (size_t n = 0; n < kj.ldy; n++) {
            float got = ((float *)g.data)[t * kj.ldy + n];
            char where[160];
            snprintf(where, sizeof where, "N=%zu K=%zu T=%zu acc=%d Y[%zu][%zu]", N, K, T, acc,
                     t, n);
            if (n >= N) { /* padding: untouched */
                if (memcmp(&got, &d.y0[t * kj.ldy + n], 4) != 0)
                    fail_msg("%s %s %s: wrote the padding", c->k->name, c->info->name, where);
                continue;
            }
            double mag = acc ? fabs(d.y0[t * kj.ldy + n]) : 0;
            for (size_t k = 0; k < K; k++) mag += fabs((double)d.wd[n * K + k] * d.xv[t * K + k]);
            expect_within(c, got, want[t * kj.ldy + n], 4.0 * mag * FLT_EPSILON * (double)(K + 2)
                          + 1e-30, where);
        }
    expect_guards(c, &g, N);
    guarded_free(&g);
    free(want);
    linear_free(&d);
}

static void check_linear(const sweep_case *c) {
    static const size_t Ns[] = {1, 4, 7, 16, 33}, Ts[] = {1, 2, 3, 6, 7, 13};
    static const size_t Ks[] = {32, 64, 96, 256};
    uint64_t seed = 17;
    for (size_t n = 0; n < sizeof Ns / sizeof *Ns; n++)
        for (size_t t = 0; t < sizeof Ts / sizeof *Ts; t++)
            check_linear_at(c, Ns[n], Ks[(n + t) % 4], Ts[t], (int)((n + t) & 1), &seed);
    /* K over several of the VNNI tiles' chunks of 32 blocks, 4 tokens left after 8 */
    check_linear_at(c, 9, 1088, 12, 1, &seed);
    check_linear_at(c, 8, 2080, 4, 0, &seed);
    ak_wtype w = wtype_of(c->info->elem);
    if (w != AK_WTYPE_Q8_0 && w != AK_WTYPE_Q4_0) /* float weights: K off the vector steps */
        check_linear_at(c, 6, 45, 9, 1, &seed);
}

/* Q8_0 activations: scales, block sums and values bit for bit */
static void check_quantize_x(const sweep_case *c) {
    uint64_t seed = 18;
    for (size_t K = 0; K <= 1024; K += 32) {
        float *x = xmalloc(K * 4), *wd = xmalloc(K / 32 * 4);
        int32_t *ws = xmalloc(K / 32 * 4);
        int8_t *wq = xmalloc(K);
        fill_random("F32", x, K, &seed, (float)(K + 1));
        if (K >= 64) x[5] = 0, x[40] = -x[41]; /* ties and zeros inside blocks */
        guarded_buf gd = out_alloc(K / 32 * 4, 4), gs = out_alloc(K / 32 * 4, 4),
                    gq = out_alloc(K, 1);
        KERNEL(c, c->ref, ak__kf_quantize_x)(x, K, wd, ws, wq);
        KERNEL(c, c->k, ak__kf_quantize_x)(x, K, gd.data, gs.data, gq.data);
        expect_same_bytes(c, gd.data, wd, K / 32 * 4, K, " scales");
        expect_same_bytes(c, gs.data, ws, K / 32 * 4, K, " block sums");
        expect_same_bytes(c, gq.data, wq, K, K, " values");
        expect_guards(c, &gd, K), expect_guards(c, &gs, K), expect_guards(c, &gq, K);
        guarded_free(&gd), guarded_free(&gs), guarded_free(&gq);
        free(x), free(wd), free(ws), free(wq);
    }
}

/* ---- fused optimizers ---------------------------------------------------------------- */

/* Step constants as train/optim derives them, with each option on or off per `opt`
 * (combinations it never makes, such as AdamW's decay with an L2 term, left out). */
static ak__optim_coef optim_coef(int opt) {
    ak__optim_coef c = {.grad_scale = opt & 1 ? 0.5f : 1.0f,
                        .weight_decay = opt & 2 ? 0.01f : 0.0f,
                        .neg_lr = -1e-3f,
                        .momentum = opt & 4 ? 0.9f : 0.0f,
                        .one_minus_dampening = 0.75f,
                        .nesterov = (opt & 12) == 12,
                        .first_step = (opt & 16) != 0,
                        .beta1 = 0.9f, .one_minus_beta1 = 0.1f,
                        .beta2 = 0.999f, .one_minus_beta2 = 0.001f,
                        .eps = 1e-8f,
                        .param_decay = opt & 8 ? 0.99999f : 1.0f,
                        .neg_step_size = -1e-3f / 0.271f,
                        .bc2_sqrt = 0.0624f,
                        .bc1 = 0.271f, .bc2 = 0.0039f};
    if (c.nesterov) c.one_minus_dampening = 1.0f;
    if (c.param_decay != 1.0f) c.weight_decay = 0.0f; /* AdamW: decoupled, no L2 term */
    return c;
}

/* One kernel call on buffers p, g, m, v of n (the optimizer's state as it runs). */
/* ---- super-block weight types against Q8_K (IQ4_NL: Q8_0) activations --------------- */

static ak_wtype kquant_wtype_of(const char *elem) {
    static const struct { const char *name; ak_wtype w; } types[] = {
        {"Q2_K", AK_WTYPE_Q2_K}, {"Q3_K", AK_WTYPE_Q3_K},     {"Q4_K", AK_WTYPE_Q4_K},
        {"Q5_K", AK_WTYPE_Q5_K}, {"Q6_K", AK_WTYPE_Q6_K},     {"Q8_K", AK_WTYPE_Q8_K},
        {"IQ4_NL", AK_WTYPE_IQ4_NL}, {"IQ4_XS", AK_WTYPE_IQ4_XS}};
    for (size_t i = 0; i < sizeof types / sizeof *types; i++)
        if (!strcmp(elem, types[i].name)) return types[i].w;
    fail_msg("kernels.def names super-block type %s, unknown to the sweep", elem);
    return AK_WTYPE_F32;
}

static void check_kquant_linear_at(const sweep_case *c, ak_wtype w, size_t N, size_t K,
                                   size_t T, int acc, uint64_t *seed) {
    int q8k = ak__kquant_uses_q8_k(w);
    size_t rb = 0, ldy = N + 2, ny = T * ldy, nbk = K / 256, nb0 = K / 32;
    assert_int_equal(ak_wtype_row_bytes(w, K, &rb), AK_OK);
    float *wf = xmalloc(N * K * 4), *wd = xmalloc(N * K * 4), *X = xmalloc(T * K * 4);
    float *xv = xmalloc(T * K * 4), *y0 = xmalloc(ny * 4), *want = xmalloc(ny * 4);
    uint8_t *W = xmalloc(N * rb);
    fill_random("F32", wf, N * K, seed, 1.0f);
    fill_random("F32", X, T * K, seed, 2.0f);
    fill_random("F32", y0, ny, seed, 4.0f);
    for (size_t n = 0; n < N; n++) {
        if (n == 1) /* one row all positive: the mins at work */
            for (size_t k = 0; k < K; k++) wf[n * K + k] = fabsf(wf[n * K + k]) + 0.5f;
        assert_int_equal(ak_quantize_row(w, wf + n * K, W + n * rb, K), AK_OK);
        assert_int_equal(ak_dequantize_row(w, W + n * rb, wd + n * K, K), AK_OK);
    }
    float *xd = xmalloc((T * nb0 + 1) * 4), *kd = xmalloc((T * nbk + 1) * 4);
    int32_t *xs = xmalloc((T * nb0 + 1) * 4);
    int16_t *kbs = xmalloc((T * K / 16 + 1) * 2);
    int8_t *xq = xmalloc(T * K);
    for (size_t t = 0; t < T; t++) {
        if (q8k) ak_f32_quantize_q8_k__ref(X + t * K, K, kd + t * nbk, kbs + t * K / 16, xq + t * K);
        else ak_f32_quantize_q8_0__ref(X + t * K, K, xd + t * nb0, xs + t * nb0, xq + t * K);
        for (size_t k = 0; k < K; k++)
            xv[t * K + k] = (q8k ? kd[t * nbk + k / 256] : xd[t * nb0 + k / 32]) * xq[t * K + k];
    }
    ak__linear_job job = {.W = W, .row_bytes = rb, .K = K, .T = T, .N = N, .X = X, .ldx = K,
                          .xd = xd, .xo = xs, .xq = xq, .ldq = K, .kd = kd, .kbs = kbs,
                          .ldy = ldy, .accumulate = acc};
    guarded_buf g = out_alloc(ny * 4, 4);
    memcpy(want, y0, ny * 4);
    memcpy(g.data, y0, ny * 4);
    ak__linear_job rj = job, kj = job;
    rj.Y = want, kj.Y = g.data;
    KERNEL(c, c->ref, ak__kf_linear)(&rj, 0, N);
    KERNEL(c, c->k, ak__kf_linear)(&kj, 0, N / 3);
    KERNEL(c, c->k, ak__kf_linear)(&kj, N / 3, N);
    for (size_t t = 0; t < T; t++)
        for (size_t n = 0; n < ldy; n++) {
            float got = ((float *)g.data)[t * ldy + n];
            char where[160];
            snprintf(where, sizeof where, "%s N=%zu K=%zu T=%zu acc=%d Y[%zu][%zu]",
                     ak_wtype_name(w), N, K, T, acc, t, n);
            if (n >= N) {
                if (memcmp(&got, &y0[t * ldy + n], 4) != 0)
                    fail_msg("%s %s %s: wrote the padding", c->k->name, c->info->name, where);
                continue;
            }
            double wmax = 0, mag = acc ? fabs(y0[t * ldy + n]) : 0;
            for (size_t k = 0; k < K; k++) wmax = fmax(wmax, fabs(wd[n * K + k]));
            for (size_t k = 0; k < K; k++)
                mag += (fabs(wd[n * K + k]) + 2 * wmax) * fabs(xv[t * K + k]);
            expect_within(c, got, want[t * ldy + n],
                          4.0 * mag * FLT_EPSILON * (double)(K + 2) + 1e-30, where);
        }
    expect_guards(c, &g, N);
    guarded_free(&g);
    free(wf), free(wd), free(X), free(xv), free(y0), free(want), free(W);
    free(xd), free(kd), free(xs), free(kbs), free(xq);
}

static void check_kquant_linear(const sweep_case *c) {
    ak_wtype w = kquant_wtype_of(c->info->elem);
    /* T: 1-3 (the per-token paths), then tiles of 4 tokens per vector with every count of
     * groups of 4 and partial groups (5, 7, 10, 13, 20 = 16 + 4); K up to 5 super-blocks
     * (more than one K chunk of the interleaved tiles) */
    static const size_t Ns[] = {1, 4, 7, 16, 33}, Ts[] = {1, 2, 3, 5, 7, 10, 13, 20};
    size_t unit = ak__kquant_uses_q8_k(w) ? 256 : 32;
    size_t Ks[] = {unit, 2 * unit, 3 * unit, 8 * 32, 5 * unit};
    uint64_t seed = 19;
    for (size_t n = 0; n < sizeof Ns / sizeof *Ns; n++)
        for (size_t t = 0; t < sizeof Ts / sizeof *Ts; t++)
            check_kquant_linear_at(c, w, Ns[n], Ks[(n + t) % 5], Ts[t], (int)((n + t) & 1), &seed);
}

/* Q8_K activations: scales, sums of 16 and values bit for bit, with zeros, ties, an
 * all-zero block and a block holding an infinity */
static void check_quantize_xk(const sweep_case *c) {
    uint64_t seed = 20;
    for (size_t K = 0; K <= 2048; K += 256) {
        size_t nb = K / 256;
        float *x = xmalloc(K * 4 + 4), *wd = xmalloc(nb * 4 + 4);
        int16_t *ws = xmalloc(nb * 32 + 2);
        int8_t *wq = xmalloc(K + 1);
        fill_random("F32", x, K, &seed, (float)(K + 1));
        if (K >= 768) {
            x[5] = 0, x[40] = -x[41];
            memset(x + 256, 0, 256 * 4);
            x[600] = (K == 768) ? INFINITY : -INFINITY;
            x[601] = -x[602] * 3; /* the largest magnitude appears with both signs */
            x[603] = -x[601];
        }
        guarded_buf gd = out_alloc(nb * 4, 4), gs = out_alloc(nb * 32, 2), gq = out_alloc(K, 1);
        KERNEL(c, c->ref, ak__kf_quantize_xk)(x, K, wd, ws, wq);
        KERNEL(c, c->k, ak__kf_quantize_xk)(x, K, gd.data, gs.data, gq.data);
        expect_same_bytes(c, gd.data, wd, nb * 4, K, " scales");
        expect_same_bytes(c, gs.data, ws, nb * 32, K, " sums of 16");
        expect_same_bytes(c, gq.data, wq, K, K, " values");
        expect_guards(c, &gd, K), expect_guards(c, &gs, K), expect_guards(c, &gq, K);
        guarded_free(&gd), guarded_free(&gs), guarded_free(&gq);
        free(x), free(wd), free(ws), free(wq);
    }
}

static void call_optim(const sweep_case *c, const ak__kernels *t, const ak__optim_coef *co,
                       float *p, const float *g, float *m, float *v, size_t n, double sums[2]) {
    const char *type = c->info->type;
    if (!strcmp(type, "ak__kf_optim_sgd"))
        KERNEL(c, t, ak__kf_optim_sgd)(co, p, g, co->momentum != 0.0f ? m : NULL, n);
    else if (!strcmp(type, "ak__kf_optim_adam"))
        KERNEL(c, t, ak__kf_optim_adam)(co, p, g, m, v, n);
    else if (!strcmp(type, "ak__kf_optim_lamb_moments"))
        KERNEL(c, t, ak__kf_optim_lamb_moments)(co, p, g, m, v, n, &sums[0], &sums[1]);
    else if (!strcmp(type, "ak__kf_optim_lamb_apply"))
        KERNEL(c, t, ak__kf_optim_lamb_apply)(co, p, m, v, n, -7e-4f);
    else
        fail_msg("optim checker: kernel %s has type %s it does not know", c->info->name, type);
}

static void check_optim(const sweep_case *c) {
    uint64_t seed = 19;
    for (int opt = 0; opt < 32; opt++) {
        ak__optim_coef co = optim_coef(opt);
        for (size_t l = 0; l < N_LENGTHS; l++) {
            size_t n = lengths[l], bytes = n * 4;
            float *g = xmalloc(bytes), *want = xmalloc(3 * bytes + 4);
            guarded_buf gb[3];
            for (int b = 0; b < 3; b++) { /* p, m, v; v (exp_avg_sq) stays positive */
                gb[b] = out_alloc(bytes, 4);
                fill_random("F32", gb[b].data, n, &seed, 1.0f);
                if (b == 2)
                    for (size_t i = 0; i < n; i++) {
                        float *vi = (float *)gb[2].data + i;
                        *vi *= *vi;
                    }
                memcpy(want + b * n, gb[b].data, bytes);
            }
            fill_random("F32", g, n, &seed, 1.0f);
            double ws[2] = {0, 0}, gs[2] = {0, 0};
            call_optim(c, c->ref, &co, want, g, want + n, want + 2 * n, n, ws);
            call_optim(c, c->k, &co, gb[0].data, g, gb[1].data, gb[2].data, n, gs);
            static const char *const what[3] = {" param", " m", " v"};
            for (int b = 0; b < 3; b++) {
                char how[48];
                snprintf(how, sizeof how, "%s (options %d)", what[b], opt);
                expect_same_bytes(c, gb[b].data, want + b * n, bytes, n, how);
                expect_guards(c, &gb[b], n);
                guarded_free(&gb[b]);
            }
            for (int s2 = 0; s2 < 2; s2++)
                expect_within(c, gs[s2], ws[s2], 1e-6 * fabs(ws[s2]) + 1e-30,
                              s2 ? "Σu²" : "Σp²");
            free(g), free(want);
        }
    }
}

#include "sweep_infer.h"
#include "sweep_int8.h"

/* ---- the checkers by the names kernels.def uses, and the sweep ----------------------- */

typedef struct checker {
    const char *name;
    void (*fn)(const sweep_case *c);
} checker;

static const checker checkers[] = {
    {"binary", check_binary},       {"reduce", check_reduce},
    {"scale", check_scale},         {"axpy", check_axpy},
    {"sum", check_sum},             {"narrow", check_narrow},
    {"widen", check_widen},         {"dot_rows", check_dot_rows},
    {"madd_rows", check_madd_rows}, {"sgemm", check_sgemm},
    {"linear", check_linear},       {"quantize_x", check_quantize_x},
    {"kquant_linear", check_kquant_linear}, {"quantize_xk", check_quantize_xk},
    {"optim", check_optim},         {"softmax", check_softmax},
    {"swiglu", check_swiglu},       {"rope", check_rope},
    {"softcap", check_softcap},     {"gelu", check_gelu},
    {"layernorm", check_layernorm}, {"moe_route", check_moe_route},
    {"rmsnorm", check_rmsnorm},     {"read_sum", check_read_sum},
    {"q8_dot_rows", check_q8_dot_rows}, {"q8_dot_rows_q8", check_q8_dot_rows_q8},
    {"q8_madd_rows", check_q8_madd_rows},

    SWEEP_INFER_CHECKERS
    SWEEP_INT8_CHECKERS
};

static const checker *checker_for(const char *name) {
    for (size_t i = 0; i < sizeof checkers / sizeof *checkers; i++)
        if (!strcmp(checkers[i].name, name)) return &checkers[i];
    return NULL;
}

/* Every kernel of the list names a checker the sweep has. */
static void test_every_kernel_has_a_checker(void **state) {
    (void)state;
    for (size_t i = 0; i < AK__KERNEL_COUNT_; i++)
        if (!checker_for(ak__kernel_list[i].check))
            fail_msg("kernels.def: kernel %s names checker '%s', which test_sweep.c lacks",
                     ak__kernel_list[i].name, ak__kernel_list[i].check);
}

/* Every table is complete (inheritance leaves no NULL) and names what it runs. */
static void test_tables_complete(void **state) {
    (void)state;
    for (size_t v = 0; v < AK__KERNEL_VARIANTS; v++) {
        const ak__kernels *k = ak__kernels_for(ak__kernel_variants[v]);
        if (!k) continue;
        for (size_t i = 0; i < AK__KERNEL_COUNT_; i++) {
            if (!ak__kernel_get(k, i) || !k->impl[i])
                fail_msg("%s table: kernel %s is NULL", k->name, ak__kernel_list[i].name);
        }
    }
    const ak__kernels *ref = ak__kernels_for("ref");
    assert_non_null(ref);
    for (size_t i = 0; i < AK__KERNEL_COUNT_; i++)
        assert_string_equal(ref->impl[i], ak__kernel_list[i].ref);
}

static void test_sweep(void **state) {
    (void)state;
    const ak__kernels *ref = ak__kernels_for("ref");
    assert_non_null(ref);
    for (size_t i = 0; i < AK__KERNEL_COUNT_; i++) {
        const checker *chk = checker_for(ak__kernel_list[i].check);
        if (!chk) fail_msg("kernel %s: no checker", ak__kernel_list[i].name);
        /* ref against itself too: checks the checker and the reference's own guards */
        for (size_t v = 0; v < AK__KERNEL_VARIANTS; v++) {
            const ak__kernels *k = ak__kernels_for(ak__kernel_variants[v]);
            if (!k) continue; /* the CPU cannot run it */
            sweep_case c = {&ak__kernel_list[i], i, k, ref};
            chk->fn(&c);
        }
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_kernel_has_a_checker),
        cmocka_unit_test(test_tables_complete),
        cmocka_unit_test(test_sweep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
