/* The sweep's checkers for the ONNX engine's kernels (the inference block of
 * kernels/kernels.def), included by test_sweep.c after its helpers; SWEEP_INFER_CHECKERS
 * lists them for its checker table.
 *
 * Tolerances:
 * - bit for bit: moves (transposes, gathers, copies, the Winograd pad), max pooling, the
 *   Winograd block finish, elementwise maps, Reduce* and LayerNormalization rows (the
 *   variants run the references' arithmetic lane by lane);
 * - sums of products (conv rows, depthwise rows and planes): |got − ref| ≤
 *   (K + 2)·ε_f32·Σ|terms| per output, terms being the products, the bias and Z (the
 *   variants fuse multiply-adds the references round twice; the finishes are
 *   1-Lipschitz);
 * - Winograd transforms: 16·ε_f32·Σ|coefficient·value| over the 36 values an output
 *   combines (|Bᵀ|⊗|Bᵀ| or |Aᵀ|⊗|Aᵀ|);
 * - the tile finish: 4·ε_f32·(|y| + |bias| + |z|) (the variants add (y + bias) + z, the
 *   reference y + (bias + z));
 * - Softmax rows and columns: (n + 8)·ε_f32·|ref| (LogSoftmax: ·(2 + |x| + |ref|)), the
 *   lane counts summing in other orders. */
#ifndef AK_TESTS_KERNELS_SWEEP_INFER_H
#define AK_TESTS_KERNELS_SWEEP_INFER_H

/* The finishes every conv-like kernel is tried with: none, ReLU, Clip. */
static const ak__sgemm_tile_epi infer_finishes[] = {
    {NULL, NULL, AK_SGEMM_ACT_NONE, 0.0f, 0.0f, NULL},
    {NULL, NULL, AK_SGEMM_ACT_MAX, 0.0f, 0.0f, NULL},
    {NULL, NULL, AK_SGEMM_ACT_CLAMP, -0.75f, 0.5f, NULL},
};
#define N_INFER_FINISHES (sizeof infer_finishes / sizeof *infer_finishes)

/* Floats of a buffer filled with a byte pattern: outputs a kernel must not write keep it. */
static float *infer_pattern(size_t n) {
    float *p = xmalloc(n * sizeof *p);
    memset(p, 0x5a, n * sizeof *p);
    return p;
}

/* ---- NCHWc conv row ------------------------------------------------------------------ */

typedef struct conv_row_case {
    int lanes, nb, blocks, kh, kw, s, d;
    int64_t n;
    int bias, z;
} conv_row_case;

static void check_conv_row_at(const sweep_case *c, const conv_row_case *rc,
                              const ak__sgemm_tile_epi *fin, uint64_t *seed) {
    int64_t L = rc->lanes, n = rc->n;
    int64_t row = ((n - 1) * rc->s + (rc->kw - 1) * rc->d + 1) * L;
    ak__kf_nchwc_tile t = {.blocks = rc->blocks, .kh = rc->kh, .kw = rc->kw, .lanes = rc->lanes};
    t.sx = rc->s * L, t.dx = rc->d * L, t.ky_stride = row, t.cb_stride = rc->kh * row;
    size_t nx = (size_t)(rc->blocks * t.cb_stride), K = (size_t)(rc->blocks * rc->kh * rc->kw * L);
    size_t width = (size_t)rc->nb * 8, plane = (size_t)n * 8 + 8; /* 8 floats between blocks */
    size_t ny = (rc->nb - 1) * plane + (size_t)n * 8;
    float *x = xmalloc(nx * 4), *w = xmalloc(K * width * 4), *bias = xmalloc(width * 4);
    float *z = xmalloc(ny * 4), *want = infer_pattern(ny);
    fill_random("F32", x, nx, seed, 2.0f);
    fill_random("F32", w, K * width, seed, 1.0f);
    fill_random("F32", bias, width, seed, 1.0f);
    fill_random("F32", z, ny, seed, 1.0f);
    guarded_buf g = out_alloc(ny * 4, 4);
    memcpy(g.data, want, ny * 4);
    t.x = x, t.w = w, t.bias = rc->bias ? bias : NULL, t.z = rc->z ? z : NULL, t.plane = plane;
    t.y = want;
    KERNEL(c, c->ref, ak__kf_nchwc_conv_row)(&t, rc->nb, n, fin);
    t.y = g.data;
    KERNEL(c, c->k, ak__kf_nchwc_conv_row)(&t, rc->nb, n, fin);
    const float *got = g.data;
    for (size_t at = 0; at < ny; at++) {
        size_t blk = at / plane, r = at % plane / 8, l = blk * 8 + at % 8;
        char where[160];
        snprintf(where, sizeof where, "lanes=%d nb=%d n=%lld blocks=%d %dx%d s=%d d=%d act=%d "
                 "[%zu]", rc->lanes, rc->nb, (long long)n, rc->blocks, rc->kh, rc->kw, rc->s,
                 rc->d, fin->act, at);
        if (at % plane >= (size_t)n * 8) { /* between the blocks: untouched */
            if (memcmp(&got[at], &want[at], 4) != 0)
                fail_msg("%s %s %s: wrote between the blocks", c->k->name, c->info->name, where);
            continue;
        }
        double mag = (rc->bias ? fabs(bias[l]) : 0) + (rc->z ? fabs(z[at]) : 0);
        const float *wk = w;
        for (int64_t cb = 0; cb < rc->blocks; cb++)
            for (int64_t ky = 0; ky < rc->kh; ky++)
                for (int64_t kx = 0; kx < rc->kw; kx++)
                    for (int64_t ln = 0; ln < L; ln++, wk += width)
                        mag += fabs((double)x[cb * t.cb_stride + ky * t.ky_stride + kx * t.dx +
                                              (int64_t)r * t.sx + ln] * wk[l]);
        expect_within(c, got[at], want[at], mag * FLT_EPSILON * (double)(K + 2) + 1e-30, where);
    }
    expect_guards(c, &g, (size_t)n);
    guarded_free(&g);
    free(x), free(w), free(bias), free(z), free(want);
}

