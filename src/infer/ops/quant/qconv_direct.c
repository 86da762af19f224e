/* The channel-major path of ConvInteger and QLinearConv (quant.h). Two steps per run:
 *
 * 1. The input is rewritten once into a padded quad layout: per image, group and quad of
 *    four input channels, the padded volume (the pads set to x_zero_point, channels past
 *    Cg to 0) with the quad's four bytes side by side per position, int8 x already
 *    flipped to uint8. A k-group of the kernel (kernels/kf_int8.h: four k values per
 *    pixel) is then four channels at one tap, so W's K is ordered (quad, kd, kh, kw,
 *    channel in quad) when it is packed at session creation (ak__qconv_w_pack).
 * 2. Per task, a chunk of output pixels is packed for the kernel: for each k-group and
 *    output row, a run of whole 4-byte words of the padded input (one memcpy at stride 1,
 *    a word gather at other strides; no bounds tests, the pads being in the volume), and
 *    the fused kernel multiplies it by a slab of output channels, requantizing in its
 *    epilogue and storing straight into NCHW.
 *
 * The integer sums are those of the plain (channel, tap) order in another order, exact in
 * wrapping int32, so the results are bit for bit the same; the padding channels have zero
 * weights and zero inputs, adding nothing to the products nor to the pixel sums.
 *
 * Tasks are (image, group, pixel chunk, channel slab) with the slab innermost, so a thread
 * that takes consecutive slabs of one chunk packs it once. Chunks hold about 256 KiB of
 * packed pixels (L2), their count a multiple of the threads when there are few; a layer
 * with fewer chunks than 2 per thread is split by channels as well. */
#include <stdlib.h>
#include <string.h>

#include "infer/ops/nn/common.h"
#include "infer/ops/quant/quant.h"

#define CHUNK_BYTES ((size_t)256 << 10)
#define CHUNK_MIN 64
#define CHUNK_MAX 1024
#define SLAB_ROWS_MIN 24

static size_t quads(size_t Cg) { return (Cg + 3) / 4; }

ak_status ak__qconv_w_pack(ak__qconv_w *w, const void *data, ak_elem_type type, size_t M,
                           size_t Cg, size_t taps) {
    size_t K = Cg * taps, Kp = quads(Cg) * 4 * taps;
    w->M = M, w->K = K, w->Kp = Kp, w->flipped = type == AK_ELEM_U8;
    w->rows = aligned_alloc(64, (M * Kp + 63) / 64 * 64);
    w->wsum = malloc((M ? M : 1) * sizeof *w->wsum);
    if (!w->rows || !w->wsum) {
        ak__qconv_w_free(w);
        return AK_ERR_NO_MEMORY;
    }
    const uint8_t *src = data;
    for (size_t m = 0; m < M; m++) {
        int8_t *row = w->rows + m * Kp;
        uint32_t sum = 0;
        for (size_t k = 0; k < Kp; k++) { /* k = (quad·taps + tap)·4 + channel in quad */
            size_t c = k / 4 / taps * 4 + k % 4, t = k / 4 % taps;
            /* uint8 − 128 is its top bit flipped, read as int8 */
            row[k] = c < Cg ? (int8_t)(uint8_t)(src[m * K + c * taps + t] ^ (w->flipped ? 0x80u : 0))
                            : 0;
            sum += (uint32_t)(int32_t)row[k];
        }
        w->wsum[m] = (int32_t)sum;
    }
    return AK_OK;
}

void ak__qconv_w_free(ak__qconv_w *w) {
    free(w->rows), free(w->wsum);
    w->rows = NULL, w->wsum = NULL;
}

int ak__qconv_direct_usable(void) {
    const ak__kernels *k = ak__kernels_active();
    return k->u8s8_conv != ak_u8s8_conv__ref || strcmp(k->name, "ref") == 0;
}

/* ---- the padded quad layout -------------------------------------------------------------- */

/* The padded extent of each axis: the input after its leading pad, or as far as the last
 * window reaches, whichever is longer (the trailing pad the windows need, no more). */
static void padded_extent(const ak__nn_geom *g, int64_t E[3]) {
    for (int a = 0; a < 3; a++) {
        int64_t reach = (g->out[a] - 1) * g->s[a] + (g->k[a] - 1) * g->d[a] + 1;
        int64_t have = g->pb[a] + g->in[a];
        E[a] = reach > have ? reach : have;
    }
}

/* Bytes of one quad's padded volume. */
static size_t quad_bytes(const ak__nn_geom *g) {
    int64_t E[3];
    padded_extent(g, E);
    return (size_t)(E[0] * E[1] * E[2]) * 4;
}

