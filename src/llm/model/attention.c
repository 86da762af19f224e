/* Paged causal attention (see attention.h). One work item is (tile, KV head): a tile is
 * up to 16 consecutive query tokens of one sequence, so during a prefill each K/V block
 * is read (and f16 widened) once per tile instead of once per token; the group's query
 * heads score every cached position block by block, a softmax in f32 with the max
 * subtracted, then the probability-weighted sum of V rows. The loops over rows are table
 * kernels (kernels/kernels.def: f32/f16/q8_0_dot_rows, f32_softmax, f32/f16/q8_0_madd_rows),
 * each called once per block row range, so AK_ISA and AK_KERNELS=ref reach them.
 *
 * A q8_0 cache (kv_cache.h) is read like f16: thin tiles (decode) run the q8_0 kernels on
 * the stored blocks, wide ones widen a block once (exactly: f16 scale × int8 fits f32)
 * and use the f32 kernels. Decode scores take the f32 query against keys widened in
 * registers (q8_0_dot_rows); AK_ATTN_Q8_QUERY=int quantizes each query to q8_0 once per
 * tile for integer dot products instead (q8_0_dot_rows_q8, llama.cpp's way) — as fast
 * here (docs/kernels.md), less accurate, and unlike the prefill path's scores. */
#include <stdlib.h>
#include <math.h>
#include <string.h>

#include "core/half.h"
#include "kernels/dispatch.h"
#include "kernels/linear.h"
#include "llm/model/attention.h"

enum { AK_ATTN_TILE = 16 }; /* query tokens of one sequence sharing each K/V block read */
/* Below this many multiply-adds a batch's attention runs on the calling thread (about
 * 10 µs of AVX2 work, what a fork/join of the pool costs on a VM). */
#define AK_ATTN_INLINE_MACS 200000.0
/* f16 blocks are widened to f32 once per tile from this many (query token, head) pairs
 * on; thinner tiles use the kernels that widen in registers */
enum { AK_ATTN_WIDEN_FROM = 4 };

size_t ak__attention_scratch_floats(int32_t n_heads, int32_t n_kv_heads, int32_t head_dim,
                                    int32_t block_size, int32_t max_context) {
    int32_t group = n_heads / n_kv_heads;
    /* + the tile's queries quantized to q8_0: per (token, head) hd/32 scales, hd/32 block
     * sums, hd int8 values */
    size_t q8_floats = (size_t)AK_ATTN_TILE * (size_t)group *
                       (2u * (size_t)(head_dim / AK__QK) + (size_t)(head_dim + 3) / 4);
    return (size_t)AK_ATTN_TILE * (size_t)group * (size_t)max_context +
           2u * (size_t)block_size * (size_t)head_dim + q8_floats;
}

/* How decode tokens score against q8_0 keys: 1 = query quantized, integer dot products
 * (AK_ATTN_Q8_QUERY=int), 0 = the f32 query (the default). */
static int q8_integer_scores(void) {
    static int chosen = -1;
    if (chosen < 0) {
        const char *e = getenv("AK_ATTN_Q8_QUERY");
        chosen = e && strcmp(e, "int") == 0;
    }
    return chosen;
}

/* A tile: up to AK_ATTN_TILE consecutive batch tokens of one sequence (ascending
 * positions), attending with the heads of KV head g. */
typedef struct tile {
    const ak__attention_args *a;
    int32_t t0, nt, g, group, hd, q_stride, len_max;
    const int32_t *table;
    float *scores; /* [nt][group][len_max] */
    const ak__kernels *kern;
    /* q8_0 cache, thin tile, integer scores: the queries quantized, [nt·group] each */
    float *qd;     /* [hd/32] scales */
    int32_t *qs;   /* [hd/32] block sums (unused) */
    int8_t *qq;    /* [hd] values */
} tile;

/* The K or V rows of one block as the passes read them: f32 (the cache itself, or widened
 * into a buffer once for all the tile's queries), or f16 in place for the fused kernels
 * when the tile has too few queries to repay the widening (a decode token: each widened
 * row would be used once). */
