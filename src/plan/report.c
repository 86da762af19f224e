/* Planner results as JSON: the object `ak plan --json` prints (keys in docs/planner.md). */
#include <cjson/cJSON.h>
#include <stdlib.h>

#include "core/check.h"
#include "plan/plan_internal.h"

static void add_config(cJSON *obj, const ak_plan_config *c) {
    cJSON_AddNumberToObject(obj, "tp", (double)c->tp);
    cJSON_AddNumberToObject(obj, "pp", (double)c->pp);
    cJSON_AddNumberToObject(obj, "dp", (double)c->dp);
    cJSON_AddNumberToObject(obj, "vp", (double)c->vp);
    cJSON_AddNumberToObject(obj, "mbs", (double)c->mbs);
    cJSON_AddBoolToObject(obj, "sequence_parallel", c->sequence_parallel);
    cJSON_AddStringToObject(obj, "recompute", plan_recompute_name(c->recompute));
    cJSON_AddNumberToObject(obj, "recompute_layers", c->recompute == AK_PLAN_RECOMPUTE_HYBRID ? (double)c->recompute_layers : 0.0);
    cJSON_AddNumberToObject(obj, "zero", c->zero_stage);
    cJSON_AddStringToObject(obj, "offload", plan_offload_name(c->offload));
    cJSON *stages = cJSON_AddArrayToObject(obj, "stage_layers");
    for (int i = 0; i < AK_PLAN_MAX_GROUPS && c->group_stages[i] > 0; i++) {
        cJSON *g = cJSON_CreateObject();
        cJSON_AddNumberToObject(g, "stages", (double)c->group_stages[i]);
        cJSON_AddNumberToObject(g, "layers_per_stage", (double)c->group_stage_layers[i]);
        cJSON_AddItemToArray(stages, g);
    }
}

static void add_breakdown(cJSON *obj, const ak_plan_time *t) {
    cJSON *b = cJSON_AddObjectToObject(obj, "breakdown");
    cJSON_AddNumberToObject(b, "gemm_s", t->gemm);
    cJSON_AddNumberToObject(b, "attention_s", t->attention);
    cJSON_AddNumberToObject(b, "elementwise_s", t->elementwise);
    cJSON_AddNumberToObject(b, "tp_comm_s", t->tp_comm);
    cJSON_AddNumberToObject(b, "pp_bubble_s", t->pp_bubble);
    cJSON_AddNumberToObject(b, "pp_p2p_s", t->pp_p2p);
    cJSON_AddNumberToObject(b, "dp_comm_s", t->dp_comm);
    cJSON_AddNumberToObject(b, "zero_comm_s", t->zero_comm);
    cJSON_AddNumberToObject(b, "offload_s", t->offload);
    cJSON_AddNumberToObject(b, "optimizer_s", t->optimizer);
}

static void add_memory(cJSON *obj, const ak_plan_memory *m) {
    cJSON *b = cJSON_AddObjectToObject(obj, "memory");
    cJSON_AddNumberToObject(b, "weights_bytes", m->weights);
    cJSON_AddNumberToObject(b, "gradients_bytes", m->gradients);
    cJSON_AddNumberToObject(b, "optimizer_bytes", m->optimizer);
    cJSON_AddNumberToObject(b, "activations_bytes", m->activations);
    cJSON_AddNumberToObject(b, "buffers_bytes", m->buffers);
    cJSON_AddNumberToObject(b, "host_bytes_per_node", m->host_bytes_per_node);
}

ak_status ak_plan_result_json(const ak_plan_result *r, char **json) {
    if (!r || !json) return AK_FAIL(AK_ERR_INVALID_ARG, "ak_plan_result_json: NULL argument");
    cJSON *obj = cJSON_CreateObject();
    if (!obj) return AK_FAIL(AK_ERR_NO_MEMORY, "plan result JSON");
    cJSON_AddNumberToObject(obj, "time_per_iter_s", r->time_per_iter_s);
    cJSON_AddNumberToObject(obj, "tflops_per_device", r->tflops_per_device);
    cJSON_AddNumberToObject(obj, "mfu", r->mfu);
    cJSON_AddNumberToObject(obj, "hfu", r->hfu);
    cJSON_AddNumberToObject(obj, "memory_bytes_per_device", r->memory.total);
    cJSON_AddNumberToObject(obj, "tokens_per_s", r->tokens_per_s);
    cJSON_AddNumberToObject(obj, "microbatches", (double)r->microbatches);
    cJSON_AddBoolToObject(obj, "fits", r->fits);
    add_config(obj, &r->config);
    add_breakdown(obj, &r->time);
    add_memory(obj, &r->memory);
    *json = cJSON_PrintUnformatted(obj);
    cJSON_Delete(obj);
    return *json ? AK_OK : AK_FAIL(AK_ERR_NO_MEMORY, "plan result JSON");
}