static size_t padded_input_bytes(const ak__nn_geom *g, size_t N, size_t group, size_t Cg) {
    return (N * group * quads(Cg) * quad_bytes(g) + 63) / 64 * 64;
}

/* d[j] = r0[j] | r1[j] << 8 | r2[j] << 16 | r3[j] << 24, each byte flipped by flip4's;
 * restrict lets the compiler vectorize it (the file is built at -O3). */
static void interleave4(uint32_t *restrict d, const uint8_t *restrict r0,
                        const uint8_t *restrict r1, const uint8_t *restrict r2,
                        const uint8_t *restrict r3, size_t n, uint32_t flip4) {
    for (size_t j = 0; j < n; j++)
        d[j] = ((uint32_t)r0[j] | (uint32_t)r1[j] << 8 | (uint32_t)r2[j] << 16 |
                (uint32_t)r3[j] << 24) ^ flip4;
}

static void fill_words(uint32_t *d, uint32_t v, size_t n) {
    for (size_t j = 0; j < n; j++) d[j] = v;
}

/* Quad q of image n, group gi into dst (quad_bytes). */
static void convert_quad(const ak__qconv_direct *c, size_t n, size_t gi, size_t q,
                         uint32_t *dst) {
    const ak__nn_geom *g = c->g;
    int64_t E[3];
    padded_extent(g, E);
    size_t plane = (size_t)(g->in[0] * g->in[1] * g->in[2]);
    uint8_t flip = c->x_signed ? 0x80 : 0, pad[4], flips[4];
    const uint8_t *r[4];
    int whole = 1; /* all four channels exist */
    for (size_t i = 0; i < 4; i++) {
        size_t ch = q * 4 + i;
        int real = ch < c->Cg;
        r[i] = real ? c->x + (n * c->C + gi * c->Cg + ch) * plane : NULL;
        pad[i] = real ? (uint8_t)(c->x_pad ^ flip) : 0;
        flips[i] = real ? flip : 0;
        whole &= real;
    }
    uint32_t pad4, flip4;
    memcpy(&pad4, pad, 4), memcpy(&flip4, flips, 4);
    int64_t W = g->in[2], lead = g->pb[2];
    for (int64_t ed = 0; ed < E[0]; ed++)
        for (int64_t eh = 0; eh < E[1]; eh++) {
            uint32_t *row = dst + (size_t)((ed * E[1] + eh) * E[2]);
            int64_t id = ed - g->pb[0], ih = eh - g->pb[1];
            if (id < 0 || id >= g->in[0] || ih < 0 || ih >= g->in[1]) {
                fill_words(row, pad4, (size_t)E[2]);
                continue;
            }
            size_t off = (size_t)((id * g->in[1] + ih) * W);
            fill_words(row, pad4, (size_t)lead);
            if (whole) {
                interleave4(row + lead, r[0] + off, r[1] + off, r[2] + off, r[3] + off,
                            (size_t)W, flip4);
            } else {
                uint8_t *b = (uint8_t *)(row + lead);
                for (int64_t j = 0; j < W; j++)
                    for (size_t i = 0; i < 4; i++)
                        b[j * 4 + i] = r[i] ? (uint8_t)(r[i][off + (size_t)j] ^ flip) : 0;
            }
            fill_words(row + lead + W, pad4, (size_t)(E[2] - lead - W));
        }
}

typedef struct convert_job {
    const ak__qconv_direct *c;
    uint8_t *x4;
    size_t qbytes;
} convert_job;

static void convert_task(void *vj, size_t begin, size_t end, int tid) {
    (void)tid;
    const convert_job *j = vj;
    size_t nq = quads(j->c->Cg);
    for (size_t t = begin; t < end; t++) {
        size_t ig = t / nq;
        convert_quad(j->c, ig / j->c->group, ig % j->c->group, t % nq,
                     (uint32_t *)(void *)(j->x4 + t * j->qbytes));
    }
}

/* ---- chunks and tasks ------------------------------------------------------------------- */

static size_t round16(size_t n) { return (n + 15) / 16 * 16; }

/* The largest chunk of pixels for taps of depth K. */
static size_t chunk_max(size_t K) {
    size_t pc = CHUNK_BYTES / (K ? K : 1) / 16 * 16;
    return pc < CHUNK_MIN ? CHUNK_MIN : pc > CHUNK_MAX ? CHUNK_MAX : pc;
}

/* A run of a chunk's pixels along one output row: the word where its first pixel's
 * window starts in a quad's padded volume, and how many pixels it has. */
typedef struct row_run {
    size_t at, n;
} row_run;