static float *tile_row(const tile *w, int32_t ti, int32_t h) {
    return w->scores + ((size_t)ti * (size_t)w->group + (size_t)h) * (size_t)w->len_max;
}

static size_t head_at(const tile *w, int32_t ti, int32_t h) {
    return (size_t)(w->t0 + ti) * (size_t)w->q_stride + (size_t)(w->g * w->group + h) * (size_t)w->hd;
}

typedef struct rows_view {
    const float *f32;
    const uint16_t *f16;
    const void *q8;
} rows_view;

static int thin_tile(const tile *w) { return w->nt * w->group < AK_ATTN_WIDEN_FROM; }

static rows_view block_view(const tile *w, const void *base, int32_t block, int32_t n,
                            float *buf) {
    const ak__kv_cache *kv = w->a->kv;
    const char *at = (const char *)base + ak__kv_at(kv, w->a->layer, block, w->g, 0);
    size_t count = (size_t)n * (size_t)kv->head_dim;
    switch (kv->type) {
    case AK__KV_F32: return (rows_view){(const float *)(const void *)at, NULL, NULL};
    case AK__KV_F16:
        if (thin_tile(w)) return (rows_view){NULL, (const uint16_t *)(const void *)at, NULL};
        ak_f16_to_f32(buf, (const uint16_t *)(const void *)at, count);
        return (rows_view){buf, NULL, NULL};
    default:
        if (thin_tile(w)) return (rows_view){NULL, NULL, at};
        ak__dequantize_row_ref(AK_WTYPE_Q8_0, at, buf, count);
        return (rows_view){buf, NULL, NULL};
    }
}

/* Quantizes the tile's queries for the integer q8_0 scores (once, not once per block). */
static void quantize_queries(const tile *w) {
    int32_t hd = w->hd, nbk = hd / AK__QK;
    for (int32_t ti = 0; ti < w->nt; ++ti)
        for (int32_t h = 0; h < w->group; ++h) {
            size_t i = (size_t)ti * (size_t)w->group + (size_t)h;
            w->kern->linear_quantize_x(w->a->q + head_at(w, ti, h), (size_t)hd,
                                       w->qd + i * (size_t)nbk, w->qs + i * (size_t)nbk,
                                       w->qq + i * (size_t)hd);
        }
}

/* One (token, head)'s scores against nn rows of a block. */
static void score_rows(const tile *w, rows_view k, int32_t ti, int32_t h, float *s, int32_t nn) {
    const float *q = w->a->q + head_at(w, ti, h);
    size_t n = (size_t)nn, hd = (size_t)w->hd;
    if (k.f16) {
        w->kern->f16_dot_rows(s, q, k.f16, n, hd, w->a->scale);
    } else if (k.q8 && w->qq) {
        size_t i = (size_t)ti * (size_t)w->group + (size_t)h;
        w->kern->q8_0_dot_rows_q8(s, w->qd + i * (hd / AK__QK), w->qq + i * hd, k.q8, n, hd,
                                  w->a->scale);
    } else if (k.q8) {
        w->kern->q8_0_dot_rows(s, q, k.q8, n, hd, w->a->scale);
    } else {
        w->kern->f32_dot_rows(s, q, k.f32, n, hd, w->a->scale);
    }
}


/* The first position token p sees: 0, or the start of its sliding window. */
static int32_t first_seen(const ak__attention_args *a, int32_t pos) {
    return a->window > 0 && pos + 1 > a->window ? pos + 1 - a->window : 0;
}

/* Where the tile's block loops begin: the block of the first position any of its tokens
 * sees (the earliest token's, positions ascending), so a sliding window skips the blocks
 * before it. */
static int32_t tile_start(const tile *w) {
    int32_t bs = w->a->kv->block_size;
    return first_seen(w->a, w->a->batch->pos[w->t0]) / bs * bs;
}