static void check_nchwc_conv_row(const sweep_case *c) {
    uint64_t seed = 31;
    /* n around the tiles (6 and 12 outputs, evened splits) */
    static const int64_t ns[] = {1, 2, 5, 6, 7, 11, 12, 13, 17, 24, 25};
    for (size_t i = 0; i < sizeof ns / sizeof *ns; i++)
        for (int lanes = 1; lanes <= 8; lanes += 7)
            for (int nb = 1; nb <= 4; nb++) { /* 3, 4: panels of avx512w, parts elsewhere */
                int v = (int)i + lanes + nb;
                conv_row_case rc = {lanes, nb, 1 + v % 3, 1 + v % 3, 1 + (v / 2) % 3,
                                    1 + v % 2, 1 + (v / 3) % 2, ns[i], v % 2, (v / 2) % 2};
                check_conv_row_at(c, &rc, &infer_finishes[(size_t)v % N_INFER_FINISHES], &seed);
            }
}

/* ---- windows over a blocked plane: depthwise rows, max pool ------------------------- */

/* Geometries with borders on every side, strides, dilations and rows longer than the
 * kernels' pieces (4, 8 and 64 outputs). */
static const ak__kf_win2d *infer_windows(size_t *count) {
    static ak__kf_win2d w[8];
    static const int64_t shapes[8][7] = {
        /* H, W, k, s, d, pad */
        {1, 1, 1, 1, 1, 0, 0},  {5, 7, 3, 1, 1, 1, 0},   {9, 13, 3, 2, 1, 1, 0},
        {6, 11, 5, 1, 2, 2, 0}, {4, 140, 3, 2, 1, 1, 0}, {7, 9, 2, 2, 1, 0, 0},
        {3, 70, 3, 1, 1, 0, 0}, {8, 8, 7, 1, 1, 3, 0},
    };
    for (int i = 0; i < 8; i++) {
        const int64_t *s = shapes[i];
        for (int a = 0; a < 2; a++) {
            w[i].in[a] = s[a], w[i].k[a] = s[2], w[i].s[a] = s[3], w[i].d[a] = s[4];
            w[i].pb[a] = s[5];
            w[i].out[a] = (s[a] + 2 * s[5] - (s[2] - 1) * s[4] - 1) / s[3] + 1;
        }
    }
    *count = 8;
    return w;
}

static void check_dw_rows_at(const sweep_case *c, const ak__kf_win2d *g, int with_bias,
                             int with_z, const ak__sgemm_tile_epi *fin, uint64_t *seed) {
    size_t nx = (size_t)(g->in[0] * g->in[1]) * 8, taps = (size_t)(g->k[0] * g->k[1]);
    size_t ny = (size_t)(g->out[0] * g->out[1]) * 8;
    float *x = xmalloc(nx * 4), *w = xmalloc(taps * 32), *bias = xmalloc(32);
    float *z = xmalloc(ny * 4), *want = xmalloc(ny * 4);
    fill_random("F32", x, nx, seed, 2.0f);
    fill_random("F32", w, taps * 8, seed, 1.0f);
    fill_random("F32", bias, 8, seed, 1.0f);
    fill_random("F32", z, ny, seed, 1.0f);
    guarded_buf gy = out_alloc(ny * 4, 4);
    ak__kf_nchwc_dw d = {x, w, with_bias ? bias : NULL, with_z ? z : NULL, want};
    KERNEL(c, c->ref, ak__kf_nchwc_dw_rows)(g, &d, 0, g->out[0], fin);
    d.y = gy.data; /* the variant in two bands, as tasks split a plane */
    int64_t mid = g->out[0] / 2;
    KERNEL(c, c->k, ak__kf_nchwc_dw_rows)(g, &d, 0, mid, fin);
    KERNEL(c, c->k, ak__kf_nchwc_dw_rows)(g, &d, mid, g->out[0], fin);
    for (int64_t oy = 0; oy < g->out[0]; oy++)
        for (int64_t ox = 0; ox < g->out[1]; ox++)
            for (int l = 0; l < 8; l++) {
                size_t at = (size_t)((oy * g->out[1] + ox) * 8 + l);
                double mag = (with_bias ? fabs(bias[l]) : 0) + (with_z ? fabs(z[at]) : 0);
                for (int64_t ky = 0; ky < g->k[0]; ky++)
                    for (int64_t kx = 0; kx < g->k[1]; kx++) {
                        int64_t iy = oy * g->s[0] - g->pb[0] + ky * g->d[0];
                        int64_t ix = ox * g->s[1] - g->pb[1] + kx * g->d[1];
                        if (iy >= 0 && iy < g->in[0] && ix >= 0 && ix < g->in[1])
                            mag += fabs((double)x[(iy * g->in[1] + ix) * 8 + l] *
                                        w[(ky * g->k[1] + kx) * 8 + l]);
                    }
                char where[160];
                snprintf(where, sizeof where, "%lldx%lld k%lld s%lld d%lld p%lld act=%d (%lld,%lld,%d)",
                         (long long)g->in[0], (long long)g->in[1], (long long)g->k[0],
                         (long long)g->s[0], (long long)g->d[0], (long long)g->pb[0], fin->act,
                         (long long)oy, (long long)ox, l);
                expect_within(c, ((float *)gy.data)[at], want[at],
                              mag * FLT_EPSILON * (double)(taps + 2) + 1e-30, where);
            }
    expect_guards(c, &gy, ny);
    guarded_free(&gy);
    free(x), free(w), free(bias), free(z), free(want);
}

