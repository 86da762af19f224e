/* Declared environment parameters (see params.def): read and validated once by ak_init,
 * then served from a cache. */
#ifndef AK_CORE_PARAMS_H
#define AK_CORE_PARAMS_H

#include <stdint.h>

#include "accelkit/ak.h"

typedef enum ak__param_id {
#define AK_PARAM(id, name, kind, def, lo, hi, layer, doc) AK_PARAM_##id,
#include "params.def"
#undef AK_PARAM
    AK_PARAM_COUNT_
} ak__param_id;

typedef enum ak__param_kind { AK_PARAM_KIND_INT, AK_PARAM_KIND_STR } ak__param_kind;

typedef struct ak__param_desc {
    const char *name;
    ak__param_kind kind;
    const char *default_value;
    int64_t min, max;
    const char *layer;
    const char *doc;
} ak__param_desc;

const ak__param_desc *ak__param_describe(ak__param_id id);
/* Reads every parameter from the environment; fails naming the first bad one. */
ak_status ak__params_load(void);
int64_t ak__param_int(ak__param_id id);
/* Never NULL; "" when unset and the default is empty. */
const char *ak__param_str(ak__param_id id);
/* 1 when the variable was set in the environment (not defaulted). */
int ak__param_is_set(ak__param_id id);

#endif /* AK_CORE_PARAMS_H */