static void scores_pass(const tile *w, float *kbuf) {
    const ak__attention_args *a = w->a;
    int32_t bs = a->kv->block_size;
    for (int32_t start = tile_start(w); start < w->len_max; start += bs) {
        int32_t n = w->len_max - start < bs ? w->len_max - start : bs;
        rows_view k = block_view(w, a->kv->k, w->table[start / bs], n, kbuf);
        for (int32_t ti = 0; ti < w->nt; ++ti) {
            int32_t len = a->batch->pos[w->t0 + ti] + 1;
            int32_t nn = len - start < n ? len - start : n;
            for (int32_t h = 0; h < w->group && nn > 0; ++h)
                score_rows(w, k, ti, h, tile_row(w, ti, h) + start, nn);
        }
    }
}

static void values_pass(const tile *w, float *vbuf) {
    const ak__attention_args *a = w->a;
    int32_t bs = a->kv->block_size, hd = w->hd;
    for (int32_t ti = 0; ti < w->nt; ++ti)
        for (int32_t h = 0; h < w->group; ++h) memset(a->out + head_at(w, ti, h), 0, (size_t)hd * sizeof(float));
    for (int32_t start = tile_start(w); start < w->len_max; start += bs) {
        int32_t n = w->len_max - start < bs ? w->len_max - start : bs;
        rows_view v = block_view(w, a->kv->v, w->table[start / bs], n, vbuf);
        for (int32_t ti = 0; ti < w->nt; ++ti) {
            int32_t len = a->batch->pos[w->t0 + ti] + 1;
            int32_t nn = len - start < n ? len - start : n;
            for (int32_t h = 0; h < w->group && nn > 0; ++h) {
                float *o = a->out + head_at(w, ti, h);
                const float *p = tile_row(w, ti, h) + start;
                if (v.f16)
                    w->kern->f16_madd_rows(o, p, v.f16, (size_t)nn, (size_t)hd);
                else if (v.q8)
                    w->kern->q8_0_madd_rows(o, p, v.q8, (size_t)nn, (size_t)hd);
                else
                    w->kern->f32_madd_rows(o, p, v.f32, (size_t)nn, (size_t)hd);
            }
        }
    }
}

/* Scores of one (token, head) → probabilities: soft-capped, softmax over the positions
 * the token sees, zero before its window (the values pass reads from tile_start). */
static void normalize_row(const tile *w, int32_t ti, int32_t h) {
    const ak__attention_args *a = w->a;
    int32_t pos = a->batch->pos[w->t0 + ti], lo = first_seen(a, pos), start = tile_start(w);
    float *row = tile_row(w, ti, h);
    size_t n = (size_t)(pos + 1 - lo);
    if (a->softcap > 0) w->kern->f32_softcap(row + lo, n, a->softcap);
    w->kern->f32_softmax(row + lo, n);
    if (lo > start) memset(row + start, 0, (size_t)(lo - start) * sizeof *row);
}

typedef struct tiles_ctx {
    const ak__attention_args *a;
    const ak__kernels *kern;
    const int32_t *starts; /* n_tiles + 1 token indices */
} tiles_ctx;

static void attend_tiles(void *ctx, size_t begin, size_t end, int thread_index) {
    const tiles_ctx *c = ctx;
    const ak__attention_args *a = c->a;
    int32_t n_kv = a->kv->n_kv_heads, hd = a->kv->head_dim;
    float *scratch = a->scratch + (size_t)thread_index * a->scratch_per_thread;
    size_t block_floats = (size_t)a->kv->block_size * (size_t)hd;
    int32_t group = a->n_heads / n_kv, nbk = hd / AK__QK;
    size_t q8_heads = (size_t)AK_ATTN_TILE * (size_t)group;
    size_t q8_floats = q8_heads * (2u * (size_t)nbk + (size_t)(hd + 3) / 4);
    float *kbuf = scratch + (a->scratch_per_thread - 2 * block_floats - q8_floats);
    float *vbuf = kbuf + block_floats, *qd = vbuf + block_floats;
    int32_t *qs = (int32_t *)(void *)(qd + q8_heads * (size_t)nbk);
    int8_t *qq = (int8_t *)(void *)(qs + q8_heads * (size_t)nbk);
    for (size_t item = begin; item < end; ++item) {
        int32_t k = (int32_t)(item / (size_t)n_kv), t0 = c->starts[k];
        int32_t nt = c->starts[k + 1] - t0;
        tile w = {a, t0, nt, (int32_t)(item % (size_t)n_kv), a->n_heads / n_kv, hd,
                  a->n_heads * hd, a->batch->pos[t0 + nt - 1] + 1,
                  a->batch->seq_blocks[a->batch->seq[t0]], scratch, c->kern, NULL, NULL, NULL};
        if (a->kv->type == AK__KV_Q8_0 && thin_tile(&w) && q8_integer_scores()) {
            w.qd = qd, w.qs = qs, w.qq = qq;
            quantize_queries(&w);
        }
        scores_pass(&w, kbuf);
        for (int32_t ti = 0; ti < nt; ++ti)
            for (int32_t h = 0; h < w.group; ++h) normalize_row(&w, ti, h);
        values_pass(&w, vbuf);
    }
}