static void check_nchwc_dw_rows(const sweep_case *c) {
    uint64_t seed = 32;
    size_t nw;
    const ak__kf_win2d *ws = infer_windows(&nw);
    for (size_t i = 0; i < nw; i++)
        for (size_t f = 0; f < N_INFER_FINISHES; f++)
            check_dw_rows_at(c, &ws[i], (int)(i + f) % 2, (int)(i + f) / 2 % 2, &infer_finishes[f],
                             &seed);
}

static void check_nchwc_maxpool_row(const sweep_case *c) {
    uint64_t seed = 33;
    size_t nw;
    const ak__kf_win2d *ws = infer_windows(&nw);
    for (size_t i = 0; i < nw; i++)
        for (int blocked = 0; blocked <= 1; blocked++) {
            const ak__kf_win2d *g = &ws[i];
            size_t nx = (size_t)(g->in[0] * g->in[1]) * 8;
            uint64_t P = (uint64_t)g->out[1] + 5; /* planes 5 floats longer than the row */
            size_t ny = blocked ? (size_t)g->out[1] * 8 : 8 * (size_t)P;
            float *x = xmalloc(nx * 4), *want = infer_pattern(ny);
            fill_random("F32", x, nx, &seed, 4.0f);
            guarded_buf gy = out_alloc(ny * 4, 4);
            for (int64_t oy = 0; oy < g->out[0]; oy++) {
                memset(want, 0x5a, ny * 4);
                memcpy(gy.data, want, ny * 4);
                KERNEL(c, c->ref, ak__kf_nchwc_maxpool_row)(g, x, oy, want, P, blocked);
                KERNEL(c, c->k, ak__kf_nchwc_maxpool_row)(g, x, oy, gy.data, P, blocked);
                char how[96];
                snprintf(how, sizeof how, " (%lldx%lld k%lld s%lld, row %lld, blocked %d)",
                         (long long)g->in[0], (long long)g->in[1], (long long)g->k[0],
                         (long long)g->s[0], (long long)oy, blocked);
                expect_same_bytes(c, gy.data, want, ny * 4, (size_t)g->out[1], how);
            }
            expect_guards(c, &gy, ny);
            guarded_free(&gy);
            free(x), free(want);
        }
}

/* ---- the GEMM convolutions' tile finish -------------------------------------------- */

static void check_tile_finish(const sweep_case *c) {
    uint64_t seed = 34;
    static const size_t ms[] = {1, 3, 6};
    for (size_t l = 0; l < N_LENGTHS; l++)
        for (size_t mi = 0; mi < 3; mi++)
            for (size_t f = 0; f < N_INFER_FINISHES; f++) {
                size_t m = ms[mi], n = lengths[l], ld = n + 3, ny = m * ld;
                int variant = (int)(l + mi + f) % 4; /* bias and z present or not */
                float *y0 = xmalloc(ny * 4), *bias = xmalloc(m * 4), *z = xmalloc(ny * 4);
                float *want = xmalloc(ny * 4);
                fill_random("F32", y0, ny, &seed, 2.0f);
                fill_random("F32", bias, m, &seed, 1.0f);
                fill_random("F32", z, ny, &seed, 1.0f);
                ak__sgemm_tile_epi fin = infer_finishes[f];
                fin.bias = variant & 1 ? bias : NULL, fin.z = variant & 2 ? z : NULL;
                guarded_buf g = out_alloc(ny * 4, 4);
                float *got = g.data;
                memcpy(want, y0, ny * 4);
                memcpy(got, y0, ny * 4);
                KERNEL(c, c->ref, ak__kf_tile_finish)(want, ld, m, n, &fin);
                KERNEL(c, c->k, ak__kf_tile_finish)(got, ld, m, n, &fin);
                for (size_t r = 0; r < m; r++)
                    for (size_t j = 0; j < ld; j++) {
                        size_t at = r * ld + j;
                        char where[96];
                        snprintf(where, sizeof where, "%zux%zu act=%d bias/z=%d [%zu][%zu]", m, n,
                                 fin.act, variant, r, j);
                        if (j >= n) {
                            if (memcmp(&got[at], &y0[at], 4) != 0)
                                fail_msg("%s %s %s: wrote the padding", c->k->name, c->info->name,
                                         where);
                            continue;
                        }
                        double mag = fabs(y0[at]) + (fin.bias ? fabs(bias[r]) : 0) +
                                     (fin.z ? fabs(z[at]) : 0);
                        expect_within(c, got[at], want[at], 4.0 * FLT_EPSILON * mag + 1e-30, where);
                    }
                expect_guards(c, &g, n);
                guarded_free(&g);
                free(y0), free(bias), free(z), free(want);
            }
}

/* ---- depthwise over plain planes ----------------------------------------------------- */

/* 32-byte aligned zeroed floats (the interleaved kernel's buffers). */
static float *infer_aligned(size_t n) {
    float *p = aligned_alloc(32, (n * sizeof *p + 63) / 32 * 32);
    assert_non_null(p);
    memset(p, 0, n * sizeof *p);
    return p;
}

