/* accelkit inference: loading ONNX models and asking what is inside them.
 *
 * A model is read into accelkit's graph IR and can be queried (inputs, outputs, opsets,
 * operator histogram, parameters, FLOPs where shapes are static); a session runs it.
 *
 * Accepted: ONNX IR versions 3-9, default-domain opsets 1-18. A malformed, truncated or
 * hostile file fails with AK_ERR_INVALID_MODEL; a well-formed model that uses something
 * this build does not read (an IR version or opset out of range, sparse initializers, a
 * newer data type) fails with AK_ERR_UNSUPPORTED. ak_last_error() says why either way.
 *
 * Strings and arrays returned by the query calls are owned by the model and live until
 * ak_model_free. A model is immutable after loading: queries may run from any thread. */
#ifndef ACCELKIT_INFER_H
#define ACCELKIT_INFER_H

#include <stddef.h>
#include <stdint.h>

#include "accelkit/ak.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Element types. The numbers are the ONNX TensorProto.DataType codes, so they can be
 * compared with ONNX files and tools directly. */
typedef enum ak_elem_type {
    AK_ELEM_UNDEFINED = 0,
    AK_ELEM_F32 = 1,
    AK_ELEM_U8 = 2,
    AK_ELEM_I8 = 3,
    AK_ELEM_U16 = 4,
    AK_ELEM_I16 = 5,
    AK_ELEM_I32 = 6,
    AK_ELEM_I64 = 7,
    AK_ELEM_STRING = 8,
    AK_ELEM_BOOL = 9,
    AK_ELEM_F16 = 10,
    AK_ELEM_F64 = 11,
    AK_ELEM_U32 = 12,
    AK_ELEM_U64 = 13,
    AK_ELEM_C64 = 14,
    AK_ELEM_C128 = 15,
    AK_ELEM_BF16 = 16,
    AK_ELEM_F8E4M3FN = 17,
    AK_ELEM_F8E4M3FNUZ = 18,
    AK_ELEM_F8E5M2 = 19,
    AK_ELEM_F8E5M2FNUZ = 20,
    AK_ELEM_COUNT_
} ak_elem_type;

/* Lower-case name ("float32", "int64", ...); "unknown" for values out of range. */
AK_API const char *ak_elem_type_name(ak_elem_type type);
/* Bytes per element; 0 for UNDEFINED. A STRING element is an ak_string (a pointer and a
 * length), so its size is sizeof(ak_string); the bytes it points at live elsewhere. */
AK_API size_t ak_elem_type_size(ak_elem_type type);

/* One element of a STRING tensor: len bytes at data (not NUL-terminated; may contain
 * NUL bytes; data may be NULL when len is 0). The strings of an output live in the session
 * (or the model) until the next run or ak_session_free, like the output itself; an output
 * computed from an input's strings without changing them (Identity, Gather, StringSplit)
 * points into the caller's input strings, as a numeric view of an input does. */
typedef struct ak_string {
    const char *data;
    size_t len;
} ak_string;

/* What kind of value a graph input or output is. Only tensors are computed on later;
 * the others are reported so `ak info` can describe every model. */
typedef enum ak_value_kind {
    AK_VALUE_TENSOR = 0,
    AK_VALUE_SEQUENCE = 1,
    AK_VALUE_MAP = 2,
    AK_VALUE_OPTIONAL = 3,
    AK_VALUE_SPARSE_TENSOR = 4,
    AK_VALUE_UNKNOWN = 5 /* the file declares no type */
} ak_value_kind;

/* A graph input or output as declared in the file. */
typedef struct ak_value_info {
    const char *name;
    ak_value_kind kind;
    ak_elem_type type;   /* AK_ELEM_UNDEFINED when not declared */
    int rank;            /* -1: the shape is not declared */
    /* rank entries each: dims[i] >= 0 is a fixed size; dims[i] == -1 is unknown, and then
     * dim_names[i] is its symbolic name ("batch") or NULL when it has none. */
    const int64_t *dims;
    const char *const *dim_names;
} ak_value_info;

