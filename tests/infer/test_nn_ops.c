/* Tests of the nn family beyond the ONNX node tests: the float32 fast paths of Conv
 * (pointwise GEMM, depthwise direct loop, im2col in thread tiles and in whole chunks),
 * FusedConv (Z + Relu/Clip epilogue on every path), ConvTranspose with groups, and the 2-D
 * pools, each checked against the same operator
 * on float64 data (which takes the reference loops) over shapes with tails, pads,
 * strides, dilations, groups and batches, with 1 and 2 threads; batched MatMul
 * broadcasting; rejection of bad attributes.
 *
 * With AK_NN_BENCH=1 it also times Conv on ResNet-50 / MobileNetV2 layer shapes with 1
 * and 2 threads and prints GFLOP/s per shape. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/init.h"
#include "infer/ops/nn/common.h"
#include "infer/ops/nn/conv/conv.h"
#include "infer/ops/nn/conv/igemm.h"
#include "infer/runtime/op.h"
#include "kernels/dispatch.h"

/* ---- running one operator ---------------------------------------------------------- */

#include "op_harness.h"

/* FusedConv lives in com.microsoft, NchwcConv in com.accelkit; the rest run at opset 17. */
static ak_status call_op(op_call *c, const char *op_type, uint32_t nout, ak_threadpool *pool) {
    const char *domain = strcmp(op_type, "FusedConv") == 0   ? "com.microsoft"
                         : strncmp(op_type, "Nchwc", 5) == 0 ? "com.accelkit"
                                                             : "";
    return op_call_run(c, domain, op_type, domain[0] ? 1 : 17, nout, pool);
}

static void call_free(op_call *c) {
    op_call_free(c);
    memset(c, 0, sizeof *c);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static float frand(void) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng_state >> 40) & 0xffff) / 32768.0f - 1.0f;
}

static float *rand_f32(uint64_t n) {
    float *p = malloc((n ? n : 1) * sizeof *p);
    assert_non_null(p);
    for (uint64_t i = 0; i < n; i++) p[i] = frand();
    return p;
}

static double *to_f64(const float *x, uint64_t n) {
    double *p = malloc((n ? n : 1) * sizeof *p);
    assert_non_null(p);
    for (uint64_t i = 0; i < n; i++) p[i] = x[i];
    return p;
}

static uint64_t prod(const int64_t *d, int n) {
    uint64_t p = 1;
    for (int i = 0; i < n; i++) p *= (uint64_t)d[i];
    return p;
}

static ak_threadpool *pools[2];

/* AK_NN_BENCH=1 runs the benchmark alone. */
static int bench_mode(void) {
    const char *env = getenv("AK_NN_BENCH");
    return env && strcmp(env, "1") == 0;
}
#define SKIP_IN_BENCH()                                                                   \
    do {                                                                                 \
        if (bench_mode()) skip();                                                        \
    } while (0)

static int setup(void **s) {
    (void)s;
    if (ak_threadpool_create(1, &pools[0]) != AK_OK) return -1;
    if (ak_threadpool_create(2, &pools[1]) != AK_OK) return -1;
    return 0;
}

static int teardown(void **s) {
    (void)s;
    ak_threadpool_free(pools[0]);
    ak_threadpool_free(pools[1]);
    return 0;
}

/* ---- Conv / ConvTranspose: float32 fast paths against the float64 reference ---------- */

typedef struct conv_case {
    int nsp;
    int64_t N, C, M, group;
    int64_t in[3], k[3], s[3], d[3], pads[6];
    int bias;
    const char *auto_pad;
} conv_case;

static void set_conv_attrs(op_call *c, const conv_case *cc) {
    attr_int(c, "group", cc->group);
    attr_ints(c, "strides", cc->s, (size_t)cc->nsp);
    attr_ints(c, "dilations", cc->d, (size_t)cc->nsp);
    if (cc->auto_pad) {
        ak__ir_attr *a = &c->attrs[c->nattr++];
        a->name = "auto_pad";
        a->type = AK_ATTR_STRING;
        a->u.s.data = cc->auto_pad;
        a->u.s.len = strlen(cc->auto_pad);
    } else {
        attr_ints(c, "pads", cc->pads, 2 * (size_t)cc->nsp);
    }
}

/* FusedConv variants: 1 = Z + Relu, 2 = Clip(-0.5, 0.5) without Z, 3 = Sigmoid (no
 * kernel applies it in registers). */
static void set_fused_attrs(op_call *c, int fused) {
    static const float clip[2] = {-0.5f, 0.5f};
    ak__ir_attr *a = &c->attrs[c->nattr++];
    a->name = "activation";
    a->type = AK_ATTR_STRING;
    a->u.s.data = fused == 1 ? "Relu" : fused == 2 ? "Clip" : "Sigmoid";
    a->u.s.len = strlen(a->u.s.data);
    if (fused == 2) {
        a = &c->attrs[c->nattr++];
        a->name = "activation_params";
        a->type = AK_ATTR_FLOATS;
        a->count = 2;
        a->u.floats = clip;
    }
}

/* 1: W is passed to create as a constant, as a session does for initializers (Conv then
 * takes its implicit-GEMM path over weights packed there); 0: W is plain data. */
