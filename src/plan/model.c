/* Planner model arithmetic: parameter counts, FLOPs, activation memory (Korthikanti et
 * al. 2022) and ZeRO model states (Rajbhandari et al. 2020). docs/planner.md derives
 * each formula. */
#include <math.h>
#include <string.h>

#include "core/check.h"
#include "plan/plan_internal.h"

static double head_dim(const ak_plan_model *m) { return (double)m->hidden / (double)m->heads; }

/* Width of the fused QKV projection's output: all query heads plus the KV heads. */
static double qkv_width(const ak_plan_model *m) {
    return (double)m->hidden + 2.0 * (double)m->kv_heads * head_dim(m);
}

static double ffn_matrices(const ak_plan_model *m) { return m->gated_ffn ? 3.0 : 2.0; }

static double experts(const ak_plan_model *m) { return m->experts > 1 ? (double)m->experts : 1.0; }

static double active_experts(const ak_plan_model *m) {
    return m->experts > 1 ? (double)m->top_k : 1.0;
}

/* One expert's FFN with its biases (the gate and up projections have one each). */
static double ffn_expert_params(const ak_plan_model *m) {
    double h = (double)m->hidden, f = (double)m->ffn_hidden;
    double bias = m->linear_bias ? (m->gated_ffn ? 2.0 * f : f) + h : 0.0;
    return ffn_matrices(m) * h * f + bias;
}

void plan_count_params(const ak_plan_model *m, plan_params *out) {
    double h = (double)m->hidden, norm = m->layernorm ? 2.0 * h : h;
    double attention = h * qkv_width(m) + h * h + (m->linear_bias ? qkv_width(m) + h : 0.0);
    double router = m->experts > 1 ? h * (double)m->experts : 0.0;
    double shared = attention + router + 2.0 * norm;
    memset(out, 0, sizeof(*out));
    out->layer = shared + experts(m) * ffn_expert_params(m);
    out->layer_active = shared + active_experts(m) * ffn_expert_params(m);
    out->embedding = (double)m->vocab * h + (m->learned_positions ? (double)m->seq_len * h : 0.0);
    out->output = m->tied_embeddings ? 0.0 : (double)m->vocab * h;
    out->final_norm = norm;
    out->total = (double)m->layers * out->layer + out->embedding + out->output + out->final_norm;
}

void plan_forward_flops(const ak_plan_model *m, plan_layer_flops *out) {
    double h = (double)m->hidden, s = (double)m->seq_len, f = (double)m->ffn_hidden;
    double router = m->experts > 1 ? h * (double)m->experts : 0.0;
    double weights = h * qkv_width(m) + h * h + active_experts(m) * ffn_matrices(m) * h * f + router;
    out->gemm = 2.0 * s * weights;
    /* QK^T and probabilities x V over all heads, the full s x s square (the convention
     * of Megatron-LM and PaLM's MFU even though the causal half is masked) */
    out->attention = 4.0 * s * s * h;
    out->logits = 2.0 * s * h * (double)m->vocab;
}

void plan_layer_activations(const ak_plan_model *m, int64_t mbs, int64_t tp, int sp, int flash,
                            plan_layer_act *out) {
    double s = (double)m->seq_len, b = (double)mbs, h = (double)m->hidden, t = (double)tp;
    double a = (double)m->heads, f = (double)m->ffn_hidden, kv = (double)m->kv_heads * head_dim(m);
    double sbh = s * b * h;
    /* kept on every TP rank unless sequence parallel splits them: the two norm inputs,
     * the QKV and FC1 inputs (2 bytes each) and the two dropout masks (1 byte each) */
    double replicated = 8.0 * sbh + (m->dropout ? 2.0 * sbh : 0.0);
    /* split by TP: Q, K, V, the projection input, and the FFN's inner tensors (the
     * nonlinearity's inputs and FC2's input; a gated FFN keeps gate, up, act(gate), product) */
    double ffn_inner = (m->gated_ffn ? 8.0 : 4.0) * s * b * f * active_experts(m);
    double parallel = 2.0 * sbh + 4.0 * s * b * kv + 2.0 * sbh + ffn_inner;
    out->other = replicated / (sp ? t : 1.0) + parallel / t;
    /* the attention core: softmax output (2 bytes), its dropout mask (1) and dropout
     * output (2) per score; a fused (flash) kernel keeps only a log-sum-exp per row */
    out->attention_core = flash ? 4.0 * a * s * b / t
                                : (m->dropout ? 5.0 : 2.0) * a * s * s * b / t;
    out->layer_input = 2.0 * sbh / (sp ? t : 1.0);
}