/* Summary of a loaded model. */
typedef struct ak_model_summary {
    int64_t ir_version;
    int64_t model_version;
    const char *producer_name;    /* "" when absent */
    const char *producer_version; /* "" when absent */
    const char *graph_name;       /* "" when absent */
    size_t num_opsets;
    size_t num_inputs;        /* graph inputs that are not initializers */
    size_t num_outputs;
    size_t num_nodes;         /* nodes of the main graph */
    size_t num_subgraph_nodes; /* nodes inside If/Loop/Scan bodies, all levels */
    size_t num_op_types;      /* distinct operators in the main graph (histogram length) */
    size_t num_initializers;
    uint64_t num_params;      /* elements over all initializers */
    uint64_t param_bytes;     /* bytes over all initializers (strings: their lengths) */
} ak_model_summary;

typedef struct ak_model ak_model;

/* Reads an ONNX file. External tensor data is read from files beside it (paths that
 * would leave the model's directory are rejected). *out is owned by the caller. */
AK_API ak_status ak_onnx_load_file(const char *path, ak_model **out);
/* Reads an ONNX model from memory (data is not kept). base_dir is where external data
 * files are looked up; NULL makes a model that uses external data fail to load. */
AK_API ak_status ak_onnx_load_bytes(const void *data, size_t size, const char *base_dir,
                                    ak_model **out);
AK_API void ak_model_free(ak_model *model);
/* Writes the model as loaded back to an ONNX file (one protobuf: weights inline). */
AK_API ak_status ak_onnx_save_file(const ak_model *model, const char *path);

AK_API ak_status ak_model_get_summary(const ak_model *model, ak_model_summary *out);
/* i < num_opsets; domain "" is the default ONNX domain. */
AK_API ak_status ak_model_opset(const ak_model *model, size_t i, const char **domain,
                                int64_t *version);
AK_API ak_status ak_model_input(const ak_model *model, size_t i, ak_value_info *out);
AK_API ak_status ak_model_output(const ak_model *model, size_t i, ak_value_info *out);
/* i < num_op_types, most frequent first (ties by name). op_type is "Conv" for the
 * default domain and "domain:Op" otherwise. */
AK_API ak_status ak_model_op_count(const ak_model *model, size_t i, const char **op_type,
                                   size_t *count);

/* What the file says about itself beyond the summary (onnxruntime's ModelMetadata). The
 * strings are "" when absent and live until ak_model_free. */
typedef struct ak_model_metadata {
    const char *domain;            /* ModelProto.domain */
    const char *description;       /* ModelProto.doc_string */
    const char *graph_description; /* GraphProto.doc_string */
    size_t num_props;              /* ModelProto.metadata_props entries */
    size_t num_overridable;        /* graph inputs that have an initializer (a default) */
} ak_model_metadata;
AK_API ak_status ak_model_get_metadata(const ak_model *model, ak_model_metadata *out);
/* i < num_props: one metadata_props entry, in file order. */
AK_API ak_status ak_model_metadata_prop(const ak_model *model, size_t i, const char **key,
                                        const char **value);
/* i < num_overridable: a graph input backed by an initializer, which a run may feed to
 * replace the initializer (sessions made with fold_constants = 0; see ak_session_run). */
AK_API ak_status ak_model_overridable(const ak_model *model, size_t i, ak_value_info *out);

/* FLOPs of Conv, ConvTranspose, Gemm and MatMul nodes (one multiply-add = 2 FLOPs)
 * whose operand shapes are fixed in the file (graph inputs, initializers, value_info).
 * Without shape inference most intermediate shapes are unknown: `counted` says how many
 * of the `candidates` nodes entered the total. */
typedef struct ak_model_flops {
    uint64_t flops;
    size_t counted;
    size_t candidates;
} ak_model_flops;
AK_API ak_status ak_model_get_flops(const ak_model *model, ak_model_flops *out);

/* ---- sessions: running a model --------------------------------------------------------
 *
 * A session prepares a loaded model for execution: every node is bound to an operator
 * (an operator accelkit does not have fails here with "unsupported operator X (opset N)
 * at node Y"), constant subgraphs are folded, and on the first run the shapes seen are
 * used to plan one memory arena by value lifetimes. Later runs with the same input shapes
 * reuse the plan and allocate nothing on the heap; other shapes re-plan on the fly.
 * The model must outlive a session made by ak_session_create. A session runs one call at
 * a time (operators parallelise internally over the session's threads). */

typedef struct ak_session ak_session;

/* A tensor passed to or returned by ak_session_run: row-major data of `type`. */
typedef struct ak_tensor {
    ak_elem_type type;
    int rank;
    const int64_t *dims;
    void *data;
} ak_tensor;

