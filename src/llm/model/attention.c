/* Paged causal attention (see attention.h). One work item is (token, KV head): the
 * group's query heads score every cached position block by block (f16 blocks are
 * widened once into scratch), a softmax in f32 with the max subtracted, then the
 * probability-weighted sum of V rows. */
#include <math.h>
#include <string.h>

#include "core/half.h"
#include "llm/model/attention.h"

size_t ak__attention_scratch_floats(int32_t n_heads, int32_t n_kv_heads, int32_t head_dim,
                                    int32_t block_size, int32_t max_context) {
    int32_t group = n_heads / n_kv_heads;
    return (size_t)group * (size_t)max_context + 2u * (size_t)block_size * (size_t)head_dim;
}

/* Pointer to the f32 rows of (layer, block, head): the cache itself, or `buf` widened. */
static const float *block_rows(const ak__kv_cache *kv, const void *base, int32_t layer,
                               int32_t block, int32_t head, int32_t n, float *buf) {
    size_t at = ak__kv_at(kv, layer, block, head, 0);
    if (kv->dtype == AK_DTYPE_F32) return (const float *)base + at;
    const uint16_t *h = (const uint16_t *)base + at;
    ak_f16_to_f32(buf, h, (size_t)n * (size_t)kv->head_dim);
    return buf;
}

static float dot(const float *a, const float *b, int32_t n) {
    float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int32_t i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += a[i] * b[i];
        s1 += a[i + 1] * b[i + 1];
        s2 += a[i + 2] * b[i + 2];
        s3 += a[i + 3] * b[i + 3];
    }
    for (; i < n; ++i) s0 += a[i] * b[i];
    return (s0 + s1) + (s2 + s3);
}

typedef struct item_ctx {
    const ak__attention_args *a;
    int32_t group, head_dim, q_stride;
} item_ctx;

static void scores_pass(const item_ctx *c, int32_t t, int32_t g, int32_t len, float *scores,
                        float *kbuf) {
    const ak__attention_args *a = c->a;
    const ak__kv_cache *kv = a->kv;
    const int32_t *table = a->batch->seq_blocks[a->batch->seq[t]];
    int32_t bs = kv->block_size, hd = c->head_dim;
    for (int32_t start = 0; start < len; start += bs) {
        int32_t n = len - start < bs ? len - start : bs;
        const float *krows = block_rows(kv, kv->k, a->layer, table[start / bs], g, n, kbuf);
        for (int32_t h = 0; h < c->group; ++h) {
            const float *q = a->q + (size_t)t * (size_t)c->q_stride + (size_t)(g * c->group + h) * (size_t)hd;
            float *s = scores + (size_t)h * (size_t)len + (size_t)start;
            for (int32_t j = 0; j < n; ++j) s[j] = dot(q, krows + (size_t)j * (size_t)hd, hd) * a->scale;
        }
    }
}

static void softmax(float *s, int32_t n) {
    float mx = s[0];
    for (int32_t j = 1; j < n; ++j) mx = s[j] > mx ? s[j] : mx;
    float sum = 0;
    for (int32_t j = 0; j < n; ++j) {
        s[j] = expf(s[j] - mx);
        sum += s[j];
    }
    float inv = 1.0f / sum;
    for (int32_t j = 0; j < n; ++j) s[j] *= inv;
}

static void values_pass(const item_ctx *c, int32_t t, int32_t g, int32_t len,
                        const float *scores, float *vbuf) {
    const ak__attention_args *a = c->a;
    const ak__kv_cache *kv = a->kv;
    const int32_t *table = a->batch->seq_blocks[a->batch->seq[t]];
    int32_t bs = kv->block_size, hd = c->head_dim;
    for (int32_t h = 0; h < c->group; ++h)
        memset(a->out + (size_t)t * (size_t)c->q_stride + (size_t)(g * c->group + h) * (size_t)hd, 0,
               (size_t)hd * sizeof(float));
    for (int32_t start = 0; start < len; start += bs) {
        int32_t n = len - start < bs ? len - start : bs;
        const float *vrows = block_rows(kv, kv->v, a->layer, table[start / bs], g, n, vbuf);
        for (int32_t h = 0; h < c->group; ++h) {
            float *o = a->out + (size_t)t * (size_t)c->q_stride + (size_t)(g * c->group + h) * (size_t)hd;
            const float *p = scores + (size_t)h * (size_t)len + (size_t)start;
            for (int32_t j = 0; j < n; ++j) {
                const float *vr = vrows + (size_t)j * (size_t)hd;
                for (int32_t d = 0; d < hd; ++d) o[d] += p[j] * vr[d];
            }
        }
    }
}

static void attend_items(void *ctx, size_t begin, size_t end, int thread_index) {
    const item_ctx *c = ctx;
    const ak__attention_args *a = c->a;
    int32_t n_kv = a->kv->n_kv_heads;
    float *scratch = a->scratch + (size_t)thread_index * a->scratch_per_thread;
    size_t block_floats = (size_t)a->kv->block_size * (size_t)c->head_dim;
    float *kbuf = scratch + (a->scratch_per_thread - 2 * block_floats);
    float *vbuf = kbuf + block_floats;
    for (size_t item = begin; item < end; ++item) {
        int32_t t = (int32_t)(item / (size_t)n_kv), g = (int32_t)(item % (size_t)n_kv);
        int32_t len = a->batch->pos[t] + 1;
        scores_pass(c, t, g, len, scratch, kbuf);
        for (int32_t h = 0; h < c->group; ++h) softmax(scratch + (size_t)h * (size_t)len, len);
        values_pass(c, t, g, len, scratch, vbuf);
    }
}

void ak__attention(const ak__attention_args *a, ak_threadpool *pool) {
    item_ctx c = {a, a->n_heads / a->kv->n_kv_heads, a->kv->head_dim,
                  a->n_heads * a->kv->head_dim};
    size_t items = (size_t)a->batch->n_tokens * (size_t)a->kv->n_kv_heads;
    ak_threadpool_parallel_for(pool, items, 1, attend_items, &c);
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