/* Splits the batch into tiles: runs of one sequence's tokens, at most AK_ATTN_TILE. */
static int32_t make_tiles(const ak__batch *b, int32_t *starts) {
    int32_t n = 0;
    for (int32_t t = 0; t < b->n_tokens; ++t)
        if (n == 0 || b->seq[t] != b->seq[t - 1] || t - starts[n - 1] == AK_ATTN_TILE ||
            b->pos[t] != b->pos[t - 1] + 1)
            starts[n++] = t;
    starts[n] = b->n_tokens;
    return n;
}

void ak__attention(const ak__attention_args *a, ak_threadpool *pool) {
    int32_t n_tiles = make_tiles(a->batch, a->tile_starts);
    tiles_ctx c = {a, ak__kernels_active(), a->tile_starts};
    size_t items = (size_t)n_tiles * (size_t)a->kv->n_kv_heads;
    /* multiply-adds of QKᵀ and PV: a decode token over a short context is done here in less
     * time than waking the workers takes */
    double macs = 0;
    for (int32_t k = 0; k < n_tiles; ++k)
        macs += 2.0 * (double)(a->tile_starts[k + 1] - a->tile_starts[k]) *
                (double)(a->batch->pos[a->tile_starts[k + 1] - 1] + 1);
    macs *= (double)a->n_heads * (double)a->kv->head_dim;
    if (macs < AK_ATTN_INLINE_MACS)
        attend_tiles(&c, 0, items, 0);
    else
        ak_threadpool_parallel_for(pool, items, 1, attend_tiles, &c);
}

/* One head's K or V row into the cache's storage type; q8_0 rounds as ggml's
 * quantize_row_q8_0 (kernels/ref/linear_ref.c), so llama.cpp's cache would hold the same
 * bytes for the same values. */
static void store_row(const ak__kv_cache *kv, void *dst, const float *src) {
    size_t hd = (size_t)kv->head_dim;
    switch (kv->type) {
    case AK__KV_F32: memcpy(dst, src, hd * sizeof(float)); break;
    case AK__KV_F16: ak_f32_to_f16(dst, src, hd); break;
    default: ak__quantize_row_ref(AK_WTYPE_Q8_0, src, dst, hd); break;
    }
}

void ak__kv_store(ak__kv_cache *kv, int32_t layer, const ak__batch *b, const float *k,
                  const float *v) {
    int32_t hd = kv->head_dim, bs = kv->block_size;
    size_t row = (size_t)kv->n_kv_heads * (size_t)hd;
    for (int32_t t = 0; t < b->n_tokens; ++t) {
        int32_t p = b->pos[t];
        int32_t block = b->seq_blocks[b->seq[t]][p / bs];
        for (int32_t g = 0; g < kv->n_kv_heads; ++g) {
            size_t at = ak__kv_at(kv, layer, block, g, p % bs);
            const float *ks = k + (size_t)t * row + (size_t)g * (size_t)hd;
            const float *vs = v + (size_t)t * row + (size_t)g * (size_t)hd;
            store_row(kv, (char *)kv->k + at, ks);
            store_row(kv, (char *)kv->v + at, vs);
        }
    }
}