typedef struct ak_session_options {
    int threads;   /* intra-op threads counting the caller; 0 = AK_NUM_THREADS or all cores */
    int profile;   /* 1: time every node (ak_session_profile); -1: from AK_PROFILE */
    int fold_constants; /* 1 (default): precompute nodes whose inputs are all constant */
    int optimize;       /* AK_OPTIMIZE_*: how far the graph optimizer goes (default ALL) */
} ak_session_options;

/* Optimizer levels (ak_session_options.optimize). BASIC rewrites with standard ONNX
 * operators only (dead nodes and duplicates removed, BatchNormalization, Mul and Add
 * folded into Conv, Identity/Transpose/Reshape pairs cancelled); EXTENDED adds the fused
 * operators (FusedConv, MatMulBias, Gelu, LayerNormalization, the QDQ int8 operators);
 * ALL adds the blocked-layout convolutions. */
enum {
    AK_OPTIMIZE_NONE = 0,
    AK_OPTIMIZE_ALL = 1, /* 1 for compatibility with the former on/off flag */
    AK_OPTIMIZE_BASIC = 2,
    AK_OPTIMIZE_EXTENDED = 3,
};

AK_API ak_status ak_session_options_init(ak_session_options *opts);
/* opts NULL = defaults. */
AK_API ak_status ak_session_create(const ak_model *model, const ak_session_options *opts,
                                   ak_session **out);
/* Loads `path` and makes a session that owns the model. */
AK_API ak_status ak_session_create_from_file(const char *path, const ak_session_options *opts,
                                             ak_session **out);
AK_API void ak_session_free(ak_session *session);
AK_API const ak_model *ak_session_model(const ak_session *session);
/* Writes the graph the session runs (after folding and optimization) as an ONNX file:
 * folded values become initializers, removed nodes and unused constants are gone, fused
 * nodes keep their operators (the engine's own in the "ai.accelkit" domain, which
 * ak_onnx_load_file reads back). Subgraphs are written as loaded. */
AK_API ak_status ak_session_save_optimized(const ak_session *session, const char *path);
/* What the optimizer did: i < *count entries, each a pass (or fused operator) and how
 * many times it applied. ak_session_optimizations(s, 0, NULL, NULL, &count) asks for
 * the count only. */
AK_API ak_status ak_session_optimizations(const ak_session *session, size_t i, const char **what,
                                          size_t *times, size_t *count);

/* Runs the model. inputs[i] feeds the graph input named input_names[i] (every input the
 * model declares must be fed; initializer-backed inputs may be overridden). Outputs:
 * output_names NULL asks for every graph output in declared order (num_outputs must
 * equal their number). outputs[i] receives type, shape and data owned by the session,
 * valid until the next run or ak_session_free. Input shapes must match the model's
 * declared fixed dimensions; input data is not modified. */
AK_API ak_status ak_session_run(ak_session *session, const char *const *input_names,
                                const ak_tensor *inputs, size_t num_inputs,
                                const char *const *output_names, ak_tensor *outputs,
                                size_t num_outputs);

/* ak_session_run that writes outputs into the caller's buffers: an outputs[i] whose data
 * is not NULL is a buffer of its type and shape (they must equal what the run computes,
 * else AK_ERR_INVALID_ARG naming the output). The operator that computes it writes there
 * directly; only an output that is an input, a constant, or a view of another value
 * (Reshape, Identity...) is copied into it. An outputs[i] with data NULL is filled as
 * ak_session_run does. */
AK_API ak_status ak_session_run_into(ak_session *session, const char *const *input_names,
                                     const ak_tensor *inputs, size_t num_inputs,
                                     const char *const *output_names, ak_tensor *outputs,
                                     size_t num_outputs);

/* Memory a session holds. */
typedef struct ak_session_memory {
    size_t arena_bytes;     /* planned activations (one block) */
    size_t naive_bytes;     /* what one buffer per activation would take */
    size_t workspace_bytes; /* operator scratch */
    size_t folded_bytes;    /* constants computed at creation */
    size_t num_folded;      /* nodes folded at creation */
    size_t num_fused;       /* fused nodes the optimizer made (each replaces a chain) */
    int planned;            /* a plan exists (after the first run) */
} ak_session_memory;
AK_API ak_status ak_session_get_memory(const ak_session *session, ak_session_memory *out);