static void check_dw_rows(const sweep_case *c) {
    uint64_t seed = 35;
    static const size_t ows[] = {1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 40, 57};
    static const size_t tapss[] = {1, 4, 9, 25};
    for (size_t o = 0; o < sizeof ows / sizeof *ows; o++)
        for (size_t ti = 0; ti < 4; ti++)
            for (size_t f = 0; f < N_INFER_FINISHES; f++) {
                size_t OW = ows[o], OH = 1 + (o + f) % 3, taps = tapss[ti];
                size_t row_step = OW + 11, off[AK_KF_DW_MAX_TAPS], reach = 0;
                for (size_t t = 0; t < taps; t++) {
                    off[t] = (t * 7) % (2 * row_step);
                    if (off[t] > reach) reach = off[t];
                }
                size_t nsc = (OH - 1) * row_step + reach + (OW + 7) / 8 * 8;
                float *sc = xmalloc(nsc * 4), *w = xmalloc(taps * 4), *z = xmalloc(OH * OW * 4);
                float *want = xmalloc(OH * OW * 4);
                fill_random("F32", sc, nsc, &seed, 2.0f);
                fill_random("F32", w, taps, &seed, 1.0f);
                fill_random("F32", z, OH * OW, &seed, 1.0f);
                int with_z = (int)(o + ti) % 2;
                guarded_buf g = out_alloc(OH * OW * 4, 4);
                ak__kf_dw_plane p = {sc, off, w, taps, OH, OW, row_step, 0.375f,
                                     with_z ? z : NULL, want};
                KERNEL(c, c->ref, ak__kf_dw_rows)(&p, &infer_finishes[f]);
                p.y = g.data;
                KERNEL(c, c->k, ak__kf_dw_rows)(&p, &infer_finishes[f]);
                for (size_t oy = 0; oy < OH; oy++)
                    for (size_t ox = 0; ox < OW; ox++) {
                        double mag = 0.375 + (with_z ? fabs(z[oy * OW + ox]) : 0);
                        for (size_t t = 0; t < taps; t++)
                            mag += fabs((double)w[t] * sc[oy * row_step + off[t] + ox]);
                        char where[96];
                        snprintf(where, sizeof where, "%zux%zu taps=%zu act=%d (%zu,%zu)", OH, OW,
                                 taps, infer_finishes[f].act, oy, ox);
                        expect_within(c, ((float *)g.data)[oy * OW + ox], want[oy * OW + ox],
                                      mag * FLT_EPSILON * (double)(taps + 2) + 1e-30, where);
                    }
                expect_guards(c, &g, OW);
                guarded_free(&g);
                free(sc), free(w), free(z), free(want);
            }
}

static void check_strided_copy(const sweep_case *c) {
    uint64_t seed = 36;
    for (int64_t stride = 1; stride <= 3; stride++)
        for (size_t l = 0; l < N_LENGTHS; l++) {
            size_t n = lengths[l], ns = n ? (n - 1) * (size_t)stride + 1 : 0;
            float *src = xmalloc(ns * 4), *want = xmalloc(n * 4);
            fill_random("F32", src, ns, &seed, 4.0f);
            guarded_buf g = out_alloc(n * 4, 4);
            KERNEL(c, c->ref, ak__kf_strided_copy)(want, src, (int64_t)n, stride);
            KERNEL(c, c->k, ak__kf_strided_copy)(g.data, src, (int64_t)n, stride);
            expect_same_bytes(c, g.data, want, n * 4, n, stride == 1 ? " stride 1" : " strided");
            expect_guards(c, &g, n);
            guarded_free(&g);
            free(src), free(want);
        }
}

static void check_dw8_planes_at(const sweep_case *c, const ak__kf_win2d *g, int with_z,
                                const ak__sgemm_tile_epi *fin, uint64_t *seed) {
    size_t rows = (size_t)((g->out[0] - 1) * g->s[0] + (g->k[0] - 1) * g->d[0] + 1);
    size_t cols = (size_t)((g->out[1] - 1) * g->s[1] + (g->k[1] - 1) * g->d[1] + 1);
    uint64_t Pin = (uint64_t)(g->in[0] * g->in[1]), P = (uint64_t)(g->out[0] * g->out[1]);
    size_t taps = (size_t)(g->k[0] * g->k[1]), off[AK_KF_DW_MAX_TAPS];
    for (int64_t ky = 0, t = 0; ky < g->k[0]; ky++)
        for (int64_t kx = 0; kx < g->k[1]; kx++, t++)
            off[t] = ((size_t)(ky * g->d[0]) * cols + (size_t)(kx * g->d[1])) * 8;
    float *x = xmalloc(8 * Pin * 4), *wt = infer_aligned(taps * 8), bias[8];
    float *z = xmalloc(8 * P * 4), *want = xmalloc(8 * P * 4);
    fill_random("F32", x, 8 * Pin, seed, 2.0f);
    fill_random("F32", wt, taps * 8, seed, 1.0f);
    fill_random("F32", bias, 8, seed, 1.0f);
    fill_random("F32", z, 8 * P, seed, 1.0f);
    guarded_buf gy = out_alloc(8 * P * 4, 4);
    float *y[2] = {want, gy.data};
    const ak__kernels *tables[2] = {c->ref, c->k};
    for (int v = 0; v < 2; v++) {
        float *sc8 = infer_aligned(8 * rows * cols), *out8 = infer_aligned(8 * (P + 7) / 8 * 8);
        ak__kf_dw8 a = {.x = x, .Pin = Pin, .P = P, .H = g->in[0], .W = g->in[1],
                        .pt = g->pb[0], .pl = g->pb[1], .s0 = g->s[0], .s1 = g->s[1],
                        .rows = rows, .cols = cols, .OW = (size_t)g->out[1], .wt = wt,
                        .bias8 = bias, .off = off, .taps = taps, .sc8 = sc8, .out8 = out8,
                        .z = with_z ? z : NULL, .y = y[v]};
        KERNEL(c, tables[v], ak__kf_dw8_planes)(&a, fin);
        free(sc8), free(out8);
    }
    for (int j = 0; j < 8; j++)
        for (uint64_t p = 0; p < P; p++) {
            int64_t oy = (int64_t)(p / (uint64_t)g->out[1]), ox = (int64_t)(p % (uint64_t)g->out[1]);
            double mag = fabs(bias[j]) + (with_z ? fabs(z[(uint64_t)j * P + p]) : 0);
            for (int64_t ky = 0; ky < g->k[0]; ky++)
                for (int64_t kx = 0; kx < g->k[1]; kx++) {
                    int64_t iy = oy * g->s[0] - g->pb[0] + ky * g->d[0];
                    int64_t ix = ox * g->s[1] - g->pb[1] + kx * g->d[1];
                    if (iy >= 0 && iy < g->in[0] && ix >= 0 && ix < g->in[1])
                        mag += fabs((double)x[(uint64_t)j * Pin + (uint64_t)(iy * g->in[1] + ix)] *
                                    wt[(size_t)(ky * g->k[1] + kx) * 8 + (size_t)j]);
                }
            char where[128];
            snprintf(where, sizeof where, "%lldx%lld k%lld s%lld d%lld p%lld act=%d plane %d [%llu]",
                     (long long)g->in[0], (long long)g->in[1], (long long)g->k[0],
                     (long long)g->s[0], (long long)g->d[0], (long long)g->pb[0], fin->act, j,
                     (unsigned long long)p);
            expect_within(c, ((float *)gy.data)[(uint64_t)j * P + p], want[(uint64_t)j * P + p],
                          mag * FLT_EPSILON * (double)(taps + 2) + 1e-30, where);
        }
    expect_guards(c, &gy, P);
    guarded_free(&gy);
    free(x), free(wt), free(z), free(want);
}

