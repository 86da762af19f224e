/* Planner search: enumerates tp, pp, dp, micro-batch size, interleaving and sequence
 * parallelism (the structure), then for each structure the memory modes (recompute incl.
 * hybrid k, ZeRO stage, offload); keeps the plans that fit and are not dominated, and
 * returns the fastest. Hybrid k is found by bisection: memory falls and time rises with k,
 * so the smallest k that fits is the only one worth keeping. */
#include <math.h>
#include <string.h>
#include <time.h>

#include "core/check.h"
#include "plan/plan_internal.h"

#define MAX_VARIANTS 64  /* memory-mode variants of one structure */
#define MAX_MBS 256

typedef struct search_ctx {
    const ak_plan_model *m;
    const ak_plan_cluster *c;
    const ak_plan_options *o;
    const ak_plan_config *want; /* constraint: fields < 0 are free */
    ak_plan_result *best;
    size_t cap, count;
    ak_plan_search_stats *stats;
    ak_plan_result variants[MAX_VARIANTS];
    int nvariants;
} search_ctx;

static int free_or(int64_t want, int64_t value) { return want < 0 || want == value; }

/* ---- results ------------------------------------------------------------------------ */

static void offer_top(search_ctx *s, const ak_plan_result *r) {
    if (s->count == s->cap && r->time_per_iter_s >= s->best[s->count - 1].time_per_iter_s) return;
    size_t i = s->count < s->cap ? s->count++ : s->cap - 1;
    while (i > 0 && s->best[i - 1].time_per_iter_s > r->time_per_iter_s) {
        s->best[i] = s->best[i - 1];
        i--;
    }
    s->best[i] = *r;
}

static int dominates(const ak_plan_result *a, const ak_plan_result *b) {
    return a->time_per_iter_s <= b->time_per_iter_s && a->memory.total <= b->memory.total &&
           (a->time_per_iter_s < b->time_per_iter_s || a->memory.total < b->memory.total);
}

/* Keeps the structure's variants that no other variant beats in both time and memory. */
static void flush_variants(search_ctx *s) {
    for (int i = 0; i < s->nvariants; i++) {
        int dominated = 0;
        for (int j = 0; j < s->nvariants && !dominated; j++) dominated = j != i && dominates(&s->variants[j], &s->variants[i]);
        if (dominated) continue;
        s->stats->kept++;
        offer_top(s, &s->variants[i]);
    }
    s->nvariants = 0;
}

/* Evaluates one complete plan and returns whether it fits; a fitting plan joins the
 * structure's variants when `keep`. */
static int evaluate_plan(search_ctx *s, ak_plan_config *cfg, int keep) {
    if (!plan_config_valid(s->m, s->c, s->o, cfg)) return 0;
    ak_plan_result r;
    plan_evaluate_unchecked(s->m, s->c, s->o, cfg, &r);
    s->stats->evaluated++;
    if (!isfinite(r.time_per_iter_s)) return 0;
    if (s->stats->evaluated == 1 || r.memory.total < s->stats->least_memory.memory.total) s->stats->least_memory = r;
    if (!r.fits) return 0;
    s->stats->feasible++;
    if (keep && s->nvariants < MAX_VARIANTS) s->variants[s->nvariants++] = r;
    return 1;
}

/* ---- memory modes -------------------------------------------------------------------- */

/* Smallest hybrid k (1..layers per stage - 1) that fits, by bisection. */
static void search_hybrid(search_ctx *s, ak_plan_config *cfg) {
    cfg->recompute = AK_PLAN_RECOMPUTE_HYBRID;
    if (s->want->recompute_layers >= 0) {
        cfg->recompute_layers = s->want->recompute_layers;
        evaluate_plan(s, cfg, 1);
        return;
    }
    int64_t lo = 1, hi = s->m->layers / cfg->pp - 1;
    if (s->c->ngroups > 1 || hi < 1) return;
    cfg->recompute_layers = hi;
    if (!evaluate_plan(s, cfg, 0)) return; /* not even all layers but one fit */
    while (lo < hi) {                      /* invariant: k = hi fits */
        cfg->recompute_layers = lo + (hi - lo) / 2;
        if (evaluate_plan(s, cfg, 0)) hi = cfg->recompute_layers;
        else lo = cfg->recompute_layers + 1;
    }
    cfg->recompute_layers = hi;
    evaluate_plan(s, cfg, 1);
}

