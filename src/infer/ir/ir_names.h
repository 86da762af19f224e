/* Name -> index map for IR values: open addressing over borrowed, NUL-terminated names
 * (the names live in the graph's arena, so the map only stores pointers). */
#ifndef AK_INFER_IR_NAMES_H
#define AK_INFER_IR_NAMES_H

#include <stdint.h>

#include "accelkit/ak.h"

typedef struct ak__ir_names ak__ir_names;

ak_status ak__ir_names_create(ak__ir_names **out);
void ak__ir_names_free(ak__ir_names *m);
/* Adds name -> index; the name must stay alive and must not be in the map yet. */
ak_status ak__ir_names_put(ak__ir_names *m, const char *name, int32_t index);
/* The index of name, or -1. */
int32_t ak__ir_names_get(const ak__ir_names *m, const char *name);

#endif /* AK_INFER_IR_NAMES_H */
