/* The paged KV cache's block manager (see kv_cache.h): free stack, reference counts,
 * published-block hash chains and the LRU list of evictable cached blocks. Every
 * operation is O(1) except lookups, which walk one short hash chain. */
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "core/hash.h"
#include "kernels/linear.h"
#include "llm/base/kv_cache.h"

const char *ak__kv_type_name(ak__kv_type type) {
    return type == AK__KV_F32 ? "f32" : type == AK__KV_F16 ? "f16" : "q8_0";
}

size_t ak__kv_row_bytes(int32_t head_dim, ak__kv_type type) {
    switch (type) {
    case AK__KV_F32: return (size_t)head_dim * 4;
    case AK__KV_F16: return (size_t)head_dim * 2;
    default: return (size_t)head_dim / AK__QK * sizeof(ak__block_q8_0);
    }
}

size_t ak__kv_block_bytes(int32_t n_layers, int32_t n_kv_heads, int32_t head_dim,
                          int32_t block_size, ak__kv_type type) {
    return 2 * (size_t)n_layers * (size_t)n_kv_heads * (size_t)block_size *
           ak__kv_row_bytes(head_dim, type);
}

static ak_status alloc_arrays(ak__kv_cache *kv) {
    size_t nb = (size_t)kv->n_blocks;
    size_t bytes = (size_t)kv->n_layers * nb * kv->block_stride * kv->row_bytes;
    kv->k = malloc(bytes ? bytes : 1);
    kv->v = malloc(bytes ? bytes : 1);
    kv->ref = calloc(nb, sizeof *kv->ref);
    kv->free_stack = malloc(nb * sizeof *kv->free_stack);
    kv->hash = calloc(nb, sizeof *kv->hash);
    kv->tokens = malloc(nb * (size_t)kv->block_size * sizeof *kv->tokens);
    kv->n_buckets = 1;
    while (kv->n_buckets < 2 * kv->n_blocks) kv->n_buckets <<= 1;
    kv->bucket = malloc((size_t)kv->n_buckets * sizeof *kv->bucket);
    kv->chain = malloc(nb * sizeof *kv->chain);
    kv->lru_prev = malloc(nb * sizeof *kv->lru_prev);
    kv->lru_next = malloc(nb * sizeof *kv->lru_next);
    if (!kv->k || !kv->v || !kv->ref || !kv->free_stack || !kv->hash || !kv->tokens ||
        !kv->bucket || !kv->chain || !kv->lru_prev || !kv->lru_next)
        return AK_FAIL(AK_ERR_NO_MEMORY, "KV cache: out of memory for %d blocks (%zu bytes)",
                       kv->n_blocks, 2 * bytes);
    return AK_OK;
}

ak_status ak__kv_create(int32_t n_layers, int32_t n_kv_heads, int32_t head_dim,
                        int32_t block_size, int32_t n_blocks, ak__kv_type type,
                        ak__kv_cache **out) {
    AK_ARG_CHECK(n_layers > 0 && n_kv_heads > 0 && head_dim > 0, "KV cache: bad model shape");
    AK_ARG_CHECK(block_size >= 1 && block_size <= 1024, "KV cache: block_size %d not in [1, 1024]",
                 block_size);
    AK_ARG_CHECK(n_blocks >= 1, "KV cache: the budget holds no block (n_blocks = %d)", n_blocks);
    AK_ARG_CHECK(type == AK__KV_F32 || type == AK__KV_F16 || type == AK__KV_Q8_0,
                 "KV cache: type %d is not f32, f16 or q8_0", (int)type);
    AK_ARG_CHECK(type != AK__KV_Q8_0 || head_dim % AK__QK == 0,
                 "KV cache: q8_0 needs a head_dim that is a multiple of %d; this model's "
                 "head_dim is %d (use an f16 or f32 KV cache)", AK__QK, head_dim);
    ak__kv_cache *kv = calloc(1, sizeof *kv);
    if (!kv) return AK_FAIL(AK_ERR_NO_MEMORY, "KV cache: out of memory");
    kv->n_layers = n_layers;
    kv->n_kv_heads = n_kv_heads;
    kv->head_dim = head_dim;
    kv->block_size = block_size;
    kv->n_blocks = n_blocks;
    kv->type = type;
    kv->row_bytes = ak__kv_row_bytes(head_dim, type);
    kv->block_stride = (size_t)n_kv_heads * (size_t)block_size;
    ak_status st = alloc_arrays(kv);
    if (st != AK_OK) {
        ak__kv_free(kv);
        return st;
    }
    for (int32_t i = 0; i < n_blocks; ++i) kv->free_stack[i] = n_blocks - 1 - i;
    kv->n_free = n_blocks;
    for (int32_t i = 0; i < kv->n_buckets; ++i) kv->bucket[i] = -1;
    kv->lru_head = kv->lru_tail = -1;
    *out = kv;
    return AK_OK;
}