/* Recompute modes for one (ZeRO, offload): none/selective/full, and hybrid when only
 * full recomputation fits (otherwise a cheaper mode already does). */
static void search_recompute(search_ctx *s, ak_plan_config *cfg) {
    static const ak_plan_recompute modes[] = {AK_PLAN_RECOMPUTE_NONE, AK_PLAN_RECOMPUTE_SELECTIVE, AK_PLAN_RECOMPUTE_FULL};
    int cheaper_fits = 0, full_fits = 0;
    for (size_t i = 0; i < 3; i++) {
        if (!free_or(s->want->recompute, modes[i])) continue;
        /* with fused attention nothing is left for selective recompute to save */
        if (modes[i] == AK_PLAN_RECOMPUTE_SELECTIVE && s->o->flash_attention && s->want->recompute < 0) continue;
        cfg->recompute = modes[i];
        cfg->recompute_layers = 0;
        int fits = evaluate_plan(s, cfg, 1);
        if (modes[i] == AK_PLAN_RECOMPUTE_FULL) full_fits = fits;
        else cheaper_fits |= fits;
    }
    if (s->want->recompute == AK_PLAN_RECOMPUTE_HYBRID || (s->want->recompute < 0 && full_fits && !cheaper_fits))
        search_hybrid(s, cfg);
}

/* Without data parallelism there is nothing to shard: ZeRO only matters as the carrier
 * of offload (stage 1 for the optimizer, stage 3 for parameters). */
static int zero_matters_alone(int zero, int offload) {
    return zero == 0 || (zero == 1 && offload == AK_PLAN_OFFLOAD_OPTIMIZER) ||
           (zero == 3 && offload == AK_PLAN_OFFLOAD_PARAMS);
}

static void search_memory_modes(search_ctx *s, ak_plan_config *cfg) {
    for (int zero = 0; zero <= 3; zero++) {
        if (!free_or(s->want->zero_stage, zero) || (zero >= 2 && cfg->pp > 1)) continue;
        for (int off = AK_PLAN_OFFLOAD_NONE; off <= AK_PLAN_OFFLOAD_PARAMS; off++) {
            if (!free_or(s->want->offload, off)) continue;
            if ((off == AK_PLAN_OFFLOAD_OPTIMIZER && zero < 1) || (off == AK_PLAN_OFFLOAD_PARAMS && zero < 3)) continue;
            if (cfg->dp == 1 && !zero_matters_alone(zero, off)) continue;
            cfg->zero_stage = zero;
            cfg->offload = (ak_plan_offload)off;
            search_recompute(s, cfg);
        }
    }
    flush_variants(s);
}

/* ---- structure ------------------------------------------------------------------------ */

static void search_sp_vp(search_ctx *s, ak_plan_config *cfg) {
    int64_t stage_layers = s->c->ngroups == 1 ? s->m->layers / cfg->pp : 1;
    int64_t micro = s->o->global_batch / (cfg->dp * cfg->mbs);
    for (int64_t vp = 1; vp <= stage_layers; vp++) {
        if (stage_layers % vp != 0 || !free_or(s->want->vp, vp)) continue;
        if (vp > 1 && (cfg->pp == 1 || micro % cfg->pp != 0)) continue;
        for (int sp = 0; sp <= (cfg->tp > 1); sp++) {
            if (!free_or(s->want->sequence_parallel, sp)) continue;
            cfg->vp = vp;
            cfg->sequence_parallel = sp;
            search_memory_modes(s, cfg);
        }
    }
}

static void search_mbs(search_ctx *s, ak_plan_config *cfg) {
    int64_t per_replica = s->o->global_batch / cfg->dp;
    if (s->o->global_batch % cfg->dp != 0) return;
    for (int64_t mbs = 1; mbs <= per_replica && mbs <= MAX_MBS; mbs++) {
        if (per_replica % mbs != 0 || !free_or(s->want->mbs, mbs)) continue;
        cfg->mbs = mbs;
        search_sp_vp(s, cfg);
    }
}

