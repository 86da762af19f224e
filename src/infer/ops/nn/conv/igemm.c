/* Implicit-GEMM float32 convolution (1-D and 2-D, NCHW): Y_g (Mg,P) = W_g (Mg,Kg) ·
 * cols (Kg,P) with Kg = Cg·kh·kw, computed by the SGEMM microkernel without an im2col
 * matrix and without repacking the weights on every run.
 *
 *   weights   packed once, when the session is created (Conv's create), into the
 *             microkernel's MR-row k-major slivers, one depth slice (KC) after another.
 *   columns   each NR-wide sliver of output positions is gathered from the image straight
 *             into the microkernel's packed B layout ("implicit" im2col), as runs along
 *             output rows: a copy of NR contiguous floats for a 1×1 kernel or a stride-1
 *             window within one row, shorter or strided copies elsewhere. A padded
 *             convolution reads a zero-padded copy of the image, so no copy tests bounds.
 *   epilogue  bias, FusedConv's Z and activation are applied to each MR×NR tile of Y right
 *             after its last depth slice, while the tile is still in L1: no separate pass
 *             over Y before or after the GEMM.
 *
 * Work for one image and group is cut into tasks of (a chunk of output channels) × (a
 * block of position slivers), handed out dynamically over the pool. Large planes
 * (early layers) pack each block's columns per depth slice into the thread's own L2-sized
 * panel; small planes (late layers, few positions and deep K) pack all their columns once
 * into a shared buffer in a first parallel pass, so that several channel chunks can share
 * them and both cores stay busy on a 7×7 plane.
 *
 * Small planes whose positions fill NR-wide slivers badly (49 positions in 4 slivers of
 * 16) run transposed: the microkernel's rows are MR positions (a last short tile costs
 * only its rows) and its columns NR output channels, from a second packing of the
 * weights made at the first reshape that needs it. A task is a chunk of NR-channel
 * slivers over every position, accumulated in a per-thread tile then transposed into Y. On ResNet-50
 * and MobileNetV2's 7×7 layers that is 10-25 % faster (one thread). */
#include <stdlib.h>
#include <string.h>

#include "core/init.h"
#include "infer/ops/nn/common.h"
#include "infer/ops/nn/conv/activation.h"
#include "infer/ops/nn/conv/igemm.h"
#include "infer/ops/tensor/tensor_ops.h"
#include "kernels/dispatch.h"

/* Pack every column sliver up front (shared by all tasks) when they take at most this
 * many floats (2 MB): small planes whose columns several channel chunks reuse. */
#define IG_SHARED_MAX_FLOATS ((size_t)512 * 1024)
/* The transposed orientation's largest plane: its per-thread accumulator then stays
 * within 16 KB per channel sliver (positions × NR). */
#define IG_TRANSPOSED_MAX_POSITIONS 256u
/* Slivers per task: the A slice (Mg×KC) in L2 serves up to this many before the next. */
#define IG_MAX_BLOCK 8u
/* Tasks per thread wanted, so the dynamic hand-out evens out uneven tasks and cores. */
#define IG_TASKS_PER_THREAD 16u
/* Image rows per unit of a 1×1 convolution's shared packing. */
#define IG_PACK_ROWS 16u
/* 1×1 packing prefetches the image row this many rows ahead. */
#define PACK_PREFETCH_ROWS 4
/* Widest microkernel tile handled (ig_pos holds one sliver's positions). */
#define IG_MAX_NR 32
/* A channel chunk keeps at least this many rows (8 microkernel rows), at most
 * IG_MAX_CHUNK_ROWS at KC = 256 (its A slice, 192 KB, stays in L2 across a block;
 * proportionally more rows for a shallower K). */
#define IG_MIN_CHUNK_ROWS 48u
#define IG_MAX_CHUNK_ROWS 192u

int ak__conv_igemm_orientation = 0;

struct ak__conv_igemm {
    float *a; /* group g at g·Mp·Kg; depth slice at pc: +Mp·pc; row sliver i: +i·kb */
    /* The same weights as NR-channel slivers for the transposed orientation: group g at
     * g·Np·Kg; depth slice at pc: +Np·pc; channel sliver j: +j·kb·NR. Packed at create:
     * a; ak__conv_igemm_prepare packs the one a geometry needs and frees the other. */
    float *at;
    int64_t M, group, Mg;
    uint64_t Kg, Mp, Np; /* Mp, Np: Mg rounded up to MR, to NR */
    size_t kc;
    ak__sgemm_ukernel_fn ukernel;
    size_t mr, nr;
};

static size_t div_up(size_t a, size_t b) { return (a + b - 1) / b; }
static size_t min_sz(size_t a, size_t b) { return a < b ? a : b; }

