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
 * The transforms are kernels (kernels/kf_infer.h: ak_f32_wino_input, _output,
 * _pad_blocked, _finish_block). Without an SGEMM microkernel whose NR is a multiple of 8
 * (AK_KERNELS=ref) create leaves no state and Conv takes its other paths, which are also
 * the reference the tests check this one against. */
#include <stdlib.h>
#include <string.h>

#include "infer/ops/nn/common.h"
#include "infer/ops/nn/conv/activation.h"
#include "infer/ops/nn/conv/winograd.h"
#include "kernels/dispatch.h"

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
    const ak__kernels *k = ak__kernels_active();
    if (!k->sgemm_ukernel || k->sgemm_nr % WINO_LANES || M <= 0 ||
        C <= 0 || (uint64_t)WINO_XI * (uint64_t)M * (uint64_t)C > WINO_MAX_PACKED)
        return AK_OK;
    ak__conv_wino *p = calloc(1, sizeof *p);
    if (!p) return AK_FAIL(AK_ERR_NO_MEMORY, "Conv: out of memory packing weights");
    *p = (ak__conv_wino){.M = M, .C = C, .mr = (size_t)k->sgemm_mr, .nr = (size_t)k->sgemm_nr,
                         .ukernel = k->sgemm_ukernel};
    p->Mp = div_up((size_t)M, p->mr) * p->mr;
    p->kc = ak__nn_slice_depth((uint64_t)C);
    *out = p;
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

/* ---- the run ------------------------------------------------------------------------- */

typedef struct wino_job {
    const ak__conv_wino *p;
    wino_geom v;
    const float *x, *bias, *z; /* one image */
    float *y;
    ak__nn_act act;
    const ak__kernels *k; /* the kernel table of this run */
    ak__kf_wino kw;       /* v, as the kernels take it */
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

/* Blocked X: blocks [begin, end) of 8 channels into their padded planes. */
static void wino_pad_blocked_task(void *vj, size_t begin, size_t end, int tid) {
    (void)tid;
    const wino_job *jb = vj;
    const wino_geom *v = &jb->v;
    for (size_t b = begin; b < end; b++)
        jb->k->f32_wino_pad_blocked(&jb->kw, jb->x + b * (size_t)(v->H * v->W) * WINO_LANES,
                                    jb->pad + b * WINO_LANES * v->Hp * v->Wp);
}

static void wino_input_task(void *vj, size_t begin, size_t end, int tid) {
    (void)tid;
    const wino_job *jb = vj;
    for (size_t c = begin; c < end; c++)
        jb->k->f32_wino_input(&jb->kw, jb->pad + c * jb->v.Hp * jb->v.Wp, c, jb->V);
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

static void wino_output_task(void *vj, size_t begin, size_t end, int tid) {
    (void)tid;
    const wino_job *jb = vj;
    size_t P = (size_t)(jb->v.OH * jb->v.OW);
    for (size_t m = begin; m < end; m++) {
        jb->k->f32_wino_output(&jb->kw, jb->Mo, m, jb->y + m * P);
        ak__nn_tile_epilogue(jb->y + m * P, jb->z ? jb->z + m * P : NULL, jb->bias ? jb->bias + m : NULL,
                             P, 1, P, &jb->act);
    }
}

/* Blocked Y: block b's 8 plain planes (P apart) into y with its bias, Z and activation. */
static void finish_block(const wino_job *jb, size_t b, const float *planes) {
    size_t P = (size_t)(jb->v.OH * jb->v.OW);
    float *y = jb->y + b * P * WINO_LANES;
    ak__sgemm_tile_epi fin;
    int fused = ak__nn_act_fusable(&jb->act, NULL, NULL, &fin);
    if (!fused) fin = (ak__sgemm_tile_epi){NULL, NULL, AK_SGEMM_ACT_NONE, 0.0f, 0.0f, NULL};
    jb->k->f32_wino_finish_block(planes, P, jb->bias ? jb->bias + b * WINO_LANES : NULL,
                                 jb->z ? jb->z + b * P * WINO_LANES : NULL, y, &fin);
    if (!fused) ak__nn_act_rows(&jb->act, y, 1, P * WINO_LANES, P * WINO_LANES);
}

static void wino_output_blocked_task(void *vj, size_t begin, size_t end, int tid) {
    const wino_job *jb = vj;
    size_t P = (size_t)(jb->v.OH * jb->v.OW);
    float *planes = jb->blocks + (size_t)tid * block_floats(&jb->v);
    for (size_t b = begin; b < end; b++) {
        for (size_t l = 0; l < WINO_LANES; l++)
            jb->k->f32_wino_output(&jb->kw, jb->Mo, b * WINO_LANES + l, planes + l * P);
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
    wino_job jb = {.p = p, .v = wino_geometry(p, args->geom), .act = args->act,
                   .k = ak__kernels_active()};
    jb.kw = (ak__kf_wino){.H = (size_t)jb.v.H, .W = (size_t)jb.v.W, .ph = (size_t)jb.v.ph,
                          .pw = (size_t)jb.v.pw, .Hp = jb.v.Hp, .Wp = jb.v.Wp,
                          .OH = (size_t)jb.v.OH, .OW = (size_t)jb.v.OW, .TW = jb.v.TW,
                          .T = jb.v.T, .C = (size_t)p->C, .nr = p->nr, .S = jb.v.S,
                          .Mp = p->Mp, .Tp = jb.v.Tp};
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
