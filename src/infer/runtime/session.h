/* The session behind the public ak_session handle: per-value tensors, the bound nodes in
 * execution order, the memory plan and profiling counters. Shared by session.c (create,
 * folding, queries), session_run.c (the run loop) and memplan.c (the arena plan). */
#ifndef AK_INFER_RUNTIME_SESSION_H
#define AK_INFER_RUNTIME_SESSION_H

#include "infer/model.h"
#include "infer/runtime/op.h"
#include "infer/runtime/string_pool.h"

/* Where a value's bytes come from. */
typedef enum value_source {
    AK_SRC_ACTIVATION = 0, /* computed each run: arena (planned) or a dynamic buffer */
    AK_SRC_CONST,          /* initializer payload owned by the model */
    AK_SRC_FOLDED,         /* computed once at creation, owned by the session */
    AK_SRC_INPUT,          /* the caller's buffer, bound each run */
    AK_SRC_UNUSED,         /* omitted or never defined */
    AK_SRC_OUTER,          /* a subgraph's view of an enclosing graph's value, bound each run */
} value_source;

typedef struct ak__exec_node {
    const ak__ir_node *node;
    const ak__op_def *def;
    void *state;
    const ak__tensor **inputs; /* into session->values; NULL for omitted inputs */
    ak__tensor **outputs;
    const ak__tensor **captures; /* node->captures' tensors (control-flow nodes) */
    int folded;
    int removed;        /* fused into another node by the optimizer */
    uint64_t ns, calls; /* profiling */
} ak__exec_node;

struct ak_session {
    ak_model *owned_model;
    const ak_model *model;
    const ak__ir_graph *g;
    ak_threadpool *pool;
    ak_threadpool *own_pool;  /* the pool the session made (a subsession runs on its parent's) */
    int profile;
    /* subsessions (If branches, Loop and Scan bodies): per value, the index in the
     * parent node's captures an AK_SRC_OUTER value is bound from; NULL otherwise */
    int32_t *outer_slot;

    ak__tensor *values;       /* one per IR value */
    uint8_t *source;          /* value_source per value */
    uint8_t *baked;           /* per value: a constant an operator's create or folding
                                 consumed, so a run cannot override it */
    int32_t *alias_root;      /* value whose bytes a value shares (itself when none) */
    int32_t *first_def, *last_use; /* execution step that writes / last reads a value */
    void **folded_data;       /* AK_SRC_FOLDED payloads */
    ak__exec_node *nodes;     /* execution order */
    size_t num_nodes, num_folded, folded_bytes, num_fused;
    ak_arena *opt_arena;      /* nodes the optimizer made */
    /* what the optimizer did (ak_session_optimizations): a pass or fused operator, and
     * how many times it applied */
    struct ak__opt_note { const char *what; size_t times; } opt_notes[32];
    size_t num_opt_notes;
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

    /* ak_session_run_into: per value, the caller's buffer an output is written to during
     * the current run (NULL: none); allocated on first use */
    const ak_tensor **bound;

    /* the Chrome-trace event log of a profiling top-level session (session_profile.c) */
    struct ak__profile_event *events;
    size_t num_events, cap_events;
    uint64_t profile_start_ns;

    /* the backend each GEMM-shaped node runs on (infer/backends/choose.h); NULL in
     * subsessions */
    struct ak__bk_session *backends;

    /* bytes of STRING tensors: computed by folding (kept) and by the current run */
    ak__string_pool folded_strings, run_strings;
};

/* Computes offsets for every activation root from s->values' shapes (of the run just
 * made) and lifetimes, and allocates a new arena (the old one becomes retired_arena:
 * outputs of the run just made may live in it). */
ak_status ak__memplan_build(ak_session *s);

/* The graph optimizer (optimize.c): rewrites and fuses nodes after folding, as far as
 * `level` (AK_OPTIMIZE_*, not NONE) allows. */
ak_status ak__optimize(ak_session *s, int level);

/* Binds, creates, folds and optimizes the nodes of s->g (set by the caller, with
 * s->model for a top-level session). */
ak_status ak__session_init(ak_session *s, const ak_session_options *opts);

/* Runs every node once with the inputs (and outer values) bound, then plans memory from
 * this run's shapes when no plan fitted. */
ak_status ak__session_run_nodes(ak_session *s);
/* Frees the dynamic buffers and retired arena the previous run left (call before binding
 * the next run's inputs). */
void ak__session_release_previous(ak_session *s);

/* Runs one node: reshape, check or place outputs, run. `planned` says whether outputs
 * go to the arena (else dynamic buffers). */
ak_status ak__session_exec_node(ak_session *s, ak__exec_node *e, int *planned);

/* Profiling event log (session_profile.c): node k (or -1 for a whole run) ran from
 * t0_ns for dur_ns. Appends only in top-level sessions with profiling on; a full log
 * (AK_PROFILE_MAX_EVENTS) drops further events, as the trace file says. */
typedef struct ak__profile_event {
    int32_t node;
    uint64_t t0_ns, dur_ns;
} ak__profile_event;
void ak__session_log_event(ak_session *s, int32_t node, uint64_t t0_ns, uint64_t dur_ns);
void ak__session_free_events(ak_session *s);

/* ---- subsessions: a subgraph run by a control-flow operator (subsession.c) ---------- */

/* A session over subgraph g of node `owner` (an If branch, a Loop or Scan body): its
 * operators are bound, created and folded now, so an unsupported operator inside a
 * body fails the enclosing session's creation. Shapes may change from run to run: the
 * subsession plans memory from its first run and re-plans when shapes differ, like a
 * session (runs without a fitting plan use dynamic buffers). */
ak_status ak__subsession_create(const ak__ir_graph *g, const ak__ir_node *owner,
                                ak_session **out);
/* Runs it once: inputs[i] binds g->inputs[i] (num_inputs must match), captures are the
 * owner's capture tensors (ctx->captures), pool the owner's pool. The outputs stay valid
 * until the next run of the subsession. */
ak_status ak__subsession_run(ak_session *s, ak_threadpool *pool, const ak__tensor *inputs,
                             size_t num_inputs, const ak__tensor *const *captures);
/* Output i of the last run. */
const ak__tensor *ak__subsession_output(const ak_session *s, size_t i);

/* ---- per-node backends: declared here for the session, defined by infer/backends/
 * choose.c (a module above the runtime, as ops/ define ak__op_find) ---- */
struct ak__bk_session;
/* Sets up choices for the nodes of a top-level session (after optimizing); fails on a bad
 * AK_INFER_BACKENDS. */
ak_status ak__bk_session_init(struct ak_session *s);
void ak__bk_session_free(struct ak__bk_session *b);
/* Runs node k (its outputs placed) on its chosen backend, choosing first when its shapes
 * are new. */
ak_status ak__bk_run_node(struct ak_session *s, size_t k, ak__op_ctx *ctx);

#endif /* AK_INFER_RUNTIME_SESSION_H */