static void check_dw8_planes(const sweep_case *c) {
    uint64_t seed = 37;
    size_t nw;
    const ak__kf_win2d *ws = infer_windows(&nw);
    for (size_t i = 0; i < nw; i++)
        for (size_t f = 0; f < N_INFER_FINISHES; f++)
            check_dw8_planes_at(c, &ws[i], (int)(i + f) % 2, &infer_finishes[f], &seed);
}

/* ---- Winograd transforms ------------------------------------------------------------- */

/* |Bᵀ| and |Aᵀ| of F(4×4, 3×3), for the magnitude each output sums over. */
static const double wino_bt_abs[6][6] = {{4, 0, 5, 0, 1, 0}, {0, 4, 4, 1, 1, 0},
                                         {0, 4, 4, 1, 1, 0}, {0, 2, 1, 2, 1, 0},
                                         {0, 2, 1, 2, 1, 0}, {0, 4, 0, 5, 0, 1}};
static const double wino_at_abs[4][6] = {{1, 1, 1, 1, 1, 0}, {0, 1, 1, 2, 2, 0},
                                         {0, 1, 1, 4, 4, 0}, {0, 1, 1, 8, 8, 1}};

/* The geometry of an OH×OW output in 4×4 tiles, C input channels, slivers of nr. */
static ak__kf_wino wino_geometry(size_t OH, size_t OW, size_t C, size_t nr, size_t Mp) {
    ak__kf_wino w = {.OH = OH, .OW = OW, .C = C, .nr = nr, .Mp = Mp};
    size_t TH = (OH + 3) / 4;
    w.TW = (OW + 3) / 4, w.T = TH * w.TW;
    w.S = (w.T + nr - 1) / nr, w.Tp = w.S * nr;
    w.Hp = 4 * TH + 2, w.Wp = 4 * w.TW + 4;
    w.H = OH, w.W = OW, w.ph = w.pw = 1;
    return w;
}

static const size_t wino_shapes[][3] = {/* OH, OW, nr */
                                        {4, 4, 8},   {5, 9, 16},   {8, 20, 16},
                                        {13, 7, 24}, {16, 33, 16}, {9, 64, 8}};
#define N_WINO_SHAPES (sizeof wino_shapes / sizeof *wino_shapes)

static void check_wino_input(const sweep_case *c) {
    uint64_t seed = 38;
    for (size_t i = 0; i < N_WINO_SHAPES; i++) {
        size_t C = 3;
        ak__kf_wino w = wino_geometry(wino_shapes[i][0], wino_shapes[i][1], C, wino_shapes[i][2], 8);
        size_t plane = w.Hp * w.Wp, nv = 36 * w.S * C * w.nr;
        float *pad = xmalloc(C * plane * 4), *want = infer_pattern(nv), *got = infer_pattern(nv);
        fill_random("F32", pad, C * plane, &seed, 2.0f);
        for (size_t ch = 0; ch < C; ch++) {
            KERNEL(c, c->ref, ak__kf_wino_input)(&w, pad + ch * plane, ch, want);
            KERNEL(c, c->k, ak__kf_wino_input)(&w, pad + ch * plane, ch, got);
        }
        for (size_t ch = 0; ch < C; ch++)
            for (size_t t = 0; t < w.T; t++) {
                const float *d = pad + ch * plane + 4 * (t / w.TW) * w.Wp + 4 * (t % w.TW);
                for (size_t xi = 0; xi < 36; xi++) {
                    size_t r = xi / 6, k = xi % 6;
                    double mag = 0;
                    for (size_t a = 0; a < 6; a++)
                        for (size_t b = 0; b < 6; b++)
                            mag += wino_bt_abs[r][a] * wino_bt_abs[k][b] * fabs(d[a * w.Wp + b]);
                    size_t at = xi * w.S * C * w.nr + (t / w.nr * C + ch) * w.nr + t % w.nr;
                    char where[96];
                    snprintf(where, sizeof where, "%zux%zu nr=%zu channel %zu tile %zu xi %zu",
                             w.OH, w.OW, w.nr, ch, t, xi);
                    expect_within(c, got[at], want[at], 16.0 * FLT_EPSILON * mag + 1e-30, where);
                }
            }
        free(pad), free(want), free(got);
    }
}

