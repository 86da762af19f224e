/* NCHWc ("blocked") float32 convolutions: com.accelkit NchwcConv, what the graph
 * optimizer's layout pass (runtime/optimize.c) makes of chains of Conv/FusedConv nodes
 * (MobileNet's inverted residuals, ResNet's whole trunk).
 *
 * Layout: a tensor (N, C, H, W) with C a multiple of 8 is stored as (N, C/8, H, W, 8):
 * element (n, c, p) at ((n·C/8 + c/8)·H·W + p)·8 + c%8. The 8 channels of a position are
 * one AVX2 vector, so
 *   conv       (one group, input channels in multiples of 8, any window): tiles of up to
 *              6 outputs of a row × 16 output channels broadcast each input value against
 *              two vectors of weights packed as [pair of blocks][C·kh·kw][16] (AVX-512:
 *              12 outputs against the 16 as one zmm; avx512w: panels of 4 blocks,
 *              [C·kh·kw][32], 12 outputs against two zmm); a 1×1
 *              stride-1 layer's plane is one row read in place, short rows and strided
 *              1×1s run as a 1×1 over a gathered copy of what each tap reads (see
 *              conv_inputs), other windows read a zero-padded copy; 3×3 stride-1 planes
 *              of 16+ tiles go through Winograd (nn/conv/winograd.c) with blocked X and Y;
 *   depthwise  (group == C == M, any window, strides, pads, dilations): an output
 *              position is a sum over its window, one vector load and one FMA per tap
 *              against the tap's 8 weights (no transposes, no padded copy);
 *   direct     (stems: a plain X with fewer than 8 channels): the conv tiles over padded
 *              copies of the input rows, one lane per channel;
 * and bias, Z and a ReLU/Clip finish in registers before the store (other activations in
 * a pass over the tile just written).
 * Attributes: Conv's (and FusedConv's activation), plus x_blocked, y_blocked and z_blocked
 * (0|1): whether X, Y and Z are stored blocked. An unblocked side is reordered through the
 * workspace, so a layer between a plain and a blocked part of the graph pays the reorder.
 * Values keep their logical NCHW shapes; the layout pass makes sure that only NchwcConv
 * nodes read the blocked ones. The tiles, the depthwise rows and their finish are kernels
 * (kernels/kf_infer.h: ak_f32_nchwc_conv_row, ak_f32_nchwc_dw_rows), their scalar
 * references in kernels/ref/nchwc_ref.c (what AK_KERNELS=ref runs). */
#include <stdlib.h>
#include <string.h>

#include "core/params.h"
#include "infer/ops/nn/common.h"
#include "infer/ops/nn/conv/activation.h"
#include "infer/ops/nn/conv/conv.h"
#include "infer/ops/nn/conv/winograd.h"
#include "infer/ops/tensor/tensor_ops.h"
#include "kernels/dispatch.h"

#define BLK AK_NN_NCHWC_BLOCK
#define PW_CHUNK 96 /* positions per pointwise task (16 tiles) */

/* depthwise; direct: a stem (plain X, C < 8); conv: any window of one group over a
 * blocked X (run as the pointwise tiles when 1×1 with stride 1 and no pads). */
enum { NCHWC_DEPTHWISE, NCHWC_DIRECT, NCHWC_CONV };

typedef struct nchwc_state {
    int kind;
    int64_t M, C, taps; /* output and input channels, window taps */
    int64_t K;          /* direct, conv: depth of a weight panel (C·taps) */
    int pb;             /* direct, conv: output blocks per panel, as packed (2 or 4) */
    float *w;           /* packed weights (conv: on the first reshape that runs them) */
    ak__conv_wino *wino; /* conv, 3×3: the Winograd path, or NULL */
} nchwc_state;

/* ---- weights ------------------------------------------------------------------------ */

/* W (M, C, taps) into panels of pb output blocks, [M/(8·pb)][K][8·pb], then one of the
 * blocks left, [K][8·rest]; a panel's rows k in the tiles' order (input block, tap,
 * lane): k = ((c / lanes)·taps + tap)·lanes + c % lanes. pb is the kernel table's (4
 * where its tiles take 4 blocks, kernels/kf_infer.h). */
static void pack_panels(const float *w, int64_t M, int64_t C, int64_t taps, int lanes, int pb,
                        float *out) {
    int64_t K = C * taps, full = (int64_t)pb * BLK;
    for (int64_t m = 0; m < M; m++) {
        int64_t j = m / full, width = M - j * full >= full ? full : M - j * full;
        float *panel = out + j * K * full;
        for (int64_t c = 0; c < C; c++)
            for (int64_t t = 0; t < taps; t++) {
                int64_t k = ((c / lanes) * taps + t) * lanes + c % lanes;
                panel[k * width + m % full] = w[(m * C + c) * taps + t];
            }
    }
}