static int const_weights;

/* >= 0: the float32 side runs as NchwcConv with X blocked when bit 0 is set, Y when bit 1
 * is, Z when both are (reordered here, by the definition of the layout); -1: as op. */
static int nchwc_layout = -1;

/* (N, C, P) <-> (N, C/8, P, 8), C a multiple of 8; a fresh copy. */
static float *nchwc_reorder(const float *x, int64_t N, int64_t C, uint64_t P, int to_blocked) {
    uint64_t n = (uint64_t)(N * C) * P;
    float *y = malloc((n ? n : 1) * sizeof *y);
    assert_non_null(y);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t c = i / P % (uint64_t)C, img = i / P / (uint64_t)C, p = i % P;
        uint64_t b = ((img * (uint64_t)(C / 8) + c / 8) * P + p) * 8 + c % 8;
        if (to_blocked) y[b] = x[i];
        else y[i] = x[b];
    }
    return y;
}

/* Runs op (Conv, ConvTranspose or FusedConv variant `fused`) in float32 on `pool` and in
 * float64; compares. */
static void check_conv_fused(const char *op, const conv_case *cc, ak_threadpool *pool,
                             int fused) {
    int transpose = strcmp(op, "ConvTranspose") == 0;
    int64_t xd[5] = {cc->N, cc->C}, wd[5], bd[1] = {cc->M};
    if (transpose) {
        wd[0] = cc->C;
        wd[1] = cc->M / cc->group;
    } else {
        wd[0] = cc->M;
        wd[1] = cc->C / cc->group;
    }
    for (int i = 0; i < cc->nsp; i++) {
        xd[2 + i] = cc->in[i];
        wd[2 + i] = cc->k[i];
    }
    int rank = cc->nsp + 2;
    uint64_t nx = prod(xd, rank), nw = prod(wd, rank);
    float *x = rand_f32(nx), *w = rand_f32(nw), *b = rand_f32((uint64_t)cc->M);
    double *x64 = to_f64(x, nx), *w64 = to_f64(w, nw), *b64 = to_f64(b, (uint64_t)cc->M);
    op_call f, r;
    memset(&f, 0, sizeof f);
    memset(&r, 0, sizeof r);
    add_in(&f, AK_ELEM_F32, rank, xd, x);
    add_in(&f, AK_ELEM_F32, rank, wd, w);
    if (cc->bias) add_in(&f, AK_ELEM_F32, 1, bd, b);
    add_in(&r, AK_ELEM_F64, rank, xd, x64);
    add_in(&r, AK_ELEM_F64, rank, wd, w64);
    if (cc->bias) add_in(&r, AK_ELEM_F64, 1, bd, b64);
    set_conv_attrs(&f, cc);
    set_conv_attrs(&r, cc);
    float *z = NULL;
    double *z64 = NULL;
    if (fused) {
        set_fused_attrs(&f, fused);
        set_fused_attrs(&r, fused);
    }
    if (fused == 1) { /* Z shaped like Y: ask the plain Conv for Y's shape first */
        op_call shape;
        memset(&shape, 0, sizeof shape);
        add_in(&shape, AK_ELEM_F32, rank, xd, x);
        add_in(&shape, AK_ELEM_F32, rank, wd, w);
        set_conv_attrs(&shape, cc);
        assert_int_equal(call_op(&shape, "Conv", 1, pool), AK_OK);
        uint64_t nz = shape.out[0].count;
        int64_t zd[5];
        memcpy(zd, shape.out[0].dims, sizeof zd);
        call_free(&shape);
        z = rand_f32(nz);
        z64 = to_f64(z, nz);
        if (!cc->bias) { /* Z is input 3: B must be there */
            add_in(&f, AK_ELEM_F32, 1, bd, b);
            add_in(&r, AK_ELEM_F64, 1, bd, b64);
        }
        add_in(&f, AK_ELEM_F32, rank, zd, z);
        add_in(&r, AK_ELEM_F64, rank, zd, z64);
    }
    if (const_weights) f.const_mask = 2u; /* Conv's create packs W: the implicit GEMM */
    float *xb = NULL, *zb = NULL, *yb = NULL;
    const char *fop = op;
    if (nchwc_layout >= 0) {
        fop = "NchwcConv";
        f.const_mask = 2u;
        attr_int(&f, "x_blocked", nchwc_layout & 1);
        attr_int(&f, "y_blocked", nchwc_layout >> 1);
        attr_int(&f, "z_blocked", nchwc_layout == 3);
        uint64_t P = prod(xd + 2, cc->nsp);
        if (nchwc_layout & 1) f.in[0].data = xb = nchwc_reorder(x, cc->N, cc->C, P, 1);
        if (nchwc_layout == 3 && z)
            f.in[3].data = zb = nchwc_reorder(z, cc->N, cc->M, f.in[3].count / (uint64_t)(cc->N * cc->M), 1);
    }
    assert_int_equal(call_op(&f, fop, 1, pool), AK_OK);
    assert_int_equal(call_op(&r, op, 1, pool), AK_OK);
    assert_int_equal(f.out[0].count, r.out[0].count);
    assert_true(f.out[0].count > 0);
    const float *yf = f.out[0].data;
    if (nchwc_layout >= 2)
        yf = yb = nchwc_reorder(yf, cc->N, cc->M, f.out[0].count / (uint64_t)(cc->N * cc->M), 0);
    const double *yr = r.out[0].data;
    double worst = 0.0;
    for (uint64_t i = 0; i < f.out[0].count; i++) {
        double err = fabs(yf[i] - yr[i]) / (1.0 + fabs(yr[i]));
        if (err > worst) worst = err;
    }
    /* Winograd's transforms (entries up to 8 in F(4x4,3x3)) scale rounding error up: over
     * 64 channels it reaches ~1e-4 where the direct sum stays under 1e-5 */
    double tolerance = ak__nn_conv_force_mode == 4 ? 3e-4 : 1e-4;
    if (worst > tolerance)
        fail_msg("%s (C %lld, M %lld, force %d, orientation %d, nchwc %d): worst relative "
                 "error %g", fop, (long long)cc->C, (long long)cc->M, ak__nn_conv_force_mode,
                 ak__conv_igemm_orientation, nchwc_layout, worst);
    call_free(&f);
    call_free(&r);
    free(x), free(w), free(b), free(x64), free(w64), free(b64), free(z), free(z64);
    free(xb), free(zb), free(yb);
}