static void check_wino_output(const sweep_case *c) {
    uint64_t seed = 39;
    for (size_t i = 0; i < N_WINO_SHAPES; i++) {
        size_t Mp = 8;
        ak__kf_wino w = wino_geometry(wino_shapes[i][0], wino_shapes[i][1], 2, wino_shapes[i][2], Mp);
        size_t nm = 36 * Mp * w.Tp, P = w.OH * w.OW;
        float *Mo = xmalloc(nm * 4), *want = xmalloc(P * 4);
        fill_random("F32", Mo, nm, &seed, 2.0f);
        for (size_t m = 0; m < Mp; m += 3) {
            guarded_buf g = out_alloc(P * 4, 4);
            KERNEL(c, c->ref, ak__kf_wino_output)(&w, Mo, m, want);
            KERNEL(c, c->k, ak__kf_wino_output)(&w, Mo, m, g.data);
            for (size_t oy = 0; oy < w.OH; oy++)
                for (size_t ox = 0; ox < w.OW; ox++) {
                    size_t t = oy / 4 * w.TW + ox / 4, r = oy % 4, k = ox % 4;
                    double mag = 0;
                    for (size_t a = 0; a < 6; a++)
                        for (size_t b = 0; b < 6; b++)
                            mag += wino_at_abs[r][a] * wino_at_abs[k][b] *
                                   fabs(Mo[(a * 6 + b) * Mp * w.Tp + m * w.Tp + t]);
                    char where[96];
                    snprintf(where, sizeof where, "%zux%zu nr=%zu channel %zu (%zu,%zu)", w.OH,
                             w.OW, w.nr, m, oy, ox);
                    expect_within(c, ((float *)g.data)[oy * w.OW + ox], want[oy * w.OW + ox],
                                  16.0 * FLT_EPSILON * mag + 1e-30, where);
                }
            expect_guards(c, &g, P);
            guarded_free(&g);
        }
        free(Mo), free(want);
    }
}

static void check_wino_pad_blocked(const sweep_case *c) {
    uint64_t seed = 40;
    static const size_t shapes[][6] = {/* H, W, ph, pw, extra rows, extra columns */
                                       {1, 1, 0, 0, 0, 0}, {3, 7, 1, 1, 1, 3}, {5, 8, 2, 1, 0, 2},
                                       {4, 9, 1, 2, 2, 0}, {2, 17, 0, 1, 1, 1}};
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
        const size_t *s = shapes[i];
        ak__kf_wino w = {.H = s[0], .W = s[1], .ph = s[2], .pw = s[3]};
        w.Hp = s[0] + s[2] + s[4], w.Wp = s[1] + s[3] + s[5];
        size_t nx = s[0] * s[1] * 8, ny = 8 * w.Hp * w.Wp;
        float *x = xmalloc(nx * 4), *want = infer_pattern(ny);
        fill_random("F32", x, nx, &seed, 4.0f);
        guarded_buf g = out_alloc(ny * 4, 4);
        memcpy(g.data, want, ny * 4);
        KERNEL(c, c->ref, ak__kf_wino_pad_blocked)(&w, x, want);
        KERNEL(c, c->k, ak__kf_wino_pad_blocked)(&w, x, g.data);
        expect_same_bytes(c, g.data, want, ny * 4, nx, " (padded planes)");
        expect_guards(c, &g, ny);
        guarded_free(&g);
        free(x), free(want);
    }
}

static void check_wino_finish_block(const sweep_case *c) {
    uint64_t seed = 41;
    for (size_t l = 0; l < N_LENGTHS; l++)
        for (size_t f = 0; f < N_INFER_FINISHES; f++) {
            size_t P = lengths[l];
            int variant = (int)(l + f) % 4;
            float *planes = xmalloc(8 * P * 4), bias[8], *z = xmalloc(8 * P * 4);
            float *want = xmalloc(8 * P * 4);
            fill_random("F32", planes, 8 * P, &seed, 2.0f);
            fill_random("F32", bias, 8, &seed, 1.0f);
            fill_random("F32", z, 8 * P, &seed, 1.0f);
            guarded_buf g = out_alloc(8 * P * 4, 4);
            const float *b = variant & 1 ? bias : NULL, *zz = variant & 2 ? z : NULL;
            KERNEL(c, c->ref, ak__kf_wino_finish_block)(planes, P, b, zz, want, &infer_finishes[f]);
            KERNEL(c, c->k, ak__kf_wino_finish_block)(planes, P, b, zz, g.data, &infer_finishes[f]);
            expect_same_bytes(c, g.data, want, 8 * P * 4, P, " (finished block)");
            expect_guards(c, &g, P);
            guarded_free(&g);
            free(planes), free(z), free(want);
        }
}

/* ---- moves ------------------------------------------------------------------------------- */

static void check_transpose32_band(const sweep_case *c) {
    uint64_t seed = 42;
    static const int64_t nas[] = {1, 7, 8, 9, 31, 32, 33, 70};
    static const int64_t bands[][2] = {{0, 1}, {0, 8}, {3, 17}, {0, 32}, {5, 40}};
    for (size_t i = 0; i < sizeof nas / sizeof *nas; i++)
        for (size_t b = 0; b < sizeof bands / sizeof *bands; b++) {
            int64_t na = nas[i], ib0 = bands[b][0], ib1 = bands[b][1];
            int64_t sa = ib1 + 3, dsb = na + 2;
            size_t ns = (size_t)(na * sa), nd = (size_t)(ib1 * dsb);
            uint32_t *src = xmalloc(ns * 4), *want = (uint32_t *)infer_pattern(nd);
            fill_random("I32", src, ns, &seed, 1.0f);
            guarded_buf g = out_alloc(nd * 4, 4);
            memcpy(g.data, want, nd * 4);
            KERNEL(c, c->ref, ak__kf_transpose32_band)(want, src, na, ib0, ib1, sa, dsb);
            KERNEL(c, c->k, ak__kf_transpose32_band)(g.data, src, na, ib0, ib1, sa, dsb);
            expect_same_bytes(c, g.data, want, nd * 4, (size_t)na, " (band)");
            expect_guards(c, &g, nd);
            guarded_free(&g);
            free(src), free(want);
        }
}

