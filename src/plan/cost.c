/* Planner cost model: the time of one training iteration and the memory per device of
 * a fully specified parallel plan. Structure (docs/planner.md has every formula):
 *   per micro-batch and stage: GEMMs (roofline of each GEMM: the efficiency curve by
 *   size), the attention core, memory-bound elementwise work, tensor-parallel
 *   collectives; then the pipeline (1F1B or interleaved bubble, p2p), the data-parallel
 *   gradient reduction overlapped with the last backward, ZeRO traffic, offload, and the
 *   optimizer step. */
#include <math.h>
#include <string.h>

#include "core/check.h"
#include "plan/plan_internal.h"

#define FLASH_EFFICIENCY 0.6   /* fused attention vs the device's GEMM efficiency */
#define CAUSAL_FRACTION 0.5    /* a fused kernel skips the masked half of the scores */
#define OPTIMIZER_BYTES_PER_PARAM 28.0 /* Adam: read p,g,m,v, write p,m,v + bf16 copy */
/* The group's software terms (ak_plan_group): value_bytes (2 = bf16) scales the
 * bytes of values; kernel_overhead (4 us on a GPU: launch + tail of one kernel) is added
 * per kernel; elementwise_efficiency (0.8 on a GPU: streaming kernels measure 85-90 %,
 * unfused PyTorch/Megatron ops less) is the fraction of memory_bw elementwise work gets. */

/* Seconds of one micro-batch on one stage, by cause. */
typedef struct mb_time {
    double gemm, attention, elementwise, tp_comm;
} mb_time;

static double mb_total(const mb_time *t) { return t->gemm + t->attention + t->elementwise + t->tp_comm; }

static void mb_add(mb_time *acc, const mb_time *x, double k) {
    acc->gemm += k * x->gemm;
    acc->attention += k * x->attention;
    acc->elementwise += k * x->elementwise;
    acc->tp_comm += k * x->tp_comm;
}

/* Everything an evaluation needs, computed once. */
typedef struct eval_ctx {
    const ak_plan_model *m;
    const ak_plan_cluster *c;
    const ak_plan_options *o;
    const ak_plan_config *cfg;
    plan_params params;
    int64_t microbatches, devices;
    double tokens; /* per micro-batch: mbs x seq_len */
} eval_ctx;

/* ---- kernels ------------------------------------------------------------------------ */

/* A GEMM [M,K]x[K,N] in 2-byte types: compute- or memory-bound, whichever is slower,
 * plus a fixed launch cost. Small or skinny GEMMs fall off the device's best efficiency,
 * which is the size-dependent efficiency curve of the model. */
static double gemm_time(const ak_plan_group *g, double count, double M, double N, double K) {
    double compute = count * 2.0 * M * N * K / (g->peak_flops * g->gemm_efficiency);
    double memory = count * g->value_bytes * (M * K + K * N + M * N) / (g->memory_bw * g->elementwise_efficiency);
    return fmax(compute, memory) + g->kernel_overhead;
}

static double memory_time(const ak_plan_group *g, double bytes) {
    return bytes / (g->memory_bw * g->elementwise_efficiency) + g->kernel_overhead;
}

/* Ring all-reduce of `bytes` over n ranks on links of `bw` with `latency` per step. */
static double ring_allreduce(double bytes, int64_t n, double bw, double latency) {
    if (n <= 1) return 0.0;
    double k = (double)n;
    return 2.0 * (k - 1.0) / k * bytes / bw + 2.0 * (k - 1.0) * latency;
}

/* Tensor-parallel groups are the innermost ranks: inside one node when tp divides it. */
static double tp_allreduce(const ak_plan_group *g, int64_t tp, double bytes) {
    if (tp <= g->devices_per_node) return ring_allreduce(bytes, tp, g->intra_bw, g->intra_latency);
    return ring_allreduce(bytes, tp, g->inter_bw / (double)g->devices_per_node, g->inter_latency);
}

/* ---- one layer ------------------------------------------------------------------------ */