static void check_conv(const char *op, const conv_case *cc, ak_threadpool *pool) {
    check_conv_fused(op, cc, pool, 0);
}

static const conv_case conv_cases[] = {
    /* pointwise (1x1, stride 1): direct GEMM, batch 2, groups */
    {2, 2, 16, 24, 1, {7, 9}, {1, 1}, {1, 1}, {1, 1}, {0}, 1, NULL},
    {2, 1, 8, 6, 2, {5, 11}, {1, 1}, {1, 1}, {1, 1}, {0}, 0, NULL},
    /* depthwise 3x3, strides 1 and 2, pads, dilation, widths with vector tails */
    {2, 2, 6, 6, 6, {13, 37}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, 1, NULL},
    {2, 1, 5, 5, 5, {12, 41}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, 1, NULL},
    {2, 1, 3, 3, 3, {17, 70}, {3, 3}, {1, 2}, {2, 2}, {2, 0, 1, 3}, 0, NULL},
    {2, 1, 4, 4, 4, {9, 9}, {5, 5}, {2, 1}, {1, 1}, {0}, 1, "SAME_UPPER"},
    /* depthwise, 8 channels at once on short rows: channel tails (20 = 8+8+4, 9), two
     * images, stride 2, dilation, a 5x5 kernel, asymmetric pads, the widest such row */
    {2, 2, 20, 20, 20, {14, 14}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, 1, NULL},
    {2, 1, 16, 16, 16, {13, 27}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, 1, NULL},
    {2, 2, 9, 9, 9, {9, 7}, {5, 5}, {1, 2}, {2, 1}, {2, 0, 1, 3}, 0, NULL},
    {2, 1, 24, 24, 24, {28, 28}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, 1, NULL},
    {2, 1, 16, 16, 16, {21, 66}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, 1, NULL}, /* 33 wide */
    /* depthwise with a multiplier: general path with groups */
    {2, 1, 3, 6, 3, {8, 10}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, 1, NULL},
    /* general: 3x3 pad 1 over enough columns for many tiles; stem-like 7x7 stride 2 */
    {2, 1, 5, 7, 1, {40, 50}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, 1, NULL},
    {2, 2, 16, 8, 1, {60, 70}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, 1, NULL}, /* 5-6 tiles */
    {3, 1, 8, 4, 1, {10, 12, 40}, {3, 3, 3}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}, 1, NULL},
    {2, 1, 3, 8, 1, {37, 41}, {7, 7}, {2, 2}, {1, 1}, {3, 3, 3, 3}, 1, NULL},
    {2, 2, 6, 4, 2, {11, 13}, {3, 2}, {2, 3}, {2, 1}, {0, 1, 2, 0}, 1, NULL},
    {2, 1, 4, 5, 1, {20, 20}, {1, 1}, {2, 2}, {1, 1}, {0}, 1, NULL}, /* 1x1 stride 2 */
    {2, 1, 3, 4, 1, {9, 8}, {3, 3}, {1, 1}, {1, 1}, {0}, 0, "SAME_LOWER"},
    /* implicit GEMM: deep K in uneven slices, channel chunks sharing packed columns,
     * slivers spanning several output rows (7- and 5-wide planes), groups with strides,
     * 1×1 with many channels over a plane that is not a multiple of 16 */
    {2, 1, 64, 200, 1, {9, 7}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, 1, NULL},
    {2, 2, 32, 50, 2, {20, 23}, {3, 3}, {2, 2}, {1, 1}, {1, 0, 1, 2}, 1, NULL},
    {2, 1, 300, 130, 1, {5, 6}, {1, 1}, {1, 1}, {1, 1}, {0}, 1, NULL},
    {2, 1, 24, 70, 1, {5, 5}, {3, 3}, {1, 1}, {2, 2}, {2, 2, 2, 2}, 0, NULL},
    /* a stem: 3 channels, stride 2, rows of 70 outputs read unpadded (vector gathers of
     * the even lanes inside, bounds tests at the borders) */
    {2, 1, 3, 8, 1, {9, 140}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, 1, NULL},
    /* small planes, where the transposed orientation is chosen: 1×1 on 7×7 with 37
     * output channels (2 full NR slivers and 5), 3×3 over two depth slices with a last
     * 1-row position tile (P = 49), two groups of 16 output channels over 8×8 */
    {2, 2, 96, 37, 1, {7, 7}, {1, 1}, {1, 1}, {1, 1}, {0}, 1, NULL},
    {2, 1, 40, 45, 1, {7, 7}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, 1, NULL},
    {2, 1, 32, 32, 2, {9, 9}, {3, 3}, {1, 1}, {1, 1}, {0, 0, 1, 1}, 0, NULL},
    /* Winograd F(4x4,3x3) (3x3, stride 1, chosen with constant W from 16 tiles on):
     * groups of 8 tiles spanning tile rows (4 and 7 tiles wide), partial edge tiles,
     * asymmetric and no padding, fewer output channels than a microkernel tile, two
     * depth slices (300 channels), a 1x1 plane, two images */
    {2, 2, 12, 20, 1, {14, 14}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, 1, NULL},
    {2, 1, 7, 5, 1, {23, 27}, {3, 3}, {1, 1}, {1, 1}, {0, 1, 2, 0}, 1, NULL},
    {2, 1, 300, 8, 1, {10, 5}, {3, 3}, {1, 1}, {1, 1}, {0}, 0, NULL},
    {2, 1, 3, 17, 1, {1, 1}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, 1, NULL},
    {2, 2, 9, 6, 1, {61, 30}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, 1, NULL},
    /* 1-D and 3-D */
    {1, 2, 4, 6, 2, {50}, {5}, {2}, {3}, {2, 1}, 1, NULL},
    {3, 1, 3, 4, 1, {5, 6, 7}, {3, 2, 3}, {1, 2, 1}, {1, 1, 2}, {1, 0, 1, 1, 1, 1}, 1, NULL},
};