/* Depthwise: W (M, 1, taps) into [M/8][taps][8]. */
static void pack_depthwise(const float *w, int64_t M, int64_t taps, float *out) {
    for (int64_t c = 0; c < M; c++)
        for (int64_t t = 0; t < taps; t++) out[((c / BLK) * taps + t) * BLK + c % BLK] = w[c * taps + t];
}

/* ---- reorders ------------------------------------------------------------------------ */

/* Image n's blocks [cb0, cb1) between (C, P) and (C/8, P, 8). */
static void reorder_blocks(const float *src, float *dst, int64_t C, uint64_t P, int64_t n,
                           size_t cb0, size_t cb1, int to_blocked) {
    for (size_t cb = cb0; cb < cb1; cb++) {
        uint64_t off = ((uint64_t)n * (uint64_t)C + cb * BLK) * P;
        if (to_blocked)
            ak__tops_transpose_f32(dst + off, BLK, src + off, (int64_t)P, BLK, (int64_t)P);
        else
            ak__tops_transpose_f32(dst + off, (int64_t)P, src + off, BLK, (int64_t)P, BLK);
    }
}

typedef struct reorder_job {
    const float *src;
    float *dst;
    int64_t C;
    uint64_t P;
    int to_blocked;
} reorder_job;

static void reorder_task(void *vj, size_t begin, size_t end, int tid) {
    (void)tid;
    const reorder_job *j = vj;
    size_t blocks = (size_t)j->C / BLK;
    for (size_t i = begin; i < end; i++)
        reorder_blocks(j->src, j->dst, j->C, j->P, (int64_t)(i / blocks), i % blocks, i % blocks + 1,
                       j->to_blocked);
}

static void reorder(ak_threadpool *pool, const float *src, float *dst, int64_t N, int64_t C,
                    uint64_t P, int to_blocked) {
    reorder_job j = {src, dst, C, P, to_blocked};
    ak__nn_parallel(pool, (size_t)(N * (C / BLK)), 1, reorder_task, &j);
}

/* ---- kernels ---------------------------------------------------------------------------- */

/* The tiles (the conv row kernel: n outputs of a row × a panel's 8·nb channels, see
 * kernels/kf_infer.h), the depthwise rows and their finish (bias, Z, then a ReLU or Clip;
 * other activations run in a pass over what a task wrote) come from the kernel table. */
typedef ak__kf_nchwc_tile tile_args;

/* ---- stems and blocked convolutions --------------------------------------------------- */

/* A stem (a plain X with fewer than 8 input channels, any window, one group) reads the
 * input rows (c, ky) under an output row from a per-thread copy padded with zeros
 * (direct_fill_rows), each channel a "block" of one lane. The conv kind over a blocked X
 * (8 lanes a block) reads X in place, a gathered copy or a zero-padded one (conv_inputs). */
typedef struct direct_args {
    const ak__nn_geom *g;
    const float *x; /* the image, plain (C, H, W) */
    int64_t C;
    float *rowbuf; /* this thread's padded rows: C·kh rows of rowbuf_width */
    int64_t rowbuf_width;
} direct_args;

/* Floats per (c, ky) row of a stem's padded row buffer: the columns an output row reads. */
static int64_t direct_rowbuf_width(const ak__nn_geom *g) {
    return (g->out[1] - 1) * g->s[1] + (g->k[1] - 1) * g->d[1] + 1;
}

/* rowbuf = the input rows (c, ky) under output row oy, column j holding x[.., j − pad],
 * zeros outside the image: every tile then reads whole windows, with no bounds tests and
 * no one-output-at-a-time border columns (a fifth of a stem's time). */
static void direct_fill_rows(const direct_args *a, int64_t oy) {
    const ak__nn_geom *g = a->g;
    int64_t H = g->in[0], W = g->in[1], bw = a->rowbuf_width, pad = g->pb[1];
    int64_t lead = pad < bw ? pad : bw, copy = W < bw - lead ? W : bw - lead;
    float *d = a->rowbuf;
    for (int64_t c = 0; c < a->C; c++)
        for (int64_t ky = 0; ky < g->k[0]; ky++, d += bw) {
            int64_t iy = oy * g->s[0] - g->pb[0] + ky * g->d[0];
            if (iy < 0 || iy >= H) {
                memset(d, 0, (size_t)bw * sizeof *d);
                continue;
            }
            memset(d, 0, (size_t)lead * sizeof *d);
            memcpy(d + lead, a->x + (c * H + iy) * W, (size_t)copy * sizeof *d);
            memset(d + lead + copy, 0, (size_t)(bw - lead - copy) * sizeof *d);
        }
}

/* ---- the operator ------------------------------------------------------------------------ */