/* The attention core (QK^T, softmax, dropout, PV) of one layer, forward. */
static double attention_core_time(const eval_ctx *x, const ak_plan_group *g) {
    const ak_plan_model *m = x->m;
    double t = (double)x->cfg->tp, s = (double)m->seq_len, b = (double)x->cfg->mbs;
    double dh = (double)m->hidden / (double)m->heads, heads = (double)m->heads / t;
    if (x->o->flash_attention) {
        double flops = CAUSAL_FRACTION * 4.0 * b * s * s * (double)m->hidden / t;
        return flops / (g->peak_flops * g->gemm_efficiency * FLASH_EFFICIENCY) + g->kernel_overhead;
    }
    double bmm = gemm_time(g, b * heads, s, s, dh) + gemm_time(g, b * heads, s, dh, s);
    /* fused scale+mask+softmax (read, write) and dropout (read, write, mask) */
    double per_score = (m->dropout ? 9.0 : 4.0) * g->value_bytes / PLAN_BYTES_ACT;
    return bmm + memory_time(g, b * heads * s * s * per_score);
}

/* Forward of one transformer layer for one micro-batch on one device. */
static mb_time layer_forward(const eval_ctx *x, const ak_plan_group *g) {
    const ak_plan_model *m = x->m;
    double t = (double)x->cfg->tp, M = x->tokens, h = (double)m->hidden, f = (double)m->ffn_hidden;
    double dh = h / (double)m->heads, qkv = h + 2.0 * (double)m->kv_heads * dh;
    double k_active = m->experts > 1 ? (double)m->top_k : 1.0;
    mb_time r = {0};
    r.gemm = gemm_time(g, 1, M, qkv / t, h) + gemm_time(g, 1, M, h, h / t) +
             gemm_time(g, 1, M * k_active, f * (m->gated_ffn ? 2.0 : 1.0) / t, h) +
             gemm_time(g, 1, M * k_active, h, f / t);
    if (m->experts > 1) r.gemm += gemm_time(g, 1, M, (double)m->experts, h);
    r.attention = attention_core_time(x, g);
    /* bytes per token: two norms (read + write), two residual adds (read 2, write 1; +1
     * byte of dropout mask); TP-split: the FFN activation and rotary embedding */
    double replicated = 2.0 * 4.0 * h + 2.0 * (m->dropout ? 7.0 : 6.0) * h;
    double rotary = m->learned_positions ? 0.0 : 4.0 * (h + 0.5 * (qkv - h)); /* Q and K, read + write */
    double split = (m->gated_ffn ? 6.0 : 4.0) * f * k_active + rotary;
    double per_token = replicated / (x->cfg->sequence_parallel ? t : 1.0) + split / t;
    r.elementwise = memory_time(g, M * per_token * g->value_bytes / PLAN_BYTES_ACT);
    /* two all-reduces (or all-gather + reduce-scatter pairs with SP: the same bytes) */
    r.tp_comm = 2.0 * tp_allreduce(g, x->cfg->tp, M * h * g->value_bytes);
    return r;
}

/* Exposed part of TP communication when it overlaps the layer's GEMMs. */
static void apply_tp_overlap(const eval_ctx *x, mb_time *layer) {
    if (!x->o->tp_overlap || !x->cfg->sequence_parallel) return;
    layer->tp_comm = fmax(0.1 * layer->tp_comm, layer->tp_comm - layer->gemm);
}

/* ---- one stage ---------------------------------------------------------------------- */

typedef struct stage_spec {
    const ak_plan_group *g;
    int64_t layers, index; /* index: position in the pipeline */
    int first, last;
} stage_spec;

typedef struct stage_eval {
    mb_time fwd, bwd; /* one micro-batch; bwd includes recomputation */
    double params;    /* parameters held per device before ZeRO sharding */
    ak_plan_memory mem;
} stage_eval;

