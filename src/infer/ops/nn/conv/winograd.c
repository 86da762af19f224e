/* Winograd F(4×4, 3×3) float32 convolution: 2-D NCHW, 3×3 kernel, stride 1, dilation 1,
 * one group (Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks", 2016).
 *
 * Each 4×4 tile of an output plane comes from the 6×6 patch of input under it through
 *     Y = Aᵀ [ (G g Gᵀ) ⊙ (Bᵀ d Bᵀᵀ) ] A
 * so the 16·9 = 144 multiply-adds a tile costs per (input, output) channel pair become the
 * 36 of an element-wise product. Summed over input channels, those are 36 independent
 * GEMMs, one per patch element ξ:
 *     M_ξ (Cout, tiles) = U_ξ (Cout, Cin) · V_ξ (Cin, tiles)
 * run by the SGEMM microkernel: 4× fewer multiply-adds than the direct convolution, for
 * the price of the transforms (a few percent when there are 64+ channels) and of a larger
 * rounding error (a few 1e-6 relative per layer; the tests bound it).
 *
 *   weights   U = G g Gᵀ in double at create, packed per ξ into the microkernel's MR-row
 *             k-major slivers (4× the weights' memory: create only packs up to
 *             WINO_MAX_PACKED floats per layer).
 *   input     a zero-padded copy of the image, then Bᵀ d B for 8 consecutive tiles (in
 *             row-major tile order) at once, lanes = tiles: the patches' stride-4 columns
 *             are deinterleaved in registers from 32 contiguous floats (or from each
 *             tile's 4 where the 8 span tile rows). Groups start on multiples of 8 tiles,
 *             so V_ξ is stored with whole vectors straight into the microkernel's packed
 *             B layout (NR tiles per input channel): masked stores cost ~7× more on Zen.
 *   GEMM      tasks of ξ (the 36 independent products keep both cores busy on any plane).
 *   output    Aᵀ m A for the same groups, interleaved back into rows of 4 floats per
 *             tile; bias, Z and the activation over each output channel's plane.
 *   blocked   NchwcConv's X and Y (NCHW8c, nn/conv/nchwc.c): the pad step transposes 8
 *             positions × 8 channels at a time into the padded planes, and each block of
 *             8 output channels is computed into a per-thread plain buffer and transposed
 *             into Y with bias, Z and the activation.
 *
 * AVX2 only: without it (or without the microkernel) pack leaves no state and Conv takes
 * its other paths, which are also the reference the tests check this one against. */
#include <stdlib.h>
#include <string.h>

#include "infer/ops/nn/common.h"
#include "infer/ops/nn/conv/activation.h"
#include "infer/ops/nn/conv/winograd.h"
#include "kernels/dispatch.h"

#if defined(__x86_64__) || defined(__i386__)
#include "core/init.h"
#include "infer/ops/nn/avx2.h"
#define WINO_X86 1
#endif

/* Transformed weights kept per layer at most (36·256·256 floats, 9 MB): beyond that
 * (512-channel layers on 7×7 planes) U no longer stays in cache across its few tiles and
 * the layer becomes bound by reading it. */
#define WINO_MAX_PACKED ((uint64_t)36 * 256 * 256)
#define WINO_XI 36 /* patch elements (6×6) */
/* Tiles per lane group (one AVX2 vector). */
#define WINO_LANES 8

struct ak__conv_wino {
    float *u; /* ξ at ξ·Mp·C; depth slice pc: + Mp·pc; row sliver i: + i·kb */
    int64_t M, C;
    size_t Mp, kc, mr, nr;
    ak__sgemm_ukernel_fn ukernel;
};

static inline size_t div_up(size_t a, size_t b) { return (a + b - 1) / b; }
static inline size_t min_sz(size_t a, size_t b) { return a < b ? a : b; }

/* ---- weights ------------------------------------------------------------------------- */

/* G g for one axis: the 6 values the 3 taps g[0], g[s], g[2s] transform into. */
static void wino_g3(const double *g, size_t s, double *u, size_t us) {
    u[0] = g[0] / 4;
    u[us] = -(g[0] + g[s] + g[2 * s]) / 6;
    u[2 * us] = -(g[0] - g[s] + g[2 * s]) / 6;
    u[3 * us] = g[0] / 24 + g[s] / 12 + g[2 * s] / 6;
    u[4 * us] = g[0] / 24 - g[s] / 12 + g[2 * s] / 6;
    u[5 * us] = g[2 * s];
}