/* The paths the conv cases run through: chosen, forced tiles, forced whole (W an
 * input); forced implicit GEMM in either orientation and chosen (W constant, as in a
 * model); Winograd forced wherever it applies. */
static const struct conv_setting {
    int force_mode, const_weights, orientation;
} conv_settings[] = {
    {0, 0, 0}, {1, 0, 0}, {2, 0, 0}, {3, 1, 1}, {3, 1, 2}, {0, 1, 0}, {4, 1, 0},
};

static void conv_setting_apply(const struct conv_setting *cs) {
    ak__nn_conv_force_mode = cs->force_mode;
    const_weights = cs->const_weights;
    ak__conv_igemm_orientation = cs->orientation;
}

static void test_conv_paths(void **s) {
    (void)s;
    SKIP_IN_BENCH();
    static const struct conv_setting chosen = {0, 0, 0};
    for (size_t m = 0; m < sizeof conv_settings / sizeof *conv_settings; m++) {
        conv_setting_apply(&conv_settings[m]);
        for (int p = 0; p < 2; p++)
            for (size_t i = 0; i < sizeof conv_cases / sizeof *conv_cases; i++)
                check_conv("Conv", &conv_cases[i], pools[p]);
    }
    conv_setting_apply(&chosen);
}

static void test_fused_conv(void **s) {
    (void)s;
    SKIP_IN_BENCH();
    static const struct conv_setting chosen = {0, 0, 0};
    for (size_t m = 0; m < sizeof conv_settings / sizeof *conv_settings; m++) {
        conv_setting_apply(&conv_settings[m]);
        for (int fused = 1; fused <= 2; fused++)
            for (size_t i = 0; i < sizeof conv_cases / sizeof *conv_cases; i++)
                check_conv_fused("FusedConv", &conv_cases[i], pools[1], fused);
    }
    conv_setting_apply(&chosen);
}

