/* accelkit training planner: analytic models of compute, memory and communication for
 * transformer training on a GPU cluster, a search over parallel strategies, and MFU.
 *
 * Units: seconds, bytes, FLOP, FLOP/s, bytes/s. Every formula and its source is in
 * docs/planner.md. Descriptions come from JSON (presets embedded from data/plan/). */
#ifndef ACCELKIT_PLAN_H
#define ACCELKIT_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "accelkit/ak.h"

#ifdef __cplusplus
extern "C" {
#endif

#define AK_PLAN_NAME_MAX 64
#define AK_PLAN_MAX_GROUPS 2 /* device types in one (mixed) cluster */

/* A decoder-only transformer. */
typedef struct ak_plan_model {
    char name[AK_PLAN_NAME_MAX];
    int64_t layers, hidden, ffn_hidden, heads, kv_heads, vocab, seq_len;
    int tied_embeddings;     /* output projection shares the input embedding */
    int gated_ffn;           /* SwiGLU-style FFN: 3 matrices instead of 2 */
    int linear_bias;         /* biases on the linear layers (GPT) or not (Llama) */
    int learned_positions;   /* a learned position table (seq_len x hidden) instead of RoPE */
    int layernorm;           /* LayerNorm (weight+bias) rather than RMSNorm (weight) */
    int dropout;             /* dropout after attention and MLP (masks kept for backward) */
    int64_t experts, top_k;  /* MoE FFN when experts > 1: top_k experts per token */
} ak_plan_model;

/* One device type and the nodes built from it. */
typedef struct ak_plan_group {
    char device[AK_PLAN_NAME_MAX];
    int64_t nodes, devices_per_node;
    double peak_flops;       /* dense bf16/fp16 FLOP/s per device */
    double memory_bytes;     /* device memory */
    double memory_bw;        /* device memory bandwidth, bytes/s */
    double gemm_efficiency;  /* fraction of peak the largest GEMMs reach */
    double intra_bw;         /* per-device intra-node (NVLink) bandwidth, bytes/s one way */
    double intra_latency;    /* s per message step inside a node */
    double inter_bw;         /* per-node network bandwidth, bytes/s one way */
    double inter_latency;    /* s per message step between nodes */
    double host_memory_bytes;/* per node, for offload */
    double pcie_bw;          /* per-device host<->device bandwidth, bytes/s */
    double host_optimizer_rate; /* parameters/s one node's CPUs update with Adam */
    /* Terms of the software on the device, with GPU defaults; a CPU cluster description
     * (ak sysinfo --cluster-json) measures them: */
    double value_bytes;      /* bytes of a weight, gradient or activation value (2: bf16) */
    double optimizer_bytes;  /* optimizer state bytes per parameter (12: Adam + fp32 master) */
    double reserved_bytes;   /* device memory never available to training */
    double kernel_overhead;  /* s of launch/dispatch cost per kernel */
    double elementwise_efficiency; /* fraction of memory_bw elementwise kernels reach */
} ak_plan_group;

typedef struct ak_plan_cluster {
    char name[AK_PLAN_NAME_MAX];
    int ngroups;
    ak_plan_group groups[AK_PLAN_MAX_GROUPS];
} ak_plan_cluster;

typedef enum ak_plan_recompute {
    AK_PLAN_RECOMPUTE_ANY = -1,      /* in a search constraint: searched */
    AK_PLAN_RECOMPUTE_NONE = 0,
    AK_PLAN_RECOMPUTE_SELECTIVE = 1, /* attention core only (Korthikanti et al. 2022) */
    AK_PLAN_RECOMPUTE_FULL = 2,      /* every layer from its input */
    AK_PLAN_RECOMPUTE_HYBRID = 3,    /* full for the first k layers of a stage, selective after */
} ak_plan_recompute;

typedef enum ak_plan_offload {
    AK_PLAN_OFFLOAD_ANY = -1,      /* in a search constraint: searched */
    AK_PLAN_OFFLOAD_NONE = 0,
    AK_PLAN_OFFLOAD_OPTIMIZER = 1, /* optimizer states + update on the host (ZeRO-Offload) */
    AK_PLAN_OFFLOAD_PARAMS = 2,    /* also the parameters, streamed per layer */
} ak_plan_offload;

/* One parallel configuration. In a constraint, a field < 0 means "search it". */
typedef struct ak_plan_config {
    int64_t tp, pp, dp, vp, mbs;
    int sequence_parallel;
    ak_plan_recompute recompute;
    int64_t recompute_layers; /* hybrid: k layers of each stage fully recomputed */
    int zero_stage;           /* 0..3 */
    ak_plan_offload offload;
    /* filled by evaluation: pipeline stages per device group and their layer counts
     * (one group: pp stages of layers/pp) */
    int64_t group_stages[AK_PLAN_MAX_GROUPS];
    int64_t group_stage_layers[AK_PLAN_MAX_GROUPS];
} ak_plan_config;

/* Software settings that are not part of the searched plan. */
typedef struct ak_plan_options {
    int64_t global_batch;   /* sequences per iteration */
    int flash_attention;    /* fused attention: no s x s score tensor in memory */
    int tp_overlap;         /* TP communication overlapped with GEMMs (needs SP) */
    int top;                /* how many plans a search returns (default 10) */
} ak_plan_options;

/* Seconds per iteration by cause; total is time_per_iter_s. */
typedef struct ak_plan_time {
    double gemm, attention, elementwise; /* compute of all micro-batches on the slowest stage */
    double tp_comm, pp_bubble, pp_p2p, dp_comm, zero_comm, offload, optimizer, total;
} ak_plan_time;

/* Bytes per device on the most loaded stage. */
typedef struct ak_plan_memory {
    double weights, gradients, optimizer, activations, buffers, total;
    double host_bytes_per_node; /* offloaded states */
} ak_plan_memory;

typedef struct ak_plan_result {
    ak_plan_config config;
    double time_per_iter_s, tokens_per_s;
    double tflops_per_device;   /* hardware FLOP/s per device (recompute counted), /1e12 */
    double mfu, hfu;            /* model / hardware FLOP utilization of peak */
    double model_flops, hardware_flops; /* per iteration, whole cluster */
    ak_plan_time time;
    ak_plan_memory memory;
    int fits;                   /* memory and host memory within limits */
    int64_t microbatches;       /* per pipeline per iteration */
} ak_plan_result;

typedef struct ak_plan_search_stats {
    uint64_t evaluated;         /* configurations whose cost was computed */
    uint64_t feasible;          /* of those, within memory */
    uint64_t kept;              /* feasible and not dominated (faster or smaller) */
    double seconds;
    ak_plan_result least_memory;/* the evaluated plan needing the least memory (fits or not) */
} ak_plan_search_stats;

/* Called now and then during a search with the fraction done (0..1). */
typedef void (*ak_plan_progress_fn)(double fraction, void *user);

/* ---- descriptions ------------------------------------------------------------------ */
/* Presets by name (`ak plan --list`): kind "models" or "clusters". */
AK_API ak_status ak_plan_preset_name(const char *kind, size_t index, const char **name);
AK_API ak_status ak_plan_model_preset(const char *name, ak_plan_model *out);
AK_API ak_status ak_plan_cluster_preset(const char *name, ak_plan_cluster *out);
/* JSON text (the format of data/plan/); unknown keys and bad values are errors. */
AK_API ak_status ak_plan_model_from_json(const char *json, ak_plan_model *out);
AK_API ak_status ak_plan_cluster_from_json(const char *json, ak_plan_cluster *out);
/* A preset name, or else a path to a JSON file. */
AK_API ak_status ak_plan_model_load(const char *preset_or_path, ak_plan_model *out);
AK_API ak_status ak_plan_cluster_load(const char *preset_or_path, ak_plan_cluster *out);
AK_API ak_status ak_plan_model_check(const ak_plan_model *model);
AK_API ak_status ak_plan_cluster_check(const ak_plan_cluster *cluster);
AK_API void ak_plan_options_default(ak_plan_options *options);
/* A constraint with every field free. */
AK_API void ak_plan_config_free_all(ak_plan_config *config);

/* ---- model arithmetic -------------------------------------------------------------- */
AK_API ak_status ak_plan_param_count(const ak_plan_model *model, double *params);
/* FLOPs of one iteration over `sequences` sequences: model (fwd + bwd) and hardware
 * (adds the recomputed forward work of `recompute`; hybrid/selective counted exactly). */
AK_API ak_status ak_plan_flops(const ak_plan_model *model, double sequences,
                               ak_plan_recompute recompute, double recompute_fraction,
                               int flash_attention, double *model_flops, double *hardware_flops);
/* Korthikanti et al. 2022: activation bytes of one transformer layer for one micro-batch. */
AK_API ak_status ak_plan_layer_activation_bytes(const ak_plan_model *model, int64_t mbs,
                                                int64_t tp, int sequence_parallel,
                                                ak_plan_recompute recompute,
                                                int flash_attention, double *bytes);
/* ZeRO (Rajbhandari et al. 2020) model-state bytes per device for `params` parameters
 * with mixed-precision Adam (2 + 2 + 12 bytes per parameter). */
AK_API ak_status ak_plan_zero_model_state_bytes(double params, int64_t dp, int zero_stage,
                                                double *bytes);

/* ---- evaluation and search --------------------------------------------------------- */
/* Cost of one fully specified plan (no free fields); result->fits tells memory. */
AK_API ak_status ak_plan_evaluate(const ak_plan_model *model, const ak_plan_cluster *cluster,
                                  const ak_plan_options *options, const ak_plan_config *config,
                                  ak_plan_result *result);
/* Enumerates every plan allowed by `constraint` (free fields < 0), keeps those that fit,
 * and returns up to *count (in: capacity) fastest in `best`, fastest first. */
AK_API ak_status ak_plan_search(const ak_plan_model *model, const ak_plan_cluster *cluster,
                                const ak_plan_options *options, const ak_plan_config *constraint,
                                ak_plan_result *best, size_t *count, ak_plan_search_stats *stats,
                                ak_plan_progress_fn progress, void *progress_user);

/* MFU / HFU of a measured run: tokens per second over `devices` devices of group 0. */
AK_API ak_status ak_plan_mfu(const ak_plan_model *model, const ak_plan_cluster *cluster,
                             int64_t devices, double tokens_per_s, ak_plan_recompute recompute,
                             int flash_attention, double *mfu, double *hfu);

/* Writes a result as one JSON object (keys of docs/planner.md) into a malloc'd string. */
AK_API ak_status ak_plan_result_json(const ak_plan_result *result, char **json);

#ifdef __cplusplus
}
#endif

#endif /* ACCELKIT_PLAN_H */