/* U = G g Gᵀ (6×6, ξ = row·6 + column) of one 3×3 filter. */
static void wino_weight(const float *w, double *u) {
    double g[9], gg[18]; /* gg: G g, 6 rows × 3 columns */
    for (int i = 0; i < 9; i++) g[i] = w[i];
    for (int x = 0; x < 3; x++) wino_g3(g + x, 3, gg + x, 3);
    for (int r = 0; r < 6; r++) wino_g3(gg + 3 * r, 1, u + 6 * r, 1);
}

ak_status ak__conv_wino_create(int64_t M, int64_t C, ak__conv_wino **out) {
    *out = NULL;
#ifdef WINO_X86
    const ak__kernels *k = ak__kernels_active();
    if (!ak__cpu_active_avx2() || !k->sgemm_ukernel || k->sgemm_nr % WINO_LANES || M <= 0 ||
        C <= 0 || (uint64_t)WINO_XI * (uint64_t)M * (uint64_t)C > WINO_MAX_PACKED)
        return AK_OK;
    ak__conv_wino *p = calloc(1, sizeof *p);
    if (!p) return AK_FAIL(AK_ERR_NO_MEMORY, "Conv: out of memory packing weights");
    *p = (ak__conv_wino){.M = M, .C = C, .mr = (size_t)k->sgemm_mr, .nr = (size_t)k->sgemm_nr,
                         .ukernel = k->sgemm_ukernel};
    p->Mp = div_up((size_t)M, p->mr) * p->mr;
    p->kc = ak__nn_slice_depth((uint64_t)C);
    *out = p;
#else
    (void)M, (void)C;
#endif
    return AK_OK;
}

ak_status ak__conv_wino_prepare(ak__conv_wino *p, const float *w) {
    if (p->u) return AK_OK;
    size_t C = (size_t)p->C, floats = WINO_XI * p->Mp * C;
    void *mem;
    if (ak_alloc(floats * sizeof(float), &mem) != AK_OK)
        return AK_FAIL(AK_ERR_NO_MEMORY, "Conv: out of memory packing %zu Winograd weights", floats);
    memset(mem, 0, floats * sizeof(float));
    p->u = mem;
    double u[WINO_XI];
    for (size_t m = 0; m < (size_t)p->M; m++)
        for (size_t c = 0; c < C; c++) {
            wino_weight(w + (m * C + c) * 9, u);
            size_t pc = c / p->kc * p->kc, kb = min_sz(p->kc, C - pc);
            size_t at = p->Mp * pc + m / p->mr * p->mr * kb + (c - pc) * p->mr + m % p->mr;
            for (size_t xi = 0; xi < WINO_XI; xi++) p->u[xi * p->Mp * C + at] = (float)u[xi];
        }
    return AK_OK;
}

void ak__conv_wino_free(ak__conv_wino *p) {
    if (!p) return;
    ak_free(p->u);
    free(p);
}

/* ---- geometry -------------------------------------------------------------------------- */

typedef struct wino_geom {
    int64_t H, W, OH, OW, ph, pw;
    size_t TH, TW, T, S, Tp; /* tile rows and columns, tiles, NR-wide slivers, S·NR */
    size_t Hp, Wp;           /* the padded copy: every tile's 6×6 patch inside */
} wino_geom;

static wino_geom wino_geometry(const ak__conv_wino *p, const ak__nn_geom *g) {
    wino_geom v = {.H = g->in[0], .W = g->in[1], .OH = g->out[0], .OW = g->out[1],
                   .ph = g->pb[0], .pw = g->pb[1]};
    v.TH = div_up((size_t)v.OH, 4);
    v.TW = div_up((size_t)v.OW, 4);
    v.T = v.TH * v.TW;
    v.S = div_up(v.T, p->nr);
    v.Tp = v.S * p->nr;
    v.Hp = 4 * v.TH + 2;
    v.Wp = 4 * v.TW + 4; /* a patch row's second 4 columns are read as 4 */
    return v;
}

int ak__conv_wino_usable(const ak__conv_wino *p, const ak__nn_geom *g, int64_t M, int64_t C,
                         int64_t group) {
    if (!p || p->M != M || p->C != C || group != 1 || g->nsp != 2 ||
        ak__kernels_active()->sgemm_ukernel != p->ukernel)
        return 0;
    for (int i = 0; i < 2; i++)
        if (g->k[i] != 3 || g->s[i] != 1 || g->d[i] != 1 || g->pe[i] < 0 || g->pb[i] < 0)
            return 0;
    return 1;
}

