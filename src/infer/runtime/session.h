/* The session behind the public ak_session handle: per-value tensors, the bound nodes in
 * execution order, the memory plan and profiling counters. Shared by session.c (create,
 * folding, queries), session_run.c (the run loop) and memplan.c (the arena plan). */
#ifndef AK_INFER_RUNTIME_SESSION_H
#define AK_INFER_RUNTIME_SESSION_H

#include "infer/model.h"
#include "infer/runtime/op.h"

/* Where a value's bytes come from. */
typedef enum value_source {
    AK_SRC_ACTIVATION = 0, /* computed each run: arena (planned) or a dynamic buffer */
    AK_SRC_CONST,          /* initializer payload owned by the model */
    AK_SRC_FOLDED,         /* computed once at creation, owned by the session */
    AK_SRC_INPUT,          /* the caller's buffer, bound each run */
    AK_SRC_UNUSED,         /* omitted or never defined */
} value_source;

typedef struct ak__exec_node {
    const ak__ir_node *node;
    const ak__op_def *def;
    void *state;
    const ak__tensor **inputs; /* into session->values; NULL for omitted inputs */
    ak__tensor **outputs;
    int folded;
    int removed;        /* fused into another node by the optimizer */
    uint64_t ns, calls; /* profiling */
} ak__exec_node;

struct ak_session {
    ak_model *owned_model;
    const ak_model *model;
    const ak__ir_graph *g;
    ak_threadpool *pool;
    int profile;

    ak__tensor *values;       /* one per IR value */
    uint8_t *source;          /* value_source per value */
    int32_t *alias_root;      /* value whose bytes a value shares (itself when none) */
    int32_t *first_def, *last_use; /* execution step that writes / last reads a value */
    void **folded_data;       /* AK_SRC_FOLDED payloads */
    ak__exec_node *nodes;     /* execution order */
    size_t num_nodes, num_folded, folded_bytes, num_fused;
    ak_arena *opt_arena;      /* nodes the optimizer made */
    const ak__tensor **io_ptrs; /* backing store of every node's inputs/outputs arrays */

    /* the plan: valid when planned; shapes of every value as seen when it was made */
    int planned;
    ak__tensor *plan_shapes;
    size_t *plan_offset;      /* byte offset in the arena per activation root */
    void *arena;
    void *retired_arena;      /* the arena a re-plan replaced, freed at the next run */
    size_t arena_bytes, naive_bytes;
    void *workspace;
    size_t workspace_bytes;
    void **dynamic;           /* per value: buffers of a run made without a plan */
};

/* Computes offsets for every activation root from s->values' shapes (of the run just
 * made) and lifetimes, and allocates a new arena (the old one becomes retired_arena:
 * outputs of the run just made may live in it). */
ak_status ak__memplan_build(ak_session *s);

/* The graph optimizer (optimize.c): fuses node chains after folding. */
ak_status ak__optimize(ak_session *s);

/* Runs one node: reshape, check or place outputs, run. `planned` says whether outputs
 * go to the arena (else dynamic buffers). */
ak_status ak__session_exec_node(ak_session *s, ak__exec_node *e, int *planned);

#endif /* AK_INFER_RUNTIME_SESSION_H */