/* Per operator type timings since creation (profiling on): i < *count, slowest first.
 * ak_session_profile(s, 0, NULL, &count) asks for the count only. */
typedef struct ak_op_profile {
    const char *op_type;
    uint64_t calls;
    uint64_t total_ns;
    size_t nodes;
} ak_op_profile;
AK_API ak_status ak_session_profile(const ak_session *session, size_t i, ak_op_profile *out,
                                    size_t *count);

/* Which implementation runs each float32 MatMul, Gemm and fused MatMul+bias node
 * (AK_INFER_BACKENDS, docs/inference-backends.md). A node chooses the first time a run
 * meets it with new input shapes, so the rows exist after a run: i < *count, in execution
 * order. ak_session_backends(s, 0, NULL, &count) asks for the count only; count may be
 * NULL when out is not. */
#define AK_MAX_BACKENDS 8
typedef struct ak_node_backend {
    const char *node;     /* node name ("" when unnamed) */
    const char *op_type;
    const char *backend;  /* the one chosen: "own", "openblas", "blis", "onednn" */
    /* how: "measured" (timed for this node), "shared" (an earlier node of the session
     * with the same shapes and attributes was timed), "cache" (times from the tuning
     * cache), "small" (too small to time: accelkit's kernels), "only" (one backend usable) */
    const char *how;
    uint64_t macs;        /* multiply-adds of one run of the node */
    size_t num_times;     /* backends timed for its key, with their median ns */
    const char *names[AK_MAX_BACKENDS];
    uint64_t median_ns[AK_MAX_BACKENDS];
} ak_node_backend;
AK_API ak_status ak_session_backends(const ak_session *session, size_t i, ak_node_backend *out,
                                     size_t *count);

/* With profiling on, a session records one event per node run and one per
 * ak_session_run. This writes the events recorded since creation (or the previous call)
 * to `path` as a Chrome trace in onnxruntime's layout (a JSON array of "X" events; times
 * in microseconds since the session was created; node events have category "Node", name
 * "<node name>_kernel_time" and args.op_name the operator; runs are "model_run" in
 * category "Session"; a full log, 2^24 events, records no more) and forgets them.
 * AK_ERR_INVALID_ARG when the session was made without profiling. */
AK_API ak_status ak_session_end_profiling(ak_session *session, const char *path);

/* ---- quantization: float32 model -> INT8 model ------------------------------------------
 * ak_quantize_model reads a float32 ONNX model and writes an INT8 one that accelkit and
 * ONNX Runtime both run.
 * - static (QDQ): the float model runs over the calibration samples; every activation
 *   that feeds a quantized node (and that node's output, after a Relu that alone reads
 *   it) gets QuantizeLinear -> DequantizeLinear with a uint8 scale and zero point from its
 *   range (min/max, or the percentile of its values' histogram; 0 always inside); weights
 *   become constant int8 (symmetric, per tensor, or per output channel of a Conv with
 *   per_channel) behind a DequantizeLinear, biases int32 at scale x_scale*w_scale. Gemm
 *   becomes MatMul (+ Add of its bias). This is the form accelkit's optimizer fuses into
 *   QLinearConv / QLinearMatMul.
 * - dynamic: each MatMul / Gemm with a constant float weight becomes
 *   DynamicQuantizeLinear -> MatMulInteger (int8 weight, per tensor or per column) -> Cast
 *   -> Mul by x_scale*w_scale (+ Add of the bias).
 * Nodes whose weight is not a constant float32 tensor are left in float (counted in
 * ak_quantize_report.skipped). Refused with a message naming what: a model that already
 * holds quantization operators, float inputs or weights other than float32, an op type
 * other than Conv, MatMul, Gemm, an --exclude name no node has, opsets too old for the
 * operators written. */
typedef enum ak_calibration {
    AK_CALIBRATE_MINMAX = 0,     /* the smallest and largest value seen */
    AK_CALIBRATE_PERCENTILE = 1, /* the values between the (100-p)th and pth percentiles */
} ak_calibration;