static void stage_compute(const eval_ctx *x, const stage_spec *sp, stage_eval *e) {
    const ak_plan_model *m = x->m;
    const ak_plan_group *g = sp->g;
    double t = (double)x->cfg->tp, M = x->tokens, h = (double)m->hidden, L = (double)sp->layers;
    mb_time layer = layer_forward(x, g);
    apply_tp_overlap(x, &layer);
    memset(&e->fwd, 0, sizeof(e->fwd));
    memset(&e->bwd, 0, sizeof(e->bwd));
    mb_add(&e->fwd, &layer, L);
    /* backward: two GEMMs per forward GEMM, twice the memory traffic, the same
     * collectives; a fused attention backward also recomputes the scores (2.5x) */
    mb_time back = {2.0 * layer.gemm, (x->o->flash_attention ? 2.5 : 2.0) * layer.attention,
                    2.0 * layer.elementwise, layer.tp_comm};
    mb_add(&e->bwd, &back, L);
    /* recomputation in backward */
    double full_layers = 0.0, selective_layers = 0.0;
    switch (x->cfg->recompute) {
    case AK_PLAN_RECOMPUTE_FULL: full_layers = L; break;
    case AK_PLAN_RECOMPUTE_SELECTIVE: selective_layers = L; break;
    case AK_PLAN_RECOMPUTE_HYBRID:
        full_layers = (double)x->cfg->recompute_layers;
        selective_layers = L - full_layers;
        break;
    default: break;
    }
    mb_add(&e->bwd, &layer, full_layers);
    if (!x->o->flash_attention) e->bwd.attention += selective_layers * layer.attention;
    if (sp->first) { /* embedding lookup / gradient scatter */
        e->fwd.elementwise += memory_time(g, M * h * 2.0 * g->value_bytes);
        e->bwd.elementwise += memory_time(g, M * h * 2.0 * g->value_bytes);
    }
    if (sp->last) { /* final norm, logits, fp32 cross-entropy */
        double V = (double)m->vocab;
        double logits = gemm_time(g, 1, M, V / t, h);
        double ce = memory_time(g, M * (V / t) * 10.0) + memory_time(g, M * h * 4.0);
        e->fwd.gemm += logits;
        e->fwd.elementwise += ce;
        e->bwd.gemm += 2.0 * logits;
        e->bwd.elementwise += ce;
    }
}

static double stage_params(const eval_ctx *x, const stage_spec *sp) {
    const plan_params *p = &x->params;
    double n = (double)sp->layers * p->layer;
    if (sp->first) n += p->embedding;
    if (sp->last) {
        /* a tied output layer on another stage keeps its own copy of the embedding */
        double output = x->m->tied_embeddings ? (sp->first ? 0.0 : p->embedding) : p->output;
        n += output + p->final_norm;
    }
    return n / (double)x->cfg->tp;
}

/* Micro-batches whose activations a stage holds at its peak: p - index in 1F1B; the
 * interleaved schedule adds (p-1)/v (Korthikanti et al. 2022, sec. 4.2.3). */
static double inflight_microbatches(const eval_ctx *x, const stage_spec *sp) {
    double p = (double)x->cfg->pp, v = (double)x->cfg->vp;
    double n = p - (double)sp->index + (v > 1.0 ? (p - 1.0) / v : 0.0);
    return fmin(n, (double)x->microbatches);
}

static double stage_activations(const eval_ctx *x, const stage_spec *sp) {
    const ak_plan_model *m = x->m;
    const ak_plan_config *cfg = x->cfg;
    plan_layer_act a;
    plan_layer_activations(m, cfg->mbs, cfg->tp, cfg->sequence_parallel, x->o->flash_attention, &a);
    double L = (double)sp->layers, kept = 0.0, transient = 0.0;
    switch (cfg->recompute) {
    case AK_PLAN_RECOMPUTE_ANY: /* not in an evaluated plan */
    case AK_PLAN_RECOMPUTE_NONE: kept = L * (a.attention_core + a.other); break;
    case AK_PLAN_RECOMPUTE_SELECTIVE: kept = L * a.other; transient = a.attention_core; break;
    case AK_PLAN_RECOMPUTE_FULL: kept = L * a.layer_input; transient = a.attention_core + a.other; break;
    case AK_PLAN_RECOMPUTE_HYBRID: {
        double k = (double)cfg->recompute_layers;
        kept = k * a.layer_input + (L - k) * a.other;
        transient = a.attention_core + a.other;
        break;
    }
    }
    double sbh = x->tokens * (double)m->hidden, t = (double)cfg->tp;
    if (sp->first && m->dropout) kept += sbh / (cfg->sequence_parallel ? t : 1.0); /* embedding dropout mask */
    double total = kept * inflight_microbatches(x, sp) + transient;
    /* the last stage's logits in bf16 and fp32 for one micro-batch */
    if (sp->last) total += x->tokens * (double)m->vocab / t * 6.0;
    return total;
}