/* Floats of the three buffers: padded image, V, M. */
static size_t pad_floats(const ak__conv_wino *p, const wino_geom *v) {
    return (size_t)p->C * v->Hp * v->Wp;
}
static size_t v_floats(const ak__conv_wino *p, const wino_geom *v) {
    return WINO_XI * v->S * (size_t)p->C * p->nr;
}

/* The plain block of 8 output planes a thread finishes into a blocked Y. */
static size_t block_floats(const wino_geom *v) {
    return (size_t)WINO_LANES * (size_t)(v->OH * v->OW);
}

size_t ak__conv_wino_workspace_floats(const ak__conv_wino *p, const ak__nn_geom *g, int y_blocked,
                                      int threads) {
    wino_geom v = wino_geometry(p, g);
    return pad_floats(p, &v) + v_floats(p, &v) + WINO_XI * p->Mp * v.Tp +
           (y_blocked ? (size_t)threads * block_floats(&v) : 0);
}

int ak__conv_wino_pays(const ak__nn_geom *g) {
    uint64_t tiles = (uint64_t)((g->out[0] + 3) / 4) * (uint64_t)((g->out[1] + 3) / 4);
    return tiles >= 16;
}

#ifdef WINO_X86
/* ---- the run ------------------------------------------------------------------------- */

typedef struct wino_job {
    const ak__conv_wino *p;
    wino_geom v;
    const float *x, *bias, *z; /* one image */
    float *y;
    ak__nn_act act;
    float *pad, *V, *Mo; /* workspace: padded image, V_ξ, M_ξ */
    float *blocks;       /* blocked Y: each thread's plain block of 8 planes, or NULL */
} wino_job;

/* Channels [begin, end) into the padded copy, zeros around the image. */
static void wino_pad_task(void *vj, size_t begin, size_t end, int tid) {
    (void)tid;
    const wino_job *jb = vj;
    const wino_geom *v = &jb->v;
    for (size_t c = begin; c < end; c++)
        ak__nn_pad_plane(jb->x + c * (size_t)(v->H * v->W), v->H, v->W, v->ph, v->pw,
                         jb->pad + c * v->Hp * v->Wp, (int64_t)v->Hp, (int64_t)v->Wp);
}

/* Blocked X: blocks [begin, end) of 8 channels into their padded planes, 8 positions of
 * a row at a time through an 8×8 transpose; only the border of a plane is zeroed. */
__attribute__((target("avx2,fma"))) static void wino_pad_blocked_task(void *vj, size_t begin,
                                                                     size_t end, int tid) {
    (void)tid;
    const wino_job *jb = vj;
    const wino_geom *v = &jb->v;
    size_t H = (size_t)v->H, W = (size_t)v->W, ph = (size_t)v->ph, pw = (size_t)v->pw;
    size_t plane = v->Hp * v->Wp, right = v->Wp - pw - W;
    for (size_t b = begin; b < end; b++) {
        const float *src = jb->x + b * H * W * WINO_LANES;
        float *dst = jb->pad + b * WINO_LANES * plane;
        for (size_t l = 0; l < WINO_LANES; l++) {
            float *d = dst + l * plane;
            memset(d, 0, (ph * v->Wp + pw) * sizeof *d);
            for (size_t y = 0; y + 1 < H; y++)
                memset(d + (ph + y) * v->Wp + pw + W, 0, (right + pw) * sizeof *d);
            size_t tail = (ph + H - 1) * v->Wp + pw + W; /* past the last row: to the end */
            memset(d + tail, 0, (plane - tail) * sizeof *d);
        }
        for (size_t y = 0; y < H; y++) {
            const float *row = src + y * W * WINO_LANES;
            float *d = dst + (ph + y) * v->Wp + pw;
            size_t x = 0;
            for (; x + WINO_LANES <= W; x += WINO_LANES) {
                __m256 r[8];
                for (int j = 0; j < 8; j++) r[j] = _mm256_loadu_ps(row + (x + (size_t)j) * WINO_LANES);
                ak__nn_transpose8x8(r);
                for (size_t l = 0; l < WINO_LANES; l++) _mm256_storeu_ps(d + l * plane + x, r[l]);
            }
            for (; x < W; x++)
                for (size_t l = 0; l < WINO_LANES; l++) d[l * plane + x] = row[x * WINO_LANES + l];
        }
    }
}

