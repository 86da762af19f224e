/* Choosing a backend per node by measurement. The choice needs the node's real shapes,
 * which for an activation input are known once a run reaches the node: the first run
 * that meets a node with new input shapes times the node on each usable backend (a
 * warm-up call, then 3 to 7 timed calls, the median kept) and runs it on the fastest from
 * then on. Nodes with the same key (operator, shapes, attributes, type, threads, CPU,
 * library versions) share one measurement, in this session and, through the tuning cache
 * (cache.c), in later ones. Every timed call computes the node's whole output, so the
 * run that measures gives the same result as any other. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "infer/backends/choose.h"
#include "core/params.h"
#include "infer/runtime/session.h"

/* Below this many multiply-adds a node stays on accelkit's kernels unmeasured: the call
 * overheads would decide, and timing it would cost more than it could save. */
#define TUNE_MIN_MACS ((uint64_t)64 * 64 * 16)

/* A library is kept only when accelkit's kernels take more than this times its time. */
#define OWN_MARGIN 1.03

/* "model name" of /proc/cpuinfo (tabs and newlines make no key: they become spaces). */
static void cpu_model(char *out, size_t cap) {
    snprintf(out, cap, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) != 0) continue;
        const char *v = strchr(line, ':');
        if (!v) break;
        v++;
        while (*v == ' ') v++;
        snprintf(out, cap, "%s", v);
        out[strcspn(out, "\n")] = '\0';
        break;
    }
    fclose(f);
    for (char *p = out; *p; p++)
        if (*p == '\t' || *p == '|') *p = ' ';
}

ak_status ak__bk_session_init(ak_session *s) {
    if (!s->model) return AK_OK; /* subgraphs (If, Loop, Scan bodies) run on own kernels */
    unsigned allowed;
    AK_CHECK(ak__infer_backends_allowed(&allowed));
    ak__bk_session *b = calloc(1, sizeof *b);
    if (!b) return AK_FAIL(AK_ERR_NO_MEMORY, "session: out of memory");
    s->backends = b;
    b->nodes = calloc(s->num_nodes ? s->num_nodes : 1, sizeof *b->nodes);
    if (!b->nodes) return AK_FAIL(AK_ERR_NO_MEMORY, "session: out of memory");
    int threads = 1;
    AK_CHECK(ak_threadpool_size(s->pool, &threads));
    char cpu[128];
    cpu_model(cpu, sizeof cpu);
    size_t w = (size_t)snprintf(b->env, sizeof b->env, "threads=%d|cpu=%s", threads, cpu);
    for (int k = 0; k < AK_BK_COUNT; k++) {
        if (!(allowed & (1u << k))) continue;
        const ak__infer_backend *be = ak__infer_backend_get(k);
        if (!be->vt) continue;
        b->usable |= 1u << k;
        b->nusable++;
        if (w < sizeof b->env)
            w += (size_t)snprintf(b->env + w, sizeof b->env - w, "|%s=%s", be->vt->name, be->version);
    }
    if (!b->nusable) {
        AK_LOG_WARN(AK_SUBSYS_INFER, "AK_INFER_BACKENDS=%s: none of them is available; "
                    "accelkit's own kernels run every node", ak__param_str(AK_PARAM_INFER_BACKENDS));
        b->usable = 1u << AK_BK_OWN;
        b->nusable = 1;
    }
    for (size_t k = 0; k < s->num_nodes; k++) {
        const ak__exec_node *e = &s->nodes[k];
        b->nodes[k].chosen = -1;
        b->nodes[k].op = e->folded || e->removed ? AK_BK_OP_NONE : ak__infer_backend_op_of(e->node);
    }
    return AK_OK;
}

void ak__bk_session_free(ak__bk_session *b) {
    if (!b) return;
    for (size_t i = 0; i < b->num_entries; i++) free(b->entries[i].key);
    free(b->entries);
    free(b->nodes);
    free(b);
}

ak__bk_entry *ak__bk_entry_add(ak__bk_session *b, const char *key) {
    if (b->num_entries == b->cap_entries) {
        size_t cap = b->cap_entries ? 2 * b->cap_entries : 16;
        ak__bk_entry *p = realloc(b->entries, cap * sizeof *p);
        if (!p) return NULL;
        b->entries = p;
        b->cap_entries = cap;
    }
    ak__bk_entry *e = &b->entries[b->num_entries];
    memset(e, 0, sizeof *e);
    e->key = strdup(key);
    if (!e->key) return NULL;
    b->num_entries++;
    return e;
}

static int same_inputs(const ak__bk_node *n, const ak__op_ctx *ctx) {
    for (uint32_t i = 0; i < 3; i++) {
        const ak__tensor *t = ak__op_in(ctx, i);
        int rank = t ? t->rank : -1;
        if (rank != n->ranks[i] || (t && (int)t->type != n->types[i])) return 0;
        if (t && memcmp(t->dims, n->dims[i], (size_t)rank * sizeof *t->dims) != 0) return 0;
    }
    return 1;
}

