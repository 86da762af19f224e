/* Fuzz: the tensor-file readers of `ak run` / `ak compare` and the ONNX conformance
 * runner: NumPy .npy and a serialized ONNX TensorProto (.pb, the test_data_set format).
 * Every input is read as both. Each must load or be refused with a message, never crash
 * or read past the file; a loaded tensor's data must hold rank × dims elements of its
 * type (ASan checks the last byte). */
#include <stdint.h>
#include <stdlib.h>

#include "accelkit/infer.h"
#include "fuzz_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_loaded(const char *what, ak_status st, ak_tensor_file *f) {
    if (st != AK_OK) {
        if (f) abort();
        fuzz_refused(what);
        return;
    }
    fuzz_accepted(what);
    const char *name;
    ak_tensor t;
    if (ak_tensor_file_get(f, &name, &t) != AK_OK || !name || t.rank < 0) abort();
    uint64_t count = 1;
    for (int i = 0; i < t.rank; i++) {
        if (t.dims[i] < 0) abort();
        count *= (uint64_t)t.dims[i];
    }
    size_t bytes = (size_t)count * ak_elem_type_size(t.type);
    volatile uint8_t touch = 0;
    if (bytes) touch = ((const uint8_t *)t.data)[bytes - 1];
    (void)touch;
    ak_tensor_file_free(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ak_tensor_file *f = NULL;
    ak_status st = ak_tensor_load_npy(fuzz_write_file("t.npy", data, size), &f);
    check_loaded("npy", st, f);
    f = NULL;
    st = ak_tensor_load_pb(fuzz_write_file("t.pb", data, size), &f);
    check_loaded("pb", st, f);
    return 0;
}