static void stage_memory(const eval_ctx *x, const stage_spec *sp, stage_eval *e) {
    const ak_plan_config *cfg = x->cfg;
    const ak_plan_group *g = sp->g;
    double w, gr, opt, host;
    plan_zero_bytes_per_param(cfg->dp, cfg->zero_stage, cfg->offload != AK_PLAN_OFFLOAD_NONE, &w, &gr, &opt, &host);
    /* the table is of bf16 values and Adam with fp32 master weights: the group's types */
    double value_scale = g->value_bytes / PLAN_BYTES_PARAM;
    w *= value_scale;
    gr *= value_scale;
    opt *= g->optimizer_bytes / PLAN_BYTES_OPTIM;
    e->params = stage_params(x, sp);
    ak_plan_memory *mem = &e->mem;
    memset(mem, 0, sizeof(*mem));
    mem->weights = w * e->params;
    mem->gradients = gr * e->params;
    mem->optimizer = opt * e->params;
    mem->buffers = g->reserved_bytes;
    double layer_params = x->params.layer / (double)cfg->tp;
    if (cfg->zero_stage >= 3) /* gathered weights of the current and the prefetched layer */
        mem->buffers += 2.0 * layer_params * g->value_bytes;
    if (cfg->offload == AK_PLAN_OFFLOAD_PARAMS) { /* parameter shards live on the host */
        host += w;
        mem->weights = 0.0;
    }
    mem->activations = stage_activations(x, sp) * value_scale; /* Korthikanti's bytes: bf16 */
    mem->total = mem->weights + mem->gradients + mem->optimizer + mem->activations + mem->buffers;
    mem->host_bytes_per_node = host * e->params * (double)sp->g->devices_per_node;
}

/* ---- data parallelism, ZeRO, offload, optimizer -------------------------------------- */

/* Gradient all-reduce over the dp replicas of a device (hierarchical: ranks of the same
 * node first over NVLink, then every device's shard across nodes at its share of the
 * node's network). fraction = 0.5 gives a reduce-scatter or an all-gather alone. */
static double dp_collective(const eval_ctx *x, const ak_plan_group *g, double bytes, double fraction) {
    int64_t dp = x->cfg->dp, tp = x->cfg->tp, dpn = g->devices_per_node;
    int64_t local = tp < dpn ? dpn / tp : 1;
    if (local > dp) local = dp;
    int64_t nodes = dp / local;
    double intra = ring_allreduce(bytes, local, g->intra_bw, g->intra_latency);
    double inter = ring_allreduce(bytes / (double)local, nodes, g->inter_bw / (double)dpn, g->inter_latency);
    return fraction * (intra + inter);
}

typedef struct tail_costs {
    double dp, zero, offload, optimizer;
} tail_costs;

