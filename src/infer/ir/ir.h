/* accelkit inference IR: a graph of values and nodes, independent of the file format.
 *
 * The ONNX loader builds it; shape inference, graph passes and the runtime will work on
 * it. Values and nodes live in arrays and refer to each other by index (int32), so passes
 * can add entries without invalidating references held elsewhere, and a runtime can keep
 * per-value tables indexed the same way.
 *
 * Ownership: a graph owns everything reachable from it. Strings and small arrays come
 * from one arena shared by the graph and its subgraphs (freed at once); constant tensor
 * payloads are separate aligned allocations registered with the root graph, because a
 * large weight does not belong in an arena block. */
#ifndef AK_INFER_IR_IR_H
#define AK_INFER_IR_IR_H

#include <stddef.h>
#include <stdint.h>

#include "accelkit/infer.h"

#define AK_IR_MAX_RANK 32   /* deeper shapes are refused as implausible */
#define AK_IR_NONE (-1)      /* "no value / no node" in index fields */

/* One dimension: value >= 0 is known; value == -1 is unknown, named by param if set. */
typedef struct ak__ir_dim {
    int64_t value;
    const char *param; /* symbolic name ("batch") or NULL */
} ak__ir_dim;

/* A byte string (ONNX strings may contain NUL bytes). */
typedef struct ak__ir_bytes {
    const char *data;
    size_t len;
} ak__ir_bytes;

/* Constant data: an initializer or a tensor attribute. data holds count elements in host
 * byte order, row-major; for STRING, data is an array of count ak__ir_bytes. */
typedef struct ak__ir_tensor {
    ak_elem_type type;
    int rank;
    const int64_t *dims;
    uint64_t count; /* product of dims (1 for a scalar) */
    size_t nbytes;  /* payload bytes (strings: sum of their lengths) */
    void *data;
} ak__ir_tensor;

enum {
    AK_IR_VALUE_INPUT = 1u << 0,  /* declared graph input */
    AK_IR_VALUE_OUTPUT = 1u << 1, /* declared graph output */
    AK_IR_VALUE_CONST = 1u << 2,  /* has constant data (an initializer) */
    AK_IR_VALUE_OUTER = 1u << 3,  /* a subgraph's view of a value of an enclosing graph */
};

typedef struct ak__ir_value {
    const char *name;
    ak_value_kind kind;
    ak_elem_type type; /* AK_ELEM_UNDEFINED until declared or inferred */
    int rank;          /* -1: unknown */
    ak__ir_dim *dims;  /* rank entries */
    int32_t producer;  /* index of the node computing it, or AK_IR_NONE */
    int32_t outer;     /* with AK_IR_VALUE_OUTER: its index in the parent graph */
    uint32_t flags;
    ak__ir_tensor *constant; /* with AK_IR_VALUE_CONST */
} ak__ir_value;

/* Attribute types: the ONNX AttributeProto.AttributeType codes. */
typedef enum ak__ir_attr_type {
    AK_ATTR_UNDEFINED = 0,
    AK_ATTR_FLOAT = 1,
    AK_ATTR_INT = 2,
    AK_ATTR_STRING = 3,
    AK_ATTR_TENSOR = 4,
    AK_ATTR_GRAPH = 5,
    AK_ATTR_FLOATS = 6,
    AK_ATTR_INTS = 7,
    AK_ATTR_STRINGS = 8,
    AK_ATTR_TENSORS = 9,
    AK_ATTR_GRAPHS = 10,
    AK_ATTR_SPARSE_TENSOR = 11,
    AK_ATTR_SPARSE_TENSORS = 12,
    AK_ATTR_TYPE_PROTO = 13,
    AK_ATTR_TYPE_PROTOS = 14,
} ak__ir_attr_type;

struct ak__ir_graph;

/* A typed attribute; the member used follows type. Lists use count + the plural member.
 * TYPE_PROTO keeps the serialized TypeProto in s, TYPE_PROTOS in strings. */
typedef struct ak__ir_attr {
    const char *name;
    ak__ir_attr_type type;
    size_t count;
    union {
        float f;
        int64_t i;
        ak__ir_bytes s;
        ak__ir_tensor *t;
        struct ak__ir_graph *g;
        const float *floats;
        const int64_t *ints;
        const ak__ir_bytes *strings;
        ak__ir_tensor *const *tensors;
        struct ak__ir_graph *const *graphs;
    } u;
} ak__ir_attr;