/* ---- packed weights ---------------------------------------------------------------- */

/* Rows [i0, i0+width) × depth [p0, p0+kb) of a row-major (Mg, Kg) matrix as one k-major
 * sliver, rows past Mg zero. */
static void pack_w_sliver(const float *w, const ak__conv_igemm *p, size_t width, uint64_t i0,
                          size_t p0, size_t kb, float *dst) {
    for (size_t k = 0; k < kb; k++)
        for (size_t r = 0; r < width; r++)
            dst[k * width + r] =
                i0 + r < (uint64_t)p->Mg ? w[(i0 + r) * p->Kg + p0 + k] : 0.0f;
}

/* Every group's weights as `width`-row slivers, depth slice after depth slice, rows
 * padded to `rows_padded` (a multiple of width). */
static ak_status pack_weights(const float *w, const ak__conv_igemm *p, size_t width,
                              uint64_t rows_padded, float **out) {
    size_t floats = (size_t)(rows_padded * p->Kg * (uint64_t)p->group);
    void *mem;
    if (ak_alloc(floats * sizeof(float), &mem) != AK_OK)
        return AK_FAIL(AK_ERR_NO_MEMORY, "Conv: out of memory packing %zu weights", floats);
    float *packed = mem;
    for (int64_t g = 0; g < p->group; g++) {
        const float *wg = w + (uint64_t)(g * p->Mg) * p->Kg;
        float *ag = packed + (uint64_t)g * rows_padded * p->Kg;
        for (size_t pc = 0; pc < p->Kg; pc += p->kc) {
            size_t kb = min_sz(p->kc, (size_t)p->Kg - pc);
            for (uint64_t i = 0; i < rows_padded; i += width)
                pack_w_sliver(wg, p, width, i, pc, kb, ag + rows_padded * pc + i * kb);
        }
    }
    *out = packed;
    return AK_OK;
}

ak_status ak__conv_igemm_pack(const float *w, int64_t M, int64_t group, uint64_t Kg,
                              ak__conv_igemm **out) {
    *out = NULL;
    const ak__kernels *k = ak__kernels_active();
    if (!k->sgemm_ukernel || k->sgemm_nr > IG_MAX_NR || M <= 0 || group <= 0 ||
        M % group != 0 || Kg == 0)
        return AK_OK;
    ak__conv_igemm *p = calloc(1, sizeof *p);
    if (!p) return AK_FAIL(AK_ERR_NO_MEMORY, "Conv: out of memory packing weights");
    *p = (ak__conv_igemm){.M = M, .group = group, .Mg = M / group, .Kg = Kg,
                          .kc = ak__nn_slice_depth(Kg), .ukernel = k->sgemm_ukernel,
                          .mr = (size_t)k->sgemm_mr, .nr = (size_t)k->sgemm_nr};
    p->Mp = div_up((size_t)p->Mg, p->mr) * p->mr;
    p->Np = div_up((size_t)p->Mg, p->nr) * p->nr;
    ak_status s = pack_weights(w, p, p->mr, p->Mp, &p->a);
    if (s != AK_OK) {
        free(p);
        return s;
    }
    *out = p;
    return AK_OK;
}

void ak__conv_igemm_free(ak__conv_igemm *p) {
    if (!p) return;
    ak_free(p->a);
    ak_free(p->at);
    free(p);
}

int ak__conv_igemm_usable(const ak__conv_igemm *p, int64_t M, int64_t group, uint64_t Kg) {
    return p && p->M == M && p->group == group && p->Kg == Kg &&
           ak__kernels_active()->sgemm_ukernel == p->ukernel;
}

/* ---- the geometry of one run --------------------------------------------------------- */

typedef struct ig_geom {
    int64_t H, W, OH, OW, KH, KW, sh, sw, dh, dw, ph, pw;
    uint64_t P, plane;
    int pointwise; /* 1×1, stride 1, no padding: a column is a row of the image */
    ak__kf_gather_even16 *gather_even16; /* the run's kernel (NULL outside a run) */
} ig_geom;

/* The 2-D view of g (a 1-D convolution is one row). */
static ig_geom geom_2d(const ak__nn_geom *g) {
    int two = g->nsp == 2, a = two ? 1 : 0; /* the last (width) axis */
    ig_geom v = {
        .H = two ? g->in[0] : 1, .W = g->in[a], .OH = two ? g->out[0] : 1, .OW = g->out[a],
        .KH = two ? g->k[0] : 1, .KW = g->k[a], .sh = two ? g->s[0] : 1, .sw = g->s[a],
        .dh = two ? g->d[0] : 1, .dw = g->d[a], .ph = two ? g->pb[0] : 0, .pw = g->pb[a],
    };
    v.P = (uint64_t)(v.OH * v.OW);
    v.plane = (uint64_t)(v.H * v.W);
    v.pointwise = v.KH == 1 && v.KW == 1 && v.sh == 1 && v.sw == 1 && v.ph == 0 && v.pw == 0 &&
                  v.OH == v.H && v.OW == v.W;
    return v;
}