static void tail_for_stage(const eval_ctx *x, const stage_spec *sp, const stage_eval *e, tail_costs *out) {
    const ak_plan_config *cfg = x->cfg;
    const ak_plan_group *g = sp->g;
    double m = (double)x->microbatches, P = e->params;
    double grad_bytes = P * g->value_bytes, fwd = mb_total(&e->fwd), bwd = mb_total(&e->bwd);
    double rs = dp_collective(x, g, grad_bytes, 0.5), ag = dp_collective(x, g, P * g->value_bytes, 0.5);
    memset(out, 0, sizeof(*out));
    switch (cfg->zero_stage) {
    case 0: out->dp = fmax(0.0, 2.0 * rs - bwd); break; /* all-reduce behind the last backward */
    case 1: /* reduce-scatter behind the last backward, all-gather behind the next forward */
        out->dp = fmax(0.0, rs - bwd);
        out->zero = fmax(0.0, ag - fwd);
        break;
    case 2: /* gradients reduce-scattered every micro-batch */
        out->dp = fmax(0.0, rs - bwd);
        out->zero = (m - 1.0) * fmax(0.0, rs - bwd) + fmax(0.0, ag - fwd);
        break;
    default: /* weights gathered for forward and backward of every micro-batch */
        out->dp = fmax(0.0, rs - bwd);
        out->zero = m * (fmax(0.0, ag - fwd) + fmax(0.0, ag + rs - bwd)) - fmax(0.0, rs - bwd);
        break;
    }
    double owned = cfg->zero_stage >= 1 ? P / (double)cfg->dp : P; /* optimizer shard */
    if (cfg->offload == AK_PLAN_OFFLOAD_NONE) {
        out->optimizer = memory_time(g, owned * OPTIMIZER_BYTES_PER_PARAM);
        return;
    }
    /* gradients down and weights up over PCIe; the node's CPUs update all its devices' shards */
    out->offload = 2.0 * owned * g->value_bytes / g->pcie_bw;
    out->optimizer = owned * (double)g->devices_per_node / g->host_optimizer_rate;
    if (cfg->offload == AK_PLAN_OFFLOAD_PARAMS) /* shards fetched for forward and backward */
        out->offload += m * fmax(0.0, 2.0 * owned * g->value_bytes / g->pcie_bw - fwd - bwd);
}

/* ---- pipeline ---------------------------------------------------------------------- */

/* Point-to-point activation (or gradient) transfer between neighbouring stages; with
 * TP the tensor is scattered over the tp ranks and gathered after (Narayanan 2021). */
static double p2p_time(const eval_ctx *x, const ak_plan_group *g) {
    double bytes = x->tokens * (double)x->m->hidden * g->value_bytes / (double)x->cfg->tp;
    int cross_node = x->cfg->tp * x->cfg->dp >= g->devices_per_node || x->c->ngroups > 1;
    if (cross_node) return g->inter_latency + bytes / (g->inter_bw / (double)g->devices_per_node);
    return g->intra_latency + bytes / g->intra_bw;
}

/* Enumerates the stages: group by group, each group's stages with its layer count. */
static int build_stages(const eval_ctx *x, stage_spec *stages, int64_t cap) {
    int64_t n = 0;
    for (int gi = 0; gi < x->c->ngroups; gi++)
        for (int64_t k = 0; k < x->cfg->group_stages[gi] && n < cap; k++, n++)
            stages[n] = (stage_spec){&x->c->groups[gi], x->cfg->group_stage_layers[gi], n, 0, 0};
    stages[0].first = 1;
    stages[n - 1].last = 1;
    return (int)n;
}

/* Distinct stage shapes to evaluate: per group its first, a middle and its last stage. */
static int stage_is_representative(const stage_spec *stages, int i, int n) {
    if (i == 0 || i == n - 1) return 1;
    int group_start = stages[i - 1].g != stages[i].g;
    int group_end = stages[i + 1].g != stages[i].g;
    int second = stages[i - 1].first; /* the first plain stage after stage 0 */
    return group_start || group_end || second;
}

typedef struct pipeline_sum {
    stage_eval slowest; /* the stage with the longest micro-batch */
    double sum_stage_time, max_stage_time, p2p;
    tail_costs tail;    /* the worst tail over stages */
    ak_plan_memory mem; /* the most loaded device */
    int fits;
} pipeline_sum;

static void tail_max(tail_costs *acc, const tail_costs *t) {
    acc->dp = fmax(acc->dp, t->dp);
    acc->zero = fmax(acc->zero, t->zero);
    acc->offload = fmax(acc->offload, t->offload);
    acc->optimizer = fmax(acc->optimizer, t->optimizer);
}