static void remember_inputs(ak__bk_node *n, const ak__op_ctx *ctx) {
    for (uint32_t i = 0; i < 3; i++) {
        const ak__tensor *t = ak__op_in(ctx, i);
        n->ranks[i] = t ? t->rank : -1;
        n->types[i] = t ? (int)t->type : -1;
        if (t) memcpy(n->dims[i], t->dims, (size_t)t->rank * sizeof *t->dims);
    }
}

/* op|inputs|attributes|env: what decides the times. Returns 0 when it did not fit in cap
 * (a truncated key could name other shapes: such a node is timed, never shared or
 * cached). */
static int make_key(const ak__bk_session *b, const ak__op_ctx *ctx, char *key, size_t cap) {
    const ak__ir_node *n = ctx->node;
    size_t w = (size_t)snprintf(key, cap, "%s|", n->op_type);
    for (uint32_t i = 0; i < 3 && w < cap; i++) {
        const ak__tensor *t = ak__op_in(ctx, i);
        if (!t) continue;
        w += (size_t)snprintf(key + w, cap - w, "%s%s[", i ? "," : "", ak_elem_type_name(t->type));
        for (int d = 0; d < t->rank && w < cap; d++)
            w += (size_t)snprintf(key + w, cap - w, "%s%lld", d ? "x" : "", (long long)t->dims[d]);
        if (w < cap) w += (size_t)snprintf(key + w, cap - w, "]");
    }
    if (w >= cap) return 0;
    if (ak__infer_backend_op_of(n) == AK_BK_OP_GEMM) {
        w += (size_t)snprintf(key + w, cap - w, "|transA=%d,transB=%d,alpha=%.9g,beta=%.9g",
                              ak__attr_int(n, "transA", 0) != 0, ak__attr_int(n, "transB", 0) != 0,
                              (double)ak__attr_float(n, "alpha", 1.0f),
                              (double)ak__attr_float(n, "beta", 1.0f));
    } else if (ak__infer_backend_op_of(n) == AK_BK_OP_MATMUL_BIAS) {
        const float *p;
        size_t np = ak__attr_floats(n, "activation_params", &p);
        w += (size_t)snprintf(key + w, cap - w, "|activation=%s", ak__attr_string(n, "activation", ""));
        for (size_t i = 0; i < np && w < cap; i++)
            w += (size_t)snprintf(key + w, cap - w, ",%.9g", (double)p[i]);
    } else {
        w += (size_t)snprintf(key + w, cap - w, "|");
    }
    if (w < cap) w += (size_t)snprintf(key + w, cap - w, "|%s", b->env);
    for (char *c = key; *c; c++) /* names from a file make no tab or line break in the cache */
        if (*c == '\t' || *c == '\n' || *c == '\r') *c = ' ';
    return w < cap;
}