void ak__kv_free(ak__kv_cache *kv) {
    if (!kv) return;
    free(kv->k);
    free(kv->v);
    free(kv->ref);
    free(kv->free_stack);
    free(kv->hash);
    free(kv->tokens);
    free(kv->bucket);
    free(kv->chain);
    free(kv->lru_prev);
    free(kv->lru_next);
    free(kv);
}

/* ---- LRU of evictable blocks ------------------------------------------------------- */

static void lru_remove(ak__kv_cache *kv, int32_t b) {
    int32_t p = kv->lru_prev[b], n = kv->lru_next[b];
    if (p >= 0) kv->lru_next[p] = n;
    else kv->lru_head = n;
    if (n >= 0) kv->lru_prev[n] = p;
    else kv->lru_tail = p;
    kv->n_evictable--;
}

static void lru_push(ak__kv_cache *kv, int32_t b) {
    kv->lru_prev[b] = kv->lru_tail;
    kv->lru_next[b] = -1;
    if (kv->lru_tail >= 0) kv->lru_next[kv->lru_tail] = b;
    else kv->lru_head = b;
    kv->lru_tail = b;
    kv->n_evictable++;
}

/* ---- hash chains ------------------------------------------------------------------- */

static int32_t bucket_of(const ak__kv_cache *kv, uint64_t h) {
    return (int32_t)(h & (uint64_t)(kv->n_buckets - 1));
}

static void unpublish(ak__kv_cache *kv, int32_t b) {
    int32_t *link = &kv->bucket[bucket_of(kv, kv->hash[b])];
    while (*link != b) link = &kv->chain[*link];
    *link = kv->chain[b];
    kv->hash[b] = 0;
}

uint64_t ak__kv_chain_hash(uint64_t parent, const int32_t *tokens, int32_t n) {
    /* FNV-1a over the ids' bytes, seeded by the parent block's hash */
    uint64_t h = ak__fnv1a64(parent ^ 0x9e3779b97f4a7c15ull, tokens, (size_t)n * sizeof *tokens);
    return h ? h : 1; /* 0 means "not published" */
}

int32_t ak__kv_lookup(ak__kv_cache *kv, uint64_t hash, const int32_t *tokens) {
    kv->lookups++;
    for (int32_t b = kv->bucket[bucket_of(kv, hash)]; b >= 0; b = kv->chain[b]) {
        if (kv->hash[b] != hash) continue;
        if (memcmp(&kv->tokens[(size_t)b * (size_t)kv->block_size], tokens,
                   (size_t)kv->block_size * sizeof *tokens) != 0)
            continue;
        if (kv->ref[b] == 0) lru_remove(kv, b);
        kv->ref[b]++;
        kv->hits++;
        return b;
    }
    return -1;
}

void ak__kv_publish(ak__kv_cache *kv, int32_t block, uint64_t hash, const int32_t *tokens) {
    if (kv->hash[block] != 0) return;
    for (int32_t b = kv->bucket[bucket_of(kv, hash)]; b >= 0; b = kv->chain[b])
        if (kv->hash[b] == hash) return; /* an equal block is already cached */
    kv->hash[block] = hash;
    memcpy(&kv->tokens[(size_t)block * (size_t)kv->block_size], tokens,
           (size_t)kv->block_size * sizeof *tokens);
    int32_t bk = bucket_of(kv, hash);
    kv->chain[block] = kv->bucket[bk];
    kv->bucket[bk] = block;
}

/* ---- allocation ---------------------------------------------------------------------- */

int32_t ak__kv_alloc(ak__kv_cache *kv) {
    int32_t b;
    if (kv->n_free > 0) {
        b = kv->free_stack[--kv->n_free];
    } else if (kv->lru_head >= 0) {
        b = kv->lru_head;
        lru_remove(kv, b);
        unpublish(kv, b);
    } else {
        return -1;
    }
    kv->ref[b] = 1;
    return b;
}

void ak__kv_ref(ak__kv_cache *kv, int32_t block) { kv->ref[block]++; }

void ak__kv_unref(ak__kv_cache *kv, int32_t block) {
    if (--kv->ref[block] > 0) return;
    if (kv->hash[block] != 0) lru_push(kv, block);
    else kv->free_stack[kv->n_free++] = block;
}

int32_t ak__kv_available(const ak__kv_cache *kv) { return kv->n_free + kv->n_evictable; }

void ak__kv_copy(ak__kv_cache *kv, int32_t dst, int32_t src) {
    size_t bytes = kv->block_stride * kv->row_bytes;
    for (int32_t l = 0; l < kv->n_layers; ++l) {
        size_t d = ak__kv_at(kv, l, dst, 0, 0);
        size_t s = ak__kv_at(kv, l, src, 0, 0);
        memcpy((char *)kv->k + d, (const char *)kv->k + s, bytes);
        memcpy((char *)kv->v + d, (const char *)kv->v + s, bytes);
    }
}