static void check_gather_even16(const sweep_case *c) {
    uint64_t seed = 43;
    for (int rep = 0; rep < 8; rep++) {
        float src[32], want[16];
        fill_random("F32", src, 32, &seed, 4.0f);
        guarded_buf g = out_alloc(64, 4);
        KERNEL(c, c->ref, ak__kf_gather_even16)(src, want);
        KERNEL(c, c->k, ak__kf_gather_even16)(src, g.data);
        expect_same_bytes(c, g.data, want, 64, 16, "");
        expect_guards(c, &g, 16);
        guarded_free(&g);
    }
}

/* ---- elementwise ------------------------------------------------------------------------- */

static void check_ew_binary(const sweep_case *c) {
    uint64_t seed = 44;
    static const int layouts[3][2] = {{1, 1}, {1, 0}, {0, 1}};
    for (int op = 0; op < AK_EW_F32_BIN_COUNT; op++)
        for (int ly = 0; ly < 3; ly++)
            for (size_t l = 0; l < N_LENGTHS; l++)
                for (int in_place = 0; in_place <= 1; in_place++) {
                    size_t n = lengths[l];
                    int sa = layouts[ly][0], sb = layouts[ly][1];
                    float *a = xmalloc(n * 4 + 4), *b = xmalloc(n * 4 + 4), *want = xmalloc(n * 4);
                    fill_random("F32", a, n + 1, &seed, 8.0f);
                    fill_random("F32", b, n + 1, &seed, 8.0f);
                    guarded_buf g = out_alloc(n * 4, 4);
                    KERNEL(c, c->ref, ak__kf_ew_binary)((ak__ew_f32_bin)op, want, a, b, n, sa, sb);
                    const float *ka = a;
                    if (in_place && sa) { /* dst == a */
                        memcpy(g.data, a, n * 4);
                        ka = g.data;
                    }
                    KERNEL(c, c->k, ak__kf_ew_binary)((ak__ew_f32_bin)op, g.data, ka, b, n, sa, sb);
                    char how[64];
                    snprintf(how, sizeof how, " (op %d, sa %d sb %d%s)", op, sa, sb,
                             in_place && sa ? ", in place" : "");
                    expect_same_bytes(c, g.data, want, n * 4, n, how);
                    expect_guards(c, &g, n);
                    guarded_free(&g);
                    free(a), free(b), free(want);
                }
}

static void check_ew_unary(const sweep_case *c) {
    uint64_t seed = 45;
    for (int op = 0; op < AK_EW_F32_UN_COUNT; op++) {
        float pa = op == AK_EW_F32_CLIP ? -0.5f : op == AK_EW_F32_HARDSIGMOID ? 0.2f : 0.1f;
        float pb = op == AK_EW_F32_CLIP ? 0.5f : 0.5f;
        for (size_t l = 0; l < N_LENGTHS; l++)
            for (int in_place = 0; in_place <= 1; in_place++) {
                size_t n = lengths[l];
                float *x = xmalloc(n * 4), *want = xmalloc(n * 4);
                fill_random("F32", x, n, &seed, 8.0f);
                if (n > 3) x[1] = NAN, x[2] = -INFINITY, x[3] = 0.0f;
                guarded_buf g = out_alloc(n * 4, 4);
                KERNEL(c, c->ref, ak__kf_ew_unary)((ak__ew_f32_un)op, want, x, n, pa, pb);
                const float *src = x;
                if (in_place) {
                    memcpy(g.data, x, n * 4);
                    src = g.data;
                }
                KERNEL(c, c->k, ak__kf_ew_unary)((ak__ew_f32_un)op, g.data, src, n, pa, pb);
                char how[48];
                snprintf(how, sizeof how, " (op %d%s)", op, in_place ? ", in place" : "");
                expect_same_bytes(c, g.data, want, n * 4, n, how);
                expect_guards(c, &g, n);
                guarded_free(&g);
                free(x), free(want);
            }
    }
}

/* ---- row loops --------------------------------------------------------------------------- */

static void check_reduce_rows(const sweep_case *c) {
    uint64_t seed = 46;
    for (int kind = AK_KF_ROWS_SUM; kind <= AK_KF_ROWS_MIN; kind++)
        for (size_t l = 0; l < N_LENGTHS; l++)
            for (size_t rows = 1; rows <= 3; rows += 2) {
                size_t n = lengths[l];
                float *x = xmalloc(rows * n * 4), *want = xmalloc(rows * 4);
                fill_random("F32", x, rows * n, &seed, kind == AK_KF_ROWS_PROD ? 1.5f : 8.0f);
                if (n > 40 && kind >= AK_KF_ROWS_MAX) x[n / 2] = NAN; /* NaN wins */
                guarded_buf g = out_alloc(rows * 4, 4);
                KERNEL(c, c->ref, ak__kf_reduce_rows)(x, want, rows, n, kind);
                KERNEL(c, c->k, ak__kf_reduce_rows)(x, g.data, rows, n, kind);
                char how[48];
                snprintf(how, sizeof how, " (kind %d, %zu rows)", kind, rows);
                expect_same_bytes(c, g.data, want, rows * 4, n, how);
                expect_guards(c, &g, n);
                guarded_free(&g);
                free(x), free(want);
            }
}