/* 4×4 transposes within each 128-bit half: r[i][j] → r[j][i]. */
__attribute__((target("avx2,fma"))) static inline void transpose4_halves(__m256 r[4]) {
    __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    r[0] = _mm256_shuffle_ps(t0, t2, 0x44);
    r[1] = _mm256_shuffle_ps(t0, t2, 0xEE);
    r[2] = _mm256_shuffle_ps(t1, t3, 0x44);
    r[3] = _mm256_shuffle_ps(t1, t3, 0xEE);
}

/* 32 floats holding 8 runs of 4 (tile l's at 4l..4l+3) → c[j] lane l = src[4l + j]. */
__attribute__((target("avx2,fma"))) static inline void deinterleave4(const float *src, __m256 c[4]) {
    __m256 a0 = _mm256_loadu_ps(src), a1 = _mm256_loadu_ps(src + 8);
    __m256 a2 = _mm256_loadu_ps(src + 16), a3 = _mm256_loadu_ps(src + 24);
    c[0] = _mm256_permute2f128_ps(a0, a2, 0x20);
    c[1] = _mm256_permute2f128_ps(a0, a2, 0x31);
    c[2] = _mm256_permute2f128_ps(a1, a3, 0x20);
    c[3] = _mm256_permute2f128_ps(a1, a3, 0x31);
    transpose4_halves(c);
}

/* The inverse: c[j] lane l → dst[4l + j]. */
__attribute__((target("avx2,fma"))) static inline void interleave4(__m256 c[4], __m256 out[4]) {
    transpose4_halves(c);
    out[0] = _mm256_permute2f128_ps(c[0], c[1], 0x20);
    out[1] = _mm256_permute2f128_ps(c[2], c[3], 0x20);
    out[2] = _mm256_permute2f128_ps(c[0], c[1], 0x31);
    out[3] = _mm256_permute2f128_ps(c[2], c[3], 0x31);
}

/* Bᵀ d along one axis: d[0..6) (s apart) → v[0..6) (vs apart). */
__attribute__((target("avx2,fma"))) static inline void input_1d(const __m256 *d, size_t s,
                                                                 __m256 *v, size_t vs) {
    const __m256 two = _mm256_set1_ps(2), four = _mm256_set1_ps(4), five = _mm256_set1_ps(5);
    __m256 d0 = d[0], d1 = d[s], d2 = d[2 * s], d3 = d[3 * s], d4 = d[4 * s], d5 = d[5 * s];
    __m256 t = _mm256_sub_ps(d4, d2), u = _mm256_sub_ps(d3, d1);
    v[0] = _mm256_fmadd_ps(four, d0, _mm256_fnmadd_ps(five, d2, d4));
    v[vs] = _mm256_fnmadd_ps(four, _mm256_add_ps(d1, d2), _mm256_add_ps(d3, d4));
    v[2 * vs] = _mm256_fmadd_ps(four, _mm256_sub_ps(d1, d2), _mm256_sub_ps(d4, d3));
    v[3 * vs] = _mm256_fmadd_ps(two, u, t);
    v[4 * vs] = _mm256_fnmadd_ps(two, u, t);
    v[5 * vs] = _mm256_fmadd_ps(four, d1, _mm256_fnmadd_ps(five, d3, d5));
}

/* Aᵀ m along one axis: m[0..6) (s apart) → o[0..4) (os apart). */
__attribute__((target("avx2,fma"))) static inline void output_1d(const __m256 *m, size_t s,
                                                                  __m256 *o, size_t os) {
    __m256 s12 = _mm256_add_ps(m[s], m[2 * s]), d12 = _mm256_sub_ps(m[s], m[2 * s]);
    __m256 s34 = _mm256_add_ps(m[3 * s], m[4 * s]), d34 = _mm256_sub_ps(m[3 * s], m[4 * s]);
    o[0] = _mm256_add_ps(_mm256_add_ps(m[0], s12), s34);
    o[os] = _mm256_fmadd_ps(_mm256_set1_ps(2), d34, d12);
    o[2 * os] = _mm256_fmadd_ps(_mm256_set1_ps(4), s34, s12);
    o[3 * os] = _mm256_add_ps(_mm256_fmadd_ps(_mm256_set1_ps(8), d34, d12), m[5 * s]);
}