typedef struct ak_quantize_options {
    int dynamic;      /* 0: static QDQ from calibration samples; 1: dynamic MatMul/Gemm */
    int per_channel;  /* weights: one scale per output channel (Conv) / column (dynamic) */
    ak_calibration method;
    double percentile; /* with AK_CALIBRATE_PERCENTILE, in (50, 100]; default 99.99 */
    const char *const *op_types; /* NULL: Conv, MatMul, Gemm */
    size_t num_op_types;
    const char *const *exclude; /* node names left in float */
    size_t num_exclude;
    /* static: num_samples sets of num_inputs tensors each, sample-major:
     * inputs[s * num_inputs + i] feeds input_names[i] in sample s */
    size_t num_samples, num_inputs;
    const char *const *input_names;
    const ak_tensor *inputs;
    int threads; /* calibration session threads; 0 = default */
} ak_quantize_options;

typedef struct ak_quantize_report {
    size_t quantized; /* nodes now in INT8 form */
    size_t skipped;   /* nodes of a selected type left in float (weight not constant) */
    size_t calibrated; /* activations given a scale (static) */
} ak_quantize_report;

AK_API ak_status ak_quantize_options_init(ak_quantize_options *opts);
/* Reads in_path, writes out_path (replaced atomically). report may be NULL. */
AK_API ak_status ak_quantize_model(const char *in_path, const char *out_path,
                                   const ak_quantize_options *opts, ak_quantize_report *report);

/* ---- tensors in files ------------------------------------------------------------------
 * A serialized ONNX TensorProto (.pb, as in the ONNX test_data_set folders) or a NumPy
 * .npy array (little-endian bool/int/uint/float, C order). */
typedef struct ak_tensor_file ak_tensor_file;
AK_API ak_status ak_tensor_load_pb(const char *path, ak_tensor_file **out);
AK_API ak_status ak_tensor_load_npy(const char *path, ak_tensor_file **out);
/* The tensor (valid until ak_tensor_file_free) and its name ("" when the file has none). */
AK_API ak_status ak_tensor_file_get(const ak_tensor_file *file, const char **name,
                                    ak_tensor *out);
AK_API void ak_tensor_file_free(ak_tensor_file *file);
AK_API ak_status ak_tensor_save_npy(const char *path, const ak_tensor *tensor);

/* ---- sequence and optional values at the graph boundary ---------------------------------
 * A graph input or output of kind AK_VALUE_SEQUENCE (a sequence of tensors) or
 * AK_VALUE_OPTIONAL crosses ak_session_run packed into one ak_tensor: a sequence as a
 * uint8 tensor in accelkit's private layout (build it with ak_sequence_pack, read it
 * with ak_sequence_length / ak_sequence_at); an optional that holds a value as that
 * value; an empty optional as a small uint8 marker (ak_optional_none). Sequences of
 * sequences, maps and sparse tensors are not supported. Packed buffers must be 64-byte
 * aligned (ak_alloc gives such memory). */

/* Packs n tensors of type elem_type (n may be 0) into buf (cap bytes). *size receives the
 * bytes needed; buf NULL asks for the size only. At most 256 elements. */
AK_API ak_status ak_sequence_pack(ak_elem_type elem_type, const ak_tensor *elems, size_t n,
                                  void *buf, size_t cap, size_t *size);
/* Writes the empty-optional marker into buf (cap bytes); *size receives its size (buf
 * NULL asks for the size only). */
AK_API ak_status ak_optional_none(void *buf, size_t cap, size_t *size);
/* AK_VALUE_SEQUENCE for a packed sequence, AK_VALUE_OPTIONAL for the empty optional,
 * AK_VALUE_TENSOR for anything else. */
AK_API ak_value_kind ak_value_kind_of(const ak_tensor *value);
AK_API ak_status ak_sequence_length(const ak_tensor *seq, size_t *n, ak_elem_type *elem_type);
/* Element i: out's dims and data point into seq. */
AK_API ak_status ak_sequence_at(const ak_tensor *seq, size_t i, ak_tensor *out);
/* Reads a serialized value of `kind`: AK_VALUE_TENSOR a TensorProto (as ak_tensor_load_pb),
 * AK_VALUE_SEQUENCE a SequenceProto of tensors, AK_VALUE_OPTIONAL an OptionalProto (of a
 * tensor or a sequence of tensors, or empty). The file's tensor is the packed value. */
AK_API ak_status ak_value_load_pb(const char *path, ak_value_kind kind, ak_tensor_file **out);

#ifdef __cplusplus
}
#endif

#endif /* ACCELKIT_INFER_H */
