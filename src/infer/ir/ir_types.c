/* Element types of the inference IR: names and sizes (public, see accelkit/infer.h). */
#include "accelkit/infer.h"
#include "infer/ir/ir.h"

/* a constant string tensor's elements (ak__ir_bytes) are handed to operators as they are */
_Static_assert(sizeof(ak_string) == sizeof(ak__ir_bytes), "ak_string and ak__ir_bytes differ");

static const struct {
    const char *name;
    size_t size;
} elem_types[AK_ELEM_COUNT_] = {
    [AK_ELEM_UNDEFINED] = {"undefined", 0}, [AK_ELEM_F32] = {"float32", 4},
    [AK_ELEM_U8] = {"uint8", 1},            [AK_ELEM_I8] = {"int8", 1},
    [AK_ELEM_U16] = {"uint16", 2},          [AK_ELEM_I16] = {"int16", 2},
    [AK_ELEM_I32] = {"int32", 4},           [AK_ELEM_I64] = {"int64", 8},
    [AK_ELEM_STRING] = {"string", sizeof(ak_string)},      [AK_ELEM_BOOL] = {"bool", 1},
    [AK_ELEM_F16] = {"float16", 2},         [AK_ELEM_F64] = {"float64", 8},
    [AK_ELEM_U32] = {"uint32", 4},          [AK_ELEM_U64] = {"uint64", 8},
    [AK_ELEM_C64] = {"complex64", 8},       [AK_ELEM_C128] = {"complex128", 16},
    [AK_ELEM_BF16] = {"bfloat16", 2},       [AK_ELEM_F8E4M3FN] = {"float8e4m3fn", 1},
    [AK_ELEM_F8E4M3FNUZ] = {"float8e4m3fnuz", 1}, [AK_ELEM_F8E5M2] = {"float8e5m2", 1},
    [AK_ELEM_F8E5M2FNUZ] = {"float8e5m2fnuz", 1},
};

const char *ak_elem_type_name(ak_elem_type type) {
    return (unsigned)type < AK_ELEM_COUNT_ ? elem_types[type].name : "unknown";
}

size_t ak_elem_type_size(ak_elem_type type) {
    return (unsigned)type < AK_ELEM_COUNT_ ? elem_types[type].size : 0;
}