typedef struct ak__ir_node {
    const char *name;    /* "" when the file gives none */
    const char *op_type;
    const char *domain;  /* "" for the default ONNX domain */
    int64_t opset;       /* version of the domain's operator set in effect */
    uint32_t num_inputs, num_outputs, num_attrs;
    int32_t *inputs;     /* value indices; AK_IR_NONE for an omitted optional input */
    int32_t *outputs;    /* value indices; AK_IR_NONE for an omitted optional output */
    ak__ir_attr *attrs;
    /* values of this graph read inside the node's subgraphs (implicit inputs: the node
     * must run after their producers) */
    uint32_t num_captures;
    int32_t *captures;
} ak__ir_node;

typedef struct ak__ir_graph ak__ir_graph;
struct ak__ir_graph {
    const char *name;
    ak__ir_graph *parent; /* enclosing graph of a subgraph; NULL for the main graph */
    ak__ir_graph *root;
    ak_arena *arena; /* shared with subgraphs; owned by the root */

    ak__ir_value *values;
    size_t num_values, cap_values;
    ak__ir_node *nodes;
    size_t num_nodes, cap_nodes;

    int32_t *inputs, *outputs; /* declared graph inputs / outputs (value indices) */
    size_t num_inputs, num_outputs;
    int32_t *order;            /* topological order of nodes, after ak__ir_graph_sort */

    /* values captured from the parent graph (indices in the parent), see ak__ir_node */
    int32_t *captures;
    size_t num_captures, cap_captures;

    struct ak__ir_names *names; /* value name -> index */

    /* root only: constant payloads and subgraphs to free with the graph */
    void **owned;
    size_t num_owned, cap_owned;
    ak__ir_graph **subgraphs;
    size_t num_subgraphs, cap_subgraphs;
};

/* ---- construction ------------------------------------------------------------------ */

ak_status ak__ir_graph_create(ak__ir_graph **out);
/* A subgraph of parent sharing its arena; freed with the root. */
ak_status ak__ir_subgraph_create(ak__ir_graph *parent, ak__ir_graph **out);
void ak__ir_graph_free(ak__ir_graph *graph);

/* Arena helpers: zeroed memory and copies that live as long as the graph. */
ak_status ak__ir_alloc(ak__ir_graph *g, size_t size, void **out);
ak_status ak__ir_alloc_array(ak__ir_graph *g, size_t count, size_t elem, void **out);
ak_status ak__ir_strdup(ak__ir_graph *g, const char *s, const char **out);
ak_status ak__ir_memdup(ak__ir_graph *g, const void *p, size_t n, const void **out);
/* A payload of `size` bytes owned by the root graph (64-byte aligned). */
ak_status ak__ir_alloc_payload(ak__ir_graph *g, size_t size, void **out);

/* Adds a value named `name` (copied; must be new in this graph). */
ak_status ak__ir_value_add(ak__ir_graph *g, const char *name, int32_t *out);
/* Index of `name` in this graph, or AK_IR_NONE. */
int32_t ak__ir_value_find(const ak__ir_graph *g, const char *name);
/* Resolves `name` in this graph or, for a subgraph, in the enclosing graphs: an outer
 * value gets a local AK_IR_VALUE_OUTER stand-in and is recorded as a capture of every
 * graph level it crosses. AK_IR_NONE when no graph defines it. */
ak_status ak__ir_value_resolve(ak__ir_graph *g, const char *name, int32_t *out);

/* Appends a node with zeroed fields; *out is its index. The pointer from
 * ak__ir_node_at stays valid until the next node is added. */
ak_status ak__ir_node_add(ak__ir_graph *g, int32_t *out);
static inline ak__ir_node *ak__ir_node_at(ak__ir_graph *g, int32_t i) { return &g->nodes[i]; }

/* ---- analysis ---------------------------------------------------------------------- */

/* Kahn's algorithm over data edges and captures; fills g->order. Fails with
 * AK_ERR_INVALID_MODEL naming a node on a cycle. Stable: ready nodes keep file order. */
ak_status ak__ir_graph_sort(ak__ir_graph *g);

/* Product of the dims of a fully known shape; 0 and *known = 0 when any is unknown. */
uint64_t ak__ir_value_numel(const ak__ir_value *v, int *known);
const ak__ir_attr *ak__ir_node_attr(const ak__ir_node *n, const char *name);

#endif /* AK_INFER_IR_IR_H */
