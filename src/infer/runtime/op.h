/* The operator interface of the inference runtime, and helpers every operator uses.
 *
 * An operator is an ak__op_def: a name, and the steps the session drives for each node:
 *   create   once per node at session creation: parse and check attributes, pre-pack
 *            constant inputs (weights). Optional; its state is passed to every later call.
 *   reshape  each run before run: set every present output's type and shape from the
 *            inputs (reading input data only for shape-like inputs, e.g. Reshape's
 *            shape) and say how much scratch memory run needs. Must not allocate.
 *   run      compute the outputs. Must not allocate: scratch comes from ctx->workspace.
 * The session plans memory from the shapes reshape reports, so outputs arrive with their
 * data pointer set. Operators never write their inputs.
 *
 * Bad input (wrong types, inconsistent shapes, out-of-range attributes or indices) is
 * reported with AK_OP_FAIL and AK_ERR_INVALID_MODEL (or AK_ERR_INVALID_ARG for data a
 * caller fed); something valid the operator does not do fails with AK_ERR_UNSUPPORTED.
 *
 * Operators are grouped in families, one folder each under ops/ (elementwise, tensor,
 * reduce, norm, nn with conv/ and pool/, math, rnn, sequence, fused, control, training);
 * each exports a NULL-terminated table that runtime/registry.c searches. */
#ifndef AK_INFER_RUNTIME_OP_H
#define AK_INFER_RUNTIME_OP_H

#include <stddef.h>
#include <stdint.h>

#include "accelkit/ak.h"
#include "core/check.h"
#include "infer/ir/ir.h"
#include "infer/runtime/tensor.h"

typedef struct ak__op_ctx {
    const ak__ir_node *node; /* op_type, name, attributes, node->opset */
    void *state;             /* from create, or NULL */
    uint32_t num_inputs, num_outputs;
    const ak__tensor *const *inputs; /* NULL entries: omitted optional inputs */
    ak__tensor *const *outputs;      /* NULL entries: omitted optional outputs */
    ak_threadpool *pool;             /* intra-op parallelism (never NULL in run) */
    size_t workspace_bytes;          /* reshape sets it (0 by default) */
    void *workspace;                 /* run: workspace_bytes of 64-byte aligned scratch */
    /* values of the enclosing graph the node's subgraphs read (node->captures, same
     * order); only control-flow operators (If, Loop, Scan) have any */
    uint32_t num_captures;
    const ak__tensor *const *captures;
    /* where operators that compute STRING tensors put the bytes (runtime/string_pool.h);
     * NULL inside control-flow bodies, whose runs do not keep them */
    struct ak__string_pool *strings;
} ak__op_ctx;

enum {
    /* output 0 shares input 0's bytes (same type and count, new shape): Reshape,
     * Flatten, Squeeze, Unsqueeze, Identity. run may be NULL. */
    AK_OP_ALIAS_INPUT0 = 1u << 0,
    /* results differ between runs (RandomNormal, Bernoulli...): never constant-folded */
    AK_OP_NONDETERMINISTIC = 1u << 1,
    /* output 0 may be written over input 3 (a residual Z that dies at this node, with
     * Y's size): run reads each element of Z before writing the same element of Y, and
     * reads no other element of Z after that (runtime/memplan.c decides) */
    AK_OP_Y_OVER_Z = 1u << 2,
};

typedef struct ak__op_def {
    const char *domain;  /* "" for the default ONNX domain */
    const char *op_type; /* "Conv" */
    int64_t min_opset;   /* lowest opset of the domain handled (ONNX: usually 7) */
    uint32_t flags;
    /* consts[i]: input i's value when it is a constant (initializer or folded), else
     * NULL; num_inputs entries. */
    ak_status (*create)(const ak__ir_node *node, const ak__tensor *const *consts,
                        void **state);
    void (*destroy)(void *state);
    ak_status (*reshape)(ak__op_ctx *ctx);
    ak_status (*run)(ak__op_ctx *ctx);
} ak__op_def;

/* STRING tensors reach only the operators that handle them (ops/string/string_ops.c):
 * fails naming the operator when any input or output of the node is a STRING tensor and
 * the operator is not one of those. Cheap when there is none. */
ak_status ak__op_strings_check(const ak__op_ctx *ctx);

/* Family tables (NULL-terminated), one per folder of ops/. */
extern const ak__op_def *const ak__ops_elementwise[];
extern const ak__op_def *const ak__ops_nn[];
extern const ak__op_def *const ak__ops_tensor[];
extern const ak__op_def *const ak__ops_reduce[];
extern const ak__op_def *const ak__ops_norm[];
extern const ak__op_def *const ak__ops_math[];
extern const ak__op_def *const ak__ops_rnn[];
extern const ak__op_def *const ak__ops_fused[]; /* what runtime/optimize.c creates */
extern const ak__op_def *const ak__ops_sequence[];
extern const ak__op_def *const ak__ops_control[]; /* If, Loop, Scan (ops/control) */
extern const ak__op_def *const ak__ops_quant[]; /* ops/quant: INT8 operators */
extern const ak__op_def *const ak__ops_signal[]; /* ops/signal: windows, DFT, STFT, mel */
extern const ak__op_def *const ak__ops_select[]; /* ops/select: NonMaxSuppression, Unique */
/* ops/training: the ai.onnx.preview.training optimizers (Adagrad, Adam, Momentum) */
extern const ak__op_def *const ak__ops_training[];
/* ops/contrib: com.microsoft contrib operators exporters emit (Gelu family, FusedMatMul,
 * RotaryEmbedding, MatMulNBits) */
