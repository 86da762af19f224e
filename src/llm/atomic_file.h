/* Files that appear whole or not at all: written as `path`.tmp and renamed onto `path`
 * only once every byte is on disk, so a failed conversion never leaves a truncated
 * model behind (GGUF writer, safetensors writer, the HF folder's JSON files). */
#ifndef AK_LLM_ATOMIC_FILE_H
#define AK_LLM_ATOMIC_FILE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "accelkit/ak.h"

typedef struct ak__atomic_file {
    FILE *f;
    char *path, *tmp_path;
} ak__atomic_file;

/* Creates `path`.tmp for writing; *a is left zeroed on failure. */
ak_status ak__atomic_open(ak__atomic_file *a, const char *path);
/* Appends n bytes; AK_ERR_IO naming the file when the disk refuses them. */
ak_status ak__atomic_write(ak__atomic_file *a, const void *p, size_t n);
/* Closes the temporary and renames it onto the path (removed instead on failure). */
ak_status ak__atomic_commit(ak__atomic_file *a);
/* The end of a tensor file (GGUF, safetensors): commits it when every tensor was written
 * whole (short_tensor NULL), else fails with AK_ERR_INVALID_ARG naming the `format` file
 * and the tensor that got `done` of its `size` bytes (the file stays uncommitted). */
ak_status ak__atomic_commit_tensors(ak__atomic_file *a, const char *format,
                                    const char *short_tensor, uint64_t done, uint64_t size);
/* Closes and removes the temporary. Harmless on a zeroed or committed file. */
void ak__atomic_abort(ak__atomic_file *a);

#endif /* AK_LLM_ATOMIC_FILE_H */