/* How one image and group is cut into tasks. */
typedef struct ig_split {
    int transposed;      /* positions as microkernel rows, channels as its columns */
    size_t width;        /* positions per packed column sliver: NR, or MR transposed */
    size_t S;            /* slivers of output positions */
    size_t nb, nblocks;  /* slivers per block, blocks */
    size_t rows, chunks; /* output channels per chunk (a multiple of MR, NR transposed), chunks */
    int shared;          /* all columns packed once up front */
    size_t panel_floats; /* per-thread panel (0 when shared) */
    size_t shared_floats;
    size_t acc_floats;   /* transposed: per-thread S·MR × NR accumulator */
} ig_split;

/* Where the transposed orientation pays: it rounds positions up to MR (and a last short
 * row tile costs only its rows) and channels up to NR, where the usual one rounds
 * positions up to NR. On a 7×7 plane 49 positions fill 4 16-wide slivers (64 columns,
 * 77 % useful) but only 9 6-row tiles of which the last is one row. */
static int transposed_pays(const ak__conv_igemm *p, const ig_geom *v) {
    if (v->P > IG_TRANSPOSED_MAX_POSITIONS || v->P * p->Kg > IG_SHARED_MAX_FLOATS ||
        ak__conv_igemm_orientation == 1)
        return 0;
    if (ak__conv_igemm_orientation == 2) return 1;
    uint64_t usual = p->Mp * div_up((size_t)v->P, p->nr) * p->nr;
    uint64_t transposed = p->Np * v->P;
    return transposed * 10 < usual * 9;
}

/* Transposed tasks take chunks of up to IG_T_MAX_CHUNK channel slivers, 2 or more per
 * thread: each depth slice of the columns then serves a whole chunk while it is in L2.
 * (One sliver per task re-read all the columns once per sliver: on a 512-channel 3×3
 * layer over 7×7 they are 1 MB, streamed 32 times from L3.) */
#define IG_T_MAX_CHUNK 8u
static ig_split plan_transposed(const ak__conv_igemm *p, const ig_geom *v, int threads) {
    ig_split s = {.transposed = 1, .width = p->mr, .S = div_up((size_t)v->P, p->mr),
                  .nblocks = 1, .shared = 1};
    s.nb = s.S;
    size_t slivers = (size_t)p->Np / p->nr, T = threads > 0 ? (size_t)threads : 1;
    size_t chunk = slivers / (2 * T);
    chunk = chunk < 1 ? 1 : chunk > IG_T_MAX_CHUNK ? IG_T_MAX_CHUNK : chunk;
    s.chunks = div_up(slivers, chunk);
    s.rows = chunk * p->nr;
    s.shared_floats = (size_t)p->Kg * s.S * p->mr;
    s.acc_floats = chunk * s.S * p->mr * p->nr;
    return s;
}

/* Tiles of (channel chunk × sliver block): both bounded so that a chunk's A slice
 * (≤ 192×KC floats) and a block's B slice (≤ KC×128) stay in L2 together, then halved
 * (the block when it is the wider side, else the chunk) until the pool gets
 * IG_TASKS_PER_THREAD tasks per thread. Deep, small-plane layers thus cut along
 * channels and wide, shallow ones along positions, and neither operand is re-read from
 * memory once per sliver. */
static ig_split plan_split(const ak__conv_igemm *p, const ig_geom *v, int threads) {
    if (transposed_pays(p, v)) return plan_transposed(p, v, threads);
    ig_split s = {.width = p->nr, .S = div_up((size_t)v->P, p->nr)};
    size_t T = threads > 0 ? (size_t)threads : 1, want = T * IG_TASKS_PER_THREAD;
    size_t Mp = (size_t)p->Mp, mr = p->mr;
    size_t most = IG_MAX_CHUNK_ROWS * AK_NN_MAX_KC / min_sz(p->kc, (size_t)p->Kg); /* shallow K: more */
    size_t nb = min_sz(IG_MAX_BLOCK, s.S), rows = min_sz(Mp, div_up(most, mr) * mr);
    while (div_up(s.S, nb) * div_up(Mp, rows) < want) {
        if (nb > 1 && (nb * p->nr >= rows || rows <= IG_MIN_CHUNK_ROWS))
            nb = div_up(nb, 2);
        else if (rows > IG_MIN_CHUNK_ROWS)
            rows = div_up(rows / 2, mr) * mr;
        else
            break;
    }
    s.nblocks = div_up(s.S, nb);
    s.nb = div_up(s.S, s.nblocks); /* evened out */
    s.chunks = div_up(Mp, rows);
    s.rows = div_up(div_up(Mp, s.chunks), mr) * mr;
    s.chunks = div_up(Mp, s.rows);
    /* columns packed once pay off only when several chunks read them */
    s.shared = s.chunks > 1 && (size_t)p->Kg * s.S * p->nr <= IG_SHARED_MAX_FLOATS;
    if (s.shared)
        s.shared_floats = (size_t)p->Kg * s.S * p->nr;
    else
        s.panel_floats = p->kc * s.nb * p->nr;
    return s;
}

