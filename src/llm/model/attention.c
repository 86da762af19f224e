/* Paged causal attention (see attention.h). One work item is (tile, KV head): a tile is
 * up to 16 consecutive query tokens of one sequence, so during a prefill each K/V block
 * is read (and f16 widened) once per tile instead of once per token; the group's query
 * heads score every cached position block by block, a softmax in f32 with the max
 * subtracted, then the probability-weighted sum of V rows. The loops over rows are table
 * kernels (kernels/kernels.def: f32/f16_dot_rows, f32_softmax, f32/f16_madd_rows), each
 * called once per block row range, so AK_ISA and AK_KERNELS=ref reach them. */
#include <math.h>
#include <string.h>

#include "core/half.h"
#include "kernels/dispatch.h"
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
    return (size_t)AK_ATTN_TILE * (size_t)group * (size_t)max_context +
           2u * (size_t)block_size * (size_t)head_dim;
}

/* A tile: up to AK_ATTN_TILE consecutive batch tokens of one sequence (ascending
 * positions), attending with the heads of KV head g. */
typedef struct tile {
    const ak__attention_args *a;
    int32_t t0, nt, g, group, hd, q_stride, len_max;
    const int32_t *table;
    float *scores; /* [nt][group][len_max] */
    const ak__kernels *kern;
} tile;

/* The K or V rows of one block as the passes read them: f32 (the cache itself, or widened
 * into a buffer once for all the tile's queries), or f16 in place for the fused kernels
 * when the tile has too few queries to repay the widening (a decode token: each widened
 * row would be used once). */
typedef struct rows_view {
    const float *f32;
    const uint16_t *f16;
} rows_view;

static rows_view block_view(const tile *w, const void *base, int32_t block, int32_t n,
                            float *buf) {
    const ak__kv_cache *kv = w->a->kv;
    size_t at = ak__kv_at(kv, w->a->layer, block, w->g, 0);
    if (kv->dtype == AK_DTYPE_F32) return (rows_view){(const float *)base + at, NULL};
    const uint16_t *h = (const uint16_t *)base + at;
    if (w->nt * w->group < AK_ATTN_WIDEN_FROM) return (rows_view){NULL, h};
    ak_f16_to_f32(buf, h, (size_t)n * (size_t)kv->head_dim);
    return (rows_view){buf, NULL};
}

static float *tile_row(const tile *w, int32_t ti, int32_t h) {
    return w->scores + ((size_t)ti * (size_t)w->group + (size_t)h) * (size_t)w->len_max;
}

static size_t head_at(const tile *w, int32_t ti, int32_t h) {
    return (size_t)(w->t0 + ti) * (size_t)w->q_stride + (size_t)(w->g * w->group + h) * (size_t)w->hd;
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
            for (int32_t h = 0; h < w->group && nn > 0; ++h) {
                const float *q = a->q + head_at(w, ti, h);
                float *s = tile_row(w, ti, h) + start;
                if (k.f16)
                    w->kern->f16_dot_rows(s, q, k.f16, (size_t)nn, (size_t)w->hd, a->scale);
                else
                    w->kern->f32_dot_rows(s, q, k.f32, (size_t)nn, (size_t)w->hd, a->scale);
            }
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
    float *kbuf = scratch + (a->scratch_per_thread - 2 * block_floats), *vbuf = kbuf + block_floats;
    for (size_t item = begin; item < end; ++item) {
        int32_t k = (int32_t)(item / (size_t)n_kv), t0 = c->starts[k];
        int32_t nt = c->starts[k + 1] - t0;
        tile w = {a, t0, nt, (int32_t)(item % (size_t)n_kv), a->n_heads / n_kv, hd,
                  a->n_heads * hd, a->batch->pos[t0 + nt - 1] + 1,
                  a->batch->seq_blocks[a->batch->seq[t0]], scratch, c->kern};
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
            if (kv->dtype == AK_DTYPE_F32) {
                memcpy((float *)kv->k + at, ks, (size_t)hd * sizeof(float));
                memcpy((float *)kv->v + at, vs, (size_t)hd * sizeof(float));
            } else {
                ak_f32_to_f16((uint16_t *)kv->k + at, ks, (size_t)hd);
                ak_f32_to_f16((uint16_t *)kv->v + at, vs, (size_t)hd);
            }
        }
    }
}
