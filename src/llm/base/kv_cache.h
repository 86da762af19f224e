/* The paged KV cache: fixed-size blocks of `block_size` token slots for every layer, a
 * free list, reference counts (copy-on-write sharing between samples of one prompt) and
 * automatic prefix caching: a full block is published under a hash chained over all
 * tokens up to its end, and stays cached (evictable, least recently used first) after
 * its last sequence let go of it.
 *
 * Storage layout: [layer][block][kv_head][slot][row] for K and for V, so attention for
 * one head reads block_size contiguous rows per block. A row is head_dim values: f32,
 * f16, or (AK__KV_Q8_0) ggml's q8_0 blocks along the head dimension — head_dim/32 blocks
 * of one f16 scale and 32 int8 values, 34 bytes for 32 values, quantized when written. */
#ifndef AK_LLM_BASE_KV_CACHE_H
#define AK_LLM_BASE_KV_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "accelkit/kernels.h"

/* What a row of K or V is stored as. */
typedef enum ak__kv_type { AK__KV_F32, AK__KV_F16, AK__KV_Q8_0 } ak__kv_type;

typedef struct ak__kv_cache {
    int32_t n_layers, n_kv_heads, head_dim, block_size, n_blocks;
    ak__kv_type type;
    size_t row_bytes;      /* one head's K (or V) of one token */
    size_t block_stride;   /* rows per (layer, block) */
    void *k, *v;
    /* block management */
    int32_t *ref;          /* sequences using the block */
    int32_t *free_stack;   /* never-cached free blocks */
    int32_t n_free;
    uint64_t *hash;        /* published hash, 0 = none */
    int32_t *tokens;       /* [n_blocks][block_size]: the tokens of published blocks */
    int32_t *bucket, *chain;         /* hash → block chains */
    int32_t n_buckets;
    int32_t *lru_prev, *lru_next;    /* evictable cached blocks (ref 0), oldest first */
    int32_t lru_head, lru_tail, n_evictable;
    uint64_t hits, lookups;
} ak__kv_cache;

/* Refuses AK__KV_Q8_0 for a head_dim that is not a multiple of 32, by name. */
ak_status ak__kv_create(int32_t n_layers, int32_t n_kv_heads, int32_t head_dim,
                        int32_t block_size, int32_t n_blocks, ak__kv_type type,
                        ak__kv_cache **out);
void ak__kv_free(ak__kv_cache *kv);

/* "f32", "f16", "q8_0" */
const char *ak__kv_type_name(ak__kv_type type);
/* Bytes of one head's K (or V) row of head_dim values. */
size_t ak__kv_row_bytes(int32_t head_dim, ak__kv_type type);
/* Bytes of K+V one block holds across all layers. */
size_t ak__kv_block_bytes(int32_t n_layers, int32_t n_kv_heads, int32_t head_dim,
                          int32_t block_size, ak__kv_type type);

/* A free block with ref 1 (evicting the least recently used cached one if needed);
 * -1 when every block is in use. */
int32_t ak__kv_alloc(ak__kv_cache *kv);
void ak__kv_ref(ak__kv_cache *kv, int32_t block);
/* Drops one reference; at zero a published block becomes evictable, others free. */
void ak__kv_unref(ak__kv_cache *kv, int32_t block);
/* Blocks an allocation could get now (free + evictable). */
int32_t ak__kv_available(const ak__kv_cache *kv);

/* The hash of a block's tokens chained after `parent` (0 for the first block). */
uint64_t ak__kv_chain_hash(uint64_t parent, const int32_t *tokens, int32_t n);
/* A published block holding exactly `tokens` under `hash`, referenced for the caller;
 * -1 if none. */
int32_t ak__kv_lookup(ak__kv_cache *kv, uint64_t hash, const int32_t *tokens);
/* Publishes a full block (no-op if an equal block is already published). */
void ak__kv_publish(ak__kv_cache *kv, int32_t block, uint64_t hash, const int32_t *tokens);
/* Copies every layer's K/V of `src` into `dst` (copy-on-write). */
void ak__kv_copy(ak__kv_cache *kv, int32_t dst, int32_t src);

/* Byte offset of the row (layer, block, head, slot) in k / v. */
static inline size_t ak__kv_at(const ak__kv_cache *kv, int32_t layer, int32_t block,
                               int32_t head, int32_t slot) {
    size_t row = ((size_t)layer * (size_t)kv->n_blocks + (size_t)block) * kv->block_stride +
                 (size_t)head * (size_t)kv->block_size + (size_t)slot;
    return row * kv->row_bytes;
}

#endif /* AK_LLM_BASE_KV_CACHE_H */