/* one thread's scratch: the packed chunk, the pixel sums, the chunk's row runs */
static size_t slot_bytes(size_t Kp, size_t pc) {
    size_t k4 = Kp / AK_KF_I8_KG;
    return (k4 * ak__i8_x_stride(pc) + 63) / 64 * 64 + round16(pc) * 4 +
           (pc * sizeof(row_run) + 63) / 64 * 64;
}

static size_t slot_chunk(size_t Kp, size_t P) {
    size_t pc = chunk_max(Kp);
    return round16(P) < pc ? round16(P) : pc;
}

size_t ak__qconv_direct_workspace(const ak__nn_geom *g, size_t N, size_t group, size_t Cg,
                                  size_t P, int threads) {
    size_t Kp = quads(Cg) * 4 * (size_t)(g->k[0] * g->k[1] * g->k[2]);
    return padded_input_bytes(g, N, group, Cg) +
           slot_bytes(Kp, slot_chunk(Kp, P)) * (size_t)(threads > 0 ? threads : 1);
}

typedef struct direct_job {
    const ak__qconv_direct *c;
    const uint8_t *x4;
    char *slots;
    size_t qbytes, pc, vecs, chunks, slab_rows, slabs, slot;
    int threads;
} direct_job;

/* The first pixel of chunk i (i = chunks: past the last); a multiple of 16 except past P. */
static size_t chunk_start(const direct_job *j, size_t i) {
    return i * j->vecs / j->chunks * 16;
}

/* ---- packing ------------------------------------------------------------------------------ */

/* The row runs of pixels [p0, p0 + pc) (the same for every k-group). */
static size_t chunk_runs(const ak__nn_geom *g, size_t p0, size_t pc, row_run *runs) {
    int64_t E[3];
    padded_extent(g, E);
    size_t Wo = (size_t)g->out[2], HWo = (size_t)g->out[1] * Wo, p = p0, end = p0 + pc, n = 0;
    while (p < end) {
        size_t od = p / HWo, oh = p % HWo / Wo, ow = p % Wo;
        row_run *r = &runs[n++];
        r->at = (size_t)(((int64_t)od * g->s[0] * E[1] + (int64_t)oh * g->s[1]) * E[2] +
                         (int64_t)ow * g->s[2]);
        r->n = Wo - ow < end - p ? Wo - ow : end - p;
        p += r->n;
    }
    return n;
}

/* Pixels [p0, p0 + pc) of one image/group's quads x4g into xp (ak__i8_x_stride(pc) per
 * k-group); their sums over K into colsum when it is not NULL. */
static void pack_chunk(const direct_job *j, const uint8_t *x4g, size_t p0, size_t pc,
                       uint8_t *xp, int32_t *colsum, row_run *runs) {
    const ak__qconv_direct *c = j->c;
    const ak__nn_geom *g = c->g;
    int64_t E[3];
    padded_extent(g, E);
    size_t nruns = chunk_runs(g, p0, pc, runs), ldx = ak__i8_x_stride(pc), s = (size_t)g->s[2];
    if (colsum) memset(colsum, 0, pc * sizeof *colsum);
    uint32_t *o = (uint32_t *)(void *)xp;
    for (size_t q = 0; q < quads(c->Cg); q++)
        for (int64_t kd = 0; kd < g->k[0]; kd++)
            for (int64_t kh = 0; kh < g->k[1]; kh++)
                for (int64_t kw = 0; kw < g->k[2]; kw++, o += ldx / 4) {
                    const uint32_t *base = (const uint32_t *)(const void *)(x4g + q * j->qbytes) +
                                           ((kd * g->d[0] * E[1] + kh * g->d[1]) * E[2] + kw * g->d[2]);
                    uint32_t *d = o;
                    for (size_t r = 0; r < nruns; r++) {
                        const uint32_t *src = base + runs[r].at;
                        if (s == 1) {
                            memcpy(d, src, runs[r].n * 4);
                        } else {
                            for (size_t i = 0; i < runs[r].n; i++) d[i] = src[i * s];
                        }
                        d += runs[r].n;
                    }
                    if (colsum) {
                        const uint8_t *b = (const uint8_t *)o;
                        for (size_t p = 0; p < pc; p++)
                            colsum[p] += (int32_t)(b[4 * p] + b[4 * p + 1] + b[4 * p + 2] +
                                                   b[4 * p + 3]);
                    }
                }
}

/* ---- the tasks ---------------------------------------------------------------------------- */

