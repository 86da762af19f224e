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

typedef struct named_number {
    const char *name;
    double value;
} named_number;

static void add_numbers(cJSON *obj, const char *key, const named_number *items, size_t n) {
    cJSON *child = cJSON_AddObjectToObject(obj, key);
    for (size_t i = 0; i < n; i++) cJSON_AddNumberToObject(child, items[i].name, items[i].value);
}

static void add_breakdown(cJSON *obj, const ak_plan_time *t) {
    const named_number items[] = {
        {"gemm_s", t->gemm},           {"attention_s", t->attention}, {"elementwise_s", t->elementwise},
        {"tp_comm_s", t->tp_comm},     {"pp_bubble_s", t->pp_bubble}, {"pp_p2p_s", t->pp_p2p},
        {"dp_comm_s", t->dp_comm},     {"zero_comm_s", t->zero_comm}, {"offload_s", t->offload},
        {"optimizer_s", t->optimizer}};
    add_numbers(obj, "breakdown", items, sizeof(items) / sizeof(items[0]));
}

static void add_memory(cJSON *obj, const ak_plan_memory *m) {
    const named_number items[] = {
        {"weights_bytes", m->weights},         {"gradients_bytes", m->gradients},
        {"optimizer_bytes", m->optimizer},     {"activations_bytes", m->activations},
        {"buffers_bytes", m->buffers},         {"host_bytes_per_node", m->host_bytes_per_node}};
    add_numbers(obj, "memory", items, sizeof(items) / sizeof(items[0]));
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