extern const ak__op_def *const ak__ops_contrib[];
/* ops/attention: com.microsoft Attention and MultiHeadAttention */
extern const ak__op_def *const ak__ops_attention[];
extern const ak__op_def *const ak__ops_string[]; /* ops/string: string operators */
extern const ak__op_def *const ak__ops_random[]; /* ops/random: seeded random operators */

/* The families, by the name of their folder of ops/: how many, the name of family f (NULL
 * past the end), and the family defining (domain, op_type) (NULL: none). */
size_t ak__op_family_count(void);
const char *ak__op_family_name(size_t f);
const char *ak__op_family_of(const char *domain, const char *op_type);
/* The definition for (domain, op_type) usable at `opset`, or NULL. */
const ak__op_def *ak__op_find(const char *domain, const char *op_type, int64_t opset);
/* Fails naming the node when its operator version changed semantics after the version
 * `def` implements (GroupNormalization-21, blocked QuantizeLinear-21...). */
ak_status ak__op_version_check(const ak__ir_node *node, const ak__op_def *def);

/* ---- errors ------------------------------------------------------------------------ */

/* Fails naming the operator and node: "Conv (node conv1): <message>". */
ak_status ak__op_fail(ak_status status, const ak__ir_node *node, const char *file, int line,
                      const char *fmt, ...) AK_PRINTF(5, 6);
#define AK_OP_FAIL(ctx_node, status, ...) \
    ak__op_fail((status), (ctx_node), __FILE__, __LINE__, __VA_ARGS__)

/* ---- attributes -------------------------------------------------------------------- */

int ak__attr_has(const ak__ir_node *n, const char *name);
int64_t ak__attr_int(const ak__ir_node *n, const char *name, int64_t dflt);
float ak__attr_float(const ak__ir_node *n, const char *name, float dflt);
/* NUL-terminated string attribute, or dflt. */
const char *ak__attr_string(const ak__ir_node *n, const char *name, const char *dflt);
/* Number of ints in a list attribute (0 when absent); *out points at them. */
size_t ak__attr_ints(const ak__ir_node *n, const char *name, const int64_t **out);
size_t ak__attr_floats(const ak__ir_node *n, const char *name, const float **out);
const ak__ir_tensor *ak__attr_tensor(const ak__ir_node *n, const char *name);

/* ---- inputs, outputs and shapes ---------------------------------------------------- */

/* Input i, or NULL when absent or omitted. */
static inline const ak__tensor *ak__op_in(const ak__op_ctx *ctx, uint32_t i) {
    return i < ctx->num_inputs ? ctx->inputs[i] : NULL;
}
static inline ak__tensor *ak__op_out(const ak__op_ctx *ctx, uint32_t i) {
    return i < ctx->num_outputs ? ctx->outputs[i] : NULL;
}

/* Fails unless input i is present ("Conv (node c): input 1 (W) is required"). */
ak_status ak__op_require(const ak__op_ctx *ctx, uint32_t i, const ak__tensor **out);
/* Sets output i's type and shape (no-op when the output is omitted). */
ak_status ak__op_set_output(ak__op_ctx *ctx, uint32_t i, ak_elem_type type, int rank,
                            const int64_t *dims);
/* Output i with the type and shape of tensor `like`. */
ak_status ak__op_set_output_like(ak__op_ctx *ctx, uint32_t i, const ak__tensor *like);
/* Fails unless t has type `type` ("input 0 (X) has type int64, expected float32"). */
ak_status ak__op_check_type(const ak__op_ctx *ctx, uint32_t i, const ak__tensor *t,
                            ak_elem_type type);

/* Numpy-style multidirectional broadcast of n shapes into out_dims (rank = max rank). */
ak_status ak__op_broadcast(const ak__op_ctx *ctx, const ak__tensor *const *ts, size_t n,
                           int *out_rank, int64_t *out_dims);
/* axis in [-rank, rank) (or [-rank-1, rank] with allow_end) -> [0, rank). */
ak_status ak__op_axis(const ak__op_ctx *ctx, int64_t axis, int rank, int allow_end,
                      int *out);

/* Reads an integer tensor (int64 or int32, any rank) into out[0..max); *n = count.
 * For shape-like inputs (Reshape shape, Slice starts, axes...). */
ak_status ak__op_read_ints(const ak__op_ctx *ctx, const ak__tensor *t, const char *what,
                           int64_t *out, size_t max, size_t *n);

/* Generic element access through double, for the rarely used types of an operator
 * (float64, int8, uint16...): slow, exact for every type except 64-bit integers beyond
 * 2^53 (use the typed paths for those). bool reads 0/1 and writes v != 0. */
double ak__elem_get(const void *data, ak_elem_type type, uint64_t i);
void ak__elem_set(void *data, ak_elem_type type, uint64_t i, double v);
/* Exact integer access for the integer types (and bool, read as 0/1): unsigned 64-bit
 * values travel as their bit pattern; set truncates to the element's width. */
int64_t ak__elem_get_int(const void *data, ak_elem_type type, uint64_t i);
void ak__elem_set_int(void *data, ak_elem_type type, uint64_t i, uint64_t v);
int ak__elem_is_float(ak_elem_type type);   /* f16, bf16, f32, f64 */
int ak__elem_is_integer(ak_elem_type type); /* signed or unsigned ints (not bool) */

#endif /* AK_INFER_RUNTIME_OP_H */
