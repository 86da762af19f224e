/* Fuzz: the GGUF reader and the tokenizers built on it. Any input must be accepted or
 * rejected with a status, never crash; what is accepted must be self-consistent (tensors
 * inside the buffer, every metadata value readable), and a tokenizer built from it must
 * encode and decode without fault. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "accelkit/llm.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void read_metadata(const ak_gguf *g) {
    uint64_t n;
    ak_gguf_kv_count(g, &n);
    for (uint64_t i = 0; i < n; i++) {
        const char *key;
        size_t key_len;
        ak_gguf_type type;
        if (ak_gguf_kv_at(g, i, &key, &key_len, &type) != AK_OK) abort();
        char name[256];
        if (key_len >= sizeof name) continue;
        memcpy(name, key, key_len);
        name[key_len] = '\0';
        int64_t iv;
        double dv;
        const char *s;
        size_t len;
        ak_gguf_type et;
        uint64_t count;
        ak_gguf_get_int(g, name, &iv);
        ak_gguf_get_float(g, name, &dv);
        ak_gguf_get_string(g, name, &s, &len);
        if (ak_gguf_get_array(g, name, &et, &count) == AK_OK && count > 0) {
            ak_gguf_get_array_string(g, name, count - 1, &s, &len);
            ak_gguf_get_array_int(g, name, count - 1, &iv);
            ak_gguf_get_array_float(g, name, count - 1, &dv);
        }
    }
}

static void check_tensors(const ak_gguf *g, const uint8_t *data, size_t size) {
    uint64_t n;
    ak_gguf_tensor_count(g, &n);
    for (uint64_t i = 0; i < n; i++) {
        ak_gguf_tensor t;
        if (ak_gguf_tensor_at(g, i, &t) != AK_OK) abort();
        if (t.offset > size || t.size > size - t.offset || (const uint8_t *)t.data != data + t.offset) abort();
    }
}

static void use_tokenizer(const ak_gguf *g, const uint8_t *data, size_t size) {
    ak_tokenizer *t;
    if (ak_tokenizer_from_gguf(g, &t) != AK_OK) return;
    size_t len = size < 256 ? size : 256; /* the input's own bytes as text */
    int32_t ids[256 + 3];
    size_t n;
    if (ak_tokenizer_encode(t, (const char *)data, len, AK_TOK_ADD_SPECIAL | AK_TOK_PARSE_SPECIAL, ids,
                            len + 3, &n) == AK_OK) {
        char out[8192];
        size_t out_len;
        ak_tokenizer_decode(t, ids, n, AK_TOK_RENDER_SPECIAL, out, sizeof out, &out_len);
    }
    ak_tokenizer_free(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ak_gguf *g;
    if (ak_gguf_open_memory(data, size, &g) != AK_OK) return 0;
    read_metadata(g);
    check_tensors(g, data, size);
    use_tokenizer(g, data, size);
    ak_gguf_close(g);
    return 0;
}