/* The geometry over a copy of the image with its padding written out as zeros, where
 * every window lies inside: packing then never tests bounds (on a 14- or 7-wide plane
 * nearly every sliver touches a border). Same as v when there is nothing to pad, and
 * for a shallow window on a wide plane (the stems: K ≤ one depth slice, ≥ 64 outputs per
 * row), where few slivers touch a border and the copy of the full-size image cost more
 * than the bounds tests: MobileNetV2's stem −17 %, ResNet-50's −2 % on 2 threads. */
#define IG_UNPADDED_MIN_WIDTH 64
static ig_geom padded_geom(const ig_geom *v, uint64_t Kg) {
    ig_geom pv = *v;
    if (v->pointwise || (Kg <= AK_NN_MAX_KC && v->OW >= IG_UNPADDED_MIN_WIDTH)) return pv;
    int64_t hp = (v->OH - 1) * v->sh + (v->KH - 1) * v->dh + 1; /* rows windows reach */
    int64_t wp = (v->OW - 1) * v->sw + (v->KW - 1) * v->dw + 1;
    pv.H = hp > v->H + v->ph ? hp : v->H + v->ph;
    pv.W = wp > v->W + v->pw ? wp : v->W + v->pw;
    pv.ph = pv.pw = 0;
    pv.plane = (uint64_t)(pv.H * pv.W);
    return pv;
}

/* Floats of the padded copy of one image group's input channels; 0 when there is nothing
 * to pad (the image is read in place). */
static size_t padded_floats(const ak__conv_igemm *p, const ig_geom *v) {
    ig_geom pv = padded_geom(v, p->Kg);
    if (pv.H == v->H && pv.W == v->W) return 0;
    return (size_t)(p->Kg / (uint64_t)(v->KH * v->KW)) * (size_t)pv.plane;
}

size_t ak__conv_igemm_workspace_floats(const ak__conv_igemm *p, const ak__nn_geom *g,
                                       int threads) {
    ig_geom v = geom_2d(g);
    ig_split s = plan_split(p, &v, threads);
    size_t T = threads > 0 ? (size_t)threads : 1;
    size_t cols = s.shared ? s.shared_floats : s.panel_floats * T;
    return padded_floats(p, &v) + cols + s.acc_floats * T;
}

ak_status ak__conv_igemm_prepare(ak__conv_igemm *p, const ak__nn_geom *g, const float *w) {
    ig_geom v = geom_2d(g);
    int transposed = transposed_pays(p, &v);
    float **need = transposed ? &p->at : &p->a, **other = transposed ? &p->a : &p->at;
    if (!*need) AK_CHECK(pack_weights(w, p, transposed ? p->nr : p->mr, transposed ? p->Np : p->Mp, need));
    ak_free(*other); /* one orientation at a time: ResNet-50's 7×7 layers hold 50 MB */
    *other = NULL;
    return AK_OK;
}

/* ---- implicit im2col: column slivers straight from the image ------------------------ */

typedef struct ig_job {
    const ak__conv_igemm *p;
    ig_geom v;
    ig_split s;
    const float *x, *a; /* this image's group of input channels; its packed weights */
    const float *at;    /* the group's weights packed for the transposed orientation */
    float *y;           /* this image's group of output channels */
    const float *bias, *z;
    ak__nn_act act;
    float *ws; /* shared columns, or one panel per thread */
    /* padding: the image group as given and its geometry; x and v then describe the
     * padded copy at `padded` */
    const float *x_in;
    ig_geom v_in;
    float *padded;
    /* the epilogue as the active microkernel applies it in registers, or NULL */
    ak__sgemm_ukernel_epi_fn ukernel_epi;
    const ak__sgemm_tile_epi *fused;
} ig_job;

/* A sliver's output positions as runs along output rows (a 16-wide sliver over a 7-wide
 * plane spans up to 4 rows): run r covers sliver columns [j0, j0+len) and reads the image
 * from (iy, ix) = (oy·sh − ph, ox·sw − pw) of its first position on. */