/* Layers NchwcConv runs: channels in multiples of 8. */
static const conv_case nchwc_cases[] = {
    /* 1×1: 3 output blocks (a pair and a single), 63 positions (10 tiles and 3), batch 2;
     * no bias; 400 positions over several chunks */
    {2, 2, 16, 24, 1, {7, 9}, {1, 1}, {1, 1}, {1, 1}, {0}, 1, NULL},
    {2, 1, 32, 16, 1, {13, 11}, {1, 1}, {1, 1}, {1, 1}, {0}, 0, NULL},
    {2, 1, 64, 40, 1, {20, 20}, {1, 1}, {1, 1}, {1, 1}, {0}, 1, NULL},
    /* depthwise: 3×3 stride 1 and 2, a 5×5 dilated window with asymmetric pads, a 7×7
     * plane (two border columns of five), a plane narrower than the window */
    {2, 2, 16, 16, 16, {13, 37}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, 1, NULL},
    {2, 1, 24, 24, 24, {14, 15}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, 1, NULL},
    {2, 1, 8, 8, 8, {11, 12}, {5, 5}, {1, 2}, {2, 1}, {2, 0, 1, 3}, 0, NULL},
    {2, 1, 32, 32, 32, {7, 7}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, 1, NULL},
    {2, 1, 8, 8, 8, {2, 3}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, 1, NULL},
    /* stems (fewer than 8 input channels, X plain): 3×3 stride 2 over rows with 6-wide
     * tiles and border columns, a 7×7 window into a pair and a single block, one input
     * channel with dilation and asymmetric pads */
    {2, 2, 3, 16, 1, {30, 29}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, 1, NULL},
    {2, 1, 3, 24, 1, {20, 41}, {7, 7}, {2, 2}, {1, 1}, {3, 3, 3, 3}, 0, NULL},
    {2, 1, 1, 8, 1, {9, 16}, {3, 3}, {1, 1}, {2, 2}, {2, 0, 1, 3}, 1, NULL},
    /* one group over a blocked X: rows of more than 14 outputs over a padded copy (a
     * stride-2 3×3, a dilated 3×3), and gathered into a 1×1 over C·taps channels: ResNet's
     * stride-2 3×3 with 14-wide rows and its 3×3 on 7×7 planes, a strided 1×1, a dilated
     * window with asymmetric pads and a single last block, a padded 1×1 */
    {2, 1, 16, 24, 1, {9, 40}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, 1, NULL},
    {2, 2, 8, 16, 1, {6, 33}, {3, 3}, {1, 1}, {2, 2}, {2, 2, 2, 2}, 0, NULL},
    {2, 2, 16, 32, 1, {15, 28}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, 1, NULL},
    {2, 1, 32, 16, 1, {7, 7}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, 0, NULL},
    {2, 1, 24, 32, 1, {14, 13}, {1, 1}, {2, 2}, {1, 1}, {0}, 1, NULL},
    {2, 1, 8, 24, 1, {11, 12}, {3, 2}, {1, 2}, {2, 1}, {2, 0, 1, 3}, 1, NULL},
    {2, 1, 16, 8, 1, {5, 6}, {1, 1}, {1, 1}, {1, 1}, {1, 0, 0, 1}, 1, NULL},
    /* 3×3 stride 1 on planes of 16 tiles and more: Winograd between blocked sides (a
     * 19-wide row: 8-position transposes and a tail) */
    {2, 2, 16, 24, 1, {17, 19}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, 1, NULL},
};

/* Re-selects the kernel table the operators run: the scalar references (AK_KERNELS=ref),
 * the AVX2 variants (AK_ISA=avx2, on an AVX-512 CPU), or the default (both NULL). Returns
 * 0 when the CPU cannot run what is asked. */
static int use_kernels(const char *kernels, const char *isa) {
    if (isa && !ak__kernels_for(isa)) return 0;
    if (kernels) setenv("AK_KERNELS", kernels, 1);
    else unsetenv("AK_KERNELS");
    if (isa) setenv("AK_ISA", isa, 1);
    else unsetenv("AK_ISA");
    assert_int_equal(ak__init_reset(), AK_OK);
    return 1;
}

/* NchwcConv against the float64 Conv: every mix of plain and blocked sides, plain and
 * fused (Z + Relu, Clip, Sigmoid), the best tiles (AVX-512 where the CPU has it), the AVX2
 * and the scalar loops, short rows gathered or over the padded copy, 1 and 2 threads. */
static void test_nchwc_conv(void **s) {
    (void)s;
    SKIP_IN_BENCH();
    uint64_t gather_max = ak__nchwc_gather_max_bytes;
    for (int mode = 0; mode < 4; mode++) { /* best, scalar, best never gathering, AVX2 */
        if (!use_kernels(mode == 1 ? "ref" : NULL, mode == 3 ? "avx2" : NULL)) continue;
        ak__nchwc_gather_max_bytes = mode == 2 ? 0 : gather_max;
        for (nchwc_layout = 0; nchwc_layout < 4; nchwc_layout++)
            for (int fused = 0; fused <= 3; fused++)
                for (size_t i = 0; i < sizeof nchwc_cases / sizeof *nchwc_cases; i++)
                    if (nchwc_cases[i].C % 8 == 0 || !(nchwc_layout & 1)) /* stems: X plain */
                        check_conv_fused(fused ? "FusedConv" : "Conv", &nchwc_cases[i],
                                         pools[(i + (size_t)fused) % 2], fused);
    }
    use_kernels(NULL, NULL);
    ak__nchwc_gather_max_bytes = gather_max;
    nchwc_layout = -1;
}

static void test_conv_transpose_paths(void **s) {
    (void)s;
    SKIP_IN_BENCH();
    static const conv_case cases[] = {
        {2, 2, 4, 6, 2, {5, 7}, {3, 3}, {2, 2}, {1, 1}, {1, 0, 0, 1}, 1, NULL},
        {2, 1, 3, 2, 1, {4, 4}, {3, 2}, {1, 3}, {2, 1}, {0}, 0, NULL},
        {1, 1, 2, 3, 1, {9}, {4}, {3}, {1}, {1, 2}, 1, NULL},
        {3, 1, 2, 2, 2, {3, 4, 2}, {2, 2, 3}, {2, 1, 2}, {1, 1, 1}, {0}, 1, NULL},
    };
    for (int p = 0; p < 2; p++)
        for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
            check_conv("ConvTranspose", &cases[i], pools[p]);
}

