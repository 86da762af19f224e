/* Planner configuration rules: what makes a parallel plan possible (divisibility, ranges,
 * framework restrictions), shared by forced plans (with a message) and the search. */
#include <stdio.h>
#include <string.h>

#include "core/check.h"
#include "plan/plan_internal.h"

#define MAX_STAGES 4096

/* Fails the rule: writes the message when the caller wants one. */
#define RULE(cond, ...)                                                                  \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            if (msg) snprintf(msg, cap, __VA_ARGS__);                                    \
            return 0;                                                                    \
        }                                                                                \
    } while (0)

static int ranges_ok(const ak_plan_config *cfg, const ak_plan_options *o, char *msg, size_t cap) {
    RULE(o->global_batch >= 1, "global batch must be >= 1 (got %lld)", (long long)o->global_batch);
    RULE(cfg->tp >= 1 && cfg->pp >= 1 && cfg->dp >= 1 && cfg->vp >= 1 && cfg->mbs >= 1,
         "tp, pp, dp, vp and mbs must all be >= 1 (got %lld, %lld, %lld, %lld, %lld)", (long long)cfg->tp,
         (long long)cfg->pp, (long long)cfg->dp, (long long)cfg->vp, (long long)cfg->mbs);
    RULE(cfg->pp <= MAX_STAGES, "pp must be <= %d", MAX_STAGES);
    RULE(cfg->zero_stage >= 0 && cfg->zero_stage <= 3, "ZeRO stage must be 0..3 (got %d)", cfg->zero_stage);
    RULE(cfg->recompute >= AK_PLAN_RECOMPUTE_NONE && cfg->recompute <= AK_PLAN_RECOMPUTE_HYBRID, "unknown recompute mode");
    RULE(cfg->offload >= AK_PLAN_OFFLOAD_NONE && cfg->offload <= AK_PLAN_OFFLOAD_PARAMS, "unknown offload mode");
    return 1;
}

static int model_split_ok(const ak_plan_model *m, const ak_plan_config *cfg, char *msg, size_t cap) {
    long long t = cfg->tp;
    RULE(m->heads % t == 0, "tp=%lld must divide the %lld attention heads", t, (long long)m->heads);
    RULE(m->kv_heads % t == 0 || t % m->kv_heads == 0,
         "tp=%lld and the %lld KV heads: one must divide the other", t, (long long)m->kv_heads);
    RULE(m->ffn_hidden % t == 0, "tp=%lld must divide ffn_hidden %lld", t, (long long)m->ffn_hidden);
    RULE(cfg->pp <= m->layers, "pp=%lld exceeds the %lld layers", (long long)cfg->pp, (long long)m->layers);
    RULE(!cfg->sequence_parallel || cfg->tp > 1, "sequence parallelism needs tp > 1");
    return 1;
}

static int batch_ok(const ak_plan_options *o, const ak_plan_config *cfg, char *msg, size_t cap) {
    long long per_step = (long long)(cfg->dp * cfg->mbs);
    RULE(o->global_batch % per_step == 0, "global batch %lld is not a multiple of dp x mbs = %lld",
         (long long)o->global_batch, per_step);
    long long micro = o->global_batch / per_step;
    RULE(cfg->vp == 1 || (cfg->pp > 1 && micro % cfg->pp == 0),
         "interleaving (vp=%lld) needs pp > 1 and micro-batches (%lld) divisible by pp=%lld",
         (long long)cfg->vp, micro, (long long)cfg->pp);
    return 1;
}

/* DeepSpeed's restrictions: ZeRO-2/3 shard gradients every micro-batch, which pipeline
 * parallelism's accumulation cannot use; offload builds on ZeRO partitioning. */
static int memory_modes_ok(const ak_plan_config *cfg, char *msg, size_t cap) {
    RULE(cfg->zero_stage < 2 || cfg->pp == 1, "ZeRO stage %d needs pp=1 (gradient sharding per micro-batch)", cfg->zero_stage);
    RULE(cfg->offload != AK_PLAN_OFFLOAD_OPTIMIZER || cfg->zero_stage >= 1, "optimizer offload needs ZeRO stage >= 1");
    RULE(cfg->offload != AK_PLAN_OFFLOAD_PARAMS || cfg->zero_stage == 3, "parameter offload needs ZeRO stage 3");
    return 1;
}

