/* The ONNX writer's internal interface (onnx_write.c): an accelkit IR graph back into
 * ModelProto bytes, either as loaded or as a session's optimizer left it. */
#ifndef AK_INFER_ONNX_WRITE_H
#define AK_INFER_ONNX_WRITE_H

#include <stddef.h>
#include <stdint.h>

#include "infer/model.h"

/* The main graph as it should be written instead of model->graph as loaded: the nodes
 * in execution order and, per value of the main graph, the constant to write as its
 * initializer (NULL: the value is not an initializer). Subgraphs are written as loaded. */
typedef struct ak__onnx_graph_view {
    const ak__ir_node *const *nodes;
    size_t num_nodes;
    const ak__ir_tensor *const *constants; /* model->graph->num_values entries */
    int value_info; /* 1: also write the declared types of intermediate values */
} ak__onnx_graph_view;

/* Serialises model (view NULL: its graph as loaded) into a malloc'ed buffer. Fails with
 * AK_ERR_UNSUPPORTED naming what it cannot write (sparse tensors). */
ak_status ak__onnx_write_model(const ak_model *model, const ak__onnx_graph_view *view,
                               uint8_t **out, size_t *size);
/* The same, written to path (replaced atomically: a temporary file renamed over it). */
ak_status ak__onnx_write_file(const ak_model *model, const ak__onnx_graph_view *view,
                              const char *path);

/* The domain files use for accelkit's own operators ("com.accelkit" inside the engine). */
#define AK_ONNX_KIT_DOMAIN "ai.accelkit"

#endif /* AK_INFER_ONNX_WRITE_H */