typedef struct ig_run {
    size_t j0, len;
    int64_t iy, ix;
} ig_run;
typedef struct ig_pos {
    ig_run run[IG_MAX_NR];
    size_t nruns, n;
} ig_pos;

static void sliver_positions(const ig_geom *v, uint64_t q0, size_t n, ig_pos *ps) {
    ps->n = n;
    ps->nruns = 0;
    int64_t oy = (int64_t)(q0 / (uint64_t)v->OW), ox = (int64_t)(q0 % (uint64_t)v->OW);
    for (size_t j = 0; j < n; oy++, ox = 0) {
        size_t len = min_sz(n - j, (size_t)(v->OW - ox));
        ps->run[ps->nruns++] = (ig_run){j, len, oy * v->sh - v->ph, ox * v->sw - v->pw};
        j += len;
    }
}

/* dst[0..nr) = src[0..n), zero-padded. The full 16-wide row is a constant-size copy the
 * compiler inlines (a memcpy call per 64 bytes cost a third of a 1×1 convolution). */
static inline void copy_row(float *dst, const float *src, size_t n, size_t nr) {
    if (n == 16 && nr == 16) {
        memcpy(dst, src, 16 * sizeof *dst);
        return;
    }
    if (n == 6 && nr == 6) { /* transposed slivers: MR positions */
        memcpy(dst, src, 6 * sizeof *dst);
        return;
    }
    memcpy(dst, src, n * sizeof *dst);
    for (size_t j = n; j < nr; j++) dst[j] = 0.0f;
}

/* One run of one row (ky, kx) of channel xc's window into d[0..len). */
static void gather_run(const ig_geom *v, const ig_run *r, const float *xc, int64_t ky,
                       int64_t kx, float *d) {
    int64_t iy = r->iy + ky * v->dh, x0 = r->ix + kx * v->dw, sw = v->sw;
    int64_t len = (int64_t)r->len, j = 0;
    if (iy < 0 || iy >= v->H) {
        memset(d, 0, r->len * sizeof *d);
        return;
    }
    const float *src = xc + iy * v->W;
    if (x0 >= 0 && x0 + (len - 1) * sw < v->W) { /* the run's window row is inside */
        if (sw == 1)
            for (; j < len; j++) d[j] = src[x0 + j];
        else
            for (; j < len; j++) d[j] = src[x0 + j * sw];
        return;
    }
    for (; j < len; j++) {
        int64_t ix = x0 + j * sw;
        d[j] = ix >= 0 && ix < v->W ? src[ix] : 0.0f;
    }
}

/* One row (ky, kx) of channel xc's window over the sliver's positions into dst[0..nr). */
static void gather_row(const ig_geom *v, const ig_pos *ps, const float *xc, int64_t ky,
                       int64_t kx, size_t nr, float *dst) {
    if (ps->nruns == 1 && ps->n == 16 && nr == 16 && v->sw <= 2) { /* common: one full run */
        int64_t iy = ps->run[0].iy + ky * v->dh, x0 = ps->run[0].ix + kx * v->dw;
        if (iy >= 0 && iy < v->H && x0 >= 0 && x0 + 15 * v->sw < v->W) {
            const float *src = xc + iy * v->W + x0;
            if (v->sw == 1) {
                memcpy(dst, src, 16 * sizeof *dst);
                return;
            }
            if (x0 + 31 < v->W) { /* stride 2: read 32, keep evens */
                v->gather_even16(src, dst);
                return;
            }
        }
    }
    for (size_t r = 0; r < ps->nruns; r++) gather_run(v, &ps->run[r], xc, ky, kx, dst + ps->run[r].j0);
    for (size_t j = ps->n; j < nr; j++) dst[j] = 0.0f;
}

/* A 1×1 convolution's slivers [s0, s1), rows [k0, k1) of the depth slice [pc, pc+kb):
 * the image's rows read across all the slivers at once (long sequential reads for the
 * prefetcher). */
static void pack_pointwise_rows(const ig_job *jb, size_t s0, size_t s1, size_t pc,
                                size_t kb, size_t k0, size_t k1, float *dst) {
    size_t nr = jb->s.width, width = (s1 - s0) * nr;
    for (size_t k = k0; k < k1; k++) {
        const float *src = jb->x + (pc + k) * jb->v.plane;
        if (k + PACK_PREFETCH_ROWS < kb) /* a row of the image is only a few lines here */
            for (size_t c = 0; c < width; c += 16)
                __builtin_prefetch(src + PACK_PREFETCH_ROWS * jb->v.plane + s0 * nr + c, 0, 3);
        for (size_t sl = s0; sl < s1; sl++) {
            uint64_t q0 = (uint64_t)sl * nr;
            copy_row(dst + ((sl - s0) * kb + k) * nr, src + q0,
                     min_sz(nr, (size_t)(jb->v.P - q0)), nr);
        }
    }
}

