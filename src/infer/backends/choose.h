/* Per-node backend choice by measurement (choose.c) and the tuning cache (cache.c). */
#ifndef AK_INFER_BACKENDS_CHOOSE_H
#define AK_INFER_BACKENDS_CHOOSE_H

#include "infer/backends/backend.h"
#include "infer/runtime/session.h"

struct ak_session;
struct ak__exec_node;

/* One shape-and-settings key's times: median ns per backend (0 = not measured). */
typedef struct ak__bk_entry {
    char *key;
    uint64_t ns[AK_BK_COUNT];
    int from_cache; /* read from the cache file, not measured by this process */
} ak__bk_entry;

/* A node a backend may run: what it chose for the shapes it last met. */
typedef struct ak__bk_node {
    ak__bk_op op;
    int chosen;                  /* backend id; -1 before the node's first run */
    size_t entry;                /* into the session's entries (when chosen >= 0) */
    const char *how;             /* ak_node_backend.how */
    uint64_t macs;
    /* the input shapes the choice was made for */
    int ranks[3];
    int64_t dims[3][AK_IR_MAX_RANK];
    int types[3];
} ak__bk_node;

typedef struct ak__bk_session {
    unsigned usable;             /* allowed by AK_INFER_BACKENDS and available */
    int nusable;
    char env[512];               /* the key's tail: threads, CPU, versions */
    ak__bk_node *nodes;          /* per exec node; op NONE = not eligible */
    ak__bk_entry *entries;
    size_t num_entries, cap_entries;
    int cache_loaded;
    int cache_bad;               /* the file exists but is not ours: rewrite it */
    uint64_t tune_ns;            /* time spent measuring */
} ak__bk_session;

/* ak__bk_session_init, ak__bk_session_free and ak__bk_run_node, the session's calls, are
 * declared in infer/runtime/session.h (the runtime is below this module). */

/* ---- the tuning cache (cache.c) ---- */

/* The cache file's path (NULL when neither XDG_CACHE_HOME nor HOME is set). */
const char *ak__bk_cache_path(char *buf, size_t cap);
/* Adds the file's entries to b (a bad line: refused with a log line; a foreign file:
 * ignored, with a log line, and replaced at the next save). */
void ak__bk_cache_load(ak__bk_session *b);
/* Appends entry e to the file (failures logged, never fatal: the cache only saves time). */
void ak__bk_cache_save(ak__bk_session *b, const ak__bk_entry *e);
/* Adds an entry (key copied); NULL when out of memory. */
ak__bk_entry *ak__bk_entry_add(ak__bk_session *b, const char *key);

#endif /* AK_INFER_BACKENDS_CHOOSE_H */