/* ---- pools: the float32 2-D loop against the generic walk on float64 ------------------ */

/* NchwcMaxPool on the blocked copy of x, its AVX2 and scalar loops, writing Y plain and
 * blocked, against MaxPool's y (exact: a max rounds nothing). */
static void check_nchwc_maxpool(const op_call *plain, const float *x, const int64_t *xd) {
    uint64_t P = (uint64_t)(xd[2] * xd[3]);
    float *xb = nchwc_reorder(x, xd[0], xd[1], P, 1);
    for (int variant = 0; variant < 4; variant++) {
        int scalar = variant & 1, y_blocked = variant >> 1;
        use_kernels(scalar ? "ref" : NULL, NULL);
        op_call b;
        memset(&b, 0, sizeof b);
        add_in(&b, AK_ELEM_F32, 4, xd, xb);
        memcpy(b.attrs, plain->attrs, sizeof b.attrs);
        b.nattr = plain->nattr;
        attr_int(&b, "y_blocked", y_blocked);
        assert_int_equal(call_op(&b, "NchwcMaxPool", 1, pools[scalar]), AK_OK);
        assert_int_equal(b.out[0].count, plain->out[0].count);
        float *y = b.out[0].data, *yp = NULL;
        if (y_blocked)
            y = yp = nchwc_reorder(y, xd[0], xd[1], b.out[0].count / (uint64_t)(xd[0] * xd[1]), 0);
        if (memcmp(y, plain->out[0].data, b.out[0].count * sizeof(float)) != 0)
            fail_msg("NchwcMaxPool (scalar %d, y_blocked %d) differs from MaxPool", scalar, y_blocked);
        free(yp);
        call_free(&b);
    }
    use_kernels(NULL, NULL);
    free(xb);
}

static void check_pool(const char *op, const int64_t *k, const int64_t *st, const int64_t *pads,
                       const int64_t *dil, int ceil_mode, int include_pad) {
    int64_t xd[4] = {2, 16, 11, 14}; /* 16 channels: NchwcMaxPool's two blocks */
    uint64_t n = prod(xd, 4);
    float *x = rand_f32(n);
    double *x64 = to_f64(x, n);
    op_call f, r;
    memset(&f, 0, sizeof f);
    memset(&r, 0, sizeof r);
    add_in(&f, AK_ELEM_F32, 4, xd, x);
    add_in(&r, AK_ELEM_F64, 4, xd, x64);
    op_call *both[2] = {&f, &r};
    for (int i = 0; i < 2; i++) {
        attr_ints(both[i], "kernel_shape", k, 2);
        attr_ints(both[i], "strides", st, 2);
        attr_ints(both[i], "pads", pads, 4);
        attr_int(both[i], "ceil_mode", ceil_mode);
        if (dil) attr_ints(both[i], "dilations", dil, 2);
        attr_int(both[i], "count_include_pad", include_pad);
    }
    assert_int_equal(call_op(&f, op, 1, pools[1]), AK_OK);
    assert_int_equal(call_op(&r, op, 1, pools[1]), AK_OK);
    assert_int_equal(f.out[0].count, r.out[0].count);
    const float *yf = f.out[0].data;
    const double *yr = r.out[0].data;
    for (uint64_t i = 0; i < f.out[0].count; i++)
        if (fabs(yf[i] - yr[i]) > 1e-5) fail_msg("%s: %llu: %g vs %g", op, (unsigned long long)i, yf[i], yr[i]);
    if (strcmp(op, "MaxPool") == 0) check_nchwc_maxpool(&f, x, xd);
    call_free(&f);
    call_free(&r);
    free(x);
    free(x64);
}

static void test_pool_paths(void **s) {
    (void)s;
    SKIP_IN_BENCH();
    static const int64_t k3[2] = {3, 3}, k23[2] = {2, 3}, s1[2] = {1, 1}, s2[2] = {2, 2},
                         s32[2] = {3, 2}, p0[4] = {0}, p1[4] = {1, 1, 1, 1},
                         pa[4] = {0, 1, 2, 1}, d2[2] = {2, 1};
    const char *ops[2] = {"MaxPool", "AveragePool"};
    for (int o = 0; o < 2; o++)
        for (int inc = 0; inc < 2; inc++)
            for (int ceil = 0; ceil < 2; ceil++) {
                check_pool(ops[o], k3, s2, p1, NULL, ceil, inc);
                check_pool(ops[o], k23, s32, pa, NULL, ceil, inc);
                check_pool(ops[o], k3, s1, p0, NULL, ceil, inc);
                if (o == 0) check_pool(ops[o], k3, s2, pa, d2, ceil, inc);
            }
}

/* ---- MatMul broadcasting --------------------------------------------------------------- */