typedef struct nchwc_run {
    const nchwc_state *st;
    ak__nn_geom g;
    int64_t N;
    uint64_t P, Pin;
    const float *x, *bias, *z; /* blocked (x, z: from the workspace when reordered) */
    float *y;                  /* blocked */
    const ak__kernels *k; /* the kernel table of this run */
    ak__kf_win2d win;     /* g, for the depthwise kernel */
    ak__sgemm_tile_epi fin; /* what the kernels apply to their sums (bias, z: unread) */
    ak__nn_act act; /* applied after the kernel when the finish cannot (Sigmoid...) */
    int act_fused;  /* 1 when fin applies act */
    size_t chunks, panels; /* pointwise: position chunks; weight panels per image */
    int64_t rows_per_task; /* depthwise, direct, conv: output rows per task */
    int reorder_x, reorder_z, reorder_y; /* plain sides that go through the workspace */
    size_t row_tasks;
    size_t group_panels, groups; /* direct, conv: panels per task, groups of them */
    size_t tasks;                /* depthwise, direct, conv */
    float *rowbufs;       /* direct: one padded row buffer per thread, from the workspace */
    size_t rowbuf_floats; /* direct: floats of one */
    int pointwise;        /* conv: 1×1, stride 1, no pads */
    int64_t Hp, Wp;       /* conv: the padded image read (X itself when Hp·Wp == Pin) */
    int winograd;         /* conv: 3×3 planes Winograd F(4×4, 3×3) takes */
    int pad_copy;         /* conv: whether the tiles read a copy (padded or gathered) */
    int gathered;         /* conv: runs as a 1×1 over the inputs each tap reads, gathered */
    float *padded;        /* conv: the copy in the workspace, or NULL */
} nchwc_run;

/* A pass of an activation the finish cannot apply, over n floats at y. */
static void late_activation(const nchwc_run *r, float *y, size_t n) {
    if (!r->act_fused) ak__nn_act_rows(&r->act, y, 1, n, n);
}

/* Output blocks of panel j: pb, or what is left for the last. */
static int panel_blocks(const nchwc_run *r, size_t j) {
    size_t pb = (size_t)r->st->pb, left = (size_t)r->st->M / BLK - j * pb;
    return (int)(left < pb ? left : pb);
}

/* The tile arguments of panel j of image n, its y and z at the panel's first output. */
static tile_args panel_tile(const nchwc_run *r, size_t n, size_t j) {
    const nchwc_state *st = r->st;
    size_t b0 = j * (size_t)st->pb; /* the panel's first output block */
    uint64_t ybase = (n * (uint64_t)(st->M / BLK) + b0) * r->P * BLK;
    return (tile_args){.w = st->w + b0 * (size_t)st->K * BLK,
                       .bias = r->bias ? r->bias + b0 * BLK : NULL,
                       .z = r->z ? r->z + ybase : NULL, .y = r->y + ybase, .plane = r->P * BLK,
                       .kh = 1, .kw = 1, .lanes = BLK};
}

/* After a band of output rows [oy0, oy1) of panel j: the activations the finish left. */
static void panel_rows_done(const nchwc_run *r, const tile_args *t, int64_t oy0, int64_t oy1,
                            int nb) {
    size_t first = (size_t)(oy0 * r->g.out[1]) * BLK;
    size_t n_out = (size_t)((oy1 - oy0) * r->g.out[1]) * BLK;
    for (int b = 0; b < nb; b++) late_activation(r, t->y + b * t->plane + first, n_out);
}

/* Task i = (image, chunk of positions, panel): consecutive tasks share an input chunk. */
static void pw_task(void *vr, size_t begin, size_t end, int tid) {
    (void)tid;
    const nchwc_run *r = vr;
    size_t kb = (size_t)r->st->K / BLK; /* C/8, or C/8 · taps over gathered inputs */
    for (size_t i = begin; i < end; i++) {
        size_t j = i % r->panels, c = i / r->panels % r->chunks, n = i / r->panels / r->chunks;
        size_t p0 = c * PW_CHUNK, np = r->P - p0 < PW_CHUNK ? r->P - p0 : PW_CHUNK;
        int nb = panel_blocks(r, j);
        tile_args t = panel_tile(r, n, j);
        t.x = r->x + (n * kb * r->Pin + p0) * BLK;
        t.blocks = (int64_t)kb, t.cb_stride = (int64_t)r->Pin * BLK, t.sx = BLK;
        t.y += p0 * BLK;
        if (t.z) t.z += p0 * BLK;
        r->k->f32_nchwc_conv_row(&t, nb, (int64_t)np, &r->fin);
        for (int b = 0; b < nb; b++) late_activation(r, t.y + b * t.plane, np * BLK);
    }
}

/* Task i = (plane, band of rows_per_task output rows, group of group_panels panels), the
 * group varying fastest: consecutive tasks (one thread's share) read the same input rows;
 * a plane is an image (a depthwise layer's: an image's block, one group). Sets the band's
 * rows [*oy0, *oy1) and the group's panels [*j0, *j1); returns the plane. */