/* Where the 8 tiles of lane group t0 (tiles t0..t0+7 in row-major order) start in an
 * image laid out `ld` floats per row: offset of tile t's top-left at (4·ty, 4·tx). Lanes
 * past the last tile repeat it (their results are never read). Returns 1 when all 8 lie
 * in one tile row, left to right (then they are 4 floats apart). */
static int group_offsets(const wino_geom *v, size_t t0, size_t ld, size_t off[WINO_LANES]) {
    for (size_t l = 0; l < WINO_LANES; l++) {
        size_t t = min_sz(t0 + l, v->T - 1);
        off[l] = 4 * (t / v->TW) * ld + 4 * (t % v->TW);
    }
    return t0 % v->TW + WINO_LANES <= v->TW;
}

/* Columns [k0, k0+4) of one patch row of the 8 tiles at src + off[l]: c[j] lane l =
 * src[off[l] + k0 + j]. In one tile row the 32 floats are contiguous; otherwise each
 * tile's 4 floats are loaded on their own. */
__attribute__((target("avx2,fma"))) static inline void patch_columns(const float *src,
                                                                    const size_t *off, int row,
                                                                    size_t k0, __m256 c[4]) {
    if (row) {
        deinterleave4(src + off[0] + k0, c);
        return;
    }
    for (int j = 0; j < 4; j++)
        c[j] = _mm256_loadu2_m128(src + off[j + 4] + k0, src + off[j] + k0);
    transpose4_halves(c);
}

/* V_ξ of input channel c for the 8 tiles from t0 on. */
__attribute__((target("avx2,fma"))) static void input_group(const wino_job *jb, size_t c,
                                                           size_t t0) {
    const wino_geom *v = &jb->v;
    size_t nr = jb->p->nr, C = (size_t)jb->p->C, off[WINO_LANES];
    int row = group_offsets(v, t0, v->Wp, off);
    const float *src = jb->pad + c * v->Hp * v->Wp;
    __m256 d[8], w[6][6], out[6];
    for (int r = 0; r < 6; r++, src += v->Wp) { /* along x, patch row r */
        patch_columns(src, off, row, 0, d);
        patch_columns(src, off, row, 4, d + 4);
        input_1d(d, 1, w[r], 1);
    }
    float *dst = jb->V + (t0 / nr * C + c) * nr + t0 % nr;
    size_t xi_stride = v->S * C * nr;
    for (int k = 0; k < 6; k++) { /* along y */
        input_1d(&w[0][k], 6, out, 1);
        for (int r = 0; r < 6; r++) _mm256_storeu_ps(dst + (size_t)(r * 6 + k) * xi_stride, out[r]);
    }
}

static void wino_input_task(void *vj, size_t begin, size_t end, int tid) {
    (void)tid;
    const wino_job *jb = vj;
    for (size_t c = begin; c < end; c++)
        for (size_t t0 = 0; t0 < jb->v.T; t0 += WINO_LANES) input_group(jb, c, t0);
}

/* M_ξ = U_ξ · V_ξ for patch elements [begin, end), every output channel and sliver. */
static void wino_gemm_task(void *vj, size_t begin, size_t end, int tid) {
    (void)tid;
    const wino_job *jb = vj;
    const ak__conv_wino *p = jb->p;
    size_t C = (size_t)p->C, nr = p->nr, Tp = jb->v.Tp;
    for (size_t xi = begin; xi < end; xi++) {
        const float *u = p->u + xi * p->Mp * C;
        for (size_t sl = 0; sl < jb->v.S; sl++) {
            const float *b = jb->V + (xi * jb->v.S + sl) * C * nr;
            float *mo = jb->Mo + xi * p->Mp * Tp + sl * nr;
            for (size_t pc = 0; pc < C; pc += p->kc) {
                size_t kb = min_sz(p->kc, C - pc);
                for (size_t i = 0; i < p->Mp; i += p->mr) /* whole tiles: no edge kernel */
                    p->ukernel(kb, 1.0f, u + p->Mp * pc + i * kb, b + pc * nr, pc ? 1.0f : 0.0f,
                               mo + i * Tp, Tp, p->mr, nr);
            }
        }
    }
}

/* Output rows i of the 8 tiles from t0 on (out[i][q]: tiles 2q and 2q+1, 4 floats each)
 * into plane y: whole vectors when the group lies in one tile row away from the plane's
 * edges, else each tile's part inside the plane. */