/* Slivers [s0, s1) at depth [pc, pc+kb) of a 1×1 convolution. */
static void pack_pointwise(const ig_job *jb, size_t s0, size_t s1, size_t pc, size_t kb,
                           float *dst) {
    pack_pointwise_rows(jb, s0, s1, pc, kb, 0, kb, dst);
}

/* Depth [pc, pc+kb) of sliver `sl` in the microkernel's packed layout (s.width floats per
 * k: its B layout, or its A layout when transposed). */
static void pack_cols(const ig_job *jb, size_t sl, size_t pc, size_t kb, float *dst) {
    const ig_geom *v = &jb->v;
    size_t nr = jb->s.width;
    uint64_t q0 = (uint64_t)sl * nr;
    size_t n = min_sz(nr, (size_t)(v->P - q0));
    if (v->pointwise) {
        pack_pointwise(jb, sl, sl + 1, pc, kb, dst);
        return;
    }
    ig_pos ps;
    sliver_positions(v, q0, n, &ps);
    uint64_t taps = (uint64_t)(v->KH * v->KW);
    uint64_t c = pc / taps, t = pc % taps;
    int64_t ky = (int64_t)t / v->KW, kx = (int64_t)t % v->KW;
    for (size_t k = 0; k < kb; k++, dst += nr) {
        gather_row(v, &ps, jb->x + c * v->plane, ky, kx, nr, dst);
        if (++kx == v->KW) {
            kx = 0;
            if (++ky == v->KH) ky = 0, c++;
        }
    }
}

/* Slivers [s0, s1) at depth [pc, pc+kb), one after another. */
static void pack_panel(const ig_job *jb, size_t s0, size_t s1, size_t pc, size_t kb,
                       float *dst) {
    if (jb->v.pointwise) {
        pack_pointwise(jb, s0, s1, pc, kb, dst);
        return;
    }
    for (size_t sl = s0; sl < s1; sl++) pack_cols(jb, sl, pc, kb, dst + (sl - s0) * kb * jb->s.width);
}

/* Work units of the shared packing: a 1×1 convolution's unit is IG_PACK_ROWS image rows
 * of one depth slice across every sliver (whole rows read; packing sliver by sliver had
 * two threads each read 64 bytes of every row, and took a third of a 14×14 layer on two
 * threads), any other's one sliver of one slice. */
static size_t pack_units_per_slice(const ig_job *jb) {
    return jb->v.pointwise ? div_up(jb->p->kc, IG_PACK_ROWS) : jb->s.S;
}

static size_t shared_pack_units(const ig_job *jb) {
    return div_up((size_t)jb->p->Kg, jb->p->kc) * pack_units_per_slice(jb);
}

static void shared_pack_task(void *vj, size_t begin, size_t end, int tid) {
    (void)tid;
    const ig_job *jb = vj;
    size_t S = jb->s.S, nr = jb->s.width, kc = jb->p->kc;
    size_t per_slice = pack_units_per_slice(jb);
    for (size_t u = begin; u < end; u++) {
        size_t pc = (u / per_slice) * kc, i = u % per_slice;
        size_t kb = min_sz(kc, (size_t)jb->p->Kg - pc);
        float *slice = jb->ws + pc * S * nr;
        if (!jb->v.pointwise) {
            pack_cols(jb, i, pc, kb, slice + i * kb * nr);
            continue;
        }
        size_t k0 = i * IG_PACK_ROWS;
        if (k0 < kb) pack_pointwise_rows(jb, 0, S, pc, kb, k0, min_sz(kb, k0 + IG_PACK_ROWS), slice);
    }
}

/* Channels [begin, end) of the image group into the padded copy, zeros around. */
static void pad_task(void *vj, size_t begin, size_t end, int tid) {
    (void)tid;
    const ig_job *jb = vj;
    const ig_geom *in = &jb->v_in, *pv = &jb->v;
    for (size_t c = begin; c < end; c++)
        ak__nn_pad_plane(jb->x_in + c * in->plane, in->H, in->W, in->ph, in->pw,
                         jb->padded + c * pv->plane, pv->H, pv->W);
}

/* ---- the tasks ----------------------------------------------------------------------- */

/* Bias, Z and the activation on the m×n tile of Y at (row, q0). */
static void epilogue(const ig_job *jb, size_t row, size_t m, uint64_t q0, size_t n) {
    uint64_t P = jb->v.P, at = row * P + q0;
    ak__nn_tile_epilogue(jb->y + at, jb->z ? jb->z + at : NULL, jb->bias ? jb->bias + row : NULL,
                         P, m, n, &jb->act);
}

