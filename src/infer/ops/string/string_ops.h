/* The string operators (ops/string): shared declarations.
 *
 * A STRING tensor's data is an array of ak_string; operators that compute new strings
 * put their bytes in ctx->strings (runtime/string_pool.h), which is NULL inside
 * control-flow bodies (refused there by name). */
#ifndef AK_INFER_OPS_STRING_STRING_OPS_H
#define AK_INFER_OPS_STRING_STRING_OPS_H

#include "infer/runtime/op.h"
#include "infer/runtime/string_pool.h"

/* ctx->strings, or a failure naming the node when there is none. */
ak_status ak__strings_pool(const ak__op_ctx *ctx, ak__string_pool **out);

/* Cast and CastLike between STRING and the numeric types (cast_string.c): the text of
 * a number has the fewest digits that read back to it; numbers are read as strtod does
 * ("NaN", "INF", "+INF", "-INF" included). ak__cast_strings_check says whether the pair
 * is handled (else it fails naming both types). */
ak_status ak__cast_strings_check(const ak__op_ctx *ctx, ak_elem_type from, ak_elem_type to);
ak_status ak__cast_strings(ak__op_ctx *ctx, const ak__tensor *x, ak__tensor *y);

extern const ak__op_def ak__op_string_normalizer, ak__op_regex_full_match;

#endif /* AK_INFER_OPS_STRING_STRING_OPS_H */
