/* Fuzz: planner descriptions. Input = model JSON, a NUL byte, cluster JSON. Both parsers
 * must accept or reject with a status; accepted pairs go through a forced evaluation and
 * a constrained search, which must return a status with finite figures. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "accelkit/plan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 2);
    memcpy(text, data, size);
    text[size] = text[size + 1] = '\0';
    const char *cluster_text = text + strlen(text) + 1;
    ak_plan_model m;
    ak_plan_cluster c;
    if (ak_plan_model_from_json(text, &m) == AK_OK && ak_plan_cluster_from_json(cluster_text, &c) == AK_OK &&
        c.ngroups == 1 && c.groups[0].nodes * c.groups[0].devices_per_node <= 4096) {
        ak_plan_options o;
        ak_plan_options_default(&o);
        int64_t n = c.groups[0].nodes * c.groups[0].devices_per_node;
        o.global_batch = n;
        ak_plan_config cfg = {.tp = 1, .pp = 1, .dp = n, .vp = 1, .mbs = 1};
        ak_plan_result r;
        if (ak_plan_evaluate(&m, &c, &o, &cfg, &r) == AK_OK && !(r.time_per_iter_s > 0)) abort();
        ak_plan_config want;
        ak_plan_config_free_all(&want);
        want.tp = 1;
        want.pp = 1;
        size_t count = 1;
        if (ak_plan_search(&m, &c, &o, &want, &r, &count, NULL, NULL, NULL) == AK_OK && count == 1 &&
            !(r.time_per_iter_s > 0 && isfinite(r.memory.total)))
            abort();
    }
    free(text);
    return 0;
}