/* The microkernel on the m×n tile of Y at (row, q0), finished when it is the last depth
 * slice: in the microkernel's registers for a full tile where it can, else after. */
static void run_tile(const ig_job *jb, size_t kb, const float *a, const float *b, float beta,
                     size_t row, size_t m, uint64_t q0, size_t n, int last) {
    const ak__conv_igemm *p = jb->p;
    uint64_t P = jb->v.P, at = row * P + q0;
    if (last && jb->fused && m == p->mr && n == p->nr) {
        ak__sgemm_tile_epi t = *jb->fused;
        if (t.bias) t.bias += row;
        if (t.z) t.z += at;
        jb->ukernel_epi(kb, a, b, beta, jb->y + at, (size_t)P, &t);
        return;
    }
    p->ukernel(kb, 1.0f, a, b, beta, jb->y + at, (size_t)P, m, n);
    if (last) epilogue(jb, row, m, q0, n);
}

/* Pulls the next tile's rows of Y (about to be written) and Z (about to be read) toward
 * L1: they lie P floats apart, one cache line or two each, where no hardware prefetcher
 * follows them. */
static void prefetch_tile(const ig_job *jb, size_t row, size_t m, uint64_t q0, int first,
                          int last) {
    uint64_t P = jb->v.P;
    for (size_t r = 0; r < m; r++) {
        const float *y = jb->y + (row + r) * P + q0;
        if (first) __builtin_prefetch(y, 1, 3), __builtin_prefetch(y + 15, 1, 3);
        if (last && jb->z) {
            const float *z = jb->z + (row + r) * P + q0;
            __builtin_prefetch(z, 0, 3), __builtin_prefetch(z + 15, 0, 3);
        }
    }
}

/* Task = (channel chunk, block of slivers): every depth slice, then every sliver of the
 * block, then every MR rows of the chunk; the A slice stays in L2 across the block. */
static void conv_task(void *vj, size_t begin, size_t end, int tid) {
    const ig_job *jb = vj;
    const ak__conv_igemm *p = jb->p;
    const ig_split *s = &jb->s;
    size_t nr = p->nr, mr = p->mr, Mg = (size_t)p->Mg, K = (size_t)p->Kg;
    float *panel = s->shared ? NULL : jb->ws + (size_t)tid * s->panel_floats;
    for (size_t task = begin; task < end; task++) {
        size_t r0 = (task / s->nblocks) * s->rows, r1 = min_sz(Mg, r0 + s->rows);
        size_t s0 = (task % s->nblocks) * s->nb, s1 = min_sz(s->S, s0 + s->nb);
        for (size_t pc = 0; pc < K; pc += p->kc) {
            size_t kb = min_sz(p->kc, K - pc);
            const float *b = s->shared ? jb->ws + pc * s->S * nr + s0 * kb * nr : panel;
            if (!s->shared) pack_panel(jb, s0, s1, pc, kb, panel);
            const float *a = jb->a + p->Mp * pc;
            int last = pc + kb == K;
            for (size_t sl = s0; sl < s1; sl++) {
                uint64_t q0 = (uint64_t)sl * nr;
                size_t n = min_sz(nr, (size_t)(jb->v.P - q0));
                const float *bs = b + (sl - s0) * kb * nr;
                for (size_t i = r0; i < r1; i += mr) {
                    size_t m = min_sz(mr, r1 - i);
                    prefetch_tile(jb, i + mr < r1 ? i + mr : r1, min_sz(mr, r1 - min_sz(r1, i + mr)), q0, pc == 0, last);
                    run_tile(jb, kb, a + i * kb, bs, pc ? 1.0f : 0.0f, i, m, q0, n, last);
                }
            }
        }
    }
}

/* Transposed task = a chunk of NR-channel slivers over every position: the microkernel's
 * rows are MR positions and its columns NR channels, accumulated over the depth slices in
 * the thread's tile (chunk × positions × NR), whose slivers are then transposed into Y's
 * channel rows and given the epilogue. */