static void account_stage(const eval_ctx *x, const stage_spec *sp, const stage_eval *e, double weight,
                          pipeline_sum *s) {
    double stage_time = mb_total(&e->fwd) + mb_total(&e->bwd);
    s->sum_stage_time += weight * stage_time;
    if (stage_time > s->max_stage_time) {
        s->max_stage_time = stage_time;
        s->slowest = *e;
    }
    tail_costs tail;
    tail_for_stage(x, sp, e, &tail);
    tail_max(&s->tail, &tail);
    if (e->mem.total > sp->g->memory_bytes || e->mem.host_bytes_per_node > sp->g->host_memory_bytes)
        s->fits = 0;
    if (e->mem.total > s->mem.total) s->mem = e->mem;
}

static void run_pipeline(const eval_ctx *x, pipeline_sum *s) {
    enum { MAX_STAGES = 4096 };
    static _Thread_local stage_spec stages[MAX_STAGES];
    int n = build_stages(x, stages, MAX_STAGES);
    memset(s, 0, sizeof(*s));
    s->fits = 1;
    stage_eval e = {0};
    for (int i = 0; i < n; i++) {
        /* stages of the same shape as the previously evaluated one cost the same */
        if (stage_is_representative(stages, i, n)) {
            stage_compute(x, &stages[i], &e);
            stage_memory(x, &stages[i], &e);
            account_stage(x, &stages[i], &e, 1.0, s);
        } else {
            s->sum_stage_time += mb_total(&e.fwd) + mb_total(&e.bwd);
        }
    }
    if (n > 1) {
        double v = (double)x->cfg->vp, m = (double)x->microbatches;
        s->p2p = 2.0 * (v * m + (double)(n - 1)) * p2p_time(x, stages[0].g);
    }
}

/* ---- evaluation ---------------------------------------------------------------------- */

static void fill_result(const eval_ctx *x, const pipeline_sum *s, ak_plan_result *r) {
    double m = (double)x->microbatches, v = (double)x->cfg->vp;
    ak_plan_time *t = &r->time;
    memset(t, 0, sizeof(*t));
    mb_time work = {0};
    mb_add(&work, &s->slowest.fwd, m);
    mb_add(&work, &s->slowest.bwd, m);
    t->gemm = work.gemm;
    t->attention = work.attention;
    t->elementwise = work.elementwise;
    t->tp_comm = work.tp_comm;
    t->pp_bubble = (s->sum_stage_time - s->max_stage_time) / v;
    t->pp_p2p = s->p2p;
    t->dp_comm = s->tail.dp;
    t->zero_comm = s->tail.zero;
    t->offload = s->tail.offload;
    t->optimizer = s->tail.optimizer;
    t->total = mb_total(&work) + t->pp_bubble + t->pp_p2p + t->dp_comm + t->zero_comm + t->offload + t->optimizer;
    r->time_per_iter_s = t->total;
    r->memory = s->mem;
    r->fits = s->fits;
    r->microbatches = x->microbatches;
}

static void fill_rates(const eval_ctx *x, ak_plan_result *r) {
    const ak_plan_config *cfg = x->cfg;
    double seqs = (double)x->o->global_batch, peak = 0.0;
    double fraction = 0.0;
    if (cfg->recompute == AK_PLAN_RECOMPUTE_HYBRID)
        fraction = (double)cfg->recompute_layers / (double)cfg->group_stage_layers[0];
    plan_iteration_flops(x->m, seqs, cfg->recompute, fraction, x->o->flash_attention, &r->model_flops,
                         &r->hardware_flops);
    for (int i = 0; i < x->c->ngroups; i++)
        peak += x->c->groups[i].peak_flops * (double)(x->c->groups[i].nodes * x->c->groups[i].devices_per_node);
    double T = r->time_per_iter_s;
    r->tokens_per_s = seqs * (double)x->m->seq_len / T;
    r->tflops_per_device = r->hardware_flops / T / (double)x->devices / 1e12;
    r->mfu = r->model_flops / (T * peak);
    r->hfu = r->hardware_flops / (T * peak);
}

/* Seconds of one layer (forward + backward with recomputation) for one micro-batch on
 * a device of group g: the speed that balances layers over mixed device types. */