__attribute__((target("avx2,fma"))) static void store_group(const wino_geom *v, float *y,
                                                           size_t t0, __m256 out[4][4]) {
    size_t off[WINO_LANES], OW = (size_t)v->OW;
    int row = group_offsets(v, t0, OW, off);
    size_t ty = t0 / v->TW, tx0 = t0 % v->TW;
    if (row && 4 * (tx0 + WINO_LANES) <= OW && 4 * ty + 4 <= (size_t)v->OH) {
        for (size_t i = 0; i < 4; i++)
            for (int q = 0; q < 4; q++) _mm256_storeu_ps(y + off[0] + i * OW + 8 * (size_t)q, out[i][q]);
        return;
    }
    float tmp[4][4 * WINO_LANES];
    for (size_t i = 0; i < 4; i++)
        for (int q = 0; q < 4; q++) _mm256_storeu_ps(tmp[i] + 8 * q, out[i][q]);
    for (size_t l = 0; l < WINO_LANES && t0 + l < v->T; l++) {
        size_t t = t0 + l, rows = min_sz(4, (size_t)v->OH - 4 * (t / v->TW));
        size_t cols = min_sz(4, OW - 4 * (t % v->TW));
        for (size_t i = 0; i < rows; i++) memcpy(y + off[l] + i * OW, tmp[i] + 4 * l, cols * sizeof *y);
    }
}

/* Output channel m into the plane y: Aᵀ m A for 8 tiles at a time. */
__attribute__((target("avx2,fma"))) static void output_plane(const wino_job *jb, size_t m,
                                                            float *y) {
    const wino_geom *v = &jb->v;
    size_t Mp = jb->p->Mp;
    for (size_t t0 = 0; t0 < v->T; t0 += WINO_LANES) {
        const float *src = jb->Mo + m * v->Tp + t0;
        __m256 mv[WINO_XI], s[6][4], o[4][4], out[4][4];
        for (int xi = 0; xi < WINO_XI; xi++) mv[xi] = _mm256_loadu_ps(src + (size_t)xi * Mp * v->Tp);
        for (int r = 0; r < 6; r++) output_1d(mv + 6 * r, 1, s[r], 1); /* along x */
        for (int j = 0; j < 4; j++) output_1d(&s[0][j], 4, &o[0][j], 4);  /* along y */
        for (int i = 0; i < 4; i++) interleave4(o[i], out[i]);
        store_group(v, y, t0, out);
    }
}

static void wino_output_task(void *vj, size_t begin, size_t end, int tid) {
    (void)tid;
    const wino_job *jb = vj;
    size_t P = (size_t)(jb->v.OH * jb->v.OW);
    for (size_t m = begin; m < end; m++) {
        output_plane(jb, m, jb->y + m * P);
        ak__nn_tile_epilogue(jb->y + m * P, jb->z ? jb->z + m * P : NULL, jb->bias ? jb->bias + m : NULL,
                             P, 1, P, &jb->act);
    }
}

/* Blocked Y: block b's 8 plain planes (P apart) into y and its bias, Z and activation, 8
 * positions at a time through an 8×8 transpose. */
__attribute__((target("avx2,fma"))) static void finish_block(const wino_job *jb, size_t b,
                                                            const float *planes) {
    size_t P = (size_t)(jb->v.OH * jb->v.OW);
    float *y = jb->y + b * P * WINO_LANES;
    const float *z = jb->z ? jb->z + b * P * WINO_LANES : NULL;
    int act = jb->act.kind == AK_NN_ACT_RELU || jb->act.kind == AK_NN_ACT_CLIP ? jb->act.kind
                                                                               : AK_NN_ACT_NONE;
    __m256 lo = _mm256_set1_ps(act == AK_NN_ACT_CLIP ? jb->act.a : 0.0f);
    __m256 hi = _mm256_set1_ps(jb->act.b);
    __m256 bias = jb->bias ? _mm256_loadu_ps(jb->bias + b * WINO_LANES) : _mm256_setzero_ps();
    __m256i all = ak__nn_first_lanes(WINO_LANES);
    __m256 r[8];
    for (size_t p = 0; p < P; p += WINO_LANES) {
        size_t n = min_sz(WINO_LANES, P - p);
        if (n == WINO_LANES) {
            for (int l = 0; l < 8; l++) r[l] = _mm256_loadu_ps(planes + (size_t)l * P + p);
            ak__nn_transpose8x8(r);
        } else {
            float t[WINO_LANES][WINO_LANES];
            for (size_t j = 0; j < n; j++)
                for (size_t l = 0; l < WINO_LANES; l++) t[j][l] = planes[l * P + p + j];
            for (size_t j = 0; j < n; j++) r[j] = _mm256_loadu_ps(t[j]);
        }
        for (size_t j = 0; j < n; j++)
            _mm256_storeu_ps(y + (p + j) * WINO_LANES,
                             ak__nn_finish8(_mm256_add_ps(r[j], bias), z ? z + (p + j) * WINO_LANES : NULL,
                                            all, 1, act, lo, hi));
    }
    if (act != jb->act.kind) ak__nn_act_rows(&jb->act, y, 1, P * WINO_LANES, P * WINO_LANES);
}

