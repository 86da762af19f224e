/* The selection operator family: operators whose output size depends on the input
 * values (NonMaxSuppression, Unique). Their reshape step does the whole selection,
 * since the output shape is its result, and keeps it in the node's state; run only
 * writes it out. The state's buffers grow to the largest run seen and are reused, so a
 * steady-state run allocates nothing. */
#ifndef AK_INFER_OPS_SELECT_SELECT_H
#define AK_INFER_OPS_SELECT_SELECT_H

#include <stddef.h>

#include "infer/runtime/op.h"

/* select/nms.c, select/unique.c */
extern const ak__op_def ak__op_non_max_suppression, ak__op_unique;

/* A growable scratch buffer owned by a node's state. */
typedef struct ak__select_buf {
    void *data;
    size_t bytes;
} ak__select_buf;

/* Makes b hold at least `bytes` (contents are not kept when it grows). */
ak_status ak__select_reserve(ak__select_buf *b, size_t bytes);
void ak__select_release(ak__select_buf *b);

#endif /* AK_INFER_OPS_SELECT_SELECT_H */