static double layer_seconds(const eval_ctx *x, const ak_plan_group *g) {
    stage_spec one = {g, 1, 1, 0, 0};
    stage_eval e;
    stage_compute(x, &one, &e);
    return mb_total(&e.fwd) + mb_total(&e.bwd);
}

typedef struct balance {
    int ngroups;
    int64_t stages[AK_PLAN_MAX_GROUPS], layers[AK_PLAN_MAX_GROUPS], best[AK_PLAN_MAX_GROUPS];
    double seconds[AK_PLAN_MAX_GROUPS], best_time;
} balance;

/* Tries every split of `left` layers over groups gi.. (each stage >= 1 layer), keeping
 * the one whose slowest stage is fastest. */
static void balance_from(balance *b, int gi, int64_t left, double worst) {
    if (worst >= b->best_time) return;
    if (gi == b->ngroups - 1) {
        if (left % b->stages[gi] != 0 || left / b->stages[gi] < 1) return;
        b->layers[gi] = left / b->stages[gi];
        worst = fmax(worst, (double)b->layers[gi] * b->seconds[gi]);
        if (worst < b->best_time) {
            b->best_time = worst;
            memcpy(b->best, b->layers, sizeof(b->best));
        }
        return;
    }
    for (int64_t l = 1; l * b->stages[gi] <= left - 1; l++) {
        b->layers[gi] = l;
        balance_from(b, gi + 1, left - l * b->stages[gi], fmax(worst, (double)l * b->seconds[gi]));
    }
}

static int balance_layers(const eval_ctx *x, ak_plan_config *cfg) {
    balance b = {x->c->ngroups, {0}, {0}, {0}, {0}, INFINITY};
    for (int i = 0; i < b.ngroups; i++) {
        b.stages[i] = cfg->group_stages[i];
        b.seconds[i] = layer_seconds(x, &x->c->groups[i]);
    }
    balance_from(&b, 0, x->m->layers, 0.0);
    if (!isfinite(b.best_time)) return 0;
    memcpy(cfg->group_stage_layers, b.best, sizeof(b.best));
    return 1;
}

void plan_evaluate_unchecked(const ak_plan_model *m, const ak_plan_cluster *c, const ak_plan_options *o,
                             const ak_plan_config *config, ak_plan_result *result) {
    ak_plan_config cfg = *config;
    eval_ctx x = {.m = m, .c = c, .o = o, .cfg = &cfg, .devices = plan_cluster_devices(c)};
    plan_count_params(m, &x.params);
    x.microbatches = o->global_batch / (cfg.dp * cfg.mbs);
    x.tokens = (double)cfg.mbs * (double)m->seq_len;
    memset(result, 0, sizeof(*result));
    if (c->ngroups > 1 && cfg.group_stage_layers[0] == 0 && !balance_layers(&x, &cfg)) {
        result->config = cfg;
        result->time_per_iter_s = INFINITY; /* no split gives every stage a layer */
        return;
    }
    pipeline_sum s;
    run_pipeline(&x, &s);
    result->config = cfg;
    fill_result(&x, &s, result);
    fill_rates(&x, result);
}

ak_status ak_plan_evaluate(const ak_plan_model *model, const ak_plan_cluster *cluster,
                           const ak_plan_options *options, const ak_plan_config *config,
                           ak_plan_result *result) {
    if (!options || !config || !result) return AK_FAIL(AK_ERR_INVALID_ARG, "ak_plan_evaluate: NULL argument");
    AK_CHECK(ak_plan_model_check(model));
    AK_CHECK(ak_plan_cluster_check(cluster));
    ak_plan_config cfg = *config;
    AK_CHECK(plan_check_config(model, cluster, options, &cfg));
    plan_evaluate_unchecked(model, cluster, options, &cfg, result);
    if (!isfinite(result->time_per_iter_s))
        return AK_FAIL(AK_ERR_INVALID_ARG, "plan not possible: the %lld layers cannot be split so that "
                       "every pipeline stage gets at least one", (long long)model->layers);
    return AK_OK;
}
