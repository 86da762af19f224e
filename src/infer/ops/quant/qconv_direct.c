/* The channel-major path of ConvInteger and QLinearConv (quant.h): per task, a chunk of
 * output pixels is packed from NCHW into the kernel's layout (four taps interleaved per
 * pixel; kernels/kf_int8.h) and the fused kernel multiplies it by a slab of output
 * channels, requantizing in its epilogue and storing straight into NCHW.
 *
 * Tasks are (image, group, pixel chunk, channel slab) with the slab innermost, so a thread
 * that takes consecutive slabs of one chunk packs it once. Chunks hold about 256 KiB of
 * packed pixels (L2); a layer with fewer chunks than 2 per thread is split by channels
 * as well, so two threads share even a 14x14 layer. */
#include <stdlib.h>
#include <string.h>

#include "infer/ops/nn/common.h"
#include "infer/ops/quant/quant.h"

#define CHUNK_BYTES ((size_t)256 << 10)
#define CHUNK_MIN 64
#define CHUNK_MAX 1024
#define SLAB_ROWS_MIN 24

ak_status ak__qconv_w_pack(ak__qconv_w *w, const void *data, ak_elem_type type, size_t M,
                           size_t K) {
    size_t ldw = ak__i8_w_stride(K);
    w->M = M, w->K = K, w->flipped = type == AK_ELEM_U8;
    w->rows = aligned_alloc(64, (M * ldw + 63) / 64 * 64);
    w->wsum = malloc((M ? M : 1) * sizeof *w->wsum);
    if (!w->rows || !w->wsum) {
        ak__qconv_w_free(w);
        return AK_ERR_NO_MEMORY;
    }
    const uint8_t *src = data;
    for (size_t m = 0; m < M; m++) {
        int8_t *row = w->rows + m * ldw;
        uint32_t sum = 0;
        for (size_t k = 0; k < ldw; k++) {
            /* uint8 − 128 is its top bit flipped, read as int8 */
            row[k] = k < K ? (int8_t)(uint8_t)(src[m * K + k] ^ (w->flipped ? 0x80u : 0)) : 0;
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

/* ---- chunks and tasks ------------------------------------------------------------------- */

static size_t round16(size_t n) { return (n + 15) / 16 * 16; }

/* The largest chunk of pixels for taps of depth K. */
static size_t chunk_max(size_t K) {
    size_t pc = CHUNK_BYTES / (K ? K : 1) / 16 * 16;
    return pc < CHUNK_MIN ? CHUNK_MIN : pc > CHUNK_MAX ? CHUNK_MAX : pc;
}

/* one thread's scratch: the packed chunk, 4 tap rows, the pixel sums, a row of padding */
static size_t slot_bytes(size_t K, size_t pc) {
    size_t k4 = (K + AK_KF_I8_KG - 1) / AK_KF_I8_KG;
    return (k4 * ak__i8_x_stride(pc) + 63) / 64 * 64 + 6 * round16(pc) * 4 + 64;
}

size_t ak__qconv_direct_workspace(size_t K, size_t P, int threads) {
    size_t pc = chunk_max(K);
    pc = round16(P) < pc ? round16(P) : pc;
    return slot_bytes(K, pc) * (size_t)(threads > 0 ? threads : 1);
}

typedef struct direct_job {
    const ak__qconv_direct *c;
    char *workspace;
    size_t pc, chunks, slab_rows, slabs, slot;
    int threads;
} direct_job;

/* ---- packing ------------------------------------------------------------------------------ */

/* The pc bytes of tap k (channel, kd, kh, kw in W's order) over pixels [p0, p0 + pc), as x
 * stores them (padding: x_pad): a pointer into x when they are contiguous there, else
 * gathered into buf. */
static const uint8_t *tap_span(const ak__qconv_direct *c, const uint8_t *xg, size_t k, size_t p0,
                               size_t pc, uint8_t *buf) {
    const int64_t *in = c->in, *out = c->out, *kk = c->k, *s = c->s, *d = c->d, *pb = c->pb;
    size_t taps = (size_t)(kk[0] * kk[1] * kk[2]), t = k % taps;
    const uint8_t *xc = xg + k / taps * (size_t)(in[0] * in[1] * in[2]);
    int64_t kw = (int64_t)t % kk[2], kh = (int64_t)t / kk[2] % kk[1], kd = (int64_t)t / kk[2] / kk[1];
    if (taps == 1 && s[0] == 1 && s[1] == 1 && s[2] == 1 && pb[0] == 0 && pb[1] == 0 && pb[2] == 0 &&
        in[1] == out[1] && in[2] == out[2])
        return xc + p0; /* a 1x1 stride-1 layer: the plane itself */
    int64_t Wo = out[2], HWo = out[1] * out[2];
    size_t p = p0, end = p0 + pc;
    uint8_t *o = buf;
    while (p < end) {
        int64_t od = (int64_t)p / HWo, oh = (int64_t)p % HWo / Wo, ow = (int64_t)p % Wo;
        size_t seg = (size_t)(Wo - ow) < end - p ? (size_t)(Wo - ow) : end - p;
        int64_t id = od * s[0] - pb[0] + kd * d[0], ih = oh * s[1] - pb[1] + kh * d[1];
        if (id < 0 || id >= in[0] || ih < 0 || ih >= in[1]) {
            memset(o, c->x_pad, seg);
        } else {
            const uint8_t *xr = xc + ((size_t)id * (size_t)in[1] + (size_t)ih) * (size_t)in[2];
            int64_t iw = ow * s[2] - pb[2] + kw * d[2];
            for (size_t j = 0; j < seg; j++, iw += s[2])
                o[j] = iw >= 0 && iw < in[2] ? xr[iw] : c->x_pad;
        }
        o += seg, p += seg;
    }
    return buf;
}

/* Pixels [p0, p0 + pc) of image/group xg into xp (ak__i8_x_stride(pc) per k-group), int8 x
 * flipped to uint8; their sums over K into colsum when it is not NULL. */
static void pack_chunk(const ak__qconv_direct *c, const uint8_t *xg, size_t p0, size_t pc,
                       uint8_t *xp, int32_t *colsum, uint8_t *bufs, uint8_t *fill) {
    size_t K = c->K, k4 = (K + AK_KF_I8_KG - 1) / AK_KF_I8_KG, ldx = ak__i8_x_stride(pc);
    uint8_t flip = c->x_signed ? 0x80 : 0;
    uint32_t flip4 = flip * 0x01010101u;
    memset(fill, flip, pc); /* taps past K: zero once flipped */
    if (colsum) memset(colsum, 0, pc * sizeof *colsum);
    for (size_t g = 0; g < k4; g++) {
        const uint8_t *r[4];
        for (size_t i = 0; i < 4; i++) {
            size_t k = g * AK_KF_I8_KG + i;
            r[i] = k < K ? tap_span(c, xg, k, p0, pc, bufs + i * round16(pc)) : fill;
        }
        uint32_t *d = (uint32_t *)(xp + g * ldx);
        for (size_t p = 0; p < pc; p++)
            d[p] = ((uint32_t)r[0][p] | (uint32_t)r[1][p] << 8 | (uint32_t)r[2][p] << 16 |
                    (uint32_t)r[3][p] << 24) ^ flip4;
        if (colsum)
            for (size_t p = 0; p < pc; p++)
                colsum[p] += (int32_t)((r[0][p] ^ flip) + (r[1][p] ^ flip) + (r[2][p] ^ flip) +
                                       (r[3][p] ^ flip));
    }
}

/* ---- the tasks ---------------------------------------------------------------------------- */

static void direct_task(void *vj, size_t begin, size_t end, int tid) {
    const direct_job *j = vj;
    const ak__qconv_direct *c = j->c;
    if (tid < 0 || tid >= j->threads) tid = 0;
    char *slot = j->workspace + (size_t)tid * j->slot;
    size_t k4 = (c->K + AK_KF_I8_KG - 1) / AK_KF_I8_KG;
    uint8_t *xp = (uint8_t *)slot;
    uint8_t *bufs = xp + (k4 * ak__i8_x_stride(j->pc) + 63) / 64 * 64;
    uint8_t *fill = bufs + 4 * round16(j->pc);
    int32_t *colsum = (int32_t *)(fill + round16(j->pc));
    const ak__kernels *kern = ak__kernels_active();
    size_t esz = c->kind == AK_I8_OUT_I32 ? 4 : 1, packed = (size_t)-1;
    for (size_t t = begin; t < end; t++) {
        size_t slab = t % j->slabs, rest = t / j->slabs;
        size_t chunk = rest % j->chunks, ig = rest / j->chunks; /* ig: image·group + group */
        size_t n = ig / c->group, gi = ig % c->group;
        size_t p0 = chunk * j->pc, pc = c->P - p0 < j->pc ? c->P - p0 : j->pc;
        if (packed != rest) { /* a new chunk: pack it (a thread's next slab reuses it) */
            const uint8_t *xg = c->x + (n * c->C + gi * c->Cg) * (size_t)(c->in[0] * c->in[1] * c->in[2]);
            pack_chunk(c, xg, p0, pc, xp, c->row_zp ? colsum : NULL, bufs, fill);
            packed = rest;
        }
        size_t r0 = slab * j->slab_rows, m0 = gi * c->Mg + r0;
        size_t mr = c->Mg - r0 < j->slab_rows ? c->Mg - r0 : j->slab_rows;
        ak__i8_epilogue e = {c->kind, c->row_bias + m0, c->row_zp ? c->row_zp + m0 : NULL,
                             colsum, c->mult + m0, c->out_zp, c->relu,
                             (char *)c->y + ((n * c->M + m0) * c->P + p0) * esz, c->P};
        kern->u8s8_conv(mr, pc, c->K, c->w->rows + m0 * ak__i8_w_stride(c->K), xp, &e);
    }
}

void ak__qconv_direct_run(const ak__qconv_direct *c, ak_threadpool *pool, int threads,
                          void *workspace) {
    if (c->P == 0 || c->Mg == 0 || c->N == 0) return;
    direct_job j = {c, workspace, 0, 0, 0, 1, 0, threads > 0 ? threads : 1};
    size_t pc = chunk_max(c->K);
    j.chunks = (c->P + pc - 1) / pc;
    j.pc = round16((c->P + j.chunks - 1) / j.chunks); /* even chunks, whole vectors */
    j.chunks = (c->P + j.pc - 1) / j.pc;
    j.slab_rows = c->Mg;
    size_t units = c->N * c->group * j.chunks;
    if (j.threads > 1 && units < 2 * (size_t)j.threads && c->Mg >= 2 * SLAB_ROWS_MIN) {
        size_t want = (2 * (size_t)j.threads + units - 1) / units;
        size_t rows = (c->Mg + want - 1) / want;
        rows = (rows + 5) / 6 * 6; /* whole kernel tiles of 6 channels */
        j.slab_rows = rows < SLAB_ROWS_MIN ? SLAB_ROWS_MIN : rows;
    }
    j.slabs = (c->Mg + j.slab_rows - 1) / j.slab_rows;
    size_t pcw = round16(c->P) < chunk_max(c->K) ? round16(c->P) : chunk_max(c->K);
    j.slot = slot_bytes(c->K, pcw);
    size_t n = units * j.slabs;
    if (n <= 1 || j.threads == 1 ||
        ak_threadpool_parallel_for(pool, n, 1, direct_task, &j) != AK_OK)
        direct_task(&j, 0, n, 0);
}