static size_t task_of(const nchwc_run *r, size_t i, int64_t *oy0, int64_t *oy1, size_t *j0,
                      size_t *j1) {
    size_t group = i % r->groups, band = i / r->groups % r->row_tasks;
    *oy0 = (int64_t)band * r->rows_per_task;
    *oy1 = *oy0 + r->rows_per_task < r->g.out[0] ? *oy0 + r->rows_per_task : r->g.out[0];
    *j0 = group * r->group_panels;
    *j1 = *j0 + r->group_panels < r->panels ? *j0 + r->group_panels : r->panels;
    return i / r->groups / r->row_tasks;
}

/* Task i of a depthwise layer: (image and block, band of output rows), see task_of. */
static void dw_task(void *vr, size_t begin, size_t end, int tid) {
    (void)tid;
    const nchwc_run *r = vr;
    const nchwc_state *st = r->st;
    size_t mb = (size_t)st->M / BLK;
    for (size_t i = begin; i < end; i++) {
        int64_t oy0, oy1;
        size_t j0, j1, plane = task_of(r, i, &oy0, &oy1, &j0, &j1), cb = plane % mb;
        uint64_t yoff = plane * r->P * BLK;
        ak__kf_nchwc_dw d = {r->x + plane * r->Pin * BLK, st->w + cb * (size_t)st->taps * BLK,
                      r->bias ? r->bias + cb * BLK : NULL, r->z ? r->z + yoff : NULL, r->y + yoff};
        r->k->f32_nchwc_dw_rows(&r->win, &d, oy0, oy1, &r->fin);
        late_activation(r, d.y + oy0 * r->g.out[1] * BLK, (size_t)((oy1 - oy0) * r->g.out[1]) * BLK);
    }
}

/* y (and z) of tile arguments t moved to output row oy. */
static tile_args at_row(const nchwc_run *r, tile_args t, int64_t oy) {
    t.y += (size_t)(oy * r->g.out[1]) * BLK;
    if (t.z) t.z += (size_t)(oy * r->g.out[1]) * BLK;
    return t;
}

/* Task i of a stem: each output row's input rows padded once, then every panel of the
 * group over them. */
static void direct_task(void *vr, size_t begin, size_t end, int tid) {
    const nchwc_run *r = vr;
    const ak__nn_geom *g = &r->g;
    for (size_t i = begin; i < end; i++) {
        int64_t oy0, oy1;
        size_t j0, j1, n = task_of(r, i, &oy0, &oy1, &j0, &j1);
        direct_args a = {g, r->x + n * (size_t)r->st->C * r->Pin, r->st->C,
                         r->rowbufs + (size_t)tid * r->rowbuf_floats, direct_rowbuf_width(g)};
        for (int64_t oy = oy0; oy < oy1; oy++) {
            direct_fill_rows(&a, oy);
            for (size_t j = j0; j < j1; j++) {
                tile_args t = panel_tile(r, n, j);
                t.x = a.rowbuf, t.blocks = a.C, t.cb_stride = g->k[0] * a.rowbuf_width;
                t.kh = g->k[0], t.ky_stride = a.rowbuf_width, t.kw = g->k[1], t.dx = g->d[1];
                t.sx = g->s[1], t.lanes = 1;
                tile_args row = at_row(r, t, oy);
                r->k->f32_nchwc_conv_row(&row, panel_blocks(r, j), g->out[1], &r->fin);
            }
        }
        for (size_t j = j0; j < j1; j++) {
            tile_args t = panel_tile(r, n, j);
            panel_rows_done(r, &t, oy0, oy1, panel_blocks(r, j));
        }
    }
}

/* Blocks [begin, end) (over all images) of a conv layer's X into its zero-padded copy. */
static void conv_pad_task(void *vr, size_t begin, size_t end, int tid) {
    (void)tid;
    const nchwc_run *r = vr;
    for (size_t b = begin; b < end; b++) /* a block's plane: rows of W·8 floats */
        ak__nn_pad_plane(r->x + b * r->Pin * BLK, r->g.in[0], r->g.in[1] * BLK, r->g.pb[0],
                         r->g.pb[1] * BLK, r->padded + b * (size_t)(r->Hp * r->Wp) * BLK, r->Hp,
                         r->Wp * BLK);
}

/* Blocks [begin, end) of X (over all images) gathered for a layer run as a 1×1 over
 * C·taps channels: block (cb, tap) holds, for every output, the input its tap reads
 * (zero in the padding), compact. */
static void conv_gather_task(void *vr, size_t begin, size_t end, int tid) {
    (void)tid;
    const nchwc_run *r = vr;
    const ak__nn_geom *g = &r->g;
    int64_t H = g->in[0], W = g->in[1], taps = r->st->taps;
    for (size_t b = begin; b < end; b++) {
        const float *src = r->x + b * r->Pin * BLK;
        float *dst = r->padded + b * (size_t)taps * r->P * BLK;
        for (int64_t ky = 0; ky < g->k[0]; ky++)
            for (int64_t kx = 0; kx < g->k[1]; kx++)
                for (int64_t oy = 0; oy < g->out[0]; oy++) {
                    int64_t iy = oy * g->s[0] - g->pb[0] + ky * g->d[0];
                    for (int64_t ox = 0; ox < g->out[1]; ox++, dst += BLK) {
                        int64_t ix = ox * g->s[1] - g->pb[1] + kx * g->d[1];
                        if (iy < 0 || iy >= H || ix < 0 || ix >= W)
                            memset(dst, 0, BLK * sizeof *dst);
                        else
                            memcpy(dst, src + (iy * W + ix) * BLK, BLK * sizeof *dst);
                    }
                }
    }
}