static void direct_task(void *vj, size_t begin, size_t end, int tid) {
    const direct_job *j = vj;
    const ak__qconv_direct *c = j->c;
    if (tid < 0 || tid >= j->threads) tid = 0;
    char *slot = j->slots + (size_t)tid * j->slot;
    size_t Kp = c->w->Kp, k4 = Kp / AK_KF_I8_KG;
    uint8_t *xp = (uint8_t *)slot;
    int32_t *colsum = (int32_t *)(void *)(xp + (k4 * ak__i8_x_stride(j->pc) + 63) / 64 * 64);
    row_run *runs = (row_run *)(void *)(colsum + round16(j->pc));
    const ak__kernels *kern = ak__kernels_active();
    size_t esz = c->kind == AK_I8_OUT_I32 ? 4 : 1, packed = (size_t)-1;
    for (size_t t = begin; t < end; t++) {
        size_t slab = t % j->slabs, rest = t / j->slabs;
        size_t chunk = rest % j->chunks, ig = rest / j->chunks; /* ig: image·group + group */
        size_t n = ig / c->group, gi = ig % c->group;
        size_t p0 = chunk_start(j, chunk), p1 = chunk_start(j, chunk + 1);
        size_t pc = (p1 < c->P ? p1 : c->P) - p0;
        if (packed != rest) { /* a new chunk: pack it (a thread's next slab reuses it) */
            const uint8_t *x4g = j->x4 + ig * quads(c->Cg) * j->qbytes;
            pack_chunk(j, x4g, p0, pc, xp, c->row_zp ? colsum : NULL, runs);
            packed = rest;
        }
        size_t r0 = slab * j->slab_rows, m0 = gi * c->Mg + r0;
        size_t mr = c->Mg - r0 < j->slab_rows ? c->Mg - r0 : j->slab_rows;
        ak__i8_epilogue e = {c->kind, c->row_bias + m0, c->row_zp ? c->row_zp + m0 : NULL,
                             colsum, c->mult + m0, c->out_zp, c->relu,
                             (char *)c->y + ((n * c->M + m0) * c->P + p0) * esz, c->P};
        kern->u8s8_conv(mr, pc, Kp, c->w->rows + m0 * Kp, xp, &e);
    }
}

/* The chunking of the pixels: the P/16 vectors dealt evenly (chunk sizes differ by one
 * vector at most), no chunk larger than chunk_max, and when there are few per thread, as
 * many chunks as make every thread's share equal. */
static void plan_chunks(direct_job *j, size_t images, size_t Kp) {
    const ak__qconv_direct *c = j->c;
    size_t vecs = (c->P + 15) / 16, per = chunk_max(Kp) / 16;
    size_t chunks = (vecs + per - 1) / per;
    size_t T = (size_t)j->threads;
    if (T > 1 && images * chunks < 8 * T)
        while ((images * chunks) % T && chunks < vecs) chunks++;
    j->vecs = vecs, j->chunks = chunks;
    j->pc = (vecs + chunks - 1) / chunks * 16; /* the largest chunk */
}

void ak__qconv_direct_run(const ak__qconv_direct *c, ak_threadpool *pool, int threads,
                          void *workspace) {
    if (c->P == 0 || c->Mg == 0 || c->N == 0) return;
    size_t Kp = c->w->Kp, images = c->N * c->group;
    direct_job j = {c, workspace, NULL, quad_bytes(c->g), 0, 0, 0, 0, 1, 0, threads > 0 ? threads : 1};
    j.slots = (char *)workspace + padded_input_bytes(c->g, c->N, c->group, c->Cg);
    convert_job cj = {c, workspace, j.qbytes};
    ak__nn_parallel(pool, images * quads(c->Cg), 1, convert_task, &cj);
    plan_chunks(&j, images, Kp);
    j.slab_rows = c->Mg;
    size_t units = images * j.chunks;
    if (j.threads > 1 && units < 2 * (size_t)j.threads && c->Mg >= 2 * SLAB_ROWS_MIN) {
        size_t want = (2 * (size_t)j.threads + units - 1) / units;
        size_t rows = (c->Mg + want - 1) / want;
        rows = (rows + 5) / 6 * 6; /* whole kernel tiles of 6 channels */
        j.slab_rows = rows < SLAB_ROWS_MIN ? SLAB_ROWS_MIN : rows;
    }
    j.slabs = (c->Mg + j.slab_rows - 1) / j.slab_rows;
    j.slot = slot_bytes(Kp, slot_chunk(Kp, c->P));
    size_t n = units * j.slabs;
    if (n <= 1 || j.threads == 1 ||
        ak_threadpool_parallel_for(pool, n, 1, direct_task, &j) != AK_OK)
        direct_task(&j, 0, n, 0);
}