static void conv_task_transposed(void *vj, size_t begin, size_t end, int tid) {
    const ig_job *jb = vj;
    const ak__conv_igemm *p = jb->p;
    const ig_split *s = &jb->s;
    size_t nr = p->nr, mr = p->mr, K = (size_t)p->Kg, P = (size_t)jb->v.P;
    size_t tile = s->S * mr * nr; /* one sliver's accumulator */
    float *acc = jb->ws + s->shared_floats + (size_t)tid * s->acc_floats;
    for (size_t task = begin; task < end; task++) {
        size_t c_begin = task * s->rows, c_end = min_sz((size_t)p->Mg, c_begin + s->rows);
        for (size_t pc = 0; pc < K; pc += p->kc) {
            size_t kb = min_sz(p->kc, K - pc);
            const float *a = jb->ws + pc * s->S * mr;
            for (size_t c0 = c_begin; c0 < c_end; c0 += nr) {
                const float *b = jb->at + p->Np * pc + c0 * kb;
                float *t = acc + (c0 - c_begin) / nr * tile;
                for (size_t i = 0; i < s->S; i++)
                    p->ukernel(kb, 1.0f, a + i * kb * mr, b, pc ? 1.0f : 0.0f, t + i * mr * nr, nr,
                               min_sz(mr, P - i * mr), min_sz(nr, c_end - c0));
            }
        }
        for (size_t c0 = c_begin; c0 < c_end; c0 += nr) {
            size_t n = min_sz(nr, c_end - c0);
            float *y = jb->y + c0 * P;
            ak__tops_transpose_f32(y, (int64_t)P, acc + (c0 - c_begin) / nr * tile, (int64_t)nr,
                                   (int64_t)P, (int64_t)n);
            ak__nn_tile_epilogue(y, jb->z ? jb->z + c0 * P : NULL, jb->bias ? jb->bias + c0 : NULL,
                                 P, n, P, &jb->act);
        }
    }
}

static void run_parallel(ak_threadpool *pool, int serial, size_t n, ak_parallel_fn fn,
                         void *ctx) {
    if (serial)
        fn(ctx, 0, n, 0);
    else
        ak__nn_parallel(pool, n, 1, fn, ctx);
}

ak_status ak__conv_igemm_run(const ak__conv_igemm *p, const ak__conv_igemm_args *args) {
    const ak__nn_geom *g = args->geom;
    int threads = 1;
    if (ak_threadpool_size(args->pool, &threads) != AK_OK || threads < 1) threads = 1;
    int serial = ak__conv_igemm_workspace_floats(p, g, threads) * sizeof(float) >
                 args->workspace_bytes;
    if (serial) { /* the pool grew after reshape sized the workspace */
        threads = 1;
        if (ak__conv_igemm_workspace_floats(p, g, 1) * sizeof(float) > args->workspace_bytes)
            return AK_FAIL(AK_ERR_INTERNAL, "Conv: workspace of %zu bytes is too small",
                           args->workspace_bytes);
    }
    const ak__kernels *k = ak__kernels_active();
    ig_job jb = {.p = p, .v_in = geom_2d(g), .act = args->act,
                 .ukernel_epi = k->sgemm_ukernel_epi};
    jb.v_in.gather_even16 = k->f32_gather_even16;
    ak__sgemm_tile_epi fused;
    jb.s = plan_split(p, &jb.v_in, threads);
    if (!(jb.s.transposed ? p->at : p->a))
        return AK_FAIL(AK_ERR_INTERNAL, "Conv: weights not prepared for a %lld-position plane",
                       (long long)jb.v_in.P);
    jb.v = padded_geom(&jb.v_in, p->Kg);
    size_t pad_floats = padded_floats(p, &jb.v_in);
    jb.padded = args->workspace;
    jb.ws = jb.padded + pad_floats;
    uint64_t Cg = p->Kg / (uint64_t)(jb.v.KH * jb.v.KW);
    for (int64_t n = 0; n < args->N; n++)
        for (int64_t gi = 0; gi < p->group; gi++) {
            uint64_t ci = (uint64_t)(n * args->C) + (uint64_t)gi * Cg;
            uint64_t co = (uint64_t)(n * p->M + gi * p->Mg);
            jb.x = jb.x_in = args->x + ci * jb.v_in.plane;
            if (pad_floats) {
                run_parallel(args->pool, serial, (size_t)Cg, pad_task, &jb);
                jb.x = jb.padded;
            }
            jb.y = args->y + co * jb.v.P;
            jb.z = args->z ? args->z + co * jb.v.P : NULL;
            jb.bias = args->bias ? args->bias + gi * p->Mg : NULL;
            jb.fused = jb.ukernel_epi && ak__nn_act_fusable(&jb.act, jb.bias, jb.z, &fused)
                           ? &fused
                           : NULL;
            jb.a = p->a ? p->a + (uint64_t)gi * p->Mp * p->Kg : NULL; /* NULL: no weights (an empty conv) */
            jb.at = p->at ? p->at + (uint64_t)gi * p->Np * p->Kg : NULL;
            if (jb.s.shared)
                run_parallel(args->pool, serial, shared_pack_units(&jb), shared_pack_task, &jb);
            run_parallel(args->pool, serial, jb.s.chunks * jb.s.nblocks,
                         jb.s.transposed ? conv_task_transposed : conv_task, &jb);
        }
    return AK_OK;
}