/* dp candidates and the pp they imply: one device type, pp divides the layers; mixed,
 * every group's devices split into stages of tp x dp. */
static void search_dp(search_ctx *s, ak_plan_config *cfg, int64_t dp) {
    if (!free_or(s->want->dp, dp)) return;
    int64_t pp = 0;
    for (int i = 0; i < s->c->ngroups; i++) {
        int64_t n = s->c->groups[i].nodes * s->c->groups[i].devices_per_node;
        if (n % (cfg->tp * dp) != 0) return;
        pp += n / (cfg->tp * dp);
    }
    if (!free_or(s->want->pp, pp) || pp > s->m->layers) return;
    if (s->c->ngroups == 1 && s->m->layers % pp != 0) return;
    cfg->dp = dp;
    cfg->pp = pp;
    memset(cfg->group_stage_layers, 0, sizeof(cfg->group_stage_layers));
    search_mbs(s, cfg);
}

/* dp runs over the divisors of devices / tp (found up to the square root, so a cluster
 * of millions of devices costs thousands of steps); pp follows from dp. */
static void search_pp_dp(search_ctx *s, ak_plan_config *cfg, int64_t devices) {
    int64_t per_tp = devices / cfg->tp;
    for (int64_t i = 1; i * i <= per_tp; i++) {
        if (per_tp % i != 0) continue;
        search_dp(s, cfg, i);
        if (i != per_tp / i) search_dp(s, cfg, per_tp / i);
    }
}

static ak_status check_inputs(const ak_plan_model *m, const ak_plan_cluster *c, const ak_plan_options *o,
                              const ak_plan_config *want, ak_plan_result *best, size_t *count) {
    if (!o || !want || !best || !count) return AK_FAIL(AK_ERR_INVALID_ARG, "ak_plan_search: NULL argument");
    if (*count < 1) return AK_FAIL(AK_ERR_INVALID_ARG, "ak_plan_search: room for at least one result needed");
    AK_CHECK(ak_plan_model_check(m));
    AK_CHECK(ak_plan_cluster_check(c));
    if (o->global_batch < 1)
        return AK_FAIL(AK_ERR_INVALID_ARG, "global batch must be >= 1 (got %lld)", (long long)o->global_batch);
    if (want->recompute_layers >= 0 && want->recompute != AK_PLAN_RECOMPUTE_HYBRID)
        return AK_FAIL(AK_ERR_INVALID_ARG, "a recompute layer count needs hybrid recompute");
    return AK_OK;
}

ak_status ak_plan_search(const ak_plan_model *model, const ak_plan_cluster *cluster,
                         const ak_plan_options *options, const ak_plan_config *constraint,
                         ak_plan_result *best, size_t *count, ak_plan_search_stats *stats,
                         ak_plan_progress_fn progress, void *progress_user) {
    AK_CHECK(check_inputs(model, cluster, options, constraint, best, count));
    ak_plan_search_stats local;
    if (!stats) stats = &local;
    memset(stats, 0, sizeof(*stats));
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    static _Thread_local search_ctx s;
    s = (search_ctx){.m = model, .c = cluster, .o = options, .want = constraint, .best = best,
                     .cap = *count, .stats = stats};
    int64_t devices = plan_cluster_devices(cluster), node = cluster->groups[0].devices_per_node;
    for (int i = 1; i < cluster->ngroups; i++)
        if (cluster->groups[i].devices_per_node < node) node = cluster->groups[i].devices_per_node;
    for (int64_t tp = 1; tp <= node; tp++) {
        if (progress) progress((double)(tp - 1) / (double)node, progress_user);
        if (node % tp != 0 || !free_or(constraint->tp, tp)) continue;
        ak_plan_config cfg = *constraint;
        cfg.tp = tp;
        search_pp_dp(&s, &cfg, devices);
    }
    if (progress) progress(1.0, progress_user);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    stats->seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    *count = s.count;
    return AK_OK;
}
