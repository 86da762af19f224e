/* Shared parts of the elementwise operator family (the files of
 * elementwise/): the broadcast loop
 * driver, the float32 vector kernels and the operator definitions each file exports to
 * the family table in elementwise/table.c. */
#ifndef AK_INFER_OPS_ELEMENTWISE_ELEMENTWISE_H
#define AK_INFER_OPS_ELEMENTWISE_ELEMENTWISE_H

#include <stddef.h>
#include <stdint.h>

#include "infer/runtime/op.h"
#include "kernels/dispatch.h"

/* ---- broadcast driver (elementwise/broadcast.c) ------------------------------------------ */

#define EW_MAX_IN 3

/* Computes out[j] for n consecutive output elements j: dst is contiguous, input k starts
 * at in[k] and advances step[k] elements (0: a broadcast value, 1: contiguous). */
typedef void (*ew_seg_fn)(const void *op, void *dst, const void *const *in,
                          const int *step, size_t n);

/* Runs fn over the whole output, broadcasting each input to out's shape (numpy rules;
 * the shapes must already be compatible with out). Adjacent dimensions are merged so the
 * common cases (same shape, a scalar, a trailing vector) are a few long segments. Splits
 * over ctx->pool when the output has at least `par_min` elements. No allocation. */
ak_status ew_broadcast_run(const ak__op_ctx *ctx, ak__tensor *out, const ak__tensor *const *ins,
                           int nin, ew_seg_fn fn, const void *op, uint64_t par_min);

/* Computes n elements of a flat (same-shape) unary map. */
typedef void (*ew_map_fn)(const void *op, void *dst, const void *src, size_t n);

/* dst[i] = f(src[i]) for out->count elements, split over ctx->pool from par_min up. */
ak_status ew_map_run(const ak__op_ctx *ctx, ak__tensor *out, const ak__tensor *in,
                     ew_map_fn fn, const void *op, uint64_t par_min);

/* Parallel thresholds: cheap ops (add, relu) pay the pool's wake-up only on big tensors. */
#define EW_PAR_CHEAP ((uint64_t)1 << 16)
#define EW_PAR_COSTLY ((uint64_t)1 << 13)

/* ---- float32 vector kernels (elementwise/kernels_f32.c: the kernel table's) ---------- */

/* dst[i] = a[i*sa] op b[i*sb], sa and sb in {0, 1}; dst may equal a or b. */
void ew_f32_binary(ak__ew_f32_bin op, float *dst, const float *a, const float *b, size_t n,
                   int sa, int sb);

/* dst[i] = f(src[i]) with parameters a, b (LeakyRelu alpha, Clip min/max, HardSigmoid
 * alpha/beta, Scale factor); dst may equal src. */
void ew_f32_unary(ak__ew_f32_un op, float *dst, const float *src, size_t n, float a, float b);

/* float16 (t = AK_ELEM_F16) or bfloat16 <-> float32 with the kernels' vector converters
 * (round to nearest even); the buffers must not overlap. */
void ew_half_to_f32(float *dst, const uint16_t *src, size_t n, ak_elem_type t);
void ew_f32_to_half(uint16_t *dst, const float *src, size_t n, ak_elem_type t);

/* ---- operator definitions (one file each group) ------------------------------------- */

#define EW_BINARY_DEFS(X)                                                                 \
    X(add) X(sub) X(mul) X(div) X(pow) X(mod) X(min) X(max) X(sum) X(mean) X(equal)      \
    X(less) X(greater) X(less_equal) X(greater_equal) X(and) X(or) X(xor) X(bitshift)    \
    X(bitwise_and) X(bitwise_or) X(bitwise_xor) X(where) X(prelu)

#define EW_UNARY_DEFS(X)                                                                  \
    X(not) X(bitwise_not) X(abs) X(neg) X(sqrt) X(exp) X(log) X(sin) X(cos) X(tan)       \
    X(asin) X(acos) X(atan) X(sinh) X(cosh) X(asinh) X(acosh) X(atanh) X(reciprocal)     \
    X(floor) X(ceil) X(round) X(sign) X(erf) X(isnan) X(isinf) X(relu) X(leaky_relu)     \
    X(sigmoid) X(hard_sigmoid) X(hard_swish) X(tanh) X(elu) X(selu) X(celu) X(softplus)  \
    X(softsign) X(thresholded_relu) X(shrink) X(mish) X(clip) X(gelu)

#define EW_CAST_DEFS(X) X(cast) X(cast_like)

#define EW_DECLARE_DEF(name) extern const ak__op_def ew_op_##name;
EW_BINARY_DEFS(EW_DECLARE_DEF)
EW_UNARY_DEFS(EW_DECLARE_DEF)
EW_CAST_DEFS(EW_DECLARE_DEF)
#undef EW_DECLARE_DEF

#endif /* AK_INFER_OPS_ELEMENTWISE_ELEMENTWISE_H */