static void test_matmul_broadcast(void **s) {
    (void)s;
    SKIP_IN_BENCH();
    /* A (2,1,3,4) x B (3,4,5) -> (2,3,3,5); A (4) x B (2,4,3) -> (2,3) */
    int64_t ad[4] = {2, 1, 3, 4}, bd[3] = {3, 4, 5};
    float *a = rand_f32(24), *b = rand_f32(60);
    for (int p = 0; p < 2; p++) {
        op_call c;
        memset(&c, 0, sizeof c);
        add_in(&c, AK_ELEM_F32, 4, ad, a);
        add_in(&c, AK_ELEM_F32, 3, bd, b);
        assert_int_equal(call_op(&c, "MatMul", 1, pools[p]), AK_OK);
        assert_int_equal(c.out[0].rank, 4);
        assert_int_equal(c.out[0].count, 2 * 3 * 3 * 5);
        const float *y = c.out[0].data;
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 3; j++)
                for (int m = 0; m < 3; m++)
                    for (int n = 0; n < 5; n++) {
                        double acc = 0;
                        for (int k = 0; k < 4; k++)
                            acc += a[i * 12 + m * 4 + k] * b[j * 20 + k * 5 + n];
                        assert_true(fabs(y[((i * 3 + j) * 3 + m) * 5 + n] - acc) < 1e-5);
                    }
        call_free(&c);
    }
    int64_t vd[1] = {4}, b2d[3] = {2, 4, 3};
    op_call c;
    memset(&c, 0, sizeof c);
    add_in(&c, AK_ELEM_F32, 1, vd, a);
    add_in(&c, AK_ELEM_F32, 3, b2d, b);
    assert_int_equal(call_op(&c, "MatMul", 1, pools[1]), AK_OK);
    assert_int_equal(c.out[0].rank, 2);
    assert_int_equal(c.out[0].dims[0], 2);
    assert_int_equal(c.out[0].dims[1], 3);
    const float *y = c.out[0].data;
    for (int i = 0; i < 2; i++)
        for (int n = 0; n < 3; n++) {
            double acc = 0;
            for (int k = 0; k < 4; k++) acc += a[k] * b[i * 12 + k * 3 + n];
            assert_true(fabs(y[i * 3 + n] - acc) < 1e-5);
        }
    call_free(&c);
    free(a);
    free(b);
}

/* ---- rejection ------------------------------------------------------------------------- */

static void test_bad_attributes(void **s) {
    (void)s;
    SKIP_IN_BENCH();
    int64_t xd[4] = {1, 4, 5, 5}, wd[4] = {2, 3, 3, 3};
    float *x = rand_f32(100), *w = rand_f32(54);
    op_call c;
    memset(&c, 0, sizeof c);
    add_in(&c, AK_ELEM_F32, 4, xd, x);
    add_in(&c, AK_ELEM_F32, 4, wd, w);
    assert_int_equal(call_op(&c, "Conv", 1, pools[0]), AK_ERR_INVALID_MODEL); /* 4 != 3 */
    call_free(&c);
    wd[1] = 2;
    static const int64_t zero_stride[2] = {0, 1}, big[4] = {1, 1, 1, 1}, k9[2] = {9, 9};
    add_in(&c, AK_ELEM_F32, 4, xd, x);
    add_in(&c, AK_ELEM_F32, 4, wd, w);
    attr_int(&c, "group", 2);
    attr_ints(&c, "strides", zero_stride, 2);
    assert_int_equal(call_op(&c, "Conv", 1, pools[0]), AK_ERR_INVALID_MODEL);
    call_free(&c);
    add_in(&c, AK_ELEM_F32, 4, xd, x);
    attr_ints(&c, "kernel_shape", k9, 2);
    attr_ints(&c, "pads", big, 4);
    assert_int_equal(call_op(&c, "MaxPool", 1, pools[0]), AK_ERR_INVALID_MODEL); /* 9 > 7 */
    call_free(&c);
    add_in(&c, AK_ELEM_F32, 4, xd, x);
    assert_int_equal(call_op(&c, "AveragePool", 1, pools[0]), AK_ERR_INVALID_MODEL);
    call_free(&c);
    free(x);
    free(w);
}

/* ---- benchmark (AK_NN_BENCH=1) --------------------------------------------------------- */

typedef struct bench_shape {
    const char *name;
    int64_t C, H, W, M, k, s, p, group;
} bench_shape;