/* Multiply-adds of the node (its output count times the inner dimension). */
static uint64_t node_macs(ak__bk_op op, const ak__op_ctx *ctx) {
    const ak__tensor *A = ctx->inputs[0], *B = ctx->inputs[1], *Y = ak__op_out(ctx, 0);
    if (!A || !B || !Y || A->rank < 1) return 0;
    uint64_t K = op == AK_BK_OP_GEMM && A->rank == 2 && ak__attr_int(ctx->node, "transA", 0)
                     ? (uint64_t)A->dims[0] : (uint64_t)A->dims[A->rank - 1];
    return Y->count * K;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Median ns of node runs on backend k: a warm-up call (packing buffers, page faults, the
 * library's first-call set-up), then 7 timed calls under 1 ms each, 5 under 10 ms, else 3. */
static ak_status time_backend(int k, ak__bk_op op, ak__op_ctx *ctx, uint64_t *median) {
    uint64_t t[7];
    AK_CHECK(ak__infer_backend_run(k, op, ctx));
    uint64_t t0 = ak_now_ns();
    AK_CHECK(ak__infer_backend_run(k, op, ctx));
    t[0] = ak_now_ns() - t0;
    int reps = t[0] < 1000000 ? 7 : t[0] < 10000000 ? 5 : 3;
    for (int r = 1; r < reps; r++) {
        t0 = ak_now_ns();
        AK_CHECK(ak__infer_backend_run(k, op, ctx));
        t[r] = ak_now_ns() - t0;
    }
    qsort(t, (size_t)reps, sizeof *t, cmp_u64);
    *median = t[reps / 2] ? t[reps / 2] : 1; /* 0 means "not measured" */
    return AK_OK;
}

static int first_usable(const ak__bk_session *b) {
    if (b->usable & (1u << AK_BK_OWN)) return AK_BK_OWN;
    for (int k = 0; k < AK_BK_COUNT; k++)
        if (b->usable & (1u << k)) return k;
    return AK_BK_OWN;
}

ak_status ak__bk_run_node(ak_session *s, size_t k, ak__op_ctx *ctx) {
    ak__bk_session *b = s->backends;
    ak__bk_node *bn = &b->nodes[k];
    const ak__exec_node *e = &s->nodes[k];
    if (bn->op == AK_BK_OP_NONE) return e->def->run(ctx);
    for (uint32_t i = 0; i < ctx->num_inputs && i < 3; i++) /* other types: the operator's loops */
        if (ctx->inputs[i] && ctx->inputs[i]->type != AK_ELEM_F32) return e->def->run(ctx);
    if (bn->chosen >= 0 && same_inputs(bn, ctx)) return ak__infer_backend_run(bn->chosen, bn->op, ctx);

    /* new shapes: choose */
    remember_inputs(bn, ctx);
    bn->entry = SIZE_MAX;
    bn->macs = node_macs(bn->op, ctx);
    if (b->nusable == 1 || bn->macs < TUNE_MIN_MACS) {
        bn->how = b->nusable == 1 ? "only" : "small";
        bn->chosen = first_usable(b);
        return ak__infer_backend_run(bn->chosen, bn->op, ctx);
    }
    char key[1024];
    int keyed = make_key(b, ctx, key, sizeof key);
    if (!keyed) key[0] = '\t'; /* a tab: no real key (make_key removes them) equals it */
    if (!b->cache_loaded) {
        b->cache_loaded = 1;
        ak__bk_cache_load(b);
    }
    size_t ei = keyed ? 0 : b->num_entries; /* unkeyed: a fresh entry of its own */
    while (ei < b->num_entries && strcmp(b->entries[ei].key, key) != 0) ei++;
    if (ei == b->num_entries && !ak__bk_entry_add(b, key))
        return AK_FAIL(AK_ERR_NO_MEMORY, "session: out of memory");
    ak__bk_entry *en = &b->entries[ei];
    int ran = 0;
    uint64_t t0 = ak_now_ns();
    for (int c = 0; c < AK_BK_COUNT; c++) {
        if (!(b->usable & (1u << c)) || en->ns[c]) continue;
        AK_CHECK(time_backend(c, bn->op, ctx, &en->ns[c]));
        ran = 1;
    }
    if (ran) {
        b->tune_ns += ak_now_ns() - t0;
        en->from_cache = 0;
        if (keyed) ak__bk_cache_save(b, en);
    }
    int best = -1;
    for (int c = 0; c < AK_BK_COUNT; c++)
        if ((b->usable & (1u << c)) && en->ns[c] && (best < 0 || en->ns[c] < en->ns[best])) best = c;
    /* a library must beat accelkit's kernels by more than the medians' noise: a tie
     * would only add the library's first-call costs (oneDNN compiles its kernels) */
    if (best != AK_BK_OWN && (b->usable & (1u << AK_BK_OWN)) && en->ns[AK_BK_OWN] &&
        (double)en->ns[AK_BK_OWN] <= OWN_MARGIN * (double)en->ns[best])
        best = AK_BK_OWN;
    bn->chosen = best;
    bn->entry = ei;
    bn->how = ran ? "measured" : en->from_cache ? "cache" : "shared";
    if (ak__log_enabled(AK_LOG_INFO, AK_SUBSYS_INFER)) {
        char times[160] = "";
        size_t w = 0;
        for (int c = 0; c < AK_BK_COUNT && w < sizeof times; c++)
            if ((b->usable & (1u << c)) && en->ns[c])
                w += (size_t)snprintf(times + w, sizeof times - w, " %s %.3f ms",
                                      ak__infer_backend_name(c), (double)en->ns[c] / 1e6);
        AK_LOG_INFO(AK_SUBSYS_INFER, "node %s (%s): %s chosen (%s:%s)",
                    e->node->name[0] ? e->node->name : "<unnamed>", e->node->op_type,
                    ak__infer_backend_name(best), ran ? "measured" : "tuning cache", times);
    }
    /* a timed call already computed the outputs; a cached choice has not run yet */
    return ran ? AK_OK : ak__infer_backend_run(best, bn->op, ctx);
}

ak_status ak_session_backends(const ak_session *s, size_t i, ak_node_backend *out, size_t *count) {
    AK_ARG_CHECK(s && (count || out), "ak_session_backends: NULL argument");
    const ak__bk_session *b = s->backends;
    size_t n = 0;
    for (size_t k = 0; b && k < s->num_nodes; k++) {
        const ak__bk_node *bn = &b->nodes[k];
        if (bn->op == AK_BK_OP_NONE || bn->chosen < 0) continue;
        if (out && n == i) {
            memset(out, 0, sizeof *out);
            out->node = s->nodes[k].node->name;
            out->op_type = s->nodes[k].node->op_type;
            out->backend = ak__infer_backend_name(bn->chosen);
            out->how = bn->how;
            out->macs = bn->macs;
            const ak__bk_entry *en = bn->entry < b->num_entries ? &b->entries[bn->entry] : NULL;
            for (int c = 0; en && c < AK_BK_COUNT && out->num_times < AK_MAX_BACKENDS; c++)
                if ((b->usable & (1u << c)) && en->ns[c]) {
                    out->names[out->num_times] = ak__infer_backend_name(c);
                    out->median_ns[out->num_times++] = en->ns[c];
                }
        }
        n++;
    }
    if (count) *count = n;
    if (out && i >= n)
        return AK_FAIL(AK_ERR_INVALID_ARG, "ak_session_backends: index %zu of %zu", i, n);
    return AK_OK;
}
