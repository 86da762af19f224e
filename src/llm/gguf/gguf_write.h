/* Streaming GGUF v3 writer (the library's; tests/llm/gguf_writer.h is a test helper).
 *
 * Use: open → metadata (kv_*) and tensor infos (add_tensor), in any order → tensor data
 * (write_data, in the order the tensors were added, each exactly its size, in as many
 * pieces as the caller likes) → close. Metadata and tensor infos are kept in memory until
 * the first data byte (they are small next to the weights); tensor data goes straight to
 * the file, so a converter never holds more than one tensor's rows. The file is written
 * as `path`.tmp and renamed on a successful close; abort (or a failed close) removes it.
 *
 * The writer emits general.alignment itself. Keys and tensor names must be unique. */
#ifndef AK_LLM_GGUF_WRITE_H
#define AK_LLM_GGUF_WRITE_H

#include <stddef.h>
#include <stdint.h>

#include "accelkit/llm.h"

typedef struct ak__gguf_writer ak__gguf_writer;

/* alignment: a power of two ≥ 8 for the tensor data; 0 = 32 (the GGUF default). */
ak_status ak__gguf_writer_open(const char *path, uint32_t alignment, ak__gguf_writer **out);
/* Completes the file: every declared tensor must have all its bytes. Frees `w`. */
ak_status ak__gguf_writer_close(ak__gguf_writer *w);
/* Gives up: removes the partial file and frees `w` (NULL is fine). */
void ak__gguf_writer_abort(ak__gguf_writer *w);

/* Scalars. `key` is copied. */
ak_status ak__gguf_kv_u32(ak__gguf_writer *w, const char *key, uint32_t v);
ak_status ak__gguf_kv_i32(ak__gguf_writer *w, const char *key, int32_t v);
ak_status ak__gguf_kv_u64(ak__gguf_writer *w, const char *key, uint64_t v);
ak_status ak__gguf_kv_f32(ak__gguf_writer *w, const char *key, float v);
ak_status ak__gguf_kv_f64(ak__gguf_writer *w, const char *key, double v);
ak_status ak__gguf_kv_bool(ak__gguf_writer *w, const char *key, int v);
ak_status ak__gguf_kv_string(ak__gguf_writer *w, const char *key, const char *s, size_t len);
/* A scalar of any fixed-size type; `value` points to one element in host order. */
ak_status ak__gguf_kv_scalar(ak__gguf_writer *w, const char *key, ak_gguf_type type,
                             const void *value);
/* An array of `n` fixed-size elements of `elem` type, host order, packed. */
ak_status ak__gguf_kv_array(ak__gguf_writer *w, const char *key, ak_gguf_type elem,
                            const void *values, uint64_t n);
/* An array of strings; lens NULL = each is NUL-terminated. */
ak_status ak__gguf_kv_strings(ak__gguf_writer *w, const char *key, const char *const *s,
                              const size_t *lens, uint64_t n);

/* Declares a tensor (dims[0] innermost, 1..4 dims) of ggml type `type` (AK_GGML_*); its
 * data follows the previously declared one's, aligned. */
ak_status ak__gguf_add_tensor(ak__gguf_writer *w, const char *name, uint32_t n_dims,
                              const uint64_t *dims, uint32_t type);
/* Bytes of the tensor with index `i` (declaration order). */
ak_status ak__gguf_tensor_bytes(const ak__gguf_writer *w, uint64_t i, uint64_t *bytes);
/* Appends `bytes` of data to the current tensor; once it is complete the next one starts.
 * The first call writes the header, after which nothing more can be declared. */
ak_status ak__gguf_write_data(ak__gguf_writer *w, const void *data, size_t bytes);

#endif /* AK_LLM_GGUF_WRITE_H */
