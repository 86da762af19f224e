/* Fuzz: the safetensors reader (the header of every HF weight shard). Any bytes must be
 * parsed or refused with a message, never crash or read outside the buffer; an accepted
 * file must be self-consistent: every tensor's bytes = its shape × dtype size and lie in
 * the data section, and every tensor is found again by its name. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_file.h"
#include "llm/hf/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_tensor(const ak__st_file *f, const ak__st_tensor *t, const uint8_t *data,
                         size_t size) {
    uint64_t elems = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) elems *= t->shape[d];
    if (t->n_dims > AK_ST_MAX_DIMS || elems * ak__st_dtype_size(t->dtype) != t->bytes) abort();
    const uint8_t *p = t->data;
    if (t->bytes && (p < data + 8 || p > data + size || t->bytes > (uint64_t)(data + size - p)))
        abort();
    if (ak__st_find(f, t->name) != t) abort();
    volatile uint8_t touch = 0; /* ASan sees a read past the buffer here */
    if (t->bytes) touch = (uint8_t)(p[0] ^ p[t->bytes - 1]);
    (void)touch;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ak__st_file f;
    if (ak__st_parse(data, size, "fuzz.safetensors", &f) != AK_OK) {
        fuzz_refused("safetensors");
        return 0;
    }
    fuzz_accepted("safetensors");
    for (size_t i = 0; i < f.n_tensors; i++) check_tensor(&f, &f.tensors[i], data, size);
    ak__st_close(&f);
    return 0;
}