/* Task i of a conv layer: each panel of the group over the band's rows (its weights and
 * the band's input rows sized to stay in cache together, see plan_bands). */
static void conv_task(void *vr, size_t begin, size_t end, int tid) {
    (void)tid;
    const nchwc_run *r = vr;
    const ak__nn_geom *g = &r->g;
    const float *xp = r->padded ? r->padded : r->x;
    int64_t rowf = r->Wp * BLK, planef = r->Hp * rowf, kb = r->st->C / BLK;
    for (size_t i = begin; i < end; i++) {
        int64_t oy0, oy1;
        size_t j0, j1, n = task_of(r, i, &oy0, &oy1, &j0, &j1);
        for (size_t j = j0; j < j1; j++) {
            int nb = panel_blocks(r, j);
            tile_args t = panel_tile(r, n, j);
            t.blocks = kb, t.cb_stride = planef, t.kh = g->k[0], t.ky_stride = g->d[0] * rowf;
            t.kw = g->k[1], t.dx = g->d[1] * BLK, t.sx = g->s[1] * BLK;
            for (int64_t oy = oy0; oy < oy1; oy++) {
                tile_args row = at_row(r, t, oy);
                row.x = xp + (size_t)n * (size_t)(kb * planef) + (size_t)(oy * g->s[0] * rowf);
                r->k->f32_nchwc_conv_row(&row, nb, g->out[1], &r->fin);
            }
            panel_rows_done(r, &t, oy0, oy1, nb);
        }
    }
}

static void nchwc_destroy(void *state) {
    nchwc_state *st = state;
    if (st) {
        ak_free(st->w);
        ak__conv_wino_free(st->wino);
    }
    free(st);
}

/* The tiles' (or depthwise) weights of st from W's data w, once. */
static ak_status nchwc_pack(nchwc_state *st, const float *w) {
    if (st->w) return AK_OK;
    size_t floats = (size_t)(st->M * (st->kind == NCHWC_DEPTHWISE ? st->taps : st->K));
    void *mem;
    if (ak_alloc(floats * sizeof(float), &mem) != AK_OK)
        return AK_FAIL(AK_ERR_NO_MEMORY, "NchwcConv: out of memory packing %zu weights", floats);
    st->w = mem;
    if (st->kind == NCHWC_DEPTHWISE) {
        pack_depthwise(w, st->M, st->taps, st->w);
    } else {
        st->pb = ak__kernels_nchwc_panel_blocks(ak__kernels_active());
        pack_panels(w, st->M, st->C, st->taps, st->kind == NCHWC_CONV ? BLK : 1, st->pb, st->w);
    }
    return AK_OK;
}

/* Packs the constant W of a depthwise, stem or one-group layer; anything else is refused
 * (the layout pass only makes NchwcConv nodes out of those). */
static ak_status nchwc_create(const ak__ir_node *node, const ak__tensor *const *consts,
                              void **state) {
    const ak__tensor *W = node->num_inputs >= 2 ? consts[1] : NULL;
    if (!W || W->type != AK_ELEM_F32 || W->rank != 4)
        return AK_OP_FAIL(node, AK_ERR_UNSUPPORTED, "W must be a constant float32 (M, C, kh, kw)");
    int64_t M = W->dims[0], group = ak__attr_int(node, "group", 1);
    int64_t taps = W->dims[2] * W->dims[3];
    int kind;
    if (group == M && W->dims[1] == 1) kind = NCHWC_DEPTHWISE;
    else if (group == 1 && W->dims[1] < BLK) kind = NCHWC_DIRECT;
    else if (group == 1) kind = NCHWC_CONV;
    else
        return AK_OP_FAIL(node, AK_ERR_UNSUPPORTED,
                          "grouped layers other than depthwise are not blocked");
    int64_t C = kind == NCHWC_DEPTHWISE ? M : W->dims[1];
    if (M <= 0 || M % BLK || (kind != NCHWC_DIRECT && C % BLK) || taps <= 0)
        return AK_OP_FAIL(node, AK_ERR_UNSUPPORTED, "channels %lld -> %lld are not multiples of 8",
                          (long long)C, (long long)M);
    if (kind == NCHWC_DIRECT && ak__attr_int(node, "x_blocked", 0))
        return AK_OP_FAIL(node, AK_ERR_UNSUPPORTED, "a stem reads a plain X");
    nchwc_state *st = calloc(1, sizeof *st);
    if (!st) return AK_FAIL(AK_ERR_NO_MEMORY, "NchwcConv: out of memory");
    *st = (nchwc_state){kind, M, C, taps, C * taps, 0, NULL, NULL};
    ak_status s = AK_OK;
    if (kind == NCHWC_CONV && W->dims[2] == 3 && W->dims[3] == 3)
        s = ak__conv_wino_create(M, C, &st->wino);
    if (s == AK_OK && kind != NCHWC_CONV) s = nchwc_pack(st, W->data);
    if (s != AK_OK) {
        nchwc_destroy(st);
        return s;
    }
    *state = st;
    return AK_OK;
}

