/* The loaded model behind the public ak_model handle (accelkit/infer.h): the IR graph
 * plus what the file says about itself and the summaries `ak info` shows. Everything
 * except the graph itself lives in the graph's arena. */
#ifndef AK_INFER_MODEL_H
#define AK_INFER_MODEL_H

#include "accelkit/infer.h"
#include "infer/ir/ir.h"

typedef struct ak__opset {
    const char *domain; /* "" for the default ONNX domain ("ai.onnx" is folded into it) */
    int64_t version;
} ak__opset;

struct ak_model {
    ak__ir_graph *graph;
    int64_t ir_version, model_version;
    const char *producer_name, *producer_version;
    /* ModelProto.domain, doc_string, GraphProto.doc_string ("" when absent) and the
     * metadata_props entries (ak_model_get_metadata) */
    const char *domain, *description, *graph_description;
    const char **prop_keys, **prop_values;
    size_t num_props;
    ak_value_info *overridable; /* graph inputs that have an initializer */
    size_t num_overridable;
    ak__opset *opsets;
    size_t num_opsets;
    /* public views, built once after loading */
    ak_value_info *inputs, *outputs;
    size_t num_inputs, num_outputs;
    const char **op_names;
    size_t *op_counts;
    size_t num_op_types;
    size_t num_initializers, num_subgraph_nodes;
    uint64_t num_params, param_bytes;
};

/* Fills the public views (inputs without initializers, outputs, op histogram, parameter
 * totals) from model->graph. */
ak_status ak__model_finish(ak_model *model);
/* Version of `domain` ("" = default) imported by the model, or 0 when not imported. */
int64_t ak__model_opset(const ak_model *model, const char *domain);

#endif /* AK_INFER_MODEL_H */
