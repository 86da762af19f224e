/* Planner internals shared by the description, cost and search files. */
#ifndef AK_PLAN_INTERNAL_H
#define AK_PLAN_INTERNAL_H

#include "accelkit/plan.h"

/* bf16/fp16 training: parameters and gradients in 2 bytes; Adam keeps fp32 master
 * weights, momentum and variance (12 bytes): the ZeRO paper's K = 12. */
#define PLAN_BYTES_ACT 2.0
#define PLAN_BYTES_PARAM 2.0
#define PLAN_BYTES_GRAD 2.0
#define PLAN_BYTES_OPTIM 12.0
/* CUDA context, cuBLAS and NCCL workspaces, allocator slack: never available to training */
#define PLAN_RESERVED_BYTES (2.0 * 1024 * 1024 * 1024)

/* Parameters of one transformer layer and of the embedding / output / final norm. */
typedef struct plan_params {
    double layer;       /* one transformer layer (all experts for MoE) */
    double layer_active;/* one layer as seen by one token (top_k experts) */
    double embedding;   /* token (+ position) embedding */
    double output;      /* separate output projection (0 when tied) */
    double final_norm;
    double total;
} plan_params;

void plan_count_params(const ak_plan_model *m, plan_params *out);

/* Forward FLOPs of one layer for one sequence: GEMMs with weights, the attention core
 * (QK^T and PV), and the output logits (once per model). */
typedef struct plan_layer_flops {
    double gemm, attention, logits;
} plan_layer_flops;

void plan_forward_flops(const ak_plan_model *m, plan_layer_flops *out);
/* ak_plan_flops without its argument checks (the search's inner loop). */
void plan_iteration_flops(const ak_plan_model *m, double sequences, ak_plan_recompute recompute,
                          double recompute_fraction, int flash_attention, double *model_flops,
                          double *hardware_flops);

/* Activation bytes of one layer and one micro-batch (Korthikanti et al. 2022), split
 * into what the attention core keeps (recomputed by selective recompute) and the rest. */
typedef struct plan_layer_act {
    double attention_core, other, layer_input;
} plan_layer_act;

void plan_layer_activations(const ak_plan_model *m, int64_t mbs, int64_t tp, int sp,
                            int flash, plan_layer_act *out);

/* Model-state bytes per parameter held on each device for a ZeRO stage. */
void plan_zero_bytes_per_param(int64_t dp, int zero_stage, int offload_optimizer,
                               double *weights, double *grads, double *optim,
                               double *host);

const char *plan_recompute_name(ak_plan_recompute r);
const char *plan_offload_name(ak_plan_offload o);

/* The divisibility and range rules a plan must satisfy: AK_OK, or AK_ERR_INVALID_ARG
 * naming the rule. Fills the per-group stage counts; the layers of each group's stages
 * too when the cluster has one device type. */
ak_status plan_check_config(const ak_plan_model *m, const ak_plan_cluster *c,
                            const ak_plan_options *o, ak_plan_config *cfg);
/* Same rules as a yes/no, without formatting a message (the search's inner loop). */
int plan_config_valid(const ak_plan_model *m, const ak_plan_cluster *c, const ak_plan_options *o,
                      ak_plan_config *cfg);

/* Evaluates a plan that satisfies plan_check_config (no checks); on a mixed cluster the
 * layers are balanced over the device groups first when cfg leaves them 0. */
void plan_evaluate_unchecked(const ak_plan_model *m, const ak_plan_cluster *c,
                             const ak_plan_options *o, const ak_plan_config *cfg,
                             ak_plan_result *result);

int64_t plan_cluster_devices(const ak_plan_cluster *c);

#endif /* AK_PLAN_INTERNAL_H */