static int blocked(const ak__op_ctx *ctx, const char *side) {
    return ak__attr_int(ctx->node, side, 0) != 0;
}

/* Output rows this short or shorter are gathered (below): their tiles are narrow (7 = 3 +
 * 4, 14 = 5 + 5 + 4) and each re-reads a panel's weights; on ResNet-50 (one thread) the
 * 3×3 layers on 7×7 planes went 2.7–3.1 → 2.3–2.6 ms and the stride-2 one on 28×28
 * 2.4–2.7 → 2.2–2.5 ms, while the one on 56×56 (28-wide rows) did not gain. */
#define GATHER_MAX_WIDTH 14
/* ... unless the copy of one image would pass this (a 7×7 window over 2048 channels on a
 * 14×14 plane would gather 78 MB): the padded copy then, about taps times smaller. A
 * variable for the tests (0: never gather). */
uint64_t ak__nchwc_gather_max_bytes = (uint64_t)8 << 20;

/* A conv layer's inputs, one of
 *   pointwise  (1×1, stride 1, no pads) X in place, its plane one row of tiles;
 *   gathered   (a strided 1×1, rows of at most GATHER_MAX_WIDTH outputs) a copy of
 *              what each tap reads for each output, compact: block (cb, tap) a plane of
 *              P positions, so that the layer runs as a 1×1 over C·taps channels (the
 *              strided 1×1 had read one position in two of each row: 2.16 → 1.97 ms,
 *              2.50 → 2.06 ms on ResNet-50's downsamples);
 *   padded     the image zero-padded to Hp × Wp, or X in place when no window leaves it;
 * returns the floats of the copy (0: X in place). */
static uint64_t conv_inputs(nchwc_run *r) {
    const ak__nn_geom *g = &r->g;
    int one = g->k[0] == 1 && g->k[1] == 1;
    int no_pads = !g->pb[0] && !g->pb[1] && !g->pe[0] && !g->pe[1];
    r->pointwise = one && g->s[0] == 1 && g->s[1] == 1 && no_pads;
    uint64_t gather_floats = (uint64_t)r->st->C * (uint64_t)r->st->taps * r->P;
    r->gathered = !r->pointwise && ((one && no_pads) || g->out[1] <= GATHER_MAX_WIDTH) &&
                  gather_floats * sizeof(float) <= ak__nchwc_gather_max_bytes;
    if (r->pointwise) return 0;
    if (r->gathered) return (uint64_t)r->N * gather_floats;
    int64_t reach[2];
    for (int a = 0; a < 2; a++) {
        reach[a] = (g->out[a] - 1) * g->s[a] + (g->k[a] - 1) * g->d[a] + 1;
        if (reach[a] < g->pb[a] + g->in[a]) reach[a] = g->pb[a] + g->in[a];
    }
    r->Hp = reach[0], r->Wp = reach[1];
    if (!g->pb[0] && !g->pb[1] && r->Hp == g->in[0] && r->Wp == g->in[1]) return 0;
    return (uint64_t)r->N * (uint64_t)r->st->C * (uint64_t)(r->Hp * r->Wp);
}

/* Geometry and checks shared by reshape and run; *ws_floats: the reorder scratch and the
 * direct kind's row buffers. */
