/* Internal view of a parsed GGUF file, shared by the reader and its query functions. */
#ifndef AK_LLM_GGUF_H
#define AK_LLM_GGUF_H

#include <stdint.h>

#include "accelkit/llm.h"
#include "llm/strmap.h"

typedef struct ak_gguf_kv {
    const char *key;
    size_t key_len;
    ak_gguf_type type;
    ak_gguf_type elem_type; /* arrays */
    uint64_t count;         /* arrays */
    uint64_t pos;           /* file offset of the value (arrays: of the first element) */
    uint64_t *elem_pos;     /* string arrays: file offset of each element's length */
} ak_gguf_kv;

struct ak_gguf {
    const unsigned char *base;
    uint64_t size;
    int mapped;
    uint32_t version;
    uint64_t alignment, data_offset;
    uint64_t n_kv, n_tensors;
    ak_gguf_kv *kv;
    ak_gguf_tensor *tensors;
    ak_strmap kv_index, tensor_index;
};

/* The entry for `key`, NULL when absent. */
/* As ak_gguf_open, but the file is read into private anonymous memory backed by
 * transparent huge pages where the kernel offers them: a decode step streams every
 * weight, and with 4 KiB pages of a file mapping each page costs a TLB miss and a
 * restart of the hardware prefetcher. */
ak_status ak__gguf_open_private(const char *path, ak_gguf **out);

const ak_gguf_kv *ak__gguf_find(const ak_gguf *g, const char *key);

#endif /* AK_LLM_GGUF_H */