static void wino_output_blocked_task(void *vj, size_t begin, size_t end, int tid) {
    const wino_job *jb = vj;
    size_t P = (size_t)(jb->v.OH * jb->v.OW);
    float *planes = jb->blocks + (size_t)tid * block_floats(&jb->v);
    for (size_t b = begin; b < end; b++) {
        for (size_t l = 0; l < WINO_LANES; l++) output_plane(jb, b * WINO_LANES + l, planes + l * P);
        finish_block(jb, b, planes);
    }
}

/* Units per claim: about 8 claims per thread, so that claiming costs little against the
 * work of a unit (one tile row of one channel). */
static size_t grain_for(size_t units, int threads) {
    size_t g = units / ((size_t)threads * 8);
    return g ? g : 1;
}

ak_status ak__conv_wino_run(const ak__conv_wino *p, const ak__conv_igemm_args *args) {
    wino_job jb = {.p = p, .v = wino_geometry(p, args->geom), .act = args->act};
    if (!p->u) return AK_FAIL(AK_ERR_INTERNAL, "Conv: Winograd weights not prepared");
    int threads = 1;
    if (ak_threadpool_size(args->pool, &threads) != AK_OK || threads < 1) threads = 1;
    if (ak__conv_wino_workspace_floats(p, args->geom, args->y_blocked, threads) * sizeof(float) >
        args->workspace_bytes)
        return AK_FAIL(AK_ERR_INTERNAL, "Conv: workspace of %zu bytes is too small",
                       args->workspace_bytes);
    if ((args->x_blocked && p->C % WINO_LANES) || (args->y_blocked && p->M % WINO_LANES))
        return AK_FAIL(AK_ERR_INTERNAL, "Conv: blocked sides need channels in multiples of 8");
    jb.pad = args->workspace;
    jb.V = jb.pad + pad_floats(p, &jb.v);
    jb.Mo = jb.V + v_floats(p, &jb.v);
    jb.blocks = args->y_blocked ? jb.Mo + WINO_XI * p->Mp * jb.v.Tp : NULL;
    size_t C = (size_t)p->C, M = (size_t)p->M, P = (size_t)(jb.v.OH * jb.v.OW);
    size_t Pin = (size_t)(jb.v.H * jb.v.W);
    jb.bias = args->bias;
    for (int64_t n = 0; n < args->N; n++) {
        jb.x = args->x + (size_t)n * C * Pin;
        jb.y = args->y + (size_t)n * M * P;
        jb.z = args->z ? args->z + (size_t)n * M * P : NULL;
        if (args->x_blocked)
            ak__nn_parallel(args->pool, C / WINO_LANES, 1, wino_pad_blocked_task, &jb);
        else
            ak__nn_parallel(args->pool, C, grain_for(C, threads), wino_pad_task, &jb);
        ak__nn_parallel(args->pool, C, grain_for(C, threads), wino_input_task, &jb);
        ak__nn_parallel(args->pool, WINO_XI, 1, wino_gemm_task, &jb);
        if (args->y_blocked)
            ak__nn_parallel(args->pool, M / WINO_LANES, 1, wino_output_blocked_task, &jb);
        else
            ak__nn_parallel(args->pool, M, grain_for(M, threads), wino_output_task, &jb);
    }
    return AK_OK;
}
#else
ak_status ak__conv_wino_run(const ak__conv_wino *p, const ak__conv_igemm_args *args) {
    (void)p, (void)args;
    return AK_FAIL(AK_ERR_INTERNAL, "Conv: the Winograd path needs x86 AVX2");
}
#endif
