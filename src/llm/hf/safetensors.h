/* safetensors files: a validating zero-copy reader (safetensors.c) and a streaming writer
 * (safetensors_write.c).
 *
 * Format (huggingface/safetensors): u64 little-endian N, then N bytes of a JSON object
 * {"name": {"dtype": "F32", "shape": [d0, d1, ...], "data_offsets": [begin, end]}, ...,
 * "__metadata__": {"key": "value", ...}}, then the data; offsets count from the first
 * byte after the header. Shapes are outermost first (PyTorch order), data row-major. */
#ifndef AK_LLM_HF_SAFETENSORS_H
#define AK_LLM_HF_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "accelkit/ak.h"
#include "llm/strmap.h"

#define AK_ST_MAX_DIMS 8
#define AK_ST_MAX_HEADER (100u << 20) /* the format's own limit is 100 MB */

typedef enum ak__st_dtype {
    AK_ST_BOOL, AK_ST_U8, AK_ST_I8, AK_ST_F8_E5M2, AK_ST_F8_E4M3, AK_ST_I16, AK_ST_U16,
    AK_ST_F16, AK_ST_BF16, AK_ST_I32, AK_ST_U32, AK_ST_F32, AK_ST_F64, AK_ST_I64, AK_ST_U64,
    AK_ST_N_DTYPES
} ak__st_dtype;

const char *ak__st_dtype_name(ak__st_dtype t);
size_t ak__st_dtype_size(ak__st_dtype t);

typedef struct ak__st_tensor {
    const char *name;                 /* NUL-terminated, owned by the file */
    ak__st_dtype dtype;
    uint32_t n_dims;                  /* 0 = a scalar */
    uint64_t shape[AK_ST_MAX_DIMS];   /* outermost first */
    const void *data;                 /* into the mapping; aligned as the file makes it */
    uint64_t bytes;
} ak__st_tensor;

typedef struct ak__st_file {
    const unsigned char *base;
    size_t size;
    int mapped;
    ak__st_tensor *tensors; /* in file order of their data */
    size_t n_tensors;
    char *names;            /* every name, NUL-terminated, back to back */
    ak_strmap index;        /* name → position in `tensors` */
} ak__st_file;

/* Validates everything — header length within the file and the limit, JSON object, each
 * dtype known, shape × dtype size == data span, spans inside the data, no overlaps, no
 * duplicate names — and indexes the tensors; AK_ERR_INVALID_MODEL naming `what` and the
 * fault otherwise. Parses `size` bytes at `data` without copying (they must outlive f). */
ak_status ak__st_parse(const void *data, size_t size, const char *what, ak__st_file *f);
/* Maps `path` read-only and parses it. */
ak_status ak__st_open(const char *path, ak__st_file *f);
void ak__st_close(ak__st_file *f);
/* The tensor `name`, NULL when absent. */
const ak__st_tensor *ak__st_find(const ak__st_file *f, const char *name);

/* ---- writing ----------------------------------------------------------------------- */

typedef struct ak__st_writer ak__st_writer;

/* Declare every tensor (add) and metadata entry, then write the data of the tensors in
 * the order they were added; the file appears at `path` on a successful close. */
ak_status ak__st_writer_open(const char *path, ak__st_writer **out);
ak_status ak__st_writer_meta(ak__st_writer *w, const char *key, const char *value);
ak_status ak__st_writer_add(ak__st_writer *w, const char *name, ak__st_dtype dtype,
                            uint32_t n_dims, const uint64_t *shape);
ak_status ak__st_writer_data(ak__st_writer *w, const void *data, size_t bytes);
ak_status ak__st_writer_close(ak__st_writer *w);
void ak__st_writer_abort(ak__st_writer *w);

#endif /* AK_LLM_HF_SAFETENSORS_H */