static ak_status nchwc_plan(ak__op_ctx *ctx, nchwc_run *r, size_t *ws_floats) {
    const nchwc_state *st = ctx->state;
    const ak__tensor *X, *W, *B = ak__op_in(ctx, 2);
    AK_CHECK(ak__op_require(ctx, 0, &X));
    AK_CHECK(ak__op_require(ctx, 1, &W));
    AK_CHECK(ak__op_check_type(ctx, 0, X, AK_ELEM_F32));
    if (X->rank != 4 || X->dims[1] != st->C)
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "X must be (N, %lld, H, W)",
                          (long long)st->C);
    if (B && (B->type != AK_ELEM_F32 || B->rank != 1 || B->dims[0] != st->M))
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "B must be float32 (%lld)",
                          (long long)st->M);
    memset(r, 0, sizeof *r);
    r->st = st;
    AK_CHECK(ak__nn_geom_init(ctx, 2, X->dims + 2, W->dims + 2, 0, &r->g));
    AK_CHECK(ak__nn_parse_activation(ctx, &r->act));
    r->N = X->dims[0];
    r->P = (uint64_t)(r->g.out[0] * r->g.out[1]);
    r->Pin = (uint64_t)(r->g.in[0] * r->g.in[1]);
    uint64_t xf = (uint64_t)r->N * (uint64_t)st->C * r->Pin, yf = (uint64_t)r->N * (uint64_t)st->M * r->P;
    r->reorder_x = st->kind != NCHWC_DIRECT && !blocked(ctx, "x_blocked"); /* stems read it plain */
    r->reorder_z = ak__op_in(ctx, 3) && !blocked(ctx, "z_blocked");
    r->reorder_y = !blocked(ctx, "y_blocked");
    if (st->kind == NCHWC_DIRECT)
        r->rowbuf_floats = (size_t)(st->C * r->g.k[0] * direct_rowbuf_width(&r->g));
    int threads = ak__nn_pool_threads(ctx);
    r->winograd = st->kind == NCHWC_CONV &&
                  ak__conv_wino_usable(st->wino, &r->g, st->M, st->C, 1) &&
                  ak__param_int(AK_PARAM_CONV_WINOGRAD) && ak__conv_wino_pays(&r->g);
    uint64_t padf = st->kind != NCHWC_CONV ? 0
                    : r->winograd          ? ak__conv_wino_workspace_floats(st->wino, &r->g, 1, threads)
                                           : conv_inputs(r);
    r->pad_copy = !r->winograd && padf != 0;
    *ws_floats = (r->reorder_x ? xf : 0) + (r->reorder_z ? yf : 0) + (r->reorder_y ? yf : 0) +
                 r->rowbuf_floats * (size_t)threads + padf;
    return AK_OK;
}

static ak_status nchwc_reshape(ak__op_ctx *ctx) {
    nchwc_run r;
    size_t ws;
    AK_CHECK(nchwc_plan(ctx, &r, &ws));
    int64_t dims[4] = {r.N, r.st->M, r.g.out[0], r.g.out[1]};
    AK_CHECK(ak__op_set_output(ctx, 0, AK_ELEM_F32, 4, dims));
    const ak__tensor *Z = ak__op_in(ctx, 3);
    if (Z && (Z->type != AK_ELEM_F32 || Z->rank != 4 || memcmp(Z->dims, dims, sizeof dims) != 0))
        return AK_OP_FAIL(ctx->node, AK_ERR_INVALID_MODEL, "Z must be float32 shaped like Y");
    ctx->workspace_bytes = ws * sizeof(float);
    nchwc_state *st = ctx->state; /* the weights of the path taken, packed once */
    return r.winograd ? ak__conv_wino_prepare(st->wino, ctx->inputs[1]->data)
                      : nchwc_pack(st, ctx->inputs[1]->data);
}

/* Bytes a conv task's weights (per panel) and input rows (per output row) may each hold:
 * half of a 1 MiB L2 (a quarter measured slower on ResNet-50's layer4). */
#define TASK_CACHE_BYTES ((size_t)512 << 10)

/* Tasks of the row kinds: depthwise, one block by bands of rows; stems, every panel over
 * one output row (fine tasks even out what the two vCPUs get done); conv, groups of
 * panels × bands of rows sized to TASK_CACHE_BYTES (a downsampling 1×1 whose input is
 * large and weights small runs all its panels over each band; a 3×3 with 9 MB of weights
 * keeps one panel over the whole plane). Bands then split until every thread has 4 tasks. */
static void plan_bands(nchwc_run *r, int threads) {
    const nchwc_state *st = r->st;
    int64_t OH = r->g.out[0];
    r->group_panels = r->panels; /* depthwise: a task's plane is one block, a single group */
    r->rows_per_task = st->kind == NCHWC_DIRECT ? 1 : OH; /* a stem refills its rows per row */
    if (st->kind == NCHWC_CONV) {
        size_t panel_bytes = (size_t)st->K * (size_t)st->pb * BLK * sizeof(float);
        int64_t window = (r->g.k[0] - 1) * r->g.d[0] + 1; /* rows an output row reads */
        int64_t fresh = r->g.s[0] < window ? r->g.s[0] : window; /* of them not read before */
        size_t row_bytes = (size_t)(st->C * fresh * r->Wp) * sizeof(float);
        size_t gp = TASK_CACHE_BYTES / panel_bytes, rows = TASK_CACHE_BYTES / row_bytes;
        r->group_panels = gp < 1 ? 1 : gp < r->panels ? gp : r->panels;
        r->rows_per_task = rows < 1 ? 1 : rows < (size_t)OH ? (int64_t)rows : OH;
    }
    size_t planes = (size_t)r->N * (st->kind == NCHWC_DEPTHWISE ? (size_t)(st->M / BLK) : 1);
    r->groups = (r->panels + r->group_panels - 1) / r->group_panels;
    size_t want = 4 * (size_t)threads, have = planes * r->groups;
    int64_t bands = (OH + r->rows_per_task - 1) / r->rows_per_task;
    if (have * (size_t)bands < want) bands = (int64_t)((want + have - 1) / have);
    if (bands > OH) bands = OH;
    r->rows_per_task = (OH + bands - 1) / bands;
    r->row_tasks = (size_t)((OH + r->rows_per_task - 1) / r->rows_per_task);
    r->tasks = have * r->row_tasks;
}

