/* A runtime tensor: element type, shape and a pointer to row-major data.
 *
 * The runtime owns every tensor's storage (the planned arena, a constant payload, or a
 * caller's input buffer); operators only read inputs and write outputs whose shape they
 * set in reshape. Dims are stored inline so setting a shape never allocates. */
#ifndef AK_INFER_RUNTIME_TENSOR_H
#define AK_INFER_RUNTIME_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "accelkit/infer.h"
#include "infer/ir/ir.h"

typedef struct ak__tensor {
    ak_elem_type type;
    int rank;
    int64_t dims[AK_IR_MAX_RANK];
    uint64_t count; /* product of dims; 1 for a scalar (rank 0) */
    void *data;     /* count * ak_elem_type_size(type) bytes; may be NULL when count == 0 */
} ak__tensor;

static inline size_t ak__tensor_nbytes(const ak__tensor *t) {
    return (size_t)t->count * ak_elem_type_size(t->type);
}

/* Sets type and shape (rank <= AK_IR_MAX_RANK, dims >= 0) and recomputes count. Fails
 * with AK_ERR_INVALID_MODEL naming `what` when the shape is invalid or its byte size
 * overflows. Does not touch data. */
ak_status ak__tensor_set_shape(ak__tensor *t, ak_elem_type type, int rank, const int64_t *dims,
                               const char *what);

/* "float32[1,3,224,224]" into buf (always NUL-terminated); returns buf. */
const char *ak__tensor_describe(const ak__tensor *t, char *buf, size_t size);

#endif /* AK_INFER_RUNTIME_TENSOR_H */