void plan_zero_bytes_per_param(int64_t dp, int zero_stage, int offload_optimizer, double *weights,
                               double *grads, double *optim, double *host) {
    double shard = 1.0 / (double)dp;
    *weights = PLAN_BYTES_PARAM * (zero_stage >= 3 ? shard : 1.0);
    *grads = PLAN_BYTES_GRAD * (zero_stage >= 2 ? shard : 1.0);
    *optim = PLAN_BYTES_OPTIM * (zero_stage >= 1 ? shard : 1.0);
    *host = 0.0;
    if (offload_optimizer) {
        *host = *optim;
        *optim = 0.0;
    }
}

/* ---- public wrappers ----------------------------------------------------------------- */

ak_status ak_plan_param_count(const ak_plan_model *model, double *params) {
    if (!params) return AK_FAIL(AK_ERR_INVALID_ARG, "ak_plan_param_count: params is NULL");
    AK_CHECK(ak_plan_model_check(model));
    plan_params p;
    plan_count_params(model, &p);
    *params = p.total;
    return AK_OK;
}

/* Extra forward work recomputed in backward, per sequence and layer. */
static double recompute_flops(const plan_layer_flops *f, ak_plan_recompute r, double fraction,
                              int flash) {
    double selective = flash ? 0.0 : f->attention;
    double full = f->gemm + f->attention;
    switch (r) {
    case AK_PLAN_RECOMPUTE_SELECTIVE: return selective;
    case AK_PLAN_RECOMPUTE_FULL: return full;
    case AK_PLAN_RECOMPUTE_HYBRID: return fraction * full + (1.0 - fraction) * selective;
    default: return 0.0;
    }
}

void plan_iteration_flops(const ak_plan_model *model, double sequences, ak_plan_recompute recompute,
                          double recompute_fraction, int flash_attention, double *model_flops,
                          double *hardware_flops) {
    plan_layer_flops f;
    plan_forward_flops(model, &f);
    double layers = (double)model->layers;
    double forward = layers * (f.gemm + f.attention) + f.logits;
    *model_flops = 3.0 * forward * sequences;
    /* a fused attention backward recomputes QK^T (half the attention core) */
    double flash_extra = flash_attention ? 0.5 * f.attention : 0.0;
    double extra = recompute_flops(&f, recompute, recompute_fraction, flash_attention) + flash_extra;
    *hardware_flops = *model_flops + layers * extra * sequences;
}

ak_status ak_plan_flops(const ak_plan_model *model, double sequences, ak_plan_recompute recompute,
                        double recompute_fraction, int flash_attention, double *model_flops,
                        double *hardware_flops) {
    if (!model_flops || !hardware_flops)
        return AK_FAIL(AK_ERR_INVALID_ARG, "ak_plan_flops: output pointer is NULL");
    if (!(sequences > 0.0))
        return AK_FAIL(AK_ERR_INVALID_ARG, "ak_plan_flops: sequences must be positive");
    if (!(recompute_fraction >= 0.0 && recompute_fraction <= 1.0))
        return AK_FAIL(AK_ERR_INVALID_ARG, "ak_plan_flops: recompute fraction must be in [0, 1]");
    AK_CHECK(ak_plan_model_check(model));
    plan_iteration_flops(model, sequences, recompute, recompute_fraction, flash_attention, model_flops,
                         hardware_flops);
    return AK_OK;
}

