/* Environment parameters declared in params.def: parsed and validated once, then cached. */
#include "core/params.h"

#include <errno.h>
#include <stdlib.h>

#include "core/check.h"

static const ak__param_desc descs[AK_PARAM_COUNT_] = {
#define AK_PARAM(id, name, kind, def, lo, hi, layer, doc) \
    {name, AK_PARAM_KIND_##kind, def, lo, hi, layer, doc},
#include "params.def"
#undef AK_PARAM
};

typedef struct param_value {
    int64_t int_value;
    const char *str_value; /* points into the environment or the default literal */
    int is_set;
} param_value;

static param_value values[AK_PARAM_COUNT_];

const ak__param_desc *ak__param_describe(ak__param_id id) {
    return (unsigned)id < AK_PARAM_COUNT_ ? &descs[id] : NULL;
}

static ak_status parse_int(const ak__param_desc *d, const char *text, int64_t *out) {
    char *end = NULL;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (errno || end == text || *end != '\0')
        return AK_FAIL(AK_ERR_INVALID_ARG, "%s='%s' is not an integer", d->name, text);
    if (v < d->min || v > d->max)
        return AK_FAIL(AK_ERR_INVALID_ARG, "%s=%lld is out of range [%lld, %lld]", d->name, v,
                       (long long)d->min, (long long)d->max);
    *out = v;
    return AK_OK;
}

ak_status ak__params_load(void) {
    for (int i = 0; i < AK_PARAM_COUNT_; i++) {
        const ak__param_desc *d = &descs[i];
        const char *env = getenv(d->name);
        param_value v = {0, env ? env : d->default_value, env != NULL};
        if (d->kind == AK_PARAM_KIND_INT) {
            ak_status st = parse_int(d, v.str_value, &v.int_value);
            if (st != AK_OK) return st;
        }
        values[i] = v;
    }
    return AK_OK;
}

int64_t ak__param_int(ak__param_id id) {
    return (unsigned)id < AK_PARAM_COUNT_ ? values[id].int_value : 0;
}

const char *ak__param_str(ak__param_id id) {
    if ((unsigned)id >= AK_PARAM_COUNT_ || !values[id].str_value) return "";
    return values[id].str_value;
}

int ak__param_is_set(ak__param_id id) {
    return (unsigned)id < AK_PARAM_COUNT_ && values[id].is_set;
}
