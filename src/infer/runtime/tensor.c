/* Runtime tensors: setting a checked shape and describing one for messages. */
#include <stdio.h>
#include <string.h>

#include "core/check.h"
#include "infer/runtime/tensor.h"

ak_status ak__tensor_set_shape(ak__tensor *t, ak_elem_type type, int rank, const int64_t *dims,
                               const char *what) {
    if (rank < 0 || rank > AK_IR_MAX_RANK)
        return AK_FAIL(AK_ERR_INVALID_MODEL, "%s: rank %d is out of range [0, %d]", what, rank,
                       AK_IR_MAX_RANK);
    size_t elem = ak_elem_type_size(type);
    if (elem == 0)
        return AK_FAIL(AK_ERR_UNSUPPORTED, "%s: element type %s cannot be computed on", what,
                       ak_elem_type_name(type));
    uint64_t count = 1;
    for (int i = 0; i < rank; i++) {
        if (dims[i] < 0)
            return AK_FAIL(AK_ERR_INVALID_MODEL, "%s: dimension %d is negative (%lld)", what, i,
                           (long long)dims[i]);
        if (dims[i] && count > ((uint64_t)1 << 48) / (uint64_t)dims[i])
            return AK_FAIL(AK_ERR_INVALID_MODEL, "%s: shape is too large", what);
        count *= (uint64_t)dims[i];
    }
    if (count > (((uint64_t)1 << 48) / elem))
        return AK_FAIL(AK_ERR_INVALID_MODEL, "%s: tensor of %llu elements is too large", what,
                       (unsigned long long)count);
    t->type = type;
    t->rank = rank;
    if (rank) memmove(t->dims, dims, (size_t)rank * sizeof *dims);
    t->count = count;
    return AK_OK;
}

const char *ak__tensor_describe(const ak__tensor *t, char *buf, size_t size) {
    size_t n = (size_t)snprintf(buf, size, "%s[", ak_elem_type_name(t->type));
    for (int i = 0; i < t->rank && n < size; i++)
        n += (size_t)snprintf(buf + n, size - n, i ? ",%lld" : "%lld", (long long)t->dims[i]);
    if (n < size) snprintf(buf + n, size - n, "]");
    return buf;
}