/* r's inputs and output, the plain sides reordered into the workspace; returns the
 * workspace past them (the row buffers, the padded copy or Winograd's scratch). */
static float *nchwc_bind(ak__op_ctx *ctx, nchwc_run *r, ak__tensor *Y) {
    const nchwc_state *st = r->st;
    const ak__tensor *B = ak__op_in(ctx, 2), *Z = ak__op_in(ctx, 3);
    float *scratch = ctx->workspace;
    r->x = ctx->inputs[0]->data;
    if (r->reorder_x) {
        reorder(ctx->pool, r->x, scratch, r->N, st->C, r->Pin, 1);
        r->x = scratch;
        scratch += (uint64_t)r->N * (uint64_t)st->C * r->Pin;
    }
    r->z = Z ? Z->data : NULL;
    if (r->reorder_z) {
        reorder(ctx->pool, Z->data, scratch, r->N, st->M, r->P, 1);
        r->z = scratch;
        scratch += Y->count;
    }
    r->y = r->reorder_y ? scratch : Y->data;
    if (r->reorder_y) scratch += Y->count;
    r->bias = B ? B->data : NULL;
    r->act_fused = ak__nn_act_fusable(&r->act, NULL, NULL, &r->fin);
    if (!r->act_fused) r->fin = (ak__sgemm_tile_epi){NULL, NULL, AK_SGEMM_ACT_NONE, 0.0f, 0.0f, NULL};
    r->k = ak__kernels_active();
    r->win = ak__nn_win2d(&r->g);
    if (st->w && st->kind != NCHWC_DEPTHWISE) /* panels of packed weights (none: Winograd) */
        r->panels = (size_t)((st->M / BLK + st->pb - 1) / st->pb);
    else
        r->panels = (size_t)(st->M / BLK);
    return scratch;
}

static ak_status nchwc_run_op(ak__op_ctx *ctx) {
    nchwc_run r;
    size_t ws;
    AK_CHECK(nchwc_plan(ctx, &r, &ws));
    ak__tensor *Y = ak__op_out(ctx, 0);
    if (!Y || Y->count == 0) return AK_OK;
    if (ws * sizeof(float) > ctx->workspace_bytes)
        return AK_OP_FAIL(ctx->node, AK_ERR_INTERNAL, "workspace of %zu bytes, %zu needed",
                          ctx->workspace_bytes, ws * sizeof(float));
    const nchwc_state *st = r.st;
    if (!r.winograd && !st->w) /* reshape packs them for the path it plans */
        return AK_OP_FAIL(ctx->node, AK_ERR_INTERNAL, "weights not packed before the run");
    float *scratch = nchwc_bind(ctx, &r, Y);
    int threads = ak__nn_pool_threads(ctx);
    r.rowbufs = scratch;
    if (r.pad_copy) {
        r.padded = scratch + r.rowbuf_floats * (size_t)threads;
        ak__nn_parallel(ctx->pool, (size_t)r.N * (size_t)(st->C / BLK), 1,
                        r.gathered ? conv_gather_task : conv_pad_task, &r);
        if (r.gathered) r.x = r.padded, r.Pin = r.P;
    }
    if (r.winograd) {
        size_t used = (size_t)(scratch - (float *)ctx->workspace) * sizeof(float);
        ak__conv_igemm_args a = {&r.g, r.N, st->C, r.x, r.bias, r.z, r.y, r.act, ctx->pool,
                                 scratch, ctx->workspace_bytes - used, 1, 1};
        AK_CHECK(ak__conv_wino_run(st->wino, &a));
    } else if (st->kind == NCHWC_CONV && (r.pointwise || r.gathered)) {
        r.chunks = (r.P + PW_CHUNK - 1) / PW_CHUNK;
        ak__nn_parallel(ctx->pool, (size_t)r.N * r.chunks * r.panels, 1, pw_task, &r);
    } else {
        plan_bands(&r, threads);
        ak_parallel_fn fn = st->kind == NCHWC_DEPTHWISE ? dw_task
                            : st->kind == NCHWC_DIRECT  ? direct_task
                                                        : conv_task;
        ak__nn_parallel(ctx->pool, r.tasks, 1, fn, &r);
    }
    if (r.reorder_y) reorder(ctx->pool, r.y, Y->data, r.N, st->M, r.P, 0);
    return AK_OK;
}

/* com.accelkit NchwcConv: Conv/FusedConv on blocked tensors (see the top of this file). */
const ak__op_def ak__nn_nchwc_conv = {"com.accelkit", "NchwcConv", 1, AK_OP_Y_OVER_Z, nchwc_create,
                                      nchwc_destroy, nchwc_reshape, nchwc_run_op};
