/* The selection operator family: the table registry.c searches, and the growable state
 * buffer its operators share. */
#include "infer/ops/select/select.h"

const ak__op_def *const ak__ops_select[] = {
    &ak__op_non_max_suppression,
    &ak__op_unique,
    NULL,
};

ak_status ak__select_reserve(ak__select_buf *b, size_t bytes) {
    if (bytes <= b->bytes && b->data) return AK_OK;
    ak_free(b->data);
    b->data = NULL;
    b->bytes = 0;
    AK_CHECK(ak_alloc(bytes, &b->data));
    b->bytes = bytes;
    return AK_OK;
}

void ak__select_release(ak__select_buf *b) {
    ak_free(b->data);
    b->data = NULL;
    b->bytes = 0;
}