ak_status ak_plan_layer_activation_bytes(const ak_plan_model *model, int64_t mbs, int64_t tp,
                                         int sequence_parallel, ak_plan_recompute recompute,
                                         int flash_attention, double *bytes) {
    if (!bytes) return AK_FAIL(AK_ERR_INVALID_ARG, "ak_plan_layer_activation_bytes: bytes is NULL");
    if (mbs < 1 || tp < 1)
        return AK_FAIL(AK_ERR_INVALID_ARG, "micro-batch size and tp must be >= 1 (got %lld, %lld)",
                       (long long)mbs, (long long)tp);
    AK_CHECK(ak_plan_model_check(model));
    plan_layer_act act;
    plan_layer_activations(model, mbs, tp, sequence_parallel, flash_attention, &act);
    switch (recompute) {
    case AK_PLAN_RECOMPUTE_NONE: *bytes = act.attention_core + act.other; break;
    case AK_PLAN_RECOMPUTE_SELECTIVE: *bytes = act.other; break;
    case AK_PLAN_RECOMPUTE_FULL: *bytes = act.layer_input; break;
    default:
        return AK_FAIL(AK_ERR_INVALID_ARG,
                       "per-layer activations: recompute must be none, selective or full "
                       "(hybrid mixes full and selective layers)");
    }
    return AK_OK;
}

ak_status ak_plan_zero_model_state_bytes(double params, int64_t dp, int zero_stage, double *bytes) {
    if (!bytes) return AK_FAIL(AK_ERR_INVALID_ARG, "ak_plan_zero_model_state_bytes: bytes is NULL");
    if (!(params > 0.0) || dp < 1)
        return AK_FAIL(AK_ERR_INVALID_ARG, "ZeRO model states: params must be > 0 and dp >= 1");
    if (zero_stage < 0 || zero_stage > 3)
        return AK_FAIL(AK_ERR_INVALID_ARG, "ZeRO stage must be 0..3 (got %d)", zero_stage);
    double w, g, o, host;
    plan_zero_bytes_per_param(dp, zero_stage, 0, &w, &g, &o, &host);
    *bytes = params * (w + g + o);
    return AK_OK;
}

const char *plan_recompute_name(ak_plan_recompute r) {
    static const char *names[] = {"none", "selective", "full", "hybrid"};
    return (unsigned)r < 4 ? names[r] : "?";
}

const char *plan_offload_name(ak_plan_offload o) {
    static const char *names[] = {"none", "optimizer", "params"};
    return (unsigned)o < 3 ? names[o] : "?";
}

ak_status ak_plan_mfu(const ak_plan_model *model, const ak_plan_cluster *cluster, int64_t devices,
                      double tokens_per_s, ak_plan_recompute recompute, int flash_attention, double *mfu,
                      double *hfu) {
    if (!mfu || !hfu) return AK_FAIL(AK_ERR_INVALID_ARG, "ak_plan_mfu: output pointer is NULL");
    AK_CHECK(ak_plan_model_check(model));
    AK_CHECK(ak_plan_cluster_check(cluster));
    if (!(tokens_per_s > 0.0) || !isfinite(tokens_per_s))
        return AK_FAIL(AK_ERR_INVALID_ARG, "MFU: tokens per second must be positive (got %g)", tokens_per_s);
    if (recompute == AK_PLAN_RECOMPUTE_HYBRID || (unsigned)recompute > AK_PLAN_RECOMPUTE_HYBRID)
        return AK_FAIL(AK_ERR_INVALID_ARG, "MFU: recompute must be none, selective or full");
    /* one device type: any count of it; a mixed cluster: all of its devices */
    double peak = 0.0;
    if (cluster->ngroups == 1) {
        if (devices < 1) return AK_FAIL(AK_ERR_INVALID_ARG, "MFU: devices must be >= 1 (got %lld)", (long long)devices);
        peak = (double)devices * cluster->groups[0].peak_flops;
    } else {
        if (devices != plan_cluster_devices(cluster))
            return AK_FAIL(AK_ERR_INVALID_ARG, "MFU on the mixed cluster %s counts all its %lld devices (got %lld)",
                           cluster->name, (long long)plan_cluster_devices(cluster), (long long)devices);
        for (int i = 0; i < cluster->ngroups; i++)
            peak += cluster->groups[i].peak_flops * (double)(cluster->groups[i].nodes * cluster->groups[i].devices_per_node);
    }
    double model_flops, hardware_flops;
    AK_CHECK(ak_plan_flops(model, 1.0, recompute, 0.0, flash_attention, &model_flops, &hardware_flops));
    double per_token = 1.0 / (double)model->seq_len;
    *mfu = tokens_per_s * model_flops * per_token / peak;
    *hfu = tokens_per_s * hardware_flops * per_token / peak;
    return AK_OK;
}