/* Stage counts per device group; on one device type also the layers per stage. */
static int placement_ok(const ak_plan_model *m, const ak_plan_cluster *c, ak_plan_config *cfg,
                        char *msg, size_t cap) {
    long long per_stage = (long long)(cfg->tp * cfg->dp), stages = 0;
    for (int i = 0; i < c->ngroups; i++) {
        const ak_plan_group *g = &c->groups[i];
        long long n = (long long)(g->nodes * g->devices_per_node);
        RULE(g->devices_per_node % cfg->tp == 0, "tp=%lld must divide the %lld devices per node of %s",
             (long long)cfg->tp, (long long)g->devices_per_node, g->device);
        RULE(n % per_stage == 0, "tp x dp = %lld must divide the %lld devices of %s", per_stage, n, g->device);
        cfg->group_stages[i] = n / per_stage;
        stages += n / per_stage;
    }
    for (int i = c->ngroups; i < AK_PLAN_MAX_GROUPS; i++) cfg->group_stages[i] = cfg->group_stage_layers[i] = 0;
    RULE(stages == cfg->pp, "tp x pp x dp = %lld x %lld x %lld must equal the %lld devices",
         (long long)cfg->tp, (long long)cfg->pp, (long long)cfg->dp, (long long)plan_cluster_devices(c));
    if (c->ngroups == 1) {
        RULE(m->layers % (cfg->pp * cfg->vp) == 0, "pp x vp = %lld must divide the %lld layers",
             (long long)(cfg->pp * cfg->vp), (long long)m->layers);
        cfg->group_stage_layers[0] = m->layers / cfg->pp;
    } else {
        RULE(cfg->vp == 1, "interleaving is not modelled on mixed clusters (vp must be 1)");
    }
    return 1;
}

static int recompute_ok(const ak_plan_model *m, const ak_plan_cluster *c, const ak_plan_config *cfg,
                        char *msg, size_t cap) {
    if (cfg->recompute != AK_PLAN_RECOMPUTE_HYBRID) return 1;
    RULE(c->ngroups == 1, "hybrid recompute is not modelled on mixed clusters (stages differ in layers)");
    int64_t fewest = cfg->group_stage_layers[0];
    RULE(cfg->recompute_layers >= 1 && cfg->recompute_layers < fewest,
         "hybrid recompute: k=%lld must be 1..%lld (layers per stage - 1; k = all is 'full')",
         (long long)cfg->recompute_layers, (long long)fewest - 1);
    return 1;
}

static int config_rules(const ak_plan_model *m, const ak_plan_cluster *c, const ak_plan_options *o,
                        ak_plan_config *cfg, char *msg, size_t cap) {
    return ranges_ok(cfg, o, msg, cap) && model_split_ok(m, cfg, msg, cap) && batch_ok(o, cfg, msg, cap) &&
           memory_modes_ok(cfg, msg, cap) && placement_ok(m, c, cfg, msg, cap) &&
           recompute_ok(m, c, cfg, msg, cap);
}

int plan_config_valid(const ak_plan_model *m, const ak_plan_cluster *c, const ak_plan_options *o,
                      ak_plan_config *cfg) {
    return config_rules(m, c, o, cfg, NULL, 0);
}

ak_status plan_check_config(const ak_plan_model *m, const ak_plan_cluster *c, const ak_plan_options *o,
                            ak_plan_config *cfg) {
    char msg[256];
    if (!config_rules(m, c, o, cfg, msg, sizeof(msg)))
        return AK_FAIL(AK_ERR_INVALID_ARG, "plan not possible: %s", msg);
    return AK_OK;
}

void ak_plan_options_default(ak_plan_options *options) {
    if (!options) return;
    memset(options, 0, sizeof(*options));
    options->global_batch = 0;
    options->flash_attention = 1;
    options->top = 10;
}

void ak_plan_config_free_all(ak_plan_config *config) {
    if (!config) return;
    memset(config, 0, sizeof(*config));
    config->tp = config->pp = config->dp = config->vp = config->mbs = -1;
    config->sequence_parallel = -1;
    config->recompute = AK_PLAN_RECOMPUTE_ANY;
    config->recompute_layers = -1;
    config->zero_stage = -1;
    config->offload = AK_PLAN_OFFLOAD_ANY;
}