static double bench_one(const bench_shape *b, ak_threadpool *pool, double *ms_out) {
    int64_t xd[4] = {1, b->C, b->H, b->W}, wd[4] = {b->M, b->C / b->group, b->k, b->k},
            bd[1] = {b->M};
    uint64_t nx = prod(xd, 4), nw = prod(wd, 4);
    float *x = rand_f32(nx), *w = rand_f32(nw), *bias = rand_f32((uint64_t)b->M);
    int64_t st[2] = {b->s, b->s}, pads[4] = {b->p, b->p, b->p, b->p};
    op_call c;
    memset(&c, 0, sizeof c);
    add_in(&c, AK_ELEM_F32, 4, xd, x);
    add_in(&c, AK_ELEM_F32, 4, wd, w);
    add_in(&c, AK_ELEM_F32, 1, bd, bias);
    attr_int(&c, "group", b->group);
    attr_ints(&c, "strides", st, 2);
    attr_ints(&c, "pads", pads, 4);
    /* the op's own call, repeated: reshape + run as a session would */
    const ak__op_def *def = ak__op_find("", "Conv", 17);
    ak__ir_node node = {.name = "b", .op_type = "Conv", .domain = "", .opset = 17,
                        .num_inputs = 3, .num_outputs = 1, .num_attrs = c.nattr,
                        .attrs = c.attrs};
    const ak__tensor *ins[3] = {&c.in[0], &c.in[1], &c.in[2]};
    ak__tensor *outs[1] = {&c.out[0]};
    ak__op_ctx ctx = {.node = &node, .num_inputs = 3, .num_outputs = 1, .inputs = ins,
                      .outputs = outs, .pool = pool};
    const ak__tensor *consts[3] = {NULL, &c.in[1], NULL}; /* W constant, as in a model */
    assert_int_equal(def->create(&node, consts, &ctx.state), AK_OK);
    assert_int_equal(def->reshape(&ctx), AK_OK);
    assert_int_equal(ak_alloc(ak__tensor_nbytes(&c.out[0]), &c.out[0].data), AK_OK);
    assert_int_equal(ak_alloc(ctx.workspace_bytes, &ctx.workspace), AK_OK);
    uint64_t P = (uint64_t)(c.out[0].dims[2] * c.out[0].dims[3]);
    double flops = 2.0 * (double)b->M * (double)(b->C / b->group) * (double)(b->k * b->k) * (double)P;
    int reps = (int)(2e9 / flops) + 3;
    if (reps > 200) reps = 200;
    double best = 1e30;
    for (int rep = 0; rep < reps + 2; rep++) {
        uint64_t t0 = ak_now_ns();
        assert_int_equal(def->run(&ctx), AK_OK);
        double dt = (double)(ak_now_ns() - t0) * 1e-9;
        if (rep >= 2 && dt < best) best = dt; /* best of reps after 2 warm-ups */
    }
    def->destroy(ctx.state);
    ak_free(ctx.workspace);
    ak_free(c.out[0].data);
    free(x), free(w), free(bias);
    *ms_out = best * 1e3;
    return flops / best * 1e-9;
}

static void test_bench(void **s) {
    (void)s;
    if (!bench_mode()) skip();
    static const bench_shape shapes[] = {
        {"r50 stem 7x7/2 3->64 224", 3, 224, 224, 64, 7, 2, 3, 1},
        {"r50 1x1 64->64 56", 64, 56, 56, 64, 1, 1, 0, 1},
        {"r50 3x3 64->64 56", 64, 56, 56, 64, 3, 1, 1, 1},
        {"r50 1x1 64->256 56", 64, 56, 56, 256, 1, 1, 0, 1},
        {"r50 1x1 256->64 56", 256, 56, 56, 64, 1, 1, 0, 1},
        {"r50 3x3/2 128->128 56", 128, 56, 56, 128, 3, 2, 1, 1},
        {"r50 3x3 128->128 28", 128, 28, 28, 128, 3, 1, 1, 1},
        {"r50 1x1 128->512 28", 128, 28, 28, 512, 1, 1, 0, 1},
        {"r50 1x1/2 256->512 56", 256, 56, 56, 512, 1, 2, 0, 1},
        {"r50 3x3 256->256 14", 256, 14, 14, 256, 3, 1, 1, 1},
        {"r50 1x1 1024->256 14", 1024, 14, 14, 256, 1, 1, 0, 1},
        {"r50 3x3 512->512 7", 512, 7, 7, 512, 3, 1, 1, 1},
        {"r50 1x1 512->2048 7", 512, 7, 7, 2048, 1, 1, 0, 1},
        {"mv2 dw3x3 144 56", 144, 56, 56, 144, 3, 1, 1, 144},
        {"mv2 dw3x3/2 96 112", 96, 112, 112, 96, 3, 2, 1, 96},
        {"mv2 dw3x3 960 7", 960, 7, 7, 960, 3, 1, 1, 960},
        {"mv2 1x1 24->144 56", 24, 56, 56, 144, 1, 1, 0, 1},
        {"mv2 1x1 960->160 7", 960, 7, 7, 160, 1, 1, 0, 1},
    };
    static const int modes[4] = {0, 3, 1, 2};
    static const char *const labels[4] = {"", "igemm", "tile", "whole"};
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        printf("%-26s", shapes[i].name);
        for (int p = 0; p < 2; p++)
            for (int m = 0; m < (shapes[i].group == 1 ? 4 : 1); m++) {
                ak__nn_conv_force_mode = modes[m];
                double ms, gf = bench_one(&shapes[i], pools[p], &ms);
                printf("  %dT%s %7.1f GF/s %7.3f ms", p + 1, labels[m], gf, ms);
            }
        ak__nn_conv_force_mode = 0;
        printf("\n");
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv_paths),     cmocka_unit_test(test_fused_conv),
        cmocka_unit_test(test_nchwc_conv),
        cmocka_unit_test(test_conv_transpose_paths),
        cmocka_unit_test(test_pool_paths),     cmocka_unit_test(test_matmul_broadcast),
        cmocka_unit_test(test_bad_attributes), cmocka_unit_test(test_bench),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