static void check_layer_norm_rows(const sweep_case *c) {
    uint64_t seed = 47;
    for (size_t l = 1; l < N_LENGTHS; l++)
        for (int with_b = 0; with_b <= 1; with_b++) {
            size_t n = lengths[l], rows = 1 + l % 3;
            float *x = xmalloc(rows * n * 4), *gam = xmalloc(n * 4), *bet = xmalloc(n * 4);
            float *want = xmalloc(rows * n * 4), wm[3], wi[3];
            fill_random("F32", x, rows * n, &seed, 8.0f);
            fill_random("F32", gam, n, &seed, 2.0f);
            fill_random("F32", bet, n, &seed, 1.0f);
            guarded_buf g = out_alloc(rows * n * 4, 4), gm = out_alloc(rows * 4, 4),
                        gi = out_alloc(rows * 4, 4);
            const float *b = with_b ? bet : NULL;
            KERNEL(c, c->ref, ak__kf_layer_norm_rows)(x, want, rows, n, gam, b, 1e-5f, wm, wi);
            KERNEL(c, c->k, ak__kf_layer_norm_rows)(x, g.data, rows, n, gam, b, 1e-5f, gm.data,
                                                    gi.data);
            expect_same_bytes(c, g.data, want, rows * n * 4, n, " (rows)");
            expect_same_bytes(c, gm.data, wm, rows * 4, n, " (means)");
            expect_same_bytes(c, gi.data, wi, rows * 4, n, " (inverse deviations)");
            expect_guards(c, &g, n), expect_guards(c, &gm, n), expect_guards(c, &gi, n);
            guarded_free(&g), guarded_free(&gm), guarded_free(&gi);
            free(x), free(gam), free(bet), free(want);
        }
}

/* Softmax: |got − ref| ≤ (n + 8)·ε·|ref|; LogSoftmax: ≤ (n + 8)·ε·(2 + |x| + |ref|) (the
 * error of the log of the sum, and of the subtraction). */
static void expect_softmax(const sweep_case *c, int mode, float got, float want, float x,
                           size_t n, const char *where) {
    double tol = mode == AK_KF_SOFTMAX ? fabs(want) : 2.0 + fabs(x) + fabs(want);
    expect_within(c, got, want, (double)(n + 8) * FLT_EPSILON * tol + 1e-30, where);
}

static void check_softmax_rows(const sweep_case *c) {
    uint64_t seed = 48;
    for (int mode = AK_KF_SOFTMAX; mode <= AK_KF_LOGSOFTMAX; mode++)
        for (size_t l = 1; l < N_LENGTHS; l++) {
            size_t n = lengths[l], rows = 1 + l % 3;
            float *x = xmalloc(rows * n * 4), *want = xmalloc(rows * n * 4);
            fill_random("F32", x, rows * n, &seed, 12.0f);
            guarded_buf g = out_alloc(rows * n * 4, 4);
            KERNEL(c, c->ref, ak__kf_softmax_rows)(x, want, rows, n, mode);
            KERNEL(c, c->k, ak__kf_softmax_rows)(x, g.data, rows, n, mode);
            for (size_t i = 0; i < rows * n; i++) {
                char where[64];
                snprintf(where, sizeof where, "mode %d n=%zu [%zu]", mode, n, i);
                expect_softmax(c, mode, ((float *)g.data)[i], want[i], x[i], n, where);
            }
            expect_guards(c, &g, n);
            guarded_free(&g);
            free(x), free(want);
        }
}

static void check_softmax_cols(const sweep_case *c) {
    uint64_t seed = 49;
    static const size_t ws[] = {1, 3, 4, 7, 8, 9, 17, 63, 64};
    for (int mode = AK_KF_SOFTMAX; mode <= AK_KF_LOGSOFTMAX; mode++)
        for (size_t l = 1; l < N_LENGTHS; l += 2)
            for (size_t wi = 0; wi < sizeof ws / sizeof *ws; wi++) {
                size_t n = lengths[l], w = ws[wi], inner = w + 5;
                float *x = xmalloc(n * inner * 4), *want = xmalloc(n * inner * 4);
                fill_random("F32", x, n * inner, &seed, 12.0f);
                memset(want, 0, n * inner * 4);
                guarded_buf g = out_alloc(n * inner * 4, 4);
                memset(g.data, 0, n * inner * 4);
                KERNEL(c, c->ref, ak__kf_softmax_cols)(x, want, n, inner, w, mode);
                KERNEL(c, c->k, ak__kf_softmax_cols)(x, g.data, n, inner, w, mode);
                for (size_t k = 0; k < n; k++)
                    for (size_t j = 0; j < inner; j++) {
                        size_t at = k * inner + j;
                        char where[80];
                        snprintf(where, sizeof where, "mode %d n=%zu w=%zu [%zu][%zu]", mode, n, w,
                                 k, j);
                        if (j >= w) { /* columns past w: untouched */
                            if (((float *)g.data)[at] != 0.0f)
                                fail_msg("%s %s %s: wrote past w", c->k->name, c->info->name, where);
                            continue;
                        }
                        expect_softmax(c, mode, ((float *)g.data)[at], want[at], x[at], n, where);
                    }
                expect_guards(c, &g, n);
                guarded_free(&g);
                free(x), free(want);
            }
}

#define SWEEP_INFER_CHECKERS                                                              \
    {"nchwc_conv_row", check_nchwc_conv_row}, {"nchwc_dw_rows", check_nchwc_dw_rows},     \
    {"nchwc_maxpool_row", check_nchwc_maxpool_row}, {"tile_finish", check_tile_finish},  \
    {"dw_rows", check_dw_rows}, {"strided_copy", check_strided_copy},                     \
    {"dw8_planes", check_dw8_planes}, {"wino_input", check_wino_input},                   \
    {"wino_output", check_wino_output}, {"wino_pad_blocked", check_wino_pad_blocked},     \
    {"wino_finish_block", check_wino_finish_block},                                       \
    {"transpose32_band", check_transpose32_band}, {"gather_even16", check_gather_even16}, \
    {"ew_binary", check_ew_binary}, {"ew_unary", check_ew_unary},                         \
    {"reduce_rows", check_reduce_rows}, {"layer_norm_rows", check_layer_norm_rows},       \
    {"softmax_rows", check_softmax_rows}, {"softmax_cols", check_softmax_cols},

#endif /* AK_TESTS_KERNELS_SWEEP_INFER_H */
