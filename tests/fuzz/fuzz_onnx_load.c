/* Fuzz: the ONNX loader must turn any bytes into a model or a status (invalid model or
 * unsupported), never crash, hang or allocate without bound; a model that loads must
 * answer every query. Seeds in corpus/fuzz_onnx_load; the libonnx-testdata models make a
 * good extra corpus (pass /usr/share/libonnx-testdata/data as another directory). */
#include <stdint.h>
#include <stdlib.h>

#include "accelkit/infer.h"

static void query_all(const ak_model *m) {
    ak_model_summary s;
    ak_model_flops f;
    if (ak_model_get_summary(m, &s) != AK_OK || ak_model_get_flops(m, &f) != AK_OK) abort();
    for (size_t i = 0; i < s.num_inputs; i++) {
        ak_value_info v;
        if (ak_model_input(m, i, &v) != AK_OK || !v.name) abort();
        for (int d = 0; d < v.rank; d++)
            if (v.dims[d] < -1) abort();
    }
    for (size_t i = 0; i < s.num_outputs; i++) {
        ak_value_info v;
        if (ak_model_output(m, i, &v) != AK_OK) abort();
    }
    for (size_t i = 0; i < s.num_op_types; i++) {
        const char *op;
        size_t count;
        if (ak_model_op_count(m, i, &op, &count) != AK_OK || count == 0) abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ak_model *m = NULL;
    /* no base directory: external data is refused, the fuzzer never touches files */
    ak_status st = ak_onnx_load_bytes(data, size, NULL, &m);
    if (st == AK_OK) query_all(m);
    else if (m || (st != AK_ERR_INVALID_MODEL && st != AK_ERR_UNSUPPORTED &&
                   st != AK_ERR_INVALID_ARG))
        abort();
    ak_model_free(m);
    return 0;
}
